/*
 * codec_encoder_load.c - loads the codec encoder ("encoder.*" of the codec checkpoint,
 * f32) into kz_codec_encoder (codec_encoder_internal.h).
 *
 * Flow: check encoder_config's relations (the hop matches encode_downsample_rate and the
 * sample rate input_sample_rate), then the conv stack (encoder.encoder.layers.N: conv,
 * per ratio the residual blocks, ELU, strided conv; ELU, last conv), the transformer
 * (encoder.encoder_transformer.layers.l), the downsample conv and the split RVQ's input
 * projections and codebooks. Every size comes from the config and every tensor's shape is
 * checked against it (BAD_MODEL naming the tensor). Stride-1 convs and linears go through
 * kz_conv_load_*; strided convs and codebooks are packed here (their layouts differ from
 * the stored weight, so they have no stored packed form).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/attention.h"
#include "layers/vector.h"
#include "model/codec_encoder_internal.h"
#include "runtime/error.h"

#define CLUSTER_USAGE_EPS 1e-5f /* MimiEuclideanCodebook's epsilon */

static kz_status oom(const char *what) {
    return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory loading the codec encoder (%s)",
                        what);
}

/* Reads tensor name of the given shape as f32 into a new buffer. */
static kz_status read_f32(const kz_weights *w, const char *name, int n_dims, const int64_t *shape,
                          float **out) {
    const kz_tensor *t;
    *out = NULL;
    kz_status st = kz_weights_get(w, name, n_dims, shape, &t);
    if (st != KZ_OK) {
        return st;
    }
    float *buf = malloc((t->n_elements ? t->n_elements : 1) * sizeof *buf);
    if (!buf) {
        return oom(name);
    }
    st = kz_tensor_to_f32(t, buf);
    kz_weights_release(w, t);
    if (st != KZ_OK) {
        free(buf);
        return st;
    }
    *out = buf;
    return KZ_OK;
}

/* Stride-1 causal conv "<p>.conv.weight" / ".bias". */
static kz_status load_conv1(kz_enc_conv *c, const kz_weights *w, const char *p, int64_t out,
                            int64_t in, int64_t k, int64_t d) {
    char wn[160], bn[160];
    snprintf(wn, sizeof wn, "%s.conv.weight", p);
    snprintf(bn, sizeof bn, "%s.conv.bias", p);
    *c = (kz_enc_conv){.c_in = (size_t)in, .c_out = (size_t)out, .stride = 1,
                       .history = (size_t)((k - 1) * d)};
    return kz_conv_load_causal(&c->c, w, wn, bn, out, in, k, d);
}

/* Conv of kernel k = m*s, stride s, as m taps over super rows of s*in channels: super tap
 * j, channel r*in + i reads weight[o, i, j*s + r]. */
static kz_status load_strided(kz_enc_conv *c, const kz_weights *w, const char *wn,
                              const char *bn, int64_t out, int64_t in, int64_t k, int64_t s) {
    *c = (kz_enc_conv){.c_in = (size_t)in, .c_out = (size_t)out, .stride = (size_t)s,
                       .history = (size_t)(k - s)};
    if (k % s != 0) {
        return kz_error_set(KZ_STATUS_UNSUPPORTED, "%s: '%s': kernel %lld is not a multiple of "
                            "stride %lld", kz_weights_path(w), wn, (long long)k, (long long)s);
    }
    int64_t shape[3] = {out, in, k};
    float *wt, *src = NULL;
    kz_status st = read_f32(w, wn, 3, shape, &wt);
    if (st != KZ_OK) {
        return st;
    }
    size_t taps = (size_t)(k / s), wide = (size_t)(s * in), n = (size_t)out;
    src = malloc(taps * wide * n * sizeof *src);
    if (src) {
        for (size_t o = 0; o < n; o++) {
            for (size_t i = 0; i < (size_t)in; i++) {
                for (size_t kk = 0; kk < (size_t)k; kk++) {
                    size_t j = kk / (size_t)s, r = kk % (size_t)s;
                    src[(j * wide + r * (size_t)in + i) * n + o] = wt[(o * (size_t)in + i) * (size_t)k + kk];
                }
            }
        }
    }
    st = src && kz_packed_init_rows(&c->c.w, taps, wide, n, src) == 0 ? KZ_OK : oom(wn);
    free(src);
    free(wt);
    c->c.k_in = wide, c->c.n = n, c->c.taps = taps, c->c.dilation = 1, c->c.history = taps - 1;
    if (st == KZ_OK && bn) {
        c->c.bias = malloc(n * sizeof *c->c.bias);
        st = c->c.bias ? kz_vector_load(w, bn, n, c->c.bias) : oom(bn);
    }
    return st;
}

static kz_status load_conv_stack(kz_codec_encoder *enc, const kz_weights *w) {
    const kz_codec_encoder_config *c = &enc->cfg;
    char p[128], wn[160], bn[160];
    int64_t ch = c->num_filters;
    kz_status st = load_conv1(&enc->first, w, "encoder.encoder.layers.0", ch, c->audio_channels,
                              c->kernel_size, 1);
    int idx = 1;
    for (int b = 0; b < c->n_ratios && st == KZ_OK; b++) {
        int64_t ratio = c->upsampling_ratios[c->n_ratios - 1 - b], inner = ch / c->compress;
        int64_t dil = 1;
        for (int j = 0; j < c->num_residual_layers && st == KZ_OK; j++, idx++) {
            kz_enc_resblock *r = &enc->res[b * c->num_residual_layers + j];
            snprintf(p, sizeof p, "encoder.encoder.layers.%d.block.1", idx);
            st = load_conv1(&r->a, w, p, inner, ch, c->residual_kernel_size, dil);
            snprintf(p, sizeof p, "encoder.encoder.layers.%d.block.3", idx);
            st = st == KZ_OK ? load_conv1(&r->b, w, p, ch, inner, 1, 1) : st;
            dil *= c->dilation_growth_rate;
        }
        snprintf(wn, sizeof wn, "encoder.encoder.layers.%d.conv.weight", idx + 1);
        snprintf(bn, sizeof bn, "encoder.encoder.layers.%d.conv.bias", idx + 1);
        st = st == KZ_OK ? load_strided(&enc->down[b], w, wn, bn, 2 * ch, ch, 2 * ratio, ratio) : st;
        idx += 2;
        ch *= 2;
    }
    snprintf(p, sizeof p, "encoder.encoder.layers.%d", idx + 1);
    return st == KZ_OK ? load_conv1(&enc->last, w, p, c->hidden_size, ch, c->last_kernel_size, 1)
                       : st;
}

static kz_status load_layer(kz_enc_layer *L, const kz_weights *w, const kz_codec_encoder_config *c,
                            int l, float *vec) {
    char name[160];
    int64_t hid = c->hidden_size, att = (int64_t)c->num_attention_heads * c->head_dim;
    int64_t kv = (int64_t)c->num_key_value_heads * c->head_dim, mlp = c->intermediate_size;
    static const char *vec_names[6] = {
        "input_layernorm.weight",      "input_layernorm.bias",  "post_attention_layernorm.weight",
        "post_attention_layernorm.bias", "self_attn_layer_scale.scale", "mlp_layer_scale.scale"};
    const float **dst[6] = {&L->ln1_w, &L->ln1_b, &L->ln2_w, &L->ln2_b, &L->attn_scale,
                            &L->mlp_scale};
    kz_status st = KZ_OK;
    for (int i = 0; i < 6 && st == KZ_OK; i++) {
        snprintf(name, sizeof name, "encoder.encoder_transformer.layers.%d.%s", l, vec_names[i]);
        st = kz_vector_load(w, name, (size_t)hid, vec + i * hid);
        *dst[i] = vec + i * hid;
    }
    struct { kz_conv *conv; const char *n; int64_t out, in; } lin[6] = {
        {&L->q, "self_attn.q_proj", att, hid}, {&L->k, "self_attn.k_proj", kv, hid},
        {&L->v, "self_attn.v_proj", kv, hid},  {&L->o, "self_attn.o_proj", hid, att},
        {&L->fc1, "mlp.fc1", mlp, hid},        {&L->fc2, "mlp.fc2", hid, mlp}};
    for (int i = 0; i < 6 && st == KZ_OK; i++) {
        snprintf(name, sizeof name, "encoder.encoder_transformer.layers.%d.%s.weight", l, lin[i].n);
        st = kz_conv_load_linear(lin[i].conv, w, name, NULL, lin[i].out, lin[i].in);
    }
    return st;
}

/* One codebook: table, norms and the dot-product conv. */
static kz_status load_book(kz_enc_book *b, const kz_weights *w, const char *p, int64_t size,
                           int64_t dim) {
    char name[256];
    int64_t shape[2] = {size, dim};
    float *usage = malloc((size_t)size * sizeof *usage), *src = NULL;
    snprintf(name, sizeof name, "%s.embed_sum", p);
    kz_status st = usage ? read_f32(w, name, 2, shape, &b->table) : oom(p);
    snprintf(name, sizeof name, "%s.cluster_usage", p);
    st = st == KZ_OK ? kz_vector_load(w, name, (size_t)size, usage) : st;
    b->norm2 = st == KZ_OK ? malloc((size_t)size * sizeof *b->norm2) : NULL;
    src = st == KZ_OK ? malloc((size_t)(size * dim) * sizeof *src) : NULL;
    if (st == KZ_OK && (!b->norm2 || !src)) {
        st = oom(p);
    }
    for (int64_t j = 0; j < size && st == KZ_OK; j++) {
        float u = usage[j] > CLUSTER_USAGE_EPS ? usage[j] : CLUSTER_USAGE_EPS;
        double n2 = 0.0;
        for (int64_t i = 0; i < dim; i++) {
            float v = b->table[j * dim + i] / u;
            b->table[j * dim + i] = v;
            src[i * size + j] = v;
            n2 += (double)v * v;
        }
        b->norm2[j] = n2;
        b->max_norm2 = n2 > b->max_norm2 ? n2 : b->max_norm2;
    }
    if (st == KZ_OK) {
        b->dots = (kz_conv){.k_in = (size_t)dim, .n = (size_t)size, .taps = 1, .dilation = 1};
        st = kz_packed_init_rows(&b->dots.w, 1, (size_t)dim, (size_t)size, src) == 0 ? KZ_OK
                                                                                      : oom(p);
    }
    free(src);
    free(usage);
    return st;
}

static kz_status load_quantizer(kz_codec_encoder *enc, const kz_weights *w) {
    const kz_codec_encoder_config *c = &enc->cfg;
    static const char *part[2] = {"semantic", "acoustic"};
    char p[192];
    int n_sem = c->num_semantic_quantizers;
    enc->n_books[0] = enc->n_codes < n_sem ? enc->n_codes : n_sem;
    enc->n_books[1] = enc->n_codes - enc->n_books[0];
    enc->has_proj = c->vq_hidden != c->hidden_size;
    kz_status st = KZ_OK;
    for (int q = 0; q < 2 && st == KZ_OK; q++) {
        if (enc->has_proj) {
            snprintf(p, sizeof p, "encoder.quantizer.%s_residual_vector_quantizer.input_proj.weight",
                     part[q]);
            st = kz_conv_load_linear(&enc->proj[q], w, p, NULL, c->vq_hidden, c->hidden_size);
        }
        enc->books[q] = calloc((size_t)enc->n_books[q] + 1, sizeof *enc->books[q]);
        st = st == KZ_OK && !enc->books[q] ? oom("codebooks") : st;
        for (int i = 0; i < enc->n_books[q] && st == KZ_OK; i++) {
            snprintf(p, sizeof p, "encoder.quantizer.%s_residual_vector_quantizer.layers.%d.codebook",
                     part[q], i);
            st = load_book(&enc->books[q][i], w, p, c->codebook_size, c->codebook_dim);
        }
    }
    return st;
}

static kz_status load_transformer(kz_codec_encoder *enc, const kz_weights *w) {
    const kz_codec_encoder_config *c = &enc->cfg;
    size_t hid = (size_t)c->hidden_size, n = (size_t)c->num_hidden_layers;
    enc->layers = calloc(n + 1, sizeof *enc->layers);
    enc->vectors = malloc((6 * n + 1) * hid * sizeof *enc->vectors);
    enc->inv_freq = malloc((size_t)c->head_dim * sizeof *enc->inv_freq);
    if (!enc->layers || !enc->vectors || !enc->inv_freq) {
        return oom("transformer");
    }
    kz_rope_init(enc->inv_freq, c->head_dim, c->rope_theta);
    kz_status st = KZ_OK;
    for (size_t l = 0; l < n && st == KZ_OK; l++) {
        st = load_layer(&enc->layers[l], w, c, (int)l, enc->vectors + 6 * l * hid);
    }
    return st;
}

/* encoder_config relations the encoder relies on (kz_codec_config_parse reads values). */
static kz_status check_config(const kz_weights *w, const kz_codec_config *cfg,
                              kz_codec_encoder *enc) {
    const kz_codec_encoder_config *c = &cfg->encoder;
    const char *path = kz_weights_path(w);
    int64_t hop25 = 1;
    for (int i = 0; i < c->n_ratios; i++) {
        hop25 *= c->upsampling_ratios[i];
    }
    double encodec_fr = ceil((double)c->sampling_rate / (double)hop25);
    int64_t kd = 2 * (int64_t)(encodec_fr / c->frame_rate);
    // MimiModel has a downsample conv only when frame_rate differs from the conv stack's
    // rate; without one its encode fails, so such a config is not supported either.
    if (!c->supported || c->audio_channels != 1 || kd < 2 || c->frame_rate == encodec_fr) {
        return kz_error_set(KZ_STATUS_UNSUPPORTED,
                            "%s: encoder_config: only a mono causal Mimi encoder with constant "
                            "padding, gelu, no conv shortcut or attention bias and a downsample "
                            "conv is supported", path);
    }
    if (2 * hop25 != cfg->encode_downsample_rate || c->sampling_rate != cfg->input_sample_rate) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: encoder_config: 2 x prod(upsampling_ratios) = %lld samples at "
                            "%d Hz, but encode_downsample_rate %d at input_sample_rate %d",
                            path, (long long)(2 * hop25), c->sampling_rate,
                            cfg->encode_downsample_rate, cfg->input_sample_rate);
    }
    if (c->head_dim < 2 || c->head_dim % 2 || c->num_attention_heads % c->num_key_value_heads ||
        c->num_filters % c->compress || c->codebook_dim != c->vq_hidden ||
        cfg->encoder_valid_num_quantizers > c->num_quantizers ||
        c->num_semantic_quantizers >= c->num_quantizers) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: encoder_config: inconsistent sizes (head_dim %d, heads %d/%d, "
                            "num_filters %d / compress %d, codebook_dim %d vs "
                            "vector_quantization_hidden_dimension %d, %d semantic of %d "
                            "quantizers, encoder_valid_num_quantizers %d)",
                            path, c->head_dim, c->num_attention_heads, c->num_key_value_heads,
                            c->num_filters, c->compress, c->codebook_dim, c->vq_hidden,
                            c->num_semantic_quantizers, c->num_quantizers,
                            cfg->encoder_valid_num_quantizers);
    }
    enc->cfg = *c;
    enc->n_codes = cfg->encoder_valid_num_quantizers;
    enc->hop25 = (size_t)hop25;
    enc->hop = (size_t)(2 * hop25);
    enc->downsample.stride = (size_t)kd; // kernel, until load_strided sets the fields
    return KZ_OK;
}

kz_status kz_enc_load_all(kz_codec_encoder *enc, const kz_weights *w) {
    const kz_codec_encoder_config *c = &enc->cfg;
    size_t n_res = (size_t)(c->n_ratios * c->num_residual_layers);
    int64_t kd = (int64_t)enc->downsample.stride;
    enc->res = calloc(n_res + 1, sizeof *enc->res);
    enc->down = calloc((size_t)c->n_ratios + 1, sizeof *enc->down);
    if (!enc->res || !enc->down) {
        return oom("conv stack");
    }
    kz_status st = load_conv_stack(enc, w);
    st = st == KZ_OK ? load_transformer(enc, w) : st;
    st = st == KZ_OK ? load_strided(&enc->downsample, w, "encoder.downsample.conv.weight", NULL,
                                    c->hidden_size, c->hidden_size, kd, 2)
                     : st;
    enc->downsample.replicate = true;
    return st == KZ_OK ? load_quantizer(enc, w) : st;
}

static bool has_encoder(const kz_weights *w) {
    for (size_t i = 0; i < kz_weights_count(w); i++) {
        if (strncmp(kz_weights_at(w, i)->name, "encoder.", 8) == 0) {
            return true;
        }
    }
    return false;
}

kz_status kz_codec_encoder_load(const kz_weights *w, const kz_codec_config *cfg,
                                kz_codec_encoder **out) {
    *out = NULL;
    if (!has_encoder(w)) {
        return KZ_OK;
    }
    kz_codec_encoder *enc = calloc(1, sizeof *enc);
    if (!enc) {
        return oom("encoder");
    }
    kz_status st = check_config(w, cfg, enc);
    st = st == KZ_OK ? kz_enc_load_all(enc, w) : st;
    if (st != KZ_OK) {
        kz_codec_encoder_free(enc);
        return st;
    }
    *out = enc;
    return KZ_OK;
}

static void free_layer(kz_enc_layer *L) {
    kz_conv *lin[6] = {&L->q, &L->k, &L->v, &L->o, &L->fc1, &L->fc2};
    for (int i = 0; i < 6; i++) {
        kz_conv_free(lin[i]);
    }
}

void kz_enc_free_all(kz_codec_encoder *enc) {
    const kz_codec_encoder_config *c = &enc->cfg;
    kz_conv_free(&enc->first.c);
    for (int i = 0; enc->res && i < c->n_ratios * c->num_residual_layers; i++) {
        kz_conv_free(&enc->res[i].a.c);
        kz_conv_free(&enc->res[i].b.c);
    }
    for (int i = 0; enc->down && i < c->n_ratios; i++) {
        kz_conv_free(&enc->down[i].c);
    }
    kz_conv_free(&enc->last.c);
    for (int l = 0; enc->layers && l < c->num_hidden_layers; l++) {
        free_layer(&enc->layers[l]);
    }
    kz_conv_free(&enc->downsample.c);
    for (int q = 0; q < 2; q++) {
        kz_conv_free(&enc->proj[q]);
        for (int i = 0; enc->books[q] && i < enc->n_books[q]; i++) {
            kz_conv_free(&enc->books[q][i].dots);
            free(enc->books[q][i].table);
            free(enc->books[q][i].norm2);
        }
        free(enc->books[q]);
    }
    free(enc->res);
    free(enc->down);
    free(enc->layers);
    free(enc->vectors);
    free(enc->inv_freq);
}

void kz_codec_encoder_free(kz_codec_encoder *enc) {
    if (enc) {
        kz_enc_free_all(enc);
        free(enc);
    }
}

int32_t kz_codec_encoder_codebooks(const kz_codec_encoder *enc) {
    return enc ? enc->n_codes : 0;
}
