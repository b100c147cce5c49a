"""`kztts voice info`, `kztts voice create` and `kztts encode` as a user runs them: voice
files written by tools/reference/voice_file.py, what the CLI says about them, and the
errors of bad files, models that cannot clone and bad command lines.

Checks: `voice info` prints every field of a Python-written ICL and x-vector-only voice;
with -m it says the voice fits the tiny Base checkpoint whose fingerprint Python computed
(so C and Python agree on the fingerprint), and refuses with one line naming both values a
voice of another seed's Base checkpoint, of the 1.7B-style size, with too many codebooks,
with a code beyond the codebook, or for a CustomVoice model, and says a voice of the
checkpoint fits its bf16 and q8_0 GGUFs (the same fingerprint); damaged, truncated and
newer-format files exit 1 with one line; `voice create` and `encode` on a CustomVoice model
exit 1 with one line; missing or conflicting options exit 2 before any model is loaded;
no command that fails leaves a file (or a temporary one) in the output folder.
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np

from testlib import check, expect_refused, finish

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
from reference import voice_file as vf  # noqa: E402

TEXT = "H\u00e9llo, this is the reference."


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def make_checkpoint(source, out, *extra):
    subprocess.run([sys.executable, os.path.join(source, "tools", "make_checkpoint.py"),
                    "--preset", "tiny", "--out", out, *extra], check=True,
                   capture_output=True)


def expect_usage_error(name, r, needle):
    err = r.stderr.strip()
    check(r.returncode == 2, f"{name}: exit {r.returncode} (want 2), stderr {err!r}")
    check(len(err.splitlines()) == 1 and needle in err, f"{name}: stderr {err!r} lacks {needle!r}")
    print(f"ok   {name}: {err}", flush=True)


def nothing_left(name, folder):
    left = os.listdir(folder)
    check(not left, f"{name}: files left in the output folder: {left}")


def info_lines(kz, path, *extra):
    r = run([kz, "voice", "info", path, *extra])
    return r, r.stdout.splitlines()


def test_info(kz, base, cv, work):
    fp = vf.fingerprint(base)
    check(fp != 0, "the tiny Base checkpoint has a fingerprint")
    check(vf.fingerprint(cv) == 0, "a CustomVoice checkpoint has none (no speaker encoder)")
    rng = np.random.default_rng(7)
    xv = rng.standard_normal(32).astype(np.float32)
    codes = rng.integers(0, 2048, size=(5, 16))
    icl = os.path.join(work, "icl.kzvoice")
    vf.write(icl, xv, fp, 3.25, codes, TEXT)
    r, lines = info_lines(kz, icl)
    check(r.returncode == 0, f"voice info: {r.stderr}")
    want = [f"file: {icl}", "format version: 1",
            "kind: ICL (x-vector, reference codes and transcript)", "model type: base",
            "x-vector: 32 values", "reference: 3.25 s", "reference codes: 5 frames x 16 codebooks",
            f'transcript: "{TEXT}"', f"fingerprint: {fp:016x}"]
    check(lines == want, f"voice info printed {lines}, want {want}")
    r, lines = info_lines(kz, icl, "-m", base)
    check(r.returncode == 0 and lines[-1] == f"model: fits {base}",
          f"voice info -m base: exit {r.returncode}, {lines[-1:]}, {r.stderr}")

    xonly = os.path.join(work, "xvector.kzvoice")
    vf.write(xonly, xv, fp, 2.0)
    r, lines = info_lines(kz, xonly, "-m", base)
    check(r.returncode == 0 and "kind: x-vector only" in lines and 'transcript: ""' in lines
          and lines[-1] == f"model: fits {base}", f"x-vector-only info: {lines} {r.stderr}")
    back = vf.read(xonly)
    check(back["icl"] is False and np.array_equal(back["xvector"], xv),
          "the Python reader reads back the x-vector")
    return fp, xv, codes


def test_mismatches(kz, source, base, cv, work, fp, xv, codes):
    other = os.path.join(work, "base_seed1")
    big = os.path.join(work, "base_1b7")
    make_checkpoint(source, other, "--variant", "base", "--seed", "1")
    make_checkpoint(source, big, "--variant", "base", "--size", "1b7")
    fp_other = vf.fingerprint(other)
    cases = [
        ("another seed", dict(xvector=xv, fp=fp_other, codes=codes),
         ["voice made for another model", f"{fp_other:016x}", f"{fp:016x}", "fingerprint"]),
        ("1.7B-style x-vector", dict(xvector=np.zeros(64), fp=vf.fingerprint(big), codes=codes),
         ["x-vector has 64 values", "hidden_size is 32"]),
        ("8 codebooks", dict(xvector=xv, fp=fp, codes=codes[:, :8]),
         ["codes have 8 codebooks", "has 16 code groups"]),
        ("code beyond the codebook", dict(xvector=xv, fp=fp, codes=np.full((2, 16), 2048)),
         ["frame 0, codebook 0: code 2048", "codebook size 2048"]),
        ("24 kHz vs 16 kHz", dict(xvector=xv, fp=fp, codes=codes, sample_rate=16000),
         ["taken at 16000 Hz", "takes 24000 Hz"]),
    ]
    for name, c, needles in cases:
        path = os.path.join(work, "mismatch.kzvoice")
        vf.write(path, c["xvector"], c["fp"], 1.5, c["codes"], TEXT,
                 sample_rate=c.get("sample_rate", 24000))
        r = run([kz, "voice", "info", path, "-m", base])
        err = r.stderr.strip()
        check(r.returncode == 2 and len(err.splitlines()) == 1, f"{name}: exit {r.returncode}, {err!r}")
        for n in needles:
            check(n in err, f"{name}: {err!r} lacks {n!r}")
        print(f"ok   {name}: {err}", flush=True)
    path = os.path.join(work, "icl.kzvoice")
    r = run([kz, "voice", "info", path, "-m", cv])
    check(r.returncode == 2 and "the voice is for a base model, this is a custom_voice model"
          in r.stderr, f"voice for a CustomVoice model: {r.returncode} {r.stderr!r}")


def test_gguf(kz, base, work):
    """A GGUF of the Base checkpoint keeps the encoders' values: the same fingerprint, so a
    voice of the checkpoint fits it, for every weight type."""
    icl = os.path.join(work, "icl.kzvoice")
    for t in ("bf16", "q8_0"):
        gguf = os.path.join(work, f"base_{t}.gguf")
        r = run([kz, "quantize", "-m", base, "-o", gguf, "--type", t, "--quiet"])
        check(r.returncode == 0, f"quantize {t}: {r.stderr}")
        r, lines = info_lines(kz, icl, "-m", gguf)
        check(r.returncode == 0 and lines[-1:] == [f"model: fits {gguf}"],
              f"a voice of the checkpoint on its {t} GGUF: {lines[-1:]} {r.stderr.strip()}")
        os.remove(gguf)


def test_bad_files(kz, work, fp, xv, codes):
    good = vf.encode(xv, fp, 3.25, codes, TEXT)
    bad = os.path.join(work, "bad.kzvoice")
    damaged = bytearray(good)
    damaged[100] ^= 0x40
    cases = [
        ("truncated", good[:len(good) - 9], [bad, "truncated voice file"]),
        ("flipped byte", bytes(damaged), [bad, "checksum mismatch"]),
        ("newer version", vf.encode(xv, fp, 3.25, codes, TEXT, version=2),
         [bad, "version 2 was made by a newer kztts"]),
        ("not a voice", b"RIFF....WAVEfmt ", [bad, "not a kztts voice file"]),
        ("empty", b"", [bad, "not a kztts voice file"]),
    ]
    for name, data, needles in cases:
        with open(bad, "wb") as f:
            f.write(data)
        expect_refused(f"voice info: {name}", run([kz, "voice", "info", bad]), *needles)
    expect_refused("voice info: absent file",
                   run([kz, "voice", "info", os.path.join(work, "absent.kzvoice")]),
                   "absent.kzvoice")
    os.remove(bad)


def test_create_errors(kz, base, cv, work):
    out_dir = os.path.join(work, "out")
    os.makedirs(out_dir)
    out = os.path.join(out_dir, "v.kzvoice")
    wav = os.path.join(work, "ref.wav")  # never read: each call fails before the audio
    usage = [
        ("neither --ref-text nor --xvector-only", ["-m", base, "--ref-audio", wav, "-o", out],
         "give --ref-text"),
        ("both --ref-text and --xvector-only",
         ["-m", base, "--ref-audio", wav, "--ref-text", "hi", "--xvector-only", "-o", out],
         "exclude each other"),
        ("no -o", ["-m", base, "--ref-audio", wav, "--xvector-only"], "are required"),
        ("no --ref-audio", ["-m", base, "--xvector-only", "-o", out], "are required"),
        ("-o -", ["-m", base, "--ref-audio", wav, "--xvector-only", "-o", "-"], "stdout"),
        ("--max-ref-seconds 0.5",
         ["-m", base, "--ref-audio", wav, "--xvector-only", "--max-ref-seconds", "0.5", "-o", out],
         "--max-ref-seconds"),
        ("--threads 300", ["-m", base, "--ref-audio", wav, "--xvector-only", "-t", "300", "-o", out],
         "--threads"),
    ]
    for name, args, needle in usage:
        expect_usage_error(f"voice create: {name}", run([kz, "voice", "create", *args]), needle)
        nothing_left(name, out_dir)
    r = run([kz, "voice", "frobnicate"])
    check(r.returncode == 2 and "usage: kztts voice create" in r.stderr,
          f"voice frobnicate: {r.returncode} {r.stderr!r}")
    expect_refused("voice create on a CustomVoice model",
                   run([kz, "voice", "create", "-m", cv, "--ref-audio", wav, "--ref-text", "hi",
                        "-o", out]), "needs a Base model", "custom_voice")
    nothing_left("voice create on a CustomVoice model", out_dir)
    codes = os.path.join(out_dir, "codes.txt")
    expect_refused("encode on a CustomVoice model",
                   run([kz, "encode", "-m", cv, "--audio", wav, "-o", codes]),
                   "needs a Base model or a codec", "custom_voice")
    nothing_left("encode on a CustomVoice model", out_dir)
    expect_usage_error("encode without -o", run([kz, "encode", "-m", base, "--audio", wav]),
                       "are required")
    for cmd in (["encode"], ["voice", "create"], ["voice", "info"]):
        r = run([kz, *cmd, "--help"])
        check(r.returncode == 0 and "usage: kztts" in r.stdout, f"{cmd} --help: {r.returncode}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kztts", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--tiny", required=True, help="the fixture's tiny (CustomVoice) checkpoint")
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    base = os.path.join(os.path.dirname(a.tiny), "tiny_base")
    fp, xv, codes = test_info(a.kztts, base, a.tiny, a.work)
    test_mismatches(a.kztts, a.source, base, a.tiny, a.work, fp, xv, codes)
    test_gguf(a.kztts, base, a.work)
    test_bad_files(a.kztts, a.work, fp, xv, codes)
    test_create_errors(a.kztts, base, a.tiny, a.work)
    finish("test_cli_voice")


if __name__ == "__main__":
    main()
