/*
 * regular_file.c - model files opened only when they are regular files (see
 * regular_file.h): open without blocking -> fstat -> refuse or clear O_NONBLOCK.
 */
#include "io/regular_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/error.h"

/* What a file of this mode is, for the error message. */
static const char *kind_of(mode_t mode) {
    if (S_ISDIR(mode)) {
        return "a directory";
    }
    if (S_ISFIFO(mode)) {
        return "a FIFO";
    }
    if (S_ISCHR(mode)) {
        return "a character device";
    }
    if (S_ISBLK(mode)) {
        return "a block device";
    }
    if (S_ISSOCK(mode)) {
        return "a socket";
    }
    return "an unknown kind of file";
}

kz_status kz_regular_file_open(const char *path, int *fd, uint64_t *n_bytes) {
    *fd = -1;
    *n_bytes = 0;
    int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (f < 0) {
        return kz_error_set(KZ_STATUS_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(f, &st) != 0) {
        int err = errno;
        close(f);
        return kz_error_set(KZ_STATUS_IO, "%s: cannot stat: %s", path, strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        close(f);
        return kz_error_set(KZ_STATUS_IO, "%s: not a regular file (%s)", path, kind_of(st.st_mode));
    }
    int flags = fcntl(f, F_GETFL);
    if (flags < 0 || fcntl(f, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        int err = errno;
        close(f);
        return kz_error_set(KZ_STATUS_IO, "%s: cannot open: %s", path, strerror(err));
    }
    *fd = f;
    *n_bytes = (uint64_t)st.st_size;
    return KZ_OK;
}

bool kz_file_absent(const char *path) {
    struct stat st;
    return lstat(path, &st) != 0 && errno == ENOENT;
}
