/*
 * test_jobs.c - the server's synthesis workers (tools/kztts/serve/jobs.c).
 *
 * Dataflow: jobs that record their order and session and may block on a gate are
 *        submitted to a pool; the order they ran in, the counts seen while they wait
 *        and the submit results are compared with jobs.h's contract. The kz_session
 *        functions jobs.c calls are doubles defined here (a fake session per call, the
 *        params recorded, a failure on demand), so no model is needed; they replace
 *        the library's definitions at link time because nothing else pulls them in.
 *
 * Covers: FIFO order with one worker; parallel workers each with a session of its own
 * and running at once; admission at parallel + max_queue (429) and max_queue 0; counts
 * of running and queued jobs; close refusing new jobs while queued ones still run;
 * jobs_free waiting for all; threads per session (given, and automatic); bad arguments
 * and a session that cannot be made (a message, no thread left behind).
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

struct kz_session {
    int id;
};

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
    kz_session *s = malloc(sizeof *s);
    s->id = ++sessions_made;
    *out = s;
    return KZ_OK;
}

void kz_session_free(kz_session *s) {
    if (s) {
        sessions_freed++;
        free(s);
    }
}

const char *kz_last_error(void) {
    return "no memory for the session (test double)";
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

static void test_fifo(void) {
    reset();
    char err[160];
    jobs *j = jobs_new(fake_model(), 1, 8, 2, err, sizeof err);
    CHECK(j != NULL);
    CHECK_EQ_INT(last_n_threads, 2);
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

static void test_parallel(void) {
    reset();
    int made_before = sessions_made, freed_before = sessions_freed;
    char err[160];
    jobs *j = jobs_new(fake_model(), 3, 2, 0, err, sizeof err);
    CHECK(j != NULL);
    CHECK_EQ_INT(sessions_made - made_before, 3);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int expect_threads = cpus / 3 > 0 ? (int)(cpus / 3) : 1;
    CHECK_EQ_INT(last_n_threads, expect_threads);
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
    jobs *j = jobs_new(fake_model(), 1, 0, 1, err, sizeof err);
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
    j = jobs_new(fake_model(), 1, 4, 1, err, sizeof err);
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
    CHECK(jobs_new(fake_model(), 0, 1, 0, err, sizeof err) == NULL);
    CHECK(err[0] != '\0');
    err[0] = '\0';
    CHECK(jobs_new(fake_model(), 1, -1, 0, err, sizeof err) == NULL);
    CHECK(err[0] != '\0');
    // The third session cannot be made: NULL, a message, the first two freed.
    int made_before = sessions_made, freed_before = sessions_freed;
    session_calls = 0;
    fail_session_at = 3;
    err[0] = '\0';
    CHECK(jobs_new(fake_model(), 4, 1, 1, err, sizeof err) == NULL);
    const char *message = err;
    CHECK_STR_CONTAINS(message, "session 3 of 4");
    CHECK_STR_CONTAINS(message, "test double");
    CHECK_EQ_INT(sessions_made - made_before, 2);
    CHECK_EQ_INT(sessions_freed - freed_before, 2);
    fail_session_at = 0;
}

int main(void) {
    test_fifo();
    test_parallel();
    test_no_queue_and_close();
    test_failures();
    return test_main_result("test_jobs");
}
