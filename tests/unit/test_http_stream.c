/*
 * test_http_stream.c - tools/kztts/serve/http.c on loopback with its own route_dispatch
 * and a test double of stream.h (a growing buffer under a mutex, as the contract says):
 *   - a streamed response goes out chunked, whole, with its X-Request-Id, and its audio
 *     seconds and first-audio time reach the metrics;
 *   - a stream that fails after bytes went out cuts the response (no last chunk);
 *   - a client that disconnects mid-stream cancels the stream (the producer stops);
 *   - a handler that blocks longer than the idle timeout (waiting in a queue) still
 *     answers, and so does a stream that pauses longer than it between chunks;
 *   - a blocked handler sees http_client_gone once its client left;
 *   - a buffered response, an error envelope, added headers, the query and the body;
 *   - http_stop ends a stream that is still being produced;
 *   - a stream that outlasts --request-timeout is cut, cancelled and counted.
 * A watchdog alarm ends the program if anything hangs.
 */
#define _GNU_SOURCE /* strcasestr */

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "serve/http.h"
#include "serve/metrics.h"
#include "serve/serve.h"
#include "serve/stream.h"
#include "test.h"

/* ---- the test double of stream.h ---- */

struct stream {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *bytes;
    size_t n_bytes, cap;
    bool done, failed, cancelled;
    http_error err;
    int refs;
    double audio_s, first_ms, t0;
};

static atomic_int n_streams_freed;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static void sleep_ms(int ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

stream *stream_new(void) {
    stream *s = calloc(1, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->refs = 1;
    s->first_ms = -1;
    s->t0 = now_ms();
    return s;
}

void stream_ref(stream *s) {
    pthread_mutex_lock(&s->mu);
    s->refs++;
    pthread_mutex_unlock(&s->mu);
}

void stream_unref(stream *s) {
    pthread_mutex_lock(&s->mu);
    const bool last = --s->refs == 0;
    pthread_mutex_unlock(&s->mu);
    if (last) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
        free(s->bytes);
        free(s);
        atomic_fetch_add(&n_streams_freed, 1);
    }
}

int stream_write(stream *s, const void *bytes, size_t n) {
    pthread_mutex_lock(&s->mu);
    if (s->cancelled) {
        pthread_mutex_unlock(&s->mu);
        return -1;
    }
    if (s->n_bytes + n > s->cap) {
        s->cap = (s->n_bytes + n) * 2;
        s->bytes = realloc(s->bytes, s->cap);
    }
    memcpy(s->bytes + s->n_bytes, bytes, n);
    s->n_bytes += n;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

void stream_close(stream *s) {
    pthread_mutex_lock(&s->mu);
    s->done = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void stream_fail(stream *s, const http_error *e) {
    pthread_mutex_lock(&s->mu);
    s->failed = true;
    s->err = *e;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

bool stream_cancelled(const stream *s) {
    stream *m = (stream *)s;
    pthread_mutex_lock(&m->mu);
    bool c = m->cancelled;
    pthread_mutex_unlock(&m->mu);
    return c;
}

void stream_add_audio(stream *s, double seconds) {
    pthread_mutex_lock(&s->mu);
    s->audio_s += seconds;
    pthread_mutex_unlock(&s->mu);
}

void stream_mark_first_audio(stream *s) {
    pthread_mutex_lock(&s->mu);
    if (s->first_ms < 0) {
        s->first_ms = now_ms() - s->t0;
    }
    pthread_mutex_unlock(&s->mu);
}

stream_state stream_wait_start(stream *s, int timeout_ms, http_error *e) {
    (void)s;
    (void)timeout_ms;
    (void)e;
    return STREAM_DATA; // the handlers here start streams without waiting
}

ssize_t stream_read(stream *s, size_t pos, void *buf, size_t max, int timeout_ms) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += (long)timeout_ms * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&s->mu);
    while (s->n_bytes <= pos && !s->done && !s->failed &&
           pthread_cond_timedwait(&s->cv, &s->mu, &until) == 0) {
    }
    ssize_t got = 0;
    if (s->n_bytes > pos) {
        size_t n = s->n_bytes - pos < max ? s->n_bytes - pos : max;
        memcpy(buf, s->bytes + pos, n);
        got = (ssize_t)n;
    } else if (s->failed) {
        got = -2;
    } else if (s->done) {
        got = -1;
    }
    pthread_mutex_unlock(&s->mu);
    return got;
}

void stream_cancel(stream *s) {
    pthread_mutex_lock(&s->mu);
    s->cancelled = true;
    pthread_mutex_unlock(&s->mu);
}

double stream_audio_seconds(const stream *s) {
    return s->audio_s;
}

double stream_first_audio_ms(const stream *s) {
    return s->first_ms;
}

/* metrics.c reads the job queue's gauges; no queue here. */
void jobs_counts(jobs *j, int *running, int *queued) {
    (void)j;
    *running = 0;
    *queued = 0;
}

bool jobs_batch_stats(jobs *j, kz_scheduler_stats *out) {
    (void)j;
    *out = (kz_scheduler_stats){0};
    return false;
}

/* ---- producers and the route_dispatch under test ---- */

typedef struct producer {
    stream *st;
    int n_chunks;  /* < 0: until cancelled */
    int pause_ms;
    bool fail;     /* fail after the chunks */
} producer;

static atomic_int n_producers_done;
static atomic_bool producer_saw_cancel;
static atomic_bool handler_saw_gone;

static void *produce(void *arg) {
    producer *p = arg;
    char chunk[1000];
    for (int i = 0; p->n_chunks < 0 || i < p->n_chunks; i++) {
        memset(chunk, 'a' + i % 26, sizeof chunk);
        if (i == 0) {
            stream_mark_first_audio(p->st);
        }
        if (stream_write(p->st, chunk, sizeof chunk) != 0) {
            atomic_store(&producer_saw_cancel, true);
            break;
        }
        stream_add_audio(p->st, 0.5);
        sleep_ms(p->pause_ms);
    }
    if (p->fail) {
        http_error e;
        http_error_set(&e, 500, "server_error", NULL, NULL, "the synthesis failed");
        stream_fail(p->st, &e);
    } else {
        stream_close(p->st);
    }
    stream_unref(p->st);
    free(p);
    atomic_fetch_add(&n_producers_done, 1);
    return NULL;
}

static void start_stream(http_req *r, int n_chunks, int pause_ms, bool fail) {
    producer *p = calloc(1, sizeof *p);
    p->st = stream_new();
    p->n_chunks = n_chunks;
    p->pause_ms = pause_ms;
    p->fail = fail;
    stream_ref(p->st); // the producer's
    http_send_stream(r, 200, "audio/pcm", p->st);
    stream_unref(p->st); // the handler's
    pthread_t t;
    pthread_create(&t, NULL, produce, p);
    pthread_detach(t);
}

void route_dispatch(server *s, http_req *r) {
    const char *path = http_path(r);
    if (strcmp(path, "/stream") == 0) {
        http_set_route(r, "speech");
        start_stream(r, 8, 1, false);
    } else if (strcmp(path, "/fail") == 0) {
        http_set_route(r, "speech");
        start_stream(r, 3, 1, true);
    } else if (strcmp(path, "/endless") == 0) {
        start_stream(r, -1, 5, false);
    } else if (strcmp(path, "/pause") == 0) { // pauses longer than the idle timeout
        start_stream(r, 2, (int)(s->cfg->idle_timeout * 1000) + 1500, false);
    } else if (strcmp(path, "/queue") == 0) { // waits as a queued request would
        sleep_ms((int)(s->cfg->idle_timeout * 1000) + 1500);
        http_send(r, 200, "text/plain", "late", 4);
    } else if (strcmp(path, "/gone") == 0) {
        for (int i = 0; i < 3000 && !http_client_gone(r); i++) {
            sleep_ms(10);
        }
        atomic_store(&handler_saw_gone, http_client_gone(r));
        http_send(r, 200, "text/plain", "nobody", 6);
    } else if (strcmp(path, "/echo") == 0) {
        size_t n;
        const char *body = http_body(r, &n);
        char text[256];
        snprintf(text, sizeof text, "%s|%s|%zu|%s|%s", http_method(r),
                 http_query(r, "q") ? http_query(r, "q") : "-", n, body,
                 http_header(r, "x-test") ? http_header(r, "x-test") : "-");
        http_add_header(r, "Retry-After", "7");
        http_send(r, 200, "text/plain", text, strlen(text));
    } else {
        http_error e;
        http_error_set(&e, 404, "invalid_request_error", "path", "not_found", "no %s", path);
        http_send_error(r, &e);
    }
}

/* ---- a raw HTTP/1.1 client ---- */

static int port;

static int connect_server(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Sends request and reads until the server closes; malloc'ed, NUL-terminated. */
static char *exchange(const char *request, size_t *n_out) {
    int fd = connect_server();
    CHECK(fd >= 0);
    if (fd < 0) {
        return NULL;
    }
    CHECK(send(fd, request, strlen(request), 0) == (ssize_t)strlen(request));
    size_t n = 0, cap = 1 << 16;
    char *buf = malloc(cap + 1);
    ssize_t got;
    while ((got = recv(fd, buf + n, cap - n, 0)) > 0) {
        n += (size_t)got;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
        }
    }
    close(fd);
    buf[n] = '\0';
    *n_out = n;
    return buf;
}

/* The chunked body after the headers of resp, decoded into out; whether it ended with
 * the last (zero) chunk. */
static bool dechunk(const char *resp, char *out, size_t *n_out) {
    const char *p = strstr(resp, "\r\n\r\n");
    *n_out = 0;
    if (!p) {
        return false;
    }
    p += 4;
    for (;;) {
        char *end;
        unsigned long n = strtoul(p, &end, 16);
        if (end == p || strncmp(end, "\r\n", 2) != 0) {
            return false;
        }
        p = end + 2;
        if (n == 0) {
            return strncmp(p, "\r\n", 2) == 0;
        }
        if (strlen(p) < n + 2) {
            return false;
        }
        memcpy(out + *n_out, p, n);
        *n_out += n;
        p += n + 2;
    }
}

static const char *get(const char *path, char *req, size_t n_req) {
    snprintf(req, n_req, "GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", path);
    return req;
}

/* ---- the cases ---- */

static void test_stream_ok(metrics *m) {
    char req[256];
    size_t n;
    char *resp = exchange(get("/stream", req, sizeof req), &n);
    CHECK_STR_CONTAINS(resp, "HTTP/1.1 200");
    CHECK(resp && strcasestr(resp, "Transfer-Encoding: chunked") != NULL);
    CHECK(resp && strcasestr(resp, "Content-Type: audio/pcm") != NULL);
    CHECK(resp && strcasestr(resp, "X-Request-Id: req-") != NULL);
    char *body = malloc(n + 1);
    size_t n_body;
    CHECK(resp && dechunk(resp, body, &n_body));
    CHECK_EQ_INT(n_body, 8000);
    bool right = n_body == 8000;
    for (size_t i = 0; right && i < n_body; i++) {
        right = body[i] == 'a' + (char)(i / 1000);
    }
    CHECK_MSG(right, "the streamed bytes differ from what was written");
    free(body);
    free(resp);
    // The request completes just after its last byte: wait for its metrics, bounded.
    bool seen = false;
    for (int i = 0; i < 500 && !seen; i++) {
        char *text = metrics_render(m, NULL);
        seen = strstr(text, "kztts_requests_total{route=\"speech\",status=\"200\"} 1\n") != NULL;
        if (seen) {
            CHECK_STR_CONTAINS(text, "kztts_audio_seconds_total 4.000000\n");
            CHECK_STR_CONTAINS(text, "kztts_time_to_first_audio_seconds_count 1\n");
        }
        free(text);
        sleep_ms(10);
    }
    CHECK_MSG(seen, "the streamed request never reached the metrics");
}

static void test_stream_fail(void) {
    char req[256];
    size_t n;
    char *resp = exchange(get("/fail", req, sizeof req), &n);
    CHECK_STR_CONTAINS(resp, "HTTP/1.1 200");
    char *body = malloc(n + 1);
    size_t n_body;
    CHECK_MSG(resp && !dechunk(resp, body, &n_body), "a failed stream ended like a whole one");
    CHECK(n_body <= 3000);
    free(body);
    free(resp);
}

static void test_disconnect_cancels(void) {
    atomic_store(&producer_saw_cancel, false);
    int fd = connect_server();
    char req[256];
    get("/endless", req, sizeof req);
    CHECK(send(fd, req, strlen(req), 0) > 0);
    char buf[4096];
    CHECK(recv(fd, buf, sizeof buf, 0) > 0); // the stream is flowing
    close(fd);
    for (int i = 0; i < 1000 && !atomic_load(&producer_saw_cancel); i++) {
        sleep_ms(10);
    }
    CHECK_MSG(atomic_load(&producer_saw_cancel), "a client that left did not cancel its stream");
}

static void test_idle_timeout_spares_busy_work(void) {
    char req[256];
    size_t n;
    char *resp = exchange(get("/queue", req, sizeof req), &n);
    CHECK_STR_CONTAINS(resp, "HTTP/1.1 200");
    CHECK_STR_CONTAINS(resp, "late");
    free(resp);
    resp = exchange(get("/pause", req, sizeof req), &n);
    CHECK_STR_CONTAINS(resp, "HTTP/1.1 200");
    char *body = malloc(n + 1);
    size_t n_body;
    CHECK_MSG(resp && dechunk(resp, body, &n_body), "a paused stream was cut");
    CHECK_EQ_INT(n_body, 2000);
    free(body);
    free(resp);
}

static void test_client_gone(void) {
    int fd = connect_server();
    char req[256];
    get("/gone", req, sizeof req);
    CHECK(send(fd, req, strlen(req), 0) > 0);
    sleep_ms(100);
    close(fd);
    for (int i = 0; i < 1000 && !atomic_load(&handler_saw_gone); i++) {
        sleep_ms(10);
    }
    CHECK_MSG(atomic_load(&handler_saw_gone), "http_client_gone never saw the client leave");
}

static void test_buffered(void) {
    size_t n;
    char *resp = exchange("POST /echo?q=hi%20there HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                          "X-Test: yes\r\nContent-Length: 5\r\n\r\nhello", &n);
    CHECK_STR_CONTAINS(resp, "HTTP/1.1 200");
    CHECK_STR_CONTAINS(resp, "POST|hi there|5|hello|yes");
    CHECK(resp && strcasestr(resp, "Retry-After: 7") != NULL);
    CHECK(resp && strcasestr(resp, "Content-Length: 25") != NULL);
    free(resp);
    resp = exchange("GET /nope HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", &n);
    CHECK_STR_CONTAINS(resp, "HTTP/1.1 404");
    const char *json = resp ? strstr(resp, "\r\n\r\n") : NULL;
    cJSON *root = json ? cJSON_Parse(json + 4) : NULL;
    cJSON *err = cJSON_GetObjectItem(root, "error");
    CHECK(cJSON_IsString(cJSON_GetObjectItem(err, "message")));
    CHECK(cJSON_IsString(cJSON_GetObjectItem(err, "type")));
    CHECK(cJSON_IsString(cJSON_GetObjectItem(err, "param")));
    CHECK(cJSON_IsString(cJSON_GetObjectItem(err, "code")));
    CHECK_EQ_INT(cJSON_GetArraySize(err), 4);
    cJSON_Delete(root);
    free(resp);
}

static void test_stop_mid_stream(void) {
    atomic_store(&producer_saw_cancel, false);
    int fd = connect_server();
    char req[256];
    get("/endless", req, sizeof req);
    CHECK(send(fd, req, strlen(req), 0) > 0);
    char buf[4096];
    CHECK(recv(fd, buf, sizeof buf, 0) > 0);
    CHECK(http_open_connections() >= 1);
    http_stop();
    for (int i = 0; i < 1000 && !atomic_load(&producer_saw_cancel); i++) {
        sleep_ms(10);
    }
    CHECK_MSG(atomic_load(&producer_saw_cancel), "http_stop left a stream running");
    close(fd);
}

/* A second daemon whose requests may take one second: an endless stream is cut. */
static void test_request_timeout(metrics *m) {
    serve_config cfg = {.host = "127.0.0.1", .port = 0, .parallel = 1, .max_queue = 4,
                        .max_body = 1 << 20, .request_timeout = 1, .idle_timeout = 30};
    server s = {.cfg = &cfg, .metrics = m};
    char err[256];
    CHECK_MSG(http_start(&s, &port, err, sizeof err) == 0, "http_start: %s", err);
    atomic_store(&producer_saw_cancel, false);
    char req[256];
    size_t n;
    char *resp = exchange(get("/endless", req, sizeof req), &n); // returns once it is cut
    char *body = malloc(n + 1);
    size_t n_body;
    CHECK_MSG(resp && !dechunk(resp, body, &n_body), "a stream past the request timeout ended whole");
    free(body);
    free(resp);
    for (int i = 0; i < 1000 && !atomic_load(&producer_saw_cancel); i++) {
        sleep_ms(10);
    }
    CHECK_MSG(atomic_load(&producer_saw_cancel), "the timed-out stream was not cancelled");
    char *text = metrics_render(m, NULL);
    CHECK_STR_CONTAINS(text, "kztts_requests_rejected_total{reason=\"timeout\"} 1\n");
    free(text);
    http_stop();
}

int main(void) {
    alarm(240); // a hang fails the test instead of holding CTest
    signal(SIGPIPE, SIG_IGN);
    serve_config cfg = {.host = "127.0.0.1", .port = 0, .parallel = 1, .max_queue = 4,
                        .max_body = 1 << 20, .request_timeout = 600, .idle_timeout = 1,
                        .quiet = false};
    metrics *m = metrics_new();
    server s = {.cfg = &cfg, .metrics = m};
    char err[256];
    if (http_start(&s, &port, err, sizeof err) != 0) {
        fprintf(stderr, "http_start: %s\n", err);
        return 1;
    }
    CHECK(port > 0);
    test_stream_ok(m);
    test_stream_fail();
    test_disconnect_cancels();
    test_idle_timeout_spares_busy_work();
    test_client_gone();
    test_buffered();
    test_stop_mid_stream();
    test_request_timeout(m);
    for (int i = 0; i < 500 && atomic_load(&n_producers_done) < 6; i++) {
        sleep_ms(10);
    }
    CHECK_EQ_INT(atomic_load(&n_producers_done), 6);
    CHECK_EQ_INT(atomic_load(&n_streams_freed), 6);
    CHECK_EQ_INT(http_open_connections(), 0);
    metrics_free(m);
    return test_main_result("test_http_stream");
}
