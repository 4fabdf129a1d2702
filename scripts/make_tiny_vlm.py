#!/usr/bin/env python3
"""Writes a tiny SmolVLM-shaped ONNX model set: the test fixture of gst-vlm's ONNX backend.

The layout, file names, graph input/output names and tensor ranks are those of Hugging Face's ONNX export of
SmolVLM (HuggingFaceTB/SmolVLM-256M-Instruct, `onnx/` folder; Idefics3 architecture):

    config.json                 image_token_id, scale_factor, vision_config, text_config (eos_token_id, ...)
    preprocessor_config.json    Idefics3ImageProcessor: max_image_size, rescale factor, mean and std
    tokenizer.json              Hugging Face tokenizers format
    onnx/vision_encoder.onnx    pixel_values f32 [batch, images, 3, S, S], pixel_attention_mask bool
                                [batch, images, S, S] -> image_features f32 [batch*images, tokens, hidden]
    onnx/embed_tokens.onnx      input_ids i64 [batch, seq] -> inputs_embeds f32 [batch, seq, hidden]
    onnx/decoder_model_merged.onnx
                                inputs_embeds, attention_mask i64 [batch, past+seq], position_ids i64
                                [batch, seq], past_key_values.{l}.{key,value} f32 [batch, kv_heads, past,
                                head_dim] -> logits f32 [batch, seq, vocab], present.{l}.{key,value}

The weights are hand-set so that a test can check the decoding loop, not language (`python3
scripts/make_tiny_vlm.py OUT_DIR`, needs the `onnx` and `numpy` packages of the project's .venv):

- every text token embeds with channel 0 = 1; every image feature has channel 0 = 2 (times the mean of
  pixel_attention_mask), so a spliced image token weighs twice;
- key component (head 0, dim 0) of layer 0 is channel 0 of the input, and `present = concat(past, new)`:
  the sum of that component over the cache is the weight of every token seen so far, which only the KV
  cache carries from one decoding step to the next;
- logits[v] = count * v - v^2 / 2, whose argmax is v = count (clamped to the vocabulary): the model emits
  the ids count, count + 1, ... until it reaches the stop token (the last id, `<|im_end|>`).

So with a prompt of n text tokens and k image tokens the first generated id is n + 2k, each later one is
one more, and decoding stops at the eos id. Nothing is random: the other weights come from a seeded RNG.
"""

import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

VOCAB = [
    "<unk>",
    "<|im_start|>",
    "<end_of_utterance>",
    "<fake_token_around_image>",
    "<global-img>",
    "<image>",
]
WORDS = (
    "User : Assistant ? . , ! Where What Which is are the a of in on to you your current view "
    "video frame Frame exploration scene image images map top-down object sofa bed table chair "
    "answer A B C D degrees metres point left right this This earlier entire red box direction "
    "distance"
).split()
VOCAB += WORDS
EOS = "<|im_end|>"
VOCAB_SIZE = 64
while len(VOCAB) < VOCAB_SIZE - 1:
    VOCAB.append(f"word{len(VOCAB)}")
VOCAB.append(EOS)
assert len(VOCAB) == VOCAB_SIZE, len(VOCAB)
SPECIAL = {"<unk>", "<|im_start|>", "<end_of_utterance>", "<fake_token_around_image>", "<global-img>", "<image>", EOS}

HIDDEN = 16
LAYERS = 2
HEADS = 4
KV_HEADS = 2
HEAD_DIM = 4
IMAGE_SIZE = 32
PATCH_SIZE = 8
SCALE_FACTOR = 2
# (32 / 8)^2 patches, merged 2x2 by the pixel shuffle: 4 tokens per image.
TOKENS_PER_IMAGE = (IMAGE_SIZE // PATCH_SIZE) ** 2 // SCALE_FACTOR**2
GRID = int(round(TOKENS_PER_IMAGE**0.5))
OPSET = 17

rng = np.random.default_rng(7)


def f32(array):
    return np.asarray(array, dtype=np.float32)


def save(graph, path):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="gst make_tiny_vlm")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def vision_encoder(path):
    nodes = [
        helper.make_node("Reshape", ["pixel_values", "images_shape"], ["images"]),
        helper.make_node(
            "AveragePool",
            ["images"],
            ["pooled"],
            kernel_shape=[IMAGE_SIZE // GRID] * 2,
            strides=[IMAGE_SIZE // GRID] * 2,
        ),
        helper.make_node("Reshape", ["pooled", "tokens_shape"], ["channels_tokens"]),
        helper.make_node("Transpose", ["channels_tokens"], ["tokens_channels"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["tokens_channels", "projection"], ["projected"]),
        helper.make_node("Add", ["projected", "bias"], ["features"]),
        helper.make_node("Cast", ["pixel_attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
        helper.make_node("ReduceMean", ["mask_f"], ["mask_mean"], axes=[2, 3], keepdims=0),
        helper.make_node("Reshape", ["mask_mean", "mask_shape"], ["mask_scale"]),
        helper.make_node("Mul", ["features", "mask_scale"], ["image_features"]),
    ]
    projection = f32(rng.normal(0.0, 0.1, (3, HIDDEN)))
    projection[:, 0] = 0.0
    bias = f32(rng.normal(0.0, 0.1, HIDDEN))
    bias[0] = 2.0
    initializers = [
        numpy_helper.from_array(np.array([-1, 3, IMAGE_SIZE, IMAGE_SIZE], dtype=np.int64), "images_shape"),
        numpy_helper.from_array(np.array([0, 3, TOKENS_PER_IMAGE], dtype=np.int64), "tokens_shape"),
        numpy_helper.from_array(np.array([-1, 1, 1], dtype=np.int64), "mask_shape"),
        numpy_helper.from_array(projection, "projection"),
        numpy_helper.from_array(bias, "bias"),
    ]
    graph = helper.make_graph(
        nodes,
        "vision_encoder",
        [
            helper.make_tensor_value_info(
                "pixel_values", TensorProto.FLOAT, ["batch_size", "num_images", 3, "height", "width"]
            ),
            helper.make_tensor_value_info(
                "pixel_attention_mask", TensorProto.BOOL, ["batch_size", "num_images", "height", "width"]
            ),
        ],
        [
            helper.make_tensor_value_info(
                "image_features", TensorProto.FLOAT, ["batch_size_times_num_images", TOKENS_PER_IMAGE, HIDDEN]
            )
        ],
        initializers,
    )
    save(graph, path)


def embed_tokens(path):
    table = f32(rng.normal(0.0, 0.1, (VOCAB_SIZE, HIDDEN)))
    table[:, 0] = 1.0
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["inputs_embeds"], axis=0)],
        "embed_tokens",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"])],
        [helper.make_tensor_value_info("inputs_embeds", TensorProto.FLOAT, ["batch_size", "sequence_length", HIDDEN])],
        [numpy_helper.from_array(table, "table")],
    )
    save(graph, path)


def decoder(path):
    nodes = []
    initializers = [
        numpy_helper.from_array(np.array([0, 0, KV_HEADS, HEAD_DIM], dtype=np.int64), "split_heads"),
        numpy_helper.from_array(np.array([0, 0], dtype=np.int64), "count_starts"),
        numpy_helper.from_array(np.array([1, 1], dtype=np.int64), "count_ends"),
        numpy_helper.from_array(np.array([1, 3], dtype=np.int64), "count_axes"),
        numpy_helper.from_array(f32(np.arange(VOCAB_SIZE)), "logit_slope"),
        numpy_helper.from_array(f32(-0.5 * np.arange(VOCAB_SIZE) ** 2), "logit_offset"),
        numpy_helper.from_array(np.zeros((HIDDEN, VOCAB_SIZE), dtype=np.float32), "zero_head"),
        numpy_helper.from_array(f32(0.0), "zero"),
    ]
    inputs = [
        helper.make_tensor_value_info("inputs_embeds", TensorProto.FLOAT, ["batch_size", "sequence_length", HIDDEN]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch_size", "total_sequence_length"]),
        helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
    ]
    outputs = [
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch_size", "sequence_length", VOCAB_SIZE])
    ]
    for layer in range(LAYERS):
        for kind in ("key", "value"):
            past = f"past_key_values.{layer}.{kind}"
            present = f"present.{layer}.{kind}"
            weight = f32(rng.normal(0.0, 0.1, (HIDDEN, KV_HEADS * HEAD_DIM)))
            if layer == 0 and kind == "key":
                weight[:, 0] = 0.0
                weight[0, 0] = 1.0
            name = f"w_{layer}_{kind}"
            initializers.append(numpy_helper.from_array(weight, name))
            nodes += [
                helper.make_node("MatMul", ["inputs_embeds", name], [f"{name}_flat"]),
                helper.make_node("Reshape", [f"{name}_flat", "split_heads"], [f"{name}_heads"]),
                helper.make_node("Transpose", [f"{name}_heads"], [f"{name}_new"], perm=[0, 2, 1, 3]),
                helper.make_node("Concat", [past, f"{name}_new"], [present], axis=2),
            ]
            inputs.append(
                helper.make_tensor_value_info(
                    past, TensorProto.FLOAT, ["batch_size", KV_HEADS, "past_sequence_length", HEAD_DIM]
                )
            )
            outputs.append(
                helper.make_tensor_value_info(
                    present, TensorProto.FLOAT, ["batch_size", KV_HEADS, "total_sequence_length", HEAD_DIM]
                )
            )
    nodes += [
        # The weight of every token in the cache: component (head 0, dim 0) of layer 0's keys.
        helper.make_node("Slice", ["present.0.key", "count_starts", "count_ends", "count_axes"], ["count_slice"]),
        helper.make_node("ReduceSum", ["count_slice"], ["count"], keepdims=0),
        helper.make_node("Mul", ["count", "logit_slope"], ["sloped"]),
        helper.make_node("Add", ["sloped", "logit_offset"], ["row"]),
        # Consume the mask and positions (as the real decoder does) without changing the logits.
        helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
        helper.make_node("ReduceSum", ["mask_f"], ["mask_sum"], keepdims=0),
        helper.make_node("Cast", ["position_ids"], ["positions_f"], to=TensorProto.FLOAT),
        helper.make_node("ReduceSum", ["positions_f"], ["positions_sum"], keepdims=0),
        helper.make_node("Add", ["mask_sum", "positions_sum"], ["unused_sum"]),
        helper.make_node("Mul", ["unused_sum", "zero"], ["nothing"]),
        helper.make_node("Add", ["row", "nothing"], ["row_checked"]),
        helper.make_node("MatMul", ["inputs_embeds", "zero_head"], ["zeros"]),
        helper.make_node("Add", ["zeros", "row_checked"], ["logits"]),
    ]
    graph = helper.make_graph(nodes, "decoder_model_merged", inputs, outputs, initializers)
    save(graph, path)


def tokenizer(path):
    added = [
        {
            "id": VOCAB.index(token),
            "content": token,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for token in VOCAB
        if token in SPECIAL
    ]
    document = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordLevel", "vocab": {token: i for i, token in enumerate(VOCAB)}, "unk_token": "<unk>"},
    }
    with open(path, "w") as f:
        json.dump(document, f, indent=1)


def configs(out):
    config = {
        "architectures": ["Idefics3ForConditionalGeneration"],
        "model_type": "idefics3",
        "image_token_id": VOCAB.index("<image>"),
        "scale_factor": SCALE_FACTOR,
        "vision_config": {"image_size": IMAGE_SIZE, "patch_size": PATCH_SIZE, "hidden_size": 8},
        "text_config": {
            "hidden_size": HIDDEN,
            "num_attention_heads": HEADS,
            "num_key_value_heads": KV_HEADS,
            "num_hidden_layers": LAYERS,
            "head_dim": HEAD_DIM,
            "vocab_size": VOCAB_SIZE,
            "eos_token_id": VOCAB.index(EOS),
        },
    }
    preprocessor = {
        "image_processor_type": "Idefics3ImageProcessor",
        "do_resize": True,
        "size": {"longest_edge": IMAGE_SIZE},
        "max_image_size": {"longest_edge": IMAGE_SIZE},
        "do_image_splitting": False,
        "do_rescale": True,
        "rescale_factor": 1 / 255,
        "do_normalize": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    with open(os.path.join(out, "preprocessor_config.json"), "w") as f:
        json.dump(preprocessor, f, indent=1)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_tiny_vlm.py OUT_DIR")
    out = sys.argv[1]
    os.makedirs(os.path.join(out, "onnx"), exist_ok=True)
    vision_encoder(os.path.join(out, "onnx", "vision_encoder.onnx"))
    embed_tokens(os.path.join(out, "onnx", "embed_tokens.onnx"))
    decoder(os.path.join(out, "onnx", "decoder_model_merged.onnx"))
    tokenizer(os.path.join(out, "tokenizer.json"))
    configs(out)
    print(f"wrote a tiny SmolVLM-shaped model set to {out} ({TOKENS_PER_IMAGE} tokens per image)")


if __name__ == "__main__":
    main()
