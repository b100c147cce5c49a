"""The full-size presets of tools/make_checkpoint.py against the released checkpoints,
without writing a byte: for each released model (0.6B / 1.7B, CustomVoice / Base /
VoiceDesign) the tensor plan's parameter count must be the released one
(shared/spec/qwen3-tts.md section 7.1), the talker and code-predictor sizes the spec's
(sections 3.1, 4.1), and small_to_mtp_projection present exactly when the talker is wider
than the code predictor (1.7B). The codec's decoder and encoder counts likewise.

Flow: make_checkpoint's *_dims() -> plan_*() -> the sum of the shapes' products and the
names in the plan -> compared with the constants below.
"""
import argparse
import math
import os
import sys

from testlib import check, finish

# Released parameter totals of model.safetensors (spec 7.1; x2 bytes = the file sizes).
RELEASED_PARAMS = {
    ("0b6", "custom_voice"): 905_788_672,
    ("0b6", "base"): 914_643_008,
    ("1b7", "custom_voice"): 1_916_676_352,
    ("1b7", "voice_design"): 1_916_676_352,
    ("1b7", "base"): 1_928_677_440,
}
CODEC_DECODER_PARAMS = 114_323_137
CODEC_ENCODER_PARAMS = 56_234_304
# hidden, intermediate, layers, heads, kv heads, head_dim (spec 3.1 and 4.1).
TALKER = {"0b6": (1024, 3072, 28, 16, 8, 128), "1b7": (2048, 6144, 28, 16, 8, 128)}
CODE_PREDICTOR = (1024, 3072, 5, 16, 8, 128)
PROJECTION = "talker.code_predictor.small_to_mtp_projection.weight"


def count(plan):
    return sum(math.prod(shape) for _, shape, _ in plan)


def sizes(d):
    return (d["hidden_size"], d["intermediate_size"], d["num_hidden_layers"],
            d["num_attention_heads"], d["num_key_value_heads"], d["head_dim"])


def check_model(mc, layout, size, variant):
    td, cd = mc.talker_dims("full", size), mc.code_predictor_dims("full")
    plan = mc.plan_talker(td, cd, layout)
    if variant == "base":
        plan += mc.plan_speaker_encoder(mc.speaker_dims("full", td["hidden_size"]))
    tag = f"{size} {variant}"
    check(count(plan) == RELEASED_PARAMS[size, variant],
          f"{tag}: {count(plan):,} parameters, released {RELEASED_PARAMS[size, variant]:,}")
    check(sizes(td) == TALKER[size], f"{tag}: talker sizes {sizes(td)}")
    check(sizes(cd) == CODE_PREDICTOR, f"{tag}: code predictor sizes {sizes(cd)}")
    shapes = {name: shape for name, shape, _ in plan}
    want = [CODE_PREDICTOR[0], TALKER[size][0]] if size == "1b7" else None
    got = list(shapes[PROJECTION]) if PROJECTION in shapes else None
    check(got == want, f"{tag}: small_to_mtp_projection {got}, expected {want}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True, help="the source tree (tools/ is imported)")
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(a.source, "tools"))
    import make_checkpoint as mc
    layout = mc.released_layout()
    for size, variant in RELEASED_PARAMS:
        check_model(mc, layout, size, variant)
    dec = count(mc.plan_codec_decoder(mc.codec_decoder_dims("full", layout)))
    enc = count(mc.plan_codec_encoder(mc.codec_encoder_dims("full", layout)))
    check(dec == CODEC_DECODER_PARAMS, f"codec decoder: {dec:,} parameters")
    check(enc == CODEC_ENCODER_PARAMS, f"codec encoder: {enc:,} parameters")
    finish("test_full_shapes")


if __name__ == "__main__":
    main()
