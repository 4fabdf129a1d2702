//! Upright PnP-RANSAC: camera poses of a camera carried without roll, whose pitch lies in a known range.
//!
//! With the world's vertical known and the roll zero, a pitch leaves four unknowns (the heading and the
//! position), and two 2D–3D correspondences determine them. A RANSAC over pairs needs far fewer samples than
//! one over the triples of a general minimal solver when few correspondences are right: at 3% inliers a
//! pair is right once in 1100 draws, a triple once in 37,000. The pitch is swept over its range.
//!
//! Cameras follow the OpenCV convention (x right, y down, z forward).

use gst_core::PinholeCamera;
use nalgebra::{Isometry3, Matrix3, Point3, Rotation3, Translation3, UnitQuaternion, Vector2, Vector3};

/// How [`upright_ransac`] searches.
#[derive(Debug, Clone)]
pub struct UprightConfig {
    /// Pitches tried, degrees (positive: looking up).
    pub pitch_min_deg: f64,
    pub pitch_max_deg: f64,
    pub pitch_step_deg: f64,
    /// Pairs drawn per pitch.
    pub iterations: usize,
    /// Reprojection error of an inlier, pixels.
    pub threshold_px: f64,
    pub seed: u64,
}

impl Default for UprightConfig {
    fn default() -> Self {
        Self {
            pitch_min_deg: -25.0,
            pitch_max_deg: 10.0,
            pitch_step_deg: 1.5,
            iterations: 1500,
            threshold_px: 6.0,
            seed: 0x5eed,
        }
    }
}

/// A right-handed horizontal basis `(a, b)` with `a × b = up`.
fn horizontal_basis(up: &Vector3<f64>) -> (Vector3<f64>, Vector3<f64>) {
    let helper = if up.x.abs() < 0.9 { Vector3::x() } else { Vector3::y() };
    let a = (helper - up * helper.dot(up)).normalize();
    (a, up.cross(&a))
}

/// The rotation `camera_from_world` of a camera with no roll, heading `yaw` (radians, from `a` towards `b` of
/// [`horizontal_basis`]) and `pitch` (radians, positive up).
fn upright_rotation(up: &Vector3<f64>, yaw: f64, pitch: f64) -> Rotation3<f64> {
    let (a, b) = horizontal_basis(up);
    let forward = a * yaw.cos() + b * yaw.sin();
    let z = forward * pitch.cos() + up * pitch.sin();
    let y = forward * pitch.sin() - up * pitch.cos();
    let x = forward.cross(up);
    Rotation3::from_matrix_unchecked(Matrix3::from_rows(&[x.transpose(), y.transpose(), z.transpose()]))
}

/// A correspondence's ray in the level camera frame of one pitch: its horizontal part `w` (2D, in the frame
/// where the heading is zero) and its vertical part.
#[derive(Clone, Copy)]
struct LevelRay {
    w: Vector2<f64>,
    up: f64,
}

fn level_ray(camera: &PinholeCamera, pixel: [f64; 2], pitch: f64) -> LevelRay {
    let (bx, by) = ((pixel[0] - camera.cx) / camera.fx, (pixel[1] - camera.cy) / camera.fy);
    let (s, c) = pitch.sin_cos();
    // Components along the level forward, the camera's x (horizontal, to the right) and up.
    let forward = by * s + c;
    let right = bx;
    let up = -by * c + s;
    // forward × up = x (right): with a × b = up, right is the forward direction turned by -90°.
    LevelRay { w: Vector2::new(forward, -right), up }
}

/// The poses (`yaw`, camera centre) of at most two solutions through two correspondences at one pitch.
fn solve_pair(
    points: [&Vector3<f64>; 2],
    rays: [LevelRay; 2],
    up: &Vector3<f64>,
    basis: &(Vector3<f64>, Vector3<f64>),
) -> Vec<(f64, Vector3<f64>)> {
    let delta = points[0] - points[1];
    let dz = delta.dot(up);
    let dh = Vector2::new(delta.dot(&basis.0), delta.dot(&basis.1));
    // Depth along each ray: λ0 up0 - λ1 up1 = dz, |λ0 w0 - λ1 w1| = |dh|. Divide by the steeper ray.
    let swap = rays[1].up.abs() > rays[0].up.abs();
    let (i, j) = if swap { (1, 0) } else { (0, 1) };
    let (ri, rj) = (rays[i], rays[j]);
    if ri.up.abs() < 1e-3 {
        return Vec::new();
    }
    // Written for (i, j): λi up_i - λj up_j = ±dz (the sign of dz follows the order of the pair).
    let dz_ij = if swap { -dz } else { dz };
    let p = dz_ij / ri.up;
    let q = rj.up / ri.up;
    // λi = p + q λj; V(λj) = λi wi - λj wj = p wi + λj (q wi - wj).
    let a_vec = ri.w * p;
    let b_vec = ri.w * q - rj.w;
    let (qa, qb, qc) =
        (b_vec.norm_squared(), 2.0 * a_vec.dot(&b_vec), a_vec.norm_squared() - dh.norm_squared());
    if qa < 1e-12 {
        return Vec::new();
    }
    let disc = qb * qb - 4.0 * qa * qc;
    if disc < 0.0 {
        return Vec::new();
    }
    let root = disc.sqrt();
    let mut solutions = Vec::new();
    for lambda_j in [(-qb + root) / (2.0 * qa), (-qb - root) / (2.0 * qa)] {
        let lambda_i = p + q * lambda_j;
        if lambda_i <= 0.0 || lambda_j <= 0.0 {
            continue;
        }
        // The horizontal offset between the pair in the heading-zero frame, rotated by the yaw onto dh.
        let local = if swap { rj.w * lambda_j - ri.w * lambda_i } else { ri.w * lambda_i - rj.w * lambda_j };
        if local.norm() < 1e-9 {
            continue;
        }
        let yaw = dh.y.atan2(dh.x) - local.y.atan2(local.x);
        let (s, c) = yaw.sin_cos();
        let (lambda0, ray0) = if swap { (lambda_j, rj) } else { (lambda_i, ri) };
        let w0 = Vector2::new(c * ray0.w.x - s * ray0.w.y, s * ray0.w.x + c * ray0.w.y);
        let direction = basis.0 * w0.x + basis.1 * w0.y + up * ray0.up;
        solutions.push((yaw, points[0] - direction * lambda0));
    }
    solutions
}

/// Upright PnP-RANSAC on 2D–3D correspondences for a camera without roll under the world's vertical `up`
/// (unit): `camera_from_world` and the inlier mask of the best consensus over the swept pitches, or `None`
/// when none reaches `min_inliers`. The pose is the minimal solution's; refine it on the inliers.
pub fn upright_ransac(
    camera: &PinholeCamera,
    points_world: &[Point3<f64>],
    pixels: &[[f64; 2]],
    up: &Vector3<f64>,
    config: &UprightConfig,
    min_inliers: usize,
) -> Option<(Isometry3<f64>, Vec<bool>)> {
    let n = points_world.len();
    if n < min_inliers.max(2) || n != pixels.len() || config.pitch_step_deg <= 0.0 {
        return None;
    }
    let up = up.normalize();
    let basis = horizontal_basis(&up);
    let mut state = config.seed;
    let threshold_sq = config.threshold_px * config.threshold_px;
    let mut best: Option<(usize, Isometry3<f64>)> = None;
    let steps = ((config.pitch_max_deg - config.pitch_min_deg) / config.pitch_step_deg).floor() as usize;
    for step in 0..=steps {
        let pitch = (config.pitch_min_deg + step as f64 * config.pitch_step_deg).to_radians();
        let rays: Vec<LevelRay> = pixels.iter().map(|&p| level_ray(camera, p, pitch)).collect();
        for _ in 0..config.iterations {
            let i = (splitmix(&mut state) % n as u64) as usize;
            let j = (splitmix(&mut state) % n as u64) as usize;
            if i == j {
                continue;
            }
            let (pi, pj) = (points_world[i].coords, points_world[j].coords);
            for (yaw, centre) in solve_pair([&pi, &pj], [rays[i], rays[j]], &up, &basis) {
                let rotation = upright_rotation(&up, yaw, pitch);
                let camera_from_world = Isometry3::from_parts(
                    Translation3::from(-(rotation * centre)),
                    UnitQuaternion::from_rotation_matrix(&rotation),
                );
                let count =
                    count_inliers(camera, &camera_from_world, points_world, pixels, threshold_sq, None);
                if best.as_ref().is_none_or(|(b, _)| count > *b) {
                    best = Some((count, camera_from_world));
                }
            }
        }
    }
    let (count, pose) = best?;
    if count < min_inliers {
        return None;
    }
    let mut mask = vec![false; n];
    count_inliers(camera, &pose, points_world, pixels, threshold_sq, Some(&mut mask));
    Some((pose, mask))
}

/// SplitMix64: a seeded, dependency-free generator for drawing the pairs (same seed, same draws).
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn count_inliers(
    camera: &PinholeCamera,
    camera_from_world: &Isometry3<f64>,
    points_world: &[Point3<f64>],
    pixels: &[[f64; 2]],
    threshold_sq: f64,
    mut mask: Option<&mut Vec<bool>>,
) -> usize {
    let mut count = 0;
    for (k, (point, pixel)) in points_world.iter().zip(pixels).enumerate() {
        let q = camera_from_world * point;
        if q.z <= 1e-6 {
            continue;
        }
        let du = camera.fx * q.x / q.z + camera.cx - pixel[0];
        let dv = camera.fy * q.y / q.z + camera.cy - pixel[1];
        if du * du + dv * dv < threshold_sq {
            count += 1;
            if let Some(mask) = mask.as_deref_mut() {
                mask[k] = true;
            }
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;
    use gst_core::{Pose3, vertical_from_cameras};
    use rand::{Rng, SeedableRng};

    fn camera() -> PinholeCamera {
        PinholeCamera::gst_benchmark()
    }

    /// A level camera (roll 0) at `centre`, heading `yaw`, pitch `pitch` (degrees) under a tilted world's up.
    fn pose(up: &Vector3<f64>, centre: Vector3<f64>, yaw_deg: f64, pitch_deg: f64) -> Isometry3<f64> {
        let rotation = upright_rotation(up, yaw_deg.to_radians(), pitch_deg.to_radians());
        Isometry3::from_parts(
            Translation3::from(-(rotation * centre)),
            UnitQuaternion::from_rotation_matrix(&rotation),
        )
    }

    fn tilted_up() -> Vector3<f64> {
        Vector3::new(0.1, -0.95, 0.2).normalize()
    }

    #[test]
    fn a_level_camera_keeps_its_x_axis_horizontal_and_looks_along_its_pitch() {
        let up = tilted_up();
        let camera_from_world = pose(&up, Vector3::new(1.0, 2.0, 3.0), 40.0, -12.0);
        let world_from_camera = camera_from_world.inverse();
        let x = world_from_camera.rotation * Vector3::x();
        let z = world_from_camera.rotation * Vector3::z();
        assert!(x.dot(&up).abs() < 1e-12);
        assert!((z.dot(&up).asin().to_degrees() + 12.0).abs() < 1e-9);
        assert!((world_from_camera.translation.vector - Vector3::new(1.0, 2.0, 3.0)).norm() < 1e-12);
    }

    #[test]
    fn the_vertical_is_read_from_level_cameras() {
        let up = tilted_up();
        let poses: Vec<Pose3> = [(0.0, -5.0), (70.0, 0.0), (150.0, -10.0), (260.0, 3.0)]
            .iter()
            .map(|&(yaw, pitch)| Pose3(pose(&up, Vector3::zeros(), yaw, pitch).inverse()))
            .collect();
        let found = vertical_from_cameras(&poses).expect("vertical");
        assert!((found - up).norm() < 1e-9, "{found} vs {up}");
        assert!(vertical_from_cameras(&poses[..1]).is_none());
    }

    #[test]
    fn two_correspondences_give_the_pose_at_the_right_pitch() {
        let up = tilted_up();
        let basis = horizontal_basis(&up);
        let camera = camera();
        let truth = pose(&up, Vector3::new(0.5, -1.2, 2.0), 123.0, -8.0);
        let world_from_camera = truth.inverse();
        // Two points in front of the camera, at different heights.
        let points: Vec<Vector3<f64>> = [Vector3::new(-0.6, 0.4, 3.0), Vector3::new(0.8, -0.3, 5.0)]
            .iter()
            .map(|p| (world_from_camera * Point3::from(*p)).coords)
            .collect();
        let pixels: Vec<[f64; 2]> = points
            .iter()
            .map(|p| {
                let q = truth * Point3::from(*p);
                [camera.fx * q.x / q.z + camera.cx, camera.fy * q.y / q.z + camera.cy]
            })
            .collect();
        let pitch = (-8.0f64).to_radians();
        let rays = [level_ray(&camera, pixels[0], pitch), level_ray(&camera, pixels[1], pitch)];
        let solutions = solve_pair([&points[0], &points[1]], rays, &up, &basis);
        let centre = world_from_camera.translation.vector;
        assert!(
            solutions.iter().any(|(yaw, c)| {
                let pi = std::f64::consts::PI;
                let turn = (yaw - 123f64.to_radians() + pi).rem_euclid(2.0 * pi) - pi;
                (c - centre).norm() < 1e-9 && turn.abs() < 1e-9
            }),
            "{solutions:?} vs {centre}"
        );
    }

    #[test]
    fn ransac_finds_the_pose_when_few_correspondences_are_right() {
        let up = tilted_up();
        let camera = camera();
        let truth = pose(&up, Vector3::new(2.0, 0.3, -1.0), -70.0, -6.0);
        let world_from_camera = truth.inverse();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let mut points = Vec::new();
        let mut pixels = Vec::new();
        // 20 right correspondences among 400 (5%), the rest pixels paired with random points.
        for k in 0..400 {
            let local =
                Point3::new(rng.gen_range(-3.0..3.0), rng.gen_range(-2.0..2.0), rng.gen_range(1.0..8.0));
            let world = world_from_camera * local;
            let pixel = if k < 20 {
                [camera.fx * local.x / local.z + camera.cx, camera.fy * local.y / local.z + camera.cy]
            } else {
                [rng.gen_range(0.0..640.0), rng.gen_range(0.0..512.0)]
            };
            points.push(world);
            pixels.push(pixel);
        }
        let (found, mask) = upright_ransac(&camera, &points, &pixels, &up, &UprightConfig::default(), 15)
            .expect("a consensus");
        assert!(mask[..20].iter().filter(|m| **m).count() >= 18, "{mask:?}");
        let centre = found.inverse().translation.vector;
        assert!((centre - world_from_camera.translation.vector).norm() < 0.15, "{centre}");
        assert!((found.rotation.inverse() * truth.rotation).angle().to_degrees() < 2.0);
        // Random pairs alone never reach the bar.
        let shuffled: Vec<[f64; 2]> = pixels.iter().skip(20).copied().collect();
        assert!(
            upright_ransac(&camera, &points[20..], &shuffled, &up, &UprightConfig::default(), 15).is_none()
        );
    }
}
