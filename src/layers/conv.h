/*
 * conv.h - convolutions and linear layers as packed conv-GEMMs, with the
 * streaming history that makes chunked decoding exact.
 *
 * Every codec convolution is one kz_kernels.gemm over time-major activations
 * [rows, channels] (see kernels.h):
 *   linear / 1x1 conv         taps 1
 *   causal conv (k, dilation) taps k over rows t .. t + (k-1)d of an input that
 *                             starts with (k-1)d history rows (left context)
 *   transposed conv (k = m s) taps m over rows t-(m-1) .. t, n = s * c_out: output
 *                             row t holds the s samples of input step t
 * A kz_conv_state keeps the last history rows of a conv's input between chunks;
 * zeros at the start equal the reference's left zero padding, so decoding in
 * chunks of any size gives the bits of a single pass.
 *
 * Loading reads the checkpoint tensor (F32/F16/BF16), checks its shape, packs it
 * and releases the mapped pages. kz_conv_use_bf16 switches a loaded conv to the
 * bf16 conv-GEMM (the codec's fast precision): its input rows are then rounded to
 * bf16 into the exec's scratch before the GEMM.
 */
#ifndef KZ_CONV_H
#define KZ_CONV_H

#include <stddef.h>

#include "io/weights.h"
#include "kernels/kernels.h"
#include "runtime/threadpool.h"

/* Where kernels run: the kernel table and the pool of the calling session. */
typedef struct kz_exec {
    const kz_kernels *k;
    kz_pool *pool;
    double flop;  /* floating-point operations issued (kz_conv_run, kz_matrix_mul) */
    double flop_bf16; /* the part of flop that ran in the bf16 conv-GEMM */
    double bytes; /* weight bytes streamed by kz_matrix_mul */
    bool weights_reused; /* kz_matrix_mul's weights were read shortly before (the code
                            predictor's): the _reused quantized matmuls, a prefetch hint */
    uint16_t *x_bf16;  /* scratch for the bf16 input rows of convs using bf16 weights, set by
                          the stage that runs them (NULL otherwise), borrowed */
    size_t x_bf16_len; /* its length in bf16 elements */
} kz_exec;

enum { KZ_CONV_NAME_MAX = 96 };

typedef struct kz_conv {
    char name[KZ_CONV_NAME_MAX]; /* the checkpoint weight it was loaded from ("" when built
                                    otherwise): stored forms are found by it (conv_convert.h) */
    kz_packed w;        /* packed weights (empty once kz_conv_drop_panels freed them) */
    kz_packed_bf16 wb;  /* bf16 weights when the conv runs in bf16, else empty */
    float *bias;        /* [n] or NULL, owned (tiled s times for transposed convs) */
    size_t k_in;        /* input channels */
    size_t n;           /* GEMM output columns (c_out, or s * c_out when transposed) */
    size_t taps;        /* kernel taps over input rows */
    size_t dilation;    /* rows between taps */
    size_t history;     /* input rows of left context: (taps - 1) * dilation */
} kz_conv;

/* Linear layer: weight [out, in] (or a 1x1 conv [out, in, 1]), optional bias [out]
 * (b_name NULL: no bias). */
kz_status kz_conv_load_linear(kz_conv *c, const kz_weights *f, const char *w_name,
                              const char *b_name, int64_t out, int64_t in);

/* Causal conv1d: weight [out, in, k], bias [out], dilation d. */
kz_status kz_conv_load_causal(kz_conv *c, const kz_weights *f, const char *w_name,
                              const char *b_name, int64_t out, int64_t in, int64_t k, int64_t d);

/* Transposed conv1d keeping the first L*s outputs: weight [in, out, k] with k a
 * multiple of s, bias [out]. */
kz_status kz_conv_load_transposed(kz_conv *c, const kz_weights *f, const char *w_name,
                                  const char *b_name, int64_t in, int64_t out, int64_t k,
                                  int64_t s);

void kz_conv_free(kz_conv *c);

/* Lets go of c's fp32 panels once another form of them is built (bf16, Winograd): owned
 * panels are freed, panels mapped from the model file keep their address but their
 * resident pages are dropped. c must not run in fp32 afterwards. */
void kz_conv_drop_panels(kz_conv *c);

/* Packs c's weights to bf16 (c->wb) and from then on runs c with the bf16
 * conv-GEMM; the fp32 panels are freed unless they are mapped from the model file.
 * Returns KZ_OK or KZ_STATUS_OUT_OF_MEMORY (c unchanged). */
kz_status kz_conv_use_bf16(kz_conv *c);

/* bf16 elements of scratch kz_conv_run needs for c over n_rows output rows
 * (0 for an fp32 conv). */
size_t kz_conv_bf16_scratch(const kz_conv *c, size_t n_rows);

/* y[n_rows, ldy] (=|+=) conv(x) where x points at the first history row and has
 * ldx >= k_in; the work is split over the pool. A bf16 conv needs
 * e->x_bf16_len >= kz_conv_bf16_scratch(c, n_rows); the kernel table's gemm_bf16
 * runs it, or the scalar definition on a level without one. */
void kz_conv_run(const kz_conv *c, kz_exec *e, float *y, size_t ldy, const float *x, size_t ldx,
                 size_t n_rows, kz_gemm_mode mode);

/* An elementwise pass over rows [r0, r1) (kz_exec_rows, kz_conv_run_after). */
typedef void (*kz_rows_fn)(void *arg, size_t r0, size_t r1);

/* kz_conv_run after before(arg, r0, r1) has made x's new rows (those after the history,
 * numbered from 0) in place: for a bf16 conv in the pool job that rounds them, each row
 * block made and rounded while in cache, else in a pass of its own. The same bits as
 * the pass and kz_conv_run one after the other. */
void kz_conv_run_after(const kz_conv *c, kz_exec *e, kz_rows_fn before, void *arg, float *y,
                       size_t ldy, const float *x, size_t ldx, size_t n_rows, kz_gemm_mode mode);

/* One call of a group run (kz_conv_run_group). */
typedef struct kz_conv_call {
    const kz_conv *c;
    float *y;
    size_t ldy;
    const float *x;
    size_t ldx;
} kz_conv_call;

enum { KZ_CONV_GROUP_MAX = 16 };

/* kz_conv_run of n (<= KZ_CONV_GROUP_MAX) calls over the same n_rows and mode as one pool
 * job, without a barrier between them: the same bits as the calls one after another.
 * The bf16 calls of a group must read the same input (x, ldx, k_in, history), rounded
 * once for all of them; fp32 calls may read any. */
void kz_conv_run_group(const kz_conv_call *calls, size_t n, kz_exec *e, size_t n_rows,
                       kz_gemm_mode mode);

/* Left context of one conv input between chunks. */
typedef struct kz_conv_state {
    float *rows;     /* [n_rows, ch], owned */
    size_t n_rows;   /* history rows */
    size_t ch;       /* channels */
} kz_conv_state;

kz_status kz_conv_state_init(kz_conv_state *s, size_t n_rows, size_t ch);
void kz_conv_state_free(kz_conv_state *s);
void kz_conv_state_reset(kz_conv_state *s);

/* Copies the history to the top of scratch ([history + new rows, ch]) and
 * returns where the new rows go. */
float *kz_conv_state_begin(const kz_conv_state *s, float *scratch);

/* Saves the last history rows of scratch after n_new rows were appended. */
void kz_conv_state_end(kz_conv_state *s, const float *scratch, size_t n_new);

/* Runs fn over [0, n_rows) in row blocks on the pool (for elementwise passes). */
void kz_exec_rows(kz_exec *e, size_t n_rows, size_t min_block, kz_rows_fn fn, void *arg);

#endif
