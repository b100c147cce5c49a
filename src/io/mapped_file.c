/*
 * mapped_file.c - read-only whole-file mappings (see mapped_file.h).
 */
#define _DEFAULT_SOURCE  // madvise and MADV_DONTNEED (glibc hides them under plain POSIX)
#define _DARWIN_C_SOURCE // the same on macOS

#include "io/mapped_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/error.h"

kz_status kz_map_open(const char *path, const uint8_t **map, size_t *n_bytes) {
    *map = NULL;
    *n_bytes = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return kz_error_set(KZ_STATUS_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return kz_error_set(KZ_STATUS_IO, "%s: cannot stat: %s", path, strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return kz_error_set(KZ_STATUS_IO, "%s: not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: file is empty", path);
    }
    if ((uintmax_t)st.st_size > SIZE_MAX) {
        close(fd);
        return kz_error_set(KZ_STATUS_IO, "%s: file of %lld bytes is too large to map", path,
                            (long long)st.st_size);
    }
    size_t size = (size_t)st.st_size;
    void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd); // the mapping keeps the file referenced
    if (m == MAP_FAILED) {
        return kz_error_set(KZ_STATUS_IO, "%s: cannot map %zu bytes: %s", path, size,
                            strerror(err));
    }
    *map = m;
    *n_bytes = size;
    return KZ_OK;
}

void kz_map_close(const uint8_t *map, size_t n_bytes) {
    if (map) {
        munmap((void *)map, n_bytes);
    }
}

void kz_map_release_range(const void *data, size_t n_bytes) {
    long page_bytes = sysconf(_SC_PAGESIZE);
    if (!data || n_bytes == 0 || page_bytes <= 0) {
        return;
    }
    uintptr_t begin = (uintptr_t)data, end = begin + n_bytes, page = (uintptr_t)page_bytes;
    // Only pages wholly inside the range: the partial first and last pages may hold a
    // header or a neighbour that is still in use.
    uintptr_t first = (begin + page - 1) / page * page;
    uintptr_t last = end / page * page;
    if (first < last) {
        // Advisory: on failure the pages simply stay resident.
        (void)madvise((void *)first, last - first, MADV_DONTNEED);
    }
}

void kz_map_populate_range(const void *data, size_t n_bytes) {
#if defined(__linux__)
    long page_bytes = sysconf(_SC_PAGESIZE);
    if (!data || n_bytes == 0 || page_bytes <= 0) {
        return;
    }
    uintptr_t page = (uintptr_t)page_bytes, begin = (uintptr_t)data / page * page;
    uintptr_t end = ((uintptr_t)data + n_bytes + page - 1) / page * page;
    // MADV_POPULATE_READ (Linux 5.14); older kernels answer EINVAL and nothing changes.
    (void)madvise((void *)begin, end - begin, 22);
#else
    (void)data;
    (void)n_bytes;
#endif
}
