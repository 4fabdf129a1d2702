//! Atomic file writes.

use std::io::Write;
use std::path::Path;

use crate::IoError;

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename, so that readers
/// never see a partial file and an interrupted write leaves the old file (or none).
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<(), IoError> {
    let io = |source| IoError::Io { path: path.into(), source };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{file_name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(io)
}

/// Writes a value as pretty JSON (with a final newline), atomically.
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), IoError> {
    let mut text = serde_json::to_string_pretty(value)
        .map_err(|e| IoError::Serialize { path: path.into(), message: e.to_string() })?;
    text.push('\n');
    atomic_write(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_atomically_and_leaves_no_temporary() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("nested/out.json");
        write_json(&path, &vec![1, 2, 3])?;
        assert_eq!(std::fs::read_to_string(&path)?, "[\n  1,\n  2,\n  3\n]\n");
        let names: Vec<_> = std::fs::read_dir(path.parent().ok_or("no parent")?)?.collect();
        assert_eq!(names.len(), 1);
        Ok(())
    }
}
