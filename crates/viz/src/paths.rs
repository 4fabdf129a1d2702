//! The entity paths of every gst recording, in one place so that the blueprint, the tests and anyone reading a
//! recording (`rerun rrd print`, notebooks, the dataframe API) agree on them. They are part of the crate's
//! interface: renaming one is a breaking change.
//!
//! Three 3D frames nest under [`WORLD`] (Rerun composes the transforms):
//!
//! - [`WORLD`]: z up, metres (`ViewCoordinates::RIGHT_HAND_Z_UP`); the ground-truth world of a generated scene
//!   (floor at z = 0) when there is one.
//! - [`SLAM`]: the world of the estimated poses (SLAM's: the first camera's frame, or the recording's ground
//!   truth when a map was built from ground-truth poses). Its static `Transform3D` is `world_from_slam`: the
//!   trajectory alignment onto the ground truth when there is one, else the gravity alignment.
//! - [`MAP`]: the semantic map's z-up frame; its static `Transform3D` is `slam_from_map`
//!   (`SemanticMap::map_from_world` inverted).

/// Root of the 3D scene: view coordinates (z up).
pub const WORLD: &str = "world";

/// Ground-truth scene (static): [`SCENE_WALLS`], [`SCENE_FURNITURE`], [`SCENE_ROOMS`], [`SCENE_DOORS`],
/// [`SCENE_WINDOWS`].
pub const SCENE: &str = "world/scene";
/// Wall pieces (`Boxes3D`, solid), cut around door and window openings.
pub const SCENE_WALLS: &str = "world/scene/walls";
/// Furniture instances (`Boxes3D`, oriented): label = class, colour = class colour, class id = instance id.
pub const SCENE_FURNITURE: &str = "world/scene/furniture";
/// Room outlines at floor level (`LineStrips3D`), labelled with room type and index.
pub const SCENE_ROOMS: &str = "world/scene/rooms";
/// Door openings (`Boxes3D`), labelled with the rooms they join.
pub const SCENE_DOORS: &str = "world/scene/doors";
/// Window openings (`Boxes3D`).
pub const SCENE_WINDOWS: &str = "world/scene/windows";

/// Ground-truth camera path (`LineStrips3D`, in [`WORLD`]).
pub const GROUNDTRUTH_TRAJECTORY: &str = "world/groundtruth/trajectory";
/// Ground-truth camera pose over time (`Transform3D` + `TransformAxes3D`, in [`WORLD`]).
pub const GROUNDTRUTH_CAMERA: &str = "world/groundtruth/camera";

/// The estimate's world (`Transform3D` world_from_slam, static).
pub const SLAM: &str = "world/slam";
/// Estimated camera path (`LineStrips3D`).
pub const SLAM_TRAJECTORY: &str = "world/slam/trajectory";
/// SLAM's map points (`Points3D`).
pub const SLAM_POINTS: &str = "world/slam/points";
/// The camera over time: `Transform3D` slam_from_camera (OpenCV camera frame).
pub const CAMERA: &str = "world/slam/camera";
/// The camera's `Pinhole` (static, `ViewCoordinates::RDF`: x right, y down, z forward); the 2D space of the
/// frame images below.
pub const CAMERA_IMAGE: &str = "world/slam/camera/image";
/// Colour frame (`Image` or `EncodedImage`).
pub const CAMERA_RGB: &str = "world/slam/camera/image/rgb";
/// Depth frame (`DepthImage` in metres, or millimetres with `meter` = 1000, or `EncodedDepthImage`).
pub const CAMERA_DEPTH: &str = "world/slam/camera/image/depth";
/// Instance ids (`SegmentationImage`), coloured and labelled by the `AnnotationContext` on [`WORLD`].
pub const CAMERA_INSTANCES: &str = "world/slam/camera/image/instances";

/// The semantic map's frame (`Transform3D` slam_from_map, static).
pub const MAP: &str = "world/slam/map";
/// Occupancy cells at floor height (`Points3D`): free cells in their room's colour, occupied dark.
pub const MAP_OCCUPANCY: &str = "world/slam/map/occupancy";
/// Room outlines at floor height (`LineStrips3D`) with labels.
pub const MAP_ROOMS: &str = "world/slam/map/rooms";
/// Doors between rooms (`Points3D`, labelled with the two rooms).
pub const MAP_DOORS: &str = "world/slam/map/doors";
/// Object landmarks (`Boxes3D`, yawed), labelled with class and id.
pub const MAP_OBJECTS: &str = "world/slam/map/objects";

/// Root of the top-down 2D space of the map (one pixel per grid cell, +y of the map up).
pub const TOPDOWN: &str = "topdown";
/// The occupancy grid as an image (`Image`: free = room colour, occupied = black, unknown = grey).
pub const TOPDOWN_OCCUPANCY: &str = "topdown/occupancy";
/// Room outlines and labels (`LineStrips2D`).
pub const TOPDOWN_ROOMS: &str = "topdown/rooms";
/// Doors (`Points2D`).
pub const TOPDOWN_DOORS: &str = "topdown/doors";
/// Object landmarks (`LineStrips2D` outlines of their yawed boxes, labelled).
pub const TOPDOWN_OBJECTS: &str = "topdown/objects";
/// The map's trajectory (`LineStrips2D`).
pub const TOPDOWN_TRAJECTORY: &str = "topdown/trajectory";

/// The room graph (`GraphNodes` = rooms, `GraphEdges` = doors), laid out at the rooms' centroids.
pub const ROOM_GRAPH: &str = "room_graph";

/// Per-frame series (`Scalars`): [`METRICS_TRACKING_STATE`], [`METRICS_INLIERS`], [`METRICS_ATE`].
pub const METRICS: &str = "metrics";
/// Tracking state code per frame: see [`crate::tracking_code`].
pub const METRICS_TRACKING_STATE: &str = "metrics/tracking_state";
/// Inlier feature matches per frame.
pub const METRICS_INLIERS: &str = "metrics/inliers";
/// Absolute trajectory error per frame after alignment, metres.
pub const METRICS_ATE: &str = "metrics/ate_m";
/// Tracking events as text (`TextLog`): state changes.
pub const LOG_TRACKING: &str = "logs/tracking";

/// The question panel (2D and text, on the `question` timeline).
pub const QUESTION: &str = "question";
/// Question text, prediction and ground truth (`TextDocument`, markdown).
pub const QUESTION_TEXT: &str = "question/text";
/// The question's images, side by side: `question/images/<k>` (`Image`/`EncodedImage`, labelled outline).
pub const QUESTION_IMAGES: &str = "question/images";
/// The question's top-down image with [`QUESTION_TOPDOWN_PREDICTED`] and [`QUESTION_TOPDOWN_TRUTH`].
pub const QUESTION_TOPDOWN: &str = "question/topdown";
/// Predicted point (and heading) on the top-down image (`Points2D`, `Arrows2D`).
pub const QUESTION_TOPDOWN_PREDICTED: &str = "question/topdown/predicted";
/// True point (and heading) on the top-down image (`Points2D`, `Arrows2D`).
pub const QUESTION_TOPDOWN_TRUTH: &str = "question/topdown/truth";
/// The question's 3D content, in the [`SLAM`] frame.
pub const QUESTION_3D: &str = "world/slam/question";
/// The current view's relocalised camera (`Transform3D`).
pub const QUESTION_CAMERA: &str = "world/slam/question/camera";
/// Its `Pinhole`; the current-view image is [`QUESTION_CAMERA_RGB`].
pub const QUESTION_CAMERA_IMAGE: &str = "world/slam/question/camera/image";
/// The current-view image in the relocalised camera.
pub const QUESTION_CAMERA_RGB: &str = "world/slam/question/camera/image/rgb";
/// The question's target object (`Points3D`).
pub const QUESTION_TARGET: &str = "world/slam/question/target";
/// The predicted answer in 3D (`Points3D`, and an `Arrows3D` from the current camera).
pub const QUESTION_PREDICTED: &str = "world/slam/question/predicted";
/// The true answer in 3D (`Points3D`, and an `Arrows3D` from the current camera).
pub const QUESTION_TRUTH: &str = "world/slam/question/truth";

/// Every documented path that carries data (the roots [`SCENE`], [`TOPDOWN`], [`METRICS`], [`QUESTION`],
/// [`QUESTION_3D`] only group; [`QUESTION_IMAGES`] holds `question/images/<k>`), for tests and tools that
/// check a recording.
pub const ALL: &[&str] = &[
    WORLD,
    SCENE_WALLS,
    SCENE_FURNITURE,
    SCENE_ROOMS,
    SCENE_DOORS,
    SCENE_WINDOWS,
    GROUNDTRUTH_TRAJECTORY,
    GROUNDTRUTH_CAMERA,
    SLAM,
    SLAM_TRAJECTORY,
    SLAM_POINTS,
    CAMERA,
    CAMERA_IMAGE,
    CAMERA_RGB,
    CAMERA_DEPTH,
    CAMERA_INSTANCES,
    MAP,
    MAP_OCCUPANCY,
    MAP_ROOMS,
    MAP_DOORS,
    MAP_OBJECTS,
    TOPDOWN_OCCUPANCY,
    TOPDOWN_ROOMS,
    TOPDOWN_DOORS,
    TOPDOWN_OBJECTS,
    TOPDOWN_TRAJECTORY,
    ROOM_GRAPH,
    METRICS_TRACKING_STATE,
    METRICS_INLIERS,
    METRICS_ATE,
    LOG_TRACKING,
    QUESTION_TEXT,
    QUESTION_TOPDOWN,
    QUESTION_TOPDOWN_PREDICTED,
    QUESTION_TOPDOWN_TRUTH,
    QUESTION_CAMERA,
    QUESTION_CAMERA_IMAGE,
    QUESTION_CAMERA_RGB,
    QUESTION_TARGET,
    QUESTION_PREDICTED,
    QUESTION_TRUTH,
];

/// Timeline of frames (sequence: the frame's index in its source).
pub const TIMELINE_FRAME: &str = "frame";
/// Timeline of capture time (duration, seconds since the first frame logged).
pub const TIMELINE_TIME: &str = "time";
/// Timeline of questions (sequence: the caller's question index).
pub const TIMELINE_QUESTION: &str = "question";
