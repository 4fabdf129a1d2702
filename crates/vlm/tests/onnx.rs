//! The ONNX backend on the tiny SmolVLM-shaped model set that `scripts/make_tiny_vlm.py` writes.
//!
//! The fixture's weights are hand-set (see the script): the next token is the weight of every token in the
//! KV cache (text tokens weigh 1, spliced image features 2), so the generated ids are consecutive from
//! `text tokens + 2 x image tokens` up to the stop token. The tests check shapes and the loop, not words.

use std::path::{Path, PathBuf};
use std::process::Command;

use gst_core::{Image, RgbImage};
use gst_vlm::{OnnxConfig, OnnxVlm, Part, VideoFrames, Vlm, VlmError, VlmImage, VlmRequest};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Writes the fixture into `dir`; `None` (with the reason printed) when `.venv` lacks onnx/onnxruntime.
fn tiny_model(dir: &Path) -> anyhow::Result<Option<PathBuf>> {
    let root = workspace_root();
    let python = root.join(".venv/bin/python");
    let probe = Command::new(&python).args(["-c", "import onnx, onnxruntime, numpy"]).output();
    if !probe.as_ref().is_ok_and(|o| o.status.success()) {
        eprintln!(
            "SKIPPED: {} cannot import onnx, onnxruntime and numpy; run `make setup` to install them",
            python.display()
        );
        return Ok(None);
    }
    if gst_vlm::runtime::find_library(None).is_none() {
        eprintln!("SKIPPED: no libonnxruntime.so in .venv and ORT_DYLIB_PATH is not set; run `make setup`");
        return Ok(None);
    }
    let out = dir.join("tiny-smolvlm");
    let status = Command::new(&python).arg(root.join("scripts/make_tiny_vlm.py")).arg(&out).output()?;
    anyhow::ensure!(
        status.status.success(),
        "make_tiny_vlm.py failed: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    Ok(Some(out))
}

fn solid(width: u32, height: u32, rgb: [u8; 3]) -> anyhow::Result<RgbImage> {
    Ok(Image::from_vec(width, height, vec![rgb; (width * height) as usize])?)
}

fn one_image_request() -> anyhow::Result<VlmRequest> {
    Ok(VlmRequest {
        id: "q".into(),
        parts: vec![
            Part::Image(VlmImage { source: "view.png".into(), image: solid(64, 48, [200, 100, 50])? }),
            Part::Text("Where is the sofa ?".into()),
        ],
    })
}

#[test]
fn loads_encodes_splices_and_decodes_with_the_kv_cache_until_the_stop_token() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let Some(model) = tiny_model(dir.path())? else { return Ok(()) };
    let vlm = OnnxVlm::load(&model, OnnxConfig { max_new_tokens: 200, ..OnnxConfig::default() })?;
    let spec = vlm.spec().clone();
    assert_eq!((spec.image_size, spec.tokens_per_image, spec.kv_heads, spec.head_dim), (32, 4, 2, 4));
    assert_eq!(spec.cache_names.len(), 4, "2 layers x key/value");
    assert_eq!(spec.cache_names[0], ("past_key_values.0.key".into(), "present.0.key".into()));
    let eos = 63;
    assert!(
        spec.stop_ids.contains(&eos) && spec.stop_ids.contains(&2),
        "eos and <end_of_utterance>: {:?}",
        spec.stop_ids
    );

    let started = std::time::Instant::now();
    let generation = vlm.generate_traced(&one_image_request()?)?;
    let elapsed = started.elapsed();

    // Vision encoder: one image of 4 tokens of hidden size 16, spliced at the 4 <image> tokens.
    assert_eq!(generation.image_features_shape, vec![1, 4, 16]);
    assert_eq!(generation.spliced_tokens, 4);
    let image_tokens = generation.prompt_ids.iter().filter(|&&id| id == spec.image_token_id).count();
    assert_eq!(image_tokens, 4);

    // Spliced features weigh 2, so the first token is prompt length + image tokens, then one more per step.
    let prompt_len = generation.prompt_ids.len();
    let first = (prompt_len + image_tokens) as u32;
    let expected: Vec<u32> = (first..eos).collect();
    assert_eq!(generation.generated_ids, expected);
    assert_eq!(generation.stop_token, Some(eos));

    // One decoder run over the prompt, then one per token, the cache growing by one each time.
    let runs = expected.len() + 1;
    assert_eq!(generation.cache_lengths.len(), runs);
    let cache: Vec<usize> = (0..runs).map(|step| prompt_len + step).collect();
    assert_eq!(generation.cache_lengths, cache);
    eprintln!(
        "tiny model: prompt {prompt_len} tokens, {} generated in {:.1} ms ({:.0} decoder runs/s)",
        expected.len(),
        elapsed.as_secs_f64() * 1e3,
        runs as f64 / elapsed.as_secs_f64()
    );

    // The same through the trait, with the token counts as usage.
    let response = vlm.generate(&one_image_request()?)?;
    assert_eq!(response.usage.map(|u| u.completion_tokens), Some(expected.len() as u64));
    assert!(!response.text.is_empty());
    Ok(())
}

#[test]
fn max_new_tokens_ends_decoding_and_video_frames_are_images() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let Some(model) = tiny_model(dir.path())? else { return Ok(()) };
    let vlm =
        OnnxVlm::load(&model, OnnxConfig { max_new_tokens: 5, vision_batch: 2, ..OnnxConfig::default() })?;
    let request = VlmRequest {
        id: "video".into(),
        parts: vec![
            Part::Text("This is the exploration video :".into()),
            Part::Video(VideoFrames {
                source: "explore.mp4".into(),
                frame_indices: vec![0, 5, 10],
                fps: 10.0,
                frames: vec![
                    solid(40, 32, [0, 0, 0])?,
                    solid(40, 32, [255, 255, 255])?,
                    solid(40, 32, [9, 9, 9])?,
                ],
            }),
            Part::Text("What is this ?".into()),
        ],
    };
    let generation = vlm.generate_traced(&request)?;
    assert_eq!(generation.image_features_shape, vec![3, 4, 16], "three frames in two vision batches");
    assert_eq!(generation.spliced_tokens, 12);
    assert_eq!(generation.generated_ids.len(), 5);
    assert_eq!(generation.stop_token, None);
    let first = (generation.prompt_ids.len() + 12) as u32;
    assert_eq!(generation.generated_ids, (first..first + 5).collect::<Vec<_>>());
    Ok(())
}

#[test]
fn a_model_directory_missing_a_file_names_it() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let Some(model) = tiny_model(dir.path())? else { return Ok(()) };
    std::fs::remove_file(model.join("onnx/embed_tokens.onnx"))?;
    let error = OnnxVlm::load(&model, OnnxConfig::default()).expect_err("missing file");
    assert!(matches!(error, VlmError::Model { .. }), "{error:?}");
    assert!(error.to_string().contains("embed_tokens.onnx"), "{error}");

    let error =
        OnnxVlm::load(&dir.path().join("nowhere"), OnnxConfig::default()).expect_err("no dir").to_string();
    assert!(error.contains("nowhere"), "{error}");
    Ok(())
}
