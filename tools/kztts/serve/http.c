/*
 * http.c - the HTTP layer of `kztts serve` over libmicrohttpd (see http.h).
 *
 * Data flow, one request on its connection's thread:
 *   headers -> on_request (first call): an http_req, "req-<n>", Content-Length beyond
 *   --max-body answered 413 at once (the body is never read) -> body chunks appended
 *   (past the limit without a Content-Length: the rest is read and dropped, up to
 *   another --max-body, then 413; a body longer still closes the connection) -> last call:
 *   route_dispatch, which sends one response: a buffer (http_send*) or a stream
 *   (http_send_stream: read_body pulls from stream_read as the worker writes, sent
 *   chunked) -> on_completed: the log line, metrics_request, the request freed.
 * The response's free callback cancels its stream, so a client that went away stops
 * its synthesis. The idle timeout (slowloris) is lifted while a handler runs (it may
 * wait in the queue) and re-armed whenever response bytes are ready, so only a silent
 * client, never a busy worker, is timed out.
 */
#define _GNU_SOURCE /* POLLRDHUP, strdup */

#include "http.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "metrics.h"
#include "stream.h"

/* How often a waiting response checks its client and deadline. */
#define POLL_MS 200
/* Bytes read_body hands libmicrohttpd at most per call. */
#define BLOCK_BYTES (16 * 1024)

/* A declared body over --max-body but at most this long is read and dropped before its
 * 413, unless the client waits for 100 Continue: answering in the middle of a body makes
 * the library close on a client that is still sending, which then sees a reset instead of
 * the 413. Longer declared bodies get the 413 at once. */
#define DRAIN_MAX ((unsigned long long)64 << 20)

typedef struct header_kv {
    char *name, *value;
    struct header_kv *next;
} header_kv;

struct http_req {
    server *srv;
    struct MHD_Connection *conn;
    char *method, *path;
    char id[32];
    const char *route;
    char *body;
    size_t n_body, cap_body;
    size_t n_dropped;     /* body bytes read and dropped after it passed --max-body */
    bool draining;        /* its declared length is over --max-body: every byte dropped */
    header_kv *headers;   /* added to the response */
    int status;           /* 0 until a response is queued */
    stream *st;           /* the streamed body's stream (a reference), or NULL */
    double t_start;
};

/* A streamed body as libmicrohttpd reads it; outlives the http_req when the response
 * is freed after the request completed. */
typedef struct body_reader {
    stream *st;
    struct MHD_Connection *conn;
    metrics *metrics;
    int fd;
    unsigned idle_s;
    double deadline; /* monotonic seconds */
} body_reader;

static struct MHD_Daemon *daemon_;
static atomic_int n_open;        /* requests between their first call and completion */
static atomic_uint_fast64_t n_ids;
static atomic_bool stopping;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *http_method(const http_req *r) {
    return r->method;
}

const char *http_path(const http_req *r) {
    return r->path;
}

const char *http_header(const http_req *r, const char *name) {
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *http_query(const http_req *r, const char *name) {
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

const void *http_body(const http_req *r, size_t *n_bytes) {
    *n_bytes = r->n_body;
    return r->body ? r->body : "";
}

const char *http_request_id(const http_req *r) {
    return r->id;
}

void http_set_route(http_req *r, const char *name) {
    r->route = name;
}

void http_add_header(http_req *r, const char *name, const char *value) {
    header_kv *h = calloc(1, sizeof *h);
    if (!h || !(h->name = strdup(name)) || !(h->value = strdup(value))) {
        if (h) {
            free(h->name);
            free(h);
        }
        return; // out of memory: the response goes without this header
    }
    header_kv **tail = &r->headers;
    while (*tail) {
        tail = &(*tail)->next;
    }
    *tail = h;
}

static int conn_fd(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

/* Whether the peer closed or reset the socket: an orderly end reads as 0 bytes, a reset
 * as an error; pending bytes (a pipelined request) or nothing yet mean it is still there. */
static bool fd_gone(int fd) {
    if (fd < 0) {
        return false;
    }
    char c;
    ssize_t got = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (got == 0) {
        return true;
    }
    if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return true;
    }
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

bool http_client_gone(http_req *r) {
    return atomic_load(&stopping) || fd_gone(conn_fd(r->conn));
}

/* Re-arms the idle timeout from now: libmicrohttpd restarts its clock when the timeout
 * goes from none to some. */
static void idle_restart(struct MHD_Connection *conn, unsigned idle_s) {
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, idle_s);
}

/* Adds X-Request-Id and the handler's headers to resp, then queues it. */
static int queue(http_req *r, int status, struct MHD_Response *resp) {
    if (!resp) {
        return -1;
    }
    MHD_add_response_header(resp, "X-Request-Id", r->id);
    for (header_kv *h = r->headers; h; h = h->next) {
        MHD_add_response_header(resp, h->name, h->value);
    }
    enum MHD_Result ok = MHD_queue_response(r->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    if (ok != MHD_YES) {
        return -1;
    }
    r->status = status;
    return 0;
}

int http_send(http_req *r, int status, const char *content_type, const void *body, size_t n) {
    if (r->status) {
        return -1; // one response per request
    }
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(n, (void *)(n ? body : ""), MHD_RESPMEM_MUST_COPY);
    if (resp && content_type) {
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    }
    return queue(r, status, resp);
}

int http_send_json(http_req *r, int status, const char *json_text) {
    return http_send(r, status, "application/json", json_text, strlen(json_text));
}

int http_send_error(http_req *r, const http_error *e) {
    cJSON *root = cJSON_CreateObject();
    cJSON *err = cJSON_AddObjectToObject(root, "error");
    if (err) {
        cJSON_AddStringToObject(err, "message", e->message);
        cJSON_AddStringToObject(err, "type", e->type ? e->type : "server_error");
        if (e->param) {
            cJSON_AddStringToObject(err, "param", e->param);
        } else {
            cJSON_AddNullToObject(err, "param");
        }
        if (e->code) {
            cJSON_AddStringToObject(err, "code", e->code);
        } else {
            cJSON_AddNullToObject(err, "code");
        }
    }
    char *text = err ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    // Out of memory: a fixed envelope still tells the client what happened.
    int rc = http_send_json(r, e->status,
                            text ? text
                                 : "{\"error\":{\"message\":\"out of memory\",\"type\":"
                                   "\"server_error\",\"param\":null,\"code\":null}}");
    free(text);
    return rc;
}

static ssize_t read_body(void *cls, uint64_t pos, char *buf, size_t max) {
    body_reader *b = cls;
    for (;;) {
        const bool late = now_s() > b->deadline;
        if (late || atomic_load(&stopping)) {
            if (late) {
                metrics_rejected(b->metrics, "timeout");
            }
            stream_cancel(b->st);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        ssize_t got = stream_read(b->st, (size_t)pos, buf, max, POLL_MS);
        if (got > 0 || got == -1) {
            // The wait was the worker's, not the client's: the client's clock starts now.
            idle_restart(b->conn, b->idle_s);
            return got > 0 ? got : MHD_CONTENT_READER_END_OF_STREAM;
        }
        if (got < 0) {
            return MHD_CONTENT_READER_END_WITH_ERROR; // failed after bytes went out: cut
        }
        if (fd_gone(b->fd)) {
            stream_cancel(b->st);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
}

/* The response is gone (sent, or its client left): its synthesis has nobody to go to. */
static void free_body(void *cls) {
    body_reader *b = cls;
    stream_cancel(b->st);
    stream_unref(b->st);
    free(b);
}

int http_send_stream(http_req *r, int status, const char *content_type, stream *s) {
    if (r->status) {
        return -1;
    }
    body_reader *b = calloc(1, sizeof *b);
    if (!b) {
        return -1;
    }
    const serve_config *cfg = r->srv->cfg;
    b->st = s;
    b->conn = r->conn;
    b->metrics = r->srv->metrics;
    b->fd = conn_fd(r->conn);
    b->idle_s = (unsigned)cfg->idle_timeout;
    b->deadline = r->t_start + cfg->request_timeout;
    stream_ref(s);
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, BLOCK_BYTES, read_body, b, free_body);
    if (!resp) {
        stream_unref(s);
        free(b);
        return -1;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    stream_ref(s); // the request's own, for the stats in the log line
    r->st = s;
    return queue(r, status, resp); // on failure libmicrohttpd freed resp: free_body ran
}

static http_req *req_new(server *srv, struct MHD_Connection *conn, const char *url,
                         const char *method) {
    http_req *r = calloc(1, sizeof *r);
    if (!r) {
        return NULL;
    }
    r->method = strdup(method);
    r->path = strdup(url);
    if (!r->method || !r->path) {
        free(r->method);
        free(r->path);
        free(r);
        return NULL;
    }
    r->srv = srv;
    r->conn = conn;
    r->route = "unknown";
    r->t_start = now_s();
    snprintf(r->id, sizeof r->id, "req-%" PRIuFAST64, atomic_fetch_add(&n_ids, 1) + 1);
    atomic_fetch_add(&n_open, 1);
    return r;
}

static void req_free(http_req *r) {
    while (r->headers) {
        header_kv *h = r->headers;
        r->headers = h->next;
        free(h->name);
        free(h->value);
        free(h);
    }
    if (r->st) {
        stream_unref(r->st);
    }
    free(r->body);
    free(r->method);
    free(r->path);
    free(r);
    atomic_fetch_sub(&n_open, 1);
}

static enum MHD_Result too_large(http_req *r) {
    metrics_rejected(r->srv->metrics, "body_too_large");
    http_error e;
    http_error_set(&e, 413, "invalid_request_error", NULL, "body_too_large",
                   "the request body is larger than the limit of %zu bytes",
                   r->srv->cfg->max_body);
    return http_send_error(r, &e) == 0 ? MHD_YES : MHD_NO;
}

/* Appends a body chunk; false when memory ran out. */
static bool body_append(http_req *r, const char *data, size_t n) {
    if (r->n_body + n + 1 > r->cap_body) {
        size_t cap = r->cap_body ? r->cap_body : 4096;
        while (cap < r->n_body + n + 1) {
            cap *= 2;
        }
        char *body = realloc(r->body, cap);
        if (!body) {
            return false;
        }
        r->body = body;
        r->cap_body = cap;
    }
    memcpy(r->body + r->n_body, data, n);
    r->n_body += n;
    r->body[r->n_body] = '\0';
    return true;
}

/* One chunk of a body. A body declared over the limit (draining) is dropped whole; one
 * without a Content-Length that grows past the limit is read on and dropped, since no
 * response can be queued in the middle of a body; the client gets its 413 at the end,
 * unless it sends another --max-body, which closes the connection so that an endless
 * body cannot hold it. */
static enum MHD_Result body_chunk(http_req *r, const char *data, size_t *n) {
    const size_t limit = r->srv->cfg->max_body;
    if (r->draining) {
        r->n_dropped += *n;
    } else if (r->n_dropped == 0 && *n <= limit - r->n_body) {
        if (!body_append(r, data, *n)) { // no memory for a body within the limit
            r->status = 500;
            return MHD_NO;
        }
    } else if (*n <= limit - r->n_dropped) {
        r->n_dropped += *n;
    } else {
        metrics_rejected(r->srv->metrics, "body_too_large");
        r->status = 413;
        return MHD_NO;
    }
    *n = 0;
    return MHD_YES;
}

/* The client sent Expect (100-continue): it sends its body only after an interim answer. */
static bool waits_for_continue(struct MHD_Connection *conn) {
    return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT) != NULL;
}

static void dispatch(http_req *r) {
    MHD_set_connection_option(r->conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    route_dispatch(r->srv, r);
    if (!r->status) {
        http_error e;
        http_error_set(&e, 500, "server_error", NULL, NULL, "the handler sent no response");
        http_send_error(r, &e);
    }
    MHD_set_connection_option(r->conn, MHD_CONNECTION_OPTION_TIMEOUT,
                              (unsigned)r->srv->cfg->idle_timeout);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    (void)version;
    server *srv = cls;
    http_req *r = *con_cls;
    if (!r) {
        if (!(r = req_new(srv, conn, url, method))) {
            return MHD_NO;
        }
        *con_cls = r;
        const char *length = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                         MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (length) {
            errno = 0;
            char *end;
            unsigned long long n = strtoull(length, &end, 10);
            if (errno == ERANGE || n > srv->cfg->max_body) {
                if (errno == ERANGE || n > DRAIN_MAX || waits_for_continue(conn)) {
                    return too_large(r);
                }
                r->draining = true;
            }
        }
        return MHD_YES;
    }
    if (r->status) { // answered early (413): what follows is not read
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size) {
        return body_chunk(r, upload_data, upload_data_size);
    }
    if (r->n_dropped || r->draining) {
        return too_large(r);
    }
    dispatch(r);
    return MHD_YES;
}

static void log_line(const http_req *r, enum MHD_RequestTerminationCode toe, double total_s,
                     double audio_s, double first_ms) {
    char first[32] = "-";
    if (first_ms >= 0) {
        snprintf(first, sizeof first, "%.0fms", first_ms);
    }
    fprintf(stderr, "%s %s %s %s %d audio=%.2fs first_audio=%s total=%.0fms%s\n", r->id,
            r->method, r->path, r->route, r->status, audio_s, first, total_s * 1000.0,
            toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection closed early)");
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)conn;
    server *srv = cls;
    http_req *r = *con_cls;
    if (!r) {
        return;
    }
    *con_cls = NULL;
    const double total_s = now_s() - r->t_start;
    double audio_s = 0, first_ms = -1;
    if (r->st) {
        audio_s = stream_audio_seconds(r->st);
        first_ms = stream_first_audio_ms(r->st);
    }
    if (!srv->cfg->quiet) {
        log_line(r, toe, total_s, audio_s, first_ms);
    }
    metrics_request(srv->metrics, r->route, r->status, total_s,
                    first_ms >= 0 ? first_ms / 1000.0 : -1.0, audio_s);
    req_free(r);
}

/* The first address host resolves to, as a passive (listening) address. */
static int resolve(const char *host, int port, struct sockaddr_storage *addr, socklen_t *n,
                   char *err, size_t n_err) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char port_text[16];
    snprintf(port_text, sizeof port_text, "%d", port);
    int rc = getaddrinfo(host, port_text, &hints, &res);
    if (rc != 0 || !res) {
        snprintf(err, n_err, "cannot resolve host '%s': %s", host, gai_strerror(rc));
        return -1;
    }
    memcpy(addr, res->ai_addr, res->ai_addrlen);
    *n = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

/* Connections beyond this are closed as soon as they are accepted: room for every
 * request the workers and the queue hold several times over, so that clients beyond the
 * queue still get their 429 and probes still get in, while a flood of idle connections
 * (one thread each) stays bounded. */
static unsigned connection_limit(const serve_config *cfg) {
    return (unsigned)(cfg->parallel + cfg->max_queue) * 4u + 256u;
}

int http_start(server *s, int *port_out, char *err, size_t n_err) {
    const serve_config *cfg = s->cfg;
    struct sockaddr_storage addr;
    socklen_t n_addr;
    if (resolve(cfg->host, cfg->port, &addr, &n_addr, err, n_err) != 0) {
        return -1;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_ITC;
    if (addr.ss_family == AF_INET6) {
        flags |= MHD_USE_IPv6;
    }
    atomic_store(&stopping, false);
    daemon_ = MHD_start_daemon(
        flags, (uint16_t)cfg->port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->idle_timeout,
        MHD_OPTION_CONNECTION_LIMIT, connection_limit(cfg), MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, s, MHD_OPTION_END);
    if (!daemon_) {
        snprintf(err, n_err, "cannot listen on %s:%d (address in use or not allowed?)",
                 cfg->host, cfg->port);
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT);
    *port_out = di ? di->port : cfg->port;
    return 0;
}

void http_quiesce(void) {
    if (daemon_) {
        MHD_socket fd = MHD_quiesce_daemon(daemon_);
        if (fd != MHD_INVALID_SOCKET) {
            close(fd);
        }
    }
}

int http_open_connections(void) {
    return atomic_load(&n_open);
}

void http_stop(void) {
    if (daemon_) {
        atomic_store(&stopping, true); // responses waiting for bytes give up
        MHD_stop_daemon(daemon_);
        daemon_ = NULL;
    }
}
