/*
 * bench_batch.c - the batched matrix-vector products of continuous batching
 * (kernels.h matvec_*, layers/matrix.c kz_matrix_mul_batch) against running the same
 * rows one after another, at B = 1, 2, 4, 8 (16) independent rows, next to this
 * machine's DRAM floor.
 *
 * Data flow: for the kernel table asked for (default: the best sub-level the CPU runs) and
 * every format (q8_0, q4_0, bf16, f32): allocate matrices of the talker's MLP shapes
 * ([3072, 1024] and [1024, 3072], the 0.6B model's gate/up and down) that total --mb
 * megabytes in that format (default 256, far beyond the last-level cache, so every byte
 * comes from DRAM as in decoding), fill them with random weights, then time passes over
 * all of them:
 *   batch   kz_matrix_mul_batch with B rows per matrix (each weight row read once per
 *           KZ_MATVEC_PASS rows);
 *   serial  B calls of kz_matrix_mul with one row each (B requests stepped one after
 *           another: the weights stream B times).
 * The rows are split over a pool of --threads threads as the model splits them. Each
 * line gives the best pass's time, the weight bytes per second (the bytes of one
 * pass over the weights / time), rows/s (B / time: request rows that went through
 * every weight), the share of the DRAM floor (bytes / the probe's read rate, over the
 * time: 100 % means reading the weights once at the probe's rate) and the batch's
 * speed-up over serial. The DRAM read rate comes from `kztts bench`'s probe
 * (src/kernels/machine_peak.c) on the same thread count; it streams without software
 * prefetch, so a kernel may pass 100 % of it.
 *
 * On a shared machine the wall clock moves with the neighbours' load; for counts that do
 * not, run one B under callgrind, collecting only the batched products (or, for serial,
 * kz_matrix_mul), e.g. `valgrind --tool=callgrind --collect-atstart=no
 * --toggle-collect=kz_matrix_mul_batch bench_batch avx2 --threads 1 --mb 4 --quick
 * --dram 1 --b 8`: the instructions per pass (--quick: two passes) over the weight count
 * and B give instructions per weight and row (the weights are paged in with kz_matrix_mul).
 *
 * Usage: bench_batch [SUB-LEVEL] [--threads N] [--mb N] [--quick] [--max-b 8|16] [--b N]
 *                    [--dram GB/s]
 *   --b N runs only B = N; --dram takes that read rate instead of probing it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/machine_peak.h"
#include "kernels/quant.h"
#include "layers/matrix.h"
#include "runtime/threadpool.h"
#include "stats.h"

enum { N_FORMATS = 4, N_SHAPES = 2 };
static const kz_dtype formats[N_FORMATS] = {KZ_DTYPE_Q8_0, KZ_DTYPE_Q4_0, KZ_DTYPE_BF16,
                                            KZ_DTYPE_F32};
static const char *const format_names[N_FORMATS] = {"q8_0", "q4_0", "bf16", "f32"};
static const size_t shapes[N_SHAPES][2] = {{3072, 1024}, {1024, 3072}}; /* [rows, n_in] */

/* A cheap generator for the fill (the values only need to be finite and varied). */
static uint32_t next_u32(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*s >> 33);
}

/* Random weights of one matrix: finite values in [-1, 1), scales about 0.004. */
static void fill(uint8_t *p, kz_dtype dt, size_t rows, size_t n_in, uint64_t *s) {
    const size_t rb = kz_dtype_row_bytes(dt, n_in);
    for (size_t o = 0; o < rows; o++) {
        uint8_t *row = p + o * rb;
        if (dt == KZ_DTYPE_F32 || dt == KZ_DTYPE_BF16) {
            for (size_t i = 0; i < n_in; i++) {
                const float v = (float)(int32_t)next_u32(s) * 0x1p-31f;
                if (dt == KZ_DTYPE_F32) {
                    memcpy(row + 4 * i, &v, 4);
                } else {
                    const uint16_t h = kz_bf16_round(v);
                    memcpy(row + 2 * i, &h, 2);
                }
            }
            continue;
        }
        const size_t bs = dt == KZ_DTYPE_Q8_0 ? KZ_Q8_0_BLOCK_BYTES : KZ_Q4_0_BLOCK_BYTES;
        for (size_t b = 0; b < n_in / KZ_QK; b++) {
            uint8_t *blk = row + b * bs;
            const uint16_t d = kz_f32_to_fp16(0.004f);
            memcpy(blk, &d, 2);
            for (size_t i = 2; i < bs; i++) {
                blk[i] = (uint8_t)next_u32(s);
            }
        }
    }
}

typedef struct bench_set {
    kz_matrix *m; /* [n] */
    size_t n;
    double bytes; /* of one pass over all of them */
} bench_set;

/* Matrices of alternating shapes totalling mb megabytes in format dt. */
static int make_set(bench_set *set, kz_dtype dt, size_t mb) {
    size_t per = 0;
    for (int s = 0; s < N_SHAPES; s++) {
        per += shapes[s][0] * kz_dtype_row_bytes(dt, shapes[s][1]);
    }
    const size_t pairs = (mb << 20) / per ? (mb << 20) / per : 1;
    set->n = 2 * pairs;
    set->m = calloc(set->n, sizeof *set->m);
    set->bytes = 0;
    uint64_t seed = 0x62617463ull;
    for (size_t i = 0; set->m && i < set->n; i++) {
        const size_t rows = shapes[i % 2][0], n_in = shapes[i % 2][1];
        const size_t rb = kz_dtype_row_bytes(dt, n_in);
        uint8_t *p = aligned_alloc(64, (rows * rb + 63) / 64 * 64);
        if (!p) {
            set->n = i;
            return -1;
        }
        fill(p, dt, rows, n_in, &seed);
        set->m[i] = (kz_matrix){.data = p, .dtype = dt, .rows = rows, .cols = n_in,
                                .row_bytes = rb};
        set->bytes += (double)(rows * rb);
    }
    return set->m ? 0 : -1;
}

static void free_set(bench_set *set) {
    for (size_t i = 0; i < set->n; i++) {
        free((void *)set->m[i].data);
    }
    free(set->m);
}

/* One pass over every matrix with b rows: batched (serial 0) or row by row. Returns ms. */
static double pass(const bench_set *set, kz_exec *e, const float *x, float *y, size_t b,
                   int serial) {
    const double t0 = stats_now_ms();
    for (size_t i = 0; i < set->n; i++) {
        const kz_matrix *m = &set->m[i];
        if (serial) {
            for (size_t r = 0; r < b; r++) {
                kz_matrix_mul(m, e, y + r * m->rows, m->rows, x + r * m->cols, m->cols, 1);
            }
        } else {
            kz_matrix_mul_batch(m, e, y, m->rows, x, m->cols, b);
        }
    }
    return stats_now_ms() - t0;
}

static double best_pass(const bench_set *set, kz_exec *e, const float *x, float *y, size_t b,
                        int serial, int reps) {
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        const double ms = pass(set, e, x, y, b, serial);
        best = ms < best ? ms : best;
    }
    return best;
}

int main(int argc, char **argv) {
    const char *level = NULL;
    int threads = 2, quick = 0;
    size_t mb = 256, max_b = 8, only_b = 0;
    double dram = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            threads = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--mb") && i + 1 < argc) {
            mb = (size_t)atol(argv[++i]);
        } else if (!strcmp(argv[i], "--max-b") && i + 1 < argc) {
            max_b = (size_t)atol(argv[++i]);
        } else if (!strcmp(argv[i], "--b") && i + 1 < argc) {
            only_b = (size_t)atol(argv[++i]);
        } else if (!strcmp(argv[i], "--dram") && i + 1 < argc) {
            dram = atof(argv[++i]);
        } else if (!strcmp(argv[i], "--quick")) {
            quick = 1;
        } else if (argv[i][0] != '-') {
            level = argv[i];
        } else {
            fprintf(stderr, "usage: bench_batch [SUB-LEVEL] [--threads N] [--mb N] [--quick] "
                            "[--max-b 8|16] [--b N] [--dram GB/s]\n");
            return 2;
        }
    }
    const kz_kernels *k = level ? kz_kernels_named(level) : kz_kernels_select(KZ_ISA_AUTO);
    kz_pool *pool = NULL;
    if (!k || threads < 1 || mb < 1 || max_b < 1 || max_b > 64 || only_b > 64 ||
        kz_pool_new(threads, &pool) != KZ_OK) {
        fprintf(stderr, "bench_batch: bad sub-level, thread count or size\n");
        return 2;
    }
    if (only_b) {
        max_b = only_b;
    }
    const int probed = dram <= 0;
    dram = probed ? kz_machine_read_gbs(threads) : dram;
    printf("sub-level %s, %d threads, %zu MB per format, DRAM read %.1f GB/s (%s)\n", k->name,
           threads, mb, dram, probed ? "kztts bench's probe" : "--dram");
    printf("%-5s %3s %-6s %9s %9s %10s %8s %8s\n", "fmt", "B", "method", "ms/pass", "GB/s",
           "rows/s", "% floor", "x serial");
    kz_exec e = {.k = k, .pool = pool};
    float *x = malloc(max_b * 3072 * sizeof(float));
    float *y = malloc(max_b * 3072 * sizeof(float));
    uint64_t s = 7;
    for (size_t i = 0; i < max_b * 3072; i++) {
        x[i] = (float)(int32_t)next_u32(&s) * 0x1p-31f;
    }
    const int reps = quick ? 2 : 5;
    for (int f = 0; f < N_FORMATS; f++) {
        bench_set set = {0};
        if (make_set(&set, formats[f], mb) != 0) {
            fprintf(stderr, "bench_batch: out of memory\n");
            free_set(&set);
            continue;
        }
        pass(&set, &e, x, y, 1, 1); // page the weights in
        const double floor_ms = dram > 0 ? set.bytes / (dram * 1e6) : 0;
        for (size_t b = only_b ? only_b : 1; b <= max_b; b *= 2) {
            const double tb = best_pass(&set, &e, x, y, b, 0, reps);
            const double ts = b == 1 ? tb : best_pass(&set, &e, x, y, b, 1, quick ? 1 : 3);
            for (int serial = 0; serial <= (b > 1); serial++) {
                const double t = serial ? ts : tb;
                printf("%-5s %3zu %-6s %9.2f %9.1f %10.1f %7.0f%% %8.2f\n", format_names[f], b,
                       serial ? "serial" : "batch", t, set.bytes / (t * 1e6), 1e3 * (double)b / t,
                       floor_ms > 0 ? 100.0 * floor_ms / t : 0.0, serial ? 1.0 : ts / tb);
            }
        }
        free_set(&set);
    }
    free(x);
    free(y);
    kz_pool_free(pool);
    return 0;
}
