//! Shared types of gst, pure and dependency-light (nalgebra, serde, thiserror).
//!
//! Names carry their frames and units, read right to left: `world_from_camera` maps points in the camera
//! frame to the world frame. The camera frame is OpenCV's (x right, y down, z forward); the world frame is
//! z up, in metres, with the floor at z = 0. Angles are radians unless a name ends in `_deg`.

pub mod calibration;
pub mod camera;
pub mod error;
pub mod extract;
pub mod frame;
pub mod gravity;
pub mod hash;
pub mod image;
pub mod instance;
pub mod limits;
pub mod pose;
pub mod question;
pub mod semantic;
pub mod trajectory;

pub use hash::stable_hash;

pub use calibration::Calibration;
pub use camera::{Distortion, PinholeCamera};
pub use error::CoreError;
pub use frame::RgbdFrame;
pub use gravity::{gravity_alignment, vertical_from_cameras};
pub use image::{DepthImage, Image, InstanceImage, RgbImage};
pub use instance::{Instance, InstanceId, OrientedBox3};
pub use pose::Pose3;
pub use question::{
    Answer, AnswerKind, Metric, Question, QuestionError, QuestionImage, RawAnswer, RawQuestion, Setting,
    TaskId,
};
pub use semantic::{ObjectClass, RoomType};
pub use trajectory::{TimedPose, Trajectory};
