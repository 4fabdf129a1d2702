//! Answerers for GST questions and the evaluation runner.
//!
//! An [`Answerer`] reads a question file (and the video and images it names) like any other model and
//! returns its raw answer text; [`eval::run_eval`] runs one over a benchmark split, resumably, and writes
//! the `predictions.jsonl` that `gst score` reads. Answerers never see simulator ground truth: this crate
//! depends on neither `gst-sim` nor `gst-bench` (`scripts/check-layers.sh`). Modes that read ground-truth
//! files (poses, instance masks) say so in their names (`oracle`).

use std::path::{Path, PathBuf};

use gst_io::gst::QuestionFile;

pub mod drawings;
pub mod eval;
pub mod frames;
pub mod geometry;
pub mod map_answerer;
pub mod priors;
pub mod random;
pub mod scene_layout;
pub mod scene_slam;
pub mod vlm;

pub use eval::{EvalOptions, EvalSummary, PredictionLine, fallback_counts, read_predictions, run_eval};
pub use random::RandomAnswerer;
pub use vlm::{MapLocation, VlmAnswerer};

/// Everything that can go wrong while answering or evaluating.
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    #[error(transparent)]
    Io(#[from] gst_io::IoError),
    #[error(transparent)]
    Slam(#[from] gst_slam::SlamError),
    #[error(transparent)]
    Vlm(#[from] gst_vlm::VlmError),
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("{uid}: {message}")]
    Question { uid: String, message: String },
    #[error("{0}")]
    Other(String),
}

impl BaselineError {
    pub fn file(path: &Path, message: impl Into<String>) -> Self {
        BaselineError::File { path: path.into(), message: message.into() }
    }

    pub fn io(path: &Path, error: std::io::Error) -> Self {
        BaselineError::File { path: path.into(), message: error.to_string() }
    }
}

/// Where an evaluation runs: the split being answered and a cache directory an answerer may keep
/// per-video work in (maps, decoded frames, responses), reused across questions and runs.
#[derive(Clone, Copy, Debug)]
pub struct AnswerContext<'a> {
    pub split_dir: &'a Path,
    pub cache_dir: &'a Path,
}

/// A model that answers GST questions.
pub trait Answerer: Send + Sync {
    /// The name of its row in tables ("map-slam", "random", "vlm:<model>").
    fn name(&self) -> String;

    /// Work shared by the questions of one scene (building its map, say), called once before they are
    /// answered, on its own thread and possibly while earlier scenes' questions are being answered. The
    /// default does nothing.
    fn prepare(
        &self,
        _scene: &str,
        _questions: &[&QuestionFile],
        _context: &AnswerContext<'_>,
    ) -> Result<(), BaselineError> {
        Ok(())
    }

    /// Called once after the last question of a scene was answered (or its `prepare` failed): shared work
    /// kept for the scene can be released. The default does nothing. `prepare` of later scenes may run
    /// before or during the answers of earlier ones.
    fn finish(&self, _scene: &str) {}

    /// The raw answer text for one question (what `gst score` extracts the answer from), and whether it
    /// is a fallback.
    fn answer(&self, question: &QuestionFile, context: &AnswerContext<'_>) -> Result<Reply, BaselineError>;
}

/// An answerer's reply to one question.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    /// The raw answer text.
    pub text: String,
    /// Why the answer is a fallback, when the answerer's method could not be applied (a current view that
    /// does not relocalise, say) and it answered with a weaker, documented estimate instead. Fallbacks are
    /// scored like any answer and counted per column.
    pub fallback: Option<String>,
    /// What the answer was computed from, where the answerer has it (for visualisation; not scored).
    pub grounding: Grounding,
}

impl Reply {
    /// A reply by the answerer's own method.
    pub fn new(text: impl Into<String>) -> Self {
        Reply { text: text.into(), fallback: None, grounding: Grounding::default() }
    }

    /// A fallback reply, with the reason.
    pub fn fallback(text: impl Into<String>, reason: impl Into<String>) -> Self {
        Reply { text: text.into(), fallback: Some(reason.into()), grounding: Grounding::default() }
    }

    /// The same reply with its grounding.
    pub fn with_grounding(mut self, grounding: Grounding) -> Self {
        self.grounding = grounding;
        self
    }
}

/// Where an answer came from, in the answerer's world (the SLAM map's, or the ground truth's with oracle
/// poses): the camera of the question's current view as it was located (relocalised or the fallback's), and
/// the target point. `gst eval --rrd` and `gst demo` draw them beside the true answer; nothing scores them.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Grounding {
    /// `world_from_camera` of the current view.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub camera: Option<gst_core::Pose3>,
    /// The target, metres.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<[f64; 3]>,
}

impl Grounding {
    pub fn is_empty(&self) -> bool {
        self.camera.is_none() && self.target.is_none()
    }
}
