/*
 * download.c - libcurl GETs for the hub client (see download.h).
 *
 * A file download, per attempt:
 *   size of DEST.incomplete (have) -> GET with "Range: bytes=have-" when have > 0
 *   -> response headers: 200 restarts the file (the server ignored Range), 206 must
 *      start at have; the total must equal the expected size
 *   -> body appended to DEST.incomplete (never past the expected size)
 *   -> at the expected size: sha256 (or git blob sha1) of the whole file, fsync,
 *      rename to DEST.
 * The hash is computed from the file on disk once it is complete, so resumed and
 * restarted transfers need no saved hash state. A file gets at most MAX_ATTEMPTS
 * attempts per call, whether or not they made progress: a server that answers Range
 * with the whole file and then drops makes "progress" on every attempt without ever
 * getting further. The partial file stays for the next run.
 *
 * Traps: with redirects followed, the header callback sees every response of the
 * chain, so its state resets on each status line; bodies of error responses are
 * kept apart (a 404 page must never land in the file); timeouts come from libcurl's
 * connect timeout and low-speed limit, never from a total time limit on files.
 */
#include "download.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kztts.h"

enum { MAX_ATTEMPTS = 5, CONNECT_TIMEOUT_S = 15, LOW_SPEED_BYTES = 1024 };
#define DEFAULT_RETRY_WAIT_MS 1000L

struct downloader {
    CURL *curl;
    download_opts opts;
    char agent[64]; /* User-Agent: kztts/VERSION */
    char curl_error[CURL_ERROR_SIZE];
};

/* Headers of the latest response in a redirect chain. */
typedef struct response {
    long status;
    int64_t content_length; /* -1 when absent */
    int64_t range_start;    /* Content-Range "bytes A-B/T": A and T, -1 when absent */
    int64_t range_total;
    char error_code[64];     /* X-Error-Code */
    char error_message[256]; /* X-Error-Message */
    char next_url[2048];     /* Link: <URL>; rel="next" */
} response;

static void reset_response(response *h) {
    memset(h, 0, sizeof *h);
    h->content_length = h->range_start = h->range_total = -1;
}

void download_format_size(char *buf, size_t n, uint64_t n_bytes) {
    double v = (double)n_bytes;
    if (n_bytes < 1000) {
        snprintf(buf, n, "%" PRIu64 " B", n_bytes);
    } else if (n_bytes < 1000000) {
        snprintf(buf, n, "%.1f kB", v / 1e3);
    } else if (n_bytes < 1000000000) {
        snprintf(buf, n, "%.1f MB", v / 1e6);
    } else {
        snprintf(buf, n, "%.2f GB", v / 1e9);
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Waits before retry number `retry` (1, 2, ...): the base wait, doubled each time. */
static void retry_wait(const downloader *d, int retry) {
    long ms = d->opts.retry_wait_ms > 0 ? d->opts.retry_wait_ms : DEFAULT_RETRY_WAIT_MS;
    ms <<= retry - 1;
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Copies value into dst (size n) without leading blanks or the trailing CR LF. */
static void copy_value(char *dst, size_t n, const char *value) {
    while (*value == ' ' || *value == '\t') {
        value++;
    }
    size_t len = strcspn(value, "\r\n");
    if (len >= n) {
        len = n - 1;
    }
    memcpy(dst, value, len);
    dst[len] = '\0';
}

/* Link: <url1>; rel="next", <url2>; rel="prev"  ->  url1 */
static void parse_link(response *h, const char *value) {
    for (const char *p = strchr(value, '<'); p; p = strchr(p, '<')) {
        const char *end = strchr(p, '>');
        if (!end) {
            return;
        }
        const char *params_end = strchr(end, '<');
        size_t n_params = params_end ? (size_t)(params_end - end) : strlen(end);
        char params[128];
        snprintf(params, sizeof params, "%.*s", (int)(n_params < 127 ? n_params : 127), end);
        if (strstr(params, "rel=\"next\"") || strstr(params, "rel=next")) {
            size_t len = (size_t)(end - p - 1);
            if (len < sizeof h->next_url) {
                memcpy(h->next_url, p + 1, len);
                h->next_url[len] = '\0';
            }
            return;
        }
        p = end;
    }
}

static size_t on_header(char *data, size_t size, size_t n_items, void *user) {
    response *h = user;
    size_t n = size * n_items;
    char line[2560];
    size_t len = n < sizeof line - 1 ? n : sizeof line - 1;
    memcpy(line, data, len);
    line[len] = '\0';
    if (strncmp(line, "HTTP/", 5) == 0) {
        reset_response(h);
        const char *sp = strchr(line, ' ');
        h->status = sp ? strtol(sp + 1, NULL, 10) : 0;
        return n;
    }
    char *colon = strchr(line, ':');
    if (!colon) {
        return n;
    }
    *colon = '\0';
    const char *value = colon + 1;
    char text[2048];
    copy_value(text, sizeof text, value);
    if (strcasecmp(line, "Content-Length") == 0) {
        h->content_length = strtoll(text, NULL, 10);
    } else if (strcasecmp(line, "Content-Range") == 0) {
        long long start, last, total;
        if (sscanf(text, "bytes %lld-%lld/%lld", &start, &last, &total) == 3) {
            h->range_start = start;
            h->range_total = total;
        }
    } else if (strcasecmp(line, "X-Error-Code") == 0) {
        copy_value(h->error_code, sizeof h->error_code, value);
    } else if (strcasecmp(line, "X-Error-Message") == 0) {
        copy_value(h->error_message, sizeof h->error_message, value);
    } else if (strcasecmp(line, "Link") == 0) {
        parse_link(h, text);
    }
    return n;
}

downloader *download_new(const download_opts *opts) {
    downloader *d = calloc(1, sizeof *d);
    if (!d) {
        return NULL;
    }
    d->opts = *opts;
    snprintf(d->agent, sizeof d->agent, "kztts/%s", kz_version());
    d->curl = curl_easy_init();
    if (!d->curl) {
        free(d);
        return NULL;
    }
    return d;
}

void download_free(downloader *d) {
    if (d) {
        curl_easy_cleanup(d->curl);
        free(d);
    }
}

/* Sets the options every request shares. The handle is reset, its connections kept. */
static void setup(downloader *d, const char *url, struct curl_slist *headers, response *h) {
    CURL *c = d->curl;
    curl_easy_reset(c);
    reset_response(h);
    d->curl_error[0] = '\0';
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, d->agent);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#endif
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, (long)CONNECT_TIMEOUT_S);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, (long)LOW_SPEED_BYTES);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, d->opts.stall_s);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, d->curl_error);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, h);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
}

static struct curl_slist *make_headers(const downloader *d, uint64_t range_from, bool json) {
    struct curl_slist *list = NULL;
    char line[4096];
    if (d->opts.token && d->opts.token[0]) {
        snprintf(line, sizeof line, "Authorization: Bearer %s", d->opts.token);
        list = curl_slist_append(list, line);
    }
    if (range_from > 0) {
        snprintf(line, sizeof line, "Range: bytes=%" PRIu64 "-", range_from);
        list = curl_slist_append(list, line);
    }
    if (json) {
        list = curl_slist_append(list, "Accept: application/json");
    }
    return list;
}

/* Fills r for a libcurl failure: TRANSFER (worth retrying) once the server has
 * answered or when the connection broke mid-way, UNREACHABLE when there never was a
 * usable connection or retrying cannot help. */
static download_status curl_failure(downloader *d, CURLcode rc, bool answered, download_result *r) {
    const char *why = d->curl_error[0] ? d->curl_error : curl_easy_strerror(rc);
    bool transient = rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR ||
                     rc == CURLE_GOT_NOTHING || rc == CURLE_HTTP2 || rc == CURLE_HTTP2_STREAM ||
                     (rc == CURLE_OPERATION_TIMEDOUT && answered);
    r->status = transient ? DOWNLOAD_TRANSFER : DOWNLOAD_UNREACHABLE;
    snprintf(r->message, sizeof r->message, "%s", why);
    return r->status;
}

static download_status http_failure(const response *h, const char *url, download_result *r) {
    r->status = DOWNLOAD_HTTP;
    r->http_status = h->status;
    snprintf(r->error_code, sizeof r->error_code, "%s", h->error_code);
    if (h->error_message[0]) {
        snprintf(r->message, sizeof r->message, "HTTP %ld from %s: %s", h->status, url,
                 h->error_message);
    } else {
        snprintf(r->message, sizeof r->message, "HTTP %ld from %s", h->status, url);
    }
    return r->status;
}

static bool retryable(const download_result *r) {
    long s = r->http_status;
    return r->status == DOWNLOAD_TRANSFER ||
           (r->status == DOWNLOAD_HTTP && (s >= 500 || s == 408 || s == 429));
}

/* --- documents into memory --------------------------------------------------------- */

typedef struct text_sink {
    char *data;
    size_t n_bytes, cap, max_bytes;
    bool too_big;
} text_sink;

static size_t on_text(char *data, size_t size, size_t n_items, void *user) {
    text_sink *s = user;
    size_t n = size * n_items;
    if (s->n_bytes + n > s->max_bytes) {
        s->too_big = true;
        return 0;
    }
    if (s->n_bytes + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 65536;
        while (cap < s->n_bytes + n + 1) {
            cap *= 2;
        }
        char *p = realloc(s->data, cap);
        if (!p) {
            return 0;
        }
        s->data = p;
        s->cap = cap;
    }
    memcpy(s->data + s->n_bytes, data, n);
    s->n_bytes += n;
    s->data[s->n_bytes] = '\0';
    return n;
}

static download_status text_once(downloader *d, const char *url, size_t max_bytes, char **body,
                                 size_t *n_body, char **next_url, download_result *r) {
    response h;
    text_sink s = {.max_bytes = max_bytes};
    struct curl_slist *headers = make_headers(d, 0, true);
    setup(d, url, headers, &h);
    curl_easy_setopt(d->curl, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(d->curl, CURLOPT_TIMEOUT, 300L);
    curl_easy_setopt(d->curl, CURLOPT_WRITEFUNCTION, on_text);
    curl_easy_setopt(d->curl, CURLOPT_WRITEDATA, &s);
    CURLcode rc = curl_easy_perform(d->curl);
    curl_slist_free_all(headers);
    r->http_status = h.status;
    download_status st = DOWNLOAD_OK;
    if (s.too_big) {
        r->status = st = DOWNLOAD_HTTP;
        snprintf(r->message, sizeof r->message, "answer from %s is larger than %zu bytes", url,
                 max_bytes);
    } else if (rc != CURLE_OK) {
        st = curl_failure(d, rc, h.status != 0, r);
    } else if (h.status < 200 || h.status >= 300) {
        st = http_failure(&h, url, r);
    } else if (!s.data && !(s.data = calloc(1, 1))) {
        r->status = st = DOWNLOAD_LOCAL;
        snprintf(r->message, sizeof r->message, "out of memory");
    }
    if (st != DOWNLOAD_OK) {
        free(s.data);
        return st;
    }
    *body = s.data;
    *n_body = s.n_bytes;
    *next_url = h.next_url[0] ? strdup(h.next_url) : NULL;
    return DOWNLOAD_OK;
}

download_status download_text(downloader *d, const char *url, size_t max_bytes, char **body,
                              size_t *n_body, char **next_url, download_result *r) {
    *body = NULL;
    *n_body = 0;
    *next_url = NULL;
    for (int n_attempts = 1;; n_attempts++) {
        memset(r, 0, sizeof *r);
        download_status st = text_once(d, url, max_bytes, body, n_body, next_url, r);
        if (st == DOWNLOAD_OK || !retryable(r) || n_attempts == MAX_ATTEMPTS) {
            return st;
        }
        retry_wait(d, n_attempts);
    }
}

/* --- hashing ---------------------------------------------------------------------- */

static void to_hex(char *out, const unsigned char *digest, unsigned n) {
    for (unsigned i = 0; i < n; i++) {
        snprintf(out + 2 * i, 3, "%02x", digest[i]);
    }
}

/* Hex sha256 of the file, or with git_blob the sha1 of "blob SIZE\0" + content.
 * Returns 0, or -1 with errno set. */
static int hash_file(const char *path, uint64_t size, bool git_blob, char *out, size_t n_out) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        return -1;
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    size_t n_buf = (size_t)1 << 20;
    unsigned char *buf = malloc(n_buf);
    int ok = ctx && buf && EVP_DigestInit_ex(ctx, git_blob ? EVP_sha1() : EVP_sha256(), NULL);
    if (ok && git_blob) {
        char prefix[48];
        int n_prefix = snprintf(prefix, sizeof prefix, "blob %" PRIu64, size);
        ok = EVP_DigestUpdate(ctx, prefix, (size_t)n_prefix + 1);
    }
    size_t n;
    while (ok && (n = fread(buf, 1, n_buf, f)) > 0) {
        ok = EVP_DigestUpdate(ctx, buf, n);
    }
    int saved_errno = errno;
    ok = ok && !ferror(f);
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned n_digest = 0;
    ok = ok && EVP_DigestFinal_ex(ctx, digest, &n_digest) && n_out > 2 * n_digest;
    EVP_MD_CTX_free(ctx);
    free(buf);
    fclose(f);
    if (!ok) {
        errno = saved_errno ? saved_errno : EIO;
        return -1;
    }
    to_hex(out, digest, n_digest);
    return 0;
}

bool download_check(const char *path, const download_expect *want, char *got, size_t n_got) {
    got[0] = '\0';
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != want->size) {
        return false;
    }
    const char *hash = want->sha256 ? want->sha256 : want->git_sha1;
    if (!hash) {
        return true;
    }
    if (hash_file(path, want->size, !want->sha256, got, n_got) != 0) {
        return false;
    }
    return strcasecmp(got, hash) == 0;
}

/* --- files ------------------------------------------------------------------------ */

typedef struct xfer {
    downloader *d;
    response h;
    const char *label;
    const char *tmp_path;
    int fd;
    uint64_t size;        /* expected bytes */
    uint64_t have;        /* bytes in the .incomplete file */
    uint64_t got_now;     /* bytes received by this call of download_file */
    uint64_t served_size; /* size the server claims when it disagrees with size */
    bool started;         /* the first body byte of a 2xx response was seen */
    bool restarted;       /* a Range request was answered with the whole file */
    bool size_bad;        /* the server's total differs from size */
    bool range_bad;       /* a 206 that does not start where the file ends */
    int write_errno;
    double t0, last_draw;
} xfer;

static void progress_draw(xfer *x, bool final) {
    if (!x->d->opts.progress) {
        return;
    }
    double t = now_s();
    if (!final && t - x->last_draw < 0.1) {
        return;
    }
    x->last_draw = t;
    char have[32], size[32], rate[32];
    download_format_size(have, sizeof have, x->have);
    download_format_size(size, sizeof size, x->size);
    download_format_size(rate, sizeof rate,
                         t > x->t0 ? (uint64_t)((double)x->got_now / (t - x->t0)) : 0);
    double pct = x->size ? 100.0 * (double)x->have / (double)x->size : 100.0;
    fprintf(stderr, "\r%s  %9s / %-9s %3.0f%%  %9s/s\033[K%s", x->label, have, size, pct, rate,
            final ? "\n" : "");
}

static void progress_clear(const downloader *d) {
    if (d->opts.progress) {
        fprintf(stderr, "\r\033[K");
    }
}

/* Called at the first body byte of a 2xx response: decides whether the bytes continue
 * the partial file or replace it. Returns false to abort the transfer. */
static bool begin_body(xfer *x) {
    x->started = true;
    if (x->h.status == 206) {
        if (x->h.range_total >= 0 && (uint64_t)x->h.range_total != x->size) {
            x->size_bad = true;
            x->served_size = (uint64_t)x->h.range_total;
            return false;
        }
        if (x->h.range_start < 0 || (uint64_t)x->h.range_start != x->have) {
            x->range_bad = true;
            return false;
        }
        return true;
    }
    if (x->have > 0) { // the server ignored Range: start the file over
        x->restarted = true;
        if (ftruncate(x->fd, 0) != 0) {
            x->write_errno = errno;
            return false;
        }
        x->have = 0;
    }
    if (x->h.content_length >= 0 && (uint64_t)x->h.content_length != x->size) {
        x->size_bad = true;
        x->served_size = (uint64_t)x->h.content_length;
        return false;
    }
    return true;
}

static size_t on_file_data(char *data, size_t size, size_t n_items, void *user) {
    xfer *x = user;
    size_t n = size * n_items;
    if (x->h.status < 200 || x->h.status >= 300) {
        return n; // the body of an error page: the status says it all
    }
    if (!x->started && !begin_body(x)) {
        return 0;
    }
    if (x->have + n > x->size) {
        x->size_bad = true;
        x->served_size = x->have + n;
        return 0;
    }
    for (size_t done = 0; done < n;) {
        ssize_t w = write(x->fd, data + done, n - done);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            x->write_errno = w < 0 ? errno : EIO;
            return 0;
        }
        done += (size_t)w;
    }
    x->have += n;
    x->got_now += n;
    progress_draw(x, false);
    return n;
}

static uint64_t file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

static download_status local_failure(const char *path, int err, download_result *r) {
    r->status = DOWNLOAD_LOCAL;
    bool full = err == ENOSPC
#ifdef EDQUOT
                || err == EDQUOT
#endif
        ;
    snprintf(r->message, sizeof r->message, "cannot write %s: %s%s", path, strerror(err),
             full ? " (disk full: free some space and run again to resume)" : "");
    return r->status;
}

/* One GET from the end of the partial file. */
static download_status attempt(xfer *x, const char *url, download_result *r) {
    downloader *d = x->d;
    x->fd = open(x->tmp_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (x->fd < 0) {
        return local_failure(x->tmp_path, errno, r);
    }
    x->have = file_size(x->tmp_path);
    x->started = x->size_bad = x->range_bad = false;
    x->write_errno = 0;
    struct curl_slist *headers = make_headers(d, x->have, false);
    setup(d, url, headers, &x->h);
    curl_easy_setopt(d->curl, CURLOPT_WRITEFUNCTION, on_file_data);
    curl_easy_setopt(d->curl, CURLOPT_WRITEDATA, x);
    CURLcode rc = curl_easy_perform(d->curl);
    curl_slist_free_all(headers);
    r->http_status = x->h.status;
    if (rc == CURLE_OK && !x->started && x->h.status >= 200 && x->h.status < 300) {
        begin_body(x); // empty body: still check the announced size
    }
    int close_err = close(x->fd) != 0 ? errno : 0;
    if (x->write_errno || close_err) {
        return local_failure(x->tmp_path, x->write_errno ? x->write_errno : close_err, r);
    }
    if (x->size_bad) {
        unlink(x->tmp_path);
        r->status = DOWNLOAD_VERIFY;
        snprintf(r->message, sizeof r->message,
                 "size mismatch: listed as %" PRIu64 " bytes, the server sends %s%" PRIu64
                 " (lying or broken endpoint); nothing saved",
                 x->size, x->served_size > x->size && x->h.content_length < 0 ? "at least " : "",
                 x->served_size);
        return r->status;
    }
    if (x->range_bad || x->h.status == 416) { // inconsistent partial: start over
        unlink(x->tmp_path);
        r->status = DOWNLOAD_TRANSFER;
        snprintf(r->message, sizeof r->message, "the server did not resume at byte %" PRIu64,
                 x->have);
        return r->status;
    }
    if (x->h.status >= 300 || (rc == CURLE_OK && x->h.status < 200)) {
        return http_failure(&x->h, url, r);
    }
    if (rc != CURLE_OK && curl_failure(d, rc, x->h.status != 0, r) != DOWNLOAD_TRANSFER) {
        return r->status;
    }
    if (rc != CURLE_OK) {
        char why[CURL_ERROR_SIZE];
        snprintf(why, sizeof why, "%.*s", (int)sizeof why - 1, r->message);
        snprintf(r->message, sizeof r->message,
                 "transfer cut off at %" PRIu64 " of %" PRIu64 " bytes (%s)", x->have, x->size,
                 why);
        return r->status;
    }
    if (x->have < x->size) {
        r->status = DOWNLOAD_TRANSFER;
        snprintf(r->message, sizeof r->message,
                 "transfer cut off at %" PRIu64 " of %" PRIu64 " bytes (connection closed early)",
                 x->have, x->size);
        return r->status;
    }
    return DOWNLOAD_OK;
}

/* The partial file is complete: check it and move it to dest. */
static download_status finish(xfer *x, const char *dest, const download_expect *want,
                              download_result *r) {
    char got[80];
    if (!download_check(x->tmp_path, want, got, sizeof got)) {
        int err = errno;
        if (!got[0]) {
            return local_failure(x->tmp_path, err ? err : EIO, r);
        }
        unlink(x->tmp_path);
        r->status = DOWNLOAD_VERIFY;
        if (want->sha256) {
            snprintf(r->message, sizeof r->message,
                     "sha256 mismatch: expected %s, got %s (lying endpoint or corrupted "
                     "transfer); nothing saved",
                     want->sha256, got);
        } else {
            snprintf(r->message, sizeof r->message,
                     "git blob sha1 mismatch: expected %s, got %s (lying endpoint or corrupted "
                     "transfer); nothing saved",
                     want->git_sha1, got);
        }
        return r->status;
    }
    int fd = open(x->tmp_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        int err = errno;
        if (fd >= 0) {
            close(fd);
        }
        return local_failure(x->tmp_path, err, r);
    }
    close(fd);
    if (rename(x->tmp_path, dest) != 0) {
        return local_failure(dest, errno, r);
    }
    progress_draw(x, true);
    return DOWNLOAD_OK;
}

/* Ends r's message with why no further attempt is made. */
static void give_up(const xfer *x, int n_attempts, download_result *r) {
    char why[sizeof r->message];
    snprintf(why, sizeof why, "%s", r->message);
    if (x->restarted) {
        snprintf(r->message, sizeof r->message,
                 "%.600s; gave up after %d attempts (the server ignores Range requests, so "
                 "every attempt started over at byte 0)",
                 why, n_attempts);
    } else {
        snprintf(r->message, sizeof r->message,
                 "%.600s; gave up after %d attempts; run again to resume", why, n_attempts);
    }
}

download_status download_file(downloader *d, const char *url, const char *dest, const char *label,
                              const download_expect *want, download_result *r) {
    size_t n_tmp = strlen(dest) + sizeof ".incomplete";
    char *tmp_path = malloc(n_tmp);
    if (!tmp_path) {
        memset(r, 0, sizeof *r);
        return local_failure(dest, ENOMEM, r);
    }
    snprintf(tmp_path, n_tmp, "%s.incomplete", dest);
    xfer x = {.d = d, .label = label, .tmp_path = tmp_path, .size = want->size, .t0 = now_s()};
    // A partial left by an earlier run may predate a change upstream; if it fails the
    // check it is discarded once and the file fetched from the start.
    bool old_partial = file_size(tmp_path) > 0;
    download_status st;
    for (int n_attempts = 0;;) {
        memset(r, 0, sizeof *r);
        if (file_size(tmp_path) > want->size) {
            unlink(tmp_path);
        }
        bool complete = file_size(tmp_path) == want->size && access(tmp_path, F_OK) == 0;
        st = complete ? DOWNLOAD_OK : (n_attempts++, attempt(&x, url, r));
        if (st == DOWNLOAD_OK) {
            x.have = file_size(tmp_path);
            st = finish(&x, dest, want, r);
            if (st == DOWNLOAD_VERIFY && old_partial && x.got_now < want->size) {
                old_partial = false;
                continue;
            }
            break;
        }
        if (!retryable(r)) {
            break;
        }
        if (n_attempts == MAX_ATTEMPTS) {
            give_up(&x, n_attempts, r);
            break;
        }
        retry_wait(d, n_attempts);
    }
    if (st != DOWNLOAD_OK) {
        progress_clear(d);
        if (access(tmp_path, F_OK) == 0 && file_size(tmp_path) == 0) {
            unlink(tmp_path); // nothing worth resuming
        }
    }
    free(tmp_path);
    return st;
}
