/*
 * out_file.c - a command's output: stdout, a device or FIFO written through, or a
 * regular file replaced through a temporary file (see out_file.h).
 *
 * Data flow: OUT -> stat (following links): exists and not a regular file? open it as it
 * is : resolve OUT's symlink chain to the file it ends at -> under interrupt_hold:
 * mkstemp("<target>.partial-XXXXXX") + interrupt_track -> writes into a stdio stream,
 * first failure recorded -> out_file_commit: flush, fsync, close all -> all good? rename
 * each over its target : unlink each -> untrack.
 */
#define _DEFAULT_SOURCE /* mkstemp, fchmod, lstat, readlink, realpath, fsync, strdup */

#include "out_file.h"

#include "interrupt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { MAX_LINKS = 40 }; // as the kernel's own limit on a path's symlinks (ELOOP)

struct out_file {
    char *name;       /* OUT as given, or "stdout" */
    char *target;     /* the regular file a commit replaces, or NULL */
    char *tmp;        /* its temporary file, or NULL */
    FILE *stream;
    bool seekable;
    char error[1024]; /* the first failure as the line to print, or "" */
};

static void record(out_file *f, const char *fmt, ...) {
    if (f->error[0]) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->error, sizeof f->error, fmt, ap);
    va_end(ap);
}

int out_file_fail(out_file *f, int err) {
    record(f, "kztts: %s: cannot write: %s", f->name, strerror(err));
    return -1;
}

int out_file_fail_msg(out_file *f, const char *why) {
    record(f, "kztts: %s: cannot write: %s", f->name, why);
    return -1;
}

bool out_file_failed(const out_file *f) {
    return f->error[0] != '\0';
}

/* `target` of the symlink at link_path, as a path from here: relative targets are
 * relative to the link's folder. NULL when out of memory. */
static char *link_target_path(const char *link_path, const char *target) {
    const char *slash = strrchr(link_path, '/');
    if (target[0] == '/' || !slash) {
        return strdup(target);
    }
    const size_t dir_bytes = (size_t)(slash - link_path) + 1;
    char *p = malloc(dir_bytes + strlen(target) + 1);
    if (p) {
        memcpy(p, link_path, dir_bytes);
        strcpy(p + dir_bytes, target);
    }
    return p;
}

/* The file that writing `path` replaces: path itself, or the end of its chain of
 * symlinks (which may not exist yet). NULL with errno set on failure. */
static char *resolve_links(const char *path) {
    char *p = strdup(path);
    for (int hops = 0; p; hops++) {
        struct stat st;
        if (lstat(p, &st) != 0 || !S_ISLNK(st.st_mode)) {
            return p; // absent (created there) or not a link; other errors show at mkstemp
        }
        char target[4096];
        const ssize_t n = readlink(p, target, sizeof target - 1);
        if (hops == MAX_LINKS || n < 0) {
            free(p);
            errno = n < 0 ? errno : ELOOP;
            return NULL;
        }
        target[n] = '\0';
        char *next = link_target_path(p, target);
        free(p);
        p = next;
    }
    errno = ENOMEM;
    return NULL;
}

/* A device, FIFO or socket: opened as it is, written in place. */
static int open_through(out_file *f, const char *path) {
    const int fd = open(path, O_WRONLY | O_NOCTTY);
    if (fd < 0 || !(f->stream = fdopen(fd, "wb"))) {
        fprintf(stderr, "kztts: %s: cannot open: %s\n", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    f->seekable = lseek(fd, 0, SEEK_CUR) >= 0;
    return 0;
}

/* The permission bits a replacement of target gets: the existing file's, else those a
 * plain fopen would give (0666 & ~umask). */
static mode_t replacement_mode(const char *target) {
    struct stat st;
    if (stat(target, &st) == 0) {
        return st.st_mode & 07777;
    }
    const mode_t mask = umask(0);
    umask(mask);
    return 0666 & ~mask;
}

/* A regular file or nothing: a temporary file beside the end of path's symlinks. */
static int open_temp(out_file *f, const char *path) {
    if (!(f->target = resolve_links(path))) {
        fprintf(stderr, "kztts: %s: %s\n", path, strerror(errno));
        return -1;
    }
    const size_t n = strlen(f->target) + sizeof ".partial-XXXXXX";
    if (!(f->tmp = malloc(n))) {
        fprintf(stderr, "kztts: %s: out of memory\n", path);
        return -1;
    }
    snprintf(f->tmp, n, "%s.partial-XXXXXX", f->target);
    interrupt_hold(); // a signal between mkstemp and track would leave the file
    const int fd = mkstemp(f->tmp);
    const int err = errno;
    if (fd >= 0 && interrupt_track(f->tmp) != 0) {
        close(fd);
        unlink(f->tmp);
        interrupt_release();
        fprintf(stderr, "kztts: %s: too many outputs\n", path);
        free(f->tmp);
        f->tmp = NULL;
        return -1;
    }
    interrupt_release();
    if (fd < 0) {
        fprintf(stderr, "kztts: %s: cannot create %s: %s\n", path, f->target, strerror(err));
        free(f->tmp);
        f->tmp = NULL;
        return -1;
    }
    fchmod(fd, replacement_mode(f->target)); // mkstemp creates 0600
    f->stream = fdopen(fd, "wb");
    f->seekable = true;
    if (!f->stream) {
        fprintf(stderr, "kztts: %s: cannot open: %s\n", path, strerror(errno));
        close(fd);
        return -1;
    }
    return 0;
}

/* Removes the temporary file (if any) and frees f. */
static void discard(out_file *f) {
    if (f->stream && f->stream != stdout) {
        fclose(f->stream);
    }
    if (f->tmp) {
        interrupt_hold();
        unlink(f->tmp);
        interrupt_untrack(f->tmp);
        interrupt_release();
    }
    free(f->tmp);
    free(f->target);
    free(f->name);
    free(f);
}

out_file *out_file_open(const char *path) {
    out_file *f = calloc(1, sizeof *f);
    const bool to_stdout = strcmp(path, "-") == 0;
    if (!f || !(f->name = strdup(to_stdout ? "stdout" : path))) {
        fprintf(stderr, "kztts: %s: out of memory\n", path);
        free(f);
        return NULL;
    }
    if (to_stdout) {
        f->stream = stdout;
        return f;
    }
    struct stat st;
    const bool exists = stat(path, &st) == 0; // follows symlinks: what a write would reach
    int rc;
    if (exists && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "kztts: %s: is a directory\n", path);
        rc = -1;
    } else if (exists && !S_ISREG(st.st_mode)) {
        rc = open_through(f, path);
    } else {
        rc = open_temp(f, path);
    }
    if (rc != 0) {
        discard(f);
        return NULL;
    }
    return f;
}

/* The file a write to `path` creates when nothing exists there: the real path of the
 * folder at the end of its symlinks, "/" and the last name. NULL when the folder does not
 * resolve (opening it fails later) or out of memory. */
static char *new_file_name(const char *path) {
    char *target = resolve_links(path);
    char *slash = target ? strrchr(target, '/') : NULL;
    const char *base = slash ? slash + 1 : target;
    if (slash) {
        *slash = '\0';
    }
    char *dir = target ? realpath(slash ? (target[0] ? target : "/") : ".", NULL) : NULL;
    char *name = dir ? malloc(strlen(dir) + strlen(base) + 2) : NULL;
    if (name) {
        sprintf(name, "%s/%s", dir, base);
    }
    free(dir);
    free(target);
    return name;
}

bool out_file_same(const char *a, const char *b) {
    const bool out_a = strcmp(a, "-") == 0, out_b = strcmp(b, "-") == 0;
    if (out_a && out_b) {
        return true;
    }
    struct stat sa, sb;
    const bool has_a = out_a ? fstat(STDOUT_FILENO, &sa) == 0 : stat(a, &sa) == 0;
    const bool has_b = out_b ? fstat(STDOUT_FILENO, &sb) == 0 : stat(b, &sb) == 0;
    if (has_a || has_b) {
        return has_a && has_b && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino &&
               !S_ISCHR(sa.st_mode);
    }
    char *na = new_file_name(a), *nb = new_file_name(b);
    const bool same = na && nb && strcmp(na, nb) == 0;
    free(na);
    free(nb);
    return same;
}

bool out_file_is_pipe(const char *path) {
    struct stat st;
    return strcmp(path, "-") == 0 ||
           (stat(path, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)));
}

FILE *out_file_stream(const out_file *f) {
    return f->stream;
}

bool out_file_seekable(const out_file *f) {
    return f->seekable;
}

const char *out_file_name(const out_file *f) {
    return f->name;
}

int out_file_write(out_file *f, const void *bytes, size_t n_bytes) {
    if (f->error[0]) {
        return -1;
    }
    if (n_bytes && fwrite(bytes, 1, n_bytes, f->stream) != n_bytes) {
        return out_file_fail(f, errno);
    }
    return 0;
}

/* Flushes and closes f's stream (stdout is only flushed); records the first failure. */
static void finish_writing(out_file *f) {
    if (!f->error[0] && ferror(f->stream)) {
        out_file_fail(f, EIO);
    }
    if (fflush(f->stream) != 0 || (f->tmp && fsync(fileno(f->stream)) != 0)) {
        out_file_fail(f, errno);
    }
    if (f->stream != stdout && fclose(f->stream) != 0) {
        out_file_fail(f, errno);
    }
    f->stream = NULL;
}

int out_file_commit(out_file *const *files, size_t n, bool ok) {
    const char *failure = NULL;
    for (size_t i = 0; i < n; i++) {
        if (files[i]) {
            finish_writing(files[i]);
            failure = !failure && files[i]->error[0] ? files[i]->error : failure;
        }
    }
    ok = ok && !failure;
    interrupt_hold();
    for (size_t i = 0; i < n; i++) {
        out_file *f = files[i];
        if (f && f->tmp && ok && rename(f->tmp, f->target) != 0) {
            record(f, "kztts: %s: cannot rename %s into place: %s", f->name, f->tmp,
                   strerror(errno));
            failure = f->error;
            ok = false;
        }
        if (f && f->tmp && !ok) {
            unlink(f->tmp);
        }
        if (f && f->tmp) {
            interrupt_untrack(f->tmp);
        }
    }
    interrupt_release();
    if (failure) {
        fprintf(stderr, "%s\n", failure);
    }
    for (size_t i = 0; i < n; i++) {
        if (files[i]) {
            free(files[i]->tmp);
            files[i]->tmp = NULL;
            discard(files[i]);
        }
    }
    return ok ? 0 : -1;
}
