/*
 * safetensors.h - read-only, memory-mapped safetensors files.
 *
 * kz_st_open() maps the file, parses and validates the JSON header completely
 * (header length within the file and a size limit, well-formed JSON object,
 * each entry with a known dtype, a shape of non-negative dimensions, data
 * offsets inside the data area, end - begin == product(shape) * dtype size, no
 * two tensors overlapping, "__metadata__" allowed) and indexes tensors by
 * name. Tensor data points into the mapping (borrowed; valid until
 * kz_st_close). Every error names the file, the tensor and what was wrong.
 */
#ifndef KZ_SAFETENSORS_H
#define KZ_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "io/tensor.h"
#include "kztts.h"

/* Tensors of a safetensors file are plain kz_tensors (io/tensor.h). */
typedef kz_tensor kz_st_tensor;

#define KZ_ST_MAX_DIMS KZ_TENSOR_MAX_DIMS

typedef struct kz_st_file kz_st_file;

/* Opens and validates `path`. On failure *out is NULL and the message names the file. */
kz_status kz_st_open(const char *path, kz_st_file **out);

/* Unmaps and frees. Accepts NULL. */
void kz_st_close(kz_st_file *f);

/* Tensor by name, or NULL. */
const kz_st_tensor *kz_st_find(const kz_st_file *f, const char *name);

/* Tensor by name with an expected shape: returns KZ_STATUS_BAD_MODEL with a
 * message naming file, tensor, expected and actual shape (or "missing") when it
 * does not match. n_dims <= KZ_ST_MAX_DIMS. */
kz_status kz_st_get(const kz_st_file *f, const char *name, int n_dims, const int64_t *shape,
                    const kz_st_tensor **out);

/* Number of tensors and tensor by index (in header order). */
size_t kz_st_count(const kz_st_file *f);
const kz_st_tensor *kz_st_at(const kz_st_file *f, size_t index);

/* Path the file was opened with. */
const char *kz_st_path(const kz_st_file *f);

/* Value of `key` in the header's "__metadata__" object (string values only), or
 * NULL if absent. The first occurrence wins if a key repeats. Borrowed; valid
 * until kz_st_close. */
const char *kz_st_metadata(const kz_st_file *f, const char *key);

/* Releases the mapped pages of a tensor from memory (madvise DONTNEED) after
 * the caller has converted it; the data stays readable (it is re-read from the
 * file on access). Used to keep peak RSS low while packing weights. */
void kz_st_release(const kz_st_file *f, const kz_st_tensor *t);

#endif
