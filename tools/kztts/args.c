/*
 * args.c - option table parsing (see args.h).
 */
#include "args.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const arg_spec *find(const arg_spec *specs, int n, const char *name) {
    for (int i = 0; i < n; i++) {
        if (strcmp(specs[i].name, name) == 0 || (specs[i].alias && strcmp(specs[i].alias, name) == 0)) {
            return &specs[i];
        }
    }
    return NULL;
}

static int set_value(const char *cmd, const arg_spec *s, const char *value) {
    char *end = NULL;
    errno = 0;
    if (s->kind == ARG_STRING) {
        *(const char **)s->dest = value;
        return 0;
    }
    if (s->kind == ARG_INT) {
        long long v = strtoll(value, &end, 10);
        if (errno || end == value || *end || (double)v < s->lo || (double)v > s->hi) {
            fprintf(stderr, "kztts %s: %s expects an integer in [%.0f, %.0f], got '%s'\n", cmd,
                    s->name, s->lo, s->hi, value);
            return -1;
        }
        *(int64_t *)s->dest = v;
        return 0;
    }
    double v = strtod(value, &end);
    if (errno || end == value || *end || !isfinite(v) || v < s->lo || v > s->hi) {
        fprintf(stderr, "kztts %s: %s expects a number in [%g, %g], got '%s'\n", cmd, s->name,
                s->lo, s->hi, value);
        return -1;
    }
    *(double *)s->dest = v;
    return 0;
}

int args_parse(const char *cmd, const arg_spec *specs, int n_specs, int argc, char **argv,
               const char **positional, int max_positional, int *n_positional) {
    *n_positional = 0;
    bool options_done = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (options_done || a[0] != '-' || strcmp(a, "-") == 0) {
            if (*n_positional == max_positional) {
                fprintf(stderr, "kztts %s: unexpected argument '%s'\n", cmd, a);
                return -1;
            }
            positional[(*n_positional)++] = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            options_done = true;
            continue;
        }
        const arg_spec *s = find(specs, n_specs, a);
        if (!s) {
            fprintf(stderr, "kztts %s: unknown option '%s' (see 'kztts %s --help')\n", cmd, a,
                    cmd);
            return -1;
        }
        if (s->kind == ARG_FLAG) {
            *(bool *)s->dest = true;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "kztts %s: option %s needs a value\n", cmd, a);
            return -1;
        }
        if (set_value(cmd, s, argv[++i]) != 0) {
            return -1;
        }
    }
    return 0;
}

void args_usage(const char *cmd, const char *synopsis, const arg_spec *specs, int n_specs) {
    printf("usage: kztts %s %s\n\noptions:\n", cmd, synopsis);
    for (int i = 0; i < n_specs; i++) {
        char left[64];
        snprintf(left, sizeof left, "%s%s%s", specs[i].alias ? specs[i].alias : "",
                 specs[i].alias ? ", " : "", specs[i].name);
        printf("  %-24s %s\n", left, specs[i].help);
    }
}
