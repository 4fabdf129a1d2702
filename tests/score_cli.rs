//! `gst score` end to end: question files and predictions in a directory, the tables as text and JSON,
//! and clear errors for predictions and question files that do not fit.

mod common;

use std::path::Path;

use common::{assert_clean_failure, run};
use gst_core::{Answer, Question, Setting, TaskId};

fn question(uid: &str, task: TaskId, answer: Answer, setting: Setting) -> Question {
    Question {
        task,
        uid: uid.into(),
        scene: "scene_1".into(),
        answer,
        texts: vec!["This is the exploration video of you in the entire scene earlier:".into()],
        source_video_path: "videos/scene_1/video0.mp4".into(),
        copied_video_path: "video0.mp4".into(),
        images: Vec::new(),
        setting,
    }
}

/// A small split: `dir/questions/*.json` and `dir/predictions.jsonl`. Expected global scores: ED_v,
/// EDist_v and Pos 100, TDS_E 50 (one right, one wrong), Traj 0 (no prediction): Avg 70.
fn write_split(dir: &Path) -> anyhow::Result<()> {
    let questions = [
        (
            question("q1", TaskId::EgocentricDirectionVisual, Answer::Degrees(-134), Setting::Global),
            Some("-134°"),
        ),
        (
            question("q2", TaskId::EgocentricDistanceVisual, Answer::Metres(13.2), Setting::Global),
            Some("about 13.2 m"),
        ),
        (
            question("q3", TaskId::SelfPosition, Answer::Point([391, 698]), Setting::Global),
            Some("I am at (391, 698)."),
        ),
        (
            question("q4", TaskId::TopdownSelectionEasy, Answer::Choice('C'), Setting::Global),
            Some("The answer is B."),
        ),
        (question("q5", TaskId::TopdownSelectionEasy, Answer::Choice('A'), Setting::Global), Some("A")),
        (question("q6", TaskId::TrajectorySelection, Answer::Choice('B'), Setting::Global), None),
        (
            question("q7", TaskId::EgocentricDistanceSemantic, Answer::Metres(2.0), Setting::LocalImage),
            Some("2.0"),
        ),
    ];
    let mut predictions = String::new();
    for (question, prediction) in &questions {
        gst_io::write_question(&dir.join("questions").join(format!("{}.json", question.uid)), question)?;
        if let Some(text) = prediction {
            let line = serde_json::json!({"uid": question.uid, "prediction": text});
            predictions.push_str(&format!("{line}\n"));
        }
    }
    std::fs::write(dir.join("predictions.jsonl"), predictions)?;
    Ok(())
}

fn path_arg(path: &Path) -> &str {
    path.to_str().unwrap_or_default()
}

#[test]
fn score_prints_the_papers_table_with_our_row_and_the_local_table() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    write_split(dir.path())?;
    let predictions = dir.path().join("predictions.jsonl");
    let output = run(&["score", "--bench", path_arg(dir.path()), "--predictions", path_arg(&predictions)]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let text = String::from_utf8(output.stdout)?;
    for needle in
        ["ED_v", "EDist_s", "TDS_H", "Avg", "Human Level", "Random Guessing", "Gemini-3-Pro (best VLM)"]
    {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    let ours = text.lines().find(|line| line.starts_with("ours ")).unwrap_or_default();
    let cells: Vec<&str> = ours.split_whitespace().collect();
    assert_eq!(
        cells,
        ["ours", "100.00", "100.00", "-", "-", "-", "-", "100.00", "-", "50.00", "-", "-", "0.00", "70.00"],
        "{text}"
    );
    assert!(text.contains("GST-Bench-Local") && text.contains("ours (semantic)"), "{text}");
    assert!(text.contains("1 without a prediction"), "{text}");
    Ok(())
}

#[test]
fn score_json_gives_the_same_numbers() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    write_split(dir.path())?;
    let predictions = dir.path().join("predictions.jsonl");
    let bench = dir.path().join("questions");
    let output =
        run(&["score", "--bench", path_arg(&bench), "--predictions", path_arg(&predictions), "--json"]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let ours = &json["main"]["rows"][0];
    assert_eq!(ours["model"], "ours");
    assert_eq!(ours["source"], "ours");
    assert_eq!(ours["scores"]["TDS_E"], 50.0);
    assert_eq!(ours["scores"]["Avg"], 70.0);
    assert!(ours["scores"].get("GP_v").is_none(), "columns without questions are left out");
    assert_eq!(ours["questions"]["TDS_E"], 2);
    assert_eq!(json["main"]["rows"][2]["model"], "Random Guessing");
    assert_eq!(json["main"]["rows"][2]["scores"]["EDist_v"], 23.22);
    assert_eq!(json["summary"]["missing"], 1);
    assert_eq!(json["summary"]["questions"], 7);
    assert_eq!(json["local"]["rows"][0]["scores"]["EDist Local-Image"], 100.0);
    Ok(())
}

#[test]
fn the_release_samples_score_100_with_their_own_answers() -> anyhow::Result<()> {
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gst-samples");
    let dir = tempfile::tempdir()?;
    let mut predictions = String::new();
    for file in gst_io::read_question_dir(&samples, gst_io::QuestionReadOptions::default())? {
        let line =
            serde_json::json!({"uid": file.question.uid, "prediction": file.question.answer.to_string()});
        predictions.push_str(&format!("{line}\n"));
    }
    let path = dir.path().join("p.jsonl");
    std::fs::write(&path, predictions)?;
    let output = run(&["score", "--bench", path_arg(&samples), "--predictions", path_arg(&path), "--json"]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let scores = json["main"]["rows"][0]["scores"].as_object().cloned().unwrap_or_default();
    assert_eq!(scores.len(), 7, "six sample columns and Avg: {scores:?}");
    assert!(scores.values().all(|score| *score == 100.0), "{scores:?}");
    Ok(())
}

#[test]
fn unknown_uids_and_bad_question_files_are_clear_errors() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    write_split(dir.path())?;
    let predictions = dir.path().join("predictions.jsonl");
    let mut text = std::fs::read_to_string(&predictions)?;
    text.push_str("{\"uid\": \"not_in_this_split\", \"prediction\": \"A\"}\n");
    std::fs::write(&predictions, text)?;
    let output = run(&["score", "--bench", path_arg(dir.path()), "--predictions", path_arg(&predictions)]);
    assert_clean_failure(&output, &["predictions.jsonl, line 7", "not_in_this_split"]);

    let output = run(&["score", "--bench", path_arg(dir.path()), "--predictions", "/nonexistent/p.jsonl"]);
    assert_clean_failure(&output, &["/nonexistent/p.jsonl"]);

    std::fs::copy(common::bad("questions/unknown_task.json"), dir.path().join("questions/zz.json"))?;
    let output = run(&["score", "--bench", path_arg(dir.path()), "--predictions", path_arg(&predictions)]);
    assert_clean_failure(&output, &["zz.json", "unknown task id"]);
    Ok(())
}
