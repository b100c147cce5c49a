/*
 * test_tensor_finite.c - the finite checks: kz_tensor_check_finite (weights at load) and
 * kz_vector_first_nonfinite (logits and audio during synthesis).
 *
 * Dataflow: a byte buffer of one dtype (F32, BF16, F16, or Q8_0 / Q4_0 blocks), every value
 *   finite (including the largest finite value, subnormals and -0), at an odd address so the
 *   reader's unaligned access is exercised -> kz_tensor_check_finite must pass; then one
 *   value (block scale) set to +Inf, -Inf or a NaN at the first, last and pass-boundary
 *   positions -> KZ_STATUS_BAD_MODEL with a message naming the file, prefix + tensor and
 *   exactly that element (block). Float arrays with one bad value at each position ->
 *   kz_vector_first_nonfinite returns that position.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/tensor.h"
#include "layers/vector.h"
#include "runtime/error.h"
#include "test.h"

#define STEP 65536 // values per pass inside the checker: positions around it are tested

typedef struct case_type {
    kz_dtype dtype;
    const char *name;
    size_t width;       // bytes of one value (scale for blocks)
    size_t stride;      // bytes from one value (block) to the next
    uint32_t finite[4]; // finite bit patterns: max, -max, smallest subnormal, -0
    uint32_t bad[3];    // +Inf, -Inf, a NaN
} case_type;

static const case_type CASES[] = {
    {KZ_DTYPE_F32, "F32", 4, 4, {0x7F7FFFFF, 0xFF7FFFFF, 0x00000001, 0x80000000},
     {0x7F800000, 0xFF800000, 0x7FC00001}},
    {KZ_DTYPE_BF16, "BF16", 2, 2, {0x7F7F, 0xFF7F, 0x0001, 0x8000}, {0x7F80, 0xFF80, 0x7FC1}},
    {KZ_DTYPE_F16, "F16", 2, 2, {0x7BFF, 0xFBFF, 0x0001, 0x8000}, {0x7C00, 0xFC00, 0x7E01}},
    {KZ_DTYPE_Q8_0, "Q8_0", 2, 34, {0x7BFF, 0xFBFF, 0x0001, 0x8000}, {0x7C00, 0xFC00, 0xFE00}},
    {KZ_DTYPE_Q4_0, "Q4_0", 2, 18, {0x7BFF, 0xFBFF, 0x0001, 0x8000}, {0x7C00, 0xFC00, 0x7C01}},
};

static void put(uint8_t *p, uint32_t bits, size_t width) {
    for (size_t b = 0; b < width; b++) {
        p[b] = (uint8_t)(bits >> (8 * b));
    }
}

/* n values (blocks) of c at buf + 1, all finite; quantized payload bytes all 0xFF. */
static uint8_t *fill(const case_type *c, size_t n) {
    uint8_t *buf = malloc(n * c->stride + 1);
    memset(buf, 0xFF, n * c->stride + 1);
    for (size_t i = 0; i < n; i++) {
        put(buf + 1 + i * c->stride, c->finite[i % 4], c->width);
    }
    return buf;
}

static kz_tensor view(const case_type *c, const uint8_t *buf, size_t n) {
    bool blocks = c->dtype == KZ_DTYPE_Q8_0 || c->dtype == KZ_DTYPE_Q4_0;
    kz_tensor t = {.name = "layers.3.w", .dtype = c->dtype, .dtype_name = c->name, .n_dims = 1,
                   .n_elements = blocks ? 32 * n : n, .n_bytes = n * c->stride,
                   .data = buf + 1};
    t.shape[0] = (int64_t)t.n_elements;
    return t;
}

static void check_type(const case_type *c) {
    const size_t n = 2 * STEP + 3;
    const size_t positions[] = {0, 1, STEP - 1, STEP, STEP + 1, n - 1};
    uint8_t *buf = fill(c, n);
    kz_tensor t = view(c, buf, n);
    CHECK_MSG(kz_tensor_check_finite(&t, "f.gguf", "model.") == KZ_OK, "%s: finite values: %s",
              c->name, kz_error_get());
    bool blocks = c->stride != c->width;
    for (size_t p = 0; p < sizeof positions / sizeof positions[0]; p++) {
        for (int b = 0; b < 3; b++) {
            size_t at = positions[p];
            uint8_t *v = buf + 1 + at * c->stride;
            uint8_t saved[4];
            memcpy(saved, v, c->width);
            put(v, c->bad[b], c->width);
            kz_status st = kz_tensor_check_finite(&t, "f.gguf", "model.");
            CHECK_MSG(st == KZ_STATUS_BAD_MODEL, "%s: bad value %x at %zu passed", c->name,
                      (unsigned)c->bad[b], at);
            char want[128];
            snprintf(want, sizeof want,
                     "f.gguf: tensor 'model.layers.3.w': non-finite %s (NaN or Inf) at %s %zu",
                     blocks ? "scale" : "value", blocks ? "block" : "element", at);
            CHECK_STR_CONTAINS(kz_error_get(), want);
            memcpy(v, saved, c->width);
        }
    }
    // Two bad values: the first one is named.
    put(buf + 1 + (STEP + 5) * c->stride, c->bad[0], c->width);
    put(buf + 1 + 7 * c->stride, c->bad[2], c->width);
    CHECK(kz_tensor_check_finite(&t, "f.gguf", "") == KZ_STATUS_BAD_MODEL);
    CHECK_STR_CONTAINS(kz_error_get(), blocks ? "at block 7" : "at element 7");
    free(buf);
}

/* Only the scale of a block counts: payload bytes equal to an Inf pattern are just codes. */
static void check_payload_ignored(void) {
    uint8_t block[34];
    memset(block, 0, sizeof block);
    put(block, 0x3C00, 2); // scale 1.0
    for (size_t i = 2; i + 1 < sizeof block; i += 2) {
        put(block + i, 0x7C00, 2);
    }
    kz_tensor t = {.name = "q", .dtype = KZ_DTYPE_Q8_0, .n_dims = 1, .n_elements = 32,
                   .n_bytes = sizeof block, .data = block};
    CHECK(kz_tensor_check_finite(&t, "f", "") == KZ_OK);
    t.dtype = KZ_DTYPE_Q4_0;
    t.n_bytes = 18;
    CHECK(kz_tensor_check_finite(&t, "f", "") == KZ_OK);
    t.dtype = KZ_DTYPE_OTHER; // integer tensors have no NaN
    CHECK(kz_tensor_check_finite(&t, "f", "") == KZ_OK);
}

static void check_vector(void) {
    enum { N = 1003 };
    static float x[N];
    for (size_t i = 0; i < N; i++) {
        x[i] = i % 3 == 0 ? 3.4e38f : i % 3 == 1 ? -1e-45f : 0.0f;
    }
    CHECK_EQ_INT(kz_vector_first_nonfinite(x, N), N);
    CHECK_EQ_INT(kz_vector_first_nonfinite(x, 0), 0);
    const float bad[] = {INFINITY, -INFINITY, NAN};
    const size_t at[] = {0, 1, 500, N - 1};
    for (size_t b = 0; b < 3; b++) {
        for (size_t p = 0; p < 4; p++) {
            float saved = x[at[p]];
            x[at[p]] = bad[b];
            CHECK_EQ_INT(kz_vector_first_nonfinite(x, N), at[p]);
            x[at[p]] = saved;
        }
    }
}

int main(void) {
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        check_type(&CASES[i]);
    }
    check_payload_ignored();
    check_vector();
    return test_main_result("test_tensor_finite");
}
