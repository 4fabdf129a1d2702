//! Hostile servers (issue 48): corpus-mutation fuzzing of the chat-completion reply parser, API keys kept
//! out of error messages and `Debug` output, the API key file, and the reply size limit. Local test server
//! only, no network.

#[path = "../../../fuzz/harness.rs"]
mod harness;

use std::time::Duration;

use gst_vlm::test_server::{Reply, TestServer};
use gst_vlm::{OpenAiConfig, OpenAiVlm, Part, Vlm, VlmRequest, parse_completion};
use proptest::prelude::*;

/// Bytes as the client reads them: JSON first, then the completion's fields.
fn vlm_reply(bytes: &[u8]) -> bool {
    match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(value) => match parse_completion(&value, "http://server/v1/chat/completions") {
            Ok(_) => true,
            Err(error) => {
                assert!(error.to_string().contains("http://server"), "error does not name the URL: {error}");
                false
            }
        },
        Err(_) => false,
    }
}

fn text_request() -> VlmRequest {
    VlmRequest { id: "q1".into(), parts: vec![Part::Text("Which direction?".into())] }
}

/// `CARGO_PKG_NAME` (`gst-vlm`, set by cargo for every test process) stands for the API key.
const KEY: &str = env!("CARGO_PKG_NAME");

fn config(server: &TestServer) -> OpenAiConfig {
    OpenAiConfig {
        url: server.url(),
        model: "test-vlm".into(),
        api_key_env: "CARGO_PKG_NAME".into(),
        backoff_initial_s: 0.01,
        backoff_max_s: 0.02,
        max_retries: 2,
        timeout_s: 10.0,
        ..OpenAiConfig::default()
    }
}

/// A server that echoes the bearer token in its error body, as hosted APIs do on a wrong key.
fn echoing(status: u16) -> anyhow::Result<TestServer> {
    Ok(TestServer::start(Vec::new(), Duration::ZERO, move |request| {
        let auth = request.header("authorization").unwrap_or("none").to_owned();
        Reply::status(
            status,
            &format!("{{\"error\": {{\"message\": \"Incorrect API key provided: {auth}\"}}}}"),
        )
    })?)
}

#[test]
fn api_keys_never_reach_error_messages() -> anyhow::Result<()> {
    for status in [401, 500, 400] {
        let server = echoing(status)?;
        let vlm = OpenAiVlm::new(config(&server))?;
        let error =
            vlm.generate(&text_request()).err().ok_or_else(|| anyhow::anyhow!("no error on {status}"))?;
        // The key did travel (the server saw it), but the message does not show it.
        let sent = server.requests().first().and_then(|r| r.header("authorization").map(str::to_owned));
        assert_eq!(sent.as_deref(), Some(format!("Bearer {KEY}").as_str()));
        let message = format!("{error} / {error:?}");
        assert!(!message.contains(KEY), "status {status}: the key is in the error: {message}");
        assert!(message.contains("[API key]"), "status {status}: {message}");
    }
    // A 200 body that is not a completion but echoes the key.
    let server = TestServer::start(Vec::new(), Duration::ZERO, |request| {
        let auth = request.header("authorization").unwrap_or("none").to_owned();
        Reply::status(200, &format!("{{\"choices\": [], \"echo\": \"{auth}\"}}"))
    })?;
    let error = OpenAiVlm::new(config(&server))?.generate(&text_request()).err();
    let message = format!("{error:?}");
    assert!(error.is_some() && !message.contains(KEY), "{message}");
    Ok(())
}

#[test]
fn debug_output_hides_the_key() -> anyhow::Result<()> {
    let server = TestServer::start(Vec::new(), Duration::ZERO, |_| Reply::completion("B"))?;
    let vlm = OpenAiVlm::new(config(&server))?;
    let shown = format!("{vlm:?}");
    assert!(!shown.contains(KEY), "{shown}");
    assert!(shown.contains("[API key]"), "{shown}");
    Ok(())
}

#[test]
fn api_key_file_is_read_and_its_problems_name_it() -> anyhow::Result<()> {
    let server = TestServer::start(Vec::new(), Duration::ZERO, |_| Reply::completion("B"))?;
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("key.txt");
    std::fs::write(&file, "sk-from-file-123\n")?;
    let vlm = OpenAiVlm::new(OpenAiConfig { api_key_file: Some(file.clone()), ..config(&server) })?;
    assert_eq!(vlm.generate(&text_request())?.text, "B");
    let sent = server.requests().first().and_then(|r| r.header("authorization").map(str::to_owned));
    assert_eq!(sent.as_deref(), Some("Bearer sk-from-file-123"));

    std::fs::write(&file, "\n")?;
    let error = OpenAiVlm::new(OpenAiConfig { api_key_file: Some(file.clone()), ..config(&server) })
        .err()
        .ok_or_else(|| anyhow::anyhow!("empty key file accepted"))?;
    assert!(error.to_string().contains("key.txt") && error.to_string().contains("empty"), "{error}");
    let missing = dir.path().join("missing.txt");
    let error = OpenAiVlm::new(OpenAiConfig { api_key_file: Some(missing), ..config(&server) })
        .err()
        .ok_or_else(|| anyhow::anyhow!("missing key file accepted"))?;
    assert!(error.to_string().contains("missing.txt"), "{error}");
    Ok(())
}

#[test]
fn huge_replies_fail_with_an_error() -> anyhow::Result<()> {
    // 12 MB of text in a completion: over ureq's 10 MB limit on a body read as a string.
    let huge = "A".repeat(12 * 1024 * 1024);
    let server = TestServer::start(Vec::new(), Duration::ZERO, move |_| Reply::completion(&huge))?;
    let error = OpenAiVlm::new(config(&server))?
        .generate(&text_request())
        .err()
        .ok_or_else(|| anyhow::anyhow!("a 12 MB reply was accepted"))?;
    assert!(error.to_string().contains("cannot read the body"), "{error}");
    Ok(())
}

#[test]
fn reply_corpus_replays() {
    assert_eq!(harness::replay("vlm_reply", vlm_reply), 3, "three completions, one error body");
}

proptest! {
    #[test]
    fn fuzz_vlm_reply(input in harness::mutated("vlm_reply")) {
        vlm_reply(&input);
    }
}
