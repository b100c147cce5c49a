/*
 * voice_fingerprint.c - which encoder weights a voice was made with (kz_model_voice_fingerprint,
 * voice.h; the definition, with a Python twin in tools/reference/voice_file.py, is in
 * docs/VOICE_FILE.md).
 *
 *   main weights "speaker_encoder.*"         -+- each group in strcmp order of the names
 *   codec weights "encoder.quantizer.*"       |  (a quantizer layer numbered at or beyond
 *     ".codebook." tensors of the layers     -+   encoder_valid_num_quantizers is left out)
 *     the encoder's codes use
 *   -> per tensor: FNV-1a of its name, mixed with each dimension; its values as f32 bits,
 *      each mixed with its index and summed (mod 2^64)
 *   -> folded into the fingerprint in order.
 *
 * Values as f32, not the file's bytes, so a GGUF that keeps these tensors in f32, f16 or
 * bf16 gives the checkpoint's fingerprint. The sum of independently mixed elements has no
 * serial dependency, so the pass runs at memory speed; only the hashed tensors' pages are
 * read, and dropped again afterwards.
 */
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "runtime/error.h"
#include "synth/voice.h"

/* splitmix64's finalizer. */
static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t fnv1a64(const char *text) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        h = (h ^ *p) * 0x100000001b3ull;
    }
    return h;
}

/* Whether a codec tensor counts: a codebook tensor under encoder.quantizer. (".codebook."),
 * not in a layer numbered valid or beyond (".layers.N."). The quantizer's projections are
 * left out: a GGUF may hold them only as packed panels (io/weights.h). */
static bool quantizer_tensor(const char *name, int32_t valid) {
    static const char prefix[] = "encoder.quantizer.";
    if (strncmp(name, prefix, sizeof prefix - 1) != 0 || !strstr(name, ".codebook.")) {
        return false;
    }
    const char *layers = strstr(name, ".layers.");
    if (!layers) {
        return true;
    }
    char *end;
    long n = strtol(layers + 8, &end, 10);
    return end == layers + 8 || n < valid;
}

static int by_name(const void *a, const void *b) {
    return strcmp((*(const kz_tensor *const *)a)->name, (*(const kz_tensor *const *)b)->name);
}

/* The tensors of w that count (speaker encoder when valid < 0), sorted by name: *out
 * malloc'ed [*n]; false when out of memory. */
static bool select_tensors(const kz_weights *w, int32_t valid, const kz_tensor ***out,
                           size_t *n) {
    *out = NULL;
    *n = 0;
    const size_t n_all = w ? kz_weights_count(w) : 0;
    const kz_tensor **list = malloc(sizeof *list * (n_all ? n_all : 1));
    if (!list) {
        return false;
    }
    for (size_t i = 0; i < n_all; i++) {
        const kz_tensor *t = kz_weights_at(w, i);
        if (valid < 0 ? strncmp(t->name, "speaker_encoder.", 16) == 0
                      : quantizer_tensor(t->name, valid)) {
            list[(*n)++] = t;
        }
    }
    qsort(list, *n, sizeof *list, by_name);
    *out = list;
    return true;
}

/* Sum over the values of mix64(index << 32 | f32 bits); a tensor that is not a float type
 * contributes its raw bytes as the values. scratch holds t->n_elements floats. */
static uint64_t values_sum(const kz_tensor *t, float *scratch) {
    uint64_t sum = 0;
    if (kz_tensor_to_f32(t, scratch) != KZ_OK) {
        const uint8_t *bytes = t->data;
        for (size_t i = 0; i < t->n_bytes; i++) {
            sum += mix64((uint64_t)i << 32 | bytes[i]);
        }
        kz_error_clear(); // not a failure: the raw bytes stand for the values
        return sum;
    }
    for (size_t i = 0; i < t->n_elements; i++) {
        uint32_t bits;
        memcpy(&bits, &scratch[i], sizeof bits);
        sum += mix64((uint64_t)i << 32 | bits);
    }
    return sum;
}

static uint64_t fold(uint64_t fp, const kz_weights *w, const kz_tensor *const *list, size_t n,
                     float *scratch) {
    for (size_t i = 0; i < n; i++) {
        const kz_tensor *t = list[i];
        uint64_t h = fnv1a64(t->name);
        for (int d = 0; d < t->n_dims; d++) {
            h = mix64(h ^ (uint64_t)t->shape[d]);
        }
        fp = mix64(mix64(fp ^ h) + values_sum(t, scratch));
        kz_weights_release(w, t);
    }
    return fp;
}

static size_t largest(const kz_tensor *const *list, size_t n) {
    size_t most = 1;
    for (size_t i = 0; i < n; i++) {
        most = list[i]->n_elements > most ? list[i]->n_elements : most;
    }
    return most;
}

uint64_t kz_model_voice_fingerprint(const kz_model *m) {
    const kz_tensor **spk = NULL, **quant = NULL;
    size_t n_spk = 0, n_quant = 0;
    uint64_t fp = 0;
    if (m->has_tts && select_tensors(m->main_w, -1, &spk, &n_spk) &&
        select_tensors(m->codec_w, m->codec_cfg.encoder_valid_num_quantizers, &quant,
                       &n_quant) &&
        n_spk > 0 && n_quant > 0) {
        const size_t a = largest(spk, n_spk), b = largest(quant, n_quant);
        float *scratch = malloc(sizeof(float) * (a > b ? a : b));
        if (scratch) {
            fp = fold(0x9e3779b97f4a7c15ull, m->main_w, spk, n_spk, scratch);
            fp = fold(fp, m->codec_w, quant, n_quant, scratch);
            fp = fp ? fp : 1; // 0 means "cannot clone"
        }
        free(scratch);
    }
    free(spk);
    free(quant);
    return fp;
}
