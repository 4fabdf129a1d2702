//! Timestamped camera trajectories.

use serde::{Deserialize, Serialize};

use crate::{CoreError, Pose3};

/// Whether `next_s` comes strictly after `previous_s` (false when either is NaN).
fn strictly_after(next_s: f64, previous_s: f64) -> bool {
    next_s.partial_cmp(&previous_s) == Some(std::cmp::Ordering::Greater)
}

/// One pose of a trajectory at a time.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimedPose {
    pub timestamp_s: f64,
    pub world_from_camera: Pose3,
}

/// Camera poses with strictly increasing timestamps.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Vec<TimedPose>", into = "Vec<TimedPose>")]
pub struct Trajectory {
    poses: Vec<TimedPose>,
}

impl Trajectory {
    pub fn new(poses: Vec<TimedPose>) -> Result<Self, CoreError> {
        for pair in poses.windows(2) {
            if !strictly_after(pair[1].timestamp_s, pair[0].timestamp_s) {
                return Err(CoreError::NonMonotonicTimestamps {
                    previous_s: pair[0].timestamp_s,
                    next_s: pair[1].timestamp_s,
                });
            }
        }
        Ok(Self { poses })
    }

    /// Appends a pose; its timestamp must be later than the last one.
    pub fn push(&mut self, pose: TimedPose) -> Result<(), CoreError> {
        if let Some(last) = self.poses.last()
            && !strictly_after(pose.timestamp_s, last.timestamp_s)
        {
            return Err(CoreError::NonMonotonicTimestamps {
                previous_s: last.timestamp_s,
                next_s: pose.timestamp_s,
            });
        }
        self.poses.push(pose);
        Ok(())
    }

    pub fn poses(&self) -> &[TimedPose] {
        &self.poses
    }

    pub fn len(&self) -> usize {
        self.poses.len()
    }

    pub fn is_empty(&self) -> bool {
        self.poses.is_empty()
    }

    pub fn duration_s(&self) -> f64 {
        match (self.poses.first(), self.poses.last()) {
            (Some(first), Some(last)) => last.timestamp_s - first.timestamp_s,
            _ => 0.0,
        }
    }

    /// Length of the camera's path in metres.
    pub fn path_length_m(&self) -> f64 {
        self.poses
            .windows(2)
            .map(|p| (p[1].world_from_camera.translation() - p[0].world_from_camera.translation()).norm())
            .sum()
    }

    /// The pose at a time, interpolated linearly in translation and by slerp in rotation; `None` outside
    /// the trajectory's time span.
    pub fn interpolate(&self, timestamp_s: f64) -> Option<Pose3> {
        let after = self.poses.partition_point(|p| p.timestamp_s < timestamp_s);
        if after == 0 {
            return self.poses.first().filter(|p| p.timestamp_s == timestamp_s).map(|p| p.world_from_camera);
        }
        let next = self.poses.get(after)?;
        let previous = &self.poses[after - 1];
        let t = (timestamp_s - previous.timestamp_s) / (next.timestamp_s - previous.timestamp_s);
        let a = previous.world_from_camera;
        let b = next.world_from_camera;
        let translation = a.translation() * (1.0 - t) + b.translation() * t;
        let rotation = a.rotation().slerp(&b.rotation(), t);
        Some(Pose3::from_parts(translation, rotation))
    }
}

impl TryFrom<Vec<TimedPose>> for Trajectory {
    type Error = CoreError;
    fn try_from(poses: Vec<TimedPose>) -> Result<Self, CoreError> {
        Self::new(poses)
    }
}

impl From<Trajectory> for Vec<TimedPose> {
    fn from(trajectory: Trajectory) -> Self {
        trajectory.poses
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::Vector3;

    fn pose_at(x: f64, yaw: f64) -> Pose3 {
        Pose3::world_from_camera_yaw_pitch(Vector3::new(x, 0.0, 1.4), yaw, 0.0)
    }

    #[test]
    fn interpolates_between_samples_and_rejects_time_going_back() -> Result<(), CoreError> {
        let trajectory = Trajectory::new(vec![
            TimedPose { timestamp_s: 0.0, world_from_camera: pose_at(0.0, 0.0) },
            TimedPose { timestamp_s: 1.0, world_from_camera: pose_at(2.0, 1.0) },
        ])?;
        let mid = trajectory.interpolate(0.5).expect("inside the span");
        assert!((mid.translation().x - 1.0).abs() < 1e-12);
        assert!((mid.camera_yaw() - 0.5).abs() < 1e-9);
        assert!(trajectory.interpolate(1.5).is_none());
        assert!((trajectory.path_length_m() - 2.0).abs() < 1e-12);
        let mut growing = trajectory.clone();
        assert!(growing.push(TimedPose { timestamp_s: 1.0, world_from_camera: pose_at(0.0, 0.0) }).is_err());
        Ok(())
    }
}
