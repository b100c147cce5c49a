/*
 * text_file.c - whole-file reads with a bound: kz_regular_file_open (a FIFO or
 * device is refused, not waited on) -> fread into a buffer that doubles from
 * 64 KB up to the bound -> NUL-terminate.
 *
 * Growing instead of trusting the file's size keeps files whose size reads as 0
 * (/proc) working and never allocates the bound for a small file.
 */
#include "io/text_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/regular_file.h"
#include "runtime/error.h"

#define FIRST_CAP (64u << 10)

/* Reads f to its end or to max_bytes into a growing buffer; NULL when out of memory. */
static char *read_bounded(FILE *f, size_t max_bytes, size_t *n_bytes) {
    size_t cap = max_bytes < FIRST_CAP ? max_bytes : FIRST_CAP, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap || cap == max_bytes) {
            break;
        }
        size_t grown_cap = cap > max_bytes / 2 ? max_bytes : cap * 2;
        char *grown = realloc(buf, grown_cap + 1);
        if (!grown) {
            free(buf);
            return NULL;
        }
        buf = grown;
        cap = grown_cap;
    }
    if (buf) {
        buf[n] = '\0';
        *n_bytes = n;
    }
    return buf;
}

kz_status kz_text_file_read(const char *path, size_t max_bytes, char **text, size_t *n_bytes) {
    *text = NULL;
    *n_bytes = 0;
    int fd;
    uint64_t file_bytes;
    kz_status st = kz_regular_file_open(path, &fd, &file_bytes);
    if (st != KZ_OK) {
        return st;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int err = errno;
        close(fd);
        return kz_error_set(KZ_STATUS_IO, "%s: cannot open: %s", path, strerror(err));
    }
    size_t n = 0;
    char *buf = read_bounded(f, max_bytes, &n);
    int read_error = ferror(f);
    fclose(f);
    if (!buf) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    if (read_error) {
        free(buf);
        return kz_error_set(KZ_STATUS_IO, "%s: read error", path);
    }
    *text = buf;
    *n_bytes = n;
    return KZ_OK;
}
