/*
 * test_sched_jobs.c - the scheduler's jobs between two rounds (synth/scheduler.h): jobs of
 * one kind that wait together run side by side, each on a part of the pool, when their
 * sizes balance, and one by one on the whole pool otherwise; a gap runs at most one prompt
 * job per part.
 *
 * argv[1]: a tiny CustomVoice checkpoint (a scheduler needs a model with a talker). Each
 * case makes a scheduler of 2 threads; a blocker job holds its thread until every job of
 * the case waits in line (their on_queued callbacks count them), so all of them are there
 * at the next gap. Each job records its thread, the threads of the pool kz_sched_pool gives
 * it, and whether another job ran at the same time (the first on a part waits, bounded, for
 * a second to start).
 *   - two prompt jobs of equal size: side by side (two threads, one-thread parts, together);
 *   - prompt jobs of sizes 1 and 20: one by one on the whole pool, on the scheduler's thread;
 *   - three prompt jobs of equal size: two side by side, the third alone in the next gap;
 *   - four short jobs of equal size: side by side on two threads, two per part.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kztts.h"
#include "runtime/threadpool.h"
#include "synth/scheduler.h"
#include "test.h"

#define MAX_JOBS 4
#define WAIT_S 10 /* bound of every wait, so that a fault fails instead of hanging */

typedef struct job_case {
    kz_scheduler *s;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    bool blocking;        /* the blocker holds the scheduler's thread */
    int queued, expected; /* jobs of the case in line, and how many to wait for */
    int running, started; /* jobs running now, and started so far */
} job_case;

typedef struct job {
    job_case *c;
    kz_sched_req req;
    kz_sched_job kind;
    pthread_t thread;     /* it ran on */
    int pool_threads;     /* of kz_sched_pool's pool while it ran */
    bool saw_other;       /* another job ran at the same time */
} job;

static struct timespec deadline(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += WAIT_S;
    return t;
}

static void on_queued(void *arg) {
    job_case *c = arg;
    pthread_mutex_lock(&c->lock);
    c->queued++;
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->lock);
}

/* The blocker: holds the scheduler's thread until every job of the case waits in line. */
static void blocker_fn(void *arg) {
    job_case *c = arg;
    const struct timespec until = deadline();
    pthread_mutex_lock(&c->lock);
    c->blocking = true;
    pthread_cond_broadcast(&c->changed);
    while (c->queued < c->expected &&
           pthread_cond_timedwait(&c->changed, &c->lock, &until) == 0) {
    }
    pthread_mutex_unlock(&c->lock);
}

static void job_fn(void *arg) {
    job *j = arg;
    job_case *c = j->c;
    j->thread = pthread_self();
    j->pool_threads = kz_pool_threads(kz_sched_pool(c->s));
    const struct timespec until = deadline();
    pthread_mutex_lock(&c->lock);
    c->running++;
    const int mine = ++c->started;
    pthread_cond_broadcast(&c->changed);
    // On a part another job runs beside it: the first to start waits (bounded) for a second
    // to start, which then sees it running.
    bool seen = c->running >= 2;
    while (!seen && j->pool_threads == 1 && c->started < 2 &&
           pthread_cond_timedwait(&c->changed, &c->lock, &until) == 0) {
        seen = c->started > mine;
    }
    j->saw_other = seen || c->started > mine;
    c->running--;
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->lock);
}

static void *submit_main(void *arg) {
    job *j = arg;
    kz_sched_run_alone(j->c->s, &j->req, j->kind, job_fn, j);
    return NULL;
}

typedef struct blocker {
    job_case *c;
    kz_sched_req req;
} blocker;

static void *blocker_main(void *arg) {
    blocker *b = arg;
    kz_sched_run_alone(b->c->s, &b->req, KZ_SCHED_SHORT, blocker_fn, b->c);
    return NULL;
}

/* Runs n jobs of `kind` and the given sizes, all waiting together; fills js. */
static void run_case(const kz_model *m, kz_sched_job kind, const size_t *costs, int n, job *js) {
    job_case c = {.expected = n};
    pthread_mutex_init(&c.lock, NULL);
    pthread_cond_init(&c.changed, NULL);
    kz_scheduler_params sp;
    kz_scheduler_default_params(&sp);
    sp.n_threads = 2;
    CHECK(kz_scheduler_new(m, &sp, &c.s) == KZ_OK);
    if (!c.s) {
        return;
    }
    blocker b = {.c = &c};
    pthread_t bt, th[MAX_JOBS];
    CHECK(pthread_create(&bt, NULL, blocker_main, &b) == 0);
    const struct timespec until = deadline();
    pthread_mutex_lock(&c.lock);
    while (!c.blocking && pthread_cond_timedwait(&c.changed, &c.lock, &until) == 0) {
    }
    pthread_mutex_unlock(&c.lock);
    CHECK_MSG(c.blocking, "the blocker did not start");
    for (int i = 0; i < n; i++) {
        js[i] = (job){.c = &c, .kind = kind};
        js[i].req.job_cost = costs[i];
        js[i].req.on_queued = on_queued;
        js[i].req.queued_arg = &c;
        CHECK(pthread_create(&th[i], NULL, submit_main, &js[i]) == 0);
    }
    pthread_join(bt, NULL);
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
    }
    CHECK_MSG(c.queued == n, "%d of %d jobs were in line", c.queued, n);
    kz_scheduler_free(c.s);
    pthread_mutex_destroy(&c.lock);
    pthread_cond_destroy(&c.changed);
}

static int count_threads(const job *js, int n, int pool_threads) {
    int k = 0;
    for (int i = 0; i < n; i++) {
        k += js[i].pool_threads == pool_threads;
    }
    return k;
}

static void check_side_by_side(const char *what, const job *js, int n) {
    CHECK_MSG(count_threads(js, n, 1) == n, "%s: %d of %d jobs on a one-thread part", what,
              count_threads(js, n, 1), n);
    bool two_threads = false;
    for (int i = 1; i < n; i++) {
        two_threads = two_threads || !pthread_equal(js[i].thread, js[0].thread);
    }
    CHECK_MSG(two_threads, "%s: every job ran on one thread", what);
    bool together = false;
    for (int i = 0; i < n; i++) {
        together = together || js[i].saw_other;
    }
    CHECK_MSG(together, "%s: no two jobs ran at once", what);
}

static void run_model(const char *path) {
    kz_model *m = NULL;
    CHECK_MSG(kz_model_load(path, NULL, &m) == KZ_OK, "load %s: %s", path, kz_last_error());
    if (!m) {
        return;
    }
    job js[MAX_JOBS];

    const size_t equal[MAX_JOBS] = {20, 20, 20, 20};
    run_case(m, KZ_SCHED_PROMPT, equal, 2, js);
    check_side_by_side("two equal prompts", js, 2);
    CHECK(js[0].saw_other && js[1].saw_other);

    const size_t uneven[2] = {1, 20};
    run_case(m, KZ_SCHED_PROMPT, uneven, 2, js);
    CHECK_MSG(count_threads(js, 2, 2) == 2, "uneven prompts: %d of 2 on the whole pool",
              count_threads(js, 2, 2));
    CHECK(pthread_equal(js[0].thread, js[1].thread) && !js[0].saw_other && !js[1].saw_other);

    run_case(m, KZ_SCHED_PROMPT, equal, 3, js);
    CHECK_MSG(count_threads(js, 3, 1) == 2 && count_threads(js, 3, 2) == 1,
              "three prompts: %d on parts, %d on the whole pool (2 and 1)",
              count_threads(js, 3, 1), count_threads(js, 3, 2));

    run_case(m, KZ_SCHED_SHORT, equal, 4, js);
    check_side_by_side("four equal short jobs", js, 4);
    kz_model_free(m);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_sched_jobs TINY_CHECKPOINT\n");
        return 2;
    }
    run_model(argv[1]);
    return test_main_result("test_sched_jobs");
}
