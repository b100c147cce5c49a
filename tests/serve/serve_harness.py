"""Shared harness of the `kztts serve` end-to-end tests: starts servers on free loopback
ports and always stops them, sends raw HTTP requests, reads /metrics and checks audio with
independent decoders.

Flow: Server.start() runs `kztts serve -m MODEL --host 127.0.0.1 --port 0 ...` with its
stderr in a log file, waits (bounded) for the "listening on http://HOST:PORT" line, then for
/health and /ready to answer 200. Every server (and any other child registered with
track()) dies with the test: SIGKILL through PR_SET_PDEATHSIG if the test process dies,
stop() at exit, on SIGTERM/SIGINT and when a `with` block ends. request() speaks HTTP/1.1
through http.client and says whether a chunked body ended properly; decoded_seconds()
decodes a response's audio with mpg123, opusdec, flac, ffmpeg or sox and returns its length.
"""
import base64
import ctypes
import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
import wave

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model"))
import testlib  # noqa: E402
from testlib import check, speechlike, write_wav  # noqa: E402

FRAME_SECONDS = 0.08  # one codec frame of the released (and tiny) models: 1920 samples
RATE = 24000
FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm")
CONTENT_TYPES = {"mp3": "audio/mpeg", "opus": "audio/ogg", "aac": "audio/aac",
                 "flac": "audio/flac", "wav": "audio/wav", "pcm": "audio/pcm"}
LISTEN_RE = re.compile(r"kztts serve: listening on http://([0-9.]+):([0-9]+)")

_children = []
_servers = []


def _die_with_parent():
    """preexec_fn: the child gets SIGKILL when the test process dies, however it dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def spawn(argv, log_path, env=None):
    """Starts a child with stdout+stderr in log_path, killed with the test."""
    log = open(log_path, "wb")
    p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         env=env, preexec_fn=_die_with_parent)
    log.close()
    _children.append(p)
    return p


def stop_process(p, timeout=30):
    """SIGTERM, a bounded wait, then SIGKILL. Returns the exit status."""
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(30)
    return p.returncode


def _cleanup(*_):
    for p in _children:
        if p.poll() is None:
            p.kill()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                pass


def _on_signal(signum, _frame):
    _cleanup()
    sys.exit(128 + signum)


import atexit  # noqa: E402
atexit.register(_cleanup)
signal.signal(signal.SIGTERM, _on_signal)
signal.signal(signal.SIGINT, _on_signal)


def sanitized(kztts):
    """Whether kztts is an AddressSanitizer build (slower; its allocator keeps freed memory
    in a quarantine)."""
    with open(kztts, "rb") as f:
        return b"__asan_init" in f.read()


def free_port():
    """A port in 20000-60000 that is free now (for programs that cannot take port 0)."""
    for _ in range(200):
        port = random.randint(20000, 60000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no free port found")


def wait_until(fn, timeout, step=0.1):
    """Calls fn until it returns a true value or timeout seconds pass; returns the last
    value."""
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() > end:
            return v
        time.sleep(step)


class Server:
    """One `kztts serve` process on 127.0.0.1 and a free port."""

    def __init__(self, kztts, model, work, name="serve", args=(), env=None):
        self.kztts, self.model, self.work, self.name = kztts, model, work, name
        self.args, self.env = list(args), env
        self.proc, self.port = None, None
        self.log_path = os.path.join(work, name + ".log")

    def start(self, timeout=120):
        os.makedirs(self.work, exist_ok=True)
        _servers.append(self)
        argv = [self.kztts, "serve", "-m", self.model, "--host", "127.0.0.1", "--port", "0",
                *self.args]
        self.proc = spawn(argv, self.log_path, self.env)
        line = wait_until(self._listening, timeout)
        if not line:
            raise RuntimeError(f"{self.name}: no 'listening on' line in {timeout} s:\n"
                               + self.log())
        self.port = int(line.group(2))
        if not wait_until(lambda: self.get_status("/health") == 200, timeout):
            raise RuntimeError(f"{self.name}: /health not 200 in {timeout} s:\n" + self.log())
        if not wait_until(lambda: self.get_status("/ready") == 200, timeout):
            raise RuntimeError(f"{self.name}: /ready not 200 in {timeout} s:\n" + self.log())
        return self

    def _listening(self):
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited {self.proc.returncode}:\n" + self.log())
        return LISTEN_RE.search(self.log())

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def get_status(self, path):
        try:
            return request(self.port, "GET", path, timeout=10).status
        except OSError:
            return None

    def healthy(self):
        return self.alive() and self.get_status("/health") == 200

    def stop(self, timeout=60):
        return stop_process(self.proc, timeout) if self.proc else None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def finish(name):
    """testlib.finish after a look at every server's log for sanitizer reports (a sanitizer
    build aborts on the first; its report is the useful part)."""
    for srv in _servers:
        text = srv.log()
        at = max(text.find("Sanitizer"), text.find("runtime error:"))
        check(at < 0, f"{srv.name}: sanitizer report in {srv.log_path}:\n"
              + text[max(0, at - 200):at + 3000])
    testlib.finish(name)


class Response:
    def __init__(self, status, headers, body, complete, error=None):
        self.status, self.headers, self.body = status, headers, body
        self.complete, self.error = complete, error

    def header(self, name):
        return self.headers.get(name.lower())

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def __repr__(self):
        return (f"<{self.status} {self.headers.get('content-type')} {len(self.body)} bytes"
                f"{'' if self.complete else ' INCOMPLETE'} {self.body[:200]!r}>")


def request(port, method, path, body=None, headers=None, timeout=120):
    """One HTTP/1.1 request on a fresh connection. body: bytes, str or a dict (sent as
    JSON). A body cut before its end (chunked without the last chunk, or short of
    Content-Length) comes back with complete False."""
    hdrs = dict(headers or {})
    if isinstance(body, dict):
        body = json.dumps(body)
        hdrs.setdefault("Content-Type", "application/json")
    if isinstance(body, str):
        body = body.encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=hdrs)
        r = conn.getresponse()
        headers = {k.lower(): v for k, v in r.getheaders()}
        try:
            data, complete, err = r.read(), True, None
        except http.client.IncompleteRead as e:
            data, complete, err = e.partial, False, repr(e)
        except (OSError, http.client.HTTPException) as e:
            data, complete, err = b"", False, repr(e)
        return Response(r.status, headers, data, complete, err)
    finally:
        conn.close()


def speech(port, fields, headers=None, timeout=300):
    """POST /v1/audio/speech with the JSON fields (a dict, or the body as str/bytes)."""
    hdrs = {"Content-Type": "application/json", **(headers or {})}
    return request(port, "POST", "/v1/audio/speech", fields, hdrs, timeout)


def error_of(r):
    """The OpenAI error envelope's inner object of a response, or None when the body is
    not {"error": {"message", "type", "param", "code"}}."""
    j = r.json()
    if not isinstance(j, dict) or not isinstance(j.get("error"), dict):
        return None
    e = j["error"]
    if not all(k in e for k in ("message", "type", "param", "code")):
        return None
    if not isinstance(e["message"], str) or not e["message"]:
        return None
    return e


def check_error(name, r, status, param=None):
    """r is an error response with the status, the envelope and (when given) the param."""
    check(r.status == status, f"{name}: status {r.status} (want {status}): {r!r}")
    e = error_of(r)
    check(e is not None, f"{name}: no OpenAI error envelope: {r.body[:300]!r}")
    ct = r.header("content-type") or ""
    check(ct.startswith("application/json"), f"{name}: error Content-Type {ct!r}")
    check(bool(r.header("x-request-id")), f"{name}: no X-Request-Id on the error")
    if e is not None and param is not None:
        check(e["param"] == param, f"{name}: param {e['param']!r} (want {param!r})")
    return e


def metrics(port):
    """/metrics parsed: {'name{labels}': value} with the labels as the server wrote them,
    plus {'name': value} for unlabelled samples."""
    r = request(port, "GET", "/metrics", timeout=30)
    out = {}
    for line in r.body.decode(errors="replace").splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})?)\s+(\S+)", line)
        if m:
            out[m.group(1)] = float(m.group(3))
    return out


def metric(values, name, **labels):
    """Sum of the samples called name whose labels include the given ones (0 if none)."""
    total = 0.0
    for key, v in values.items():
        base, _, rest = key.partition("{")
        if base != name:
            continue
        have = dict(re.findall(r'([a-zA-Z_]+)="([^"]*)"', rest))
        if all(have.get(k) == str(want) for k, want in labels.items()):
            total += v
    return total


def wav_bytes(seconds, seed=1, rate=RATE):
    """A speech-like 16-bit mono WAV (the harness's reference audio for cloning)."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "ref.wav")
        write_wav(p, speechlike(seconds, seed, rate), rate)
        with open(p, "rb") as f:
            return f.read()


def data_uri(audio, mime="audio/wav"):
    return f"data:{mime};base64," + base64.b64encode(audio).decode()


def _run(argv, timeout=120):
    return subprocess.run(argv, capture_output=True, timeout=timeout)


def _aac_stream_problem(path):
    """What ffprobe finds wrong with an AAC file (AAC-LC in ADTS, mono, 24 kHz), or None."""
    r = _run(["ffprobe", "-v", "error", "-f", "aac", "-show_entries",
              "stream=codec_name,profile,sample_rate,channels", "-of", "json", path])
    try:
        st = json.loads(r.stdout)["streams"][0]
    except (ValueError, KeyError, IndexError):
        return f"ffprobe: {r.stderr.decode(errors='replace')[-300:]}"
    want = {"codec_name": "aac", "profile": "LC", "sample_rate": str(RATE), "channels": 1}
    got = {k: st.get(k) for k in want}
    return None if got == want else f"ffprobe: {got} (want {want})"


def decoded_seconds(fmt, path, work):
    """Decodes the audio file at path (in format fmt) with an independent tool and returns
    (seconds, None), or (None, the tool's complaint)."""
    out = os.path.join(work, os.path.basename(path) + ".decoded.wav")
    if fmt == "pcm":
        n = os.path.getsize(path)
        return (n / 2 / RATE, None) if n % 2 == 0 else (None, f"odd pcm size {n}")
    if fmt == "mp3":
        argv = ["mpg123", "-q", "-w", out, path]
    elif fmt == "opus":
        argv = ["opusdec", "--quiet", "--rate", str(RATE), path, out]
    elif fmt == "flac":
        argv = ["flac", "-d", "-s", "-f", "-o", out, path]
    elif fmt == "aac":
        argv = ["ffmpeg", "-v", "error", "-xerror", "-y", "-f", "aac", "-i", path, "-f", "wav",
                out]
    elif fmt == "wav":
        # A streamed WAV says 0xFFFFFFFF for its sizes: sox reads to the end of the data.
        argv = ["sox", "--ignore-length", path, "-t", "wav", out]
    else:
        return None, f"unknown format {fmt}"
    if fmt == "aac":
        why = _aac_stream_problem(path)
        if why:
            return None, why
    r = _run(argv)
    if r.returncode != 0 or not os.path.exists(out):
        return None, f"{argv[0]} exit {r.returncode}: {r.stderr.decode(errors='replace')[-300:]}"
    try:
        with wave.open(out, "rb") as w:
            if w.getnchannels() != 1 or w.getframerate() != RATE:
                return None, (f"{argv[0]} decoded {w.getnchannels()} channels at "
                              f"{w.getframerate()} Hz (want mono at {RATE} Hz)")
            return w.getnframes() / w.getframerate(), None
    except (wave.Error, EOFError) as e:
        return None, f"{argv[0]} wrote an unreadable WAV: {e}"
    finally:
        os.unlink(out)


def expected_seconds(frames, speed=1.0):
    return frames * FRAME_SECONDS / speed


def length_ok(fmt, seconds, frames, speed=1.0):
    """Whether decoded audio of fmt is as long as frames codec frames at speed: exact for
    the lossless formats at speed 1; lossy encoders pad to their frame sizes and add
    priming that not every decoder trims, and the speed change rounds at its edges."""
    want = expected_seconds(frames, speed)
    if seconds is None:
        return False
    if fmt in ("pcm", "wav", "flac") and speed == 1.0:
        return abs(seconds - want) < 1.0 / RATE
    slack = 0.02 * want + (0.05 if fmt in ("pcm", "wav", "flac") else 0.15)
    return want - slack <= seconds <= want + slack


MAGIC = {
    "mp3": lambda b: b[:3] == b"ID3" or (len(b) > 1 and b[0] == 0xFF and b[1] & 0xE0 == 0xE0),
    "opus": lambda b: b[:4] == b"OggS" and b"OpusHead" in b[:64],
    "aac": lambda b: len(b) > 1 and b[0] == 0xFF and b[1] & 0xF6 == 0xF0,
    "flac": lambda b: b[:4] == b"fLaC",
    "wav": lambda b: b[:4] == b"RIFF" and b[8:12] == b"WAVE",
    "pcm": lambda b: len(b) % 2 == 0,
}


def file_ext(fmt):
    return {"opus": "ogg", "pcm": "raw"}.get(fmt, fmt)


class CurlResult:
    def __init__(self, rc, status, headers, body, stderr):
        self.rc, self.status, self.headers, self.body = rc, status, headers, body
        self.stderr = stderr

    def header(self, name):
        return self.headers.get(name.lower())

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def __repr__(self):
        return (f"<curl rc {self.rc} status {self.status} {self.headers.get('content-type')} "
                f"{len(self.body)} bytes {self.body[:200]!r} {self.stderr[-200:]!r}>")


def curl(work, url, *args, timeout=300):
    """Runs curl on url with args; the last response's status, headers (lower-cased names)
    and body. rc is curl's exit status (18: the body ended before its announced end)."""
    import tempfile
    fd, hdr = tempfile.mkstemp(dir=work, suffix=".hdr")
    os.close(fd)
    fd, out = tempfile.mkstemp(dir=work, suffix=".body")
    os.close(fd)
    try:
        r = subprocess.run(["curl", "-sS", "--http1.1", "-D", hdr, "-o", out,
                            "-w", "%{http_code}", "--max-time", str(timeout), *args, url],
                           capture_output=True, timeout=timeout + 30)
        with open(hdr, "rb") as f:
            blocks = [b for b in f.read().decode("latin-1").split("\r\n\r\n") if b.strip()]
        headers = {}
        for line in (blocks[-1].split("\r\n")[1:] if blocks else []):
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        with open(out, "rb") as f:
            body = f.read()
        status = int(r.stdout) if r.stdout.strip().isdigit() else 0
        return CurlResult(r.returncode, status, headers, body, r.stderr.decode(errors="replace"))
    finally:
        os.unlink(hdr)
        os.unlink(out)
