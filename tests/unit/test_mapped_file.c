/*
 * test_mapped_file.c - contract of the read-only file mappings (src/io/mapped_file.c).
 *
 * Files of sizes around the page and 2 MB boundaries are written, mapped and compared byte
 * for byte; populating a range that ends at the file's last byte (rounded out to 2 MB past
 * the end of the file) and releasing a middle range leave every byte readable and equal.
 * On Linux the mapping starts at a 2 MB boundary, the whole file carries MADV_NOHUGEPAGE
 * and a populated range MADV_HUGEPAGE (read back from /proc/self/smaps: VmFlags "nh" and
 * "hg"). Then the errors: a missing file, a directory, an empty file.
 */
#define _DEFAULT_SOURCE

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/mapped_file.h"
#include "runtime/error.h"
#include "test.h"

#define MB ((size_t)1 << 20)

static char dir[] = "/tmp/kz_test_map_XXXXXX";

static uint8_t byte_at(size_t i) {
    return (uint8_t)(i * 131 + (i >> 12) * 7 + 1);
}

static void write_file(const char *path, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    for (size_t i = 0; f && i < n; i++) {
        fputc(byte_at(i), f);
    }
    if (f) {
        fclose(f);
    }
}

static int bytes_ok(const uint8_t *map, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (map[i] != byte_at(i)) {
            return 0;
        }
    }
    return 1;
}

#if defined(__linux__)
/* The VmFlags line of the /proc/self/smaps entry that holds addr, or "" if none. */
static void vm_flags(const void *addr, char *out, size_t out_bytes) {
    out[0] = '\0';
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) {
        return;
    }
    char line[512];
    int inside = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            inside = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
        } else if (inside && strncmp(line, "VmFlags:", 8) == 0) {
            const size_t len = strlen(line + 8);
            const size_t keep = len < out_bytes ? len : out_bytes - 1;
            memcpy(out, line + 8, keep);
            out[keep] = '\0';
            break;
        }
    }
    fclose(f);
}

static int has_flag(const char *flags, const char *flag) {
    char padded[8];
    snprintf(padded, sizeof padded, " %s", flag);
    return strstr(flags, padded) != NULL;
}
#endif

/* Maps a file of n bytes, checks its bytes, populates its last `tail` bytes and releases a
 * middle range, and checks them again. */
static void check_size(size_t n, size_t tail) {
    char path[64];
    snprintf(path, sizeof path, "%s/f%zu", dir, n);
    write_file(path, n);
    const uint8_t *map = NULL;
    size_t n_bytes = 0;
    CHECK_EQ_INT(kz_map_open(path, &map, &n_bytes), KZ_OK);
    if (!map) {
        return;
    }
    CHECK(n_bytes == n);
    CHECK_MSG(bytes_ok(map, n), "%zu bytes: mapped bytes differ from the file", n);
    kz_map_populate_range(map + n - tail, tail);
    if (n > 3 * 4096) {
        kz_map_release_range(map + 4096, n - 3 * 4096);
    }
    CHECK_MSG(bytes_ok(map, n), "%zu bytes: bytes differ after populate and release", n);
#if defined(__linux__)
    CHECK_MSG((uintptr_t)map % (2 * MB) == 0, "%zu bytes: mapping at %p, not at 2 MB", n,
              (const void *)map);
    if (n >= 4 * MB) {
        char flags[256];
        vm_flags(map + n - 1, flags, sizeof flags);
        CHECK_MSG(has_flag(flags, "hg"), "%zu bytes: populated range lacks MADV_HUGEPAGE: %s",
                  n, flags);
        vm_flags(map, flags, sizeof flags);
        CHECK_MSG(has_flag(flags, "nh"), "%zu bytes: file start lacks MADV_NOHUGEPAGE: %s", n,
                  flags);
    }
#endif
    kz_map_close(map, n_bytes);
    unlink(path);
}

static void check_errors(void) {
    const uint8_t *map = (const uint8_t *)1;
    size_t n = 7;
    char path[64];
    snprintf(path, sizeof path, "%s/missing", dir);
    CHECK_EQ_INT(kz_map_open(path, &map, &n), KZ_STATUS_IO);
    CHECK(map == NULL && n == 0);
    CHECK_STR_CONTAINS(kz_last_error(), "missing");
    CHECK_EQ_INT(kz_map_open(dir, &map, &n), KZ_STATUS_IO);
    CHECK_STR_CONTAINS(kz_last_error(), "not a regular file");
    snprintf(path, sizeof path, "%s/empty", dir);
    write_file(path, 0);
    CHECK_EQ_INT(kz_map_open(path, &map, &n), KZ_STATUS_BAD_MODEL);
    CHECK_STR_CONTAINS(kz_last_error(), "empty");
    unlink(path);
    kz_map_close(NULL, 0); // accepted
}

int main(void) {
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    const size_t sizes[] = {1, 4095, 4096, 2 * MB - 1, 2 * MB, 2 * MB + 1, 5 * MB + 123};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        check_size(sizes[i], sizes[i] < 4096 ? sizes[i] : 4096);
    }
    check_size(6 * MB + 77, 3 * MB); // a populated range of several 2 MB pieces
    check_errors();
    rmdir(dir);
    return test_main_result("test_mapped_file");
}
