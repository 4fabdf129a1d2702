//! `gst generate`: build a GST-style benchmark (scenes, videos, questions) in parallel, resumably.

use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::{Context, Result, bail};
use rayon::prelude::*;

use gst_bench::generate::{GenerateConfig, Manifest, run_job, scene_jobs, write_manifest};
use gst_sim::library::FurnitureLibrary;
use gst_sim::noise::DepthSensor;

use crate::progress;
use crate::scene_cmd::FurnitureArgs;

#[derive(Debug, clap::Args)]
pub struct GenerateArgs {
    /// Number of bench scenes (GST-Bench has about 100).
    #[arg(long, default_value_t = 3)]
    pub scenes: usize,
    /// Number of train scenes (our GST-Train), built after the bench scenes.
    #[arg(long, default_value_t = 0)]
    pub train_scenes: usize,
    /// Seed of the run: the same seed gives the same benchmark.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output directory (resumable: scenes already built there are skipped).
    #[arg(long)]
    pub out: PathBuf,
    /// Builder settings as JSON (a `GenerateConfig`; missing fields take their defaults).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Depth sensor of the TUM export (the RGB-D track's depth): `kinect` (default), `d435`, `perfect`
    /// (the renderer's exact depth, an oracle) or a JSON file of a noise model; overrides the config's
    /// `depth_sensor`. See docs/protocol.md.
    #[arg(long, value_name = "PROFILE|FILE")]
    pub depth_sensor: Option<String>,
    #[command(flatten)]
    pub furniture: FurnitureArgs,
}

/// Reads a `GenerateConfig` JSON file (missing fields take their defaults).
pub fn read_config(path: &std::path::Path) -> Result<GenerateConfig> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read config {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("malformed generate config {}", path.display()))
}

/// Builds (or resumes) a benchmark in `out`: scenes in parallel with a progress bar; the manifest is
/// written when every scene is done.
pub fn generate(
    out: &std::path::Path,
    scenes: usize,
    train_scenes: usize,
    seed: u64,
    config: &GenerateConfig,
    library: &FurnitureLibrary,
) -> Result<Manifest> {
    config.scene.validate().context("invalid scene settings")?;
    config.depth_sensor.validate().context("invalid depth sensor")?;
    let jobs = scene_jobs(scenes, train_scenes, seed);
    let bar = progress::bar(jobs.len() as u64, "scenes");
    let failures = Mutex::new(Vec::new());
    let records: Vec<_> = jobs
        .par_iter()
        .filter_map(|job| {
            let result = run_job(out, job, config, library);
            bar.inc(1);
            match result {
                Ok(record) => Some((job.clone(), record)),
                Err(error) => {
                    if let Ok(mut f) = failures.lock() {
                        f.push(format!("{}/{}: {error}", job.split, job.name));
                    }
                    None
                }
            }
        })
        .collect();
    bar.finish_and_clear();
    let failures = failures.into_inner().unwrap_or_default();
    if !failures.is_empty() {
        bail!("{} scene(s) failed (rerun to resume):\n  {}", failures.len(), failures.join("\n  "));
    }
    Ok(write_manifest(out, seed, config, library, &records)?)
}

pub fn run(args: &GenerateArgs) -> Result<()> {
    if args.scenes + args.train_scenes == 0 {
        bail!("nothing to generate: --scenes and --train-scenes are both 0");
    }
    let mut config = match &args.config {
        Some(path) => read_config(path)?,
        None => GenerateConfig::default(),
    };
    if let Some(sensor) = &args.depth_sensor {
        config.depth_sensor = DepthSensor::from_name_or_file(sensor).context("--depth-sensor")?;
    }
    let library = args.furniture.library()?;
    let manifest = generate(&args.out, args.scenes, args.train_scenes, args.seed, &config, &library)?;
    #[allow(clippy::print_stdout)] // the command's report
    for (split, counts) in &manifest.questions {
        let total: usize = counts.values().sum();
        println!(
            "{split}: {} scenes, {total} questions",
            manifest.splits.get(split).map(Vec::len).unwrap_or(0)
        );
        for (column, n) in counts {
            println!("  {column:<22} {n}");
        }
    }
    Ok(())
}
