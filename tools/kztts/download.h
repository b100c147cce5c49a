/*
 * download.h - HTTP GETs for the hub client (libcurl): small documents into
 * memory, and model files into place through a resumable DEST.incomplete file
 * that is checked (size, then sha256 or git blob sha1) before it is renamed to
 * DEST. DEST therefore only ever holds a complete, verified file.
 *
 * Transient failures (connection dropped or stalled mid-transfer, HTTP 5xx,
 * 408, 429) are retried: at most 5 attempts per document or file, the retries
 * after 1, 2, 4 and 8 s (opts.retry_wait_ms doubled each time). A retry of a file
 * resumes with a Range request; a server that ignores Range is handled by starting
 * the file over.
 * One downloader is used by one thread at a time.
 */
#ifndef KZ_DOWNLOAD_H
#define KZ_DOWNLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct downloader downloader;

typedef struct download_opts {
    const char *token;  /* sent as "Authorization: Bearer TOKEN" (libcurl drops it when a
                           redirect leaves the host), or NULL */
    long stall_s;       /* a transfer slower than 1 KB/s for this many seconds fails */
    bool progress;      /* draw a progress bar on stderr (only when it is a terminal) */
    long retry_wait_ms; /* wait before the first retry, doubled for each further one;
                           0 means 1000 */
} download_opts;

typedef enum download_status {
    DOWNLOAD_OK = 0,
    DOWNLOAD_UNREACHABLE, /* no usable connection: name lookup, connect, TLS, bad redirect */
    DOWNLOAD_HTTP,        /* the server answered with an error status (see http_status) */
    DOWNLOAD_TRANSFER,    /* dropped or stalled mid-transfer after all retries; the
                             .incomplete file is kept so a later run resumes */
    DOWNLOAD_VERIFY,      /* size or hash differs from what was expected; nothing kept */
    DOWNLOAD_LOCAL,       /* cannot write the file (disk full, permissions) */
} download_status;

typedef struct download_result {
    download_status status;
    long http_status;    /* status of the last response, 0 if none arrived */
    char error_code[64]; /* the hub's X-Error-Code header ("RepoNotFound", ...) or "" */
    char message[768];   /* one line saying what failed, "" on success */
} download_result;

typedef struct download_expect {
    uint64_t size;        /* bytes */
    const char *sha256;   /* 64 hex digits of the content (LFS files), or NULL */
    const char *git_sha1; /* 40 hex digits of sha1("blob SIZE\0" content), or NULL */
} download_expect;

/* Returns a new downloader (opts is copied, the token string is borrowed), or NULL
 * when libcurl cannot start. curl_global_init must have been called. */
downloader *download_new(const download_opts *opts);
void download_free(downloader *d);

/* GETs url into memory, at most max_bytes, compressed transfer allowed. On success
 * *body holds *n_body bytes and a NUL after them, owned (free()), and *next_url, when
 * the response carries a Link header with rel="next", is its target (owned), else NULL. */
download_status download_text(downloader *d, const char *url, size_t max_bytes, char **body,
                              size_t *n_body, char **next_url, download_result *r);

/* Brings the file at url (redirects followed) to dest, resuming dest.incomplete when it
 * exists, checking it against want and renaming it to dest. label names the file in the
 * progress bar. dest's directory must exist. */
download_status download_file(downloader *d, const char *url, const char *dest, const char *label,
                              const download_expect *want, download_result *r);

/* True when the file at path has want's size and hash. got receives the hex hash
 * computed (or "" when the size already differs); n_got >= 65. */
bool download_check(const char *path, const download_expect *want, char *got, size_t n_got);

/* "512 B", "3.4 kB", "23.9 MB", "1.83 GB" into buf. */
void download_format_size(char *buf, size_t n, uint64_t n_bytes);

#endif
