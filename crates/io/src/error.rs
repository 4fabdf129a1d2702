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

    #[error("cannot write video {path}: {message}")]
    VideoWrite { path: PathBuf, message: String },

    #[error("cannot read video {path}: {message}")]
    VideoRead { path: PathBuf, message: String },

    /// A line of a text file (TUM lists and trajectories) that does not parse.
    #[error("malformed {path}, line {line}: {message}")]
    MalformedLine { path: PathBuf, line: usize, message: String },

    /// A dataset (TUM RGB-D directory) whose parts are inconsistent or unusable.
    #[error("invalid dataset {path}: {message}")]
    InvalidDataset { path: PathBuf, message: String },

    /// A calibration file (OpenCV FileStorage, ROS camera_info or Kalibr camchain) that cannot be used;
    /// the message names the field.
    #[error("invalid calibration file {path}: {message}")]
    Calibration { path: PathBuf, message: String },

    /// A path that no frame source can read, or a source's frames that do not fit together.
    #[error("cannot read frames from {path}: {message}")]
    Source { path: PathBuf, message: String },

    /// An error of the core types (calibration files name their file and line).
    #[error(transparent)]
    Core(#[from] gst_core::CoreError),
}
