"""The raw HTTP contract of `kztts serve`, seen through curl (and a python socket where a
request must stay open): status codes, headers, chunked bodies, the streamed WAV header,
SSE lines, /v1/models, the voices round trip, /metrics, the queue bound and the drain.

Flow: a CustomVoice server (tiny, API keys, --parallel 1 --max-queue 1) answers every
format; each body is checked by its magic, its header fields and an independent decoder's
length; /metrics is read before and after to see the counters move by what was sent. The
sampling fields must give the CLI's audio byte for byte (kztts synth with the same
speaker, language, instruction, seed and sampling values). A Base server (tiny_base_1b7,
--voices-dir, --cors) takes voice uploads (multipart and JSON), lists, speaks with and
deletes them, and answers CORS preflights; a VoiceDesign server (tiny_vd) needs
instructions; a --max-input server counts characters. Long requests (max_new_tokens LONG)
hold the one worker while the queue bound (429 + Retry-After), cancellation on
disconnect, the first audio of every format arriving while its job still runs, and the
SIGTERM drain (503 + Retry-After, the in-flight stream completes, exit 0) are checked.
"""
import argparse
import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import threading

from serve_harness import (CONTENT_TYPES, FORMATS, MAGIC, Server, check, check_error, curl,
                           data_uri, decoded_seconds, error_of, expected_seconds, finish,
                           length_ok, metric, metrics, request, speech, wait_until, wav_bytes)

KEY = "sk-contract-key"
FRAMES = 12
LONG = 2000  # frames: a request that holds the worker while the test looks at it
LONG_INPUT = "The quick brown fox jumps over the lazy dog. " * 90
REF_TEXT = "A reference, read aloud."


def auth():
    return ["-H", f"Authorization: Bearer {KEY}"]


def post_json(work, port, path, fields, *extra):
    """curl POSTs the fields as JSON (from a file: bodies may be larger than argv allows)."""
    fd, body = tempfile.mkstemp(dir=work, suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(fields, f)
    try:
        return curl(work, f"http://127.0.0.1:{port}{path}", "-X", "POST",
                    "-H", "Content-Type: application/json", "--data-binary", "@" + body, *extra)
    finally:
        os.unlink(body)


def say(fmt=None, frames=FRAMES, **kw):
    f = {"model": "tts-1", "input": "Hello from the contract test.", "voice": "ryan",
         "temperature": 0, "seed": 3, "max_new_tokens": frames}
    if fmt:
        f["response_format"] = fmt
    f.update(kw)
    return {k: v for k, v in f.items() if v is not None}


def check_wav_header(name, b):
    """A streamed WAV: RIFF size 0xFFFFFFFF, data size "unknown", PCM 16-bit mono 24 kHz."""
    ok = len(b) >= 44 and b[:4] == b"RIFF" and b[8:16] == b"WAVEfmt "
    check(ok, f"{name}: not a canonical WAV header: {b[:44]!r}")
    if not ok:
        return
    riff, = struct.unpack("<I", b[4:8])
    fmt_len, tag, ch, rate, _, _, bits = struct.unpack("<IHHIIHH", b[16:36])
    check(riff == 0xFFFFFFFF, f"{name}: RIFF size {riff:#x} (want 0xFFFFFFFF when streamed)")
    check((tag, ch, rate, bits) == (1, 1, 24000, 16), f"{name}: fmt {tag} {ch} {rate} {bits}")
    pos = 20 + fmt_len
    while pos + 8 <= len(b) and b[pos:pos + 4] != b"data":
        pos += 8 + struct.unpack("<I", b[pos + 4:pos + 8])[0]
    check(b[pos:pos + 4] == b"data", f"{name}: no data chunk")
    size, = struct.unpack("<I", b[pos + 4:pos + 8])
    # "Until the end of the stream": 0xFFFFFFFF, or (the CLI's convention, audio_out.c)
    # the largest size that keeps RIFF = 36 + data.
    check(size in (0xFFFFFFFF, 0xFFFFFFFF - 36),
          f"{name}: data size {size:#x} (want 0xFFFFFFFF or 0xFFFFFFDB when streamed)")
    check(len(b) - pos - 8 == FRAMES * 3840, f"{name}: {len(b) - pos - 8} data bytes")


def check_audio(name, work, fmt, body, frames=FRAMES, speed=1.0):
    check(MAGIC[fmt](body), f"{name}: not {fmt}: {body[:16]!r}")
    path = os.path.join(work, f"{name}.{fmt}")
    with open(path, "wb") as f:
        f.write(body)
    secs, err = decoded_seconds(fmt, path, work)
    check(err is None and length_ok(fmt, secs, frames, speed),
          f"{name}: decoded {secs} s ({err}), want {expected_seconds(frames, speed)} s")


def formats(s, work):
    """Every format through curl: 200, Content-Type, chunked, X-Request-Id, audio."""
    ids = set()
    for fmt in FORMATS + (None,):
        name = f"format_{fmt or 'default'}"
        r = post_json(work, s.port, "/v1/audio/speech", say(fmt), *auth())
        want_fmt = fmt or "mp3"
        check(r.rc == 0 and r.status == 200, f"{name}: {r!r}")
        check(r.header("content-type") == CONTENT_TYPES[want_fmt],
              f"{name}: Content-Type {r.header('content-type')!r}")
        check((r.header("transfer-encoding") or "").lower() == "chunked",
              f"{name}: Transfer-Encoding {r.header('transfer-encoding')!r}")
        check(r.header("content-length") is None, f"{name}: Content-Length with chunked")
        rid = r.header("x-request-id")
        check(bool(rid) and rid not in ids, f"{name}: X-Request-Id {rid!r} missing or reused")
        ids.add(rid)
        if want_fmt == "wav":
            check_wav_header(name, r.body)
        if want_fmt == "pcm":
            check(len(r.body) == FRAMES * 3840, f"{name}: {len(r.body)} pcm bytes")
        check_audio(name, work, want_fmt, r.body)
        print(f"ok   {name}: {len(r.body)} bytes, {r.header('content-type')}", flush=True)
    return len(FORMATS) + 1


def sse(s, work):
    """SSE through curl -N: data lines, blank-line separated, deltas then one done."""
    for fmt in ("pcm", "mp3", "wav"):
        name = f"sse_{fmt}"
        r = post_json(work, s.port, "/v1/audio/speech", say(fmt, stream_format="sse"), "-N",
                      *auth())
        check(r.rc == 0 and r.status == 200, f"{name}: {r!r}")
        check((r.header("content-type") or "").startswith("text/event-stream"),
              f"{name}: Content-Type {r.header('content-type')!r}")
        check((r.header("transfer-encoding") or "").lower() == "chunked",
              f"{name}: Transfer-Encoding {r.header('transfer-encoding')!r}")
        text = r.body.decode("utf-8", errors="replace")
        check(text.endswith("\n\n"), f"{name}: the stream does not end with a blank line")
        events = []
        for block in [b for b in text.split("\n\n") if b]:
            ev, data = None, []
            for line in block.split("\n"):
                if line.startswith("data: "):
                    data.append(line[6:])
                elif line.startswith("event: "):
                    ev = line[7:]
                else:
                    check(False, f"{name}: line {line[:80]!r} is neither data: nor event:")
            try:
                obj = json.loads("\n".join(data))
            except ValueError:
                check(False, f"{name}: data is not JSON: {data!r:.200}")
                continue
            check(ev is None or ev == obj.get("type"), f"{name}: event {ev} vs {obj.get('type')}")
            events.append(obj)
        types = [e.get("type") for e in events]
        check(len(types) >= 2 and set(types[:-1]) == {"speech.audio.delta"}
              and types[-1] == "speech.audio.done", f"{name}: types {types}")
        audio = b""
        for e in events[:-1]:
            try:
                audio += base64.b64decode(e.get("audio", ""), validate=True)
            except ValueError:
                check(False, f"{name}: bad base64 in a delta")
        u = events[-1].get("usage", {}) if events else {}
        check(u.get("output_tokens") == FRAMES and u.get("input_tokens", 0) > 0
              and u.get("total_tokens") == u.get("input_tokens", 0) + FRAMES, f"{name}: usage {u}")
        if fmt == "wav":
            check_wav_header(name, audio)
        check_audio(name, work, fmt, audio)
        print(f"ok   {name}: {len(events)} events", flush=True)
    return 3


def models_and_routes(s, work):
    r = curl(work, f"http://127.0.0.1:{s.port}/v1/models", *auth())
    j = r.json() or {}
    ids = [m.get("id") for m in j.get("data", []) if isinstance(m, dict)]
    check(r.status == 200 and j.get("object") == "list" and ids == ["tiny"]
          and all(m.get("object") == "model" for m in j["data"]), f"/v1/models: {r!r}")
    r = curl(work, f"http://127.0.0.1:{s.port}/v1/nothing/here", *auth())
    check(r.status == 404 and r.header("x-request-id"), f"unknown route: {r!r}")
    check_error("unknown route", Response_of(r), 404)
    r = curl(work, f"http://127.0.0.1:{s.port}/v1/audio/voices", *auth())
    check(r.status == 200 and b"ryan" in r.body and b"vivian" in r.body,
          f"voices of a CustomVoice model list its speakers: {r!r}")
    # No --voices-dir: uploads are refused with a 4xx in the envelope, never a 500.
    r = curl(work, f"http://127.0.0.1:{s.port}/v1/audio/voices", "-F", "name=x",
             "-F", "consent=yes", "-F", f"ref_text={REF_TEXT}",
             "-F", f"audio_sample=@{ref_wav(work)};type=audio/wav", *auth())
    check(400 <= r.status < 500 and error_of(Response_of(r)), f"upload without voices dir: {r!r}")


class Response_of:
    """A curl result seen as a harness Response (for check_error)."""

    def __init__(self, r):
        self.status, self.body, self.headers = r.status, r.body, r.headers

    def header(self, name):
        return self.headers.get(name.lower())

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def __repr__(self):
        return f"<{self.status} {self.body[:200]!r}>"


_ref = {}


def ref_wav(work):
    if "path" not in _ref:
        _ref["path"] = os.path.join(work, "ref.wav")
        with open(_ref["path"], "wb") as f:
            f.write(wav_bytes(3.0, seed=5))
    return _ref["path"]


def auth_and_open_routes(s, work):
    for path in ("/health", "/ready", "/metrics"):
        r = curl(work, f"http://127.0.0.1:{s.port}{path}")
        check(r.status == 200, f"{path} without a key: {r!r}")
    r = curl(work, f"http://127.0.0.1:{s.port}/metrics")
    check((r.header("content-type") or "").startswith("text/plain"),
          f"/metrics Content-Type {r.header('content-type')!r}")
    before = metrics(s.port)
    for name, extra in (("no key", []), ("wrong key", ["-H", "Authorization: Bearer nope"]),
                        ("basic", ["-H", "Authorization: Basic " + base64.b64encode(
                            f"u:{KEY}".encode()).decode()])):
        r = post_json(work, s.port, "/v1/audio/speech", say("pcm"), *extra)
        check_error(f"auth {name}", Response_of(r), 401)
    after = metrics(s.port)
    d = (metric(after, "kztts_requests_rejected_total", reason="auth")
         - metric(before, "kztts_requests_rejected_total", reason="auth"))
    check(d == 3, f"rejected_total{{reason=auth}} moved by {d} (want 3)")


def metrics_move(s, work):
    names = ["kztts_request_duration_seconds_bucket", "kztts_request_duration_seconds_sum",
             "kztts_request_duration_seconds_count", "kztts_time_to_first_audio_seconds_bucket",
             "kztts_time_to_first_audio_seconds_count", "kztts_requests_total",
             "kztts_requests_running", "kztts_requests_queued", "kztts_audio_seconds_total",
             "kztts_requests_rejected_total"]
    before = metrics(s.port)
    n = formats(s, work)
    n += sse(s, work)
    after = wait_until(lambda: (lambda m: m if metric(m, "kztts_requests_total", route="speech",
                                                      status="200")
                                - metric(before, "kztts_requests_total", route="speech",
                                         status="200") >= n else None)(metrics(s.port)), 30)
    after = after or metrics(s.port)
    for name in names:
        check(any(k.split("{")[0] == name for k in after), f"/metrics lacks {name}")
    for name, labels, want in (("kztts_requests_total", {"route": "speech", "status": "200"}, n),
                               ("kztts_request_duration_seconds_count", {"route": "speech"}, n),
                               ("kztts_time_to_first_audio_seconds_count", {}, n)):
        d = metric(after, name, **labels) - metric(before, name, **labels)
        check(d == want, f"{name}{labels} moved by {d} (want {want})")
    d = metric(after, "kztts_audio_seconds_total") - metric(before, "kztts_audio_seconds_total")
    want = n * expected_seconds(FRAMES)
    check(abs(d - want) < 0.01 * want, f"audio_seconds_total moved by {d} (want {want})")
    buckets = sorted(((float(k.split('le="')[1].split('"')[0]), v) for k, v in after.items()
                      if k.startswith("kztts_request_duration_seconds_bucket")
                      and 'route="speech"' in k), key=lambda t: t[0])
    counts = [v for _, v in buckets]
    check(buckets and buckets[-1][0] == float("inf") and counts == sorted(counts)
          and counts[-1] == metric(after, "kztts_request_duration_seconds_count", route="speech"),
          f"speech duration buckets not cumulative up to +Inf == count: {buckets}")
    check(metric(after, "kztts_requests_running") == 0 and metric(after, "kztts_requests_queued")
          == 0, "running/queued not 0 when idle")


class Held:
    """A speech request sent on a raw socket and left unread (the client holds it)."""

    def __init__(self, port, fields):
        body = json.dumps(fields).encode()
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.sock.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: "
                          b"application/json\r\nAuthorization: Bearer " + KEY.encode()
                          + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)

    def close(self):
        self.sock.close()


def gauges(port):
    m = metrics(port)
    return metric(m, "kztts_requests_running"), metric(m, "kztts_requests_queued")


def queue_full_and_cancel(s, work):
    """--parallel 1 --max-queue 1: one running, one queued, the third gets 429; both held
    clients leave and their jobs end early (less audio than they asked for)."""
    long = say("pcm", LONG, input=LONG_INPUT)
    before = metrics(s.port)
    a = Held(s.port, long)
    check(wait_until(lambda: gauges(s.port) == (1, 0), 60, 0.02),
          f"first long request not running: {gauges(s.port)}")
    b = Held(s.port, long)
    check(wait_until(lambda: gauges(s.port) == (1, 1), 60, 0.02),
          f"second long request not queued: {gauges(s.port)}")
    r = post_json(work, s.port, "/v1/audio/speech", say("pcm"), *auth())
    check_error("queue full", Response_of(r), 429)
    ra = r.header("retry-after") or ""
    check(ra.isdigit() and int(ra) >= 1, f"429 Retry-After {ra!r}")
    a.close()
    b.close()
    check(wait_until(lambda: gauges(s.port) == (0, 0), 120), f"after both clients left the "
          f"jobs still hold the worker: {gauges(s.port)}")
    after = metrics(s.port)
    d = (metric(after, "kztts_requests_rejected_total", reason="queue_full")
         - metric(before, "kztts_requests_rejected_total", reason="queue_full"))
    check(d == 1, f"rejected_total{{reason=queue_full}} moved by {d} (want 1)")
    audio = metric(after, "kztts_audio_seconds_total") - metric(before, "kztts_audio_seconds_total")
    check(audio < expected_seconds(LONG), f"the two cancelled requests made {audio} s of audio: "
          f"cancelling did not stop them (one whole request is {expected_seconds(LONG)} s)")
    check(s.healthy(), "not healthy after the cancelled requests")
    print(f"ok   queue full: 429 Retry-After {ra}; cancelled jobs made {audio:.1f} s", flush=True)


def first_audio_early(s):
    """Streaming from the first frame in every format: the first body bytes of a long
    request arrive while its job is still synthesizing (a server that encoded the whole
    answer first would show nothing running by then)."""
    for fmt, sse in [(f, False) for f in FORMATS] + [("pcm", True), ("opus", True)]:
        name = f"first audio {fmt}{' sse' if sse else ''}"
        fields = say(fmt, LONG, input=LONG_INPUT, stream_format="sse" if sse else None)
        h = Held(s.port, fields)
        got = b""
        while b"\r\n\r\n" not in got or len(got) <= got.index(b"\r\n\r\n") + 4:
            b = h.sock.recv(4096)
            if not b:
                break
            got += b
        running = gauges(s.port)[0]
        h.close()
        check(got.startswith(b"HTTP/1.1 200") and running == 1,
              f"{name}: body bytes came when {running} requests ran: {got[:80]!r}")
        check(wait_until(lambda: gauges(s.port) == (0, 0), 120), f"{name}: job not cancelled")
    print("ok   first audio while synthesizing, every format", flush=True)


def drain(s, work):
    """SIGTERM with a stream in flight: /ready and new speech 503 + Retry-After, /health
    200, the stream completes whole, exit 0."""
    out = {}
    t = threading.Thread(target=lambda: out.update(r=post_json(
        work, s.port, "/v1/audio/speech", say("pcm", LONG, input=LONG_INPUT), *auth())))
    t.start()
    check(wait_until(lambda: gauges(s.port)[0] == 1, 60, 0.02), "long request not running")
    s.proc.terminate()
    # The server sees the signal on its next poll: wait for /ready to turn (bounded).
    check(wait_until(lambda: s.get_status("/ready") == 503, 30, 0.02),
          "/ready still not 503 30 s after SIGTERM")
    r = speech(s.port, say("pcm"), {"Authorization": f"Bearer {KEY}"}, timeout=30)
    check_error("speech while draining", r, 503)
    ra = r.header("retry-after") or ""
    check(ra.isdigit() and int(ra) >= 1, f"503 Retry-After {ra!r}")
    r = request(s.port, "GET", "/health", timeout=30)
    check(r.status == 200, f"/health while draining: {r!r}")
    t.join(300)
    r = out.get("r")
    check(r is not None and r.rc == 0 and r.status == 200 and len(r.body) == LONG * 3840,
          f"the in-flight stream did not complete whole while draining: {r!r}")
    try:
        s.proc.wait(120)
    except subprocess.TimeoutExpired:
        pass
    check(s.proc.returncode == 0, f"exit status after the drain: {s.proc.returncode}")
    print("ok   drain", flush=True)


def voices(s, work, vdir):
    url = f"http://127.0.0.1:{s.port}/v1/audio/voices"
    r = curl(work, url)
    check(r.status == 200 and isinstance(r.json(), dict), f"GET voices: {r!r}")
    r = curl(work, url, "-F", "name=alice", "-F", f"audio_sample=@{ref_wav(work)};type=audio/wav",
             "-F", f"ref_text={REF_TEXT}", "-F", "consent=yes")
    j = r.json() or {}
    check(r.status in (200, 201) and j.get("object") == "audio.voice" and j.get("name") == "alice"
          and "id" in j and isinstance(j.get("created_at"), int), f"multipart upload: {r!r}")
    check(os.path.isfile(os.path.join(vdir, "alice.kzvoice")), "no alice.kzvoice in voices dir")
    with open(ref_wav(work), "rb") as f:
        b64 = base64.b64encode(f.read()).decode()
    r = post_json(work, s.port, "/v1/audio/voices", {"name": "bob", "audio_sample": b64,
                                                     "ref_text": REF_TEXT, "consent": "yes"})
    check(r.status in (200, 201) and (r.json() or {}).get("name") == "bob", f"JSON upload: {r!r}")
    left = [f for f in os.listdir(vdir) if not f.endswith((".kzvoice", ".json"))]
    check(not left, f"files left in the voices dir: {left}")
    listing = curl(work, url).body.decode()
    check("alice" in listing and "bob" in listing, f"list lacks the uploads: {listing[:300]}")
    for name, voice, fmt in (("alice", "alice", "wav"), ("bob {id}", {"id": "bob"}, "pcm")):
        r = post_json(work, s.port, "/v1/audio/speech", say(fmt, voice=voice))
        check(r.status == 200, f"speech with uploaded voice {name}: {r!r}")
        if r.status == 200:
            check_audio(f"voice_{fmt}", work, fmt, r.body)
    r = post_json(work, s.port, "/v1/audio/speech",
                  say("pcm", voice="ignored", ref_audio=data_uri(wav_bytes(2.0, seed=9)),
                      ref_text=REF_TEXT, task_type="Base"))
    check(r.status == 200 and len(r.body) == FRAMES * 3840, f"ref_audio ICL: {r!r}")
    r = post_json(work, s.port, "/v1/audio/speech",
                  say("pcm", voice="ignored", ref_audio=data_uri(wav_bytes(2.0, seed=9)),
                      x_vector_only_mode=True))
    check(r.status == 200 and len(r.body) == FRAMES * 3840, f"ref_audio x-vector: {r!r}")
    r = curl(work, url + "/alice", "-X", "DELETE")
    check(r.status in (200, 204), f"DELETE alice: {r!r}")
    check(not os.path.exists(os.path.join(vdir, "alice.kzvoice")), "alice.kzvoice still there")
    listing = curl(work, url).body.decode()
    check("alice" not in listing and "bob" in listing, f"list after delete: {listing[:300]}")
    r = post_json(work, s.port, "/v1/audio/speech", say("pcm", voice="alice"))
    check_error("speech with a deleted voice", Response_of(r), 404)
    r = curl(work, url + "/alice", "-X", "DELETE")
    check_error("DELETE a deleted voice", Response_of(r), 404)
    voice_names_any_case(s, work, vdir, b64)
    print("ok   voices round trip", flush=True)


def voice_names_any_case(s, work, vdir, b64):
    """Voice names are case-insensitive (as vLLM-Omni's): stored and answered in lower
    case, found, refused as taken and deleted in any case."""
    url = f"http://127.0.0.1:{s.port}/v1/audio/voices"
    r = post_json(work, s.port, "/v1/audio/voices", {"name": "Carol", "audio_sample": b64,
                                                     "consent": "yes"})
    check(r.status == 200 and (r.json() or {}).get("name") == "carol", f"upload Carol: {r!r}")
    check(os.path.isfile(os.path.join(vdir, "carol.kzvoice")), "no carol.kzvoice in voices dir")
    r = post_json(work, s.port, "/v1/audio/voices", {"name": "CAROL", "audio_sample": b64,
                                                     "consent": "yes"})
    check_error("upload CAROL when carol exists", Response_of(r), 409, "name")
    r = curl(work, url + "/CAROL")
    check(r.status == 200 and (r.json() or {}).get("id") == "carol", f"GET CAROL: {r!r}")
    r = post_json(work, s.port, "/v1/audio/speech", say("pcm", voice={"id": "cArOl"}))
    check(r.status == 200 and len(r.body) == FRAMES * 3840, f"speech with voice cArOl: {r!r}")
    r = curl(work, url + "/Carol", "-X", "DELETE")
    check(r.status == 200 and (r.json() or {}).get("id") == "carol", f"DELETE Carol: {r!r}")
    check(not os.path.exists(os.path.join(vdir, "carol.kzvoice")), "carol.kzvoice still there")


def cli_pcm(kztts, model, work, args, text):
    """The CLI's raw 16-bit audio for the same request (the server's reference)."""
    out = os.path.join(work, "cli.pcm")
    r = subprocess.run([kztts, "synth", "-q", "-m", model, "--format", "pcm", "-o", out, *args,
                        text], capture_output=True, timeout=300)
    check(r.returncode == 0, f"kztts synth {args}: {r.stderr!r}")
    with open(out, "rb") as f:
        return f.read()


def sampling_fields(s, work, kztts, tiny):
    """The vLLM-Omni fields are honoured: the server's pcm equals the CLI's for the same
    speaker, language, instruction, seed and sampling values; temperature 0 ignores the
    seed; another seed samples other audio."""
    text = "Sampling fields, honoured."
    fields = say("pcm", 20, input=text, language="English", instructions="Speak slowly.",
                 seed=42, temperature=0.7, top_k=20, top_p=0.9, repetition_penalty=1.1,
                 voice="vivian")
    r1 = post_json(work, s.port, "/v1/audio/speech", fields, *auth())
    cli = cli_pcm(kztts, tiny, work, ["-s", "vivian", "-l", "english", "-i", "Speak slowly.",
                                      "--seed", "42", "--temperature", "0.7", "--top-k", "20",
                                      "--top-p", "0.9", "--repetition-penalty", "1.1",
                                      "--max-frames", "20"], text)
    check(r1.status == 200 and r1.body == cli, f"sampled request differs from the CLI's audio "
          f"({len(r1.body)} vs {len(cli)} bytes): {r1!r}")
    r2 = post_json(work, s.port, "/v1/audio/speech", dict(fields, seed=43), *auth())
    check(r2.status == 200 and r2.body != r1.body, "another seed gave the same audio")
    g1 = post_json(work, s.port, "/v1/audio/speech", say("pcm", 20, input=text, seed=1), *auth())
    g2 = post_json(work, s.port, "/v1/audio/speech", say("pcm", 20, input=text, seed=2), *auth())
    cli = cli_pcm(kztts, tiny, work, ["-s", "ryan", "--greedy", "--max-frames", "20"], text)
    check(g1.status == 200 and g1.body == g2.body == cli,
          "temperature 0: the audio depends on the seed or differs from the CLI's --greedy")
    print("ok   sampling fields == CLI", flush=True)


def voice_design(kztts, vd, work):
    """A VoiceDesign model: instructions describe the voice (required)."""
    with Server(kztts, vd, work, "voice_design", ["--threads", "1"]) as s:
        r = post_json(work, s.port, "/v1/audio/speech",
                      say("pcm", voice=None, instructions="A calm, low voice."))
        check(r.status == 200 and len(r.body) == FRAMES * 3840, f"VoiceDesign: {r!r}")
        r = post_json(work, s.port, "/v1/audio/speech", say("pcm", voice=None))
        check_error("VoiceDesign without instructions", Response_of(r), 400, "instructions")
        check(s.stop() == 0, "VoiceDesign server exit status")


def log_lines(s, work):
    """One log line per request: id, route, status, audio seconds, first audio, total."""
    r = post_json(work, s.port, "/v1/audio/speech", say("pcm"), *auth())
    rid = r.header("x-request-id")

    def line():
        return [ln for ln in s.log().splitlines() if ln.startswith(f"{rid} ")]
    got = wait_until(line, 30)
    check(bool(got) and len(got) == 1, f"log lines for {rid}: {got}")
    if got:
        ln = got[0]
        check(" speech 200 " in ln and f"audio={expected_seconds(FRAMES):.2f}s" in ln
              and "first_audio=" in ln and "total=" in ln, f"log line {ln!r}")


def cors_and_probes(s, plain, work):
    """--cors ORIGIN on s, none on plain; HEAD probes; /v1/models/{id}."""
    url = f"http://127.0.0.1:{s.port}"
    r = curl(work, url + "/v1/audio/speech", "-X", "OPTIONS", "-H", "Origin: https://app.example",
             "-H", "Access-Control-Request-Method: POST")
    check(r.status == 204 and r.header("access-control-allow-origin") == "https://app.example"
          and "POST" in (r.header("access-control-allow-methods") or ""), f"preflight: {r!r}")
    r = curl(work, url + "/health", "-H", "Origin: https://app.example")
    check(r.header("access-control-allow-origin") == "https://app.example", f"CORS on GET: {r!r}")
    r = curl(work, f"http://127.0.0.1:{plain.port}/health", "-H", "Origin: https://app.example")
    check(r.status == 200 and r.header("access-control-allow-origin") is None,
          f"CORS header without --cors: {r!r}")
    with socket.create_connection(("127.0.0.1", s.port), timeout=30) as c:
        c.sendall(b"HEAD /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        got = b""
        while True:
            b = c.recv(65536)
            if not b:
                break
            got += b
    check(got.startswith(b"HTTP/1.1 200") and got.endswith(b"\r\n\r\n"),
          f"HEAD /health: a body or no 200: {got!r}")
    r = curl(work, f"http://127.0.0.1:{plain.port}/v1/models/tiny", *auth())
    check(r.status == 200 and (r.json() or {}).get("id") == "tiny", f"/v1/models/tiny: {r!r}")
    r = curl(work, f"http://127.0.0.1:{plain.port}/v1/models/other", *auth())
    check_error("/v1/models/other", Response_of(r), 404)


def max_input(kztts, tiny, work):
    """--max-input N: N characters pass, N + 1 are a 400 naming input."""
    with Server(kztts, tiny, work, "max_input", ["--max-input", "50", "--threads", "1"]) as s:
        r = post_json(work, s.port, "/v1/audio/speech", say("pcm", input="\u00e9" * 50))
        check(r.status == 200, f"--max-input 50, 50 characters: {r!r}")
        r = post_json(work, s.port, "/v1/audio/speech", say("pcm", input="a" * 51))
        check_error("--max-input 50, 51 characters", Response_of(r), 400, "input")
        check(s.stop() == 0, "max_input server exit status")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kztts", required=True)
    ap.add_argument("--tiny", required=True)
    ap.add_argument("--base", required=True)
    ap.add_argument("--vd", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    work = tempfile.mkdtemp(dir=a.work)
    keys = os.path.join(work, "keys")
    with open(keys, "w") as f:
        f.write(KEY + "\n")
    vdir = os.path.join(work, "voices")
    base = Server(a.kztts, a.base, work, "base", ["--voices-dir", vdir, "--threads", "1",
                                                  "--cors", "https://app.example"]).start()
    # A drain timeout far above what the long request needs, even in a sanitizer build.
    s = Server(a.kztts, a.tiny, work, "custom", ["--api-key-file", keys, "--parallel", "1",
                                                 "--max-queue", "1", "--threads", "1",
                                                 "--drain-timeout", "600"]).start()
    auth_and_open_routes(s, work)
    metrics_move(s, work)
    models_and_routes(s, work)
    sampling_fields(s, work, a.kztts, a.tiny)
    log_lines(s, work)
    cors_and_probes(base, s, work)
    voice_design(a.kztts, a.vd, work)
    max_input(a.kztts, a.tiny, work)
    voices(base, work, vdir)
    queue_full_and_cancel(s, work)
    first_audio_early(s)
    drain(s, work)
    check(base.alive() and base.healthy(), "base server not healthy at the end")
    check(base.stop() == 0, "base server exit status after SIGTERM")
    finish("test_serve_contract")


if __name__ == "__main__":
    main()
