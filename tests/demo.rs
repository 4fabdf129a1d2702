//! `gst demo` end to end on one tiny house (a generate config of its own): the pipeline runs, prints the
//! table, and writes a Rerun recording that `rerun rrd verify` accepts and whose `rerun rrd print` lists the
//! documented entity paths (the `rerun` CLI of rerun-sdk 0.36.3 in `.venv`, installed by `make setup`).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::run;

const TINY_CONFIG: &str = r#"{
  "scene": { "plan": { "min_rooms": 3, "max_rooms": 3 } },
  "explore": { "duration_s": [25.0, 30.0] },
  "current_views": 1,
  "visual_targets": 1,
  "semantic_targets": 0,
  "trajectory_questions": 1,
  "topdown_questions": 1
}"#;

fn path(p: &Path) -> &str {
    p.to_str().unwrap_or_default()
}

/// The `rerun` CLI: `$GST_VENV/bin/rerun`, else the repository's `.venv/bin/rerun`.
fn rerun_cli() -> Option<PathBuf> {
    let venv = std::env::var_os("GST_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv"));
    let cli = venv.join("bin/rerun");
    cli.is_file().then_some(cli)
}

#[test]
fn the_demo_answers_and_writes_a_valid_recording() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("tiny.json");
    std::fs::write(&config, TINY_CONFIG)?;
    let out = dir.path().join("demo");
    let output = run(&[
        "demo",
        "--scenes",
        "1",
        "--seed",
        "3",
        "--config",
        path(&config),
        "--out",
        path(&out),
        "--primitives",
    ]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(report.contains("map-slam") && report.contains("Human Level"), "{report}");
    assert!(report.contains("SLAM ATE RMSE"), "{report}");
    let rrd = out.join("demo.rrd");
    assert!(rrd.is_file(), "no recording: {report}");

    let Some(cli) = rerun_cli() else {
        assert!(
            std::env::var_os("GST_REQUIRE_RERUN").is_none(),
            "GST_REQUIRE_RERUN is set but .venv has no rerun"
        );
        eprintln!("skipping the rerun CLI checks: no .venv/bin/rerun (run `make setup`)");
        return Ok(());
    };
    let verify = Command::new(&cli).args(["rrd", "verify", path(&rrd)]).output()?;
    assert!(verify.status.success(), "rrd verify: {}", String::from_utf8_lossy(&verify.stderr));
    let print = Command::new(&cli).args(["rrd", "print", path(&rrd)]).output()?;
    assert!(print.status.success(), "rrd print: {}", String::from_utf8_lossy(&print.stderr));
    let listing =
        format!("{}{}", String::from_utf8_lossy(&print.stdout), String::from_utf8_lossy(&print.stderr));
    for entity in [
        gst_viz::paths::CAMERA,
        gst_viz::paths::CAMERA_DEPTH,
        gst_viz::paths::GROUNDTRUTH_TRAJECTORY,
        gst_viz::paths::SLAM_TRAJECTORY,
        gst_viz::paths::MAP_OCCUPANCY,
        gst_viz::paths::ROOM_GRAPH,
        gst_viz::paths::MAP_OBJECTS,
        gst_viz::paths::QUESTION_TEXT,
        // The answers' grounding: every ED / EDist question has a located current view and a target.
        gst_viz::paths::QUESTION_CAMERA,
        gst_viz::paths::QUESTION_TARGET,
    ] {
        assert!(listing.contains(entity), "rrd print does not list {entity}");
    }
    Ok(())
}
