//! Prompts from GST question files, in three modes.
//!
//! **`e2e`** is the GST-Bench protocol: the question's first text (which announces the video), the sampled
//! video frames, then for each image i (1-based) the text i followed by image i, then the remaining texts.
//! That is how the release's texts are written: `["This is the exploration video …", "Your current view is
//! :", "In which direction …"]` with one image reads text 0, video, text 1, the current view, text 2; a
//! top-down selection reads text 0, video, "… A.", option A, "\nB.", option B, and so on.
//!
//! **`map`** replaces the video by our explicit map: the rendered semantic top-down image (rooms and
//! objects labelled), the scene graph as JSON, then the question's images and texts in the same interleaved
//! order, without text 0 (which announces the video the model no longer sees).
//!
//! **`map+e2e`** puts the map first, then the whole `e2e` prompt.
//!
//! The map comes from outside this crate ([`MapContext`], read from a map directory), so the caller decides
//! where maps live and how they were built.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use gst_io::QuestionFile;
use gst_io::video::VideoReader;

use crate::VlmError;
use crate::request::{Part, VideoFrames, VlmImage, VlmRequest};

/// What the model is shown besides the question.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PromptMode {
    /// GST's end-to-end protocol: video frames, the question's images and texts.
    #[default]
    #[serde(rename = "e2e")]
    E2e,
    /// Our rendered map and scene graph instead of the video.
    #[serde(rename = "map")]
    Map,
    /// The map, then the full end-to-end prompt.
    #[serde(rename = "map+e2e")]
    MapE2e,
}

impl PromptMode {
    pub const ALL: [PromptMode; 3] = [PromptMode::E2e, PromptMode::Map, PromptMode::MapE2e];

    pub fn as_str(self) -> &'static str {
        match self {
            PromptMode::E2e => "e2e",
            PromptMode::Map => "map",
            PromptMode::MapE2e => "map+e2e",
        }
    }

    /// Whether the prompt needs a [`MapContext`].
    pub fn needs_map(self) -> bool {
        matches!(self, PromptMode::Map | PromptMode::MapE2e)
    }

    /// Whether the prompt needs the question's video.
    pub fn needs_video(self) -> bool {
        matches!(self, PromptMode::E2e | PromptMode::MapE2e)
    }
}

impl fmt::Display for PromptMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PromptMode {
    type Err = VlmError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        PromptMode::ALL.into_iter().find(|mode| mode.as_str() == text).ok_or_else(|| {
            VlmError::Config(format!("unknown prompt mode {text:?} (known: e2e, map, map+e2e)"))
        })
    }
}

/// How frames are taken from a video.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum FrameSampling {
    /// `frames` frames spread evenly over the whole video (the centre of each of `frames` equal segments),
    /// as VLM evaluations on GST-Bench and VSI-Bench sample. A shorter video gives all its frames.
    Uniform,
    /// One frame every `1 / fps` seconds from the start, at most `frames` of them (evenly thinned when there
    /// would be more).
    Fps { fps: f64 },
}

/// Prompt settings. Every field has a documented default; unknown fields are an error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PromptConfig {
    /// Frames taken from the video (default 32; GST-Bench's open models were run with 8–64). More frames cost
    /// more tokens: a 640x512 frame is 256–1,000 tokens depending on the model.
    pub frames: usize,
    /// How the frames are chosen (default: uniform over the whole video).
    pub sampling: FrameSampling,
    /// Images and frames larger than this (longest side, pixels) are shrunk before sending; 0 keeps them as
    /// they are (default 0: GST's frames are 640x512 already).
    pub max_image_side: u32,
}

impl Default for PromptConfig {
    fn default() -> Self {
        Self { frames: 32, sampling: FrameSampling::Uniform, max_image_side: 0 }
    }
}

impl PromptConfig {
    pub fn validate(&self) -> Result<(), VlmError> {
        if self.frames == 0 {
            return Err(VlmError::Config("prompt.frames must be at least 1".into()));
        }
        if let FrameSampling::Fps { fps } = self.sampling
            && !(fps > 0.0 && fps.is_finite())
        {
            return Err(VlmError::Config(format!("prompt.sampling.fps must be positive, not {fps}")));
        }
        Ok(())
    }
}

/// Our map of a scene, as the `map` modes show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapContext {
    /// The rendered semantic top-down image (rooms and objects labelled).
    pub topdown_png: PathBuf,
    /// The scene graph (rooms, their connections, objects) as JSON text.
    pub scene_graph_json: String,
}

impl MapContext {
    /// The file names a map directory holds.
    pub const TOPDOWN_FILE: &'static str = "semantic.png";
    pub const SCENE_GRAPH_FILE: &'static str = "scene_graph.json";

    /// Reads a map directory: `semantic.png` and `scene_graph.json` (which must be valid JSON).
    pub fn load(dir: &Path) -> Result<Self, VlmError> {
        let map_error = |message: String| VlmError::Map { dir: dir.into(), message };
        let topdown_png = dir.join(Self::TOPDOWN_FILE);
        if !topdown_png.is_file() {
            return Err(map_error(format!("no {} (the rendered top-down map)", Self::TOPDOWN_FILE)));
        }
        let graph_path = dir.join(Self::SCENE_GRAPH_FILE);
        let scene_graph_json = std::fs::read_to_string(&graph_path)
            .map_err(|e| map_error(format!("cannot read {}: {e}", Self::SCENE_GRAPH_FILE)))?;
        serde_json::from_str::<serde_json::Value>(&scene_graph_json)
            .map_err(|e| map_error(format!("{} is not valid JSON: {e}", Self::SCENE_GRAPH_FILE)))?;
        Ok(Self { topdown_png, scene_graph_json })
    }
}

/// The text introducing the map image.
pub const MAP_INTRO: &str = "This is a semantic top-down map of the entire scene, built from the exploration \
video you watched earlier: floors are coloured by room type, objects are drawn and labelled by class, and walls \
are dark. The x-axis points to the right of the image and the y-axis to the bottom.";

/// The text introducing the scene graph.
pub const SCENE_GRAPH_INTRO: &str = "This is the scene graph of the same map (rooms, the doors between them and the objects in each room), as JSON:";

/// Builds the request for a question in a mode. `map` is required by the `map` modes.
pub fn build_request(
    question: &QuestionFile,
    mode: PromptMode,
    config: &PromptConfig,
    map: Option<&MapContext>,
) -> Result<VlmRequest, VlmError> {
    config.validate()?;
    let mut parts = Vec::new();
    if mode.needs_map() {
        let Some(map) = map else {
            return Err(VlmError::Config(format!("prompt mode {mode} needs a map, and none was given")));
        };
        parts.push(Part::Text(MAP_INTRO.into()));
        parts.push(Part::Image(load_image(&map.topdown_png, config)?));
        parts.push(Part::Text(format!("{SCENE_GRAPH_INTRO}\n{}\n", map.scene_graph_json.trim())));
    }
    let texts = &question.question.texts;
    let image_paths = question.image_paths();
    if mode.needs_video() {
        if let Some(first) = texts.first() {
            parts.push(Part::Text(first.clone()));
        }
        parts.push(Part::Video(sample_video(&question.video_path(), config)?));
    }
    for (i, text) in texts.iter().enumerate().skip(1) {
        parts.push(Part::Text(text.clone()));
        if let Some(path) = image_paths.get(i - 1) {
            parts.push(Part::Image(load_image(path, config)?));
        }
    }
    // Images beyond the texts (a question with more images than texts): appended in order.
    for path in image_paths.iter().skip(texts.len().saturating_sub(1)) {
        parts.push(Part::Image(load_image(path, config)?));
    }
    if !mode.needs_video() && texts.len() <= 1 {
        // A question whose only text announces the video: keep it, so the model sees the question at all.
        parts.extend(texts.first().cloned().map(Part::Text));
    }
    Ok(VlmRequest { id: question.question.uid.clone(), parts: merge_texts(parts) })
}

/// Adjacent text parts become one (the order of everything else is kept).
fn merge_texts(parts: Vec<Part>) -> Vec<Part> {
    let mut merged: Vec<Part> = Vec::with_capacity(parts.len());
    for part in parts {
        match (merged.last_mut(), part) {
            (Some(Part::Text(previous)), Part::Text(text)) => {
                if !previous.ends_with(char::is_whitespace) && !text.starts_with(char::is_whitespace) {
                    previous.push('\n');
                }
                previous.push_str(&text);
            }
            (_, part) => merged.push(part),
        }
    }
    merged
}

fn load_image(path: &Path, config: &PromptConfig) -> Result<VlmImage, VlmError> {
    let image = gst_io::read_rgb(path)?;
    Ok(VlmImage { source: path.into(), image: shrink(image, config.max_image_side) })
}

/// Shrinks an image so that its longest side is at most `max_side` (0: unchanged).
fn shrink(image: gst_core::RgbImage, max_side: u32) -> gst_core::RgbImage {
    let longest = image.width().max(image.height());
    if max_side == 0 || longest <= max_side {
        return image;
    }
    let scale = f64::from(max_side) / f64::from(longest);
    let width = ((f64::from(image.width()) * scale).round() as u32).max(1);
    let height = ((f64::from(image.height()) * scale).round() as u32).max(1);
    crate::image_ops::resize_bilinear(&image, width, height)
}

/// The frame indices to take from a video of `total` frames at `fps`.
pub fn sample_frame_indices(total: usize, fps: f64, config: &PromptConfig) -> Vec<usize> {
    if total == 0 {
        return Vec::new();
    }
    let evenly = |count: usize, within: &[usize]| -> Vec<usize> {
        if within.len() <= count {
            return within.to_vec();
        }
        let chosen: BTreeSet<usize> =
            (0..count).map(|i| within[((2 * i + 1) * within.len()) / (2 * count)]).collect();
        chosen.into_iter().collect()
    };
    let all: Vec<usize> = (0..total).collect();
    match config.sampling {
        FrameSampling::Uniform => evenly(config.frames, &all),
        FrameSampling::Fps { fps: sample_fps } => {
            let step_s = 1.0 / sample_fps;
            let mut picked = Vec::new();
            let mut t = 0.0;
            while let Some(index) = Some((t * fps).round() as usize).filter(|&i| i < total) {
                if picked.last() != Some(&index) {
                    picked.push(index);
                }
                t += step_s;
            }
            evenly(config.frames, &picked)
        }
    }
}

/// Reads the sampled frames of a video (decoding it once, or twice when the container's frame count is
/// missing or wrong).
pub fn sample_video(path: &Path, config: &PromptConfig) -> Result<VideoFrames, VlmError> {
    let mut reader = VideoReader::open(path)?;
    let fps = reader.fps();
    let total = match reader.frame_count_hint() {
        Some(count) => count,
        None => count_frames(path)?,
    };
    let indices = sample_frame_indices(total, fps, config);
    let (frames, kept, decoded) = read_indices(reader, &indices, config)?;
    if kept.len() == indices.len() {
        return Ok(VideoFrames { source: path.into(), frame_indices: kept, fps, frames });
    }
    // The container promised more frames than it has: sample again over the frames that decode.
    tracing::warn!(video = %path.display(), declared = total, decoded, "frame count hint was wrong; resampling");
    reader = VideoReader::open(path)?;
    let indices = sample_frame_indices(decoded, fps, config);
    let (frames, kept, _) = read_indices(reader, &indices, config)?;
    Ok(VideoFrames { source: path.into(), frame_indices: kept, fps, frames })
}

type SampledFrames = (Vec<gst_core::RgbImage>, Vec<usize>, usize);

fn read_indices(
    mut reader: VideoReader,
    indices: &[usize],
    config: &PromptConfig,
) -> Result<SampledFrames, VlmError> {
    let mut frames = Vec::with_capacity(indices.len());
    let mut kept = Vec::with_capacity(indices.len());
    let mut wanted = indices.iter().copied().peekable();
    let mut index = 0;
    while let Some(frame) = reader.next_frame()? {
        if wanted.peek() == Some(&index) {
            wanted.next();
            frames.push(shrink(frame, config.max_image_side));
            kept.push(index);
        }
        index += 1;
        if wanted.peek().is_none() {
            break;
        }
    }
    Ok((frames, kept, index))
}

fn count_frames(path: &Path) -> Result<usize, VlmError> {
    let mut reader = VideoReader::open(path)?;
    let mut count = 0;
    while reader.next_frame()?.is_some() {
        count += 1;
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_sampling_takes_segment_centres() {
        let config = PromptConfig { frames: 4, ..PromptConfig::default() };
        assert_eq!(sample_frame_indices(100, 10.0, &config), vec![12, 37, 62, 87]);
        assert_eq!(sample_frame_indices(3, 10.0, &config), vec![0, 1, 2]);
        assert!(sample_frame_indices(0, 10.0, &config).is_empty());
    }

    #[test]
    fn fps_sampling_steps_in_time_and_is_capped() {
        let config =
            PromptConfig { frames: 100, sampling: FrameSampling::Fps { fps: 2.0 }, max_image_side: 0 };
        assert_eq!(sample_frame_indices(25, 10.0, &config), vec![0, 5, 10, 15, 20]);
        let capped = PromptConfig { frames: 2, ..config };
        assert_eq!(sample_frame_indices(25, 10.0, &capped), vec![5, 15]);
    }

    #[test]
    fn modes_parse_from_their_names() {
        for mode in PromptMode::ALL {
            assert_eq!(mode.as_str().parse::<PromptMode>().ok(), Some(mode));
        }
        assert!("video".parse::<PromptMode>().is_err());
    }

    #[test]
    fn adjacent_texts_merge() {
        let merged =
            merge_texts(vec![Part::Text("a".into()), Part::Text("\nb".into()), Part::Text("c".into())]);
        assert_eq!(merged, vec![Part::Text("a\nb\nc".into())]);
    }
}
