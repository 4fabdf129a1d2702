use std::path::PathBuf;

/// Errors at the edges: each names the file and what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    #[error("cannot access {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },

    #[error("cannot decode image {path}: {message}")]
    Decode { path: PathBuf, message: String },

    #[error("cannot encode image for {path}: {message}")]
    Encode { path: PathBuf, message: String },

    #[error("cannot serialise {path}: {message}")]
    Serialize { path: PathBuf, message: String },
}
