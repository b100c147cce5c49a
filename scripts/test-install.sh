#!/usr/bin/env bash
# Installs a release build into a temporary prefix and uses it the way a user of the
# library would, so that packaging cannot break unnoticed (.ci/run calls this after the
# release build and its tests).
#
# Usage: scripts/test-install.sh [BUILD_DIR]   (default build; it must be built already)
#
# Steps: `cmake --install BUILD_DIR --prefix TMP`; the installed files must be there (CLI,
# kztts.h, libkztts.a, libkztts.so with its soname links, kztts.pc, the CMake package);
# the shared library must export exactly the functions kztts.h declares (`nm -D`); a small
# C11 program (written below) is built against the installed copy three ways: with
# `pkg-config --cflags --libs kztts` (shared), with find_package(kztts) and kztts::kztts
# (shared), and with kztts::kztts_static (static: the binary must not need libkztts.so);
# each binary runs: kz_abi_version() == KZ_ABI_VERSION, the version, an error status with
# its message, and, when the tiny model fixture of the release tests exists
# (BUILD_DIR/tests/model/tiny), a decode of 3 frames of codes to 3 x samples-per-frame
# samples at the model's sample rate. The program built against a copy of kztts.h with
# another KZ_ABI_VERSION must refuse to run. find_package(kztts 99.0) must fail (version
# file).
# The installed CLI must print its version. Exits non-zero at the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ -f "$build/CMakeCache.txt" ] || { echo "test-install: no build in '$build'" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
fail() { echo "test-install: FAIL: $*" >&2; exit 1; }

echo "-- cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; fail "install"; }
pc=$(find "$prefix" -name kztts.pc)
libdir=$(dirname "$(dirname "$pc")")
for f in "$prefix/bin/kztts" "$prefix/include/kztts.h" "$libdir/libkztts.a" "$libdir/libkztts.so" \
         "$libdir/cmake/kztts/kzttsConfig.cmake" "$libdir/cmake/kztts/kzttsConfigVersion.cmake" \
         "$libdir/cmake/kztts/kzttsTargets.cmake"; do
    [ -e "$f" ] || fail "missing $f"
done
soname=$(objdump -p "$libdir/libkztts.so" | awk '$1 == "SONAME" {print $2}')
[ -e "$libdir/$soname" ] || fail "soname $soname has no file in $libdir"
echo "   installed: bin/kztts, include/kztts.h, libkztts.a, $soname, kztts.pc, CMake package"

echo "-- the shared library exports exactly kztts.h's functions"
nm -D --defined-only "$libdir/libkztts.so" | awk 'NF == 3 {print $3}' | sort -u \
    >"$work/exported.txt"
python3 - "$prefix/include/kztts.h" >"$work/declared.txt" <<'EOF'
import re, sys
header = re.sub(r"/\*.*?\*/|//[^\n]*", "", open(sys.argv[1]).read(), flags=re.S)
for name in sorted(set(re.findall(r"\bKZ_API\b[^;{]*?\b(kz_\w+)\s*\(", header, re.S))):
    print(name)
EOF
[ -s "$work/declared.txt" ] || fail "no KZ_API function found in kztts.h"
if ! diff -u "$work/declared.txt" "$work/exported.txt" >"$work/symbols.diff"; then
    cat "$work/symbols.diff" >&2
    fail "libkztts.so exports differ from kztts.h (- declared only, + exported only)"
fi
echo "   $(wc -l <"$work/exported.txt") functions, no other symbol"

mkdir -p "$work/app"
cat >"$work/app/main.c" <<'EOF'
/* A user's program: checks that it runs with the library its header describes, links
 * kztts, checks an error path, decodes codes when given a model. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kztts.h>

int main(int argc, char **argv) {
    if (kz_abi_version() != KZ_ABI_VERSION) {
        fprintf(stderr, "built against KZ_ABI_VERSION %d, running with the library's %d\n",
                KZ_ABI_VERSION, (int)kz_abi_version());
        return 3;
    }
    printf("kztts %s, ABI %d\n", kz_version(), (int)kz_abi_version());
    kz_model *model = NULL;
    kz_status st = kz_model_load("/nonexistent/kztts-model", NULL, &model);
    if (st == KZ_OK || model != NULL || kz_last_error()[0] == '\0') {
        fprintf(stderr, "loading a missing model did not fail with a message\n");
        return 1;
    }
    printf("missing model: %s: %s\n", kz_status_str(st), kz_last_error());
    if (argc < 2) {
        return 0;
    }
    kz_session *session = NULL;
    if (kz_model_load(argv[1], NULL, &model) != KZ_OK ||
        kz_session_new(model, NULL, &session) != KZ_OK) {
        fprintf(stderr, "%s\n", kz_last_error());
        kz_model_free(model);
        return 1;
    }
    enum { N_FRAMES = 3 };
    size_t n_codes = (size_t)N_FRAMES * (size_t)kz_model_num_codebooks(model);
    int32_t *codes = calloc(n_codes, sizeof *codes);
    for (size_t i = 0; codes && i < n_codes; i++) {
        codes[i] = (int32_t)(i * 37 % (size_t)kz_model_codebook_size(model));
    }
    kz_audio audio = {0};
    st = codes ? kz_decode_all(session, codes, N_FRAMES, NULL, &audio) : KZ_STATUS_OUT_OF_MEMORY;
    size_t want = (size_t)N_FRAMES * (size_t)kz_model_samples_per_frame(model);
    int ok = st == KZ_OK && audio.n_samples == want &&
             audio.sample_rate == kz_model_sample_rate(model);
    printf("decoded %zu samples at %d Hz (want %zu): %s\n", audio.n_samples,
           (int)audio.sample_rate, want, ok ? "ok" : kz_last_error());
    kz_audio_free(&audio);
    free(codes);
    kz_session_free(session);
    kz_model_free(model);
    return ok ? 0 : 1;
}
EOF
cat >"$work/app/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.20)
project(kztts_user C)
set(CMAKE_C_STANDARD 11)
set(CMAKE_C_STANDARD_REQUIRED ON)
set(CMAKE_C_EXTENSIONS OFF)
find_package(kztts 0.1 REQUIRED)
add_executable(app_shared main.c)
target_link_libraries(app_shared PRIVATE kztts::kztts)
add_executable(app_static main.c)
target_link_libraries(app_static PRIVATE kztts::kztts_static)
EOF

model=()
[ -d "$build/tests/model/tiny" ] && model=("$build/tests/model/tiny")
run() { # NAME BINARY: runs it (with the model when there is one) and shows its output
    echo "   $1:"
    "$2" "${model[@]}" | sed 's/^/     /' || fail "$1 failed"
}

echo "-- pkg-config (shared)"
export PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
[ "$(pkg-config --modversion kztts)" = "$("$prefix/bin/kztts" --version | cut -d' ' -f2)" ] \
    || fail "kztts.pc version differs from the CLI's"
# shellcheck disable=SC2046 # pkg-config prints several words on purpose
cc -std=c11 -Wall -Wextra -Wpedantic -Werror -o "$work/app_pc" "$work/app/main.c" \
    $(pkg-config --cflags --libs kztts) || fail "cannot build with pkg-config"
# grep reads all of ldd's output: grep -q would stop early, and ldd's SIGPIPE fail the
# pipeline under pipefail now and then (more libraries, longer output).
LD_LIBRARY_PATH="$libdir" ldd "$work/app_pc" | grep "$libdir/$soname" >/dev/null \
    || fail "the pkg-config build does not load the installed $soname"
LD_LIBRARY_PATH="$libdir" run "pkg-config build" "$work/app_pc"

echo "-- a program built against another KZ_ABI_VERSION refuses to run"
mkdir -p "$work/other_abi"
abi=$(awk '$1 == "#define" && $2 == "KZ_ABI_VERSION" {print $3}' "$prefix/include/kztts.h")
[ -n "$abi" ] || fail "no KZ_ABI_VERSION in the installed kztts.h"
sed "s/^#define KZ_ABI_VERSION $abi\$/#define KZ_ABI_VERSION $((abi + 1))/" \
    "$prefix/include/kztts.h" >"$work/other_abi/kztts.h"
# shellcheck disable=SC2046
cc -std=c11 -I"$work/other_abi" -o "$work/app_other_abi" "$work/app/main.c" \
    $(pkg-config --libs kztts) || fail "cannot build against the edited header"
if LD_LIBRARY_PATH="$libdir" "$work/app_other_abi" >"$work/other_abi.log" 2>&1; then
    fail "a program built with KZ_ABI_VERSION $((abi + 1)) ran with library ABI $abi"
fi
grep -q "KZ_ABI_VERSION $((abi + 1)), running with the library's $abi" "$work/other_abi.log" \
    || fail "the ABI mismatch message: $(cat "$work/other_abi.log")"
echo "   KZ_ABI_VERSION $((abi + 1)) against library ABI $abi: refused"

echo "-- find_package(kztts): kztts::kztts and kztts::kztts_static"
if ! { cmake -S "$work/app" -B "$work/app/build" -DCMAKE_PREFIX_PATH="$prefix" \
           -DCMAKE_C_FLAGS="-Wall -Wextra -Wpedantic -Werror" \
        && cmake --build "$work/app/build"; } >"$work/app.log" 2>&1; then
    cat "$work/app.log"
    fail "cannot build with find_package(kztts)"
fi
ldd "$work/app/build/app_shared" | grep "$libdir/$soname" >/dev/null \
    || fail "app_shared does not load the installed $soname"
if ldd "$work/app/build/app_static" | grep libkztts >/dev/null; then
    fail "app_static needs libkztts.so"
fi
run "kztts::kztts" "$work/app/build/app_shared"
run "kztts::kztts_static" "$work/app/build/app_static"

echo "-- find_package(kztts 99.0) must fail"
sed 's/find_package(kztts 0.1 REQUIRED)/find_package(kztts 99.0 REQUIRED)/' "$work/app/CMakeLists.txt" \
    >"$work/app/CMakeLists.tmp" && mv "$work/app/CMakeLists.tmp" "$work/app/CMakeLists.txt"
if cmake -S "$work/app" -B "$work/app/build99" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null 2>&1; then
    fail "find_package(kztts 99.0) accepted version $(pkg-config --modversion kztts)"
fi

echo "-- the installed CLI"
"$prefix/bin/kztts" --version || fail "bin/kztts --version"
echo "test-install: all passed"
