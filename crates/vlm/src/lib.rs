//! The VLM interface of gst: how a vision-language model is asked a GST question and what it answers.
//!
//! A [`VlmRequest`] is one user turn of ordered [`Part`]s (text, images, sampled video frames), built from a
//! GST question file by [`prompt::build_request`] in one of three [`PromptMode`]s: GST's end-to-end protocol
//! (`e2e`), our rendered map and scene graph instead of the video (`map`), or both (`map+e2e`). A [`Vlm`]
//! answers it with raw text; `gst score` extracts the answer from that text with the same rules the
//! answerers can use ([`gst_core::extract`]).
//!
//! Two backends:
//! - [`openai::OpenAiVlm`]: any OpenAI-compatible chat-completions server (vLLM, SGLang, llama.cpp's server,
//!   Ollama, LM Studio, hosted APIs), with retries, bounded concurrency and an on-disk response cache;
//! - [`onnx::OnnxVlm`]: a Hugging Face SmolVLM export run in process by ONNX Runtime (`ort`, loaded
//!   dynamically from the project's `.venv`; see [`runtime`]).
//!
//! Why a crate of its own: HTTP clients and ONNX Runtime are heavy, and only the answerers need them, so
//! this crate is a leaf that `gst-baseline` and `gst-cli` use and nothing in the core pulls in.

pub mod cache;
pub mod error;
pub mod image_ops;
pub mod onnx;
pub mod openai;
pub mod prompt;
pub mod request;
pub mod runtime;
#[cfg(feature = "test-server")]
pub mod test_server;

use std::sync::atomic::{AtomicU64, Ordering};

pub use cache::ResponseCache;
pub use error::VlmError;
pub use onnx::{OnnxConfig, OnnxVlm};
pub use openai::{OpenAiConfig, OpenAiVlm, VideoInput, parse_completion};
pub use prompt::{FrameSampling, MapContext, PromptConfig, PromptMode, build_request};
pub use request::{Part, Usage, VideoFrames, VlmImage, VlmRequest, VlmResponse};

/// A vision-language model: answers one request with raw text. Implementations are shared between the
/// threads of an evaluation.
pub trait Vlm: Send + Sync {
    /// What the model is, for result tables and logs (`openai:qwen2.5-vl-7b`, `onnx:SmolVLM-256M`).
    fn name(&self) -> String;

    /// Answers one request.
    fn generate(&self, request: &VlmRequest) -> Result<VlmResponse, VlmError>;

    /// What this model has cost so far.
    fn stats(&self) -> VlmStats;
}

/// Counts of an evaluation's requests, for its cost and time summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VlmStats {
    /// Requests answered (cached or not).
    pub requests: u64,
    /// Of those, answered from the response cache.
    pub cached: u64,
    /// Requests that failed for good.
    pub failures: u64,
    /// Attempts repeated after a 429/5xx or a transport error.
    pub retries: u64,
    /// Requests whose answer reported token counts, and the counts (cached answers included).
    pub with_usage: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl std::fmt::Display for VlmStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} requests ({} from the cache, {} failed, {} retries)",
            self.requests, self.cached, self.failures, self.retries
        )?;
        if self.with_usage > 0 {
            write!(
                f,
                "; tokens: {} prompt + {} completion (reported for {} requests)",
                self.prompt_tokens, self.completion_tokens, self.with_usage
            )?;
        }
        Ok(())
    }
}

/// Thread-safe counters behind [`VlmStats`].
#[derive(Debug, Default)]
pub struct StatsCounter {
    requests: AtomicU64,
    cached: AtomicU64,
    failures: AtomicU64,
    retries: AtomicU64,
    with_usage: AtomicU64,
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
}

impl StatsCounter {
    pub fn record(&self, response: &VlmResponse) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if response.cached {
            self.cached.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(usage) = response.usage {
            self.with_usage.fetch_add(1, Ordering::Relaxed);
            self.prompt_tokens.fetch_add(usage.prompt_tokens, Ordering::Relaxed);
            self.completion_tokens.fetch_add(usage.completion_tokens, Ordering::Relaxed);
        }
    }

    pub fn record_failure(&self) {
        self.failures.fetch_add(1, Ordering::Relaxed);
    }

    pub fn record_retry(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> VlmStats {
        VlmStats {
            requests: self.requests.load(Ordering::Relaxed),
            cached: self.cached.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
            with_usage: self.with_usage.load(Ordering::Relaxed),
            prompt_tokens: self.prompt_tokens.load(Ordering::Relaxed),
            completion_tokens: self.completion_tokens.load(Ordering::Relaxed),
        }
    }
}
