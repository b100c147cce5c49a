/*
 * json.h - typed, validated reads from JSON config files (cJSON underneath).
 *
 * The text comes from a file (kz_json_load) or from memory (kz_json_parse, e.g.
 * a GGUF metadata string); either way a label names it in messages: the path,
 * or something like "model.gguf:kztts.config_json". A kz_json_ctx carries that
 * label and the first error. Getter calls keep going after an error (returning
 * the default) so a config reader can be a flat list of reads followed by one
 * status check; the message names the file, the key path and what was wrong
 * ("config.json: talker_config.hidden_size: expected an integer in [1, 65536]").
 * A missing key yields the default, the same rule Hugging Face configs follow.
 */
#ifndef KZ_JSON_H
#define KZ_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "kztts.h"

typedef struct kz_json_ctx {
    const char *path;  /* file name or label used in messages */
    const char *scope; /* key prefix used in messages, e.g. "decoder_config" or "" */
    kz_status status;  /* KZ_OK until the first failed read */
} kz_json_ctx;

/* Largest JSON text accepted, in bytes. */
#define KZ_JSON_MAX_BYTES (16u << 20)

/* cJSON_ParseWithOpts on a NUL-terminated text, telling a failed allocation
 * apart from bad JSON: *out_of_memory is set when any allocation of this parse
 * failed. *end receives where parsing stopped. */
cJSON *kz_json_parse_text(const char *text, const char **end, bool require_null_terminated,
                          bool *out_of_memory);

/* Parses n_bytes of JSON text (need not be NUL-terminated; NULL only when
 * n_bytes is 0) whose top level must be an object, at most KZ_JSON_MAX_BYTES
 * long and free of NUL bytes. Errors are KZ_STATUS_OUT_OF_MEMORY or KZ_STATUS_BAD_MODEL with a message
 * starting "label: " ("malformed JSON near byte 12"). On success *root is owned
 * by the caller (cJSON_Delete); on failure it is NULL. */
kz_status kz_json_parse(const char *label, const char *text, size_t n_bytes, cJSON **root);

/* Reads the file at path and parses it as kz_json_parse does, path as the
 * label; a file that cannot be read is KZ_STATUS_IO. */
kz_status kz_json_load(const char *path, cJSON **root);

/* Integer in [lo, hi]; a JSON number with a fractional part is an error. */
int64_t kz_json_int(kz_json_ctx *c, const cJSON *obj, const char *key, int64_t def, int64_t lo,
                    int64_t hi);

/* As kz_json_int for a key without a default: missing or null is an error
 * ("...: missing (it has no default)") and gives lo. */
int64_t kz_json_int_req(kz_json_ctx *c, const cJSON *obj, const char *key, int64_t lo,
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

/* The config's own check of what it describes: an error ("label: model_type is 'x',
 * expected 'qwen3_tts'") unless root's "model_type" string is `expected`. */
void kz_json_model_type(kz_json_ctx *c, const cJSON *root, const char *expected);

#endif
