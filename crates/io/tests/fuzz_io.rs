//! Corpus-mutation fuzzing of gst-io's parsers of outside input (issue 48): TUM lists and trajectories,
//! the three calibration formats, question folders and image headers. Seeds: `fuzz/corpus/<target>/`;
//! crashes once found: `fuzz/regressions/<target>/`. See `fuzz/harness.rs` and docs/hardening.md.

#[path = "../../../fuzz/harness.rs"]
mod harness;

use std::path::Path;
use std::sync::OnceLock;

use gst_io::gst::{QuestionReadOptions, read_bench_questions};
use proptest::prelude::*;

fn tum_list(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    match gst_io::parse_list(&text, Path::new("rgb.txt")) {
        Ok(entries) => {
            // What `TumSequence::open` does next: associate colour with depth stamps.
            let stamps: Vec<f64> = entries.iter().map(|(t, _)| *t).collect();
            let shifted: Vec<f64> = stamps.iter().map(|t| t + 0.01).collect();
            let _ = gst_io::associate(&stamps, &shifted, gst_io::TUM_MAX_DIFFERENCE_S);
            true
        }
        Err(error) => {
            assert!(error.to_string().contains("rgb.txt"), "error does not name the file: {error}");
            false
        }
    }
}

fn tum_trajectory(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    match gst_io::parse_trajectory_tum(&text, Path::new("groundtruth.txt")) {
        Ok(_) => true,
        Err(error) => {
            assert!(error.to_string().contains("groundtruth.txt"), "error does not name the file: {error}");
            false
        }
    }
}

fn calibration_formats(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    match gst_io::parse_calibration(&text, Path::new("calib.yaml")) {
        Ok(_) => true,
        Err(error) => {
            assert!(error.to_string().contains("calib.yaml"), "error does not name the file: {error}");
            false
        }
    }
}

/// A split folder in the layout `gst generate` writes, media present, shared by the cases of one run.
fn split_dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temporary folder: {e}"));
        for media in [
            "videos/scene_000/explore.mp4",
            "images/scene_000/topdown_binary.png",
            "images/scene_000/view_00.png",
        ] {
            let path = dir.path().join(media);
            std::fs::create_dir_all(path.parent().unwrap_or(dir.path())).unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(&path, b"media").unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::create_dir_all(dir.path().join("questions")).unwrap_or_else(|e| panic!("{e}"));
        dir
    })
    .path()
}

fn question_folder(bytes: &[u8]) -> bool {
    let dir = split_dir();
    let file = dir.join("questions/q.json");
    std::fs::write(&file, bytes).unwrap_or_else(|e| panic!("{e}"));
    let mut accepted = false;
    for check_files in [false, true] {
        match read_bench_questions(dir, QuestionReadOptions { check_files }) {
            Ok(_) => accepted = true,
            Err(error) => {
                assert!(error.to_string().contains("q.json"), "error does not name the file: {error}")
            }
        }
    }
    accepted
}

fn image_header(bytes: &[u8]) -> bool {
    let _ = gst_io::images::header_size(bytes);
    let what = Path::new("image.png");
    let rgb = gst_io::decode_rgb(bytes, what);
    let gray = gst_io::decode_gray16(bytes, what);
    for error in [rgb.as_ref().err(), gray.as_ref().err()].into_iter().flatten() {
        assert!(error.to_string().contains("image.png"), "error does not name the file: {error}");
    }
    rgb.is_ok() || gray.is_ok()
}

#[test]
fn corpora_replay_and_valid_seeds_parse() {
    assert!(harness::replay("tum_list", tum_list) >= 3);
    assert!(harness::replay("tum_trajectory", tum_trajectory) >= 1);
    // The six shipped calibrations parse; the two bad ones in the corpus do not.
    assert!(harness::replay("calibration_formats", calibration_formats) >= 7);
    assert!(harness::replay("question_folder", question_folder) >= 4);
    assert!(harness::replay("image_header", image_header) >= 5);
}

proptest! {
    #[test]
    fn fuzz_tum_list(input in harness::mutated("tum_list")) {
        tum_list(&input);
    }

    #[test]
    fn fuzz_tum_trajectory(input in harness::mutated("tum_trajectory")) {
        tum_trajectory(&input);
    }

    #[test]
    fn fuzz_calibration_formats(input in harness::mutated("calibration_formats")) {
        calibration_formats(&input);
    }

    #[test]
    fn fuzz_question_folder(input in harness::mutated("question_folder")) {
        question_folder(&input);
    }

    #[test]
    fn fuzz_image_header(input in harness::mutated("image_header")) {
        image_header(&input);
    }
}
