"""The CLI under an address-space limit (RLIMIT_AS): out of memory is bad input too.

Each command runs on the tiny checkpoint once per limit of a sweep from too small to
load anything to enough for everything: `quantize --type q4_0`, `synth --token-ids`
with the fast codec precision, the same from the q4_0 GGUF, and `decode` with
winograd. Every run must either succeed with its whole output file, or exit 1 with
one line on stderr that says what ran out ("out of memory", "Cannot allocate memory",
"Resource temporarily unavailable") and leave no output file and no temporary file.
A signal (a crash or an abort), another exit code, a half file or a multi-line message
fails the case. The sweep must see both outcomes for each command, so a limit range
that no longer reaches the failures (or the successes) fails too rather than passing
on nothing. Skipped (with a passing check of the skip itself) for sanitizer builds,
whose shadow memory cannot start under such a limit.
"""
import argparse
import os
import resource
import shutil
import subprocess

from testlib import check, finish

LIMITS_MB = list(range(32, 320, 6))
OOM_WORDS = ("out of memory", "Cannot allocate memory", "Resource temporarily unavailable")


def limited(mb):
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (mb << 20, mb << 20))
    return apply


def sanitized(kztts):
    with open(kztts, "rb") as f:
        return b"__asan_init" in f.read()


def leftovers(folder, out_name):
    return [f for f in os.listdir(folder) if f.startswith(out_name)]


def sweep(a, name, args, out):
    """Runs args under every limit; returns (successes, failures) after the checks."""
    folder, out_name = os.path.dirname(out), os.path.basename(out)
    ok = failed = 0
    for mb in LIMITS_MB:
        for f in leftovers(folder, out_name):
            os.remove(os.path.join(folder, f))
        r = subprocess.run([a.kztts] + args, capture_output=True, timeout=120,
                           preexec_fn=limited(mb))
        err = r.stderr.decode(errors="replace").strip()
        left = leftovers(folder, out_name)
        if r.returncode == 0:
            ok += 1
            check(left == [out_name] and os.path.getsize(out) > 0,
                  f"{name} at {mb} MB: exit 0 but output {left}")
            continue
        failed += 1
        check(r.returncode == 1, f"{name} at {mb} MB: exit {r.returncode}: {err[-300:]}")
        check(len(err.splitlines()) == 1, f"{name} at {mb} MB: message of several lines: {err}")
        check(any(w in err for w in OOM_WORDS), f"{name} at {mb} MB: unclear message: {err}")
        check(left == [], f"{name} at {mb} MB: left {left} after failing")
    print(f"{name}: {ok} limits succeeded, {failed} failed cleanly")
    check(ok > 0 and failed > 0, f"{name}: the sweep saw {ok} successes and {failed} failures")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kztts", required=True)
    p.add_argument("--tiny", required=True)
    p.add_argument("--work", required=True)
    a = p.parse_args()
    if sanitized(a.kztts):
        print("sanitizer build: RLIMIT_AS sweep skipped")
        check(True, "skipped")
        finish("test_low_memory")
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    gguf = os.path.join(a.work, "tiny_q4_0.gguf")
    r = subprocess.run([a.kztts, "quantize", "-m", a.tiny, "-o", gguf, "--type", "q4_0"],
                       capture_output=True, timeout=300)
    check(r.returncode == 0, f"quantize without a limit: {r.stderr.decode()}")
    codes = os.path.join(a.work, "codes.txt")
    with open(codes, "w") as f:
        for t in range(12):
            f.write(" ".join(str((t * 131 + q * 17) % 2048) for q in range(16)) + "\n")
    cases = [
        ("quantize", ["quantize", "-m", a.tiny, "--type", "q4_0", "-o"], "q.gguf"),
        ("synth from GGUF", ["synth", "-m", gguf, "-s", "ryan", "--greedy", "--frames", "8",
                             "--token-ids", "9707,1879,13", "-o"], "g.wav"),
        ("synth", ["synth", "-m", a.tiny, "-s", "ryan", "--greedy", "--frames", "8",
                   "--token-ids", "9707,1879,13", "--codec-precision", "fast", "-o"], "s.wav"),
        ("decode", ["decode", "-m", a.tiny, "--codes", codes, "--codec-precision", "winograd",
                    "-o"], "d.wav"),
    ]
    for name, args, out_name in cases:
        out = os.path.join(a.work, name.replace(" ", "_"), out_name)
        os.makedirs(os.path.dirname(out))
        sweep(a, name, args + [out], out)
    finish("test_low_memory")


if __name__ == "__main__":
    main()
