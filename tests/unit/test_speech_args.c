/*
 * test_speech_args.c - the body of POST /v1/audio/speech (tools/kztts/serve/speech_args.c)
 * and the field of a library refusal of it (speech_refusal.c).
 *
 * Dataflow: JSON text written here -> speech_args_parse for a model type -> the fields,
 *        or the error (status, param, code) compared with what OpenAI's contract and
 *        vLLM-Omni's Qwen3-TTS fields say.
 *
 * Covers: defaults; every field's value; voice as a string and as {"id"}; null as
 * absent; the last duplicate winning; every field with each wrong JSON type (the error
 * names it); every range edge in and out; unknown fields (top level and inside voice);
 * malformed JSON, trailing garbage, a body that is not an object, an empty body; input
 * missing, empty, blank, at the character limit and one beyond (counted in code points,
 * multi-byte text included), invalid UTF-8 of every kind; instructions' limit;
 * task_type inferred from each model type and refused when it differs; the fields only
 * Base takes; VoiceDesign without instructions; Base without a voice source; ref_audio
 * that is not a data: URI; a model type that cannot synthesize; the request field a
 * library refusal concerns (speech_refusal.c), among the fields passed, whole words only.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "speech_args.h"
#include "speech_refusal.h"
#include "test.h"

#define CV "custom_voice"
#define VD "voice_design"
#define BASE "base"

/* Parses body for model_type with a 4096-character limit; the caller frees *a. */
static int parse(const char *body, const char *model_type, speech_args *a, http_error *e) {
    memset(e, 0, sizeof *e);
    return speech_args_parse(body, strlen(body), 4096, model_type, a, e);
}

/* body must fail with status 400, param (NULL: none) and code. */
static void expect_error(const char *body, const char *model_type, const char *param,
                         const char *code, int line) {
    speech_args a;
    http_error e;
    int rc = parse(body, model_type, &a, &e);
    CHECK_MSG(rc == 400 && e.status == 400, "line %d: %s -> %d", line, body, rc);
    CHECK_MSG(e.type && strcmp(e.type, "invalid_request_error") == 0, "line %d: type", line);
    bool param_ok = param ? e.param && strcmp(e.param, param) == 0 : e.param == NULL;
    CHECK_MSG(param_ok, "line %d: %s: param %s, expected %s", line, body,
              e.param ? e.param : "NULL", param ? param : "NULL");
    CHECK_MSG(e.code && strcmp(e.code, code) == 0, "line %d: %s: code %s, expected %s", line,
              body, e.code ? e.code : "NULL", code);
    CHECK_MSG(e.message[0] != '\0', "line %d: empty message", line);
    speech_args_free(&a);
}
#define EXPECT_ERROR(body, type, param, code) expect_error(body, type, param, code, __LINE__)

static void expect_ok(const char *body, const char *model_type, int line) {
    speech_args a;
    http_error e;
    int rc = parse(body, model_type, &a, &e);
    CHECK_MSG(rc == 0, "line %d: %s -> %d (%s)", line, body, rc, e.message);
    speech_args_free(&a);
}
#define EXPECT_OK(body, type) expect_ok(body, type, __LINE__)

static void test_defaults(void) {
    speech_args a;
    http_error e;
    CHECK_EQ_INT(parse("{\"model\":\"tts-1\",\"input\":\"Hello.\",\"voice\":\"ryan\"}", CV, &a,
                       &e), 0);
    CHECK(strcmp(a.model, "tts-1") == 0);
    CHECK(strcmp(a.input, "Hello.") == 0);
    CHECK_EQ_INT(a.input_chars, 6);
    CHECK(strcmp(a.voice, "ryan") == 0);
    CHECK(strcmp(a.response_format, "mp3") == 0);
    CHECK(a.speed == 1.0f);
    CHECK(!a.sse);
    CHECK_EQ_INT(a.task, SPEECH_TASK_CUSTOM_VOICE);
    CHECK(!a.instructions && !a.language && !a.ref_audio && !a.ref_text && !a.x_vector_only);
    CHECK(!a.has_seed && !a.greedy);
    CHECK(a.temperature == 0 && a.top_k == 0 && a.top_p == 0 && a.repetition_penalty == 0);
    CHECK_EQ_INT(a.max_frames, 0);
    speech_args_free(&a);
}

static void test_all_fields(void) {
    speech_args a;
    http_error e;
    const char *body =
        "{\"model\":\"qwen\",\"input\":\"Grüße, 世界\",\"voice\":{\"id\":\"Vivian\"},"
        "\"instructions\":\"Cheerful.\",\"response_format\":\"opus\",\"speed\":1.5,"
        "\"stream_format\":\"sse\",\"language\":\"German\",\"task_type\":\"CustomVoice\","
        "\"seed\":12345678901,\"temperature\":0.7,\"top_k\":20,\"top_p\":0.9,"
        "\"repetition_penalty\":1.1,\"max_new_tokens\":300}";
    CHECK_EQ_INT(parse(body, CV, &a, &e), 0);
    CHECK(strcmp(a.input, "Grüße, 世界") == 0);
    CHECK_EQ_INT(a.input_chars, 9);
    CHECK(strcmp(a.voice, "Vivian") == 0);
    CHECK(strcmp(a.instructions, "Cheerful.") == 0);
    CHECK(strcmp(a.response_format, "opus") == 0);
    CHECK(a.speed == 1.5f);
    CHECK(a.sse);
    CHECK(strcmp(a.language, "German") == 0);
    CHECK_EQ_INT(a.task, SPEECH_TASK_CUSTOM_VOICE);
    CHECK(a.has_seed && a.seed == 12345678901ull);
    CHECK(!a.greedy);
    CHECK_NEAR(a.temperature, 0.7, 1e-6);
    CHECK_EQ_INT(a.top_k, 20);
    CHECK_NEAR(a.top_p, 0.9, 1e-6);
    CHECK_NEAR(a.repetition_penalty, 1.1, 1e-6);
    CHECK_EQ_INT(a.max_frames, 300);
    speech_args_free(&a);

    const char *base =
        "{\"model\":\"m\",\"input\":\"x\",\"voice\":\"alloy\",\"task_type\":\"Base\","
        "\"ref_audio\":\"data:audio/wav;base64,UklGRg==\",\"ref_text\":\"Hi there.\","
        "\"x_vector_only_mode\":false,\"temperature\":0}";
    CHECK_EQ_INT(parse(base, BASE, &a, &e), 0);
    CHECK_EQ_INT(a.task, SPEECH_TASK_BASE);
    CHECK(strcmp(a.ref_audio, "data:audio/wav;base64,UklGRg==") == 0);
    CHECK(strcmp(a.ref_text, "Hi there.") == 0);
    CHECK(!a.x_vector_only);
    CHECK(a.greedy && a.temperature == 0);
    speech_args_free(&a);

    CHECK_EQ_INT(parse("{\"model\":\"m\",\"input\":\"x\",\"voice\":\"v\",\"ref_audio\":"
                       "\"data:,\",\"x_vector_only_mode\":true}", BASE, &a, &e), 0);
    CHECK(a.x_vector_only && !a.ref_text);
    speech_args_free(&a);

    // Every format and stream format by name.
    const char *formats[] = {"mp3", "opus", "aac", "flac", "wav", "pcm"};
    for (int i = 0; i < 6; i++) {
        char b[160];
        snprintf(b, sizeof b, "{\"model\":\"m\",\"input\":\"x\",\"voice\":\"v\","
                 "\"response_format\":\"%s\",\"stream_format\":\"audio\"}", formats[i]);
        CHECK_EQ_INT(parse(b, CV, &a, &e), 0);
        CHECK(strcmp(a.response_format, formats[i]) == 0 && !a.sse);
        speech_args_free(&a);
    }
}

static void test_null_and_duplicates(void) {
    speech_args a;
    http_error e;
    // null = absent for optional fields.
    CHECK_EQ_INT(parse("{\"model\":\"m\",\"input\":\"x\",\"voice\":\"v\",\"speed\":null,"
                       "\"language\":null,\"seed\":null,\"task_type\":null,\"ref_audio\":null,"
                       "\"ref_text\":null,\"x_vector_only_mode\":null,\"instructions\":null,"
                       "\"response_format\":null,\"stream_format\":null,\"temperature\":null,"
                       "\"top_k\":null,\"top_p\":null,\"repetition_penalty\":null,"
                       "\"max_new_tokens\":null}", CV, &a, &e), 0);
    CHECK(a.speed == 1.0f && strcmp(a.response_format, "mp3") == 0 && !a.has_seed);
    speech_args_free(&a);
    // The last occurrence wins, null included.
    CHECK_EQ_INT(parse("{\"model\":\"m\",\"input\":\"first\",\"input\":\"second\","
                       "\"voice\":\"v\",\"speed\":2,\"speed\":0.5}", CV, &a, &e), 0);
    CHECK(strcmp(a.input, "second") == 0 && a.speed == 0.5f);
    speech_args_free(&a);
    EXPECT_ERROR("{\"model\":\"m\",\"input\":\"x\",\"input\":null,\"voice\":\"v\"}", CV, "input",
                 "missing_required_parameter");
    // A bad value earlier is overridden by a good one later.
    EXPECT_OK("{\"model\":\"m\",\"input\":\"x\",\"voice\":\"v\",\"speed\":9,\"speed\":2}", CV);
    // Whitespace around the value is JSON.
    EXPECT_OK(" \n{\"model\":\"m\",\"input\":\"x\",\"voice\":\"v\"}\r\n\t ", CV);
}

static void test_malformed(void) {
    const char *bad[] = {
        "", " ", "{", "}", "{\"model\":}", "{\"model\":\"m\",}", "{'model':'m'}",
        "{\"model\":\"m\"} x", "{\"model\":\"m\"}{}", "nul", "{\"input\":\"x\" \"model\":\"m\"}",
        "{\"model\":\"m\",\"input\":\"\\uD800\"}", "{\"model\":\"m\",\"input\":\"\\x41\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        EXPECT_ERROR(bad[i], CV, NULL, "invalid_json");
    }
    const char *not_object[] = {"[]", "\"text\"", "42", "true", "null"};
    for (size_t i = 0; i < sizeof not_object / sizeof not_object[0]; i++) {
        EXPECT_ERROR(not_object[i], CV, NULL, "invalid_json");
    }
    // A NUL byte inside the body is not JSON.
    speech_args a;
    http_error e;
    const char body[] = "{\"model\":\"m\",\"input\":\"x\",\"voice\":\"v\"}\0garbage";
    CHECK_EQ_INT(speech_args_parse(body, sizeof body - 1, 4096, CV, &a, &e), 400);
    speech_args_free(&a);
    CHECK_EQ_INT(speech_args_parse(NULL, 0, 4096, CV, &a, &e), 400);
    speech_args_free(&a);
}

static void test_unknown_and_missing(void) {
    EXPECT_ERROR("{\"model\":\"m\",\"input\":\"x\",\"voice\":\"v\",\"foo\":1}", CV, "foo",
                 "unknown_parameter");
    EXPECT_ERROR("{\"foo\":null,\"model\":\"m\",\"input\":\"x\",\"voice\":\"v\"}", CV, "foo",
                 "unknown_parameter");
    // Names are case-sensitive; vLLM-Omni's stream / speaker_embedding are not taken.
    EXPECT_ERROR("{\"Model\":\"m\",\"input\":\"x\",\"voice\":\"v\"}", CV, "Model",
                 "unknown_parameter");
    EXPECT_ERROR("{\"model\":\"m\",\"input\":\"x\",\"voice\":\"v\",\"stream\":true}", CV,
                 "stream", "unknown_parameter");
    EXPECT_ERROR("{\"model\":\"m\",\"input\":\"x\",\"voice\":{\"id\":\"v\",\"name\":\"w\"}}", CV,
                 "voice", "unknown_parameter");
    EXPECT_ERROR("{\"model\":\"m\",\"input\":\"x\",\"voice\":{}}", CV, "voice",
                 "missing_required_parameter");
    EXPECT_ERROR("{\"input\":\"x\",\"voice\":\"v\"}", CV, "model", "missing_required_parameter");
    EXPECT_ERROR("{\"model\":null,\"input\":\"x\",\"voice\":\"v\"}", CV, "model",
                 "missing_required_parameter");
    EXPECT_ERROR("{\"model\":\"m\",\"voice\":\"v\"}", CV, "input", "missing_required_parameter");
    EXPECT_ERROR("{\"model\":\"m\",\"input\":\"x\"}", CV, "voice", "missing_required_parameter");
    EXPECT_ERROR("{}", CV, "model", "missing_required_parameter");
    // A name that is not UTF-8 is still refused (without echoing it).
    EXPECT_ERROR("{\"model\":\"m\",\"input\":\"x\",\"voice\":\"v\",\"\xff\":1}", CV, NULL,
                 "unknown_parameter");
    EXPECT_OK("{\"model\":\"\",\"input\":\"x\",\"voice\":\"v\"}", CV); // any string
}

/* Each field with values of the wrong JSON type. */
static void test_types(void) {
    static const struct {
        const char *field;
        const char *bad_values[4];
    } cases[] = {
        {"model", {"1", "true", "[\"m\"]", "{}"}},
        {"input", {"1", "false", "[]", "{\"text\":\"x\"}"}},
        {"voice", {"1", "true", "[\"v\"]", "{\"id\":1}"}},
        {"instructions", {"1", "true", "[]", "{}"}},
        {"response_format", {"1", "true", "[\"mp3\"]", "{}"}},
        {"speed", {"\"1\"", "true", "[1]", "{}"}},
        {"stream_format", {"1", "true", "[]", "{}"}},
        {"language", {"1", "true", "[]", "{}"}},
        {"task_type", {"1", "true", "[]", "{}"}},
        {"seed", {"\"1\"", "true", "1.5", "{}"}},
        {"temperature", {"\"0.5\"", "false", "[]", "{}"}},
        {"top_k", {"\"5\"", "true", "2.5", "[]"}},
        {"top_p", {"\"0.5\"", "true", "[]", "{}"}},
        {"repetition_penalty", {"\"1\"", "true", "[]", "{}"}},
        {"max_new_tokens", {"\"100\"", "true", "10.5", "{}"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int k = 0; k < 4; k++) {
            char body[256];
            const char *f = cases[i].field;
            snprintf(body, sizeof body, "{%s%s%s\"%s\":%s}",
                     strcmp(f, "model") ? "\"model\":\"m\"," : "",
                     strcmp(f, "input") ? "\"input\":\"x\"," : "",
                     strcmp(f, "voice") ? "\"voice\":\"v\"," : "", f, cases[i].bad_values[k]);
            EXPECT_ERROR(body, CV, f, "invalid_type");
        }
    }
    // Base-only fields' types, on a Base model.
    const char *base_types[][2] = {
        {"ref_audio", "1"}, {"ref_audio", "[]"}, {"ref_text", "true"}, {"ref_text", "{}"},
        {"x_vector_only_mode", "1"}, {"x_vector_only_mode", "\"true\""},
        {"x_vector_only_mode", "[]"},
    };
    for (size_t i = 0; i < sizeof base_types / sizeof base_types[0]; i++) {
        char body[256];
        snprintf(body, sizeof body, "{\"model\":\"m\",\"input\":\"x\",\"voice\":\"v\",\"%s\":%s}",
                 base_types[i][0], base_types[i][1]);
        EXPECT_ERROR(body, BASE, base_types[i][0], "invalid_type");
    }
}

/* A body with one extra member "field":value on a CustomVoice model. */
static void with_field(char *body, size_t n, const char *field, const char *value) {
    snprintf(body, n, "{\"model\":\"m\",\"input\":\"x\",\"voice\":\"v\",\"%s\":%s}", field,
             value);
}

static void test_ranges(void) {
    static const struct {
        const char *field;
        const char *good[4];
        const char *bad[4];
    } cases[] = {
        {"speed", {"0.25", "4", "1", "4.0"}, {"0.2499", "4.001", "0", "-1"}},
        {"temperature", {"0", "2", "0.001", "1"}, {"-0.1", "2.01", "1e400", "-1e400"}},
        {"top_p", {"1", "0.0001", "0.5", "1.0"}, {"0", "1.01", "-0.5", "2"}},
        {"repetition_penalty", {"2", "1", "0.5", "1e-3"}, {"0", "2.5", "-1", "100"}},
        {"top_k", {"-1", "0", "1", "2147483647"}, {"-2", "2147483648", "-100", "1e12"}},
        {"max_new_tokens", {"1", "2147483647", "4096", "1e3"}, {"0", "-1", "2147483648", "1e20"}},
        {"seed", {"0", "18446744073709549568", "1", "1e15"},
         {"-1", "18446744073709551616", "-0.5", "1e30"}},
        {"response_format", {"\"mp3\"", "\"pcm\"", "\"flac\"", "\"aac\""},
         {"\"MP3\"", "\"ogg\"", "\"\"", "\"wav \""}},
        {"stream_format", {"\"sse\"", "\"audio\"", "\"audio\"", "\"sse\""},
         {"\"SSE\"", "\"json\"", "\"\"", "\"events\""}},
        {"task_type", {"\"CustomVoice\"", "\"CustomVoice\"", "\"CustomVoice\"", "\"CustomVoice\""},
         {"\"customvoice\"", "\"TTS\"", "\"\"", "\"Clone\""}},
        {"voice", {"\"v\"", "{\"id\":\"v\"}", "\"Ryan\"", "\"a b\""}, {"\"\"", "{\"id\":\"\"}",
                                                                      "\"\"", "\"\""}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int k = 0; k < 4; k++) {
            char body[256];
            with_field(body, sizeof body, cases[i].field, cases[i].good[k]);
            EXPECT_OK(body, CV);
            with_field(body, sizeof body, cases[i].field, cases[i].bad[k]);
            // A fraction is a type error for an integer field, the rest value errors.
            bool fraction = strcmp(cases[i].bad[k], "-0.5") == 0 &&
                            strcmp(cases[i].field, "seed") == 0;
            EXPECT_ERROR(body, CV, cases[i].field, fraction ? "invalid_type" : "invalid_value");
        }
    }
    speech_args a;
    http_error e;
    char body[256];
    with_field(body, sizeof body, "top_k", "0");
    CHECK_EQ_INT(parse(body, CV, &a, &e), 0);
    CHECK_EQ_INT(a.top_k, -1); // 0 turns top-k off, as -1 does
    speech_args_free(&a);
    with_field(body, sizeof body, "seed", "18446744073709549568");
    CHECK_EQ_INT(parse(body, CV, &a, &e), 0);
    CHECK(a.has_seed && a.seed == 18446744073709549568ull);
    speech_args_free(&a);
    with_field(body, sizeof body, "seed", "0");
    CHECK_EQ_INT(parse(body, CV, &a, &e), 0);
    CHECK(a.has_seed && a.seed == 0);
    speech_args_free(&a);
}

/* A string of n copies of the UTF-8 character ch (malloc'ed). */
static char *repeat(const char *ch, size_t n) {
    size_t len = strlen(ch);
    char *s = malloc(len * n + 1);
    for (size_t i = 0; i < n; i++) {
        memcpy(s + i * len, ch, len);
    }
    s[len * n] = '\0';
    return s;
}

/* A request whose input (or instructions) is text (raw JSON string contents). */
static int parse_text(const char *field, const char *text, int max_chars, speech_args *a,
                      http_error *e) {
    size_t n = strlen(text) + 128;
    char *body = malloc(n);
    snprintf(body, n, "{\"model\":\"m\",\"voice\":\"v\",%s\"%s\":\"%s\"}",
             strcmp(field, "input") ? "\"input\":\"x\"," : "", field, text);
    memset(e, 0, sizeof *e);
    int rc = speech_args_parse(body, strlen(body), max_chars, CV, a, e);
    free(body);
    return rc;
}

static void test_input_length(void) {
    // Characters are code points: 1-, 2-, 3- and 4-byte ones count one each.
    const char *chars[] = {"a", "é", "語", "😀"};
    for (int i = 0; i < 4; i++) {
        speech_args a;
        http_error e;
        char *at_limit = repeat(chars[i], 4096);
        CHECK_EQ_INT(parse_text("input", at_limit, 4096, &a, &e), 0);
        CHECK_EQ_INT(a.input_chars, 4096);
        speech_args_free(&a);
        char *over = repeat(chars[i], 4097);
        CHECK_EQ_INT(parse_text("input", over, 4096, &a, &e), 400);
        CHECK(e.param && strcmp(e.param, "input") == 0);
        CHECK(e.code && strcmp(e.code, "string_above_max_length") == 0);
        speech_args_free(&a);
        // The limit is the server's setting.
        CHECK_EQ_INT(parse_text("input", over, 5000, &a, &e), 0);
        speech_args_free(&a);
        CHECK_EQ_INT(parse_text("input", at_limit, 100, &a, &e), 400);
        speech_args_free(&a);
        // instructions: 4096 characters whatever the server's input limit.
        CHECK_EQ_INT(parse_text("instructions", at_limit, 10, &a, &e), 0);
        speech_args_free(&a);
        CHECK_EQ_INT(parse_text("instructions", over, 100000, &a, &e), 400);
        CHECK(e.param && strcmp(e.param, "instructions") == 0);
        speech_args_free(&a);
        free(at_limit);
        free(over);
    }
    // Escapes count as the characters they stand for.
    speech_args a;
    http_error e;
    CHECK_EQ_INT(parse_text("input", "\\u00e9\\ud83d\\ude00\\n", 3, &a, &e), 0);
    CHECK_EQ_INT(a.input_chars, 3);
    speech_args_free(&a);
    CHECK_EQ_INT(parse_text("input", "\\u00e9\\ud83d\\ude00\\nx", 3, &a, &e), 400);
    speech_args_free(&a);
    EXPECT_ERROR("{\"model\":\"m\",\"input\":\"\",\"voice\":\"v\"}", CV, "input",
                 "invalid_value");
    EXPECT_ERROR("{\"model\":\"m\",\"input\":\" \\n\\t \",\"voice\":\"v\"}", CV, "input",
                 "invalid_value");
}

static void test_utf8(void) {
    static const struct {
        const char *bytes;
        long n_chars; // -1: invalid
    } cases[] = {
        {"", 0}, {"abc", 3}, {"\xc3\xa9", 1}, {"\xe2\x82\xac", 1}, {"\xf0\x9f\x98\x80", 1},
        {"\xf4\x8f\xbf\xbf", 1},                       // U+10FFFF
        {"\xed\x9f\xbf", 1},                           // U+D7FF
        {"\xee\x80\x80", 1},                           // U+E000
        {"\xc0\xaf", -1}, {"\xc1\xbf", -1},             // overlong 2-byte
        {"\xe0\x80\xaf", -1}, {"\xf0\x80\x80\xaf", -1}, // overlong 3- and 4-byte
        {"\xed\xa0\x80", -1}, {"\xed\xbf\xbf", -1},     // surrogates
        {"\xf4\x90\x80\x80", -1},                       // above U+10FFFF
        {"\xf8\x88\x80\x80\x80", -1}, {"\xff", -1}, {"\xfe", -1},
        {"\x80", -1}, {"a\xbf", -1},                    // lone continuation
        {"\xc3", -1}, {"\xe2\x82", -1}, {"\xf0\x9f\x98", -1}, // truncated
        {"\xc3\x28", -1}, {"\xe2\x28\xa1", -1},         // bad continuation
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *s = cases[i].bytes;
        long n = speech_utf8_chars(s, strlen(s));
        CHECK_MSG(n == cases[i].n_chars, "case %zu: %ld, expected %ld", i, n, cases[i].n_chars);
        if (cases[i].n_chars < 0) {
            // Raw invalid bytes in a JSON string: a 400 naming the field.
            speech_args a;
            http_error e;
            CHECK_EQ_INT(parse_text("input", s, 4096, &a, &e), 400);
            CHECK(e.param && strcmp(e.param, "input") == 0);
            speech_args_free(&a);
            CHECK_EQ_INT(parse_text("instructions", s, 4096, &a, &e), 400);
            CHECK(e.param && strcmp(e.param, "instructions") == 0);
            speech_args_free(&a);
        }
    }
    // Every string field is checked.
    const char *fields[] = {"model", "voice", "language"};
    for (int i = 0; i < 3; i++) {
        char body[160];
        snprintf(body, sizeof body, "{%s%s\"input\":\"x\",\"%s\":\"a\xc3\"}",
                 strcmp(fields[i], "model") ? "\"model\":\"m\"," : "",
                 strcmp(fields[i], "voice") ? "\"voice\":\"v\"," : "", fields[i]);
        EXPECT_ERROR(body, CV, fields[i], "invalid_value");
    }
}

static void test_tasks(void) {
    speech_args a;
    http_error e;
    // Inferred from the model.
    CHECK_EQ_INT(parse("{\"model\":\"m\",\"input\":\"x\",\"instructions\":\"A deep voice.\"}", VD,
                       &a, &e), 0);
    CHECK_EQ_INT(a.task, SPEECH_TASK_VOICE_DESIGN);
    CHECK(!a.voice);
    speech_args_free(&a);
    CHECK_EQ_INT(parse("{\"model\":\"m\",\"input\":\"x\",\"voice\":\"alloy\",\"instructions\":"
                       "\"A deep voice.\",\"task_type\":\"VoiceDesign\"}", VD, &a, &e), 0);
    CHECK_EQ_INT(a.task, SPEECH_TASK_VOICE_DESIGN); // voice ignored
    speech_args_free(&a);
    CHECK_EQ_INT(parse("{\"model\":\"m\",\"input\":\"x\",\"voice\":\"alice\"}", BASE, &a, &e), 0);
    CHECK_EQ_INT(a.task, SPEECH_TASK_BASE);
    speech_args_free(&a);
    EXPECT_OK("{\"model\":\"m\",\"input\":\"x\",\"voice\":\"v\",\"task_type\":\"Base\"}", BASE);
    // Refused when it differs from the model.
    const char *types[] = {CV, VD, BASE};
    const char *tasks[] = {"CustomVoice", "VoiceDesign", "Base"};
    for (int m = 0; m < 3; m++) {
        for (int t = 0; t < 3; t++) {
            if (m == t) {
                continue;
            }
            char body[200];
            snprintf(body, sizeof body, "{\"model\":\"m\",\"input\":\"x\",\"voice\":\"v\","
                     "\"instructions\":\"d\",\"task_type\":\"%s\"}", tasks[t]);
            EXPECT_ERROR(body, types[m], "task_type", "invalid_value");
        }
    }
    // A model that cannot speak.
    EXPECT_ERROR("{\"model\":\"m\",\"input\":\"x\",\"voice\":\"v\"}", "codec", NULL,
                 "model_not_supported");
    EXPECT_ERROR("{\"model\":\"m\",\"input\":\"x\",\"voice\":\"v\"}", NULL, NULL,
                 "model_not_supported");
}

static void test_task_fields(void) {
    // Base-only fields elsewhere.
    const char *base_only[][2] = {
        {"ref_audio", "\"data:audio/wav;base64,AAAA\""}, {"ref_text", "\"hello\""},
        {"x_vector_only_mode", "true"}, {"x_vector_only_mode", "false"},
    };
    for (int i = 0; i < 4; i++) {
        char body[200];
        snprintf(body, sizeof body, "{\"model\":\"m\",\"input\":\"x\",\"voice\":\"v\","
                 "\"instructions\":\"d\",\"%s\":%s}", base_only[i][0], base_only[i][1]);
        EXPECT_ERROR(body, CV, base_only[i][0], "invalid_value");
        EXPECT_ERROR(body, VD, base_only[i][0], "invalid_value");
    }
    // VoiceDesign needs a description.
    EXPECT_ERROR("{\"model\":\"m\",\"input\":\"x\",\"voice\":\"v\"}", VD, "instructions",
                 "missing_required_parameter");
    EXPECT_ERROR("{\"model\":\"m\",\"input\":\"x\",\"instructions\":\"\"}", VD, "instructions",
                 "missing_required_parameter");
    // Base: a voice source; ref_text with ref_audio unless x-vector only; no instructions.
    EXPECT_ERROR("{\"model\":\"m\",\"input\":\"x\"}", BASE, "voice",
                 "missing_required_parameter");
    EXPECT_ERROR("{\"model\":\"m\",\"input\":\"x\",\"ref_audio\":\"data:audio/wav;base64,AA==\"}",
                 BASE, "ref_text", "missing_required_parameter");
    EXPECT_ERROR("{\"model\":\"m\",\"input\":\"x\",\"ref_audio\":\"data:,\",\"ref_text\":\"\"}",
                 BASE, "ref_text", "missing_required_parameter");
    EXPECT_OK("{\"model\":\"m\",\"input\":\"x\",\"ref_audio\":\"data:,\",\"ref_text\":\"t\"}",
              BASE);
    EXPECT_OK("{\"model\":\"m\",\"input\":\"x\",\"ref_audio\":\"DATA:,\","
              "\"x_vector_only_mode\":true}", BASE);
    EXPECT_ERROR("{\"model\":\"m\",\"input\":\"x\",\"voice\":\"v\",\"instructions\":\"calm\"}",
                 BASE, "instructions", "invalid_value");
    EXPECT_OK("{\"model\":\"m\",\"input\":\"x\",\"voice\":\"v\",\"instructions\":\"\"}", BASE);
    // ref_audio is a data: URI, never a URL or a file.
    const char *not_data[] = {"http://example.com/a.wav", "file:///etc/passwd", "/tmp/a.wav",
                              "", "dat:,", "UklGRg=="};
    for (int i = 0; i < 6; i++) {
        char body[200];
        snprintf(body, sizeof body, "{\"model\":\"m\",\"input\":\"x\",\"ref_audio\":\"%s\","
                 "\"ref_text\":\"t\"}", not_data[i]);
        EXPECT_ERROR(body, BASE, "ref_audio", "invalid_value");
    }
    // CustomVoice takes instructions (the style); VoiceDesign ignores voice.
    EXPECT_OK("{\"model\":\"m\",\"input\":\"x\",\"voice\":\"v\",\"instructions\":\"Slowly.\"}",
              CV);
}

/* The param of the library's refusal msg of the request body for model_type. */
static void expect_refusal(const char *body, const char *model_type, const char *msg,
                           const char *param, int line) {
    speech_args a;
    http_error e;
    int rc = parse(body, model_type, &a, &e);
    const char *got = rc == 0 ? speech_refusal_param(&a, msg) : "(body refused)";
    CHECK_MSG((got == NULL && param == NULL) || (got && param && strcmp(got, param) == 0),
              "line %d: '%s' -> %s (want %s)", line, msg, got ? got : "NULL",
              param ? param : "NULL");
    speech_args_free(&a);
}
#define EXPECT_REFUSAL(body, type, msg, param) expect_refusal(body, type, msg, param, __LINE__)

/* Library refusals (their messages as src/synth/request.c words them) name the request
 * field they concern, only among the fields the request passed. */
static void test_refusal_param(void) {
#define REQ(extra) "{\"model\":\"m\",\"input\":\"Hi.\",\"voice\":\"ryan\"" extra "}"
    EXPECT_REFUSAL(REQ(",\"top_k\":100000"), CV, "top_k 100000 out of range [-1, 3072]",
                   "top_k");
    EXPECT_REFUSAL(REQ(), CV, "top_k 100000 out of range [-1, 3072]", NULL); // the default
    EXPECT_REFUSAL(REQ(",\"top_k\":5"), CV, "cp_top_k 5000 out of range [-1, 2048]", NULL);
    EXPECT_REFUSAL(REQ(",\"top_p\":0.5"), CV, "top_p 2 out of range (0, 1]", "top_p");
    EXPECT_REFUSAL(REQ(",\"temperature\":0.5"), CV, "temperature 0.5 out of range (0, 100]",
                   "temperature");
    EXPECT_REFUSAL(REQ(",\"repetition_penalty\":1.5"), CV,
                   "repetition_penalty 1.5 out of range (0, 100]", "repetition_penalty");
    EXPECT_REFUSAL(REQ(",\"max_new_tokens\":5"), CV,
                   "frames 0 / max_frames 5 must be >= 0, first_chunk_frames 1 in [1, 1024]",
                   "max_new_tokens");
    EXPECT_REFUSAL(REQ(",\"language\":\"klingon\""), CV,
                   "unknown language 'klingon'; auto or one of: chinese, english", "language");
    EXPECT_REFUSAL(REQ(), CV, "unknown speaker 'bob'; one of: ryan, vivian", "voice");
    EXPECT_REFUSAL(REQ(), CV, "the text gives no tokens to speak", "input");
    EXPECT_REFUSAL(REQ(",\"instructions\":\"Slowly.\""), CV,
                   "the utterance's prompt has 9000 tokens (text 10, instruction 8990)", "input");
    EXPECT_REFUSAL(REQ(",\"instructions\":\"Slowly.\""), CV,
                   "this model takes no instruction", "instructions");
    EXPECT_REFUSAL(REQ(), BASE, "the voice's x-vector has 3 values, this model's speaker slot 8",
                   "voice");
    EXPECT_REFUSAL("{\"model\":\"m\",\"input\":\"Hi.\",\"ref_audio\":\"data:;base64,AA==\","
                   "\"x_vector_only_mode\":true}", BASE,
                   "the voice's x-vector is not finite at 2", "ref_audio");
    EXPECT_REFUSAL(REQ(), CV, "out of memory", NULL);
    speech_args a;
    http_error e;
    CHECK(parse(REQ(), CV, &a, &e) == 0 && speech_refusal_param(&a, NULL) == NULL &&
          speech_refusal_param(NULL, "top_k") == NULL && speech_refusal_param(&a, "") == NULL);
    speech_args_free(&a);
#undef REQ
}

int main(void) {
    test_defaults();
    test_all_fields();
    test_null_and_duplicates();
    test_malformed();
    test_unknown_and_missing();
    test_types();
    test_ranges();
    test_input_length();
    test_utf8();
    test_tasks();
    test_task_fields();
    test_refusal_param();
    return test_main_result("test_speech_args");
}
