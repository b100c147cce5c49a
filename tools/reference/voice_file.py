#!/usr/bin/python3
"""Writer and reader of kztts voice files (.kzvoice, docs/VOICE_FILE.md) and the encoder
weights fingerprint a voice carries, so tests can make voice files from the reference's
x-vector and codes and read back what kztts wrote.

Dataflow:
    fingerprint(model_dir): model.safetensors "speaker_encoder.*" and
        speech_tokenizer/model.safetensors "encoder.quantizer.*.codebook.*" (layers below
        encoder_valid_num_quantizers), each group in name order -> per tensor FNV-1a of the
        name mixed with its dims, and the sum of mix64(index << 32 | f32 bits) over its
        values -> folded in order (as src/synth/voice_fingerprint.c)
    write(path, ...): header (72 bytes, little-endian) | x-vector f32 | codes i32 |
        transcript UTF-8 | CRC-32 (zlib's) of everything before it
    read(path) -> dict of the fields (checked as kztts checks them, raising ValueError)

CLI:
    voice_file.py info FILE
    voice_file.py fingerprint MODEL_DIR
    voice_file.py write --model DIR --xvector X.npy [--codes CODES.txt --text T]
                        --seconds S -o FILE
"""
import argparse
import json
import math
import os
import struct
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from reference import safetensors_io as st  # noqa: E402

MAGIC = b"KZVOICE\0"
VERSION = 1
HEADER = struct.Struct("<8sII16siiQdiiII")  # 72 bytes
FLAG_ICL = 1
MAX_ENC_DIM, MAX_CODEBOOKS, MAX_FRAMES, MAX_TEXT = 8192, 64, 7500, 1 << 20
M64 = (1 << 64) - 1


def mix64(x):
    """splitmix64's finalizer on a numpy uint64 array (wrapping arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def mix64_int(x):
    return int(mix64(np.array([x & M64], dtype=np.uint64))[0])


def fnv1a64(text):
    h = 0xCBF29CE484222325
    for b in text.encode():
        h = ((h ^ b) * 0x100000001B3) & M64
    return h


def _values_sum(t):
    """Sum (mod 2^64) of mix64(index << 32 | value bits): floats as f32, others raw bytes."""
    if t.is_floating_point():
        bits = t.detach().float().contiguous().numpy().reshape(-1).view(np.uint32)
    else:
        bits = t.contiguous().numpy().reshape(-1).view(np.uint8)
    idx = np.arange(bits.size, dtype=np.uint64) << np.uint64(32)
    with np.errstate(over="ignore"):
        return int(mix64(idx | bits.astype(np.uint64)).sum(dtype=np.uint64))


def _fold(fp, tensors):
    for name in sorted(tensors):
        t = tensors[name]
        h = fnv1a64(name)
        for d in t.shape:
            h = mix64_int(h ^ int(d))
        fp = mix64_int((mix64_int(fp ^ h) + _values_sum(t)) & M64)
    return fp


def _quantizer_tensor(name, valid):
    if not name.startswith("encoder.quantizer.") or ".codebook." not in name:
        return False
    if ".layers." not in name:
        return True
    rest = name.split(".layers.", 1)[1]
    digits = rest.split(".", 1)[0]
    return not digits.isdigit() or int(digits) < valid


def fingerprint(model_dir):
    """The voice fingerprint of a checkpoint directory (0 when it cannot clone)."""
    main = os.path.join(model_dir, "model.safetensors")
    codec_dir = os.path.join(model_dir, "speech_tokenizer")
    with open(os.path.join(codec_dir, "config.json")) as f:
        valid = json.load(f).get("encoder_valid_num_quantizers", 16)
    spk = st.load(main, prefix="speaker_encoder.")
    header, _, _ = st.read_header(os.path.join(codec_dir, "model.safetensors"))
    names = [n for n in header if _quantizer_tensor(n, valid)]
    if not spk or not names:
        return 0
    quant = st.load(os.path.join(codec_dir, "model.safetensors"), names=names)
    fp = _fold(_fold(0x9E3779B97F4A7C15, spk), quant)
    return fp or 1


def encode(xvector, fingerprint_value, ref_seconds, codes=None, text=None, sample_rate=24000,
           model_type="base", version=VERSION, flags=None, reserved=0):
    """The bytes of a voice file. codes [frames, codebooks] ints and text for ICL, both None
    for an x-vector-only voice. version/flags/reserved let tests write odd files."""
    xv = np.asarray(xvector, dtype="<f4").reshape(-1)
    icl = codes is not None
    c = np.asarray(codes, dtype="<i4") if icl else np.zeros((0, 0), dtype="<i4")
    tb = text.encode() if icl else b""
    head = HEADER.pack(MAGIC, version, (FLAG_ICL if icl else 0) if flags is None else flags,
                       model_type.encode().ljust(16, b"\0"), xv.size, sample_rate,
                       fingerprint_value, ref_seconds, c.shape[1] if icl else 0,
                       c.shape[0] if icl else 0, len(tb), reserved)
    body = head + xv.tobytes() + c.tobytes() + tb
    return body + struct.pack("<I", zlib.crc32(body))


def write(path, *args, **kwargs):
    data = encode(*args, **kwargs)
    tmp = path + ".partial"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def parse(data):
    """The fields of a voice file's bytes (checked as kztts checks them)."""
    if len(data) < 8 or data[:8] != MAGIC:
        raise ValueError("not a kztts voice file")
    if len(data) < HEADER.size:
        raise ValueError("truncated header")
    (_, version, flags, mtype, enc_dim, rate, fp, secs, n_books, n_frames, n_text,
     reserved) = HEADER.unpack_from(data)
    if version != VERSION:
        raise ValueError(f"format version {version}")
    icl = bool(flags & FLAG_ICL)
    if flags & ~FLAG_ICL or reserved or not 1 <= enc_dim <= MAX_ENC_DIM or fp == 0:
        raise ValueError("bad header")
    if not (math.isfinite(secs) and 0 < secs <= 600) or not 8000 <= rate <= 384000:
        raise ValueError("bad header")
    if icl and not (1 <= n_books <= MAX_CODEBOOKS and 1 <= n_frames <= MAX_FRAMES
                    and 1 <= n_text <= MAX_TEXT):
        raise ValueError("bad ICL fields")
    if not icl and (n_books or n_frames or n_text):
        raise ValueError("bad x-vector-only fields")
    want = HEADER.size + 4 * enc_dim + 4 * n_frames * n_books + n_text + 4
    if len(data) != want:
        raise ValueError(f"{len(data)} bytes, header says {want}")
    (crc,) = struct.unpack_from("<I", data, want - 4)
    if crc != zlib.crc32(data[:want - 4]):
        raise ValueError("checksum mismatch")
    at = HEADER.size
    xv = np.frombuffer(data, dtype="<f4", count=enc_dim, offset=at).copy()
    at += 4 * enc_dim
    codes = np.frombuffer(data, dtype="<i4", count=n_frames * n_books, offset=at).copy()
    at += 4 * n_frames * n_books
    text = data[at:at + n_text].decode("utf-8")
    if not np.isfinite(xv).all() or (codes < 0).any() or (codes > 65535).any() or "\0" in text:
        raise ValueError("bad values")
    return dict(format_version=version, icl=icl, model_type=mtype.rstrip(b"\0").decode(),
                enc_dim=enc_dim, sample_rate=rate, fingerprint=fp, ref_seconds=secs,
                n_codebooks=n_books, n_ref_frames=n_frames, xvector=xv,
                codes=codes.reshape(n_frames, n_books), text=text)


def read(path):
    with open(path, "rb") as f:
        return parse(f.read())


def _read_codes(path):
    with open(path) as f:
        return [[int(v) for v in line.split()] for line in f if line.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("info").add_argument("file")
    sub.add_parser("fingerprint").add_argument("model")
    w = sub.add_parser("write")
    w.add_argument("--model", required=True)
    w.add_argument("--xvector", required=True, help=".npy of enc_dim floats")
    w.add_argument("--codes", help="codes file (ICL)")
    w.add_argument("--text", help="transcript (ICL)")
    w.add_argument("--seconds", type=float, required=True)
    w.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    if a.cmd == "info":
        v = read(a.file)
        for k, val in v.items():
            if k not in ("xvector", "codes"):
                print(f"{k}: {val:016x}" if k == "fingerprint" else f"{k}: {val}")
    elif a.cmd == "fingerprint":
        print(f"{fingerprint(a.model):016x}")
    else:
        if (a.codes is None) != (a.text is None):
            ap.error("--codes and --text go together (ICL)")
        codes = _read_codes(a.codes) if a.codes else None
        write(a.out, np.load(a.xvector), fingerprint(a.model), a.seconds, codes, a.text)


if __name__ == "__main__":
    main()
