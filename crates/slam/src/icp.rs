//! Point-to-plane ICP with projective data association (KinectFusion style): refines the pose of a depth
//! frame against a keyframe's depth, both subsampled. With the keyframe's grey levels
//! ([`IntensityModel`]) and the frame points' own, every iteration adds a photometric term (as the hybrid
//! RGB-D odometry of Steinbrücker et al. and Open3D): the colour, which depth noise does not touch, then
//! pins the pose where noisy or flat surfaces leave it loose.

use nalgebra::{Isometry3, Matrix6, Point3, Vector6};

use gst_core::{DepthImage, PinholeCamera, RgbImage};

use crate::optimize::perturb;

/// A raster and the pinhole intrinsics that index it: a cell of a depth grid or model, or a pixel of an
/// intensity model, is a pixel of this (possibly scaled) camera.
#[derive(Clone, Copy, Debug)]
struct Raster {
    width: usize,
    height: usize,
    fx: f64,
    fy: f64,
    cx: f64,
    cy: f64,
}

impl Raster {
    /// `camera` sampled every `step` pixels, at pixel `step·i + step/2`.
    fn sampled(camera: &PinholeCamera, width: usize, height: usize, step: u32) -> Self {
        let s = f64::from(step);
        let offset = f64::from(step / 2);
        Self {
            width,
            height,
            fx: camera.fx / s,
            fy: camera.fy / s,
            cx: (camera.cx - offset) / s,
            cy: (camera.cy - offset) / s,
        }
    }

    /// Raster coordinates of a point in the camera frame, given `inverse` = 1 / its depth.
    #[inline]
    fn project(&self, p: &[f64; 3], inverse: f64) -> (f64, f64) {
        (self.fx * p[0] * inverse + self.cx, self.fy * p[1] * inverse + self.cy)
    }
}

/// A depth image sampled every `step` pixels (at pixel `step·i + step/2`), kept by every keyframe: 80 KB at
/// 640x512 with step 4, enough to align any later frame against it.
#[derive(Clone, Debug)]
pub struct DepthGrid {
    /// A grid index is a pixel of this scaled camera.
    raster: Raster,
    step: u32,
    /// Depth in metres, 0 where missing or out of range.
    z: Vec<f32>,
    /// Grey level in [0, 1] at the same pixels ([`Self::with_intensity`]), NaN where the image is flat there;
    /// empty when not sampled.
    intensity: Vec<f32>,
}

/// Fewest grey-level differences (|x| + |y| central differences over 2 pixels, grey in [0, 1]) at a pixel
/// that joins the photometric term.
pub const MIN_TEXTURE: f32 = 0.02;

/// Grey level in [0, 1] of an RGB pixel (BT.601 luma, as ORB extraction's grey image).
pub fn grey(p: [u8; 3]) -> f32 {
    (0.299 * f32::from(p[0]) + 0.587 * f32::from(p[1]) + 0.114 * f32::from(p[2])) / 255.0
}

impl DepthGrid {
    pub fn new(camera: &PinholeCamera, depth: &DepthImage, step: u32, range: (f32, f32)) -> Self {
        let step = step.max(1);
        let (width, height) = ((depth.width() / step) as usize, (depth.height() / step) as usize);
        let mut z = Vec::with_capacity(width * height);
        for y in 0..height {
            for x in 0..width {
                let d =
                    depth.get(x as u32 * step + step / 2, y as u32 * step + step / 2).copied().unwrap_or(0.0);
                z.push(if d.is_finite() && d >= range.0 && d <= range.1 { d } else { 0.0 });
            }
        }
        Self { raster: Raster::sampled(camera, width, height, step), step, z, intensity: Vec::new() }
    }

    /// The grid of depth already sampled as [`Self::new`] samples it: `z` holds, row by row, the depth at
    /// pixel (`step`·x + `step`/2, `step`·y + `step`/2) of `camera`'s images, 0 where missing. `None` when it
    /// does not hold `(width / step) · (height / step)` values.
    pub fn from_samples(camera: &PinholeCamera, step: u32, z: Vec<f32>) -> Option<Self> {
        let step = step.max(1);
        let (width, height) = ((camera.width / step) as usize, (camera.height / step) as usize);
        (z.len() == width * height && !z.is_empty()).then(|| Self {
            raster: Raster::sampled(camera, width, height, step),
            step,
            z,
            intensity: Vec::new(),
        })
    }

    /// The grid with the grey level of `rgb` (same size as the depth) at each of its pixels where the image
    /// is textured, smoothed as the keyframe side ([`IntensityModel`]): the frame side of the photometric
    /// term ([`align_hybrid`]). Flat pixels ([`MIN_TEXTURE`]) would cost as much and tell nothing.
    pub fn with_intensity(mut self, rgb: &RgbImage) -> Self {
        let step = self.step;
        let (w, h) = (rgb.width() as usize, rgb.height() as usize);
        let data = rgb.data();
        let Raster { width, height, .. } = self.raster;
        self.intensity = (0..height)
            .flat_map(|y| (0..width).map(move |x| (x, y)))
            .map(|(x, y)| {
                let (px, py) = ((x as u32 * step + step / 2) as usize, (y as u32 * step + step / 2) as usize);
                if px == 0 || py == 0 || px + 1 >= w || py + 1 >= h {
                    return f32::NAN;
                }
                // The 3x3 neighbourhood's grey levels, row by row: the four beside the pixel first, the rest
                // only where they are textured.
                let at = |k: usize| grey(data[(py + k / 3 - 1) * w + px + k % 3 - 1]);
                let mut n = [0.0f32; 9];
                for k in [1, 3, 5, 7] {
                    n[k] = at(k);
                }
                if (n[5] - n[3]).abs() + (n[7] - n[1]).abs() < MIN_TEXTURE {
                    return f32::NAN;
                }
                for k in [0, 2, 4, 6, 8] {
                    n[k] = at(k);
                }
                const BINOMIAL: [f32; 9] = [1.0, 2.0, 1.0, 2.0, 4.0, 2.0, 1.0, 2.0, 1.0];
                n.iter().zip(BINOMIAL).fold(0.0, |sum, (level, weight)| sum + weight * level) / 16.0
            })
            .collect();
        self
    }

    fn vertex(&self, x: usize, y: usize) -> Option<Point3<f32>> {
        let r = &self.raster;
        let z = self.z[y * r.width + x];
        (z > 0.0).then(|| {
            Point3::new(((x as f64 - r.cx) / r.fx) as f32 * z, ((y as f64 - r.cy) / r.fy) as f32 * z, z)
        })
    }

    /// The grid's points in its camera frame.
    pub fn points(&self) -> Vec<Point3<f32>> {
        let Raster { width, height, .. } = self.raster;
        (0..height)
            .flat_map(|y| (0..width).map(move |x| (x, y)))
            .filter_map(|(x, y)| self.vertex(x, y))
            .collect()
    }

    /// The grid without its grey levels (what a keyframe keeps).
    pub fn without_intensity(mut self) -> Self {
        self.intensity = Vec::new();
        self
    }

    /// The grid's points where the image is textured, with their grey levels ([`Self::with_intensity`];
    /// none when not sampled).
    pub fn textured_points(&self) -> (Vec<Point3<f32>>, Vec<f32>) {
        if self.intensity.is_empty() {
            return (Vec::new(), Vec::new());
        }
        let Raster { width, height, .. } = self.raster;
        (0..height)
            .flat_map(|y| (0..width).map(move |x| (x, y)))
            .filter(|&(x, y)| !self.intensity[y * width + x].is_nan())
            .filter_map(|(x, y)| self.vertex(x, y).map(|v| (v, self.intensity[y * width + x])))
            .unzip()
    }
}

/// A 3x3 binomial ([1 2 1]², /16) blur; the border keeps its values.
fn binomial_blur(values: &[f32], width: usize, height: usize) -> Vec<f32> {
    let mut rows = values.to_vec();
    for y in 0..height {
        for x in 1..width.saturating_sub(1) {
            let i = y * width + x;
            rows[i] = (values[i - 1] + 2.0 * values[i] + values[i + 1]) / 4.0;
        }
    }
    let mut out = rows.clone();
    for y in 1..height.saturating_sub(1) {
        for x in 0..width {
            let i = y * width + x;
            out[i] = (rows[i - width] + 2.0 * rows[i] + rows[i + width]) / 4.0;
        }
    }
    out
}

/// A keyframe's grey levels and their gradients at full resolution, the target of the photometric term.
#[derive(Clone, Debug)]
pub struct IntensityModel {
    raster: Raster,
    /// Per pixel the smoothed grey level in [0, 1] and its x and y derivatives (central differences, per pixel).
    pixels: Vec<[f32; 3]>,
}

impl IntensityModel {
    pub fn new(camera: &PinholeCamera, rgb: &RgbImage) -> Self {
        let (width, height) = (rgb.width() as usize, rgb.height() as usize);
        let raw: Vec<f32> = rgb.data().iter().map(|&p| grey(p)).collect();
        // A 3x3 binomial blur first (the frame side samples the same): rendered and real textures are not
        // band-limited, and bilinear interpolation of the raw pixels biases sub-pixel alignment.
        let grey_levels = binomial_blur(&raw, width, height);
        let mut pixels = vec![[0.0f32; 3]; width * height];
        for y in 0..height {
            for x in 0..width {
                let i = y * width + x;
                pixels[i][0] = grey_levels[i];
                if x == 0 || y == 0 || x + 1 == width || y + 1 == height {
                    continue;
                }
                let at = |dx: isize, dy: isize| {
                    grey_levels[(y as isize + dy) as usize * width + (x as isize + dx) as usize]
                };
                pixels[i][1] = (at(1, 0) - at(-1, 0)) / 2.0;
                pixels[i][2] = (at(0, 1) - at(0, -1)) / 2.0;
            }
        }
        Self { raster: Raster::sampled(camera, width, height, 1), pixels }
    }

    /// Grey level and gradient at sub-pixel `(x, y)`, bilinear; `None` outside the interior.
    fn sample(&self, x: f64, y: f64) -> Option<[f64; 3]> {
        let Raster { width, height, .. } = self.raster;
        if !(x >= 1.0
            && y >= 1.0
            && x < width.saturating_sub(2) as f64
            && y < height.saturating_sub(2) as f64)
        {
            return None;
        }
        let (x0, y0) = (x as usize, y as usize);
        let (ax, ay) = (x - x0 as f64, y - y0 as f64);
        let i = y0 * width + x0;
        let (a, b, c, d) =
            (self.pixels[i], self.pixels[i + 1], self.pixels[i + width], self.pixels[i + width + 1]);
        let mut out = [0.0; 3];
        for k in 0..3 {
            let top = f64::from(a[k]) * (1.0 - ax) + f64::from(b[k]) * ax;
            let bottom = f64::from(c[k]) * (1.0 - ax) + f64::from(d[k]) * ax;
            out[k] = top * (1.0 - ay) + bottom * ay;
        }
        Some(out)
    }
}

/// A depth grid as vertex and normal maps, the target of an alignment.
#[derive(Clone, Debug)]
pub struct DepthModel {
    /// The grid's raster.
    raster: Raster,
    /// Per grid cell its vertex and unit normal (x, y, z, nx, ny, nz) in one array, so that a lookup
    /// touches one cache line; NaN where the cell has no vertex or no normal.
    surfels: Vec<[f32; 6]>,
    /// The keyframe's grey levels, for the photometric term ([`Self::with_intensity`]).
    intensity: Option<IntensityModel>,
}

impl DepthModel {
    pub fn new(grid: &DepthGrid) -> Self {
        let Raster { width, height, .. } = grid.raster;
        let vertices: Vec<Option<Point3<f32>>> = (0..height)
            .flat_map(|y| (0..width).map(move |x| (x, y)))
            .map(|(x, y)| grid.vertex(x, y))
            .collect();
        let mut surfels = vec![[f32::NAN; 6]; width * height];
        for y in 1..height.saturating_sub(1) {
            for x in 1..width.saturating_sub(1) {
                let at = |dx: isize, dy: isize| {
                    vertices[((y as isize + dy) as usize) * width + (x as isize + dx) as usize]
                };
                let (Some(c), Some(r), Some(l), Some(d), Some(u)) =
                    (at(0, 0), at(1, 0), at(-1, 0), at(0, 1), at(0, -1))
                else {
                    continue;
                };
                // Central differences; skip depth discontinuities.
                let limit = 0.05 + 0.03 * c.z;
                if (r.z - l.z).abs() > 2.0 * limit || (d.z - u.z).abs() > 2.0 * limit {
                    continue;
                }
                let n = (r - l).cross(&(d - u));
                let norm = n.norm();
                if norm > 0.0 {
                    let mut n = n / norm;
                    if n.dot(&c.coords) > 0.0 {
                        n = -n;
                    }
                    surfels[y * width + x] = [c.x, c.y, c.z, n.x, n.y, n.z];
                }
            }
        }
        Self { raster: grid.raster, surfels, intensity: None }
    }

    /// The model with its keyframe's grey levels: alignments with frame intensities add a photometric term.
    pub fn with_intensity(mut self, intensity: IntensityModel) -> Self {
        self.intensity = Some(intensity);
        self
    }

    /// The vertex and normal of the cell a point (in the model's camera frame) projects to.
    fn lookup(&self, p: [f64; 3]) -> Option<&[f32; 6]> {
        if p[2] <= 0.0 {
            return None;
        }
        // Nearest cell; `floor(x + 0.5)` through a cast (inputs are checked non-negative first).
        let (x, y) = self.raster.project(&p, 1.0 / p[2]);
        let (x, y) = (x + 0.5, y + 0.5);
        let Raster { width, height, .. } = self.raster;
        if !(x >= 0.0 && y >= 0.0 && x < width as f64 && y < height as f64) {
            return None;
        }
        let surfel = &self.surfels[y as usize * width + x as usize];
        (!surfel[3].is_nan()).then_some(surfel)
    }
}

/// Gauss–Newton sums of point-to-plane residuals: the upper triangle of JᵀWJ row by row, JᵀWr, the count
/// and the squared residuals.
#[derive(Clone, Copy)]
struct Normal {
    h: [f64; 21],
    g: [f64; 6],
    count: usize,
    sse: f64,
}

impl Normal {
    const ZERO: Self = Self { h: [0.0; 21], g: [0.0; 6], count: 0, sse: 0.0 };

    /// Adds a point-to-plane residual (counted, and in the squared sum).
    fn add(&mut self, j: &[f64; 6], r: f64, weight: f64) {
        self.add_term(j, r, weight);
        self.sse += r * r;
        self.count += 1;
    }

    /// Adds a residual to the normal equations only (the photometric term).
    fn add_term(&mut self, j: &[f64; 6], r: f64, weight: f64) {
        let mut k = 0;
        for a in 0..6 {
            let wa = weight * j[a];
            self.g[a] += wa * r;
            for jb in &j[a..] {
                self.h[k] += wa * jb;
                k += 1;
            }
        }
    }

    fn matrix(&self) -> Matrix6<f64> {
        let mut m = Matrix6::zeros();
        let mut k = 0;
        for a in 0..6 {
            for b in a..6 {
                m[(a, b)] = self.h[k];
                m[(b, a)] = self.h[k];
                k += 1;
            }
        }
        m
    }
}

/// Points the coarse iterations of [`align`] use (every k-th point of the frame): as many as a 4-pixel
/// grid's every third point, whatever the grid's step.
const COARSE_POINTS: usize = 7000;

/// Outcome of an ICP run.
#[derive(Clone, Copy, Debug)]
pub struct IcpResult {
    /// Correspondences in the last iteration.
    pub inliers: usize,
    /// RMS point-to-plane distance of the inliers, metres.
    pub rmse_m: f64,
    pub iterations: usize,
    /// Smallest eigenvalue of the normalised information matrix: near 0 when the geometry leaves a direction
    /// unconstrained (a single wall, a corridor).
    pub conditioning: f64,
}

/// The frame side of the photometric term of [`align_hybrid`]: points (in the frame's camera, usually denser
/// than the geometric ones) with their grey levels.
#[derive(Clone, Copy, Debug)]
pub struct Photometric<'a> {
    pub points: &'a [Point3<f32>],
    /// The grey level of each point (in [0, 1], as [`DepthGrid::with_intensity`] samples it).
    pub intensities: &'a [f32],
    /// Weight of a squared grey-level residual against a squared point-to-plane residual in metres.
    pub weight: f64,
}

/// Grey-level residual where the photometric term's Huber kernel turns linear.
const PHOTOMETRIC_HUBER: f64 = 0.05;

/// Refines `model_from_frame` (points of the frame into the model's camera frame) by point-to-plane ICP.
pub fn align(
    model: &DepthModel,
    points: &[Point3<f32>],
    model_from_frame: &mut Isometry3<f64>,
    max_distance_m: f64,
    iterations: usize,
) -> Option<IcpResult> {
    align_hybrid(model, points, None, model_from_frame, max_distance_m, iterations)
}

/// A point of the frame in the model's camera (`r`, `o`: rotation and translation of model_from_frame), and
/// the model's surfel it is associated with when that lies within `gate2` (squared metres).
#[inline]
fn associate<'m>(
    model: &'m DepthModel,
    r: &nalgebra::Matrix3<f64>,
    o: &nalgebra::Vector3<f64>,
    q: &Point3<f32>,
    gate2: f64,
) -> Option<([f64; 3], &'m [f32; 6])> {
    let (x, y, z) = (f64::from(q.x), f64::from(q.y), f64::from(q.z));
    let p = [
        r[(0, 0)] * x + r[(0, 1)] * y + r[(0, 2)] * z + o.x,
        r[(1, 0)] * x + r[(1, 1)] * y + r[(1, 2)] * z + o.y,
        r[(2, 0)] * x + r[(2, 1)] * y + r[(2, 2)] * z + o.z,
    ];
    let s = model.lookup(p)?;
    let d = [p[0] - f64::from(s[0]), p[1] - f64::from(s[1]), p[2] - f64::from(s[2])];
    (d[0] * d[0] + d[1] * d[1] + d[2] * d[2] <= gate2).then_some((p, s))
}

/// The Jacobian row of a residual `g · p` of a point `p` under a left perturbation (translation, rotation).
#[inline]
fn jacobian(p: &[f64; 3], g: &[f64; 3]) -> [f64; 6] {
    [g[0], g[1], g[2], p[1] * g[2] - p[2] * g[1], p[2] * g[0] - p[0] * g[2], p[0] * g[1] - p[1] * g[0]]
}

/// [`align`] with a photometric term (coarse iterations on a subset as well) when the model has its keyframe's grey levels
/// ([`DepthModel::with_intensity`]) and `photometric` gives points of the frame with their own: each of
/// them on the model's surface (within the association gate, so not hidden in the keyframe) adds the
/// difference between the keyframe's grey level where it projects and its own.
pub fn align_hybrid(
    model: &DepthModel,
    points: &[Point3<f32>],
    photometric: Option<Photometric<'_>>,
    model_from_frame: &mut Isometry3<f64>,
    max_distance_m: f64,
    iterations: usize,
) -> Option<IcpResult> {
    let photometric = photometric
        .filter(|p| p.weight > 0.0 && p.intensities.len() == p.points.len())
        .and_then(|p| model.intensity.as_ref().map(|image| (image, p)));
    let mut pose = *model_from_frame;
    let mut result = None;
    // Coarse to fine: all but the last two iterations use a subset of the points.
    let stride = points.len().div_ceil(COARSE_POINTS).max(1);
    let coarse: Vec<Point3<f32>> = points.iter().step_by(stride).copied().collect();
    let coarse_photometric: Option<(Vec<Point3<f32>>, Vec<f32>)> = photometric.map(|(_, p)| {
        let stride = p.points.len().div_ceil(COARSE_POINTS).max(1);
        (
            p.points.iter().step_by(stride).copied().collect(),
            p.intensities.iter().step_by(stride).copied().collect(),
        )
    });
    let mut coarse_phase = true;
    for iteration in 0..iterations {
        let use_coarse = coarse_phase && iteration + 2 < iterations;
        let points = if use_coarse { &coarse[..] } else { points };
        let min_count = if use_coarse { 40 } else { 100 };
        // The association distance shrinks from `max_distance_m` to a third of it.
        let t = iteration as f64 / (iterations.max(2) - 1) as f64;
        let gate = max_distance_m * (1.0 - 2.0 * t / 3.0);
        let gate2 = gate * gate;
        let r = pose.rotation.to_rotation_matrix().into_inner();
        let o = pose.translation.vector;
        // One thread: a frame's few thousand points take well under a millisecond an iteration, less than
        // handing them to a pool shared with the other pipeline stages costs.
        let mut sums = Normal::ZERO;
        for q in points {
            let Some((p, s)) = associate(model, &r, &o, q, gate2) else { continue };
            let n = [f64::from(s[3]), f64::from(s[4]), f64::from(s[5])];
            let residual = n[0] * (p[0] - f64::from(s[0]))
                + n[1] * (p[1] - f64::from(s[1]))
                + n[2] * (p[2] - f64::from(s[2]));
            // Huber at 1 cm.
            let weight = if residual.abs() < 0.01 { 1.0 } else { 0.01 / residual.abs() };
            sums.add(&jacobian(&p, &n), residual, weight);
        }
        if let Some((image, frame)) = photometric {
            let (photometric_points, levels) = match &coarse_photometric {
                Some((p, l)) if use_coarse => (&p[..], &l[..]),
                _ => (frame.points, frame.intensities),
            };
            for (q, &level) in photometric_points.iter().zip(levels) {
                let Some((p, _)) = associate(model, &r, &o, q, gate2) else { continue };
                let inverse = 1.0 / p[2];
                let (u, v) = image.raster.project(&p, inverse);
                let Some([predicted, gx, gy]) = image.sample(u, v) else { continue };
                let residual = predicted - f64::from(level);
                // d(grey)/d(point): the image gradient through the projection's Jacobian.
                let (a, b) = (gx * image.raster.fx * inverse, gy * image.raster.fy * inverse);
                let g = [a, b, -(a * p[0] + b * p[1]) * inverse];
                let huber =
                    if residual.abs() < PHOTOMETRIC_HUBER { 1.0 } else { PHOTOMETRIC_HUBER / residual.abs() };
                sums.add_term(&jacobian(&p, &g), residual, frame.weight * huber);
            }
        }
        let (h, g, count, sse) = (sums.matrix(), Vector6::from(sums.g), sums.count, sums.sse);
        if count < min_count {
            return None;
        }
        let conditioning = {
            let scale = h.trace() / 6.0;
            (h / scale).symmetric_eigenvalues().min()
        };
        let step = h.cholesky()?.solve(&(-g));
        pose = perturb(&pose, &step);
        result = Some(IcpResult {
            inliers: count,
            rmse_m: (sse / count as f64).sqrt(),
            iterations: iteration + 1,
            conditioning,
        });
        if step.norm() < 1e-5 {
            if !use_coarse {
                break;
            }
            // Converged on the coarse points: finish with the fine ones.
            coarse_phase = false;
        }
    }
    *model_from_frame = pose;
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use gst_core::Image;
    use nalgebra::{Translation3, UnitQuaternion, Vector3};

    /// Depth of a box room (floor, ceiling, three walls) seen from a pose inside it.
    fn room_depth(camera: &PinholeCamera, world_from_camera: &Isometry3<f64>) -> DepthImage {
        let planes = [
            (Vector3::new(0.0, 0.0, 1.0), 0.0),
            (Vector3::new(0.0, 0.0, -1.0), -2.5),
            (Vector3::new(1.0, 0.0, 0.0), 2.0),
            (Vector3::new(-1.0, 0.0, 0.0), 3.0),
            (Vector3::new(0.0, -1.0, 0.0), 4.0),
            (Vector3::new(0.3, 0.9, 0.0).normalize(), 3.0),
        ];
        let mut data = Vec::new();
        for y in 0..camera.height {
            for x in 0..camera.width {
                let ray_c = camera.ray(&nalgebra::Point2::new(f64::from(x), f64::from(y)));
                let o = world_from_camera.translation.vector;
                let dir = world_from_camera.rotation * ray_c;
                let mut best = f64::INFINITY;
                for (n, d) in &planes {
                    // n·(o + s dir) + d = 0
                    let denom = n.dot(&dir);
                    if denom.abs() > 1e-9 {
                        let s = -(n.dot(&o) + d) / denom;
                        if s > 0.0 && s < best {
                            best = s;
                        }
                    }
                }
                data.push((best * ray_c.z) as f32);
            }
        }
        Image::from_vec(camera.width, camera.height, data).expect("size")
    }

    /// The room seen from a fixed pose (the model, sampled every `model_step` pixels) and from that pose
    /// moved by `offset` and turned by `euler` (the frame's points, every `points_step` pixels), and the
    /// true model_from_frame.
    fn two_views(
        offset: [f64; 3],
        euler: [f64; 3],
        model_step: u32,
        points_step: u32,
    ) -> (DepthModel, Vec<Point3<f32>>, Isometry3<f64>) {
        let camera = PinholeCamera::gst_benchmark();
        let look = UnitQuaternion::from_euler_angles(-std::f64::consts::FRAC_PI_2, 0.0, 0.0);
        let a = Isometry3::from_parts(Translation3::new(0.0, 0.0, 1.2), look);
        let b = Isometry3::from_parts(
            Translation3::new(offset[0], offset[1], 1.2 + offset[2]),
            UnitQuaternion::from_euler_angles(euler[0], euler[1], euler[2]) * look,
        );
        let model =
            DepthModel::new(&DepthGrid::new(&camera, &room_depth(&camera, &a), model_step, (0.1, 10.0)));
        let points = DepthGrid::new(&camera, &room_depth(&camera, &b), points_step, (0.1, 10.0)).points();
        (model, points, a.inverse() * b)
    }

    /// Depth and colour of a flat wall (the plane y = 2) carrying a smooth grey pattern, seen from a pose
    /// looking at it.
    fn textured_wall(camera: &PinholeCamera, world_from_camera: &Isometry3<f64>) -> (DepthImage, RgbImage) {
        let (mut depth, mut rgb) = (Vec::new(), Vec::new());
        for y in 0..camera.height {
            for x in 0..camera.width {
                let ray_c = camera.ray(&nalgebra::Point2::new(f64::from(x), f64::from(y)));
                let dir = world_from_camera.rotation * ray_c;
                let o = world_from_camera.translation.vector;
                let s = (2.0 - o.y) / dir.y;
                let hit = o + s * dir;
                let tau = std::f64::consts::TAU;
                let level = 0.5 + 0.4 * (tau * hit.x / 0.3).sin() * (tau * hit.z / 0.25).sin();
                let g = (255.0 * level).round() as u8;
                depth.push((s * ray_c.z) as f32);
                rgb.push([g, g, g]);
            }
        }
        let (w, h) = (camera.width, camera.height);
        (Image::from_vec(w, h, depth).expect("size"), Image::from_vec(w, h, rgb).expect("size"))
    }

    #[test]
    fn the_photometric_term_pins_what_a_flat_wall_leaves_loose() {
        let camera = PinholeCamera::gst_benchmark();
        let look = UnitQuaternion::from_euler_angles(-std::f64::consts::FRAC_PI_2, 0.0, 0.0);
        let a = Isometry3::from_parts(Translation3::new(0.0, 0.0, 1.2), look);
        // Slid along the wall and turned about its normal: nothing the wall's geometry can see.
        let b = Isometry3::from_parts(
            Translation3::new(0.04, 0.0, 1.2 - 0.03),
            UnitQuaternion::from_euler_angles(0.0, 0.02, 0.0) * look,
        );
        let truth = a.inverse() * b;
        let (depth_a, rgb_a) = textured_wall(&camera, &a);
        let (depth_b, rgb_b) = textured_wall(&camera, &b);
        let model = DepthModel::new(&DepthGrid::new(&camera, &depth_a, 2, (0.1, 10.0)))
            .with_intensity(IntensityModel::new(&camera, &rgb_a));
        let grid = DepthGrid::new(&camera, &depth_b, 4, (0.1, 10.0));
        let dense = DepthGrid::new(&camera, &depth_b, 2, (0.1, 10.0)).with_intensity(&rgb_b);
        let (points, intensities) = dense.textured_points();
        assert!(points.len() > 10_000, "{} textured points", points.len());

        // Depth alone: the wall leaves the slide and the turn unconstrained.
        let mut geometric = Isometry3::identity();
        let result = align(&model, &grid.points(), &mut geometric, 0.2, 10);
        assert!(result.is_none_or(|r| r.conditioning < 1e-3), "{result:?}");

        let mut hybrid = Isometry3::identity();
        let photometric = Photometric { points: &points, intensities: &intensities, weight: 0.1 };
        let result = align_hybrid(&model, &grid.points(), Some(photometric), &mut hybrid, 0.2, 10);
        let error = hybrid.inverse() * truth;
        let (metres, degrees) = (error.translation.vector.norm(), error.rotation.angle().to_degrees());
        assert!(metres < 2e-3 && degrees < 0.1, "hybrid off by {metres} m, {degrees}°: {result:?}");
    }

    #[test]
    fn a_keyframe_thumbnails_depth_is_its_grid() {
        // Keyframes keep their depth once, in the thumbnail, when the ICP step is the thumbnail's.
        let camera = PinholeCamera::gst_benchmark();
        let look = UnitQuaternion::from_euler_angles(-std::f64::consts::FRAC_PI_2, 0.0, 0.3);
        let mut depth = room_depth(&camera, &Isometry3::from_parts(Translation3::new(0.5, 0.0, 1.2), look));
        // Holes, and depth beyond the range.
        for (k, z) in depth.data_mut().iter_mut().enumerate() {
            if k % 7 == 0 {
                *z = if k % 2 == 0 { f32::NAN } else { 0.0 };
            } else if k % 11 == 0 {
                *z = 20.0;
            }
        }
        let rgb = Image::from_vec(camera.width, camera.height, vec![[90u8, 120, 30]; depth.data().len()])
            .expect("size");
        let range = (0.3, 6.0);
        let thumbnail = crate::thumbnail::Thumbnail::new(&camera, &rgb, Some(&depth), range);
        let step = crate::thumbnail::THUMBNAIL_STEP;
        let grid = DepthGrid::new(&camera, &depth, step, range);
        let from_thumbnail =
            DepthGrid::from_samples(&camera, step, thumbnail.depth_m.clone()).expect("sizes");
        assert_eq!(from_thumbnail.z, grid.z);
        assert!(grid.z.contains(&0.0) && grid.z.iter().any(|&z| z > 0.0));
        assert_eq!(from_thumbnail.points(), grid.points());
        assert!(DepthGrid::from_samples(&camera, step, vec![1.0; 10]).is_none());
    }

    #[test]
    fn aligns_two_views_of_a_room() {
        let (model, points, truth) = two_views([0.08, 0.05, 0.05], [0.02, 0.0, 0.06], 4, 4);
        let mut estimate = Isometry3::identity();
        let result = align(&model, &points, &mut estimate, 0.2, 20).expect("converges");
        let error = (estimate.inverse() * truth).translation.vector.norm();
        assert!(error < 5e-3, "translation error {error} m, {result:?}");
    }

    #[test]
    fn aligns_points_to_a_finer_model_and_stays_put_at_the_truth() {
        // The model at a 2-pixel step, the frame's points at 4 (as `icp_model_step` and `icp_step`).
        let (model, points, truth) = two_views([-0.05, 0.07, -0.02], [-0.01, 0.03, -0.04], 2, 4);
        let mut estimate = Isometry3::identity();
        let result = align(&model, &points, &mut estimate, 0.2, 20).expect("converges");
        let error = (estimate.inverse() * truth).translation.vector.norm();
        assert!(error < 2e-3, "translation error {error} m, {result:?}");
        // From the truth it does not wander off.
        let mut at_truth = truth;
        let result = align(&model, &points, &mut at_truth, 0.1, 8).expect("converges");
        let drift = (at_truth.inverse() * truth).translation.vector.norm();
        assert!(drift < 1e-3 && result.rmse_m < 5e-3, "drift {drift} m, {result:?}");
    }
}
