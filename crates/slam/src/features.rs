//! ORB features through OpenCV, spread over the image, with their depth.

use opencv::core::{CV_8UC1, KeyPoint, Mat, Scalar, Vector};
use opencv::features2d::{ORB, ORB_ScoreType};
use opencv::prelude::*;

use gst_core::{DepthImage, RgbImage};

use crate::SlamError;

/// A 256-bit ORB descriptor.
pub type Descriptor = [u8; 32];

/// Hamming distance of two descriptors.
#[inline]
pub fn hamming(a: &Descriptor, b: &Descriptor) -> u32 {
    let mut distance = 0;
    for k in 0..4 {
        let x = u64::from_ne_bytes(a[8 * k..8 * k + 8].try_into().unwrap_or([0; 8]));
        let y = u64::from_ne_bytes(b[8 * k..8 * k + 8].try_into().unwrap_or([0; 8]));
        distance += (x ^ y).count_ones();
    }
    distance
}

/// One keypoint: pixel position, pyramid level, and depth (metres, `None` where the depth image has none).
#[derive(Clone, Copy, Debug)]
pub struct Keypoint {
    pub u: f32,
    pub v: f32,
    pub octave: u8,
    pub depth_m: Option<f32>,
}

/// The features of one image.
#[derive(Clone, Debug, Default)]
pub struct Features {
    pub keypoints: Vec<Keypoint>,
    pub descriptors: Vec<Descriptor>,
    /// Grid index for radius search, cells in row order: the features of cell `c` are
    /// `cell_features[cell_start[c]..cell_start[c + 1]]`, ascending. (One flat list: a vector per cell cost a
    /// keyframe 43 KB, more than its descriptors.)
    cell_start: Vec<u32>,
    cell_features: Vec<u32>,
    grid_cols: usize,
    grid_rows: usize,
}

/// Side of a grid cell of the radius-search index, pixels.
const GRID_CELL_PX: f32 = 16.0;

impl Features {
    pub fn len(&self) -> usize {
        self.keypoints.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keypoints.is_empty()
    }

    /// Features from stored keypoints and descriptors (one each, same order), indexed for radius search in
    /// a `width` x `height` image.
    pub fn from_parts(
        keypoints: Vec<Keypoint>,
        descriptors: Vec<Descriptor>,
        width: u32,
        height: u32,
    ) -> Self {
        let mut features = Features { keypoints, descriptors, ..Features::default() };
        features.build_grid(width.max(1), height.max(1));
        features
    }

    fn build_grid(&mut self, width: u32, height: u32) {
        self.grid_cols = (width as f32 / GRID_CELL_PX).ceil() as usize;
        self.grid_rows = (height as f32 / GRID_CELL_PX).ceil() as usize;
        let cells: Vec<usize> = self
            .keypoints
            .iter()
            .map(|keypoint| {
                let cx = ((keypoint.u / GRID_CELL_PX) as usize).min(self.grid_cols - 1);
                let cy = ((keypoint.v / GRID_CELL_PX) as usize).min(self.grid_rows - 1);
                cy * self.grid_cols + cx
            })
            .collect();
        // A counting sort, stable: each cell's features stay in ascending order.
        let mut start = vec![0u32; self.grid_cols * self.grid_rows + 1];
        for &c in &cells {
            start[c + 1] += 1;
        }
        for c in 1..start.len() {
            start[c] += start[c - 1];
        }
        let mut next = start.clone();
        let mut features = vec![0u32; cells.len()];
        for (k, &c) in cells.iter().enumerate() {
            features[next[c] as usize] = k as u32;
            next[c] += 1;
        }
        self.cell_start = start;
        self.cell_features = features;
    }

    /// Indices of the features within `radius` pixels of (u, v).
    pub fn within(&self, u: f32, v: f32, radius: f32, out: &mut Vec<u32>) {
        out.clear();
        if self.cell_start.is_empty() {
            return;
        }
        let cell = |x: f32, n: usize| ((x / GRID_CELL_PX).floor().max(0.0) as usize).min(n - 1);
        let (x0, x1) = (cell(u - radius, self.grid_cols), cell(u + radius, self.grid_cols));
        let (y0, y1) = (cell(v - radius, self.grid_rows), cell(v + radius, self.grid_rows));
        let r2 = radius * radius;
        for cy in y0..=y1 {
            for cx in x0..=x1 {
                let c = cy * self.grid_cols + cx;
                for &k in &self.cell_features[self.cell_start[c] as usize..self.cell_start[c + 1] as usize] {
                    let p = &self.keypoints[k as usize];
                    let (du, dv) = (p.u - u, p.v - v);
                    if du * du + dv * dv <= r2 {
                        out.push(k);
                    }
                }
            }
        }
    }
}

/// Settings of the ORB extractor.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OrbConfig {
    /// Features kept per image after spreading them over the grid.
    pub features: usize,
    /// Pyramid scale factor between levels.
    pub scale_factor: f32,
    pub levels: u8,
    /// FAST threshold.
    pub fast_threshold: u8,
    /// Depth range in which a keypoint's depth is trusted, metres.
    pub min_depth_m: f32,
    pub max_depth_m: f32,
}

impl Default for OrbConfig {
    fn default() -> Self {
        Self {
            features: 1000,
            scale_factor: 1.2,
            levels: 8,
            fast_threshold: 12,
            min_depth_m: 0.2,
            max_depth_m: 8.0,
        }
    }
}

/// ORB through OpenCV: detects 1.5 times the wanted number, then keeps the strongest per grid cell so that
/// features cover the whole image (OpenCV's ORB alone clusters them on the most textured objects).
pub struct OrbExtractor {
    orb: opencv::core::Ptr<ORB>,
    config: OrbConfig,
    gray: Mat,
}

impl std::fmt::Debug for OrbExtractor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrbExtractor").field("config", &self.config).finish_non_exhaustive()
    }
}

/// Cells of the spreading grid, across and down.
const SPREAD_GRID: (usize, usize) = (16, 12);

impl OrbExtractor {
    pub fn new(config: &OrbConfig) -> Result<Self, SlamError> {
        if config.features < 50 || config.levels == 0 || !(config.scale_factor > 1.0) {
            return Err(SlamError::InvalidInput(format!("bad ORB settings: {config:?}")));
        }
        let orb = ORB::create(
            (config.features * 3 / 2) as i32,
            config.scale_factor,
            i32::from(config.levels),
            19,
            0,
            2,
            ORB_ScoreType::HARRIS_SCORE,
            31,
            i32::from(config.fast_threshold),
        )?;
        Ok(Self { orb, config: config.clone(), gray: Mat::default() })
    }

    pub fn config(&self) -> &OrbConfig {
        &self.config
    }

    /// Features of a colour image, with depth from `depth` where given (same size).
    pub fn extract(&mut self, rgb: &RgbImage, depth: Option<&DepthImage>) -> Result<Features, SlamError> {
        let (width, height) = (rgb.width(), rgb.height());
        if self.gray.rows() != height as i32 || self.gray.cols() != width as i32 {
            self.gray =
                Mat::new_rows_cols_with_default(height as i32, width as i32, CV_8UC1, Scalar::all(0.0))?;
        }
        let gray = self.gray.data_bytes_mut()?;
        for (g, p) in gray.iter_mut().zip(rgb.data()) {
            *g = ((77 * u32::from(p[0]) + 150 * u32::from(p[1]) + 29 * u32::from(p[2]) + 128) >> 8) as u8;
        }
        self.detect(width, height, &Mat::default(), depth)
    }

    /// Features of a grey-level image (`width` x `height`, row-major), detected only where `mask` is
    /// non-zero when given (same size). No depth.
    pub fn extract_gray(
        &mut self,
        gray: &[u8],
        width: u32,
        height: u32,
        mask: Option<&[u8]>,
    ) -> Result<Features, SlamError> {
        let pixels = width as usize * height as usize;
        if gray.len() != pixels || mask.is_some_and(|m| m.len() != pixels) {
            return Err(SlamError::InvalidInput(format!(
                "a {width}x{height} grey-level image needs {pixels} pixels (and mask values), got {} ({:?})",
                gray.len(),
                mask.map(<[u8]>::len)
            )));
        }
        if self.gray.rows() != height as i32 || self.gray.cols() != width as i32 {
            self.gray =
                Mat::new_rows_cols_with_default(height as i32, width as i32, CV_8UC1, Scalar::all(0.0))?;
        }
        self.gray.data_bytes_mut()?.copy_from_slice(gray);
        let mask = match mask {
            Some(mask) => Mat::new_rows_cols_with_data(height as i32, width as i32, mask)?.try_clone()?,
            None => Mat::default(),
        };
        self.detect(width, height, &mask, None)
    }

    /// ORB on `self.gray` (`width` x `height`), spread over the grid, with depth from `depth` where given.
    fn detect(
        &mut self,
        width: u32,
        height: u32,
        mask: &Mat,
        depth: Option<&DepthImage>,
    ) -> Result<Features, SlamError> {
        let mut keypoints = Vector::<KeyPoint>::new();
        let mut descriptors = Mat::default();
        self.orb.detect_and_compute(&self.gray, mask, &mut keypoints, &mut descriptors, false)?;
        let bytes = if descriptors.empty() { &[][..] } else { descriptors.data_bytes()? };

        // Keep the strongest per cell, up to an even share, then fill with the strongest of the rest.
        let (gx, gy) = SPREAD_GRID;
        let mut order: Vec<usize> = (0..keypoints.len()).collect();
        let responses: Vec<f32> = keypoints.iter().map(|k| k.response()).collect();
        order.sort_by(|&a, &b| responses[b].total_cmp(&responses[a]).then(a.cmp(&b)));
        let share = self.config.features.div_ceil(gx * gy).max(1);
        let mut per_cell = vec![0usize; gx * gy];
        let mut chosen = Vec::with_capacity(self.config.features);
        let mut rest = Vec::new();
        for &k in &order {
            let Ok(kp) = keypoints.get(k) else { continue };
            let pt = kp.pt();
            let cx = ((pt.x / width as f32 * gx as f32) as usize).min(gx - 1);
            let cy = ((pt.y / height as f32 * gy as f32) as usize).min(gy - 1);
            if per_cell[cy * gx + cx] < share {
                per_cell[cy * gx + cx] += 1;
                chosen.push(k);
            } else {
                rest.push(k);
            }
        }
        for k in rest {
            if chosen.len() >= self.config.features {
                break;
            }
            chosen.push(k);
        }
        chosen.truncate(self.config.features);
        chosen.sort_unstable();

        let mut features = Features::default();
        for k in chosen {
            let Ok(kp) = keypoints.get(k) else { continue };
            let Some(row) = bytes.get(32 * k..32 * k + 32) else { continue };
            let pt = kp.pt();
            let depth_m = depth.and_then(|d| {
                let z = *d.get(pt.x.round() as u32, pt.y.round() as u32)?;
                (z.is_finite() && z >= self.config.min_depth_m && z <= self.config.max_depth_m).then_some(z)
            });
            let mut descriptor = [0u8; 32];
            descriptor.copy_from_slice(row);
            features.keypoints.push(Keypoint {
                u: pt.x,
                v: pt.y,
                octave: kp.octave().clamp(0, 255) as u8,
                depth_m,
            });
            features.descriptors.push(descriptor);
        }
        features.build_grid(width, height);
        Ok(features)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn radius_search_finds_exactly_the_features_within() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        // Keypoints anywhere in a 100 x 70 image and a little outside it (ORB's border sub-pixel positions).
        let keypoints: Vec<Keypoint> = (0..400)
            .map(|_| Keypoint {
                u: rng.gen_range(-2.0..102.0),
                v: rng.gen_range(-2.0..72.0),
                octave: 0,
                depth_m: None,
            })
            .collect();
        let features = Features::from_parts(keypoints.clone(), vec![[0; 32]; keypoints.len()], 100, 70);
        let mut found = Vec::new();
        for _ in 0..200 {
            let (u, v, r) =
                (rng.gen_range(-10.0..110.0), rng.gen_range(-10.0..80.0), rng.gen_range(0.5..30.0));
            features.within(u, v, r, &mut found);
            let expected: Vec<u32> = (0..keypoints.len() as u32)
                .filter(|&k| {
                    let p = &keypoints[k as usize];
                    (p.u - u).powi(2) + (p.v - v).powi(2) <= r * r
                })
                .collect();
            // Found cell by cell; compared as sets.
            let mut sorted = found.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, expected, "at ({u}, {v}) radius {r}");
        }
        assert!(Features::default().is_empty());
        Features::default().within(0.0, 0.0, 5.0, &mut found);
        assert!(found.is_empty());
    }
}
