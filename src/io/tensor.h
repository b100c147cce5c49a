/*
 * tensor.h - a named, typed view of weight data inside a mapped model file, and
 * the conversions every loader shares.
 *
 * A kz_tensor is produced by a file reader (safetensors.c, or weights.c over a
 * GGUF file) and points into the file's mapping. Loaders check its shape with
 * kz_tensor_check (one message format for every file kind) and either use the
 * data in place (matrix.c) or convert it with kz_tensor_to_f32 (norms, biases,
 * codec weights that are packed at load). Model loads first refuse NaN and Inf
 * values with kz_tensor_check_finite.
 */
#ifndef KZ_TENSOR_H
#define KZ_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "kztts.h"

typedef enum kz_dtype {
    KZ_DTYPE_F32 = 0,
    KZ_DTYPE_F16 = 1,
    KZ_DTYPE_BF16 = 2,
    KZ_DTYPE_OTHER = 3, /* valid file dtype we do not compute with (I64, U8, BOOL, ...) */
    KZ_DTYPE_Q8_0 = 4,  /* blocks of 32: fp16 scale + 32 int8 (kernels/quant.h) */
    KZ_DTYPE_Q4_0 = 5,  /* blocks of 32: fp16 scale + 16 bytes of nibbles */
} kz_dtype;

#define KZ_TENSOR_MAX_DIMS 8

typedef struct kz_tensor {
    const char *name;       /* owned by the file object */
    kz_dtype dtype;
    const char *dtype_name; /* as the file names it, e.g. "BF16", "Q8_0" */
    int n_dims;
    int64_t shape[KZ_TENSOR_MAX_DIMS]; /* row-major: shape[0] outermost */
    size_t n_elements;
    size_t n_bytes;
    const void *data;       /* points into the mapping, do not free */
} kz_tensor;

/* Bytes of n consecutive elements of dtype (n a multiple of 32 for Q8_0 / Q4_0):
 * one row of a matrix with n columns. 0 for KZ_DTYPE_OTHER. */
size_t kz_dtype_row_bytes(kz_dtype dtype, size_t n);

/* "[d0, d1, ...]" into buf. */
void kz_tensor_format_shape(char *buf, size_t buf_bytes, int n_dims, const int64_t *shape);

/* Checks that t (NULL = missing) has the expected shape. On mismatch returns
 * KZ_STATUS_BAD_MODEL with "<where>: tensor '<name>' is missing" or "... has shape
 * [..], expected [..]". n_dims <= KZ_TENSOR_MAX_DIMS. */
kz_status kz_tensor_check(const kz_tensor *t, const char *where, const char *name, int n_dims,
                          const int64_t *shape);

/* Copies the tensor to float32 (F32, F16, BF16, Q8_0, Q4_0 sources); dst:
 * [t->n_elements]. Returns KZ_STATUS_BAD_MODEL for other dtypes. */
kz_status kz_tensor_to_f32(const kz_tensor *t, float *dst);

/* Copies row `row` of t seen as rows of n elements (n a multiple of 32 for Q8_0 / Q4_0;
 * the row inside t: the caller checked the shape) to float32 dst[n], the values
 * kz_tensor_to_f32 gives for those elements. */
kz_status kz_tensor_row_to_f32(const kz_tensor *t, size_t row, size_t n, float *dst);

/* KZ_STATUS_BAD_MODEL naming where, the tensor (its name after prefix, as the file has it)
 * and the first element (block for Q8_0 / Q4_0) when a value (an fp16 block scale) is NaN or
 * Inf; KZ_OK otherwise and for KZ_DTYPE_OTHER. Reads every value (scale) of the tensor. */
kz_status kz_tensor_check_finite(const kz_tensor *t, const char *where, const char *prefix);

#endif
