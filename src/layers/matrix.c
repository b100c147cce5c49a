/*
 * matrix.c - binding mapped weight matrices and running them on the pool.
 *
 * kz_matrix_mul cuts the output rows into blocks (a multiple of 16 rows; one per
 * thread and matrix for decode steps, a few for prompts) that the pool's threads
 * take in turn. What a block runs depends on the number of tokens and the weight's
 * dtype:
 *
 *   decode steps (n_tok < GEMM_MIN_TOK): the kernel table's matmul for the dtype
 *     (for quantized weights of an exec with weights_reused, the _reused entry points,
 *     which prefetch for weights still in the last-level cache), dot products per row
 *     and token, the block's rows streamed once per pair;
 *   prompts (n_tok >= GEMM_MIN_TOK) of F32, BF16 and F16 weights, and of Q8_0 / Q4_0
 *     weights where the table's prefill_gemm_quant says so: the GEMM path, the
 *     block's rows GEMM_ROWS at a time and their columns GEMM_KC at a time,
 *       stored rows [GEMM_ROWS, GEMM_KC] --rows_to_f32_*--> f32 scratch (stack, L1)
 *       scratch, x[:, k-block] --gemm_rows (all tokens; += after the first k-block)--> y
 *     (F32 rows go to gemm_rows in place, with the same k-blocks). Every weight is
 *     read and widened once for all tokens and the register tiles reuse each load
 *     for four rows or four tokens, which beats the per-dtype matmuls for F32 / BF16 /
 *     F16 prompts on every level (docs/ARCHITECTURE.md#language-model-matmuls);
 *   other quantized prompts (AVX-512; NEON with i8mm): the int8 matmuls, which beat
 *     widening to f32 there (kernels.h prefill_gemm_quant), with
 *     QUANT_PREFILL_BLOCKS blocks per thread, or one for prompts of up to the table's
 *     prompt_tile_tokens (kernels.h).
 * kz_matrix_mul_gemm forces the GEMM path (benchmarks, tests). kz_matrix_mul_batch
 * (independent requests' rows, continuous batching) always runs the table's batched
 * matrix-vector products, one block per thread as a decode step: their rows get the
 * bits of a one-token call whatever their number.
 *
 * Each output element is computed by one thread in a sequence fixed by n_in (and,
 * for the F32 / BF16 / F16 matmuls, n_tok; the GEMM sums k-block by k-block, GEMM_KC fixed),
 * never by the thread count or the block split, so results do not depend on threads.
 * kz_matrix_mul_group_split uses that to run two token ranges as one call when it
 * gives the bits of two (same path, and the GEMM or the quantized matmuls); else each
 * block runs both ranges, each on its own path, while the block's weights are cached.
 */
#include "layers/matrix.h"

#include <stdbool.h>
#include <string.h>

#include "io/mapped_file.h"
#include "kernels/quant.h"
#include "runtime/error.h"

static kz_status check_dtype(const kz_weights *f, const kz_tensor *t, int64_t cols) {
    const char *path = kz_weights_path(f);
    switch (t->dtype) {
    case KZ_DTYPE_BF16:
    case KZ_DTYPE_F16:
    case KZ_DTYPE_F32:
        if (((uintptr_t)t->data % (t->dtype == KZ_DTYPE_F32 ? 4 : 2)) != 0) {
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
                            "%s: tensor '%s' has dtype %s, expected BF16, F16, F32, Q8_0 or Q4_0",
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
    size_t split;    /* > 0: tokens [0, split) and [split, n_tok) each on their own path */
    bool force_gemm; /* kz_matrix_mul_gemm */
    bool batch;      /* kz_matrix_mul_batch: the batched matrix-vector products */
    bool reused;     /* kz_exec.weights_reused */
} mul_job;

/* The table's matmul for o's dtype on rows [o0, o1); reused picks the quantized ones'
 * entry points for weights still in the last-level cache (kernels.h). */
static void run_rows(const kz_kernels *k, const kz_matrix_out *o, const float *x, size_t ldx,
                     size_t n_tok, size_t o0, size_t o1, bool reused) {
    const kz_matrix *m = o->m;
    switch (m->dtype) {
    case KZ_DTYPE_BF16:
        k->matmul_bf16(o->y, o->ldy, x, ldx, m->data, m->cols, n_tok, o0, o1);
        break;
    case KZ_DTYPE_F16:
        k->matmul_f16(o->y, o->ldy, x, ldx, m->data, m->cols, n_tok, o0, o1);
        break;
    case KZ_DTYPE_Q8_0:
        (reused ? k->matmul_q8_0_reused : k->matmul_q8_0)(o->y, o->ldy, x, ldx, m->data,
                                                          m->cols, n_tok, o0, o1);
        break;
    case KZ_DTYPE_Q4_0:
        (reused ? k->matmul_q4_0_reused : k->matmul_q4_0)(o->y, o->ldy, x, ldx, m->data,
                                                          m->cols, n_tok, o0, o1);
        break;
    default:
        k->matmul_f32(o->y, o->ldy, x, ldx, m->data, m->cols, n_tok, o0, o1);
        break;
    }
}

/* The table's batched matrix-vector product for o's dtype on rows [o0, o1) (kernels.h
 * matvec_*; reused as in run_rows). */
static void run_batch(const kz_kernels *k, const kz_matrix_out *o, const float *x, size_t ldx,
                      size_t n_rows, size_t o0, size_t o1, bool reused) {
    const kz_matrix *m = o->m;
    kz_matmul_fn fn;
    switch (m->dtype) {
    case KZ_DTYPE_BF16: fn = k->matvec_bf16; break;
    case KZ_DTYPE_F16: fn = k->matvec_f16; break;
    case KZ_DTYPE_Q8_0: fn = reused ? k->matvec_q8_0_reused : k->matvec_q8_0; break;
    case KZ_DTYPE_Q4_0: fn = reused ? k->matvec_q4_0_reused : k->matvec_q4_0; break;
    default: fn = k->matvec_f32; break;
    }
    fn(o->y, o->ldy, x, ldx, m->data, m->cols, n_rows, o0, o1);
}

/* Prompts of at least this many tokens take the GEMM path: from 4 tokens on it clearly
 * beats the matmuls for F32 and BF16 (docs/ARCHITECTURE.md#language-model-matmuls), and
 * decode steps (1-2 tokens) keep their kernels. */
#define GEMM_MIN_TOK 4
/* Weight rows and columns converted to f32 per gemm_rows call: 4 x 1024 floats,
 * 16 KB of stack scratch that stays in L1 while all tokens pass over it (8 x 512
 * and 16 x 256 are slower). A multiple of KZ_QK, so k-blocks start on
 * quantization block boundaries. */
#define GEMM_ROWS 4
#define GEMM_KC 1024

/* Blocks per thread and matrix for quantized prompts on the int8 matmuls that walk every
 * token set over a block's rows in turn (prompts beyond the table's prompt_tile_tokens;
 * BLOCKS_PER_THREAD on the GEMM path): each matmul call quantizes all the prompt's activations
 * again, so fewer, larger blocks pay off, and a q8_0 block of 512 rows x 1024 inputs
 * (557 KB) still stays in a 1 MB L2 across the token sets
 * (docs/ARCHITECTURE.md#language-model-matmuls). */
#define QUANT_PREFILL_BLOCKS 3

/* Blocks per thread and matrix for the decode steps' matrix-vector products (n_tok <
 * GEMM_MIN_TOK) and for quantized prompts of up to the table's prompt_tile_tokens (kernels.h:
 * read from DRAM once whatever a block's size): one, so each thread streams one contiguous
 * share of every matrix and quantizes the activation once, where each new block would
 * restart the weight stream and the activation quantization
 * (docs/ARCHITECTURE.md#language-model-matmuls). A thread
 * the host delays costs more this way (the other thread takes at most the blocks left),
 * but the caller still runs every block no worker claims. */
#define DECODE_BLOCKS_PER_THREAD 1

/* Blocks per thread and matrix for the GEMM path: several per thread let a thread the
 * host slowed down hand work to the other. */
#define BLOCKS_PER_THREAD 8

/* Whether a call of n_tok tokens on weights of dtype runs the GEMM path (header). */
static bool gemm_path(const kz_kernels *k, kz_dtype dtype, size_t n_tok) {
    if (n_tok < GEMM_MIN_TOK) {
        return false;
    }
    return dtype == KZ_DTYPE_F32 || dtype == KZ_DTYPE_BF16 || dtype == KZ_DTYPE_F16 ||
           k->prefill_gemm_quant;
}

/* The kernel that widens one stored row segment to f32 (NULL for F32). */
static void (*row_to_f32(const kz_kernels *k, kz_dtype dtype))(float *, const void *, size_t) {
    switch (dtype) {
    case KZ_DTYPE_BF16: return k->rows_to_f32_bf16;
    case KZ_DTYPE_F16: return k->rows_to_f32_f16;
    case KZ_DTYPE_Q8_0: return k->rows_to_f32_q8_0;
    case KZ_DTYPE_Q4_0: return k->rows_to_f32_q4_0;
    default: return NULL;
    }
}

/* Rows [o0, o1) of one matrix on the GEMM path (see the header). While a group
 * of rows is multiplied, the next group's stored bytes are prefetched, one burst per
 * group with the compiler's portable builtin: the conversion's DRAM reads do not
 * overlap the FMA work otherwise, and spreading the prefetches over the group is no
 * better (docs/ARCHITECTURE.md#language-model-matmuls). */
static void gemm_block(const kz_kernels *k, const kz_matrix_out *o, const float *x, size_t ldx,
                       size_t n_tok, size_t o0, size_t o1) {
    const kz_matrix *m = o->m;
    void (*to_f32)(float *, const void *, size_t) = row_to_f32(k, m->dtype);
    _Alignas(64) float scratch[GEMM_ROWS * GEMM_KC];
    for (size_t r = o0; r < o1; r += GEMM_ROWS) {
        const size_t nr = o1 - r < GEMM_ROWS ? o1 - r : GEMM_ROWS;
        const size_t next = o1 - r - nr < GEMM_ROWS ? o1 - r - nr : GEMM_ROWS;
        const char *pf = (const char *)m->data + (r + nr) * m->row_bytes;
        for (size_t b = 0; b < next * m->row_bytes; b += 64) {
            __builtin_prefetch(pf + b, 0, 3);
        }
        for (size_t k0 = 0; k0 < m->cols; k0 += GEMM_KC) {
            const size_t kn = m->cols - k0 < GEMM_KC ? m->cols - k0 : GEMM_KC;
            const float *w = scratch;
            size_t ldw = kn;
            if (to_f32) {
                const uint8_t *src = (const uint8_t *)m->data + r * m->row_bytes +
                                     kz_dtype_row_bytes(m->dtype, k0);
                for (size_t j = 0; j < nr; j++) {
                    to_f32(scratch + j * kn, src + j * m->row_bytes, kn);
                }
            } else { // F32: the rows in place
                w = (const float *)m->data + r * m->cols + k0;
                ldw = m->cols;
            }
            k->gemm_rows(o->y + r, o->ldy, x + k0, ldx, w, ldw, kn, n_tok, nr, k0 > 0);
        }
    }
}

/* Rows [o0, o1) of o for tokens x[n_tok] on the path of n_tok tokens. */
static void run_block(const mul_job *j, const kz_matrix_out *o, const float *x, size_t n_tok,
                      size_t o0, size_t o1) {
    if (j->batch) {
        run_batch(j->k, o, x, j->ldx, n_tok, o0, o1, j->reused);
    } else if (j->force_gemm || gemm_path(j->k, o->m->dtype, n_tok)) {
        gemm_block(j->k, o, x, j->ldx, n_tok, o0, o1);
    } else {
        run_rows(j->k, o, x, j->ldx, n_tok, o0, o1, j->reused);
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
    if (!j->split) {
        run_block(j, o, j->x, j->n_tok, o0, o1);
        return;
    }
    // The block's weights, just read for the first tokens, are still in cache.
    run_block(j, o, j->x, j->split, o0, o1);
    const kz_matrix_out rest = {.m = o->m, .y = o->y + j->split * o->ldy, .ldy = o->ldy};
    run_block(j, &rest, j->x + j->split * j->ldx, j->n_tok - j->split, o0, o1);
}

/* Blocks per thread for one matrix of dtype in a call of n_tok tokens (the constants). */
static size_t blocks_per_thread(const kz_kernels *k, kz_dtype dtype, size_t n_tok,
                                bool force_gemm, bool batch) {
    if (batch) {
        return DECODE_BLOCKS_PER_THREAD;
    }
    if (force_gemm || gemm_path(k, dtype, n_tok)) {
        return BLOCKS_PER_THREAD;
    }
    if (n_tok < GEMM_MIN_TOK || n_tok <= k->prompt_tile_tokens) {
        return DECODE_BLOCKS_PER_THREAD; // one stream per thread, activations quantized once
    }
    return QUANT_PREFILL_BLOCKS;
}

/* Rows per chunk: a multiple of 16, about per_thread chunks per thread per matrix. */
static size_t block_rows(size_t rows, size_t n_threads, size_t per_thread) {
    size_t block = (rows + n_threads * per_thread - 1) / (n_threads * per_thread);
    block = (block + 15) / 16 * 16;
    return block < 16 ? 16 : block;
}

static void mul_group(const kz_matrix_out *outs, size_t n_outs, kz_exec *e, const float *x,
                      size_t ldx, size_t n_tok, size_t split, bool force_gemm, bool batch) {
    KZ_ASSERT(n_outs >= 1 && n_outs <= KZ_MATRIX_MAX_GROUP && split < n_tok);
    size_t n_threads = (size_t)kz_pool_threads(e->pool);
    mul_job j = {.outs = outs, .n_outs = n_outs, .k = e->k, .x = x, .ldx = ldx, .n_tok = n_tok,
                 .split = split, .force_gemm = force_gemm, .batch = batch};
    j.reused = e->weights_reused;
    for (size_t i = 0; i < n_outs; i++) {
        const kz_matrix *m = outs[i].m;
        j.block[i] = block_rows(m->rows, n_threads, blocks_per_thread(e->k, m->dtype, n_tok,
                                                                      force_gemm, batch));
        j.first[i + 1] = j.first[i] + (m->rows + j.block[i] - 1) / j.block[i];
        e->flop += 2.0 * (double)m->rows * (double)m->cols * (double)n_tok;
        e->bytes += (double)m->rows * (double)m->row_bytes;
    }
    kz_pool_run(e->pool, j.first[n_outs], mul_rows, &j);
}

void kz_matrix_mul_group(const kz_matrix_out *outs, size_t n_outs, kz_exec *e, const float *x,
                         size_t ldx, size_t n_tok) {
    mul_group(outs, n_outs, e, x, ldx, n_tok, 0, false, false);
}

/* Whether every token of a call of n_tok gets the bits it would get in a call of
 * `part` tokens on weights of dtype: the same path, and a sum fixed by n_in alone
 * (the GEMM path and the quantized matmuls; the F32 / BF16 / F16 matmuls also depend on
 * the token count). */
static bool same_bits(const kz_kernels *k, kz_dtype dtype, size_t n_tok, size_t part) {
    const bool gemm = gemm_path(k, dtype, n_tok);
    if (gemm != gemm_path(k, dtype, part)) {
        return false;
    }
    return gemm || dtype == KZ_DTYPE_Q8_0 || dtype == KZ_DTYPE_Q4_0 || n_tok == part;
}

void kz_matrix_mul_group_split(const kz_matrix_out *outs, size_t n_outs, kz_exec *e,
                               const float *x, size_t ldx, size_t n_tok, size_t split) {
    KZ_ASSERT(split < n_tok && n_outs <= KZ_MATRIX_MAX_GROUP);
    bool one_call = true; // split 0: no second range to match
    for (size_t i = 0; i < n_outs && split; i++) {
        const kz_dtype dt = outs[i].m->dtype;
        one_call = one_call && same_bits(e->k, dt, n_tok, split) &&
                   same_bits(e->k, dt, n_tok, n_tok - split);
    }
    mul_group(outs, n_outs, e, x, ldx, n_tok, one_call ? 0 : split, false, false);
}

void kz_matrix_mul(const kz_matrix *m, kz_exec *e, float *y, size_t ldy, const float *x,
                   size_t ldx, size_t n_tok) {
    kz_matrix_out o = {.m = m, .y = y, .ldy = ldy};
    mul_group(&o, 1, e, x, ldx, n_tok, 0, false, false);
}

void kz_matrix_mul_batch(const kz_matrix *m, kz_exec *e, float *y, size_t ldy, const float *x,
                         size_t ldx, size_t n_rows) {
    kz_matrix_out o = {.m = m, .y = y, .ldy = ldy};
    if (n_rows > 0) {
        mul_group(&o, 1, e, x, ldx, n_rows, 0, false, true);
    }
}

void kz_matrix_mul_group_batch(const kz_matrix_out *outs, size_t n_outs, kz_exec *e,
                               const float *x, size_t ldx, size_t n_rows) {
    if (n_rows > 0) {
        mul_group(outs, n_outs, e, x, ldx, n_rows, 0, false, true);
    }
}

void kz_matrix_mul_gemm(const kz_matrix *m, kz_exec *e, float *y, size_t ldy, const float *x,
                        size_t ldx, size_t n_tok) {
    kz_matrix_out o = {.m = m, .y = y, .ldy = ldy};
    mul_group(&o, 1, e, x, ldx, n_tok, 0, true, false);
}

void kz_matrix_populate(const kz_matrix *m) {
    kz_map_populate_range(m->data, m->rows * m->row_bytes);
}

void kz_matrix_row(const kz_matrix *m, size_t row, float *dst) {
    const uint8_t *src = (const uint8_t *)m->data + row * m->row_bytes;
    // The formats' definitions: the scalar level's conversions (exact, bit for bit).
    void (*to_f32)(float *, const void *, size_t) = row_to_f32(&kz_kernels_scalar, m->dtype);
    if (to_f32) {
        to_f32(dst, src, m->cols);
    } else {
        memcpy(dst, src, m->cols * sizeof *dst);
    }
}
