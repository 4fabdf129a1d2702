//! `gst map` and `gst map-eval` end to end on one small generated scene (ground-truth poses, named oracle,
//! to keep the test short; `gst bench map` measures the SLAM path), the marked-target locator on the scene's
//! object-marked video, and clean failures on bad input.

mod common;

use std::path::Path;

use common::{assert_clean_failure, run};

/// A 3–4 room house explored for about half a minute at 3 fps, primitive furniture, one marked target.
const SMALL_CONFIG: &str = r#"{
  "scene": { "plan": { "min_rooms": 3, "max_rooms": 4 } },
  "explore": { "fps": 3.0, "duration_s": [25.0, 30.0] },
  "current_views": 0,
  "visual_targets": 1,
  "semantic_targets": 0,
  "trajectory_questions": 0,
  "topdown_questions": 0
}"#;

fn path(p: &Path) -> &str {
    p.to_str().unwrap_or_default()
}

#[test]
fn maps_a_generated_scene_and_locates_its_marked_target() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("small.json");
    std::fs::write(&config, SMALL_CONFIG)?;
    let data = dir.path().join("data");
    let output = run(&[
        "generate",
        "--scenes",
        "1",
        "--seed",
        "4",
        "--out",
        path(&data),
        "--config",
        path(&config),
        "--primitives",
    ]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let split = data.join("bench");
    let tum = split.join("tum/scene_000");
    let out = dir.path().join("map");
    let output = run(&[
        "map",
        "--input",
        path(&tum),
        "--out",
        path(&out),
        "--poses",
        "groundtruth",
        "--perception",
        "oracle",
    ]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    for name in
        ["map.json", "scene_graph.json", "occupancy.png", "semantic.png", "trajectory.tum", "run.json"]
    {
        assert!(out.join(name).is_file(), "{name} missing");
    }
    let occupancy = gst_io::read_gray(&out.join("occupancy.png"))?;
    assert_eq!((occupancy.width(), occupancy.height()), (640, 512));
    assert!(occupancy.data().iter().all(|p| *p == 0 || *p == 255));
    assert!(occupancy.data().iter().filter(|p| **p == 255).count() > 20_000);
    let map = gst_map::SemanticMap::load(&out)?;
    let graph: gst_map::SceneGraph =
        serde_json::from_str(&std::fs::read_to_string(out.join("scene_graph.json"))?)?;
    assert_eq!(graph, map.scene_graph());
    assert!(map.rooms.len() >= 2, "{} rooms", map.rooms.len());
    assert_eq!(map.room_graph().edge_count(), map.doors.len());
    assert!(map.occupancy.floor_z_m.abs() < 0.03, "floor {}", map.occupancy.floor_z_m);

    let scene_json = split.join("scenes/scene_000/scene.json");
    let output = run(&["map-eval", "--map", path(&out), "--scene", path(&scene_json), "--json"]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let evaluation: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let number = |key: &str| evaluation[key].as_f64().unwrap_or(f64::NAN);
    assert!(number("occupancy_iou") > 0.6, "{evaluation}");
    assert!(number("object_median_error_m") < 0.3, "{evaluation}");
    assert!(number("registration_error_px_mean") < 4.0, "{evaluation}");
    assert!(number("room_mcc") > 0.3, "{evaluation}");

    // The red-boxed target, located from the marked video with depth and poses.
    let sequence = gst_io::TumSequence::open(&tum, None)?;
    let camera =
        sequence.calibration().map(|c| c.camera).unwrap_or_else(gst_core::PinholeCamera::gst_benchmark);
    let truth = sequence.groundtruth().cloned().unwrap_or_default();
    let poses: Vec<Option<gst_core::Pose3>> =
        truth.poses().iter().map(|p| Some(p.world_from_camera)).collect();
    let videos = split.join("videos/scene_000");
    let marked = std::fs::read_dir(&videos)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("obj_")))
        .ok_or_else(|| anyhow::anyhow!("no marked video"))?;
    let id: u32 = marked
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.strip_prefix("obj_"))
        .unwrap_or("")
        .parse()?;
    let target = gst_map::locate_marked_target(&marked, &sequence, &camera, &poses)?
        .ok_or_else(|| anyhow::anyhow!("target not found"))?;
    let annotations: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(split.join("scenes/scene_000/annotations.json"))?)?;
    let truth_centre = annotations
        .as_array()
        .and_then(|a| a.iter().find(|x| x["id"].as_u64() == Some(u64::from(id))))
        .map(|x| [0, 1, 2].map(|k| x["bbox3d"]["translation"][k].as_f64().unwrap_or(f64::NAN)))
        .ok_or_else(|| anyhow::anyhow!("target {id} not annotated"))?;
    let error = (0..3).map(|k| (target.centroid_world_m[k] - truth_centre[k]).powi(2)).sum::<f64>().sqrt();
    // A target seen from one side is located by its visible surface: up to half its depth off its centre.
    assert!(error < 0.5, "target {id}: error {error} m ({target:?})");
    assert!(target.observations >= 3);
    Ok(())
}

#[test]
fn bad_input_fails_cleanly() {
    let missing = run(&["map", "--input", "/nonexistent/episode", "--out", "/tmp/gst-map-never"]);
    assert_clean_failure(&missing, &["/nonexistent/episode"]);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = dir.path().join("bad.json");
    std::fs::write(&config, "{\"resolution_m\": -1}").unwrap_or_else(|e| panic!("{e}"));
    let bad = run(&[
        "map",
        "--input",
        "/nonexistent/episode",
        "--out",
        "/tmp/gst-map-never",
        "--config",
        path(&config),
    ]);
    assert_clean_failure(&bad, &["bad.json", "resolution_m"]);
    let eval = run(&["map-eval", "--map", "/nonexistent/map", "--scene", "/nonexistent/scene.json"]);
    assert_clean_failure(&eval, &["map.json"]);
}
