/*
 * hub_files.h - the file lists of a hub repo (see hub.h): the files kztts wants from
 * the hub's tree listing, and the cache manifest that records the verified ones.
 *
 *   listing page (JSON text) -> hub_listing_add_page -> hub_files
 *   manifest (JSON text) <-> hub_manifest_parse / hub_manifest_print <-> hub_files
 *
 * Pure functions over text, no I/O, so that a fuzz target can drive them
 * (tests/fuzz/fuzz_hub_listing.c). Every entry kept has a wanted path (a fixed list,
 * so a listing cannot steer writes outside the snapshot), a size in [0, 9e15] and a
 * hash of the right length (an LFS entry always has its sha256).
 */
#ifndef KZ_HUB_FILES_H
#define KZ_HUB_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { HUB_MAX_FILES = 64 };

typedef struct hub_file {
    char path[128]; /* path inside the repo */
    uint64_t size;  /* bytes */
    char oid[72];   /* lfs: sha256 of the content; else git blob sha1 (may be "") */
    bool lfs;
} hub_file;

typedef struct hub_files {
    hub_file items[HUB_MAX_FILES];
    int n;
    bool complete; /* manifest: every file of the listing is present and verified */
} hub_files;

/* True for the files kztts reads from a checkpoint (config.json, the weights and
 * their shards model-#####-of-#####.safetensors, the tokenizer files, ...). */
bool hub_wanted(const char *path);

/* True for a weight shard at the top of the repo or under speech_tokenizer/. */
bool hub_is_shard(const char *path);

/* The entry of f with this path, or NULL. */
const hub_file *hub_files_find(const hub_files *f, const char *path);

/* Adds the wanted files of one page of the tree listing to listed (paths already in
 * it are skipped). text holds n_bytes and a NUL after them. Returns 0, or -1 with one
 * line in err (no trailing newline; names the entry when one is at fault) and listed
 * possibly extended by part of the page. */
int hub_listing_add_page(hub_files *listed, const char *text, size_t n_bytes, char *err,
                         size_t n_err);

/* Reads manifest text (NUL-terminated) into out when it is the manifest of
 * repo@revision; otherwise, or when it is malformed, out is left empty. Malformed
 * or unwanted entries are dropped: the files they name are verified again. */
void hub_manifest_parse(const char *text, const char *repo, const char *revision, hub_files *out);

/* The manifest text of f for repo@revision, owned (free()), or NULL when out of memory. */
char *hub_manifest_print(const hub_files *f, const char *repo, const char *revision);

#endif
