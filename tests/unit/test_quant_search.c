/*
 * test_quant_search.c - the q4_0 quantizer with a scale search
 * (kz_quantize_row_q4_0_search) against the plain one, both in kernels/ref/quant_ref.c.
 *
 * Data flow: blocks of random Gaussian weights at magnitudes from fp16-subnormal
 * scales to near the fp16 limit, plus hand-made blocks (zeros, one spike, a
 * constant, two opposite extremes) -> both quantizers -> dequantized -> per
 * block squared error. The search must never be worse than the plain quantizer
 * on any block, must be better on Gaussian rows in total, and must write valid
 * blocks (finite scale; every value within [-8 |d|, 8 |d|]).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "kernels/quant.h"
#include "test.h"

#define N_BLOCKS 512

static float gaussian(void) {
    float u = ((float)rand() + 1.0f) / ((float)RAND_MAX + 2.0f);
    float v = ((float)rand() + 1.0f) / ((float)RAND_MAX + 2.0f);
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

/* Squared error of block b of x after quantizer q. */
static double block_error(int (*q)(void *, const float *, size_t), const float *x) {
    uint8_t blk[KZ_Q4_0_BLOCK_BYTES];
    float y[KZ_QK];
    CHECK(q(blk, x, KZ_QK) == 0);
    CHECK(kz_dequantize_row_q4_0(y, blk, KZ_QK) == 0);
    const float d = fabsf(kz_quant_scale(blk));
    CHECK(isfinite(d));
    double err = 0.0;
    for (int i = 0; i < KZ_QK; i++) {
        CHECK_MSG(fabsf(y[i]) <= 8.0f * d, "value %g outside 8 |d| = %g", y[i], 8.0f * d);
        err += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
    }
    return err;
}

/* One block through both quantizers: never worse. Adds the errors to the sums. */
static void compare_block(const float *x, double *plain, double *search) {
    const double p = block_error(kz_quantize_row_q4_0, x);
    const double s = block_error(kz_quantize_row_q4_0_search, x);
    CHECK_MSG(s <= p, "search error %.9g > plain error %.9g", s, p);
    *plain += p;
    *search += s;
}

static void test_gaussian(float scale) {
    double plain = 0.0, search = 0.0;
    float x[KZ_QK];
    for (int b = 0; b < N_BLOCKS; b++) {
        for (int i = 0; i < KZ_QK; i++) {
            x[i] = gaussian() * scale;
        }
        compare_block(x, &plain, &search);
    }
    printf("scale %g: rms error plain %.4g, search %.4g (%.1f %% lower)\n", scale,
           sqrt(plain / (N_BLOCKS * KZ_QK)), sqrt(search / (N_BLOCKS * KZ_QK)),
           100.0 * (1.0 - sqrt(search / plain)));
    // Below ~1e-8 every weight rounds to zero at any fp16 scale: equal errors.
    CHECK_MSG(scale < 1e-8f ? search == plain : search < plain,
              "search %.9g vs plain %.9g in total", search, plain);
}

static void test_special_blocks(void) {
    double plain = 0.0, search = 0.0;
    float x[KZ_QK] = {0};
    compare_block(x, &plain, &search); // all zero
    CHECK(search == 0.0);
    x[5] = -3.0f; // one spike
    compare_block(x, &plain, &search);
    for (int i = 0; i < KZ_QK; i++) {
        x[i] = 0.25f; // constant
    }
    compare_block(x, &plain, &search);
    x[0] = 60000.0f * 8.0f; // saturating scale, opposite extremes
    x[1] = -60000.0f * 8.0f;
    compare_block(x, &plain, &search);
    uint8_t out[KZ_Q4_0_BLOCK_BYTES];
    CHECK(kz_quantize_row_q4_0_search(out, x, KZ_QK + 1) == -1);
}

int main(void) {
    srand(7);
    static const float scales[] = {1e-9f, 1e-6f, 0.02f, 1.0f, 3000.0f};
    for (size_t i = 0; i < sizeof scales / sizeof scales[0]; i++) {
        test_gaussian(scales[i]);
    }
    test_special_blocks();
    return test_main_result("test_quant_search");
}
