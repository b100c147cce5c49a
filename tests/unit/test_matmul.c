/*
 * test_matmul.c - the language-model projection kernels (kernels.h
 * matmul_bf16, matmul_f32): every ISA level this CPU runs against the scalar
 * definition, on seeded random shapes with ragged n_in (tails of every length),
 * 1..9 tokens (the 1-2 and 4-token paths) and strided x/y; and bit-identical
 * results for any split of the output rows (what threads do).
 * Tolerance: a dot product of n terms in a different order differs from the
 * sequential one by at most about n * 2^-24 * sum|w x|; we allow 4x that.
 */
#include <stdint.h>
#include <stdlib.h>

#include "kernels/kernels.h"
#include "test.h"
#include "test_levels.h"

static uint64_t rng = 88172645463325252ull;

/* uniform in [-1, 1) (test.h) */
static float frand(void) {
    return test_rng_float(&rng);
}

static uint16_t to_bf16(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    return (uint16_t)(b >> 16);
}

static float bound(const uint16_t *wb, const float *wf, const float *x, size_t n, int bf16) {
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t b = (uint32_t)wb[i] << 16;
        float w;
        memcpy(&w, &b, 4);
        s += fabs((double)(bf16 ? w : wf[i]) * x[i]);
    }
    return (float)(4.0 * (double)n * 5.96e-8 * s + 1e-30);
}

static void check_level(const kz_kernels *k, size_t rows, size_t n_in, size_t n_tok, int bf16) {
    size_t ldx = n_in + 3, ldy = rows + 5;
    uint16_t *wb = malloc(rows * n_in * 2 + 2);
    float *wf = malloc(rows * n_in * 4 + 4), *x = malloc(n_tok * ldx * 4);
    float *ref = calloc(n_tok * ldy, 4), *got = calloc(n_tok * ldy, 4), *split = calloc(n_tok * ldy, 4);
    for (size_t i = 0; i < rows * n_in; i++) {
        wf[i] = frand();
        wb[i] = to_bf16(wf[i]);
    }
    for (size_t i = 0; i < n_tok * ldx; i++) {
        x[i] = frand();
    }
    const void *w = bf16 ? (const void *)wb : (const void *)wf;
    void (*ref_fn)(float *, size_t, const float *, size_t, const void *, size_t, size_t, size_t,
                   size_t) = bf16 ? kz_kernels_scalar.matmul_bf16 : kz_kernels_scalar.matmul_f32;
    void (*fn)(float *, size_t, const float *, size_t, const void *, size_t, size_t, size_t,
               size_t) = bf16 ? k->matmul_bf16 : k->matmul_f32;
    ref_fn(ref, ldy, x, ldx, w, n_in, n_tok, 0, rows);
    fn(got, ldy, x, ldx, w, n_in, n_tok, 0, rows);
    for (size_t o0 = 0; o0 < rows;) {
        size_t o1 = o0 + 1 + (size_t)(frand() + 1.0f) * 7;
        o1 = o1 > rows ? rows : o1;
        fn(split, ldy, x, ldx, w, n_in, n_tok, o0, o1);
        o0 = o1;
    }
    int bad = 0;
    for (size_t t = 0; t < n_tok; t++) {
        for (size_t o = 0; o < rows; o++) {
            float tol = bound(wb + o * n_in, wf + o * n_in, x + t * ldx, n_in, bf16);
            bad += fabsf(got[t * ldy + o] - ref[t * ldy + o]) > tol;
        }
    }
    CHECK_MSG(bad == 0, "%s %s rows %zu n_in %zu n_tok %zu: %d values off", k->name,
              bf16 ? "bf16" : "f32", rows, n_in, n_tok, bad);
    CHECK_MSG(memcmp(got, split, n_tok * ldy * 4) == 0, "%s: row split changes bits", k->name);
    free(wb); free(wf); free(x); free(ref); free(got); free(split);
}

int main(void) {
    for (size_t l = 0; l < TEST_N_LEVELS; l++) {
        const kz_kernels *k = test_level(test_levels[l]);
        if (!k) {
            continue;
        }
        printf("level %s\n", k->name);
        for (int rep = 0; rep < 40; rep++) {
            size_t rows = 1 + (size_t)((frand() + 1.0f) * 40);
            size_t n_in = 1 + (size_t)((frand() + 1.0f) * 150);
            size_t n_tok = 1 + (size_t)rep % 9;
            check_level(k, rows, n_in, n_tok, rep % 2);
        }
        check_level(k, 64, 1024, 1, 1);
        check_level(k, 48, 2048, 5, 1);
    }
    return test_main_result("test_matmul");
}
