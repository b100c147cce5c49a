/*
 * text_file.h - reading a whole small text file (a config, vocab.json,
 * merges.txt) into memory, for the parsers that take text.
 *
 * Every such parser also accepts text that did not come from a file (GGUF
 * metadata), so the size limit belongs to the parser, not to the reader: the
 * loader reads at most limit + 1 bytes and the parser rejects anything longer
 * than its limit in its own words.
 */
#ifndef KZ_TEXT_FILE_H
#define KZ_TEXT_FILE_H

#include <stddef.h>

#include "kztts.h"

/* Reads the regular file at path, or its first max_bytes bytes when it is longer,
 * into *text, malloc'ed with a NUL after the last byte read (caller frees; the
 * file may itself contain NUL bytes), and its length into *n_bytes. On failure
 * *text is NULL and the message names path: KZ_STATUS_IO (cannot open, not a
 * regular file, read error) or KZ_STATUS_OUT_OF_MEMORY. */
kz_status kz_text_file_read(const char *path, size_t max_bytes, char **text, size_t *n_bytes);

#endif
