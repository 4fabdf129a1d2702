//! `gst generate` end to end on a small configuration: every subtask and local setting, files that the GST
//! reader accepts, ground truth scoring 100, distinct options, and determinism.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::run;
use gst_core::{Setting, TaskId};

/// Short explorations at 2 fps in 3–4 room houses keep the test to seconds per scene.
const SMALL_CONFIG: &str = r#"{
  "scene": { "plan": { "min_rooms": 3, "max_rooms": 4 } },
  "explore": { "fps": 2.0, "duration_s": [30.0, 240.0] },
  "current_views": 4,
  "visual_targets": 1,
  "semantic_targets": 1,
  "trajectory_questions": 1,
  "topdown_questions": 2
}"#;

fn generate(out: &Path, config: &Path, scenes: &str) {
    let output = run(&[
        "generate",
        "--scenes",
        scenes,
        "--seed",
        "1",
        "--out",
        out.to_str().unwrap_or_default(),
        "--config",
        config.to_str().unwrap_or_default(),
        "--primitives",
    ]);
    assert!(output.status.success(), "{}", common::stderr(&output));
}

#[test]
fn generates_every_subtask_readable_scorable_distinct_and_deterministic() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("small.json");
    std::fs::write(&config, SMALL_CONFIG)?;
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    generate(&a, &config, "2");

    // Every file parses with the reader used for the real GST samples, and its media exist.
    let questions = gst_io::gst::read_bench_questions(
        &a.join("bench"),
        gst_io::gst::QuestionReadOptions { check_files: true },
    )?;
    let tasks: BTreeSet<TaskId> = questions.iter().map(|q| q.question.task).collect();
    for task in TaskId::ALL {
        assert!(tasks.contains(&task), "no {} question", task.column());
    }
    // `topdown_questions: 2` gives two questions per TDS level and scene, with different option images.
    for task in [TaskId::TopdownSelectionEasy, TaskId::TopdownSelectionMedium, TaskId::TopdownSelectionHard] {
        let of_task: Vec<_> = questions.iter().filter(|q| q.question.task == task).collect();
        assert_eq!(of_task.len(), 4, "{} questions over 2 scenes", task.column());
        let images: BTreeSet<&str> =
            of_task.iter().flat_map(|q| q.question.images.iter().map(|i| i.source_path.as_str())).collect();
        assert_eq!(images.len(), 16, "{} option images are shared between questions", task.column());
    }
    for setting in [Setting::LocalVideo, Setting::LocalImage] {
        for task in [TaskId::EgocentricDirectionVisual, TaskId::EgocentricDistanceSemantic] {
            assert!(
                questions.iter().any(|q| q.question.task == task && q.question.setting == setting),
                "no {} {} question",
                task.column(),
                setting.name()
            );
        }
    }

    // Ground truth as predictions scores 100 everywhere.
    let predictions: String = questions
        .iter()
        .map(|q| {
            serde_json::json!({"uid": q.question.uid, "prediction": q.question.answer.to_string()})
                .to_string()
                + "\n"
        })
        .collect();
    let predictions_path = dir.path().join("truth.jsonl");
    std::fs::write(&predictions_path, predictions)?;
    let output = run(&[
        "score",
        "--bench",
        a.join("bench").to_str().unwrap(),
        "--predictions",
        predictions_path.to_str().unwrap(),
        "--json",
    ]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let ours = &report["main"]["rows"][0];
    assert_eq!(ours["model"], "ours");
    for task in TaskId::ALL {
        assert_eq!(ours["scores"][task.column()].as_f64(), Some(100.0), "{}: {ours}", task.column());
    }
    for row in report["local"]["rows"].as_array().into_iter().flatten().filter(|r| r["source"] == "ours") {
        for (column, score) in row["scores"].as_object().into_iter().flatten() {
            assert_eq!(score.as_f64(), Some(100.0), "local {column}: {row}");
        }
    }

    // Multiple choice has one right answer: TDS distractors differ from the truth (binary IoU < 0.9) and
    // trajectory options are pairwise ≥ 1 m apart (discrete Fréchet).
    for q in questions.iter().map(|q| &q.question) {
        let truth_index = match q.answer {
            gst_core::Answer::Choice(letter) => usize::from(letter as u8 - b'A'),
            _ => usize::MAX,
        };
        match q.task {
            TaskId::TopdownSelectionEasy | TaskId::TopdownSelectionMedium | TaskId::TopdownSelectionHard => {
                let images: Vec<_> = q
                    .images
                    .iter()
                    .map(|i| gst_io::read_gray(&a.join("bench/questions").join(&i.copied_path)))
                    .collect::<Result<_, _>>()?;
                for (k, image) in images.iter().enumerate() {
                    if k != truth_index {
                        let iou = gst_bench::draw::binary_iou(&images[truth_index], image);
                        assert!(iou < 0.9, "{}: option {k} has IoU {iou:.3} with the truth", q.uid);
                    }
                }
            }
            TaskId::TrajectorySelection => {
                let options: std::collections::BTreeMap<String, Vec<Vec<[f64; 2]>>> = serde_json::from_slice(
                    &std::fs::read(a.join("bench/scenes").join(&q.scene).join("trajectory_options.json"))?,
                )?;
                let paths = &options[&q.uid];
                for i in 0..paths.len() {
                    for j in i + 1..paths.len() {
                        let d = gst_bench::draw::discrete_frechet(&paths[i], &paths[j]);
                        assert!(d >= 1.0, "{}: options {i} and {j} are {d:.2} m apart", q.uid);
                    }
                }
            }
            _ => {}
        }
    }

    // The same seed gives byte-identical output (videos included, on one machine: see gst_io::video).
    generate(&b, &config, "2");
    common::assert_same_files(&a, &b);

    // Resume: after losing one scene's marker, a rerun rebuilds only that scene, identically.
    std::fs::remove_file(a.join("bench/scenes/scene_001/done.json"))?;
    generate(&a, &config, "2");
    common::assert_same_files(&a, &b);
    Ok(())
}

/// One 2 fps scene, short: the depth-sensor test compares two exports of it.
const TINY_CONFIG: &str = r#"{
  "scene": { "plan": { "min_rooms": 3, "max_rooms": 3 } },
  "explore": { "fps": 2.0, "duration_s": [20.0, 40.0] },
  "current_views": 1,
  "visual_targets": 0,
  "semantic_targets": 1,
  "trajectory_questions": 0,
  "topdown_questions": 1
}"#;

fn generate_with_sensor(out: &Path, config: &Path, sensor: &str) -> std::process::Output {
    run(&[
        "generate",
        "--scenes",
        "1",
        "--seed",
        "3",
        "--out",
        out.to_str().unwrap_or_default(),
        "--config",
        config.to_str().unwrap_or_default(),
        "--depth-sensor",
        sensor,
        "--primitives",
    ])
}

#[test]
fn the_depth_stream_goes_through_the_sensor_model_and_nothing_else_changes() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("tiny.json");
    std::fs::write(&config, TINY_CONFIG)?;
    let (kinect, perfect) = (dir.path().join("kinect"), dir.path().join("perfect"));
    for (out, sensor) in [(&kinect, "kinect"), (&perfect, "perfect")] {
        let output = generate_with_sensor(out, &config, sensor);
        assert!(output.status.success(), "{}", common::stderr(&output));
    }
    // Everything but the export's depth images (and the manifest, which records the sensor) is identical.
    let is_depth = |name: &str| name.contains("/depth/") || name.ends_with("manifest.json");
    let (fk, fp) = (common::files(&kinect), common::files(&perfect));
    let others =
        |f: &[(String, Vec<u8>)]| f.iter().filter(|(n, _)| !is_depth(n)).cloned().collect::<Vec<_>>();
    let (ok, op) = (others(&fk), others(&fp));
    assert_eq!(ok.len(), op.len());
    for (a, b) in ok.iter().zip(&op) {
        assert!(a == b, "{} differs between the kinect and perfect exports", a.0);
    }
    let manifest = std::fs::read_to_string(kinect.join("manifest.json"))?;
    assert!(manifest.contains(r#""depth_sensor": "kinect""#), "the manifest records the sensor");

    // The Kinect profile: nothing nearer than 0.5 m or farther than 5 m, some pixels missing, and the rest
    // near the exact depth one pixel to the left (the misregistration), within a few σ(z) plus a step.
    let sequence = |root: &Path| gst_io::tum::TumSequence::open(&root.join("bench/tum/scene_000"), None);
    let (noisy, exact) = (sequence(&kinect)?, sequence(&perfect)?);
    assert_eq!(noisy.len(), exact.len());
    let (mut valid, mut missing, mut large_error) = (0usize, 0usize, 0usize);
    for k in (0..noisy.len()).step_by(7) {
        let (n, e) = (noisy.frame(k)?, exact.frame(k)?);
        assert_eq!(n.rgb, e.rgb, "colour is never touched");
        for y in 0..n.depth.height() {
            for x in 1..n.depth.width() {
                let z = f64::from(*n.depth.get(x, y).unwrap_or(&0.0));
                let truth = f64::from(*e.depth.get(x - 1, y).unwrap_or(&0.0));
                if z == 0.0 {
                    missing += 1;
                    continue;
                }
                valid += 1;
                // The range applies to the true depth; noise and the disparity step may carry it a little past.
                assert!((0.45..=5.35).contains(&z), "depth {z} outside the Kinect's range");
                let sigma = 0.0012 + 0.0019 * truth * truth;
                if (z - truth).abs() > 5.0 * sigma + 2.85e-3 * truth * truth {
                    large_error += 1;
                }
            }
        }
    }
    assert!(valid > 0 && missing > 0, "{valid} valid, {missing} missing");
    assert!(large_error * 1000 < valid, "{large_error} of {valid} pixels far from the exact depth");

    // Bad input: an unknown profile and a model file with negative noise fail before anything is written.
    let unknown = generate_with_sensor(&dir.path().join("unknown"), &config, "kinetic");
    common::assert_clean_failure(&unknown, &["kinetic", "d435"]);
    let negative = dir.path().join("negative.json");
    std::fs::write(&negative, r#"{"axial_sigma_base_m": -0.01}"#)?;
    let bad = generate_with_sensor(&dir.path().join("bad"), &config, &negative.to_string_lossy());
    common::assert_clean_failure(&bad, &["negative.json", "axial_sigma_base_m"]);
    assert!(!dir.path().join("bad").exists() && !dir.path().join("unknown").exists());
    Ok(())
}
