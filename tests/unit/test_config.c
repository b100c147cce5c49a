/*
 * test_config.c - config.json, generation_config.json and the codec's
 * config.json read from text in memory and from files (no model files).
 *
 * Dataflow: a config text written here (a trimmed copy of the tiny fixture's)
 *        -> (a) a file in a mkdtemp directory -> kz_*_load(path)
 *           (b) an exact-size heap copy, no NUL after it -> kz_*_parse(label)
 *        -> the two structs compared byte for byte; or a broken text -> the
 *        expected status and a message naming the label or path.
 *
 * Covers: parse == load for the three configs; generation_config fallbacks
 * (missing file, NULL text); truncated JSON, wrong model_type, a NUL byte, a
 * non-object top level, the 16 MB limit; kz_json_parse directly; and
 * kz_text_file_read (bounded read, missing file). The defaults of missing keys
 * against the official configuration classes' (configuration_qwen3_tts.py,
 * configuration_qwen3_tts_tokenizer_v2.py); keys without a default there
 * (text_vocab_size, codebook_dim) are errors; every id outside the table it
 * indexes, defaults included, is a BAD_MODEL error naming the key; and
 * kz_model_check_tts, the checks across config.json and the codec's config.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/json.h"
#include "io/text_file.h"
#include "model/codec_config.h"
#include "model/config.h"
#include "model/model.h"
#include "runtime/error.h"
#include "test.h"

#define LABEL "model.gguf:kztts.config_json"

static const char *TTS_CONFIG =
    "{\"model_type\": \"qwen3_tts\", \"tts_model_type\": \"custom_voice\",\n"
    " \"tts_model_size\": \"0b6\", \"tokenizer_type\": \"qwen3_tts_tokenizer_12hz\",\n"
    " \"im_start_token_id\": 151644, \"im_end_token_id\": 151645,\n"
    " \"tts_pad_token_id\": 151671, \"tts_bos_token_id\": 151672, \"tts_eos_token_id\": 151673,\n"
    " \"assistant_token_id\": 77091,\n"
    " \"speaker_encoder_config\": {\"enc_dim\": 32, \"sample_rate\": 24000},\n"
    " \"talker_config\": {\"vocab_size\": 3072, \"hidden_size\": 32, \"intermediate_size\": 96,\n"
    "  \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,\n"
    "  \"head_dim\": 16, \"num_code_groups\": 16, \"text_hidden_size\": 64,\n"
    "  \"text_vocab_size\": 151936,\n"
    "  \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000, \"codec_bos_id\": 2149,\n"
    "  \"codec_eos_token_id\": 2150, \"codec_pad_id\": 2148, \"codec_think_id\": 2154,\n"
    "  \"codec_nothink_id\": 2155, \"codec_think_bos_id\": 2156, \"codec_think_eos_id\": 2157,\n"
    "  \"codec_language_id\": {\"chinese\": 2055, \"english\": 2050, \"beijing_dialect\": 2074},\n"
    "  \"spk_id\": {\"dylan\": 2878, \"ryan\": [3061]},\n"
    "  \"spk_is_dialect\": {\"dylan\": \"beijing_dialect\", \"ryan\": false},\n"
    "  \"code_predictor_config\": {\"vocab_size\": 2048, \"hidden_size\": 32,\n"
    "   \"intermediate_size\": 96, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,\n"
    "   \"num_key_value_heads\": 2, \"head_dim\": 16, \"num_code_groups\": 16,\n"
    "   \"max_position_embeddings\": 65536, \"rope_theta\": 1000000}}}\n";

static const char *GENERATION_CONFIG =
    "{\"do_sample\": true, \"temperature\": 0.7, \"top_k\": 30, \"top_p\": 0.8,\n"
    " \"repetition_penalty\": 1.1, \"subtalker_dosample\": false, \"max_new_tokens\": 8192}\n";

static const char *CODEC_CONFIG =
    "{\"model_type\": \"qwen3_tts_tokenizer_12hz\", \"decode_upsample_rate\": 1920,\n"
    " \"encode_downsample_rate\": 1920, \"encoder_valid_num_quantizers\": 16,\n"
    " \"input_sample_rate\": 24000, \"output_sample_rate\": 24000,\n"
    " \"decoder_config\": {\"codebook_dim\": 32, \"codebook_size\": 2048, \"decoder_dim\": 64,\n"
    "  \"head_dim\": 16, \"hidden_act\": \"silu\", \"hidden_size\": 32,\n"
    "  \"intermediate_size\": 64, \"latent_dim\": 64, \"num_attention_heads\": 4,\n"
    "  \"num_hidden_layers\": 2, \"num_key_value_heads\": 4, \"num_quantizers\": 16,\n"
    "  \"num_semantic_quantizers\": 1,\n"
    "  \"rms_norm_eps\": 1e-05, \"sliding_window\": 16, \"upsample_rates\": [8, 5, 4, 3],\n"
    "  \"upsampling_ratios\": [2, 2]}}\n";

static char temp_root[64];

/* Writes text to temp_root/name; path receives the file's path. */
static void write_file(char *path, size_t n, const char *name, const char *text) {
    snprintf(path, n, "%s/%s", temp_root, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* An exact-size heap copy of text[0, n): reading past it is an ASan error. */
static char *exact_copy(const char *text, size_t n) {
    char *copy = malloc(n ? n : 1);
    CHECK(copy != NULL);
    if (copy && n) {
        memcpy(copy, text, n);
    }
    return copy;
}

static void check_message(kz_status st, kz_status want, const char *label, const char *what) {
    CHECK_EQ_INT(st, want);
    const char *msg = kz_error_get();
    CHECK_MSG(strncmp(msg, label, strlen(label)) == 0 && strstr(msg, what) != NULL,
              "\"%s\" does not start with \"%s\" or lacks \"%s\"", msg, label, what);
}

/* ---- config.json -------------------------------------------------------- */

static kz_status tts_parse(const char *text, size_t n, kz_tts_config *out) {
    char *copy = exact_copy(text, n);
    kz_status st = kz_tts_config_parse(LABEL, copy, n, out);
    free(copy);
    return st;
}

static void test_tts_config(void) {
    char path[256];
    write_file(path, sizeof path, "config.json", TTS_CONFIG);
    static kz_tts_config from_file, from_text, zero;
    CHECK_EQ_INT(kz_tts_config_load(path, &from_file), KZ_OK);
    CHECK_EQ_INT(tts_parse(TTS_CONFIG, strlen(TTS_CONFIG), &from_text), KZ_OK);
    CHECK(memcmp(&from_file, &from_text, sizeof from_file) == 0);
    CHECK_EQ_INT(from_text.talker.n_speakers, 2);
    CHECK_EQ_INT(from_text.talker.speakers[1].id, 3061);
    CHECK(strcmp(from_text.talker.speakers[0].dialect, "beijing_dialect") == 0);
    CHECK_EQ_INT(from_text.talker.code_predictor.max_position_embeddings, 65536);
    CHECK_EQ_INT(from_text.speaker_enc_dim, 32);

    size_t n = strlen(TTS_CONFIG);
    check_message(tts_parse(TTS_CONFIG, n / 2, &from_text), KZ_STATUS_BAD_MODEL, LABEL,
                  "malformed JSON near byte");
    CHECK(memcmp(&from_text, &zero, sizeof zero) == 0);
    check_message(tts_parse(TTS_CONFIG, 0, &from_text), KZ_STATUS_BAD_MODEL, LABEL,
                  "malformed JSON");
    char *wrong = strdup(TTS_CONFIG);
    memcpy(strstr(wrong, "qwen3_tts"), "qwen2_tts", 9);
    check_message(tts_parse(wrong, n, &from_text), KZ_STATUS_BAD_MODEL, LABEL,
                  "model_type is 'qwen2_tts', expected 'qwen3_tts'");
    memcpy(strstr(wrong, "qwen2_tts"), "qwen3_tts", 9);
    memcpy(strstr(wrong, "\"head_dim\": 16"), "\"head_dim\": -1", 14);
    check_message(tts_parse(wrong, n, &from_text), KZ_STATUS_BAD_MODEL, LABEL,
                  "talker_config.head_dim: expected an integer");
    CHECK(memcmp(&from_text, &zero, sizeof zero) == 0);
    free(wrong);

    // The path version names the path.
    write_file(path, sizeof path, "truncated.json", "{\"model_type\": \"qwen3_tts\"");
    check_message(kz_tts_config_load(path, &from_file), KZ_STATUS_BAD_MODEL, path,
                  "malformed JSON");
    snprintf(path, sizeof path, "%s/missing.json", temp_root);
    check_message(kz_tts_config_load(path, &from_file), KZ_STATUS_IO, path, "cannot open");
}

/* TTS_CONFIG with the first `from` replaced by `to`; parsed; the status must be `want`
 * and the message must name `what`. Returns the parsed config (static). */
static const kz_tts_config *tts_edited(const char *from, const char *to, kz_status want,
                                       const char *what) {
    static kz_tts_config c, zero;
    const char *at = strstr(TTS_CONFIG, from);
    CHECK_MSG(at != NULL, "\"%s\" not in the test config", from);
    if (!at) {
        return &zero;
    }
    size_t n_from = strlen(from), n_to = strlen(to), n = strlen(TTS_CONFIG) - n_from + n_to;
    char *text = malloc(n + 1);
    size_t head = (size_t)(at - TTS_CONFIG);
    memcpy(text, TTS_CONFIG, head);
    memcpy(text + head, to, n_to);
    strcpy(text + head + n_to, at + n_from);
    kz_status st = tts_parse(text, n, &c);
    if (want == KZ_OK) {
        CHECK_MSG(st == KZ_OK, "%s -> %s: %s", from, to, kz_error_get());
    } else {
        check_message(st, want, LABEL, what);
        CHECK(memcmp(&c, &zero, sizeof zero) == 0);
    }
    free(text);
    return &c;
}

/* Every id against its table; keys without an upstream default; unsupported switches. */
static void test_tts_ids(void) {
    tts_edited("\"text_vocab_size\": 151936,", "", KZ_STATUS_BAD_MODEL,
               "talker_config.text_vocab_size: missing");
    tts_edited("\"text_vocab_size\": 151936", "\"text_vocab_size\": 151673", KZ_STATUS_BAD_MODEL,
               "tts_eos_token_id 151673 is outside the text embedding");
    tts_edited("\"im_start_token_id\": 151644", "\"im_start_token_id\": 151936",
               KZ_STATUS_BAD_MODEL, "im_start_token_id 151936 is outside the text embedding");
    tts_edited("\"assistant_token_id\": 77091", "\"assistant_token_id\": 200000",
               KZ_STATUS_BAD_MODEL, "assistant_token_id 200000 is outside");
    tts_edited("\"assistant_token_id\": 77091,", "", KZ_OK, ""); // informational upstream
    tts_edited("\"codec_pad_id\": 2148", "\"codec_pad_id\": 3072", KZ_STATUS_BAD_MODEL,
               "talker_config.codec_pad_id: expected an integer in [0, 3071]");
    // A missing codec id takes the class default (4196..4205), outside a 3072-row table.
    tts_edited("\"codec_bos_id\": 2149,", "", KZ_STATUS_BAD_MODEL,
               "talker_config.codec_bos_id 4197 is outside the codec embedding");
    tts_edited("\"vocab_size\": 3072", "\"vocab_size\": 1024", KZ_STATUS_BAD_MODEL,
               "talker_config.vocab_size: expected an integer in [1025, ");
    tts_edited("\"ryan\": [3061]", "\"ryan\": [3072]", KZ_STATUS_BAD_MODEL,
               "talker_config.spk_id.ryan: expected a codec id in [0, 3072)");
    tts_edited("\"english\": 2050", "\"english\": -1", KZ_STATUS_BAD_MODEL,
               "talker_config.codec_language_id.english: expected a codec id");
    tts_edited("\"dylan\": \"beijing_dialect\"", "\"dylan\": \"klingon_dialect\"",
               KZ_STATUS_BAD_MODEL, "spk_is_dialect.dylan: 'klingon_dialect' is not in");
    // A dialect is a language name or false (no dialect); the official code would look any
    // other value up as a language and fail, so it is no silent "no dialect".
    tts_edited("\"dylan\": \"beijing_dialect\"", "\"dylan\": true", KZ_STATUS_BAD_MODEL,
               "spk_is_dialect.dylan: expected a language name or false");
    tts_edited("\"dylan\": \"beijing_dialect\"", "\"dylan\": 2074", KZ_STATUS_BAD_MODEL,
               "spk_is_dialect.dylan: expected a language name or false");
    tts_edited("\"dylan\": \"beijing_dialect\"", "\"dylan\": null", KZ_OK, "");
    tts_edited("\"head_dim\": 16, \"num_code_groups\": 16, \"text_hidden_size\"",
               "\"num_code_groups\": 16, \"text_hidden_size\"", KZ_OK, ""); // 32 / 4 heads
    tts_edited("\"hidden_size\": 32, \"intermediate_size\": 96,\n  \"num_hidden_layers\": 2, "
               "\"num_attention_heads\": 4, \"num_key_value_heads\": 2,\n  \"head_dim\": 16,",
               "\"hidden_size\": 8, \"num_attention_heads\": 16, \"num_key_value_heads\": 2,",
               KZ_STATUS_BAD_MODEL, "RoPE needs an even head_dim >= 2");
    tts_edited("\"num_code_groups\": 16, \"text_hidden_size\"",
               "\"num_code_groups\": 8, \"text_hidden_size\"", KZ_STATUS_BAD_MODEL,
               "talker num_code_groups 8 != code predictor's 16");
    // code_predictor_config.num_key_value_heads null: as many as attention heads (4).
    const kz_tts_config *c = tts_edited(
        "\"num_key_value_heads\": 2, \"head_dim\": 16, \"num_code_groups\": 16,\n   \"max",
        "\"num_key_value_heads\": null, \"head_dim\": 16, \"num_code_groups\": 16,\n   \"max",
        KZ_OK, "");
    CHECK_EQ_INT(c->talker.code_predictor.num_key_value_heads, 4);
    tts_edited("\"rope_theta\": 1000000, \"codec_bos_id\"",
               "\"hidden_act\": \"gelu\", \"codec_bos_id\"", KZ_STATUS_UNSUPPORTED,
               "talker_config.hidden_act (only silu) is not supported");
    tts_edited("\"max_position_embeddings\": 65536",
               "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}", KZ_STATUS_UNSUPPORTED,
               "code_predictor_config.rope_scaling.rope_type (only default)");
    tts_edited("\"rope_theta\": 1000000, \"codec_bos_id\"",
               "\"rope_scaling\": {\"mrope_section\": [3, 3, 2], \"interleaved\": true, "
               "\"rope_type\": \"default\"}, \"rope_theta\": 1000000, \"codec_bos_id\"",
               KZ_OK, "");
}

/* Missing keys take exactly the official classes' defaults (Qwen3TTSConfig,
 * Qwen3TTSTalkerConfig, Qwen3TTSTalkerCodePredictorConfig, speaker encoder). */
static void test_tts_defaults(void) {
    // vocab_size 5000 so the default codec ids (4196..4205) are rows of the table.
    const char *text = "{\"model_type\": \"qwen3_tts\", \"tts_model_type\": \"voice_design\",\n"
                       " \"talker_config\": {\"vocab_size\": 5000, \"text_vocab_size\": 151936}}";
    static kz_tts_config c;
    CHECK_MSG(tts_parse(text, strlen(text), &c) == KZ_OK, "%s", kz_error_get());
    CHECK_EQ_INT(c.im_start_token_id, 151644);
    CHECK_EQ_INT(c.im_end_token_id, 151645);
    CHECK_EQ_INT(c.tts_pad_token_id, 151671);
    CHECK_EQ_INT(c.tts_bos_token_id, 151672);
    CHECK_EQ_INT(c.tts_eos_token_id, 151673);
    CHECK_EQ_INT(c.assistant_token_id, -1);
    CHECK_EQ_INT(c.speaker_enc_dim, 1024);
    CHECK_EQ_INT(c.speaker_sample_rate, 24000);
    const kz_talker_config *t = &c.talker;
    CHECK_EQ_INT(t->hidden_size, 1024);
    CHECK_EQ_INT(t->intermediate_size, 2048);
    CHECK_EQ_INT(t->num_hidden_layers, 20);
    CHECK_EQ_INT(t->num_attention_heads, 16);
    CHECK_EQ_INT(t->num_key_value_heads, 2);
    CHECK_EQ_INT(t->head_dim, 64); // hidden_size / num_attention_heads
    CHECK_EQ_INT(t->max_position_embeddings, 32768);
    CHECK_EQ_INT(t->num_code_groups, 32);
    CHECK_EQ_INT(t->text_hidden_size, 2048);
    CHECK_NEAR(t->rms_norm_eps, 1e-6, 1e-12);
    CHECK_NEAR(t->rope_theta, 10000, 0);
    CHECK_EQ_INT(t->codec_eos_token_id, 4198);
    CHECK_EQ_INT(t->codec_think_id, 4202);
    CHECK_EQ_INT(t->codec_nothink_id, 4203);
    CHECK_EQ_INT(t->codec_think_bos_id, 4204);
    CHECK_EQ_INT(t->codec_think_eos_id, 4205);
    CHECK_EQ_INT(t->codec_pad_id, 4196);
    CHECK_EQ_INT(t->codec_bos_id, 4197);
    CHECK_EQ_INT(t->first_control_id, 5000 - 1024);
    CHECK_EQ_INT(t->n_languages + t->n_speakers, 0);
    const kz_code_predictor_config *p = &t->code_predictor;
    CHECK_EQ_INT(p->vocab_size, 2048);
    CHECK_EQ_INT(p->hidden_size, 1024);
    CHECK_EQ_INT(p->intermediate_size, 3072);
    CHECK_EQ_INT(p->num_hidden_layers, 5);
    CHECK_EQ_INT(p->num_attention_heads, 16);
    CHECK_EQ_INT(p->num_key_value_heads, 8);
    CHECK_EQ_INT(p->head_dim, 128);
    CHECK_EQ_INT(p->max_position_embeddings, 32768);
    CHECK_EQ_INT(p->num_code_groups, 32);
    CHECK_NEAR(p->rms_norm_eps, 1e-6, 1e-12);
    CHECK_NEAR(p->rope_theta, 10000, 0);
}

/* ---- generation_config.json --------------------------------------------- */

/* Field by field: the struct has padding after its bools. */
static bool generation_equal(const kz_generation_config *a, const kz_generation_config *b) {
    return a->do_sample == b->do_sample && a->temperature == b->temperature &&
           a->top_k == b->top_k && a->top_p == b->top_p &&
           a->repetition_penalty == b->repetition_penalty &&
           a->subtalker_dosample == b->subtalker_dosample &&
           a->subtalker_temperature == b->subtalker_temperature &&
           a->subtalker_top_k == b->subtalker_top_k && a->subtalker_top_p == b->subtalker_top_p &&
           a->max_new_tokens == b->max_new_tokens;
}

static void test_generation_config(void) {
    char path[256];
    write_file(path, sizeof path, "generation_config.json", GENERATION_CONFIG);
    kz_generation_config from_file, from_text;
    CHECK_EQ_INT(kz_generation_config_load(path, &from_file), KZ_OK);
    size_t n = strlen(GENERATION_CONFIG);
    char *copy = exact_copy(GENERATION_CONFIG, n);
    CHECK_EQ_INT(kz_generation_config_parse(LABEL, copy, n, &from_text), KZ_OK);
    CHECK(generation_equal(&from_file, &from_text));
    CHECK_NEAR(from_text.temperature, 0.7, 1e-6);
    CHECK_EQ_INT(from_text.top_k, 30);
    CHECK(!from_text.subtalker_dosample);
    CHECK_NEAR(from_text.subtalker_temperature, 0.9, 1e-6); // missing key: fallback
    CHECK_EQ_INT(from_text.max_new_tokens, 8192);

    // No file, or no text: the fallbacks (max_new_tokens 2048).
    snprintf(path, sizeof path, "%s/no_generation_config.json", temp_root);
    CHECK_EQ_INT(kz_generation_config_load(path, &from_file), KZ_OK);
    CHECK_EQ_INT(kz_generation_config_parse(LABEL, NULL, 0, &from_text), KZ_OK);
    CHECK(generation_equal(&from_file, &from_text));
    CHECK_EQ_INT(from_text.max_new_tokens, 2048);
    CHECK(from_text.do_sample);

    check_message(kz_generation_config_parse(LABEL, copy, n - 3, &from_text), KZ_STATUS_BAD_MODEL,
                  LABEL, "malformed JSON");
    check_message(kz_generation_config_parse(LABEL, "{\"top_p\": 2}", 12, &from_text),
                  KZ_STATUS_BAD_MODEL, LABEL, "top_p: expected a number");
    free(copy);
}

/* ---- speech_tokenizer/config.json ---------------------------------------- */

static void test_codec_config(void) {
    char path[256];
    write_file(path, sizeof path, "codec_config.json", CODEC_CONFIG);
    kz_codec_config from_file, from_text;
    CHECK_EQ_INT(kz_codec_config_load(path, &from_file), KZ_OK);
    size_t n = strlen(CODEC_CONFIG);
    char *copy = exact_copy(CODEC_CONFIG, n);
    const char *label = "model.gguf:kztts.codec_config_json";
    CHECK_EQ_INT(kz_codec_config_parse(label, copy, n, &from_text), KZ_OK);
    CHECK(memcmp(&from_file, &from_text, sizeof from_file) == 0);
    CHECK_EQ_INT(from_text.decoder_dim, 64);
    CHECK_EQ_INT(from_text.n_upsample_rates, 4);
    // Defaults of Qwen3TTSTokenizerV2Config / ...DecoderConfig; codebook_dim has none.
    const char *bare = "{\"model_type\": \"qwen3_tts_tokenizer_12hz\", "
                       "\"decoder_config\": {\"codebook_dim\": 512}}";
    CHECK_EQ_INT(kz_codec_config_parse(label, bare, strlen(bare), &from_text), KZ_OK);
    const kz_codec_config *d = &from_text;
    CHECK(d->input_sample_rate == 24000 && d->output_sample_rate == 24000);
    CHECK(d->decode_upsample_rate == 1920 && d->encode_downsample_rate == 1920);
    CHECK_EQ_INT(d->encoder_valid_num_quantizers, 16);
    CHECK(d->codebook_size == 2048 && d->hidden_size == 1024 && d->latent_dim == 1024);
    CHECK(d->max_position_embeddings == 8000 && d->num_attention_heads == 16);
    CHECK(d->num_key_value_heads == 16 && d->head_dim == 64 && d->sliding_window == 72);
    CHECK(d->intermediate_size == 3072 && d->num_hidden_layers == 8 && d->num_quantizers == 16);
    CHECK(d->decoder_dim == 1536 && d->n_upsample_rates == 4 && d->upsample_rates[0] == 8 &&
          d->upsample_rates[3] == 3 && d->n_upsampling_ratios == 2);
    CHECK_NEAR(d->rms_norm_eps, 1e-5, 1e-12);
    CHECK_NEAR(d->rope_theta, 10000, 0);
    // encoder_config: MimiConfig's defaults (transformers 4.57.3), frame rate 24000 / 1920.
    const kz_codec_encoder_config *e = &d->encoder;
    CHECK(e->sampling_rate == 24000 && e->audio_channels == 1 && e->num_filters == 64);
    CHECK(e->n_ratios == 4 && e->upsampling_ratios[0] == 8 && e->upsampling_ratios[1] == 6 &&
          e->upsampling_ratios[2] == 5 && e->upsampling_ratios[3] == 4);
    CHECK(e->kernel_size == 7 && e->last_kernel_size == 3 && e->residual_kernel_size == 3);
    CHECK(e->num_residual_layers == 1 && e->dilation_growth_rate == 2 && e->compress == 2);
    CHECK(e->hidden_size == 512 && e->num_hidden_layers == 8 && e->num_attention_heads == 8);
    CHECK(e->num_key_value_heads == 8 && e->head_dim == 64 && e->intermediate_size == 2048);
    CHECK(e->num_quantizers == 32 && e->num_semantic_quantizers == 1);
    CHECK(e->codebook_size == 2048 && e->codebook_dim == 256 && e->vq_hidden == 256);
    CHECK_NEAR(e->norm_eps, 1e-5, 1e-12);
    CHECK_NEAR(e->rope_theta, 10000, 0);
    CHECK_NEAR(e->frame_rate, 12.5, 0);
    CHECK(e->supported);
    const char *enc = "{\"model_type\": \"qwen3_tts_tokenizer_12hz\", \"decoder_config\": "
                      "{\"codebook_dim\": 8}, \"encoder_config\": {\"_frame_rate\": 6.25, "
                      "\"hidden_size\": 64, \"num_attention_heads\": 4, \"pad_mode\": \"reflect\"}}";
    CHECK_EQ_INT(kz_codec_config_parse(label, enc, strlen(enc), &from_text), KZ_OK);
    CHECK(d->encoder.head_dim == 16 && d->encoder.frame_rate == 6.25 && !d->encoder.supported);
    const char *bad_enc = "{\"model_type\": \"qwen3_tts_tokenizer_12hz\", \"decoder_config\": "
                          "{\"codebook_dim\": 8}, \"encoder_config\": {\"num_filters\": 0}}";
    check_message(kz_codec_config_parse(label, bad_enc, strlen(bad_enc), &from_text),
                  KZ_STATUS_BAD_MODEL, label, "encoder_config.num_filters");
    const char *no_dim = "{\"model_type\": \"qwen3_tts_tokenizer_12hz\", \"decoder_config\": {}}";
    check_message(kz_codec_config_parse(label, no_dim, strlen(no_dim), &from_text),
                  KZ_STATUS_BAD_MODEL, label, "decoder_config.codebook_dim: missing");
    // Rates whose product overflows 64 bits: an error, not undefined arithmetic.
    const char *huge = "{\"model_type\": \"qwen3_tts_tokenizer_12hz\", \"decoder_config\": "
                       "{\"codebook_dim\": 8, \"upsample_rates\": [64, 64, 64, 64, 64, 64, 64, 64],"
                       " \"upsampling_ratios\": [64, 64, 64, 64, 64, 64, 64, 64]}}";
    check_message(kz_codec_config_parse(label, huge, strlen(huge), &from_text),
                  KZ_STATUS_BAD_MODEL, label, "decode_upsample_rate 1920 != product");
    const char *heads = "{\"model_type\": \"qwen3_tts_tokenizer_12hz\", \"decoder_config\": "
                        "{\"codebook_dim\": 8, \"hidden_size\": 8}}";
    check_message(kz_codec_config_parse(label, heads, strlen(heads), &from_text),
                  KZ_STATUS_BAD_MODEL, label, "odd head_dim 0");
    check_message(kz_codec_config_parse(label, copy, n - 2, &from_text), KZ_STATUS_BAD_MODEL, label,
                  "malformed JSON");
    check_message(kz_codec_config_parse(label, TTS_CONFIG, strlen(TTS_CONFIG), &from_text),
                  KZ_STATUS_BAD_MODEL, label,
                  "model_type is 'qwen3_tts', expected 'qwen3_tts_tokenizer_12hz'");
    free(copy);
}

/* ---- across the two configs (model.c) ----------------------------------- */

/* A model with the two test configs and no weights: what kz_model_check_tts reads. */
static void test_cross_checks(void) {
    static kz_model m;
    memset(&m, 0, sizeof m);
    m.path = "tiny";
    CHECK_EQ_INT(tts_parse(TTS_CONFIG, strlen(TTS_CONFIG), &m.cfg), KZ_OK);
    CHECK_EQ_INT(kz_codec_config_parse("c", CODEC_CONFIG, strlen(CODEC_CONFIG), &m.codec_cfg),
                 KZ_OK);
    CHECK_EQ_INT(kz_model_check_tts(&m), KZ_OK);
    CHECK_EQ_INT(m.newline_id, -1); // no tokenizer
    m.codec_cfg.num_quantizers = 8;
    check_message(kz_model_check_tts(&m), KZ_STATUS_BAD_MODEL, "tiny",
                  "talker_config.num_code_groups 16 != the codec's decoder_config.num_quantizers 8");
    m.codec_cfg.num_quantizers = 16;
    m.codec_cfg.codebook_size = 2047; // the code predictor makes codes up to 2047
    check_message(kz_model_check_tts(&m), KZ_STATUS_BAD_MODEL, "tiny",
                  "decoder_config.codebook_size 2047 is smaller than");
    m.codec_cfg.codebook_size = 2048;
    m.cfg.talker.vocab_size = 3073; // codebook 0 then reaches 2048
    m.cfg.talker.first_control_id = 3073 - KZ_TALKER_CONTROL_IDS;
    check_message(kz_model_check_tts(&m), KZ_STATUS_BAD_MODEL, "tiny",
                  "talker_config.vocab_size - 1024 = 2049");
}

/* ---- kz_json_parse and kz_text_file_read -------------------------------- */

static void test_json_parse(void) {
    cJSON *root = (cJSON *)1;
    check_message(kz_json_parse("x", "[1, 2]", 6, &root), KZ_STATUS_BAD_MODEL, "x",
                  "top level is not a JSON object");
    CHECK(root == NULL);
    check_message(kz_json_parse("x", "{}\0{}", 5, &root), KZ_STATUS_BAD_MODEL, "x",
                  "contains a NUL byte");
    check_message(kz_json_parse("x", "{} {", 4, &root), KZ_STATUS_BAD_MODEL, "x",
                  "malformed JSON near byte 3");
    CHECK_EQ_INT(kz_json_parse("x", "{\"a\": 1}trailing", 8, &root), KZ_OK);
    CHECK(root != NULL && cJSON_GetObjectItem(root, "a") != NULL);
    cJSON_Delete(root);

    size_t big = KZ_JSON_MAX_BYTES + 1;
    char *text = malloc(big);
    CHECK(text != NULL);
    if (text) {
        memset(text, ' ', big);
        text[0] = '{';
        text[big - 1] = '}';
        check_message(kz_json_parse("big", text, big, &root), KZ_STATUS_BAD_MODEL, "big",
                      "larger than 16777216 bytes");
        CHECK_EQ_INT(kz_json_parse("big", text + 1, big - 1, &root), KZ_STATUS_BAD_MODEL);
        memset(text + 1, ' ', big - 2); // exactly the limit: accepted
        text[big - 2] = '}';
        CHECK_EQ_INT(kz_json_parse("big", text, big - 1, &root), KZ_OK);
        cJSON_Delete(root);
        free(text);
    }
}

static void test_text_file(void) {
    char path[256];
    write_file(path, sizeof path, "ten.txt", "0123456789");
    char *text = NULL;
    size_t n = 0;
    CHECK_EQ_INT(kz_text_file_read(path, 100, &text, &n), KZ_OK);
    CHECK(n == 10 && text && strcmp(text, "0123456789") == 0);
    free(text);
    CHECK_EQ_INT(kz_text_file_read(path, 4, &text, &n), KZ_OK);
    CHECK(n == 4 && text && strcmp(text, "0123") == 0);
    free(text);
    CHECK_EQ_INT(kz_text_file_read(path, 10, &text, &n), KZ_OK);
    CHECK(n == 10 && text && text[10] == '\0');
    free(text);
    snprintf(path, sizeof path, "%s/absent.txt", temp_root);
    check_message(kz_text_file_read(path, 10, &text, &n), KZ_STATUS_IO, path, "cannot open");
    CHECK(text == NULL && n == 0);
}

int main(void) {
    snprintf(temp_root, sizeof temp_root, "/tmp/kz_config_XXXXXX");
    if (!mkdtemp(temp_root)) {
        perror("mkdtemp");
        return 1;
    }
    test_tts_config();
    test_tts_ids();
    test_tts_defaults();
    test_generation_config();
    test_codec_config();
    test_cross_checks();
    test_json_parse();
    test_text_file();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", temp_root);
    if (system(cmd) != 0) {
        fprintf(stderr, "could not remove %s\n", temp_root);
    }
    return test_main_result("test_config");
}
