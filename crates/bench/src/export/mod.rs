//! Exporting a benchmark split into the forms other tools read: an lmms-eval task folder
//! ([`ExportFormat::LmmsEval`]), a VLMEvalKit video dataset ([`ExportFormat::VlmEvalKit`]) and a Hugging
//! Face datasets folder ([`ExportFormat::Hf`]).
//!
//! The input is any folder of GST question files (`gst generate`'s `bench/` with `questions/*.json`, or the
//! release's flat layout). Every question is checked first: its task must be one the exporter knows and its
//! video and images must exist; a failure names the question's uid and nothing is written. The output is
//! built in a temporary folder beside `OUT` and renamed into place, so `OUT` is either complete or absent.
//! Media are hard-linked (copied where linking fails, e.g. across file systems), never re-encoded.
//!
//! The lmms-eval folder holds one task YAML per subtask and setting (`gst_ed_v`, `gst_ed_v_local_image`,
//! ...), the groups `gst_bench` (global subtasks) and `gst_bench_local` (GST-Bench-Local's settings),
//! `data/<task>.jsonl` (read by `dataset_path: json` with absolute local `data_files`), `media/`, and
//! `utils.py` + `gst_score.py`, the task functions and `gst score`'s metrics in Python
//! (`gst_score.py` mirrors `gst_core::extract` and [`crate::metrics`]; tests check they agree).
//!
//! The VLMEvalKit folder holds `GST_Bench.tsv` (the global setting) and `GST_Bench_Local.tsv` (the local
//! settings), one row per question in VLMEvalKit's video-dataset layout (`index`, `question`, `video` =
//! the path under the folder without `.mp4`, plus our `uid`, `texts`, `images`, `kind`, `answer`, ...),
//! `media/`, `gst_vlmeval.py` (the dataset class `GSTBench` on VLMEvalKit's `VideoBaseDataset`, its
//! registration, and a launcher of VLMEvalKit's `run.py`) and `gst_score.py`.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};

use gst_core::{Answer, AnswerKind, Question, RawQuestion, Setting, TaskId};
use serde::Serialize;

use crate::BenchError;

/// `gst score`'s metrics and answer extraction in Python (standard library only).
pub const GST_SCORE_PY: &str = include_str!("gst_score.py");
/// The lmms-eval task functions (doc_to_visual, doc_to_text, doc_to_messages, process_results, aggregation).
pub const LMMS_UTILS_PY: &str = include_str!("lmms_utils.py");
/// The VLMEvalKit dataset class, its registration and launcher.
pub const VLMEVAL_PY: &str = include_str!("gst_vlmeval.py");
/// VLMEvalKit dataset names: the global setting and GST-Bench-Local's settings.
pub const VLMEVAL_GLOBAL: &str = "GST_Bench";
pub const VLMEVAL_LOCAL: &str = "GST_Bench_Local";

/// What to export to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// An lmms-eval task folder for `--include_path`.
    LmmsEval,
    /// A VLMEvalKit video dataset: TSVs, media and the dataset class that registers them.
    VlmEvalKit,
    /// A Hugging Face datasets folder: JSONL, media and a README.md dataset card.
    Hf,
}

impl ExportFormat {
    pub const ALL: [ExportFormat; 3] = [ExportFormat::LmmsEval, ExportFormat::VlmEvalKit, ExportFormat::Hf];

    pub fn as_str(self) -> &'static str {
        match self {
            ExportFormat::LmmsEval => "lmms-eval",
            ExportFormat::VlmEvalKit => "vlmevalkit",
            ExportFormat::Hf => "hf",
        }
    }

    pub fn parse(text: &str) -> Option<ExportFormat> {
        ExportFormat::ALL.into_iter().find(|format| format.as_str() == text)
    }
}

/// What an export wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportSummary {
    pub out: PathBuf,
    pub questions: usize,
    /// Distinct media files linked or copied.
    pub media: usize,
    /// Of those, how many had to be copied (hard linking failed).
    pub copied: usize,
    /// Task names (lmms-eval), dataset names (VLMEvalKit) or data files (hf), in order.
    pub subsets: Vec<String>,
}

/// A checked question with its media resolved: source files and their paths inside the export.
#[derive(Clone, Debug)]
struct ExportQuestion {
    question: Question,
    /// `media/...` path of the video inside the export.
    video: String,
    images: Vec<String>,
}

/// One line of the exported data files.
#[derive(Serialize)]
struct Doc<'a> {
    uid: &'a str,
    task: &'static str,
    column: &'static str,
    setting: &'static str,
    kind: &'static str,
    metric: &'static str,
    /// The ground truth as text: GST's format, distances with every digit of the file's number.
    answer: String,
    scene: &'a str,
    texts: &'a [String],
    video: &'a str,
    images: &'a [String],
}

fn export_error(uid: &str, message: impl Into<String>) -> BenchError {
    BenchError::Export { uid: uid.into(), message: message.into() }
}

fn out_error(path: &Path, message: impl std::fmt::Display) -> BenchError {
    BenchError::ExportOut { path: path.into(), message: message.to_string() }
}

/// The snake-case setting name of the data files.
pub fn setting_key(setting: Setting) -> &'static str {
    match setting {
        Setting::Global => "global",
        Setting::LocalVideo => "local_video",
        Setting::LocalImage => "local_image",
    }
}

/// The answer kind's name in the data files (what gst_score.py's `extract` takes).
pub fn kind_key(kind: AnswerKind) -> &'static str {
    match kind {
        AnswerKind::Choice => "choice",
        AnswerKind::Degrees => "degrees",
        AnswerKind::Metres => "metres",
        AnswerKind::Point => "point",
    }
}

/// The lmms-eval task name of a subtask in a setting: `gst_ed_v`, `gst_edist_s_local_image`.
pub fn task_name(task: TaskId, setting: Setting) -> String {
    let column = task.column().to_ascii_lowercase();
    match setting {
        Setting::Global => format!("gst_{column}"),
        other => format!("gst_{column}_{}", setting_key(other)),
    }
}

/// The ground truth as the data files write it: GST's answer text, except that a distance keeps every
/// digit of its number (Rust's shortest round-trip form, which Python's `float` reads back exactly).
pub fn answer_text(answer: &Answer) -> String {
    match answer {
        Answer::Metres(metres) => format!("{metres}"),
        other => other.to_string(),
    }
}

/// The question files of a split: `bench/questions/*.json` when that folder exists, else `bench/*.json`,
/// in file-name order.
fn question_files(bench: &Path) -> Result<(PathBuf, Vec<PathBuf>), BenchError> {
    let nested = bench.join("questions");
    let dir = if nested.is_dir() { nested } else { bench.to_path_buf() };
    let entries = std::fs::read_dir(&dir).map_err(|e| out_error(&dir, format!("cannot list: {e}")))?;
    let mut paths = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| out_error(&dir, format!("cannot list: {e}")))?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if !name.starts_with('.') && name.ends_with(".json") && path.is_file() {
            paths.push(path);
        }
    }
    if paths.is_empty() {
        return Err(out_error(&dir, "no question files (*.json)"));
    }
    paths.sort();
    Ok((dir, paths))
}

/// `dir/relative` without `.` and `..` components (lexically), or `None` when it climbs above the root.
fn normalise(path: &Path) -> Option<PathBuf> {
    let mut parts: Vec<Component<'_>> = Vec::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => match parts.last() {
                Some(Component::Normal(_)) => {
                    parts.pop();
                }
                _ => return None,
            },
            other => parts.push(other),
        }
    }
    Some(parts.iter().collect())
}

/// Reads and checks every question; resolves each media file to its source and its path in the export.
/// Returns the questions (in file order) and the media table (export path → source file).
fn load(bench: &Path) -> Result<(Vec<ExportQuestion>, BTreeMap<String, PathBuf>), BenchError> {
    let root = std::fs::canonicalize(bench).map_err(|e| out_error(bench, format!("cannot open: {e}")))?;
    let (dir, paths) = question_files(&root)?;
    let mut seen: HashMap<String, PathBuf> = HashMap::new();
    let mut media: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut questions = Vec::with_capacity(paths.len());
    for path in paths {
        let bytes = std::fs::read(&path).map_err(|e| out_error(&path, format!("cannot read: {e}")))?;
        let raw: RawQuestion = serde_json::from_slice(&bytes)
            .map_err(|e| out_error(&path, format!("malformed question file: {e}")))?;
        let uid = raw.uid.clone();
        let question = Question::try_from(raw)
            .map_err(|error| export_error(&uid, format!("{error} (in {})", path.display())))?;
        if let Some(first) = seen.insert(uid.clone(), path.clone()) {
            return Err(export_error(
                &uid,
                format!("appears twice, in {} and {}", first.display(), path.display()),
            ));
        }
        let mut resolve = |what: &str, copied: &str| -> Result<String, BenchError> {
            let source = normalise(&dir.join(copied))
                .ok_or_else(|| export_error(&uid, format!("its {what} {copied:?} is not a valid path")))?;
            if !source.is_file() {
                return Err(export_error(&uid, format!("its {what} {} does not exist", source.display())));
            }
            let inside = match source.strip_prefix(&root) {
                Ok(relative) => relative.to_path_buf(),
                // Media outside the split folder (a release layout pointing elsewhere): keyed by file name
                // under `external/`.
                Err(_) => Path::new("external").join(source.file_name().unwrap_or_default()),
            };
            let key = format!("media/{}", inside.to_string_lossy().replace('\\', "/"));
            if let Some(existing) = media.get(&key)
                && *existing != source
            {
                return Err(export_error(
                    &uid,
                    format!(
                        "its {what} {} and {} would share the export path {key}",
                        source.display(),
                        existing.display()
                    ),
                ));
            }
            media.insert(key.clone(), source);
            Ok(key)
        };
        let video = resolve("video", &question.copied_video_path)?;
        let images = question
            .images
            .iter()
            .map(|image| resolve(&format!("image {}", image.index), &image.copied_path))
            .collect::<Result<Vec<_>, _>>()?;
        questions.push(ExportQuestion { question, video, images });
    }
    Ok((questions, media))
}

fn doc_line(q: &ExportQuestion) -> Result<String, BenchError> {
    let question = &q.question;
    let doc = Doc {
        uid: &question.uid,
        task: question.task.as_str(),
        column: question.task.column(),
        setting: setting_key(question.setting),
        kind: kind_key(question.task.answer_kind()),
        metric: question.task.metric().name(),
        answer: answer_text(&question.answer),
        scene: &question.scene,
        texts: &question.texts,
        video: &q.video,
        images: &q.images,
    };
    serde_json::to_string(&doc).map_err(|e| export_error(&question.uid, format!("cannot serialise: {e}")))
}

/// Links (or copies) every media file into `staging`.
fn place_media(staging: &Path, media: &BTreeMap<String, PathBuf>) -> Result<usize, BenchError> {
    let mut copied = 0;
    for (key, source) in media {
        let target = staging.join(key);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| out_error(parent, e))?;
        }
        if std::fs::hard_link(source, &target).is_err() {
            std::fs::copy(source, &target)
                .map_err(|e| out_error(&target, format!("cannot copy {}: {e}", source.display())))?;
            copied += 1;
        }
    }
    Ok(copied)
}

fn write_file(path: &Path, text: &str) -> Result<(), BenchError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| out_error(parent, e))?;
    }
    std::fs::write(path, text).map_err(|e| out_error(path, e))
}

/// Exports the split at `bench` to `out` (which must not exist, or be an empty folder).
pub fn export(bench: &Path, format: ExportFormat, out: &Path) -> Result<ExportSummary, BenchError> {
    let (questions, media) = load(bench)?;
    if format == ExportFormat::VlmEvalKit {
        check_vlmevalkit(&questions)?;
    }
    let final_out = absolute_out(out)?;
    let parent = final_out.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("/"));
    let name = final_out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let staging = parent.join(format!(".{name}.export-tmp-{}", std::process::id()));
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(|e| out_error(&staging, e))?;
    }
    std::fs::create_dir_all(&staging).map_err(|e| out_error(&staging, e))?;
    let result = (|| {
        let copied = place_media(&staging, &media)?;
        let subsets = match format {
            ExportFormat::LmmsEval => write_lmms_eval(&staging, &final_out, &questions)?,
            ExportFormat::VlmEvalKit => write_vlmevalkit(&staging, &questions)?,
            ExportFormat::Hf => write_hf(&staging, bench, &questions)?,
        };
        if final_out.is_dir() {
            // An empty folder is replaced; anything else is refused before we get here.
            std::fs::remove_dir(&final_out).map_err(|e| out_error(&final_out, e))?;
        }
        std::fs::rename(&staging, &final_out).map_err(|e| out_error(&final_out, e))?;
        Ok(ExportSummary {
            out: final_out.clone(),
            questions: questions.len(),
            media: media.len(),
            copied,
            subsets,
        })
    })();
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    result
}

/// `out` as an absolute path (the lmms-eval YAMLs name their data files absolutely); refuses an `out`
/// that exists and is not an empty folder.
fn absolute_out(out: &Path) -> Result<PathBuf, BenchError> {
    if out.exists() {
        let empty = std::fs::read_dir(out).map(|mut entries| entries.next().is_none()).unwrap_or(false);
        if !empty {
            return Err(out_error(
                out,
                "already exists and is not an empty folder; remove it or pick another",
            ));
        }
    }
    let absolute = if out.is_absolute() {
        out.to_path_buf()
    } else {
        std::env::current_dir().map_err(|e| out_error(out, e))?.join(out)
    };
    let name = absolute.file_name().ok_or_else(|| out_error(out, "needs a folder name"))?.to_owned();
    let parent = absolute.parent().ok_or_else(|| out_error(out, "needs a parent folder"))?;
    std::fs::create_dir_all(parent).map_err(|e| out_error(parent, e))?;
    let parent = std::fs::canonicalize(parent).map_err(|e| out_error(parent, e))?;
    Ok(parent.join(name))
}

/// Questions grouped by (task, setting), in the paper's column order.
fn by_subtask(questions: &[ExportQuestion]) -> BTreeMap<(TaskId, Setting), Vec<&ExportQuestion>> {
    let mut groups: BTreeMap<(TaskId, Setting), Vec<&ExportQuestion>> = BTreeMap::new();
    for question in questions {
        groups.entry((question.question.task, question.question.setting)).or_default().push(question);
    }
    groups
}

const LMMS_TEMPLATE: &str = "\
# Written by `gst export --format lmms-eval`: shared settings of every GST subtask.
dataset_path: json
test_split: test
output_type: generate_until
doc_to_visual: !function utils.gst_doc_to_visual
doc_to_text: !function utils.gst_doc_to_text
doc_to_messages: !function utils.gst_doc_to_messages
doc_to_target: !function utils.gst_doc_to_target
generation_kwargs:
  max_new_tokens: 64
  temperature: 0
  top_p: 1.0
  num_beams: 1
  do_sample: false
process_results: !function utils.gst_process_results
metric_list:
  - metric: gst_score
    aggregation: !function utils.gst_aggregate
    higher_is_better: true
lmms_eval_specific_kwargs:
  default:
    pre_prompt: \"\"
    post_prompt: \"\"
metadata:
  version: 0.0
";

/// A YAML double-quoted string.
fn yaml_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| format!("{text:?}"))
}

fn write_lmms_eval(
    staging: &Path,
    final_out: &Path,
    questions: &[ExportQuestion],
) -> Result<Vec<String>, BenchError> {
    write_file(&staging.join("utils.py"), LMMS_UTILS_PY)?;
    write_file(&staging.join("gst_score.py"), GST_SCORE_PY)?;
    write_file(&staging.join("_default_template_yaml"), LMMS_TEMPLATE)?;
    let mut names = Vec::new();
    let mut global = Vec::new();
    let mut local = Vec::new();
    for ((task, setting), group) in by_subtask(questions) {
        let name = task_name(task, setting);
        let mut data = String::new();
        for question in &group {
            data.push_str(&doc_line(question)?);
            data.push('\n');
        }
        let data_file = format!("data/{name}.jsonl");
        write_file(&staging.join(&data_file), &data)?;
        let yaml = format!(
            "# {column} ({setting}): {count} questions, scored with {metric}.\ntask: {name}\n\
             dataset_kwargs:\n  data_files:\n    test: {path}\ninclude: _default_template_yaml\n",
            column = task.column(),
            setting = setting.name(),
            count = group.len(),
            metric = task.metric().name(),
            path = yaml_string(&final_out.join(&data_file).to_string_lossy()),
        );
        write_file(&staging.join(format!("{name}.yaml")), &yaml)?;
        if setting.is_global() {
            global.push(name.clone())
        } else {
            local.push(name.clone())
        }
        names.push(name);
    }
    for (group, members, what) in [
        ("gst_bench", &global, "GST-Bench: the global setting; the group's gst_score is the paper's Avg"),
        (
            "gst_bench_local",
            &local,
            "GST-Bench-Local: the Local-Video and Local-Image settings of ED and EDist",
        ),
    ] {
        if members.is_empty() {
            continue;
        }
        let mut yaml = format!("# {what}.\ngroup: {group}\ntask:\n");
        for member in members {
            let _ = writeln!(yaml, "  - {member}");
        }
        yaml.push_str(
            "aggregate_metric_list:\n  - metric: gst_score\n    aggregation: mean\n    weight_by_size: false\n\
             metadata:\n  version: 0.0\n",
        );
        write_file(&staging.join(format!("{group}.yaml")), &yaml)?;
        names.push(group.to_string());
    }
    Ok(names)
}

/// The generator's manifest beside the split (`gst generate` writes `OUT/manifest.json`, the split being
/// `OUT/bench`), if there is one.
fn manifest_of(bench: &Path) -> Option<serde_json::Value> {
    let root = std::fs::canonicalize(bench).ok()?;
    let text = std::fs::read_to_string(root.parent()?.join("manifest.json")).ok()?;
    serde_json::from_str(&text).ok()
}

fn write_hf(staging: &Path, bench: &Path, questions: &[ExportQuestion]) -> Result<Vec<String>, BenchError> {
    let mut data = String::new();
    for question in questions {
        data.push_str(&doc_line(question)?);
        data.push('\n');
    }
    write_file(&staging.join("data/test.jsonl"), &data)?;
    let manifest = manifest_of(bench);
    let seed = manifest
        .as_ref()
        .and_then(|m| m.get("seed"))
        .map_or_else(|| "unknown (no manifest.json beside the split)".to_string(), |s| s.to_string());
    let mut counts = String::new();
    for ((task, setting), group) in by_subtask(questions) {
        let _ = writeln!(
            counts,
            "| {} | {} | {} | {} |",
            task.column(),
            setting.name(),
            task.metric().name(),
            group.len()
        );
    }
    let card = format!(
        "---\nlicense: cc0-1.0\npretty_name: GST-Bench (generated)\ntask_categories:\n- visual-question-answering\n\
         configs:\n- config_name: default\n  data_files:\n  - split: test\n    path: data/test.jsonl\n---\n\n\
         # GST-Bench (generated)\n\n\
         A benchmark of global spatial awareness from egocentric video in GST-Bench's layout, written by \
         `gst export --format hf`.\n\n\
         - Generator: gst-bench {version}\n- Generator seed: {seed}\n- Questions: {n}\n\
         - License: CC0-1.0 (the houses are procedural; the furniture models are Sweet Home 3D's CC0 \
         models)\n\n\
         Each line of `data/test.jsonl` is one question: `uid`, `task`, `column` (the paper's column), \
         `setting`, `kind` and `metric`, `answer` (ground truth as text), `texts` (the prompt pieces, \
         interleaved with the video and images as gst-vlm's e2e prompt does: text 0, the video, then text i \
         followed by image i), `video` and `images` (paths in this folder, under `media/`).\n\n\
         Score predictions with `gst score` (predictions as JSON lines of `uid` and the raw model output).\n\n\
         | column | setting | metric | questions |\n|---|---|---|---|\n{counts}",
        version = env!("CARGO_PKG_VERSION"),
        n = questions.len(),
    );
    write_file(&staging.join("README.md"), &card)?;
    Ok(vec!["data/test.jsonl".to_string()])
}

/// VLMEvalKit reads a video as `<root>/<video>.mp4`: every video must be an MP4 file.
fn check_vlmevalkit(questions: &[ExportQuestion]) -> Result<(), BenchError> {
    for question in questions {
        if !question.video.ends_with(".mp4") {
            return Err(export_error(
                &question.question.uid,
                format!(
                    "its video {} is not an .mp4 file, which VLMEvalKit's video datasets need",
                    question.video
                ),
            ));
        }
    }
    Ok(())
}

/// A TSV field quoted as pandas' `QUOTE_ALL` writes it (VLMEvalKit's `dump`): inside quotes, `"` doubled.
fn tsv_field(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

/// The columns of the VLMEvalKit TSVs.
const VLMEVAL_COLUMNS: [&str; 14] = [
    "index",
    "uid",
    "question",
    "video",
    "video_path",
    "texts",
    "images",
    "task",
    "column",
    "setting",
    "kind",
    "metric",
    "answer",
    "scene",
];

fn vlmeval_row(index: usize, q: &ExportQuestion) -> Result<String, BenchError> {
    let question = &q.question;
    let json = |value: &[String]| {
        serde_json::to_string(value)
            .map_err(|e| export_error(&question.uid, format!("cannot serialise: {e}")))
    };
    // The prompt's texts as one string (VLMEvalKit's `question` column; the class builds the interleaved
    // prompt from `texts` and `images`).
    let mut text = String::new();
    for (i, piece) in question.texts.iter().enumerate() {
        if i > 0 && !piece.starts_with(char::is_whitespace) {
            text.push('\n');
        }
        text.push_str(piece);
    }
    let fields = [
        index.to_string(),
        question.uid.clone(),
        text,
        q.video.strip_suffix(".mp4").unwrap_or(&q.video).to_string(),
        q.video.clone(),
        json(&question.texts)?,
        json(&q.images)?,
        question.task.as_str().to_string(),
        question.task.column().to_string(),
        setting_key(question.setting).to_string(),
        kind_key(question.task.answer_kind()).to_string(),
        question.task.metric().name().to_string(),
        answer_text(&question.answer),
        question.scene.clone(),
    ];
    Ok(fields.iter().map(|field| tsv_field(field)).collect::<Vec<_>>().join("\t"))
}

fn write_vlmevalkit(staging: &Path, questions: &[ExportQuestion]) -> Result<Vec<String>, BenchError> {
    write_file(&staging.join("gst_vlmeval.py"), VLMEVAL_PY)?;
    write_file(&staging.join("gst_score.py"), GST_SCORE_PY)?;
    let mut names = Vec::new();
    for (name, global) in [(VLMEVAL_GLOBAL, true), (VLMEVAL_LOCAL, false)] {
        let mut rows: Vec<&ExportQuestion> =
            questions.iter().filter(|q| q.question.setting.is_global() == global).collect();
        if rows.is_empty() {
            continue;
        }
        // The paper's column order, then file order within a column.
        rows.sort_by_key(|q| (q.question.task, q.question.setting));
        let header = VLMEVAL_COLUMNS.iter().map(|c| tsv_field(c)).collect::<Vec<_>>().join("\t");
        let mut table = header;
        table.push('\n');
        for (index, question) in rows.iter().enumerate() {
            table.push_str(&vlmeval_row(index, question)?);
            table.push('\n');
        }
        write_file(&staging.join(format!("{name}.tsv")), &table)?;
        names.push(name.to_string());
    }
    Ok(names)
}
