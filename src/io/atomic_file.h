/*
 * atomic_file.h - a file the library writes complete or not at all (GGUF models, voice
 * files).
 *
 *   kz_atomic_file_open(path)  -> the destination: a device or FIFO (/dev/null) is written
 *                                 through; a symlink is followed to the end of its chain; a
 *                                 regular file (or none) gets mkstemp("<target>.partial-XXXXXX")
 *                                 in the target's folder
 *   kz_atomic_file_write(...)  -> buffered writes with a sticky error: after the first failure
 *                                 nothing more is written, and the error names the file
 *   kz_atomic_file_close       -> fflush, fsync, fchmod (the replaced file's mode, else 0644),
 *                                 fclose
 *   kz_atomic_file_finish      -> rename over the target when every step succeeded, else
 *                                 unlink the temporary file; frees
 *
 * A caller may record its own failure (a cancel) in f->status between close and finish,
 * so the target is either the old file or the complete new one.
 */
#ifndef KZ_ATOMIC_FILE_H
#define KZ_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "kztts.h"

typedef struct kz_atomic_file {
    FILE *file;       /* the stream being written, NULL once closed */
    char *buffer;     /* the stream's buffer (buffer_bytes) */
    char *temp;       /* the temporary file, or NULL when writing through to a device or FIFO */
    char *target;     /* the file the temporary one replaces (path with its symlinks followed) */
    const char *dest; /* the path as given, for messages (borrowed) */
    mode_t mode;      /* the temporary file's permission bits */
    kz_status status; /* the first failure, sticky */
} kz_atomic_file;

/* Opens the destination of path with a stream buffer of buffer_bytes. On failure f holds
 * nothing to write to and kz_atomic_file_finish must still be called (it frees). */
kz_status kz_atomic_file_open(kz_atomic_file *f, const char *path, size_t buffer_bytes);

/* Writes n_bytes unless a failure was recorded; records a failed write. */
void kz_atomic_file_write(kz_atomic_file *f, const void *bytes, size_t n_bytes);

/* Flushes, syncs (not a device or FIFO), sets the mode and closes; keeps the first error. */
void kz_atomic_file_close(kz_atomic_file *f);

/* Closes if still open, renames the temporary file into place when f->status is KZ_OK,
 * else removes it; frees f's memory. Returns f->status. */
kz_status kz_atomic_file_finish(kz_atomic_file *f);

#endif
