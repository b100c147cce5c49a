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

#include <stdbool.h>
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

/* Split mode (off at creation): the runs that follow deal each job's chunks in contiguous
 * ranges, one per thread in id order (the caller the first), instead of claiming them one by
 * one, so that in jobs of the same chunk count a chunk runs on the same thread each time:
 * passes over the same rows keep them in that core's caches (the codec's tail blocks, whose
 * rows would otherwise cross between cores that share no cache). For uniform chunks: the
 * only balancing is for a stalled thread (preempted, or not awake yet), whose remaining chunks
 * the others take from the back of its range once it has taken none for 50 us or four of
 * their own mean chunk times, whichever is longer. Set between runs by the pool's caller. */
void kz_pool_set_split(kz_pool *pool, bool split);
bool kz_pool_split(const kz_pool *pool);

#endif
