"""Shared helpers of the Python model tests: a check counter that prints the closing
"N passed, N failed" line CI reads, a cheap copy of a checkpoint folder, and test audio
as a WAV file."""
import json
import math
import os
import shutil
import sys
import wave

_counts = {"passed": 0, "failed": 0}


def check(cond, what):
    """Counts one assertion; prints what failed."""
    if cond:
        _counts["passed"] += 1
    else:
        _counts["failed"] += 1
        print("FAIL:", what, flush=True)


def finish(name):
    """Prints the closing line and exits non-zero on any failure (or no check at all)."""
    print(f"{name}: {_counts['passed']} passed, {_counts['failed']} failed")
    sys.exit(1 if _counts["failed"] or not _counts["passed"] else 0)


def edit_json(path, fn):
    """Applies fn to the JSON object in the file at path and writes it back."""
    with open(path) as f:
        obj = json.load(f)
    fn(obj)
    with open(path, "w") as f:
        json.dump(obj, f)


def expect_refused(name, r, *needles):
    """r (a text-mode CompletedProcess) failed at run time: exit 1, one line on stderr that
    holds every needle."""
    err = r.stderr.strip()
    check(r.returncode == 1, f"{name}: exit {r.returncode} (want 1), stderr {err!r}")
    check(len(err.splitlines()) == 1, f"{name}: expected one line on stderr, got {err!r}")
    for n in needles:
        check(n in err, f"{name}: message {err!r} lacks {n!r}")
    print(f"ok   {name}: {err}", flush=True)


def link_copy(src, dst, copy_suffixes=(".json", ".txt")):
    """Copy of a checkpoint folder: files with the given suffixes (the configs and the
    tokenizer files) are copied, so a test can edit or replace them without writing
    through a link into the original; everything else is a symlink to the original."""
    shutil.rmtree(dst, ignore_errors=True)
    for root, _, files in os.walk(src):
        rel = os.path.relpath(root, src)
        os.makedirs(os.path.join(dst, rel), exist_ok=True)
        for f in files:
            s, d = os.path.join(root, f), os.path.join(dst, rel, f)
            if f.endswith(copy_suffixes):
                shutil.copy(s, d)
            else:
                os.symlink(os.path.abspath(s), d)
    return dst


def gguf_tensor_offsets(path):
    """{tensor name: data offset} from a GGUF v3 file's header (little-endian)."""
    import struct
    with open(path, "rb") as f:
        d = f.read()
    _, _, n_tensors, n_kv = struct.unpack("<IIQQ", d[:24])
    pos = 24
    fixed = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def string(p):
        n = struct.unpack("<Q", d[p:p + 8])[0]
        return d[p + 8:p + 8 + n].decode(), p + 8 + n

    def skip(t, p):
        if t == 8:
            return string(p)[1]
        if t == 9:
            et, n = struct.unpack("<IQ", d[p:p + 12])
            p += 12
            for _ in range(n):
                p = skip(et, p)
            return p
        return p + fixed[t]

    for _ in range(n_kv):
        _, pos = string(pos)
        pos = skip(struct.unpack("<I", d[pos:pos + 4])[0], pos + 4)
    offsets = {}
    for _ in range(n_tensors):
        name, pos = string(pos)
        n_dims = struct.unpack("<I", d[pos:pos + 4])[0]
        pos += 4 + 8 * n_dims
        offsets[name] = struct.unpack("<Q", d[pos + 4:pos + 12])[0]
        pos += 12
    return offsets


def write_wav(path, pcm, rate):
    """16-bit mono WAV of samples in [-1, 1] (a sequence of floats, rounded to nearest);
    returns the samples as a reader of the file gets them, as float32 numpy values."""
    import numpy as np  # only the tests that write audio need numpy
    q = np.clip(np.round(np.asarray(pcm) * 32767), -32768, 32767).astype("<i2")
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(q.tobytes())
    return q.astype(np.float32) / 32768.0


def speechlike(seconds, seed, rate):
    """A voiced tone gliding around 140 Hz with 11 harmonics, pulsing at 3 Hz, plus a little
    noise: audio the encoders treat like speech (numpy float64 samples)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    f0 = 140 + 20 * np.sin(2 * math.pi * 0.7 * t)
    phase = 2 * math.pi * np.cumsum(f0) / rate
    x = sum(np.sin(k * phase) / k for k in range(1, 12))
    env = 0.5 + 0.5 * np.sin(2 * math.pi * 3 * t) ** 2
    return 0.3 * x * env / 3 + 0.01 * rng.standard_normal(t.size)
