/*
 * codec_transformer.c - the codec pre-transformer (see codec_transformer.h).
 *
 * Per layer, for a chunk of T rows at positions pos .. pos+T-1:
 *   xn = RMSNorm(x)                        input_layernorm, eps rms_norm_eps
 *   q, k, v = xn Wq, xn Wk, xn Wv          no bias, no QK-norm
 *   q, k = RoPE(q, k; pos + t)             rotate-half over head_dim, theta 1e4
 *   att[t] = softmax(q k^T / sqrt(hd)) v   keys pos+t-W+1 .. pos+t from the ring
 *   x += attn_scale * (att Wo)             self_attn_layer_scale
 *   xn = RMSNorm(x)                        post_attention_layernorm
 *   x += mlp_scale * (SiLU(xn Wg) * xn Wu) Wd
 * Tensor names: decoder.pre_transformer.{input_proj,output_proj,norm,layers.{l}.*}.
 * q / k / v and gate / up are one pool job each (kz_conv_run_group: xn rounded to bf16 once
 * where they run in bf16).
 * Trap: the reference restarts positions at 0 for every decode call; a stream
 * is one call, so positions here count frames since the last reset.
 */
#include "model/codec_transformer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/attention.h"
#include "layers/vector.h"
#include "runtime/error.h"

#define PREFIX "decoder.pre_transformer."

static kz_status load_layer(kz_codec_layer *L, const kz_weights *f, const kz_codec_config *c,
                            int l, float *vec) {
    char name[160], bname[8];
    int64_t hid = c->hidden_size, att = (int64_t)c->num_attention_heads * c->head_dim;
    int64_t kv = (int64_t)c->num_key_value_heads * c->head_dim, mlp = c->intermediate_size;
    const char *vec_names[4] = {"input_layernorm.weight", "post_attention_layernorm.weight",
                                "self_attn_layer_scale.scale", "mlp_layer_scale.scale"};
    const float **vec_dst[4] = {&L->attn_norm, &L->mlp_norm, &L->attn_scale, &L->mlp_scale};
    kz_status st = KZ_OK;
    for (int i = 0; i < 4 && st == KZ_OK; i++) {
        snprintf(name, sizeof name, PREFIX "layers.%d.%s", l, vec_names[i]);
        st = kz_vector_load(f, name, (size_t)hid, vec + i * hid);
        *vec_dst[i] = vec + i * hid;
    }
    struct { kz_conv *conv; const char *n; int64_t out, in; } lin[7] = {
        {&L->q, "self_attn.q_proj", att, hid},  {&L->k, "self_attn.k_proj", kv, hid},
        {&L->v, "self_attn.v_proj", kv, hid},   {&L->o, "self_attn.o_proj", hid, att},
        {&L->gate, "mlp.gate_proj", mlp, hid},  {&L->up, "mlp.up_proj", mlp, hid},
        {&L->down, "mlp.down_proj", hid, mlp}};
    (void)bname;
    for (int i = 0; i < 7 && st == KZ_OK; i++) {
        snprintf(name, sizeof name, PREFIX "layers.%d.%s.weight", l, lin[i].n);
        st = kz_conv_load_linear(lin[i].conv, f, name, NULL, lin[i].out, lin[i].in);
    }
    return st;
}

kz_status kz_codec_transformer_load(kz_codec_transformer *t, const kz_weights *f,
                                    const kz_codec_config *cfg) {
    memset(t, 0, sizeof *t);
    t->cfg = *cfg;
    size_t hid = (size_t)cfg->hidden_size, n_layers = (size_t)cfg->num_hidden_layers;
    t->layers = calloc(n_layers + 1, sizeof *t->layers);
    t->vectors = malloc((4 * n_layers + 1) * hid * sizeof *t->vectors);
    t->inv_freq = malloc((size_t)cfg->head_dim * sizeof *t->inv_freq);
    if (!t->layers || !t->vectors || !t->inv_freq) {
        kz_codec_transformer_free(t);
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory loading the codec transformer");
    }
    kz_rope_init(t->inv_freq, cfg->head_dim, cfg->rope_theta);
    kz_status st = kz_conv_load_linear(&t->input_proj, f, PREFIX "input_proj.weight",
                                       PREFIX "input_proj.bias", cfg->hidden_size, cfg->latent_dim);
    if (st == KZ_OK) {
        st = kz_conv_load_linear(&t->output_proj, f, PREFIX "output_proj.weight",
                                 PREFIX "output_proj.bias", cfg->latent_dim, cfg->hidden_size);
    }
    float *norm = t->vectors + 4 * n_layers * hid;
    if (st == KZ_OK) {
        st = kz_vector_load(f, PREFIX "norm.weight", hid, norm);
        t->norm = norm;
    }
    for (size_t l = 0; l < n_layers && st == KZ_OK; l++) {
        st = load_layer(&t->layers[l], f, cfg, (int)l, t->vectors + 4 * l * hid);
    }
    if (st != KZ_OK) {
        kz_codec_transformer_free(t);
    }
    return st;
}

/* The seven projections of a layer, in load order. */
#define LAYER_LINEARS 7
static void layer_linears(kz_codec_layer *L, kz_conv *out[LAYER_LINEARS]) {
    kz_conv *lin[LAYER_LINEARS] = {&L->q, &L->k, &L->v, &L->o, &L->gate, &L->up, &L->down};
    memcpy(out, lin, sizeof lin);
}

void kz_codec_transformer_free(kz_codec_transformer *t) {
    if (!t) {
        return;
    }
    for (int l = 0; t->layers && l < t->cfg.num_hidden_layers; l++) {
        kz_conv *lin[LAYER_LINEARS];
        layer_linears(&t->layers[l], lin);
        for (int i = 0; i < LAYER_LINEARS; i++) {
            kz_conv_free(lin[i]);
        }
    }
    kz_conv_free(&t->input_proj);
    kz_conv_free(&t->output_proj);
    free(t->layers);
    free(t->vectors);
    free(t->inv_freq);
    memset(t, 0, sizeof *t);
}

void kz_codec_transformer_list_bf16(kz_codec_transformer *t, kz_convert_list *l) {
    for (int l_i = 0; l_i < t->cfg.num_hidden_layers; l_i++) {
        kz_conv *lin[LAYER_LINEARS];
        layer_linears(&t->layers[l_i], lin);
        for (int i = 0; i < LAYER_LINEARS; i++) {
            kz_convert_add_bf16(l, lin[i]);
        }
    }
}

void kz_codec_transformer_each_conv(kz_codec_transformer *t,
                                    void (*fn)(void *user, kz_conv *c, kz_wino *w), void *user) {
    fn(user, &t->input_proj, NULL);
    for (int l_i = 0; t->layers && l_i < t->cfg.num_hidden_layers; l_i++) {
        kz_conv *lin[LAYER_LINEARS];
        layer_linears(&t->layers[l_i], lin);
        for (int i = 0; i < LAYER_LINEARS; i++) {
            fn(user, lin[i], NULL);
        }
    }
    fn(user, &t->output_proj, NULL);
}

/* --- state ---------------------------------------------------------------- */

kz_status kz_codec_transformer_state_init(kz_codec_transformer_state *s,
                                          const kz_codec_transformer *t, size_t max_rows) {
    memset(s, 0, sizeof *s);
    const kz_codec_config *c = &t->cfg;
    size_t kv = (size_t)c->num_key_value_heads * c->head_dim;
    size_t att = (size_t)c->num_attention_heads * c->head_dim;
    size_t hid = (size_t)c->hidden_size, mlp = (size_t)c->intermediate_size;
    size_t ring = (size_t)c->num_hidden_layers * (size_t)c->sliding_window * kv;
    s->max_rows = max_rows;
    s->ring_floats = ring;
    s->k_ring = calloc(ring + 1, sizeof(float));
    s->v_ring = calloc(ring + 1, sizeof(float));
    s->x = malloc(max_rows * hid * sizeof(float));
    s->xn = malloc(max_rows * hid * sizeof(float));
    s->h = malloc(max_rows * hid * sizeof(float));
    s->q = malloc(max_rows * att * sizeof(float));
    s->att = malloc(max_rows * att * sizeof(float));
    s->k = malloc(max_rows * kv * sizeof(float));
    s->v = malloc(max_rows * kv * sizeof(float));
    s->gate = malloc(max_rows * mlp * sizeof(float));
    s->up = malloc(max_rows * mlp * sizeof(float));
    s->scores = malloc((size_t)c->sliding_window * sizeof(float));
    if (!s->k_ring || !s->v_ring || !s->x || !s->xn || !s->h || !s->q || !s->att || !s->k ||
        !s->v || !s->gate || !s->up || !s->scores) {
        kz_codec_transformer_state_free(s);
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory for codec transformer state");
    }
    return KZ_OK;
}

void kz_codec_transformer_state_free(kz_codec_transformer_state *s) {
    float *bufs[] = {s->k_ring, s->v_ring, s->x,    s->xn, s->h,  s->q,
                     s->att,    s->k,      s->v,    s->gate, s->up, s->scores};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        free(bufs[i]);
    }
    memset(s, 0, sizeof *s);
}

void kz_codec_transformer_state_reset(kz_codec_transformer_state *s) {
    s->pos = 0;
}

/* --- forward -------------------------------------------------------------- */

/* One query row attends to the ring entries for positions lo..pos (ascending). */
static void attend_row(const kz_codec_transformer *t, kz_codec_transformer_state *s,
                       const kz_kernels *k, int l, size_t row, int64_t pos) {
    const kz_codec_config *c = &t->cfg;
    size_t hd = (size_t)c->head_dim, W = (size_t)c->sliding_window;
    size_t kv = (size_t)c->num_key_value_heads * hd;
    size_t att_w = (size_t)c->num_attention_heads * hd;
    const float *kr = s->k_ring + (size_t)l * W * kv;
    const float *vr = s->v_ring + (size_t)l * W * kv;
    int64_t lo = pos - (int64_t)W + 1 < 0 ? 0 : pos - (int64_t)W + 1;
    size_t group = (size_t)(c->num_attention_heads / c->num_key_value_heads);
    for (size_t h = 0; h < (size_t)c->num_attention_heads; h++) {
        size_t koff = (h / group) * hd;
        kz_attend_row(k, s->att + row * att_w + h * hd, s->q + row * att_w + h * hd, kr + koff,
                      vr + koff, kv, lo, pos, W, hd, s->scores);
    }
}

static void attention(const kz_codec_transformer *t, kz_codec_transformer_state *s, kz_exec *e,
                      int l, size_t n_rows) {
    const kz_codec_config *c = &t->cfg;
    const kz_codec_layer *L = &t->layers[l];
    size_t hid = (size_t)c->hidden_size, W = (size_t)c->sliding_window;
    size_t kv = (size_t)c->num_key_value_heads * c->head_dim;
    size_t att_w = (size_t)c->num_attention_heads * c->head_dim;
    e->k->rms_norm(s->xn, s->x, L->attn_norm, n_rows, hid, c->rms_norm_eps);
    const kz_conv_call qkv[3] = {{&L->q, s->q, att_w, s->xn, hid},
                                 {&L->k, s->k, kv, s->xn, hid},
                                 {&L->v, s->v, kv, s->xn, hid}};
    kz_conv_run_group(qkv, 3, e, n_rows, KZ_GEMM_STORE);
    for (size_t r = 0; r < n_rows; r++) {
        int64_t pos = s->pos + (int64_t)r;
        kz_rope_apply(s->q + r * att_w, c->num_attention_heads, c->head_dim, t->inv_freq, pos);
        kz_rope_apply(s->k + r * kv, c->num_key_value_heads, c->head_dim, t->inv_freq, pos);
        size_t slot = ((size_t)l * W + (size_t)(pos % (int64_t)W)) * kv;
        memcpy(s->k_ring + slot, s->k + r * kv, kv * sizeof(float));
        memcpy(s->v_ring + slot, s->v + r * kv, kv * sizeof(float));
        attend_row(t, s, e->k, l, r, pos);
    }
    kz_conv_run(&L->o, e, s->h, hid, s->att, att_w, n_rows, KZ_GEMM_STORE);
    kz_vector_add_scaled_rows(s->x, s->h, L->attn_scale, n_rows, hid);
}

static void mlp(const kz_codec_transformer *t, kz_codec_transformer_state *s, kz_exec *e, int l,
                size_t n_rows) {
    const kz_codec_config *c = &t->cfg;
    const kz_codec_layer *L = &t->layers[l];
    size_t hid = (size_t)c->hidden_size, inter = (size_t)c->intermediate_size;
    e->k->rms_norm(s->xn, s->x, L->mlp_norm, n_rows, hid, c->rms_norm_eps);
    const kz_conv_call gate_up[2] = {{&L->gate, s->gate, inter, s->xn, hid},
                                     {&L->up, s->up, inter, s->xn, hid}};
    kz_conv_run_group(gate_up, 2, e, n_rows, KZ_GEMM_STORE);
    e->k->swiglu(s->gate, s->gate, s->up, n_rows * inter);
    kz_conv_run(&L->down, e, s->h, hid, s->gate, inter, n_rows, KZ_GEMM_STORE);
    kz_vector_add_scaled_rows(s->x, s->h, L->mlp_scale, n_rows, hid);
}

void kz_codec_transformer_forward(const kz_codec_transformer *t, kz_codec_transformer_state *s,
                                  kz_exec *e, float *y, const float *x, size_t n_rows) {
    const kz_codec_config *c = &t->cfg;
    size_t hid = (size_t)c->hidden_size, latent = (size_t)c->latent_dim;
    KZ_ASSERT(n_rows <= s->max_rows);
    kz_conv_run(&t->input_proj, e, s->x, hid, x, latent, n_rows, KZ_GEMM_STORE);
    for (int l = 0; l < c->num_hidden_layers; l++) {
        attention(t, s, e, l, n_rows);
        mlp(t, s, e, l, n_rows);
    }
    e->k->rms_norm(s->xn, s->x, t->norm, n_rows, hid, c->rms_norm_eps);
    kz_conv_run(&t->output_proj, e, y, latent, s->xn, hid, n_rows, KZ_GEMM_STORE);
    s->pos += (int64_t)n_rows;
}
