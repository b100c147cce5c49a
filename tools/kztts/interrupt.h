/*
 * interrupt.h - Ctrl-C (SIGINT), SIGTERM or SIGHUP never leaves a half-written output
 * file behind.
 *
 * Outputs are written as "<OUT>.partial-XXXXXX" and renamed when complete
 * (audio_out.c, the GGUF writer). interrupt_init() blocks the three signals in the
 * process (every thread inherits the mask) and starts a watcher thread that waits
 * for them (sigwait). A command guards each output it is about to write; on a signal
 * the watcher removes the guarded outputs' partial files that this run created
 * (those not there when the guard was set), then lets the signal end the process as
 * it would have (exit status 128 + signal in a shell). Signals the process was
 * started with ignored (nohup) stay ignored.
 */
#ifndef KZ_INTERRUPT_H
#define KZ_INTERRUPT_H

/* Call first thing in main, before any thread exists. */
void interrupt_init(void);

/* Output `path` (not "-") is about to be written through a partial file. */
void interrupt_guard(const char *path);

/* The command is done with `path` (written or given up). */
void interrupt_unguard(const char *path);

#endif
