/*
 * test_api.c - the public header as a contract: the ABI version, every default
 * function fills what its comment promises (and the zero-initialised struct means
 * the same), destructors accept NULL, bad parameters return the documented status
 * with a message (and leave outputs empty), the experimental entry points refuse
 * NULL, and the log callback receives messages. No model files needed (the zeroed
 * request synthesizing is tests/unit/api_c11.c on the tiny checkpoint).
 */
#include <string.h>
#include <time.h>

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
    CHECK(kz_abi_version() == KZ_ABI_VERSION);
    const kz_model_params mp0 = {0};
    kz_model_params mp;
    memset(&mp, 0x5a, sizeof mp);
    kz_model_default_params(&mp);
    CHECK(mp.isa == KZ_ISA_CAP_AUTO && mp.isa == mp0.isa);
    CHECK(mp.codec_precision == KZ_PRECISION_DEFAULT && mp.codec_precision == mp0.codec_precision);
    CHECK(mp.kv_cache == KZ_KV_CACHE_DEFAULT && mp.kv_cache == mp0.kv_cache);
    const kz_session_params sp0 = {0};
    kz_session_params sp;
    memset(&sp, 0x5a, sizeof sp);
    kz_session_default_params(&sp);
    CHECK(memcmp(&sp, &sp0, sizeof sp) == 0); // every session default is 0
    kz_decode_params dp;
    memset(&dp, 0x5a, sizeof dp);
    kz_decode_default_params(&dp);
    CHECK(dp.mode == KZ_DECODE_STREAM && dp.on_audio == NULL && dp.user == NULL);
    CHECK_EQ_INT(dp.chunk_frames, 4); // what a zeroed chunk_frames means
    kz_request r;
    memset(&r, 0x5a, sizeof r);
    kz_request_default_params(NULL, &r); // the official wrapper's values
    CHECK(strcmp(r.language, "auto") == 0);
    CHECK(!r.text && !r.token_ids && r.n_token_ids == 0 && !r.text_pull && !r.speaker);
    CHECK(!r.instruct && !r.on_audio && !r.on_frame && !r.user);
    CHECK(!r.greedy && r.temperature == 0.9f && r.top_k == 50 && r.top_p == 1.0f);
    CHECK(r.repetition_penalty == 1.05f && r.cp_temperature == 0.9f && r.cp_top_k == 50);
    CHECK(r.cp_top_p == 1.0f);
    CHECK(r.frames == 0 && r.max_frames == 0 && r.chunk_frames == 0 && r.seed == 0);
    CHECK(r.first_chunk_frames == 1 && r.max_utterance_bytes == 600);
    CHECK(r.layout == KZ_LAYOUT_DEFAULT && r.split == KZ_TEXT_SPLIT_QWEN2);
    kz_model_default_params(NULL);
    kz_session_default_params(NULL);
    kz_decode_default_params(NULL);
    kz_request_default_params(NULL, NULL);
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
    for (int p = -1; p <= 6; p += 7) {
        mp.codec_precision = (kz_precision)p;
        CHECK(kz_model_load("x", &mp, &m) == KZ_STATUS_INVALID_ARGUMENT);
        CHECK_STR_CONTAINS(kz_last_error(), "precision");
    }
    mp.codec_precision = KZ_PRECISION_EXACT;
    for (int kv = -1; kv <= 3; kv += 4) {
        mp.kv_cache = (kz_kv_cache)kv;
        CHECK(kz_model_load("x", &mp, &m) == KZ_STATUS_INVALID_ARGUMENT);
        CHECK_STR_CONTAINS(kz_last_error(), "kv cache");
    }
    mp.kv_cache = KZ_KV_CACHE_F16;
    CHECK(kz_model_load("/nonexistent/model", &mp, &m) == KZ_STATUS_IO && m == NULL);
    mp.kv_cache = KZ_KV_CACHE_DEFAULT;
    CHECK(kz_model_load("/nonexistent/model", &mp, &m) == KZ_STATUS_IO && m == NULL);
    mp.codec_precision = KZ_PRECISION_BF16; // valid on every CPU (f32 where bf16 is missing)
    mp.isa = KZ_ISA_CAP_NEON; // in range on every CPU: the load fails on the path instead
    CHECK(kz_model_load("/nonexistent/model", &mp, &m) == KZ_STATUS_IO && m == NULL);
    mp.codec_precision = KZ_PRECISION_WINOGRAD; // valid everywhere too
    CHECK(kz_model_load("/nonexistent/model", &mp, &m) == KZ_STATUS_IO && m == NULL);
    mp.codec_precision = KZ_PRECISION_WINOGRAD_BF16; // winograd where bf16 is missing
    CHECK(kz_model_load("/nonexistent/model", &mp, &m) == KZ_STATUS_IO && m == NULL);
    mp.codec_precision = KZ_PRECISION_FAST; // resolved per CPU at load
    CHECK(kz_model_load("/nonexistent/model", &mp, &m) == KZ_STATUS_IO && m == NULL);
    const kz_model_params zeroed = {0};
    CHECK(kz_model_load("/nonexistent/model", &zeroed, &m) == KZ_STATUS_IO && m == NULL);
    CHECK(kz_model_load("/nonexistent/model", NULL, &m) == KZ_STATUS_IO && m == NULL);
    CHECK_STR_CONTAINS(kz_last_error(), "/nonexistent/model");
    kz_session *s = (kz_session *)&s;
    CHECK(kz_session_new(NULL, NULL, &s) == KZ_STATUS_INVALID_ARGUMENT && s == NULL);
    kz_audio audio = {.n_samples = 7};
    CHECK(kz_decode_all(NULL, NULL, 1, NULL, &audio) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK(audio.samples == NULL && audio.n_samples == 0);
    CHECK(kz_decode(NULL, NULL, 0, NULL) == KZ_STATUS_INVALID_ARGUMENT);
    const kz_decode_params no_callback = {0};
    CHECK(kz_decode(NULL, NULL, 0, &no_callback) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(kz_last_error(), "on_audio");
    CHECK(kz_synthesize(NULL, NULL) == KZ_STATUS_INVALID_ARGUMENT);
    const kz_request no_audio = {.text = "hi"};
    CHECK(kz_synthesize(NULL, &no_audio) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(kz_last_error(), "on_audio");
    CHECK(kz_synthesize_all(NULL, NULL, &audio) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK(kz_session_prepare(NULL, &no_audio) == KZ_STATUS_INVALID_ARGUMENT);
    int32_t *ids = (int32_t *)&ids;
    size_t n = 9;
    CHECK(kz_tokenize(NULL, "hi", KZ_TEXT_SPLIT_QWEN2, &ids, &n) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK(ids == NULL && n == 0);
    CHECK(strcmp(kz_model_describe(NULL), "") == 0 && kz_model_sample_rate(NULL) == 0);
    CHECK(kz_model_speaker_count(NULL) == 0 && kz_model_speaker_name(NULL, 0) == NULL);
    kz_timings t;
    kz_session_timings(NULL, &t);
    CHECK(t.frames == 0 && t.codec_frames == 0);
    kz_session_timings(NULL, NULL);
    kz_session_reset_timings(NULL);
    kz_session_clear_prompt_cache(NULL);
}

static void test_experimental_null(void) {
    kz_experimental_model_info mi;
    kz_experimental_session_info si;
    CHECK(kz_experimental_model_get_info(NULL, &mi) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(kz_last_error(), "kz_experimental_model_get_info");
    CHECK(kz_experimental_session_get_info(NULL, &si) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK(kz_experimental_session_observe(NULL, NULL, NULL) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK(kz_experimental_session_force_codes(NULL, NULL, 0) == KZ_STATUS_INVALID_ARGUMENT);
    kz_experimental_voice_stats vs = {.total_ms = 1};
    CHECK(kz_experimental_voice_get_stats(NULL, &vs) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(kz_last_error(), "kz_experimental_voice_get_stats");
    CHECK(vs.total_ms == 0);
    CHECK(kz_experimental_voice_get_stats(NULL, NULL) == KZ_STATUS_INVALID_ARGUMENT);
    double v = 0;
    const char *loop = NULL;
    CHECK(kz_experimental_machine_read_gbs(1, NULL) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK(kz_experimental_machine_read_gbs(0, &v) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK(kz_experimental_machine_read_gbs(100000, &v) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK(kz_experimental_machine_fma_gflops("f32", 1, NULL, &loop) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK(kz_experimental_machine_fma_gflops("f32", -1, &v, &loop) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK(kz_experimental_machine_fma_gflops("no-such-loop", 1, &v, &loop) == KZ_OK);
    CHECK(v > 0 && loop && strstr(loop, "portable"));
    CHECK(kz_experimental_machine_core_rt_ns(NULL) == KZ_STATUS_INVALID_ARGUMENT);
    v = -1;
    const time_t t0 = time(NULL);
    CHECK(kz_experimental_machine_core_rt_ns(&v) == KZ_OK);
    CHECK(time(NULL) - t0 <= 3); // its budget is ~0.3 s, busy machine or not
    // Tens to hundreds of ns; 0 on one CPU or a machine too busy to run both threads at once.
    CHECK(v >= 0 && v < 1e9);
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
    kz_request_default_params(NULL, NULL);
    kz_quantize_default_params(NULL);
    kz_model_default_params(NULL);
    kz_session_default_params(NULL);
    kz_decode_default_params(NULL);
    CHECK(kz_model_load(NULL, NULL, NULL) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK(kz_session_new(NULL, NULL, NULL) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK(kz_decode(NULL, NULL, 5, NULL) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK(kz_decode_all(NULL, NULL, 5, NULL, NULL) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK(kz_synthesize(NULL, NULL) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK(kz_quantize(NULL, NULL, NULL) == KZ_STATUS_INVALID_ARGUMENT);
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

/* kz_quantize's parameters: defaults as documented (a zeroed struct is the same), and bad
 * arguments fail with a message before anything is read or written. */
static void test_quantize_params(void) {
    kz_quantize_params qp;
    memset(&qp, 0x5a, sizeof qp);
    kz_quantize_default_params(&qp);
    CHECK(qp.type == KZ_QUANTIZE_Q8_0 && qp.codec_forms == KZ_PRECISION_DEFAULT);
    CHECK(qp.n_threads == 0 && qp.progress == NULL && qp.user == NULL);
    CHECK(qp.report == NULL);
    CHECK(KZ_QUANTIZE_Q8_0 == 0 && KZ_PRECISION_DEFAULT == 0); // so a zeroed struct is the defaults
    kz_quantize_default_params(NULL);

    kz_quantize_report report = {.n_packed = 77};
    qp.report = &report;
    CHECK(kz_quantize(NULL, "/tmp/x.gguf", &qp) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(kz_last_error(), "source path is NULL");
    CHECK(kz_quantize("dir", NULL, &qp) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(kz_last_error(), "output path is NULL");
    CHECK(kz_quantize("model.gguf", "/nonexistent/out.gguf", &qp) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(kz_last_error(), "not a GGUF file");
    qp.type = (kz_quantize_type)6;
    CHECK(kz_quantize("dir", "/nonexistent/out.gguf", &qp) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(kz_last_error(), "unknown type 6");
    qp.type = KZ_QUANTIZE_Q4_0;
    qp.n_threads = -1;
    CHECK(kz_quantize("dir", "/nonexistent/out.gguf", &qp) == KZ_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(kz_last_error(), "n_threads");
    CHECK(kz_quantize("/nonexistent/model", "/nonexistent/out.gguf", NULL) == KZ_STATUS_IO);
    CHECK_STR_CONTAINS(kz_last_error(), "/nonexistent/model");
    CHECK(report.n_packed == 77); // a report is filled only on success
}

int main(void) {
    test_defaults();
    test_null_and_bad();
    test_experimental_null();
    test_all_null();
    test_status_and_log();
    test_quantize_params();
    return test_main_result("test_api");
}
