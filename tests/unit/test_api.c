/*
 * test_api.c - the public header as a contract: every default function fills
 * what its comment promises, destructors accept NULL, bad parameters return
 * the documented status with a message (and leave outputs empty), and the log
 * callback receives messages. No model files needed.
 */
#include <string.h>

#include "kztts.h"
#include "test.h"

static int log_calls;
static char log_last[256];

static void on_log(kz_log_level level, const char *message, void *user) {
    (void)level;
    (void)user;
    log_calls++;
    snprintf(log_last, sizeof log_last, "%s", message);
}

static void test_defaults(void) {
    kz_model_params mp;
    memset(&mp, 0x5a, sizeof mp);
    kz_model_default_params(&mp);
    CHECK(mp.isa == KZ_ISA_CAP_AUTO);
    CHECK(mp.codec_precision == KZ_PRECISION_F32);
    kz_session_params sp;
    memset(&sp, 0x5a, sizeof sp);
    kz_session_default_params(&sp);
    CHECK_EQ_INT(sp.n_threads, 0);
    kz_decode_params dp;
    kz_decode_default_params(&dp);
    CHECK(dp.mode == KZ_DECODE_STREAM);
    CHECK_EQ_INT(dp.chunk_frames, 4);
    kz_request r;
    kz_request_default(NULL, &r);
    CHECK(strcmp(r.language, "auto") == 0);
    CHECK(!r.greedy && r.temperature == 0.9f && r.top_k == 50 && r.top_p == 1.0f);
    CHECK(r.repetition_penalty == 1.05f && r.cp_temperature == 0.9f && r.cp_top_k == 50);
    CHECK(r.frames == 0 && r.max_frames == 0 && r.chunk_frames == 0 && r.seed == 0);
    CHECK(r.layout == KZ_LAYOUT_DEFAULT && r.split == KZ_TEXT_SPLIT_QWEN2);
    kz_model_default_params(NULL);
    kz_session_default_params(NULL);
    kz_decode_default_params(NULL);
    kz_request_default(NULL, NULL);
}

static void test_null_and_bad(void) {
    kz_model_free(NULL);
    kz_session_free(NULL);
    kz_audio_free(NULL);
    kz_audio empty = {0};
    kz_audio_free(&empty);
    kz_ids_free(NULL);
    kz_model *m = (kz_model *)&m;
    CHECK(kz_model_load(NULL, NULL, &m) == KZ_STATUS_INVALID_ARGUMENT && m == NULL);
    CHECK_STR_CONTAINS(kz_last_error(), "path");
    CHECK(kz_model_load("x", NULL, NULL) == KZ_STATUS_INVALID_ARGUMENT);
    kz_model_params mp;
    kz_model_default_params(&mp);
    mp.isa = (kz_isa_cap)42;
    CHECK(kz_model_load("x", &mp, &m) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(kz_last_error(), "isa");
    mp.isa = KZ_ISA_CAP_AUTO;
    mp.codec_precision = (kz_precision)7;
    CHECK(kz_model_load("x", &mp, &m) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(kz_last_error(), "precision");
    mp.codec_precision = KZ_PRECISION_BF16; // valid on every CPU (f32 where bf16 is missing)
    mp.isa = KZ_ISA_CAP_NEON; // in range on every CPU: the load fails on the path instead
    CHECK(kz_model_load("/nonexistent/model", &mp, &m) == KZ_STATUS_IO && m == NULL);
    mp.codec_precision = KZ_PRECISION_WINOGRAD; // valid everywhere too
    CHECK(kz_model_load("/nonexistent/model", &mp, &m) == KZ_STATUS_IO && m == NULL);
    mp.codec_precision = KZ_PRECISION_WINOGRAD_BF16; // winograd where bf16 is missing
    CHECK(kz_model_load("/nonexistent/model", &mp, &m) == KZ_STATUS_IO && m == NULL);
    mp.codec_precision = KZ_PRECISION_FAST; // resolved per CPU at load
    CHECK(kz_model_load("/nonexistent/model", &mp, &m) == KZ_STATUS_IO && m == NULL);
    CHECK(kz_model_load("/nonexistent/model", NULL, &m) == KZ_STATUS_IO && m == NULL);
    CHECK_STR_CONTAINS(kz_last_error(), "/nonexistent/model");
    kz_session *s = (kz_session *)&s;
    CHECK(kz_session_new(NULL, NULL, &s) == KZ_STATUS_INVALID_ARGUMENT && s == NULL);
    kz_audio audio = {.n_samples = 7};
    CHECK(kz_decode_all(NULL, NULL, 1, NULL, &audio) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK(audio.samples == NULL && audio.n_samples == 0);
    CHECK(kz_decode(NULL, NULL, 0, NULL, NULL, NULL) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK(kz_synthesize(NULL, NULL, NULL, NULL) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK(kz_synthesize_all(NULL, NULL, &audio) == KZ_STATUS_INVALID_ARGUMENT);
    int32_t *ids = (int32_t *)&ids;
    size_t n = 9;
    CHECK(kz_tokenize(NULL, "hi", KZ_TEXT_SPLIT_QWEN2, &ids, &n) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK(ids == NULL && n == 0);
    CHECK(strcmp(kz_model_describe(NULL), "") == 0 && kz_model_sample_rate(NULL) == 0);
    CHECK(kz_model_speaker_count(NULL) == 0 && kz_model_speaker_name(NULL, 0) == NULL);
    kz_timings t;
    kz_session_timings(NULL, &t);
    CHECK(t.frames == 0 && t.codec_frames == 0);
}

/* Every public function with every pointer argument NULL: a status (with a message) or
 * nothing, never a crash. */
static void test_all_null(void) {
    kz_session_timings(NULL, NULL);
    kz_session_reset_timings(NULL);
    kz_session_clear_prompt_cache(NULL);
    kz_model_free(NULL);
    kz_session_free(NULL);
    kz_audio_free(NULL);
    kz_ids_free(NULL);
    kz_request_default(NULL, NULL);
    kz_model_default_params(NULL);
    kz_session_default_params(NULL);
    kz_decode_default_params(NULL);
    CHECK(kz_model_load(NULL, NULL, NULL) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK(kz_session_new(NULL, NULL, NULL) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK(kz_decode(NULL, NULL, 5, NULL, NULL, NULL) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK(kz_decode_all(NULL, NULL, 5, NULL, NULL) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK(kz_synthesize(NULL, NULL, NULL, NULL) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK(kz_synthesize_all(NULL, NULL, NULL) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK(kz_session_prepare(NULL, NULL) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK(kz_tokenize(NULL, NULL, KZ_TEXT_SPLIT_QWEN2, NULL, NULL) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(kz_last_error(), "kz_tokenize");
    CHECK(strcmp(kz_model_describe(NULL), "") == 0 && strcmp(kz_model_type(NULL), "") == 0);
    CHECK(kz_model_sample_rate(NULL) == 0 && kz_model_samples_per_frame(NULL) == 0);
    CHECK(kz_model_num_codebooks(NULL) == 0 && kz_model_codebook_size(NULL) == 0);
    CHECK(kz_model_speaker_count(NULL) == 0 && kz_model_speaker_name(NULL, -1) == NULL);
    CHECK(kz_model_language_count(NULL) == 0 && kz_model_language_name(NULL, 0) == NULL);
    CHECK(strcmp(kz_status_str((kz_status)-1), "unknown status") == 0);
    CHECK(kz_last_error() != NULL && kz_version() != NULL && kz_system_info() != NULL);
}

static void test_status_and_log(void) {
    for (int st = KZ_OK; st <= KZ_STATUS_INTERNAL; st++) {
        CHECK(strcmp(kz_status_str((kz_status)st), "unknown status") != 0);
    }
    CHECK(strcmp(kz_status_str((kz_status)99), "unknown status") == 0);
    CHECK(kz_version()[0] != '\0' && kz_system_info()[0] != '\0');
    kz_log_set(on_log, KZ_LOG_DEBUG, NULL);
    kz_model *m;
    CHECK(kz_model_load("/nonexistent/again", NULL, &m) != KZ_OK);
    CHECK(log_calls > 0);
    const char *last = log_last;
    CHECK_STR_CONTAINS(last, "/nonexistent/again");
    kz_log_set(NULL, KZ_LOG_WARN, NULL);
}

int main(void) {
    test_defaults();
    test_null_and_bad();
    test_all_null();
    test_status_and_log();
    return test_main_result("test_api");
}
