"""`kztts quality` on tiny checkpoints: teacher-forced logit error and top-1 agreement of a
model against a reference.

Cases (each run with --json, the object parsed; every run's margin report, REF's top-2
margins and the agreement by margin band, must add up to its totals):
  tiny vs itself                   error exactly 0, agreement exactly 100 %
  tiny vs tiny with another seed   (tools/make_checkpoint.py --seed 1, same config) error > 0,
                                   agreement < 100 %
  tiny (bf16) vs an f32 original   the f32 checkpoint is tiny's weights plus random low
                                   mantissa bits that round back to tiny's bf16 values, so
                                   tiny is exactly its bf16 rounding: 0 < error < 1e-2
  tiny_1b7 vs tiny                 other hidden size: exit 1, one line naming the key
  bad command lines                exit 2, one line naming the problem
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

from testlib import check, finish, link_copy

TEXT_IDS = "9707,11,1879,0,358,1079,1181,17821,13,220,16,17"
FRAMES = 40
CP_STEPS = 15


def quality(kztts, model, ref, extra=(), json_out=True):
    cmd = [kztts, "quality", "-m", model, "--ref", ref, "--frames", str(FRAMES),
           "--threads", "2"] + (["--json"] if json_out else []) + list(extra)
    if "--token-ids" not in extra:
        cmd += ["--token-ids", TEXT_IDS]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def measure(name, kztts, model, ref):
    """Runs the command and returns the parsed JSON object, or None after a failed check."""
    r = quality(kztts, model, ref)
    check(r.returncode == 0, f"{name}: exit status {r.returncode}, stderr {r.stderr.strip()!r}")
    if r.returncode != 0:
        return None
    q = json.loads(r.stdout)
    check(q["frames"] == FRAMES, f"{name}: frames {q['frames']}")
    check(q["talker"]["compared"] == FRAMES, f"{name}: talker rows {q['talker']['compared']}")
    check(q["code_predictor"]["compared"] == FRAMES * CP_STEPS,
          f"{name}: code predictor rows {q['code_predictor']['compared']}")
    check(q["ref_ms"] > 0 and q["model_ms"] > 0, f"{name}: times {q['ref_ms']}, {q['model_ms']}")
    for stage in ("talker", "code_predictor"):
        s = q[stage]
        print(f"{name}: {stage} rel. error {s['rel_error']:.3e} (worst frame "
              f"{s['max_frame_rel_error']:.3e}), top-1 agreement {s['top1_agreement']:.4f}, "
              f"REF margin median {s['ref_margin_median']:.4f}, largest flipped "
              f"{s['max_flipped_margin']}")
        check_margins(name, stage, s)
    return q


def check_margins(name, stage, s):
    """The margin report agrees with the totals: the bands partition the compared rows and
    their agreements, quantiles are ordered, and a flipped row exists exactly when the
    agreement is below 1 (its margin then within the last band that lost a row)."""
    bands = s["agreement_by_margin"]
    check(len(bands) == 3 and bands[0]["from"] == 0 and bands[-1]["below"] is None,
          f"{name}: {stage} bands {bands}")
    check(sum(b["compared"] for b in bands) == s["compared"] and
          sum(b["agree"] for b in bands) == s["agree"],
          f"{name}: {stage} bands do not add up to {s['agree']} / {s['compared']}: {bands}")
    check(0 < s["ref_margin_p10"] <= s["ref_margin_median"],
          f"{name}: {stage} margins p10 {s['ref_margin_p10']} median {s['ref_margin_median']}")
    flipped = s["max_flipped_margin"]
    check((flipped is None) == (s["agree"] == s["compared"]),
          f"{name}: {stage} largest flipped margin {flipped} with {s['agree']} / "
          f"{s['compared']} agreeing")
    if flipped is not None:
        lossy = [b for b in bands if b["agree"] < b["compared"]]
        top = lossy[-1]
        check(top["from"] <= flipped and (top["below"] is None or flipped < top["below"]),
              f"{name}: {stage} largest flipped margin {flipped} outside its band {top}")


def test_self(kztts, tiny):
    q = measure("self", kztts, tiny, tiny)
    for stage in ("talker", "code_predictor") if q else ():
        s = q[stage]
        check(s["rel_error"] == 0 and s["max_frame_rel_error"] == 0,
              f"self: {stage} error {s['rel_error']} / {s['max_frame_rel_error']}, want 0")
        check(s["top1_agreement"] == 1 and s["agree"] == s["compared"],
              f"self: {stage} agreement {s['top1_agreement']}, want 1")
    r = quality(kztts, tiny, tiny, json_out=False)
    check(r.returncode == 0 and "talker (codebook 0)" in r.stdout and "100.00 %" in r.stdout,
          f"self, text output: {r.returncode} {r.stdout!r}")
    check("agreement by margin" in r.stdout and "largest flipped none" in r.stdout,
          f"self, text output lacks the margin report: {r.stdout!r}")


def test_other_seed(py, kztts, source, tiny, work):
    other = os.path.join(work, "tiny_seed1")
    subprocess.run([py, os.path.join(source, "tools", "make_checkpoint.py"), "--preset", "tiny",
                    "--out", other, "--seed", "1"], check=True, capture_output=True)
    q = measure("other seed", kztts, tiny, other)
    for stage in ("talker", "code_predictor") if q else ():
        s = q[stage]
        check(s["rel_error"] > 0 and s["max_frame_rel_error"] >= s["rel_error"] * 0.999,
              f"other seed: {stage} error {s['rel_error']} / {s['max_frame_rel_error']}")
        check(s["top1_agreement"] < 1, f"other seed: {stage} agreement {s['top1_agreement']}")


def read_st(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    return json.loads(data[8:8 + n]), data[8 + n:]


def write_st(path, header, tensors):
    """tensors: name -> bytes, laid out in name order."""
    offset, parts = 0, []
    for name in sorted(tensors):
        header[name]["data_offsets"] = [offset, offset + len(tensors[name])]
        offset += len(tensors[name])
        parts.append(tensors[name])
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(parts))


def make_f32_original(tiny, dst):
    """Copy of tiny whose model.safetensors is F32: each bf16 value with random low 15
    mantissa bits added, which round to nearest back to the same bf16 value."""
    link_copy(tiny, dst)
    path = os.path.join(dst, "model.safetensors")
    header, body = read_st(path)
    rng = np.random.default_rng(7)
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        check(info["dtype"] == "BF16", f"f32: {name} is {info['dtype']}, expected BF16")
        a, b = info["data_offsets"]
        hi = np.frombuffer(body[a:b], dtype="<u2").astype(np.uint32) << 16
        low = rng.integers(0, 0x8000, size=hi.shape, dtype=np.uint32)
        tensors[name] = (hi | low).astype("<u4").tobytes()
        info["dtype"] = "F32"
    os.unlink(path)
    write_st(path, header, tensors)
    return dst


def test_f32_vs_bf16(kztts, tiny, work):
    f32 = make_f32_original(tiny, os.path.join(work, "tiny_f32"))
    q = measure("bf16 vs f32", kztts, tiny, f32)
    for stage in ("talker", "code_predictor") if q else ():
        s = q[stage]
        check(0 < s["rel_error"] < 1e-2 and s["max_frame_rel_error"] < 1e-2,
              f"bf16 vs f32: {stage} error {s['rel_error']} / {s['max_frame_rel_error']}")
        check(s["top1_agreement"] > 0.9, f"bf16 vs f32: {stage} agreement {s['top1_agreement']}")


def expect_error(name, r, status, message):
    err = r.stderr.strip()
    check(r.returncode == status, f"{name}: exit status {r.returncode}, want {status} ({err!r})")
    check(message in err, f"{name}: message {err!r} lacks {message!r}")
    check(len(err.splitlines()) == 1, f"{name}: expected one line on stderr, got {err!r}")
    check(r.stdout == "", f"{name}: printed {r.stdout!r}")
    print(f"ok   {name}: {err}")


def test_errors(kztts, tiny, tiny_1b7, work):
    expect_error("config mismatch", quality(kztts, tiny_1b7, tiny), 1, "hidden_size")
    expect_error("config mismatch, swapped", quality(kztts, tiny, tiny_1b7), 1, "differ")
    expect_error("missing model", quality(kztts, os.path.join(work, "nope"), tiny), 1, "nope")
    # A command-line value the model refuses is a bad command line too.
    expect_error("unknown speaker", quality(kztts, tiny, tiny, ["-s", "nobody"]), 2, "nobody")
    bad = [
        ("unknown option", ["--frobnicate"], "unknown option"),
        ("zero frames", ["--frames", "0"], "--frames"),
        ("too many frames", ["--frames", "5000"], "--frames"),
        ("bad threads", ["--threads", "-1"], "--threads"),
        ("bad token ids", ["--token-ids", "1,x"], "--token-ids"),
        ("text and token ids", ["--token-ids", "1,2", "TEXT"], "not both"),
        ("option without value", ["--token-ids", TEXT_IDS, "--frames"], "needs a value"),
    ]
    for name, extra, message in bad:
        expect_error(name, quality(kztts, tiny, tiny, extra), 2, message)
    r = subprocess.run([kztts, "quality", "-m", tiny], capture_output=True, text=True)
    expect_error("no reference", r, 2, "--ref")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kztts", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--tiny", required=True)
    ap.add_argument("--tiny-1b7", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    test_self(a.kztts, a.tiny)
    test_other_seed(sys.executable, a.kztts, a.source, a.tiny, a.work)
    test_f32_vs_bf16(a.kztts, a.tiny, a.work)
    test_errors(a.kztts, a.tiny, a.tiny_1b7, a.work)
    finish("test_quality")


if __name__ == "__main__":
    main()
