/*
 * bench_quant.c - single-thread speed of the quantized language-model
 * projections (kernels.h matmul_q8_0, matmul_q4_0) against the bf16 one
 * (matmul_bf16), one token, at the talker / code-predictor MLP shapes.
 *
 * Data flow: for every level the CPU runs, every shape [rows, n_in] and every
 * format (bf16, q8_0, q4_0): allocate enough matrices of that shape that their
 * bf16 form totals --mb megabytes (default 300, far beyond the last-level
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
 * Usage: bench_quant [scalar|avx2|avx512 ...] [--mb N] [--quick] [--threads N] [--no-vnni]
 *   levels (default: every SIMD level the CPU supports); --mb total bf16
 *   megabytes per shape; --quick shortens timing; --no-vnni runs the AVX-512
 *   quantized kernels' plain integer path on a VNNI CPU (same bits, for
 *   comparison).
 */
#include "kernels/kernels.h"
#include "kernels/quant.h"

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

typedef enum fmt { FMT_BF16, FMT_Q8_0, FMT_Q4_0, FMT_COUNT } fmt;
static const char *const fmt_name[FMT_COUNT] = {"bf16", "q8_0", "q4_0"};

static size_t row_bytes(fmt f, size_t n_in) {
    return f == FMT_BF16   ? 2 * n_in
           : f == FMT_Q8_0 ? kz_q8_0_row_bytes(n_in)
                           : kz_q4_0_row_bytes(n_in);
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
        if (f == FMT_BF16) {
            for (size_t i = 0; i < n_in; i++) {
                uint32_t bits;
                memcpy(&bits, &wrow[i], 4);
                const uint16_t h = (uint16_t)(bits >> 16);
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
    return f == FMT_BF16 ? k->matmul_bf16 : f == FMT_Q8_0 ? k->matmul_q8_0 : k->matmul_q4_0;
}

/* One pass over the n_mat matrices (mat_bytes apart, 0: the same one), rows
 * [o0, o1) of each. */
typedef struct pass {
    mm_fn fn;
    const uint8_t *mats;
    size_t n_mat, rows, n_in, mat_bytes, o0, o1;
    const float *x;
    float *y;
    pthread_barrier_t *start, *done; /* --threads > 1 */
    const int *stop;                 /* read after the start barrier */
} pass;

static void run_pass(const pass *p) {
    for (size_t m = 0; m < p->n_mat; m++) {
        p->fn(p->y, p->rows, p->x, p->n_in, p->mats + m * p->mat_bytes, p->n_in, 1, p->o0, p->o1);
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

/* Best time of one pass over the n_mat matrices (seconds), the rows split over
 * n_threads threads. */
static double time_passes(mm_fn fn, const uint8_t *mats, size_t n_mat, size_t rows, size_t n_in,
                          size_t mat_bytes, const float *x, float *y) {
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

/* repeat 0: enough distinct matrices for mb megabytes of bf16, each used once
 * per pass; repeat > 0: one matrix used repeat times per pass (cache-resident). */
static void bench_shape(const kz_kernels *k, size_t rows, size_t n_in, double mb, size_t repeat) {
    const size_t bf16_bytes = rows * n_in * 2;
    size_t n_mat = (size_t)(mb * 1e6 / (double)bf16_bytes + 0.5);
    n_mat = repeat ? repeat : n_mat ? n_mat : 1;
    float *x = malloc(n_in * sizeof(float));
    float *y = malloc(rows * sizeof(float));
    for (size_t i = 0; i < n_in; i++) {
        x[i] = rng_float();
    }
    double t[FMT_COUNT];
    for (int f = 0; f < FMT_COUNT; f++) {
        const size_t mat_bytes = rows * row_bytes((fmt)f, n_in);
        uint8_t *mats = make_mats((fmt)f, repeat ? 1 : n_mat, rows, n_in);
        t[f] =
            time_passes(fmt_fn(k, (fmt)f), mats, n_mat, rows, n_in, repeat ? 0 : mat_bytes, x, y);
        free(mats);
        const double weights = (double)n_mat * (double)rows * (double)n_in;
        printf(
            "  [%5zu, %5zu] x %3zu  %-5s %7.1f MB  %7.2f ms  %6.2f GB/s  %5.2f weights/ns  x%.2f\n",
            rows, n_in, n_mat, fmt_name[f], (double)(n_mat * mat_bytes) / 1e6, t[f] * 1e3,
            (double)(n_mat * mat_bytes) / t[f] / 1e9, weights / t[f] / 1e9, t[FMT_BF16] / t[f]);
    }
    free(x);
    free(y);
}

int main(int argc, char **argv) {
    int want[KZ_ISA_NEON + 1] = {0};
    int any = 0;
    double mb = 300;
    int no_vnni = 0;
    for (int i = 1; i < argc; i++) {
        kz_isa isa;
        if (strcmp(argv[i], "--quick") == 0) {
            min_seconds = 0.2;
        } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            n_threads = atoi(argv[++i]);
            n_threads = n_threads < 1 ? 1 : n_threads > 64 ? 64 : n_threads;
        } else if (strcmp(argv[i], "--no-vnni") == 0) {
            no_vnni = 1;
        } else if (strcmp(argv[i], "--mb") == 0 && i + 1 < argc) {
            mb = atof(argv[++i]);
        } else if (kz_isa_parse(argv[i], &isa) == 0 && isa <= KZ_ISA_NEON) {
            want[isa] = 1;
            any = 1;
        } else {
            fprintf(stderr,
                    "usage: %s [scalar|avx2|avx512 ...] [--mb N] [--quick] [--threads N] "
                    "[--no-vnni]\n",
                    argv[0]);
            return 2;
        }
    }
    static const size_t shapes[][2] = {{3072, 1024}, {1024, 3072}, {2048, 1024}};
    printf("cpu features: %s\n", kz_cpu_features());
#ifdef KZ_HAVE_X86
    const int vnni = kz_quant_avx512_set_vnni(!no_vnni);
    printf("avx512 quantized kernels: %s integer path\n", vnni ? "VNNI" : "plain (maddubs)");
#else
    (void)no_vnni;
#endif
    if (n_threads > 1) {
        printf("%d threads (rows split), wall clock", n_threads);
    } else {
        printf("single thread, CPU time");
    }
    printf(", 1 token, best pass; columns: shape [rows, n_in] x matrices, format, "
           "bytes streamed per pass, time per pass, GB/s of weight bytes, weights per ns, "
           "speed-up per weight over bf16\n");
    for (int l = KZ_ISA_SCALAR; l <= KZ_ISA_NEON; l++) {
        if (any ? !want[l] : l == KZ_ISA_SCALAR) {
            continue;
        }
        const kz_kernels *k = kz_kernels_for((kz_isa)l);
        if (!k) {
            printf("\n[%s] skipped: not supported by this CPU or build\n", kz_isa_name((kz_isa)l));
            continue;
        }
        printf("\n[%s] from DRAM (%.0f MB of bf16 per shape)\n", k->name, mb);
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            bench_shape(k, shapes[s][0], shapes[s][1], mb, 0);
        }
        printf("[%s] cache-resident (one matrix, 32 times per pass)\n", k->name);
        bench_shape(k, 256, 1024, 0, 32);
    }
    return 0;
}
