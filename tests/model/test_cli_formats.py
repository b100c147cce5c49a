"""`kztts synth` and `kztts decode` writing mp3, opus, aac and pcm (audio_enc) and changing
the speaking rate (--speed), on the tiny checkpoint, checked by independent decoders.

Dataflow: the tiny CustomVoice model speaks a sentence in exactly 20 frames (greedy, so
every run makes the same audio) -> `--format s16` (the reference samples, with the same
--speed) and each encoded format, to a file and to a pipe (`-o -`) -> mpg123, opusdec,
ffmpeg -> checked:
- pcm is byte for byte the s16 output, and the wav file's data too (one rounding);
- mp3 at --speed 1.5 decodes (mpg123) to the s16 output's length plus at most LAME's
  delay and padding (1105 + 3 * 576 samples), and that length is 20 frames / 1.5 within
  1 % and 20 ms; its audio matches the s16 output after aligning LAME's delay
  (correlation >= 0.9); opus (opusdec) and aac (ffmpeg) likewise, opus to the sample, aac
  within 3 * 1024 samples (correlation: aac >= 0.9, opus >= 0.8: the random model's audio
  is noise-like, which Opus keeps perceptually rather than as a waveform);
- the extension picks the format (.mp3 .opus .aac .pcm) without --format;
- `-o -` into a pipe streams mp3, opus, aac and pcm: the bytes equal the file's, and
  mpg123 and opusdec decode them from the pipe;
- `kztts decode --format mp3 --speed 2` of the synthesis's --dump-codes: half the length;
- --speed outside [0.25, 4] or not a number: exit 2, one line naming --speed, no file;
  flac to stdout is still refused.
"""
import argparse
import os
import subprocess
import tempfile

import numpy as np

from testlib import check, finish

TEXT = "Hello there, this is a test."
FRAMES = 20


def run(cmd, stdin=None):
    return subprocess.run(cmd, input=stdin, capture_output=True, timeout=300)


def synth(k, model, out, *extra):
    r = run([k, "synth", "-q", "-m", model, "-s", "ryan", "--greedy", "--frames", str(FRAMES),
             "-o", out, *extra, TEXT])
    check(r.returncode == 0, f"synth {extra} -o {out}: {r.stderr.decode().strip()}")
    return r


def s16(path):
    return np.fromfile(path, "<i2").astype(np.float64) / 32768


def decode_cmd(fmt, path):
    return {"mp3": ["mpg123", "-q", "-s", "-e", "f32", path],
            "opus": ["opusdec", "--quiet", "--rate", "24000", "--float", path, "-"],
            "aac": ["ffmpeg", "-v", "error", "-nostdin", "-i", path, "-f", "f32le", "-ac", "1",
                    "-ar", "24000", "-"]}[fmt]


def decoded(fmt, path):
    r = run(decode_cmd(fmt, path))
    check(r.returncode == 0 and r.stdout, f"{fmt}: {decode_cmd(fmt, path)[0]} refused "
          f"{path}: {r.stderr.decode()[:300]}")
    return np.frombuffer(r.stdout, "<f4").astype(np.float64)


def correlation(x, y, max_lag=3000):
    """The best normalized correlation of y[lag:] with x over lags 0..max_lag."""
    best = -1.0
    for lag in range(0, min(max_lag, len(y) - len(x)) + 1):
        seg = y[lag:lag + len(x)]
        den = np.linalg.norm(seg) * np.linalg.norm(x)
        best = max(best, float(np.dot(seg, x) / den) if den > 0 else -1.0)
    return best


def check_encoded(k, model, work, fmt, speed):
    name = f"{fmt} --speed {speed}"
    ref = os.path.join(work, f"ref{speed}.s16")
    synth(k, model, ref, "--speed", str(speed))
    x = s16(ref)
    per_frame = 1920
    want = FRAMES * per_frame / speed
    check(abs(len(x) - want) <= 0.01 * want + 480, f"{name}: s16 {len(x)} samples, want "
          f"{want:.0f}")
    path = os.path.join(work, f"out{speed}.{fmt}")
    synth(k, model, path, "--speed", str(speed))  # the extension names the format
    y = decoded(fmt, path)
    most = {"mp3": 1105 + 3 * 576, "opus": 0, "aac": 3 * 1024}[fmt]
    extra = len(y) - len(x)
    check(0 <= extra <= most, f"{name}: decoded {len(y)} samples for {len(x)} "
          f"(extra {extra}, allowed 0..{most})")
    c = correlation(x, y) if len(y) >= len(x) else -1
    least = 0.8 if fmt == "opus" else 0.9
    check(c >= least, f"{name}: correlation with the s16 output {c:.3f} (want >= {least})")
    # The same through a pipe: the same bytes, and the decoder reads them from the pipe.
    p = subprocess.Popen([k, "synth", "-q", "-m", model, "-s", "ryan", "--greedy", "--frames",
                          str(FRAMES), "--speed", str(speed), "--format", fmt, "-o", "-", TEXT],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    piped, err = p.communicate(timeout=300)
    check(p.returncode == 0 and piped == open(path, "rb").read(),
          f"{name} to a pipe: exit {p.returncode}, {len(piped)} bytes: {err.decode()}")
    if fmt in ("mp3", "opus"):
        r = run(decode_cmd(fmt, "-"), stdin=piped)
        check(r.returncode == 0 and len(r.stdout) // 4 == len(y),
              f"{name}: {decode_cmd(fmt, '-')[0]} from a pipe: {len(r.stdout) // 4} samples")
    print(f"ok   {name}: {len(x)} samples, decoded {len(y)} (+{extra}), correlation {c:.3f}, "
          f"{len(piped)} bytes piped", flush=True)


def check_pcm(k, model, work):
    ref, pcm, wav = (os.path.join(work, n) for n in ("a.s16", "a.pcm", "a.wav"))
    for out in (ref, pcm, wav):
        synth(k, model, out)
    a, b = open(ref, "rb").read(), open(pcm, "rb").read()
    check(len(a) == FRAMES * 1920 * 2 and a == b, f"pcm: {len(b)} bytes differ from s16's "
          f"{len(a)}")
    check(open(wav, "rb").read()[44:] == a, "wav: data differs from s16")
    r = run([k, "synth", "-q", "-m", model, "-s", "ryan", "--greedy", "--frames", str(FRAMES),
             "--format", "pcm", "-o", "-", TEXT])
    check(r.returncode == 0 and r.stdout == a, f"pcm to a pipe: {len(r.stdout)} bytes")
    print("ok   pcm == s16 == wav data, file and pipe", flush=True)


def check_decode(k, model, work):
    codes, ref = os.path.join(work, "codes.txt"), os.path.join(work, "codes.s16")
    synth(k, model, ref, "--dump-codes", codes)
    out = os.path.join(work, "decoded.mp3")
    r = run([k, "decode", "-q", "-m", model, "--codes", codes, "--format", "mp3", "--speed",
             "2", "-o", out])
    check(r.returncode == 0, f"decode --format mp3 --speed 2: {r.stderr.decode().strip()}")
    y = decoded("mp3", out)
    want = FRAMES * 1920 / 2
    check(abs(len(y) - want) <= 0.01 * want + 480 + 1105 + 3 * 576,
          f"decode --speed 2: {len(y)} samples, want {want:.0f}")
    print(f"ok   decode --format mp3 --speed 2: {len(y)} samples", flush=True)


def check_refusals(k, model, work):
    for bad in ("0.2", "4.5", "0", "-1", "fast", "nan", "inf"):
        d = tempfile.mkdtemp(dir=work)
        out = os.path.join(d, "x.mp3")
        r = run([k, "synth", "-q", "-m", model, "-s", "ryan", "--frames", "5", "--speed", bad,
                 "-o", out, TEXT])
        err = r.stderr.decode().strip()
        check(r.returncode == 2, f"--speed {bad}: exit {r.returncode}")
        check(len(err.splitlines()) == 1 and "--speed" in err, f"--speed {bad}: {err!r}")
        check(os.listdir(d) == [], f"--speed {bad}: left {os.listdir(d)}")
        print(f"ok   --speed {bad}: {err}", flush=True)
    r = run([k, "synth", "-q", "-m", model, "-s", "ryan", "--frames", "5", "--format", "flac",
             "-o", "-", TEXT])
    check(r.returncode == 2 and r.stdout == b"" and b"stdout" in r.stderr,
          f"flac to stdout: exit {r.returncode}, {r.stderr.decode().strip()}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kztts", required=True)
    ap.add_argument("--tiny", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.work) as work:
        check_pcm(args.kztts, args.tiny, work)
        check_encoded(args.kztts, args.tiny, work, "mp3", 1.5)
        check_encoded(args.kztts, args.tiny, work, "opus", 1.0)
        check_encoded(args.kztts, args.tiny, work, "aac", 0.5)
        check_decode(args.kztts, args.tiny, work)
        check_refusals(args.kztts, args.tiny, work)
    finish("test_cli_formats")


if __name__ == "__main__":
    main()
