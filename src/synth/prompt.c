/*
 * prompt.c - building the talker's prefill rows and trailing text vectors
 * (see prompt.h for the layout).
 *
 * Flow: text-track vectors T(id) for the instruction, role, special and text
 * tokens (batched through the text projection); codec-track vectors C(id) for
 * the tags; rows are written in order, each the sum of its two tracks (the
 * codec term added to the text term, one rounding, as the reference adds them).
 */
#include "synth/prompt.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"

static kz_status text_vectors(const kz_talker *t, kz_talker_state *s, kz_exec *e,
                              const int32_t *ids, size_t n, float *out) {
    size_t D = (size_t)t->cfg.hidden_size, step = s->seq.max_tok;
    kz_status st = KZ_OK;
    for (size_t i = 0; i < n && st == KZ_OK; i += step) {
        size_t m = n - i < step ? n - i : step;
        st = kz_talker_text_vectors(t, s, e, ids + i, m, out + i * D);
    }
    return st;
}

/* Codec tags in order: think/nothink, think_bos, [language], think_eos, [speaker], pad, bos. */
static size_t codec_tags(const kz_prompt_spec *spec, const kz_talker_config *c, int32_t *tags) {
    size_t n = 0;
    tags[n++] = spec->language_id < 0 ? c->codec_nothink_id : c->codec_think_id;
    tags[n++] = c->codec_think_bos_id;
    if (spec->language_id >= 0) {
        tags[n++] = spec->language_id;
    }
    tags[n++] = c->codec_think_eos_id;
    if (spec->speaker_id >= 0) {
        tags[n++] = spec->speaker_id;
    }
    tags[n++] = c->codec_pad_id;
    tags[n++] = c->codec_bos_id;
    return n;
}

size_t kz_prompt_rows(const kz_prompt_spec *spec, const kz_talker *t) {
    int32_t tags[8];
    size_t n_tags = codec_tags(spec, &t->cfg, tags);
    size_t body = spec->streaming ? 1 : spec->n_text + 2;
    return spec->n_instruct + 3 + (n_tags - 1) + body;
}

static void add(float *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) {
        dst[i] = dst[i] + src[i];
    }
}

/* Writes the tag rows at rows[0..]: PAD_T + C(tag) ..., BOS_T + C(codec_pad). */
static size_t tag_rows(float *rows, const int32_t *tags, size_t n_tags, const float *specials,
                       const kz_talker *t) {
    size_t D = (size_t)t->cfg.hidden_size;
    const float *pad_t = specials, *bos_t = specials + D;
    for (size_t i = 0; i + 1 < n_tags; i++) {
        float *row = rows + i * D;
        kz_talker_codec_vector(t, tags[i], row);
        add(row, i + 2 == n_tags ? bos_t : pad_t, D);
    }
    return n_tags - 1;
}

/* Body rows and trailing vectors; text holds T(text_ids[i]). */
static void body(kz_prompt *p, size_t at, const kz_prompt_spec *spec, const float *text,
                 const float *specials, const kz_talker *t) {
    size_t D = (size_t)t->cfg.hidden_size;
    const float *pad_t = specials, *eos_t = specials + 2 * D;
    const kz_talker_config *c = &t->cfg;
    if (spec->streaming) {
        kz_talker_codec_vector(t, c->codec_bos_id, p->rows + at * D);
        add(p->rows + at * D, text, D);
        memcpy(p->trailing, text + D, (spec->n_text - 1) * D * sizeof(float));
        memcpy(p->trailing + (spec->n_text - 1) * D, eos_t, D * sizeof(float));
        return;
    }
    for (size_t i = 0; i <= spec->n_text; i++) {
        float *row = p->rows + (at + i) * D;
        kz_talker_codec_vector(t, c->codec_pad_id, row);
        add(row, i < spec->n_text ? text + i * D : eos_t, D);
    }
    float *last = p->rows + (at + spec->n_text + 1) * D;
    kz_talker_codec_vector(t, c->codec_bos_id, last);
    add(last, pad_t, D);
    memcpy(p->trailing, pad_t, D * sizeof(float));
}

kz_status kz_prompt_build(kz_prompt *p, const kz_prompt_spec *spec, const kz_tts_config *cfg,
                          const kz_talker *t, kz_talker_state *s, kz_exec *e) {
    memset(p, 0, sizeof *p);
    size_t D = (size_t)t->cfg.hidden_size;
    int32_t tags[8];
    size_t n_tags = codec_tags(spec, &t->cfg, tags);
    p->n_rows = kz_prompt_rows(spec, t);
    p->n_trailing = spec->streaming ? spec->n_text : 1;
    p->rows = malloc(p->n_rows * D * sizeof(float));
    p->trailing = malloc(p->n_trailing * D * sizeof(float));
    p->pad = malloc(D * sizeof(float));
    p->eos = malloc(D * sizeof(float));
    float *specials = malloc(3 * D * sizeof(float));
    float *text = malloc(spec->n_text * D * sizeof(float));
    if (!p->rows || !p->trailing || !p->pad || !p->eos || !specials || !text) {
        free(specials);
        free(text);
        kz_prompt_free(p);
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory building the prompt");
    }
    int32_t special_ids[3] = {cfg->tts_pad_token_id, cfg->tts_bos_token_id, cfg->tts_eos_token_id};
    kz_status st = text_vectors(t, s, e, special_ids, 3, specials);
    st = st ? st : text_vectors(t, s, e, spec->text_ids, spec->n_text, text);
    size_t at = spec->n_instruct;
    st = st ? st : text_vectors(t, s, e, spec->instruct_ids, spec->n_instruct, p->rows);
    st = st ? st : text_vectors(t, s, e, spec->role_ids, 3, p->rows + at * D);
    if (st != KZ_OK) {
        free(specials);
        free(text);
        kz_prompt_free(p);
        return st;
    }
    at += 3;
    at += tag_rows(p->rows + at * D, tags, n_tags, specials, t);
    p->n_prefix = at;
    body(p, at, spec, text, specials, t);
    memcpy(p->pad, specials, D * sizeof(float));
    memcpy(p->eos, specials + 2 * D, D * sizeof(float));
    free(specials);
    free(text);
    return KZ_OK;
}

void kz_prompt_free(kz_prompt *p) {
    free(p->rows);
    free(p->trailing);
    free(p->pad);
    free(p->eos);
    memset(p, 0, sizeof *p);
}
