/*
 * matrix.c - binding mapped weight matrices and running them on the pool.
 *
 * kz_matrix_mul cuts the output rows into blocks (a multiple of 16 rows, at
 * least 4 blocks per thread when there is enough work) and calls the kernel
 * table's matmul for the weight's dtype on each block.
 */
#include "layers/matrix.h"

#include <string.h>

#include "kernels/quant.h"
#include "runtime/error.h"

static kz_status check_dtype(const kz_weights *f, const kz_tensor *t, int64_t cols) {
    const char *path = kz_weights_path(f);
    switch (t->dtype) {
    case KZ_DTYPE_BF16:
    case KZ_DTYPE_F32:
        if (((uintptr_t)t->data % (t->dtype == KZ_DTYPE_BF16 ? 2 : 4)) != 0) {
            return kz_error_set(KZ_STATUS_BAD_MODEL,
                                "%s: tensor '%s' data is not aligned to its dtype", path, t->name);
        }
        return KZ_OK;
    case KZ_DTYPE_Q8_0:
    case KZ_DTYPE_Q4_0:
        if (cols % KZ_QK != 0) {
            return kz_error_set(KZ_STATUS_BAD_MODEL,
                                "%s: tensor '%s' is %s with %lld columns, not a multiple of %d",
                                path, t->name, t->dtype_name, (long long)cols, KZ_QK);
        }
        return KZ_OK;
    default:
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: tensor '%s' has dtype %s, expected BF16, F32, Q8_0 or Q4_0",
                            path, t->name, t->dtype_name);
    }
}

kz_status kz_matrix_bind(kz_matrix *m, const kz_weights *f, const char *name, int64_t rows,
                         int64_t cols) {
    memset(m, 0, sizeof *m);
    int64_t shape[2] = {rows, cols};
    const kz_tensor *t;
    kz_status st = kz_weights_get(f, name, 2, shape, &t);
    st = st == KZ_OK ? check_dtype(f, t, cols) : st;
    if (st != KZ_OK) {
        return st;
    }
    *m = (kz_matrix){.data = t->data, .dtype = t->dtype, .rows = (size_t)rows, .cols = (size_t)cols,
                     .row_bytes = kz_dtype_row_bytes(t->dtype, (size_t)cols)};
    return KZ_OK;
}

typedef struct mul_job {
    const kz_matrix_out *outs;
    size_t n_outs;
    size_t first[KZ_MATRIX_MAX_GROUP + 1]; /* first chunk of each matrix; [n_outs] = total */
    size_t block[KZ_MATRIX_MAX_GROUP];     /* rows per chunk of each matrix */
    const kz_kernels *k;
    const float *x;
    size_t ldx, n_tok;
} mul_job;

static void run_rows(const kz_kernels *k, const kz_matrix_out *o, const float *x, size_t ldx,
                     size_t n_tok, size_t o0, size_t o1) {
    const kz_matrix *m = o->m;
    switch (m->dtype) {
    case KZ_DTYPE_BF16:
        k->matmul_bf16(o->y, o->ldy, x, ldx, m->data, m->cols, n_tok, o0, o1);
        break;
    case KZ_DTYPE_Q8_0:
        k->matmul_q8_0(o->y, o->ldy, x, ldx, m->data, m->cols, n_tok, o0, o1);
        break;
    case KZ_DTYPE_Q4_0:
        k->matmul_q4_0(o->y, o->ldy, x, ldx, m->data, m->cols, n_tok, o0, o1);
        break;
    default:
        k->matmul_f32(o->y, o->ldy, x, ldx, m->data, m->cols, n_tok, o0, o1);
        break;
    }
}

static void mul_rows(void *arg, size_t chunk, int worker) {
    const mul_job *j = arg;
    (void)worker;
    size_t i = 0;
    while (chunk >= j->first[i + 1]) {
        i++;
    }
    const kz_matrix_out *o = &j->outs[i];
    size_t o0 = (chunk - j->first[i]) * j->block[i];
    size_t o1 = o0 + j->block[i] < o->m->rows ? o0 + j->block[i] : o->m->rows;
    run_rows(j->k, o, j->x, j->ldx, j->n_tok, o0, o1);
}

/* Rows per chunk: a multiple of 16, about 8 chunks per thread per matrix. */
static size_t block_rows(size_t rows, size_t n_threads) {
    size_t block = (rows + n_threads * 8 - 1) / (n_threads * 8);
    block = (block + 15) / 16 * 16;
    return block < 16 ? 16 : block;
}

void kz_matrix_mul_group(const kz_matrix_out *outs, size_t n_outs, kz_exec *e, const float *x,
                         size_t ldx, size_t n_tok) {
    KZ_ASSERT(n_outs >= 1 && n_outs <= KZ_MATRIX_MAX_GROUP);
    size_t n_threads = (size_t)kz_pool_threads(e->pool);
    mul_job j = {.outs = outs, .n_outs = n_outs, .k = e->k, .x = x, .ldx = ldx, .n_tok = n_tok};
    for (size_t i = 0; i < n_outs; i++) {
        const kz_matrix *m = outs[i].m;
        j.block[i] = block_rows(m->rows, n_threads);
        j.first[i + 1] = j.first[i] + (m->rows + j.block[i] - 1) / j.block[i];
        e->flop += 2.0 * (double)m->rows * (double)m->cols * (double)n_tok;
        e->bytes += (double)m->rows * (double)m->row_bytes;
    }
    kz_pool_run(e->pool, j.first[n_outs], mul_rows, &j);
}

void kz_matrix_mul(const kz_matrix *m, kz_exec *e, float *y, size_t ldy, const float *x,
                   size_t ldx, size_t n_tok) {
    kz_matrix_out o = {.m = m, .y = y, .ldy = ldy};
    kz_matrix_mul_group(&o, 1, e, x, ldx, n_tok);
}

void kz_matrix_row(const kz_matrix *m, size_t row, float *dst) {
    const uint8_t *src = (const uint8_t *)m->data + row * m->row_bytes;
    switch (m->dtype) {
    case KZ_DTYPE_F32:
        memcpy(dst, src, m->cols * sizeof *dst);
        break;
    case KZ_DTYPE_Q8_0:
        kz_dequantize_row_q8_0(dst, src, m->cols);
        break;
    case KZ_DTYPE_Q4_0:
        kz_dequantize_row_q4_0(dst, src, m->cols);
        break;
    default:
        for (size_t i = 0; i < m->cols; i++) {
            uint32_t bits = (uint32_t)((const uint16_t *)(const void *)src)[i] << 16;
            memcpy(&dst[i], &bits, sizeof bits);
        }
        break;
    }
}
