#!/usr/bin/env python3
"""Issue 5's acceptance measured in rounds, with every target's pass count.

One measurement of a shared host reads the host as much as the engine (docs/PERF.md: its
DRAM bandwidth swings 31-60 GB/s within an hour), so this runs `kztts bench --json` on the
8-bit and the 4-bit GGUF in alternation, `--rounds` times, and reports per target every
round's value, the median and how many rounds met it, next to each round's DRAM probe and
chunk count, and the real-time factor this machine allows at all (`floor_rtf`: every stage
at its floor, the measured DRAM rate or FMA peak, one after another).

Data flow: for round r, for each recipe (order alternating by round):
    kztts bench -m GGUF --threads T --frames F --codec-precision fast --repeat R --json
    -> one JSON object -> the metrics below (METRICS: recipe, label, how to read it, target)
Then a text table (or, with --json, one object: {"rounds": [...], "targets": [...]}).

Usage:
    bench/acceptance.py --kztts build/kztts --q8 q8_0.gguf --q4 q4_0.gguf [--rounds 3]
        [--frames 100] [--threads 2] [--repeat 2] [--json]
"""
import argparse
import json
import statistics
import subprocess
import sys


def stage(name):
    return lambda j: next(s["ms_per_frame"] for s in j["stages"] if s["name"] == name)


# (recipe, label, reader of one bench JSON, target: the value must be <= it; None = shown only)
METRICS = [
    ("q8", "talker ms/frame", stage("talker"), 18),
    ("q8", "code predictor ms/frame", stage("code predictor"), 34),
    ("q8", "codec ms/frame (streaming)", stage("codec decoder"), 12),
    ("q8", "codec ms/frame (one pass)", lambda j: j["offline"]["codec_ms_per_frame"], None),
    ("q8", "streaming RTF", lambda j: j["streaming"]["rtf"], 0.8),
    ("q8", "offline RTF", lambda j: j["offline"]["rtf"], 0.8),
    ("q8", "first audio ms", lambda j: j["first_audio_non_streaming_layout_ms"], 150),
    ("q8", "first audio ms (streaming text, voice cached)",
     lambda j: j["first_audio_streaming_layout_cached_ms"], None),
    ("q8", "peak RSS MB", lambda j: j["peak_rss_mb"], 1200),
    ("q8", "load ms", lambda j: j["model_load_ms"], 500),
    ("q8", "codec forms stored (1 = yes)", lambda j: int(j["codec_forms_stored"]), None),
    ("q8", "chunks per run", lambda j: j["streaming"]["chunks_per_run"], None),
    ("q8", "DRAM probe GB/s", lambda j: j["machine"]["read_gbs"], None),
    ("q8", "floor RTF (every stage at its limit)", lambda j: j.get("floor_rtf") or 0, None),
    ("q4", "streaming RTF", lambda j: j["streaming"]["rtf"], 0.55),
    ("q4", "offline RTF", lambda j: j["offline"]["rtf"], 0.55),
    ("q4", "DRAM probe GB/s", lambda j: j["machine"]["read_gbs"], None),
    ("q4", "floor RTF (every stage at its limit)", lambda j: j.get("floor_rtf") or 0, None),
]


def bench(a, model):
    cmd = [a.kztts, "bench", "-m", model, "--threads", str(a.threads), "--frames",
           str(a.frames), "--codec-precision", "fast", "--repeat", str(a.repeat), "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"acceptance: {' '.join(cmd)} failed: {r.stderr.strip()}")
    try:
        return json.loads(r.stdout)
    except ValueError as e:
        sys.exit(f"acceptance: {' '.join(cmd)} printed no JSON object ({e})")


def measure(a):
    """Every round's bench JSON per recipe, the recipes alternating first."""
    rounds = []
    for r in range(a.rounds):
        order = ("q8", "q4") if r % 2 == 0 else ("q4", "q8")
        rounds.append({k: bench(a, a.q8 if k == "q8" else a.q4) for k in order})
    return rounds


def summarize(rounds):
    targets = []
    for recipe, label, read, limit in METRICS:
        values = [read(r[recipe]) for r in rounds]
        row = {"recipe": recipe, "metric": label, "target": limit, "values": values,
               "median": statistics.median(values)}
        if limit is not None:
            row["met"] = sum(v <= limit for v in values)
        targets.append(row)
    return targets


def print_text(targets, n_rounds):
    w = max(len(t["metric"]) for t in targets)
    print(f"{'recipe':6} {'metric':{w}} {'target':>7} {'median':>9}  met   rounds")
    for t in targets:
        limit = "-" if t["target"] is None else f"<= {t['target']}"
        met = "-" if t["target"] is None else f"{t['met']}/{n_rounds}"
        vals = " ".join(f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}" for v in t["values"])
        print(f"{t['recipe']:6} {t['metric']:{w}} {limit:>7} {t['median']:9.3f}  {met:5} {vals}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--kztts", default="build/kztts")
    p.add_argument("--q8", required=True, help="the q8_0 recipe's GGUF (or model)")
    p.add_argument("--q4", required=True, help="the 4-bit recipe's GGUF (or model)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--frames", type=int, default=100)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    a = p.parse_args()
    if a.rounds < 1 or a.frames < 1 or a.threads < 1 or a.repeat < 1:
        sys.exit("acceptance: --rounds, --frames, --threads and --repeat must be >= 1")
    rounds = measure(a)
    targets = summarize(rounds)
    if a.json:
        json.dump({"rounds": rounds, "targets": targets}, sys.stdout)
        print()
    else:
        print_text(targets, len(rounds))


if __name__ == "__main__":
    main()
