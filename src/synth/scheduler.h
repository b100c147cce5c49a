/*
 * scheduler.h - the engine side of kz_scheduler: continuous batching of the language-model
 * stage of many sessions (include/kztts.h, "scheduler").
 *
 * Each synthesis keeps its own LM thread (synth.c) and codec; only the compute that reads
 * the talker's and code predictor's weights moves to the scheduler's thread:
 *
 *   request LM threads                         scheduler thread (its pool)
 *   join (FIFO, at most max_batch members)
 *   run_alone(prefill)               -------->  between two rounds: every short job
 *   (codec thread) run_alone(chunk)  -------->  (codec chunk, text), a prefill per part
 *   predict(h, c0 embedding, picker) -------->  round: talker batch of every member
 *   step(talker input row)           -------->         waiting to step, else code
 *                                                      predictor batch of every member
 *   <-------- done, the member is busy again           waiting to predict
 *                                               a stream's first codec chunk before any
 *                                               round (its LM thread steps once it waits)
 *   outside(true) around waits on the codec or on streamed text
 *   leave
 *
 * The codec's chunks run there too, so the one pool does all the compute of every
 * stream (the stages take turns, as a session alone does by default). Jobs of one kind that
 * wait together (two prefills, several codec chunks) may run side by side, each on its half
 * of the pool's threads (a part, kz_sched_pool): a prefill or a codec chunk gains less than
 * twice from twice the threads, and a job's bits do not depend on its thread count.
 * A round starts once no member is busy (each is waiting for the scheduler or outside), so
 * members step in lock-step while they run, and one that waits elsewhere does not hold the
 * others; members at their first frame wait for the prefills of the others that arrived
 * with them, so that one round serves them all. The batched kernels give each request the
 * bits it gets alone (talker.h, code_predictor.h), and a prefill runs with the session's own
 * chunking (on the whole pool or a part), so the codes never depend on the batch.
 */
#ifndef KZ_SCHEDULER_H
#define KZ_SCHEDULER_H

#include <stdatomic.h>
#include <stdbool.h>

#include "kztts.h"
#include "model/code_predictor.h"
#include "model/talker.h"
#include "runtime/threadpool.h"

/* What a job is: prompt work (a prefill) runs at most one per gap between two rounds, so
 * it delays the running streams by one job; short work (a codec chunk, a streamed text
 * token) all that waits, as each stream has one at a time. */
typedef enum kz_sched_job {
    KZ_SCHED_PROMPT = 0,
    KZ_SCHED_SHORT = 1,
} kz_sched_job;

typedef enum kz_sched_state {
    KZ_SCHED_BUSY = 0, /* computing its own part: the next round waits for it */
    KZ_SCHED_OUTSIDE,  /* waiting for something else: rounds go on without it */
    KZ_SCHED_JOB,      /* waits for its job to run alone */
    KZ_SCHED_PREDICT,  /* waits for a code predictor batch */
    KZ_SCHED_STEP,     /* waits for a talker batch */
} kz_sched_state;

/* One request's place at the scheduler (inside its synthesis; zero-initialised). */
typedef struct kz_sched_req {
    struct kz_sched_req *next; /* members, or the admission line, in arrival order */
    struct kz_sched_req *next_job; /* jobs waiting, in arrival order */
    kz_sched_state state;
    bool done;                 /* the scheduler finished what the request waits for */
    int64_t rounds;            /* rounds it was in since it joined */
    void (*job)(void *arg);
    void *job_arg;
    kz_sched_job job_kind;
    size_t job_cost;           /* its size, to balance side-by-side jobs: a prompt's rows,
                                  a codec chunk's frames (0: negligible) */
    struct kz_sched_req *next_run; /* the jobs of one part in a side-by-side run */
    bool job_first;            /* a stream's first codec chunk: runs before the next round */
    void (*on_queued)(void *arg); /* if set, called once the job waits in the line (from the
                                     submitting thread, no lock held) */
    void *queued_arg;
    kz_code_predictor_state *cps; /* predict */
    const float *h, *e0;
    kz_pick_fn pick;
    void *pick_user;
    int32_t *codes;
    float *logits_out;
    kz_talker_state *ts; /* step */
    const float *x;
} kz_sched_req;

/* The pool a job computes with: the scheduler's whole pool, or the part of it the job runs
 * on when it runs side by side with another (asked from the job's thread). Sessions point
 * their LM exec at the whole pool and move it to this one for each job
 * (kz_session_lm_call). */
kz_pool *kz_sched_pool(kz_scheduler *s);
const kz_model *kz_sched_model(const kz_scheduler *s);

/* Sessions attached: kz_scheduler_free expects none. */
void kz_sched_attach(kz_scheduler *s, int delta);

/* Waits for a place in the batch (arrival order); false, without one, once *cancel is set
 * and kz_sched_wake called. */
bool kz_sched_join(kz_scheduler *s, kz_sched_req *r, const atomic_bool *cancel);
void kz_sched_leave(kz_scheduler *s, kz_sched_req *r);

/* Wakes requests waiting in kz_sched_join to look at their cancel flag. */
void kz_sched_wake(kz_scheduler *s);

/* Runs fn(arg) on the scheduler's thread between two rounds and returns after it; fn
 * computes with kz_sched_pool's pool and touches nothing another request's job may touch
 * (it may run side by side with one). r may be a member or, for work outside a synthesis
 * (kz_session_prepare), a fresh request; r->job_cost its size, 0 if never set. */
void kz_sched_run_alone(kz_scheduler *s, kz_sched_req *r, kz_sched_job kind, void (*fn)(void *),
                        void *arg);

/* fn(arg) as kz_sched_run_alone runs it, with its status and error message (set on the
 * scheduler's thread) carried to the caller's thread. */
kz_status kz_sched_call(kz_scheduler *s, kz_sched_req *r, kz_sched_job kind,
                        kz_status (*fn)(void *), void *arg);

/* kz_code_predictor_run(p, cps, e, h, e0, pick, pick_user, codes, logits_out) in the next
 * batch (the picker runs on the scheduler's thread while the caller waits). */
void kz_sched_predict(kz_scheduler *s, kz_sched_req *r, kz_code_predictor_state *cps,
                      const float *h, const float *e0, kz_pick_fn pick, void *pick_user,
                      int32_t *codes, float *logits_out);

/* kz_talker_forward(t, ts, e, x, 1, 0) in the next batch (x is copied). */
void kz_sched_step(kz_scheduler *s, kz_sched_req *r, kz_talker_state *ts, const float *x);

/* Marks a member as waiting outside the scheduler (true) or busy again (false). */
void kz_sched_outside(kz_scheduler *s, kz_sched_req *r, bool outside);

#endif
