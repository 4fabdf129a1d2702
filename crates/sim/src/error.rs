use std::path::PathBuf;

/// Errors of the simulator: each names the file (or archive member) and what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("cannot read {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },

    #[error("furniture catalog {path} is not a readable zip archive: {message}")]
    CatalogArchive { path: PathBuf, message: String },

    #[error("furniture catalog {path}: {message}")]
    Catalog { path: PathBuf, message: String },

    #[error("model {member} in {archive}, line {line}: {message}")]
    Model { archive: PathBuf, member: String, line: usize, message: String },

    #[error("texture {member} in {archive}: {message}")]
    Texture { archive: PathBuf, member: String, message: String },

    #[error("scene {path}: {message}")]
    Scene { path: PathBuf, message: String },

    #[error("invalid configuration: {0}")]
    Config(String),
}
