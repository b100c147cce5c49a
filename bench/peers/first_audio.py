#!/usr/bin/env python3
"""first_audio.py - times a TTS command that writes PCM to stdout, from launch.

Usage: first_audio.py NAME HEADER_BYTES STDERR_LOG -- COMMAND...

Starts COMMAND, reads its stdout as 16-bit mono PCM at 24 kHz after HEADER_BYTES bytes
of header (44 for a WAV, 0 for raw), and prints one line: the time from launch to the
first audio sample, to the end of the stream, the frames of 80 ms received, the wall
time per frame and the wall-clock real-time factor (model load included). The
command's stderr goes to STDERR_LOG. Every engine is measured the same way by this
one reader, whatever timings it prints itself.
"""
import subprocess
import sys
import time

SAMPLES_PER_FRAME = 1920  # 80 ms at 24 kHz


def main():
    if len(sys.argv) < 6 or sys.argv[4] != "--":
        sys.exit(__doc__)
    name, header, log, cmd = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[5:]
    t0 = time.monotonic()
    with open(log, "wb") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err)
        n = 0
        t_first = None
        while True:
            b = p.stdout.read1(1 << 16)
            if not b:
                break
            n += len(b)
            if t_first is None and n >= header + 2:
                t_first = time.monotonic()
        p.wait()
    t_end = time.monotonic()
    frames = max(n - header, 0) / 2 / SAMPLES_PER_FRAME
    first = f"{1000 * (t_first - t0):7.0f} ms" if t_first else "   none   "
    per = 1000 * (t_end - t0) / frames if frames else float("nan")
    rtf = (t_end - t0) / (frames * 0.08) if frames else float("nan")
    print(f"{name:14s} exit {p.returncode}  first audio {first}  end {t_end - t0:6.1f} s  "
          f"{frames:5.1f} frames  {per:6.1f} ms/frame  RTF (wall) {rtf:.2f}", flush=True)
    sys.exit(p.returncode)


if __name__ == "__main__":
    main()
