/*
 * multipart.h - a strict multipart/form-data parser (RFC 7578 over RFC 2046) for the
 * request bodies of `kztts serve` (POST /v1/audio/voices), which the HTTP layer has
 * already read whole.
 *
 * Content-Type header value -> its boundary (token or quoted string, 1-70 characters)
 *   -> the body split at CRLF "--" boundary lines: preamble skipped, each part's header
 *   lines (CRLF only, no folding) parsed, its content kept as a pointer into the body
 *   -> the closing "--" boundary "--"; anything after it (the epilogue) is ignored.
 * Each part needs Content-Disposition: form-data with a name; filename and Content-Type
 * are optional; a Content-Transfer-Encoding other than 7bit, 8bit or binary is refused.
 * Nothing is allocated and nothing outside body[0..n_bytes) is read; every count and
 * length is capped below, so a hostile body costs at most one pass over its bytes.
 */
#ifndef KZ_MULTIPART_H
#define KZ_MULTIPART_H

#include <stddef.h>
#include <stdint.h>

#define MULTIPART_MAX_PARTS 16
#define MULTIPART_MAX_NAME 128         /* bytes of a field name, NUL included */
#define MULTIPART_MAX_FILENAME 256     /* bytes of a filename, NUL included */
#define MULTIPART_MAX_CONTENT_TYPE 128 /* bytes of a part's Content-Type, NUL included */

typedef struct multipart_part {
    char name[MULTIPART_MAX_NAME];                 /* the form field, never empty */
    char filename[MULTIPART_MAX_FILENAME];         /* "" when the part is no file */
    char content_type[MULTIPART_MAX_CONTENT_TYPE]; /* "" when the part has none */
    int has_filename;                              /* a filename parameter was present */
    const uint8_t *data;                           /* the content: points into the body */
    size_t n_bytes;
} multipart_part;

typedef struct multipart_form {
    multipart_part parts[MULTIPART_MAX_PARTS];
    int n_parts;
} multipart_form;

/* Whether content_type (a Content-Type header value, NULL allowed) names
 * multipart/form-data (case-insensitive). */
int multipart_is_form(const char *content_type);

/* Parses body[0..n_bytes) sent with the Content-Type header value content_type into
 * *form. 0, or -1 with one line (no newline) in err. Field names are unique: a second
 * part with the same name is an error. */
int multipart_parse(const char *content_type, const void *body, size_t n_bytes,
                    multipart_form *form, char *err, size_t n_err);

/* The part called name, or NULL. */
const multipart_part *multipart_find(const multipart_form *form, const char *name);

#endif
