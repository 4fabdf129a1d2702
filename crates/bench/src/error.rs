use std::path::PathBuf;

/// Errors of the benchmark crate: each names the file and line, or the question, that is wrong.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("cannot read predictions file {path}: {error}")]
    ReadPredictions { path: PathBuf, error: std::io::Error },

    #[error("predictions file {path}, line {line}: {message}")]
    MalformedPrediction { path: PathBuf, line: usize, message: String },

    #[error("predictions file {path}, line {line}: no question has uid {uid:?}")]
    UnknownUid { path: PathBuf, line: usize, uid: String },

    #[error("predictions file {path}, line {line}: uid {uid:?} was already predicted on line {first_line}")]
    DuplicatePrediction { path: PathBuf, line: usize, first_line: usize, uid: String },

    #[error(
        "predictions {path}: question {uid:?} has no prediction ({missing} questions have none; a harness run must cover the split)"
    )]
    MissingPrediction { path: PathBuf, uid: String, missing: usize },

    #[error("question uid {uid:?} appears twice among the questions to score")]
    DuplicateQuestion { uid: String },

    #[error("question {uid:?}: {message}")]
    Export { uid: String, message: String },

    #[error("export {path}: {message}")]
    ExportOut { path: PathBuf, message: String },

    #[error(transparent)]
    Sim(#[from] gst_sim::SimError),

    #[error(transparent)]
    Io(#[from] gst_io::IoError),

    #[error("benchmark generation: {0}")]
    Generate(String),

    #[error("the paper's reference table is malformed: {message}")]
    PaperTable { message: String },
}
