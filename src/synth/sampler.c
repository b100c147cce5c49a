/*
 * sampler.c - logits processing and sampling (see sampler.h).
 *
 * Sampling flow: temperature divides the logits; top-k keeps values >= the
 * k-th largest (found with a k-element min-heap in one pass; ties at the
 * threshold survive, as in HF); top-p sorts the
 * survivors ascending, and masks every token whose running softmax sum is
 * <= 1 - top_p, always keeping the best; softmax in float; one uniform draw
 * walks the cumulative distribution in index order.
 */
#include "synth/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void kz_rng_seed(kz_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) {
        r->s[i] = splitmix64(&seed);
    }
}

static uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

float kz_rng_uniform(kz_rng *r) {
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return (float)(out >> 40) * (1.0f / 16777216.0f);
}

void kz_logits_talker(float *logits, size_t n, const uint8_t *seen, float repetition_penalty,
                      bool mask_eos, int32_t eos_id, int32_t suppress_from) {
    if (repetition_penalty != 1.0f) {
        for (size_t i = 0; i < n; i++) {
            if (seen[i]) {
                logits[i] = logits[i] < 0 ? logits[i] * repetition_penalty
                                          : logits[i] / repetition_penalty;
            }
        }
    }
    if (mask_eos && eos_id >= 0 && (size_t)eos_id < n) {
        logits[eos_id] = -INFINITY;
    }
    for (size_t i = suppress_from < 0 ? n : (size_t)suppress_from; i < n; i++) {
        if ((int32_t)i != eos_id) {
            logits[i] = -INFINITY;
        }
    }
}

static int32_t argmax(const float *x, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++) {
        if (x[i] > x[best]) {
            best = i;
        }
    }
    return (int32_t)best;
}

/* Restores the min-heap property of h[0..k) below slot i. */
static void sift_down(float *h, size_t k, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < k && h[l] < h[m]) {
            m = l;
        }
        if (r < k && h[r] < h[m]) {
            m = r;
        }
        if (m == i) {
            return;
        }
        float t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

/* The k-th largest (1 <= k <= n) of x[0..n), counting equal values: a min-heap of the k
 * largest seen so far (heap: k floats), one comparison for most elements. The value, not
 * an order, is the result, so it equals any other selection's (a sort's). */
static float kth_largest(const float *x, size_t n, size_t k, float *heap) {
    memcpy(heap, x, k * sizeof *heap);
    for (size_t i = k / 2; i-- > 0;) {
        sift_down(heap, k, i);
    }
    for (size_t i = k; i < n; i++) {
        if (x[i] > heap[0]) {
            heap[0] = x[i];
            sift_down(heap, k, 0);
        }
    }
    return heap[0];
}

/* Masks values below the k-th largest (ties at the threshold survive, as HF). */
static void top_k(float *x, size_t n, size_t k, float *tmp) {
    if (k == 0 || k >= n) {
        return;
    }
    float thr = kth_largest(x, n, k, tmp);
    for (size_t i = 0; i < n; i++) {
        if (x[i] < thr) {
            x[i] = -INFINITY;
        }
    }
}

typedef struct scored {
    float value;
    int32_t index;
} scored;

/* Ascending by value, then by index (a deterministic order for ties). */
static int cmp_scored(const void *a, const void *b) {
    const scored *x = a, *y = b;
    if (x->value != y->value) {
        return (x->value > y->value) - (x->value < y->value);
    }
    return (x->index > y->index) - (x->index < y->index);
}

/* Nucleus filter as HF's TopPLogitsWarper. */
static void top_p(float *x, size_t n, float p, scored *buf) {
    if (p >= 1.0f) {
        return;
    }
    size_t m = 0;
    float max = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        if (x[i] > -INFINITY) {
            buf[m++] = (scored){x[i], (int32_t)i};
            max = x[i] > max ? x[i] : max;
        }
    }
    qsort(buf, m, sizeof *buf, cmp_scored);
    double total = 0;
    for (size_t j = 0; j < m; j++) {
        total += exp((double)buf[j].value - max);
    }
    double run = 0;
    for (size_t j = 0; j + 1 < m; j++) {
        run += exp((double)buf[j].value - max) / total;
        if (run <= 1.0 - p) {
            x[buf[j].index] = -INFINITY;
        }
    }
}

int32_t kz_sample(float *logits, size_t n, const kz_sampling *s, kz_rng *rng, void *scratch) {
    if (s->greedy) {
        return argmax(logits, n);
    }
    float *tmp = scratch;
    scored *pairs = (scored *)(tmp + n);
    if (s->temperature != 1.0f) {
        for (size_t i = 0; i < n; i++) {
            logits[i] = logits[i] / s->temperature;
        }
    }
    top_k(logits, n, s->top_k > 0 ? (size_t)s->top_k : 0, tmp);
    top_p(logits, n, s->top_p, pairs);
    float max = logits[argmax(logits, n)];
    float sum = 0.0f;
    for (size_t i = 0; i < n; i++) {
        tmp[i] = logits[i] > -INFINITY ? expf(logits[i] - max) : 0.0f;
        sum += tmp[i];
    }
    float u = kz_rng_uniform(rng) * sum, run = 0.0f;
    int32_t last = 0;
    for (size_t i = 0; i < n; i++) {
        if (tmp[i] > 0.0f) {
            run += tmp[i];
            last = (int32_t)i;
            if (u < run) {
                return (int32_t)i;
            }
        }
    }
    return last;
}

size_t kz_sampler_scratch_bytes(size_t n) {
    return n * (sizeof(float) + sizeof(scored));
}
