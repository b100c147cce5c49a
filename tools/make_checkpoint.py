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
    config.json, generation_config.json, preprocessor_config.json, model.safetensors,
    vocab.json, merges.txt, tokenizer_config.json (a small stand-in text tokenizer)
    speech_tokenizer/config.json, speech_tokenizer/preprocessor_config.json,
    speech_tokenizer/model.safetensors

Two id layouts (--ids):
    released   every id, size and special token where the released checkpoints have
               them (text vocabulary 151936, 16 codebooks of 2048, codec vocabulary
               3072, 24 kHz, 1920 samples per frame). The stand-in tokenizer has
               the 256 byte tokens at Qwen2's ids (so "\n" is 198), "assistant"
               (77091), "user" (872) and the special tokens at their released ids,
               and nothing else: real text needs the real files, copied in.
    remapped   (tiny only) nothing where the released ones have it, so an engine
               that assumes a released value fails: its own small BPE vocabulary
               (bytes, role words and the words of REMAP_SENTENCES, special tokens
               at low ids), text_vocab_size a few rows above its largest id,
               every codec control, language and speaker id moved, 8 codebooks of
               1000 codes, codec vocabulary 1900 (so codebook-0 codes, below
               1900 - 1024 = 876, and the code predictor's 1000 differ), 16 kHz
               output with 1280 samples per frame.

Random weights keep activations finite and non-trivial: linear and conv
weights ~ N(0, 1/fan_in), norm weights 1 +- 0.1, layer scales 0.01..0.1 (0.1..0.5
in the codec pre-transformer, see CODEC_LAYER_SCALE),
ConvNeXt gamma ~0.1, SnakeBeta log-parameters ~ N(0, 0.1), codebooks ~ N(0, 1)
with cluster_usage uniform in [0.5, 2]. `--check` decodes random codes with
tools/reference/codec_decoder.py and prints every stage's RMS.

Usage:
    make_checkpoint.py --preset tiny|full --out DIR [--seed N] [--ids released|remapped]
                       [--variant custom_voice|voice_design|base] [--size 0b6|1b7] [--check]
"""

import argparse
import json
import math
import os
import random
import sys
import time
import zlib

import torch

from reference import safetensors_io as st
from reference import tokenizer as reftok

TRANSFORMERS_VERSION = "4.57.3"  # the version qwen-tts 0.1.1 pins

# Added tokens of the text tokenizer (the ones the TTS model names), with their released ids.
SPECIAL_TOKENS = {
    "<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645,
    "<|audio_start|>": 151669, "<|audio_end|>": 151670, "<tts_pad>": 151671,
    "<tts_text_bos>": 151672, "<tts_text_eod>": 151673, "<tts_text_bos_single>": 151674,
    "<|audio_pad|>": 151675,
}
TOKEN_ID_KEYS = {  # config.json key -> token
    "im_start_token_id": "<|im_start|>", "im_end_token_id": "<|im_end|>",
    "tts_pad_token_id": "<tts_pad>", "tts_bos_token_id": "<tts_text_bos>",
    "tts_eos_token_id": "<tts_text_eod>", "assistant_token_id": "assistant",
}
ROLE_WORDS = {"assistant": 77091, "user": 872}   # released ids of the role words

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

# The remapped layout: every id moved, every size changed (see the module docstring).
REMAP_SENTENCES = [  # texts the remapped tokenizer spells with whole words
    "Hello world, this is a test.",
    "How are you today? Fine.",
    "Speak slowly and calmly.",
]
REMAP_CODEC_IDS = {
    "codec_pad_id": 1613, "codec_bos_id": 1777, "codec_eos_token_id": 1042,
    "codec_think_id": 1210, "codec_nothink_id": 1211, "codec_think_bos_id": 1405,
    "codec_think_eos_id": 1406,
}
REMAP_LANGUAGE_IDS = {
    "english": 1100, "chinese": 1101, "german": 1102, "japanese": 1103,
    "beijing_dialect": 1150, "sichuan_dialect": 1151,
}
REMAP_SPEAKER_IDS = {"serena": 1880, "vivian": 1300, "ryan": 1002, "eric": 1820, "dylan": 1555}


def released_layout():
    """Ids and sizes of the released checkpoints."""
    return dict(name="released", text_vocab_size=151936, codec_vocab_size=3072,
                codebook_size=2048, num_code_groups=16, sample_rate=24000,
                upsample_rates=[8, 5, 4, 3], upsampling_ratios=[2, 2],
                encoder_ratios=[8, 6, 5, 4], codec_ids=dict(CODEC_IDS),
                language_ids=dict(LANGUAGE_IDS), speaker_ids=dict(SPEAKER_IDS),
                tokenizer=standin_tokenizer())


def remapped_layout():
    """Nothing where the released checkpoints have it; the tokenizer is the model's own."""
    tok = remapped_tokenizer()
    n_ids = max(list(tok["vocab"].values()) + list(tok["added"].values())) + 1
    return dict(name="remapped", text_vocab_size=n_ids + 37, codec_vocab_size=1900,
                codebook_size=1000, num_code_groups=8, sample_rate=16000,
                upsample_rates=[8, 5, 4, 2], upsampling_ratios=[2, 2],
                encoder_ratios=[8, 5, 4, 4], codec_ids=dict(REMAP_CODEC_IDS),
                language_ids=dict(REMAP_LANGUAGE_IDS), speaker_ids=dict(REMAP_SPEAKER_IDS),
                tokenizer=tok)


def token_ids(layout):
    """config.json's text token ids, from the layout's tokenizer."""
    tok = layout["tokenizer"]
    return {key: tok["added"].get(token, tok["vocab"].get(token))
            for key, token in TOKEN_ID_KEYS.items()}


# ---------------------------------------------------------------- text tokenizers

def spelling(text):
    """A text's spelling in the byte-level alphabet ("Hello world" -> "HelloĠworld")."""
    return "".join(reftok.BYTE_TO_CHAR[b] for b in text.encode("utf-8"))


def chain_merges(word, vocab, merges, next_id):
    """Merges that build `word` (a spelling) left to right: w[0] w[1], w[:2] w[2], ...;
    adds the missing intermediate tokens to vocab from next_id on; returns next_id."""
    for k in range(2, len(word) + 1):
        pair = (word[:k - 1], word[k - 1])
        if pair not in merges:
            merges.append(pair)
        if word[:k] not in vocab:
            vocab[word[:k]] = next_id
            next_id += 1
    return next_id


def standin_tokenizer():
    """Bytes at Qwen2's ids, the role words and the special tokens at their released ids;
    intermediate merge tokens at 150000.. (unused there)."""
    vocab = {c: i for i, (_, c) in enumerate(reftok.byte_alphabet())}
    merges, next_id = [], 150000
    for word, wid in ROLE_WORDS.items():
        next_id = chain_merges(word, vocab, merges, next_id)
        vocab[word] = wid
    return dict(vocab=vocab, merges=merges, added=dict(SPECIAL_TOKENS), words=list(ROLE_WORDS))


def remapped_tokenizer():
    """Special tokens at 0..9 (shuffled), the 256 bytes at 10..265 in a shuffled order, then
    the role words and the words of REMAP_SENTENCES with their merge chains."""
    rng = random.Random(20260317)
    specials = list(SPECIAL_TOKENS)
    rng.shuffle(specials)
    added = {t: i for i, t in enumerate(specials)}
    chars = [c for _, c in reftok.byte_alphabet()]
    rng.shuffle(chars)
    vocab = {c: 10 + i for i, c in enumerate(chars)}
    words = list(ROLE_WORDS)
    for sentence in REMAP_SENTENCES:
        for piece in reftok.QWEN2_ASCII_SPLIT.findall(sentence):
            if len(piece) > 1 and spelling(piece) not in words:
                words.append(spelling(piece))
    merges, next_id = [], 10 + len(chars)
    for word in words:
        next_id = chain_merges(word, vocab, merges, next_id)
    return dict(vocab=vocab, merges=merges, added=added, words=words)


def write_tokenizer(out, tok):
    """vocab.json, merges.txt and tokenizer_config.json as the Qwen2 tokenizer saves them."""
    write_json(os.path.join(out, "vocab.json"), dict(sorted(tok["vocab"].items(),
                                                            key=lambda kv: kv[1])),
               sort_keys=False, newline=False)
    with open(os.path.join(out, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in tok["merges"]))
    decoder = {str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                        "single_word": False, "special": True}
               for t, i in sorted(tok["added"].items(), key=lambda kv: kv[1])}
    write_json(os.path.join(out, "tokenizer_config.json"), {
        "add_bos_token": False, "add_prefix_space": False, "added_tokens_decoder": decoder,
        "bos_token": None, "clean_up_tokenization_spaces": False, "eos_token": "<|im_end|>",
        "errors": "replace", "model_max_length": 131072, "pad_token": "<|endoftext|>",
        "split_special_tokens": False, "tokenizer_class": "Qwen2Tokenizer", "unk_token": None})
    # The role string must come out as three tokens and every word whole.
    check = reftok.load(out)
    role = [check.token_id(t) for t in ("<|im_start|>", "assistant", spelling("\n"))]
    assert check.encode("<|im_start|>assistant\n") == role, "the role is not 3 tokens"
    for word in tok["words"]:
        text = bytes(b for ch in word for b, c in reftok.byte_alphabet() if c == ch).decode()
        assert check.encode(text) == [tok["vocab"][word]], f"{word!r} does not tokenize whole"


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


def codec_decoder_dims(preset, layout):
    """decoder_config; structural constants (codes, rates) from the id layout."""
    fixed = dict(codebook_size=layout["codebook_size"], num_quantizers=layout["num_code_groups"],
                 num_semantic_quantizers=1, upsample_rates=list(layout["upsample_rates"]),
                 upsampling_ratios=list(layout["upsampling_ratios"]), rms_norm_eps=1e-5,
                 rope_theta=10000,
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


def codec_encoder_dims(preset, layout):
    """encoder_config (a Mimi config); strides and 32 quantizers kept in tiny."""
    fixed = dict(model_type="mimi", audio_channels=1, sampling_rate=layout["sample_rate"],
                 upsampling_ratios=list(layout["encoder_ratios"]), kernel_size=7,
                 residual_kernel_size=3,
                 last_kernel_size=3, num_residual_layers=1, dilation_growth_rate=2,
                 compress=2, use_causal_conv=True, pad_mode="constant", trim_right_ratio=1.0,
                 hidden_act="gelu", norm_eps=1e-5, layer_scale_initial_scale=0.01,
                 rope_theta=10000, max_position_embeddings=8000, sliding_window=250,
                 num_quantizers=32, num_semantic_quantizers=1,
                 codebook_size=layout["codebook_size"],
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

def talker_config(td, cd, variant, layout):
    """talker_config with its nested code_predictor_config; speakers only for custom_voice."""
    custom = variant == "custom_voice"
    dialects = {s: SPEAKER_DIALECTS.get(s, False) for s in layout["speaker_ids"]}
    cp = dict(cd, model_type="qwen3_tts_talker_code_predictor",
              vocab_size=layout["codebook_size"], num_code_groups=layout["num_code_groups"],
              hidden_act="silu", rms_norm_eps=1e-6,
              rope_theta=1000000, rope_scaling=None, max_position_embeddings=65536,
              attention_bias=False, attention_dropout=0, use_sliding_window=False,
              sliding_window=None, max_window_layers=28, initializer_range=0.02,
              use_cache=True, tie_word_embeddings=False,
              layer_types=["full_attention"] * cd["num_hidden_layers"])
    td = dict(td)
    section = td.pop("mrope_section")
    return dict(td, **layout["codec_ids"], model_type="qwen3_tts_talker",
                code_predictor_config=cp, vocab_size=layout["codec_vocab_size"],
                text_vocab_size=layout["text_vocab_size"],
                num_code_groups=layout["num_code_groups"], hidden_act="silu", rms_norm_eps=1e-6,
                rope_theta=1000000, max_position_embeddings=32768,
                rope_scaling={"interleaved": True, "mrope_section": section,
                              "rope_type": "default"},
                attention_bias=False, attention_dropout=0, use_sliding_window=False,
                sliding_window=None, position_id_per_seconds=13, initializer_range=0.02,
                use_cache=True, tie_word_embeddings=False,
                codec_language_id=dict(layout["language_ids"]),
                spk_id=dict(layout["speaker_ids"]) if custom else {},
                spk_is_dialect=dialects if custom else {})


def main_config(preset, size, variant, td, cd, sd, layout):
    """config.json. The full preset writes only enc_dim/sample_rate for the speaker
    encoder, as the released files do; tiny must also write the sizes it changes."""
    speaker = sd
    if preset == "full":
        speaker = {"enc_dim": sd["enc_dim"], "sample_rate": sd["sample_rate"]}
    return dict(token_ids(layout), architectures=["Qwen3TTSForConditionalGeneration"],
                model_type="qwen3_tts", tokenizer_type="qwen3_tts_tokenizer_12hz",
                tts_model_size=size, tts_model_type=variant, dtype="bfloat16",
                transformers_version=TRANSFORMERS_VERSION,
                talker_config=talker_config(td, cd, variant, layout),
                speaker_encoder_config=speaker)


def codec_config(dd, ed, layout):
    samples_per_frame = math.prod(dd["upsample_rates"] + dd["upsampling_ratios"])
    return {
        "architectures": ["Qwen3TTSTokenizerV2Model"],
        "model_type": "qwen3_tts_tokenizer_12hz",
        "encoder_valid_num_quantizers": layout["num_code_groups"],
        "input_sample_rate": layout["sample_rate"],
        "output_sample_rate": layout["sample_rate"],
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


def plan_talker(td, cd, layout):
    plan, hidden, th = [], td["hidden_size"], td["text_hidden_size"]
    vocab = layout["codec_vocab_size"]
    add(plan, "talker.model.text_embedding.weight", (layout["text_vocab_size"], th), normal(1.0))
    add_linear(plan, "talker.text_projection.linear_fc1", th, th, bias=True)
    add_linear(plan, "talker.text_projection.linear_fc2", hidden, th, bias=True)
    add(plan, "talker.model.codec_embedding.weight", (vocab, hidden), normal(1.0))
    plan_qwen3_layers(plan, "talker.model", td)
    add_norm(plan, "talker.model.norm", hidden)
    add_linear(plan, "talker.codec_head", vocab, hidden)
    plan += plan_code_predictor(cd, hidden, layout)
    return plan


def plan_code_predictor(cd, talker_hidden, layout):
    """Code predictor; small_to_mtp_projection only when its width differs from the talker's."""
    plan, hidden, p = [], cd["hidden_size"], "talker.code_predictor"
    groups, codebook = layout["num_code_groups"], layout["codebook_size"]
    for i in range(groups - 1):
        add(plan, f"{p}.model.codec_embedding.{i}.weight", (codebook, talker_hidden),
            normal(1.0))
    if hidden != talker_hidden:
        add_linear(plan, f"{p}.small_to_mtp_projection", hidden, talker_hidden, bias=True)
    plan_qwen3_layers(plan, f"{p}.model", cd)
    add_norm(plan, f"{p}.model.norm", hidden)
    for j in range(groups - 1):
        add_linear(plan, f"{p}.lm_head.{j}", codebook, hidden)
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
    layout = remapped_layout() if args.ids == "remapped" else released_layout()
    td = talker_dims(args.preset, args.size)
    cd = code_predictor_dims(args.preset)
    sd = speaker_dims(args.preset, td["hidden_size"])
    dd, ed = codec_decoder_dims(args.preset, layout), codec_encoder_dims(args.preset, layout)
    codec_out = os.path.join(args.out, "speech_tokenizer")
    os.makedirs(codec_out, exist_ok=True)

    write_json(os.path.join(args.out, "config.json"),
               main_config(args.preset, args.size, args.variant, td, cd, sd, layout))
    write_tokenizer(args.out, layout["tokenizer"])
    # Spec order, no final newline: 245 bytes, the size of the released file.
    write_json(os.path.join(args.out, "generation_config.json"), GENERATION_CONFIG,
               sort_keys=False, newline=False)
    write_json(os.path.join(args.out, "preprocessor_config.json"), PREPROCESSOR_CONFIG)
    write_json(os.path.join(codec_out, "config.json"), codec_config(dd, ed, layout))
    write_json(os.path.join(codec_out, "preprocessor_config.json"),
               dict(CODEC_PREPROCESSOR_CONFIG, sampling_rate=layout["sample_rate"]))

    main_plan = (plan_talker(td, cd, layout) +
                 (plan_speaker_encoder(sd) if args.variant == "base" else []))
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
    ap.add_argument("--ids", choices=["released", "remapped"], default="released",
                    help="where ids and sizes lie: as released, or all moved (tiny only)")
    ap.add_argument("--check", action="store_true", help="decode random codes and print stage RMS")
    ap.add_argument("--check-frames", type=int, default=0,
                    help="frames for --check (default 40 tiny, 20 full)")
    args = ap.parse_args(argv)
    if not 0 <= args.seed < 2 ** 31:
        ap.error("--seed must be in [0, 2^31)")
    if args.ids == "remapped" and args.preset != "tiny":
        ap.error("--ids remapped is for --preset tiny")
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
