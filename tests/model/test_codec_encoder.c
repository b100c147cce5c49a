/*
 * test_codec_encoder.c - the codec encoder (src/model/codec_encoder.c) against the
 * PyTorch reference (tools/reference/codec_encoder.py).
 *
 * argv[1]: GOLDEN/encoder/cases.txt from make_fixture.py, one case a line:
 * checkpoint dir | raw f32 audio | golden .safetensors ("codes" I32 [frames, codebooks],
 * "gap" F32: the reference's relative gap between its two nearest table rows per code).
 * argv[2]: a scratch directory for the GGUF written from the first checkpoint.
 * The cases file's directory holds noenc/, a codec without encoder tensors.
 *
 * At each kernel level the CPU has (scalar, avx2, avx512), for each case: the stages "conv_stack", "transformer" and "downsample" within STAGE_TOL
 * of the golden's (a run in chunks of 3 frames) and bit-identical to one pass's; codes equal the golden's, except frames whose first differing code is a
 * near tie in the reference (gap < NEAR_TIE: fp32 rounding decides those, spec 6.4), at
 * most MAX_TIE_FRAMES of them; identical codes for chunk sizes 1, 2, 5, 8 and whole and
 * for 1 and 2 threads; from a GGUF written by kz_quantize (q4_0, bf16 codec forms), F32
 * encoder tensors and identical codes to the directory's. A checkpoint without encoder tensors loads with no encoder.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "io/tensor.h"
#include "model/model.h"
#include "test.h"

#define NEAR_TIE 1e-4f
#define MAX_TIE_FRAMES 2

static kz_isa_cap isa_cap = KZ_ISA_CAP_AUTO; /* the kernel level under test */

static kz_status open_model(const char *path, kz_model **m) {
    kz_model_params p;
    kz_model_default_params(&p);
    p.isa = isa_cap;
    return kz_model_open(path, &p, m);
}

static float *read_pcm(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    float *pcm = NULL;
    *n = 0;
    if (!f) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    pcm = malloc((size_t)bytes + sizeof(float));
    *n = fread(pcm, sizeof(float), (size_t)bytes / sizeof(float), f);
    fclose(f);
    return pcm;
}

/* Stage rows gathered over the chunks by the tap. */
#define N_STAGES 3
static const char *const stage_names[N_STAGES] = {"conv_stack", "transformer", "downsample"};
typedef struct capture {
    float *data[N_STAGES];
    size_t n[N_STAGES], cap[N_STAGES];
} capture;

static void on_tap(void *user, const char *name, const float *rows, size_t n_rows, size_t n_ch) {
    capture *c = user;
    for (int i = 0; i < N_STAGES; i++) {
        if (strcmp(name, stage_names[i]) == 0) {
            if (c->n[i] + n_rows * n_ch > c->cap[i]) {
                c->cap[i] = 2 * (c->n[i] + n_rows * n_ch);
                c->data[i] = realloc(c->data[i], c->cap[i] * sizeof(float));
            }
            memcpy(c->data[i] + c->n[i], rows, n_rows * n_ch * sizeof(float));
            c->n[i] += n_rows * n_ch;
        }
    }
}

/* Each stage's error vs the golden: max |diff| over the golden's RMS <= STAGE_TOL (fp32
 * with other summation orders; the transformer and RVQ inputs stay within it). */
#define STAGE_TOL 1e-4
static void compare_stages(const char *name, const capture *c, const kz_st_file *g) {
    for (int i = 0; i < N_STAGES; i++) {
        const kz_st_tensor *t = kz_st_find(g, stage_names[i]);
        CHECK_MSG(t && t->n_elements == c->n[i], "%s: stage %s: %zu values, golden %zu", name,
                  stage_names[i], c->n[i], t ? t->n_elements : 0);
        if (!t || t->n_elements != c->n[i]) {
            continue;
        }
        float *ref = malloc(t->n_elements * sizeof *ref);
        kz_tensor_to_f32(t, ref);
        double ss = 0.0, maxd = 0.0;
        for (size_t k = 0; k < t->n_elements; k++) {
            double d = fabs((double)c->data[i][k] - ref[k]);
            ss += (double)ref[k] * ref[k];
            maxd = d > maxd ? d : maxd;
        }
        double rel = maxd / sqrt(ss / (double)t->n_elements + 1e-30);
        printf("  %s: %s max |diff| / rms %.3g\n", name, stage_names[i], rel);
        CHECK_MSG(rel <= STAGE_TOL, "%s: stage %s error %.3g > %g", name, stage_names[i], rel,
                  STAGE_TOL);
        free(ref);
    }
}

typedef struct run_cfg {
    size_t chunk; /* code frames per chunk; 0: kz_codec_encoder_run */
    int threads;
} run_cfg;

static int32_t *encode(const kz_model *m, const float *pcm, size_t n, run_cfg rc, capture *cap,
                       size_t *frames) {
    kz_pool *pool = NULL;
    int32_t *codes = NULL;
    CHECK_EQ_INT(kz_pool_new(rc.threads, &pool), KZ_OK);
    kz_exec e = {.k = m->kernels, .pool = pool};
    kz_status st = rc.chunk ? kz_codec_encoder_run_chunked(m->codec_encoder, pcm, n, rc.chunk,
                                                           cap ? on_tap : NULL, cap, &e, &codes,
                                                           frames)
                            : kz_codec_encoder_run(m->codec_encoder, pcm, n, &e, &codes, frames);
    CHECK_MSG(st == KZ_OK, "encode: %s", kz_last_error());
    CHECK_MSG(e.flop > 0, "no FLOP counted");
    kz_pool_free(pool);
    return codes;
}

/* Codes against the golden, near ties allowed (see the file comment). */
static void compare_golden(const char *name, const int32_t *codes, size_t frames, size_t n_cb,
                           const kz_st_file *g) {
    const kz_st_tensor *tc = kz_st_find(g, "codes"), *tg = kz_st_find(g, "gap");
    CHECK_MSG(tc && tg && tc->n_elements == frames * n_cb && tg->n_elements == frames * n_cb,
              "%s: golden codes [%zu x %zu] missing or of another size", name, frames, n_cb);
    if (!tc || !tg || tc->n_elements != frames * n_cb || tg->n_elements != frames * n_cb) {
        return;
    }
    const int32_t *ref = tc->data;
    float *gap = malloc(tg->n_elements * sizeof *gap);
    kz_tensor_to_f32(tg, gap);
    size_t ties = 0, bad = 0;
    for (size_t t = 0; t < frames; t++) {
        for (size_t q = 0; q < n_cb; q++) {
            if (codes[t * n_cb + q] != ref[t * n_cb + q]) {
                if (gap[t * n_cb + q] < NEAR_TIE) {
                    ties++;
                } else {
                    bad++;
                    printf("  %s: frame %zu code %zu: %d, reference %d (gap %.3g)\n", name, t,
                           q, codes[t * n_cb + q], ref[t * n_cb + q], gap[t * n_cb + q]);
                }
                break;
            }
        }
    }
    CHECK_MSG(bad == 0 && ties <= MAX_TIE_FRAMES,
              "%s: %zu frames differ from the reference, %zu more at near ties", name, bad, ties);
    printf("%s: %zu frames x %zu codes, %zu near-tie frames differ\n", name, frames, n_cb, ties);
    free(gap);
}

/* Unusable input: one-line errors, no codes. */
static void test_bad_input(const kz_model *m) {
    kz_pool *pool = NULL;
    CHECK_EQ_INT(kz_pool_new(1, &pool), KZ_OK);
    kz_exec e = {.k = m->kernels, .pool = pool};
    float pcm[4000] = {0};
    int32_t *codes = (int32_t *)pcm;
    size_t frames = 7;
    pcm[3999] = NAN;
    CHECK_EQ_INT(kz_codec_encoder_run(m->codec_encoder, pcm, 4000, &e, &codes, &frames),
                 KZ_STATUS_BAD_INPUT);
    CHECK(codes == NULL && frames == 0 && strstr(kz_last_error(), "sample 3999") != NULL);
    CHECK_EQ_INT(kz_codec_encoder_run(m->codec_encoder, pcm, 0, &e, &codes, &frames),
                 KZ_STATUS_INVALID_ARGUMENT);
    CHECK_EQ_INT(kz_codec_encoder_run_chunked(m->codec_encoder, pcm, 100, 0, NULL, NULL, &e,
                                              &codes, &frames),
                 KZ_STATUS_INVALID_ARGUMENT);
    kz_pool_free(pool);
}

static void test_case(const char *model, const char *audio, const char *golden) {
    kz_model *m = NULL;
    kz_st_file *g = NULL;
    size_t n = 0;
    float *pcm = read_pcm(audio, &n);
    CHECK_MSG(pcm && n > 0, "cannot read %s", audio);
    CHECK_EQ_INT(open_model(model, &m), KZ_OK);
    CHECK_EQ_INT(kz_st_open(golden, &g), KZ_OK);
    if (!pcm || !m || !g || !m->codec_encoder) {
        CHECK_MSG(m && m->codec_encoder, "%s: no codec encoder", model);
        goto done;
    }
    size_t n_cb = (size_t)kz_codec_encoder_codebooks(m->codec_encoder), frames = 0;
    CHECK_EQ_INT((int)n_cb, m->codec_cfg.encoder_valid_num_quantizers);
    capture cap = {0};
    test_bad_input(m);
    int32_t *codes = encode(m, pcm, n, (run_cfg){3, 2}, &cap, &frames);
    size_t hop = (size_t)m->codec_cfg.encode_downsample_rate;
    CHECK_EQ_INT((int)frames, (int)((n + hop - 1) / hop));
    compare_golden(golden, codes, frames, n_cb, g);
    compare_stages(golden, &cap, g);
    // Streaming equals one pass bit for bit, stage by stage.
    capture whole = {0};
    size_t fw = 0;
    free(encode(m, pcm, n, (run_cfg){100000, 1}, &whole, &fw));
    for (int i = 0; i < N_STAGES; i++) {
        CHECK_MSG(whole.n[i] == cap.n[i] &&
                      memcmp(whole.data[i], cap.data[i], cap.n[i] * sizeof(float)) == 0,
                  "%s: stage %s in chunks of 3 frames differs from one pass", audio,
                  stage_names[i]);
        free(cap.data[i]);
        free(whole.data[i]);
    }
    const run_cfg other[] = {{0, 2}, {1, 1}, {2, 2}, {5, 1}, {8, 2}, {100000, 2}};
    for (size_t i = 0; codes && i < sizeof other / sizeof other[0]; i++) {
        size_t f2 = 0;
        int32_t *c2 = encode(m, pcm, n, other[i], NULL, &f2);
        CHECK_MSG(f2 == frames && c2 && memcmp(c2, codes, frames * n_cb * sizeof *c2) == 0,
                  "%s: chunk %zu, %d threads: codes differ from the default run", audio,
                  other[i].chunk, other[i].threads);
        free(c2);
    }
    free(codes);
done:
    kz_st_close(g);
    kz_model_free(m);
    free(pcm);
}

/* The first case's checkpoint through kz_quantize (q4_0, bf16 codec forms): the encoder's
 * tensors stay F32 and the GGUF encodes identically. */
static void test_gguf(const char *model, const char *audio, const char *scratch) {
    char path[4096];
    snprintf(path, sizeof path, "%s/encoder_test.gguf", scratch);
    kz_quantize_params p;
    kz_quantize_default_params(&p);
    p.type = KZ_QUANTIZE_Q4_0;
    p.codec_forms = KZ_PRECISION_BF16;
    CHECK_MSG(kz_quantize(model, path, &p) == KZ_OK, "quantize: %s", kz_last_error());
    kz_model *a = NULL, *b = NULL;
    size_t n = 0, fa = 0, fb = 0;
    float *pcm = read_pcm(audio, &n);
    CHECK_EQ_INT(open_model(model, &a), KZ_OK);
    CHECK_EQ_INT(open_model(path, &b), KZ_OK);
    if (a && b && pcm) {
        CHECK_MSG(b->codec_encoder != NULL, "the GGUF has no codec encoder");
        size_t n_enc = 0;
        for (size_t i = 0; i < kz_weights_count(b->codec_w); i++) {
            const kz_tensor *t = kz_weights_at(b->codec_w, i);
            if (strncmp(t->name, "encoder.", 8) == 0) {
                n_enc++;
                CHECK_MSG(t->dtype == KZ_DTYPE_F32, "GGUF: %s is not F32", t->name);
            }
        }
        CHECK_MSG(n_enc > 0, "the GGUF holds no encoder tensors");
        if (b->codec_encoder) {
            int32_t *ca = encode(a, pcm, n, (run_cfg){0, 2}, NULL, &fa);
            int32_t *cb = encode(b, pcm, n, (run_cfg){0, 2}, NULL, &fb);
            size_t n_cb = (size_t)kz_codec_encoder_codebooks(a->codec_encoder);
            CHECK_MSG(fa == fb && ca && cb && memcmp(ca, cb, fa * n_cb * sizeof *ca) == 0,
                      "GGUF codes differ from the directory's");
            free(ca);
            free(cb);
        }
    }
    kz_model_free(a);
    kz_model_free(b);
    free(pcm);
    remove(path);
}

/* A decoder-only codec loads, without an encoder. */
static void test_no_encoder(const char *cases) {
    char path[4096];
    snprintf(path, sizeof path, "%s", cases);
    char *slash = strrchr(path, '/');
    snprintf(slash ? slash + 1 : path, sizeof path - (size_t)(slash ? slash + 1 - path : 0),
             "noenc");
    kz_model *m = NULL;
    CHECK_MSG(open_model(path, &m) == KZ_OK, "%s: %s", path, kz_last_error());
    CHECK_MSG(m && m->codec_encoder == NULL, "%s: an encoder without encoder tensors", path);
    CHECK_EQ_INT(kz_codec_encoder_codebooks(m ? m->codec_encoder : NULL), 0);
    kz_model_free(m);
}

static char first_model[4096], first_audio[4096];

/* Every case of the cases file at the current kernel level. */
static void run_cases(const char *cases) {
    FILE *f = fopen(cases, "r");
    CHECK_MSG(f != NULL, "cannot open %s", cases);
    char line[3 * 4096];
    int n_cases = 0;
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *model = strtok(line, "|"), *audio = strtok(NULL, "|"), *golden = strtok(NULL, "|");
        if (!model || !audio || !golden) {
            continue;
        }
        if (!n_cases++) {
            snprintf(first_model, sizeof first_model, "%s", model);
            snprintf(first_audio, sizeof first_audio, "%s", audio);
        }
        test_case(model, audio, golden);
    }
    if (f) {
        fclose(f);
    }
    CHECK_MSG(n_cases >= 6, "only %d cases in %s", n_cases, cases);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_codec_encoder CASES.txt SCRATCH_DIR\n");
        return 2;
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
        printf("level %s\n", levels[i].name);
        isa_cap = levels[i].cap;
        run_cases(argv[1]);
    }
    isa_cap = KZ_ISA_CAP_AUTO;
    test_no_encoder(argv[1]);
    test_gguf(first_model, first_audio, argv[2]);
    return test_main_result("test_codec_encoder");
}
