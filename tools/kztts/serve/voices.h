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
#include <stdint.h>

#include "http.h"
#include "kztts.h"

typedef struct voices voices;

/* dir NULL: no uploaded voices. Creates dir if missing. NULL with one line in err. */
voices *voices_open(const kz_model *model, const char *dir, char *err, size_t n_err);
void voices_free(voices *v);

/* Whether name is a valid voice name: 1-64 of [A-Za-z0-9_.-], not starting with '.'. */
bool voices_name_ok(const char *name);
enum { VOICES_MAX_NAME = 64 }; /* bytes of a valid name, without the NUL */

/* Voice names are case-insensitive, as vLLM-Omni's (it lowercases them) and the preset
 * speakers: a voice is stored under its name in lower case, and every lookup, creation
 * and deletion uses that key. name in lower case into key, or false (key empty) when
 * name is not valid. */
bool voices_key(const char *name, char key[VOICES_MAX_NAME + 1]);

/* Whether a new voice may take name: 0, or the status with e: 400 not a valid name, 409
 * a voice of that name exists in any case. voices_create checks it; an upload checks it
 * first too, before the voice is made. */
int voices_check_new(voices *v, const char *name, http_error *e);

/* The uploaded voice called name, checked against the model, into *out (caller frees).
 * 0, or the HTTP status with e filled: 404 unknown voice, 400 made for another model,
 * 500 unreadable. */
int voices_get(voices *v, const char *name, kz_voice **out, http_error *e);

/* A voice cloned now from a data: URI (base64 audio in any format libsndfile reads),
 * with ref_text (ICL) or xvector_only. 0, or the status with e filled (400 for bad
 * base64, unreadable or unusable audio, 400 when the model cannot clone). */
int voices_from_data_uri(voices *v, const char *uri, const char *ref_text, bool xvector_only,
                         int n_threads, kz_voice **out, http_error *e);

/* ---- the store behind /v1/audio/voices (voices_routes.c) ----
 * A voice is visible once NAME.kzvoice and NAME.json are both in place: a creation
 * claims NAME.kzvoice with link() (exclusive: of two replicas creating one name, one
 * succeeds and the other gets 409) and then renames NAME.json in; a deletion removes
 * NAME.json first. */

/* An uploaded voice's metadata (NAME.json). Strings are malloc'ed; voice_meta_clear. */
typedef struct voice_meta {
    char name[65];
    int64_t created_at;        /* unix seconds */
    char *consent;             /* the consent given at upload, never NULL once read */
    char *ref_text;            /* transcript of an ICL voice; NULL for x-vector only */
    char *speaker_description; /* free text given at upload, or NULL */
    bool icl;                  /* mode "icl" (else "xvector") */
} voice_meta;

void voice_meta_clear(voice_meta *m);

/* Whether uploads are stored (a --voices-dir was given). */
bool voices_enabled(const voices *v);

/* The model voices are made with and checked against. */
const kz_model *voices_model(const voices *v);


/* Whether NAME.kzvoice exists (a voice, or one being created). */
bool voices_exists(voices *v, const char *name);

/* The visible uploaded voices sorted by name into *out (caller frees each with
 * voice_meta_clear, then the array); none when uploads are off. 0, or 500 with e. */
int voices_list(voices *v, voice_meta **out, size_t *n_out, http_error *e);

/* Stores voice under meta->name in lower case (meta->name is lowered, created_at set
 * now) with meta's fields. 0, or the status with e: 400 bad name or uploads off, 409
 * the name exists in any case, 500 I/O. */
int voices_create(voices *v, const kz_voice *voice, voice_meta *meta, http_error *e);

/* Removes the voice called name. 0, or 404 unknown (400 bad name or uploads off, 500). */
int voices_delete(voices *v, const char *name, http_error *e);

/* A voice cloned from an audio file's bytes in memory (WAV, FLAC, Ogg, MP3: whatever
 * libsndfile reads), with ref_text (ICL) or xvector_only. 0, or the status with e (400
 * unreadable or unusable audio, or a model that cannot clone). */
int voices_from_audio(voices *v, const void *bytes, size_t n_bytes, const char *ref_text,
                      bool xvector_only, int n_threads, kz_voice **out, http_error *e);

#endif
