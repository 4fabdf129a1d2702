//! `gst score`: score a model's predictions on a GST benchmark split and print the paper's table with our
//! row beside its human, random and best-VLM rows.

use std::path::PathBuf;

use anyhow::{Context, Result};

use gst_bench::import::{check_complete, read_predictions};
use gst_bench::{PaperTable, ScoreTables, score};
use gst_io::{QuestionReadOptions, read_bench_questions};

#[derive(Debug, clap::Args)]
pub struct ScoreArgs {
    /// Benchmark split: a directory with `questions/*.json`, or the question files themselves.
    #[arg(long)]
    pub bench: PathBuf,
    /// Predictions: JSON lines `{"uid": "...", "prediction": "<the model's raw output>"}`, an lmms-eval
    /// samples file (`--log_samples`) or its output folder, or a VLMEvalKit prediction table (`.tsv`).
    /// A harness's file must cover every question.
    #[arg(long)]
    pub predictions: PathBuf,
    /// Name of our row in the tables.
    #[arg(long, default_value = "ours")]
    pub model: String,
    /// Print the tables as JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &ScoreArgs) -> Result<()> {
    let paper = PaperTable::embedded()?;
    let questions: Vec<_> = read_bench_questions(&args.bench, QuestionReadOptions::default())?
        .into_iter()
        .map(|file| file.question)
        .collect();
    let (predictions, format) = read_predictions(&args.predictions)?;
    if format.is_harness() {
        check_complete(&questions, &predictions)?;
    }
    let report = score(&questions, &predictions).with_context(|| {
        format!("scoring {} against {}", args.predictions.display(), args.bench.display())
    })?;
    let tables = ScoreTables::new(&report, &paper, &args.model);
    let text = if args.json {
        let mut json = serde_json::to_string_pretty(&tables).context("serialising the tables")?;
        json.push('\n');
        json
    } else {
        tables.to_string()
    };
    #[allow(clippy::print_stdout)] // the command's report
    {
        print!("{text}");
    }
    Ok(())
}
