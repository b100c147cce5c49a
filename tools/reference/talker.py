#!/usr/bin/python3
"""PyTorch fp32 reference of the Qwen3-TTS language model: talker and code predictor.

Mirrors `Qwen3TTSTalkerForConditionalGeneration` (the talker) and
`Qwen3TTSTalkerCodePredictorModelForConditionalGeneration` (the code
predictor, "sub-talker") in the official
qwen_tts/core/models/modeling_qwen3_tts.py, with eager attention and every
weight upcast from BF16 to float32. prompt.py builds the prefill rows,
generate.py runs the frame loop; this file holds the networks and the CLI
that writes a golden for the C engine (src/model/talker.c, code_predictor.c).

Dataflow (D = talker hidden_size, Dc = code-predictor hidden_size, V = talker
vocab_size, Vc = code-predictor vocab_size, G = num_code_groups; 3072, 2048 and 16
in the released files, read from config.json like every other size and id):

    prompt rows [P, D]  (prompt.py: text track T(id) = fc2(silu(fc1(text_embedding[id])))
                         plus codec track C(id) = codec_embedding[id], summed per row)
    talker stack        num_hidden_layers x Qwen3 decoder layer, positions 0..P-1,
                        then P, P+1, ... one per generated frame; final RMSNorm
                        -> h [D]                                    "talker_hidden"
    codec_head          h -> logits [V]                             "talker_logits"
    logits processing   (generate.py) repetition penalty, EOS block, suppression -> c0
    code predictor      fresh KV cache per frame:
                        x0 = P(h), x1 = P(E_0[c0])   P = small_to_mtp_projection or identity
                        prefill [x0, x1] at positions 0,1 -> CP norm -> lm_head[0] -> c1
                        k = 1..14: P(E_k[c_k]) at position k+1 -> lm_head[k] -> c_{k+1}
                                                                    "cp_logits" [15, Vc]
    feedback            next talker row = sum_{i<G} E_i[c_i] + trailing text row
                        (E_0 = talker codec_embedding, E_i = CP codec_embedding[i-1], all D wide)

One decoder layer (talker and code predictor alike, no biases):

    x = x + o_proj(attn(RoPE(q_norm(q_proj(n))), RoPE(k_norm(k_proj(n))), v_proj(n)))
            where n = input_layernorm(x)
    x = x + down_proj(silu(gate_proj(n)) * up_proj(n))   where n = post_attention_layernorm(x)

Checkpoint tensors (model.safetensors, BF16): talker.model.text_embedding.weight,
talker.text_projection.linear_fc{1,2}.{weight,bias}, talker.model.codec_embedding.weight,
talker.model.layers.{l}.{input_layernorm,post_attention_layernorm}.weight,
talker.model.layers.{l}.self_attn.{q,k,v,o}_proj.weight, ...self_attn.{q,k}_norm.weight,
talker.model.layers.{l}.mlp.{gate,up,down}_proj.weight, talker.model.norm.weight,
talker.codec_head.weight, talker.code_predictor.model.{layers...,norm.weight},
talker.code_predictor.model.codec_embedding.{0..14}.weight,
talker.code_predictor.lm_head.{0..14}.weight,
talker.code_predictor.small_to_mtp_projection.{weight,bias} (only when Dc != D).

Traps, all taken from the official code:
  - RMSNorm: x * rsqrt(mean(x^2) + eps), then times the weight; eps from config.
  - Q/K norm is an RMSNorm over head_dim per head, applied before RoPE.
  - head_dim comes from the config (0.6B: 16 heads x 128 = 2048 != hidden 1024).
  - RoPE rotates split halves (j, j + head_dim/2), not interleaved pairs;
    inv_freq = 1 / (theta ** (2j / head_dim)) in fp32, angle = pos * inv_freq in fp32.
    The talker's M-RoPE ("interleaved", mrope_section) gets three identical
    position rows in TTS, so it is exactly this 1-D RoPE.
  - GQA: query head h reads KV head h // (heads / kv_heads).
  - Attention scores are (q . k) * head_dim^-0.5, softmax in fp32.
  - The code predictor's input projection applies to every CP input row,
    including the talker hidden state; the CP embeddings are D wide, not Dc.
  - The hidden state handed to the code predictor is the talker output AFTER
    the final norm.

Command line:
    talker.py --model DIR (--text TEXT | --text-ids "1,2,3") [--instruct TEXT |
              --instruct-ids "4,5"] [--speaker NAME]
              [--language auto|english|...] [--layout non_streaming|streaming]
              [--frames N | --max-new-tokens N] [--repetition-penalty 1.05]
              --out GOLDEN.safetensors
    talker.py --model DIR --self-test

Python API: load_model(dir) -> LanguageModel; build_prompt(model, ...) -> prompt.Prompt;
generate_greedy(model, prompt, ...) -> generate.GenerationResult (the last two forward to
prompt.py and generate.py). See README.md beside this file.
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

try:
    from . import safetensors_io as st
    from . import tokenizer as reftok
except ImportError:
    import safetensors_io as st
    import tokenizer as reftok


# ---------------------------------------------------------------- building blocks

def rms_norm(x, weight, eps):
    """RMSNorm over the last dim: weight * (x * rsqrt(mean(x^2) + eps)), fp32."""
    var = x.pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(var + eps))


def rope_inv_freq(head_dim, theta):
    """inv_freq[j] = 1 / theta^(2j / head_dim), j < head_dim/2: fp32 power, then fp32 reciprocal."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim
    return 1.0 / (theta ** exponents)


def rope_tables(positions, inv_freq):
    """cos, sin [T, head_dim] for integer positions [T]; halves repeated (rotate-half layout)."""
    angles = positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat((angles, angles), dim=-1)
    return emb.cos(), emb.sin()


def apply_rope(x, cos, sin):
    """x [heads, T, head_dim] rotated by pairs (j, j + head_dim/2)."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def linear(x, w, b=None):
    return F.linear(x, w, b)


class KVCache:
    """Keys and values per layer, [kv_heads, n_tokens, head_dim] each, after RoPE; with
    f16 each stored key and value rounded to binary16 (nearest even) and back, as the
    engine's KZ_KV_CACHE_F16 keeps them."""

    def __init__(self, n_layers, f16=False):
        self.k = [None] * n_layers
        self.v = [None] * n_layers
        self.n_tokens = 0
        self.f16 = f16

    def append(self, layer, k, v):
        if self.f16:
            k, v = k.half().float(), v.half().float()
        if self.k[layer] is None:
            self.k[layer], self.v[layer] = k, v
        else:
            self.k[layer] = torch.cat((self.k[layer], k), dim=1)
            self.v[layer] = torch.cat((self.v[layer], v), dim=1)
        return self.k[layer], self.v[layer]


# ---------------------------------------------------------------- Qwen3 decoder stack

class DecoderStack:
    """Qwen3 decoder layers plus final norm (the talker's or the code predictor's)."""

    def __init__(self, cfg, w, prefix):
        self.hidden_size = cfg["hidden_size"]
        self.n_heads = cfg["num_attention_heads"]
        self.n_kv_heads = cfg["num_key_value_heads"]
        self.head_dim = cfg.get("head_dim") or self.hidden_size // self.n_heads
        self.n_layers = cfg["num_hidden_layers"]
        self.eps = cfg["rms_norm_eps"]
        if cfg.get("hidden_act", "silu") != "silu":
            raise ValueError(f"hidden_act {cfg.get('hidden_act')} is not supported (only silu)")
        if cfg.get("attention_bias"):
            raise ValueError("attention_bias = true is not supported")
        if cfg.get("use_sliding_window"):
            raise ValueError("use_sliding_window = true is not supported")
        self.inv_freq = rope_inv_freq(self.head_dim, cfg["rope_theta"])
        self.kv_f16 = False   # new caches round to binary16 (--kv-cache f16, talker only)
        self.layers = []
        for l in range(self.n_layers):
            p = f"{prefix}layers.{l}."
            names = ("input_layernorm", "post_attention_layernorm", "self_attn.q_proj",
                     "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                     "self_attn.q_norm", "self_attn.k_norm", "mlp.gate_proj", "mlp.up_proj",
                     "mlp.down_proj")
            self.layers.append({n: w[p + n + ".weight"] for n in names})
        self.norm = w[prefix + "norm.weight"]

    def new_cache(self):
        return KVCache(self.n_layers, self.kv_f16)

    def attention(self, x, L, l, cos, sin, cache):
        """Self-attention of x [T, hidden] over the cache plus x; returns o_proj output."""
        n_tokens, hd = x.shape[0], self.head_dim
        q = linear(x, L["self_attn.q_proj"]).view(n_tokens, self.n_heads, hd)
        k = linear(x, L["self_attn.k_proj"]).view(n_tokens, self.n_kv_heads, hd)
        v = linear(x, L["self_attn.v_proj"]).view(n_tokens, self.n_kv_heads, hd)
        q = rms_norm(q, L["self_attn.q_norm"], self.eps).transpose(0, 1)   # Q norm per head
        k = rms_norm(k, L["self_attn.k_norm"], self.eps).transpose(0, 1)   # K norm per head
        v = v.transpose(0, 1)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        k, v = cache.append(l, k, v)
        rep = self.n_heads // self.n_kv_heads
        k = k.repeat_interleave(rep, dim=0)
        v = v.repeat_interleave(rep, dim=0)
        scores = torch.matmul(q, k.transpose(1, 2)) * hd ** -0.5
        # causal mask: query i (position past + i) reads keys 0 .. past + i
        past = k.shape[1] - n_tokens
        qi = torch.arange(n_tokens)[:, None] + past
        kj = torch.arange(k.shape[1])[None, :]
        scores = scores.masked_fill(kj > qi, float("-inf"))
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32)
        out = torch.matmul(probs, v).transpose(0, 1).reshape(n_tokens, self.n_heads * hd)
        return linear(out, L["self_attn.o_proj"])

    def mlp(self, x, L):
        gate = F.silu(linear(x, L["mlp.gate_proj"]))
        return linear(gate * linear(x, L["mlp.up_proj"]), L["mlp.down_proj"])

    def forward(self, x, cache):
        """x [T, hidden] at positions cache.n_tokens.. -> final-norm hidden [T, hidden]."""
        positions = torch.arange(cache.n_tokens, cache.n_tokens + x.shape[0])
        cos, sin = rope_tables(positions, self.inv_freq)
        for l, L in enumerate(self.layers):
            x = x + self.attention(rms_norm(x, L["input_layernorm"], self.eps), L, l, cos, sin,
                                   cache)
            x = x + self.mlp(rms_norm(x, L["post_attention_layernorm"], self.eps), L)
        cache.n_tokens += x.shape[0]
        return rms_norm(x, self.norm, self.eps)


# ---------------------------------------------------------------- talker and code predictor

class Talker:
    """Text and codec embeddings, text projection, decoder stack, codec_head."""

    def __init__(self, cfg, w):
        self.cfg = cfg
        self.stack = DecoderStack(cfg, w, "talker.model.")
        # kept in BF16: rows are upcast on lookup (the full table is 151936 x 2048)
        self.text_embedding = w["talker.model.text_embedding.weight"]
        p = "talker.text_projection."
        self.fc1 = (w[p + "linear_fc1.weight"], w[p + "linear_fc1.bias"])
        self.fc2 = (w[p + "linear_fc2.weight"], w[p + "linear_fc2.bias"])
        self.codec_embedding = w["talker.model.codec_embedding.weight"]   # [V, D]
        self.codec_head = w["talker.codec_head.weight"]                   # [V, D]

    def text_vectors(self, ids):
        """T(id) for a list of text token ids -> [n, D] (ResizeMLP fc2(silu(fc1(e))))."""
        ids = torch.as_tensor(list(ids), dtype=torch.long)
        e = self.text_embedding[ids].float()
        return linear(F.silu(linear(e, *self.fc1)), *self.fc2)

    def codec_vectors(self, ids):
        """C(id) for a list of codec-vocabulary ids -> [n, D]."""
        return self.codec_embedding[torch.as_tensor(list(ids), dtype=torch.long)]

    def forward(self, rows, cache):
        """Rows [T, D] -> (final-norm hidden [T, D], raw logits [T, V])."""
        h = self.stack.forward(rows, cache)
        return h, linear(h, self.codec_head)


class CodePredictor:
    """Predicts codebooks 1..G-1 of a frame from the talker hidden state and c0."""

    def __init__(self, cfg, talker_hidden, w):
        self.cfg = cfg
        self.n_groups = cfg["num_code_groups"]
        self.stack = DecoderStack(cfg, w, "talker.code_predictor.model.")
        p = "talker.code_predictor."
        self.embeddings = [w[f"{p}model.codec_embedding.{i}.weight"]
                           for i in range(self.n_groups - 1)]                 # [Vc, D] each
        self.heads = [w[f"{p}lm_head.{j}.weight"] for j in range(self.n_groups - 1)]
        if p + "small_to_mtp_projection.weight" in w:
            self.projection = (w[p + "small_to_mtp_projection.weight"],
                               w[p + "small_to_mtp_projection.bias"])
        elif cfg["hidden_size"] != talker_hidden:
            raise ValueError("code predictor hidden_size differs from the talker's "
                             "but small_to_mtp_projection is missing")
        else:
            self.projection = None

    def project(self, x):
        """small_to_mtp_projection (D -> Dc) when present, identity otherwise."""
        return x if self.projection is None else linear(x, *self.projection)

    def predict(self, h, e0, pick):
        """h [D] final-norm talker hidden, e0 [D] = E_0[c0] -> (codes [G-1], logits [G-1, Vc]).

        pick(logits) -> int chooses each code (greedy: argmax, lowest index on ties).
        """
        cache = self.stack.new_cache()
        x = self.project(torch.stack((h, e0)))                # positions 0 and 1
        codes, logits = [], []
        for j in range(self.n_groups - 1):
            y = self.stack.forward(x, cache)[-1]
            lj = linear(y, self.heads[j])
            logits.append(lj)
            codes.append(pick(lj))
            if j + 1 < self.n_groups - 1:
                x = self.project(self.embeddings[j][codes[-1]][None])   # position j + 2
        return codes, torch.stack(logits)


class LanguageModel:
    """Config, talker, code predictor and text tokenizer (tokenizer.py, None without the
    files) of one checkpoint directory; text_ids are the ids that wrap text (prompt.py)."""

    def __init__(self, path, cfg, generation_config, w, tokenizer=None):
        self.path = path
        self.cfg = cfg
        self.tokenizer = tokenizer
        self.text_ids = _helpers()[0].text_ids_of(cfg, tokenizer)
        self.talker_cfg = cfg["talker_config"]
        self.cp_cfg = self.talker_cfg["code_predictor_config"]
        self.generation_config = generation_config
        self.variant = cfg.get("tts_model_type")
        self.size = cfg.get("tts_model_size")
        self.talker = Talker(self.talker_cfg, w)
        self.code_predictor = CodePredictor(self.cp_cfg, self.talker_cfg["hidden_size"], w)
        self.hidden_size = self.talker_cfg["hidden_size"]
        self.vocab_size = self.talker_cfg["vocab_size"]
        self.n_groups = self.talker_cfg["num_code_groups"]
        if self.code_predictor.n_groups != self.n_groups:
            raise ValueError("talker and code predictor disagree on num_code_groups")

    def codebook_embedding(self, group, code):
        """E_group[code]: talker codec_embedding for group 0, CP codec_embedding[group-1] else."""
        if group == 0:
            return self.talker.codec_embedding[code]
        return self.code_predictor.embeddings[group - 1][code]

    def frame_embedding(self, codes):
        """sum_{i<G} E_i[codes[i]] -> [D] (the codec part of the next talker row)."""
        return torch.stack([self.codebook_embedding(i, int(c))
                            for i, c in enumerate(codes)]).sum(0)


def load_model(path):
    """LanguageModel for a checkpoint directory (config.json, model.safetensors)."""
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("model_type") != "qwen3_tts":
        raise ValueError(f"{path}: config.json model_type is {cfg.get('model_type')!r}, "
                         "not qwen3_tts")
    gen_path = os.path.join(path, "generation_config.json")
    generation_config = {}
    if os.path.isfile(gen_path):
        with open(gen_path) as f:
            generation_config = json.load(f)
    raw = st.load(os.path.join(path, "model.safetensors"), prefix="talker.")
    w = {}
    for name, t in raw.items():
        w[name] = t if name == "talker.model.text_embedding.weight" else t.float()
    return LanguageModel(path, cfg, generation_config, w, reftok.load(path))


# ---------------------------------------------------------------- API shortcuts

def _helpers():
    """(prompt, generate) modules, imported late: generate.py imports this file."""
    try:
        from . import generate as gen, prompt as pr
    except ImportError:
        import generate as gen
        import prompt as pr
    return pr, gen


def build_prompt(model, **kwargs):
    """prompt.build_prompt: prefill rows and trailing text rows (see prompt.py)."""
    return _helpers()[0].build_prompt(model, **kwargs)


def generate_greedy(model, prompt, **kwargs):
    """generate.generate_greedy: greedy frames for a prompt (see generate.py)."""
    return _helpers()[1].generate_greedy(model, prompt, **kwargs)


# ---------------------------------------------------------------- command line

def parse_ids(text):
    """"1,2,3" (commas and/or spaces) -> [1, 2, 3]; "" -> []."""
    return [int(t) for t in text.replace(",", " ").split()]


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="checkpoint directory")
    ap.add_argument("--text", help="user text, wrapped as the official wrapper does and "
                    "tokenized with the checkpoint's tokenizer files (ASCII only)")
    ap.add_argument("--text-ids", help="token ids of the user text only (wrapped here)")
    ap.add_argument("--input-ids", help="token ids of the whole wrapped assistant string, "
                    "used verbatim instead of --text-ids")
    ap.add_argument("--instruct", help="instruction text, wrapped and tokenized as --text")
    ap.add_argument("--instruct-ids", help="token ids of the instruction only (wrapped here)")
    ap.add_argument("--speaker", help="CustomVoice speaker name (case-insensitive)")
    ap.add_argument("--language", default="auto", help="auto or a language name")
    ap.add_argument("--layout", choices=("non_streaming", "streaming"),
                    help="prompt body layout (default: the wrapper's default for the variant)")
    ap.add_argument("--speaker-embed", help="Base: .safetensors holding the speaker-encoder "
                    "vector [D] (tensor `speaker_embedding`, or the file's only tensor)")
    ap.add_argument("--ref-codes", help="Base ICL: reference codes file (one frame per line, "
                    "16 integers, codebook 0 first)")
    ap.add_argument("--ref-text-ids", help="Base ICL: token ids of the reference transcript only")
    ap.add_argument("--ref-text", help="Base ICL: the reference transcript, wrapped as "
                    "\"<|im_start|>assistant\\n{ref_text}<|im_end|>\\n\", tokenized with the "
                    "checkpoint's tokenizer and sliced [3 : len-2] as the official model does")
    ap.add_argument("--icl-audio", action="store_true", help="Base ICL: also write the "
                    "official audio (decode reference + new codes, cut the reference off)")
    lim = ap.add_mutually_exclusive_group()
    lim.add_argument("--frames", type=int,
                     help="generate exactly N frames with EOS masked out (engine test mode)")
    lim.add_argument("--max-new-tokens", type=int,
                     help="natural EOS stop with this limit (default: generation_config.json)")
    ap.add_argument("--repetition-penalty", type=float,
                    help="talker repetition penalty (default: generation_config.json, 1.05)")
    ap.add_argument("--kv-cache", choices=("f32", "f16"), default="f32",
                    help="the talker's KV cache: f32, or f16 (keys and values rounded to "
                         "binary16 as stored, as the engine's --kv-cache f16)")
    ap.add_argument("--all-cp-logits", action="store_true",
                    help="also write cp_logits [F, 15, Vc] for every frame")
    ap.add_argument("--out", help="golden .safetensors to write")
    ap.add_argument("--self-test", action="store_true", help="run the self-checks")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: all cores)")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    if not args.self_test:
        if not args.out:
            ap.error("--out is required (or --self-test)")
        if sum(x is not None for x in (args.text, args.text_ids, args.input_ids)) != 1:
            ap.error("give exactly one of --text, --text-ids and --input-ids")
        if args.instruct is not None and args.instruct_ids is not None:
            ap.error("give at most one of --instruct and --instruct-ids")
    if args.frames is not None and args.frames < 1:
        ap.error("--frames must be >= 1")
    if args.max_new_tokens is not None and args.max_new_tokens < 1:
        ap.error("--max-new-tokens must be >= 1")
    return args


def read_speaker_embed(path):
    tensors = st.load(path)
    if "speaker_embedding" in tensors:
        return tensors["speaker_embedding"].float().flatten()
    if len(tensors) != 1:
        raise ValueError(f"{path}: no tensor `speaker_embedding` and not exactly one tensor")
    return next(iter(tensors.values())).float().flatten()


def read_codes(path):
    """Codes file -> LongTensor [T, G] (blank lines and # comments skipped)."""
    rows = []
    with open(path) as f:
        for line in f:
            line = line.split("#")[0].strip()
            if line:
                rows.append([int(v) for v in line.split()])
    return torch.tensor(rows, dtype=torch.long)


def run_golden(args):
    pr, gen = _helpers()
    t0 = time.time()
    model = load_model(args.model)
    model.talker.stack.kv_f16 = args.kv_cache == "f16"
    layout = args.layout or pr.default_layout(model)
    input_ids = parse_ids(args.input_ids) if args.input_ids is not None else None
    instruct_ids = parse_ids(args.instruct_ids) if args.instruct_ids is not None else None
    if args.text is not None or args.instruct:
        if model.tokenizer is None:
            raise ValueError(f"{args.model} has no tokenizer files for --text / --instruct")
    if args.text is not None:   # the wrapper's string, tokenized whole (qwen3_tts_model.py)
        input_ids = model.tokenizer.encode(
            f"<|im_start|>assistant\n{args.text}<|im_end|>\n<|im_start|>assistant\n")
    if args.instruct:
        instruct_ids = model.tokenizer.encode(f"<|im_start|>user\n{args.instruct}<|im_end|>\n")
    ref_text_ids = parse_ids(args.ref_text_ids) if args.ref_text_ids is not None else None
    if args.ref_text is not None:   # the wrapper's _build_ref_text, sliced [3:-2] by generate()
        if model.tokenizer is None:
            raise ValueError(f"{args.model} has no tokenizer files for --ref-text")
        ref_text_ids = model.tokenizer.encode(
            f"<|im_start|>assistant\n{args.ref_text}<|im_end|>\n")[3:-2]
    speaker_embed = read_speaker_embed(args.speaker_embed) if args.speaker_embed else None
    ref_codes = read_codes(args.ref_codes) if args.ref_codes else None
    p = pr.build_prompt(
        model,
        text_ids=parse_ids(args.text_ids) if args.text_ids is not None else None,
        input_ids=input_ids, instruct_ids=instruct_ids,
        instruct_wrapped=bool(args.instruct),
        speaker=args.speaker, language=args.language,
        non_streaming=(layout == "non_streaming"),
        speaker_embed=speaker_embed, ref_codes=ref_codes, ref_text_ids=ref_text_ids)
    result = gen.generate_greedy(
        model, p, n_frames=args.frames, max_new_tokens=args.max_new_tokens,
        repetition_penalty=args.repetition_penalty, keep_cp_logits=args.all_cp_logits)
    extra, extra_meta = {}, {}
    if speaker_embed is not None:
        extra["speaker_embedding"] = speaker_embed.float()
    if ref_codes is not None:
        extra["ref_codes"] = ref_codes.to(torch.int32)
        extra["ref_text_ids"] = torch.tensor(ref_text_ids, dtype=torch.int32)
        if args.icl_audio and len(result.codes):
            wav, cut = gen.icl_official_audio(args.model, ref_codes, result.codes)
            extra["icl_audio"] = wav
            extra_meta["icl_cut"] = str(cut)
    gen.write_golden(args.out, model, p, result, all_cp_logits=args.all_cp_logits,
                     extra=extra, extra_meta=extra_meta)
    if not args.quiet:
        for note in p.notes:
            print(f"note: {note}")
        print(f"prompt: {p.embeds.shape[0]} rows ({layout}), trailing text "
              f"{p.trailing.shape[0]} rows; {len(result.codes)} frames, stop: {result.stop}")
        print(f"wrote {args.out} in {time.time() - t0:.1f} s")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    with torch.no_grad():
        if args.self_test:
            ok = _helpers()[1].self_test(args.model, verbose=not args.quiet)
            sys.exit(0 if ok else 1)
        run_golden(args)


if __name__ == "__main__":
    main()
