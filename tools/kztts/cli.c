/*
 * cli.c - the names of the shared options, model/session opening, error reporting
 * and exit statuses, the output format, and text input (--token-ids, stdin) shared by
 * subcommands (see cli.h).
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hub.h"

/* "kztts CMD: <status>: <last error><hint>" on stderr. */
static void report(const char *cmd, kz_status st, const char *hint) {
    const char *msg = kz_last_error();
    fprintf(stderr, "kztts %s: %s%s%s%s\n", cmd, kz_status_str(st), msg[0] ? ": " : "", msg,
            hint);
}

void cli_report(const char *cmd, kz_status st) {
    report(cmd, st, "");
}

void cli_report_reference(const char *cmd, kz_status st) {
    // The library states the length and the limit (kztts.h, kz_voice_params); raising
    // the limit is this command line's business.
    const bool too_long = st == KZ_STATUS_BAD_INPUT && strstr(kz_last_error(), "over the limit of");
    report(cmd, st, too_long ? " (raise it with --max-ref-seconds S, up to 600)" : "");
}

const arg_choice CLI_ISA_NAMES[] = {
    {"auto", KZ_ISA_CAP_AUTO}, {"scalar", KZ_ISA_CAP_SCALAR}, {"avx2", KZ_ISA_CAP_AVX2},
    {"avx512", KZ_ISA_CAP_AVX512}, {"neon", KZ_ISA_CAP_NEON}, {NULL, 0}};
const arg_choice CLI_PRECISION_NAMES[] = {
    {"exact", KZ_PRECISION_EXACT}, {"f32", KZ_PRECISION_EXACT}, {"fast", KZ_PRECISION_FAST},
    {"bf16", KZ_PRECISION_BF16}, {"winograd", KZ_PRECISION_WINOGRAD},
    {"winograd-bf16", KZ_PRECISION_WINOGRAD_BF16}, {NULL, 0}};
const arg_choice CLI_KV_CACHE_NAMES[] = {
    {"f32", KZ_KV_CACHE_F32}, {"f16", KZ_KV_CACHE_F16}, {NULL, 0}};
const arg_choice CLI_SCHEDULE_NAMES[] = {
    {"auto", KZ_SCHEDULE_AUTO}, {"turns", KZ_SCHEDULE_TURNS}, {"overlap", KZ_SCHEDULE_OVERLAP},
    {NULL, 0}};
const arg_choice CLI_SPLIT_NAMES[] = {
    {"qwen2", KZ_TEXT_SPLIT_QWEN2}, {"mistral", KZ_TEXT_SPLIT_MISTRAL}, {NULL, 0}};
// The value is whether the format streams to stdout (a header that needs no seeking back).
const arg_choice CLI_FORMAT_NAMES[] = {
    {"wav", 1}, {"f32", 1}, {"s16", 1}, {"flac", 0}, {"ogg", 0},
    {"mp3", 1}, {"opus", 1}, {"aac", 1},  {"pcm", 1},  {NULL, 0}};

int cli_exit_status(kz_status st) {
    return st == KZ_STATUS_INVALID_ARGUMENT ? 2 : 1;
}

/* name (NULL: keep *out) through choices into *out; -1 after the option's one-line error. */
static int lookup(const char *cmd, const char *option, const arg_choice *choices,
                  const char *name, int *out) {
    int v = args_choice_value(choices, name);
    if (name && v < 0) {
        args_choice_error(cmd, option, choices, name);
        return -1;
    }
    *out = name ? v : *out;
    return 0;
}

int cli_open(const char *cmd, const char *path, const char *isa, int n_threads, kz_model **model,
             kz_session **session) {
    const cli_engine e = {.isa = isa, .threads = n_threads};
    return cli_open_engine(cmd, path, &e, model, session);
}

int cli_parse_schedule(const char *cmd, const char *name, kz_schedule *out) {
    int v = KZ_SCHEDULE_AUTO;
    int rc = lookup(cmd, "--schedule", CLI_SCHEDULE_NAMES, name, &v);
    *out = (kz_schedule)v;
    return rc;
}

int cli_parse_kv_cache(const char *cmd, const char *name, kz_kv_cache *out) {
    int v = KZ_KV_CACHE_DEFAULT;
    int rc = lookup(cmd, "--kv-cache", CLI_KV_CACHE_NAMES, name, &v);
    *out = (kz_kv_cache)v;
    return rc;
}

int cli_parse_codec_precision(const char *cmd, const char *name, kz_precision *out) {
    int v = KZ_PRECISION_DEFAULT; // the model file's choice
    int rc = lookup(cmd, "--codec-precision", CLI_PRECISION_NAMES, name, &v);
    *out = (kz_precision)v;
    return rc;
}

/* The extension of path's last component ("" when it has none; "wav" of "a/out.wav"). */
static const char *extension(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    return dot && dot != base ? dot + 1 : "";
}

int cli_output_format(const char *cmd, const char *out, const char *format, const char **name) {
    const char *ext = strcmp(out, "-") == 0 ? "" : extension(out);
    const int ext_format = args_choice_value(CLI_FORMAT_NAMES, ext);
    if (!format && ext[0] && ext_format < 0) {
        fprintf(stderr, "kztts %s: cannot tell the audio format of '%s' from its extension; "
                        "give --format (wav, f32, s16, flac, ogg, mp3, opus, aac, pcm)\n",
                cmd, out);
        return -1;
    }
    if (format && ext_format >= 0 && strcasecmp(format, ext) != 0) {
        fprintf(stderr, "kztts %s: --format %s contradicts the extension of '%s'\n", cmd,
                format, out);
        return -1;
    }
    *name = "wav";
    for (const arg_choice *c = CLI_FORMAT_NAMES; c->name; c++) {
        if (strcasecmp(c->name, format ? format : ext) == 0) {
            *name = c->name;
        }
    }
    if (strcmp(out, "-") == 0 && args_choice_value(CLI_FORMAT_NAMES, *name) == 0) {
        fprintf(stderr, "kztts %s: --format %s cannot be written to stdout (wav, f32, s16, pcm, "
                        "mp3, opus, aac)\n",
                cmd, *name);
        return -1;
    }
    return 0;
}

/* The model at path (a hub id resolved first) with mp; -1 after one line. */
static int load_model(const char *cmd, const char *path, const kz_model_params *mp,
                      kz_model **model) {
    char *dir;
    if (hub_resolve(cmd, path, &dir) != 0) {
        return -1;
    }
    kz_status st = kz_model_load(dir, mp, model);
    free(dir);
    if (st != KZ_OK) {
        cli_report(cmd, st);
        return -1;
    }
    return 0;
}

int cli_load(const char *cmd, const char *path, const char *isa, kz_model **model) {
    *model = NULL;
    kz_model_params mp;
    kz_model_default_params(&mp);
    int cap = (int)mp.isa;
    if (lookup(cmd, "--isa", CLI_ISA_NAMES, isa, &cap) != 0) {
        return -1;
    }
    mp.isa = (kz_isa_cap)cap;
    return load_model(cmd, path, &mp, model);
}

int cli_open_engine(const char *cmd, const char *path, const cli_engine *e, kz_model **model,
                    kz_session **session) {
    *model = NULL;
    *session = NULL;
    kz_session_params sp;
    kz_session_default_params(&sp);
    kz_model_params mp;
    kz_model_default_params(&mp);
    int isa = (int)mp.isa, precision = (int)mp.codec_precision, schedule = (int)sp.schedule;
    int kv = (int)mp.kv_cache;
    if (lookup(cmd, "--isa", CLI_ISA_NAMES, e->isa, &isa) != 0 ||
        lookup(cmd, "--codec-precision", CLI_PRECISION_NAMES, e->codec_precision,
               &precision) != 0 ||
        lookup(cmd, "--kv-cache", CLI_KV_CACHE_NAMES, e->kv_cache, &kv) != 0 ||
        lookup(cmd, "--schedule", CLI_SCHEDULE_NAMES, e->schedule, &schedule) != 0) {
        return -1;
    }
    mp.isa = (kz_isa_cap)isa;
    mp.codec_precision = (kz_precision)precision;
    mp.kv_cache = (kz_kv_cache)kv;
    mp.skip_voice_encoders = e->voice_files_only;
    mp.codec_only = e->codec_only;
    sp.schedule = (kz_schedule)schedule;
    if (load_model(cmd, path, &mp, model) != 0) {
        return -1;
    }
    sp.n_threads = e->threads;
    sp.n_threads_lm = e->threads_lm;
    sp.n_threads_codec = e->threads_codec;
    kz_status st = kz_session_new(*model, &sp, session);
    if (st != KZ_OK) {
        cli_report(cmd, st);
        kz_model_free(*model);
        *model = NULL;
        return -1;
    }
    return 0;
}

#define MAX_TOKEN_IDS 65536
#define MAX_TEXT_BYTES (1u << 20)

int cli_parse_token_ids(const char *cmd, const char *s, int32_t **ids, size_t *n_ids) {
    *ids = malloc(MAX_TOKEN_IDS * sizeof **ids);
    *n_ids = 0;
    const char *p = s;
    while (*ids && *p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > 0x7fffffff || *n_ids == MAX_TOKEN_IDS ||
            (*end && *end != ',' && *end != ' ')) {
            fprintf(stderr, "kztts %s: --token-ids: expected comma-separated ids, at '%s'\n", cmd,
                    p);
            free(*ids);
            *ids = NULL;
            return -1;
        }
        (*ids)[(*n_ids)++] = (int32_t)v;
        p = *end ? end + 1 : end;
    }
    if (*n_ids == 0) {
        fprintf(stderr, "kztts %s: --token-ids is empty\n", cmd);
        free(*ids);
        *ids = NULL;
        return -1;
    }
    return 0;
}

char *cli_read_stdin(const char *cmd) {
    char *buf = malloc(MAX_TEXT_BYTES + 1);
    size_t n = buf ? fread(buf, 1, MAX_TEXT_BYTES + 1, stdin) : 0;
    const char *nul = buf ? memchr(buf, 0, n) : NULL;
    if (!buf || ferror(stdin) || n > MAX_TEXT_BYTES) {
        fprintf(stderr, "kztts %s: %s\n", cmd,
                !buf             ? "out of memory for the text"
                : ferror(stdin)  ? "cannot read standard input"
                                 : "text on standard input is larger than 1 MB");
    } else if (nul) {
        fprintf(stderr, "kztts %s: bad input: NUL byte at byte %zu of standard input\n", cmd,
                (size_t)(nul - buf));
    } else {
        buf[n] = '\0';
        return buf;
    }
    free(buf);
    return NULL;
}

bool cli_discard_audio(const float *pcm, size_t n, int64_t pos, bool last, void *user) {
    (void)pcm;
    (void)n;
    (void)pos;
    (void)last;
    (void)user;
    return true;
}
