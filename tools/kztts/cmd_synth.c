/*
 * cmd_synth.c - `kztts synth`: text (argument or stdin) -> speech file.
 *
 * Flow: options -> model + session -> request (text or --token-ids, voice,
 * sampling, frame limits) -> output opened under a temporary name ->
 * kz_synthesize streams audio chunks into it (and frames into --dump-codes)
 * -> rename on success; on any failure nothing is left behind.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "audio_out.h"
#include "cli.h"
#include "codes_file.h"

#define KZ_DEFAULT_MODEL "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"

typedef struct synth_opts {
    const char *model, *out, *format, *isa, *speaker, *language, *instruct, *token_ids;
    const char *dump_codes, *layout, *split, *codec_precision, *schedule;
    int64_t max_utterance;
    int64_t threads, threads_lm, threads_codec, seed, top_k, frames, max_frames, chunk, first_chunk;
    double temperature, top_p, repetition_penalty;
    bool greedy, help, stream, stream_text;
} synth_opts;

typedef struct codes_log {
    int32_t *codes;
    size_t n_frames, cap;
} codes_log;

static bool log_frame(const int32_t *codes, int32_t n, int64_t pos, void *user) {
    codes_log *l = user;
    (void)pos;
    if (l->n_frames == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        int32_t *p = realloc(l->codes, cap * (size_t)n * sizeof *p);
        if (!p) {
            return false;
        }
        l->codes = p;
        l->cap = cap;
    }
    memcpy(l->codes + l->n_frames * (size_t)n, codes, (size_t)n * sizeof *codes);
    l->n_frames++;
    return true;
}

typedef struct sink {
    audio_out *out;
    bool flush; /* --stream: push every chunk out at once */
} sink;

static bool write_chunk(const float *pcm, size_t n, int64_t pos, bool last, void *user) {
    sink *s = user;
    (void)pos;
    (void)last;
    return audio_out_write(s->out, pcm, n) == 0 && (!s->flush || audio_out_flush(s->out) == 0);
}

/* --stream-text: hands over whatever stdin has delivered so far (blocking until
 * something arrives); end of input ends the text. */
static bool pull_stdin(char *buf, size_t cap, size_t *n, bool *done, void *user) {
    (void)user;
    ssize_t got = read(STDIN_FILENO, buf, cap);
    if (got < 0) {
        return false;
    }
    *n = (size_t)got;
    *done = got == 0;
    return true;
}

static const char *pick_format(const synth_opts *o) {
    if (o->format) {
        return o->format;
    }
    const char *dot = strrchr(o->out, '.');
    return dot && audio_format_check(dot + 1) == 0 ? dot + 1 : "wav";
}

static int fill_request(const synth_opts *o, const kz_model *m, kz_request *r) {
    kz_request_default(m, r);
    r->speaker = o->speaker;
    r->language = o->language ? o->language : "auto";
    r->instruct = o->instruct;
    r->greedy = o->greedy || r->greedy;
    r->seed = (uint64_t)o->seed;
    r->frames = (int32_t)o->frames;
    r->max_frames = (int32_t)o->max_frames;
    // Unset (-1): adaptive chunks pace the audio for a listener; without --stream /
    // --stream-text nobody plays it while it is made, so the codec's cheapest size serves.
    r->chunk_frames = o->chunk >= 0 ? (int32_t)o->chunk : o->stream || o->stream_text ? 0 : 16;
    r->first_chunk_frames = (int32_t)o->first_chunk;
    r->max_utterance_bytes = o->max_utterance >= 0 ? (int32_t)o->max_utterance : r->max_utterance_bytes;
    // Options left unset (NAN, -1) keep the model's generation_config.json values.
    r->temperature = isnan(o->temperature) ? r->temperature : (float)o->temperature;
    r->top_k = o->top_k < 0 ? r->top_k : (int32_t)o->top_k;
    r->top_p = isnan(o->top_p) ? r->top_p : (float)o->top_p;
    r->repetition_penalty =
        isnan(o->repetition_penalty) ? r->repetition_penalty : (float)o->repetition_penalty;
    if (o->layout && strcmp(o->layout, "streaming") != 0 && strcmp(o->layout, "non-streaming") != 0) {
        fprintf(stderr, "kztts synth: --layout must be streaming or non-streaming\n");
        return -1;
    }
    if (o->split && strcmp(o->split, "qwen2") != 0 && strcmp(o->split, "mistral") != 0) {
        fprintf(stderr, "kztts synth: --split must be qwen2 or mistral\n");
        return -1;
    }
    r->layout = !o->layout ? KZ_LAYOUT_DEFAULT
                : strcmp(o->layout, "streaming") == 0 ? KZ_LAYOUT_STREAMING
                                                      : KZ_LAYOUT_NON_STREAMING;
    r->split = o->split && strcmp(o->split, "mistral") == 0 ? KZ_TEXT_SPLIT_MISTRAL
                                                            : KZ_TEXT_SPLIT_QWEN2;
    return 0;
}

static int synthesize(const synth_opts *o, kz_model *m, kz_session *s, const char *text,
                      const int32_t *ids, size_t n_ids) {
    kz_request r;
    if (fill_request(o, m, &r) != 0) {
        return 2;
    }
    r.text = text;
    r.token_ids = ids;
    r.n_token_ids = n_ids;
    r.text_pull = o->stream_text ? pull_stdin : NULL;
    codes_log log = {0};
    if (o->dump_codes) {
        r.on_frame = log_frame;
        r.frame_user = &log;
    }
    audio_out *out = audio_out_open(o->out, pick_format(o), kz_model_sample_rate(m), 0);
    if (!out) {
        return 1;
    }
    sink snk = {.out = out, .flush = o->stream};
    kz_status st = kz_synthesize(s, &r, write_chunk, &snk);
    if (st != KZ_OK) {
        cli_report("synth", st);
    }
    int rc = audio_out_finish(out, st == KZ_OK) == 0 && st == KZ_OK ? 0 : 1;
    if (rc == 0 && o->dump_codes &&
        codes_file_write(o->dump_codes, log.codes, log.n_frames, kz_model_num_codebooks(m)) != 0) {
        rc = 1;
    }
    free(log.codes);
    return rc;
}

static int run(const synth_opts *o, const char *text_arg) {
    int32_t *ids = NULL;
    size_t n_ids = 0;
    char *stdin_text = NULL;
    const char *text = NULL;
    if (o->stream_text) {
        if (text_arg || o->token_ids) {
            fprintf(stderr, "kztts synth: --stream-text reads the text from stdin; give no TEXT\n");
            return 2;
        }
    } else if (o->token_ids) {
        if (text_arg) {
            fprintf(stderr, "kztts synth: give either TEXT or --token-ids, not both\n");
            return 2;
        }
        if (cli_parse_token_ids("synth", o->token_ids, &ids, &n_ids) != 0) {
            return 2;
        }
    } else if (!text_arg || strcmp(text_arg, "-") == 0) {
        text = stdin_text = cli_read_stdin("synth");
        if (!text) {
            return 1;
        }
    } else {
        text = text_arg;
    }
    kz_model *m;
    kz_session *s;
    int rc = 1;
    const cli_engine e = {.isa = o->isa, .codec_precision = o->codec_precision,
                          .schedule = o->schedule, .threads = (int)o->threads,
                          .threads_lm = (int)o->threads_lm, .threads_codec = (int)o->threads_codec};
    if (cli_open_engine("synth", o->model, &e, &m, &s) == 0) {
        rc = synthesize(o, m, s, text, ids, n_ids);
        kz_session_free(s);
        kz_model_free(m);
    }
    free(ids);
    free(stdin_text);
    return rc;
}

int cmd_synth(int argc, char **argv) {
    synth_opts o = {.model = KZ_DEFAULT_MODEL, .out = "out.wav", .isa = "auto", .chunk = -1, .first_chunk = 1, .top_k = -1, .max_utterance = -1,
                    .temperature = NAN, .top_p = NAN, .repetition_penalty = NAN};
    const arg_spec specs[] = {
        {"--model", "-m", ARG_STRING, &o.model, 0, 0, "DIR   model directory or Hugging Face repo id (default " KZ_DEFAULT_MODEL ")"},
        {"--output", "-o", ARG_STRING, &o.out, 0, 0, "OUT   output file, - for stdout (default out.wav)"},
        {"--format", NULL, ARG_STRING, &o.format, 0, 0, "FMT   wav|f32|s16|flac|ogg (default: from OUT, else wav)"},
        {"--speaker", "-s", ARG_STRING, &o.speaker, 0, 0, "NAME  CustomVoice speaker (see kztts speakers)"},
        {"--language", "-l", ARG_STRING, &o.language, 0, 0, "LANG  auto (default) or a language name"},
        {"--instruct", "-i", ARG_STRING, &o.instruct, 0, 0, "TEXT  style instruction (1.7B, VoiceDesign)"},
        {"--seed", NULL, ARG_INT, &o.seed, 0, 1e15, "N     random seed (default 0)"},
        {"--greedy", NULL, ARG_FLAG, &o.greedy, 0, 0, "argmax decoding (the repetition penalty still applies)"},
        {"--temperature", NULL, ARG_DOUBLE, &o.temperature, 0, 100, "T     talker temperature > 0 (default from the model: 0.9)"},
        {"--top-k", NULL, ARG_INT, &o.top_k, 0, 1 << 20, "K     talker top-k, 0 = off (default 50)"},
        {"--top-p", NULL, ARG_DOUBLE, &o.top_p, 0, 1, "P     talker top-p in (0, 1] (default 1)"},
        {"--repetition-penalty", NULL, ARG_DOUBLE, &o.repetition_penalty, 0, 100, "R     > 0 (default 1.05; 1 = off)"},
        {"--frames", NULL, ARG_INT, &o.frames, 1, 100000, "N     generate exactly N frames (80 ms each)"},
        {"--max-frames", NULL, ARG_INT, &o.max_frames, 1, 100000, "N     stop after N frames (default: 50 + 8 per text token)"},
        {"--token-ids", NULL, ARG_STRING, &o.token_ids, 0, 0, "IDS   comma-separated ids of the text instead of TEXT"},
        {"--dump-codes", NULL, ARG_STRING, &o.dump_codes, 0, 0, "FILE  write the generated codes (one frame per line)"},
        {"--layout", NULL, ARG_STRING, &o.layout, 0, 0, "L     non-streaming (default) or streaming text layout"},
        {"--split", NULL, ARG_STRING, &o.split, 0, 0, "S     tokenizer split: qwen2 (default) or mistral"},
        {"--first-chunk", NULL, ARG_INT, &o.first_chunk, 1, 1024, "N     frames in the first audio chunk (default 1)"},
        {"--chunk", NULL, ARG_INT, &o.chunk, 0, 1024, "N     frames per later audio chunk; 0 = adaptive, 1 to 16 by the audio buffered (default: 0 with --stream or --stream-text, else 16)"},
        {"--max-utterance", NULL, ARG_INT, &o.max_utterance, 0, 1 << 20, "N     split longer text at sentence ends into utterances of <= N bytes (default 600, 0 = never)"},
        {"--stream", NULL, ARG_FLAG, &o.stream, 0, 0, "write each chunk out as soon as it is decoded (for | aplay)"},
        {"--stream-text", NULL, ARG_FLAG, &o.stream_text, 0, 0, "read the text from stdin as it arrives and speak while it comes"},
        {"--threads", "-t", ARG_INT, &o.threads, 0, 256, "N     threads (default: all cores, at most 8)"},
        {"--threads-lm", NULL, ARG_INT, &o.threads_lm, 0, 256, "N     threads of the talker/code predictor stage (default all)"},
        {"--threads-codec", NULL, ARG_INT, &o.threads_codec, 0, 256, "N     threads of the codec stage (default all; half with overlap)"},
        {"--isa", NULL, ARG_STRING, &o.isa, 0, 0, "LEVEL auto|scalar|avx2|avx512|neon kernel cap"},
        {"--codec-precision", NULL, ARG_STRING, &o.codec_precision, 0, 0, CLI_CODEC_PRECISION_HELP},
        {"--schedule", NULL, ARG_STRING, &o.schedule, 0, 0, "S     how the LM and codec stages share the cores: turns (default) or overlap"},
        {"--help", "-h", ARG_FLAG, &o.help, 0, 0, "show this help"},
    };
    int n_specs = (int)(sizeof specs / sizeof specs[0]);
    const char *pos[1] = {NULL};
    int n_pos;
    if (args_parse("synth", specs, n_specs, argc, argv, pos, 1, &n_pos) != 0) {
        return 2;
    }
    if (o.help) {
        args_usage("synth", "[-m MODEL] [options] [TEXT | -]", specs, n_specs);
        return 0;
    }
    return run(&o, n_pos ? pos[0] : NULL);
}
