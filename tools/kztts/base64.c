/*
 * base64.c - RFC 4648 base64 (see base64.h). Decoding collects 6-bit values from the
 * non-whitespace characters and emits bytes every 4; padding may only end the text.
 */
#include "base64.h"

#include <stdlib.h>

static const char ALPHABET[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t base64_encoded_size(size_t n) {
    return (n + 2) / 3 * 4;
}

size_t base64_encode(const void *bytes, size_t n, char *out) {
    const uint8_t *b = bytes;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)b[i] << 16;
        if (i + 1 < n) {
            v |= (uint32_t)b[i + 1] << 8;
        }
        if (i + 2 < n) {
            v |= b[i + 2];
        }
        out[o++] = ALPHABET[v >> 18 & 63];
        out[o++] = ALPHABET[v >> 12 & 63];
        out[o++] = i + 1 < n ? ALPHABET[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? ALPHABET[v & 63] : '=';
    }
    out[o] = '\0';
    return o;
}

/* The 6-bit value of c, -1 for '=', -2 for whitespace, -3 for anything else. */
static int sextet(unsigned char c) {
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    }
    switch (c) {
    case '+': return 62;
    case '/': return 63;
    case '=': return -1;
    case ' ': case '\t': case '\r': case '\n': return -2;
    default: return -3;
    }
}

int base64_decode(const char *text, size_t n, uint8_t **out, size_t *n_out) {
    *out = NULL;
    *n_out = 0;
    uint8_t *buf = malloc(n / 4 * 3 + 3);
    if (!buf) {
        return -2;
    }
    size_t o = 0, in_group = 0, pads = 0;
    uint32_t acc = 0;
    for (size_t i = 0; i < n; i++) {
        int v = sextet((unsigned char)text[i]);
        if (v == -2) {
            continue;
        }
        if (v == -3 || (v >= 0 && pads > 0) || (v == -1 && in_group < 2)) {
            free(buf);
            return -1; // a stray character, data after padding, or padding too early
        }
        if (v == -1) {
            pads++;
            v = 0;
        }
        acc = acc << 6 | (uint32_t)v;
        if (++in_group == 4) {
            buf[o++] = (uint8_t)(acc >> 16);
            if (pads < 2) {
                buf[o++] = (uint8_t)(acc >> 8);
            }
            if (pads < 1) {
                buf[o++] = (uint8_t)acc;
            }
            in_group = 0;
            acc = 0;
            if (pads > 0) {
                pads = 3; // the text must end here (whitespace aside)
            }
        }
    }
    if (in_group != 0) {
        free(buf);
        return -1;
    }
    *out = buf;
    *n_out = o;
    return 0;
}
