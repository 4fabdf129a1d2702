//! `gst eval --answerer map` end to end: one small generated house, SLAM, the semantic map and the
//! geometric answerer over every subtask; the scores must beat the paper's random row on every column.
//! Object classes come from the export's instance masks (`--perception oracle`, named so in the row), so
//! that the semantic columns measure the map rather than a detector.

mod common;

use std::path::Path;

use common::run;

/// A 3–4 room house explored for `duration_s` at 10 fps, primitive furniture, every subtask; two targets of
/// each kind, so that no column rests on a single question.
fn small_config(duration_s: [f64; 2]) -> String {
    let [from, to] = duration_s;
    format!(
        r#"{{
  "scene": {{ "plan": {{ "min_rooms": 3, "max_rooms": 4 }} }},
  "explore": {{ "duration_s": [{from:.1}, {to:.1}] }},
  "current_views": 4,
  "visual_targets": 2,
  "semantic_targets": 2,
  "trajectory_questions": 1,
  "topdown_questions": 1
}}"#
    )
}

/// The test house's exploration: 60–90 s (GST's explorations walk the whole house; the bench-map scenes are
/// explored as long).
const EXPLORATION_S: [f64; 2] = [60.0, 90.0];

/// A short exploration of the same house (seed 5): less of each room is seen from anywhere near the current
/// views' viewpoints.
const SHORT_EXPLORATION_S: [f64; 2] = [40.0, 50.0];

/// The least average of the headline path on the test house: well above the paper's random row (20.0).
const HEADLINE_FLOOR: f64 = 60.0;

/// What the RGB-D track lists under the data folder (docs/protocol.md): the bench folder, its question
/// files, videos and images, and per scene the export's intrinsics and depth stream.
fn track_allows(relative: &str) -> bool {
    let parts: Vec<&str> = relative.split('/').collect();
    matches!(
        parts.as_slice(),
        [] | [""]
            | ["bench"]
            | ["bench", "questions" | "videos" | "images", ..]
            | ["bench", "tum"]
            | ["bench", "tum", _]
            | ["bench", "tum", _, "calibration.yaml" | "depth.txt" | "depth", ..]
    )
}

/// The opened paths under `data` (the folder `gst generate` wrote) that the track does not list.
fn forbidden_reads(data: &Path, opened: &[String]) -> Vec<String> {
    let root = format!("{}/", data.display());
    let mut out: Vec<String> = opened
        .iter()
        .filter_map(|p| p.strip_prefix(&root).map(|r| (p, r)))
        .filter(|(_, relative)| !track_allows(relative.trim_end_matches('/')))
        .map(|(p, _)| p.clone())
        .collect();
    out.sort();
    out.dedup();
    out
}

#[test]
fn the_track_lists_the_question_files_and_the_depth_stream_only() {
    for allowed in [
        "bench",
        "bench/questions/q.json",
        "bench/videos/scene_000/explore.mp4",
        "bench/images/a.png",
        "bench/tum/scene_000/depth.txt",
        "bench/tum/scene_000/depth/1.png",
        "bench/tum/scene_000/calibration.yaml",
    ] {
        assert!(track_allows(allowed), "{allowed}");
    }
    for forbidden in [
        "manifest.json",
        "bench/tum/scene_000/rgb/1.png",
        "bench/tum/scene_000/rgb.txt",
        "bench/tum/scene_000/groundtruth.txt",
        "bench/tum/scene_000/instances/1.png",
        "bench/scenes/scene_000/scene.json",
        "train/questions/q.json",
    ] {
        assert!(!track_allows(forbidden), "{forbidden}");
    }
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap_or_default()
}

/// The acceptance bar of the map baseline (issue 6): every column above the paper's random row.
#[test]
fn the_map_baseline_beats_random_guessing_on_every_column() -> anyhow::Result<()> {
    beats_random_on_every_column(EXPLORATION_S)
}

/// The same bar after a short exploration. Ignored because it does not hold: ED_s scores 0 on its 2
/// questions (random: 17.3) — 3 of the 4 current views are not relocalised (see the README's relocalisation
/// results). `make test-acceptance` runs it.
#[test]
#[ignore = "known failure: after a 40–50 s exploration 3 of 4 current views are not relocalised (ED_s 0)"]
fn the_map_baseline_beats_random_guessing_after_a_short_exploration() -> anyhow::Result<()> {
    beats_random_on_every_column(SHORT_EXPLORATION_S)
}

/// Generates one house explored for `duration_s` (seed 5), answers it with the map baseline (oracle objects)
/// and checks every column against the random row, one prediction per question, and that a rerun answers
/// nothing again.
fn beats_random_on_every_column(duration_s: [f64; 2]) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("small.json");
    std::fs::write(&config, small_config(duration_s))?;
    let data = dir.path().join("data");
    let output = run(&[
        "generate",
        "--scenes",
        "1",
        "--seed",
        "5",
        "--out",
        path(&data),
        "--config",
        path(&config),
        "--primitives",
    ]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let out = dir.path().join("eval");
    let bench = data.join("bench");
    let eval = || {
        run(&[
            "eval",
            "--bench",
            path(&bench),
            "--answerer",
            "map",
            "--perception",
            "oracle",
            "--out",
            path(&out),
            "--json",
        ])
    };
    let output = eval();
    assert!(output.status.success(), "{}", common::stderr(&output));
    let scores: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    assert_eq!(
        scores,
        serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(out.join("scores.json"))?)?
    );
    let rows = scores["main"]["rows"].as_array().ok_or_else(|| anyhow::anyhow!("no rows: {scores}"))?;
    let ours =
        rows.iter().find(|r| r["source"] == "ours").ok_or_else(|| anyhow::anyhow!("no row of ours"))?;
    let random = rows
        .iter()
        .find(|r| r["model"] == "Random Guessing")
        .ok_or_else(|| anyhow::anyhow!("no random row"))?;
    assert!(ours["model"].as_str().unwrap_or_default().contains("oracle"), "{ours}");
    let columns = scores["main"]["columns"].as_array().ok_or_else(|| anyhow::anyhow!("no columns"))?;
    let mut checked = 0;
    for column in columns.iter().filter_map(|c| c.as_str()) {
        let questions = ours["questions"][column].as_u64().unwrap_or(0);
        if column == "Avg" || questions == 0 {
            continue;
        }
        let (score, chance) = (ours["scores"][column].as_f64(), random["scores"][column].as_f64());
        let (Some(score), Some(chance)) = (score, chance) else {
            anyhow::bail!("{column}: no score in {scores}")
        };
        assert!(score > chance, "{column}: {score} on {questions} questions, random {chance}\n{scores}");
        checked += 1;
    }
    assert_eq!(checked, 12, "every column has questions: {scores}");

    // The headline path (SLAM poses, red boxes and the built-in object classifier: `gst eval --answerer map`
    // with its defaults) in its own output folder, under strace: it opens nothing of the data folder that
    // the RGB-D track does not list, and scores well above random.
    let headline_out = dir.path().join("eval-headline");
    let headline_args =
        ["eval", "--bench", path(&bench), "--answerer", "map", "--out", path(&headline_out), "--json"];
    if let Some(common::Traced { output, opened }) = common::opened_paths(&headline_args)? {
        assert!(output.status.success(), "{}", common::stderr(&output));
        let forbidden = forbidden_reads(&data, &opened);
        assert!(forbidden.is_empty(), "the RGB-D track may not read these: {forbidden:#?}");
        assert!(opened.iter().any(|p| p.ends_with("explore.mp4")), "the exploration video was not read");
        let headline: serde_json::Value = serde_json::from_slice(&output.stdout)?;
        let rows = headline["main"]["rows"].as_array().ok_or_else(|| anyhow::anyhow!("no rows"))?;
        let ours =
            rows.iter().find(|r| r["source"] == "ours").ok_or_else(|| anyhow::anyhow!("no row of ours"))?;
        let (avg, chance) = (
            ours["scores"]["Avg"].as_f64().unwrap_or(0.0),
            random["scores"]["Avg"].as_f64().unwrap_or(100.0),
        );
        assert!(
            avg >= HEADLINE_FLOOR,
            "headline average {avg} below {HEADLINE_FLOOR} (random {chance}): {headline}"
        );
    } else {
        assert!(std::env::var_os("GST_REQUIRE_STRACE").is_none(), "strace is not installed (make setup)");
        eprintln!("strace not installed: the protocol audit is skipped");
    }

    // One prediction per question, and a rerun answers nothing again.
    let predictions = std::fs::read_to_string(out.join("predictions.jsonl"))?;
    let questions = std::fs::read_dir(bench.join("questions"))?.count();
    assert_eq!(predictions.lines().count(), questions);
    let output = eval();
    assert!(output.status.success(), "{}", common::stderr(&output));
    assert_eq!(std::fs::read_to_string(out.join("predictions.jsonl"))?, predictions);
    Ok(())
}
