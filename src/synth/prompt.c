/*
 * prompt.c - building the talker's prefill rows and trailing text vectors
 * (see prompt.h for the layout).
 *
 * Flow: text-track vectors T(id) for the instruction, role, special and text
 * tokens (batched through the text projection; in ICL the transcript's and the text's
 * tokens in one run, as the official model projects them); codec-track vectors C(id)
 * for the tags (the x-vector row itself in a Base voice's speaker slot) and, in ICL,
 * each reference frame's code embeddings summed in codebook order as a generated
 * frame's feedback is; rows are written in order, each the sum of its two tracks (one
 * rounding, as the reference adds them).
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

/* Stands for the x-vector row in the tag list. */
#define TAG_XVECTOR (-2)

/* Codec tags in order: think/nothink, think_bos, [language], think_eos, [speaker], pad, bos. */
static size_t codec_tags(const kz_prompt_spec *spec, const kz_talker_config *c, int32_t *tags) {
    size_t n = 0;
    tags[n++] = spec->language_id < 0 ? c->codec_nothink_id : c->codec_think_id;
    tags[n++] = c->codec_think_bos_id;
    if (spec->language_id >= 0) {
        tags[n++] = spec->language_id;
    }
    tags[n++] = c->codec_think_eos_id;
    if (spec->speaker_vec) {
        tags[n++] = TAG_XVECTOR;
    } else if (spec->speaker_id >= 0) {
        tags[n++] = spec->speaker_id;
    }
    tags[n++] = c->codec_pad_id;
    tags[n++] = c->codec_bos_id;
    return n;
}

/* ICL columns: X = T(rt ++ text) ++ [EOS_T], Y = [C(bos)] ++ reference frames. */
static size_t icl_x(const kz_prompt_spec *spec) {
    return spec->n_ref_text + spec->n_text + 1;
}

static size_t icl_y(const kz_prompt_spec *spec) {
    return spec->n_ref_frames + 1;
}

/* Instruction, role and tag rows. */
static size_t head_rows(const kz_prompt_spec *spec, const kz_talker *t) {
    int32_t tags[8];
    return spec->n_instruct + 3 + (codec_tags(spec, &t->cfg, tags) - 1);
}

static size_t body_rows(const kz_prompt_spec *spec) {
    if (spec->ref_codes) {
        return spec->streaming ? icl_y(spec) : icl_x(spec) + icl_y(spec);
    }
    return spec->streaming ? 1 : spec->n_text + 2;
}

static size_t trailing_rows(const kz_prompt_spec *spec) {
    if (spec->ref_codes) {
        return spec->streaming && icl_x(spec) > icl_y(spec) ? icl_x(spec) - icl_y(spec) : 1;
    }
    return spec->streaming ? spec->n_text : 1;
}

/* Leading rows that depend only on the voice: the head, and in ICL the transcript's X
 * rows, at most up to the row before the last (the body keeps one row). */
static size_t prefix_rows(const kz_prompt_spec *spec, const kz_talker *t) {
    size_t head = head_rows(spec, t);
    if (!spec->ref_codes) {
        return head;
    }
    size_t n = spec->n_ref_text;
    if (spec->streaming && n > icl_y(spec) - 1) {
        n = icl_y(spec) - 1;
    }
    return head + n;
}

size_t kz_prompt_rows(const kz_prompt_spec *spec, const kz_talker *t) {
    return head_rows(spec, t) + body_rows(spec);
}

static void add(float *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) {
        dst[i] = dst[i] + src[i];
    }
}

/* Writes the tag rows at rows[0..]: PAD_T + C(tag) ..., BOS_T + C(codec_pad). */
static size_t tag_rows(float *rows, const int32_t *tags, size_t n_tags, const float *specials,
                       const kz_prompt_spec *spec, const kz_talker *t) {
    size_t D = (size_t)t->cfg.hidden_size;
    const float *pad_t = specials, *bos_t = specials + D;
    for (size_t i = 0; i + 1 < n_tags; i++) {
        float *row = rows + i * D;
        if (tags[i] == TAG_XVECTOR) {
            memcpy(row, spec->speaker_vec, D * sizeof(float));
        } else {
            kz_talker_codec_vector(t, tags[i], row);
        }
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

/* out[D] = E(frame): C(codes[0]) + the code predictor's embeddings of codes[1..], summed
 * in codebook order (as synth.c's feedback sums a generated frame). */
static void frame_vector(const kz_talker *t, const kz_matrix *cp_emb, const int32_t *codes,
                         float *tmp, float *out) {
    size_t D = (size_t)t->cfg.hidden_size, G = (size_t)t->cfg.num_code_groups;
    kz_talker_codec_vector(t, codes[0], out);
    for (size_t i = 1; i < G; i++) {
        kz_matrix_row(&cp_emb[i - 1], (size_t)codes[i], tmp);
        add(out, tmp, D);
    }
}

/* ICL body rows and trailing vectors (prompt.h); xt holds T(rt ++ text). */
static void icl_body(kz_prompt *p, size_t at, const kz_prompt_spec *spec, const float *xt,
                     const float *specials, const kz_talker *t, const kz_matrix *cp_emb,
                     float *tmp) {
    size_t D = (size_t)t->cfg.hidden_size, G = (size_t)t->cfg.num_code_groups;
    const float *pad_t = specials, *eos_t = specials + 2 * D;
    const kz_talker_config *c = &t->cfg;
    size_t nx = icl_x(spec), ny = icl_y(spec);
#define X(i) ((i) + 1 < nx ? xt + (i) * D : eos_t)
    float *row = p->rows + at * D;
    if (!spec->streaming) {
        for (size_t i = 0; i < nx; i++, row += D) {
            kz_talker_codec_vector(t, c->codec_pad_id, row);
            add(row, X(i), D);
        }
    }
    for (size_t j = 0; j < ny; j++, row += D) {
        if (j == 0) {
            kz_talker_codec_vector(t, c->codec_bos_id, row);
        } else {
            frame_vector(t, cp_emb, spec->ref_codes + (j - 1) * G, tmp, row);
        }
        add(row, spec->streaming && j < nx ? X(j) : pad_t, D);
    }
    if (spec->streaming && nx > ny) {
        for (size_t i = ny; i < nx; i++) {
            memcpy(p->trailing + (i - ny) * D, X(i), D * sizeof(float));
        }
    } else {
        memcpy(p->trailing, pad_t, D * sizeof(float));
    }
#undef X
}

/* Token ids of the text column: rt ++ text in ICL, else the text. *owned when allocated. */
static const int32_t *text_column(const kz_prompt_spec *spec, size_t *n, int32_t **owned) {
    *owned = NULL;
    *n = spec->n_text;
    if (!spec->ref_codes) {
        return spec->text_ids;
    }
    *n = spec->n_ref_text + spec->n_text;
    *owned = malloc(*n * sizeof(int32_t));
    if (*owned) {
        memcpy(*owned, spec->ref_text_ids, spec->n_ref_text * sizeof(int32_t));
        memcpy(*owned + spec->n_ref_text, spec->text_ids, spec->n_text * sizeof(int32_t));
    }
    return *owned;
}

kz_status kz_prompt_build(kz_prompt *p, const kz_prompt_spec *spec, const kz_tts_config *cfg,
                          const kz_talker *t, const kz_matrix *cp_embeddings,
                          kz_talker_state *s, kz_exec *e) {
    memset(p, 0, sizeof *p);
    size_t D = (size_t)t->cfg.hidden_size;
    int32_t tags[8];
    size_t n_tags = codec_tags(spec, &t->cfg, tags);
    p->n_rows = kz_prompt_rows(spec, t);
    p->n_trailing = trailing_rows(spec);
    p->rows = malloc(p->n_rows * D * sizeof(float));
    p->trailing = malloc(p->n_trailing * D * sizeof(float));
    p->pad = malloc(D * sizeof(float));
    p->eos = malloc(D * sizeof(float));
    float *specials = malloc(4 * D * sizeof(float)); // PAD_T, BOS_T, EOS_T, a scratch row
    int32_t *column_owned;
    size_t n_column;
    const int32_t *column = text_column(spec, &n_column, &column_owned);
    float *text = malloc((n_column ? n_column : 1) * D * sizeof(float));
    if (!p->rows || !p->trailing || !p->pad || !p->eos || !specials || !text || !column) {
        free(specials);
        free(text);
        free(column_owned);
        kz_prompt_free(p);
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory building the prompt");
    }
    int32_t special_ids[3] = {cfg->tts_pad_token_id, cfg->tts_bos_token_id, cfg->tts_eos_token_id};
    kz_status st = text_vectors(t, s, e, special_ids, 3, specials);
    st = st ? st : text_vectors(t, s, e, column, n_column, text);
    free(column_owned);
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
    at += tag_rows(p->rows + at * D, tags, n_tags, specials, spec, t);
    p->n_prefix = prefix_rows(spec, t);
    if (spec->ref_codes) {
        icl_body(p, at, spec, text, specials, t, cp_embeddings, specials + 3 * D);
    } else {
        body(p, at, spec, text, specials, t);
    }
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
