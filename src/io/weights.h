/*
 * weights.h - the named tensors a model loader reads: one safetensors file, or
 * the tensors of a GGUF file under a name prefix.
 *
 *   model.safetensors                   --kz_weights_open_safetensors-->  kz_weights
 *   model.gguf: "model.<name>" tensors  --kz_weights_from_gguf(g, "model.")-->  names <name>
 *               "codec.<name>" tensors  --kz_weights_from_gguf(g, "codec.")-->  names <name>
 *
 * Loaders (layers/, model/) see kz_tensor views by the checkpoint's own tensor
 * names, whatever the file kind, so one loading path serves both. A loader that
 * packs a tensor into another layout reports it through the on_packed hook (the
 * quantizer uses it to store the packed form, which later loads skip packing
 * for). Read-only after creation except for the hook.
 */
#ifndef KZ_WEIGHTS_H
#define KZ_WEIGHTS_H

#include <stddef.h>

#include "io/gguf.h"
#include "io/tensor.h"
#include "kernels/kernels.h"

typedef struct kz_weights kz_weights;

/* Called after a loader packed tensor `name` into p (see kz_weights_set_on_packed). */
typedef void (*kz_weights_packed_fn)(void *user, const char *name, const kz_packed *p);

/* Opens and validates a safetensors file; the result owns the mapping. */
kz_status kz_weights_open_safetensors(const char *path, kz_weights **out);

/* The tensors of g whose names start with prefix, named without it. Borrows g,
 * which must outlive the result. Fails for a tensor type the engine cannot use. */
kz_status kz_weights_from_gguf(const kz_gguf_file *g, const char *prefix, kz_weights **out);

/* Frees (and unmaps an owned safetensors file). Accepts NULL. */
void kz_weights_free(kz_weights *w);

/* Tensor by name, or NULL. */
const kz_tensor *kz_weights_find(const kz_weights *w, const char *name);

/* Tensor by name with an expected shape (kz_tensor_check's messages, naming the file). */
kz_status kz_weights_get(const kz_weights *w, const char *name, int n_dims, const int64_t *shape,
                         const kz_tensor **out);

/* Number of tensors, and tensor by index (file order). */
size_t kz_weights_count(const kz_weights *w);
const kz_tensor *kz_weights_at(const kz_weights *w, size_t index);

/* The file, for messages ("dir/model.safetensors", "x.gguf"). */
const char *kz_weights_path(const kz_weights *w);

/* What the file's own tensor names have before kz_tensor.name: the GGUF prefix ("model."),
 * "" for safetensors. For messages that name a tensor as the file does. */
const char *kz_weights_prefix(const kz_weights *w);

/* Drops the resident pages of a tensor after it was converted (data stays readable). */
void kz_weights_release(const kz_weights *w, const kz_tensor *t);

/* Packed-tensor hook (NULL to clear), and its call from loaders. */
void kz_weights_set_on_packed(kz_weights *w, kz_weights_packed_fn fn, void *user);
void kz_weights_packed(const kz_weights *w, const char *name, const kz_packed *p);

#endif
