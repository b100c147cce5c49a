/*
 * test_multipart.c - tools/kztts/serve/multipart.c, the parser of voice uploads.
 *
 * Dataflow: forms written here (as curl, browsers and Python's requests write them) ->
 *   multipart_parse from an exact-size copy of the body (ASan sees any overread) ->
 *   fields, filenames, content types and content bytes checked; then every malformation
 *   of the Content-Type and of the body -> -1 with a one-line message naming it and no
 *   parts; every proper prefix of a good body -> refused (a truncated upload never
 *   parses).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "multipart.h"
#include "test.h"

#define CT "multipart/form-data; boundary=XyZ"

/* Parses body (n bytes) from an exact-size copy; the copy is kept for the parts' data. */
static int parse(const char *ct, const char *body, size_t n, multipart_form *form, char *err,
                 char **copy) {
    *copy = malloc(n ? n : 1);
    memcpy(*copy, body, n);
    return multipart_parse(ct, *copy, n, form, err, 256);
}

static bool part_is(const multipart_part *p, const char *data, size_t n) {
    return p && p->n_bytes == n && memcmp(p->data, data, n) == 0;
}

static void test_simple(void) {
    static const char BODY[] = "--XyZ\r\n"
                               "Content-Disposition: form-data; name=\"name\"\r\n"
                               "\r\n"
                               "alice\r\n"
                               "--XyZ\r\n"
                               "Content-Disposition: form-data; name=\"audio_sample\"; "
                               "filename=\"ref.wav\"\r\n"
                               "Content-Type: audio/wav\r\n"
                               "\r\n"
                               "RIFF\0\r\n--Xy\r\n-\r\n\r\n"
                               "\r\n--XyZ--\r\n";
    multipart_form form;
    char err[256], *copy;
    CHECK(parse(CT, BODY, sizeof BODY - 1, &form, err, &copy) == 0);
    CHECK_EQ_INT(form.n_parts, 2);
    const multipart_part *name = multipart_find(&form, "name");
    const multipart_part *audio = multipart_find(&form, "audio_sample");
    CHECK(part_is(name, "alice", 5) && !name->has_filename && name->content_type[0] == '\0');
    // The content keeps CR, LF, NUL and a partial boundary; only CRLF "--XyZ" ends it.
    CHECK(part_is(audio, "RIFF\0\r\n--Xy\r\n-\r\n\r\n", 18));
    CHECK(audio && audio->has_filename && strcmp(audio->filename, "ref.wav") == 0);
    CHECK(audio && strcmp(audio->content_type, "audio/wav") == 0);
    CHECK(audio && audio->data >= (const uint8_t *)copy &&
          audio->data + audio->n_bytes <= (const uint8_t *)copy + sizeof BODY - 1);
    CHECK(multipart_find(&form, "consent") == NULL);
    free(copy);
}

/* The variants real clients and RFC 2046 allow. */
static void test_variants(void) {
    multipart_form form;
    char err[256], *copy;
    // A quoted boundary with characters a token cannot hold, a charset parameter, upper
    // case type and parameter names, a preamble, transport padding, an epilogue.
    static const char B1[] = "this is the preamble\r\n"
                             "--a'()+_,-./:=? b \t\r\n"
                             "content-disposition: FORM-DATA; NAME=consent\r\n"
                             "X-Other: ignored\r\n"
                             "Content-Transfer-Encoding: binary\r\n"
                             "\r\n"
                             "yes\r\n"
                             "--a'()+_,-./:=? b--\r\nthe epilogue";
    const char *ct1 = "Multipart/Form-Data ; charset=utf-8; Boundary=\"a'()+_,-./:=? b\"";
    CHECK_MSG(parse(ct1, B1, sizeof B1 - 1, &form, err, &copy) == 0, "%s", err);
    CHECK(form.n_parts == 1 && part_is(multipart_find(&form, "consent"), "yes", 3));
    free(copy);
    // Empty content, an empty filename, backslash escapes, UTF-8 in a filename, no
    // CRLF after the closing delimiter.
    static const char B2[] = "--XyZ\r\n"
                             "Content-Disposition: form-data; name=\"a\\\"b\"; filename=\"\"\r\n"
                             "\r\n"
                             "\r\n"
                             "--XyZ\r\n"
                             "Content-Disposition: form-data; name=f; filename=\"caf\xc3\xa9.ogg\"\r\n"
                             "\r\n"
                             "x\r\n"
                             "--XyZ--";
    CHECK_MSG(parse(CT, B2, sizeof B2 - 1, &form, err, &copy) == 0, "%s", err);
    const multipart_part *p = multipart_find(&form, "a\"b");
    CHECK(form.n_parts == 2 && part_is(p, "", 0) && p->has_filename && p->filename[0] == '\0');
    p = multipart_find(&form, "f");
    CHECK(part_is(p, "x", 1) && strcmp(p->filename, "caf\xc3\xa9.ogg") == 0);
    free(copy);
    CHECK(multipart_is_form("multipart/form-data;boundary=x"));
    CHECK(multipart_is_form("  MULTIPART/FORM-DATA"));
    CHECK(!multipart_is_form(NULL) && !multipart_is_form("application/json"));
    CHECK(!multipart_is_form("multipart/form-datax; boundary=x"));
    CHECK(!multipart_is_form("multipart/mixed; boundary=x"));
}

/* body (n bytes) sent with ct is refused with a message containing expect. */
static void refused(const char *ct, const char *body, size_t n, const char *expect) {
    multipart_form form;
    char err[256], *copy;
    form.n_parts = 5;
    int rc = parse(ct, body, n, &form, err, &copy);
    CHECK_MSG(rc == -1 && form.n_parts == 0, "accepted (expected: %s)", expect);
    const char *message = err;
    CHECK_STR_CONTAINS(message, expect);
    CHECK(strncmp(err, "multipart body: ", 16) == 0 && !strpbrk(err, "\r\n"));
    free(copy);
}

#define REFUSED(ct, body, expect) refused(ct, body, sizeof body - 1, expect)

#define CD "Content-Disposition: form-data; name="

static void test_bad_content_type(void) {
    static const char OK[] = "--XyZ\r\n" CD "a\r\n\r\nx\r\n--XyZ--\r\n";
    REFUSED("application/json", OK, "not multipart/form-data");
    REFUSED("multipart/form-data", OK, "no boundary");
    REFUSED("multipart/form-data; charset=utf-8", OK, "no boundary");
    REFUSED("multipart/form-data; boundary=", OK, "malformed Content-Type");
    REFUSED("multipart/form-data; boundary=\"\"", OK, "boundary must be");
    REFUSED("multipart/form-data; boundary=XyZ; boundary=XyZ", OK, "two boundaries");
    REFUSED("multipart/form-data; boundary=\"XyZ", OK, "malformed Content-Type");
    REFUSED("multipart/form-data; boundary XyZ", OK, "malformed Content-Type");
    REFUSED("multipart/form-data boundary=XyZ", OK, "malformed Content-Type");
    REFUSED("multipart/form-data; boundary=XyZ junk", OK, "malformed Content-Type");
    REFUSED("multipart/form-data; boundary=\"a\x01\"", OK, "malformed Content-Type");
    REFUSED("multipart/form-data; boundary=\"ab \"", OK, "boundary must be");
    REFUSED("multipart/form-data; boundary=\"a*b\"", OK, "boundary must be");
    char ct[160];
    snprintf(ct, sizeof ct, "multipart/form-data; boundary=%071d", 7); // 71 characters
    REFUSED(ct, OK, "must be 1-70");
    snprintf(ct, sizeof ct, "multipart/form-data; boundary=%070d", 7); // 70 are fine
    char body[256];
    int n = snprintf(body, sizeof body, "--%070d\r\n" CD "a\r\n\r\nx\r\n--%070d--", 7, 7);
    multipart_form form;
    char err[256], *copy;
    CHECK_MSG(parse(ct, body, (size_t)n, &form, err, &copy) == 0, "%s", err);
    free(copy);
}

static void test_bad_framing(void) {
    REFUSED(CT, "", "never occurs");
    REFUSED(CT, "--XyY\r\n" CD "a\r\n\r\nx\r\n--XyY--", "never occurs");
    // Not at the start nor after CRLF: the first delimiter is the closing one.
    REFUSED(CT, "preamble--XyZ\r\n" CD "a\r\n\r\nx\r\n--XyZ--", "no parts");
    REFUSED(CT, "--XyZ--\r\n", "no parts");
    REFUSED(CT, "--XyZ", "does not end with CRLF");
    REFUSED(CT, "--XyZ\n" CD "a\n\nx\n--XyZ--", "does not end with CRLF");
    REFUSED(CT, "--XyZjunk\r\n" CD "a\r\n\r\nx\r\n--XyZ--", "does not end with CRLF");
    REFUSED(CT, "--XyZ\r\n" CD "a\r\n\r\nx\r\n--XyZ-", "part 2: the boundary line");
    REFUSED(CT, "--XyZ\r\n" CD "a\r\n\r\nx\r\n--XyZ+\r\n", "part 2: the boundary line");
    REFUSED(CT, "--XyZ\r\n" CD "a\r\n\r\nx\r\n--XyZ\r\n", "part 2: the headers do not end");
    REFUSED(CT, "--XyZ\r\n" CD "a\r\n\r\nx\r\n", "no closing boundary");
    REFUSED(CT, "--XyZ\r\n" CD "a\r\n\r\nx\n--XyZ--", "no closing boundary");
    REFUSED(CT, "--XyZ\r\n" CD "a\r\n", "the headers do not end");
    REFUSED(CT, "--XyZ\r\n" CD "a\n\r\nx\r\n--XyZ--", "ends without CRLF");
    REFUSED(CT, "--XyZ\r\n" CD "a\r\r\n\r\nx\r\n--XyZ--", "ends without CRLF");
    REFUSED(CT, "--XyZ\r\n" CD "a\r\n b\r\n\r\nx\r\n--XyZ--", "folded");
}

static void test_bad_headers(void) {
    REFUSED(CT, "--XyZ\r\nContent-Type: text/plain\r\n\r\nx\r\n--XyZ--", "no Content-Disposition");
    REFUSED(CT, "--XyZ\r\n\r\nx\r\n--XyZ--", "no Content-Disposition");
    REFUSED(CT, "--XyZ\r\nContent-Disposition: attachment; name=a\r\n\r\nx\r\n--XyZ--",
            "not form-data");
    REFUSED(CT, "--XyZ\r\nContent-Disposition: form-datax; name=a\r\n\r\nx\r\n--XyZ--",
            "not form-data");
    REFUSED(CT, "--XyZ\r\nContent-Disposition: form-data\r\n\r\nx\r\n--XyZ--", "has no name");
    REFUSED(CT, "--XyZ\r\nContent-Disposition: form-data; filename=a\r\n\r\nx\r\n--XyZ--",
            "has no name");
    REFUSED(CT, "--XyZ\r\n" CD "\"\"\r\n\r\nx\r\n--XyZ--", "empty");
    REFUSED(CT, "--XyZ\r\n" CD "a; name=b\r\n\r\nx\r\n--XyZ--", "given twice");
    REFUSED(CT, "--XyZ\r\n" CD "a; filename=x; filename=y\r\n\r\nx\r\n--XyZ--", "two filenames");
    REFUSED(CT, "--XyZ\r\n" CD "\"a\r\n\r\nx\r\n--XyZ--", "malformed Content-Disposition");
    REFUSED(CT, "--XyZ\r\n" CD "a;\r\n\r\nx\r\n--XyZ--", "malformed Content-Disposition");
    REFUSED(CT, "--XyZ\r\n" CD "a b\r\n\r\nx\r\n--XyZ--", "malformed Content-Disposition");
    REFUSED(CT, "--XyZ\r\n" CD "\"a\\\"\r\n\r\nx\r\n--XyZ--", "malformed Content-Disposition");
    REFUSED(CT, "--XyZ\r\n" CD "a\r\n" CD "b\r\n\r\nx\r\n--XyZ--", "two Content-Disposition");
    REFUSED(CT, "--XyZ\r\n" CD "a\r\nno colon\r\n\r\nx\r\n--XyZ--", "malformed header line");
    REFUSED(CT, "--XyZ\r\n" CD "a\r\nX-A : b\r\n\r\nx\r\n--XyZ--", "malformed header line");
    REFUSED(CT, "--XyZ\r\n" CD "a\r\n: b\r\n\r\nx\r\n--XyZ--", "malformed header line");
    REFUSED(CT, "--XyZ\r\n" CD "a\r\nX-A: b\x01\r\n\r\nx\r\n--XyZ--", "control character");
    REFUSED(CT, "--XyZ\r\n" CD "a\x00\r\n\r\nx\r\n--XyZ--", "control character");
    REFUSED(CT, "--XyZ\r\n" CD "a\r\nContent-Type:\r\n\r\nx\r\n--XyZ--", "Content-Type empty");
    REFUSED(CT, "--XyZ\r\n" CD "a\r\nContent-Type: a/b\r\nContent-Type: a/b\r\n\r\nx\r\n--XyZ--",
            "Content-Type given twice");
    REFUSED(CT, "--XyZ\r\n" CD "a\r\nContent-Transfer-Encoding: base64\r\n\r\nx\r\n--XyZ--",
            "Content-Transfer-Encoding base64 is not supported");
    REFUSED(CT, "--XyZ\r\n" CD "a\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nx\r\n"
                "--XyZ--",
            "is not supported");
}

/* Limits: parts, header lines, line and value lengths, duplicate fields. */
static void test_limits(void) {
    REFUSED(CT, "--XyZ\r\n" CD "a\r\n\r\nx\r\n--XyZ\r\n" CD "a\r\n\r\ny\r\n--XyZ--",
            "part 2: the field a appears twice");
    size_t cap = 64 * 1024;
    char *body = malloc(cap);
    size_t n = 0;
    for (int i = 0; i <= MULTIPART_MAX_PARTS; i++) {
        n += (size_t)snprintf(body + n, cap - n, "--XyZ\r\n" CD "f%d\r\n\r\nx\r\n", i);
    }
    n += (size_t)snprintf(body + n, cap - n, "--XyZ--");
    refused(CT, body, n, "more than 16 parts");
    n = (size_t)snprintf(body, cap, "--XyZ\r\n" CD "a\r\n");
    for (int i = 0; i < 16; i++) {
        n += (size_t)snprintf(body + n, cap - n, "X-H%d: v\r\n", i);
    }
    n += (size_t)snprintf(body + n, cap - n, "\r\nx\r\n--XyZ--");
    refused(CT, body, n, "over 16 header lines");
    n = (size_t)snprintf(body, cap, "--XyZ\r\n" CD "a\r\nX-Long: ");
    memset(body + n, 'v', 3000);
    n += 3000;
    n += (size_t)snprintf(body + n, cap - n, "\r\n\r\nx\r\n--XyZ--");
    refused(CT, body, n, "a line over 2048 bytes");
    n = (size_t)snprintf(body, cap, "--XyZ\r\n" CD "%0128d\r\n\r\nx\r\n--XyZ--", 1);
    refused(CT, body, n, "too long");
    n = (size_t)snprintf(body, cap, "--XyZ\r\n" CD "a; filename=%0256d\r\n\r\nx\r\n--XyZ--", 1);
    refused(CT, body, n, "malformed Content-Disposition");
    n = (size_t)snprintf(body, cap, "--XyZ\r\n" CD "a\r\nContent-Type: %0128d\r\n\r\nx\r\n--XyZ--", 1);
    refused(CT, body, n, "Content-Type too long");
    // 16 parts, 127-byte names and 255-byte filenames are within the limits.
    n = 0;
    for (int i = 0; i < MULTIPART_MAX_PARTS; i++) {
        n += (size_t)snprintf(body + n, cap - n, "--XyZ\r\n" CD "%0127d; filename=%0255d\r\n\r\n"
                                                  "x\r\n", i, i);
    }
    n += (size_t)snprintf(body + n, cap - n, "--XyZ--");
    multipart_form form;
    char err[256], *copy;
    CHECK_MSG(parse(CT, body, n, &form, err, &copy) == 0 && form.n_parts == 16, "%s", err);
    free(copy);
    free(body);
}

/* Every proper prefix of a good body is refused: a cut upload never parses. */
static void test_truncations(void) {
    static const char BODY[] = "--XyZ\r\n" CD "name\r\n\r\nalice\r\n"
                               "--XyZ\r\n" CD "audio_sample; filename=\"r.wav\"\r\n"
                               "Content-Type: audio/wav\r\n\r\nRIFF....WAVE\r\n--XyZ--";
    for (size_t n = 0; n < sizeof BODY - 1; n++) {
        multipart_form form;
        char err[256], *copy;
        int rc = parse(CT, BODY, n, &form, err, &copy);
        CHECK_MSG(rc == -1 && form.n_parts == 0, "prefix of %zu bytes accepted", n);
        free(copy);
    }
    multipart_form form;
    char err[256], *copy;
    CHECK(parse(CT, BODY, sizeof BODY - 1, &form, err, &copy) == 0 && form.n_parts == 2);
    free(copy);
    CHECK(multipart_parse(CT, NULL, 0, &form, err, sizeof err) == -1 && form.n_parts == 0);
}

int main(void) {
    test_simple();
    test_variants();
    test_bad_content_type();
    test_bad_framing();
    test_bad_headers();
    test_limits();
    test_truncations();
    return test_main_result("test_multipart");
}
