/*
 * codes_file.c - codec code files (see codes_file.h).
 */
#include "codes_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LINE 4096

/* Parses one line into row[n]; returns 0 or prints and returns -1. */
static int parse_line(const char *path, size_t line_no, char *line, int n, int size,
                      int32_t *row) {
    int count = 0;
    char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') {
            p++;
        }
        if (!*p) {
            break;
        }
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || (*end && !strchr(" \t\r\n", *end))) {
            fprintf(stderr, "kztts: %s:%zu: '%.*s' is not an integer\n", path, line_no,
                    (int)strcspn(p, " \t\r\n"), p);
            return -1;
        }
        if (count < n) {
            if (v < 0 || v >= size) {
                fprintf(stderr, "kztts: %s:%zu: code %ld is outside [0, %d]\n", path, line_no, v,
                        size - 1);
                return -1;
            }
            row[count] = (int32_t)v;
        }
        count++;
        p = end;
    }
    if (count != n) {
        fprintf(stderr, "kztts: %s:%zu: expected %d codes per line, got %d\n", path, line_no, n,
                count);
        return -1;
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

int codes_file_read(const char *path, int n_codebooks, int codebook_size, int32_t **codes,
                    size_t *n_frames) {
    *codes = NULL;
    *n_frames = 0;
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!f) {
        fprintf(stderr, "kztts: %s: %s\n", path, strerror(errno));
        return -1;
    }
    char line[MAX_LINE];
    size_t line_no = 0, cap = 0;
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        line_no++;
        if (!strchr(line, '\n') && !feof(f)) {
            fprintf(stderr, "kztts: %s:%zu: line too long\n", path, line_no);
            rc = -1;
        } else if (grow(codes, &cap, (*n_frames + 1) * (size_t)n_codebooks) != 0) {
            fprintf(stderr, "kztts: %s: out of memory\n", path);
            rc = -1;
        } else {
            rc = parse_line(path, line_no, line, n_codebooks, codebook_size,
                            *codes + *n_frames * (size_t)n_codebooks);
            *n_frames += rc == 0;
        }
    }
    if (rc == 0 && ferror(f)) {
        fprintf(stderr, "kztts: %s: read error\n", path);
        rc = -1;
    }
    if (rc == 0 && *n_frames == 0) {
        fprintf(stderr, "kztts: %s: no frames (empty codes file)\n", path);
        rc = -1;
    }
    if (f != stdin) {
        fclose(f);
    }
    if (rc != 0) {
        free(*codes);
        *codes = NULL;
        *n_frames = 0;
    }
    return rc;
}

int codes_file_write(const char *path, const int32_t *codes, size_t n_frames, int n_codebooks) {
    FILE *f = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
    if (!f) {
        fprintf(stderr, "kztts: %s: %s\n", path, strerror(errno));
        return -1;
    }
    for (size_t t = 0; t < n_frames; t++) {
        for (int q = 0; q < n_codebooks; q++) {
            fprintf(f, q ? " %d" : "%d", codes[t * (size_t)n_codebooks + (size_t)q]);
        }
        fputc('\n', f);
    }
    int rc = ferror(f) ? -1 : 0;
    if (f != stdout && fclose(f) != 0) {
        rc = -1;
    }
    return rc;
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
