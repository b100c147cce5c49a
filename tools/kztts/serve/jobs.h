/*
 * jobs.h - the server's synthesis workers: --parallel threads, each with its own
 * kz_session on the one shared model, taking jobs from a bounded FIFO; with a batch of
 * two or more, one kz_scheduler that steps the workers' language models together.
 *
 * A handler submits a job (a function and its argument); it runs on the next free
 * worker with that worker's session. Beyond --max-queue waiting jobs, submit refuses
 * (the handler answers 429); after jobs_close it refuses everything (503).
 */
#ifndef KZ_JOBS_H
#define KZ_JOBS_H

#include <stdbool.h>

#include "kztts.h"

typedef struct jobs jobs;

/* Runs on a worker thread. Must return promptly once its request was cancelled. */
typedef void (*job_fn)(kz_session *session, void *arg);

typedef struct jobs_params {
    int parallel;  /* workers, each with a session: requests in flight, >= 1 */
    int max_queue; /* jobs that may wait beyond those, >= 0 */
    int n_threads; /* compute threads, >= 0. max_batch 1: each session's (0: the online
                      CPUs / parallel, at least 1). Otherwise the scheduler's, all the
                      synthesis compute (0: its default, the online CPUs, at most 8); each
                      session then has one thread */
    int max_batch; /* 1: no scheduler, each session steps alone; 2..64: one scheduler
                      steps up to that many requests together */
} jobs_params;

/* The workers, their sessions and (max_batch >= 2) their scheduler. NULL with one line in
 * err on failure. */
jobs *jobs_new(const kz_model *model, const jobs_params *p, char *err, size_t n_err);

typedef enum jobs_result { JOBS_OK = 0, JOBS_FULL = 1, JOBS_CLOSED = 2 } jobs_result;

/* Queues fn(session, arg). On JOBS_OK fn will run exactly once; otherwise never. */
jobs_result jobs_submit(jobs *j, job_fn fn, void *arg);

/* Jobs running and waiting now. */
void jobs_counts(jobs *j, int *running, int *queued);

/* The scheduler's counters into out and true; false (out zeroed) without a scheduler. */
bool jobs_batch_stats(jobs *j, kz_scheduler_stats *out);

/* Refuses new jobs; queued and running ones still run. */
void jobs_close(jobs *j);

/* Waits for every job to finish, then frees the workers and sessions, then the
 * scheduler. */
void jobs_free(jobs *j);

#endif
