/*
 * speech_args.c - POST /v1/audio/speech's JSON body -> speech_args (speech_args.h).
 *
 * Data flow: cJSON parses the body; one pass over the object's members finds each known
 * field's last occurrence (an unknown name stops there with a 400 naming it); then each
 * field's reader checks its JSON type and value into the struct, in the table's order;
 * last, the cross-field rules (required fields, task_type against the model, the fields
 * only one task takes) run on the whole. Every failure fills an OpenAI error envelope
 * with the field as param.
 */
#include "speech_args.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "json_parse.h"

enum field {
    F_MODEL, F_INPUT, F_VOICE, F_INSTRUCTIONS, F_RESPONSE_FORMAT, F_SPEED, F_STREAM_FORMAT,
    F_LANGUAGE, F_TASK_TYPE, F_REF_AUDIO, F_REF_TEXT, F_X_VECTOR_ONLY, F_SEED, F_TEMPERATURE,
    F_TOP_K, F_TOP_P, F_REPETITION_PENALTY, F_MAX_NEW_TOKENS, F_COUNT
};

typedef struct parse_ctx {
    speech_args *a;
    const cJSON *items[F_COUNT]; // each field's last occurrence; NULL or JSON null: absent
    bool task_given;
    int max_input_chars;
} parse_ctx;

typedef int (*field_reader)(parse_ctx *c, const cJSON *item, const char *name, http_error *e);

static int arg_error(http_error *e, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int arg_error(http_error *e, const char *param, const char *code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    http_error_vset(e, 400, "invalid_request_error", param, code, fmt, ap);
    va_end(ap);
    return 400;
}

/* Length of the UTF-8 sequence starting at s[0..n) (1-4), or 0 if it is not valid. */
static size_t utf8_seq_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3
               : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || len > n) {
        return 0;
    }
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            return 0;
        }
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000}; // shortest forms only
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        return 0;
    }
    return len;
}

long speech_utf8_chars(const char *s, size_t n_bytes) {
    const unsigned char *p = (const unsigned char *)s;
    long n_chars = 0;
    for (size_t i = 0; i < n_bytes; n_chars++) {
        size_t len = utf8_seq_len(p + i, n_bytes - i);
        if (len == 0) {
            return -1;
        }
        i += len;
    }
    return n_chars;
}

static const char *json_type_name(const cJSON *item) {
    return cJSON_IsString(item) ? "a string" : cJSON_IsNumber(item) ? "a number"
         : cJSON_IsBool(item) ? "a boolean" : cJSON_IsArray(item) ? "an array"
         : cJSON_IsObject(item) ? "an object" : "null";
}

static int type_error(http_error *e, const char *name, const cJSON *item, const char *want) {
    return arg_error(e, name, "invalid_type", "Invalid type for '%s': expected %s, but got %s.",
                     name, want, json_type_name(item));
}

/* A string field into *out, checked to be valid UTF-8 of at most max_chars characters
 * (0: no limit); *n_chars gets its length when not NULL. */
static int read_string(const cJSON *item, const char *name, size_t max_chars, const char **out,
                       size_t *n_chars, http_error *e) {
    if (!cJSON_IsString(item)) {
        return type_error(e, name, item, "a string");
    }
    const char *s = item->valuestring;
    long n = speech_utf8_chars(s, strlen(s));
    if (n < 0) {
        return arg_error(e, name, "invalid_value", "'%s' is not valid UTF-8.", name);
    }
    if (max_chars > 0 && (size_t)n > max_chars) {
        return arg_error(e, name, "string_above_max_length",
                         "'%s' is too long: %ld characters, the maximum is %zu.", name, n,
                         max_chars);
    }
    *out = s;
    if (n_chars) {
        *n_chars = (size_t)n;
    }
    return 0;
}

/* A number field in [lo, hi] (lo excluded when lo_open) into *out. */
static int read_number(const cJSON *item, const char *name, double lo, bool lo_open, double hi,
                       double *out, http_error *e) {
    if (!cJSON_IsNumber(item)) {
        return type_error(e, name, item, "a number");
    }
    double v = item->valuedouble;
    if (!isfinite(v) || v > hi || v < lo || (lo_open && v == lo)) {
        return arg_error(e, name, "invalid_value", "'%s' must be in %c%g, %g]; got %g.", name,
                         lo_open ? '(' : '[', lo, hi, v);
    }
    *out = v;
    return 0;
}

/* An integer field (a JSON number without fraction) in [lo, hi] into *out. */
static int read_integer(const cJSON *item, const char *name, double lo, double hi, double *out,
                        http_error *e) {
    if (!cJSON_IsNumber(item)) {
        return type_error(e, name, item, "an integer");
    }
    if (floor(item->valuedouble) != item->valuedouble) {
        return arg_error(e, name, "invalid_type",
                         "Invalid type for '%s': expected an integer, but got %g.", name,
                         item->valuedouble);
    }
    double v = item->valuedouble;
    if (v < lo || v > hi) {
        return arg_error(e, name, "invalid_value", "'%s' must be in [%.0f, %.0f]; got %.0f.",
                         name, lo, hi, v);
    }
    *out = v;
    return 0;
}

/* ---- field readers (the item is present and not null) ---------------------- */

static int rd_model(parse_ctx *c, const cJSON *item, const char *name, http_error *e) {
    return read_string(item, name, 0, &c->a->model, NULL, e);
}

static int rd_input(parse_ctx *c, const cJSON *item, const char *name, http_error *e) {
    int rc = read_string(item, name, (size_t)c->max_input_chars, &c->a->input,
                         &c->a->input_chars, e);
    if (rc != 0) {
        return rc;
    }
    if (c->a->input[strspn(c->a->input, " \t\r\n\f\v")] == '\0') {
        return arg_error(e, name, "invalid_value", "'input' is empty.");
    }
    return 0;
}

static int rd_voice(parse_ctx *c, const cJSON *item, const char *name, http_error *e) {
    const cJSON *id = item;
    if (cJSON_IsObject(item)) {
        id = NULL;
        for (const cJSON *m = item->child; m; m = m->next) {
            if (strcmp(m->string, "id") != 0) {
                return arg_error(e, name, "unknown_parameter",
                                 "Unknown parameter in 'voice': only 'id' is accepted.");
            }
            id = m;
        }
        if (!id) {
            return arg_error(e, name, "missing_required_parameter",
                             "Missing required parameter: 'voice.id'.");
        }
    } else if (!cJSON_IsString(item)) {
        return type_error(e, name, item, "a string or an object {\"id\": ...}");
    }
    if (!cJSON_IsString(id)) {
        return type_error(e, name, id, "a string as 'voice.id'");
    }
    int rc = read_string(id, name, 0, &c->a->voice, NULL, e);
    if (rc == 0 && c->a->voice[0] == '\0') {
        return arg_error(e, name, "invalid_value", "'voice' is empty.");
    }
    return rc;
}

static int rd_instructions(parse_ctx *c, const cJSON *item, const char *name, http_error *e) {
    return read_string(item, name, SPEECH_MAX_INSTRUCTIONS_CHARS, &c->a->instructions, NULL, e);
}

/* A string field that must be one of names[n] into *out (the static name). */
static int read_enum(const cJSON *item, const char *name, const char *const *names, size_t n,
                     const char **out, http_error *e) {
    if (!cJSON_IsString(item)) {
        return type_error(e, name, item, "a string");
    }
    char list[128] = "";
    for (size_t i = 0; i < n; i++) {
        if (strcmp(item->valuestring, names[i]) == 0) {
            *out = names[i];
            return 0;
        }
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s'%s'", i ? ", " : "",
                 names[i]);
    }
    return arg_error(e, name, "invalid_value", "Invalid value for '%s': expected one of %s.",
                     name, list);
}

static int rd_response_format(parse_ctx *c, const cJSON *item, const char *name,
                              http_error *e) {
    static const char *const formats[] = {"mp3", "opus", "aac", "flac", "wav", "pcm"};
    return read_enum(item, name, formats, 6, &c->a->response_format, e);
}

static int rd_speed(parse_ctx *c, const cJSON *item, const char *name, http_error *e) {
    double v = 0;
    int rc = read_number(item, name, 0.25, false, 4.0, &v, e);
    c->a->speed = (float)v;
    return rc;
}

static int rd_stream_format(parse_ctx *c, const cJSON *item, const char *name, http_error *e) {
    static const char *const formats[] = {"audio", "sse"};
    const char *f = NULL;
    int rc = read_enum(item, name, formats, 2, &f, e);
    c->a->sse = rc == 0 && strcmp(f, "sse") == 0;
    return rc;
}

static int rd_language(parse_ctx *c, const cJSON *item, const char *name, http_error *e) {
    return read_string(item, name, 64, &c->a->language, NULL, e);
}

static int rd_task_type(parse_ctx *c, const cJSON *item, const char *name, http_error *e) {
    static const char *const tasks[] = {"CustomVoice", "VoiceDesign", "Base"};
    const char *t = NULL;
    int rc = read_enum(item, name, tasks, 3, &t, e);
    if (rc == 0) {
        c->a->task = t == tasks[0] ? SPEECH_TASK_CUSTOM_VOICE
                   : t == tasks[1] ? SPEECH_TASK_VOICE_DESIGN : SPEECH_TASK_BASE;
        c->task_given = true;
    }
    return rc;
}

static int rd_ref_audio(parse_ctx *c, const cJSON *item, const char *name, http_error *e) {
    int rc = read_string(item, name, 0, &c->a->ref_audio, NULL, e);
    if (rc == 0 && strncasecmp(c->a->ref_audio, "data:", 5) != 0) {
        return arg_error(e, name, "invalid_value",
                         "'ref_audio' must be a data: URI with base64 audio "
                         "(data:audio/wav;base64,...); URLs and files are not fetched.");
    }
    return rc;
}

static int rd_ref_text(parse_ctx *c, const cJSON *item, const char *name, http_error *e) {
    return read_string(item, name, 0, &c->a->ref_text, NULL, e);
}

static int rd_x_vector_only(parse_ctx *c, const cJSON *item, const char *name, http_error *e) {
    if (!cJSON_IsBool(item)) {
        return type_error(e, name, item, "a boolean");
    }
    c->a->x_vector_only = cJSON_IsTrue(item);
    return 0;
}

static int rd_seed(parse_ctx *c, const cJSON *item, const char *name, http_error *e) {
    double v = 0;
    // 2^64 itself is out: the largest double below it converts to uint64_t exactly.
    int rc = read_integer(item, name, 0, 18446744073709549568.0, &v, e);
    c->a->has_seed = rc == 0;
    c->a->seed = rc == 0 ? (uint64_t)v : 0;
    return rc;
}

static int rd_temperature(parse_ctx *c, const cJSON *item, const char *name, http_error *e) {
    double v = 0;
    int rc = read_number(item, name, 0.0, false, 2.0, &v, e);
    c->a->greedy = rc == 0 && v == 0.0;
    c->a->temperature = c->a->greedy ? 0.0f : (float)v;
    return rc;
}

static int rd_top_k(parse_ctx *c, const cJSON *item, const char *name, http_error *e) {
    double v = 0;
    int rc = read_integer(item, name, -1, INT32_MAX, &v, e);
    c->a->top_k = v <= 0 ? -1 : (int32_t)v; // 0 and -1 both mean "off", as in vLLM
    return rc;
}

static int rd_top_p(parse_ctx *c, const cJSON *item, const char *name, http_error *e) {
    double v = 0;
    int rc = read_number(item, name, 0.0, true, 1.0, &v, e);
    c->a->top_p = (float)v;
    return rc;
}

static int rd_repetition_penalty(parse_ctx *c, const cJSON *item, const char *name,
                                 http_error *e) {
    double v = 0;
    int rc = read_number(item, name, 0.0, true, 2.0, &v, e);
    c->a->repetition_penalty = (float)v;
    return rc;
}

static int rd_max_new_tokens(parse_ctx *c, const cJSON *item, const char *name, http_error *e) {
    double v = 0;
    int rc = read_integer(item, name, 1, INT32_MAX, &v, e);
    c->a->max_frames = (int32_t)v;
    return rc;
}

static const struct {
    const char *name;
    field_reader read;
} fields[F_COUNT] = {
    [F_MODEL] = {"model", rd_model},
    [F_INPUT] = {"input", rd_input},
    [F_VOICE] = {"voice", rd_voice},
    [F_INSTRUCTIONS] = {"instructions", rd_instructions},
    [F_RESPONSE_FORMAT] = {"response_format", rd_response_format},
    [F_SPEED] = {"speed", rd_speed},
    [F_STREAM_FORMAT] = {"stream_format", rd_stream_format},
    [F_LANGUAGE] = {"language", rd_language},
    [F_TASK_TYPE] = {"task_type", rd_task_type},
    [F_REF_AUDIO] = {"ref_audio", rd_ref_audio},
    [F_REF_TEXT] = {"ref_text", rd_ref_text},
    [F_X_VECTOR_ONLY] = {"x_vector_only_mode", rd_x_vector_only},
    [F_SEED] = {"seed", rd_seed},
    [F_TEMPERATURE] = {"temperature", rd_temperature},
    [F_TOP_K] = {"top_k", rd_top_k},
    [F_TOP_P] = {"top_p", rd_top_p},
    [F_REPETITION_PENALTY] = {"repetition_penalty", rd_repetition_penalty},
    [F_MAX_NEW_TOKENS] = {"max_new_tokens", rd_max_new_tokens},
};

/* ---- the whole request ------------------------------------------------------- */

/* Finds each member's field (the last occurrence wins); an unknown name is a 400. */
static int collect_fields(parse_ctx *c, const cJSON *root, http_error *e) {
    for (const cJSON *m = root->child; m; m = m->next) {
        int f = 0;
        while (f < F_COUNT && strcmp(fields[f].name, m->string) != 0) {
            f++;
        }
        if (f == F_COUNT) {
            if (speech_utf8_chars(m->string, strlen(m->string)) < 0) {
                return arg_error(e, NULL, "unknown_parameter",
                                 "Unknown parameter (its name is not valid UTF-8).");
            }
            return arg_error(e, m->string, "unknown_parameter", "Unknown parameter: '%.100s'.",
                             m->string);
        }
        c->items[f] = m;
    }
    return 0;
}

static speech_task task_of_model(const char *model_type) {
    if (!model_type) {
        return 0;
    }
    return strcmp(model_type, "custom_voice") == 0 ? SPEECH_TASK_CUSTOM_VOICE
         : strcmp(model_type, "voice_design") == 0 ? SPEECH_TASK_VOICE_DESIGN
         : strcmp(model_type, "base") == 0 ? SPEECH_TASK_BASE : 0;
}

static const char *task_name(speech_task t) {
    return t == SPEECH_TASK_CUSTOM_VOICE ? "CustomVoice"
         : t == SPEECH_TASK_VOICE_DESIGN ? "VoiceDesign" : "Base";
}

/* task_type against the loaded model: absent takes the model's, another one is a 400. */
static int check_task(parse_ctx *c, const char *model_type, http_error *e) {
    speech_task model_task = task_of_model(model_type);
    if (!model_task) {
        return arg_error(e, NULL, "model_not_supported",
                         "The loaded model (%s) cannot synthesize speech.",
                         model_type ? model_type : "unknown");
    }
    if (c->task_given && c->a->task != model_task) {
        return arg_error(e, "task_type", "invalid_value",
                         "The loaded model is a %s model: task_type '%s' needs a %s model.",
                         task_name(model_task), task_name(c->a->task), task_name(c->a->task));
    }
    c->a->task = model_task;
    return 0;
}

/* The fields each task requires or refuses. */
static int check_task_fields(parse_ctx *c, http_error *e) {
    const speech_args *a = c->a;
    if (a->task != SPEECH_TASK_BASE) {
        static const enum field base_only[] = {F_REF_AUDIO, F_REF_TEXT, F_X_VECTOR_ONLY};
        for (size_t i = 0; i < 3; i++) {
            const cJSON *it = c->items[base_only[i]];
            if (it && !cJSON_IsNull(it)) {
                const char *name = fields[base_only[i]].name;
                return arg_error(e, name, "invalid_value",
                                 "'%s' is only valid for task_type Base (voice cloning); the "
                                 "loaded model is a %s model.", name, task_name(a->task));
            }
        }
    }
    switch (a->task) {
    case SPEECH_TASK_CUSTOM_VOICE:
        if (!a->voice) {
            return arg_error(e, "voice", "missing_required_parameter",
                             "Missing required parameter: 'voice'.");
        }
        return 0;
    case SPEECH_TASK_VOICE_DESIGN:
        if (!a->instructions || a->instructions[0] == '\0') {
            return arg_error(e, "instructions", "missing_required_parameter",
                             "VoiceDesign needs 'instructions': the description of the voice.");
        }
        return 0;
    case SPEECH_TASK_BASE:
        if (a->instructions && a->instructions[0]) {
            return arg_error(e, "instructions", "invalid_value",
                             "'instructions' are not supported by a Base (voice cloning) model.");
        }
        if (!a->ref_audio && !a->voice) {
            return arg_error(e, "voice", "missing_required_parameter",
                             "Missing required parameter: 'voice' (an uploaded voice) or "
                             "'ref_audio'.");
        }
        if (a->ref_audio && !a->x_vector_only && (!a->ref_text || !a->ref_text[0])) {
            return arg_error(e, "ref_text", "missing_required_parameter",
                             "'ref_audio' needs 'ref_text' (its transcript) unless "
                             "'x_vector_only_mode' is true.");
        }
        return 0;
    }
    return 0;
}

static int parse_fields(parse_ctx *c, const cJSON *root, const char *model_type, http_error *e) {
    int rc = collect_fields(c, root, e);
    for (int f = 0; rc == 0 && f < F_COUNT; f++) {
        const cJSON *it = c->items[f];
        if (it && !cJSON_IsNull(it)) {
            rc = fields[f].read(c, it, fields[f].name, e);
        }
    }
    if (rc == 0 && !c->a->model) {
        rc = arg_error(e, "model", "missing_required_parameter",
                       "Missing required parameter: 'model'.");
    }
    if (rc == 0 && !c->a->input) {
        rc = arg_error(e, "input", "missing_required_parameter",
                       "Missing required parameter: 'input'.");
    }
    if (rc == 0) {
        rc = check_task(c, model_type, e);
    }
    return rc == 0 ? check_task_fields(c, e) : rc;
}

int speech_args_parse(const char *body, size_t n_bytes, int max_input_chars,
                      const char *model_type, speech_args *out, http_error *e) {
    *out = (speech_args){.response_format = "mp3", .speed = 1.0f};
    const char *end = NULL;
    cJSON *root = body ? json_parse(body, n_bytes, &end, false) : NULL;
    out->doc = root;
    if (root) {
        end += strspn(end, " \t\r\n"); // JSON allows whitespace after the value
    }
    if (!root || end != body + n_bytes) {
        return arg_error(e, NULL, "invalid_json",
                         "We could not parse the JSON body of your request: it is not valid "
                         "JSON.");
    }
    if (!cJSON_IsObject(root)) {
        return arg_error(e, NULL, "invalid_json",
                         "The request body must be a JSON object, not %s.",
                         json_type_name(root));
    }
    parse_ctx c = {.a = out, .max_input_chars = max_input_chars > 0 ? max_input_chars : 0};
    return parse_fields(&c, root, model_type, e);
}

void speech_args_free(speech_args *a) {
    if (a) {
        cJSON_Delete(a->doc);
        a->doc = NULL;
    }
}
