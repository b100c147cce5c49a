/*
 * hub_files.c - the hub's tree listing and the cache manifest as hub_files (see
 * hub_files.h).
 *
 * A listing page is a JSON array of {type: "file"|"directory", path, size, oid,
 * lfs: {oid, size, pointerSize}}: oid is the git blob sha1 of what git stores, so for
 * an LFS file it hashes the pointer, and lfs.oid is the sha256 of the real content.
 *   text -> cJSON -> per entry: a file with a wanted path not yet listed?
 *        -> read_entry (path, size, hash; LFS: the lfs object's size and sha256)
 *        -> appended; the cJSON tree is freed after the last use of its strings.
 * The manifest is {repo, revision, complete, files: [{path, size, oid, lfs: bool}]},
 * read by the same read_entry.
 */
#include "hub_files.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "json_parse.h"

/* Largest size accepted: below 2^53, so every byte count is exact in a JSON double. */
#define MAX_SIZE 9.0e15

/* The files kztts reads from a checkpoint; shards match hub_is_shard(). */
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

bool hub_is_shard(const char *path) {
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

bool hub_wanted(const char *path) {
    for (size_t i = 0; i < sizeof wanted_names / sizeof wanted_names[0]; i++) {
        if (strcmp(path, wanted_names[i]) == 0) {
            return true;
        }
    }
    return hub_is_shard(path);
}

const hub_file *hub_files_find(const hub_files *f, const char *path) {
    for (int i = 0; i < f->n; i++) {
        if (strcmp(f->items[i].path, path) == 0) {
            return &f->items[i];
        }
    }
    return NULL;
}

/* Reads one {path, size, oid, lfs} object (a manifest or tree entry) into out.
 * Returns NULL, or what is wrong with the entry. */
static const char *read_entry(const cJSON *e, hub_file *out) {
    const cJSON *path = cJSON_GetObjectItemCaseSensitive(e, "path");
    const cJSON *size = cJSON_GetObjectItemCaseSensitive(e, "size");
    const cJSON *oid = cJSON_GetObjectItemCaseSensitive(e, "oid");
    const cJSON *lfs = cJSON_GetObjectItemCaseSensitive(e, "lfs");
    if (cJSON_IsObject(lfs)) { // tree entry of an LFS file: size and sha256 of the content
        size = cJSON_GetObjectItemCaseSensitive(lfs, "size");
        oid = cJSON_GetObjectItemCaseSensitive(lfs, "oid");
    }
    if (!cJSON_IsString(path) || strlen(path->valuestring) >= sizeof out->path) {
        return "no usable path";
    }
    if (!cJSON_IsNumber(size) || !(size->valuedouble >= 0 && size->valuedouble <= MAX_SIZE) ||
        size->valuedouble != (double)(uint64_t)size->valuedouble) {
        return "size is not a byte count";
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
        return "LFS entry without a sha256"; // its content could not be verified
    }
    return NULL;
}

/* Adds entry e when it is a wanted file not yet listed. Returns 0 or -1 (err set). */
static int add_entry(hub_files *listed, const cJSON *e, char *err, size_t n_err) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(e, "type");
    const cJSON *path = cJSON_GetObjectItemCaseSensitive(e, "path");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "file") != 0 || !cJSON_IsString(path) ||
        !hub_wanted(path->valuestring) || hub_files_find(listed, path->valuestring)) {
        return 0;
    }
    hub_file f;
    const char *why = read_entry(e, &f);
    if (why) { // the path is a wanted name, so it is short and printable
        snprintf(err, n_err, "malformed entry for %s (%s)", path->valuestring, why);
        return -1;
    }
    if (listed->n == HUB_MAX_FILES) {
        snprintf(err, n_err, "more than %d weight files", HUB_MAX_FILES);
        return -1;
    }
    listed->items[listed->n++] = f;
    return 0;
}

int hub_listing_add_page(hub_files *listed, const char *text, size_t n_bytes, char *err,
                         size_t n_err) {
    err[0] = '\0';
    if (strlen(text) != n_bytes) {
        snprintf(err, n_err, "a NUL byte in the JSON");
        return -1;
    }
    cJSON *root = json_parse(text, strlen(text) + 1, NULL, true);
    if (!cJSON_IsArray(root)) {
        cJSON_Delete(root);
        snprintf(err, n_err, "not a JSON array");
        return -1;
    }
    int rc = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, root) {
        if ((rc = add_entry(listed, e, err, n_err)) != 0) {
            break;
        }
    }
    cJSON_Delete(root); // err holds a copy of every string it names
    return rc;
}

void hub_manifest_parse(const char *text, const char *repo, const char *revision, hub_files *out) {
    memset(out, 0, sizeof *out);
    cJSON *root = json_parse(text, strlen(text) + 1, NULL, false);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(root, "repo");
    const cJSON *rev = cJSON_GetObjectItemCaseSensitive(root, "revision");
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(root, "files");
    if (cJSON_IsString(r) && strcmp(r->valuestring, repo) == 0 && cJSON_IsString(rev) &&
        strcmp(rev->valuestring, revision) == 0 && cJSON_IsArray(files)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, files) {
            hub_file file;
            if (out->n < HUB_MAX_FILES && !read_entry(e, &file) && hub_wanted(file.path) &&
                !hub_files_find(out, file.path)) {
                out->items[out->n++] = file;
            }
        }
        out->complete = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "complete"));
    }
    cJSON_Delete(root);
}

char *hub_manifest_print(const hub_files *f, const char *repo, const char *revision) {
    cJSON *root = cJSON_CreateObject();
    cJSON *files = NULL;
    bool ok = root && cJSON_AddStringToObject(root, "repo", repo) &&
              cJSON_AddStringToObject(root, "revision", revision) &&
              cJSON_AddBoolToObject(root, "complete", f->complete) &&
              (files = cJSON_AddArrayToObject(root, "files")) != NULL;
    for (int i = 0; ok && i < f->n; i++) {
        const hub_file *file = &f->items[i];
        cJSON *e = cJSON_CreateObject();
        if (!e || !cJSON_AddItemToArray(files, e)) {
            cJSON_Delete(e);
            ok = false;
            break;
        }
        ok = cJSON_AddStringToObject(e, "path", file->path) &&
             cJSON_AddNumberToObject(e, "size", (double)file->size) &&
             cJSON_AddStringToObject(e, "oid", file->oid) &&
             cJSON_AddBoolToObject(e, "lfs", file->lfs);
    }
    char *text = ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    return text;
}
