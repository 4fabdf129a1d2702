//! Robot recordings as frame sources: ROS 2 bags in MCAP storage (a `.mcap` file or a rosbag2 folder with
//! `metadata.yaml`), plain MCAP files with ROS 2 CDR messages, and ROS 1 `.bag` files, behind gst-io's
//! [`gst_io::FrameSource`].
//!
//! | message | read as |
//! |---|---|
//! | `sensor_msgs/Image` | colour: rgb8, bgr8, rgba8, bgra8, mono8; depth: 16UC1/mono16 (mm), 32FC1 (m) |
//! | `sensor_msgs/CompressedImage` | colour: jpeg, png; depth: `compressedDepth` png (16UC1, 32FC1) |
//! | `sensor_msgs/CameraInfo` | the camera, through gst-io's ROS camera_info reader (plumb_bob, rational_polynomial; equidistant is refused as it is in YAML) |
//! | `tf2_msgs/TFMessage` (`/tf`, `/tf_static`) | the colour↔depth extrinsic: depth is reprojected into colour when they differ |
//!
//! Containers come from well-kept crates: `mcap` (0.25, the version rerun locks), `re_cdr` (Rerun's serde
//! CDR) and `rosbag` (ROS 1). Colour and depth pair by header stamp like TUM's `associate.py` (default
//! tolerance 20 ms); drops, duplicate stamps and out-of-order stamps are counted in the [`BagReport`].
//! Every error names the file, the topic and the message index.
//!
//! [`export_mcap`] writes frames (a TUM directory or generated episode) as a ROS 2 MCAP file, atomically.

pub mod container;
pub mod export;
pub mod msg;
#[cfg(feature = "realsense")]
pub mod realsense;
pub mod source;

use std::path::Path;

pub use container::{Bag, BagFormat, TopicInfo};
pub use export::{DepthEncoding, ExportOptions, ExportSummary, export_mcap};
pub use msg::MessageKind;
pub use source::{
    BagOptions, BagReport, BagSource, DEFAULT_PAIR_TOLERANCE_S, ImageRole, Registration, stamp_seconds,
};

/// The topics a user named for a bag (`--rgb-topic`, `--depth-topic`, `--info-topic`); `None` lets the
/// source choose when the choice is unambiguous.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopicChoice {
    pub rgb: Option<String>,
    pub depth: Option<String>,
    pub info: Option<String>,
}

impl TopicChoice {
    pub fn is_empty(&self) -> bool {
        self.rgb.is_none() && self.depth.is_none() && self.info.is_none()
    }
}

/// The bag options for `options` (calibration file, undistortion) and the named topics.
pub fn bag_options(options: &gst_io::SourceOptions, topics: &TopicChoice) -> BagOptions {
    BagOptions {
        rgb_topic: topics.rgb.clone(),
        depth_topic: topics.depth.clone(),
        info_topic: topics.info.clone(),
        calibration: options.calibration.clone(),
        undistort: options.undistort,
        ..BagOptions::default()
    }
}

/// Any recording gst reads as a frame source: a bag (`.mcap`, `.bag`, a rosbag2 folder) through
/// [`BagSource`], everything else through [`gst_io::open_source_with`]. Topics can only be named for a bag.
/// A bag's [`BagReport`] is logged at info level.
pub fn open_source(
    path: &Path,
    options: &gst_io::SourceOptions,
    topics: &TopicChoice,
) -> Result<Box<dyn gst_io::FrameSource + Send>, gst_io::IoError> {
    if is_bag_path(path) {
        let source = BagSource::open(path, &bag_options(options, topics))?;
        tracing::info!("{}:\n{}", path.display(), source.report());
        return Ok(Box::new(source));
    }
    if !topics.is_empty() {
        return Err(gst_io::IoError::Source {
            path: path.into(),
            message: "is not a bag (.mcap, .bag or a rosbag2 folder with metadata.yaml): --rgb-topic, \
                      --depth-topic and --info-topic apply to bags only"
                .into(),
        });
    }
    gst_io::open_source_with(path, options)
}

/// Refuses a source without depth for a command that needs RGB-D, saying what the source is; for a bag,
/// which image topics it has (an RGB-only path does not exist yet).
pub fn require_depth(source: &dyn gst_io::FrameSource, command: &str) -> Result<(), gst_io::IoError> {
    if source.has_depth() {
        return Ok(());
    }
    let hint = if source.kind() == gst_io::SourceKind::Bag {
        "; name a depth topic with --depth-topic if it has one under another role (`gst bag info` lists \
         them). gst has no RGB-only (monocular) SLAM yet, so a colour-only bag cannot be run"
    } else {
        ""
    };
    Err(gst_io::IoError::Source {
        path: source.path().into(),
        message: format!("{} has no depth; {command} needs RGB-D frames{hint}", source.name()),
    })
}

/// Whether `path` is a bag by its name (`.mcap`, `.bag`, a folder with `metadata.yaml`), for dispatch
/// between gst-io's sources and this crate.
pub fn is_bag_path(path: &Path) -> bool {
    Bag::looks_like_bag(path)
}

/// `gst bag info`: the topics (type, messages, rate) and the pairing a source would use, as text. A bag
/// whose pairing fails still lists its topics, then says why.
pub fn info(path: &Path, options: &BagOptions) -> Result<String, gst_io::IoError> {
    let bag = Bag::open(path)?;
    let roles = source::topic_roles(&bag)?;
    let mut text = format!("{} {}\n", bag.format(), path.display());
    let width = bag.topics().iter().map(|t| t.name.len()).max().unwrap_or(5).max(5);
    let type_width = bag.topics().iter().map(|t| t.type_name.len()).max().unwrap_or(4).max(4);
    text +=
        &format!("{:<width$}  {:<type_width$}  {:>8}  {:>8}  role\n", "topic", "type", "messages", "rate Hz");
    for (topic, (_, role)) in bag.topics().iter().zip(&roles) {
        let rate = topic.rate_hz().map_or_else(|| "-".to_string(), |r| format!("{r:.2}"));
        let role = match (role, topic.kind) {
            (Some(ImageRole::Colour), _) => "colour",
            (Some(ImageRole::Depth), _) => "depth",
            (None, Some(MessageKind::CameraInfo)) => "camera info",
            (None, Some(MessageKind::Tf)) => "tf",
            (None, Some(_)) => "image (empty)",
            (None, None) => "-",
        };
        text += &format!(
            "{:<width$}  {:<type_width$}  {:>8}  {:>8}  {role}\n",
            topic.name, topic.type_name, topic.count, rate
        );
    }
    match BagSource::from_bag(bag, options) {
        Ok(source) => {
            text += "\npairing:\n";
            text += &source.report().to_string();
        }
        Err(e) => text += &format!("\nno pairing: {e}\n"),
    }
    Ok(text)
}

/// How a RealSense camera is opened for live capture (`gst slam --realsense`).
#[derive(Clone, Debug, PartialEq)]
pub struct RealSenseOptions {
    /// Colour and depth size (depth is aligned to colour).
    pub width: u32,
    pub height: u32,
    pub fps: u32,
    /// Stop after this many frames (`None`: until the camera stops or the process is interrupted).
    pub max_frames: Option<usize>,
    /// A device serial number, when several cameras are plugged in.
    pub serial: Option<String>,
}

impl Default for RealSenseOptions {
    fn default() -> Self {
        Self { width: 640, height: 480, fps: 30, max_frames: None, serial: None }
    }
}

/// A live RealSense camera as a frame source (colour, depth aligned to colour, the colour intrinsics).
/// Needs the `realsense` cargo feature (librealsense2 installed); unbuilt and untested here.
#[cfg(feature = "realsense")]
pub fn open_realsense(
    options: &RealSenseOptions,
) -> Result<Box<dyn gst_io::FrameSource + Send>, gst_io::IoError> {
    Ok(Box::new(realsense::RealSenseSource::open(options)?))
}

/// A live RealSense camera as a frame source. This build has no `realsense` feature: an error saying how
/// to get one.
#[cfg(not(feature = "realsense"))]
pub fn open_realsense(
    _options: &RealSenseOptions,
) -> Result<Box<dyn gst_io::FrameSource + Send>, gst_io::IoError> {
    Err(gst_io::IoError::Source {
        path: "realsense".into(),
        message: "this gst was built without RealSense support: install librealsense2 (Intel's apt \
                  repository; it is not in Debian) and build with `cargo build --release --features \
                  gst-cli/realsense`, or record with the ROS wrapper to MCAP and run the bag (docs/bags.md)"
            .into(),
    })
}
