/*
 * threadpool.h - explicit worker pool owned by a session or a pipeline stage.
 *
 * kz_pool_run(pool, n_chunks, fn, arg) calls fn(arg, chunk, worker) once for
 * every chunk in [0, n_chunks), spread over the pool's threads; the calling
 * thread is worker 0 and takes chunks too. Chunks are handed out through an
 * atomic counter, so uneven cores balance. The call returns when every chunk
 * is done. Workers spin for a bounded moment after a run and then sleep on a
 * condition variable, so an idle pool burns no CPU. There is no process-wide
 * pool. One thread at a time may call kz_pool_run on a given pool.
 */
#ifndef KZ_THREADPOOL_H
#define KZ_THREADPOOL_H

#include <stddef.h>

#include "kztts.h"

typedef struct kz_pool kz_pool;

/* Work function: processes chunk `chunk`; `worker` in [0, n_threads) identifies
 * the thread (for per-thread scratch). */
typedef void (*kz_pool_fn)(void *arg, size_t chunk, int worker);

/* Creates a pool with n_threads threads including the caller (1 = no extra
 * threads). n_threads in [1, 256]. */
kz_status kz_pool_new(int n_threads, kz_pool **out);

/* Stops and joins the workers. Accepts NULL. */
void kz_pool_free(kz_pool *pool);

/* The default thread count: the online CPUs, at least 1 and at most 8 (beyond 8 the
 * memory-bound stages do not get faster). */
int kz_pool_default_threads(void);

/* Number of threads including the caller. */
int kz_pool_threads(const kz_pool *pool);

/* Runs fn over chunks [0, n_chunks) and waits. n_chunks == 0 returns at once.
 * With one thread or one chunk, fn runs inline on the caller. */
void kz_pool_run(kz_pool *pool, size_t n_chunks, kz_pool_fn fn, void *arg);

#endif
