//! Point-to-plane ICP with projective data association (KinectFusion style): refines the pose of a depth
//! frame against a keyframe's depth, both subsampled.

use nalgebra::{Isometry3, Matrix6, Point3, Vector3, Vector6};

use gst_core::{DepthImage, PinholeCamera};

use crate::optimize::perturb;

/// A keyframe's depth as vertex and normal maps at a reduced resolution, in the keyframe's camera frame.
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

/// Back-projects every `step`-th pixel of `depth` within the range: points in the camera frame, row-major
/// on the reduced grid (`None` where there is no depth).
fn vertex_grid(
    camera: &PinholeCamera,
    depth: &DepthImage,
    step: u32,
    range: (f32, f32),
) -> (usize, usize, Vec<Option<Point3<f32>>>) {
    let (w, h) = ((depth.width() / step) as usize, (depth.height() / step) as usize);
    let mut vertices = Vec::with_capacity(w * h);
    for y in 0..h {
        for x in 0..w {
            let (px, py) = (x as u32 * step + step / 2, y as u32 * step + step / 2);
            let z = depth.get(px, py).copied().unwrap_or(0.0);
            vertices.push((z.is_finite() && z >= range.0 && z <= range.1).then(|| {
                Point3::new(
                    ((f64::from(px) - camera.cx) / camera.fx) as f32 * z,
                    ((f64::from(py) - camera.cy) / camera.fy) as f32 * z,
                    z,
                )
            }));
        }
    }
    (w, h, vertices)
}

impl DepthModel {
    pub fn new(camera: &PinholeCamera, depth: &DepthImage, step: u32, range: (f32, f32)) -> Self {
        let (width, height, vertices) = vertex_grid(camera, depth, step, range);
        let s = f64::from(step);
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
        Self {
            width,
            height,
            fx: camera.fx / s,
            fy: camera.fy / s,
            cx: (camera.cx - (s - 1.0) / 2.0) / s,
            cy: (camera.cy - (s - 1.0) / 2.0) / s,
            vertices,
            normals,
        }
    }

    fn lookup(&self, p: &Point3<f64>) -> Option<(Point3<f32>, Vector3<f32>)> {
        if p.z <= 0.0 {
            return None;
        }
        let x = (self.fx * p.x / p.z + self.cx).round();
        let y = (self.fy * p.y / p.z + self.cy).round();
        if x < 0.0 || y < 0.0 || x >= self.width as f64 || y >= self.height as f64 {
            return None;
        }
        let k = y as usize * self.width + x as usize;
        Some((self.vertices[k]?, self.normals[k]?))
    }
}

/// The points of a frame used to align it (subsampled back-projection), in its camera frame.
pub fn frame_points(camera: &PinholeCamera, depth: &DepthImage, step: u32, range: (f32, f32)) -> Vec<Point3<f32>> {
    vertex_grid(camera, depth, step, range).2.into_iter().flatten().collect()
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
    for iteration in 0..iterations {
        // The association distance shrinks from `max_distance_m` to a third of it.
        let t = iteration as f64 / (iterations.max(2) - 1) as f64;
        let gate = max_distance_m * (1.0 - 2.0 * t / 3.0);
        let mut h = Matrix6::<f64>::zeros();
        let mut g = Vector6::<f64>::zeros();
        let mut count = 0usize;
        let mut sse = 0.0;
        for q in points {
            let p = pose * Point3::new(f64::from(q.x), f64::from(q.y), f64::from(q.z));
            let Some((v, n)) = model.lookup(&p) else { continue };
            let v = Point3::new(f64::from(v.x), f64::from(v.y), f64::from(v.z));
            let n = Vector3::new(f64::from(n.x), f64::from(n.y), f64::from(n.z));
            let d = p - v;
            if d.norm() > gate {
                continue;
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
        }
        if count < 100 {
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
        if step.norm() < 1e-6 {
            break;
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
        let model = DepthModel::new(&camera, &room_depth(&camera, &a), 4, (0.1, 10.0));
        let points = frame_points(&camera, &room_depth(&camera, &b), 4, (0.1, 10.0));
        let truth = a.inverse() * b;
        let mut estimate = Isometry3::identity();
        let result = align(&model, &points, &mut estimate, 0.2, 20).expect("converges");
        let error = (estimate.inverse() * truth).translation.vector.norm();
        assert!(error < 5e-3, "translation error {error} m, {result:?}");
    }
}
