/*
 * row_dots.h - the dot products of one weight row with one or two token rows, shared by
 * the float step kernels matmul_avx2.c and matmul_avx512.c (kernels.h matmul_*, matvec_*),
 * which differ only in vector width; the token walk over rows on top of it is
 * row_pairs.h.
 *
 * Data flow per weight row (f32, bf16 or f16 elements, widened to f32 exactly) and token:
 * four LANES-wide accumulators over i in steps of 4 * LANES, with every line of the weight
 * stream prefetched PF_AHEAD bytes ahead into L2; then LANES-wide steps into the first
 * accumulator; the includer's fixed reduction tree hsum(); a scalar tail in order. Two
 * tokens share each weight vector load, and a token's sequence is the same whether it is
 * paired or alone.
 *
 * Include it after the file's vector type `vec`, its lane count LANES and the
 * always-inline vec_zero(), vec_loadu(const float *) and vec_fmadd(a, b, c) (a * b + c);
 * the file then defines wload() and hsum() declared below. Each ISA file compiles its own
 * copy.
 */
#ifndef KZ_ROW_DOTS_H
#define KZ_ROW_DOTS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/quant.h"

#define PF_AHEAD 8192 /* bytes of the weight stream prefetched ahead into L2 */

/* Weight element types (a constant after inlining). */
enum { W_F32 = 0, W_BF16 = 1, W_F16 = 2 };

/* LANES weights of kind from element i of w, widened to f32 (exact). */
static inline vec wload(const void *w, size_t i, int kind);

/* The fixed reduction tree of four accumulators to one sum. */
static inline float hsum(vec a0, vec a1, vec a2, vec a3);

static inline float wscalar(const void *w, size_t i, int kind) {
    if (kind == W_F32) {
        return ((const float *)w)[i];
    }
    const uint16_t h = ((const uint16_t *)w)[i];
    return kind == W_F16 ? kz_fp16_to_f32(h) : kz_bf16_to_f32(h);
}

/* Dot products of one weight row with n_t (1 or 2) token rows. */
static inline void row_dots(const void *wrow, const float *x0, const float *x1, size_t n_in,
                            int n_t, int kind, float *out0, float *out1) {
    vec a[2][4];
    for (int t = 0; t < 2; t++) {
        for (int k = 0; k < 4; k++) {
            a[t][k] = vec_zero();
        }
    }
    size_t i = 0;
    const char *wb = (const char *)wrow;
    size_t esize = kind == W_F32 ? 4 : 2;
    for (; i + 4 * LANES <= n_in; i += 4 * LANES) {
        // One stream of weights per call: every line PF_AHEAD bytes ahead into L2 (also
        // into the next row).
        for (size_t b = 0; b < 4 * LANES * esize; b += 64) {
            _mm_prefetch(wb + i * esize + b + PF_AHEAD, _MM_HINT_T1);
        }
        for (int k = 0; k < 4; k++) {
            vec wv = wload(wrow, i + LANES * (size_t)k, kind);
            a[0][k] = vec_fmadd(wv, vec_loadu(x0 + i + LANES * k), a[0][k]);
            if (n_t == 2) {
                a[1][k] = vec_fmadd(wv, vec_loadu(x1 + i + LANES * k), a[1][k]);
            }
        }
    }
    for (; i + LANES <= n_in; i += LANES) {
        vec wv = wload(wrow, i, kind);
        a[0][0] = vec_fmadd(wv, vec_loadu(x0 + i), a[0][0]);
        if (n_t == 2) {
            a[1][0] = vec_fmadd(wv, vec_loadu(x1 + i), a[1][0]);
        }
    }
    float s0 = hsum(a[0][0], a[0][1], a[0][2], a[0][3]);
    float s1 = hsum(a[1][0], a[1][1], a[1][2], a[1][3]);
    for (; i < n_in; i++) {
        float wi = wscalar(wrow, i, kind);
        s0 = s0 + wi * x0[i];
        s1 = s1 + wi * (n_t == 2 ? x1[i] : 0.0f);
    }
    *out0 = s0;
    *out1 = s1;
}

#endif
