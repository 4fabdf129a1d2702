//! A recording written to an `.rrd` file is complete and readable by the Rerun CLI of the project's
//! virtualenv (`rerun rrd verify`, `rerun rrd print`), with the documented entity paths in it.
//!
//! The CLI is `$GST_VENV/bin/rerun` or the repository's `.venv/bin/rerun`. Without it the CLI checks are
//! skipped with a note, unless `GST_REQUIRE_RERUN=1` makes that a failure (`make unit` sets it: `make setup` installed the CLI).
// The helpers panic like the tests they serve: a failure is a test failure with its message.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use nalgebra::Vector3;

use gst_core::{Image, PinholeCamera, Pose3, RgbImage, TimedPose, Trajectory};
use gst_sim::library::FurnitureLibrary;
use gst_sim::scene::{SceneConfig, generate_scene};
use gst_slam::TrackingState;
use gst_viz::{FrameTime, NamedImage, QuestionLog, Recorder, TrajectoryKind, check_recording, paths};

fn rerun_cli() -> Option<PathBuf> {
    let from_env = std::env::var_os("GST_VENV").map(|venv| PathBuf::from(venv).join("bin/rerun"));
    let from_repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/rerun");
    from_env.into_iter().chain([from_repo]).find(|p| p.is_file())
}

fn gradient(width: u32, height: u32) -> RgbImage {
    let data = (0..width * height).map(|i| [(i % width) as u8, (i / width) as u8, 90]).collect();
    Image::from_vec(width, height, data).unwrap()
}

fn record(path: &Path) {
    let recorder = Recorder::to_file("gst_test", path).unwrap();
    let scene = generate_scene(5, &SceneConfig::default(), &FurnitureLibrary::primitives_only()).unwrap();
    recorder.log_scene(&scene).unwrap();
    let camera = PinholeCamera::from_horizontal_fov(80, 64, 90.0).unwrap();
    recorder.log_camera_model(&camera).unwrap();
    let mut poses = Vec::new();
    for k in 0..4 {
        let pose = Pose3::world_from_camera_yaw_pitch(
            Vector3::new(1.0 + 0.1 * k as f64, 2.0, 1.4),
            0.2 * k as f64,
            0.0,
        );
        let time = FrameTime::new(k, 0.1 * k as f64);
        recorder.log_camera_pose(&time, &pose).unwrap();
        recorder.log_rgb(&time, &gradient(80, 64)).unwrap();
        recorder.log_depth(&time, &Image::filled(80, 64, 3.0f32)).unwrap();
        recorder.log_tracking(&time, TrackingState::Tracking, 200, false).unwrap();
        recorder.log_ate(&time, 0.002).unwrap();
        poses.push(TimedPose { timestamp_s: time.timestamp_s, world_from_camera: pose });
    }
    let trajectory = Trajectory::new(poses).unwrap();
    recorder.log_trajectory(TrajectoryKind::Estimate, &trajectory).unwrap();
    recorder.log_trajectory(TrajectoryKind::GroundTruth, &trajectory).unwrap();
    recorder.log_world_from_slam(&Pose3::identity()).unwrap();
    let texts = vec!["Where is the sofa?".to_string()];
    let topdown = gradient(64, 48);
    recorder
        .log_question(
            0,
            &QuestionLog {
                uid: "q0",
                task: "Object_Localization_Global_Position_semantic",
                texts: &texts,
                prediction: "<point>10 20</point>",
                ground_truth: "<point>12 22</point>",
                images: vec![NamedImage { name: "top-down", image: &topdown }],
                target: Some([1.0, 2.0, 0.5]),
                ..QuestionLog::default()
            },
        )
        .unwrap();
    recorder.finish().unwrap();
}

#[test]
fn an_rrd_file_is_complete_and_holds_the_documented_paths() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/run.rrd");
    record(&path);
    assert!(path.is_file(), "the recording was moved into place");
    assert!(!dir.path().join("nested/run.rrd.part").exists(), "no partial file is left");
    check_recording(&path).unwrap();
    let not_rrd = dir.path().join("notes.rrd");
    std::fs::write(&not_rrd, "hello").unwrap();
    let error = check_recording(&not_rrd).unwrap_err().to_string();
    assert!(error.contains("notes.rrd") && error.contains("not a Rerun recording"), "{error}");
    let missing = dir.path().join("missing.rrd");
    let error = gst_viz::view_file(&missing).unwrap_err().to_string();
    assert!(error.contains("missing.rrd") && error.contains("cannot open"), "{error}");

    let Some(cli) = rerun_cli() else {
        let required = std::env::var("GST_REQUIRE_RERUN").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "GST_REQUIRE_RERUN=1 but no rerun CLI in $GST_VENV/bin or .venv/bin (run `make setup`)"
        );
        eprintln!("note: no rerun CLI in $GST_VENV/bin or .venv/bin; skipping `rerun rrd verify/print`");
        return;
    };
    let verify = Command::new(&cli).args(["rrd", "verify"]).arg(&path).output().unwrap();
    assert!(
        verify.status.success(),
        "rerun rrd verify failed:\n{}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
    let print = Command::new(&cli).args(["rrd", "print", "-v"]).arg(&path).output().unwrap();
    assert!(print.status.success(), "rerun rrd print failed: {}", String::from_utf8_lossy(&print.stderr));
    let printed = String::from_utf8_lossy(&print.stdout);
    for entity in [
        paths::WORLD,
        paths::SCENE_WALLS,
        paths::SCENE_FURNITURE,
        paths::SCENE_ROOMS,
        paths::SCENE_DOORS,
        paths::CAMERA,
        paths::CAMERA_IMAGE,
        paths::CAMERA_RGB,
        paths::CAMERA_DEPTH,
        paths::SLAM_TRAJECTORY,
        paths::GROUNDTRUTH_TRAJECTORY,
        paths::METRICS_TRACKING_STATE,
        paths::METRICS_ATE,
        paths::QUESTION_TEXT,
        paths::QUESTION_TARGET,
    ] {
        assert!(printed.contains(&format!("/{entity}")), "`rerun rrd print` shows no /{entity}:\n{printed}");
    }
    // The default blueprint travels in the same file, as its own store.
    assert!(printed.to_lowercase().contains("blueprint"), "no blueprint store in:\n{printed}");
}
