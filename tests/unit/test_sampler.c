/*
 * test_sampler.c - logits processing and sampling (synth/sampler.c) against a
 * reference written here from the sampler's contract (HF's warpers):
 *   - kz_sample with temperature, top-k (ties at the threshold survive) and top-p
 *     returns the token of a plain reference (top-k threshold from a full sort, the same
 *     nucleus rule, the same softmax sum and walk in index order) for the same uniform
 *     draw, over random logits with many ties and -inf entries, and leaves the same
 *     masked logits;
 *   - greedy is the first argmax; top-k 1 always returns it;
 *   - the draws follow the softmax: logits {0, ln 3} give the second token 75 % of
 *     20,000 draws (within 1.5 points), a token masked by top-k or top-p is never drawn;
 *   - kz_logits_talker: the repetition penalty divides positive and multiplies negative
 *     logits of seen tokens, EOS masking and the suppressed tail (EOS spared).
 */
#include "synth/sampler.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x2545f4914f6cdd1dull;

static int cmp_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

typedef struct pair {
    float v;
    int32_t i;
} pair;

static int cmp_pair(const void *a, const void *b) {
    const pair *x = a, *y = b;
    if (x->v != y->v) {
        return (x->v > y->v) - (x->v < y->v);
    }
    return (x->i > y->i) - (x->i < y->i);
}

/* The contract, step by step; u is the uniform draw kz_sample would take. */
static int32_t reference(float *x, size_t n, const kz_sampling *s, float u) {
    for (size_t i = 0; s->temperature != 1.0f && i < n; i++) {
        x[i] = x[i] / s->temperature;
    }
    if (s->top_k > 0 && (size_t)s->top_k < n) {
        float *sorted = malloc(n * sizeof *sorted);
        memcpy(sorted, x, n * sizeof *sorted);
        qsort(sorted, n, sizeof *sorted, cmp_desc);
        const float thr = sorted[s->top_k - 1];
        for (size_t i = 0; i < n; i++) {
            x[i] = x[i] < thr ? -INFINITY : x[i];
        }
        free(sorted);
    }
    if (s->top_p < 1.0f) {
        pair *p = malloc(n * sizeof *p);
        size_t m = 0;
        float max = -INFINITY;
        for (size_t i = 0; i < n; i++) {
            if (x[i] > -INFINITY) {
                p[m++] = (pair){x[i], (int32_t)i};
                max = x[i] > max ? x[i] : max;
            }
        }
        qsort(p, m, sizeof *p, cmp_pair);
        double total = 0, run = 0;
        for (size_t j = 0; j < m; j++) {
            total += exp((double)p[j].v - max);
        }
        for (size_t j = 0; j + 1 < m; j++) {
            run += exp((double)p[j].v - max) / total;
            if (run <= 1.0 - s->top_p) {
                x[p[j].i] = -INFINITY;
            }
        }
        free(p);
    }
    float max = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        max = x[i] > max ? x[i] : max;
    }
    float sum = 0.0f;
    for (size_t i = 0; i < n; i++) {
        sum += x[i] > -INFINITY ? expf(x[i] - max) : 0.0f;
    }
    float target = u * sum, run = 0.0f;
    int32_t last = 0;
    for (size_t i = 0; i < n; i++) {
        const float e = x[i] > -INFINITY ? expf(x[i] - max) : 0.0f;
        if (e > 0.0f) { // a weight that underflowed to 0 is never drawn
            run += e;
            last = (int32_t)i;
            if (target < run) {
                return (int32_t)i;
            }
        }
    }
    return last;
}

/* Logits on a coarse grid (many ties), some -inf. */
static void random_logits(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        x[i] = test_rng_below(&rng, 20) == 0 ? -INFINITY
                                             : (float)test_rng_below(&rng, 400) / 16.0f - 12.0f;
    }
}

static void test_against_reference(void) {
    static const size_t sizes[] = {7, 64, 2048, 3072};
    static const int32_t ks[] = {0, 1, 5, 50, 64};
    static const float ps[] = {1.0f, 0.95f, 0.5f};
    static const float temps[] = {1.0f, 0.9f, 0.3f};
    int agree = 1, masks = 1, cases = 0;
    for (size_t a = 0; a < 4; a++) {
        const size_t n = sizes[a];
        float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
        void *scratch = malloc(kz_sampler_scratch_bytes(n));
        for (int round = 0; round < 30; round++) {
            const kz_sampling s = {.temperature = temps[round % 3],
                                   .top_k = ks[test_rng_below(&rng, 5)],
                                   .top_p = ps[test_rng_below(&rng, 3)]};
            random_logits(x, n);
            x[test_rng_below(&rng, n)] = 3.0f; // at least one finite logit
            memcpy(y, x, n * sizeof *y);
            kz_rng r;
            kz_rng_seed(&r, (uint64_t)round * 77 + n);
            kz_rng peek = r;
            const float u = kz_rng_uniform(&peek);
            const int32_t got = kz_sample(x, n, &s, &r, scratch);
            const int32_t want = reference(y, n, &s, u);
            agree &= got == want;
            masks &= memcmp(x, y, n * sizeof *x) == 0;
            cases++;
        }
        free(x);
        free(y);
        free(scratch);
    }
    CHECK_MSG(agree, "kz_sample differs from the reference in some of %d cases", cases);
    CHECK_MSG(masks, "kz_sample leaves other logits than the reference");
}

static void test_greedy_and_top1(void) {
    float x[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, -INFINITY};
    float scratch[6 * 4];
    kz_rng r;
    kz_rng_seed(&r, 3);
    const kz_sampling greedy = {.greedy = true, .temperature = 1.0f, .top_p = 1.0f};
    CHECK_EQ_INT(kz_sample(x, 6, &greedy, &r, scratch), 1);
    const kz_sampling top1 = {.temperature = 0.7f, .top_k = 1, .top_p = 1.0f};
    for (int i = 0; i < 50; i++) {
        float y[6] = {0.5f, 1.0f, -1.0f, 2.5f, 1.0f, -INFINITY};
        CHECK_EQ_INT(kz_sample(y, 6, &top1, &r, scratch), 3);
    }
}

static void test_distribution(void) {
    const kz_sampling plain = {.temperature = 1.0f, .top_p = 1.0f};
    const kz_sampling k2 = {.temperature = 1.0f, .top_k = 2, .top_p = 1.0f};
    const kz_sampling p = {.temperature = 1.0f, .top_p = 0.7f};
    float scratch[4 * 4];
    kz_rng r;
    kz_rng_seed(&r, 11);
    int second = 0, masked_k = 0, masked_p = 0;
    const int draws = 20000;
    for (int i = 0; i < draws; i++) {
        float two[2] = {0.0f, logf(3.0f)};
        second += kz_sample(two, 2, &plain, &r, scratch) == 1;
        float three[3] = {1.0f, 0.0f, 1.0f}; // top-2 keeps both 1s, drops index 1
        masked_k += kz_sample(three, 3, &k2, &r, scratch) == 1;
        float four[4] = {0.0f, 5.0f, 0.1f, -0.2f}; // index 1 holds 97 % of the mass
        masked_p += kz_sample(four, 4, &p, &r, scratch) != 1;
    }
    const double share = (double)second / draws;
    CHECK_MSG(fabs(share - 0.75) < 0.015, "P(second) %.4f, expected 0.75", share);
    CHECK_EQ_INT(masked_k, 0);
    CHECK_EQ_INT(masked_p, 0);
}

static void test_talker_logits(void) {
    float x[6] = {2.0f, -2.0f, 1.0f, 0.5f, 3.0f, 4.0f};
    const uint8_t seen[6] = {1, 1, 0, 0, 0, 0};
    kz_logits_talker(x, 6, seen, 2.0f, true, 3, 4);
    CHECK(x[0] == 1.0f && x[1] == -4.0f && x[2] == 1.0f);
    CHECK(x[3] == -INFINITY);                      // EOS masked
    CHECK(x[4] == -INFINITY && x[5] == -INFINITY); // suppressed tail
    float y[6] = {2.0f, -2.0f, 1.0f, 0.5f, 3.0f, 4.0f};
    kz_logits_talker(y, 6, seen, 1.0f, false, 4, 4);
    CHECK(y[0] == 2.0f && y[1] == -2.0f);     // no penalty
    CHECK(y[4] == 3.0f && y[5] == -INFINITY); // EOS in the tail is spared
}

int main(void) {
    test_against_reference();
    test_greedy_and_top1();
    test_distribution();
    test_talker_logits();
    return test_main_result("test_sampler");
}
