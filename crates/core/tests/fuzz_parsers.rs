//! Corpus-mutation fuzzing of gst-core's parsers of outside input (issue 48).
//!
//! Each target starts from real files committed in the repo (its seed corpus), applies random byte edits
//! (flip, insert, delete, truncate, duplicate a span) drawn by proptest, and requires the parser to return
//! `Ok` or `Err` — a panic is a failure that proptest shrinks and reports. Files under
//! `fuzz/regressions/<target>/` (inputs that once crashed) are replayed first.
//!
//! `make test` runs the default case count (seconds); `make fuzz` sets `PROPTEST_CASES` high.
//! proptest is used (already a dev-dependency, well kept, stable toolchain) rather than libFuzzer-based
//! tools, which need nightly.

use std::path::{Path, PathBuf};

use gst_core::calibration::Calibration;
use gst_core::question::Question;
use proptest::prelude::*;

#[path = "../../../fuzz/harness.rs"]
mod harness;
use harness::{Edit, apply, repo_root};

/// Every file directly in `dir` whose name ends with one of `exts`, sorted for determinism.
fn files(dir: &Path, exts: &[&str]) -> Vec<Vec<u8>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    paths.retain(|p| exts.iter().any(|ext| p.to_string_lossy().ends_with(ext)));
    paths.sort();
    paths.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

fn calibration_seeds() -> Vec<Vec<u8>> {
    let root = repo_root();
    let mut seeds = files(&root.join("calibration"), &[".yaml"]);
    seeds.extend(files(&root.join("tests/bad"), &[".yaml"]));
    seeds
}

fn question_seeds() -> Vec<Vec<u8>> {
    let root = repo_root();
    let mut seeds = files(&root.join("tests/bad/questions"), &[".json"]);
    seeds.extend(files(&root.join("tests/data/gst-samples"), &[".json"]));
    seeds
}

fn edit() -> impl Strategy<Value = Edit> {
    // Bytes biased towards syntax the parsers care about.
    let byte =
        prop_oneof![any::<u8>(), prop::sample::select(b"{}[]:,\"-.0123456789eE \n\t%!:YAML".to_vec()),];
    prop_oneof![
        (any::<usize>(), byte.clone()).prop_map(|(i, b)| Edit::Flip(i, b)),
        (any::<usize>(), byte).prop_map(|(i, b)| Edit::Insert(i, b)),
        any::<usize>().prop_map(Edit::Delete),
        any::<usize>().prop_map(Edit::Truncate),
        (any::<usize>(), 1usize..64).prop_map(|(i, n)| Edit::Duplicate(i, n)),
    ]
}

fn parse_calibration(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let _ = Calibration::from_str_named(&text, Path::new("fuzz.yaml"));
}

fn parse_question(bytes: &[u8]) {
    let _ = serde_json::from_slice::<Question>(bytes);
}

#[test]
fn seed_corpora_are_not_empty() {
    assert!(calibration_seeds().len() >= 4, "calibration seeds missing");
    assert!(question_seeds().len() >= 12, "question seeds missing");
    // At least one seed must parse, so mutations start from valid questions too.
    let valid = question_seeds().iter().filter(|s| serde_json::from_slice::<Question>(s).is_ok()).count();
    assert!(valid > 0, "no question seed parses");
}

#[test]
fn regressions_replay() {
    let root = repo_root().join("fuzz/regressions");
    for input in files(&root.join("calibration"), &[""]) {
        parse_calibration(&input);
    }
    for input in files(&root.join("question"), &[""]) {
        parse_question(&input);
    }
}

proptest! {
    #[test]
    fn fuzz_calibration(seed in any::<prop::sample::Index>(), edits in prop::collection::vec(edit(), 0..16)) {
        let seeds = calibration_seeds();
        let input = apply(seeds[seed.index(seeds.len())].clone(), &edits);
        parse_calibration(&input);
    }

    #[test]
    fn fuzz_question(seed in any::<prop::sample::Index>(), edits in prop::collection::vec(edit(), 0..16)) {
        let seeds = question_seeds();
        let input = apply(seeds[seed.index(seeds.len())].clone(), &edits);
        parse_question(&input);
    }
}
