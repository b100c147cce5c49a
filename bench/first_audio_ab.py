#!/usr/bin/env python3
"""first_audio_ab.py - first audio from process launch, two kztts builds alternated.

A start-up change is judged against a shared host's noise by launching the old and the
new build in turns (the order flipped every round), each launch a whole process with a
warm page cache, as a user's first `kztts synth --stream` is.

Data flow: for round r, for each of (OLD, OLD_MODEL) and (NEW, NEW_MODEL), order flipped
on odd rounds:
    BINARY synth -m MODEL --stream -s SPEAKER -t THREADS -q --frames FRAMES -o - TEXT
    -> its stdout read as it comes -> launch to the first byte past the 44-byte WAV
    header (ms)
Then per build: every launch, the median, min and max, and how many came within
--target ms.

Usage:
    bench/first_audio_ab.py --old OLD/kztts --new NEW/kztts -m MODEL.gguf
        [--new-model OTHER.gguf] [--rounds 5] [--threads 2] [--frames 10]
        [--speaker aiden] [--target 300] [--isa auto] [TEXT]
"""
import argparse
import statistics
import subprocess
import time

WAV_HEADER = 44


def first_audio_ms(cmd):
    """Launch cmd; ms from launch to its first audio byte (None if none), its exit code."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    got, first = 0, None
    while True:
        b = p.stdout.read1(1 << 16)
        if not b:
            break
        got += len(b)
        if first is None and got > WAV_HEADER:
            first = 1000 * (time.monotonic() - t0)
    return first, p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--new-model", help="the new build's model (default: the same)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--frames", type=int, default=10)
    ap.add_argument("--speaker", default="aiden")
    ap.add_argument("--target", type=float, default=300)
    ap.add_argument("--isa", default="auto")
    ap.add_argument("text", nargs="?", default="Hello there, this is a test of the first audio.")
    a = ap.parse_args()
    builds = [("old", a.old, a.model), ("new", a.new, a.new_model or a.model)]
    runs = {"old": [], "new": []}
    for r in range(a.rounds):
        for label, binary, model in (builds if r % 2 == 0 else builds[::-1]):
            cmd = [binary, "synth", "-m", model, "--stream", "-s", a.speaker, "-t",
                   str(a.threads), "-q", "--frames", str(a.frames), "--isa", a.isa, "-o", "-",
                   a.text]
            ms, rc = first_audio_ms(cmd)
            print(f"round {r + 1} {label}: " +
                  (f"{ms:.1f} ms" if ms is not None else "no audio") + f" (exit {rc})",
                  flush=True)
            if ms is not None and rc == 0:
                runs[label].append(ms)
    for label, binary, model in builds:
        v = runs[label]
        if not v:
            print(f"{label} ({binary}, {model}): no run gave audio")
            continue
        within = sum(x <= a.target for x in v)
        print(f"{label} ({binary}, {model}): median {statistics.median(v):.1f} ms, "
              f"min {min(v):.1f}, max {max(v):.1f}; {within} of {len(v)} within "
              f"{a.target:.0f} ms")


if __name__ == "__main__":
    main()
