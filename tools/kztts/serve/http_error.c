/*
 * http_error.c - filling an http_error (http.h), apart from the HTTP layer so that the
 * request parser and the voices store, and their tests, use it without libmicrohttpd.
 */
#include <stdarg.h>
#include <stdio.h>

#include "http.h"

int http_error_vset(http_error *e, int status, const char *type, const char *param,
                    const char *code, const char *fmt, va_list ap) {
    e->status = status;
    e->type = type;
    e->param = param;
    e->code = code;
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    return status;
}

int http_error_set(http_error *e, int status, const char *type, const char *param,
                   const char *code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    http_error_vset(e, status, type, param, code, fmt, ap);
    va_end(ap);
    return status;
}
