//! `gst bench slam`: trajectory accuracy, tracking rate and peak memory of our RGB-D SLAM on generated
//! explorations, with and without the depth-noise model, and in the same run Open3D's RGB-D odometry chained
//! frame to frame (the peer, `python/bench_open3d_odometry.py`) on the very same files.
//!
//! Layout of `--out`:
//! ```text
//! data/                   `gst generate` output, bench split, 2–3 minute explorations (reused when present)
//! data/bench-slam.json    the seed and generator settings of data/ (a mismatch is an error, not a rebuild)
//! noisy/<scene>/          the TUM export with its depth through `DepthNoise` (colour hard-linked; reused)
//! runs/<scene>/<depth>/   gst.txt, gst.json, open3d.txt, open3d.json (redone on every run)
//! bench.json              the report
//! ```
//! Both systems read the same PNG files, so they see identical noisy depth. Each of our runs is a child
//! process (`gst bench slam-run`, hidden): its peak resident set (VmHWM from /proc/self/status, read at the
//! end of the run) belongs to that sequence alone, like the peer's `ru_maxrss`, and a SLAM that fails or
//! crashes becomes a row marked failed instead of ending the benchmark. Our rate is end to end: frames /
//! `SlamStats::wall_seconds`, reading and decoding the PNGs included (three pipelined threads); the peer's
//! excludes decoding (it times RGBDImage creation and odometry), which favours the peer.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use gst_bench::generate::{GenerateConfig, run_job, scene_jobs, scene_seed, write_manifest};
use gst_core::{Calibration, RgbdFrame};
use gst_io::tum::TUM_DEFAULT_DEPTH_SCALE;
use gst_io::{FrameSource, IoError, SourceKind, TumSequence, read_depth_png, read_trajectory_tum};
use gst_sim::explore::ExploreConfig;
use gst_sim::noise::{DepthNoise, DepthSensor, SensorProfile};
use gst_slam::metrics::{EvaluationOptions, TrajectoryEvaluation, evaluate};
use gst_slam::{Slam, SlamConfig, SlamStats, run_pipelined};

use crate::progress;
use crate::scene_cmd::FurnitureArgs;

/// Salt of the depth-noise seeds, so that they differ from the scene seeds of the same run.
const NOISE_SEED_SALT: u64 = 0xD3F7_0015_E5EE_D000;
/// RPE is measured over this many seconds of motion (TUM's convention: drift per second).
const RPE_WINDOW_S: f64 = 1.0;
/// The issue's targets: ATE RMSE without and with depth noise, and the tracking rate.
const TARGET_ATE_CLEAN_M: f64 = 0.01;
const TARGET_ATE_NOISY_M: f64 = 0.03;
const TARGET_FPS: f64 = 30.0;

#[derive(Debug, clap::Args)]
pub struct SlamBenchArgs {
    /// Generated scenes to run on (each with and without depth noise).
    #[arg(long, default_value_t = 3)]
    pub scenes: usize,
    /// Seed of the generated scenes and of the depth noise.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output directory: generated data and noisy copies are cached there and reused.
    #[arg(long, default_value = "out/bench-slam")]
    pub out: PathBuf,
    /// Exploration duration range of the generated scenes, seconds.
    #[arg(long, num_args = 2, value_names = ["MIN", "MAX"], default_values_t = [120.0, 180.0])]
    pub duration_s: Vec<f64>,
    /// Python with open3d for the peer (`make setup-bench` installs it).
    #[arg(long, default_value = ".venv/bin/python")]
    pub python: PathBuf,
    /// Measure our SLAM only.
    #[arg(long)]
    pub no_peer: bool,
    /// Only the first N frames of each sequence (quick checks; the report says so).
    #[arg(long)]
    pub max_frames: Option<usize>,
    /// Print the report as JSON instead of a table (bench.json is written either way).
    #[arg(long)]
    pub json: bool,
    /// Our SLAM's settings as JSON (a `SlamConfig`, as `gst slam --config`; missing fields take their
    /// defaults): to compare settings on the same files. The runs and bench.json in --out are replaced.
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub furniture: FurnitureArgs,
}

/// The child process of `gst bench slam`: our SLAM over one sequence.
#[derive(Debug, clap::Args)]
pub struct SlamRunArgs {
    /// A frame source (TUM RGB-D directory).
    #[arg(long)]
    pub sequence: PathBuf,
    /// Output TUM trajectory (camera-to-world).
    #[arg(long)]
    pub trajectory: PathBuf,
    /// Output JSON report ([`OursRun`]); written also when SLAM fails.
    #[arg(long)]
    pub report: PathBuf,
    #[arg(long)]
    pub max_frames: Option<usize>,
    /// Our SLAM's settings (JSON `SlamConfig`); default settings without it.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// What one run of our SLAM reports (the child's report file).
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
enum OursRun {
    Done {
        stats: SlamStats,
        tracking_fps: f64,
        /// VmHWM of the child process; `None` where /proc is not available.
        peak_rss_mb: Option<f64>,
        threads: usize,
        /// The child's memory and keyframes every minute of the recording ([`MEMORY_EVERY_S`]).
        #[serde(default)]
        memory: Vec<MemoryPoint>,
    },
    Failed {
        error: String,
    },
}

/// How often the child records its memory, seconds of the recording.
const MEMORY_EVERY_S: f64 = 60.0;

/// The child's memory after some frames: whether it stays bounded on long sequences.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct MemoryPoint {
    frames: usize,
    /// Seconds of the recording (timestamp of the frame since the first).
    seconds: f64,
    keyframes: usize,
    /// Resident set (VmRSS) and its peak so far (VmHWM), MiB.
    rss_mb: f64,
    peak_rss_mb: f64,
}

/// What `bench_open3d_odometry.py` reports.
#[derive(Debug, Serialize, Deserialize)]
struct PeerRun {
    frames: usize,
    odometry_failures: usize,
    tracking_seconds: f64,
    tracking_fps: f64,
    total_seconds: f64,
    peak_rss_mb: f64,
    threads: Option<usize>,
    open3d_version: String,
    settings: serde_json::Value,
}

/// One system on one sequence.
#[derive(Debug, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
enum Measurement {
    Measured {
        /// Poses the system returned.
        poses: usize,
        tracking_fps: f64,
        peak_rss_mb: Option<f64>,
        evaluation: Box<TrajectoryEvaluation>,
        /// The system's own report (our `SlamStats`, or the peer's JSON).
        details: serde_json::Value,
        /// Ours: memory and keyframes every minute of the recording.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        memory: Vec<MemoryPoint>,
    },
    Failed {
        error: String,
    },
}

impl Measurement {
    fn evaluation(&self) -> Option<&TrajectoryEvaluation> {
        match self {
            Self::Measured { evaluation, .. } => Some(evaluation),
            Self::Failed { .. } => None,
        }
    }

    fn ate_rmse_m(&self) -> Option<f64> {
        self.evaluation().map(|e| e.ate.translation_m.rmse)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum DepthKind {
    /// The rendered depth as exported (exact up to the PNG's 0.2 mm step).
    Clean,
    /// Through `DepthNoise::default()`.
    Noisy,
}

impl DepthKind {
    fn name(self) -> &'static str {
        match self {
            Self::Clean => "clean",
            Self::Noisy => "noisy",
        }
    }
}

#[derive(Debug, Serialize)]
struct Row {
    scene: String,
    depth: DepthKind,
    sequence: PathBuf,
    frames: usize,
    duration_s: f64,
    path_length_m: f64,
    ours: Measurement,
    open3d: Option<Measurement>,
    /// Our ATE RMSE over the peer's (below 1: ours is better).
    ate_ratio_ours_over_open3d: Option<f64>,
}

#[derive(Debug, Serialize)]
struct Report {
    seed: u64,
    scenes: usize,
    max_frames: Option<usize>,
    fps: f64,
    width: u32,
    height: u32,
    rpe_delta_frames: usize,
    depth_noise: DepthNoise,
    slam_config: SlamConfig,
    rows: Vec<Row>,
}

/// Settings of the cached data, checked on reuse.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct DataRecord {
    seed: u64,
    config: GenerateConfig,
}

pub fn run(args: &SlamBenchArgs) -> Result<()> {
    if args.scenes == 0 {
        bail!("--scenes must be positive");
    }
    if args.max_frames == Some(0) {
        bail!("--max-frames must be positive");
    }
    let config = generate_config(args)?;
    let noise = DepthNoise::default();
    noise.validate().context("invalid depth noise")?;
    if !args.no_peer {
        check_python(&args.python)?;
    }

    let data = args.out.join("data");
    let scenes = generate_data(args, &config, &data)?;
    let fps = config.explore.fps;
    let rpe_delta_frames = ((fps * RPE_WINDOW_S).round() as usize).max(1);
    let options = EvaluationOptions { rpe_delta_frames, ..EvaluationOptions::default() };
    let slam_config = crate::slam_cmd::read_config(args.config.as_deref())?;

    let mut rows = Vec::new();
    let mut calibration: Option<Calibration> = None;
    let total = scenes.len() * 2;
    for (index, scene) in scenes.iter().enumerate() {
        let clean_dir = data.join("bench").join("tum").join(scene);
        let noisy_dir = args.out.join("noisy").join(scene);
        let noise_seed = scene_seed(args.seed ^ NOISE_SEED_SALT, index);
        write_noisy_copy(&clean_dir, &noisy_dir, &noise, noise_seed)?;
        for (depth, dir) in [(DepthKind::Clean, &clean_dir), (DepthKind::Noisy, &noisy_dir)] {
            eprintln!("[{}/{total}] {scene}, {} depth", rows.len() + 1, depth.name());
            let sequence = TumSequence::open(dir, None)?;
            let sequence_calibration = sequence
                .calibration()
                .cloned()
                .with_context(|| format!("{} has no calibration.yaml", dir.display()))?;
            let groundtruth = read_trajectory_tum(&dir.join("groundtruth.txt"))
                .with_context(|| format!("reading the ground truth of {}", dir.display()))?;
            let frames = args.max_frames.map_or(sequence.len(), |n| n.min(sequence.len()));
            let groundtruth =
                gst_core::Trajectory::new(groundtruth.poses()[..frames.min(groundtruth.len())].to_vec())
                    .context("truncating the ground truth")?;
            let run_dir = args.out.join("runs").join(scene).join(depth.name());
            std::fs::create_dir_all(&run_dir)
                .with_context(|| format!("cannot create {}", run_dir.display()))?;

            let ours =
                run_ours(dir, &run_dir, args.max_frames, args.config.as_deref(), &groundtruth, &options);
            let open3d = (!args.no_peer).then(|| {
                run_peer(
                    &args.python,
                    dir,
                    &run_dir,
                    &sequence_calibration,
                    args.max_frames,
                    &groundtruth,
                    &options,
                )
            });
            let ate_ratio_ours_over_open3d =
                match (ours.ate_rmse_m(), open3d.as_ref().and_then(Measurement::ate_rmse_m)) {
                    (Some(a), Some(b)) if b > 0.0 => Some(a / b),
                    _ => None,
                };
            rows.push(Row {
                scene: scene.clone(),
                depth,
                sequence: dir.clone(),
                frames,
                duration_s: groundtruth.duration_s(),
                path_length_m: groundtruth.path_length_m(),
                ours,
                open3d,
                ate_ratio_ours_over_open3d,
            });
            calibration = Some(sequence_calibration);
        }
    }
    let camera = calibration.map(|c| c.camera).unwrap_or_else(gst_core::PinholeCamera::gst_benchmark);
    let report = Report {
        seed: args.seed,
        scenes: scenes.len(),
        max_frames: args.max_frames,
        fps,
        width: camera.width,
        height: camera.height,
        rpe_delta_frames,
        depth_noise: noise,
        slam_config,
        rows,
    };
    let report_path = args.out.join("bench.json");
    gst_io::write_json(&report_path, &report)?;
    let text = if args.json {
        let mut json = serde_json::to_string_pretty(&report).context("serialising the report")?;
        json.push('\n');
        json
    } else {
        table(&report, &report_path)
    };
    #[allow(clippy::print_stdout)] // the command's report
    {
        print!("{text}");
    }
    Ok(())
}

fn generate_config(args: &SlamBenchArgs) -> Result<GenerateConfig> {
    let [min_s, max_s] = args.duration_s[..] else {
        bail!("--duration-s takes two values, MIN and MAX");
    };
    let config = GenerateConfig {
        explore: ExploreConfig { duration_s: [min_s, max_s], ..ExploreConfig::default() },
        // Only the exploration's TUM export is used: skip the marked videos of the questions.
        visual_targets: 0,
        trajectory_questions: 0,
        // The bench adds its own noise to exact depth (`--noise`), so the export must be exact.
        depth_sensor: DepthSensor::Profile(SensorProfile::Perfect),
        ..GenerateConfig::default()
    };
    config.scene.validate().context("invalid scene settings")?;
    config.explore.validate().context("invalid exploration settings")?;
    Ok(config)
}

/// Generates (or reuses) the bench scenes; returns their names in order.
fn generate_data(args: &SlamBenchArgs, config: &GenerateConfig, data: &Path) -> Result<Vec<String>> {
    let record = DataRecord { seed: args.seed, config: config.clone() };
    let record_path = data.join("bench-slam.json");
    if let Ok(text) = std::fs::read_to_string(&record_path) {
        let cached: DataRecord =
            serde_json::from_str(&text).with_context(|| format!("malformed {}", record_path.display()))?;
        if cached != record {
            bail!(
                "{} was generated with another seed or other settings; delete it or choose another --out",
                data.display()
            );
        }
    } else {
        gst_io::write_json(&record_path, &record)?;
    }
    let library = args.furniture.library()?;
    let jobs = scene_jobs(args.scenes, 0, args.seed);
    let pending = jobs
        .iter()
        .filter(|job| !data.join("bench").join("scenes").join(&job.name).join("done.json").is_file())
        .count();
    if pending > 0 {
        eprintln!("generating {pending} scene(s) in {} (about a minute each)", data.display());
    }
    let bar = progress::bar(jobs.len() as u64, "scenes");
    let records: Vec<_> = jobs
        .par_iter()
        .map(|job| {
            let record = run_job(data, job, config, &library)
                .with_context(|| format!("generating {}/{}", job.split, job.name));
            bar.inc(1);
            record.map(|r| (job.clone(), r))
        })
        .collect::<Result<_>>()?;
    bar.finish_and_clear();
    write_manifest(data, args.seed, config, &library, &records)?;
    Ok(jobs.into_iter().map(|job| job.name).collect())
}

/// Copies a TUM export with its depth through the noise model: colour images are hard-linked (copied where
/// links fail), depth re-encoded at the same scale; frame `k` draws from its own seeded stream, so frames
/// are processed in parallel with deterministic output. `rgb.txt` is written last: a copy with it is
/// complete, and reused when `noise.json` matches.
fn write_noisy_copy(clean: &Path, noisy: &Path, noise: &DepthNoise, seed: u64) -> Result<()> {
    #[derive(PartialEq, Serialize, Deserialize)]
    struct NoiseRecord {
        seed: u64,
        noise: DepthNoise,
    }
    let record = NoiseRecord { seed, noise: noise.clone() };
    let record_path = noisy.join("noise.json");
    if noisy.join("rgb.txt").is_file()
        && let Ok(text) = std::fs::read_to_string(&record_path)
        && serde_json::from_str::<NoiseRecord>(&text).is_ok_and(|cached| cached == record)
    {
        return Ok(());
    }
    if noisy.exists() {
        std::fs::remove_dir_all(noisy).with_context(|| format!("cannot clear {}", noisy.display()))?;
    }
    let sequence = TumSequence::open(clean, None)?;
    let depth_scale = sequence.depth_scale();
    for sub in ["rgb", "depth"] {
        let dir = noisy.join(sub);
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    eprintln!("writing noisy depth: {}", noisy.display());
    let bar = progress::bar(sequence.len() as u64, "noisy depth");
    sequence.entries().par_iter().enumerate().try_for_each(|(k, entry)| -> Result<()> {
        let relative = |path: &Path| -> Result<PathBuf> {
            Ok(path
                .strip_prefix(clean)
                .with_context(|| format!("{} is outside {}", path.display(), clean.display()))?
                .to_path_buf())
        };
        let rgb_target = noisy.join(relative(&entry.rgb_path)?);
        if std::fs::hard_link(&entry.rgb_path, &rgb_target).is_err() {
            std::fs::copy(&entry.rgb_path, &rgb_target)
                .with_context(|| format!("cannot copy {}", entry.rgb_path.display()))?;
        }
        let depth = read_depth_png(&entry.depth_path, depth_scale)?;
        let mut rng = ChaCha8Rng::seed_from_u64(scene_seed(seed, k));
        let noisy_depth = noise.apply(&depth, &mut rng);
        gst_io::write_depth_png(&noisy.join(relative(&entry.depth_path)?), &noisy_depth, depth_scale)?;
        bar.inc(1);
        Ok(())
    })?;
    bar.finish_and_clear();
    gst_io::write_json(&record_path, &record)?;
    for name in ["calibration.yaml", "groundtruth.txt", "depth.txt", "rgb.txt"] {
        let text = std::fs::read(clean.join(name))
            .with_context(|| format!("cannot read {}", clean.join(name).display()))?;
        gst_io::atomic_write(&noisy.join(name), &text)?;
    }
    Ok(())
}

fn check_python(python: &Path) -> Result<()> {
    let output = Command::new(python).args(["-c", "import open3d"]).output();
    match output {
        Ok(output) if output.status.success() => Ok(()),
        Ok(_) => bail!(
            "{} cannot import open3d, the peer of this benchmark: run `make setup-bench` (or pass --python, or \
             --no-peer)",
            python.display()
        ),
        Err(error) => bail!(
            "cannot run {} ({error}): run `make setup-bench` to create the virtualenv with open3d (or pass \
             --python, or --no-peer)",
            python.display()
        ),
    }
}

/// Our SLAM in a child process (`gst bench slam-run`), evaluated against the ground truth.
fn run_ours(
    sequence: &Path,
    run_dir: &Path,
    max_frames: Option<usize>,
    config: Option<&Path>,
    groundtruth: &gst_core::Trajectory,
    options: &EvaluationOptions,
) -> Measurement {
    let trajectory = run_dir.join("gst.txt");
    let report = run_dir.join("gst.json");
    let result = (|| -> Result<Measurement> {
        for path in [&trajectory, &report] {
            remove_stale(path)?;
        }
        let exe = std::env::current_exe().context("cannot find the gst executable")?;
        let mut command = Command::new(&exe);
        command.args(["bench", "slam-run", "--sequence"]).arg(sequence);
        command.arg("--trajectory").arg(&trajectory).arg("--report").arg(&report);
        if let Some(n) = max_frames {
            command.arg("--max-frames").arg(n.to_string());
        }
        if let Some(config) = config {
            command.arg("--config").arg(config);
        }
        let status = command.status().with_context(|| format!("cannot run {}", exe.display()))?;
        if !status.success() {
            bail!("our SLAM process ended with {status}");
        }
        let run: OursRun = read_json(&report)?;
        match run {
            OursRun::Failed { error } => Ok(Measurement::Failed { error }),
            OursRun::Done { stats, tracking_fps, peak_rss_mb, threads, memory } => {
                let estimate = read_trajectory_tum(&trajectory).context("reading our trajectory")?;
                let evaluation =
                    evaluate(groundtruth, &estimate, options).context("evaluating our trajectory")?;
                Ok(Measurement::Measured {
                    poses: estimate.len(),
                    tracking_fps,
                    peak_rss_mb,
                    evaluation: Box::new(evaluation),
                    details: serde_json::json!({ "stats": stats, "threads": threads }),
                    memory,
                })
            }
        }
    })();
    result.unwrap_or_else(|error| Measurement::Failed { error: format!("{error:#}") })
}

/// The Open3D peer on the same files, evaluated against the ground truth.
fn run_peer(
    python: &Path,
    sequence: &Path,
    run_dir: &Path,
    calibration: &Calibration,
    max_frames: Option<usize>,
    groundtruth: &gst_core::Trajectory,
    options: &EvaluationOptions,
) -> Measurement {
    let trajectory = run_dir.join("open3d.txt");
    let report = run_dir.join("open3d.json");
    let result = (|| -> Result<Measurement> {
        for path in [&trajectory, &report] {
            remove_stale(path)?;
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python/bench_open3d_odometry.py");
        let camera = &calibration.camera;
        let mut command = Command::new(python);
        command.arg(&script).arg("--dir").arg(sequence);
        command.arg("--trajectory").arg(&trajectory).arg("--report").arg(&report);
        command.arg("--intrinsics").args([camera.fx, camera.fy, camera.cx, camera.cy].map(|v| v.to_string()));
        command.arg("--size").args([camera.width, camera.height].map(|v| v.to_string()));
        let depth_scale = calibration.depth_scale.unwrap_or(TUM_DEFAULT_DEPTH_SCALE);
        command.arg("--depth-scale").arg(depth_scale.to_string());
        if let Some(n) = max_frames {
            command.arg("--max-frames").arg(n.to_string());
        }
        let status = command
            .status()
            .with_context(|| format!("cannot run {} {}", python.display(), script.display()))?;
        if !status.success() {
            bail!("the Open3D peer ended with {status}");
        }
        let run: PeerRun = read_json(&report)?;
        let estimate = read_trajectory_tum(&trajectory).context("reading the peer's trajectory")?;
        let evaluation =
            evaluate(groundtruth, &estimate, options).context("evaluating the peer's trajectory")?;
        Ok(Measurement::Measured {
            poses: estimate.len(),
            tracking_fps: run.tracking_fps,
            peak_rss_mb: Some(run.peak_rss_mb),
            evaluation: Box::new(evaluation),
            details: serde_json::to_value(&run).context("serialising the peer's report")?,
            memory: Vec::new(),
        })
    })();
    result.unwrap_or_else(|error| Measurement::Failed { error: format!("{error:#}") })
}

fn remove_stale(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            Err(error).with_context(|| format!("cannot remove {}", path.display()))
        }
        _ => Ok(()),
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("malformed report {}", path.display()))
}

/// `gst bench slam-run`: runs our SLAM over one sequence and writes the trajectory and an [`OursRun`]
/// report. A SLAM error is recorded in the report (the process still succeeds), so the parent can tell it
/// from a crash.
pub fn run_child(args: &SlamRunArgs) -> Result<()> {
    let outcome = match track_sequence(args) {
        Ok(outcome) => outcome,
        Err(error) => OursRun::Failed { error: format!("{error:#}") },
    };
    gst_io::write_json(&args.report, &outcome)?;
    Ok(())
}

fn track_sequence(args: &SlamRunArgs) -> Result<OursRun> {
    let source = gst_io::open_source(&args.sequence, None)?;
    let mut source = FirstFrames { inner: source, remaining: args.max_frames.unwrap_or(usize::MAX) };
    let frames = source.len().unwrap_or(0);
    let bar = progress::bar(frames as u64, "our SLAM");
    let config = crate::slam_cmd::read_config(args.config.as_deref())?;
    let mut slam = Slam::new(source.calibration(), config)?;
    let (mut keyframes, mut first_s, mut memory) = (0, None, Vec::new());
    run_pipelined(&mut source, &mut slam, &mut |info, result| {
        bar.inc(1);
        keyframes += usize::from(result.keyframe);
        let seconds = info.timestamp_s - *first_s.get_or_insert(info.timestamp_s);
        let due = (memory.len() + 1) as f64 * MEMORY_EVERY_S;
        if seconds >= due
            && let Some((rss_mb, peak_rss_mb)) = memory_mb()
        {
            memory.push(MemoryPoint { frames: info.index + 1, seconds, keyframes, rss_mb, peak_rss_mb });
        }
    })?;
    let output = slam.finish()?;
    bar.finish_and_clear();
    gst_io::write_trajectory_tum(&args.trajectory, &output.trajectory)?;
    let stats = output.stats;
    let tracking_fps = if stats.wall_seconds > 0.0 { stats.frames as f64 / stats.wall_seconds } else { 0.0 };
    Ok(OursRun::Done {
        stats,
        tracking_fps,
        peak_rss_mb: memory_mb().map(|(_, peak)| peak),
        threads: rayon::current_num_threads(),
        memory,
    })
}

/// This process's resident set size and its peak (VmRSS, VmHWM), MiB; `None` without /proc.
fn memory_mb() -> Option<(f64, f64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| -> Option<f64> {
        let line = status.lines().find(|line| line.starts_with(name))?;
        let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib / 1024.0)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// The first `remaining` frames of a source.
struct FirstFrames {
    inner: Box<dyn FrameSource + Send>,
    remaining: usize,
}

impl std::fmt::Debug for FirstFrames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FirstFrames")
            .field("source", &self.inner.name())
            .field("remaining", &self.remaining)
            .finish()
    }
}

impl FrameSource for FirstFrames {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn kind(&self) -> SourceKind {
        self.inner.kind()
    }
    fn calibration(&self) -> &Calibration {
        self.inner.calibration()
    }
    fn has_depth(&self) -> bool {
        self.inner.has_depth()
    }
    fn len(&self) -> Option<usize> {
        self.inner.len().map(|n| n.min(self.remaining))
    }
    fn next_frame(&mut self) -> Result<Option<RgbdFrame>, IoError> {
        if self.remaining == 0 {
            return Ok(None);
        }
        self.remaining -= 1;
        self.inner.next_frame()
    }
}

fn table(report: &Report, report_path: &Path) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "SLAM bench: {} scenes (seed {}), {}x{} at {} fps, clean and noisy depth; RPE over {} frames ({} s)",
        report.scenes,
        report.seed,
        report.width,
        report.height,
        report.fps,
        report.rpe_delta_frames,
        report.rpe_delta_frames as f64 / report.fps
    );
    if let Some(n) = report.max_frames {
        let _ = writeln!(out, "(only the first {n} frames of each sequence)");
    }
    let _ = writeln!(
        out,
        "{:<10} {:<6} {:>6} | {:>8} {:>8} {:>7} {:>7} {:>7} | {:>8} {:>8} {:>7} {:>7} {:>7} | {:>6}",
        "", "", "", "gst", "", "", "", "", "Open3D", "", "", "", "", "ATE"
    );
    let _ = writeln!(
        out,
        "{:<10} {:<6} {:>6} | {:>8} {:>8} {:>7} {:>7} {:>7} | {:>8} {:>8} {:>7} {:>7} {:>7} | {:>6}",
        "scene",
        "depth",
        "frames",
        "ATE cm",
        "RPE cm",
        "RPE deg",
        "fps",
        "peak MB",
        "ATE cm",
        "RPE cm",
        "RPE deg",
        "fps",
        "peak MB",
        "ratio"
    );
    let mut failures = Vec::new();
    for row in &report.rows {
        let _ = write!(out, "{:<10} {:<6} {:>6} |", row.scene, row.depth.name(), row.frames);
        let mut cells = |name: &str, m: Option<&Measurement>| match m {
            Some(Measurement::Measured { tracking_fps, peak_rss_mb, evaluation, .. }) => {
                let _ = write!(
                    out,
                    " {:>8.2} {:>8.2} {:>7.3} {:>7.1} {:>7} |",
                    evaluation.ate.translation_m.rmse * 100.0,
                    evaluation.rpe.translation_m.rmse * 100.0,
                    evaluation.rpe.rotation_deg.rmse,
                    tracking_fps,
                    peak_rss_mb.map_or("-".to_string(), |mb| format!("{mb:.0}"))
                );
            }
            Some(Measurement::Failed { error }) => {
                let _ = write!(out, " {:>41} |", "failed");
                failures.push(format!("{} {} {name}: failed: {error}", row.scene, row.depth.name()));
            }
            None => {
                let _ = write!(out, " {:>41} |", "not run");
            }
        };
        cells("gst", Some(&row.ours));
        cells("Open3D", row.open3d.as_ref());
        let _ = writeln!(
            out,
            " {:>6}",
            row.ate_ratio_ours_over_open3d.map_or("-".to_string(), |r| format!("{r:.2}"))
        );
    }
    for failure in &failures {
        let _ = writeln!(out, "  {failure}");
    }
    let _ = writeln!(out, "targets (ours), met on how many sequences:");
    let count = |depth: Option<DepthKind>, test: &dyn Fn(&Row) -> bool| {
        let rows: Vec<&Row> = report.rows.iter().filter(|r| depth.is_none_or(|d| r.depth == d)).collect();
        (rows.iter().filter(|r| test(r)).count(), rows.len())
    };
    let ate_below = |limit: f64| move |r: &Row| r.ours.ate_rmse_m().is_some_and(|ate| ate <= limit);
    // The peer's target is counted only where the peer ran (not with --no-peer).
    let peer_ran = report.rows.iter().any(|r| r.open3d.is_some());
    let targets: [(String, Option<(usize, usize)>); 4] = [
        (
            format!("ATE RMSE <= {} cm, clean depth", TARGET_ATE_CLEAN_M * 100.0),
            Some(count(Some(DepthKind::Clean), &ate_below(TARGET_ATE_CLEAN_M))),
        ),
        (
            format!("ATE RMSE <= {} cm, noisy depth", TARGET_ATE_NOISY_M * 100.0),
            Some(count(Some(DepthKind::Noisy), &ate_below(TARGET_ATE_NOISY_M))),
        ),
        (
            "ATE RMSE below Open3D's".to_string(),
            peer_ran.then(|| {
                count(None, &|r: &Row| r.ate_ratio_ours_over_open3d.is_some_and(|ratio| ratio < 1.0))
            }),
        ),
        (
            format!("tracking >= {TARGET_FPS} fps"),
            Some(count(
                None,
                &|r: &Row| matches!(r.ours, Measurement::Measured { tracking_fps, .. } if tracking_fps >= TARGET_FPS),
            )),
        ),
    ];
    for (name, counted) in targets {
        match counted {
            Some((met, of)) => _ = writeln!(out, "  {name:<32} {met}/{of}"),
            None => _ = writeln!(out, "  {name:<32} peer not run"),
        }
    }
    // Long sequences: whether memory stays bounded, minute by minute.
    for row in &report.rows {
        if let Measurement::Measured { memory, .. } = &row.ours
            && memory.len() >= 2
        {
            let points: Vec<String> = memory
                .iter()
                .map(|m| format!("{:.0} min {:.0} MB ({} kf)", m.seconds / 60.0, m.rss_mb, m.keyframes))
                .collect();
            let _ = writeln!(out, "memory, {} {}: {}", row.scene, row.depth.name(), points.join(", "));
        }
    }
    let _ = writeln!(out, "report: {}", report_path.display());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(open3d: Option<Measurement>) -> Report {
        let failed = |error: &str| Measurement::Failed { error: error.to_string() };
        Report {
            seed: 1,
            scenes: 1,
            max_frames: None,
            fps: 10.0,
            width: 640,
            height: 512,
            rpe_delta_frames: 10,
            depth_noise: DepthNoise::default(),
            slam_config: SlamConfig::default(),
            rows: vec![Row {
                scene: "scene_000".into(),
                depth: DepthKind::Clean,
                sequence: PathBuf::from("tum/scene_000"),
                frames: 10,
                duration_s: 1.0,
                path_length_m: 1.0,
                ours: failed("lost"),
                open3d,
                ate_ratio_ours_over_open3d: None,
            }],
        }
    }

    #[test]
    fn the_peer_target_is_counted_only_where_the_peer_ran() {
        let path = Path::new("bench.json");
        let without = table(&report(None), path);
        assert!(without.contains("ATE RMSE below Open3D's          peer not run"), "{without}");
        let with = table(&report(Some(Measurement::Failed { error: "diverged".into() })), path);
        assert!(with.contains("ATE RMSE below Open3D's          0/1"), "{with}");
        assert!(with.contains("ATE RMSE <= 1 cm, clean depth    0/1"), "{with}");
    }
}
