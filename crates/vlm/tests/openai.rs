//! The OpenAI-compatible backend against the in-process test server.

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine;
use gst_core::{Image, RgbImage};
use gst_vlm::test_server::{Recorded, Reply, TestServer};
use gst_vlm::{OpenAiConfig, OpenAiVlm, Part, VideoFrames, VideoInput, Vlm, VlmError, VlmImage, VlmRequest};

fn solid(width: u32, height: u32, rgb: [u8; 3]) -> anyhow::Result<RgbImage> {
    Ok(Image::from_vec(width, height, vec![rgb; (width * height) as usize])?)
}

/// Text, an image, text, two video frames, text: the order a GST prompt has.
fn request() -> anyhow::Result<VlmRequest> {
    Ok(VlmRequest {
        id: "q1".into(),
        parts: vec![
            Part::Text("This is the exploration video:".into()),
            Part::Video(VideoFrames {
                source: PathBuf::from("explore.mp4"),
                frame_indices: vec![3, 9],
                fps: 10.0,
                frames: vec![solid(16, 8, [255, 0, 0])?, solid(16, 8, [0, 255, 0])?],
            }),
            Part::Text("Your current view is :".into()),
            Part::Image(VlmImage { source: PathBuf::from("view.png"), image: solid(8, 8, [0, 0, 255])? }),
            Part::Text("Which direction? Answer with an integer.".into()),
        ],
    })
}

fn config(server: &TestServer, cache: Option<PathBuf>) -> OpenAiConfig {
    OpenAiConfig {
        url: server.url(),
        model: "test-vlm".into(),
        // Set by cargo for every test process; whatever its value, it must travel as the bearer token.
        api_key_env: "CARGO_PKG_NAME".into(),
        backoff_initial_s: 0.01,
        backoff_max_s: 0.05,
        max_retries: 3,
        timeout_s: 10.0,
        cache_dir: cache,
        ..OpenAiConfig::default()
    }
}

fn jpeg_from_data_url(url: &str) -> anyhow::Result<Vec<u8>> {
    let payload = url
        .strip_prefix("data:image/jpeg;base64,")
        .ok_or_else(|| anyhow::anyhow!("not a JPEG data URL: {url:.40}"))?;
    Ok(base64::engine::general_purpose::STANDARD.decode(payload)?)
}

fn content_types(request: &Recorded) -> Vec<String> {
    request.json()["messages"][0]["content"]
        .as_array()
        .map(|parts| parts.iter().map(|p| p["type"].as_str().unwrap_or("?").to_owned()).collect())
        .unwrap_or_default()
}

#[test]
fn sends_the_documented_json_retries_a_503_and_reads_the_cache_on_the_second_run() -> anyhow::Result<()> {
    let server = TestServer::start(
        vec![Reply::status(503, "{\"error\": \"loading model\"}"), Reply::completion("The answer is -134.")],
        Duration::ZERO,
        |_| Reply::status(500, "script exhausted"),
    )?;
    let cache = tempfile::tempdir()?;
    let vlm = OpenAiVlm::new(config(&server, Some(cache.path().into())))?;
    let response = vlm.generate(&request()?)?;
    assert_eq!(response.text, "The answer is -134.");
    assert!(!response.cached);
    assert_eq!(response.usage.map(|u| (u.prompt_tokens, u.completion_tokens)), Some((100, 3)));

    let requests = server.requests();
    assert_eq!(requests.len(), 2, "one 503, then the retry");
    assert_eq!(requests[0].body, requests[1].body, "the retry sends the same body");
    let sent = &requests[1];
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.header("content-type"), Some("application/json"));
    let key = std::env::var("CARGO_PKG_NAME").ok();
    assert_eq!(sent.header("authorization").map(str::to_owned), key.map(|k| format!("Bearer {k}")));

    let body = sent.json();
    assert_eq!(body["model"], "test-vlm");
    assert_eq!(body["temperature"], 0.0);
    assert_eq!(body["max_tokens"], 256);
    assert_eq!(body["messages"][0]["role"], "user");
    assert_eq!(
        content_types(sent),
        ["text", "image_url", "image_url", "text", "image_url", "text"],
        "order of parts kept"
    );
    let content = &body["messages"][0]["content"];
    assert_eq!(content[0]["text"], "This is the exploration video:");
    assert_eq!(content[3]["text"], "Your current view is :");
    assert_eq!(content[5]["text"], "Which direction? Answer with an integer.");
    for index in [1, 2, 4] {
        let jpeg = jpeg_from_data_url(content[index]["image_url"]["url"].as_str().unwrap_or_default())?;
        assert_eq!(&jpeg[..3], &[0xFF, 0xD8, 0xFF], "part {index} is a JPEG");
    }
    let stats = vlm.stats();
    assert_eq!((stats.requests, stats.cached, stats.retries, stats.failures), (1, 0, 1, 0));

    // A second run (a new process, as after an interruption) answers from the cache without asking.
    let again = OpenAiVlm::new(config(&server, Some(cache.path().into())))?;
    let cached = again.generate(&request()?)?;
    assert!(cached.cached);
    assert_eq!(cached.text, "The answer is -134.");
    assert_eq!(server.requests().len(), 2, "no request reached the server");
    assert_eq!(again.stats().cached, 1);
    Ok(())
}

#[test]
fn vllm_video_url_carries_all_frames_in_one_part() -> anyhow::Result<()> {
    let server = TestServer::start(Vec::new(), Duration::ZERO, |_| Reply::completion("B"))?;
    let vlm = OpenAiVlm::new(OpenAiConfig { video: VideoInput::VideoUrl, ..config(&server, None) })?;
    vlm.generate(&request()?)?;
    let sent = &server.requests()[0];
    assert_eq!(content_types(sent), ["text", "video_url", "text", "image_url", "text"]);
    let url =
        sent.json()["messages"][0]["content"][1]["video_url"]["url"].as_str().unwrap_or_default().to_owned();
    let frames: Vec<&str> =
        url.strip_prefix("data:video/jpeg;base64,").unwrap_or_default().split(',').collect();
    assert_eq!(frames.len(), 2);
    for frame in frames {
        assert_eq!(&base64::engine::general_purpose::STANDARD.decode(frame)?[..2], &[0xFF, 0xD8]);
    }
    Ok(())
}

#[test]
fn a_429_with_retry_after_and_a_500_are_retried() -> anyhow::Result<()> {
    let server = TestServer::start(
        vec![
            Reply::status(429, "slow down").with_header("Retry-After", "0"),
            Reply::status(500, "oops"),
            Reply::completion("C"),
        ],
        Duration::ZERO,
        |_| Reply::status(500, "script exhausted"),
    )?;
    let vlm = OpenAiVlm::new(config(&server, None))?;
    assert_eq!(vlm.generate(&request()?)?.text, "C");
    assert_eq!(server.requests().len(), 3);
    assert_eq!(vlm.stats().retries, 2);
    Ok(())
}

#[test]
fn a_bad_key_fails_at_once_naming_the_variable() -> anyhow::Result<()> {
    let server = TestServer::start(Vec::new(), Duration::ZERO, |_| {
        Reply::status(401, "{\"error\": \"invalid api key\"}")
    })?;
    let vlm = OpenAiVlm::new(config(&server, None))?;
    let error = vlm.generate(&request()?).expect_err("401");
    assert!(matches!(error, VlmError::Auth { status: 401, .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("CARGO_PKG_NAME") && message.contains(&server.url()), "{message}");
    assert_eq!(server.requests().len(), 1, "no retry on 401");
    assert_eq!(vlm.stats().failures, 1);
    Ok(())
}

#[test]
fn a_malformed_response_is_an_error_naming_the_url_and_is_not_cached() -> anyhow::Result<()> {
    let server = TestServer::start(Vec::new(), Duration::ZERO, |_| Reply::status(200, "<html>hello</html>"))?;
    let cache = tempfile::tempdir()?;
    let vlm = OpenAiVlm::new(config(&server, Some(cache.path().into())))?;
    let error = vlm.generate(&request()?).expect_err("malformed");
    assert!(matches!(error, VlmError::MalformedResponse { .. }), "{error:?}");
    assert!(error.to_string().contains("/v1/chat/completions"), "{error}");
    assert_eq!(std::fs::read_dir(cache.path())?.count(), 0, "nothing cached");

    let wrong_shape =
        TestServer::start(Vec::new(), Duration::ZERO, |_| Reply::status(200, "{\"choices\": []}"))?;
    let vlm = OpenAiVlm::new(config(&wrong_shape, None))?;
    assert!(matches!(vlm.generate(&request()?), Err(VlmError::MalformedResponse { .. })));
    Ok(())
}

#[test]
fn a_server_that_is_down_fails_after_the_retries() -> anyhow::Result<()> {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let vlm = OpenAiVlm::new(OpenAiConfig {
        url: url.clone(),
        model: "m".into(),
        max_retries: 2,
        backoff_initial_s: 0.01,
        ..OpenAiConfig::default()
    })?;
    let error = vlm.generate(&request()?).expect_err("down");
    assert!(matches!(error, VlmError::Unreachable { attempts: 3, .. }), "{error:?}");
    assert!(error.to_string().contains(&url), "{error}");
    // Known to be down: the next question fails at the first attempt instead of backing off again.
    let error = vlm.generate(&request()?).expect_err("still down");
    assert!(matches!(error, VlmError::Unreachable { attempts: 1, .. }), "{error:?}");
    Ok(())
}

#[test]
fn concurrency_is_bounded_across_threads() -> anyhow::Result<()> {
    let server = TestServer::start(Vec::new(), Duration::from_millis(80), |_| Reply::completion("A"))?;
    let vlm = OpenAiVlm::new(OpenAiConfig { max_concurrency: 2, ..config(&server, None) })?;
    let request = request()?;
    std::thread::scope(|scope| {
        for _ in 0..6 {
            scope.spawn(|| vlm.generate(&request));
        }
    });
    assert_eq!(server.requests().len(), 6);
    assert!(server.max_in_flight() <= 2, "{} in flight", server.max_in_flight());
    assert_eq!(vlm.stats().requests, 6);
    Ok(())
}
