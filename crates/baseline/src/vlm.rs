//! VLM answerers: any [`Vlm`] asked a GST question end to end (`e2e`, the GST-Bench protocol), grounded on
//! our rendered map (`map`), or both (`map+e2e`). The answer is the model's raw text; `gst score` extracts
//! the answer from it with [`gst_core::extract`], the same reading every answerer gets.

use std::path::PathBuf;
use std::sync::Arc;

use gst_io::gst::QuestionFile;
use gst_vlm::{MapContext, PromptConfig, PromptMode, Vlm, build_request};

use crate::{AnswerContext, Answerer, BaselineError, Reply};

/// Where the `map` modes find a scene's map: a directory holding `semantic.png` and `scene_graph.json`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum MapLocation {
    /// `<cache dir>/maps/<scene>/`, where the map answerers keep the maps they build (default).
    #[default]
    Cache,
    /// `<dir>/<scene>/`.
    Dir(PathBuf),
}

/// A VLM answering GST questions.
pub struct VlmAnswerer {
    vlm: Arc<dyn Vlm>,
    mode: PromptMode,
    prompt: PromptConfig,
    maps: MapLocation,
}

impl std::fmt::Debug for VlmAnswerer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VlmAnswerer")
            .field("vlm", &self.vlm.name())
            .field("mode", &self.mode)
            .field("prompt", &self.prompt)
            .field("maps", &self.maps)
            .finish()
    }
}

impl VlmAnswerer {
    pub fn new(
        vlm: Arc<dyn Vlm>,
        mode: PromptMode,
        prompt: PromptConfig,
        maps: MapLocation,
    ) -> Result<Self, BaselineError> {
        prompt.validate()?;
        Ok(Self { vlm, mode, prompt, maps })
    }

    pub fn vlm(&self) -> &Arc<dyn Vlm> {
        &self.vlm
    }

    /// The map directory of a scene.
    pub fn map_dir(&self, scene: &str, context: &AnswerContext<'_>) -> PathBuf {
        match &self.maps {
            MapLocation::Cache => context.cache_dir.join("maps").join(scene),
            MapLocation::Dir(dir) => dir.join(scene),
        }
    }
}

impl Answerer for VlmAnswerer {
    fn name(&self) -> String {
        format!("vlm-{}:{}", self.mode, self.vlm.name())
    }

    fn answer(&self, question: &QuestionFile, context: &AnswerContext<'_>) -> Result<Reply, BaselineError> {
        let map = if self.mode.needs_map() {
            Some(MapContext::load(&self.map_dir(&question.question.scene, context))?)
        } else {
            None
        };
        let request = build_request(question, self.mode, &self.prompt, map.as_ref())?;
        Ok(Reply::new(self.vlm.generate(&request)?.text))
    }
}
