//! The options of `gst eval --answerer vlm`: which backend, which model, which prompt mode. Flattened into
//! the eval command's arguments.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};

use gst_baseline::{MapLocation, VlmAnswerer};
use gst_vlm::{
    FrameSampling, OnnxConfig, OnnxVlm, OpenAiConfig, OpenAiVlm, PromptConfig, PromptMode, VideoInput, Vlm,
};

/// Where the model runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum VlmBackend {
    /// An OpenAI-compatible server (vLLM, SGLang, llama.cpp, Ollama, LM Studio, hosted APIs).
    Openai,
    /// A Hugging Face SmolVLM ONNX export run in process by ONNX Runtime.
    Onnx,
}

#[derive(Clone, Debug, clap::Args)]
pub struct VlmArgs {
    /// VLM backend (with --answerer vlm).
    #[arg(long, value_enum, default_value_t = VlmBackend::Openai)]
    pub backend: VlmBackend,
    /// The model: its name on the server (openai) or its export directory (onnx).
    #[arg(long)]
    pub model: Option<String>,
    /// Base URL of the OpenAI-compatible API (vLLM: http://localhost:8000/v1, Ollama:
    /// http://localhost:11434/v1).
    #[arg(long, default_value = "http://localhost:8000/v1")]
    pub url: String,
    /// What the model is shown: e2e (video frames and the question, GST's protocol), map (our rendered map
    /// and scene graph instead of the video), map+e2e (both).
    #[arg(long, default_value = "e2e")]
    pub mode: PromptMode,
    /// Video frames per question.
    #[arg(long, default_value_t = 32)]
    pub frames: usize,
    /// Take frames at this rate (per second, at most --frames of them) instead of evenly over the video.
    #[arg(long)]
    pub sample_fps: Option<f64>,
    /// Shrink images and frames whose longest side exceeds this many pixels (0: keep).
    #[arg(long, default_value_t = 0)]
    pub max_image_side: u32,
    /// Map directories: DIR/<scene>/semantic.png and scene_graph.json (default: OUT/cache/maps/<scene>).
    #[arg(long)]
    pub maps: Option<PathBuf>,
    /// Environment variable holding the API key (openai).
    #[arg(long, default_value = "OPENAI_API_KEY")]
    pub api_key_env: String,
    /// Most tokens per answer (openai: max_tokens; onnx: new tokens).
    #[arg(long, default_value_t = 256)]
    pub max_tokens: u32,
    /// Requests in flight at once (openai).
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Seconds one request may take (openai).
    #[arg(long, default_value_t = 300.0)]
    pub timeout_s: f64,
    /// Retries on 429, 5xx and connection errors, with exponential backoff from 1 s (openai).
    #[arg(long, default_value_t = 5)]
    pub retries: u32,
    /// Send each video as one vLLM `video_url` part instead of one image per frame (openai, vLLM only).
    #[arg(long)]
    pub video_url: bool,
    /// ONNX file variant: "" (float32), q4, int8, quantized, uint8, bnb4 (onnx).
    #[arg(long, default_value = "")]
    pub variant: String,
    /// libonnxruntime.so to load (onnx; default: ORT_DYLIB_PATH, then the project's .venv).
    #[arg(long)]
    pub ort_library: Option<PathBuf>,
}

impl VlmArgs {
    /// The prompt settings these options give.
    pub fn prompt_config(&self) -> PromptConfig {
        PromptConfig {
            frames: self.frames,
            sampling: self.sample_fps.map_or(FrameSampling::Uniform, |fps| FrameSampling::Fps { fps }),
            max_image_side: self.max_image_side,
        }
    }

    /// Builds the model; `cache_dir` holds the HTTP backend's response cache.
    pub fn build_vlm(&self, cache_dir: &Path) -> Result<Arc<dyn Vlm>> {
        let Some(model) = self.model.clone() else {
            bail!(
                "--answerer vlm needs --model (a model name for --backend openai, a directory for --backend onnx)"
            );
        };
        Ok(match self.backend {
            VlmBackend::Openai => Arc::new(OpenAiVlm::new(OpenAiConfig {
                url: self.url.clone(),
                model,
                api_key_env: self.api_key_env.clone(),
                max_tokens: self.max_tokens,
                timeout_s: self.timeout_s,
                max_retries: self.retries,
                max_concurrency: self.concurrency,
                video: if self.video_url { VideoInput::VideoUrl } else { VideoInput::Images },
                cache_dir: Some(cache_dir.to_owned()),
                ..OpenAiConfig::default()
            })?),
            VlmBackend::Onnx => {
                let dir = PathBuf::from(&model);
                Arc::new(
                    OnnxVlm::load(
                        &dir,
                        OnnxConfig {
                            max_new_tokens: self.max_tokens as usize,
                            variant: self.variant.clone(),
                            ort_library: self.ort_library.clone(),
                            ..OnnxConfig::default()
                        },
                    )
                    .with_context(|| format!("loading the ONNX model {}", dir.display()))?,
                )
            }
        })
    }

    /// The answerer over a built model.
    pub fn answerer(&self, vlm: Arc<dyn Vlm>) -> Result<VlmAnswerer> {
        let maps = self.maps.clone().map_or(MapLocation::Cache, MapLocation::Dir);
        Ok(VlmAnswerer::new(vlm, self.mode, self.prompt_config(), maps)?)
    }
}
