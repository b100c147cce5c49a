/*
 * quant_prefetch.h - the weight-stream prefetches of the x86 quantized matvecs
 * (x86/quant_avx2.c, x86/quant_avx512.c), included by both.
 *
 * quant_prefetch(p, bytes, l1_ahead, l2) issues, for every 64 bytes of the weights
 * [p, p + bytes) about to be read:
 *   KZ_QPF_L1 (l2 = 0): one prefetch into L1 l1_ahead bytes ahead (each kernel's own
 *                       distance, tuned on Zen 3 / Zen 5);
 *   KZ_QPF_L2 (l2 = 1): one into L2 QPF_L2 bytes ahead and one into L1 QPF_NEAR bytes
 *                       ahead, for both kernels and both formats (measured on the AMX Xeon,
 *                       docs/PERF.md 2026-12-02 (evening) and "2026-12-02 (night)": 5 / 2.5
 *                       KB against the first 8 / 1 KB, talker step 20.1-20.5 -> 18.1-18.3
 *                       ms, code predictor even; q4_0 even).
 * kernels.h kz_quant_set_prefetch says which policy runs. Prefetches never change results.
 */
#ifndef KZ_QUANT_PREFETCH_H
#define KZ_QUANT_PREFETCH_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#define QPF_L2 5120   /* KZ_QPF_L2: into L2 this far ahead */
#define QPF_NEAR 2560 /* and from there into L1 this far */

static inline __attribute__((always_inline)) void quant_prefetch(const uint8_t *p, size_t bytes,
                                                                 size_t l1_ahead, int l2) {
    if (l2) {
        const char *far = (const char *)p + QPF_L2;
        const char *near = (const char *)p + QPF_NEAR;
        for (size_t i = 0; i < bytes; i += 64) {
            _mm_prefetch(far + i, _MM_HINT_T1);
            _mm_prefetch(near + i, _MM_HINT_T0);
        }
    } else {
        const char *ahead = (const char *)p + l1_ahead;
        for (size_t i = 0; i < bytes; i += 64) {
            _mm_prefetch(ahead + i, _MM_HINT_T0);
        }
    }
}

#endif
