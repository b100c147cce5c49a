/*
 * test_kv_cache.c - the Qwen3 stacks' KV cache kept in blocks of positions
 * (layers/transformer.c, layers/attention.c):
 * - kz_attend_row_blocks over rows split into blocks gives, bit for bit, kz_attend_row
 *   over the same rows stored contiguously, on every kernel level this CPU runs, for
 *   lengths within one block and across several;
 * - kz_qwen3_kv_save / kz_qwen3_kv_restore round-trip a packed prefix of positions
 *   that spans blocks, every (layer, kv head) run in position order: a prefix saved
 *   with fewer positions is the leading part of each run of the longer one.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "layers/attention.h"
#include "layers/transformer.h"
#include "test.h"

enum { HD = 128, BLOCK = 64, N_BLOCKS = 3 };

/* A cache of N_BLOCKS blocks, each row at (p / BLOCK) * block_stride + (p % BLOCK) * HD,
 * with gaps between blocks, and the same rows contiguous. */
static void attend_parity(const kz_kernels *k, const char *level) {
    const size_t block_stride = (BLOCK + 5) * HD, rows = N_BLOCKS * BLOCK;
    float *kb = calloc(N_BLOCKS * block_stride, sizeof(float));
    float *vb = calloc(N_BLOCKS * block_stride, sizeof(float));
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
        }
    }
    const int64_t lasts[] = {0, 5, BLOCK - 1, BLOCK, BLOCK + 17, (int64_t)rows - 1};
    for (size_t c = 0; c < sizeof lasts / sizeof lasts[0]; c++) {
        kz_attend_row(k, out_c, q, kc, vc, HD, 0, lasts[c], 0, HD, scores);
        kz_attend_row_blocks(k, out_b, q, kb, vb, BLOCK, block_stride, lasts[c], HD, scores);
        CHECK_MSG(memcmp(out_b, out_c, sizeof out_b) == 0,
                  "%s: blocked attention over positions 0..%lld differs", level,
                  (long long)lasts[c]);
    }
    free(kb);
    free(vb);
    free(kc);
    free(vc);
    free(scores);
}

/* Packed layout of kz_qwen3_kv_save: keys then values, each [layer, kv head, n_pos, HD]. */
static float packed_at(const float *packed, const kz_qwen3_dims *d, size_t n_pos, int kv,
                       int l, int g, size_t p, size_t i) {
    const size_t half = (size_t)d->n_layers * (size_t)d->n_kv_heads * n_pos * HD;
    return packed[(size_t)kv * half +
                  (((size_t)l * (size_t)d->n_kv_heads + (size_t)g) * n_pos + p) * HD + i];
}

static void save_restore(void) {
    kz_qwen3_stack s = {.d = {.n_layers = 3, .hidden = 256, .n_heads = 4, .n_kv_heads = 2,
                              .head_dim = HD, .intermediate = 512}};
    const size_t long_pos = 2 * BLOCK + 9, short_pos = BLOCK + 3;
    kz_qwen3_state st;
    CHECK(kz_qwen3_state_init(&st, &s, long_pos + 4, 4) == KZ_OK);
    const size_t n = kz_qwen3_kv_floats(&s, long_pos);
    float *in = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    float *part = malloc(kz_qwen3_kv_floats(&s, short_pos) * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        in[i] = (float)i;
    }
    kz_qwen3_kv_restore(&s, &st, in, long_pos);
    CHECK_EQ_INT(st.n_pos, (long long)long_pos);
    kz_qwen3_kv_save(&s, &st, long_pos, out);
    CHECK_MSG(memcmp(in, out, n * sizeof(float)) == 0, "save after restore differs");
    kz_qwen3_kv_save(&s, &st, short_pos, part);
    int bad = 0;
    for (int kv = 0; kv < 2; kv++) {
        for (int l = 0; l < s.d.n_layers; l++) {
            for (int g = 0; g < s.d.n_kv_heads; g++) {
                for (size_t p = 0; p < short_pos; p++) {
                    for (size_t i = 0; i < HD; i += 31) {
                        bad += packed_at(part, &s.d, short_pos, kv, l, g, p, i) !=
                               packed_at(in, &s.d, long_pos, kv, l, g, p, i);
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
            attend_parity(k, kz_isa_name(levels[i]));
        }
    }
    save_restore();
    return test_main_result("test_kv_cache");
}
