/*
 * out_file.h - one output of a command, committed together with the command's other
 * outputs or not at all, and never a device, FIFO or symlink turned into a file.
 *
 * Where the bytes go, by what OUT names:
 *   "-"                         stdout
 *   a device, FIFO or socket    written through (opened as it is; nothing to replace)
 *   a symlink                   its target, followed to the end of the chain, by these
 *                               rules (the link stays a link)
 *   a regular file, or nothing  a temporary "<target>.partial-XXXXXX" in the target's
 *                               folder (tracked by interrupt.h), renamed over the target
 *                               by out_file_commit
 * The first failed write is recorded (which output, errno) and printed once, as one line,
 * by out_file_commit: "kztts: out.wav: cannot write: No space left on device". A replaced
 * file keeps its permission bits; a new one gets 0666 & ~umask.
 */
#ifndef KZ_OUT_FILE_H
#define KZ_OUT_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct out_file out_file;

/* Opens OUT for writing (a FIFO blocks until a reader opens it, as a shell redirection
 * does). On failure prints "kztts: OUT: problem" and returns NULL. */
out_file *out_file_open(const char *path);

/* Whether OUT is stdout, a FIFO or a socket: an output that cannot seek, known before
 * opening it (which for a FIFO waits for a reader). */
bool out_file_is_pipe(const char *path);

/* Whether writing OUT names a and b would reach the same file: both "-", the same
 * existing file or FIFO (stdout's for "-"; links and other spellings followed, devices
 * excepted: /dev/null takes any number of writers), or the same new file (the same
 * folder and name at the end of their symlinks). */
bool out_file_same(const char *a, const char *b);

/* The stream to write to (buffered; use out_file_write or check its errors with
 * out_file_check). */
FILE *out_file_stream(const out_file *f);

/* Whether the stream can seek back (a temporary file, /dev/null; not stdout or a FIFO). */
bool out_file_seekable(const out_file *f);

/* OUT as given, or "stdout". */
const char *out_file_name(const out_file *f);

/* Writes n_bytes; -1 once any write failed (the first failure is recorded). */
int out_file_write(out_file *f, const void *bytes, size_t n_bytes);

/* Records that writing failed with errno err (if nothing was recorded yet); returns -1. */
int out_file_fail(out_file *f, int err);

/* Records a failure described by `why` (if nothing was recorded yet); returns -1. */
int out_file_fail_msg(out_file *f, const char *why);

/* Whether a failure was recorded. */
bool out_file_failed(const out_file *f);

/* Ends the n outputs together (NULL entries are skipped): each is flushed, synced and
 * closed; when ok and all of that succeeded, the temporary files are renamed into place,
 * under interrupt_hold so a signal comes before all of the renames or after them; else
 * they are removed and the first recorded failure is printed. Frees them. Returns 0, or
 * -1 (printed unless !ok with nothing recorded, where the caller reported why). */
int out_file_commit(out_file *const *files, size_t n, bool ok);

#endif
