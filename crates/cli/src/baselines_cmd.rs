//! `gst baselines`: every baseline configuration of `baselines/` on one benchmark split, and the results
//! table `baselines/RESULTS.md` with the paper's human, random and best-VLM rows beside ours.
//!
//! A configuration is one JSON file (`baselines/<name>.json`, a [`BaselineConfig`]). Anything that reads
//! simulator ground truth while answering (poses, instance masks) must say so in its name: a name without
//! "oracle" that asks for ground truth is refused.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use gst_baseline::{Answerer, RandomAnswerer};
use gst_bench::table::{BEST_VLM_ROW, HUMAN_ROW, RANDOM_ROW};
use gst_bench::{PaperTable, TableRow};

use crate::eval_cmd::{EvalOutcome, PerceptionArg, PosesArg, ViewsArg, evaluate, map_answerer};

#[derive(Debug, clap::Args)]
pub struct BaselinesArgs {
    /// Benchmark split to answer (for example out/baselines/data/bench).
    #[arg(long)]
    pub bench: PathBuf,
    /// Directory of baseline configurations (*.json).
    #[arg(long, default_value = "baselines")]
    pub configs: PathBuf,
    /// Output directory: one eval directory per baseline (resumable).
    #[arg(long)]
    pub out: PathBuf,
    /// Only these baselines (names); default all.
    #[arg(long)]
    pub only: Vec<String>,
    /// Where to write the results table (default: CONFIGS/RESULTS.md for a run of every baseline; OUT/RESULTS.md
    /// with --only, so that a partial run never replaces the whole table's other rows).
    #[arg(long)]
    pub results: Option<PathBuf>,
}

/// Which answerer a baseline runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BaselineAnswerer {
    /// The explicit-map baseline.
    Map,
    /// Uniform guesses.
    Random,
}

/// Poses of a map baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BaselinePoses {
    Slam,
    /// ORACLE: the episodes' ground truth.
    Groundtruth,
}

/// Cameras of the current views of a map baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BaselineViews {
    Relocalised,
    /// ORACLE: the generator's true poses of the views (needs ground-truth poses).
    Groundtruth,
}

/// Object perception of a map baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BaselinePerception {
    /// Red boxes in the questions' marked videos only.
    Marked,
    /// ORACLE: ground-truth instance masks and classes.
    Oracle,
}

/// One baseline: `baselines/<name>.json`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineConfig {
    /// Row name in the tables; must contain "oracle" when the baseline reads ground truth.
    pub name: String,
    /// One line for the results table.
    pub description: String,
    pub answerer: BaselineAnswerer,
    /// Map baselines: where poses come from (default slam).
    #[serde(default)]
    pub poses: Option<BaselinePoses>,
    /// Map baselines: cameras of the current views (default relocalised).
    #[serde(default)]
    pub views: Option<BaselineViews>,
    /// Map baselines: object perception (default marked).
    #[serde(default)]
    pub perception: Option<BaselinePerception>,
    /// Random baseline: the guessing seed (default 1).
    #[serde(default)]
    pub seed: Option<u64>,
}

impl BaselineConfig {
    /// Reads and validates a configuration file.
    pub fn read(path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        let config: BaselineConfig =
            serde_json::from_str(&text).with_context(|| format!("{}: malformed baseline", path.display()))?;
        config.validate().with_context(|| format!("{}: invalid baseline", path.display()))?;
        Ok(config)
    }

    pub fn validate(&self) -> Result<()> {
        if self.name.trim().is_empty() {
            bail!("the name is empty");
        }
        let map_only = self.poses.is_some() || self.views.is_some() || self.perception.is_some();
        if self.answerer == BaselineAnswerer::Random && map_only {
            bail!("poses, views and perception are settings of the map answerer, not of random guessing");
        }
        if self.views == Some(BaselineViews::Groundtruth) && self.poses != Some(BaselinePoses::Groundtruth) {
            bail!(
                "ground-truth views need ground-truth poses (the true view poses are in the ground truth's world)"
            );
        }
        if self.answerer == BaselineAnswerer::Map && self.seed.is_some() {
            bail!("seed is a setting of random guessing, not of the map answerer");
        }
        if self.reads_ground_truth() && !self.name.contains("oracle") {
            bail!("{} reads simulator ground truth while answering: its name must say \"oracle\"", self.name);
        }
        Ok(())
    }

    /// Whether answering reads ground truth (an oracle mode).
    pub fn reads_ground_truth(&self) -> bool {
        self.poses == Some(BaselinePoses::Groundtruth)
            || self.views == Some(BaselineViews::Groundtruth)
            || self.perception == Some(BaselinePerception::Oracle)
    }

    /// The protocol track the baseline answers on: `RGB-D` (the question's files with the sensor-model depth),
    /// `oracle-…` naming the ground truth it reads, or `none` for guessing that reads nothing.
    pub fn track(&self) -> String {
        if self.answerer == BaselineAnswerer::Random {
            return "none (guesses)".into();
        }
        let mut oracle = Vec::new();
        if self.poses == Some(BaselinePoses::Groundtruth) {
            oracle.push("poses");
        }
        if self.views == Some(BaselineViews::Groundtruth) {
            oracle.push("views");
        }
        if self.perception == Some(BaselinePerception::Oracle) {
            oracle.push("perception");
        }
        if oracle.is_empty() { "RGB-D".into() } else { format!("oracle-{}", oracle.join("+")) }
    }

    fn answerer(&self) -> Result<Box<dyn Answerer>> {
        Ok(match self.answerer {
            BaselineAnswerer::Random => Box::new(RandomAnswerer { seed: self.seed.unwrap_or(1) }),
            BaselineAnswerer::Map => Box::new(map_answerer(
                match self.poses.unwrap_or(BaselinePoses::Slam) {
                    BaselinePoses::Slam => PosesArg::Slam,
                    BaselinePoses::Groundtruth => PosesArg::Groundtruth,
                },
                match self.views.unwrap_or(BaselineViews::Relocalised) {
                    BaselineViews::Relocalised => ViewsArg::Relocalised,
                    BaselineViews::Groundtruth => ViewsArg::Groundtruth,
                },
                match self.perception.unwrap_or(BaselinePerception::Marked) {
                    BaselinePerception::Marked => PerceptionArg::Marked,
                    BaselinePerception::Oracle => PerceptionArg::Oracle,
                },
                None,
            )?),
        })
    }
}

/// The configurations in `dir`, by file name.
pub fn read_configs(dir: &Path) -> Result<Vec<BaselineConfig>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    if paths.is_empty() {
        bail!("{}: no baseline configurations (*.json)", dir.display());
    }
    let configs: Vec<BaselineConfig> =
        paths.iter().map(|p| BaselineConfig::read(p)).collect::<Result<_>>()?;
    let mut names = std::collections::BTreeSet::new();
    for config in &configs {
        if !names.insert(config.name.as_str()) {
            bail!("{}: two configurations are named {}", dir.display(), config.name);
        }
    }
    Ok(configs)
}

/// Where a table's figures come from: the bench's split and depth sensor, and the commit of the binary.
#[derive(Clone, Debug, PartialEq)]
struct Provenance {
    /// `test (seed 52219, unseen models)`, or the seed alone for a bench of no named split.
    split: String,
    /// The depth stream of the RGB-D track (`kinect`, `d435`, `perfect`, a custom model).
    depth: String,
    commit: String,
}

/// The provenance of `bench` (a split folder beside its `manifest.json`).
fn provenance(bench: &Path) -> Provenance {
    let manifest = bench.parent().map(|d| d.join("manifest.json"));
    let manifest: Option<gst_bench::generate::Manifest> = manifest
        .and_then(|path| std::fs::read_to_string(path).ok())
        .and_then(|text| serde_json::from_str(&text).ok());
    let commit = std::env::var("GST_COMMIT").unwrap_or_else(|_| "unknown (set GST_COMMIT)".into());
    let Some(manifest) = manifest else {
        return Provenance {
            split: "unknown (no manifest.json beside the bench)".into(),
            depth: "unknown".into(),
            commit,
        };
    };
    let models = manifest.config.scene.furnish.models;
    let named = crate::generate_cmd::read_splits(None).ok().and_then(|splits| {
        splits.into_iter().find(|(_, s)| s.seed == manifest.seed && s.models == models).map(|(name, _)| name)
    });
    let detail = format!("seed {}, {} furniture models", manifest.seed, format!("{models:?}").to_lowercase());
    Provenance {
        split: match named {
            Some(name) => format!("{name} ({detail})"),
            None => format!("no named split ({detail})"),
        },
        depth: manifest.config.depth_sensor.name().to_string(),
        commit,
    }
}

/// What one baseline measured.
struct Measured {
    config: BaselineConfig,
    outcome: EvalOutcome,
    seconds: f64,
}

pub fn run(args: &BaselinesArgs) -> Result<()> {
    let mut configs = read_configs(&args.configs)?;
    if !args.only.is_empty() {
        for name in &args.only {
            if !configs.iter().any(|c| &c.name == name) {
                bail!("--only {name}: no such baseline in {}", args.configs.display());
            }
        }
        configs.retain(|c| args.only.contains(&c.name));
    }
    let mut measured = Vec::new();
    for config in configs {
        eprintln!("baseline {}: {}", config.name, config.description);
        let started = std::time::Instant::now();
        let answerer = config.answerer()?;
        let outcome = evaluate(&args.bench, &args.out.join(&config.name), answerer.as_ref(), &config.name)?;
        let seconds = started.elapsed().as_secs_f64();
        eprint!("{}", outcome.text);
        measured.push(Measured { config, outcome, seconds });
    }
    let paper = PaperTable::embedded()?;
    let text = results_markdown(&args.bench, &provenance(&args.bench), &measured, &paper);
    let results = args.results.clone().unwrap_or_else(|| default_results_path(args));
    gst_io::atomic_write(&results, text.as_bytes())?;
    #[allow(clippy::print_stdout)] // the command's report
    {
        print!("{text}");
    }
    Ok(())
}

/// Where the results table goes without `--results`: beside the configurations for a run of every baseline,
/// in the output directory for a run of some (`--only`).
fn default_results_path(args: &BaselinesArgs) -> PathBuf {
    if args.only.is_empty() { args.configs.join("RESULTS.md") } else { args.out.join("RESULTS.md") }
}

fn cell(score: Option<f64>) -> String {
    score.map_or_else(|| "–".into(), |s| format!("{s:.1}"))
}

/// `baselines/RESULTS.md`: our rows, the paper's reference rows, question and fallback counts.
fn results_markdown(
    bench: &Path,
    provenance: &Provenance,
    measured: &[Measured],
    paper: &PaperTable,
) -> String {
    let mut md = String::from("# Baseline results\n\n");
    md.push_str(
        "Generated by `make baselines` (`gst baselines`); do not edit by hand. Scores in percent, the \
         paper's metrics (MRA for distances, mAcc ladders for angles and points, accuracy for choices). \
         Rows marked ORACLE read simulator ground truth while answering; the paper's rows are its Table 1 \
         (on GST-Bench, not on our generated bench).\n\n",
    );
    let _ = writeln!(
        md,
        "Bench: `{}`; split: {}; RGB-D depth: `{}` sensor model; binary of commit `{}`. Every row below was \
         measured in this one run (protocol: docs/protocol.md).\n",
        bench.display(),
        provenance.split,
        provenance.depth,
        provenance.commit
    );
    let columns: Vec<String> =
        measured.first().map(|m| m.outcome.tables.main.columns.clone()).unwrap_or_default();
    let _ = writeln!(md, "| model | {} |", columns.join(" | "));
    let _ = writeln!(md, "|---|{}", "---:|".repeat(columns.len()));
    let row_line = |md: &mut String, name: &str, scores: &[Option<f64>]| {
        let cells: Vec<String> = scores.iter().map(|s| cell(*s)).collect();
        let _ = writeln!(md, "| {name} | {} |", cells.join(" | "));
    };
    for m in measured {
        let Some(ours) = m.outcome.tables.main.rows.first() else { continue };
        let name = if m.config.reads_ground_truth() {
            format!("**{}** (ORACLE)", m.config.name)
        } else {
            format!("**{}**", m.config.name)
        };
        row_line(&mut md, &name, &ours.scores);
    }
    for reference in [HUMAN_ROW, RANDOM_ROW, BEST_VLM_ROW] {
        if let Some(row) = paper.row(reference) {
            let scores: Vec<Option<f64>> = columns.iter().map(|c| row.scores.get(c).copied()).collect();
            row_line(&mut md, &format!("{reference} (paper)"), &scores);
        }
    }
    if let Some(questions) =
        measured.first().and_then(|m| m.outcome.tables.main.rows.first()).and_then(questions_of)
    {
        let cells: Vec<String> = questions.iter().map(ToString::to_string).collect();
        let _ = writeln!(md, "| questions | {} |", cells.join(" | "));
    }
    md.push_str("\n## Fallback answers per column\n\n");
    md.push_str(
        "A fallback is an answer the baseline's method could not give (a current view that does not \
         relocalise, a target it cannot find) replaced by a documented weaker estimate; it is scored as \
         given.\n\n",
    );
    let task_columns: Vec<&str> = gst_core::TaskId::ALL.iter().map(|t| t.column()).collect();
    let _ = writeln!(md, "| model | {} |", task_columns.join(" | "));
    let _ = writeln!(md, "|---|{}", "---:|".repeat(task_columns.len()));
    for m in measured {
        let counts: Vec<String> = task_columns
            .iter()
            .map(|c| m.outcome.fallbacks.get(c).copied().unwrap_or(0).to_string())
            .collect();
        let _ = writeln!(md, "| {} | {} |", m.config.name, counts.join(" | "));
    }
    md.push_str(
        "\n## Runs\n\n| model | what it is | track | split | commit | questions | failed | wall time |\n|---|---|---|---|---|---:|---:|---:|\n",
    );
    for m in measured {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {:.0} s |",
            m.config.name,
            m.config.description,
            m.config.track(),
            provenance.split,
            provenance.commit,
            m.outcome.summary.questions,
            m.outcome.summary.failed,
            m.seconds
        );
    }
    md.push_str(
        "\nWall time is this run's (resumed runs count only what was left); SLAM and maps are built once per \
         scene and baseline and cached in the baseline's `cache/`.\n",
    );
    md
}

fn questions_of(row: &TableRow) -> Option<&Vec<usize>> {
    row.questions.as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(json: &str) -> Result<BaselineConfig> {
        let config: BaselineConfig = serde_json::from_str(json)?;
        config.validate()?;
        Ok(config)
    }

    #[test]
    fn a_partial_run_writes_its_table_beside_its_outputs() {
        let args = |only: &[&str]| BaselinesArgs {
            bench: PathBuf::from("split"),
            configs: PathBuf::from("baselines"),
            out: PathBuf::from("out/b"),
            only: only.iter().map(|s| s.to_string()).collect(),
            results: None,
        };
        assert_eq!(default_results_path(&args(&[])), PathBuf::from("baselines/RESULTS.md"));
        assert_eq!(default_results_path(&args(&["map-slam"])), PathBuf::from("out/b/RESULTS.md"));
    }

    #[test]
    fn ground_truth_must_be_named_oracle() {
        assert!(config(r#"{"name": "map-slam", "description": "d", "answerer": "map"}"#).is_ok());
        let error =
            config(r#"{"name": "map-gt", "description": "d", "answerer": "map", "poses": "groundtruth"}"#)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
        assert!(error.contains("must say \"oracle\""), "{error}");
        assert!(
            config(r#"{"name": "map-oracle-poses", "description": "d", "answerer": "map", "poses": "groundtruth"}"#)
                .is_ok()
        );
        assert!(
            config(r#"{"name": "r", "description": "d", "answerer": "random", "poses": "slam"}"#).is_err()
        );
        assert!(config(r#"{"name": "r", "description": "d", "answerer": "random", "colour": 1}"#).is_err());
    }

    #[test]
    fn ground_truth_views_need_ground_truth_poses_and_an_oracle_name() {
        let error = |json: &str| config(json).err().map(|e| e.to_string()).unwrap_or_default();
        let slam_poses = error(
            r#"{"name": "map-oracle-v", "description": "d", "answerer": "map", "views": "groundtruth"}"#,
        );
        assert!(slam_poses.contains("need ground-truth poses"), "{slam_poses}");
        let unnamed = error(
            r#"{"name": "map-v", "description": "d", "answerer": "map", "poses": "groundtruth", "views": "groundtruth"}"#,
        );
        assert!(unnamed.contains("must say \"oracle\""), "{unnamed}");
        let fine = config(
            r#"{"name": "map-oracle-poses", "description": "d", "answerer": "map", "poses": "groundtruth", "views": "groundtruth"}"#,
        );
        assert!(fine.is_ok_and(|c| c.reads_ground_truth()));
        let random =
            error(r#"{"name": "r", "description": "d", "answerer": "random", "views": "relocalised"}"#);
        assert!(random.contains("not of random guessing"), "{random}");
    }

    #[test]
    fn the_committed_configurations_are_valid() -> Result<()> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../baselines");
        let configs = read_configs(&dir)?;
        let names: Vec<&str> = configs.iter().map(|c| c.name.as_str()).collect();
        for wanted in ["map-slam", "map-oracle-poses", "map-oracle-poses-relocalised", "random"] {
            assert!(names.contains(&wanted), "{names:?}");
        }
        Ok(())
    }
}
