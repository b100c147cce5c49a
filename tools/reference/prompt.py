"""Talker prompt (prefill rows and trailing text rows) for every Qwen3-TTS voice mode.

Mirrors the prompt half of `Qwen3TTSForConditionalGeneration.generate` and
`generate_icl_prompt` in the official qwen_tts/core/models/modeling_qwen3_tts.py,
plus the argument handling of the wrapper `Qwen3TTSModel.generate_custom_voice` /
`generate_voice_design` / `generate_voice_clone` in qwen_tts/inference/qwen3_tts_model.py.
Input is token ids: tokenized by the caller (talker.py --text uses tokenizer.py on
the checkpoint's files) or given as ids and wrapped here. The C twin is
src/synth/prompt.c.

Notation: T(id) = text_projection(text_embedding[id]); C(id) = talker
codec_embedding[id]; PAD_T, BOS_T, EOS_T = T(tts_pad), T(tts_bos), T(tts_eos)
(151671, 151672, 151673 in the released files); S = speaker row; "+" sums a
text-track and a codec-track vector into one row. Every id comes from the
checkpoint (TextIds): im_start/im_end/assistant from config.json, "\\n" and "user"
from its tokenizer (151644, 151645, 77091, 198 and 872 in the released files).

    ids    = [im_start, assistant, nl] + text ids + [im_end, nl, im_start, assistant, nl]
             (the wrapper's "<|im_start|>assistant\\n{text}<|im_end|>\\n<|im_start|>assistant\\n")
    instr  = [im_start, user, nl] + instruction ids + [im_end, nl]
             ("<|im_start|>user\\n{instruct}<|im_end|>\\n")
    G      = [nothink, think_bos, think_eos]              language auto (no dialect)
           | [think, think_bos, lang_id, think_eos]       otherwise
    Ctrack = C(G) ++ [S if any] ++ [C(pad), C(bos)]       length L

    rows:  T(instr)                                       instruction (if given)
           T(ids[0:3])                                    role
           PAD_T + Ctrack[0 .. L-3], BOS_T + Ctrack[L-2]  tags (L-1 rows)
           body:
             streaming      T(ids[3]) + C(bos)                          TR = T(ids[4:-5]) ++ [EOS_T]
             non-streaming  T(ids[3:-5]) ++ [EOS_T]  each + C(pad),
                            then PAD_T + C(bos)                         TR = [PAD_T]
             ICL (Base)     see build_icl_rows

Generated frame f adds TR[f] (PAD_T once TR is used up) to its codec sum.

Wrapper rules reproduced here: language names are case-insensitive and must be
"auto" or a non-dialect key of codec_language_id; speaker names are
case-insensitive keys of spk_id; a CustomVoice speaker whose spk_is_dialect is a
string replaces the language by that dialect when the language is chinese or
auto; an empty instruction means none; CustomVoice checkpoints whose
tts_model_size is a substring of "0b6" (the wrapper tests `size in "0b6"`) drop
the instruction; VoiceDesign takes no speaker.
"""

from dataclasses import dataclass, field
from typing import List, Optional

import torch

@dataclass
class TextIds:
    """The ids that wrap text, from a checkpoint's files (None where they cannot be known)."""
    im_start: int
    im_end: int
    assistant: Optional[int]   # config.json assistant_token_id
    newline: Optional[int]     # the tokenizer's single id for "\\n"
    user: Optional[int]        # the tokenizer's id of "user"

    def need(self, *names):
        missing = [n for n in names if getattr(self, n) is None]
        if missing:
            raise ValueError(f"the checkpoint does not state the ids of {missing} "
                             "(no tokenizer files, or no assistant_token_id in config.json)")


def text_ids_of(cfg, tok):
    """TextIds from config.json (dict) and the checkpoint's tokenizer (tokenizer.py, or None)."""
    newline = user = None
    if tok is not None:
        nl = tok.encode("\n")
        newline = nl[0] if len(nl) == 1 else None
        user = tok.vocab.get("user")
    return TextIds(im_start=cfg.get("im_start_token_id", 151644),
                   im_end=cfg.get("im_end_token_id", 151645),
                   assistant=cfg.get("assistant_token_id"), newline=newline, user=user)


def wrap_text_ids(ids, text_ids):
    """Token ids of "<|im_start|>assistant\\n{text}<|im_end|>\\n<|im_start|>assistant\\n"."""
    ids.need("assistant", "newline")
    role = [ids.im_start, ids.assistant, ids.newline]
    return role + list(text_ids) + [ids.im_end, ids.newline] + role


def wrap_ref_text_ids(ids, ref_text_ids):
    """Token ids of "<|im_start|>assistant\\n{ref_text}<|im_end|>\\n" (ICL transcript)."""
    ids.need("assistant", "newline")
    return [ids.im_start, ids.assistant, ids.newline] + list(ref_text_ids) + [ids.im_end,
                                                                            ids.newline]


def wrap_instruct_ids(ids, instruct_ids):
    """Token ids of "<|im_start|>user\\n{instruct}<|im_end|>\\n"."""
    ids.need("user", "newline")
    return [ids.im_start, ids.user, ids.newline] + list(instruct_ids) + [ids.im_end, ids.newline]


@dataclass
class Prompt:
    embeds: torch.Tensor                 # [P, D] prefill rows
    trailing: torch.Tensor               # [R, D] text-track rows added to generated frames
    pad: torch.Tensor                    # [D] PAD_T, added once `trailing` is used up
    rows: List[str]                      # one label per prefill row, e.g. "PAD_T + C(2154)"
    trailing_rows: List[str]             # one label per trailing row
    input_ids: List[int]                 # the wrapped assistant ids
    instruct_ids: Optional[List[int]]    # the wrapped instruction ids, None if no instruction
    language_id: Optional[int]           # codec language tag, None for auto
    speaker: Optional[str]               # lower-cased speaker name (CustomVoice)
    non_streaming: bool
    icl: bool = False
    notes: List[str] = field(default_factory=list)

    def trailing_row(self, frame):
        """Text-track vector added to the talker input of generated frame `frame`."""
        return self.trailing[frame] if frame < self.trailing.shape[0] else self.pad


class _Rows:
    """Accumulates (vector, label) pairs."""

    def __init__(self):
        self.vecs, self.labels = [], []

    def add(self, vecs, labels):
        assert vecs.shape[0] == len(labels)
        self.vecs.append(vecs)
        self.labels.extend(labels)

    def tensor(self, dim):
        return torch.cat(self.vecs) if self.vecs else torch.zeros(0, dim)


def default_layout(model):
    """The wrapper's default non_streaming_mode: True for CustomVoice/VoiceDesign, False for Base."""
    return "streaming" if model.variant == "base" else "non_streaming"


def supported_languages(talker_cfg):
    """"auto" plus the codec_language_id names without "dialect" (the wrapper's list)."""
    names = ["auto"] + [k for k in (talker_cfg.get("codec_language_id") or {})
                        if "dialect" not in k]
    return names


def resolve_language(talker_cfg, language, speaker):
    """Codec language tag (None for auto) after the wrapper's validation and dialect override."""
    language = "auto" if language is None else str(language)
    lang = language.lower()
    if lang not in supported_languages(talker_cfg):
        raise ValueError(f"unsupported language {language!r}; supported: "
                         f"{sorted(supported_languages(talker_cfg))}")
    lang_ids = talker_cfg.get("codec_language_id") or {}
    language_id = None if lang == "auto" else int(lang_ids[lang])
    if lang in ("chinese", "auto") and speaker:
        dialect = (talker_cfg.get("spk_is_dialect") or {})[speaker]
        if dialect is not False:
            language_id = int(lang_ids[dialect])
    return language_id


def speaker_id(talker_cfg, speaker):
    """codec_embedding row of a CustomVoice speaker name (spk_id value: int or [int])."""
    table = talker_cfg.get("spk_id") or {}
    if speaker not in table:
        raise ValueError(f"unsupported speaker {speaker!r}; supported: {sorted(table)}")
    sid = table[speaker]
    if isinstance(sid, list):
        if len(sid) != 1:
            raise ValueError(f"spk_id[{speaker!r}] = {sid}: expected one id")
        sid = sid[0]
    return int(sid)


def resolve_instruction(model, instruct_ids, notes, wrapped=False):
    """Wrapped instruction ids or None, applying the wrapper's per-variant rules.
    wrapped: instruct_ids are already the whole wrapped string's ids."""
    if instruct_ids is None or len(instruct_ids) == 0:
        return None
    if model.variant == "base":
        raise ValueError("Base checkpoints take no instruction")
    size = model.size if isinstance(model.size, str) else ""
    if model.variant == "custom_voice" and size in "0b6":
        notes.append(f"instruction dropped: CustomVoice with tts_model_size {model.size!r}")
        return None
    return list(instruct_ids) if wrapped else wrap_instruct_ids(model.text_ids, instruct_ids)


def build_prompt(model, text_ids=None, input_ids=None, instruct_ids=None, speaker=None,
                 language="auto", non_streaming=None, speaker_embed=None,
                 ref_text_ids=None, ref_codes=None, instruct_wrapped=False):
    """Prefill rows and trailing text rows for one request.

    text_ids:      token ids of the user text only; wrapped with wrap_text_ids. Exact
                   when the wrapped string tokenizes as the concatenation (not so for
                   a text starting with a newline, which merges with the "\\n" before it).
    input_ids:     alternatively the whole wrapped assistant ids, sliced literally.
    instruct_ids:  token ids of the instruction only (None or [] = no instruction), or
                   with instruct_wrapped those of the whole wrapped instruction string.
    speaker:       CustomVoice speaker name (None or "" = no speaker row).
    language:      "auto" or a language name, case-insensitive.
    non_streaming: body layout; None = the wrapper's default for the variant.
    speaker_embed: Base only: speaker-encoder vector [D] for the speaker slot.
    ref_text_ids, ref_codes: Base ICL only: reference transcript ids (unwrapped) and
                   reference codes [Tr, G] (LongTensor).
    """
    talker, tcfg = model.talker, model.talker_cfg
    dim = model.hidden_size
    notes = []
    if (text_ids is None) == (input_ids is None):
        raise ValueError("give exactly one of text_ids and input_ids")
    ids = wrap_text_ids(model.text_ids, text_ids) if input_ids is None else list(input_ids)
    if len(ids) < 8:
        raise ValueError("input_ids must hold the 3 role ids and the 5 closing ids")
    if non_streaming is None:
        non_streaming = default_layout(model) == "non_streaming"
    instr = resolve_instruction(model, instruct_ids, notes, instruct_wrapped)

    spk_name, spk_vec, spk_label = None, None, None
    if model.variant == "base":
        if speaker:
            raise ValueError("Base checkpoints take a speaker vector, not a speaker name")
        if speaker_embed is None:
            raise ValueError("Base checkpoints need speaker_embed (speaker-encoder vector)")
        spk_vec, spk_label = torch.as_tensor(speaker_embed).float().view(1, dim), "S"
    else:
        if speaker_embed is not None or ref_codes is not None:
            raise ValueError("speaker_embed and ICL references are for Base checkpoints")
        if model.variant == "voice_design" and speaker:
            raise ValueError("VoiceDesign takes no speaker")
        if speaker:
            spk_name = str(speaker).lower()
            sid = speaker_id(tcfg, spk_name)
            spk_vec, spk_label = talker.codec_vectors([sid]), f"C({sid})"
    language_id = resolve_language(tcfg, language, spk_name)

    pad_t, bos_t, eos_t = talker.text_vectors(
        [model.cfg["tts_pad_token_id"], model.cfg["tts_bos_token_id"],
         model.cfg["tts_eos_token_id"]])
    codec_pad, codec_bos = tcfg["codec_pad_id"], tcfg["codec_bos_id"]

    # codec track: tags, speaker, pad, bos
    if language_id is None:
        tags = [tcfg["codec_nothink_id"], tcfg["codec_think_bos_id"], tcfg["codec_think_eos_id"]]
    else:
        tags = [tcfg["codec_think_id"], tcfg["codec_think_bos_id"], language_id,
                tcfg["codec_think_eos_id"]]
    ctrack = [talker.codec_vectors(tags)]
    clabels = [f"C({g})" for g in tags]
    if spk_vec is not None:
        ctrack.append(spk_vec)
        clabels.append(spk_label)
    ctrack.append(talker.codec_vectors([codec_pad, codec_bos]))
    clabels += [f"C({codec_pad})", f"C({codec_bos})"]
    ctrack = torch.cat(ctrack)
    n_tag = ctrack.shape[0]

    rows = _Rows()
    if instr is not None:
        rows.add(talker.text_vectors(instr), [f"T({i})" for i in instr])
    rows.add(talker.text_vectors(ids[:3]), [f"T({i})" for i in ids[:3]])
    text_track = torch.cat((pad_t.expand(n_tag - 2, dim), bos_t[None]))
    rows.add(text_track + ctrack[:-1],
             [f"PAD_T + {c}" for c in clabels[:n_tag - 2]] + [f"BOS_T + {clabels[n_tag - 2]}"])

    body = ids[3:len(ids) - 5]
    if ref_codes is not None:
        if ref_text_ids is None:
            raise ValueError("ICL needs ref_text_ids with ref_codes")
        ref_body = wrap_ref_text_ids(model.text_ids, ref_text_ids)
        ref_body = ref_body[3:len(ref_body) - 2]
        icl_vecs, icl_labels, trailing, trailing_labels = build_icl_rows(
            model, ref_body, body, ref_codes, pad_t, eos_t, non_streaming)
        rows.add(icl_vecs, icl_labels)
    elif non_streaming:
        vecs = torch.cat((talker.text_vectors(body), eos_t[None]))
        vecs = vecs + talker.codec_vectors([codec_pad] * (len(body) + 1))
        rows.add(vecs, [f"T({i}) + C({codec_pad})" for i in body] + [f"EOS_T + C({codec_pad})"])
        rows.add((pad_t + talker.codec_vectors([codec_bos])[0])[None],
                 [f"PAD_T + C({codec_bos})"])
        trailing, trailing_labels = pad_t[None], ["PAD_T"]
    else:
        first = ids[3]
        rows.add(talker.text_vectors([first]) + ctrack[-1:], [f"T({first}) + C({codec_bos})"])
        rest = ids[4:len(ids) - 5]
        trailing = torch.cat((talker.text_vectors(rest), eos_t[None]))
        trailing_labels = [f"T({i})" for i in rest] + ["EOS_T"]

    return Prompt(embeds=rows.tensor(dim), trailing=trailing, pad=pad_t, rows=rows.labels,
                  trailing_rows=trailing_labels, input_ids=ids, instruct_ids=instr,
                  language_id=language_id, speaker=spk_name, non_streaming=non_streaming,
                  icl=ref_codes is not None, notes=notes)


def build_icl_rows(model, ref_body, body, ref_codes, pad_t, eos_t, non_streaming):
    """Base ICL block: text column X = T(ref ++ text) ++ [EOS_T], codec column
    Y = [C(bos)] ++ [sum_i E_i[ref_codes[t, i]]]; returns (rows, labels, TR, TR labels).

    non-streaming: X[t] + C(pad) for all t, then Y[t] + PAD_T for all t; TR = [PAD_T].
    streaming:     if len(X) > len(Y): X[t] + Y[t] for t < len(Y), TR = X[len(Y):];
                   else X padded with PAD_T to len(Y), + Y; TR = [PAD_T].
    """
    talker, tcfg = model.talker, model.talker_cfg
    ref_codes = torch.as_tensor(ref_codes, dtype=torch.long)
    x_ids = list(ref_body) + list(body)
    x = torch.cat((talker.text_vectors(x_ids), eos_t[None]))
    x_labels = [f"T({i})" for i in x_ids] + ["EOS_T"]
    y = torch.cat([talker.codec_vectors([tcfg["codec_bos_id"]])] +
                  [model.frame_embedding(ref_codes[t])[None] for t in range(ref_codes.shape[0])])
    y_labels = [f"C({tcfg['codec_bos_id']})"] + [f"E(ref {t})" for t in range(ref_codes.shape[0])]
    n_x, n_y = x.shape[0], y.shape[0]
    if non_streaming:
        pad_c = talker.codec_vectors([tcfg["codec_pad_id"]] * n_x)
        vecs = torch.cat((x + pad_c, y + pad_t))
        labels = ([f"{a} + C({tcfg['codec_pad_id']})" for a in x_labels] +
                  [f"PAD_T + {b}" for b in y_labels])
        return vecs, labels, pad_t[None], ["PAD_T"]
    if n_x > n_y:
        labels = [f"{a} + {b}" for a, b in zip(x_labels[:n_y], y_labels)]
        return x[:n_y] + y, labels, x[n_y:], x_labels[n_y:]
    x = torch.cat((x, pad_t.expand(n_y - n_x, x.shape[1])))
    x_labels = x_labels + ["PAD_T"] * (n_y - n_x)
    labels = [f"{a} + {b}" for a, b in zip(x_labels, y_labels)]
    return x + y, labels, pad_t[None], ["PAD_T"]
