/*
 * atomic_file.c - files written complete or not at all (see atomic_file.h):
 *   open: stat the path -> a device or FIFO opened as it is; else its symlinks resolved,
 *   a temporary file beside the target -> buffered writes with a sticky error -> close:
 *   flush, fsync, fchmod, fclose -> finish: rename over the target, or unlink on failure.
 */
#include "io/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/error.h"

static char *copy_string(const char *text) {
    size_t n_bytes = strlen(text) + 1;
    char *copy = malloc(n_bytes);
    return copy ? memcpy(copy, text, n_bytes) : NULL;
}

void kz_atomic_file_write(kz_atomic_file *f, const void *bytes, size_t n_bytes) {
    if (f->status == KZ_OK && n_bytes > 0 && fwrite(bytes, 1, n_bytes, f->file) != n_bytes) {
        f->status = kz_error_set(KZ_STATUS_IO, "%s: cannot write: %s", f->dest, strerror(errno));
    }
}

void kz_atomic_file_close(kz_atomic_file *f) {
    if (!f->file) {
        return;
    }
    if (f->status == KZ_OK &&
        (fflush(f->file) != 0 || (f->temp && fsync(fileno(f->file)) != 0))) {
        f->status = kz_error_set(KZ_STATUS_IO, "%s: cannot write: %s", f->dest, strerror(errno));
    }
    if (f->status == KZ_OK && f->temp && fchmod(fileno(f->file), f->mode) != 0) {
        f->status =
            kz_error_set(KZ_STATUS_IO, "%s: cannot set permissions: %s", f->temp, strerror(errno));
    }
    if (fclose(f->file) != 0 && f->status == KZ_OK) {
        f->status = kz_error_set(KZ_STATUS_IO, "%s: cannot close: %s", f->dest, strerror(errno));
    }
    f->file = NULL;
}

/* `target` of the symlink at link_path as a path from here (relative targets are relative
 * to the link's folder); NULL when out of memory. */
static char *link_target_path(const char *link_path, const char *target) {
    const char *slash = strrchr(link_path, '/');
    if (target[0] == '/' || !slash) {
        return copy_string(target);
    }
    const size_t dir_bytes = (size_t)(slash - link_path) + 1;
    char *p = malloc(dir_bytes + strlen(target) + 1);
    if (p) {
        memcpy(p, link_path, dir_bytes);
        strcpy(p + dir_bytes, target);
    }
    return p;
}

/* *out = the file writing `path` replaces: path, or the end of its chain of symlinks (which
 * may not exist yet). */
static kz_status resolve_links(const char *path, char **out) {
    enum { MAX_LINKS = 40 }; // the kernel's own limit on a path's symlinks
    char *p = copy_string(path);
    for (int hops = 0; p; hops++) {
        struct stat st;
        if (lstat(p, &st) != 0 || !S_ISLNK(st.st_mode)) {
            *out = p; // absent (created there) or not a link; other errors show at mkstemp
            return KZ_OK;
        }
        char target[4096];
        const ssize_t n = readlink(p, target, sizeof target - 1);
        if (hops == MAX_LINKS || n < 0) {
            free(p);
            return kz_error_set(KZ_STATUS_IO, "%s: %s", path, strerror(n < 0 ? errno : ELOOP));
        }
        target[n] = '\0';
        char *next = link_target_path(p, target);
        free(p);
        p = next;
    }
    return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: no memory", path);
}

/* A device or FIFO: opened as it is and written in place (a FIFO waits for a reader). */
static kz_status open_through(kz_atomic_file *f) {
    const int fd = open(f->dest, O_WRONLY | O_NOCTTY);
    if (fd < 0 || !(f->file = fdopen(fd, "wb"))) {
        kz_status status =
            kz_error_set(KZ_STATUS_IO, "%s: cannot open: %s", f->dest, strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return status;
    }
    return KZ_OK;
}

/* A regular file or nothing: a temporary file beside the end of the path's symlinks. */
static kz_status open_temp(kz_atomic_file *f) {
    kz_status status = resolve_links(f->dest, &f->target);
    if (status != KZ_OK) {
        return status;
    }
    struct stat st;
    f->mode = stat(f->target, &st) == 0 ? st.st_mode & 07777 : 0644; // plain data
    const size_t temp_bytes = strlen(f->target) + sizeof ".partial-XXXXXX";
    if (!(f->temp = malloc(temp_bytes))) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: no memory", f->dest);
    }
    snprintf(f->temp, temp_bytes, "%s.partial-XXXXXX", f->target);
    const int fd = mkstemp(f->temp);
    if (fd < 0) {
        status = kz_error_set(KZ_STATUS_IO, "%s: cannot create a temporary file: %s", f->dest,
                              strerror(errno));
        free(f->temp);
        f->temp = NULL;
        return status;
    }
    if (!(f->file = fdopen(fd, "wb"))) {
        status = kz_error_set(KZ_STATUS_IO, "%s: cannot open: %s", f->temp, strerror(errno));
        close(fd);
        return status;
    }
    return KZ_OK;
}

kz_status kz_atomic_file_open(kz_atomic_file *f, const char *path, size_t buffer_bytes) {
    *f = (kz_atomic_file){.dest = path, .status = KZ_OK};
    struct stat st;
    const bool exists = stat(path, &st) == 0; // follows symlinks: what a write would reach
    if (exists && S_ISDIR(st.st_mode)) {
        return f->status = kz_error_set(KZ_STATUS_IO, "%s: is a directory", path);
    }
    kz_status status = exists && !S_ISREG(st.st_mode) ? open_through(f) : open_temp(f);
    if (status == KZ_OK && !(f->buffer = malloc(buffer_bytes))) {
        status = kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: no memory for the buffer", path);
    }
    if (status == KZ_OK) {
        (void)setvbuf(f->file, f->buffer, _IOFBF, buffer_bytes); // before any write: cannot fail
    }
    return f->status = status;
}

kz_status kz_atomic_file_finish(kz_atomic_file *f) {
    kz_atomic_file_close(f);
    if (f->status == KZ_OK && f->temp && rename(f->temp, f->target) != 0) {
        f->status = kz_error_set(KZ_STATUS_IO, "%s: cannot rename %s into place: %s", f->dest,
                                 f->temp, strerror(errno));
    }
    if (f->status != KZ_OK && f->temp) {
        unlink(f->temp);
    }
    free(f->temp);
    free(f->target);
    free(f->buffer);
    f->temp = f->target = f->buffer = NULL;
    return f->status;
}
