/*
 * utf8.c - UTF-8 well-formedness (see utf8.h): one pass over the bytes, each lead byte's
 * continuation count and second-byte range checked as RFC 3629 table 3-7 gives them.
 */
#include "io/utf8.h"

#include <stdint.h>

size_t kz_utf8_invalid_at(const char *text, size_t n_bytes) {
    const uint8_t *s = (const uint8_t *)text;
    size_t i = 0;
    while (i < n_bytes) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c < 0xC2 || c > 0xF4) { // continuation byte, C0/C1 overlong lead, or > U+10FFFF
            return i;
        }
        size_t n_cont = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
        if (n_bytes - i <= n_cont) { // truncated at the end of the text
            return i;
        }
        uint8_t c1 = s[i + 1];
        // The second byte's range is narrower after E0 (overlong), ED (surrogates),
        // F0 (overlong) and F4 (above U+10FFFF).
        uint8_t lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
        uint8_t hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
        if (c1 < lo || c1 > hi) {
            return i;
        }
        for (size_t k = 2; k <= n_cont; k++) {
            if ((s[i + k] & 0xC0) != 0x80) {
                return i;
            }
        }
        i += n_cont + 1;
    }
    return n_bytes;
}
