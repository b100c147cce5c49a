/*
 * error.c - thread-local last-error text, status names and the log callback.
 *
 * kz_error_set() formats into a thread-local buffer (so concurrent sessions on
 * different threads never mix messages); kz_log() forwards to the callback set
 * with kz_log_set(), by default printing warnings and errors to stderr.
 */
#include "runtime/error.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error[1024];

static void log_stderr(kz_log_level level, const char *message, void *user) {
    static const char *names[] = {"debug", "info", "warning", "error"};
    (void)user;
    fprintf(stderr, "kztts %s: %s\n", names[level], message);
}

static kz_log_fn log_fn = log_stderr;
static kz_log_level log_min = KZ_LOG_WARN;
static void *log_user;

void kz_log_set(kz_log_fn fn, kz_log_level min_level, void *user) {
    log_fn = fn ? fn : log_stderr;
    log_min = min_level;
    log_user = user;
}

static void log_va(kz_log_level level, const char *fmt, va_list ap) {
    if (level < log_min) {
        return;
    }
    char text[1024];
    vsnprintf(text, sizeof text, fmt, ap);
    log_fn(level, text, log_user);
}

void kz_log(kz_log_level level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    log_va(level, fmt, ap);
    va_end(ap);
}

kz_status kz_error_set(kz_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    kz_log(KZ_LOG_DEBUG, "%s", last_error);
    return status;
}

void kz_error_clear(void) {
    last_error[0] = '\0';
}

const char *kz_error_get(void) {
    return last_error;
}

const char *kz_status_str(kz_status status) {
    switch (status) {
    case KZ_OK: return "ok";
    case KZ_STATUS_INVALID_ARGUMENT: return "invalid argument";
    case KZ_STATUS_IO: return "i/o error";
    case KZ_STATUS_BAD_MODEL: return "bad model";
    case KZ_STATUS_BAD_INPUT: return "bad input";
    case KZ_STATUS_OUT_OF_MEMORY: return "out of memory";
    case KZ_STATUS_CANCELLED: return "cancelled";
    case KZ_STATUS_UNSUPPORTED: return "unsupported";
    case KZ_STATUS_INTERNAL: return "internal error";
    }
    return "unknown status";
}

const char *kz_last_error(void) {
    return last_error;
}
