/*
 * test_kernels.c - every kernel level against the scalar definitions.
 *
 * Data flow: seeded random inputs (xorshift, fixed seed) -> the scalar table
 * and every level and sub-level the CPU can run (test_levels.h; those it cannot run
 * are printed as skipped) -> compared as follows:
 *   packing   element by element against the unpacked weights, zero padding,
 *             64-byte alignment;
 *   gemm      scalar vs a naive loop over the unpacked weights written here
 *             (same fmaf order): bit-identical; every level vs scalar:
 *             bit-identical (memcmp of the whole y buffer, row padding and
 *             columns >= n included, which must be left untouched); random
 *             splits of rows x panels over many calls vs one call:
 *             bit-identical. Shapes cover ragged rows (1..13 and beyond one
 *             row block), ragged n, odd k_in, k beyond one k block, taps
 *             1/2/7, tap_stride 1/3/9, store and accumulate, with and
 *             without bias, ldx > k_in, ldy > n.
 *   rows      tolerances stated at each check (vector sin / erf / exp and
 *             lane-parallel sums); axpy and mix_rows bit-identical; results independent of
 *             the buffers' alignment (bit-identical at offsets 0 and 1); the binary16-row
 *             twins bit-identical to their level's float kernels on the widened rows.
 *   dispatch  names, parsing, the cap, KZ_ISA through setenv (an unknown
 *             value logs one warning and is ignored); the sub-levels: in order,
 *             each table complete (every kernel, the bf16 GEMM included), a level
 *             selecting its highest sub-level.
 */
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "kztts.h"
#include "test.h"
#include "test_levels.h"

#include <float.h>
#include <stdint.h>
#include <stdlib.h>

/* --- helpers ------------------------------------------------------------ */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static const kz_isa all_levels[] = {KZ_ISA_SCALAR, KZ_ISA_AVX2, KZ_ISA_AVX512, KZ_ISA_NEON};
#define N_LEVELS (sizeof all_levels / sizeof all_levels[0])

/* Every sub-level except scalar that this CPU runs. */
static const kz_kernels *simd_levels[TEST_MAX_LEVELS];
static size_t n_simd_levels;

/* Levels this build has tables for: x86 builds never hold NEON, nor ARM builds AVX. */
static int level_built(kz_isa isa) {
    switch (isa) {
    case KZ_ISA_SCALAR: return 1;
#ifdef KZ_HAVE_X86
    case KZ_ISA_AVX2: return 1;
    case KZ_ISA_AVX512: return 1;
#endif
#ifdef KZ_HAVE_ARM
    case KZ_ISA_NEON: return 1;
#endif
    default: return 0;
    }
}

/* Distance in float ulps at the magnitude of ref. */
static double ulps(double got, double ref) {
    const double mag = fabs(ref) > FLT_MIN ? fabs(ref) : FLT_MIN;
    int e;
    frexp(mag, &e);
    return fabs(got - ref) / ldexp(1.0, e - 24);
}

/* --- dispatch ----------------------------------------------------------- */

static int warn_count;
static char warn_text[256];

static void count_warnings(kz_log_level level, const char *message, void *user) {
    (void)user;
    if (level >= KZ_LOG_WARN) {
        warn_count++;
        snprintf(warn_text, sizeof warn_text, "%s", message);
    }
}

/* kz_kernels_select(cap) with KZ_ISA unset: the highest level <= min(cap, best)
 * that this build has a table for. */
static kz_isa select_expected(kz_isa cap) {
    kz_isa l = kz_cpu_best_isa();
    l = cap < l ? cap : l;
    while (l > KZ_ISA_SCALAR && !level_built(l)) {
        l = (kz_isa)(l - 1);
    }
    return l;
}

/* Whether table k has every kernel (round_bf16_f32 is optional: kernels.h). */
static int complete(const kz_kernels *k) {
    return k->gemm && k->gemm_mr && k->gemm_bf16 && k->round_bf16 && k->gemm_bf16_name &&
           k->snake_beta && k->rms_norm && k->layer_norm && k->gelu && k->elu && k->swiglu &&
           k->dot_rows && k->axpy_rows && k->dot_rows_f16 && k->axpy_rows_f16 && k->mix_rows && k->matmul_bf16 && k->matmul_f16 &&
           k->matmul_f32 && k->matmul_q8_0 && k->matmul_q4_0 && k->matmul_q8_0_reused &&
           k->matmul_q4_0_reused && k->quant && k->gemm_rows && k->rows_to_f32_bf16 &&
           k->rows_to_f32_f16 && k->rows_to_f32_q8_0 && k->rows_to_f32_q4_0;
}

/* The sub-levels: named in order (scalar first, levels ascending, each level's name
 * first among its own), every table the CPU runs complete and found by its name, a
 * level's table its highest sub-level; collects the SIMD ones for the parity tests. */
static void test_sublevels(void) {
    const char *const *names;
    const size_t n = kz_kernels_sublevels(&names);
    CHECK(n >= 1 && n <= TEST_MAX_LEVELS && strcmp(names[0], "scalar") == 0);
    CHECK(kz_kernels_named("scalar") == &kz_kernels_scalar);
    CHECK(kz_kernels_named("avx512-foo") == NULL && kz_kernels_named("") == NULL &&
          kz_kernels_named(NULL) == NULL);
    const kz_kernels *highest[KZ_ISA_NEON + 1] = {0};
    kz_isa last = KZ_ISA_SCALAR;
    for (size_t i = 0; i < n; i++) {
        kz_isa isa = KZ_ISA_AUTO;
        for (size_t l = 0; l < N_LEVELS; l++) { // the level whose name starts the sub-level's
            const char *ln = kz_isa_name(all_levels[l]);
            if (strncmp(names[i], ln, strlen(ln)) == 0) {
                isa = all_levels[l];
            }
        }
        CHECK_MSG(isa != KZ_ISA_AUTO && isa >= last, "sub-level %s out of order", names[i]);
        CHECK_MSG(isa == last || strcmp(names[i], kz_isa_name(isa)) == 0,
                  "the first sub-level of level %s is %s", kz_isa_name(isa), names[i]);
        last = isa;
        const kz_kernels *k = kz_kernels_named(names[i]);
        if (!k) {
            printf("sub-level %-12s: SKIPPED (not supported by this CPU)\n", names[i]);
            continue;
        }
        CHECK_MSG(strcmp(k->name, names[i]) == 0 && k->isa == isa, "table %s: name or level",
                  names[i]);
        CHECK_MSG(complete(k), "table %s lacks a kernel", names[i]);
        printf("sub-level %-12s: runs here, tested (prefetch %s, bf16 gemm %s)\n", k->name,
               k->prefetch == KZ_QPF_L1   ? "L1"
               : k->prefetch == KZ_QPF_L2 ? "L2"
                                          : "L2 far",
               k->gemm_bf16_name);
        highest[isa] = k;
        if (isa != KZ_ISA_SCALAR && n_simd_levels < TEST_MAX_LEVELS) {
            simd_levels[n_simd_levels++] = k;
        }
    }
    for (size_t l = 0; l < N_LEVELS; l++) {
        CHECK_MSG(kz_kernels_for(all_levels[l]) == highest[all_levels[l]],
                  "level %s does not select its highest sub-level", kz_isa_name(all_levels[l]));
    }
}

static void test_dispatch(void) {
    const kz_isa best = kz_cpu_best_isa();
    printf("cpu: best level %s, features: %s\n", kz_isa_name(best), kz_cpu_features());
    CHECK(kz_cpu_features() != NULL);
    CHECK(kz_kernels_for(KZ_ISA_SCALAR) == &kz_kernels_scalar);
    for (size_t l = 0; l < N_LEVELS; l++) {
        const kz_kernels *k = kz_kernels_for(all_levels[l]);
        if (k) {
            CHECK(k->isa == all_levels[l]);
            CHECK_STR_CONTAINS(k->name, kz_isa_name(all_levels[l]));
            printf("level %-6s: runs here (sub-level %s)\n", kz_isa_name(all_levels[l]),
                   k->name);
        } else {
            CHECK(all_levels[l] > best || !level_built(all_levels[l]));
            printf("level %-6s: SKIPPED (not supported by this CPU or build)\n",
                   kz_isa_name(all_levels[l]));
        }
    }
    CHECK(kz_kernels_for(KZ_ISA_AUTO) == NULL);
    test_sublevels();
#ifdef KZ_HAVE_ARM
    CHECK(best == KZ_ISA_NEON); // Advanced SIMD is baseline on aarch64
#endif

    kz_isa parsed = KZ_ISA_AUTO;
    for (size_t l = 0; l < N_LEVELS; l++) {
        CHECK(kz_isa_parse(kz_isa_name(all_levels[l]), &parsed) == 0 && parsed == all_levels[l]);
    }
    CHECK(kz_isa_parse("auto", &parsed) == 0 && parsed == KZ_ISA_AUTO);
    CHECK(kz_isa_parse("AVX2", &parsed) == 0 && parsed == KZ_ISA_AVX2);
    CHECK(kz_isa_parse("sse9", &parsed) != 0);
    CHECK(kz_isa_parse("", &parsed) != 0);
    CHECK(kz_isa_parse(NULL, &parsed) != 0);
    CHECK(strcmp(kz_isa_name((kz_isa)42), "unknown") == 0);

    // The cap, with KZ_ISA unset (the caller's value is restored at the end).
    const char *saved = getenv("KZ_ISA");
    char saved_copy[64] = "";
    if (saved) {
        snprintf(saved_copy, sizeof saved_copy, "%s", saved);
    }
    unsetenv("KZ_ISA");
    CHECK(kz_kernels_select(KZ_ISA_AUTO)->isa == best);
    CHECK(kz_kernels_select(KZ_ISA_SCALAR)->isa == KZ_ISA_SCALAR);
    CHECK(kz_kernels_select(KZ_ISA_AVX2)->isa == select_expected(KZ_ISA_AVX2));
    CHECK(kz_kernels_select(KZ_ISA_AVX512)->isa == select_expected(KZ_ISA_AVX512));
    CHECK(kz_kernels_select(KZ_ISA_NEON)->isa == select_expected(KZ_ISA_NEON));
#ifdef KZ_HAVE_X86
    CHECK(kz_kernels_select(KZ_ISA_AVX2)->isa == (best < KZ_ISA_AVX2 ? best : KZ_ISA_AVX2));
    CHECK(kz_kernels_select(KZ_ISA_NEON)->isa == best); // no NEON table: best available
#endif
#ifdef KZ_HAVE_ARM
    CHECK(kz_kernels_select(KZ_ISA_AVX512)->isa == KZ_ISA_SCALAR); // ordered levels
#endif
    CHECK(kz_kernels_select(KZ_ISA_AUTO) == kz_kernels_for(best));

    // KZ_ISA only lowers the level.
    setenv("KZ_ISA", "scalar", 1);
    CHECK(kz_kernels_select(KZ_ISA_AUTO)->isa == KZ_ISA_SCALAR);
    CHECK(kz_kernels_select(KZ_ISA_AVX512)->isa == KZ_ISA_SCALAR);
    setenv("KZ_ISA", "avx2", 1);
    CHECK(kz_kernels_select(KZ_ISA_AUTO)->isa == select_expected(KZ_ISA_AVX2));
    CHECK(kz_kernels_select(KZ_ISA_SCALAR)->isa == KZ_ISA_SCALAR);
    setenv("KZ_ISA", "neon", 1);
    CHECK(kz_kernels_select(KZ_ISA_AUTO)->isa == select_expected(KZ_ISA_NEON));
    setenv("KZ_ISA", "auto", 1);
    CHECK(kz_kernels_select(KZ_ISA_AUTO)->isa == best);

    // An unknown value: one warning naming the variable, then ignored.
    kz_log_set(count_warnings, KZ_LOG_WARN, NULL);
    setenv("KZ_ISA", "pentium", 1);
    warn_count = 0;
    CHECK(kz_kernels_select(KZ_ISA_AUTO)->isa == best);
    CHECK_EQ_INT(warn_count, 1);
    const char *warned = warn_text;
    CHECK_STR_CONTAINS(warned, "KZ_ISA");
    kz_log_set(NULL, KZ_LOG_WARN, NULL);

    if (saved_copy[0]) {
        setenv("KZ_ISA", saved_copy, 1);
    } else {
        unsetenv("KZ_ISA");
    }
}

/* --- packing and gemm --------------------------------------------------- */

/* Unpacked weights W[j][i][o], as a checkpoint would hold them. */
typedef struct weights {
    size_t taps;
    size_t k_in;
    size_t n;
    float *w; // [taps, k_in, n]
} weights;

static float weights_get(const void *ctx, size_t j, size_t i, size_t o) {
    const weights *w = ctx;
    return w->w[(j * w->k_in + i) * w->n + o];
}

static weights weights_rand(size_t taps, size_t k_in, size_t n) {
    weights w = {taps, k_in, n, test_xs_array(&rng, taps * k_in * n, -1.0f, 1.0f)};
    // A few exact zeros and negative zeros: their signs must survive too.
    for (size_t i = 0; i < taps * k_in * n; i += 17) {
        w.w[i] = (i & 1) ? -0.0f : 0.0f;
    }
    return w;
}

static void test_packing(void) {
    for (int trial = 0; trial < 40; trial++) {
        const size_t taps = test_xs_size(&rng, 1, 7);
        const size_t k_in = test_xs_size(&rng, 1, 40);
        const size_t n = test_xs_size(&rng, 1, 70);
        weights w = weights_rand(taps, k_in, n);
        kz_packed p;
        CHECK(kz_packed_init(&p, taps, k_in, n, weights_get, &w) == 0);
        CHECK(((uintptr_t)p.data & 63) == 0);
        CHECK(p.taps == taps && p.k_in == k_in && p.n == n);
        CHECK_EQ_INT(p.n_panels, (n + KZ_PANEL - 1) / KZ_PANEL);
        int bad = 0;
        for (size_t pn = 0; pn < p.n_panels; pn++) {
            for (size_t r = 0; r < taps * k_in; r++) {
                for (size_t c = 0; c < KZ_PANEL; c++) {
                    const size_t o = pn * KZ_PANEL + c;
                    const float got = p.data[(pn * taps * k_in + r) * KZ_PANEL + c];
                    const float want = o < n ? w.w[r * n + o] : 0.0f;
                    bad += memcmp(&got, &want, sizeof got) != 0;
                }
            }
        }
        CHECK_EQ_INT(bad, 0);
        kz_packed_free(&p);
        CHECK(p.data == NULL && p.n_panels == 0);
        free(w.w);
    }
    kz_packed_free(NULL);
}

typedef struct gemm_case {
    size_t rows;
    size_t k_in;
    size_t taps;
    size_t tap_stride;
    size_t n;
    size_t ldx;
    size_t ldy;
    kz_gemm_mode mode;
    int has_bias;
} gemm_case;

/* Buffers of one case, sized exactly so that AddressSanitizer sees overruns. */
typedef struct gemm_data {
    gemm_case c;
    weights w;
    kz_packed packed;
    float *x;      // [x_rows, ldx], columns >= k_in hold NaN (must never be read)
    float *bias;   // [n] or NULL
    float *y_init; // [rows, ldy] random start values (accumulate reads them)
    size_t x_rows;
} gemm_data;

static gemm_data gemm_data_new(gemm_case c) {
    gemm_data d = {.c = c};
    d.w = weights_rand(c.taps, c.k_in, c.n);
    CHECK(kz_packed_init(&d.packed, c.taps, c.k_in, c.n, weights_get, &d.w) == 0);
    d.x_rows = (c.rows - 1) + (c.taps - 1) * c.tap_stride + 1;
    d.x = test_xs_array(&rng, d.x_rows * c.ldx, -1.0f, 1.0f);
    for (size_t t = 0; t < d.x_rows; t++) {
        for (size_t i = c.k_in; i < c.ldx; i++) {
            d.x[t * c.ldx + i] = NAN;
        }
    }
    d.bias = c.has_bias ? test_xs_array(&rng, c.n, -0.5f, 0.5f) : NULL;
    d.y_init = test_xs_array(&rng, c.rows * c.ldy, -2.0f, 2.0f);
    return d;
}

static void gemm_data_free(gemm_data *d) {
    kz_packed_free(&d->packed);
    free(d->w.w);
    free(d->x);
    free(d->bias);
    free(d->y_init);
}

static kz_gemm_args gemm_args(const gemm_data *d, float *y) {
    const kz_gemm_args a = {
        .y = y,
        .ldy = d->c.ldy,
        .x = d->x,
        .ldx = d->c.ldx,
        .tap_stride = d->c.tap_stride,
        .w = &d->packed,
        .bias = d->bias,
        .mode = d->c.mode,
        .n_rows = d->c.rows,
    };
    return a;
}

/* The contract of kernels.h read literally, on the unpacked weights. */
static void gemm_naive(const gemm_data *d, float *y) {
    const gemm_case *c = &d->c;
    for (size_t t = 0; t < c->rows; t++) {
        for (size_t o = 0; o < c->n; o++) {
            float acc = 0.0f;
            for (size_t j = 0; j < c->taps; j++) {
                for (size_t i = 0; i < c->k_in; i++) {
                    acc = fmaf(d->x[(t + j * c->tap_stride) * c->ldx + i],
                               d->w.w[(j * c->k_in + i) * c->n + o], acc);
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

static void print_case(const char *what, const gemm_case *c) {
    fprintf(stderr,
            "  %s: rows %zu k_in %zu taps %zu tap_stride %zu n %zu ldx %zu ldy %zu %s%s\n", what,
            c->rows, c->k_in, c->taps, c->tap_stride, c->n, c->ldx, c->ldy,
            c->mode == KZ_GEMM_ACCUMULATE ? "accumulate" : "store", c->has_bias ? " bias" : "");
}

static gemm_case gemm_case_rand(size_t max_rows, size_t max_k_in, size_t max_n) {
    static const size_t taps_choice[] = {1, 2, 7};
    static const size_t stride_choice[] = {1, 3, 9};
    gemm_case c;
    c.rows = test_xs_size(&rng, 1, max_rows);
    c.k_in = test_xs_size(&rng, 1, max_k_in) | 1; // odd
    c.taps = taps_choice[test_xs_u32(&rng) % 3];
    c.tap_stride = stride_choice[test_xs_u32(&rng) % 3];
    c.n = test_xs_size(&rng, 1, max_n);
    c.ldx = c.k_in + (test_xs_u32(&rng) % 2 ? test_xs_size(&rng, 1, 5) : 0);
    c.ldy = c.n + (test_xs_u32(&rng) % 2 ? test_xs_size(&rng, 1, 9) : 0);
    c.mode = test_xs_u32(&rng) % 2 ? KZ_GEMM_ACCUMULATE : KZ_GEMM_STORE;
    c.has_bias = (int)(test_xs_u32(&rng) % 2);
    return c;
}

/* Scalar vs naive, then every level vs scalar, all bit for bit. */
static void gemm_parity(gemm_case c) {
    gemm_data d = gemm_data_new(c);
    const size_t ny = c.rows * c.ldy;
    float *y_naive = test_copy_floats(d.y_init, ny);
    float *y_ref = test_copy_floats(d.y_init, ny);
    gemm_naive(&d, y_naive);
    kz_gemm_args a = gemm_args(&d, y_ref);
    kz_kernels_scalar.gemm(&a, 0, c.rows, 0, d.packed.n_panels);
    const int ok_ref = memcmp(y_ref, y_naive, ny * sizeof(float)) == 0;
    CHECK(ok_ref);
    if (!ok_ref) {
        print_case("scalar != naive", &c);
    }
    for (size_t l = 0; l < n_simd_levels; l++) {
        float *y = test_copy_floats(d.y_init, ny);
        a.y = y;
        simd_levels[l]->gemm(&a, 0, c.rows, 0, d.packed.n_panels);
        const int ok = memcmp(y, y_ref, ny * sizeof(float)) == 0;
        CHECK_MSG(ok, "%s gemm differs from scalar", simd_levels[l]->name);
        if (!ok) {
            print_case("case", &c);
        }
        free(y);
    }
    free(y_naive);
    free(y_ref);
    gemm_data_free(&d);
}

/* Cuts [0, n) at up to max_cuts random points: sorted bounds, returns count of parts. */
static size_t random_cuts(size_t n, size_t *bounds, size_t max_cuts) {
    size_t m = 0;
    bounds[m++] = 0;
    const size_t cuts = n > 1 ? test_xs_size(&rng, 0, max_cuts) : 0;
    for (size_t k = 0; k < cuts; k++) {
        bounds[m++] = test_xs_size(&rng, 1, n - 1);
    }
    bounds[m++] = n;
    for (size_t i = 1; i < m; i++) { // insertion sort, duplicates allowed (empty parts)
        for (size_t k = i; k > 0 && bounds[k - 1] > bounds[k]; k--) {
            const size_t tmp = bounds[k];
            bounds[k] = bounds[k - 1];
            bounds[k - 1] = tmp;
        }
    }
    return m - 1;
}

/* One call over everything vs many calls over random rows x panels pieces. */
static void gemm_split(const kz_kernels *k, gemm_case c) {
    gemm_data d = gemm_data_new(c);
    const size_t ny = c.rows * c.ldy;
    float *y_one = test_copy_floats(d.y_init, ny);
    float *y_split = test_copy_floats(d.y_init, ny);
    kz_gemm_args a = gemm_args(&d, y_one);
    k->gemm(&a, 0, c.rows, 0, d.packed.n_panels);
    size_t rb[16];
    size_t pb[16];
    const size_t nr = random_cuts(c.rows, rb, 6);
    const size_t np = random_cuts(d.packed.n_panels, pb, 4);
    a.y = y_split;
    for (size_t pi = np; pi-- > 0;) { // panels backwards, rows forwards: order must not matter
        for (size_t ri = 0; ri < nr; ri++) {
            k->gemm(&a, rb[ri], rb[ri + 1], pb[pi], pb[pi + 1]);
        }
    }
    const int ok = memcmp(y_one, y_split, ny * sizeof(float)) == 0;
    CHECK_MSG(ok, "%s gemm: split calls differ from one call", k->name);
    if (!ok) {
        print_case("case", &c);
    }
    free(y_one);
    free(y_split);
    gemm_data_free(&d);
}

static void test_gemm(void) {
    // Small ragged shapes: rows 1..13, odd k_in, n 1..70.
    for (int trial = 0; trial < 600; trial++) {
        gemm_parity(gemm_case_rand(13, 41, 70));
    }
    // Beyond one k block (256 panel rows for AVX-512 and NEON, 512 for AVX2)
    // and one row block (at most 192 rows).
    const gemm_case big[] = {
        {200, 301, 1, 1, 40, 301, 40, KZ_GEMM_STORE, 1},
        {50, 97, 7, 9, 33, 97, 33, KZ_GEMM_ACCUMULATE, 0},
        {27, 1025, 1, 1, 17, 1025, 20, KZ_GEMM_STORE, 0},
        {61, 129, 2, 1, 35, 130, 37, KZ_GEMM_ACCUMULATE, 1},
        {13, 0, 1, 1, 5, 0, 5, KZ_GEMM_ACCUMULATE, 1}, // k_in 0: y = (y +) bias
    };
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        gemm_parity(big[i]);
    }
    // Split invariance at every level, scalar included.
    const kz_kernels *all[TEST_MAX_LEVELS + 1] = {&kz_kernels_scalar};
    size_t n_all = 1;
    for (size_t l = 0; l < n_simd_levels; l++) {
        all[n_all++] = simd_levels[l];
    }
    for (int trial = 0; trial < 60; trial++) {
        const gemm_case c = trial < 3 ? big[trial] : gemm_case_rand(40, 67, 110);
        for (size_t l = 0; l < n_all; l++) {
            gemm_split(all[l], c);
        }
    }
}

/* --- row kernels -------------------------------------------------------- */

/* Runs a level's snake on inputs at float offset `off` from 64-byte alignment. */
static void snake_at(const kz_kernels *k, float *y, const float *x, size_t rows, size_t ch,
                     const float *alpha, const float *ib, size_t off) {
    const size_t n = rows * ch;
    float *buf = aligned_alloc(64, ((4 * (n + ch) + off * 4) * sizeof(float) + 63) / 64 * 64);
    float *xs = buf + off;
    float *as = xs + n;
    float *bs = as + ch;
    float *ys = bs + ch + off;
    memcpy(xs, x, n * sizeof(float));
    memcpy(as, alpha, ch * sizeof(float));
    memcpy(bs, ib, ch * sizeof(float));
    k->snake_beta(ys, xs, rows, ch, as, bs);
    memcpy(y, ys, n * sizeof(float));
    free(buf);
}

static void test_snake(void) {
    for (int trial = 0; trial < 60; trial++) {
        const size_t rows = test_xs_size(&rng, 1, 5);
        const size_t ch = test_xs_size(&rng, 1, 70);
        const size_t n = rows * ch;
        // Realistic activations; every 7th trial adds huge arguments (libm fallback lanes).
        const float span = trial % 7 == 6 ? 1e6f : 10.0f;
        float *x = test_xs_array(&rng, n, -span, span);
        float *alpha = test_xs_array(&rng, ch, -2.0f, 2.0f);
        float *ib = test_xs_array(&rng, ch, -2.0f, 2.0f);
        for (size_t c = 0; c < ch; c++) {
            alpha[c] = expf(alpha[c]);
            ib[c] = 1.0f / (expf(ib[c]) + 1e-9f);
        }
        if (trial % 7 == 6) {
            x[0] = INFINITY;
            x[n - 1] = NAN;
        }
        float *y_ref = malloc(n * sizeof(float));
        kz_kernels_scalar.snake_beta(y_ref, x, rows, ch, alpha, ib);
        for (size_t l = 0; l < n_simd_levels; l++) {
            const kz_kernels *k = simd_levels[l];
            float *y = malloc(n * sizeof(float));
            float *y1 = malloc(n * sizeof(float));
            snake_at(k, y, x, rows, ch, alpha, ib, 0);
            snake_at(k, y1, x, rows, ch, alpha, ib, 1);
            CHECK_MSG(memcmp(y, y1, n * sizeof(float)) == 0, "%s snake depends on alignment",
                      k->name);
            // In place.
            float *yi = test_copy_floats(x, n);
            k->snake_beta(yi, yi, rows, ch, alpha, ib);
            CHECK_MSG(memcmp(y, yi, n * sizeof(float)) == 0, "%s snake in place differs",
                      k->name);
            // Tolerance: the vector sin^2 is within a few ulps of sinf^2, so
            // |y - y_ref| <= 2^-20 (|x| + |inv_beta|), i.e. 8 ulps of the larger term.
            // Non-finite results must agree in kind.
            int bad = 0;
            for (size_t i = 0; i < n; i++) {
                const float xv = x[i];
                const size_t c = i % ch;
                if (!isfinite(y_ref[i]) || !isfinite(y[i])) {
                    bad += isnan(y_ref[i]) != isnan(y[i]) || isinf(y_ref[i]) != isinf(y[i]);
                    continue;
                }
                const double tol = ldexp(1.0, -20) * (fabs(xv) + fabs(ib[c]));
                if (fabs((double)y[i] - y_ref[i]) > tol) {
                    if (bad++ < 3) {
                        fprintf(stderr, "  %s snake x %.9g alpha %.9g: %.9g vs %.9g\n", k->name,
                                xv, alpha[c], y[i], y_ref[i]);
                    }
                }
            }
            CHECK_MSG(bad == 0, "%s snake: %d elements out of tolerance", k->name, bad);
            free(y);
            free(y1);
            free(yi);
        }
        free(x);
        free(alpha);
        free(ib);
        free(y_ref);
    }
}

/* Accuracy of sin^2 itself: x = 2^-100 and alpha = a * 2^100 make alpha * x == a
 * exactly and y == sin(a)^2 (the 2^-100 vanishes below half an ulp while
 * sin^2 > 2^-70). Measured against double sin, in ulps of sin^2, |a| <= 1e4. */
static void test_sin_accuracy(void) {
    enum { N = 40000 };
    float *x = malloc(N * sizeof(float));
    float *alpha = malloc(N * sizeof(float));
    float *ib = malloc(N * sizeof(float));
    float *y = malloc(N * sizeof(float));
    for (size_t i = 0; i < N; i++) {
        float a = i < N / 2 ? test_xs_float(&rng, -1e4f, 1e4f) : test_xs_float(&rng, -4.0f, 4.0f);
        if (i % 5 == 0) { // near multiples of pi / 2, where the reduction works hardest
            a = (float)(test_xs_size(&rng, 0, 6000) * 1.5707963267948966) +
                test_xs_float(&rng, -1e-3f, 1e-3f);
        }
        x[i] = ldexpf(1.0f, -100);
        alpha[i] = ldexpf(a, 100);
        ib[i] = 1.0f;
    }
    const kz_kernels *levels[TEST_MAX_LEVELS + 1] = {&kz_kernels_scalar};
    size_t n_levels = 1;
    for (size_t l = 0; l < n_simd_levels; l++) {
        levels[n_levels++] = simd_levels[l];
    }
    for (size_t l = 0; l < n_levels; l++) {
        levels[l]->snake_beta(y, x, 1, N, alpha, ib);
        double worst = 0.0;
        for (size_t i = 0; i < N; i++) {
            const double a = ldexp((double)alpha[i], -100);
            const double s = sin(a);
            if (s * s < 0x1p-60) {
                continue;
            }
            const double e = ulps(y[i], s * s);
            worst = e > worst ? e : worst;
        }
        printf("snake_beta %-6s: max error of sin^2 %.2f ulp (|arg| <= 1e4)\n", levels[l]->name,
               worst);
        // Tolerance: 8 ulps of sin^2 (about 4 ulps of sin).
        CHECK_MSG(worst <= 8.0, "%s sin^2 error %.2f ulp", levels[l]->name, worst);
    }
    free(x);
    free(alpha);
    free(ib);
    free(y);
}

static void test_norms(void) {
    for (int trial = 0; trial < 60; trial++) {
        const size_t rows = test_xs_size(&rng, 1, 4);
        const size_t ch = trial < 50 ? test_xs_size(&rng, 1, 140) : test_xs_size(&rng, 1000, 3000);
        const size_t n = rows * ch;
        float *x = test_xs_array(&rng, n, -3.0f, 3.0f);
        for (size_t i = 0; i < n; i++) {
            x[i] += 0.5f; // a non-zero mean for layer_norm
        }
        float *w = test_xs_array(&rng, ch, 0.5f, 1.5f);
        float *b = test_xs_array(&rng, ch, -0.5f, 0.5f);
        const float eps = 1e-5f;
        float *rms_ref = malloc(n * sizeof(float));
        float *ln_ref = malloc(n * sizeof(float));
        kz_kernels_scalar.rms_norm(rms_ref, x, w, rows, ch, eps);
        kz_kernels_scalar.layer_norm(ln_ref, x, w, b, rows, ch, eps);
        for (size_t l = 0; l < n_simd_levels; l++) {
            const kz_kernels *k = simd_levels[l];
            float *y = malloc(n * sizeof(float));
            float *yi = test_copy_floats(x, n);
            // Tolerance: a sum of squares in another order scales a whole row by
            // 1 + d with |d| a few ulps times sqrt(n): 4e-6 relative per element.
            k->rms_norm(y, x, w, rows, ch, eps);
            k->rms_norm(yi, yi, w, rows, ch, eps);
            CHECK_MSG(memcmp(y, yi, n * sizeof(float)) == 0, "%s rms_norm in place differs",
                      k->name);
            int bad = 0;
            for (size_t i = 0; i < n; i++) {
                bad += fabs((double)y[i] - rms_ref[i]) > 4e-6 * fabs(rms_ref[i]);
            }
            CHECK_MSG(bad == 0, "%s rms_norm: %d elements out of tolerance", k->name, bad);
            // Tolerance: as above plus the mean's rounding; 1e-5 absolute on
            // outputs of magnitude <= ~3.
            memcpy(yi, x, n * sizeof(float));
            k->layer_norm(y, x, w, b, rows, ch, eps);
            k->layer_norm(yi, yi, w, b, rows, ch, eps);
            CHECK_MSG(memcmp(y, yi, n * sizeof(float)) == 0, "%s layer_norm in place differs",
                      k->name);
            bad = 0;
            for (size_t i = 0; i < n; i++) {
                bad += fabs((double)y[i] - ln_ref[i]) > 1e-5;
            }
            CHECK_MSG(bad == 0, "%s layer_norm: %d elements out of tolerance", k->name, bad);
            free(y);
            free(yi);
        }
        free(x);
        free(w);
        free(b);
        free(rms_ref);
        free(ln_ref);
    }
}

static const float specials[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e30f, -1e30f, 88.0f, -88.0f,
                                 100.0f, -100.0f, INFINITY, -INFINITY, NAN, 3.92f, -0.9f};
#define N_SPECIALS (sizeof specials / sizeof specials[0])

/* Same NaN-ness and, when both are infinite, the same infinity. */
static int same_kind(float a, float b) {
    if (isnan(a) || isnan(b)) {
        return isnan(a) && isnan(b);
    }
    if (isinf(a) || isinf(b)) {
        return a == b;
    }
    return 1;
}

static void test_gelu_swiglu(void) {
    for (int trial = 0; trial < 40; trial++) {
        const size_t n = trial == 0 ? N_SPECIALS : test_xs_size(&rng, 1, 300);
        float *x = test_xs_array(&rng, n, -8.0f, 8.0f);
        float *up = test_xs_array(&rng, n, -2.0f, 2.0f);
        if (trial == 0) {
            memcpy(x, specials, sizeof specials);
        } else {
            for (size_t i = 0; i < n; i += 11) {
                x[i] *= 5.0f; // some gates out to +-40
            }
        }
        float *g_ref = malloc(n * sizeof(float));
        float *s_ref = malloc(n * sizeof(float));
        kz_kernels_scalar.gelu(g_ref, x, n);
        kz_kernels_scalar.swiglu(s_ref, x, up, n);
        for (size_t l = 0; l < n_simd_levels; l++) {
            const kz_kernels *k = simd_levels[l];
            float *y = malloc(n * sizeof(float));
            float *yi = test_copy_floats(x, n);
            // GELU tolerance: the vector erf is within 1.5e-7 absolute of erf, so
            // |y - y_ref| <= 2.5e-7 |x| + 1 ulp of y_ref.
            k->gelu(y, x, n);
            k->gelu(yi, yi, n);
            CHECK_MSG(memcmp(y, yi, n * sizeof(float)) == 0, "%s gelu in place differs", k->name);
            int bad = 0;
            for (size_t i = 0; i < n; i++) {
                if (!same_kind(y[i], g_ref[i])) {
                    bad++;
                } else if (isfinite(g_ref[i])) {
                    const double tol = 2.5e-7 * fabs(x[i]) + ldexp(fabs(g_ref[i]), -23);
                    bad += fabs((double)y[i] - g_ref[i]) > tol;
                }
            }
            CHECK_MSG(bad == 0, "%s gelu: %d elements out of tolerance", k->name, bad);
            // ELU: x itself above 0; below, the vector exp (~1 ulp) minus 1: within 2 ulps
            // of 1 absolute.
            float *e_ref = malloc(n * sizeof(float));
            kz_kernels_scalar.elu(e_ref, x, n);
            memcpy(yi, x, n * sizeof(float));
            k->elu(y, x, n);
            k->elu(yi, yi, n);
            CHECK_MSG(memcmp(y, yi, n * sizeof(float)) == 0, "%s elu in place differs", k->name);
            bad = 0;
            for (size_t i = 0; i < n; i++) {
                if (!same_kind(y[i], e_ref[i])) {
                    bad++;
                } else if (isfinite(e_ref[i])) {
                    const double tol = x[i] > 0.0f ? 0.0 : ldexp(1.0, -22);
                    bad += fabs((double)y[i] - e_ref[i]) > tol;
                }
            }
            CHECK_MSG(bad == 0, "%s elu: %d elements out of tolerance", k->name, bad);
            free(e_ref);
            // SwiGLU tolerance: vector exp ~1 ulp, then divide and multiply:
            // 4 ulps of y_ref.
            memcpy(yi, x, n * sizeof(float));
            k->swiglu(y, x, up, n);
            k->swiglu(yi, yi, up, n);
            CHECK_MSG(memcmp(y, yi, n * sizeof(float)) == 0, "%s swiglu in place differs",
                      k->name);
            bad = 0;
            for (size_t i = 0; i < n; i++) {
                if (!same_kind(y[i], s_ref[i])) {
                    bad++;
                } else if (isfinite(s_ref[i])) {
                    bad += ulps(y[i], s_ref[i]) > 4.0;
                }
            }
            CHECK_MSG(bad == 0, "%s swiglu: %d elements out of tolerance", k->name, bad);
            free(y);
            free(yi);
        }
        free(x);
        free(up);
        free(g_ref);
        free(s_ref);
    }
}

/* Accuracy of GELU against double precision on a fine grid of [-10, 10]. */
static void test_gelu_accuracy(void) {
    enum { N = 40001 };
    float *x = malloc(N * sizeof(float));
    float *y = malloc(N * sizeof(float));
    for (size_t i = 0; i < N; i++) {
        x[i] = -10.0f + 20.0f * (float)i / (float)(N - 1);
    }
    const kz_kernels *levels[TEST_MAX_LEVELS + 1] = {&kz_kernels_scalar};
    size_t n_levels = 1;
    for (size_t l = 0; l < n_simd_levels; l++) {
        levels[n_levels++] = simd_levels[l];
    }
    for (size_t l = 0; l < n_levels; l++) {
        levels[l]->gelu(y, x, N);
        double worst = 0.0;
        for (size_t i = 0; i < N; i++) {
            const double v = x[i];
            const double exact = 0.5 * v * (1.0 + erf(v * 0.70710678118654752));
            const double e = fabs(y[i] - exact) / (fabs(v) > 1.0 ? fabs(v) : 1.0);
            worst = e > worst ? e : worst;
        }
        printf("gelu       %-6s: max |y - exact| / max(1, |x|) = %.3g\n", levels[l]->name, worst);
        // Tolerance: erf within 1.5e-7 gives 0.75e-7 |x|, plus rounding of y.
        CHECK_MSG(worst <= 2.5e-7, "%s gelu error %.3g", levels[l]->name, worst);
    }
    free(x);
    free(y);
}

/* dot_rows: every row of a set against the scalar sum (within rounding) and bit for bit
 * against the same row alone and at another alignment (the order depends on n only);
 * axpy_rows: bit for bit against the scalar definition, rows at odd strides and offsets. */
static void test_dot_axpy_rows(void) {
    for (int trial = 0; trial < 80; trial++) {
        const size_t n = trial < 70 ? test_xs_size(&rng, 0, 300) : test_xs_size(&rng, 1000, 5000);
        const size_t n_rows = test_xs_size(&rng, 1, 11);
        const size_t stride = n + test_xs_size(&rng, 0, 5);
        // One extra element so the same data can be used at offset 1.
        float *q = test_xs_array(&rng, n + 1, -1.0f, 1.0f);
        float *rows = test_xs_array(&rng, n_rows * stride + 1, -1.0f, 1.0f);
        float *w = test_xs_array(&rng, n_rows, -2.0f, 2.0f);
        const float scale = test_xs_float(&rng, 0.01f, 2.0f);
        float ref[11], got[11], one, shifted;
        kz_kernels_scalar.dot_rows(ref, q, rows, stride, n_rows, n, scale);
        float *y_ref = test_xs_array(&rng, n + 1, -1.0f, 1.0f);
        float *y0 = test_copy_floats(y_ref, n + 1);
        kz_kernels_scalar.axpy_rows(y_ref, w, rows, stride, n_rows, n);
        float *q1 = malloc((n + 1) * sizeof(float));
        float *rows1 = malloc((n_rows * stride + 1) * sizeof(float));
        memcpy(q1 + 1, q, n * sizeof(float));
        memcpy(rows1 + 1, rows, n_rows * stride * sizeof(float));
        for (size_t l = 0; l < n_simd_levels; l++) {
            const kz_kernels *k = simd_levels[l];
            k->dot_rows(got, q, rows, stride, n_rows, n, scale);
            for (size_t r = 0; r < n_rows; r++) {
                double abs_sum = 0.0;
                for (size_t i = 0; i < n; i++) {
                    abs_sum += fabs((double)q[i] * rows[r * stride + i]);
                }
                // Tolerance: both sums are within n * 2^-24 * sum|q_i k_i| of the exact dot,
                // then scaled (one more rounding each).
                CHECK_NEAR(got[r], ref[r],
                           (2.0 * (double)n * ldexp(abs_sum, -24)) * scale +
                               ldexp(fabs(ref[r]), -22) + 1e-30);
                k->dot_rows(&one, q, rows + r * stride, stride, 1, n, scale);
                k->dot_rows(&shifted, q1 + 1, rows1 + 1 + r * stride, stride, 1, n, scale);
                CHECK_MSG(memcmp(&one, &got[r], sizeof one) == 0 &&
                              memcmp(&shifted, &got[r], sizeof one) == 0,
                          "%s dot_rows row %zu of %zu depends on its set or alignment (n %zu)",
                          k->name, r, n_rows, n);
            }
            float *y = test_copy_floats(y0, n + 1);
            k->axpy_rows(y, w, rows, stride, n_rows, n);
            CHECK_MSG(memcmp(y, y_ref, (n + 1) * sizeof(float)) == 0,
                      "%s axpy_rows differs (n %zu, %zu rows)", k->name, n, n_rows);
            float *y1 = malloc((n + 1) * sizeof(float));
            memcpy(y1 + 1, y0, n * sizeof(float));
            k->axpy_rows(y1 + 1, w, rows1 + 1, stride, n_rows, n);
            CHECK_MSG(memcmp(y1 + 1, y_ref, n * sizeof(float)) == 0,
                      "%s axpy_rows offset differs", k->name);
            free(y1);
            free(y);
        }
        free(q1);
        free(rows1);
        free(q);
        free(rows);
        free(w);
        free(y_ref);
        free(y0);
    }
}

/* dot_rows_f16 and axpy_rows_f16: on every level, scalar included, bit for bit what the
 * level's dot_rows and axpy_rows give on the rows widened to float, rows at odd strides and
 * offsets; the halves cover subnormals, large values and both signs. */
static void test_dot_axpy_rows_f16(void) {
    const kz_kernels *levels[TEST_MAX_LEVELS + 1] = {&kz_kernels_scalar};
    size_t n_levels = 1;
    for (size_t l = 0; l < n_simd_levels; l++) {
        levels[n_levels++] = simd_levels[l];
    }
    for (int trial = 0; trial < 60; trial++) {
        const size_t n = trial < 50 ? test_xs_size(&rng, 1, 300) : test_xs_size(&rng, 1000, 3000);
        const size_t n_rows = test_xs_size(&rng, 1, 11);
        const size_t stride = n + test_xs_size(&rng, 0, 5);
        const size_t off = (size_t)trial % 2; // odd addresses for the half rows
        const size_t n_el = n_rows * stride + 1;
        uint16_t *h = malloc(n_el * sizeof *h);
        float *wide = malloc(n_el * sizeof *wide);
        for (size_t i = 0; i < n_el; i++) {
            const float v = test_xs_float(&rng, -1.0f, 1.0f);
            const float mag = i % 7 == 0 ? 0x1p-20f : (i % 11 == 0 ? 3000.0f : 1.0f);
            h[i] = kz_f32_to_fp16(v * mag);
            wide[i] = kz_fp16_to_f32(h[i]);
        }
        float *q = test_xs_array(&rng, n, -1.0f, 1.0f);
        float *w = test_xs_array(&rng, n_rows, -2.0f, 2.0f);
        float *y0 = test_xs_array(&rng, n, -1.0f, 1.0f);
        const float scale = test_xs_float(&rng, 0.01f, 2.0f);
        for (size_t l = 0; l < n_levels; l++) {
            const kz_kernels *k = levels[l];
            float want[11], got[11];
            k->dot_rows(want, q, wide + off, stride, n_rows, n, scale);
            k->dot_rows_f16(got, q, h + off, stride, n_rows, n, scale);
            CHECK_MSG(memcmp(want, got, n_rows * sizeof(float)) == 0,
                      "%s dot_rows_f16 differs from dot_rows on widened rows (n %zu)", k->name,
                      n);
            float *y_want = test_copy_floats(y0, n), *y_got = test_copy_floats(y0, n);
            k->axpy_rows(y_want, w, wide + off, stride, n_rows, n);
            k->axpy_rows_f16(y_got, w, h + off, stride, n_rows, n);
            CHECK_MSG(memcmp(y_want, y_got, n * sizeof(float)) == 0,
                      "%s axpy_rows_f16 differs from axpy_rows on widened rows (n %zu)",
                      k->name, n);
            free(y_want);
            free(y_got);
        }
        free(h);
        free(wide);
        free(q);
        free(w);
        free(y0);
    }
}

/* mix_rows: the scalar definition against a loop written here from kernels.h, and every
 * level bit for bit against it (ragged widths, 1..KZ_MIX_MAX_SRC sources, rows at odd
 * offsets); columns beyond n are left untouched. */
static void test_mix_rows(void) {
    // The Winograd transforms' shapes first (input, output with and without the bias
    // row, partial tiles; F(4, 7), F(6, 7), F(10, 7) and F(m, 2)), then random ones.
    static const size_t fixed[][2] = {{10, 10}, {4, 11}, {4, 10}, {3, 11}, {2, 11}, {1, 11},
                                      {3, 10}, {2, 10}, {1, 10}, {12, 12}, {6, 13}, {6, 12},
                                      {5, 13}, {4, 13}, {1, 13}, {5, 12}, {2, 12}, {7, 7},
                                      {6, 8},   {6, 7},  {5, 8},  {1, 8},  {5, 5},  {4, 6},
                                      {16, 16}, {10, 17}, {10, 16}, {9, 17}, {5, 17}, {1, 16},
                                      {4, 5}};
    const int n_fixed = (int)(sizeof fixed / sizeof fixed[0]);
    for (int trial = 0; trial < 120 + 2 * n_fixed; trial++) {
        const int f = trial < 2 * n_fixed ? trial % n_fixed : -1;
        const size_t n = trial < 100 ? test_xs_size(&rng, 0, 70) : test_xs_size(&rng, 200, 1100);
        const size_t n_src = f >= 0 ? fixed[f][1] : test_xs_size(&rng, 1, KZ_MIX_MAX_SRC);
        const size_t n_dst = f >= 0 ? fixed[f][0] : test_xs_size(&rng, 1, 16);
        float *in = test_xs_array(&rng, n_src * (n + 3) + 1, -2.0f, 2.0f);
        float *mat = test_xs_array(&rng, n_dst * n_src, -3.0f, 3.0f);
        const float *src[KZ_MIX_MAX_SRC];
        for (size_t s = 0; s < n_src; s++) {
            src[s] = in + 1 + s * (n + 3);
        }
        const size_t stride = n + 2, ny = n_dst * stride;
        float *y_naive = test_xs_array(&rng, ny, -1.0f, 1.0f);
        float *y_ref = test_copy_floats(y_naive, ny);
        float *y = test_copy_floats(y_naive, ny);
        float *d_ref[16];
        float *d[16];
        for (size_t r = 0; r < n_dst; r++) {
            for (size_t c = 0; c < n; c++) {
                float acc = 0.0f;
                for (size_t s = 0; s < n_src; s++) {
                    acc = fmaf(mat[r * n_src + s], src[s][c], acc);
                }
                y_naive[r * stride + 1 + c] = acc;
            }
            d_ref[r] = y_ref + r * stride + 1;
            d[r] = y + r * stride + 1;
        }
        kz_kernels_scalar.mix_rows(d_ref, src, mat, n_dst, n_src, n);
        CHECK_MSG(memcmp(y_ref, y_naive, ny * sizeof(float)) == 0,
                  "scalar mix_rows differs from the contract (n %zu)", n);
        for (size_t l = 0; l < n_simd_levels; l++) {
            const kz_kernels *k = simd_levels[l];
            memcpy(y, y_naive, ny * sizeof(float));
            for (size_t r = 0; r < n_dst; r++) { // fresh padding: must survive untouched
                y[r * stride] = -9.0f;
                y[r * stride + 1 + n] = -9.0f;
            }
            k->mix_rows(d, src, mat, n_dst, n_src, n);
            int ok = 1;
            for (size_t r = 0; r < n_dst; r++) {
                ok &= memcmp(d[r], d_ref[r], n * sizeof(float)) == 0;
                ok &= y[r * stride] == -9.0f && y[r * stride + 1 + n] == -9.0f;
            }
            CHECK_MSG(ok, "%s mix_rows differs (n %zu, %zu x %zu)", k->name, n, n_dst, n_src);
        }
        free(in);
        free(mat);
        free(y_naive);
        free(y_ref);
        free(y);
    }
}

int main(void) {
    test_dispatch();
    test_packing();
    test_gemm();
    test_snake();
    test_sin_accuracy();
    test_norms();
    test_gelu_swiglu();
    test_gelu_accuracy();
    test_dot_axpy_rows();
    test_dot_axpy_rows_f16();
    test_mix_rows();
    return test_main_result("test_kernels");
}
