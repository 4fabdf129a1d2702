//! `--rgb-topic`, `--depth-topic`, `--info-topic`: which topics of a bag (`.mcap`, `.bag`, rosbag2 folder)
//! a command reads, shared by `gst slam`, `gst map`, `gst demo --input` and `gst bag info`.

use gst_bag::TopicChoice;

#[derive(Clone, Debug, Default, clap::Args)]
pub struct TopicArgs {
    /// For a bag: the colour image topic (default: its only colour image topic).
    #[arg(long, value_name = "TOPIC")]
    pub rgb_topic: Option<String>,
    /// For a bag: the depth image topic (default: its only depth image topic).
    #[arg(long, value_name = "TOPIC")]
    pub depth_topic: Option<String>,
    /// For a bag: the colour camera's CameraInfo topic (default: the one nearest the colour topic).
    #[arg(long, value_name = "TOPIC")]
    pub info_topic: Option<String>,
}

impl TopicArgs {
    pub fn choice(&self) -> TopicChoice {
        TopicChoice {
            rgb: self.rgb_topic.clone(),
            depth: self.depth_topic.clone(),
            info: self.info_topic.clone(),
        }
    }
}
