/*
 * regular_file.h - opening a model file for reading, which must be a regular file.
 *
 *   path -> open(O_RDONLY | O_NONBLOCK) -> fstat: anything but a regular file is
 *   refused with one error naming the file and what it is -> O_NONBLOCK cleared
 *   -> descriptor and size
 *
 * A FIFO, a device, a directory or a socket where a model file belongs would hang
 * (a FIFO's open waits for a writer), read endless bytes (/dev/zero) or fail
 * obscurely later. O_NONBLOCK lets the open of a FIFO return at once, and deciding
 * on the open descriptor leaves no window for the path to change after a check.
 */
#ifndef KZ_REGULAR_FILE_H
#define KZ_REGULAR_FILE_H

#include <stdbool.h>
#include <stdint.h>

#include "kztts.h"

/* Opens path read-only (close-on-exec, blocking reads). On success *fd is the open
 * descriptor (caller closes) and *n_bytes the file's size; on failure *fd is -1 and the
 * message names path: KZ_STATUS_IO for a missing or unreadable path and for anything
 * that is not a regular file ("PATH: not a regular file (a FIFO)"). */
kz_status kz_regular_file_open(const char *path, int *fd, uint64_t *n_bytes);

/* True when nothing at all is at path: an optional model file that is not there. A
 * broken or looping symlink is something (a cache missing its blob), which
 * kz_regular_file_open then refuses by name instead of it passing for absent. */
bool kz_file_absent(const char *path);

#endif
