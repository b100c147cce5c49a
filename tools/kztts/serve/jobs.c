/*
 * jobs.c - the synthesis workers of `kztts serve` (jobs.h).
 *
 * Data flow: jobs_submit appends (fn, arg) to a FIFO list; each of the `parallel` worker
 * threads sleeps on a condition variable, takes the oldest job, runs it with its own
 * kz_session (all sessions share the one immutable model) and goes back for the next.
 * Admission counts jobs waiting plus jobs running against parallel + max_queue, so with
 * idle workers a job is taken at once and with busy ones at most max_queue wait.
 * jobs_close refuses new jobs; jobs_free closes, lets the workers empty the queue, joins
 * them and frees their sessions, then the scheduler (it must outlive every session
 * attached to it).
 *
 * With max_batch >= 2 the sessions are attached to one kz_scheduler: its thread and pool
 * (n_threads) do all the synthesis compute of every request in flight, the language
 * models stepped as one batch and the codec chunks between the batches, so one pool owns
 * the cores; a session's own threads would serve only kz_decode, so it gets one. The
 * scheduler admits requests in the order they reach it, and the FIFO hands jobs out in
 * arrival order, so no request overtakes an earlier one.
 *
 * The scheduler and sessions are made in jobs_new, before any request, so a machine that
 * cannot hold them fails at start-up with a message rather than on the first request.
 */
#include "jobs.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct job {
    job_fn fn;
    void *arg;
    struct job *next;
} job;

typedef struct worker {
    jobs *owner;
    kz_session *session;
    pthread_t thread;
    bool started;
} worker;

struct jobs {
    pthread_mutex_t mutex;
    pthread_cond_t work;   // a job was queued, or the workers must stop
    job *head, *tail;      // FIFO of waiting jobs
    int n_queued;
    int n_running;
    int parallel;
    int max_queue;
    bool closed;           // no new jobs
    bool stopping;         // workers exit once the queue is empty
    worker *workers;       // [parallel]
    kz_scheduler *scheduler; // NULL: max_batch 1, each session steps alone
};

/* Takes the oldest job, waiting for one; NULL when stopping with an empty queue. */
static job *take(jobs *j) {
    pthread_mutex_lock(&j->mutex);
    while (!j->head && !j->stopping) {
        pthread_cond_wait(&j->work, &j->mutex);
    }
    job *jb = j->head;
    if (jb) {
        j->head = jb->next;
        if (!j->head) {
            j->tail = NULL;
        }
        j->n_queued--;
        j->n_running++;
    }
    pthread_mutex_unlock(&j->mutex);
    return jb;
}

static void *worker_main(void *arg) {
    worker *w = arg;
    jobs *j = w->owner;
    for (job *jb; (jb = take(j)) != NULL;) {
        jb->fn(w->session, jb->arg);
        free(jb);
        pthread_mutex_lock(&j->mutex);
        j->n_running--;
        pthread_mutex_unlock(&j->mutex);
    }
    return NULL;
}

/* Threads per session without batching: the server's threads (n_threads, or the online
 * CPUs) shared among the workers, so --threads means the whole server's compute with or
 * without a scheduler. */
static int session_threads(int parallel, int n_threads) {
    long total = n_threads > 0 ? n_threads : sysconf(_SC_NPROCESSORS_ONLN);
    int per_worker = total > 0 ? (int)(total / parallel) : 1;
    return per_worker > 0 ? per_worker : 1;
}

/* The session parameters of every worker; with a scheduler (made here) n_threads goes to
 * the scheduler and the session keeps one thread (kz_decode's, which the server does not
 * call). */
static int session_params(jobs *j, const kz_model *model, const jobs_params *p,
                          kz_session_params *sp, char *err, size_t n_err) {
    kz_session_default_params(sp);
    if (p->max_batch < 2) {
        sp->n_threads = session_threads(p->parallel, p->n_threads);
        return 0;
    }
    kz_scheduler_params sch;
    kz_scheduler_default_params(&sch);
    sch.n_threads = p->n_threads;
    sch.max_batch = p->max_batch;
    if (kz_scheduler_new(model, &sch, &j->scheduler) != KZ_OK) {
        snprintf(err, n_err, "scheduler (batch %d): %s", p->max_batch, kz_last_error());
        return -1;
    }
    sp->scheduler = j->scheduler;
    sp->n_threads = 1;
    return 0;
}

static int start_workers(jobs *j, const kz_model *model, const jobs_params *p, char *err,
                         size_t n_err) {
    kz_session_params sp;
    if (session_params(j, model, p, &sp, err, n_err) != 0) {
        return -1;
    }
    for (int i = 0; i < j->parallel; i++) {
        worker *w = &j->workers[i];
        w->owner = j;
        kz_status st = kz_session_new(model, &sp, &w->session);
        if (st != KZ_OK) {
            snprintf(err, n_err, "session %d of %d: %s", i + 1, j->parallel, kz_last_error());
            return -1;
        }
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            snprintf(err, n_err, "cannot start worker thread %d of %d", i + 1, j->parallel);
            return -1;
        }
        w->started = true;
    }
    return 0;
}

jobs *jobs_new(const kz_model *model, const jobs_params *p, char *err, size_t n_err) {
    if (p->parallel < 1 || p->max_queue < 0 || p->n_threads < 0 || p->max_batch < 1 ||
        p->max_batch > 64) {
        snprintf(err, n_err, "parallel must be >= 1, max_queue and threads >= 0, "
                 "max_batch 1..64");
        return NULL;
    }
    const int parallel = p->parallel;
    jobs *j = calloc(1, sizeof *j);
    worker *workers = calloc((size_t)parallel, sizeof *workers);
    if (!j || !workers) {
        free(j);
        free(workers);
        snprintf(err, n_err, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&j->mutex, NULL);
    pthread_cond_init(&j->work, NULL);
    j->parallel = parallel;
    j->max_queue = p->max_queue;
    j->workers = workers;
    if (start_workers(j, model, p, err, n_err) != 0) {
        jobs_free(j);
        return NULL;
    }
    return j;
}

jobs_result jobs_submit(jobs *j, job_fn fn, void *arg) {
    job *jb = malloc(sizeof *jb);
    pthread_mutex_lock(&j->mutex);
    jobs_result rc = JOBS_OK;
    if (j->closed) {
        rc = JOBS_CLOSED;
    } else if (!jb || j->n_queued + j->n_running >= j->parallel + j->max_queue) {
        rc = JOBS_FULL; // out of memory for one list node is overload too
    } else {
        *jb = (job){.fn = fn, .arg = arg};
        if (j->tail) {
            j->tail->next = jb;
        } else {
            j->head = jb;
        }
        j->tail = jb;
        j->n_queued++;
        pthread_cond_signal(&j->work);
    }
    pthread_mutex_unlock(&j->mutex);
    if (rc != JOBS_OK) {
        free(jb);
    }
    return rc;
}

void jobs_counts(jobs *j, int *running, int *queued) {
    pthread_mutex_lock(&j->mutex);
    if (running) {
        *running = j->n_running;
    }
    if (queued) {
        *queued = j->n_queued;
    }
    pthread_mutex_unlock(&j->mutex);
}

bool jobs_batch_stats(jobs *j, kz_scheduler_stats *out) {
    *out = (kz_scheduler_stats){0};
    if (!j->scheduler) {
        return false;
    }
    kz_scheduler_get_stats(j->scheduler, out);
    return true;
}

void jobs_close(jobs *j) {
    pthread_mutex_lock(&j->mutex);
    j->closed = true;
    pthread_mutex_unlock(&j->mutex);
}

void jobs_free(jobs *j) {
    if (!j) {
        return;
    }
    pthread_mutex_lock(&j->mutex);
    j->closed = true;
    j->stopping = true;
    pthread_cond_broadcast(&j->work);
    pthread_mutex_unlock(&j->mutex);
    for (int i = 0; i < j->parallel; i++) {
        if (j->workers[i].started) {
            pthread_join(j->workers[i].thread, NULL);
        }
        kz_session_free(j->workers[i].session);
    }
    kz_scheduler_free(j->scheduler); // after the sessions attached to it
    // Workers empty the queue before they exit; jobs are left only when none started.
    for (job *jb = j->head; jb;) {
        job *next = jb->next;
        free(jb);
        jb = next;
    }
    pthread_cond_destroy(&j->work);
    pthread_mutex_destroy(&j->mutex);
    free(j->workers);
    free(j);
}
