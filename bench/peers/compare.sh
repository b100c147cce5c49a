#!/bin/bash
# compare.sh - kztts against two peer Qwen3-TTS engines on this machine, one round.
#
#   bench/peers/compare.sh 8|4 [TAG]
#
# Runs the same sentence, speaker and seed through kztts (GGUF q8_0 / q4_0), the pure-C
# engine of gabriele-mastrapasqua/qwen3-tts (--int8 / --int4) and ServeurpersoCom's
# qwentts.cpp (Q8_0 / Q4_K_M GGUFs), each on 2 threads, about 100 frames, one after the
# other, and prints first_audio.py's line for each (first audio and wall time from
# launch, model load included). Alternate rounds: the host's load drifts. How the peers
# were built and their models made: bench/peers/README.md. Paths come from the
# environment (defaults in brackets):
#   KZTTS [build/kztts]  KZ_Q8 / KZ_Q4: kztts GGUFs with tokenizer files
#   KZ_CODEC [f32]: kztts's --codec-precision (fast: its bf16 / Winograd codec)
#   PEER1 [/tmp/kz/peer1]  PEER1_MODEL: HF directory with vocab.json and merges.txt
#   PEER2 [/tmp/kz/peer2]  PEER2_MODELS: directory of its GGUFs  SHIM: nprocs_shim.so
set -euo pipefail
bits=${1:?usage: compare.sh 8|4 [TAG]}
tag=${2:-run}
here=$(cd "$(dirname "$0")" && pwd)
KZTTS=${KZTTS:-$here/../../build/kztts}
PEER1=${PEER1:-/tmp/kz/peer1}
PEER2=${PEER2:-/tmp/kz/peer2}
PEER2_MODELS=${PEER2_MODELS:-/tmp/kz/peer2_models}
SHIM=${SHIM:-/tmp/kz/peers/nprocs_shim.so}
LOGS=${LOGS:-/tmp/kz/peers/logs}
KZ_CODEC=${KZ_CODEC:-f32}
TEXT="The quick brown fox jumps over the lazy dog near the river bank."
case $bits in
8) kz=${KZ_Q8:?set KZ_Q8}; p1=--int8; p2=Q8_0 ;;
4) kz=${KZ_Q4:?set KZ_Q4}; p1=--int4; p2=Q4_K_M ;;
*) echo "compare.sh: bits must be 8 or 4" >&2; exit 2 ;;
esac
mkdir -p "$LOGS"
time_it() { python3 "$here/first_audio.py" "$@" || true; }
time_it "kztts-q$bits-$KZ_CODEC" 44 "$LOGS/kztts_q${bits}_$tag.log" -- "$KZTTS" synth -m "$kz" \
    -s ryan -l english --frames 100 --threads 2 --seed 42 --stream \
    --codec-precision "$KZ_CODEC" -o - "$TEXT"
time_it "peer1-q$bits" 0 "$LOGS/peer1_q${bits}_$tag.log" -- bash -c "cd '$PEER1' && exec \
    ./qwen_tts -d '${PEER1_MODEL:?set PEER1_MODEL}' -s ryan -l English -j 2 --max-tokens 100 \
    --seed 42 $p1 --stdout --text '$TEXT'"
time_it "peer2-q$bits" 44 "$LOGS/peer2_q${bits}_$tag.log" -- bash -c "echo '$TEXT' | \
    LD_PRELOAD='$SHIM' exec '$PEER2/build/qwen-tts' \
    --model '$PEER2_MODELS/qwen-talker-0.6b-customvoice-$p2.gguf' \
    --codec '$PEER2_MODELS/qwen-tokenizer-12hz-$p2.gguf' --speaker ryan --lang English \
    --seed 42 --max-new 100 -o -"
