/*
 * tensor.c - shape checks, float32 conversion and the finite-value check of mapped
 * tensors (see tensor.h).
 *
 * Conversion reads the mapping byte-wise (sources may be unaligned) and
 * dequantizes block formats with the definitions in kernels/quant.h. The finite
 * check ors an add over every value's exponent bits (unaligned loads, vectorized by
 * the compiler) and looks for the first bad value only in a pass that has one.
 */
#include "io/tensor.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "kernels/quant.h"
#include "runtime/error.h"

size_t kz_dtype_row_bytes(kz_dtype dtype, size_t n) {
    switch (dtype) {
    case KZ_DTYPE_Q8_0: return kz_q8_0_row_bytes(n);
    case KZ_DTYPE_Q4_0: return kz_q4_0_row_bytes(n);
    case KZ_DTYPE_F16:
    case KZ_DTYPE_BF16: return 2 * n;
    case KZ_DTYPE_F32: return 4 * n;
    case KZ_DTYPE_OTHER: break;
    }
    return 0;
}

void kz_tensor_format_shape(char *buf, size_t buf_bytes, int n_dims, const int64_t *shape) {
    size_t used = (size_t)snprintf(buf, buf_bytes, "[");
    for (int i = 0; i < n_dims && used < buf_bytes; i++) {
        used +=
            (size_t)snprintf(buf + used, buf_bytes - used, "%s%" PRId64, i ? ", " : "", shape[i]);
    }
    if (used < buf_bytes) {
        snprintf(buf + used, buf_bytes - used, "]");
    }
}

kz_status kz_tensor_check(const kz_tensor *t, const char *where, const char *name, int n_dims,
                          const int64_t *shape) {
    if (n_dims < 0 || n_dims > KZ_TENSOR_MAX_DIMS || (n_dims > 0 && !shape)) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "%s: tensor '%s': expected shape with %d dimensions is invalid", where,
                            name, n_dims);
    }
    if (!t) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: tensor '%s' is missing", where, name);
    }
    bool same = t->n_dims == n_dims;
    for (int d = 0; same && d < n_dims; d++) {
        same = t->shape[d] == shape[d];
    }
    if (!same) {
        char actual[256];
        char expected[256];
        kz_tensor_format_shape(actual, sizeof actual, t->n_dims, t->shape);
        kz_tensor_format_shape(expected, sizeof expected, n_dims, shape);
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: tensor '%s' has shape %s, expected %s",
                            where, name, actual, expected);
    }
    return KZ_OK;
}

static void bf16_to_f32(const uint8_t *src, float *dst, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t bits = ((uint32_t)src[2 * i] | (uint32_t)src[2 * i + 1] << 8) << 16;
        memcpy(&dst[i], &bits, sizeof bits);
    }
}

static void f16_to_f32(const uint8_t *src, float *dst, size_t n) {
    for (size_t i = 0; i < n; i++) {
        dst[i] = kz_fp16_to_f32((uint16_t)(src[2 * i] | src[2 * i + 1] << 8));
    }
}

kz_status kz_tensor_to_f32(const kz_tensor *t, float *dst) {
    const uint8_t *src = t->data;
    size_t n = t->n_elements;
    switch (t->dtype) {
    case KZ_DTYPE_F32:
        if (n) {
            memcpy(dst, src, n * sizeof(float)); // unaligned source: never cast
        }
        return KZ_OK;
    case KZ_DTYPE_BF16:
        bf16_to_f32(src, dst, n);
        return KZ_OK;
    case KZ_DTYPE_F16:
        f16_to_f32(src, dst, n);
        return KZ_OK;
    case KZ_DTYPE_Q8_0:
        return kz_dequantize_row_q8_0(dst, src, n) == 0 ? KZ_OK
               : kz_error_set(KZ_STATUS_BAD_MODEL, "tensor '%s': Q8_0 size %zu is not a "
                              "multiple of 32", t->name, n);
    case KZ_DTYPE_Q4_0:
        return kz_dequantize_row_q4_0(dst, src, n) == 0 ? KZ_OK
               : kz_error_set(KZ_STATUS_BAD_MODEL, "tensor '%s': Q4_0 size %zu is not a "
                              "multiple of 32", t->name, n);
    case KZ_DTYPE_OTHER:
        break;
    }
    return kz_error_set(KZ_STATUS_BAD_MODEL,
                        "tensor '%s' has dtype %s, which cannot be converted to F32", t->name,
                        t->dtype_name ? t->dtype_name : "?");
}

kz_status kz_tensor_row_to_f32(const kz_tensor *t, size_t row, size_t n, float *dst) {
    kz_tensor r = *t;
    r.data = (const uint8_t *)t->data + row * kz_dtype_row_bytes(t->dtype, n);
    r.n_elements = n;
    r.n_bytes = kz_dtype_row_bytes(t->dtype, n);
    return kz_tensor_to_f32(&r, dst);
}

/* ---- finite check --------------------------------------------------------------------------- */

/* Whether any of n little-endian 16-bit words at p, stride bytes apart, has its exponent field
 * exp_mask all ones (NaN or Inf). Adding the field's lowest bit carries past the field only
 * for all ones, so the test is an and, an add and an or per value, which vectorizes. */
static bool any_nonfinite16(const uint8_t *p, size_t n, size_t stride, uint16_t exp_mask,
                            uint16_t exp_low) {
    uint16_t acc = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t v;
        memcpy(&v, p + i * stride, sizeof v);
        acc |= (uint16_t)((v & exp_mask) + exp_low);
    }
    return (acc & 0x8000) != 0;
}

static bool any_nonfinite32(const uint8_t *p, size_t n) {
    uint32_t acc = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t v;
        memcpy(&v, p + 4 * i, sizeof v);
        acc |= (v & 0x7F800000u) + 0x00800000u;
    }
    return (acc & 0x80000000u) != 0;
}

/* Whether values [first, first + n) of t (block scales for Q8_0 / Q4_0) hold NaN or Inf. */
static bool range_nonfinite(const kz_tensor *t, size_t first, size_t n) {
    const uint8_t *p = t->data;
    switch (t->dtype) {
    case KZ_DTYPE_F32: return any_nonfinite32(p + 4 * first, n);
    case KZ_DTYPE_BF16: return any_nonfinite16(p + 2 * first, n, 2, 0x7F80, 0x0080);
    case KZ_DTYPE_F16: return any_nonfinite16(p + 2 * first, n, 2, 0x7C00, 0x0400);
    case KZ_DTYPE_Q8_0:
        return any_nonfinite16(p + KZ_Q8_0_BLOCK_BYTES * first, n, KZ_Q8_0_BLOCK_BYTES, 0x7C00,
                               0x0400);
    case KZ_DTYPE_Q4_0:
        return any_nonfinite16(p + KZ_Q4_0_BLOCK_BYTES * first, n, KZ_Q4_0_BLOCK_BYTES, 0x7C00,
                               0x0400);
    case KZ_DTYPE_OTHER: break;
    }
    return false;
}

kz_status kz_tensor_check_finite(const kz_tensor *t, const char *where, const char *prefix) {
    bool blocks = t->dtype == KZ_DTYPE_Q8_0 || t->dtype == KZ_DTYPE_Q4_0;
    size_t n = blocks ? t->n_elements / 32 : t->n_elements;
    const size_t step = (size_t)1 << 16; // values per pass: the first bad one is then found cheaply
    for (size_t first = 0; first < n; first += step) {
        size_t count = n - first < step ? n - first : step;
        if (!range_nonfinite(t, first, count)) {
            continue;
        }
        size_t i = first;
        while (i + 1 < first + count && !range_nonfinite(t, i, 1)) {
            i++;
        }
        return kz_error_set(
            KZ_STATUS_BAD_MODEL, "%s: tensor '%s%s': non-finite %s (NaN or Inf) at %s %zu", where,
            prefix, t->name, blocks ? "scale" : "value", blocks ? "block" : "element", i);
    }
    return KZ_OK;
}
