/*
 * voices.h - the voices a request can name, and cloned voices made on the fly.
 *
 * Presets are the model's speakers (CustomVoice). Uploaded voices are voice files
 * (kztts.h kz_voice_*) in --voices-dir, NAME.kzvoice plus NAME.json (name, created_at,
 * consent, ref_text): written to a temporary file and renamed, so replicas sharing the
 * directory see a voice whole or not at all, and read from the directory on every use,
 * so one uploaded through any replica is usable through all of them.
 * Reference audio in a request (ref_audio: a data: URI with base64 audio) is decoded in
 * memory (libsndfile) and cloned with kz_voice_from_samples.
 */
#ifndef KZ_VOICES_H
#define KZ_VOICES_H

#include <stdbool.h>
#include <stddef.h>

#include "http.h"
#include "kztts.h"

typedef struct voices voices;

/* dir NULL: no uploaded voices. Creates dir if missing. NULL with one line in err. */
voices *voices_open(const kz_model *model, const char *dir, char *err, size_t n_err);
void voices_free(voices *v);

/* Whether name is a valid voice name: 1-64 of [A-Za-z0-9_.-], not starting with '.'. */
bool voices_name_ok(const char *name);

/* The uploaded voice called name, checked against the model, into *out (caller frees).
 * 0, or the HTTP status with e filled: 404 unknown voice, 400 made for another model,
 * 500 unreadable. */
int voices_get(voices *v, const char *name, kz_voice **out, http_error *e);

/* A voice cloned now from a data: URI (base64 audio in any format libsndfile reads),
 * with ref_text (ICL) or xvector_only. 0, or the status with e filled (400 for bad
 * base64, unreadable or unusable audio, 400 when the model cannot clone). */
int voices_from_data_uri(voices *v, const char *uri, const char *ref_text, bool xvector_only,
                         int n_threads, kz_voice **out, http_error *e);

#endif
