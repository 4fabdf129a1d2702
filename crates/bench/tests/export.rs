//! `gst export`: the lmms-eval task folder scores exactly as `gst score` (its utils.py run through a shim of
//! lmms-eval's task loader, `tests/harness/lmms_task_check.py`, with the project's Python), so does the
//! VLMEvalKit dataset (its gst_vlmeval.py run as the entry point over a shim of the vlmeval modules it
//! touches, `tests/harness/vlmeval_shim/`, by `tests/harness/vlmeval_check.py`), the release's samples
//! export and load in every format, and bad input fails naming the question with nothing written.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use gst_bench::export::{ExportFormat, VLMEVAL_GLOBAL, VLMEVAL_LOCAL, export, setting_key, task_name};
use gst_bench::{Predictions, score};
use gst_core::{Answer, AnswerKind, Question, QuestionImage, Setting, TaskId};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The project's Python (`make setup`'s .venv, which has PyYAML); `GST_PYTHON` overrides it.
fn python() -> PathBuf {
    if let Ok(python) = std::env::var("GST_PYTHON") {
        return python.into();
    }
    let venv = repo().join(".venv/bin/python");
    assert!(venv.exists(), "{} is missing: run `make setup` (or set GST_PYTHON)", venv.display());
    venv
}

fn run_check(export_dir: &Path, predictions: Option<&Path>, cases: Option<&Path>) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/harness/lmms_task_check.py");
    let mut command = Command::new(python());
    command.arg(script).arg(export_dir);
    command.arg(predictions.map(Path::as_os_str).unwrap_or_default());
    if let Some(cases) = cases {
        command.arg(cases);
    }
    let output = command.output().expect("run python");
    assert!(output.status.success(), "task check failed:\n{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("task check prints JSON")
}

fn answer_for(task: TaskId, k: usize) -> Answer {
    match task.answer_kind() {
        AnswerKind::Choice => Answer::Choice(['A', 'B', 'C', 'D'][k % 4]),
        AnswerKind::Degrees => Answer::Degrees(((k * 73) % 361) as i32 - 180),
        AnswerKind::Metres => Answer::Metres(0.5 + (k * 7 % 90) as f64 / 10.0),
        AnswerKind::Point => Answer::Point([(k * 131 % 1000) as u32, (k * 257 % 1000) as u32]),
    }
}

/// A model's raw output for a question, in one of several styles (exact, near, verbose, unit-laden,
/// reasoning, unparseable); `None` leaves the question unanswered.
fn prediction_for(answer: &Answer, k: usize) -> Option<String> {
    let style = k % 7;
    let text = match (*answer, style) {
        (_, 6) => return None,
        (_, 5) => "I cannot tell from the video.".to_string(),
        (Answer::Choice(c), 0) => c.to_string(),
        (Answer::Choice(c), 1) => format!("The answer is ({c})."),
        (Answer::Choice(_), 2) => "Option A has too many rooms; the answer is B".to_string(),
        (Answer::Choice(c), 3) => format!("<think>maybe A</think><answer>{c}</answer>"),
        (Answer::Choice(_), _) => "A good match is the third map, (C).".to_string(),
        (Answer::Degrees(d), 0) => d.to_string(),
        (Answer::Degrees(d), 1) => format!("About {}° to my left.", d + (k * 3 % 61) as i32),
        (Answer::Degrees(d), 2) => format!("\u{2212}{} degrees", d.abs() + 12),
        (Answer::Degrees(d), 3) => format!("{}", d + 360 + 33),
        (Answer::Degrees(d), _) => format!("Answer: {}.5", d - 19 - (k % 3) as i32 * 2),
        (Answer::Metres(m), 0) => format!("{m:.1}"),
        (Answer::Metres(m), 1) => format!("about {:.0} cm", m * 113.0),
        (Answer::Metres(m), 2) => {
            format!("It took 2 minutes; the object is {:.2} metres away.", m * (0.5 + (k % 10) as f64 / 10.0))
        }
        (Answer::Metres(m), 3) => format!("{:.1} feet", m * 3.0),
        (Answer::Metres(m), _) => format!("Answer: {:.1}", m * 1.45),
        (Answer::Point([x, y]), 0) => format!("<point>{x} {y}</point>"),
        (Answer::Point([x, y]), 1) => {
            format!("I am at ({}, {}).", x + (k * 11 % 300) as u32, y.saturating_sub(25))
        }
        (Answer::Point([x, y]), 2) => format!("x = {}, y = {}", x / 2, y),
        (Answer::Point([x, y]), 3) => format!("The image is 640x512; my answer is [{}.4,{}.6]", x, y + 90),
        (Answer::Point([x, y]), _) => format!("({}, {y})", x as usize + 42 - (k % 3) * 2),
    };
    Some(text)
}

struct Bench {
    _dir: tempfile::TempDir,
    root: PathBuf,
    questions: Vec<Question>,
}

/// A split in `gst generate`'s layout: questions/*.json, videos/ and images/ (dummy bytes: the exporter
/// links files, it never decodes them). Every task, the local settings of ED and EDist, 21 questions each.
fn synthetic_bench() -> Bench {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("bench");
    let mut questions = Vec::new();
    let mut k = 0;
    for task in TaskId::ALL {
        let settings: &[Setting] = if task.has_local_settings() { &Setting::ALL } else { &[Setting::Global] };
        for &setting in settings {
            for i in 0..21 {
                k += 1;
                let scene = format!("scene_{:03}", i % 3);
                let video = format!("videos/{scene}/video{}.mp4", i % 2);
                let images: Vec<String> = match task.answer_kind() {
                    AnswerKind::Choice => {
                        (0..4).map(|o| format!("images/{scene}/option_{}_{o}.png", k % 5)).collect()
                    }
                    _ => vec![format!("images/{scene}/view_{i}.png")],
                };
                for path in std::iter::once(&video).chain(&images) {
                    let path = root.join(path);
                    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                    std::fs::write(&path, path.to_string_lossy().as_bytes()).unwrap();
                }
                let mut texts =
                    vec!["This is the exploration video of you in the entire scene earlier:".into()];
                texts.extend(
                    images.iter().enumerate().map(|(o, _)| format!("\n{}.", ['A', 'B', 'C', 'D'][o])),
                );
                texts.push("Please answer directly.".into());
                let question = Question {
                    task,
                    uid: format!("{scene}_{}_{k}", task.column()),
                    scene: scene.clone(),
                    answer: answer_for(task, k),
                    texts,
                    source_video_path: video.clone(),
                    copied_video_path: format!("../{video}"),
                    images: images
                        .iter()
                        .enumerate()
                        .map(|(o, path)| QuestionImage {
                            index: o as u32 + 1,
                            source_path: path.clone(),
                            copied_path: format!("../{path}"),
                        })
                        .collect(),
                    setting,
                };
                gst_io::gst::write_question(
                    &root.join("questions").join(format!("{}.json", question.uid)),
                    &question,
                )
                .unwrap();
                questions.push(question);
            }
        }
    }
    Bench { _dir: dir, root, questions }
}

#[test]
fn lmms_eval_task_scores_exactly_as_gst_score() {
    let bench = synthetic_bench();
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("lmms");
    let summary = export(&bench.root, ExportFormat::LmmsEval, &out).unwrap();
    assert_eq!(summary.questions, bench.questions.len());
    assert!(summary.subsets.contains(&"gst_bench".to_string()));
    assert!(summary.subsets.contains(&"gst_bench_local".to_string()));

    // Media are hard links of the bench's files, not new files.
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let source = std::fs::metadata(bench.root.join("videos/scene_000/video0.mp4")).unwrap();
        let linked = std::fs::metadata(out.join("media/videos/scene_000/video0.mp4")).unwrap();
        assert_eq!((source.ino(), source.dev()), (linked.ino(), linked.dev()));
    }

    let (predictions_path, texts) = write_predictions(&bench, work.path());
    let report = score(&bench.questions, &Predictions::read(&predictions_path).unwrap()).unwrap();

    // Every prediction text, extracted by Rust, is what gst_score.py must extract.
    let cases: Vec<serde_json::Value> = bench
        .questions
        .iter()
        .zip(&report.per_question)
        .filter_map(|(question, scored)| {
            let text = texts.iter().find(|(uid, _)| *uid == question.uid)?.1.clone();
            let kind = gst_bench::export::kind_key(question.task.answer_kind());
            let expected = match &scored.outcome {
                gst_bench::Outcome::Extracted(Answer::Choice(c)) => serde_json::json!(c.to_string()),
                gst_bench::Outcome::Extracted(Answer::Degrees(d)) => serde_json::json!(d),
                gst_bench::Outcome::Extracted(Answer::Metres(m)) => serde_json::json!(m),
                gst_bench::Outcome::Extracted(Answer::Point(p)) => serde_json::json!(p),
                _ => serde_json::Value::Null,
            };
            Some(serde_json::json!({"kind": kind, "text": text, "expected": expected}))
        })
        .collect();
    let cases_path = work.path().join("cases.json");
    std::fs::write(&cases_path, serde_json::to_string(&cases).unwrap()).unwrap();

    let result = run_check(&out, Some(&predictions_path), Some(&cases_path));
    assert_eq!(result["extract_mismatches"], serde_json::json!([]), "Python and Rust extraction differ");
    assert_eq!(result["documents"].as_u64(), Some(bench.questions.len() as u64));
    let harness: BTreeMap<String, f64> =
        serde_json::from_value(result["tasks"].clone()).expect("task scores");
    assert_eq!(harness.len(), report.cells.len(), "one lmms-eval task per subtask and setting");
    let mut distinct = std::collections::BTreeSet::new();
    for (&(task, setting), cell) in &report.cells {
        let ours = cell.mean_pct().unwrap();
        let theirs = harness[&task_name(task, setting)];
        assert!(
            (ours - theirs).abs() < 0.01,
            "{} {}: gst score {ours}, lmms-eval {theirs}",
            task.column(),
            setting
        );
        distinct.insert((ours * 1000.0).round() as i64);
    }
    assert!(distinct.len() > 3, "the predictions must give different scores per column: {distinct:?}");
    let avg = report.average_pct().unwrap();
    let group = result["groups"]["gst_bench"].as_f64().unwrap();
    assert!((avg - group).abs() < 0.01, "Avg: gst score {avg}, lmms-eval group {group}");
}

/// Writes the predictions of [`prediction_for`] as our JSONL; returns its path and the texts by uid.
fn write_predictions(bench: &Bench, dir: &Path) -> (PathBuf, Vec<(String, String)>) {
    let mut lines = String::new();
    let mut texts = Vec::new();
    for (k, question) in bench.questions.iter().enumerate() {
        if let Some(text) = prediction_for(&question.answer, k) {
            lines.push_str(&serde_json::json!({"uid": question.uid, "prediction": text}).to_string());
            lines.push('\n');
            texts.push((question.uid.clone(), text));
        }
    }
    let path = dir.join("predictions.jsonl");
    std::fs::write(&path, &lines).unwrap();
    (path, texts)
}

fn run_vlmeval_check(export_dir: &Path, predictions: &Path, work: &Path) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/harness/vlmeval_check.py");
    let output =
        Command::new(python()).arg(script).arg(export_dir).arg(predictions).arg(work).output().unwrap();
    assert!(output.status.success(), "vlmeval check failed:\n{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).expect("vlmeval check prints JSON")
}

#[test]
fn vlmevalkit_dataset_scores_exactly_as_gst_score() {
    let bench = synthetic_bench();
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("vlmeval");
    let summary = export(&bench.root, ExportFormat::VlmEvalKit, &out).unwrap();
    assert_eq!(summary.questions, bench.questions.len());
    assert_eq!(summary.subsets, [VLMEVAL_GLOBAL, VLMEVAL_LOCAL]);
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let source = std::fs::metadata(bench.root.join("videos/scene_001/video1.mp4")).unwrap();
        let linked = std::fs::metadata(out.join("media/videos/scene_001/video1.mp4")).unwrap();
        assert_eq!((source.ino(), source.dev()), (linked.ino(), linked.dev()));
    }

    let (predictions_path, _) = write_predictions(&bench, work.path());
    let report = score(&bench.questions, &Predictions::read(&predictions_path).unwrap()).unwrap();
    let result = run_vlmeval_check(&out, &predictions_path, work.path());

    // Every column of VLMEvalKit's evaluation equals gst score's, and so does the Avg, with the prediction
    // table written as xlsx (VLMEvalKit's default) and as tsv; `gst score` reads both back to the same.
    for suffix in ["xlsx", "tsv"] {
        let runs = &result["runs"][suffix];
        let mut compared = 0;
        let mut distinct = std::collections::BTreeSet::new();
        for (&(task, setting), cell) in &report.cells {
            let name = if setting.is_global() { VLMEVAL_GLOBAL } else { VLMEVAL_LOCAL };
            let table = runs[name]["table"].as_array().unwrap();
            let row = table
                .iter()
                .find(|row| row["column"] == task.column() && row["setting"] == setting_key(setting))
                .unwrap_or_else(|| panic!("no row for {} {setting} in {table:?}", task.column()));
            let (ours, theirs) = (cell.mean_pct().unwrap(), row["score"].as_f64().unwrap());
            assert!(
                (ours - theirs).abs() < 0.01,
                "{suffix} {} {setting}: gst score {ours}, VLMEvalKit {theirs}",
                task.column()
            );
            assert_eq!(row["questions"].as_u64(), Some(cell.questions as u64));
            distinct.insert((ours * 1000.0).round() as i64);
            compared += 1;
        }
        assert_eq!(compared, report.cells.len());
        assert!(compared > 12, "the global columns and local cells: {compared}");
        assert!(distinct.len() > 3, "the predictions must give different scores per column: {distinct:?}");
        let global = runs[VLMEVAL_GLOBAL]["table"].as_array().unwrap();
        let avg_row = global.iter().find(|row| row["column"] == "Avg").unwrap();
        let avg = report.average_pct().unwrap();
        assert!((avg - avg_row["score"].as_f64().unwrap()).abs() < 0.01, "Avg: {avg} vs {avg_row}");

        for (name, global) in [(VLMEVAL_GLOBAL, true), (VLMEVAL_LOCAL, false)] {
            let file = PathBuf::from(runs[name]["result_file"].as_str().unwrap());
            let (imported, format) = gst_bench::import::read_predictions(&file).unwrap();
            let expected = if suffix == "xlsx" {
                gst_bench::import::PredictionFormat::VlmEvalKitXlsx
            } else {
                gst_bench::import::PredictionFormat::VlmEvalKitTsv
            };
            assert_eq!(format, expected);
            let questions: Vec<Question> =
                bench.questions.iter().filter(|q| q.setting.is_global() == global).cloned().collect();
            gst_bench::import::check_complete(&questions, &imported).unwrap();
            let again = score(&questions, &imported).unwrap();
            for (key, cell) in &again.cells {
                assert!((cell.total - report.cells[key].total).abs() < 1e-9, "{suffix} {key:?}");
            }
        }
    }

    // Bad prediction tables: a question without a row, a question twice, an unknown uid.
    let uids: Vec<String> = serde_json::from_value(result["uids"].clone()).unwrap();
    let error = |what: &str| result["errors"][what].as_str().unwrap_or_default().to_string();
    assert!(
        error("missing").contains(&uids[1]) && error("missing").contains("no prediction"),
        "{}",
        error("missing")
    );
    assert!(
        error("duplicate").contains(&uids[2]) && error("duplicate").contains("already"),
        "{}",
        error("duplicate")
    );
    assert!(error("unknown").contains("'nope'"), "{}", error("unknown"));
}

#[test]
fn the_released_samples_export_and_load() {
    let work = tempfile::tempdir().unwrap();
    let bench = work.path().join("samples");
    std::fs::create_dir_all(&bench).unwrap();
    let samples = repo().join("tests/data/gst-samples");
    let mut count = 0;
    for entry in std::fs::read_dir(&samples).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|ext| ext != "json") {
            continue;
        }
        count += 1;
        std::fs::copy(&path, bench.join(path.file_name().unwrap())).unwrap();
        // The release ships its questions without media: stand-ins at the paths the files name.
        let question: Question = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for media in std::iter::once(&question.copied_video_path)
            .chain(question.images.iter().map(|image| &image.copied_path))
        {
            std::fs::write(bench.join(media), b"stand-in").unwrap();
        }
    }
    assert_eq!(count, 6);
    let out = work.path().join("lmms");
    let summary = export(&bench, ExportFormat::LmmsEval, &out).unwrap();
    assert_eq!(summary.questions, 6);
    let result = run_check(&out, None, None);
    assert_eq!(result["documents"].as_u64(), Some(6));
    assert_eq!(result["tasks"].as_object().map(|tasks| tasks.len()), Some(6));

    // The prompt keeps the release's texts in order, each image after its text (TDS_E: "A." then option A).
    let data = std::fs::read_to_string(out.join("data/gst_tds_e.jsonl")).unwrap();
    let doc: serde_json::Value = serde_json::from_str(data.lines().next().unwrap()).unwrap();
    assert_eq!(doc["answer"], "C");
    assert_eq!(doc["images"][0], "media/image_01_school_geography.png");
    assert_eq!(doc["texts"][1].as_str().map(|t| t.ends_with("\nA.")), Some(true));

    // The VLMEvalKit form of the samples loads through the dataset class and scores a prediction table.
    let vlmeval = work.path().join("vlmeval");
    let summary = export(&bench, ExportFormat::VlmEvalKit, &vlmeval).unwrap();
    assert_eq!(summary.subsets, [VLMEVAL_GLOBAL]);
    let predictions = work.path().join("sample-predictions.jsonl");
    std::fs::write(&predictions, "").unwrap();
    let result = run_vlmeval_check(&vlmeval, &predictions, work.path());
    let table = result["runs"]["xlsx"][VLMEVAL_GLOBAL]["table"].as_array().unwrap();
    assert_eq!(table.len(), 7, "six columns and the Avg: {table:?}");
    assert!(table.iter().all(|row| row["score"].as_f64() == Some(0.0)), "no predictions score zero");

    let hf = work.path().join("hf");
    export(&bench, ExportFormat::Hf, &hf).unwrap();
    let card = std::fs::read_to_string(hf.join("README.md")).unwrap();
    assert!(card.contains("license:") && card.contains("Generator seed") && card.contains("gst-bench 0."));
    assert_eq!(std::fs::read_to_string(hf.join("data/test.jsonl")).unwrap().lines().count(), 6);
}

fn leftovers(parent: &Path) -> Vec<String> {
    std::fs::read_dir(parent)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains("export-tmp") || name == "out")
        .collect()
}

#[test]
fn bad_input_names_the_question_and_writes_nothing() {
    let bench = synthetic_bench();
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");

    // Missing media: one question's image points at a file that is not there.
    let victim = &bench.questions[20];
    let path = bench.root.join("questions").join(format!("{}.json", victim.uid));
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replacen(&victim.images[0].copied_path, "../images/lost.png", 1)).unwrap();
    let error = export(&bench.root, ExportFormat::LmmsEval, &out).unwrap_err().to_string();
    assert!(error.contains(&victim.uid) && error.contains("lost.png does not exist"), "{error}");
    assert!(leftovers(work.path()).is_empty(), "{:?}", leftovers(work.path()));
    std::fs::write(&path, text).unwrap();

    // A task the exporter does not know.
    let path = bench.root.join("questions").join(format!("{}.json", bench.questions[3].uid));
    let text = std::fs::read_to_string(&path).unwrap();
    let renamed = text.replacen(bench.questions[3].task.as_str(), "Object_Counting", 1);
    std::fs::write(&path, renamed).unwrap();
    let error = export(&bench.root, ExportFormat::Hf, &out).unwrap_err().to_string();
    assert!(error.contains(&bench.questions[3].uid) && error.contains("Object_Counting"), "{error}");
    assert!(leftovers(work.path()).is_empty());
    std::fs::write(&path, text).unwrap();

    // VLMEvalKit reads `<video>.mp4`: another container is refused, naming the question.
    let victim = &bench.questions[5];
    let path = bench.root.join("questions").join(format!("{}.json", victim.uid));
    let text = std::fs::read_to_string(&path).unwrap();
    let avi = victim.copied_video_path.replace(".mp4", ".avi");
    std::fs::copy(
        bench.root.join(victim.copied_video_path.trim_start_matches("../")),
        bench.root.join(avi.trim_start_matches("../")),
    )
    .unwrap();
    std::fs::write(&path, text.replacen(&victim.copied_video_path, &avi, 1)).unwrap();
    let error = export(&bench.root, ExportFormat::VlmEvalKit, &out).unwrap_err().to_string();
    assert!(error.contains(&victim.uid) && error.contains("not an .mp4"), "{error}");
    assert!(leftovers(work.path()).is_empty());
    std::fs::write(&path, text).unwrap();

    // An OUT that holds something is never touched.
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("keep.txt"), b"mine").unwrap();
    let error = export(&bench.root, ExportFormat::LmmsEval, &out).unwrap_err().to_string();
    assert!(error.contains("already exists"), "{error}");
    assert_eq!(std::fs::read(out.join("keep.txt")).unwrap(), b"mine");
    std::fs::remove_dir_all(&out).unwrap();
    export(&bench.root, ExportFormat::LmmsEval, &out).unwrap();
    assert!(out.join("gst_bench.yaml").is_file());
}
