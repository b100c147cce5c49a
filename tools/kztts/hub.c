/*
 * hub.c - `-m owner/name[@revision]` through a download cache (see hub.h).
 *
 * Flow for a repo id:
 *   validate the id -> cache paths
 *   -> HF_HUB_OFFLINE: the cached copy if its manifest says complete, else fail
 *   -> GET {endpoint}/api/models/{repo}/tree/{revision}?recursive=true, following
 *      Link rel="next" pages (same server, no page twice, at most MAX_PAGES);
 *      unreachable or 5xx: the cached copy if complete
 *   -> keep the files kztts reads (hub_files.c); config.json and the weights must be there
 *   -> flock CACHE/models/OWNER--NAME/.lock, read REVISION.manifest (files verified
 *      earlier: path, size, hash)
 *   -> skip files on disk whose size and hash match (manifest entry, else re-hashed)
 *   -> check free space -> download.c fetches the rest, manifest saved after each
 *   -> delete files of the previous manifest the repo no longer has -> complete.
 *
 * Files come from {endpoint}/{repo}/resolve/{revision}/{path}, which redirects LFS
 * files to a CDN. Only names from a fixed list are fetched, so a listing cannot
 * steer writes outside the snapshot directory.
 */
#include "hub.h"
#include "progress.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "download.h"
#include "hub_files.h"

enum { MAX_PAGES = 1000, DEFAULT_STALL_S = 30 };
#define TREE_MAX_BYTES ((size_t)64 << 20)
#define MANIFEST_MAX_BYTES ((long)1 << 20)
#define DEFAULT_ENDPOINT "https://huggingface.co"

typedef struct hub {
    const char *cmd;
    char endpoint[1024]; /* no trailing slash */
    const char *token;   /* HF_TOKEN or NULL */
    bool offline;        /* HF_HUB_OFFLINE */
    bool tty;            /* stderr is a terminal: progress and notes */
    long stall_s;
    long retry_wait_ms; /* KZTTS_HUB_RETRY_MS, or 0 for download.c's default */
    char repo[256];     /* owner/name */
    char revision[256];
    char repo_dir[PATH_MAX];
    char snapshot[PATH_MAX];
    char manifest[PATH_MAX];
    hub_files cached; /* REVISION.manifest */
    hub_files listed; /* the wanted files of the listing */
    downloader *dl;
} hub;

static int fail(const hub *h, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kztts %s: ", h->cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return -1;
}

/* --- the argument ------------------------------------------------------------------ */

static bool is_local(const char *arg) {
    struct stat sb;
    return arg[0] == '/' || arg[0] == '~' || strncmp(arg, "./", 2) == 0 ||
           strncmp(arg, "../", 3) == 0 || strcmp(arg, ".") == 0 || strcmp(arg, "..") == 0 ||
           stat(arg, &sb) == 0;
}

/* Hub names: 1..96 of [A-Za-z0-9._-], no leading or trailing '.' or '-', no "--" or
 * "..". Ruling out "--" keeps the cache folder name OWNER--NAME unambiguous. */
static bool valid_name(const char *s, size_t n) {
    if (n == 0 || n > 96 || strchr(".-", s[0]) || strchr(".-", s[n - 1])) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        if (!ok || (i > 0 && (c == '.' || c == '-') && s[i - 1] == c)) {
            return false;
        }
    }
    return true;
}

/* Branch, tag or commit: 1..200 of [A-Za-z0-9._/-], no "..", no leading '/' or '-'. */
static bool valid_revision(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 200 || s[0] == '/' || s[0] == '-' || s[n - 1] == '/' || strstr(s, "..")) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("._/-", c))) {
            return false;
        }
    }
    return true;
}

/* owner/name[@revision] -> repo, revision ("main" by default). Returns 0 or -1. */
static int parse_ref(const char *arg, char *repo, size_t n_repo, char *revision,
                     size_t n_revision) {
    const char *at = strchr(arg, '@');
    size_t n_id = at ? (size_t)(at - arg) : strlen(arg);
    const char *slash = memchr(arg, '/', n_id);
    if (!slash || n_id >= n_repo) {
        return -1;
    }
    size_t n_owner = (size_t)(slash - arg), n_name = n_id - n_owner - 1;
    if (!valid_name(arg, n_owner) || !valid_name(slash + 1, n_name)) {
        return -1;
    }
    const char *rev = at ? at + 1 : "main";
    if (!valid_revision(rev) || strlen(rev) >= n_revision) {
        return -1;
    }
    snprintf(repo, n_repo, "%.*s", (int)n_id, arg);
    snprintf(revision, n_revision, "%s", rev);
    return 0;
}

/* --- environment and cache paths ------------------------------------------------- */

static const char *env_set(const char *name) {
    const char *v = getenv(name);
    return v && v[0] ? v : NULL;
}

static bool env_true(const char *name) {
    const char *v = env_set(name);
    return v && (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0 ||
                 strcasecmp(v, "on") == 0);
}

/* The number in [lo, hi] that environment variable name holds, fraction dropped;
 * else fallback (with a warning when it is set to something else). */
static long env_long(const char *cmd, const char *name, long lo, long hi, long fallback) {
    const char *v = env_set(name);
    if (!v) {
        return fallback;
    }
    char *end;
    double x = strtod(v, &end);
    if (*end == '\0' && x >= (double)lo && x <= (double)hi) {
        return (long)x;
    }
    fprintf(stderr, "kztts %s: warning: ignoring %s='%s' (want a number in [%ld, %ld])\n", cmd,
            name, v, lo, hi);
    return fallback;
}

static int cache_root(char *out, size_t n) {
    const char *v = env_set("KZTTS_CACHE");
    if (v) {
        return snprintf(out, n, "%s", v) < (int)n ? 0 : -1;
    }
    v = env_set("XDG_CACHE_HOME");
    if (v && v[0] == '/') { // the XDG spec says to ignore relative paths
        return snprintf(out, n, "%s/kztts", v) < (int)n ? 0 : -1;
    }
    v = env_set("HOME");
    if (!v) {
        const struct passwd *pw = getpwuid(getuid());
        v = pw ? pw->pw_dir : NULL;
    }
    return v && snprintf(out, n, "%s/.cache/kztts", v) < (int)n ? 0 : -1;
}

static int hub_init(hub *h, const char *cmd, const char *repo, const char *revision) {
    h->cmd = cmd;
    snprintf(h->repo, sizeof h->repo, "%s", repo);
    snprintf(h->revision, sizeof h->revision, "%s", revision);
    const char *endpoint = env_set("KZTTS_HF_ENDPOINT");
    endpoint = endpoint ? endpoint : env_set("HF_ENDPOINT");
    endpoint = endpoint ? endpoint : DEFAULT_ENDPOINT;
    if (strncmp(endpoint, "http://", 7) != 0 && strncmp(endpoint, "https://", 8) != 0) {
        return fail(h, "hub endpoint '%s' must start with http:// or https://", endpoint);
    }
    if (snprintf(h->endpoint, sizeof h->endpoint, "%s", endpoint) >= (int)sizeof h->endpoint) {
        return fail(h, "hub endpoint '%.64s...' is too long", endpoint);
    }
    for (size_t n = strlen(h->endpoint); n > 0 && h->endpoint[n - 1] == '/'; n--) {
        h->endpoint[n - 1] = '\0';
    }
    h->token = env_set("HF_TOKEN");
    h->offline = env_true("HF_HUB_OFFLINE");
    h->tty = progress_terminal(); // a terminal, and no --quiet
    h->stall_s = env_long(cmd, "HF_HUB_DOWNLOAD_TIMEOUT", 1, 3600, DEFAULT_STALL_S);
    h->retry_wait_ms = env_long(cmd, "KZTTS_HUB_RETRY_MS", 1, 60000, 0);
    char root[PATH_MAX - 512];
    if (cache_root(root, sizeof root) != 0) {
        return fail(h, "no cache directory: set KZTTS_CACHE (or HOME)");
    }
    char rev_dir[256];
    size_t j = 0;
    for (const char *p = revision; *p && j + 3 < sizeof rev_dir; p++) {
        if (*p == '/') { // refs/pr/1 -> refs--pr--1
            rev_dir[j++] = '-';
            rev_dir[j++] = '-';
        } else {
            rev_dir[j++] = *p;
        }
    }
    rev_dir[j] = '\0';
    const char *slash = strchr(repo, '/');
    int n = snprintf(h->repo_dir, sizeof h->repo_dir, "%s/models/%.*s--%s", root,
                     (int)(slash - repo), repo, slash + 1);
    n = n < (int)sizeof h->repo_dir ? n : -1;
    if (n < 0 ||
        snprintf(h->snapshot, sizeof h->snapshot, "%s/%s", h->repo_dir, rev_dir) >=
            (int)sizeof h->snapshot ||
        snprintf(h->manifest, sizeof h->manifest, "%s/%s.manifest", h->repo_dir, rev_dir) >=
            (int)sizeof h->manifest) {
        return fail(h, "cache path for %s is too long", repo);
    }
    return 0;
}

/* mkdir -p; returns 0 or -1 with errno set. */
static int make_dirs(const char *path) {
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            struct stat sb;
            if (mkdir(buf, 0755) != 0 &&
                (errno != EEXIST || stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode))) {
                if (errno == EEXIST) {
                    errno = ENOTDIR;
                }
                return -1;
            }
            *p = c;
            if (c == '\0') {
                return 0;
            }
        }
    }
}

/* Takes the repo's lock file; returns its descriptor (closing it unlocks) or -1. */
static int lock_repo(const hub *h) {
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/.lock", h->repo_dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
        return fd;
    }
    if (errno == EWOULDBLOCK && h->tty) {
        fprintf(stderr, "kztts: waiting for another kztts process working on %s\n", h->repo);
    }
    while (flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR) {
            int err = errno;
            close(fd);
            errno = err;
            return -1;
        }
    }
    return fd;
}

/* --- the manifest --------------------------------------------------------------- */

static void manifest_load(hub *h) {
    memset(&h->cached, 0, sizeof h->cached);
    FILE *f = fopen(h->manifest, "rb");
    if (!f) {
        return;
    }
    char *text = malloc((size_t)MANIFEST_MAX_BYTES + 1);
    size_t n = text ? fread(text, 1, (size_t)MANIFEST_MAX_BYTES, f) : 0;
    fclose(f);
    if (text) {
        text[n] = '\0';
        hub_manifest_parse(text, h->repo, h->revision, &h->cached);
        free(text);
    }
}

/* Writes h->cached atomically (temporary file + rename). Returns 0 or -1. */
static int manifest_save(const hub *h) {
    char *text = hub_manifest_print(&h->cached, h->repo, h->revision);
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", h->manifest, (long)getpid());
    errno = text ? 0 : ENOMEM;
    FILE *f = text ? fopen(tmp, "wb") : NULL;
    int ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    ok = f && fclose(f) == 0 && ok;
    free(text);
    if (!ok || rename(tmp, h->manifest) != 0) {
        int err = errno;
        unlink(tmp);
        return fail(h, "cannot write %s: %s", h->manifest, strerror(err));
    }
    return 0;
}

static bool cache_complete(const hub *h) {
    if (!h->cached.complete || h->cached.n == 0) {
        return false;
    }
    for (int i = 0; i < h->cached.n; i++) {
        char path[PATH_MAX + 256];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", h->snapshot, h->cached.items[i].path);
        if (stat(path, &sb) != 0 || (uint64_t)sb.st_size != h->cached.items[i].size) {
            return false;
        }
    }
    return true;
}

/* --- the listing ---------------------------------------------------------------- */

static void encode_revision(char *out, size_t n, const char *revision) {
    size_t j = 0;
    for (const char *p = revision; *p && j + 4 < n; p++) {
        if (*p == '/') {
            memcpy(out + j, "%2F", 3);
            j += 3;
        } else {
            out[j++] = *p;
        }
    }
    out[j] = '\0';
}

/* Adds the wanted files of one page of the tree listing. Returns 0 or -1 (printed). */
static int add_page(hub *h, const char *body, size_t n_body) {
    char err[256];
    if (hub_listing_add_page(&h->listed, body, n_body, err, sizeof err) != 0) {
        return fail(h, "%s: unexpected listing from %s: %s", h->repo, h->endpoint, err);
    }
    return 0;
}

/* Checks the next-page link of page n_seen: it must stay on the endpoint (the token
 * goes with every page) and lead to a page not seen yet, within MAX_PAGES. Returns 0
 * or -1 (printed). */
static int check_next(const hub *h, const char *next, char *const *seen, int n_seen) {
    size_t n_endpoint = strlen(h->endpoint);
    if (strncmp(next, h->endpoint, n_endpoint) != 0 || next[n_endpoint] != '/') {
        return fail(h, "%s: the listing from %s links to a page on another server", h->repo,
                    h->endpoint);
    }
    for (int i = 0; i < n_seen; i++) {
        if (strcmp(next, seen[i]) == 0 && i + 1 == n_seen) {
            return fail(h, "%s: the listing from %s loops: page %d links to itself", h->repo,
                        h->endpoint, n_seen);
        }
        if (strcmp(next, seen[i]) == 0) {
            return fail(h, "%s: the listing from %s loops: page %d links back to page %d", h->repo,
                        h->endpoint, n_seen, i + 1);
        }
    }
    if (n_seen == MAX_PAGES) {
        return fail(h, "%s: the listing from %s has more than %d pages", h->repo, h->endpoint,
                    MAX_PAGES);
    }
    return 0;
}

/* Lists the repo into h->listed, page by page. Returns 0, -1 for a download failure
 * described by r, or -2 for a failure already printed. */
static int list_repo(hub *h, download_result *r) {
    char rev[768], first[4096];
    encode_revision(rev, sizeof rev, h->revision);
    snprintf(first, sizeof first, "%s/api/models/%s/tree/%s?recursive=true", h->endpoint, h->repo,
             rev);
    memset(&h->listed, 0, sizeof h->listed);
    char *seen[MAX_PAGES]; // the URLs fetched so far, owned
    int n_seen = 0, rc = 0;
    char *url = strdup(first);
    if (!url) {
        fail(h, "out of memory");
        return -2;
    }
    while (url) {
        seen[n_seen++] = url;
        char *body = NULL, *next = NULL;
        size_t n_body = 0;
        if (download_text(h->dl, url, TREE_MAX_BYTES, &body, &n_body, &next, r) != DOWNLOAD_OK) {
            rc = -1;
            break;
        }
        bool ok =
            add_page(h, body, n_body) == 0 && (!next || check_next(h, next, seen, n_seen) == 0);
        free(body);
        if (!ok) {
            free(next);
            rc = -2;
            break;
        }
        url = next;
    }
    for (int i = 0; i < n_seen; i++) {
        free(seen[i]);
    }
    return rc;
}

static int fail_auth(const hub *h, long status, const char *what) {
    if (h->token) {
        return fail(h,
                    "%s: access denied by %s (HTTP %ld) with the token in HF_TOKEN; check "
                    "that it can read %s (gated models need their terms accepted on the model "
                    "page)",
                    what, h->endpoint, status, h->repo);
    }
    return fail(h,
                "%s: access denied by %s (HTTP %ld); if the repository is private or "
                "gated, set HF_TOKEN to an access token that can read it",
                what, h->endpoint, status);
}

static int fail_listing(const hub *h, const download_result *r) {
    long s = r->http_status;
    if (r->status == DOWNLOAD_UNREACHABLE) {
        return fail(h, "cannot reach %s (%s) and %s@%s is not in the cache", h->endpoint,
                    r->message, h->repo, h->revision);
    }
    if (r->status == DOWNLOAD_HTTP && s == 404 && strcmp(r->error_code, "RevisionNotFound") == 0) {
        return fail(h, "%s: revision '%s' not found on %s (HTTP 404)", h->repo, h->revision,
                    h->endpoint);
    }
    if (r->status == DOWNLOAD_HTTP && s == 404) {
        return fail(h,
                    "%s: repository not found on %s (HTTP 404), and there is no local "
                    "directory of that name",
                    h->repo, h->endpoint);
    }
    if (r->status == DOWNLOAD_HTTP && s == 401 && !h->token &&
        strcmp(r->error_code, "RepoNotFound") == 0) { // the hub's answer to anonymous clients
        return fail(h,
                    "%s: repository not found on %s (HTTP 401); if it is private or gated, "
                    "set HF_TOKEN to an access token that can read it",
                    h->repo, h->endpoint);
    }
    if (r->status == DOWNLOAD_HTTP && (s == 401 || s == 403)) {
        return fail_auth(h, s, h->repo);
    }
    if (r->status == DOWNLOAD_HTTP && s >= 500) {
        return fail(h,
                    "%s: %s answered HTTP %ld (server error) when listing files; try again "
                    "later",
                    h->repo, h->endpoint, s);
    }
    return fail(h, "%s: listing files on %s failed: %s", h->repo, h->endpoint, r->message);
}

static int fail_download(const hub *h, const hub_file *f, const download_result *r) {
    long s = r->http_status;
    if (r->status == DOWNLOAD_HTTP && s == 404) {
        return fail(h, "%s: %s: not found on %s (HTTP 404)", h->repo, f->path, h->endpoint);
    }
    if (r->status == DOWNLOAD_HTTP && (s == 401 || s == 403)) {
        char what[512];
        snprintf(what, sizeof what, "%s: %s", h->repo, f->path);
        return fail_auth(h, s, what);
    }
    if (r->status == DOWNLOAD_UNREACHABLE) {
        return fail(h, "%s: %s: cannot download from %s: %s", h->repo, f->path, h->endpoint,
                    r->message);
    }
    return fail(h, "%s: %s: %s", h->repo, f->path, r->message);
}

/* --- bringing the snapshot up to date -------------------------------------------- */

static void expect_of(const hub_file *f, download_expect *e) {
    e->size = f->size;
    e->sha256 = f->lfs ? f->oid : NULL;
    e->git_sha1 = !f->lfs && f->oid[0] ? f->oid : NULL;
}

/* True when the snapshot already holds f: the manifest vouches for the same size and
 * hash, or the file on disk hashes right. */
static bool up_to_date(const hub *h, const hub_files *cached, const hub_file *f) {
    char path[PATH_MAX + 256];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", h->snapshot, f->path);
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != f->size) {
        return false;
    }
    const hub_file *c = hub_files_find(cached, f->path);
    if (c && c->size == f->size && c->lfs == f->lfs && strcasecmp(c->oid, f->oid) == 0) {
        return true;
    }
    download_expect e;
    char got[80];
    expect_of(f, &e);
    return download_check(path, &e, got, sizeof got);
}

static void record(hub *h, const hub_file *f) {
    int i = 0;
    while (i < h->cached.n && strcmp(h->cached.items[i].path, f->path) != 0) {
        i++;
    }
    if (i < HUB_MAX_FILES) {
        h->cached.items[i] = *f;
        h->cached.n += i == h->cached.n;
    }
}

static int check_required(const hub *h) {
    bool shards = false;
    for (int i = 0; i < h->listed.n; i++) {
        shards |=
            strchr(h->listed.items[i].path, '/') == NULL && hub_is_shard(h->listed.items[i].path);
    }
    const hub_files *listed = &h->listed;
    if (!hub_files_find(listed, "config.json")) {
        return fail(h, "%s@%s has no config.json: not a Qwen3-TTS checkpoint", h->repo,
                    h->revision);
    }
    if (!hub_files_find(listed, "model.safetensors") &&
        !(shards && hub_files_find(listed, "model.safetensors.index.json"))) {
        return fail(h, "%s@%s has no model.safetensors: not a Qwen3-TTS checkpoint", h->repo,
                    h->revision);
    }
    return 0;
}

static uint64_t partial_size(const hub *h, const hub_file *f) {
    char path[PATH_MAX + 256];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s.incomplete", h->snapshot, f->path);
    return stat(path, &sb) == 0 && (uint64_t)sb.st_size <= f->size ? (uint64_t)sb.st_size : 0;
}

static int check_space(const hub *h, uint64_t need) {
    struct statvfs vfs;
    if (statvfs(h->snapshot, &vfs) != 0) {
        return 0; // unknown: the writes will tell
    }
    uint64_t avail = (uint64_t)vfs.f_bavail * (uint64_t)vfs.f_frsize;
    if (need > avail) {
        char n_need[32], n_avail[32];
        download_format_size(n_need, sizeof n_need, need);
        download_format_size(n_avail, sizeof n_avail, avail);
        return fail(h,
                    "not enough disk space in %s: %s needs %s, %s free (set KZTTS_CACHE to "
                    "another disk)",
                    h->snapshot, h->repo, n_need, n_avail);
    }
    return 0;
}

/* Removes files of the old manifest that the listing no longer has. */
static void remove_stale(const hub *h) {
    for (int i = 0; i < h->cached.n; i++) {
        const hub_file *c = &h->cached.items[i];
        if (!hub_files_find(&h->listed, c->path)) {
            char path[PATH_MAX + 256];
            snprintf(path, sizeof path, "%s/%s", h->snapshot, c->path);
            unlink(path);
        }
    }
}

/* Downloads one file into the snapshot and records it in the manifest (marked
 * incomplete until every file is in). label is the padded name for the progress bar. */
static int fetch_one(hub *h, const hub_file *f, const char *label) {
    char dest[PATH_MAX + 256], url[4096], rev[768];
    snprintf(dest, sizeof dest, "%s/%s", h->snapshot, f->path);
    char *slash = strrchr(dest, '/');
    *slash = '\0';
    if (make_dirs(dest) != 0) {
        return fail(h, "cannot create %s: %s", dest, strerror(errno));
    }
    *slash = '/';
    encode_revision(rev, sizeof rev, h->revision);
    snprintf(url, sizeof url, "%s/%s/resolve/%s/%s", h->endpoint, h->repo, rev, f->path);
    download_expect e;
    download_result r;
    expect_of(f, &e);
    if (download_file(h->dl, url, dest, label, &e, &r) != DOWNLOAD_OK) {
        return fail_download(h, f, &r);
    }
    record(h, f);
    h->cached.complete = false;
    return manifest_save(h);
}

static int fetch_files(hub *h) {
    bool todo[HUB_MAX_FILES] = {false};
    int n_todo = 0, width = 0; // width: the longest name, to align the progress bars
    uint64_t need = 0, total = 0;
    for (int i = 0; i < h->listed.n; i++) {
        const hub_file *f = &h->listed.items[i];
        todo[i] = !up_to_date(h, &h->cached, f);
        if (todo[i]) {
            n_todo++;
            need += f->size - partial_size(h, f);
            total += f->size;
            width = (int)strlen(f->path) > width ? (int)strlen(f->path) : width;
        }
    }
    if (n_todo > 0 && check_space(h, need) != 0) {
        return -1;
    }
    if (n_todo > 0 && h->tty) {
        char n_total[32];
        download_format_size(n_total, sizeof n_total, total);
        fprintf(stderr, "kztts: downloading %s@%s from %s (%d file%s, %s) into %s\n", h->repo,
                h->revision, h->endpoint, n_todo, n_todo > 1 ? "s" : "", n_total, h->snapshot);
    }
    bool changed = n_todo > 0 || !h->cached.complete || h->cached.n != h->listed.n;
    for (int i = 0; i < h->listed.n; i++) {
        const hub_file *f = &h->listed.items[i];
        if (!todo[i]) {
            const hub_file *c = hub_files_find(&h->cached, f->path);
            changed |= !c || strcasecmp(c->oid, f->oid) != 0;
            continue;
        }
        char label[sizeof f->path];
        snprintf(label, sizeof label, "%-*s", width, f->path);
        if (fetch_one(h, f, label) != 0) {
            return -1;
        }
    }
    if (!changed) {
        return 0;
    }
    remove_stale(h);
    h->cached = h->listed;
    h->cached.complete = true;
    return manifest_save(h);
}

/* True when the cache holds a complete copy; waits for a process writing it. */
static bool cached_copy_ready(hub *h) {
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/.lock", h->repo_dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    while (fd >= 0 && flock(fd, LOCK_SH) != 0 && errno == EINTR) {
    }
    manifest_load(h);
    bool ready = cache_complete(h);
    if (fd >= 0) {
        close(fd);
    }
    return ready;
}

static int use_cache_after(hub *h, const download_result *r) {
    long s = r->http_status;
    bool transient = r->status == DOWNLOAD_UNREACHABLE || r->status == DOWNLOAD_TRANSFER ||
                     (r->status == DOWNLOAD_HTTP && (s >= 500 || s == 408 || s == 429));
    if (!transient || !cached_copy_ready(h)) {
        return fail_listing(h, r);
    }
    if (r->status == DOWNLOAD_UNREACHABLE) {
        fprintf(stderr,
                "kztts %s: warning: cannot reach %s (%s); using the cached copy of %s@%s "
                "in %s\n",
                h->cmd, h->endpoint, r->message, h->repo, h->revision, h->snapshot);
    } else {
        fprintf(stderr,
                "kztts %s: warning: listing %s on %s failed (%s%ld); using the cached "
                "copy in %s\n",
                h->cmd, h->repo, h->endpoint, r->status == DOWNLOAD_HTTP ? "HTTP " : "", s,
                h->snapshot);
    }
    return 0;
}

/* Lists the repo, then, holding the repo's lock, brings the snapshot up to date. The
 * cache is only touched once the listing has succeeded, so a mistyped id leaves no
 * trace in it. */
static int sync_online(hub *h) {
    download_opts opts = {.token = h->token,
                          .stall_s = h->stall_s,
                          .progress = h->tty,
                          .retry_wait_ms = h->retry_wait_ms};
    h->dl = download_new(&opts);
    if (!h->dl) {
        return fail(h, "cannot start libcurl");
    }
    download_result r;
    int rc = list_repo(h, &r);
    if (rc != 0) {
        return rc == -1 ? use_cache_after(h, &r) : -1;
    }
    if (check_required(h) != 0) {
        return -1;
    }
    if (make_dirs(h->snapshot) != 0) {
        return fail(h, "cannot create the cache directory %s: %s", h->snapshot, strerror(errno));
    }
    int lock_fd = lock_repo(h);
    if (lock_fd < 0) {
        return fail(h, "cannot lock %s/.lock: %s", h->repo_dir, strerror(errno));
    }
    manifest_load(h); // after the lock: another process may have just finished
    rc = fetch_files(h);
    close(lock_fd);
    return rc;
}

static int sync_repo(hub *h) {
    if (h->offline) {
        return cached_copy_ready(h) ? 0
                                    : fail(h,
                                           "HF_HUB_OFFLINE is set and %s@%s is not in the "
                                           "cache (%s)",
                                           h->repo, h->revision, h->snapshot);
    }
    return sync_online(h);
}

int hub_resolve(const char *cmd, const char *arg, char **dir) {
    *dir = NULL;
    char repo[256], revision[256];
    if (is_local(arg) || parse_ref(arg, repo, sizeof repo, revision, sizeof revision) != 0) {
        *dir = strdup(arg);
        if (!*dir) {
            fprintf(stderr, "kztts %s: out of memory\n", cmd);
            return -1;
        }
        return 0;
    }
    hub *h = calloc(1, sizeof *h);
    if (!h) {
        fprintf(stderr, "kztts %s: out of memory\n", cmd);
        return -1;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        free(h);
        fprintf(stderr, "kztts %s: cannot initialise libcurl\n", cmd);
        return -1;
    }
    int rc = hub_init(h, cmd, repo, revision);
    rc = rc == 0 ? sync_repo(h) : rc;
    if (rc == 0 && !(*dir = strdup(h->snapshot))) {
        rc = fail(h, "out of memory");
    }
    download_free(h->dl);
    curl_global_cleanup();
    free(h);
    return rc;
}
