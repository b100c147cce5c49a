"""`kztts decode` and `kztts info` on the tiny checkpoint, as a user runs them.

Checks: f32 output equals the PyTorch reference waveform (SNR >= 60 dB); the
same audio arrives through stdout; a WAV file has a valid 24 kHz mono 16-bit
header and the right length; --official-chunking and --chunk give the same
audio below 300 frames; `kztts info` describes the codec; --help exits 0;
`kztts bench` prints the floor columns, and its --json output has a floor per stage;
`bench` with a list in --codec-precision, --schedule or -m compares the variants in one
process (every one timed each round, the axis and the precision in effect named, the
pipeline's codec and LM stages apart, bad lists refused); bench/acceptance.py reads every
target from the bench JSON of each round and counts the rounds that met it; bench/ab.py
alternates two binaries round by round and tables their medians.
"""
import argparse
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys

from testlib import check, finish, link_copy


def golden_wav(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    h = json.loads(data[8:8 + n])
    b, e = h["wav"]["data_offsets"]
    raw = data[8 + n + b:8 + n + e]
    return struct.unpack(f"<{len(raw) // 4}f", raw)


def snr_db(x, ref):
    err = sum((a - b) ** 2 for a, b in zip(x, ref))
    sig = sum(b * b for b in ref)
    return 999.0 if err == 0 else 10 * math.log10(sig / err)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, timeout=300, **kw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kztts", required=True)
    ap.add_argument("--tiny", required=True)
    ap.add_argument("--golden", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--source", required=True, help="the repository (bench/acceptance.py)")
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    codes = os.path.join(a.golden, "codes_40.txt")
    ref = golden_wav(os.path.join(a.golden, "golden_40.safetensors"))

    f32 = os.path.join(a.work, "out.f32")
    r = run([a.kztts, "decode", "-m", a.tiny, "--codes", codes, "-o", f32, "--threads", "2"])
    check(r.returncode == 0, f"decode to f32: {r.stderr.decode()}")
    data = open(f32, "rb").read() if r.returncode == 0 else b""
    pcm = struct.unpack(f"<{len(data) // 4}f", data)
    check(len(pcm) == 40 * 1920, f"f32 length {len(pcm)}")
    s = snr_db(pcm, ref)
    print(f"f32 vs reference: SNR {s:.1f} dB")
    check(s >= 60, f"SNR {s:.1f} dB < 60")

    r = run([a.kztts, "decode", "-m", a.tiny, "--codes", codes, "-o", "-", "--format", "f32"])
    check(r.returncode == 0 and r.stdout == data, "stdout f32 differs from file f32")

    for extra in (["--chunk", "1"], ["--chunk", "17"], ["--official-chunking"], ["--threads", "1"]):
        out = os.path.join(a.work, "x.f32")
        r = run([a.kztts, "decode", "-m", a.tiny, "--codes", codes, "-o", out] + extra)
        same = r.returncode == 0 and open(out, "rb").read() == data
        check(same, f"{extra} changes the audio")

    wav = os.path.join(a.work, "out.wav")
    r = run([a.kztts, "decode", "-m", a.tiny, "--codes", codes, "-o", wav])
    check(r.returncode == 0, f"decode to wav: {r.stderr.decode()}")
    w = open(wav, "rb").read() if r.returncode == 0 else b"\0" * 44
    check(w[:4] == b"RIFF" and w[8:12] == b"WAVE", "WAV magic")
    fmt = w.find(b"fmt ")
    ch, rate = struct.unpack("<HI", w[fmt + 10:fmt + 16])
    bits = struct.unpack("<H", w[fmt + 22:fmt + 24])[0]
    check((ch, rate, bits) == (1, 24000, 16), f"WAV format {(ch, rate, bits)}")
    dpos = w.find(b"data")
    check(struct.unpack("<I", w[dpos + 4:dpos + 8])[0] == 40 * 1920 * 2, "WAV data length")

    r = run([a.kztts, "decode", "-m", a.tiny, "--codes", codes, "-o", "-"])
    check(r.returncode == 0 and r.stdout[:4] == b"RIFF" and len(r.stdout) == 44 + 40 * 1920 * 2,
          "WAV to stdout")

    r = run([a.kztts, "info", "-m", a.tiny])
    out = r.stdout.decode()
    check(r.returncode == 0 and "codec:" in out and "kernels:" in out, f"info: {out}")
    for cmd in (["decode", "--help"], ["info", "--help"], ["bench", "--help"], ["--help"]):
        check(run([a.kztts] + cmd).returncode == 0, f"{cmd} exits 0")
    check_help(a)
    r = run([a.kztts, "bench", "-m", a.tiny, "--decoder-only", "--frames", "3", "--repeat", "1"])
    check(r.returncode == 0 and b"real-time factor" in r.stdout and b"% of floor" in r.stdout
          and b"FMA peak" in r.stdout and b"floor RTF" in r.stdout, f"bench: {r.stderr.decode()}")
    # Adaptive chunks need a listener: the decoder-only bench refuses --chunk 0.
    r = run([a.kztts, "bench", "-m", a.tiny, "--decoder-only", "--chunk", "0"])
    check(r.returncode == 2 and b"--chunk" in r.stderr and not r.stdout,
          f"bench --decoder-only --chunk 0: {r.returncode} {r.stderr.decode()}")
    check_bench_json(a)
    check_bench_compare(a)
    check_acceptance_script(a)
    check_ab_script(a)
    finish("test_cli_decode")


def help_options(a, cmd):
    """{option: its help line} of `kztts cmd --help`."""
    out = run([a.kztts, cmd, "--help"]).stdout.decode()
    lines = {}
    for line in out.splitlines():
        words = line.replace(",", " ").split()
        for w in words[:2]:
            if w.startswith("--"):
                lines[w] = line
    return lines, out


def check_help(a):
    """The help texts say what the options do now: --frames and --max-frames count over the
    whole request and the runaway guard stays; 0 of --top-k and --max-utterance; the
    codec precision's default from the model file; --quiet wherever a model may be
    downloaded; no frame length, rate or codebook count stated as if every model had it."""
    synth, _ = help_options(a, "synth")
    for option, needles in (("--frames", ["in all"]), ("--max-frames", ["in all", "50 + 8"]),
                            ("--top-k", ["0 = off"]), ("--max-utterance", ["0 = never"]),
                            ("--codec-precision", ["the model file's"])):
        line = synth.get(option, "")
        check(all(n in line for n in needles), f"synth --help {option}: {line!r} lacks {needles}")
    for cmd in ("synth", "decode", "info", "speakers", "tokenize", "bench", "quality",
                "quantize"):
        options, out = help_options(a, cmd)
        check("--quiet" in options and "-q" in options["--quiet"], f"{cmd} --help: no -q, --quiet")
        for line in out.splitlines():
            fixed = any(n in line for n in ("80 ms", "24 kHz", "24000", "1920", "of 16 per"))
            check(not fixed or "released models" in line, f"{cmd} --help: {line.strip()!r}")
    print("ok   help texts")


def check_bench_compare(a):
    """Codec precisions compared: one entry per requested name, in order, with the
    precision in effect (f32 stays f32; fast resolves to a real precision), positive
    times with min <= median <= max, and the first's ratio 1; in the pipeline the codec's
    and the LM stages' times, positive and within the wall time; bad lists exit 2."""
    r = run([a.kztts, "bench", "-m", a.tiny, "--decoder-only", "--frames", "2", "--repeat",
             "3", "--codec-precision", "f32,winograd,fast", "--json"])
    try:
        j = json.loads(r.stdout)
    except ValueError:
        j = {}
    check(r.returncode == 0 and j.get("mode") == "decoder-compare" and j.get("rounds") == 3,
          f"bench compare: {r.returncode} {r.stderr.decode()} {r.stdout[:300]}")
    v = j.get("variants", [])
    check([x.get("requested") for x in v] == ["f32", "winograd", "fast"],
          f"bench compare: variants {v}")
    if len(v) == 3:
        check(v[0]["codec_precision"] == "f32" and v[1]["codec_precision"] == "winograd"
              and v[2]["codec_precision"] in ("bf16", "winograd", "winograd-bf16"),
              f"bench compare: precisions in effect {v}")
        check(all(0 < x["min_ms_per_frame"] <= x["median_ms_per_frame"] <= x["max_ms_per_frame"]
                  for x in v) and v[0]["vs_first"] == 1.0,
              f"bench compare: times {v}")
    # The whole pipeline: each variant's codec and LM stages timed too.
    r = run([a.kztts, "bench", "-m", a.tiny, "--frames", "3", "--repeat", "2",
             "--codec-precision", "f32,winograd", "--json"])
    try:
        j = json.loads(r.stdout)
    except ValueError:
        j = {}
    v = j.get("variants", [])
    check(r.returncode == 0 and j.get("mode") == "full-compare" and len(v) == 2
          and all(x.get("codec_ms_per_frame", 0) > 0 and x.get("lm_ms_per_frame", 0) > 0
                  and x["codec_ms_per_frame"] + x["lm_ms_per_frame"]
                  <= x["max_ms_per_frame"] * 1.5 for x in v),
          f"bench compare, pipeline: {r.returncode} {r.stderr.decode()} {r.stdout[:400]}")
    # Schedules (pipeline) and models compared the same way; the axis is named.
    for opts, axis, names in ((["--schedule", "turns,overlap"], "schedule", ["turns", "overlap"]),
                              (["-m", a.tiny + "," + a.tiny, "--decoder-only"], "model",
                               [a.tiny, a.tiny])):
        r = run([a.kztts, "bench", "-m", a.tiny, "--frames", "3", "--repeat", "2", "--json"]
                + opts)
        try:
            j = json.loads(r.stdout)
        except ValueError:
            j = {}
        check(r.returncode == 0 and j.get("axis") == axis
              and [x.get("requested") for x in j.get("variants", [])] == names
              and all(x["median_ms_per_frame"] > 0 for x in j["variants"]),
              f"bench compare {axis}: {r.returncode} {r.stderr.decode()} {r.stdout[:300]}")
    r = run([a.kztts, "bench", "-m", a.tiny, "--decoder-only", "--frames", "2", "--repeat", "1",
             "--codec-precision", "f32,winograd"])
    check(r.returncode == 0 and b"in effect" in r.stdout and b"winograd" in r.stdout,
          f"bench compare text: {r.stderr.decode()}")
    for bad, words in ((["--decoder-only", "--codec-precision", "f32,bogus"], b"bogus"),
                       (["--decoder-only", "--codec-precision", "f32,"], b"two or more"),
                       (["--decoder-only", "--codec-precision", "f32,f32,f32,f32,f32,f32"],
                        b"at most"),
                       (["--codec-precision", "winograd,"], b"two or more"),
                       (["--schedule", "turns,sideways"], b"sideways"),
                       (["--decoder-only", "--schedule", "turns,overlap"], b"no schedule"),
                       (["--schedule", "turns,overlap", "--codec-precision", "f32,winograd"],
                        b"one thing at a time")):
        r = run([a.kztts, "bench", "-m", a.tiny, "--frames", "2", "--repeat", "1"] + bad)
        check(r.returncode == 2 and words in r.stderr and not r.stdout,
              f"bench {bad}: {r.returncode} {r.stderr.decode()}")


def check_bench_json(a):
    """Full pipeline with both limits given (no probes): JSON with a floor per stage."""
    r = run([a.kztts, "bench", "-m", a.tiny, "--frames", "3", "--repeat", "2", "--json",
             "--peak-gbs", "10", "--peak-gflops", "50"])
    try:
        j = json.loads(r.stdout)
    except ValueError:
        j = {}
    check(r.returncode == 0 and j.get("mode") == "full", f"bench --json: {r.stderr.decode()}")
    if not j:
        return
    check(j.get("chunk") == 0 and j["streaming"].get("chunks_per_run", 0) >= 1,
          f"bench --json: adaptive chunks by default, counted: {j.get('chunk')}")
    m = j["machine"]
    check(m["read_gbs"] == 10 and m["fma_gflops"] == 50 and m["read_source"] == "option",
          f"bench --json: --peak-gbs/--peak-gflops used: {m}")
    # Absent when the machine was too busy to run the probe's two threads at once.
    check(m.get("core_rt_ns") is None or 0 < m["core_rt_ns"] < 1e9,
          f"bench --json: core round trip absent or plausible: {m}")
    stages = {s["name"]: s for s in j["stages"]}
    for name, unit in (("talker", "gbs"), ("code predictor", "gbs"), ("codec decoder", "gflops")):
        s = stages.get(name, {})
        check(s.get(unit) is not None and (s.get("pct_of_floor") or 0) > 0
              and (s.get("floor_ms_per_frame") or 0) > 0, f"bench --json: stage {name}: {s}")
    check(j["model_load_ms"] > 0 and j["peak_rss_mb"] > 0 and j["streaming"]["rtf"] > 0
          and j["offline"]["rtf"] > 0, "bench --json: load, RSS, real-time factors")
    check((j.get("warmup_ms") or 0) > 0, f"bench --json: the warm-up run's time: {j.get('warmup_ms')}")
    floors = sum(s["floor_ms_per_frame"] for s in j["stages"] if s.get("floor_ms_per_frame"))
    check(floors > 0 and abs((j.get("floor_rtf") or 0) - floors / 80) <= 1e-5 * floors / 80,
          f"bench --json: floor_rtf = the stage floors' sum / 80 ms: {j.get('floor_rtf')}, "
          f"{floors / 80}")
    codec = stages.get("codec decoder", {}).get("ms_per_frame")
    check(j["streaming"].get("codec_ms_per_frame") == codec and codec
          and (j["offline"].get("codec_ms_per_frame") or 0) > 0,
          f"bench --json: the codec per frame streamed ({codec} in the stage row) and in the "
          f"offline pass: {j['streaming'].get('codec_ms_per_frame')}, "
          f"{j['offline'].get('codec_ms_per_frame')}")
    # The offline runs by stage: their parts add up to the runs' wall time per frame (what
    # no stage covers is the last part), within the rounding of JSON's 6 digits.
    off = j.get("offline_stages", {})
    parts = [off.get(f"{k}_ms_per_frame") for k in ("prefill", "talker", "code_predictor",
                                                     "sampling", "codec", "other")]
    check(off.get("runs") == 2 and None not in parts and all(p >= 0 for p in parts[:5])
          and abs(sum(parts) - j["offline"]["ms_per_frame"])
          <= 2e-6 * (sum(abs(p) for p in parts) + j["offline"]["ms_per_frame"])
          and parts[4] == j["offline"].get("codec_ms_per_frame") and parts[1] > 0,
          f"bench --json: offline_stages, --repeat runs whose parts add up to the offline "
          f"ms/frame: {off}, {j['offline']}")
    keys = [f"first_audio_{layout}_layout{c}_ms" for layout in ("non_streaming", "streaming")
            for c in ("", "_cached")]
    check(j.get("first_audio_layout_runs") == 2 and all((j.get(k) or 0) > 0 for k in keys),
          "bench --json: first audio per text layout, whole prompt and voice prefix cached, "
          f"the median of --repeat runs: {[j.get(k) for k in keys]}")
    # 3 role rows, 5 tag rows (nothink, think_bos, think_eos, speaker, pad), the text rows
    # (the bench's sentence by the model's own tokenizer: 12 tokens with the released one),
    # EOS and BOS: none taken from the prompt cache in the timed runs.
    r = run([a.kztts, "tokenize", "-m", a.tiny, "Hello, world! I am its transparent. 12"])
    n_text = len(r.stdout.split())
    check(n_text > 0 and j.get("prompt_rows") == 10 + n_text,
          f"bench --json: every timed run computes its whole prompt: {j.get('prompt_rows')}, "
          f"{n_text} text tokens")


def check_acceptance_script(a):
    """bench/acceptance.py on the tiny checkpoint (as both recipes): its numbers are the
    bench JSON's, its medians and pass counts follow from them (no timing is judged)."""
    script = os.path.join(a.source, "bench", "acceptance.py")
    r = run([sys.executable, script, "--kztts", a.kztts, "--q8", a.tiny, "--q4", a.tiny, "--rounds",
             "2", "--frames", "2", "--repeat", "1", "--json"])
    try:
        j = json.loads(r.stdout)
    except ValueError:
        j = {}
    check(r.returncode == 0 and len(j.get("rounds", [])) == 2 and len(j.get("targets", [])) == 18,
          f"acceptance.py: {r.returncode} {r.stderr.decode()}")
    if not j:
        return
    rows = {(t["recipe"], t["metric"]): t for t in j["targets"]}
    rtf = rows.get(("q4", "streaming RTF"), {})
    check(rtf.get("values") == [rd["q4"]["streaming"]["rtf"] for rd in j["rounds"]]
          and rtf.get("target") == 0.55, f"acceptance.py: q4 streaming RTF per round: {rtf}")
    codec = rows.get(("q8", "codec ms/frame (one pass)"), {})
    check(codec.get("values") == [rd["q8"]["offline"]["codec_ms_per_frame"] for rd in j["rounds"]]
          and "met" not in codec, f"acceptance.py: the one-pass codec, shown only: {codec}")
    cached = rows.get(("q8", "first audio ms (streaming text, voice cached)"), {})
    check(cached.get("values") == [rd["q8"]["first_audio_streaming_layout_cached_ms"]
                                   for rd in j["rounds"]] and "met" not in cached,
          f"acceptance.py: the cached streaming-layout first audio, shown only: {cached}")
    floor = rows.get(("q4", "floor RTF (every stage at its limit)"), {})
    check(floor.get("values") == [rd["q4"]["floor_rtf"] for rd in j["rounds"]]
          and all(v > 0 for v in floor["values"]) and "met" not in floor,
          f"acceptance.py: the floor RTF, shown only: {floor}")
    forms = rows.get(("q8", "codec forms stored (1 = yes)"), {})
    check(forms.get("values") == [0, 0] and [rd["q8"]["codec_forms_stored"] for rd in j["rounds"]]
          == [False, False], f"acceptance.py: a directory has no stored codec forms: {forms}")
    for t in j["targets"]:
        v = t["values"]
        ok = len(v) == 2 and t["median"] == (v[0] + v[1]) / 2
        if t["target"] is not None:
            ok = ok and t["met"] == sum(x <= t["target"] for x in v)
        check(ok, f"acceptance.py: median and pass count of {t}")
    r = run([sys.executable, script, "--q8", a.tiny, "--q4", a.tiny, "--rounds", "0"])
    check(r.returncode != 0 and b"--rounds" in r.stderr and not r.stdout,
          f"acceptance.py --rounds 0 refused: {r.returncode} {r.stderr.decode()}")
    missing = os.path.join(a.work, "no_such_model.gguf")
    r = run([sys.executable, script, "--kztts", a.kztts, "--q8", missing, "--q4", a.tiny,
             "--rounds", "1", "--frames", "2", "--repeat", "1"])
    check(r.returncode != 0 and b"no_such_model.gguf" in r.stderr and not r.stdout,
          f"acceptance.py with a missing model: {r.returncode} {r.stderr.decode()}")


def check_ab_script(a):
    """bench/ab.py with the same binary as old and new on the tiny checkpoint: the rounds
    alternate the order, every run carries the bench JSON's metrics, the table names each
    metric, and bad options are refused (no timing is judged)."""
    script = os.path.join(a.source, "bench", "ab.py")
    base = [sys.executable, script, "--old", a.kztts, "--new", a.kztts, "-m", a.tiny,
            "--frames", "2", "--repeat", "1"]
    r = run(base + ["--rounds", "2", "--json"])
    try:
        runs = json.loads(r.stdout).get("runs", [])
    except ValueError:
        runs = []
    check(r.returncode == 0 and [(x["round"], x["binary"]) for x in runs]
          == [(0, "old"), (0, "new"), (1, "new"), (1, "old")],
          f"ab.py --json: the order of the runs: {r.returncode} {r.stderr.decode()} {runs}")
    for x in runs:
        m = x["metrics"]
        check(m.get("talker ms/frame", 0) > 0 and m.get("floor RTF", 0) > 0
              and abs(m["offline RTF / floor RTF"] - m["offline RTF"] / m["floor RTF"]) < 1e-9,
              f"ab.py: the metrics of a run: {m}")
    r = run(base + ["--rounds", "1"])
    lines = r.stdout.decode().splitlines()
    ratio = re.compile(r"^talker ms/frame .* \d+\.\d{3}$")
    check(r.returncode == 0 and any(ratio.match(ln) for ln in lines)
          and any(ln.startswith("DRAM probe GB/s") for ln in lines),
          f"ab.py table: {r.returncode} {r.stdout.decode()} {r.stderr.decode()}")
    r = run(base + ["--rounds", "0"])
    check(r.returncode != 0 and b"--rounds" in r.stderr and not r.stdout,
          f"ab.py --rounds 0 refused: {r.returncode} {r.stderr.decode()}")


if __name__ == "__main__":
    main()
