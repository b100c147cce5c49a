/*
 * http.h - the HTTP layer of `kztts serve` over libmicrohttpd, as handlers see it.
 *
 * One thread per connection (MHD_USE_THREAD_PER_CONNECTION): a handler may block (wait
 * in the queue, wait for a job's first bytes). The layer reads the whole body first
 * (413 beyond --max-body), then calls route_dispatch once; the handler sends exactly one
 * response. A streamed response pulls its bytes from a stream (stream.h) as the worker
 * writes them, with chunked transfer encoding. When the response is done (or the client
 * went away) the layer writes the log line and records the request in the metrics.
 */
#ifndef KZ_HTTP_H
#define KZ_HTTP_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "serve.h"

typedef struct stream stream;

/* An error in OpenAI's envelope {"error":{"message","type","param","code"}}. */
typedef struct http_error {
    int status;         /* 400, 401, 404, 413, 429, 500, 503 */
    const char *type;   /* "invalid_request_error", "authentication_error",
                           "rate_limit_error", "server_error", "unavailable" */
    const char *param;  /* the offending field, or NULL */
    const char *code;   /* a short code ("invalid_value", "unknown_voice"...), or NULL */
    char message[384];
} http_error;

/* Fills e (message printf-style); returns e->status. */
int http_error_set(http_error *e, int status, const char *type, const char *param,
                   const char *code, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* http_error_set with a va_list. */
int http_error_vset(http_error *e, int status, const char *type, const char *param,
                    const char *code, const char *fmt, va_list ap)
    __attribute__((format(printf, 6, 0)));

/* Request. Strings stay valid until the response is done. */
const char *http_method(const http_req *r);                   /* "GET", "POST", ... */
const char *http_path(const http_req *r);                     /* without the query */
const char *http_header(const http_req *r, const char *name); /* case-insensitive; NULL */
const char *http_query(const http_req *r, const char *name);  /* NULL when absent */
const void *http_body(const http_req *r, size_t *n_bytes);    /* NUL-terminated too */
const char *http_request_id(const http_req *r);               /* "req-<n>", also sent back
                                                                  as X-Request-Id */

/* The route name for logs and metrics ("speech", "voices", "health", ...); set by
 * route_dispatch, default "unknown". name must be a string literal. */
void http_set_route(http_req *r, const char *name);

/* Adds a header to the response about to be sent (e.g. Retry-After). */
void http_add_header(http_req *r, const char *name, const char *value);

/* Whether the client closed its end (checked on the socket without reading). */
bool http_client_gone(http_req *r);

/* Responses: each returns 0, or -1 when the response could not be queued. */
int http_send(http_req *r, int status, const char *content_type, const void *body, size_t n);
int http_send_json(http_req *r, int status, const char *json_text);
int http_send_error(http_req *r, const http_error *e);
/* A chunked response whose body is read from s (the layer takes a reference). The
 * stream's audio seconds and first-audio time go to the log line and the metrics. */
int http_send_stream(http_req *r, int status, const char *content_type, stream *s);

/* Starts the daemon on cfg->host:cfg->port for s (the port actually bound goes to
 * *port_out). Returns 0, or -1 with one line in err. */
int http_start(server *s, int *port_out, char *err, size_t n_err);

/* Stops accepting connections (the listening socket closes) while open ones go on. */
void http_quiesce(void);

/* Connections still open (responses in progress). */
int http_open_connections(void);

/* Stops the daemon, closing every connection. */
void http_stop(void);

#endif
