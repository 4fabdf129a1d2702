//! An OpenAI-compatible chat-completions backend: vLLM, SGLang, llama.cpp's server, Ollama, LM Studio and
//! hosted APIs all speak it.
//!
//! One request is one `POST {url}/chat/completions` with a single user message whose `content` is the
//! request's parts in order: `{"type": "text", "text": …}` for text and `{"type": "image_url", "image_url":
//! {"url": "data:image/jpeg;base64,…"}}` for each image and (by default) each video frame. With
//! [`VideoInput::VideoUrl`], the frames of a video go as one vLLM `video_url` part instead,
//! `data:video/jpeg;base64,<frame 1>,<frame 2>,…` (vLLM's format for pre-sampled frames), so that the
//! server applies the model's own video processing. Decoding is greedy (`temperature` 0) unless configured.
//!
//! Failures: 429 and 5xx answers and transport errors (refused, reset, timed out) are retried with
//! exponential backoff (a `Retry-After` header in seconds wins when it is longer); 401/403 fail at once
//! naming the API key's variable; other 4xx fail at once; a body that is not a chat completion fails naming
//! the URL. At most `max_concurrency` requests are in flight at once, however many threads ask.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::cache::{CacheEntry, ResponseCache};
use crate::request::{Part, Usage, VlmRequest, VlmResponse};
use crate::{StatsCounter, Vlm, VlmError, VlmStats};

/// How video frames are sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VideoInput {
    /// Each frame as an `image_url` part (works with every server and hosted API).
    #[default]
    Images,
    /// All frames as one vLLM `video_url` part (`data:video/jpeg;base64,…`): vLLM only.
    VideoUrl,
}

/// Settings of the HTTP backend. Every field has a documented default; unknown fields are an error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OpenAiConfig {
    /// Base URL of the API (`http://localhost:8000/v1` for vLLM, `http://localhost:11434/v1` for Ollama);
    /// `/chat/completions` is appended unless the URL already ends with it. Default: vLLM's local address.
    pub url: String,
    /// The model name the server knows (required).
    pub model: String,
    /// Environment variable holding the API key, sent as `Authorization: Bearer …` when set (default
    /// `OPENAI_API_KEY`; local servers need none).
    pub api_key_env: String,
    /// A file holding the API key (its first line, trimmed), read instead of `api_key_env` when set
    /// (default `None`). The key itself is never part of the configuration, logs or error messages.
    pub api_key_file: Option<PathBuf>,
    /// Upper bound on the answer's tokens (`max_tokens`; default 256: GST's answers are one number, point
    /// or letter, with room for a short explanation).
    pub max_tokens: u32,
    /// Sampling temperature (default 0: greedy, reproducible).
    pub temperature: f64,
    /// Seconds to wait for a connection (default 10).
    pub connect_timeout_s: f64,
    /// Seconds one request may take in total, reading the answer included (default 300: long video prompts
    /// on a busy server are slow).
    pub timeout_s: f64,
    /// Attempts after the first one on 429, 5xx and transport errors (default 5).
    pub max_retries: u32,
    /// First backoff in seconds, doubled after each retry (default 1).
    pub backoff_initial_s: f64,
    /// Longest backoff in seconds (default 60).
    pub backoff_max_s: f64,
    /// Requests in flight at once (default 4).
    pub max_concurrency: usize,
    /// JPEG quality of images and frames, 1–100 (default 90).
    pub jpeg_quality: u8,
    /// How video frames are sent (default: as images).
    pub video: VideoInput,
    /// Response cache directory; `None` asks the server every time (default `None`; `gst eval` sets one).
    pub cache_dir: Option<PathBuf>,
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        Self {
            url: "http://localhost:8000/v1".into(),
            model: String::new(),
            api_key_env: "OPENAI_API_KEY".into(),
            api_key_file: None,
            max_tokens: 256,
            temperature: 0.0,
            connect_timeout_s: 10.0,
            timeout_s: 300.0,
            max_retries: 5,
            backoff_initial_s: 1.0,
            backoff_max_s: 60.0,
            max_concurrency: 4,
            jpeg_quality: 90,
            video: VideoInput::Images,
            cache_dir: None,
        }
    }
}

impl OpenAiConfig {
    pub fn validate(&self) -> Result<(), VlmError> {
        let fail = |message: String| Err(VlmError::Config(message));
        if !(self.url.starts_with("http://") || self.url.starts_with("https://")) {
            return fail(format!("url {:?} must start with http:// or https://", self.url));
        }
        if self.model.trim().is_empty() {
            return fail(
                "a model name is required (the name the server serves, e.g. Qwen/Qwen2.5-VL-7B-Instruct)"
                    .into(),
            );
        }
        for (name, value) in [
            ("connect_timeout_s", self.connect_timeout_s),
            ("timeout_s", self.timeout_s),
            ("backoff_max_s", self.backoff_max_s),
        ] {
            if !(value > 0.0 && value.is_finite()) {
                return fail(format!("{name} must be positive, not {value}"));
            }
        }
        if !(self.backoff_initial_s >= 0.0 && self.backoff_initial_s.is_finite()) {
            return fail(format!(
                "backoff_initial_s must be zero or positive, not {}",
                self.backoff_initial_s
            ));
        }
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            return fail(format!("temperature must be zero or positive, not {}", self.temperature));
        }
        if self.max_concurrency == 0 {
            return fail("max_concurrency must be at least 1".into());
        }
        if self.max_tokens == 0 {
            return fail("max_tokens must be at least 1".into());
        }
        if !(1..=100).contains(&self.jpeg_quality) {
            return fail(format!("jpeg_quality must be 1–100, not {}", self.jpeg_quality));
        }
        Ok(())
    }

    /// The chat-completions endpoint.
    pub fn endpoint(&self) -> String {
        let base = self.url.trim_end_matches('/');
        if base.ends_with("/chat/completions") { base.to_owned() } else { format!("{base}/chat/completions") }
    }
}

/// A counting semaphore: at most `limit` holders at once.
#[derive(Debug)]
struct Semaphore {
    in_use: Mutex<usize>,
    released: Condvar,
    limit: usize,
}

impl Semaphore {
    fn new(limit: usize) -> Self {
        Self { in_use: Mutex::new(0), released: Condvar::new(), limit }
    }

    fn acquire(&self) -> Permit<'_> {
        let mut in_use = self.in_use.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        while *in_use >= self.limit {
            in_use = self.released.wait(in_use).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        *in_use += 1;
        Permit(self)
    }
}

struct Permit<'a>(&'a Semaphore);

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut in_use = self.0.in_use.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *in_use = in_use.saturating_sub(1);
        self.0.released.notify_one();
    }
}

/// An API key: its `Debug` form never shows it.
struct ApiKey(String);

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[API key]")
    }
}

/// The HTTP backend.
#[derive(Debug)]
pub struct OpenAiVlm {
    config: OpenAiConfig,
    endpoint: String,
    api_key: Option<ApiKey>,
    agent: ureq::Agent,
    cache: Option<ResponseCache>,
    slots: Semaphore,
    stats: StatsCounter,
    /// Set when a request exhausted its retries without reaching the server: later requests try once, so
    /// that an evaluation against a server that is down fails each question quickly (and a rerun resumes)
    /// instead of backing off for every one. Cleared by the next answer.
    down: AtomicBool,
}

impl OpenAiVlm {
    /// Checks the configuration and reads the API key from its variable (absent is fine: local servers).
    pub fn new(config: OpenAiConfig) -> Result<Self, VlmError> {
        config.validate()?;
        let api_key = match &config.api_key_file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    VlmError::Config(format!("cannot read the API key file {}: {e}", path.display()))
                })?;
                let key = text.lines().next().unwrap_or_default().trim().to_owned();
                if key.is_empty() {
                    return Err(VlmError::Config(format!("the API key file {} is empty", path.display())));
                }
                Some(key)
            }
            None => std::env::var(&config.api_key_env).ok().map(|key| key.trim().to_owned()),
        }
        .filter(|key| !key.is_empty())
        .map(ApiKey);
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_secs_f64(config.connect_timeout_s))
            .timeout(Duration::from_secs_f64(config.timeout_s))
            .build();
        Ok(Self {
            endpoint: config.endpoint(),
            api_key,
            agent,
            cache: config.cache_dir.clone().map(ResponseCache::new),
            slots: Semaphore::new(config.max_concurrency),
            stats: StatsCounter::default(),
            down: AtomicBool::new(false),
            config,
        })
    }

    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// The JSON body of a request, as it is sent (and hashed for the cache).
    pub fn body(&self, request: &VlmRequest) -> Result<Value, VlmError> {
        let mut content = Vec::new();
        for part in &request.parts {
            match part {
                Part::Text(text) => content.push(json!({"type": "text", "text": text})),
                Part::Image(image) => {
                    content.push(image_part(&self.jpeg_base64(&image.image, &image.source)?))
                }
                Part::Video(video) => {
                    let frames = video
                        .frames
                        .iter()
                        .zip(&video.frame_indices)
                        .map(|(frame, index)| {
                            self.jpeg_base64(frame, &video.source.join(format!("frame {index}")))
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    match self.config.video {
                        VideoInput::Images => content.extend(frames.iter().map(|frame| image_part(frame))),
                        VideoInput::VideoUrl => content.push(json!({
                            "type": "video_url",
                            "video_url": {"url": format!("data:video/jpeg;base64,{}", frames.join(","))}
                        })),
                    }
                }
            }
        }
        Ok(json!({
            "model": self.config.model,
            "messages": [{"role": "user", "content": content}],
            "max_tokens": self.config.max_tokens,
            "temperature": self.config.temperature,
        }))
    }

    fn jpeg_base64(&self, image: &gst_core::RgbImage, source: &std::path::Path) -> Result<String, VlmError> {
        let jpeg = gst_io::encode_jpeg(image, self.config.jpeg_quality, source)?;
        Ok(base64::engine::general_purpose::STANDARD.encode(jpeg))
    }

    /// Sends a body, retrying what can be retried; the server's JSON on success.
    fn send(&self, body: &str) -> Result<Value, VlmError> {
        let _permit = self.slots.acquire();
        let url = &self.endpoint;
        let attempts_max = if self.down.load(Ordering::Relaxed) { 1 } else { self.config.max_retries + 1 };
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut call = self.agent.post(url).set("Content-Type", "application/json");
            if let Some(ApiKey(key)) = &self.api_key {
                call = call.set("Authorization", &format!("Bearer {key}"));
            }
            let (retry_after_s, failure) = match call.send_string(body) {
                Ok(response) => {
                    self.down.store(false, Ordering::Relaxed);
                    let text = response.into_string().map_err(|e| VlmError::MalformedResponse {
                        url: url.clone(),
                        message: format!("cannot read the body: {e}"),
                    })?;
                    return serde_json::from_str(&text).map_err(|e| VlmError::MalformedResponse {
                        url: url.clone(),
                        message: self.redact(format!("not JSON ({e}): {}", excerpt(&text))),
                    });
                }
                Err(ureq::Error::Status(status, response)) => {
                    let retry_after_s =
                        response.header("Retry-After").and_then(|v| v.trim().parse::<f64>().ok());
                    let body = self.redact(excerpt(&response.into_string().unwrap_or_default()));
                    if status == 401 || status == 403 {
                        return Err(VlmError::Auth {
                            url: url.clone(),
                            status,
                            key_env: self.config.api_key_env.clone(),
                            body,
                        });
                    }
                    let error = VlmError::Status { url: url.clone(), status, attempts: attempt, body };
                    if !(status == 429 || status >= 500) {
                        return Err(error);
                    }
                    (retry_after_s, error)
                }
                Err(ureq::Error::Transport(transport)) => (
                    None,
                    VlmError::Unreachable {
                        url: url.clone(),
                        attempts: attempt,
                        message: self.redact(transport.to_string()),
                    },
                ),
            };
            if attempt >= attempts_max {
                if matches!(failure, VlmError::Unreachable { .. }) {
                    self.down.store(true, Ordering::Relaxed);
                }
                return Err(failure);
            }
            let backoff = (self.config.backoff_initial_s * 2f64.powi(attempt as i32 - 1))
                .min(self.config.backoff_max_s);
            let wait_s =
                retry_after_s.map_or(backoff, |after| after.min(self.config.backoff_max_s).max(backoff));
            tracing::warn!(url = %url, attempt, wait_s, error = %failure, "retrying");
            self.stats.record_retry();
            std::thread::sleep(Duration::from_secs_f64(wait_s));
        }
    }

    /// `text` with every occurrence of the API key replaced: servers echo keys in their error bodies.
    fn redact(&self, text: String) -> String {
        match &self.api_key {
            Some(ApiKey(key)) if text.contains(key.as_str()) => text.replace(key.as_str(), "[API key]"),
            _ => text,
        }
    }

    fn redact_error(&self, error: VlmError) -> VlmError {
        match error {
            VlmError::MalformedResponse { url, message } => {
                VlmError::MalformedResponse { url, message: self.redact(message) }
            }
            other => other,
        }
    }

    fn generate_uncounted(&self, request: &VlmRequest) -> Result<VlmResponse, VlmError> {
        let body = serde_json::to_string(&self.body(request)?)
            .map_err(|e| VlmError::Config(format!("cannot serialise the request for {}: {e}", request.id)))?;
        let key = ResponseCache::key(body.as_bytes());
        if let Some(entry) = self.cache.as_ref().and_then(|cache| cache.get(&key)) {
            let (text, usage) =
                parse_completion(&entry.response, &self.endpoint).map_err(|e| self.redact_error(e))?;
            return Ok(VlmResponse { text, usage, cached: true });
        }
        let response = self.send(&body)?;
        let (text, usage) = parse_completion(&response, &self.endpoint).map_err(|e| self.redact_error(e))?;
        if let Some(cache) = &self.cache {
            cache.put(&CacheEntry {
                key,
                url: self.endpoint.clone(),
                model: self.config.model.clone(),
                response,
            })?;
        }
        Ok(VlmResponse { text, usage, cached: false })
    }
}

fn image_part(base64_jpeg: &str) -> Value {
    json!({"type": "image_url", "image_url": {"url": format!("data:image/jpeg;base64,{base64_jpeg}")}})
}

/// The first 300 characters of a body, for error messages.
fn excerpt(text: &str) -> String {
    const LIMIT: usize = 300;
    let trimmed = text.trim();
    match trimmed.char_indices().nth(LIMIT) {
        Some((at, _)) => format!("{}…", &trimmed[..at]),
        None => trimmed.to_owned(),
    }
}

/// The answer text and token counts of a chat completion.
pub fn parse_completion(response: &Value, url: &str) -> Result<(String, Option<Usage>), VlmError> {
    let malformed = |message: String| VlmError::MalformedResponse { url: url.to_owned(), message };
    let message = response
        .get("choices")
        .and_then(|choices| choices.get(0))
        .and_then(|choice| choice.get("message"))
        .ok_or_else(|| malformed(format!("no choices[0].message in {}", excerpt(&response.to_string()))))?;
    let text = match message.get("content") {
        Some(Value::String(text)) => text.clone(),
        // Some servers answer with content parts.
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        // Reasoning models may leave content empty and put everything in `reasoning_content`.
        Some(Value::Null) | None => {
            message.get("reasoning_content").and_then(Value::as_str).map(str::to_owned).ok_or_else(|| {
                malformed(format!("choices[0].message has no content: {}", excerpt(&message.to_string())))
            })?
        }
        Some(other) => return Err(malformed(format!("choices[0].message.content is {other}, not text"))),
    };
    let usage = response.get("usage").and_then(|usage| {
        Some(Usage {
            prompt_tokens: usage.get("prompt_tokens")?.as_u64()?,
            completion_tokens: usage.get("completion_tokens")?.as_u64()?,
        })
    });
    Ok((text, usage))
}

impl Vlm for OpenAiVlm {
    fn name(&self) -> String {
        format!("openai:{}", self.config.model)
    }

    fn generate(&self, request: &VlmRequest) -> Result<VlmResponse, VlmError> {
        match self.generate_uncounted(request) {
            Ok(response) => {
                self.stats.record(&response);
                Ok(response)
            }
            Err(error) => {
                self.stats.record_failure();
                Err(error)
            }
        }
    }

    fn stats(&self) -> VlmStats {
        self.stats.snapshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_append_chat_completions_once() {
        let config =
            |url: &str| OpenAiConfig { url: url.into(), model: "m".into(), ..OpenAiConfig::default() };
        assert_eq!(config("http://h:8000/v1").endpoint(), "http://h:8000/v1/chat/completions");
        assert_eq!(config("http://h:8000/v1/").endpoint(), "http://h:8000/v1/chat/completions");
        assert_eq!(config("https://h/v1/chat/completions").endpoint(), "https://h/v1/chat/completions");
    }

    #[test]
    fn configs_are_checked_before_use() {
        assert!(OpenAiConfig::default().validate().is_err(), "no model");
        let ok = OpenAiConfig { model: "m".into(), ..OpenAiConfig::default() };
        assert!(ok.validate().is_ok());
        for bad in [
            OpenAiConfig { url: "localhost:8000".into(), ..ok.clone() },
            OpenAiConfig { max_concurrency: 0, ..ok.clone() },
            OpenAiConfig { timeout_s: 0.0, ..ok.clone() },
            OpenAiConfig { jpeg_quality: 0, ..ok.clone() },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
        let parsed: Result<OpenAiConfig, _> = serde_json::from_str(r#"{"model": "m", "retries": 3}"#);
        assert!(parsed.is_err(), "unknown fields are rejected");
    }

    #[test]
    fn completions_parse_text_and_usage() -> Result<(), VlmError> {
        let response = json!({
            "choices": [{"message": {"role": "assistant", "content": "The answer is B."}}],
            "usage": {"prompt_tokens": 1200, "completion_tokens": 6, "total_tokens": 1206}
        });
        let (text, usage) = parse_completion(&response, "u")?;
        assert_eq!(text, "The answer is B.");
        assert_eq!(usage, Some(Usage { prompt_tokens: 1200, completion_tokens: 6 }));
        let parts = json!({"choices": [{"message": {"content": [{"type": "text", "text": "-134"}]}}]});
        assert_eq!(parse_completion(&parts, "u")?, ("-134".into(), None));
        for bad in [json!({}), json!({"choices": []}), json!({"choices": [{"message": {"content": 3}}]})] {
            let error =
                parse_completion(&bad, "http://x/v1/chat/completions").expect_err("malformed").to_string();
            assert!(error.contains("http://x/v1/chat/completions"), "{error}");
        }
        Ok(())
    }
}
