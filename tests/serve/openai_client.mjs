/*
 * openai_client.mjs - the real client of test_serve_openai.py: the official OpenAI SDK
 * (npm `openai`, pinned in package.json) speaking to a running `kztts serve`.
 *
 *   node openai_client.mjs NPM_DIR BASE_URL API_KEY OUT_DIR
 *
 * Runs every case below through client.audio.speech.create: each response_format read
 * whole (await response.arrayBuffer()) and streamed (.asResponse(), the body read chunk
 * by chunk), speeds, the voice as {id}, SSE (stream_format "sse") parsed by the SDK's own
 * Stream.fromSSEResponse, errors the SDK must map to its error classes, and models.list.
 * Audio goes to OUT_DIR/<case>.<ext>; OUT_DIR/manifest.json lists the cases with what
 * the SDK saw. The Python side decodes the files with independent tools and checks them.
 * Exits 0 when it could run every case (a failing case is written down, not thrown).
 */
import { createRequire } from "node:module";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

const [npmDir, baseURL, apiKey, outDir] = process.argv.slice(2);
const require = createRequire(join(npmDir, "package.json"));
const { default: OpenAI, APIError } = require("openai");
const { Stream } = require("openai/core/streaming");

const FRAMES = 15;
const INPUT = "Hello world, this is kztts speaking through the OpenAI SDK.";
const EXT = { mp3: "mp3", opus: "ogg", aac: "aac", flac: "flac", wav: "wav", pcm: "raw" };
/* Greedy and seeded so the length is max_new_tokens frames (random weights rarely stop). */
const BASE = { model: "tts-1", voice: "ryan", input: INPUT, temperature: 0, seed: 7,
               max_new_tokens: FRAMES };

const client = new OpenAI({ apiKey, baseURL, maxRetries: 0, timeout: 300000 });
const manifest = [];

async function runCase(name, fn) {
  try {
    manifest.push({ name, ...(await fn()) });
  } catch (e) {
    manifest.push({ name, thrown: String(e && e.stack ? e.stack : e),
                    status: e instanceof APIError ? e.status : null });
  }
}

function save(name, fmt, bytes) {
  const file = join(outDir, `${name}.${EXT[fmt]}`);
  writeFileSync(file, bytes);
  return file;
}

async function whole(name, params) {
  const fmt = params.response_format || "mp3";
  const res = await client.audio.speech.create({ ...BASE, ...params });
  const bytes = Buffer.from(await res.arrayBuffer());
  return { mode: "whole", format: fmt, speed: params.speed || 1, frames: FRAMES,
           file: save(name, fmt, bytes), content_type: res.headers.get("content-type") };
}

async function streamed(name, params) {
  const fmt = params.response_format || "mp3";
  const res = await client.audio.speech.create({ ...BASE, ...params }).asResponse();
  const reader = res.body.getReader();
  const parts = [];
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(Buffer.from(value));
  }
  return { mode: "stream", format: fmt, speed: params.speed || 1, frames: FRAMES,
           file: save(name, fmt, Buffer.concat(parts)), chunks: parts.length,
           content_type: res.headers.get("content-type"),
           transfer_encoding: res.headers.get("transfer-encoding"),
           request_id: res.headers.get("x-request-id") };
}

async function sse(name, params) {
  const fmt = params.response_format || "mp3";
  const res = await client.audio.speech
    .create({ ...BASE, ...params, stream_format: "sse" }).asResponse();
  const events = Stream.fromSSEResponse(res, new AbortController());
  const types = [];
  const audio = [];
  let usage = null;
  let badBase64 = 0;
  for await (const ev of events) {
    types.push(ev.type);
    if (ev.type === "speech.audio.delta") {
      const b = Buffer.from(ev.audio, "base64");
      if (b.toString("base64") !== ev.audio) badBase64++;
      audio.push(b);
    } else if (ev.type === "speech.audio.done") {
      usage = ev.usage;
    }
  }
  return { mode: "sse", format: fmt, speed: params.speed || 1, frames: FRAMES,
           file: save(name, fmt, Buffer.concat(audio)), types, usage, bad_base64: badBase64,
           content_type: res.headers.get("content-type") };
}

async function expectError(name, params, clientOverride) {
  const c = clientOverride || client;
  try {
    const res = await c.audio.speech.create({ ...BASE, ...params });
    await res.arrayBuffer();
    return { mode: "error", error_class: null, status: res.status };
  } catch (e) {
    if (!(e instanceof APIError)) throw e;
    return { mode: "error", error_class: e.constructor.name, status: e.status,
             type: e.type ?? null, code: e.code ?? null, param: e.param ?? null,
             message: e.message };
  }
}

for (const fmt of ["mp3", "opus", "aac", "flac", "wav", "pcm"]) {
  await runCase(`whole_${fmt}`, () => whole(`whole_${fmt}`, { response_format: fmt }));
  await runCase(`stream_${fmt}`, () => streamed(`stream_${fmt}`, { response_format: fmt }));
}
await runCase("whole_default", () => whole("whole_default", {}));
for (const [fmt, speed] of [["wav", 0.5], ["wav", 2], ["mp3", 1.5], ["pcm", 4], ["opus", 0.25],
                            ["flac", 1.25]]) {
  const name = `speed_${fmt}_${String(speed).replace(".", "_")}`;
  await runCase(name, () => streamed(name, { response_format: fmt, speed }));
}
await runCase("voice_id_wav", () => whole("voice_id_wav",
                                          { response_format: "wav", voice: { id: "vivian" } }));
for (const fmt of ["pcm", "wav", "mp3", "opus", "aac", "flac"]) {
  await runCase(`sse_${fmt}`, () => sse(`sse_${fmt}`, { response_format: fmt }));
}
await runCase("sse_speed_pcm_2",
              () => sse("sse_speed_pcm_2", { response_format: "pcm", speed: 2 }));

await runCase("error_unknown_voice", () => expectError("e", { voice: "no_such_voice" }));
await runCase("error_unknown_field", () => expectError("e", { not_a_field: 1 }));
await runCase("error_bad_format", () => expectError("e", { response_format: "ogg" }));
await runCase("error_speed", () => expectError("e", { speed: 5 }));
await runCase("error_bad_key", () => expectError("e", {},
  new OpenAI({ apiKey: "wrong-key", baseURL, maxRetries: 0, timeout: 60000 })));

await runCase("models_list", async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  return { mode: "models", ids };
});

writeFileSync(join(outDir, "manifest.json"), JSON.stringify(manifest, null, 1));
