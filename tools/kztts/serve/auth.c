/*
 * auth.c - Bearer API keys (see auth.h).
 *
 * Data flow: key file -> one key a line (surrounding blanks trimmed; blank and '#'
 * lines skipped) -> each key kept only as its SHA-256 digest. A request's
 * "Authorization: Bearer <token>" -> the token's digest -> compared with every key's
 * digest with CRYPTO_memcmp, all of them, without stopping at a match. Comparing
 * fixed-size digests keeps the time independent of where a guess differs and of the
 * keys' lengths.
 */
#define _DEFAULT_SOURCE /* strcasecmp, getline */

#include "auth.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct auth {
    unsigned char (*digests)[SHA256_DIGEST_LENGTH];
    size_t n_keys;
};

static bool blank(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* line without surrounding blanks, in place. */
static char *trim(char *line) {
    while (blank(*line)) {
        line++;
    }
    size_t n = strlen(line);
    while (n > 0 && blank(line[n - 1])) {
        line[--n] = '\0';
    }
    return line;
}

static int add_key(auth *a, const char *key) {
    unsigned char (*d)[SHA256_DIGEST_LENGTH] =
        realloc(a->digests, (a->n_keys + 1) * sizeof *a->digests);
    if (!d) {
        return -1;
    }
    a->digests = d;
    SHA256((const unsigned char *)key, strlen(key), a->digests[a->n_keys++]);
    return 0;
}

auth *auth_load(const char *path, char *err, size_t n_err) {
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, n_err, "cannot read API key file '%s': %s", path, strerror(errno));
        return NULL;
    }
    auth *a = calloc(1, sizeof *a);
    char *line = NULL;
    size_t cap = 0;
    bool oom = !a;
    while (!oom && getline(&line, &cap, f) >= 0) {
        const char *key = trim(line);
        if (key[0] && key[0] != '#') {
            oom = add_key(a, key) != 0;
        }
    }
    const bool read_error = ferror(f) != 0;
    free(line);
    fclose(f);
    if (oom || read_error || a->n_keys == 0) {
        snprintf(err, n_err, "API key file '%s': %s", path,
                 oom ? "out of memory" : read_error ? "read error" : "holds no key");
        auth_free(a);
        return NULL;
    }
    return a;
}

void auth_free(auth *a) {
    if (a) {
        OPENSSL_cleanse(a->digests, a->n_keys * sizeof *a->digests);
        free(a->digests);
        free(a);
    }
}

bool auth_ok(const auth *a, const char *authorization) {
    if (!a) {
        return true;
    }
    if (!authorization) {
        return false;
    }
    while (blank(*authorization)) {
        authorization++;
    }
    if (strncasecmp(authorization, "Bearer", 6) != 0 || !blank(authorization[6])) {
        return false;
    }
    const char *token = authorization + 6;
    while (blank(*token)) {
        token++;
    }
    size_t n = strlen(token);
    while (n > 0 && blank(token[n - 1])) {
        n--;
    }
    if (n == 0) {
        return false;
    }
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)token, n, digest);
    int match = 0;
    for (size_t i = 0; i < a->n_keys; i++) { // every key, no early exit
        match |= CRYPTO_memcmp(digest, a->digests[i], sizeof digest) == 0;
    }
    return match != 0;
}
