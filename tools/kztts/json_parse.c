/*
 * json_parse.c - the tools' cJSON parses behind one mutex (see json_parse.h): lock ->
 * cJSON_ParseWithLengthOpts -> unlock. A parse holds it for as long as the text takes
 * (request bodies are bounded by --max-body); nothing else is done under it.
 */
#include "json_parse.h"

#include <pthread.h>

static pthread_mutex_t parse_lock = PTHREAD_MUTEX_INITIALIZER;

cJSON *json_parse(const char *text, size_t n_bytes, const char **end,
                  bool require_null_terminated) {
    pthread_mutex_lock(&parse_lock);
    cJSON *doc = cJSON_ParseWithLengthOpts(text, n_bytes, end, require_null_terminated);
    pthread_mutex_unlock(&parse_lock);
    return doc;
}
