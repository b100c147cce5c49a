"""The CLI on the remapped checkpoint (make_checkpoint.py --ids remapped), where no id or
size is where the released models have it: its own small tokenizer, moved special,
codec, language and speaker ids, 8 codebooks of 1000, codec vocabulary 1900, 16 kHz
and 1280 samples per frame.

Greedy parity with the PyTorch reference (goldens of make_fixture.py, which tokenized
the text with tools/reference/tokenizer.py from the checkpoint's own files): for each
case in GOLDEN/remap_cases.json the codes of `synth` from text, from --token-ids
(the golden's text ids) and, for the streaming-text layout, from text streamed
piece by piece on stdin (--stream-text) equal the reference's codes; the same from a
GGUF of the checkpoint; a text starting with newlines streams as it speaks at once. `tokenize` gives the reference tokenizer's ids. Output: a
16 kHz WAV of frames * 1280 samples; --format f32 to stdout equals the file. Codes:
`decode` of the golden codes equals the reference waveform (SNR >= 60 dB), a codes
file with 16 columns or a code >= 1000 is refused. Long text: every utterance is
whole frames of 1280 samples, joined by a 10 ms fade (160 samples at 16 kHz). Load-time validation, each a one-line error naming
the key or tensor, nothing written: a text id outside text_vocab_size, a codec id
(a class default) outside the codec vocabulary, a speaker id outside it, a codec
codebook size or count that disagrees with its tensors, a tokenizer id outside the
text embedding; token ids on a copy without tokenizer files are refused (the
newline id is unknown). Bench: `bench` (whole pipeline: its text tokenized by the
checkpoint's own tokenizer) and its comparisons (a precision list; tiny and remapped in
one -m list, each decoding codes of its own shape) run, and a copy at 32 kHz counts its
real-time factor in 40 ms frames; `quality` names the code predictor's 7 codebooks.
"""
import argparse
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import time

from testlib import check, finish, link_copy

SPF, RATE, GROUPS, CODEBOOK = 1280, 16000, 8, 1000


def run(kztts, args, stdin=None):
    return subprocess.run([kztts] + args, input=stdin, capture_output=True, timeout=300)


def golden(path):
    """{name: (dtype, shape, raw bytes)} of a safetensors file."""
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name != "__metadata__":
            b, e = t["data_offsets"]
            out[name] = (t["dtype"], t["shape"], data[8 + n + b:8 + n + e])
    return out


def golden_codes(path):
    _, shape, raw = golden(path)["codes"]
    flat = struct.unpack(f"<{len(raw) // 4}i", raw)
    return [list(flat[i * shape[1]:(i + 1) * shape[1]]) for i in range(shape[0])]


def read_codes(path):
    return [[int(v) for v in line.split()] for line in open(path).read().splitlines() if line]


def case_args(c):
    layout = c["layout"].replace("_", "-")
    args = ["-s", c["speaker"], "-l", c["language"], "--layout", layout, "--greedy",
            "--frames", str(c["frames"])]
    return args + (["-i", c["instruct"]] if c["instruct"] else [])


def synth_codes(k, model, args, work, name, stdin=None):
    """Runs synth; returns its dumped codes (None on failure) and the f32 audio bytes."""
    codes = os.path.join(work, name + ".codes")
    r = run(k, ["synth", "-m", model] + args + ["--dump-codes", codes, "-o", "-", "--format",
                                                "f32"], stdin)
    check(r.returncode == 0, f"{name}: {r.stderr.decode()}")
    return (read_codes(codes) if r.returncode == 0 else None), r.stdout


def streamed_codes(k, model, args, text, work, name, pieces=None):
    """--stream-text: the text (or the given pieces) arrives word by word on stdin, with
    pauses."""
    codes = os.path.join(work, name + ".codes")
    p = subprocess.Popen([k, "synth", "-m", model] + args +
                         ["--stream-text", "--dump-codes", codes, "-o", "-", "--format", "f32"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    words = text.split(" ")
    for piece in pieces or [(" " if i else "") + w for i, w in enumerate(words)]:
        p.stdin.write(piece.encode())
        p.stdin.flush()
        time.sleep(0.03)
    out, err = p.communicate(timeout=300)
    check(p.returncode == 0, f"{name}: {err.decode()}")
    return (read_codes(codes) if p.returncode == 0 else None), out


def parity(k, model, cases, work, label):
    """Text, token ids and streamed text give the reference's codes."""
    for c in cases:
        want = golden_codes(c["golden"])
        args = case_args(c)
        got, audio = synth_codes(k, model, args + [c["text"]], work, c["name"] + "_text")
        check(got == want, f"{label} {c['name']}: text input codes differ from the reference")
        check(len(audio) == c["frames"] * SPF * 4, f"{c['name']}: {len(audio)} bytes of f32")
        ids = ",".join(str(i) for i in c["text_ids"])
        got_ids, audio_ids = synth_codes(k, model, args + ["--token-ids", ids], work,
                                         c["name"] + "_ids")
        check(got_ids == want, f"{label} {c['name']}: --token-ids codes differ")
        check(audio_ids == audio, f"{label} {c['name']}: --token-ids audio differs")
        if c["layout"] == "streaming":
            got_s, audio_s = streamed_codes(k, model, args, c["text"], work, c["name"] + "_st")
            check(got_s == want, f"{label} {c['name']}: --stream-text codes differ")
        print(f"ok   {label} {c['name']}: text, --token-ids"
              f"{', --stream-text' if c['layout'] == 'streaming' else ''} == reference")


def leading_newline(k, model, cases, work):
    """A text that starts with newlines: they merge into the role's "\\n" token (the
    official slicing); streamed, the role comes from the same tokenization."""
    c = next(c for c in cases if c["layout"] == "streaming")
    text = "\n\n" + c["text"]
    whole, audio = synth_codes(k, model, case_args(c) + [text], work, "nl_whole")
    pieces = ["\n", "\n"] + [(" " if i else "") + w for i, w in enumerate(c["text"].split(" "))]
    streamed, audio_s = streamed_codes(k, model, case_args(c), text, work, "nl_streamed", pieces)
    check(whole is not None and whole == streamed and audio == audio_s,
          "leading newlines: --stream-text differs from the text at once")
    print("ok   leading newlines: streamed text == text at once")


def tokenize(k, model, source):
    sys.path.insert(0, os.path.join(source, "tools"))
    from reference import tokenizer as reftok
    tok = reftok.load(model)
    for text in ("Hello world, this is a test.", "How are you today? Fine.",
                 "Speak slowly and calmly.", "zebra 42 quux!?\n\nnew  lines\tand tabs"):
        r = run(k, ["tokenize", "-m", model, text])
        got = [int(v) for v in r.stdout.split()] if r.returncode == 0 else None
        check(got == tok.encode(text), f"tokenize {text!r}: {got} vs {tok.encode(text)}")
    print("ok   tokenize == the reference tokenizer on the checkpoint's own files")


def audio_files(k, model, c, work):
    wav = os.path.join(work, "out.wav")
    r = run(k, ["synth", "-m", model] + case_args(c) + [c["text"], "-o", wav])
    check(r.returncode == 0, f"wav: {r.stderr.decode()}")
    h = open(wav, "rb").read(44) if r.returncode == 0 else b"\0" * 44
    rate, = struct.unpack("<I", h[24:28])
    size, = struct.unpack("<I", h[40:44])
    check(rate == RATE and size == c["frames"] * SPF * 2, f"wav header: {rate} Hz, {size} bytes")


def snr_db(x, ref):
    err = sum((a - b) ** 2 for a, b in zip(x, ref))
    sig = sum(b * b for b in ref)
    return 999.0 if err == 0 else 10 * math.log10(sig / err)


def decode(k, model, gold, work):
    codes = os.path.join(gold, "codes_40.txt")
    r = run(k, ["decode", "-m", model, "--codes", codes, "-o", "-", "--format", "f32"])
    check(r.returncode == 0, f"decode: {r.stderr.decode()}")
    pcm = struct.unpack(f"<{len(r.stdout) // 4}f", r.stdout)
    _, _, raw = golden(os.path.join(gold, "golden_40.safetensors"))["wav"]
    ref = struct.unpack(f"<{len(raw) // 4}f", raw)
    s = snr_db(pcm, ref)
    check(len(pcm) == 40 * SPF and s >= 60, f"decode: {len(pcm)} samples, SNR {s:.1f} dB")
    for name, row, expect in (("16 columns", " ".join(["5"] * 16), "expected 8 codes"),
                              ("code 1000", " ".join(["1000"] + ["5"] * (GROUPS - 1)), "1000")):
        path = os.path.join(work, name.replace(" ", "_") + ".txt")
        open(path, "w").write(row + "\n")
        r = run(k, ["decode", "-m", model, "--codes", path, "-o", os.path.join(work, "no.wav")])
        err = r.stderr.decode().strip()
        check(r.returncode != 0 and expect in err and len(err.splitlines()) == 1,
              f"decode {name}: {r.returncode} {err!r}")
        check(not os.path.exists(os.path.join(work, "no.wav")), f"decode {name}: output left")
    print(f"ok   decode: reference waveform at SNR {s:.1f} dB; bad codes files refused")


def long_text(k, model, work):
    """Utterances joined in the model's samples per frame: a copy whose
    generation_config.json allows 2 frames an utterance (max_new_tokens 3), so the
    request's frames span several utterances."""
    two = link_copy(model, os.path.join(work, "two_frames"))
    path = os.path.join(two, "generation_config.json")
    gen = json.load(open(path))
    gen["max_new_tokens"] = 3
    json.dump(gen, open(path, "w"))
    text = " ".join(["Hello world, this is a test.", "How are you today? Fine.",
                     "Speak slowly and calmly."] * 3)
    r = run(k, ["synth", "-m", two, "-s", "ryan", "--max-frames", "6", "--max-utterance", "40",
                "-o", "-", "--format", "f32", text])
    n = len(r.stdout) // 4
    check(r.returncode == 0 and n > 0 and n % SPF == 0 and n >= 3 * SPF,
          f"long text: exit {r.returncode}, {n} samples ({r.stderr.decode()})")
    print(f"ok   long text: {n // SPF} frames of {SPF} samples")
    # The join fade lasts 10 ms at the model's rate: the first utterance's last 160
    # samples differ from the same sentence spoken alone (same seed), the rest not.
    first, second = "Hello world, this is a test.", "How are you today? Fine."
    def f32(text):
        out = run(k, ["synth", "-m", two, "-s", "ryan", "--seed", "7", "--max-utterance", "30",
                      "-o", "-", "--format", "f32", text]).stdout
        return struct.unpack(f"<{len(out) // 4}f", out)
    joined, alone = f32(first + " " + second), f32(first)
    faded = [i for i in range(len(alone)) if joined[i] != alone[i]]
    n = len(alone)
    check(len(joined) == 2 * n > 0 and faded == list(range(n - RATE // 100, n)),
          f"join fade: samples {faded[:2]}..{faded[-1:]} of {n} differ")
    print(f"ok   join fade: {RATE // 100} samples (10 ms at {RATE} Hz)")


def bench(k, model, tiny, work):
    peaks = ["--peak-gbs", "10", "--peak-gflops", "10"]
    r = run(k, ["bench", "-m", model, "--frames", "3", "--repeat", "1", "--json"] + peaks)
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    check(j.get("frame_ms") == 1e3 * SPF / RATE and j.get("prompt_rows", 0) > 0,
          f"bench: {r.returncode} {r.stderr.decode()} {j.get('frame_ms')}")
    r = run(k, ["bench", "-m", model, "--frames", "2", "--repeat", "1", "--json",
                "--codec-precision", "f32,bf16"])
    v = json.loads(r.stdout)["variants"] if r.returncode == 0 else []
    check(len(v) == 2, f"bench --codec-precision f32,bf16: {r.returncode} {r.stderr.decode()}")
    both = tiny + "," + model
    for extra in (["--decoder-only"], []):
        r = run(k, ["bench", "-m", both, "--frames", "2", "--repeat", "1", "--json"] + extra)
        v = json.loads(r.stdout)["variants"] if r.returncode == 0 else []
        check(len(v) == 2, f"bench -m tiny,remapped {extra}: {r.returncode} {r.stderr.decode()}")
    fast = link_copy(model, os.path.join(work, "rate32k"))
    edit_json(os.path.join(fast, "speech_tokenizer", "config.json"),
              lambda c: c.update(output_sample_rate=2 * RATE))
    for extra in (["--decoder-only"], []):
        r = run(k, ["bench", "-m", fast, "--frames", "2", "--repeat", "1", "--json"] + peaks +
                extra)
        j = json.loads(r.stdout) if r.returncode == 0 else {}
        p = j.get("decode" if extra else "streaming", {})
        check(j.get("frame_ms") == 40 and abs(p.get("rtf", 0) * 40 - p.get("ms_per_frame", 1))
              < 1e-4 * p.get("ms_per_frame", 1), f"bench at 32 kHz {extra}: {r.returncode} "
              f"{r.stderr.decode()} frame_ms {j.get('frame_ms')} {p}")
    print("ok   bench and bench comparisons in the checkpoint's own ids and frame length")
    r = run(k, ["quality", "-m", model, "--ref", model, "--frames", "2"])
    check(r.returncode == 0 and b"code predictor (1-7) " in r.stdout,
          f"quality: the code predictor's codebooks: {r.returncode} {r.stdout[:400]}")


def gguf(k, model, cases, work):
    path = os.path.join(work, "remap.gguf")
    r = run(k, ["quantize", "-m", model, "-o", path, "--type", "bf16"])
    check(r.returncode == 0, f"quantize: {r.stderr.decode()}")
    if r.returncode == 0:
        parity(k, path, cases[:1], work, "gguf")


def edit_json(path, fn):
    d = json.load(open(path))
    fn(d)
    json.dump(d, open(path, "w"))


def expect_load_error(k, name, model, args, expect, work):
    out_dir = os.path.join(work, "err_" + name.replace(" ", "_"))
    os.makedirs(out_dir, exist_ok=True)
    r = run(k, ["synth", "-m", model, "-s", "ryan"] + args + ["-o",
                                                             os.path.join(out_dir, "o.wav")])
    err = r.stderr.decode().strip()
    check(r.returncode == 1, f"{name}: exit status {r.returncode}")
    check(all(e in err for e in expect), f"{name}: message {err!r} lacks {expect}")
    check(len(err.splitlines()) == 1, f"{name}: expected one line, got {err!r}")
    check(os.listdir(out_dir) == [], f"{name}: output left behind")
    print(f"ok   {name}: {err}")


def bad_models(k, model, work):
    def variant(name, edit):
        d = link_copy(model, os.path.join(work, name))
        edit(d)
        return d
    cfg = lambda d: os.path.join(d, "config.json")
    codec = lambda d: os.path.join(d, "speech_tokenizer", "config.json")
    tv = json.load(open(cfg(model)))["talker_config"]["text_vocab_size"]
    m = variant("im_start", lambda d: edit_json(cfg(d), lambda c: c.update(im_start_token_id=tv)))
    expect_load_error(k, "im_start outside the text embedding", m, ["hi"],
                      ["im_start_token_id", str(tv), "text_vocab_size"], work)
    m = variant("pad", lambda d: edit_json(cfg(d), lambda c: c["talker_config"].pop(
        "codec_pad_id")))
    expect_load_error(k, "codec_pad_id default outside the vocabulary", m, ["hi"],
                      ["codec_pad_id 4196", "outside the codec embedding"], work)
    m = variant("speaker", lambda d: edit_json(cfg(d), lambda c: c["talker_config"]["spk_id"]
                                               .update(ryan=1900)))
    expect_load_error(k, "speaker id outside the vocabulary", m, ["hi"], ["spk_id.ryan"], work)
    m = variant("codebook", lambda d: edit_json(codec(d), lambda c: c["decoder_config"].update(
        codebook_size=999)))
    # The codebook tensors are checked against the codec's config first; the codec
    # against the talker (kz_model_check_tts) is covered by tests/unit/test_config.c.
    expect_load_error(k, "codec codebook size", m, ["hi"],
                      ["embedding_sum", "expected [999,"], work)
    m = variant("groups", lambda d: edit_json(codec(d), lambda c: c["decoder_config"].update(
        num_quantizers=16)))
    expect_load_error(k, "codec codebook count", m, ["hi"],
                      ["rvq_rest.vq.layers.7", "missing"], work)

    def big_id(d):
        vocab = os.path.join(d, "vocab.json")
        v = json.load(open(vocab))
        v["zzzz"] = tv
        os.unlink(vocab)
        json.dump(v, open(vocab, "w"))
    m = variant("vocab", big_id)
    expect_load_error(k, "tokenizer id outside the text embedding", m, ["hi"],
                      ["tokenizer", str(tv), "text_vocab_size"], work)

    def no_tokenizer(d):
        for f in ("vocab.json", "merges.txt", "tokenizer_config.json"):
            os.unlink(os.path.join(d, f))
    m = variant("no_tokenizer", no_tokenizer)
    expect_load_error(k, "token ids without tokenizer files", m, ["--token-ids", "5,6"],
                      ["no tokenizer files", "\\n"], work)


def main():
    ap = argparse.ArgumentParser()
    for name in ("kztts", "remap", "tiny", "golden", "source", "work"):
        ap.add_argument("--" + name, required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    cases = json.load(open(os.path.join(a.golden, "remap_cases.json")))
    check(len(cases) >= 2 and {c["layout"] for c in cases} == {"streaming", "non_streaming"},
          "remap_cases.json: both layouts")
    tokenize(a.kztts, a.remap, a.source)
    parity(a.kztts, a.remap, cases, a.work, "remapped")
    leading_newline(a.kztts, a.remap, cases, a.work)
    audio_files(a.kztts, a.remap, cases[0], a.work)
    decode(a.kztts, a.remap, os.path.join(a.golden, "remap"), a.work)
    long_text(a.kztts, a.remap, a.work)
    bench(a.kztts, a.remap, a.tiny, a.work)
    gguf(a.kztts, a.remap, cases, a.work)
    bad_models(a.kztts, a.remap, a.work)
    finish("test_remapped")


if __name__ == "__main__":
    main()
