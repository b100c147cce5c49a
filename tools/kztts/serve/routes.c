/*
 * routes.c - route_dispatch: what `kztts serve` answers on which path.
 *
 * Data flow: a request with its whole body -> CORS headers when --cors is set (and a
 * preflight OPTIONS answered 204 here) -> the probes /health, /ready and /metrics,
 * open to everybody -> the API key (401 without a known one) -> the route table: a
 * known path with a method it takes goes to its handler (the model list here, speech
 * and voices in their own files); a known path with another method gets 405 and Allow;
 * any other path 404. Speech and voices wait for the model: 503 with Retry-After while
 * it loads and once draining started, so a load balancer sends the request elsewhere.
 */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "http.h"
#include "metrics.h"
#include "serve.h"

/* Seconds a refused client should wait: long enough for a load balancer to move on. */
#define RETRY_AFTER_S "5"

static const char PREFIX_MODELS[] = "/v1/models/";
static const char PREFIX_VOICES[] = "/v1/audio/voices/";

static bool starts_with(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void send_error(http_req *r, int status, const char *type, const char *code,
                       const char *message) {
    http_error e;
    http_error_set(&e, status, type, NULL, code, "%s", message);
    http_send_error(r, &e);
}

static void send_json(http_req *r, int status, cJSON *root) {
    char *text = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!text) {
        send_error(r, 500, "server_error", NULL, "out of memory");
        return;
    }
    http_send_json(r, status, text);
    free(text);
}

static void send_status(http_req *r, int status, const char *value) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "status", value);
    send_json(r, status, root);
}

static void method_not_allowed(http_req *r, const char *allow) {
    http_add_header(r, "Allow", allow);
    char message[128];
    snprintf(message, sizeof message, "%s is not allowed on %s (allowed: %s)", http_method(r),
             http_path(r), allow);
    send_error(r, 405, "invalid_request_error", "method_not_allowed", message);
}

static void unavailable(server *s, http_req *r) {
    const bool draining = atomic_load(&s->draining);
    metrics_rejected(s->metrics, "draining");
    http_add_header(r, "Retry-After", RETRY_AFTER_S);
    send_error(r, 503, "unavailable", draining ? "draining" : "loading",
               draining ? "the server is shutting down; retry on another replica"
                        : "the model is still loading; retry shortly");
}

static cJSON *model_object(const server *s) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", s->model_id ? s->model_id : "");
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)s->created);
    cJSON_AddStringToObject(m, "owned_by", "kztts");
    return m;
}

/* GET /v1/models and /v1/models/{id}. */
static void models(server *s, http_req *r) {
    const char *path = http_path(r);
    if (!atomic_load(&s->ready)) {
        unavailable(s, r);
        return;
    }
    if (strcmp(path, "/v1/models") == 0) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "object", "list");
        cJSON *data = cJSON_AddArrayToObject(root, "data");
        cJSON_AddItemToArray(data, model_object(s));
        send_json(r, 200, root);
        return;
    }
    const char *id = path + strlen(PREFIX_MODELS);
    if (!s->model_id || strcmp(id, s->model_id) != 0) {
        http_error e;
        http_error_set(&e, 404, "invalid_request_error", "model", "model_not_found",
                       "the model '%.200s' does not exist", id);
        http_send_error(r, &e);
        return;
    }
    send_json(r, 200, model_object(s));
}

static void ready(server *s, http_req *r) {
    if (atomic_load(&s->draining) || !atomic_load(&s->ready)) {
        http_add_header(r, "Retry-After", RETRY_AFTER_S);
        send_status(r, 503, atomic_load(&s->draining) ? "draining" : "loading");
        return;
    }
    send_status(r, 200, "ready");
}

static void metrics_route(server *s, http_req *r) {
    char *text = metrics_render(s->metrics, atomic_load(&s->ready) ? s->jobs : NULL);
    if (!text) {
        send_error(r, 500, "server_error", NULL, "out of memory");
        return;
    }
    http_send(r, 200, "text/plain; version=0.0.4", text, strlen(text));
    free(text);
}

static void speech(server *s, http_req *r) {
    if (!atomic_load(&s->ready) || atomic_load(&s->draining)) {
        unavailable(s, r);
        return;
    }
    speech_handle(s, r);
}

static void voices_route(server *s, http_req *r) {
    if (!atomic_load(&s->ready)) {
        unavailable(s, r);
        return;
    }
    voices_handle(s, r);
}

/* GET and HEAD are the same request to every read-only route (libmicrohttpd drops the
 * body of a HEAD answer), so both are listed. */
typedef struct route {
    const char *path;  /* exact path, or a prefix ending in '/' followed by one name */
    bool prefix;
    const char *name;  /* for logs and metrics */
    const char *allow; /* the methods the path takes, as sent in Allow */
    bool open;         /* no API key needed */
    void (*handle)(server *s, http_req *r);
} route;

static void health(server *s, http_req *r) {
    (void)s;
    send_status(r, 200, "ok");
}

static const route ROUTES[] = {
    {"/health", false, "health", "GET, HEAD", true, health},
    {"/ready", false, "ready", "GET, HEAD", true, ready},
    {"/metrics", false, "metrics", "GET, HEAD", true, metrics_route},
    {"/v1/models", false, "models", "GET, HEAD", false, models},
    {PREFIX_MODELS, true, "models", "GET, HEAD", false, models},
    {"/v1/audio/speech", false, "speech", "POST", false, speech},
    {"/v1/audio/voices", false, "voices", "GET, HEAD, POST", false, voices_route},
    {PREFIX_VOICES, true, "voices", "GET, HEAD, DELETE", false, voices_route},
};

static const route *find_route(const char *path) {
    for (size_t i = 0; i < sizeof ROUTES / sizeof ROUTES[0]; i++) {
        const route *rt = &ROUTES[i];
        if (rt->prefix ? starts_with(path, rt->path) && path[strlen(rt->path)] &&
                             !strchr(path + strlen(rt->path), '/')
                       : strcmp(path, rt->path) == 0) {
            return rt;
        }
    }
    return NULL;
}

/* Whether method is one of allow's comma-separated names. */
static bool allowed(const char *allow, const char *method) {
    const size_t n = strlen(method);
    for (const char *p = allow; (p = strstr(p, method)) != NULL; p += n) {
        if ((p == allow || p[-1] == ' ') && (p[n] == ',' || p[n] == '\0')) {
            return true;
        }
    }
    return false;
}

static void cors(server *s, http_req *r, const route *rt) {
    http_add_header(r, "Access-Control-Allow-Origin", s->cfg->cors_origin);
    http_add_header(r, "Access-Control-Expose-Headers", "X-Request-Id, Retry-After");
    if (strcmp(s->cfg->cors_origin, "*") != 0) {
        http_add_header(r, "Vary", "Origin");
    }
    if (strcmp(http_method(r), "OPTIONS") == 0) {
        http_add_header(r, "Access-Control-Allow-Methods", rt ? rt->allow : "GET, POST");
        http_add_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type");
        http_add_header(r, "Access-Control-Max-Age", "600");
    }
}

void route_dispatch(server *s, http_req *r) {
    const route *rt = find_route(http_path(r));
    http_set_route(r, rt ? rt->name : "unknown");
    if (s->cfg->cors_origin) {
        cors(s, r, rt);
        if (strcmp(http_method(r), "OPTIONS") == 0 && rt) {
            http_send(r, 204, NULL, "", 0); // preflight: the browser asks before it sends
            return;
        }
    }
    if (!(rt && rt->open) && !auth_ok(s->auth, http_header(r, "Authorization"))) {
        metrics_rejected(s->metrics, "auth");
        http_add_header(r, "WWW-Authenticate", "Bearer");
        send_error(r, 401, "authentication_error", "invalid_api_key",
                   "a valid API key is needed: send 'Authorization: Bearer <key>'");
        return;
    }
    if (!rt) {
        char message[300];
        snprintf(message, sizeof message, "no route %.200s", http_path(r));
        send_error(r, 404, "invalid_request_error", "not_found", message);
        return;
    }
    if (!allowed(rt->allow, http_method(r))) {
        method_not_allowed(r, rt->allow);
        return;
    }
    rt->handle(s, r);
}
