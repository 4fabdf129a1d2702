//! gst-bag against bags an independent writer made: the Python `rosbags` package (in the project's `.venv`)
//! writes a rosbag2 folder (MCAP storage, Humble types), and a ROS 1 Noetic bag from a small TUM sequence
//! (scripts/write_test_bags.py). Frames, stamps and intrinsics must come back exactly; SLAM on the bag must
//! give the TUM sequence's trajectory; bad inputs must fail with errors that name file, topic and message.
//!
//! Without `.venv` (no `make setup`) the tests say so and pass, unless `GST_REQUIRE_ROSBAGS=1` (CI), where
//! they fail.

use std::path::{Path, PathBuf};
use std::process::Command;

use gst_bag::{BagOptions, BagSource, ExportOptions, Registration, export_mcap};
use gst_core::{Calibration, DepthImage, Distortion, Image, PinholeCamera, RgbImage};
use gst_io::{FrameSource, SourceOptions, TumSource, TumWriter};

const WIDTH: u32 = 160;
const HEIGHT: u32 = 120;
const FRAMES: usize = 12;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn python() -> Option<PathBuf> {
    let python = workspace().join(".venv/bin/python");
    if python.is_file() {
        return Some(python);
    }
    assert!(
        std::env::var_os("GST_REQUIRE_ROSBAGS").is_none(),
        "GST_REQUIRE_ROSBAGS is set but {} is missing (run `make setup`)",
        python.display()
    );
    eprintln!("skipped: {} is missing; run `make setup` for the rosbags tests", python.display());
    None
}

fn calibration() -> Calibration {
    let camera = PinholeCamera {
        width: WIDTH,
        height: HEIGHT,
        fx: 120.0,
        fy: 121.5,
        cx: 79.5,
        cy: 59.5,
        distortion: Distortion { k1: 0.05, k2: -0.01, p1: 0.001, p2: -0.0005, k3: 0.0 },
    };
    Calibration { camera, depth_scale: Some(5000.0), camera_name: Some("test".into()) }
}

/// A textured plane seen by a camera sliding sideways: deterministic, with enough texture to track.
fn frame(k: usize) -> (RgbImage, DepthImage) {
    let shift = 2 * k as u32;
    let texture = |x: u32, y: u32| {
        let h = (x.wrapping_mul(2654435761) ^ y.wrapping_mul(40503)).wrapping_mul(2246822519);
        let block = ((x / 6) * 7 + (y / 6) * 13) % 17;
        (((h >> 24) as u8) / 4).wrapping_add((block * 12) as u8)
    };
    let mut rgb = Vec::new();
    let mut depth = Vec::new();
    for y in 0..HEIGHT {
        for x in 0..WIDTH {
            let v = texture(x + shift, y);
            rgb.push([v, v.wrapping_mul(3), 255 - v]);
            let units = 10000 + ((x + shift) * 7 + y * 3) % 500;
            depth.push(units as f32 / 5000.0);
        }
    }
    (
        Image::from_vec(WIDTH, HEIGHT, rgb).unwrap_or_else(|_| Image::filled(1, 1, [0; 3])),
        Image::from_vec(WIDTH, HEIGHT, depth).unwrap_or_else(|_| Image::filled(1, 1, 0.0)),
    )
}

fn write_tum(dir: &Path) -> anyhow::Result<()> {
    let mut writer = TumWriter::create(dir, &calibration())?;
    for k in 0..FRAMES {
        let (rgb, depth) = frame(k);
        writer.add_frame(1_700_000_000.0 + k as f64 / 30.0, &rgb, &depth, None)?;
    }
    writer.finish()?;
    Ok(())
}

/// The TUM sequence and the bags the Python writer made of it.
fn fixture() -> anyhow::Result<Option<(tempfile::TempDir, PathBuf, PathBuf)>> {
    let Some(python) = python() else { return Ok(None) };
    let dir = tempfile::tempdir()?;
    let tum = dir.path().join("tum");
    write_tum(&tum)?;
    let bags = dir.path().join("bags");
    let output = Command::new(python)
        .arg(workspace().join("scripts/write_test_bags.py"))
        .arg(&tum)
        .arg(&bags)
        .output()?;
    anyhow::ensure!(
        output.status.success(),
        "write_test_bags.py failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(Some((dir, tum, bags)))
}

fn raw() -> BagOptions {
    BagOptions { undistort: false, ..BagOptions::default() }
}

fn frames(source: &mut dyn FrameSource) -> anyhow::Result<Vec<gst_core::RgbdFrame>> {
    let mut out = Vec::new();
    while let Some(frame) = source.next_frame()? {
        out.push(frame);
    }
    Ok(out)
}

fn mcap_file(bags: &Path) -> anyhow::Result<PathBuf> {
    let dir = bags.join("rosbag2");
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "mcap") {
            return Ok(path);
        }
    }
    anyhow::bail!("no .mcap in {}", dir.display())
}

#[test]
fn rosbag2_folder_and_plain_mcap_give_the_tum_frames_exactly() -> anyhow::Result<()> {
    let Some((_dir, tum, bags)) = fixture()? else { return Ok(()) };
    let mut tum_source =
        TumSource::open(&tum, &SourceOptions { undistort: false, ..SourceOptions::default() })?;
    let expected = frames(&mut tum_source)?;
    assert_eq!(expected.len(), FRAMES);
    for path in [bags.join("rosbag2"), mcap_file(&bags)?] {
        let mut source = BagSource::open(&path, &raw())?;
        let report = source.report().clone();
        assert_eq!(report.rgb_topic, "/camera/color/image_raw");
        assert_eq!(report.depth_topic.as_deref(), Some("/camera/aligned_depth_to_color/image_raw"));
        assert_eq!(report.info_topic.as_deref(), Some("/camera/color/camera_info"));
        assert_eq!((report.pairs, report.unpaired_colour, report.unpaired_depth), (FRAMES, 0, 0));
        assert_eq!(report.registration, Registration::Same);
        // CameraInfo gives the YAML calibration's camera, distortion included.
        assert_eq!(source.calibration().camera, calibration().camera);
        let got = frames(&mut source)?;
        assert_eq!(got.len(), expected.len());
        for (g, e) in got.iter().zip(&expected) {
            assert_eq!(g.rgb, e.rgb, "{}: frame {}", path.display(), e.index);
            assert_eq!(g.depth, e.depth, "{}: frame {} (32FC1 is exact)", path.display(), e.index);
            assert!((g.timestamp_s - e.timestamp_s).abs() < 1e-6);
        }
    }
    Ok(())
}

#[test]
fn ros1_bag_gives_the_tum_frames_with_millimetre_depth() -> anyhow::Result<()> {
    let Some((_dir, tum, bags)) = fixture()? else { return Ok(()) };
    let mut tum_source =
        TumSource::open(&tum, &SourceOptions { undistort: false, ..SourceOptions::default() })?;
    let expected = frames(&mut tum_source)?;
    let mut source = BagSource::open(&bags.join("ros1.bag"), &raw())?;
    assert_eq!(source.calibration().camera, calibration().camera);
    assert_eq!(source.report().pairs, FRAMES);
    let got = frames(&mut source)?;
    assert_eq!(got.len(), FRAMES);
    for (g, e) in got.iter().zip(&expected) {
        assert_eq!(g.rgb, e.rgb, "bgr8 comes back as the same RGB");
        let want: Vec<f32> = e
            .depth
            .as_ref()
            .map(|d| d.data().iter().map(|m| ((m * 5000.0).round() / 5.0).round() / 1000.0).collect())
            .unwrap_or_default();
        assert_eq!(g.depth.as_ref().map(|d| d.data().to_vec()), Some(want));
    }
    Ok(())
}

#[test]
fn undistortion_from_camera_info_matches_the_yaml_calibration() -> anyhow::Result<()> {
    let Some((_dir, tum, bags)) = fixture()? else { return Ok(()) };
    let mut tum_source = TumSource::open(&tum, &SourceOptions::default())?;
    let mut bag_source = BagSource::open(&bags.join("rosbag2"), &BagOptions::default())?;
    assert_eq!(bag_source.calibration().camera, tum_source.calibration().camera);
    assert!(bag_source.calibration().camera.distortion.is_zero());
    assert_eq!(
        frames(&mut bag_source)?.first().map(|f| f.rgb.clone()),
        frames(&mut tum_source)?.first().map(|f| f.rgb.clone())
    );
    Ok(())
}

#[test]
fn slam_on_the_bag_gives_the_tum_trajectory() -> anyhow::Result<()> {
    let Some((_dir, tum, bags)) = fixture()? else { return Ok(()) };
    let config = gst_slam::SlamConfig::default();
    let mut tum_source: Box<dyn FrameSource + Send> =
        Box::new(TumSource::open(&tum, &SourceOptions::default())?);
    let from_tum = gst_slam::run_slam(tum_source.as_mut(), &config, &mut |_| {})?;
    let mut bag_source: Box<dyn FrameSource + Send> =
        Box::new(BagSource::open(&bags.join("rosbag2"), &BagOptions::default())?);
    let from_bag = gst_slam::run_slam(bag_source.as_mut(), &config, &mut |_| {})?;
    assert!(from_tum.trajectory.len() >= FRAMES / 2, "SLAM tracked {} frames", from_tum.trajectory.len());
    assert_eq!(from_bag.trajectory.len(), from_tum.trajectory.len());
    for (a, b) in from_bag.trajectory.poses().iter().zip(from_tum.trajectory.poses()) {
        assert!((a.timestamp_s - b.timestamp_s).abs() < 1e-6);
        assert_eq!(a.world_from_camera, b.world_from_camera);
    }
    Ok(())
}

#[test]
fn export_round_trips_and_rosbags_reads_it() -> anyhow::Result<()> {
    let Some((dir, tum, _bags)) = fixture()? else { return Ok(()) };
    let out = dir.path().join("export.mcap");
    let mut source = TumSource::open(&tum, &SourceOptions { undistort: false, ..SourceOptions::default() })?;
    let calibration = source.calibration().clone();
    let summary = export_mcap(
        &mut source,
        &calibration,
        &out,
        &ExportOptions { depth: gst_bag::DepthEncoding::Metres32, compress: false },
    )?;
    assert_eq!(summary.frames, FRAMES);
    let mut again = TumSource::open(&tum, &SourceOptions { undistort: false, ..SourceOptions::default() })?;
    let expected = frames(&mut again)?;
    let mut bag = BagSource::open(&out, &raw())?;
    assert_eq!(bag.calibration().camera, calibration.camera);
    let got = frames(&mut bag)?;
    assert_eq!(
        got.iter().map(|f| (&f.rgb, &f.depth)).collect::<Vec<_>>(),
        expected.iter().map(|f| (&f.rgb, &f.depth)).collect::<Vec<_>>()
    );
    // The independent reader accepts it.
    let Some(python) = python() else { return Ok(()) };
    let script = "import sys\nfrom rosbags.highlevel import AnyReader\nfrom pathlib import Path\nfrom rosbags.typesys import Stores, get_typestore\n\
with AnyReader([Path(sys.argv[1])], default_typestore=get_typestore(Stores.ROS2_HUMBLE)) as r:\n    n = 0\n    for c, t, raw in r.messages():\n        m = r.deserialize(raw, c.msgtype)\n        n += 1\n    print(n)\n";
    let rosbag2 = dir.path().join("export_rosbag2");
    std::fs::create_dir_all(&rosbag2)?;
    let output = Command::new(python).arg("-c").arg(script).arg(&out).output()?;
    assert!(
        output.status.success(),
        "rosbags cannot read the export: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), (2 * FRAMES + 1).to_string());
    Ok(())
}
