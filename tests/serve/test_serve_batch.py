"""Batching in `kztts serve`: requests whose language models step together through one
scheduler give, byte for byte, the audio each gives alone, and /metrics shows the batches.

Flow: a reference server (tiny, --max-batch 1, no scheduler) answers three seeded pcm
requests (different voices, seeds, sampling and lengths) one at a time; its batch
counters must count every frame as a step of its own. A batched server (--max-batch 3
--parallel 3) then gets the same three: A and B at once, C when A's first audio has
arrived (so C joins a batch already running). Each body must equal the reference's; the
counters must have moved by the frames made, in fewer steps than frames (some step
carried two requests or more: proof that batching happened, with no timing assumed; the
requests are long so that A and B overlap); the batch and its waiting list must be empty
again. A crowded server (--max-batch 2 --parallel 4) gets A, B and C at once with D,
whose client leaves after its first audio, and E, whose client leaves right after its
request (wherever it then is: the queue, the line for the batch, the batch): A, B and C
must still be the bytes alone, and the server idle and healthy after. On a Base model
(tiny_base_1b7), two voice clones from reference audio in the request (one with its
transcript, one from the speaker embedding alone) batched equal each alone. A server started
with --parallel 12 and no --max-batch says "batch 8" (the default rule: --parallel, at
most 8), and --parallel 1 says "batch 1". With --kv-cache f16 (the ready line says "talker
kv f16"), A and C batched (sent at once) equal each alone on a server with the same cache.
"""
import argparse
import http.client
import json
import os
import shutil
import socket
import tempfile
import threading
import time

from serve_harness import (Server, check, data_uri, finish, metric, metrics, request, speech,
                           wait_until, wav_bytes)

SAMPLES_PER_FRAME = 1920
LONG_INPUT = "The quick brown fox jumps over the lazy dog, and then it runs away. " * 8
REQUESTS = {
    "A": {"voice": "ryan", "seed": 11, "temperature": 0.9, "top_k": 50, "max_new_tokens": 900},
    "B": {"voice": "serena", "seed": 12, "temperature": 0.7, "top_p": 0.9,
          "max_new_tokens": 700},
    "C": {"voice": "aiden", "seed": 13, "temperature": 1.0, "repetition_penalty": 1.1,
          "max_new_tokens": 500},
}
FIRST_BYTES = 64 * 1024  # of a response's audio: C is sent then, D leaves then


def body(name):
    return {"model": "tts-1", "input": LONG_INPUT, "response_format": "pcm",
            **REQUESTS[name]}


def frames_of(audio):
    return len(audio) // 2 // SAMPLES_PER_FRAME


def batch_counters(port):
    m = metrics(port)
    return {k: metric(m, "kztts_batch_" + k)
            for k in ("size", "waiting", "steps_total", "frames_total")}


def idle_counters(port):
    """The batch counters once nothing runs or waits; None before."""
    c = batch_counters(port)
    return c if c["size"] == 0 and c["waiting"] == 0 else None


def no_jobs(port):
    m = metrics(port)
    return metric(m, "kztts_requests_running") == 0 and metric(m, "kztts_requests_queued") == 0


def streamed(port, fields, results, name, first_bytes=None, leave=False):
    """POSTs fields and reads the body as it comes; sets first_bytes (an Event) once
    FIRST_BYTES arrived, and with leave closes the connection then. results[name] =
    (status, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    got = bytearray()
    try:
        conn.request("POST", "/v1/audio/speech", body=json.dumps(fields),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        while True:
            chunk = r.read1(65536)
            if not chunk:
                break
            got += chunk
            if first_bytes is not None and len(got) >= FIRST_BYTES:
                first_bytes.set()
                if leave:
                    break
        results[name] = (r.status, bytes(got))
    except (OSError, http.client.HTTPException) as e:
        results[name] = (None, repr(e).encode())
    finally:
        if first_bytes is not None:
            first_bytes.set()  # never leave C waiting
        conn.close()


def run_all(threads):
    """Starts the threads together and waits for them (bounded)."""
    for t in threads:
        t.start()
    for t in threads:
        t.join(900)


def reference(a, work):
    """Each request alone on a server without a scheduler; its counters: steps == frames."""
    out = {}
    with Server(a.kztts, a.tiny, work, "alone", ["--max-batch", "1", "--parallel", "1",
                                                 "--threads", "1", "--quiet"]) as s:
        before = batch_counters(s.port)
        for name in REQUESTS:
            r = speech(s.port, body(name), timeout=600)
            check(r.status == 200 and r.complete, f"alone {name}: {r!r}")
            out[name] = r.body
        want = sum(frames_of(b) for b in out.values())
        # A response is whole a moment before its worker is free again.
        after = wait_until(lambda: idle_counters(s.port), 30) or batch_counters(s.port)
        steps = after["steps_total"] - before["steps_total"]
        frames = after["frames_total"] - before["frames_total"]
        check(frames == want and steps == want,
              f"alone: steps {steps} frames {frames}, the responses hold {want} frames")
        check(after["size"] == 0 and after["waiting"] == 0, f"alone: idle batch {after}")
    for name, audio in out.items():
        want = REQUESTS[name]["max_new_tokens"]
        check(0 < frames_of(audio) <= want and len(audio) % (2 * SAMPLES_PER_FRAME) == 0,
              f"alone {name}: {len(audio)} bytes for at most {want} frames")
    print("ok   alone: " + ", ".join(f"{n} {frames_of(b)} frames" for n, b in out.items()),
          flush=True)
    return out


def batched(a, work, ref):
    """A and B at once, C once A's audio flows; each as alone; fewer steps than frames."""
    with Server(a.kztts, a.tiny, work, "batched", ["--max-batch", "3", "--parallel", "3",
                                                   "--threads", "1", "--quiet"]) as s:
        before = batch_counters(s.port)
        results, a_flows = {}, threading.Event()
        ta = threading.Thread(target=streamed, args=(s.port, body("A"), results, "A", a_flows))
        tb = threading.Thread(target=streamed, args=(s.port, body("B"), results, "B"))
        ta.start()
        tb.start()
        check(a_flows.wait(600), "batched: A's audio never came")
        tc = threading.Thread(target=streamed, args=(s.port, body("C"), results, "C"))
        tc.start()
        for t in (ta, tb, tc):
            t.join(900)
        for name in REQUESTS:
            status, audio = results.get(name, (None, b""))
            check(status == 200, f"batched {name}: status {status} {audio[:200]!r}")
            same = audio == ref[name]
            where = next((i for i in range(min(len(audio), len(ref[name])))
                          if audio[i] != ref[name][i]), min(len(audio), len(ref[name])))
            check(same, f"batched {name}: {len(audio)} bytes differ from the {len(ref[name])} "
                  f"bytes alone from byte {where} (frame {where // 2 // SAMPLES_PER_FRAME})")
        want = sum(frames_of(b) for b in ref.values())
        after = wait_until(lambda: idle_counters(s.port), 30) or batch_counters(s.port)
        steps = after["steps_total"] - before["steps_total"]
        frames = after["frames_total"] - before["frames_total"]
        check(frames == want, f"batched: {frames} frames counted, the responses hold {want}")
        check(0 < steps < frames, f"batched: {steps} steps for {frames} frames: no step "
              "carried two requests")
        check(after["size"] == 0 and after["waiting"] == 0, f"batched: not idle after: {after}")
        print(f"ok   batched: {frames:.0f} frames in {steps:.0f} steps "
              f"(mean batch {frames / max(steps, 1):.2f})", flush=True)


def leave_early(port, fields, seconds):
    """Sends a speech request on a raw socket and closes it after seconds, unread."""
    data = json.dumps(fields).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as c:
        c.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\n"
                  + f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
        time.sleep(seconds)


def crowded(a, work, ref):
    """More requests in flight than places in the batch, two of them abandoned: the others'
    bytes do not change."""
    with Server(a.kztts, a.tiny, work, "crowded", ["--max-batch", "2", "--parallel", "4",
                                                   "--max-queue", "4", "--threads", "1",
                                                   "--quiet"]) as s:
        before = batch_counters(s.port)
        results, d_flows = {}, threading.Event()
        threads = [threading.Thread(target=streamed, args=(s.port, body(n), results, n))
                   for n in REQUESTS]
        threads.append(threading.Thread(target=streamed, args=(s.port, body("A"), results,
                                                                "D", d_flows, True)))
        threads.append(threading.Thread(target=leave_early, args=(s.port, body("B"), 0.2)))
        run_all(threads)
        for name in REQUESTS:
            status, audio = results.get(name, (None, b""))
            check(status == 200 and audio == ref[name],
                  f"crowded {name}: status {status}, {len(audio)} bytes, "
                  f"{'the same' if audio == ref[name] else 'not the bytes alone'}")
        check(results.get("D", (None,))[0] == 200, f"crowded D: {results.get('D')!r:.200}")
        after = wait_until(lambda: idle_counters(s.port), 60) or batch_counters(s.port)
        steps = after["steps_total"] - before["steps_total"]
        frames = after["frames_total"] - before["frames_total"]
        check(0 < steps < frames, f"crowded: {steps} steps for {frames} frames")
        check(after["size"] == 0 and after["waiting"] == 0, f"crowded: not idle: {after}")
        check(wait_until(lambda: no_jobs(s.port), 60), "crowded: requests still running or "
              "queued")
        check(request(s.port, "GET", "/ready").status == 200, "crowded: not ready after")
        print(f"ok   crowded: {frames:.0f} frames in {steps:.0f} steps", flush=True)


def clones(a, work):
    """Base: voices cloned in the request, alone and batched."""
    ref = data_uri(wav_bytes(2.0, seed=9))
    fields = {
        "icl": {"ref_audio": ref, "ref_text": "A reference, read aloud.", "seed": 21,
                "temperature": 0.9, "max_new_tokens": 300},
        "xvec": {"ref_audio": ref, "x_vector_only_mode": True, "seed": 22,
                 "temperature": 0.8, "max_new_tokens": 300},
    }
    for f in fields.values():
        f.update({"model": "tts-1", "input": LONG_INPUT, "voice": "ignored",
                  "task_type": "Base", "response_format": "pcm"})
    alone = {}
    with Server(a.kztts, a.base, work, "base_alone", ["--max-batch", "1", "--threads", "1",
                                                      "--quiet"]) as s:
        for name, f in fields.items():
            r = speech(s.port, f, timeout=600)
            check(r.status == 200 and r.complete and frames_of(r.body) > 0,
                  f"base alone {name}: {r!r}")
            alone[name] = r.body
    with Server(a.kztts, a.base, work, "base_batched", ["--parallel", "2", "--threads", "1",
                                                        "--quiet"]) as s:
        before = batch_counters(s.port)
        results = {}
        threads = [threading.Thread(target=streamed, args=(s.port, f, results, name))
                   for name, f in fields.items()]
        run_all(threads)
        for name in fields:
            status, audio = results.get(name, (None, b""))
            check(status == 200 and audio == alone[name],
                  f"base batched {name}: status {status}, {len(audio)} bytes (alone "
                  f"{len(alone[name])}), {'the same' if audio == alone[name] else 'differ'}")
        after = wait_until(lambda: idle_counters(s.port), 60) or batch_counters(s.port)
        frames = after["frames_total"] - before["frames_total"]
        steps = after["steps_total"] - before["steps_total"]
        want = sum(frames_of(b) for b in alone.values())
        check(frames == want, f"base batched: {frames} frames counted, the responses {want}")
    print("ok   clones: " + ", ".join(f"{n} {frames_of(b)} frames" for n, b in alone.items())
          + f"; batched in {steps:.0f} steps", flush=True)


def f16_cache(a, work):
    """--kv-cache f16: in effect, and batched equals alone."""
    names, alone = ("A", "C"), {}
    with Server(a.kztts, a.tiny, work, "f16_alone", ["--max-batch", "1", "--threads", "1",
                                                     "--kv-cache", "f16"]) as s:
        line = wait_until(lambda: "ready (" in s.log(), 30)
        check(line and "talker kv f16)" in s.log(), f"f16: the ready line:\n{s.log()[-500:]}")
        for name in names:
            r = speech(s.port, body(name), timeout=600)
            check(r.status == 200 and r.complete, f"f16 alone {name}: {r!r}")
            alone[name] = r.body
    with Server(a.kztts, a.tiny, work, "f16_batched",
                ["--max-batch", "2", "--parallel", "2", "--threads", "1", "--kv-cache", "f16",
                 "--quiet"]) as s:
        results = {}
        run_all([threading.Thread(target=streamed, args=(s.port, body(n), results, n))
                 for n in names])
    for name in names:
        status, audio = results.get(name, (None, b""))
        check(status == 200 and audio == alone[name],
              f"f16 batched {name}: status {status}, {len(audio)} bytes, "
              f"{'equal to' if audio == alone[name] else 'not'} the {len(alone[name])} alone")
    print("ok   f16 kv cache: batched as alone", flush=True)


def default_batch(a, work):
    """The ready line names the batch: --parallel, at most 8."""
    for parallel, want in (("12", 8), ("1", 1)):
        s = Server(a.kztts, a.tiny, work, "default_" + parallel,
                   ["--parallel", parallel, "--threads", "1"]).start()
        line = wait_until(lambda: "ready (" in s.log(), 30)
        check(line and f"batch {want}," in s.log(),
              f"--parallel {parallel}: want batch {want} in the ready line:\n{s.log()[-500:]}")
        check(s.stop() == 0, f"--parallel {parallel}: exit status after SIGTERM")
    print("ok   default batch", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kztts", required=True)
    ap.add_argument("--tiny", required=True)
    ap.add_argument("--base", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    work = tempfile.mkdtemp(dir=a.work)
    ref = reference(a, work)
    batched(a, work, ref)
    crowded(a, work, ref)
    clones(a, work)
    f16_cache(a, work)
    default_batch(a, work)
    finish("test_serve_batch")


if __name__ == "__main__":
    main()
