/*
 * speech_stub.c - SCAFFOLD: POST /v1/audio/speech answers 501 until the speech
 * helper's speech.c replaces this file (delete it at that merge).
 */
#include "http.h"
#include "serve.h"

void speech_handle(server *s, http_req *r) {
    (void)s;
    http_error e;
    http_error_set(&e, 501, "server_error", NULL, "not_implemented", "speech is not built yet");
    http_send_error(r, &e);
}
