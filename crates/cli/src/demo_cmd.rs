//! `gst demo`, what `make demo` runs: the whole pipeline on a small generated benchmark. It generates two
//! houses with short explorations and their GST questions, runs SLAM and the semantic map on each
//! exploration (the map answerer's cache), answers every question by geometry on the map (`map-slam`:
//! SLAM poses, red-box perception, no ground truth), and prints the paper's table with our row, the SLAM
//! trajectory error of each scene, and where the Rerun recording went.
//!
//! Every stage is resumable: a second run reuses the generated data, the maps and the predictions.
//!
//! `gst demo --input RECORDING` runs on a recording instead (a bag, a TUM directory, an episode): SLAM and
//! the semantic map into `OUT/map`, recorded to `OUT/demo.rrd`; a recording has no questions to answer.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use gst_bench::generate::GenerateConfig;
use gst_sim::explore::ExploreConfig;

use crate::eval_cmd::{PerceptionArg, PosesArg, ViewsArg, evaluate, map_answerer};
use crate::scene_cmd::FurnitureArgs;

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Output directory: data/ (the generated benchmark), eval/ (predictions, scores, maps).
    #[arg(long, default_value = "out/demo")]
    pub out: PathBuf,
    /// Houses to generate.
    #[arg(long, default_value_t = 2)]
    pub scenes: usize,
    /// Seed of the generated benchmark.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Where to write the Rerun recording (default: OUT/demo.rrd).
    #[arg(long)]
    pub rrd: Option<PathBuf>,
    /// Write no Rerun recording.
    #[arg(long, conflicts_with_all = ["rrd", "spawn"])]
    pub no_rrd: bool,
    /// Open the recording in the Rerun viewer (from .venv) when done.
    #[arg(long)]
    pub spawn: bool,
    /// Generation settings as JSON (a `GenerateConfig`), instead of the demo's own (see `demo_config`).
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub furniture: FurnitureArgs,
    /// Run on this recording instead of generated houses: an `.mcap` file, a rosbag2 folder, a ROS 1
    /// `.bag`, a TUM RGB-D directory or an episode (SLAM and the semantic map, recorded; no questions).
    #[arg(long, conflicts_with_all = ["scenes", "seed", "config"])]
    pub input: Option<PathBuf>,
    #[command(flatten)]
    pub topics: crate::input_args::TopicArgs,
}

/// The demo's benchmark: short explorations (40–60 s at 10 fps) and a few questions of every subtask.
pub fn demo_config() -> GenerateConfig {
    GenerateConfig {
        explore: ExploreConfig { duration_s: [40.0, 60.0], ..ExploreConfig::default() },
        current_views: 3,
        visual_targets: 1,
        semantic_targets: 1,
        trajectory_questions: 1,
        topdown_questions: 1,
        ..GenerateConfig::default()
    }
}

pub fn run(args: &DemoArgs) -> Result<()> {
    if args.out.as_os_str().is_empty() {
        bail!("--out must not be empty");
    }
    if let Some(input) = &args.input {
        return run_on_recording(args, input);
    }
    if !args.topics.choice().is_empty() {
        bail!("--rgb-topic, --depth-topic and --info-topic need --input");
    }
    if args.scenes == 0 {
        bail!("--scenes must be at least 1");
    }
    let started = std::time::Instant::now();
    let data = args.out.join("data");
    let library = args.furniture.library()?;
    eprintln!("generating {} houses and their questions in {}", args.scenes, data.display());
    let config = match &args.config {
        Some(path) => crate::generate_cmd::read_config(path)?,
        None => demo_config(),
    };
    crate::generate_cmd::generate(&data, args.scenes, 0, args.seed, &config, &library)?;
    let generated_s = started.elapsed().as_secs_f64();

    let bench = data.join("bench");
    let eval_dir = args.out.join("eval");
    eprintln!("answering with the map baseline (SLAM, semantic map, geometry) in {}", eval_dir.display());
    let answerer = map_answerer(PosesArg::Slam, ViewsArg::Relocalised, PerceptionArg::Marked, None)?;
    let name = gst_baseline::Answerer::name(&answerer);
    let outcome = evaluate(&bench, &eval_dir, &answerer, &name)?;
    let total_s = started.elapsed().as_secs_f64();

    let mut report = outcome.text.clone();
    report.push('\n');
    for line in slam_errors(&bench, &eval_dir.join("cache"))? {
        report.push_str(&line);
        report.push('\n');
    }
    report.push_str(&format!(
        "generation {generated_s:.0} s, SLAM + mapping + answering {:.0} s, total {total_s:.0} s\n",
        total_s - generated_s
    ));
    if !args.no_rrd {
        let rrd = args.rrd.clone().unwrap_or_else(|| args.out.join("demo.rrd"));
        crate::demo_viz::record(&bench, &eval_dir, &rrd, args.spawn)
            .with_context(|| format!("writing the Rerun recording {}", rrd.display()))?;
        report.push_str(&format!(
            "Rerun recording: {} (open it with `gst view {}`)\n",
            rrd.display(),
            rrd.display()
        ));
    }
    #[allow(clippy::print_stdout)] // the command's report
    {
        print!("{report}");
    }
    Ok(())
}

/// `gst demo --input`: SLAM and the semantic map of one recording, recorded like `gst map --rrd`.
fn run_on_recording(args: &DemoArgs, input: &Path) -> Result<()> {
    let started = std::time::Instant::now();
    let rrd = args.rrd.clone().unwrap_or_else(|| args.out.join("demo.rrd"));
    let recorder = if args.no_rrd {
        gst_viz::Recorder::off()
    } else if args.spawn {
        gst_viz::Recorder::spawn("gst demo")?
    } else {
        gst_viz::Recorder::to_file("gst demo", &rrd)
            .with_context(|| format!("creating the Rerun recording {}", rrd.display()))?
    };
    let recorder = recorder.with_images(gst_viz::ImageSettings::compact())?;
    let recording = crate::map_cmd::Recording { recorder: &recorder, images: true };
    let map_dir = args.out.join("map");
    let config = gst_map::MapConfig::default();
    let run = if gst_bag::is_bag_path(input) {
        crate::map_cmd::build_bag_map(
            input,
            &map_dir,
            crate::map_cmd::PoseSource::Slam,
            None,
            crate::map_cmd::PerceptionKind::None,
            &args.topics.choice(),
            &config,
            &recording,
        )?
    } else {
        if !args.topics.choice().is_empty() {
            bail!("{}: --rgb-topic, --depth-topic and --info-topic apply to bags only", input.display());
        }
        crate::map_cmd::build_map_recorded(
            input,
            &map_dir,
            crate::map_cmd::PoseSource::Slam,
            None,
            crate::map_cmd::PerceptionKind::None,
            None,
            &config,
            true,
            &recording,
        )?
    };
    crate::rrd_args::finish(&recorder)?;
    let mut report = format!(
        "{}: {} frames ({} tracked), {} rooms, {} doors; map in {} ({:.0} s)\n",
        input.display(),
        run.frames,
        run.slam_frames,
        run.rooms,
        run.doors,
        map_dir.display(),
        started.elapsed().as_secs_f64()
    );
    if !args.no_rrd && !args.spawn {
        report.push_str(&format!(
            "Rerun recording: {} (open it with `gst view {}`)\n",
            rrd.display(),
            rrd.display()
        ));
    }
    #[allow(clippy::print_stdout)] // the command's report
    {
        print!("{report}");
    }
    Ok(())
}

/// "scene_000: SLAM ATE 0.31 cm over 512 frames" per scene whose SLAM outputs are in the cache (evaluation
/// against the export's ground truth, after answering: nothing here feeds an answer).
fn slam_errors(bench: &Path, cache: &Path) -> Result<Vec<String>> {
    let mut lines = Vec::new();
    let slam_dir = cache.join("slam");
    let Ok(entries) = std::fs::read_dir(&slam_dir) else { return Ok(lines) };
    let mut scenes: Vec<String> =
        entries.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    scenes.sort();
    for scene in scenes {
        let estimate = slam_dir.join(&scene).join("trajectory.tum");
        let truth = gst_baseline::scene_slam::tum_dir(bench, &scene).join("groundtruth.txt");
        if !estimate.is_file() || !truth.is_file() {
            continue;
        }
        let estimate = gst_io::read_trajectory_tum(&estimate)?;
        let truth = gst_io::read_trajectory_tum(&truth)?;
        let evaluation =
            gst_slam::metrics::evaluate(&truth, &estimate, &gst_slam::metrics::EvaluationOptions::default())
                .with_context(|| format!("{scene}: evaluating the SLAM trajectory"))?;
        lines.push(format!(
            "{scene}: SLAM ATE RMSE {:.2} cm over {} frames",
            evaluation.ate.translation_m.rmse * 100.0,
            evaluation.ate.pairs
        ));
    }
    Ok(lines)
}
