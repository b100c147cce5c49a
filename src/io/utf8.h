/*
 * utf8.h - UTF-8 well-formedness, a leaf utility (the tokenizer, the request checks and the
 * voice file reader use it; tools may compile it too).
 */
#ifndef KZ_UTF8_H
#define KZ_UTF8_H

#include <stddef.h>

/* Offset of the first byte of the first ill-formed UTF-8 sequence in text[0, n_bytes), or
 * n_bytes. Well-formed means RFC 3629: shortest form, no surrogates, <= U+10FFFF. */
size_t kz_utf8_invalid_at(const char *text, size_t n_bytes);

#endif
