/*
 * quant_prefetch.h - the weight-stream prefetches of the x86 quantized matvecs
 * (x86/quant_avx2.c, x86/quant_avx512.c), included by both.
 *
 * quant_prefetch(p, bytes, l1_ahead, mode) issues, for every 64 bytes of the weights
 * [p, p + bytes) about to be read:
 *   QPF_MODE_L1 (KZ_QPF_L1): one prefetch into L1 l1_ahead bytes ahead (each kernel's own
 *                            distance, tuned on Zen 3 / Zen 5);
 *   QPF_MODE_STREAM (KZ_QPF_L2): one into L2 QPF_L2 bytes ahead and one into L1 QPF_NEAR
 *                            bytes ahead: weights streamed from DRAM (the talker);
 *   QPF_MODE_REUSE (KZ_QPF_L2 on a thread that set kz_quant_set_thread_reuse): into L2
 *                            QPF_L2_REUSE and into L1 QPF_NEAR_REUSE ahead: weights read
 *                            again while the last-level cache still holds them (the code
 *                            predictor's, 15 times a frame).
 * Both kernels and both formats use the same distances, measured on the AMX Xeon
 * (docs/PERF.md 2026-12-02 (evening) and (night): streamed 5 / 2.5 KB against the first
 * 8 / 1 KB took the talker step from 21.3 to 18.8-19.3 ms; the code predictor wants its
 * weights from L3 further ahead, 12 / 1 KB). quant_prefetch_mode() reads the policy.
 * kernels.h kz_quant_set_prefetch says which policy runs. Prefetches never change results.
 */
#ifndef KZ_QUANT_PREFETCH_H
#define KZ_QUANT_PREFETCH_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

#define QPF_L2 5120        /* QPF_MODE_STREAM: into L2 this far ahead */
#define QPF_NEAR 2560      /* and from there into L1 this far */
#define QPF_L2_REUSE 12288 /* QPF_MODE_REUSE: the same */
#define QPF_NEAR_REUSE 1024

enum { QPF_MODE_L1 = 0, QPF_MODE_STREAM = 1, QPF_MODE_REUSE = 2 };

/* The prefetch mode of a matvec called now on this thread. */
static inline int quant_prefetch_mode(void) {
    if (kz_quant_get_prefetch() != KZ_QPF_L2) {
        return QPF_MODE_L1;
    }
    return kz_quant_get_thread_reuse() ? QPF_MODE_REUSE : QPF_MODE_STREAM;
}

static inline __attribute__((always_inline)) void quant_prefetch(const uint8_t *p, size_t bytes,
                                                                 size_t l1_ahead, int mode) {
    if (mode != QPF_MODE_L1) {
        const int reuse = mode == QPF_MODE_REUSE;
        const char *far = (const char *)p + (reuse ? QPF_L2_REUSE : QPF_L2);
        const char *near = (const char *)p + (reuse ? QPF_NEAR_REUSE : QPF_NEAR);
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
