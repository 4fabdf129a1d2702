use std::path::PathBuf;

/// Errors of the core crate: every one names the file or value that was wrong.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    #[error("cannot read calibration file {path}: {source}")]
    CalibrationIo { path: PathBuf, source: std::io::Error },

    #[error("malformed calibration file {path}, line {line}: {message}")]
    CalibrationSyntax { path: PathBuf, line: usize, message: String },

    #[error("invalid calibration in {path}: {message}")]
    CalibrationInvalid { path: PathBuf, message: String },

    #[error("invalid camera: {0}")]
    InvalidCamera(String),

    #[error("image buffer of {len} values does not match {width}x{height}")]
    ImageSize { width: u32, height: u32, len: usize },

    #[error("trajectory timestamps must increase strictly: {previous_s} then {next_s}")]
    NonMonotonicTimestamps { previous_s: f64, next_s: f64 },
}
