/*
 * speech_refusal.h - which field of a speech request a refusal by the library concerns,
 * so the 400 built from it names that field in the error's param.
 *
 * The library checks what only the model can judge (top_k against its vocabulary, the
 * speaker, the language, the prompt's length) and says why in kz_last_error's message,
 * which names the kz_request member it refuses. The server knows which request fields it
 * passed on (speech_args): the earliest word of the message that is the library's name
 * for one of those fields gives the param.
 */
#ifndef KZ_SPEECH_REFUSAL_H
#define KZ_SPEECH_REFUSAL_H

#include "speech_args.h"

/* The request field (a static string: "top_k", "language", "voice", "ref_audio",
 * "input", ...) that message, a library refusal of the request a, concerns; NULL when
 * the message names none of the fields a passed on. */
const char *speech_refusal_param(const speech_args *a, const char *message);

#endif
