"""Greedy frame loop of Qwen3-TTS, the talker's logits processing, goldens and self-checks.

Mirrors what `Qwen3TTSForConditionalGeneration.generate` gets from
transformers 4.57.3 `GenerationMixin.generate` for the talker (and, nested in
the talker's forward, for the code predictor) with do_sample=False and
subtalker_dosample=False. The C twin is src/synth/synth.c plus sampler.c.

    prefill: talker on all P prompt rows; h = final-norm hidden of the last row
    c0 = pick(process(codec_head(h), history = []))          sampled token #1
    loop:
        stop if c0 == EOS (2150)                              this c0 never becomes a frame
        stop if n_sampled == max_new_tokens                   neither does this one
        c1..c15 = code_predictor(h, c0)                       fresh CP cache per frame
        frame f = [c0, c1, ..., c15]
        row = sum_i E_i[c_i] + (TR[f] if f < len(TR) else PAD_T), position P + f
        h = talker(row); c0 = pick(process(codec_head(h), history = all c0 so far))

Talker logits processing (HF order; steps 1-3 run in greedy mode too):
    1. repetition penalty over the SET of c0 tokens sampled so far:
       l = l * p if l < 0 else l / p        (fp32; skipped when p == 1.0)
    2. EOS -> -inf while fewer than min_new_tokens (2) tokens were sampled
    3. ids vocab_size-1024 .. vocab_size-1 except EOS -> -inf   (released: 2048..3071 \\ {2150})
    greedy: the first index of the maximum
Code predictor: plain argmax of the raw logits, exactly 15 codes per frame.

Engine test mode (n_frames = N): EOS is masked at every step and the loop runs
until N frames exist (the (N+1)-th c0 is not computed).

Base ICL audio (the wrapper's generate_voice_clone after generate):
    wav = chunked_decode(concat(ref_codes, codes))      300-frame windows, 25 of context
    cut = int(Tr / max(Tr + F, 1) * len(wav))           Python floats (IEEE double)
    out = wav[cut:]                                      Tr*1920 or, for some (Tr, F), Tr*1920-1
"""

import json
from dataclasses import dataclass, field
from typing import List, Optional

import torch

try:
    from . import safetensors_io as st
    from . import prompt as pr
    from . import talker as tk
    from . import codec_decoder as cd
except ImportError:
    import safetensors_io as st
    import prompt as pr
    import talker as tk
    import codec_decoder as cd

MIN_NEW_TOKENS = 2              # the official generate() passes min_new_tokens=2
WRAPPER_MAX_NEW_TOKENS = 2048   # wrapper fallback when generation_config.json lacks the key
WRAPPER_REPETITION_PENALTY = 1.05


def argmax_first(x):
    """Index of the maximum of a 1-D tensor, lowest index on ties."""
    return int(torch.nonzero(x == x.max())[0, 0])


def suppressed_ids(vocab_size, eos_id):
    """The official suppress_tokens: the last 1024 ids of the codec vocabulary except EOS."""
    return [i for i in range(vocab_size - 1024, vocab_size) if i != eos_id]


def process_talker_logits(logits, history, eos_id, suppress, repetition_penalty,
                          min_new_tokens=MIN_NEW_TOKENS, mask_eos=False):
    """Raw talker logits [V] -> processed copy (steps 1-3 above).

    history: c0 tokens sampled so far in this utterance (len = tokens generated).
    mask_eos: mask EOS at every step (engine test mode).
    """
    l = logits.clone().float()
    if repetition_penalty != 1.0 and history:
        idx = torch.tensor(sorted(set(int(t) for t in history)), dtype=torch.long)
        s = l[idx]
        l[idx] = torch.where(s < 0, s * repetition_penalty, s / repetition_penalty)
    if mask_eos or len(history) < min_new_tokens:
        l[eos_id] = float("-inf")
    l[suppress] = float("-inf")
    return l


@dataclass
class GenerationResult:
    codes: torch.Tensor                  # [F, G] long
    talker_logits: torch.Tensor          # [F, V] raw logits that produced c0 of each frame
    talker_hidden: torch.Tensor          # [F, D] final-norm hidden handed to the code predictor
    cp_logits: torch.Tensor              # [F or 1, G-1, Vc] raw code-predictor logits
    c0_sampled: List[int]                # every c0 picked, including a final non-frame one
    stop: str                            # "eos", "max_new_tokens" or "frames"
    stop_logits: Optional[torch.Tensor]  # [V] raw logits of the final non-frame c0 (or None)
    margins: List[float] = field(default_factory=list)   # top1 - top2 of processed c0 logits


def generate_greedy(model, prompt, n_frames=None, max_new_tokens=None, repetition_penalty=None,
                    keep_cp_logits=False, min_new_tokens=MIN_NEW_TOKENS):
    """Greedy frames for a Prompt.

    n_frames: exactly this many frames, EOS masked out at every step.
    max_new_tokens: natural stop at EOS or when this many c0 tokens were sampled
                    (-> at most max_new_tokens - 1 frames). Default: generation_config.json
                    max_new_tokens, else 2048 (the wrapper's rule).
    repetition_penalty: default generation_config.json value, else 1.05.
    keep_cp_logits: keep the code-predictor logits of every frame (else frame 0 only).
    """
    gc = model.generation_config
    if repetition_penalty is None:
        repetition_penalty = gc.get("repetition_penalty", WRAPPER_REPETITION_PENALTY)
    if n_frames is None and max_new_tokens is None:
        max_new_tokens = gc.get("max_new_tokens", WRAPPER_MAX_NEW_TOKENS)
    tcfg = model.talker_cfg
    eos_id = tcfg["codec_eos_token_id"]
    suppress = suppressed_ids(model.vocab_size, eos_id)
    talker, cp = model.talker, model.code_predictor

    def pick_c0(raw, history):
        l = process_talker_logits(raw, history, eos_id, suppress, repetition_penalty,
                                  min_new_tokens, mask_eos=n_frames is not None)
        c0 = argmax_first(l)
        top2 = torch.topk(l, 2).values
        return c0, float(top2[0] - top2[1])

    cache = talker.stack.new_cache()
    h_all, logits_all = talker.forward(prompt.embeds, cache)
    h, raw = h_all[-1], logits_all[-1]
    c0, margin = pick_c0(raw, [])
    sampled, margins = [c0], [margin]
    codes, t_logits, t_hidden, c_logits = [], [], [], []
    stop, stop_logits = "frames", None
    while True:
        if n_frames is None:
            if c0 == eos_id:
                stop, stop_logits = "eos", raw
                break
            if len(sampled) == max_new_tokens:
                stop, stop_logits = "max_new_tokens", raw
                break
        rest, cpl = cp.predict(h, talker.codec_embedding[c0], argmax_first)
        frame = [c0] + rest
        codes.append(frame)
        t_logits.append(raw)
        t_hidden.append(h)
        if keep_cp_logits or not c_logits:
            c_logits.append(cpl)
        if n_frames is not None and len(codes) == n_frames:
            break
        row = model.frame_embedding(frame) + prompt.trailing_row(len(codes) - 1)
        h_new, logits_new = talker.forward(row[None], cache)
        h, raw = h_new[0], logits_new[0]
        c0, margin = pick_c0(raw, sampled)
        sampled.append(c0)
        margins.append(margin)

    dim, vocab = model.hidden_size, model.vocab_size
    n_groups, vc = model.n_groups, cp.cfg["vocab_size"]
    return GenerationResult(
        codes=torch.tensor(codes, dtype=torch.long).view(-1, n_groups),
        talker_logits=torch.stack(t_logits) if t_logits else torch.zeros(0, vocab),
        talker_hidden=torch.stack(t_hidden) if t_hidden else torch.zeros(0, dim),
        cp_logits=torch.stack(c_logits) if c_logits else torch.zeros(0, n_groups - 1, vc),
        c0_sampled=sampled, stop=stop, stop_logits=stop_logits, margins=margins)


# ---------------------------------------------------------------- Base ICL audio

def icl_cut(n_ref, n_total, wav_len):
    """The wrapper's cut: int(ref_len / max(total_len, 1) * wav.shape[0]) (double)."""
    return int(n_ref / max(n_total, 1) * wav_len)


def icl_official_audio(model_dir, ref_codes, codes):
    """The official ICL output for new `codes` [F, G] after `ref_codes` [Tr, G]: the
    reference's chunked_decode of both, the reference part cut off. Returns (wav, cut)."""
    dec = cd.load_decoder(model_dir)
    both = torch.cat([torch.as_tensor(ref_codes, dtype=torch.long),
                      torch.as_tensor(codes, dtype=torch.long)])
    wav = dec.chunked_decode(dec.check_codes(both))
    cut = icl_cut(int(ref_codes.shape[0]), int(both.shape[0]), int(wav.shape[0]))
    return wav[cut:].contiguous(), cut


# ---------------------------------------------------------------- golden file

def golden_tensors(model, prompt, result, all_cp_logits=False, extra=None):
    """Dict of the golden tensors (F32 / I32); extra: more named tensors (Base: the
    speaker vector, reference codes, transcript ids and ICL audio)."""
    out = {
        "codes": result.codes.to(torch.int32),
        "prefill_embeds": prompt.embeds,
        "trailing_text": prompt.trailing,
        "pad_text": prompt.pad,
        "talker_logits": result.talker_logits,
        "talker_hidden": result.talker_hidden,
        "c0_sampled": torch.tensor(result.c0_sampled, dtype=torch.int32),
        "input_ids": torch.tensor(prompt.input_ids, dtype=torch.int32),
    }
    if len(result.codes):
        out["talker_logits_0"] = result.talker_logits[0]
        out["talker_hidden_0"] = result.talker_hidden[0]
        out["cp_logits_0"] = result.cp_logits[0]
    if all_cp_logits:
        out["cp_logits"] = result.cp_logits
    if result.stop_logits is not None:
        out["talker_logits_stop"] = result.stop_logits
    if prompt.instruct_ids is not None:
        out["instruct_ids"] = torch.tensor(prompt.instruct_ids, dtype=torch.int32)
    out.update(extra or {})
    return {k: v.contiguous() for k, v in out.items()}


def write_golden(path, model, prompt, result, all_cp_logits=False, extra=None, extra_meta=None):
    meta = {
        "n_frames": len(result.codes),
        "n_prompt_rows": prompt.embeds.shape[0],
        "layout": "non_streaming" if prompt.non_streaming else "streaming",
        "stop": result.stop,
        "variant": model.variant,
        "size": model.size,
        "language_id": "auto" if prompt.language_id is None else prompt.language_id,
        "speaker": prompt.speaker or "",
        "instruction": "used" if prompt.instruct_ids is not None else "none",
        "notes": "; ".join(prompt.notes),
        "prompt_rows": json.dumps(prompt.rows),
        "trailing_rows": json.dumps(prompt.trailing_rows),
        "min_c0_margin": f"{min(result.margins):.6g}" if result.margins else "",
        "icl": "yes" if prompt.icl else "no",
    }
    meta.update(extra_meta or {})
    st.save(path, golden_tensors(model, prompt, result, all_cp_logits, extra), metadata=meta)


# ---------------------------------------------------------------- self-checks

class _Checks:
    def __init__(self, verbose):
        self.verbose, self.passed, self.failed = verbose, 0, 0

    def check(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        if self.verbose or not ok:
            print(f"{'ok  ' if ok else 'FAIL'} {what}", flush=True)

    def info(self, what):
        if self.verbose:
            print(f"info {what}", flush=True)


def _spec_rows(model, text, instr, tags, spk_vec, non_streaming):
    """Prompt rows composed directly from the spec's table (8.2 / 8.2.1), independently of
    build_prompt: returns (rows [P, D], trailing [R, D])."""
    t = model.talker
    T = lambda i: t.text_vectors([i])[0]
    C = lambda i: t.codec_vectors([i])[0]
    cfg, tc = model.cfg, model.talker_cfg
    PAD, BOS, EOS = T(cfg["tts_pad_token_id"]), T(cfg["tts_bos_token_id"]), T(cfg["tts_eos_token_id"])
    ti = model.text_ids
    rows = []
    if instr:
        rows += [T(i) for i in [ti.im_start, ti.user, ti.newline] + instr + [ti.im_end, ti.newline]]
    rows += [T(ti.im_start), T(ti.assistant), T(ti.newline)]
    ctrack = [C(g) for g in tags] + ([spk_vec] if spk_vec is not None else [])
    rows += [PAD + c for c in ctrack]
    rows.append(BOS + C(tc["codec_pad_id"]))
    if non_streaming:
        rows += [T(i) + C(tc["codec_pad_id"]) for i in text]
        rows.append(EOS + C(tc["codec_pad_id"]))
        rows.append(PAD + C(tc["codec_bos_id"]))
        trailing = [PAD]
    else:
        rows.append(T(text[0]) + C(tc["codec_bos_id"]))
        trailing = [T(i) for i in text[1:]] + [EOS]
    return torch.stack(rows), torch.stack(trailing)


def _check_prompts(model, c):
    tc = model.talker_cfg
    text, instr = [9707, 11, 1879, 0], [40, 1079]
    think, bos_tag, eos_tag = tc["codec_think_id"], tc["codec_think_bos_id"], tc["codec_think_eos_id"]
    nothink = tc["codec_nothink_id"]
    langs = tc.get("codec_language_id") or {}
    speakers = sorted((tc.get("spk_id") or {}).keys())
    cases = []   # (label, kwargs, expected tags, speaker, instruction given, instruction kept)
    spk = "ryan" if "ryan" in speakers else (speakers[0] if speakers else None)
    if model.variant == "custom_voice":
        if spk is None:
            c.info("custom_voice checkpoint without speakers: prompt checks skipped")
            return
        drop = isinstance(model.size, str) and model.size in "0b6"
        plain = [s for s in speakers if (tc.get("spk_is_dialect") or {}).get(s) is False]
        spk = "ryan" if "ryan" in plain else plain[0]
        cases.append(("8.2.1 English/Ryan/instruction", dict(speaker=spk.capitalize(),
                      language="English"), [think, bos_tag, langs["english"], eos_tag], spk,
                      True, not drop))
        cases.append(("auto, no instruction", dict(speaker=spk, language="Auto"),
                      [nothink, bos_tag, eos_tag], spk, False, False))
        if "dylan" in speakers:
            dial = langs[tc["spk_is_dialect"]["dylan"]]
            cases.append(("Dylan + chinese -> dialect", dict(speaker="Dylan", language="chinese"),
                          [think, bos_tag, dial, eos_tag], "dylan", False, False))
            cases.append(("Dylan + auto -> dialect", dict(speaker="dylan", language="auto"),
                          [think, bos_tag, dial, eos_tag], "dylan", False, False))
            cases.append(("Dylan + english keeps english", dict(speaker="dylan", language="english"),
                          [think, bos_tag, langs["english"], eos_tag], "dylan", False, False))
    elif model.variant == "voice_design":
        cases.append(("voice design, english, instruction", dict(language="english"),
                      [think, bos_tag, langs["english"], eos_tag], None, True, True))
        cases.append(("voice design, auto, no instruction", dict(language="auto"),
                      [nothink, bos_tag, eos_tag], None, False, False))
    else:
        _check_base_prompts(model, c, text)
        return
    for label, kw, tags, spk_name, give, use_instr in cases:
        for non_streaming in (True, False):
            give_instr = instr if give else None
            p = pr.build_prompt(model, text_ids=text, instruct_ids=give_instr,
                                non_streaming=non_streaming, **kw)
            spk_vec = None
            if spk_name is not None:
                spk_vec = model.talker.codec_vectors([pr.speaker_id(tc, spk_name)])[0]
            rows, trailing = _spec_rows(model, text, instr if use_instr else None, tags,
                                        spk_vec, non_streaming)
            n_expect = ((len(instr) + 5) if use_instr else 0) + 3 + len(tags) + \
                (1 if spk_vec is not None else 0) + 1 + \
                (len(text) + 2 if non_streaming else 1)
            layout = "non_streaming" if non_streaming else "streaming"
            same = (p.embeds.shape == rows.shape and torch.equal(p.embeds, rows)
                    and torch.equal(p.trailing, trailing))
            c.check(same and p.embeds.shape[0] == n_expect,
                    f"prompt {label} [{layout}]: {p.embeds.shape[0]} rows "
                    f"(expected {n_expect}), trailing {p.trailing.shape[0]}, rows equal spec table")
            if label.startswith("8.2.1") and non_streaming:
                c.info("8.2.1 rows: " + " | ".join(p.rows))
    if model.variant == "custom_voice" and isinstance(model.size, str) and model.size in "0b6":
        p = pr.build_prompt(model, text_ids=text, instruct_ids=instr, speaker=spk)
        q = pr.build_prompt(model, text_ids=text, speaker=spk)
        c.check(torch.equal(p.embeds, q.embeds) and p.instruct_ids is None,
                f"size {model.size}: instruction ignored (wrapper rule `size in \"0b6\"`)")
    # empty text: ids[3:4] is <|im_end|> (literal slicing)
    p = pr.build_prompt(model, text_ids=[], speaker=spk if model.variant == "custom_voice" else None,
                        non_streaming=False)
    c.check(p.rows[-1].startswith(f"T({model.text_ids.im_end})") and p.trailing_rows == ["EOS_T"],
            "empty text, streaming: first body row is T(<|im_end|>), TR = [EOS_T]")


def _spec_icl_rows(model, text, spk_vec, ref_text, ref_codes, non_streaming):
    """Base ICL rows composed from spec 8.4 step by step, independently of build_prompt."""
    t, cfg, tc = model.talker, model.cfg, model.talker_cfg
    T = lambda i: t.text_vectors([i])[0]
    C = lambda i: t.codec_vectors([i])[0]
    PAD, BOS, EOS = T(cfg["tts_pad_token_id"]), T(cfg["tts_bos_token_id"]), T(cfg["tts_eos_token_id"])
    ti = model.text_ids
    rows = [T(ti.im_start), T(ti.assistant), T(ti.newline)]
    tags = [tc["codec_nothink_id"], tc["codec_think_bos_id"], tc["codec_think_eos_id"]]
    rows += [PAD + C(g) for g in tags] + [PAD + spk_vec, BOS + C(tc["codec_pad_id"])]
    X = [T(i) for i in list(ref_text) + list(text)] + [EOS]
    Y = [C(tc["codec_bos_id"])] + [model.frame_embedding(f) for f in ref_codes]
    if non_streaming:
        rows += [x + C(tc["codec_pad_id"]) for x in X] + [y + PAD for y in Y]
        trailing = [PAD]
    else:
        for k in range(len(Y)):
            rows.append((X[k] if k < len(X) else PAD) + Y[k])
        trailing = X[len(Y):] if len(X) > len(Y) else [PAD]
    return torch.stack(rows), torch.stack(trailing)


def _check_base_prompts(model, c, text):
    """Base: the x-vector in the speaker slot, and the ICL block in both layouts and both
    length regimes (text column longer / shorter than the codec column), against 8.2 / 8.4."""
    tc = model.talker_cfg
    g = torch.Generator().manual_seed(4)
    spk = torch.randn(model.hidden_size, generator=g)
    tags = [tc["codec_nothink_id"], tc["codec_think_bos_id"], tc["codec_think_eos_id"]]
    for non_streaming in (True, False):
        layout = "non_streaming" if non_streaming else "streaming"
        p = pr.build_prompt(model, text_ids=text, speaker_embed=spk, non_streaming=non_streaming)
        rows, trailing = _spec_rows(model, text, None, tags, spk, non_streaming)
        c.check(torch.equal(p.embeds, rows) and torch.equal(p.trailing, trailing),
                f"Base x-vector prompt [{layout}]: {p.embeds.shape[0]} rows equal the spec table")
        for n_ref in (2, 12):
            ref_text = [40, 1079, 13]
            codes = torch.randint(0, model.code_predictor.cfg["vocab_size"], (n_ref, model.n_groups),
                                  generator=g)
            p = pr.build_prompt(model, text_ids=text, speaker_embed=spk, ref_codes=codes,
                                ref_text_ids=ref_text, non_streaming=non_streaming)
            rows, trailing = _spec_icl_rows(model, text, spk, ref_text, codes, non_streaming)
            n_x, n_y = len(ref_text) + len(text) + 1, n_ref + 1
            c.check(torch.equal(p.embeds, rows) and torch.equal(p.trailing, trailing),
                    f"Base ICL prompt [{layout}], X {n_x} vs Y {n_y} rows: {p.embeds.shape[0]} "
                    f"rows, trailing {p.trailing.shape[0]}, equal spec 8.4")
    c.check(gen_cut_examples(), "ICL cut: trunc(Tr / (Tr+F) * wav_len) in double is Tr*1920 - 1 "
            "for Tr=15, F=7 and Tr=53, F=30, Tr*1920 for Tr=9, F=30")


def gen_cut_examples():
    return (icl_cut(15, 22, 22 * 1920) == 15 * 1920 - 1 and
            icl_cut(53, 83, 83 * 1920) == 53 * 1920 - 1 and icl_cut(9, 39, 39 * 1920) == 9 * 1920)


def _check_cache(model, c):
    """Incremental decoding equals one-shot recomputation (talker and code predictor)."""
    t, cp = model.talker, model.code_predictor
    g = torch.Generator().manual_seed(1)
    rows = torch.randn(7, model.hidden_size, generator=g)
    full = t.stack.forward(rows, t.stack.new_cache())
    cache = t.stack.new_cache()
    part = torch.cat([t.stack.forward(rows[:4], cache)] +
                     [t.stack.forward(rows[i:i + 1], cache) for i in range(4, 7)])
    d = float((full - part).abs().max())
    c.check(d < 1e-4, f"talker: prefill 4 + 3 single steps equals one pass of 7 (max diff {d:.2e})")
    n = model.n_groups
    x = torch.randn(n, cp.cfg["hidden_size"], generator=g)
    full = cp.stack.forward(x, cp.stack.new_cache())
    cache = cp.stack.new_cache()
    part = torch.cat([cp.stack.forward(x[:2], cache)] +
                     [cp.stack.forward(x[i:i + 1], cache) for i in range(2, n)])
    d = float((full - part).abs().max())
    c.check(d < 1e-4, f"code predictor: 2-row prefill + {n - 2} steps equals one pass "
            f"(max diff {d:.2e})")


def _check_rope(model, c):
    """inv_freq equals the spec 3.2 recipe (fp32 power, fp32 reciprocal) up to torch's pow ulps."""
    for name, stack in (("talker", model.talker.stack), ("code predictor", model.code_predictor.stack)):
        hd, theta = stack.head_dim, (model.talker_cfg if name == "talker" else model.cp_cfg)["rope_theta"]
        ref = []
        for j in range(hd // 2):
            p32 = torch.tensor(float(theta) ** (2 * j / hd), dtype=torch.float32)   # rounded power
            ref.append(float(torch.tensor(1.0, dtype=torch.float32) / p32))
        ref = torch.tensor(ref, dtype=torch.float32)
        n_diff = int((ref != stack.inv_freq).sum())
        ulp = float(((ref - stack.inv_freq).abs() / ref.abs()).max())
        c.check(ulp < 2.5e-7, f"{name} inv_freq (head_dim {hd}, theta {theta}): {n_diff} entries "
                f"differ from the correctly rounded recipe, max rel diff {ulp:.1e}")


def _check_generation(model, c, n_frames=30):
    tc = model.talker_cfg
    spk = None
    if model.variant == "custom_voice" and tc.get("spk_id"):
        spk = "ryan" if "ryan" in tc["spk_id"] else sorted(tc["spk_id"])[0]
    if model.variant == "base":
        c.info("base checkpoint: generation check uses a random speaker vector (x-vector mode)")
    kw = dict(speaker=spk)
    if model.variant == "base":
        g = torch.Generator().manual_seed(3)
        kw = dict(speaker_embed=torch.randn(model.hidden_size, generator=g))
    text = [9707, 11, 1879, 0, 21927, 374]
    for layout in (True, False):
        p = pr.build_prompt(model, text_ids=text, non_streaming=layout, **kw)
        r = generate_greedy(model, p, n_frames=n_frames, keep_cp_logits=True)
        name = "non_streaming" if layout else "streaming"
        codes = r.codes
        c.check(codes.shape == (n_frames, model.n_groups),
                f"[{name}] --frames {n_frames}: codes {list(codes.shape)}")
        first_control = model.vocab_size - 1024
        c.check(bool((codes >= 0).all()) and bool((codes[:, 0] < first_control).all())
                and bool((codes[:, 1:] < model.code_predictor.cfg["vocab_size"]).all()),
                f"[{name}] codes in range (c0 < {first_control})")
        fin = all(bool(torch.isfinite(x).all()) for x in (p.embeds, r.talker_logits,
                                                           r.talker_hidden, r.cp_logits))
        c.check(fin, f"[{name}] prompt, talker logits/hidden and CP logits finite")
        tl, cl = r.talker_logits, r.cp_logits
        c.check(float(tl.std()) > 0.1 and float(cl.std()) > 0.1,
                f"[{name}] logits non-trivial: talker std {float(tl.std()):.3f}, "
                f"CP std {float(cl.std()):.3f}")
        n_c0 = len(set(codes[:, 0].tolist()))
        n_cb = [len(set(codes[:, i].tolist())) for i in range(model.n_groups)]
        c.check(n_c0 > 1, f"[{name}] {n_c0} distinct c0 codes over {n_frames} frames "
                f"(distinct per codebook: {n_cb})")
        eos = tc["codec_eos_token_id"]
        n_codes = model.vocab_size - 1024
        ranks = [int((tl[f, :n_codes] > tl[f, eos]).sum()) for f in range(n_frames)]
        c.info(f"[{name}] EOS raw-logit rank among the {n_codes} codes per frame: min {min(ranks)}, "
               f"median {sorted(ranks)[len(ranks) // 2]}; min c0 margin {min(r.margins):.3g}")
        c.info(f"[{name}] c0: {codes[:, 0].tolist()}")
    # natural stop
    p = pr.build_prompt(model, text_ids=text, **kw)
    r = generate_greedy(model, p, max_new_tokens=n_frames + 1)
    c.check(len(r.codes) == (n_frames if r.stop == "max_new_tokens" else len(r.c0_sampled) - 1)
            and len(r.c0_sampled) == len(r.codes) + 1,
            f"natural stop with max_new_tokens {n_frames + 1}: {len(r.codes)} frames, "
            f"stop {r.stop}, {len(r.c0_sampled)} c0 sampled")
    if len(r.codes):
        first = generate_greedy(model, p, n_frames=len(r.codes))
        c.check(torch.equal(first.codes, r.codes),
                "--frames and natural-stop runs agree on the common frames")
    r1 = generate_greedy(model, p, max_new_tokens=1)
    c.check(len(r1.codes) == 0 and r1.stop == "max_new_tokens",
            "max_new_tokens 1 yields no frame (the official code then fails on an empty list)")


def self_test(path, verbose=True):
    model = tk.load_model(path)
    c = _Checks(verbose)
    c.info(f"{path}: variant {model.variant}, size {model.size}, talker hidden "
           f"{model.hidden_size}, CP hidden {model.cp_cfg['hidden_size']}, projection "
           f"{'yes' if model.code_predictor.projection is not None else 'no'}")
    _check_rope(model, c)
    _check_cache(model, c)
    _check_prompts(model, c)
    _check_generation(model, c)
    print(f"{c.passed} passed, {c.failed} failed", flush=True)
    return c.failed == 0
