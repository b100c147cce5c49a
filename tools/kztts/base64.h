/*
 * base64.h - RFC 4648 base64 (standard alphabet, '=' padding) for the server: SSE
 * audio deltas out, data: URIs of reference audio in.
 */
#ifndef KZ_BASE64_H
#define KZ_BASE64_H

#include <stddef.h>
#include <stdint.h>

/* Characters base64_encode writes for n bytes (without a terminating NUL). */
size_t base64_encoded_size(size_t n);

/* Writes the encoding of n bytes into out (base64_encoded_size(n) + 1 bytes, NUL
 * terminated). Returns the length written. */
size_t base64_encode(const void *bytes, size_t n, char *out);

/* Decodes text[0..n): whitespace (space, tab, CR, LF) is skipped; any other character
 * outside the alphabet, bad padding or a bad length is an error. On success *out is
 * malloc'ed (caller frees) and 0 returned; -1 for bad input, -2 when out of memory. */
int base64_decode(const char *text, size_t n, uint8_t **out, size_t *n_out);

#endif
