//! Every program of `examples/` runs on tiny data: a house rendered from a seed, a one-scene bench from
//! `gst generate` (its TUM export mapped, recorded to Rerun and exported as a bag; one of its questions
//! answered from the map and asked of a stub OpenAI-compatible server). `cargo test` builds the examples
//! before it runs this file, so an example that stops building fails `make test` too.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use gst_io::{QuestionReadOptions, read_bench_questions};
use gst_vlm::test_server::{Reply, TestServer};

/// The example binary `name` that cargo built beside this test's binary (`target/<profile>/examples/`).
fn example(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let profile = exe.parent().and_then(Path::parent).ok_or_else(|| anyhow::anyhow!("no target folder"))?;
    let path = profile.join("examples").join(name);
    anyhow::ensure!(
        path.is_file(),
        "{} was not built (cargo test builds every example; run it without --test)",
        path.display()
    );
    Ok(path)
}

fn run_example(name: &str, args: &[&Path]) -> anyhow::Result<String> {
    let output: Output = std::process::Command::new(example(name)?).args(args).output()?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    anyhow::ensure!(output.status.success(), "example {name} failed: {stdout}{}", common::stderr(&output));
    Ok(stdout)
}

/// The first whole number in `text` after `before`.
fn number_after(text: &str, before: &str) -> Option<usize> {
    let rest = &text[text.find(before)? + before.len()..];
    rest.split(|c: char| !c.is_ascii_digit()).find(|s| !s.is_empty())?.parse().ok()
}

#[test]
fn every_example_runs_on_tiny_data() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let at = |name: &str| dir.path().join(name);

    let png = at("frame.png");
    let out = run_example("render_scene", &[Path::new("7"), &png])?;
    let image = gst_io::read_rgb(&png)?;
    assert_eq!((image.width(), image.height()), (640, 512), "{out}");
    assert!(number_after(&out, ": ").is_some_and(|rooms| rooms >= 2), "{out}");

    // A one-scene bench of a three-room house explored for 20–25 s, primitive furniture.
    let config = at("tiny.json");
    std::fs::write(
        &config,
        r#"{ "scene": { "plan": { "min_rooms": 3, "max_rooms": 3 } }, "explore": { "duration_s": [20.0, 25.0] },
             "current_views": 1, "visual_targets": 1, "semantic_targets": 1, "trajectory_questions": 1,
             "topdown_questions": 1 }"#,
    )?;
    let data = at("data");
    let generated = common::gst()
        .args(["generate", "--scenes", "1", "--seed", "3", "--primitives", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(&data)
        .output()?;
    assert!(generated.status.success(), "{}", common::stderr(&generated));
    let bench = data.join("bench");
    let tum = bench.join("tum/scene_000");
    let frames = gst_io::TumSequence::open(&tum, None)?.len();

    let map = at("map");
    let out = run_example("map_tum", &[&tum, &map])?;
    assert!(map.join("map.json").is_file(), "{out}");
    assert!(number_after(&out, "map: ").is_some_and(|rooms| rooms >= 1), "{out}");
    assert!(number_after(&out, "SLAM: ").is_some_and(|tracked| tracked * 10 >= frames * 9), "{out}");

    let rrd = at("run.rrd");
    let out = run_example("slam_to_rerun", &[&tum, &rrd])?;
    gst_viz::check_recording(&rrd)?;
    assert!(number_after(&out, "").is_some_and(|poses| poses * 10 >= frames * 9), "{out}");

    let bag = at("scene.mcap");
    let mut source = gst_io::open_source(&tum, None)?;
    let calibration = source.calibration().clone();
    gst_bag::export_mcap(source.as_mut(), &calibration, &bag, &gst_bag::ExportOptions::default())?;
    let out = run_example("read_bag", &[&bag])?;
    assert!(out.contains(&format!("{frames} frame pairs")), "{frames} frames exported: {out}");

    // One trajectory question from the map; then the same question asked of a stub model.
    let questions = read_bench_questions(&bench, QuestionReadOptions { check_files: true })?;
    let traj = questions
        .iter()
        .find(|f| f.question.task == gst_core::TaskId::TrajectorySelection)
        .ok_or_else(|| anyhow::anyhow!("the bench has no trajectory question"))?;
    let uid = PathBuf::from(&traj.question.uid);
    let out = run_example("answer_question", &[&bench, &at("answer"), &uid])?;
    let answer = out.lines().find_map(|l| l.strip_prefix("answer: ")).unwrap_or_default();
    assert!(["A", "B", "C", "D"].iter().any(|letter| answer.starts_with(letter)), "{out}");

    let server =
        TestServer::start(vec![Reply::completion("B")], Duration::ZERO, |_| Reply::status(500, "once only"))?;
    let url = PathBuf::from(server.url());
    let out = run_example("ask_vlm", &[&url, Path::new("stub-model"), &traj.path])?;
    assert!(out.contains("stub-model: B"), "{out}");
    let recorded = server.requests();
    assert_eq!(recorded.len(), 1, "one request");
    let body = recorded[0].json();
    assert_eq!(body["model"], "stub-model");
    let images = body.to_string().matches("data:image/jpeg;base64").count();
    assert!(images >= 8, "8 video frames and the question's images, got {images} images");
    Ok(())
}
