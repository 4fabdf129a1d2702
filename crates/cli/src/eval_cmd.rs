//! `gst eval`: run an answerer over a benchmark split (resumable), score it and print the paper's table.
//!
//! `OUT/predictions.jsonl` is what `gst score` reads; `OUT/scores.json` holds the tables as `gst score
//! --json` prints them; `OUT/errors.jsonl` lists questions the answerer failed on (scored as wrong, tried
//! again on the next run); `OUT/cache/` keeps per-video work (maps) between runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};

use gst_baseline::eval::{EvalEvent, EvalOptions, EvalSummary, PREDICTIONS, run_eval};
use gst_baseline::{Answerer, RandomAnswerer};
use gst_bench::{PaperTable, Predictions, ScoreTables, score};
use gst_io::{QuestionReadOptions, read_bench_questions};
use gst_vlm::Vlm;

/// Which model answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AnswererKind {
    /// Uniform guesses in each task's answer format (the chance row).
    Random,
    /// A vision-language model (see --backend, --model, --mode).
    Vlm,
    /// The explicit-map baseline: SLAM, semantic map, answers by geometry (see --poses, --perception).
    Map,
}

/// Poses of the map answerer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PosesArg {
    /// Our SLAM's estimate (`map-slam`).
    Slam,
    /// The episodes' ground truth: an ORACLE upper bound (`map-oracle-poses`).
    Groundtruth,
}

/// Cameras of the map answerer's current views.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ViewsArg {
    /// Relocalised from the image alone against the SLAM map.
    Relocalised,
    /// The generator's true poses (`scenes/<scene>/views.json`): ORACLE, needs `--poses groundtruth`.
    Groundtruth,
}

/// Object perception of the map answerer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PerceptionArg {
    /// Only the question's pixels: red boxes in marked videos; semantic targets from the map's object
    /// candidates and the classifier of --objects-model.
    Marked,
    /// ORACLE instance masks and classes from the generated episode.
    Oracle,
}

#[derive(Debug, clap::Args)]
pub struct EvalArgs {
    /// Benchmark split: a directory with `questions/*.json` (for example data/gst/bench).
    #[arg(long)]
    pub bench: PathBuf,
    /// The answerer.
    #[arg(long, value_enum)]
    pub answerer: AnswererKind,
    /// Output directory: predictions.jsonl, scores.json, errors.jsonl, cache/.
    #[arg(long)]
    pub out: PathBuf,
    /// Seed of the random answerer.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Name of our row in the tables (default: the answerer's name).
    #[arg(long)]
    pub name: Option<String>,
    /// Print the tables as JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Poses of the map answerer.
    #[arg(long, value_enum, default_value = "slam")]
    pub poses: PosesArg,
    /// Cameras of the current views of the map answerer.
    #[arg(long, value_enum, default_value = "relocalised")]
    pub views: ViewsArg,
    /// Object perception of the map answerer.
    #[arg(long, value_enum, default_value = "marked")]
    pub perception: PerceptionArg,
    /// Object classifier of the map answerer (`gst train-objects`); default: the one built into the binary
    /// (the repository's models/objects.json at build time).
    #[arg(long)]
    pub objects_model: Option<PathBuf>,
    /// Pose hypotheses from layout place recognition per current view of the map answerer (its floor
    /// boundary matched against the occupancy grid; each is also tried turned ±90°; 0 turns it off).
    #[arg(long, default_value_t = gst_baseline::scene_layout::LAYOUT_HYPOTHESES)]
    pub layout_hypotheses: usize,
    /// Write a Rerun recording of every question with its images, the answer given and the true one.
    #[arg(long)]
    pub rrd: Option<PathBuf>,
    #[command(flatten)]
    pub vlm: crate::vlm_args::VlmArgs,
}

/// Where `gst eval --answerer vlm` keeps the HTTP backend's responses, so that a rerun does not pay twice.
pub const VLM_RESPONSE_CACHE: &str = "cache/vlm-responses";

pub fn run(args: &EvalArgs) -> Result<()> {
    let mut vlm: Option<Arc<dyn Vlm>> = None;
    let answerer: Box<dyn Answerer> = match args.answerer {
        AnswererKind::Random => Box::new(RandomAnswerer { seed: args.seed }),
        AnswererKind::Vlm => {
            let model = args.vlm.build_vlm(&args.out.join(VLM_RESPONSE_CACHE))?;
            vlm = Some(Arc::clone(&model));
            Box::new(args.vlm.answerer(model)?)
        }
        AnswererKind::Map => Box::new(
            map_answerer(args.poses, args.views, args.perception, args.objects_model.as_deref())?
                .with_layout_hypotheses(args.layout_hypotheses),
        ),
    };
    let name = args.name.clone().unwrap_or_else(|| answerer.name());
    let outcome = evaluate(&args.bench, &args.out, answerer.as_ref(), &name)?;
    if let Some(vlm) = &vlm {
        // The cost and time summary of a VLM run, on stderr so that stdout stays the table.
        eprintln!("{}: {} in {:.1} s", vlm.name(), vlm.stats(), outcome.summary.seconds);
    }
    if let Some(rrd) = &args.rrd {
        let recorder =
            gst_viz::Recorder::to_file("gst eval", rrd)?.with_images(gst_viz::ImageSettings::compact())?;
        let files = read_bench_questions(&args.bench, QuestionReadOptions { check_files: false })?;
        crate::demo_viz::log_questions(&recorder, &args.bench, &files, None, &args.out)
            .with_context(|| format!("writing the Rerun recording {}", rrd.display()))?;
        recorder.finish()?;
    }
    let text = if args.json { outcome.json } else { outcome.text };
    #[allow(clippy::print_stdout)] // the command's report
    {
        print!("{text}");
    }
    Ok(())
}

/// The map answerer of a pose source and a perception.
pub fn map_answerer(
    poses: PosesArg,
    views: ViewsArg,
    perception: PerceptionArg,
    objects_model: Option<&Path>,
) -> Result<gst_baseline::map_answerer::MapAnswerer> {
    use gst_baseline::map_answerer::{MapAnswerer, MapAnswererConfig, ObjectPerception, ViewPoses};
    use gst_baseline::scene_slam::PoseSource;
    anyhow::ensure!(
        views == ViewsArg::Relocalised || poses == PosesArg::Groundtruth,
        "--views groundtruth needs --poses groundtruth (the true view poses are in the ground truth's world)"
    );
    let classifier = match perception {
        PerceptionArg::Marked => crate::train_objects_cmd::load_classifier(objects_model)?,
        PerceptionArg::Oracle => None,
    };
    Ok(MapAnswerer::new(MapAnswererConfig {
        poses: match poses {
            PosesArg::Slam => PoseSource::Slam,
            PosesArg::Groundtruth => PoseSource::OracleGroundTruth,
        },
        views: match views {
            ViewsArg::Relocalised => ViewPoses::Relocalised,
            ViewsArg::Groundtruth => ViewPoses::OracleGroundTruth,
        },
        perception: match perception {
            PerceptionArg::Marked => ObjectPerception::Marked,
            PerceptionArg::Oracle => ObjectPerception::Oracle,
        },
        classifier,
        ..MapAnswererConfig::default()
    }))
}

/// What an evaluation produced.
#[derive(Debug)]
pub struct EvalOutcome {
    pub tables: ScoreTables,
    /// Fallback answers per column.
    pub fallbacks: BTreeMap<&'static str, usize>,
    pub summary: EvalSummary,
    /// `scores.json` as written.
    pub json: String,
    /// The text report: the tables and the fallback line.
    pub text: String,
}

/// Runs `answerer` over a split (resumably, with a progress bar), scores it and writes `OUT/scores.json`.
pub fn evaluate(bench: &Path, out: &Path, answerer: &dyn Answerer, name: &str) -> Result<EvalOutcome> {
    let paper = PaperTable::embedded()?;
    let files = read_bench_questions(bench, QuestionReadOptions { check_files: true })?;
    anyhow::ensure!(!files.is_empty(), "{}: no question files", bench.display());
    let bar = crate::progress::bar(files.len() as u64, "answering");
    let on_event = |event: EvalEvent<'_>| match event {
        EvalEvent::Started { reused, .. } => bar.inc(reused as u64),
        EvalEvent::Preparing { scene, .. } => bar.set_message(format!("preparing {scene}")),
        EvalEvent::Answering { scene, .. } => bar.set_message(scene.to_string()),
        EvalEvent::Answered { .. } => bar.inc(1),
    };
    let options = EvalOptions { out_dir: out.to_path_buf(), cache_dir: None };
    let summary = run_eval(&files, bench, answerer, &options, &on_event)
        .with_context(|| format!("evaluating {} on {}", name, bench.display()))?;
    bar.finish_and_clear();
    tracing::info!(
        "{} questions: {} answered now, {} kept from an earlier run, {} failed, {:.1} s",
        summary.questions,
        summary.answered,
        summary.reused,
        summary.failed,
        summary.seconds
    );
    if summary.failed > 0 {
        tracing::warn!(
            "{} questions failed (scored as wrong; see {})",
            summary.failed,
            out.join(gst_baseline::eval::ERRORS).display()
        );
    }

    let questions: Vec<_> = files.into_iter().map(|file| file.question).collect();
    let predictions_path = out.join(PREDICTIONS);
    let predictions = Predictions::read(&predictions_path)?;
    let report =
        score(&questions, &predictions).with_context(|| format!("scoring {}", predictions_path.display()))?;
    let tables = ScoreTables::new(&report, &paper, name);
    // Fallback answers (a current view that did not relocalise, a target not found) are scored as given and
    // counted per column, so that a table shows how much of a column rests on them.
    let lines = gst_baseline::read_predictions(&predictions_path)?;
    let fallbacks = gst_baseline::fallback_counts(&questions, &lines);
    let mut value = serde_json::to_value(&tables).context("serialising the tables")?;
    if let serde_json::Value::Object(fields) = &mut value {
        fields.insert("fallbacks".into(), serde_json::to_value(&fallbacks).context("serialising fallbacks")?);
    }
    let mut json = serde_json::to_string_pretty(&value).context("serialising the tables")?;
    json.push('\n');
    gst_io::atomic_write(&out.join("scores.json"), json.as_bytes())?;
    let text = format!("{tables}{}", fallback_line(&fallbacks));
    Ok(EvalOutcome { tables, fallbacks, summary, json, text })
}

/// "fallback answers: Pos 2, Ori 2" (or that there were none), for the end of the text report.
pub fn fallback_line(fallbacks: &std::collections::BTreeMap<&str, usize>) -> String {
    if fallbacks.is_empty() {
        return "fallback answers: none\n".into();
    }
    // Paper column order.
    let parts: Vec<String> = gst_core::TaskId::ALL
        .iter()
        .map(|t| t.column())
        .filter_map(|c| fallbacks.get(c).map(|n| format!("{c} {n}")))
        .collect();
    format!("fallback answers (scored as given): {}\n", parts.join(", "))
}
