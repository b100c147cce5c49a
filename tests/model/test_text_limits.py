"""Limits of `kztts synth` over the text of one request, on the tiny checkpoint with the
tokenizer files.

  - --max-frames N and --frames N count over the whole request, however many utterances
    long text is split into: at most N frames (the utterance that reaches N ends the
    stream, without the join fade-out), and exactly N with --frames;
  - one utterance's prompt is at most 2048 tokens: a longer one is a one-line error before
    any audio (also when it is not the first utterance), and the same text split at the
    default size speaks;
  - text of only Unicode White_Space (NBSP, U+3000, em space, ...) is refused like empty text,
    also streamed (--stream-text) in pieces;
  - an utterance stops at its runaway guard, 50 + 8 frames per text token, however its
    text arrives, also under a larger --max-frames (which caps the request's total);
  - malformed UTF-8 (text, stdin, streamed text, instruction) names the byte of the user's
    text, not of the chat wrapping around it.
A copy of the checkpoint whose generation_config.json allows 2 frames per utterance makes
every utterance's length known (the random weights rarely end speech on their own).
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import time

from testlib import check, finish, link_copy

FRAME = 1920  # samples per frame of the tiny codec
SENTENCES = "One two three. Four five six. Seven eight nine. Ten eleven twelve."  # 4 utterances


def synth(k, model, text, extra, stdin=None):
    """Runs synth to stdout as f32 (text None: "-", False: no text argument); returns (exit
    status, samples, stderr)."""
    args = [k, "synth", "-m", model, "-s", "ryan", "--seed", "3", "-o", "-", "--format", "f32"]
    text = [] if text is False else [text] if text is not None else ["-"]
    r = subprocess.run(args + extra + text, input=stdin,
                       capture_output=True, timeout=300)
    n = len(r.stdout) // 4
    return r.returncode, struct.unpack(f"<{n}f", r.stdout[:4 * n]), r.stderr.decode().strip()


def stream_pieces(k, model, pieces):
    """--stream-text with the pieces written one by one, with pauses; returns (exit
    status, stdout bytes, stderr)."""
    p = subprocess.Popen([k, "synth", "-m", model, "-s", "ryan", "--seed", "3", "--frames", "2",
                          "--stream-text", "-o", "-", "--format", "f32"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for piece in pieces:
        try:
            p.stdin.write(piece)
            p.stdin.flush()
        except BrokenPipeError:
            break
        time.sleep(0.05)
    out, err = p.communicate(timeout=300)
    return p.returncode, out, err.decode().strip()


def two_frame_model(model, work):
    dst = link_copy(model, os.path.join(work, "two_frames"))
    path = os.path.join(dst, "generation_config.json")
    gen = json.load(open(path))
    gen["max_new_tokens"] = 3  # the official loop's limit: max_new_tokens - 1 frames
    json.dump(gen, open(path, "w"))
    return dst


def frame_totals(k, model):
    split = ["--max-utterance", "20"]
    rc, pcm, err = synth(k, model, SENTENCES, split)
    check(rc == 0 and len(pcm) == 8 * FRAME, f"4 utterances x 2 frames: {len(pcm)} samples {err}")
    # The join fade: 0 at the end of an utterance and the start of the next.
    check(rc == 0 and pcm[2 * FRAME - 1] == 0.0 and pcm[2 * FRAME] == 0.0, "joins fade to 0")
    cases = [
        (["--max-frames", "5"], 5, "--max-frames 5 over 4 utterances"),
        (["--max-frames", "4"], 4, "--max-frames 4 ends at a join"),
        (["--max-frames", "100"], 8, "--max-frames above what the text makes"),
        (["--frames", "11"], 11, "--frames 11: 2 + 2 + 2 + 5 (the last one exact)"),
        (["--frames", "3"], 3, "--frames 3 over 4 utterances"),
    ]
    for extra, frames, name in cases:
        rc, pcm, err = synth(k, model, SENTENCES, split + extra)
        check(rc == 0 and len(pcm) == frames * FRAME,
              f"{name}: {len(pcm) / FRAME:g} frames, want {frames} ({err})")
        # The utterance that reaches the total is the last one: not faded out.
        check(rc == 0 and len(pcm) > 0 and pcm[-1] != 0.0, f"{name}: the stream ends faded out")
        rc2, pcm2, _ = synth(k, model, SENTENCES, split + extra + ["--stream"])
        check(rc2 == 0 and pcm2 == pcm, f"{name}: --stream gives the same audio")
    codes = os.path.join(os.path.dirname(model), "codes.txt")
    r = subprocess.run([k, "synth", "-m", model, "-s", "ryan", "--max-frames", "5", "--dump-codes",
                        codes, "-o", codes + ".wav"] + split + [SENTENCES], capture_output=True)
    lines = open(codes).read().split() if r.returncode == 0 else []
    check(len(lines) == 5 * 16, f"--dump-codes with --max-frames 5: {len(lines)} codes")
    print("ok   frame totals over utterances")


def tokens(k, model, text):
    r = subprocess.run([k, "tokenize", "-m", model, text], capture_output=True, timeout=60)
    return len(r.stdout.split())


def runaway_guard(k, model):
    """An utterance stops at 50 + 8 frames per text token (greedy: the random weights do
    not end speech that early), also under a larger --max-frames, and at a smaller one:
    text at once in either layout, token ids and text streamed on stdin alike. Long text
    with --max-frames above what the text makes holds each utterance to its own guard too,
    so the request makes as many frames as without --max-frames, and a lower total still
    ends it."""
    text = "Hello there, friend."
    n = tokens(k, model, text)
    ids = subprocess.run([k, "tokenize", "-m", model, text], capture_output=True).stdout.split()
    want = 50 + 8 * n
    base = [k, "synth", "-m", model, "-s", "ryan", "--greedy", "-o", "-", "--format", "f32"]
    runs = {"text": ([text], None), "streaming layout": (["--layout", "streaming", text], None),
            "token ids": (["--token-ids", ",".join(i.decode() for i in ids)], None),
            "--stream-text": (["--stream-text"], text.encode())}
    for name, (extra, stdin) in runs.items():
        for limit, frames in (([], want), (["--max-frames", "2000"], want),
                              (["--max-frames", "20"], 20)):
            r = subprocess.run(base + limit + extra, input=stdin, capture_output=True,
                               timeout=300)
            check(r.returncode == 0 and len(r.stdout) == frames * FRAME * 4,
                  f"guard, {name} {limit}: {len(r.stdout) / FRAME / 4:g} frames, want {frames} "
                  f"({r.stderr.decode()})")
    sentences = ["One two three.", "Four five six.", "Seven eight nine."]
    guards = sum(50 + 8 * tokens(k, model, t) for t in sentences)
    split = ["--greedy", "--max-utterance", "20"]
    for extra, frames in [([], guards), (["--max-frames", "2000"], guards),
                          (["--max-frames", str(guards - 7)], guards - 7)]:
        rc, pcm, err = synth(k, model, " ".join(sentences), split + extra)
        check(rc == 0 and len(pcm) == frames * FRAME,
              f"long text {extra}: {len(pcm) / FRAME:g} frames, want {frames} ({err})")
    print("ok   runaway guard: one definition, per utterance under --max-frames")


def prompt_cap(k, model, work):
    words = " ".join(["word"] * 2100) + "."  # one sentence of about 2100 tokens
    expect = "more than 2048"
    rc, pcm, err = synth(k, model, words, ["--max-utterance", "0", "--frames", "2"])
    check(rc == 1 and expect in err and len(err.splitlines()) == 1 and not pcm,
          f"one long utterance: {rc} {err!r}")
    # The long sentence is the second utterance: still refused before any audio.
    rc, pcm, err = synth(k, model, "Sentence number one is here. " * 40 + words,
                         ["--max-utterance", "11000", "--max-frames", "3"])
    check(rc == 1 and expect in err and not pcm, f"long second utterance: {rc} {len(pcm)} {err!r}")
    # The same text at the default split speaks (the cap is per utterance).
    rc, pcm, err = synth(k, model, words, ["--max-frames", "2"])
    check(rc == 0 and len(pcm) == 2 * FRAME, f"default split: {rc} {err!r}")
    # An instruction counts too (1.7B-only models take one; the 0.6B ignores it, so its
    # tokens do not count there): 2000 tokens of text alone fit.
    rc, _, err = synth(k, model, " ".join(["word"] * 2000),
                       ["--max-utterance", "0", "--frames", "1"])
    check(rc == 0, f"2000 tokens fit: {err}")
    print("ok   prompt cap")


def blank_text(k, model):
    for name, text in [("NBSP", "\u00a0\u00a0"), ("ideographic space", "\u3000"),
                       ("em space and NBSP", "\u2003\n\u00a0 \t"), ("line separator", "\u2028")]:
        rc, pcm, err = synth(k, model, text, ["--frames", "2"])
        check(rc == 1 and "empty or only whitespace" in err and not pcm,
              f"{name}: {rc} {err!r}")
        rc, pcm, err = synth(k, model, None, ["--frames", "2"], stdin=text.encode())
        check(rc == 1 and "empty or only whitespace" in err, f"{name} on stdin: {rc} {err!r}")
    # Long blank text goes the long-text way: the same error.
    rc, _, err = synth(k, model, "\u3000" * 400, ["--frames", "2"])
    check(rc == 1 and "empty or only whitespace" in err, f"long blank text: {err!r}")
    # Streamed text (--stream-text) of only whitespace, even in pieces that cut a character
    # in two, is refused the same way before any audio; leading whitespace pieces before the
    # words change nothing.
    pieces = [b"\xc2", b"\xa0 \xe3\x80", b"\x80\n"]
    rc, out, err = stream_pieces(k, model, pieces)
    check(rc == 1 and "empty or only whitespace" in err and len(err.splitlines()) == 1 and
          not out, f"--stream-text of whitespace pieces: {rc} {err!r} {len(out)} bytes")
    for text in ("", " \t\u3000"):
        rc, out, err = stream_pieces(k, model, [text.encode()] if text else [])
        check(rc == 1 and "empty or only whitespace" in err and not out,
              f"--stream-text {text!r}: {rc} {err!r}")
    rc, late, err = stream_pieces(k, model, pieces + [b"Hello there."])
    rc2, once, _ = stream_pieces(k, model, [b"".join(pieces) + b"Hello there."])
    check(rc == 0 and rc2 == 0 and late == once and len(once) == 2 * FRAME * 4,
          f"--stream-text whitespace, then words: {rc} {err!r}")
    # A space inside words is still text.
    rc, pcm, err = synth(k, model, "a\u00a0b", ["--frames", "2"])
    check(rc == 0 and len(pcm) == 2 * FRAME, f"text with an NBSP inside: {err}")
    print("ok   blank text")


def invalid_utf8(k, model):
    """Malformed UTF-8 is refused naming the byte of the user's text (not of the engine's
    chat wrapping around it), also after long text is split and in streamed text."""
    cases = [
        ("argument", b"abc\xff", [], None, "the text at byte 3"),
        ("stdin", None, [], b"Hello \xe4\xbd", "the text at byte 6"),
        ("second utterance", b"One two three. Four five \xc0 six.", ["--max-utterance", "16"],
         None, "the text at byte 25"),
        ("streamed", False, ["--stream-text"], b"\xffHello there.", "the streamed text at byte 0"),
        ("instruction", b"Hello.", ["-i", b"ab\xed\xa0\x80"], None, "the instruction at byte 2"),
    ]
    for name, text, extra, stdin, want in cases:
        rc, pcm, err = synth(k, model, text, ["--frames", "2"] + extra, stdin=stdin)
        check(rc == 1 and "invalid UTF-8 in " + want in err and len(err.splitlines()) == 1
              and not pcm, f"invalid UTF-8, {name}: {rc} {err!r}")
    print("ok   invalid UTF-8 named at the user's byte")


def main():
    ap = argparse.ArgumentParser()
    for name in ("kztts", "tiny", "tokenizer", "work"):
        ap.add_argument("--" + name, required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    model = link_copy(a.tiny, os.path.join(a.work, "tiny_tok"))
    for f in ("vocab.json", "merges.txt", "tokenizer_config.json"):
        shutil.copy(os.path.join(a.tokenizer, f), os.path.join(model, f))
    frame_totals(a.kztts, two_frame_model(model, a.work))
    runaway_guard(a.kztts, model)
    prompt_cap(a.kztts, model, a.work)
    blank_text(a.kztts, model)
    invalid_utf8(a.kztts, model)
    finish("test_text_limits")


if __name__ == "__main__":
    main()
