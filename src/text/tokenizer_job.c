/*
 * tokenizer_job.c - the tokenizer built beside the weights (see tokenizer_job.h).
 *
 * The thread keeps the load's status and copies its thread-local error message into
 * the job; finish joins and re-raises that message on the caller's thread.
 */
#include "text/tokenizer_job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"

/* Runs the load on the current thread and records its outcome in the job. */
static void run_load(kz_tokenizer_job *job) {
    job->status = job->dir ? kz_tokenizer_load(job->dir, &job->tokenizer)
                           : kz_tokenizer_load_text(&job->text, &job->tokenizer);
    if (job->status != KZ_OK) {
        snprintf(job->message, sizeof job->message, "%s", kz_error_get());
    }
}

static void *thread_main(void *arg) {
    run_load(arg);
    return NULL;
}

/* Starts the job's thread, or runs the load inline when no thread can be made. */
static kz_status start(kz_tokenizer_job *job) {
    job->active = true;
    job->threaded = pthread_create(&job->thread, NULL, thread_main, job) == 0;
    if (!job->threaded) {
        run_load(job);
    }
    return KZ_OK;
}

kz_status kz_tokenizer_job_start_dir(kz_tokenizer_job *job, const char *dir) {
    memset(job, 0, sizeof *job);
    job->dir = strdup(dir);
    if (!job->dir) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory starting the tokenizer");
    }
    return start(job);
}

kz_status kz_tokenizer_job_start_text(kz_tokenizer_job *job, const kz_tokenizer_text *text) {
    memset(job, 0, sizeof *job);
    job->text = *text;
    return start(job);
}

kz_status kz_tokenizer_job_finish(kz_tokenizer_job *job, kz_status load_status,
                                  kz_tokenizer **out) {
    *out = NULL;
    if (job->active && job->threaded) {
        pthread_join(job->thread, NULL);
    }
    kz_status st = job->active ? job->status : KZ_OK;
    job->active = false;
    free(job->dir);
    job->dir = NULL;
    if (load_status != KZ_OK || st != KZ_OK) { // the load's own message stays if it failed
        kz_tokenizer_free(job->tokenizer);
        job->tokenizer = NULL;
        return load_status != KZ_OK ? load_status : kz_error_set(st, "%s", job->message);
    }
    *out = job->tokenizer;
    job->tokenizer = NULL;
    return KZ_OK;
}
