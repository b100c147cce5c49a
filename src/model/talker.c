/*
 * talker.c - the talker (see talker.h): binding its mapped weights, text and
 * codec embeddings, and the forward pass over prompt rows or one frame, and one frame of
 * several requests at once (kz_talker_step_batch).
 */
#include "model/talker.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers/vector.h"
#include "runtime/error.h"

static kz_qwen3_dims dims_of(const kz_talker_config *c) {
    return (kz_qwen3_dims){.n_layers = c->num_hidden_layers, .hidden = c->hidden_size,
                           .n_heads = c->num_attention_heads, .n_kv_heads = c->num_key_value_heads,
                           .head_dim = c->head_dim, .intermediate = c->intermediate_size,
                           .eps = c->rms_norm_eps, .rope_theta = c->rope_theta};
}

kz_status kz_talker_load(kz_talker *t, const kz_weights *f, const kz_talker_config *cfg) {
    memset(t, 0, sizeof *t);
    t->cfg = *cfg;
    int64_t D = cfg->hidden_size, th = cfg->text_hidden_size;
    t->fc1_b = malloc((size_t)th * sizeof(float));
    t->fc2_b = malloc((size_t)D * sizeof(float));
    if (!t->fc1_b || !t->fc2_b) {
        kz_talker_free(t);
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory loading the talker");
    }
    kz_status st = kz_matrix_bind(&t->text_embedding, f, "talker.model.text_embedding.weight",
                                  cfg->text_vocab_size, th);
    st = st ? st : kz_matrix_bind(&t->fc1, f, "talker.text_projection.linear_fc1.weight", th, th);
    st = st ? st : kz_vector_load(f, "talker.text_projection.linear_fc1.bias", (size_t)th, t->fc1_b);
    st = st ? st : kz_matrix_bind(&t->fc2, f, "talker.text_projection.linear_fc2.weight", D, th);
    st = st ? st : kz_vector_load(f, "talker.text_projection.linear_fc2.bias", (size_t)D, t->fc2_b);
    st = st ? st : kz_matrix_bind(&t->codec_embedding, f, "talker.model.codec_embedding.weight",
                                  cfg->vocab_size, D);
    st = st ? st : kz_matrix_bind(&t->codec_head, f, "talker.codec_head.weight", cfg->vocab_size, D);
    kz_qwen3_dims d = dims_of(cfg);
    st = st ? st : kz_qwen3_load(&t->stack, f, "talker.model.", &d);
    if (st == KZ_OK) { // read in full by every prompt or step (the layers populate themselves)
        kz_matrix_populate(&t->fc1);
        kz_matrix_populate(&t->fc2);
        kz_matrix_populate(&t->codec_head);
    }
    if (st != KZ_OK) {
        kz_talker_free(t);
    }
    return st;
}

void kz_talker_free(kz_talker *t) {
    if (!t) {
        return;
    }
    kz_qwen3_free(&t->stack);
    free(t->fc1_b);
    free(t->fc2_b);
    memset(t, 0, sizeof *t);
}

kz_status kz_talker_state_init(kz_talker_state *s, const kz_talker *t, size_t max_pos,
                               size_t max_tok) {
    memset(s, 0, sizeof *s);
    size_t D = (size_t)t->cfg.hidden_size, th = (size_t)t->cfg.text_hidden_size;
    kz_status st = kz_qwen3_state_init(&s->seq, &t->stack, max_pos, max_tok);
    s->hidden = malloc(D * sizeof(float));
    s->logits = malloc((size_t)t->cfg.vocab_size * sizeof(float));
    s->text_tmp = malloc(2 * max_tok * th * sizeof(float));
    if (st == KZ_OK && (!s->hidden || !s->logits || !s->text_tmp)) {
        st = kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory for the talker state");
    }
    if (st != KZ_OK) {
        kz_talker_state_free(s);
    }
    return st;
}

void kz_talker_state_free(kz_talker_state *s) {
    kz_qwen3_state_free(&s->seq);
    free(s->hidden);
    free(s->logits);
    free(s->text_tmp);
    memset(s, 0, sizeof *s);
}

static void add_bias_rows(float *y, const float *b, size_t n, size_t w) {
    for (size_t r = 0; r < n; r++) {
        for (size_t i = 0; i < w; i++) {
            y[r * w + i] = y[r * w + i] + b[i];
        }
    }
}

kz_status kz_talker_text_vectors(const kz_talker *t, kz_talker_state *s, kz_exec *e,
                                 const int32_t *ids, size_t n, float *out) {
    size_t th = (size_t)t->cfg.text_hidden_size, D = (size_t)t->cfg.hidden_size;
    float *emb = s->text_tmp, *mid = s->text_tmp + s->seq.max_tok * th;
    for (size_t i = 0; i < n; i++) {
        kz_matrix_row(&t->text_embedding, (size_t)ids[i], emb + i * th);
        size_t bad = kz_vector_first_nonfinite(emb + i * th, th);
        if (bad < th) {
            return kz_error_set(KZ_STATUS_BAD_MODEL,
                                "tensor 'talker.model.text_embedding.weight': non-finite value "
                                "(NaN or Inf) at row %d, column %zu",
                                (int)ids[i], bad);
        }
    }
    kz_matrix_mul(&t->fc1, e, mid, th, emb, th, n);
    add_bias_rows(mid, t->fc1_b, n, th);
    for (size_t i = 0; i < n * th; i++) {
        mid[i] = mid[i] / (1.0f + expf(-mid[i]));
    }
    kz_matrix_mul(&t->fc2, e, out, D, mid, th, n);
    add_bias_rows(out, t->fc2_b, n, D);
    return KZ_OK;
}

void kz_talker_codec_vector(const kz_talker *t, int32_t id, float *out) {
    kz_matrix_row(&t->codec_embedding, (size_t)id, out);
}

void kz_talker_forward(const kz_talker *t, kz_talker_state *s, kz_exec *e, float *x, size_t n,
                       size_t split) {
    size_t D = (size_t)t->cfg.hidden_size;
    kz_qwen3_forward(&t->stack, &s->seq, e, x, n, split);
    kz_qwen3_final_norm(&t->stack, e, s->hidden, x + (n - 1) * D);
    kz_matrix_mul(&t->codec_head, e, s->logits, (size_t)t->cfg.vocab_size, s->hidden, D, 1);
}

kz_status kz_talker_batch_init(kz_talker_batch *b, const kz_talker *t, size_t max_seq) {
    memset(b, 0, sizeof *b);
    const size_t D = (size_t)t->cfg.hidden_size, V = (size_t)t->cfg.vocab_size;
    b->max_seq = max_seq;
    kz_status st = kz_qwen3_batch_init(&b->rows, &t->stack, max_seq);
    b->seqs = calloc(max_seq ? max_seq : 1, sizeof *b->seqs);
    b->hidden = malloc(max_seq * D * sizeof(float));
    b->logits = malloc(max_seq * V * sizeof(float));
    if (st == KZ_OK && (!b->seqs || !b->hidden || !b->logits)) {
        st = kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory for a talker batch");
    }
    if (st != KZ_OK) {
        kz_talker_batch_free(b);
    }
    return st;
}

void kz_talker_batch_free(kz_talker_batch *b) {
    kz_qwen3_batch_free(&b->rows);
    free(b->seqs);
    free(b->hidden);
    free(b->logits);
    memset(b, 0, sizeof *b);
}

void kz_talker_step_batch(const kz_talker *t, kz_talker_state *const *s, size_t n_seq,
                          kz_talker_batch *b, kz_exec *e, float *x) {
    KZ_ASSERT(n_seq <= b->max_seq);
    const size_t D = (size_t)t->cfg.hidden_size, V = (size_t)t->cfg.vocab_size;
    for (size_t i = 0; i < n_seq; i++) {
        b->seqs[i] = &s[i]->seq;
    }
    kz_qwen3_forward_batch(&t->stack, b->seqs, n_seq, &b->rows, e, x, 1);
    for (size_t i = 0; i < n_seq; i++) {
        kz_qwen3_final_norm(&t->stack, e, b->hidden + i * D, x + i * D);
    }
    kz_matrix_mul_batch(&t->codec_head, e, b->logits, V, b->hidden, D, n_seq);
    for (size_t i = 0; i < n_seq; i++) {
        memcpy(s[i]->hidden, b->hidden + i * D, D * sizeof(float));
        memcpy(s[i]->logits, b->logits + i * V, V * sizeof(float));
    }
}
