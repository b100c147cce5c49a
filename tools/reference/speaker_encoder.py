#!/usr/bin/python3
"""PyTorch fp32 reference of the Base models' speaker encoder (spec section 5).

Mirrors `mel_spectrogram` and `Qwen3TTSSpeakerEncoder` (ECAPA-TDNN) in the official
qwen_tts/core/models/modeling_qwen3_tts.py, and the arguments
`Qwen3TTSForConditionalGeneration.extract_speaker_embedding` passes to them. It
produces the goldens that src/model/mel.c and src/model/speaker_encoder.c are tested
against. Everything runs in float32 (the official casts the mel to the model dtype,
bf16 in released runs, before the network; this reference does not).

Dataflow (network channels-first [C, T] as upstream; golden name on the right):

    pcm [N] f32, 24 kHz
    reflect pad 384 each side, frames of 1024 every 256 samples, periodic Hann,
    |rfft| = sqrt(re^2 + im^2 + 1e-9), Slaney mel [128, 513] . |X|,
    ln(max(., 1e-5))                                  -> [F, 128]          "mel"
    blocks.0: TDNN k5 (conv + ReLU)                    -> [C0, F]           "block.0"
    blocks.1..3: SE-Res2Net, dilation 2, 3, 4          -> [C, F] each       "block.1".."block.3"
    mfa: TDNN 1x1 over concat(block.1..3)              -> [C4, F]           "mfa"
    asp: attentive statistics pooling                  -> [2 C4]            "pooled"
    fc: 1x1 conv                                       -> [enc_dim]         "xvector"

Traps, all taken from the official code:
  - every conv is Conv1d(padding="same", padding_mode="reflect"): total pad d(k-1),
    left half (rounded down) on the left, the rest on the right, mirrored without
    repeating the edge; the SE and pooling 1x1 convs pad nothing.
  - the mel filterbank is librosa's filters.mel(sr, n_fft, n_mels, fmin, fmax) with the
    Slaney scale and area norm: ramps in float64, each row stored into float32, then
    multiplied in place by the float64 norm (a second rounding to float32).
  - torch.hann_window is periodic (w[n] = 0.5 - 0.5 cos(2 pi n / N)); torch.stft runs
    with center=False after the explicit reflect pad of (n_fft - hop) / 2.
  - pooling statistics: mean = sum(x * (1/T)), std = sqrt(clamp(sum(w (x - mean)^2),
    1e-12)): the weight multiplies the squared deviation; softmax over time per channel.

Goldens are written TIME-MAJOR: "mel", "block.*" and "mfa" as [F, C] (the transpose of
upstream's [C, F]); "pooled" [2 C4], "xvector" [enc_dim].

Command line:
    speaker_encoder.py --model DIR --audio IN.(wav|f32) --out GOLDEN.safetensors [--stages]
    speaker_encoder.py --random-audio N --seed S --write-audio OUT.f32
    speaker_encoder.py --model DIR --self-test
Audio: a .wav file (16-bit PCM or 32-bit float, mono, read with the wave module; the
sample rate must be the encoder's) or raw little-endian float32 samples.

Python API: load_encoder(dir) -> SpeakerEncoder; enc.stages(pcm) -> dict of stages;
mel_spectrogram(pcm) -> [F, 128]; mel_filterbank(...) -> np.float32 [n_mels, n_fft/2+1].
"""

import argparse
import json
import math
import os
import struct
import sys
import wave

import numpy as np
import torch
import torch.nn.functional as F

try:
    from . import safetensors_io as st
except ImportError:
    import safetensors_io as st

# The arguments extract_speaker_embedding passes to mel_spectrogram (fixed in the code,
# not read from any config).
MEL = dict(n_fft=1024, num_mels=128, sampling_rate=24000, hop_size=256, win_size=1024,
           fmin=0, fmax=12000)

# Qwen3TTSSpeakerEncoderConfig class defaults; config.json usually holds only enc_dim
# and sample_rate.
ENCODER_DEFAULTS = {
    "mel_dim": 128, "enc_dim": 1024, "enc_channels": [512, 512, 512, 512, 1536],
    "enc_kernel_sizes": [5, 3, 3, 3, 1], "enc_dilations": [1, 2, 3, 4, 1],
    "enc_attention_channels": 128, "enc_res2net_scale": 8, "enc_se_channels": 128,
    "sample_rate": 24000,
}


# ---------------------------------------------------------------- mel spectrogram

def hz_to_mel(f):
    """librosa.hz_to_mel(htk=False) on one float64 value."""
    f_sp = 200.0 / 3
    mel = (f - 0.0) / f_sp
    min_log_hz = 1000.0
    min_log_mel = (min_log_hz - 0.0) / f_sp
    logstep = math.log(6.4) / 27.0
    if f >= min_log_hz:
        mel = min_log_mel + math.log(f / min_log_hz) / logstep
    return mel


def mel_to_hz(mels):
    """librosa.mel_to_hz(htk=False) on a float64 array."""
    f_sp = 200.0 / 3
    freqs = 0.0 + f_sp * mels
    min_log_hz = 1000.0
    min_log_mel = (min_log_hz - 0.0) / f_sp
    logstep = np.log(6.4) / 27.0
    log_t = mels >= min_log_mel
    freqs[log_t] = min_log_hz * np.exp(logstep * (mels[log_t] - min_log_mel))
    return freqs


def mel_filterbank(sr, n_fft, n_mels, fmin, fmax):
    """librosa.filters.mel(sr, n_fft, n_mels, fmin, fmax), htk=False, norm='slaney',
    dtype float32: [n_mels, 1 + n_fft // 2]."""
    weights = np.zeros((n_mels, 1 + n_fft // 2), dtype=np.float32)
    fftfreqs = np.fft.rfftfreq(n=n_fft, d=1.0 / sr)
    mels = np.linspace(hz_to_mel(float(fmin)), hz_to_mel(float(fmax)), n_mels + 2)
    mel_f = mel_to_hz(mels)
    fdiff = np.diff(mel_f)
    ramps = np.subtract.outer(mel_f, fftfreqs)
    for i in range(n_mels):
        lower = -ramps[i] / fdiff[i]
        upper = ramps[i + 2] / fdiff[i + 1]
        weights[i] = np.maximum(0, np.minimum(lower, upper))
    enorm = 2.0 / (mel_f[2: n_mels + 2] - mel_f[:n_mels])
    weights *= enorm[:, np.newaxis]
    return weights


def mel_spectrogram(pcm):
    """Log-mel spectrogram of a 1-D float32 waveform as extract_speaker_embedding computes
    it: [F, 128] time-major, F = (N + 2*384 - 1024) // 256 + 1."""
    n_fft, hop, win = MEL["n_fft"], MEL["hop_size"], MEL["win_size"]
    y = pcm.to(torch.float32)[None]
    basis = torch.from_numpy(mel_filterbank(MEL["sampling_rate"], n_fft, MEL["num_mels"],
                                            MEL["fmin"], MEL["fmax"])).float()
    window = torch.hann_window(win)
    pad = (n_fft - hop) // 2
    y = F.pad(y[:, None], (pad, pad), mode="reflect")[:, 0]
    spec = torch.stft(y, n_fft, hop_length=hop, win_length=win, window=window, center=False,
                      pad_mode="reflect", normalized=False, onesided=True, return_complex=True)
    mag = torch.sqrt(torch.view_as_real(spec).pow(2).sum(-1) + 1e-9)
    mel = torch.matmul(basis, mag)
    return torch.log(torch.clamp(mel, min=1e-5))[0].T.contiguous()


# ---------------------------------------------------------------- network

def same_conv(x, w, b, dilation=1):
    """Conv1d(padding='same', padding_mode='reflect') over x [C, T]: [C_out, T]."""
    total = dilation * (w.shape[-1] - 1)
    if total:
        x = F.pad(x[None], (total // 2, total - total // 2), mode="reflect")[0]
    return F.conv1d(x[None], w, b, dilation=dilation)[0]


def tdnn(x, p, dilation=1):
    return torch.relu(same_conv(x, p["conv.weight"], p["conv.bias"], dilation))


def sub(weights, prefix):
    """The tensors under prefix, named without it."""
    return {k[len(prefix):]: v for k, v in weights.items() if k.startswith(prefix)}


def weighted_stats(x, w):
    """Per-channel sum_t w x and sqrt(clamp(sum_t w (x - mean)^2, 1e-12)); x, w [C, T]."""
    mean = (w * x).sum(1)
    std = torch.sqrt((w * (x - mean[:, None]).pow(2)).sum(1).clamp(1e-12))
    return mean, std


class SpeakerEncoder:
    """Qwen3TTSSpeakerEncoder with its weights (fp32) and config."""

    def __init__(self, cfg, weights):
        self.cfg = dict(ENCODER_DEFAULTS, **cfg)
        self.w = weights
        n = len(self.cfg["enc_channels"])
        if n != len(self.cfg["enc_kernel_sizes"]) or n != len(self.cfg["enc_dilations"]):
            raise ValueError("enc_channels, enc_kernel_sizes and enc_dilations differ in length")

    def se_res2net(self, x, i):
        p = sub(self.w, f"blocks.{i}.")
        scale, d = self.cfg["enc_res2net_scale"], self.cfg["enc_dilations"][i]
        u = tdnn(x, sub(p, "tdnn1."))
        outs = []
        for j, part in enumerate(torch.chunk(u, scale, dim=0)):
            if j == 0:
                o = part
            elif j == 1:
                o = tdnn(part, sub(p, f"res2net_block.blocks.{j - 1}."), d)
            else:
                o = tdnn(part + o, sub(p, f"res2net_block.blocks.{j - 1}."), d)
            outs.append(o)
        u = tdnn(torch.cat(outs, 0), sub(p, "tdnn2."))
        m = u.mean(dim=1, keepdim=True)
        m = torch.relu(F.conv1d(m[None], p["se_block.conv1.weight"], p["se_block.conv1.bias"]))
        g = torch.sigmoid(F.conv1d(m, p["se_block.conv2.weight"], p["se_block.conv2.bias"]))[0]
        return u * g + x

    def pool(self, x):
        """Attentive statistics pooling of x [C, T] -> [2C]."""
        p = sub(self.w, "asp.")
        t = x.shape[1]
        uniform = torch.full((1, t), 1.0) / float(t)  # mask / total of the official code
        mean, std = weighted_stats(x, uniform)
        att = torch.cat([x, mean[:, None].expand(-1, t), std[:, None].expand(-1, t)], 0)
        att = torch.tanh(tdnn(att, sub(p, "tdnn.")))
        att = F.conv1d(att[None], p["conv.weight"], p["conv.bias"])[0]
        att = torch.softmax(att, dim=1)
        mean, std = weighted_stats(x, att)
        return torch.cat([mean, std], 0)

    def stages(self, pcm):
        """Every stage of one waveform (1-D float32 tensor), time-major."""
        out = {"mel": mel_spectrogram(pcm)}
        x = out["mel"].T
        n_blocks = len(self.cfg["enc_channels"]) - 2
        x = tdnn(x, sub(self.w, "blocks.0."), self.cfg["enc_dilations"][0])
        out["block.0"] = x.T
        feats = []
        for i in range(1, n_blocks + 1):
            x = self.se_res2net(x, i)
            feats.append(x)
            out[f"block.{i}"] = x.T
        x = tdnn(torch.cat(feats, 0), sub(self.w, "mfa."), self.cfg["enc_dilations"][-1])
        out["mfa"] = x.T
        pooled = self.pool(x)
        out["pooled"] = pooled
        out["xvector"] = F.conv1d(pooled[None, :, None], self.w["fc.weight"],
                                  self.w["fc.bias"])[0, :, 0]
        return {k: v.contiguous() for k, v in out.items()}

    def xvector(self, pcm):
        return self.stages(pcm)["xvector"]


def load_encoder(path):
    """SpeakerEncoder of a Base checkpoint directory (speaker_encoder.* upcast to fp32)."""
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f).get("speaker_encoder_config", {})
    raw = st.load(os.path.join(path, "model.safetensors"), prefix="speaker_encoder.")
    if not raw:
        raise ValueError(f"{path}: no speaker_encoder tensors (not a Base checkpoint)")
    weights = {k[len("speaker_encoder."):]: v.float() for k, v in raw.items()}
    return SpeakerEncoder(cfg, weights)


# ---------------------------------------------------------------- audio files

def read_audio(path):
    """A .wav file (mono, 16-bit PCM or 32-bit float) or raw float32 samples -> (tensor,
    sample rate or None)."""
    if path.endswith(".wav"):
        with open(path, "rb") as f:
            data = f.read()
        fmt = struct.unpack_from("<H", data, 20)[0] if data[:4] == b"RIFF" else 0
        if fmt == 3:  # IEEE float: the wave module reads only PCM
            return read_float_wav(data)
        with wave.open(path, "rb") as w:
            if w.getnchannels() != 1 or w.getsampwidth() != 2:
                raise ValueError(f"{path}: only mono 16-bit PCM or float WAV")
            pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
            return torch.from_numpy(pcm.astype(np.float32) / 32768.0), w.getframerate()
    return torch.from_numpy(np.fromfile(path, dtype="<f4").copy()), None


def read_float_wav(data):
    pos, rate, pcm = 12, None, None
    while pos + 8 <= len(data):
        cid, size = data[pos:pos + 4], struct.unpack_from("<I", data, pos + 4)[0]
        body = data[pos + 8: pos + 8 + size]
        if cid == b"fmt ":
            channels, rate = struct.unpack_from("<HI", body, 2)
            if channels != 1 or struct.unpack_from("<H", body, 14)[0] != 32:
                raise ValueError("only mono 32-bit float WAV")
        elif cid == b"data":
            pcm = np.frombuffer(body, dtype="<f4").copy()
        pos += 8 + size + (size & 1)
    if pcm is None or rate is None:
        raise ValueError("WAV without fmt or data chunk")
    return torch.from_numpy(pcm), rate


def random_audio(n, seed):
    """A test waveform: three tones with a slow tremolo and noise, peak < 0.9."""
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(n, dtype=torch.float64) / 24000.0
    f0 = 90.0 + 200.0 * torch.rand(1, generator=g, dtype=torch.float64).item()
    y = torch.zeros(n, dtype=torch.float64)
    for h, a in ((1, 0.4), (2, 0.2), (5, 0.1)):
        y += a * torch.sin(2 * math.pi * f0 * h * t)
    y *= 0.6 + 0.4 * torch.sin(2 * math.pi * 3.0 * t)
    y += 0.05 * torch.randn(n, generator=g, dtype=torch.float64)
    return y.clamp(-0.9, 0.9).to(torch.float32)


# ---------------------------------------------------------------- self-test

def self_test(enc, seed):
    """Checks the hand-written pieces against torch's own modules."""
    passed = failed = 0

    def check(name, ok):
        nonlocal passed, failed
        print(("PASS " if ok else "FAIL ") + name)
        passed, failed = passed + bool(ok), failed + (not ok)

    g = torch.Generator().manual_seed(seed)
    for k, d in ((5, 1), (3, 2), (3, 4), (1, 1)):
        conv = torch.nn.Conv1d(6, 5, k, dilation=d, padding="same", padding_mode="reflect")
        x = torch.randn(6, 11, generator=g)
        with torch.no_grad():
            want = conv(x[None])[0]
        check(f"reflect same conv k{k} d{d}", torch.equal(same_conv(x, conv.weight.data,
                                                                     conv.bias.data, d), want))
    fb = mel_filterbank(24000, 1024, 128, 0, 12000)
    # Slaney area norm: every triangle's area is 1 in Hz (up to the bins' sampling).
    area = fb.astype(np.float64).sum(1) * (24000 / 1024)
    check("filterbank shape and row areas ~ 1", fb.shape == (128, 513)
          and np.all(np.abs(area - 1.0) < 0.1))
    pcm = random_audio(24000 + 77, seed)
    mel = mel_spectrogram(pcm)
    frames = (pcm.numel() + 768 - 1024) // 256 + 1
    check("mel frames", tuple(mel.shape) == (frames, 128))
    # One frame by hand in float64: window, DFT, magnitude, filterbank, log.
    f = 7
    padded = F.pad(pcm.double()[None, None], (384, 384), mode="reflect")[0, 0]
    n = torch.arange(1024, dtype=torch.float64)
    frame = padded[256 * f: 256 * f + 1024] * (0.5 - 0.5 * torch.cos(2 * math.pi * n / 1024))
    spec = torch.fft.rfft(frame)
    mag = torch.sqrt(spec.real ** 2 + spec.imag ** 2 + 1e-9)
    want = torch.log(torch.clamp(torch.from_numpy(fb).double() @ mag, min=1e-5))
    check("mel frame vs float64 DFT", float((mel[f].double() - want).abs().max()) < 1e-4)
    s = enc.stages(pcm)
    check("x-vector finite and sized", s["xvector"].numel() == enc.cfg["enc_dim"]
          and bool(torch.isfinite(s["xvector"]).all()))
    # Pooling with uniform attention equals plain mean / population std.
    x = torch.randn(4, 9, generator=g)
    mean, std = weighted_stats(x, torch.full((1, 9), 1.0 / 9))
    check("weighted stats", torch.allclose(mean, x.mean(1), atol=1e-6)
          and torch.allclose(std, x.std(1, unbiased=False), atol=1e-6))
    print(f"{passed} passed, {failed} failed")
    return failed == 0


# ---------------------------------------------------------------- command line

def main():
    ap = argparse.ArgumentParser(description="Qwen3-TTS speaker encoder reference (fp32)")
    ap.add_argument("--model", help="Base checkpoint directory")
    ap.add_argument("--audio", help="input: .wav (mono) or raw float32 samples at 24 kHz")
    ap.add_argument("--out", help="golden .safetensors to write")
    ap.add_argument("--stages", action="store_true",
                    help="also write block.0..3, mfa and pooled (default: mel and xvector)")
    ap.add_argument("--random-audio", type=int, metavar="N", help="make N samples of test audio")
    ap.add_argument("--write-audio", metavar="FILE", help="write --random-audio as raw float32")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default: all)")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.random_audio is not None:
        if not a.write_audio:
            ap.error("--random-audio needs --write-audio")
        random_audio(a.random_audio, a.seed).numpy().astype("<f4").tofile(a.write_audio)
        return 0
    if not a.model:
        ap.error("--model is required")
    enc = load_encoder(a.model)
    if a.self_test:
        return 0 if self_test(enc, a.seed) else 1
    if not a.audio or not a.out:
        ap.error("--audio and --out are required")
    pcm, rate = read_audio(a.audio)
    if rate is not None and rate != enc.cfg["sample_rate"]:
        ap.error(f"{a.audio}: {rate} Hz; the encoder takes {enc.cfg['sample_rate']} Hz")
    with torch.no_grad():
        s = enc.stages(pcm)
    keep = s if a.stages else {k: s[k] for k in ("mel", "xvector")}
    st.save(a.out, keep, metadata={"n_samples": str(pcm.numel()),
                                   "n_frames": str(s["mel"].shape[0])})
    return 0


if __name__ == "__main__":
    sys.exit(main())
