//! RGB-D SLAM for gst: what a robot has (RGB-D frames with timestamps and a calibration) in, a trajectory and
//! a map out.
//!
//! - [`metrics`]: trajectory evaluation (ATE with Umeyama SE(3)/Sim(3) alignment, RPE), evo-compatible.
//! - [`pose_graph`]: SE(3) pose-graph optimisation with a robust kernel and a sparse solver.

pub mod error;
pub mod features;
pub mod icp;
pub mod index;
pub mod map_file;
pub mod metrics;
pub mod optimize;
pub mod output;
pub mod panorama;
pub mod pose_graph;
pub mod relocalize;
pub mod synthesis;
pub mod system;
pub mod thumbnail;
pub mod upright;

pub use error::SlamError;
pub use map_file::{MAP_FILE, SlamMap};
pub use panorama::{PanoramaConfig, PlaceIndex, PlaceIndexBuilder};
pub use relocalize::{MapLookup, PlaceTrace, Relocalization, RelocalizationOutcome, Relocalizer};
pub use system::{
    FrameInfo, FrameResult, FrontEnd, Keyframe, MapPoint, PreparedFrame, Slam, SlamConfig, SlamOutput,
    SlamStats, TrackingState, run_pipelined, run_slam,
};
