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
with the text and wrapped instruction ids the reference used.
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
]
CHECKPOINTS = {
    "tiny": [],
    "tiny_1b7": ["--size", "1b7"],
    "tiny_vd": ["--size", "1b7", "--variant", "voice_design"],
    "tiny_base": ["--variant", "base"],
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
    for name, ck, speaker, lang, layout, instruct in LM_CASES:
        model = os.path.join(root, ck)
        golden = os.path.join(a.golden, f"lm_{name}.safetensors")
        cmd = [py, ref, "--model", model, "--language", lang, "--layout", layout,
               "--frames", str(LM_FRAMES), "--out", golden, "--quiet"]
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
                               ids_arg(text_ids), ids_arg(wrapped) or "-", golden]))
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
    run([py, os.path.join(a.source, "tools", "make_checkpoint.py"), "--preset", "tiny",
         "--out", os.path.join(root, "tiny_base_1b7"), "--seed", "1", "--size", "1b7",
         "--variant", "base"])
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
        lines.append("|".join([model, pcm, golden]))
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
