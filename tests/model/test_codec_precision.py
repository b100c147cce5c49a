"""`--codec-precision bf16` and `winograd` (the codec's fast precisions) on the tiny checkpoint.

Checks: bf16 audio is within SNR >= 40 dB of the f32 audio (the requirement
for the fast precision); it is deterministic: --threads 1 and 2, --chunk 1 and
17 and --official-chunking give the same bytes; it differs from f32 (the bf16 path ran)
at every kernel level, the scalar one included (KZ_ISA=scalar: every kernel table has a
bf16 GEMM, so a precision runs the same at any level), there within 40 dB of f32 too;
`kztts info` names the precision in use; a bad value fails with a message; `kztts bench`
accepts the option.
winograd (Winograd F(m, 7) for the residual units' k7 convs and F(m, 2) for the last
decoder blocks' transposed convs, in fp32, any CPU): SNR >= 60 dB of f32 (fp32 rounding,
far stricter than the 40 dB requirement, so a wrong transform cannot hide), not
the f32 bytes (the path ran), and the same determinism checks as bf16.
winograd-bf16 (winograd's k7 convs, bf16 pointwise convs and projections): SNR >= 40
dB of f32, not the winograd bytes (its bf16 part ran) at the best level and the scalar
one; the same determinism checks.
fast: the bytes of bf16 on a CPU whose bf16 GEMM runs on AMX tiles, of winograd-bf16
where AVX512_BF16 runs on a CPU that is not Intel's and on the AVX2 level, of winograd
elsewhere (AVX-512 without them, NEON, scalar); `kztts
bench` (text and JSON) and `kztts info --codec-precision fast` name the precision in
effect.
"""
import argparse
import math
import os
import shutil
import struct
import subprocess

from testlib import check, finish


def run(cmd):
    return subprocess.run(cmd, capture_output=True, timeout=300)


def snr_db(x, ref):
    err = sum((a - b) ** 2 for a, b in zip(x, ref))
    sig = sum(b * b for b in ref)
    return 999.0 if err == 0 else 10 * math.log10(sig / err)


def decode(a, out, *extra, env=None):
    r = subprocess.run([a.kztts, "decode", "-m", a.tiny, "--codes", a.codes, "-o", out] +
                       list(extra), capture_output=True, timeout=300, env=env)
    check(r.returncode == 0, f"decode {extra}: {r.stderr.decode()}")
    return open(out, "rb").read() if r.returncode == 0 else b""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kztts", required=True)
    ap.add_argument("--tiny", required=True)
    ap.add_argument("--golden", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    a.codes = os.path.join(a.golden, "codes_40.txt")
    out = os.path.join(a.work, "x.f32")

    f32 = decode(a, out, "--threads", "2")
    bf16 = decode(a, out, "--threads", "2", "--codec-precision", "bf16")
    check(len(bf16) == len(f32) == 40 * 1920 * 4, f"lengths {len(bf16)} {len(f32)}")
    x = struct.unpack(f"<{len(bf16) // 4}f", bf16)
    ref = struct.unpack(f"<{len(f32) // 4}f", f32)
    s = snr_db(x, ref)
    print(f"bf16 vs f32: SNR {s:.1f} dB")
    check(s >= 40, f"bf16 vs f32: SNR {s:.1f} dB < 40")

    for extra in (["--threads", "1"], ["--chunk", "1"], ["--chunk", "17"],
                  ["--official-chunking"]):
        same = decode(a, out, "--codec-precision", "bf16", *extra) == bf16
        check(same, f"bf16 with {extra} changes the audio")

    r = run([a.kztts, "info", "-m", a.tiny])
    info = r.stdout.decode()
    has_dot = "avx512bf16" in info and "kernels: avx512\n" in info
    check("codec precision: f32" in info, f"info: {info}")
    check(bf16 != f32, "bf16 gives the f32 bytes")
    scalar = dict(os.environ, KZ_ISA="scalar")
    scalar_bf16 = decode(a, out, "--codec-precision", "bf16", env=scalar)
    check(scalar_bf16 != decode(a, out, env=scalar),
          "bf16 with the scalar kernels gives their f32 bytes: its bf16 GEMM did not run")
    s = snr_db(struct.unpack(f"<{len(scalar_bf16) // 4}f", scalar_bf16), ref)
    print(f"bf16 vs f32, scalar kernels: SNR {s:.1f} dB")
    check(len(scalar_bf16) == len(f32) and s >= 40, f"scalar bf16 vs f32: SNR {s:.1f} dB < 40")

    wino = decode(a, out, "--threads", "2", "--codec-precision", "winograd")
    check(len(wino) == len(f32), f"winograd length {len(wino)}")
    s = snr_db(struct.unpack(f"<{len(wino) // 4}f", wino), ref)
    print(f"winograd vs f32: SNR {s:.1f} dB")
    check(s >= 60, f"winograd vs f32: SNR {s:.1f} dB < 60")
    check(wino != f32, "winograd gives the f32 bytes: the Winograd path did not run")
    for extra in (["--threads", "1"], ["--chunk", "1"], ["--chunk", "17"],
                  ["--official-chunking"]):
        same = decode(a, out, "--codec-precision", "winograd", *extra) == wino
        check(same, f"winograd with {extra} changes the audio")

    wbf = decode(a, out, "--threads", "2", "--codec-precision", "winograd-bf16")
    s = snr_db(struct.unpack(f"<{len(wbf) // 4}f", wbf), ref)
    print(f"winograd-bf16 vs f32: SNR {s:.1f} dB")
    check(len(wbf) == len(f32) and s >= 40, f"winograd-bf16 vs f32: SNR {s:.1f} dB < 40")
    check(wbf != wino, "winograd-bf16 gives the winograd bytes")
    check(decode(a, out, "--codec-precision", "winograd-bf16", env=scalar) !=
          decode(a, out, "--codec-precision", "winograd", env=scalar),
          "winograd-bf16 with the scalar kernels gives the winograd bytes")
    for extra in (["--threads", "1"], ["--chunk", "1"], ["--chunk", "17"],
                  ["--official-chunking"]):
        same = decode(a, out, "--codec-precision", "winograd-bf16", *extra) == wbf
        check(same, f"winograd-bf16 with {extra} changes the audio")
    r = run([a.kztts, "info", "-m", a.tiny, "--codec-precision", "winograd-bf16"])
    check(r.returncode == 0 and b"codec precision: winograd-bf16\n" in r.stdout,
          f"info --codec-precision winograd-bf16 does not name it: {r.stdout.decode()}")

    has_amx = has_dot and "amx-bf16" in info and "amx-permitted" in info
    intel = " intel" in info.split("cpu:", 1)[1].split("\n", 1)[0]
    avx2 = "kernels: avx2\n" in info
    chosen = ("bf16" if has_amx else
              "winograd-bf16" if (has_dot and not intel) or avx2 else "winograd")
    expected = {"bf16": bf16, "winograd-bf16": wbf, "winograd": wino}[chosen]
    fast = decode(a, out, "--threads", "2", "--codec-precision", "fast")
    check(fast == expected, f"fast is not {chosen} on this CPU")
    check(decode(a, out, "--codec-precision", "fast", "--chunk", "3") == fast,
          "fast with --chunk 3 changes the audio")
    r = run([a.kztts, "info", "-m", a.tiny, "--codec-precision", "fast"])
    check(r.returncode == 0 and f"codec precision: {chosen}\n".encode() in r.stdout,
          f"info --codec-precision fast does not name {chosen}: {r.stdout.decode()}")
    r = run([a.kztts, "bench", "-m", a.tiny, "--decoder-only", "--frames", "2", "--repeat", "1",
             "--codec-precision", "fast", "--peak-gflops", "50"])
    check(r.returncode == 0 and f"codec {chosen},".encode() in r.stdout,
          f"bench fast does not say codec {chosen}: {r.stdout.decode()} {r.stderr.decode()}")
    r = run([a.kztts, "bench", "-m", a.tiny, "--decoder-only", "--frames", "2", "--repeat", "1",
             "--peak-gflops", "50", "--json"])
    check(r.returncode == 0 and b'"codec_precision":"f32"' in r.stdout,
          f"bench --json lacks codec_precision f32: {r.stdout.decode()}")

    r = run([a.kztts, "decode", "-m", a.tiny, "--codes", a.codes, "-o", out,
             "--codec-precision", "fp8"])
    check(r.returncode != 0 and b"--codec-precision" in r.stderr, "bad --codec-precision")
    r = run([a.kztts, "info", "-m", a.tiny, "--codec-precision", "fp8"])
    check(r.returncode != 0 and b"--codec-precision" in r.stderr and not r.stdout,
          "info with a bad --codec-precision")
    r = run([a.kztts, "bench", "-m", a.tiny, "--decoder-only", "--frames", "3", "--repeat", "1",
             "--codec-precision", "bf16", "--peak-gflops", "50"])
    check(r.returncode == 0 and b"codec decoder" in r.stdout, f"bench: {r.stderr.decode()}")
    r = run([a.kztts, "bench", "-m", a.tiny, "--decoder-only", "--frames", "3", "--repeat", "1",
             "--codec-precision", "winograd", "--peak-gflops", "50"])
    check(r.returncode == 0 and b"codec decoder" in r.stdout, f"bench winograd: {r.stderr.decode()}")
    finish("test_codec_precision")


if __name__ == "__main__":
    main()
