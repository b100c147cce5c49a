/*
 * serve.h - `kztts serve`: the server's configuration, its shared state and the route
 * handlers.
 *
 * Data flow: cmd_serve.c parses the options, loads the model once, opens the voices
 * store, the job queue (jobs.h: --parallel sessions, batched by one scheduler) and the
 * metrics, then starts the HTTP layer (http.h). Each request reaches routes.c, which
 * checks the API key and hands it to a handler below; the speech handler queues a job
 * whose worker synthesizes into a byte stream (stream.h) that the HTTP layer sends chunk
 * by chunk. SIGTERM/SIGINT set draining: /ready and new speech requests get 503 while
 * in-flight streams finish.
 */
#ifndef KZ_SERVE_H
#define KZ_SERVE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kztts.h"

typedef struct http_req http_req;
typedef struct jobs jobs;
typedef struct metrics metrics;
typedef struct voices voices;
typedef struct auth auth;

typedef struct serve_config {
    const char *model_path;
    const char *host;         /* default "127.0.0.1" */
    int port;                 /* default 8000; 0 = any free port (printed at start) */
    const char *voices_dir;   /* NULL: uploads refused, presets only */
    const char *api_key_file; /* NULL: no auth */
    const char *cors_origin;  /* NULL: no CORS headers */
    int parallel;             /* requests synthesizing at once, default 1 */
    int max_queue;            /* requests waiting beyond those, default 16 */
    int threads;              /* the server's compute threads, 0 = automatic (see
                                 jobs_params.n_threads) */
    int max_batch;            /* requests stepped together, 1..64: 1 = no scheduler;
                                 the option's 0 is resolved to min(parallel, 8) */
    size_t max_body;          /* request body limit, default 16 MiB */
    int max_input_chars;      /* `input` limit in characters, default 4096 */
    double drain_timeout;     /* seconds in-flight requests get after SIGTERM, default 25 */
    double request_timeout;   /* seconds a request may take in all, default 600 */
    double idle_timeout;      /* seconds a connection may stay silent, default 30 */
    bool quiet;               /* no per-request log lines */
} serve_config;

/* Everything a handler needs; one per process, shared by all connections. */
typedef struct server {
    const serve_config *cfg;
    kz_model *model;
    const char *model_id; /* what /v1/models lists: the model path's last component */
    int64_t created;      /* when the model finished loading (Unix seconds), for /v1/models */
    jobs *jobs;
    metrics *metrics;
    voices *voices;
    auth *auth;
    atomic_bool ready;    /* the model is loaded */
    atomic_bool draining; /* SIGTERM or SIGINT seen */
} server;

/* Route handlers (routes.c dispatches; each sends exactly one response on r). */
void route_dispatch(server *s, http_req *r);
void speech_handle(server *s, http_req *r);       /* POST /v1/audio/speech (speech.c) */
void voices_handle(server *s, http_req *r);       /* /v1/audio/voices[/{name}] (voices_routes.c) */

/* `kztts serve` (cmd_serve.c). */
int cmd_serve(int argc, char **argv);

#endif
