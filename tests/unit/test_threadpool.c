/*
 * test_threadpool.c - contract of the worker pool (src/runtime/threadpool.c).
 *
 * Checks, for many thread and chunk counts: every chunk runs exactly once, worker ids are in
 * range, plain writes made in chunks are visible to the caller on return, one thread or one
 * chunk runs inline on the caller; in split mode each thread ran a front part of its own
 * contiguous range (others take only from a range's back).
 * Then: 10,000 back-to-back tiny runs (some after the workers fell asleep, some in split
 * mode) all complete; in split mode a stalled thread's range is finished by the others;
 * sleeping workers are really woken (a rendezvous that needs every
 * thread at once); an idle pool uses almost no CPU; bad arguments return a status and message;
 * the default thread count is the online CPUs clamped to [1, 8].
 * No assertion depends on timing except the generous idle-CPU bound; waits are bounded by
 * counting.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "runtime/error.h"
#include "runtime/threadpool.h"
#include "test.h"

#define MAX_CHUNKS 1000

typedef struct coverage_job {
    atomic_int runs[MAX_CHUNKS]; // how often each chunk ran
    size_t value[MAX_CHUNKS];    // plain writes: must be visible to the caller afterwards
    atomic_int bad_worker;       // calls with a worker id outside [0, n_threads)
    int worker_of[MAX_CHUNKS];   // the thread that ran each chunk
    int n_threads;
} coverage_job;

static void coverage_chunk(void *arg, size_t chunk, int worker) {
    coverage_job *job = arg;
    atomic_fetch_add_explicit(&job->runs[chunk], 1, memory_order_relaxed);
    job->value[chunk] = chunk * 3 + 1;
    job->worker_of[chunk] = worker;
    if (worker < 0 || worker >= job->n_threads) {
        atomic_fetch_add_explicit(&job->bad_worker, 1, memory_order_relaxed);
    }
}

static void test_every_chunk_once(void) {
    static const int threads[] = {1, 2, 3, 4, 8, 17};
    static const size_t chunks[] = {0, 1, 2, 3, 5, 16, 64, 257, MAX_CHUNKS};
    static coverage_job job;
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        kz_pool *pool = NULL;
        CHECK_EQ_INT(kz_pool_new(threads[t], &pool), KZ_OK);
        if (pool == NULL) {
            continue;
        }
        CHECK_EQ_INT(kz_pool_threads(pool), threads[t]);
        for (size_t c = 0; c < 2 * sizeof chunks / sizeof chunks[0]; c++) {
            const bool split = c % 2;
            kz_pool_set_split(pool, split);
            CHECK(kz_pool_split(pool) == split);
            for (int rep = 0; rep < 3; rep++) {
                size_t n_chunks = chunks[c / 2];
                for (size_t i = 0; i < MAX_CHUNKS; i++) {
                    atomic_init(&job.runs[i], 0);
                    job.value[i] = 0;
                }
                atomic_init(&job.bad_worker, 0);
                job.n_threads = threads[t];
                kz_pool_run(pool, n_chunks, coverage_chunk, &job);
                int wrong_runs = 0;
                int wrong_values = 0;
                for (size_t i = 0; i < MAX_CHUNKS; i++) {
                    int expect = i < n_chunks ? 1 : 0;
                    wrong_runs += atomic_load(&job.runs[i]) != expect;
                    wrong_values += job.value[i] != (i < n_chunks ? i * 3 + 1 : 0);
                }
                CHECK_MSG(wrong_runs == 0, "threads %d chunks %zu: %d chunks ran != once",
                          threads[t], n_chunks, wrong_runs);
                CHECK_MSG(wrong_values == 0, "threads %d chunks %zu: %d results not visible",
                          threads[t], n_chunks, wrong_values);
                CHECK_EQ_INT(atomic_load(&job.bad_worker), 0);
                // Split mode: thread w ran a front part of the w-th contiguous range, the
                // others (who took chunks from its back) the rest; inline runs: the caller.
                int wrong_owner = 0;
                const size_t n_t = (size_t)threads[t];
                for (size_t w = 0; split && n_t > 1 && n_chunks > 1 && w < n_t; w++) {
                    bool others = false;
                    for (size_t i = w * n_chunks / n_t; i < (w + 1) * n_chunks / n_t; i++) {
                        others |= (size_t)job.worker_of[i] != w;
                        wrong_owner += others && (size_t)job.worker_of[i] == w;
                    }
                }
                CHECK_MSG(wrong_owner == 0,
                          "threads %d chunks %zu: %d chunks of an owner "
                          "after another thread's",
                          threads[t], n_chunks, wrong_owner);
            }
        }
        kz_pool_free(pool);
    }
}

typedef struct inline_job {
    pthread_t caller;
    atomic_int off_caller; // chunks that ran on another thread or with worker != 0
    atomic_int calls;
} inline_job;

static void inline_chunk(void *arg, size_t chunk, int worker) {
    inline_job *job = arg;
    atomic_fetch_add(&job->calls, 1);
    if (!pthread_equal(pthread_self(), job->caller) || worker != 0) {
        atomic_fetch_add(&job->off_caller, 1);
    }
}

static void test_inline(void) {
    kz_pool *one = NULL;
    kz_pool *four = NULL;
    CHECK_EQ_INT(kz_pool_new(1, &one), KZ_OK);
    CHECK_EQ_INT(kz_pool_new(4, &four), KZ_OK);
    if (one == NULL || four == NULL) {
        kz_pool_free(one);
        kz_pool_free(four);
        return;
    }
    inline_job job = {.caller = pthread_self()};
    kz_pool_run(one, 100, inline_chunk, &job); // one thread: all inline
    for (int i = 0; i < 100; i++) {
        kz_pool_run(four, 1, inline_chunk, &job); // one chunk: inline
    }
    CHECK_EQ_INT(atomic_load(&job.calls), 200);
    CHECK_EQ_INT(atomic_load(&job.off_caller), 0);
    kz_pool_free(one);
    kz_pool_free(four);
}

static void count_chunk(void *arg, size_t chunk, int worker) {
    atomic_fetch_add_explicit((atomic_size_t *)arg, chunk + 1, memory_order_relaxed);
}

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* 10,000 runs per pool size with 2..9 chunks; every 97th run waits 300 us first so the
 * workers (spinning ~100 us) go to sleep and must be woken. A lost wake-up can only slow a run
 * down (the caller does the chunks itself); a deadlock would hang and hit the CTest timeout.
 * Two runs in five are in split mode, switched between runs (a worker late for a claimed
 * job must not run a range of it; fewer chunks than threads leave some ranges empty): the
 * running sum would show any chunk run twice or not at all. */
static void test_back_to_back(void) {
    static const int threads[] = {2, 3, 4};
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        kz_pool *pool = NULL;
        CHECK_EQ_INT(kz_pool_new(threads[t], &pool), KZ_OK);
        if (pool == NULL) {
            continue;
        }
        atomic_size_t sum;
        atomic_init(&sum, 0);
        size_t expect = 0;
        int completed = 0;
        for (int run = 0; run < 10000; run++) {
            size_t n_chunks = 2 + (size_t)run % 8;
            if (run % 97 == 0) {
                sleep_us(300);
            }
            kz_pool_set_split(pool, run % 5 < 2);
            kz_pool_run(pool, n_chunks, count_chunk, &sum);
            expect += n_chunks * (n_chunks + 1) / 2;
            completed += atomic_load_explicit(&sum, memory_order_relaxed) == expect;
        }
        CHECK_EQ_INT(completed, 10000);
        kz_pool_free(pool);
    }
}

#define STALL_CHUNKS 8

/* A split job with a stalled thread: the first chunk of one range waits (bounded: 10 s) until
 * the rest of that range has run, which only the other threads can do, by taking those chunks
 * from the range's back. */
typedef struct stall_job {
    size_t stall, end;     // the waiting chunk, and its range's end
    atomic_int after_done; // chunks in (stall, end) done
    atomic_int runs[STALL_CHUNKS];
    int worker_of[STALL_CHUNKS];
    atomic_int timed_out;
} stall_job;

static void stall_chunk(void *arg, size_t chunk, int worker) {
    stall_job *job = arg;
    job->worker_of[chunk] = worker;
    atomic_fetch_add(&job->runs[chunk], 1);
    const int rest = (int)(job->end - job->stall) - 1;
    if (chunk == job->stall) {
        for (int i = 0; i < 2000 && atomic_load(&job->after_done) < rest; i++) {
            sleep_us(5000);
        }
        atomic_store(&job->timed_out, atomic_load(&job->after_done) < rest);
    } else if (chunk > job->stall && chunk < job->end) {
        atomic_fetch_add(&job->after_done, 1);
    }
}

/* With 2 and 4 threads, the stall in the caller's range and in a worker's, some runs after
 * the workers fell asleep: the job completes without the wait timing out, every chunk once,
 * the stalled range's later chunks on other threads. */
static void test_split_stalled_thread(void) {
    static const int threads[] = {2, 4};
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        kz_pool *pool = NULL;
        CHECK_EQ_INT(kz_pool_new(threads[t], &pool), KZ_OK);
        if (pool == NULL) {
            continue;
        }
        kz_pool_set_split(pool, true);
        const size_t per = STALL_CHUNKS / (size_t)threads[t];
        for (int rep = 0; rep < 8; rep++) {
            if (rep % 4 == 0) {
                sleep_us(5000); // workers asleep on the condvar
            }
            const size_t owner = (size_t)rep % (size_t)threads[t];
            static stall_job job;
            job = (stall_job){.stall = owner * per, .end = (owner + 1) * per};
            kz_pool_run(pool, STALL_CHUNKS, stall_chunk, &job);
            CHECK_MSG(!atomic_load(&job.timed_out), "threads %d owner %zu: range not taken over",
                      threads[t], owner);
            int wrong = 0;
            for (size_t i = 0; i < STALL_CHUNKS; i++) {
                wrong += atomic_load(&job.runs[i]) != 1;
                wrong += i > job.stall && i < job.end && (size_t)job.worker_of[i] == owner;
            }
            CHECK_MSG(wrong == 0, "threads %d owner %zu: %d chunks run wrongly", threads[t], owner,
                      wrong);
        }
        kz_pool_free(pool);
    }
}

typedef struct rendezvous_job {
    atomic_int arrived;
    atomic_int met;         // chunks that saw every thread arrive
    atomic_uint worker_ids; // bit per worker id seen
    int n_threads;
} rendezvous_job;

/* Each chunk waits, bounded by a count of yields, until all n_threads chunks have started: it
 * succeeds only if every thread runs a chunk at the same time. */
static void rendezvous_chunk(void *arg, size_t chunk, int worker) {
    rendezvous_job *job = arg;
    atomic_fetch_or(&job->worker_ids, 1u << worker);
    atomic_fetch_add(&job->arrived, 1);
    for (long i = 0; i < 20000000 && atomic_load(&job->arrived) < job->n_threads; i++) {
        sched_yield();
    }
    if (atomic_load(&job->arrived) == job->n_threads) {
        atomic_fetch_add(&job->met, 1);
    }
}

static void test_workers_wake(void) {
    static const int threads[] = {2, 4};
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        int n_threads = threads[t];
        kz_pool *pool = NULL;
        CHECK_EQ_INT(kz_pool_new(n_threads, &pool), KZ_OK);
        if (pool == NULL) {
            continue;
        }
        for (int rep = 0; rep < 20; rep++) {
            if (rep % 2 == 0) {
                sleep_us(5000); // workers are asleep on the condvar by now
            }
            rendezvous_job job = {.n_threads = n_threads};
            kz_pool_run(pool, (size_t)n_threads, rendezvous_chunk, &job);
            CHECK_MSG(atomic_load(&job.met) == n_threads, "threads %d rep %d: %d of %d met",
                      n_threads, rep, atomic_load(&job.met), n_threads);
            CHECK_EQ_INT(atomic_load(&job.worker_ids), (1u << n_threads) - 1);
        }
        kz_pool_free(pool);
    }
}

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_idle_cpu(void) {
    kz_pool *pool = NULL;
    CHECK_EQ_INT(kz_pool_new(4, &pool), KZ_OK);
    if (pool == NULL) {
        return;
    }
    atomic_size_t sum;
    atomic_init(&sum, 0);
    for (int run = 0; run < 100; run++) {
        kz_pool_run(pool, 64, count_chunk, &sum);
    }
    double cpu0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    double wall0 = clock_s(CLOCK_MONOTONIC);
    sleep_us(300000);
    double cpu_ms = (clock_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0) * 1e3;
    double wall_ms = (clock_s(CLOCK_MONOTONIC) - wall0) * 1e3;
    printf("idle pool of 4 threads: %.2f ms CPU over %.1f ms wall\n", cpu_ms, wall_ms);
    CHECK_MSG(cpu_ms < 100.0, "idle pool used %.1f ms CPU in %.1f ms", cpu_ms, wall_ms);
    kz_pool_free(pool);
}

static void test_bad_arguments(void) {
    static const int bad[] = {0, -1, 257};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kz_pool *pool = (kz_pool *)&pool; // must be reset to NULL
        kz_error_clear();
        CHECK_EQ_INT(kz_pool_new(bad[i], &pool), KZ_STATUS_INVALID_ARGUMENT);
        CHECK(pool == NULL);
        CHECK_STR_CONTAINS(kz_error_get(), "n_threads");
    }
    CHECK_EQ_INT(kz_pool_new(2, NULL), KZ_STATUS_INVALID_ARGUMENT);
    kz_pool *max = NULL;
    CHECK_EQ_INT(kz_pool_new(256, &max), KZ_OK);
    kz_pool_free(max);
    kz_pool_free(NULL);
}

/* The default count: the online CPUs, clamped to [1, 8]. */
static void test_default_threads(void) {
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    const int want = online < 1 ? 1 : online > 8 ? 8 : (int)online;
    CHECK_MSG(kz_pool_default_threads() == want, "default threads %d, want %d",
              kz_pool_default_threads(), want);
}

int main(void) {
    test_default_threads();
    test_bad_arguments();
    test_inline();
    test_every_chunk_once();
    test_back_to_back();
    test_split_stalled_thread();
    test_workers_wake();
    test_idle_cpu();
    return test_main_result("test_threadpool");
}
