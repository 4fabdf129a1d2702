//! Trajectory metrics: absolute trajectory error (ATE) and relative pose error (RPE) of an estimated camera
//! trajectory against ground truth, with the definitions and defaults of evo (`evo_ape`, `evo_rpe`, Grupp
//! 2017), so that our numbers can be compared with numbers reported through evo, and checked against it
//! (`tests/traj_eval.rs` runs both).
//!
//! Both trajectories hold camera poses `world_from_camera`, each in its own world frame: `gt_world` for the
//! ground truth, `est_world` for the estimate (a SLAM system starts its world wherever it starts).
//!
//! 1. **Association** ([`associate`]): poses are paired by timestamp as evo's
//!    `sync.associate_trajectories` does: each pose of the trajectory with fewer poses (the estimate when
//!    both have as many) is paired with the pose of the other trajectory closest in time, when that is at
//!    most `max_difference_s` away (default [`DEFAULT_MAX_DIFFERENCE_S`]); of two equally close poses the
//!    earlier is taken. As in evo, a pose of the longer trajectory can serve two poses of the shorter one
//!    when the shorter is locally denser (TUM's `associate.py` would drop the second pair instead).
//! 2. **Alignment** ([`umeyama`]): the similarity `gt_world_from_est_world` (rotation `R`, translation `t`,
//!    scale `s`; `s = 1` for SE(3)) that minimises `Σ |p_gt − (s R p_est + t)|²` over the associated camera
//!    positions, in closed form (Umeyama, PAMI 1991). Alignment maps the estimate onto the ground truth,
//!    never the other way: errors are in the ground truth's metres.
//! 3. **ATE** ([`absolute_trajectory_error`]): evo's APE on the translation part, the distances
//!    `|p_gt,i − (s R p_est,i + t)|` in metres, summarised by [`ErrorStatistics`].
//! 4. **RPE** ([`relative_pose_error`]): the drift over `delta` poses. With `Q` the ground truth and `P`
//!    the (aligned) estimate, pairs `(i, i + delta)` are taken on consecutive, non-overlapping windows
//!    (`i = 0, delta, 2 delta, …`, evo's default `all_pairs = false`) of the *associated* poses, so `delta`
//!    counts associated poses, not frames of either file. The error of a pair is
//!    `E_i = (Q_i⁻¹ Q_{i+delta})⁻¹ (P_i⁻¹ P_{i+delta})`; its translation norm in metres and its rotation
//!    angle in degrees are summarised separately. An SE(3) alignment leaves RPE unchanged; a Sim(3)
//!    alignment scales the estimate's relative translations (as `evo_rpe --align --correct_scale`).

use gst_core::{Pose3, Trajectory};
use nalgebra::{Matrix3, UnitQuaternion, Vector3};
use serde::{Deserialize, Serialize};

use crate::SlamError;

/// evo's default largest time difference between associated poses (`--t_max_diff`).
pub const DEFAULT_MAX_DIFFERENCE_S: f64 = 0.01;

/// Fewest associated poses an evaluation accepts: three non-collinear positions fix a rigid alignment.
pub const MIN_ASSOCIATED_POSES: usize = 3;

/// Singular values of the alignment's cross-covariance below this fraction of the largest count as zero:
/// positions whose spread has fewer than two dimensions (all identical, or on one line) cannot fix a
/// rotation about that line.
const DEGENERATE_SINGULAR_VALUE_RATIO: f64 = 1e-12;

/// Iteration cap of the 3x3 SVD (it converges in a handful; the cap only guards against a non-finite input).
const SVD_MAX_ITERATIONS: usize = 1000;

/// A ground-truth pose and the estimated pose associated with it by timestamp.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PosePair {
    pub gt_timestamp_s: f64,
    pub est_timestamp_s: f64,
    pub gt_world_from_camera: Pose3,
    pub est_world_from_camera: Pose3,
}

/// Which transform maps the estimate's world onto the ground truth's before the errors are measured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AlignmentKind {
    /// Compare as given: both trajectories are already in the same world frame.
    None,
    /// Rotation and translation (`evo_ape -a`): the usual choice for RGB-D and stereo SLAM.
    #[default]
    Se3,
    /// Rotation, translation and scale (`evo_ape -as`): for monocular SLAM, whose scale is arbitrary.
    Sim3,
}

/// A similarity `gt_world_from_est_world`: `p_gt = scale * rotation * p_est + translation`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Alignment {
    /// Rotation matrix, serialised as three rows.
    #[serde(with = "matrix_rows")]
    pub rotation: Matrix3<f64>,
    /// Translation in the ground truth's metres.
    pub translation: Vector3<f64>,
    /// Ground-truth metres per estimate unit (1 for SE(3)).
    pub scale: f64,
}

impl Alignment {
    pub fn identity() -> Self {
        Self { rotation: Matrix3::identity(), translation: Vector3::zeros(), scale: 1.0 }
    }

    /// A point of the estimate's world in the ground truth's world.
    pub fn transform_point(&self, est_point: &Vector3<f64>) -> Vector3<f64> {
        self.scale * (self.rotation * est_point) + self.translation
    }

    /// An estimated `est_world_from_camera` as `gt_world_from_camera`: rotated and moved, and its
    /// translation scaled (the camera's orientation is not affected by scale).
    pub fn transform_pose(&self, est_world_from_camera: &Pose3) -> Pose3 {
        let rotation = Pose3::from_rotation_matrix(Vector3::zeros(), &self.rotation).rotation();
        Pose3::from_parts(
            self.transform_point(&est_world_from_camera.translation()),
            rotation * est_world_from_camera.rotation(),
        )
    }
}

impl Alignment {
    /// A ground-truth `gt_world_from_camera` in the estimate's world: the inverse of
    /// [`transform_pose`](Self::transform_pose).
    pub fn inverse_transform_pose(&self, gt_world_from_camera: &Pose3) -> Pose3 {
        let inverse_rotation = self.rotation.transpose();
        let point = inverse_rotation * (gt_world_from_camera.translation() - self.translation) / self.scale;
        let rotation = Pose3::from_rotation_matrix(Vector3::zeros(), &inverse_rotation).rotation();
        Pose3::from_parts(point, rotation * gt_world_from_camera.rotation())
    }
}

/// Summary of a list of errors, as evo's `get_all_statistics` (`std` is the population deviation, `median`
/// the mean of the two middle values for an even count, `sse` the sum of squares).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorStatistics {
    pub rmse: f64,
    pub mean: f64,
    pub median: f64,
    pub std: f64,
    pub min: f64,
    pub max: f64,
    pub sse: f64,
}

impl ErrorStatistics {
    /// The statistics of `errors`, which must not be empty.
    pub fn from_errors(errors: &[f64]) -> Result<Self, SlamError> {
        if errors.is_empty() {
            return Err(SlamError::Evaluation("no errors to summarise".into()));
        }
        let count = errors.len() as f64;
        let sse: f64 = errors.iter().map(|e| e * e).sum();
        let mean = errors.iter().sum::<f64>() / count;
        let variance = errors.iter().map(|e| (e - mean) * (e - mean)).sum::<f64>() / count;
        let mut sorted = errors.to_vec();
        sorted.sort_by(f64::total_cmp);
        let middle = sorted.len() / 2;
        let median = if sorted.len().is_multiple_of(2) {
            0.5 * (sorted[middle - 1] + sorted[middle])
        } else {
            sorted[middle]
        };
        Ok(Self {
            rmse: (sse / count).sqrt(),
            mean,
            median,
            std: variance.sqrt(),
            min: sorted[0],
            max: sorted[sorted.len() - 1],
            sse,
        })
    }
}

/// Absolute trajectory error: distances between ground-truth and aligned estimated camera positions.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AteResult {
    /// Associated poses compared.
    pub pairs: usize,
    pub translation_m: ErrorStatistics,
}

/// Relative pose error over `delta_frames` associated poses.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RpeResult {
    pub delta_frames: usize,
    /// Pose pairs `(i, i + delta)` compared.
    pub pairs: usize,
    /// Norm of the translation of the relative error pose, metres.
    pub translation_m: ErrorStatistics,
    /// Angle of the rotation of the relative error pose, degrees.
    pub rotation_deg: ErrorStatistics,
}

/// How to evaluate an estimated trajectory.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EvaluationOptions {
    /// Largest time difference of associated poses, seconds. Default [`DEFAULT_MAX_DIFFERENCE_S`] (evo's);
    /// raise it for trajectories sampled at different rates, e.g. to half the slower period.
    pub max_difference_s: f64,
    /// Alignment of the estimate onto the ground truth. Default SE(3).
    pub alignment: AlignmentKind,
    /// RPE step in associated poses. Default 1 (frame-to-frame drift); at 30 Hz, 30 gives drift per second.
    pub rpe_delta_frames: usize,
}

impl Default for EvaluationOptions {
    fn default() -> Self {
        Self {
            max_difference_s: DEFAULT_MAX_DIFFERENCE_S,
            alignment: AlignmentKind::Se3,
            rpe_delta_frames: 1,
        }
    }
}

impl EvaluationOptions {
    pub fn validate(&self) -> Result<(), SlamError> {
        if !(self.max_difference_s.is_finite() && self.max_difference_s >= 0.0) {
            return Err(SlamError::InvalidInput(format!(
                "max time difference {} s must be finite and not negative",
                self.max_difference_s
            )));
        }
        if self.rpe_delta_frames == 0 {
            return Err(SlamError::InvalidInput("RPE delta must be at least 1 frame".into()));
        }
        Ok(())
    }
}

/// ATE and RPE of an estimate, with how it was associated and aligned.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrajectoryEvaluation {
    pub options: EvaluationOptions,
    pub gt_poses: usize,
    pub est_poses: usize,
    /// Poses associated by timestamp.
    pub associated_poses: usize,
    /// `gt_world_from_est_world`; `None` without alignment.
    pub alignment: Option<Alignment>,
    pub ate: AteResult,
    pub rpe: RpeResult,
}

/// Associates, aligns and measures: the whole evaluation with evo's definitions (see the module docs).
pub fn evaluate(
    groundtruth: &Trajectory,
    estimate: &Trajectory,
    options: &EvaluationOptions,
) -> Result<TrajectoryEvaluation, SlamError> {
    options.validate()?;
    let pairs = associate(groundtruth, estimate, options.max_difference_s)?;
    if pairs.len() < MIN_ASSOCIATED_POSES {
        return Err(SlamError::Evaluation(format!(
            "only {} poses associated within {} s, at least {MIN_ASSOCIATED_POSES} are needed",
            pairs.len(),
            options.max_difference_s
        )));
    }
    let alignment = align(&pairs, options.alignment)?;
    let gt_world_from_est_world = alignment.unwrap_or_else(Alignment::identity);
    let ate = absolute_trajectory_error(&pairs, &gt_world_from_est_world)?;
    let rpe = relative_pose_error(&pairs, &gt_world_from_est_world, options.rpe_delta_frames)?;
    Ok(TrajectoryEvaluation {
        options: *options,
        gt_poses: groundtruth.len(),
        est_poses: estimate.len(),
        associated_poses: pairs.len(),
        alignment,
        ate,
        rpe,
    })
}

/// Pairs the poses of two trajectories by timestamp, as evo's `associate_trajectories` (see the module
/// docs), in time order. No pair at all is an error that shows both time spans, since it usually means the
/// two files use different clocks.
pub fn associate(
    groundtruth: &Trajectory,
    estimate: &Trajectory,
    max_difference_s: f64,
) -> Result<Vec<PosePair>, SlamError> {
    if !(max_difference_s.is_finite() && max_difference_s >= 0.0) {
        return Err(SlamError::InvalidInput(format!(
            "max time difference {max_difference_s} s must be finite and not negative"
        )));
    }
    if groundtruth.is_empty() || estimate.is_empty() {
        return Err(SlamError::Evaluation(format!(
            "cannot associate an empty trajectory (ground truth: {} poses, estimate: {} poses)",
            groundtruth.len(),
            estimate.len()
        )));
    }
    let estimate_longer = estimate.len() > groundtruth.len();
    let (short, long) = if estimate_longer { (groundtruth, estimate) } else { (estimate, groundtruth) };
    let long_poses = long.poses();
    let mut pairs = Vec::with_capacity(short.len());
    for short_pose in short.poses() {
        let stamp_s = short_pose.timestamp_s;
        let after = long_poses.partition_point(|p| p.timestamp_s <= stamp_s);
        let later = long_poses.get(after).map(|p| (p, p.timestamp_s - stamp_s));
        let earlier = after.checked_sub(1).map(|i| (&long_poses[i], stamp_s - long_poses[i].timestamp_s));
        // Of two equally close poses the earlier wins, as in evo.
        let closest = match (earlier, later) {
            (Some(e), Some(l)) => Some(if l.1 < e.1 { l } else { e }),
            (e, l) => e.or(l),
        };
        let Some((long_pose, difference_s)) = closest else { continue };
        if difference_s > max_difference_s {
            continue;
        }
        let (gt, est) = if estimate_longer { (short_pose, long_pose) } else { (long_pose, short_pose) };
        pairs.push(PosePair {
            gt_timestamp_s: gt.timestamp_s,
            est_timestamp_s: est.timestamp_s,
            gt_world_from_camera: gt.world_from_camera,
            est_world_from_camera: est.world_from_camera,
        });
    }
    if pairs.is_empty() {
        let span = |t: &Trajectory| {
            let poses = t.poses();
            (poses[0].timestamp_s, poses[poses.len() - 1].timestamp_s)
        };
        let (gt_start, gt_end) = span(groundtruth);
        let (est_start, est_end) = span(estimate);
        return Err(SlamError::Evaluation(format!(
            "no timestamps match within {max_difference_s} s: the ground truth spans {gt_start:.6}..{gt_end:.6} s, \
             the estimate {est_start:.6}..{est_end:.6} s"
        )));
    }
    Ok(pairs)
}

/// The alignment `gt_world_from_est_world` of associated poses; `None` for [`AlignmentKind::None`].
pub fn align(pairs: &[PosePair], kind: AlignmentKind) -> Result<Option<Alignment>, SlamError> {
    let with_scale = match kind {
        AlignmentKind::None => return Ok(None),
        AlignmentKind::Se3 => false,
        AlignmentKind::Sim3 => true,
    };
    let est_positions: Vec<Vector3<f64>> =
        pairs.iter().map(|p| p.est_world_from_camera.translation()).collect();
    let gt_positions: Vec<Vector3<f64>> =
        pairs.iter().map(|p| p.gt_world_from_camera.translation()).collect();
    umeyama(&est_positions, &gt_positions, with_scale).map(Some)
}

/// Least-squares similarity `target_from_source` with `target ≈ scale * rotation * source + translation`
/// (Umeyama 1991; scale fixed to 1 unless `with_scale`). Needs at least [`MIN_ASSOCIATED_POSES`] points
/// whose spread is at least planar.
pub fn umeyama(
    source: &[Vector3<f64>],
    target: &[Vector3<f64>],
    with_scale: bool,
) -> Result<Alignment, SlamError> {
    if source.len() != target.len() {
        return Err(SlamError::InvalidInput(format!(
            "alignment needs as many source as target points, has {} and {}",
            source.len(),
            target.len()
        )));
    }
    if source.len() < MIN_ASSOCIATED_POSES {
        return Err(SlamError::Evaluation(format!(
            "alignment needs at least {MIN_ASSOCIATED_POSES} point pairs, has {}",
            source.len()
        )));
    }
    if source.iter().chain(target).any(|p| !p.iter().all(|v| v.is_finite())) {
        return Err(SlamError::InvalidInput("alignment points must be finite".into()));
    }
    let count = source.len() as f64;
    let source_mean = source.iter().sum::<Vector3<f64>>() / count;
    let target_mean = target.iter().sum::<Vector3<f64>>() / count;
    let source_variance = source.iter().map(|p| (p - source_mean).norm_squared()).sum::<f64>() / count;
    let covariance = source
        .iter()
        .zip(target)
        .map(|(s, t)| (t - target_mean) * (s - source_mean).transpose())
        .sum::<Matrix3<f64>>()
        / count;

    let svd = covariance.try_svd(true, true, f64::EPSILON, SVD_MAX_ITERATIONS).ok_or_else(|| {
        SlamError::Optimisation("the SVD of the alignment covariance did not converge".into())
    })?;
    let (Some(u), Some(v_t)) = (svd.u, svd.v_t) else {
        return Err(SlamError::Optimisation("the SVD did not return its singular vectors".into()));
    };
    let singular_values = svd.singular_values;
    let largest = singular_values.max();
    let significant =
        singular_values.iter().filter(|&&d| d > DEGENERATE_SINGULAR_VALUE_RATIO * largest).count();
    if !(largest > 0.0) || significant < 2 {
        return Err(SlamError::Evaluation(format!(
            "cannot align: the {} positions are {} (the alignment would be ambiguous)",
            source.len(),
            if largest > 0.0 { "collinear" } else { "all identical" }
        )));
    }
    // Flip the axis of the smallest singular value when U Vᵀ would be a reflection (Umeyama eq. 43).
    let mut signs = Vector3::repeat(1.0);
    if u.determinant() * v_t.determinant() < 0.0 {
        signs[singular_values.imin()] = -1.0;
    }
    let rotation = u * Matrix3::from_diagonal(&signs) * v_t;
    let scale = if with_scale { singular_values.dot(&signs) / source_variance } else { 1.0 };
    let translation = target_mean - scale * (rotation * source_mean);
    Ok(Alignment { rotation, translation, scale })
}

/// ATE of associated poses after mapping the estimate by `gt_world_from_est_world`.
pub fn absolute_trajectory_error(
    pairs: &[PosePair],
    gt_world_from_est_world: &Alignment,
) -> Result<AteResult, SlamError> {
    let errors: Vec<f64> = pairs
        .iter()
        .map(|p| {
            let est_in_gt = gt_world_from_est_world.transform_point(&p.est_world_from_camera.translation());
            (p.gt_world_from_camera.translation() - est_in_gt).norm()
        })
        .collect();
    let translation_m = ErrorStatistics::from_errors(&errors)
        .map_err(|_| SlamError::Evaluation("ATE needs at least one associated pose".into()))?;
    Ok(AteResult { pairs: pairs.len(), translation_m })
}

/// RPE of associated poses over `delta_frames` (consecutive windows, see the module docs), after mapping
/// the estimate by `gt_world_from_est_world`.
pub fn relative_pose_error(
    pairs: &[PosePair],
    gt_world_from_est_world: &Alignment,
    delta_frames: usize,
) -> Result<RpeResult, SlamError> {
    if delta_frames == 0 {
        return Err(SlamError::InvalidInput("RPE delta must be at least 1 frame".into()));
    }
    let est: Vec<Pose3> =
        pairs.iter().map(|p| gt_world_from_est_world.transform_pose(&p.est_world_from_camera)).collect();
    let mut translation_errors = Vec::new();
    let mut rotation_errors = Vec::new();
    for i in (0..pairs.len()).step_by(delta_frames) {
        let j = i + delta_frames;
        if j >= pairs.len() {
            break;
        }
        let gt_i_from_j = pairs[i].gt_world_from_camera.inverse() * pairs[j].gt_world_from_camera;
        let est_i_from_j = est[i].inverse() * est[j];
        let error = gt_i_from_j.inverse() * est_i_from_j;
        translation_errors.push(error.translation().norm());
        rotation_errors.push(rotation_angle(&error.rotation()).to_degrees());
    }
    if translation_errors.is_empty() {
        return Err(SlamError::Evaluation(format!(
            "RPE with delta {delta_frames} needs more than {delta_frames} associated poses, has {}",
            pairs.len()
        )));
    }
    Ok(RpeResult {
        delta_frames,
        pairs: translation_errors.len(),
        translation_m: ErrorStatistics::from_errors(&translation_errors)?,
        rotation_deg: ErrorStatistics::from_errors(&rotation_errors)?,
    })
}

/// Rotation angle in radians, in [0, π], accurate also near zero (where `acos` of the real part is not).
fn rotation_angle(rotation: &UnitQuaternion<f64>) -> f64 {
    2.0 * rotation.imag().norm().atan2(rotation.scalar().abs())
}

/// A 3x3 matrix as three rows in serialised form (nalgebra's own form is a flat column-major list).
mod matrix_rows {
    use nalgebra::Matrix3;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(matrix: &Matrix3<f64>, serializer: S) -> Result<S::Ok, S::Error> {
        let rows: [[f64; 3]; 3] = std::array::from_fn(|r| std::array::from_fn(|c| matrix[(r, c)]));
        rows.serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Matrix3<f64>, D::Error> {
        let rows = <[[f64; 3]; 3]>::deserialize(deserializer)?;
        Ok(Matrix3::from_fn(|r, c| rows[r][c]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gst_core::TimedPose;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// A camera walking a curve through three dimensions while turning, 100 poses at 10 Hz.
    fn groundtruth() -> Trajectory {
        let poses = (0..100)
            .map(|i| {
                let t = i as f64 * 0.1;
                let position =
                    Vector3::new(3.0 * (0.3 * t).cos(), 2.0 * (0.5 * t).sin(), 1.2 + 0.2 * t.sin());
                TimedPose {
                    timestamp_s: t,
                    world_from_camera: Pose3::world_from_camera_yaw_pitch(position, 0.4 * t, 0.1 * t.cos()),
                }
            })
            .collect();
        Trajectory::new(poses).expect("increasing timestamps")
    }

    fn map_poses(trajectory: &Trajectory, f: impl Fn(usize, &TimedPose) -> TimedPose) -> Trajectory {
        Trajectory::new(trajectory.poses().iter().enumerate().map(|(i, p)| f(i, p)).collect())
            .expect("increasing timestamps")
    }

    /// `est_world_from_gt_world` as an alignment, applied to every ground-truth pose.
    fn transformed(trajectory: &Trajectory, est_from_gt: &Alignment) -> Trajectory {
        map_poses(trajectory, |_, p| TimedPose {
            timestamp_s: p.timestamp_s,
            world_from_camera: est_from_gt.transform_pose(&p.world_from_camera),
        })
    }

    fn some_transform(scale: f64) -> Alignment {
        let rotation = UnitQuaternion::from_scaled_axis(Vector3::new(0.3, -1.1, 2.0));
        Alignment {
            rotation: *rotation.to_rotation_matrix().matrix(),
            translation: Vector3::new(4.0, -7.5, 0.3),
            scale,
        }
    }

    #[test]
    fn se3_and_sim3_transformed_copies_align_to_zero_error() -> Result<(), SlamError> {
        let gt = groundtruth();
        for (kind, scale) in [(AlignmentKind::Se3, 1.0), (AlignmentKind::Sim3, 0.37)] {
            let est_from_gt = some_transform(scale);
            let est = transformed(&gt, &est_from_gt);
            let options = EvaluationOptions { alignment: kind, ..EvaluationOptions::default() };
            let evaluation = evaluate(&gt, &est, &options)?;
            assert_eq!(evaluation.associated_poses, 100);
            assert!(evaluation.ate.translation_m.rmse < 1e-9, "{kind:?}: {:?}", evaluation.ate);
            assert!(evaluation.ate.translation_m.max < 1e-9);
            assert!(evaluation.rpe.translation_m.max < 1e-9, "{kind:?}: {:?}", evaluation.rpe);
            assert!(evaluation.rpe.rotation_deg.max < 1e-6);
            let alignment = evaluation.alignment.expect("aligned");
            // The recovered gt_from_est is the inverse of est_from_gt.
            assert!((alignment.scale * scale - 1.0).abs() < 1e-9, "scale {}", alignment.scale);
            assert!((alignment.rotation * est_from_gt.rotation - Matrix3::identity()).norm() < 1e-9);
        }
        Ok(())
    }

    #[test]
    fn without_alignment_a_constant_offset_is_the_ate_and_leaves_rpe_at_zero() -> Result<(), SlamError> {
        let gt = groundtruth();
        let offset = Vector3::new(0.03, -0.04, 0.0); // 5 cm
        let est = map_poses(&gt, |_, p| TimedPose {
            timestamp_s: p.timestamp_s,
            world_from_camera: Pose3::from_parts(
                p.world_from_camera.translation() + offset,
                p.world_from_camera.rotation(),
            ),
        });
        let options = EvaluationOptions { alignment: AlignmentKind::None, ..EvaluationOptions::default() };
        let evaluation = evaluate(&gt, &est, &options)?;
        let ate = evaluation.ate.translation_m;
        for value in [ate.rmse, ate.mean, ate.median, ate.min, ate.max] {
            assert!((value - 0.05).abs() < 1e-12, "{ate:?}");
        }
        assert!(ate.std < 1e-12);
        assert!((ate.sse - 100.0 * 0.0025).abs() < 1e-12);
        assert!(evaluation.alignment.is_none());
        assert!(evaluation.rpe.translation_m.max < 1e-12);
        // SE(3) alignment removes the offset.
        let aligned = evaluate(&gt, &est, &EvaluationOptions::default())?;
        assert!(aligned.ate.translation_m.rmse < 1e-9);
        Ok(())
    }

    #[test]
    fn rpe_of_a_constant_drift_per_frame() -> Result<(), SlamError> {
        // Every step of the estimate moves 1 cm further along the camera's own x axis and turns 0.5° more
        // about its z axis than the ground truth's step: the relative error of each step is that motion.
        let gt = groundtruth();
        let drift = Pose3::from_parts(
            Vector3::new(0.01, 0.0, 0.0),
            UnitQuaternion::from_scaled_axis(Vector3::z() * 0.5f64.to_radians()),
        );
        let mut est_poses = vec![gt.poses()[0]];
        for pair in gt.poses().windows(2) {
            let gt_step = pair[0].world_from_camera.inverse() * pair[1].world_from_camera;
            let previous = est_poses[est_poses.len() - 1].world_from_camera;
            est_poses.push(TimedPose {
                timestamp_s: pair[1].timestamp_s,
                world_from_camera: previous * gt_step * drift,
            });
        }
        let est = Trajectory::new(est_poses).expect("increasing timestamps");
        let options = EvaluationOptions { alignment: AlignmentKind::None, ..EvaluationOptions::default() };
        let rpe = evaluate(&gt, &est, &options)?.rpe;
        assert_eq!((rpe.delta_frames, rpe.pairs), (1, 99));
        assert!((rpe.translation_m.rmse - 0.01).abs() < 1e-9, "{rpe:?}");
        assert!((rpe.translation_m.min - 0.01).abs() < 1e-9);
        assert!((rpe.rotation_deg.mean - 0.5).abs() < 1e-9, "{rpe:?}");
        // An SE(3) alignment does not change RPE.
        let aligned = evaluate(&gt, &est, &EvaluationOptions { alignment: AlignmentKind::Se3, ..options })?;
        assert!((aligned.rpe.translation_m.rmse - rpe.translation_m.rmse).abs() < 1e-9);
        assert!((aligned.rpe.rotation_deg.rmse - rpe.rotation_deg.rmse).abs() < 1e-9);
        // delta = 2 on a straight walk at constant orientation with a constant 1 cm drift along the
        // camera's x axis per frame: the error over two frames is 2 cm.
        let orientation = Pose3::world_from_camera_yaw_pitch(Vector3::zeros(), 0.7, 0.0);
        let walk = |drift_m: f64| {
            Trajectory::new(
                (0..50)
                    .map(|i| TimedPose {
                        timestamp_s: i as f64 * 0.1,
                        world_from_camera: Pose3::from_parts(
                            Vector3::new(0.2, 0.1, 0.0) * i as f64,
                            orientation.rotation(),
                        ) * Pose3::from_parts(
                            Vector3::new(drift_m * i as f64, 0.0, 0.0),
                            UnitQuaternion::identity(),
                        ),
                    })
                    .collect(),
            )
        };
        let options = EvaluationOptions { rpe_delta_frames: 2, ..options };
        let rpe = evaluate(&walk(0.0)?, &walk(0.01)?, &options)?.rpe;
        assert_eq!(rpe.pairs, 24);
        assert!((rpe.translation_m.min - 0.02).abs() < 1e-9 && (rpe.translation_m.max - 0.02).abs() < 1e-9);
        assert!(rpe.rotation_deg.max < 1e-9);
        Ok(())
    }

    #[test]
    fn association_takes_the_nearest_pose_within_the_limit() -> Result<(), SlamError> {
        let gt = groundtruth(); // 10 Hz
        // The estimate: 4 ms late, one pose missing, one 30 ms off (not associated at 10 ms).
        let est = Trajectory::new(
            gt.poses()
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != 10)
                .map(|(i, p)| TimedPose {
                    timestamp_s: p.timestamp_s + if i == 20 { 0.03 } else { 0.004 },
                    ..*p
                })
                .collect(),
        )
        .expect("increasing timestamps");
        let pairs = associate(&gt, &est, DEFAULT_MAX_DIFFERENCE_S)?;
        assert_eq!(pairs.len(), 98);
        assert!(pairs.iter().all(|p| (p.est_timestamp_s - p.gt_timestamp_s - 0.004).abs() < 1e-9));
        assert!(pairs.windows(2).all(|w| w[1].gt_timestamp_s > w[0].gt_timestamp_s));
        assert_eq!(associate(&gt, &est, 0.05)?.len(), 99);
        // Ties go to the earlier pose: 0.05 is as far from 0.0 as from 0.1.
        let one = Trajectory::new(vec![TimedPose { timestamp_s: 0.05, ..gt.poses()[0] }])?;
        let tie = associate(&gt, &one, 0.05)?;
        assert_eq!(tie[0].gt_timestamp_s, 0.0);
        Ok(())
    }

    #[test]
    fn clear_errors_for_unusable_input() -> Result<(), SlamError> {
        let gt = groundtruth();
        // Another clock: nothing matches.
        let shifted = map_poses(&gt, |_, p| TimedPose { timestamp_s: p.timestamp_s + 1000.0, ..*p });
        let error = evaluate(&gt, &shifted, &EvaluationOptions::default()).expect_err("no match").to_string();
        assert!(error.contains("no timestamps match") && error.contains("1000.000000"), "{error}");
        // Two poses.
        let short = Trajectory::new(gt.poses()[..2].to_vec())?;
        let error = evaluate(&gt, &short, &EvaluationOptions::default()).expect_err("too few").to_string();
        assert!(error.contains("only 2 poses associated"), "{error}");
        // Collinear and identical positions.
        let line = map_poses(&gt, |i, p| TimedPose {
            timestamp_s: p.timestamp_s,
            world_from_camera: Pose3::from_parts(
                Vector3::new(i as f64, 2.0 * i as f64, 0.0),
                p.world_from_camera.rotation(),
            ),
        });
        let error = evaluate(&gt, &line, &EvaluationOptions::default()).expect_err("collinear").to_string();
        assert!(error.contains("collinear"), "{error}");
        let still = map_poses(&gt, |_, p| TimedPose {
            timestamp_s: p.timestamp_s,
            world_from_camera: Pose3::identity(),
        });
        let error = evaluate(&gt, &still, &EvaluationOptions::default()).expect_err("identical").to_string();
        assert!(error.contains("all identical"), "{error}");
        // Without alignment a degenerate estimate is still measurable.
        let options = EvaluationOptions { alignment: AlignmentKind::None, ..EvaluationOptions::default() };
        assert!(evaluate(&gt, &still, &options).is_ok());
        // RPE delta larger than the trajectory, and invalid options.
        let options = EvaluationOptions { rpe_delta_frames: 100, ..EvaluationOptions::default() };
        assert!(evaluate(&gt, &gt, &options).expect_err("delta").to_string().contains("delta 100"));
        let options = EvaluationOptions { rpe_delta_frames: 0, ..EvaluationOptions::default() };
        assert!(matches!(evaluate(&gt, &gt, &options), Err(SlamError::InvalidInput(_))));
        let options = EvaluationOptions { max_difference_s: f64::NAN, ..EvaluationOptions::default() };
        assert!(matches!(evaluate(&gt, &gt, &options), Err(SlamError::InvalidInput(_))));
        Ok(())
    }

    #[test]
    fn umeyama_recovers_random_similarities_property() -> Result<(), SlamError> {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for _ in 0..200 {
            let axis =
                Vector3::new(rng.gen_range(-3.0..3.0), rng.gen_range(-3.0..3.0), rng.gen_range(-3.0..3.0));
            let truth = Alignment {
                rotation: *UnitQuaternion::from_scaled_axis(axis).to_rotation_matrix().matrix(),
                translation: Vector3::new(
                    rng.gen_range(-9.0..9.0),
                    rng.gen_range(-9.0..9.0),
                    rng.gen_range(-9.0..9.0),
                ),
                scale: rng.gen_range(0.1..10.0),
            };
            // Planar point sets are the common case (a robot on a floor), so half of them are planar.
            let planar = rng.gen_bool(0.5);
            let source: Vec<Vector3<f64>> = (0..rng.gen_range(3..30))
                .map(|_| {
                    let z = if planar { 0.0 } else { rng.gen_range(-2.0..2.0) };
                    Vector3::new(rng.gen_range(-5.0..5.0), rng.gen_range(-5.0..5.0), z)
                })
                .collect();
            let target: Vec<Vector3<f64>> = source.iter().map(|p| truth.transform_point(p)).collect();
            let found = umeyama(&source, &target, true)?;
            assert!((found.rotation - truth.rotation).norm() < 1e-8, "{found:?} vs {truth:?}");
            assert!((found.translation - truth.translation).norm() < 1e-7);
            assert!((found.scale - truth.scale).abs() < 1e-8);
            assert!((found.rotation.determinant() - 1.0).abs() < 1e-9);
        }
        Ok(())
    }

    #[test]
    fn statistics_match_numpy_definitions() -> Result<(), SlamError> {
        let stats = ErrorStatistics::from_errors(&[4.0, 1.0, 3.0, 2.0])?;
        assert_eq!((stats.min, stats.max, stats.median, stats.mean, stats.sse), (1.0, 4.0, 2.5, 2.5, 30.0));
        assert!((stats.rmse - 7.5f64.sqrt()).abs() < 1e-12);
        assert!((stats.std - 1.25f64.sqrt()).abs() < 1e-12);
        assert_eq!(ErrorStatistics::from_errors(&[3.0, 1.0, 2.0])?.median, 2.0);
        assert!(ErrorStatistics::from_errors(&[]).is_err());
        Ok(())
    }

    #[test]
    fn alignment_serialises_its_rotation_as_rows() -> Result<(), serde_json::Error> {
        let alignment = Alignment {
            rotation: Matrix3::new(0.0, -1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0),
            translation: Vector3::new(1.0, 2.0, 3.0),
            scale: 2.0,
        };
        let json = serde_json::to_value(alignment)?;
        assert_eq!(json["rotation"][0], serde_json::json!([0.0, -1.0, 0.0]));
        assert_eq!(json["translation"], serde_json::json!([1.0, 2.0, 3.0]));
        let back: Alignment = serde_json::from_value(json)?;
        assert_eq!(back, alignment);
        Ok(())
    }
}
