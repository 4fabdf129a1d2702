//! What a VLM is asked: an ordered list of parts (text, images, video frames), and what it answers.

use std::path::PathBuf;

use gst_core::RgbImage;

/// One image of a request, with where it came from (file path or a description), which errors and logs
/// name.
#[derive(Clone, Debug, PartialEq)]
pub struct VlmImage {
    pub source: PathBuf,
    pub image: RgbImage,
}

/// Frames sampled from a video, in time order.
#[derive(Clone, Debug, PartialEq)]
pub struct VideoFrames {
    pub source: PathBuf,
    /// Indices of the sampled frames in the video (0-based).
    pub frame_indices: Vec<usize>,
    /// Frames per second of the video, as its container declares it.
    pub fps: f64,
    pub frames: Vec<RgbImage>,
}

/// One part of a prompt. The order of parts is the order the model sees them in.
#[derive(Clone, Debug, PartialEq)]
pub enum Part {
    Text(String),
    Image(VlmImage),
    Video(VideoFrames),
}

/// A request to a VLM: one user turn made of ordered parts.
#[derive(Clone, Debug, PartialEq)]
pub struct VlmRequest {
    /// What the request is for (the question uid), for logs and errors.
    pub id: String,
    pub parts: Vec<Part>,
}

impl VlmRequest {
    /// The number of images the model sees, video frames included.
    pub fn image_count(&self) -> usize {
        self.parts
            .iter()
            .map(|part| match part {
                Part::Text(_) => 0,
                Part::Image(_) => 1,
                Part::Video(video) => video.frames.len(),
            })
            .sum()
    }

    /// The text parts joined, as a reader would see the prompt without its images.
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|part| match part {
                Part::Text(text) => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// Token counts, when the backend reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// A model's answer: the raw text (what `gst score` extracts an answer from).
#[derive(Clone, Debug, PartialEq)]
pub struct VlmResponse {
    pub text: String,
    pub usage: Option<Usage>,
    /// Read from the on-disk response cache instead of asking the model.
    pub cached: bool,
}
