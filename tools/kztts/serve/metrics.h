/*
 * metrics.h - the server's Prometheus metrics (text exposition format 0.0.4):
 *   kztts_requests_total{route,status}            counter
 *   kztts_request_duration_seconds{route}         histogram
 *   kztts_time_to_first_audio_seconds             histogram (speech requests with audio)
 *   kztts_audio_seconds_total                     counter
 *   kztts_requests_rejected_total{reason}         counter (queue_full, draining, auth,
 *                                                   body_too_large, timeout)
 *   kztts_requests_running, kztts_requests_queued gauges (from jobs.h at render time)
 * Thread-safe; updated when a response is done.
 */
#ifndef KZ_METRICS_H
#define KZ_METRICS_H

#include <stddef.h>

#include "jobs.h"

typedef struct metrics metrics;

metrics *metrics_new(void); /* NULL when out of memory */
void metrics_free(metrics *m);

/* One finished request. first_audio_s < 0: it produced no audio. route is a literal. */
void metrics_request(metrics *m, const char *route, int status, double duration_s,
                     double first_audio_s, double audio_s);

/* One request refused for reason (a literal, see above). */
void metrics_rejected(metrics *m, const char *reason);

/* The exposition text (malloc'ed, caller frees), gauges read from j (may be NULL).
 * NULL when out of memory. */
char *metrics_render(metrics *m, jobs *j);

#endif
