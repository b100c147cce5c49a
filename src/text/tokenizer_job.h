/*
 * tokenizer_job.h - building the text tokenizer on a thread of its own while the
 * model's weights are bound.
 *
 * Building the BPE tables from vocab.json + merges.txt takes about as long as
 * binding and paging in the weights of the 0.6B model
 * (docs/ARCHITECTURE.md#model-loading), and the two do not depend on each other, so a
 * model load starts the tokenizer first and collects it last:
 *
 *   kz_tokenizer_job_start_*   -> thread: kz_tokenizer_load[_text] -> status, message
 *   (caller binds the weights)
 *   kz_tokenizer_job_finish    -> join; the load's error if the weights failed, else
 *                                 the tokenizer or its error, set on the caller's
 *                                 thread (kz_error_get) as if it had run there
 *
 * If no thread can be started, start runs the load inline and finish returns its
 * result: the outcome never depends on threads. The inputs must stay valid until
 * finish (the directory path is copied; tokenizer text points into the model's
 * mapping). Every started job must be finished, also when the load fails
 * elsewhere.
 */
#ifndef KZ_TOKENIZER_JOB_H
#define KZ_TOKENIZER_JOB_H

#include <pthread.h>
#include <stdbool.h>

#include "text/tokenizer.h"

typedef struct kz_tokenizer_job {
    /* input: one of the two */
    char *dir;              /* owned copy, or NULL */
    kz_tokenizer_text text; /* used when dir is NULL */
    /* output */
    kz_tokenizer *tokenizer;
    kz_status status;
    char message[1024];
    /* state */
    pthread_t thread;
    bool threaded; /* a thread runs the load and must be joined */
    bool active;   /* started and not finished */
} kz_tokenizer_job;

/* Starts loading dir/vocab.json, merges.txt, tokenizer_config.json. */
kz_status kz_tokenizer_job_start_dir(kz_tokenizer_job *job, const char *dir);

/* Starts loading from text in memory (kz_tokenizer_load_text). */
kz_status kz_tokenizer_job_start_text(kz_tokenizer_job *job, const kz_tokenizer_text *text);

/* Waits for the job. load_status is the status of the rest of the model load, done
 * meanwhile: if it failed, the tokenizer is freed and load_status returned with this
 * thread's message untouched (the weights' error comes first). Otherwise *out receives
 * the tokenizer (the caller owns it; NULL for a job never started) and the tokenizer
 * load's status is returned, its message set on this thread. */
kz_status kz_tokenizer_job_finish(kz_tokenizer_job *job, kz_status load_status,
                                  kz_tokenizer **out);

#endif
