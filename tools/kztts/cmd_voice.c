/*
 * cmd_voice.c - `kztts voice create` and `kztts voice info`: cloned voices as files.
 *
 * create: options (--ref-text T or --xvector-only, exactly one) -> Base model (no session:
 *   only the encoders run) -> kz_voice_from_file (reference read, resampled, x-vector, and
 *   for ICL the reference codes) -> kz_voice_save (the library writes the file complete or
 *   not at all; a signal meanwhile is deferred until it is done, interrupt.h) -> one
 *   summary line on stderr.
 * info: kz_voice_load (every field validated) -> each field on a line of its own ->
 *   with -m MODEL, whether the voice fits that model (kz_voice_check's reason if not).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "interrupt.h"
#include "progress.h"

typedef struct create_opts {
    const char *model, *audio, *text, *out, *isa;
    double max_seconds;
    int64_t threads;
    bool xvector_only, help, quiet;
} create_opts;

/* The transcript on one line: control characters and backslashes escaped, the rest as is. */
static void print_text(const char *text) {
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if (*p == '\\' || *p == '"') {
            printf("\\%c", *p);
        } else if (*p == '\n') {
            fputs("\\n", stdout);
        } else if (*p < 0x20 || *p == 0x7f) {
            printf("\\x%02x", *p);
        } else {
            putchar(*p);
        }
    }
    puts("\"");
}

static void print_info(const char *path, const kz_voice_info *i) {
    printf("file: %s\n", path);
    printf("format version: %d\n", (int)i->format_version);
    printf("kind: %s\n", i->icl ? "ICL (x-vector, reference codes and transcript)"
                                : "x-vector only");
    printf("model type: %s\n", i->model_type);
    printf("x-vector: %d values\n", (int)i->xvector_dim);
    printf("reference: %.2f s\n", i->ref_seconds);
    printf("reference codes: %d frames x %d codebooks\n", (int)i->n_ref_frames,
           (int)i->n_codebooks);
    printf("transcript: ");
    print_text(i->ref_text);
    printf("fingerprint: %016" PRIx64 "\n", i->fingerprint);
}

/* Whether voice fits the model at path: 0 after "model: fits", else the exit status. */
static int check_model(const char *path, const char *isa, const kz_voice *voice) {
    kz_model *model;
    if (cli_load("voice info", path, isa, &model) != 0) {
        return 1;
    }
    kz_status st = kz_voice_check(model, voice);
    if (st == KZ_OK) {
        printf("model: fits %s\n", path);
    } else {
        cli_report("voice info", st);
    }
    kz_model_free(model);
    return st == KZ_OK ? 0 : cli_exit_status(st);
}

static int voice_info(int argc, char **argv) {
    const char *model = NULL, *isa = "auto";
    bool help = false, quiet = false;
    const arg_spec specs[] = {
        ARG_OPT_STRING("--model", "-m", &model, "MODEL also say whether the voice fits this model"),
        ARG_OPT_CHOICE("--isa", NULL, &isa, CLI_ISA_NAMES, "LEVEL auto|scalar|avx2|avx512|neon kernel cap (with -m)"),
        ARG_OPT_FLAG("--quiet", "-q", &quiet, CLI_QUIET_HELP),
        ARG_OPT_FLAG("--help", "-h", &help, "show this help"),
    };
    int n_specs = (int)(sizeof specs / sizeof specs[0]);
    const char *pos[1];
    int n_pos;
    if (args_parse("voice info", specs, n_specs, argc, argv, pos, 1, &n_pos) != 0) {
        return 2;
    }
    if (help || n_pos != 1) {
        args_usage("voice info", "NAME.kzvoice [-m MODEL]", specs, n_specs);
        return help ? 0 : 2;
    }
    if (quiet) {
        progress_quiet();
    }
    kz_voice *voice;
    kz_status st = kz_voice_load(pos[0], &voice);
    if (st != KZ_OK) {
        cli_report("voice info", st);
        return 1;
    }
    kz_voice_info info;
    kz_voice_get_info(voice, &info);
    print_info(pos[0], &info);
    int rc = model ? check_model(model, isa, voice) : 0;
    kz_voice_free(voice);
    return rc;
}

static int create(const create_opts *o) {
    kz_model *model;
    if (cli_load("voice create", o->model, o->isa, &model) != 0) {
        return 1;
    }
    kz_voice_params p;
    kz_voice_default_params(&p);
    p.ref_text = o->text;
    p.xvector_only = o->xvector_only;
    p.max_seconds = (float)o->max_seconds;
    p.n_threads = (int32_t)o->threads;
    kz_voice *voice = NULL;
    kz_status st = kz_voice_from_file(model, o->audio, &p, &voice);
    if (st == KZ_OK) {
        interrupt_defer_begin(); // the library owns the temporary file: let it finish
        st = kz_voice_save(voice, o->out);
        interrupt_defer_end();
    }
    if (st != KZ_OK) {
        cli_report_reference("voice create", st);
    } else if (!o->quiet) {
        kz_voice_info i;
        kz_voice_get_info(voice, &i);
        fprintf(stderr, "kztts voice create: %s: %s voice from %.2f s of reference (%d frames)\n",
                o->out, i.icl ? "ICL" : "x-vector-only", i.ref_seconds, (int)i.n_ref_frames);
    }
    kz_voice_free(voice);
    kz_model_free(model);
    return st == KZ_OK ? 0 : cli_exit_status(st);
}

static int voice_create(int argc, char **argv) {
    create_opts o = {.isa = "auto"};
    const arg_spec specs[] = {
        ARG_OPT_STRING("--model", "-m", &o.model, "MODEL Base checkpoint directory, .gguf file or Hugging Face repo id"),
        ARG_OPT_STRING("--ref-audio", NULL, &o.audio, "FILE  reference recording (WAV, FLAC, Ogg, MP3; any rate and channels; 1 s to --max-ref-seconds)"),
        ARG_OPT_STRING("--ref-text", NULL, &o.text, "TEXT  what the reference says: an in-context (ICL) voice, the official default"),
        ARG_OPT_FLAG("--xvector-only", NULL, &o.xvector_only, "a voice of the speaker embedding only (no transcript needed; less close)"),
        ARG_OPT_DOUBLE("--max-ref-seconds", NULL, &o.max_seconds, 1, 600, "S     longest reference accepted, 1..600 (default 60)"),
        ARG_OPT_INT("--threads", "-t", &o.threads, 0, 256, "N     threads (default: all cores, at most 8)"),
        ARG_OPT_STRING("--output", "-o", &o.out, "OUT   the voice file to write (NAME.kzvoice)"),
        ARG_OPT_CHOICE("--isa", NULL, &o.isa, CLI_ISA_NAMES, "LEVEL auto|scalar|avx2|avx512|neon kernel cap"),
        ARG_OPT_FLAG("--quiet", "-q", &o.quiet, CLI_QUIET_HELP),
        ARG_OPT_FLAG("--help", "-h", &o.help, "show this help"),
    };
    int n_specs = (int)(sizeof specs / sizeof specs[0]);
    const char *pos[1];
    int n_pos;
    if (args_parse("voice create", specs, n_specs, argc, argv, pos, 0, &n_pos) != 0) {
        return 2;
    }
    if (o.help) {
        args_usage("voice create", "-m BASE --ref-audio FILE (--ref-text TEXT | --xvector-only) -o NAME.kzvoice [options]", specs, n_specs);
        return 0;
    }
    const char *problem = !o.model || !o.audio || !o.out
                              ? "-m MODEL, --ref-audio FILE and -o NAME.kzvoice are required"
                          : o.text && o.xvector_only
                              ? "--ref-text and --xvector-only exclude each other"
                          : !o.text && !o.xvector_only
                              ? "give --ref-text \"what the reference says\" (an ICL voice) or "
                                "--xvector-only"
                          : strcmp(o.out, "-") == 0 ? "-o -: a voice file cannot go to stdout"
                                                    : NULL;
    if (problem) {
        fprintf(stderr, "kztts voice create: %s\n", problem);
        return 2;
    }
    if (o.quiet) {
        progress_quiet();
    }
    return create(&o);
}

int cmd_voice(int argc, char **argv) {
    if (argc >= 1 && strcmp(argv[0], "create") == 0) {
        return voice_create(argc - 1, argv + 1);
    }
    if (argc >= 1 && strcmp(argv[0], "info") == 0) {
        return voice_info(argc - 1, argv + 1);
    }
    FILE *f = argc >= 1 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)
                  ? stdout
                  : stderr;
    fprintf(f, "usage: kztts voice create -m BASE --ref-audio FILE (--ref-text TEXT | "
               "--xvector-only) -o NAME.kzvoice\n"
               "       kztts voice info NAME.kzvoice [-m MODEL]\n"
               "'kztts voice create --help' lists its options.\n");
    return f == stdout ? 0 : 2;
}
