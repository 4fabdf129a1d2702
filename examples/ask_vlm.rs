//! Ask a vision-language model one GST question over an OpenAI-compatible HTTP API, with the benchmark's
//! end-to-end prompt (frames of the exploration video, then the question's texts and images).
//!
//! ```sh
//! cargo run --release --example ask_vlm -- http://localhost:8000/v1 Qwen/Qwen2.5-VL-7B-Instruct QUESTION.json
//! ```
//! The API key, when the server needs one, is read from `$OPENAI_API_KEY`.
#![allow(clippy::print_stdout)]

use std::path::Path;

use anyhow::bail;
use gst_io::{QuestionFile, QuestionReadOptions};
use gst_vlm::{OpenAiConfig, OpenAiVlm, PromptConfig, PromptMode, Vlm, build_request};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, model, question] = args.as_slice() else { bail!("usage: ask_vlm URL MODEL QUESTION.json") };

    let path = Path::new(question).to_path_buf();
    let question = gst_io::read_question(&path, QuestionReadOptions { check_files: true })?;
    let file = QuestionFile { path, question };
    // Eight frames keep the prompt within a small local model's context; GST-Bench's runs used 8–64.
    let prompt = PromptConfig { frames: 8, ..PromptConfig::default() };
    let request = build_request(&file, PromptMode::E2e, &prompt, None)?;

    let vlm =
        OpenAiVlm::new(OpenAiConfig { url: url.clone(), model: model.clone(), ..OpenAiConfig::default() })?;
    let response = vlm.generate(&request)?;
    println!("{}: {}", vlm.name(), response.text.trim());
    let stats = vlm.stats();
    println!(
        "{} request(s), {} prompt + {} completion tokens",
        stats.requests, stats.prompt_tokens, stats.completion_tokens
    );
    Ok(())
}
