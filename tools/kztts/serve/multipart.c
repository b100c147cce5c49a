/*
 * multipart.c - strict multipart/form-data parsing (see multipart.h).
 *
 * Content-Type value -> type check and parameters (token or quoted values) -> boundary
 * body -> the first "--boundary" (at the start, or after CRLF ending a preamble)
 *   -> per part: transport padding and CRLF after the boundary, header lines up to an
 *      empty line (Content-Disposition, Content-Type, Content-Transfer-Encoding parsed;
 *      other well-formed headers ignored), the content up to the next CRLF "--boundary"
 *   -> "--boundary--" ends the form; the epilogue after it is ignored.
 * A text cursor (span) carries the bytes still to read, so every read is bounded by it.
 * The search for the next boundary is linear: the delimiter starts with CR and the
 * boundary holds no CR, so a partial match never overlaps the next candidate.
 */
#include "multipart.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define MAX_BOUNDARY 70     /* RFC 2046 */
#define MAX_HEADER_LINE 2048 /* bytes of one part header line, CRLF excluded */
#define MAX_HEADERS 16       /* header lines of one part */

typedef struct span {
    const char *p;
    size_t n;
} span;

static int fail(char *err, size_t n_err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t n_err, const char *fmt, ...) {
    if (err && n_err) {
        int n = snprintf(err, n_err, "multipart body: ");
        va_list ap;
        va_start(ap, fmt);
        if (n >= 0 && (size_t)n < n_err) {
            vsnprintf(err + n, n_err - (size_t)n, fmt, ap);
        }
        va_end(ap);
    }
    return -1;
}

static char lower(char c) {
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

static bool is_tchar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Whether s starts with word, case-insensitively; consumes it if so. */
static bool take_word(span *s, const char *word) {
    size_t n = strlen(word);
    if (s->n < n) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (lower(s->p[i]) != word[i]) {
            return false;
        }
    }
    s->p += n;
    s->n -= n;
    return true;
}

/* Whether s is word, case-insensitively. */
static bool span_is(span s, const char *word) {
    return s.n == strlen(word) && take_word(&s, word);
}

static void skip_ows(span *s) {
    while (s->n > 0 && (*s->p == ' ' || *s->p == '\t')) {
        s->p++;
        s->n--;
    }
}

static span take_token(span *s) {
    span t = {s->p, 0};
    while (s->n > 0 && is_tchar(*s->p)) {
        s->p++;
        s->n--;
        t.n++;
    }
    return t;
}

/* A parameter value, token or quoted string (with backslash escapes), into out[cap]
 * NUL-terminated. -1: malformed, control character or NUL inside, or too long. */
static int take_value(span *s, char *out, size_t cap) {
    size_t o = 0;
    if (s->n > 0 && *s->p == '"') {
        s->p++;
        s->n--;
        for (;;) {
            if (s->n == 0) {
                return -1; // unterminated
            }
            char c = *s->p++;
            s->n--;
            if (c == '"') {
                break;
            }
            if (c == '\\') {
                if (s->n == 0) {
                    return -1;
                }
                c = *s->p++;
                s->n--;
            }
            if ((unsigned char)c < 0x20 || c == 0x7f) {
                return -1;
            }
            if (o + 1 >= cap) {
                return -1;
            }
            out[o++] = c;
        }
    } else {
        span t = take_token(s);
        if (t.n == 0 || t.n >= cap) {
            return -1;
        }
        memcpy(out, t.p, t.n);
        o = t.n;
    }
    out[o] = '\0';
    return 0;
}

/* One "; name=value" parameter: the lower-cased name into key[cap_key], the value into
 * value[cap_value]. 1 when one was read, 0 at the end of s, -1 malformed. */
static int take_param(span *s, char *key, size_t cap_key, char *value, size_t cap_value) {
    skip_ows(s);
    if (s->n == 0) {
        return 0;
    }
    if (*s->p != ';') {
        return -1;
    }
    s->p++;
    s->n--;
    skip_ows(s);
    span k = take_token(s);
    if (k.n == 0 || k.n >= cap_key || s->n == 0 || *s->p != '=') {
        return -1;
    }
    for (size_t i = 0; i < k.n; i++) {
        key[i] = lower(k.p[i]);
    }
    key[k.n] = '\0';
    s->p++;
    s->n--;
    return take_value(s, value, cap_value) == 0 ? 1 : -1;
}

/* RFC 2046 bchars: digits, letters, "'()+_,-./:=?" and space (not last). */
static bool boundary_ok(const char *b) {
    size_t n = strlen(b);
    if (n < 1 || n > MAX_BOUNDARY || b[n - 1] == ' ') {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = b[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("'()+_,-./:=? ", c) != NULL)) {
            return false;
        }
    }
    return true;
}

int multipart_is_form(const char *content_type) {
    if (!content_type) {
        return 0;
    }
    span s = {content_type, strlen(content_type)};
    skip_ows(&s);
    if (!take_word(&s, "multipart/form-data")) {
        return 0;
    }
    return s.n == 0 || *s.p == ';' || *s.p == ' ' || *s.p == '\t';
}

/* The boundary parameter of the Content-Type value ct into boundary[MAX_BOUNDARY + 1]. */
static int content_type_boundary(const char *ct, char *boundary, char *err, size_t n_err) {
    if (!multipart_is_form(ct)) {
        return fail(err, n_err, "the Content-Type is not multipart/form-data");
    }
    span s = {ct, strlen(ct)};
    skip_ows(&s);
    take_word(&s, "multipart/form-data");
    boundary[0] = '\0';
    bool seen = false;
    char key[32], value[MAX_BOUNDARY + 2];
    int rc;
    while ((rc = take_param(&s, key, sizeof key, value, sizeof value)) == 1) {
        if (strcmp(key, "boundary") != 0) {
            continue; // e.g. charset: nothing to do with the framing
        }
        if (seen) {
            return fail(err, n_err, "the Content-Type names two boundaries");
        }
        seen = true;
        memcpy(boundary, value, strlen(value) + 1);
    }
    if (rc < 0) {
        return fail(err, n_err, "malformed Content-Type parameters (or a boundary over %d "
                                "characters)", MAX_BOUNDARY);
    }
    if (!seen) {
        return fail(err, n_err, "the Content-Type has no boundary parameter");
    }
    if (!boundary_ok(boundary)) {
        return fail(err, n_err, "the boundary must be 1-%d of the characters RFC 2046 allows",
                    MAX_BOUNDARY);
    }
    return 0;
}

/* The offset of needle[0..n) in s, or s.n when absent. */
static size_t find(span s, const char *needle, size_t n) {
    if (s.n < n) {
        return s.n;
    }
    for (size_t i = 0; i + n <= s.n; i++) {
        const char *c = memchr(s.p + i, needle[0], s.n - n + 1 - i);
        if (!c) {
            return s.n;
        }
        i = (size_t)(c - s.p);
        if (memcmp(c, needle, n) == 0) {
            return i;
        }
    }
    return s.n;
}

static void advance(span *s, size_t n) {
    s->p += n;
    s->n -= n;
}

/* After a delimiter: "--" ends the form (*last), else transport padding and CRLF. */
static int after_delimiter(span *s, bool *last, int part, char *err, size_t n_err) {
    if (s->n >= 2 && s->p[0] == '-' && s->p[1] == '-') {
        advance(s, 2);
        *last = true;
        return 0; // the epilogue that may follow is ignored
    }
    skip_ows(s);
    if (s->n < 2 || s->p[0] != '\r' || s->p[1] != '\n') {
        return fail(err, n_err, "part %d: the boundary line does not end with CRLF", part);
    }
    advance(s, 2);
    *last = false;
    return 0;
}

/* Content-Disposition: form-data; name="..."[; filename="..."]. */
static int disposition(span v, multipart_part *p, int part, char *err, size_t n_err) {
    skip_ows(&v);
    if (!take_word(&v, "form-data") || (v.n > 0 && *v.p != ';' && *v.p != ' ' && *v.p != '\t')) {
        return fail(err, n_err, "part %d: Content-Disposition is not form-data", part);
    }
    bool has_name = false;
    char key[32], value[MULTIPART_MAX_FILENAME];
    int rc;
    while ((rc = take_param(&v, key, sizeof key, value, sizeof value)) == 1) {
        if (strcmp(key, "name") == 0) {
            if (has_name || value[0] == '\0' || strlen(value) >= sizeof p->name) {
                return fail(err, n_err, "part %d: the field name is %s", part,
                            has_name ? "given twice" : value[0] ? "too long" : "empty");
            }
            memcpy(p->name, value, strlen(value) + 1);
            has_name = true;
        } else if (strcmp(key, "filename") == 0) {
            if (p->has_filename) {
                return fail(err, n_err, "part %d: two filenames", part);
            }
            memcpy(p->filename, value, strlen(value) + 1);
            p->has_filename = 1;
        }
    }
    if (rc < 0) {
        return fail(err, n_err, "part %d: malformed Content-Disposition parameters (or a value "
                                "over %d bytes)", part, MULTIPART_MAX_FILENAME - 1);
    }
    if (!has_name) {
        return fail(err, n_err, "part %d: Content-Disposition has no name", part);
    }
    return 0;
}

/* A header value: OWS trimmed at both ends, no control characters. */
static int header_value(span line, span *v) {
    skip_ows(&line);
    while (line.n > 0 && (line.p[line.n - 1] == ' ' || line.p[line.n - 1] == '\t')) {
        line.n--;
    }
    for (size_t i = 0; i < line.n; i++) {
        unsigned char c = (unsigned char)line.p[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f) {
            return -1;
        }
    }
    *v = line;
    return 0;
}

/* One header line (without its CRLF) of part number `part`. */
static int header_line(span line, multipart_part *p, bool *has_disposition, int part, char *err,
                       size_t n_err) {
    span name = take_token(&line);
    if (name.n == 0 || line.n == 0 || *line.p != ':') {
        return fail(err, n_err, "part %d: malformed header line", part);
    }
    advance(&line, 1);
    span v;
    if (header_value(line, &v) != 0) {
        return fail(err, n_err, "part %d: control character in a header", part);
    }
    if (span_is(name, "content-disposition")) {
        if (*has_disposition) {
            return fail(err, n_err, "part %d: two Content-Disposition headers", part);
        }
        *has_disposition = true;
        return disposition(v, p, part, err, n_err);
    }
    if (span_is(name, "content-type")) {
        if (p->content_type[0] || v.n == 0 || v.n >= sizeof p->content_type) {
            return fail(err, n_err, "part %d: Content-Type %s", part,
                        p->content_type[0] ? "given twice" : v.n ? "too long" : "empty");
        }
        memcpy(p->content_type, v.p, v.n);
        p->content_type[v.n] = '\0';
        return 0;
    }
    if (span_is(name, "content-transfer-encoding")) {
        if (!(span_is(v, "binary") || span_is(v, "8bit") || span_is(v, "7bit"))) {
            return fail(err, n_err, "part %d: Content-Transfer-Encoding %.*s is not supported "
                                    "(send the bytes as they are)", part, (int)(v.n > 32 ? 32 : v.n),
                        v.p);
        }
    }
    return 0; // any other header is allowed and ignored (RFC 7578 section 4.8)
}

/* The header lines of a part, through the empty line that ends them. */
static int part_headers(span *s, multipart_part *p, int part, char *err, size_t n_err) {
    bool has_disposition = false;
    for (int n_lines = 0;; n_lines++) {
        size_t end = find(*s, "\r\n", 2);
        if (end == s->n) {
            return fail(err, n_err, "part %d: the headers do not end (truncated body?)", part);
        }
        span line = {s->p, end};
        advance(s, end + 2);
        if (end == 0) {
            break;
        }
        if (n_lines >= MAX_HEADERS || end > MAX_HEADER_LINE) {
            return fail(err, n_err, "part %d: over %d header lines or a line over %d bytes",
                        part, MAX_HEADERS, MAX_HEADER_LINE);
        }
        if (memchr(line.p, '\n', line.n) || memchr(line.p, '\r', line.n)) {
            return fail(err, n_err, "part %d: a header line ends without CRLF", part);
        }
        if (line.p[0] == ' ' || line.p[0] == '\t') {
            return fail(err, n_err, "part %d: folded header lines are not allowed", part);
        }
        if (header_line(line, p, &has_disposition, part, err, n_err) != 0) {
            return -1;
        }
    }
    if (!has_disposition) {
        return fail(err, n_err, "part %d: no Content-Disposition header", part);
    }
    return 0;
}

const multipart_part *multipart_find(const multipart_form *form, const char *name) {
    for (int i = 0; i < form->n_parts; i++) {
        if (strcmp(form->parts[i].name, name) == 0) {
            return &form->parts[i];
        }
    }
    return NULL;
}

/* The first delimiter: "--boundary" at the start, or after the preamble's CRLF. */
static int first_delimiter(span *s, const char *delim, size_t n_delim, char *err,
                           size_t n_err) {
    if (s->n >= n_delim - 2 && memcmp(s->p, delim + 2, n_delim - 2) == 0) {
        advance(s, n_delim - 2);
        return 0;
    }
    size_t at = find(*s, delim, n_delim);
    if (at == s->n) {
        return fail(err, n_err, "the boundary given in the Content-Type never occurs");
    }
    advance(s, at + n_delim);
    return 0;
}

/* The parts between the first delimiter and the closing one. */
static int parse_parts(span s, const char *delim, size_t n_delim, multipart_form *form,
                       char *err, size_t n_err) {
    bool last = false;
    if (after_delimiter(&s, &last, 1, err, n_err) != 0) {
        return -1;
    }
    if (last) {
        return fail(err, n_err, "the form has no parts");
    }
    while (!last) {
        if (form->n_parts == MULTIPART_MAX_PARTS) {
            return fail(err, n_err, "more than %d parts", MULTIPART_MAX_PARTS);
        }
        int part = form->n_parts + 1;
        multipart_part *p = &form->parts[form->n_parts];
        memset(p, 0, sizeof *p);
        if (part_headers(&s, p, part, err, n_err) != 0) {
            return -1;
        }
        size_t end = find(s, delim, n_delim);
        if (end == s.n) {
            return fail(err, n_err, "part %d: no closing boundary (truncated body?)", part);
        }
        if (multipart_find(form, p->name)) {
            return fail(err, n_err, "part %d: the field %s appears twice", part, p->name);
        }
        p->data = (const uint8_t *)s.p;
        p->n_bytes = end;
        form->n_parts++;
        advance(&s, end + n_delim);
        if (after_delimiter(&s, &last, part + 1, err, n_err) != 0) {
            return -1;
        }
    }
    return 0;
}

int multipart_parse(const char *content_type, const void *body, size_t n_bytes,
                    multipart_form *form, char *err, size_t n_err) {
    form->n_parts = 0;
    if (err && n_err) {
        err[0] = '\0';
    }
    char boundary[MAX_BOUNDARY + 2];
    if (content_type_boundary(content_type, boundary, err, n_err) != 0) {
        return -1;
    }
    char delim[MAX_BOUNDARY + 5]; // CRLF "--" boundary
    int n_delim = snprintf(delim, sizeof delim, "\r\n--%s", boundary);
    span s = {body, body ? n_bytes : 0};
    if (first_delimiter(&s, delim, (size_t)n_delim, err, n_err) != 0 ||
        parse_parts(s, delim, (size_t)n_delim, form, err, n_err) != 0) {
        form->n_parts = 0;
        return -1;
    }
    return 0;
}
