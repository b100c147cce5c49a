"""Helpers of the `kztts serve` tests: a server process on 127.0.0.1 with the port it
picked (the "listening on" line), plain HTTP requests with bounded waits, and the
envelope and metrics checks every server test needs. Every wait is bounded; every
server started here is killed when the test exits."""
import atexit
import http.client
import json
import os
import re
import signal
import subprocess
import time

from testlib import check

LISTENING = re.compile(r"kztts serve: listening on http://(\S+):(\d+)$")
_live = []


def _kill_all():
    for p in _live:
        if p.poll() is None:
            p.kill()
            p.wait()


atexit.register(_kill_all)


class Server:
    """`kztts serve ARGS --port 0` with stderr in a file; .port once it listens."""

    def __init__(self, kztts, work, name, args, env=None, wait_listen=True):
        self.log_path = os.path.join(work, name + ".log")
        self.log = open(self.log_path, "w+")
        cmd = [kztts, "serve", "--host", "127.0.0.1", "--port", "0"] + list(args)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self.log, env=env)
        _live.append(self.proc)
        self.port = None
        if wait_listen:
            self.wait_listening()

    def stderr(self):
        with open(self.log_path) as f:
            return f.read()

    def wait_listening(self, timeout=60):
        end = time.monotonic() + timeout
        while time.monotonic() < end and self.proc.poll() is None:
            for line in self.stderr().splitlines():
                m = LISTENING.match(line)
                if m:
                    self.port = int(m.group(2))
                    return True
            time.sleep(0.02)
        raise RuntimeError("server did not listen: " + self.stderr())

    def wait_ready(self, timeout=120):
        """Polls /ready until 200; False on timeout or exit."""
        end = time.monotonic() + timeout
        while time.monotonic() < end and self.proc.poll() is None:
            try:
                if self.request("GET", "/ready")[0] == 200:
                    return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def request(self, method, path, body=None, headers=None, timeout=60):
        """(status, headers as a lower-case dict, body bytes)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            data = r.read()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, data
        finally:
            c.close()

    def signal(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)

    def wait_exit(self, timeout=60):
        """The exit status, or None when it is still running after timeout (then killed)."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None

    def stop(self):
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
            self.wait_exit(60)
        self.log.close()


def check_envelope(name, status, body, want_status, want_type=None, want_code=None):
    """body is OpenAI's error envelope with status want_status; returns the error object."""
    check(status == want_status, f"{name}: status {status} (want {want_status}): {body!r}")
    try:
        err = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        check(False, f"{name}: not an error envelope: {body!r}")
        return {}
    check(set(err) == {"message", "type", "param", "code"},
          f"{name}: envelope keys {sorted(err)}")
    check(isinstance(err.get("message"), str) and err["message"],
          f"{name}: empty message {err!r}")
    if want_type:
        check(err.get("type") == want_type, f"{name}: type {err.get('type')!r} (want {want_type!r})")
    if want_code:
        check(err.get("code") == want_code, f"{name}: code {err.get('code')!r} (want {want_code!r})")
    return err


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*",?)*\})? (\S+)$')


def parse_metrics(name, text):
    """{series: value} of Prometheus text; every line checked to be a HELP, TYPE or
    sample line; also the {metric: type} map."""
    samples, types = {}, {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            parts = line.split()
            types[parts[2]] = parts[3] if len(parts) > 3 else ""
            continue
        m = SAMPLE.match(line)
        if m is None:
            check(False, f"{name}: malformed metrics line {line!r}")
            continue
        try:
            samples[m.group(1) + (m.group(2) or "")] = float(m.group(3))
        except ValueError:
            check(False, f"{name}: not a number in {line!r}")
    return samples, types
