/*
 * test_chunk_pacer.c - adaptive audio chunk sizes (synth/chunk_pacer.c) on a fake
 * clock:
 *   - one frame until the stream has started and a production time is known;
 *   - the deadline adds each chunk's audio to what is still buffered, and restarts
 *     from the hand-over after an underrun;
 *   - the callback's own time is not counted as production time;
 *   - the size is the largest count whose production fits KZ_PACER_SAFETY of the
 *     buffered time, between 1 and KZ_PACER_MAX_FRAMES;
 *   - a simulated stream (production 45 ms a frame + a codec cost that falls with the
 *     chunk size, as measured: 18 ms at 1 frame, 7 at 8 or more, with +-20 % jitter)
 *     plays 400 frames with no underrun and reaches the largest chunk, where fixed
 *     4-frame chunks after a 1-frame start do underrun;
 *   - a hand-over after the deadline, slower than real time in its chunk and on average
 *     before it, doubles the smallest size, up to the largest; one slow step does not,
 *     and a simulated 300 ms stall on the fast machine costs one underrun, no more;
 *   - a simulated machine slower than real time at one frame (58 ms + 35 ms codec a
 *     frame alone, 58 + 17.5 at 4 frames, as measured on a Zen 4 VM) underruns a few
 *     times at the start (at most once per doubling), then keeps up with larger chunks, where
 * one-frame chunks fall further behind at every chunk.
 */
#include "synth/chunk_pacer.h"
#include "test.h"

#define FRAME_MS 80.0

static void test_start(void) {
    kz_pacer p;
    kz_pacer_init(&p, FRAME_MS);
    CHECK_EQ_INT(kz_pacer_next(&p, 0), 1);
    kz_pacer_delivered(&p, 1, 100, 101);
    CHECK(p.started);
    CHECK(p.deadline_ms == 180);
    CHECK_EQ_INT(kz_pacer_next(&p, 101), 1); // no production time yet
}

static void test_deadline_and_cost(void) {
    kz_pacer p;
    kz_pacer_init(&p, FRAME_MS);
    kz_pacer_delivered(&p, 1, 100, 110); // a 10 ms callback
    kz_pacer_delivered(&p, 2, 170, 171); // 2 frames in the 60 ms after it
    CHECK(p.per_frame_ms == 30);
    CHECK(p.deadline_ms == 340);         // buffered until 180, + 160
    kz_pacer_delivered(&p, 1, 400, 400); // late: the buffer ran dry at 340
    CHECK(p.deadline_ms == 480);
    CHECK(p.per_frame_ms == 0.5 * (30 + 229));
    CHECK_EQ_INT(p.min_frames, 1); // one slow chunk after fast ones: no doubling
}

static void test_underruns_raise_the_smallest_size(void) {
    kz_pacer p;
    kz_pacer_init(&p, FRAME_MS);
    CHECK_EQ_INT(p.min_frames, 1);
    kz_pacer_delivered(&p, 1, 0, 0);   // deadline 80
    kz_pacer_delivered(&p, 1, 90, 90); // late, 90 ms a frame, nothing known before
    CHECK_EQ_INT(p.min_frames, 1);
    kz_pacer_delivered(&p, 1, 185, 185); // late again, 95 ms a frame after 90
    CHECK_EQ_INT(p.min_frames, 2);
    kz_pacer_delivered(&p, 2, 330, 330); // late (265), but 72.5 ms a frame
    CHECK_EQ_INT(p.min_frames, 2);
    CHECK_EQ_INT(kz_pacer_next(&p, 500), 2); // nothing fits: the smallest size
    for (int i = 0; i < 6; i++) {
        kz_pacer_delivered(&p, 1, 1000.0 * (i + 1), 1000.0 * (i + 1));
    }
    CHECK_EQ_INT(p.min_frames, KZ_PACER_MAX_FRAMES);
    CHECK_EQ_INT(kz_pacer_next(&p, 6000), KZ_PACER_MAX_FRAMES);

    // A zeroed pacer (a session that never called kz_pacer_init) never asks for 0.
    kz_pacer z = {.frame_ms = FRAME_MS};
    CHECK_EQ_INT(kz_pacer_next(&z, 0), 1);
    kz_pacer_delivered(&z, 1, 0, 0);
    CHECK_EQ_INT(kz_pacer_next(&z, 1), 1); // started, no production time yet
    kz_pacer_delivered(&z, 1, 500, 500);   // late
    kz_pacer_delivered(&z, 1, 1000, 1000); // late and slow again
    CHECK_EQ_INT(z.min_frames, 2);
}

static void test_sizes(void) {
    kz_pacer p;
    kz_pacer_init(&p, FRAME_MS);
    p.started = true;
    p.per_frame_ms = 50;
    p.deadline_ms = 1000;
    // 0.7 x 1000 ms / 50 = 14 frames; 0.7 x 300 / 50 = 4.2 -> 4
    CHECK_EQ_INT(kz_pacer_next(&p, 0), 14);
    CHECK_EQ_INT(kz_pacer_next(&p, 700), 4);
    CHECK_EQ_INT(kz_pacer_next(&p, 990), 1);
    CHECK_EQ_INT(kz_pacer_next(&p, 2000), 1); // already late
    CHECK_EQ_INT(kz_pacer_next(&p, -5000), KZ_PACER_MAX_FRAMES);
}

/* Deterministic jitter in [0.8, 1.2). */
static double jitter(unsigned *state) {
    *state = *state * 1103515245u + 12345u;
    return 0.8 + 0.4 * (double)((*state >> 8) & 0xffff) / 65536.0;
}

/* A machine: production per frame outside the codec, and the codec's per-frame cost at
 * 1, 2, 4 and 8 or more frames per chunk. */
typedef struct machine {
    double lm_ms, codec_ms[4];
    int spike_frame; /* the chunk making this frame takes spike_ms longer (0: none) */
    double spike_ms;
} machine;

static const machine FAST = {45, {18, 11.5, 8.5, 7}, 0, 0};
static const machine SLOW = {58, {35, 25, 17.5, 15}, 0, 0};
static const machine FAST_SPIKE = {45, {18, 11.5, 8.5, 7}, 3, 300};

static double codec_ms(const machine *m, int n) {
    return m->codec_ms[n >= 8 ? 3 : n >= 4 ? 2 : n >= 2 ? 1 : 0];
}

typedef struct sim_result {
    int underruns, largest, late_in_last_half;
    double ms_per_frame;
} sim_result;

/* 400 frames; fixed > 0: that chunk size after a first chunk of 1 frame. */
static sim_result simulate(const machine *m, int fixed) {
    kz_pacer p;
    kz_pacer_init(&p, FRAME_MS);
    sim_result r = {0};
    double now = 0, played_until = -1;
    unsigned seed = 7;
    for (int done = 0; done < 400;) {
        int n = fixed && p.started ? fixed : kz_pacer_next(&p, now);
        n = n < 400 - done ? n : 400 - done;
        now += n * (m->lm_ms + codec_ms(m, n)) * jitter(&seed);
        now += done <= m->spike_frame && m->spike_frame < done + n ? m->spike_ms : 0;
        if (played_until >= 0 && now > played_until) {
            r.underruns++;
            r.late_in_last_half += done >= 200;
        }
        played_until = (played_until > now ? played_until : now) + n * FRAME_MS;
        kz_pacer_delivered(&p, n, now, now + 0.5);
        now += 0.5;
        r.largest = n > r.largest ? n : r.largest;
        done += n;
    }
    r.ms_per_frame = now / 400;
    return r;
}

static void test_simulated_stream(void) {
    sim_result adaptive = simulate(&FAST, 0);
    CHECK_MSG(adaptive.underruns == 0, "adaptive chunks: %d underruns", adaptive.underruns);
    CHECK_EQ_INT(adaptive.largest, KZ_PACER_MAX_FRAMES);
    sim_result fixed = simulate(&FAST, 4);
    CHECK_MSG(fixed.underruns > 0, "fixed 4-frame chunks should underrun at the start");
    // one 300 ms stall while the buffer is short: one underrun, then small chunks recover
    sim_result spike = simulate(&FAST_SPIKE, 0);
    CHECK_MSG(spike.underruns == 1, "one stall: %d underruns", spike.underruns);
    CHECK_EQ_INT(spike.largest, KZ_PACER_MAX_FRAMES);
}

static void test_simulated_slow_machine(void) {
    sim_result adaptive = simulate(&SLOW, 0);
    // one underrun per doubling of the smallest size (1 -> 16) and the one before it
    CHECK_MSG(adaptive.underruns <= 5, "adaptive chunks: %d underruns", adaptive.underruns);
    CHECK_EQ_INT(adaptive.late_in_last_half, 0);
    CHECK_MSG(adaptive.ms_per_frame < FRAME_MS, "%.1f ms a frame", adaptive.ms_per_frame);
    sim_result single = simulate(&SLOW, 1);
    CHECK_MSG(single.underruns > 300, "one-frame chunks: %d underruns", single.underruns);
    CHECK(single.ms_per_frame > FRAME_MS);
}

int main(void) {
    test_start();
    test_deadline_and_cost();
    test_sizes();
    test_underruns_raise_the_smallest_size();
    test_simulated_stream();
    test_simulated_slow_machine();
    return test_main_result("test_chunk_pacer");
}
