/*
 * mapped_file.h - whole files mapped read-only, shared by the model file readers
 * (safetensors, GGUF).
 *
 *   path -> kz_regular_file_open (a regular file, else refused without blocking)
 *   -> non-empty, fits in size_t -> mmap(PROT_READ, MAP_PRIVATE; on Linux at a 2 MB
 *   boundary, mapped_file.c) -> close (the mapping keeps the file referenced)
 * Every error names the path. kz_mapped_file is the part of the readers' file objects they
 * share: the path their messages name (copied) and the mapping, set up and torn down
 * together. kz_map_release_range drops the resident pages that
 * lie wholly inside a byte range (after its data was converted), never touching
 * pages shared with neighbouring data. kz_map_populate_range maps the pages of a
 * range that will be read soon (the language models' layer weights), so that the
 * first synthesis does not take a page fault per few KB of weights.
 */
#ifndef KZ_MAPPED_FILE_H
#define KZ_MAPPED_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "kztts.h"

/* Maps path; on success *map and *n_bytes (> 0) describe the mapping. */
kz_status kz_map_open(const char *path, const uint8_t **map, size_t *n_bytes);

/* Unmaps a mapping from kz_map_open. Accepts NULL. */
void kz_map_close(const uint8_t *map, size_t n_bytes);

/* A model file mapped whole, with the path that every message about it names. */
typedef struct kz_mapped_file {
    char *path;         /* as given to the reader's open, owned */
    const uint8_t *map; /* whole file, PROT_READ */
    size_t map_bytes;   /* file size */
} kz_mapped_file;

/* Copies path (not NULL) into m->path and maps the file into m->map and m->map_bytes as
 * kz_map_open does. On failure what was set up stays in m for kz_mapped_file_close; no
 * memory is KZ_STATUS_OUT_OF_MEMORY ("path: no memory"). */
kz_status kz_mapped_file_open(kz_mapped_file *m, const char *path);

/* Unmaps and frees what kz_mapped_file_open set up in m; a zeroed m is fine. */
void kz_mapped_file_close(kz_mapped_file *m);

/* madvise(MADV_DONTNEED) on the pages wholly inside [data, data + n_bytes). */
void kz_map_release_range(const void *data, size_t n_bytes);

/* madvise(MADV_POPULATE_READ) on the pages that overlap [data, data + n_bytes), a range
 * of a kz_map_open mapping: reads them into the page cache if needed and maps them now,
 * on Linux after advising MADV_HUGEPAGE for the range rounded out to 2 MB (the range is
 * read often: mapped_file.c). Advisory: where the system lacks it (Linux < 5.14, other
 * systems) nothing happens. */
void kz_map_populate_range(const void *data, size_t n_bytes);

/* posix_madvise(POSIX_MADV_WILLNEED) on the pages that overlap [data, data + n_bytes): the
 * system reads them ahead in large requests, without mapping them (a range read once, in
 * order). Advisory. */
void kz_map_prefetch_range(const void *data, size_t n_bytes);

#endif
