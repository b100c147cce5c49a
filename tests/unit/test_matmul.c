/*
 * test_matmul.c - the language-model projection kernels (kernels.h
 * matmul_bf16, matmul_f16, matmul_f32): every ISA level this CPU runs against the
 * scalar definition, on seeded random shapes with ragged n_in (tails of every length),
 * 1..9 tokens (the 1-2 and 4-token paths) and strided x/y; bit-identical results for
 * any split of the output rows (what threads do); and f16 weights (with some of them
 * subnormal halves) giving each level's f32 result on the widened weights bit for bit.
 * Tolerance: a dot product of n terms in a different order differs from the
 * sequential one by at most about n * 2^-24 * sum|w x|; we allow 4x that.
 */
#include <stdint.h>
#include <stdlib.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "test.h"
#include "test_levels.h"

static uint64_t rng = 88172645463325252ull;

/* uniform in [-1, 1) (test.h) */
static float frand(void) {
    return test_rng_float(&rng);
}

enum { F32 = 0, BF16 = 1, F16 = 2 };
static const char *const kind_names[] = {"f32", "bf16", "f16"};
typedef void (*matmul_fn)(float *, size_t, const float *, size_t, const void *, size_t, size_t,
                          size_t, size_t);

static matmul_fn pick(const kz_kernels *k, int kind) {
    return kind == F32 ? k->matmul_f32 : kind == BF16 ? k->matmul_bf16 : k->matmul_f16;
}

/* Random weights in the kind's precision: wh holds the 16-bit codes, wf their values.
 * For f16 one weight in 8 is tiny, a subnormal half. */
static void make_weights(int kind, size_t n, uint16_t *wh, float *wf) {
    for (size_t i = 0; i < n; i++) {
        const float v = frand() * (kind == F16 && i % 8 == 3 ? 3e-5f : 1.0f);
        uint32_t b;
        memcpy(&b, &v, 4);
        wh[i] = kind == F16 ? kz_f32_to_fp16(v) : (uint16_t)(b >> 16);
        wf[i] = kind == F16 ? kz_fp16_to_f32(wh[i]) : kind == BF16 ? kz_bf16_to_f32(wh[i]) : v;
    }
}

static float bound(const float *wf, const float *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        s += fabs((double)wf[i] * x[i]);
    }
    return (float)(4.0 * (double)n * 5.96e-8 * s + 1e-30);
}

static void check_level(const kz_kernels *k, size_t rows, size_t n_in, size_t n_tok, int kind) {
    size_t ldx = n_in + 3, ldy = rows + 5;
    uint16_t *wh = malloc(rows * n_in * 2 + 2);
    float *wf = malloc(rows * n_in * 4 + 4), *x = malloc(n_tok * ldx * 4);
    float *ref = calloc(n_tok * ldy, 4), *got = calloc(n_tok * ldy, 4), *split = calloc(n_tok * ldy, 4);
    make_weights(kind, rows * n_in, wh, wf);
    for (size_t i = 0; i < n_tok * ldx; i++) {
        x[i] = frand();
    }
    const void *w = kind == F32 ? (const void *)wf : (const void *)wh;
    matmul_fn ref_fn = pick(&kz_kernels_scalar, kind), fn = pick(k, kind);
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
            float tol = bound(wf + o * n_in, x + t * ldx, n_in);
            bad += fabsf(got[t * ldy + o] - ref[t * ldy + o]) > tol;
        }
    }
    CHECK_MSG(bad == 0, "%s %s rows %zu n_in %zu n_tok %zu: %d values off", k->name,
              kind_names[kind], rows, n_in, n_tok, bad);
    CHECK_MSG(memcmp(got, split, n_tok * ldy * 4) == 0, "%s: row split changes bits", k->name);
    if (kind == F16) { // the f32 sequence on the widened weights
        k->matmul_f32(split, ldy, x, ldx, wf, n_in, n_tok, 0, rows);
        CHECK_MSG(memcmp(got, split, n_tok * ldy * 4) == 0,
                  "%s f16 rows %zu n_in %zu n_tok %zu: not the f32 result on widened weights",
                  k->name, rows, n_in, n_tok);
    }
    free(wh); free(wf); free(x); free(ref); free(got); free(split);
}

int main(void) {
    for (size_t l = 0; l < test_n_levels(); l++) {
        const kz_kernels *k = test_level(l);
        if (!k) {
            continue;
        }
        printf("level %s\n", k->name);
        for (int rep = 0; rep < 40; rep++) {
            size_t rows = 1 + (size_t)((frand() + 1.0f) * 40);
            size_t n_in = 1 + (size_t)((frand() + 1.0f) * 150);
            size_t n_tok = 1 + (size_t)rep % 9;
            check_level(k, rows, n_in, n_tok, rep % 3);
        }
        check_level(k, 64, 1024, 1, BF16);
        check_level(k, 48, 2048, 5, BF16);
        check_level(k, 64, 1024, 1, F16);
        check_level(k, 48, 2048, 5, F16);
    }
    return test_main_result("test_matmul");
}
