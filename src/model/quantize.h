/*
 * quantize.h - converting a checkpoint directory into one kztts GGUF file
 * (`kztts quantize`), with a weight-format recipe.
 *
 *   DIR --kz_model_open_with (validates everything, packs the codec and reports
 *         each packed weight)--> model [--codec forms: switched to P, panels kept]
 *       --recipe: type per talker / code-predictor tensor--> GGUF writer
 *       --configs, tokenizer files as text, tensors converted one at a time--> OUT.gguf
 *
 * Recipes (what each --type stores; everything else keeps its stored type):
 *   f32    every talker matrix F32                        (reference, large)
 *   bf16   every talker matrix BF16                       (= the release)
 *   f16    every talker matrix F16 (IEEE half, round to nearest even; values beyond
 *          65504 become infinities, so only for weights known to fit)
 *   q8_0   every talker matrix Q8_0: the 28 + 5 transformer layers' projections,
 *          the embeddings, the codec heads, the text projection
 *   q4_0   transformer layers' q/k/v/o/gate/up/down projections Q4_0 (with the
 *          least-squares scale search, ref/quant_ref.c); embeddings, heads and the
 *          text projection Q8_0 (the fastest recipe)
 *   q4_mlp only the layers' MLP projections (gate/up/down) Q4_0, attention Q8_0
 *          (more accurate, ~70 % of q8_0's bytes)
 * Norms and biases stay in their stored float type in every recipe; the codec
 * decoder is stored as pre-packed F32 panels (it computes in fp32). "Talker
 * matrix" means a 2-D tensor named talker.*.weight with a multiple of 32 columns.
 */
#ifndef KZ_QUANTIZE_H
#define KZ_QUANTIZE_H

#include <stddef.h>

#include "io/tensor.h"
#include "kztts.h"

typedef enum kz_recipe {
    KZ_RECIPE_F32 = 0,
    KZ_RECIPE_BF16 = 1,
    KZ_RECIPE_Q8_0 = 2,
    KZ_RECIPE_Q4_0 = 3,
    KZ_RECIPE_Q4_MLP = 4,
    KZ_RECIPE_F16 = 5,
} kz_recipe;

/* "f32", "bf16", "f16", "q8_0" (or "q8"), "q4_0" (or "q4"), "q4_mlp". Returns -1
 * otherwise. */
int kz_recipe_parse(const char *name, kz_recipe *out);
const char *kz_recipe_name(kz_recipe r);

/* The type tensor t (named as in model.safetensors) is stored with under recipe r. */
kz_dtype kz_recipe_type(kz_recipe r, const kz_tensor *t);

/* What a conversion wrote, for the report. */
typedef struct kz_quantize_report {
    size_t n_tensors[6];  /* written tensors per kz_dtype (packed codec panels count as F32) */
    double bytes[6];      /* their data bytes */
    size_t n_packed;      /* codec weights stored as packed panels */
    size_t n_forms;       /* ... and with a converted form (codec_forms) */
    size_t n_skipped;     /* source tensors of a dtype GGUF cannot hold (not used by the engine) */
    double seconds;
} kz_quantize_report;

/* Converts the checkpoint directory src into out_path (written through a temporary
 * file, renamed only on success). codec_forms: KZ_PRECISION_F32 stores the codec's fp32
 * panels only; bf16, winograd or winograd-bf16 (fast: the one this CPU resolves it to) also
 * stores the forms that precision converts the codec to at load, which loads in that
 * precision then map instead of computing (gguf_layout.h). report may be NULL. */
kz_status kz_quantize(const char *src, const char *out_path, kz_recipe r,
                      kz_precision codec_forms, kz_quantize_report *report);

#endif
