"""Bad input to the CLI: every case must fail with a clear one-line error, the
documented exit status and no output file (not even a partial one).

Model files and codes files (`kztts decode`): each case copies the tiny checkpoint
(symlinking the files it does not change), breaks one thing, runs the CLI and checks:
exit code, the message names the problem (a substring), stderr is a single line, and
the output folder holds no audio and no temporary file afterwards.

Option values (every subcommand): each numeric option with values out of range,
negative, not a number, overflowing, empty, with trailing or leading garbage; each
named option with an unknown name; each string option empty; each option without
its value. All exit 2 with one line naming the option, before any work. Then the
values only the model can judge (exit 2 too), the output format from --format and
the extension of -o, a NUL byte in text on stdin (exit 1), and --temperature 0 as
--greedy. generation_config.json's top_k beyond the vocabularies is top-k off, not a bad
command line.
"""
import argparse
import json
import os
import shutil
import struct
import subprocess

from testlib import check, edit_json, finish, link_copy


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


# --- option values ---------------------------------------------------------------------

# Every numeric option: (command, option, kind, lo, hi). kind: "int" (integer in [lo, hi]),
# "num" (number in [lo, hi]) or "above" (number in (lo, hi]).
NUMERIC = [
    ("synth", "--seed", "int", 0, 10 ** 15),
    ("synth", "--temperature", "num", 0, 100),
    ("synth", "--top-k", "int", 0, 1 << 20),
    ("synth", "--top-p", "above", 0, 1),
    ("synth", "--repetition-penalty", "above", 0, 100),
    ("synth", "--frames", "int", 1, 100000),
    ("synth", "--max-frames", "int", 1, 100000),
    ("synth", "--first-chunk", "int", 1, 1024),
    ("synth", "--chunk", "int", 0, 1024),
    ("synth", "--max-utterance", "int", 0, 1 << 20),
    ("synth", "--threads", "int", 0, 256),
    ("synth", "--threads-lm", "int", 0, 256),
    ("synth", "--threads-codec", "int", 0, 256),
    ("decode", "--threads", "int", 0, 256),
    ("decode", "--chunk", "int", 1, 1024),
    ("bench", "--frames", "int", 1, 100000),
    ("bench", "--threads", "int", 0, 256),
    ("bench", "--chunk", "int", 0, 1024),
    ("bench", "--threads-lm", "int", 0, 256),
    ("bench", "--threads-codec", "int", 0, 256),
    ("bench", "--repeat", "int", 1, 1000),
    ("bench", "--seed", "int", 0, 10 ** 15),
    ("bench", "--peak-gbs", "num", 0, 1e6),
    ("bench", "--peak-gflops", "num", 0, 1e9),
    ("quality", "--frames", "int", 1, 1024),
    ("quality", "--threads", "int", 0, 256),
]

# Options that take one of a set of names: (command, option, a name not in the set).
NAMED = [
    ("synth", "--isa", "sse"), ("synth", "--codec-precision", "f8"), ("synth", "--schedule", "x"),
    ("synth", "--layout", "sideways"), ("synth", "--split", "gpt2"), ("synth", "--format", "wma"),
    ("decode", "--isa", "sse"), ("decode", "--codec-precision", "f8"),
    ("decode", "--format", "wma"), ("info", "--isa", "sse"), ("info", "--codec-precision", "f8"),
    ("bench", "--isa", "sse"), ("bench", "--codec-precision", "f8"),
    ("bench", "--schedule", "bogus"), ("bench", "--schedule", "turns,bogus"),
    ("bench", "--codec-precision", "f32,f8"), ("quality", "--isa", "sse"),
    ("synth", "--kv-cache", "f8"), ("bench", "--kv-cache", "bf16"), ("bench", "--kv-cache", "f32,q8"),
    ("quality", "--kv-cache", "f64"),
    ("tokenize", "--split", "gpt2"), ("quantize", "--codec-forms", "f8"),
]

# Options that take a string: an empty one is refused (`-l ""` is not "auto").
STRINGS = [
    ("synth", ["--model", "--output", "--speaker", "--language", "--instruct", "--token-ids",
               "--dump-codes"]),
    ("decode", ["--model", "--codes", "--output"]),
    ("tokenize", ["--model"]), ("speakers", ["--model"]), ("info", ["--model"]),
    ("bench", ["--model"]), ("quality", ["--model", "--ref", "--speaker", "--language",
                                          "--token-ids"]),
    ("quantize", ["--model", "--output", "--type"]),
]


def bad_numbers(kind, lo, hi):
    """Values every numeric option must refuse, with what each tries."""
    below = str(lo) if kind == "above" else str(lo - 1) if kind == "int" else f"{lo - 0.5:g}"
    above = str(hi + 1) if kind == "int" else f"{hi * 2:g}"
    values = [("below the range", below), ("above the range", above), ("negative", "-1"),
              ("not a number", "abc"), ("overflowing", "99999999999999999999"), ("empty", ""),
              ("leading blank", " 5"), ("trailing blank", "1 ")]
    if kind == "int":
        values += [("trailing garbage", "5x"), ("a fraction", "1.5"), ("hex", "0x10")]
    else:
        values += [("trailing garbage", "0.5x"), ("nan", "nan"), ("infinite", "inf"),
                   ("overflowing exponent", "1e999")]
    return values


def base_command(cmd, a, out_dir):
    """A valid command line for cmd that runs quickly on the tiny checkpoint (should a bad
    value slip through, the case fails on its exit status instead of hanging)."""
    codes = os.path.join(a.golden, "codes_1.txt")
    return {
        "synth": ["synth", "-m", a.tiny, "-s", "ryan", "--token-ids", "9707", "--frames", "2",
                  "-o", os.path.join(out_dir, "out.wav")],
        "decode": ["decode", "-m", a.tiny, "--codes", codes,
                   "-o", os.path.join(out_dir, "out.wav")],
        "bench": ["bench", "-m", a.tiny, "--decoder-only", "--frames", "2", "--repeat", "1",
                  "--peak-gbs", "1", "--peak-gflops", "1"],
        "quality": ["quality", "-m", a.tiny, "--ref", a.tiny, "--token-ids", "9707",
                    "--frames", "2"],
        "tokenize": ["tokenize", "-m", a.tiny, "hi"],
        "speakers": ["speakers", "-m", a.tiny],
        "info": ["info", "-m", a.tiny],
        "quantize": ["quantize", "-m", a.tiny, "-o", os.path.join(out_dir, "out.gguf")],
    }[cmd]


def expect_exit(a, name, cmd, extra, status, message):
    """Runs `kztts cmd` (its valid base command line + extra) in a fresh output folder:
    exit status, one line on stderr holding message, nothing on stdout, nothing written."""
    out_dir = os.path.join(a.work, "opt_" + "".join(c if c.isalnum() else "_" for c in name))
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    r = subprocess.run([a.kztts] + base_command(cmd, a, out_dir) + extra,
                       capture_output=True, timeout=120)
    err = r.stderr.decode("utf-8", "replace").strip()
    check(r.returncode == status, f"{name}: exit status {r.returncode}, want {status} ({err!r})")
    check(message in err, f"{name}: message {err!r} lacks {message!r}")
    check(len(err.splitlines()) == 1, f"{name}: expected one line on stderr, got {err!r}")
    check(r.stdout == b"", f"{name}: printed {r.stdout[:200]!r}")
    check(os.listdir(out_dir) == [], f"{name}: output folder not empty: {os.listdir(out_dir)}")


def option_values(a):
    """Every option value the command line can refuse by itself: exit 2 naming the option."""
    n = 0
    for cmd, option, kind, lo, hi in NUMERIC:
        for what, value in bad_numbers(kind, lo, hi):
            expect_exit(a, f"{cmd} {option} {what}", cmd, [option, value], 2, option)
            n += 1
    for cmd, option, value in NAMED:
        expect_exit(a, f"{cmd} {option} {value}", cmd, [option, value], 2, f"{option} must be")
        expect_exit(a, f"{cmd} {option} empty", cmd, [option, ""], 2, option)
        n += 2
    for cmd, options in STRINGS:
        for option in options:
            expect_exit(a, f"{cmd} {option} empty", cmd, [option, ""], 2, option)
            n += 1
    for cmd, option in (("synth", "--seed"), ("decode", "--chunk"), ("bench", "--repeat"),
                        ("quality", "--frames"), ("tokenize", "--split"), ("info", "--isa"),
                        ("quantize", "--type"), ("speakers", "--model")):
        expect_exit(a, f"{cmd} {option} without a value", cmd, [option], 2, f"{option} needs a value")
        n += 1
    print(f"ok   {n} bad option values, each exit 2 with one line naming the option")


def model_judged(a):
    """Values only the model can judge, and options that contradict each other: exit 2."""
    # Integers print as integers (not "1.04858e+06"); the tiny talker has 3072 codes.
    expect_exit(a, "top-k beyond the vocabulary", "synth", ["--top-k", str(1 << 20)], 2,
                "top_k 1048576 out of range [-1, 3072]")
    expect_exit(a, "unknown speaker", "synth", ["-s", "nobody"], 2, "nobody")
    expect_exit(a, "unknown language", "synth", ["-l", "klingon"], 2, "klingon")
    expect_exit(a, "frames above max-frames", "synth", ["--frames", "5", "--max-frames", "2"], 2,
           "--max-frames")
    expect_exit(a, "quality with an unknown speaker", "quality", ["-s", "nobody"], 2, "nobody")
    # Streamed text is spoken in the streaming layout: asking for the other one contradicts it.
    line = base_command("synth", a, a.work)
    i = line.index("--token-ids")
    line[i:i + 2] = ["--stream-text", "--layout", "non-streaming"]
    r = subprocess.run([a.kztts] + line, input=b"Hello there.", capture_output=True, timeout=120)
    err = r.stderr.decode("utf-8", "replace").strip()
    check(r.returncode == 2 and "layout" in err and len(err.splitlines()) == 1,
          f"--stream-text --layout non-streaming: exit {r.returncode} ({err!r})")
    check(not os.path.exists(os.path.join(a.work, "out.wav")),
          "--stream-text --layout non-streaming wrote out.wav")
    # bench's cloned voice: options that contradict each other, and a CustomVoice model.
    expect_exit(a, "bench --ref-text alone", "bench", ["--ref-text", "hi"], 2,
                "--ref-text and --xvector-only go with --ref-audio")
    expect_exit(a, "bench --ref-audio alone", "bench", ["--ref-audio", "ref.wav"], 2,
                "--ref-audio needs --ref-text")
    expect_exit(a, "bench --voice --decoder-only", "bench", ["--voice", "v.kzvoice"], 2,
                "go with the full pipeline")
    r = subprocess.run([a.kztts, "bench", "-m", a.tiny, "--frames", "2", "--repeat", "1",
                        "--voice", "v.kzvoice"], capture_output=True, timeout=120)
    err = r.stderr.decode("utf-8", "replace").strip()
    check(r.returncode == 2 and "--voice needs a Base model" in err and len(err.splitlines()) == 1
          and r.stdout == b"", f"bench --voice on CustomVoice: exit {r.returncode} ({err!r})")
    print("ok   values the model refuses exit 2")


def generation_top_k(a):
    """generation_config.json's top_k / subtalker_top_k beyond the vocabularies (the official
    sampler takes min(top_k, vocabulary)) speak as top-k off, not as a bad command line."""
    codes = {}
    for name, top_k, cp_top_k in (("beyond", 5000, 2500), ("off", 0, 0)):
        model = copy_model(a.tiny, os.path.join(a.work, "gen_top_k_" + name))
        edit_json(os.path.join(model, "generation_config.json"),
                  lambda g: g.update(top_k=top_k, subtalker_top_k=cp_top_k, do_sample=True))
        line = base_command("synth", a, a.work)
        line[line.index("-m") + 1] = model
        line[line.index("--frames") + 1] = "6"
        path = os.path.join(a.work, f"gen_top_k_{name}.codes")
        r = subprocess.run([a.kztts] + line + ["--seed", "5", "--dump-codes", path],
                           capture_output=True, timeout=120)
        check(r.returncode == 0, f"generation_config top_k {top_k}: {r.stderr.decode()}")
        codes[name] = open(path).read() if r.returncode == 0 else name
    check(codes["beyond"] == codes["off"], "top_k beyond the vocabulary is not top-k off")
    print("ok   generation_config.json's top_k beyond the vocabulary is top-k off")


def output_formats(a):
    """--format names are case-insensitive; without it the extension of -o decides (any case,
    wav when there is none); an unknown extension without --format, an extension naming
    another format than --format, and flac/ogg to stdout exit 2 and write nothing."""
    for cmd in ("synth", "decode"):
        def out(name):
            return os.path.join(a.work, f"fmt_{cmd}", name)
        for name, extra, message in (
                ("unknown extension", ["-o", out("x.m4a")], "x.m4a"),
                ("extension against --format", ["-o", out("x.ogg"), "--format", "wav"],
                 "contradicts"),
                ("FLAC to stdout", ["-o", "-", "--format", "FLAC"], "stdout")):
            expect_exit(a, f"{cmd} {name}", cmd, extra, 2, message)
        shutil.rmtree(out(""), ignore_errors=True)
        os.makedirs(out(""))
        for extra, path, magic in ((["--format", "WAV", "-o", out("a.wav")], "a.wav", b"RIFF"),
                                   (["-o", out("B.FLAC")], "B.FLAC", b"fLaC"),
                                   (["--format", "Ogg", "-o", out("c.OGG")], "c.OGG", b"OggS"),
                                   (["--format", "OPUS", "-o", out("e.Opus")], "e.Opus", b"OggS"),
                                   (["-o", out("noext")], "noext", b"RIFF"),
                                   (["--format", "s16", "-o", out("d.raw")], "d.raw", None)):
            cmd_line = base_command(cmd, a, out("")) + extra
            r = subprocess.run([a.kztts] + cmd_line, capture_output=True, timeout=120)
            check(r.returncode == 0, f"{cmd} {extra}: {r.stderr.decode()}")
            data = open(out(path), "rb").read() if r.returncode == 0 else b""
            if magic:
                check(data[:4] == magic, f"{cmd} {extra}: starts with {data[:4]!r}, not {magic!r}")
            else:
                check(len(data) > 0 and data[:4] not in (b"RIFF", b"fLaC", b"OggS"),
                      f"{cmd} {extra}: raw s16 expected, got {data[:4]!r}")
        check(sorted(os.listdir(out(""))) == sorted(["a.wav", "B.FLAC", "c.OGG", "e.Opus",
                                                      "noext", "d.raw"]),
              f"{cmd}: files written: {os.listdir(out(''))}")
    print("ok   output formats: names in any case, the extension of -o, no silent other format")


def text_with_nul(a):
    """Text on stdin with a NUL byte is refused (the text would be cut there): exit 1, as
    `kztts tokenize` does, before the model loads."""
    for cmd in ("synth", "quality"):
        expect_nul(a, f"{cmd}: NUL byte in text on stdin", cmd)
    print("ok   a NUL byte in text on stdin exits 1")


def expect_nul(a, name, cmd):
    out_dir = os.path.join(a.work, "nul_" + cmd)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    line = base_command(cmd, a, out_dir)
    i = line.index("--token-ids")
    line[i:i + 2] = ["-"]  # the text comes from stdin instead
    r = subprocess.run([a.kztts] + line, input=b"Hello\0world", capture_output=True,
                       timeout=120)
    err = r.stderr.decode("utf-8", "replace").strip()
    check(r.returncode == 1, f"{name}: exit status {r.returncode}, want 1 ({err!r})")
    check("NUL byte at byte 5 of standard input" in err, f"{name}: message {err!r}")
    check(len(err.splitlines()) == 1, f"{name}: expected one line on stderr, got {err!r}")
    check(os.listdir(out_dir) == [], f"{name}: output folder not empty: {os.listdir(out_dir)}")


def temperature_zero(a):
    """--temperature 0 decodes greedily: the codes of --greedy, unlike a sampled run."""
    codes = {}
    for name, extra in (("greedy", ["--greedy"]), ("t0", ["--temperature", "0"]),
                        ("sampled", ["--seed", "3"])):
        path = os.path.join(a.work, f"{name}.codes")
        line = base_command("synth", a, a.work)
        line[line.index("--frames") + 1] = "8"
        line[line.index("-o") + 1] = os.path.join(a.work, f"{name}.wav")
        r = subprocess.run([a.kztts] + line + extra + ["--dump-codes", path],
                           capture_output=True, timeout=120)
        check(r.returncode == 0, f"synth {extra}: {r.stderr.decode()}")
        codes[name] = open(path).read() if r.returncode == 0 else name
    check(codes["t0"] == codes["greedy"], "--temperature 0 gives other codes than --greedy")
    check(codes["sampled"] != codes["greedy"], "sampling gives the greedy codes: a weak test")
    print("ok   --temperature 0 == --greedy")


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
    option_values(a)
    model_judged(a)
    generation_top_k(a)
    output_formats(a)
    text_with_nul(a)
    temperature_zero(a)
    finish("test_cli_errors")


if __name__ == "__main__":
    main()
