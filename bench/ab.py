#!/usr/bin/env python3
"""Two kztts binaries alternated on the same models: every stage's ms and % of floor.

A shared host moves more between two runs than most changes do (docs/PERF.md: its DRAM
probe swings up to 2x within minutes), so a change is judged by running the old and the
new binary in turns, several rounds, and comparing medians; the ratio new / old of the
medians of a stage's ms says what the change did, the % of floor what the machine allows.

Data flow: for round r, for each model, for each binary (order flipped every round):
    BINARY bench -m MODEL --threads T --frames F --repeat R --json [--isa I] [EXTRA...]
    -> one JSON object -> the metrics of METRICS
Then, per model, a table: metric, old median (min-max), new median (min-max), new / old
(or, with --json, one object {"runs": [...]} with every run's metrics).

Usage:
    bench/ab.py --old OLD/kztts --new NEW/kztts -m q8_0.gguf [-m q4_0.gguf ...]
        [--rounds 3] [--frames 100] [--threads 2] [--repeat 2] [--isa avx2] [--json]
        [-- EXTRA bench options]
"""
import argparse
import json
import statistics
import subprocess
import sys


def stage(name, field):
    def read(j):
        return next(s[field] for s in j["stages"] if s["name"] == name)
    return read


# (label, reader of one bench JSON); a reader that finds nothing gives None (shown as "-").
METRICS = [
    ("prefill ms", lambda j: j["prefill_ms"]),
    ("talker ms/frame", stage("talker", "ms_per_frame")),
    ("talker % of floor", stage("talker", "pct_of_floor")),
    ("code predictor ms/frame", stage("code predictor", "ms_per_frame")),
    ("code predictor % of floor", stage("code predictor", "pct_of_floor")),
    ("codec ms/frame (streaming)", stage("codec decoder", "ms_per_frame")),
    ("codec % of floor (streaming)", stage("codec decoder", "pct_of_floor")),
    ("codec ms/frame (one pass)", lambda j: j["offline"]["codec_ms_per_frame"]),
    ("chunks per run", lambda j: j["streaming"]["chunks_per_run"]),
    ("underruns", lambda j: j["streaming"]["underruns"]),
    ("streaming RTF", lambda j: j["streaming"]["rtf"]),
    ("offline RTF", lambda j: j["offline"]["rtf"]),
    ("offline other ms/frame", lambda j: j["offline_stages"]["other_ms_per_frame"]),
    ("floor RTF", lambda j: j["floor_rtf"]),
    ("offline RTF / floor RTF", lambda j: j["offline"]["rtf"] / j["floor_rtf"]),
    ("first audio ms", lambda j: j["first_audio_non_streaming_layout_ms"]),
    ("DRAM probe GB/s", lambda j: j["machine"]["read_gbs"]),
    ("core round trip ns", lambda j: j["machine"]["core_rt_ns"]),
]


def read_metrics(j):
    out = {}
    for label, read in METRICS:
        try:
            v = read(j)
        except (KeyError, StopIteration, TypeError, ZeroDivisionError):
            v = None
        out[label] = v
    return out


def bench(a, binary, model):
    cmd = [binary, "bench", "-m", model, "--threads", str(a.threads), "--frames",
           str(a.frames), "--repeat", str(a.repeat), "--json", "--quiet"]
    cmd += ["--isa", a.isa] if a.isa else []
    cmd += a.extra
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"ab: {' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    return read_metrics(json.loads(r.stdout))


def span(values):
    vs = [v for v in values if v is not None]
    if not vs:
        return "-", None
    med = statistics.median(vs)
    return f"{med:.3g} ({min(vs):.3g}-{max(vs):.3g})", med


def report(a, runs):
    for model in a.model:
        print(f"\n{model}: {a.rounds} rounds, old {a.old}, new {a.new}")
        print(f"{'metric':32} {'old median (min-max)':26} {'new median (min-max)':26} new/old")
        for label, _ in METRICS:
            cells, meds = [], []
            for which in ("old", "new"):
                text, med = span([r["metrics"][label] for r in runs
                                  if r["model"] == model and r["binary"] == which])
                cells.append(text)
                meds.append(med)
            ratio = f"{meds[1] / meds[0]:.3f}" if None not in meds and meds[0] else "-"
            print(f"{label:32} {cells[0]:26} {cells[1]:26} {ratio}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--old", required=True, help="the baseline kztts binary")
    p.add_argument("--new", required=True, help="the changed kztts binary")
    p.add_argument("-m", "--model", action="append", required=True, help="a model (repeat)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--frames", type=int, default=100)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--isa", help="kernel cap passed to bench (e.g. avx2)")
    p.add_argument("--json", action="store_true", help="print every run as JSON")
    p.add_argument("extra", nargs="*", help="after --: more bench options")
    a = p.parse_args()
    if a.rounds < 1 or a.frames < 1 or a.threads < 1 or a.repeat < 1:
        sys.exit("ab: --rounds, --frames, --threads and --repeat must be at least 1")
    runs = []
    for r in range(a.rounds):
        order = ("old", "new") if r % 2 == 0 else ("new", "old")
        for model in a.model:
            for which in order:
                m = bench(a, getattr(a, which), model)
                runs.append({"round": r, "model": model, "binary": which, "metrics": m})
                print(f"round {r + 1} {which} {model}: talker {m['talker ms/frame']}, "
                      f"probe {m['DRAM probe GB/s']}", file=sys.stderr, flush=True)
    if a.json:
        print(json.dumps({"runs": runs}, indent=1))
    else:
        report(a, runs)


if __name__ == "__main__":
    main()
