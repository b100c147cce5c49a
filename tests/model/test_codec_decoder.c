/*
 * test_codec_decoder.c - the codec decoder against the PyTorch reference, and
 * the streaming guarantees.
 *
 * Inputs: argv[1] the tiny checkpoint (or the remapped one: 8 codebooks of 1000,
 * 1280 samples per frame), argv[2] the golden folder written by make_fixture.py
 * for it (codes_N.txt, golden_N.safetensors with every stage time-major,
 * official_330.safetensors); argv[3] --one-level: only the CPU's best kernel level
 * and no winograd. For every kernel level this CPU runs:
 *   - each stage of a whole decode of 1, 7 and 40 frames matches the reference
 *     (relative RMS error <= STAGE_TOL) and the waveform has SNR >= 60 dB;
 *   - chunks of 1, 3, 17 frames, 1 vs 2 threads, and codec states with internal steps
 *     of 1 and 3 frames (the last block's tails then 1 and 2 frames, a step's last tail
 *     short) instead of the session's 16 give bit-identical audio;
 *   - official chunking equals streaming up to 300 frames and matches the
 *     reference's chunked_decode at 330 frames (SNR >= 60 dB);
 *   - the winograd precision: Winograd F(m, 7) for every residual unit's k7 conv and
 *     decoder.0 (F(4, 7) over a frame's upsampled rows),
 *     F(m, 2) for exactly the blocks' transposed convs with >= KZ_CODEC_WINO_UP_ROWS
 *     input rows a frame (the tiny codec has the real rates: the last two), and every
 *     stage against the reference within WINO_STAGE_TOL (fp32 rounding of the
 *     transforms; a wrong one errs by O(1)).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "io/safetensors.h"
#include "model/model.h"
#include "synth/session.h"
#include "test.h"

/* fp32 engine vs fp32 PyTorch: the only differences are summation orders. Measured
 * errors are 1e-7..2e-6 relative (tiny checkpoint, x86 AVX2 and scalar);
 * 2e-5 leaves room for other BLAS builds of the reference. */
#define STAGE_TOL 2e-5
/* The winograd precision measured up to 7.5e-6 at the final stage (its transforms
 * round ~20-40x more than a direct sum, layers/winograd.h). */
#define WINO_STAGE_TOL 5e-5
#define WAV_SNR_DB 60.0
#define MAX_STAGES 16

typedef struct stage {
    char name[32];
    float *data;
    size_t n_rows, n_ch, cap;
} stage;

typedef struct capture {
    stage stages[MAX_STAGES];
    int n;
} capture;

static const char *tiny_dir, *golden_dir;
static size_t n_groups = 16; /* codebooks per frame: the model's, set when it is opened */

static void on_tap(void *user, const char *name, const float *rows, size_t n_rows, size_t n_ch) {
    capture *c = user;
    stage *s = NULL;
    for (int i = 0; i < c->n && !s; i++) {
        s = strcmp(c->stages[i].name, name) == 0 ? &c->stages[i] : NULL;
    }
    if (!s && c->n < MAX_STAGES) {
        s = &c->stages[c->n++];
        snprintf(s->name, sizeof s->name, "%s", name);
        s->n_ch = n_ch;
    }
    size_t need = (s->n_rows + n_rows) * n_ch;
    if (need > s->cap) {
        s->cap = need * 2;
        s->data = realloc(s->data, s->cap * sizeof(float));
    }
    memcpy(s->data + s->n_rows * n_ch, rows, n_rows * n_ch * sizeof(float));
    s->n_rows += n_rows;
}

static void capture_free(capture *c) {
    for (int i = 0; i < c->n; i++) {
        free(c->stages[i].data);
    }
    memset(c, 0, sizeof *c);
}

static int32_t *read_codes(size_t n_frames) {
    char path[512];
    snprintf(path, sizeof path, "%s/codes_%zu.txt", golden_dir, n_frames);
    FILE *f = fopen(path, "r");
    int32_t *codes = malloc(n_frames * n_groups * sizeof *codes);
    size_t n = 0;
    while (f && n < n_frames * n_groups && fscanf(f, "%d", &codes[n]) == 1) {
        n++;
    }
    if (f) {
        fclose(f);
    }
    CHECK_MSG(n == n_frames * n_groups, "%s: read %zu codes", path, n);
    return codes;
}

/* Relative RMS error and SNR in dB of x against the reference r. */
static double rel_rms(const float *x, const float *r, size_t n, double *snr_db) {
    double err = 0, ref = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)x[i] - (double)r[i];
        err += d * d;
        ref += (double)r[i] * (double)r[i];
    }
    double rel = ref > 0 ? sqrt(err / ref) : sqrt(err);
    *snr_db = err > 0 ? 10.0 * log10(ref / err) : 999.0;
    return rel;
}

static kz_status decode(kz_session *s, const int32_t *codes, size_t n_frames, int chunk,
                        kz_decode_mode mode, kz_audio *audio) {
    kz_decode_params p;
    kz_decode_default_params(&p);
    p.chunk_frames = chunk;
    p.mode = mode;
    return kz_decode_all(s, codes, n_frames, &p, audio);
}

static void compare_stages(const capture *c, const kz_st_file *g, const kz_audio *audio,
                           size_t n_frames, const char *level, double tol) {
    for (int i = 0; i < c->n; i++) {
        const stage *s = &c->stages[i];
        const kz_st_tensor *t = kz_st_find(g, s->name);
        CHECK_MSG(t != NULL, "golden lacks stage %s", s->name);
        if (!t || t->n_elements != s->n_rows * s->n_ch) {
            CHECK_MSG(0, "%s: %zu elements vs golden %zu", s->name, s->n_rows * s->n_ch,
                      t ? t->n_elements : 0);
            continue;
        }
        float *ref = malloc(t->n_elements * sizeof *ref);
        kz_tensor_to_f32(t, ref);
        double snr, rel = rel_rms(s->data, ref, t->n_elements, &snr);
        printf("  [%s] %zu frames %-16s rel.rms %.2e  snr %6.1f dB\n", level, n_frames, s->name,
               rel, snr);
        CHECK_MSG(rel <= tol, "%s stage %s rel %.3g > %.3g", level, s->name, rel, tol);
        free(ref);
    }
    CHECK_EQ_INT(c->n, 10);
    const kz_st_tensor *w = kz_st_find(g, "wav");
    CHECK(w && w->n_elements == audio->n_samples);
    if (w && w->n_elements == audio->n_samples) {
        float *ref = malloc(w->n_elements * sizeof *ref);
        kz_tensor_to_f32(w, ref);
        double snr;
        rel_rms(audio->samples, ref, w->n_elements, &snr);
        printf("  [%s] %zu frames wav SNR %.1f dB\n", level, n_frames, snr);
        CHECK_MSG(snr >= WAV_SNR_DB, "%s wav SNR %.1f dB", level, snr);
        free(ref);
    }
}

static void test_against_reference(kz_session *s, const char *level, double tol) {
    static const size_t counts[] = {1, 7, 40};
    for (size_t i = 0; i < 3; i++) {
        size_t n = counts[i];
        int32_t *codes = read_codes(n);
        char path[512];
        snprintf(path, sizeof path, "%s/golden_%zu.safetensors", golden_dir, n);
        kz_st_file *g = NULL;
        CHECK(kz_st_open(path, &g) == KZ_OK);
        capture c = {0};
        s->codec.tap = on_tap;
        s->codec.tap_user = &c;
        kz_audio audio;
        CHECK(decode(s, codes, n, (int)n, KZ_DECODE_STREAM, &audio) == KZ_OK);
        s->codec.tap = NULL;
        if (g) {
            compare_stages(&c, g, &audio, n, level, tol);
        }
        kz_audio_free(&audio);
        capture_free(&c);
        kz_st_close(g);
        free(codes);
    }
}

static int same_audio(const kz_audio *a, const kz_audio *b) {
    return a->n_samples == b->n_samples &&
           memcmp(a->samples, b->samples, a->n_samples * sizeof(float)) == 0;
}

/* The 40 frames through codec states of max_frames 1 and 3 (one call each) against
 * `whole` (the session's 16-frame steps). */
static void check_steps(const kz_model *m, kz_session *s2, const int32_t *codes,
                        const kz_audio *whole, const char *level) {
    static const size_t steps[] = {1, 3};
    float *pcm = malloc(40 * (size_t)m->decoder.cfg.decode_upsample_rate * sizeof *pcm);
    for (size_t i = 0; i < 2; i++) {
        kz_codec_state st;
        CHECK(kz_codec_state_init(&st, &m->decoder, steps[i]) == KZ_OK);
        kz_codec_decode(&m->decoder, &st, &s2->exec, codes, 40, pcm);
        CHECK_MSG(whole->n_samples == 40 * (size_t)m->decoder.cfg.decode_upsample_rate &&
                      memcmp(whole->samples, pcm, whole->n_samples * sizeof *pcm) == 0,
                  "%s: internal steps of %zu frames differ from 16", level, steps[i]);
        kz_codec_state_free(&st);
    }
    free(pcm);
}

static void test_chunks_and_threads(const kz_model *m, kz_session *s2, const char *level) {
    int32_t *codes = read_codes(40);
    kz_audio whole, part;
    CHECK(decode(s2, codes, 40, 40, KZ_DECODE_STREAM, &whole) == KZ_OK);
    static const int chunks[] = {1, 3, 17};
    for (int i = 0; i < 3; i++) {
        CHECK(decode(s2, codes, 40, chunks[i], KZ_DECODE_STREAM, &part) == KZ_OK);
        CHECK_MSG(same_audio(&whole, &part), "%s: chunk %d differs from one pass", level,
                  chunks[i]);
        kz_audio_free(&part);
    }
    check_steps(m, s2, codes, &whole, level);
    kz_session_params sp;
    kz_session_default_params(&sp);
    sp.n_threads = 1;
    kz_session *s1;
    CHECK(kz_session_new(m, &sp, &s1) == KZ_OK);
    CHECK(decode(s1, codes, 40, 5, KZ_DECODE_STREAM, &part) == KZ_OK);
    CHECK_MSG(same_audio(&whole, &part), "%s: 1 thread differs from 2", level);
    kz_audio_free(&part);
    CHECK(decode(s2, codes, 40, 7, KZ_DECODE_OFFICIAL, &part) == KZ_OK);
    CHECK_MSG(same_audio(&whole, &part), "%s: official chunking differs below 300 frames", level);
    kz_audio_free(&part);
    kz_session_free(s1);
    kz_audio_free(&whole);
    free(codes);
}

static void test_official(kz_session *s, const char *level) {
    int32_t *codes = read_codes(330);
    char path[512];
    snprintf(path, sizeof path, "%s/official_330.safetensors", golden_dir);
    kz_st_file *g = NULL;
    CHECK(kz_st_open(path, &g) == KZ_OK);
    const kz_st_tensor *w = g ? kz_st_find(g, "wav") : NULL;
    kz_audio official, stream;
    CHECK(decode(s, codes, 330, 16, KZ_DECODE_OFFICIAL, &official) == KZ_OK);
    CHECK(decode(s, codes, 330, 16, KZ_DECODE_STREAM, &stream) == KZ_OK);
    CHECK_MSG(!same_audio(&official, &stream), "official chunking should differ past 300 frames");
    CHECK(w && w->n_elements == official.n_samples);
    if (w && w->n_elements == official.n_samples) {
        float *ref = malloc(w->n_elements * sizeof *ref);
        kz_tensor_to_f32(w, ref);
        double snr;
        rel_rms(official.samples, ref, w->n_elements, &snr);
        printf("  [%s] 330 frames official chunking wav SNR %.1f dB\n", level, snr);
        CHECK_MSG(snr >= WAV_SNR_DB, "%s official SNR %.1f dB", level, snr);
        free(ref);
    }
    kz_audio_free(&official);
    kz_audio_free(&stream);
    kz_st_close(g);
    free(codes);
}

/* The tiny model at kernel cap and codec precision p, and a 2-thread session on it. */
static bool open_tiny(kz_isa_cap cap, kz_precision p, kz_model **m, kz_session **s) {
    kz_model_params mp;
    kz_model_default_params(&mp);
    mp.isa = cap;
    mp.codec_precision = p;
    kz_status st = kz_model_load(tiny_dir, &mp, m);
    CHECK_MSG(st == KZ_OK, "load %s: %s", tiny_dir, kz_last_error());
    if (st != KZ_OK) {
        return false;
    }
    n_groups = (size_t)kz_model_num_codebooks(*m);
    kz_session_params sp;
    kz_session_default_params(&sp);
    sp.n_threads = 2;
    st = kz_session_new(*m, &sp, s);
    CHECK(st == KZ_OK);
    if (st != KZ_OK) {
        kz_model_free(*m);
    }
    return st == KZ_OK;
}

static void test_level(kz_isa_cap cap, const char *level) {
    kz_model *m;
    kz_session *s;
    if (!open_tiny(cap, KZ_PRECISION_EXACT, &m, &s)) {
        return;
    }
    printf("level %s: kernels %s\n", level, m->kernels->name);
    test_against_reference(s, level, STAGE_TOL);
    test_chunks_and_threads(m, s, level);
    test_official(s, level);
    kz_session_free(s);
    kz_model_free(m);
}

/* Which convs the winograd precision transformed: decoder.0, every conv1, and the
 * transposed convs of the blocks with enough input rows a frame. */
static void check_winograd_convs(const kz_codec_decoder *d) {
    CHECK_MSG(d->dec0_wino.n_pts == 10, "decoder.0 not Winograd F(4, 7): %zu points",
              d->dec0_wino.n_pts);
    int n_up = 0;
    for (int i = 0; i < d->cfg.n_upsample_rates; i++) {
        const kz_decoder_block *b = &d->blocks[i];
        const bool want = kz_block_in_rows(b) >= KZ_CODEC_WINO_UP_ROWS;
        CHECK_MSG((b->up_wino.n_pts > 0) == want, "block %d (%zu input rows a frame): up_wino %zu",
                  i, kz_block_in_rows(b), b->up_wino.n_pts);
        n_up += b->up_wino.n_pts > 0;
        for (int r = 0; r < KZ_CODEC_RES_UNITS; r++) {
            CHECK_MSG(b->res[r].wino1.n_pts > 0, "block %d unit %d: conv1 not Winograd", i, r);
        }
    }
    CHECK_EQ_INT(n_up, 2);
}

static void test_winograd(kz_isa_cap cap, const char *level) {
    kz_model *m;
    kz_session *s;
    if (!open_tiny(cap, KZ_PRECISION_WINOGRAD, &m, &s)) {
        return;
    }
    check_winograd_convs(&m->decoder);
    char name[64];
    snprintf(name, sizeof name, "%s winograd", level);
    test_against_reference(s, name, WINO_STAGE_TOL);
    kz_session_free(s);
    kz_model_free(m);
}

int main(int argc, char **argv) {
    bool one_level = argc == 4 && strcmp(argv[3], "--one-level") == 0;
    if (argc != 3 && !one_level) {
        fprintf(stderr, "usage: test_codec_decoder TINY_DIR GOLDEN_DIR [--one-level]\n");
        return 2;
    }
    tiny_dir = argv[1];
    golden_dir = argv[2];
    if (one_level) { // the model's sizes, not the kernels, are under test: the CPU's best level
        test_level(KZ_ISA_CAP_AUTO, "auto");
        return test_main_result("test_codec_decoder");
    }
    static const struct { kz_isa_cap cap; kz_isa isa; const char *name; } levels[] = {
        {KZ_ISA_CAP_SCALAR, KZ_ISA_SCALAR, "scalar"},
        {KZ_ISA_CAP_AVX2, KZ_ISA_AVX2, "avx2"},
        {KZ_ISA_CAP_AVX512, KZ_ISA_AVX512, "avx512"}};
    for (size_t i = 0; i < 3; i++) {
        if (kz_kernels_for(levels[i].isa) == NULL) {
            printf("level %s: not supported by this CPU, skipped\n", levels[i].name);
            continue;
        }
        test_level(levels[i].cap, levels[i].name);
        test_winograd(levels[i].cap, levels[i].name);
    }
    return test_main_result("test_codec_decoder");
}
