"""`kztts serve` through the official OpenAI SDK (npm `openai`), the audio checked by
independent decoders.

Flow: an API key file -> Server (tiny CustomVoice, --api-key-file) -> node
openai_client.mjs (every response_format whole and streamed, speeds, SSE through the SDK's
SSE parser, errors through the SDK's error classes, models.list) -> OUT/<case>.<ext> and
manifest.json -> each file decoded by mpg123, opusdec, flac, ffmpeg or sox (pcm by its
size) -> its length against max_new_tokens frames of 80 ms at the speed. The frame count
is checked against the CLI first: `kztts synth --greedy --max-frames N` on the same text
gives N frames, so the server's length has a reference outside the server.
"""
import argparse
import json
import os
import shutil
import subprocess
import tempfile
import wave

from serve_harness import (CONTENT_TYPES, FORMATS, MAGIC, Server, check, decoded_seconds,
                           expected_seconds, finish, length_ok)

FRAMES = 15
INPUT = "Hello world, this is kztts speaking through the OpenAI SDK."
KEY = "sk-kztts-test-0123456789"


def cli_frames(kztts, tiny, work):
    """The frame count of the CLI for the client's text, speaker and frame cap."""
    out = os.path.join(work, "cli.wav")
    r = subprocess.run([kztts, "synth", "-q", "-m", tiny, "-s", "ryan", "--greedy", "--seed", "7",
                        "--max-frames", str(FRAMES), "-o", out, INPUT],
                       capture_output=True, timeout=300)
    check(r.returncode == 0, f"cli synth: {r.stderr!r}")
    with wave.open(out, "rb") as w:
        return w.getnframes() / 1920


def check_audio_case(c, work):
    fmt, speed, name = c["format"], c["speed"], c["name"]
    with open(c["file"], "rb") as f:
        data = f.read()
    check(len(data) > 0 and MAGIC[fmt](data), f"{name}: not {fmt}: {data[:16]!r}")
    secs, err = decoded_seconds(fmt, c["file"], work)
    check(err is None, f"{name}: decode failed: {err}")
    check(length_ok(fmt, secs, c["frames"], speed),
          f"{name}: {secs} s decoded, want {expected_seconds(c['frames'], speed):.3f} s")
    print(f"ok   {name}: {fmt} x{speed} {len(data)} bytes, {secs} s", flush=True)


def check_case(c, work):
    name = c["name"]
    if "thrown" in c:
        check(False, f"{name}: the SDK threw: {c['thrown']}")
        return
    mode = c["mode"]
    if mode in ("whole", "stream"):
        want = CONTENT_TYPES[c["format"]]
        check((c["content_type"] or "").split(";")[0] == want,
              f"{name}: Content-Type {c['content_type']!r} (want {want})")
        if mode == "stream":
            check(c["chunks"] >= 1, f"{name}: no body chunk")
            check(bool(c["request_id"]), f"{name}: no X-Request-Id")
        check_audio_case(c, work)
    elif mode == "sse":
        check((c["content_type"] or "").startswith("text/event-stream"),
              f"{name}: Content-Type {c['content_type']!r}")
        types = c["types"]
        check(len(types) >= 2 and all(t == "speech.audio.delta" for t in types[:-1])
              and types[-1] == "speech.audio.done", f"{name}: event types {types}")
        check(c["bad_base64"] == 0, f"{name}: {c['bad_base64']} deltas not canonical base64")
        u = c["usage"] or {}
        check(u.get("output_tokens") == FRAMES and u.get("input_tokens", 0) > 0
              and u.get("total_tokens") == u.get("input_tokens", 0) + FRAMES,
              f"{name}: usage {u} (want output_tokens {FRAMES}, total = input + output)")
        check_audio_case(c, work)
    elif mode == "error":
        print(f"     {name}: {c}", flush=True)
    elif mode == "models":
        check(c["ids"] == ["tiny"], f"{name}: model ids {c['ids']} (want ['tiny'])")


def check_errors(cases):
    want = {"error_unknown_voice": ("NotFoundError", 404, "voice"),
            "error_unknown_field": ("BadRequestError", 400, "not_a_field"),
            "error_bad_format": ("BadRequestError", 400, "response_format"),
            "error_speed": ("BadRequestError", 400, "speed"),
            "error_bad_key": ("AuthenticationError", 401, None)}
    for name, (cls, status, param) in want.items():
        c = cases.get(name)
        if c is None or "thrown" in c:
            check(False, f"{name}: {c}")
            continue
        check(c["error_class"] == cls and c["status"] == status,
              f"{name}: {c['error_class']} {c['status']} (want {cls} {status})")
        check(bool(c.get("message")) and c.get("type") is not None,
              f"{name}: the SDK found no message/type in the envelope: {c}")
        if param is not None:
            check(c.get("param") == param, f"{name}: param {c.get('param')!r} (want {param!r})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kztts", required=True)
    ap.add_argument("--tiny", required=True)
    ap.add_argument("--node", required=True)
    ap.add_argument("--npm-dir", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    work = tempfile.mkdtemp(dir=a.work)
    out = os.path.join(work, "out")
    os.makedirs(out)

    frames = cli_frames(a.kztts, a.tiny, work)
    check(frames == FRAMES, f"the CLI gave {frames} frames for the client's request (want "
          f"{FRAMES}): the length checks below assume the cap is reached")

    key_file = os.path.join(work, "keys")
    with open(key_file, "w") as f:
        f.write("# test keys\n\nsk-other-key\n" + KEY + "\n")
    args = ["--api-key-file", key_file, "--threads", "1"]
    with Server(a.kztts, a.tiny, work, "openai", args) as s:
        r = subprocess.run([a.node, os.path.join(os.path.dirname(__file__), "openai_client.mjs"),
                            a.npm_dir, f"http://127.0.0.1:{s.port}/v1", KEY, out],
                           capture_output=True, text=True, timeout=600)
        check(r.returncode == 0, f"node exit {r.returncode}: {r.stderr[-2000:]}")
        check(s.healthy(), "server not healthy after the client")
        try:
            with open(os.path.join(out, "manifest.json")) as f:
                cases = json.load(f)
        except (OSError, ValueError) as e:
            check(False, f"no manifest: {e}")
            cases = []
        fmts_seen = {c.get("format") for c in cases if c.get("mode") in ("whole", "stream")}
        check(fmts_seen >= set(FORMATS), f"formats exercised: {sorted(fmts_seen)}")
        for c in cases:
            check_case(c, work)
        check_errors({c["name"]: c for c in cases})
        status = s.stop()
        check(status == 0, f"server exit status {status} after SIGTERM (want 0)")
    finish("test_serve_openai")


if __name__ == "__main__":
    main()
