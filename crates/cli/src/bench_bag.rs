//! `gst bench bag`: how fast bags are read, and what reading a bag costs `gst slam`.
//!
//! 1. Reading: a synthetic 640x480 recording (rgb8 colour, 16UC1 depth, deterministic texture) written as
//!    ROS 2 MCAP by `gst_bag::export_mcap`, then opened and decoded frame by frame by `gst_bag::BagSource`
//!    (no undistortion): frame pairs per second, opening included. Target: at least 300.
//! 2. SLAM: with `--input` (a TUM directory or generated episode), the same frames exported to MCAP
//!    (32FC1, exact), and `gst slam`'s pipeline (`gst_slam::run_slam`) timed on the TUM export and on the
//!    bag, alternately, `--repeats` times each: the median wall times, the bag's overhead (target at most
//!    5%) and whether the two trajectories are identical.
//!
//! Writes `OUT/bench.json` and prints the figures.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde::Serialize;

use gst_core::{Calibration, Image, PinholeCamera, RgbdFrame};
use gst_io::{FrameSource, IoError, SourceKind, SourceOptions};

#[derive(Debug, clap::Args)]
pub struct BagBenchArgs {
    /// A TUM RGB-D directory or generated episode for the SLAM comparison; without it only reading is
    /// measured.
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// Frame pairs of the synthetic 640x480 reading test.
    #[arg(long, default_value_t = 300)]
    pub frames: usize,
    /// Timed runs of each reading and SLAM measurement (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Output directory (the bags written, bench.json).
    #[arg(long, default_value = "bench-out/bag")]
    pub out: PathBuf,
}

#[derive(Debug, Serialize)]
struct ReadingReport {
    width: u32,
    height: u32,
    frames: usize,
    bag_bytes: u64,
    /// Seconds of each run (open + decode every pair).
    seconds: Vec<f64>,
    median_pairs_per_s: f64,
    target_pairs_per_s: f64,
}

#[derive(Debug, Serialize)]
struct SlamReport {
    input: PathBuf,
    frames: usize,
    tum_seconds: Vec<f64>,
    bag_seconds: Vec<f64>,
    median_tum_s: f64,
    median_bag_s: f64,
    overhead_percent: f64,
    target_overhead_percent: f64,
    identical_trajectories: bool,
}

#[derive(Debug, Serialize)]
struct Report {
    threads: usize,
    reading: ReadingReport,
    slam: Option<SlamReport>,
}

pub fn run(args: &BagBenchArgs) -> Result<()> {
    if args.frames == 0 || args.repeats == 0 {
        bail!("--frames and --repeats must be at least 1");
    }
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let reading = reading(&args.out, args.frames, args.repeats)?;
    eprintln!(
        "reading: {:.0} frame pairs/s of {}x{} rgb8 + 16UC1 from MCAP (median of {}; target >= {:.0})",
        reading.median_pairs_per_s, reading.width, reading.height, args.repeats, reading.target_pairs_per_s
    );
    let slam = match &args.input {
        Some(input) => {
            let slam = slam(input, &args.out, args.repeats)?;
            eprintln!(
                "gst slam on {} frames: TUM {:.2} s, bag {:.2} s (medians of {}): {:+.1}% (target <= {:.0}%); \
                 trajectories identical: {}",
                slam.frames,
                slam.median_tum_s,
                slam.median_bag_s,
                args.repeats,
                slam.overhead_percent,
                slam.target_overhead_percent,
                slam.identical_trajectories
            );
            Some(slam)
        }
        None => None,
    };
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let report = Report { threads, reading, slam };
    let path = args.out.join("bench.json");
    gst_io::write_json(&path, &report)?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

fn reading(out: &Path, frames: usize, repeats: usize) -> Result<ReadingReport> {
    let (width, height) = (640, 480);
    let bag = out.join("read_640x480.mcap");
    let mut source = Synthetic::new(width, height, frames);
    let calibration = source.calibration.clone();
    let options = gst_bag::ExportOptions { depth: gst_bag::DepthEncoding::Millimetres16, compress: false };
    let summary = gst_bag::export_mcap(&mut source, &calibration, &bag, &options)?;
    let bag_options = gst_bag::BagOptions { undistort: false, ..gst_bag::BagOptions::default() };
    let mut seconds = Vec::new();
    for _ in 0..repeats {
        let started = Instant::now();
        let mut source = gst_bag::BagSource::open(&bag, &bag_options)?;
        let mut pairs = 0usize;
        while let Some(frame) = source.next_frame()? {
            if frame.depth.is_some() {
                pairs += 1;
            }
        }
        seconds.push(started.elapsed().as_secs_f64());
        if pairs != frames {
            bail!("{}: read {pairs} frame pairs, wrote {frames}", bag.display());
        }
    }
    let median_s = median(&seconds);
    Ok(ReadingReport {
        width,
        height,
        frames,
        bag_bytes: summary.bytes,
        seconds,
        median_pairs_per_s: frames as f64 / median_s.max(1e-9),
        target_pairs_per_s: 300.0,
    })
}

fn slam(input: &Path, out: &Path, repeats: usize) -> Result<SlamReport> {
    let bag = out.join("slam.mcap");
    let raw = SourceOptions { undistort: false, ..SourceOptions::default() };
    let mut source = gst_io::open_source_with(input, &raw)?;
    let calibration = source.calibration().clone();
    let options = gst_bag::ExportOptions { depth: gst_bag::DepthEncoding::Metres32, compress: false };
    let summary = gst_bag::export_mcap(source.as_mut(), &calibration, &bag, &options)?;
    let config = gst_slam::SlamConfig::default();
    let run = |path: &Path, bag: bool| -> Result<(f64, gst_core::Trajectory)> {
        let started = Instant::now();
        let mut source: Box<dyn FrameSource + Send> = if bag {
            Box::new(gst_bag::BagSource::open(path, &gst_bag::BagOptions::default())?)
        } else {
            gst_io::open_source_with(path, &SourceOptions::default())?
        };
        let output = gst_slam::run_slam(source.as_mut(), &config, &mut |_| {})
            .with_context(|| format!("SLAM on {}", path.display()))?;
        Ok((started.elapsed().as_secs_f64(), output.trajectory))
    };
    let (mut tum_seconds, mut bag_seconds) = (Vec::new(), Vec::new());
    let mut identical = true;
    for _ in 0..repeats {
        let (t, from_tum) = run(input, false)?;
        tum_seconds.push(t);
        let (t, from_bag) = run(&bag, true)?;
        bag_seconds.push(t);
        identical &= from_tum.poses() == from_bag.poses();
    }
    let (median_tum_s, median_bag_s) = (median(&tum_seconds), median(&bag_seconds));
    Ok(SlamReport {
        input: input.into(),
        frames: summary.frames,
        tum_seconds,
        bag_seconds,
        median_tum_s,
        median_bag_s,
        overhead_percent: 100.0 * (median_bag_s / median_tum_s.max(1e-9) - 1.0),
        target_overhead_percent: 5.0,
        identical_trajectories: identical,
    })
}

/// Deterministic frames for the reading test: a hashed texture and a depth ramp, shifting with the frame.
#[derive(Debug)]
struct Synthetic {
    calibration: Calibration,
    frames: usize,
    next: usize,
}

impl Synthetic {
    fn new(width: u32, height: u32, frames: usize) -> Self {
        let camera = PinholeCamera {
            width,
            height,
            fx: 525.0,
            fy: 525.0,
            cx: (width as f64 - 1.0) / 2.0,
            cy: (height as f64 - 1.0) / 2.0,
            distortion: Default::default(),
        };
        Self {
            calibration: Calibration { camera, depth_scale: Some(1000.0), camera_name: None },
            frames,
            next: 0,
        }
    }
}

impl FrameSource for Synthetic {
    fn name(&self) -> &str {
        "synthetic 640x480"
    }
    fn path(&self) -> &Path {
        Path::new("synthetic")
    }
    fn kind(&self) -> SourceKind {
        SourceKind::ImageFolder
    }
    fn calibration(&self) -> &Calibration {
        &self.calibration
    }
    fn has_depth(&self) -> bool {
        true
    }
    fn len(&self) -> Option<usize> {
        Some(self.frames)
    }
    fn next_frame(&mut self) -> Result<Option<RgbdFrame>, IoError> {
        if self.next >= self.frames {
            return Ok(None);
        }
        let k = self.next as u32;
        self.next += 1;
        let (w, h) = (self.calibration.camera.width, self.calibration.camera.height);
        let mut rgb = Vec::with_capacity((w * h) as usize);
        let mut depth = Vec::with_capacity((w * h) as usize);
        for y in 0..h {
            for x in 0..w {
                let v =
                    ((x + 3 * k).wrapping_mul(2654435761) ^ y.wrapping_mul(40503)).wrapping_mul(2246822519);
                rgb.push([(v >> 24) as u8, (v >> 16) as u8, (v >> 8) as u8]);
                depth.push((800 + (x + y + k) % 3000) as f32 / 1000.0);
            }
        }
        let invalid =
            |e: gst_core::CoreError| IoError::Source { path: "synthetic".into(), message: e.to_string() };
        Ok(Some(RgbdFrame {
            index: k as usize,
            timestamp_s: 1_700_000_000.0 + f64::from(k) / 30.0,
            rgb: Image::from_vec(w, h, rgb).map_err(invalid)?,
            depth: Some(Image::from_vec(w, h, depth).map_err(invalid)?),
            ground_truth: None,
        }))
    }
}
