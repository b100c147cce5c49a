/*
 * mapped_file.c - read-only whole-file mappings (see mapped_file.h).
 *
 * Layout of a mapping (Linux): an anonymous PROT_NONE reservation of the file size rounded
 * up to HUGE_BYTES plus HUGE_BYTES, the file mapped MAP_FIXED at the first HUGE_BYTES
 * boundary inside it, the slack before it returned:
 *
 *   [ file bytes ... | PROT_NONE up to the next 2 MB boundary ]
 *   ^ 2 MB aligned: virtual address = file offset (mod 2 MB)
 *
 * so that page-cache folios of 2 MB can be mapped by one PMD, and a range rounded out to
 * 2 MB never leaves the reservation. The whole file is advised MADV_NOHUGEPAGE (a lookup of
 * one embedding row maps 4 KB, not 2 MB), kz_map_populate_range's ranges MADV_HUGEPAGE:
 * their pages are then mapped 2 MB at a time where the page cache holds them so, and pages
 * the kernel reads in for them come in 2 MB folios: weights streamed through 4 KB pages can
 * lose time to TLB misses (docs/ARCHITECTURE.md#model-loading). Elsewhere a plain mapping.
 */
#define _DEFAULT_SOURCE  // madvise and MADV_DONTNEED (glibc hides them under plain POSIX)
#define _DARWIN_C_SOURCE // the same on macOS

#include "io/mapped_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/regular_file.h"
#include "runtime/error.h"

#if defined(__linux__) && defined(MADV_HUGEPAGE) && defined(MAP_FIXED)
#define HUGE_BYTES ((size_t)2 << 20)
#else
#define HUGE_BYTES ((size_t)0) /* no huge-page layout: a plain mapping */
#endif

/* Whether a file of n_bytes gets the huge-page layout (a plain mapping otherwise). */
static int huge_layout(size_t n_bytes) {
    return HUGE_BYTES && n_bytes <= SIZE_MAX - 2 * HUGE_BYTES;
}

/* Bytes of the address range that a mapping of n_bytes holds (the file and its slack). */
static size_t reserved_bytes(size_t n_bytes) {
    return huge_layout(n_bytes) ? (n_bytes + HUGE_BYTES - 1) / HUGE_BYTES * HUGE_BYTES : n_bytes;
}

/* Maps size bytes of fd read-only at a HUGE_BYTES boundary (see the header), or anywhere
 * without huge-page layout. Returns MAP_FAILED with errno set on failure. */
static void *map_aligned(int fd, size_t size) {
    if (!huge_layout(size)) {
        return mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    }
    const size_t reserved = reserved_bytes(size), span = reserved + HUGE_BYTES;
    uint8_t *r = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED) {
        return MAP_FAILED;
    }
    uint8_t *base = (uint8_t *)(((uintptr_t)r + HUGE_BYTES - 1) / HUGE_BYTES * HUGE_BYTES);
    void *m = mmap(base, size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
    if (m == MAP_FAILED) {
        int err = errno;
        munmap(r, span);
        errno = err;
        return MAP_FAILED;
    }
    if (base > r) {
        munmap(r, (size_t)(base - r));
    }
    uint8_t *end = base + reserved, *r_end = r + span;
    if (r_end > end) {
        munmap(end, (size_t)(r_end - end));
    }
    (void)madvise(base, reserved, MADV_NOHUGEPAGE); // advisory
    return base;
}

kz_status kz_map_open(const char *path, const uint8_t **map, size_t *n_bytes) {
    *map = NULL;
    *n_bytes = 0;
    int fd;
    uint64_t file_bytes;
    kz_status st = kz_regular_file_open(path, &fd, &file_bytes);
    if (st != KZ_OK) {
        return st;
    }
    if (file_bytes == 0) {
        close(fd);
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: file is empty", path);
    }
    if (file_bytes > SIZE_MAX) {
        close(fd);
        return kz_error_set(KZ_STATUS_IO, "%s: file of %llu bytes is too large to map", path,
                            (unsigned long long)file_bytes);
    }
    size_t size = (size_t)file_bytes;
    void *m = map_aligned(fd, size);
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
        munmap((void *)map, reserved_bytes(n_bytes));
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
    if (HUGE_BYTES) { // rounded out to 2 MB: still inside the reservation (header)
        const uintptr_t huge = (uintptr_t)HUGE_BYTES;
        (void)madvise((void *)(begin / huge * huge),
                      (end + huge - 1) / huge * huge - begin / huge * huge, MADV_HUGEPAGE);
    }
    // MADV_POPULATE_READ (Linux 5.14); older kernels answer EINVAL and nothing changes.
    (void)madvise((void *)begin, end - begin, 22);
#else
    (void)data;
    (void)n_bytes;
#endif
}

void kz_map_prefetch_range(const void *data, size_t n_bytes) {
    long page_bytes = sysconf(_SC_PAGESIZE);
    if (!data || n_bytes == 0 || page_bytes <= 0) {
        return;
    }
    uintptr_t page = (uintptr_t)page_bytes, begin = (uintptr_t)data / page * page;
    (void)posix_madvise((void *)begin, (uintptr_t)data + n_bytes - begin, POSIX_MADV_WILLNEED);
}

kz_status kz_mapped_file_open(kz_mapped_file *m, const char *path) {
    m->path = malloc(strlen(path) + 1);
    if (!m->path) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: no memory", path);
    }
    strcpy(m->path, path);
    return kz_map_open(m->path, &m->map, &m->map_bytes);
}

void kz_mapped_file_close(kz_mapped_file *m) {
    kz_map_close(m->map, m->map_bytes);
    free(m->path);
}
