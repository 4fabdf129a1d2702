//! gst-bag against bags an independent writer made: the Python `rosbags` package (in the project's `.venv`)
//! writes a rosbag2 folder (MCAP storage, Humble types), and a ROS 1 Noetic bag from a small TUM sequence
//! (scripts/write_test_bags.py). Frames, stamps and intrinsics must come back exactly; SLAM on the bag must
//! give the TUM sequence's trajectory; bad inputs must fail with errors that name file, topic and message.
//!
//! Without `.venv` (no `make setup`) the tests say so and pass, unless `GST_REQUIRE_ROSBAGS=1` (CI), where
//! they fail.

mod common;

use std::process::Command;

use common::*;
use gst_bag::{BagOptions, BagSource, ExportOptions, Registration, export_mcap};
use gst_io::{FrameSource, SourceOptions, TumSource};

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
    assert!(!calibration().camera.distortion.is_zero(), "the fixture's camera must have distortion");
    let mut tum_source = TumSource::open(&tum, &SourceOptions::default())?;
    let expected = frames(&mut tum_source)?;
    for path in [bags.join("rosbag2"), bags.join("ros1.bag")] {
        let mut bag_source = BagSource::open(&path, &BagOptions::default())?;
        // The same undistorted camera as the YAML file's, and the same undistorted frames.
        assert_eq!(bag_source.calibration().camera, tum_source.calibration().camera, "{}", path.display());
        assert!(bag_source.calibration().camera.distortion.is_zero());
        let got = frames(&mut bag_source)?;
        assert_eq!(got.len(), expected.len());
        for (g, e) in got.iter().zip(&expected) {
            assert_eq!(g.rgb, e.rgb, "{}: frame {}", path.display(), e.index);
            if path.extension().is_none() {
                assert_eq!(g.depth, e.depth, "{}: frame {}", path.display(), e.index);
            }
        }
        // And not the raw frames: undistortion did something.
        let mut raw_source = BagSource::open(&path, &raw())?;
        assert_ne!(
            frames(&mut raw_source)?.first().map(|f| f.rgb.clone()),
            got.first().map(|f| f.rgb.clone())
        );
    }
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
