/*
 * error.h - status values, the thread-local last-error message and logging.
 *
 * Every fallible internal function returns a kz_status. The function that
 * detects a failure calls kz_error_set() once with the status and a one-line
 * message naming what failed (file, tensor, value); callers pass the status up
 * unchanged. kztts.c exposes the message through kz_last_error(). Logging goes
 * through the process-wide callback set with kz_log_set().
 */
#ifndef KZ_ERROR_H
#define KZ_ERROR_H

#include "kztts.h"

#if defined(__GNUC__)
#define KZ_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define KZ_PRINTF(a, b)
#endif

/* Records a failure message for this thread and returns `status`. The message
 * is also sent to the log at KZ_LOG_DEBUG. */
kz_status kz_error_set(kz_status status, const char *fmt, ...) KZ_PRINTF(2, 3);

/* Clears this thread's message. */
void kz_error_clear(void);

/* This thread's message ("" if none). */
const char *kz_error_get(void);

/* Sends a formatted message to the log callback if level >= the minimum. */
void kz_log(kz_log_level level, const char *fmt, ...) KZ_PRINTF(2, 3);

/* Internal invariant check: on in debug and test builds (NDEBUG unset). */
#include <assert.h>
#define KZ_ASSERT(cond) assert(cond)

#endif
