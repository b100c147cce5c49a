"""Builds the model-test fixture: tiny random checkpoints, random codes files and
the PyTorch reference goldens for them.

Flow: tools/make_checkpoint.py --preset tiny -> TINY/; for each frame count N,
tools/reference/codec_decoder.py writes GOLDEN/codes_N.txt and then
GOLDEN/golden_N.safetensors (every decoder stage, time-major). A 330-frame input
also gets GOLDEN/official_330.safetensors from the reference's chunked_decode
(300-frame windows, 25 frames of context), which differs from a single pass.
The remapped checkpoint (make_checkpoint.py --ids remapped: every id and size
moved) gets the same codec goldens in GOLDEN/remap/ (its own codebook count and
size), GOLDEN/remap/text_ids.txt (REMAP_TEXT's ids) and LM goldens from text, not
ids (the reference tokenizes with the checkpoint's own files), listed with their
texts in GOLDEN/remap_cases.json. Every LM golden goes into GOLDEN/lm_cases.txt
with the text and wrapped instruction ids the reference used. The Base checkpoints
(0.6B- and 1.7B-style) get cloned-voice goldens (a random x-vector, random reference
codes and a transcript the reference tokenizes; x-vector-only and ICL, both text
layouts; ICL with the official decode-then-cut audio) listed in GOLDEN/base_cases.txt.
The speaker encoder gets test audio and goldens of tiny_base and tiny_base_1b7
(tools/reference/speaker_encoder.py) and copies of tiny_base with one speaker-encoder
tensor broken, all listed in GOLDEN/speaker/cases.txt.
GOLDEN/encoder/ holds codec-encoder goldens (tools/reference/codec_encoder.py) of test
audio for the 0.6B and 1.7B Base and the remapped checkpoints (cases.txt), and noenc/,
a codec without encoder tensors.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

FRAME_COUNTS = (1, 7, 40)
OFFICIAL_FRAMES = 330
LM_FRAMES = 30
TEXT_IDS = [9707, 11, 1879, 0, 358, 1079, 1181, 17821, 13, 220, 16, 17, 18, 52801, 6313]
INSTRUCT_IDS = [41884, 11, 3968, 16217, 13]
REMAP_TEXT = "Hello world, this is a test."
REMAP_INSTRUCT = "Speak slowly and calmly."
# name, checkpoint (preset args), speaker, language, layout, with instruction; the
# remapped checkpoint's cases speak REMAP_TEXT (and REMAP_INSTRUCT), the others TEXT_IDS.
LM_CASES = [
    ("cv06_auto_nonstreaming", "tiny", "vivian", "auto", "non_streaming", True),
    ("cv06_english_streaming", "tiny", "ryan", "english", "streaming", False),
    ("cv17_dialect_nonstreaming", "tiny_1b7", "eric", "chinese", "non_streaming", True),
    ("cv17_auto_streaming", "tiny_1b7", "dylan", "auto", "streaming", True),
    ("cv17_english_noinstruct", "tiny_1b7", "serena", "english", "non_streaming", False),
    ("vd17_english_nonstreaming", "tiny_vd", "-", "english", "non_streaming", True),
    ("vd17_auto_streaming", "tiny_vd", "-", "auto", "streaming", True),
    ("remap_english_streaming", "tiny_remap", "eric", "english", "streaming", True),
    ("remap_dialect_nonstreaming", "tiny_remap", "dylan", "auto", "non_streaming", False),
    ("remap_chinese_nonstreaming", "tiny_remap", "vivian", "chinese", "non_streaming", True),
    # The talker's KV cache in binary16 (reference and engine round alike).
    ("cv06_auto_nonstreaming_kvf16", "tiny", "vivian", "auto", "non_streaming", True, "f16"),
    ("cv17_auto_streaming_kvf16", "tiny_1b7", "dylan", "auto", "streaming", True, "f16"),
]
BASE_TEXT = "Hello world, this is a test."
BASE_REF_TEXT = "A reference, read aloud."
# name, checkpoint, mode, layout, language, reference frames. 53 reference frames + 30
# new ones is a pair whose official cut is one sample before the new audio (spec 8.4);
# 9 frames leave the ICL text column longer than the codec column (trailing text).
BASE_CASES = [
    ("base06_xvec_streaming", "tiny_base", "xvec", "streaming", "auto", 0),
    ("base06_xvec_nonstreaming", "tiny_base", "xvec", "non_streaming", "english", 0),
    ("base06_icl_streaming", "tiny_base", "icl", "streaming", "auto", 9),
    ("base06_icl_nonstreaming", "tiny_base", "icl", "non_streaming", "auto", 9),
    ("base17_xvec_streaming", "tiny_base_1b7", "xvec", "streaming", "auto", 0),
    ("base17_xvec_nonstreaming", "tiny_base_1b7", "xvec", "non_streaming", "auto", 0),
    ("base17_icl_streaming", "tiny_base_1b7", "icl", "streaming", "english", 53),
    ("base17_icl_nonstreaming", "tiny_base_1b7", "icl", "non_streaming", "auto", 53),
]
# Speaker encoder: 1 s, 3.7 s and 2 s + 77 samples (not a multiple of the hop) of audio, and
# 1280 samples, the shortest the official accepts (5 frames: the widest conv mirrors 4).
SPEAKER_SAMPLES = (24000, 88800, 48077, 1280)
# tiny_base copies with one speaker-encoder tensor reshaped (same element count), or with
# a NaN in it (the load's finite scan covers the speaker encoder).
SPEAKER_BROKEN = [
    ("tiny_base_bad_res2net", "speaker_encoder.blocks.2.res2net_block.blocks.3.conv.weight",
     (4, 12, 1)),
    ("tiny_base_bad_fc", "speaker_encoder.fc.weight", (16, 192, 2)),
    ("tiny_base_nan_asp", "speaker_encoder.asp.conv.weight", "nan"),
]
CHECKPOINTS = {
    "tiny": [],
    "tiny_1b7": ["--size", "1b7"],
    "tiny_vd": ["--size", "1b7", "--variant", "voice_design"],
    "tiny_base": ["--variant", "base"],
    "tiny_base_1b7": ["--size", "1b7", "--variant", "base"],
    "tiny_remap": ["--size", "1b7", "--ids", "remapped"],
}


def run(cmd):
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--tiny", required=True)
    ap.add_argument("--golden", required=True)
    a = ap.parse_args()
    py = sys.executable
    run([py, os.path.join(a.source, "tools", "make_checkpoint.py"), "--preset", "tiny",
         "--out", a.tiny, "--seed", "0"])
    codec_goldens(py, a, a.tiny, a.golden, with_model=False)
    lm_fixture(py, a)
    speaker_fixture(py, a)
    encoder_goldens(py, a)
    print("fixture: 1 passed, 0 failed")


def codec_goldens(py, a, model, golden, with_model):
    """Random codes (with_model: the model's codebook count and size, else 16 x 2048) and
    the codec goldens of `model` for them."""
    ref = os.path.join(a.source, "tools", "reference", "codec_decoder.py")
    os.makedirs(golden, exist_ok=True)
    for n in FRAME_COUNTS + (OFFICIAL_FRAMES,):
        codes = os.path.join(golden, f"codes_{n}.txt")
        run([py, ref, "--random-codes", str(n), "--seed", str(1000 + n), "--write-codes", codes]
            + (["--model", model] if with_model else []))
        if n != OFFICIAL_FRAMES:
            run([py, ref, "--model", model, "--codes", codes,
                 "--out", os.path.join(golden, f"golden_{n}.safetensors")])
    run([py, ref, "--model", model, "--codes",
         os.path.join(golden, f"codes_{OFFICIAL_FRAMES}.txt"), "--official-chunking",
         "--out", os.path.join(golden, f"official_{OFFICIAL_FRAMES}.safetensors")])


def ids_arg(ids):
    return ",".join(str(i) for i in ids)


def golden_ids(golden):
    """(text ids, wrapped instruction ids) the reference used, from its golden file."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
    from reference import safetensors_io as st
    t = st.load(golden)
    instruct = t["instruct_ids"].tolist() if "instruct_ids" in t else []
    return t["input_ids"].tolist()[3:-5], instruct


def lm_fixture(py, a):
    """Extra tiny checkpoints and greedy goldens of the talker + code predictor."""
    root = os.path.dirname(a.tiny)
    for name, extra in CHECKPOINTS.items():
        if name != "tiny":
            run([py, os.path.join(a.source, "tools", "make_checkpoint.py"), "--preset", "tiny",
                 "--out", os.path.join(root, name), "--seed", "0"] + extra)
    remap = os.path.join(root, "tiny_remap")
    codec_goldens(py, a, remap, os.path.join(a.golden, "remap"), with_model=True)
    ref = os.path.join(a.source, "tools", "reference", "talker.py")
    lines, remap_cases = [], []
    for name, ck, speaker, lang, layout, instruct, *kv in LM_CASES:
        kv = kv[0] if kv else "f32"
        model = os.path.join(root, ck)
        golden = os.path.join(a.golden, f"lm_{name}.safetensors")
        cmd = [py, ref, "--model", model, "--language", lang, "--layout", layout,
               "--frames", str(LM_FRAMES), "--kv-cache", kv, "--out", golden, "--quiet"]
        if ck == "tiny_remap":
            cmd += ["--text", REMAP_TEXT] + (["--instruct", REMAP_INSTRUCT] if instruct else [])
        else:
            cmd += ["--text-ids", ids_arg(TEXT_IDS)]
            cmd += ["--instruct-ids", ids_arg(INSTRUCT_IDS)] if instruct else []
        if speaker != "-":
            cmd += ["--speaker", speaker]
        run(cmd)
        text_ids, wrapped = golden_ids(golden)
        lines.append("|".join([name, model, speaker, lang, layout, str(LM_FRAMES),
                               ids_arg(text_ids), ids_arg(wrapped) or "-", golden, kv]))
        if ck == "tiny_remap":
            remap_cases.append(dict(name=name, model=model, speaker=speaker, language=lang,
                                    layout=layout, frames=LM_FRAMES, text=REMAP_TEXT,
                                    instruct=REMAP_INSTRUCT if instruct else "",
                                    text_ids=text_ids, golden=golden))
            with open(os.path.join(a.golden, "remap", "text_ids.txt"), "w") as f:
                f.write(ids_arg(text_ids) + "\n")
    with open(os.path.join(a.golden, "lm_cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(a.golden, "remap_cases.json"), "w") as f:
        json.dump(remap_cases, f, indent=1)
    base_fixture(py, a, root)


def base_fixture(py, a, root):
    """Cloned-voice goldens of the Base checkpoints; manifest GOLDEN/base_cases.txt:
    name|model|mode|layout|language|frames|text|ref_text|golden (the golden holds the x-vector, the
    reference codes and transcript ids, and for ICL the official audio)."""
    sys.path.insert(0, os.path.join(a.source, "tools"))
    import torch
    from reference import safetensors_io as st
    ref = os.path.join(a.source, "tools", "reference", "talker.py")
    codec = os.path.join(a.source, "tools", "reference", "codec_decoder.py")
    lines = []
    for i, (name, ck, mode, layout, lang, n_ref) in enumerate(BASE_CASES):
        model = os.path.join(root, ck)
        with open(os.path.join(model, "config.json")) as f:
            dim = json.load(f)["talker_config"]["hidden_size"]
        xvec = os.path.join(a.golden, f"base_{name}_xvector.safetensors")
        g = torch.Generator().manual_seed(500 + i)
        st.save(xvec, {"speaker_embedding": torch.randn(dim, generator=g) * 0.5})
        golden = os.path.join(a.golden, f"base_{name}.safetensors")
        cmd = [py, ref, "--model", model, "--language", lang, "--layout", layout,
               "--frames", str(LM_FRAMES), "--out", golden, "--quiet", "--text", BASE_TEXT,
               "--speaker-embed", xvec]
        if mode == "icl":
            codes = os.path.join(a.golden, f"base_{name}_ref_codes.txt")
            run([py, codec, "--model", model, "--random-codes", str(n_ref), "--seed",
                 str(600 + i), "--write-codes", codes])
            cmd += ["--ref-codes", codes, "--ref-text", BASE_REF_TEXT, "--icl-audio"]
        run(cmd)
        lines.append("|".join([name, model, mode, layout, lang, str(LM_FRAMES), BASE_TEXT,
                               BASE_REF_TEXT if mode == "icl" else "-", golden]))
    with open(os.path.join(a.golden, "base_cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def speaker_fixture(py, a):
    """Test audio, speaker-encoder goldens of both Base checkpoints for it, and copies of
    tiny_base with one speaker-encoder tensor broken, listed in GOLDEN/speaker/cases.txt:
    "case|checkpoint|model dir|audio.f32|golden" and "bad|model dir|tensor name"."""
    root, out = os.path.dirname(a.tiny), os.path.join(a.golden, "speaker")
    os.makedirs(out, exist_ok=True)
    ref = os.path.join(a.source, "tools", "reference", "speaker_encoder.py")
    run([py, ref, "--model", os.path.join(root, "tiny_base"), "--self-test"])
    lines = []
    for n in SPEAKER_SAMPLES:
        audio = os.path.join(out, f"audio_{n}.f32")
        run([py, ref, "--random-audio", str(n), "--seed", str(n), "--write-audio", audio])
        for ck in ("tiny_base", "tiny_base_1b7"):
            golden = os.path.join(out, f"{ck}_{n}.safetensors")
            run([py, ref, "--model", os.path.join(root, ck), "--audio", audio, "--out", golden,
                 "--stages"])
            lines.append("|".join(["case", ck, os.path.join(root, ck), audio, golden]))
    for name, tensor, change in SPEAKER_BROKEN:
        model = os.path.join(root, name)
        broken_copy(os.path.join(root, "tiny_base"), model, tensor, change)
        lines.append("|".join(["bad", model, tensor]))
    with open(os.path.join(out, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def broken_copy(src, dst, tensor, change):
    """dst = src with `tensor` of model.safetensors reshaped to `change` (same data), or with
    its element 5 set to NaN (change "nan")."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
    from reference import safetensors_io as st
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("model.safetensors"))
    t = st.load(os.path.join(src, "model.safetensors"))
    if change == "nan":
        t[tensor].view(-1)[5] = float("nan")
    else:
        t[tensor] = t[tensor].reshape(change)
    st.save(os.path.join(dst, "model.safetensors"), t)



# Codec encoder goldens: (checkpoint, seconds, seed). 0.6B and 1.7B Base and the remapped
# checkpoint (16 kHz, 8 codebooks of 1000); 1 s, 2.5 s, lengths that are no multiple of
# the hop, and 14 s (175 frames: more transformer rows than the config's 250-row
# sliding_window, which the reference does not apply).
ENCODER_CASES = [
    ("tiny_base", 1.0, 1), ("tiny_base", 2.5, 2), ("tiny_base", 0.7071, 3),
    ("tiny_base", 14.0, 4), ("tiny_base_1b7", 1.9876, 5), ("tiny_base_1b7", 0.01, 6),
    ("tiny_remap", 2.5, 7), ("tiny_remap", 1.2345, 8),
]


def encoder_goldens(py, a):
    """GOLDEN/encoder/: test audio (raw f32), reference goldens and cases.txt listing
    checkpoint|audio|golden per line."""
    root = os.path.dirname(a.tiny)
    out = os.path.join(a.golden, "encoder")
    os.makedirs(out, exist_ok=True)
    ref = os.path.join(a.source, "tools", "reference", "codec_encoder.py")
    lines = []
    for i, (ck, seconds, seed) in enumerate(ENCODER_CASES):
        model = os.path.join(root, ck)
        with open(os.path.join(model, "speech_tokenizer", "config.json")) as f:
            rate = json.load(f)["input_sample_rate"]
        pcm = os.path.join(out, f"audio_{i}.f32")
        golden = os.path.join(out, f"golden_{i}.safetensors")
        run([py, ref, "--synth", str(seconds), "--seed", str(seed), "--rate", str(rate),
             "--write-audio", pcm])
        run([py, ref, "--model", model, "--audio", pcm, "--out", golden, "--threads", "1"])
        # A CustomVoice checkpoint does not load its codec's encoder: its codec directory
        # alone does (the codec-only model `kztts encode` takes).
        base = json.load(open(os.path.join(model, "config.json")))["tts_model_type"] == "base"
        lines.append("|".join([model if base else os.path.join(model, "speech_tokenizer"), pcm,
                               golden]))
    with open(os.path.join(out, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    # A decoder-only codec directory: loads without an encoder.
    sys.path.insert(0, os.path.join(a.source, "tools", "reference"))
    import safetensors_io
    noenc = os.path.join(out, "noenc")
    os.makedirs(noenc, exist_ok=True)
    codec = os.path.join(a.tiny, "speech_tokenizer")
    shutil.copy(os.path.join(codec, "config.json"), noenc)
    safetensors_io.save(os.path.join(noenc, "model.safetensors"),
                        safetensors_io.load(os.path.join(codec, "model.safetensors"),
                                            prefix="decoder."))


if __name__ == "__main__":
    main()
