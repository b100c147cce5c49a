/*
 * attention.h - rotary position embedding and one query row's attention over
 * a key/value cache, shared by the Qwen3 stacks (talker, code predictor) and
 * the codec's sliding-window pre-transformer.
 *
 *   RoPE: rotate-half over head_dim, pairs (j, j + hd/2), angle = pos * inv_freq[j]
 *         in fp32, inv_freq[j] = 1 / theta^(2j / hd) computed in fp32 as torch does.
 *   attention row: scores[p] = (q . k_p) * scale for p = first..last ascending,
 *         softmax in float, out = sum_p softmax[p] * v_p (fixed order, so results
 *         never depend on threads or chunking). Cache row of position p is
 *         p % ring (a ring buffer) or p (ring 0), or row p % B of block p / B (the
 *         Qwen3 stacks' cache, layers/transformer.c).
 */
#ifndef KZ_ATTENTION_H
#define KZ_ATTENTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

/* inv_freq[hd / 2] for rope_theta. */
void kz_rope_init(float *inv_freq, int head_dim, float theta);

/* Rotates each of the n_heads heads of row x ([n_heads, head_dim]) to position pos. */
void kz_rope_apply(float *x, int n_heads, int head_dim, const float *inv_freq, int64_t pos);

/* The same in two parts, for rows that share a position across layers: cs[head_dim] =
 * the cosines then the sines of position pos's angles (once per position), then
 * kz_rope_rotate with them (per layer); the bits of kz_rope_apply. */
void kz_rope_angles(float *cs, int head_dim, const float *inv_freq, int64_t pos);
void kz_rope_rotate(float *x, int n_heads, int head_dim, const float *cs);

/* out[hd] = attention of q[hd] over cache positions first..last; keys and values
 * point at the head's column in row 0 of the cache, rows `stride` floats apart.
 * scores holds last - first + 1 floats. */
void kz_attend_row(const kz_kernels *k, float *out, const float *q, const float *keys,
                   const float *values, size_t stride, int64_t first, int64_t last, size_t ring,
                   size_t head_dim, float *scores);

/* The same over positions 0..last of a cache kept in blocks of block_rows positions: row p
 * at element (p / block_rows) * block_stride + (p % block_rows) * head_dim of keys (values
 * alike), floats or, with f16, binary16 (uint16 bits, widened exactly); the bits of
 * kz_attend_row over the same (widened) rows stored contiguously. */
void kz_attend_row_blocks(const kz_kernels *k, float *out, const float *q, const void *keys,
                          const void *values, bool f16, size_t block_rows, size_t block_stride,
                          int64_t last, size_t head_dim, float *scores);

#endif
