/*
 * test_metrics.c - tools/kztts/serve/metrics.c: the exposition text parsed back. Every
 * line is a HELP, a TYPE or a well-formed sample (a metric name, labels with escaped
 * values, a number); every metric of metrics.h is typed as it says; counters, sums and
 * counts hold what was recorded (also from several threads at once); each histogram's
 * buckets grow with le and end at +Inf == _count; label values are escaped; the gauges
 * come from the job queue (test doubles of jobs_counts and jobs_batch_stats here); the
 * batch figures are the scheduler's when there is one, and without one the batch is 1
 * while a request runs and every frame is a step.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/metrics.h"
#include "test.h"

/* The job queue's counts, as a test double: metrics_render reads only these. */
struct jobs {
    int running, queued;
    bool batched;            // has a scheduler
    kz_scheduler_stats stats; // its counters
};

void jobs_counts(jobs *j, int *running, int *queued) {
    *running = j->running;
    *queued = j->queued;
}

bool jobs_batch_stats(jobs *j, kz_scheduler_stats *out) {
    *out = j->batched ? j->stats : (kz_scheduler_stats){0};
    return j->batched;
}

static bool name_char(char c, bool first) {
    return isalpha((unsigned char)c) || c == '_' || c == ':' || (!first && isdigit((unsigned char)c));
}

/* Skips a metric or label name at p; NULL when there is none. */
static const char *skip_name(const char *p) {
    if (!name_char(*p, true)) {
        return NULL;
    }
    while (name_char(*p, false)) {
        p++;
    }
    return p;
}

/* Whether line is a well-formed sample: name{label="value",...} number. */
static bool sample_ok(const char *line) {
    const char *p = skip_name(line);
    if (!p) {
        return false;
    }
    if (*p == '{') {
        p++;
        while (*p != '}') {
            if (!(p = skip_name(p)) || *p++ != '=' || *p++ != '"') {
                return false;
            }
            while (*p != '"') {
                if (*p == '\0' || *p == '\n') {
                    return false;
                }
                if (*p == '\\') {
                    p++;
                    if (*p != '\\' && *p != '"' && *p != 'n') {
                        return false;
                    }
                }
                p++;
            }
            p++;
            if (*p == ',') {
                p++;
            } else if (*p != '}') {
                return false;
            }
        }
        p++;
    }
    if (*p++ != ' ') {
        return false;
    }
    char *end;
    strtod(p, &end);
    return end != p && *end == '\0';
}

/* Checks every line of text; returns the number of lines. */
static int check_lines(const char *text) {
    int n_lines = 0;
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        CHECK_MSG(nl != NULL, "the text does not end with a newline");
        if (!nl) {
            break;
        }
        char line[512];
        size_t n = (size_t)(nl - p) < sizeof line - 1 ? (size_t)(nl - p) : sizeof line - 1;
        memcpy(line, p, n);
        line[n] = '\0';
        bool ok = strncmp(line, "# HELP kztts_", 13) == 0 || strncmp(line, "# TYPE kztts_", 13) == 0 ||
                  (strncmp(line, "kztts_", 6) == 0 && sample_ok(line));
        CHECK_MSG(ok, "malformed line: %s", line);
        n_lines++;
        p = nl + 1;
    }
    return n_lines;
}

/* The value of the sample named exactly series; -1 when absent (each appears once). */
static double value(const char *text, const char *series) {
    size_t n = strlen(series);
    int found = 0;
    double v = -1;
    for (const char *p = text; (p = strstr(p, series)) != NULL; p += n) {
        if ((p == text || p[-1] == '\n') && p[n] == ' ') {
            v = strtod(p + n + 1, NULL);
            found++;
        }
    }
    CHECK_MSG(found <= 1, "%s appears %d times", series, found);
    return v;
}

static void check_type(const char *text, const char *name, const char *type) {
    char line[160];
    snprintf(line, sizeof line, "# TYPE %s %s\n", name, type);
    CHECK_STR_CONTAINS(text, line);
    snprintf(line, sizeof line, "# HELP %s ", name);
    CHECK_STR_CONTAINS(text, line);
}

/* The histogram name{labels,le=...}: buckets non-decreasing, +Inf == _count == count,
 * _sum == sum. labels is "" or `route="x",`. */
static void check_histogram(const char *text, const char *name, const char *labels,
                            double count, double sum) {
    char key[256];
    snprintf(key, sizeof key, "%s_bucket{%sle=\"", name, labels);
    double last = 0;
    int n_buckets = 0;
    bool saw_inf = false;
    for (const char *p = text; (p = strstr(p, key)) != NULL; p++) {
        const char *le = p + strlen(key);
        const char *close = strstr(le, "\"} ");
        if (!close) {
            break;
        }
        double v = strtod(close + 3, NULL);
        CHECK_MSG(v >= last, "%s: bucket %.*s holds %g after %g", name, (int)(close - le), le, v, last);
        CHECK_MSG(!saw_inf, "%s: a bucket after +Inf", name);
        if (strncmp(le, "+Inf", 4) == 0) {
            saw_inf = true;
            CHECK_NEAR(v, count, 0);
        }
        last = v;
        n_buckets++;
    }
    CHECK_MSG(n_buckets >= 10, "%s{%s}: %d buckets", name, labels, n_buckets);
    CHECK(saw_inf);
    char series[256];
    const size_t n_labels = strlen(labels);
    snprintf(series, sizeof series, "%s_count%s%.*s%s", name, n_labels ? "{" : "",
             n_labels ? (int)n_labels - 1 : 0, labels, n_labels ? "}" : "");
    CHECK_NEAR(value(text, series), count, 0);
    snprintf(series, sizeof series, "%s_sum%s%.*s%s", name, n_labels ? "{" : "",
             n_labels ? (int)n_labels - 1 : 0, labels, n_labels ? "}" : "");
    CHECK_NEAR(value(text, series), sum, 1e-4);
}

/* The bucket with upper bound le holds what was at most le: 0.3 s lands in le="0.5". */
static void check_bucket_placement(const char *text) {
    CHECK_NEAR(value(text, "kztts_request_duration_seconds_bucket{route=\"speech\",le=\"0.25\"}"), 0, 0);
    CHECK_NEAR(value(text, "kztts_request_duration_seconds_bucket{route=\"speech\",le=\"0.5\"}"), 1, 0);
    CHECK_NEAR(value(text, "kztts_request_duration_seconds_bucket{route=\"speech\",le=\"2.5\"}"), 2, 0);
    CHECK_NEAR(value(text, "kztts_request_duration_seconds_bucket{route=\"speech\",le=\"120\"}"), 2, 0);
    CHECK_NEAR(value(text, "kztts_request_duration_seconds_bucket{route=\"speech\",le=\"+Inf\"}"), 3, 0);
}

static void test_render(void) {
    metrics *m = metrics_new();
    CHECK(m != NULL);
    metrics_request(m, "speech", 200, 0.3, 0.12, 2.5);
    metrics_request(m, "speech", 200, 1.5, 0.4, 4.0);
    metrics_request(m, "speech", 429, 500.0, -1, 0);
    metrics_request(m, "health", 200, 0.001, -1, 0);
    metrics_request(m, "we\"ird\\route\n", 404, 0.002, -1, 0);
    metrics_rejected(m, "queue_full");
    metrics_rejected(m, "queue_full");
    metrics_rejected(m, "auth");
    jobs j = {.running = 2, .queued = 7};
    char *text = metrics_render(m, &j);
    CHECK(text != NULL);
    if (!text) {
        metrics_free(m);
        return;
    }
    CHECK(check_lines(text) > 40);
    check_type(text, "kztts_requests_total", "counter");
    check_type(text, "kztts_request_duration_seconds", "histogram");
    check_type(text, "kztts_time_to_first_audio_seconds", "histogram");
    check_type(text, "kztts_audio_seconds_total", "counter");
    check_type(text, "kztts_requests_rejected_total", "counter");
    check_type(text, "kztts_requests_running", "gauge");
    check_type(text, "kztts_requests_queued", "gauge");
    CHECK_NEAR(value(text, "kztts_requests_total{route=\"speech\",status=\"200\"}"), 2, 0);
    CHECK_NEAR(value(text, "kztts_requests_total{route=\"speech\",status=\"429\"}"), 1, 0);
    CHECK_NEAR(value(text, "kztts_requests_total{route=\"health\",status=\"200\"}"), 1, 0);
    CHECK_NEAR(value(text, "kztts_requests_total{route=\"we\\\"ird\\\\route\\n\",status=\"404\"}"), 1, 0);
    CHECK_NEAR(value(text, "kztts_requests_rejected_total{reason=\"queue_full\"}"), 2, 0);
    CHECK_NEAR(value(text, "kztts_requests_rejected_total{reason=\"auth\"}"), 1, 0);
    CHECK_NEAR(value(text, "kztts_audio_seconds_total"), 6.5, 1e-6);
    CHECK_NEAR(value(text, "kztts_requests_running"), 2, 0);
    CHECK_NEAR(value(text, "kztts_requests_queued"), 7, 0);
    check_histogram(text, "kztts_request_duration_seconds", "route=\"speech\",", 3, 501.8);
    check_histogram(text, "kztts_request_duration_seconds", "route=\"health\",", 1, 0.001);
    check_histogram(text, "kztts_time_to_first_audio_seconds", "", 2, 0.52);
    check_bucket_placement(text);
    free(text);
    metrics_free(m);
}

static void check_batch(const char *text, double size, double waiting, double steps,
                        double frames) {
    check_type(text, "kztts_batch_size", "gauge");
    check_type(text, "kztts_batch_waiting", "gauge");
    check_type(text, "kztts_batch_steps_total", "counter");
    check_type(text, "kztts_batch_frames_total", "counter");
    CHECK_NEAR(value(text, "kztts_batch_size"), size, 0);
    CHECK_NEAR(value(text, "kztts_batch_waiting"), waiting, 0);
    CHECK_NEAR(value(text, "kztts_batch_steps_total"), steps, 0);
    CHECK_NEAR(value(text, "kztts_batch_frames_total"), frames, 0);
}

/* With a scheduler its counters are shown as they are; without, the frames the workers
 * reported are both the steps and the frames, and the batch is 1 while any request runs. */
static void test_batch(void) {
    metrics *m = metrics_new();
    for (int i = 0; i < 5; i++) {
        metrics_frame(m);
    }
    jobs batched = {.running = 3, .queued = 1, .batched = true,
                    .stats = {.active = 3, .waiting = 2, .steps = 40, .frames = 110,
                              .prefills = 3}};
    char *text = metrics_render(m, &batched);
    CHECK(text != NULL);
    if (text) {
        check_lines(text);
        check_batch(text, 3, 2, 40, 110);
        free(text);
    }
    jobs alone = {.running = 2, .queued = 4};
    text = metrics_render(m, &alone);
    CHECK(text != NULL);
    if (text) {
        check_batch(text, 1, 0, 5, 5);
        free(text);
    }
    jobs idle = {0};
    text = metrics_render(m, &idle);
    CHECK(text != NULL);
    if (text) {
        check_batch(text, 0, 0, 5, 5);
        free(text);
    }
    metrics_frame(NULL);
    metrics_free(m);
}

static void test_empty(void) {
    metrics *m = metrics_new();
    char *text = metrics_render(m, NULL);
    CHECK(text != NULL);
    if (text) {
        check_lines(text);
        CHECK_NEAR(value(text, "kztts_requests_running"), 0, 0);
        CHECK_NEAR(value(text, "kztts_audio_seconds_total"), 0, 0);
        check_histogram(text, "kztts_time_to_first_audio_seconds", "", 0, 0);
        check_batch(text, 0, 0, 0, 0);
        free(text);
    }
    metrics_free(m);
    metrics_free(NULL);
}

enum { N_THREADS = 4, N_EACH = 2000 };

static void *record(void *arg) {
    metrics *m = arg;
    for (int i = 0; i < N_EACH; i++) {
        metrics_request(m, i % 2 ? "speech" : "voices", 200, 0.01 * (i % 50), 0.1, 0.5);
        metrics_rejected(m, "timeout");
        metrics_frame(m);
    }
    return NULL;
}

static void test_threads(void) {
    metrics *m = metrics_new();
    pthread_t t[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        pthread_create(&t[i], NULL, record, m);
    }
    for (int i = 0; i < N_THREADS; i++) {
        pthread_join(t[i], NULL);
    }
    char *text = metrics_render(m, NULL);
    CHECK(text != NULL);
    if (text) {
        check_lines(text);
        CHECK_NEAR(value(text, "kztts_requests_total{route=\"speech\",status=\"200\"}"), N_THREADS * N_EACH / 2, 0);
        CHECK_NEAR(value(text, "kztts_requests_rejected_total{reason=\"timeout\"}"), N_THREADS * N_EACH, 0);
        CHECK_NEAR(value(text, "kztts_audio_seconds_total"), N_THREADS * N_EACH * 0.5, 1e-3);
        CHECK_NEAR(value(text, "kztts_batch_frames_total"), N_THREADS * N_EACH, 0);
        check_histogram(text, "kztts_time_to_first_audio_seconds", "", N_THREADS * N_EACH, N_THREADS * N_EACH * 0.1);
        free(text);
    }
    metrics_free(m);
}

int main(void) {
    test_render();
    test_empty();
    test_batch();
    test_threads();
    return test_main_result("test_metrics");
}
