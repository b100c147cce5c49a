/*
 * test_gemm_rows.c - the prefill GEMM over f32 weight rows (kernels.h gemm_rows)
 * and the weight conversions that feed it (rows_to_f32_bf16 / _f16 / _q8_0 / _q4_0),
 * at every ISA level this CPU runs (kz_kernels_for). Needs only the kernels, so
 * it also runs cross-built under qemu (scripts/test-aarch64.sh).
 *
 * Data flow: seeded random shapes -> each level's gemm_rows against the scalar
 * definition (n_in 1..300 and 1031, so every tail of 16, 8 and 4 lanes; n_tok and
 * n_rows 1..9, so every tile tail; ldx, ldy, ldw larger than the shape; store and
 * accumulate) -> the same call split into random row and token ranges must give
 * the same bits -> the conversions against the scalar definitions, bit for bit:
 * every bf16 and every f16 pattern (an f16 NaN only needs to stay a NaN), every
 * fp16 scale with every int8 code or nibble, any source alignment and row length.
 *
 * Tolerance of a level against the definition. Both compute s = sum_i w_i x_i
 * in float, in different orders (the levels with FMA, lanes and a reduction
 * tree; the definition sequentially, multiply then add); either is within
 * n u sum_i |w_i x_i| of the exact sum (u = 2^-24, to first order), so
 *   |level - def| <= 2 n u S + 2 u (|y0| + S),   S = sum_i |w_i x_i|,
 * the last term for the final addition y0 + s of accumulate mode (y0 the old
 * value, 0 in store mode). The test allows that plus 1e-30 and prints the
 * largest observed ratio. At n = 1031 the bound is 2.5e-4 S: a lost or doubled
 * term (about S / n = 1e-3 S) or a wrong lane fails it.
 */
#include <stdint.h>
#include <stdlib.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "test.h"
#include "test_levels.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float *rand_buf(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        p[i] = test_rng_float(&rng);
    }
    return p;
}

static double worst_ratio; /* largest |level - def| / bound seen */

typedef struct shape {
    size_t n_in, n_tok, n_rows, ldx, ldy, ldw;
    int accumulate;
} shape;

/* One shape at level k: against the definition, then split into row and token ranges. */
static void check_shape(const kz_kernels *k, const shape *s) {
    float *w = rand_buf(s->n_rows * s->ldw);
    float *x = rand_buf(s->n_tok * s->ldx);
    float *y0 = rand_buf(s->n_tok * s->ldy);
    const size_t ny = s->n_tok * s->ldy;
    float *ref = malloc(ny * sizeof(float));
    float *got = malloc(ny * sizeof(float));
    float *split = malloc(ny * sizeof(float));
    memcpy(ref, y0, ny * sizeof(float));
    memcpy(got, y0, ny * sizeof(float));
    memcpy(split, y0, ny * sizeof(float));
    kz_kernels_scalar.gemm_rows(ref, s->ldy, x, s->ldx, w, s->ldw, s->n_in, s->n_tok, s->n_rows,
                                s->accumulate);
    k->gemm_rows(got, s->ldy, x, s->ldx, w, s->ldw, s->n_in, s->n_tok, s->n_rows, s->accumulate);
    int bad = 0;
    int untouched = 1;
    for (size_t t = 0; t < s->n_tok; t++) {
        for (size_t c = 0; c < s->ldy; c++) {
            const size_t at = t * s->ldy + c;
            if (c >= s->n_rows) { // padding of y must not be written
                untouched &= memcmp(&got[at], &y0[at], sizeof(float)) == 0;
                continue;
            }
            double sum_abs = 0;
            for (size_t i = 0; i < s->n_in; i++) {
                sum_abs += fabs((double)w[c * s->ldw + i] * (double)x[t * s->ldx + i]);
            }
            const double y_old = s->accumulate ? fabs((double)y0[at]) : 0.0;
            const double u = 0x1p-24;
            const double tol =
                2.0 * (double)s->n_in * u * sum_abs + 2.0 * u * (y_old + sum_abs) + 1e-30;
            const double err = fabs((double)got[at] - (double)ref[at]);
            worst_ratio = err / tol > worst_ratio ? err / tol : worst_ratio;
            bad += !(err <= tol);
        }
    }
    CHECK_MSG(bad == 0, "%s n_in %zu n_tok %zu n_rows %zu acc %d: %d values off", k->name,
              s->n_in, s->n_tok, s->n_rows, s->accumulate, bad);
    CHECK_MSG(untouched, "%s: gemm_rows wrote y beyond n_rows", k->name);

    // Random row and token ranges, each its own call: the same bits.
    for (size_t o0 = 0; o0 < s->n_rows;) {
        const size_t o1 = o0 + 1 + test_rng_below(&rng, s->n_rows - o0);
        for (size_t t0 = 0; t0 < s->n_tok;) {
            const size_t t1 = t0 + 1 + test_rng_below(&rng, s->n_tok - t0);
            k->gemm_rows(split + t0 * s->ldy + o0, s->ldy, x + t0 * s->ldx, s->ldx,
                         w + o0 * s->ldw, s->ldw, s->n_in, t1 - t0, o1 - o0, s->accumulate);
            t0 = t1;
        }
        o0 = o1;
    }
    CHECK_MSG(memcmp(got, split, ny * sizeof(float)) == 0,
              "%s n_in %zu n_tok %zu n_rows %zu: a split of rows / tokens changes bits", k->name,
              s->n_in, s->n_tok, s->n_rows);
    free(w);
    free(x);
    free(y0);
    free(ref);
    free(got);
    free(split);
}

static void test_gemm(const kz_kernels *k) {
    for (int rep = 0; rep < 300; rep++) {
        shape s;
        s.n_in = rep % 50 == 0 ? 1031 : 1 + test_rng_below(&rng, 300);
        s.n_tok = 1 + test_rng_below(&rng, 9);
        s.n_rows = 1 + test_rng_below(&rng, 9);
        s.ldx = s.n_in + test_rng_below(&rng, 20);
        s.ldw = s.n_in + test_rng_below(&rng, 20);
        s.ldy = s.n_rows + test_rng_below(&rng, 6);
        s.accumulate = rep % 2;
        check_shape(k, &s);
    }
    // The prefill's shape: 22 tokens, one k-block of 1024 inputs, 4 rows.
    const shape prefill = {.n_in = 1024, .n_tok = 22, .n_rows = 4, .ldx = 1024, .ldy = 3072,
                           .ldw = 1024, .accumulate = 1};
    check_shape(k, &prefill);
}

/* Bit patterns of two float arrays equal (NaNs included). */
static int same_bits(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof(float)) == 0;
}

/* Equal bits, except that where the definition gives a NaN any NaN will do. */
static int same_or_nan(const float *ref, const float *got, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (isnan(ref[i]) ? !isnan(got[i]) : memcmp(&ref[i], &got[i], sizeof(float)) != 0) {
            return 0;
        }
    }
    return 1;
}

/* The 16-bit formats: every pattern, at 2- and 4-byte aligned starts, every short
 * length. f16: rows_to_f32_f16 (NaN payloads may be quieted), else bf16. */
static void test_halves(const kz_kernels *k, int f16) {
    void (*fn)(float *, const void *, size_t) = f16 ? k->rows_to_f32_f16 : k->rows_to_f32_bf16;
    void (*def)(float *, const void *, size_t) =
        f16 ? kz_kernels_scalar.rows_to_f32_f16 : kz_kernels_scalar.rows_to_f32_bf16;
    int (*same)(const float *, const float *, size_t) = f16 ? same_or_nan : same_bits;
    const char *name = f16 ? "f16" : "bf16";
    const size_t n = 65536 + 13; // every pattern, then a ragged tail
    uint16_t *src = malloc((n + 1) * sizeof(uint16_t));
    float *ref = malloc(n * sizeof(float));
    float *got = malloc(n * sizeof(float));
    for (size_t i = 0; i <= n; i++) {
        src[i] = (uint16_t)(i * 40503u);
    }
    for (size_t off = 0; off < 2; off++) { // 2-byte aligned and 4-byte aligned starts
        for (size_t len = 0; len < 40; len++) {
            def(ref, src + off, len);
            fn(got, src + off, len);
            CHECK_MSG(same(ref, got, len), "%s %s length %zu", k->name, name, len);
        }
        def(ref, src + off, n);
        fn(got, src + off, n);
        CHECK_MSG(same(ref, got, n), "%s %s, %zu values", k->name, name, n);
    }
    free(src);
    free(ref);
    free(got);
}

/* Blocks with every fp16 scale (block b has scale bits b) and random codes,
 * at byte offsets 0..3: each level's conversion bit for bit as the definition's. */
static void test_blocks(const kz_kernels *k, int q4) {
    const size_t n_blocks = 65536;
    const size_t bsize = q4 ? KZ_Q4_0_BLOCK_BYTES : KZ_Q8_0_BLOCK_BYTES;
    uint8_t *buf = malloc(n_blocks * bsize + 4);
    float *ref = malloc(n_blocks * KZ_QK * sizeof(float));
    float *got = malloc(n_blocks * KZ_QK * sizeof(float));
    void (*fn)(float *, const void *, size_t) = q4 ? k->rows_to_f32_q4_0 : k->rows_to_f32_q8_0;
    void (*def)(float *, const void *, size_t) =
        q4 ? kz_kernels_scalar.rows_to_f32_q4_0 : kz_kernels_scalar.rows_to_f32_q8_0;
    for (size_t off = 0; off < 4; off++) {
        uint8_t *blocks = buf + off;
        for (size_t b = 0; b < n_blocks; b++) {
            const uint16_t d = (uint16_t)b;
            memcpy(blocks + b * bsize, &d, 2);
            for (size_t j = 2; j < bsize; j++) { // every int8 code / nibble pair occurs
                blocks[b * bsize + j] = (uint8_t)test_rng_u64(&rng);
            }
        }
        def(ref, blocks, n_blocks * KZ_QK);
        fn(got, blocks, n_blocks * KZ_QK);
        CHECK_MSG(same_bits(ref, got, n_blocks * KZ_QK), "%s %s: all scales, offset %zu",
                  k->name, q4 ? "q4_0" : "q8_0", off);
        for (size_t nb = 1; nb <= 5; nb++) { // short rows from a block in the middle
            def(ref, blocks + 7 * bsize, nb * KZ_QK);
            fn(got, blocks + 7 * bsize, nb * KZ_QK);
            CHECK_MSG(same_bits(ref, got, nb * KZ_QK), "%s %s: %zu blocks", k->name,
                      q4 ? "q4_0" : "q8_0", nb);
        }
    }
    // The definition itself on a known block: d = 0.5 (0x3800), codes -128, 127, 3.
    uint8_t blk[KZ_Q8_0_BLOCK_BYTES] = {0x00, 0x38};
    blk[2] = 0x80;
    blk[3] = 0x7f;
    blk[4] = 0x03;
    fn(got, blk, KZ_QK);
    if (!q4) {
        CHECK(got[0] == -64.0f && got[1] == 63.5f && got[2] == 1.5f && got[3] == 0.0f);
    } else { // byte 0x80: element 0 = 0 - 8, element 16 = 8 - 8; 0x7f: 15 - 8, 7 - 8
        CHECK(got[0] == -4.0f && got[16] == 0.0f && got[1] == 3.5f && got[17] == -0.5f);
    }
    free(buf);
    free(ref);
    free(got);
}

int main(void) {
    for (size_t l = 0; l < test_n_levels(); l++) {
        const kz_kernels *k = test_level(l);
        if (!k) {
            continue;
        }
        worst_ratio = 0;
        test_gemm(k);
        test_halves(k, 0);
        test_halves(k, 1);
        test_blocks(k, 0);
        test_blocks(k, 1);
        printf("level %s: largest |level - definition| / bound %.3f\n", k->name, worst_ratio);
    }
    return test_main_result("test_gemm_rows");
}
