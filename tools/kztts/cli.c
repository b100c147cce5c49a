/*
 * cli.c - model/session opening (with the option names of ISA, schedule and codec
 * precision), error reporting, words of the model description, and text input
 * (--token-ids, stdin) shared by subcommands.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub.h"

void cli_report(const char *cmd, kz_status st) {
    const char *msg = kz_last_error();
    fprintf(stderr, "kztts %s: %s%s%s\n", cmd, kz_status_str(st), msg[0] ? ": " : "", msg);
}

static int parse_isa(const char *isa, kz_isa_cap *cap) {
    static const struct { const char *name; kz_isa_cap cap; } names[] = {
        {"auto", KZ_ISA_CAP_AUTO}, {"scalar", KZ_ISA_CAP_SCALAR},
        {"avx2", KZ_ISA_CAP_AVX2}, {"avx512", KZ_ISA_CAP_AVX512}, {"neon", KZ_ISA_CAP_NEON}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(isa, names[i].name) == 0) {
            *cap = names[i].cap;
            return 0;
        }
    }
    return -1;
}

int cli_open(const char *cmd, const char *path, const char *isa, int n_threads, kz_model **model,
             kz_session **session) {
    const cli_engine e = {.isa = isa, .threads = n_threads};
    return cli_open_engine(cmd, path, &e, model, session);
}

int cli_parse_schedule(const char *cmd, const char *name, kz_schedule *out) {
    *out = KZ_SCHEDULE_AUTO;
    if (!name || strcmp(name, "auto") == 0) {
        return 0;
    }
    if (strcmp(name, "turns") == 0 || strcmp(name, "overlap") == 0) {
        *out = name[0] == 't' ? KZ_SCHEDULE_TURNS : KZ_SCHEDULE_OVERLAP;
        return 0;
    }
    fprintf(stderr, "kztts %s: --schedule must be auto, turns or overlap, got '%s'\n", cmd, name);
    return -1;
}

int cli_parse_codec_precision(const char *cmd, const char *name, kz_precision *out) {
    static const struct { const char *name; kz_precision p; } names[] = {
        {"f32", KZ_PRECISION_F32},
        {"bf16", KZ_PRECISION_BF16},
        {"winograd", KZ_PRECISION_WINOGRAD},
        {"winograd-bf16", KZ_PRECISION_WINOGRAD_BF16},
        {"fast", KZ_PRECISION_FAST}};
    *out = KZ_PRECISION_F32;
    for (size_t i = 0; name && i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(name, names[i].name) == 0) {
            *out = names[i].p;
            return 0;
        }
    }
    if (!name) {
        return 0;
    }
    fprintf(stderr,
            "kztts %s: --codec-precision must be f32, bf16, winograd, winograd-bf16 or fast, "
            "got '%s'\n",
            cmd, name);
    return -1;
}

const char *cli_model_word(const kz_model *m, const char *key, char *buf, size_t cap) {
    const char *v = strstr(kz_model_describe(m), key);
    snprintf(buf, cap, "unknown");
    if (v) {
        v += strlen(key);
        snprintf(buf, cap, "%.*s", (int)strcspn(v, " \n"), v);
    }
    return buf;
}

int cli_open_engine(const char *cmd, const char *path, const cli_engine *e, kz_model **model,
                    kz_session **session) {
    *model = NULL;
    *session = NULL;
    const char *isa = e->isa ? e->isa : "auto", *codec_precision = e->codec_precision;
    kz_session_params sp;
    kz_session_default_params(&sp);
    if (cli_parse_schedule(cmd, e->schedule, &sp.schedule) != 0) {
        return -1;
    }
    kz_model_params mp;
    kz_model_default_params(&mp);
    if (parse_isa(isa, &mp.isa) != 0) {
        fprintf(stderr, "kztts %s: --isa must be auto, scalar, avx2, avx512 or neon, got '%s'\n",
                cmd, isa);
        return -1;
    }
    if (cli_parse_codec_precision(cmd, codec_precision, &mp.codec_precision) != 0) {
        return -1;
    }
    char *dir;
    if (hub_resolve(cmd, path, &dir) != 0) {
        return -1;
    }
    kz_status st = kz_model_load(dir, &mp, model);
    free(dir);
    if (st != KZ_OK) {
        cli_report(cmd, st);
        return -1;
    }
    sp.n_threads = e->threads;
    sp.n_threads_lm = e->threads_lm;
    sp.n_threads_codec = e->threads_codec;
    st = kz_session_new(*model, &sp, session);
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
    if (!buf || n > MAX_TEXT_BYTES) {
        fprintf(stderr, "kztts %s: text on stdin is larger than %u bytes\n", cmd, MAX_TEXT_BYTES);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

bool cli_discard_audio(const float *pcm, size_t n, int64_t pos, bool last, void *user) {
    (void)pcm;
    (void)n;
    (void)pos;
    (void)last;
    (void)user;
    return true;
}
