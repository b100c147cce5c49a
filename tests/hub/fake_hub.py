"""A fake Hugging Face hub for tests: serves one local checkpoint directory as the
model repo OWNER/NAME at one revision, on 127.0.0.1 with an ephemeral port, through
the hub's URL scheme:

  GET /api/models/OWNER/NAME/tree/REVISION?recursive=true   listing, Link rel="next" pages
  GET /OWNER/NAME/resolve/REVISION/PATH                     a file; LFS files answer 302
  GET /cdn/SHA256/PATH                                       LFS content (the redirect target)

Files named *.safetensors (or over 10 MB) are "LFS" files: their listing entry carries
lfs {oid: sha256, size, pointerSize} and oid is the git blob sha1 of the pointer text;
other entries carry the git blob sha1 of the content, as the real hub does. Range
requests ("bytes=N-", "bytes=N-M") answer 206 or 416.

Misbehaviour (PATH is a path inside the repo; TIMES is how many requests misbehave,
every request when left out):
  --drop PATH:BYTES[:TIMES]    close the connection when the body reaches file offset BYTES
  --stall PATH:BYTES[:TIMES]   stop sending at file offset BYTES, hold the connection 120 s
  --corrupt PATH               flip one byte in the middle of the body (listing stays right)
  --wrong-sha PATH             list a wrong hash (lfs.oid, or oid for other files)
  --wrong-size PATH:DELTA      serve DELTA more bytes than listed (negative: fewer)
  --status PATH:CODE[:TIMES]   answer CODE; PATH "tree" means the listing
  --hide PATH                  leave PATH out of the repo
  --ignore-range               answer Range requests with 200 and the whole file
  --slow BYTES_PER_S           throttle every body
  --page-size N                split the listing into pages of N entries
  --loop-link                  the last page links back to the first (no pages: to itself)
  --patch-entry PATH:JSON      merge the JSON object into PATH's listing entry, e.g.
                               'config.json:{"size": -5}'
  --token T                    require "Authorization: Bearer T" on the API and resolve URLs

Once listening it prints "PORT n" on stdout. Every request is appended to --log as
one JSON object per line: method, path, range (or null), status, and auth (bool).
Stops on SIGTERM or SIGINT.
"""
import argparse
import hashlib
import json
import os
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote, urlsplit

LFS_MIN_BYTES = 10 * 1000 * 1000


def blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(sha256, size):
    return b"version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n" % (
        sha256.encode(), size)


class Repo:
    """The served files and the misbehaviour counters (shared by handler threads)."""

    def __init__(self, a):
        self.a = a
        self.owner, self.name = a.repo.split("/")
        self.files = {}
        for root, _, names in os.walk(a.root):
            for n in names:
                full = os.path.join(root, n)
                rel = os.path.relpath(full, a.root).replace(os.sep, "/")
                if rel not in a.hide:
                    with open(full, "rb") as f:
                        self.files[rel] = f.read()
        self.lock = threading.Lock()
        self.used = {}
        self.log = open(a.log, "a") if a.log else None

    def is_lfs(self, path):
        return path.endswith(".safetensors") or len(self.files[path]) > LFS_MIN_BYTES

    def sha256(self, path):
        return hashlib.sha256(self.files[path]).hexdigest()

    def rule(self, kind, path):
        """The misbehaviour of this kind for path as (value, ...) or None; counts uses."""
        for spec in getattr(self.a, kind):
            parts = spec.split(":")
            if parts[0] != path:
                continue
            times = int(parts[2]) if len(parts) > 2 else None
            with self.lock:
                n = self.used.get((kind, path), 0)
                if times is not None and n >= times:
                    return None
                self.used[(kind, path)] = n + 1
            return parts[1:]
        return None

    def entries(self):
        dirs = set()
        out = []
        for path in sorted(self.files):
            parts = path.split("/")
            for i in range(1, len(parts)):
                dirs.add("/".join(parts[:i]))
            data = self.files[path]
            e = {"type": "file", "path": path, "size": len(data)}
            if self.is_lfs(path):
                sha = self.sha256(path)
                if path in self.a.wrong_sha:
                    sha = hashlib.sha256(b"not " + data[:64]).hexdigest()
                e["oid"] = blob_sha1(lfs_pointer(sha, len(data)))
                e["lfs"] = {"oid": sha, "size": len(data),
                            "pointerSize": len(lfs_pointer(sha, len(data)))}
            else:
                e["oid"] = blob_sha1(data) if path not in self.a.wrong_sha else "0" * 40
            out.append(e)
        for spec in self.a.patch_entry:
            path, patch = spec.split(":", 1)
            for e in out:
                if e["path"] == path:
                    e.update(json.loads(patch))
        for d in sorted(dirs):
            out.append({"type": "directory", "path": d, "size": 0, "oid": "1" * 40})
        return out

    def record(self, **kw):
        if self.log:
            with self.lock:
                self.log.write(json.dumps(kw) + "\n")
                self.log.flush()


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A client that hangs up mid-body (kztts aborting a lying transfer) is expected.
        if not isinstance(sys.exc_info()[1], (ConnectionError, BrokenPipeError)):
            super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-hub/1"

    def log_message(self, fmt, *args):
        pass

    @property
    def repo(self):
        return self.server.repo

    def note(self, status):
        self.repo.record(method=self.command, path=self.path, range=self.headers.get("Range"),
                         status=status, auth="Authorization" in self.headers)

    def error(self, status, code=None, message=""):
        self.note(status)
        body = json.dumps({"error": message or "error %d" % status}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if code:
            self.send_header("X-Error-Code", code)
        if message:
            self.send_header("X-Error-Message", message)
        self.end_headers()
        self.wfile.write(body)

    def authorised(self):
        token = self.repo.a.token
        return not token or self.headers.get("Authorization") == "Bearer " + token

    def check_repo(self, owner, name, revision):
        if not self.authorised():  # what the hub says to anonymous or wrong credentials
            if "Authorization" in self.headers:
                self.error(401, None, "Invalid credentials in Authorization header")
            else:
                self.error(401, "RepoNotFound", "Repository not found")
            return False
        if (owner, name) != (self.repo.owner, self.repo.name):
            self.error(404, "RepoNotFound", "Repository not found")
            return False
        if revision != self.repo.a.revision:
            self.error(404, "RevisionNotFound", "Invalid rev id: " + revision)
            return False
        return True

    def do_GET(self):
        u = urlsplit(self.path)
        seg = [unquote(s) for s in u.path.split("/")[1:]]
        if seg[:2] == ["api", "models"] and len(seg) >= 6 and seg[4] == "tree":
            return self.tree(seg[2], seg[3], seg[5], parse_qs(u.query))
        if len(seg) >= 5 and seg[2] == "resolve":
            return self.resolve(seg[0], seg[1], seg[3], "/".join(seg[4:]))
        if len(seg) >= 3 and seg[0] == "cdn":
            path = "/".join(seg[2:])
            if path in self.repo.files and self.repo.sha256(path) == seg[1]:
                return self.body(path)
        self.error(404, None, "no such page")

    def tree(self, owner, name, revision, query):
        if not self.check_repo(owner, name, revision):
            return
        st = self.repo.rule("status", "tree")
        if st:
            return self.error(int(st[0]), None, "injected failure")
        entries = self.repo.entries()
        start = int(query.get("cursor", ["0"])[0])
        size = self.repo.a.page_size or len(entries)
        page = entries[start:start + size]
        body = json.dumps(page).encode()
        self.note(200)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        host = "http://%s:%d" % self.server.server_address[:2]
        base = "%s/api/models/%s/%s/tree/%s?recursive=true" % (host, owner, name,
                                                              quote(revision, safe=""))
        if start + size < len(entries):
            self.send_header("Link", '<%s&cursor=%d>; rel="next"' % (base, start + size))
        elif self.repo.a.loop_link:
            self.send_header("Link", '<%s>; rel="next"' % base)
        self.end_headers()
        self.wfile.write(body)

    def resolve(self, owner, name, revision, path):
        if not self.check_repo(owner, name, revision):
            return
        if path not in self.repo.files:
            return self.error(404, "EntryNotFound", "Entry not found")
        st = self.repo.rule("status", path)
        if st:
            return self.error(int(st[0]), None, "injected failure")
        if self.repo.is_lfs(path):
            host = "http://%s:%d" % self.server.server_address[:2]
            self.note(302)
            self.send_response(302)
            self.send_header("Location", "%s/cdn/%s/%s" % (host, self.repo.sha256(path),
                                                           quote(path)))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.body(path)

    def body(self, path):
        data = self.repo.files[path]
        a = self.repo.a
        if path in a.corrupt:
            mid = len(data) // 2
            data = data[:mid] + bytes([data[mid] ^ 0x5A]) + data[mid + 1:]
        delta = self.repo.rule("wrong_size", path)
        if delta:
            d = int(delta[0])
            data = data + b"\0" * d if d > 0 else data[:len(data) + d]
        start, end, status = 0, len(data) - 1, 200
        rng = self.headers.get("Range")
        if rng and not a.ignore_range:
            spec = rng.replace("bytes=", "").split("-")
            start = int(spec[0])
            end = int(spec[1]) if spec[1] else len(data) - 1
            if start >= len(data):
                self.note(416)
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % len(data))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        chunk = data[start:end + 1]
        self.note(status)
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(chunk)))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", '"%s"' % hashlib.sha256(data).hexdigest())
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, len(data)))
        self.end_headers()
        drop = self.repo.rule("drop", path)
        stall = self.repo.rule("stall", path)
        cut = int((drop or stall)[0]) - start if (drop or stall) else len(chunk)
        self.send_slowly(chunk[:max(0, cut)])
        if drop:
            self.close_connection = True
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        elif stall:
            self.wfile.flush()
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not self.server.stopping:
                time.sleep(0.2)
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)

    def send_slowly(self, data):
        bps = self.repo.a.slow
        if not bps:
            self.wfile.write(data)
            return
        step = max(1, bps // 20)
        for i in range(0, len(data), step):
            self.wfile.write(data[i:i + step])
            time.sleep(0.05)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", required=True, help="checkpoint directory to serve")
    ap.add_argument("--repo", default="owner/tiny")
    ap.add_argument("--revision", default="main")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--log")
    ap.add_argument("--drop", action="append", default=[])
    ap.add_argument("--stall", action="append", default=[])
    ap.add_argument("--corrupt", action="append", default=[])
    ap.add_argument("--wrong-sha", action="append", default=[])
    ap.add_argument("--wrong-size", action="append", default=[])
    ap.add_argument("--status", action="append", default=[])
    ap.add_argument("--hide", action="append", default=[])
    ap.add_argument("--ignore-range", action="store_true")
    ap.add_argument("--slow", type=int, default=0)
    ap.add_argument("--page-size", type=int, default=0)
    ap.add_argument("--loop-link", action="store_true")
    ap.add_argument("--patch-entry", action="append", default=[])
    ap.add_argument("--token")
    a = ap.parse_args()
    server = Server(("127.0.0.1", a.port), Handler)
    server.repo = Repo(a)
    server.stopping = False

    def stop(signum, frame):
        server.stopping = True
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("PORT %d" % server.server_address[1], flush=True)
    server.serve_forever(poll_interval=0.1)
    server.server_close()
    sys.exit(0)


if __name__ == "__main__":
    main()
