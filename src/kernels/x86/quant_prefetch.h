/*
 * quant_prefetch.h - the weight-stream prefetches of the x86 quantized matvecs
 * (x86/quant_avx2.c, x86/quant_avx512.c), included by both.
 *
 * quant_prefetch(p, bytes, l1_ahead, mode) issues, for every 64 bytes of the weights
 * [p, p + bytes) about to be read:
 *   QPF_MODE_L1 (KZ_QPF_L1): one prefetch into L1 l1_ahead bytes ahead (each kernel's own
 *                            distance);
 *   QPF_MODE_STREAM (KZ_QPF_L2): one into L2 QPF_L2 bytes ahead and one into L1 QPF_NEAR
 *                            bytes ahead: weights streamed from DRAM (the talker);
 *   QPF_MODE_STREAM_FAR (KZ_QPF_L2_FAR): the same into L2 QPF_L2_FAR ahead (Zen 4);
 *   QPF_MODE_REUSE (KZ_QPF_L2 and KZ_QPF_L2_FAR, the _reused entry points): into L2
 *                            QPF_L2_REUSE and into L1 QPF_NEAR_REUSE ahead: weights read
 *                            again while the last-level cache still holds them (the code
 *                            predictor's, 15 times a frame).
 * Both kernels and both formats use the same distances under each policy, set for the
 * talker's and the code predictor's streams (docs/ARCHITECTURE.md#kernel-selection). The
 * mode is a constant of each entry point (QPF_MODE below), so the kernel table alone says
 * which prefetches run. Prefetches never change results.
 */
#ifndef KZ_QUANT_PREFETCH_H
#define KZ_QUANT_PREFETCH_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

#define QPF_L2 5120        /* QPF_MODE_STREAM: into L2 this far ahead */
#define QPF_NEAR 2560      /* and from there into L1 this far */
#define QPF_L2_FAR 10240   /* QPF_MODE_STREAM_FAR: into L2 this far ahead (L1: QPF_NEAR) */
#define QPF_L2_REUSE 12288 /* QPF_MODE_REUSE: the same */
#define QPF_NEAR_REUSE 1024

enum { QPF_MODE_L1 = 0, QPF_MODE_STREAM = 1, QPF_MODE_REUSE = 2, QPF_MODE_STREAM_FAR = 3 };

/* The slots of one kz_quant_fns field for entry points that run the modes above: slot
 * [policy][reused] is KZ_QPF_L1: l1 (reused or not), KZ_QPF_L2: stream, or reuse when
 * reused, KZ_QPF_L2_FAR: far, or reuse when reused. */
#define QPF_SLOTS(l1, stream, far, reuse)                                                          \
    {                                                                                              \
        [KZ_QPF_L1] = {l1, l1}, [KZ_QPF_L2] = {stream, reuse}, [KZ_QPF_L2_FAR] = { far, reuse }    \
    }

/* The parameters and arguments of a kz_matmul_fn, for the entry points' definitions. */
#define QPF_PARAMS                                                                             \
    float *y, size_t ldy, const float *x, size_t ldx, const void *w, size_t n_in, size_t n_tok, \
        size_t o0, size_t o1
#define QPF_ARGS y, ldy, x, ldx, w, n_in, n_tok, o0, o1

static inline __attribute__((always_inline)) void quant_prefetch(const uint8_t *p, size_t bytes,
                                                                 size_t l1_ahead, int mode) {
    if (mode != QPF_MODE_L1) {
        const int reuse = mode == QPF_MODE_REUSE;
        const size_t l2 = reuse ? QPF_L2_REUSE : mode == QPF_MODE_STREAM_FAR ? QPF_L2_FAR : QPF_L2;
        const char *far = (const char *)p + l2;
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
