use std::path::PathBuf;

/// Everything that can go wrong between a question and a model's answer. Every variant names the file,
/// the URL or the model directory it concerns.
#[derive(Debug, thiserror::Error)]
pub enum VlmError {
    /// A question's video, image or a map file that cannot be read.
    #[error(transparent)]
    Io(#[from] gst_io::IoError),

    #[error("cannot access {path}: {source}")]
    File { path: PathBuf, source: std::io::Error },

    /// A map directory that lacks a file the `map` prompt modes need.
    #[error("map directory {dir}: {message}")]
    Map { dir: PathBuf, message: String },

    /// A configuration value that cannot work (checked before any I/O).
    #[error("invalid VLM configuration: {0}")]
    Config(String),

    /// The server could not be reached (refused, timed out, TLS) after every retry.
    #[error("cannot reach {url} after {attempts} attempt(s): {message}")]
    Unreachable { url: String, attempts: u32, message: String },

    /// The server rejected the API key (401/403): retrying does not help.
    #[error("{url} rejected the request with HTTP {status} (check the API key in ${key_env}): {body}")]
    Auth { url: String, status: u16, key_env: String, body: String },

    /// Any other HTTP error status, after the retries that apply to it.
    #[error("{url} answered HTTP {status} after {attempts} attempt(s): {body}")]
    Status { url: String, status: u16, attempts: u32, body: String },

    /// A response that is not an OpenAI chat completion.
    #[error("malformed response from {url}: {message}")]
    MalformedResponse { url: String, message: String },

    /// A model directory that lacks a file or whose files do not fit together.
    #[error("ONNX model {dir}: {message}")]
    Model { dir: PathBuf, message: String },

    /// ONNX Runtime could not be loaded or failed while running a model.
    #[error("ONNX Runtime: {0}")]
    Runtime(String),
}
