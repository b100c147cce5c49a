"""Model files that are not regular files: `kztts info -m MODEL` where one file the loader
reads (config.json, generation_config.json, model.safetensors, the tokenizer's vocab.json,
merges.txt and tokenizer_config.json, speech_tokenizer/config.json and
speech_tokenizer/model.safetensors) is a FIFO nobody writes to, a directory or a symlink to
/dev/zero, or a dangling or looping symlink (the optional generation_config.json and
tokenizer files too: not taken as absent); `-m` naming a FIFO x.gguf, /dev/zero or a FIFO.
Each must fail at once (exit 1) with one line naming the file and what it is, never wait on
the FIFO. A run that hangs is
killed after a timeout and counts as a failure.

Then the one input that may be a pipe: `kztts decode --codes` reading from a FIFO that a
writer fills, and from stdin (`--codes -`).
"""
import argparse
import json
import os
import shutil
import subprocess
import threading

from testlib import check, expect_refused, finish, link_copy

TIMEOUT = 60
TOKENIZER = ("vocab.json", "merges.txt", "tokenizer_config.json")
FILES = ("config.json", "generation_config.json", "model.safetensors",
         "speech_tokenizer/config.json", "speech_tokenizer/model.safetensors") + TOKENIZER


def byte_level_vocab():
    """The 256 one-byte tokens of a GPT-2 byte-level vocabulary."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    vocab, extra = {}, 0
    for b in range(256):
        if b in keep:
            vocab[chr(b)] = b
        else:
            vocab[chr(256 + extra)] = b
            extra += 1
    return vocab


def model_copy(a, name):
    """The tiny checkpoint with a small byte-level tokenizer, weights symlinked."""
    dst = link_copy(a.tiny, os.path.join(a.work, name))
    with open(os.path.join(dst, "vocab.json"), "w") as f:
        json.dump(byte_level_vocab(), f)
    with open(os.path.join(dst, "merges.txt"), "w") as f:
        f.write("#version: 0.2\n")
    with open(os.path.join(dst, "tokenizer_config.json"), "w") as f:
        f.write('{"added_tokens_decoder": {}}')
    return dst


def run(a, args, **kw):
    """Runs kztts; a hang is killed and reported as exit status None."""
    try:
        return subprocess.run([a.kztts] + args, capture_output=True, text=True,
                              timeout=TIMEOUT, **kw)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, None, "", f"timed out after {TIMEOUT} s")


def replace(model, rel, kind):
    path = os.path.join(model, rel)
    os.unlink(path)
    if kind == "a FIFO":
        os.mkfifo(path)
    elif kind == "a directory":
        os.mkdir(path)
    else:
        os.symlink("/dev/zero", path)
    return path


def model_files(a):
    ok = run(a, ["info", "-m", model_copy(a, "good")])
    check(ok.returncode == 0, f"the unchanged copy does not load: {ok.stderr.strip()!r}")
    for rel in FILES:
        kinds = ["a FIFO"]
        if rel in ("config.json", "model.safetensors", "vocab.json"):
            kinds += ["a directory", "a character device"]
        for kind in kinds:
            model = model_copy(a, "special")
            path = replace(model, rel, kind)
            expect_refused(f"{rel} is {kind}", run(a, ["info", "-m", model]), path,
                           f"not a regular file ({kind})")
        # A broken link (a cache missing its blob) is no absent file, optional ones included.
        for kind, target in (("dangling", "missing.blob"), ("looping", os.path.basename(rel))):
            model = model_copy(a, "special")
            path = os.path.join(model, rel)
            os.unlink(path)
            os.symlink(target, path)
            expect_refused(f"{rel} is a {kind} symlink", run(a, ["info", "-m", model]), path,
                           "cannot open")


def model_argument(a):
    fifo = os.path.join(a.work, "x.gguf")
    os.mkfifo(fifo)
    expect_refused("-m FIFO.gguf", run(a, ["info", "-m", fifo]), fifo,
                   "not a regular file (a FIFO)")
    expect_refused("-m /dev/zero", run(a, ["info", "-m", "/dev/zero"]), "/dev/zero")
    plain = os.path.join(a.work, "model_fifo")
    os.mkfifo(plain)
    expect_refused("-m FIFO", run(a, ["info", "-m", plain]), plain)


def codes_from_pipes(a):
    with open(os.path.join(a.golden, "codes_7.txt")) as f:
        codes = f.read()
    fifo = os.path.join(a.work, "codes_fifo")
    os.mkfifo(fifo)

    def writer():
        with open(fifo, "w") as f:
            f.write(codes)

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    out = os.path.join(a.work, "from_fifo.wav")
    r = run(a, ["decode", "-m", a.tiny, "--codes", fifo, "-o", out])
    t.join(timeout=5)
    check(r.returncode == 0 and os.path.getsize(out) > 44,
          f"--codes FIFO: exit {r.returncode}, stderr {r.stderr.strip()!r}")
    out2 = os.path.join(a.work, "from_stdin.wav")
    r = run(a, ["decode", "-m", a.tiny, "--codes", "-", "-o", out2], input=codes)
    check(r.returncode == 0 and os.path.getsize(out2) > 44,
          f"--codes -: exit {r.returncode}, stderr {r.stderr.strip()!r}")
    with open(out, "rb") as f1, open(out2, "rb") as f2:
        check(f1.read() == f2.read(), "--codes FIFO and --codes - wrote different audio")
    print("ok   codes from a FIFO and from stdin", flush=True)


def main():
    ap = argparse.ArgumentParser()
    for name in ("kztts", "tiny", "golden", "work"):
        ap.add_argument("--" + name, required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    model_files(a)
    model_argument(a)
    codes_from_pipes(a)
    finish("test_model_files")


if __name__ == "__main__":
    main()
