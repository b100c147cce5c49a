/*
 * matrix.h - weight matrices of the language models, used in place.
 *
 * A kz_matrix is a row-major [rows, cols] = [out, in] weight (as nn.Linear and
 * nn.Embedding store it) pointing into the mapped checkpoint: BF16 as released,
 * F16 or F32, or block-quantized Q8_0 / Q4_0 from a GGUF file (kernels/quant.h).
 * kz_matrix_mul computes y[t, :] = W x[t, :] for the tokens of a decode step or
 * a whole prompt, split over the pool by output rows (prompts through the
 * register-tiled GEMM where it is faster, matrix.c); every output element is
 * summed in an order fixed by the shapes, so results do not depend on the
 * thread count. kz_matrix_row reads one row as f32 (embedding lookup).
 */
#ifndef KZ_MATRIX_H
#define KZ_MATRIX_H

#include <stddef.h>

#include "io/weights.h"
#include "layers/conv.h"

typedef struct kz_matrix {
    const void *data; /* [rows, cols], borrowed from the mapping */
    kz_dtype dtype;   /* KZ_DTYPE_BF16, F16, F32, Q8_0 or Q4_0 */
    size_t rows, cols;
    size_t row_bytes; /* bytes of one row in its dtype */
} kz_matrix;

/* Binds tensor `name` of shape [rows, cols] (BF16, F16, F32, Q8_0 or Q4_0; quantized
 * ones need cols % 32 == 0). */
kz_status kz_matrix_bind(kz_matrix *m, const kz_weights *f, const char *name, int64_t rows,
                         int64_t cols);

/* y[t * ldy + o] = sum_i W[o, i] x[t * ldx + i] for t < n_tok, o < rows. */
void kz_matrix_mul(const kz_matrix *m, kz_exec *e, float *y, size_t ldy, const float *x,
                   size_t ldx, size_t n_tok);

/* Several matrices applied to the same input in one pool run (q/k/v, gate/up):
 * outs[i].y[t * ldy + o] = sum_i W_i[o, :] x[t, :]. Same results as separate
 * kz_matrix_mul calls, one dispatch instead of n_outs. */
#define KZ_MATRIX_MAX_GROUP 4
typedef struct kz_matrix_out {
    const kz_matrix *m;
    float *y;
    size_t ldy;
} kz_matrix_out;
void kz_matrix_mul_group(const kz_matrix_out *outs, size_t n_outs, kz_exec *e, const float *x,
                         size_t ldx, size_t n_tok);

/* kz_matrix_mul_group with the tokens split at `split` (0 < split < n_tok): the same
 * bits as a call over tokens [0, split) and then one over [split, n_tok) (each call's
 * token count picks its kernel path), with the weights read once: all tokens in one
 * pass when the paths and their sums agree for the three counts, else each block of
 * weight rows runs the two token ranges back to back while it is in cache. split 0
 * means no split: kz_matrix_mul_group. */
void kz_matrix_mul_group_split(const kz_matrix_out *outs, size_t n_outs, kz_exec *e,
                               const float *x, size_t ldx, size_t n_tok, size_t split);

/* Decode steps of n_rows independent requests (continuous batching), one row of x each:
 * the y of kz_matrix_mul, every row bit for bit what kz_matrix_mul gives for that row
 * alone (n_tok 1) whatever n_rows, through the table's batched matrix-vector products
 * (kernels.h matvec_*), which read each weight row from memory once per KZ_MATVEC_PASS
 * rows. Never the GEMM path, whose sums differ. The group form runs several matrices on
 * the same rows in one pool run, as kz_matrix_mul_group. n_rows 0 does nothing. */
void kz_matrix_mul_batch(const kz_matrix *m, kz_exec *e, float *y, size_t ldy, const float *x,
                         size_t ldx, size_t n_rows);
void kz_matrix_mul_group_batch(const kz_matrix_out *outs, size_t n_outs, kz_exec *e,
                               const float *x, size_t ldx, size_t n_rows);

/* kz_matrix_mul through the prefill's GEMM path (rows_to_f32 + gemm_rows,
 * matrix.c) whatever the dtype, n_tok and level, where kz_matrix_mul may keep the
 * per-dtype matmuls: for benchmarks and tests. */
void kz_matrix_mul_gemm(const kz_matrix *m, kz_exec *e, float *y, size_t ldy, const float *x,
                        size_t ldx, size_t n_tok);

/* Maps the matrix's pages now (kz_map_populate_range) for weights that every step
 * reads in full, so that the first synthesis takes no page faults on them. Not for
 * embeddings, which are read a few rows at a time. */
void kz_matrix_populate(const kz_matrix *m);

/* dst[cols] = W[row, :] as f32. */
void kz_matrix_row(const kz_matrix *m, size_t row, float *dst);

#endif
