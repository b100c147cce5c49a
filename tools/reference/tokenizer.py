"""Byte-level BPE text tokenizer of a checkpoint directory, for the references and tests.

Reads the three files the official wrapper loads (`vocab.json`, `merges.txt`,
`tokenizer_config.json`'s `added_tokens_decoder`) and encodes as the Qwen2
tokenizer of transformers does: added tokens are matched first (exact strings,
longest first, anywhere), every other span is NFC-normalised, split by the
Qwen2 pre-tokenizer pattern, mapped byte by byte to the GPT-2 byte alphabet and
merged by merge rank. No BOS/EOS is added. Written from that algorithm, not
from the C tokenizer (src/text/), so the two check each other.

Only ASCII text is accepted outside added tokens: the pattern below spells
\\p{L} as [A-Za-z] and \\p{N} as [0-9] (Python's re has no Unicode classes), which
is exact for ASCII and wrong elsewhere. For ASCII the Qwen2 and Mistral split
patterns differ only for a case change inside a letter run ("iPhone") and for
contractions glued to letters ("'sbar"); texts used with this module avoid both.

    tok = load("DIR")             # Tokenizer, or None when DIR has no vocab.json
    tok.encode("<|im_start|>assistant\\nHello<|im_end|>\\n")   -> [ids]
    tok.token_id("<|im_start|>")  # id of an added token or a vocabulary spelling
"""

import json
import os
import re
import unicodedata

QWEN2_ASCII_SPLIT = re.compile(
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\nA-Za-z0-9]?[A-Za-z]+|[0-9]| ?[^\sA-Za-z0-9]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+", re.ASCII)


def byte_alphabet():
    """GPT-2's byte -> character map, as a list in vocabulary order: entry i is the
    (byte, character) whose token has id i in GPT-2 and Qwen2 vocabularies."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) +
                 list(range(ord("®"), ord("ÿ") + 1)))
    order = [(b, chr(b)) for b in printable]
    extra = 0
    for b in range(256):
        if b not in printable:
            order.append((b, chr(256 + extra)))
            extra += 1
    return order


BYTE_TO_CHAR = dict(byte_alphabet())


class Tokenizer:
    def __init__(self, vocab, merges, added):
        self.vocab = vocab                                  # spelling -> id
        self.ranks = {pair: r for r, pair in enumerate(merges)}
        self.added = sorted(added.items(), key=lambda kv: (-len(kv[0]), kv[1]))  # content -> id
        self.n_ids = max(list(vocab.values()) + list(added.values())) + 1

    def token_id(self, spelling):
        for content, i in self.added:
            if content == spelling:
                return i
        return self.vocab[spelling]

    def _bpe(self, word):
        parts = list(word)
        while len(parts) > 1:
            ranked = [(self.ranks.get((a, b), None), i) for i, (a, b) in
                      enumerate(zip(parts, parts[1:]))]
            ranked = [(r, i) for r, i in ranked if r is not None]
            if not ranked:
                break
            best = min(r for r, _ in ranked)
            merged, i = [], 0
            while i < len(parts):   # every occurrence of the best pair, left to right
                if i + 1 < len(parts) and self.ranks.get((parts[i], parts[i + 1])) == best:
                    merged.append(parts[i] + parts[i + 1])
                    i += 2
                else:
                    merged.append(parts[i])
                    i += 1
            parts = merged
        return [self.vocab[p] for p in parts]

    def _encode_span(self, text):
        text = unicodedata.normalize("NFC", text)
        if not text.isascii():
            raise ValueError(f"reference tokenizer: only ASCII text, got {text!r}")
        ids = []
        for piece in QWEN2_ASCII_SPLIT.findall(text):
            ids += self._bpe("".join(BYTE_TO_CHAR[b] for b in piece.encode("utf-8")))
        return ids

    def encode(self, text):
        ids, start, i = [], 0, 0
        while i < len(text):
            hit = next(((c, t) for c, t in self.added if text.startswith(c, i)), None)
            if hit is None:
                i += 1
                continue
            ids += self._encode_span(text[start:i]) + [hit[1]]
            i += len(hit[0])
            start = i
        return ids + self._encode_span(text[start:])


def load(path):
    """Tokenizer of a checkpoint directory, or None when it has no vocab.json."""
    if not os.path.isfile(os.path.join(path, "vocab.json")):
        return None
    with open(os.path.join(path, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    merges = []
    with open(os.path.join(path, "merges.txt"), encoding="utf-8") as f:
        for line in f.read().split("\n"):
            if line and not line.startswith("#version"):
                left, right = line.split(" ")
                merges.append((left, right))
    with open(os.path.join(path, "tokenizer_config.json"), encoding="utf-8") as f:
        decoder = json.load(f).get("added_tokens_decoder", {})
    added = {v["content"]: int(k) for k, v in decoder.items()}
    return Tokenizer(vocab, merges, added)
