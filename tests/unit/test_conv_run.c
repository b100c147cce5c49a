/*
 * test_conv_run.c - the fused ways of running convs (layers/conv.c) give the bits of
 * the plain ones: kz_conv_run_group against its calls one after another, and
 * kz_conv_run_after against the elementwise pass followed by kz_conv_run.
 *
 * Data flow: seeded random convs (k = 1, and 3 taps at dilation 2 so that inputs carry
 * history rows; fp32 and, through kz_conv_use_bf16, bf16 panels; k_in odd and even, n
 * not a multiple of 16) and inputs -> both ways, on every kernel sub-level this CPU
 * runs and on pools of 1 and 3 threads -> memcmp of the outputs. Cases:
 *   group    three fp32 convs on three different inputs (the Winograd point GEMMs), and
 *            three bf16 convs on one input (the codec transformer's q / k / v), in
 *            store and accumulate mode (y starts non-zero);
 *   after    a pass that rewrites the new rows in place (y = 2 x + 1, a stand-in for
 *            SnakeBeta); the history rows must stay as they are, so a pass that also
 *            touched them changes the output;
 *   column   convs with one output column (the codec's final conv: 96 channels, 7 taps;
 *            others with dilation 3, odd channels, no bias, 1 to 130 rows) run with rows
 *            in the vector lanes, against the scalar definition kz_gemm_ref, in store
 *            and accumulate mode.
 */
#include "layers/conv.h"
#include "runtime/threadpool.h"
#include "test.h"
#include "test_levels.h"

#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x2545f4914f6cdd1dull;

static float rnd(void) {
    return (float)test_rng_below(&rng, 2000001) / 1e6f - 1.0f;
}

typedef struct shape {
    size_t k_in, n, taps, d, rows;
} shape;

static const shape SHAPES[] = {
    {64, 48, 1, 1, 9}, {37, 40, 1, 1, 30}, {48, 100, 3, 2, 17}, {33, 16, 3, 2, 4},
};

/* A conv of the shape with random weights and bias, bf16 panels if bf16. */
static void make_conv(kz_conv *c, const shape *s, int bf16) {
    const size_t k_rows = s->taps * s->k_in;
    float *src = malloc(k_rows * s->n * sizeof *src);
    for (size_t i = 0; i < k_rows * s->n; i++) {
        src[i] = rnd();
    }
    memset(c, 0, sizeof *c);
    CHECK(kz_packed_init_rows(&c->w, s->taps, s->k_in, s->n, src) == 0);
    free(src);
    c->bias = malloc(s->n * sizeof(float));
    for (size_t o = 0; o < s->n; o++) {
        c->bias[o] = rnd();
    }
    c->k_in = s->k_in;
    c->n = s->n;
    c->taps = s->taps;
    c->dilation = s->d;
    c->history = (s->taps - 1) * s->d;
    if (bf16) {
        CHECK(kz_conv_use_bf16(c) == KZ_OK);
    }
}

static float *random_rows(size_t n) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        x[i] = rnd();
    }
    return x;
}

static int same(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof *a) == 0;
}

enum { N_CALLS = 3 };

/* Three convs of the shape through kz_conv_run_group and one by one (bf16: one input). */
static void check_group(const shape *s, int bf16, kz_exec *e, kz_gemm_mode mode) {
    const size_t hist = (s->taps - 1) * s->d, x_len = (s->rows + hist) * s->k_in;
    const size_t y_len = s->rows * s->n;
    kz_conv c[N_CALLS];
    float *x[N_CALLS], *y_seq[N_CALLS], *y_group[N_CALLS];
    kz_conv_call calls[N_CALLS];
    for (int k = 0; k < N_CALLS; k++) {
        make_conv(&c[k], s, bf16);
        x[k] = bf16 && k > 0 ? x[0] : random_rows(x_len);
        y_seq[k] = random_rows(y_len);
        y_group[k] = malloc(y_len * sizeof(float));
        memcpy(y_group[k], y_seq[k], y_len * sizeof(float));
        calls[k] = (kz_conv_call){&c[k], y_group[k], s->n, x[k], s->k_in};
    }
    for (int k = 0; k < N_CALLS; k++) {
        kz_conv_run(&c[k], e, y_seq[k], s->n, x[k], s->k_in, s->rows, mode);
    }
    kz_conv_run_group(calls, N_CALLS, e, s->rows, mode);
    for (int k = 0; k < N_CALLS; k++) {
        CHECK_MSG(same(y_seq[k], y_group[k], y_len),
                  "%s group, call %d, k_in %zu n %zu taps %zu, %d threads, %s: differs",
                  bf16 ? "bf16" : "fp32", k, s->k_in, s->n, s->taps, kz_pool_threads(e->pool),
                  mode == KZ_GEMM_STORE ? "store" : "accumulate");
    }
    for (int k = 0; k < N_CALLS; k++) {
        if (!(bf16 && k > 0)) {
            free(x[k]);
        }
        free(y_seq[k]);
        free(y_group[k]);
        kz_conv_free(&c[k]);
    }
}

typedef struct affine_job {
    float *x; /* the new rows */
    size_t ch;
} affine_job;

/* The stand-in for SnakeBeta: rows [r0, r1) of the new rows become 2 x + 1. */
static void affine_rows(void *arg, size_t r0, size_t r1) {
    const affine_job *j = arg;
    for (size_t i = r0 * j->ch; i < r1 * j->ch; i++) {
        j->x[i] = 2.0f * j->x[i] + 1.0f;
    }
}

/* kz_conv_run_after against the pass over the new rows, then kz_conv_run. */
static void check_after(const shape *s, int bf16, kz_exec *e) {
    const size_t hist = (s->taps - 1) * s->d, x_len = (s->rows + hist) * s->k_in;
    const size_t y_len = s->rows * s->n;
    kz_conv c;
    make_conv(&c, s, bf16);
    float *x_seq = random_rows(x_len), *x_fused = malloc(x_len * sizeof(float));
    memcpy(x_fused, x_seq, x_len * sizeof(float));
    float *y_seq = malloc(y_len * sizeof(float)), *y_fused = malloc(y_len * sizeof(float));
    affine_job seq = {x_seq + hist * s->k_in, s->k_in}, fused = {x_fused + hist * s->k_in, s->k_in};
    affine_rows(&seq, 0, s->rows);
    kz_conv_run(&c, e, y_seq, s->n, x_seq, s->k_in, s->rows, KZ_GEMM_STORE);
    kz_conv_run_after(&c, e, affine_rows, &fused, y_fused, s->n, x_fused, s->k_in, s->rows,
                      KZ_GEMM_STORE);
    CHECK_MSG(same(y_seq, y_fused, y_len) && same(x_seq, x_fused, x_len),
              "%s after, k_in %zu n %zu taps %zu, %d threads: differs", bf16 ? "bf16" : "fp32",
              s->k_in, s->n, s->taps, kz_pool_threads(e->pool));
    free(x_seq);
    free(x_fused);
    free(y_seq);
    free(y_fused);
    kz_conv_free(&c);
}

static const shape COLUMN_SHAPES[] = {
    {96, 1, 7, 1, 130}, {37, 1, 7, 3, 64}, {5, 1, 1, 1, 1}, {96, 1, 7, 1, 7},
};

/* A one-column conv through kz_conv_run against kz_gemm_ref over the same panels. */
static void check_column(const shape *s, int bias, kz_exec *e, kz_gemm_mode mode) {
    const size_t hist = (s->taps - 1) * s->d, x_len = (s->rows + hist) * s->k_in;
    kz_conv c;
    make_conv(&c, s, 0);
    if (!bias) {
        free(c.bias);
        c.bias = NULL;
    }
    float *x = random_rows(x_len), *y_run = random_rows(s->rows);
    float *y_ref = test_copy_floats(y_run, s->rows);
    const kz_gemm_args a = {.y = y_ref, .ldy = 1, .x = x, .ldx = s->k_in, .tap_stride = s->d,
                            .w = &c.w, .bias = c.bias, .mode = mode, .n_rows = s->rows};
    kz_gemm_ref(&a, 0, s->rows, 0, c.w.n_panels);
    kz_conv_run(&c, e, y_run, 1, x, s->k_in, s->rows, mode);
    CHECK_MSG(same(y_ref, y_run, s->rows),
              "column, k_in %zu taps %zu d %zu rows %zu, bias %d, %d threads: differs from "
              "the definition", s->k_in, s->taps, s->d, s->rows, bias, kz_pool_threads(e->pool));
    free(x);
    free(y_run);
    free(y_ref);
    kz_conv_free(&c);
}

int main(void) {
    kz_pool *pools[2];
    CHECK(kz_pool_new(1, &pools[0]) == KZ_OK);
    CHECK(kz_pool_new(3, &pools[1]) == KZ_OK);
    // The bf16 rows of the largest input, twice (a level may round them to fp32 values).
    size_t scratch = 0;
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++) {
        const shape *s = &SHAPES[i];
        const size_t need = (s->rows + (s->taps - 1) * s->d) * (s->k_in + 1) * 2;
        scratch = need > scratch ? need : scratch;
    }
    uint16_t *x_bf16 = malloc(scratch * sizeof(uint16_t));
    for (size_t l = 0; l < test_n_levels(); l++) {
        const kz_kernels *k = test_level(l);
        if (!k) {
            continue;
        }
        for (int p = 0; p < 2; p++) {
            kz_exec e = {.k = k, .pool = pools[p], .x_bf16 = x_bf16, .x_bf16_len = scratch};
            for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++) {
                for (int bf16 = 0; bf16 < 2; bf16++) {
                    check_group(&SHAPES[i], bf16, &e, KZ_GEMM_STORE);
                    check_group(&SHAPES[i], bf16, &e, KZ_GEMM_ACCUMULATE);
                    check_after(&SHAPES[i], bf16, &e);
                }
            }
            for (size_t i = 0; i < sizeof COLUMN_SHAPES / sizeof COLUMN_SHAPES[0]; i++) {
                for (int bias = 0; bias < 2; bias++) {
                    check_column(&COLUMN_SHAPES[i], bias, &e, KZ_GEMM_STORE);
                    check_column(&COLUMN_SHAPES[i], bias, &e, KZ_GEMM_ACCUMULATE);
                }
            }
        }
    }
    free(x_bf16);
    kz_pool_free(pools[0]);
    kz_pool_free(pools[1]);
    return test_main_result("test_conv_run");
}
