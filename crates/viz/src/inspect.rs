//! Reading logged messages back: which entities hold which archetypes, statically or on which timelines. The
//! tests use it on the memory sink; it is public so that a caller can check its own recordings the same way.

use std::collections::{BTreeMap, BTreeSet};

use rerun::log::{Chunk, LogMsg};

use crate::VizError;

/// What one entity holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EntitySummary {
    /// Archetype names without their `rerun.archetypes.` prefix (`Points3D`, `Transform3D`, …).
    pub archetypes: BTreeSet<String>,
    /// Timelines its temporal data is on.
    pub timelines: BTreeSet<String>,
    /// Whether any of its data is static.
    pub has_static: bool,
    /// Rows logged (one per log call and time).
    pub rows: usize,
}

/// What a stream of messages recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordingSummary {
    /// Entities of the recording store, by path without the leading `/` (Rerun's own `__properties` left out).
    pub entities: BTreeMap<String, EntitySummary>,
    /// Messages that belong to a blueprint store (the default layout).
    pub blueprint_messages: usize,
    /// Whether a blueprint activation command was sent.
    pub blueprint_activated: bool,
}

impl RecordingSummary {
    pub fn has(&self, path: &str) -> bool {
        self.entities.contains_key(path)
    }

    pub fn has_archetype(&self, path: &str, archetype: &str) -> bool {
        self.entities.get(path).is_some_and(|e| e.archetypes.contains(archetype))
    }
}

/// Summarises messages (for example `MemorySinkStorage::take()`).
pub fn summarize(messages: &[LogMsg]) -> Result<RecordingSummary, VizError> {
    let mut summary = RecordingSummary::default();
    for message in messages {
        match message {
            LogMsg::SetStoreInfo(_) => {}
            LogMsg::BlueprintActivationCommand(_) => summary.blueprint_activated = true,
            LogMsg::ArrowMsg(store, arrow) => {
                if store.is_blueprint() {
                    summary.blueprint_messages += 1;
                    continue;
                }
                let chunk = Chunk::from_arrow_msg(arrow).map_err(|e| VizError::Decode(e.to_string()))?;
                let path = chunk.entity_path().to_string();
                let path = path.trim_start_matches('/');
                if path.starts_with("__") {
                    continue;
                }
                let entry = summary.entities.entry(path.to_string()).or_default();
                entry.rows += chunk.num_rows();
                entry.has_static |= chunk.is_static();
                entry.timelines.extend(chunk.timelines().keys().map(|t| t.as_str().to_string()));
                entry.archetypes.extend(chunk.component_descriptors().filter_map(|d| {
                    d.archetype.map(|a| a.as_str().trim_start_matches("rerun.archetypes.").to_string())
                }));
            }
        }
    }
    Ok(summary)
}
