/*
 * test_levels.h - the kernel tables the kernel tests walk: every sub-level this build
 * has (kernels.h kz_isa: scalar, then each level's sub-levels from the lowest), and the
 * lookup that skips, with a printed note, a sub-level this CPU cannot run. Every test
 * that loops over them compares each table with the scalar definitions.
 *
 * Use: for (size_t l = 0; l < test_n_levels(); l++) { const kz_kernels *k =
 * test_level(l); if (!k) continue; ... }   (l < TEST_MAX_LEVELS)
 */
#ifndef KZ_TEST_LEVELS_H
#define KZ_TEST_LEVELS_H

#include <stdio.h>

#include "kernels/kernels.h"

#define TEST_MAX_LEVELS 16 /* bound of test_n_levels(), for arrays indexed by l */

/* How many sub-levels this build has. */
static inline size_t test_n_levels(void) {
    const char *const *names;
    const size_t n = kz_kernels_sublevels(&names);
    return n < TEST_MAX_LEVELS ? n : TEST_MAX_LEVELS;
}

/* The table of sub-level l, or NULL after printing that it is skipped. */
static inline const kz_kernels *test_level(size_t l) {
    const char *const *names;
    kz_kernels_sublevels(&names);
    const kz_kernels *k = kz_kernels_named(names[l]);
    if (!k) {
        printf("sub-level %s: not supported by this CPU, skipped\n", names[l]);
    }
    return k;
}

#endif
