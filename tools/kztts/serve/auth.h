/*
 * auth.h - Bearer API keys for `kztts serve --api-key-file F`: one key per line (blank
 * lines and lines starting with '#' skipped), compared in constant time against the
 * Authorization header's "Bearer <key>".
 */
#ifndef KZ_AUTH_H
#define KZ_AUTH_H

#include <stdbool.h>
#include <stddef.h>

typedef struct auth auth;

/* Reads the key file. NULL with one line in err when it cannot be read or holds no key. */
auth *auth_load(const char *path, char *err, size_t n_err);
void auth_free(auth *a);

/* Whether the Authorization header value (NULL when absent) carries a known key. A NULL
 * auth (no key file) accepts everything. */
bool auth_ok(const auth *a, const char *authorization);

#endif
