//! Shared corpus-mutation fuzzing harness (issue 48), included by each crate's `tests/fuzz_*.rs` with
//! `#[path = "../../../fuzz/harness.rs"] mod harness;`.
//!
//! A target is a name: its seed corpus is `fuzz/corpus/<target>/` (small real files, committed) and inputs
//! that once crashed are `fuzz/regressions/<target>/`. [`mutated`] draws a seed and applies up to 16 random
//! byte edits (overwrite, insert, delete, truncate, duplicate a span; bytes biased towards the syntax of
//! text formats and towards the extreme values of binary ones); the target must return `Ok` or `Err`, never
//! panic — proptest shrinks a panicking input and reports it. [`replay`] runs the target over every seed
//! and regression unmodified.
//!
//! `make test` runs proptest's default case count (256 per target, seconds); `make fuzz` sets
//! `PROPTEST_CASES`. proptest (well kept, stable toolchain, already a dev-dependency) is used rather than
//! libFuzzer tools, which need nightly; the search is not coverage-guided.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use proptest::prelude::*;

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The files of `fuzz/<kind>/<target>/`, sorted by name for determinism (missing folder: none).
fn files(kind: &str, target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = repo_root().join("fuzz").join(kind).join(target);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_file()).collect())
        .unwrap_or_default();
    paths.sort();
    paths.into_iter().filter_map(|p| std::fs::read(&p).ok().map(|bytes| (p, bytes))).collect()
}

/// The seed corpus of a target; an empty corpus fails the test that asks for it.
pub fn corpus(target: &str) -> Vec<Vec<u8>> {
    let seeds: Vec<Vec<u8>> = files("corpus", target).into_iter().map(|(_, bytes)| bytes).collect();
    assert!(!seeds.is_empty(), "fuzz/corpus/{target}/ holds no seed");
    seeds
}

/// Runs `parse` over every seed and every regression input of `target`, unmodified; returns how many of
/// the seeds `parse` accepted (`true`), so a test can require that some seeds are valid.
pub fn replay(target: &str, mut parse: impl FnMut(&[u8]) -> bool) -> usize {
    let mut accepted = 0;
    for (path, bytes) in files("corpus", target) {
        if parse(&bytes) {
            accepted += 1;
        } else {
            eprintln!("seed {} is refused (fine for a bad-input seed)", path.display());
        }
    }
    for (_, bytes) in files("regressions", target) {
        parse(&bytes);
    }
    accepted
}

#[derive(Clone, Debug)]
pub enum Edit {
    Flip(usize, u8),
    Insert(usize, u8),
    Delete(usize),
    Truncate(usize),
    Duplicate(usize, usize),
}

fn byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        any::<u8>(),
        prop::sample::select(b"{}[]:,\"-.0123456789eE \n\t%!#/YAMLvfnu".to_vec()),
        prop::sample::select(vec![0u8, 1, 0x7f, 0x80, 0xfe, 0xff]),
    ]
}

pub fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), byte()).prop_map(|(i, b)| Edit::Flip(i, b)),
        (any::<usize>(), byte()).prop_map(|(i, b)| Edit::Insert(i, b)),
        any::<usize>().prop_map(Edit::Delete),
        any::<usize>().prop_map(Edit::Truncate),
        (any::<usize>(), 1usize..64).prop_map(|(i, n)| Edit::Duplicate(i, n)),
    ]
}

pub fn apply(mut data: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        let len = data.len();
        match *e {
            Edit::Flip(i, b) if len > 0 => data[i % len] = b,
            Edit::Insert(i, b) => data.insert(i % (len + 1), b),
            Edit::Delete(i) if len > 0 => {
                data.remove(i % len);
            }
            Edit::Truncate(i) => data.truncate(i % (len + 1)),
            Edit::Duplicate(i, n) if len > 0 => {
                let start = i % len;
                let end = (start + n).min(len);
                let span = data[start..end].to_vec();
                data.splice(start..start, span);
            }
            _ => {}
        }
    }
    data
}

/// A seed of `target`'s corpus with up to 16 random edits.
pub fn mutated(target: &str) -> impl Strategy<Value = Vec<u8>> {
    (prop::sample::select(corpus(target)), prop::collection::vec(edit(), 0..16))
        .prop_map(|(seed, edits)| apply(seed, &edits))
}
