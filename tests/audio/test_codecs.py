"""The streaming encoders (tools/kztts/audio_enc.c) and the speed change (speed.c)
checked by independent decoders.

Dataflow: a 440 Hz sine plus a 200-3000 Hz chirp (2 s, numpy) -> raw float32 file ->
enc_tool (audio_enc fed in 1920-sample chunks, as a synthesis streams) -> one file per
format -> decoded by ffmpeg and by each format's own tool (sox for wav, pcm and flac;
flac; mpg123; opusdec; ffprobe for aac's stream facts) -> float samples, checked:
- the decoder accepts the stream (exit 0, audio out, the right codec, rate and channels);
- the length, per codec: wav, pcm and flac exactly the input; opus exactly (its granule
  positions trim the pre-skip and the padding); mp3 the input plus LAME's delay and the
  last frame's padding, at most 1105 + 3 * 576 samples (a streamed MP3 carries no
  gapless tag); aac the input rounded up to 1024-sample frames plus the two silent
  frames that flush the encoder, at most 3 * 1024 samples more (ADTS carries no length);
- the content, after aligning the codec delay (the lag in [0, 3000] samples with the
  least error): wav, pcm and flac hold exactly the input rounded to 16 bits as
  `kztts synth --format s16` rounds it (the float32 product with 32767, clipped, rint);
  the lossy codecs an SNR of at least mp3 15 dB, opus 25 dB, aac 30 dB;
- streaming: the bytes the encoder had delivered when audio_enc_finish was called decode
  to all of the audio but the codec's hold-back: nothing for wav and pcm, one 4096-sample
  block for flac, 4000 samples for mp3, opus and aac;
- at 16 kHz (the remapped checkpoint's rate) the same for the formats that resample or
  frame by rate;
- speed 0.5, 2 and 4 through mp3 and opus: the decoded length is the input's / speed
  within 1 % and 20 ms (plus the mp3 tolerance) and a 440 Hz sine keeps its pitch within
  2 % (strongest FFT bin of the middle, zero-padded to 0.5 Hz resolution).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model"))
from testlib import check, finish  # noqa: E402

SNR_DB = {"mp3": 15, "opus": 25, "aac": 30}
HOLD_BACK = {"wav": 0, "pcm": 0, "flac": 4096, "mp3": 4000, "opus": 4000, "aac": 4000}


def extra_allowed(fmt):
    """(least, most) decoded samples beyond the input."""
    return {"mp3": (0, 1105 + 3 * 576), "aac": (0, 3 * 1024)}.get(fmt, (0, 0))


def run(cmd):
    return subprocess.run(cmd, capture_output=True, timeout=120)


def raw_f32(data):
    return np.frombuffer(data, "<f4").astype(np.float64)


def raw_s16(data):
    """The integer sample values (lossless formats are compared exactly)."""
    return np.frombuffer(data, "<i2").astype(np.float64)


def decoders(fmt, path, rate):
    """(name, argv, parse) for every decoder of fmt; each writes raw samples to stdout:
    16-bit integers for the lossless formats, floats for the lossy ones."""
    pcm_in = ["-f", "s16le", "-ar", str(rate), "-ac", "1"] if fmt == "pcm" else []
    lossless = fmt not in SNR_DB
    ff = ("ffmpeg", ["ffmpeg", "-v", "error", "-nostdin"] + pcm_in +
          ["-i", path, "-f", "s16le" if lossless else "f32le", "-ac", "1", "-ar", str(rate),
           "-"], raw_s16 if lossless else raw_f32)
    sox_in = {"pcm": ["-t", "raw", "-r", str(rate), "-e", "signed", "-b", "16", "-c", "1"],
              "wav": ["-t", "wav"], "flac": ["-t", "flac"]}
    out = [ff]
    if fmt in sox_in:
        out.append(("sox", ["sox"] + sox_in[fmt] + [path, "-t", "raw", "-e", "signed", "-b",
                                                    "16", "-L", "-"], raw_s16))
    if fmt == "flac":
        out.append(("flac", ["flac", "-d", "-c", "-s", "--force-raw-format", "--endian=little",
                             "--sign=signed", path], raw_s16))
    if fmt == "mp3":
        out.append(("mpg123", ["mpg123", "-q", "-s", "-e", "f32", path], raw_f32))
    if fmt == "opus":
        out.append(("opusdec", ["opusdec", "--quiet", "--rate", str(rate), "--float", path, "-"],
                    raw_f32))
    return out


def best_alignment(x, y, max_lag=3000):
    """(snr_db, lag): y[lag:] against x over x's length, the lag with the least error."""
    best = (-1e9, 0)
    n = len(x)
    # Candidate lags from the cross-correlation, then the exact error at the best few.
    m = min(len(y), n + max_lag)
    size = 1 << (n + m).bit_length()
    corr = np.fft.irfft(np.fft.rfft(y[:m], size) * np.conj(np.fft.rfft(x, size)), size)
    for lag in np.argsort(-corr[:max_lag + 1])[:5]:
        k = min(n, len(y) - lag)
        if k <= 0:
            continue
        err = y[lag:lag + k] - x[:k]
        # Audio missing at the end counts as error.
        noise = np.sum(err ** 2) + np.sum(x[k:] ** 2)
        snr = 10 * np.log10(np.sum(x ** 2) / max(noise, 1e-30))
        best = max(best, (snr, int(lag)))
    return best


def stream_facts(path):
    r = run(["ffprobe", "-v", "error", "-show_entries",
             "stream=codec_name,profile,sample_rate,channels", "-of", "default=nw=1", path])
    return dict(line.split("=", 1) for line in r.stdout.decode().split("\n") if "=" in line)


def encode(tool, fmt, rate, src, dst, speed=1.0):
    r = run([tool, fmt, str(rate), src, dst, str(speed)])
    check(r.returncode == 0, f"{fmt} {rate} Hz: enc_tool: {r.stderr.decode().strip()}")
    words = r.stdout.decode().split()
    return dict(zip(words[::2], map(int, words[1::2]))) if r.returncode == 0 else None


def check_format(tool, work, fmt, rate, x):
    """Every decoder of fmt on the encoded signal x."""
    name = f"{fmt} {rate} Hz"
    src, path = os.path.join(work, f"in{rate}.f32"), os.path.join(work, f"out{rate}.{fmt}")
    x.astype("<f4").tofile(src)
    facts = encode(tool, fmt, rate, src, path)
    if not facts:
        return
    # The product in float32 as pcm16_from_float computes it (in double some ties move).
    x32 = x.astype(np.float32)
    want16 = np.rint(np.clip(x32 * np.float32(32767), -32768, 32767)).astype(np.float64)
    lo, hi = extra_allowed(fmt)
    for dec, argv, parse in decoders(fmt, path, rate):
        r = run(argv)
        y = parse(r.stdout) if r.returncode == 0 else np.zeros(0)
        check(r.returncode == 0 and len(y) > 0,
              f"{name}: {dec} refused it: {r.stderr.decode().strip()[:300]}")
        if len(y) == 0:
            continue
        extra = len(y) - len(x)
        check(lo <= extra <= hi, f"{name}: {dec}: {len(y)} samples for {len(x)} (extra {extra}, "
              f"allowed {lo}..{hi})")
        if fmt in SNR_DB:
            snr, lag = best_alignment(x, y)
            check(snr >= SNR_DB[fmt], f"{name}: {dec}: SNR {snr:.1f} dB at lag {lag} "
                  f"(want >= {SNR_DB[fmt]})")
        else:
            same = len(y) == len(x) and np.array_equal(y, want16)
            check(same, f"{name}: {dec}: samples differ from the 16-bit rounding")
            snr, lag = float("inf") if same else 0.0, 0
        print(f"ok   {name}: {dec}: {len(y)} samples (+{extra}), SNR {snr:.1f} dB, "
              f"lag {lag}", flush=True)
    if fmt in ("mp3", "aac", "flac"):
        f = stream_facts(path)
        want_codec = {"mp3": "mp3", "aac": "aac", "flac": "flac"}[fmt]
        check(f.get("codec_name") == want_codec and f.get("sample_rate") == str(rate) and
              f.get("channels") == "1", f"{name}: ffprobe says {f}")
        if fmt == "aac":
            check(f.get("profile") == "LC", f"{name}: profile {f.get('profile')}")
    if fmt == "opus":
        r = run(["opusinfo", path])
        check(r.returncode == 0 and f"Original sample rate: {rate} Hz" in r.stdout.decode(),
              f"{name}: opusinfo: {r.stdout.decode()[-300:]} {r.stderr.decode()[-200:]}")
    check_prefix(work, fmt, rate, x, path, facts)


def check_prefix(work, fmt, rate, x, path, facts):
    """The bytes out before audio_enc_finish decode to all but the codec's hold-back."""
    name = f"{fmt} {rate} Hz"
    prefix = os.path.join(work, f"prefix{rate}.{fmt}")
    with open(path, "rb") as f:
        data = f.read()
    check(0 < facts["before_finish"] <= len(data), f"{name}: {facts}")
    with open(prefix, "wb") as f:
        f.write(data[:facts["before_finish"]])
    _, argv, parse = decoders(fmt, prefix, rate)[0]
    y = parse(run(argv).stdout)
    lag = best_alignment(x, y)[1] if fmt in SNR_DB else 0
    got = len(y) - lag
    check(got >= len(x) - HOLD_BACK[fmt], f"{name}: before finish {got} of {len(x)} samples "
          f"decoded (hold-back allowed {HOLD_BACK[fmt]})")
    print(f"ok   {name}: before finish: {got} of {len(x)} samples", flush=True)


def peak_hz(y, rate):
    mid = y[len(y) // 4: 3 * len(y) // 4]
    spec = np.abs(np.fft.rfft(mid * np.hanning(len(mid)), 2 * rate))  # 0.5 Hz bins
    return np.argmax(spec) * rate / (2 * rate)


def check_speed(tool, work, rate):
    n = 3 * rate // 2
    x = 0.5 * np.sin(2 * np.pi * 440 * np.arange(n) / rate)
    src = os.path.join(work, "sine.f32")
    x.astype("<f4").tofile(src)
    for speed in (0.5, 2.0, 4.0):
        for fmt, dec in (("mp3", "mpg123"), ("opus", "opusdec")):
            name = f"speed {speed} {fmt}"
            path = os.path.join(work, f"speed{speed}.{fmt}")
            if not encode(tool, fmt, rate, src, path, speed):
                continue
            _, argv, parse = [d for d in decoders(fmt, path, rate) if d[0] == dec][0]
            y = parse(run(argv).stdout)
            want = n / speed
            slack = 0.01 * want + 0.02 * rate + extra_allowed(fmt)[1]
            check(abs(len(y) - want) <= slack, f"{name}: {len(y)} samples, want {want:.0f} "
                  f"+- {slack:.0f}")
            hz = peak_hz(y, rate) if len(y) > rate // 4 else 0
            check(abs(hz - 440) <= 0.02 * 440, f"{name}: pitch {hz:.1f} Hz, want 440")
            print(f"ok   {name}: {len(y)} samples (want {want:.0f}), pitch {hz:.1f} Hz",
                  flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--enc-tool", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kztts_codecs_") as work:
        for rate, formats in ((24000, ("wav", "pcm", "flac", "mp3", "opus", "aac")),
                              (16000, ("flac", "mp3", "opus", "aac"))):
            t = np.arange(2 * rate) / rate
            x = 0.4 * np.sin(2 * np.pi * 440 * t) + \
                0.2 * np.sin(2 * np.pi * (200 * t + (3000 - 200) / 4 * t * t))
            x = x.astype(np.float32).astype(np.float64)
            for fmt in formats:
                check_format(args.enc_tool, work, fmt, rate, x)
        check_speed(args.enc_tool, work, 24000)
    finish("test_codecs")


if __name__ == "__main__":
    main()
