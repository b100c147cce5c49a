/*
 * attention.c - RoPE and single-row attention (see attention.h): per run of evenly spaced
 * cache rows, the scores by dot_rows (or dot_rows_f16), the softmax here, the values by
 * axpy_rows (or axpy_rows_f16).
 */
#include "layers/attention.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

void kz_rope_init(float *inv_freq, int head_dim, float theta) {
    for (int j = 0; j < head_dim / 2; j++) {
        // As torch: base ** (arange(0, dim, 2).float() / dim), then 1 / that, in fp32.
        float expo = (float)(2 * j) / (float)head_dim;
        inv_freq[j] = 1.0f / powf(theta, expo);
    }
}

/* Rotates the pair (*lo, *hi) by the angle with cosine c and sine s: RoPE's one definition
 * (the build never contracts it into fused multiply-adds, so vectorized calls keep its bits). */
static inline void rotate(float *lo, float *hi, float c, float s) {
    const float a = *lo, b = *hi;
    *lo = a * c - b * s;
    *hi = b * c + a * s;
}

/* Rotates pair j (elements j and j + half) of every head by the angle with cosine c
 * and sine s. */
static void rotate_pair(float *x, int n_heads, int head_dim, int j, float c, float s) {
    const int half = head_dim / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * (size_t)head_dim;
        rotate(v + j, v + j + half, c, s);
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

/* Head by head over contiguous pairs, so the compiler vectorizes it. */
void kz_rope_rotate(float *x, int n_heads, int head_dim, const float *cs) {
    const int half = head_dim / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * (size_t)head_dim;
        for (int j = 0; j < half; j++) {
            rotate(v + j, v + j + half, cs[j], cs[half + j]);
        }
    }
}

/* Where the cache rows are: row p of a position at element p * stride (p % ring with a
 * ring), or, with blocks, (p / block_rows) * block_stride + (p % block_rows) * stride, of
 * keys and values in floats or (f16) binary16. */
typedef struct cache_rows {
    const void *keys, *values;
    bool f16;
    size_t stride, ring, block_rows, block_stride;
} cache_rows;

static size_t row_at(const cache_rows *c, int64_t p) {
    if (c->block_rows) {
        const size_t b = (size_t)p / c->block_rows, i = (size_t)p % c->block_rows;
        return b * c->block_stride + i * c->stride;
    }
    return (c->ring ? (size_t)(p % (int64_t)c->ring) : (size_t)p) * c->stride;
}

/* Rows from p on (p <= last) that sit at one stride after another: to the end of p's block
 * or of the ring, or to last. */
static size_t run_at(const cache_rows *c, int64_t p, int64_t last) {
    size_t n = (size_t)(last - p + 1);
    const size_t wrap = c->block_rows ? c->block_rows : c->ring;
    if (wrap) {
        const size_t left = wrap - (size_t)p % wrap;
        n = left < n ? left : n;
    }
    return n;
}

/* The scores of n rows from element `at` on. */
static void dot_run(const kz_kernels *k, float *scores, const float *q, const cache_rows *c,
                    size_t at, size_t n, size_t head_dim, float scale) {
    if (c->f16) {
        k->dot_rows_f16(scores, q, (const uint16_t *)c->keys + at, c->stride, n, head_dim, scale);
    } else {
        k->dot_rows(scores, q, (const float *)c->keys + at, c->stride, n, head_dim, scale);
    }
}

/* out += the weighted values of n rows from element `at` on. */
static void axpy_run(const kz_kernels *k, float *out, const float *w, const cache_rows *c,
                     size_t at, size_t n, size_t head_dim) {
    if (c->f16) {
        k->axpy_rows_f16(out, w, (const uint16_t *)c->values + at, c->stride, n, head_dim);
    } else {
        k->axpy_rows(out, w, (const float *)c->values + at, c->stride, n, head_dim);
    }
}

/* The attention row of the entry points: one computation whatever the rows' layout, the
 * kernels called once per run of evenly spaced rows (a block or a stretch of the ring). */
static void attend(const kz_kernels *k, float *out, const float *q, const cache_rows *c,
                   int64_t first, int64_t last, size_t head_dim, float *scores) {
    const float scale = 1.0f / sqrtf((float)head_dim);
    for (int64_t p = first, n; p <= last; p += n) {
        n = (int64_t)run_at(c, p, last);
        dot_run(k, scores + (p - first), q, c, row_at(c, p), (size_t)n, head_dim, scale);
    }
    const size_t count = (size_t)(last - first + 1);
    float max = -INFINITY, sum = 0.0f;
    for (size_t i = 0; i < count; i++) {
        max = scores[i] > max ? scores[i] : max;
    }
    for (size_t i = 0; i < count; i++) {
        scores[i] = expf(scores[i] - max);
        sum += scores[i];
    }
    for (size_t i = 0; i < count; i++) {
        scores[i] = scores[i] / sum;
    }
    memset(out, 0, head_dim * sizeof *out);
    for (int64_t p = first, n; p <= last; p += n) {
        n = (int64_t)run_at(c, p, last);
        axpy_run(k, out, scores + (p - first), c, row_at(c, p), (size_t)n, head_dim);
    }
}

void kz_attend_row(const kz_kernels *k, float *out, const float *q, const float *keys,
                   const float *values, size_t stride, int64_t first, int64_t last, size_t ring,
                   size_t head_dim, float *scores) {
    const cache_rows c = {.keys = keys, .values = values, .stride = stride, .ring = ring};
    attend(k, out, q, &c, first, last, head_dim, scores);
}

void kz_attend_row_blocks(const kz_kernels *k, float *out, const float *q, const void *keys,
                          const void *values, bool f16, size_t block_rows, size_t block_stride,
                          int64_t last, size_t head_dim, float *scores) {
    const cache_rows c = {.keys = keys, .values = values, .f16 = f16, .stride = head_dim,
                          .block_rows = block_rows, .block_stride = block_stride};
    attend(k, out, q, &c, 0, last, head_dim, scores);
}
