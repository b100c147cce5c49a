/*
 * test_levels.h - the kernel levels the kernel tests walk, in order, and the lookup
 * that skips, with a printed note, a level this CPU or build cannot run.
 *
 * Use: for (size_t l = 0; l < TEST_N_LEVELS; l++) { const kz_kernels *k =
 * test_level(test_levels[l]); if (!k) continue; ... }
 */
#ifndef KZ_TEST_LEVELS_H
#define KZ_TEST_LEVELS_H

#include <stdio.h>

#include "kernels/kernels.h"

static const kz_isa test_levels[] = {KZ_ISA_SCALAR, KZ_ISA_AVX2, KZ_ISA_AVX512, KZ_ISA_NEON};
#define TEST_N_LEVELS (sizeof test_levels / sizeof test_levels[0])

/* The table of level isa, or NULL after printing that it is skipped. */
static inline const kz_kernels *test_level(kz_isa isa) {
    const kz_kernels *k = kz_kernels_for(isa);
    if (!k) {
        printf("level %s: not supported by this CPU or build, skipped\n", kz_isa_name(isa));
    }
    return k;
}

#endif
