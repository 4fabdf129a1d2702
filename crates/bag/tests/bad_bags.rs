//! Bad and unusual bags: damaged files (truncated, a chunk whose CRC does not match), unknown encodings, a
//! depth image of another size, no CameraInfo, empty topics, ambiguous topics, out-of-order and duplicate
//! stamps. Each must give an error naming the file (and the topic and message index where there is one),
//! or a reported skip where the rest is usable; never a panic. The unusual bags are written by the Python
//! `rosbags` package (scripts/write_test_bags.py --variants); the damage is done here.

mod common;

use std::path::Path;

use common::*;
use gst_bag::{BagOptions, BagSource, ExportOptions, TopicChoice, export_mcap};
use gst_io::{FrameSource, SourceOptions, TumSource};

/// The frame count of reading `path` to the end, or the error text of opening or reading it.
fn outcome(path: &Path, options: &BagOptions) -> Result<usize, String> {
    let result = std::panic::catch_unwind(|| -> Result<usize, gst_io::IoError> {
        let mut source = BagSource::open(path, options)?;
        let mut n = 0;
        while source.next_frame()?.is_some() {
            n += 1;
        }
        Ok(n)
    });
    match result {
        Err(_) => panic!("{}: reading panicked", path.display()),
        Ok(result) => result.map_err(|e| e.to_string()),
    }
}

/// The error text of opening `path` and reading every frame (opening and reading are both allowed to fail).
fn failure(path: &Path, options: &BagOptions) -> String {
    match outcome(path, options) {
        Ok(n) => panic!("{}: expected an error, read {n} frames", path.display()),
        Err(text) => text,
    }
}

fn assert_mentions(text: &str, needles: &[&str]) {
    for needle in needles {
        assert!(text.contains(needle), "the error should mention {needle:?}: {text}");
    }
}

#[test]
fn ambiguous_colour_topics_list_the_candidates_and_a_named_topic_works() -> anyhow::Result<()> {
    let Some((_dir, _tum, bags)) = fixture_with(true)? else { return Ok(()) };
    let path = bags.join("variants/two_colour");
    let text = failure(&path, &raw());
    assert_mentions(
        &text,
        &["two_colour", "/camera/color/image_raw", "/camera2/color/image_raw", "--rgb-topic"],
    );
    let options = BagOptions { rgb_topic: Some("/camera2/color/image_raw".into()), ..raw() };
    let mut source = BagSource::open(&path, &options)?;
    assert_eq!(source.report().rgb_topic, "/camera2/color/image_raw");
    assert_eq!(frames(&mut source)?.len(), FRAMES);
    // A topic that is not there is named with the topics that are.
    let options = BagOptions { rgb_topic: Some("/nope".into()), ..raw() };
    assert_mentions(&failure(&path, &options), &["/nope", "/camera2/color/image_raw"]);
    Ok(())
}

#[test]
fn unknown_encodings_name_the_topic_and_message() -> anyhow::Result<()> {
    let Some((_dir, _tum, bags)) = fixture_with(true)? else { return Ok(()) };
    let text = failure(&bags.join("variants/unknown_encoding"), &raw());
    assert_mentions(
        &text,
        &["unknown_encoding", "topic /camera/color/image_raw, message 0", "yuv422", "rgb8"],
    );
    Ok(())
}

#[test]
fn a_depth_image_of_another_size_names_the_topic_and_message() -> anyhow::Result<()> {
    let Some((_dir, _tum, bags)) = fixture_with(true)? else { return Ok(()) };
    let path = bags.join("variants/depth_size");
    let text = failure(&path, &raw());
    assert_mentions(
        &text,
        &["depth_size", "topic /camera/aligned_depth_to_color/image_raw, message 3", "80x60", "160x120"],
    );
    // Frames before the bad one were delivered.
    let mut source = BagSource::open(&path, &raw())?;
    for _ in 0..3 {
        assert!(source.next_frame()?.is_some());
    }
    assert!(source.next_frame().is_err());
    Ok(())
}

#[test]
fn no_camera_info_asks_for_a_calibration_file_and_takes_one() -> anyhow::Result<()> {
    let Some((_dir, tum, bags)) = fixture_with(true)? else { return Ok(()) };
    let path = bags.join("variants/no_info");
    assert_mentions(&failure(&path, &raw()), &["no_info", "CameraInfo", "--calib"]);
    let options = BagOptions { calibration: Some(tum.join("calibration.yaml")), ..raw() };
    let mut source = BagSource::open(&path, &options)?;
    assert_eq!(source.calibration().camera, calibration().camera);
    assert_eq!(frames(&mut source)?.len(), FRAMES);
    Ok(())
}

#[test]
fn an_empty_depth_topic_gives_colour_only_frames_that_rgbd_commands_refuse() -> anyhow::Result<()> {
    let Some((_dir, _tum, bags)) = fixture_with(true)? else { return Ok(()) };
    let path = bags.join("variants/empty_depth");
    let source = gst_bag::open_source(&path, &SourceOptions::default(), &TopicChoice::default())?;
    assert!(!source.has_depth());
    let Err(e) = gst_bag::require_depth(source.as_ref(), "gst slam") else {
        anyhow::bail!("a colour-only bag must be refused");
    };
    assert_mentions(&e.to_string(), &["empty_depth", "no depth", "gst slam", "RGB-only"]);
    Ok(())
}

#[test]
fn an_empty_colour_topic_is_named() -> anyhow::Result<()> {
    let Some((_dir, _tum, bags)) = fixture_with(true)? else { return Ok(()) };
    let text = failure(&bags.join("variants/empty_colour"), &raw());
    assert_mentions(
        &text,
        &[
            "empty_colour",
            "no colour image topic",
            "/camera/color/image_raw (sensor_msgs/msg/Image, 0 messages)",
        ],
    );
    let options = BagOptions { rgb_topic: Some("/camera/color/image_raw".into()), ..raw() };
    assert_mentions(
        &failure(&bags.join("variants/empty_colour"), &options),
        &["/camera/color/image_raw", "no messages"],
    );
    Ok(())
}

#[test]
fn out_of_order_and_duplicate_stamps_are_reported_and_frames_follow_stamps() -> anyhow::Result<()> {
    let Some((_dir, tum, bags)) = fixture_with(true)? else { return Ok(()) };
    let mut tum_source =
        TumSource::open(&tum, &SourceOptions { undistort: false, ..SourceOptions::default() })?;
    let expected = frames(&mut tum_source)?;
    for (name, out_of_order, duplicates) in [("shuffled", true, 0), ("duplicate", false, 1)] {
        let mut source = BagSource::open(&bags.join("variants").join(name), &raw())?;
        let report = source.report().clone();
        assert_eq!(report.out_of_order > 0, out_of_order, "{name}: {report:?}");
        assert_eq!(report.duplicates, duplicates, "{name}: {report:?}");
        assert_eq!(report.pairs, FRAMES, "{name}");
        let text = report.to_string();
        assert!(text.contains("duplicate stamps") && text.contains("out of order"), "{text}");
        let got = frames(&mut source)?;
        assert_eq!(got.len(), FRAMES);
        for (g, e) in got.iter().zip(&expected) {
            assert_eq!(g.rgb, e.rgb, "{name}: frame {}", e.index);
            assert_eq!(g.depth, e.depth, "{name}: frame {}", e.index);
        }
    }
    Ok(())
}

#[test]
fn truncated_files_name_the_file_and_never_panic() -> anyhow::Result<()> {
    let Some((dir, _tum, bags)) = fixture()? else { return Ok(()) };
    let mcap = mcap_file(&bags)?;
    let ros1 = bags.join("ros1.bag");
    for (original, name) in [(&mcap, "cut.mcap"), (&ros1, "cut.bag")] {
        let bytes = std::fs::read(original)?;
        for fraction in [0.1, 0.5, 0.9, 0.999] {
            let cut = dir.path().join(name);
            std::fs::write(&cut, &bytes[..(bytes.len() as f64 * fraction) as usize])?;
            // A cut that only loses the trailing index (ROS 1 keeps it after the chunks) may still read:
            // then every frame of the original must come out, none silently lost.
            match outcome(&cut, &raw()) {
                Err(text) => assert_mentions(&text, &[name]),
                Ok(n) => assert_eq!(n, FRAMES, "{}: a cut file read {n} frames", cut.display()),
            }
        }
        let empty = dir.path().join(format!("empty_{name}"));
        std::fs::write(&empty, b"")?;
        assert_mentions(&failure(&empty, &raw()), &["empty_"]);
    }
    // A rosbag2 folder whose MCAP file was cut: the error names that file.
    let folder = dir.path().join("cut_rosbag2");
    std::fs::create_dir_all(&folder)?;
    std::fs::copy(bags.join("rosbag2/metadata.yaml"), folder.join("metadata.yaml"))?;
    let bytes = std::fs::read(&mcap)?;
    let listed = mcap.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    std::fs::write(folder.join(&listed), &bytes[..bytes.len() / 2])?;
    assert_mentions(&failure(&folder, &raw()), &[&listed.to_string_lossy()]);
    Ok(())
}

#[test]
fn a_chunk_crc_mismatch_is_named() -> anyhow::Result<()> {
    // gst's own MCAP writer (the `mcap` crate) writes chunk CRCs; rosbags' writer leaves them 0.
    let dir = tempfile::tempdir()?;
    let tum = dir.path().join("tum");
    write_tum(&tum)?;
    let out = dir.path().join("crc.mcap");
    let mut source = TumSource::open(&tum, &SourceOptions { undistort: false, ..SourceOptions::default() })?;
    let calibration = source.calibration().clone();
    export_mcap(&mut source, &calibration, &out, &ExportOptions::default())?;
    let mut bytes = std::fs::read(&out)?;
    // Flip a byte in the middle of the first chunk's pixel data (well inside the data section).
    let at = bytes.len() / 3;
    bytes[at] ^= 0x5a;
    std::fs::write(&out, &bytes)?;
    let text = failure(&out, &raw());
    assert_mentions(&text, &["crc.mcap", "CRC"]);
    Ok(())
}

#[test]
fn files_that_are_not_bags_say_what_they_are_not() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("notes.mcap");
    std::fs::write(&path, b"hello, this is not a bag")?;
    assert_mentions(&failure(&path, &raw()), &["notes.mcap", "neither an MCAP file"]);
    let missing = dir.path().join("missing.bag");
    assert_mentions(&failure(&missing, &raw()), &["missing.bag"]);
    // Topics named for something that is not a bag.
    let topics = TopicChoice { rgb: Some("/x".into()), ..TopicChoice::default() };
    let Err(e) = gst_bag::open_source(dir.path(), &SourceOptions::default(), &topics) else {
        anyhow::bail!("topics for a folder must be refused");
    };
    assert_mentions(&e.to_string(), &["not a bag", "--rgb-topic"]);
    Ok(())
}
