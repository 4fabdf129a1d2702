//! Rerun logging of every gst stage: the ground-truth scene, the camera and its images over time, ground-truth
//! and estimated trajectories, tracking metrics, SLAM's map points, the semantic map (occupancy, rooms, room
//! graph, objects, top-down) and the questions with their answers.
//!
//! This is the only crate that depends on `rerun` (`scripts/check-layers.sh` keeps it so): stages do not log,
//! their callers in `gst-cli` hand results to a [`Recorder`]. A recorder is either off — every method returns
//! at once, so callers log unconditionally at no measurable cost — or wraps a `rerun::RecordingStream` that
//! writes an `.rrd` file ([`Recorder::to_file`]), streams to a spawned viewer ([`Recorder::spawn`]) or keeps
//! messages in memory for tests ([`Recorder::memory`]). Every recording carries the [`default_blueprint`].
//!
//! # Frames
//!
//! - `world`: z up, metres (`ViewCoordinates::RIGHT_HAND_Z_UP`, static); a generated scene's world, floor at
//!   z = 0. The ground-truth scene and trajectory are logged here.
//! - `world/slam`: the world of the estimated poses (SLAM's: the first camera's frame; the recording's ground
//!   truth when a map was built from ground-truth poses). Its static transform `world_from_slam`
//!   ([`Recorder::log_world_from_slam`]) is the trajectory alignment onto the ground truth, or, without ground
//!   truth, the map's gravity alignment so that the view stays z up.
//! - `world/slam/map`: the semantic map's z-up frame, placed by `SemanticMap::map_from_world` (inverted).
//! - Cameras use OpenCV's frame (x right, y down, z forward: `ViewCoordinates::RDF` on the pinhole). Pixel
//!   centres are at integers in gst and at +0.5 in Rerun, so principal points are shifted by half a pixel.
//! - `topdown`: the map's occupancy grid, one pixel per cell, the map's +y up.
//! - Question top-down points are GST's normalised `<point>x y</point>` (x right, y down, 0–999).
//!
//! # Timelines
//!
//! `frame` (sequence: the frame's index in its source), `time` (duration: seconds since the first frame
//! logged), `question` (sequence: the caller's question index). Wall-clock and tick timelines are off, so
//! two recordings of one run hold the same data. Static data (scene, camera model, final trajectories,
//! map) is visible at every time.
//!
//! # Entity paths
//!
//! | path | archetypes | what |
//! |---|---|---|
//! | `world` | `ViewCoordinates`, `AnnotationContext` | z up; instance id → class label and colour |
//! | `world/scene/walls` | `Boxes3D` (solid) | wall pieces around door and window openings |
//! | `world/scene/furniture` | `Boxes3D` | furniture: oriented boxes, class labels and colours, class id = instance id |
//! | `world/scene/rooms` | `LineStrips3D` | room outlines at the floor, labelled with type and index |
//! | `world/scene/doors`, `world/scene/windows` | `Boxes3D` | openings; doors name the rooms they join |
//! | `world/groundtruth/trajectory` | `LineStrips3D` | ground-truth camera path |
//! | `world/groundtruth/camera` | `Transform3D`, `TransformAxes3D` | ground-truth camera over time |
//! | `world/slam` | `Transform3D` | `world_from_slam` |
//! | `world/slam/trajectory` | `LineStrips3D` | estimated camera path |
//! | `world/slam/points` | `Points3D` | SLAM's map points |
//! | `world/slam/camera` | `Transform3D` | estimated camera over time (`slam_from_camera`) |
//! | `world/slam/camera/image` | `Pinhole` | the camera model (static) |
//! | `world/slam/camera/image/rgb` | `Image` / `EncodedImage` | colour frames |
//! | `world/slam/camera/image/depth` | `DepthImage` / `EncodedDepthImage` | depth frames |
//! | `world/slam/camera/image/instances` | `SegmentationImage` | instance-id frames |
//! | `world/slam/map` | `Transform3D` | `slam_from_map` |
//! | `world/slam/map/occupancy` | `Points3D` | known cells at floor height: free in room colours, occupied dark |
//! | `world/slam/map/rooms` | `LineStrips3D` | room outlines, labelled with id and area |
//! | `world/slam/map/doors` | `Points3D` | doors, labelled with their rooms |
//! | `world/slam/map/objects` | `Boxes3D` | object landmarks (yawed boxes), labelled with class and id |
//! | `topdown/occupancy` | `Image` | occupancy grid: free = room colour, occupied black, unknown grey |
//! | `topdown/rooms`, `topdown/objects`, `topdown/trajectory` | `LineStrips2D` | outlines and the path |
//! | `topdown/doors` | `Points2D` | doors |
//! | `room_graph` | `GraphNodes`, `GraphEdges` | rooms at their centroids, doors as edges |
//! | `metrics/tracking_state` | `Scalars` | [`tracking_code`] per frame |
//! | `metrics/inliers` | `Scalars` | inlier matches per frame |
//! | `metrics/ate_m` | `Scalars` | absolute trajectory error per frame, metres |
//! | `logs/tracking` | `TextLog` | tracking state changes |
//! | `question/text` | `TextDocument` | task, uid, texts, prediction, ground truth (markdown) |
//! | `question/images/<k>` | `Transform3D`, `Image` / `EncodedImage`, `Boxes2D` | the question's images side by side, labelled |
//! | `question/topdown` | `Image` / `EncodedImage` | the question's top-down image |
//! | `question/topdown/predicted`, `…/truth` | `Points2D`, `Arrows2D` | answer points and headings on it |
//! | `world/slam/question/camera` | `Transform3D` | the current view's relocalised camera |
//! | `world/slam/question/camera/image` | `Pinhole` | its camera model |
//! | `world/slam/question/camera/image/rgb` | `Image` / `EncodedImage` | the current-view image |
//! | `world/slam/question/target` | `Points3D` | the target object |
//! | `world/slam/question/predicted`, `…/truth` | `Points3D`, `Arrows3D` | answers in 3D, arrows from the current camera |
//!
//! The same paths are constants in [`paths`].

mod blueprint;
mod convert;
mod error;
mod frames;
pub mod images;
pub mod inspect;
mod map;
pub mod paths;
mod question;
mod recorder;
mod scene;
#[cfg(test)]
mod tests;

pub use blueprint::default_blueprint;
pub use error::VizError;
pub use frames::{TrajectoryKind, tracking_code};
pub use images::{DepthEncoding, ImageEncoding, ImageSettings};
pub use question::{CurrentView, NamedImage, QuestionLog, TopdownAnswer};
pub use recorder::{
    DEFAULT_CONNECT_ADDR, FrameTime, Recorder, VENV_ENV, check_recording, connect_url, find_viewer,
    view_file, viewer_candidates,
};

/// Re-exported so that callers can name the memory sink and logged messages without depending on `rerun`.
pub use rerun::log::LogMsg;
pub use rerun::sink::MemorySinkStorage;
