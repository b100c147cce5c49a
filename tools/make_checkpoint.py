#!/usr/bin/python3
"""Random-weight Qwen3-TTS checkpoints in the official directory layout.

Lets the C engine's model tests run without real weights: `tiny` is a few tens
of MB and runs in CI in seconds, `full` has the real 0.6B / 1.7B shapes for
memory and speed work. Tensor names, shapes, dtypes and config keys follow
shared/spec/qwen3-tts.md sections 6-8 and the official configuration classes
(qwen_tts/core/models/configuration_qwen3_tts.py,
qwen_tts/core/tokenizer_12hz/configuration_qwen3_tts_tokenizer_v2.py).

Data flow:
    --preset/--size/--variant
      -> *_dims(): hyperparameters of talker, code predictor, speaker encoder,
         codec decoder and codec encoder (the only place sizes are chosen)
      -> *_config(): the JSON files, written from those same dims, so every
         dimension in a config is the one its tensors have
      -> plan_*(): the tensor plan, a list of (name, shape, init) entries
      -> write_weights(): safetensors header from the plan, then each tensor
         drawn from its own generator (seeded by --seed and its name, so a
         tensor's values do not depend on which other tensors exist),
         cast to BF16 (model.safetensors) or F32 (speech_tokenizer/) and
         streamed to disk one at a time.

Output directory:
    config.json, generation_config.json, preprocessor_config.json, model.safetensors
    speech_tokenizer/config.json, speech_tokenizer/preprocessor_config.json,
    speech_tokenizer/model.safetensors
(No vocab.json / merges.txt: the text tokenizer files are not random data.)

Random weights keep activations finite and non-trivial: linear and conv
weights ~ N(0, 1/fan_in), norm weights 1 +- 0.1, layer scales 0.01..0.1 (0.1..0.5
in the codec pre-transformer, see CODEC_LAYER_SCALE),
ConvNeXt gamma ~0.1, SnakeBeta log-parameters ~ N(0, 0.1), codebooks ~ N(0, 1)
with cluster_usage uniform in [0.5, 2]. `--check` decodes random codes with
tools/reference/codec_decoder.py and prints every stage's RMS.

Usage:
    make_checkpoint.py --preset tiny|full --out DIR [--seed N]
                       [--variant custom_voice|voice_design|base] [--size 0b6|1b7] [--check]
"""

import argparse
import json
import math
import os
import sys
import time
import zlib

import torch

from reference import safetensors_io as st

TEXT_VOCAB_SIZE = 151936
CODEC_VOCAB_SIZE = 3072          # talker codec vocabulary (codes 0..2047 + control ids)
CODEBOOK_SIZE = 2048
NUM_CODE_GROUPS = 16             # codebooks per frame

TOKEN_IDS = {
    "assistant_token_id": 77091,
    "im_start_token_id": 151644,
    "im_end_token_id": 151645,
    "tts_pad_token_id": 151671,
    "tts_bos_token_id": 151672,
    "tts_eos_token_id": 151673,
}

CODEC_IDS = {
    "codec_pad_id": 2148,
    "codec_bos_id": 2149,
    "codec_eos_token_id": 2150,
    "codec_think_id": 2154,
    "codec_nothink_id": 2155,
    "codec_think_bos_id": 2156,
    "codec_think_eos_id": 2157,
}

LANGUAGE_IDS = {
    "chinese": 2055, "english": 2050, "german": 2053, "italian": 2070,
    "portuguese": 2071, "spanish": 2054, "japanese": 2058, "korean": 2064,
    "french": 2061, "russian": 2069, "beijing_dialect": 2074, "sichuan_dialect": 2062,
}

SPEAKER_IDS = {
    "serena": 3066, "vivian": 3065, "uncle_fu": 3010, "ryan": 3061, "aiden": 2861,
    "ono_anna": 2873, "sohee": 2864, "eric": 2875, "dylan": 2878,
}
SPEAKER_DIALECTS = {"eric": "sichuan_dialect", "dylan": "beijing_dialect"}

GENERATION_CONFIG = {
    "do_sample": True,
    "temperature": 0.9,
    "top_k": 50,
    "top_p": 1.0,
    "repetition_penalty": 1.05,
    "subtalker_dosample": True,
    "subtalker_temperature": 0.9,
    "subtalker_top_k": 50,
    "subtalker_top_p": 1.0,
    "max_new_tokens": 8192,
}

TRANSFORMERS_VERSION = "4.57.3"  # the version qwen-tts 0.1.1 pins


# ---------------------------------------------------------------- dimensions

def talker_dims(preset, size):
    """Talker hyperparameters; ratios (q width 2*D for 0.6B, = D for 1.7B) kept in tiny."""
    if preset == "full":
        hidden = {"0b6": 1024, "1b7": 2048}[size]
        return dict(hidden_size=hidden, intermediate_size=3 * hidden, num_hidden_layers=28,
                    num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                    text_hidden_size=2048, mrope_section=[24, 20, 20])
    hidden = {"0b6": 32, "1b7": 64}[size]
    return dict(hidden_size=hidden, intermediate_size=3 * hidden, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                text_hidden_size=64, mrope_section=[3, 3, 2])


def code_predictor_dims(preset):
    if preset == "full":
        return dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=5,
                    num_attention_heads=16, num_key_value_heads=8, head_dim=128)
    return dict(hidden_size=32, intermediate_size=96, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, head_dim=16)


def speaker_dims(preset, enc_dim):
    """ECAPA-TDNN sizes; the last channel count is the sum of the SE-Res2Net blocks'."""
    base = dict(mel_dim=128, enc_dim=enc_dim, enc_kernel_sizes=[5, 3, 3, 3, 1],
                enc_dilations=[1, 2, 3, 4, 1], enc_res2net_scale=8, sample_rate=24000)
    if preset == "full":
        return dict(base, enc_channels=[512, 512, 512, 512, 1536],
                    enc_attention_channels=128, enc_se_channels=128)
    return dict(base, enc_channels=[32, 32, 32, 32, 96],
                enc_attention_channels=16, enc_se_channels=16)


def codec_decoder_dims(preset):
    """decoder_config; structural constants (16 x 2048 codes, rates) identical in tiny."""
    fixed = dict(codebook_size=CODEBOOK_SIZE, num_quantizers=NUM_CODE_GROUPS,
                 num_semantic_quantizers=1, upsample_rates=[8, 5, 4, 3],
                 upsampling_ratios=[2, 2], rms_norm_eps=1e-5, rope_theta=10000,
                 layer_scale_initial_scale=0.01, max_position_embeddings=8000,
                 attention_bias=False, attention_dropout=0.0, hidden_act="silu",
                 semantic_codebook_size=4096)
    if preset == "full":
        sizes = dict(codebook_dim=512, latent_dim=1024, hidden_size=512, num_hidden_layers=8,
                     num_attention_heads=16, num_key_value_heads=16, head_dim=64,
                     intermediate_size=1024, sliding_window=72, decoder_dim=1536)
    else:
        sizes = dict(codebook_dim=32, latent_dim=64, hidden_size=32, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=4, head_dim=16,
                     intermediate_size=64, sliding_window=16, decoder_dim=64)
    sizes["vector_quantization_hidden_dimension"] = sizes["codebook_dim"]
    return dict(fixed, **sizes)


def codec_encoder_dims(preset):
    """encoder_config (a Mimi config); strides 4,5,6,8 and 32 quantizers kept in tiny."""
    fixed = dict(model_type="mimi", audio_channels=1, sampling_rate=24000,
                 upsampling_ratios=[8, 6, 5, 4], kernel_size=7, residual_kernel_size=3,
                 last_kernel_size=3, num_residual_layers=1, dilation_growth_rate=2,
                 compress=2, use_causal_conv=True, pad_mode="constant", trim_right_ratio=1.0,
                 hidden_act="gelu", norm_eps=1e-5, layer_scale_initial_scale=0.01,
                 rope_theta=10000, max_position_embeddings=8000, sliding_window=250,
                 num_quantizers=32, num_semantic_quantizers=1, codebook_size=CODEBOOK_SIZE,
                 use_conv_shortcut=False, attention_bias=False, attention_dropout=0.0,
                 _frame_rate=12.5)
    if preset == "full":
        sizes = dict(num_filters=64, hidden_size=512, num_hidden_layers=8, num_attention_heads=8,
                     num_key_value_heads=8, head_dim=64, intermediate_size=2048,
                     codebook_dim=256, upsample_groups=512)
    else:
        sizes = dict(num_filters=4, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=4, head_dim=8, intermediate_size=64,
                     codebook_dim=16, upsample_groups=32)
    sizes["vector_quantization_hidden_dimension"] = sizes["codebook_dim"]
    return dict(fixed, **sizes)


# ---------------------------------------------------------------- config files

def talker_config(td, cd, variant):
    """talker_config with its nested code_predictor_config; speakers only for custom_voice."""
    custom = variant == "custom_voice"
    dialects = {s: SPEAKER_DIALECTS.get(s, False) for s in SPEAKER_IDS}
    cp = dict(cd, model_type="qwen3_tts_talker_code_predictor", vocab_size=CODEBOOK_SIZE,
              num_code_groups=NUM_CODE_GROUPS, hidden_act="silu", rms_norm_eps=1e-6,
              rope_theta=1000000, rope_scaling=None, max_position_embeddings=65536,
              attention_bias=False, attention_dropout=0, use_sliding_window=False,
              sliding_window=None, max_window_layers=28, initializer_range=0.02,
              use_cache=True, tie_word_embeddings=False,
              layer_types=["full_attention"] * cd["num_hidden_layers"])
    td = dict(td)
    section = td.pop("mrope_section")
    return dict(td, **CODEC_IDS, model_type="qwen3_tts_talker", code_predictor_config=cp,
                vocab_size=CODEC_VOCAB_SIZE, text_vocab_size=TEXT_VOCAB_SIZE,
                num_code_groups=NUM_CODE_GROUPS, hidden_act="silu", rms_norm_eps=1e-6,
                rope_theta=1000000, max_position_embeddings=32768,
                rope_scaling={"interleaved": True, "mrope_section": section,
                              "rope_type": "default"},
                attention_bias=False, attention_dropout=0, use_sliding_window=False,
                sliding_window=None, position_id_per_seconds=13, initializer_range=0.02,
                use_cache=True, tie_word_embeddings=False, codec_language_id=dict(LANGUAGE_IDS),
                spk_id=dict(SPEAKER_IDS) if custom else {},
                spk_is_dialect=dialects if custom else {})


def main_config(preset, size, variant, td, cd, sd):
    """config.json. The full preset writes only enc_dim/sample_rate for the speaker
    encoder, as the released files do; tiny must also write the sizes it changes."""
    speaker = sd
    if preset == "full":
        speaker = {"enc_dim": sd["enc_dim"], "sample_rate": sd["sample_rate"]}
    return dict(TOKEN_IDS, architectures=["Qwen3TTSForConditionalGeneration"],
                model_type="qwen3_tts", tokenizer_type="qwen3_tts_tokenizer_12hz",
                tts_model_size=size, tts_model_type=variant, dtype="bfloat16",
                transformers_version=TRANSFORMERS_VERSION,
                talker_config=talker_config(td, cd, variant), speaker_encoder_config=speaker)


def codec_config(dd, ed):
    samples_per_frame = math.prod(dd["upsample_rates"] + dd["upsampling_ratios"])
    return {
        "architectures": ["Qwen3TTSTokenizerV2Model"],
        "model_type": "qwen3_tts_tokenizer_12hz",
        "encoder_valid_num_quantizers": NUM_CODE_GROUPS,
        "input_sample_rate": 24000,
        "output_sample_rate": 24000,
        "decode_upsample_rate": samples_per_frame,
        "encode_downsample_rate": samples_per_frame,
        "decoder_config": dd,
        "encoder_config": ed,
        "dtype": "float32",
        "transformers_version": TRANSFORMERS_VERSION,
    }


PREPROCESSOR_CONFIG = {"processor_class": "Qwen3TTSProcessor"}

CODEC_PREPROCESSOR_CONFIG = {
    "chunk_length_s": None,
    "feature_extractor_type": "EncodecFeatureExtractor",
    "feature_size": 1,
    "overlap": None,
    "padding_side": "right",
    "padding_value": 0.0,
    "return_attention_mask": True,
    "sampling_rate": 24000,
}


# ---------------------------------------------------------------- tensor plans

def normal(std, mean=0.0):
    return ("normal", float(std), float(mean))


def uniform(lo, hi):
    return ("uniform", float(lo), float(hi))


def add(plan, name, shape, init):
    plan.append((name, tuple(int(d) for d in shape), init))


def add_linear(plan, name, n_out, n_in, bias=False, gain=1.0):
    """Linear [out, in] ~ N(0, gain^2/in); bias small."""
    add(plan, name + ".weight", (n_out, n_in), normal(gain / math.sqrt(n_in)))
    if bias:
        add(plan, name + ".bias", (n_out,), normal(0.02))


def add_conv(plan, name, n_out, n_in, kernel, bias=True, gain=1.0):
    """Conv1d [out, in, k] ~ N(0, gain^2/(in*k))."""
    add(plan, name + ".weight", (n_out, n_in, kernel), normal(gain / math.sqrt(n_in * kernel)))
    if bias:
        add(plan, name + ".bias", (n_out,), normal(0.02))


def add_trans_conv(plan, name, n_in, n_out, kernel, stride, gain=1.0):
    """ConvTranspose1d [in, out, k]; each output sample sums in*k/stride taps."""
    fan_in = n_in * kernel // stride
    add(plan, name + ".weight", (n_in, n_out, kernel), normal(gain / math.sqrt(fan_in)))
    add(plan, name + ".bias", (n_out,), normal(0.02))


def add_norm(plan, name, dim, bias=False):
    add(plan, name + ".weight", (dim,), normal(0.1, 1.0))
    if bias:
        add(plan, name + ".bias", (dim,), normal(0.02))


def plan_qwen3_layers(plan, prefix, d):
    """Qwen3 decoder layers (talker and code predictor): QK-norm, GQA, SwiGLU, no biases."""
    hidden, hd = d["hidden_size"], d["head_dim"]
    q_width, kv_width = d["num_attention_heads"] * hd, d["num_key_value_heads"] * hd
    for l in range(d["num_hidden_layers"]):
        p = f"{prefix}.layers.{l}."
        add_norm(plan, p + "input_layernorm", hidden)
        add_linear(plan, p + "self_attn.q_proj", q_width, hidden)
        add_linear(plan, p + "self_attn.k_proj", kv_width, hidden)
        add_linear(plan, p + "self_attn.v_proj", kv_width, hidden)
        add_linear(plan, p + "self_attn.o_proj", hidden, q_width)
        add_norm(plan, p + "self_attn.q_norm", hd)
        add_norm(plan, p + "self_attn.k_norm", hd)
        add_norm(plan, p + "post_attention_layernorm", hidden)
        add_linear(plan, p + "mlp.gate_proj", d["intermediate_size"], hidden)
        add_linear(plan, p + "mlp.up_proj", d["intermediate_size"], hidden)
        add_linear(plan, p + "mlp.down_proj", hidden, d["intermediate_size"])


def plan_talker(td, cd):
    plan, hidden, th = [], td["hidden_size"], td["text_hidden_size"]
    add(plan, "talker.model.text_embedding.weight", (TEXT_VOCAB_SIZE, th), normal(1.0))
    add_linear(plan, "talker.text_projection.linear_fc1", th, th, bias=True)
    add_linear(plan, "talker.text_projection.linear_fc2", hidden, th, bias=True)
    add(plan, "talker.model.codec_embedding.weight", (CODEC_VOCAB_SIZE, hidden), normal(1.0))
    plan_qwen3_layers(plan, "talker.model", td)
    add_norm(plan, "talker.model.norm", hidden)
    add_linear(plan, "talker.codec_head", CODEC_VOCAB_SIZE, hidden)
    plan += plan_code_predictor(cd, hidden)
    return plan


def plan_code_predictor(cd, talker_hidden):
    """Code predictor; small_to_mtp_projection only when its width differs from the talker's."""
    plan, hidden, p = [], cd["hidden_size"], "talker.code_predictor"
    for i in range(NUM_CODE_GROUPS - 1):
        add(plan, f"{p}.model.codec_embedding.{i}.weight", (CODEBOOK_SIZE, talker_hidden),
            normal(1.0))
    if hidden != talker_hidden:
        add_linear(plan, f"{p}.small_to_mtp_projection", hidden, talker_hidden, bias=True)
    plan_qwen3_layers(plan, f"{p}.model", cd)
    add_norm(plan, f"{p}.model.norm", hidden)
    for j in range(NUM_CODE_GROUPS - 1):
        add_linear(plan, f"{p}.lm_head.{j}", CODEBOOK_SIZE, hidden)
    return plan


def plan_speaker_encoder(sd):
    """ECAPA-TDNN: TDNN, SE-Res2Net blocks, feature aggregation, attentive pooling, fc."""
    plan, p = [], "speaker_encoder"
    ch, ks = sd["enc_channels"], sd["enc_kernel_sizes"]
    scale, se = sd["enc_res2net_scale"], sd["enc_se_channels"]
    add_conv(plan, f"{p}.blocks.0.conv", ch[0], sd["mel_dim"], ks[0])
    for b in range(1, len(ch) - 1):
        q = f"{p}.blocks.{b}."
        add_conv(plan, q + "tdnn1.conv", ch[b], ch[b - 1], 1)
        for i in range(scale - 1):
            width = ch[b] // scale
            add_conv(plan, f"{q}res2net_block.blocks.{i}.conv", width, width, ks[b])
        add_conv(plan, q + "tdnn2.conv", ch[b], ch[b], 1)
        add_conv(plan, q + "se_block.conv1", se, ch[b], 1)
        add_conv(plan, q + "se_block.conv2", ch[b], se, 1)
    add_conv(plan, f"{p}.mfa.conv", ch[-1], ch[-1], ks[-1])
    add_conv(plan, f"{p}.asp.tdnn.conv", sd["enc_attention_channels"], ch[-1] * 3, 1)
    add_conv(plan, f"{p}.asp.conv", ch[-1], sd["enc_attention_channels"], 1)
    add_conv(plan, f"{p}.fc", sd["enc_dim"], ch[-1] * 2, 1)
    return plan


def plan_codec_quantizer(plan, dd):
    """Split RVQ of the decoder: 1 + (Q-1) codebooks in codebook_dim/2 dims, 1x1 projections."""
    p, half = "decoder.quantizer.", dd["codebook_dim"] // 2
    books = [f"{p}rvq_first.vq.layers.0"]
    books += [f"{p}rvq_rest.vq.layers.{q}" for q in range(dd["num_quantizers"] - 1)]
    for book in books:
        add(plan, book + "._codebook.embedding_sum", (dd["codebook_size"], half), normal(1.0))
        add(plan, book + "._codebook.cluster_usage", (dd["codebook_size"],), uniform(0.5, 2.0))
    for part in ("rvq_first", "rvq_rest"):
        add_conv(plan, f"{p}{part}.output_proj", dd["codebook_dim"], half, 1, bias=False)
        add_conv(plan, f"{p}{part}.input_proj", half, dd["codebook_dim"], 1, bias=False)


# Layer scales of the codec pre-transformer. Large enough that attention carries
# information across frames: in tiny (2 layers, window 16, so 30 frames of
# attention reach) decoding > 300 frames in one pass then differs from the
# official 300/25 chunking by ~1e-3, far above float noise, and dropping the
# window changes a 40-frame decode by ~0.1. With scales ~0.01 both effects
# shrink to ~1e-5; with window 8 the reach (14 frames) is inside the 25-frame
# context and chunking is invisible.
CODEC_LAYER_SCALE = uniform(0.1, 0.5)


def plan_codec_pre_transformer(plan, dd):
    p, hidden, hd = "decoder.pre_transformer.", dd["hidden_size"], dd["head_dim"]
    q_width, kv_width = dd["num_attention_heads"] * hd, dd["num_key_value_heads"] * hd
    add_linear(plan, p + "input_proj", hidden, dd["latent_dim"], bias=True)
    for l in range(dd["num_hidden_layers"]):
        q = f"{p}layers.{l}."
        add_norm(plan, q + "input_layernorm", hidden)
        add_linear(plan, q + "self_attn.q_proj", q_width, hidden)
        add_linear(plan, q + "self_attn.k_proj", kv_width, hidden)
        add_linear(plan, q + "self_attn.v_proj", kv_width, hidden)
        add_linear(plan, q + "self_attn.o_proj", hidden, q_width)
        add(plan, q + "self_attn_layer_scale.scale", (hidden,), CODEC_LAYER_SCALE)
        add_norm(plan, q + "post_attention_layernorm", hidden)
        add_linear(plan, q + "mlp.gate_proj", dd["intermediate_size"], hidden)
        add_linear(plan, q + "mlp.up_proj", dd["intermediate_size"], hidden)
        add_linear(plan, q + "mlp.down_proj", hidden, dd["intermediate_size"])
        add(plan, q + "mlp_layer_scale.scale", (hidden,), CODEC_LAYER_SCALE)
    add_norm(plan, p + "norm", hidden)
    add_linear(plan, p + "output_proj", dd["latent_dim"], hidden, bias=True)


def plan_codec_upsample(plan, dd):
    """Per upsampling ratio: ConvTranspose k=s=ratio, then a ConvNeXt block."""
    dim = dd["latent_dim"]
    for u, ratio in enumerate(dd["upsampling_ratios"]):
        p = f"decoder.upsample.{u}."
        add_trans_conv(plan, p + "0.conv", dim, dim, ratio, ratio)
        add_conv(plan, p + "1.dwconv.conv", dim, 1, 7)
        add_norm(plan, p + "1.norm", dim, bias=True)
        add_linear(plan, p + "1.pwconv1", 4 * dim, dim, bias=True)
        add_linear(plan, p + "1.pwconv2", dim, 4 * dim, bias=True)
        add(plan, p + "1.gamma", (dim,), normal(0.02, 0.1))


def add_snake(plan, name, dim):
    add(plan, name + ".alpha", (dim,), normal(0.1))
    add(plan, name + ".beta", (dim,), normal(0.1))


# Gains of the waveform decoder's random weights, measured with --check: with
# them every DecoderBlock output keeps RMS ~1 and the waveform RMS is ~0.3 with
# under 1 % of samples at the clamp (tiny and full); unit gains saturate it.
BLOCK_TRANS_CONV_GAIN = 0.7
RESIDUAL_CONV2_GAIN = 0.3
FINAL_CONV_GAIN = 0.3


def plan_codec_waveform(plan, dd):
    """decoder.decoder.0..6: conv, DecoderBlocks (SnakeBeta, ConvTranspose, 3 residual
    units), SnakeBeta, conv to one channel."""
    p, dim = "decoder.decoder.", dd["decoder_dim"]
    add_conv(plan, p + "0.conv", dim, dd["latent_dim"], 7)
    for n, rate in enumerate(dd["upsample_rates"], start=1):
        q, out = f"{p}{n}.block.", dim // 2
        add_snake(plan, q + "0", dim)
        add_trans_conv(plan, q + "1.conv", dim, out, 2 * rate, rate, gain=BLOCK_TRANS_CONV_GAIN)
        for k in (2, 3, 4):
            add_snake(plan, f"{q}{k}.act1", out)
            add_conv(plan, f"{q}{k}.conv1.conv", out, out, 7)
            add_snake(plan, f"{q}{k}.act2", out)
            add_conv(plan, f"{q}{k}.conv2.conv", out, out, 1, gain=RESIDUAL_CONV2_GAIN)
        dim = out
    n_last = len(dd["upsample_rates"]) + 1
    add_snake(plan, f"{p}{n_last}", dim)
    add_conv(plan, f"{p}{n_last + 1}.conv", 1, dim, 7, gain=FINAL_CONV_GAIN)


def plan_codec_decoder(dd):
    plan = []
    plan_codec_quantizer(plan, dd)
    add_conv(plan, "decoder.pre_conv.conv", dd["latent_dim"], dd["codebook_dim"], 3)
    plan_codec_pre_transformer(plan, dd)
    plan_codec_upsample(plan, dd)
    plan_codec_waveform(plan, dd)
    return plan


def plan_mimi_conv_stack(plan, ed):
    """encoder.encoder.layers.0..14: conv, then per stride a ResBlock, ELU, strided conv."""
    p, ch = "encoder.encoder.layers.", ed["num_filters"]
    add_conv(plan, p + "0.conv", ch, ed["audio_channels"], ed["kernel_size"])
    idx = 1
    for ratio in reversed(ed["upsampling_ratios"]):
        inner = ch // ed["compress"]
        add_conv(plan, f"{p}{idx}.block.1.conv", inner, ch, ed["residual_kernel_size"])
        add_conv(plan, f"{p}{idx}.block.3.conv", ch, inner, 1)
        add_conv(plan, f"{p}{idx + 2}.conv", 2 * ch, ch, 2 * ratio)
        idx, ch = idx + 3, 2 * ch
    add_conv(plan, f"{p}{idx + 1}.conv", ed["hidden_size"], ch, ed["last_kernel_size"])


def plan_mimi_transformer(plan, ed):
    hidden, hd = ed["hidden_size"], ed["head_dim"]
    for l in range(ed["num_hidden_layers"]):
        p = f"encoder.encoder_transformer.layers.{l}."
        add_norm(plan, p + "input_layernorm", hidden, bias=True)
        add_linear(plan, p + "self_attn.q_proj", ed["num_attention_heads"] * hd, hidden)
        add_linear(plan, p + "self_attn.k_proj", ed["num_key_value_heads"] * hd, hidden)
        add_linear(plan, p + "self_attn.v_proj", ed["num_key_value_heads"] * hd, hidden)
        add_linear(plan, p + "self_attn.o_proj", hidden, ed["num_attention_heads"] * hd)
        add(plan, p + "self_attn_layer_scale.scale", (hidden,), uniform(0.01, 0.1))
        add_norm(plan, p + "post_attention_layernorm", hidden, bias=True)
        add_linear(plan, p + "mlp.fc1", ed["intermediate_size"], hidden)
        add_linear(plan, p + "mlp.fc2", hidden, ed["intermediate_size"])
        add(plan, p + "mlp_layer_scale.scale", (hidden,), uniform(0.01, 0.1))


def plan_mimi_quantizer(plan, ed):
    """Semantic (1) and acoustic (num_quantizers-1) RVQs, each with 1x1 projections."""
    p, hidden = "encoder.quantizer.", ed["hidden_size"]
    vq, n_codes = ed["vector_quantization_hidden_dimension"], ed["codebook_size"]
    n_sem = ed["num_semantic_quantizers"]
    for part, n in (("semantic", n_sem), ("acoustic", ed["num_quantizers"] - n_sem)):
        q = f"{p}{part}_residual_vector_quantizer."
        if vq != hidden:
            add_conv(plan, q + "input_proj", vq, hidden, 1, bias=False)
            add_conv(plan, q + "output_proj", hidden, vq, 1, bias=False)
        for i in range(n):
            book = f"{q}layers.{i}.codebook."
            add(plan, book + "embed_sum", (n_codes, ed["codebook_dim"]), normal(1.0))
            add(plan, book + "cluster_usage", (n_codes,), uniform(0.5, 2.0))
            add(plan, book + "initialized", (1,), ("const", 1.0))


def plan_codec_encoder(ed):
    plan = []
    plan_mimi_conv_stack(plan, ed)
    plan_mimi_transformer(plan, ed)
    add_conv(plan, "encoder.downsample.conv", ed["hidden_size"], ed["hidden_size"], 4, bias=False)
    plan_mimi_quantizer(plan, ed)
    return plan


# ---------------------------------------------------------------- writing

def make_tensor(name, shape, init, seed):
    """fp32 tensor drawn from a generator seeded by (seed, name)."""
    # torch's CPU generator keeps only 32 bits of its seed, so seed and name are hashed together.
    g = torch.Generator().manual_seed(zlib.crc32(f"{seed}/{name}".encode()))
    kind = init[0]
    if kind == "normal":
        return torch.randn(shape, generator=g).mul_(init[1]).add_(init[2])
    if kind == "uniform":
        return torch.rand(shape, generator=g).mul_(init[2] - init[1]).add_(init[1])
    if kind == "const":
        return torch.full(shape, init[1])
    raise ValueError(f"{name}: unknown init {init}")


def write_weights(path, plan, tag, seed):
    """Stream the plan into one safetensors file; returns (n_tensors, n_params)."""
    torch_dtype = st.DTYPES[tag][0]
    entries = {name: (shape, init) for name, shape, init in plan}
    if len(entries) != len(plan):
        raise ValueError("duplicate tensor names in plan")
    # No __metadata__: with none, the header (and so the file) has exactly the byte
    # size of the released files for the full preset.
    writer = st.TensorWriter(path, [(n, tag, s) for n, s, _ in plan])
    for name in writer.order():
        shape, init = entries[name]
        writer.write(name, make_tensor(name, shape, init, seed).to(torch_dtype))
    writer.close()
    return len(plan), sum(math.prod(s) for _, s, _ in plan)


def write_json(path, obj, sort_keys=True, newline=True):
    """JSON as transformers' save_pretrained writes it: indent 2, sorted keys, final newline."""
    with open(path, "w") as f:
        f.write(json.dumps(obj, indent=2, sort_keys=sort_keys) + ("\n" if newline else ""))


def write_checkpoint(args):
    td = talker_dims(args.preset, args.size)
    cd = code_predictor_dims(args.preset)
    sd = speaker_dims(args.preset, td["hidden_size"])
    dd, ed = codec_decoder_dims(args.preset), codec_encoder_dims(args.preset)
    codec_out = os.path.join(args.out, "speech_tokenizer")
    os.makedirs(codec_out, exist_ok=True)

    write_json(os.path.join(args.out, "config.json"),
               main_config(args.preset, args.size, args.variant, td, cd, sd))
    # Spec order, no final newline: 245 bytes, the size of the released file.
    write_json(os.path.join(args.out, "generation_config.json"), GENERATION_CONFIG,
               sort_keys=False, newline=False)
    write_json(os.path.join(args.out, "preprocessor_config.json"), PREPROCESSOR_CONFIG)
    write_json(os.path.join(codec_out, "config.json"), codec_config(dd, ed))
    write_json(os.path.join(codec_out, "preprocessor_config.json"), CODEC_PREPROCESSOR_CONFIG)

    main_plan = plan_talker(td, cd) + (plan_speaker_encoder(sd) if args.variant == "base" else [])
    files = [(os.path.join(args.out, "model.safetensors"), main_plan, "BF16"),
             (os.path.join(codec_out, "model.safetensors"),
              plan_codec_decoder(dd) + plan_codec_encoder(ed), "F32")]
    for path, plan, tag in files:
        t0 = time.time()
        n_tensors, n_params = write_weights(path, plan, tag, args.seed)
        print(f"{path}: {n_tensors} tensors, {n_params:,} params, {tag}, "
              f"{os.path.getsize(path):,} bytes, {time.time() - t0:.1f} s")


def check_codec(out, n_frames, seed):
    """Decode random codes with the reference and print every stage's RMS."""
    from reference import codec_decoder
    dec = codec_decoder.load_decoder(out)
    codes = codec_decoder.random_codes(n_frames, seed, dec.cfg["num_quantizers"],
                                       dec.cfg["codebook_size"])
    stages = dec.stages(codes)
    print(f"codec check, {n_frames} random frames:\n{codec_decoder.describe(stages)}")


def parse_args(argv):
    ap = argparse.ArgumentParser(description="write a random-weight Qwen3-TTS checkpoint")
    ap.add_argument("--preset", choices=["tiny", "full"], required=True)
    ap.add_argument("--out", required=True, help="output directory (created; files overwritten)")
    ap.add_argument("--seed", type=int, default=0, help="weights are a pure function of the seed")
    ap.add_argument("--variant", choices=["custom_voice", "voice_design", "base"],
                    default="custom_voice")
    ap.add_argument("--size", choices=["0b6", "1b7"], default="0b6")
    ap.add_argument("--check", action="store_true", help="decode random codes and print stage RMS")
    ap.add_argument("--check-frames", type=int, default=0,
                    help="frames for --check (default 40 tiny, 20 full)")
    args = ap.parse_args(argv)
    if not 0 <= args.seed < 2 ** 31:
        ap.error("--seed must be in [0, 2^31)")
    return args


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(os.cpu_count() or 1)
    if args.variant == "voice_design" and args.size == "0b6":
        print("note: no 0.6B VoiceDesign model was released; writing one anyway", file=sys.stderr)
    t0 = time.time()
    write_checkpoint(args)
    print(f"done in {time.time() - t0:.1f} s")
    if args.check:
        check_codec(args.out, args.check_frames or (40 if args.preset == "tiny" else 20), args.seed)


if __name__ == "__main__":
    main()
