//! `gst export`: a benchmark split as an lmms-eval task folder, a VLMEvalKit video dataset or a Hugging Face
//! datasets folder.
//! Parsing only; the export itself is `gst_bench::export`.

use std::path::PathBuf;

use anyhow::{Context, Result};

use gst_bench::export::{ExportFormat, export};

/// Target formats of `gst export`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    /// An lmms-eval task folder for `--include_path` (one YAML per subtask, groups gst_bench and
    /// gst_bench_local, utils.py with gst score's metrics).
    #[value(name = "lmms-eval")]
    LmmsEval,
    /// A VLMEvalKit video dataset: GST_Bench.tsv and GST_Bench_Local.tsv, media/, and gst_vlmeval.py (the
    /// dataset class, its registration and a launcher of VLMEvalKit's run).
    Vlmevalkit,
    /// A Hugging Face datasets folder: data/test.jsonl, media/ and a README.md dataset card.
    Hf,
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// What to write.
    #[arg(long, value_enum)]
    pub format: FormatArg,
    /// Benchmark split: a directory with `questions/*.json`, or the question files themselves.
    pub bench: PathBuf,
    /// Output folder; must not exist (or be empty). Written atomically: complete or absent.
    pub out: PathBuf,
}

pub fn run(args: &ExportArgs) -> Result<()> {
    let format = match args.format {
        FormatArg::LmmsEval => ExportFormat::LmmsEval,
        FormatArg::Vlmevalkit => ExportFormat::VlmEvalKit,
        FormatArg::Hf => ExportFormat::Hf,
    };
    let summary = export(&args.bench, format, &args.out)
        .with_context(|| format!("exporting {} as {}", args.bench.display(), format.as_str()))?;
    #[allow(clippy::print_stdout)] // the command's report
    {
        println!(
            "{}: {} questions, {} media files ({} copied, the rest hard-linked); {}",
            summary.out.display(),
            summary.questions,
            summary.media,
            summary.copied,
            summary.subsets.join(", ")
        );
    }
    Ok(())
}
