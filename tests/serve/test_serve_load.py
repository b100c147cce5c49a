"""Load on `kztts serve`: a fixed time of mixed requests at a concurrency above
--parallel + --max-queue; no crash, RSS flat, every speech request either completes
whole or gets 429, and /metrics agrees with what the clients saw (batching included: the
default batch of --parallel 2 steps both workers' requests together).

Flow: Server (tiny, --parallel 2 --max-queue 2) <- CLIENTS python threads, each with its
own seeded random mix until the time is up: speech in every format (some SSE, some at
other speeds, 5-60 frames) and the GET routes. Each speech response is checked: 200 with
a complete chunked body of the right length and format (every fifth lossy one decoded by
its tool) or 429 with Retry-After and the error envelope. A sampler reads VmRSS from
/proc/PID/status every second. The bound: after WARMUP seconds, the median RSS of the last
quarter of the run is at most the median of the quarter after the warm-up plus
max(8 MiB, 10 %) - a leak of a few kB per request over thousands of requests exceeds it.
"""
import argparse
import base64
import json
import os
import random
import shutil
import tempfile
import threading
import time

from serve_harness import (CONTENT_TYPES, FORMATS, MAGIC, Server, check, decoded_seconds,
                           error_of, expected_seconds, finish, length_ok, metric, metrics,
                           request, sanitized, speech, wait_until)

PARALLEL, QUEUE, CLIENTS = 2, 2, 8
WARMUP = 30
TEXTS = ["Hello world.", "The quick brown fox jumps over the lazy dog.",
         "Load testing the server, one request at a time.", "\u4f60\u597d\uff0c\u4e16\u754c\u3002",
         "Numbers: 1, 2, 3 and 42."]
GETS = ["/health", "/ready", "/v1/models", "/v1/audio/voices", "/metrics"]


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.ok = self.rejected = self.gets = 0
        self.failures = []

    def add(self, kind, what=None):
        with self.lock:
            if kind == "fail":
                self.failures.append(what)
            else:
                setattr(self, kind, getattr(self, kind) + 1)


def check_200(r, fields, work, decode):
    """None when r is a whole, valid answer to the speech request fields, else why not."""
    fmt, frames = fields["response_format"], fields["max_new_tokens"]
    speed = fields.get("speed", 1.0)
    greedy = fields["temperature"] == 0
    if not r.complete:
        return f"incomplete body: {r.error}"
    if fields.get("stream_format") == "sse":
        events = [json.loads(b[6:]) for b in r.body.decode().split("\n\n")
                  if b.startswith("data: ")]
        if not events or events[-1].get("type") != "speech.audio.done":
            return f"SSE without a final done event: {r.body[-200:]!r}"
        n = events[-1].get("usage", {}).get("output_tokens")
        if not isinstance(n, int) or not (n == frames if greedy else 1 <= n <= frames):
            return f"SSE usage {events[-1].get('usage')} (want {frames} output tokens)"
        frames = n
        audio = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    else:
        if r.header("content-type") != CONTENT_TYPES[fmt]:
            return f"Content-Type {r.header('content-type')!r}"
        audio = r.body
    if not audio or not MAGIC[fmt](audio):
        return f"not {fmt}: {audio[:16]!r}"
    if fmt in ("pcm", "wav") or decode:
        path = os.path.join(work, f"{threading.get_ident()}.{fmt}")
        with open(path, "wb") as f:
            f.write(audio)
        secs, err = decoded_seconds(fmt, path, work)
        os.unlink(path)
        # Sampling (temperature > 0) may end the speech before the cap.
        if err or not (length_ok(fmt, secs, frames, speed) or not greedy and secs is not None
                       and 0 < secs <= expected_seconds(frames, speed) + 0.2):
            return f"{fmt} x{speed}: {secs} s decoded ({err}) for {frames} frames"
    return None


def client(port, seed, deadline, tally, work):
    rng = random.Random(seed)
    lossy = 0
    while time.monotonic() < deadline:
        if rng.random() < 0.25:
            path = rng.choice(GETS)
            r = request(port, "GET", path, timeout=120)
            if r.status == 200 and r.complete:
                tally.add("gets")
            else:
                tally.add("fail", f"GET {path}: {r!r}")
            continue
        fields = {"model": "tts-1", "input": rng.choice(TEXTS),
                  "voice": rng.choice(["ryan", "vivian", {"id": "serena"}]),
                  "response_format": rng.choice(FORMATS), "max_new_tokens": rng.randint(5, 60),
                  "temperature": rng.choice([0, 0.9]), "seed": rng.randint(0, 1000)}
        if rng.random() < 0.3:
            fields["speed"] = rng.choice([0.5, 0.75, 1.5, 2.0])
        if rng.random() < 0.2:
            fields["stream_format"] = "sse"
        try:
            r = speech(port, fields, timeout=300)
        except OSError as e:
            tally.add("fail", f"{fields}: {e!r}")
            continue
        if r.status == 429:
            ra = r.header("retry-after") or ""
            if ra.isdigit() and error_of(r):
                tally.add("rejected")
                # A real client waits before it retries (the SDKs honour Retry-After); a
                # shorter pause keeps the queue under pressure.
                time.sleep(min(int(ra), rng.uniform(0.05, 0.3)))
            else:
                tally.add("fail", f"429 without Retry-After or envelope: {r!r}")
        elif r.status == 200:
            if fields["response_format"] not in ("pcm", "wav"):
                lossy += 1
            why = check_200(r, fields, work, decode=lossy % 5 == 0)
            tally.add("fail", f"{fields}: {why}") if why else tally.add("ok")
        else:
            tally.add("fail", f"{fields}: {r!r}")


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kztts", required=True)
    ap.add_argument("--tiny", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--seconds", type=float, default=120)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    work = tempfile.mkdtemp(dir=a.work)
    env = dict(os.environ)
    if sanitized(a.kztts):
        # ASan keeps freed blocks in a large quarantine that would fill during a
        # run like this one; a small one fills during the warm-up.
        env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=4"
    s = Server(a.kztts, a.tiny, work, "load", ["--parallel", str(PARALLEL), "--max-queue",
                                               str(QUEUE), "--threads", "1", "--quiet"],
               env=env).start()
    before = metrics(s.port)
    tally = Tally()
    start = time.monotonic()
    deadline = start + a.seconds
    samples = []
    done = threading.Event()

    def sampler():
        while not done.wait(1.0):
            v = rss_kib(s.proc.pid)
            if v is not None:
                samples.append((time.monotonic() - start, v))
    threads = [threading.Thread(target=client, args=(s.port, i, deadline, tally, work))
               for i in range(CLIENTS)]
    st = threading.Thread(target=sampler)
    st.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(a.seconds + 600)
    done.set()
    st.join()
    print(f"{tally.ok} speech 200, {tally.rejected} speech 429, {tally.gets} GETs, "
          f"{len(tally.failures)} failures in {a.seconds:.0f} s", flush=True)
    for f in tally.failures[:20]:
        print("  ", f[:400])
    check(s.alive(), f"server died under load:\n{s.log()[-3000:]}")
    check(not tally.failures, f"{len(tally.failures)} requests neither completed nor got 429")
    check(tally.ok > 0, "no speech request completed")
    check(tally.rejected > 0, f"{CLIENTS} clients on {PARALLEL} + {QUEUE} places: no 429 seen")
    check(s.healthy(), "not healthy after the load")

    def settled():
        m = metrics(s.port)
        d = (metric(m, "kztts_requests_total", route="speech", status="200")
             - metric(before, "kztts_requests_total", route="speech", status="200"))
        return m if d >= tally.ok else None
    m = wait_until(settled, 30) or metrics(s.port)
    d200 = (metric(m, "kztts_requests_total", route="speech", status="200")
            - metric(before, "kztts_requests_total", route="speech", status="200"))
    d429 = (metric(m, "kztts_requests_rejected_total", reason="queue_full")
            - metric(before, "kztts_requests_rejected_total", reason="queue_full"))
    check(d200 == tally.ok, f"metrics count {d200} speech 200s, the clients {tally.ok}")
    check(d429 == tally.rejected, f"metrics count {d429} queue_full, the clients {tally.rejected}")
    check(metric(m, "kztts_requests_running") == 0 and metric(m, "kztts_requests_queued") == 0,
          "requests still running or queued after the load")
    # --parallel 2 batches by default; with clients always waiting, both workers' requests
    # step together, so the steps are fewer than the frames.
    steps = metric(m, "kztts_batch_steps_total") - metric(before, "kztts_batch_steps_total")
    frames = metric(m, "kztts_batch_frames_total") - metric(before, "kztts_batch_frames_total")
    check(0 < steps < frames, f"load: {steps} batched steps for {frames} frames")

    with open(os.path.join(work, "rss.txt"), "w") as f:
        f.writelines(f"{t:.1f} {v}\n" for t, v in samples)
    quarter = (a.seconds - WARMUP) / 4
    early = sorted(v for t, v in samples if WARMUP <= t < WARMUP + quarter)
    late = sorted(v for t, v in samples if t >= a.seconds - quarter)
    if early and late:
        e_med, l_med = early[len(early) // 2], late[len(late) // 2]
        bound = e_med + max(8 * 1024, e_med // 10)
        print(f"RSS medians: early {e_med} KiB, late {l_med} KiB, bound {bound} KiB (first "
              f"sample {samples[0][1]} KiB, largest {max(v for _, v in samples)} KiB)", flush=True)
        check(l_med <= bound, f"RSS grew: late median {l_med} KiB > bound {bound} KiB "
              f"(early median {e_med} KiB; samples in {work}/rss.txt)")
    else:
        check(False, f"too few RSS samples: {len(samples)}")
    check(s.stop() == 0, "exit status after SIGTERM")
    finish("test_serve_load")


if __name__ == "__main__":
    main()
