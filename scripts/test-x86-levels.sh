#!/usr/bin/env bash
# Runs the x86-64 release build under qemu-user as CPUs without AVX-512, so that what the
# library picks by CPUID on such machines is tested on this AVX-512 host too: the kernel
# level (dispatch.c) and the load-time loops built per level with target_clones
# (kernels.h KZ_CLONES: the codec's bf16 packing and Winograd transforms).
#
# Steps, for qemu's Haswell (AVX2 + FMA, no AVX-512: the `avx2` level) and Nehalem (SSE4.2,
# no AVX: the `scalar` level): `kztts info` must report that level and its sub-level (both
# models are Intel's by CPUID: the avx2 table prefetches into L2); the unit tests whose
# kernels or loops depend on the CPU must pass (kernel parity, quantized matvecs, GEMMs,
# the bf16 packing against kz_bf16_round for every bit pattern, Winograd, the conversion
# list, the pool); and, with the tiny model fixture of the release tests
# (build/tests/model, written by .ci/run's ctest), `kztts decode` in the bf16, winograd and
# winograd-bf16 precisions (40 frames) must give the same bytes as the native run capped to
# the same level (KZ_ISA), i.e. the AVX2 and baseline builds of the Winograd transforms and
# bf16 packing the same weights as the AVX-512 one (and the level's bf16 GEMM, the scalar
# definition or the FMAs on widened bf16, the same sums). Exits non-zero on the first
# failure.
#
# QEMU's TCG emulates AVX2 since 7.2 (Debian 12) but not AVX-512, hence these two models.
# Environment: KZ_X86_BUILD (release build folder, default build), KZ_X86_FIXTURE (folder
# holding tiny/ and golden/, default build/tests/model).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
if [ "$(uname -m)" != x86_64 ]; then
    echo "x86 levels: not an x86-64 host, skipped"
    exit 0
fi
build=${KZ_X86_BUILD:-build}
fixture=${KZ_X86_FIXTURE:-build/tests/model}
if ! command -v qemu-x86_64 >/dev/null; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends qemu-user
fi
tests=(test_kernels test_quant test_matmul test_gemm_rows test_gemm_bf16 test_winograd
       test_conv_convert test_threadpool test_matvec_batch)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

run_cpu() {
    local cpu=$1 level=$2 sublevel=$3
    echo "== x86 as $cpu (level $level, sub-level $sublevel) under qemu-x86_64"
    local info
    info=$(qemu-x86_64 -cpu "$cpu" "$build/kztts" info -m "$fixture/tiny" 2>/dev/null)
    if ! grep -qx "kernels: $level" <<<"$info" ||
        ! grep -qx "kernel sub-level: $sublevel" <<<"$info"; then
        echo "FAIL: $cpu: kztts info reports '$(grep '^kernel' <<<"$info" | tr '\n' ' ')'," \
            "want '$level', '$sublevel'"
        return 1
    fi
    for t in "${tests[@]}"; do
        if ! qemu-x86_64 -cpu "$cpu" "$build/tests/$t" >"$work/$t.log" 2>&1; then
            echo "FAIL: $cpu: $t"
            tail -20 "$work/$t.log"
            return 1
        fi
        echo "   $t: $(tail -1 "$work/$t.log")"
    done
    local codes="$fixture/golden/codes_40.txt" p
    for p in bf16 winograd winograd-bf16; do
        KZ_ISA=$level "$build/kztts" decode -m "$fixture/tiny" --codes "$codes" \
            --codec-precision $p -o "$work/native.f32" 2>/dev/null
        qemu-x86_64 -cpu "$cpu" "$build/kztts" decode -m "$fixture/tiny" --codes "$codes" \
            --codec-precision $p -o "$work/qemu.f32" 2>/dev/null
        if ! cmp -s "$work/native.f32" "$work/qemu.f32"; then
            echo "FAIL: $cpu: $p decode differs from the native run at level $level"
            return 1
        fi
        echo "   $p decode of 40 frames: the same bytes as native KZ_ISA=$level"
    done
}

run_cpu Haswell avx2 "avx2 (prefetch into L2)"
run_cpu Nehalem scalar scalar
echo "x86 level tests passed in $(( $(date +%s) - start )) s"
