//! `gst scene` and `gst render` end to end: determinism, outputs, and clear errors on bad input.

mod common;

use common::{assert_clean_failure, bad, files, run};

#[test]
fn same_seed_gives_byte_identical_output_and_other_seeds_differ() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let (a, b, c) = (dir.path().join("a"), dir.path().join("b"), dir.path().join("c"));
    for (out, seed) in [(&a, "5"), (&b, "5"), (&c, "6")] {
        let output =
            run(&["scene", "--seed", seed, "--out", out.to_str().unwrap_or_default(), "--views", "2"]);
        assert!(output.status.success(), "{}", common::stderr(&output));
    }
    let (fa, fb) = (files(&a), files(&b));
    let names: Vec<&str> = fa.iter().map(|(n, _)| n.as_str()).collect();
    for expected in [
        "scene.json",
        "topdown_rendered.png",
        "topdown_semantic.png",
        "topdown_binary.png",
        "topdown.json",
        "camera.yaml",
        "views/view_00_rgb.png",
        "views/view_00_depth.png",
        "views/view_00_ids.png",
        "views/poses.json",
    ] {
        assert!(names.contains(&expected), "missing {expected} in {names:?}");
    }
    assert_eq!(fa, fb, "the same seed must give byte-identical files");
    let plan = |dir: &std::path::Path| -> anyhow::Result<serde_json::Value> {
        let scene: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("scene.json"))?)?;
        Ok(scene["plan"].clone())
    };
    assert_ne!(plan(&a)?, plan(&c)?, "different seeds must give different plans");
    Ok(())
}

#[test]
fn render_writes_rgb_depth_and_ids_for_a_pose() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let scene_dir = dir.path().join("scene");
    let output =
        run(&["scene", "--seed", "3", "--out", scene_dir.to_str().unwrap_or_default(), "--views", "0"]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let scene = gst_sim::scene::Scene::load(&scene_dir.join("scene.json"))?;
    let c = scene.plan.rooms[0].centroid();
    let pose = format!("{} {} 1.4 30 -5", c[0], c[1]);
    let view = dir.path().join("view");
    let output = run(&[
        "render",
        "--scene",
        scene_dir.join("scene.json").to_str().unwrap_or_default(),
        "--pose",
        &pose,
        "--out",
        view.to_str().unwrap_or_default(),
    ]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let rgb = gst_io::read_rgb(&view.join("rgb.png"))?;
    let depth = gst_io::read_depth_png(&view.join("depth.png"), 5000.0)?;
    let ids = gst_io::read_instance_png(&view.join("ids.png"))?;
    assert_eq!((rgb.width(), rgb.height()), (640, 512));
    assert_eq!((depth.width(), ids.height()), (640, 512));
    let valid = depth.data().iter().filter(|d| **d > 0.0).count();
    assert!(valid > 640 * 512 / 2, "most pixels see a surface inside a room, got {valid}");
    Ok(())
}

#[test]
fn bad_inputs_fail_with_the_file_and_the_problem() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let out = dir.path().join("out");
    let out = out.to_str().unwrap_or_default();

    // Missing and corrupt catalogs.
    let output = run(&["scene", "--seed", "1", "--out", out, "--catalog", "/nonexistent/furniture.sh3f"]);
    assert_clean_failure(&output, &["/nonexistent/furniture.sh3f"]);
    let corrupt = bad("catalog_corrupt.sh3f");
    let output =
        run(&["scene", "--seed", "1", "--out", out, "--catalog", corrupt.to_str().unwrap_or_default()]);
    assert_clean_failure(&output, &["catalog_corrupt.sh3f", "zip"]);

    // Malformed scene documents.
    for (file, problem) in [
        ("scene_truncated.json", "not a valid scene document"),
        ("scene_wrong_version.json", "not a valid scene document"),
    ] {
        let path = bad(file);
        let output = run(&[
            "render",
            "--scene",
            path.to_str().unwrap_or_default(),
            "--pose",
            "1 1 1.4 0 0",
            "--out",
            out,
        ]);
        assert_clean_failure(&output, &[file, problem]);
    }

    // Malformed calibrations: checked before the scene is even opened.
    for (file, problem) in [
        ("calibration_not_a_matrix.yaml", "data has 5 values"),
        ("calibration_missing_width.yaml", "missing key image_width"),
    ] {
        let path = bad(file);
        let output = run(&[
            "render",
            "--scene",
            "unused.json",
            "--pose",
            "1 1 1.4 0 0",
            "--out",
            out,
            "--calib",
            path.to_str().unwrap_or_default(),
        ]);
        assert_clean_failure(&output, &[file, problem]);
    }

    // A malformed pose.
    let output = run(&["render", "--scene", "x.json", "--pose", "1 2", "--out", out]);
    assert_clean_failure(&output, &["5 numbers"]);
    // Nothing was written for the failed commands.
    assert!(!std::path::Path::new(out).join("rgb.png").exists());
    Ok(())
}
