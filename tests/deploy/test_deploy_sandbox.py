#!/usr/bin/env python3
"""deploy/kztts.service's sandbox against what the server really does.

The unit's SystemCallFilter=, MemoryDenyWriteExecute= and RestrictAddressFamilies= kill
or refuse a server that steps outside them, and nothing else would notice before a
production start. So this runs `kztts serve` under strace on the tiny Base checkpoint
through a whole life: load, a voice upload (the encoders), speech in all six formats with
a speed change, SSE, /metrics, a delete, SIGTERM and the drain. Write-and-execute memory
is refused for real, as MemoryDenyWriteExecute=yes does (prctl PR_SET_MDWE, Linux 6.3+:
this script re-executes itself as the wrapper): the server must still do all of that,
and the tokenizer (whose PCRE2 JIT asks for such memory and falls back to the
interpreter) must give the same ids as without it. Then every system call the server
made must be allowed by the unit's filter (the groups expanded by `systemd-analyze
syscall-filter`), and every socket must be of an allowed family.

Usage: test_deploy_sandbox.py --kztts BUILD/kztts --tiny-base DIR --tiny DIR --source SRC --work DIR
       test_deploy_sandbox.py --mdwe-exec PROGRAM ARGS...   (the wrapper)
"""
import argparse
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import wave
import math
import struct

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model"))
from testlib import check, finish  # noqa: E402
from servelib import Server  # noqa: E402

FORMATS = ["mp3", "opus", "aac", "flac", "wav", "pcm"]
PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN = 65, 1
TOKENIZE_TEXT = "Hello, world! It's 12 o'clock: ça va? 你好。"


def mdwe_exec(argv):
    """Refuses writable+executable memory in this process and what it executes, then execs."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) != 0:
        sys.exit(f"prctl(PR_SET_MDWE): errno {ctypes.get_errno()}")
    os.execv(argv[0], argv)


def mdwe_available():
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--mdwe-exec", "/bin/true"],
                       capture_output=True, text=True, timeout=60)
    return r.returncode == 0


def expand(group, seen):
    """The system calls of a filter group, nested groups expanded."""
    out = set()
    text = subprocess.run(["systemd-analyze", "syscall-filter", group], capture_output=True,
                          text=True, timeout=60).stdout
    for line in text.splitlines():
        t = line.strip()
        if not t or t.startswith("#") or not line.startswith(" "):
            continue
        if t.startswith("@"):
            if t not in seen:
                seen.add(t)
                out |= expand(t, seen)
        else:
            out.add(t)
    return out


def unit_filter(unit_text):
    """(allowed, denied) system calls from the unit's SystemCallFilter= lines."""
    allowed, denied = set(), set()
    for line in unit_text.splitlines():
        m = re.match(r"SystemCallFilter=(~?)(.*)", line.strip())
        if not m:
            continue
        names = set()
        for item in m.group(2).split():
            names |= expand(item, set()) if item.startswith("@") else {item}
        (denied if m.group(1) else allowed).update(names)
    return allowed, denied


def unit_value(unit_text, key):
    m = re.search(rf"^{key}=(.*)$", unit_text, re.M)
    return m.group(1).split() if m else []


def write_tone(path, seconds=3, rate=24000):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"".join(struct.pack("<h", int(9000 * math.sin(2 * math.pi * 180 * i / rate)
                                                      * (0.6 + 0.4 * math.sin(2 * math.pi * 3 * i / rate))))
                               for i in range(seconds * rate)))


def multipart(fields, files):
    boundary = "kzttsdeploytestboundary"
    out = b""
    for k, v in fields.items():
        out += f"--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n".encode()
    for k, (name, data) in files.items():
        out += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"; filename=\"{name}\"\r\n"
                "Content-Type: audio/wav\r\n\r\n").encode() + data + b"\r\n"
    return out + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def exercise(srv, work):
    """A whole life's requests; each must succeed."""
    wav = os.path.join(work, "ref.wav")
    write_tone(wav)
    body, ctype = multipart({"name": "me", "consent": "yes", "ref_text": "A steady tone."},
                            {"audio_sample": ("ref.wav", open(wav, "rb").read())})
    st, _, data = srv.request("POST", "/v1/audio/voices", body, {"Content-Type": ctype}, timeout=300)
    check(st == 200, f"voice upload: {st} {data[:200]!r}")
    for fmt in FORMATS:
        req = {"model": "tts-1", "input": "Hello there.", "voice": "me", "response_format": fmt,
               "speed": 1.5, "max_new_tokens": 8}
        st, _, data = srv.request("POST", "/v1/audio/speech", json_bytes(req),
                                  {"Content-Type": "application/json"}, timeout=300)
        check(st == 200 and len(data) > 0, f"speech {fmt}: {st} {len(data)} bytes")
    req = {"model": "tts-1", "input": "Events.", "voice": "me", "stream_format": "sse", "max_new_tokens": 4}
    st, _, data = srv.request("POST", "/v1/audio/speech", json_bytes(req),
                              {"Content-Type": "application/json"}, timeout=300)
    check(st == 200 and b"speech.audio.done" in data, f"SSE: {st}")
    check(srv.request("GET", "/metrics")[0] == 200, "/metrics")
    check(srv.request("DELETE", "/v1/audio/voices/me")[0] == 200, "voice delete")


def json_bytes(obj):
    import json
    return json.dumps(obj).encode()


def main():
    if sys.argv[1:2] == ["--mdwe-exec"]:
        mdwe_exec(sys.argv[2:])
    ap = argparse.ArgumentParser()
    ap.add_argument("--kztts", required=True)
    ap.add_argument("--tiny-base", required=True)
    ap.add_argument("--tiny", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    for tool in ("strace", "systemd-analyze"):
        check(shutil.which(tool) is not None, f"{tool} is installed (scripts/install-deps.sh)")
    if not (shutil.which("strace") and shutil.which("systemd-analyze")):
        finish("test_deploy_sandbox")
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    trace = os.path.join(a.work, "trace")
    unit = open(os.path.join(a.source, "deploy", "kztts.service")).read()

    mdwe = "yes" in unit_value(unit, "MemoryDenyWriteExecute") and mdwe_available()
    if not mdwe:
        print("note: write-and-execute memory not refused (no MemoryDenyWriteExecute=yes, "
              "or a kernel without PR_SET_MDWE)")
    guard = [sys.executable, os.path.abspath(__file__), "--mdwe-exec"] if mdwe else []
    if mdwe:
        plain = subprocess.run([a.kztts, "tokenize", "-m", a.tiny, TOKENIZE_TEXT],
                               capture_output=True, text=True, timeout=120)
        guarded = subprocess.run(guard + [os.path.abspath(a.kztts), "tokenize", "-m", a.tiny, TOKENIZE_TEXT],
                                 capture_output=True, text=True, timeout=120)
        check(plain.returncode == 0 and plain.stdout.strip() and guarded.stdout == plain.stdout,
              f"the same token ids without write-and-execute memory: {plain.stdout!r} {guarded.stdout!r} "
              f"{guarded.stderr.strip()}")

    # strace runs the server; the trace covers every thread (-f) from exec to exit.
    wrapper = os.path.join(a.work, "kztts-traced")
    with open(wrapper, "w") as f:
        # LeakSanitizer cannot run under ptrace: a sanitized build (CI's ASan pass) traced
        # here leaves leak checking to the untraced tests.
        f.write(f"#!/bin/sh\nexport ASAN_OPTIONS=\"${{ASAN_OPTIONS:+$ASAN_OPTIONS:}}detect_leaks=0\"\n"
                f"exec strace -f -qq -o {trace} {' '.join(guard)} {os.path.abspath(a.kztts)} \"$@\"\n")
    os.chmod(wrapper, 0o755)
    srv = Server(wrapper, a.work, "server", ["-m", a.tiny_base, "--voices-dir",
                                             os.path.join(a.work, "voices")])
    # strace (the process servelib started) passes no signal on: the server, the trace's
    # first process, gets them.
    m = re.match(r"(\d+)", open(trace).read())
    server_pid = int(m.group(1)) if m else None
    check(server_pid is not None, "the trace names the server")
    try:
        check(srv.wait_ready(300), "the traced server becomes ready")
        exercise(srv, a.work)
        if server_pid:
            os.kill(server_pid, signal.SIGTERM)
        try:
            rc = srv.proc.wait(120)
        except subprocess.TimeoutExpired:
            rc = None
        check(rc == 0, f"the traced server drains and exits 0: {rc}")
    finally:
        try:
            if server_pid:
                os.kill(server_pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    calls, families = set(), set()
    lines = open(trace).readlines()
    exec_at = max((i for i, ln in enumerate(lines) if re.search(r"execve\(\"[^\"]*kztts\"", ln)), default=0)
    for line in lines[exec_at:]:  # the server's own calls, not the wrapper's
        m = re.match(r"\d+\s+(?:<\.\.\. )?([a-z_0-9]+)[( ]", line)
        if m:
            calls.add(m.group(1))
        m = re.search(r"\bsocket\((AF_[A-Z0-9]+)", line)
        if m:
            families.add(m.group(1))
    check(len(calls) > 20, f"the trace holds the server's system calls ({len(calls)})")
    allowed, denied = unit_filter(unit)
    check(len(allowed) > 100, f"the unit's filter allows a system-service set ({len(allowed)} calls)")
    outside = sorted(c for c in calls if c not in allowed or c in denied)
    check(not outside, f"every system call is allowed by SystemCallFilter=: outside {outside}")
    fams = set(unit_value(unit, "RestrictAddressFamilies"))
    check(families <= fams, f"sockets of the allowed families {sorted(fams)}: {sorted(families)}")
    finish("test_deploy_sandbox")


if __name__ == "__main__":
    main()
