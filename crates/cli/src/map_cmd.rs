//! `gst map`: SLAM (or, named oracle, the recording's ground-truth poses) then the semantic map over a
//! recording: `map.json`, `scene_graph.json`, `occupancy.png`, `semantic.png`, `trajectory.tum`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use gst_core::{Pose3, TimedPose, Trajectory};
use gst_io::{SourceOptions, TumSequence, open_source_with, read_trajectory_tum, write_trajectory_tum};
use gst_map::{
    MapBuilder, MapConfig, NoPerception, OraclePerception, Perception, PosedFrame, SemanticMap, TopdownView,
    gravity_alignment, poses_per_frame, render_binary, render_semantic,
};
use gst_slam::SlamConfig;
use gst_viz::{FrameTime, Recorder, TrajectoryKind};

use crate::rrd_args::{RecordingErrors, RrdArgs};

/// Size of the rendered top-downs (GST-Bench's).
pub const TOPDOWN_SIZE: (u32, u32) = (640, 512);

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PoseSource {
    /// Our RGB-D SLAM on the recording.
    Slam,
    /// ORACLE: the recording's ground-truth poses (`groundtruth.txt`).
    Groundtruth,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PerceptionKind {
    /// No object observations.
    None,
    /// ORACLE: simulator instance masks of a generated episode and the scene's annotations.
    Oracle,
}

#[derive(Debug, clap::Args)]
pub struct MapArgs {
    /// A TUM RGB-D directory, a `gst generate` episode (`DIR/<split>/tum/<scene>`), or a robot recording
    /// with depth: an `.mcap` file, a rosbag2 folder, a ROS 1 `.bag`.
    #[arg(long)]
    pub input: PathBuf,
    #[command(flatten)]
    pub topics: crate::input_args::TopicArgs,
    /// Output directory.
    #[arg(long)]
    pub out: PathBuf,
    /// Where poses come from.
    #[arg(long, value_enum, default_value = "slam")]
    pub poses: PoseSource,
    /// Where object observations come from.
    #[arg(long, value_enum, default_value = "none")]
    pub perception: PerceptionKind,
    /// `annotations.json` for oracle perception; default: the episode's `../../scenes/<scene>/annotations.json`.
    #[arg(long)]
    pub annotations: Option<PathBuf>,
    /// Map settings as JSON (a `MapConfig`; missing fields take their defaults).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Build the map with the poses of this TUM trajectory (an earlier `gst slam` or `gst map` run's
    /// `trajectory.tum`) instead of running SLAM.
    #[arg(long, conflicts_with = "poses")]
    pub trajectory: Option<PathBuf>,
    #[command(flatten)]
    pub rrd: RrdArgs,
}

/// What a run measured (written as `OUT/run.json`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MapRun {
    pub input: PathBuf,
    pub poses: PoseSource,
    /// The trajectory file the poses were read from (`--trajectory`) instead of running SLAM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trajectory_file: Option<PathBuf>,
    pub perception: PerceptionKind,
    pub frames: usize,
    pub slam_frames: usize,
    /// SLAM's tracking time per frame (reading excluded), milliseconds; 0 with ground-truth poses.
    pub slam_ms_per_frame: f64,
    /// SLAM's wall time per frame (reading and preparing included), milliseconds.
    pub slam_wall_ms_per_frame: f64,
    /// Mapping time per frame (`MapBuilder::add_frame`: occupancy and objects), milliseconds.
    pub map_ms_per_frame: f64,
    /// Perception time per frame (oracle: reading instance images), milliseconds.
    pub perception_ms_per_frame: f64,
    pub finish_seconds: f64,
    pub rooms: usize,
    pub doors: usize,
    pub objects: usize,
}

pub(crate) fn read_config(path: Option<&Path>) -> Result<MapConfig> {
    let Some(path) = path else { return Ok(MapConfig::default()) };
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let config: MapConfig =
        serde_json::from_str(&text).with_context(|| format!("{}: not a valid map config", path.display()))?;
    config.validate().with_context(|| path.display().to_string())?;
    Ok(config)
}

pub fn run(args: &MapArgs) -> Result<()> {
    let config = read_config(args.config.as_deref())?;
    let recorder = args.rrd.recorder()?;
    let recording = Recording { recorder: &recorder, images: args.rrd.records_images() };
    let report = if gst_bag::is_bag_path(&args.input) {
        build_bag_map(
            &args.input,
            &args.out,
            args.poses,
            args.trajectory.as_deref(),
            args.perception,
            &args.topics.choice(),
            &config,
            &recording,
        )?
    } else {
        if !args.topics.choice().is_empty() {
            bail!("{}: --rgb-topic, --depth-topic and --info-topic apply to bags only", args.input.display());
        }
        build_map_recorded(
            &args.input,
            &args.out,
            args.poses,
            args.trajectory.as_deref(),
            args.perception,
            args.annotations.as_deref(),
            &config,
            true,
            &recording,
        )?
    };
    crate::rrd_args::finish(&recorder)?;
    eprintln!(
        "{} frames: {} rooms, {} doors, {} objects; mapping {:.2} ms/frame, SLAM {:.2} ms/frame ({:.0}% added)",
        report.frames,
        report.rooms,
        report.doors,
        report.objects,
        report.map_ms_per_frame,
        report.slam_ms_per_frame,
        if report.slam_ms_per_frame > 0.0 {
            100.0 * report.map_ms_per_frame / report.slam_ms_per_frame
        } else {
            0.0
        },
    );
    eprintln!("wrote {}", args.out.display());
    Ok(())
}

/// The episode's default `annotations.json`: `DIR/<split>/tum/<scene>` → `DIR/<split>/scenes/<scene>/`.
fn default_annotations(input: &Path) -> Option<PathBuf> {
    let scene = input.file_name()?;
    let split = input.parent()?.parent()?;
    Some(split.join("scenes").join(scene).join("annotations.json"))
}

/// Runs SLAM (or reads ground truth) and builds the map of a TUM recording into `out`.
#[allow(clippy::too_many_arguments)]
pub fn build_map(
    input: &Path,
    out: &Path,
    poses: PoseSource,
    trajectory_file: Option<&Path>,
    perception: PerceptionKind,
    annotations: Option<&Path>,
    config: &MapConfig,
    progress: bool,
) -> Result<MapRun> {
    let off = Recorder::off();
    build_map_recorded(
        input,
        out,
        poses,
        trajectory_file,
        perception,
        annotations,
        config,
        progress,
        &Recording { recorder: &off, images: false },
    )
}

/// Where [`build_map_recorded`] records the run.
#[derive(Clone, Copy, Debug)]
pub struct Recording<'a> {
    pub recorder: &'a Recorder,
    /// Whether the mapped frames' images (colour, depth, instance ids) are recorded.
    pub images: bool,
}

/// [`build_map`], recording the mapped frames (poses, images), SLAM's trajectory and map points and the
/// finished semantic map. With `trajectory_file`, its poses stand for SLAM's (no SLAM is run).
#[allow(clippy::too_many_arguments)]
pub fn build_map_recorded(
    input: &Path,
    out: &Path,
    poses: PoseSource,
    trajectory_file: Option<&Path>,
    perception: PerceptionKind,
    annotations: Option<&Path>,
    config: &MapConfig,
    progress: bool,
    recording: &Recording<'_>,
) -> Result<MapRun> {
    config.validate()?;
    let recorder = recording.recorder;
    let mut errors = RecordingErrors::default();
    let sequence = TumSequence::open(input, None).with_context(|| format!("opening {}", input.display()))?;
    let options = SourceOptions::default();
    let (trajectory, slam_ms, slam_wall_ms, slam_frames) = match (poses, trajectory_file) {
        (_, Some(path)) => {
            let trajectory = read_trajectory_tum(path)?;
            let frames = trajectory.len();
            (trajectory, 0.0, 0.0, frames)
        }
        (PoseSource::Groundtruth, None) => {
            let Some(truth) = sequence.groundtruth() else {
                bail!("{}: no groundtruth.txt for --poses groundtruth", input.display());
            };
            (truth.clone(), 0.0, 0.0, truth.len())
        }
        (PoseSource::Slam, None) => {
            let mut source = open_source_with(input, &options)?;
            let bar = if progress {
                crate::progress::bar(sequence.len() as u64, "slam")
            } else {
                indicatif::ProgressBar::hidden()
            };
            let output = gst_slam::run_slam(source.as_mut(), &SlamConfig::default(), &mut |_| bar.inc(1))
                .with_context(|| format!("SLAM on {}", input.display()))?;
            bar.finish_and_clear();
            errors.check(recorder.log_map_points(output.map_points.iter().map(|p| p.position)));
            let frames = output.stats.frames.max(1) as f64;
            (
                output.trajectory,
                1e3 * output.stats.tracking_seconds / frames,
                1e3 * output.stats.wall_seconds / frames,
                output.stats.frames,
            )
        }
    };
    let camera = match sequence.calibration() {
        Some(c) => c.camera,
        None => gst_io::read_calibration(&input.join("calibration.yaml"))?.camera,
    };
    // One pose per frame of the sequence, by timestamp (SLAM reports every tracked frame).
    let frame_poses = poses_per_frame(&sequence, &trajectory);
    let known: Vec<Pose3> = frame_poses.iter().flatten().copied().collect();
    if known.is_empty() {
        tracing::warn!("{}: no frame has a pose; the map will be empty", input.display());
    }
    let map_from_world = gravity_alignment(&known);
    if recorder.is_on() {
        record_poses(recorder, &sequence, &trajectory, poses, map_from_world, &mut errors);
        errors.check(recorder.log_camera_model(&camera));
        if recording.images && sequence.has_instances() {
            let classes = annotations.map(Path::to_path_buf).or_else(|| default_annotations(input));
            if let Some(classes) =
                classes.and_then(|path| gst_map::perception::read_instance_classes(&path).ok())
            {
                let classes: Vec<_> = classes
                    .into_iter()
                    .filter_map(|(id, class)| {
                        u16::try_from(id).ok().map(|id| (gst_core::InstanceId(id), class))
                    })
                    .collect();
                errors.check(recorder.log_instance_classes(&classes));
            }
        }
    }
    let mut perceiver: Box<dyn Perception> = match perception {
        PerceptionKind::None => Box::new(NoPerception),
        PerceptionKind::Oracle => {
            let path =
                annotations.map(Path::to_path_buf).or_else(|| default_annotations(input)).with_context(
                    || format!("{}: cannot find annotations.json; pass --annotations", input.display()),
                )?;
            Box::new(OraclePerception::open(input, &path)?)
        }
    };
    let mut builder = MapBuilder::new(config.clone(), camera, map_from_world)?;
    let bar = if progress {
        crate::progress::bar(sequence.len() as u64, "map")
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut perception_seconds = 0.0;
    for (k, pose) in frame_poses.iter().enumerate() {
        bar.inc(1);
        let Some(pose) = pose else { continue };
        if k % config.frame_stride != 0 {
            continue;
        }
        let frame = sequence.frame(k)?;
        let started = Instant::now();
        let observations = perceiver.observe(k, &frame.rgb)?;
        perception_seconds += started.elapsed().as_secs_f64();
        builder.add_frame(&PosedFrame {
            index: k,
            timestamp_s: frame.timestamp_s,
            world_from_camera: *pose,
            depth: Some(&frame.depth),
            rgb: Some(&frame.rgb),
            observations: &observations,
        })?;
        if recorder.is_on() {
            let time = FrameTime::new(k, frame.timestamp_s);
            errors.check(recorder.log_camera_pose(&time, pose));
            if recording.images {
                errors.check(recorder.log_rgb(&time, &frame.rgb));
                errors.check(recorder.log_depth(&time, &frame.depth));
                if let Ok(Some(ids)) = sequence.instance_image(k) {
                    errors.check(recorder.log_instances(&time, &ids));
                }
            }
        }
    }
    bar.finish_and_clear();
    let map = builder.finish();
    errors.check(recorder.log_semantic_map(&map, None));
    write_outputs(out, &map, &trajectory)?;
    if let Some(truth) = sequence.groundtruth() {
        // Evaluation only (`gst map-eval` aligns the map with it); mapping never reads it.
        write_trajectory_tum(&out.join("groundtruth.tum"), truth)?;
    }
    let frames = sequence.len();
    let run = MapRun {
        input: input.into(),
        poses,
        trajectory_file: trajectory_file.map(Path::to_path_buf),
        perception,
        frames,
        slam_frames,
        slam_ms_per_frame: slam_ms,
        slam_wall_ms_per_frame: slam_wall_ms,
        map_ms_per_frame: 1e3 * map.stats.integrate_seconds / frames.max(1) as f64,
        perception_ms_per_frame: 1e3 * perception_seconds / frames.max(1) as f64,
        finish_seconds: map.stats.finish_seconds,
        rooms: map.rooms.len(),
        doors: map.doors.len(),
        objects: map.objects.len(),
    };
    gst_io::write_json(&out.join("run.json"), &run)?;
    Ok(run)
}

/// The map of a bag (`.mcap`, rosbag2 folder, ROS 1 `.bag`): SLAM over the bag's frames (or the poses of
/// `trajectory_file`), then a second pass over the same frames with those poses, matched by timestamp. A
/// bag has no ground truth and no instance masks, so `--poses groundtruth` and oracle perception are refused.
#[allow(clippy::too_many_arguments)]
pub fn build_bag_map(
    input: &Path,
    out: &Path,
    poses: PoseSource,
    trajectory_file: Option<&Path>,
    perception: PerceptionKind,
    topics: &gst_bag::TopicChoice,
    config: &MapConfig,
    recording: &Recording<'_>,
) -> Result<MapRun> {
    config.validate()?;
    if poses == PoseSource::Groundtruth && trajectory_file.is_none() {
        bail!("{}: a bag has no ground-truth poses; use --poses slam or --trajectory FILE", input.display());
    }
    if perception == PerceptionKind::Oracle {
        bail!(
            "{}: oracle perception needs a generated episode's instance masks, which a bag has not",
            input.display()
        );
    }
    let recorder = recording.recorder;
    let mut errors = RecordingErrors::default();
    let options = SourceOptions::default();
    let (trajectory, slam_ms, slam_wall_ms, slam_frames) = match trajectory_file {
        Some(path) => {
            let trajectory = read_trajectory_tum(path)?;
            let frames = trajectory.len();
            (trajectory, 0.0, 0.0, frames)
        }
        None => {
            let mut source = gst_bag::open_source(input, &options, topics)?;
            gst_bag::require_depth(source.as_ref(), "gst map")?;
            let bar = crate::progress::bar(source.len().unwrap_or(0) as u64, "slam");
            let output = gst_slam::run_slam(source.as_mut(), &SlamConfig::default(), &mut |_| bar.inc(1))
                .with_context(|| format!("SLAM on {}", input.display()))?;
            bar.finish_and_clear();
            errors.check(recorder.log_map_points(output.map_points.iter().map(|p| p.position)));
            let frames = output.stats.frames.max(1) as f64;
            (
                output.trajectory,
                1e3 * output.stats.tracking_seconds / frames,
                1e3 * output.stats.wall_seconds / frames,
                output.stats.frames,
            )
        }
    };
    let mut source = gst_bag::open_source(input, &options, topics)?;
    gst_bag::require_depth(source.as_ref(), "gst map")?;
    let camera = source.calibration().camera;
    let known: Vec<Pose3> = trajectory.poses().iter().map(|p| p.world_from_camera).collect();
    if known.is_empty() {
        tracing::warn!("{}: no frame has a pose; the map will be empty", input.display());
    }
    let map_from_world = gravity_alignment(&known);
    if recorder.is_on() {
        errors.check(recorder.log_trajectory(TrajectoryKind::Estimate, &trajectory));
        errors.check(recorder.log_world_from_slam(&map_from_world));
        errors.check(recorder.log_camera_model(&camera));
    }
    let stamps: Vec<f64> = trajectory.poses().iter().map(|p| p.timestamp_s).collect();
    let pose_at = |timestamp_s: f64| {
        let k = stamps.partition_point(|t| *t < timestamp_s - 1e-4);
        trajectory
            .poses()
            .get(k)
            .filter(|p| (p.timestamp_s - timestamp_s).abs() < 1e-3)
            .map(|p| p.world_from_camera)
    };
    let mut builder = MapBuilder::new(config.clone(), camera, map_from_world)?;
    let bar = crate::progress::bar(source.len().unwrap_or(0) as u64, "map");
    let stride = config.frame_stride.max(1);
    let mut frames = 0usize;
    while let Some(frame) = source.next_frame()? {
        bar.inc(1);
        frames += 1;
        let Some(pose) = pose_at(frame.timestamp_s) else { continue };
        if frame.index % stride != 0 {
            continue;
        }
        builder.add_frame(&PosedFrame {
            index: frame.index,
            timestamp_s: frame.timestamp_s,
            world_from_camera: pose,
            depth: frame.depth.as_ref(),
            rgb: Some(&frame.rgb),
            observations: &[],
        })?;
        if recorder.is_on() {
            let time = FrameTime::new(frame.index, frame.timestamp_s);
            errors.check(recorder.log_camera_pose(&time, &pose));
            if recording.images {
                errors.check(recorder.log_rgb(&time, &frame.rgb));
                if let Some(depth) = &frame.depth {
                    errors.check(recorder.log_depth(&time, depth));
                }
            }
        }
    }
    bar.finish_and_clear();
    let map = builder.finish();
    errors.check(recorder.log_semantic_map(&map, None));
    write_outputs(out, &map, &trajectory)?;
    let run = MapRun {
        input: input.into(),
        poses,
        trajectory_file: trajectory_file.map(Path::to_path_buf),
        perception,
        frames,
        slam_frames,
        slam_ms_per_frame: slam_ms,
        slam_wall_ms_per_frame: slam_wall_ms,
        map_ms_per_frame: 1e3 * map.stats.integrate_seconds / frames.max(1) as f64,
        perception_ms_per_frame: 0.0,
        finish_seconds: map.stats.finish_seconds,
        rooms: map.rooms.len(),
        doors: map.doors.len(),
        objects: map.objects.len(),
    };
    gst_io::write_json(&out.join("run.json"), &run)?;
    Ok(run)
}

/// Records the poses the map is built from as the estimate, the recording's ground truth when it has one,
/// and where the poses' world sits: on the ground truth (aligned, or the same world for ground-truth poses)
/// or, without ground truth, turned z up by the map's gravity alignment.
fn record_poses(
    recorder: &Recorder,
    sequence: &TumSequence,
    trajectory: &Trajectory,
    poses: PoseSource,
    map_from_world: Pose3,
    errors: &mut RecordingErrors,
) {
    errors.check(recorder.log_trajectory(TrajectoryKind::Estimate, trajectory));
    let world_from_slam = match (sequence.groundtruth(), poses) {
        (Some(_), PoseSource::Groundtruth) => Pose3::identity(),
        (Some(truth), PoseSource::Slam) => {
            let options = gst_slam::metrics::EvaluationOptions::default();
            match gst_slam::metrics::evaluate(truth, trajectory, &options).map(|e| e.alignment) {
                Ok(Some(alignment)) => crate::slam_cmd::alignment_pose(&alignment),
                _ => map_from_world,
            }
        }
        (None, _) => map_from_world,
    };
    if let Some(truth) = sequence.groundtruth() {
        errors.check(recorder.log_trajectory(TrajectoryKind::GroundTruth, truth));
    }
    errors.check(recorder.log_world_from_slam(&world_from_slam));
}

/// Writes the map directory.
pub fn write_outputs(out: &Path, map: &SemanticMap, trajectory: &Trajectory) -> Result<()> {
    map.save(out)?;
    let view = TopdownView::fit(map, TOPDOWN_SIZE.0, TOPDOWN_SIZE.1);
    gst_io::write_gray_png(&out.join("occupancy.png"), &render_binary(map, &view))?;
    gst_io::write_rgb_png(&out.join("semantic.png"), &render_semantic(map, &view))?;
    gst_io::write_json(&out.join("view.json"), &view)?;
    let trajectory =
        if trajectory.is_empty() { Trajectory::new(Vec::<TimedPose>::new())? } else { trajectory.clone() };
    write_trajectory_tum(&out.join("trajectory.tum"), &trajectory)?;
    Ok(())
}
