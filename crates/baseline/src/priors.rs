//! How the camera is carried, estimated from the exploration itself rather than assumed: the heights above
//! the floor and the pitches of the keyframes in the map's gravity-aligned frame, and how much they roll.
//!
//! Relocalising a current view needs priors on its camera (layout place recognition searches a few heights
//! and, without a compass reading, a few pitches; upright PnP assumes no roll). A current view is taken by
//! the same kind of camera as the exploration, so the exploration's own spread is the prior: its 10th, 50th
//! and 90th percentiles, never a constant of any one camera rig.

use gst_core::Pose3;
use gst_map::{LayoutConfig, SemanticMap};
use gst_slam::SlamMap;

/// Fewest keyframes for an estimate; below, the defaults stand.
const MIN_KEYFRAMES: usize = 10;
/// Largest 90th-percentile roll at which a camera counts as carried without roll (upright PnP's model), in
/// degrees: at 3°, a point 5 m away lands about 0.26 m off where a roll-free model puts it, the most that
/// the relocaliser's refinement pulls back in.
pub const MAX_UPRIGHT_ROLL_DEG: f64 = 3.0;

/// The exploration camera's carriage.
#[derive(Clone, Debug, PartialEq)]
pub struct CameraPriors {
    /// 10th, 50th and 90th percentile of the camera's height above the floor, metres (distinct, ascending).
    pub heights_m: Vec<f64>,
    /// The same percentiles of the optical axis' pitch, degrees, positive up.
    pub pitches_deg: Vec<f64>,
    /// 90th percentile of the absolute roll about the optical axis, degrees.
    pub roll_p90_deg: f64,
    /// Keyframes the estimate rests on.
    pub keyframes: usize,
}

impl CameraPriors {
    /// From the keyframes of `slam` placed in `map`'s frame (its floor height and gravity alignment); `None`
    /// with fewer than [`MIN_KEYFRAMES`] keyframes.
    pub fn from_exploration(map: &SemanticMap, slam: &SlamMap) -> Option<Self> {
        let floor = map.occupancy.floor_z_m;
        let poses = slam.keyframes.iter().map(|k| map.map_from_world * Pose3(k.world_from_camera));
        Self::from_poses(poses, floor)
    }

    /// From camera poses in a gravity-aligned frame (z up) whose floor is at `floor_z_m`.
    pub fn from_poses(map_from_camera: impl IntoIterator<Item = Pose3>, floor_z_m: f64) -> Option<Self> {
        let (mut heights, mut pitches, mut rolls) = (Vec::new(), Vec::new(), Vec::new());
        for pose in map_from_camera {
            let r = pose.rotation_matrix();
            // Camera axes in the map: x right, y down, z forward.
            let (right, forward) = (r.column(0), r.column(2));
            heights.push(pose.translation().z - floor_z_m);
            pitches.push(forward.z.clamp(-1.0, 1.0).asin().to_degrees());
            // Roll: how far the right axis leaves the horizontal plane, measured about the optical axis.
            let horizontal = (1.0 - forward.z * forward.z).max(1e-12).sqrt();
            rolls.push((right.z / horizontal).clamp(-1.0, 1.0).asin().to_degrees().abs());
        }
        if heights.len() < MIN_KEYFRAMES {
            return None;
        }
        let keyframes = heights.len();
        Some(Self {
            heights_m: spread(&mut heights, 0.01),
            pitches_deg: spread(&mut pitches, 0.5),
            roll_p90_deg: percentile(&mut rolls, 0.9),
            keyframes,
        })
    }

    /// The layout search's settings with these heights and fallback pitches.
    pub fn layout_config(&self, base: LayoutConfig) -> LayoutConfig {
        LayoutConfig {
            heights_m: self.heights_m.clone(),
            fallback_pitches_deg: self.pitches_deg.clone(),
            ..base
        }
    }

    /// Whether the camera is carried without roll, as upright PnP assumes.
    pub fn roll_free(&self) -> bool {
        self.roll_p90_deg <= MAX_UPRIGHT_ROLL_DEG
    }
}

/// The `q`-quantile of `values` (sorted in place; nearest rank).
fn percentile(values: &mut [f64], q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let rank = ((values.len() - 1) as f64 * q).round() as usize;
    values[rank]
}

/// The 10th, 50th and 90th percentiles, rounded to `step` and without repeats.
fn spread(values: &mut [f64], step: f64) -> Vec<f64> {
    let mut out: Vec<f64> =
        [0.1, 0.5, 0.9].iter().map(|&q| (percentile(values, q) / step).round() * step).collect();
    out.dedup_by(|a, b| (*a - *b).abs() < step / 2.0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::{UnitQuaternion, Vector3};

    /// A camera at `height` over a floor at z = 0.2, heading `yaw`, pitched `pitch` (up positive), rolled `roll`.
    fn camera(height: f64, yaw_deg: f64, pitch_deg: f64, roll_deg: f64) -> Pose3 {
        // Level camera looking along +x: camera z = world x, camera x = world -y, camera y = world -z.
        let level = UnitQuaternion::from_rotation_matrix(&nalgebra::Rotation3::from_matrix_unchecked(
            nalgebra::Matrix3::new(0.0, 0.0, 1.0, -1.0, 0.0, 0.0, 0.0, -1.0, 0.0),
        ));
        let yaw = UnitQuaternion::from_axis_angle(&Vector3::z_axis(), yaw_deg.to_radians());
        // About the camera x axis (y down, z forward): a positive angle turns the optical axis up.
        let pitch = UnitQuaternion::from_axis_angle(&Vector3::x_axis(), pitch_deg.to_radians());
        let roll = UnitQuaternion::from_axis_angle(&Vector3::z_axis(), roll_deg.to_radians());
        Pose3::from_parts(Vector3::new(1.0, 2.0, 0.2 + height), yaw * level * pitch * roll)
    }

    #[test]
    fn heights_pitches_and_roll_are_read_off_the_poses() {
        let poses: Vec<Pose3> = (0..40)
            .map(|i| {
                let t = f64::from(i) / 39.0;
                camera(
                    1.1 + 0.2 * t,
                    9.0 * f64::from(i),
                    -30.0 + 10.0 * t,
                    if i % 2 == 0 { 1.0 } else { -1.0 },
                )
            })
            .collect();
        let priors = CameraPriors::from_poses(poses.iter().copied(), 0.2).expect("enough poses");
        assert_eq!(priors.heights_m.len(), 3, "{priors:?}");
        assert!(
            (priors.heights_m[0] - 1.12).abs() < 0.011 && (priors.heights_m[2] - 1.28).abs() < 0.011,
            "{priors:?}"
        );
        assert!((priors.pitches_deg[1] + 25.0).abs() < 0.6, "{priors:?}");
        assert!((priors.roll_p90_deg - 1.0).abs() < 1e-6, "{priors:?}");
        assert!(priors.roll_free());
        let layout = priors.layout_config(LayoutConfig::default());
        assert_eq!(layout.heights_m, priors.heights_m);
        assert_eq!(layout.fallback_pitches_deg, priors.pitches_deg);
    }

    #[test]
    fn a_rolling_camera_is_not_roll_free_and_few_poses_give_no_estimate() {
        let rolled: Vec<Pose3> = (0..20).map(|i| camera(1.5, 18.0 * f64::from(i), -10.0, 8.0)).collect();
        let priors = CameraPriors::from_poses(rolled, 0.2).expect("enough poses");
        assert!((priors.roll_p90_deg - 8.0).abs() < 1e-6, "{priors:?}");
        assert!(!priors.roll_free());
        assert_eq!(priors.heights_m, vec![1.5]);
        assert!(CameraPriors::from_poses((0..5).map(|_| camera(1.5, 0.0, 0.0, 0.0)), 0.0).is_none());
    }
}
