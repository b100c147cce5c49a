/*
 * codec_config.c - speech_tokenizer/config.json -> kz_codec_config.
 *
 * Flow: text (read from the file by kz_codec_config_load through kz_json_load, or given by
 * the caller, e.g. from GGUF metadata) -> parse JSON (io/json.c) -> from the parsed root
 * (one function for both ways in): check model_type, read the top-level keys, then the
 * nested "decoder_config" object with the official class defaults (codebook_dim has none:
 * required), then check the cross-field relations. num_semantic_quantizers is not read:
 * the official decoder splits its quantizers as 1 + (num_quantizers - 1) whatever the key
 * says.
 * "encoder_config" (a MimiConfig) is read with MimiConfig's defaults; its relations
 * are checked by the encoder's load, so a codec whose encoder is never run is not
 * refused for it.
 */
#include "model/codec_config.h"

#include <stdio.h>
#include <string.h>

#include "io/json.h"
#include "runtime/error.h"

static void read_top(kz_json_ctx *j, const cJSON *root, kz_codec_config *c) {
    c->input_sample_rate = (int32_t)kz_json_int(j, root, "input_sample_rate", 24000, 1, 384000);
    c->output_sample_rate = (int32_t)kz_json_int(j, root, "output_sample_rate", 24000, 1, 384000);
    c->decode_upsample_rate = (int32_t)kz_json_int(j, root, "decode_upsample_rate", 1920, 1, 1 << 20);
    c->encode_downsample_rate =
        (int32_t)kz_json_int(j, root, "encode_downsample_rate", 1920, 1, 1 << 20);
    c->encoder_valid_num_quantizers =
        (int32_t)kz_json_int(j, root, "encoder_valid_num_quantizers", 16, 1, 64);
}

static void read_decoder(kz_json_ctx *j, const cJSON *d, kz_codec_config *c) {
    static const int64_t rates_def[] = {8, 5, 4, 3};
    static const int64_t ratios_def[] = {2, 2};
    int64_t v[KZ_CODEC_MAX_RATES];
    c->codebook_size = (int32_t)kz_json_int(j, d, "codebook_size", 2048, 1, 1 << 20);
    c->codebook_dim = (int32_t)kz_json_int_req(j, d, "codebook_dim", 2, 1 << 16);
    c->latent_dim = (int32_t)kz_json_int(j, d, "latent_dim", 1024, 1, 1 << 16);
    c->hidden_size = (int32_t)kz_json_int(j, d, "hidden_size", 1024, 1, 1 << 16);
    c->num_hidden_layers = (int32_t)kz_json_int(j, d, "num_hidden_layers", 8, 0, 256);
    c->num_attention_heads = (int32_t)kz_json_int(j, d, "num_attention_heads", 16, 1, 1024);
    c->num_key_value_heads = (int32_t)kz_json_int(j, d, "num_key_value_heads", 16, 1, 1024);
    c->head_dim = (int32_t)kz_json_int(j, d, "head_dim", c->hidden_size / c->num_attention_heads,
                                       2, 4096);
    c->intermediate_size = (int32_t)kz_json_int(j, d, "intermediate_size", 3072, 1, 1 << 20);
    c->sliding_window = (int32_t)kz_json_int(j, d, "sliding_window", 72, 1, 1 << 20);
    c->max_position_embeddings =
        (int32_t)kz_json_int(j, d, "max_position_embeddings", 8000, 1, 1 << 30);
    c->num_quantizers = (int32_t)kz_json_int(j, d, "num_quantizers", 16, 2, 64);
    c->decoder_dim = (int32_t)kz_json_int(j, d, "decoder_dim", 1536, 1, 1 << 16);
    c->rms_norm_eps = (float)kz_json_num(j, d, "rms_norm_eps", 1e-5, 0.0, 1.0);
    c->rope_theta = (float)kz_json_num(j, d, "rope_theta", 10000.0, 1.0, 1e12);
    c->n_upsample_rates = kz_json_int_array(j, d, "upsample_rates", v, KZ_CODEC_MAX_RATES,
                                            rates_def, 4, 1, 64);
    for (int i = 0; i < c->n_upsample_rates; i++) {
        c->upsample_rates[i] = (int32_t)v[i];
    }
    c->n_upsampling_ratios = kz_json_int_array(j, d, "upsampling_ratios", v, KZ_CODEC_MAX_RATES,
                                               ratios_def, 2, 1, 64);
    for (int i = 0; i < c->n_upsampling_ratios; i++) {
        c->upsampling_ratios[i] = (int32_t)v[i];
    }
    if (kz_json_bool(j, d, "attention_bias", false)) {
        j->status = j->status ? j->status
                              : kz_error_set(KZ_STATUS_UNSUPPORTED,
                                             "%s: decoder_config.attention_bias: true is not "
                                             "supported (released codecs have no attention bias)",
                                             j->path);
    }
    const char *act = kz_json_str(j, d, "hidden_act", "silu");
    if (j->status == KZ_OK && strcmp(act, "silu") != 0) {
        j->status = kz_error_set(KZ_STATUS_UNSUPPORTED,
                                 "%s: decoder_config.hidden_act: '%s' is not supported (silu)",
                                 j->path, act);
    }
}

static void read_encoder(kz_json_ctx *j, const cJSON *d, kz_codec_encoder_config *e) {
    static const int64_t ratios_def[] = {8, 6, 5, 4};
    int64_t v[KZ_CODEC_MAX_RATES];
    e->sampling_rate = (int32_t)kz_json_int(j, d, "sampling_rate", 24000, 1, 384000);
    e->audio_channels = (int32_t)kz_json_int(j, d, "audio_channels", 1, 1, 2);
    e->num_filters = (int32_t)kz_json_int(j, d, "num_filters", 64, 1, 1 << 16);
    e->n_ratios = kz_json_int_array(j, d, "upsampling_ratios", v, KZ_CODEC_MAX_RATES, ratios_def,
                                    4, 1, 64);
    for (int i = 0; i < e->n_ratios; i++) {
        e->upsampling_ratios[i] = (int32_t)v[i];
    }
    e->kernel_size = (int32_t)kz_json_int(j, d, "kernel_size", 7, 1, 64);
    e->last_kernel_size = (int32_t)kz_json_int(j, d, "last_kernel_size", 3, 1, 64);
    e->residual_kernel_size = (int32_t)kz_json_int(j, d, "residual_kernel_size", 3, 1, 64);
    e->num_residual_layers = (int32_t)kz_json_int(j, d, "num_residual_layers", 1, 0, 8);
    e->dilation_growth_rate = (int32_t)kz_json_int(j, d, "dilation_growth_rate", 2, 1, 16);
    e->compress = (int32_t)kz_json_int(j, d, "compress", 2, 1, 1 << 16);
    e->hidden_size = (int32_t)kz_json_int(j, d, "hidden_size", 512, 1, 1 << 16);
    e->num_hidden_layers = (int32_t)kz_json_int(j, d, "num_hidden_layers", 8, 0, 256);
    e->num_attention_heads = (int32_t)kz_json_int(j, d, "num_attention_heads", 8, 1, 1024);
    e->num_key_value_heads = (int32_t)kz_json_int(j, d, "num_key_value_heads", 8, 1, 1024);
    e->head_dim = (int32_t)kz_json_int(j, d, "head_dim", e->hidden_size / e->num_attention_heads,
                                       0, 4096);
    e->intermediate_size = (int32_t)kz_json_int(j, d, "intermediate_size", 2048, 1, 1 << 20);
    e->num_quantizers = (int32_t)kz_json_int(j, d, "num_quantizers", 32, 1, 256);
    e->num_semantic_quantizers = (int32_t)kz_json_int(j, d, "num_semantic_quantizers", 1, 0, 256);
    e->codebook_size = (int32_t)kz_json_int(j, d, "codebook_size", 2048, 1, 1 << 20);
    e->codebook_dim = (int32_t)kz_json_int(j, d, "codebook_dim", 256, 1, 1 << 16);
    e->vq_hidden =
        (int32_t)kz_json_int(j, d, "vector_quantization_hidden_dimension", 256, 1, 1 << 16);
    e->norm_eps = (float)kz_json_num(j, d, "norm_eps", 1e-5, 0.0, 1.0);
    e->rope_theta = (float)kz_json_num(j, d, "rope_theta", 10000.0, 1.0, 1e12);
    int64_t hop = 1;
    for (int i = 0; i < e->n_ratios; i++) {
        hop *= e->upsampling_ratios[i];
    }
    double fr = (double)e->sampling_rate / (double)(2 * hop);
    fr = kz_json_num(j, d, "frame_rate", fr, 1e-3, 1e6);
    e->frame_rate = kz_json_num(j, d, "_frame_rate", fr, 1e-3, 1e6);
    e->supported = kz_json_bool(j, d, "use_causal_conv", true) &&
                   !kz_json_bool(j, d, "use_conv_shortcut", false) &&
                   !kz_json_bool(j, d, "attention_bias", false) &&
                   strcmp(kz_json_str(j, d, "pad_mode", "constant"), "constant") == 0 &&
                   strcmp(kz_json_str(j, d, "hidden_act", "gelu"), "gelu") == 0;
}

static kz_status check_relations(const char *label, const kz_codec_config *c) {
    int64_t total = 1; // stops growing past the largest rate, so it cannot overflow
    for (int i = 0; i < c->n_upsample_rates && total <= c->decode_upsample_rate; i++) {
        total *= c->upsample_rates[i];
    }
    for (int i = 0; i < c->n_upsampling_ratios && total <= c->decode_upsample_rate; i++) {
        total *= c->upsampling_ratios[i];
    }
    if (total != c->decode_upsample_rate) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: decode_upsample_rate %d != product of upsample_rates and "
                            "upsampling_ratios (%lld)",
                            label, c->decode_upsample_rate, (long long)total);
    }
    if (c->codebook_dim % 2 != 0) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: decoder_config.codebook_dim %d is odd", label,
                            c->codebook_dim);
    }
    if (c->num_attention_heads % c->num_key_value_heads != 0 || c->head_dim < 2 ||
        c->head_dim % 2 != 0) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: decoder_config: %d attention heads not a multiple of %d key/value "
                            "heads, or odd head_dim %d",
                            label, c->num_attention_heads, c->num_key_value_heads, c->head_dim);
    }
    if (c->decoder_dim % (1 << c->n_upsample_rates) != 0) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: decoder_config.decoder_dim %d not divisible by 2^%d", label,
                            c->decoder_dim, c->n_upsample_rates);
    }
    return KZ_OK;
}

/* The config from a parsed root, which it frees; label names the text in messages. */
static kz_status from_root(const char *label, cJSON *root, kz_codec_config *out) {
    kz_json_ctx j = {.path = label, .scope = "", .status = KZ_OK};
    kz_json_model_type(&j, root, "qwen3_tts_tokenizer_12hz");
    read_top(&j, root, out);
    const cJSON *dec = kz_json_obj(&j, root, "decoder_config");
    j.scope = "decoder_config";
    read_decoder(&j, dec, out);
    const cJSON *enc = kz_json_obj(&j, root, "encoder_config");
    j.scope = "encoder_config";
    read_encoder(&j, enc, &out->encoder);
    cJSON_Delete(root);
    if (j.status != KZ_OK) {
        memset(out, 0, sizeof *out);
        return j.status;
    }
    kz_status st = check_relations(label, out);
    if (st != KZ_OK) {
        memset(out, 0, sizeof *out);
    }
    return st;
}

kz_status kz_codec_config_parse(const char *label, const char *text, size_t n_bytes,
                                kz_codec_config *out) {
    memset(out, 0, sizeof *out);
    cJSON *root = NULL;
    kz_status st = kz_json_parse(label, text, n_bytes, &root);
    return st == KZ_OK ? from_root(label, root, out) : st;
}

kz_status kz_codec_config_load(const char *path, kz_codec_config *out) {
    memset(out, 0, sizeof *out);
    cJSON *root = NULL;
    kz_status st = kz_json_load(path, &root);
    return st == KZ_OK ? from_root(path, root, out) : st;
}

void kz_codec_config_describe(const kz_codec_config *c, char *buf, size_t buf_size) {
    snprintf(buf, buf_size,
             "codec: %d Hz, %d samples/frame, %d codebooks x %d, latent %d, "
             "pre-transformer %d layers x %d (heads %d/%d x %d, mlp %d, window %d), "
             "decoder_dim %d, rates %d.%d.%d.%d",
             c->output_sample_rate, c->decode_upsample_rate, c->num_quantizers, c->codebook_size,
             c->latent_dim, c->num_hidden_layers, c->hidden_size, c->num_attention_heads,
             c->num_key_value_heads, c->head_dim, c->intermediate_size, c->sliding_window,
             c->decoder_dim, c->upsample_rates[0], c->n_upsample_rates > 1 ? c->upsample_rates[1] : 0,
             c->n_upsample_rates > 2 ? c->upsample_rates[2] : 0,
             c->n_upsample_rates > 3 ? c->upsample_rates[3] : 0);
}
