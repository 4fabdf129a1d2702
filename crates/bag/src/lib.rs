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
pub mod source;

use std::path::Path;

pub use container::{Bag, BagFormat, TopicInfo};
pub use export::{DepthEncoding, ExportOptions, ExportSummary, export_mcap};
pub use msg::MessageKind;
pub use source::{
    BagOptions, BagReport, BagSource, DEFAULT_PAIR_TOLERANCE_S, ImageRole, Registration, stamp_seconds,
};

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
