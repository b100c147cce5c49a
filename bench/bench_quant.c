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
 * thread's CPU time, as in bench_kernels.c.
 *
 * Usage: bench_quant [scalar|avx2|avx512 ...] [--mb N] [--quick]
 *   levels (default: every SIMD level the CPU supports); --mb total bf16
 *   megabytes per shape; --quick shortens timing.
 */
#include "kernels/kernels.h"
#include "kernels/quant.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double min_seconds = 1.0;
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

/* Best time of one pass over the n_mat matrices (seconds). */
static double time_passes(mm_fn fn, const uint8_t *mats, size_t n_mat, size_t rows, size_t n_in,
                          size_t mat_bytes, const float *x, float *y) {
    double best = 1e30, total = 0;
    int passes = 0;
    while (total < min_seconds || passes < 3) {
        const double t0 = now();
        for (size_t m = 0; m < n_mat; m++) {
            fn(y, rows, x, n_in, mats + m * mat_bytes, n_in, 1, 0, rows);
        }
        const double dt = now() - t0;
        sink += y[rows / 2];
        best = dt < best ? dt : best;
        total += dt;
        passes++;
    }
    return best;
}

static void bench_shape(const kz_kernels *k, size_t rows, size_t n_in, double mb) {
    const size_t bf16_bytes = rows * n_in * 2;
    size_t n_mat = (size_t)(mb * 1e6 / (double)bf16_bytes + 0.5);
    n_mat = n_mat ? n_mat : 1;
    float *x = malloc(n_in * sizeof(float));
    float *y = malloc(rows * sizeof(float));
    for (size_t i = 0; i < n_in; i++) {
        x[i] = rng_float();
    }
    double t[FMT_COUNT];
    for (int f = 0; f < FMT_COUNT; f++) {
        const size_t mat_bytes = rows * row_bytes((fmt)f, n_in);
        uint8_t *mats = make_mats((fmt)f, n_mat, rows, n_in);
        t[f] = time_passes(fmt_fn(k, (fmt)f), mats, n_mat, rows, n_in, mat_bytes, x, y);
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
    for (int i = 1; i < argc; i++) {
        kz_isa isa;
        if (strcmp(argv[i], "--quick") == 0) {
            min_seconds = 0.2;
        } else if (strcmp(argv[i], "--mb") == 0 && i + 1 < argc) {
            mb = atof(argv[++i]);
        } else if (kz_isa_parse(argv[i], &isa) == 0 && isa <= KZ_ISA_NEON) {
            want[isa] = 1;
            any = 1;
        } else {
            fprintf(stderr, "usage: %s [scalar|avx2|avx512 ...] [--mb N] [--quick]\n", argv[0]);
            return 2;
        }
    }
    static const size_t shapes[][2] = {{3072, 1024}, {1024, 3072}, {2048, 1024}};
    printf("cpu features: %s\n", kz_cpu_features());
    printf("single thread, 1 token, best pass; columns: shape [rows, n_in] x matrices, format, "
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
            bench_shape(k, shapes[s][0], shapes[s][1], mb);
        }
        printf("[%s] cache-resident (one matrix, repeated)\n", k->name);
        bench_shape(k, 256, 1024, 0.5);
    }
    return 0;
}
