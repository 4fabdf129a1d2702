//! One RGB-D frame as a frame source delivers it: what a robot has (colour, depth, a time) and, for
//! recordings that have it, the ground-truth pose for evaluation.

use crate::{DepthImage, Pose3, RgbImage};

/// A timestamped colour image with optional depth and optional ground truth.
///
/// Depth, when present, has the colour image's size and is registered to it pixel by pixel (z along the
/// optical axis in metres, 0 or non-finite = missing). Both images follow the camera model of the source's
/// calibration: a source that undistorts its frames reports the distortion-free camera.
#[derive(Clone, Debug, PartialEq)]
pub struct RgbdFrame {
    /// Position of the frame in its source, counting from 0 (frames skipped by a source are not counted).
    pub index: usize,
    /// Capture time of the colour image in seconds (the source's clock: TUM uses Unix time).
    pub timestamp_s: f64,
    pub rgb: RgbImage,
    pub depth: Option<DepthImage>,
    /// The camera's pose in the world (`world_from_camera`) from the recording's ground truth, for
    /// evaluation only: a SLAM system must not read it.
    pub ground_truth: Option<Pose3>,
}

impl RgbdFrame {
    pub fn width(&self) -> u32 {
        self.rgb.width()
    }

    pub fn height(&self) -> u32 {
        self.rgb.height()
    }

    pub fn has_depth(&self) -> bool {
        self.depth.is_some()
    }
}
