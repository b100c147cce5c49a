/*
 * chunk_pacer.h - sizes the audio chunks of a streamed synthesis by the audio a
 * listener still has buffered (kz_request.chunk_frames = 0, the default).
 *
 * Model: playback starts when the first chunk is handed over and consumes audio in
 * real time, waiting (an underrun) when nothing is buffered. After each chunk the
 * pacer knows when the buffered audio runs out (the deadline) and how long a frame
 * takes to produce (talker + code predictor + its share of the codec, measured
 * between callbacks, so the callbacks' own time does not count). The next chunk is
 * the largest number of frames, 1 to KZ_PACER_MAX_FRAMES, whose production fits in
 * KZ_PACER_SAFETY of the time left: small chunks while the buffer is short (no
 * underrun waiting for a big one), growing to 16-frame chunks as it fills (each codec
 * call streams all of its weights, so a frame costs least in large chunks:
 * docs/ARCHITECTURE.md#audio-chunks). A machine slower than real time at small chunks
 * would stay at one frame and underrun at every chunk, so each chunk handed over after the
 * buffer ran dry, made slower than real time as the chunks before it were, doubles the
 * smallest size the pacer returns (min_frames, kept for the rest of the stream):
 * throughput first once the listener is waiting anyway. One slow step on a machine that
 * keeps up does not double it (small chunks recover from that without more underruns). Chunk
 * sizes never change the codes or the audio, only when they arrive. Times are milliseconds on any
 * monotonic clock (tests pass their own).
 */
#ifndef KZ_CHUNK_PACER_H
#define KZ_CHUNK_PACER_H

#include <stdbool.h>

#define KZ_PACER_MAX_FRAMES 16 /* largest adaptive chunk */
#define KZ_PACER_SAFETY 0.7    /* share of the buffered time a chunk may take */

typedef struct kz_pacer {
    double frame_ms;     /* audio per frame (80 ms at 12.5 Hz) */
    bool started;        /* the first chunk was handed over */
    double deadline_ms;  /* when the listener's buffer runs out */
    double resumed_ms;   /* when the last callback returned */
    double per_frame_ms; /* production time per frame (moving average), 0 = unknown */
    int min_frames;      /* smallest chunk: 1, doubled by each underrun (0 counts as 1:
                            a zeroed pacer works like an initialised one) */
} kz_pacer;

/* A pacer for a new stream (nothing played yet). */
void kz_pacer_init(kz_pacer *p, double frame_ms);

/* Frames to ask for next at time now: 1 until the stream has started, then the
 * largest count in [min_frames, KZ_PACER_MAX_FRAMES] that fits the buffered time
 * (min_frames while the production time is unknown or nothing fits). */
int kz_pacer_next(const kz_pacer *p, double now_ms);

/* n frames were handed to the listener at handed_ms, and the callback returned at
 * returned_ms; updates the deadline, the production time and, when the hand-over came
 * after the deadline (an underrun) with production slower than real time in this chunk
 * and on average before it, min_frames. */
void kz_pacer_delivered(kz_pacer *p, int n, double handed_ms, double returned_ms);

#endif
