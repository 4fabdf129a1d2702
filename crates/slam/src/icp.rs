//! Point-to-plane ICP with projective data association (KinectFusion style): refines the pose of a depth
//! frame against a keyframe's depth, both subsampled.

use nalgebra::{Isometry3, Matrix6, Point3, Vector3, Vector6};
use rayon::prelude::*;

use gst_core::{DepthImage, PinholeCamera};

use crate::optimize::perturb;

/// A depth image sampled every `step` pixels (at pixel `step·i + step/2`), kept by every keyframe: 80 KB at
/// 640x512 with step 4, enough to align any later frame against it.
#[derive(Clone, Debug)]
pub struct DepthGrid {
    width: usize,
    height: usize,
    /// Intrinsics of the grid: a grid index is a pixel of this scaled camera.
    fx: f64,
    fy: f64,
    cx: f64,
    cy: f64,
    /// Depth in metres, 0 where missing or out of range.
    z: Vec<f32>,
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
        let s = f64::from(step);
        let offset = f64::from(step / 2);
        Self {
            width,
            height,
            fx: camera.fx / s,
            fy: camera.fy / s,
            cx: (camera.cx - offset) / s,
            cy: (camera.cy - offset) / s,
            z,
        }
    }

    fn vertex(&self, x: usize, y: usize) -> Option<Point3<f32>> {
        let z = self.z[y * self.width + x];
        (z > 0.0).then(|| {
            Point3::new(
                ((x as f64 - self.cx) / self.fx) as f32 * z,
                ((y as f64 - self.cy) / self.fy) as f32 * z,
                z,
            )
        })
    }

    /// The grid's points in its camera frame.
    pub fn points(&self) -> Vec<Point3<f32>> {
        (0..self.height)
            .flat_map(|y| (0..self.width).map(move |x| (x, y)))
            .filter_map(|(x, y)| self.vertex(x, y))
            .collect()
    }
}

/// A depth grid as vertex and normal maps, the target of an alignment.
#[derive(Clone, Debug)]
pub struct DepthModel {
    width: usize,
    height: usize,
    fx: f64,
    fy: f64,
    cx: f64,
    cy: f64,
    vertices: Vec<Option<Point3<f32>>>,
    normals: Vec<Option<Vector3<f32>>>,
}

impl DepthModel {
    pub fn new(grid: &DepthGrid) -> Self {
        let (width, height) = (grid.width, grid.height);
        let vertices: Vec<Option<Point3<f32>>> = (0..height)
            .flat_map(|y| (0..width).map(move |x| (x, y)))
            .map(|(x, y)| grid.vertex(x, y))
            .collect();
        let mut normals = vec![None; width * height];
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
                    normals[y * width + x] = Some(n);
                }
            }
        }
        Self { width, height, fx: grid.fx, fy: grid.fy, cx: grid.cx, cy: grid.cy, vertices, normals }
    }

    fn lookup(&self, p: &Point3<f64>) -> Option<(Point3<f32>, Vector3<f32>)> {
        if p.z <= 0.0 {
            return None;
        }
        // Nearest cell; `floor(x + 0.5)` through a cast (inputs are checked non-negative first).
        let x = self.fx * p.x / p.z + self.cx + 0.5;
        let y = self.fy * p.y / p.z + self.cy + 0.5;
        if !(x >= 0.0 && y >= 0.0 && x < self.width as f64 && y < self.height as f64) {
            return None;
        }
        let k = y as usize * self.width + x as usize;
        Some((self.vertices[k]?, self.normals[k]?))
    }
}

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

/// Refines `model_from_frame` (points of the frame into the model's camera frame) by point-to-plane ICP.
pub fn align(
    model: &DepthModel,
    points: &[Point3<f32>],
    model_from_frame: &mut Isometry3<f64>,
    max_distance_m: f64,
    iterations: usize,
) -> Option<IcpResult> {
    let mut pose = *model_from_frame;
    let mut result = None;
    // Coarse to fine: all but the last two iterations use every third point.
    let coarse: Vec<Point3<f32>> = points.iter().step_by(3).copied().collect();
    let mut coarse_phase = true;
    for iteration in 0..iterations {
        let use_coarse = coarse_phase && iteration + 2 < iterations;
        let points = if use_coarse { &coarse[..] } else { points };
        let min_count = if use_coarse { 40 } else { 100 };
        // The association distance shrinks from `max_distance_m` to a third of it.
        let t = iteration as f64 / (iterations.max(2) - 1) as f64;
        let gate = max_distance_m * (1.0 - 2.0 * t / 3.0);
        let accumulate = |(mut h, mut g, mut count, mut sse): (Matrix6<f64>, Vector6<f64>, usize, f64),
                          q: &Point3<f32>| {
            let p = pose * Point3::new(f64::from(q.x), f64::from(q.y), f64::from(q.z));
            let Some((v, n)) = model.lookup(&p) else { return (h, g, count, sse) };
            let v = Point3::new(f64::from(v.x), f64::from(v.y), f64::from(v.z));
            let n = Vector3::new(f64::from(n.x), f64::from(n.y), f64::from(n.z));
            let d = p - v;
            if d.norm() > gate {
                return (h, g, count, sse);
            }
            let r = n.dot(&d);
            // Huber at 1 cm.
            let weight = if r.abs() < 0.01 { 1.0 } else { 0.01 / r.abs() };
            let mut j = Vector6::zeros();
            j.fixed_rows_mut::<3>(0).copy_from(&n);
            j.fixed_rows_mut::<3>(3).copy_from(&p.coords.cross(&n));
            h += j * j.transpose() * weight;
            g += j * (r * weight);
            sse += r * r;
            count += 1;
            (h, g, count, sse)
        };
        let zero = || (Matrix6::<f64>::zeros(), Vector6::<f64>::zeros(), 0usize, 0.0);
        let (h, g, count, sse) = points
            .par_chunks(2048)
            .map(|chunk| chunk.iter().fold(zero(), accumulate))
            .reduce(zero, |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2, a.3 + b.3));
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
    use nalgebra::{Translation3, UnitQuaternion};

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

    #[test]
    fn aligns_two_views_of_a_room() {
        let camera = PinholeCamera::gst_benchmark();
        let look = UnitQuaternion::from_euler_angles(-std::f64::consts::FRAC_PI_2, 0.0, 0.0);
        let a = Isometry3::from_parts(Translation3::new(0.0, 0.0, 1.2), look);
        let b = Isometry3::from_parts(
            Translation3::new(0.08, 0.05, 1.25),
            UnitQuaternion::from_euler_angles(0.02, 0.0, 0.06) * look,
        );
        let model = DepthModel::new(&DepthGrid::new(&camera, &room_depth(&camera, &a), 4, (0.1, 10.0)));
        let points = DepthGrid::new(&camera, &room_depth(&camera, &b), 4, (0.1, 10.0)).points();
        let truth = a.inverse() * b;
        let mut estimate = Isometry3::identity();
        let result = align(&model, &points, &mut estimate, 0.2, 20).expect("converges");
        let error = (estimate.inverse() * truth).translation.vector.norm();
        assert!(error < 5e-3, "translation error {error} m, {result:?}");
    }
}
