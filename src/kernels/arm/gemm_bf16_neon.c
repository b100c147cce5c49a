/*
 * gemm_bf16_neon.c - the bf16 conv-GEMM on NEON FMAs (no bf16 instructions needed):
 * bit-identical to its scalar definition ref/gemm_bf16_ref.c, and the rounding of
 * activations to bf16 values kept in fp32. The NEON twin of x86/gemm_bf16_avx2.c.
 *
 * Why: the bf16 panels are half the bytes of the fp32 ones, which on a phone is
 * memory (the codec's projections, pointwise convs and first transposed conv:
 * ~135 MB less at 0.6B) and weight traffic at small chunks, for the FMAs of the
 * fp32 GEMM plus two TRNs per weight vector.
 *
 * Data flow: layers/conv.c rounds the conv input once per call with
 * kz_round_bf16_f32_neon (bf16 values as fp32, args.xf); given only bf16 rows
 * (args.x: tests, other callers) each tile widens its rows per tap segment (SHLL).
 * Then the blocking of gemm_panel_drive.h (shared with AVX2: row blocks, 16-column
 * panels, k blocks of up to KC pair rows of 64 bytes) runs this file's micro-tile:
 *
 *         for each tile of MR = 4 rows: 16 q-register accumulators [4, 16]
 *           per pair row r = j * k_pairs + q: four loads of W (one 64-byte row),
 *           each widened to its odd channel (TRN2 with zero: the high halves) and
 *           even one (TRN1 with zero: the low halves moved up); per row LD1R
 *           broadcasts of x1 and x0, then
 *             acc = fma(x1, w1, acc); acc = fma(x0, w0, acc)   (four vectors)
 *           partial sums parked in part[] between k blocks; after the last:
 *           + bias, + y (accumulate mode), store of the valid columns
 *
 * Exactness: a product of two bf16 values is exact in fp32 and vfmaq_f32 rounds
 * once like fmaf (AArch64 keeps denormals unless FPCR.FZ is set; the library never
 * sets it), so every element equals the definition bit for bit, from x or xf,
 * whatever the split (tests/unit/test_gemm_bf16.c, run under qemu-aarch64).
 * Registers: 16 accumulators + 8 widened W + zero + 2 broadcasts of the 32 q
 * registers. `fast` keeps `winograd` on NEON (the table's bf16_gain): no ARM timing
 * shows this kernel ahead of the fp32 GEMM.
 */
#include "kernels/kernels.h"

#include "kernels/arm/gemm_store_neon.h"
#include "runtime/error.h"

#include <arm_neon.h>

enum {
    MR = 4,       // output rows per micro-tile
    KC = 128,     // pair rows per k block (8 KB of panel)
    MC_MAX = 192, // most rows per row block (a multiple of MR); part[] is 12 KB of stack
    PREFETCH_ROWS = 16, // pair rows (64 B each) prefetched ahead (gemm_neon.c)
};
// Budget for the x rows (all taps) of one row block, reused by every panel from L2.
#define X_BLOCK_BYTES (192u * 1024u)

#include "kernels/gemm_panel_drive.h"

/* x bf16 values [0, n) widened to fp32 (exact: the bits move to the high half). */
static inline __attribute__((always_inline)) void widen(float *dst, const uint16_t *src,
                                                        size_t n) {
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        vst1q_f32(dst + i, vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(src + i), 16)));
    }
    for (; i < n; i++) {
        dst[i] = kz_bf16_to_f32(src[i]);
    }
}

/* One micro-tile of `rows` (1..MR, a constant after inlining) over one k block; the
 * accumulators are named so that GCC keeps them in registers. */
#define TILE_ROWS(X) X(0) X(1) X(2) X(3)
static inline __attribute__((always_inline)) void tile(const tile_job *jb, const int rows) {
    float xw[MR][2 * KC];
    const float32x4_t zero = vdupq_n_f32(0.0f);
    const uint16x8_t zero16 = vdupq_n_u16(0);
#define TILE_INIT(q)                                                                           \
    float32x4_t a##q##_0 = zero, a##q##_1 = zero, a##q##_2 = zero, a##q##_3 = zero;            \
    if (rows > q && !jb->first) {                                                              \
        a##q##_0 = vld1q_f32(jb->part + q * KZ_PANEL);                                         \
        a##q##_1 = vld1q_f32(jb->part + q * KZ_PANEL + 4);                                     \
        a##q##_2 = vld1q_f32(jb->part + q * KZ_PANEL + 8);                                     \
        a##q##_3 = vld1q_f32(jb->part + q * KZ_PANEL + 12);                                    \
    }
    TILE_ROWS(TILE_INIT)
    size_t r = jb->r0;
    while (r < jb->r1) {
        // One segment per tap inside the k block: x moves to the tap's rows.
        const size_t j = r / jb->tap_rows;
        const size_t q0 = r - j * jb->tap_rows;
        const size_t end = (j + 1) * jb->tap_rows < jb->r1 ? (j + 1) * jb->tap_rows : jb->r1;
        const uint16_t *wp = (const uint16_t *)jb->panel + r * KZ_PANEL * 2;
        const size_t count = end - r;
        const float *xs = jb->x ? jb->x + j * jb->tap_step + 2 * q0 : xw[0];
        const size_t xstride = jb->x ? jb->ldx : 2 * KC;
        if (!jb->x) {
            const uint16_t *xp = jb->xh + j * jb->tap_step + 2 * q0;
            for (int q = 0; q < rows; q++) {
                widen(xw[q], xp + (size_t)q * jb->ldx, 2 * count);
            }
        }
        for (size_t k = 0; k < count; k++) {
            __builtin_prefetch(wp + (k + PREFETCH_ROWS) * KZ_PANEL * 2);
            const uint16_t *wk = wp + k * KZ_PANEL * 2;
            float32x4_t w1[4], w0[4];
            for (int i = 0; i < 4; i++) {
                const uint16x8_t v = vld1q_u16(wk + 8 * i);
                w1[i] = vreinterpretq_f32_u16(vtrn2q_u16(zero16, v));
                w0[i] = vreinterpretq_f32_u16(vtrn1q_u16(zero16, v));
            }
#define TILE_FMA(q)                                                                            \
    if (rows > q) {                                                                            \
        const float32x4_t x1 = vld1q_dup_f32(xs + q * xstride + 2 * k + 1);                    \
        const float32x4_t x0 = vld1q_dup_f32(xs + q * xstride + 2 * k);                        \
        a##q##_0 = vfmaq_f32(vfmaq_f32(a##q##_0, x1, w1[0]), x0, w0[0]);                       \
        a##q##_1 = vfmaq_f32(vfmaq_f32(a##q##_1, x1, w1[1]), x0, w0[1]);                       \
        a##q##_2 = vfmaq_f32(vfmaq_f32(a##q##_2, x1, w1[2]), x0, w0[2]);                       \
        a##q##_3 = vfmaq_f32(vfmaq_f32(a##q##_3, x1, w1[3]), x0, w0[3]);                       \
    }
            TILE_ROWS(TILE_FMA)
        }
        r = end;
    }
#define TILE_DONE(q)                                                                           \
    if (rows > q) {                                                                            \
        const float32x4_t v##q[4] = {a##q##_0, a##q##_1, a##q##_2, a##q##_3};                  \
        if (!jb->last) {                                                                       \
            for (int i = 0; i < 4; i++) {                                                      \
                vst1q_f32(jb->part + q * KZ_PANEL + 4 * i, v##q[i]);                           \
            }                                                                                  \
        } else {                                                                               \
            gemm_store_row_neon(jb->y + q * jb->ldy, v##q, jb->width, jb->bias,            \
                                jb->accumulate);                                           \
        }                                                                                      \
    }
    TILE_ROWS(TILE_DONE)
}
#undef TILE_INIT
#undef TILE_FMA
#undef TILE_DONE

static void tile_rows(const tile_job *jb, size_t rows) {
    switch (rows) {
    case 1: tile(jb, 1); break;
    case 2: tile(jb, 2); break;
    case 3: tile(jb, 3); break;
    default: tile(jb, MR); break;
    }
}

void kz_gemm_bf16_neon(const kz_gemm_bf16_args *a, size_t t0, size_t t1, size_t p0, size_t p1) {
    const panel_gemm g = panel_gemm_bf16(a);
    panel_drive(&g, t0, t1, p0, p1);
}

/* kz_bf16_round on 4 lanes, as bf16 bits in the low halves. */
static inline uint32x4_t round4(float32x4_t v) {
    const uint32x4_t u = vreinterpretq_u32_f32(v);
    const uint32x4_t top = vshrq_n_u32(u, 16);
    const uint32x4_t near = vshrq_n_u32(
        vaddq_u32(vaddq_u32(u, vdupq_n_u32(0x7fffu)), vandq_u32(top, vdupq_n_u32(1u))), 16);
    const uint32x4_t zero = vandq_u32(top, vdupq_n_u32(0x8000u));
    const uint32x4_t nan = vorrq_u32(top, vdupq_n_u32(0x40u));
    const uint32x4_t is_denormal = vceqq_u32(vandq_u32(u, vdupq_n_u32(0x7f800000u)),
                                             vdupq_n_u32(0));
    const uint32x4_t is_nan = vcgtq_u32(vandq_u32(u, vdupq_n_u32(0x7fffffffu)),
                                        vdupq_n_u32(0x7f800000u));
    return vbslq_u32(is_nan, nan, vbslq_u32(is_denormal, zero, near));
}

void kz_round_bf16_f32_neon(float *y, size_t ldy, const float *x, size_t ldx, size_t n_rows,
                            size_t n_cols) {
    KZ_ASSERT(ldy >= n_cols);
    for (size_t r = 0; r < n_rows; r++) {
        float *yr = y + r * ldy;
        const float *xr = x + r * ldx;
        size_t c = 0;
        for (; c + 4 <= n_cols; c += 4) {
            const uint32x4_t b = vshlq_n_u32(round4(vld1q_f32(xr + c)), 16);
            vst1q_f32(yr + c, vreinterpretq_f32_u32(b));
        }
        for (; c < n_cols; c++) {
            yr[c] = kz_bf16_to_f32(kz_bf16_round(xr[c]));
        }
        for (c = n_cols; c < ldy; c++) {
            yr[c] = 0.0f;
        }
    }
}
