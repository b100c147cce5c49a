/*
 * test_audio_enc.c - the streaming encoders (tools/kztts/audio_enc.c) as a server and the
 * CLI drive them, without decoding (tests/audio/test_codecs.py decodes every format with
 * independent tools and compares the audio).
 *
 * Dataflow: a 440 Hz sine plus a chirp at 24 kHz -> audio_enc_write in chunks of one
 * codec frame (1920 samples) -> a sink collecting the bytes and noting how many samples
 * had been written when each byte arrived -> checked:
 * - names and Content-Types; unknown formats and every format's bad sample rates refused
 *   with one line naming the format and the rate;
 * - streaming: nothing reaches the sink before the first samples; once 1 s was written,
 *   every format has delivered bytes before audio_enc_finish, and finish adds the rest;
 * - pcm is the samples rounded as pcm16_from_float rounds them (clipping, ties to even;
 *   the rounding `kztts synth --format s16` uses), little-endian; wav is the same bytes
 *   after a 44-byte header with maximal sizes, or exact ones when total_samples is given
 *   (and an empty stream's exact header);
 * - the same input gives the same bytes twice (Ogg serial numbers are fixed);
 * - a sink that stops fails the write with a message, and every later call; a count
 *   other than total_samples fails; audio after finish fails; freeing an unfinished
 *   encoder sends nothing more.
 */
#define _DEFAULT_SOURCE /* M_PI */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "audio_enc.h"
#include "pcm16.h"
#include "test.h"

enum { RATE = 24000, CHUNK = 1920 };

static const char *const FORMATS[] = {"wav", "pcm", "flac", "mp3", "opus", "aac"};
enum { N_FORMATS = sizeof FORMATS / sizeof FORMATS[0] };

typedef struct {
    unsigned char *bytes;
    size_t n, cap;
    size_t written;       /* samples the test had written when the bytes came */
    size_t first_at;      /* `written` when the first byte came (SIZE_MAX: none yet) */
    size_t calls;
    size_t stop_after;    /* calls accepted before returning -1 (SIZE_MAX: all) */
} sink_log;

static int collect(const void *bytes, size_t n, void *user) {
    sink_log *s = user;
    if (s->calls++ >= s->stop_after) {
        return -1;
    }
    if (s->n == 0) {
        s->first_at = s->written;
    }
    if (s->n + n > s->cap) {
        s->cap = (s->n + n) * 2;
        s->bytes = realloc(s->bytes, s->cap);
    }
    memcpy(s->bytes + s->n, bytes, n);
    s->n += n;
    return 0;
}

/* A message buffer as a pointer (CHECK_STR_CONTAINS also takes NULL). */
static const char *text(const char *buf) {
    return buf;
}

static sink_log new_log(void) {
    return (sink_log){.first_at = SIZE_MAX, .stop_after = SIZE_MAX};
}

static float *test_signal(size_t n) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        const double t = (double)i / RATE;
        x[i] = (float)(0.4 * sin(2 * M_PI * 440 * t) +
                       0.2 * sin(2 * M_PI * (200 * t + 700 * t * t)));
    }
    return x;
}

static void test_names(void) {
    const char *types[] = {"audio/wav", "audio/pcm", "audio/flac", "audio/mpeg", "audio/ogg",
                           "audio/aac"};
    for (int f = 0; f < N_FORMATS; f++) {
        CHECK(audio_enc_known(FORMATS[f]));
        CHECK_MSG(strcmp(audio_enc_content_type(FORMATS[f]), types[f]) == 0, "%s", FORMATS[f]);
    }
    const char *unknown[] = {"WAV", "ogg", "f32", "s16", "", "mp3 ", NULL};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        CHECK(!audio_enc_known(unknown[i]));
        CHECK(audio_enc_content_type(unknown[i]) == NULL);
    }
    char err[256] = "";
    sink_log s = new_log();
    CHECK(audio_enc_new("ogg", RATE, 0, collect, &s, err, sizeof err) == NULL);
    CHECK_STR_CONTAINS(text(err), "unknown audio format 'ogg'");
}

/* Each format with rates it must refuse, and one it takes. */
static void test_rates(void) {
    static const struct {
        const char *format;
        int32_t bad[5];
        int32_t good;
    } cases[] = {
        {"wav", {0, -24000, 655351, INT32_MAX, 0}, 8000},
        {"pcm", {0, -1, 1000000, 0, 0}, 1},
        {"flac", {0, -1, 700000, 0, 0}, 96000},
        {"mp3", {0, 7999, 48001, 96000, -8000}, 22050},
        {"opus", {0, 7999, 192001, 384000, -1}, 16000},
        {"aac", {0, 10000, 23000, 192000, 44101}, 44100},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        sink_log s = new_log();
        char err[256];
        for (int i = 0; i < 5; i++) {
            const int32_t rate = cases[c].bad[i];
            if (rate == 0 && i > 0) {
                continue;
            }
            err[0] = 0;
            audio_enc *e = audio_enc_new(cases[c].format, rate, 0, collect, &s, err, sizeof err);
            CHECK_MSG(e == NULL, "%s at %d Hz accepted", cases[c].format, (int)rate);
            audio_enc_free(e);
            char rate_text[32];
            snprintf(rate_text, sizeof rate_text, "(not %d)", (int)rate);
            CHECK_STR_CONTAINS(text(err), cases[c].format);
            CHECK_STR_CONTAINS(text(err), "sample rate");
            CHECK_STR_CONTAINS(text(err), rate_text);
            CHECK(strchr(err, '\n') == NULL);
        }
        audio_enc *e = audio_enc_new(cases[c].format, cases[c].good, 0, collect, &s, err, sizeof err);
        CHECK_MSG(e != NULL, "%s at %d Hz: %s", cases[c].format, (int)cases[c].good, err);
        audio_enc_free(e);
        CHECK_EQ_INT(s.calls, 0);
    }
}

/* Encodes x in CHUNK pieces into s; returns the bytes the sink had before finish. */
static size_t encode(const char *format, const float *x, size_t n, size_t total, sink_log *s) {
    char err[256];
    audio_enc *e = audio_enc_new(format, RATE, total, collect, s, err, sizeof err);
    CHECK_MSG(e != NULL, "%s: %s", format, err);
    if (!e) {
        return 0;
    }
    CHECK_MSG(s->n == 0, "%s: %zu bytes before any samples", format, s->n);
    for (size_t i = 0; i < n; i += CHUNK) {
        const size_t m = n - i < CHUNK ? n - i : CHUNK;
        s->written = i + m;
        CHECK_MSG(audio_enc_write(e, x + i, m) == 0, "%s: %s", format, audio_enc_error(e));
    }
    const size_t before = s->n;
    CHECK_MSG(audio_enc_finish(e) == 0, "%s: %s", format, audio_enc_error(e));
    CHECK(audio_enc_error(e)[0] == 0);
    audio_enc_free(e);
    return before;
}

static void test_streaming(void) {
    const size_t n = RATE * 3 / 2;
    float *x = test_signal(n);
    for (int f = 0; f < N_FORMATS; f++) {
        sink_log s = new_log();
        const size_t before = encode(FORMATS[f], x, n, 0, &s);
        CHECK_MSG(s.first_at <= RATE, "%s: first byte after %zu samples", FORMATS[f], s.first_at);
        CHECK_MSG(before > 0 && before <= s.n, "%s: %zu of %zu bytes before finish", FORMATS[f],
                  before, s.n);
        // Lossless formats have all their audio out before finish; codecs at most their
        // last frames and a trailer.
        const bool lossless = strcmp(FORMATS[f], "wav") == 0 || strcmp(FORMATS[f], "pcm") == 0;
        CHECK_MSG(lossless ? before == s.n : before >= s.n / 2, "%s: %zu of %zu bytes",
                  FORMATS[f], before, s.n);
        sink_log again = new_log();
        encode(FORMATS[f], x, n, 0, &again);
        CHECK_MSG(again.n == s.n && memcmp(again.bytes, s.bytes, s.n) == 0,
                  "%s: the same audio gave other bytes", FORMATS[f]);
        free(again.bytes);
        free(s.bytes);
    }
    free(x);
}

static uint32_t u32_at(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void check_wav_header(const unsigned char *h, uint32_t data_size) {
    CHECK(memcmp(h, "RIFF", 4) == 0 && memcmp(h + 8, "WAVEfmt ", 8) == 0);
    CHECK(memcmp(h + 36, "data", 4) == 0);
    CHECK_EQ_INT(u32_at(h + 4), data_size + 36);
    CHECK_EQ_INT(u32_at(h + 16), 16);
    CHECK_EQ_INT(h[20] | h[21] << 8, 1);  // PCM
    CHECK_EQ_INT(h[22] | h[23] << 8, 1);  // mono
    CHECK_EQ_INT(u32_at(h + 24), RATE);
    CHECK_EQ_INT(u32_at(h + 28), RATE * 2);
    CHECK_EQ_INT(h[32] | h[33] << 8, 2);
    CHECK_EQ_INT(h[34] | h[35] << 8, 16);
    CHECK_EQ_INT(u32_at(h + 40), data_size);
}

static void test_pcm_bytes(void) {
    // Edges of the rounding first: clipping, ties (to even), tiny values, NaN.
    const float edges[] = {1.0f, -1.0f, 2.0f, -2.0f, 0.5f / 32767, 1.5f / 32767, -2.5f / 32767,
                           1e-9f, -0.0f, NAN, 0.99999f, -1.00002f};
    const int16_t want[] = {32767, -32767, 32767, -32768, 0, 2, -2, 0, 0, 0, 32767, -32768};
    const size_t n_edges = sizeof edges / sizeof edges[0];
    const size_t n = 5000;
    float *x = test_signal(n);
    memcpy(x, edges, sizeof edges);
    for (size_t i = 0; i < n_edges; i++) {
        CHECK_MSG(pcm16_from_float(edges[i]) == want[i], "%g -> %d", edges[i],
                  pcm16_from_float(edges[i]));
    }
    sink_log pcm = new_log(), wav = new_log(), exact = new_log();
    encode("pcm", x, n, 0, &pcm);
    encode("wav", x, n, 0, &wav);
    encode("wav", x, n, n, &exact);
    CHECK_EQ_INT(pcm.n, 2 * n);
    bool same = pcm.n == 2 * n;
    for (size_t i = 0; same && i < n; i++) {
        const int16_t v = (int16_t)(pcm.bytes[2 * i] | pcm.bytes[2 * i + 1] << 8);
        same = v == pcm16_from_float(x[i]) && (i >= n_edges || v == want[i]);
    }
    CHECK_MSG(same, "pcm bytes differ from pcm16_from_float");
    CHECK_EQ_INT(wav.n, 44 + 2 * n);
    CHECK_EQ_INT(exact.n, 44 + 2 * n);
    if (wav.n == 44 + 2 * n && exact.n == wav.n && pcm.n == 2 * n) {
        check_wav_header(wav.bytes, 0xFFFFFFFFu - 36);
        check_wav_header(exact.bytes, (uint32_t)(2 * n));
        CHECK(memcmp(wav.bytes + 44, pcm.bytes, 2 * n) == 0);
        CHECK(memcmp(exact.bytes + 44, pcm.bytes, 2 * n) == 0);
    }
    free(pcm.bytes);
    free(wav.bytes);
    free(exact.bytes);
    free(x);
}

/* No samples at all: a complete empty stream (wav: its exact header). */
static void test_empty(void) {
    for (int f = 0; f < N_FORMATS; f++) {
        sink_log s = new_log();
        encode(FORMATS[f], NULL, 0, 0, &s);
        if (strcmp(FORMATS[f], "wav") == 0) {
            CHECK_EQ_INT(s.n, 44);
            if (s.n == 44) {
                check_wav_header(s.bytes, 0);
            }
        } else if (strcmp(FORMATS[f], "pcm") == 0) {
            CHECK_EQ_INT(s.n, 0);
        }
        free(s.bytes);
    }
}

static void test_failures(void) {
    const size_t n = RATE;
    float *x = test_signal(n);
    char err[256];
    for (int f = 0; f < N_FORMATS; f++) {
        const char *fmt = FORMATS[f];
        // The sink stops at its first call.
        sink_log s = new_log();
        s.stop_after = 0;
        audio_enc *e = audio_enc_new(fmt, RATE, 0, collect, &s, err, sizeof err);
        int rc = 0;
        for (size_t i = 0; i < n && rc == 0; i += CHUNK) {
            rc = audio_enc_write(e, x + i, CHUNK);
        }
        rc = rc == 0 ? audio_enc_finish(e) : rc;
        CHECK_MSG(rc == -1, "%s: a stopped sink went unnoticed", fmt);
        CHECK_STR_CONTAINS(audio_enc_error(e), "stopped");
        CHECK(audio_enc_write(e, x, 10) == -1);
        CHECK(audio_enc_finish(e) == -1);
        audio_enc_free(e);

        // total_samples promised and not kept, either way.
        s = new_log();
        e = audio_enc_new(fmt, RATE, 1000, collect, &s, err, sizeof err);
        CHECK(audio_enc_write(e, x, 999) == 0);
        CHECK(audio_enc_finish(e) == -1);
        CHECK_STR_CONTAINS(audio_enc_error(e), "999 samples written, 1000 announced");
        audio_enc_free(e);
        e = audio_enc_new(fmt, RATE, 1000, collect, &s, err, sizeof err);
        CHECK(audio_enc_write(e, x, 600) == 0);
        CHECK(audio_enc_write(e, x, 401) == -1);
        CHECK_STR_CONTAINS(audio_enc_error(e), "more samples than the 1000 announced");
        audio_enc_free(e);
        free(s.bytes);

        // Audio after the end.
        s = new_log();
        e = audio_enc_new(fmt, RATE, 0, collect, &s, err, sizeof err);
        CHECK(audio_enc_write(e, x, 100) == 0 && audio_enc_finish(e) == 0);
        CHECK(audio_enc_write(e, x, 100) == -1);
        CHECK_STR_CONTAINS(audio_enc_error(e), "after the end");
        audio_enc_free(e);
        free(s.bytes);

        // Freed unfinished: nothing more reaches the sink.
        s = new_log();
        e = audio_enc_new(fmt, RATE, 0, collect, &s, err, sizeof err);
        CHECK(audio_enc_write(e, x, n) == 0);
        const size_t calls = s.calls;
        audio_enc_free(e);
        CHECK_MSG(s.calls == calls, "%s: %zu sink calls after free", fmt, s.calls - calls);
        free(s.bytes);
    }
    audio_enc_free(NULL);
    CHECK(strcmp(audio_enc_error(NULL), "") == 0);
    free(x);
}

int main(void) {
    test_names();
    test_rates();
    test_streaming();
    test_pcm_bytes();
    test_empty();
    test_failures();
    return test_main_result("test_audio_enc");
}
