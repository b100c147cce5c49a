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
 * kz_text_file_read (bounded read, missing file).
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
#include "runtime/error.h"
#include "test.h"

#define LABEL "model.gguf:kztts.config_json"

static const char *TTS_CONFIG =
    "{\"model_type\": \"qwen3_tts\", \"tts_model_type\": \"custom_voice\",\n"
    " \"tts_model_size\": \"0b6\", \"tokenizer_type\": \"qwen3_tts_tokenizer_12hz\",\n"
    " \"im_start_token_id\": 151644, \"im_end_token_id\": 151645,\n"
    " \"tts_pad_token_id\": 151671, \"tts_bos_token_id\": 151672, \"tts_eos_token_id\": 151673,\n"
    " \"speaker_encoder_config\": {\"enc_dim\": 32, \"sample_rate\": 24000},\n"
    " \"talker_config\": {\"vocab_size\": 3072, \"hidden_size\": 32, \"intermediate_size\": 96,\n"
    "  \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,\n"
    "  \"head_dim\": 16, \"num_code_groups\": 16, \"text_hidden_size\": 64,\n"
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
    check_message(kz_codec_config_parse(label, copy, n - 2, &from_text), KZ_STATUS_BAD_MODEL, label,
                  "malformed JSON");
    check_message(kz_codec_config_parse(label, TTS_CONFIG, strlen(TTS_CONFIG), &from_text),
                  KZ_STATUS_BAD_MODEL, label,
                  "model_type is 'qwen3_tts', expected 'qwen3_tts_tokenizer_12hz'");
    free(copy);
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
    test_generation_config();
    test_codec_config();
    test_json_parse();
    test_text_file();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", temp_root);
    if (system(cmd) != 0) {
        fprintf(stderr, "could not remove %s\n", temp_root);
    }
    return test_main_result("test_config");
}
