#!/usr/bin/env bash
# Cross-builds every target (library, CLI, tests, benchmarks) for 64-bit ARM with
# warnings as errors and runs the kernel parity tests (tests/unit/test_kernels.c,
# test_matmul.c, test_quant.c, test_gemm_rows.c, test_gemm_bf16.c, test_matvec_batch.c;
# test_winograd.c and the thread pool's test_threadpool.c with CMake) under qemu-user, so
# an x86 change cannot break the NEON kernels, the pool's handshakes as aarch64 code or
# the aarch64 build unnoticed. Exits non-zero if a build or a test fails.
#
# Steps: install what is missing (Debian, as root or with sudo): the cross gcc/g++,
# qemu-user, and the arm64 -dev packages of the dependencies through Debian multiarch
# (dpkg --add-architecture arm64); configure build-aarch64/ with
# cmake/aarch64-linux-gnu.cmake; build all targets; run the tests under
# qemu-aarch64. Then, if the host build left the tiny model fixture (build/tests/model,
# written by the model tests of .ci/run), end-to-end checks: the aarch64 CLI decodes
# 40 frames at the best level (NEON), in f32 and in the winograd precision, and must
# match the PyTorch waveform (SNR >= 60 dB), and in winograd-bf16 (the NEON bf16 GEMM;
# SNR >= 40 dB, the fast precisions' bound),
# and `kztts info` must name the kernel sub-level the probe picks on qemu's "max" CPU
# (neon-i8mm), a Cortex-A76 (neon-dotprod) and a Cortex-A53 (neon); it quantizes the tiny
# checkpoint to q8_0 and q4_0 GGUFs and speaks 8 greedy frames from each on "max" (i8mm:
# SMMLA for two or more tokens, the prompt on the int8 kernels), the Cortex-A76 (dotprod:
# the SDOT kernels, the prompt on the f32 GEMM path) and the Cortex-A53 (neither: the
# baseline NEON kernels), 1 and 2 threads: the runs
# of each prompt path must give the same codes, the same audio and the same logits
# (`kztts quality`'s errors against the checkpoint): max's two, and A76's and A53's four.
#
# If the arm64 packages cannot be installed (no multiarch), or with KZ_AARCH64_DIRECT=1,
# the kernels, dispatch.c, error.c and the kernel tests are compiled directly with
# aarch64-linux-gnu-gcc instead (they need only libc, libm and pthread) and the
# end-to-end check is skipped.
# Environment: KZ_AARCH64_BUILD (build folder, default build-aarch64), KZ_AARCH64_FIXTURE
# (folder holding tiny/ and golden/, default build/tests/model).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
build=${KZ_AARCH64_BUILD:-build-aarch64}
fixture=${KZ_AARCH64_FIXTURE:-build/tests/model}
tests=(test_kernels test_matmul test_quant test_gemm_rows test_gemm_bf16 test_matvec_batch)

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'ok installed'; }
updated=0
apt_install() {
    if [ "$updated" = 0 ]; then
        $SUDO apt-get update -qq
        updated=1
    fi
    $SUDO apt-get install -y -qq --no-install-recommends "$@"
}

echo "== aarch64: tools"
host=()
for p in gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross cmake pkg-config; do
    installed "$p" || host+=("$p")
done
if ! command -v qemu-aarch64 >/dev/null && ! command -v qemu-aarch64-static >/dev/null; then
    host+=(qemu-user)
fi
if [ ${#host[@]} -gt 0 ]; then apt_install "${host[@]}"; fi

# The library's dependencies and, because the top-level CMakeLists finds them at
# configure time, the CLI's (sndfile, curl, crypto, the HTTP server, the audio encoders).
# Multiarch keeps arm64 and amd64 versions of shared packages equal, so this may also
# update a few host libraries.
arm=(libcjson-dev libutf8proc-dev libpcre2-dev libsndfile1-dev libsoxr-dev libcurl4-openssl-dev
     libssl-dev libmicrohttpd-dev libmp3lame-dev libopusenc-dev libopus-dev libvo-aacenc-dev
     libflac-dev libsonic-dev)
mode=cmake
if [ "${KZ_AARCH64_DIRECT:-0}" = 1 ]; then
    mode=direct
else
    missing=()
    for p in "${arm[@]}"; do
        installed "$p:arm64" || missing+=("$p:arm64")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "== aarch64: installing arm64 libraries (multiarch): ${missing[*]}"
        if ! dpkg --print-foreign-architectures | grep -qx arm64; then
            $SUDO dpkg --add-architecture arm64
            updated=0
        fi
        if ! apt_install "${missing[@]}"; then
            echo "arm64 packages not installable here: building the kernel tests directly"
            mode=direct
        fi
    fi
fi

# Loader and libc from one glibc build: multiarch libc6:arm64 if present, else the
# cross sysroot (see cmake/aarch64-linux-gnu.cmake: mixing them hangs pthread_create).
qemu=(qemu-aarch64)
command -v qemu-aarch64 >/dev/null || qemu=(qemu-aarch64-static)
if [ ! -e /lib/ld-linux-aarch64.so.1 ]; then qemu+=(-L /usr/aarch64-linux-gnu); fi

echo "== aarch64: build ($mode)"
if [ "$mode" = cmake ]; then
    e2e=0
    if [ -f "$fixture/tiny/config.json" ] && [ -f "$fixture/golden/codes_40.txt" ] &&
        command -v python3 >/dev/null; then
        e2e=1
    fi
    cmake -S . -B "$build" -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/aarch64-linux-gnu.cmake" \
        -DCMAKE_BUILD_TYPE=Release -DKZ_BUILD_TESTS=ON -DKZ_WERROR=ON >/dev/null
    cmake --build "$build" -j2
    bin="$build/tests"
    # The codec's Winograd convs over the NEON mix_rows and GEMM; the pool's lock-free
    # handshakes and split-mode stealing as aarch64 code (under qemu a store may pass a
    # later load, which x86 builds never see).
    tests+=(test_winograd test_threadpool)
else
    # The kernel tests' closure: kernels (scalar + NEON), dispatch, error/log; the CMake
    # build's warning and float flags.
    e2e=0
    bin="$build/direct"
    mkdir -p "$bin"
    src=(src/kernels/dispatch.c src/kernels/ref/*.c src/kernels/arm/*_neon.c src/runtime/error.c)
    flags=(-std=c11 -O3 -DNDEBUG -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes
           -Wno-unused-parameter -Werror -ffp-contract=off -fno-math-errno -fno-schedule-insns
           -D_POSIX_C_SOURCE=200809L -DKZ_HAVE_ARM=1 -Iinclude -Isrc -Itests)
    for t in "${tests[@]}"; do
        aarch64-linux-gnu-gcc "${flags[@]}" "${src[@]}" "tests/unit/$t.c" -o "$bin/$t" -lm -pthread
    done
fi

echo "== aarch64: run under ${qemu[*]}"
failed=0
for t in "${tests[@]}"; do
    echo "-- $t"
    if ! "${qemu[@]}" "$bin/$t"; then
        echo "FAILED: $t (aarch64)"
        failed=1
    fi
done

if [ "$e2e" = 1 ]; then
    for precision in f32 winograd winograd-bf16; do
    echo "-- kztts decode, 40 frames of the tiny checkpoint, best level (neon), $precision"
    out="$build/decode_40_$precision.f32"
    if ! "${qemu[@]}" "$build/kztts" decode -m "$fixture/tiny" --codes \
        "$fixture/golden/codes_40.txt" -o "$out" --threads 2 --codec-precision "$precision" ||
        ! python3 - "$out" "$fixture/golden/golden_40.safetensors" "$precision" <<'EOF'; then
import json, math, struct, sys
pcm = open(sys.argv[1], "rb").read()
pcm = struct.unpack(f"<{len(pcm) // 4}f", pcm)
data = open(sys.argv[2], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
b, e = json.loads(data[8:8 + n])["wav"]["data_offsets"]
ref = struct.unpack(f"<{(e - b) // 4}f", data[8 + n + b:8 + n + e])
err = sum((x - y) ** 2 for x, y in zip(pcm, ref))
snr = 999.0 if err == 0 else 10 * math.log10(sum(y * y for y in ref) / err)
print(f"samples {len(pcm)} (reference {len(ref)}), SNR vs PyTorch {snr:.1f} dB")
want = 40 if sys.argv[3].endswith("bf16") else 60  # bf16 work: the fast precision's bound
sys.exit(0 if len(pcm) == len(ref) and snr >= want else 1)
EOF
        echo "FAILED: kztts decode $precision (aarch64)"
        failed=1
    fi
    done
    # The sub-level each CPU model gets from the probe (its hwcaps).
    for pair in max:neon-i8mm cortex-a76:neon-dotprod cortex-a53:neon; do
        cpu=${pair%%:*} want=${pair#*:}
        got=$("${qemu[@]}" -cpu "$cpu" "$build/kztts" info -m "$fixture/tiny" 2>/dev/null |
            sed -n 's/^kernel sub-level: //p')
        echo "-- kztts info on $cpu: kernel sub-level '$got'"
        if [ "$got" != "$want" ]; then
            echo "FAILED: kernel sub-level on $cpu is '$got', want '$want' (aarch64)"
            failed=1
        fi
    done
    # Quantized talker and code predictor end to end: the q8_0 / q4_0 kernels take their
    # SMMLA variant for 2+ tokens and the int8 prompt path on a CPU with i8mm (qemu's
    # "max"), their SDOT variant with dotprod (Cortex-A76) and the baseline one without
    # either (Cortex-A53). The A76 and A53 runs share the f32 GEMM prompt path: codes and
    # audio must be the same bits on both and on 1 or 2 threads; max's two runs must
    # agree with each other (the kernels' bits are held equal by test_quant).
    for type in q8_0 q4_0; do
        echo "-- kztts synth, tiny $type GGUF, with i8mm, dotprod or neither, 1 and 2 threads"
        gguf="$build/tiny_$type.gguf"
        if ! "${qemu[@]}" "$build/kztts" quantize -m "$fixture/tiny" -o "$gguf" --type "$type" \
            >/dev/null; then
            echo "FAILED: kztts quantize --type $type (aarch64)"
            failed=1
            continue
        fi
        ref=""
        for run in max:1 max:2 cortex-a76:1 cortex-a76:2 cortex-a53:1 cortex-a53:2; do
            cpu=${run%:*} threads=${run#*:} out="$build/synth_${type}_${cpu}_$threads"
            if ! "${qemu[@]}" -cpu "$cpu" "$build/kztts" synth -m "$gguf" -s ryan \
                --token-ids 9707,1879,13 --greedy --frames 8 --threads "$threads" \
                --format f32 -o "$out.f32" --dump-codes "$out.codes"; then
                echo "FAILED: kztts synth $type on $cpu, $threads threads (aarch64)"
                failed=1
                continue
            fi
            # Codes rarely show a last-bit difference of the logits; `kztts quality` does:
            # its relative errors against the checkpoint (timings cut off) are kept too.
            if ! "${qemu[@]}" -cpu "$cpu" "$build/kztts" quality -m "$gguf" --ref "$fixture/tiny" \
                -s ryan --token-ids 9707,1879,13 --frames 8 --threads "$threads" --json |
                sed 's/,"ref_ms".*//' >"$out.quality"; then
                echo "FAILED: kztts quality $type on $cpu, $threads threads (aarch64)"
                failed=1
                continue
            fi
            sum=$(cat "$out.codes" "$out.f32" "$out.quality" | md5sum)
            echo "   $cpu, $threads threads: $(wc -l <"$out.codes") frames, codes + audio +" \
                "logit errors $sum"
            [ "$run" = cortex-a76:1 ] && ref="" # the f32 GEMM prompt path from here on
            ref=${ref:-$sum}
            if [ "$sum" != "$ref" ]; then
                echo "FAILED: $type on $cpu with $threads threads differs from the first run" \
                    "of its prompt path"
                failed=1
            fi
        done
    done
else
    echo "-- end-to-end decode skipped (no fixture in $fixture or direct build)"
fi
result=$([ $failed = 0 ] && echo passed || echo FAILED)
echo "aarch64 tests $result in $(( $(date +%s) - start )) s"
exit $failed
