/*
 * test_winograd.c - the Winograd F(4, r) and F(6, r) convolutions, r = 7 or 2 taps, and
 * F(10, 7) (layers/winograd.c), against the direct conv-GEMM of the same layer, and the
 * choice between the tile sizes.
 *
 * Data flow: seeded random weights [n, k_in, r] packed as a causal conv (dilation
 * 1, 3 or 9; 2 taps as the codec's transposed convs, n = stride * c_out), random
 * inputs with their history rows -> kz_conv_run (direct, exact path) and kz_wino_run
 * over n_frames frames of frame_rows rows. Checks, per shape:
 *   accuracy   every output row within 5e-5 (r = 7, m = 4), 1e-4 (r = 7, m = 6), 1e-3
 *              (r = 7, m = 10) or 1e-5 (r = 2) of the direct row's scale (|y - y_direct|
 *              <= bound (max
 *              |y_direct| of the row + 1e-3)); a wrong matrix entry or tile index errs
 *              by O(1) of that scale (rows of partial tiles, where a frame's class count
 *              is not a multiple of m, included);
 *   frames     the same rows run as two calls split at a frame boundary give the
 *              bits of one call (chunk invariance);
 *   no peeking every call sees its own rows followed by NaN rows, as if the next
 *              frame were not there: a read past the call's rows poisons the output;
 *   threads    1 and 3 pool threads give identical bits;
 *   groups     the grouped path (groups of 3 tiles, each run start to end on one
 *              worker) and the whole-call path give identical bits; shapes with enough
 *              tiles for 3 threads take the grouped path (counted, so it must run).
 * Every shape runs with tiles of 4 and 6, the 7-tap ones with 10 too. Shapes include
 * frames shorter than m d (no whole tile in some classes), the codec's 32-row frames at
 * d = 9, odd channel counts and n not a multiple of 16. kz_wino_tile_for is checked on
 * the codec's frame sizes with tiles of up to 6 and of up to 10.
 */
#include "layers/winograd.h"
#include "runtime/threadpool.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float rnd(void) {
    return (float)test_rng_below(&rng, 2000001) / 1e6f - 1.0f;
}

typedef struct shape {
    size_t k_in, n, d, frame_rows, n_frames, r;
} shape;

/* A causal conv of r taps with random weights and bias (fp32 panels). */
static void make_conv(kz_conv *c, const shape *s) {
    const size_t k_rows = s->r * s->k_in;
    float *src = malloc(k_rows * s->n * sizeof *src);
    for (size_t i = 0; i < k_rows * s->n; i++) {
        src[i] = rnd() / sqrtf((float)k_rows);
    }
    memset(c, 0, sizeof *c);
    CHECK(kz_packed_init_rows(&c->w, s->r, s->k_in, s->n, src) == 0);
    free(src);
    c->bias = malloc(s->n * sizeof(float));
    for (size_t o = 0; o < s->n; o++) {
        c->bias[o] = rnd() * 0.1f;
    }
    c->k_in = s->k_in;
    c->n = s->n;
    c->taps = s->r;
    c->dilation = s->d;
    c->history = (s->r - 1) * s->d;
}

/* Frames [f0, f1) from a copy of their input rows (history included) followed by
 * 10 d rows of NaN. */
static void run_wino(const kz_wino *w, kz_exec *e, float *y, const float *x, const shape *s,
                     size_t f0, size_t f1) {
    kz_wino_scratch sc;
    kz_wino_scratch_need(w, s->frame_rows, f1 - f0, &sc.n_f, &sc.n_idx);
    sc.f = malloc((sc.n_f + 1) * sizeof(float));
    sc.idx = malloc((sc.n_idx + 1) * sizeof(size_t));
    const size_t rows = (f1 - f0) * s->frame_rows, own = (rows + (s->r - 1) * s->d) * s->k_in;
    float *xc = malloc((own + 10 * s->d * s->k_in) * sizeof *xc);
    memcpy(xc, x + f0 * s->frame_rows * s->k_in, own * sizeof *xc);
    for (size_t i = own; i < own + 10 * s->d * s->k_in; i++) {
        xc[i] = NAN;
    }
    kz_wino_run(w, e, &sc, y + f0 * s->frame_rows * s->n, s->n, xc, s->k_in, rows, s->frame_rows);
    free(xc);
    free(sc.f);
    free(sc.idx);
}

static size_t grouped_runs;

/* y_group / y_whole: the same frames with groups of 3 tiles and with the whole-call path. */
static void check_groups(kz_wino *w, kz_exec *e3, const float *x, const shape *s, const float *y1) {
    const size_t rows = s->frame_rows * s->n_frames;
    float *y_group = malloc(rows * s->n * sizeof(float));
    float *y_whole = malloc(rows * s->n * sizeof(float));
    const size_t group = w->group;
    size_t n_f, n_idx;
    kz_wino_scratch_need(w, s->frame_rows, s->n_frames, &n_f, &n_idx);
    w->group = 3;
    run_wino(w, e3, y_group, x, s, 0, s->n_frames);
    w->group = 0;
    run_wino(w, e3, y_whole, x, s, 0, s->n_frames);
    w->group = group;
    grouped_runs += n_idx / 2 >= 2 * 3 * 3;
    CHECK_MSG(memcmp(y1, y_group, rows * s->n * sizeof(float)) == 0,
              "k_in %zu d %zu: groups of 3 tiles differ", s->k_in, s->d);
    CHECK_MSG(memcmp(y1, y_whole, rows * s->n * sizeof(float)) == 0,
              "k_in %zu d %zu: the whole-call path differs", s->k_in, s->d);
    free(y_group);
    free(y_whole);
}

static void check_shape(const shape *s, size_t m, kz_pool *pool1, kz_pool *pool3) {
    const kz_kernels *k = kz_kernels_select(KZ_ISA_AUTO);
    const size_t rows = s->frame_rows * s->n_frames, hist = (s->r - 1) * s->d;
    float *x = malloc((rows + hist) * s->k_in * sizeof *x);
    for (size_t i = 0; i < (rows + hist) * s->k_in; i++) {
        x[i] = rnd();
    }
    kz_conv c;
    make_conv(&c, s);
    kz_wino w;
    CHECK(kz_wino_init(&w, &c, m) == KZ_OK);
    const double bound = s->r == 2 ? 1e-5 : m == 4 ? 5e-5 : m == 6 ? 1e-4 : 1e-3;
    float *y_direct = malloc(rows * s->n * sizeof(float));
    float *y1 = malloc(rows * s->n * sizeof(float));
    float *y3 = malloc(rows * s->n * sizeof(float));
    float *y_split = malloc(rows * s->n * sizeof(float));
    kz_exec e1 = {.k = k, .pool = pool1};
    kz_exec e3 = {.k = k, .pool = pool3};
    kz_conv_run(&c, &e1, y_direct, s->n, x, s->k_in, rows, KZ_GEMM_STORE);
    run_wino(&w, &e1, y1, x, s, 0, s->n_frames);
    run_wino(&w, &e3, y3, x, s, 0, s->n_frames);
    const size_t cut = s->n_frames / 2;
    run_wino(&w, &e3, y_split, x, s, 0, cut);
    run_wino(&w, &e3, y_split, x, s, cut, s->n_frames);
    check_groups(&w, &e3, x, s, y1);
    int accurate = 1;
    double worst = 0.0;
    for (size_t t = 0; t < rows; t++) {
        const float *yd = y_direct + t * s->n, *yw = y1 + t * s->n;
        float scale = 1e-3f;
        for (size_t o = 0; o < s->n; o++) {
            scale = fmaxf(scale, fabsf(yd[o]));
        }
        for (size_t o = 0; o < s->n; o++) {
            const double err = fabs((double)yw[o] - (double)yd[o]) / scale;
            worst = err > worst ? err : worst;
            accurate &= err <= bound; // false for NaN
        }
    }
    CHECK_MSG(accurate,
              "r %zu m %zu k_in %zu n %zu d %zu frame %zu x %zu: worst error %.3g of the row scale",
              s->r, m, s->k_in, s->n, s->d, s->frame_rows, s->n_frames, worst);
    CHECK_MSG(memcmp(y1, y3, rows * s->n * sizeof(float)) == 0,
              "k_in %zu d %zu: 1 and 3 threads differ", s->k_in, s->d);
    CHECK_MSG(memcmp(y1, y_split, rows * s->n * sizeof(float)) == 0,
              "k_in %zu d %zu: split at frame %zu differs from one call", s->k_in, s->d, cut);
    printf("r %zu m %zu k_in %4zu n %3zu d %zu frame %4zu x %zu: worst error %.2e of the row scale\n",
           s->r, m, s->k_in, s->n, s->d, s->frame_rows, s->n_frames, worst);
    kz_wino_free(&w);
    kz_conv_free(&c);
    free(x);
    free(y_direct);
    free(y1);
    free(y3);
    free(y_split);
}

/* Transformed rows per frame decide: the 0.6B codec's 32-row frames at d = 9 (classes
 * of 3-4 outputs: one tile each either way) keep 4; its longer frames take 6. Its
 * transposed convs (r = 2, d = 1): 32 input rows a frame 8 x 5 < 6 x 7 rows -> 4;
 * 160 and 640 -> 6. With tiles of up to 10 (7 taps only): 1920 rows at d = 1 take 192
 * x 16 rows against 320 x 12; 160 at d = 9 (classes of 17-18) 2 x 16 against 3 x 12;
 * 32 at d = 1 (4 x 16 = 64 against 6 x 12 = 72); 32 at d = 3 (classes of 10-11: 2 x 16
 * against 2 x 12) keeps 6; 9 rows at d = 1 take one tile of 10 (16 rows against 2 x 12);
 * 2 taps never take 10. */
static void check_tile_choice(void) {
    static const struct {
        size_t frame_rows, d, r, max_m, m;
    } cases[] = {{32, 1, 7, 6, 6},    {32, 3, 7, 6, 6},   {32, 9, 7, 6, 4},   {160, 9, 7, 6, 6},
                 {1920, 9, 7, 6, 6},  {4, 1, 7, 6, 4},    {7, 1, 7, 6, 4},    {8, 1, 7, 6, 4},
                 {6, 1, 7, 6, 6},     {3, 9, 7, 6, 4},    {32, 1, 2, 6, 4},   {160, 1, 2, 6, 6},
                 {640, 1, 2, 6, 6},   {4, 1, 2, 6, 4},    {6, 1, 2, 6, 6},    {1920, 1, 7, 10, 10},
                 {160, 9, 7, 10, 10}, {32, 1, 7, 10, 10}, {32, 3, 7, 10, 6},  {32, 9, 7, 10, 4},
                 {10, 1, 7, 10, 10},  {9, 1, 7, 10, 10},   {640, 1, 2, 10, 6}, {1920, 1, 7, 4, 4}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const size_t m =
            kz_wino_tile_for(cases[i].frame_rows, cases[i].d, cases[i].r, cases[i].max_m);
        CHECK_MSG(m == cases[i].m, "frame %zu d %zu r %zu max %zu: tile %zu, expected %zu",
                  cases[i].frame_rows, cases[i].d, cases[i].r, cases[i].max_m, m, cases[i].m);
    }
}

int main(void) {
    kz_pool *pool1;
    kz_pool *pool3;
    if (kz_pool_new(1, &pool1) != KZ_OK || kz_pool_new(3, &pool3) != KZ_OK) {
        fprintf(stderr, "kz_pool_new failed\n");
        return 1;
    }
    static const shape shapes[] = {
        {64, 64, 1, 32, 3, 7},  {64, 48, 3, 32, 2, 7}, {96, 96, 9, 32, 2, 7},
        {33, 21, 3, 10, 3, 7},  {17, 40, 9, 20, 2, 7}, {40, 17, 1, 7, 4, 7},
        {128, 64, 9, 160, 2, 7}, {96, 96, 3, 96, 2, 7}, {24, 24, 1, 4, 2, 7},
        {12, 16, 9, 3, 2, 7},
        // 2 taps: the transposed convs of the 0.6B codec's blocks 2-4 (32, 160, 640 input
        // rows a frame, n = stride * c_out), odd sizes, frames shorter than a tile
        {96, 320, 1, 32, 3, 2}, {48, 96, 1, 160, 2, 2}, {24, 36, 1, 640, 2, 2},
        {33, 21, 1, 10, 3, 2},  {17, 40, 1, 3, 4, 2},   {40, 17, 1, 7, 2, 2},
    };
    static const size_t tiles[] = {4, 6, 10};
    for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++) {
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            if (tiles[t] <= 6 || shapes[i].r == 7) {
                check_shape(&shapes[i], tiles[t], pool1, pool3);
            }
        }
    }
    CHECK_MSG(grouped_runs > 0, "no shape took the grouped path");
    check_tile_choice();
    kz_pool_free(pool1);
    kz_pool_free(pool3);
    return test_main_result("test_winograd");
}
