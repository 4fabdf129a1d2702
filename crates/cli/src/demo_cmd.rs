//! `gst demo`, what `make demo` runs: the whole pipeline on a small generated benchmark. It generates two
//! houses with short explorations and their GST questions, runs SLAM and the semantic map on each
//! exploration (the map answerer's cache), answers every question by geometry on the map (`map-slam`:
//! SLAM poses, red-box perception, no ground truth), and prints the paper's table with our row, the SLAM
//! trajectory error of each scene, and where the Rerun recording went.
//!
//! Every stage is resumable: a second run reuses the generated data, the maps and the predictions.

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
