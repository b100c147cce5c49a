/*
 * cmd_encode.c - `kztts encode`: reference audio -> codec codes file.
 *
 * Flow: options -> model (no session: only the codec encoder runs) -> kz_encode_file
 * (audio read, downmixed, resampled to the codec's rate, checked; codes [frames, 16]) ->
 * the codes file's text (codes_file.h: one frame per line, codebook 0 first) -> output
 * (out_file.h; - = stdout) committed on success; on any failure nothing is written.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "args.h"
#include "cli.h"
#include "codes_file.h"
#include "out_file.h"
#include "progress.h"

typedef struct encode_opts {
    const char *model, *audio, *out, *isa;
    double max_seconds;
    int64_t threads;
    bool help, quiet;
} encode_opts;

/* The codes as a codes file at o->out; -1 after one line. */
static int write_codes(const encode_opts *o, const int32_t *codes, size_t n_frames,
                       int32_t n_codebooks) {
    size_t n_bytes;
    char *text = codes_file_text(codes, n_frames, n_codebooks, &n_bytes);
    if (!text) {
        fprintf(stderr, "kztts encode: out of memory for the codes file\n");
        return -1;
    }
    out_file *f = out_file_open(o->out);
    int rc = f ? out_file_write(f, text, n_bytes) : -1;
    free(text);
    if (f && out_file_commit(&f, 1, rc == 0) != 0) {
        rc = -1;
    }
    return rc;
}

static int run(const encode_opts *o) {
    kz_model *model;
    if (cli_load("encode", o->model, o->isa, &model) != 0) {
        return 1;
    }
    kz_voice_params p;
    kz_voice_default_params(&p);
    p.max_seconds = (float)o->max_seconds;
    p.n_threads = (int32_t)o->threads;
    int32_t *codes = NULL, n_codebooks = 0;
    size_t n_frames = 0;
    kz_status st = kz_encode_file(model, o->audio, &p, &codes, &n_frames, &n_codebooks);
    int rc = 0;
    if (st != KZ_OK) {
        cli_report_reference("encode", st);
        rc = cli_exit_status(st);
    } else if (write_codes(o, codes, n_frames, n_codebooks) != 0) {
        rc = 1;
    }
    kz_codes_free(codes);
    kz_model_free(model);
    return rc;
}

int cmd_encode(int argc, char **argv) {
    encode_opts o = {.isa = "auto"};
    const arg_spec specs[] = {
        ARG_OPT_STRING("--model", "-m", &o.model, "MODEL Base checkpoint or codec directory, .gguf file or Hugging Face repo id"),
        ARG_OPT_STRING("--audio", NULL, &o.audio, "FILE  audio to encode (WAV, FLAC, Ogg, MP3; any rate and channels)"),
        ARG_OPT_STRING("--output", "-o", &o.out, "OUT   codes file, one frame per line (the model's codebooks, 16 in the released models); - for stdout"),
        ARG_OPT_DOUBLE("--max-ref-seconds", NULL, &o.max_seconds, 1, 600, "S     longest audio accepted, 1..600 (default 60)"),
        ARG_OPT_INT("--threads", "-t", &o.threads, 0, 256, "N     threads (default: all cores, at most 8)"),
        ARG_OPT_CHOICE("--isa", NULL, &o.isa, CLI_ISA_NAMES, "LEVEL auto|scalar|avx2|avx512|neon kernel cap"),
        ARG_OPT_FLAG("--quiet", "-q", &o.quiet, CLI_QUIET_HELP),
        ARG_OPT_FLAG("--help", "-h", &o.help, "show this help"),
    };
    int n_specs = (int)(sizeof specs / sizeof specs[0]);
    const char *pos[1];
    int n_pos;
    if (args_parse("encode", specs, n_specs, argc, argv, pos, 0, &n_pos) != 0) {
        return 2;
    }
    if (o.help) {
        args_usage("encode", "-m MODEL --audio FILE -o CODES.txt [options]", specs, n_specs);
        return 0;
    }
    if (!o.model || !o.audio || !o.out) {
        fprintf(stderr, "kztts encode: -m MODEL, --audio FILE and -o CODES.txt are required\n");
        return 2;
    }
    if (o.quiet) {
        progress_quiet();
    }
    return run(&o);
}
