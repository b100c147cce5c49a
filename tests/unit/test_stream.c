/*
 * test_stream.c - the byte stream between a synthesis worker and its connection
 * (tools/kztts/serve/stream.c).
 *
 * Dataflow: a producer writes a seeded byte pattern in random pieces, a consumer reads
 *        it back at increasing offsets with random sizes (one thread, or two threads at
 *        once); what arrives is compared byte for byte with the pattern, and each
 *        state (waiting, data, done, failed, cancelled) with what stream.h promises.
 *
 * Covers: the whole pattern through two threads; the producer finishing a large
 * response before the consumer reads anything (it never waits); reads that time out;
 * the end after the last byte; close and fail before any byte (wait_start reports DONE
 * and FAILED with the error); fail after bytes (the rest is still read, then -2);
 * cancel (writes refused, reads -2, wait_start returns); an offset before the dropped
 * bytes; audio statistics; references (the last unref frees, checked under ASan).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stream.h"
#include "test.h"

/* The pattern's byte at offset pos. */
static unsigned char pattern(size_t pos) {
    return (unsigned char)((pos * 2654435761u) >> 13);
}

/* Writes bytes [from, to) of the pattern in random pieces of 1..max_piece. */
static int write_pattern(stream *s, size_t from, size_t to, size_t max_piece, uint64_t *rng) {
    unsigned char piece[4096];
    for (size_t pos = from; pos < to;) {
        size_t n = 1 + test_rng_below(rng, max_piece < sizeof piece ? max_piece : sizeof piece);
        n = n < to - pos ? n : to - pos;
        for (size_t i = 0; i < n; i++) {
            piece[i] = pattern(pos + i);
        }
        if (stream_write(s, piece, n) != 0) {
            return -1;
        }
        pos += n;
    }
    return 0;
}

/* Reads from pos to the end (-1), checking every byte; returns the bytes read or -1 on a
 * mismatch, a -2 or too many timeouts. */
static long read_all(stream *s, size_t pos, uint64_t *rng) {
    unsigned char buf[5000];
    int timeouts = 0;
    for (;;) {
        size_t max = 1 + test_rng_below(rng, sizeof buf);
        ssize_t n = stream_read(s, pos, buf, max, 100);
        if (n == -1) {
            return (long)pos;
        }
        if (n == -2 || (n == 0 && ++timeouts > 300)) {
            return -1;
        }
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] != pattern(pos + (size_t)i)) {
                fprintf(stderr, "byte %zu differs\n", pos + (size_t)i);
                return -1;
            }
        }
        pos += (size_t)n;
    }
}

typedef struct producer {
    stream *s;
    size_t n_bytes;
    uint64_t seed;
    int rc;
} producer;

static void *produce(void *arg) {
    producer *p = arg;
    uint64_t rng = p->seed;
    p->rc = write_pattern(p->s, 0, p->n_bytes, 3000, &rng);
    stream_close(p->s);
    stream_unref(p->s);
    return NULL;
}

static void test_two_threads(void) {
    for (uint64_t seed = 1; seed <= 4; seed++) {
        stream *s = stream_new();
        CHECK(s != NULL);
        stream_ref(s); // the producer's reference
        producer p = {.s = s, .n_bytes = 300000 * seed, .seed = seed * 77};
        pthread_t t;
        CHECK(pthread_create(&t, NULL, produce, &p) == 0);
        http_error e;
        stream_state st;
        int waits = 0;
        while ((st = stream_wait_start(s, 100, &e)) == STREAM_WAITING && waits++ < 300) {
        }
        CHECK_EQ_INT(st, STREAM_DATA);
        uint64_t rng = seed;
        CHECK_EQ_INT(read_all(s, 0, &rng), (long)p.n_bytes);
        pthread_join(t, NULL);
        CHECK_EQ_INT(p.rc, 0);
        stream_unref(s);
    }
}

static void test_producer_never_waits(void) {
    // A client that reads nothing: the whole response is written first, then read.
    stream *s = stream_new();
    uint64_t rng = 5;
    CHECK_EQ_INT(write_pattern(s, 0, 8 << 20, 4096, &rng), 0);
    stream_close(s);
    http_error e;
    CHECK_EQ_INT(stream_wait_start(s, 0, &e), STREAM_DATA);
    CHECK_EQ_INT(read_all(s, 0, &rng), 8 << 20);
    // The end stays the end.
    unsigned char b[4];
    CHECK_EQ_INT(stream_read(s, 8 << 20, b, sizeof b, 0), -1);
    stream_unref(s);
}

static void test_timeouts_and_end(void) {
    stream *s = stream_new();
    http_error e;
    unsigned char buf[16];
    CHECK_EQ_INT(stream_wait_start(s, 10, &e), STREAM_WAITING);
    CHECK_EQ_INT(stream_read(s, 0, buf, sizeof buf, 10), 0);
    CHECK_EQ_INT(stream_write(s, "abc", 3), 0);
    CHECK_EQ_INT(stream_write(s, "", 0), 0);
    CHECK_EQ_INT(stream_wait_start(s, 10, &e), STREAM_DATA);
    CHECK_EQ_INT(stream_read(s, 0, buf, 2, 10), 2);
    CHECK(memcmp(buf, "ab", 2) == 0);
    CHECK_EQ_INT(stream_read(s, 2, buf, sizeof buf, 10), 1);
    CHECK(buf[0] == 'c');
    CHECK_EQ_INT(stream_read(s, 3, buf, sizeof buf, 10), 0); // nothing yet
    CHECK_EQ_INT(stream_write(s, "defg", 4), 0);
    // An offset before the sent (dropped) bytes cannot be served; one beyond the end either.
    CHECK_EQ_INT(stream_read(s, 0, buf, sizeof buf, 10), -2);
    CHECK_EQ_INT(stream_read(s, 9, buf, sizeof buf, 10), -2);
    CHECK_EQ_INT(stream_read(s, 3, buf, sizeof buf, 10), 4);
    CHECK(memcmp(buf, "defg", 4) == 0);
    stream_close(s);
    CHECK_EQ_INT(stream_write(s, "h", 1), -1); // nothing after the end
    CHECK_EQ_INT(stream_read(s, 7, buf, sizeof buf, 10), -1);
    CHECK_EQ_INT(stream_wait_start(s, 10, &e), STREAM_DATA);
    stream_fail(s, &(http_error){.status = 500}); // too late: the stream ended well
    CHECK_EQ_INT(stream_read(s, 7, buf, sizeof buf, 10), -1);
    stream_unref(s);
}

static void test_close_or_fail_before_bytes(void) {
    stream *s = stream_new();
    http_error e = {0};
    stream_close(s);
    CHECK_EQ_INT(stream_wait_start(s, 10, &e), STREAM_DONE);
    unsigned char buf[4];
    CHECK_EQ_INT(stream_read(s, 0, buf, sizeof buf, 10), -1);
    stream_unref(s);

    s = stream_new();
    http_error fail = {.status = 400, .type = "invalid_request_error", .param = "language",
                       .code = "invalid_value", .message = "unknown language 'xx'"};
    stream_fail(s, &fail);
    stream_fail(s, &(http_error){.status = 500}); // the first failure counts
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(stream_wait_start(s, 10, &e), STREAM_FAILED);
    CHECK_EQ_INT(e.status, 400);
    CHECK(e.param && strcmp(e.param, "language") == 0);
    CHECK(e.code && strcmp(e.code, "invalid_value") == 0);
    CHECK(strcmp(e.message, "unknown language 'xx'") == 0);
    CHECK_EQ_INT(stream_write(s, "a", 1), -1);
    CHECK_EQ_INT(stream_read(s, 0, buf, sizeof buf, 10), -2);
    stream_unref(s);
}

static void test_fail_after_bytes(void) {
    stream *s = stream_new();
    uint64_t rng = 9;
    CHECK_EQ_INT(write_pattern(s, 0, 10000, 700, &rng), 0);
    stream_fail(s, &(http_error){.status = 500, .message = "codec failed"});
    http_error e = {0};
    // Bytes went out before the failure: the response has started, the body gets cut.
    CHECK_EQ_INT(stream_wait_start(s, 10, &e), STREAM_DATA);
    unsigned char buf[20000];
    ssize_t n = stream_read(s, 0, buf, sizeof buf, 10);
    CHECK_EQ_INT(n, 10000);
    bool same = true;
    for (ssize_t i = 0; i < n; i++) {
        same = same && buf[i] == pattern((size_t)i);
    }
    CHECK(same);
    CHECK_EQ_INT(stream_read(s, 10000, buf, sizeof buf, 10), -2);
    stream_unref(s);
}

typedef struct waiter {
    stream *s;
    stream_state state;
    ssize_t read_rc;
} waiter;

static void *wait_then_read(void *arg) {
    waiter *w = arg;
    http_error e;
    w->state = stream_wait_start(w->s, 30000, &e);
    unsigned char buf[8];
    w->read_rc = stream_read(w->s, 0, buf, sizeof buf, 30000);
    return NULL;
}

static void test_cancel(void) {
    stream *s = stream_new();
    CHECK(!stream_cancelled(s));
    // A consumer blocked in its waits is released by the cancel, long before its timeout.
    waiter w = {.s = s, .state = STREAM_DATA, .read_rc = 1};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, wait_then_read, &w) == 0);
    stream_cancel(s);
    pthread_join(t, NULL);
    CHECK_EQ_INT(w.state, STREAM_WAITING);
    CHECK_EQ_INT(w.read_rc, -2);
    CHECK(stream_cancelled(s));
    CHECK_EQ_INT(stream_write(s, "x", 1), -1);
    stream_close(s);
    stream_unref(s);
}

static void test_stats_and_refs(void) {
    stream *s = stream_new();
    CHECK(stream_first_audio_ms(s) < 0);
    CHECK(stream_audio_seconds(s) == 0);
    stream_add_audio(s, 0.08);
    stream_add_audio(s, 1.92);
    CHECK_NEAR(stream_audio_seconds(s), 2.0, 1e-12);
    stream_mark_first_audio(s);
    double first = stream_first_audio_ms(s);
    CHECK(first >= 0);
    stream_mark_first_audio(s); // only the first mark counts
    CHECK(stream_first_audio_ms(s) == first);
    // Three holders; the stream lives until the last lets go (ASan sees a use after free).
    stream_ref(s);
    stream_ref(s);
    stream_unref(s);
    stream_unref(s);
    CHECK_NEAR(stream_audio_seconds(s), 2.0, 1e-12);
    stream_unref(s);
    stream_unref(NULL);
}

int main(void) {
    test_two_threads();
    test_producer_never_waits();
    test_timeouts_and_end();
    test_close_or_fail_before_bytes();
    test_fail_after_bytes();
    test_cancel();
    test_stats_and_refs();
    return test_main_result("test_stream");
}
