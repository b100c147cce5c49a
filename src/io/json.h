/*
 * json.h - typed, validated reads from JSON config files (cJSON underneath).
 *
 * A kz_json_ctx carries the file path and the first error. Getter calls keep
 * going after an error (returning the default) so a config reader can be a flat
 * list of reads followed by one status check; the message names the file, the
 * key path and what was wrong ("config.json: talker_config.hidden_size: expected
 * an integer in [1, 65536], got -3"). A missing key yields the default, the same
 * rule Hugging Face configs follow.
 */
#ifndef KZ_JSON_H
#define KZ_JSON_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "kztts.h"

typedef struct kz_json_ctx {
    const char *path;  /* file name used in messages */
    const char *scope; /* key prefix used in messages, e.g. "decoder_config" or "" */
    kz_status status;  /* KZ_OK until the first failed read */
} kz_json_ctx;

/* Reads and parses a JSON file whose top level must be an object (max 16 MB).
 * On success *root is owned by the caller (cJSON_Delete). */
kz_status kz_json_load(const char *path, cJSON **root);

/* Integer in [lo, hi]; a JSON number with a fractional part is an error. */
int64_t kz_json_int(kz_json_ctx *c, const cJSON *obj, const char *key, int64_t def, int64_t lo,
                    int64_t hi);

/* Finite number in [lo, hi]. */
double kz_json_num(kz_json_ctx *c, const cJSON *obj, const char *key, double def, double lo,
                   double hi);

bool kz_json_bool(kz_json_ctx *c, const cJSON *obj, const char *key, bool def);

/* String (borrowed from the cJSON tree) or def. */
const char *kz_json_str(kz_json_ctx *c, const cJSON *obj, const char *key, const char *def);

/* Array of integers in [lo, hi] with 1..max_n entries into out; returns the count.
 * When the key is missing, copies def (def_n entries) and returns def_n. */
int kz_json_int_array(kz_json_ctx *c, const cJSON *obj, const char *key, int64_t *out, int max_n,
                      const int64_t *def, int def_n, int64_t lo, int64_t hi);

/* Child object, NULL when missing; an error when present but not an object. */
const cJSON *kz_json_obj(kz_json_ctx *c, const cJSON *obj, const char *key);

#endif
