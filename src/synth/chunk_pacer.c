/*
 * chunk_pacer.c - adaptive audio chunk sizes (see chunk_pacer.h).
 *
 * Data flow per chunk: kz_pacer_next(now) -> the codec stage waits for that many
 * frames and decodes them -> kz_pacer_delivered(n, handed, returned): deadline =
 * max(deadline, handed) + n frames of audio; production time per frame = the time
 * from the previous callback's return to this hand-over, over n, averaged with the
 * previous estimate (weight 1/2, so a slower phase is followed within a few chunks);
 * a hand-over after the deadline doubles min_frames when this chunk's production time
 * per frame and the average before it both exceed a frame's audio (a machine slower
 * than real time at this size, not one slow step, which small chunks recover from).
 */
#include "synth/chunk_pacer.h"

void kz_pacer_init(kz_pacer *p, double frame_ms) {
    *p = (kz_pacer){.frame_ms = frame_ms, .min_frames = 1};
}

/* The smallest chunk (a zeroed pacer's min_frames 0 counts as 1). */
static int smallest(const kz_pacer *p) {
    return p->min_frames > 1 ? p->min_frames : 1;
}

int kz_pacer_next(const kz_pacer *p, double now_ms) {
    if (!p->started) {
        return 1;
    }
    const int lo = smallest(p);
    if (p->per_frame_ms <= 0) {
        return lo;
    }
    double budget = (p->deadline_ms - now_ms) * KZ_PACER_SAFETY;
    double fit = budget / p->per_frame_ms; /* may be negative: already late */
    if (!(fit >= lo)) {
        return lo;
    }
    return fit >= KZ_PACER_MAX_FRAMES ? KZ_PACER_MAX_FRAMES : (int)fit;
}

void kz_pacer_delivered(kz_pacer *p, int n, double handed_ms, double returned_ms) {
    if (n <= 0) {
        p->resumed_ms = returned_ms;
        return;
    }
    if (p->started) {
        double per = (handed_ms - p->resumed_ms) / n;
        per = per > 0 ? per : 0;
        const double before = p->per_frame_ms;
        p->per_frame_ms = before > 0 ? 0.5 * (before + per) : per;
        // Late, and slower than real time in this chunk and before it: not one slow step.
        const int lo = smallest(p);
        if (handed_ms > p->deadline_ms && per > p->frame_ms && before > p->frame_ms) {
            p->min_frames = 2 * lo < KZ_PACER_MAX_FRAMES ? 2 * lo : KZ_PACER_MAX_FRAMES;
        }
    }
    double from = p->started && p->deadline_ms > handed_ms ? p->deadline_ms : handed_ms;
    p->deadline_ms = from + n * p->frame_ms;
    p->started = true;
    p->resumed_ms = returned_ms;
}
