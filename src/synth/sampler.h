/*
 * sampler.h - turning logits into codes, as the official generate does.
 *
 * Talker (spec 8.5), on float32 logits in this order: repetition penalty over
 * the SET of codebook-0 codes sampled so far in the utterance; EOS masked while
 * fewer than min_new_tokens (2) have been generated (or always, in exact-frames
 * mode); every id in [suppress_from, vocab) except EOS masked; then either
 * argmax (greedy; lowest index on ties) or temperature -> top-k -> top-p ->
 * softmax -> one draw from the seeded RNG. The code predictor uses only the
 * last part (no penalty, no masks) with its own settings.
 * The RNG (xoshiro256**, seeded through splitmix64) belongs to the request, so
 * the same seed gives the same codes on any thread count.
 */
#ifndef KZ_SAMPLER_H
#define KZ_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kz_sampling {
    bool greedy;
    float temperature; /* > 0; 1 = unchanged */
    int32_t top_k;     /* 0 = off */
    float top_p;       /* (0, 1]; 1 = off */
} kz_sampling;

typedef struct kz_rng {
    uint64_t s[4];
} kz_rng;

void kz_rng_seed(kz_rng *r, uint64_t seed);

/* Uniform float in [0, 1) with 24 random bits. */
float kz_rng_uniform(kz_rng *r);

/* Talker-side processing of logits[n] in place (penalty, masks). seen[n] marks
 * codes sampled before; mask_eos masks eos_id; ids >= suppress_from except
 * eos_id are masked. */
void kz_logits_talker(float *logits, size_t n, const uint8_t *seen, float repetition_penalty,
                      bool mask_eos, int32_t eos_id, int32_t suppress_from);

/* Picks an index from logits[n] (modified in place); scratch holds
 * kz_sampler_scratch_bytes(n) bytes, aligned for float. */
int32_t kz_sample(float *logits, size_t n, const kz_sampling *s, kz_rng *rng, void *scratch);

size_t kz_sampler_scratch_bytes(size_t n);

#endif
