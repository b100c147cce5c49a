/*
 * interrupt.c - removes this run's "<OUT>.partial-*" files when a signal ends the
 * process (see interrupt.h).
 *
 * Data flow: interrupt_guard(OUT) -> a guard {OUT's folder, "<name>.partial-",
 * the names with that prefix already there}; signal -> watcher thread (sigwait)
 * -> under the lock, per guard: readdir the folder, unlink each entry with the
 * prefix that is not in the snapshot -> default action, unblock, raise.
 * The watcher runs as an ordinary thread, so it may use opendir and malloc'd
 * state, which a signal handler could not.
 */
#define _DEFAULT_SOURCE /* DT_* and strdup under -std=c11 */

#include "interrupt.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MAX_GUARDS = 4 };

typedef struct guard {
    char *path;     /* the output as given */
    char *dir;      /* its folder ("." for a bare name) */
    char *prefix;   /* "<name>.partial-" */
    char **before;  /* prefixed names present when the guard was set */
    size_t n_before;
} guard;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static guard guards[MAX_GUARDS];
static sigset_t watched;
static bool active;

static void guard_free(guard *g) {
    for (size_t i = 0; i < g->n_before; i++) {
        free(g->before[i]);
    }
    free(g->before);
    free(g->path);
    free(g->dir);
    free(g->prefix);
    memset(g, 0, sizeof *g);
}

static bool listed(const guard *g, const char *name) {
    for (size_t i = 0; i < g->n_before; i++) {
        if (strcmp(g->before[i], name) == 0) {
            return true;
        }
    }
    return false;
}

/* Calls fn(g, name) for each entry of g's folder that starts with g->prefix. */
static void each_partial(guard *g, void (*fn)(guard *, const char *)) {
    DIR *d = opendir(g->dir);
    if (!d) {
        return;
    }
    const size_t n = strlen(g->prefix);
    for (struct dirent *e = readdir(d); e; e = readdir(d)) {
        if (strncmp(e->d_name, g->prefix, n) == 0) {
            fn(g, e->d_name);
        }
    }
    closedir(d);
}

static void remember(guard *g, const char *name) {
    char **grown = realloc(g->before, (g->n_before + 1) * sizeof *grown);
    char *copy = strdup(name);
    if (!grown || !copy) { // out of memory: such a file may later be removed, never kept
        free(copy);
        g->before = grown ? grown : g->before;
        return;
    }
    g->before = grown;
    g->before[g->n_before++] = copy;
}

static void remove_new(guard *g, const char *name) {
    if (listed(g, name)) {
        return;
    }
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", g->dir, name) < sizeof path) {
        unlink(path);
    }
}

static void *watch(void *arg) {
    (void)arg;
    int sig = 0;
    if (sigwait(&watched, &sig) != 0) {
        return NULL;
    }
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_GUARDS; i++) {
        if (guards[i].path) {
            each_partial(&guards[i], remove_new);
        }
    }
    // End the process the way the signal would have (the lock stays held: nothing
    // else may start a guard now).
    signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    raise(sig);
    _exit(128 + sig);
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
    active = pthread_create(&t, &attr, watch, NULL) == 0;
    pthread_attr_destroy(&attr);
    if (!active) { // no watcher: let the signals act as before
        pthread_sigmask(SIG_UNBLOCK, &watched, NULL);
    }
}

void interrupt_guard(const char *path) {
    if (!active || !path || strcmp(path, "-") == 0) {
        return;
    }
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_GUARDS; i++) {
        guard *g = &guards[i];
        if (g->path) {
            continue;
        }
        const char *slash = strrchr(path, '/');
        const char *name = slash ? slash + 1 : path;
        g->path = strdup(path);
        g->dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
        g->prefix = malloc(strlen(name) + sizeof ".partial-");
        if (!g->path || !g->dir || !g->prefix) {
            guard_free(g);
            break;
        }
        sprintf(g->prefix, "%s.partial-", name);
        each_partial(g, remember);
        break;
    }
    pthread_mutex_unlock(&lock);
}

void interrupt_unguard(const char *path) {
    if (!active || !path) {
        return;
    }
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_GUARDS; i++) {
        if (guards[i].path && strcmp(guards[i].path, path) == 0) {
            guard_free(&guards[i]);
            break;
        }
    }
    pthread_mutex_unlock(&lock);
}
