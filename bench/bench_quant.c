/*
 * bench_quant.c - single-thread speed of the quantized language-model
 * projections (kernels.h matmul_q8_0, matmul_q4_0) and the f16 one against the
 * bf16 one (matmul_bf16), one token, at the talker / code-predictor MLP shapes.
 *
 * Data flow: for every table asked for (default: each SIMD level's highest sub-level
 * the CPU runs), every shape [rows, n_in] and every
 * format (bf16, f16, q8_0, q4_0): allocate enough matrices of that shape that they
 * total --mb megabytes in that format (default 300, far beyond the last-level
 * cache, so every byte comes from DRAM, as in decoding), fill them with random
 * weights, then time passes that multiply one token by each matrix in turn;
 * report the best pass as GB/s of weight bytes streamed, weights per ns and
 * the speed-up per weight over bf16 ("bf16-equivalent": how much faster the
 * same layer runs). A second table does the same with one small matrix that
 * stays in L2, which shows the kernels' compute ceiling. Time is this
 * thread's CPU time, as in bench_kernels.c; with --threads N the rows of each
 * matrix are split into N contiguous ranges, one per thread (as the model's
 * pool splits them), and a pass is timed on the wall clock between barriers.
 *
 * A third table is the prompt prefill: --tokens N (default 22, the 0.6B model's
 * prompt) through --prefill-mb megabytes of bf16-sized matrices (default 64) per
 * shape and format (f32, bf16, f16, q8_0, q4_0), by the per-dtype matmul called on all
 * tokens with the rows split over the threads (tokens in pairs, or sets of four
 * for the AVX-512 quantized kernels), and by the GEMM path (kz_matrix_mul_gemm:
 * rows_to_f32 + gemm_rows) on a pool of --threads threads; GFLOP/s = 2 rows n_in
 * tokens / time, the speed-up of the GEMM path, and which of the two the model's
 * kz_matrix_mul takes (layers/matrix.c: the GEMM path for f32, bf16 and f16, and for
 * q8_0 / q4_0 where the level's prefill_gemm_quant says so).
 *
 * Next to the rates stand this machine's limits, measured first with the probes of
 * `kztts bench` (src/kernels/machine_peak.c): the DRAM read bandwidth of the
 * benchmark's thread count (the DRAM table's "% of DRAM read") and, per level, the
 * FMA peak (the prefill table's "% of FMA peak" for the GEMM path). The read probe
 * is a plain streaming loop without software prefetch, so a prefetching kernel can
 * pass 100 % of it; the codes' shares above 100 % say the probe is the weaker reader.
 *
 * Usage: bench_quant [SUB-LEVEL ...] [--mb N] [--quick] [--threads N] [--prefill]
 *                    [--tokens N] [--prefill-mb N] [--prefetch l1|l2|l2far|l2reuse]
 *   SUB-LEVEL: the kernel tables to run, by sub-level name (kernels.h kz_isa: scalar,
 *   avx2, avx512, avx512-vnni, avx512-bf16, avx512-amx, neon, neon-dotprod, neon-i8mm),
 *   exactly that one: `avx512` is the plain integer path (maddubs) on a VNNI CPU,
 *   `avx512-bf16` keeps q8_0 prompts off the AMX-INT8 tiles of avx512-amx, `neon` runs
 *   the baseline NEON kernels on a CPU with dotprod, `neon-dotprod` keeps calls of two
 *   or more tokens off neon-i8mm's SMMLA (the prefill table then compares the SDOT
 *   matmul with the GEMM path); each gives the same bits as its neighbours. Default:
 *   each SIMD level's highest sub-level the CPU runs. --mb megabytes per shape and
 *   format; --quick shortens timing; --prefill runs only the prefill table; --prefetch
 *   runs the tables with that prefetch policy of the x86 quantized matvecs
 *   (kernels.h kz_quant_prefetch; default: the probe's choice, L2 on Intel, L2 further
 *   ahead (l2far) on Zen 4; l2reuse: L2 with the distances for weights read again from
 *   the last-level cache, the matmul_q*_reused entry points).
 */
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "layers/matrix.h"
#include "runtime/threadpool.h"
#include "kernels/machine_peak.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double min_seconds = 1.0;
static int n_threads = 1;
static volatile float sink;

static double now(void) {
    struct timespec ts;
    clock_gettime(n_threads > 1 ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 88172645463325252ull;

static float rng_float(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)(rng >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

/* The decode tables compare the first FMT_COUNT formats; the prefill table adds f32. */
typedef enum fmt { FMT_BF16, FMT_F16, FMT_Q8_0, FMT_Q4_0, FMT_COUNT, FMT_F32 = FMT_COUNT } fmt;
static const char *const fmt_name[FMT_F32 + 1] = {"bf16", "f16", "q8_0", "q4_0", "f32"};
static const kz_dtype fmt_dtype[FMT_F32 + 1] = {KZ_DTYPE_BF16, KZ_DTYPE_F16, KZ_DTYPE_Q8_0,
                                                KZ_DTYPE_Q4_0, KZ_DTYPE_F32};

static size_t row_bytes(fmt f, size_t n_in) {
    return kz_dtype_row_bytes(fmt_dtype[f], n_in);
}

/* n_mat matrices [rows, n_in] of format f back to back, random weights of
 * magnitude ~0.05 (the scales of real checkpoints: normal fp16). */
static uint8_t *make_mats(fmt f, size_t n_mat, size_t rows, size_t n_in) {
    const size_t rb = row_bytes(f, n_in);
    uint8_t *buf = aligned_alloc(64, (n_mat * rows * rb + 63) / 64 * 64);
    float *wrow = malloc(n_in * sizeof(float));
    if (!buf || !wrow) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t r = 0; r < n_mat * rows; r++) {
        for (size_t i = 0; i < n_in; i++) {
            wrow[i] = 0.05f * rng_float();
        }
        uint8_t *dst = buf + r * rb;
        if (f == FMT_F32) {
            memcpy(dst, wrow, n_in * sizeof(float));
        } else if (f == FMT_BF16) {
            for (size_t i = 0; i < n_in; i++) {
                uint32_t bits;
                memcpy(&bits, &wrow[i], 4);
                const uint16_t h = (uint16_t)(bits >> 16);
                memcpy(dst + 2 * i, &h, 2);
            }
        } else if (f == FMT_F16) {
            for (size_t i = 0; i < n_in; i++) {
                const uint16_t h = kz_f32_to_fp16(wrow[i]);
                memcpy(dst + 2 * i, &h, 2);
            }
        } else if (f == FMT_Q8_0) {
            kz_quantize_row_q8_0(dst, wrow, n_in);
        } else {
            kz_quantize_row_q4_0(dst, wrow, n_in);
        }
    }
    free(wrow);
    return buf;
}

typedef void (*mm_fn)(float *, size_t, const float *, size_t, const void *, size_t, size_t, size_t,
                      size_t);

static mm_fn fmt_fn(const kz_kernels *k, fmt f) {
    return f == FMT_BF16   ? k->matmul_bf16
           : f == FMT_F16  ? k->matmul_f16
           : f == FMT_Q8_0 ? k->matmul_q8_0
           : f == FMT_Q4_0 ? k->matmul_q4_0
                           : k->matmul_f32;
}

/* One pass over the n_mat matrices (mat_bytes apart, 0: the same one), rows
 * [o0, o1) of each. */
typedef struct pass {
    mm_fn fn;
    const uint8_t *mats;
    size_t n_mat, rows, n_in, mat_bytes, o0, o1, n_tok;
    const float *x;
    float *y;
    pthread_barrier_t *start, *done; /* --threads > 1 */
    const int *stop;                 /* read after the start barrier */
} pass;

static void run_pass(const pass *p) {
    for (size_t m = 0; m < p->n_mat; m++) {
        p->fn(p->y, p->rows, p->x, p->n_in, p->mats + m * p->mat_bytes, p->n_in, p->n_tok, p->o0,
              p->o1);
    }
}

static void *pass_worker(void *arg) {
    const pass *p = arg;
    for (;;) {
        pthread_barrier_wait(p->start);
        if (*p->stop) {
            return NULL;
        }
        run_pass(p);
        pthread_barrier_wait(p->done);
    }
}

/* Best time of one pass over the n_mat matrices (seconds) for n_tok tokens (x
 * [n_tok, n_in], y [n_tok, rows]), the rows split over n_threads threads. */
static double time_passes(mm_fn fn, const uint8_t *mats, size_t n_mat, size_t rows, size_t n_in,
                          size_t mat_bytes, size_t n_tok, const float *x, float *y) {
    enum { MAX_THREADS = 64 };
    pass ps[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    pthread_barrier_t start, done;
    int stop = 0;
    const int nt = n_threads;
    if (nt > 1) {
        pthread_barrier_init(&start, NULL, (unsigned)nt);
        pthread_barrier_init(&done, NULL, (unsigned)nt);
    }
    pass base;
    base.fn = fn;
    base.mats = mats;
    base.n_mat = n_mat;
    base.rows = rows;
    base.n_in = n_in;
    base.mat_bytes = mat_bytes;
    base.n_tok = n_tok;
    base.x = x;
    base.y = y;
    base.start = &start;
    base.done = &done;
    base.stop = &stop;
    for (int i = 0; i < nt; i++) {
        ps[i] = base;
        ps[i].o0 = rows * (size_t)i / (size_t)nt;
        ps[i].o1 = rows * (size_t)(i + 1) / (size_t)nt;
        if (i > 0 && pthread_create(&tid[i], NULL, pass_worker, &ps[i]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            exit(1);
        }
    }
    double best = 1e30, total = 0;
    int passes = 0;
    while (total < min_seconds || passes < 3) {
        const double t0 = now();
        if (nt > 1) {
            pthread_barrier_wait(&start);
        }
        run_pass(&ps[0]);
        if (nt > 1) {
            pthread_barrier_wait(&done);
        }
        const double dt = now() - t0;
        sink += y[rows / 2];
        best = dt < best ? dt : best;
        total += dt;
        passes++;
    }
    if (nt > 1) {
        stop = 1;
        pthread_barrier_wait(&start);
        for (int i = 1; i < nt; i++) {
            pthread_join(tid[i], NULL);
        }
        pthread_barrier_destroy(&start);
        pthread_barrier_destroy(&done);
    }
    return best;
}

/* repeat 0: enough distinct matrices for mb megabytes of each format's own bytes, each
 * used once per pass (sized by bf16 bytes, the q4_0 set was 85 MB at the default and
 * partly served from a 32 MB L3: 36-40 GB/s on the Zen 4 against 28-30 from DRAM,
 * docs/PERF.md 2026-12-03 (evening)); repeat > 0: one matrix used repeat times per pass
 * (cache-resident). The speed-up column compares weights per ns with bf16's. */
static void bench_shape(const kz_kernels *k, size_t rows, size_t n_in, double mb, size_t repeat,
                        double peak_gbs) {
    float *x = malloc(n_in * sizeof(float));
    float *y = malloc(rows * sizeof(float));
    for (size_t i = 0; i < n_in; i++) {
        x[i] = rng_float();
    }
    double rate_bf16 = 0;
    for (int f = 0; f < FMT_COUNT; f++) {
        const size_t mat_bytes = rows * row_bytes((fmt)f, n_in);
        size_t n_mat = (size_t)(mb * 1e6 / (double)mat_bytes + 0.5);
        n_mat = repeat ? repeat : n_mat ? n_mat : 1;
        uint8_t *mats = make_mats((fmt)f, repeat ? 1 : n_mat, rows, n_in);
        const double t = time_passes(fmt_fn(k, (fmt)f), mats, n_mat, rows, n_in,
                                     repeat ? 0 : mat_bytes, 1, x, y);
        free(mats);
        const double rate = (double)n_mat * (double)rows * (double)n_in / t / 1e9; // weights/ns
        const double gbs = (double)(n_mat * mat_bytes) / t / 1e9;
        rate_bf16 = f == FMT_BF16 ? rate : rate_bf16;
        printf("  [%5zu, %5zu] x %3zu  %-5s %7.1f MB  %7.2f ms  %6.2f GB/s  %5.2f weights/ns  x%.2f",
               rows, n_in, n_mat, fmt_name[f], (double)(n_mat * mat_bytes) / 1e6, t * 1e3, gbs,
               rate, rate / rate_bf16);
        if (peak_gbs > 0) {
            printf("  %3.0f %% of DRAM read", 100.0 * gbs / peak_gbs);
        }
        printf("\n");
    }
    free(x);
    free(y);
}

/* One pass of kz_matrix_mul_gemm (the GEMM path, whatever the dtype) over n_mat matrices. */
typedef struct gemm_pass {
    const kz_matrix *mats;
    size_t n_mat, n_tok;
    kz_exec *e;
    const float *x;
    float *y;
} gemm_pass;

static double time_gemm_path(const gemm_pass *p) {
    double best = 1e30, total = 0;
    int passes = 0;
    while (total < min_seconds || passes < 3) {
        const double t0 = now();
        for (size_t m = 0; m < p->n_mat; m++) {
            const kz_matrix *mat = &p->mats[m];
            kz_matrix_mul_gemm(mat, p->e, p->y, mat->rows, p->x, mat->cols, p->n_tok);
        }
        const double dt = now() - t0;
        sink += p->y[p->mats[0].rows / 2];
        best = dt < best ? dt : best;
        total += dt;
        passes++;
    }
    return best;
}

/* The prompt prefill at one shape (see the header): n_tok tokens through enough
 * matrices [rows, n_in] for mb megabytes of bf16, per format, by the per-dtype
 * matmul and by kz_matrix_mul on a pool of n_threads. */
static void bench_prefill(const kz_kernels *k, kz_pool *pool, size_t rows, size_t n_in,
                          size_t n_tok, double mb, double peak_gflops) {
    size_t n_mat = (size_t)(mb * 1e6 / (double)(rows * n_in * 2) + 0.5);
    n_mat = n_mat ? n_mat : 1;
    float *x = malloc(n_tok * n_in * sizeof(float));
    float *y = malloc(n_tok * rows * sizeof(float));
    kz_matrix *mats = malloc(n_mat * sizeof *mats);
    if (!x || !y || !mats) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n_tok * n_in; i++) {
        x[i] = rng_float();
    }
    static const fmt order[] = {FMT_F32, FMT_BF16, FMT_F16, FMT_Q8_0, FMT_Q4_0};
    for (size_t f = 0; f < sizeof order / sizeof order[0]; f++) {
        const size_t mat_bytes = rows * row_bytes(order[f], n_in);
        uint8_t *data = make_mats(order[f], n_mat, rows, n_in);
        for (size_t m = 0; m < n_mat; m++) {
            mats[m] = (kz_matrix){.data = data + m * mat_bytes, .dtype = fmt_dtype[order[f]],
                                  .rows = rows, .cols = n_in,
                                  .row_bytes = row_bytes(order[f], n_in)};
        }
        const double t_old = time_passes(fmt_fn(k, order[f]), data, n_mat, rows, n_in, mat_bytes,
                                         n_tok, x, y);
        kz_exec e = {.k = k, .pool = pool};
        const gemm_pass gp = {
            .mats = mats, .n_mat = n_mat, .n_tok = n_tok, .e = &e, .x = x, .y = y};
        const double t_new = time_gemm_path(&gp);
        free(data);
        const double flop = 2.0 * (double)rows * (double)n_in * (double)n_tok * (double)n_mat;
        const int model_gemm = n_tok >= 4 && (order[f] == FMT_F32 || order[f] == FMT_BF16 ||
                                              order[f] == FMT_F16 || k->prefill_gemm_quant);
        printf("  %2zu x [%5zu <- %5zu] x %3zu  %-5s  matmul %8.2f ms %6.1f GFLOP/s   "
               "gemm_rows %8.2f ms %6.1f GFLOP/s (%3.0f %% of FMA peak)  x%.2f  (model: %s)\n",
               n_tok, rows, n_in, n_mat, fmt_name[order[f]], t_old * 1e3, flop / t_old / 1e9,
               t_new * 1e3, flop / t_new / 1e9, 100.0 * flop / t_new / 1e9 / peak_gflops,
               t_old / t_new, model_gemm ? "gemm_rows" : "matmul");
    }
    free(mats);
    free(x);
    free(y);
}

/* Whether name is a sub-level this build has (kernels.h kz_isa). */
static int known_sublevel(const char *name) {
    const char *const *names;
    const size_t n = kz_kernels_sublevels(&names);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(names[i], name) == 0) {
            return 1;
        }
    }
    return 0;
}

/* The tables to run: the sub-levels named (up to 16), or each SIMD level's highest. */
static size_t pick_tables(const char *const *named, size_t n_named, const kz_kernels **out) {
    size_t n = 0;
    if (n_named == 0) {
        for (int l = KZ_ISA_AVX2; l <= KZ_ISA_NEON; l++) {
            const kz_kernels *k = kz_kernels_for((kz_isa)l);
            if (k) {
                out[n++] = k;
            }
        }
        return n;
    }
    for (size_t i = 0; i < n_named; i++) {
        const kz_kernels *k = kz_kernels_named(named[i]);
        if (!k) {
            printf("[%s] skipped: not supported by this CPU\n", named[i]);
            continue;
        }
        out[n++] = k;
    }
    return n;
}

/* The decode, cache-resident and prefill tables of one kernel table. */
static void bench_table(const kz_kernels *k, kz_pool *pool, double mb, double prefill_mb,
                        size_t n_tok, int prefill_only, double peak_gbs) {
    static const size_t shapes[][2] = {{3072, 1024}, {1024, 3072}, {2048, 1024}};
    const char *loop;
    const double peak_gflops = kz_machine_fma_gflops(kz_isa_name(k->isa), n_threads, &loop);
    printf("[%s] FMA peak %.1f GFLOP/s with %d thread%s (%s)\n", k->name, peak_gflops,
           n_threads, n_threads == 1 ? "" : "s", loop);
    if (!prefill_only) {
        printf("[%s] from DRAM (%.0f MB of each format per shape)\n", k->name, mb);
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            bench_shape(k, shapes[s][0], shapes[s][1], mb, 0, peak_gbs);
        }
        printf("[%s] cache-resident (one matrix, 32 times per pass)\n", k->name);
        bench_shape(k, 256, 1024, 0, 32, 0);
    }
    printf("[%s] prompt prefill, %zu tokens, %.0f MB of bf16 per shape: per-dtype matmul "
           "vs the GEMM path (kz_matrix_mul_gemm); x = speed-up of the GEMM path\n",
           k->name, n_tok, prefill_mb);
    for (size_t s = 0; s < 2; s++) {
        bench_prefill(k, pool, shapes[s][0], shapes[s][1], n_tok, prefill_mb, peak_gflops);
    }
}

int main(int argc, char **argv) {
    const char *named[16];
    size_t n_named = 0;
    double mb = 300;
    double prefill_mb = 64;
    size_t n_tok = 22;
    int prefill_only = 0;
    const char *prefetch = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            min_seconds = 0.2;
        } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            n_threads = atoi(argv[++i]);
            n_threads = n_threads < 1 ? 1 : n_threads > 64 ? 64 : n_threads;
        } else if (strcmp(argv[i], "--prefill") == 0) {
            prefill_only = 1;
        } else if (strcmp(argv[i], "--tokens") == 0 && i + 1 < argc) {
            n_tok = (size_t)atoi(argv[++i]);
            n_tok = n_tok < 1 ? 1 : n_tok;
        } else if (strcmp(argv[i], "--prefill-mb") == 0 && i + 1 < argc) {
            prefill_mb = atof(argv[++i]);
        } else if (strcmp(argv[i], "--prefetch") == 0 && i + 1 < argc &&
                   (strcmp(argv[i + 1], "l1") == 0 || strcmp(argv[i + 1], "l2") == 0 ||
                    strcmp(argv[i + 1], "l2far") == 0 || strcmp(argv[i + 1], "l2reuse") == 0)) {
            prefetch = argv[++i];
        } else if (strcmp(argv[i], "--mb") == 0 && i + 1 < argc) {
            mb = atof(argv[++i]);
        } else if (known_sublevel(argv[i]) && n_named < 16) {
            named[n_named++] = argv[i];
        } else {
            fprintf(stderr,
                    "usage: %s [SUB-LEVEL ...] [--mb N] [--quick] [--threads N] [--prefill] "
                    "[--tokens N] [--prefill-mb N] [--prefetch l1|l2|l2far|l2reuse]\n"
                    "  SUB-LEVEL: a kernel sub-level of this build (kernels.h kz_isa)\n",
                    argv[0]);
            return 2;
        }
    }
    kz_pool *pool;
    if (kz_pool_new(n_threads, &pool) != KZ_OK) {
        fprintf(stderr, "kz_pool_new failed\n");
        return 1;
    }
    printf("cpu features: %s\n", kz_cpu_features());
    if (n_threads > 1) {
        printf("%d threads (rows split), wall clock", n_threads);
    } else {
        printf("single thread, CPU time");
    }
    printf(", 1 token, best pass; columns: shape [rows, n_in] x matrices, format, "
           "bytes streamed per pass, time per pass, GB/s of weight bytes, weights per ns, "
           "speed-up per weight over bf16\n");
    const double peak_gbs = kz_machine_read_gbs(n_threads);
    printf("machine: DRAM read %.1f GB/s with %d thread%s (256 MB streaming probe)\n", peak_gbs,
           n_threads, n_threads == 1 ? "" : "s");
    const kz_kernels *tables[16];
    const size_t n_tables = pick_tables(named, n_named, tables);
    for (size_t t = 0; t < n_tables; t++) {
        kz_kernels k = *tables[t]; // a copy: --prefetch changes its entry points
        if (prefetch) {
            kz_kernels_set_prefetch(&k, strcmp(prefetch, "l1") == 0      ? KZ_QPF_L1
                                        : strcmp(prefetch, "l2far") == 0 ? KZ_QPF_L2_FAR
                                                                         : KZ_QPF_L2);
            if (strcmp(prefetch, "l2reuse") == 0) { // the entry points for reused weights
                k.matmul_q8_0 = k.matmul_q8_0_reused;
                k.matmul_q4_0 = k.matmul_q4_0_reused;
            }
        }
        const int reuse = prefetch && strcmp(prefetch, "l2reuse") == 0;
        printf("\n[%s] quantized matvecs prefetch into %s%s\n", k.name,
               k.prefetch == KZ_QPF_L1   ? "L1"
               : k.prefetch == KZ_QPF_L2 ? "L2"
                                         : "L2, further ahead",
               reuse ? ", at the distances for reused weights" : "");
        bench_table(&k, pool, mb, prefill_mb, n_tok, prefill_only, peak_gbs);
    }
    kz_pool_free(pool);
    return 0;
}
