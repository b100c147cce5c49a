/*
 * codec_decoder_load.c - reading the codec decoder's tensors from
 * speech_tokenizer/model.safetensors into kz_codec_decoder.
 *
 * Flow: RVQ codebooks (embedding_sum / max(cluster_usage, 1e-5), as the
 * reference's EuclideanCodebook.decode: the stored sums stay in the mapping and a
 * frame's rows are divided as it looks them up, so the load neither converts nor
 * holds the 32 MB of the 0.6B codec's tables) and output projections; pre_conv; the
 * pre-transformer (codec_transformer.c); the upsample stages; the decoder
 * convs and blocks. Every tensor is shape-checked against the config; conv
 * weights are packed for the GEMM kernel and their mapped pages released.
 * Per-channel vectors (SnakeBeta, norms, ConvNeXt) live in one owned store.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/mapped_file.h"
#include "layers/vector.h"
#include "model/codec_decoder.h"
#include "runtime/error.h"

/* Takes n floats from the decoder's vector store. */
static float *take(kz_codec_decoder *d, size_t n) {
    KZ_ASSERT(d->store_used + n <= d->store_size);
    float *p = d->store + d->store_used;
    d->store_used += n;
    return p;
}

static size_t store_size(const kz_codec_config *c) {
    size_t latent = (size_t)c->latent_dim, n = 0;
    n += (size_t)c->n_upsampling_ratios * latent * (7 + 4);
    size_t ch = (size_t)c->decoder_dim;
    for (int b = 0; b < c->n_upsample_rates; b++) {
        n += 2 * ch + KZ_CODEC_RES_UNITS * 4 * (ch / 2);
        ch /= 2;
    }
    return n + 2 * ch + 16;
}

static kz_status load_snake(kz_codec_decoder *d, const kz_weights *f, const char *prefix,
                            size_t ch, kz_snake *s) {
    char name[160];
    s->alpha = take(d, ch);
    s->inv_beta = take(d, ch);
    snprintf(name, sizeof name, "%s.alpha", prefix);
    kz_status st = kz_vector_load(f, name, ch, s->alpha);
    snprintf(name, sizeof name, "%s.beta", prefix);
    if (st == KZ_OK) {
        st = kz_vector_load(f, name, ch, s->inv_beta);
    }
    for (size_t c = 0; st == KZ_OK && c < ch; c++) {
        // As the reference: alpha = exp(alpha); 1.0 / (exp(beta) + 1e-9), in fp32.
        s->alpha[c] = expf(s->alpha[c]);
        s->inv_beta[c] = 1.0f / (expf(s->inv_beta[c]) + 1e-9f);
    }
    return st;
}

/* The codebooks: each quantizer's stored embedding sums, bound in place (their rows are
 * divided when a frame looks them up: codec_decoder.c codebook_row), and its usages clamped as
 * the reference's EuclideanCodebook.decode clamps them. Row 0 of each is converted once
 * here, so a dtype that cannot be read is refused at load. */
static kz_status load_quantizer(kz_codec_decoder *d, const kz_weights *f) {
    const kz_codec_config *c = &d->cfg;
    size_t dim = (size_t)c->codebook_dim / 2, size = (size_t)c->codebook_size;
    size_t nq = (size_t)c->num_quantizers;
    d->codebook_sums = calloc(nq, sizeof *d->codebook_sums);
    d->codebook_usage = malloc(nq * size * sizeof(float));
    float *row = malloc(dim * sizeof(float));
    kz_status st = d->codebook_sums && d->codebook_usage && row
                       ? KZ_OK
                       : kz_error_set(KZ_STATUS_OUT_OF_MEMORY,
                                      "out of memory for the codec's codebooks");
    char name[160];
    for (size_t q = 0; q < nq && st == KZ_OK; q++) {
        const char *base = q == 0 ? "rvq_first" : "rvq_rest";
        int layer = q == 0 ? 0 : (int)q - 1;
        int64_t shape[2] = {(int64_t)size, (int64_t)dim};
        snprintf(name, sizeof name, "decoder.quantizer.%s.vq.layers.%d._codebook.embedding_sum",
                 base, layer);
        st = kz_weights_get(f, name, 2, shape, &d->codebook_sums[q]);
        snprintf(name, sizeof name, "decoder.quantizer.%s.vq.layers.%d._codebook.cluster_usage",
                 base, layer);
        float *usage = d->codebook_usage + q * size;
        st = st == KZ_OK ? kz_vector_load(f, name, size, usage) : st;
        for (size_t r = 0; st == KZ_OK && r < size; r++) {
            usage[r] = usage[r] < 1e-5f ? 1e-5f : usage[r];
        }
        st = st == KZ_OK ? kz_tensor_row_to_f32(d->codebook_sums[q], 0, dim, row) : st;
    }
    free(row);
    int64_t out = c->codebook_dim, in = (int64_t)dim;
    if (st == KZ_OK) {
        st = kz_conv_load_linear(&d->proj_first, f, "decoder.quantizer.rvq_first.output_proj.weight",
                                 NULL, out, in);
    }
    if (st == KZ_OK) {
        st = kz_conv_load_linear(&d->proj_rest, f, "decoder.quantizer.rvq_rest.output_proj.weight",
                                 NULL, out, in);
    }
    return st;
}

static kz_status load_convnext(kz_codec_decoder *d, const kz_weights *f, int u) {
    const kz_codec_config *c = &d->cfg;
    kz_convnext *x = &d->upsample[u];
    int64_t latent = c->latent_dim, ratio = c->upsampling_ratios[u];
    char w[160], b[160];
    snprintf(w, sizeof w, "decoder.upsample.%d.0.conv.weight", u);
    snprintf(b, sizeof b, "decoder.upsample.%d.0.conv.bias", u);
    kz_status st = kz_conv_load_transposed(&x->up, f, w, b, latent, latent, ratio, ratio);
    x->dw_w = take(d, (size_t)latent * 7);
    x->dw_b = take(d, (size_t)latent);
    x->norm_w = take(d, (size_t)latent);
    x->norm_b = take(d, (size_t)latent);
    x->gamma = take(d, (size_t)latent);
    int64_t dw_shape[3] = {latent, 1, 7};
    const kz_tensor *t;
    snprintf(w, sizeof w, "decoder.upsample.%d.1.dwconv.conv.weight", u);
    st = st == KZ_OK ? kz_weights_get(f, w, 3, dw_shape, &t) : st;
    st = st == KZ_OK ? kz_tensor_to_f32(t, x->dw_w) : st;
    struct { const char *n; float *dst; } vecs[4] = {{"dwconv.conv.bias", x->dw_b},
        {"norm.weight", x->norm_w}, {"norm.bias", x->norm_b}, {"gamma", x->gamma}};
    for (int i = 0; i < 4 && st == KZ_OK; i++) {
        snprintf(w, sizeof w, "decoder.upsample.%d.1.%s", u, vecs[i].n);
        st = kz_vector_load(f, w, (size_t)latent, vecs[i].dst);
    }
    snprintf(w, sizeof w, "decoder.upsample.%d.1.pwconv1.weight", u);
    snprintf(b, sizeof b, "decoder.upsample.%d.1.pwconv1.bias", u);
    st = st == KZ_OK ? kz_conv_load_linear(&x->pw1, f, w, b, 4 * latent, latent) : st;
    snprintf(w, sizeof w, "decoder.upsample.%d.1.pwconv2.weight", u);
    snprintf(b, sizeof b, "decoder.upsample.%d.1.pwconv2.bias", u);
    st = st == KZ_OK ? kz_conv_load_linear(&x->pw2, f, w, b, latent, 4 * latent) : st;
    return st;
}

static kz_status load_res_unit(kz_codec_decoder *d, const kz_weights *f, int n, int i,
                               int64_t ch, kz_res_unit *r) {
    static const int dilations[KZ_CODEC_RES_UNITS] = {1, 3, 9};
    char p[160], w[160], b[160];
    snprintf(p, sizeof p, "decoder.decoder.%d.block.%d.act1", n, i + 2);
    kz_status st = load_snake(d, f, p, (size_t)ch, &r->act1);
    snprintf(p, sizeof p, "decoder.decoder.%d.block.%d.act2", n, i + 2);
    st = st == KZ_OK ? load_snake(d, f, p, (size_t)ch, &r->act2) : st;
    snprintf(w, sizeof w, "decoder.decoder.%d.block.%d.conv1.conv.weight", n, i + 2);
    snprintf(b, sizeof b, "decoder.decoder.%d.block.%d.conv1.conv.bias", n, i + 2);
    st = st == KZ_OK ? kz_conv_load_causal(&r->conv1, f, w, b, ch, ch, 7, dilations[i]) : st;
    snprintf(w, sizeof w, "decoder.decoder.%d.block.%d.conv2.conv.weight", n, i + 2);
    snprintf(b, sizeof b, "decoder.decoder.%d.block.%d.conv2.conv.bias", n, i + 2);
    st = st == KZ_OK ? kz_conv_load_linear(&r->conv2, f, w, b, ch, ch) : st;
    return st;
}

static kz_status load_block(kz_codec_decoder *d, const kz_weights *f, int i) {
    kz_decoder_block *blk = &d->blocks[i];
    int n = i + 1; // decoder.decoder.{1..}
    blk->rate = d->cfg.upsample_rates[i];
    blk->c_in = d->cfg.decoder_dim >> i;
    blk->c_out = blk->c_in / 2;
    char p[160], b[160];
    snprintf(p, sizeof p, "decoder.decoder.%d.block.0", n);
    kz_status st = load_snake(d, f, p, (size_t)blk->c_in, &blk->act);
    snprintf(p, sizeof p, "decoder.decoder.%d.block.1.conv.weight", n);
    snprintf(b, sizeof b, "decoder.decoder.%d.block.1.conv.bias", n);
    st = st == KZ_OK ? kz_conv_load_transposed(&blk->up, f, p, b, blk->c_in, blk->c_out,
                                               2 * blk->rate, blk->rate)
                     : st;
    for (int r = 0; r < KZ_CODEC_RES_UNITS && st == KZ_OK; r++) {
        st = load_res_unit(d, f, n, r, blk->c_out, &blk->res[r]);
    }
    return st;
}

static kz_status load_decoder_convs(kz_codec_decoder *d, const kz_weights *f) {
    const kz_codec_config *c = &d->cfg;
    kz_status st = kz_conv_load_causal(&d->pre_conv, f, "decoder.pre_conv.conv.weight",
                                       "decoder.pre_conv.conv.bias", c->latent_dim,
                                       c->codebook_dim, 3, 1);
    st = st == KZ_OK ? kz_conv_load_causal(&d->dec0, f, "decoder.decoder.0.conv.weight",
                                           "decoder.decoder.0.conv.bias", c->decoder_dim,
                                           c->latent_dim, 7, 1)
                     : st;
    int nb = c->n_upsample_rates;
    int64_t out_ch = c->decoder_dim >> nb;
    char p[64], w[160], b[160];
    snprintf(p, sizeof p, "decoder.decoder.%d", nb + 1);
    st = st == KZ_OK ? load_snake(d, f, p, (size_t)out_ch, &d->final_act) : st;
    snprintf(w, sizeof w, "decoder.decoder.%d.conv.weight", nb + 2);
    snprintf(b, sizeof b, "decoder.decoder.%d.conv.bias", nb + 2);
    st = st == KZ_OK ? kz_conv_load_causal(&d->final_conv, f, w, b, 1, out_ch, 7, 1) : st;
    return st;
}

kz_status kz_codec_decoder_load(kz_codec_decoder *d, const kz_weights *f,
                                const kz_codec_config *cfg) {
    memset(d, 0, sizeof *d);
    d->cfg = *cfg;
    d->store_size = store_size(cfg);
    d->store = malloc(d->store_size * sizeof *d->store);
    if (!d->store) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory loading the codec");
    }
    kz_status st = load_quantizer(d, f);
    st = st == KZ_OK ? load_decoder_convs(d, f) : st;
    st = st == KZ_OK ? kz_codec_transformer_load(&d->transformer, f, cfg) : st;
    for (int u = 0; u < cfg->n_upsampling_ratios && st == KZ_OK; u++) {
        st = load_convnext(d, f, u);
    }
    size_t frame_rows = kz_codec_mid_rows(cfg);
    for (int i = 0; i < cfg->n_upsample_rates && st == KZ_OK; i++) {
        st = load_block(d, f, i);
        frame_rows *= (size_t)cfg->upsample_rates[i];
        d->blocks[i].frame_rows = frame_rows;
    }
    if (st != KZ_OK) {
        kz_codec_decoder_free(d);
    }
    return st;
}

/* bf16 goes where it buys the most time per unit of error: the residual units hold
 * 81 % of the decoder's FLOPs (0.6B: 4.02 of 4.96 GFLOP per frame). Each other conv
 * (quantizer projections, pre_conv, upsample stages, decoder.0, the blocks'
 * transposed convs, the final conv) adds about as much error as a residual unit
 * conv for far less work, and all of them in bf16 would take the waveform below the
 * 40 dB SNR the precisions keep against fp32. The pointwise projections before the
 * vocoder are the exceptions, read once per chunk call and nearly free in error: the
 * pre-transformer's layer projections (112 MB of fp32 on the 0.6B codec) and the
 * ConvNeXt upsample stages' pw1 / pw2 (docs/ARCHITECTURE.md#codec-precisions).
 * use_bf16 switches the pointwise work (the pre-transformer's projections, the ConvNeXt
 * pw1 / pw2, the residual units' conv2) and, with conv1 true, the k7 conv1 too; the
 * winograd-bf16 precision keeps conv1 in its Winograd form, which stays closer to fp32
 * (also with the first block's transposed conv in bf16, below). */
static void use_bf16(kz_codec_decoder *d, bool conv1, kz_convert_list *l) {
    d->bf16 = true;
    kz_codec_transformer_list_bf16(&d->transformer, l);
    for (int u = 0; u < d->cfg.n_upsampling_ratios; u++) {
        kz_convert_add_bf16(l, &d->upsample[u].pw1);
        kz_convert_add_bf16(l, &d->upsample[u].pw2);
    }
    for (int i = 0; i < d->cfg.n_upsample_rates; i++) {
        for (int r = 0; r < KZ_CODEC_RES_UNITS; r++) {
            if (conv1) {
                kz_convert_add_bf16(l, &d->blocks[i].res[r].conv1);
            }
            kz_convert_add_bf16(l, &d->blocks[i].res[r].conv2);
        }
    }
}

/* An empty list with the switch's options. */
static kz_convert_list new_list(const kz_codec_forms *forms) {
    return (kz_convert_list){.stored = forms ? forms->stored : NULL,
                             .keep_panels = forms && forms->keep_panels};
}

kz_status kz_codec_decoder_use_bf16(kz_codec_decoder *d, const kz_codec_forms *forms) {
    kz_convert_list l = new_list(forms);
    use_bf16(d, true, &l);
    return kz_convert_run(&l);
}

/* The winograd precisions' convs (header) with k7 tiles of at most max_m outputs; true if
 * the first block's transposed conv is among them. */
static bool use_winograd(kz_codec_decoder *d, size_t max_m, kz_convert_list *l) {
    d->winograd = true;
    if (d->dec0.taps == 7) {
        kz_convert_add_wino(l, &d->dec0_wino, &d->dec0, kz_codec_mid_rows(&d->cfg), max_m);
    }
    bool up1 = false;
    for (int i = 0; i < d->cfg.n_upsample_rates; i++) {
        kz_decoder_block *b = &d->blocks[i];
        const size_t in_rows = kz_block_in_rows(b);
        if (in_rows >= KZ_CODEC_WINO_UP_ROWS && b->up.taps == 2) {
            kz_convert_add_wino(l, &b->up_wino, &b->up, in_rows, max_m);
            up1 = up1 || i == 0;
        }
        for (int r = 0; r < KZ_CODEC_RES_UNITS; r++) {
            kz_convert_add_wino(l, &b->res[r].wino1, &b->res[r].conv1, b->frame_rows, max_m);
        }
    }
    return up1;
}

/* Largest k7 tile: F(6, 7) keeps `winograd` close to the direct fp32 conv, where F(10, 7)
 * would cost it much of its accuracy; under winograd-bf16, whose bf16 pointwise convs
 * dominate the error, F(10, 7) takes 16 instead of 20 transformed rows per 10 outputs at
 * the same SNR, a faster decoder (docs/ARCHITECTURE.md#codec-precisions). */
#define WINO_MAX_M 6
#define WINO_BF16_MAX_M 10

kz_status kz_codec_decoder_use_winograd(kz_codec_decoder *d, const kz_codec_forms *forms) {
    kz_convert_list l = new_list(forms);
    use_winograd(d, WINO_MAX_M, &l);
    return kz_convert_run(&l);
}

kz_status kz_codec_decoder_use_winograd_bf16(kz_codec_decoder *d, const kz_codec_forms *forms) {
    kz_convert_list l = new_list(forms);
    const bool up1_wino = use_winograd(d, WINO_BF16_MAX_M, &l);
    use_bf16(d, false, &l);
    // The first block's transposed conv (the largest weights of the codec: 75 MB of fp32
    // panels read per chunk call) in bf16 too: the decoder gets faster at every chunk size
    // and the waveform stays at least as close to fp32 as under `bf16`; the second
    // block's would take it below (docs/ARCHITECTURE.md#codec-precisions).
    if (d->cfg.n_upsample_rates > 0 && !up1_wino) {
        kz_convert_add_bf16(&l, &d->blocks[0].up);
    }
    return kz_convert_run(&l);
}

void kz_codec_decoder_each_conv(kz_codec_decoder *d, kz_codec_conv_fn fn, void *user) {
    fn(user, &d->proj_first, NULL);
    fn(user, &d->proj_rest, NULL);
    fn(user, &d->pre_conv, NULL);
    kz_codec_transformer_each_conv(&d->transformer, fn, user);
    for (int u = 0; u < d->cfg.n_upsampling_ratios; u++) {
        fn(user, &d->upsample[u].up, NULL);
        fn(user, &d->upsample[u].pw1, NULL);
        fn(user, &d->upsample[u].pw2, NULL);
    }
    fn(user, &d->dec0, &d->dec0_wino);
    for (int i = 0; i < d->cfg.n_upsample_rates; i++) {
        kz_decoder_block *b = &d->blocks[i];
        fn(user, &b->up, &b->up_wino);
        for (int r = 0; r < KZ_CODEC_RES_UNITS; r++) {
            fn(user, &b->res[r].conv1, &b->res[r].wino1);
            fn(user, &b->res[r].conv2, NULL);
        }
    }
    fn(user, &d->final_conv, NULL);
}

/* Maps in the pages of conv c's form in use, when it lies in the model file. */
static void populate_conv(void *user, kz_conv *c, kz_wino *w) {
    (void)user;
    if (w && w->n_pts) {
        const kz_packed *u = &w->u[0].w;
        if (u->mapped) {
            kz_map_populate_range(u->data, w->n_pts * kz_packed_bytes(1, u->k_in, u->n));
        }
    } else if (c->wb.data) {
        if (c->wb.mapped) {
            kz_map_populate_range(c->wb.data, kz_packed_bf16_bytes(c->taps, c->k_in, c->n));
        }
    } else if (c->w.data && c->w.mapped) {
        kz_map_populate_range(c->w.data, kz_packed_bytes(c->taps, c->k_in, c->n));
    }
}

void kz_codec_decoder_populate(kz_codec_decoder *d) {
    kz_codec_decoder_each_conv(d, populate_conv, NULL);
}

void kz_codec_decoder_free(kz_codec_decoder *d) {
    if (!d) {
        return;
    }
    kz_conv_free(&d->proj_first);
    kz_conv_free(&d->proj_rest);
    kz_conv_free(&d->pre_conv);
    kz_conv_free(&d->dec0);
    kz_wino_free(&d->dec0_wino);
    kz_conv_free(&d->final_conv);
    kz_codec_transformer_free(&d->transformer);
    for (int u = 0; u < KZ_CODEC_MAX_RATES; u++) {
        kz_conv_free(&d->upsample[u].up);
        kz_conv_free(&d->upsample[u].pw1);
        kz_conv_free(&d->upsample[u].pw2);
    }
    for (int i = 0; i < KZ_CODEC_MAX_RATES; i++) {
        kz_wino_free(&d->blocks[i].up_wino);
        kz_conv_free(&d->blocks[i].up);
        for (int r = 0; r < KZ_CODEC_RES_UNITS; r++) {
            kz_wino_free(&d->blocks[i].res[r].wino1);
            kz_conv_free(&d->blocks[i].res[r].conv1);
            kz_conv_free(&d->blocks[i].res[r].conv2);
        }
    }
    free(d->codebook_sums);
    free(d->codebook_usage);
    free(d->store);
    memset(d, 0, sizeof *d);
}
