/*
 * bench_pool.c - dispatch latency of kz_pool_run.
 *
 * Times 100,000 back-to-back runs of an empty work function (so only the pool's own cost is
 * measured: publish, claim, completion wait) and prints the average per run, for a pool of 2
 * threads with 64 chunks, 2 threads with 2 chunks, and 1 thread (inline) with 64 chunks. The
 * code predictor issues ~1000 small jobs per 80 ms frame, so this latency times 1000 is the
 * per-frame threading overhead. Usage: bench_pool [n_runs].
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "runtime/threadpool.h"

static void empty_chunk(void *arg, size_t chunk, int worker) {
    (void)arg;
    (void)chunk;
    (void)worker;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int bench(int n_threads, size_t n_chunks, long n_runs) {
    kz_pool *pool = NULL;
    if (kz_pool_new(n_threads, &pool) != KZ_OK) {
        fprintf(stderr, "bench_pool: cannot create a pool of %d threads\n", n_threads);
        return 1;
    }
    for (long i = 0; i < n_runs / 10; i++) { // warm up: workers awake, caches hot
        kz_pool_run(pool, n_chunks, empty_chunk, NULL);
    }
    double t0 = now_s();
    for (long i = 0; i < n_runs; i++) {
        kz_pool_run(pool, n_chunks, empty_chunk, NULL);
    }
    double us = (now_s() - t0) * 1e6 / (double)n_runs;
    printf("threads %d  chunks %3zu  runs %ld  %.3f us per run\n", n_threads, n_chunks, n_runs, us);
    kz_pool_free(pool);
    return 0;
}

int main(int argc, char **argv) {
    long n_runs = argc > 1 ? atol(argv[1]) : 100000;
    if (n_runs < 1) {
        fprintf(stderr, "usage: bench_pool [n_runs]\n");
        return 2;
    }
    int failed = 0;
    failed |= bench(2, 64, n_runs);
    failed |= bench(2, 2, n_runs);
    failed |= bench(1, 64, n_runs);
    return failed;
}
