//! Motion-only optimisation of one camera pose: reprojection (and depth) residuals of matched map points,
//! Gauss–Newton with a Huber kernel and rounds of outlier rejection (as ORB-SLAM's pose optimisation), and
//! PnP-RANSAC through OpenCV for a pose without a prior.

use nalgebra::{Isometry3, Matrix3, Matrix6, Point3, Translation3, UnitQuaternion, Vector3, Vector6};
use opencv::core::{Mat, Vector};
use opencv::prelude::*;

use gst_core::PinholeCamera;

use crate::SlamError;

/// Virtual stereo baseline that turns a depth into a disparity residual in pixels (ORB-SLAM's RGB-D mode).
pub const VIRTUAL_BASELINE_M: f64 = 0.08;

/// χ² (95%) of a 2D and a 3D residual.
const CHI2_MONO: f64 = 5.991;
const CHI2_STEREO: f64 = 7.815;

/// A map point matched to a keypoint of the frame.
#[derive(Clone, Copy, Debug)]
pub struct Observation {
    pub point_world: Point3<f64>,
    pub u: f64,
    pub v: f64,
    /// Measured depth of the keypoint, metres.
    pub depth_m: Option<f64>,
    /// Standard deviation of the keypoint position, pixels (the pyramid scale of its level).
    pub sigma_px: f64,
}

/// Applies a left perturbation `[δt; δω]` to `camera_from_world`.
pub fn perturb(pose: &Isometry3<f64>, delta: &Vector6<f64>) -> Isometry3<f64> {
    let rotation = UnitQuaternion::from_scaled_axis(Vector3::new(delta[3], delta[4], delta[5]));
    let update = Isometry3::from_parts(Translation3::new(delta[0], delta[1], delta[2]), rotation);
    update * pose
}

fn skew(v: &Vector3<f64>) -> Matrix3<f64> {
    Matrix3::new(0.0, -v.z, v.y, v.z, 0.0, -v.x, -v.y, v.x, 0.0)
}

/// Residual (2 or 3 rows) and its Jacobian with respect to a left perturbation of `camera_from_world`.
fn residual(
    camera: &PinholeCamera,
    pose: &Isometry3<f64>,
    obs: &Observation,
) -> Option<(Vector3<f64>, nalgebra::Matrix3x6<f64>, bool)> {
    let p = pose * obs.point_world;
    if p.z < 0.05 {
        return None;
    }
    let (fx, fy) = (camera.fx, camera.fy);
    let inv_z = 1.0 / p.z;
    let u = fx * p.x * inv_z + camera.cx;
    let v = fy * p.y * inv_z + camera.cy;
    let bf = fx * VIRTUAL_BASELINE_M;
    let mut r = Vector3::new(u - obs.u, v - obs.v, 0.0);
    // ∂(u, v, d)/∂p, d = bf / z.
    let mut dproj = nalgebra::Matrix3::<f64>::zeros();
    dproj[(0, 0)] = fx * inv_z;
    dproj[(0, 2)] = -fx * p.x * inv_z * inv_z;
    dproj[(1, 1)] = fy * inv_z;
    dproj[(1, 2)] = -fy * p.y * inv_z * inv_z;
    let stereo = obs.depth_m.is_some();
    if let Some(z) = obs.depth_m {
        r[2] = bf * inv_z - bf / z;
        dproj[(2, 2)] = -bf * inv_z * inv_z;
    }
    // ∂p/∂[δt; δω] = [I, -[p]×].
    let mut dp = nalgebra::Matrix3x6::<f64>::zeros();
    dp.fixed_view_mut::<3, 3>(0, 0).copy_from(&Matrix3::identity());
    dp.fixed_view_mut::<3, 3>(0, 3).copy_from(&(-skew(&p.coords)));
    Some((r, dproj * dp, stereo))
}

/// Optimises `camera_from_world` against the observations; marks outliers in `inlier` (which must have the
/// observations' length; entries set to `false` on entry are ignored in the first round too). Returns the
/// number of inliers.
pub fn optimize_pose(
    camera: &PinholeCamera,
    camera_from_world: &mut Isometry3<f64>,
    observations: &[Observation],
    inlier: &mut [bool],
) -> usize {
    const ROUNDS: usize = 4;
    const ITERATIONS: usize = 10;
    let mut pose = *camera_from_world;
    for round in 0..ROUNDS {
        for _ in 0..ITERATIONS {
            let mut h = Matrix6::<f64>::zeros();
            let mut g = Vector6::<f64>::zeros();
            let mut used = 0;
            for (obs, &ok) in observations.iter().zip(inlier.iter()) {
                if !ok {
                    continue;
                }
                let Some((r, j, stereo)) = residual(camera, &pose, obs) else { continue };
                let info = 1.0 / (obs.sigma_px * obs.sigma_px);
                let rows = if stereo { 3 } else { 2 };
                let chi2 = info * r.rows(0, rows).norm_squared();
                let delta = if stereo { CHI2_STEREO } else { CHI2_MONO }.sqrt();
                let e = chi2.sqrt();
                let weight = info * if e <= delta { 1.0 } else { delta / e };
                let j = j.rows(0, rows);
                h += j.transpose() * j * weight;
                g += j.transpose() * r.rows(0, rows) * weight;
                used += 1;
            }
            if used < 6 {
                break;
            }
            let Some(step) = h.cholesky().map(|c| c.solve(&(-g))) else { break };
            pose = perturb(&pose, &step);
            if step.norm() < 1e-7 {
                break;
            }
        }
        // Reclassify every observation (outliers may come back) with the current pose.
        for (obs, ok) in observations.iter().zip(inlier.iter_mut()) {
            *ok = match residual(camera, &pose, obs) {
                Some((r, _, stereo)) => {
                    let info = 1.0 / (obs.sigma_px * obs.sigma_px);
                    let rows = if stereo { 3 } else { 2 };
                    info * r.rows(0, rows).norm_squared() < if stereo { CHI2_STEREO } else { CHI2_MONO }
                }
                None => false,
            };
        }
        if round == ROUNDS - 1 {
            break;
        }
    }
    *camera_from_world = pose;
    inlier.iter().filter(|&&b| b).count()
}

/// A PnP solution: `camera_from_world` and the inlier mask of the correspondences.
pub type PnpSolution = (Isometry3<f64>, Vec<bool>);

/// PnP-RANSAC (OpenCV: AP3P minimal solutions inside RANSAC, up to 1000 iterations, refined on the inliers) on 2D–3D correspondences: `camera_from_world` and the inlier
/// mask, or `None` when no consensus of at least `min_inliers` is found.
pub fn pnp_ransac(
    camera: &PinholeCamera,
    points_world: &[Point3<f64>],
    pixels: &[[f64; 2]],
    reprojection_px: f64,
    min_inliers: usize,
) -> Result<Option<PnpSolution>, SlamError> {
    if points_world.len() < min_inliers.max(6) || points_world.len() != pixels.len() {
        return Ok(None);
    }
    let objects: Vector<opencv::core::Point3f> =
        points_world.iter().map(|p| opencv::core::Point3f::new(p.x as f32, p.y as f32, p.z as f32)).collect();
    let images: Vector<opencv::core::Point2f> =
        pixels.iter().map(|p| opencv::core::Point2f::new(p[0] as f32, p[1] as f32)).collect();
    let k = Mat::from_slice_2d(&[[camera.fx, 0.0, camera.cx], [0.0, camera.fy, camera.cy], [0.0, 0.0, 1.0]])?;
    let mut rvec = Mat::default();
    let mut tvec = Mat::default();
    let mut inliers = Vector::<i32>::new();
    let found = opencv::calib3d::solve_pnp_ransac(
        &objects,
        &images,
        &k,
        &Mat::default(),
        &mut rvec,
        &mut tvec,
        false,
        1000,
        reprojection_px as f32,
        0.999,
        &mut inliers,
        opencv::calib3d::SOLVEPNP_AP3P,
    )?;
    if !found || inliers.len() < min_inliers {
        return Ok(None);
    }
    let r = [*rvec.at::<f64>(0)?, *rvec.at::<f64>(1)?, *rvec.at::<f64>(2)?];
    let t = [*tvec.at::<f64>(0)?, *tvec.at::<f64>(1)?, *tvec.at::<f64>(2)?];
    if r.iter().chain(&t).any(|x| !x.is_finite()) {
        return Ok(None);
    }
    let rotation = UnitQuaternion::from_scaled_axis(Vector3::new(r[0], r[1], r[2]));
    let pose = Isometry3::from_parts(Translation3::new(t[0], t[1], t[2]), rotation);
    let mut mask = vec![false; points_world.len()];
    for i in inliers.iter() {
        if let Some(m) = mask.get_mut(i as usize) {
            *m = true;
        }
    }
    Ok(Some((pose, mask)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn scene(rng: &mut impl Rng, camera: &PinholeCamera, truth: &Isometry3<f64>) -> Vec<Observation> {
        (0..300)
            .filter_map(|_| {
                let p_c =
                    Point3::new(rng.gen_range(-2.0..2.0), rng.gen_range(-1.5..1.5), rng.gen_range(1.0..6.0));
                let uv = camera.project(&p_c)?;
                camera.contains(&uv).then(|| Observation {
                    point_world: truth.inverse() * p_c,
                    u: uv.x,
                    v: uv.y,
                    depth_m: Some(p_c.z),
                    sigma_px: 1.0,
                })
            })
            .collect()
    }

    #[test]
    fn recovers_a_pose_from_a_perturbed_start_despite_outliers() {
        let camera = PinholeCamera::gst_benchmark();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let truth = Isometry3::from_parts(
            Translation3::new(0.3, -0.2, 1.0),
            UnitQuaternion::from_euler_angles(0.1, -0.3, 0.2),
        );
        let mut obs = scene(&mut rng, &camera, &truth);
        let n = obs.len();
        for o in obs.iter_mut().take(n / 5) {
            o.u += rng.gen_range(20.0..60.0);
        }
        let mut pose = perturb(&truth, &Vector6::new(0.05, -0.04, 0.03, 0.02, -0.03, 0.01));
        let mut inlier = vec![true; n];
        let inliers = optimize_pose(&camera, &mut pose, &obs, &mut inlier);
        assert!(inliers >= n - n / 5 - 2 && inliers <= n - n / 5, "{inliers} of {n}");
        let error = (pose.inverse() * truth).translation.vector.norm();
        assert!(error < 1e-6, "translation error {error}");
    }

    #[test]
    fn pnp_ransac_finds_the_pose_without_a_prior() -> Result<(), SlamError> {
        let camera = PinholeCamera::gst_benchmark();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        let truth = Isometry3::from_parts(
            Translation3::new(-0.5, 0.1, 2.0),
            UnitQuaternion::from_euler_angles(0.0, 0.8, 0.1),
        );
        let mut obs = scene(&mut rng, &camera, &truth);
        for o in obs.iter_mut().take(60) {
            o.v = rng.gen_range(0.0..500.0);
        }
        let points: Vec<_> = obs.iter().map(|o| o.point_world).collect();
        let pixels: Vec<_> = obs.iter().map(|o| [o.u, o.v]).collect();
        let (pose, mask) =
            pnp_ransac(&camera, &points, &pixels, 3.0, 30)?.ok_or(SlamError::Optimisation("none".into()))?;
        assert!(mask.iter().filter(|&&m| m).count() >= obs.len() - 62);
        assert!((pose.inverse() * truth).translation.vector.norm() < 1e-3);
        Ok(())
    }
}
