/*
 * winograd.c - causal convolutions of r = 7 or 2 taps by Winograd F(m, r), m = 4 or 6,
 * and 10 for r = 7 (see winograd.h).
 *
 * Load: the conv's fp32 panels W_j [k_in, n] (j < r) -> U_k = sum_j G[k][j] W_j in
 * double, rounded once, panel by panel straight into the packed layout of m + r - 1 1x1
 * convs (zero columns beyond n stay zero). The Toom-Cook matrices of the five shapes
 * are built once from the interpolation points in double (exact enough: every entry
 * is a small rational) and kept as floats.
 * Run, per call (whole frames):
 *   plan      per frame, per residue class mod d: tiles of m outputs in increasing
 *             order, the last one partial (1 to m - 1 outputs) when the class's count
 *             is not a multiple of m -> (base row, count) per tile in idx scratch
 *   input     V[k][tile][:] = sum_l BT[k][l] x[base + l d]       (pool over tiles, mix_rows)
 *             a partial tile of c outputs reads l < c + r - 1 and a zero row for the rest
 *             (those rows belong to the next frame, which another chunk may hold)
 *   GEMMs     M[k] = V[k] U_k                  (kz_conv_run_group of m + r - 1: one pool job)
 *   output    y[base + i d] = sum_k AT[i][k] M[k][tile] + bias, i < count
 *                                                                (pool over tiles, mix_rows)
 * Grouped path (up to kz_wino.group tiles per group, set at load where U is small enough
 * to stay in cache, a multiple of the GEMM's register tile rows at run time): each pool
 * chunk is one group of consecutive tiles run start to end on one worker (input -> the
 * m + r - 1 GEMMs on the kernel table directly -> output) on its own slice of the
 * scratch, so V and M never leave its L2 (the whole-call path writes and reads them
 * through L3 or DRAM: 19 MB each for a 16-frame chunk of the 0.6B codec's 96-channel
 * convs).
 * Each output row is written by one tile in a fixed sequence of mix_rows / GEMM steps
 * that depends only on its place in its frame (the GEMM's bits do not depend on its row
 * blocking), so neither the chunk, the pool's split nor the path changes bits. The
 * conv's own panels are not read at run time (the codec releases them).
 */
#include "layers/winograd.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "runtime/threadpool.h"

/* The Toom-Cook matrices of one tile size and kernel length, rows packed at their own
 * width (the stride mix_rows expects). */
typedef struct tile_mats {
    size_t m, n;                                        /* outputs, points (m + r - 1) */
    float at[KZ_WINO_MAX_M * KZ_WINO_MAX_N];            /* output transform [m][n] */
    float at_bias[KZ_WINO_MAX_M * (KZ_WINO_MAX_N + 1)]; /* the same, then 1: the bias [m][n+1] */
    double g[KZ_WINO_MAX_N * KZ_WINO_MAX_R];            /* weight transform [n][r], at load */
    float bt[KZ_WINO_MAX_N * KZ_WINO_MAX_N];            /* input transform [n][n] */
} tile_mats;

/* The tile sizes, in MATS's order; a tile of 10 only with 7 taps (winograd.h). */
static const size_t TILE_M[3] = {4, 6, 10};

static int tile_exists(size_t m, size_t r) {
    return m == 4 || m == 6 || (m == 10 && r == 7);
}

/* [r == 7][index of m in TILE_M]: F(4, 2), F(6, 2), (none), F(4, 7), F(6, 7), F(10, 7) */
static tile_mats MATS[2][3];
static pthread_once_t matrices_once = PTHREAD_ONCE_INIT;

/* Multiplies the polynomial p (ascending coefficients, *len of them) by (x - a). */
static void poly_times_root(double *p, int *len, double a) {
    p[*len] = 0.0;
    for (int i = *len; i > 0; i--) {
        p[i] = p[i - 1] - a * p[i];
    }
    p[0] = -a * p[0];
    (*len)++;
}

/* Toom-Cook for correlation, by transposing linear convolution (Lavin & Gray):
 * evaluation at the m + r - 2 finite points and infinity gives G (of the kernel) and AT
 * (of the outputs, transposed); Lagrange interpolation gives BT (transposed). */
static void build_matrices(tile_mats *t, size_t m, int r, const double *pts) {
    const int n = (int)m + r - 1, fin = n - 1;
    t->m = m;
    t->n = (size_t)n;
    for (int k = 0; k < fin; k++) {
        double pw = 1.0;
        for (int j = 0; j < r; j++, pw *= pts[k]) {
            t->g[k * r + j] = pw;
        }
        pw = 1.0;
        for (size_t i = 0; i < m; i++, pw *= pts[k]) {
            t->at[i * (size_t)n + (size_t)k] = (float)pw;
        }
        // BT row k: coefficients of L_k(x) = prod_{l != k} (x - p_l) / (p_k - p_l)
        double poly[KZ_WINO_MAX_N + 1] = {1.0};
        int len = 1;
        double den = 1.0;
        for (int l = 0; l < fin; l++) {
            if (l != k) {
                poly_times_root(poly, &len, pts[l]);
                den *= pts[k] - pts[l];
            }
        }
        for (int i = 0; i < n; i++) {
            t->bt[k * n + i] = i < len ? (float)(poly[i] / den) : 0.0f;
        }
    }
    for (int j = 0; j < r; j++) { // infinity: the leading coefficients
        t->g[fin * r + j] = j == r - 1 ? 1.0 : 0.0;
    }
    for (size_t i = 0; i < m; i++) {
        t->at[i * (size_t)n + (size_t)fin] = i == m - 1 ? 1.0f : 0.0f;
        for (int k = 0; k < n; k++) {
            t->at_bias[i * (size_t)(n + 1) + (size_t)k] = t->at[i * (size_t)n + (size_t)k];
        }
        t->at_bias[i * (size_t)(n + 1) + (size_t)n] = 1.0f;
    }
    double poly[KZ_WINO_MAX_N + 1] = {1.0}; // BT row infinity: prod over all finite points
    int len = 1;
    for (int l = 0; l < fin; l++) {
        poly_times_root(poly, &len, pts[l]);
    }
    for (int i = 0; i < n; i++) {
        t->bt[fin * n + i] = (float)poly[i];
    }
}

static void build_all(void) {
    static const double pts[KZ_WINO_MAX_N - 1] = {0.0,  1.0,   -1.0, 2.0,  -2.0,  0.5, -0.5, 1.5,
                                                  -1.5, 0.75, -0.75, 0.25, -0.25, 3.0, -3.0};
    for (int r7 = 0; r7 < 2; r7++) {
        for (int i = 0; i < 3; i++) {
            if (tile_exists(TILE_M[i], r7 ? 7 : 2)) {
                build_matrices(&MATS[r7][i], TILE_M[i], r7 ? 7 : 2, pts);
            }
        }
    }
}

static const tile_mats *mats_for(size_t m, size_t r) {
    pthread_once(&matrices_once, build_all);
    int i = 0;
    while (TILE_M[i] != m) {
        i++;
    }
    return &MATS[r == 7][i];
}

/* Panel p of U_k from panel p of the conv: U_k[i][c] = sum_j G[k][j] W_j[i][c], 16 columns
 * of a panel row at a time (both layouts keep a panel row contiguous). */
KZ_CLONES static void transform_panel(float *const u[KZ_WINO_MAX_N], const tile_mats *t, size_t r,
                                      const float *wp, size_t k_in) {
    const size_t n = t->n;
    for (size_t i = 0; i < k_in; i++) {
        double acc[KZ_WINO_MAX_N][KZ_PANEL] = {{0}};
        for (size_t j = 0; j < r; j++) {
            const float *row = wp + (j * k_in + i) * KZ_PANEL;
            for (size_t k = 0; k < n; k++) {
                const double g = t->g[k * r + j];
                if (g != 0.0) {
                    for (int c = 0; c < KZ_PANEL; c++) {
                        acc[k][c] += g * (double)row[c];
                    }
                }
            }
        }
        for (size_t k = 0; k < n; k++) {
            for (int c = 0; c < KZ_PANEL; c++) {
                u[k][i * KZ_PANEL + c] = (float)acc[k][c];
            }
        }
    }
}

/* Tiles of one frame: class r holds ceil((rows - r) / d) outputs, ceil(outs / m) tiles. */
static size_t frame_tiles(size_t frame_rows, size_t d, size_t m) {
    size_t tiles = 0;
    for (size_t r = 0; r < d && r < frame_rows; r++) {
        const size_t outs = (frame_rows - r + d - 1) / d;
        tiles += (outs + m - 1) / m;
    }
    return tiles;
}

size_t kz_wino_tile_for(size_t frame_rows, size_t dilation, size_t r, size_t max_m) {
    size_t best = 4, best_rows = (size_t)-1;
    for (int i = 0; i < 3; i++) {
        const size_t m = TILE_M[i];
        if (m > max_m || !tile_exists(m, r)) {
            continue;
        }
        const size_t rows = frame_tiles(frame_rows, dilation, m) * (m + r - 1);
        if (rows < best_rows) { // strictly fewer: a tie keeps the smaller tile
            best = m;
            best_rows = rows;
        }
    }
    return best;
}

/* The grouped path for convs whose U fits in L2 / a core's share of L3 (the 0.6B codec's
 * 96- and 192-channel k7 convs and block 4's transposed conv): groups of tiles whose V and
 * M take about GROUP_BYTES, at least 8 tiles. Larger U would be re-read per group; those
 * convs keep the whole-call path (docs/ARCHITECTURE.md#winograd-convolutions). A run
 * rounds the group down to a multiple of the GEMM's register tile (group_rows). */
#define GROUP_U_BYTES (2560u * 1024u)
#define GROUP_BYTES (128u * 1024u)

static size_t group_for(const kz_wino *w) {
    const size_t u_bytes = w->n_pts * w->k_in * w->u[0].w.n_panels * KZ_PANEL * sizeof(float);
    if (u_bytes > GROUP_U_BYTES) {
        return 0;
    }
    const size_t g = GROUP_BYTES / (w->n_pts * (w->k_in + w->n) * sizeof(float));
    return g < 8 ? 8 : g;
}

/* Tiles per group of a run on kernels k: w->group rounded down to a multiple of the GEMM's
 * register tile rows, whose GEMMs then run in full tiles only (8 tiles on a 6-row tile
 * would leave 2 rows to a narrow tile, which leaves the FMA pipes half idle:
 * docs/ARCHITECTURE.md#winograd-convolutions). Groups smaller than one tile (tests) stay
 * as they are. */
static size_t group_rows(const kz_wino *w, const kz_kernels *k) {
    const size_t mr = k->gemm_mr ? k->gemm_mr : 1;
    return w->group >= mr ? w->group / mr * mr : w->group;
}

/* w's shape for conv c and tiles of m outputs, no weights yet. */
static const tile_mats *init_shape(kz_wino *w, const kz_conv *c, size_t m) {
    memset(w, 0, sizeof *w);
    const size_t r = c->taps;
    KZ_ASSERT((r == 2 || r == 7) && tile_exists(m, r));
    const tile_mats *t = mats_for(m, r);
    w->k_in = c->k_in;
    w->r = r;
    w->n = c->n;
    w->dilation = c->dilation;
    w->m = m;
    w->n_pts = t->n;
    return t;
}

size_t kz_wino_floats(const kz_conv *c, size_t m) {
    return (m + c->taps - 1) * ((c->n + KZ_PANEL - 1) / KZ_PANEL) * c->k_in * KZ_PANEL;
}

kz_status kz_wino_init_mapped(kz_wino *w, const kz_conv *c, size_t m, const float *u) {
    init_shape(w, c, m);
    const size_t floats = (c->n + KZ_PANEL - 1) / KZ_PANEL * c->k_in * KZ_PANEL;
    for (size_t k = 0; k < w->n_pts; k++) {
        w->u[k] = (kz_conv){.k_in = c->k_in, .n = c->n, .taps = 1, .dilation = 1};
        kz_packed_init_mapped(&w->u[k].w, 1, c->k_in, c->n, u + k * floats);
    }
    w->bias = c->bias;
    w->group = group_for(w);
    return KZ_OK;
}

kz_status kz_wino_init(kz_wino *w, const kz_conv *c, size_t m) {
    KZ_ASSERT(c->w.data && c->w.taps == c->taps);
    const tile_mats *t = init_shape(w, c, m);
    const size_t r = c->taps;
    const size_t k_in = c->k_in, n = c->n, k_rows = r * k_in, n_panels = c->w.n_panels;
    const size_t bytes = (n_panels * k_in * KZ_PANEL * sizeof(float) + 63) / 64 * 64 + 64;
    for (size_t k = 0; k < t->n; k++) {
        kz_conv *u = &w->u[k];
        *u = (kz_conv){.k_in = k_in, .n = n, .taps = 1, .dilation = 1};
        u->w = (kz_packed){.data = aligned_alloc(64, bytes),
                           .k_in = k_in,
                           .taps = 1,
                           .n = n,
                           .n_panels = n_panels};
        if (!u->w.data) {
            kz_wino_free(w);
            return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory for Winograd weights");
        }
    }
    for (size_t p = 0; p < n_panels; p++) {
        float *u[KZ_WINO_MAX_N];
        for (size_t k = 0; k < t->n; k++) {
            u[k] = w->u[k].w.data + p * k_in * KZ_PANEL;
        }
        transform_panel(u, t, r, c->w.data + p * k_rows * KZ_PANEL, k_in);
    }
    w->bias = c->bias;
    w->group = group_for(w);
    return KZ_OK;
}

void kz_wino_free(kz_wino *w) {
    if (!w) {
        return;
    }
    for (int k = 0; k < KZ_WINO_MAX_N; k++) {
        kz_conv_free(&w->u[k]);
    }
    memset(w, 0, sizeof *w); // bias is the conv's
}

void kz_wino_scratch_need(const kz_wino *w, size_t frame_rows, size_t n_frames, size_t *n_f,
                          size_t *n_idx) {
    const size_t tiles = frame_tiles(frame_rows, w->dilation, w->m) * n_frames;
    *n_f = w->n_pts * tiles * (w->k_in + w->n) + w->k_in; // V, M, one zero row
    *n_idx = 2 * tiles;
}

typedef struct wino_job {
    const kz_wino *w;
    const tile_mats *t;
    const kz_kernels *k;
    const float *x;
    size_t ldx;
    float *y;
    size_t ldy;
    const size_t *base;  /* [n_tiles] first output row of each tile */
    const size_t *count; /* [n_tiles] its outputs, 1..m */
    size_t n_tiles;
    float *v;          /* [n_pts][n_tiles][k_in] (whole-call path) or the groups' scratch */
    float *m;          /* [n_pts][n_tiles][n] (whole-call path) */
    const float *zero; /* [k_in] zeros: the inputs of a partial tile past its frame */
    size_t group;      /* tiles per group of the grouped path (group_rows) */
} wino_job;

/* V_l of tile t into v + (l * slots + slot) * k_in: the whole call's V (slots = n_tiles,
 * slot = t) or a group's (slots = tiles per group). */
static void input_tile(const wino_job *j, size_t t, float *v, size_t slots, size_t slot) {
    const size_t k_in = j->w->k_in, d = j->w->dilation, np = j->t->n;
    const float *src[KZ_WINO_MAX_N];
    float *dst[KZ_WINO_MAX_N];
    const size_t used = j->count[t] + j->w->r - 1;
    for (size_t l = 0; l < np; l++) {
        src[l] = l < used ? j->x + (j->base[t] + l * d) * j->ldx : j->zero;
        dst[l] = v + (l * slots + slot) * k_in;
    }
    j->k->mix_rows(dst, src, j->t->bt, np, np, k_in);
}

/* y_i = sum_k AT[i][k] M_k + bias for tile t's outputs, M_k at m + (k * slots + slot) * n:
 * the bias is one more source row with weight 1. */
static void output_tile(const wino_job *j, size_t t, const float *m, size_t slots, size_t slot) {
    const size_t n = j->w->n, d = j->w->dilation, np = j->t->n;
    const float *bias = j->w->bias;
    const float *src[KZ_WINO_MAX_N + 1];
    float *dst[KZ_WINO_MAX_M];
    for (size_t k = 0; k < np; k++) {
        src[k] = m + (k * slots + slot) * n;
    }
    src[np] = bias;
    for (size_t i = 0; i < j->count[t]; i++) {
        dst[i] = j->y + (j->base[t] + i * d) * j->ldy;
    }
    j->k->mix_rows(dst, src, bias ? j->t->at_bias : j->t->at, j->count[t], bias ? np + 1 : np, n);
}

static void input_rows(void *arg, size_t t0, size_t t1) {
    const wino_job *j = arg;
    for (size_t t = t0; t < t1; t++) {
        input_tile(j, t, j->v, j->n_tiles, t);
    }
}

static void output_rows(void *arg, size_t t0, size_t t1) {
    const wino_job *j = arg;
    for (size_t t = t0; t < t1; t++) {
        output_tile(j, t, j->m, j->n_tiles, t);
    }
}

/* Floats of one group's V and M. */
static size_t group_floats(const kz_wino *w, size_t group) {
    return w->n_pts * group * (w->k_in + w->n);
}

/* One group of tiles start to end on one worker: input transform, the n_pts GEMMs and the
 * output transform, all on the worker's own V and M (cache-resident). */
static void group_run(void *arg, size_t chunk, int worker) {
    const wino_job *j = arg;
    const kz_wino *w = j->w;
    const size_t g = j->group, t0 = chunk * g, rows = j->n_tiles - t0 < g ? j->n_tiles - t0 : g;
    float *v = j->v + (size_t)worker * group_floats(w, g), *m = v + w->n_pts * g * w->k_in;
    for (size_t t = 0; t < rows; t++) {
        input_tile(j, t0 + t, v, g, t);
    }
    for (size_t k = 0; k < w->n_pts; k++) {
        const kz_packed *u = &w->u[k].w;
        const kz_gemm_args a = {.y = m + k * g * w->n,
                                .ldy = w->n,
                                .x = v + k * g * w->k_in,
                                .ldx = w->k_in,
                                .tap_stride = 1,
                                .w = u,
                                .mode = KZ_GEMM_STORE,
                                .n_rows = rows};
        j->k->gemm(&a, 0, rows, 0, u->n_panels);
    }
    for (size_t t = 0; t < rows; t++) {
        output_tile(j, t0 + t, m, g, t);
    }
}

/* Tiles of m outputs for n_frames frames, in increasing row order within each class. */
static size_t plan(size_t frame_rows, size_t n_frames, size_t d, size_t m, size_t *base,
                   size_t *count) {
    size_t n = 0;
    for (size_t f = 0; f < n_frames; f++) {
        for (size_t r = 0; r < d && r < frame_rows; r++) {
            const size_t outs = (frame_rows - r + d - 1) / d;
            for (size_t q = 0; q < outs; q += m) {
                base[n] = f * frame_rows + r + q * d;
                count[n++] = outs - q < m ? outs - q : m;
            }
        }
    }
    return n;
}

void kz_wino_run(const kz_wino *w, kz_exec *e, const kz_wino_scratch *s, float *y, size_t ldy,
                 const float *x, size_t ldx, size_t n_rows, size_t frame_rows) {
    KZ_ASSERT(frame_rows > 0 && n_rows % frame_rows == 0);
    const size_t n_frames = n_rows / frame_rows;
    size_t need_f;
    size_t need_idx;
    kz_wino_scratch_need(w, frame_rows, n_frames, &need_f, &need_idx);
    KZ_ASSERT(s->n_f >= need_f && s->n_idx >= need_idx);
    const size_t tiles = need_idx / 2, k_in = w->k_in, n = w->n, np = w->n_pts;
    size_t *base = s->idx, *count = s->idx + tiles;
    const size_t n_tiles = plan(frame_rows, n_frames, w->dilation, w->m, base, count);
    KZ_ASSERT(n_tiles == tiles);
    if (n_tiles == 0) {
        return;
    }
    wino_job j = {.w = w,
                  .t = mats_for(w->m, w->r),
                  .k = e->k,
                  .x = x,
                  .ldx = ldx,
                  .y = y,
                  .ldy = ldy,
                  .base = base,
                  .count = count,
                  .n_tiles = n_tiles,
                  .v = s->f};
    j.m = j.v + np * n_tiles * k_in;
    float *zero = j.m + np * n_tiles * n;
    memset(zero, 0, k_in * sizeof *zero);
    j.zero = zero;
    const size_t threads = (size_t)kz_pool_threads(e->pool), g = group_rows(w, e->k);
    j.group = g;
    if (g && n_tiles >= 2 * threads * g) { // scratch: threads groups fit in V
        kz_pool_run(e->pool, (n_tiles + g - 1) / g, group_run, &j);
        e->flop += 2.0 * (double)n_tiles * (double)k_in * (double)n * (double)np;
        return;
    }
    kz_exec_rows(e, n_tiles, 8, input_rows, &j);
    kz_conv_call calls[KZ_WINO_MAX_N];
    for (size_t k = 0; k < np; k++) {
        calls[k] = (kz_conv_call){.c = &w->u[k], .y = j.m + k * n_tiles * n, .ldy = n,
                                  .x = j.v + k * n_tiles * k_in, .ldx = k_in};
    }
    kz_conv_run_group(calls, np, e, n_tiles, KZ_GEMM_STORE);
    kz_exec_rows(e, n_tiles, 8, output_rows, &j);
}
