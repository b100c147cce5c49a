/*
 * test_matvec_batch.c - the batched matrix-vector products (kernels.h matvec_*) against
 * the decode step's matmuls of the same sub-level, bit for bit.
 *
 * The contract under test: a batch of B independent rows gives every row exactly the bits
 * the level's matmul gives that row alone (n_tok 1), so a request's results never depend
 * on its batch. For every sub-level this CPU runs (scalar included: the definitions),
 * every dtype (BF16, F16, F32, Q8_0, Q4_0), every prefetch policy and the _reused
 * entry points, input widths with ragged tails (float: any width; quantized: multiples of
 * 32, a partial 16-block group after full ones, past one 256-block activation chunk),
 * B = 1..20 (past one KZ_MATVEC_PASS), output rows split over two calls at a random row, a
 * row tile boundary inside the split, an all-zero token (zero activation scales) and
 * large-magnitude tokens. The matmuls themselves are held to the scalar definitions by
 * test_matmul.c and test_quant.c.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "test.h"
#include "test_levels.h"

enum { W_BF16, W_F16, W_F32, W_Q8, W_Q4, N_KINDS };
static const char *const kind_names[N_KINDS] = {"bf16", "f16", "f32", "q8_0", "q4_0"};

#define MAX_B 20

/* Bytes of one weight row of n_in inputs. */
static size_t row_bytes(int kind, size_t n_in) {
    switch (kind) {
    case W_BF16:
    case W_F16: return 2 * n_in;
    case W_F32: return 4 * n_in;
    case W_Q8: return kz_q8_0_row_bytes(n_in);
    default: return kz_q4_0_row_bytes(n_in);
    }
}

/* Random weights [rows, n_in] in the dtype (malloc'ed). */
static void *make_weights(uint64_t *rng, int kind, size_t rows, size_t n_in) {
    uint8_t *w = malloc(rows * row_bytes(kind, n_in) + 1);
    float *row = test_xs_array(rng, n_in, -1.0f, 1.0f);
    for (size_t o = 0; o < rows; o++) {
        for (size_t i = 0; i < n_in; i++) {
            row[i] = test_xs_float(rng, -1.0f, 1.0f);
        }
        uint8_t *dst = w + o * row_bytes(kind, n_in);
        for (size_t i = 0; i < n_in && kind <= W_F32; i++) {
            if (kind == W_F32) {
                memcpy(dst + 4 * i, &row[i], 4);
            } else {
                const uint16_t h = kind == W_BF16 ? kz_bf16_round(row[i]) : kz_f32_to_fp16(row[i]);
                memcpy(dst + 2 * i, &h, 2);
            }
        }
        if (kind == W_Q8) {
            kz_quantize_row_q8_0(dst, row, n_in);
        } else if (kind == W_Q4) {
            kz_quantize_row_q4_0(dst, row, n_in);
        }
    }
    free(row);
    return w;
}

/* The step matmul and the batched product of k for the dtype. */
static void pick(const kz_kernels *k, int kind, int reused, kz_matmul_fn *step,
                 kz_matmul_fn *batch) {
    switch (kind) {
    case W_BF16: *step = k->matmul_bf16; *batch = k->matvec_bf16; break;
    case W_F16: *step = k->matmul_f16; *batch = k->matvec_f16; break;
    case W_F32: *step = k->matmul_f32; *batch = k->matvec_f32; break;
    case W_Q8:
        *step = reused ? k->matmul_q8_0_reused : k->matmul_q8_0;
        *batch = reused ? k->matvec_q8_0_reused : k->matvec_q8_0;
        break;
    default:
        *step = reused ? k->matmul_q4_0_reused : k->matmul_q4_0;
        *batch = reused ? k->matvec_q4_0_reused : k->matvec_q4_0;
        break;
    }
}

/* One shape on one table: every B against the rows run one at a time. */
static void check_shape(const kz_kernels *k, uint64_t *rng, int kind, int reused, size_t n_in,
                        size_t rows) {
    kz_matmul_fn step, batch;
    pick(k, kind, reused, &step, &batch);
    const size_t ldx = n_in + 3, ldy = rows + 5;
    void *w = make_weights(rng, kind, rows, n_in);
    float *x = test_xs_array(rng, MAX_B * ldx, -1.0f, 1.0f);
    for (size_t i = 0; i < n_in; i++) {
        x[2 * ldx + i] = 0.0f;                        // token 2: zero activations
        x[3 * ldx + i] = x[3 * ldx + i] * 3.0e4f;     // token 3: large magnitudes
    }
    float *want = malloc(MAX_B * ldy * sizeof(float));
    float *got = malloc(MAX_B * ldy * sizeof(float));
    for (size_t t = 0; t < MAX_B; t++) {
        step(want + t * ldy, ldy, x + t * ldx, ldx, w, n_in, 1, 0, rows);
    }
    for (size_t b = 1; b <= MAX_B; b++) {
        for (size_t i = 0; i < MAX_B * ldy; i++) {
            got[i] = -7.0f; // a sentinel: rows [0, rows) are overwritten, the rest kept
        }
        const size_t split = test_xs_size(rng, 0, rows);
        batch(got, ldy, x, ldx, w, n_in, b, 0, split);
        batch(got, ldy, x, ldx, w, n_in, b, split, rows);
        size_t bad = 0;
        for (size_t t = 0; t < b; t++) {
            bad += memcmp(got + t * ldy, want + t * ldy, rows * sizeof(float)) != 0;
            for (size_t o = rows; o < ldy; o++) {
                bad += got[t * ldy + o] != -7.0f;
            }
        }
        for (size_t t = b; t < MAX_B; t++) {
            bad += got[t * ldy] != -7.0f;
        }
        CHECK_MSG(bad == 0, "%s %s%s n_in %zu rows %zu B %zu split %zu: %zu rows differ",
                  k->name, kind_names[kind], reused ? " reused" : "", n_in, rows, b, split, bad);
    }
    free(w);
    free(x);
    free(want);
    free(got);
}

static void check_level(const kz_kernels *k, uint64_t *rng) {
    static const size_t float_in[] = {1, 7, 16, 37, 64, 100, 1024};
    // 3232: 101 blocks, six full groups and a partial one in one chunk
    static const size_t quant_in[] = {0, 32, 96, 512, 544, 1024, 3232, 8192 + 96};
    static const size_t rows_of[] = {1, 5, 33};
    for (int kind = 0; kind < N_KINDS; kind++) {
        const int quant = kind == W_Q8 || kind == W_Q4;
        const size_t *ins = quant ? quant_in : float_in;
        const size_t n_ins = quant ? sizeof quant_in / sizeof *quant_in
                                   : sizeof float_in / sizeof *float_in;
        for (int reused = 0; reused <= quant; reused++) {
            for (size_t i = 0; i < n_ins; i++) {
                for (size_t r = 0; r < 3; r++) {
                    // big inputs with few rows only (the scalar level is slow)
                    if (ins[i] > 1024 && rows_of[r] > 5) {
                        continue;
                    }
                    check_shape(k, rng, kind, reused, ins[i], rows_of[r]);
                }
            }
        }
        // rows spanning several row tiles
        const size_t n_in = quant ? 256 : 200;
        check_shape(k, rng, kind, 0, n_in, 3 * kz_matvec_tile_rows(row_bytes(kind, n_in)) + 2);
    }
}

int main(void) {
    uint64_t rng = 0x6261746368ull;
    for (size_t l = 0; l < test_n_levels(); l++) {
        const kz_kernels *k = test_level(l);
        if (!k) {
            continue;
        }
        for (int p = 0; p < KZ_QPF_COUNT; p++) {
            if (p > 0 && k->quant == NULL) {
                continue;
            }
            kz_kernels t = *k;
            if (t.quant) {
                kz_kernels_set_prefetch(&t, (kz_quant_prefetch)p);
            }
            check_level(&t, &rng);
        }
    }
    return test_main_result("test_matvec_batch");
}
