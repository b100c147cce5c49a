/*
 * codes_file.c - codec code files (see codes_file.h).
 *
 *   bytes -> lines (at most 4095 bytes each; a NUL byte is an error of its own,
 *   not a short line) -> tokens between blanks -> decimal integers, each checked
 *   against the codebook -> frames appended to a growing array.
 */
#include "codes_file.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LINE 4096
#define SEPARATORS " \t\r"

/* The reading in progress: where, and the first problem as one line. */
typedef struct reader {
    FILE *f;
    const char *name;
    size_t line_no;
    char *err;
    size_t err_cap;
} reader;

static int fail(reader *r, const char *problem, const char *detail) {
    if (r->line_no) {
        snprintf(r->err, r->err_cap, "%s:%zu: %s%s", r->name, r->line_no, problem, detail);
    } else {
        snprintf(r->err, r->err_cap, "%s: %s%s", r->name, problem, detail);
    }
    return -1;
}

/* A token of the file for a message: at most 24 bytes, anything but printable ASCII as
 * '?' (the message stays one line whatever the file holds). */
static const char *quoted(const char *p, size_t len, char out[32]) {
    size_t n = len < 24 ? len : 24;
    out[0] = '\'';
    for (size_t i = 0; i < n; i++) {
        out[1 + i] = p[i] > ' ' && p[i] < 127 ? p[i] : '?';
    }
    snprintf(out + 1 + n, 32 - 1 - n, "%s'", len > n ? "..." : "");
    return out;
}

/* The next line without its '\n' into buf (NUL-terminated): 1, 0 at the end of the
 * file, or -1 after recording a NUL byte, a line too long or a read error. */
static int read_line(reader *r, char *buf, size_t cap) {
    size_t n = 0;
    int c;
    while ((c = getc(r->f)) != EOF && c != '\n' && c != 0 && n + 1 < cap) {
        buf[n++] = (char)c;
    }
    char where[48];
    if (c == 0) {
        snprintf(where, sizeof where, " at column %zu", n + 1);
        return fail(r, "NUL byte", where);
    }
    if (c != EOF && c != '\n') {
        snprintf(where, sizeof where, " (more than %zu bytes)", cap - 1);
        return fail(r, "line too long", where);
    }
    buf[n] = '\0';
    if (ferror(r->f)) {
        r->line_no = 0;
        return fail(r, "read error: ", strerror(errno));
    }
    return c == EOF && n == 0 ? 0 : 1;
}

/* Parses one line into row[n]; returns 0 or -1 after recording the problem. */
static int parse_line(reader *r, const char *line, int n, int size, int32_t *row) {
    int count = 0;
    const char *p = line;
    for (;;) {
        p += strspn(p, SEPARATORS);
        if (!*p) {
            break;
        }
        const size_t len = strcspn(p, SEPARATORS);
        char *end, tok[32], detail[96];
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end != p + len || (errno && errno != ERANGE)) {
            return fail(r, quoted(p, len, tok), " is not an integer");
        }
        if (count < n && (errno == ERANGE || v < 0 || v >= size)) {
            snprintf(detail, sizeof detail, " is outside [0, %d]", size - 1);
            return fail(r, quoted(p, len, tok), detail);
        }
        if (count < n) {
            row[count] = (int32_t)v;
        }
        count++;
        p += len;
    }
    if (count != n) {
        char detail[64];
        snprintf(detail, sizeof detail, "expected %d codes per line, got %d", n, count);
        return fail(r, detail, "");
    }
    return 0;
}

static int grow(int32_t **codes, size_t *cap, size_t need) {
    if (need <= *cap) {
        return 0;
    }
    size_t cap2 = *cap ? *cap * 2 : 1024;
    while (cap2 < need) {
        cap2 *= 2;
    }
    int32_t *p = realloc(*codes, cap2 * sizeof *p);
    if (!p) {
        return -1;
    }
    *codes = p;
    *cap = cap2;
    return 0;
}

int codes_file_parse(FILE *f, const char *name, int n_codebooks, int codebook_size,
                     int32_t **codes, size_t *n_frames, char *err, size_t err_cap) {
    *codes = NULL;
    *n_frames = 0;
    reader r = {.f = f, .name = name, .err = err, .err_cap = err_cap};
    char line[MAX_LINE];
    size_t cap = 0;
    int rc = 0, got;
    while (rc == 0 && (r.line_no++, got = read_line(&r, line, sizeof line)) != 0) {
        if (got < 0) {
            rc = -1;
        } else if (grow(codes, &cap, (*n_frames + 1) * (size_t)n_codebooks) != 0) {
            r.line_no = 0;
            rc = fail(&r, "out of memory", "");
        } else {
            rc = parse_line(&r, line, n_codebooks, codebook_size,
                            *codes + *n_frames * (size_t)n_codebooks);
            *n_frames += rc == 0;
        }
    }
    if (rc == 0 && *n_frames == 0) {
        r.line_no = 0;
        rc = fail(&r, "no frames (empty codes file)", "");
    }
    if (rc != 0) {
        free(*codes);
        *codes = NULL;
        *n_frames = 0;
    }
    return rc;
}

int codes_file_read(const char *path, int n_codebooks, int codebook_size, int32_t **codes,
                    size_t *n_frames) {
    *codes = NULL;
    *n_frames = 0;
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!f) {
        fprintf(stderr, "kztts: %s: %s\n", path, strerror(errno));
        return -1;
    }
    char err[512];
    int rc = codes_file_parse(f, path, n_codebooks, codebook_size, codes, n_frames, err,
                              sizeof err);
    if (rc != 0) {
        fprintf(stderr, "kztts: %s\n", err);
    }
    if (f != stdin) {
        fclose(f);
    }
    return rc;
}

char *codes_file_text(const int32_t *codes, size_t n_frames, int n_codebooks, size_t *n_bytes) {
    // Each code takes at most 11 characters ("-2147483648") and a separator.
    const size_t per_frame = (size_t)(n_codebooks > 0 ? n_codebooks : 0) * 12 + 1;
    *n_bytes = 0;
    if (n_frames > (SIZE_MAX - 1) / per_frame) {
        return NULL;
    }
    char *text = malloc(n_frames * per_frame + 1);
    size_t n = 0;
    for (size_t t = 0; text && t < n_frames; t++) {
        for (int q = 0; q < n_codebooks; q++) {
            n += (size_t)sprintf(text + n, q ? " %d" : "%d",
                                 (int)codes[t * (size_t)n_codebooks + (size_t)q]);
        }
        text[n++] = '\n';
    }
    if (text) {
        text[n] = '\0';
        *n_bytes = n;
    }
    return text;
}

int32_t *codes_random(size_t n_frames, int n_codebooks, int codebook_size, uint64_t seed) {
    int32_t *codes = malloc(n_frames * (size_t)n_codebooks * sizeof *codes);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; codes && i < n_frames * (size_t)n_codebooks; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        codes[i] = (int32_t)(x % (uint64_t)codebook_size);
    }
    return codes;
}
