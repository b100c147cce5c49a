"""`kztts serve` as an HTTP server, on the tiny CustomVoice checkpoint, everything on
loopback with bounded waits: /health, /ready (503 "loading" while the model downloads
from tests/hub/fake_hub.py, then 200), /metrics in the Prometheus text format,
/v1/models, 404 and 405 in OpenAI's error envelope, API keys (401 without or with a
wrong key, 200 with each right one, the probes open), 413 for bodies over --max-body
(announced by Content-Length: answered before the body is sent; without one: the
connection closed), CORS headers only with --cors, a slowloris client closed after
--idle-timeout while others are served, the per-request log line, bad options, and the
drain on SIGTERM and SIGINT (/ready and speech 503 with Retry-After while a request is
in progress, exit 0 once it is done or --drain-timeout passed), speech streams in flight
and queued finishing whole during a drain, a drain timeout cutting a stream, and a client
that disconnects mid-stream cancelling its synthesis."""
import argparse
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

from servelib import Server, check_envelope, parse_metrics
from testlib import check, finish

ap = argparse.ArgumentParser()
ap.add_argument("--kztts", required=True)
ap.add_argument("--tiny", required=True)
ap.add_argument("--fake-hub", required=True)
ap.add_argument("--work", required=True)
A = ap.parse_args()
shutil.rmtree(A.work, ignore_errors=True)
os.makedirs(A.work)


def serve(name, *args, **kw):
    return Server(A.kztts, A.work, name, ["-m", A.tiny] + list(args), **kw)


def raw_connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    return s


def read_until_closed(sock, timeout):
    """Everything sock receives until the peer closes it; None if it stays open."""
    sock.settimeout(timeout)
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return data
            data += chunk
    except socket.timeout:
        return None
    except ConnectionResetError:
        return data


def case_probes_and_models():
    s = serve("probes")
    check(s.wait_ready(), "probes: never ready")
    st, h, body = s.request("GET", "/health")
    check(st == 200 and json.loads(body) == {"status": "ok"}, f"/health: {st} {body!r}")
    check(h.get("content-type") == "application/json", f"/health content-type {h}")
    check(re.fullmatch(r"req-\d+", h.get("x-request-id", "")) is not None, f"/health request id {h}")
    st, h, body = s.request("GET", "/ready")
    check(st == 200 and json.loads(body) == {"status": "ready"}, f"/ready: {st} {body!r}")
    st, h, body = s.request("HEAD", "/health")
    check(st == 200 and body == b"", f"HEAD /health: {st} {body!r}")

    ids = {s.request("GET", "/health")[1].get("x-request-id") for _ in range(5)}
    check(len(ids) == 5, f"request ids repeat: {ids}")

    before = time.time()
    st, h, body = s.request("GET", "/v1/models")
    models = json.loads(body)
    check(st == 200 and models.get("object") == "list", f"/v1/models: {st} {body!r}")
    data = models.get("data", [])
    check(len(data) == 1, f"/v1/models lists {data}")
    m = data[0] if data else {}
    check(m.get("id") == "tiny" and m.get("object") == "model" and m.get("owned_by") == "kztts",
          f"/v1/models entry {m}")
    check(isinstance(m.get("created"), int) and 0 < before - m["created"] < 3600,
          f"/v1/models created {m.get('created')} vs now {before}")
    st, h, body = s.request("GET", "/v1/models/tiny")
    check(st == 200 and json.loads(body) == m, f"/v1/models/tiny: {st} {body!r}")
    st, h, body = s.request("GET", "/v1/models/gpt-4o-mini-tts")
    err = check_envelope("unknown model", st, body, 404, "invalid_request_error")
    check(err.get("param") == "model", f"unknown model param {err}")

    for path in ["/nope", "/v1/audio", "/v1/audio/speech/x", "/v1/models/a/b", "/healthz"]:
        st, h, body = s.request("GET", path)
        check_envelope("GET " + path, st, body, 404, "invalid_request_error", "not_found")
    for method, path, allow in [("DELETE", "/health", "GET"), ("POST", "/ready", "GET"),
                                ("PUT", "/metrics", "GET"), ("GET", "/v1/audio/speech", "POST"),
                                ("POST", "/v1/models", "GET"), ("PUT", "/v1/audio/voices", "POST"),
                                ("OPTIONS", "/v1/audio/speech", "POST")]:
        st, h, body = s.request(method, path, body=b"" if method != "GET" else None)
        check_envelope(f"{method} {path}", st, body, 405, "invalid_request_error")
        check(allow in h.get("allow", ""), f"{method} {path}: Allow {h.get('allow')!r} lacks {allow}")

    st, h, body = s.request("GET", "/metrics")
    check(st == 200, f"/metrics: {st}")
    check(h.get("content-type") == "text/plain; version=0.0.4", f"/metrics content-type {h}")
    samples, types = parse_metrics("/metrics", body.decode())
    want_types = {"kztts_requests_total": "counter", "kztts_request_duration_seconds": "histogram",
                  "kztts_time_to_first_audio_seconds": "histogram",
                  "kztts_audio_seconds_total": "counter", "kztts_requests_running": "gauge",
                  "kztts_requests_queued": "gauge", "kztts_requests_rejected_total": "counter"}
    for name, t in want_types.items():
        check(types.get(name) == t, f"/metrics: {name} typed {types.get(name)!r} (want {t})")
    n_health = samples.get('kztts_requests_total{route="health",status="200"}', 0)
    check(n_health >= 7, f"/metrics health count: {n_health}")
    check(samples.get('kztts_requests_total{route="unknown",status="404"}') == 5,
          "/metrics: 5 unknown routes")
    check(samples.get('kztts_requests_total{route="models",status="404"}') == 1,
          "/metrics: 1 unknown model")
    check(samples.get("kztts_requests_running") == 0 and samples.get("kztts_requests_queued") == 0,
          "/metrics gauges")
    buckets = [(k, v) for k, v in samples.items()
               if k.startswith('kztts_request_duration_seconds_bucket{route="health"')]
    check(len(buckets) >= 10 and buckets[-1][0].endswith('le="+Inf"}'), f"health buckets {buckets}")
    check(all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:])), "buckets not cumulative")
    check(buckets and buckets[-1][1] ==
          samples.get('kztts_request_duration_seconds_count{route="health"}'), "+Inf != _count")
    s.stop()
    log = s.stderr()
    line = re.search(r"^req-\d+ GET /nope unknown 404 audio=0\.00s first_audio=- total=\d+ms$",
                     log, re.M)
    check(line is not None, f"no log line for /nope in {log!r}")
    check(s.proc.returncode == 0, f"probes: exit {s.proc.returncode}")
    print("ok   probes, models, 404, 405, metrics, log lines", flush=True)

    q = serve("quiet", "--quiet")
    check(q.wait_ready(), "quiet: never ready")
    q.request("GET", "/health")
    q.stop()
    check("req-" not in q.stderr(), f"--quiet still logs requests: {q.stderr()!r}")


def case_loading():
    """The model downloads slowly from the fake hub: /health answers, /ready is 503."""
    hub = subprocess.Popen([sys.executable, A.fake_hub, "--root", A.tiny, "--repo", "owner/tiny",
                            "--slow", "8000000"], stdout=subprocess.PIPE, text=True)
    try:
        line = hub.stdout.readline()
        check(line.startswith("PORT "), f"fake hub: {line!r}")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "KZTTS_"))}
        env["KZTTS_HF_ENDPOINT"] = "http://127.0.0.1:%d" % int(line.split()[1])
        env["KZTTS_CACHE"] = os.path.join(A.work, "cache")
        s = Server(A.kztts, A.work, "loading", ["-m", "owner/tiny", "--quiet"], env=env)
        st, h, body = s.request("GET", "/health")
        check(st == 200 and json.loads(body) == {"status": "ok"}, f"loading /health: {st} {body!r}")
        st, h, body = s.request("GET", "/ready")
        check(st == 503 and json.loads(body) == {"status": "loading"}, f"loading /ready: {st} {body!r}")
        check(h.get("retry-after", "").isdigit(), f"loading /ready Retry-After {h}")
        st, h, body = s.request("POST", "/v1/audio/speech",
                                body=json.dumps({"model": "tts-1", "input": "hi", "voice": "x"}),
                                headers={"Content-Type": "application/json"})
        check_envelope("loading speech", st, body, 503, "unavailable", "loading")
        check(h.get("retry-after", "").isdigit(), f"loading speech Retry-After {h}")
        st, h, body = s.request("GET", "/v1/models")
        check_envelope("loading models", st, body, 503, "unavailable", "loading")
        st, h, body = s.request("GET", "/metrics")
        check(st == 200 and b"kztts_requests_running 0" in body, f"loading /metrics: {st}")
        check(s.wait_ready(), "never ready after the download: " + s.stderr())
        st, h, body = s.request("GET", "/v1/models")
        check(st == 200 and json.loads(body)["data"][0]["id"] == "tiny", f"models after load: {body!r}")
        s.stop()
        check(s.proc.returncode == 0, f"loading: exit {s.proc.returncode}")
        print("ok   loading: /health 200, /ready 503, then ready", flush=True)
    finally:
        hub.terminate()
        hub.wait(timeout=30)


def case_auth():
    keys = os.path.join(A.work, "keys.txt")
    with open(keys, "w") as f:
        f.write("# the operators' keys\nsk-one\n\n  sk-two\n")
    s = serve("auth", "--api-key-file", keys)
    check(s.wait_ready(), "auth: never ready")
    n_refused = 0
    for hdr in [{}, {"Authorization": "Bearer sk-three"}, {"Authorization": "Bearer sk-on"},
                {"Authorization": "sk-one"}, {"Authorization": "Basic sk-one"}]:
        for method, path in [("GET", "/v1/models"), ("POST", "/v1/audio/speech"),
                             ("GET", "/v1/audio/voices"), ("GET", "/nope")]:
            st, h, body = s.request(method, path, headers=hdr, body=b"{}" if method == "POST" else None)
            check_envelope(f"auth {hdr} {path}", st, body, 401, "authentication_error")
            check(h.get("www-authenticate") == "Bearer", f"auth {path}: WWW-Authenticate {h}")
            n_refused += 1
    for key in ["sk-one", "sk-two"]:
        st, h, body = s.request("GET", "/v1/models", headers={"Authorization": "Bearer " + key})
        check(st == 200, f"auth {key}: {st} {body!r}")
    for path in ["/health", "/ready", "/metrics"]:
        st, h, body = s.request("GET", path)
        check(st == 200, f"auth: {path} without a key: {st}")
    samples, _ = parse_metrics("auth /metrics", s.request("GET", "/metrics")[2].decode())
    n_auth = samples.get('kztts_requests_rejected_total{reason="auth"}')
    check(n_auth == n_refused, f"auth: rejected count {n_auth} (want {n_refused})")
    s.stop()
    check(s.proc.returncode == 0, f"auth: exit {s.proc.returncode}")

    empty = os.path.join(A.work, "empty_keys.txt")
    with open(empty, "w") as f:
        f.write("# nobody yet\n")
    for path, needle in [(empty, "holds no key"), (os.path.join(A.work, "missing"), "cannot read")]:
        r = subprocess.run([A.kztts, "serve", "-m", A.tiny, "--port", "0", "--api-key-file", path],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1,
              f"key file {path}: exit {r.returncode} {r.stderr!r}")
    print("ok   API keys", flush=True)


def case_body_limit():
    s = serve("body", "--max-body", "4096", "--quiet")
    check(s.wait_ready(), "body: never ready")
    big = os.path.join(A.work, "big.json")
    with open(big, "wb") as f:
        f.write(b'{"input":"' + b"a" * (8 << 20) + b'"}')
    for extra in [[], ["-H", "Expect:"]]:
        r = subprocess.run(["curl", "-sS", "--max-time", "60", "-o", "-", "-w", "\n%{http_code}",
                            "-H", "Content-Type: application/json", "--data-binary", "@" + big]
                           + extra + ["http://127.0.0.1:%d/v1/audio/speech" % s.port],
                           capture_output=True, timeout=90)
        body, _, code = r.stdout.rpartition(b"\n")
        # curl may see the connection close while it still sends: the answer came first.
        check_envelope(f"413 curl {extra}", int(code or 0), body, 413, "invalid_request_error",
                       "body_too_large")
        check(s.request("GET", "/health")[0] == 200, "health after 413")

    # Announced too large: the answer comes before any body byte is sent.
    c = raw_connect(s.port)
    c.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: 1000000000000\r\n\r\n")
    data = read_until_closed(c, 30)
    c.close()
    check(data is not None and data.startswith(b"HTTP/1.1 413 "), f"413 before the body: {data!r}")

    # Chunked without a length: closed once past the limit, the server goes on.
    c = raw_connect(s.port)
    c.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    try:
        for _ in range(64):
            c.sendall(b"400\r\n" + b"a" * 0x400 + b"\r\n")
    except OSError:
        pass
    data = read_until_closed(c, 30)
    c.close()
    check(data is not None and not data.startswith(b"HTTP/1.1 2"), f"chunked over the limit: {data!r}")
    check(s.request("GET", "/health")[0] == 200, "health after a chunked body over the limit")

    st, h, body = s.request("POST", "/v1/audio/speech", body=b"{}" + b" " * 4000,
                            headers={"Content-Type": "application/json"})
    check(st != 413, f"a body under the limit got 413")
    samples, _ = parse_metrics("body /metrics", s.request("GET", "/metrics")[2].decode())
    check(samples.get('kztts_requests_rejected_total{reason="body_too_large"}') == 4,
          f"body_too_large count {samples}")
    s.stop()
    print("ok   413 body limit", flush=True)


def case_cors():
    keys = os.path.join(A.work, "cors_keys.txt")
    with open(keys, "w") as f:
        f.write("sk-cors\n")
    plain = serve("nocors", "--quiet")
    check(plain.wait_ready(), "nocors: never ready")
    st, h, _ = plain.request("GET", "/v1/models", headers={"Origin": "https://app.example"})
    check(st == 200 and not any(k.startswith("access-control-") for k in h),
          f"CORS headers without --cors: {h}")
    st, h, _ = plain.request("OPTIONS", "/v1/audio/speech",
                             headers={"Origin": "https://app.example",
                                      "Access-Control-Request-Method": "POST"})
    check(st == 405 and not any(k.startswith("access-control-") for k in h),
          f"preflight without --cors: {st} {h}")
    plain.stop()

    s = serve("cors", "--quiet", "--cors", "https://app.example", "--api-key-file", keys)
    check(s.wait_ready(), "cors: never ready")
    st, h, _ = s.request("OPTIONS", "/v1/audio/speech",
                         headers={"Origin": "https://app.example",
                                  "Access-Control-Request-Method": "POST",
                                  "Access-Control-Request-Headers": "authorization,content-type"})
    check(st == 204, f"preflight: {st}")
    check(h.get("access-control-allow-origin") == "https://app.example", f"preflight origin {h}")
    check("POST" in h.get("access-control-allow-methods", ""), f"preflight methods {h}")
    allow_headers = h.get("access-control-allow-headers", "").lower()
    check("authorization" in allow_headers and "content-type" in allow_headers,
          f"preflight headers {h}")
    st, h, _ = s.request("GET", "/v1/models", headers={"Authorization": "Bearer sk-cors"})
    check(st == 200 and h.get("access-control-allow-origin") == "https://app.example",
          f"CORS on a GET: {st} {h}")
    st, h, _ = s.request("GET", "/v1/models")
    check(st == 401 and h.get("access-control-allow-origin") == "https://app.example",
          f"CORS on a 401 (the page can read it): {st} {h}")
    s.stop()
    print("ok   CORS", flush=True)


def case_slowloris():
    s = serve("slowloris", "--idle-timeout", "2")
    check(s.wait_ready(), "slowloris: never ready")
    stalled = [raw_connect(s.port) for _ in range(3)]
    for c in stalled:
        c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Half: ")
    check(s.request("GET", "/health")[0] == 200, "health while slow clients stall")
    for i, c in enumerate(stalled):
        data = read_until_closed(c, 60)
        check(data is not None and b"200 OK" not in data, f"stalled client {i}: {data!r}")
        c.close()
    # A client that sent a whole request and then stays silent on keep-alive is closed too.
    c = raw_connect(s.port)
    c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    data = read_until_closed(c, 60)
    c.close()
    check(data is not None and data.startswith(b"HTTP/1.1 200"), f"idle keep-alive: {data!r}")
    check(s.request("GET", "/health")[0] == 200, "health after the slow clients")
    s.stop()
    check(s.proc.returncode == 0, f"slowloris: exit {s.proc.returncode}")
    print("ok   slowloris closed after --idle-timeout", flush=True)


def half_request(port, path="/nope"):
    """A connection whose request is in progress: headers sent, half the body."""
    c = raw_connect(port)
    c.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               "Content-Length: 7\r\n\r\n{\"a\":" % path).encode())
    return c


def case_drain(sig):
    name = "drain_" + signal.Signals(sig).name
    s = serve(name, "--drain-timeout", "600")
    check(s.wait_ready(), f"{name}: never ready")
    c = half_request(s.port)
    time.sleep(0.2)  # the server has the headers (not an assertion: only order)
    s.signal(sig)
    end = time.monotonic() + 60
    st = None
    while time.monotonic() < end:
        st, h, body = s.request("GET", "/ready")
        if st == 503:
            break
        time.sleep(0.05)
    check(st == 503 and json.loads(body) == {"status": "draining"}, f"{name}: /ready {st} {body!r}")
    check(h.get("retry-after", "").isdigit(), f"{name}: /ready Retry-After {h}")
    st, h, body = s.request("GET", "/health")
    check(st == 200, f"{name}: /health while draining: {st}")
    st, h, body = s.request("POST", "/v1/audio/speech",
                            body=json.dumps({"model": "tts-1", "input": "hi", "voice": "x"}),
                            headers={"Content-Type": "application/json"})
    check_envelope(f"{name}: speech while draining", st, body, 503, "unavailable", "draining")
    check(h.get("retry-after", "").isdigit(), f"{name}: speech Retry-After {h}")
    check(s.proc.poll() is None, f"{name}: exited with a request in progress")
    c.sendall(b"1}")
    data = read_until_closed(c, 60)
    c.close()
    check(data is not None and data.startswith(b"HTTP/1.1 404"), f"{name}: in-progress answer {data!r}")
    rc = s.wait_exit(60)
    check(rc == 0, f"{name}: exit {rc}: {s.stderr()}")
    samples_ok = "draining" in s.stderr()
    check(samples_ok, f"{name}: no drain line: {s.stderr()!r}")
    print(f"ok   drain on {signal.Signals(sig).name}", flush=True)


def case_drain_timeout():
    s = serve("drain_timeout", "--drain-timeout", "1", "--quiet")
    check(s.wait_ready(), "drain_timeout: never ready")
    c = half_request(s.port)
    time.sleep(0.2)
    s.signal(signal.SIGTERM)
    rc = s.wait_exit(60)
    check(rc == 0, f"drain timeout: exit {rc}: {s.stderr()}")
    check(read_until_closed(c, 30) is not None, "drain timeout: the stuck request stays open")
    c.close()
    print("ok   drain timeout", flush=True)


def case_bad_options():
    for args, needle in [(["--port", "70000"], "--port"), (["--parallel", "0"], "--parallel"),
                         (["--max-body", "0"], "--max-body"), (["--idle-timeout", "x"], "--idle-timeout"),
                         (["--bogus"], "--bogus"), (["--isa", "mmx"], "--isa"),
                         (["--max-batch", "-1"], "--max-batch"), (["--max-batch", "65"], "--max-batch"),
                         (["--max-batch", "x"], "--max-batch"), (["--kv-cache", "f8"], "--kv-cache")]:
        r = subprocess.run([A.kztts, "serve", "-m", A.tiny] + args, capture_output=True, text=True,
                           timeout=60)
        check(r.returncode == 2 and needle in r.stderr, f"{args}: exit {r.returncode} {r.stderr!r}")
    r = subprocess.run([A.kztts, "serve"], capture_output=True, text=True, timeout=60)
    check(r.returncode == 2, f"serve without -m: exit {r.returncode}")
    r = subprocess.run([A.kztts, "serve", "--help"], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and "--drain-timeout" in r.stdout and "default 25" in r.stdout,
          f"serve --help: {r.returncode}")
    s = serve("first", "--quiet")
    r = subprocess.run([A.kztts, "serve", "-m", A.tiny, "--host", "127.0.0.1", "--port", str(s.port)],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 1 and "cannot listen" in r.stderr, f"port in use: {r.returncode} {r.stderr!r}")
    s.stop()
    r = subprocess.run([A.kztts, "serve", "-m", os.path.join(A.work, "no_model"), "--port", "0"],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 1 and "listening on" in r.stderr, f"missing model: {r.returncode} {r.stderr!r}")
    print("ok   bad options", flush=True)


def speech_body(n_sentences, max_frames=None):
    text = " ".join("Sentence number %d is here to make the input long." % i
                    for i in range(n_sentences))
    body = {"model": "tts-1", "input": text, "voice": "ryan", "response_format": "pcm"}
    if max_frames:
        body["max_new_tokens"] = max_frames
    return json.dumps(body)


def open_speech(s, body):
    """A speech request whose response headers arrived; (connection, response)."""
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=120)
    c.request("POST", "/v1/audio/speech", body=body, headers={"Content-Type": "application/json"})
    return c, c.getresponse()


def gauge(s, name):
    samples, _ = parse_metrics("gauge", s.request("GET", "/metrics")[2].decode())
    return samples.get(name)


def case_drain_speech():
    """Streams in flight and queued when SIGTERM comes finish whole; then exit 0."""
    s = serve("drain_speech", "--drain-timeout", "600", "--parallel", "1", "--max-queue", "4")
    check(s.wait_ready(), "drain_speech: never ready")
    ca, ra = open_speech(s, speech_body(40, 1000))
    check(ra.status == 200 and ra.getheader("Transfer-Encoding") == "chunked",
          f"drain_speech: first stream {ra.status} {ra.getheaders()}")
    head = ra.read(4096)
    cb = http.client.HTTPConnection("127.0.0.1", s.port, timeout=120)
    cb.request("POST", "/v1/audio/speech", body=speech_body(5, 200),
               headers={"Content-Type": "application/json"})
    end = time.monotonic() + 60
    while time.monotonic() < end and gauge(s, "kztts_requests_queued") != 1:
        time.sleep(0.02)
    check(gauge(s, "kztts_requests_queued") == 1, "drain_speech: the second request never queued")
    s.signal(signal.SIGTERM)
    end = time.monotonic() + 60
    st = None
    while time.monotonic() < end:
        st, h, body = s.request("GET", "/ready")
        if st == 503:
            break
        time.sleep(0.02)
    check(st == 503, f"drain_speech: /ready {st}")
    st, h, body = s.request("POST", "/v1/audio/speech", body=speech_body(1),
                            headers={"Content-Type": "application/json"})
    check_envelope("drain_speech: new speech", st, body, 503, "unavailable", "draining")
    check(h.get("retry-after", "").isdigit(), f"drain_speech: Retry-After {h}")
    try:
        rest = ra.read()
        whole = True
    except http.client.IncompleteRead:
        rest, whole = b"", False
    check(whole and len(head + rest) > 48000, f"drain_speech: in-flight stream cut ({len(head + rest)} bytes)")
    rb = cb.getresponse()
    try:
        queued = rb.read()
    except http.client.IncompleteRead:
        queued = b""
    check(rb.status == 200 and len(queued) > 0, f"drain_speech: queued request {rb.status} {len(queued)} bytes")
    ca.close()
    cb.close()
    rc = s.wait_exit(120)
    check(rc == 0, f"drain_speech: exit {rc}: {s.stderr()}")
    check(len(re.findall(r"^req-\d+ POST /v1/audio/speech speech 200 .*total=\d+ms$", s.stderr(), re.M)) == 2,
          f"drain_speech: two whole speech log lines: {s.stderr()}")
    print("ok   drain: streams in flight and queued finish whole", flush=True)


def case_drain_cuts_stream():
    """--drain-timeout 1 with a synthesis of minutes: exit 0, the stream is cut."""
    s = serve("drain_cut", "--drain-timeout", "1", "--max-input", "100000")
    check(s.wait_ready(), "drain_cut: never ready")
    c, r = open_speech(s, speech_body(600))
    check(r.status == 200, f"drain_cut: {r.status}")
    r.read(4096)
    s.signal(signal.SIGTERM)
    rc = s.wait_exit(120)
    check(rc == 0, f"drain_cut: exit {rc}: {s.stderr()}")
    try:
        while r.read(65536):
            pass
        cut = False
    except (http.client.IncompleteRead, OSError):
        cut = True
    check(cut, "drain_cut: the stream ended whole although the drain timed out")
    c.close()
    print("ok   drain timeout cuts a stream", flush=True)


def case_disconnect_cancels():
    """A client that leaves mid-stream cancels a synthesis of minutes at once."""
    s = serve("disconnect", "--max-input", "100000")
    check(s.wait_ready(), "disconnect: never ready")
    c, r = open_speech(s, speech_body(600))
    check(r.status == 200, f"disconnect: {r.status}")
    r.read(4096)
    check(gauge(s, "kztts_requests_running") == 1, "disconnect: not running")
    c.close()
    end = time.monotonic() + 60
    running = 1
    while time.monotonic() < end and running != 0:
        running = gauge(s, "kztts_requests_running")
        time.sleep(0.05)
    check(running == 0, "disconnect: the synthesis went on without its client")
    st, h, body = s.request("POST", "/v1/audio/speech", body=speech_body(1, 50),
                            headers={"Content-Type": "application/json"})
    check(st == 200 and len(body) > 0, f"disconnect: next speech {st}")
    s.stop()
    line = re.search(r"^req-\d+ POST /v1/audio/speech speech 200 .*\(connection closed early\)$",
                     s.stderr(), re.M)
    check(line is not None, f"disconnect: log line {s.stderr()}")
    print("ok   a client that leaves cancels its synthesis", flush=True)


case_bad_options()
case_probes_and_models()
case_auth()
case_body_limit()
case_cors()
case_slowloris()
case_drain(signal.SIGTERM)
case_drain(signal.SIGINT)
case_drain_timeout()
case_drain_speech()
case_drain_cuts_stream()
case_disconnect_cancels()
case_loading()
finish("test_serve_http")
