/*
 * mapped_file.h - whole files mapped read-only, shared by the model file readers
 * (safetensors, GGUF).
 *
 *   path -> open + fstat (regular, non-empty, fits in size_t) -> mmap(PROT_READ,
 *   MAP_PRIVATE) -> close (the mapping keeps the file referenced)
 * Every error names the path. kz_map_release_range drops the resident pages that
 * lie wholly inside a byte range (after its data was converted), never touching
 * pages shared with neighbouring data.
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

#endif
