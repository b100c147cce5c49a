/*
 * fuzz_multipart.c - libFuzzer target for the multipart/form-data parser
 * (tools/kztts/serve/multipart.c).
 *
 * Dataflow: input bytes -> an exact-size copy (ASan sees any read past the body)
 *   -> parsed twice: as a body sent with the fixed Content-Type
 *      "multipart/form-data; boundary=XyZ", and, when the input holds a newline in its
 *      first 256 bytes, as "<Content-Type line>\n<body>"
 *   -> on failure: no parts, one line of message starting "multipart body: "
 *   -> on success: 1..MULTIPART_MAX_PARTS parts, names non-empty and unique, every
 *      content inside the body and free of the delimiter; the parts written back as a
 *      form with the same boundary and parsed again: the same fields and bytes.
 *
 * Seeds: tests/fuzz/corpus/multipart/; dictionary: tests/fuzz/multipart.dict.
 * Any crash, sanitizer report or abort() below is a bug in the parser.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "multipart.h"

static const char FIXED_CT[] = "multipart/form-data; boundary=XyZ";

/* Whether needle[0..n) occurs in hay[0..n_hay). */
static int contains(const uint8_t *hay, size_t n_hay, const char *needle, size_t n) {
    for (size_t i = 0; n <= n_hay && i + n <= n_hay; i++) {
        if (memcmp(hay + i, needle, n) == 0) {
            return 1;
        }
    }
    return 0;
}

/* The parts written back as a form with a boundary of our own and parsed again: the
 * same parts (skipped when a content holds that boundary or a name needs escaping). */
static void round_trip(const multipart_form *form) {
    static const char B[] = "fuzz-round-trip-boundary-7f3a";
    size_t cap = 64;
    for (int i = 0; i < form->n_parts; i++) {
        cap += form->parts[i].n_bytes + 600;
    }
    char *body = malloc(cap);
    size_t n = 0;
    for (int i = 0; i < form->n_parts; i++) {
        const multipart_part *p = &form->parts[i];
        if (contains(p->data, p->n_bytes, B, sizeof B - 1) || strpbrk(p->name, "\"\\") ||
            strpbrk(p->filename, "\"\\")) {
            free(body); // a name that needs escaping or a content holding the boundary
            return;
        }
        n += (size_t)snprintf(body + n, cap - n,
                              "--%s\r\nContent-Disposition: form-data; name=\"%s\"", B, p->name);
        if (p->has_filename) {
            n += (size_t)snprintf(body + n, cap - n, "; filename=\"%s\"", p->filename);
        }
        if (p->content_type[0]) {
            n += (size_t)snprintf(body + n, cap - n, "\r\nContent-Type: %s", p->content_type);
        }
        n += (size_t)snprintf(body + n, cap - n, "\r\n\r\n");
        memcpy(body + n, p->data, p->n_bytes);
        n += p->n_bytes;
        n += (size_t)snprintf(body + n, cap - n, "\r\n");
    }
    n += (size_t)snprintf(body + n, cap - n, "--%s--", B);
    multipart_form *again = malloc(sizeof *again);
    char err[256];
    char ct[96];
    snprintf(ct, sizeof ct, "multipart/form-data; boundary=%s", B);
    if (multipart_parse(ct, body, n, again, err, sizeof err) != 0 ||
        again->n_parts != form->n_parts) {
        abort();
    }
    for (int i = 0; i < form->n_parts; i++) {
        const multipart_part *a = &form->parts[i], *b = &again->parts[i];
        if (strcmp(a->name, b->name) != 0 || strcmp(a->filename, b->filename) != 0 ||
            a->has_filename != b->has_filename || strcmp(a->content_type, b->content_type) != 0 ||
            a->n_bytes != b->n_bytes || memcmp(a->data, b->data, a->n_bytes) != 0) {
            abort();
        }
    }
    free(again);
    free(body);
}

/* What a parse promises, success or failure. */
static void check(const char *ct, const uint8_t *body, size_t n) {
    multipart_form *form = malloc(sizeof *form);
    char err[256];
    err[0] = '\0';
    int rc = multipart_parse(ct, body, n, form, err, sizeof err);
    if (rc != 0) {
        if (form->n_parts != 0 || strncmp(err, "multipart body: ", 16) != 0 ||
            strpbrk(err, "\r\n")) {
            abort();
        }
        free(form);
        return;
    }
    if (form->n_parts < 1 || form->n_parts > MULTIPART_MAX_PARTS) {
        abort();
    }
    for (int i = 0; i < form->n_parts; i++) {
        const multipart_part *p = &form->parts[i];
        if (!p->name[0] || multipart_find(form, p->name) != p ||
            (n > 0 && (p->data < body || p->n_bytes > n || p->data + p->n_bytes > body + n))) {
            abort();
        }
        if (!p->has_filename && p->filename[0]) {
            abort();
        }
    }
    round_trip(form);
    free(form);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *body = malloc(size ? size : 1);
    memcpy(body, data, size);
    check(FIXED_CT, body, size);
    const uint8_t *nl = memchr(body, '\n', size < 256 ? size : 256);
    if (nl) {
        size_t n_ct = (size_t)(nl - body);
        char *ct = malloc(n_ct + 1);
        memcpy(ct, body, n_ct);
        ct[n_ct] = '\0';
        size_t rest = size - n_ct - 1;
        uint8_t *tail = malloc(rest ? rest : 1);
        memcpy(tail, nl + 1, rest);
        check(ct, tail, rest);
        free(tail);
        free(ct);
    }
    free(body);
    return 0;
}
