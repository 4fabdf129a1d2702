//! The SLAM system: frames in, a trajectory and a map out (work in progress: the API below is the contract
//! the rest of the workspace builds against).

use gst_core::{Calibration, Pose3, RgbdFrame, Trajectory};
use gst_io::FrameSource;
use serde::{Deserialize, Serialize};

use crate::SlamError;

/// Settings of the SLAM system (documented defaults).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SlamConfig {
    /// ORB features per frame.
    pub features: usize,
}

impl Default for SlamConfig {
    fn default() -> Self {
        Self { features: 1000 }
    }
}

/// The tracking state after a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrackingState {
    /// No map yet (waiting for a first frame with enough depth).
    Initializing,
    Tracking,
    Lost,
    /// Tracking was lost and the camera was found again in the map.
    Relocalized,
}

/// What tracking made of one frame.
#[derive(Clone, Debug)]
pub struct FrameResult {
    pub state: TrackingState,
    /// The camera's estimated pose, when tracked.
    pub world_from_camera: Option<Pose3>,
    /// Whether the frame became a keyframe.
    pub keyframe: bool,
}

/// Counters of a run.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SlamStats {
    pub frames: usize,
    pub keyframes: usize,
    pub lost_frames: usize,
    pub loop_closures: usize,
    /// Wall time spent in `track` and `finish`, seconds.
    pub tracking_seconds: f64,
}

/// The result of a run.
#[derive(Debug)]
pub struct SlamOutput {
    /// Camera-to-world poses of every tracked frame, after the final optimisation.
    pub trajectory: Trajectory,
    pub stats: SlamStats,
}

/// An RGB-D SLAM system.
#[derive(Debug)]
pub struct Slam {
    config: SlamConfig,
    calibration: Calibration,
}

impl Slam {
    pub fn new(calibration: &Calibration, config: SlamConfig) -> Result<Self, SlamError> {
        Ok(Self { config, calibration: calibration.clone() })
    }

    pub fn track(&mut self, frame: &RgbdFrame) -> Result<FrameResult, SlamError> {
        let _ = (frame, &self.config, &self.calibration);
        Err(SlamError::InvalidInput("tracking is not implemented yet".into()))
    }

    pub fn finish(self) -> Result<SlamOutput, SlamError> {
        Err(SlamError::InvalidInput("tracking is not implemented yet".into()))
    }
}

/// Runs SLAM over every frame of a source; `progress` is called after each frame with its index.
pub fn run_slam(
    source: &mut dyn FrameSource,
    config: &SlamConfig,
    progress: &mut dyn FnMut(usize),
) -> Result<SlamOutput, SlamError> {
    let mut slam = Slam::new(source.calibration(), config.clone())?;
    while let Some(frame) = source.next_frame()? {
        slam.track(&frame)?;
        progress(frame.index);
    }
    slam.finish()
}
