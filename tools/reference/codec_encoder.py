#!/usr/bin/python3
"""PyTorch fp32 reference of the Qwen3-TTS codec ENCODER (12 Hz speech tokenizer).

The official `Qwen3TTSTokenizerV2Model.encode` (qwen_tts/core/tokenizer_12hz/
modeling_qwen3_tts_tokenizer_v2.py) runs a Hugging Face `MimiModel` with its decoder
parts deleted (transformers 4.57.3) and keeps the first `encoder_valid_num_quantizers`
codes of ceil(N / encode_downsample_rate) frames. Everything here is float32, one pass.

Dataflow (channels-first [C, T] as upstream; F = num_filters, H = hidden_size,
V = vector_quantization_hidden_dimension, r_i = reversed(upsampling_ratios); golden
names on the right, written TIME-MAJOR [rows, channels]):

    pcm [1, N]
    conv k7 1 -> F                                              "conv.0"
    per ratio r (C = F, 2F, 4F, ...):
      ResBlock: x + conv_k1(ELU(conv_k3(ELU(x))))  C -> C/2 -> C
      ELU, conv k=2r stride r  C -> 2C                           "conv.down{i}"
    ELU, conv k3 -> H       [T25 = ceil(N / prod r), H]          "conv_stack"
    transformer: L x (LayerNorm(w, b) -> causal MHA with RoPE -> layer scale -> +res;
                      LayerNorm -> fc1 -> GELU(erf) -> fc2 -> layer scale -> +res),
                 no final norm                                   "transformer"
    downsample: conv k=2*int(25 Hz / frame_rate) stride 2, no bias, REPLICATE pad
                            [T12 = ceil(T25 / 2), H]              "downsample"
    split RVQ: semantic (num_semantic_quantizers layers) and acoustic RVQ on the
      same input, each r = input_proj(x) (1x1, no bias), per layer
      table = embed_sum / max(cluster_usage, 1e-5), idx = argmin cdist(r, table),
      r -= table[idx]; codes = [semantic..., acoustic...][:valid] "codes" [T12, valid]
    also "gap" [T12, valid]: per decision (d2 - d1) / d1 of the two smallest cdist
    distances (near-ties flip under any other rounding; tests use it).

Mimi causal conv padding (MimiConv1d, use_causal_conv): effective kernel K = (k-1)d+1,
left pad K - stride, right pad ceil(L / stride) * stride - L (the general
`_get_extra_padding_for_conv1d` reduces to this since padding_total = K - stride), pad
values zero ("constant") except the downsample conv ("replicate": edge samples).
Output length ceil(L / stride).

Attention mask: causal over ALL earlier frames. In transformers 4.57.3 MimiModel builds
the mask with `create_causal_mask` (plain causal; the config's sliding_window 250 only
reaches flash-attention-2, and the DynamicCache's sliding layers do not cut a single
pass: kv length is the query length on the first call). Spec 6.4 agrees.

Distances: torch.cdist(p=2) on fp32 with more than 25 rows uses the matmul form
sqrt(clamp_min(|x|^2 - 2 x.y + |y|^2, 1e-30)) (compute_mode
"use_mm_for_euclid_dist_if_necessary"); argmin takes the first of equal values.

Command line:
    codec_encoder.py --model DIR --audio PCM.f32 --out GOLDEN.safetensors
    codec_encoder.py --synth SECONDS --seed S --rate HZ --write-audio PCM.f32
PCM files are raw little-endian float32 mono at the codec's input rate.

Python API: load_encoder(dir) -> CodecEncoder; enc.stages(pcm) -> dict; enc.encode(pcm)
-> LongTensor [T12, valid].
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

try:
    from . import safetensors_io as st
    from .codec_decoder import codec_dir
except ImportError:
    import safetensors_io as st
    from codec_decoder import codec_dir

# MimiConfig defaults (transformers 4.57.3) for keys an encoder_config may omit.
MIMI_DEFAULTS = {
    "sampling_rate": 24000, "audio_channels": 1, "hidden_size": 512, "num_filters": 64,
    "num_residual_layers": 1, "upsampling_ratios": [8, 6, 5, 4], "kernel_size": 7,
    "last_kernel_size": 3, "residual_kernel_size": 3, "dilation_growth_rate": 2,
    "compress": 2, "codebook_size": 2048, "codebook_dim": 256, "num_quantizers": 32,
    "vector_quantization_hidden_dimension": 256, "num_semantic_quantizers": 1,
    "num_hidden_layers": 8, "intermediate_size": 2048, "num_attention_heads": 8,
    "num_key_value_heads": 8, "head_dim": None, "norm_eps": 1e-5, "rope_theta": 10000.0,
    "frame_rate": None,
}
CLUSTER_USAGE_EPS = 1e-5  # MimiEuclideanCodebook epsilon


def load_encoder(path):
    """CodecEncoder for a checkpoint directory or a speech_tokenizer directory."""
    root = codec_dir(path)
    with open(os.path.join(root, "config.json")) as f:
        top = json.load(f)
    raw = st.load(os.path.join(root, "model.safetensors"), prefix="encoder.")
    if not raw:
        raise ValueError(f"{root}: the codec has no encoder.* tensors")
    weights = {name[len("encoder."):]: t.float() for name, t in raw.items()}
    return CodecEncoder(top, weights)


def mimi_config(top):
    cfg = dict(MIMI_DEFAULTS)
    cfg.update(top.get("encoder_config") or {})
    if cfg.get("head_dim") is None:
        cfg["head_dim"] = cfg["hidden_size"] // cfg["num_attention_heads"]
    hop25 = math.prod(cfg["upsampling_ratios"])
    fr = cfg.get("frame_rate") or cfg.get("_frame_rate")
    if fr is None:  # MimiConfig.frame_rate without one: sampling_rate / frame_size
        fr = cfg["sampling_rate"] / (hop25 * 2)
    encodec_fr = math.ceil(cfg["sampling_rate"] / hop25)
    cfg["downsample_kernel"] = 2 * int(encodec_fr / fr)
    cfg["valid"] = top.get("encoder_valid_num_quantizers", 16)
    cfg["encode_downsample_rate"] = top.get("encode_downsample_rate", 1920)
    return cfg


def mimi_conv(x, w, b, stride=1, dilation=1, replicate=False):
    """MimiConv1d, causal: left pad K - stride, right pad to a whole last frame."""
    k_eff = (w.shape[-1] - 1) * dilation + 1
    length = x.shape[-1]
    extra = math.ceil(length / stride) * stride - length
    x = F.pad(x[None], (k_eff - stride, extra), mode="replicate" if replicate else "constant")[0]
    return F.conv1d(x[None], w, b, stride=stride, dilation=dilation)[0]


def layer_norm(x, w, b, eps):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps)


def rope_tables(n, head_dim, theta):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    freqs = torch.arange(n, dtype=torch.float32)[:, None] * inv[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class CodecEncoder:
    def __init__(self, top, weights):
        self.cfg = mimi_config(top)
        self.w = weights

    # ---------------------------------------------------------------- stages

    def conv_stack(self, pcm, out):
        c, w = self.cfg, self.w
        p = "encoder.layers."
        x = mimi_conv(pcm[None], w[p + "0.conv.weight"], w[p + "0.conv.bias"])
        out["conv.0"] = x
        idx = 1
        for i, ratio in enumerate(reversed(c["upsampling_ratios"])):
            for j in range(c["num_residual_layers"]):
                q = f"{p}{idx}.block."
                h = mimi_conv(F.elu(x), w[q + "1.conv.weight"], w[q + "1.conv.bias"],
                              dilation=c["dilation_growth_rate"] ** j)
                h = mimi_conv(F.elu(h), w[q + "3.conv.weight"], w[q + "3.conv.bias"])
                x = x + h
                idx += 1
            x = mimi_conv(F.elu(x), w[f"{p}{idx + 1}.conv.weight"], w[f"{p}{idx + 1}.conv.bias"],
                          stride=ratio)
            out[f"conv.down{i}"] = x
            idx += 2
        x = mimi_conv(F.elu(x), w[f"{p}{idx + 1}.conv.weight"], w[f"{p}{idx + 1}.conv.bias"])
        return x

    def transformer(self, x):
        """x [T, H] time-major."""
        c, w = self.cfg, self.w
        n, hd = x.shape[0], c["head_dim"]
        nh, nkv = c["num_attention_heads"], c["num_key_value_heads"]
        cos, sin = rope_tables(n, hd, float(c["rope_theta"]))
        mask = torch.full((n, n), float("-inf")).triu(1)
        for l in range(c["num_hidden_layers"]):
            p = f"encoder_transformer.layers.{l}."
            h = layer_norm(x, w[p + "input_layernorm.weight"], w[p + "input_layernorm.bias"],
                           c["norm_eps"])
            q = (h @ w[p + "self_attn.q_proj.weight"].T).view(n, nh, hd).transpose(0, 1)
            k = (h @ w[p + "self_attn.k_proj.weight"].T).view(n, nkv, hd).transpose(0, 1)
            v = (h @ w[p + "self_attn.v_proj.weight"].T).view(n, nkv, hd).transpose(0, 1)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            k = k.repeat_interleave(nh // nkv, dim=0)
            v = v.repeat_interleave(nh // nkv, dim=0)
            att = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(hd) + mask, dim=-1) @ v
            att = att.transpose(0, 1).reshape(n, nh * hd) @ w[p + "self_attn.o_proj.weight"].T
            x = x + w[p + "self_attn_layer_scale.scale"] * att
            h = layer_norm(x, w[p + "post_attention_layernorm.weight"],
                           w[p + "post_attention_layernorm.bias"], c["norm_eps"])
            h = F.gelu(h @ w[p + "mlp.fc1.weight"].T) @ w[p + "mlp.fc2.weight"].T
            x = x + w[p + "mlp_layer_scale.scale"] * h
        return x

    def rvq(self, part, x, n_layers):
        """codes [T, n_layers] and relative gaps of one residual quantizer; x [H, T]."""
        q = f"quantizer.{part}_residual_vector_quantizer."
        r = x
        if q + "input_proj.weight" in self.w:
            r = F.conv1d(x[None], self.w[q + "input_proj.weight"])[0]
        r = r.T.contiguous()
        codes, gaps = [], []
        for i in range(n_layers):
            book = f"{q}layers.{i}.codebook."
            table = self.w[book + "embed_sum"] / \
                self.w[book + "cluster_usage"].clamp(min=CLUSTER_USAGE_EPS)[:, None]
            d = torch.cdist(r[None].float(), table[None].float(), p=2)[0]
            idx = d.argmin(dim=-1)
            two = d.topk(2, dim=-1, largest=False).values
            gaps.append((two[:, 1] - two[:, 0]) / two[:, 0].clamp(min=1e-30))
            codes.append(idx)
            r = r - table[idx]
        return codes, gaps

    def stages(self, pcm):
        """Every stage of encoding pcm [N] (float32)."""
        c, out = self.cfg, {}
        x = self.conv_stack(pcm.float(), out)
        out["conv_stack"] = x
        x = self.transformer(x.T.contiguous())
        out["transformer"] = x.T
        x = mimi_conv(x.T.contiguous(), self.w["downsample.conv.weight"], None, stride=2,
                      replicate=True)
        out["downsample"] = x
        n_sem = c["num_semantic_quantizers"]
        valid = c["valid"]
        codes, gaps = self.rvq("semantic", x, min(n_sem, valid))
        if valid > n_sem:
            ac, ag = self.rvq("acoustic", x, valid - n_sem)
            codes, gaps = codes + ac, gaps + ag
        n_frames = -(-pcm.shape[0] // c["encode_downsample_rate"])
        out["codes"] = torch.stack(codes, dim=0)[:, :n_frames]
        out["gap"] = torch.stack(gaps, dim=0)[:, :n_frames]
        # time-major: every stage [rows, channels]
        return {k: v.T.contiguous() for k, v in out.items()}

    def encode(self, pcm):
        return self.stages(pcm)["codes"]


# ---------------------------------------------------------------- test audio

def synth_audio(seconds, seed, rate):
    """Sine sweeps (log, 80 Hz -> rate/3), a second tone, and noise, peak ~0.6."""
    n = int(round(seconds * rate))
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(n, dtype=torch.float64) / rate
    f0, f1 = 80.0, rate / 3.0
    dur = max(seconds, 1e-3)
    phase = 2 * math.pi * f0 * dur / math.log(f1 / f0) * (torch.exp(t / dur * math.log(f1 / f0)) - 1)
    sweep = 0.35 * torch.sin(phase)
    tone = 0.15 * torch.sin(2 * math.pi * (220.0 + 40.0 * seed) * t)
    noise = 0.08 * torch.randn(n, generator=g, dtype=torch.float64)
    env = 0.6 + 0.4 * torch.sin(2 * math.pi * 1.3 * t)
    return ((sweep + tone) * env + noise).float()


def read_pcm(path):
    return torch.from_numpy(np.fromfile(path, dtype="<f4").copy())


# ---------------------------------------------------------------- CLI

def parse_args(argv):
    ap = argparse.ArgumentParser(description="Qwen3-TTS codec encoder reference (fp32 PyTorch)")
    ap.add_argument("--model", help="checkpoint dir (with speech_tokenizer/) or codec dir")
    ap.add_argument("--audio", help="raw little-endian f32 mono PCM at the codec's input rate")
    ap.add_argument("--out", help="golden .safetensors to write (time-major stages, codes I32)")
    ap.add_argument("--synth", type=float, metavar="SECONDS", help="make test audio")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rate", type=int, default=24000, help="sample rate of --synth")
    ap.add_argument("--write-audio", metavar="FILE", help="write the --synth audio to FILE")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default: all cores)")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads or os.cpu_count() or 1)
    if args.synth is not None:
        if not args.write_audio:
            sys.exit("--synth needs --write-audio")
        synth_audio(args.synth, args.seed, args.rate).numpy().astype("<f4").tofile(args.write_audio)
    if args.out:
        if not (args.model and args.audio):
            sys.exit("--out needs --model and --audio")
        enc = load_encoder(args.model)
        pcm = read_pcm(args.audio)
        with torch.no_grad():
            s = enc.stages(pcm)
        tensors = {k: (v.to(torch.int32) if k == "codes" else v.float()).contiguous()
                   for k, v in s.items()}
        st.save(args.out, tensors, {"format": "pt", "n_samples": str(pcm.shape[0])})
        gap = s["gap"]
        print(f"wrote {args.out}: {s['codes'].shape[0]} frames x {s['codes'].shape[1]} codes; "
              f"smallest relative gap {gap.min().item():.3g}")


if __name__ == "__main__":
    main()
