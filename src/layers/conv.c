/*
 * conv.c - loading checkpoint convolutions into packed conv-GEMMs and running
 * them on a session's pool; streaming history of conv inputs.
 *
 * Load: tensor -> f32 copy -> rearranged into the packer's row-major source
 * [taps * k_in, n] (cache-blocked, sequential reads) -> kz_packed_init_rows ->
 * release the mapped pages. A GGUF file from `kztts quantize` stores the panels
 * themselves as "<weight>.packed" [n_panels, taps * k_in, 16] F32; they are used
 * in place from the mapping (no copy, no packing; the codec maps in the pages of the
 * forms it keeps after its precision switch, kz_codec_decoder_populate). Either way the weights
 * object's on_packed hook sees the result (the quantizer stores it).
 * bf16: kz_conv_use_bf16 re-packs the panels as bf16 pairs (kernels.h); a run
 * first rounds the input rows (history included) to bf16 in e->x_bf16 (as bf16, or
 * as fp32 values for a level whose GEMM reads those: AVX2), split over the pool by
 * rows, then tiles the bf16 GEMM as below. kz_conv_run_after puts an elementwise pass
 * that makes the input rows (the codec's SnakeBeta) into the same pool job as the
 * rounding, each row block made and rounded while it is in cache.
 * Run: the [n_rows x panels] output is cut into tiles (row blocks x panel
 * groups), one pool chunk each; a conv with one output column runs with rows in the
 * vector lanes instead (column_block, the same per-element sequence). Each output
 * element is computed by exactly one tile in the kernel's fixed order, so the thread
 * count and the tiling never change the result.
 */
#include "layers/conv.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/mapped_file.h"
#include "runtime/error.h"

/* Linear and causal conv weights [out, in, k] are rearranged to the packer's
 * row-major source [k * in, out] (row j * in + i), tile by tile so that reads
 * and writes stay in cache, then packed row by row. */
static int pack_out_in_k(kz_conv *c, const float *w, size_t out, size_t in, size_t k) {
    size_t count = out * in * k;
    float *m = malloc((count ? count : 1) * sizeof *m);
    if (!m) {
        return -1;
    }
    for (size_t o0 = 0; o0 < out; o0 += 32) {
        for (size_t i0 = 0; i0 < in; i0 += 32) {
            size_t o1 = o0 + 32 < out ? o0 + 32 : out, i1 = i0 + 32 < in ? i0 + 32 : in;
            for (size_t o = o0; o < o1; o++) {
                for (size_t i = i0; i < i1; i++) {
                    for (size_t j = 0; j < k; j++) {
                        m[(j * in + i) * out + o] = w[(o * in + i) * k + j];
                    }
                }
            }
        }
    }
    int rc = kz_packed_init_rows(&c->w, k, in, out, m);
    free(m);
    return rc;
}

/* ConvTranspose [in, out, k = taps * s] -> packer source [taps * in, s * out]:
 * tap j reads input row t - (taps-1-j), whose contribution to output sample
 * t*s + p is w[i, o, p + (taps-1-j)*s]; column p * out + o. The source is
 * read sequentially; each input channel's writes stay within taps rows. */
static int pack_transposed(kz_conv *c, const float *w, size_t in, size_t out, size_t k,
                           size_t s) {
    size_t taps = k / s, n = s * out, count = in * out * k;
    float *m = malloc((count ? count : 1) * sizeof *m);
    if (!m) {
        return -1;
    }
    for (size_t i = 0; i < in; i++) {
        for (size_t o = 0; o < out; o++) {
            for (size_t kk = 0; kk < k; kk++) {
                size_t j = taps - 1 - kk / s, p = kk % s;
                m[(j * in + i) * n + p * out + o] = w[(i * out + o) * k + kk];
            }
        }
    }
    int rc = kz_packed_init_rows(&c->w, taps, in, n, m);
    free(m);
    return rc;
}

/* Reads a tensor of the given shape as f32 (owned copy). */
static kz_status read_f32(const kz_weights *f, const char *name, int n_dims, const int64_t *shape,
                          float **out, const kz_tensor **tensor) {
    *out = NULL;
    kz_status st = kz_weights_get(f, name, n_dims, shape, tensor);
    if (st != KZ_OK) {
        return st;
    }
    float *buf = malloc(((*tensor)->n_elements ? (*tensor)->n_elements : 1) * sizeof *buf);
    if (!buf) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: out of memory reading '%s'",
                            kz_weights_path(f), name);
    }
    st = kz_tensor_to_f32(*tensor, buf);
    if (st != KZ_OK) {
        free(buf);
        return st;
    }
    *out = buf;
    return KZ_OK;
}

/* Reads bias [n_out] and tiles it `repeat` times (transposed convs). */
static kz_status read_bias(kz_conv *c, const kz_weights *f, const char *name, int64_t n_out,
                           size_t repeat) {
    if (!name) {
        return KZ_OK;
    }
    const kz_tensor *t;
    float *b;
    kz_status st = read_f32(f, name, 1, &n_out, &b, &t);
    if (st != KZ_OK) {
        return st;
    }
    c->bias = malloc((size_t)n_out * repeat * sizeof *c->bias);
    if (!c->bias) {
        free(b);
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "%s: out of memory for '%s'",
                            kz_weights_path(f), name);
    }
    for (size_t r = 0; r < repeat; r++) {
        memcpy(c->bias + r * (size_t)n_out, b, (size_t)n_out * sizeof *b);
    }
    free(b);
    return KZ_OK;
}

static kz_status oom(const char *name) {
    return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory packing '%s'", name);
}

/* Binds "<w_name>.packed", the panels of c's weight stored by `kztts quantize`, when
 * the file has it (*found); its shape must be [n_panels, taps * k_in, KZ_PANEL]. */
static kz_status bind_packed(kz_conv *c, const kz_weights *f, const char *w_name, bool *found) {
    char name[512];
    snprintf(name, sizeof name, "%s.packed", w_name);
    const kz_tensor *t = kz_weights_find(f, name);
    *found = t != NULL;
    if (!t) {
        return KZ_OK;
    }
    int64_t shape[3] = {(int64_t)((c->n + KZ_PANEL - 1) / KZ_PANEL), (int64_t)(c->taps * c->k_in),
                        KZ_PANEL};
    kz_status st = kz_weights_get(f, name, 3, shape, &t);
    if (st == KZ_OK && (t->dtype != KZ_DTYPE_F32 || (uintptr_t)t->data % 64 != 0)) {
        st = kz_error_set(KZ_STATUS_BAD_MODEL, "%s: tensor '%s' must be F32 and 64-byte aligned",
                          kz_weights_path(f), name);
    }
    if (st == KZ_OK) {
        kz_packed_init_mapped(&c->w, c->taps, c->k_in, c->n, t->data);
        kz_weights_packed(f, w_name, &c->w);
    }
    return st;
}

/* Reads weight w_name of the given shape and packs it into c->w with pack(). */
typedef int (*pack_fn)(kz_conv *c, const float *w, const int64_t *shape, size_t stride);

static int pack_linear_or_causal(kz_conv *c, const float *w, const int64_t *shape, size_t s) {
    (void)s;
    return pack_out_in_k(c, w, (size_t)shape[0], (size_t)shape[1], (size_t)shape[2]);
}

static int pack_transposed_conv(kz_conv *c, const float *w, const int64_t *shape, size_t s) {
    return pack_transposed(c, w, (size_t)shape[0], (size_t)shape[1], (size_t)shape[2], s);
}

static kz_status load_weight(kz_conv *c, const kz_weights *f, const char *w_name, int n_dims,
                             const int64_t *shape, pack_fn pack, size_t stride) {
    if (strlen(w_name) >= sizeof c->name) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: tensor name '%s' is too long",
                            kz_weights_path(f), w_name);
    }
    snprintf(c->name, sizeof c->name, "%s", w_name);
    bool found;
    kz_status st = bind_packed(c, f, w_name, &found);
    if (st != KZ_OK || found) {
        return st;
    }
    const kz_tensor *t;
    float *w;
    st = read_f32(f, w_name, n_dims, shape, &w, &t);
    if (st != KZ_OK) {
        return st;
    }
    st = pack(c, w, shape, stride) == 0 ? KZ_OK : oom(w_name);
    kz_weights_release(f, t);
    free(w);
    if (st == KZ_OK) {
        kz_weights_packed(f, w_name, &c->w);
    }
    return st;
}

/* A [out, in, k] weight (n_dims 2 means [out, in] with k = 1) and its bias, packed as a
 * conv with dilation d: the common path of linear layers and causal convs. */
static kz_status load_out_in_k(kz_conv *c, const kz_weights *f, const char *w_name,
                               const char *b_name, int n_dims, int64_t out, int64_t in, int64_t k,
                               int64_t d) {
    int64_t shape[3] = {out, in, k};
    *c = (kz_conv){.k_in = (size_t)in, .n = (size_t)out, .taps = (size_t)k,
                   .dilation = (size_t)d, .history = (size_t)((k - 1) * d)};
    kz_status st = load_weight(c, f, w_name, n_dims, shape, pack_linear_or_causal, 1);
    st = st == KZ_OK ? read_bias(c, f, b_name, out, 1) : st;
    if (st != KZ_OK) {
        kz_conv_free(c);
    }
    return st;
}

kz_status kz_conv_load_linear(kz_conv *c, const kz_weights *f, const char *w_name,
                              const char *b_name, int64_t out, int64_t in) {
    const kz_tensor *t = kz_weights_find(f, w_name);
    int n_dims = t && t->n_dims == 3 ? 3 : 2; // nn.Linear [out, in] or a 1x1 conv [out, in, 1]
    return load_out_in_k(c, f, w_name, b_name, n_dims, out, in, 1, 1);
}

kz_status kz_conv_load_causal(kz_conv *c, const kz_weights *f, const char *w_name,
                              const char *b_name, int64_t out, int64_t in, int64_t k, int64_t d) {
    return load_out_in_k(c, f, w_name, b_name, 3, out, in, k, d);
}

kz_status kz_conv_load_transposed(kz_conv *c, const kz_weights *f, const char *w_name,
                                  const char *b_name, int64_t in, int64_t out, int64_t k,
                                  int64_t s) {
    memset(c, 0, sizeof *c);
    if (s <= 0 || k % s != 0) {
        return kz_error_set(KZ_STATUS_UNSUPPORTED,
                            "%s: '%s': transposed conv kernel %lld is not a multiple of stride %lld",
                            kz_weights_path(f), w_name, (long long)k, (long long)s);
    }
    int64_t shape[3] = {in, out, k};
    size_t taps = (size_t)(k / s);
    *c = (kz_conv){.k_in = (size_t)in, .n = (size_t)(out * s), .taps = taps, .dilation = 1,
                   .history = taps - 1};
    kz_status st = load_weight(c, f, w_name, 3, shape, pack_transposed_conv, (size_t)s);
    st = st == KZ_OK ? read_bias(c, f, b_name, out, (size_t)s) : st;
    if (st != KZ_OK) {
        kz_conv_free(c);
    }
    return st;
}

kz_status kz_conv_use_bf16(kz_conv *c) {
    if (c->wb.data) {
        return KZ_OK;
    }
    if (kz_packed_bf16_init(&c->wb, &c->w) != 0) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory packing bf16 weights");
    }
    kz_conv_drop_panels(c);
    return KZ_OK;
}

void kz_conv_drop_panels(kz_conv *c) {
    if (!c->w.data) {
        return;
    }
    if (c->w.mapped) {
        kz_map_release_range(c->w.data, kz_packed_bytes(c->w.taps, c->w.k_in, c->w.n));
    } else {
        kz_packed_free(&c->w);
    }
}

size_t kz_conv_bf16_scratch(const kz_conv *c, size_t n_rows) {
    return c->wb.data ? (n_rows + c->history) * 2 * c->wb.k_pairs : 0;
}

void kz_conv_free(kz_conv *c) {
    if (!c) {
        return;
    }
    kz_packed_free(&c->w);
    kz_packed_bf16_free(&c->wb);
    free(c->bias);
    memset(c, 0, sizeof *c);
}

/* --- running ------------------------------------------------------------ */

typedef struct gemm_job {
    const kz_kernels *k;
    kz_gemm_args args;
    size_t n_rows, n_panels;
    size_t row_block, panel_block, n_row_blocks;
    bool rows_outer; /* chunks row block by row block (the pool's split mode), else panel
                        block by panel block */
    void (*gemm_bf16)(const kz_gemm_bf16_args *a, size_t t0, size_t t1, size_t p0, size_t p1);
    kz_gemm_bf16_args args_bf16; /* used when gemm_bf16 is set */
} gemm_job;

static void gemm_tile(void *arg, size_t chunk, int worker) {
    const gemm_job *j = arg;
    (void)worker;
    const size_t n_pb = (j->n_panels + j->panel_block - 1) / j->panel_block;
    size_t rb = j->rows_outer ? chunk / n_pb : chunk % j->n_row_blocks;
    size_t pb = j->rows_outer ? chunk % n_pb : chunk / j->n_row_blocks;
    size_t t0 = rb * j->row_block;
    size_t t1 = t0 + j->row_block < j->n_rows ? t0 + j->row_block : j->n_rows;
    size_t p0 = pb * j->panel_block;
    size_t p1 = p0 + j->panel_block < j->n_panels ? p0 + j->panel_block : j->n_panels;
    if (j->gemm_bf16) {
        j->gemm_bf16(&j->args_bf16, t0, t1, p0, p1);
    } else {
        j->k->gemm(&j->args, t0, t1, p0, p1);
    }
}

/* Tile sizes: rows a power-of-two multiple of TILE_ROWS (a multiple of common micro-kernel
 * heights), TILE_PANELS panels (64 columns), and at least TILE_MIN_FLOP a tile where there
 * are rows enough: a few microseconds of one core, so that claiming a tile (a cache line that
 * moves between the cores, up to ~0.5 us apart) stays a small share of it (the codec's narrow
 * convs: 96 input channels make a 48-row tile ~0.6 MFLOP). */
#define TILE_ROWS 48
#define TILE_PANELS 4
#define TILE_MIN_FLOP 4e6

/* Tiles of TILE_ROWS rows, doubled until a tile reaches TILE_MIN_FLOP or the next doubling
 * would leave a thread fewer than four tiles; small problems are cut finer so that every
 * thread gets work. k_rows: the conv's taps x input channels. The GEMMs' sums do not depend
 * on the tiles. */
static void choose_tiles(gemm_job *j, int n_threads, size_t k_rows) {
    const size_t n_rows = j->n_rows, n_panels = j->n_panels, min_tiles = (size_t)n_threads * 4;
    const double row_flop = 2.0 * TILE_PANELS * KZ_PANEL * (double)k_rows; /* a tile's row */
    size_t rows = TILE_ROWS;
    while ((double)rows * row_flop < TILE_MIN_FLOP &&
           (n_rows + 2 * rows - 1) / (2 * rows) * ((n_panels + TILE_PANELS - 1) / TILE_PANELS) >=
               min_tiles) {
        rows *= 2;
    }
    j->row_block = n_rows < rows ? n_rows : rows;
    j->panel_block = TILE_PANELS;
    size_t n_tiles;
    for (;;) {
        j->n_row_blocks = (n_rows + j->row_block - 1) / j->row_block;
        n_tiles = j->n_row_blocks * ((n_panels + j->panel_block - 1) / j->panel_block);
        if (n_tiles >= min_tiles || j->panel_block == 1) {
            break;
        }
        j->panel_block /= 2;
    }
}

typedef struct round_job {
    void (*round)(uint16_t *y, size_t ldy, const float *x, size_t ldx, size_t n_rows,
                  size_t n_cols);
    void (*round_f32)(float *y, size_t ldy, const float *x, size_t ldx, size_t n_rows,
                      size_t n_cols); /* instead of round, into yf */
    uint16_t *y;
    float *yf;
    size_t ldy;
    const float *x;
    size_t ldx, n_cols;
    kz_rows_fn before; /* or NULL: run first on the new rows of the block (kz_conv_run_after) */
    void *before_arg;
    size_t history;
} round_job;

static void round_rows(void *arg, size_t r0, size_t r1) {
    const round_job *j = arg;
    if (j->before && r1 > j->history) { // the block's new rows, indexed after the history
        j->before(j->before_arg, r0 > j->history ? r0 - j->history : 0, r1 - j->history);
    }
    if (j->round_f32) {
        j->round_f32(j->yf + r0 * j->ldy, j->ldy, j->x + r0 * j->ldx, j->ldx, r1 - r0, j->n_cols);
    } else {
        j->round(j->y + r0 * j->ldy, j->ldy, j->x + r0 * j->ldx, j->ldx, r1 - r0, j->n_cols);
    }
}

/* Rounds the conv's input rows (history included) to bf16 in e->x_bf16; before (if set)
 * runs on each block's new rows first, in the same pool job. A level whose GEMM reads the
 * rounded values as fp32 (round_bf16_f32) gets them there instead, where the scratch holds
 * them (twice the bf16 rows' bytes; the codec's does), else the bf16 rows. Returns whether
 * they went out as fp32 (use_bf16's wide). */
static bool round_bf16_input(const kz_conv *c, kz_exec *e, const float *x, size_t ldx,
                             size_t n_rows, kz_rows_fn before, void *before_arg) {
    const size_t need = kz_conv_bf16_scratch(c, n_rows);
    KZ_ASSERT(e->x_bf16 && e->x_bf16_len >= need);
    const kz_kernels *k = e->k;
    const bool wide = k->round_bf16_f32 && e->x_bf16_len / 2 >= need;
    round_job r = {.round = k->round_bf16,
                   .round_f32 = wide ? k->round_bf16_f32 : NULL, .y = e->x_bf16,
                   .yf = (float *)(void *)e->x_bf16, .ldy = 2 * c->wb.k_pairs, .x = x,
                   .ldx = ldx, .n_cols = c->k_in, .before = before, .before_arg = before_arg,
                   .history = c->history};
    kz_exec_rows(e, n_rows + c->history, 4096 / r.ldy + 1, round_rows, &r);
    return wide;
}

/* Points the job at the bf16 GEMM over the rows round_bf16_input left in e->x_bf16. */
static void use_bf16(gemm_job *j, const kz_conv *c, const kz_exec *e, bool wide) {
    j->gemm_bf16 = e->k->gemm_bf16;
    j->args_bf16 = (kz_gemm_bf16_args){
        .y = j->args.y, .ldy = j->args.ldy, .x = wide ? NULL : e->x_bf16,
        .xf = wide ? (const float *)(const void *)e->x_bf16 : NULL, .ldx = 2 * c->wb.k_pairs,
        .tap_stride = c->dilation, .w = &c->wb, .bias = c->bias, .mode = j->args.mode,
        .n_rows = j->n_rows};
}

/* --- one output column -------------------------------------------------- */

/* Convs with one output column (the codec's final conv) fill one lane of the GEMM's
 * 16-column panels. They run with rows in the vector lanes instead: each block of
 * COL_ROWS output rows transposes its input rows (history included) to [k_in, rows +
 * span], then every output row runs the GEMM's fmaf chain (taps outer, channels inner,
 * from +0) in its own lane, bias and residual adds after, so the bits are the GEMM's.
 * Plain C: the compiler's clones vectorize the lane loop for the CPU at hand. */
enum { COL_ROWS = 64, COL_X_FLOATS = 8192 }; // COL_X_FLOATS bounds the transposed block on the stack

typedef struct column_job {
    const kz_conv *c;
    float *y;
    size_t ldy;
    const float *x;
    size_t ldx;
    size_t n_rows;
    kz_gemm_mode mode;
} column_job;

static bool column_fits(const kz_conv *c) {
    const size_t span = (c->taps - 1) * c->dilation;
    return c->n == 1 && !c->wb.data && c->w.data && c->k_in * (COL_ROWS + span) <= COL_X_FLOATS;
}

KZ_CLONES static void column_block(const column_job *j, size_t t0, size_t t1) {
    const kz_conv *c = j->c;
    const size_t k_in = c->k_in, d = c->dilation, span = (c->taps - 1) * d;
    const size_t rows = t1 - t0, w_rows = rows + span;
    float xt[COL_X_FLOATS];
    float acc[COL_ROWS];
    for (size_t r = 0; r < w_rows; r++) {
        const float *xr = j->x + (t0 + r) * j->ldx;
        for (size_t i = 0; i < k_in; i++) {
            xt[i * w_rows + r] = xr[i];
        }
    }
    for (size_t r = 0; r < rows; r++) {
        acc[r] = 0.0f;
    }
    for (size_t tap = 0; tap < c->taps; tap++) {
        for (size_t i = 0; i < k_in; i++) {
            const float w = c->w.data[(tap * k_in + i) * KZ_PANEL];
            const float *xi = xt + i * w_rows + tap * d;
            for (size_t r = 0; r < rows; r++) {
                acc[r] = fmaf(xi[r], w, acc[r]);
            }
        }
    }
    for (size_t r = 0; r < rows; r++) {
        float v = acc[r];
        if (c->bias) {
            v = v + c->bias[0];
        }
        float *yr = j->y + (t0 + r) * j->ldy;
        *yr = j->mode == KZ_GEMM_ACCUMULATE ? *yr + v : v;
    }
}

static void column_rows(void *arg, size_t chunk, int worker) {
    const column_job *j = arg;
    (void)worker;
    const size_t t0 = chunk * COL_ROWS;
    column_block(j, t0, t0 + COL_ROWS < j->n_rows ? t0 + COL_ROWS : j->n_rows);
}

/* The job of one conv call, tiled for n_threads (its bf16 input rows not yet rounded). */
static gemm_job conv_job(const kz_conv *c, const kz_exec *e, float *y, size_t ldy,
                         const float *x, size_t ldx, size_t n_rows, kz_gemm_mode mode,
                         int n_threads) {
    gemm_job j = {.k = e->k,
                  .args = {.y = y, .ldy = ldy, .x = x, .ldx = ldx, .tap_stride = c->dilation,
                           .w = &c->w, .bias = c->bias, .mode = mode, .n_rows = n_rows},
                  .n_rows = n_rows,
                  .n_panels = c->wb.data ? c->wb.n_panels : c->w.n_panels,
                  .rows_outer = kz_pool_split(e->pool)};
    choose_tiles(&j, n_threads, c->k_in * c->taps);
    return j;
}

static size_t job_tiles(const gemm_job *j) {
    return j->n_row_blocks * ((j->n_panels + j->panel_block - 1) / j->panel_block);
}

static void count_flop(kz_exec *e, const kz_conv *c, size_t n_rows) {
    const double flop = 2.0 * (double)n_rows * (double)c->n * (double)c->k_in * (double)c->taps;
    e->flop += flop;
    if (c->wb.data) {
        e->flop_bf16 += flop;
    }
}

void kz_conv_run_after(const kz_conv *c, kz_exec *e, kz_rows_fn before, void *arg, float *y,
                       size_t ldy, const float *x, size_t ldx, size_t n_rows, kz_gemm_mode mode) {
    if (n_rows == 0) {
        return;
    }
    gemm_job j = conv_job(c, e, y, ldy, x, ldx, n_rows, mode, kz_pool_threads(e->pool));
    if (c->wb.data) {
        use_bf16(&j, c, e, round_bf16_input(c, e, x, ldx, n_rows, before, arg));
    } else if (before) {
        kz_exec_rows(e, n_rows, 4096 / (c->k_in ? c->k_in : 1) + 1, before, arg);
    }
    if (column_fits(c)) {
        column_job cj = {.c = c, .y = y, .ldy = ldy, .x = x, .ldx = ldx, .n_rows = n_rows,
                         .mode = mode};
        kz_pool_run(e->pool, (n_rows + COL_ROWS - 1) / COL_ROWS, column_rows, &cj);
    } else {
        kz_pool_run(e->pool, job_tiles(&j), gemm_tile, &j);
    }
    count_flop(e, c, n_rows);
}

void kz_conv_run(const kz_conv *c, kz_exec *e, float *y, size_t ldy, const float *x, size_t ldx,
                 size_t n_rows, kz_gemm_mode mode) {
    kz_conv_run_after(c, e, NULL, NULL, y, ldy, x, ldx, n_rows, mode);
}

/* The calls of one group run as one pool job: chunk i is tile i - first[k] of call k. */
typedef struct group_job {
    gemm_job jobs[KZ_CONV_GROUP_MAX];
    size_t first[KZ_CONV_GROUP_MAX + 1];
    size_t n;
} group_job;

static void group_tile(void *arg, size_t chunk, int worker) {
    const group_job *g = arg;
    size_t k = 0;
    while (chunk >= g->first[k + 1]) {
        k++;
    }
    gemm_tile((void *)&g->jobs[k], chunk - g->first[k], worker);
}

void kz_conv_run_group(const kz_conv_call *calls, size_t n, kz_exec *e, size_t n_rows,
                       kz_gemm_mode mode) {
    KZ_ASSERT(n <= KZ_CONV_GROUP_MAX);
    if (n_rows == 0 || n == 0) {
        return;
    }
    // Each call is tiled as if it ran alone on the pool's threads: the group's chunk count
    // is then ample, and the panel blocks stay as wide as the threads allow.
    const int threads = kz_pool_threads(e->pool);
    group_job g = {.n = n};
    size_t rk = n; // the call whose input rows were rounded to bf16, if any yet
    bool wide = false;
    for (size_t k = 0; k < n; k++) {
        const kz_conv_call *cl = &calls[k];
        gemm_job *j = &g.jobs[k];
        *j = conv_job(cl->c, e, cl->y, cl->ldy, cl->x, cl->ldx, n_rows, mode, threads);
        if (cl->c->wb.data) {
            if (rk == n) {
                wide = round_bf16_input(cl->c, e, cl->x, cl->ldx, n_rows, NULL, NULL);
                rk = k;
            }
            // The rows rounded for call rk serve this one too.
            KZ_ASSERT(cl->x == calls[rk].x && cl->ldx == calls[rk].ldx &&
                      cl->c->k_in == calls[rk].c->k_in && cl->c->history == calls[rk].c->history);
            use_bf16(j, cl->c, e, wide);
        }
        g.first[k + 1] = g.first[k] + job_tiles(&g.jobs[k]);
        count_flop(e, cl->c, n_rows);
    }
    kz_pool_run(e->pool, g.first[n], group_tile, &g);
}

/* --- streaming history -------------------------------------------------- */

kz_status kz_conv_state_init(kz_conv_state *s, size_t n_rows, size_t ch) {
    s->n_rows = n_rows;
    s->ch = ch;
    s->rows = calloc(n_rows * ch + 1, sizeof *s->rows);
    if (!s->rows) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory for conv state");
    }
    return KZ_OK;
}

void kz_conv_state_free(kz_conv_state *s) {
    free(s->rows);
    memset(s, 0, sizeof *s);
}

void kz_conv_state_reset(kz_conv_state *s) {
    memset(s->rows, 0, s->n_rows * s->ch * sizeof *s->rows);
}

float *kz_conv_state_begin(const kz_conv_state *s, float *scratch) {
    memcpy(scratch, s->rows, s->n_rows * s->ch * sizeof *scratch);
    return scratch + s->n_rows * s->ch;
}

void kz_conv_state_end(kz_conv_state *s, const float *scratch, size_t n_new) {
    memcpy(s->rows, scratch + n_new * s->ch, s->n_rows * s->ch * sizeof *scratch);
}

/* --- elementwise row passes --------------------------------------------- */

typedef struct rows_job {
    kz_rows_fn fn;
    void *arg;
    size_t n_rows, block;
} rows_job;

static void rows_chunk(void *arg, size_t chunk, int worker) {
    const rows_job *j = arg;
    (void)worker;
    size_t r0 = chunk * j->block;
    size_t r1 = r0 + j->block < j->n_rows ? r0 + j->block : j->n_rows;
    j->fn(j->arg, r0, r1);
}

void kz_exec_rows(kz_exec *e, size_t n_rows, size_t min_block, kz_rows_fn fn, void *arg) {
    size_t n_threads = (size_t)kz_pool_threads(e->pool);
    size_t block = (n_rows + n_threads * 4 - 1) / (n_threads * 4);
    block = block < min_block ? min_block : block;
    rows_job j = {.fn = fn, .arg = arg, .n_rows = n_rows, .block = block ? block : 1};
    kz_pool_run(e->pool, (n_rows + j.block - 1) / j.block, rows_chunk, &j);
}
