//! Place recognition by descriptor voting: a multi-index hash over the keyframes' ORB descriptors.
//!
//! Each 256-bit descriptor is cut into 16 chunks of 16 bits, one hash table per chunk. Two descriptors within
//! Hamming distance 15 share at least one chunk exactly (pigeonhole), and a typical true ORB match (distance
//! ~30) shares one with probability ~0.9, so looking up the query's 16 chunks finds most true matches while
//! touching a few hundred candidates instead of every stored descriptor. Each query descriptor votes for
//! the keyframes of its close candidates; keyframes with many votes are places seen before.

use std::collections::HashMap;

use crate::features::{Descriptor, hamming};

const CHUNKS: usize = 16;

/// Buckets holding more descriptors than this are skipped by queries.
const MAX_BUCKET: usize = 256;

/// A stored descriptor: which keyframe and which of its features.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub keyframe: u32,
    pub feature: u32,
}

/// The multi-index hash.
#[derive(Debug, Default)]
pub struct DescriptorIndex {
    tables: Vec<Table>,
    entries: Vec<Entry>,
    descriptors: Vec<Descriptor>,
}

/// Descriptors inserted since a table's last merge wait in its map until they number this many or an eighth
/// of the merged ones, whichever is more.
const MERGE_AT: usize = 8192;

/// One chunk's hash table: the ids of the stored descriptors by chunk value, ascending. Most lie in one flat
/// list ordered by value (`ids[start[v]..start[v + 1]]`); those inserted since the last merge wait in `recent`.
/// (A vector per value, up to 65,536 per table, cost a keyframe about 206 KB on a 10-minute recording, in
/// headers and spare capacity; the flat lists, 119 KB.)
#[derive(Debug, Default)]
struct Table {
    start: Vec<u32>,
    ids: Vec<u32>,
    recent: HashMap<u16, Vec<u32>>,
    recent_len: usize,
}

impl Table {
    fn insert(&mut self, value: u16, id: u32) {
        self.recent.entry(value).or_default().push(id);
        self.recent_len += 1;
        if self.recent_len >= MERGE_AT.max(self.ids.len() / 8) {
            self.merge();
        }
    }

    /// Moves the recent ids into the flat list; every bucket stays in ascending order (merged ids are older).
    fn merge(&mut self) {
        const VALUES: usize = 1 << 16;
        let mut recent: Vec<(u16, Vec<u32>)> = std::mem::take(&mut self.recent).into_iter().collect();
        recent.sort_unstable_by_key(|&(value, _)| value);
        let mut recent = recent.iter().peekable();
        let mut start = Vec::with_capacity(VALUES + 1);
        let mut ids = Vec::with_capacity(self.ids.len() + self.recent_len);
        start.push(0);
        for value in 0..VALUES {
            ids.extend_from_slice(self.merged(value as u16));
            if let Some((_, new)) = recent.next_if(|&&(v, _)| usize::from(v) == value) {
                ids.extend_from_slice(new);
            }
            start.push(ids.len() as u32);
        }
        self.start = start;
        self.ids = ids;
        self.recent_len = 0;
    }

    fn merged(&self, value: u16) -> &[u32] {
        match self.start.get(usize::from(value)..usize::from(value) + 2) {
            Some(&[a, b]) => &self.ids[a as usize..b as usize],
            _ => &[],
        }
    }

    /// The ids with chunk value `value`, ascending: the merged ones, then the recent ones.
    fn bucket(&self, value: u16) -> (&[u32], &[u32]) {
        (self.merged(value), self.recent.get(&value).map_or(&[], Vec::as_slice))
    }
}

/// Which stored descriptors one query has looked at: a stamp per descriptor, so that a query marks and tests
/// in constant time and starts afresh by bumping the stamp (a hash set per query was most of a lookup's cost).
#[derive(Default)]
struct Seen {
    stamp: u32,
    marks: Vec<u32>,
}

impl Seen {
    fn start(&mut self, len: usize) {
        if self.marks.len() < len {
            self.marks.resize(len, 0);
        }
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.marks.iter_mut().for_each(|m| *m = 0);
            self.stamp = 1;
        }
    }

    /// Marks `id`; whether it was not marked before in this query.
    fn insert(&mut self, id: u32) -> bool {
        let mark = &mut self.marks[id as usize];
        let fresh = *mark != self.stamp;
        *mark = self.stamp;
        fresh
    }
}

thread_local! {
    static SEEN: std::cell::RefCell<Seen> = std::cell::RefCell::new(Seen::default());
}

fn chunk(descriptor: &Descriptor, k: usize) -> u16 {
    u16::from_le_bytes([descriptor[2 * k], descriptor[2 * k + 1]])
}

impl DescriptorIndex {
    pub fn new() -> Self {
        Self { tables: (0..CHUNKS).map(|_| Table::default()).collect(), ..Self::default() }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn insert(&mut self, keyframe: u32, feature: u32, descriptor: &Descriptor) {
        if self.tables.len() != CHUNKS {
            self.tables = (0..CHUNKS).map(|_| Table::default()).collect();
        }
        let id = self.entries.len() as u32;
        self.entries.push(Entry { keyframe, feature });
        self.descriptors.push(*descriptor);
        for (k, table) in self.tables.iter_mut().enumerate() {
            table.insert(chunk(descriptor, k), id);
        }
    }

    /// Calls `visit` once per stored descriptor sharing a chunk with `query` (in table and bucket order),
    /// skipping buckets over [`MAX_BUCKET`]: a chunk value shared by very many descriptors (flat image
    /// regions) says little and costs much.
    fn candidates(&self, query: &Descriptor, seen: &mut Seen, mut visit: impl FnMut(u32)) {
        seen.start(self.entries.len());
        for (k, table) in self.tables.iter().enumerate() {
            let (merged, recent) = table.bucket(chunk(query, k));
            if merged.len() + recent.len() > MAX_BUCKET {
                continue;
            }
            for &id in merged.iter().chain(recent) {
                if seen.insert(id) {
                    visit(id);
                }
            }
        }
    }

    /// The stored descriptors within `max_distance` of `query` that share a chunk with it (all within
    /// distance 15, most true matches beyond), into `out`.
    pub fn near(&self, query: &Descriptor, max_distance: u32, out: &mut Vec<Entry>) {
        out.clear();
        SEEN.with_borrow_mut(|seen| {
            self.candidates(query, seen, |id| {
                if hamming(query, &self.descriptors[id as usize]) <= max_distance {
                    out.push(self.entries[id as usize]);
                }
            })
        });
    }

    /// Votes of `queries` for keyframes: each query counts once per keyframe holding a descriptor within
    /// `max_distance`. Keyframes for which `skip` is true are left out. Sorted by votes, most first.
    pub fn vote(
        &self,
        queries: &[Descriptor],
        max_distance: u32,
        skip: impl Fn(u32) -> bool,
    ) -> Vec<(u32, u32)> {
        let mut votes: HashMap<u32, u32> = HashMap::new();
        let mut voted: Vec<u32> = Vec::new();
        SEEN.with_borrow_mut(|seen| {
            for query in queries {
                voted.clear();
                self.candidates(query, seen, |id| {
                    let entry = self.entries[id as usize];
                    if skip(entry.keyframe) || voted.contains(&entry.keyframe) {
                        return;
                    }
                    if hamming(query, &self.descriptors[id as usize]) <= max_distance {
                        voted.push(entry.keyframe);
                        *votes.entry(entry.keyframe).or_insert(0) += 1;
                    }
                });
            }
        });
        let mut ranked: Vec<(u32, u32)> = votes.into_iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn finds_the_keyframe_holding_noisy_copies() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let mut index = DescriptorIndex::new();
        let mut originals = Vec::new();
        for kf in 0..50u32 {
            for f in 0..200u32 {
                let d: Descriptor = rng.r#gen();
                index.insert(kf, f, &d);
                if kf == 17 {
                    originals.push(d);
                }
            }
        }
        // Flip 25 random bits of each descriptor of keyframe 17.
        let queries: Vec<Descriptor> = originals
            .iter()
            .map(|d| {
                let mut q = *d;
                for _ in 0..25 {
                    let bit = rng.gen_range(0..256);
                    q[bit / 8] ^= 1 << (bit % 8);
                }
                q
            })
            .collect();
        let ranked = index.vote(&queries, 50, |_| false);
        assert_eq!(ranked[0].0, 17);
        assert!(ranked[0].1 > 150, "{:?}", &ranked[..3]);
        assert!(ranked.get(1).is_none_or(|r| r.1 < 10), "{:?}", &ranked[..3]);
        assert!(index.vote(&queries, 50, |k| k == 17).first().is_none_or(|r| r.1 < 10));
    }

    #[test]
    fn lookups_see_merged_and_recent_descriptors_alike() {
        // Enough descriptors for several merges, queried between insertions: each lookup finds exactly the
        // stored descriptors within the distance that share a chunk with the query.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(4);
        let mut index = DescriptorIndex::new();
        let mut stored: Vec<Descriptor> = Vec::new();
        let mut near = Vec::new();
        for round in 0..6u32 {
            for f in 0..(MERGE_AT as u32 / 2 + 77) {
                let d: Descriptor = if f % 3 == 0 && !stored.is_empty() {
                    // A noisy copy of an older one: buckets with merged and recent ids.
                    let mut q = stored[rng.gen_range(0..stored.len())];
                    q[rng.gen_range(0..32)] ^= 1 << rng.gen_range(0..8);
                    q
                } else {
                    rng.r#gen()
                };
                index.insert(round, f, &d);
                stored.push(d);
            }
            for _ in 0..50 {
                let query = stored[rng.gen_range(0..stored.len())];
                index.near(&query, 40, &mut near);
                let expected: Vec<Entry> = index
                    .entries
                    .iter()
                    .zip(&stored)
                    .filter(|(_, d)| {
                        hamming(&query, d) <= 40 && (0..CHUNKS).any(|k| chunk(&query, k) == chunk(d, k))
                    })
                    .map(|(e, _)| *e)
                    .collect();
                let mut found = near.clone();
                found.sort_by_key(|e| (e.keyframe, e.feature));
                assert_eq!(found, expected);
            }
        }
        assert_eq!(index.len(), stored.len());
        assert!(index.tables.iter().all(|t| !t.ids.is_empty() && t.recent_len < MERGE_AT));
    }
}
