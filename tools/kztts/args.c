/*
 * args.c - option table parsing (see args.h).
 */
#include "args.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const arg_spec *find(const arg_spec *specs, int n, const char *name) {
    for (int i = 0; i < n; i++) {
        if (strcmp(specs[i].name, name) == 0 || (specs[i].alias && strcmp(specs[i].alias, name) == 0)) {
            return &specs[i];
        }
    }
    return NULL;
}

int args_choice_value(const arg_choice *choices, const char *name) {
    for (const arg_choice *c = choices; name && c->name; c++) {
        if (strcasecmp(c->name, name) == 0) {
            return c->value;
        }
    }
    return -1;
}

void args_choice_error(const char *cmd, const char *option, const arg_choice *choices,
                       const char *value) {
    char names[256];
    size_t w = 0;
    names[0] = '\0';
    for (const arg_choice *c = choices; c->name && w < sizeof names; c++) {
        w += (size_t)snprintf(names + w, sizeof names - w, "%s%s", c == choices ? "" : ", ",
                              c->name);
    }
    fprintf(stderr, "kztts %s: %s must be one of %s, got '%s'\n", cmd, option, names, value);
}

/* strtoll/strtod skip leading blanks and take a sign; a value must start with the number. */
static bool starts_like_number(const char *value) {
    return value[0] && !isspace((unsigned char)value[0]);
}

static int set_int(const char *cmd, const arg_spec *s, const char *value) {
    char *end = NULL;
    errno = 0;
    long long v = starts_like_number(value) ? strtoll(value, &end, 10) : 0;
    if (!end || errno || end == value || *end || (double)v < s->lo || (double)v > s->hi) {
        fprintf(stderr, "kztts %s: %s expects an integer in [%.0f, %.0f], got '%s'\n", cmd,
                s->name, s->lo, s->hi, value);
        return -1;
    }
    *(int64_t *)s->dest = v;
    return 0;
}

static int set_double(const char *cmd, const arg_spec *s, const char *value) {
    char *end = NULL;
    errno = 0;
    double v = starts_like_number(value) ? strtod(value, &end) : NAN;
    bool above = (s->flags & ARG_ABOVE_LO) != 0;
    if (!end || errno || end == value || *end || !isfinite(v) || v > s->hi ||
        (above ? v <= s->lo : v < s->lo)) {
        fprintf(stderr, "kztts %s: %s expects a number in %s%g, %g], got '%s'\n", cmd, s->name,
                above ? "(" : "[", s->lo, s->hi, value);
        return -1;
    }
    *(double *)s->dest = v;
    return 0;
}

/* One name, stored in the table's spelling; or a list of up to hi names, each checked. */
static int set_choice(const char *cmd, const arg_spec *s, const char *value) {
    const char **dest = s->dest;
    if (s->hi <= 1) {
        for (const arg_choice *c = s->choices; c->name; c++) {
            if (strcasecmp(c->name, value) == 0) {
                *dest = c->name;
                return 0;
            }
        }
        args_choice_error(cmd, s->name, s->choices, value);
        return -1;
    }
    int n = 0;
    for (const char *p = value; *p; p += *p == ',') {
        size_t len = strcspn(p, ",");
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)len, p);
        p += len;
        if (len == 0) {
            continue; // "a,,b" and "a," list a and b, and a: the user meant no empty name
        }
        if (len >= sizeof name || args_choice_value(s->choices, name) < 0) {
            args_choice_error(cmd, s->name, s->choices, len >= sizeof name ? value : name);
            return -1;
        }
        if (++n > (int)s->hi) {
            fprintf(stderr, "kztts %s: %s takes at most %.0f names, got '%s'\n", cmd, s->name,
                    s->hi, value);
            return -1;
        }
    }
    *dest = value;
    return 0;
}

static int set_value(const char *cmd, const arg_spec *s, const char *value) {
    if (s->kind != ARG_CHOICE && s->kind != ARG_STRING) {
        return s->kind == ARG_INT ? set_int(cmd, s, value) : set_double(cmd, s, value);
    }
    if (!value[0]) {
        fprintf(stderr, "kztts %s: %s needs a value, got an empty one\n", cmd, s->name);
        return -1;
    }
    if (s->kind == ARG_CHOICE) {
        return set_choice(cmd, s, value);
    }
    *(const char **)s->dest = value;
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
