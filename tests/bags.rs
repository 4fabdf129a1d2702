//! Robot recordings through the `gst` command: a rendered episode exported as TUM RGB-D, written as a
//! rosbag2 folder and a ROS 1 bag by an independent writer (the Python `rosbags` package in `.venv`,
//! scripts/write_test_bags.py) and as MCAP by `gst export-bag`; `gst slam` on each must give the TUM export's
//! trajectory (exactly where depth is stored exactly), `gst bag info` must list the topics and the pairing,
//! `rosbags` must read `gst export-bag`'s file, and `gst map` must map a bag.
//!
//! Without `.venv` the tests that need the writer say so and pass, unless `GST_REQUIRE_ROSBAGS=1` (CI).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use gst_core::{Calibration, PinholeCamera};
use gst_io::TumWriter;
use gst_sim::explore::{ExploreConfig, explore};
use gst_sim::geometry::build_render_scene;
use gst_sim::render::{RenderOptions, render};
use gst_sim::scene::{SceneConfig, generate_scene};
use rand::SeedableRng;

fn python() -> Option<PathBuf> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    if python.is_file() {
        return Some(python);
    }
    assert!(
        std::env::var_os("GST_REQUIRE_ROSBAGS").is_none(),
        "GST_REQUIRE_ROSBAGS is set but {} is missing",
        python.display()
    );
    eprintln!("skipped: {} is missing; run `make setup` for the rosbags tests", python.display());
    None
}

/// A three-room house explored for 16–30 s at 10 fps, rendered at 320x256 and exported as TUM RGB-D.
fn episode(dir: &Path) -> anyhow::Result<()> {
    let library = common::library();
    let mut config = SceneConfig::default();
    config.plan.min_rooms = 3;
    config.plan.max_rooms = 3;
    let scene = generate_scene(5, &config, &library)?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let trajectory = explore(
        &scene,
        &ExploreConfig { fps: 10.0, duration_s: [16.0, 30.0], ..ExploreConfig::default() },
        &mut rng,
    )?;
    let render_scene = build_render_scene(&scene, &library)?;
    let camera = PinholeCamera {
        width: 320,
        height: 256,
        fx: 160.0,
        fy: 160.0,
        cx: 159.5,
        cy: 127.5,
        distortion: Default::default(),
    };
    let calibration = Calibration { camera, depth_scale: Some(5000.0), camera_name: Some("gst".into()) };
    let mut writer = TumWriter::create(dir, &calibration)?;
    for pose in trajectory.poses() {
        let frame = render(&render_scene, &camera, &pose.world_from_camera, &RenderOptions::default());
        writer.add_frame(pose.timestamp_s, &frame.rgb, &frame.depth, Some(&pose.world_from_camera))?;
    }
    writer.finish()?;
    Ok(())
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap_or_default()
}

fn gst_ok(args: &[&str]) -> anyhow::Result<String> {
    let output = common::run(args);
    anyhow::ensure!(output.status.success(), "gst {}: {}", args.join(" "), common::stderr(&output));
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn trajectory(out: &Path) -> anyhow::Result<String> {
    Ok(std::fs::read_to_string(out.join("trajectory.tum"))?)
}

/// Positions of a TUM trajectory file.
fn positions(text: &str) -> Vec<[f64; 3]> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let v: Vec<f64> = l.split_whitespace().filter_map(|x| x.parse().ok()).collect();
            [
                v.get(1).copied().unwrap_or(f64::NAN),
                v.get(2).copied().unwrap_or(f64::NAN),
                v.get(3).copied().unwrap_or(f64::NAN),
            ]
        })
        .collect()
}

#[test]
fn slam_on_bags_of_an_episode_gives_the_tum_exports_trajectory() -> anyhow::Result<()> {
    let Some(python) = python() else { return Ok(()) };
    let dir = tempfile::tempdir()?;
    let tum = dir.path().join("tum");
    episode(&tum)?;
    let bags = dir.path().join("bags");
    let written = Command::new(&python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/write_test_bags.py"))
        .arg(&tum)
        .arg(&bags)
        .output()?;
    anyhow::ensure!(
        written.status.success(),
        "write_test_bags.py: {}",
        String::from_utf8_lossy(&written.stderr)
    );

    let from_tum = dir.path().join("slam_tum");
    gst_ok(&["slam", "--input", s(&tum), "--out", s(&from_tum)])?;
    let expected = trajectory(&from_tum)?;
    assert!(positions(&expected).len() >= 60, "SLAM tracked {} frames", positions(&expected).len());

    // rosbags' rosbag2 folder and its MCAP file (32FC1 depth: exact): the same trajectory, byte for byte.
    let rosbag2 = bags.join("rosbag2");
    let mcap = rosbag2.join("rosbag2.mcap");
    for (input, name) in [(&rosbag2, "slam_rosbag2"), (&mcap, "slam_mcap")] {
        let out = dir.path().join(name);
        gst_ok(&["slam", "--input", s(input), "--out", s(&out)])?;
        assert_eq!(trajectory(&out)?, expected, "{}", input.display());
    }

    // `gst export-bag` of the episode, then SLAM on it: the same trajectory; rosbags reads the file.
    let exported = dir.path().join("episode.mcap");
    gst_ok(&["export-bag", s(&tum), s(&exported)])?;
    let out = dir.path().join("slam_export");
    gst_ok(&["slam", "--input", s(&exported), "--out", s(&out)])?;
    assert_eq!(trajectory(&out)?, expected, "gst export-bag");
    let script = "import sys\nfrom pathlib import Path\nfrom rosbags.highlevel import AnyReader\nfrom rosbags.typesys import Stores, get_typestore\n\
with AnyReader([Path(sys.argv[1])], default_typestore=get_typestore(Stores.ROS2_HUMBLE)) as r:\n    n = {}\n    for c, t, raw in r.messages():\n        m = r.deserialize(raw, c.msgtype)\n        n[c.topic] = n.get(c.topic, 0) + 1\n    print(sorted(n.items()))\n";
    let read = Command::new(&python).arg("-c").arg(script).arg(&exported).output()?;
    assert!(
        read.status.success(),
        "rosbags cannot read {}: {}",
        exported.display(),
        String::from_utf8_lossy(&read.stderr)
    );
    let frames = positions(&expected).len();
    let listing = String::from_utf8_lossy(&read.stdout);
    assert!(listing.contains(&format!("('/camera/color/image_raw', {frames})")), "{listing}");
    assert!(listing.contains(&format!("('/camera/depth/image_raw', {frames})")), "{listing}");

    // The ROS 1 bag has millimetre depth (16UC1): close to, not identical with, the TUM trajectory.
    let out = dir.path().join("slam_ros1");
    gst_ok(&["slam", "--input", s(&bags.join("ros1.bag")), "--out", s(&out)])?;
    let (a, b) = (positions(&trajectory(&out)?), positions(&expected));
    assert_eq!(a.len(), b.len());
    let worst = a
        .iter()
        .zip(&b)
        .map(|(p, q)| ((p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2) + (p[2] - q[2]).powi(2)).sqrt())
        .fold(0.0, f64::max);
    assert!(worst < 0.05, "ROS 1 bag trajectory differs by up to {worst} m");

    // `gst bag info`: topics, types, counts, rates and the pairing.
    let info = gst_ok(&["bag", "info", s(&rosbag2)])?;
    for needle in [
        "rosbag2 folder",
        "/camera/color/image_raw",
        "sensor_msgs/msg/Image",
        "/camera/aligned_depth_to_color/image_raw",
        "camera info",
        "10.00",
        &format!("pairs:  {frames} (0 colour and 0 depth unpaired"),
    ] {
        assert!(info.contains(needle), "gst bag info should show {needle:?}:\n{info}");
    }

    // `gst map` on a bag.
    let map = dir.path().join("map");
    gst_ok(&["map", "--input", s(&exported), "--out", s(&map)])?;
    for file in ["map.json", "scene_graph.json", "occupancy.png", "trajectory.tum", "run.json"] {
        assert!(map.join(file).is_file(), "gst map on a bag should write {file}");
    }
    assert_eq!(positions(&trajectory(&map)?).len(), frames, "gst map's SLAM on the bag tracks every frame");
    Ok(())
}

#[test]
fn bag_commands_name_bad_input() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let junk = dir.path().join("junk.mcap");
    std::fs::write(&junk, b"not an mcap file")?;
    let out = dir.path().join("out");
    common::assert_clean_failure(
        &common::run(&["bag", "info", s(&junk)]),
        &["junk.mcap", "neither an MCAP file"],
    );
    common::assert_clean_failure(
        &common::run(&["slam", "--input", s(&junk), "--out", s(&out)]),
        &["junk.mcap"],
    );
    // Topics only apply to bags.
    common::assert_clean_failure(
        &common::run(&["slam", "--input", s(dir.path()), "--out", s(&out), "--rgb-topic", "/x"]),
        &["not a bag", "--rgb-topic"],
    );
    // Without the feature, --realsense says how to get it.
    if !cfg!(feature = "realsense") {
        common::assert_clean_failure(
            &common::run(&["slam", "--realsense", "--out", s(&out)]),
            &["realsense", "librealsense2"],
        );
    }
    // --connect where no viewer listens fails at once, naming the address.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let addr = format!("127.0.0.1:{port}");
    let started = std::time::Instant::now();
    common::assert_clean_failure(
        &common::run(&["slam", "--input", s(&junk), "--out", s(&out), "--connect", &addr]),
        &[&addr],
    );
    assert!(started.elapsed().as_secs() < 20, "--connect took {:?}", started.elapsed());
    Ok(())
}
