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
    print("fixture: 1 passed, 0 failed")


if __name__ == "__main__":
    main()
