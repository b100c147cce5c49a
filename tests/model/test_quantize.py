"""`kztts quantize` and GGUF models on the tiny checkpoint, as a user runs them.

Checks: every --type writes one GGUF file and nothing else; the f32 GGUF gives the
directory's greedy codes and audio bit for bit (so the GGUF path loads exactly the
same model) and the codec-only GGUF decodes like its directory; a checkpoint directory
with F16 safetensors speaks like the f16 GGUF; f16, q8_0 and q4_0
models are deterministic across thread counts and runs; their logits stay within
a bound of the f32 model (`kztts quality`), f16 closer than q8_0 closer than q4_0; the
tokenizer and configs come from the file (its stored BPE tables give the directory's ids
on the whole text corpus); bad options exit 2 (-o - too: no GGUF goes to
stdout, nor to a file named "-"); a missing source, a GGUF source, an unwritable output,
a truncated file, a foreign architecture and a missing tensor each give exit 1, one
clear line and no crash or partial file;
--codec-forms files map their stored codec forms in that precision and decode the same
bits as converting at load (test_codec_forms).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

from testlib import check, finish, gguf_tensor_offsets, link_copy

TEXT = "Hello world, this is a test of the quantized model."


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, timeout=300, **kw)


def quantize(a, src, out, kind):
    r = run([a.kztts, "quantize", "-m", src, "-o", out, "--type", kind])
    check(r.returncode == 0 and os.path.isfile(out), f"quantize {kind}: {r.stderr.decode()}")
    return r


def synth(a, model, tag, threads=2):
    codes = os.path.join(a.work, f"{tag}.codes")
    wav = os.path.join(a.work, f"{tag}.wav")
    r = run([a.kztts, "synth", "-m", model, "-s", "ryan", "--greedy", "--frames", "24",
             "--threads", str(threads), "--dump-codes", codes, "-o", wav, TEXT])
    check(r.returncode == 0, f"synth {tag}: {r.stderr.decode()}")
    if r.returncode != 0:
        return b"", b""
    return open(codes, "rb").read(), open(wav, "rb").read()


def quality(a, model):
    r = run([a.kztts, "quality", "-m", model, "--ref", a.tiny, "-s", "ryan", "--frames", "50",
             "--json", TEXT])
    check(r.returncode == 0, f"quality {model}: {r.stderr.decode()}")
    return json.loads(r.stdout) if r.returncode == 0 else None


def expect_error(a, args, code, words, what):
    r = run([a.kztts] + args)
    err = r.stderr.decode()
    check(r.returncode == code, f"{what}: exit {r.returncode}, want {code} ({err.strip()})")
    check(all(w in err for w in words), f"{what}: message {err.strip()!r} lacks {words}")
    check(err.count("\n") == 1, f"{what}: want one line, got {err!r}")


def test_types(a):
    models = {}
    for kind in ["f32", "bf16", "f16", "q8_0", "q4_mlp", "q4_0"]:
        out = os.path.join(a.work, f"tiny_{kind}.gguf")
        quantize(a, a.tiny, out, kind)
        models[kind] = out
    leftovers = [f for f in os.listdir(a.work) if "partial" in f]
    check(not leftovers, f"temporary files left: {leftovers}")
    sizes = {k: os.path.getsize(v) for k, v in models.items() if os.path.exists(v)}
    print("sizes:", sizes)
    check(len(sizes) == 6 and sizes["f32"] > sizes["bf16"] == sizes["f16"] > sizes["q8_0"] >
          sizes["q4_mlp"] > sizes["q4_0"],
          f"file sizes not ordered f32 > bf16 = f16 > q8_0 > q4_mlp > q4_0: {sizes}")
    return models


def test_order(a, models):
    """The language models' tensors lie in the order a frame reads them: talker layers,
    then one contiguous code-predictor range (layers in execution order, norm, heads)."""
    offsets = gguf_tensor_offsets(models["q8_0"])
    parts = ["input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
             "self_attn.q_norm", "self_attn.k_norm", "self_attn.o_proj",
             "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]
    cfg = json.load(open(os.path.join(a.tiny, "config.json")))["talker_config"]

    def layers(prefix, n):
        return [f"model.{prefix}.layers.{i}.{p}.weight" for i in range(n) for p in parts]
    n_cp = cfg["code_predictor_config"]["num_hidden_layers"]
    n_heads = cfg["num_code_groups"] - 1
    cp = layers("talker.code_predictor.model", n_cp) + \
        ["model.talker.code_predictor.model.norm.weight"] + \
        [f"model.talker.code_predictor.lm_head.{i}.weight" for i in range(n_heads)]
    talker = layers("talker.model", cfg["num_hidden_layers"]) + \
        ["model.talker.model.norm.weight", "model.talker.codec_head.weight"]
    for what, names in (("talker", talker), ("code predictor", cp)):
        missing = [n for n in names if n not in offsets]
        check(not missing, f"{what} tensors missing from the GGUF: {missing[:3]}")
        pos = [offsets[n] for n in names if n in offsets]
        check(pos == sorted(pos), f"{what} tensors are not in execution order")
    inside = [n for n, o in offsets.items() if n not in cp and
              offsets[cp[0]] <= o <= offsets[cp[-1]]] if cp[0] in offsets else ["?"]
    check(not inside, f"other tensors inside the code predictor's range: {inside[:3]}")


def test_exact(a, models):
    want = synth(a, a.tiny, "dir")
    got = synth(a, models["f32"], "f32")
    check(want[0] and got[0] == want[0], "f32 GGUF codes differ from the directory's")
    check(want[1] and got[1] == want[1], "f32 GGUF audio differs from the directory's")
    for cmd in (["tokenize"], ["speakers"]):
        d = run([a.kztts] + cmd + ["-m", a.tiny] + (["Hello world <|im_start|>"] if cmd == ["tokenize"] else []))
        g = run([a.kztts] + cmd + ["-m", models["q8_0"]] + (["Hello world <|im_start|>"] if cmd == ["tokenize"] else []))
        check(d.returncode == 0 and g.returncode == 0 and d.stdout == g.stdout,
              f"{cmd[0]} from GGUF differs: {g.stdout!r} vs {d.stdout!r} {g.stderr!r}")
    # The tokenizer's stored BPE tables (used in place of vocab.json and merges.txt) give
    # the directory's ids on the whole multilingual corpus.
    tables = [n for n in gguf_tensor_offsets(models["q8_0"]) if n.startswith("tokenizer.bpe.")]
    check(len(tables) == 7, f"stored tokenizer tables: {tables}")
    corpus = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "text", "corpus.txt")
    with open(corpus, "rb") as f:
        text = f.read()
    d = run([a.kztts, "tokenize", "-m", a.tiny, "-"], input=text)
    g = run([a.kztts, "tokenize", "-m", models["q8_0"], "-"], input=text)
    check(d.returncode == 0 and len(d.stdout) > 10000 and g.stdout == d.stdout,
          f"corpus ids from the GGUF's tables differ: {g.stderr!r}")
    info = run([a.kztts, "info", "-m", models["q8_0"]])
    check(info.returncode == 0 and b"Q8_0" in info.stdout and b"recipe q8_0" in info.stdout,
          f"info: {info.stdout!r}")


def test_f16_checkpoint(a, models):
    """A checkpoint directory whose talker matrices are F16 safetensors (as converted
    checkpoints may be) loads and speaks exactly like the f16 GGUF of the same weights."""
    tools = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
    d = link_copy(a.tiny, os.path.join(a.work, "tiny_f16_dir"))
    os.remove(os.path.join(d, "model.safetensors"))
    # The f16 recipe's matrices: 2-D talker.*.weight with a multiple of 32 columns.
    script = ("import sys, torch; sys.path.insert(0, sys.argv[1]); "
              "import reference.safetensors_io as st; t = st.load(sys.argv[2]); "
              "st.save(sys.argv[3], {k: v.to(torch.float16) if k.startswith('talker.') and "
              "k.endswith('.weight') and v.dim() == 2 and v.shape[1] % 32 == 0 and "
              "v.is_floating_point() else v for k, v in t.items()})")
    r = run([sys.executable, "-c", script, tools, os.path.join(a.tiny, "model.safetensors"),
             os.path.join(d, "model.safetensors")])
    check(r.returncode == 0, f"writing the F16 checkpoint: {r.stderr.decode()}")
    info = run([a.kztts, "info", "-m", d])
    check(b"F16 x" in info.stdout, f"info of the F16 checkpoint: {info.stdout!r}")
    want = synth(a, models["f16"], "f16_gguf")
    got = synth(a, d, "f16_dir")
    check(want[0] and got == want, "F16 checkpoint directory differs from the f16 GGUF")


def test_codec_only(a):
    codec_dir = os.path.join(a.tiny, "speech_tokenizer")
    out = os.path.join(a.work, "codec.gguf")
    quantize(a, codec_dir, out, "q8_0")
    codes = os.path.join(a.golden, "codes_40.txt")
    wavs = []
    for tag, model in (("codec_dir", codec_dir), ("codec_gguf", out)):
        wav = os.path.join(a.work, f"{tag}.f32")
        r = run([a.kztts, "decode", "-m", model, "--codes", codes, "-o", wav])
        check(r.returncode == 0, f"decode {tag}: {r.stderr.decode()}")
        wavs.append(open(wav, "rb").read() if r.returncode == 0 else b"")
    check(wavs[0] and wavs[0] == wavs[1], "codec-only GGUF decodes differently")


def test_quantized(a, models):
    errors = {}
    for kind in ["f16", "q8_0", "q4_mlp", "q4_0"]:
        one = synth(a, models[kind], f"{kind}_t1", threads=1)
        two = synth(a, models[kind], f"{kind}_t2", threads=2)
        again = synth(a, models[kind], f"{kind}_t2b", threads=2)
        check(one[0] and one == two, f"{kind}: 1 and 2 threads differ")
        check(two == again, f"{kind}: two runs differ")
        q = quality(a, models[kind])
        if q:
            print(kind, json.dumps(q))
            errors[kind] = (q["talker"]["rel_error"], q["code_predictor"]["rel_error"])
    # Measured on this fixture: f16 ~4e-9 (its bf16 weights fit f16 but for the tiniest),
    # q8_0 ~0.01-0.02, q4_0 ~0.04-0.15; random
    # weights keep codes far from ties, so a broken kernel or layout gives errors near 1.
    if len(errors) == 4:
        check(max(errors["f16"]) < 0.005, f"f16 logits error {errors['f16']} >= 0.005")
        check(max(errors["q8_0"]) < 0.05, f"q8_0 logits error {errors['q8_0']} >= 0.05")
        check(max(errors["q4_0"]) < 0.3, f"q4_0 logits error {errors['q4_0']} >= 0.3")
        for a_, b_ in (("f16", "q8_0"), ("q8_0", "q4_mlp"), ("q4_mlp", "q4_0")):
            check(errors[a_][0] < errors[b_][0] and errors[a_][1] < errors[b_][1],
                  f"{a_} not closer than {b_}: {errors}")


def patched(a, src, name, old, new):
    data = open(src, "rb").read()
    check(old in data, f"{old!r} not in {src}")
    out = os.path.join(a.work, name)
    with open(out, "wb") as f:
        f.write(data.replace(old, new, 1))
    return out


def test_errors(a, models):
    q8 = models["q8_0"]
    expect_error(a, ["quantize", "-m", a.tiny, "-o", "x.gguf", "--type", "q3"], 2, ["q3"],
                 "unknown type")
    expect_error(a, ["quantize", "-m", a.tiny], 2, ["-o"], "missing output")
    expect_error(a, ["quantize", "-m", os.path.join(a.work, "nope"), "-o",
                     os.path.join(a.work, "n.gguf")], 1, ["nope"], "missing source")
    expect_error(a, ["quantize", "-m", q8, "-o", os.path.join(a.work, "again.gguf")], 1,
                 ["checkpoint directory"], "GGUF source")
    expect_error(a, ["quantize", "-m", a.tiny, "-o", "/proc/kztts/x.gguf"], 1, ["x.gguf"],
                 "unwritable output")
    check(not os.path.exists(os.path.join(a.work, "n.gguf")), "partial output left")
    # A GGUF is a file to map, not a stream: -o - is refused, never a file named "-".
    r = run([a.kztts, "quantize", "-m", a.tiny, "-o", "-"], cwd=a.work)
    err = r.stderr.decode()
    check(r.returncode == 2 and "stdout" in err and err.count("\n") == 1,
          f"quantize -o -: exit {r.returncode}, {err!r}")
    check(not os.path.exists(os.path.join(a.work, "-")) and not r.stdout,
          "quantize -o - wrote a file named '-' or to stdout")
    data = open(q8, "rb").read()
    trunc = os.path.join(a.work, "truncated.gguf")
    with open(trunc, "wb") as f:
        f.write(data[: len(data) // 2])
    expect_error(a, ["info", "-m", trunc], 1, ["truncated.gguf"], "truncated GGUF")
    arch = patched(a, q8, "arch.gguf", b"qwen3-tts", b"qwen3-xyz")
    expect_error(a, ["info", "-m", arch], 1, ["general.architecture", "qwen3-xyz"],
                 "foreign architecture")
    miss = patched(a, q8, "missing.gguf", b"model.talker.model.norm.weight",
                   b"model.talker.model.nxrm.weight")
    expect_error(a, ["info", "-m", miss], 1, ["talker.model.norm.weight", "missing"],
                 "missing tensor")
    cfg = patched(a, q8, "config.gguf", b'"model_type": "qwen3_tts"', b'"model_type": "qwen3_xyz"')
    expect_error(a, ["info", "-m", cfg], 1, ["kztts.config.json", "qwen3_xyz"],
                 "config of another model type")


def decode(a, model, precision, tag):
    """The 40 golden frames decoded in precision (None: the file's default): (audio bytes,
    kztts info's precision line)."""
    out = os.path.join(a.work, f"{tag}.f32")
    option = ["--codec-precision", precision] if precision else []
    r = run([a.kztts, "decode", "-m", model, "--codes", os.path.join(a.golden, "codes_40.txt"),
             "-o", out] + option)
    check(r.returncode == 0, f"decode {tag}: {r.stderr.decode()}")
    info = run([a.kztts, "info", "-m", model] + option)
    line = [x for x in info.stdout.decode().splitlines() if x.startswith("codec precision:")]
    return (open(out, "rb").read() if r.returncode == 0 else b""), (line[0] if line else "")


def test_codec_forms(a, models):
    """--codec-forms P stores the codec as precision P converts it: a load in P maps those
    forms (kztts info says so) and decodes bit for bit as the plain file converted at load;
    loads in any other precision ignore them. Without --codec-precision the file runs in P
    (the file is the user's choice), `--codec-precision exact` (or f32) overrides that, and
    a plain file runs exact. A missing form is a clear error."""
    plain = models["q8_0"]
    exact, exact_line = decode(a, plain, None, "plain_default")
    check(exact and exact_line.startswith("codec precision: f32"),
          f"a file without forms does not default to f32: {exact_line!r}")
    for forms in ("winograd-bf16", "winograd", "bf16"):
        out = os.path.join(a.work, f"forms_{forms}.gguf")
        r = run([a.kztts, "quantize", "-m", a.tiny, "-o", out, "--codec-forms", forms])
        check(r.returncode == 0 and b"also in converted form" in r.stdout,
              f"quantize --codec-forms {forms}: {r.stdout!r} {r.stderr!r}")
        if r.returncode != 0:
            continue
        check(os.path.getsize(out) > os.path.getsize(plain), f"{forms}: no forms written")
        for precision in ("winograd-bf16", "winograd", "bf16", "f32"):
            want, want_line = decode(a, plain, precision, f"plain_{forms}_{precision}")
            got, got_line = decode(a, out, precision, f"forms_{forms}_{precision}")
            check(want and got == want, f"forms {forms}, precision {precision}: audio differs")
            # The precision in effect uses the stored forms only when they are its.
            in_effect = want_line.split(":")[1].split()[0] if ":" in want_line else "?"
            stored = "(forms stored in the file)" in got_line
            check(stored == (in_effect == forms), f"forms {forms}, precision {precision}: "
                  f"{got_line!r} (plain file: {want_line!r})")
            check(stored or f"(the file stores the forms of {forms})" in got_line,
                  f"forms {forms}, precision {precision}: unused forms not named: {got_line!r}")
            if precision == forms:
                in_p, in_p_line = got, got_line
        default, default_line = decode(a, out, None, f"forms_{forms}_default")
        check(default and default == in_p and default_line == in_p_line,
              f"forms {forms}: the default is not {forms}: {default_line!r} ({in_p_line!r})")
        for name in ("exact", "f32"):
            over, over_line = decode(a, out, name, f"forms_{forms}_{name}")
            check(over == exact and over_line.startswith("codec precision: f32 "),
                  f"forms {forms}: --codec-precision {name} does not override: {over_line!r}")
    # Kernels whose bf16 GEMM gains nothing (the scalar level) resolve fast to winograd:
    # forms of winograd-bf16 stay unused. The avx2 level (FMAs on widened bf16) uses them.
    # winograd-bf16 asked for runs from the stored forms at either level, with the audio
    # of the plain file at that level.
    wb16 = os.path.join(a.work, "forms_winograd-bf16.gguf")
    levels = (("scalar", b"winograd (the file stores the forms of winograd-bf16)"),
              ("avx2", b"winograd-bf16 (forms stored in the file)"))
    for isa, line in levels:
        info = run([a.kztts, "info", "-m", wb16, "--isa", isa, "--codec-precision", "fast"])
        if info.returncode != 0 or f"kernels: {isa}\n".encode() not in info.stdout:
            continue
        check(b"codec precision: " + line in info.stdout, f"forms at {isa}: {info.stdout!r}")
        outs = []
        for model in (plain, wb16):
            out = os.path.join(a.work, f"{isa}.f32")
            r = run([a.kztts, "decode", "-m", model, "--isa", isa, "--codec-precision",
                     "winograd-bf16", "--codes", os.path.join(a.golden, "codes_7.txt"),
                     "-o", out])
            outs.append(open(out, "rb").read() if r.returncode == 0 else b"")
        check(outs[0] and outs[0] == outs[1], f"forms at the {isa} level: audio differs")
    wino = os.path.join(a.work, "forms_winograd.gguf")
    for model, want in ((wino, True), (plain, False)):
        r = run([a.kztts, "bench", "-m", model, "--decoder-only", "--frames", "2", "--repeat",
                 "1", "--codec-precision", "winograd", "--json"])
        got = json.loads(r.stdout).get("codec_forms_stored") if r.returncode == 0 else None
        check(got is want, f"bench --json codec_forms_stored of {model}: {got} {r.stderr!r}")
    if os.path.isfile(wino):
        broken = patched(a, wino, "forms_missing.gguf", b".winograd", b".winogrit")
        expect_error(a, ["decode", "-m", broken, "--codes", os.path.join(a.golden, "codes_7.txt"),
                         "--codec-precision", "winograd", "-o", os.path.join(a.work, "x.f32")],
                     1, ["forms_missing.gguf", ".winograd", "missing"], "missing stored form")
        check(not os.path.exists(os.path.join(a.work, "x.f32")), "partial output left")
    expect_error(a, ["quantize", "-m", a.tiny, "-o", os.path.join(a.work, "f.gguf"),
                     "--codec-forms", "f32"], 2, ["--codec-forms", "f32"], "f32 forms")
    expect_error(a, ["quantize", "-m", a.tiny, "-o", os.path.join(a.work, "f.gguf"),
                     "--codec-forms", "fastest"], 2, ["--codec-forms", "fastest"], "unknown forms")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kztts", required=True)
    ap.add_argument("--tiny", required=True)
    ap.add_argument("--golden", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    # The tiny checkpoint with the real tokenizer files, as a released checkpoint has them.
    a.tiny = link_copy(a.tiny, os.path.join(a.work, "tiny"))
    for f in ("vocab.json", "merges.txt", "tokenizer_config.json"):
        shutil.copy(os.path.join(a.tokenizer, f), os.path.join(a.tiny, f))
    models = test_types(a)
    if all(os.path.isfile(path) for path in models.values()):  # else test_types failed
        test_order(a, models)
        test_exact(a, models)
        test_quantized(a, models)
        test_f16_checkpoint(a, models)
        test_errors(a, models)
        test_codec_forms(a, models)
    test_codec_only(a)
    finish("test_quantize")


if __name__ == "__main__":
    main()
