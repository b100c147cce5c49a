#!/usr/bin/env python3
"""Load benchmark of `kztts serve`: throughput and first audio through HTTP at several
concurrencies, and first audio and per-request overhead against `kztts bench`.

Data flow: start a server on a free loopback port (--kztts + -m; its stderr kept for the
report) or take a running one (--url); pick the voice (--voice, else the first of GET
/v1/audio/voices); one warm-up request; then for each concurrency C (--concurrency), C
client threads each send --requests-per-client streamed POST /v1/audio/speech requests
back to back, one connection each, and the level's wall time, statuses, audio seconds
(from the pcm/wav bytes) and per-request times give:
    requests/s       200 responses per second of the level's wall time
    audio s/s        seconds of audio received per second of wall time
    frames/s         the same in codec frames (FRAME_S of audio each): the aggregate
                     frames/s of `kztts bench --concurrency`, through HTTP
    first audio      request sent -> first body byte (the first audio of a pcm stream)
    total            request sent -> last body byte
A 429 counts as rejected, any other non-200 as an error; neither is retried.

--compare-bench R (needs --kztts and -m) then runs R alternated rounds of
    (a) --compare-requests requests at concurrency 1 through HTTP (the server's session
        has the voice's prompt prefix cached after the warm-up), and
    (b) `kztts bench -m MODEL --frames F --threads T --repeat 3 --json`: the library
        in-process, the same sentence and voice (the bench speaks kztts bench's
        sentence with the model's first speaker; so do these requests by default),
and reports per round and as medians:
    first audio over HTTP  - bench's first audio with the voice's prefix cached
                             (first_audio_non_streaming_layout_cached_ms: a CustomVoice
                             model's default text layout, as the server uses)
    overhead per request   = HTTP total - synthesis estimate, where the estimate is the
                             bench's streaming run (ms_per_frame x frames, whole prompt
                             computed) minus what the cached prefix saves (bench's first
                             audio uncached - cached), scaled to the frames the HTTP
                             response carried if it ended before F (end of speech)
Synthesis time comes from a same-run `kztts bench` rather than the server's log line:
the log line's total holds the server's own work too (parsing, queueing, encoding),
which is what is measured here. The host is shared and noisy, so the rounds alternate
and the spread is printed with the medians. When this script started the server, each
response's X-Request-Id finds its log line, and the compare rounds also give, per
request and exact whatever the noise, the time outside the server's own clocks: HTTP
first audio - the logged first audio (the request's transfer and parsing before its job
existed, and the first bytes' way out) and HTTP total - the logged total (transfer).

Usage:
    bench/serve_load.py --kztts build/kztts -m MODEL [--parallel N] [--threads T]
        [--concurrency 1,2,4,8] [--requests-per-client 3] [--max-new-tokens 25]
        [--compare-bench 3] [--json]
    bench/serve_load.py --url http://127.0.0.1:8000 [--api-key K] [...]
"""
import argparse
import http.client
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse

BENCH_SENTENCE = "Hello, world! I am its transparent. 12"  # kztts bench's sentence (docs/CLI.md)
PCM_BYTES_PER_S = 24000 * 2                                # pcm: 24 kHz s16le mono
WAV_HEADER = 44
FRAME_S = 1920 / 24000                                     # audio per codec frame
# The server's line per request (tools/kztts/serve/http.c): id, method, path, route, status.
LOG_LINE = re.compile(r"^(req-\d+) \S+ \S+ \S+ \d+ audio=\S+ first_audio=(-|[\d.]+)ms total=([\d.]+)ms")


class Server:
    """A `kztts serve` child on a free loopback port; its stderr lines kept."""

    def __init__(self, kztts, model, serve_args):
        cmd = [kztts, "serve", "-m", model, "--host", "127.0.0.1", "--port", "0"] + serve_args
        self.cmd = cmd
        self.lines = []
        self.logged = {}  # request id -> (first audio ms or None, total ms) from the log
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.url = None
        self.listening = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stderr:
            line = line.rstrip("\n")
            self.lines.append(line)
            m = LOG_LINE.match(line)
            if m:
                first = None if m.group(2) == "-" else float(m.group(2))
                self.logged[m.group(1)] = (first, float(m.group(3)))
            m = re.search(r"listening on (http://\S+)", line)
            if m and not self.url:
                self.url = m.group(1)
                self.listening.set()
        self.listening.set()

    def wait_ready(self, timeout_s):
        if not self.listening.wait(timeout_s) or not self.url:
            raise SystemExit("serve_load: the server did not start:\n" + "\n".join(self.lines[-20:]))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if get(self.url, "/ready", None)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise SystemExit("serve_load: the server never became ready:\n" + "\n".join(self.lines[-20:]))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def connect(url, timeout_s):
    u = urllib.parse.urlsplit(url)
    return http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout_s)


def get(url, path, api_key):
    c = connect(url, 30)
    try:
        c.request("GET", path, headers=auth(api_key))
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def auth(api_key):
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def speak(url, body, api_key, timeout_s):
    """One streamed request: (status, first-byte s, total s, body bytes, X-Request-Id)."""
    c = connect(url, timeout_s)
    data = json.dumps(body).encode()
    headers = {"Content-Type": "application/json", **auth(api_key)}
    try:
        t0 = time.perf_counter()
        c.request("POST", "/v1/audio/speech", body=data, headers=headers)
        r = c.getresponse()
        first, n = None, 0
        while True:
            chunk = r.read1(1 << 16)
            if not chunk:
                break
            if first is None:
                first = time.perf_counter() - t0
            n += len(chunk)
        return r.status, first, time.perf_counter() - t0, n, r.getheader("X-Request-Id")
    finally:
        c.close()


def audio_seconds(fmt, n_bytes):
    if fmt == "pcm":
        return n_bytes / PCM_BYTES_PER_S
    if fmt == "wav":
        return max(0, n_bytes - WAV_HEADER) / PCM_BYTES_PER_S
    return None


def pct(values, p):
    """Nearest-rank percentile (p in 0..100); None when empty."""
    if not values:
        return None
    v = sorted(values)
    return v[max(0, math.ceil(p / 100 * len(v)) - 1)]


def level(a, url, body, c):
    """Concurrency c: c clients x requests_per_client requests; the level's summary."""
    results, lock = [], threading.Lock()

    def client():
        for _ in range(a.requests_per_client):
            try:
                res = speak(url, body, a.api_key, a.timeout)
            except OSError as e:
                res = (f"error: {e}", None, None, 0, None)
            with lock:
                results.append(res)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(c)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ok = [r for r in results if r[0] == 200]
    secs = [audio_seconds(a.format, r[3]) for r in ok]
    audio = sum(secs) if ok and None not in secs else None
    fa = [r[1] * 1e3 for r in ok if r[1] is not None]
    tot = [r[2] * 1e3 for r in ok]
    return {
        "concurrency": c, "requests": len(results), "ok": len(ok),
        "rejected_429": sum(1 for r in results if r[0] == 429),
        "errors": sum(1 for r in results if r[0] not in (200, 429)),
        "error_statuses": sorted({str(r[0]) for r in results if r[0] not in (200, 429)}),
        "wall_s": wall, "requests_per_s": len(ok) / wall,
        "audio_s_per_s": audio / wall if audio is not None else None,
        "frames_per_s": audio / wall / FRAME_S if audio is not None else None,
        "audio_s_per_request": audio / len(ok) if audio is not None and ok else None,
        "first_audio_p50_ms": pct(fa, 50), "first_audio_p95_ms": pct(fa, 95),
        "total_p50_ms": pct(tot, 50), "total_p95_ms": pct(tot, 95),
    }


def bench_run(a, voice_threads):
    cmd = [a.kztts, "bench", "-m", a.model, "--frames", str(a.max_new_tokens),
           "--threads", str(voice_threads), "--repeat", "3", "--json"] + a.bench_arg
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise SystemExit(f"serve_load: {' '.join(cmd)} failed: {r.stderr.strip()}")
    return json.loads(r.stdout)


def compare_round(a, url, body, threads, server):
    http_runs = [speak(url, body, a.api_key, a.timeout) for _ in range(a.compare_requests)]
    bad = [r[0] for r in http_runs if r[0] != 200]
    if bad:
        raise SystemExit(f"serve_load: compare requests answered {bad}")
    b = bench_run(a, threads)  # also lets the server write the requests' log lines
    outside_first, outside_total = [], []
    for r in http_runs:
        first, total = server.logged.get(r[4], (None, None)) if server else (None, None)
        if first is not None:
            outside_first.append(r[1] * 1e3 - first)
        if total is not None:
            outside_total.append(r[2] * 1e3 - total)
    frames = b["frames"]
    frame_s = b["frame_ms"] / 1e3
    fa_http = statistics.median(r[1] * 1e3 for r in http_runs)
    tot_http = statistics.median(r[2] * 1e3 for r in http_runs)
    secs = audio_seconds(a.format, statistics.median(r[3] for r in http_runs))
    http_frames = round(secs / frame_s) if secs is not None else frames
    fa_b = b["first_audio_non_streaming_layout_ms"]
    fa_bc = b["first_audio_non_streaming_layout_cached_ms"]
    synth = b["streaming"]["ms_per_frame"] * frames - max(0.0, fa_b - fa_bc)
    synth *= http_frames / frames if 0 < http_frames < frames else 1
    if b.get("voice", {}).get("name") not in (None, body["voice"]):
        print(f"serve_load: note: kztts bench spoke with {b['voice']['name']}, the requests with "
              f"{body['voice']}", file=sys.stderr)
    return {
        "http_first_audio_ms": fa_http, "http_total_ms": tot_http, "http_frames": http_frames,
        "bench_frames": frames, "bench_first_audio_ms": fa_b, "bench_first_audio_cached_ms": fa_bc,
        "bench_stream_total_ms": b["streaming"]["ms_per_frame"] * frames,
        "first_audio_delta_ms": fa_http - fa_bc,
        "synthesis_estimate_ms": synth, "overhead_ms": tot_http - synth,
        "overhead_pct": 100 * (tot_http - synth) / synth,
        "outside_first_audio_ms": statistics.median(outside_first) if outside_first else None,
        "outside_total_ms": statistics.median(outside_total) if outside_total else None,
    }


def fmt(v, spec=".1f"):
    return "-" if v is None else format(v, spec)


def print_levels(levels):
    print(f"{'conc':>4} {'req':>4} {'ok':>4} {'429':>4} {'err':>4} {'wall s':>7} {'req/s':>6} "
          f"{'audio s/s':>9} {'frames/s':>8} {'1st audio p50/p95 ms':>21} {'total p50/p95 ms':>18}")
    for L in levels:
        print(f"{L['concurrency']:>4} {L['requests']:>4} {L['ok']:>4} {L['rejected_429']:>4} "
              f"{L['errors']:>4} {L['wall_s']:>7.1f} {L['requests_per_s']:>6.2f} "
              f"{fmt(L['audio_s_per_s'], '.2f'):>9} {fmt(L['frames_per_s'], '.1f'):>8} "
              f"{fmt(L['first_audio_p50_ms']) + ' / ' + fmt(L['first_audio_p95_ms']):>21} "
              f"{fmt(L['total_p50_ms'], '.0f') + ' / ' + fmt(L['total_p95_ms'], '.0f'):>18}"
              + (f"  statuses {','.join(L['error_statuses'])}" if L["errors"] else ""))


def print_compare(rounds):
    keys = [("http_first_audio_ms", "HTTP first audio ms"),
            ("bench_first_audio_cached_ms", "bench first audio ms, prefix cached"),
            ("bench_first_audio_ms", "bench first audio ms, whole prompt"),
            ("first_audio_delta_ms", "HTTP - bench cached first audio ms"),
            ("http_total_ms", "HTTP total ms"),
            ("synthesis_estimate_ms", "synthesis estimate ms"),
            ("overhead_ms", "overhead ms per request"),
            ("overhead_pct", "overhead % of synthesis"),
            ("outside_first_audio_ms", "HTTP - logged first audio ms"),
            ("outside_total_ms", "HTTP - logged total ms")]
    print(f"\nfirst audio and overhead, {len(rounds)} alternated rounds "
          f"(HTTP frames {rounds[0]['http_frames']}, bench frames {rounds[0]['bench_frames']}):")
    for k, label in keys:
        vals = [r[k] for r in rounds if r[k] is not None]
        if not vals:
            continue
        print(f"  {label:<38} median {statistics.median(vals):9.1f}   rounds "
              + " ".join(f"{v:.1f}" for v in vals))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", help="a running server; else --kztts and -m start one")
    ap.add_argument("--kztts")
    ap.add_argument("-m", "--model")
    ap.add_argument("--parallel", type=int, default=1, help="the started server's --parallel")
    ap.add_argument("--threads", type=int, default=0,
                    help="the started server's --threads (its whole compute pool when it "
                         "batches) and kztts bench's (0: the CPUs)")
    ap.add_argument("--serve-arg", action="append", default=[], help="one more server argument")
    ap.add_argument("--bench-arg", action="append", default=[], help="one more kztts bench argument")
    ap.add_argument("--api-key")
    ap.add_argument("--concurrency", default="1,2,4,8")
    ap.add_argument("--requests-per-client", type=int, default=3)
    ap.add_argument("--format", default="pcm", choices=["pcm", "wav", "mp3", "opus", "aac", "flac"])
    ap.add_argument("--voice")
    ap.add_argument("--text", default=BENCH_SENTENCE)
    ap.add_argument("--max-new-tokens", type=int, default=25, help="frames per request at most")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--field", action="append", default=[], help="KEY=JSON, one more request field")
    ap.add_argument("--compare-bench", type=int, default=0, metavar="ROUNDS")
    ap.add_argument("--compare-requests", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=900, help="seconds per request")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not a.url and not (a.kztts and a.model):
        ap.error("give --url, or --kztts and -m")
    if a.compare_bench and not (a.kztts and a.model):
        ap.error("--compare-bench needs --kztts and -m")
    threads = a.threads or (os.cpu_count() or 1)

    server = None
    try:
        url = a.url
        if not url:
            args = ["--parallel", str(a.parallel), "--threads", str(threads)] + a.serve_arg
            server = Server(a.kztts, a.model, args)
            server.wait_ready(600)
            url = server.url
        voice = a.voice
        if not voice:
            status, data = get(url, "/v1/audio/voices", a.api_key)
            listed = json.loads(data).get("voices", []) if status == 200 else []
            names = [v["id"] if isinstance(v, dict) and "id" in v else
                     v.get("name") if isinstance(v, dict) else v for v in listed]
            if not names:
                raise SystemExit(f"serve_load: GET /v1/audio/voices gave {status}; give --voice")
            voice = names[0]
        body = {"model": "tts-1", "input": a.text, "voice": voice, "response_format": a.format,
                "max_new_tokens": a.max_new_tokens, "seed": a.seed}
        for f in a.field:
            k, v = f.split("=", 1)
            body[k] = json.loads(v)
        warm = speak(url, body, a.api_key, a.timeout)
        if warm[0] != 200:
            raise SystemExit(f"serve_load: the warm-up request answered {warm[0]}")

        levels = [level(a, url, body, int(c)) for c in a.concurrency.split(",")]
        rounds = [compare_round(a, url, body, threads, server) for _ in range(a.compare_bench)]
        report = {"url": url, "server_command": server.cmd if server else None, "voice": voice,
                  "format": a.format, "max_new_tokens": a.max_new_tokens, "threads": threads,
                  "levels": levels, "compare_rounds": rounds}
        if a.json:
            print(json.dumps(report))
        else:
            print(f"server {' '.join(server.cmd) if server else url}; voice {voice}, {a.format}, "
                  f"at most {a.max_new_tokens} frames, {a.requests_per_client} requests per client")
            print_levels(levels)
            if rounds:
                print_compare(rounds)
    finally:
        if server:
            server.stop()


if __name__ == "__main__":
    main()
