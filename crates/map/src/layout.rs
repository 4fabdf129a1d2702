//! Layout place recognition: where in the occupancy grid could an RGB image (no depth) have been taken?
//!
//! A current view shows, in every image column, where the floor ends: the foot of the first wall, door frame
//! or piece of furniture along that bearing. With the camera's height and pitch that boundary is a range
//! scan, like a laser's, and the scan can be matched against the map's occupancy grid. It sees geometry, not
//! wallpaper, so the repeated textures that mislead feature matching do not mislead it; what it cannot see
//! is the floor nearer than the image's bottom row (0.9–2.2 m for GST's cameras), so a view facing a near
//! wall says little. (docs/studies/relocalisation.md measured the idea before it was built.)
//!
//! 1. **Floor model** ([`FloorModelBuilder`]): a per-scene classifier of floor pixels, self-supervised from
//!    the exploration's own depth: a pixel whose depth point lies within [`FLOOR_BAND_M`] of the map's floor
//!    is floor, one well above it is not. k-nearest neighbours (kiddo) on quarter-resolution pixels described
//!    by their Lab colour at three blur scales, local contrast, gradient and image row.
//! 2. **Scan** ([`floor_boundary`]): per column, going up from the bottom row, the first run of non-floor
//!    pixels. A column that is not floor at the bottom row bounds the range from above (the obstacle stands
//!    in the blind zone); one that is floor to the top bounds it from below.
//! 3. **Index** ([`LayoutIndex`]): free cells of the grid with some clearance on a 10 cm stride, and from
//!    each the range to the first occupied cell along every whole-degree bearing (unknown cells let the
//!    ray through: what the exploration did not see is not evidence of a wall).
//! 4. **Search** ([`LayoutIndex::hypotheses`]): every position, heading (1°) and camera height, for the pitch
//!    read from the image's vertical vanishing point ([`crate::compass::read_pitch`]; else three pitches at 2°
//!    headings); the score is the mean truncated difference of log ranges; the best distinct poses are
//!    returned.
//!
//! The poses are hypotheses: a correct best pose is within a few decimetres and degrees, a wrong one is
//! usually metres away, so the caller verifies them (SLAM's relocaliser refines and checks them
//! photometrically against its keyframes).

use std::num::NonZeroUsize;

use kiddo::ImmutableKdTree;
use kiddo::dist::SquaredEuclidean;
use nalgebra::{Point2, Vector3};
use rayon::prelude::*;

use gst_core::{DepthImage, PinholeCamera, Pose3, RgbImage};

use crate::compass::read_pitch;
use crate::grid::distance_transform;
use crate::occupancy::{CellState, OccupancyGrid};

/// Image pixels per side of a floor-model pixel.
pub const FLOOR_PIXEL: usize = 4;
/// Features of a floor-model pixel.
const FEATURES: usize = 12;
/// A depth point within this height of the floor is floor, metres.
pub const FLOOR_BAND_M: f64 = 0.03;
/// A depth point at least this high above the floor is not floor, metres.
const NOT_FLOOR_ABOVE_M: f64 = 0.08;
/// Depth beyond this is too noisy to label a training pixel, metres.
const TRAINING_RANGE_M: f64 = 8.0;
/// Training pixels taken per frame: every `TRAINING_STRIDE`-th floor-model pixel in each direction.
const TRAINING_STRIDE: usize = 3;
/// Most training pixels kept (a regular thinning beyond).
const MAX_TRAINING_SAMPLES: usize = 60_000;
/// Fewest training pixels of each class for a floor model.
const MIN_CLASS_SAMPLES: usize = 200;
/// Neighbours voting on a pixel.
const NEIGHBOURS: NonZeroUsize = NonZeroUsize::MIN.saturating_add(14);
/// Weight of the image row (0 at the top, 1 at the bottom) among the features, in Lab units.
const ROW_WEIGHT: f32 = 40.0;
/// Box blur radii of the colour features, floor-model pixels.
const BLUR_RADII: [usize; 2] = [2, 6];
/// Non-floor pixels in a row that end the floor going up a column.
const BOUNDARY_RUN: usize = 3;

/// Bearings of the index's range tables (whole degrees).
const BEARINGS: usize = 360;
/// Ranges are capped here, metres.
const MAX_RANGE_M: f64 = 8.0;
/// Truncation of a column's log-range difference.
const TRUNCATION: f32 = 0.3;

/// Settings of the layout search.
#[derive(Clone, Debug, PartialEq)]
pub struct LayoutConfig {
    /// Stride of the candidate positions, metres (default 0.1).
    pub position_step_m: f64,
    /// Least distance of a candidate position from an occupied cell, metres (default 0.15).
    pub clearance_m: f64,
    /// Image columns read as a scan (default 64).
    pub columns: usize,
    /// Camera heights above the floor tried, metres (default 1.25, 1.4, 1.55: a handheld or head-height
    /// camera; the map answerer replaces them with the exploration's own, `gst_baseline::priors`).
    pub heights_m: Vec<f64>,
    /// Pitches tried when the compass gives none, degrees, positive up (default −13, −8, −3; the map answerer
    /// replaces them with the exploration's own).
    pub fallback_pitches_deg: Vec<f64>,
    /// Fewest columns with an exact boundary for a search (default 8).
    pub min_exact_columns: usize,
    /// Distinct poses returned are at least this far apart, metres (default 0.3).
    pub separation_m: f64,
}

impl Default for LayoutConfig {
    fn default() -> Self {
        Self {
            position_step_m: 0.1,
            clearance_m: 0.15,
            columns: 64,
            heights_m: vec![1.25, 1.4, 1.55],
            fallback_pitches_deg: vec![-13.0, -8.0, -3.0],
            min_exact_columns: 8,
            separation_m: 0.3,
        }
    }
}

/// Per-pixel features of an image at floor-model resolution ([`FLOOR_PIXEL`]).
#[derive(Clone, Debug)]
pub struct PixelFeatures {
    pub width: usize,
    pub height: usize,
    values: Vec<[f32; FEATURES]>,
}

impl PixelFeatures {
    /// The features of `image`'s floor-model pixels (an image smaller than one such pixel has none).
    pub fn new(image: &RgbImage) -> Self {
        let (w, h) = (image.width() as usize / FLOOR_PIXEL, image.height() as usize / FLOOR_PIXEL);
        let full_width = image.width() as usize;
        let data = image.data();
        let n = w * h;
        let mut lab = [vec![0.0f32; n], vec![0.0f32; n], vec![0.0f32; n]];
        for v in 0..h {
            for u in 0..w {
                let mut linear = [0.0f32; 3];
                for dy in 0..FLOOR_PIXEL {
                    let row = (v * FLOOR_PIXEL + dy) * full_width;
                    for dx in 0..FLOOR_PIXEL {
                        let p = data[row + u * FLOOR_PIXEL + dx];
                        for c in 0..3 {
                            linear[c] += srgb_to_linear(p[c]);
                        }
                    }
                }
                let scale = 1.0 / (FLOOR_PIXEL * FLOOR_PIXEL) as f32;
                let [l, a, b] = linear_to_lab([linear[0] * scale, linear[1] * scale, linear[2] * scale]);
                let i = v * w + u;
                lab[0][i] = l;
                lab[1][i] = a;
                lab[2][i] = b;
            }
        }
        let blurred: Vec<[Vec<f32>; 3]> = BLUR_RADII
            .iter()
            .map(|&r| [box_blur(&lab[0], w, h, r), box_blur(&lab[1], w, h, r), box_blur(&lab[2], w, h, r)])
            .collect();
        let squares: Vec<f32> = lab[0].iter().map(|l| l * l).collect();
        let mean_l = &blurred[0][0];
        let mean_l2 = box_blur(&squares, w, h, BLUR_RADII[0]);
        let mut values = vec![[0.0f32; FEATURES]; n];
        for v in 0..h {
            for u in 0..w {
                let i = v * w + u;
                let at = |x: usize, y: usize| lab[0][y * w + x];
                let gx = at((u + 1).min(w - 1), v) - at(u.saturating_sub(1), v);
                let gy = at(u, (v + 1).min(h - 1)) - at(u, v.saturating_sub(1));
                let f = &mut values[i];
                for c in 0..3 {
                    f[c] = lab[c][i];
                    f[3 + c] = blurred[0][c][i];
                    f[6 + c] = blurred[1][c][i];
                }
                f[9] = (mean_l2[i] - mean_l[i] * mean_l[i]).max(0.0).sqrt();
                f[10] = 0.5 * gx.hypot(gy);
                f[11] = ROW_WEIGHT * (v as f32 + 0.5) / h as f32;
            }
        }
        Self { width: w, height: h, values }
    }

    fn at(&self, u: usize, v: usize) -> &[f32; FEATURES] {
        &self.values[v * self.width + u]
    }
}

/// sRGB 0–255 to linear 0–1 (a table: this runs for every pixel of every frame the floor model sees).
fn srgb_to_linear(value: u8) -> f32 {
    static TABLE: std::sync::OnceLock<[f32; 256]> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        std::array::from_fn(|i| {
            let c = i as f32 / 255.0;
            if c <= 0.04045 { c / 12.92 } else { ((c + 0.055) / 1.055).powf(2.4) }
        })
    })[usize::from(value)]
}

/// Linear sRGB to CIE Lab (D65).
fn linear_to_lab([r, g, b]: [f32; 3]) -> [f32; 3] {
    let x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.950_47;
    let y = 0.2126 * r + 0.7152 * g + 0.0722 * b;
    let z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.088_83;
    let f = |t: f32| if t > 0.008_856 { t.cbrt() } else { 7.787 * t + 16.0 / 116.0 };
    let (fx, fy, fz) = (f(x), f(y), f(z));
    [116.0 * fy - 16.0, 500.0 * (fx - fy), 200.0 * (fy - fz)]
}

/// Mean over a (2r+1)² window, clamped at the borders (a summed-area table).
fn box_blur(values: &[f32], w: usize, h: usize, r: usize) -> Vec<f32> {
    let mut sums = vec![0.0f64; (w + 1) * (h + 1)];
    for y in 0..h {
        let mut row = 0.0f64;
        for x in 0..w {
            row += f64::from(values[y * w + x]);
            sums[(y + 1) * (w + 1) + x + 1] = sums[y * (w + 1) + x + 1] + row;
        }
    }
    let mut out = vec![0.0f32; w * h];
    for y in 0..h {
        let (y0, y1) = (y.saturating_sub(r), (y + r + 1).min(h));
        for x in 0..w {
            let (x0, x1) = (x.saturating_sub(r), (x + r + 1).min(w));
            let s = sums[y1 * (w + 1) + x1] - sums[y0 * (w + 1) + x1] - sums[y1 * (w + 1) + x0]
                + sums[y0 * (w + 1) + x0];
            out[y * w + x] = (s / ((y1 - y0) * (x1 - x0)) as f64) as f32;
        }
    }
    out
}

/// Collects floor and non-floor pixels of posed RGB-D frames for a [`FloorModel`].
#[derive(Debug)]
pub struct FloorModelBuilder {
    camera: PinholeCamera,
    floor_z_m: f64,
    samples: Vec<[f32; FEATURES]>,
    labels: Vec<bool>,
    frames: usize,
}

impl FloorModelBuilder {
    /// `floor_z_m`: the floor's height in the map frame ([`OccupancyGrid::floor_z_m`]).
    pub fn new(camera: &PinholeCamera, floor_z_m: f64) -> Self {
        Self { camera: *camera, floor_z_m, samples: Vec::new(), labels: Vec::new(), frames: 0 }
    }

    /// Adds the labelled pixels of one frame (`map_from_camera`: its pose in the map frame). Frames whose
    /// colour or depth is not the camera's size are skipped.
    pub fn add_frame(&mut self, rgb: &RgbImage, depth: &DepthImage, map_from_camera: &Pose3) {
        let size = (self.camera.width, self.camera.height);
        if (rgb.width(), rgb.height()) != size || (depth.width(), depth.height()) != size {
            return;
        }
        let features = PixelFeatures::new(rgb);
        let offset = self.frames % TRAINING_STRIDE;
        self.frames += 1;
        let half = (FLOOR_PIXEL / 2) as u32;
        for v in (offset..features.height).step_by(TRAINING_STRIDE) {
            for u in (offset..features.width).step_by(TRAINING_STRIDE) {
                let (x, y) = ((u * FLOOR_PIXEL) as u32 + half, (v * FLOOR_PIXEL) as u32 + half);
                let Some(&d) = depth.get(x, y) else { continue };
                let d = f64::from(d);
                if !(d > 0.0 && d <= TRAINING_RANGE_M) {
                    continue;
                }
                let point = self.camera.unproject(&Point2::new(f64::from(x), f64::from(y)), d);
                let z = map_from_camera.transform_point(&point).z - self.floor_z_m;
                let label = if z.abs() <= FLOOR_BAND_M {
                    true
                } else if z >= NOT_FLOOR_ABOVE_M {
                    false
                } else {
                    continue;
                };
                self.samples.push(*features.at(u, v));
                self.labels.push(label);
            }
        }
    }

    /// The model, or `None` when either class has fewer than a few hundred pixels.
    pub fn finish(self) -> Option<FloorModel> {
        let floor = self.labels.iter().filter(|&&l| l).count();
        if floor < MIN_CLASS_SAMPLES || self.labels.len() - floor < MIN_CLASS_SAMPLES {
            tracing::warn!(
                floor,
                other = self.labels.len() - floor,
                "too few labelled pixels for a floor model: no layout place recognition"
            );
            return None;
        }
        let step = self.samples.len().div_ceil(MAX_TRAINING_SAMPLES);
        let samples: Vec<[f32; FEATURES]> = self.samples.iter().step_by(step).copied().collect();
        let labels: Vec<bool> = self.labels.iter().step_by(step).copied().collect();
        let tree = ImmutableKdTree::new_from_slice(&samples).ok()?;
        Some(FloorModel { tree, labels, frames: self.frames })
    }
}

/// A per-scene floor classifier ([`FloorModelBuilder`]).
#[derive(Debug)]
pub struct FloorModel {
    tree: ImmutableKdTree<f32, FEATURES>,
    labels: Vec<bool>,
    /// Frames it was trained on.
    pub frames: usize,
}

impl FloorModel {
    /// Labelled pixels it holds.
    pub fn samples(&self) -> usize {
        self.labels.len()
    }

    /// Whether floor-model pixel `(u, v)` of `features` is floor (most of its nearest training pixels are).
    pub fn is_floor(&self, features: &PixelFeatures, u: usize, v: usize) -> bool {
        let near =
            self.tree.query(features.at(u, v)).nearest_n::<SquaredEuclidean<f32>>(NEIGHBOURS).execute();
        let floor = near.iter().filter(|n| self.labels[n.item as usize]).count();
        2 * floor > near.len()
    }
}

/// Where the floor ends in one image column.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ColumnBoundary {
    /// The column, image pixels.
    pub x_px: f64,
    /// The boundary's image row (between the last floor pixel and the first non-floor one), image pixels.
    pub row_px: f64,
    pub kind: BoundaryKind,
}

/// What a column's boundary says of the range along its bearing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoundaryKind {
    /// The floor ends at this row.
    Exact,
    /// Not floor at the bottom row: the obstacle is nearer than the floor the bottom row sees.
    Nearer,
    /// Floor up to this row and no boundary below it: the obstacle is farther.
    Farther,
}

/// The floor boundary of `columns` evenly spaced image columns ([`BOUNDARY_RUN`] non-floor pixels going up
/// from the bottom end the floor), median-filtered over neighbouring exact columns.
pub fn floor_boundary(model: &FloorModel, features: &PixelFeatures, columns: usize) -> Vec<ColumnBoundary> {
    let (w, h) = (features.width, features.height);
    if w == 0 || h < BOUNDARY_RUN || columns == 0 {
        return Vec::new();
    }
    let pixel = FLOOR_PIXEL as f64;
    let mut out: Vec<ColumnBoundary> = (0..columns)
        .into_par_iter()
        .map(|c| {
            let u = ((c as f64 + 0.5) * w as f64 / columns as f64) as usize;
            let x_px = (u as f64 + 0.5) * pixel - 0.5;
            let mut run = 0;
            for v in (0..h).rev() {
                if model.is_floor(features, u, v) {
                    run = 0;
                    continue;
                }
                run += 1;
                if run == BOUNDARY_RUN {
                    let lowest = v + BOUNDARY_RUN - 1;
                    let row_px = (lowest + 1) as f64 * pixel - 0.5;
                    let kind = if lowest == h - 1 { BoundaryKind::Nearer } else { BoundaryKind::Exact };
                    return ColumnBoundary { x_px, row_px, kind };
                }
            }
            // Floor (or short non-floor runs) to the top.
            ColumnBoundary { x_px, row_px: -0.5, kind: BoundaryKind::Farther }
        })
        .collect();
    let rows: Vec<Option<f64>> =
        out.iter().map(|b| (b.kind == BoundaryKind::Exact).then_some(b.row_px)).collect();
    for c in 1..columns.saturating_sub(1) {
        if let (Some(a), Some(b), Some(d)) = (rows[c - 1], rows[c], rows[c + 1]) {
            let mut three = [a, b, d];
            three.sort_by(f64::total_cmp);
            out[c].row_px = three[1];
        }
    }
    out
}

/// One column of a scan for one pitch and camera height: its bearing (radians, counter-clockwise from the
/// optical axis) and log range bound.
#[derive(Clone, Copy, Debug)]
struct ScanColumn {
    bearing_rad: f64,
    log_range: f32,
    kind: BoundaryKind,
}

/// The columns as ranges for a camera at `height_m` above the floor, pitched by `pitch_rad`.
fn scan_columns(
    camera: &PinholeCamera,
    boundary: &[ColumnBoundary],
    pitch_rad: f64,
    height_m: f64,
) -> Vec<ScanColumn> {
    let rotation = Pose3::world_from_camera_yaw_pitch(Vector3::zeros(), 0.0, pitch_rad).rotation_matrix();
    let bottom = f64::from(camera.height) - 0.5;
    let max_log = MAX_RANGE_M.ln() as f32;
    boundary
        .iter()
        .filter_map(|b| {
            let row = if b.kind == BoundaryKind::Nearer { bottom } else { b.row_px };
            let d = rotation * camera.ray(&Point2::new(b.x_px, row));
            let bearing_rad = d.y.atan2(d.x);
            // A boundary at or above the horizon: the floor reaches beyond the range cap.
            let range = if d.z < -1e-9 { height_m / -d.z * d.x.hypot(d.y) } else { f64::INFINITY };
            let log_range = (range.min(MAX_RANGE_M).ln() as f32).min(max_log);
            let kind = match b.kind {
                BoundaryKind::Exact if range >= MAX_RANGE_M => BoundaryKind::Farther,
                kind => kind,
            };
            // A lower bound at the cap says nothing.
            (!(kind == BoundaryKind::Farther && log_range >= max_log)).then_some(ScanColumn {
                bearing_rad,
                log_range,
                kind,
            })
        })
        .collect()
}

/// A camera pose suggested by the layout search.
#[derive(Clone, Copy, Debug)]
pub struct LayoutHypothesis {
    /// In the map frame (z up, the floor at [`OccupancyGrid::floor_z_m`]).
    pub map_from_camera: Pose3,
    /// Mean truncated log-range difference over the scan's columns (lower is better, at most 0.3).
    pub score: f32,
}

/// Candidate positions of a grid with their range tables.
#[derive(Debug)]
pub struct LayoutIndex {
    config: LayoutConfig,
    floor_z_m: f64,
    positions: Vec<[f64; 2]>,
    /// Per position, `BEARINGS` log ranges (bearing k: k degrees counter-clockwise from +x).
    log_ranges: Vec<f32>,
}

impl LayoutIndex {
    /// Ray-casts the range tables of `grid`'s free cells (parallel).
    pub fn build(grid: &OccupancyGrid, config: LayoutConfig) -> Self {
        let frame = grid.frame;
        let (w, h) = (frame.width as usize, frame.height as usize);
        let occupied: Vec<bool> = grid.cells.iter().map(|c| *c == CellState::Occupied).collect();
        let clearance = distance_transform(w, h, &occupied);
        let stride = ((config.position_step_m / frame.resolution_m).round() as usize).max(1);
        let min_clearance = config.clearance_m / frame.resolution_m;
        let mut positions = Vec::new();
        for row in (0..h).step_by(stride) {
            for col in (0..w).step_by(stride) {
                let i = row * w + col;
                if grid.cells[i] == CellState::Free && f64::from(clearance[i]) >= min_clearance {
                    positions.push(frame.world_from_cell(col as u32, row as u32));
                }
            }
        }
        let step = frame.resolution_m * 0.5;
        let steps = (MAX_RANGE_M / step).ceil() as usize;
        let directions: Vec<(f64, f64)> =
            (0..BEARINGS).map(|k| (k as f64 * std::f64::consts::TAU / BEARINGS as f64).sin_cos()).collect();
        let log_ranges: Vec<f32> = positions
            .par_iter()
            .flat_map_iter(|&[x, y]| {
                let occupied = &occupied;
                directions.iter().map(move |&(s, c)| {
                    let mut range = MAX_RANGE_M;
                    for k in 1..=steps {
                        let r = k as f64 * step;
                        match frame.cell_from_world(x + r * c, y + r * s) {
                            Some((col, row)) if occupied[frame.index(col, row)] => {
                                range = r;
                                break;
                            }
                            Some(_) => {}
                            None => break,
                        }
                    }
                    range.min(MAX_RANGE_M).ln() as f32
                })
            })
            .collect();
        Self { config, floor_z_m: grid.floor_z_m, positions, log_ranges }
    }

    /// Candidate positions in the index.
    pub fn len(&self) -> usize {
        self.positions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }

    /// The `count` best distinct camera poses for `image` (map frame), best first; empty when the image
    /// shows too little floor boundary.
    pub fn hypotheses(
        &self,
        model: &FloorModel,
        camera: &PinholeCamera,
        image: &RgbImage,
        count: usize,
    ) -> Vec<LayoutHypothesis> {
        if self.positions.is_empty()
            || count == 0
            || (image.width(), image.height()) != (camera.width, camera.height)
        {
            return Vec::new();
        }
        let features = PixelFeatures::new(image);
        let boundary = floor_boundary(model, &features, self.config.columns);
        let exact = boundary.iter().filter(|b| b.kind == BoundaryKind::Exact).count();
        if exact < self.config.min_exact_columns {
            tracing::debug!(exact, "too few floor boundary columns for the layout search");
            return Vec::new();
        }
        // Pitch from the vertical vanishing point when the image has one; headings every degree.
        self.search(camera, &boundary, read_pitch(camera, image), count)
    }

    /// The search of [`Self::hypotheses`] for a floor boundary, at `pitch_rad` when known (headings every
    /// degree), else at the configured fallback pitches (headings every 2 degrees).
    pub fn search(
        &self,
        camera: &PinholeCamera,
        boundary: &[ColumnBoundary],
        pitch_rad: Option<f64>,
        count: usize,
    ) -> Vec<LayoutHypothesis> {
        if self.positions.is_empty() || count == 0 {
            return Vec::new();
        }
        let (pitches, heading_step): (Vec<f64>, usize) = match pitch_rad {
            Some(pitch) => (vec![pitch], 1),
            None => (self.config.fallback_pitches_deg.iter().map(|p| p.to_radians()).collect(), 2),
        };
        let variants: Vec<(f64, f64, Vec<ScanColumn>)> = pitches
            .iter()
            .flat_map(|&pitch| self.config.heights_m.iter().map(move |&height| (pitch, height)))
            .map(|(pitch, height)| (pitch, height, scan_columns(camera, boundary, pitch, height)))
            .collect();
        // Per variant, each column's bearing as a whole-degree offset into the range tables.
        let offsets: Vec<Vec<usize>> = variants
            .iter()
            .map(|(_, _, columns)| {
                columns
                    .iter()
                    .map(|c| (c.bearing_rad.to_degrees().round() as i64).rem_euclid(BEARINGS as i64) as usize)
                    .collect()
            })
            .collect();
        let best: Vec<(f32, usize, usize)> = (0..self.positions.len())
            .into_par_iter()
            .map(|i| {
                let table = &self.log_ranges[i * BEARINGS..(i + 1) * BEARINGS];
                let mut best = (f32::INFINITY, 0usize, 0usize);
                for (v, (_, _, columns)) in variants.iter().enumerate() {
                    if columns.is_empty() {
                        continue;
                    }
                    for heading in (0..BEARINGS).step_by(heading_step) {
                        let mut total = 0.0f32;
                        for (column, &offset) in columns.iter().zip(&offsets[v]) {
                            let predicted = table[(heading + offset) % BEARINGS];
                            let difference = predicted - column.log_range;
                            total += match column.kind {
                                BoundaryKind::Exact => difference.abs(),
                                BoundaryKind::Nearer => difference.max(0.0),
                                BoundaryKind::Farther => (-difference).max(0.0),
                            }
                            .min(TRUNCATION);
                        }
                        let score = total / columns.len() as f32;
                        if score < best.0 {
                            best = (score, heading, v);
                        }
                    }
                }
                best
            })
            .collect();
        let mut order: Vec<usize> = (0..best.len()).filter(|&i| best[i].0.is_finite()).collect();
        order.sort_by(|&a, &b| best[a].0.total_cmp(&best[b].0).then(a.cmp(&b)));
        let separation2 = self.config.separation_m * self.config.separation_m;
        let mut chosen: Vec<usize> = Vec::new();
        for i in order {
            let [x, y] = self.positions[i];
            if chosen.iter().any(|&j| {
                let [a, b] = self.positions[j];
                (x - a).powi(2) + (y - b).powi(2) < separation2
            }) {
                continue;
            }
            chosen.push(i);
            if chosen.len() == count {
                break;
            }
        }
        chosen
            .into_iter()
            .map(|i| {
                let (score, heading, v) = best[i];
                let (pitch, height, _) = &variants[v];
                let [x, y] = self.positions[i];
                let position = Vector3::new(x, y, self.floor_z_m + height);
                let yaw = (heading as f64).to_radians();
                LayoutHypothesis {
                    map_from_camera: Pose3::world_from_camera_yaw_pitch(position, yaw, *pitch),
                    score,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::GridFrame;
    use crate::testworld::{Aabb, BoxWorld};

    /// A 7 m x 4.5 m room (walls 0.1 m thick) with a 1.2 m x 0.8 m cabinet off-centre and a pillar: no two
    /// places in it look alike at floor level.
    fn room() -> BoxWorld {
        let (x1, y1) = (7.0, 4.5);
        let wall =
            |min: [f64; 2], max: [f64; 2]| Aabb { min: [min[0], min[1], 0.0], max: [max[0], max[1], 2.6] };
        BoxWorld {
            floor_z: 0.0,
            ceiling_z: 2.6,
            boxes: vec![
                wall([-0.1, -0.1], [x1 + 0.1, 0.0]),
                wall([-0.1, y1], [x1 + 0.1, y1 + 0.1]),
                wall([-0.1, 0.0], [0.0, y1]),
                wall([x1, 0.0], [x1 + 0.1, y1]),
                Aabb { min: [4.6, 0.0, 0.0], max: [5.8, 0.8, 0.9] },
                Aabb { min: [2.0, 2.9, 0.0], max: [2.4, 3.3, 2.6] },
            ],
        }
    }

    /// The room's occupancy grid at 5 cm: cells under a box occupied, the rest of the room free.
    fn grid(world: &BoxWorld) -> OccupancyGrid {
        let res = 0.05;
        let frame =
            GridFrame { origin_x_m: -0.5, origin_y_m: -0.5, resolution_m: res, width: 160, height: 110 };
        let mut cells = vec![CellState::Unknown; frame.len()];
        for row in 0..frame.height {
            for col in 0..frame.width {
                let [x, y] = frame.world_from_cell(col, row);
                let under = |b: &Aabb| x >= b.min[0] && x <= b.max[0] && y >= b.min[1] && y <= b.max[1];
                cells[frame.index(col, row)] = if world.boxes.iter().any(under) {
                    CellState::Occupied
                } else if (0.0..7.0).contains(&x) && (0.0..4.5).contains(&y) {
                    CellState::Free
                } else {
                    CellState::Unknown
                };
            }
        }
        OccupancyGrid {
            frame,
            cells,
            structure: vec![false; frame.len()],
            filled: Vec::new(),
            floor_z_m: 0.0,
            ceiling_z_m: 2.6,
        }
    }

    fn camera() -> PinholeCamera {
        PinholeCamera::from_horizontal_fov(256, 192, 90.0).expect("camera")
    }

    /// Colour and depth seen from a pose: the floor a noisy beige, everything standing on it a noisy blue
    /// grey (a fixed pseudo-random pattern, so no two pixels are alike).
    fn view(world: &BoxWorld, camera: &PinholeCamera, pose: &Pose3) -> (RgbImage, DepthImage) {
        let depth = world.render(camera, pose);
        let mut data = Vec::with_capacity(depth.data().len());
        for (i, &d) in depth.data().iter().enumerate() {
            let (u, v) = ((i % camera.width as usize) as f64, (i / camera.width as usize) as f64);
            let point = pose.transform_point(&camera.unproject(&Point2::new(u, v), f64::from(d)));
            let noise = ((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 59) as u8;
            data.push(if d > 0.0 && point.z < 0.01 {
                [190 + noise, 160 + noise, 120 + noise]
            } else {
                [90 + noise, 100 + noise, 130 + noise]
            });
        }
        (RgbImage::from_vec(camera.width, camera.height, data).expect("image"), depth)
    }

    fn pose(x: f64, y: f64, yaw_deg: f64, pitch_deg: f64, height: f64) -> Pose3 {
        Pose3::world_from_camera_yaw_pitch(
            Vector3::new(x, y, height),
            yaw_deg.to_radians(),
            pitch_deg.to_radians(),
        )
    }

    fn trained_model(world: &BoxWorld, camera: &PinholeCamera) -> FloorModel {
        let mut builder = FloorModelBuilder::new(camera, 0.0);
        for (x, y, yaw) in [(1.0, 1.0, 20.0), (3.5, 2.0, 200.0), (5.5, 3.0, 300.0), (2.0, 4.0, 100.0)] {
            let pose = pose(x, y, yaw, -10.0, 1.4);
            let (rgb, depth) = view(world, camera, &pose);
            builder.add_frame(&rgb, &depth, &pose);
        }
        builder.finish().expect("both classes seen")
    }

    /// The room, the camera, a floor model trained in it and its layout index over 32 columns.
    fn searchable_room() -> (BoxWorld, PinholeCamera, FloorModel, LayoutIndex) {
        let (world, camera) = (room(), camera());
        let model = trained_model(&world, &camera);
        let index =
            LayoutIndex::build(&grid(&world), LayoutConfig { columns: 32, ..LayoutConfig::default() });
        (world, camera, model, index)
    }

    #[test]
    fn the_floor_model_learns_floor_pixels_from_depth() {
        let (world, camera) = (room(), camera());
        let model = trained_model(&world, &camera);
        // A view from elsewhere: the model's labels agree with the depth's.
        let truth = pose(5.0, 2.0, 150.0, -6.0, 1.3);
        let (rgb, depth) = view(&world, &camera, &truth);
        let features = PixelFeatures::new(&rgb);
        let (mut agree, mut total) = (0, 0);
        for v in 0..features.height {
            for u in 0..features.width {
                let (x, y) = ((u * FLOOR_PIXEL + 2) as u32, (v * FLOOR_PIXEL + 2) as u32);
                let d = f64::from(*depth.get(x, y).expect("pixel"));
                let z =
                    truth.transform_point(&camera.unproject(&Point2::new(f64::from(x), f64::from(y)), d)).z;
                total += 1;
                agree += usize::from(model.is_floor(&features, u, v) == (z < 0.01));
            }
        }
        assert!(agree as f64 > 0.95 * total as f64, "{agree} of {total}");
    }

    #[test]
    fn the_layout_search_finds_the_pose_of_a_view_from_its_floor_boundary() {
        let (world, camera, model, index) = searchable_room();
        assert!(index.len() > 1000, "{} positions", index.len());
        // Views at heights and pitches between the searched ones.
        for truth in [pose(3.2, 1.5, 35.0, -7.0, 1.35), pose(5.9, 3.4, 215.0, -11.0, 1.5)] {
            let (rgb, _) = view(&world, &camera, &truth);
            let boundary = floor_boundary(&model, &PixelFeatures::new(&rgb), 32);
            let found = index.search(&camera, &boundary, None, 5);
            assert!(!found.is_empty());
            let best = found[0].map_from_camera;
            let position_error = (best.translation().xy() - truth.translation().xy()).norm();
            let yaw_error = (best.camera_yaw() - truth.camera_yaw()).to_degrees().rem_euclid(360.0);
            let yaw_error = yaw_error.min(360.0 - yaw_error);
            assert!(
                position_error < 0.3 && yaw_error < 5.0,
                "{position_error} m, {yaw_error} deg: {found:?}"
            );
            // The best pose scores better than the others (it is the only place that fits).
            assert!(found.windows(2).all(|w| w[0].score <= w[1].score));
        }
    }

    #[test]
    fn a_view_of_a_near_wall_censors_its_columns_and_gives_no_search() {
        let (world, camera, model, index) = searchable_room();
        // Facing the wall from 0.4 m: no floor in view.
        let truth = pose(6.6, 2.0, 0.0, -5.0, 1.4);
        let (rgb, _) = view(&world, &camera, &truth);
        let boundary = floor_boundary(&model, &PixelFeatures::new(&rgb), 32);
        assert!(boundary.iter().all(|b| b.kind == BoundaryKind::Nearer), "{boundary:?}");
        assert!(index.hypotheses(&model, &camera, &rgb, 5).is_empty());
    }

    #[test]
    fn scan_columns_turn_rows_into_floor_ranges() {
        let camera = camera();
        // The optical axis level, a boundary row 50 px below the centre: range = h * f / 50.
        let b = ColumnBoundary { x_px: camera.cx, row_px: camera.cy + 50.0, kind: BoundaryKind::Exact };
        let columns = scan_columns(&camera, &[b], 0.0, 1.4);
        let expected = 1.4 * camera.fy / 50.0;
        assert!((f64::from(columns[0].log_range) - expected.ln()).abs() < 1e-4);
        assert!(columns[0].bearing_rad.abs() < 1e-9);
        // A column left of centre has a positive bearing (counter-clockwise).
        let left = ColumnBoundary { x_px: 10.0, ..b };
        assert!(scan_columns(&camera, &[left], 0.0, 1.4)[0].bearing_rad > 0.5);
        // At the horizon the floor reaches past the cap: no information.
        let horizon = ColumnBoundary { row_px: camera.cy - 1.0, kind: BoundaryKind::Farther, ..b };
        assert!(scan_columns(&camera, &[horizon], 0.0, 1.4).is_empty());
    }
}
