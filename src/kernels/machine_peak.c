/*
 * machine_peak.c - DRAM read bandwidth and FMA peak of n threads (see machine_peak.h;
 * kztts.h's kz_experimental_machine_* for `kztts bench`).
 *
 * Read bandwidth: allocate 256 MB on 2 MB huge pages where the OS allows -> the pool's
 * threads touch it in 4 MB chunks (page faults in parallel) -> three timed passes in
 * which the threads claim 4 MB chunks and sum them as 64-bit integers -> 256 MB /
 * fastest pass. The first touch of memory a VM has never used can cost far more
 * than the passes; it is not timed.
 *
 * FMA peak: time one run of the loop on the calling thread to size a chunk at ~5 ms
 * -> three passes of 4 chunks per thread on the pool; each thread's rate is its FLOP
 * over its own CPU time (so other processes on a busy machine do not lower what the
 * cores can do), summed over the threads -> the best pass. A chunk is a set of
 * independent multiply-add chains on registers (12 or 16 chains, enough to cover FMA
 * latency x issue width on current cores), so nothing but the FMA units limits it.
 * Multiplying by 0.999999 and adding 1e-7 keeps the values normal and the chains from
 * being folded away. The read bandwidth is wall-clock instead: DRAM is shared, so
 * threads that did not overlap in time would add up to more than the machine has.
 *
 * The same passes measure the bf16 matrix peak of the codec's fast precision, with
 * `isa` naming the bf16 GEMM in use: "amx" (four tile accumulators, tdpbf16ps on
 * fixed tiles) or "avx512bf16" (16 vdpbf16ps chains).
 *
 * The x86 loops (AVX2 + FMA, AVX-512, AVX512_BF16, AMX) are compiled with target attributes,
 * as in bench/bench_kernels.c, so the rest of the library stays at the baseline ISA; they run
 * only at a level that the model's dispatch found the CPU supports. aarch64 uses NEON
 * intrinsics (baseline there). Other builds and the scalar level run a GCC vector-
 * extension loop of separate multiplies and adds (the tree builds with
 * -ffp-contract=off), which is what baseline code can reach.
 *
 * The passes run on the library's thread pool (runtime/threadpool.h), the kind of
 * threads the stages run on.
 *
 * Core-to-core round trip: a second thread returns each value the calling thread writes
 * to one shared cache line; the fastest of a few trials of many rounds, in ns a round.
 * It names where the OS placed the two threads (on a virtual machine, whether its vCPUs
 * share a cache), which moves the stages' rates without any change to the code.
 */
#define _GNU_SOURCE // madvise, MADV_HUGEPAGE and sched_getaffinity (hidden under plain POSIX)
#include "kernels/machine_peak.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "kernels/kernels.h"
#include "runtime/threadpool.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PEAK_X86 1
#include <immintrin.h>
#elif defined(__aarch64__)
#define PEAK_NEON 1
#include <arm_neon.h>
#endif

#define READ_BYTES ((size_t)256 << 20)
#define READ_CHUNK_BYTES ((size_t)4 << 20)
#define READ_CHUNKS (READ_BYTES / READ_CHUNK_BYTES)
#define HUGE_PAGE_BYTES ((size_t)2 << 20)
#define FMA_CHUNKS_PER_THREAD 4
#define FMA_CHUNK_MS 5.0
#define PASSES 3

static volatile uint64_t sink_u64;
static volatile float sink_f32;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* --- read bandwidth ---------------------------------------------------------- */

typedef struct read_job {
    uint64_t *data;
    uint64_t sums[READ_CHUNKS]; // one per chunk, so no two threads write one slot
} read_job;

static void touch_chunk(void *arg, size_t chunk, int worker) {
    read_job *j = arg;
    memset((char *)j->data + chunk * READ_CHUNK_BYTES, (int)(chunk & 0x7f) + 1, READ_CHUNK_BYTES);
}

// Four accumulators so the additions pipeline; the compiler vectorises the loop.
static void read_chunk(void *arg, size_t chunk, int worker) {
    read_job *j = arg;
    const uint64_t *p = j->data + chunk * (READ_CHUNK_BYTES / sizeof *p);
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i < READ_CHUNK_BYTES / sizeof *p; i += 4) {
        a += p[i];
        b += p[i + 1];
        c += p[i + 2];
        d += p[i + 3];
    }
    j->sums[chunk] = a + b + c + d;
}

double kz_machine_read_gbs(int n_threads) {
    kz_pool *pool;
    read_job *j = calloc(1, sizeof *j);
    if (!j || !(j->data = aligned_alloc(HUGE_PAGE_BYTES, READ_BYTES)) ||
        kz_pool_new(n_threads, &pool) != KZ_OK) {
        free(j ? j->data : NULL);
        free(j);
        return 0;
    }
#ifdef MADV_HUGEPAGE
    // Where transparent huge pages are on request only (the usual default), ask: 128
    // faults of 2 MB instead of 65536 of 4 KB, which a VM's first touch makes costly.
    (void)madvise(j->data, READ_BYTES, MADV_HUGEPAGE);
#endif
    kz_pool_run(pool, READ_CHUNKS, touch_chunk, j);
    double best_ms = 1e30;
    for (int pass = 0; pass < PASSES; pass++) {
        const double t0 = now_ms();
        kz_pool_run(pool, READ_CHUNKS, read_chunk, j);
        const double ms = now_ms() - t0;
        best_ms = ms < best_ms ? ms : best_ms;
    }
    uint64_t s = 0;
    for (size_t c = 0; c < READ_CHUNKS; c++) {
        s ^= j->sums[c];
    }
    sink_u64 = s;
    kz_pool_free(pool);
    free(j->data);
    free(j);
    return (double)READ_BYTES / (best_ms * 1e-3) * 1e-9;
}

/* --- FMA chains ---------------------------------------------------------------- */

/* Runs `iters` rounds over the chains; returns a value that depends on all of them. */
typedef float (*fma_loop)(long iters);

typedef float v4f __attribute__((vector_size(16)));

static float loop_portable(long iters) {
    enum { CHAINS = 12 };
    v4f acc[CHAINS];
    const v4f m = {0.999999f, 0.999999f, 0.999999f, 0.999999f};
    const v4f d = {1e-7f, 1e-7f, 1e-7f, 1e-7f};
    for (int c = 0; c < CHAINS; c++) {
        acc[c] = d * (float)c;
    }
    for (long it = 0; it < iters; it++) {
        for (int c = 0; c < CHAINS; c++) {
            acc[c] = acc[c] * m + d;
        }
    }
    float s = 0;
    for (int c = 0; c < CHAINS; c++) {
        s += acc[c][0];
    }
    return s;
}

#ifdef PEAK_X86
// 12 chains: 12 of the 16 ymm registers, two FMA pipes x 4-5 cycles of latency.
__attribute__((target("avx2,fma"))) static float loop_avx2(long iters) {
    enum { CHAINS = 12 };
    __m256 acc[CHAINS];
    const __m256 m = _mm256_set1_ps(0.999999f), d = _mm256_set1_ps(1e-7f);
    for (int c = 0; c < CHAINS; c++) {
        acc[c] = _mm256_set1_ps(1e-7f * (float)c);
    }
    for (long it = 0; it < iters; it++) {
        for (int c = 0; c < CHAINS; c++) {
            acc[c] = _mm256_fmadd_ps(acc[c], m, d);
        }
    }
    float out[8], s = 0;
    for (int c = 0; c < CHAINS; c++) {
        _mm256_storeu_ps(out, acc[c]);
        s += out[0];
    }
    return s;
}

__attribute__((target("avx512f"))) static float loop_avx512(long iters) {
    enum { CHAINS = 16 };
    __m512 acc[CHAINS];
    const __m512 m = _mm512_set1_ps(0.999999f), d = _mm512_set1_ps(1e-7f);
    for (int c = 0; c < CHAINS; c++) {
        acc[c] = _mm512_set1_ps(1e-7f * (float)c);
    }
    for (long it = 0; it < iters; it++) {
        for (int c = 0; c < CHAINS; c++) {
            acc[c] = _mm512_fmadd_ps(acc[c], m, d);
        }
    }
    float out[16], s = 0;
    for (int c = 0; c < CHAINS; c++) {
        _mm512_storeu_ps(out, acc[c]);
        s += out[0];
    }
    return s;
}

// bf16 dot products: 16 chains of vdpbf16ps (32 multiply-adds each) on fixed inputs.
__attribute__((target("avx512f,avx512bf16"))) static float loop_avx512_bf16(long iters) {
    enum { CHAINS = 16 };
    __m512 acc[CHAINS];
    const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(-1e-3f));
    const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.5f), _mm512_set1_ps(0.5f));
    for (int c = 0; c < CHAINS; c++) {
        acc[c] = _mm512_set1_ps(1e-7f * (float)c);
    }
    for (long it = 0; it < iters; it++) {
        for (int c = 0; c < CHAINS; c++) {
            acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
        }
    }
    float out[16], s = 0;
    for (int c = 0; c < CHAINS; c++) {
        _mm512_storeu_ps(out, acc[c]);
        s += out[0];
    }
    return s;
}

// AMX: four independent 16 x 16 fp32 accumulator tiles, each += A[16, 32 bf16] x
// B[16 pairs, 16 x 2] per round (16 x 16 x 32 multiply-adds). Only called after the
// library's dispatch obtained the tile permission (the model's bf16 GEMM is "amx").
__attribute__((target("amx-tile,amx-bf16"))) static float loop_amx_bf16(long iters) {
    static const uint8_t rows[8] = {16, 16, 16, 16, 16, 16, 16, 16};
    static const uint16_t colsb[8] = {64, 64, 64, 64, 64, 64, 64, 64};
    _Alignas(64) kz_amx_tile_config cfg;
    kz_amx_tile_config_set(&cfg, rows, colsb);
    _tile_loadconfig(&cfg);
    _Alignas(64) uint16_t ones[16][32];
    for (int r = 0; r < 16; r++) {
        for (int c = 0; c < 32; c++) {
            ones[r][c] = 0x3a83; // bf16 1e-3
        }
    }
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, ones, 64);
    _tile_loadd(5, ones, 64);
    _tile_loadd(6, ones, 64);
    _tile_loadd(7, ones, 64);
    for (long it = 0; it < iters; it++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _Alignas(64) float out[16][16];
    _tile_stored(0, out, 64);
    _tile_release();
    return out[0][0];
}
#endif

#ifdef PEAK_NEON
/* 16 chains: wide cores issue four 128-bit FMAs a cycle with 4 cycles of latency.
 * Named registers, not an array: GCC keeps a 16-vector array in memory on aarch64 and
 * stores it every round. acc + acc * m, because fmla overwrites its addend. */
#define NEON_STEP4(a, b, c, d)                                                               \
    a = vfmaq_f32(a, a, m);                                                                  \
    b = vfmaq_f32(b, b, m);                                                                  \
    c = vfmaq_f32(c, c, m);                                                                  \
    d = vfmaq_f32(d, d, m)

static float loop_neon(long iters) {
    const float32x4_t m = vdupq_n_f32(-1e-7f);
    float32x4_t a0 = vdupq_n_f32(1), a1 = vdupq_n_f32(2), a2 = vdupq_n_f32(3),
                a3 = vdupq_n_f32(4), b0 = a0, b1 = a1, b2 = a2, b3 = a3, c0 = a0, c1 = a1,
                c2 = a2, c3 = a3, d0 = a0, d1 = a1, d2 = a2, d3 = a3;
    for (long it = 0; it < iters; it++) {
        NEON_STEP4(a0, a1, a2, a3);
        NEON_STEP4(b0, b1, b2, b3);
        NEON_STEP4(c0, c1, c2, c3);
        NEON_STEP4(d0, d1, d2, d3);
    }
    const float32x4_t s = vaddq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)),
                                    vaddq_f32(vaddq_f32(b0, b1), vaddq_f32(b2, b3)));
    const float32x4_t t = vaddq_f32(vaddq_f32(vaddq_f32(c0, c1), vaddq_f32(c2, c3)),
                                    vaddq_f32(vaddq_f32(d0, d1), vaddq_f32(d2, d3)));
    return vgetq_lane_f32(vaddq_f32(s, t), 0);
}
#endif

typedef struct fma_kind {
    const char *name;
    fma_loop run;
    double flop_per_iter;
} fma_kind;

/* The loop called isa when this CPU runs the sub-level it needs, else the portable one
 * (a name from the public API must never execute an instruction the CPU lacks). */
static fma_kind fma_for(const char *isa) {
#ifdef PEAK_X86
    static const char *const needs[][2] = {{"avx512", "avx512"},
                                           {"avx2", "avx2"},
                                           {"amx", "avx512-amx"},
                                           {"avx512bf16", "avx512-bf16"}};
    for (size_t i = 0; i < sizeof needs / sizeof needs[0]; i++) {
        if (strcmp(isa, needs[i][0]) == 0 && !kz_kernels_named(needs[i][1])) {
            isa = "";
        }
    }
#endif
#ifdef PEAK_NEON
    if (strcmp(isa, "neon") == 0 && !kz_kernels_named("neon")) {
        isa = "";
    }
#endif
#ifdef PEAK_X86
    if (strcmp(isa, "avx512") == 0) {
        return (fma_kind){"avx512 fma", loop_avx512, 2.0 * 16 * 16};
    }
    if (strcmp(isa, "avx2") == 0) {
        return (fma_kind){"avx2 fma", loop_avx2, 2.0 * 8 * 12};
    }
    if (strcmp(isa, "amx") == 0) {
        return (fma_kind){"amx tdpbf16ps", loop_amx_bf16, 4 * 2.0 * 16 * 16 * 32};
    }
    if (strcmp(isa, "avx512bf16") == 0) {
        return (fma_kind){"avx512 vdpbf16ps", loop_avx512_bf16, 2.0 * 16 * 32};
    }
#endif
#ifdef PEAK_NEON
    if (strcmp(isa, "neon") == 0) {
        return (fma_kind){"neon fma", loop_neon, 2.0 * 4 * 16};
    }
#endif
    return (fma_kind){"portable mul+add", loop_portable, 2.0 * 4 * 12};
}

/* One pool thread's share of a pass. */
typedef struct fma_worker {
    double cpu_ms; // CPU time in its chunks
    long chunks;
    float sink;
} fma_worker;

typedef struct fma_job {
    fma_kind kind;
    long iters;      // per chunk
    fma_worker *w;   // [n_threads], indexed by the pool's worker id
} fma_job;

static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static void fma_chunk(void *arg, size_t chunk, int worker) {
    fma_job *j = arg;
    fma_worker *w = &j->w[worker];
    const double t0 = cpu_ms();
    w->sink += j->kind.run(j->iters);
    w->cpu_ms += cpu_ms() - t0;
    w->chunks++;
}

// Iterations for one chunk of ~FMA_CHUNK_MS, from a short run on this thread.
static long calibrate(fma_loop run) {
    const long probe = 100000;
    const double t0 = cpu_ms();
    sink_f32 = run(probe);
    const double ms = cpu_ms() - t0;
    const double iters = (double)probe * FMA_CHUNK_MS / (ms > 1e-3 ? ms : 1e-3);
    return iters < 1000 ? 1000 : iters > 1e9 ? 1000000000L : (long)iters;
}

// One pass: the sum over threads of each one's FLOP over its own CPU time.
static double fma_pass(kz_pool *pool, fma_job *j, int n_threads) {
    for (int t = 0; t < n_threads; t++) {
        j->w[t].cpu_ms = 0;
        j->w[t].chunks = 0;
    }
    kz_pool_run(pool, (size_t)n_threads * FMA_CHUNKS_PER_THREAD, fma_chunk, j);
    double gflops = 0;
    for (int t = 0; t < n_threads; t++) {
        const double flop = j->kind.flop_per_iter * (double)j->iters * (double)j->w[t].chunks;
        gflops += j->w[t].chunks ? flop / (j->w[t].cpu_ms * 1e-3) * 1e-9 : 0;
    }
    return gflops;
}

double kz_machine_fma_gflops(const char *isa, int n_threads, const char **loop) {
    fma_job j = {.kind = fma_for(isa ? isa : "")};
    *loop = j.kind.name;
    kz_pool *pool;
    if (!(j.w = calloc((size_t)n_threads, sizeof *j.w))) {
        return 0;
    }
    if (kz_pool_new(n_threads, &pool) != KZ_OK) {
        free(j.w);
        return 0;
    }
    j.iters = calibrate(j.kind.run);
    double best = 0;
    for (int pass = 0; pass < PASSES; pass++) {
        const double g = fma_pass(pool, &j, n_threads);
        best = g > best ? g : best;
    }
    sink_f32 = j.w[0].sink;
    kz_pool_free(pool);
    free(j.w);
    return best;
}

/* --- core-to-core round trip --------------------------------------------------- */

enum { RT_ROUNDS = 256, RT_TRIALS = 40 }; // short trials: one may fit between preemptions
#define RT_BUDGET_MS 300.0 // a preempted partner ends the probe early, not the bench

typedef struct rt_line {
    _Alignas(64) _Atomic uint64_t ball; // odd: served by the caller; even: returned
    _Alignas(64) _Atomic int stop;
} rt_line;

static void *rt_partner(void *arg) {
    rt_line *l = arg;
    while (!atomic_load_explicit(&l->stop, memory_order_relaxed)) {
        const uint64_t b = atomic_load_explicit(&l->ball, memory_order_acquire);
        if (b & 1) {
            atomic_store_explicit(&l->ball, b + 1, memory_order_release);
        }
    }
    return NULL;
}

/* One trial: RT_ROUNDS serves and returns; its ms, or a negative value past the deadline. */
static double rt_trial(rt_line *l, uint64_t *ball, double deadline_ms) {
    const double t0 = now_ms();
    for (int r = 0; r < RT_ROUNDS; r++) {
        const uint64_t serve = *ball + 1; // odd
        atomic_store_explicit(&l->ball, serve, memory_order_release);
        for (unsigned spins = 1;
             atomic_load_explicit(&l->ball, memory_order_acquire) != serve + 1; spins++) {
            if (spins % 4096 == 0 && now_ms() > deadline_ms) {
                return -1;
            }
        }
        *ball = serve + 1;
    }
    return now_ms() - t0;
}

double kz_machine_core_rt_ns(void) {
    cpu_set_t cpus;
    if (sched_getaffinity(0, sizeof cpus, &cpus) != 0 || CPU_COUNT(&cpus) < 2) {
        return 0; // two threads on one CPU would measure the scheduler
    }
    rt_line *l = aligned_alloc(64, sizeof *l);
    pthread_t partner;
    if (!l) {
        return 0;
    }
    atomic_init(&l->ball, 0);
    atomic_init(&l->stop, 0);
    if (pthread_create(&partner, NULL, rt_partner, l) != 0) {
        free(l);
        return 0;
    }
    const double deadline = now_ms() + RT_BUDGET_MS;
    double best_ms = 0;
    uint64_t ball = 0;
    for (int t = 0; t < RT_TRIALS; t++) {
        const double ms = rt_trial(l, &ball, deadline);
        if (ms < 0) {
            break;
        }
        best_ms = best_ms == 0 || ms < best_ms ? ms : best_ms;
    }
    atomic_store_explicit(&l->stop, 1, memory_order_relaxed);
    pthread_join(partner, NULL);
    free(l);
    return best_ms * 1e6 / RT_ROUNDS;
}
