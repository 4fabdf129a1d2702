//! `gst slam`: RGB-D SLAM over a recording (TUM RGB-D directory, generated episode, image folder, ROS bag or
//! MCAP file) or a live RealSense camera, writing the trajectory, the keyframe graph and the map points
//! (formats in `gst_slam::output`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use gst_core::{Pose3, TimedPose, Trajectory};
use gst_io::{FrameSource, SourceOptions};
use gst_slam::metrics::{Alignment, EvaluationOptions, evaluate};
use gst_slam::{Slam, SlamConfig, TrackingState, run_pipelined};
use gst_viz::{FrameTime, Recorder, TrajectoryKind};

use crate::rrd_args::{RecordedSource, RecordingErrors, RrdArgs};

#[derive(Debug, clap::Args)]
pub struct SlamArgs {
    /// A TUM RGB-D directory, a `gst generate` episode (`DIR/<split>/tum/<scene>`), an image folder with
    /// `rgb/` and `depth/`, or a robot recording: an `.mcap` file, a rosbag2 folder, a ROS 1 `.bag`.
    #[arg(long, required_unless_present = "realsense")]
    pub input: Option<PathBuf>,
    /// Track live from a RealSense camera (colour and depth aligned to colour) until Ctrl-C or --frames;
    /// needs a gst built with `--features realsense` (librealsense2).
    #[arg(long, conflicts_with = "input")]
    pub realsense: bool,
    /// With --realsense: stop after this many frames.
    #[arg(long, requires = "realsense")]
    pub frames: Option<usize>,
    /// Calibration file (OpenCV FileStorage, ROS camera_info or Kalibr); default: the input's
    /// `calibration.yaml`, or a bag's CameraInfo.
    #[arg(long)]
    pub calib: Option<PathBuf>,
    #[command(flatten)]
    pub topics: crate::input_args::TopicArgs,
    /// Output directory: trajectory.tum, keyframes.json, map_points.ply, stats.json.
    #[arg(long)]
    pub out: PathBuf,
    /// SLAM settings as JSON (a `SlamConfig`; missing fields take their defaults).
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub rrd: RrdArgs,
}

pub(crate) fn read_config(path: Option<&Path>) -> Result<SlamConfig> {
    let Some(path) = path else { return Ok(SlamConfig::default()) };
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let config: SlamConfig = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a valid SLAM config", path.display()))?;
    config.validate().with_context(|| path.display().to_string())?;
    Ok(config)
}

pub fn run(args: &SlamArgs) -> Result<()> {
    let config = read_config(args.config.as_deref())?;
    // A viewer to stream to is checked before anything is read, so a missing one fails at once; a file
    // recording is created only once the input has opened (no `.part` left behind by a bad input).
    let connected = if args.rrd.connect.is_some() { Some(args.rrd.recorder()?) } else { None };
    let options = SourceOptions { calibration: args.calib.clone(), ..SourceOptions::default() };
    let source = match &args.input {
        Some(input) => gst_bag::open_source(input, &options, &args.topics.choice())?,
        None => {
            let realsense = gst_bag::RealSenseOptions { max_frames: args.frames, ..Default::default() };
            gst_bag::open_realsense(&realsense)?
        }
    };
    gst_bag::require_depth(source.as_ref(), "gst slam")?;
    let input = source.path().to_path_buf();
    let mut slam = Slam::new(source.calibration(), config)?;
    let recorder = match connected {
        Some(recorder) => recorder,
        None => args.rrd.recorder()?,
    };
    let mut errors = RecordingErrors::default();
    errors.check(recorder.log_camera_model(&source.calibration().camera));
    // Frames are recorded as they are read (on the reading thread); poses and states as they are tracked.
    let mut source: Box<dyn FrameSource + Send> = if recorder.is_on() {
        Box::new(RecordedSource::new(source, recorder.clone(), args.rrd.records_images()))
    } else {
        source
    };
    let bar = crate::progress::bar(source.len().unwrap_or(0) as u64, "slam");
    let mut groundtruth = Vec::new();
    let mut frame_times = Vec::new();
    let mut lost = 0usize;
    run_pipelined(source.as_mut(), &mut slam, &mut |info, result| {
        if result.state == TrackingState::Lost {
            lost += 1;
        }
        if let Some(pose) = info.ground_truth {
            groundtruth.push(TimedPose { timestamp_s: info.timestamp_s, world_from_camera: pose });
        }
        if recorder.is_on() {
            let time = FrameTime::new(info.index, info.timestamp_s);
            if let Some(pose) = &result.world_from_camera {
                errors.check(recorder.log_camera_pose(&time, pose));
            }
            errors.check(recorder.log_tracking(&time, result.state, result.inliers, result.keyframe));
            frame_times.push(time);
        }
        bar.inc(1);
    })
    .with_context(|| format!("SLAM on {}", input.display()))?;
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
    let mut alignment = None;
    let mut truth = None;
    if groundtruth.len() >= 3 {
        // Evaluation only: the recording's ground truth is never read by tracking.
        let gt = Trajectory::new(groundtruth)?;
        let evaluation = evaluate(&gt, &output.trajectory, &EvaluationOptions::default())?;
        eprintln!(
            "against the recording's ground truth: ATE RMSE {:.2} cm, RPE RMSE {:.2} cm / {:.3}° per frame ({} poses)",
            evaluation.ate.translation_m.rmse * 100.0,
            evaluation.rpe.translation_m.rmse * 100.0,
            evaluation.rpe.rotation_deg.rmse,
            evaluation.ate.pairs
        );
        alignment = evaluation.alignment;
        truth = Some(gt);
    }
    eprintln!("wrote {}", args.out.display());
    if recorder.is_on() {
        record_results(&recorder, &output, truth.as_ref(), alignment.as_ref(), &frame_times, &mut errors);
        crate::rrd_args::finish(&recorder)?;
    }
    Ok(())
}

/// `gt_world_from_est_world` of an SE(3) alignment as a pose (its scale is 1).
pub fn alignment_pose(alignment: &Alignment) -> Pose3 {
    Pose3::from_rotation_matrix(alignment.translation, &alignment.rotation)
}

/// What a finished run adds to its recording: the final (loop-closed) trajectory, the map points, the
/// ground truth with the per-frame error of the aligned estimate, and where the estimate's world sits (the
/// alignment onto the ground truth, or the gravity alignment without one).
pub fn record_results(
    recorder: &Recorder,
    output: &gst_slam::SlamOutput,
    truth: Option<&Trajectory>,
    alignment: Option<&Alignment>,
    frame_times: &[FrameTime],
    errors: &mut RecordingErrors,
) {
    let estimate = &output.trajectory;
    errors.check(recorder.log_trajectory(TrajectoryKind::Estimate, estimate));
    errors.check(recorder.log_map_points(output.map_points.iter().map(|p| p.position)));
    let world_from_slam = match alignment {
        Some(alignment) => alignment_pose(alignment),
        None => {
            let poses: Vec<Pose3> = estimate.poses().iter().map(|p| p.world_from_camera).collect();
            gst_map::gravity_alignment(&poses)
        }
    };
    errors.check(recorder.log_world_from_slam(&world_from_slam));
    let Some(truth) = truth else { return };
    errors.check(recorder.log_trajectory(TrajectoryKind::GroundTruth, truth));
    let Some(alignment) = alignment else { return };
    // Frames and ground truth carry the same timestamps (both come from the frame source).
    let truth_poses = truth.poses();
    for pose in estimate.poses() {
        let k = truth_poses.partition_point(|p| p.timestamp_s < pose.timestamp_s);
        let k_time = frame_times.partition_point(|t| t.timestamp_s < pose.timestamp_s);
        let (Some(gt), Some(time)) = (truth_poses.get(k), frame_times.get(k_time)) else { continue };
        if gt.timestamp_s != pose.timestamp_s || time.timestamp_s != pose.timestamp_s {
            continue;
        }
        let aligned = alignment.transform_point(&pose.world_from_camera.translation());
        let error_m = (aligned - gt.world_from_camera.translation()).norm();
        errors.check(recorder.log_ate(time, error_m));
    }
}
