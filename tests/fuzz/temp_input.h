/*
 * temp_input.h - the input file of the fuzz targets for readers that open a path (GGUF,
 * safetensors): each input's bytes are written to one private temp file, created on the
 * first input and rewritten for every later one, and removed at exit.
 *
 *   input bytes -> temp_input_write(tag, ...) -> /tmp/kz_fuzz_<tag>_XXXXXX (temp_path)
 *   -> the target opens temp_path
 * Included by one target each; a failure to write aborts, since it is no bug in a reader.
 */
#ifndef KZ_FUZZ_TEMP_INPUT_H
#define KZ_FUZZ_TEMP_INPUT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char temp_path[64];
static int temp_fd = -1;

static inline void remove_temp(void) {
    if (temp_fd >= 0) {
        close(temp_fd);
        unlink(temp_path);
    }
}

/* Writes the input to the temp file (named after tag on first use); its path is temp_path. */
static inline void temp_input_write(const char *tag, const uint8_t *data, size_t size) {
    if (temp_fd < 0) {
        snprintf(temp_path, sizeof temp_path, "/tmp/kz_fuzz_%s_XXXXXX", tag);
        temp_fd = mkstemp(temp_path);
        if (temp_fd < 0) {
            perror("mkstemp");
            abort();
        }
        atexit(remove_temp);
    }
    if (ftruncate(temp_fd, 0) != 0 || pwrite(temp_fd, data, size, 0) != (ssize_t)size) {
        perror("write");
        abort();
    }
}

#endif
