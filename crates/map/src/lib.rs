//! The semantic map of gst: what the explicit-map baseline remembers of an exploration.
//!
//! Posed RGB-D frames (SLAM's poses, the camera calibration, depth) go into a [`MapBuilder`]; out comes a
//! [`SemanticMap`]: a 2D occupancy grid with an estimated floor height, rooms and doors (a petgraph room
//! graph), object landmarks fused from per-frame observations (a [`Perception`]), and the trajectory. The
//! map renders in GST-Bench's top-down styles, registers to a given binary top-down image (a similarity
//! found by search), saves to `map.json` and exports `scene_graph.json`, the map as text for a VLM.
//!
//! Everything here is computed from frames, poses and calibration. Simulator ground truth enters only
//! through [`OraclePerception`], named so.

pub mod candidates;
pub mod classifier;
pub mod compass;
pub mod completion;
pub mod config;
pub mod error;
pub mod grid;
pub mod layout;
pub mod manhattan;
pub mod map;
pub mod objects;
pub mod occupancy;
pub mod perception;
pub mod register;
pub mod render;
pub mod rooms;
#[cfg(test)]
pub(crate) mod testworld;

pub use candidates::{CANDIDATE_VOXEL_M, FEATURE_COUNT, ObjectCandidate};
pub use classifier::{
    AnnotatedBox, ObjectClassifier, TrainingSample, label_candidates, read_annotation_boxes,
};
pub use compass::{CompassReading, read_compass, read_pitch, snap_heading};
pub use config::MapConfig;
pub use error::MapError;
pub use grid::GridFrame;
/// Moved to gst-core (SLAM's relocaliser needs it too); re-exported where the map's users find it.
pub use gst_core::gravity_alignment;
pub use layout::{
    BoundaryKind, ColumnBoundary, FloorModel, FloorModelBuilder, LayoutConfig, LayoutHypothesis, LayoutIndex,
    PixelFeatures, floor_boundary,
};
pub use manhattan::{ManhattanFrame, manhattan_yaw};
pub use map::{
    MapBuilder, MapStats, PosedFrame, SceneGraph, SemanticMap, StageSeconds, TrajectorySample, map_sequence,
    poses_per_frame,
};
pub use objects::{ObjectLandmark, ObjectMap, Observation, Region, YawBox};
pub use occupancy::{CellState, OccupancyGrid};
pub use perception::{
    MarkedBoxPerception, NoPerception, OraclePerception, Perception, PixelBox, TargetEstimate,
    detect_red_box, locate_marked_target, locate_marked_target_from,
};
pub use register::{Registration, Similarity2, register};
pub use render::{TopdownView, render_binary, render_semantic};
pub use rooms::{Door, Room, RoomGraph, room_graph};
