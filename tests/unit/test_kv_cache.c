/*
 * test_kv_cache.c - the Qwen3 stacks' KV cache kept in blocks of positions
 * (layers/transformer.c, layers/attention.c):
 * - kz_attend_row_blocks over rows split into blocks gives, bit for bit, kz_attend_row
 *   over the same rows stored contiguously, on every kernel level this CPU runs, for
 *   lengths within one block and across several; with binary16 rows, kz_attend_row's
 *   bits over the widened rows;
 * - kz_qwen3_kv_save / kz_qwen3_kv_restore round-trip a packed prefix of positions
 *   that spans blocks, every (layer, kv head) run in position order: a prefix saved
 *   with fewer positions is the leading part of each run of the longer one; for float
 *   and binary16 caches.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "layers/attention.h"
#include "layers/transformer.h"
#include "test.h"

enum { HD = 128, BLOCK = 64, N_BLOCKS = 3 };

/* A cache of N_BLOCKS blocks, each row at (p / BLOCK) * block_stride + (p % BLOCK) * HD,
 * with gaps between blocks, and the same rows contiguous; with f16 the blocked rows are
 * binary16 and the contiguous ones their widened values. */
static void attend_parity(const kz_kernels *k, const char *level, bool f16) {
    const size_t block_stride = (BLOCK + 5) * HD, rows = N_BLOCKS * BLOCK;
    float *kb = calloc(N_BLOCKS * block_stride, sizeof(float));
    float *vb = calloc(N_BLOCKS * block_stride, sizeof(float));
    uint16_t *kh = calloc(N_BLOCKS * block_stride, sizeof(uint16_t));
    uint16_t *vh = calloc(N_BLOCKS * block_stride, sizeof(uint16_t));
    float *kc = malloc(rows * HD * sizeof(float)), *vc = malloc(rows * HD * sizeof(float));
    float q[HD], out_b[HD], out_c[HD], *scores = malloc(rows * sizeof(float));
    uint64_t seed = 7;
    for (size_t i = 0; i < HD; i++) {
        q[i] = test_rng_float(&seed);
    }
    for (size_t p = 0; p < rows; p++) {
        const size_t at = p / BLOCK * block_stride + p % BLOCK * HD;
        for (size_t i = 0; i < HD; i++) {
            kc[p * HD + i] = kb[at + i] = test_rng_float(&seed);
            vc[p * HD + i] = vb[at + i] = test_rng_float(&seed);
            kh[at + i] = kz_f32_to_fp16(kb[at + i]);
            vh[at + i] = kz_f32_to_fp16(vb[at + i]);
            if (f16) {
                kc[p * HD + i] = kz_fp16_to_f32(kh[at + i]);
                vc[p * HD + i] = kz_fp16_to_f32(vh[at + i]);
            }
        }
    }
    const int64_t lasts[] = {0, 5, BLOCK - 1, BLOCK, BLOCK + 17, (int64_t)rows - 1};
    for (size_t c = 0; c < sizeof lasts / sizeof lasts[0]; c++) {
        kz_attend_row(k, out_c, q, kc, vc, HD, 0, lasts[c], 0, HD, scores);
        kz_attend_row_blocks(k, out_b, q, f16 ? (void *)kh : kb, f16 ? (void *)vh : vb, f16,
                             BLOCK, block_stride, lasts[c], HD, scores);
        CHECK_MSG(memcmp(out_b, out_c, sizeof out_b) == 0,
                  "%s: blocked attention (%s) over positions 0..%lld differs", level,
                  f16 ? "f16" : "f32", (long long)lasts[c]);
    }
    free(kb);
    free(vb);
    free(kh);
    free(vh);
    free(kc);
    free(vc);
    free(scores);
}

/* Packed layout of kz_qwen3_kv_save: keys then values, each [layer, kv head, n_pos, HD],
 * elem bytes each; element (kv, l, g, p, i) as bytes. */
static const unsigned char *packed_at(const void *packed, const kz_qwen3_dims *d, size_t n_pos,
                                      size_t elem, int kv, int l, int g, size_t p, size_t i) {
    const size_t half = (size_t)d->n_layers * (size_t)d->n_kv_heads * n_pos * HD;
    return (const unsigned char *)packed +
           elem * ((size_t)kv * half +
                   (((size_t)l * (size_t)d->n_kv_heads + (size_t)g) * n_pos + p) * HD + i);
}

static void save_restore(bool f16) {
    kz_qwen3_stack s = {.d = {.n_layers = 3, .hidden = 256, .n_heads = 4, .n_kv_heads = 2,
                              .head_dim = HD, .intermediate = 512},
                        .kv_f16 = f16};
    const size_t long_pos = 2 * BLOCK + 9, short_pos = BLOCK + 3, elem = f16 ? 2 : 4;
    kz_qwen3_state st;
    CHECK(kz_qwen3_state_init(&st, &s, long_pos + 4, 4) == KZ_OK);
    const size_t n = kz_qwen3_kv_bytes(&s, long_pos);
    CHECK_EQ_INT((long long)n, (long long)(2 * 3 * 2 * long_pos * HD * elem));
    unsigned char *in = malloc(n), *out = malloc(n);
    unsigned char *part = malloc(kz_qwen3_kv_bytes(&s, short_pos));
    for (size_t i = 0; i < n; i++) {
        in[i] = (unsigned char)(i * 7 + i / 251);
    }
    kz_qwen3_kv_restore(&s, &st, in, long_pos);
    CHECK_EQ_INT(st.n_pos, (long long)long_pos);
    kz_qwen3_kv_save(&s, &st, long_pos, out);
    CHECK_MSG(memcmp(in, out, n) == 0, "save after restore differs (%s)", f16 ? "f16" : "f32");
    kz_qwen3_kv_save(&s, &st, short_pos, part);
    int bad = 0;
    for (int kv = 0; kv < 2; kv++) {
        for (int l = 0; l < s.d.n_layers; l++) {
            for (int g = 0; g < s.d.n_kv_heads; g++) {
                for (size_t p = 0; p < short_pos; p++) {
                    for (size_t i = 0; i < HD; i += 31) {
                        bad += memcmp(packed_at(part, &s.d, short_pos, elem, kv, l, g, p, i),
                                      packed_at(in, &s.d, long_pos, elem, kv, l, g, p, i),
                                      elem) != 0;
                    }
                }
            }
        }
    }
    CHECK_MSG(bad == 0, "%d values of the shorter prefix are not the longer one's", bad);
    kz_qwen3_state_free(&st);
    free(in);
    free(out);
    free(part);
}

int main(void) {
    const kz_isa levels[] = {KZ_ISA_SCALAR, KZ_ISA_AVX2, KZ_ISA_AVX512, KZ_ISA_NEON};
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        const kz_kernels *k = kz_kernels_for(levels[i]);
        if (k) {
            attend_parity(k, kz_isa_name(levels[i]), false);
            attend_parity(k, kz_isa_name(levels[i]), true);
        }
    }
    save_restore(false);
    save_restore(true);
    return test_main_result("test_kv_cache");
}
