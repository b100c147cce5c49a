/*
 * json_parse.h - every cJSON parse of the CLI and the server, behind one lock.
 *
 * cJSON keeps the position of the last parse error in a process-wide static, which
 * every parse writes, so two threads parsing at once race on it (the server's HTTP
 * threads parse request bodies concurrently). json_parse serializes the tools' parses.
 * The library parses JSON (config, tokenizer, safetensors headers) only while a model
 * loads, under a lock of its own (src/io/json.c); the server parses request bodies only
 * once the model is loaded (routes.c answers 503 before), and the CLI's hub listings
 * before it loads one, so the two never overlap.
 */
#ifndef KZ_JSON_PARSE_H
#define KZ_JSON_PARSE_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

/* cJSON_ParseWithLengthOpts(text, n_bytes, end, require_null_terminated) under the
 * lock: n_bytes counts the terminating NUL when the text has one (strlen + 1). */
cJSON *json_parse(const char *text, size_t n_bytes, const char **end,
                  bool require_null_terminated);

#endif
