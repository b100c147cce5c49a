/*
 * bench_kernels.c - speed of each kernel per ISA level at the model's shapes,
 * single thread.
 *
 * Data flow: probe levels (kz_kernels_for) -> measure this core's FMA peak
 * per vector width with a loop of independent FMA chains, and the bf16 peak of
 * each bf16 GEMM the CPU runs (tdpbf16ps tiles, vdpbf16ps chains) -> for every
 * level the CPU runs (its highest sub-level): conv-GEMM GFLOP/s at the codec's real
 * shapes (and % of the peak of that level's vector width), the bf16 GEMM of each of
 * the level's sub-levels the CPU runs (kz_kernels_named; against its own bf16 peak),
 * dot / axpy GB/s at L1, L2 and DRAM sizes, ns per element of snake_beta, gelu,
 * swiglu and rms_norm, GFLOP/s (and % of the peak) and GB/s of the Winograd
 * transforms (mix_rows). Each number is the best of several timed repetitions.
 * Time is this thread's CPU time, so other processes on a busy machine do not
 * inflate the numbers
 * (cache and memory contention still can).
 *
 * Usage: bench_kernels [scalar|avx2|avx512|neon ...] [--quick]
 *   levels to run (default: all the CPU supports); --quick shortens timing.
 */
#include "kernels/kernels.h"
#include "kernels/machine_peak.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double min_seconds = 0.4;
static volatile float sink;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 88172645463325252ull;

static float rng_float(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)(rng >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

static float *rand_buf(size_t n) {
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        p[i] = rng_float();
    }
    return p;
}

/* --- FMA peak --------------------------------------------------------------
 * Twelve independent multiply-add chains of one vector width (GCC vector
 * extensions; the fp-contract attribute, and on x86 the target attribute, turn
 * a + a * m into one FMA instruction; with the chain as both addend and factor it
 * is one instruction on ISAs whose FMA overwrites its addend, NEON's fmla). The
 * chains shrink by 1e-7 a step and stay normal. Returns GFLOP/s. Built per ISA:
 * the x86 widths only on x86-64, NEON only on aarch64, so every target builds on
 * both. */
#define PEAK_CHAINS 12
#define PEAK_BODY(vec, lanes)                                                                  \
    vec acc[PEAK_CHAINS];                                                                      \
    for (int c = 0; c < PEAK_CHAINS; c++) {                                                    \
        for (int l = 0; l < lanes; l++) {                                                      \
            acc[c][l] = (float)c * 1e-3f;                                                      \
        }                                                                                      \
    }                                                                                          \
    vec m;                                                                                     \
    for (int l = 0; l < lanes; l++) {                                                          \
        m[l] = -1e-7f;                                                                         \
    }                                                                                          \
    const double t0 = now();                                                                   \
    for (long it = 0; it < iters; it++) {                                                      \
        for (int c = 0; c < PEAK_CHAINS; c++) {                                                \
            acc[c] = acc[c] + acc[c] * m;                                                      \
        }                                                                                      \
        PEAK_OPAQUE(m);                                                                        \
    }                                                                                          \
    const double t = now() - t0;                                                               \
    float s = 0.0f;                                                                            \
    for (int c = 0; c < PEAK_CHAINS; c++) {                                                    \
        s += acc[c][0];                                                                        \
    }                                                                                          \
    sink = s;                                                                                  \
    return 2.0 * lanes * PEAK_CHAINS * (double)iters / t * 1e-9;

#if defined(__clang__)
#define PEAK_CONTRACT_ATTR
#define PEAK_CONTRACT _Pragma("clang fp contract(fast)")
#else
#define PEAK_CONTRACT_ATTR optimize("fp-contract=fast"),
#define PEAK_CONTRACT
#endif

#if defined(__x86_64__)
/* Keeps m in a vector register the compiler cannot see through. */
#define PEAK_OPAQUE(v) __asm__ volatile("" : "+x"(v))
#define PEAK_FN(isa) __attribute__((PEAK_CONTRACT_ATTR target(isa))) static double

typedef float v8sf __attribute__((vector_size(32)));
typedef float v16sf __attribute__((vector_size(64)));

PEAK_FN("avx2,fma") peak_avx2(long iters) {
    PEAK_CONTRACT
    PEAK_BODY(v8sf, 8)
}

PEAK_FN("avx512f,fma") peak_avx512(long iters) {
    PEAK_CONTRACT
    PEAK_BODY(v16sf, 16)
}
#elif defined(__aarch64__)
#define PEAK_OPAQUE(v) __asm__ volatile("" : "+w"(v))

typedef float v4sf __attribute__((vector_size(16)));

/* Advanced SIMD is baseline on aarch64: no target attribute. */
__attribute__((PEAK_CONTRACT_ATTR noinline)) static double peak_neon(long iters) {
    PEAK_CONTRACT
    PEAK_BODY(v4sf, 4)
}
#endif

/* One timed run at a SIMD level; 0 for levels this build has no loop for. */
static double peak_once(kz_isa isa, long iters) {
    switch (isa) {
#if defined(__x86_64__)
    case KZ_ISA_AVX2: return peak_avx2(iters);
    case KZ_ISA_AVX512: return peak_avx512(iters);
#elif defined(__aarch64__)
    case KZ_ISA_NEON: return peak_neon(iters);
#endif
    default: return 0.0;
    }
}

static double peak_for(kz_isa isa) {
    double best = 0.0;
    for (int rep = 0; rep < 5; rep++) {
        const double g = peak_once(isa, 20000000);
        best = g > best ? g : best;
    }
    return best;
}

/* One thread's bf16 peak for the bf16 GEMM called name (kz_kernels.gemm_bf16_name;
 * src/kernels/machine_peak.c: tdpbf16ps on fixed tiles for "amx", vdpbf16ps chains for
 * "avx512bf16", the FMA loop of the vector width for "avx2" and "neon"), measured once
 * per name and printed; 0 for the scalar definition. */
static double bf16_peak(const char *name) {
    static const char *seen[8];
    static double peak[8];
    if (strcmp(name, "ref") == 0) {
        return 0.0;
    }
    for (int i = 0; i < 8; i++) {
        if (seen[i] && strcmp(seen[i], name) == 0) {
            return peak[i];
        }
        if (!seen[i]) {
            const char *loop;
            seen[i] = name;
            peak[i] = kz_machine_fma_gflops(name, 1, &loop);
            printf("measured bf16 peak, %s: %.2f GFLOP/s\n", loop, peak[i]);
            return peak[i];
        }
    }
    return 0.0;
}

/* The tables of level isa's sub-levels the CPU runs whose bf16 GEMMs differ, in order;
 * returns how many (at most 8). */
static size_t bf16_tables(kz_isa isa, const kz_kernels *out[8]) {
    const char *const *names;
    const size_t n_names = kz_kernels_sublevels(&names);
    size_t n = 0;
    for (size_t i = 0; i < n_names && n < 8; i++) {
        const kz_kernels *k = kz_kernels_named(names[i]);
        if (!k || k->isa != isa || (n > 0 && out[n - 1]->gemm_bf16 == k->gemm_bf16)) {
            continue;
        }
        out[n++] = k;
    }
    return n;
}

/* --- GEMM ----------------------------------------------------------------- */

typedef struct gemm_shape {
    const char *what;
    size_t rows;
    size_t k_in;
    size_t taps;
    size_t tap_stride;
    size_t n;
} gemm_shape;

/* The codec decoder's convolutions at 12.5 Hz frames (chunk rows as used per call). */
static const gemm_shape shapes[] = {
    {"dilated conv k7 d3, 384 ch", 640, 384, 7, 3, 384},
    {"dilated conv k7 d1, 768 ch", 160, 768, 7, 1, 768},
    {"dilated conv k7 d9, 192 ch", 1920, 192, 7, 9, 192},
    {"dilated conv k7 d1, 96 ch", 3840, 96, 7, 1, 96},
    {"1x1 conv, 384 ch", 640, 384, 1, 1, 384},
    {"transposed conv s8, 1536->768", 32, 1536, 2, 1, 8 * 768},
    {"linear 1024->4096, 4 rows", 4, 1024, 1, 1, 4096},
};

static float pack_get(const void *ctx, size_t j, size_t i, size_t o) {
    (void)ctx;
    return sinf((float)(j * 131 + i * 7 + o * 3)) * 0.05f;
}

/* The bf16 GEMM of the same shape of table k (AMX tiles, vdpbf16ps, AVX2 / NEON FMAs,
 * the definition): the GEMM alone, then the rounding of its input rows to bf16 that
 * kz_conv_run adds per call. */
static void bench_gemm_bf16(const kz_kernels *k, const gemm_shape *g, const kz_packed *w,
                            const float *x, float *y, const float *bias) {
    kz_packed_bf16 wb;
    const size_t x_rows = g->rows + (g->taps - 1) * g->tap_stride;
    const size_t ldb = g->k_in + g->k_in % 2;
    uint16_t *xb = malloc(x_rows * ldb * sizeof *xb);
    if (!xb || kz_packed_bf16_init(&wb, w) != 0) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    // The FMA GEMMs (avx2, neon) read the rounded rows as fp32 (round_bf16_f32), as
    // kz_conv_run gives them.
    float *xf = k->round_bf16_f32 ? malloc(x_rows * ldb * sizeof *xf) : NULL;
    if (k->round_bf16_f32 && !xf) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    const kz_gemm_bf16_args a = {.y = y, .ldy = g->n, .x = xf ? NULL : xb, .xf = xf,
                                 .ldx = ldb, .tap_stride = g->tap_stride, .w = &wb,
                                 .bias = bias, .mode = KZ_GEMM_ACCUMULATE, .n_rows = g->rows};
    double best = 1e30, best_round = 1e30, spent = 0.0;
    int reps = 0;
    const int scalar = k->isa == KZ_ISA_SCALAR; // slow: one repetition ranks it
    do {
        const double t0 = now();
        if (xf) {
            k->round_bf16_f32(xf, ldb, x, g->k_in, x_rows, g->k_in);
        } else {
            k->round_bf16(xb, ldb, x, g->k_in, x_rows, g->k_in);
        }
        const double t1 = now();
        k->gemm_bf16(&a, 0, g->rows, 0, wb.n_panels);
        const double t = now() - t1;
        best_round = t1 - t0 < best_round ? t1 - t0 : best_round;
        best = t < best ? t : best;
        spent += now() - t0;
        reps++;
    } while (scalar ? reps < 1 : spent < min_seconds || reps < 3);
    const double gflops = 2.0 * (double)g->rows * (double)(g->k_in * g->taps) * (double)g->n /
                          best * 1e-9;
    printf("  gemm_bf16 %-25s %60s %7.2f ms %7.2f GFLOP/s", k->gemm_bf16_name, "", best * 1e3,
           gflops);
    const double peak = bf16_peak(k->gemm_bf16_name);
    if (peak > 0.0) {
        printf("  %5.1f%% of its bf16 peak", 100.0 * gflops / peak);
    }
    printf("  (+%.3f ms rounding x)\n", best_round * 1e3);
    free(xb);
    free(xf);
    kz_packed_bf16_free(&wb);
}

static void bench_gemm(const kz_kernels *k, double peak) {
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const gemm_shape *g = &shapes[s];
        kz_packed w;
        if (kz_packed_init(&w, g->taps, g->k_in, g->n, pack_get, NULL) != 0) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        const size_t x_rows = g->rows + (g->taps - 1) * g->tap_stride;
        float *x = rand_buf(x_rows * g->k_in);
        float *y = rand_buf(g->rows * g->n);
        float *bias = rand_buf(g->n);
        const kz_gemm_args a = {
            .y = y,
            .ldy = g->n,
            .x = x,
            .ldx = g->k_in,
            .tap_stride = g->tap_stride,
            .w = &w,
            .bias = bias,
            .mode = KZ_GEMM_ACCUMULATE,
            .n_rows = g->rows,
        };
        const double flop = 2.0 * (double)g->rows * (double)(g->k_in * g->taps) * (double)g->n;
        double best = 1e30;
        double spent = 0.0;
        int reps = 0;
        // Scalar is slow: one repetition is enough to rank it.
        const double budget = k->isa == KZ_ISA_SCALAR ? 0.0 : min_seconds;
        do {
            const double t0 = now();
            k->gemm(&a, 0, g->rows, 0, w.n_panels);
            const double t = now() - t0;
            best = t < best ? t : best;
            spent += t;
            reps++;
        } while (spent < budget || reps < (k->isa == KZ_ISA_SCALAR ? 1 : 3));
        const double gflops = flop / best * 1e-9;
        printf("  gemm %-30s T=%-5zu k_in=%-5zu taps=%zu stride=%zu n=%-5zu %7.2f ms %7.2f GFLOP/s",
               g->what, g->rows, g->k_in, g->taps, g->tap_stride, g->n, best * 1e3, gflops);
        if (peak > 0.0) {
            printf("  %5.1f%% of peak", 100.0 * gflops / peak);
        }
        printf("\n");
        const kz_kernels *bf16[8];
        for (size_t v = 0, n = bf16_tables(k->isa, bf16); v < n; v++) {
            bench_gemm_bf16(bf16[v], g, &w, x, y, bias);
        }
        sink = y[0];
        free(x);
        free(y);
        free(bias);
        kz_packed_free(&w);
    }
}

/* --- vectors and rows ------------------------------------------------------ */

/* Seconds per call of fn(ctx), best of repetitions totalling min_seconds. */
typedef void (*bench_fn)(const kz_kernels *k, void *ctx);

static double time_call(const kz_kernels *k, bench_fn fn, void *ctx, size_t inner) {
    double best = 1e30;
    double spent = 0.0;
    int reps = 0;
    do {
        const double t0 = now();
        for (size_t i = 0; i < inner; i++) {
            fn(k, ctx);
        }
        const double t = (now() - t0) / (double)inner;
        best = t < best ? t : best;
        spent += t * (double)inner;
        reps++;
    } while (spent < min_seconds / 4 || reps < 3);
    return best;
}

typedef struct vec_ctx {
    float *a;
    float *b;
    float *c;
    float *d;
    size_t rows;
    size_t n;
} vec_ctx;

static void run_dot(const kz_kernels *k, void *ctx) {
    const vec_ctx *v = ctx;
    float d;
    k->dot_rows(&d, v->a, v->b, v->n, 1, v->n, 1.0f);
    sink = d;
}

static void run_axpy(const kz_kernels *k, void *ctx) {
    const vec_ctx *v = ctx;
    const float w = 1e-7f;
    k->axpy_rows(v->b, &w, v->a, v->n, 1, v->n);
}

static void run_snake(const kz_kernels *k, void *ctx) {
    const vec_ctx *v = ctx;
    k->snake_beta(v->b, v->a, v->rows, v->n, v->c, v->d);
}

static void run_gelu(const kz_kernels *k, void *ctx) {
    const vec_ctx *v = ctx;
    k->gelu(v->b, v->a, v->rows * v->n);
}

static void run_swiglu(const kz_kernels *k, void *ctx) {
    const vec_ctx *v = ctx;
    k->swiglu(v->b, v->a, v->c, v->rows * v->n);
}

static void run_rms(const kz_kernels *k, void *ctx) {
    const vec_ctx *v = ctx;
    k->rms_norm(v->b, v->a, v->c, v->rows, v->n, 1e-6f);
}

static void bench_vectors(const kz_kernels *k) {
    static const size_t sizes[] = {1024, 32768, 8u << 20}; // 4 KB (L1), 128 KB (L2), 32 MB
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const size_t n = sizes[s];
        vec_ctx v = {.a = rand_buf(n), .b = rand_buf(n), .rows = 1, .n = n};
        const size_t inner = n < 100000 ? 200 : 1;
        const double td = time_call(k, run_dot, &v, inner);
        const double ta = time_call(k, run_axpy, &v, inner);
        printf("  dot  n=%-8zu %8.2f GB/s    axpy n=%-8zu %8.2f GB/s\n", n,
               2.0 * (double)n * sizeof(float) / td * 1e-9, n,
               3.0 * (double)n * sizeof(float) / ta * 1e-9);
        free(v.a);
        free(v.b);
    }
}

static void bench_rows(const kz_kernels *k) {
    const size_t rows = 1920;
    const size_t ch = 96;
    const size_t n = rows * ch;
    vec_ctx v = {.a = rand_buf(n), .b = rand_buf(n), .c = rand_buf(n), .d = rand_buf(ch),
                 .rows = rows, .n = ch};
    for (size_t i = 0; i < n; i++) {
        v.a[i] *= 4.0f;
    }
    for (size_t c = 0; c < ch; c++) {
        v.c[c] = expf(v.c[c]);
        v.d[c] = 1.0f / (expf(v.d[c]) + 1e-9f);
    }
    const struct {
        const char *name;
        bench_fn fn;
    } list[] = {
        {"snake_beta", run_snake},
        {"gelu", run_gelu},
        {"swiglu", run_swiglu},
        {"rms_norm", run_rms},
    };
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
        const double t = time_call(k, list[i].fn, &v, 3);
        printf("  %-10s [%zu, %zu] %7.3f ns/element\n", list[i].name, rows, ch,
               t / (double)n * 1e9);
    }
    free(v.a);
    free(v.b);
    free(v.c);
    free(v.d);
}

/* The Winograd transforms (mix_rows) over block-4- and block-2-sized sets of tiles:
 * the input transform (F(4, 7): 10 x 10, F(6, 7): 12 x 12, F(10, 7): 16 x 16; source rows
 * in x) and the output transform (4 x 11, 6 x 13, 10 x 17, with the bias row). */
typedef struct mix_ctx {
    const float *x;    /* [tiles + n_src, ch] */
    float *v;          /* [n_dst, tiles, ch] */
    const float *mat;  /* [n_dst * n_src] */
    size_t tiles, ch, n_dst, n_src;
} mix_ctx;

static void run_mix(const kz_kernels *k, void *ctx) {
    const mix_ctx *m = ctx;
    for (size_t t = 0; t < m->tiles; t++) {
        const float *src[KZ_MIX_MAX_SRC];
        float *dst[KZ_MIX_MAX_SRC];
        for (size_t l = 0; l < m->n_src; l++) {
            src[l] = m->x + (t + l) * m->ch;
        }
        for (size_t r = 0; r < m->n_dst; r++) {
            dst[r] = m->v + (r * m->tiles + t) * m->ch;
        }
        k->mix_rows(dst, src, m->mat, m->n_dst, m->n_src, m->ch);
    }
}

static void bench_mix(const kz_kernels *k, double peak) {
    static const size_t mix_shapes[][4] = {
        {10, 10, 1920, 96}, {4, 11, 1920, 96}, {10, 10, 160, 384}, {4, 11, 160, 384},
        {12, 12, 1280, 96}, {6, 13, 1280, 96}, {12, 12, 108, 384}, {6, 13, 108, 384},
        {16, 16, 768, 96},  {10, 17, 768, 96}, {16, 16, 64, 384},  {10, 17, 64, 384}};
    for (size_t i = 0; i < sizeof mix_shapes / sizeof mix_shapes[0]; i++) {
        mix_ctx m = {.n_dst = mix_shapes[i][0], .n_src = mix_shapes[i][1],
                     .tiles = mix_shapes[i][2], .ch = mix_shapes[i][3]};
        float *x = rand_buf((m.tiles + m.n_src) * m.ch);
        float *v = rand_buf(m.n_dst * m.tiles * m.ch);
        float *mat = rand_buf(m.n_dst * m.n_src);
        m.x = x;
        m.v = v;
        m.mat = mat;
        const double t = time_call(k, run_mix, &m, 3);
        const double flop = 2.0 * (double)(m.n_dst * m.n_src * m.ch * m.tiles);
        const double bytes = (double)((m.n_src + m.n_dst) * m.ch * m.tiles) * sizeof(float);
        printf("  mix_rows %2zu x %-2zu  %4zu tiles x %3zu ch %7.3f ms %7.2f GFLOP/s", m.n_dst,
               m.n_src, m.tiles, m.ch, t * 1e3, flop / t * 1e-9);
        if (peak > 0.0) {
            printf("  %5.1f%% of peak", 100.0 * flop / t * 1e-9 / peak);
        }
        printf("  %7.2f GB/s of rows read and written\n", bytes / t * 1e-9);
        free(x);
        free(v);
        free(mat);
    }
}

int main(int argc, char **argv) {
    int want[KZ_ISA_NEON + 1] = {0};
    int any = 0;
    for (int i = 1; i < argc; i++) {
        kz_isa isa;
        if (strcmp(argv[i], "--quick") == 0) {
            min_seconds = 0.05;
        } else if (kz_isa_parse(argv[i], &isa) == 0 && isa <= KZ_ISA_NEON) {
            want[isa] = 1;
            any = 1;
        } else {
            fprintf(stderr, "usage: %s [scalar|avx2|avx512|neon ...] [--quick]\n", argv[0]);
            return 2;
        }
    }
    printf("cpu features: %s\n", kz_cpu_features());
    printf("single thread; best of repeated runs\n");
    double peak[KZ_ISA_NEON + 1] = {0};
    for (int l = KZ_ISA_AVX2; l <= KZ_ISA_NEON; l++) {
        if (kz_kernels_for((kz_isa)l)) {
            peak[l] = peak_for((kz_isa)l);
            printf("measured FMA peak, %s vectors: %.2f GFLOP/s\n", kz_isa_name((kz_isa)l),
                   peak[l]);
        }
    }
    for (int l = KZ_ISA_AVX2; l <= KZ_ISA_NEON; l++) {
        const kz_kernels *bf16[8];
        for (size_t v = 0, n = bf16_tables((kz_isa)l, bf16); v < n; v++) {
            bf16_peak(bf16[v]->gemm_bf16_name); // measured and printed here, before the tables
        }
    }
    for (int l = KZ_ISA_SCALAR; l <= KZ_ISA_NEON; l++) {
        if (any && !want[l]) {
            continue;
        }
        const kz_kernels *k = kz_kernels_for((kz_isa)l);
        if (!k) {
            printf("\n[%s] skipped: not supported by this CPU or build\n", kz_isa_name((kz_isa)l));
            continue;
        }
        printf("\n[%s]\n", k->name);
        bench_gemm(k, peak[l]);
        bench_vectors(k);
        bench_rows(k);
        bench_mix(k, peak[l]);
    }
    return 0;
}
