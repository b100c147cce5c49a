/*
 * test.h - minimal assertion and tolerance macros for kztts tests, and the seeded
 * generators of their data (xorshift64, and xorshift64* for the kernel tests).
 *
 * A test program calls CHECK* macros; each failure prints file:line and the
 * values, and bumps a counter. test_main_result() prints the plain
 * "N passed, N failed" line and returns the exit code for CTest.
 */
#ifndef KZ_TEST_H
#define KZ_TEST_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Deterministic test data: xorshift64 over a state each test seeds itself. */
static inline uint64_t test_rng_u64(uint64_t *state) {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

/* Uniform in [-1, 1), 24 random bits. */
static inline float test_rng_float(uint64_t *state) {
    return (float)((test_rng_u64(state) >> 40) & 0xFFFFFF) / 8388608.0f - 1.0f;
}

/* Uniform in [0, n). */
static inline size_t test_rng_below(uint64_t *state, size_t n) {
    return (size_t)(test_rng_u64(state) >> 11) % n;
}

/* The kernel tests' data: xorshift64* (12, 25, 27), 32 bits a draw, over a state each
 * test seeds itself. */
static inline uint32_t test_xs_u32(uint64_t *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (uint32_t)((*state * 0x2545f4914f6cdd1dull) >> 32);
}

/* Uniform in [lo, hi), 24 random bits. */
static inline float test_xs_float(uint64_t *state, float lo, float hi) {
    return lo + (hi - lo) * (float)(test_xs_u32(state) >> 8) * (1.0f / 16777216.0f);
}

/* Uniform integer in [lo, hi]. */
static inline size_t test_xs_size(uint64_t *state, size_t lo, size_t hi) {
    return lo + test_xs_u32(state) % (hi - lo + 1);
}

/* malloc'ed [n] (at least one element) uniform in [lo, hi). */
static inline float *test_xs_array(uint64_t *state, size_t n, float lo, float hi) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        p[i] = test_xs_float(state, lo, hi);
    }
    return p;
}

/* malloc'ed copy of x[n] (at least one element). */
/* n samples of speech-like audio at rate Hz: harmonics of a wavering pitch under a
 * syllable envelope, a little noise (malloc'ed; caller frees). The model tests' reference
 * recordings. */
static inline float *test_speech_like(size_t n, int rate, uint64_t seed) {
    const double two_pi = 6.28318530717958647692;
    float *x = malloc(n * sizeof *x);
    double phase = 0;
    for (size_t i = 0; i < n; i++) {
        const double t = (double)i / rate;
        phase += two_pi * (140 + 20 * sin(two_pi * 0.7 * t)) / rate;
        double s = 0;
        for (int k = 1; k < 12; k++) {
            s += sin(k * phase) / k;
        }
        const double env = 0.5 + 0.5 * pow(sin(two_pi * 3 * t), 2);
        x[i] = (float)(0.1 * s * env + 0.01 * test_rng_float(&seed));
    }
    return x;
}

static inline float *test_copy_floats(const float *x, size_t n) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    memcpy(p, x, n * sizeof(float));
    return p;
}

static int test_passed_count;
static int test_failed_count;

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (cond) {                                                                      \
            test_passed_count++;                                                         \
        } else {                                                                         \
            test_failed_count++;                                                         \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);      \
        }                                                                                \
    } while (0)

#define CHECK_MSG(cond, ...)                                                             \
    do {                                                                                 \
        if (cond) {                                                                      \
            test_passed_count++;                                                         \
        } else {                                                                         \
            test_failed_count++;                                                         \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                                \
            fputc('\n', stderr);                                                         \
        }                                                                                \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                               \
    CHECK_MSG((long long)(a) == (long long)(b), "%lld != %lld", (long long)(a), (long long)(b))

#define CHECK_NEAR(a, b, tol)                                                            \
    CHECK_MSG(fabs((double)(a) - (double)(b)) <= (tol), "%.9g vs %.9g (tol %.3g)",       \
              (double)(a), (double)(b), (double)(tol))

#define CHECK_STR_CONTAINS(hay, needle)                                                  \
    CHECK_MSG((hay) != NULL && strstr((hay), (needle)) != NULL, "\"%s\" lacks \"%s\"",    \
              (hay) ? (hay) : "(null)", (needle))

/* Prints the closing line CTest logs show and returns the process exit code. */
static inline int test_main_result(const char *name) {
    printf("%s: %d passed, %d failed\n", name, test_passed_count, test_failed_count);
    return test_failed_count == 0 && test_passed_count > 0 ? 0 : 1;
}

#endif
