//! The error type of gst-map.

use std::path::PathBuf;

/// Everything that can go wrong while building, saving, loading or registering a map.
#[derive(Debug, thiserror::Error)]
pub enum MapError {
    #[error("invalid map config: {0}")]
    InvalidConfig(String),
    #[error("{path}: {message}")]
    InvalidInput { path: PathBuf, message: String },
    #[error("invalid input: {0}")]
    Invalid(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: malformed JSON: {source}")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error(transparent)]
    GstIo(#[from] gst_io::IoError),
    #[error(transparent)]
    Core(#[from] gst_core::CoreError),
}
