/*
 * quant_walk.h - the walk over token pairs and activation chunks that the AVX2 and
 * NEON quantized matmuls share (x86/quant_avx2.c, arm/quant_neon_body.h), included
 * once per kernel as a template.
 *
 * Before including it a kernel defines CHUNK_BLOCKS, its `act` (one token's int8
 * activations of a chunk and their scales), `quant_act(act *, const float *x, nb, q4, pf)`
 * (q4: the activations will meet q4_0 weights, for kernels with a layout of their own;
 * pf: the entry point's prefetch mode, for kernels that prefetch the weights)
 * and the always-inline `row_dots(float out[], row, const act a[], nb, nt, q4)`
 * (one weight row's partial dot products with nt = 1 .. WALK_SET tokens, q4 = 1 for
 * q4_0), which this file instantiates for each constant (nt, q4); WALK_SET_Q8 and
 * WALK_SET_Q4 (1 .. 4, default 2) are how many tokens one row_dots call serves in the
 * batched walk, sharing its weight loads, and WALK_SET the larger. The file defines
 *
 *   static void quant_walk(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, q4, pf)
 *     n_in 0: y = 0 (empty sums, as the definition)
 *     tokens in pairs (a last single token alone)
 *       activation chunks of CHUNK_BLOCKS blocks: quant_act per token of the pair
 *         rows [o0, o1): row_dots -> y (first chunk) or y + (later chunks)
 *
 *   static void quant_walk_batch(...the same...)   (kernels.h matvec_q8_0)
 *     n_in 0: y = 0
 *     passes of up to KZ_MATVEC_PASS tokens
 *       activation chunks: quant_act per token of the pass (once per call and chunk)
 *         row tiles of about KZ_MATVEC_TILE_BYTES in [o0, o1)
 *           token sets of the format's WALK_SET_* of the pass (a last smaller set)
 *             the tile's rows: row_dots -> y (first chunk) or y + (later chunks)
 *
 * A token's sums depend only on n_in and its own activations: never on its pair
 * partner, n_tok or [o0, o1), so any split over threads gives the same bits, and the
 * batched walk, which only reorders the same row_dots calls (the rows outside, so a
 * tile is read from memory once for all pairs), gives quant_walk's bits.
 */
#include <stddef.h>
#include <stdint.h>

#include "kernels/quant.h"
#include "runtime/error.h"

#ifndef WALK_SET_Q8
#define WALK_SET_Q8 2
#endif
#ifndef WALK_SET_Q4
#define WALK_SET_Q4 2
#endif
#ifndef WALK_SET
#define WALK_SET (WALK_SET_Q8 > WALK_SET_Q4 ? WALK_SET_Q8 : WALK_SET_Q4)
#endif
_Static_assert(WALK_SET >= WALK_SET_Q8 && WALK_SET >= WALK_SET_Q4 && WALK_SET <= 4,
               "WALK_SET: the larger set, and row_dots takes at most four tokens");

/* row_dots with nt (1 .. the format's set) a constant in each instance. */
#define ROWS_FN(name, q4, set)                                                                     \
    static void name(float *out, const uint8_t *row, const act *a, size_t nb, int nt) {         \
        KZ_ASSERT(nt >= 1 && nt <= (set));                                                         \
        switch (nt) {                                                                              \
        case 1: row_dots(out, row, a, nb, 1, q4); break;                                          \
        case 2: row_dots(out, row, a, nb, 2, q4); break;                                          \
        case 3: row_dots(out, row, a, nb, (set) > 2 ? 3 : 2, q4); break;                          \
        default: row_dots(out, row, a, nb, (set) > 2 ? 4 : 2, q4); break;                         \
        }                                                                                          \
    }
ROWS_FN(rows_q8, 0, WALK_SET_Q8)
ROWS_FN(rows_q4, 1, WALK_SET_Q4)

static void quant_walk(float *y, size_t ldy, const float *x, size_t ldx, const void *w, size_t n_in,
                       size_t n_tok, size_t o0, size_t o1, int q4, int pf) {
    KZ_ASSERT(n_in % KZ_QK == 0);
    const size_t nb = n_in / KZ_QK;
    const size_t bsize = q4 ? KZ_Q4_0_BLOCK_BYTES : KZ_Q8_0_BLOCK_BYTES;
    if (nb == 0) {
        for (size_t t = 0; t < n_tok; t++) {
            for (size_t o = o0; o < o1; o++) {
                y[t * ldy + o] = 0.0f;
            }
        }
        return;
    }
    act a[2];
    for (size_t t = 0; t < n_tok; t += 2) {
        const int nt = n_tok - t >= 2 ? 2 : 1;
        for (size_t c0 = 0; c0 < nb; c0 += CHUNK_BLOCKS) {
            const size_t cn = nb - c0 < CHUNK_BLOCKS ? nb - c0 : CHUNK_BLOCKS;
            for (int k = 0; k < nt; k++) {
                quant_act(&a[k], x + (t + (size_t)k) * ldx + c0 * KZ_QK, cn, q4, pf);
            }
            for (size_t o = o0; o < o1; o++) {
                const uint8_t *row = (const uint8_t *)w + (o * nb + c0) * bsize;
                float r[2];
                if (q4) {
                    rows_q4(r, row, a, cn, nt);
                } else {
                    rows_q8(r, row, a, cn, nt);
                }
                for (int k = 0; k < nt; k++) {
                    float *yp = y + (t + (size_t)k) * ldy + o;
                    *yp = c0 == 0 ? r[k] : *yp + r[k];
                }
            }
        }
    }
}

static void quant_walk_batch(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                             size_t n_in, size_t n_tok, size_t o0, size_t o1, int q4, int pf) {
    KZ_ASSERT(n_in % KZ_QK == 0);
    const size_t nb = n_in / KZ_QK;
    const size_t bsize = q4 ? KZ_Q4_0_BLOCK_BYTES : KZ_Q8_0_BLOCK_BYTES;
    if (nb == 0) {
        quant_walk(y, ldy, x, ldx, w, n_in, n_tok, o0, o1, q4, pf);
        return;
    }
    const size_t tile = kz_matvec_tile_rows(nb * bsize);
    const size_t set = q4 ? WALK_SET_Q4 : WALK_SET_Q8;
    act a[KZ_MATVEC_PASS];
    for (size_t t0 = 0; t0 < n_tok; t0 += KZ_MATVEC_PASS) {
        const size_t np = n_tok - t0 < KZ_MATVEC_PASS ? n_tok - t0 : KZ_MATVEC_PASS;
        for (size_t c0 = 0; c0 < nb; c0 += CHUNK_BLOCKS) {
            const size_t cn = nb - c0 < CHUNK_BLOCKS ? nb - c0 : CHUNK_BLOCKS;
            for (size_t k = 0; k < np; k++) {
                quant_act(&a[k], x + (t0 + k) * ldx + c0 * KZ_QK, cn, q4, pf);
            }
            for (size_t r0 = o0; r0 < o1; r0 += tile) {
                const size_t r1 = o1 - r0 < tile ? o1 : r0 + tile;
                for (size_t t = 0; t < np; t += set) {
                    const int nt = np - t >= set ? (int)set : (int)(np - t);
                    for (size_t o = r0; o < r1; o++) {
                        const uint8_t *row = (const uint8_t *)w + (o * nb + c0) * bsize;
                        float r[WALK_SET];
                        if (q4) {
                            rows_q4(r, row, a + t, cn, nt);
                        } else {
                            rows_q8(r, row, a + t, cn, nt);
                        }
                        for (int k = 0; k < nt; k++) {
                            float *yp = y + (t0 + t + (size_t)k) * ldy + o;
                            *yp = c0 == 0 ? r[k] : *yp + r[k];
                        }
                    }
                }
            }
        }
    }
}
