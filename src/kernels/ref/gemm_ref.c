/*
 * gemm_ref.c - scalar definition of the conv-GEMM, and the weight packer.
 *
 * Data flow: at load, kz_packed_init() reads the taps matrices W_j[k_in, n]
 * through an accessor and writes them as 16-column panels (kz_packed in
 * kernels.h): panel p = [taps * k_in, 16], zero past column n, 64-byte
 * aligned. At run time kz_gemm_ref() computes rows [t0, t1) x panels [p0, p1)
 *
 *   x [rows + (taps-1)*tap_stride, ldx] --(taps x [k_in, 16] per panel)--> y [rows, ldy]
 *
 * with one fmaf per term, taps outer and input channels inner, then the bias
 * add and the residual add. That per-element sequence is the specification:
 * the AVX2 and AVX-512 gemms run the same sequence in vector lanes (one lane
 * per output column), so their results are bit-identical to this file's.
 */
#include "kernels/kernels.h"

#include "runtime/error.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int kz_packed_init(kz_packed *p, size_t taps, size_t k_in, size_t n, kz_pack_get_fn get,
                   const void *ctx) {
    memset(p, 0, sizeof *p);
    const size_t n_panels = (n + KZ_PANEL - 1) / KZ_PANEL;
    const size_t k_rows = taps * k_in;
    if (taps != 0 && k_rows / taps != k_in) {
        return -1;
    }
    // aligned_alloc wants a size that is a multiple of the alignment; never ask for 0 bytes.
    const size_t per_panel = k_rows * KZ_PANEL;
    if (n_panels != 0 && per_panel / KZ_PANEL != k_rows) {
        return -1;
    }
    if (n_panels != 0 && per_panel > SIZE_MAX / sizeof(float) / n_panels) {
        return -1;
    }
    size_t bytes = n_panels * per_panel * sizeof(float);
    bytes = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
    float *data = aligned_alloc(64, bytes);
    if (!data) {
        return -1;
    }
    for (size_t pn = 0; pn < n_panels; pn++) {
        float *panel = data + pn * per_panel;
        for (size_t j = 0; j < taps; j++) {
            for (size_t i = 0; i < k_in; i++) {
                float *row = panel + (j * k_in + i) * KZ_PANEL;
                for (size_t c = 0; c < KZ_PANEL; c++) {
                    const size_t o = pn * KZ_PANEL + c;
                    row[c] = o < n ? get(ctx, j, i, o) : 0.0f;
                }
            }
        }
    }
    p->data = data;
    p->k_in = k_in;
    p->taps = taps;
    p->n = n;
    p->n_panels = n_panels;
    return 0;
}

/* Row-major source -> panels: row r of the source is split into 16-column
 * pieces, each copied to row r of its panel; the last panel is zero-padded. */
int kz_packed_init_rows(kz_packed *p, size_t taps, size_t k_in, size_t n, const float *src) {
    memset(p, 0, sizeof *p);
    const size_t n_panels = (n + KZ_PANEL - 1) / KZ_PANEL;
    const size_t k_rows = taps * k_in;
    if ((taps != 0 && k_rows / taps != k_in) || (n_panels && k_rows > SIZE_MAX / KZ_PANEL / n_panels / sizeof(float))) {
        return -1;
    }
    const size_t per_panel = k_rows * KZ_PANEL;
    size_t bytes = n_panels * per_panel * sizeof(float);
    bytes = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
    float *data = aligned_alloc(64, bytes);
    if (!data) {
        return -1;
    }
    for (size_t r = 0; r < k_rows; r++) {
        const float *row = src + r * n;
        for (size_t pn = 0; pn < n_panels; pn++) {
            float *dst = data + pn * per_panel + r * KZ_PANEL;
            size_t c0 = pn * KZ_PANEL, w = n - c0 < KZ_PANEL ? n - c0 : KZ_PANEL;
            memcpy(dst, row + c0, w * sizeof *dst);
            memset(dst + w, 0, (KZ_PANEL - w) * sizeof *dst);
        }
    }
    *p = (kz_packed){.data = data, .k_in = k_in, .taps = taps, .n = n, .n_panels = n_panels};
    return 0;
}

size_t kz_packed_bytes(size_t taps, size_t k_in, size_t n) {
    const size_t n_panels = (n + KZ_PANEL - 1) / KZ_PANEL;
    const size_t k_rows = taps * k_in;
    if ((taps != 0 && k_rows / taps != k_in) ||
        (n_panels && k_rows > SIZE_MAX / KZ_PANEL / n_panels / sizeof(float))) {
        return 0;
    }
    return n_panels * k_rows * KZ_PANEL * sizeof(float);
}

void kz_packed_init_mapped(kz_packed *p, size_t taps, size_t k_in, size_t n, const float *data) {
    *p = (kz_packed){.data = (float *)(uintptr_t)data, .k_in = k_in, .taps = taps, .n = n,
                     .n_panels = (n + KZ_PANEL - 1) / KZ_PANEL, .mapped = true};
}

void kz_packed_free(kz_packed *p) {
    if (!p) {
        return;
    }
    if (!p->mapped) {
        free(p->data);
    }
    memset(p, 0, sizeof *p);
}

void kz_gemm_store_ref(float *yr, const float *acc, size_t width, const float *bias,
                       kz_gemm_mode mode) {
    for (size_t c = 0; c < width; c++) {
        float r = acc[c];
        if (bias) {
            r = r + bias[c];
        }
        if (mode == KZ_GEMM_ACCUMULATE) {
            r = yr[c] + r;
        }
        yr[c] = r;
    }
}

void kz_gemm_ref(const kz_gemm_args *a, size_t t0, size_t t1, size_t p0, size_t p1) {
    const kz_packed *w = a->w;
    KZ_ASSERT(t0 <= t1 && t1 <= a->n_rows && p0 <= p1 && p1 <= w->n_panels);
    KZ_ASSERT(a->ldy >= w->n && a->ldx >= w->k_in);
    const size_t k_rows = w->taps * w->k_in;
    for (size_t p = p0; p < p1; p++) {
        const float *panel = w->data + p * k_rows * KZ_PANEL;
        const size_t o0 = p * KZ_PANEL;
        const size_t width = w->n - o0 < KZ_PANEL ? w->n - o0 : KZ_PANEL;
        for (size_t t = t0; t < t1; t++) {
            float acc[KZ_PANEL] = {0};
            for (size_t j = 0; j < w->taps; j++) {
                const float *xr = a->x + (t + j * a->tap_stride) * a->ldx;
                const float *wr = panel + j * w->k_in * KZ_PANEL;
                for (size_t i = 0; i < w->k_in; i++) {
                    for (size_t c = 0; c < width; c++) {
                        acc[c] = fmaf(xr[i], wr[i * KZ_PANEL + c], acc[c]);
                    }
                }
            }
            kz_gemm_store_ref(a->y + t * a->ldy + o0, acc, width,
                              a->bias ? a->bias + o0 : NULL, a->mode);
        }
    }
}
