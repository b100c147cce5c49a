/*
 * voices.c - the uploaded voices in --voices-dir (see voices.h): NAME.kzvoice (the voice
 * file, kz_voice_save) and NAME.json ({"name","created_at","consent","mode","ref_text"?,
 * "speaker_description"?}).
 *
 * Names are case-insensitive: NAME is the voice's name in lower case (voices_key), so
 * "Alice" and "alice" are one voice; entries with upper-case letters are not voices.
 * Nothing is cached: every list, get and delete reads the directory, so replicas sharing
 * it agree. The order of the file operations makes a voice appear and vanish whole:
 *   create: the voice to a hidden temporary file (kz_voice_save, fsync'd) and the
 *           metadata to another (fsync'd) -> link(voice temp, NAME.kzvoice), which fails
 *           when the name exists (409), so two creators never both win -> rename(json
 *           temp, NAME.json) -> fsync the directory -> unlink the voice temp.
 *   delete: unlink NAME.json (the voice is gone for readers) -> unlink NAME.kzvoice
 *           (the name is free again) -> fsync the directory.
 *   readers: a voice is visible when NAME.json exists and NAME.kzvoice reads; list walks
 *           the *.kzvoice files and shows those with readable metadata.
 * A NAME.kzvoice without NAME.json is a creation in progress (or one a crash cut short):
 * invisible, its name taken until DELETE removes it. Temporary files start with '.',
 * which no voice name does; those older than an hour are removed when the store opens.
 */
#include "voices.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "json_parse.h"

#define MAX_NAME VOICES_MAX_NAME
#define MAX_META_BYTES ((size_t)8 << 20) /* a transcript is at most 1 MiB, escaped */
#define STALE_TEMP_SECONDS 3600

struct voices {
    const kz_model *model;
    char *dir; /* NULL: uploads off */
};

bool voices_name_ok(const char *name) {
    if (!name || name[0] == '\0' || name[0] == '.') {
        return false;
    }
    size_t n = 0;
    for (const char *c = name; *c; c++, n++) {
        bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                  (*c >= '0' && *c <= '9') || *c == '_' || *c == '.' || *c == '-';
        if (!ok || n >= MAX_NAME) {
            return false;
        }
    }
    return true;
}

bool voices_key(const char *name, char key[MAX_NAME + 1]) {
    if (!voices_name_ok(name)) {
        key[0] = '\0';
        return false;
    }
    size_t i = 0;
    for (; name[i]; i++) {
        key[i] = name[i] >= 'A' && name[i] <= 'Z' ? (char)(name[i] - 'A' + 'a') : name[i];
    }
    key[i] = '\0';
    return true;
}

bool voices_enabled(const voices *v) {
    return v && v->dir;
}

const kz_model *voices_model(const voices *v) {
    return v->model;
}

void voice_meta_clear(voice_meta *m) {
    if (m) {
        free(m->consent);
        free(m->ref_text);
        free(m->speaker_description);
        memset(m, 0, sizeof *m);
    }
}

/* A name from a request, safe to quote in a message: printable ASCII, at most 64. */
static const char *quoted(const char *name, char out[MAX_NAME + 4]) {
    size_t o = 0;
    for (const char *c = name ? name : ""; *c && o < MAX_NAME; c++) {
        out[o++] = *c >= 0x20 && *c < 0x7f ? *c : '?';
    }
    if (name && strlen(name) > MAX_NAME) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
    return out;
}

static int disabled(http_error *e) {
    return http_error_set(e, 400, "invalid_request_error", NULL, "voices_disabled",
                          "this server stores no voices: start kztts serve with --voices-dir "
                          "DIR to upload and delete them");
}

static int not_found(http_error *e, const char *param, const char *name) {
    char q[MAX_NAME + 4];
    return http_error_set(e, 404, "invalid_request_error", param, "voice_not_found",
                          "no voice named '%s'", quoted(name, q));
}

static int io_error(http_error *e, const char *what, const char *path) {
    return http_error_set(e, 500, "server_error", NULL, NULL, "voices: cannot %s %s: %s", what,
                          path, strerror(errno));
}

/* dir/prefix NAME suffix, malloc'ed (NULL when out of memory). */
static char *path_of(const voices *v, const char *prefix, const char *name, const char *suffix) {
    size_t n = strlen(v->dir) + strlen(prefix) + strlen(name) + strlen(suffix) + 2;
    char *p = malloc(n);
    if (p) {
        snprintf(p, n, "%s/%s%s%s", v->dir, prefix, name, suffix);
    }
    return p;
}

/* mkdir -p: each missing component of path, mode 0755. */
static int make_dirs(const char *path, char *err, size_t n_err) {
    char *p = strdup(path);
    if (!p) {
        snprintf(err, n_err, "--voices-dir %s: out of memory", path);
        return -1;
    }
    for (char *c = p + 1;; c++) {
        if (*c == '/' || *c == '\0') {
            char saved = *c;
            *c = '\0';
            if (mkdir(p, 0755) != 0 && errno != EEXIST) {
                snprintf(err, n_err, "--voices-dir %s: cannot create %s: %s", path, p,
                         strerror(errno));
                free(p);
                return -1;
            }
            *c = saved;
            if (saved == '\0') {
                break;
            }
        }
    }
    free(p);
    return 0;
}

/* Removes temporary files a crashed writer left: hidden, ".tmp-" in the name, old. */
static void remove_stale_temps(const voices *v) {
    DIR *d = opendir(v->dir);
    if (!d) {
        return;
    }
    const time_t now = time(NULL);
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        if (ent->d_name[0] != '.' || !strstr(ent->d_name, ".tmp-")) {
            continue;
        }
        char *p = path_of(v, "", ent->d_name, "");
        struct stat st;
        if (p && lstat(p, &st) == 0 && S_ISREG(st.st_mode) &&
            now - st.st_mtime > STALE_TEMP_SECONDS) {
            unlink(p);
        }
        free(p);
    }
    closedir(d);
}

voices *voices_open(const kz_model *model, const char *dir, char *err, size_t n_err) {
    voices *v = calloc(1, sizeof *v);
    if (!v) {
        snprintf(err, n_err, "voices: out of memory");
        return NULL;
    }
    v->model = model;
    if (!dir) {
        return v;
    }
    struct stat st;
    if (dir[0] == '\0' || make_dirs(dir, err, n_err) != 0) {
        if (dir[0] == '\0') {
            snprintf(err, n_err, "--voices-dir: empty path");
        }
        free(v);
        return NULL;
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || access(dir, R_OK | W_OK | X_OK) != 0) {
        snprintf(err, n_err, "--voices-dir %s: not a directory this process can read and write",
                 dir);
        free(v);
        return NULL;
    }
    if (!(v->dir = strdup(dir))) {
        snprintf(err, n_err, "voices: out of memory");
        free(v);
        return NULL;
    }
    remove_stale_temps(v);
    return v;
}

void voices_free(voices *v) {
    if (v) {
        free(v->dir);
        free(v);
    }
}

static void sync_dir(const voices *v) {
    int fd = open(v->dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd); // the renames and unlinks survive a crash; nothing to do if it fails
        close(fd);
    }
}

bool voices_exists(voices *v, const char *name) {
    char key[MAX_NAME + 1];
    if (!voices_enabled(v) || !voices_key(name, key)) {
        return false;
    }
    char *p = path_of(v, "", key, ".kzvoice");
    struct stat st;
    bool exists = p && lstat(p, &st) == 0;
    free(p);
    return exists;
}

int voices_get(voices *v, const char *name, kz_voice **out, http_error *e) {
    *out = NULL;
    char key[MAX_NAME + 1];
    if (!voices_enabled(v) || !voices_key(name, key)) {
        return not_found(e, "voice", name);
    }
    char *meta = path_of(v, "", key, ".json"), *file = path_of(v, "", key, ".kzvoice");
    struct stat st;
    int rc = 0;
    if (!meta || !file) {
        rc = http_error_set(e, 500, "server_error", NULL, NULL, "voices: out of memory");
    } else if (stat(meta, &st) != 0) {
        rc = not_found(e, "voice", name); // absent, being created or being deleted
    } else if (kz_voice_load(file, out) != KZ_OK) {
        rc = stat(file, &st) != 0 && errno == ENOENT
                 ? not_found(e, "voice", name)
                 : http_error_set(e, 500, "server_error", NULL, NULL,
                                  "uploaded voice '%s' cannot be read: %s", name, kz_last_error());
    } else if (v->model && kz_voice_check(v->model, *out) != KZ_OK) {
        rc = http_error_set(e, 400, "invalid_request_error", "voice", "voice_model_mismatch",
                            "voice '%s': %s", name, kz_last_error());
        kz_voice_free(*out);
        *out = NULL;
    }
    free(meta);
    free(file);
    return rc;
}

/* ---- metadata ---- */

static char *read_small_file(const char *path, size_t max_bytes) {
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0) {
        return NULL;
    }
    char *text = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size <= max_bytes &&
        (text = malloc((size_t)st.st_size + 1)) != NULL) {
        size_t got = 0;
        ssize_t r = 1;
        while (got < (size_t)st.st_size && (r = read(fd, text + got, (size_t)st.st_size - got)) > 0) {
            got += (size_t)r;
        }
        if (got != (size_t)st.st_size) {
            free(text);
            text = NULL;
        } else {
            text[got] = '\0';
        }
    }
    close(fd);
    return text;
}

static char *dup_string(const cJSON *item) {
    return cJSON_IsString(item) && item->valuestring ? strdup(item->valuestring) : NULL;
}

/* NAME.json into *m. 0, or -1 when it is missing, unreadable or not a voice's metadata. */
static int read_meta(const voices *v, const char *name, voice_meta *m) {
    memset(m, 0, sizeof *m);
    char *path = path_of(v, "", name, ".json");
    char *text = path ? read_small_file(path, MAX_META_BYTES) : NULL;
    free(path);
    cJSON *root = text ? json_parse(text, strlen(text) + 1, NULL, false) : NULL;
    free(text);
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, "name");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "created_at");
    const cJSON *mode = cJSON_GetObjectItemCaseSensitive(root, "mode");
    int rc = -1;
    if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0 && cJSON_IsNumber(t) &&
        cJSON_IsString(mode) &&
        (strcmp(mode->valuestring, "icl") == 0 || strcmp(mode->valuestring, "xvector") == 0)) {
        snprintf(m->name, sizeof m->name, "%s", name);
        m->created_at = (int64_t)t->valuedouble;
        m->icl = strcmp(mode->valuestring, "icl") == 0;
        m->consent = dup_string(cJSON_GetObjectItemCaseSensitive(root, "consent"));
        m->ref_text = dup_string(cJSON_GetObjectItemCaseSensitive(root, "ref_text"));
        m->speaker_description =
            dup_string(cJSON_GetObjectItemCaseSensitive(root, "speaker_description"));
        rc = m->consent && (!m->icl || m->ref_text) ? 0 : -1;
    }
    cJSON_Delete(root);
    if (rc != 0) {
        voice_meta_clear(m);
    }
    return rc;
}

/* The metadata's JSON text (malloc'ed), or NULL when out of memory. */
static char *meta_json(const voice_meta *m) {
    cJSON *root = cJSON_CreateObject();
    bool ok = root && cJSON_AddStringToObject(root, "name", m->name) &&
              cJSON_AddNumberToObject(root, "created_at", (double)m->created_at) &&
              cJSON_AddStringToObject(root, "consent", m->consent ? m->consent : "") &&
              cJSON_AddStringToObject(root, "mode", m->icl ? "icl" : "xvector") &&
              (!m->icl || cJSON_AddStringToObject(root, "ref_text", m->ref_text ? m->ref_text : "")) &&
              (!m->speaker_description ||
               cJSON_AddStringToObject(root, "speaker_description", m->speaker_description));
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return text;
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const voice_meta *)a)->name, ((const voice_meta *)b)->name);
}

/* The voice name of a directory entry NAME.kzvoice into name, or false. */
static bool entry_name(const char *entry, char name[MAX_NAME + 1]) {
    static const char SUFFIX[] = ".kzvoice";
    size_t n = strlen(entry), n_suffix = sizeof SUFFIX - 1;
    if (n <= n_suffix || n - n_suffix > MAX_NAME || strcmp(entry + n - n_suffix, SUFFIX) != 0) {
        return false;
    }
    memcpy(name, entry, n - n_suffix);
    name[n - n_suffix] = '\0';
    char key[MAX_NAME + 1];
    return voices_key(name, key) && strcmp(key, name) == 0; // stored names are lower case
}

int voices_list(voices *v, voice_meta **out, size_t *n_out, http_error *e) {
    *out = NULL;
    *n_out = 0;
    if (!voices_enabled(v)) {
        return 0;
    }
    DIR *d = opendir(v->dir);
    if (!d) {
        return io_error(e, "read the folder", v->dir);
    }
    voice_meta *list = NULL;
    size_t n = 0, cap = 0;
    struct dirent *ent;
    char name[MAX_NAME + 1];
    while ((ent = readdir(d)) != NULL) {
        if (!entry_name(ent->d_name, name)) {
            continue;
        }
        if (n == cap) {
            voice_meta *grown = realloc(list, (cap = cap ? 2 * cap : 16) * sizeof *list);
            if (!grown) {
                break; // the list so far; out of memory shows elsewhere soon enough
            }
            list = grown;
        }
        if (read_meta(v, name, &list[n]) == 0) {
            n++;
        }
    }
    closedir(d);
    if (n > 1) {
        qsort(list, n, sizeof *list, by_name);
    }
    *out = list;
    *n_out = n;
    return 0;
}

/* ---- create and delete ---- */

/* A new empty hidden file dir/.NAME<suffix>.tmp-XXXXXX (mode 0644); its path in *path. */
static int make_temp(const voices *v, const char *name, const char *suffix, char **path) {
    *path = NULL;
    char *dot_name = path_of(v, ".", name, suffix);
    size_t n = dot_name ? strlen(dot_name) + sizeof ".tmp-XXXXXX" : 0;
    char *p = dot_name ? malloc(n) : NULL;
    if (!p) {
        free(dot_name);
        errno = ENOMEM;
        return -1;
    }
    snprintf(p, n, "%s.tmp-XXXXXX", dot_name);
    free(dot_name);
    int fd = mkstemp(p);
    if (fd < 0) {
        free(p);
        return -1;
    }
    if (fchmod(fd, 0644) != 0) {
        close(fd);
        unlink(p);
        free(p);
        return -1;
    }
    *path = p;
    return fd;
}

static int write_all(int fd, const char *bytes, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, bytes, n);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return -1;
        }
        bytes += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The metadata, written and fsync'd in a temporary file; its path in *path. */
static int write_meta_temp(const voices *v, const voice_meta *m, char **path, http_error *e) {
    char *text = meta_json(m);
    if (!text) {
        return http_error_set(e, 500, "server_error", NULL, NULL, "voices: out of memory");
    }
    int fd = make_temp(v, m->name, ".json", path);
    int rc = 0;
    if (fd < 0) {
        rc = io_error(e, "create a temporary file in", v->dir);
    } else if (write_all(fd, text, strlen(text)) != 0 || fsync(fd) != 0) {
        rc = io_error(e, "write", *path);
    }
    if (fd >= 0 && close(fd) != 0 && rc == 0) {
        rc = io_error(e, "write", *path);
    }
    free(text);
    if (rc != 0 && *path) {
        unlink(*path);
        free(*path);
        *path = NULL;
    }
    return rc;
}

/* The voice file, written complete (kz_voice_save) into a temporary file. */
static int write_voice_temp(const voices *v, const char *name, const kz_voice *voice,
                            char **path, http_error *e) {
    int fd = make_temp(v, name, ".kzvoice", path);
    if (fd < 0) {
        return io_error(e, "create a temporary file in", v->dir);
    }
    close(fd);
    if (kz_voice_save(voice, *path) != KZ_OK) {
        int rc = http_error_set(e, 500, "server_error", NULL, NULL, "voices: %s", kz_last_error());
        unlink(*path);
        free(*path);
        *path = NULL;
        return rc;
    }
    return 0;
}

static int exists_error(http_error *e, const char *name) {
    char q[MAX_NAME + 4];
    return http_error_set(e, 409, "invalid_request_error", "name", "voice_exists",
                          "a voice named '%s' exists already (names are case-insensitive; "
                          "DELETE /v1/audio/voices/%s first)", quoted(name, q), quoted(name, q));
}

/* NAME.kzvoice from the temporary voice file, only if the name is free. link() makes
 * that one atomic step; a file system without hard links gets a check and a rename. */
static int claim_name(const char *temp, const char *file, const char *name, http_error *e) {
    if (link(temp, file) == 0) {
        return 0;
    }
    if (errno == EEXIST) {
        return exists_error(e, name);
    }
    if (errno != EPERM && errno != ENOTSUP && errno != ENOSYS && errno != EOPNOTSUPP) {
        return io_error(e, "create", file);
    }
    struct stat st;
    if (lstat(file, &st) == 0) {
        return exists_error(e, name);
    }
    return rename(temp, file) == 0 ? 0 : io_error(e, "create", file);
}

int voices_check_new(voices *v, const char *name, http_error *e) {
    char key[MAX_NAME + 1];
    if (!voices_key(name, key)) {
        char q[MAX_NAME + 4];
        return http_error_set(e, 400, "invalid_request_error", "name", "invalid_value",
                              "voice name '%s' is not valid: use 1-64 letters, digits, '_', '.' "
                              "or '-', not starting with '.'", quoted(name, q));
    }
    return voices_exists(v, key) ? exists_error(e, key) : 0;
}

int voices_create(voices *v, const kz_voice *voice, voice_meta *meta, http_error *e) {
    if (!voices_enabled(v)) {
        return disabled(e);
    }
    const int checked = voices_check_new(v, meta->name, e);
    if (checked != 0) {
        return checked;
    }
    char key[MAX_NAME + 1];
    voices_key(meta->name, key);
    snprintf(meta->name, sizeof meta->name, "%s", key);
    meta->created_at = (int64_t)time(NULL);
    char *voice_temp = NULL, *meta_temp = NULL;
    char *file = path_of(v, "", meta->name, ".kzvoice"), *json = path_of(v, "", meta->name, ".json");
    int rc = !file || !json ? http_error_set(e, 500, "server_error", NULL, NULL, "out of memory")
                            : write_voice_temp(v, meta->name, voice, &voice_temp, e);
    if (rc == 0) {
        rc = write_meta_temp(v, meta, &meta_temp, e);
    }
    if (rc == 0) {
        rc = claim_name(voice_temp, file, meta->name, e);
    }
    if (rc == 0 && rename(meta_temp, json) != 0) {
        rc = io_error(e, "create", json);
        unlink(file); // undo the claim: no voice without metadata stays behind
    }
    if (rc == 0) {
        sync_dir(v);
    }
    if (voice_temp) {
        unlink(voice_temp); // after link() the voice lives on under its name
    }
    if (meta_temp && rc != 0) {
        unlink(meta_temp);
    }
    free(voice_temp);
    free(meta_temp);
    free(file);
    free(json);
    return rc;
}

int voices_delete(voices *v, const char *name, http_error *e) {
    if (!voices_enabled(v)) {
        return disabled(e);
    }
    char key[MAX_NAME + 1];
    if (!voices_key(name, key)) {
        return not_found(e, NULL, name);
    }
    char *file = path_of(v, "", key, ".kzvoice"), *json = path_of(v, "", key, ".json");
    int rc = 0;
    if (!file || !json) {
        rc = http_error_set(e, 500, "server_error", NULL, NULL, "voices: out of memory");
    } else if (unlink(json) != 0 && errno != ENOENT) {
        rc = io_error(e, "delete", json);
    } else if (unlink(file) != 0) {
        rc = errno == ENOENT ? not_found(e, NULL, name) : io_error(e, "delete", file);
    }
    if (rc == 0) {
        sync_dir(v);
    }
    free(file);
    free(json);
    return rc;
}
