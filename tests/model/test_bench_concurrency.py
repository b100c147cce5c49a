"""`kztts bench --concurrency` on the tiny checkpoint, as a user runs it.

Checks: --json prints one object with a level per concurrency, in the order given; every
stream's frames arrive (audio frames and the scheduler's frame count are N x --frames),
the scheduler's mean batch is frames / steps and lies between 1 and N, the timings are
positive and ordered (RTF p50 <= worst, first audio p50 <= p95 <= the level's wall time),
the speed-up is against N = 1 (1 there, null when 1 is not listed), the floor is the
formula of the help with the numbers printed beside it, and so is the language model's
part of it at the mean batch, against the scheduler's time per batched step; the text output has a row per N
and the formula; bad lists (0, 99, 1,x, 1,,2) and options that do not apply exit 2 with
one line naming the problem; --help documents the option. No time is asserted.
"""
import argparse
import json
import subprocess

from testlib import check, finish


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def bench_json(a, *opts):
    r = run([a.kztts, "bench", "-m", a.tiny, "--frames", "8", "--repeat", "1", "-t", "2",
             "--json", *opts])
    try:
        j = json.loads(r.stdout)
    except ValueError:
        j = {}
    check(r.returncode == 0 and j.get("mode") == "concurrency",
          f"bench --concurrency --json: exit {r.returncode}, {r.stderr.strip()} {r.stdout[:300]}")
    return j


def near(x, y):
    return abs(x - y) <= 1e-6 * max(abs(x), abs(y), 1e-9)


def check_floor(j, lv):
    """The floor as the help states it: N / (W/BW + N (2W/(4P) + C))."""
    m, n = j["machine"], lv["concurrency"]
    w = j["lm_bytes_per_frame"]
    read = w / (m["read_gbs"] * 1e9) * 1e3
    row = 2 * w / (4 * m["fma_gflops"] * 1e9) * 1e3
    check(near(j["lm_read_ms_per_step"], read) and near(j["lm_arithmetic_ms_per_stream"], row),
          f"N={n}: LM floor terms {j['lm_read_ms_per_step']}, {j['lm_arithmetic_ms_per_stream']}"
          f" vs {read}, {row}")
    step = read + n * (row + lv["codec_floor_ms_per_frame"])
    check(near(lv["floor_step_ms"], step) and near(lv["floor_frames_per_s"], n / step * 1e3),
          f"N={n}: floor {lv['floor_step_ms']} ms, {lv['floor_frames_per_s']} f/s vs {step} ms")
    check(near(lv["pct_of_floor"], 100 * lv["frames_per_s"] / lv["floor_frames_per_s"]),
          f"N={n}: % of floor {lv['pct_of_floor']}")
    lm = read + lv["mean_batch"] * row
    check(lv["lm_ms_per_step"] > 0 and near(lv["lm_floor_ms_per_step"], lm)
          and near(lv["lm_pct_of_floor"], 100 * lm / lv["lm_ms_per_step"]),
          f"N={n}: LM step {lv['lm_ms_per_step']} ms, floor {lv['lm_floor_ms_per_step']} vs {lm}")
    check(lv["prefill_ms_per_stream"] > 0 and lv["between_batches_ms_per_frame"] > 0,
          f"N={n}: prefill {lv['prefill_ms_per_stream']}, between"
          f" {lv['between_batches_ms_per_frame']}")


def check_level(j, lv, n, frames):
    check(lv.get("concurrency") == n and lv.get("streams") == n, f"level {lv}")
    check(lv["audio_frames"] == n * frames and lv["scheduler_frames"] == n * frames,
          f"N={n}: frames audio {lv['audio_frames']}, scheduler {lv['scheduler_frames']},"
          f" want {n * frames}")
    steps = lv["scheduler_steps"]
    check(steps > 0 and near(lv["mean_batch"], lv["scheduler_frames"] / steps)
          and 1 <= lv["mean_batch"] <= n, f"N={n}: mean batch {lv['mean_batch']}, steps {steps}")
    check(lv["wall_ms"] > 0 and lv["frames_per_s"] > 0
          and near(lv["frames_per_s"], n * frames / (lv["wall_ms"] * 1e-3)),
          f"N={n}: wall {lv['wall_ms']} ms, {lv['frames_per_s']} frames/s")
    check(0 < lv["rtf_p50"] <= lv["rtf_worst"], f"N={n}: RTF {lv['rtf_p50']} {lv['rtf_worst']}")
    check(0 < lv["first_audio_p50_ms"] <= lv["first_audio_p95_ms"] <= lv["wall_ms"],
          f"N={n}: first audio {lv['first_audio_p50_ms']} {lv['first_audio_p95_ms']}")
    check(lv["codec_gflop_per_frame"] > 0 and lv["codec_floor_ms_per_frame"] > 0,
          f"N={n}: codec {lv['codec_gflop_per_frame']} GFLOP/frame")
    check_floor(j, lv)


def check_json(a):
    j = bench_json(a, "--concurrency", "1,2")
    levels = j.get("levels", [])
    check([lv.get("concurrency") for lv in levels] == [1, 2], f"levels {levels}")
    check(j.get("frames") == 8 and j.get("runs") == 1 and j.get("threads") == 2
          and j.get("machine", {}).get("threads") == 2 and j.get("lm_bytes_per_frame", 0) > 0,
          f"run shape {json.dumps(j)[:400]}")
    for n, lv in zip((1, 2), levels):
        check_level(j, lv, n, 8)
    if len(levels) == 2:
        check(levels[0]["speedup"] == 1 and near(
            levels[1]["speedup"], levels[1]["frames_per_s"] / levels[0]["frames_per_s"]),
            f"speed-ups {levels[0]['speedup']} {levels[1]['speedup']}")
    # Without N = 1 there is no speed-up; a level of 3 streams batches 3.
    j = bench_json(a, "--concurrency", "3")
    levels = j.get("levels", [])
    check(len(levels) == 1 and levels[0]["speedup"] is None, f"no N = 1: {levels}")
    if levels:
        check_level(j, levels[0], 3, 8)


def check_text(a):
    r = run([a.kztts, "bench", "-m", a.tiny, "--concurrency", "2,1", "--frames", "3",
             "--repeat", "2"])
    # Two tables, each a header row starting with N and a row per concurrency.
    tables, rows = [], None
    for ln in r.stdout.splitlines():
        first = (ln.split() or [""])[0]
        if first == "N":
            rows = []
            tables.append(rows)
        elif rows is not None and first.isdigit():
            rows.append(first)
    check(r.returncode == 0 and tables == [["2", "1"], ["2", "1"]]
          and "floor frames/s at N" in r.stdout,
          f"bench --concurrency text: exit {r.returncode} {r.stderr.strip()} {r.stdout[:600]}")


def check_refused(a):
    for value, needle in (("0", "'0'"), ("99", "'99'"), ("1,x", "'x'"), ("1,,2", "''")):
        r = run([a.kztts, "bench", "-m", a.tiny, "--concurrency", value])
        err = r.stderr.strip()
        check(r.returncode == 2 and r.stdout == "" and len(err.splitlines()) == 1
              and "--concurrency" in err and needle in err,
              f"--concurrency {value}: exit {r.returncode}, {err!r}")
    for opts in (["--threads-codec", "1"], ["--decoder-only"], ["--schedule", "overlap"]):
        r = run([a.kztts, "bench", "-m", a.tiny, "--concurrency", "1", *opts])
        check(r.returncode == 2 and "--concurrency" in r.stderr and r.stdout == "",
              f"--concurrency with {opts}: exit {r.returncode}, {r.stderr.strip()!r}")
    r = run([a.kztts, "bench", "--help"])
    check(r.returncode == 0 and "--concurrency" in r.stdout and "floor frames/s at N" in r.stdout,
          "bench --help documents --concurrency and its floor")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kztts", required=True)
    ap.add_argument("--tiny", required=True)
    a = ap.parse_args()
    check_json(a)
    check_text(a)
    check_refused(a)
    finish("test_bench_concurrency")


if __name__ == "__main__":
    main()
