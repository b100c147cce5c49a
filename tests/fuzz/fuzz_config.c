/*
 * fuzz_config.c - libFuzzer target for the config readers: config.json
 * (src/model/config.c), speech_tokenizer/config.json (src/model/codec_config.c) and
 * generation_config.json, each fed the same input.
 *
 * Dataflow: input bytes -> an exact-size heap copy (no NUL after it) -> each parser
 *   -> on failure: the message must name the label and the output must be zeroed
 *      (tts, codec), and the status must be BAD_MODEL / UNSUPPORTED / OUT_OF_MEMORY
 *   -> on success: every id must lie inside the table it indexes and every size
 *      must be one the loaders can bind (what the engine relies on afterwards).
 *
 * Seeds: tests/fuzz/corpus/config/ (the tiny checkpoints' three configs, a remapped
 * one, broken variants); dictionary: tests/fuzz/config.dict. Any crash, sanitizer
 * report or abort() below is a bug in the readers.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/codec_config.h"
#include "model/config.h"
#include "runtime/error.h"

#define LABEL "fuzz:config.json"

static bool is_zero(const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        if (b[i]) {
            return false;
        }
    }
    return true;
}

static void check_failure(kz_status st, const void *out, size_t n) {
    bool known = st == KZ_STATUS_BAD_MODEL || st == KZ_STATUS_UNSUPPORTED ||
                 st == KZ_STATUS_OUT_OF_MEMORY;
    if (!known || !strstr(kz_error_get(), LABEL) || (out && !is_zero(out, n))) {
        abort();
    }
}

static bool in(int32_t id, int32_t n) {
    return id >= 0 && id < n;
}

/* What a parsed config.json promises: every id inside its table. */
static void check_tts(const kz_tts_config *c) {
    const kz_talker_config *t = &c->talker;
    const int32_t text[] = {c->im_start_token_id, c->im_end_token_id, c->tts_pad_token_id,
                            c->tts_bos_token_id, c->tts_eos_token_id};
    const int32_t codec[] = {t->codec_eos_token_id, t->codec_think_id,   t->codec_nothink_id,
                             t->codec_think_bos_id, t->codec_think_eos_id, t->codec_pad_id,
                             t->codec_bos_id};
    for (size_t i = 0; i < sizeof text / sizeof text[0]; i++) {
        if (!in(text[i], t->text_vocab_size)) {
            abort();
        }
    }
    for (size_t i = 0; i < sizeof codec / sizeof codec[0]; i++) {
        if (!in(codec[i], t->vocab_size)) {
            abort();
        }
    }
    if (c->assistant_token_id >= t->text_vocab_size || t->n_languages > KZ_MAX_NAMES ||
        t->n_speakers > KZ_MAX_NAMES || t->first_control_id < 1 ||
        t->first_control_id != t->vocab_size - KZ_TALKER_CONTROL_IDS || t->head_dim < 2 ||
        t->num_attention_heads % t->num_key_value_heads != 0 ||
        t->num_code_groups != t->code_predictor.num_code_groups) {
        abort();
    }
    for (int i = 0; i < t->n_languages; i++) {
        if (!in(t->languages[i].id, t->vocab_size)) {
            abort();
        }
    }
    for (int i = 0; i < t->n_speakers; i++) {
        if (!in(t->speakers[i].id, t->vocab_size)) {
            abort();
        }
    }
}

/* What a parsed codec config promises to the decoder's loader. */
static void check_codec(const kz_codec_config *c) {
    int64_t total = 1;
    for (int i = 0; i < c->n_upsample_rates; i++) {
        total *= c->upsample_rates[i];
    }
    for (int i = 0; i < c->n_upsampling_ratios; i++) {
        total *= c->upsampling_ratios[i];
    }
    if (total != c->decode_upsample_rate || c->codebook_dim % 2 != 0 || c->head_dim < 2 ||
        c->n_upsample_rates < 1 || c->n_upsample_rates > KZ_CODEC_MAX_RATES ||
        c->decoder_dim % (1 << c->n_upsample_rates) != 0 || c->num_quantizers < 2) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *copy = malloc(size ? size : 1);
    if (!copy) {
        return 0;
    }
    memcpy(copy, data, size);
    static kz_tts_config tts;
    kz_status st = kz_tts_config_parse(LABEL, copy, size, &tts);
    if (st != KZ_OK) {
        check_failure(st, &tts, sizeof tts);
    } else {
        check_tts(&tts);
    }
    kz_codec_config codec;
    st = kz_codec_config_parse(LABEL, copy, size, &codec);
    if (st != KZ_OK) {
        check_failure(st, &codec, sizeof codec);
    } else {
        check_codec(&codec);
    }
    kz_generation_config g;
    st = kz_generation_config_parse(LABEL, copy, size, &g);
    if (st != KZ_OK) {
        check_failure(st, NULL, 0);
    }
    free(copy);
    return 0;
}
