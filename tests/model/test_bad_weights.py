"""Model files whose tensors are well-formed but wrong, for a checkpoint directory and for a
GGUF file alike.

  - more layers (heads, blocks) in the file than its config says: the loaders look tensors up
    by the config's counts, so the extra ones would be silently ignored;
  - a NaN or an Inf among the weights (bf16 and f32 safetensors; f16, bf16 and f32 tensors and
    q8_0 / q4_0 block scales in a GGUF): the SIMD activations may turn it into finite garbage,
    so the load refuses it, naming the file, the tensor and the element (block);
each fails to load with one line and exit status 1; a bad row of the text embedding (read a
row at a time, not scanned at load) fails the synthesis that reads it, and `quantize`, which
reads all of it. Finite weights whose
arithmetic overflows (norm weights at the largest bf16, a codec conv at the largest f32) end
synth and decode with one line saying where non-finite values appeared, exit status 1, no
output file and not a byte of audio on stdout.
Each broken file is a copy of a tiny checkpoint (or of a GGUF quantized from it) with one
change; the unchanged copies work, so a check that refuses everything fails here too.
"""
import argparse
import json
import os
import shutil
import struct
import subprocess

from testlib import check, edit_json, finish, link_copy

# bf16 in the tiny checkpoint; f16 / q8_0 in its GGUFs
TALKER_W = "talker.model.layers.1.mlp.up_proj.weight"
CP_HEAD = "talker.code_predictor.lm_head.0.weight"
TEXT_EMB = "talker.model.text_embedding.weight"  # [151936, 64], read a row at a time
# f32
CODEC_W = "decoder.pre_transformer.layers.0.mlp.up_proj.weight"
FINAL_CONV = "decoder.decoder.6.conv."  # the codec's last conv (4 upsampling blocks)
ENCODER_W = "encoder.encoder_transformer.layers.0.mlp.fc1.weight"


def run_info(kztts, model):
    r = subprocess.run([kztts, "info", "-m", model], capture_output=True, text=True, timeout=120)
    return r.returncode, r.stderr.strip()


def expect_load_error(kztts, name, model, expect):
    rc, err = run_info(kztts, model)
    check(rc == 1, f"{name}: exit status {rc}, want 1")
    for word in expect:
        check(word in err, f"{name}: message {err!r} lacks {word!r}")
    check(len(err.splitlines()) == 1, f"{name}: expected one line, got {err!r}")
    print(f"ok   {name}: {err}")


def expect_loads(kztts, name, model):
    rc, err = run_info(kztts, model)
    check(rc == 0, f"{name}: the unchanged model fails to load: {err}")


def synth_args(model):
    return ["synth", "-m", model, "-s", "ryan", "--token-ids", "5,6,7", "--frames", "3"]


def decode_args(model, codes):
    return ["decode", "-m", model, "--codes", codes]


def expect_run_error(kztts, name, args, expect, work):
    """Runs kztts args to a file and to stdout: exit 1, one line, nothing written."""
    out_dir = os.path.join(work, "out_" + name.replace(" ", "_"))
    os.makedirs(out_dir, exist_ok=True)
    r = subprocess.run([kztts] + args + ["-o", os.path.join(out_dir, "a.wav")],
                       capture_output=True, text=True, timeout=300)
    err = r.stderr.strip()
    check(r.returncode == 1, f"{name}: exit status {r.returncode}, want 1 ({err})")
    for word in expect:
        check(word in err, f"{name}: message {err!r} lacks {word!r}")
    check(len(err.splitlines()) == 1, f"{name}: expected one line, got {err!r}")
    check(os.listdir(out_dir) == [], f"{name}: output left behind: {os.listdir(out_dir)}")
    r = subprocess.run([kztts] + args + ["-o", "-", "--format", "f32"], capture_output=True,
                       timeout=300)
    check(r.returncode == 1 and r.stdout == b"",
          f"{name} to stdout: exit {r.returncode}, {len(r.stdout)} bytes of audio")
    print(f"ok   {name}: {err}")


def expect_runs(kztts, name, args):
    r = subprocess.run([kztts] + args + ["-o", "-", "--format", "f32"], capture_output=True,
                       timeout=300)
    check(r.returncode == 0 and len(r.stdout) > 0, f"{name}: {r.stderr.decode().strip()}")


# ---- safetensors --------------------------------------------------------------------------

def st_poke(path, tensor, element, value_bytes):
    """Rewrites one element of a safetensors tensor (the file is replaced, not edited through
    a symlink)."""
    with open(path, "rb") as f:
        data = bytearray(f.read())
    n = struct.unpack("<Q", data[:8])[0]
    info = json.loads(data[8:8 + n])[tensor]
    at = 8 + n + info["data_offsets"][0] + element * len(value_bytes)
    data[at:at + len(value_bytes)] = value_bytes
    os.unlink(path)
    with open(path, "wb") as f:
        f.write(bytes(data))


def st_fill(path, tensor, value_bytes):
    """Sets every element of a safetensors tensor to one value."""
    with open(path, "rb") as f:
        data = bytearray(f.read())
    n = struct.unpack("<Q", data[:8])[0]
    begin, end = json.loads(data[8:8 + n])[tensor]["data_offsets"]
    data[8 + n + begin:8 + n + end] = value_bytes * ((end - begin) // len(value_bytes))
    os.unlink(path)
    with open(path, "wb") as f:
        f.write(bytes(data))


# ---- GGUF -----------------------------------------------------------------------------------

FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


class Gguf:
    """A GGUF v3 file split into its parts: metadata entries as raw bytes by key, the tensor
    infos as raw bytes with name, type and offset, and the data section."""

    def __init__(self, path):
        with open(path, "rb") as f:
            d = f.read()
        self.magic_version = d[:8]
        n_tensors, n_kv = struct.unpack("<QQ", d[8:24])
        pos = 24
        self.kv = []  # (key, raw bytes of the whole entry)
        for _ in range(n_kv):
            start = pos
            key, pos = self._string(d, pos)
            pos = self._skip(d, struct.unpack("<I", d[pos:pos + 4])[0], pos + 4)
            self.kv.append((key, d[start:pos]))
        self.tensors = []  # (name, type, offset, raw bytes of the info)
        for _ in range(n_tensors):
            start = pos
            name, pos = self._string(d, pos)
            n_dims = struct.unpack("<I", d[pos:pos + 4])[0]
            pos += 4 + 8 * n_dims
            ttype, offset = struct.unpack("<IQ", d[pos:pos + 12])
            pos += 12
            self.tensors.append((name, ttype, offset, d[start:pos]))
        align = self.u32("general.alignment") or 32
        self.data = d[(pos + align - 1) // align * align:]
        self.align = align

    @staticmethod
    def _string(d, p):
        n = struct.unpack("<Q", d[p:p + 8])[0]
        return d[p + 8:p + 8 + n].decode(), p + 8 + n

    def _skip(self, d, t, p):
        if t == 8:
            return self._string(d, p)[1]
        if t == 9:
            et, n = struct.unpack("<IQ", d[p:p + 12])
            p += 12
            for _ in range(n):
                p = self._skip(d, et, p)
            return p
        return p + FIXED[t]

    def u32(self, key):
        for k, raw in self.kv:
            if k == key:
                return struct.unpack("<I", raw[-4:])[0]
        return None

    def string(self, key):
        for k, raw in self.kv:
            if k == key:
                return self._string(raw, 8 + len(k.encode()) + 4)[0]
        raise KeyError(key)

    def set_string(self, key, value):
        k = key.encode()
        v = value.encode()
        raw = struct.pack("<Q", len(k)) + k + struct.pack("<IQ", 8, len(v)) + v
        self.kv = [(kk, raw if kk == key else r) for kk, r in self.kv]

    def drop(self, key):
        self.kv = [(k, r) for k, r in self.kv if k != key]

    def tensor(self, name):
        return next(t for t in self.tensors if t[0] == name)

    def write(self, path):
        head = self.magic_version + struct.pack("<QQ", len(self.tensors), len(self.kv))
        head += b"".join(r for _, r in self.kv) + b"".join(t[3] for t in self.tensors)
        head += b"\0" * ((self.align - len(head) % self.align) % self.align)
        with open(path, "wb") as f:
            f.write(head + self.data)


CHECKED = "kztts.weights_checked"


def gguf_poke(src, dst, tensor, value_bytes, stride, index, keep_checked=False):
    """Copy of src with value (block scale) `index` of `tensor` replaced; stride: bytes from
    one value (block) to the next. Unless keep_checked, the copy also loses the writer's
    "every value checked" key, as a file from another writer would lack it, so its load
    scans every value."""
    g = Gguf(src)
    if not keep_checked:
        g.drop(CHECKED)
    _, _, offset, _ = g.tensor(tensor)
    data = bytearray(g.data)
    at = offset + index * stride
    data[at:at + len(value_bytes)] = value_bytes
    g.data = bytes(data)
    g.write(dst)


GGUF_F32, GGUF_F16, GGUF_Q4_0, GGUF_Q8_0, GGUF_BF16 = 0, 1, 2, 8, 30


def main():
    ap = argparse.ArgumentParser()
    for name in ("kztts", "tiny", "work"):
        ap.add_argument("--" + name, required=True)
    a = ap.parse_args()
    k = a.kztts
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    expect_loads(k, "tiny checkpoint", a.tiny)
    # The codec's encoder is loaded (and scanned) for the models that encode: Base ones.
    base = os.path.join(os.path.dirname(a.tiny), "tiny_base")

    # More layers in the file than in its config.
    layer_cases = [
        ("talker layers", "config.json",
         lambda c: c["talker_config"].update(num_hidden_layers=1), "talker.model.layers.1."),
        ("code predictor layers", "config.json",
         lambda c: c["talker_config"]["code_predictor_config"].update(num_hidden_layers=1),
         "talker.code_predictor.model.layers.1."),
        ("codec transformer layers", "speech_tokenizer/config.json",
         lambda c: c["decoder_config"].update(num_hidden_layers=1),
         "decoder.pre_transformer.layers.1."),
        ("codec encoder transformer layers", "speech_tokenizer/config.json",
         lambda c: c["encoder_config"].update(num_hidden_layers=1),
         "encoder.encoder_transformer.layers.1."),
    ]
    for name, cfg, edit, tensor in layer_cases:
        src = base if "encoder" in name else a.tiny
        m = link_copy(src, os.path.join(a.work, name.replace(" ", "_")))
        edit_json(os.path.join(m, cfg), edit)
        expect_load_error(k, f"{name} beyond the config", m, [tensor, "beyond", "num_hidden_layers"])

    # The same for a GGUF: the config stored in the file says one talker layer fewer.
    q8 = os.path.join(a.work, "tiny_q8.gguf")
    r = subprocess.run([k, "quantize", "-m", a.tiny, "-o", q8, "--type", "q8_0"],
                       capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, f"quantize q8_0: {r.stderr}")
    expect_loads(k, "q8_0 GGUF", q8)
    g = Gguf(q8)
    cfg = json.loads(g.string("kztts.config.json"))
    cfg["talker_config"]["num_hidden_layers"] = 1
    g.set_string("kztts.config.json", json.dumps(cfg))
    extra = os.path.join(a.work, "extra_layers.gguf")
    g.write(extra)
    expect_load_error(k, "GGUF talker layers beyond the config", extra,
                      ["extra_layers.gguf", "talker.model.layers.1.", "beyond"])
    g = Gguf(q8)  # the rewriter itself keeps a loadable file
    g.write(os.path.join(a.work, "same.gguf"))
    expect_loads(k, "rewritten GGUF", os.path.join(a.work, "same.gguf"))

    # Non-finite weights in a checkpoint directory.
    nan_bf16, inf_f32 = b"\xc0\x7f", struct.pack("<f", float("inf"))
    main_st, codec_st = "model.safetensors", os.path.join("speech_tokenizer", "model.safetensors")
    dir_cases = [
        ("NaN in a bf16 talker weight", main_st, TALKER_W, 5, nan_bf16, "element 5"),
        ("Inf in an f32 codec weight", codec_st, CODEC_W, 7, inf_f32, "element 7"),
    ]
    for name, rel, tensor, element, value, where in dir_cases:
        m = link_copy(a.tiny, os.path.join(a.work, name.replace(" ", "_")))
        st_poke(os.path.join(m, rel), tensor, element, value)
        expect_load_error(k, name, m, [rel, f"tensor '{tensor}'", "non-finite", where])
    # The text embedding is checked a row at a time as rows are read: a bad row in the
    # prompt fails the synthesis, a bad row no prompt reads does not matter.
    m = link_copy(a.tiny, os.path.join(a.work, "nan_text_row"))
    st_poke(os.path.join(m, main_st), TEXT_EMB, 64 * 6 + 3, nan_bf16)
    expect_loads(k, "NaN in a text embedding row", m)
    expect_run_error(k, "NaN in a text embedding row the prompt reads", synth_args(m),
                     [f"tensor '{TEXT_EMB}'", "non-finite", "row 6, column 3"], a.work)
    st_poke(os.path.join(m, main_st), TEXT_EMB, 64 * 6 + 3, b"\x00\x00")
    st_poke(os.path.join(m, main_st), TEXT_EMB, 64 * 1000, nan_bf16)
    expect_runs(k, "NaN in a text embedding row no prompt reads", synth_args(m))
    # quantize reads every value of it, so it refuses the row the load lets through.
    for t in ("q8_0", "bf16"):
        out_dir = os.path.join(a.work, "quantize_nan_text_" + t)
        os.makedirs(out_dir)
        r = subprocess.run([k, "quantize", "-m", m, "-o", os.path.join(out_dir, "q.gguf"),
                            "--type", t], capture_output=True, text=True, timeout=300)
        err = r.stderr.strip()
        check(r.returncode == 1 and len(err.splitlines()) == 1 and
              all(w in err for w in (main_st, f"tensor '{TEXT_EMB}'", "non-finite",
                                     f"element {64 * 1000}")),
              f"quantize --type {t} of a NaN text embedding row: {r.returncode} {err!r}")
        check(os.listdir(out_dir) == [], f"quantize {t}: left {os.listdir(out_dir)}")
    print("ok   quantize refuses a NaN in the text embedding")
    # The codec's encoder runs when a voice is cloned: scanned like the decoder on a Base
    # model; a CustomVoice model never runs it, so it neither loads nor scans it.
    m = link_copy(base, os.path.join(a.work, "nan_in_encoder"))
    st_poke(os.path.join(m, codec_st), ENCODER_W, 3, struct.pack("<f", float("nan")))
    expect_load_error(k, "NaN in the codec encoder", m,
                      [codec_st, f"tensor '{ENCODER_W}'", "non-finite", "element 3"])
    m = link_copy(a.tiny, os.path.join(a.work, "nan_in_unused_encoder"))
    st_poke(os.path.join(m, codec_st), ENCODER_W, 3, struct.pack("<f", float("nan")))
    expect_loads(k, "a CustomVoice model with a NaN in the codec encoder it never runs", m)
    # A misshapen encoder tensor: one line naming it.
    m = link_copy(base, os.path.join(a.work, "encoder_shape"))
    edit_json(os.path.join(m, "speech_tokenizer", "config.json"),
              lambda c: c["encoder_config"].update(intermediate_size=48))
    expect_load_error(k, "codec encoder tensor of another shape", m, [f"'{ENCODER_W}'"])

    # Non-finite values and scales in GGUF files of each tensor type.
    q4 = os.path.join(a.work, "tiny_q4.gguf")
    f16 = os.path.join(a.work, "tiny_f16.gguf")
    for path, t in ((q4, "q4_0"), (f16, "f16")):
        r = subprocess.run([k, "quantize", "-m", a.tiny, "-o", path, "--type", t],
                           capture_output=True, text=True, timeout=300)
        check(r.returncode == 0, f"quantize {t}: {r.stderr}")
        expect_loads(k, os.path.basename(path), path)
    fp16_inf, fp16_nan = b"\x00\x7c", b"\x01\xfe"
    q_proj = "model.talker.model.layers.0.self_attn.q_proj.weight"
    gguf_cases = [
        ("Inf q8_0 scale", q8, GGUF_Q8_0, q_proj, fp16_inf, 34, 3, "scale", "block 3"),
        ("NaN q4_0 scale", q4, GGUF_Q4_0, q_proj, fp16_nan, 18, 2, "scale", "block 2"),
        ("NaN f16 value", f16, GGUF_F16, "model." + TALKER_W, fp16_nan, 2, 9, "value",
         "element 9"),
        ("Inf f32 value", q8, GGUF_F32, "codec.decoder.decoder.0.conv.bias",
         struct.pack("<f", float("-inf")), 4, 0, "value", "element 0"),
        ("NaN bf16 value", q8, GGUF_BF16, "model.talker.text_projection.linear_fc1.bias",
         nan_bf16, 2, 1, "value", "element 1"),
    ]
    for name, src, ttype, tensor, value, stride, index, what, where in gguf_cases:
        g = Gguf(src)
        if not any(t[0] == tensor and t[1] == ttype for t in g.tensors):
            check(False, f"{name}: {os.path.basename(src)} has no {tensor} of type {ttype}")
            continue
        dst = os.path.join(a.work, name.replace(" ", "_") + ".gguf")
        gguf_poke(src, dst, tensor, value, stride, index)
        expect_load_error(k, "GGUF " + name, dst,
                          [f"tensor '{tensor}'", f"non-finite {what}", where])
    # kz_quantize vouches for what it wrote, so its files load without a scan; a value
    # altered afterwards still cannot reach the audio: decode refuses non-finite audio.
    check(Gguf(q8).u32(CHECKED) == 1, f"{CHECKED} missing from a kz_quantize file")
    bias = "codec.decoder.decoder.0.conv.bias"
    dst = os.path.join(a.work, "checked_inf_bias.gguf")
    gguf_poke(q8, dst, bias, struct.pack("<f", float("inf")), 4, 0, keep_checked=True)
    expect_loads(k, "altered file that says it was checked", dst)
    codes1 = os.path.join(a.work, "codes1.txt")
    with open(codes1, "w") as f:
        f.write(("7 " * 16).strip() + "\n")
    expect_run_error(k, "altered checked file, decode", decode_args(dst, codes1),
                     ["non-finite audio"], a.work)
    # A conversion that overflows (a finite bf16 value beyond f16's range) is refused by
    # quantize, which must not vouch for an infinity it wrote.
    m = link_copy(a.tiny, os.path.join(a.work, "f16_overflow"))
    st_poke(os.path.join(m, main_st), TALKER_W, 3, b"\xc3\x47")  # 1e5 in bf16
    out_dir = os.path.join(a.work, "quantize_f16_overflow")
    os.makedirs(out_dir)
    r = subprocess.run([k, "quantize", "-m", m, "-o", os.path.join(out_dir, "q.gguf"),
                        "--type", "f16"], capture_output=True, text=True, timeout=300)
    err = r.stderr.strip()
    check(r.returncode == 1 and len(err.splitlines()) == 1 and
          all(w in err for w in ("non-finite", TALKER_W, "element 3")),
          f"quantize --type f16 of 1e5: {r.returncode} {err!r}")
    check(os.listdir(out_dir) == [], f"quantize f16 overflow: left {os.listdir(out_dir)}")
    print("ok   quantize files are checked once, when written")
    # A quantized block whose int8 values are extreme but whose scale is finite loads.
    dst = os.path.join(a.work, "q8_extreme.gguf")
    gguf_poke(q8, dst, q_proj, b"\x00\x3c" + b"\x80" * 32, 34, 1)
    expect_loads(k, "q8_0 block with finite scale and extreme values", dst)

    # Finite weights whose arithmetic overflows: caught where it reaches logits or audio.
    codes = os.path.join(a.work, "codes.txt")
    with open(codes, "w") as f:
        f.write(("7 " * 16).strip() + "\n" + ("9 " * 16).strip() + "\n")
    expect_runs(k, "synth on the tiny checkpoint", synth_args(a.tiny))
    expect_runs(k, "decode on the tiny checkpoint", decode_args(a.tiny, codes))
    max_bf16, max_f32 = b"\x7f\x7f", struct.pack("<f", 3.4e38)
    overflow_cases = [
        ("talker overflow", main_st, ["talker.model.norm.weight"], max_bf16, "synth",
         "the talker's logits at frame 0"),
        ("code predictor overflow", main_st, ["talker.code_predictor.model.norm.weight"],
         max_bf16, "synth", "the code predictor's logits at frame 0"),
        ("codec overflow", codec_st, [FINAL_CONV + "weight", FINAL_CONV + "bias"], max_f32,
         "decode", "non-finite audio (NaN or Inf) at frame"),
        ("codec overflow in synth", codec_st, [FINAL_CONV + "weight", FINAL_CONV + "bias"],
         max_f32, "synth", "non-finite audio (NaN or Inf) at frame"),
    ]
    for name, rel, tensors, value, cmd, expect in overflow_cases:
        m = link_copy(a.tiny, os.path.join(a.work, name.replace(" ", "_")))
        for tensor in tensors:
            st_fill(os.path.join(m, rel), tensor, value)
        expect_loads(k, name + " (finite weights)", m)
        args = synth_args(m) if cmd == "synth" else decode_args(m, codes)
        expect_run_error(k, name, args, ["non-finite", expect], a.work)
    finish("test_bad_weights")


if __name__ == "__main__":
    main()
