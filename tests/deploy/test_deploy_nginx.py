#!/usr/bin/env python3
"""deploy/nginx.conf in front of two real `kztts serve` replicas, as an operator runs it.

The example config is used as shipped, with only its addresses changed (the replicas'
ports, nginx's listen port, an access log of the upstream tries in place of
`access_log off`): nginx runs from a temporary prefix with `-e` (never the system
instance) and both servers bind 127.0.0.1 on free ports.

Checks: /metrics stays internal (404 through nginx); a request without the key gets the
replica's 401 envelope; a speech request streams through (chunked, whole pcm samples);
and the drain: with a stream in flight directly on replica A, A gets SIGTERM, and every
request sent through nginx while A drains is answered 200, at least one of them after
A's 503 was retried on B (the access log shows "503, 200"); A's own stream still
completes whole and A exits 0.

Usage: test_deploy_nginx.py --kztts BUILD/kztts --tiny TINY_DIR --source SRC --work DIR
"""
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
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model"))
from testlib import check, finish  # noqa: E402
from servelib import Server  # noqa: E402

KEY = "deploy-test-key"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nginx_config(src, out, ports, listen, access_log):
    text = open(os.path.join(src, "deploy", "nginx.conf")).read()
    servers = iter(ports)
    text, n = re.subn(r"server 127\.0\.0\.1:\d+ ", lambda m: f"server 127.0.0.1:{next(servers, 1)} ", text)
    check(n == 3, f"nginx.conf names three replicas in its upstream ({n})")
    # two replicas here: the third entry is dropped
    text = re.sub(r"\s*server 127\.0\.0\.1:1 [^;]*;", "", text)
    text, n = re.subn(r"listen \d+;", f"listen 127.0.0.1:{listen};", text)
    check(n == 1, "nginx.conf has one listen line")
    text, n = re.subn(r"access_log off;",
                      "log_format tries '$request_uri $status [$upstream_addr] [$upstream_status]';\n"
                      f"    access_log {access_log} tries;", text)
    check(n == 1, "nginx.conf has access_log off")
    with open(out, "w") as f:
        f.write(text)


def request(port, method, path, body=None, key=KEY, timeout=60):
    """(status, headers lower-cased, body) through the given port."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    try:
        c.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def speech(text, **more):
    return {"model": "tts-1", "input": text, "voice": "aiden", "response_format": "pcm", **more}


class SlowStream(threading.Thread):
    """A long speech request straight to one replica: reads the first bytes, waits for
    `go`, then reads the rest. .status, .n_bytes, .complete afterwards."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.started, self.go = port, threading.Event(), threading.Event()
        self.status, self.n_bytes, self.complete, self.error = None, 0, False, None

    def run(self):
        text = " ".join(["This sentence keeps the replica busy while it drains."] * 20)
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            # The kernel's buffers must not swallow the whole stream, or A finishes it (and
            # stops listening) before the drain can be watched: a small receive window, and
            # speed 0.25 makes the stream 6 MB. Bounded so that a slow (sanitized) build still
            # ends within the drain timeout.
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.settimeout(120)
            sock.connect(("127.0.0.1", self.port))
            c.sock = sock
            body = speech(text, max_new_tokens=400, speed=0.25)
            c.request("POST", "/v1/audio/speech", body=json.dumps(body),
                      headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"})
            r = c.getresponse()
            self.status = r.status
            self.n_bytes += len(r.read1(4096))
            self.started.set()
            self.go.wait(300)
            self.n_bytes += len(r.read())  # raises IncompleteRead if the stream is cut
            self.complete = True
        except (OSError, http.client.HTTPException) as e:
            self.error = repr(e)
        finally:
            self.started.set()
            c.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kztts", required=True)
    ap.add_argument("--tiny", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(os.path.join(a.work, "voices"))
    prefix = os.path.join(a.work, "nginx")
    os.makedirs(os.path.join(prefix, "logs"))
    os.chmod(a.work, 0o755)
    keys = os.path.join(a.work, "keys")
    with open(keys, "w") as f:
        f.write(KEY + "\n")
    # A drain ends when its stream does. The held stream reads nothing while six requests go
    # through nginx, which took over 30 s under ASan on a loaded machine: the long drain and
    # idle timeouts keep A from closing it first (the idle one closed it at its default 30).
    common = ["-m", a.tiny, "--voices-dir", os.path.join(a.work, "voices"), "--api-key-file", keys,
              "--parallel", "1", "--max-queue", "4", "--drain-timeout", "300",
              "--idle-timeout", "300"]
    rep_a = Server(a.kztts, a.work, "replica_a", common)
    rep_b = Server(a.kztts, a.work, "replica_b", common)
    check(rep_a.wait_ready() and rep_b.wait_ready(), "both replicas become ready")

    listen = free_port()
    conf = os.path.join(prefix, "nginx.conf")
    access = os.path.join(prefix, "logs", "access.log")
    nginx_config(a.source, conf, [rep_a.port, rep_b.port], listen, access)
    nginx = subprocess.Popen([shutil.which("nginx") or "/usr/sbin/nginx", "-p", prefix + "/", "-c", conf,
                              "-e", os.path.join(prefix, "logs", "error.log"), "-g", "daemon off;"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        end = time.monotonic() + 30
        up = False
        while time.monotonic() < end and nginx.poll() is None and not up:
            try:
                socket.create_connection(("127.0.0.1", listen), 1).close()
                up = True
            except OSError:
                time.sleep(0.05)
        check(up, f"nginx listens (exit {nginx.poll()})")

        st, _, _ = request(listen, "GET", "/metrics", key=None)
        check(st == 404, f"/metrics through nginx: {st} (want 404, internal)")
        st, _, body = request(listen, "POST", "/v1/audio/speech", speech("No key."), key=None)
        err = json.loads(body or b"{}").get("error", {})
        check(st == 401 and err.get("type") == "authentication_error",
              f"without a key: {st} {body[:200]!r} (the replica's 401 envelope)")
        st, hdr, body = request(listen, "POST", "/v1/audio/speech", speech("Through nginx."))
        check(st == 200 and hdr.get("content-type", "").startswith("audio/pcm"),
              f"speech through nginx: {st} {hdr.get('content-type')}")
        check(hdr.get("transfer-encoding") == "chunked", f"streamed (chunked): {hdr}")
        check(len(body) > 0 and len(body) % 2 == 0, f"whole s16 samples: {len(body)} bytes")

        slow = SlowStream(rep_a.port)
        slow.start()
        check(slow.started.wait(60) and slow.status == 200, f"a long stream runs on A: {slow.status} {slow.error}")
        rep_a.proc.send_signal(signal.SIGTERM)
        end = time.monotonic() + 30
        draining = False
        while time.monotonic() < end and not draining:
            try:
                draining = rep_a.request("GET", "/ready")[0] == 503
            except OSError:
                break
            time.sleep(0.05)
        check(draining, "A answers /ready 503 while it drains")
        statuses = [request(listen, "POST", "/v1/audio/speech", speech(f"During the drain {i}."))[0]
                    for i in range(6)]
        check(statuses == [200] * 6, f"every request through nginx during A's drain: {statuses}")
        check(rep_a.proc.poll() is None, "A still drains (its stream is held) after those requests")
        slow.go.set()
        slow.join(90)
        check(slow.complete and slow.n_bytes > 0 and slow.n_bytes % 2 == 0,
              f"A's stream in flight completed whole: {slow.n_bytes} bytes, {slow.error}")
        try:
            rc = rep_a.proc.wait(40)
        except subprocess.TimeoutExpired:
            rc = None
        check(rc == 0, f"A exits 0 after the drain: {rc}")

        nginx.send_signal(signal.SIGQUIT)  # graceful: flushes the access log
        nginx.wait(30)
        log = open(access).read()
        check(re.search(r"\[503, 200\]", log) is not None,
              f"nginx retried A's 503 on B (access log):\n{log}")
    finally:
        if nginx.poll() is None:
            nginx.kill()
            nginx.wait()
    finish("test_deploy_nginx")


if __name__ == "__main__":
    main()
