//! `gst eval`: run an answerer over a benchmark split (resumable), score it and print the paper's table.
//!
//! `OUT/predictions.jsonl` is what `gst score` reads; `OUT/scores.json` holds the tables as `gst score
//! --json` prints them; `OUT/errors.jsonl` lists questions the answerer failed on (scored as wrong, tried
//! again on the next run); `OUT/cache/` keeps per-video work (maps) between runs.
//!
//! `--answerer import --predictions FILE` runs no model: it takes a harness's output (lmms-eval's samples
//! JSONL or output folder, VLMEvalKit's prediction TSV or xlsx, or our predictions JSONL), which must
//! answer every question, and writes and prints the same `predictions.jsonl`, `scores.json` and table.

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
    /// No model: score a harness's output given with --predictions (lmms-eval samples, VLMEvalKit table).
    Import,
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
    /// With `--answerer import`: the harness's output (lmms-eval samples JSONL or its output folder,
    /// VLMEvalKit's prediction .tsv or .xlsx, or our predictions JSONL).
    #[arg(long)]
    pub predictions: Option<PathBuf>,
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
    anyhow::ensure!(
        args.predictions.is_none() || args.answerer == AnswererKind::Import,
        "--predictions is for --answerer import (a harness's output to score)"
    );
    if args.answerer == AnswererKind::Import {
        let predictions =
            args.predictions.as_deref().context("--answerer import needs --predictions FILE")?;
        let name = args.name.clone().unwrap_or_else(|| "imported".to_string());
        let outcome = import(&args.bench, predictions, &args.out, &name)?;
        let text = if args.json { outcome.json } else { outcome.text };
        #[allow(clippy::print_stdout)] // the command's report
        {
            print!("{text}");
        }
        return Ok(());
    }
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
        AnswererKind::Import => unreachable!("handled above"),
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
    score_out(&questions, out, name, summary)
}

/// Scores a harness's output file as `gst eval` scores its own run: the file must answer every question;
/// it is converted to `OUT/predictions.jsonl` (refused when OUT already holds one), then scored into
/// `OUT/scores.json` and the text tables.
pub fn import(bench: &Path, harness_file: &Path, out: &Path, name: &str) -> Result<EvalOutcome> {
    let start = std::time::Instant::now();
    let files = read_bench_questions(bench, QuestionReadOptions::default())?;
    anyhow::ensure!(!files.is_empty(), "{}: no question files", bench.display());
    let questions: Vec<_> = files.into_iter().map(|file| file.question).collect();
    let (predictions, format) = gst_bench::import::read_predictions(harness_file)?;
    if format.is_harness() {
        gst_bench::import::check_complete(&questions, &predictions)?;
    }
    // Unknown and repeated uids fail here, naming the file and line, before anything is written.
    score(&questions, &predictions)
        .with_context(|| format!("scoring {} against {}", harness_file.display(), bench.display()))?;
    let predictions_path = out.join(PREDICTIONS);
    anyhow::ensure!(
        !predictions_path.exists(),
        "{} exists (an earlier run's); import into an empty output folder",
        predictions_path.display()
    );
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let mut lines = String::new();
    for entry in &predictions.entries {
        lines.push_str(&serde_json::json!({"uid": entry.uid, "prediction": entry.text}).to_string());
        lines.push('\n');
    }
    gst_io::atomic_write(&predictions_path, lines.as_bytes())?;
    let summary = EvalSummary {
        questions: questions.len(),
        reused: 0,
        answered: predictions.entries.len(),
        failed: 0,
        seconds: start.elapsed().as_secs_f64(),
    };
    score_out(&questions, out, name, summary)
}

/// Scores `OUT/predictions.jsonl` and writes `OUT/scores.json`.
fn score_out(
    questions: &[gst_core::Question],
    out: &Path,
    name: &str,
    summary: EvalSummary,
) -> Result<EvalOutcome> {
    let paper = PaperTable::embedded()?;
    let predictions_path = out.join(PREDICTIONS);
    let predictions = Predictions::read(&predictions_path)?;
    let report =
        score(questions, &predictions).with_context(|| format!("scoring {}", predictions_path.display()))?;
    let tables = ScoreTables::new(&report, &paper, name);
    // Fallback answers (a current view that did not relocalise, a target not found) are scored as given and
    // counted per column, so that a table shows how much of a column rests on them.
    let lines = gst_baseline::read_predictions(&predictions_path)?;
    let fallbacks = gst_baseline::fallback_counts(questions, &lines);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/gst-samples")
    }

    /// An lmms-eval samples file answering the release's six sample questions: the first three with the
    /// true answer, the rest with a wrong or unreadable output.
    fn lmms_samples(skip: Option<usize>, repeat: Option<usize>) -> Result<(String, Vec<gst_core::Question>)> {
        let questions: Vec<_> = read_bench_questions(&samples(), QuestionReadOptions::default())?
            .into_iter()
            .map(|file| file.question)
            .collect();
        let mut text = String::new();
        let mut line = |k: usize, question: &gst_core::Question| {
            let answer = if k < 3 { question.answer.to_string() } else { "no idea".to_string() };
            let sample =
                serde_json::json!({"doc_id": k, "doc": {"uid": question.uid}, "filtered_resps": [answer]});
            text.push_str(&format!("{sample}\n"));
        };
        for (k, question) in questions.iter().enumerate() {
            if Some(k) != skip {
                line(k, question);
            }
            if Some(k) == repeat {
                line(k, question);
            }
        }
        Ok((text, questions))
    }

    #[test]
    fn import_scores_a_harness_file_as_eval_scores_its_own_run() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let (text, questions) = lmms_samples(None, None)?;
        let file = dir.path().join("run_samples_gst_bench.jsonl");
        std::fs::write(&file, &text)?;
        let out = dir.path().join("eval");
        let outcome = import(&samples(), &file, &out, "my-vlm-lmms")?;
        // The same numbers as scoring the file directly, in eval's outputs.
        let (predictions, _) = gst_bench::import::read_predictions(&file)?;
        let report = score(&questions, &predictions)?;
        let expected = ScoreTables::new(&report, &PaperTable::embedded()?, "my-vlm-lmms");
        assert_eq!(serde_json::to_value(&outcome.tables)?, serde_json::to_value(&expected)?);
        assert!(outcome.text.contains("my-vlm-lmms"), "{}", outcome.text);
        let written = std::fs::read_to_string(out.join("scores.json"))?;
        assert_eq!(written, outcome.json);
        let ours = Predictions::read(&out.join(PREDICTIONS))?;
        assert_eq!(ours.entries.len(), 6);
        let avg = report.average_pct().unwrap_or_default();
        assert!((avg - 50.0).abs() < 1e-9, "three of six columns right: {avg}");

        // A second import into the same folder is refused rather than mixed with the first.
        let again = import(&samples(), &file, &out, "x").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(again.contains("exists"), "{again}");
        Ok(())
    }

    #[test]
    fn import_refuses_missing_and_repeated_questions_writing_nothing() -> Result<()> {
        let dir = tempfile::tempdir()?;
        for (skip, repeat, wanted) in
            [(Some(4), None, "has no prediction"), (None, Some(2), "already predicted")]
        {
            let (text, questions) = lmms_samples(skip, repeat)?;
            let file = dir.path().join("samples_gst.jsonl");
            std::fs::write(&file, &text)?;
            let out = dir.path().join("eval");
            let error =
                import(&samples(), &file, &out, "m").err().map(|e| format!("{e:#}")).unwrap_or_default();
            let uid = &questions[skip.or(repeat).unwrap_or_default()].uid;
            assert!(error.contains(wanted) && error.contains(uid.as_str()), "{error}");
            assert!(!out.exists(), "nothing is written for a bad file");
        }
        Ok(())
    }
}
