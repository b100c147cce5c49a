#!/usr/bin/env bash
# Installs the Debian packages kztts needs to build and test (run as root, or with sudo).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
    build-essential cmake pkg-config libcjson-dev libsndfile1-dev \
    libcurl4-openssl-dev libssl-dev \
    libutf8proc-dev libpcre2-dev nodejs npm \
    python3 python3-numpy python3-torch clang
