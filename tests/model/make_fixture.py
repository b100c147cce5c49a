"""Builds the model-test fixture: a tiny random checkpoint, random codes files and
the PyTorch reference goldens for them.

Flow: tools/make_checkpoint.py --preset tiny -> TINY/; for each frame count N,
tools/reference/codec_decoder.py writes GOLDEN/codes_N.txt and then
GOLDEN/golden_N.safetensors (every decoder stage, time-major). A 330-frame input
also gets GOLDEN/official_330.safetensors from the reference's chunked_decode
(300-frame windows, 25 frames of context), which differs from a single pass.
"""
import argparse
import os
import subprocess
import sys

FRAME_COUNTS = (1, 7, 40)
OFFICIAL_FRAMES = 330
LM_FRAMES = 30
TEXT_IDS = [9707, 11, 1879, 0, 358, 1079, 1181, 17821, 13, 220, 16, 17, 18, 52801, 6313]
INSTRUCT_IDS = [41884, 11, 3968, 16217, 13]
# name, checkpoint (preset args), speaker, language, layout, with instruction
LM_CASES = [
    ("cv06_auto_nonstreaming", "tiny", "vivian", "auto", "non_streaming", True),
    ("cv06_english_streaming", "tiny", "ryan", "english", "streaming", False),
    ("cv17_dialect_nonstreaming", "tiny_1b7", "eric", "chinese", "non_streaming", True),
    ("cv17_auto_streaming", "tiny_1b7", "dylan", "auto", "streaming", True),
    ("cv17_english_noinstruct", "tiny_1b7", "serena", "english", "non_streaming", False),
    ("vd17_english_nonstreaming", "tiny_vd", "-", "english", "non_streaming", True),
    ("vd17_auto_streaming", "tiny_vd", "-", "auto", "streaming", True),
]
CHECKPOINTS = {
    "tiny": [],
    "tiny_1b7": ["--size", "1b7"],
    "tiny_vd": ["--size", "1b7", "--variant", "voice_design"],
    "tiny_base": ["--variant", "base"],
}


def run(cmd):
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--tiny", required=True)
    ap.add_argument("--golden", required=True)
    a = ap.parse_args()
    py = sys.executable
    ref = os.path.join(a.source, "tools", "reference", "codec_decoder.py")
    run([py, os.path.join(a.source, "tools", "make_checkpoint.py"), "--preset", "tiny",
         "--out", a.tiny, "--seed", "0"])
    os.makedirs(a.golden, exist_ok=True)
    for n in FRAME_COUNTS + (OFFICIAL_FRAMES,):
        codes = os.path.join(a.golden, f"codes_{n}.txt")
        run([py, ref, "--random-codes", str(n), "--seed", str(1000 + n), "--write-codes", codes])
        if n != OFFICIAL_FRAMES:
            run([py, ref, "--model", a.tiny, "--codes", codes,
                 "--out", os.path.join(a.golden, f"golden_{n}.safetensors")])
    run([py, ref, "--model", a.tiny, "--codes",
         os.path.join(a.golden, f"codes_{OFFICIAL_FRAMES}.txt"), "--official-chunking",
         "--out", os.path.join(a.golden, f"official_{OFFICIAL_FRAMES}.safetensors")])
    lm_fixture(py, a)
    print("fixture: 1 passed, 0 failed")


def ids_arg(ids):
    return ",".join(str(i) for i in ids)


def lm_fixture(py, a):
    """Extra tiny checkpoints and greedy goldens of the talker + code predictor."""
    root = os.path.dirname(a.tiny)
    for name, extra in CHECKPOINTS.items():
        if name != "tiny":
            run([py, os.path.join(a.source, "tools", "make_checkpoint.py"), "--preset", "tiny",
                 "--out", os.path.join(root, name), "--seed", "0"] + extra)
    ref = os.path.join(a.source, "tools", "reference", "talker.py")
    lines = []
    for name, ck, speaker, lang, layout, instruct in LM_CASES:
        model = os.path.join(root, ck)
        golden = os.path.join(a.golden, f"lm_{name}.safetensors")
        cmd = [py, ref, "--model", model, "--text-ids", ids_arg(TEXT_IDS), "--language", lang,
               "--layout", layout, "--frames", str(LM_FRAMES), "--out", golden, "--quiet"]
        if speaker != "-":
            cmd += ["--speaker", speaker]
        if instruct:
            cmd += ["--instruct-ids", ids_arg(INSTRUCT_IDS)]
        run(cmd)
        wrapped = [151644, 872, 198] + INSTRUCT_IDS + [151645, 198] if instruct else []
        lines.append("|".join([name, model, speaker, lang, layout, str(LM_FRAMES),
                               ids_arg(TEXT_IDS), ids_arg(wrapped) or "-", golden]))
    with open(os.path.join(a.golden, "lm_cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
