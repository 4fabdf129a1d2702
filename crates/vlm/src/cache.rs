//! The on-disk response cache: one JSON file per request, keyed by the SHA-256 of the request body, so
//! that an interrupted evaluation resumes without asking (and paying) twice.
//!
//! The key covers everything the server sees except the API key: model, parameters, every text and every
//! image byte. Images are encoded deterministically (same pixels, same JPEG bytes), so the same question with
//! the same settings hits the same entry. Files are written atomically; an unreadable entry is ignored with a
//! warning and asked again.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::VlmError;

/// A response cache in a directory (created on first write).
#[derive(Clone, Debug)]
pub struct ResponseCache {
    dir: PathBuf,
}

/// One cached exchange.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheEntry {
    pub key: String,
    pub url: String,
    pub model: String,
    /// The server's JSON response, as it came.
    pub response: serde_json::Value,
}

impl ResponseCache {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The key of a request body: hex SHA-256.
    pub fn key(body: &[u8]) -> String {
        Sha256::digest(body).iter().map(|byte| format!("{byte:02x}")).collect()
    }

    fn path(&self, key: &str) -> PathBuf {
        let shard = key.get(..2).unwrap_or("00");
        self.dir.join(shard).join(format!("{key}.json"))
    }

    /// The cached entry for `key`, if there is a readable one.
    pub fn get(&self, key: &str) -> Option<CacheEntry> {
        let path = self.path(key);
        let bytes = std::fs::read(&path).ok()?;
        match serde_json::from_slice::<CacheEntry>(&bytes) {
            Ok(entry) if entry.key == key => Some(entry),
            Ok(_) => {
                tracing::warn!(file = %path.display(), "cache entry has another key; asking again");
                None
            }
            Err(error) => {
                tracing::warn!(file = %path.display(), %error, "unreadable cache entry; asking again");
                None
            }
        }
    }

    pub fn put(&self, entry: &CacheEntry) -> Result<(), VlmError> {
        let path = self.path(&entry.key);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|source| VlmError::File { path: parent.into(), source })?;
        }
        gst_io::write_json(&path, entry)?;
        Ok(())
    }
}
