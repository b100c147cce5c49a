"""`kztts synth`, `speakers` and `info` with the Base models (voice cloning).

Option errors that need no model (--ref-text with --xvector-only, --ref-audio without a
transcript choice, --voice with --ref-audio, the reference options without --ref-audio)
and those the model type decides (-s with a Base model, --ref-audio / --voice with a
CustomVoice or VoiceDesign model, a Base model without a voice): each exits 2 with one
line on stderr naming the problem and leaves no output file. `kztts speakers` on a Base
model says it clones and how; `kztts info` says what a Base model can do. The reference
audio and voice files named here need not exist: every case is refused before they are
read.
"""
import argparse
import os
import subprocess
import tempfile

from testlib import check, finish


def run(kztts, *args):
    return subprocess.run([kztts, *args], capture_output=True, text=True, timeout=300)


def expect_usage_error(kztts, work, name, args, *needles):
    out = os.path.join(work, f"{name}.wav")
    r = run(kztts, "synth", *args, "-o", out, "Hello.")
    err = r.stderr.strip()
    check(r.returncode == 2, f"{name}: exit {r.returncode} (want 2), stderr {err!r}")
    check(len(err.splitlines()) == 1, f"{name}: expected one line on stderr, got {err!r}")
    for n in needles:
        check(n in err, f"{name}: message {err!r} lacks {n!r}")
    left = [f for f in os.listdir(work) if f.startswith(name)]
    check(not left, f"{name}: left {left}")
    print(f"ok   {name}: {err}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kztts", required=True)
    ap.add_argument("--tiny", required=True)
    a = ap.parse_args()
    root = os.path.dirname(a.tiny)
    base, cv, vd = os.path.join(root, "tiny_base"), a.tiny, os.path.join(root, "tiny_vd")
    with tempfile.TemporaryDirectory() as work:
        ref = os.path.join(work, "absent_ref.wav")
        voice = os.path.join(work, "absent.kzvoice")
        cases = [
            ("ref_text_and_xvector", ["-m", base, "--ref-audio", ref, "--ref-text", "Hi.",
                                      "--xvector-only"], "--ref-text", "--xvector-only"),
            ("ref_audio_alone", ["-m", base, "--ref-audio", ref], "--ref-text", "--xvector-only"),
            ("voice_and_ref_audio", ["-m", base, "--voice", voice, "--ref-audio", ref,
                                     "--xvector-only"], "--voice", "--ref-audio"),
            ("ref_text_without_audio", ["-m", base, "--ref-text", "Hi."], "--ref-audio"),
            ("xvector_without_audio", ["-m", base, "--voice", voice, "--xvector-only"],
             "--ref-audio"),
            ("base_with_speaker", ["-m", base, "-s", "ryan", "--voice", voice],
             "Base model", "--ref-audio"),
            ("ref_audio_on_custom_voice", ["-m", cv, "-s", "ryan", "--ref-audio", ref,
                                           "--xvector-only"], "custom_voice", "Base"),
            ("voice_on_custom_voice", ["-m", cv, "--voice", voice], "custom_voice", "--voice"),
            ("voice_on_voice_design", ["-m", vd, "--voice", voice], "voice_design", "Base"),
            ("base_without_voice", ["-m", base], "needs a voice", "--ref-audio"),
            ("base_with_instruct", ["-m", base, "-i", "Slowly."], "no instruction"),
        ]
        for name, args, *needles in cases:
            expect_usage_error(a.kztts, work, name, args, *needles)
    r = run(a.kztts, "speakers", "-m", base)
    check(r.returncode == 0 and "type: base" in r.stdout and "clones" in r.stdout
          and "--ref-audio" in r.stdout and "--xvector-only" in r.stdout
          and "--voice" in r.stdout and "languages: auto" in r.stdout,
          f"speakers on a Base model: {r.returncode} {r.stdout!r} {r.stderr!r}")
    r = run(a.kztts, "speakers", "-m", cv)
    check(r.returncode == 0 and "clones" not in r.stdout and "ryan" in r.stdout,
          f"speakers on CustomVoice: {r.stdout!r}")
    r = run(a.kztts, "info", "-m", base)
    check(r.returncode == 0 and "can do: voice cloning" in r.stdout
          and "in-context" in r.stdout and "x-vector" in r.stdout,
          f"info on a Base model: {r.returncode} {r.stdout[-400:]!r}")
    r = run(a.kztts, "info", "-m", cv)
    check(r.returncode == 0 and "can do:" in r.stdout and "cloning" not in r.stdout,
          f"info on CustomVoice: {r.stdout[-300:]!r}")
    finish("test_cli_clone")


if __name__ == "__main__":
    main()
