/*
 * matrix.c - binding mapped weight matrices and running them on the pool.
 *
 * kz_matrix_mul cuts the output rows into blocks (a multiple of 16 rows, at
 * least 4 blocks per thread when there is enough work) and calls the kernel
 * table's matmul for the weight's dtype on each block.
 */
#include "layers/matrix.h"

#include <string.h>

#include "runtime/error.h"

kz_status kz_matrix_bind(kz_matrix *m, const kz_st_file *f, const char *name, int64_t rows,
                         int64_t cols) {
    memset(m, 0, sizeof *m);
    int64_t shape[2] = {rows, cols};
    const kz_st_tensor *t;
    kz_status st = kz_st_get(f, name, 2, shape, &t);
    if (st != KZ_OK) {
        return st;
    }
    if (t->dtype != KZ_DTYPE_BF16 && t->dtype != KZ_DTYPE_F32) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: tensor '%s' has dtype %s, expected BF16 or F32",
                            kz_st_path(f), name, t->dtype_name);
    }
    if (((uintptr_t)t->data % (t->dtype == KZ_DTYPE_BF16 ? 2 : 4)) != 0) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: tensor '%s' data is not aligned to its dtype",
                            kz_st_path(f), name);
    }
    *m = (kz_matrix){.data = t->data, .dtype = t->dtype, .rows = (size_t)rows,
                     .cols = (size_t)cols};
    return KZ_OK;
}

typedef struct mul_job {
    const kz_matrix *m;
    const kz_kernels *k;
    float *y;
    const float *x;
    size_t ldy, ldx, n_tok, block;
} mul_job;

static void mul_rows(void *arg, size_t chunk, int worker) {
    const mul_job *j = arg;
    (void)worker;
    size_t o0 = chunk * j->block;
    size_t o1 = o0 + j->block < j->m->rows ? o0 + j->block : j->m->rows;
    if (j->m->dtype == KZ_DTYPE_BF16) {
        j->k->matmul_bf16(j->y, j->ldy, j->x, j->ldx, j->m->data, j->m->cols, j->n_tok, o0, o1);
    } else {
        j->k->matmul_f32(j->y, j->ldy, j->x, j->ldx, j->m->data, j->m->cols, j->n_tok, o0, o1);
    }
}

void kz_matrix_mul(const kz_matrix *m, kz_exec *e, float *y, size_t ldy, const float *x,
                   size_t ldx, size_t n_tok) {
    size_t n_threads = (size_t)kz_pool_threads(e->pool);
    size_t block = (m->rows + n_threads * 8 - 1) / (n_threads * 8);
    block = (block + 15) / 16 * 16;
    block = block < 16 ? 16 : block;
    mul_job j = {.m = m, .k = e->k, .y = y, .x = x, .ldy = ldy, .ldx = ldx, .n_tok = n_tok,
                 .block = block};
    kz_pool_run(e->pool, (m->rows + block - 1) / block, mul_rows, &j);
    e->flop += 2.0 * (double)m->rows * (double)m->cols * (double)n_tok;
    e->bytes += (double)m->rows * (double)m->cols * (m->dtype == KZ_DTYPE_BF16 ? 2.0 : 4.0);
}

void kz_matrix_row(const kz_matrix *m, size_t row, float *dst) {
    if (m->dtype == KZ_DTYPE_F32) {
        memcpy(dst, (const float *)m->data + row * m->cols, m->cols * sizeof *dst);
        return;
    }
    const uint16_t *src = (const uint16_t *)m->data + row * m->cols;
    for (size_t i = 0; i < m->cols; i++) {
        uint32_t bits = (uint32_t)src[i] << 16;
        memcpy(&dst[i], &bits, sizeof bits);
    }
}
