//! The one error type of gst-slam.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SlamError {
    #[error(transparent)]
    Io(#[from] gst_io::IoError),
    #[error(transparent)]
    Core(#[from] gst_core::CoreError),
    /// A file that could not be read or written (the path is named).
    #[error("{path}: {source}")]
    File { path: PathBuf, source: std::io::Error },
    /// Input that cannot be used, with what is wrong (names the file where there is one).
    #[error("{0}")]
    InvalidInput(String),
    /// Trajectories that cannot be compared (too few matched poses, degenerate geometry).
    #[error("trajectory evaluation: {0}")]
    Evaluation(String),
    /// A numerical step that failed (singular system, no convergence).
    #[error("optimisation: {0}")]
    Optimisation(String),
    /// An OpenCV call that failed.
    #[error("OpenCV: {0}")]
    OpenCv(String),
}

impl From<opencv::Error> for SlamError {
    fn from(error: opencv::Error) -> Self {
        Self::OpenCv(error.to_string())
    }
}
