"""`kztts voice create` and `kztts encode` end to end on tiny random Base checkpoints,
compared with the PyTorch reference (tools/reference/speaker_encoder.py, codec_encoder.py).

Dataflow: a 24 kHz mono 16-bit WAV (harmonics and noise, so nothing is silent) ->
    kztts voice create (ICL and x-vector only) -> the voice files, read back with
    tools/reference/voice_file.py -> x-vector against the reference's (relative error
    < 1e-5), codes identical to the reference's; kztts encode -> the same codes as a codes
    file; voice info prints them; a voice made with another seed's checkpoint is refused by
    this one (one line naming both fingerprints); unusable audio (missing file, too short,
    silent) exits 1 with one line and leaves no file.
"""
import argparse
import math
import os
import shutil
import subprocess
import sys

import numpy as np

from testlib import check, expect_refused, finish, speechlike as speech_audio, write_wav as wav_file

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
from reference import voice_file as vf  # noqa: E402

RATE = 24000
TEXT = "This is what the reference recording says."


def write_wav(path, pcm, rate=RATE):
    return wav_file(path, pcm, rate)


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def speechlike(seconds, seed):
    return speech_audio(seconds, seed, RATE)


def make_checkpoint(source, out, *extra):
    subprocess.run([sys.executable, os.path.join(source, "tools", "make_checkpoint.py"),
                    "--preset", "tiny", "--out", out, *extra], check=True, capture_output=True)


def read_codes(path):
    with open(path) as f:
        return np.array([[int(v) for v in line.split()] for line in f if line.strip()])


def nothing_left(name, folder):
    left = os.listdir(folder)
    check(not left, f"{name}: files left in the output folder: {left}")


def create(kz, model, wav, out, *kind):
    r = run([kz, "voice", "create", "-m", model, "--ref-audio", wav, *kind, "-o", out,
             "--threads", "2"])
    check(r.returncode == 0, f"voice create {kind}: {r.stderr.strip()}")
    return vf.read(out) if r.returncode == 0 else None


def test_create(kz, base, wav, pcm, work):
    icl_path = os.path.join(work, "icl.kzvoice")
    icl = create(kz, base, wav, icl_path, "--ref-text", TEXT)
    xonly = create(kz, base, wav, os.path.join(work, "xvector.kzvoice"), "--xvector-only")
    if not icl or not xonly:
        return None, None
    n_frames = math.ceil(pcm.size / 1920)
    check(icl["icl"] and icl["text"] == TEXT and icl["enc_dim"] == 32 and
          icl["n_codebooks"] == 16 and icl["n_ref_frames"] == n_frames and
          icl["fingerprint"] == vf.fingerprint(base) and icl["sample_rate"] == RATE and
          abs(icl["ref_seconds"] - pcm.size / RATE) < 1e-9, f"ICL voice fields: {icl}")
    check(not xonly["icl"] and xonly["n_ref_frames"] == 0 and xonly["text"] == "",
          "x-vector-only voice fields")
    check(np.array_equal(icl["xvector"], xonly["xvector"]),
          "the same audio gives the same x-vector in both kinds")
    r = run([kz, "voice", "info", icl_path, "-m", base])
    out = r.stdout.splitlines()
    check(r.returncode == 0 and f"reference codes: {n_frames} frames x 16 codebooks" in out and
          f'transcript: "{TEXT}"' in out and out[-1] == f"model: fits {base}",
          f"voice info of a made voice: {out} {r.stderr}")
    codes_path = os.path.join(work, "codes.txt")
    r = run([kz, "encode", "-m", base, "--audio", wav, "-o", codes_path, "--threads", "2"])
    check(r.returncode == 0, f"encode: {r.stderr.strip()}")
    if r.returncode == 0:
        codes = read_codes(codes_path)
        check(np.array_equal(codes, icl["codes"]), "encode gives the voice's codes")
    r = run([kz, "encode", "-m", base, "--audio", wav, "-o", "-"])
    check(r.returncode == 0 and np.array_equal(
        np.array([[int(v) for v in ln.split()] for ln in r.stdout.splitlines()]), icl["codes"]),
        "encode -o - prints the same codes")
    return icl, xonly


def test_reference(base, pcm, icl):
    """The x-vector and codes against the PyTorch reference."""
    import torch
    from reference import codec_encoder, speaker_encoder  # noqa: E402
    x = torch.from_numpy(pcm.astype(np.float32))
    ref_x = speaker_encoder.load_encoder(base).xvector(x).numpy()
    ref_codes = codec_encoder.load_encoder(base).encode(x).numpy()
    err = np.abs(icl["xvector"] - ref_x).max() / max(np.abs(ref_x).max(), 1e-30)
    check(err < 1e-5, f"x-vector relative error {err:.3g} (want < 1e-5)")
    same = ref_codes.shape == icl["codes"].shape and np.array_equal(icl["codes"], ref_codes)
    check(same, f"codes equal the reference's: shapes {icl['codes'].shape} {ref_codes.shape}, "
                f"{int((icl['codes'] != ref_codes).sum()) if ref_codes.shape == icl['codes'].shape else '-'} differ")
    print(f"ok   x-vector relative error {err:.3g}, {ref_codes.shape[0]} frames of codes equal",
          flush=True)


def test_other_model(kz, source, base, wav, work):
    other = os.path.join(work, "base_seed1")
    make_checkpoint(source, other, "--variant", "base", "--seed", "1")
    path = os.path.join(work, "other.kzvoice")
    v = create(kz, other, wav, path, "--xvector-only")
    if v:
        expect_refused_2 = run([kz, "voice", "info", path, "-m", base])
        err = expect_refused_2.stderr.strip()
        check(expect_refused_2.returncode == 2 and len(err.splitlines()) == 1 and
              f"{vf.fingerprint(other):016x}" in err and f"{vf.fingerprint(base):016x}" in err,
              f"a voice of another seed's checkpoint: {expect_refused_2.returncode} {err!r}")
        print(f"ok   another seed's voice: {err}", flush=True)


def test_bad_audio(kz, base, work):
    out_dir = os.path.join(work, "out")
    os.makedirs(out_dir)
    out = os.path.join(out_dir, "v.kzvoice")
    short = os.path.join(work, "short.wav")
    write_wav(short, speechlike(0.5, 3))
    silent = os.path.join(work, "silent.wav")
    write_wav(silent, np.zeros(2 * RATE))
    missing = os.path.join(work, "missing.wav")
    for name, wav, needle in (("missing audio", missing, "cannot open"),
                              ("0.5 s of audio", short, "at least 1 s"),
                              ("silent audio", silent, "silent")):
        expect_refused(f"voice create: {name}",
                       run([kz, "voice", "create", "-m", base, "--ref-audio", wav,
                            "--ref-text", TEXT, "-o", out]), wav, needle)
        nothing_left(f"voice create: {name}", out_dir)
        expect_refused(f"encode: {name}",
                       run([kz, "encode", "-m", base, "--audio", wav, "-o",
                            os.path.join(out_dir, "c.txt")]), wav, needle)
        nothing_left(f"encode: {name}", out_dir)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kztts", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--tiny", required=True, help="the fixture's tiny checkpoint (tiny_base beside it)")
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    base = os.path.join(os.path.dirname(a.tiny), "tiny_base")
    wav = os.path.join(a.work, "ref.wav")
    pcm = write_wav(wav, speechlike(2.5, 1))
    icl, _ = test_create(a.kztts, base, wav, pcm, a.work)
    if icl:
        test_reference(base, pcm, icl)
    test_other_model(a.kztts, a.source, base, wav, a.work)
    test_bad_audio(a.kztts, base, a.work)
    finish("test_voice_create")


if __name__ == "__main__":
    main()
