/*
 * interrupt.h - Ctrl-C (SIGINT), SIGTERM or SIGHUP never leaves a half-written output
 * file behind, and never removes anybody else's.
 *
 * Outputs are written as "<OUT>.partial-XXXXXX" and renamed when complete (out_file.c,
 * the library's GGUF writer). interrupt_init() blocks the three signals in the process
 * (every thread inherits the mask) and starts a watcher thread that waits for them
 * (sigwait). On a signal the watcher removes the temporary files this process tracks
 * (exact names: another process writing the same OUT keeps its own), then lets the
 * signal end the process as it would have (exit status 128 + signal in a shell).
 * A library call that owns its temporary file (kz_quantize) runs deferred instead: the
 * signal only sets interrupt_pending(), the call's progress callback returns false, the
 * library removes its file, and interrupt_defer_end() ends the process; a second signal
 * ends it at once. Signals the process was started with ignored (nohup) stay ignored.
 */
#ifndef KZ_INTERRUPT_H
#define KZ_INTERRUPT_H

#include <stdbool.h>

/* Call first thing in main, before any thread exists. */
void interrupt_init(void);

/* While held, no signal cleanup runs: a signal ends the process before a hold or after
 * it, so that creating and tracking a file, or renaming a command's outputs into place,
 * is never split. Not recursive. */
void interrupt_hold(void);
void interrupt_release(void);

/* With the hold: `tmp_path` is this process's temporary file, remove it on a signal
 * (returns -1 when out of room or memory) / it was renamed or removed. */
int interrupt_track(const char *tmp_path);
void interrupt_untrack(const char *tmp_path);

/* Around a library call that removes its own temporary file when its callback
 * cancels: a signal in between sets interrupt_pending(); interrupt_defer_end() then
 * ends the process by that signal. */
void interrupt_defer_begin(void);
void interrupt_defer_end(void);
bool interrupt_pending(void);

#endif
