/*
 * gemm_bf16_ref.c - scalar definition of the bf16 conv-GEMM (the codec's fast
 * precision), its weight packer and the rounding of activations to bf16.
 *
 * Data flow: at load, kz_packed_bf16_init() reads fp32 panels (kz_packed) and
 * writes bf16 panels with the input channels of each tap in pairs (layout at
 * kz_packed_bf16 in kernels.h). At run time the caller rounds the conv input
 * rows once (kz_round_bf16_ref, or a level's round_bf16) and
 *
 *   x bf16 [rows + (taps-1)*tap_stride, ldx] --(taps x [k_pairs, 16, 2] per panel)--> y [rows, ldy]
 *
 * with, per output element, two fp32 additions of exact bf16 products per pair
 * (odd element first, as the SDM's VDPBF16PS pseudo-code), taps outer, pairs
 * inner, then the bias and residual adds of the fp32 gemm. The zero pad of an
 * odd k_in takes part like any pair, so every level sees the same sequence.
 */
#include "kernels/kernels.h"

#include "runtime/error.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* kz_bf16_round without branches, so that the loop below vectorizes. */
static inline uint16_t round_bits(uint32_t u) {
    const uint32_t nan = (u >> 16) | 0x40u, zero = (u >> 16) & 0x8000u;
    const uint32_t near = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t r = (u & 0x7f800000u) == 0 ? zero : near;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : r);
}

/* Panel pn of src as bf16 pairs (layout in kernels.h). */
KZ_CLONES static void pack_panel(uint16_t *out, const kz_packed *src, size_t pn, size_t k_pairs) {
    static const float zeros[KZ_PANEL];
    const float *in = src->data + pn * src->taps * src->k_in * KZ_PANEL;
    for (size_t j = 0; j < src->taps; j++) {
        for (size_t q = 0; q < k_pairs; q++) {
            // Columns >= n are zero in the fp32 panels already; an odd k_in pairs with zeros.
            const float *r0 = in + (j * src->k_in + 2 * q) * KZ_PANEL;
            const float *r1 = 2 * q + 1 < src->k_in ? r0 + KZ_PANEL : zeros;
            uint16_t *row = out + (j * k_pairs + q) * KZ_PANEL * 2;
            uint32_t b0[KZ_PANEL], b1[KZ_PANEL];
            memcpy(b0, r0, sizeof b0);
            memcpy(b1, r1, sizeof b1);
            for (size_t c = 0; c < KZ_PANEL; c++) {
                row[2 * c] = round_bits(b0[c]);
                row[2 * c + 1] = round_bits(b1[c]);
            }
        }
    }
}

int kz_packed_bf16_init(kz_packed_bf16 *p, const kz_packed *src) {
    memset(p, 0, sizeof *p);
    const size_t k_pairs = (src->k_in + 1) / 2;
    const size_t pair_rows = src->taps * k_pairs;
    const size_t per_panel = pair_rows * KZ_PANEL * 2; // bf16 elements
    if (src->taps != 0 && pair_rows / src->taps != k_pairs) {
        return -1;
    }
    if (src->n_panels != 0 && per_panel > SIZE_MAX / sizeof(uint16_t) / src->n_panels) {
        return -1;
    }
    size_t bytes = src->n_panels * per_panel * sizeof(uint16_t);
    bytes = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
    uint16_t *data = aligned_alloc(64, bytes);
    if (!data) {
        return -1;
    }
    for (size_t pn = 0; pn < src->n_panels; pn++) {
        pack_panel(data + pn * per_panel, src, pn, k_pairs);
    }
    *p = (kz_packed_bf16){.data = data, .k_in = src->k_in, .k_pairs = k_pairs, .taps = src->taps,
                          .n = src->n, .n_panels = src->n_panels};
    return 0;
}

size_t kz_packed_bf16_bytes(size_t taps, size_t k_in, size_t n) {
    const size_t n_panels = (n + KZ_PANEL - 1) / KZ_PANEL;
    const size_t pair_rows = taps * ((k_in + 1) / 2);
    if ((taps != 0 && pair_rows / taps != (k_in + 1) / 2) ||
        (n_panels && pair_rows > SIZE_MAX / (KZ_PANEL * 2 * sizeof(uint16_t)) / n_panels)) {
        return 0;
    }
    return n_panels * pair_rows * KZ_PANEL * 2 * sizeof(uint16_t);
}

void kz_packed_bf16_init_mapped(kz_packed_bf16 *p, size_t taps, size_t k_in, size_t n,
                                const uint16_t *data) {
    *p = (kz_packed_bf16){.data = (uint16_t *)(uintptr_t)data, .k_in = k_in,
                          .k_pairs = (k_in + 1) / 2, .taps = taps, .n = n,
                          .n_panels = (n + KZ_PANEL - 1) / KZ_PANEL, .mapped = true};
}

void kz_packed_bf16_free(kz_packed_bf16 *p) {
    if (!p) {
        return;
    }
    if (!p->mapped) {
        free(p->data);
    }
    memset(p, 0, sizeof *p);
}

void kz_round_bf16_ref(uint16_t *y, size_t ldy, const float *x, size_t ldx, size_t n_rows,
                       size_t n_cols) {
    KZ_ASSERT(ldy >= n_cols);
    for (size_t r = 0; r < n_rows; r++) {
        uint16_t *yr = y + r * ldy;
        const float *xr = x + r * ldx;
        for (size_t c = 0; c < n_cols; c++) {
            yr[c] = kz_bf16_round(xr[c]);
        }
        for (size_t c = n_cols; c < ldy; c++) {
            yr[c] = 0;
        }
    }
}

void kz_gemm_bf16_ref(const kz_gemm_bf16_args *a, size_t t0, size_t t1, size_t p0, size_t p1) {
    const kz_packed_bf16 *w = a->w;
    KZ_ASSERT(t0 <= t1 && t1 <= a->n_rows && p0 <= p1 && p1 <= w->n_panels);
    KZ_ASSERT(a->ldy >= w->n && a->ldx >= 2 * w->k_pairs && a->ldx % 2 == 0);
    const size_t pair_rows = w->taps * w->k_pairs;
    for (size_t p = p0; p < p1; p++) {
        const uint16_t *panel = w->data + p * pair_rows * KZ_PANEL * 2;
        const size_t o0 = p * KZ_PANEL;
        const size_t width = w->n - o0 < KZ_PANEL ? w->n - o0 : KZ_PANEL;
        for (size_t t = t0; t < t1; t++) {
            float acc[KZ_PANEL] = {0};
            for (size_t j = 0; j < w->taps; j++) {
                const uint16_t *xr = a->x + (t + j * a->tap_stride) * a->ldx;
                const uint16_t *wr = panel + j * w->k_pairs * KZ_PANEL * 2;
                for (size_t q = 0; q < w->k_pairs; q++) {
                    const float x0 = kz_bf16_to_f32(xr[2 * q]);
                    const float x1 = kz_bf16_to_f32(xr[2 * q + 1]);
                    const uint16_t *wq = wr + q * KZ_PANEL * 2;
                    for (size_t c = 0; c < width; c++) {
                        // Products of two bf16 are exact: each fmaf is one rounded add.
                        acc[c] = fmaf(x1, kz_bf16_to_f32(wq[2 * c + 1]), acc[c]);
                        acc[c] = fmaf(x0, kz_bf16_to_f32(wq[2 * c]), acc[c]);
                    }
                }
            }
            kz_gemm_store_ref(a->y + t * a->ldy + o0, acc, width,
                              a->bias ? a->bias + o0 : NULL, a->mode);
        }
    }
}
