/*
 * voices_routes.c - /v1/audio/voices and /v1/audio/voices/{name} (voices_handle):
 *
 *   GET    /v1/audio/voices         {"voices":[preset and uploaded names],
 *                                    "uploaded_voices":[voice resource...]} (vLLM-Omni's shape)
 *   GET    /v1/audio/voices/{name}  the uploaded voice's resource
 *   POST   /v1/audio/voices         multipart/form-data (OpenAI's CreateVoiceRequest:
 *                                    name, audio_sample, consent; vLLM-Omni's ref_text,
 *                                    speaker_description; x_vector_only_mode) or the same
 *                                    fields as JSON with audio_sample in base64 or a data:
 *                                    URI -> 200 with the voice resource
 *   DELETE /v1/audio/voices/{name}  {"id","object":"audio.voice","deleted":true}
 * A voice resource is OpenAI's VoiceResource {"object":"audio.voice","id","name",
 * "created_at"} plus "consent", "mode" (icl|xvector), "ref_text" (ICL voices) and
 * "speaker_description" (when given); id is the name. Names are case-insensitive and
 * answered in lower case, the way the store keeps them (voices_key).
 *
 * POST: uploads on (--voices-dir, else 400), a Base model (else 400 naming its type), the
 * body parsed (multipart.c or cJSON), consent given, a valid free name (409 when taken),
 * then the voice is made on a synthesis worker (jobs.h: cloning is as heavy as a short
 * synthesis, so it waits its turn and a full queue answers 429) and stored (voices.c).
 * The mode: in-context (ICL) when ref_text is given, else x-vector only, as vLLM-Omni
 * does; x_vector_only_mode forces x-vector only.
 */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base64.h"
#include "jobs.h"
#include "json_parse.h"
#include "multipart.h"
#include "voices.h"

#define PREFIX "/v1/audio/voices"
#define MAX_CONSENT_BYTES 256
#define MAX_DESCRIPTION_BYTES 4096

/* The fields of an upload, strings NUL-terminated and malloc'ed. */
typedef struct upload {
    char *name, *consent, *ref_text, *description;
    bool xvector_only;
    uint8_t *audio; /* the audio file's bytes (decoded from base64 for JSON) */
    size_t n_audio;
    bool audio_set;
    char unknown[MULTIPART_MAX_NAME]; /* an unknown field's name, printable: the param of
                                         its error, which outlives the parsed body */
} upload;

static void upload_clear(upload *u) {
    free(u->name);
    free(u->consent);
    free(u->ref_text);
    free(u->description);
    free(u->audio);
    memset(u, 0, sizeof *u);
}

static const char *const FIELDS[] = {"name", "audio_sample", "consent", "ref_text",
                                     "speaker_description", "x_vector_only_mode"};

/* The field called name as a literal (an error's param must outlive the parsed body), or
 * NULL when it is no field of an upload. */
static const char *field_param(const char *name) {
    for (size_t i = 0; i < sizeof FIELDS / sizeof *FIELDS; i++) {
        if (strcmp(name, FIELDS[i]) == 0) {
            return FIELDS[i];
        }
    }
    return NULL;
}

/* An unknown field: 400 naming it (its name kept in u, in printable ASCII). */
static int unknown_field(upload *u, const char *name, http_error *e) {
    size_t o = 0;
    for (const char *c = name; *c && o + 1 < sizeof u->unknown && o < 64; c++) {
        u->unknown[o++] = *c >= 0x20 && *c < 0x7f ? *c : '?';
    }
    u->unknown[o] = '\0';
    return http_error_set(e, 400, "invalid_request_error", u->unknown, "unknown_parameter",
                          "unknown field '%s' (fields: name, audio_sample, consent, ref_text, "
                          "speaker_description, x_vector_only_mode)", u->unknown);
}

static int bad_field(http_error *e, const char *param, const char *fmt, const char *detail) {
    return http_error_set(e, 400, "invalid_request_error", param, "invalid_value", fmt, detail);
}

/* Whether s[0..n) is UTF-8 (RFC 3629) without NUL bytes. */
static bool utf8_text(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3
                                    : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (c == 0 || len == 0 || len > n - i) {
            return false;
        }
        uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1Fu : len == 3 ? c & 0x0Fu : c & 0x07u;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) {
                return false;
            }
            cp = cp << 6 | (s[i + k] & 0x3Fu);
        }
        static const uint32_t MIN_CP[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < MIN_CP[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            return false;
        }
        i += len;
    }
    return true;
}

/* A text field's value into *out (malloc'ed), checked: UTF-8, at most max_bytes. */
static int text_field(const char *param, const void *bytes, size_t n, size_t max_bytes,
                      char **out, http_error *e) {
    if (n > max_bytes) {
        return http_error_set(e, 400, "invalid_request_error", param, "invalid_value",
                              "%s is longer than %zu bytes", param, max_bytes);
    }
    if (!utf8_text(bytes, n)) {
        return bad_field(e, param, "%s is not UTF-8 text (or holds a NUL byte)", param);
    }
    free(*out);
    if (!(*out = malloc(n + 1))) {
        return http_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    }
    memcpy(*out, bytes, n);
    (*out)[n] = '\0';
    return 0;
}

/* "true"/"false" (and 1/0) as a form field sends a boolean. */
static int bool_field(const char *param, const char *text, bool *out, http_error *e) {
    if (strcasecmp(text, "true") == 0 || strcmp(text, "1") == 0) {
        *out = true;
    } else if (strcasecmp(text, "false") == 0 || strcmp(text, "0") == 0) {
        *out = false;
    } else {
        return bad_field(e, param, "%s must be true or false", param);
    }
    return 0;
}

/* Consent is a consent recording id (OpenAI) or a yes; an explicit no is refused. */
static bool consent_refused(const char *c) {
    return strcasecmp(c, "false") == 0 || strcmp(c, "0") == 0 || strcasecmp(c, "no") == 0;
}

/* ---- the multipart variant ---- */

static int form_part(const multipart_part *p, upload *u, http_error *e) {
    const char *f = field_param(p->name);
    if (!f) {
        return unknown_field(u, p->name, e);
    }
    if (strcmp(f, "audio_sample") == 0) {
        if (!(u->audio = malloc(p->n_bytes ? p->n_bytes : 1))) {
            return http_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        }
        memcpy(u->audio, p->data, p->n_bytes);
        u->n_audio = p->n_bytes;
        u->audio_set = true;
        return 0;
    }
    if (strcmp(f, "name") == 0) {
        return text_field(f, p->data, p->n_bytes, 256, &u->name, e);
    }
    if (strcmp(f, "consent") == 0) {
        return text_field(f, p->data, p->n_bytes, MAX_CONSENT_BYTES, &u->consent, e);
    }
    if (strcmp(f, "ref_text") == 0) {
        return text_field(f, p->data, p->n_bytes, (size_t)1 << 20, &u->ref_text, e);
    }
    if (strcmp(f, "speaker_description") == 0) {
        return text_field(f, p->data, p->n_bytes, MAX_DESCRIPTION_BYTES, &u->description, e);
    }
    char *text = NULL; // x_vector_only_mode, the last field
    int rc = text_field(f, p->data, p->n_bytes, 16, &text, e);
    rc = rc ? rc : bool_field(f, text, &u->xvector_only, e);
    free(text);
    return rc;
}

static int parse_form(const char *content_type, const void *body, size_t n, upload *u,
                      http_error *e) {
    multipart_form *form = malloc(sizeof *form);
    char err[256];
    if (!form) {
        return http_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    }
    int rc = 0;
    if (multipart_parse(content_type, body, n, form, err, sizeof err) != 0) {
        rc = http_error_set(e, 400, "invalid_request_error", NULL, "invalid_multipart", "%s", err);
    }
    for (int i = 0; rc == 0 && i < form->n_parts; i++) {
        rc = form_part(&form->parts[i], u, e);
    }
    free(form);
    return rc;
}

/* ---- the JSON variant ---- */

/* audio_sample: a data: URI, or bare base64. */
static int json_audio(const char *text, upload *u, http_error *e) {
    const char *data = text;
    if (strncasecmp(text, "data:", 5) == 0) {
        const char *comma = strchr(text, ',');
        size_t n_meta = comma ? (size_t)(comma - text) : 0;
        if (!comma || n_meta < 12 || strncasecmp(comma - 7, ";base64", 7) != 0) {
            return bad_field(e, "audio_sample", "%s",
                             "audio_sample: the data: URI must be base64: "
                             "data:[<media type>];base64,<data>");
        }
        data = comma + 1;
    }
    int rc = base64_decode(data, strlen(data), &u->audio, &u->n_audio);
    if (rc == -2) {
        return http_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    }
    if (rc != 0) {
        return http_error_set(e, 400, "invalid_request_error", "audio_sample", "invalid_base64",
                              "audio_sample: malformed base64 (a character outside the base64 "
                              "alphabet, misplaced '=' padding, or a length that is not a "
                              "multiple of 4)");
    }
    u->audio_set = true;
    return 0;
}

/* The string member k (a literal) of the body. */
static int json_string(const char *k, const cJSON *item, size_t max_bytes, char **out,
                       http_error *e) {
    if (cJSON_IsNull(item)) {
        return 0;
    }
    if (!cJSON_IsString(item)) {
        return bad_field(e, k, "%s must be a string", k);
    }
    return text_field(k, item->valuestring, strlen(item->valuestring), max_bytes, out, e);
}

static int json_member(const cJSON *item, upload *u, http_error *e) {
    const char *k = field_param(item->string);
    if (!k) {
        return unknown_field(u, item->string, e);
    }
    if (strcmp(k, "name") == 0) {
        return json_string(k, item, 256, &u->name, e);
    }
    if (strcmp(k, "audio_sample") == 0) {
        return cJSON_IsString(item) ? json_audio(item->valuestring, u, e)
                                    : bad_field(e, k, "%s must be a string (base64 or a data: "
                                                      "URI)", k);
    }
    if (strcmp(k, "consent") == 0) {
        if (cJSON_IsBool(item)) {
            char *yes = strdup(cJSON_IsTrue(item) ? "true" : "false");
            free(u->consent);
            u->consent = yes;
            return yes ? 0 : http_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        }
        return json_string(k, item, MAX_CONSENT_BYTES, &u->consent, e);
    }
    if (strcmp(k, "ref_text") == 0) {
        return json_string(k, item, (size_t)1 << 20, &u->ref_text, e);
    }
    if (strcmp(k, "speaker_description") == 0) {
        return json_string(k, item, MAX_DESCRIPTION_BYTES, &u->description, e);
    }
    if (cJSON_IsNull(item)) { // x_vector_only_mode, the last field
        return 0;
    }
    if (!cJSON_IsBool(item)) {
        return bad_field(e, k, "%s must be true or false", k);
    }
    u->xvector_only = cJSON_IsTrue(item);
    return 0;
}

/* body[0..n) is NUL-terminated (http.h): parsing n + 1 bytes with the terminator
 * required refuses trailing bytes and NULs inside. */
static int parse_json(const char *body, size_t n, upload *u, http_error *e) {
    cJSON *root = json_parse(body, n + 1, NULL, true);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return http_error_set(e, 400, "invalid_request_error", NULL, "invalid_json",
                              "the body is not a JSON object");
    }
    int rc = 0;
    for (const cJSON *item = root->child; rc == 0 && item; item = item->next) {
        for (const cJSON *seen = root->child; seen != item && rc == 0; seen = seen->next) {
            if (strcmp(seen->string, item->string) == 0) {
                // seen is a known field (an unknown one fails at once): a literal
                const char *k = field_param(seen->string);
                rc = bad_field(e, k, "%s is given twice", k);
            }
        }
        rc = rc ? rc : json_member(item, u, e);
    }
    cJSON_Delete(root);
    return rc;
}

/* ---- making the voice on a worker ---- */

typedef struct clone_job {
    voices *store;
    const upload *u;
    bool xvector_only;
    int n_threads;
    kz_voice *voice; /* out */
    http_error e;    /* out when rc != 0 */
    int rc;
    bool done;
    pthread_mutex_t lock;
    pthread_cond_t cond;
} clone_job;

static void clone_run(kz_session *session, void *arg) {
    clone_job *j = arg;
    kz_experimental_session_info info = {0};
    if (session && kz_experimental_session_get_info(session, &info) == KZ_OK &&
        info.n_threads > 0) {
        j->n_threads = info.n_threads; // the worker's threads, as a synthesis there uses
    }
    j->rc = voices_from_audio(j->store, j->u->audio, j->u->n_audio, j->u->ref_text,
                              j->xvector_only, j->n_threads, &j->voice, &j->e);
    pthread_mutex_lock(&j->lock);
    j->done = true;
    pthread_cond_signal(&j->cond);
    pthread_mutex_unlock(&j->lock);
}

/* The threads a worker's session computes with (jobs.h: --threads, or online CPUs /
 * parallel; one beside a scheduler), for cloning without workers. */
static int clone_threads(const serve_config *cfg) {
    if (cfg->max_batch >= 2) {
        return 1;
    }
    if (cfg->threads > 0) {
        return cfg->threads;
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int per = (int)(cpus > 0 ? cpus : 1) / (cfg->parallel > 0 ? cfg->parallel : 1);
    return per > 0 ? per : 1;
}

/* The voice made from u on a synthesis worker (inline when there are none). */
static int make_voice(server *s, http_req *r, const upload *u, bool xvector_only,
                      kz_voice **out, http_error *e) {
    clone_job j = {.store = s->voices, .u = u, .xvector_only = xvector_only,
                   .n_threads = clone_threads(s->cfg)};
    pthread_mutex_init(&j.lock, NULL);
    pthread_cond_init(&j.cond, NULL);
    jobs_result jr = JOBS_OK;
    if (s->jobs) {
        jr = jobs_submit(s->jobs, clone_run, &j);
    } else {
        clone_run(NULL, &j);
    }
    if (jr == JOBS_OK) {
        pthread_mutex_lock(&j.lock);
        while (!j.done) {
            pthread_cond_wait(&j.cond, &j.lock); // the job runs exactly once (jobs.h)
        }
        pthread_mutex_unlock(&j.lock);
    }
    pthread_mutex_destroy(&j.lock);
    pthread_cond_destroy(&j.cond);
    if (jr == JOBS_FULL) {
        http_add_header(r, "Retry-After", "1");
        return http_error_set(e, 429, "rate_limit_error", NULL, "queue_full",
                              "the server is busy: every worker is taken and the queue is full");
    }
    if (jr == JOBS_CLOSED) {
        http_add_header(r, "Retry-After", "1");
        return http_error_set(e, 503, "unavailable", NULL, "draining",
                              "the server is shutting down");
    }
    if (j.rc != 0) {
        *e = j.e;
        if (e->param && strcmp(e->param, "ref_audio") == 0) {
            e->param = "audio_sample"; // the library's words, this route's field
        }
        return j.rc;
    }
    *out = j.voice;
    return 0;
}

/* ---- responses ---- */

/* A voice resource as a cJSON object (NULL when out of memory). */
static cJSON *resource(const voice_meta *m) {
    cJSON *o = cJSON_CreateObject();
    bool ok = o && cJSON_AddStringToObject(o, "object", "audio.voice") &&
              cJSON_AddStringToObject(o, "id", m->name) &&
              cJSON_AddStringToObject(o, "name", m->name) &&
              cJSON_AddNumberToObject(o, "created_at", (double)m->created_at) &&
              cJSON_AddStringToObject(o, "consent", m->consent ? m->consent : "") &&
              cJSON_AddStringToObject(o, "mode", m->icl ? "icl" : "xvector") &&
              (!m->icl || !m->ref_text || cJSON_AddStringToObject(o, "ref_text", m->ref_text)) &&
              (!m->speaker_description ||
               cJSON_AddStringToObject(o, "speaker_description", m->speaker_description));
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static void send_oom(http_req *r) {
    http_error e;
    http_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
    http_send_error(r, &e);
}

/* Sends root (taking it) with status, or a 500 when it could not be built. */
static void send_object(http_req *r, int status, cJSON *root, bool ok) {
    char *text = ok && root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!text) {
        send_oom(r);
        return;
    }
    http_send_json(r, status, text);
    free(text);
}

/* GET /v1/audio/voices: presets, then the uploaded voices. */
static void list_voices(server *s, http_req *r) {
    voice_meta *list = NULL;
    size_t n = 0;
    http_error e;
    if (voices_list(s->voices, &list, &n, &e) != 0) {
        http_send_error(r, &e);
        return;
    }
    cJSON *root = cJSON_CreateObject();
    cJSON *names = cJSON_AddArrayToObject(root, "voices");
    cJSON *uploaded = cJSON_AddArrayToObject(root, "uploaded_voices");
    bool ok = names && uploaded;
    for (int32_t i = 0; ok && i < kz_model_speaker_count(s->model); i++) {
        ok = cJSON_AddItemToArray(names, cJSON_CreateString(kz_model_speaker_name(s->model, i)));
    }
    for (size_t i = 0; i < n; i++) {
        cJSON *item = ok ? resource(&list[i]) : NULL;
        if (item && !cJSON_AddItemToArray(uploaded, item)) {
            cJSON_Delete(item);
            item = NULL;
        }
        ok = ok && item && cJSON_AddItemToArray(names, cJSON_CreateString(list[i].name));
        voice_meta_clear(&list[i]);
    }
    free(list);
    send_object(r, 200, root, ok);
}

/* GET /v1/audio/voices/{name}: one uploaded voice (the list's entry). */
static void get_voice(server *s, http_req *r, const char *name) {
    voice_meta *list = NULL;
    size_t n = 0;
    http_error e;
    if (voices_list(s->voices, &list, &n, &e) != 0) {
        http_send_error(r, &e);
        return;
    }
    cJSON *found = NULL;
    bool ok = true;
    char key[VOICES_MAX_NAME + 1];
    voices_key(name, key); // empty for a bad name, which no voice has
    for (size_t i = 0; i < n; i++) {
        if (!found && strcmp(list[i].name, key) == 0) {
            ok = (found = resource(&list[i])) != NULL;
        }
        voice_meta_clear(&list[i]);
    }
    free(list);
    if (found || !ok) {
        send_object(r, 200, found, ok);
        return;
    }
    http_error_set(&e, 404, "invalid_request_error", NULL, "voice_not_found",
                   "no uploaded voice named '%.64s'", voices_name_ok(name) ? name : "(invalid)");
    http_send_error(r, &e);
}

static void delete_voice(server *s, http_req *r, const char *name) {
    http_error e;
    if (voices_delete(s->voices, name, &e) != 0) {
        http_send_error(r, &e);
        return;
    }
    char key[VOICES_MAX_NAME + 1];
    voices_key(name, key); // the voice's id: its name as stored
    cJSON *root = cJSON_CreateObject();
    bool ok = root && cJSON_AddStringToObject(root, "id", key) &&
              cJSON_AddStringToObject(root, "object", "audio.voice") &&
              cJSON_AddTrueToObject(root, "deleted");
    send_object(r, 200, root, ok);
}

/* ---- POST ---- */

/* The upload's fields from the body, by its Content-Type. */
static int parse_upload(http_req *r, upload *u, http_error *e) {
    size_t n = 0;
    const char *body = http_body(r, &n);
    const char *ct = http_header(r, "Content-Type");
    if (multipart_is_form(ct)) {
        return parse_form(ct, body, n, u, e);
    }
    if (ct && strncasecmp(ct, "application/json", 16) == 0) {
        return parse_json(body, n, u, e);
    }
    return http_error_set(e, 400, "invalid_request_error", NULL, "unsupported_content_type",
                          "send the voice as multipart/form-data (name, audio_sample, consent, "
                          "ref_text) or as application/json");
}

/* The required fields present and sound; the name free. */
static int check_upload(server *s, const upload *u, http_error *e) {
    static const char *const REQUIRED[] = {"name", "audio_sample", "consent"};
    const bool present[] = {u->name != NULL, u->audio_set, u->consent && u->consent[0]};
    for (int i = 0; i < 3; i++) {
        if (!present[i]) {
            return http_error_set(e, 400, "invalid_request_error", REQUIRED[i], "missing_field",
                                  i == 2 ? "consent is required: the speaker's consent to be "
                                           "cloned (e.g. a consent recording id)"
                                         : "%s is required", REQUIRED[i]);
        }
    }
    if (consent_refused(u->consent)) {
        return http_error_set(e, 400, "invalid_request_error", "consent", "consent_refused",
                              "consent is '%s': a voice is only made with its speaker's "
                              "consent", u->consent);
    }
    return voices_check_new(s->voices, u->name, e);
}

/* The voice of upload u (filled here, freed by the caller after the answer is sent,
 * since an error's param may point into it) stored as *m. */
static int create_voice(server *s, http_req *r, upload *u, voice_meta *m, http_error *e) {
    if (!voices_enabled(s->voices)) {
        return http_error_set(e, 400, "invalid_request_error", NULL, "voices_disabled",
                              "this server stores no voices: start kztts serve with "
                              "--voices-dir DIR to upload them");
    }
    if (strcmp(kz_model_type(s->model), "base") != 0) {
        return http_error_set(e, 400, "invalid_request_error", NULL, "model_cannot_clone",
                              "voice cloning needs a Base model (Qwen3-TTS-12Hz-*-Base); this "
                              "server runs a %s model", kz_model_type(s->model));
    }
    int rc = parse_upload(r, u, e);
    rc = rc ? rc : check_upload(s, u, e);
    const bool xvector_only = u->xvector_only || !u->ref_text || !u->ref_text[0];
    kz_voice *voice = NULL;
    rc = rc ? rc : make_voice(s, r, u, xvector_only, &voice, e);
    if (rc == 0) {
        snprintf(m->name, sizeof m->name, "%s", u->name);
        m->icl = !xvector_only;
        m->consent = u->consent;
        m->ref_text = m->icl ? u->ref_text : NULL;
        m->speaker_description = u->description;
        u->consent = NULL;
        u->description = NULL;
        if (m->icl) {
            u->ref_text = NULL;
        }
        rc = voices_create(s->voices, voice, m, e);
    }
    kz_voice_free(voice);
    return rc;
}

static void post_voice(server *s, http_req *r) {
    upload u = {0};
    voice_meta m = {0};
    http_error e;
    if (create_voice(s, r, &u, &m, &e) != 0) {
        http_send_error(r, &e);
    } else {
        cJSON *o = resource(&m);
        send_object(r, 200, o, o != NULL);
    }
    voice_meta_clear(&m);
    upload_clear(&u);
}

/* ---- dispatch ---- */

static void method_not_allowed(http_req *r, const char *allow) {
    http_error e;
    http_add_header(r, "Allow", allow);
    http_error_set(&e, 405, "invalid_request_error", NULL, "method_not_allowed",
                   "%s is not allowed here (allowed: %s)", http_method(r), allow);
    http_send_error(r, &e);
}

void voices_handle(server *s, http_req *r) {
    const char *path = http_path(r), *method = http_method(r);
    const char *rest = strncmp(path, PREFIX, strlen(PREFIX)) == 0 ? path + strlen(PREFIX) : "";
    // HEAD is GET without the body (libmicrohttpd drops it), as routes.c treats it.
    const bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    if (rest[0] == '\0' || strcmp(rest, "/") == 0) {
        if (get) {
            list_voices(s, r);
        } else if (strcmp(method, "POST") == 0) {
            post_voice(s, r);
        } else {
            method_not_allowed(r, "GET, POST");
        }
        return;
    }
    const char *name = rest + 1; // rest starts with '/'
    if (rest[0] != '/' || strchr(name, '/')) {
        http_error e;
        http_error_set(&e, 404, "invalid_request_error", NULL, "not_found", "no such route");
        http_send_error(r, &e);
    } else if (get) {
        get_voice(s, r, name);
    } else if (strcmp(method, "DELETE") == 0) {
        delete_voice(s, r, name);
    } else {
        method_not_allowed(r, "GET, DELETE");
    }
}
