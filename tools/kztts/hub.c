/*
 * hub.c - `-m owner/name[@revision]` through a download cache (see hub.h).
 *
 * Flow for a repo id:
 *   validate the id -> cache paths
 *   -> HF_HUB_OFFLINE: the cached copy if its manifest says complete, else fail
 *   -> GET {endpoint}/api/models/{repo}/tree/{revision}?recursive=true, following
 *      Link rel="next" pages; unreachable or 5xx: the cached copy if complete
 *   -> keep the files kztts reads; config.json and the weights must be there
 *   -> flock CACHE/models/OWNER--NAME/.lock, read REVISION.manifest (files verified
 *      earlier: path, size, hash)
 *   -> skip files on disk whose size and hash match (manifest entry, else re-hashed)
 *   -> check free space -> download.c fetches the rest, manifest saved after each
 *   -> delete files of the previous manifest the repo no longer has -> complete.
 *
 * The tree API lists entries {type: "file"|"directory", path, size, oid, lfs: {oid,
 * size, pointerSize}}: oid is the git blob sha1 of what git stores, so for an LFS
 * file it hashes the pointer, and lfs.oid is the sha256 of the real content.
 * Files come from {endpoint}/{repo}/resolve/{revision}/{path}, which redirects LFS
 * files to a CDN. Only names from a fixed list are fetched, so a listing cannot
 * steer writes outside the snapshot directory.
 */
#include "hub.h"

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

#include <cjson/cJSON.h>

#include "download.h"

enum { MAX_FILES = 64, MAX_PAGES = 1000, DEFAULT_STALL_S = 30 };
#define TREE_MAX_BYTES ((size_t)64 << 20)
#define MANIFEST_MAX_BYTES ((long)1 << 20)
#define DEFAULT_ENDPOINT "https://huggingface.co"

/* The files kztts reads from a checkpoint; shards match is_shard(). */
static const char *const wanted_names[] = {
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "model.safetensors.index.json",
    "vocab.json",
    "merges.txt",
    "tokenizer_config.json",
    "preprocessor_config.json",
    "speech_tokenizer/config.json",
    "speech_tokenizer/model.safetensors",
    "speech_tokenizer/model.safetensors.index.json",
    "speech_tokenizer/preprocessor_config.json",
};

typedef struct hub_file {
    char path[128]; /* path inside the repo */
    uint64_t size;  /* bytes */
    char oid[72];   /* lfs: sha256 of the content; else git blob sha1 (may be "") */
    bool lfs;
} hub_file;

typedef struct hub_files {
    hub_file items[MAX_FILES];
    int n;
    bool complete; /* every file of the listing is present and verified */
} hub_files;

typedef struct hub {
    const char *cmd;
    char endpoint[1024]; /* no trailing slash */
    const char *token;   /* HF_TOKEN or NULL */
    bool offline;        /* HF_HUB_OFFLINE */
    bool tty;            /* stderr is a terminal: progress and notes */
    long stall_s;
    char repo[256]; /* owner/name */
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

/* model-00001-of-00002.safetensors, at the top or under speech_tokenizer/. */
static bool is_shard(const char *path) {
    static const char pattern[] = "model-#####-of-#####.safetensors";
    if (strncmp(path, "speech_tokenizer/", 17) == 0) {
        path += 17;
    }
    if (strlen(path) != sizeof pattern - 1) {
        return false;
    }
    for (size_t i = 0; pattern[i]; i++) {
        bool ok = pattern[i] == '#' ? path[i] >= '0' && path[i] <= '9' : path[i] == pattern[i];
        if (!ok) {
            return false;
        }
    }
    return true;
}

static bool wanted(const char *path) {
    for (size_t i = 0; i < sizeof wanted_names / sizeof wanted_names[0]; i++) {
        if (strcmp(path, wanted_names[i]) == 0) {
            return true;
        }
    }
    return is_shard(path);
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
    h->tty = isatty(STDERR_FILENO);
    h->stall_s = DEFAULT_STALL_S;
    const char *timeout = env_set("HF_HUB_DOWNLOAD_TIMEOUT");
    if (timeout) {
        char *end;
        double s = strtod(timeout, &end);
        if (*end == '\0' && s >= 1 && s <= 3600) {
            h->stall_s = (long)s;
        } else {
            fprintf(stderr,
                    "kztts %s: warning: ignoring HF_HUB_DOWNLOAD_TIMEOUT='%s' (want "
                    "seconds in [1, 3600])\n",
                    cmd, timeout);
        }
    }
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

static const hub_file *find_file(const hub_files *f, const char *path) {
    for (int i = 0; i < f->n; i++) {
        if (strcmp(f->items[i].path, path) == 0) {
            return &f->items[i];
        }
    }
    return NULL;
}

/* Reads one {path, size, oid, lfs} object (a manifest or tree entry) into out.
 * Returns false when a field is missing or malformed. */
static bool read_entry(const cJSON *e, hub_file *out) {
    const cJSON *path = cJSON_GetObjectItemCaseSensitive(e, "path");
    const cJSON *size = cJSON_GetObjectItemCaseSensitive(e, "size");
    const cJSON *oid = cJSON_GetObjectItemCaseSensitive(e, "oid");
    const cJSON *lfs = cJSON_GetObjectItemCaseSensitive(e, "lfs");
    if (cJSON_IsObject(lfs)) { // tree entry of an LFS file: size and sha256 of the content
        size = cJSON_GetObjectItemCaseSensitive(lfs, "size");
        oid = cJSON_GetObjectItemCaseSensitive(lfs, "oid");
    }
    if (!cJSON_IsString(path) || strlen(path->valuestring) >= sizeof out->path ||
        !cJSON_IsNumber(size) || size->valuedouble < 0 || size->valuedouble > 9.0e15 ||
        size->valuedouble != (double)(uint64_t)size->valuedouble) {
        return false;
    }
    memset(out, 0, sizeof *out);
    snprintf(out->path, sizeof out->path, "%s", path->valuestring);
    out->size = (uint64_t)size->valuedouble;
    out->lfs = cJSON_IsObject(lfs) || cJSON_IsTrue(lfs);
    const char *hex = cJSON_IsString(oid) ? oid->valuestring : "";
    size_t n_hex = strspn(hex, "0123456789abcdefABCDEF");
    size_t want = out->lfs ? 64 : 40;
    if (n_hex == want && hex[n_hex] == '\0') {
        snprintf(out->oid, sizeof out->oid, "%s", hex);
    } else if (out->lfs) {
        return false; // an LFS entry without its sha256 cannot be verified
    }
    return true;
}

static void manifest_load(hub *h) {
    memset(&h->cached, 0, sizeof h->cached);
    FILE *f = fopen(h->manifest, "rb");
    if (!f) {
        return;
    }
    char *text = malloc((size_t)MANIFEST_MAX_BYTES + 1);
    size_t n = text ? fread(text, 1, (size_t)MANIFEST_MAX_BYTES, f) : 0;
    fclose(f);
    if (!text) {
        return;
    }
    text[n] = '\0';
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *repo = cJSON_GetObjectItemCaseSensitive(root, "repo");
    const cJSON *rev = cJSON_GetObjectItemCaseSensitive(root, "revision");
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(root, "files");
    if (cJSON_IsString(repo) && strcmp(repo->valuestring, h->repo) == 0 && cJSON_IsString(rev) &&
        strcmp(rev->valuestring, h->revision) == 0 && cJSON_IsArray(files)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, files) {
            hub_file file;
            if (h->cached.n < MAX_FILES && read_entry(e, &file) && wanted(file.path)) {
                h->cached.items[h->cached.n++] = file;
            }
        }
        h->cached.complete = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "complete"));
    }
    cJSON_Delete(root);
}

/* Writes h->cached atomically (temporary file + rename). Returns 0 or -1. */
static int manifest_save(const hub *h) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "repo", h->repo);
    cJSON_AddStringToObject(root, "revision", h->revision);
    cJSON_AddBoolToObject(root, "complete", h->cached.complete);
    cJSON *files = cJSON_AddArrayToObject(root, "files");
    for (int i = 0; i < h->cached.n && files; i++) {
        const hub_file *f = &h->cached.items[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "path", f->path);
        cJSON_AddNumberToObject(e, "size", (double)f->size);
        cJSON_AddStringToObject(e, "oid", f->oid);
        cJSON_AddBoolToObject(e, "lfs", f->lfs);
        cJSON_AddItemToArray(files, e);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", h->manifest, (long)getpid());
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
static int add_page(hub *h, const char *body) {
    cJSON *root = cJSON_Parse(body);
    if (!cJSON_IsArray(root)) {
        cJSON_Delete(root);
        return fail(h, "%s: unexpected answer from %s when listing files (not a JSON array)",
                    h->repo, h->endpoint);
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, root) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(e, "type");
        const cJSON *path = cJSON_GetObjectItemCaseSensitive(e, "path");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "file") != 0 ||
            !cJSON_IsString(path) || !wanted(path->valuestring) ||
            find_file(&h->listed, path->valuestring)) {
            continue;
        }
        hub_file f;
        if (!read_entry(e, &f)) {
            cJSON_Delete(root);
            return fail(h, "%s: malformed entry for %s in the listing from %s", h->repo,
                        path->valuestring, h->endpoint);
        }
        if (h->listed.n == MAX_FILES) {
            cJSON_Delete(root);
            return fail(h, "%s: more than %d weight files in the listing", h->repo, MAX_FILES);
        }
        h->listed.items[h->listed.n++] = f;
    }
    cJSON_Delete(root);
    return 0;
}

/* Lists the repo into h->listed. Returns 0, -1 for a download failure described by r,
 * or -2 for a failure already printed. */
static int list_repo(hub *h, download_result *r) {
    char rev[768], first[4096];
    encode_revision(rev, sizeof rev, h->revision);
    snprintf(first, sizeof first, "%s/api/models/%s/tree/%s?recursive=true", h->endpoint, h->repo,
             rev);
    char *url = strdup(first);
    memset(&h->listed, 0, sizeof h->listed);
    for (int page = 0; url; page++) {
        char *body = NULL, *next = NULL;
        download_status st = download_text(h->dl, url, TREE_MAX_BYTES, &body, &next, r);
        free(url);
        url = NULL;
        if (st != DOWNLOAD_OK) {
            return -1;
        }
        int rc = add_page(h, body);
        free(body);
        size_t n_endpoint = strlen(h->endpoint);
        if (rc == 0 && next &&
            (strncmp(next, h->endpoint, n_endpoint) != 0 || next[n_endpoint] != '/' ||
             page + 1 == MAX_PAGES)) {
            // The token goes with every page: never follow a link to another host.
            rc = fail(h, "%s: unexpected pagination link from %s", h->repo, h->endpoint);
        }
        if (rc != 0) {
            free(next);
            return -2;
        }
        url = next;
    }
    return 0;
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
    const hub_file *c = find_file(cached, f->path);
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
    if (i < MAX_FILES) {
        h->cached.items[i] = *f;
        h->cached.n += i == h->cached.n;
    }
}

static int check_required(const hub *h) {
    bool shards = false;
    for (int i = 0; i < h->listed.n; i++) {
        shards |= strchr(h->listed.items[i].path, '/') == NULL && is_shard(h->listed.items[i].path);
    }
    const hub_files *listed = &h->listed;
    if (!find_file(listed, "config.json")) {
        return fail(h, "%s@%s has no config.json: not a Qwen3-TTS checkpoint", h->repo,
                    h->revision);
    }
    if (!find_file(listed, "model.safetensors") &&
        !(shards && find_file(listed, "model.safetensors.index.json"))) {
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
        if (!find_file(&h->listed, c->path)) {
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
    bool todo[MAX_FILES] = {false};
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
            const hub_file *c = find_file(&h->cached, f->path);
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
    download_opts opts = {.token = h->token, .stall_s = h->stall_s, .progress = h->tty};
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
