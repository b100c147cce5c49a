"""`kztts synth`, `speakers` and `tokenize` as a user runs them, on tiny checkpoints.

Good paths: text from an argument and from stdin, exact --frames, --dump-codes,
same seed -> same audio, different seed -> different audio, stdout output.
Bad input (each: exit status 1 or 2, a one-line message naming the problem, no
output file left behind): empty and whitespace-only text, invalid UTF-8, a NUL byte
in text on stdin (at once or with --stream-text), unknown
speaker or language, missing speaker, a speaker on VoiceDesign, an instruction
on a Base model, --frames 0, out-of-range sampling values, malformed
--token-ids, missing tokenizer files, a config that disagrees with the tensors.
Interrupted (SIGINT / SIGTERM / SIGHUP) while writing: no output, no partial file.
An instruction is dropped exactly when the official wrapper drops it (CustomVoice and
`tts_model_size in "0b6"`).
"""
import argparse
import json
import os
import shutil
import struct
import subprocess

from testlib import check, finish, link_copy


def run(kztts, args, stdin=None):
    return subprocess.run([kztts] + args, input=stdin, capture_output=True, timeout=300)


def expect_error(kztts, name, args, expect, work, stdin=None):
    out_dir = os.path.join(work, "err_" + name.replace(" ", "_"))
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, "out.wav")
    r = run(kztts, ["synth"] + args + ["-o", out], stdin)
    err = r.stderr.decode("utf-8", "replace").strip()
    check(r.returncode in (1, 2), f"{name}: exit status {r.returncode}")
    check(expect in err, f"{name}: message {err!r} lacks {expect!r}")
    check(len(err.splitlines()) == 1, f"{name}: expected one line, got {err!r}")
    check(os.listdir(out_dir) == [], f"{name}: output left behind: {os.listdir(out_dir)}")
    # To stdout (wav): the same error, and not a byte of audio or header.
    r = run(kztts, ["synth"] + args + ["-o", "-"], stdin)
    check(r.returncode in (1, 2), f"{name} to stdout: exit status {r.returncode}")
    check(r.stdout == b"", f"{name} to stdout: wrote {len(r.stdout)} bytes")
    print(f"ok   {name}: {err}")


def f32(path):
    data = open(path, "rb").read()
    return data


def good_paths(k, model, work):
    out = os.path.join(work, "a.f32")
    codes = os.path.join(work, "a.codes")
    r = run(k, ["synth", "-m", model, "-s", "Ryan", "Hello world.", "--frames", "5", "--seed", "1",
                "-o", out, "--dump-codes", codes])
    check(r.returncode == 0, f"synth: {r.stderr.decode()}")
    a = f32(out) if r.returncode == 0 else b""
    check(len(a) == 5 * 1920 * 4, f"5 frames of f32 audio, got {len(a)} bytes")
    lines = open(codes).read().split("\n") if r.returncode == 0 else []
    check(len(lines) == 6 and all(len(x.split()) == 16 for x in lines[:5]), "dump-codes lines")
    r = run(k, ["synth", "-m", model, "-s", "ryan", "--frames", "5", "--seed", "1", "-o", "-",
                "--format", "f32"], stdin=b"Hello world.")
    check(r.returncode == 0 and r.stdout == a, "stdin text + stdout output equals the file run")
    r = run(k, ["synth", "-m", model, "-s", "ryan", "Hello world.", "--frames", "5", "--seed", "2",
                "-o", "-", "--format", "f32"])
    check(r.returncode == 0 and r.stdout != a, "a different seed changes the audio")
    r = run(k, ["synth", "-m", model, "-s", "ryan", "Hello world.", "--frames", "5", "--seed", "1",
                "--threads", "1", "-o", "-", "--format", "f32"])
    check(r.returncode == 0 and r.stdout == a, "1 thread gives the same audio as all threads")
    for schedule in ("turns", "overlap"):
        r = run(k, ["synth", "-m", model, "-s", "ryan", "Hello world.", "--frames", "5", "--seed",
                    "1", "--schedule", schedule, "-o", "-", "--format", "f32"])
        check(r.returncode == 0 and r.stdout == a, f"--schedule {schedule} gives the same audio")
    wav = os.path.join(work, "b.wav")
    r = run(k, ["synth", "-m", model, "-s", "vivian", "-l", "english", "--greedy", "Hi!",
                "--max-frames", "6", "-o", wav])
    check(r.returncode == 0 and os.path.getsize(wav) > 44, f"wav: {r.stderr.decode()}")
    r = run(k, ["speakers", "-m", model])
    check(r.returncode == 0 and b"ryan" in r.stdout and b"english" in r.stdout, "speakers")
    r = run(k, ["tokenize", "-m", model, "Hello world"])
    check(r.returncode == 0 and r.stdout.split() == [b"9707", b"1879"],
          f"tokenize: {r.stdout!r} {r.stderr!r}")


def streaming_text(k, model, work):
    """Text arriving token by token (pipe, with pauses) gives the codes and audio of the
    same text given at once in the streaming-text layout (greedy)."""
    import time
    pieces = ["Hello", " world", ",", " how", " are", " you", " today", "?", " Fine", "."]
    whole = os.path.join(work, "whole.codes")
    opts = ["-m", model, "-s", "ryan", "--greedy", "--frames", "12", "--format", "f32"]
    r = run(k, ["synth"] + opts + ["--layout", "streaming", "--dump-codes", whole, "-o", "-",
                                   "".join(pieces)])
    check(r.returncode == 0, f"streaming layout run: {r.stderr.decode()}")
    streamed = os.path.join(work, "streamed.codes")
    p = subprocess.Popen([k, "synth"] + opts + ["--stream-text", "--stream", "--dump-codes",
                                                streamed, "-o", "-"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for piece in pieces:
        p.stdin.write(piece.encode())
        p.stdin.flush()
        time.sleep(0.05)
    out, err = p.communicate(timeout=300)  # closes stdin: the end of the text
    check(p.returncode == 0, f"--stream-text: {err.decode()}")
    same_codes = p.returncode == 0 and open(whole).read() == open(streamed).read()
    check(same_codes, "streamed text gives different codes than the text at once")
    check(out == r.stdout and len(out) == 12 * 1920 * 4, "streamed text gives different audio")
    print(f"ok   streaming text token by token == streaming layout at once ({len(pieces)} pieces)")


def interrupted(k, model, work):
    """SIGINT, SIGTERM or SIGHUP while an output is being written: the process ends by
    the signal and leaves neither OUT nor its partial file, and an unrelated partial
    file of the same name that was there before stays."""
    import glob
    import signal
    import time
    out_dir = os.path.join(work, "interrupted")
    os.makedirs(out_dir)
    out = os.path.join(out_dir, "out.wav")
    foreign = out + ".partial-other"
    open(foreign, "wb").close()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        # --stream-text: the output file is open and the text not over until stdin closes.
        p = subprocess.Popen([k, "synth", "-m", model, "-s", "ryan", "--greedy", "--frames", "40",
                              "--stream-text", "-o", out], stdin=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        p.stdin.write(b"Hello world, this is a test")
        p.stdin.flush()
        deadline = time.time() + 60
        while len(glob.glob(out + ".partial-*")) < 2 and time.time() < deadline:
            time.sleep(0.02)
        opened = len(glob.glob(out + ".partial-*")) == 2
        p.send_signal(sig)
        p.wait(timeout=60)
        p.stdin.close()
        p.stderr.close()
        left = sorted(os.listdir(out_dir))
        check(opened, f"{sig.name}: synth never opened its partial file")
        check(p.returncode == -sig, f"{sig.name}: exit status {p.returncode}, want {-sig}")
        ok = left == ["out.wav.partial-other"]
        check(ok, f"{sig.name}: left behind {left}")
        for f in left:
            if f != "out.wav.partial-other":
                os.unlink(os.path.join(out_dir, f))
        if ok and opened and p.returncode == -sig:
            print(f"ok   {sig.name} during synth: no output, no partial file ({p.returncode})")
    # quantize: a signal at any moment leaves the complete file or nothing.
    q_dir = os.path.join(work, "interrupted_quantize")
    os.makedirs(q_dir)
    gguf = os.path.join(q_dir, "q.gguf")
    seen = set()
    all_ok = True
    for delay in (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.6, 0.9, 1.4):
        if os.path.exists(gguf):
            os.unlink(gguf)
        p = subprocess.Popen([k, "quantize", "-m", model, "-o", gguf, "--type", "q4_0"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=120)
        seen.add(p.returncode)
        left = sorted(os.listdir(q_dir))
        # The signal may also land after the rename, before the process exits: then the
        # file is complete although the status is the signal's; it must load.
        complete = left == ["q.gguf"] and run(k, ["info", "-m", gguf]).returncode == 0
        finished = p.returncode in (0, -signal.SIGTERM) and complete
        stopped = p.returncode == -signal.SIGTERM and left == []
        check(finished or stopped, f"quantize, SIGTERM after {delay} s: status {p.returncode}, "
              f"left {left}")
        all_ok = all_ok and (finished or stopped)
        for f in left:
            os.unlink(os.path.join(q_dir, f))
    if all_ok:
        print(f"ok   SIGTERM during quantize: the whole file or nothing (exit statuses "
              f"{sorted(seen)})")


LONG_PARAGRAPHS = [
    "The quick brown fox jumps over the lazy dog. Dr. Smith arrived at 3.15 p.m. with Mr. Jones! "
    "Was it raining? It was, e.g. in the north, and the U.S.A. report said so... ",
    "Le renard brun saute par-dessus le chien paresseux. Mme. Dupont est arrivée à midi ! "
    "Pourquoi ? Parce qu'il pleuvait. ",
    "Der schnelle braune Fuchs springt über den faulen Hund. Er kam z.B. am 3. Oktober an. ",
    "敏捷的棕色狐狸跳过了懒狗。今天天气很好！我们去公园吧？",
    "素早い茶色の狐が怠け者の犬を飛び越えた。「元気？」と聞いた。",
    "빠른 갈색 여우가 게으른 개를 뛰어넘었다. 오늘 날씨가 좋다! ",
    "Быстрая коричневая лиса перепрыгнула через ленивую собаку. Почему? Так вышло. ",
]


def run_rss(k, args):
    """Runs kztts; returns (exit status, stdout bytes, peak RSS in MB of that process)."""
    p = subprocess.Popen([k] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = p.stdout.read()
    p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, out, usage.ru_maxrss / 1024.0


def two_frame_model(model, work):
    """A copy of model whose generation_config.json allows 2 frames per utterance
    (max_new_tokens 3), the per-utterance limit; --max-frames counts over the request."""
    dst = os.path.join(work, "two_frames")
    if not os.path.exists(dst):
        link_copy(model, dst)
        path = os.path.join(dst, "generation_config.json")
        gen = json.load(open(path))
        gen["max_new_tokens"] = 3
        json.dump(gen, open(path, "w"))
    return dst


def long_text(k, model, work, chunk):
    """5,000+ characters in 7 languages: bounded memory, continuous joins. chunk: extra
    options; with --chunk 1 every utterance ends on a chunk boundary, so its end is
    known only after its last frame was decoded (the join must still fade it out);
    --stream paces the chunks adaptively across the utterances."""
    text = ""
    while len(text) < 5200:
        text += " ".join(LONG_PARAGRAPHS) + "\n\n"
    short = " ".join(LONG_PARAGRAPHS)[:1000]
    opts = ["synth", "-m", two_frame_model(model, work), "-s", "ryan", "--max-utterance", "300",
            "-o", "-", "--format", "f32", "--threads", "2"] + chunk
    rc_s, out_s, rss_s = run_rss(k, opts + [short])
    rc_l, out_l, rss_l = run_rss(k, opts + [text])
    check(rc_s == 0 and rc_l == 0, "long text runs")
    n = len(out_l) // 4
    pcm = struct.unpack(f"<{n}f", out_l) if rc_l == 0 else ()
    n_utt = n // (2 * 1920)
    print(f"long text: {len(text)} characters -> {n_utt} utterances; peak RSS {rss_l:.1f} MB "
          f"vs {rss_s:.1f} MB for {len(short)} characters")
    check(n_utt >= 15 and n % (2 * 1920) == 0, f"utterances: {n} samples")
    check(rss_l - rss_s < 20, f"peak RSS grows with text length: {rss_s:.1f} -> {rss_l:.1f} MB")
    # Each utterance is exactly 2 frames (end of speech is masked for the first two): the
    # joins are at multiples of 3840 samples, where both sides fade to exactly 0.
    worst = 0.0
    for b in range(3840, n, 3840):
        worst = max(worst, abs(pcm[b] - pcm[b - 1]), abs(pcm[b]), abs(pcm[b - 1]))
    print(f"long text {chunk}: largest step or level at {n_utt - 1} joins: {worst:.2e} "
          f"(threshold 1e-6)")
    check(worst <= 1e-6, f"join discontinuity {worst} with {chunk}")


def double_talker_width(model_dir):
    """Edits a copied checkpoint's config.json so that it disagrees with its tensors."""
    cfg_path = os.path.join(model_dir, "config.json")
    cfg = json.load(open(cfg_path))
    cfg["talker_config"]["hidden_size"] *= 2
    json.dump(cfg, open(cfg_path, "w"))


def bad_inputs(k, a, model, work):
    base = ["-m", model, "-s", "ryan", "--frames", "3"]
    expect_error(k, "empty text", base + [""], "empty", work)
    expect_error(k, "whitespace text", base + ["  \t\n "], "empty", work)
    expect_error(k, "invalid utf8", base + ["-"], "invalid UTF-8", work, stdin=b"ab\xff\xfecd")
    # A NUL byte would cut the text there (it crosses the API as a C string): refused.
    expect_error(k, "NUL in text on stdin", base + ["-"], "NUL byte at byte 5", work,
                 stdin=b"Hello\0world")
    expect_error(k, "NUL in streamed text", base + ["--stream-text"], "NUL byte at byte 5", work,
                 stdin=b"Hello\0world")
    expect_error(k, "unknown speaker", ["-m", model, "-s", "nobody", "hi"], "ryan", work)
    expect_error(k, "missing speaker", ["-m", model, "hi"], "speaker is required", work)
    expect_error(k, "unknown language", base + ["-l", "klingon", "hi"], "unknown language", work)
    expect_error(k, "frames 0", base + ["--frames", "0", "hi"], "--frames", work)
    expect_error(k, "negative temperature", base + ["--temperature", "-1", "hi"], "--temperature",
                 work)
    expect_error(k, "absurd top-p", base + ["--top-p", "1.5", "hi"], "--top-p", work)
    expect_error(k, "negative top-k", base + ["--top-k", "-5", "hi"], "--top-k", work)
    expect_error(k, "zero penalty", base + ["--repetition-penalty", "0", "hi"],
                 "--repetition-penalty", work)
    expect_error(k, "bad schedule", base + ["--schedule", "parallel", "hi"], "--schedule", work)
    expect_error(k, "bad token ids", base + ["--token-ids", "1,x"], "--token-ids", work)
    expect_error(k, "text and token ids", base + ["--token-ids", "1", "hi"], "not both", work)
    no_tok = link_copy(a.tiny, os.path.join(work, "no_tokenizer"))
    for f in ("vocab.json", "merges.txt", "tokenizer_config.json"):
        os.unlink(os.path.join(no_tok, f))
    expect_error(k, "no tokenizer files", ["-m", no_tok, "-s", "ryan", "hi"], "tokenizer", work)
    expect_error(k, "token ids without tokenizer files", ["-m", no_tok, "-s", "ryan",
                                                         "--token-ids", "5"], "tokenizer", work)
    expect_error(k, "speaker on voice design", ["-m", a.tiny_vd, "-s", "ryan", "--token-ids", "5"],
                 "no speakers", work)
    expect_error(k, "instruction on base", ["-m", a.tiny_base, "-i", "happy", "--token-ids", "5"],
                 "instruction", work)
    broken = link_copy(a.tiny, os.path.join(work, "broken"))
    double_talker_width(broken)
    expect_error(k, "config disagrees with tensors", ["-m", broken, "-s", "ryan", "--token-ids",
                                                     "5"], "expected", work)
    # The tokenizer is built on a thread of its own during the load: its errors still
    # reach the caller, and an error of the weights still comes first.
    bad_vocab = link_copy(model, os.path.join(work, "bad_vocab"))
    vocab_path = os.path.join(bad_vocab, "vocab.json")
    data = open(vocab_path, "rb").read()
    open(vocab_path, "wb").write(data[: len(data) // 2])
    expect_error(k, "truncated vocab.json", ["-m", bad_vocab, "-s", "ryan", "hi"], "vocab.json",
                 work)
    double_talker_width(bad_vocab)
    expect_error(k, "bad weights and bad vocab.json", ["-m", bad_vocab, "-s", "ryan", "hi"],
                 "expected", work)


def zero_options(k, model, work):
    """The library's 0 means the model's value; the command line's 0 keeps its own meaning:
    --top-k 0 is no top-k (sampled codes differ from the default top-k 50's) and
    --max-utterance 0 never splits (greedy codes differ from the default 600-byte split)."""
    text = "".join(f"This is sentence number {i} of a long text. " for i in range(17))
    runs = {"default": [], "top-k 0": ["--top-k", "0"],
            "split": ["--greedy"], "no split": ["--greedy", "--max-utterance", "0"]}
    codes = {}
    for name, extra in runs.items():
        path = os.path.join(work, "zero_" + name.replace(" ", "_") + ".codes")
        r = run(k, ["synth", "-m", model, "-s", "ryan", "--seed", "3", "--max-frames", "6",
                    "--dump-codes", path, "-o", os.path.join(work, "zero.wav"),
                    text if "split" in name else "Hello there, how are you?"] + extra)
        check(r.returncode == 0, f"{name}: {r.stderr.decode()}")
        codes[name] = open(path).read() if r.returncode == 0 else name
    check(codes["top-k 0"] != codes["default"], "--top-k 0 samples as the default top-k")
    check(codes["no split"] != codes["split"], "--max-utterance 0 splits as the default")
    print("ok   --top-k 0 is no top-k, --max-utterance 0 never splits")


def instruct_size(k, model, tiny_vd, work):
    """The official generate_custom_voice drops the instruction when `tts_model_size in
    "0b6"` (a substring test) on CustomVoice models: copies with each size either speak
    the instruction (greedy codes differ from no instruction, no warning) or ignore it
    (the same codes as without, a warning); VoiceDesign keeps it whatever the size."""
    def codes(m, extra, name):
        path = os.path.join(work, "size_" + name + ".codes")
        r = run(k, ["synth", "-m", m, "--greedy", "--frames", "3", "--dump-codes", path, "-o",
                    os.path.join(work, "size.wav"), "Hello there."] + extra)
        return (open(path).read() if r.returncode == 0 else None), r.stderr.decode()
    warning = "ignore the instruction"
    for size, ignored in [("0b6", True), ("0b", True), ("b6", True), ("6", True), ("", True),
                          ("1b7", False), ("0b60", False), ("0B6", False), ("0.6b", False)]:
        m = link_copy(model, os.path.join(work, "size_" + (size or "empty")))
        path = os.path.join(m, "config.json")
        cfg = json.load(open(path))
        cfg["tts_model_size"] = size
        json.dump(cfg, open(path, "w"))
        plain, _ = codes(m, ["-s", "ryan"], "plain")
        told, err = codes(m, ["-s", "ryan", "-i", "Speak very slowly."], "told")
        ok = plain is not None and (told == plain) == ignored and (warning in err) == ignored
        check(ok, f"tts_model_size {size!r}: instruction {'kept' if told != plain else 'dropped'}"
                  f", stderr {err!r}")
    m = link_copy(tiny_vd, os.path.join(work, "vd_0b6"))
    path = os.path.join(m, "config.json")
    cfg = json.load(open(path))
    cfg["tts_model_size"] = "0b6"
    json.dump(cfg, open(path, "w"))
    a, _ = codes(m, ["-i", "A calm voice."], "vd_a")
    b, err = codes(m, ["-i", "An angry voice."], "vd_b")
    check(a is not None and a != b and warning not in err,
          f"VoiceDesign of size 0b6 keeps the instruction: {err!r}")
    print("ok   the instruction as the official wrapper's `tts_model_size in \"0b6\"`")


def main():
    ap = argparse.ArgumentParser()
    for name in ("kztts", "tiny", "tiny_vd", "tiny_base", "tokenizer", "work"):
        ap.add_argument("--" + name.replace("_", "-"), required=True, dest=name)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    model = link_copy(a.tiny, os.path.join(a.work, "tiny_tok"))
    for f in ("vocab.json", "merges.txt", "tokenizer_config.json"):
        shutil.copy(os.path.join(a.tokenizer, f), os.path.join(model, f))
    good_paths(a.kztts, model, a.work)
    streaming_text(a.kztts, model, a.work)
    # 16-frame chunks (no --stream), adaptive ones (--stream), 1-frame ones
    for chunk in ([], ["--stream"], ["--chunk", "1"]):
        long_text(a.kztts, model, a.work, chunk)
    interrupted(a.kztts, model, a.work)
    zero_options(a.kztts, model, a.work)
    instruct_size(a.kztts, model, a.tiny_vd, a.work)
    bad_inputs(a.kztts, a, model, a.work)
    finish("test_cli_synth")


if __name__ == "__main__":
    main()
