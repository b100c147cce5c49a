/*
 * config.c - config.json of a Qwen3-TTS checkpoint -> kz_tts_config.
 *
 * Flow: text (read from the file by the *_load functions through kz_json_load, or given by
 * the caller, e.g. from GGUF metadata) -> parse JSON (io/json.c) -> from the parsed root
 * (one function for both ways in): model_type; top-level ids;
 * talker_config with its name tables (codec_language_id, spk_id whose values
 * may be an int or a one-element list, spk_is_dialect whose values are a
 * dialect name or false); the nested code_predictor_config;
 * speaker_encoder_config. Then cross-field checks: every id against the table
 * it indexes (defaults included: the class defaults of the codec ids lie
 * outside the default vocabulary), derived sizes, the architecture switches
 * the engine does not implement.
 * generation_config.json is a flat list of sampling defaults over fallbacks.
 */
#include "model/config.h"

#include <stdio.h>
#include <string.h>

#include "io/json.h"
#include "io/regular_file.h"
#include "runtime/error.h"

static void copy_str(char *dst, size_t n, const char *src) {
    snprintf(dst, n, "%s", src ? src : "");
}

/* The switches of a Qwen3 stack the engine does not implement: another activation,
 * attention biases, sliding windows, a RoPE variant other than the default (the
 * talker's M-RoPE sections are plain RoPE in TTS, where all position rows agree). */
static void check_arch(kz_json_ctx *j, const cJSON *o) {
    const char *act = kz_json_str(j, o, "hidden_act", "silu");
    bool bias = kz_json_bool(j, o, "attention_bias", false);
    bool window = kz_json_bool(j, o, "use_sliding_window", false);
    const cJSON *rope = kz_json_obj(j, o, "rope_scaling");
    const char *type = kz_json_str(j, rope, "rope_type", kz_json_str(j, rope, "type", "default"));
    const char *what = strcmp(act, "silu") != 0            ? "hidden_act (only silu)"
                       : bias                              ? "attention_bias (only false)"
                       : window                            ? "use_sliding_window (only false)"
                       : strcmp(type, "default") != 0      ? "rope_scaling.rope_type (only default)"
                                                           : NULL;
    if (what && j->status == KZ_OK) {
        j->status = kz_error_set(KZ_STATUS_UNSUPPORTED, "%s: %s.%s is not supported", j->path,
                                 j->scope, what);
    }
}

static void read_cp(kz_json_ctx *j, const cJSON *o, kz_code_predictor_config *c) {
    c->vocab_size = (int32_t)kz_json_int(j, o, "vocab_size", 2048, 1, 1 << 20);
    c->hidden_size = (int32_t)kz_json_int(j, o, "hidden_size", 1024, 1, 1 << 16);
    c->intermediate_size = (int32_t)kz_json_int(j, o, "intermediate_size", 3072, 1, 1 << 20);
    c->num_hidden_layers = (int32_t)kz_json_int(j, o, "num_hidden_layers", 5, 1, 256);
    c->num_attention_heads = (int32_t)kz_json_int(j, o, "num_attention_heads", 16, 1, 1024);
    // The class default is 8; an explicit null means one KV head per attention head.
    const cJSON *kv = o ? cJSON_GetObjectItemCaseSensitive(o, "num_key_value_heads") : NULL;
    c->num_key_value_heads = (int32_t)kz_json_int(j, o, "num_key_value_heads",
                                                  cJSON_IsNull(kv) ? c->num_attention_heads : 8,
                                                  1, 1024);
    c->head_dim = (int32_t)kz_json_int(j, o, "head_dim", 128, 2, 4096);
    c->max_position_embeddings =
        (int32_t)kz_json_int(j, o, "max_position_embeddings", 32768, 1, 1 << 30);
    c->num_code_groups = (int32_t)kz_json_int(j, o, "num_code_groups", 32, 2, 64);
    c->rms_norm_eps = (float)kz_json_num(j, o, "rms_norm_eps", 1e-6, 0.0, 1.0);
    c->rope_theta = (float)kz_json_num(j, o, "rope_theta", 10000.0, 1.0, 1e12);
    check_arch(j, o);
}

/* Reads a {name: id} table; ids may be written as n or [n]. */
static int read_name_ids(kz_json_ctx *j, const cJSON *table, const char *key, kz_name_id *out,
                         int32_t vocab) {
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, table) {
        const cJSON *v = cJSON_IsArray(e) && cJSON_GetArraySize(e) == 1 ? e->child : e;
        if (n == KZ_MAX_NAMES || !cJSON_IsNumber(v) || v->valuedouble < 0 ||
            v->valuedouble >= vocab || v->valuedouble != (double)(int32_t)v->valuedouble ||
            strlen(e->string) >= KZ_NAME_LEN) {
            if (j->status == KZ_OK) {
                j->status = kz_error_set(KZ_STATUS_BAD_MODEL,
                                         "%s: talker_config.%s.%s: expected a codec id in [0, %d) "
                                         "(and at most %d names of < %d bytes)",
                                         j->path, key, e->string, vocab, KZ_MAX_NAMES, KZ_NAME_LEN);
            }
            return n;
        }
        copy_str(out[n].name, sizeof out[n].name, e->string);
        out[n].id = (int32_t)v->valuedouble;
        n++;
    }
    return n;
}

/* A speaker's dialect: a language name, or false / null for none. Any other value the
 * official code would look up as a language and fail on, so it is refused here. */
static void read_dialects(kz_json_ctx *j, const cJSON *table, kz_talker_config *t) {
    for (int i = 0; i < t->n_speakers; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(table, t->speakers[i].name);
        if (cJSON_IsString(v)) {
            copy_str(t->speakers[i].dialect, sizeof t->speakers[i].dialect, v->valuestring);
        } else if (v && !cJSON_IsFalse(v) && !cJSON_IsNull(v) && j->status == KZ_OK) {
            j->status = kz_error_set(KZ_STATUS_BAD_MODEL,
                                     "%s: talker_config.spk_is_dialect.%s: expected a language "
                                     "name or false", j->path, t->speakers[i].name);
        }
    }
}

static void read_talker_ids(kz_json_ctx *j, const cJSON *o, kz_talker_config *t) {
    int64_t hi = t->vocab_size - 1;
    t->codec_eos_token_id = (int32_t)kz_json_int(j, o, "codec_eos_token_id", 4198, 0, hi);
    t->codec_think_id = (int32_t)kz_json_int(j, o, "codec_think_id", 4202, 0, hi);
    t->codec_nothink_id = (int32_t)kz_json_int(j, o, "codec_nothink_id", 4203, 0, hi);
    t->codec_think_bos_id = (int32_t)kz_json_int(j, o, "codec_think_bos_id", 4204, 0, hi);
    t->codec_think_eos_id = (int32_t)kz_json_int(j, o, "codec_think_eos_id", 4205, 0, hi);
    t->codec_pad_id = (int32_t)kz_json_int(j, o, "codec_pad_id", 4196, 0, hi);
    t->codec_bos_id = (int32_t)kz_json_int(j, o, "codec_bos_id", 4197, 0, hi);
}

static void read_talker(kz_json_ctx *j, const cJSON *o, kz_talker_config *t) {
    // More than the control ids the official generate suppresses (config.h).
    t->vocab_size =
        (int32_t)kz_json_int(j, o, "vocab_size", 3072, KZ_TALKER_CONTROL_IDS + 1, 1 << 20);
    t->hidden_size = (int32_t)kz_json_int(j, o, "hidden_size", 1024, 1, 1 << 16);
    t->intermediate_size = (int32_t)kz_json_int(j, o, "intermediate_size", 2048, 1, 1 << 20);
    t->num_hidden_layers = (int32_t)kz_json_int(j, o, "num_hidden_layers", 20, 1, 256);
    t->num_attention_heads = (int32_t)kz_json_int(j, o, "num_attention_heads", 16, 1, 1024);
    t->num_key_value_heads = (int32_t)kz_json_int(j, o, "num_key_value_heads", 2, 1, 1024);
    t->head_dim = (int32_t)kz_json_int(j, o, "head_dim",
                                       t->hidden_size / t->num_attention_heads, 2, 4096);
    t->max_position_embeddings =
        (int32_t)kz_json_int(j, o, "max_position_embeddings", 32768, 1, 1 << 30);
    t->num_code_groups = (int32_t)kz_json_int(j, o, "num_code_groups", 32, 2, 64);
    t->text_hidden_size = (int32_t)kz_json_int(j, o, "text_hidden_size", 2048, 1, 1 << 16);
    t->text_vocab_size = (int32_t)kz_json_int_req(j, o, "text_vocab_size", 1, 1 << 24);
    t->rms_norm_eps = (float)kz_json_num(j, o, "rms_norm_eps", 1e-6, 0.0, 1.0);
    t->rope_theta = (float)kz_json_num(j, o, "rope_theta", 10000.0, 1.0, 1e12);
    t->first_control_id = t->vocab_size - KZ_TALKER_CONTROL_IDS;
    check_arch(j, o);
    read_talker_ids(j, o, t);
    const cJSON *langs = kz_json_obj(j, o, "codec_language_id");
    t->n_languages = langs ? read_name_ids(j, langs, "codec_language_id", t->languages,
                                           t->vocab_size)
                           : 0;
    const cJSON *spk = kz_json_obj(j, o, "spk_id");
    t->n_speakers = spk ? read_name_ids(j, spk, "spk_id", t->speakers, t->vocab_size) : 0;
    const cJSON *dialect = kz_json_obj(j, o, "spk_is_dialect");
    if (dialect) {
        read_dialects(j, dialect, t);
    }
    const char *scope = j->scope;
    j->scope = "talker_config.code_predictor_config";
    read_cp(j, kz_json_obj(j, o, "code_predictor_config"), &t->code_predictor);
    j->scope = scope;
}

static void read_top(kz_json_ctx *j, const cJSON *root, kz_tts_config *c) {
    copy_str(c->tts_model_type, sizeof c->tts_model_type,
             kz_json_str(j, root, "tts_model_type", ""));
    copy_str(c->tts_model_size, sizeof c->tts_model_size,
             kz_json_str(j, root, "tts_model_size", ""));
    copy_str(c->tokenizer_type, sizeof c->tokenizer_type,
             kz_json_str(j, root, "tokenizer_type", ""));
    c->im_start_token_id = (int32_t)kz_json_int(j, root, "im_start_token_id", 151644, 0, 1 << 24);
    c->im_end_token_id = (int32_t)kz_json_int(j, root, "im_end_token_id", 151645, 0, 1 << 24);
    c->tts_pad_token_id = (int32_t)kz_json_int(j, root, "tts_pad_token_id", 151671, 0, 1 << 24);
    c->tts_bos_token_id = (int32_t)kz_json_int(j, root, "tts_bos_token_id", 151672, 0, 1 << 24);
    c->tts_eos_token_id = (int32_t)kz_json_int(j, root, "tts_eos_token_id", 151673, 0, 1 << 24);
    c->assistant_token_id = (int32_t)kz_json_int(j, root, "assistant_token_id", -1, 0, 1 << 24);
}

/* Text token ids of the top level against the text embedding's rows. */
static kz_status check_text_ids(const char *label, const kz_tts_config *c) {
    const struct { const char *key; int32_t id; } ids[] = {
        {"im_start_token_id", c->im_start_token_id}, {"im_end_token_id", c->im_end_token_id},
        {"tts_pad_token_id", c->tts_pad_token_id},   {"tts_bos_token_id", c->tts_bos_token_id},
        {"tts_eos_token_id", c->tts_eos_token_id},   {"assistant_token_id", c->assistant_token_id}};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        bool absent = ids[i].id < 0; // only assistant_token_id may be absent
        if (!absent && ids[i].id >= c->talker.text_vocab_size) {
            return kz_error_set(KZ_STATUS_BAD_MODEL,
                                "%s: %s %d is outside the text embedding "
                                "(talker_config.text_vocab_size %d)",
                                label, ids[i].key, ids[i].id, c->talker.text_vocab_size);
        }
    }
    return KZ_OK;
}

/* Codec ids of talker_config (defaults included) against the codec embedding's rows. */
static kz_status check_codec_ids(const char *label, const kz_talker_config *t) {
    const struct { const char *key; int32_t id; } ids[] = {
        {"codec_eos_token_id", t->codec_eos_token_id}, {"codec_think_id", t->codec_think_id},
        {"codec_nothink_id", t->codec_nothink_id},     {"codec_think_bos_id", t->codec_think_bos_id},
        {"codec_think_eos_id", t->codec_think_eos_id}, {"codec_pad_id", t->codec_pad_id},
        {"codec_bos_id", t->codec_bos_id}};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        if (ids[i].id < 0 || ids[i].id >= t->vocab_size) {
            return kz_error_set(KZ_STATUS_BAD_MODEL,
                                "%s: talker_config.%s %d is outside the codec embedding "
                                "(talker_config.vocab_size %d)",
                                label, ids[i].key, ids[i].id, t->vocab_size);
        }
    }
    for (int i = 0; i < t->n_speakers; i++) {
        const char *d = t->speakers[i].dialect;
        bool known = !d[0];
        for (int k = 0; k < t->n_languages && !known; k++) {
            known = strcmp(t->languages[k].name, d) == 0;
        }
        if (!known) {
            return kz_error_set(KZ_STATUS_BAD_MODEL,
                                "%s: talker_config.spk_is_dialect.%s: '%s' is not in "
                                "codec_language_id",
                                label, t->speakers[i].name, d);
        }
    }
    return KZ_OK;
}

/* Sizes the tensors are bound with, including derived defaults (head_dim). */
static kz_status check_sizes(const char *label, const kz_talker_config *t) {
    const kz_code_predictor_config *p = &t->code_predictor;
    if (t->num_attention_heads % t->num_key_value_heads != 0 ||
        p->num_attention_heads % p->num_key_value_heads != 0) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: attention heads are not a multiple of key/value heads", label);
    }
    if (t->head_dim < 2 || t->head_dim % 2 != 0 || p->head_dim % 2 != 0) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: talker_config.head_dim %d / code_predictor_config.head_dim %d: "
                            "RoPE needs an even head_dim >= 2",
                            label, t->head_dim, p->head_dim);
    }
    if (p->num_code_groups != t->num_code_groups) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: talker num_code_groups %d != code predictor's %d", label,
                            t->num_code_groups, p->num_code_groups);
    }
    return KZ_OK;
}

static kz_status check(const char *label, const kz_tts_config *c) {
    if (strcmp(c->tts_model_type, "custom_voice") != 0 &&
        strcmp(c->tts_model_type, "voice_design") != 0 && strcmp(c->tts_model_type, "base") != 0) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: tts_model_type '%s' is not custom_voice, voice_design or base",
                            label, c->tts_model_type);
    }
    kz_status st = check_sizes(label, &c->talker);
    st = st ? st : check_text_ids(label, c);
    return st ? st : check_codec_ids(label, &c->talker);
}

/* The config from a parsed root, which it frees; label names the text in messages. */
static kz_status from_root(const char *label, cJSON *root, kz_tts_config *out) {
    kz_json_ctx j = {.path = label, .scope = "", .status = KZ_OK};
    kz_json_model_type(&j, root, "qwen3_tts");
    read_top(&j, root, out);
    j.scope = "talker_config";
    read_talker(&j, kz_json_obj(&j, root, "talker_config"), &out->talker);
    j.scope = "speaker_encoder_config";
    const cJSON *spk = kz_json_obj(&j, root, "speaker_encoder_config");
    out->speaker_enc_dim = (int32_t)kz_json_int(&j, spk, "enc_dim", 1024, 1, 1 << 16);
    out->speaker_sample_rate = (int32_t)kz_json_int(&j, spk, "sample_rate", 24000, 1, 384000);
    cJSON_Delete(root);
    kz_status st = j.status ? j.status : check(label, out);
    if (st != KZ_OK) {
        memset(out, 0, sizeof *out);
    }
    return st;
}

kz_status kz_tts_config_parse(const char *label, const char *text, size_t n_bytes,
                              kz_tts_config *out) {
    memset(out, 0, sizeof *out);
    cJSON *root = NULL;
    kz_status st = kz_json_parse(label, text, n_bytes, &root);
    return st == KZ_OK ? from_root(label, root, out) : st;
}

kz_status kz_tts_config_load(const char *path, kz_tts_config *out) {
    memset(out, 0, sizeof *out);
    cJSON *root = NULL;
    kz_status st = kz_json_load(path, &root);
    return st == KZ_OK ? from_root(path, root, out) : st;
}

void kz_tts_config_describe(const kz_tts_config *c, char *buf, size_t buf_size) {
    const kz_talker_config *t = &c->talker;
    const kz_code_predictor_config *p = &t->code_predictor;
    int n = snprintf(buf, buf_size,
                     "model: %s %s\n"
                     "talker: %d layers x %d (heads %d/%d x %d, mlp %d), codec vocab %d, "
                     "text %d x %d\n"
                     "code predictor: %d layers x %d (heads %d/%d x %d, mlp %d), %d groups\n"
                     "speakers:",
                     c->tts_model_type, c->tts_model_size, t->num_hidden_layers, t->hidden_size,
                     t->num_attention_heads, t->num_key_value_heads, t->head_dim,
                     t->intermediate_size, t->vocab_size, t->text_vocab_size, t->text_hidden_size,
                     p->num_hidden_layers, p->hidden_size, p->num_attention_heads,
                     p->num_key_value_heads, p->head_dim, p->intermediate_size, p->num_code_groups);
    for (int i = 0; i < t->n_speakers && n > 0 && (size_t)n < buf_size; i++) {
        n += snprintf(buf + n, buf_size - (size_t)n, " %s", t->speakers[i].name);
    }
    if (n > 0 && (size_t)n < buf_size) {
        n += snprintf(buf + n, buf_size - (size_t)n, "%s\nlanguages: auto",
                      t->n_speakers ? "" : " (none)");
    }
    for (int i = 0; i < t->n_languages && n > 0 && (size_t)n < buf_size; i++) {
        n += snprintf(buf + n, buf_size - (size_t)n, " %s", t->languages[i].name);
    }
}

static void generation_fallbacks(kz_generation_config *out) {
    *out = (kz_generation_config){.do_sample = true, .temperature = 0.9f, .top_k = 50,
                                  .top_p = 1.0f, .repetition_penalty = 1.05f,
                                  .subtalker_dosample = true, .subtalker_temperature = 0.9f,
                                  .subtalker_top_k = 50, .subtalker_top_p = 1.0f,
                                  .max_new_tokens = 2048};
}

/* The sampling defaults over the fallbacks already in out, from a parsed root, which it
 * frees; label names the text in messages. */
static kz_status generation_from_root(const char *label, cJSON *root, kz_generation_config *out) {
    kz_json_ctx j = {.path = label, .scope = "", .status = KZ_OK};
    kz_generation_config *g = out;
    g->do_sample = kz_json_bool(&j, root, "do_sample", g->do_sample);
    g->temperature = (float)kz_json_num(&j, root, "temperature", g->temperature, 1e-6, 100.0);
    g->top_k = (int32_t)kz_json_int(&j, root, "top_k", g->top_k, 0, 1 << 20);
    g->top_p = (float)kz_json_num(&j, root, "top_p", g->top_p, 1e-6, 1.0);
    g->repetition_penalty =
        (float)kz_json_num(&j, root, "repetition_penalty", g->repetition_penalty, 1e-6, 100.0);
    g->subtalker_dosample = kz_json_bool(&j, root, "subtalker_dosample", g->subtalker_dosample);
    g->subtalker_temperature = (float)kz_json_num(&j, root, "subtalker_temperature",
                                                  g->subtalker_temperature, 1e-6, 100.0);
    g->subtalker_top_k = (int32_t)kz_json_int(&j, root, "subtalker_top_k", g->subtalker_top_k, 0,
                                              1 << 20);
    g->subtalker_top_p =
        (float)kz_json_num(&j, root, "subtalker_top_p", g->subtalker_top_p, 1e-6, 1.0);
    g->max_new_tokens =
        (int32_t)kz_json_int(&j, root, "max_new_tokens", g->max_new_tokens, 1, 1 << 20);
    cJSON_Delete(root);
    return j.status;
}

kz_status kz_generation_config_parse(const char *label, const char *text, size_t n_bytes,
                                     kz_generation_config *out) {
    generation_fallbacks(out);
    if (!text) {
        return KZ_OK;
    }
    cJSON *root = NULL;
    kz_status st = kz_json_parse(label, text, n_bytes, &root);
    return st == KZ_OK ? generation_from_root(label, root, out) : st;
}

kz_status kz_generation_config_load(const char *path, kz_generation_config *out) {
    generation_fallbacks(out);
    if (kz_file_absent(path)) {
        return KZ_OK;
    }
    cJSON *root = NULL;
    kz_status st = kz_json_load(path, &root);
    return st == KZ_OK ? generation_from_root(path, root, out) : st;
}
