//! `gst eval --answerer vlm` end to end against the in-process OpenAI-compatible test server: predictions
//! that `gst score` scores, a rerun that asks nothing, the map mode's prompt, and clear per-question errors.

mod common;

use std::path::Path;
use std::time::Duration;

use common::run;
use gst_core::{Answer, Image, Question, QuestionImage, RgbImage, Setting, TaskId};
use gst_vlm::test_server::{Recorded, Reply, TestServer};

fn picture(width: u32, height: u32, shade: u8) -> anyhow::Result<RgbImage> {
    let data = (0..width * height).map(|i| [shade, (i % 251) as u8, 255 - shade]).collect();
    Ok(Image::from_vec(width, height, data)?)
}

/// A split of three questions in one scene, in the layout `gst generate` writes: an egocentric direction,
/// a top-down selection and a self-position question, with their video and images.
fn split(dir: &Path) -> anyhow::Result<()> {
    let video = dir.join("videos/scene_0/explore.mp4");
    std::fs::create_dir_all(video.parent().unwrap_or(dir))?;
    let mut writer = gst_io::VideoWriter::create(&video, 64, 48, 10.0)?;
    for k in 0..20 {
        writer.write(&picture(64, 48, k * 10)?)?;
    }
    writer.finish()?;
    std::fs::create_dir_all(dir.join("images/scene_0"))?;
    for (name, shade) in [("view", 10), ("topdown", 60), ("A", 90), ("B", 120), ("C", 150), ("D", 180)] {
        gst_io::write_rgb_png(&dir.join(format!("images/scene_0/{name}.png")), &picture(40, 32, shade)?)?;
    }
    std::fs::create_dir_all(dir.join("questions"))?;
    let image = |index: u32, name: &str| QuestionImage {
        index,
        source_path: name.into(),
        copied_path: format!("../images/scene_0/{name}.png"),
    };
    let question =
        |task: TaskId, uid: &str, answer: Answer, texts: &[&str], images: Vec<QuestionImage>| Question {
            task,
            uid: uid.into(),
            scene: "scene_0".into(),
            answer,
            texts: texts.iter().map(|t| (*t).to_owned()).collect(),
            source_video_path: "explore.mp4".into(),
            copied_video_path: "../videos/scene_0/explore.mp4".into(),
            images,
            setting: Setting::Global,
        };
    let questions = [
        question(
            TaskId::EgocentricDirectionVisual,
            "q_direction",
            Answer::Degrees(-134),
            &[
                "This is the exploration video of you in the entire scene earlier.",
                "Your current view is :",
                "In which direction is the object marked with a red box? Answer with an integer.",
            ],
            vec![image(1, "view")],
        ),
        question(
            TaskId::TopdownSelectionEasy,
            "q_topdown",
            Answer::Choice('C'),
            &[
                "This is the exploration video of you in the entire scene earlier:",
                "Among the four images below, which one is closest to a top-down view of the entire scene?\nA.",
                "\nB.",
                "\nC.",
                "\nD.",
            ],
            vec![image(1, "A"), image(2, "B"), image(3, "C"), image(4, "D")],
        ),
        question(
            TaskId::SelfPosition,
            "q_position",
            Answer::Point([391, 698]),
            &[
                "This is the exploration video of you in the entire scene earlier:",
                "Your current view is :",
                "The top-down image of the scene is:",
                "Where on the top-down image does your current location correspond to?",
            ],
            vec![image(1, "view"), image(2, "topdown")],
        ),
    ];
    for question in &questions {
        gst_io::write_question(&dir.join(format!("questions/{}.json", question.uid)), question)?;
    }
    Ok(())
}

/// Answers as a model would, verbosely, with the right answer for each of the three questions.
fn oracle(request: &Recorded) -> Reply {
    let body = request.body.as_str();
    if body.contains("four images") {
        Reply::completion("Looking at the rooms, the answer is C.")
    } else if body.contains("current location") {
        Reply::completion("I am near the sofa: <point>391 698</point>")
    } else {
        Reply::completion("The object is at about -134° from my heading.")
    }
}

fn image_parts(request: &Recorded) -> usize {
    request.json()["messages"][0]["content"]
        .as_array()
        .map_or(0, |parts| parts.iter().filter(|p| p["type"] == "image_url").count())
}

fn eval(bench: &Path, out: &Path, server: &TestServer, extra: &[&str]) -> std::process::Output {
    let (bench, out) = (bench.to_string_lossy(), out.to_string_lossy());
    let url = server.url();
    let mut args = vec![
        "eval",
        "--bench",
        &bench,
        "--answerer",
        "vlm",
        "--backend",
        "openai",
        "--url",
        &url,
        "--model",
        "test-vlm",
        "--frames",
        "4",
        "--out",
        &out,
    ];
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn eval_with_a_vlm_writes_predictions_that_score_and_resumes_without_asking_again() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let bench = dir.path().join("bench");
    split(&bench)?;
    let server = TestServer::start(Vec::new(), Duration::ZERO, oracle)?;
    let out = dir.path().join("out");

    let output = eval(&bench, &out, &server, &["--json"]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    // e2e: 4 video frames, then the question's own images.
    let mut parts: Vec<usize> = requests.iter().map(image_parts).collect();
    parts.sort_unstable();
    assert_eq!(parts, [5, 6, 8], "frames + current view; + view and top-down; + four options");
    // The GST order: text 0, the video's frames, then each text followed by its image.
    let topdown = requests
        .iter()
        .find(|r| r.body.contains("four images"))
        .ok_or_else(|| anyhow::anyhow!("no TDS request"))?;
    let kinds: Vec<String> = topdown.json()["messages"][0]["content"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .map(|p| p["type"].as_str().unwrap_or("?").replace("image_url", "I").replace("text", "T"))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(kinds.join(""), "TIIIITITITITI");
    let content = &topdown.json()["messages"][0]["content"];
    assert!(
        content[5]["text"].as_str().is_some_and(|t| t.ends_with("A.")) && content[7]["text"] == "\nB.",
        "{content}"
    );
    let stderr = common::stderr(&output);
    assert!(
        stderr.contains("3 requests (0 from the cache")
            && stderr.contains("tokens: 300 prompt + 9 completion"),
        "{stderr}"
    );

    let predictions = std::fs::read_to_string(out.join("predictions.jsonl"))?;
    assert_eq!(predictions.lines().count(), 3);
    let scored = run(&[
        "score",
        "--bench",
        &bench.to_string_lossy(),
        "--predictions",
        &out.join("predictions.jsonl").to_string_lossy(),
        "--json",
    ]);
    assert!(scored.status.success(), "{}", common::stderr(&scored));
    let tables: serde_json::Value = serde_json::from_slice(&scored.stdout)?;
    let text = tables.to_string();
    assert!(text.contains("100"), "every answer extracts and scores: {text}");

    // A second run keeps the predictions and asks the server nothing.
    let again = eval(&bench, &out, &server, &[]);
    assert!(again.status.success(), "{}", common::stderr(&again));
    assert_eq!(server.requests().len(), 3);
    assert_eq!(std::fs::read_to_string(out.join("predictions.jsonl"))?, predictions);

    // Without the predictions (a run interrupted before writing them), the response cache answers.
    std::fs::remove_file(out.join("predictions.jsonl"))?;
    let cached = eval(&bench, &out, &server, &[]);
    assert!(cached.status.success(), "{}", common::stderr(&cached));
    assert_eq!(server.requests().len(), 3, "answered from the cache");
    assert!(common::stderr(&cached).contains("3 requests (3 from the cache"), "{}", common::stderr(&cached));
    assert_eq!(std::fs::read_to_string(out.join("predictions.jsonl"))?, predictions);
    Ok(())
}

#[test]
fn map_mode_shows_the_map_and_scene_graph_instead_of_the_video() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let bench = dir.path().join("bench");
    split(&bench)?;
    let maps = dir.path().join("maps");
    std::fs::create_dir_all(maps.join("scene_0"))?;
    gst_io::write_rgb_png(&maps.join("scene_0/semantic.png"), &picture(64, 48, 200)?)?;
    std::fs::write(maps.join("scene_0/scene_graph.json"), r#"{"rooms": [{"id": 0, "type": "kitchen"}]}"#)?;
    let server = TestServer::start(Vec::new(), Duration::ZERO, oracle)?;
    let out = dir.path().join("out");
    let output = eval(&bench, &out, &server, &["--mode", "map", "--maps", &maps.to_string_lossy()]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let mut parts: Vec<usize> = requests.iter().map(image_parts).collect();
    parts.sort_unstable();
    assert_eq!(parts, [2, 3, 5], "the map + the question's images, no video frames");
    for request in &requests {
        assert!(request.body.contains("kitchen"), "scene graph in the prompt");
        assert!(!request.body.contains("exploration video of you"), "no video announcement");
    }

    // map mode without maps: each question fails naming the missing file, the command still finishes.
    let no_maps = dir.path().join("no-maps");
    let output = eval(
        &bench,
        &no_maps,
        &server,
        &["--mode", "map", "--maps", &dir.path().join("nowhere").to_string_lossy()],
    );
    assert!(!common::stderr(&output).contains("panicked"), "{}", common::stderr(&output));
    let errors = std::fs::read_to_string(no_maps.join("errors.jsonl"))?;
    assert_eq!(errors.lines().count(), 3);
    assert!(errors.contains("semantic.png"), "{errors}");
    Ok(())
}

#[test]
fn a_server_that_is_down_fails_each_question_clearly_and_a_rerun_resumes() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let bench = dir.path().join("bench");
    split(&bench)?;
    let out = dir.path().join("out");
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let down_url = format!("http://127.0.0.1:{port}/v1");
    let (bench_s, out_s) = (bench.to_string_lossy(), out.to_string_lossy());
    let output = run(&[
        "eval",
        "--bench",
        &bench_s,
        "--answerer",
        "vlm",
        "--url",
        &down_url,
        "--model",
        "m",
        "--frames",
        "2",
        "--retries",
        "1",
        "--out",
        &out_s,
    ]);
    assert!(!common::stderr(&output).contains("panicked"), "{}", common::stderr(&output));
    let errors = std::fs::read_to_string(out.join("errors.jsonl"))?;
    assert_eq!(errors.lines().count(), 3);
    assert!(errors.contains(&down_url), "{errors}");

    let server = TestServer::start(Vec::new(), Duration::ZERO, oracle)?;
    let output = eval(&bench, &out, &server, &[]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    assert_eq!(std::fs::read_to_string(out.join("predictions.jsonl"))?.lines().count(), 3);
    Ok(())
}
