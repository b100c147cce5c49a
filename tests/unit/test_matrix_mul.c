/*
 * test_matrix_mul.c - the language-model projections as the model runs them
 * (layers/matrix.c kz_matrix_mul, kz_matrix_mul_group) at every ISA level this
 * CPU runs: the prompt prefill (22 tokens: F32, BF16 and F16 through rows_to_f32 +
 * gemm_rows by k-blocks, Q8_0 and Q4_0 through their int8 matmuls or the GEMM
 * path as the level's prefill_gemm_quant says, and through the GEMM path with
 * kz_matrix_mul_gemm) and decode steps (1..3 tokens: the per-dtype matmuls).
 *
 * Data flow: random f32 weights [rows, cols] -> stored as F32, BF16, F16, Q8_0 and
 * Q4_0 matrices (cols 96, 1056, 2080: one, two and three k-blocks, the last one
 * short; rows 37, so row groups of 4 and pool blocks of 16 have tails) -> 22
 * tokens (strided x and y) on pools of 1..4 threads ->
 *   - against a double-precision product with the weights the matrix holds
 *     (kz_matrix_row), S = sum_i |w_i x_i|, n = cols, u = 2^-24:
 *       GEMM path: within 2 n u S. Any float order of the sum, k-block partial
 *         sums included, is within (n + k-blocks) u S, and the conversions are
 *         exact; a wrong k-block offset, row or conversion is off by about
 *         S / k-blocks.
 *       int8 matmuls (Q8_0, Q4_0): within the bound of tests/unit/test_quant.c,
 *         whose SIMD kernels round the activations to int8 per block of 32:
 *         sum_i |w_i| (d_b / 2 + |x_i| 2^-22) + 2 (n + n / 32 + 8) u sum_i
 *         |w_i| (|x_i| + d_b), d_b = max |x| of i's block / 127;
 *   - bit-identical for every thread count;
 *   - on the GEMM path, a BF16, F16, Q8_0 or Q4_0 matrix gives the bits of an F32
 *     matrix holding its exact weights (the conversions are exact and the
 *     per-element sequence depends on cols alone); the int8 path gives the bits
 *     of the dtype's matmul over all rows;
 *   - the decode path (1..3 tokens) gives the per-dtype matmul's bits, a
 *     quantized matmul on 1..11 tokens gives the bits of one call per token, and
 *     kz_matrix_mul_group equals separate calls, and kz_matrix_mul_group_split at
 *     every split of the 22 tokens equals a group call for each part, on 1..4
 *     threads (each part's count picks its path: 1-3 tokens the matmuls, 4 or more
 *     the GEMM or the int8 matmuls);
 *   - the exec's flop and byte counters;
 *   - an exec with weights_reused (the code predictor's) runs the table's _reused
 *     quantized matmuls for decode steps, with the bits of the others (a table whose
 *     _reused entries count their calls).
 */
#include <stdint.h>
#include <stdlib.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "layers/matrix.h"
#include "runtime/threadpool.h"
#include "test.h"
#include "test_levels.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;

/* uniform in [-1, 1) (test.h) */
static float frand(void) {
    return test_rng_float(&rng);
}

enum { N_TOK = 22, MAX_THREADS = 4 };

typedef struct stored {
    kz_matrix m;
    uint8_t *data;
} stored;

/* w [rows, cols] f32 stored as dtype. */
static stored store(const float *w, size_t rows, size_t cols, kz_dtype dtype) {
    const size_t rb = kz_dtype_row_bytes(dtype, cols);
    stored s = {.data = malloc(rows * rb)};
    for (size_t r = 0; r < rows; r++) {
        const float *src = w + r * cols;
        uint8_t *dst = s.data + r * rb;
        if (dtype == KZ_DTYPE_F32) {
            memcpy(dst, src, cols * sizeof(float));
        } else if (dtype == KZ_DTYPE_BF16) {
            for (size_t i = 0; i < cols; i++) {
                const uint16_t h = kz_bf16_round(src[i]);
                memcpy(dst + 2 * i, &h, 2);
            }
        } else if (dtype == KZ_DTYPE_F16) {
            for (size_t i = 0; i < cols; i++) {
                const uint16_t h = kz_f32_to_fp16(src[i]);
                memcpy(dst + 2 * i, &h, 2);
            }
        } else if (dtype == KZ_DTYPE_Q8_0) {
            kz_quantize_row_q8_0(dst, src, cols);
        } else {
            kz_quantize_row_q4_0(dst, src, cols);
        }
    }
    s.m = (kz_matrix){.data = s.data, .dtype = dtype, .rows = rows, .cols = cols, .row_bytes = rb};
    return s;
}

/* The matrix's exact weights as an F32 matrix. */
static stored widen(const kz_matrix *m) {
    float *w = malloc(m->rows * m->cols * sizeof(float));
    for (size_t r = 0; r < m->rows; r++) {
        kz_matrix_row(m, r, w + r * m->cols);
    }
    stored s = store(w, m->rows, m->cols, KZ_DTYPE_F32);
    free(w);
    return s;
}

static const char *dtype_name(kz_dtype d) {
    return d == KZ_DTYPE_F32    ? "f32"
           : d == KZ_DTYPE_BF16 ? "bf16"
           : d == KZ_DTYPE_F16  ? "f16"
           : d == KZ_DTYPE_Q8_0 ? "q8_0"
                                : "q4_0";
}

/* The activation-rounding bound of test_quant.c for one row and token (header). */
static double quant_bound(const float *w, const float *x, size_t n) {
    double q = 0;
    double f = 0;
    for (size_t b = 0; b < n / KZ_QK; b++) {
        double amax = 0;
        for (size_t i = 32 * b; i < 32 * b + 32; i++) {
            amax = fabs((double)x[i]) > amax ? fabs((double)x[i]) : amax;
        }
        const double d = amax / 127.0;
        for (size_t i = 32 * b; i < 32 * b + 32; i++) {
            q += fabs((double)w[i]) * (d / 2 + fabs((double)x[i]) * 0x1p-22);
            f += fabs((double)w[i]) * (fabs((double)x[i]) + d);
        }
    }
    return q + 2.0 * ((double)n + (double)n / 32 + 8) * 0x1p-24 * f + 1e-30;
}

/* The per-dtype matmul of the kernel table. */
static void (*matmul_fn(const kz_kernels *k, kz_dtype d))(float *, size_t, const float *, size_t,
                                                          const void *, size_t, size_t, size_t,
                                                          size_t) {
    return d == KZ_DTYPE_F32    ? k->matmul_f32
           : d == KZ_DTYPE_BF16 ? k->matmul_bf16
           : d == KZ_DTYPE_F16  ? k->matmul_f16
           : d == KZ_DTYPE_Q8_0 ? k->matmul_q8_0
                                : k->matmul_q4_0;
}

/* y [n_tok, ldy] for each pool size 1..MAX_THREADS into ys[p], by kz_matrix_mul
 * or (gemm) kz_matrix_mul_gemm. */
static void run_pools(kz_pool *const *pools, const kz_kernels *k, const kz_matrix *m, float **ys,
                      size_t ldy, const float *x, size_t ldx, size_t n_tok, int gemm) {
    for (int p = 0; p < MAX_THREADS; p++) {
        kz_exec e = {.k = k, .pool = pools[p]};
        for (size_t i = 0; i < n_tok * ldy; i++) {
            ys[p][i] = -7.0f; // the padding columns must survive
        }
        (gemm ? kz_matrix_mul_gemm : kz_matrix_mul)(m, &e, ys[p], ldy, x, ldx, n_tok);
        CHECK_MSG(e.flop == 2.0 * (double)m->rows * (double)m->cols * (double)n_tok &&
                      e.bytes == (double)m->rows * (double)m->row_bytes,
                  "flop / byte counters");
    }
}

/* 22 tokens through kz_matrix_mul, or (gemm) kz_matrix_mul_gemm, which forces the
 * GEMM path on quantized weights too (header). same_values: an F32 matrix of m's
 * exact weights, which the GEMM path must match bit for bit. */
static void check_prefill(kz_pool *const *pools, const kz_kernels *k, const kz_matrix *m,
                          const float *x, size_t ldx, const kz_matrix *same_values, int gemm) {
    const int int8 = !gemm && !k->prefill_gemm_quant &&
                     (m->dtype == KZ_DTYPE_Q8_0 || m->dtype == KZ_DTYPE_Q4_0);
    const char *path = int8 ? "matmul" : "gemm";
    const size_t ldy = m->rows + 3;
    float *ys[MAX_THREADS], *alt = malloc(N_TOK * ldy * sizeof(float));
    for (int p = 0; p < MAX_THREADS; p++) {
        ys[p] = malloc(N_TOK * ldy * sizeof(float));
    }
    run_pools(pools, k, m, ys, ldy, x, ldx, N_TOK, gemm);
    float *wrow = malloc(m->cols * sizeof(float));
    int bad = 0;
    int pad = 1;
    for (size_t o = 0; o < m->rows; o++) {
        kz_matrix_row(m, o, wrow);
        for (size_t t = 0; t < N_TOK; t++) {
            double exact = 0;
            double sum_abs = 0;
            for (size_t i = 0; i < m->cols; i++) {
                exact += (double)wrow[i] * (double)x[t * ldx + i];
                sum_abs += fabs((double)wrow[i] * (double)x[t * ldx + i]);
            }
            const double tol = int8 ? quant_bound(wrow, x + t * ldx, m->cols)
                                    : 2.0 * (double)m->cols * 0x1p-24 * sum_abs + 1e-30;
            bad += !(fabs((double)ys[0][t * ldy + o] - exact) <= tol);
        }
    }
    for (size_t t = 0; t < N_TOK; t++) {
        for (size_t c = m->rows; c < ldy; c++) {
            pad &= ys[0][t * ldy + c] == -7.0f;
        }
    }
    CHECK_MSG(bad == 0, "%s %s %s [%zu, %zu] x %d tokens: %d values beyond the bound", k->name,
              path, dtype_name(m->dtype), m->rows, m->cols, N_TOK, bad);
    CHECK_MSG(pad, "%s %s %s: columns beyond rows written", k->name, path, dtype_name(m->dtype));
    for (int p = 1; p < MAX_THREADS; p++) {
        CHECK_MSG(memcmp(ys[0], ys[p], N_TOK * ldy * sizeof(float)) == 0,
                  "%s %s %s [%zu, %zu]: %d threads change bits", k->name, path,
                  dtype_name(m->dtype), m->rows, m->cols, p + 1);
    }
    if (same_values || int8) {
        memcpy(alt, ys[0], N_TOK * ldy * sizeof(float)); // the padding
        if (int8) { // the int8 matmul over all rows at once
            matmul_fn(k, m->dtype)(alt, ldy, x, ldx, m->data, m->cols, N_TOK, 0, m->rows);
        } else { // an F32 matrix with the same weights: the same bits
            kz_exec e = {.k = k, .pool = pools[1]};
            kz_matrix_mul(same_values, &e, alt, ldy, x, ldx, N_TOK);
        }
        CHECK_MSG(memcmp(ys[0], alt, N_TOK * ldy * sizeof(float)) == 0,
                  "%s %s %s [%zu, %zu]: differs from %s", k->name, path, dtype_name(m->dtype),
                  m->rows, m->cols, int8 ? "the dtype's matmul" : "f32 weights of the same values");
    }
    for (int p = 0; p < MAX_THREADS; p++) {
        free(ys[p]);
    }
    free(alt);
    free(wrow);
}

/* 1..3 tokens: the per-dtype matmul's bits (decode steps keep their kernels). */
static void check_decode(kz_pool *const *pools, const kz_kernels *k, const kz_matrix *m,
                         const float *x, size_t ldx) {
    const size_t ldy = m->rows;
    float *ys[MAX_THREADS], *ref = malloc(3 * ldy * sizeof(float));
    for (int p = 0; p < MAX_THREADS; p++) {
        ys[p] = malloc(3 * ldy * sizeof(float));
    }
    for (size_t n_tok = 1; n_tok <= 3; n_tok++) {
        matmul_fn(k, m->dtype)(ref, ldy, x, ldx, m->data, m->cols, n_tok, 0, m->rows);
        run_pools(pools, k, m, ys, ldy, x, ldx, n_tok, 0);
        for (int p = 0; p < MAX_THREADS; p++) {
            CHECK_MSG(memcmp(ref, ys[p], n_tok * ldy * sizeof(float)) == 0,
                      "%s %s: %zu tokens on %d threads differ from the matmul", k->name,
                      dtype_name(m->dtype), n_tok, p + 1);
        }
    }
    for (int p = 0; p < MAX_THREADS; p++) {
        free(ys[p]);
    }
    free(ref);
}

/* A quantized matmul on n_tok = 1..11 tokens at once gives the bits of one call
 * per token (the AVX-512 int8 kernels share weight unpacking among sets of up to
 * four tokens in calls of four or more: every set size 1..4 occurs). The f32 /
 * bf16 matmuls may sum 4 or more tokens in another order (kernels.h). */
static void check_token_sets(const kz_kernels *k, const kz_matrix *m, const float *x, size_t ldx) {
    const size_t ldy = m->rows;
    float *all = malloc(11 * ldy * sizeof(float));
    float *one = malloc(11 * ldy * sizeof(float));
    for (size_t n_tok = 1; n_tok <= 11; n_tok++) {
        matmul_fn(k, m->dtype)(all, ldy, x, ldx, m->data, m->cols, n_tok, 0, m->rows);
        for (size_t t = 0; t < n_tok; t++) {
            matmul_fn(k, m->dtype)(one + t * ldy, ldy, x + t * ldx, ldx, m->data, m->cols, 1, 0,
                                   m->rows);
        }
        CHECK_MSG(memcmp(all, one, n_tok * ldy * sizeof(float)) == 0,
                  "%s %s: %zu tokens in one call differ from one call per token", k->name,
                  dtype_name(m->dtype), n_tok);
    }
    free(all);
    free(one);
}

/* Two matrices in one pool run give the bits of two separate calls. */
static void check_group(kz_pool *const *pools, const kz_kernels *k, const kz_matrix *a,
                        const kz_matrix *b, const float *x, size_t ldx) {
    const size_t n = N_TOK * (a->rows + b->rows);
    float *sep = malloc(n * sizeof(float));
    float *grp = malloc(n * sizeof(float));
    kz_exec e = {.k = k, .pool = pools[1]};
    kz_matrix_mul(a, &e, sep, a->rows, x, ldx, N_TOK);
    kz_matrix_mul(b, &e, sep + N_TOK * a->rows, b->rows, x, ldx, N_TOK);
    const kz_matrix_out outs[2] = {{a, grp, a->rows}, {b, grp + N_TOK * a->rows, b->rows}};
    kz_matrix_mul_group(outs, 2, &e, x, ldx, N_TOK);
    CHECK_MSG(memcmp(sep, grp, n * sizeof(float)) == 0, "%s: group differs from separate calls",
              k->name);
    free(sep);
    free(grp);
}

/* kz_matrix_mul_group_split at every split gives the bits of a group call for the
 * tokens before the split and one for the rest (a and b: two dtypes in one group). */
static void check_split(kz_pool *const *pools, const kz_kernels *k, const kz_matrix *a,
                        const kz_matrix *b, const float *x, size_t ldx) {
    const size_t n = N_TOK * (a->rows + b->rows);
    float *sep = malloc(n * sizeof(float));
    float *got = malloc(n * sizeof(float));
    int bad = 0;
    for (size_t split = 1; split < N_TOK; split++) {
        kz_exec e = {.k = k, .pool = pools[0]};
        const kz_matrix_out first[2] = {{a, sep, a->rows}, {b, sep + N_TOK * a->rows, b->rows}};
        kz_matrix_mul_group(first, 2, &e, x, ldx, split);
        const kz_matrix_out rest[2] = {{a, sep + split * a->rows, a->rows},
                                       {b, sep + N_TOK * a->rows + split * b->rows, b->rows}};
        kz_matrix_mul_group(rest, 2, &e, x + split * ldx, ldx, N_TOK - split);
        for (int p = 0; p < MAX_THREADS; p++) {
            kz_exec ep = {.k = k, .pool = pools[p]};
            const kz_matrix_out outs[2] = {{a, got, a->rows}, {b, got + N_TOK * a->rows, b->rows}};
            kz_matrix_mul_group_split(outs, 2, &ep, x, ldx, N_TOK, split);
            bad += memcmp(sep, got, n * sizeof(float)) != 0;
        }
    }
    CHECK_MSG(bad == 0, "%s %s + %s: %d splits x thread counts differ from two calls", k->name,
              dtype_name(a->dtype), dtype_name(b->dtype), bad);
    free(sep);
    free(got);
}

/* Calls of the counting entry points below; the table they wrap. */
static int reused_calls;
static const kz_kernels *reused_base;

static void q8_counted(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                       size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    reused_calls++;
    reused_base->matmul_q8_0_reused(y, ldy, x, ldx, w, n_in, n_tok, o0, o1);
}

static void q4_counted(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                       size_t n_in, size_t n_tok, size_t o0, size_t o1) {
    reused_calls++;
    reused_base->matmul_q4_0_reused(y, ldy, x, ldx, w, n_in, n_tok, o0, o1);
}

/* Decode steps of a quantized matrix on an exec with weights_reused: the _reused entry
 * points run (one call per pool block), with the bits of the plain ones; without the
 * flag they do not run. */
static void check_reused(kz_pool *const *pools, const kz_kernels *k, const kz_matrix *m,
                         const float *x, size_t ldx) {
    kz_kernels counted = *k;
    counted.matmul_q8_0_reused = q8_counted;
    counted.matmul_q4_0_reused = q4_counted;
    reused_base = k;
    const size_t ldy = m->rows;
    float *ref = malloc(2 * ldy * sizeof(float)), *y = malloc(2 * ldy * sizeof(float));
    matmul_fn(k, m->dtype)(ref, ldy, x, ldx, m->data, m->cols, 2, 0, m->rows);
    kz_exec plain = {.k = &counted, .pool = pools[1]};
    reused_calls = 0;
    kz_matrix_mul(m, &plain, y, ldy, x, ldx, 2);
    CHECK_MSG(reused_calls == 0, "%s %s: the _reused matmul ran without weights_reused",
              k->name, dtype_name(m->dtype));
    kz_exec reused = {.k = &counted, .pool = pools[1], .weights_reused = true};
    kz_matrix_mul(m, &reused, y, ldy, x, ldx, 2);
    CHECK_MSG(reused_calls > 0, "%s %s: weights_reused did not run the _reused matmul",
              k->name, dtype_name(m->dtype));
    CHECK_MSG(memcmp(ref, y, 2 * ldy * sizeof(float)) == 0,
              "%s %s: the _reused matmul changes bits", k->name, dtype_name(m->dtype));
    free(ref);
    free(y);
}

int main(void) {
    kz_pool *pools[MAX_THREADS];
    for (int p = 0; p < MAX_THREADS; p++) {
        if (kz_pool_new(p + 1, &pools[p]) != KZ_OK) {
            fprintf(stderr, "kz_pool_new failed\n");
            return 1;
        }
    }
    static const size_t cols_list[] = {96, 1056, 2080};
    static const kz_dtype dtypes[] = {KZ_DTYPE_F32, KZ_DTYPE_BF16, KZ_DTYPE_F16, KZ_DTYPE_Q8_0,
                                      KZ_DTYPE_Q4_0};
    const size_t rows = 37;
    for (size_t l = 0; l < test_n_levels(); l++) {
        const kz_kernels *k = test_level(l);
        if (!k) {
            continue;
        }
        printf("level %s\n", k->name);
        for (size_t c = 0; c < sizeof cols_list / sizeof cols_list[0]; c++) {
            const size_t cols = cols_list[c], ldx = cols + 5;
            float *w = malloc(rows * cols * sizeof(float));
            float *x = malloc(N_TOK * ldx * sizeof(float));
            for (size_t i = 0; i < rows * cols; i++) {
                w[i] = 0.05f * frand();
            }
            for (size_t i = 0; i < N_TOK * ldx; i++) {
                x[i] = frand();
            }
            for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
                stored s = store(w, rows, cols, dtypes[d]);
                stored f = {.data = NULL};
                if (dtypes[d] != KZ_DTYPE_F32) {
                    f = widen(&s.m);
                }
                check_prefill(pools, k, &s.m, x, ldx, f.data ? &f.m : NULL, 0);
                if (dtypes[d] == KZ_DTYPE_Q8_0 || dtypes[d] == KZ_DTYPE_Q4_0) {
                    check_prefill(pools, k, &s.m, x, ldx, &f.m, 1);
                }
                check_decode(pools, k, &s.m, x, ldx);
                if (dtypes[d] == KZ_DTYPE_Q8_0 || dtypes[d] == KZ_DTYPE_Q4_0) {
                    check_token_sets(k, &s.m, x, ldx); // (the f32 / bf16 matmuls may differ)
                    check_reused(pools, k, &s.m, x, ldx);
                }
                free(s.data);
                free(f.data);
            }
            stored a = store(w, rows, cols, KZ_DTYPE_Q8_0);
            stored b = store(w, rows - 5, cols, KZ_DTYPE_BF16);
            check_group(pools, k, &a.m, &b.m, x, ldx);
            for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
                stored sd = store(w, rows - 3, cols, dtypes[d]);
                check_split(pools, k, &sd.m, &sd.m, x, ldx);
                check_split(pools, k, &a.m, &sd.m, x, ldx);
                free(sd.data);
            }
            free(a.data);
            free(b.data);
            free(w);
            free(x);
        }
    }
    for (int p = 0; p < MAX_THREADS; p++) {
        kz_pool_free(pools[p]);
    }
    return test_main_result("test_matrix_mul");
}
