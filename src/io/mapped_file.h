/*
 * mapped_file.h - whole files mapped read-only, shared by the model file readers
 * (safetensors, GGUF).
 *
 *   path -> kz_regular_file_open (a regular file, else refused without blocking)
 *   -> non-empty, fits in size_t -> mmap(PROT_READ, MAP_PRIVATE; on Linux at a 2 MB
 *   boundary, mapped_file.c) -> close (the mapping keeps the file referenced)
 * Every error names the path. kz_map_release_range drops the resident pages that
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
