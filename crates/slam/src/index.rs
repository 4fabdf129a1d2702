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
    tables: Vec<HashMap<u16, Vec<u32>>>,
    entries: Vec<Entry>,
    descriptors: Vec<Descriptor>,
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
        Self { tables: (0..CHUNKS).map(|_| HashMap::new()).collect(), ..Self::default() }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn insert(&mut self, keyframe: u32, feature: u32, descriptor: &Descriptor) {
        if self.tables.len() != CHUNKS {
            self.tables = (0..CHUNKS).map(|_| HashMap::new()).collect();
        }
        let id = self.entries.len() as u32;
        self.entries.push(Entry { keyframe, feature });
        self.descriptors.push(*descriptor);
        for (k, table) in self.tables.iter_mut().enumerate() {
            table.entry(chunk(descriptor, k)).or_default().push(id);
        }
    }

    /// Calls `visit` once per stored descriptor sharing a chunk with `query` (in table and bucket order),
    /// skipping buckets over [`MAX_BUCKET`]: a chunk value shared by very many descriptors (flat image
    /// regions) says little and costs much.
    fn candidates(&self, query: &Descriptor, seen: &mut Seen, mut visit: impl FnMut(u32)) {
        seen.start(self.entries.len());
        for (k, table) in self.tables.iter().enumerate() {
            let Some(bucket) = table.get(&chunk(query, k)) else { continue };
            if bucket.len() > MAX_BUCKET {
                continue;
            }
            for &id in bucket {
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
}
