//! The one error type of gst-viz.

use std::path::PathBuf;

/// What can go wrong while recording or viewing.
#[derive(Debug, thiserror::Error)]
pub enum VizError {
    /// The Rerun SDK refused to create a recording stream or to log (a serialisation error, a sink that
    /// cannot be opened).
    #[error("rerun: {0}")]
    Rerun(#[from] rerun::RecordingStreamError),
    /// The recording file could not be created, finished or moved into place.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    /// Flushing the recording to its sink failed or timed out.
    #[error("flushing the recording: {0}")]
    Flush(String),
    /// No viewer could be reached at the address given to `Recorder::connect`.
    #[error("connecting to a Rerun viewer at {url}: {message}")]
    Connect { url: String, message: String },
    /// No `rerun` executable was found where we look for it.
    #[error(
        "no Rerun viewer found (looked in {}); install it with `make setup` (rerun-sdk==0.36.3 in .venv) or \
         set GST_VENV to a virtualenv that has it",
        searched.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    ViewerNotFound { searched: Vec<PathBuf> },
    /// A file given to `view` is missing or is not a Rerun recording.
    #[error("{}: {message}", path.display())]
    NotARecording { path: PathBuf, message: String },
    /// The viewer process could not be started or failed.
    #[error("running the viewer {}: {message}", viewer.display())]
    Viewer { viewer: PathBuf, message: String },
    /// An image could not be encoded.
    #[error("encoding an image: {0}")]
    Encode(String),
    /// A value that cannot be logged (wrong size, not finite, out of range).
    #[error("invalid input: {0}")]
    Invalid(String),
    /// Logged messages that could not be read back (inspection of a recording).
    #[error("reading logged data: {0}")]
    Decode(String),
}
