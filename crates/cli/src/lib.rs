//! The `gst` command line. Each subcommand parses what the user gave (pure, validated before any I/O),
//! then opens files and builds the objects it needs, ripgrep-style.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bag_cmd;
mod baselines_cmd;
mod bench;
mod bench_bag;
mod bench_map;
mod bench_reloc;
mod bench_slam;
mod demo_cmd;
mod demo_viz;
mod eval_cmd;
mod export_cmd;
mod generate_cmd;
mod input_args;
mod map_cmd;
mod map_eval_cmd;
mod progress;
mod render_cmd;
mod rrd_args;
mod scene_cmd;
mod score_cmd;
mod slam_cmd;
mod train_objects_cmd;
mod traj_eval_cmd;
mod view_cmd;
mod vlm_args;

/// Global spatial awareness from egocentric video: GST-Bench scenes, rendering and the explicit-map baseline.
#[derive(Debug, Parser)]
#[command(name = "gst", version, about, long_about = None)]
struct Cli {
    /// Only print errors.
    #[arg(long, short, global = true)]
    quiet: bool,
    /// More log output (-v info, -vv debug).
    #[arg(long, short, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Generate a furnished multi-room house: scene.json, top-down images and a few egocentric views.
    Scene(scene_cmd::SceneArgs),
    /// Render one view of a scene: rgb.png, depth.png (16-bit, 1 unit = 0.2 mm) and ids.png.
    Render(render_cmd::RenderArgs),
    /// Benchmarks against named peers (`gst bench render`, `gst bench slam`).
    Bench(bench::BenchArgs),
    /// What `make demo` runs: generate 2 houses, SLAM, semantic map, answer every question, print the table.
    Demo(demo_cmd::DemoArgs),
    /// Build a GST-style benchmark: houses, exploration videos, the twelve subtasks (resumable, parallel).
    Generate(generate_cmd::GenerateArgs),
    /// Score predictions (JSON lines of uid and raw model output) on a benchmark split: the paper's table.
    Score(score_cmd::ScoreArgs),
    /// Export a benchmark split for other harnesses: an lmms-eval task folder or a Hugging Face dataset.
    Export(export_cmd::ExportArgs),
    /// Trajectory error of an estimate against ground truth (TUM files): ATE and RPE as evo computes them.
    TrajEval(traj_eval_cmd::TrajEvalArgs),
    /// RGB-D SLAM over a recording: trajectory.tum, keyframes.json, map_points.ply.
    Slam(slam_cmd::SlamArgs),
    /// Answer a benchmark split with a model (resumable), score it and print the paper's table.
    Eval(eval_cmd::EvalArgs),
    /// Every baseline of baselines/*.json on one split, and baselines/RESULTS.md beside the paper's rows.
    Baselines(baselines_cmd::BaselinesArgs),
    /// The semantic map of a recording (SLAM, then occupancy, rooms, room graph, objects): map.json,
    /// scene_graph.json, occupancy.png, semantic.png, trajectory.tum.
    Map(map_cmd::MapArgs),
    /// Evaluate a map against a generated scene's ground truth: occupancy IoU, room MCC and F1, room-graph
    /// edge F1, object centroid error, registration error.
    MapEval(map_eval_cmd::MapEvalArgs),
    /// Robot recordings: `gst bag info FILE` lists a bag's topics and the pairing a run would use.
    Bag(bag_cmd::BagArgs),
    /// Write a recording (a generated episode, a TUM directory) as a ROS 2 MCAP bag that ROS tools,
    /// Foxglove and rosbags read.
    ExportBag(bag_cmd::ExportBagArgs),
    /// Open a Rerun recording (written with `--rrd`) in the viewer.
    View(view_cmd::ViewArgs),
    /// Learn the map baseline's object classifier from GST-Train scenes (models/objects.json).
    TrainObjects(train_objects_cmd::TrainObjectsArgs),
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let level = if cli.quiet {
        "error"
    } else {
        match cli.verbose {
            0 => "warn",
            1 => "info",
            _ => "debug",
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_target(false).init();

    let result = match cli.command {
        Command::Scene(args) => scene_cmd::run_scene(&args),
        Command::Render(args) => render_cmd::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Demo(args) => demo_cmd::run(&args),
        Command::Generate(args) => generate_cmd::run(&args),
        Command::Score(args) => score_cmd::run(&args),
        Command::Export(args) => export_cmd::run(&args),
        Command::TrajEval(args) => traj_eval_cmd::run(&args),
        Command::Slam(args) => slam_cmd::run(&args),
        Command::Eval(args) => eval_cmd::run(&args),
        Command::Baselines(args) => baselines_cmd::run(&args),
        Command::Map(args) => map_cmd::run(&args),
        Command::MapEval(args) => map_eval_cmd::run(&args),
        Command::View(args) => view_cmd::run(&args),
        Command::Bag(args) => bag_cmd::run(&args),
        Command::ExportBag(args) => bag_cmd::run_export(&args),
        Command::TrainObjects(args) => train_objects_cmd::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // The one place that reports errors to the user: the whole chain, most general first.
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
