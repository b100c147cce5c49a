/*
 * codes_file.h - reading codec code files: one frame per line, N integers
 * separated by spaces or tabs, codebook 0 first. Blank lines are not allowed
 * inside the data (a trailing newline is fine). Errors name file and line.
 * Also seeded random codes for the benchmarks.
 */
#ifndef KZ_CODES_FILE_H
#define KZ_CODES_FILE_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

/* Reads path ("-" = stdin) expecting n_codebooks values per line, each in
 * [0, codebook_size). On success *codes is malloc'ed [n_frames * n_codebooks].
 * Returns 0, or -1 after printing one line "kztts: FILE:LINE: problem". */
int codes_file_read(const char *path, int n_codebooks, int codebook_size, int32_t **codes,
                    size_t *n_frames);

/* codes_file_read on an open stream f, named name in messages. On failure *codes is
 * NULL, *n_frames 0, and err (err_cap bytes) holds one line without a newline,
 * "NAME:LINE: problem" (or "NAME: problem"); nothing is printed. */
int codes_file_parse(FILE *f, const char *name, int n_codebooks, int codebook_size,
                     int32_t **codes, size_t *n_frames, char *err, size_t err_cap);

/* The text of a codes file holding codes (one frame per line), malloc'ed, its length in
 * *n_bytes (no NUL counted); NULL when out of memory. */
char *codes_file_text(const int32_t *codes, size_t n_frames, int n_codebooks, size_t *n_bytes);

/* n_frames * n_codebooks random codes in [0, codebook_size) from seed (xorshift), malloc'ed;
 * NULL when out of memory. The same seed gives the same codes. */
int32_t *codes_random(size_t n_frames, int n_codebooks, int codebook_size, uint64_t seed);

#endif
