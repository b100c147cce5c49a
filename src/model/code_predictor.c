/*
 * code_predictor.c - codes 1..15 of a frame (see code_predictor.h).
 *
 * Per frame: reset the KV cache, project and run the 2-row prefill, then 14
 * one-row steps, each reading the previous code's embedding. All buffers are
 * allocated once per session; a frame allocates nothing. kz_code_predictor_run_batch runs
 * the same sub-steps for several requests' frames at once: each projection over all
 * their rows (kz_matrix_mul_batch, kz_qwen3_forward_batch), the rest per request with
 * kz_code_predictor_run's calls, so each request gets its bits.
 */
#include "model/code_predictor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/vector.h"
#include "runtime/error.h"

#define PREFIX "talker.code_predictor."

static kz_status load_tables(kz_code_predictor *p, const kz_weights *f) {
    char name[160];
    int64_t D = p->talker_hidden, H = p->cfg.hidden_size, V = p->cfg.vocab_size;
    kz_status st = KZ_OK;
    for (int i = 0; i < p->n_steps && st == KZ_OK; i++) {
        snprintf(name, sizeof name, PREFIX "model.codec_embedding.%d.weight", i);
        st = kz_matrix_bind(&p->embeddings[i], f, name, V, D);
        snprintf(name, sizeof name, PREFIX "lm_head.%d.weight", i);
        st = st ? st : kz_matrix_bind(&p->heads[i], f, name, V, H);
        if (st == KZ_OK) {
            kz_matrix_populate(&p->heads[i]);
        }
    }
    p->has_projection = kz_weights_find(f, PREFIX "small_to_mtp_projection.weight") != NULL;
    if (st == KZ_OK && !p->has_projection && D != H) {
        st = kz_error_set(KZ_STATUS_BAD_MODEL,
                          "%s: tensor '" PREFIX "small_to_mtp_projection.weight' is missing "
                          "(talker width %lld != code predictor width %lld)",
                          kz_weights_path(f), (long long)D, (long long)H);
    }
    if (st == KZ_OK && p->has_projection) {
        p->projection_b = malloc((size_t)H * sizeof(float));
        st = p->projection_b ? KZ_OK
                             : kz_error_set(KZ_STATUS_OUT_OF_MEMORY,
                                            "out of memory for the code predictor's projection");
        st = st ? st : kz_matrix_bind(&p->projection, f, PREFIX "small_to_mtp_projection.weight", H, D);
        if (st == KZ_OK) {
            kz_matrix_populate(&p->projection);
        }
        st = st ? st : kz_vector_load(f, PREFIX "small_to_mtp_projection.bias", (size_t)H,
                                      p->projection_b);
    }
    return st;
}

kz_status kz_code_predictor_load(kz_code_predictor *p, const kz_weights *f,
                                 const kz_talker_config *talker) {
    memset(p, 0, sizeof *p);
    p->cfg = talker->code_predictor;
    p->talker_hidden = talker->hidden_size;
    p->n_steps = p->cfg.num_code_groups - 1;
    if (p->n_steps < 1 || p->n_steps > KZ_CP_MAX_GROUPS) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: num_code_groups %d out of range",
                            kz_weights_path(f), p->cfg.num_code_groups);
    }
    kz_status st = load_tables(p, f);
    const kz_code_predictor_config *c = &p->cfg;
    kz_qwen3_dims d = {.n_layers = c->num_hidden_layers, .hidden = c->hidden_size,
                       .n_heads = c->num_attention_heads, .n_kv_heads = c->num_key_value_heads,
                       .head_dim = c->head_dim, .intermediate = c->intermediate_size,
                       .eps = c->rms_norm_eps, .rope_theta = c->rope_theta};
    st = st ? st : kz_qwen3_load(&p->stack, f, PREFIX "model.", &d);
    if (st != KZ_OK) {
        kz_code_predictor_free(p);
    }
    return st;
}

void kz_code_predictor_free(kz_code_predictor *p) {
    if (!p) {
        return;
    }
    kz_qwen3_free(&p->stack);
    free(p->projection_b);
    memset(p, 0, sizeof *p);
}

kz_status kz_code_predictor_state_init(kz_code_predictor_state *s, const kz_code_predictor *p) {
    memset(s, 0, sizeof *s);
    size_t D = (size_t)p->talker_hidden, H = (size_t)p->cfg.hidden_size;
    kz_status st = kz_qwen3_state_init(&s->seq, &p->stack, (size_t)p->n_steps + 1, 2);
    s->in = malloc(2 * D * sizeof(float));
    s->x = malloc(2 * H * sizeof(float));
    s->normed = malloc(H * sizeof(float));
    s->logits = malloc((size_t)p->cfg.vocab_size * sizeof(float));
    if (st == KZ_OK && (!s->in || !s->x || !s->normed || !s->logits)) {
        st = kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory for the code predictor");
    }
    if (st != KZ_OK) {
        kz_code_predictor_state_free(s);
    }
    return st;
}

void kz_code_predictor_state_free(kz_code_predictor_state *s) {
    kz_qwen3_state_free(&s->seq);
    free(s->in);
    free(s->x);
    free(s->normed);
    free(s->logits);
    memset(s, 0, sizeof *s);
}

/* s->x[n, hidden] = P(s->in[n, D]). */
static void project(const kz_code_predictor *p, kz_code_predictor_state *s, kz_exec *e, size_t n) {
    size_t D = (size_t)p->talker_hidden, H = (size_t)p->cfg.hidden_size;
    if (!p->has_projection) {
        memcpy(s->x, s->in, n * D * sizeof(float));
        return;
    }
    kz_matrix_mul(&p->projection, e, s->x, H, s->in, D, n);
    for (size_t r = 0; r < n; r++) {
        for (size_t i = 0; i < H; i++) {
            s->x[r * H + i] = s->x[r * H + i] + p->projection_b[i];
        }
    }
}

/* Runs the stack on s->x[n] and picks the code of head `step`. */
static int32_t step_code(const kz_code_predictor *p, kz_code_predictor_state *s, kz_exec *e,
                         size_t n, int step, kz_pick_fn pick, void *user, float *logits_out) {
    size_t H = (size_t)p->cfg.hidden_size, V = (size_t)p->cfg.vocab_size;
    kz_qwen3_forward(&p->stack, &s->seq, e, s->x, n, 0);
    kz_qwen3_final_norm(&p->stack, e, s->normed, s->x + (n - 1) * H);
    kz_matrix_mul(&p->heads[step], e, s->logits, V, s->normed, H, 1);
    if (logits_out) {
        memcpy(logits_out + (size_t)step * V, s->logits, V * sizeof(float));
    }
    return pick(user, s->logits, V);
}

void kz_code_predictor_run(const kz_code_predictor *p, kz_code_predictor_state *s, kz_exec *e,
                           const float *h, const float *e0, kz_pick_fn pick, void *pick_user,
                           int32_t *codes, float *logits_out) {
    size_t D = (size_t)p->talker_hidden;
    s->seq.n_pos = 0;
    memcpy(s->in, h, D * sizeof(float));
    memcpy(s->in + D, e0, D * sizeof(float));
    project(p, s, e, 2);
    codes[0] = step_code(p, s, e, 2, 0, pick, pick_user, logits_out);
    for (int k = 1; k < p->n_steps; k++) {
        kz_matrix_row(&p->embeddings[k - 1], (size_t)codes[k - 1], s->in);
        project(p, s, e, 1);
        codes[k] = step_code(p, s, e, 1, k, pick, pick_user, logits_out);
    }
}

kz_status kz_code_predictor_batch_init(kz_code_predictor_batch *b, const kz_code_predictor *p,
                                       size_t max_seq) {
    memset(b, 0, sizeof *b);
    const size_t D = (size_t)p->talker_hidden, H = (size_t)p->cfg.hidden_size;
    const size_t V = (size_t)p->cfg.vocab_size;
    b->max_seq = max_seq;
    kz_status st = kz_qwen3_batch_init(&b->rows, &p->stack, 2 * max_seq);
    b->seqs = calloc(max_seq ? max_seq : 1, sizeof *b->seqs);
    b->in = malloc(2 * max_seq * D * sizeof(float));
    b->x = malloc(2 * max_seq * H * sizeof(float));
    b->normed = malloc(max_seq * H * sizeof(float));
    b->logits = malloc(max_seq * V * sizeof(float));
    if (st == KZ_OK && (!b->seqs || !b->in || !b->x || !b->normed || !b->logits)) {
        st = kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory for a code predictor batch");
    }
    if (st != KZ_OK) {
        kz_code_predictor_batch_free(b);
    }
    return st;
}

void kz_code_predictor_batch_free(kz_code_predictor_batch *b) {
    kz_qwen3_batch_free(&b->rows);
    free(b->seqs);
    free(b->in);
    free(b->x);
    free(b->normed);
    free(b->logits);
    memset(b, 0, sizeof *b);
}

/* b->x[rows, hidden] = P(b->in[rows, D]), as project() per request. */
static void project_batch(const kz_code_predictor *p, kz_code_predictor_batch *b, kz_exec *e,
                          size_t rows) {
    const size_t D = (size_t)p->talker_hidden, H = (size_t)p->cfg.hidden_size;
    if (!p->has_projection) {
        memcpy(b->x, b->in, rows * D * sizeof(float));
        return;
    }
    kz_matrix_mul_batch(&p->projection, e, b->x, H, b->in, D, rows);
    for (size_t r = 0; r < rows; r++) {
        for (size_t i = 0; i < H; i++) {
            b->x[r * H + i] = b->x[r * H + i] + p->projection_b[i];
        }
    }
}

/* step_code() for every request of the batch: n rows each in b->x; codes of head `step`. */
static void step_codes(const kz_code_predictor *p, kz_code_predictor_state *const *s,
                       size_t n_seq, kz_code_predictor_batch *b, kz_exec *e, size_t n, int step,
                       const kz_pick_fn *pick, void *const *user, int32_t *codes,
                       float *const *logits_out) {
    const size_t H = (size_t)p->cfg.hidden_size, V = (size_t)p->cfg.vocab_size;
    kz_qwen3_forward_batch(&p->stack, b->seqs, n_seq, &b->rows, e, b->x, n);
    for (size_t i = 0; i < n_seq; i++) {
        kz_qwen3_final_norm(&p->stack, e, b->normed + i * H, b->x + (i * n + n - 1) * H);
    }
    kz_matrix_mul_batch(&p->heads[step], e, b->logits, V, b->normed, H, n_seq);
    for (size_t i = 0; i < n_seq; i++) {
        memcpy(s[i]->logits, b->logits + i * V, V * sizeof(float));
        if (logits_out && logits_out[i]) {
            memcpy(logits_out[i] + (size_t)step * V, s[i]->logits, V * sizeof(float));
        }
        codes[i * (size_t)p->n_steps + (size_t)step] = pick[i](user[i], s[i]->logits, V);
    }
}

void kz_code_predictor_run_batch(const kz_code_predictor *p, kz_code_predictor_state *const *s,
                                 size_t n_seq, kz_code_predictor_batch *b, kz_exec *e,
                                 const float *h, const float *e0, const kz_pick_fn *pick,
                                 void *const *pick_user, int32_t *codes,
                                 float *const *logits_out) {
    KZ_ASSERT(n_seq <= b->max_seq);
    const size_t D = (size_t)p->talker_hidden, steps = (size_t)p->n_steps;
    for (size_t i = 0; i < n_seq; i++) {
        s[i]->seq.n_pos = 0;
        b->seqs[i] = &s[i]->seq;
        memcpy(b->in + 2 * i * D, h + i * D, D * sizeof(float));
        memcpy(b->in + (2 * i + 1) * D, e0 + i * D, D * sizeof(float));
    }
    project_batch(p, b, e, 2 * n_seq);
    step_codes(p, s, n_seq, b, e, 2, 0, pick, pick_user, codes, logits_out);
    for (int k = 1; k < p->n_steps; k++) {
        for (size_t i = 0; i < n_seq; i++) {
            kz_matrix_row(&p->embeddings[k - 1], (size_t)codes[i * steps + (size_t)k - 1],
                          b->in + i * D);
        }
        project_batch(p, b, e, n_seq);
        step_codes(p, s, n_seq, b, e, 1, k, pick, pick_user, codes, logits_out);
    }
}
