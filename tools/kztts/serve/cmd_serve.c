/*
 * cmd_serve.c - `kztts serve`: the OpenAI-compatible speech server's process.
 *
 * Data flow: options -> the API keys and metrics -> listen (so /health answers and
 * /ready says "loading" while the model loads) -> one line "listening on URL" -> the
 * model, the job queue (--parallel sessions; with a batch of two or more, one scheduler
 * stepping them together on --threads threads), the voices store -> ready. The main thread
 * then waits for SIGTERM or SIGINT -> draining (/ready and new speech requests 503) ->
 * the queue refuses new jobs -> wait until no job runs or waits and no response is in
 * progress, at most --drain-timeout -> stop listening, close what is left, exit 0.
 * Signals reach this process through interrupt.c's watcher thread (it blocks them in
 * every thread and sigwaits): serve runs as one long "deferred" call, so the first
 * signal only sets interrupt_pending(), which the main thread polls; a second signal
 * ends the process at once, as an impatient operator wants.
 */
#define _DEFAULT_SOURCE /* strdup */

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "auth.h"
#include "cli.h"
#include "http.h"
#include "hub.h"
#include "interrupt.h"
#include "jobs.h"
#include "metrics.h"
#include "progress.h"
#include "serve.h"
#include "voices.h"

/* How often the main thread looks for a signal and, while draining, for idleness. */
#define WAIT_MS 50

/* By default every request in flight steps together, up to this many (kz_scheduler's own
 * default): a step takes longer the larger its batch, and the cap keeps each listener's
 * frames coming in time when --parallel is large. */
#define DEFAULT_MAX_BATCH 8

static void sleep_ms(int ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct serve_opts {
    serve_config cfg;
    const char *isa, *codec_precision, *kv_cache;
} serve_opts;

/* Parses argv into o; 0 to run, or the exit status (help: 0, bad options: 2). */
static int parse(int argc, char **argv, serve_opts *o, int *exit_status) {
    int64_t port = 8000, parallel = 1, max_queue = 16, threads = 0, max_body = 16 << 20,
            max_input = 4096, idle = 30, max_batch = 0;
    double drain = 25, request_timeout = 600;
    bool help = false, quiet = false;
    serve_config *c = &o->cfg;
    const arg_spec specs[] = {
        ARG_OPT_STRING("--model", "-m", &c->model_path, "MODEL checkpoint directory, .gguf file or Hugging Face repo id"),
        ARG_OPT_STRING("--host", NULL, &c->host, "HOST address to listen on (default 127.0.0.1; 0.0.0.0 or :: for every interface)"),
        ARG_OPT_INT("--port", "-p", &port, 0, 65535, "PORT to listen on (default 8000; 0 picks a free one, printed at start)"),
        ARG_OPT_STRING("--voices-dir", NULL, &c->voices_dir, "DIR where uploaded voices live, shareable by replicas (default: none, uploads refused)"),
        ARG_OPT_STRING("--api-key-file", NULL, &c->api_key_file, "FILE of API keys, one a line; requests then need 'Authorization: Bearer KEY' (default: no keys)"),
        ARG_OPT_INT("--parallel", NULL, &parallel, 1, 64, "N requests synthesizing at once, one session each (default 1)"),
        ARG_OPT_INT("--max-batch", NULL, &max_batch, 0, 64, "N requests whose language model steps together, one weight read for all (default 0: --parallel, at most 8; 1: no batching)"),
        ARG_OPT_INT("--max-queue", NULL, &max_queue, 0, 4096, "N requests waiting beyond those; more get 429 (default 16)"),
        ARG_OPT_INT("--max-body", NULL, &max_body, 1024, 1 << 30, "BYTES a request body may have; more gets 413 (default 16 MiB)"),
        ARG_OPT_INT("--max-input", NULL, &max_input, 1, 1 << 20, "CHARS of 'input' a speech request may have (default 4096)"),
        ARG_OPT_STRING("--cors", NULL, &c->cors_origin, "ORIGIN allowed to call from a browser ('*' for any; default: no CORS headers)"),
        ARG_OPT_DOUBLE("--drain-timeout", NULL, &drain, 0, 3600, "S seconds in-flight requests get to finish after SIGTERM or SIGINT (default 25)"),
        ARG_OPT_ABOVE("--request-timeout", NULL, &request_timeout, 0, 86400, "S seconds a request may take in all (default 600)"),
        ARG_OPT_INT("--idle-timeout", NULL, &idle, 1, 3600, "S seconds a connection may stay silent before it is closed (default 30)"),
        ARG_OPT_INT("--threads", "-t", &threads, 0, 1024, "N the server's compute threads: with batching, the one pool every request in flight computes on (default 0: online CPUs, at most 8); with --max-batch 1, shared among the sessions: N / --parallel each, at least 1 (default 0: online CPUs)"),
        ARG_OPT_CHOICE("--isa", NULL, &o->isa, CLI_ISA_NAMES, "ISA  cap the kernels' instruction set (default auto)"),
        ARG_OPT_CHOICE("--codec-precision", NULL, &o->codec_precision, CLI_PRECISION_NAMES, CLI_CODEC_PRECISION_HELP),
        ARG_OPT_CHOICE("--kv-cache", NULL, &o->kv_cache, CLI_KV_CACHE_NAMES, CLI_KV_CACHE_HELP),
        ARG_OPT_FLAG("--quiet", "-q", &quiet, "no log line per request, no progress lines"),
        ARG_OPT_FLAG("--help", "-h", &help, "show this help"),
    };
    const int n_specs = (int)(sizeof specs / sizeof specs[0]);
    const char *pos[1];
    int n_pos;
    if (args_parse("serve", specs, n_specs, argc, argv, pos, 0, &n_pos) != 0) {
        *exit_status = 2;
        return -1;
    }
    if (help || !c->model_path) {
        args_usage("serve", "-m MODEL [options]\n\n"
                   "An OpenAI-compatible speech server: POST /v1/audio/speech, /v1/audio/voices,\n"
                   "GET /v1/models, /health, /ready, /metrics. SIGTERM or SIGINT drains: /ready\n"
                   "and new speech requests get 503 while in-flight ones finish, then it exits 0;\n"
                   "a second signal ends it at once.",
                   specs, n_specs);
        *exit_status = help ? 0 : 2;
        return -1;
    }
    if (!c->host) {
        c->host = "127.0.0.1";
    }
    c->port = (int)port;
    c->parallel = (int)parallel;
    c->max_queue = (int)max_queue;
    c->threads = (int)threads;
    c->max_batch = max_batch > 0 ? (int)max_batch
                                 : (int)(parallel < DEFAULT_MAX_BATCH ? parallel : DEFAULT_MAX_BATCH);
    c->max_body = (size_t)max_body;
    c->max_input_chars = (int)max_input;
    c->drain_timeout = drain;
    c->request_timeout = request_timeout;
    c->idle_timeout = (double)idle;
    c->quiet = quiet;
    return 0;
}

/* The model at path with the ISA cap, codec precision and KV cache named by the options;
 * -1 after one line. */
static int load_model(const serve_opts *o, kz_model **model) {
    *model = NULL;
    kz_model_params mp;
    kz_model_default_params(&mp);
    if (o->isa) {
        mp.isa = (kz_isa_cap)args_choice_value(CLI_ISA_NAMES, o->isa);
    }
    if (cli_parse_codec_precision("serve", o->codec_precision, &mp.codec_precision) != 0 ||
        cli_parse_kv_cache("serve", o->kv_cache, &mp.kv_cache) != 0) {
        return -1;
    }
    char *dir;
    if (hub_resolve("serve", o->cfg.model_path, &dir) != 0) {
        return -1;
    }
    kz_status st = kz_model_load(dir, &mp, model);
    free(dir);
    if (st != KZ_OK) {
        cli_report("serve", st);
        return -1;
    }
    return 0;
}

/* What /v1/models calls the model: the last component of its path ("tiny", "x.gguf"). */
static char *model_id(const char *path) {
    char *copy = strdup(path);
    if (!copy) {
        return NULL;
    }
    size_t n = strlen(copy);
    while (n > 1 && copy[n - 1] == '/') {
        copy[--n] = '\0';
    }
    const char *slash = strrchr(copy, '/');
    char *id = strdup(slash && slash[1] ? slash + 1 : copy);
    free(copy);
    return id;
}

/* Loads the model and opens the queue and the voices store into s; -1 after one line. */
static int open_engine(server *s, const serve_opts *o) {
    char err[256];
    if (load_model(o, &s->model) != 0) {
        return -1;
    }
    const jobs_params jp = {.parallel = o->cfg.parallel, .max_queue = o->cfg.max_queue,
                            .n_threads = o->cfg.threads, .max_batch = o->cfg.max_batch};
    if (!(s->jobs = jobs_new(s->model, &jp, err, sizeof err)) ||
        !(s->voices = voices_open(s->model, o->cfg.voices_dir, err, sizeof err))) {
        fprintf(stderr, "kztts serve: %s\n", err);
        return -1;
    }
    s->created = (int64_t)time(NULL);
    return 0;
}

/* Draining: new speech requests are refused while the queue empties and responses in
 * progress finish, at most drain_timeout seconds. */
static void drain(server *s) {
    atomic_store(&s->draining, true);
    if (s->jobs) {
        jobs_close(s->jobs);
    }
    if (!s->cfg->quiet) {
        fprintf(stderr, "kztts serve: draining (at most %g s)\n", s->cfg->drain_timeout);
    }
    const double end = now_s() + s->cfg->drain_timeout;
    for (;;) {
        int running = 0, queued = 0;
        if (s->jobs) {
            jobs_counts(s->jobs, &running, &queued);
        }
        if ((running == 0 && queued == 0 && http_open_connections() == 0) || now_s() >= end) {
            return;
        }
        sleep_ms(WAIT_MS);
    }
}

static void close_all(server *s, char *id) {
    http_stop(); // closes what is left: their free callbacks cancel their synthesis
    jobs_free(s->jobs);
    voices_free(s->voices);
    kz_model_free(s->model);
    auth_free(s->auth);
    metrics_free(s->metrics);
    free(id);
}

int cmd_serve(int argc, char **argv) {
    interrupt_defer_begin(); // a signal from now on drains (see the top of this file)
    signal(SIGPIPE, SIG_IGN); // a client that left is seen by send's error instead
    serve_opts o = {0};
    int rc = 0;
    if (parse(argc, argv, &o, &rc) != 0) {
        return rc;
    }
    if (o.cfg.quiet) {
        progress_quiet();
    }
    char err[256];
    server s = {.cfg = &o.cfg};
    char *id = model_id(o.cfg.model_path);
    s.model_id = id;
    if (o.cfg.api_key_file && !(s.auth = auth_load(o.cfg.api_key_file, err, sizeof err))) {
        fprintf(stderr, "kztts serve: %s\n", err);
        free(id);
        return 2;
    }
    int port = 0;
    if (!id || !(s.metrics = metrics_new()) || http_start(&s, &port, err, sizeof err) != 0) {
        fprintf(stderr, "kztts serve: %s\n", id && s.metrics ? err : "out of memory");
        close_all(&s, id);
        return 1;
    }
    const bool v6 = strchr(o.cfg.host, ':') != NULL;
    fprintf(stderr, "kztts serve: listening on http://%s%s%s:%d\n", v6 ? "[" : "", o.cfg.host,
            v6 ? "]" : "", port);
    if (open_engine(&s, &o) != 0) {
        close_all(&s, id);
        return 1;
    }
    atomic_store(&s.ready, true);
    if (!o.cfg.quiet) {
        fprintf(stderr,
                "kztts serve: ready (model %s, %d parallel, batch %d, queue %d, talker kv %s)\n",
                id, o.cfg.parallel, o.cfg.max_batch, o.cfg.max_queue,
                o.kv_cache ? o.kv_cache : "f32");
    }
    while (!interrupt_pending()) {
        sleep_ms(WAIT_MS);
    }
    drain(&s);
    http_quiesce();
    close_all(&s, id);
    if (!o.cfg.quiet) {
        fprintf(stderr, "kztts serve: stopped\n");
    }
    return 0;
}
