/*
 * request.c - kz_request -> kz_plan (see request.h).
 *
 * Text: the wrapper's string "<|im_start|>assistant\n{text}<|im_end|>\n
 * <|im_start|>assistant\n" is tokenized whole and sliced like the model code:
 * role = ids[0:3], text = ids[3:len-5] (so a leading newline merges into the
 * role exactly as upstream); streamed text is sliced the same way as it arrives
 * (text_feed.c). Token ids given directly skip the tokenizer: their role is
 * config.json's im_start_token_id and assistant_token_id and the tokenizer's
 * id for "\n", what the wrapper's string gives for a text that does not start
 * with a newline; without tokenizer files that id is unknown and token ids are
 * refused. Instruction: "<|im_start|>user\n{instruct}<|im_end|>\n", all ids are rows.
 * Defaults: a field's 0 becomes the model's generation_config.json value (or the fixed
 * default kztts.h names) before anything is checked, so a zeroed request is valid.
 */
#include "synth/request.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "runtime/error.h"
#include "text/sentences.h"
#include "synth/voice.h"

#define GUARD_BASE_FRAMES 50
#define GUARD_FRAMES_PER_TOKEN 8
#define STREAM_TEXT_MAX_FRAMES 1500
#define DEFAULT_MAX_UTTERANCE_BYTES 600

/* "a, b, c" list of names for error messages. */
static void list_names(const kz_name_id *names, int n, char *buf, size_t size) {
    size_t w = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && w < size; i++) {
        w += (size_t)snprintf(buf + w, size - w, "%s%s", i ? ", " : "", names[i].name);
    }
}

static const kz_name_id *find_name(const kz_name_id *names, int n, const char *name) {
    for (int i = 0; i < n; i++) {
        if (strcasecmp(names[i].name, name) == 0) {
            return &names[i];
        }
    }
    return NULL;
}

static kz_status tokenize_wrapped(const kz_model *m, const char *prefix, const char *text,
                                  const char *suffix, kz_text_split split, int32_t **ids,
                                  size_t *n) {
    size_t len = strlen(prefix) + strlen(text) + strlen(suffix) + 1;
    char *s = malloc(len);
    if (!s) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    snprintf(s, len, "%s%s%s", prefix, text, suffix);
    kz_status st = kz_tokenizer_encode(m->tokenizer, s, strlen(s), (kz_split_mode)split, ids, n);
    free(s);
    return st;
}

/* Role ids for token-id input: <|im_start|> assistant \n, from the model's files. */
static kz_status token_role(const kz_model *m, int32_t role[3]) {
    if (!m->tokenizer) {
        return kz_error_set(KZ_STATUS_UNSUPPORTED,
                            "%s has no tokenizer files (vocab.json, merges.txt): the id of \"\\n\" "
                            "that wraps token ids is unknown",
                            m->path);
    }
    if (m->newline_id < 0 || m->cfg.assistant_token_id < 0) {
        return kz_error_set(KZ_STATUS_UNSUPPORTED,
                            "%s: %s, so token ids cannot be wrapped as \"<|im_start|>assistant\\n\"",
                            m->path,
                            m->newline_id < 0 ? "the tokenizer has no single token for \"\\n\""
                                              : "config.json has no assistant_token_id");
    }
    role[0] = m->cfg.im_start_token_id;
    role[1] = m->cfg.assistant_token_id;
    role[2] = m->newline_id;
    return KZ_OK;
}

static kz_status resolve_text(const kz_model *m, const kz_request *r, kz_plan *p,
                              kz_plan_ids *ids) {
    const kz_tts_config *c = &m->cfg;
    if (r->text_pull) {
        if (r->text || r->token_ids) {
            return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                                "streaming text input excludes text and token_ids");
        }
        if (r->layout == KZ_LAYOUT_NON_STREAMING) {
            return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                                "streaming text input is spoken in the streaming layout: layout "
                                "non-streaming contradicts it");
        }
        if (!m->tokenizer) {
            return kz_error_set(KZ_STATUS_UNSUPPORTED,
                                "%s has no tokenizer files (vocab.json, merges.txt)", m->path);
        }
        p->prompt.role_ids = NULL; // the streamed text's own (synth.c, text_feed.c)
        p->text_pull = r->text_pull;
        p->text_user = r->user;
        return KZ_OK;
    }
    if (r->text && r->token_ids) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "give text or token_ids, not both (text and token_ids are set)");
    }
    if (!r->text) {
        if (!r->token_ids || r->n_token_ids == 0) {
            return kz_error_set(KZ_STATUS_BAD_INPUT, "no text and no token ids to speak");
        }
        for (size_t i = 0; i < r->n_token_ids; i++) {
            if (r->token_ids[i] < 0 || r->token_ids[i] >= c->talker.text_vocab_size) {
                return kz_error_set(KZ_STATUS_BAD_INPUT, "token id %d at %zu outside [0, %d)",
                                    r->token_ids[i], i, c->talker.text_vocab_size);
            }
        }
        kz_status st = token_role(m, ids->role);
        if (st != KZ_OK) {
            return st;
        }
        ids->text = malloc(r->n_token_ids * sizeof(int32_t));
        if (!ids->text) {
            return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory");
        }
        memcpy(ids->text, r->token_ids, r->n_token_ids * sizeof(int32_t));
        p->prompt.n_text = r->n_token_ids;
    } else {
        if (kz_text_is_blank(r->text, strlen(r->text))) {
            return kz_error_set(KZ_STATUS_BAD_INPUT, "the text is empty or only whitespace");
        }
        if (!m->tokenizer) {
            return kz_error_set(KZ_STATUS_UNSUPPORTED,
                                "%s has no tokenizer files (vocab.json, merges.txt)", m->path);
        }
        size_t n;
        kz_status st = tokenize_wrapped(m, "<|im_start|>assistant\n", r->text,
                                        "<|im_end|>\n<|im_start|>assistant\n", r->split,
                                        &ids->text, &n);
        if (st != KZ_OK) {
            return st;
        }
        if (n < 9) {
            return kz_error_set(KZ_STATUS_BAD_INPUT, "the text gives no tokens to speak");
        }
        memcpy(ids->role, ids->text, sizeof ids->role);
        memmove(ids->text, ids->text + 3, (n - 8) * sizeof(int32_t));
        p->prompt.n_text = n - 8;
    }
    p->prompt.text_ids = ids->text;
    p->prompt.role_ids = ids->role;
    return KZ_OK;
}

/* The fields of a voice the prompt reads, checked against m: sizes, finiteness and code
 * ranges (a voice file was validated when loaded; one built in memory was not). */
static kz_status check_voice_fields(const kz_model *m, const kz_voice *v) {
    const kz_talker_config *t = &m->cfg.talker;
    if (!v->xvector || v->enc_dim != t->hidden_size) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "the voice's x-vector has %d values, this model's speaker slot %d: "
                            "the voice was made with another model", (int)v->enc_dim,
                            (int)t->hidden_size);
    }
    for (int32_t i = 0; i < v->enc_dim; i++) {
        if (!isfinite(v->xvector[i])) {
            return kz_error_set(KZ_STATUS_BAD_INPUT, "the voice's x-vector is not finite at %d",
                                (int)i);
        }
    }
    if (!v->icl) {
        return KZ_OK;
    }
    if (!v->ref_codes || v->n_ref_frames < 1 || v->n_codebooks != t->num_code_groups ||
        !v->ref_text) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "the voice's reference (%d frames of %d codes%s) does not fit this "
                            "model (%d codes a frame)", (int)v->n_ref_frames, (int)v->n_codebooks,
                            v->ref_text ? "" : ", no transcript", (int)t->num_code_groups);
    }
    int32_t hi = m->codec_cfg.codebook_size < m->cp.cfg.vocab_size ? m->codec_cfg.codebook_size
                                                                   : m->cp.cfg.vocab_size;
    size_t n = (size_t)v->n_ref_frames * (size_t)v->n_codebooks;
    for (size_t i = 0; i < n; i++) {
        if (v->ref_codes[i] < 0 || v->ref_codes[i] >= hi) {
            return kz_error_set(KZ_STATUS_BAD_INPUT,
                                "the voice's reference code %d (frame %zu, codebook %zu) is "
                                "outside [0, %d)", (int)v->ref_codes[i],
                                i / (size_t)v->n_codebooks, i % (size_t)v->n_codebooks, (int)hi);
        }
    }
    return KZ_OK;
}

/* Base: the voice (required) in the speaker slot and, for an ICL voice, its transcript's
 * tokens and codes. */
static kz_status resolve_clone(const kz_model *m, const kz_request *r, kz_plan *p,
                               kz_plan_ids *ids) {
    if (r->speaker && r->speaker[0]) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "Base models have no preset speakers ('%s'): they clone the voice "
                            "of a reference recording (kz_request.voice; kztts --ref-audio or "
                            "--voice)", r->speaker);
    }
    if (!r->voice) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "a Base model needs a voice to clone: kz_request.voice from "
                            "kz_voice_from_file or kz_voice_load (kztts --ref-audio or --voice)");
    }
    kz_status st = check_voice_fields(m, r->voice);
    st = st ? st : kz_voice_check(m, r->voice);
    if (st != KZ_OK) {
        return st;
    }
    const kz_voice *v = r->voice;
    p->voice = v;
    p->prompt.speaker_vec = v->xvector;
    if (!v->icl) {
        return KZ_OK;
    }
    if (!m->tokenizer) {
        return kz_error_set(KZ_STATUS_UNSUPPORTED,
                            "%s has no tokenizer files (vocab.json, merges.txt) for the voice's "
                            "transcript", m->path);
    }
    size_t n;
    st = tokenize_wrapped(m, "<|im_start|>assistant\n", v->ref_text, "<|im_end|>\n", r->split,
                          &ids->ref_text, &n);
    if (st != KZ_OK) {
        return st;
    }
    if (n <= 5) {
        return kz_error_set(KZ_STATUS_BAD_INPUT,
                            "the voice's transcript gives no tokens: an in-context voice needs "
                            "the reference's words");
    }
    memmove(ids->ref_text, ids->ref_text + 3, (n - 5) * sizeof(int32_t));
    p->prompt.ref_text_ids = ids->ref_text;
    p->prompt.n_ref_text = n - 5;
    p->prompt.ref_codes = v->ref_codes;
    p->prompt.n_ref_frames = (size_t)v->n_ref_frames;
    return KZ_OK;
}

static kz_status resolve_voice(const kz_model *m, const kz_request *r, kz_plan *p,
                               kz_plan_ids *ids) {
    const kz_talker_config *t = &m->cfg.talker;
    char names[1024];
    p->prompt.speaker_id = -1;
    p->prompt.language_id = -1;
    const char *type = m->cfg.tts_model_type;
    bool base = strcmp(type, "base") == 0;
    if (base && r->instruct && r->instruct[0]) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "Base models take no instruction (use CustomVoice 1.7B or VoiceDesign)");
    }
    if (!base && r->voice) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "cloned voices are for Base models; this %s model speaks with %s",
                            type, strcmp(type, "custom_voice") == 0
                                      ? "its preset speakers"
                                      : "a voice described by an instruction");
    }
    kz_status st = base ? resolve_clone(m, r, p, ids) : KZ_OK;
    if (st != KZ_OK) {
        return st;
    }
    const kz_name_id *spk = NULL;
    if (strcmp(type, "custom_voice") == 0) {
        list_names(t->speakers, t->n_speakers, names, sizeof names);
        if (!r->speaker || !r->speaker[0]) {
            return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "a speaker is required; one of: %s",
                                names);
        }
        spk = find_name(t->speakers, t->n_speakers, r->speaker);
        if (!spk) {
            return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "unknown speaker '%s'; one of: %s",
                                r->speaker, names);
        }
        p->prompt.speaker_id = spk->id;
    } else if (r->speaker && r->speaker[0]) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "this %s model has no speakers; describe the voice with an instruction",
                            type);
    }
    const char *lang = r->language && r->language[0] ? r->language : "auto";
    if (strcasecmp(lang, "auto") != 0) {
        const kz_name_id *l = find_name(t->languages, t->n_languages, lang);
        if (!l) {
            list_names(t->languages, t->n_languages, names, sizeof names);
            return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "unknown language '%s'; auto or one of: %s",
                                lang, names);
        }
        p->prompt.language_id = l->id;
    }
    // Dialect override: a dialect speaker with Chinese or auto speaks its dialect.
    bool chinese_or_auto = strcasecmp(lang, "auto") == 0 || strcasecmp(lang, "chinese") == 0;
    if (spk && spk->dialect[0] && chinese_or_auto) {
        const kz_name_id *d = find_name(t->languages, t->n_languages, spk->dialect);
        p->prompt.language_id = d ? d->id : p->prompt.language_id;
    }
    return KZ_OK;
}

static kz_status resolve_instruct(const kz_model *m, const kz_request *r, kz_plan *p,
                                  kz_plan_ids *ids) {
    if (!r->instruct || !r->instruct[0]) {
        return KZ_OK;
    }
    // The official generate_custom_voice drops it when `tts_model_size in "0b6"`: a
    // substring test ("", "0", "b6", ... match), CustomVoice models only.
    if (strcmp(m->cfg.tts_model_type, "custom_voice") == 0 &&
        strstr("0b6", m->cfg.tts_model_size) != NULL) {
        kz_log(KZ_LOG_WARN, "0.6B models ignore the instruction (as the official wrapper does)");
        return KZ_OK;
    }
    if (!m->tokenizer) {
        return kz_error_set(KZ_STATUS_UNSUPPORTED, "%s has no tokenizer files for the instruction",
                            m->path);
    }
    kz_status st = tokenize_wrapped(m, "<|im_start|>user\n", r->instruct, "<|im_end|>\n",
                                    r->split, &ids->instruct, &p->prompt.n_instruct);
    p->prompt.instruct_ids = ids->instruct;
    return st;
}

/* --- defaults: a request's 0 means the model's value (kztts.h kz_request) ---------------- */

/* v, or the default d when v is 0. */
static float or_f(float v, float d) {
    return v != 0 ? v : d;
}

static int32_t or_i(int32_t v, int32_t d) {
    return v != 0 ? v : d;
}

void kz_request_fill_defaults(const kz_model *m, const kz_request *r, kz_request *out) {
    kz_generation_config g;
    if (m && m->has_tts) {
        g = m->gen;
    } else {
        kz_generation_config_parse("", NULL, 0, &g); // the official wrapper's fallbacks
    }
    // generation_config.json's top_k 0 is "off", which the request spells -1; one beyond
    // the vocabulary keeps all of it, as the official sampler's min(top_k, vocabulary).
    int32_t top_k = g.top_k > 0 ? g.top_k : -1;
    int32_t cp_top_k = g.subtalker_top_k > 0 ? g.subtalker_top_k : -1;
    if (m && m->has_tts) {
        top_k = top_k > m->cfg.talker.vocab_size ? -1 : top_k;
        cp_top_k = cp_top_k > m->cfg.talker.code_predictor.vocab_size ? -1 : cp_top_k;
    }
    kz_request q = *r;
    q.greedy = r->greedy || !g.do_sample;
    q.temperature = or_f(r->temperature, g.temperature);
    q.top_k = or_i(r->top_k, top_k);
    q.top_p = or_f(r->top_p, g.top_p);
    q.repetition_penalty = or_f(r->repetition_penalty, g.repetition_penalty);
    q.cp_temperature = or_f(r->cp_temperature, g.subtalker_temperature);
    q.cp_top_k = or_i(r->cp_top_k, cp_top_k);
    q.cp_top_p = or_f(r->cp_top_p, g.subtalker_top_p);
    q.first_chunk_frames = or_i(r->first_chunk_frames, 1);
    q.max_utterance_bytes = or_i(r->max_utterance_bytes, DEFAULT_MAX_UTTERANCE_BYTES);
    *out = q;
}

static kz_status check_sampling(const kz_request *r, int32_t vocab, int32_t cp_vocab) {
    struct { const char *name; double v, lo, hi; } reals[] = {
        {"temperature", r->temperature, 0, 100},
        {"top_p", r->top_p, 0, 1},
        {"repetition_penalty", r->repetition_penalty, 0, 100},
        {"cp_temperature", r->cp_temperature, 0, 100},
        {"cp_top_p", r->cp_top_p, 0, 1}};
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) {
        double v = reals[i].v;
        if (!(v > reals[i].lo && v <= reals[i].hi)) {
            return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "%s %g out of range (%g, %g]",
                                reals[i].name, v, reals[i].lo, reals[i].hi);
        }
    }
    struct { const char *name; int32_t v, hi; } ints[] = {{"top_k", r->top_k, vocab},
                                                          {"cp_top_k", r->cp_top_k, cp_vocab}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        if (ints[i].v < -1 || ints[i].v > ints[i].hi) {
            return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "%s %d out of range [-1, %d]",
                                ints[i].name, ints[i].v, ints[i].hi);
        }
    }
    if (r->frames < 0 || r->max_frames < 0 || r->chunk_frames < 0 || r->chunk_frames > 1024 ||
        r->first_chunk_frames < 1 || r->first_chunk_frames > 1024) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "frames %d / max_frames %d must be >= 0, first_chunk_frames %d in "
                            "[1, 1024], chunk_frames %d in [0, 1024] (0: adaptive)",
                            r->frames, r->max_frames, r->first_chunk_frames, r->chunk_frames);
    }
    return KZ_OK;
}

static void fill_sampling(const kz_request *r, kz_plan *p) {
    // The sampler's top_k 0 is "off" (the request's -1).
    p->talker = (kz_sampling){.greedy = r->greedy, .temperature = r->temperature,
                              .top_k = r->top_k > 0 ? r->top_k : 0, .top_p = r->top_p};
    p->cp = (kz_sampling){.greedy = r->greedy, .temperature = r->cp_temperature,
                          .top_k = r->cp_top_k > 0 ? r->cp_top_k : 0, .top_p = r->cp_top_p};
    p->repetition_penalty = r->repetition_penalty;
    p->seed = r->seed;
    p->frames = r->frames;
    p->chunk_frames = r->chunk_frames;
    p->first_chunk_frames = r->first_chunk_frames;
    p->on_frame = r->on_frame;
    p->frame_user = r->user;
    p->split = (kz_split_mode)r->split;
}

int64_t kz_request_runaway_guard(size_t n_text) {
    return GUARD_BASE_FRAMES + GUARD_FRAMES_PER_TOKEN * (int64_t)n_text;
}

/* Frame cap: the exact count, else the runaway guard lowered to the request's max_frames
 * (see kz_request in kztts.h), never above the model's max_new_tokens - 1 (the official
 * loop's limit). Streamed text: max_frames or its fixed cap until all text is known
 * (synth.c applies the guard then). */
static int32_t frame_cap(const kz_model *m, const kz_request *r, size_t n_text) {
    if (r->frames > 0) {
        return r->frames;
    }
    int64_t cap = r->text_pull ? STREAM_TEXT_MAX_FRAMES : kz_request_runaway_guard(n_text);
    if (r->max_frames > 0 && (r->text_pull || r->max_frames < cap)) {
        cap = r->max_frames;
    }
    int64_t limit = m->gen.max_new_tokens > 1 ? m->gen.max_new_tokens - 1 : 1;
    return (int32_t)(cap < limit ? cap : limit);
}

/* Refuses a prompt over KZ_MAX_PROMPT_TOKENS (long text is split into utterances first, so
 * this is one utterance's). */
static kz_status check_prompt_length(const kz_prompt_spec *p) {
    size_t ref = p->ref_codes ? p->n_ref_text + p->n_ref_frames : 0;
    if (ref && p->n_text + ref > KZ_MAX_PROMPT_TOKENS) {
        return kz_error_set(KZ_STATUS_BAD_INPUT,
                            "the utterance's prompt has %zu rows (text %zu, the voice's reference "
                            "%zu frames and %zu transcript tokens), more than %d: use a shorter "
                            "reference or shorter utterances (max_utterance_bytes, "
                            "--max-utterance)", p->n_text + ref, p->n_text, p->n_ref_frames,
                            p->n_ref_text, KZ_MAX_PROMPT_TOKENS);
    }
    if (p->n_text + p->n_instruct <= KZ_MAX_PROMPT_TOKENS) {
        return KZ_OK;
    }
    return kz_error_set(KZ_STATUS_BAD_INPUT,
                        "the utterance's prompt has %zu tokens (text %zu, instruction %zu), more "
                        "than %d: split the text into shorter utterances (max_utterance_bytes, "
                        "--max-utterance) or shorten the instruction",
                        p->n_text + p->n_instruct, p->n_text, p->n_instruct, KZ_MAX_PROMPT_TOKENS);
}

kz_status kz_request_resolve(const kz_model *m, const kz_request *request, kz_plan *plan,
                             kz_plan_ids *ids) {
    memset(plan, 0, sizeof *plan);
    memset(ids, 0, sizeof *ids);
    if (!m->has_tts) {
        return kz_error_set(KZ_STATUS_UNSUPPORTED, "%s %s: it cannot speak text", m->path,
                            m->codec_of_tts ? "was loaded with codec_only (its codec alone)"
                                            : "is a codec-only model");
    }
    kz_request filled;
    kz_request_fill_defaults(m, request, &filled);
    const kz_request *r = &filled;
    kz_status st = check_sampling(r, m->cfg.talker.vocab_size,
                                  m->cfg.talker.code_predictor.vocab_size);
    st = st ? st : resolve_voice(m, r, plan, ids);
    st = st ? st : resolve_text(m, r, plan, ids);
    st = st ? st : resolve_instruct(m, r, plan, ids);
    st = st ? st : check_prompt_length(&plan->prompt);
    if (st != KZ_OK) {
        kz_plan_ids_free(ids);
        return st;
    }
    fill_sampling(r, plan);
    plan->max_frames = frame_cap(m, r, plan->prompt.n_text);
    // Base defaults to the streaming layout (generate_voice_clone's non_streaming_mode=False).
    bool base = strcmp(m->cfg.tts_model_type, "base") == 0;
    plan->prompt.streaming = r->layout == KZ_LAYOUT_STREAMING || r->text_pull ||
                             (base && r->layout == KZ_LAYOUT_DEFAULT);
    return KZ_OK;
}

void kz_plan_ids_free(kz_plan_ids *ids) {
    free(ids->text);
    free(ids->instruct);
    free(ids->ref_text);
    memset(ids, 0, sizeof *ids);
}
