//! `gst slam`: RGB-D SLAM over a recording (TUM RGB-D directory, generated episode, image folder), writing the
//! trajectory, the keyframe graph and the map points (formats in `gst_slam::output`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use gst_core::{TimedPose, Trajectory};
use gst_io::{SourceOptions, open_source_with};
use gst_slam::metrics::{EvaluationOptions, evaluate};
use gst_slam::{Slam, SlamConfig, TrackingState, run_pipelined};

#[derive(Debug, clap::Args)]
pub struct SlamArgs {
    /// A TUM RGB-D directory, a `gst generate` episode (`DIR/<split>/tum/<scene>`), or an image folder with
    /// `rgb/` and `depth/`.
    #[arg(long)]
    pub input: PathBuf,
    /// Calibration file (OpenCV FileStorage, ROS camera_info or Kalibr); default: the input's
    /// `calibration.yaml`.
    #[arg(long)]
    pub calib: Option<PathBuf>,
    /// Output directory: trajectory.tum, keyframes.json, map_points.ply, stats.json.
    #[arg(long)]
    pub out: PathBuf,
    /// SLAM settings as JSON (a `SlamConfig`; missing fields take their defaults).
    #[arg(long)]
    pub config: Option<PathBuf>,
}

fn read_config(path: Option<&Path>) -> Result<SlamConfig> {
    let Some(path) = path else { return Ok(SlamConfig::default()) };
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let config: SlamConfig = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a valid SLAM config", path.display()))?;
    config.validate().with_context(|| path.display().to_string())?;
    Ok(config)
}

pub fn run(args: &SlamArgs) -> Result<()> {
    let config = read_config(args.config.as_deref())?;
    let options = SourceOptions { calibration: args.calib.clone(), ..SourceOptions::default() };
    let mut source = open_source_with(&args.input, &options)?;
    if !source.has_depth() {
        anyhow::bail!(
            "{}: {} has no depth; gst slam needs RGB-D frames",
            args.input.display(),
            source.name()
        );
    }
    let mut slam = Slam::new(source.calibration(), config)?;
    let bar = crate::progress::bar(source.len().unwrap_or(0) as u64, "slam");
    let mut groundtruth = Vec::new();
    let mut lost = 0usize;
    run_pipelined(source.as_mut(), &mut slam, &mut |info, result| {
        if result.state == TrackingState::Lost {
            lost += 1;
        }
        if let Some(pose) = info.ground_truth {
            groundtruth.push(TimedPose { timestamp_s: info.timestamp_s, world_from_camera: pose });
        }
        bar.inc(1);
    })
    .with_context(|| format!("SLAM on {}", args.input.display()))?;
    bar.finish_and_clear();
    let output = slam.finish()?;
    gst_slam::output::write_outputs(&args.out, &output)?;
    let stats = &output.stats;
    let fps = stats.frames as f64 / stats.wall_seconds.max(1e-9);
    eprintln!(
        "{} frames ({} lost), {} keyframes, {} map points, {} loop closures, {} relocalisations: {:.1} frames/s (reading included)",
        stats.frames,
        lost,
        stats.keyframes,
        stats.map_points,
        stats.loop_closures,
        stats.relocalizations,
        fps
    );
    tracing::info!(
        "time per frame: ORB {:.1} ms, matching {:.1} ms, ICP {:.1} ms, keyframes {:.1} ms",
        1e3 * stats.seconds_orb / stats.frames.max(1) as f64,
        1e3 * stats.seconds_matching / stats.frames.max(1) as f64,
        1e3 * stats.seconds_icp / stats.frames.max(1) as f64,
        1e3 * stats.seconds_keyframes / stats.frames.max(1) as f64,
    );
    if groundtruth.len() >= 3 {
        // Evaluation only: the recording's ground truth is never read by tracking.
        let truth = Trajectory::new(groundtruth)?;
        let evaluation = evaluate(&truth, &output.trajectory, &EvaluationOptions::default())?;
        eprintln!(
            "against the recording's ground truth: ATE RMSE {:.2} cm, RPE RMSE {:.2} cm / {:.3}° per frame ({} poses)",
            evaluation.ate.translation_m.rmse * 100.0,
            evaluation.rpe.translation_m.rmse * 100.0,
            evaluation.rpe.rotation_deg.rmse,
            evaluation.ate.pairs
        );
    }
    eprintln!("wrote {}", args.out.display());
    Ok(())
}
