"""Bad input to `kztts decode`: every case must fail with a clear one-line error,
a non-zero exit status and no output file (not even a partial one).

Each case copies the tiny checkpoint (symlinking the files it does not change),
breaks one thing, runs the CLI and checks: exit code, the message names the
problem (a substring), stderr is a single line, and the output folder holds no
audio and no temporary file afterwards.
"""
import argparse
import json
import os
import shutil
import struct
import subprocess

from testlib import check, finish, link_copy


def copy_model(tiny, dst):
    """Copy of the tiny checkpoint with symlinks for the weights (edits replace the link)."""
    return link_copy(tiny, dst, copy_suffixes=(".json", ".txt"))


def codec_path(model):
    return os.path.join(model, "speech_tokenizer", "model.safetensors")


def read_st(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    return json.loads(data[8:8 + n]), data[8 + n:]


def write_st(path, header, body, raw_header=None):
    if os.path.islink(path):
        os.unlink(path)
    h = raw_header if raw_header is not None else json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + body)


def edit_codec(model, fn):
    header, body = read_st(codec_path(model))
    fn(header)
    write_st(codec_path(model), header, body)


def edit_bytes(model, fn):
    p = codec_path(model)
    with open(p, "rb") as f:
        data = f.read()
    os.unlink(p)
    with open(p, "wb") as f:
        f.write(fn(data))


def edit_json(path, fn):
    with open(path) as f:
        cfg = json.load(f)
    fn(cfg)
    with open(path, "w") as f:
        json.dump(cfg, f)


PRE_CONV = "decoder.pre_conv.conv.weight"


def set_offsets_past_end(h):
    h[PRE_CONV]["data_offsets"][1] += 10 ** 9


def set_dtype(h):
    h[PRE_CONV]["dtype"] = "I32"


def set_shape(h):
    s = h[PRE_CONV]["shape"]
    h[PRE_CONV]["shape"] = [s[0], s[1] * s[2], 1]


def drop_tensor(h):
    h["decoder.pre_conv.renamed"] = h.pop(PRE_CONV)


def model_cases(tiny, golden):
    codes = os.path.join(golden, "codes_7.txt")
    cfg = lambda m: os.path.join(m, "speech_tokenizer", "config.json")
    return [
        ("truncated safetensors", lambda m: edit_bytes(m, lambda d: d[:len(d) // 2]),
         codes, [], "model.safetensors"),
        ("header length past end",
         lambda m: edit_bytes(m, lambda d: struct.pack("<Q", 1 << 40) + d[8:]),
         codes, [], "model.safetensors"),
        ("corrupt header JSON",
         lambda m: edit_bytes(m, lambda d: d[:8] + b"x" + d[9:]), codes, [], "model.safetensors"),
        ("offsets past the end", lambda m: edit_codec(m, set_offsets_past_end), codes, [],
         PRE_CONV),
        ("wrong dtype", lambda m: edit_codec(m, set_dtype), codes, [], PRE_CONV),
        ("wrong shape", lambda m: edit_codec(m, set_shape), codes, [], PRE_CONV),
        ("missing tensor", lambda m: edit_codec(m, drop_tensor), codes, [], PRE_CONV),
        ("missing config.json", lambda m: os.unlink(cfg(m)), codes, [], "config.json"),
        ("malformed config.json",
         lambda m: open(cfg(m), "w").write('{"model_type": "qwen3_tts_tokenizer_12hz", '),
         codes, [], "config.json"),
        ("config value of the wrong type",
         lambda m: edit_json(cfg(m), lambda c: c["decoder_config"].update(latent_dim="wide")),
         codes, [], "latent_dim"),
        ("config disagrees with tensors",
         lambda m: edit_json(cfg(m), lambda c: c["decoder_config"].update(
             latent_dim=c["decoder_config"]["latent_dim"] * 2)),
         codes, [], "expected"),
        ("missing main config.json", lambda m: os.unlink(os.path.join(m, "config.json")), codes,
         [], "config.json"),
    ]


def codes_cases(work):
    def write(name, text):
        p = os.path.join(work, name)
        with open(p, "w") as f:
            f.write(text)
        return p
    row = " ".join(["5"] * 16)
    return [
        ("code 2048", write("c_big.txt", row + "\n" + " ".join(["2048"] + ["1"] * 15) + "\n"),
         [], "outside [0, 2047]"),
        ("negative code", write("c_neg.txt", " ".join(["-1"] + ["1"] * 15) + "\n"), [],
         "outside [0, 2047]"),
        ("15 codes on a line", write("c_15.txt", row + "\n" + " ".join(["1"] * 15) + "\n"), [],
         "expected 16 codes"),
        ("17 codes on a line", write("c_17.txt", " ".join(["1"] * 17) + "\n"), [],
         "expected 16 codes"),
        ("empty codes file", write("c_empty.txt", ""), [], "empty"),
        ("not a number", write("c_nan.txt", " ".join(["x"] + ["1"] * 15) + "\n"), [],
         "not an integer"),
        ("missing codes file", os.path.join(work, "does_not_exist.txt"), [], "does_not_exist"),
        ("unknown option", write("c_ok.txt", row + "\n"), ["--frobnicate"], "unknown option"),
        ("bad thread count", os.path.join(work, "c_ok.txt"), ["--threads", "-3"], "--threads"),
        ("bad chunk", os.path.join(work, "c_ok.txt"), ["--chunk", "0"], "--chunk"),
        ("unknown format", os.path.join(work, "c_ok.txt"), ["--format", "mp9"], "mp9"),
        ("NUL byte in a codes file", write("c_nul.txt", row + "\n5 5\0 5\n"), [],
         "c_nul.txt:2: NUL byte at column 4"),
        ("line too long", write("c_long.txt", " ".join(["5"] * 3000) + "\n"), [],
         "c_long.txt:1: line too long"),
        ("code beyond long", write("c_huge.txt", " ".join(["99999999999999999999"] + ["1"] * 15)),
         [], "outside [0, 2047]"),
        ("control byte in a code", write("c_vt.txt", " ".join(["5\x0b"] + ["1"] * 15) + "\n"),
         [], "'5?' is not an integer"),
    ]


def run_case(kztts, name, model, codes, extra, expect, work):
    out_dir = os.path.join(work, "out_" + name.replace(" ", "_"))
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, "out.wav")
    cmd = [kztts, "decode", "-m", model, "--codes", codes, "-o", out] + extra
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    err = r.stderr.strip()
    check(r.returncode not in (0,) and r.returncode < 128,
          f"{name}: exit status {r.returncode} (want 1 or 2, no crash)")
    check(expect in err, f"{name}: message {err!r} lacks {expect!r}")
    check(len(err.splitlines()) == 1, f"{name}: expected one line on stderr, got {err!r}")
    check(os.listdir(out_dir) == [], f"{name}: output folder not empty: {os.listdir(out_dir)}")
    print(f"ok   {name}: {err}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kztts", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--tiny", required=True)
    ap.add_argument("--golden", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    if os.path.exists(a.work):
        shutil.rmtree(a.work)
    os.makedirs(a.work)
    for name, breaker, codes, extra, expect in model_cases(a.tiny, a.golden):
        model = copy_model(a.tiny, os.path.join(a.work, "model_" + name.replace(" ", "_")))
        breaker(model)
        run_case(a.kztts, name, model, codes, extra, expect, a.work)
    run_case(a.kztts, "missing model dir", os.path.join(a.work, "nope"),
             os.path.join(a.golden, "codes_1.txt"), [], "nope", a.work)
    for name, codes, extra, expect in codes_cases(a.work):
        run_case(a.kztts, name, a.tiny, codes, extra, expect, a.work)
    finish("test_cli_errors")


if __name__ == "__main__":
    main()
