/*
 * interrupt.c - removes this process's "<OUT>.partial-*" files when a signal ends it
 * (see interrupt.h).
 *
 * Data flow: out_file.c, under interrupt_hold: mkstemp -> interrupt_track(exact name);
 * rename or unlink -> interrupt_untrack. Signal -> watcher thread (sigwait) -> under the
 * lock: unlink every tracked name -> deferred call running? remember the signal, wait for
 * the next one : default action, unblock, raise. The watcher is an ordinary thread, so it
 * may take the lock, which a signal handler could not.
 */
#define _DEFAULT_SOURCE /* strdup under -std=c11 */

#include "interrupt.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MAX_TRACKED = 8 };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char *tracked[MAX_TRACKED]; /* this process's temporary files, exact names */
static sigset_t watched;
static bool deferring;             /* a deferred library call runs (under the lock) */
static atomic_int pending;         /* the signal that arrived during it, or 0 */

static void remove_tracked(void) {
    for (int i = 0; i < MAX_TRACKED; i++) {
        if (tracked[i]) {
            unlink(tracked[i]);
        }
    }
}

/* Ends the process the way `sig` would have; called with the lock held, which stays held
 * so that nothing starts a new file meanwhile. */
static void die(int sig) {
    signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    raise(sig);
    _exit(128 + sig);
}

static void *watch(void *arg) {
    (void)arg;
    for (;;) {
        int sig = 0;
        if (sigwait(&watched, &sig) != 0) {
            return NULL;
        }
        pthread_mutex_lock(&lock);
        remove_tracked();
        if (deferring && atomic_load(&pending) == 0) {
            // The deferred call removes its own file and interrupt_defer_end ends the
            // process; a second signal does not wait for it.
            atomic_store(&pending, sig);
            pthread_mutex_unlock(&lock);
            continue;
        }
        die(sig);
    }
}

void interrupt_init(void) {
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    sigemptyset(&watched);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old;
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN) {
            sigaddset(&watched, sigs[i]);
        }
    }
    if (pthread_sigmask(SIG_BLOCK, &watched, NULL) != 0) {
        return;
    }
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, watch, NULL) != 0) { // no watcher: signals act as before
        pthread_sigmask(SIG_UNBLOCK, &watched, NULL);
    }
    pthread_attr_destroy(&attr);
}

void interrupt_hold(void) {
    pthread_mutex_lock(&lock);
}

void interrupt_release(void) {
    pthread_mutex_unlock(&lock);
}

int interrupt_track(const char *tmp_path) {
    for (int i = 0; i < MAX_TRACKED; i++) {
        if (!tracked[i]) {
            tracked[i] = strdup(tmp_path);
            return tracked[i] ? 0 : -1;
        }
    }
    return -1;
}

void interrupt_untrack(const char *tmp_path) {
    for (int i = 0; i < MAX_TRACKED; i++) {
        if (tracked[i] && strcmp(tracked[i], tmp_path) == 0) {
            free(tracked[i]);
            tracked[i] = NULL;
            return;
        }
    }
}

void interrupt_defer_begin(void) {
    pthread_mutex_lock(&lock);
    deferring = true;
    pthread_mutex_unlock(&lock);
}

void interrupt_defer_end(void) {
    pthread_mutex_lock(&lock);
    deferring = false;
    const int sig = atomic_load(&pending);
    if (sig) {
        remove_tracked();
        die(sig);
    }
    pthread_mutex_unlock(&lock);
}

bool interrupt_pending(void) {
    return atomic_load(&pending) != 0;
}
