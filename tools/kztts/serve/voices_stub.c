/*
 * voices_stub.c - SCAFFOLD: the voices store and routes answer 501 until voices.c and
 * voices_routes.c replace this file (delete it at that merge).
 */
#include <stdlib.h>

#include "http.h"
#include "serve.h"
#include "voices.h"

struct voices {
    int unused;
};

voices *voices_open(const kz_model *model, const char *dir, char *err, size_t n_err) {
    (void)model;
    (void)dir;
    (void)err;
    (void)n_err;
    return calloc(1, sizeof(voices));
}

void voices_free(voices *v) {
    free(v);
}

void voices_handle(server *s, http_req *r) {
    (void)s;
    http_error e;
    http_error_set(&e, 501, "server_error", NULL, "not_implemented", "voices are not built yet");
    http_send_error(r, &e);
}
