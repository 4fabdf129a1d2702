//! Answer one GST question from the explicit map: the map answerer builds the scene's SLAM map and
//! semantic map from the question's own files, then answers.
//!
//! ```sh
//! gst generate --scenes 1 --seed 1 --out data/one
//! cargo run --release --example answer_question -- data/one/bench out/answer        # the first question
//! cargo run --release --example answer_question -- data/one/bench out/answer UID    # a chosen one
//! ```
//! `OUT` keeps the answerer's cache (maps, decoded frames), so a second run answers at once.
#![allow(clippy::print_stdout)]

use std::path::Path;

use anyhow::{Context, bail};
use gst_baseline::map_answerer::{MapAnswerer, MapAnswererConfig};
use gst_baseline::{AnswerContext, Answerer};
use gst_io::{QuestionReadOptions, read_bench_questions};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (bench, out, uid) = match args.as_slice() {
        [bench, out] => (bench, out, None),
        [bench, out, uid] => (bench, out, Some(uid)),
        _ => bail!("usage: answer_question BENCH OUT [QUESTION_UID]"),
    };
    let files = read_bench_questions(Path::new(bench), QuestionReadOptions { check_files: true })?;
    let question = match uid {
        Some(uid) => files
            .iter()
            .find(|f| &f.question.uid == uid)
            .with_context(|| format!("{bench}: no question {uid}"))?,
        None => files.first().with_context(|| format!("{bench}: no questions"))?,
    };
    let scene = &question.question.scene;
    println!("{} ({:?}, scene {scene})", question.question.uid, question.question.task);
    for text in &question.question.texts {
        println!("  {text}");
    }

    // SLAM poses and the red boxes of marked videos: nothing from the simulator's ground truth.
    let answerer = MapAnswerer::new(MapAnswererConfig::default());
    let context = AnswerContext { split_dir: Path::new(bench), cache_dir: Path::new(out) };
    let same_scene: Vec<_> = files.iter().filter(|f| &f.question.scene == scene).collect();
    answerer.prepare(scene, &same_scene, &context)?;
    let reply = answerer.answer(question, &context)?;
    answerer.finish(scene);
    match &reply.fallback {
        None => println!("answer: {}", reply.text),
        Some(reason) => println!("answer: {} (fallback: {reason})", reply.text),
    }
    Ok(())
}
