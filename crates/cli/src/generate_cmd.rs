//! `gst generate`: build a GST-style benchmark (scenes, videos, questions) in parallel, resumably.

use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::{Context, Result, bail};
use rayon::prelude::*;

use gst_bench::generate::{GenerateConfig, Manifest, run_job, scene_jobs, write_manifest};
use gst_sim::library::{FurnitureLibrary, ModelSplit};
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
    /// A split with a role (`dev`, `val`, `test`; see docs/protocol.md): its seed, scene count and
    /// furniture models come from the split table (built into the binary from baselines/bench/splits.json, or
    /// `--splits FILE`) instead of --seed and --scenes.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["seed", "scenes"])]
    pub split: Option<String>,
    /// Split table to read --split from (default: the one built into the binary).
    #[arg(long, value_name = "FILE", requires = "split")]
    pub splits: Option<PathBuf>,
    #[command(flatten)]
    pub furniture: FurnitureArgs,
}

/// The split table built into the binary: `baselines/bench/splits.json` when it was compiled.
pub const BUILTIN_SPLITS: &str = include_str!("../../../baselines/bench/splits.json");

/// One split of the table: what `gst generate --split NAME` builds.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SplitSpec {
    pub seed: u64,
    pub scenes: usize,
    pub models: ModelSplit,
    /// What the split may be used for.
    pub role: String,
}

/// The split table from `path`, or the built-in one.
pub fn read_splits(path: Option<&std::path::Path>) -> Result<std::collections::BTreeMap<String, SplitSpec>> {
    let (text, origin) = match path {
        Some(path) => (
            std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?,
            path.display().to_string(),
        ),
        None => (BUILTIN_SPLITS.to_string(), "the built-in split table".to_string()),
    };
    let splits: std::collections::BTreeMap<String, SplitSpec> =
        serde_json::from_str(&text).with_context(|| format!("{origin}: malformed split table"))?;
    if let Some((name, _)) = splits.iter().find(|(_, s)| s.scenes == 0) {
        bail!("{origin}: split {name} has no scenes");
    }
    Ok(splits)
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
    let mut config = match &args.config {
        Some(path) => read_config(path)?,
        None => GenerateConfig::default(),
    };
    let (mut scenes, mut seed) = (args.scenes, args.seed);
    if let Some(name) = &args.split {
        let splits = read_splits(args.splits.as_deref())?;
        let Some(spec) = splits.get(name) else {
            let known: Vec<&str> = splits.keys().map(String::as_str).collect();
            bail!("--split {name}: no such split (known: {})", known.join(", "));
        };
        if config.scene.furnish.models != ModelSplit::All && config.scene.furnish.models != spec.models {
            bail!(
                "--split {name} furnishes with {:?} models, the config asks for {:?}",
                spec.models,
                config.scene.furnish.models
            );
        }
        (scenes, seed) = (spec.scenes, spec.seed);
        config.scene.furnish.models = spec.models;
        eprintln!(
            "split {name} ({}): seed {seed}, {scenes} scenes, {:?} furniture models",
            spec.role, spec.models
        );
    }
    if scenes + args.train_scenes == 0 {
        bail!("nothing to generate: --scenes and --train-scenes are both 0");
    }
    if let Some(sensor) = &args.depth_sensor {
        config.depth_sensor = DepthSensor::from_name_or_file(sensor).context("--depth-sensor")?;
    }
    let library = args.furniture.library()?;
    let manifest = generate(&args.out, scenes, args.train_scenes, seed, &config, &library)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_split_table_names_dev_val_and_a_test_split_of_unseen_models() -> Result<()> {
        let splits = read_splits(None)?;
        let names: Vec<&str> = splits.keys().map(String::as_str).collect();
        assert_eq!(names, ["dev", "test", "val"]);
        assert_eq!(splits["test"].models, ModelSplit::Unseen);
        assert!(splits.values().filter(|s| s.models == ModelSplit::Unseen).count() == 1);
        let dir = tempfile::tempdir()?;
        let bad = dir.path().join("splits.json");
        std::fs::write(&bad, r#"{"dev": {"seed": 1, "scenes": 0, "models": "seen", "role": "x"}}"#)?;
        let error = read_splits(Some(&bad)).err().map(|e| format!("{e:#}")).unwrap_or_default();
        assert!(error.contains("splits.json") && error.contains("no scenes"), "{error}");
        Ok(())
    }
}
