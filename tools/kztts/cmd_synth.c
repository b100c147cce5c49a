/*
 * cmd_synth.c - `kztts synth`: text (argument or stdin) -> speech file.
 *
 * Flow: options -> model + session -> the voice (CustomVoice: --speaker; Base: a cloned
 * voice from --voice FILE or made from --ref-audio now) -> request (text or --token-ids,
 * sampling, frame limits) -> the outputs opened (out_file.h: -o, and --dump-codes) ->
 * kz_synthesize streams audio chunks into -o (progress on a terminal) and collects the
 * frames -> codes written -> both committed together; on any failure neither is left
 * behind and one line says why (a write failure names the file and the reason).
 */
#include <errno.h>
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
#include "out_file.h"
#include "progress.h"

#define KZ_DEFAULT_MODEL "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"

typedef struct synth_opts {
    const char *model, *out, *format, *isa, *speaker, *language, *instruct, *token_ids;
    const char *dump_codes, *layout, *split, *codec_precision, *kv_cache, *schedule;
    const char *voice, *ref_audio, *ref_text;
    double max_ref_seconds;
    bool xvector_only;
    int64_t max_utterance;
    int64_t threads, threads_lm, threads_codec, seed, top_k, frames, max_frames, chunk, first_chunk;
    double temperature, top_p, repetition_penalty, speed;
    bool greedy, help, stream, stream_text, quiet;
} synth_opts;

typedef struct codes_log {
    int32_t *codes;
    size_t n_frames, cap;
} codes_log;

/* --stream-text: standard input as it arrives, and why it stopped early. */
typedef struct text_in {
    size_t n_bytes;   /* bytes read so far */
    long long nul_at; /* offset of a NUL byte, or -1 */
    int read_errno;   /* errno of a failed read, or 0 */
} text_in;

/* The callbacks' user: where the audio and (--dump-codes) the codes go, the progress
 * line, and the text input of --stream-text. */
typedef struct sink {
    audio_out *out;
    bool flush;        /* --stream: push every chunk out at once */
    int32_t rate;      /* samples per second */
    progress progress; /* the status line on a terminal */
    codes_log *log;    /* --dump-codes, else NULL */
    text_in *in;
} sink;

static bool log_frame(const int32_t *codes, int32_t n, int64_t pos, void *user) {
    codes_log *l = ((sink *)user)->log;
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

/* Counts the audio written, after --speed, so the seconds are those the file plays. */
static void show_progress(sink *s, bool final) {
    const double audio_s = (double)audio_out_samples(s->out) / s->rate;
    const double t = progress_elapsed(&s->progress);
    progress_show(&s->progress, final, "synth: %.1f s of audio in %.1f s (%.2fx real time)",
                  audio_s, t, t > 0 ? audio_s / t : 0.0);
}

static bool write_chunk(const float *pcm, size_t n, int64_t pos, bool last, void *user) {
    sink *s = user;
    (void)pos;
    (void)last;
    const bool ok = audio_out_write(s->out, pcm, n) == 0 &&
                    (!s->flush || audio_out_flush(s->out) == 0);
    show_progress(s, false);
    return ok;
}

/* --stream-text: hands over whatever stdin has delivered so far (blocking until something arrives);
 * end of input ends the text. A NUL byte cancels: the text is a C string to the
 * tokenizer, so anything after it would silently vanish. */
static bool pull_stdin(char *buf, size_t cap, size_t *n, bool *done, void *user) {
    text_in *in = ((sink *)user)->in;
    ssize_t got = read(STDIN_FILENO, buf, cap);
    if (got < 0) {
        in->read_errno = errno;
        return false;
    }
    const char *nul = memchr(buf, 0, (size_t)got);
    if (nul) {
        in->nul_at = (long long)(in->n_bytes + (size_t)(nul - buf));
        return false;
    }
    in->n_bytes += (size_t)got;
    *n = (size_t)got;
    *done = got == 0;
    return true;
}

/* Prints why kz_synthesize failed: the text input's own problem when it stopped the
 * synthesis, else the library's message. Returns the exit status. */
static int report_failure(kz_status st, const text_in *in) {
    if (in->nul_at >= 0) {
        fprintf(stderr, "kztts synth: bad input: NUL byte at byte %lld of standard input\n",
                in->nul_at);
        return 1;
    }
    if (in->read_errno) {
        fprintf(stderr, "kztts synth: cannot read standard input: %s\n",
                strerror(in->read_errno));
        return 1;
    }
    cli_report("synth", st);
    return cli_exit_status(st);
}

static const arg_choice LAYOUT_NAMES[] = {
    {"non-streaming", KZ_LAYOUT_NON_STREAMING}, {"streaming", KZ_LAYOUT_STREAMING}, {NULL, 0}};

/* The request from the options, which args.c has range-checked; what only the model can
 * judge (speaker, language, top-k against the vocabulary) kz_synthesize checks. */
static void fill_request(const synth_opts *o, const kz_model *m, const kz_voice *voice,
                         kz_request *r) {
    kz_request_default_params(m, r);
    r->speaker = o->speaker;
    r->voice = voice;
    r->language = o->language ? o->language : "auto";
    r->instruct = o->instruct;
    // --temperature 0 is greedy decoding, as in most sampling tools.
    r->greedy = o->greedy || o->temperature == 0 || r->greedy;
    r->seed = (uint64_t)o->seed;
    r->frames = (int32_t)o->frames;
    r->max_frames = (int32_t)o->max_frames;
    // Unset (-1): adaptive chunks pace the audio for a listener; without --stream /
    // --stream-text nobody plays it while it is made, so the codec's cheapest size serves.
    r->chunk_frames = o->chunk >= 0 ? (int32_t)o->chunk : o->stream || o->stream_text ? 0 : 16;
    r->first_chunk_frames = (int32_t)o->first_chunk;
    // --max-utterance 0 (never split) is the request's -1.
    r->max_utterance_bytes = o->max_utterance < 0    ? r->max_utterance_bytes
                             : o->max_utterance == 0 ? -1
                                                     : (int32_t)o->max_utterance;
    // Options left unset (NAN, -1) keep the model's generation_config.json values.
    r->temperature = isnan(o->temperature) || o->temperature == 0 ? r->temperature
                                                                  : (float)o->temperature;
    // --top-k 0 (off) is the request's -1.
    r->top_k = o->top_k < 0 ? r->top_k : o->top_k == 0 ? -1 : (int32_t)o->top_k;
    r->top_p = isnan(o->top_p) ? r->top_p : (float)o->top_p;
    r->repetition_penalty =
        isnan(o->repetition_penalty) ? r->repetition_penalty : (float)o->repetition_penalty;
    r->layout = o->layout ? (kz_text_layout)args_choice_value(LAYOUT_NAMES, o->layout)
                          : KZ_LAYOUT_DEFAULT;
    r->split = o->split ? (kz_text_split)args_choice_value(CLI_SPLIT_NAMES, o->split)
                        : KZ_TEXT_SPLIT_QWEN2;
}

static int synthesize(const synth_opts *o, const char *format, kz_model *m, kz_session *s,
                      const kz_voice *voice, const char *text, const int32_t *ids, size_t n_ids) {
    kz_request r;
    fill_request(o, m, voice, &r);
    r.text = text;
    r.token_ids = ids;
    r.n_token_ids = n_ids;
    audio_out *out = audio_out_open(o->out, format, kz_model_sample_rate(m), 0, (float)o->speed);
    out_file *codes = NULL;
    if (out && o->dump_codes && !(codes = out_file_open(o->dump_codes))) {
        audio_out_finish(out, false);
        return 1;
    }
    if (!out) {
        return 1;
    }
    text_in in = {.nul_at = -1};
    codes_log log = {0};
    sink snk = {.out = out, .flush = o->stream, .rate = kz_model_sample_rate(m),
                .log = o->dump_codes ? &log : NULL, .in = &in};
    r.text_pull = o->stream_text ? pull_stdin : NULL;
    r.on_audio = write_chunk;
    r.on_frame = o->dump_codes ? log_frame : NULL;
    r.user = &snk;
    // Progress only for a file: on stdout the audio is usually being played or piped.
    progress_begin(&snk.progress, strcmp(o->out, "-") != 0);
    kz_status st = kz_synthesize(s, &r);
    if (st == KZ_OK) {
        audio_out_drain(out); // a failure is recorded in out and reported at the commit
        show_progress(&snk, true);
    }
    progress_end(&snk.progress);
    // A failed write is what the commit reports, not the synthesis it cancelled.
    int rc = st == KZ_OK || audio_out_failed(out) ? 0 : report_failure(st, &in);
    if (st == KZ_OK && codes) {
        size_t n_bytes;
        char *lines = codes_file_text(log.codes, log.n_frames, kz_model_num_codebooks(m), &n_bytes);
        if (lines) {
            out_file_write(codes, lines, n_bytes); // a failure is recorded for the commit
        } else {
            out_file_fail(codes, ENOMEM);
        }
        free(lines);
    }
    out_file *outputs[2] = {audio_out_end(out, st == KZ_OK), codes};
    free(log.codes);
    if (out_file_commit(outputs, 2, st == KZ_OK) != 0 && rc == 0) {
        rc = 1;
    }
    return rc;
}

/* Options that contradict each other, and the output format (see cli_output_format).
 * Returns 0, or -1 after printing the problem. */
static int check_options(const synth_opts *o, const char *text_arg, const char **format) {
    if (o->stream_text && (text_arg || o->token_ids)) {
        fprintf(stderr, "kztts synth: --stream-text reads the text from stdin; give no TEXT\n");
        return -1;
    }
    if (o->token_ids && text_arg) {
        fprintf(stderr, "kztts synth: give either TEXT or --token-ids, not both\n");
        return -1;
    }
    if (o->frames > 0 && o->max_frames > 0 && o->frames > o->max_frames) {
        fprintf(stderr, "kztts synth: --frames %lld is more than --max-frames %lld\n",
                (long long)o->frames, (long long)o->max_frames);
        return -1;
    }
    if (o->voice && o->ref_audio) {
        fprintf(stderr, "kztts synth: give either --voice or --ref-audio, not both\n");
        return -1;
    }
    if (o->ref_text && o->xvector_only) {
        fprintf(stderr, "kztts synth: --ref-text makes an in-context voice, --xvector-only one "
                        "without the transcript: give one of them\n");
        return -1;
    }
    if (o->ref_audio && !o->ref_text && !o->xvector_only) {
        fprintf(stderr, "kztts synth: --ref-audio needs --ref-text \"what the recording says\" "
                        "(in-context cloning) or --xvector-only\n");
        return -1;
    }
    if (!o->ref_audio && (o->ref_text || o->xvector_only || !isnan(o->max_ref_seconds))) {
        fprintf(stderr, "kztts synth: --ref-text, --xvector-only and --max-ref-seconds go with "
                        "--ref-audio\n");
        return -1;
    }
    if (o->dump_codes && out_file_same(o->out, o->dump_codes)) {
        fprintf(stderr, "kztts synth: --dump-codes %s and -o %s are the same file\n",
                o->dump_codes, o->out);
        return -1;
    }
    return cli_output_format("synth", o->out, o->format, format);
}

/* What the model type allows: a Base model clones (no --speaker), the others take no
 * cloned voice. Returns 0, or -1 after printing the problem. */
static int check_voice_options(const synth_opts *o, const kz_model *m) {
    const char *type = kz_model_type(m);
    bool base = strcmp(type, "base") == 0;
    if (base && o->speaker) {
        fprintf(stderr, "kztts synth: %s is a Base model: it has no preset speakers but clones "
                        "a voice (--ref-audio REF.wav --ref-text T, or --voice NAME.kzvoice)\n",
                o->model);
        return -1;
    }
    if (!base && (o->voice || o->ref_audio)) {
        fprintf(stderr, "kztts synth: %s is a %s model: --%s clones a voice with a Base model "
                        "(Qwen3-TTS-12Hz-*-Base)%s\n",
                o->model, type, o->voice ? "voice" : "ref-audio",
                strcmp(type, "custom_voice") == 0 ? "; this one speaks with --speaker" : "");
        return -1;
    }
    return 0;
}

/* The cloned voice of --voice or --ref-audio (NULL without them). Returns 0, or the exit
 * status after printing the problem. */
static int make_voice(const synth_opts *o, const kz_model *m, kz_voice **voice) {
    *voice = NULL;
    kz_status st = KZ_OK;
    if (o->voice) {
        st = kz_voice_load(o->voice, voice);
        if (st == KZ_OK && (st = kz_voice_check(m, *voice)) != KZ_OK) {
            // The check's reason names the fields, not the file: say which voice it is.
            fprintf(stderr, "kztts synth: %s does not fit %s: %s\n", o->voice, o->model,
                    kz_last_error());
            kz_voice_free(*voice);
            *voice = NULL;
            return cli_exit_status(st);
        }
    } else if (o->ref_audio) {
        kz_voice_params vp;
        kz_voice_default_params(&vp);
        vp.ref_text = o->ref_text;
        vp.xvector_only = o->xvector_only;
        vp.max_seconds = isnan(o->max_ref_seconds) ? 0 : (float)o->max_ref_seconds;
        vp.n_threads = (int32_t)o->threads;
        st = kz_voice_from_file(m, o->ref_audio, &vp, voice);
    }
    if (st != KZ_OK) {
        kz_voice_free(*voice);
        *voice = NULL;
        cli_report_reference("synth", st);
        return cli_exit_status(st);
    }
    return 0;
}

static int run(const synth_opts *o, const char *text_arg) {
    const char *format;
    if (check_options(o, text_arg, &format) != 0) {
        return 2;
    }
    int32_t *ids = NULL;
    size_t n_ids = 0;
    char *stdin_text = NULL;
    const char *text = NULL;
    if (o->token_ids) {
        if (cli_parse_token_ids("synth", o->token_ids, &ids, &n_ids) != 0) {
            return 2;
        }
    } else if (!o->stream_text && (!text_arg || strcmp(text_arg, "-") == 0)) {
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
                          .kv_cache = o->kv_cache, .schedule = o->schedule,
                          .threads = (int)o->threads,
                          .threads_lm = (int)o->threads_lm, .threads_codec = (int)o->threads_codec,
                          .voice_files_only = o->voice && !o->ref_audio};
    if (cli_open_engine("synth", o->model, &e, &m, &s) == 0) {
        kz_voice *voice = NULL;
        rc = check_voice_options(o, m) != 0 ? 2 : make_voice(o, m, &voice);
        rc = rc == 0 ? synthesize(o, format, m, s, voice, text, ids, n_ids) : rc;
        kz_voice_free(voice);
        kz_session_free(s);
        kz_model_free(m);
    }
    free(ids);
    free(stdin_text);
    return rc;
}

int cmd_synth(int argc, char **argv) {
    synth_opts o = {.model = KZ_DEFAULT_MODEL, .out = "out.wav", .isa = "auto", .chunk = -1, .first_chunk = 1, .top_k = -1, .max_utterance = -1,
                    .temperature = NAN, .top_p = NAN, .repetition_penalty = NAN,
                    .max_ref_seconds = NAN, .speed = 1};
    const arg_spec specs[] = {
        ARG_OPT_STRING("--model", "-m", &o.model, "MODEL checkpoint directory, .gguf file or Hugging Face repo id (default " KZ_DEFAULT_MODEL ")"),
        ARG_OPT_STRING("--output", "-o", &o.out, "OUT   output file, - for stdout (default out.wav)"),
        ARG_OPT_CHOICE("--format", NULL, &o.format, CLI_FORMAT_NAMES, "FMT   wav|f32|s16|flac|ogg|mp3|opus|aac|pcm (pcm: s16, as OpenAI names it; default: from OUT's extension; wav when it has none)"),
        ARG_OPT_DOUBLE("--speed", NULL, &o.speed, 0.25, 4, "S     speaking rate, pitch kept: 0.5 half as fast, 2 twice as fast (0.25 to 4, default 1)"),
        ARG_OPT_STRING("--speaker", "-s", &o.speaker, "NAME  CustomVoice speaker (see kztts speakers)"),
        ARG_OPT_STRING("--voice", NULL, &o.voice, "FILE  Base: a cloned voice file (kztts voice create)"),
        ARG_OPT_STRING("--ref-audio", NULL, &o.ref_audio, "FILE  Base: clone the voice of this recording (WAV, FLAC, Ogg, MP3; 1 to 60 s) with --ref-text or --xvector-only"),
        ARG_OPT_STRING("--ref-text", NULL, &o.ref_text, "T     what --ref-audio says: in-context cloning, the official default"),
        ARG_OPT_FLAG("--xvector-only", NULL, &o.xvector_only, "clone from --ref-audio's speaker embedding only (no transcript)"),
        ARG_OPT_DOUBLE("--max-ref-seconds", NULL, &o.max_ref_seconds, 1, 600, "S     longest --ref-audio accepted (default 60)"),
        ARG_OPT_STRING("--language", "-l", &o.language, "LANG  auto (default) or a language name"),
        ARG_OPT_STRING("--instruct", "-i", &o.instruct, "TEXT  style instruction (1.7B CustomVoice, VoiceDesign; the 0.6B CustomVoice ignores it)"),
        ARG_OPT_INT("--seed", NULL, &o.seed, 0, 1e15, "N     random seed (default 0)"),
        ARG_OPT_FLAG("--greedy", NULL, &o.greedy, "argmax decoding (the repetition penalty still applies)"),
        ARG_OPT_DOUBLE("--temperature", NULL, &o.temperature, 0, 100, "T     talker temperature, 0 = --greedy (default from the model: 0.9)"),
        ARG_OPT_INT("--top-k", NULL, &o.top_k, 0, 1 << 20, "K     talker top-k, 0 = off, at most the vocabulary (default from the model: 50)"),
        ARG_OPT_ABOVE("--top-p", NULL, &o.top_p, 0, 1, "P     talker top-p in (0, 1] (default from the model: 1)"),
        ARG_OPT_ABOVE("--repetition-penalty", NULL, &o.repetition_penalty, 0, 100, "R     talker repetition penalty in (0, 100], 1 = off (default from the model: 1.05)"),
        ARG_OPT_INT("--frames", NULL, &o.frames, 1, 100000, "N     exactly N frames in all, however long the text (80 ms each in the released models)"),
        ARG_OPT_INT("--max-frames", NULL, &o.max_frames, 1, 100000, "N     at most N frames in all (default: no total); each utterance stops at 50 + 8 frames per text token anyway"),
        ARG_OPT_STRING("--token-ids", NULL, &o.token_ids, "IDS   comma-separated ids of the text instead of TEXT"),
        ARG_OPT_STRING("--dump-codes", NULL, &o.dump_codes, "FILE  write the generated codes, one frame per line (- = stdout; another file than -o)"),
        ARG_OPT_CHOICE("--layout", NULL, &o.layout, LAYOUT_NAMES, "L     non-streaming or streaming text layout (default: non-streaming; streaming with a Base model, as the official voice clone)"),
        ARG_OPT_CHOICE("--split", NULL, &o.split, CLI_SPLIT_NAMES, "S     tokenizer split: qwen2 (default) or mistral"),
        ARG_OPT_INT("--first-chunk", NULL, &o.first_chunk, 1, 1024, "N     frames in the first audio chunk (default 1)"),
        ARG_OPT_INT("--chunk", NULL, &o.chunk, 0, 1024, "N     frames per later audio chunk; 0 = adaptive, 1 to 16 by the audio buffered (default: 0 with --stream or --stream-text, else 16)"),
        ARG_OPT_INT("--max-utterance", NULL, &o.max_utterance, 0, 1 << 20, "N     split longer text at sentence ends into utterances of <= N bytes (default 600, 0 = never)"),
        ARG_OPT_FLAG("--stream", NULL, &o.stream, "write each chunk out as soon as it is decoded (for | aplay)"),
        ARG_OPT_FLAG("--stream-text", NULL, &o.stream_text, "read the text from stdin as it arrives and speak while it comes (streaming layout)"),
        ARG_OPT_FLAG("--quiet", "-q", &o.quiet, CLI_QUIET_HELP),
        ARG_OPT_INT("--threads", "-t", &o.threads, 0, 256, "N     threads (default: all cores, at most 8)"),
        ARG_OPT_INT("--threads-lm", NULL, &o.threads_lm, 0, 256, "N     threads of the talker/code predictor stage (default all)"),
        ARG_OPT_INT("--threads-codec", NULL, &o.threads_codec, 0, 256, "N     threads of the codec stage (default all; half with overlap)"),
        ARG_OPT_CHOICE("--isa", NULL, &o.isa, CLI_ISA_NAMES, "LEVEL auto|scalar|avx2|avx512|neon kernel cap"),
        ARG_OPT_CHOICE("--codec-precision", NULL, &o.codec_precision, CLI_PRECISION_NAMES, CLI_CODEC_PRECISION_HELP),
        ARG_OPT_CHOICE("--kv-cache", NULL, &o.kv_cache, CLI_KV_CACHE_NAMES, CLI_KV_CACHE_HELP),
        ARG_OPT_CHOICE("--schedule", NULL, &o.schedule, CLI_SCHEDULE_NAMES, "S     how the LM and codec stages share the cores: turns (default) or overlap"),
        ARG_OPT_FLAG("--help", "-h", &o.help, "show this help"),
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
    if (o.quiet) {
        progress_quiet();
    }
    return run(&o, n_pos ? pos[0] : NULL);
}
