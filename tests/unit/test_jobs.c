/*
 * test_jobs.c - the server's synthesis workers (tools/kztts/serve/jobs.c).
 *
 * Dataflow: jobs that record their order and session and may block on a gate are
 *        submitted to a pool; the order they ran in, the counts seen while they wait
 *        and the submit results are compared with jobs.h's contract. The kz_session
 *        functions jobs.c calls are doubles defined here (a fake session per call, the
 *        params recorded, a failure on demand), so no model is needed; they replace
 *        the library's definitions at link time because nothing else pulls them in;
 *        so are the kz_scheduler functions.
 *
 * Covers: FIFO order with one worker; parallel workers each with a session of its own
 * and running at once; admission at parallel + max_queue (429) and max_queue 0; counts
 * of running and queued jobs; close refusing new jobs while queued ones still run;
 * jobs_free waiting for all; threads per session (given, and automatic); batching: one
 * scheduler with the given threads and batch, every session attached to it with one
 * thread of its own, its counters passed on, the sessions freed before it, none
 * at batch 1; bad arguments, a session or a scheduler that cannot be made (a message, no
 * thread left behind).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jobs.h"
#include "test.h"

/* ---- kz_session doubles ------------------------------------------------------ */

static int sessions_made;     // successful kz_session_new calls
static int sessions_freed;
static int fail_session_at;   // the call (1-based) that fails, 0 = none
static int session_calls;
static int32_t last_n_threads;
static kz_scheduler *last_scheduler; // the params' scheduler of the latest session
static int sessions_alive;

struct kz_session {
    int id;
};

/* ---- kz_scheduler doubles ---------------------------------------------------- */

struct kz_scheduler {
    kz_scheduler_params params;
};

static int schedulers_made;
static int schedulers_freed;
static int sessions_alive_at_scheduler_free;
static bool fail_scheduler;
static const kz_scheduler_stats STATS = {.active = 2, .waiting = 1, .steps = 17, .frames = 30,
                                         .prefills = 3};

void kz_scheduler_default_params(kz_scheduler_params *p) {
    memset(p, 0, sizeof *p);
}

kz_status kz_scheduler_new(const kz_model *model, const kz_scheduler_params *p,
                           kz_scheduler **out) {
    (void)model;
    *out = NULL;
    if (fail_scheduler) {
        return KZ_STATUS_OUT_OF_MEMORY;
    }
    kz_scheduler *s = malloc(sizeof *s);
    s->params = *p;
    schedulers_made++;
    *out = s;
    return KZ_OK;
}

void kz_scheduler_free(kz_scheduler *s) {
    if (s) {
        sessions_alive_at_scheduler_free = sessions_alive;
        schedulers_freed++;
        free(s);
    }
}

void kz_scheduler_get_stats(const kz_scheduler *s, kz_scheduler_stats *out) {
    (void)s;
    *out = STATS;
}

void kz_session_default_params(kz_session_params *p) {
    memset(p, 0, sizeof *p);
}

kz_status kz_session_new(const kz_model *model, const kz_session_params *p, kz_session **out) {
    (void)model;
    *out = NULL;
    if (++session_calls == fail_session_at) {
        return KZ_STATUS_OUT_OF_MEMORY;
    }
    last_n_threads = p ? p->n_threads : -1;
    last_scheduler = p ? p->scheduler : NULL;
    kz_session *s = malloc(sizeof *s);
    s->id = ++sessions_made;
    sessions_alive++;
    *out = s;
    return KZ_OK;
}

void kz_session_free(kz_session *s) {
    if (s) {
        sessions_freed++;
        sessions_alive--;
        free(s);
    }
}

const char *kz_last_error(void) {
    return "no memory (test double)";
}

/* ---- jobs under test ----------------------------------------------------------- */

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static bool gate_open;
static int n_inside;          // jobs inside task() right now
static int order[64];
static int n_order;
static const kz_session *sessions_seen[64];

typedef struct task_arg {
    int index;
    bool wait_gate;
} task_arg;

static void task(kz_session *session, void *arg) {
    task_arg *t = arg;
    pthread_mutex_lock(&mutex);
    n_inside++;
    order[n_order] = t->index;
    sessions_seen[n_order] = session;
    n_order++;
    pthread_cond_broadcast(&cond);
    while (t->wait_gate && !gate_open) {
        pthread_cond_wait(&cond, &mutex);
    }
    n_inside--;
    pthread_mutex_unlock(&mutex);
}

static void reset(void) {
    pthread_mutex_lock(&mutex);
    gate_open = false;
    n_inside = 0;
    n_order = 0;
    pthread_mutex_unlock(&mutex);
}

static void open_gate(void) {
    pthread_mutex_lock(&mutex);
    gate_open = true;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mutex);
}

/* Waits (at most 30 s) until n jobs are inside task(); returns whether they are. */
static bool wait_inside(int n) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30;
    pthread_mutex_lock(&mutex);
    int rc = 0;
    while (n_inside < n && rc == 0) {
        rc = pthread_cond_timedwait(&cond, &mutex, &until);
    }
    bool ok = n_inside >= n;
    pthread_mutex_unlock(&mutex);
    return ok;
}

static const kz_model *fake_model(void) {
    static int dummy;
    return (const kz_model *)&dummy;
}

static jobs *make(int parallel, int max_queue, int n_threads, int max_batch, char *err,
                  size_t n_err) {
    const jobs_params p = {.parallel = parallel, .max_queue = max_queue,
                           .n_threads = n_threads, .max_batch = max_batch};
    return jobs_new(fake_model(), &p, err, n_err);
}

/* Threads of a session without a scheduler by default: the online CPUs shared. */
static int cpus_per(int parallel) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus / parallel > 0 ? (int)(cpus / parallel) : 1;
}

static void test_fifo(void) {
    reset();
    char err[160];
    jobs *j = make(1, 8, 2, 1, err, sizeof err);
    CHECK(j != NULL);
    CHECK_EQ_INT(last_n_threads, 2);
    CHECK(last_scheduler == NULL); // batch 1: each session steps alone
    kz_scheduler_stats st = {.active = 9};
    CHECK(!jobs_batch_stats(j, &st));
    CHECK_EQ_INT(st.active, 0);
    task_arg args[10];
    args[0] = (task_arg){.index = 0, .wait_gate = true};
    CHECK_EQ_INT(jobs_submit(j, task, &args[0]), JOBS_OK);
    CHECK(wait_inside(1));
    for (int i = 1; i <= 8; i++) {
        args[i] = (task_arg){.index = i};
        CHECK_EQ_INT(jobs_submit(j, task, &args[i]), JOBS_OK);
    }
    int running = -1, queued = -1;
    jobs_counts(j, &running, &queued);
    CHECK_EQ_INT(running, 1);
    CHECK_EQ_INT(queued, 8);
    // One running and max_queue waiting: the next one is refused and never runs.
    args[9] = (task_arg){.index = 9};
    CHECK_EQ_INT(jobs_submit(j, task, &args[9]), JOBS_FULL);
    open_gate();
    jobs_free(j); // waits for every queued job
    CHECK_EQ_INT(n_order, 9);
    for (int i = 0; i < 9 && i < n_order; i++) {
        CHECK_EQ_INT(order[i], i);
    }
}

/* Without batching --threads is the server's total: each of the workers gets its share,
 * at least one. */
static void test_threads_shared(void) {
    const int cases[][3] = {{4, 2, 2}, {5, 2, 2}, {2, 3, 1}, {8, 1, 8}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        reset();
        char err[160];
        jobs *j = make(cases[i][1], 2, cases[i][0], 1, err, sizeof err);
        CHECK(j != NULL);
        CHECK_EQ_INT(last_n_threads, cases[i][2]);
        jobs_free(j);
    }
}

static void test_parallel(void) {
    reset();
    int made_before = sessions_made, freed_before = sessions_freed;
    char err[160];
    jobs *j = make(3, 2, 0, 1, err, sizeof err);
    CHECK(j != NULL);
    CHECK_EQ_INT(sessions_made - made_before, 3);
    CHECK_EQ_INT(last_n_threads, cpus_per(3));
    CHECK(last_scheduler == NULL);
    task_arg args[6];
    for (int i = 0; i < 3; i++) {
        args[i] = (task_arg){.index = i, .wait_gate = true};
        CHECK_EQ_INT(jobs_submit(j, task, &args[i]), JOBS_OK);
    }
    CHECK(wait_inside(3)); // all three at once
    for (int i = 3; i < 5; i++) {
        args[i] = (task_arg){.index = i};
        CHECK_EQ_INT(jobs_submit(j, task, &args[i]), JOBS_OK);
    }
    args[5] = (task_arg){.index = 5};
    CHECK_EQ_INT(jobs_submit(j, task, &args[5]), JOBS_FULL);
    int running = -1, queued = -1;
    jobs_counts(j, &running, &queued);
    CHECK_EQ_INT(running, 3);
    CHECK_EQ_INT(queued, 2);
    // The three running jobs have three different sessions.
    pthread_mutex_lock(&mutex);
    CHECK(sessions_seen[0] && sessions_seen[1] && sessions_seen[2]);
    CHECK(sessions_seen[0] != sessions_seen[1] && sessions_seen[1] != sessions_seen[2] &&
          sessions_seen[0] != sessions_seen[2]);
    pthread_mutex_unlock(&mutex);
    open_gate();
    jobs_free(j);
    CHECK_EQ_INT(n_order, 5);
    CHECK_EQ_INT(sessions_freed - freed_before, 3);
}

static void test_no_queue_and_close(void) {
    reset();
    char err[160];
    jobs *j = make(1, 0, 1, 1, err, sizeof err);
    CHECK(j != NULL);
    task_arg a0 = {.index = 0, .wait_gate = true}, a1 = {.index = 1};
    CHECK_EQ_INT(jobs_submit(j, task, &a0), JOBS_OK);
    CHECK(wait_inside(1));
    CHECK_EQ_INT(jobs_submit(j, task, &a1), JOBS_FULL); // max_queue 0: nothing waits
    jobs_close(j);
    CHECK_EQ_INT(jobs_submit(j, task, &a1), JOBS_CLOSED);
    open_gate();
    jobs_free(j);
    CHECK_EQ_INT(n_order, 1);

    // Queued jobs still run after close.
    reset();
    j = make(1, 4, 1, 1, err, sizeof err);
    task_arg args[4];
    args[0] = (task_arg){.index = 0, .wait_gate = true};
    CHECK_EQ_INT(jobs_submit(j, task, &args[0]), JOBS_OK);
    CHECK(wait_inside(1));
    for (int i = 1; i < 4; i++) {
        args[i] = (task_arg){.index = i};
        CHECK_EQ_INT(jobs_submit(j, task, &args[i]), JOBS_OK);
    }
    jobs_close(j);
    CHECK_EQ_INT(jobs_submit(j, task, &args[1]), JOBS_CLOSED);
    int running = 0, queued = 0;
    jobs_counts(j, &running, &queued);
    CHECK_EQ_INT(queued, 3);
    open_gate();
    jobs_free(j);
    CHECK_EQ_INT(n_order, 4);
    jobs_free(NULL);
}

static void test_failures(void) {
    char err[160] = "";
    CHECK(make(0, 1, 0, 1, err, sizeof err) == NULL);
    CHECK(err[0] != '\0');
    err[0] = '\0';
    CHECK(make(1, -1, 0, 1, err, sizeof err) == NULL);
    CHECK(err[0] != '\0');
    // The third session cannot be made: NULL, a message, the first two freed.
    int made_before = sessions_made, freed_before = sessions_freed;
    session_calls = 0;
    fail_session_at = 3;
    err[0] = '\0';
    CHECK(make(4, 1, 1, 1, err, sizeof err) == NULL);
    const char *message = err;
    CHECK_STR_CONTAINS(message, "session 3 of 4");
    CHECK_STR_CONTAINS(message, "test double");
    CHECK_EQ_INT(sessions_made - made_before, 2);
    CHECK_EQ_INT(sessions_freed - freed_before, 2);
    fail_session_at = 0;
    // A batch out of 1..64.
    err[0] = '\0';
    CHECK(make(2, 1, 0, 0, err, sizeof err) == NULL);
    CHECK(err[0] != '\0');
    CHECK(make(2, 1, 0, 65, err, sizeof err) == NULL);
    // The scheduler cannot be made: NULL, a message, no session made.
    made_before = sessions_made;
    fail_scheduler = true;
    err[0] = '\0';
    CHECK(make(2, 1, 0, 2, err, sizeof err) == NULL);
    CHECK_STR_CONTAINS(message, "scheduler");
    CHECK_STR_CONTAINS(message, "test double");
    CHECK_EQ_INT(sessions_made - made_before, 0);
    fail_scheduler = false;
    // A session after the scheduler fails: both freed, the sessions first.
    int sch_made = schedulers_made, sch_freed = schedulers_freed;
    session_calls = 0;
    fail_session_at = 2;
    CHECK(make(3, 1, 0, 3, err, sizeof err) == NULL);
    CHECK_STR_CONTAINS(message, "session 2 of 3");
    CHECK_EQ_INT(schedulers_made - sch_made, 1);
    CHECK_EQ_INT(schedulers_freed - sch_freed, 1);
    CHECK_EQ_INT(sessions_alive_at_scheduler_free, 0);
    fail_session_at = 0;
}

/* Batch >= 2: one scheduler with the server's threads and the batch, every session on
 * it with one thread; jobs run as before; the sessions go first. */
static void test_batched(void) {
    reset();
    int sch_made = schedulers_made, sch_freed = schedulers_freed;
    int made_before = sessions_made, freed_before = sessions_freed;
    char err[160];
    jobs *j = make(3, 2, 2, 3, err, sizeof err);
    CHECK(j != NULL);
    if (!j) {
        return;
    }
    CHECK_EQ_INT(schedulers_made - sch_made, 1);
    CHECK_EQ_INT(sessions_made - made_before, 3);
    CHECK(last_scheduler != NULL);
    if (last_scheduler) {
        CHECK_EQ_INT(last_scheduler->params.n_threads, 2);
        CHECK_EQ_INT(last_scheduler->params.max_batch, 3);
    }
    CHECK_EQ_INT(last_n_threads, 1);
    kz_scheduler_stats st;
    CHECK(jobs_batch_stats(j, &st));
    CHECK(memcmp(&st, &STATS, sizeof st) == 0);
    task_arg args[3];
    for (int i = 0; i < 3; i++) {
        args[i] = (task_arg){.index = i, .wait_gate = true};
        CHECK_EQ_INT(jobs_submit(j, task, &args[i]), JOBS_OK);
    }
    CHECK(wait_inside(3)); // the three requests are in flight together
    open_gate();
    jobs_free(j);
    CHECK_EQ_INT(n_order, 3);
    CHECK_EQ_INT(sessions_freed - freed_before, 3);
    CHECK_EQ_INT(schedulers_freed - sch_freed, 1);
    CHECK_EQ_INT(sessions_alive_at_scheduler_free, 0);
    // Threads 0: the scheduler's default; one worker may still have a scheduler.
    j = make(1, 0, 0, 2, err, sizeof err);
    CHECK(j != NULL);
    CHECK(last_scheduler != NULL && last_scheduler->params.n_threads == 0);
    CHECK_EQ_INT(last_n_threads, 1);
    jobs_free(j);
}

int main(void) {
    test_fifo();
    test_batched();
    test_parallel();
    test_threads_shared();
    test_no_queue_and_close();
    test_failures();
    return test_main_result("test_jobs");
}
