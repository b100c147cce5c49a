/*
 * progress.c - the status line of long commands (see progress.h): "\r" + text + erase to
 * the end of the line, so each redraw replaces the last on a terminal.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, isatty */

#include "progress.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool quiet;

void progress_quiet(void) {
    quiet = true;
}

bool progress_terminal(void) {
    return !quiet && isatty(STDERR_FILENO);
}

void progress_begin(progress *p, bool wanted) {
    *p = (progress){.on = wanted && progress_terminal(), .t0 = now_s()};
}

double progress_elapsed(const progress *p) {
    return now_s() - p->t0;
}

void progress_show(progress *p, bool force, const char *fmt, ...) {
    if (!p->on) {
        return;
    }
    const double t = now_s();
    if (!force && p->shown && t - p->last < 0.1) {
        return;
    }
    p->last = t;
    p->shown = true;
    va_list ap;
    va_start(ap, fmt);
    fputc('\r', stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\033[K", stderr);
    va_end(ap);
    fflush(stderr);
}

void progress_end(progress *p) {
    if (p->shown) {
        fputc('\n', stderr);
        p->shown = false;
    }
}
