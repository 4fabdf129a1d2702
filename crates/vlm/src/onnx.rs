//! An in-process VLM: a Hugging Face SmolVLM (Idefics3) export run by ONNX Runtime.
//!
//! # The model directory
//!
//! The layout of the Hub's SmolVLM repositories (e.g. `HuggingFaceTB/SmolVLM-256M-Instruct`): `config.json`,
//! `preprocessor_config.json`, `tokenizer.json` (and optionally `generation_config.json`) at the top, the
//! ONNX files in `onnx/` (or next to the JSON files):
//!
//! | file | inputs | outputs |
//! |---|---|---|
//! | `vision_encoder.onnx` | `pixel_values` f32 [batch, images, 3, S, S], `pixel_attention_mask` bool [batch, images, S, S] | `image_features` f32 [images, tokens, hidden] |
//! | `embed_tokens.onnx` | `input_ids` i64 [batch, seq] | `inputs_embeds` f32 [batch, seq, hidden] |
//! | `decoder_model_merged.onnx` | `inputs_embeds`, `attention_mask` i64 [batch, past + seq], `position_ids` i64 [batch, seq], `past_key_values.{l}.{key,value}` f32 [batch, kv_heads, past, head_dim] | `logits` f32 [batch, seq, vocab], `present.{l}.{key,value}` |
//!
//! `OnnxConfig::variant` picks a quantised set (`q4` loads `vision_encoder_q4.onnx`, …); the variants with
//! float16 inputs or caches (`fp16`, `q4f16`) are refused with a clear error: the loop here feeds float32.
//!
//! # Generation
//!
//! 1. The prompt follows SmolVLM's chat template: `<|im_start|>User:` + content + `<end_of_utterance>\n
//!    Assistant:`, where each image (and each video frame) is `<fake_token_around_image><global-img>` +
//!    `<image>` × tokens + `<fake_token_around_image>`, with tokens = (image_size / patch_size)² /
//!    scale_factor² (64 for SmolVLM-256M).
//! 2. Each image is resized to S × S (S = `vision_config.image_size`), rescaled and normalised with the
//!    preprocessor's factor, mean and std. This is the image processor's global image; its tiling of large
//!    images into S × S crops (`do_image_splitting`) is not done: a 640x512 frame costs one image's tokens.
//! 3. The vision encoder's features replace the embeddings of the `<image>` tokens, in order.
//! 4. Greedy decoding: the first decoder run takes the whole prompt with an empty cache; each later run takes
//!    the last token and the previous run's `present.*` as `past_key_values.*`, with the attention mask
//!    covering past and new tokens and positions continuing from the prompt. Decoding stops at a stop token
//!    (`eos_token_id` of `config.json`, its `text_config` and `generation_config.json`, and
//!    `<end_of_utterance>`) or after `max_new_tokens`.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ort::session::{Session, SessionInputValue};
use ort::value::{DynValue, Tensor};
use serde::{Deserialize, Serialize};
use tokenizers::Tokenizer;

use crate::request::{Part, Usage, VlmRequest, VlmResponse};
use crate::{StatsCounter, Vlm, VlmError, VlmStats, image_ops};

/// Settings of the ONNX backend. Every field has a documented default; unknown fields are an error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OnnxConfig {
    /// Most tokens generated per answer (default 64: GST answers are short).
    pub max_new_tokens: usize,
    /// Suffix of the ONNX files to load: "" for `vision_encoder.onnx` (default), `q4`, `int8`, `quantized`,
    /// `uint8` or `bnb4` for `vision_encoder_q4.onnx` and so on.
    pub variant: String,
    /// ONNX Runtime intra-op threads; 0 lets ONNX Runtime choose (default 0).
    pub intra_threads: usize,
    /// Images per vision-encoder run (default 8): bounds memory on prompts with many frames.
    pub vision_batch: usize,
    /// The `libonnxruntime.so` to load; `None` finds it (see [`crate::runtime`]).
    pub ort_library: Option<PathBuf>,
}

impl Default for OnnxConfig {
    fn default() -> Self {
        Self {
            max_new_tokens: 64,
            variant: String::new(),
            intra_threads: 0,
            vision_batch: 8,
            ort_library: None,
        }
    }
}

impl OnnxConfig {
    pub fn validate(&self) -> Result<(), VlmError> {
        if self.max_new_tokens == 0 {
            return Err(VlmError::Config("max_new_tokens must be at least 1".into()));
        }
        if self.vision_batch == 0 {
            return Err(VlmError::Config("vision_batch must be at least 1".into()));
        }
        if self.variant.contains("fp16") || self.variant.contains("f16") {
            return Err(VlmError::Config(format!(
                "variant {:?} feeds float16 tensors; use a float32-input variant (\"\", q4, int8, quantized, uint8, bnb4)",
                self.variant
            )));
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------------------
// Hugging Face configuration files. These are other projects' files with many fields we do not use, so they
// are read leniently (unknown fields ignored), unlike our own configs.

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum TokenIds {
    One(u32),
    Many(Vec<u32>),
}

impl TokenIds {
    fn ids(&self) -> Vec<u32> {
        match self {
            TokenIds::One(id) => vec![*id],
            TokenIds::Many(ids) => ids.clone(),
        }
    }
}

#[derive(Debug, Deserialize)]
struct HfConfig {
    image_token_id: Option<u32>,
    scale_factor: Option<usize>,
    vision_config: HfVisionConfig,
    text_config: HfTextConfig,
    eos_token_id: Option<TokenIds>,
}

#[derive(Debug, Deserialize)]
struct HfVisionConfig {
    image_size: usize,
    patch_size: usize,
}

#[derive(Debug, Deserialize)]
struct HfTextConfig {
    num_key_value_heads: Option<usize>,
    num_attention_heads: Option<usize>,
    hidden_size: Option<usize>,
    head_dim: Option<usize>,
    eos_token_id: Option<TokenIds>,
}

#[derive(Debug, Deserialize)]
struct HfGenerationConfig {
    eos_token_id: Option<TokenIds>,
}

fn default_true() -> bool {
    true
}

fn default_rescale() -> f32 {
    1.0 / 255.0
}

fn default_half() -> [f32; 3] {
    [0.5; 3]
}

#[derive(Debug, Deserialize)]
struct HfPreprocessor {
    #[serde(default = "default_true")]
    do_rescale: bool,
    #[serde(default = "default_rescale")]
    rescale_factor: f32,
    #[serde(default = "default_true")]
    do_normalize: bool,
    #[serde(default = "default_half")]
    image_mean: [f32; 3],
    #[serde(default = "default_half")]
    image_std: [f32; 3],
}

/// What the loop needs to know about the model, from its files.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSpec {
    /// Side of the square images the vision encoder takes.
    pub image_size: usize,
    /// `<image>` tokens per image.
    pub tokens_per_image: usize,
    pub image_token_id: u32,
    /// Tokens that end an answer.
    pub stop_ids: Vec<u32>,
    /// Decoder cache inputs and the outputs that feed them: (`past_key_values.l.key`, `present.l.key`).
    pub cache_names: Vec<(String, String)>,
    pub kv_heads: usize,
    pub head_dim: usize,
    /// Per-channel `(scale, offset)`: pixel value v (0–255) becomes `v * scale + offset`.
    pub normalisation: [(f32, f32); 3],
    /// The template token before each image's `<image>` run, when the tokenizer has it.
    pub global_image_token: bool,
}

/// One generation, step by step: what the tests (and curious users) check.
#[derive(Clone, Debug, PartialEq)]
pub struct Generation {
    pub prompt_ids: Vec<u32>,
    /// Shape of the vision encoder's features, all images together ([images, tokens, hidden]).
    pub image_features_shape: Vec<i64>,
    /// `<image>` positions whose embeddings were replaced.
    pub spliced_tokens: usize,
    /// Generated tokens, the stop token excluded.
    pub generated_ids: Vec<u32>,
    /// The stop token that ended decoding, `None` when `max_new_tokens` did.
    pub stop_token: Option<u32>,
    /// The cache length after each decoder run (`present.*` dimension 2).
    pub cache_lengths: Vec<usize>,
    pub text: String,
}

struct Sessions {
    vision: Session,
    embed: Session,
    decoder: Session,
}

/// The ONNX backend.
pub struct OnnxVlm {
    dir: PathBuf,
    config: OnnxConfig,
    tokenizer: Tokenizer,
    spec: ModelSpec,
    sessions: Mutex<Sessions>,
    stats: StatsCounter,
}

impl std::fmt::Debug for OnnxVlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnnxVlm").field("dir", &self.dir).field("spec", &self.spec).finish_non_exhaustive()
    }
}

fn read_json<T: for<'de> Deserialize<'de>>(dir: &Path, name: &str) -> Result<T, VlmError> {
    let path = dir.join(name);
    let model_error = |message: String| VlmError::Model { dir: dir.into(), message };
    let bytes = std::fs::read(&path).map_err(|e| model_error(format!("cannot read {name}: {e}")))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| model_error(format!("{name} does not fit a SmolVLM export: {e}")))
}

fn runtime_error(what: impl std::fmt::Display, error: impl std::fmt::Display) -> VlmError {
    VlmError::Runtime(format!("{what}: {error}"))
}

impl OnnxVlm {
    /// Loads a model directory, checking every file before loading ONNX Runtime.
    pub fn load(dir: &Path, config: OnnxConfig) -> Result<Self, VlmError> {
        config.validate()?;
        let model_error = |message: String| VlmError::Model { dir: dir.into(), message };
        if !dir.is_dir() {
            return Err(model_error("not a directory".into()));
        }
        let suffix = if config.variant.is_empty() { String::new() } else { format!("_{}", config.variant) };
        let onnx_dir = if dir.join("onnx").is_dir() { dir.join("onnx") } else { dir.to_owned() };
        let onnx_file = |stem: &str| -> Result<PathBuf, VlmError> {
            let path = onnx_dir.join(format!("{stem}{suffix}.onnx"));
            if path.is_file() {
                Ok(path)
            } else {
                Err(model_error(format!("missing {} (the export's {stem} model)", path.display())))
            }
        };
        let files =
            [onnx_file("vision_encoder")?, onnx_file("embed_tokens")?, onnx_file("decoder_model_merged")?];
        for name in ["config.json", "preprocessor_config.json", "tokenizer.json"] {
            if !dir.join(name).is_file() {
                return Err(model_error(format!("missing {name}")));
            }
        }
        let hf: HfConfig = read_json(dir, "config.json")?;
        let preprocessor: HfPreprocessor = read_json(dir, "preprocessor_config.json")?;
        let generation: Option<HfGenerationConfig> = if dir.join("generation_config.json").is_file() {
            Some(read_json(dir, "generation_config.json")?)
        } else {
            None
        };
        let tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| model_error(format!("cannot read tokenizer.json: {e}")))?;

        let environment = crate::runtime::environment(config.ort_library.as_deref())?;
        let open = |path: &Path| -> Result<Session, VlmError> {
            let mut builder = Session::builder(&environment).map_err(|e| runtime_error(path.display(), e))?;
            if config.intra_threads > 0 {
                builder = builder
                    .with_intra_threads(config.intra_threads)
                    .map_err(|e| runtime_error(path.display(), e))?;
            }
            builder.commit_from_file(path).map_err(|e| runtime_error(path.display(), e))
        };
        let [vision_path, embed_path, decoder_path] = &files;
        let sessions =
            Sessions { vision: open(vision_path)?, embed: open(embed_path)?, decoder: open(decoder_path)? };
        let spec = model_spec(dir, &hf, &preprocessor, generation.as_ref(), &tokenizer, &sessions)?;
        tracing::info!(dir = %dir.display(), ?spec.tokens_per_image, layers = spec.cache_names.len() / 2, "loaded ONNX VLM");
        Ok(Self {
            dir: dir.into(),
            config,
            tokenizer,
            spec,
            sessions: Mutex::new(sessions),
            stats: StatsCounter::default(),
        })
    }

    pub fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    /// The prompt text of a request (SmolVLM's chat template) and its images in order.
    pub fn prompt<'r>(&self, request: &'r VlmRequest) -> (String, Vec<&'r gst_core::RgbImage>) {
        let image_block = {
            let mut block = String::from("<fake_token_around_image>");
            if self.spec.global_image_token {
                block.push_str("<global-img>");
            }
            block.push_str(&"<image>".repeat(self.spec.tokens_per_image));
            block.push_str("<fake_token_around_image>");
            block
        };
        let mut content = String::new();
        let mut images = Vec::new();
        for part in &request.parts {
            match part {
                Part::Text(text) => content.push_str(text),
                Part::Image(image) => {
                    content.push_str(&image_block);
                    images.push(&image.image);
                }
                Part::Video(video) => {
                    for frame in &video.frames {
                        content.push_str(&image_block);
                        images.push(frame);
                    }
                }
            }
        }
        let separator = if matches!(request.parts.first(), Some(Part::Text(_))) { ": " } else { ":" };
        (format!("<|im_start|>User{separator}{content}<end_of_utterance>\nAssistant:"), images)
    }

    /// Generates an answer and reports every step (see [`Generation`]).
    pub fn generate_traced(&self, request: &VlmRequest) -> Result<Generation, VlmError> {
        let (prompt, images) = self.prompt(request);
        let encoding = self
            .tokenizer
            .encode(prompt, false)
            .map_err(|e| VlmError::Runtime(format!("tokenizing the prompt of {}: {e}", request.id)))?;
        let prompt_ids: Vec<u32> = encoding.get_ids().to_vec();
        let mut sessions = self.sessions.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let sessions = &mut *sessions;

        let (mut embeds, hidden) = self.embed(&mut sessions.embed, &prompt_ids)?;
        let (features, image_features_shape) = self.vision(&mut sessions.vision, &images, hidden)?;
        let spliced_tokens = self.splice(&prompt_ids, &mut embeds, &features, hidden, &request.id)?;

        let mut past: Vec<DynValue> = Vec::with_capacity(self.spec.cache_names.len());
        for (name, _) in &self.spec.cache_names {
            let empty = Tensor::<f32>::from_array((
                [1usize, self.spec.kv_heads, 0, self.spec.head_dim],
                Vec::<f32>::new(),
            ))
            .map_err(|e| runtime_error(name, e))?;
            past.push(empty.into_dyn());
        }
        let mut generated_ids = Vec::new();
        let mut cache_lengths = Vec::new();
        let mut stop_token = None;
        let mut past_len = 0usize;
        let mut seq_len = prompt_ids.len();
        loop {
            let (next, cache_len, presents) =
                self.decode_step(&mut sessions.decoder, embeds, hidden, seq_len, past_len, past)?;
            past = presents;
            cache_lengths.push(cache_len);
            past_len += seq_len;
            if cache_len != past_len {
                return Err(VlmError::Model {
                    dir: self.dir.clone(),
                    message: format!(
                        "the decoder's cache holds {cache_len} positions after {past_len} tokens"
                    ),
                });
            }
            if self.spec.stop_ids.contains(&next) {
                stop_token = Some(next);
                break;
            }
            generated_ids.push(next);
            if generated_ids.len() >= self.config.max_new_tokens {
                break;
            }
            embeds = self.embed(&mut sessions.embed, &[next])?.0;
            seq_len = 1;
        }
        let text = self
            .tokenizer
            .decode(&generated_ids, true)
            .map_err(|e| VlmError::Runtime(format!("decoding the answer to {}: {e}", request.id)))?;
        Ok(Generation {
            prompt_ids,
            image_features_shape,
            spliced_tokens,
            generated_ids,
            stop_token,
            cache_lengths,
            text,
        })
    }

    /// Token embeddings [1, n, hidden] (flattened) and the hidden size.
    fn embed(&self, session: &mut Session, ids: &[u32]) -> Result<(Vec<f32>, usize), VlmError> {
        let ids: Vec<i64> = ids.iter().map(|&id| i64::from(id)).collect();
        let n = ids.len();
        let input =
            Tensor::<i64>::from_array(([1usize, n], ids)).map_err(|e| runtime_error("input_ids", e))?;
        let input_name =
            session.inputs().first().map(|i| i.name().to_owned()).unwrap_or_else(|| "input_ids".into());
        let output_name = output_named(session, "inputs_embeds");
        let outputs = session
            .run(vec![(Cow::<str>::Owned(input_name), SessionInputValue::from(input))])
            .map_err(|e| runtime_error("embed_tokens", e))?;
        let value = outputs.get(&output_name);
        let Some(value) = value else {
            return Err(runtime_error("embed_tokens", "no output"));
        };
        let (shape, data) =
            value.try_extract_tensor::<f32>().map_err(|e| runtime_error("embed_tokens output", e))?;
        let hidden = shape.last().copied().unwrap_or(0).max(0) as usize;
        if shape.len() != 3 || hidden == 0 || data.len() != n * hidden {
            return Err(runtime_error("embed_tokens", format!("output shape {shape:?} for {n} tokens")));
        }
        Ok((data.to_vec(), hidden))
    }

    /// Features of every image, in order ([images * tokens, hidden] flattened), and their shape.
    fn vision(
        &self,
        session: &mut Session,
        images: &[&gst_core::RgbImage],
        hidden: usize,
    ) -> Result<(Vec<f32>, Vec<i64>), VlmError> {
        let size = self.spec.image_size;
        let mut features = Vec::new();
        let has_mask = session.inputs().iter().any(|input| input.name() == "pixel_attention_mask");
        let output_name = output_named(session, "image_features");
        for chunk in images.chunks(self.config.vision_batch) {
            let mut pixels = Vec::with_capacity(chunk.len() * 3 * size * size);
            for image in chunk {
                pixels.extend(self.pixel_values(image));
            }
            let values = Tensor::<f32>::from_array(([1usize, chunk.len(), 3, size, size], pixels))
                .map_err(|e| runtime_error("pixel_values", e))?;
            let mut inputs: Vec<(Cow<'_, str>, SessionInputValue<'_>)> =
                vec![(Cow::Borrowed("pixel_values"), SessionInputValue::from(values))];
            if has_mask {
                let mask = Tensor::<bool>::from_array((
                    [1usize, chunk.len(), size, size],
                    vec![true; chunk.len() * size * size],
                ))
                .map_err(|e| runtime_error("pixel_attention_mask", e))?;
                inputs.push((Cow::Borrowed("pixel_attention_mask"), SessionInputValue::from(mask)));
            }
            let outputs = session.run(inputs).map_err(|e| runtime_error("vision_encoder", e))?;
            let value = outputs.get(&output_name);
            let Some(value) = value else {
                return Err(runtime_error("vision_encoder", "no output"));
            };
            let (shape, data) =
                value.try_extract_tensor::<f32>().map_err(|e| runtime_error("image_features", e))?;
            let expected = chunk.len() * self.spec.tokens_per_image * hidden;
            if data.len() != expected || shape.last().copied() != Some(hidden as i64) {
                return Err(VlmError::Model {
                    dir: self.dir.clone(),
                    message: format!(
                        "the vision encoder gave features of shape {shape:?} for {} images; expected {} tokens of {hidden} each per image",
                        chunk.len(),
                        self.spec.tokens_per_image
                    ),
                });
            }
            features.extend_from_slice(data);
        }
        let shape = vec![images.len() as i64, self.spec.tokens_per_image as i64, hidden as i64];
        Ok((features, shape))
    }

    /// One image as the encoder takes it: S x S, channels first, normalised.
    fn pixel_values(&self, image: &gst_core::RgbImage) -> Vec<f32> {
        let size = self.spec.image_size;
        let resized = image_ops::resize_bilinear(image, size as u32, size as u32);
        let mut out = vec![0.0f32; 3 * size * size];
        for (i, pixel) in resized.data().iter().enumerate() {
            for c in 0..3 {
                let (scale, offset) = self.spec.normalisation[c];
                out[c * size * size + i] = f32::from(pixel[c]) * scale + offset;
            }
        }
        out
    }

    /// Replaces the embedding of each `<image>` token by the next image feature; returns how many.
    fn splice(
        &self,
        ids: &[u32],
        embeds: &mut [f32],
        features: &[f32],
        hidden: usize,
        id: &str,
    ) -> Result<usize, VlmError> {
        let positions: Vec<usize> =
            ids.iter().enumerate().filter(|&(_, &t)| t == self.spec.image_token_id).map(|(i, _)| i).collect();
        if positions.len() * hidden != features.len() {
            return Err(VlmError::Runtime(format!(
                "prompt of {id}: {} <image> tokens but {} image feature vectors (does tokenizer.json know <image>?)",
                positions.len(),
                features.len() / hidden.max(1)
            )));
        }
        for (k, &position) in positions.iter().enumerate() {
            embeds[position * hidden..(position + 1) * hidden]
                .copy_from_slice(&features[k * hidden..(k + 1) * hidden]);
        }
        Ok(positions.len())
    }

    /// One decoder run: the argmax of the last position, the cache length, and the new cache.
    fn decode_step(
        &self,
        session: &mut Session,
        embeds: Vec<f32>,
        hidden: usize,
        seq_len: usize,
        past_len: usize,
        past: Vec<DynValue>,
    ) -> Result<(u32, usize, Vec<DynValue>), VlmError> {
        let total = past_len + seq_len;
        let tensor = |what: &str, result: ort::Result<DynValue>| result.map_err(|e| runtime_error(what, e));
        let mut inputs: Vec<(Cow<'_, str>, SessionInputValue<'_>)> = vec![
            (
                Cow::Borrowed("inputs_embeds"),
                tensor(
                    "inputs_embeds",
                    Tensor::<f32>::from_array(([1usize, seq_len, hidden], embeds)).map(Tensor::into_dyn),
                )?
                .into(),
            ),
            (
                Cow::Borrowed("attention_mask"),
                tensor(
                    "attention_mask",
                    Tensor::<i64>::from_array(([1usize, total], vec![1i64; total])).map(Tensor::into_dyn),
                )?
                .into(),
            ),
        ];
        let input_names: Vec<String> = session.inputs().iter().map(|i| i.name().to_owned()).collect();
        if input_names.iter().any(|name| name == "position_ids") {
            let positions: Vec<i64> = (past_len as i64..total as i64).collect();
            inputs.push((
                Cow::Borrowed("position_ids"),
                tensor(
                    "position_ids",
                    Tensor::<i64>::from_array(([1usize, seq_len], positions)).map(Tensor::into_dyn),
                )?
                .into(),
            ));
        }
        if input_names.iter().any(|name| name == "use_cache_branch") {
            inputs.push((
                Cow::Borrowed("use_cache_branch"),
                tensor(
                    "use_cache_branch",
                    Tensor::<bool>::from_array(([1usize], vec![past_len > 0])).map(Tensor::into_dyn),
                )?
                .into(),
            ));
        }
        for ((name, _), value) in self.spec.cache_names.iter().zip(past) {
            inputs.push((Cow::Owned(name.clone()), SessionInputValue::from(value)));
        }
        let mut outputs = session.run(inputs).map_err(|e| runtime_error("decoder_model_merged", e))?;
        let next = {
            let Some(logits) = outputs.get("logits") else {
                return Err(runtime_error("decoder_model_merged", "no logits output"));
            };
            let (shape, data) = logits.try_extract_tensor::<f32>().map_err(|e| runtime_error("logits", e))?;
            let vocab = shape.last().copied().unwrap_or(0).max(0) as usize;
            if shape.len() != 3 || vocab == 0 || data.len() != seq_len * vocab {
                return Err(runtime_error(
                    "decoder_model_merged",
                    format!("logits of shape {shape:?} for {seq_len} tokens"),
                ));
            }
            argmax(&data[(seq_len - 1) * vocab..])
        };
        let mut presents = Vec::with_capacity(self.spec.cache_names.len());
        let mut cache_len = 0;
        for (_, present) in &self.spec.cache_names {
            let Some(value) = outputs.remove(present) else {
                return Err(runtime_error("decoder_model_merged", format!("no output {present}")));
            };
            let (shape, _) = value.try_extract_tensor::<f32>().map_err(|e| runtime_error(present, e))?;
            cache_len = shape.get(2).copied().unwrap_or(0).max(0) as usize;
            presents.push(value);
        }
        Ok((next, cache_len, presents))
    }
}

/// The output called `preferred`, or else the session's first output.
fn output_named(session: &Session, preferred: &str) -> String {
    let outputs = session.outputs();
    if outputs.iter().any(|output| output.name() == preferred) {
        return preferred.to_owned();
    }
    outputs.first().map_or_else(|| preferred.to_owned(), |output| output.name().to_owned())
}

/// The index of the largest value (the first of equals).
fn argmax(values: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &value) in values.iter().enumerate() {
        if value > values[best] {
            best = i;
        }
    }
    best as u32
}

fn model_spec(
    dir: &Path,
    hf: &HfConfig,
    preprocessor: &HfPreprocessor,
    generation: Option<&HfGenerationConfig>,
    tokenizer: &Tokenizer,
    sessions: &Sessions,
) -> Result<ModelSpec, VlmError> {
    let model_error = |message: String| VlmError::Model { dir: dir.into(), message };
    let vision = &hf.vision_config;
    let scale = hf.scale_factor.unwrap_or(1).max(1);
    if vision.patch_size == 0 || !vision.image_size.is_multiple_of(vision.patch_size) {
        return Err(model_error(format!(
            "config.json: image_size {} is not a multiple of patch_size {}",
            vision.image_size, vision.patch_size
        )));
    }
    let patches = (vision.image_size / vision.patch_size).pow(2);
    if !patches.is_multiple_of(scale * scale) {
        return Err(model_error(format!(
            "config.json: {patches} patches do not merge by scale_factor {scale}"
        )));
    }
    let tokens_per_image = patches / (scale * scale);
    let image_token_id = match hf.image_token_id {
        Some(id) => id,
        None => tokenizer
            .token_to_id("<image>")
            .ok_or_else(|| model_error("no image_token_id and no <image> token".into()))?,
    };
    let mut stop_ids = Vec::new();
    for ids in [
        hf.eos_token_id.as_ref(),
        hf.text_config.eos_token_id.as_ref(),
        generation.and_then(|g| g.eos_token_id.as_ref()),
    ]
    .into_iter()
    .flatten()
    {
        stop_ids.extend(ids.ids());
    }
    stop_ids.extend(tokenizer.token_to_id("<end_of_utterance>"));
    stop_ids.sort_unstable();
    stop_ids.dedup();
    if stop_ids.is_empty() {
        return Err(model_error(
            "no eos_token_id in config.json or generation_config.json and no <end_of_utterance>".into(),
        ));
    }

    let decoder_file = "decoder_model_merged.onnx";
    let output_names: Vec<&str> = sessions.decoder.outputs().iter().map(|o| o.name()).collect();
    let mut cache_names = Vec::new();
    let mut cache_shape: Option<Vec<i64>> = None;
    for input in sessions.decoder.inputs() {
        let Some(rest) = input.name().strip_prefix("past_key_values.") else { continue };
        let present = format!("present.{rest}");
        if !output_names.contains(&present.as_str()) {
            return Err(model_error(format!(
                "{decoder_file} has input {} but no output {present}",
                input.name()
            )));
        }
        if input.dtype().tensor_type() != Some(ort::value::TensorElementType::Float32) {
            return Err(model_error(format!(
                "{decoder_file}: {} is {:?}, not float32 (float16 variants are not supported)",
                input.name(),
                input.dtype().tensor_type()
            )));
        }
        cache_shape = input.dtype().tensor_shape().map(|shape| shape.to_vec());
        cache_names.push((input.name().to_owned(), present));
    }
    if cache_names.is_empty() {
        return Err(model_error(format!(
            "{decoder_file} has no past_key_values.* inputs (not a merged decoder with a cache)"
        )));
    }
    for required in ["inputs_embeds", "attention_mask"] {
        if !sessions.decoder.inputs().iter().any(|input| input.name() == required) {
            return Err(model_error(format!("{decoder_file} has no {required} input")));
        }
    }
    if !output_names.contains(&"logits") {
        return Err(model_error(format!("{decoder_file} has no logits output")));
    }
    if !sessions.vision.inputs().iter().any(|input| input.name() == "pixel_values") {
        return Err(model_error("vision_encoder.onnx has no pixel_values input".into()));
    }
    let text = &hf.text_config;
    let fixed = |index: usize| {
        cache_shape.as_ref().and_then(|s| s.get(index).copied()).filter(|&d| d > 0).map(|d| d as usize)
    };
    let kv_heads = fixed(1)
        .or(text.num_key_value_heads)
        .or(text.num_attention_heads)
        .ok_or_else(|| model_error("cannot tell the number of key/value heads".into()))?;
    let head_dim = fixed(3)
        .or(text.head_dim)
        .or_else(|| Some(text.hidden_size? / text.num_attention_heads?))
        .ok_or_else(|| model_error("cannot tell the attention head size".into()))?;
    let normalisation = std::array::from_fn(|c| {
        let rescale = if preprocessor.do_rescale { preprocessor.rescale_factor } else { 1.0 };
        if preprocessor.do_normalize && preprocessor.image_std[c] != 0.0 {
            (rescale / preprocessor.image_std[c], -preprocessor.image_mean[c] / preprocessor.image_std[c])
        } else {
            (rescale, 0.0)
        }
    });
    Ok(ModelSpec {
        image_size: vision.image_size,
        tokens_per_image,
        image_token_id,
        stop_ids,
        cache_names,
        kv_heads,
        head_dim,
        normalisation,
        global_image_token: tokenizer.token_to_id("<global-img>").is_some(),
    })
}

impl Vlm for OnnxVlm {
    fn name(&self) -> String {
        let name =
            self.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into());
        if self.config.variant.is_empty() {
            format!("onnx:{name}")
        } else {
            format!("onnx:{name}:{}", self.config.variant)
        }
    }

    fn generate(&self, request: &VlmRequest) -> Result<VlmResponse, VlmError> {
        match self.generate_traced(request) {
            Ok(generation) => {
                let response = VlmResponse {
                    text: generation.text,
                    usage: Some(Usage {
                        prompt_tokens: generation.prompt_ids.len() as u64,
                        completion_tokens: generation.generated_ids.len() as u64,
                    }),
                    cached: false,
                };
                self.stats.record(&response);
                Ok(response)
            }
            Err(error) => {
                self.stats.record_failure();
                Err(error)
            }
        }
    }

    fn stats(&self) -> VlmStats {
        self.stats.snapshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_takes_the_first_of_equals() {
        assert_eq!(argmax(&[0.0, 3.0, 3.0, -1.0]), 1);
        assert_eq!(argmax(&[5.0]), 0);
    }

    #[test]
    fn float16_variants_are_refused_before_loading() {
        let config = OnnxConfig { variant: "q4f16".into(), ..OnnxConfig::default() };
        assert!(config.validate().is_err());
        assert!(OnnxConfig::default().validate().is_ok());
    }
}
