//! Fixtures shared by gst-bag's tests: a small TUM sequence and the bags the Python `rosbags` package
//! (in the project's `.venv`) writes of it (scripts/write_test_bags.py).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use gst_bag::BagOptions;
use gst_core::{Calibration, DepthImage, Distortion, Image, PinholeCamera, RgbImage};
use gst_io::{FrameSource, TumWriter};

pub const WIDTH: u32 = 160;
pub const HEIGHT: u32 = 120;
pub const FRAMES: usize = 12;

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn python() -> Option<PathBuf> {
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

pub fn calibration() -> Calibration {
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
pub fn frame(k: usize) -> (RgbImage, DepthImage) {
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

pub fn write_tum(dir: &Path) -> anyhow::Result<()> {
    let mut writer = TumWriter::create(dir, &calibration())?;
    for k in 0..FRAMES {
        let (rgb, depth) = frame(k);
        writer.add_frame(1_700_000_000.0 + k as f64 / 30.0, &rgb, &depth, None)?;
    }
    writer.finish()?;
    Ok(())
}

/// The TUM sequence and the bags the Python writer made of it.
pub fn fixture() -> anyhow::Result<Option<(tempfile::TempDir, PathBuf, PathBuf)>> {
    fixture_with(false)
}

/// [`fixture`], with `OUT/variants/*` (unusual and damaged bags) when `variants`.
pub fn fixture_with(variants: bool) -> anyhow::Result<Option<(tempfile::TempDir, PathBuf, PathBuf)>> {
    let Some(python) = python() else { return Ok(None) };
    let dir = tempfile::tempdir()?;
    let tum = dir.path().join("tum");
    write_tum(&tum)?;
    let bags = dir.path().join("bags");
    let output = Command::new(python)
        .arg(workspace().join("scripts/write_test_bags.py"))
        .arg(&tum)
        .arg(&bags)
        .args(if variants { &["--variants"][..] } else { &[][..] })
        .output()?;
    anyhow::ensure!(
        output.status.success(),
        "write_test_bags.py failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(Some((dir, tum, bags)))
}

pub fn raw() -> BagOptions {
    BagOptions { undistort: false, ..BagOptions::default() }
}

pub fn frames(source: &mut dyn FrameSource) -> anyhow::Result<Vec<gst_core::RgbdFrame>> {
    let mut out = Vec::new();
    while let Some(frame) = source.next_frame()? {
        out.push(frame);
    }
    Ok(out)
}

pub fn mcap_file(bags: &Path) -> anyhow::Result<PathBuf> {
    let dir = bags.join("rosbag2");
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "mcap") {
            return Ok(path);
        }
    }
    anyhow::bail!("no .mcap in {}", dir.display())
}
