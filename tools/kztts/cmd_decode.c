/*
 * cmd_decode.c - `kztts decode`: a codes file -> audio file.
 *
 * Flow: options -> model + session -> codes file (checked against the model's
 * codebook count and size) -> output opened (out_file.h) -> streaming kz_decode writing
 * each chunk as it arrives (progress on a terminal) -> committed on success, removed on
 * any failure (a write failure names the file and the reason).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "audio_out.h"
#include "cli.h"
#include "codes_file.h"
#include "progress.h"

typedef struct decode_opts {
    const char *model, *codes, *out, *format, *isa, *codec_precision;
    int64_t threads, chunk;
    double speed;
    bool official, help, quiet;
} decode_opts;

typedef struct sink {
    audio_out *out;
    double total_s; /* the audio the file will play: the codes' length over --speed */
    int32_t rate;
    progress progress;
} sink;

/* Counts the audio written, after the speed change, as the file plays it. */
static void show_progress(sink *s, bool final) {
    const double t = progress_elapsed(&s->progress);
    const double audio_s = (double)audio_out_samples(s->out) / s->rate;
    progress_show(&s->progress, final, "decode: %.1f / %.1f s of audio (%.2fx real time)",
                  audio_s, s->total_s, t > 0 ? audio_s / t : 0.0);
}

static bool write_chunk(const float *pcm, size_t n, int64_t pos_frame, bool is_last, void *user) {
    sink *s = user;
    (void)pos_frame;
    (void)is_last;
    const bool ok = audio_out_write(s->out, pcm, n) == 0;
    show_progress(s, false);
    return ok;
}

static int run(const decode_opts *o) {
    const char *format;
    if (cli_output_format("decode", o->out, o->format, &format) != 0) {
        return 2;
    }
    kz_model *model;
    kz_session *session;
    const cli_engine e = {.isa = o->isa, .codec_precision = o->codec_precision,
                          .threads = (int)o->threads, .codec_only = true};
    if (cli_open_engine("decode", o->model, &e, &model, &session) != 0) {
        return 1;
    }
    int32_t *codes = NULL;
    size_t n_frames = 0;
    int rc = codes_file_read(o->codes, kz_model_num_codebooks(model),
                             kz_model_codebook_size(model), &codes, &n_frames);
    audio_out *out = NULL;
    const size_t total_samples = n_frames * (size_t)kz_model_samples_per_frame(model);
    sink snk = {.rate = kz_model_sample_rate(model)};
    snk.total_s = (double)total_samples / snk.rate / o->speed;
    if (rc == 0) {
        out = audio_out_open(o->out, format, snk.rate, total_samples, (float)o->speed);
        rc = out ? 0 : -1;
    }
    if (rc == 0) {
        kz_decode_params dp;
        kz_decode_default_params(&dp);
        dp.chunk_frames = (int32_t)o->chunk;
        dp.mode = o->official ? KZ_DECODE_OFFICIAL : KZ_DECODE_STREAM;
        snk.out = out;
        progress_begin(&snk.progress, strcmp(o->out, "-") != 0);
        dp.on_audio = write_chunk;
        dp.user = &snk;
        kz_status st = kz_decode(session, codes, n_frames, &dp);
        if (st == KZ_OK) {
            audio_out_drain(out); // a failure is recorded in out and reported at the finish
            show_progress(&snk, true);
        }
        progress_end(&snk.progress);
        if (st != KZ_OK && !audio_out_failed(out)) { // a failed write is what finish reports
            cli_report("decode", st);
        }
        rc = st == KZ_OK ? 0 : -1;
    }
    if (out && audio_out_finish(out, rc == 0) != 0) {
        rc = -1;
    }
    free(codes);
    kz_session_free(session);
    kz_model_free(model);
    return rc == 0 ? 0 : 1;
}

int cmd_decode(int argc, char **argv) {
    decode_opts o = {.out = "out.wav", .isa = "auto", .chunk = 4, .speed = 1};
    const arg_spec specs[] = {
        ARG_OPT_STRING("--model", "-m", &o.model, "MODEL checkpoint or codec directory, .gguf file or Hugging Face repo id"),
        ARG_OPT_STRING("--codes", NULL, &o.codes, "FILE  codes, one frame per line: the model's codebooks (16 in the released models); - = stdin"),
        ARG_OPT_STRING("--output", "-o", &o.out, "OUT   output file, - for stdout (default out.wav)"),
        ARG_OPT_CHOICE("--format", NULL, &o.format, CLI_FORMAT_NAMES, "FMT   wav|f32|s16|flac|ogg|mp3|opus|aac|pcm (pcm: s16, as OpenAI names it; default: from OUT's extension; wav when it has none)"),
        ARG_OPT_DOUBLE("--speed", NULL, &o.speed, 0.25, 4, "S     speaking rate, pitch kept: 0.5 half as fast, 2 twice as fast (0.25 to 4, default 1)"),
        ARG_OPT_INT("--threads", "-t", &o.threads, 0, 256, "N     threads (default: all cores, at most 8)"),
        ARG_OPT_INT("--chunk", NULL, &o.chunk, 1, 1024, "N     frames per streamed chunk (default 4)"),
        ARG_OPT_FLAG("--official-chunking", NULL, &o.official, "decode in 300-frame windows with 25 frames of context, as the official package"),
        ARG_OPT_CHOICE("--isa", NULL, &o.isa, CLI_ISA_NAMES, "LEVEL auto|scalar|avx2|avx512|neon kernel cap"),
        ARG_OPT_CHOICE("--codec-precision", NULL, &o.codec_precision, CLI_PRECISION_NAMES, CLI_CODEC_PRECISION_HELP),
        ARG_OPT_FLAG("--quiet", "-q", &o.quiet, CLI_QUIET_HELP),
        ARG_OPT_FLAG("--help", "-h", &o.help, "show this help"),
    };
    int n_specs = (int)(sizeof specs / sizeof specs[0]);
    const char *pos[1];
    int n_pos;
    if (args_parse("decode", specs, n_specs, argc, argv, pos, 0, &n_pos) != 0) {
        return 2;
    }
    if (o.help) {
        args_usage("decode", "-m MODEL --codes FILE [-o OUT] [options]", specs, n_specs);
        return 0;
    }
    if (!o.model || !o.codes) {
        fprintf(stderr, "kztts decode: -m MODEL and --codes FILE are required\n");
        return 2;
    }
    if (o.quiet) {
        progress_quiet();
    }
    return run(&o);
}
