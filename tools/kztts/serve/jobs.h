/*
 * jobs.h - the server's synthesis workers: --parallel threads, each with its own
 * kz_session on the one shared model, taking jobs from a bounded FIFO.
 *
 * A handler submits a job (a function and its argument); it runs on the next free
 * worker with that worker's session. Beyond --max-queue waiting jobs, submit refuses
 * (the handler answers 429); after jobs_close it refuses everything (503).
 */
#ifndef KZ_JOBS_H
#define KZ_JOBS_H

#include "kztts.h"

typedef struct jobs jobs;

/* Runs on a worker thread. Must return promptly once its request was cancelled. */
typedef void (*job_fn)(kz_session *session, void *arg);

/* parallel workers with sessions of n_threads threads each (0: automatic); at most
 * max_queue jobs wait. NULL with one line in err on failure. */
jobs *jobs_new(const kz_model *model, int parallel, int max_queue, int n_threads, char *err,
               size_t n_err);

typedef enum jobs_result { JOBS_OK = 0, JOBS_FULL = 1, JOBS_CLOSED = 2 } jobs_result;

/* Queues fn(session, arg). On JOBS_OK fn will run exactly once; otherwise never. */
jobs_result jobs_submit(jobs *j, job_fn fn, void *arg);

/* Jobs running and waiting now. */
void jobs_counts(jobs *j, int *running, int *queued);

/* Refuses new jobs; queued and running ones still run. */
void jobs_close(jobs *j);

/* Waits for every job to finish, then frees the workers and sessions. */
void jobs_free(jobs *j);

#endif
