/*
 * threadpool.c - the explicit worker pool behind kz_pool_run (STYLE.md rule 13).
 *
 * One kz_pool_run(pool, n_chunks, fn, arg) with n_threads > 1 and n_chunks > 1:
 *
 *   caller (worker 0)                          workers 1 .. n_threads-1
 *   -----------------                          ------------------------
 *   close the previous job (gen -> even)
 *   wait until active == 0
 *   write fn, arg, n_chunks; zero next_chunk
 *     and done
 *   publish the job (gen -> odd)  ------------> spinning worker sees gen change, or a
 *   if sleepers > 0: signal the condvar ------> sleeping worker wakes on the condvar
 *                                               active++, re-check gen, read fn/arg/n_chunks
 *   claim: c = next_chunk++  <--- shared --->  claim: c = next_chunk++
 *   fn(arg, c, 0) until c >= n_chunks          fn(arg, c, id); done++ per chunk
 *   wait until done == chunks left to others    active--
 *   return                                     spin ~100 us watching gen, then sleep
 *
 * The hot path (workers still spinning) takes no lock and makes no system call: the caller
 * touches the condvar only when the sleeper count says someone is asleep.
 *
 * Memory ordering:
 * - Publish: the plain job fields and the zeroed counters are written before the seq_cst
 *   (hence release) store of the odd generation; a worker reads them only after its seq_cst
 *   (hence acquire) load returned that generation.
 * - Completion: each worker adds to `done` with release after its chunk; the caller's acquire
 *   load of the final count makes every chunk's writes visible when kz_pool_run returns.
 * - Job reuse (the trap): a slow worker may observe job g just as the caller starts job g+1
 *   and would then read fn/arg/n_chunks while they are being rewritten. So a worker announces
 *   itself (active++) and then re-checks gen, while the caller first closes the old job (gen ->
 *   even) and then waits for active == 0. Both sides use seq_cst, so at least one sees the
 *   other (Dekker): either the worker sees the closed job and backs out, or the caller waits
 *   for its release decrement. The wait sits at the start of the next run, where it is almost
 *   always already satisfied, not at the end of this one.
 * - Sleeping: a worker increments `sleepers` under the mutex and then re-reads gen; the caller
 *   stores gen and then reads `sleepers` (all seq_cst). Either the worker sees the new job or
 *   the caller sees the sleeper and signals under the same mutex, so no wake-up is lost.
 * - Both handshakes put a seq_cst fence between their store and their load (store_load_fence).
 *   C11 orders seq_cst operations alone; emulators need not (qemu-user on an x86 host lets an
 *   aarch64 store-release pass a later load-acquire: a lost wake-up, after which every split
 *   job's caller would take the sleeping worker's range over only when it seemed stalled),
 *   but they do translate a full barrier.
 *
 * Workers are an optimisation, never a requirement: the caller claims chunks too, so a job
 * completes even if no worker joins it (e.g. all preempted), and fn must compute each output
 * the same way whichever thread runs its chunk. fn must not call kz_pool_run on the same pool.
 *
 * Split mode (kz_pool_set_split): each thread (the caller and every started worker) owns a
 * contiguous range of the job's chunks, one word per range packing its front (the next
 * chunk, taken by the owner with a fetch-add) and its back (the end, lowered by a
 * compare-exchange when another thread takes the last chunk): each chunk is taken exactly
 * once, from the front or the back. A thread done with its own range watches the others' and
 * takes chunks from the back of one whose owner has taken none for a while (STEAL_AFTER_NS
 * and STALL_CHUNKS: preempted, or not awake yet), so a stalled thread delays a split job by
 * that long rather than by its whole time off the core, and the job completes even if a
 * worker never joins it. Owners that keep pace keep their whole range (the mode's point: a
 * chunk on the same thread in every pass).
 */
#include "runtime/threadpool.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/error.h"

#define MAX_THREADS 256
#define CACHE_LINE 64

// How long an idle worker watches for the next job before it sleeps. The code predictor issues
// a job every ~80 us during a frame, so this keeps workers awake within a frame while an idle
// pool goes quiet almost at once.
#define SPIN_NS 100000
// Spin iterations between clock reads while a worker spins (a read costs ~20 ns via the vDSO).
#define SPINS_PER_CLOCK_READ 32
// Caller wait iterations between sched_yield calls, so a worker preempted onto the caller's
// core (more threads than cores) gets to finish its chunk.
#define SPINS_PER_YIELD 4096
// Split mode: how long a range's owner may take no chunk before the idle threads take its
// chunks from the back: at least this (far above a wake-up, far below a preempted thread's
// time off the core, milliseconds), and at least STALL_CHUNKS of the idle thread's own mean
// chunk time.
#define STEAL_AFTER_NS 50000
#define STALL_CHUNKS 4
// Split mode: how often an idle thread reads the other ranges; each read pulls the owner's
// line away from it, so not on every spin.
#define STEAL_POLL_NS 5000

typedef struct worker {
    kz_pool *pool;
    int id; // in [1, n_threads)
} worker;

// One thread's range of a split job: front (the next chunk, low 32 bits) and back (one past
// the last chunk not yet taken, high 32 bits); empty when front >= back. Its own cache line,
// written by its owner on every chunk.
typedef struct range_slot {
    _Alignas(CACHE_LINE) atomic_uint_least64_t word;
} range_slot;

struct kz_pool {
    // The current job: written by the caller only while no worker is inside a job.
    kz_pool_fn fn;
    void *arg;
    size_t n_chunks;
    bool job_split; // the job's chunks are dealt in ranges (split at its start), not claimed

    int n_threads;
    int n_started;      // worker threads actually created
    pthread_t *threads; // [n_threads - 1]
    worker *workers;    // [n_threads - 1]
    range_slot *ranges; // [n_threads]: split jobs' ranges, by thread id
    pthread_mutex_t mutex;
    pthread_cond_t wake;

    bool split; // kz_pool_set_split, the caller's: the mode of the jobs it publishes

    // Read by every spinning worker, written twice per run: its own cache line.
    _Alignas(CACHE_LINE) atomic_uint gen; // odd: a job is open; even: closed
    atomic_int sleepers;                  // workers blocked (or about to block) on `wake`
    atomic_bool stop;
    // Hammered while a job runs; separate lines so claims and completions do not collide.
    _Alignas(CACHE_LINE) atomic_size_t next_chunk;
    _Alignas(CACHE_LINE) atomic_size_t done; // chunks completed by workers 1..n-1
    _Alignas(CACHE_LINE) atomic_int active;  // workers inside the current or previous job
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#else
    sched_yield();
#endif
}

// One step of a caller-side busy wait.
static inline void caller_relax(unsigned *spins) {
    if (++*spins % SPINS_PER_YIELD == 0) {
        sched_yield();
    } else {
        cpu_relax();
    }
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// Orders a handshake's store before its load (header: memory ordering). x86's seq_cst
// store is already a full barrier, so only other targets (aarch64, run under qemu in CI)
// pay for it.
static inline void store_load_fence(void) {
#if !defined(__x86_64__) && !defined(__i386__)
    atomic_thread_fence(memory_order_seq_cst);
#endif
}

// True if generation `gen` is an open job this worker has not joined yet.
static inline bool job_is_new(unsigned gen, unsigned seen) {
    return (gen & 1u) != 0 && gen != seen;
}

// Blocks on the condvar until a new job is open or the pool stops.
static void sleep_until_job(kz_pool *pool, unsigned seen) {
    pthread_mutex_lock(&pool->mutex);
    atomic_fetch_add_explicit(&pool->sleepers, 1, memory_order_seq_cst);
    store_load_fence();
    while (!atomic_load_explicit(&pool->stop, memory_order_seq_cst) &&
           !job_is_new(atomic_load_explicit(&pool->gen, memory_order_seq_cst), seen)) {
        pthread_cond_wait(&pool->wake, &pool->mutex);
    }
    atomic_fetch_sub_explicit(&pool->sleepers, 1, memory_order_relaxed);
    pthread_mutex_unlock(&pool->mutex);
}

// Spins for up to SPIN_NS, then sleeps, until a job other than `seen` is open. Returns its
// generation, or 0 (never an open generation) when the pool stops.
static unsigned wait_for_job(kz_pool *pool, unsigned seen) {
    int64_t deadline = 0;
    for (unsigned spins = 0;; spins++) {
        if (atomic_load_explicit(&pool->stop, memory_order_acquire)) {
            return 0;
        }
        unsigned gen = atomic_load_explicit(&pool->gen, memory_order_acquire);
        if (job_is_new(gen, seen)) {
            return gen;
        }
        if (spins % SPINS_PER_CLOCK_READ == 0) {
            int64_t t = now_ns();
            if (deadline == 0) {
                deadline = t + SPIN_NS;
            } else if (t >= deadline) {
                sleep_until_job(pool, seen);
                deadline = 0;
                continue;
            }
        }
        cpu_relax();
    }
}

// Worker id's range of n_chunks in split mode: the threads that exist (the caller and the
// started workers, ids 0..n_started) in id order.
static size_t range_start(const kz_pool *pool, size_t n_chunks, int id) {
    return (size_t)id * n_chunks / ((size_t)pool->n_started + 1);
}

static uint64_t range_word(size_t front, size_t back) {
    return (uint64_t)back << 32 | (uint64_t)front;
}

static size_t range_front(uint64_t word) {
    return (size_t)(word & 0xffffffffu);
}

static size_t range_back(uint64_t word) {
    return (size_t)(word >> 32);
}

// Deals a split job's ranges; before its publication, which orders these stores for the
// threads that read them.
static void deal_ranges(kz_pool *pool, size_t n_chunks) {
    for (int id = 0; id <= pool->n_started; id++) {
        const uint64_t w =
            range_word(range_start(pool, n_chunks, id), range_start(pool, n_chunks, id + 1));
        atomic_store_explicit(&pool->ranges[id].word, w, memory_order_relaxed);
    }
}

// The owner's next chunk of its range, or SIZE_MAX when none is left. The front may pass the
// back by one (this call's failed take); the range then reads as empty.
static size_t take_front(range_slot *r) {
    const uint64_t w = atomic_fetch_add_explicit(&r->word, 1, memory_order_relaxed);
    return range_front(w) < range_back(w) ? range_front(w) : SIZE_MAX;
}

// The last chunk of another thread's range, or SIZE_MAX when none is left.
static size_t take_back(range_slot *r) {
    uint64_t w = atomic_load_explicit(&r->word, memory_order_relaxed);
    while (range_front(w) < range_back(w)) {
        const uint64_t less = range_word(range_front(w), range_back(w) - 1);
        if (atomic_compare_exchange_weak_explicit(&r->word, &w, less, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            return range_back(w) - 1;
        }
    }
    return SIZE_MAX;
}

// A worker's completed chunk, for the caller's count (the caller counts its own).
static void chunk_done(kz_pool *pool, int id) {
    if (id != 0) {
        atomic_fetch_add_explicit(&pool->done, 1, memory_order_release);
    }
}

// Watches the other ranges of a split job until none has a chunk left, taking chunks from
// the back of any whose owner has taken none for `patience` ns. Returns the chunks it ran.
static size_t help_stalled(kz_pool *pool, kz_pool_fn fn, void *arg, int id, int64_t patience) {
    size_t ran = 0, seen[MAX_THREADS];
    int64_t since[MAX_THREADS];
    for (int j = 0; j <= pool->n_started; j++) {
        seen[j] = SIZE_MAX;
    }
    unsigned spins = 0;
    for (int64_t next_poll = 0;; caller_relax(&spins)) {
        const int64_t now = now_ns();
        if (now < next_poll) {
            continue;
        }
        next_poll = now + STEAL_POLL_NS;
        bool left = false;
        for (int j = 0; j <= pool->n_started; j++) {
            const uint64_t w = atomic_load_explicit(&pool->ranges[j].word, memory_order_relaxed);
            if (j == id || range_front(w) >= range_back(w)) {
                continue;
            }
            left = true;
            if (range_front(w) != seen[j]) {
                seen[j] = range_front(w);
                since[j] = now;
                continue;
            }
            const size_t c = now - since[j] >= patience ? take_back(&pool->ranges[j]) : SIZE_MAX;
            if (c != SIZE_MAX) {
                fn(arg, c, id);
                chunk_done(pool, id);
                ran++;
                next_poll = 0; // the owner is still stalled: look again at once
            }
        }
        if (!left) {
            return ran;
        }
    }
}

// Runs thread id's own range of a split job, then helps stalled owners: patience is
// STEAL_AFTER_NS, or STALL_CHUNKS of this thread's mean chunk time when that is longer (the
// chunks are alike, so an owner that long on one is off its core, not slow). Returns the
// chunks it ran.
static size_t run_split(kz_pool *pool, kz_pool_fn fn, void *arg, int id) {
    const int64_t t0 = now_ns();
    size_t ran = 0;
    for (size_t c; (c = take_front(&pool->ranges[id])) != SIZE_MAX; ran++) {
        fn(arg, c, id);
        chunk_done(pool, id);
    }
    const int64_t per_chunk = ran ? (now_ns() - t0) / (int64_t)ran : 0;
    const int64_t patience =
        STALL_CHUNKS * per_chunk > STEAL_AFTER_NS ? STALL_CHUNKS * per_chunk : STEAL_AFTER_NS;
    return ran + help_stalled(pool, fn, arg, id, patience);
}

// Runs chunks of job `gen` on worker `id`: its range in split mode, else claimed one by one
// until none are left.
static void join_job(kz_pool *pool, unsigned gen, int id) {
    atomic_fetch_add_explicit(&pool->active, 1, memory_order_seq_cst);
    store_load_fence();
    if (atomic_load_explicit(&pool->gen, memory_order_seq_cst) == gen) {
        kz_pool_fn fn = pool->fn;
        void *arg = pool->arg;
        size_t n_chunks = pool->n_chunks;
        const bool split = pool->job_split;
        if (split) {
            run_split(pool, fn, arg, id);
        }
        while (!split) {
            size_t chunk = atomic_fetch_add_explicit(&pool->next_chunk, 1, memory_order_relaxed);
            if (chunk >= n_chunks) {
                break;
            }
            fn(arg, chunk, id);
            chunk_done(pool, id);
        }
    }
    atomic_fetch_sub_explicit(&pool->active, 1, memory_order_release);
}

static void *worker_main(void *p) {
    const worker *self = p;
    kz_pool *pool = self->pool;
    unsigned seen = 0;
    for (;;) {
        unsigned gen = wait_for_job(pool, seen);
        if (gen == 0) {
            return NULL;
        }
        join_job(pool, gen, self->id);
        seen = gen;
    }
}

// Wakes up to `wanted` sleeping workers (more would find nothing to claim).
static void wake_sleepers(kz_pool *pool, size_t wanted) {
    pthread_mutex_lock(&pool->mutex);
    int sleepers = atomic_load_explicit(&pool->sleepers, memory_order_relaxed);
    if (wanted >= (size_t)sleepers) {
        pthread_cond_broadcast(&pool->wake);
    } else {
        for (size_t i = 0; i < wanted; i++) {
            pthread_cond_signal(&pool->wake);
        }
    }
    pthread_mutex_unlock(&pool->mutex);
}

// Tells the workers to exit, wakes the sleepers and joins every started thread.
static void stop_workers(kz_pool *pool) {
    pthread_mutex_lock(&pool->mutex);
    atomic_store_explicit(&pool->stop, true, memory_order_seq_cst);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mutex);
    for (int i = 0; i < pool->n_started; i++) {
        pthread_join(pool->threads[i], NULL);
    }
    pool->n_started = 0;
}

kz_status kz_pool_new(int n_threads, kz_pool **out) {
    if (out == NULL) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_pool_new: out is NULL");
    }
    *out = NULL;
    if (n_threads < 1 || n_threads > MAX_THREADS) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_pool_new: n_threads is %d, must be in [1, %d]", n_threads,
                            MAX_THREADS);
    }
    // sizeof is a multiple of CACHE_LINE because of the _Alignas members.
    kz_pool *pool = aligned_alloc(CACHE_LINE, sizeof(kz_pool));
    if (pool == NULL) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "kz_pool_new: cannot allocate the pool");
    }
    *pool = (kz_pool){.n_threads = n_threads};
    atomic_init(&pool->gen, 0);
    atomic_init(&pool->sleepers, 0);
    atomic_init(&pool->stop, false);
    atomic_init(&pool->next_chunk, 0);
    atomic_init(&pool->done, 0);
    atomic_init(&pool->active, 0);
    if (pthread_mutex_init(&pool->mutex, NULL) != 0) {
        free(pool);
        return kz_error_set(KZ_STATUS_INTERNAL, "kz_pool_new: pthread_mutex_init failed");
    }
    if (pthread_cond_init(&pool->wake, NULL) != 0) {
        pthread_mutex_destroy(&pool->mutex);
        free(pool);
        return kz_error_set(KZ_STATUS_INTERNAL, "kz_pool_new: pthread_cond_init failed");
    }
    if (n_threads > 1) {
        pool->threads = malloc((size_t)(n_threads - 1) * sizeof(pthread_t));
        pool->workers = malloc((size_t)(n_threads - 1) * sizeof(worker));
        pool->ranges = aligned_alloc(CACHE_LINE, (size_t)n_threads * sizeof(range_slot));
        if (pool->threads == NULL || pool->workers == NULL || pool->ranges == NULL) {
            kz_pool_free(pool);
            return kz_error_set(KZ_STATUS_OUT_OF_MEMORY,
                                "kz_pool_new: cannot allocate %d worker records", n_threads - 1);
        }
        for (int i = 0; i < n_threads - 1; i++) {
            pool->workers[i] = (worker){.pool = pool, .id = i + 1};
            int err = pthread_create(&pool->threads[i], NULL, worker_main, &pool->workers[i]);
            if (err != 0) { // EAGAIN: out of memory for its stack, or of threads
                kz_pool_free(pool);
                return kz_error_set(err == EAGAIN ? KZ_STATUS_OUT_OF_MEMORY : KZ_STATUS_INTERNAL,
                                    "cannot start worker thread %d of %d: %s", i + 1, n_threads - 1,
                                    strerror(err));
            }
            pool->n_started++;
        }
    }
    *out = pool;
    return KZ_OK;
}

void kz_pool_free(kz_pool *pool) {
    if (pool == NULL) {
        return;
    }
    stop_workers(pool);
    pthread_cond_destroy(&pool->wake);
    pthread_mutex_destroy(&pool->mutex);
    free(pool->threads);
    free(pool->workers);
    free(pool->ranges);
    free(pool);
}

int kz_pool_default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 8 ? 8 : (int)n;
}

int kz_pool_threads(const kz_pool *pool) {
    KZ_ASSERT(pool != NULL);
    return pool->n_threads;
}

void kz_pool_run(kz_pool *pool, size_t n_chunks, kz_pool_fn fn, void *arg) {
    KZ_ASSERT(pool != NULL && fn != NULL);
    KZ_ASSERT(!pool->split || n_chunks < UINT32_MAX); // a range_slot's halves
    if (n_chunks == 0) {
        return;
    }
    if (pool->n_threads == 1 || n_chunks == 1) {
        for (size_t chunk = 0; chunk < n_chunks; chunk++) {
            fn(arg, chunk, 0);
        }
        return;
    }

    // Close the previous job and wait until no worker is inside it (header: job reuse).
    // Only the caller writes gen, so a relaxed load reads our own last store.
    unsigned spins = 0;
    unsigned gen = atomic_load_explicit(&pool->gen, memory_order_relaxed);
    if (gen & 1u) {
        gen++;
        atomic_store_explicit(&pool->gen, gen, memory_order_seq_cst);
        store_load_fence();
    }
    while (atomic_load_explicit(&pool->active, memory_order_seq_cst) != 0) {
        caller_relax(&spins);
    }

    // Publish the new job; wake sleepers only if there are any.
    pool->fn = fn;
    pool->arg = arg;
    pool->n_chunks = n_chunks;
    const bool split = pool->split;
    pool->job_split = split;
    if (split) {
        deal_ranges(pool, n_chunks);
    }
    atomic_store_explicit(&pool->next_chunk, 0, memory_order_relaxed);
    atomic_store_explicit(&pool->done, 0, memory_order_relaxed);
    gen++; // odd, so never 0 (wait_for_job's "stop") even after wrap-around
    atomic_store_explicit(&pool->gen, gen, memory_order_seq_cst);
    store_load_fence();
    if (atomic_load_explicit(&pool->sleepers, memory_order_seq_cst) > 0) {
        // Split mode: every started worker holds a range, so all of them should come.
        wake_sleepers(pool, split ? (size_t)pool->n_started : n_chunks - 1);
    }

    // Work as worker 0 (its range, or claims), then wait for the other threads' chunks.
    size_t n_mine = split ? run_split(pool, fn, arg, 0) : 0;
    while (!split) {
        size_t chunk = atomic_fetch_add_explicit(&pool->next_chunk, 1, memory_order_relaxed);
        if (chunk >= n_chunks) {
            break;
        }
        fn(arg, chunk, 0);
        n_mine++;
    }
    while (atomic_load_explicit(&pool->done, memory_order_acquire) != n_chunks - n_mine) {
        caller_relax(&spins);
    }
}

void kz_pool_set_split(kz_pool *pool, bool split) {
    KZ_ASSERT(pool != NULL);
    pool->split = split;
}

bool kz_pool_split(const kz_pool *pool) {
    KZ_ASSERT(pool != NULL);
    return pool->split;
}
