/*
 * test_gemm_bf16.c - the bf16 conv-GEMM (codec fast precision): scalar
 * definition, packing, and every kernel table's (scalar: the definition; AVX2 / NEON
 * FMAs, AVX512_BF16, AMX) against them.
 *
 * Data flow: seeded random inputs (xorshift, fixed seed) ->
 *   rounding  kz_bf16_round on hand-made cases (ties to even, denormals to signed
 *             zero, NaN quieted, overflow to infinity); round_bf16 and round_bf16_f32
 *             of every table the CPU runs vs the scalar definition bit for bit
 *             (ragged widths, zeroed padding);
 *   packing   kz_packed_bf16_init vs the unpacked weights element by element,
 *             odd-k_in pair and columns >= n zero;
 *   gemm      scalar definition vs a naive loop written here from the contract in
 *             kernels.h: bit-identical. The AVX2 and NEON ones (FMAs on widened bf16:
 *             the definition's own roundings) vs scalar: bit-identical. The others within
 *                 |y - y_ref| <= 2 (K + 2) 2^-24 (S + |bias| + |y0|) + K 2^-126
 *             with K the number of pairs and S the sum of |products| (bf16 values):
 *             vdpbf16ps may flush denormal sums and round the pair's two adds as
 *             one, each a difference of at most one rounding per pair. A wrong
 *             index or layout errs by about S / sqrt(K), thousands of times more
 *             at these sizes. How many elements match the definition exactly is
 *             printed. Shapes: rows 1..13 and beyond a row block, odd k_in, n not
 *             a multiple of 16, taps 1/2/7, tap stride 1/3/9, k beyond one k block,
 *             store / accumulate, bias or not, ldx > 2 k_pairs, ldy > n (columns
 *             >= n and row padding must stay untouched);
 *   splits    random row x panel splits over many calls vs one call: identical bits
 *             (scalar and level).
 * "Level" is every kernel table the CPU runs (test_levels.h: every sub-level, scalar
 * included, so the scalar table's gemm_bf16 is the definition), each distinct gemm_bf16
 * (AMX tiles and AVX512_BF16's vdpbf16ps where present, FMAs on widened bf16 on every
 * x86-64 with AVX2 and on NEON) checked once; the FMA ones also from fp32 x (xf), bit for
 * bit. Each table's gemm_bf16_name names its function.
 */
#include "kernels/kernels.h"
#include "test.h"
#include "test_levels.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x2545f4914f6cdd1dull;

static float from_bits(uint32_t u) {
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* Every table the CPU runs (their rounding is under test), and those of them whose
 * gemm_bf16 differs from the previous table's (their GEMM is). */
static const kz_kernels *levels[TEST_MAX_LEVELS];
static size_t n_levels;
static const kz_kernels *impls[TEST_MAX_LEVELS];
static size_t n_impls;

/* --- rounding ------------------------------------------------------------ */

typedef struct round_case {
    uint32_t in;
    uint16_t out;
} round_case;

static const round_case round_cases[] = {
    {0x3f800000u, 0x3f80u}, // 1.0
    {0x3f808000u, 0x3f80u}, // tie, even stays
    {0x3f818000u, 0x3f82u}, // tie, odd rounds up
    {0x3f808001u, 0x3f81u}, // above the tie
    {0xbf80ffffu, 0xbf81u}, // negative rounds in magnitude
    {0x00000001u, 0x0000u}, // denormal -> +0
    {0x807fffffu, 0x8000u}, // denormal -> -0
    {0x00800000u, 0x0080u}, // smallest normal
    {0x7f7fffffu, 0x7f80u}, // FLT_MAX -> inf
    {0xff800000u, 0xff80u}, // -inf
    {0x7f800001u, 0x7fc0u}, // signalling NaN is quieted
    {0xffc12345u, 0xffc1u}, // quiet NaN keeps its top bits
};

static void round_level(const kz_kernels *level) {
    // Level vs definition: random values of every magnitude and the cases above.
    for (int trial = 0; trial < 50; trial++) {
        const size_t rows = test_xs_size(&rng, 1, 5);
        const size_t cols = test_xs_size(&rng, 0, 70);
        const size_t ldx = cols + test_xs_size(&rng, 0, 3);
        const size_t ldy = cols + test_xs_size(&rng, 0, 3);
        float *x = malloc((rows * ldx + 1) * sizeof(float));
        for (size_t i = 0; i < rows * ldx; i++) {
            const uint32_t u = test_xs_u32(&rng);
            x[i] = i % 7 == 0 ? from_bits(round_cases[u % 12].in) : from_bits(u);
        }
        uint16_t *y_ref = malloc((rows * ldy + 1) * sizeof(uint16_t));
        uint16_t *y = malloc((rows * ldy + 1) * sizeof(uint16_t));
        memset(y_ref, 0xab, rows * ldy * sizeof(uint16_t));
        memset(y, 0xcd, rows * ldy * sizeof(uint16_t));
        kz_round_bf16_ref(y_ref, ldy, x, ldx, rows, cols);
        if (level->round_bf16) {
            level->round_bf16(y, ldy, x, ldx, rows, cols);
            CHECK_MSG(memcmp(y, y_ref, rows * ldy * sizeof(uint16_t)) == 0,
                      "%s round_bf16 differs from the definition (rows %zu cols %zu)",
                      level->name, rows, cols);
        }
        if (level->round_bf16_f32) { // the same values as fp32, padding 0.0f
            float *yf = malloc((rows * ldy + 1) * sizeof(float));
            memset(yf, 0xcd, rows * ldy * sizeof(float));
            level->round_bf16_f32(yf, ldy, x, ldx, rows, cols);
            int same = 1;
            for (size_t i = 0; i < rows * ldy; i++) {
                const float want = kz_bf16_to_f32(y_ref[i]);
                same &= memcmp(&yf[i], &want, sizeof want) == 0;
            }
            CHECK_MSG(same, "%s round_bf16_f32 differs from the definition (rows %zu cols %zu)",
                      level->name, rows, cols);
            free(yf);
        }
        free(x);
        free(y_ref);
        free(y);
    }
}

static void test_round(void) {
    for (size_t i = 0; i < sizeof round_cases / sizeof round_cases[0]; i++) {
        const uint16_t b = kz_bf16_round(from_bits(round_cases[i].in));
        CHECK_MSG(b == round_cases[i].out, "bf16(0x%08x) = 0x%04x, want 0x%04x",
                  round_cases[i].in, b, round_cases[i].out);
    }
    CHECK(kz_bf16_to_f32(0x3f80u) == 1.0f);
    CHECK(kz_bf16_to_f32(0xc040u) == -3.0f);
    for (size_t v = 0; v < n_levels; v++) {
        round_level(levels[v]);
    }
}

/* --- cases ----------------------------------------------------------------- */

typedef struct gemm_case {
    size_t rows, k_in, taps, tap_stride, n, ldx_pad, ldy;
    kz_gemm_mode mode;
    int has_bias;
} gemm_case;

typedef struct gemm_data {
    gemm_case c;
    float *w;            // [taps * k_in, n] row-major, W_j[i, o] at (j * k_in + i) * n + o
    kz_packed packed;    // fp32 panels
    kz_packed_bf16 wb;   // bf16 panels
    uint16_t *x;         // bf16 rows [x_rows, ldx]
    size_t ldx, x_rows;
    float *bias;         // [n] or NULL
    float *y_init;       // [rows, ldy]
} gemm_data;

static gemm_data gemm_data_new(gemm_case c) {
    gemm_data d = {.c = c};
    d.w = test_xs_array(&rng, c.taps * c.k_in * c.n, -1.0f, 1.0f);
    CHECK(kz_packed_init_rows(&d.packed, c.taps, c.k_in, c.n, d.w) == 0);
    CHECK(kz_packed_bf16_init(&d.wb, &d.packed) == 0);
    d.ldx = 2 * d.wb.k_pairs + 2 * c.ldx_pad;
    d.x_rows = (c.rows - 1) + (c.taps - 1) * c.tap_stride + 1;
    float *xf = test_xs_array(&rng, d.x_rows * d.ldx, -1.0f, 1.0f);
    d.x = malloc((d.x_rows * d.ldx + 1) * sizeof(uint16_t));
    kz_round_bf16_ref(d.x, d.ldx, xf, d.ldx, d.x_rows, c.k_in);
    for (size_t t = 0; t < d.x_rows; t++) { // beyond the pairs: NaN, must never be read
        for (size_t i = 2 * d.wb.k_pairs; i < d.ldx; i++) {
            d.x[t * d.ldx + i] = 0x7fc0u;
        }
    }
    free(xf);
    d.bias = c.has_bias ? test_xs_array(&rng, c.n, -0.5f, 0.5f) : NULL;
    d.y_init = test_xs_array(&rng, c.rows * c.ldy, -2.0f, 2.0f);
    return d;
}

static void gemm_data_free(gemm_data *d) {
    free(d->w);
    kz_packed_free(&d->packed);
    kz_packed_bf16_free(&d->wb);
    free(d->x);
    free(d->bias);
    free(d->y_init);
}

static kz_gemm_bf16_args gemm_args(const gemm_data *d, float *y) {
    return (kz_gemm_bf16_args){.y = y, .ldy = d->c.ldy, .x = d->x, .ldx = d->ldx,
                               .tap_stride = d->c.tap_stride, .w = &d->wb, .bias = d->bias,
                               .mode = d->c.mode, .n_rows = d->c.rows};
}

static float xb(const gemm_data *d, size_t row, size_t i) {
    return i < d->c.k_in ? kz_bf16_to_f32(d->x[row * d->ldx + i]) : 0.0f;
}

static float wbf(const gemm_data *d, size_t j, size_t i, size_t o) {
    return i < d->c.k_in ? kz_bf16_to_f32(kz_bf16_round(d->w[(j * d->c.k_in + i) * d->c.n + o]))
                         : 0.0f;
}

/* The contract of kernels.h read literally, from the unpacked weights. */
static void gemm_naive(const gemm_data *d, float *y) {
    const gemm_case *c = &d->c;
    const size_t k_pairs = (c->k_in + 1) / 2;
    for (size_t t = 0; t < c->rows; t++) {
        for (size_t o = 0; o < c->n; o++) {
            float acc = 0.0f;
            for (size_t j = 0; j < c->taps; j++) {
                const size_t row = t + j * c->tap_stride;
                for (size_t q = 0; q < k_pairs; q++) {
                    acc = acc + xb(d, row, 2 * q + 1) * wbf(d, j, 2 * q + 1, o);
                    acc = acc + xb(d, row, 2 * q) * wbf(d, j, 2 * q, o);
                }
            }
            float r = acc;
            if (d->bias) {
                r = r + d->bias[o];
            }
            if (c->mode == KZ_GEMM_ACCUMULATE) {
                r = y[t * c->ldy + o] + r;
            }
            y[t * c->ldy + o] = r;
        }
    }
}

/* Tolerance of one element (see the file comment). */
static double gemm_bound(const gemm_data *d, size_t t, size_t o) {
    const gemm_case *c = &d->c;
    double s = 0.0;
    for (size_t j = 0; j < c->taps; j++) {
        for (size_t i = 0; i < c->k_in; i++) {
            s += fabs((double)xb(d, t + j * c->tap_stride, i) * wbf(d, j, i, o));
        }
    }
    s += d->bias ? fabs(d->bias[o]) : 0.0;
    s += c->mode == KZ_GEMM_ACCUMULATE ? fabs(d->y_init[t * c->ldy + o]) : 0.0;
    const double k = (double)(c->taps * ((c->k_in + 1) / 2));
    return 2.0 * (k + 2.0) * 0x1p-24 * s + k * 0x1p-126;
}

static void print_case(const char *what, const gemm_case *c) {
    fprintf(stderr, "  %s: rows %zu k_in %zu taps %zu tap_stride %zu n %zu ldx+%zu ldy %zu %s%s\n",
            what, c->rows, c->k_in, c->taps, c->tap_stride, c->n, 2 * c->ldx_pad, c->ldy,
            c->mode == KZ_GEMM_ACCUMULATE ? "accumulate" : "store", c->has_bias ? " bias" : "");
}

static gemm_case gemm_case_rand(size_t max_rows, size_t max_k_in, size_t max_n) {
    static const size_t taps_choice[] = {1, 2, 7};
    static const size_t stride_choice[] = {1, 3, 9};
    gemm_case c;
    c.rows = test_xs_size(&rng, 1, max_rows);
    c.k_in = test_xs_size(&rng, 1, max_k_in);
    c.taps = taps_choice[test_xs_u32(&rng) % 3];
    c.tap_stride = stride_choice[test_xs_u32(&rng) % 3];
    c.n = test_xs_size(&rng, 1, max_n);
    c.ldx_pad = test_xs_u32(&rng) % 2 ? test_xs_size(&rng, 1, 3) : 0;
    c.ldy = c.n + (test_xs_u32(&rng) % 2 ? test_xs_size(&rng, 1, 9) : 0);
    c.mode = test_xs_u32(&rng) % 2 ? KZ_GEMM_ACCUMULATE : KZ_GEMM_STORE;
    c.has_bias = (int)(test_xs_u32(&rng) % 2);
    return c;
}

/* --- packing ---------------------------------------------------------------- */

/* Every third case packs weights of all bit patterns instead (NaN, infinities, denormals,
 * ties): the packer's rounding must be kz_bf16_round's (the packer runs vectorised). */
static void use_any_bits(gemm_data *d) {
    static const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x00000001u, 0x807fffffu,
                                       0x7f7fffffu, 0xff800000u, 0x7f800001u, 0xffc12345u};
    const size_t n = d->c.taps * d->c.k_in * d->c.n;
    for (size_t i = 0; i < n; i++) {
        const uint32_t u = test_xs_u32(&rng);
        d->w[i] = i % 5 == 0 ? from_bits(special[u % 8]) : from_bits(u);
    }
    kz_packed_free(&d->packed);
    kz_packed_bf16_free(&d->wb);
    CHECK(kz_packed_init_rows(&d->packed, d->c.taps, d->c.k_in, d->c.n, d->w) == 0);
    CHECK(kz_packed_bf16_init(&d->wb, &d->packed) == 0);
}

static void test_pack(void) {
    for (int trial = 0; trial < 40; trial++) {
        gemm_case c = gemm_case_rand(2, 40, 50);
        gemm_data d = gemm_data_new(c);
        if (trial % 3 == 2) {
            use_any_bits(&d);
        }
        const kz_packed_bf16 *p = &d.wb;
        CHECK(p->k_in == c.k_in && p->taps == c.taps && p->n == c.n);
        CHECK(p->k_pairs == (c.k_in + 1) / 2 && p->n_panels == (c.n + KZ_PANEL - 1) / KZ_PANEL);
        CHECK((uintptr_t)p->data % 64 == 0);
        int ok = 1;
        for (size_t pn = 0; pn < p->n_panels; pn++) {
            for (size_t j = 0; j < c.taps; j++) {
                for (size_t q = 0; q < p->k_pairs; q++) {
                    for (size_t col = 0; col < KZ_PANEL; col++) {
                        for (size_t e = 0; e < 2; e++) {
                            const size_t i = 2 * q + e, o = pn * KZ_PANEL + col;
                            const uint16_t got = p->data[((pn * c.taps + j) * p->k_pairs + q) *
                                                             KZ_PANEL * 2 + 2 * col + e];
                            const uint16_t want =
                                i < c.k_in && o < c.n
                                    ? kz_bf16_round(d.w[(j * c.k_in + i) * c.n + o])
                                    : 0;
                            ok &= got == want;
                        }
                    }
                }
            }
        }
        CHECK_MSG(ok, "bf16 panels differ from the layout in kernels.h");
        if (!ok) {
            print_case("case", &c);
        }
        gemm_data_free(&d);
    }
    kz_packed_bf16_free(NULL);
}

/* --- gemm --------------------------------------------------------------------- */

/* d's bf16 x rows as fp32 values (kz_gemm_bf16_args.xf). */
static float *widened_x(const gemm_data *d) {
    const size_t n = d->x_rows * d->ldx;
    float *xf = malloc((n ? n : 1) * sizeof *xf);
    for (size_t i = 0; i < n; i++) {
        xf[i] = kz_bf16_to_f32(d->x[i]);
    }
    return xf;
}

static size_t n_checked[TEST_MAX_LEVELS], n_exact[TEST_MAX_LEVELS];

/* Whether table k's gemm_bf16 gives the definition's bits: the definition itself and the
 * FMA ones on widened bf16 (which read fp32 rows, round_bf16_f32). */
static int exact_gemm(const kz_kernels *k) {
    return k->gemm_bf16 == kz_gemm_bf16_ref || k->round_bf16_f32 != NULL;
}

static void gemm_parity(gemm_case c) {
    gemm_data d = gemm_data_new(c);
    const size_t ny = c.rows * c.ldy;
    float *y_naive = test_copy_floats(d.y_init, ny);
    float *y_ref = test_copy_floats(d.y_init, ny);
    gemm_naive(&d, y_naive);
    kz_gemm_bf16_args a = gemm_args(&d, y_ref);
    kz_gemm_bf16_ref(&a, 0, c.rows, 0, d.wb.n_panels);
    const int ok_ref = memcmp(y_ref, y_naive, ny * sizeof(float)) == 0;
    CHECK_MSG(ok_ref, "scalar bf16 gemm differs from the contract");
    if (!ok_ref) {
        print_case("case", &c);
    }
    for (size_t v = 0; v < n_impls; v++) {
        float *y = test_copy_floats(d.y_init, ny);
        a.y = y;
        impls[v]->gemm_bf16(&a, 0, c.rows, 0, d.wb.n_panels);
        int ok = 1;
        double worst = 0.0;
        for (size_t t = 0; t < c.rows; t++) {
            for (size_t o = 0; o < c.ldy; o++) {
                const size_t k = t * c.ldy + o;
                if (o >= c.n) { // columns >= n and row padding untouched
                    ok &= memcmp(&y[k], &d.y_init[k], sizeof(float)) == 0;
                    continue;
                }
                const double err = fabs((double)y[k] - (double)y_ref[k]);
                const double bound = gemm_bound(&d, t, o);
                worst = err / bound > worst ? err / bound : worst;
                ok &= err <= bound;
                n_checked[v]++;
                n_exact[v] += memcmp(&y[k], &y_ref[k], sizeof(float)) == 0;
            }
        }
        CHECK_MSG(ok, "%s bf16 gemm differs from the definition beyond the bound (worst %.3g x)",
                  impls[v]->name, worst);
        if (exact_gemm(impls[v])) { // the definition's bits
            const int same = memcmp(y, y_ref, ny * sizeof(float)) == 0;
            CHECK_MSG(same, "%s bf16 gemm differs from the definition", impls[v]->name);
            ok &= same;
        }
        if (impls[v]->round_bf16_f32) { // FMAs on widened bf16: every bit from xf too
            float *xf = widened_x(&d);
            memcpy(y, d.y_init, ny * sizeof(float));
            kz_gemm_bf16_args af = a;
            af.x = NULL;
            af.xf = xf;
            af.y = y;
            impls[v]->gemm_bf16(&af, 0, c.rows, 0, d.wb.n_panels);
            const int same_xf = memcmp(y, y_ref, ny * sizeof(float)) == 0;
            CHECK_MSG(same_xf, "%s bf16 gemm from xf differs from the definition",
                      impls[v]->name);
            ok &= same_xf;
            free(xf);
        }
        if (!ok) {
            print_case("case", &c);
        }
        free(y);
    }
    free(y_naive);
    free(y_ref);
    gemm_data_free(&d);
}

static size_t random_cuts(size_t n, size_t *bounds, size_t max_cuts) {
    size_t m = 0;
    bounds[m++] = 0;
    const size_t cuts = n > 1 ? test_xs_size(&rng, 0, max_cuts) : 0;
    for (size_t k = 0; k < cuts; k++) {
        bounds[m++] = test_xs_size(&rng, 1, n - 1);
    }
    bounds[m++] = n;
    for (size_t i = 1; i < m; i++) {
        for (size_t k = i; k > 0 && bounds[k - 1] > bounds[k]; k--) {
            const size_t tmp = bounds[k];
            bounds[k] = bounds[k - 1];
            bounds[k - 1] = tmp;
        }
    }
    return m - 1;
}

typedef void (*gemm_bf16_fn)(const kz_gemm_bf16_args *a, size_t t0, size_t t1, size_t p0,
                             size_t p1);

static void gemm_split(const char *name, gemm_bf16_fn gemm, gemm_case c) {
    gemm_data d = gemm_data_new(c);
    const size_t ny = c.rows * c.ldy;
    float *y_one = test_copy_floats(d.y_init, ny);
    float *y_split = test_copy_floats(d.y_init, ny);
    kz_gemm_bf16_args a = gemm_args(&d, y_one);
    gemm(&a, 0, c.rows, 0, d.wb.n_panels);
    size_t rb[16];
    size_t pb[16];
    const size_t nr = random_cuts(c.rows, rb, 6);
    const size_t np = random_cuts(d.wb.n_panels, pb, 4);
    a.y = y_split;
    for (size_t pi = np; pi-- > 0;) {
        for (size_t ri = 0; ri < nr; ri++) {
            gemm(&a, rb[ri], rb[ri + 1], pb[pi], pb[pi + 1]);
        }
    }
    const int ok = memcmp(y_one, y_split, ny * sizeof(float)) == 0;
    CHECK_MSG(ok, "%s bf16 gemm: split calls differ from one call", name);
    if (!ok) {
        print_case("case", &c);
    }
    free(y_one);
    free(y_split);
    gemm_data_free(&d);
}

static void test_gemm(void) {
    for (int trial = 0; trial < 400; trial++) {
        gemm_parity(gemm_case_rand(13, 41, 70));
    }
    // Beyond one k block (256 pair rows) and one row block (at most 192 rows).
    const gemm_case big[] = {
        {200, 301, 1, 1, 40, 0, 40, KZ_GEMM_STORE, 1},
        {50, 97, 7, 9, 33, 1, 33, KZ_GEMM_ACCUMULATE, 0},
        {27, 1025, 1, 1, 17, 0, 20, KZ_GEMM_STORE, 0},
        {61, 129, 2, 1, 35, 2, 37, KZ_GEMM_ACCUMULATE, 1},
        {13, 0, 1, 1, 5, 0, 5, KZ_GEMM_ACCUMULATE, 1}, // k_in 0: y = (y +) bias
    };
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        gemm_parity(big[i]);
    }
    for (int trial = 0; trial < 60; trial++) {
        const gemm_case c = trial < 50 ? gemm_case_rand(40, 41, 90) : gemm_case_rand(230, 600, 70);
        for (size_t v = 0; v < n_impls; v++) {
            gemm_split(impls[v]->name, impls[v]->gemm_bf16, c);
        }
    }
    for (size_t v = 0; v < n_impls; v++) {
        printf("bf16 gemm %s (%s): %zu of %zu elements equal the definition bit for bit\n",
               impls[v]->gemm_bf16_name, impls[v]->name, n_exact[v], n_checked[v]);
    }
}

/* The gemm_bf16 function a table's gemm_bf16_name names (NULL: not in this build). */
static gemm_bf16_fn named_gemm(const char *name) {
    if (strcmp(name, "ref") == 0) {
        return kz_gemm_bf16_ref;
    }
#ifdef KZ_HAVE_X86
    if (strcmp(name, "avx2") == 0) {
        return kz_gemm_bf16_avx2;
    }
    if (strcmp(name, "avx512bf16") == 0) {
        return kz_gemm_bf16_avx512;
    }
    if (strcmp(name, "amx") == 0) {
        return kz_gemm_bf16_amx;
    }
#endif
#ifdef KZ_HAVE_ARM
    if (strcmp(name, "neon") == 0) {
        return kz_gemm_bf16_neon;
    }
#endif
    return NULL;
}

int main(void) {
    for (size_t l = 0; l < test_n_levels(); l++) {
        const kz_kernels *k = test_level(l);
        if (!k) {
            continue;
        }
        CHECK_MSG(k->gemm_bf16 && k->round_bf16 && k->gemm_bf16_name,
                  "%s: no bf16 gemm or rounding in the table", k->name);
        CHECK_MSG(k->gemm_bf16 == named_gemm(k->gemm_bf16_name), "%s: gemm_bf16 is not %s",
                  k->name, k->gemm_bf16_name);
        // Only the FMA ones on widened bf16 read fp32 rows.
        const int fma = strcmp(k->gemm_bf16_name, "avx2") == 0 ||
                        strcmp(k->gemm_bf16_name, "neon") == 0;
        CHECK_MSG(fma == (k->round_bf16_f32 != NULL), "%s: round_bf16_f32 %s", k->name,
                  k->round_bf16_f32 ? "set" : "missing");
        levels[n_levels++] = k;
        if (n_impls == 0 || impls[n_impls - 1]->gemm_bf16 != k->gemm_bf16) {
            impls[n_impls++] = k;
            printf("bf16 gemm %s: in sub-level %s\n", k->gemm_bf16_name, k->name);
        }
    }
    // The scalar table runs the bf16 codec too: the definitions.
    CHECK(kz_kernels_scalar.gemm_bf16 == kz_gemm_bf16_ref);
    CHECK(kz_kernels_scalar.round_bf16 == kz_round_bf16_ref);
    CHECK(n_levels > 0 && levels[0] == &kz_kernels_scalar);
    test_round();
    test_pack();
    test_gemm();
    return test_main_result("test_gemm_bf16");
}
