#!/usr/bin/env bash
# Installs the Debian packages kztts needs to build and test (run as root, or with sudo).
# Node.js and npm (for the tokenizer peer tests) are installed only when missing: some
# machines carry a vendor Node.js build that bundles npm and conflicts with Debian's npm.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
packages=(build-essential cmake pkg-config libcjson-dev libsndfile1-dev libsoxr-dev
          libcurl4-openssl-dev libssl-dev libutf8proc-dev libpcre2-dev
          python3 python3-numpy python3-torch python3-yaml clang
          libmicrohttpd-dev libmp3lame-dev libopusenc-dev libopus-dev libvo-aacenc-dev
          libflac-dev libsonic-dev
          nginx curl wrk mpg123 opus-tools flac sox ffmpeg strace)
if ! command -v node >/dev/null 2>&1; then packages+=(nodejs); fi
if ! command -v npm >/dev/null 2>&1; then packages+=(npm); fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${packages[@]}"
