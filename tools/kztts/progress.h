/*
 * progress.h - one status line on stderr for long work (`synth` and `decode` to a file:
 * audio seconds made and speed; `quantize`: tensors written), redrawn in place at most
 * ten times a second, and only when stderr is a terminal and --quiet was not given: a log
 * file or a pipe gets no progress lines. The download bars (hub.c) follow the same switch.
 */
#ifndef KZ_PROGRESS_H
#define KZ_PROGRESS_H

#include <stdbool.h>

/* --quiet: no progress line in this process, downloads' included. */
void progress_quiet(void);

/* Whether progress is drawn at all: stderr is a terminal and not quiet. */
bool progress_terminal(void);

typedef struct progress {
    bool on;     /* drawn: wanted by the command and progress_terminal() */
    bool shown;  /* a line is on the screen */
    double t0;   /* progress_begin's time, seconds */
    double last; /* the last redraw's time */
} progress;

/* Starts the clock; the line is drawn when `wanted` (the command's choice, e.g. not when
 * the audio goes to stdout) and progress_terminal(). */
void progress_begin(progress *p, bool wanted);

/* Seconds since progress_begin. */
double progress_elapsed(const progress *p);

/* Redraws the line as printf(fmt, ...); skipped within 0.1 s of the last redraw
 * unless `force`. */
void progress_show(progress *p, bool force, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Ends the line (it stays on the screen), so what is printed next starts a line of
 * its own. */
void progress_end(progress *p);

#endif
