#!/usr/bin/python3
"""PyTorch fp32 reference of the Qwen3-TTS codec decoder (12 Hz speech tokenizer).

Mirrors `Qwen3TTSTokenizerV2Decoder` and its `chunked_decode` in the official
qwen_tts/core/tokenizer_12hz/modeling_qwen3_tts_tokenizer_v2.py, eager
attention, everything in float32. It produces the stage goldens that
src/model/codec_decoder.c is tested against.

Dataflow of one decode call (conv parts channels-first [C, T] as upstream;
Q = num_quantizers, Cb = codebook_dim, L = latent_dim, H = hidden_size,
D = decoder_dim; the golden name of each stage on the right):

    codes [Q, T]            ints in [0, codebook_size)
    split RVQ lookup        table_q = embedding_sum_q / max(cluster_usage_q, 1e-5)
                            rvq_first.output_proj . table_0[c_0]
                          + rvq_rest.output_proj  . sum_{q>=1} table_q[c_q]
                            -> [Cb, T]                                          "quantizer"
    pre_conv                causal conv k3 (left pad 2)  -> [L, T]              "pre_conv"
    pre_transformer         time-major [T, L] -> input_proj -> [T, H]
                            N x (RMSNorm, attention with RoPE and sliding window
                                 i-W < j <= i, layer scale, RMSNorm, SwiGLU,
                                 layer scale), RMSNorm, output_proj -> [T, L]   "pre_transformer"
    upsample                per ratio r: ConvTranspose k=r s=r, ConvNeXt block
                            -> [L, 4T]                                          "upsample"
    decoder.0               causal conv k7 -> [D, 4T]                           "decoder.0"
    decoder.1..4            DecoderBlock: SnakeBeta, ConvTranspose k=2r s=r
                            (drop the last r samples), residual units with
                            dilation 1, 3, 9 -> [D/2^n, 4T*prod(r_1..r_n)]      "block.1".."block.4"
    decoder.5, decoder.6    SnakeBeta, causal conv k7 -> [1, 1920T]             "final"
    clamp(-1, 1)                                                                "wav"

Checkpoint tensors: `decoder.<module path>` in speech_tokenizer/model.safetensors
(all F32), e.g. decoder.quantizer.rvq_rest.vq.layers.{q}._codebook.embedding_sum,
decoder.pre_transformer.layers.{l}.self_attn.q_proj.weight,
decoder.upsample.{u}.1.pwconv1.weight, decoder.decoder.{n}.block.{k}.conv1.conv.weight.
The rvq input_proj tensors exist but decoding never reads them.

Traps, all taken from the official code:
  - causal convs pad (k-1)*d zeros on the left only; transposed convs keep the
    first L*s outputs (right-trim k - s).
  - SnakeBeta stores log-scale parameters: x + 1/(exp(beta)+1e-9) * sin(exp(alpha)*x)^2.
  - RMSNorm eps is rms_norm_eps (1e-5); ConvNeXt LayerNorm eps is 1e-6; GELU is the
    exact erf form; attention width heads*head_dim differs from hidden_size.
  - RoPE rotates split halves (j, j + head_dim/2) and its positions restart at 0
    in every call, so each chunk of chunked_decode starts at position 0.
  - chunked_decode: chunks of 300 frames with 25 frames of left context, each
    decoded independently; above 300 frames this differs from one pass.

Goldens are written TIME-MAJOR: every stage as [rows, channels] (the
transpose of the [C, T] above), `final` and `wav` as 1-D [1920T].

Command line:
    codec_decoder.py --model DIR --codes CODES.txt --out GOLDEN.safetensors [--official-chunking]
    codec_decoder.py --random-codes N --seed S --write-codes CODES.txt [--model DIR]
    codec_decoder.py --model DIR --self-test
Codes files hold one frame per line: Q space-separated integers, codebook 0 first.

Python API: load_decoder(dir) -> CodecDecoder; dec.stages(codes) -> dict of
time-major stages; dec.decode(codes) / dec.chunked_decode(codes) -> wav [1920T];
codes are a LongTensor [T, Q] (frame-major, as in the codes file).
"""

import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

try:
    from . import safetensors_io as st
except ImportError:
    import safetensors_io as st

CHUNK_FRAMES = 300        # chunked_decode default chunk_size
LEFT_CONTEXT_FRAMES = 25  # chunked_decode default left_context_size

# Defaults of Qwen3TTSTokenizerV2DecoderConfig for keys a config.json may omit
# (released files carry them all). codebook_dim has no default upstream; a
# missing head_dim falls back to hidden_size / num_attention_heads there too.
DECODER_DEFAULTS = {
    "codebook_size": 2048, "hidden_size": 1024, "latent_dim": 1024,
    "max_position_embeddings": 8000, "rope_theta": 10000, "num_attention_heads": 16,
    "num_key_value_heads": 16, "sliding_window": 72, "intermediate_size": 3072,
    "rms_norm_eps": 1e-5, "num_hidden_layers": 8, "num_quantizers": 16,
    "upsample_rates": [8, 5, 4, 3], "upsampling_ratios": [2, 2], "decoder_dim": 1536,
}


# ---------------------------------------------------------------- loading

def codec_dir(path):
    """The directory holding the codec config: DIR/speech_tokenizer or DIR itself."""
    sub = os.path.join(path, "speech_tokenizer")
    if os.path.isfile(os.path.join(sub, "config.json")):
        return sub
    with open(os.path.join(path, "config.json")) as f:
        if json.load(f).get("model_type") != "qwen3_tts_tokenizer_12hz":
            raise ValueError(f"{path}: neither a checkpoint nor a codec directory")
    return path


def load_decoder(path):
    """CodecDecoder for a checkpoint directory or a speech_tokenizer directory."""
    root = codec_dir(path)
    with open(os.path.join(root, "config.json")) as f:
        cfg = json.load(f)["decoder_config"]
    raw = st.load(os.path.join(root, "model.safetensors"), prefix="decoder.")
    weights = {name[len("decoder."):]: t.float() for name, t in raw.items()}
    return CodecDecoder(cfg, weights)


# ---------------------------------------------------------------- building blocks

def causal_conv(x, w, b, dilation=1, groups=1):
    """Stride-1 conv over x [C, T] with (k-1)*dilation zeros on the left: [C_out, T]."""
    pad = (w.shape[-1] - 1) * dilation
    x = F.pad(x[None], (pad, 0))
    return F.conv1d(x, w, b, dilation=dilation, groups=groups)[0]


def trans_conv(x, w, b, stride):
    """ConvTranspose1d over x [C_in, T], keeping the first T*stride samples."""
    y = F.conv_transpose1d(x[None], w, b, stride=stride)[0]
    trim = w.shape[-1] - stride
    return y[:, : y.shape[-1] - trim] if trim > 0 else y


def snake_beta(x, log_alpha, log_beta):
    """x + 1/(beta + 1e-9) * sin(alpha * x)^2 per channel, x [C, T]."""
    alpha = torch.exp(log_alpha)[:, None]
    beta = torch.exp(log_beta)[:, None]
    return x + (1.0 / (beta + 1e-9)) * torch.pow(torch.sin(x * alpha), 2)


def rms_norm(x, w, eps):
    """Row-wise RMSNorm of x [T, C], scale applied after normalising."""
    var = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(var + eps))


def rope_tables(n_frames, head_dim, theta):
    """cos, sin [T, head_dim] for positions 0..T-1 (halves repeated, rotate-half layout)."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim
    inv_freq = 1.0 / (theta ** exponents)
    angles = torch.arange(n_frames).float()[:, None] * inv_freq[None, :]
    emb = torch.cat((angles, angles), dim=-1)
    return emb.cos(), emb.sin()


def apply_rope(x, cos, sin):
    """x [heads, T, head_dim] rotated by pairs (j, j + head_dim/2)."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def sliding_window_mask(n_frames, window):
    """Boolean [T, T]: query i may read key j iff i - window < j <= i."""
    i = torch.arange(n_frames)[:, None]
    j = torch.arange(n_frames)[None, :]
    return (j <= i) & (j > i - window)


# ---------------------------------------------------------------- the decoder

class CodecDecoder:
    """Weights (names without the `decoder.` prefix, fp32) plus decoder_config."""

    def __init__(self, cfg, weights):
        cfg = dict(DECODER_DEFAULTS, **cfg)
        cfg.setdefault("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])
        self.cfg = cfg
        self.w = weights
        ratios = list(cfg["upsample_rates"]) + list(cfg["upsampling_ratios"])
        self.samples_per_frame = math.prod(ratios)

    # ---- (a) split RVQ

    def codebook(self, prefix):
        """Dequantisation table [codebook_size, codebook_dim/2] of one codebook."""
        usage = self.w[prefix + "._codebook.cluster_usage"].clamp(min=1e-5)
        return self.w[prefix + "._codebook.embedding_sum"] / usage[:, None]

    def quantizer(self, codes):
        """codes [Q, T] -> [codebook_dim, T]: first codebook and the rest, projected apart."""
        first = F.embedding(codes[0], self.codebook("quantizer.rvq_first.vq.layers.0"))
        rest = torch.zeros_like(first)
        for q in range(1, codes.shape[0]):
            table = self.codebook(f"quantizer.rvq_rest.vq.layers.{q - 1}")
            rest = rest + F.embedding(codes[q], table)
        z = F.conv1d(first.T[None], self.w["quantizer.rvq_first.output_proj.weight"])[0]
        return z + F.conv1d(rest.T[None], self.w["quantizer.rvq_rest.output_proj.weight"])[0]

    # ---- (c) pre_transformer, time-major [T, C]

    def attention(self, x, p, cos, sin, mask):
        """Sliding-window self-attention of x [T, H]; returns o_proj output [T, H]."""
        cfg, w = self.cfg, self.w
        hd = cfg["head_dim"]
        n_heads, n_kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        q = F.linear(x, w[p + "q_proj.weight"]).view(-1, n_heads, hd).transpose(0, 1)
        k = F.linear(x, w[p + "k_proj.weight"]).view(-1, n_kv, hd).transpose(0, 1)
        v = F.linear(x, w[p + "v_proj.weight"]).view(-1, n_kv, hd).transpose(0, 1)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        k = k.repeat_interleave(n_heads // n_kv, dim=0)
        v = v.repeat_interleave(n_heads // n_kv, dim=0)
        scores = torch.matmul(q, k.transpose(1, 2)) * hd ** -0.5
        scores = scores.masked_fill(~mask, float("-inf"))
        out = torch.matmul(torch.softmax(scores, dim=-1), v)
        return F.linear(out.transpose(0, 1).reshape(x.shape[0], -1), w[p + "o_proj.weight"])

    def mlp(self, x, p):
        """SwiGLU: down(silu(gate(x)) * up(x))."""
        w = self.w
        gate = F.silu(F.linear(x, w[p + "gate_proj.weight"]))
        return F.linear(gate * F.linear(x, w[p + "up_proj.weight"]), w[p + "down_proj.weight"])

    def transformer_layer(self, x, l, cos, sin, mask):
        w, eps = self.w, self.cfg["rms_norm_eps"]
        p = f"pre_transformer.layers.{l}."
        h = self.attention(rms_norm(x, w[p + "input_layernorm.weight"], eps),
                           p + "self_attn.", cos, sin, mask)
        x = x + w[p + "self_attn_layer_scale.scale"] * h
        h = self.mlp(rms_norm(x, w[p + "post_attention_layernorm.weight"], eps), p + "mlp.")
        return x + w[p + "mlp_layer_scale.scale"] * h

    def pre_transformer(self, x):
        """x [T, latent_dim] -> [T, latent_dim]; positions start at 0 on every call."""
        cfg, w = self.cfg, self.w
        p = "pre_transformer."
        x = F.linear(x, w[p + "input_proj.weight"], w[p + "input_proj.bias"])
        cos, sin = rope_tables(x.shape[0], cfg["head_dim"], cfg["rope_theta"])
        mask = sliding_window_mask(x.shape[0], cfg["sliding_window"])
        for l in range(cfg["num_hidden_layers"]):
            x = self.transformer_layer(x, l, cos, sin, mask)
        x = rms_norm(x, w[p + "norm.weight"], cfg["rms_norm_eps"])
        return F.linear(x, w[p + "output_proj.weight"], w[p + "output_proj.bias"])

    # ---- (d) upsample

    def convnext(self, x, p):
        """ConvNeXt block on x [C, T]: depthwise causal k7, LayerNorm, MLP x4, gamma, residual."""
        w = self.w
        y = causal_conv(x, w[p + "dwconv.conv.weight"], w[p + "dwconv.conv.bias"],
                        groups=x.shape[0])
        y = y.T
        y = F.layer_norm(y, (y.shape[-1],), w[p + "norm.weight"], w[p + "norm.bias"], eps=1e-6)
        y = F.gelu(F.linear(y, w[p + "pwconv1.weight"], w[p + "pwconv1.bias"]))
        y = F.linear(y, w[p + "pwconv2.weight"], w[p + "pwconv2.bias"])
        return x + (w[p + "gamma"] * y).T

    def upsample(self, x):
        for u, ratio in enumerate(self.cfg["upsampling_ratios"]):
            p = f"upsample.{u}."
            x = trans_conv(x, self.w[p + "0.conv.weight"], self.w[p + "0.conv.bias"], ratio)
            x = self.convnext(x, p + "1.")
        return x

    # ---- (e) waveform decoder

    def residual_unit(self, x, p, dilation):
        w = self.w
        y = snake_beta(x, w[p + "act1.alpha"], w[p + "act1.beta"])
        y = causal_conv(y, w[p + "conv1.conv.weight"], w[p + "conv1.conv.bias"], dilation)
        y = snake_beta(y, w[p + "act2.alpha"], w[p + "act2.beta"])
        y = causal_conv(y, w[p + "conv2.conv.weight"], w[p + "conv2.conv.bias"])
        return x + y

    def decoder_block(self, x, n):
        """decoder.{n} (n = 1..4): SnakeBeta, ConvTranspose x rate, 3 residual units."""
        w, p = self.w, f"decoder.{n}.block."
        rate = self.cfg["upsample_rates"][n - 1]
        x = snake_beta(x, w[p + "0.alpha"], w[p + "0.beta"])
        x = trans_conv(x, w[p + "1.conv.weight"], w[p + "1.conv.bias"], rate)
        for k, dilation in zip((2, 3, 4), (1, 3, 9)):
            x = self.residual_unit(x, f"{p}{k}.", dilation)
        return x

    # ---- whole pass

    def stages(self, codes):
        """codes LongTensor [T, Q] -> dict stage name -> time-major fp32 tensor."""
        codes = self.check_codes(codes).T.contiguous()
        out = {}
        with torch.no_grad():
            x = self.quantizer(codes)
            out["quantizer"] = x.T
            x = causal_conv(x, self.w["pre_conv.conv.weight"], self.w["pre_conv.conv.bias"])
            out["pre_conv"] = x.T
            x = self.pre_transformer(x.T)
            out["pre_transformer"] = x
            x = self.upsample(x.T.contiguous())
            out["upsample"] = x.T
            x = causal_conv(x, self.w["decoder.0.conv.weight"], self.w["decoder.0.conv.bias"])
            out["decoder.0"] = x.T
            for n in range(1, len(self.cfg["upsample_rates"]) + 1):
                x = self.decoder_block(x, n)
                out[f"block.{n}"] = x.T
            n_last = len(self.cfg["upsample_rates"]) + 1
            x = snake_beta(x, self.w[f"decoder.{n_last}.alpha"], self.w[f"decoder.{n_last}.beta"])
            x = causal_conv(x, self.w[f"decoder.{n_last + 1}.conv.weight"],
                            self.w[f"decoder.{n_last + 1}.conv.bias"])
            out["final"] = x[0]
            out["wav"] = x[0].clamp(min=-1, max=1)
        return {k: v.contiguous() for k, v in out.items()}

    def decode(self, codes):
        """One pass over all frames: codes [T, Q] -> wav [T * samples_per_frame]."""
        return self.stages(codes)["wav"]

    def chunked_decode(self, codes, chunk=CHUNK_FRAMES, left_context=LEFT_CONTEXT_FRAMES):
        """The official whole-utterance decode: independent chunks with left context."""
        pieces, start = [], 0
        while start < codes.shape[0]:
            end = min(start + chunk, codes.shape[0])
            context = left_context if start - left_context > 0 else start
            wav = self.decode(codes[start - context: end])
            pieces.append(wav[context * self.samples_per_frame:])
            start = end
        return torch.cat(pieces)

    def check_codes(self, codes):
        codes = torch.as_tensor(codes, dtype=torch.long)
        if codes.dim() != 2 or codes.shape[1] != self.cfg["num_quantizers"] or codes.shape[0] < 1:
            raise ValueError(f"codes must be [T >= 1, {self.cfg['num_quantizers']}], "
                             f"got {list(codes.shape)}")
        if codes.min() < 0 or codes.max() >= self.cfg["codebook_size"]:
            raise ValueError(f"codes must lie in [0, {self.cfg['codebook_size']})")
        return codes


# ---------------------------------------------------------------- codes files

def read_codes(path):
    """Codes file -> LongTensor [T, Q]; blank lines and lines starting with # are skipped."""
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                rows.append([int(v) for v in line.split()])
    if not rows or len({len(r) for r in rows}) != 1:
        raise ValueError(f"{path}: expected equal-length rows of integers")
    return torch.tensor(rows, dtype=torch.long)


def write_codes(path, codes):
    with open(path, "w") as f:
        for row in codes.tolist():
            f.write(" ".join(str(v) for v in row) + "\n")


def random_codes(n_frames, seed, n_quantizers=16, codebook_size=2048):
    """Uniform codes [T, Q] in [0, codebook_size), deterministic in seed."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, codebook_size, (n_frames, n_quantizers), generator=g)


# ---------------------------------------------------------------- reports and self-test

def rms(x):
    return float(x.double().pow(2).mean().sqrt())


def describe(stages):
    """One line per stage: shape and RMS; for the waveform also the clipped fraction."""
    lines = []
    for name, t in stages.items():
        extra = ""
        if name == "final":
            extra = f"  |x|>=1: {float((t.abs() >= 1).double().mean()) * 100:.2f}%"
        lines.append(f"  {name:16s} {str(list(t.shape)):16s} rms {rms(t):.4g}{extra}")
    return "\n".join(lines)


def max_diff(a, b):
    return float((a - b).abs().max()) if a.numel() else 0.0


def check_long(dec, codes, check):
    """Official chunking of > 300 frames: first chunk alone, then chunks with left context."""
    spf, n_frames = dec.samples_per_frame, codes.shape[0]
    chunked = dec.chunked_decode(codes)
    head = dec.decode(codes[:CHUNK_FRAMES])
    tail = dec.decode(codes[CHUNK_FRAMES - LEFT_CONTEXT_FRAMES: 2 * CHUNK_FRAMES])
    expect = torch.cat((head, tail[LEFT_CONTEXT_FRAMES * spf:]))[: n_frames * spf]
    check(chunked.shape[0] == n_frames * spf,
          f"official chunking of {n_frames} frames gives {n_frames} x {spf} samples")
    check(torch.equal(chunked[: expect.shape[0]], expect),
          f"official chunking = first {CHUNK_FRAMES} frames alone, then chunks with "
          f"{LEFT_CONTEXT_FRAMES} frames of left context")
    single = dec.decode(codes)
    d_head = max_diff(single[: CHUNK_FRAMES * spf], chunked[: CHUNK_FRAMES * spf])
    d_tail = max_diff(single[CHUNK_FRAMES * spf:], chunked[CHUNK_FRAMES * spf:])
    check(d_head < 1e-4, f"first chunk matches one pass (max diff {d_head:.2e})")
    print(f"info one pass vs official chunking after frame {CHUNK_FRAMES}: max diff {d_tail:.3e} "
          "(checkpoint property: large when attention reaches past the 25-frame context)")


def self_test(dec, n_short, n_long, seed):
    """Checks of chunking and causality; returns (passed, failed)."""
    spf = dec.samples_per_frame
    q, size = dec.cfg["num_quantizers"], dec.cfg["codebook_size"]
    results = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        results.append(bool(ok))

    codes = random_codes(n_short, seed, q, size)
    t0 = time.time()
    stages = dec.stages(codes)
    print(f"stages for {n_short} random frames ({time.time() - t0:.1f} s):\n{describe(stages)}")
    check(stages["wav"].shape[0] == n_short * spf, f"wav has {n_short} x {spf} samples")
    check(all(torch.isfinite(t).all() for t in stages.values()), "every stage is finite")
    if n_short <= CHUNK_FRAMES:
        check(torch.equal(dec.chunked_decode(codes), stages["wav"]),
              f"official chunking of {n_short} <= {CHUNK_FRAMES} frames equals one pass exactly")
    cut = max(1, n_short // 2)
    d = max_diff(dec.decode(codes[:cut]), stages["wav"][: cut * spf])
    check(d < 1e-4, f"causal: decoding the first {cut} frames alone matches the prefix "
                    f"(max diff {d:.2e})")

    if n_long > CHUNK_FRAMES:
        check_long(dec, random_codes(n_long, seed + 1, q, size), check)
    return sum(results), len(results) - sum(results)


# ---------------------------------------------------------------- command line

def parse_args(argv):
    ap = argparse.ArgumentParser(description="Qwen3-TTS codec decoder reference (fp32 PyTorch)")
    ap.add_argument("--model", help="checkpoint dir (with speech_tokenizer/) or codec dir")
    ap.add_argument("--codes", help="codes file: one frame per line, codebook 0 first")
    ap.add_argument("--out", help="golden .safetensors to write (F32, time-major stages)")
    ap.add_argument("--official-chunking", action="store_true",
                    help="wav from chunked_decode (300-frame chunks, 25 frames of context); "
                         "only `wav` is written")
    ap.add_argument("--random-codes", type=int, metavar="N",
                    help="make N frames of uniform random codes")
    ap.add_argument("--seed", type=int, default=0, help="seed of --random-codes and --self-test")
    ap.add_argument("--write-codes", metavar="FILE", help="write the --random-codes frames to FILE")
    ap.add_argument("--self-test", action="store_true",
                    help="check chunking and causality, report stage RMS")
    ap.add_argument("--self-test-frames", type=int, nargs=2, default=[40, 340],
                    metavar=("SHORT", "LONG"),
                    help="frame counts of the self-test (default 40 340; "
                         "LONG <= 300 skips the chunking part)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default: all cores)")
    return ap.parse_args(argv)


def golden_tensors(dec, codes, official):
    """The tensors of a golden file: all stages, or only the chunked `wav`."""
    if official:
        return {"wav": dec.chunked_decode(codes)}
    return dec.stages(codes)


def input_codes(args, dec):
    """Codes from --codes, or --random-codes (written to --write-codes if given), or None."""
    if args.codes and args.random_codes is not None:
        sys.exit("give --codes or --random-codes, not both")
    if args.write_codes and args.random_codes is None:
        sys.exit("--write-codes needs --random-codes")
    if args.codes:
        return read_codes(args.codes)
    if args.random_codes is None:
        return None
    q = dec.cfg["num_quantizers"] if dec else 16
    size = dec.cfg["codebook_size"] if dec else 2048
    codes = random_codes(args.random_codes, args.seed, q, size)
    if args.write_codes:
        write_codes(args.write_codes, codes)
    return codes


def write_golden(path, dec, codes, official):
    tensors = golden_tensors(dec, codes, official)
    meta = {"format": "pt", "n_frames": str(codes.shape[0]),
            "chunking": "official" if official else "single_pass"}
    st.save(path, {k: v.float().contiguous() for k, v in tensors.items()}, meta)
    print(f"wrote {path} ({codes.shape[0]} frames):\n{describe(tensors)}")


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads or os.cpu_count() or 1)
    if (args.self_test or args.out) and not args.model:
        sys.exit("--self-test and --out need --model")
    dec = load_decoder(args.model) if args.model else None
    codes = input_codes(args, dec)
    if args.self_test:
        passed, fails = self_test(dec, *args.self_test_frames, args.seed)
        print(f"{passed} passed, {fails} failed")
        if fails:
            sys.exit(1)
    if args.out:
        if codes is None:
            sys.exit("--out needs --codes or --random-codes")
        write_golden(args.out, dec, codes, args.official_chunking)


if __name__ == "__main__":
    main()
