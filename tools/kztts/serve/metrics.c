/*
 * metrics.c - the server's Prometheus metrics (see metrics.h).
 *
 * Data flow: the HTTP layer, when a response is done -> metrics_request (a counter per
 * route and status, a duration histogram per route, the first-audio histogram, the
 * audio seconds); routes and handlers -> metrics_rejected (a counter per reason); all
 * under one mutex, in small lists that grow as new label values appear (routes and
 * reasons are a handful of literals). The workers -> metrics_frame per frame (an atomic
 * counter). GET /metrics -> metrics_render writes the text exposition format, gauges read
 * from the job queue at that moment, the batch figures from its scheduler. Without a
 * scheduler each session steps alone: the batch is 1 while any request runs, nothing
 * waits for a place in it, and every frame counted here is a step of its own, so
 * frames / steps is the mean batch size either way.
 * Buckets span what TTS latencies span: tens of milliseconds to first audio, up to
 * minutes for a long input.
 */
#define _GNU_SOURCE /* open_memstream */

#include "metrics.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double BUCKETS_S[] = {0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120};
#define N_BUCKETS (sizeof BUCKETS_S / sizeof BUCKETS_S[0])

typedef struct histogram {
    uint64_t counts[N_BUCKETS]; /* per bucket, not cumulative; cumulated when rendered */
    uint64_t count;
    double sum;
} histogram;

typedef struct route_status {
    const char *route;
    int status;
    uint64_t count;
} route_status;

typedef struct route_duration {
    const char *route;
    histogram h;
} route_duration;

typedef struct reason_count {
    const char *reason;
    uint64_t count;
} reason_count;

struct metrics {
    pthread_mutex_t lock;
    route_status *requests;
    size_t n_requests;
    route_duration *durations;
    size_t n_durations;
    reason_count *rejected;
    size_t n_rejected;
    histogram first_audio;
    double audio_s;
    atomic_llong frames; // made by the workers' sessions (used without a scheduler)
};

metrics *metrics_new(void) {
    metrics *m = calloc(1, sizeof *m);
    if (m) {
        pthread_mutex_init(&m->lock, NULL);
    }
    return m;
}

void metrics_free(metrics *m) {
    if (m) {
        pthread_mutex_destroy(&m->lock);
        free(m->requests);
        free(m->durations);
        free(m->rejected);
        free(m);
    }
}

static void observe(histogram *h, double v) {
    size_t i = 0;
    while (i < N_BUCKETS && v > BUCKETS_S[i]) {
        i++;
    }
    if (i < N_BUCKETS) {
        h->counts[i]++;
    }
    h->count++;
    h->sum += v;
}

/* Grows *items (elements of size bytes) by one zeroed element; NULL when out of memory. */
static void *grow(void *items_ptr, size_t *n, size_t size) {
    void **items = items_ptr;
    char *p = realloc(*items, (*n + 1) * size);
    if (!p) {
        return NULL;
    }
    *items = p;
    memset(p + *n * size, 0, size);
    return p + (*n)++ * size;
}

static route_status *request_entry(metrics *m, const char *route, int status) {
    for (size_t i = 0; i < m->n_requests; i++) {
        if (m->requests[i].status == status && strcmp(m->requests[i].route, route) == 0) {
            return &m->requests[i];
        }
    }
    route_status *e = grow(&m->requests, &m->n_requests, sizeof *e);
    if (e) {
        e->route = route;
        e->status = status;
    }
    return e;
}

static route_duration *duration_entry(metrics *m, const char *route) {
    for (size_t i = 0; i < m->n_durations; i++) {
        if (strcmp(m->durations[i].route, route) == 0) {
            return &m->durations[i];
        }
    }
    route_duration *e = grow(&m->durations, &m->n_durations, sizeof *e);
    if (e) {
        e->route = route;
    }
    return e;
}

void metrics_request(metrics *m, const char *route, int status, double duration_s,
                     double first_audio_s, double audio_s) {
    if (!m) {
        return;
    }
    pthread_mutex_lock(&m->lock);
    route_status *rs = request_entry(m, route, status);
    if (rs) {
        rs->count++;
    }
    route_duration *rd = duration_entry(m, route);
    if (rd) {
        observe(&rd->h, duration_s);
    }
    if (first_audio_s >= 0) {
        observe(&m->first_audio, first_audio_s);
    }
    if (audio_s > 0) {
        m->audio_s += audio_s;
    }
    pthread_mutex_unlock(&m->lock);
}

void metrics_rejected(metrics *m, const char *reason) {
    if (!m) {
        return;
    }
    pthread_mutex_lock(&m->lock);
    reason_count *e = NULL;
    for (size_t i = 0; i < m->n_rejected && !e; i++) {
        if (strcmp(m->rejected[i].reason, reason) == 0) {
            e = &m->rejected[i];
        }
    }
    if (!e && (e = grow(&m->rejected, &m->n_rejected, sizeof *e)) != NULL) {
        e->reason = reason;
    }
    if (e) {
        e->count++;
    }
    pthread_mutex_unlock(&m->lock);
}

void metrics_frame(metrics *m) {
    if (m) {
        atomic_fetch_add_explicit(&m->frames, 1, memory_order_relaxed);
    }
}

/* A label value as the exposition format wants it: backslash, quote, newline escaped. */
static void put_label(FILE *f, const char *value) {
    for (const char *p = value; *p; p++) {
        if (*p == '\\' || *p == '"') {
            fputc('\\', f);
            fputc(*p, f);
        } else if (*p == '\n') {
            fputs("\\n", f);
        } else {
            fputc(*p, f);
        }
    }
}

/* name's series for h; route NULL: no route label. */
static void put_histogram(FILE *f, const char *name, const char *route, const histogram *h) {
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= N_BUCKETS; i++) {
        cumulative += i < N_BUCKETS ? h->counts[i] : 0;
        fprintf(f, "%s_bucket{", name);
        if (route) {
            fputs("route=\"", f);
            put_label(f, route);
            fputs("\",", f);
        }
        if (i < N_BUCKETS) {
            fprintf(f, "le=\"%g\"} %llu\n", BUCKETS_S[i], (unsigned long long)cumulative);
        } else {
            fprintf(f, "le=\"+Inf\"} %llu\n", (unsigned long long)h->count);
        }
    }
    const char *open = route ? "{route=\"" : "";
    fprintf(f, "%s_sum%s", name, open);
    if (route) {
        put_label(f, route);
        fputs("\"}", f);
    }
    fprintf(f, " %.6f\n%s_count%s", h->sum, name, open);
    if (route) {
        put_label(f, route);
        fputs("\"}", f);
    }
    fprintf(f, " %llu\n", (unsigned long long)h->count);
}

static void put_counters(FILE *f, const metrics *m) {
    fputs("# HELP kztts_requests_total Requests answered, by route and HTTP status.\n"
          "# TYPE kztts_requests_total counter\n", f);
    for (size_t i = 0; i < m->n_requests; i++) {
        fputs("kztts_requests_total{route=\"", f);
        put_label(f, m->requests[i].route);
        fprintf(f, "\",status=\"%d\"} %llu\n", m->requests[i].status,
                (unsigned long long)m->requests[i].count);
    }
    fputs("# HELP kztts_requests_rejected_total Requests refused, by reason.\n"
          "# TYPE kztts_requests_rejected_total counter\n", f);
    for (size_t i = 0; i < m->n_rejected; i++) {
        fputs("kztts_requests_rejected_total{reason=\"", f);
        put_label(f, m->rejected[i].reason);
        fprintf(f, "\"} %llu\n", (unsigned long long)m->rejected[i].count);
    }
    fprintf(f, "# HELP kztts_audio_seconds_total Seconds of audio synthesized.\n"
               "# TYPE kztts_audio_seconds_total counter\n"
               "kztts_audio_seconds_total %.6f\n", m->audio_s);
}

/* The batch gauges and counters: the scheduler's, or those of sessions stepping alone. */
static void put_batch(FILE *f, metrics *m, jobs *j, int running) {
    kz_scheduler_stats st;
    if (!j || !jobs_batch_stats(j, &st)) {
        const long long frames = atomic_load_explicit(&m->frames, memory_order_relaxed);
        st = (kz_scheduler_stats){.active = running > 0, .steps = frames, .frames = frames};
    }
    fprintf(f, "# HELP kztts_batch_size Requests whose language model steps together now.\n"
               "# TYPE kztts_batch_size gauge\n"
               "kztts_batch_size %d\n"
               "# HELP kztts_batch_waiting Requests waiting for a place in the batch.\n"
               "# TYPE kztts_batch_waiting gauge\n"
               "kztts_batch_waiting %d\n"
               "# HELP kztts_batch_steps_total Language-model steps run, each one frame for "
               "every request in its batch.\n"
               "# TYPE kztts_batch_steps_total counter\n"
               "kztts_batch_steps_total %lld\n"
               "# HELP kztts_batch_frames_total Frames made by those steps (frames / steps: "
               "the mean batch size).\n"
               "# TYPE kztts_batch_frames_total counter\n"
               "kztts_batch_frames_total %lld\n",
            (int)st.active, (int)st.waiting, (long long)st.steps, (long long)st.frames);
}

char *metrics_render(metrics *m, jobs *j) {
    char *text = NULL;
    size_t n_text = 0;
    FILE *f = open_memstream(&text, &n_text);
    if (!f) {
        return NULL;
    }
    int running = 0, queued = 0;
    if (j) {
        jobs_counts(j, &running, &queued);
    }
    pthread_mutex_lock(&m->lock);
    put_counters(f, m);
    fputs("# HELP kztts_request_duration_seconds Time from a request's headers to the end "
          "of its response, by route.\n"
          "# TYPE kztts_request_duration_seconds histogram\n", f);
    for (size_t i = 0; i < m->n_durations; i++) {
        put_histogram(f, "kztts_request_duration_seconds", m->durations[i].route,
                      &m->durations[i].h);
    }
    fputs("# HELP kztts_time_to_first_audio_seconds Time from a speech request to its "
          "first audio bytes.\n"
          "# TYPE kztts_time_to_first_audio_seconds histogram\n", f);
    put_histogram(f, "kztts_time_to_first_audio_seconds", NULL, &m->first_audio);
    pthread_mutex_unlock(&m->lock);
    fprintf(f, "# HELP kztts_requests_running Speech requests synthesizing now.\n"
               "# TYPE kztts_requests_running gauge\n"
               "kztts_requests_running %d\n"
               "# HELP kztts_requests_queued Speech requests waiting for a worker.\n"
               "# TYPE kztts_requests_queued gauge\n"
               "kztts_requests_queued %d\n", running, queued);
    put_batch(f, m, j, running);
    const bool failed = ferror(f) != 0;
    if (fclose(f) != 0 || failed) {
        free(text);
        return NULL;
    }
    return text;
}
