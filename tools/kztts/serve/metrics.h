/*
 * metrics.h - the server's Prometheus metrics (text exposition format 0.0.4):
 *   kztts_requests_total{route,status}            counter
 *   kztts_request_duration_seconds{route}         histogram
 *   kztts_time_to_first_audio_seconds             histogram (speech requests with audio)
 *   kztts_audio_seconds_total                     counter
 *   kztts_requests_rejected_total{reason}         counter (queue_full, draining, auth,
 *                                                   body_too_large, timeout)
 *   kztts_requests_running, kztts_requests_queued gauges (from jobs.h at render time)
 *   kztts_batch_size, kztts_batch_waiting         gauges (the scheduler's, at render time)
 *   kztts_batch_steps_total, kztts_batch_frames_total  counters (the scheduler's; without
 *                                                   one, every frame is a step of its own)
 * Thread-safe; updated when a response is done (frames: as they are made).
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

/* One codec frame made by a worker (the batch counters without a scheduler). Lock-free. */
void metrics_frame(metrics *m);

/* The exposition text (malloc'ed, caller frees), gauges and the batch counters read from
 * j (may be NULL). NULL when out of memory. */
char *metrics_render(metrics *m, jobs *j);

#endif
