/*
 * scheduler.c - kz_scheduler: one thread and one pool run all the synthesis compute of the
 * sessions attached to it, the language model a batch at a time (scheduler.h has the
 * protocol).
 *
 * Thread loop: under the lock, if a round is due (some member waits to predict or to step
 * and none is busy; round_due has the exception of requests that arrive together) it
 * gathers those members (run_round says which), computes their batch without the lock,
 * marks them done and busy again; then it runs the jobs waiting: every short one (codec
 * chunks) and at most one prompt job (a prefill) per lane, so a new request's prefill
 * delays the running ones by one prefill at most and the running ones delay a prefill by
 * one round at most. The members wait on one condition variable; the thread waits on
 * another.
 *
 * Side by side: with two threads or more the pool is also split in two parts. The short
 * jobs of a gap, and then up to two prompt jobs, run in two lanes (each lane's jobs one
 * after the other on its part: kz_pool_run over two chunks, the lane's part set as the
 * thread's job pool) when their sizes split evenly enough between the lanes that the
 * longer lane beats the whole pool running them all (balanced); else one by one on the
 * whole pool. Kinds do not mix in a run: a prefill beside one codec chunk would leave a
 * part idle for most of the prefill. So the running streams wait for at most one prefill
 * on half the threads per gap.
 */
#include "synth/scheduler.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/model.h"
#include "runtime/error.h"

#define MAX_BATCH_LIMIT 64
#define DEFAULT_MAX_BATCH 8
#define LANES 2
#define RUN_MAX 64 /* jobs of one run; more wait for the next gap */
/* A codec chunk's cost in frames beyond its own: each call streams the weights of the
 * stages that run once per call (docs/ARCHITECTURE.md, audio chunks). */
#define CALL_COST 2
/* Side by side only when the longer lane holds at most this share of the run's cost: a
 * prefill or a codec chunk on half the threads takes more than half the whole pool's
 * time (docs/ARCHITECTURE.md, continuous batching). */
#define BALANCED_SHARE 0.6

/* The part of the pool the current thread's side-by-side job computes with, or NULL. */
static _Thread_local kz_pool *job_pool;

struct kz_scheduler {
    const kz_model *m;
    kz_pool *pool;
    kz_pool *part[LANES]; /* the pool's threads in two parts (NULL with one thread) */
    kz_exec lm, cp;
    size_t max_batch, D;
    kz_talker_batch tb;
    kz_code_predictor_batch cb;
    /* round scratch [max_batch] */
    kz_sched_req **reqs; /* the round's members */
    kz_code_predictor_state **cps;
    kz_talker_state **ts;
    kz_pick_fn *picks;
    void **pick_users;
    float **logits_out;
    float *h, *e0, *x; /* [max_batch, D] */
    int32_t *codes;    /* [max_batch, n_steps] */
    /* shared state, under lock */
    pthread_mutex_t lock;
    pthread_cond_t work;  /* to the thread: a request changed state */
    pthread_cond_t done;  /* to the requests: work done, a place free, a cancel */
    kz_sched_req *members, *line, *jobs; /* lists in arrival order */
    kz_sched_req *run[RUN_MAX];           /* the thread's: the jobs of one run */
    size_t n_members, n_line;
    bool stop;
    int attached;
    int64_t steps, frames, prefills;
    double batch_ms, prompt_ms, short_ms;
    pthread_t thread;
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* --- lists ------------------------------------------------------------------------- */

/* A request sits on two lists at once: members/line through next, jobs through next_job. */
static kz_sched_req **link_of(kz_sched_req *r, bool job) {
    return job ? &r->next_job : &r->next;
}

static void append(kz_sched_req **head, kz_sched_req *r, bool job) {
    *link_of(r, job) = NULL;
    while (*head) {
        head = link_of(*head, job);
    }
    *head = r;
}

static void list_remove(kz_sched_req **head, kz_sched_req *r) {
    while (*head && *head != r) {
        head = &(*head)->next;
    }
    if (*head) {
        *head = r->next;
    }
    r->next = NULL;
}

/* --- the thread -------------------------------------------------------------------- */

/* A round is due once no member is busy and some wait for one, unless every member that
 * waits is at its first frame while another member's prefill waits: then the prefills of
 * requests that arrived together all run before the first round, which serves them all at
 * once (their first audio needs every prefill and a round either way, and one round reads
 * the weights once where a round per prefill would read them again for each). */
static bool round_due(const kz_scheduler *s) {
    bool waiting = false, first = true, prompt = false;
    for (const kz_sched_req *r = s->members; r; r = r->next) {
        if (r->state == KZ_SCHED_BUSY) {
            return false;
        }
        const bool waits = r->state == KZ_SCHED_PREDICT || r->state == KZ_SCHED_STEP;
        waiting = waiting || waits;
        first = first && !(waits && r->rounds > 0);
        prompt = prompt || (r->state == KZ_SCHED_JOB && r->job_kind == KZ_SCHED_PROMPT);
    }
    return waiting && !(first && prompt);
}

static void predict_batch(kz_scheduler *s, size_t n) {
    const size_t D = s->D, steps = (size_t)s->m->cp.n_steps;
    bool any_logits = false;
    for (size_t i = 0; i < n; i++) {
        const kz_sched_req *r = s->reqs[i];
        memcpy(s->h + i * D, r->h, D * sizeof(float));
        memcpy(s->e0 + i * D, r->e0, D * sizeof(float));
        s->cps[i] = r->cps;
        s->picks[i] = r->pick;
        s->pick_users[i] = r->pick_user;
        s->logits_out[i] = r->logits_out;
        any_logits = any_logits || r->logits_out;
    }
    kz_code_predictor_run_batch(&s->m->cp, s->cps, n, &s->cb, &s->cp, s->h, s->e0, s->picks,
                                s->pick_users, s->codes, any_logits ? s->logits_out : NULL);
    for (size_t i = 0; i < n; i++) {
        memcpy(s->reqs[i]->codes, s->codes + i * steps, steps * sizeof(int32_t));
    }
}

static void step_batch(kz_scheduler *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        memcpy(s->x + i * s->D, s->reqs[i]->x, s->D * sizeof(float));
        s->ts[i] = s->reqs[i]->ts;
    }
    kz_talker_step_batch(&s->m->talker, s->ts, n, &s->tb, &s->lm, s->x);
}

static void finish(kz_sched_req *r) {
    r->state = KZ_SCHED_BUSY;
    r->done = true;
}

/* One round: every member waiting to step, or if none, every member waiting to predict.
 * Those waiting to predict while others step wait one round: then all predict together, and
 * members that joined out of phase fall into step. Called and returns with the lock held. */
static void run_round(kz_scheduler *s) {
    bool stepping = false;
    for (const kz_sched_req *r = s->members; r && !stepping; r = r->next) {
        stepping = r->state == KZ_SCHED_STEP;
    }
    const kz_sched_state kind = stepping ? KZ_SCHED_STEP : KZ_SCHED_PREDICT;
    size_t n = 0;
    for (kz_sched_req *r = s->members; r; r = r->next) {
        if (r->state == kind) {
            s->reqs[n++] = r;
        }
    }
    pthread_mutex_unlock(&s->lock);
    const double t0 = now_ms();
    if (stepping) {
        step_batch(s, n);
    } else {
        predict_batch(s, n);
    }
    const double dt = now_ms() - t0;
    pthread_mutex_lock(&s->lock);
    s->batch_ms += dt;
    for (size_t i = 0; i < n; i++) {
        s->reqs[i]->rounds++;
        finish(s->reqs[i]);
    }
    s->steps += stepping ? 0 : 1;
    s->frames += stepping ? 0 : (int64_t)n;
    pthread_cond_broadcast(&s->done);
}

/* Takes the first waiting job of `kind` off the list, or NULL. Lock held. */
static kz_sched_req *take_job(kz_scheduler *s, kz_sched_job kind) {
    for (kz_sched_req **p = &s->jobs; *p; p = &(*p)->next_job) {
        if ((*p)->job_kind == kind) {
            kz_sched_req *r = *p;
            *p = r->next_job;
            r->next_job = NULL;
            return r;
        }
    }
    return NULL;
}

static size_t cost_of(const kz_sched_req *r) {
    return r->job_kind == KZ_SCHED_SHORT ? r->job_cost + CALL_COST : r->job_cost + 1;
}

/* Marks r done and wakes its thread. Takes the lock. */
static void finish_job(kz_scheduler *s, kz_sched_req *r) {
    pthread_mutex_lock(&s->lock);
    s->prefills += r->job_kind == KZ_SCHED_PROMPT;
    finish(r);
    pthread_cond_broadcast(&s->done);
    pthread_mutex_unlock(&s->lock);
}

typedef struct lanes {
    kz_scheduler *s;
    kz_sched_req *lane[LANES]; /* each lane's jobs, through next_run */
} lanes;

/* Lane `lane`'s jobs, one after the other, on part `lane` of the pool. */
static void lane_main(void *arg, size_t lane, int worker) {
    (void)worker;
    lanes *l = arg;
    job_pool = l->s->part[lane];
    for (kz_sched_req *r = l->lane[lane], *next; r; r = next) {
        next = r->next_run;
        r->job(r->job_arg);
        finish_job(l->s, r);
    }
    job_pool = NULL;
}

/* Runs the n jobs of `run` (one kind), side by side if their costs split into two lanes
 * with the longer one at most BALANCED_SHARE of the whole (largest first, each to the
 * lane with less so far), else one by one on the whole pool; either way the smaller jobs
 * first. Called and returns with the lock held; releases it meanwhile. */
static void run_jobs(kz_scheduler *s, kz_sched_req **run, size_t n) {
    lanes l = {.s = s};
    size_t load[LANES] = {0, 0}, total = 0;
    for (size_t i = 1; i < n; i++) { // largest cost first (a few jobs: insertion sort)
        for (size_t j = i; j > 0 && cost_of(run[j]) > cost_of(run[j - 1]); j--) {
            kz_sched_req *t = run[j];
            run[j] = run[j - 1];
            run[j - 1] = t;
        }
    }
    for (size_t i = 0; i < n; i++) { // each lane's list ends up smallest first
        const size_t k = load[1] < load[0];
        load[k] += cost_of(run[i]);
        total += cost_of(run[i]);
        run[i]->next_run = l.lane[k];
        l.lane[k] = run[i];
    }
    const size_t longer = load[0] > load[1] ? load[0] : load[1];
    const bool side = s->part[0] && n > 1 && (double)longer <= BALANCED_SHARE * (double)total;
    const kz_sched_job kind = run[0]->job_kind;
    pthread_mutex_unlock(&s->lock);
    const double t0 = now_ms();
    if (side) {
        kz_pool_run(s->pool, LANES, lane_main, &l);
    } else {
        for (size_t i = n; i-- > 0;) { // smallest first: a first one-frame chunk waits least
            run[i]->job(run[i]->job_arg);
            finish_job(s, run[i]);
        }
    }
    const double dt = now_ms() - t0;
    pthread_mutex_lock(&s->lock);
    *(kind == KZ_SCHED_PROMPT ? &s->prompt_ms : &s->short_ms) += dt;
}

/* The jobs of a gap between two rounds: every short one waiting, then (if `prompts`)
 * prompt ones, one per lane (one without parts). Called and returns with the lock held. */
static void run_gap(kz_scheduler *s, bool prompts) {
    size_t n = 0;
    for (kz_sched_req *r; n < RUN_MAX && (r = take_job(s, KZ_SCHED_SHORT));) {
        s->run[n++] = r;
    }
    if (n) {
        run_jobs(s, s->run, n);
    }
    const size_t max_prompts = !prompts ? 0 : s->part[0] ? LANES : 1;
    n = 0;
    for (kz_sched_req *r; n < max_prompts && (r = take_job(s, KZ_SCHED_PROMPT));) {
        s->run[n++] = r;
    }
    if (n) {
        run_jobs(s, s->run, n);
    }
}

/* Whether a stream's first codec chunk waits. Lock held. */
static bool first_chunk_waits(const kz_scheduler *s) {
    for (const kz_sched_req *r = s->jobs; r; r = r->next_job) {
        if (r->job_first) {
            return true;
        }
    }
    return false;
}

static void *thread_main(void *arg) {
    kz_scheduler *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->stop) {
        bool ran = false;
        // A stream's first audio waits for nothing else: its chunk (with every short job)
        // goes before the round, and no prefill joins them.
        const bool first = first_chunk_waits(s);
        if (!first && round_due(s)) {
            run_round(s);
            ran = true;
        }
        if (s->jobs) {
            run_gap(s, !first);
            ran = true;
        }
        if (!ran) {
            pthread_cond_wait(&s->work, &s->lock);
        }
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* --- requests ---------------------------------------------------------------------- */

/* Hands r to the thread in `state` and waits until it is done. */
static void submit(kz_scheduler *s, kz_sched_req *r, kz_sched_state state) {
    pthread_mutex_lock(&s->lock);
    r->state = state;
    r->done = false;
    if (state == KZ_SCHED_JOB) {
        append(&s->jobs, r, true);
    }
    pthread_cond_signal(&s->work);
    if (state == KZ_SCHED_JOB && r->on_queued) {
        pthread_mutex_unlock(&s->lock); // it may take the caller's locks
        r->on_queued(r->queued_arg);
        pthread_mutex_lock(&s->lock);
    }
    while (!r->done) {
        pthread_cond_wait(&s->done, &s->lock);
    }
    pthread_mutex_unlock(&s->lock);
}

void kz_sched_run_alone(kz_scheduler *s, kz_sched_req *r, kz_sched_job kind, void (*fn)(void *),
                        void *arg) {
    r->job_kind = kind;
    r->job = fn;
    r->job_arg = arg;
    submit(s, r, KZ_SCHED_JOB);
}

typedef struct sched_call {
    kz_status (*fn)(void *);
    void *arg;
    kz_status st;
    char msg[512];
} sched_call;

static void call_job(void *arg) {
    sched_call *c = arg;
    c->st = c->fn(c->arg);
    if (c->st != KZ_OK) {
        snprintf(c->msg, sizeof c->msg, "%s", kz_error_get());
    }
}

kz_status kz_sched_call(kz_scheduler *s, kz_sched_req *r, kz_sched_job kind,
                        kz_status (*fn)(void *), void *arg) {
    sched_call c = {.fn = fn, .arg = arg};
    kz_sched_run_alone(s, r, kind, call_job, &c);
    return c.st == KZ_OK ? KZ_OK : kz_error_set(c.st, "%s", c.msg);
}

void kz_sched_predict(kz_scheduler *s, kz_sched_req *r, kz_code_predictor_state *cps,
                      const float *h, const float *e0, kz_pick_fn pick, void *pick_user,
                      int32_t *codes, float *logits_out) {
    r->cps = cps;
    r->h = h;
    r->e0 = e0;
    r->pick = pick;
    r->pick_user = pick_user;
    r->codes = codes;
    r->logits_out = logits_out;
    submit(s, r, KZ_SCHED_PREDICT);
}

void kz_sched_step(kz_scheduler *s, kz_sched_req *r, kz_talker_state *ts, const float *x) {
    r->ts = ts;
    r->x = x;
    submit(s, r, KZ_SCHED_STEP);
}

void kz_sched_outside(kz_scheduler *s, kz_sched_req *r, bool outside) {
    pthread_mutex_lock(&s->lock);
    r->state = outside ? KZ_SCHED_OUTSIDE : KZ_SCHED_BUSY;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
}

bool kz_sched_join(kz_scheduler *s, kz_sched_req *r, const atomic_bool *cancel) {
    pthread_mutex_lock(&s->lock);
    append(&s->line, r, false);
    s->n_line++;
    while ((s->line != r || s->n_members >= s->max_batch) && !atomic_load(cancel)) {
        pthread_cond_wait(&s->done, &s->lock);
    }
    list_remove(&s->line, r);
    s->n_line--;
    const bool in = !atomic_load(cancel);
    if (in) {
        r->state = KZ_SCHED_BUSY;
        r->rounds = 0;
        append(&s->members, r, false);
        s->n_members++;
    }
    pthread_cond_broadcast(&s->done); // the next in line may be admitted too
    pthread_mutex_unlock(&s->lock);
    return in;
}

void kz_sched_leave(kz_scheduler *s, kz_sched_req *r) {
    pthread_mutex_lock(&s->lock);
    list_remove(&s->members, r);
    s->n_members--;
    pthread_cond_broadcast(&s->done);
    pthread_cond_signal(&s->work); // a round may be due without it
    pthread_mutex_unlock(&s->lock);
}

void kz_sched_wake(kz_scheduler *s) {
    pthread_mutex_lock(&s->lock);
    pthread_cond_broadcast(&s->done);
    pthread_mutex_unlock(&s->lock);
}

kz_pool *kz_sched_pool(kz_scheduler *s) {
    return job_pool ? job_pool : s->pool;
}

const kz_model *kz_sched_model(const kz_scheduler *s) {
    return s->m;
}

void kz_sched_attach(kz_scheduler *s, int delta) {
    pthread_mutex_lock(&s->lock);
    s->attached += delta;
    pthread_mutex_unlock(&s->lock);
}

/* --- public ------------------------------------------------------------------------ */

void kz_scheduler_default_params(kz_scheduler_params *params) {
    if (params) {
        *params = (kz_scheduler_params){0};
    }
}

static kz_status alloc_scratch(kz_scheduler *s) {
    const size_t n = s->max_batch, D = s->D, steps = (size_t)s->m->cp.n_steps;
    kz_status st = kz_talker_batch_init(&s->tb, &s->m->talker, n);
    st = st == KZ_OK ? kz_code_predictor_batch_init(&s->cb, &s->m->cp, n) : st;
    s->reqs = calloc(n, sizeof *s->reqs);
    s->cps = calloc(n, sizeof *s->cps);
    s->ts = calloc(n, sizeof *s->ts);
    s->picks = calloc(n, sizeof *s->picks);
    s->pick_users = calloc(n, sizeof *s->pick_users);
    s->logits_out = calloc(n, sizeof *s->logits_out);
    s->h = malloc(n * D * sizeof(float));
    s->e0 = malloc(n * D * sizeof(float));
    s->x = malloc(n * D * sizeof(float));
    s->codes = malloc(n * steps * sizeof(int32_t));
    if (st == KZ_OK && (!s->reqs || !s->cps || !s->ts || !s->picks ||
                        !s->pick_users || !s->logits_out || !s->h || !s->e0 || !s->x ||
                        !s->codes)) {
        st = kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory for the scheduler");
    }
    return st;
}

static void free_scratch(kz_scheduler *s) {
    kz_talker_batch_free(&s->tb);
    kz_code_predictor_batch_free(&s->cb);
    void *bufs[] = {s->reqs, s->cps, s->ts, s->picks, s->pick_users,
                    s->logits_out, s->h, s->e0, s->x, s->codes};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        free(bufs[i]);
    }
}

static void free_pools(kz_scheduler *s) {
    kz_pool_free(s->pool);
    kz_pool_free(s->part[0]);
    kz_pool_free(s->part[1]);
}

static kz_status check_params(const kz_model *model, const kz_scheduler_params *p) {
    if (!model->has_tts) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_scheduler_new: the model has no talker (a codec-only model)");
    }
    if (p->n_threads < 0 || p->n_threads > 256) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_scheduler_new: n_threads %d is outside 0..256", p->n_threads);
    }
    if (p->max_batch < 0 || p->max_batch > MAX_BATCH_LIMIT) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_scheduler_new: max_batch %d is outside 0..%d", p->max_batch,
                            MAX_BATCH_LIMIT);
    }
    return KZ_OK;
}

kz_status kz_scheduler_new(const kz_model *model, const kz_scheduler_params *params,
                           kz_scheduler **out) {
    if (!out || !model) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_scheduler_new: NULL argument");
    }
    *out = NULL;
    kz_scheduler_params p = {0};
    if (params) {
        p = *params;
    }
    kz_status st = check_params(model, &p);
    kz_scheduler *s = st == KZ_OK ? calloc(1, sizeof *s) : NULL;
    if (st != KZ_OK || !s) {
        return st != KZ_OK ? st : kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    s->m = model;
    s->max_batch = p.max_batch > 0 ? (size_t)p.max_batch : DEFAULT_MAX_BATCH;
    s->D = (size_t)model->talker.cfg.hidden_size;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->work, NULL);
    pthread_cond_init(&s->done, NULL);
    const int threads = p.n_threads > 0 ? p.n_threads : kz_pool_default_threads();
    st = kz_pool_new(threads, &s->pool);
    if (threads > 1) {
        st = st == KZ_OK ? kz_pool_new((threads + 1) / 2, &s->part[0]) : st;
        st = st == KZ_OK ? kz_pool_new(threads / 2, &s->part[1]) : st;
    }
    st = st == KZ_OK ? alloc_scratch(s) : st;
    if (st == KZ_OK) {
        s->lm = (kz_exec){.k = model->kernels, .pool = s->pool};
        s->cp = (kz_exec){.k = model->kernels, .pool = s->pool, .weights_reused = true};
        int err = pthread_create(&s->thread, NULL, thread_main, s);
        st = err ? kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "cannot start the scheduler thread")
                 : KZ_OK;
    }
    if (st != KZ_OK) {
        free_scratch(s);
        free_pools(s);
        free(s);
        return st;
    }
    *out = s;
    return KZ_OK;
}

void kz_scheduler_free(kz_scheduler *s) {
    if (!s) {
        return;
    }
    pthread_mutex_lock(&s->lock);
    if (s->attached > 0) { // their synthesis would use freed memory: keep it, say so
        pthread_mutex_unlock(&s->lock);
        kz_log(KZ_LOG_ERROR, "kz_scheduler_free: not freed, %d session(s) still use it",
               s->attached);
        return;
    }
    s->stop = true;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    free_scratch(s);
    free_pools(s);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->work);
    pthread_cond_destroy(&s->done);
    free(s);
}

void kz_scheduler_get_stats(const kz_scheduler *s, kz_scheduler_stats *out) {
    if (!out) {
        return;
    }
    *out = (kz_scheduler_stats){0};
    if (!s) {
        return;
    }
    kz_scheduler *w = (kz_scheduler *)s; // the lock is the only thing changed
    pthread_mutex_lock(&w->lock);
    out->active = (int32_t)s->n_members;
    out->waiting = (int32_t)s->n_line;
    out->steps = s->steps;
    out->frames = s->frames;
    out->prefills = s->prefills;
    out->batch_ms = s->batch_ms;
    out->prompt_ms = s->prompt_ms;
    out->short_ms = s->short_ms;
    pthread_mutex_unlock(&w->lock);
}
