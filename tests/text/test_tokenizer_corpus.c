/*
 * test_tokenizer_corpus.c - corpus parity of the C tokenizer with a peer.
 *
 *   test_tokenizer_corpus TOKENIZER_DIR CORPUS REFERENCE_IDS [qwen2|mistral]
 *
 *   CORPUS line i --decode escapes (\n \r \t \\ \u{HEX}, as in
 *   tools/tokenizer/common.mjs)--> text --kz_tokenizer_encode--> ids
 *   REFERENCE_IDS line i (written by tools/tokenizer/encode.mjs) --> expected
 *   ids; every line must match exactly.
 *
 * On a mismatch it prints the line number, the text, both id lists and the
 * tokens they spell (first few mismatches in full), and always closes with
 * "N passed, N failed" counted in lines.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "test.h"
#include "text/tokenizer.h"

#define MAX_DETAILED 3

/* Reads a whole file; NULL on failure. */
static char *read_all(const char *path, size_t *n_bytes) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) {
            break;
        }
        cap *= 2;
        char *grown = realloc(buf, cap + 1);
        if (!grown) {
            free(buf);
            buf = NULL;
        }
        buf = grown;
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        *n_bytes = n;
    }
    return buf;
}

static size_t put_utf8(char *out, uint32_t cp) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes the corpus escapes of line[0..n) into out (capacity >= n); returns the length. */
static size_t decode_line(const char *line, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (line[i] != '\\' || i + 1 >= n) {
            out[o++] = line[i];
            continue;
        }
        char e = line[i + 1];
        if (e == 'n' || e == 'r' || e == 't' || e == '\\') {
            out[o++] = e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : '\\';
            i++;
        } else if (e == 'u' && i + 2 < n && line[i + 2] == '{') {
            char *end;
            unsigned long cp = strtoul(line + i + 3, &end, 16);
            if (end < line + n && *end == '}' && end > line + i + 3) {
                o += put_utf8(out + o, (uint32_t)cp);
                i = (size_t)(end - line);
            } else {
                out[o++] = line[i];
            }
        } else {
            out[o++] = line[i];
        }
    }
    return o;
}

static void print_ids(const char *label, const kz_tokenizer *t, const int32_t *ids, size_t n) {
    fprintf(stderr, "  %s (%zu):", label, n);
    for (size_t i = 0; i < n; i++) {
        fprintf(stderr, " %d", (int)ids[i]);
    }
    fprintf(stderr, "\n  %s tokens:", label);
    for (size_t i = 0; i < n; i++) {
        size_t n_bytes;
        const char *tok = kz_tokenizer_token(t, ids[i], &n_bytes);
        fprintf(stderr, " [%.*s]", (int)n_bytes, tok ? tok : "?");
    }
    fputc('\n', stderr);
}

/* Parses one line of space-separated ids. Returns the count (ids has room for n_line). */
static size_t parse_ids(const char *line, size_t n_line, int32_t *ids) {
    size_t n = 0;
    const char *p = line, *end = line + n_line;
    while (p < end) {
        char *next;
        long v = strtol(p, &next, 10);
        if (next == p) {
            break;
        }
        ids[n++] = (int32_t)v;
        p = next;
    }
    return n;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s TOKENIZER_DIR CORPUS REFERENCE_IDS [qwen2|mistral]\n", argv[0]);
        return 2;
    }
    kz_split_mode mode =
        argc > 4 && strcmp(argv[4], "mistral") == 0 ? KZ_SPLIT_MISTRAL : KZ_SPLIT_QWEN2;
    kz_tokenizer *t;
    kz_status st = kz_tokenizer_load(argv[1], &t);
    if (st != KZ_OK) {
        fprintf(stderr, "cannot load tokenizer: %s\n", kz_error_get());
        return 1;
    }
    size_t n_corpus, n_ref;
    char *corpus = read_all(argv[2], &n_corpus), *ref = read_all(argv[3], &n_ref);
    if (!corpus || !ref) {
        fprintf(stderr, "cannot read %s\n", corpus ? argv[3] : argv[2]);
        return 1;
    }
    char *text = malloc(n_corpus + 1);
    int32_t *want = malloc((n_ref + 1) * sizeof *want);
    size_t line_no = 0, n_shown = 0;
    char *c = corpus, *r = ref;
    while (c < corpus + n_corpus) {
        char *c_end = strchr(c, '\n'), *r_end = r < ref + n_ref ? strchr(r, '\n') : NULL;
        if (!c_end) {
            c_end = corpus + n_corpus;
        }
        line_no++;
        if (!r_end) {
            test_failed_count++;
            fprintf(stderr, "line %zu: no reference ids (reference file too short)\n", line_no);
            break;
        }
        size_t n_text = decode_line(c, (size_t)(c_end - c), text);
        size_t n_want = parse_ids(r, (size_t)(r_end - r), want);
        int32_t *got;
        size_t n_got;
        st = kz_tokenizer_encode(t, text, n_text, mode, &got, &n_got);
        bool same = st == KZ_OK && n_got == n_want && memcmp(got, want, n_got * sizeof *got) == 0;
        if (same) {
            test_passed_count++;
        } else {
            test_failed_count++;
            if (n_shown++ < MAX_DETAILED) {
                fprintf(stderr, "line %zu mismatch: %.*s\n", line_no, (int)(c_end - c), c);
                if (st != KZ_OK) {
                    fprintf(stderr, "  encode failed: %s\n", kz_error_get());
                }
                print_ids("want", t, want, n_want);
                print_ids("got ", t, got, n_got);
            } else {
                fprintf(stderr, "line %zu mismatch\n", line_no);
            }
        }
        free(got);
        c = c_end + 1;
        r = r_end + 1;
    }
    free(text);
    free(want);
    free(corpus);
    free(ref);
    kz_tokenizer_free(t);
    printf("%s (%s, %zu lines)\n", argv[2], mode == KZ_SPLIT_MISTRAL ? "mistral" : "qwen2",
           line_no);
    return test_main_result("tokenizer_corpus");
}
