/*
 * attention.c - RoPE and single-row attention (see attention.h).
 */
#include "layers/attention.h"

#include <math.h>
#include <string.h>

void kz_rope_init(float *inv_freq, int head_dim, float theta) {
    for (int j = 0; j < head_dim / 2; j++) {
        // As torch: base ** (arange(0, dim, 2).float() / dim), then 1 / that, in fp32.
        float expo = (float)(2 * j) / (float)head_dim;
        inv_freq[j] = 1.0f / powf(theta, expo);
    }
}

/* Rotates pair j (elements j and j + half) of every head by the angle with cosine c
 * and sine s. */
static void rotate_pair(float *x, int n_heads, int head_dim, int j, float c, float s) {
    const int half = head_dim / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * (size_t)head_dim;
        float a = v[j], b = v[j + half];
        float ac = a * c, bs = b * s, bc = b * c, as = a * s;
        v[j] = ac - bs;
        v[j + half] = bc + as;
    }
}

void kz_rope_apply(float *x, int n_heads, int head_dim, const float *inv_freq, int64_t pos) {
    for (int j = 0; j < head_dim / 2; j++) {
        float angle = (float)pos * inv_freq[j];
        rotate_pair(x, n_heads, head_dim, j, cosf(angle), sinf(angle));
    }
}

void kz_rope_angles(float *cs, int head_dim, const float *inv_freq, int64_t pos) {
    const int half = head_dim / 2;
    for (int j = 0; j < half; j++) {
        float angle = (float)pos * inv_freq[j];
        cs[j] = cosf(angle);
        cs[half + j] = sinf(angle);
    }
}

void kz_rope_rotate(float *x, int n_heads, int head_dim, const float *cs) {
    const int half = head_dim / 2;
    for (int j = 0; j < half; j++) {
        rotate_pair(x, n_heads, head_dim, j, cs[j], cs[half + j]);
    }
}

void kz_attend_row(const kz_kernels *k, float *out, const float *q, const float *keys,
                   const float *values, size_t stride, int64_t first, int64_t last, size_t ring,
                   size_t head_dim, float *scores) {
    float scale = 1.0f / sqrtf((float)head_dim);
    float max = -INFINITY, sum = 0.0f;
    for (int64_t p = first; p <= last; p++) {
        size_t row = ring ? (size_t)(p % (int64_t)ring) : (size_t)p;
        float sc = k->dot(q, keys + row * stride, head_dim) * scale;
        scores[p - first] = sc;
        max = sc > max ? sc : max;
    }
    for (int64_t p = first; p <= last; p++) {
        scores[p - first] = expf(scores[p - first] - max);
        sum += scores[p - first];
    }
    memset(out, 0, head_dim * sizeof *out);
    for (int64_t p = first; p <= last; p++) {
        size_t row = ring ? (size_t)(p % (int64_t)ring) : (size_t)p;
        k->axpy(out, scores[p - first] / sum, values + row * stride, head_dim);
    }
}
