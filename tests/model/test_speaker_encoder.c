/*
 * test_speaker_encoder.c - the Base models' mel spectrogram and speaker encoder against
 * the PyTorch reference (tools/reference/speaker_encoder.py), on the tiny 0.6B- and
 * 1.7B-style Base checkpoints.
 *
 * argv[1]: GOLDEN/speaker/cases.txt from make_fixture.py, lines
 *          "case|checkpoint|model dir|audio.f32|golden" (1 s, 3.7 s, 2 s + 77 samples and
 *          1280 samples, the shortest input) and
 *          "bad|model dir|tensor" (a copy with that speaker-encoder tensor misshapen, or
 *          holding a NaN);
 * argv[2]: a work folder for the GGUF files; argv[3]: the kztts binary.
 * Per checkpoint: loaded from its directory and from a GGUF (tiny_base: `kztts quantize
 * --type q8_0`; tiny_base_1b7: kz_quantize with q4_0, which quantizes the most), which must
 * store every speaker_encoder.* tensor byte for byte as the checkpoint does.
 * Per case:
 *   - mel [F, 128] against the golden: max |diff| of the log-mel <= MEL_TOL (the log's
 *     absolute error is the mel's relative error; float32 FFT and filter sums);
 *   - x-vector: relative L2 error against the golden < 1e-5; bitwise the same with 1 and
 *     2 threads, and from the GGUF; FLOP counted.
 * Audio too short for the encoder's padding is KZ_STATUS_BAD_INPUT; a misshapen tensor
 * or a NaN in one fails the load with KZ_STATUS_BAD_MODEL naming it.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "model/mel.h"
#include "model/model.h"
#include "test.h"

#define MEL_TOL 1e-4
#define XVEC_TOL 1e-5

typedef struct loaded {
    char name[64];
    kz_model *dir, *gguf;
} loaded;

static const char *work_dir, *kztts_bin;
static kz_pool *pool1, *pool2;

static float *read_f32_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    float *x = NULL;
    *n = 0;
    if (f && fseek(f, 0, SEEK_END) == 0) {
        long bytes = ftell(f);
        rewind(f);
        x = malloc((size_t)(bytes > 0 ? bytes : 4));
        *n = fread(x, sizeof *x, (size_t)bytes / sizeof *x, f);
    }
    if (f) {
        fclose(f);
    }
    CHECK_MSG(*n > 0, "%s: no samples", path);
    return x;
}

/* Golden tensor `name` as f32 (malloc'ed), its element count in *n. */
static float *golden(const kz_st_file *g, const char *name, size_t *n) {
    const kz_st_tensor *t = kz_st_find(g, name);
    CHECK_MSG(t != NULL, "golden lacks %s", name);
    *n = t ? t->n_elements : 0;
    float *x = malloc((*n ? *n : 1) * sizeof *x);
    if (t) {
        kz_tensor_to_f32(t, x);
    }
    return x;
}

static double rel_l2(const float *x, const float *r, size_t n) {
    double err = 0, ref = 0;
    for (size_t i = 0; i < n; i++) {
        err += ((double)x[i] - r[i]) * ((double)x[i] - r[i]);
        ref += (double)r[i] * r[i];
    }
    return ref > 0 ? sqrt(err / ref) : sqrt(err);
}

static kz_status xvector(const kz_model *m, kz_pool *pool, const float *pcm, size_t n, float *out,
                         double *flop) {
    kz_exec e = {.k = m->kernels, .pool = pool};
    kz_status st = kz_speaker_encoder_run(m->speaker_encoder, pcm, n, &e, out);
    *flop = e.flop;
    return st;
}

static void check_mel(const kz_st_file *g, const float *pcm, size_t n, const char *label) {
    kz_mel mel;
    CHECK_EQ_INT(kz_mel_init(&mel, 24000), KZ_OK);
    size_t n_ref, frames = kz_mel_frames(n);
    float *ref = golden(g, "mel", &n_ref);
    CHECK_MSG(n_ref == frames * KZ_MEL_N_MELS, "%s: mel %zu frames, golden %zu values", label,
              frames, n_ref);
    float *scratch = malloc(2 * kz_mel_scratch_floats() * sizeof *scratch);
    float *out = malloc(frames * KZ_MEL_N_MELS * sizeof *out);
    kz_exec e = {.pool = pool2};
    kz_mel_run(&mel, pcm, n, &e, scratch, out);
    double max_diff = 0;
    for (size_t i = 0; i < n_ref && n_ref == frames * KZ_MEL_N_MELS; i++) {
        double d = fabs((double)out[i] - ref[i]);
        max_diff = d > max_diff ? d : max_diff;
    }
    printf("  %-28s mel %4zu frames  max |diff| %.2e  rel L2 %.2e\n", label, frames, max_diff,
           n_ref == frames * KZ_MEL_N_MELS ? rel_l2(out, ref, n_ref) : -1.0);
    CHECK_MSG(max_diff <= MEL_TOL, "%s: mel max |diff| %.3g > %.3g", label, max_diff, MEL_TOL);
    CHECK(e.flop > 0);
    free(out);
    free(scratch);
    free(ref);
    kz_mel_free(&mel);
}

static void check_case(const loaded *l, const char *audio, const char *golden_path) {
    size_t n, n_ref;
    float *pcm = read_f32_file(audio, &n);
    kz_st_file *g = NULL;
    CHECK_EQ_INT(kz_st_open(golden_path, &g), KZ_OK);
    if (!g || !pcm || n == 0) {
        free(pcm);
        kz_st_close(g);
        return;
    }
    char label[128];
    snprintf(label, sizeof label, "%s %zu samples", l->name, n);
    check_mel(g, pcm, n, label);
    float *ref = golden(g, "xvector", &n_ref);
    const size_t dim = (size_t)kz_speaker_encoder_dim(l->dir->speaker_encoder);
    CHECK_EQ_INT(n_ref, dim);
    float *x1 = calloc(dim, sizeof *x1), *x2 = calloc(dim, sizeof *x2),
          *xg = calloc(dim, sizeof *xg);
    double flop1, flop2, flopg;
    CHECK_EQ_INT(xvector(l->dir, pool1, pcm, n, x1, &flop1), KZ_OK);
    CHECK_EQ_INT(xvector(l->dir, pool2, pcm, n, x2, &flop2), KZ_OK);
    CHECK_EQ_INT(xvector(l->gguf, pool1, pcm, n, xg, &flopg), KZ_OK);
    const double err = n_ref == dim ? rel_l2(x1, ref, dim) : 1.0;
    printf("  %-28s x-vector[%zu] rel L2 %.2e  %.1f MFLOP\n", label, dim, err, flop1 / 1e6);
    CHECK_MSG(err < XVEC_TOL, "%s: x-vector rel L2 %.3g >= %.3g", label, err, XVEC_TOL);
    CHECK_MSG(memcmp(x1, x2, dim * sizeof *x1) == 0, "%s: 1 and 2 threads differ", label);
    CHECK_MSG(memcmp(x1, xg, dim * sizeof *x1) == 0, "%s: the GGUF's x-vector differs", label);
    CHECK(flop1 > 0 && flop1 == flop2);
    free(x1);
    free(x2);
    free(xg);
    free(ref);
    free(pcm);
    kz_st_close(g);
}

/* Too short for the mel's reflect padding or the widest conv's (fewer than 1280 samples,
 * as torch's reflect padding refuses): BAD_INPUT, no crash. */
static void check_short(const loaded *l) {
    static float pcm[1280];
    const size_t dim = (size_t)kz_speaker_encoder_dim(l->dir->speaker_encoder);
    float *x = calloc(dim, sizeof *x);
    double flop;
    const size_t lengths[] = {0, 1, 384, 385, 1000, 1279};
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
        CHECK_EQ_INT(xvector(l->dir, pool1, pcm, lengths[i], x, &flop), KZ_STATUS_BAD_INPUT);
        CHECK_STR_CONTAINS(kz_last_error(), "too short");
    }
    CHECK_STR_CONTAINS(kz_last_error(), "at least 1280");
    free(x);
}

/* The GGUF holds every speaker_encoder.* tensor exactly as the checkpoint does. */
static void check_gguf_tensors(const loaded *l) {
    size_t n_spk = 0;
    for (size_t i = 0; i < kz_weights_count(l->dir->main_w); i++) {
        const kz_tensor *t = kz_weights_at(l->dir->main_w, i);
        if (strncmp(t->name, "speaker_encoder.", 16) != 0) {
            continue;
        }
        n_spk++;
        const kz_tensor *q = kz_weights_find(l->gguf->main_w, t->name);
        CHECK_MSG(q && q->dtype == t->dtype && q->n_bytes == t->n_bytes &&
                      memcmp(q->data, t->data, t->n_bytes) == 0,
                  "%s: GGUF tensor %s is not stored as in the checkpoint", l->name, t->name);
    }
    CHECK_MSG(n_spk == 76, "%s: %zu speaker_encoder tensors", l->name, n_spk);
}

static void open_checkpoint(loaded *l, const char *name, const char *dir) {
    kz_model_params p;
    kz_model_default_params(&p);
    snprintf(l->name, sizeof l->name, "%s", name);
    CHECK_EQ_INT(kz_model_open(dir, &p, &l->dir), KZ_OK);
    char gguf[600], cmd[2048];
    if (strcmp(name, "tiny_base") == 0) {
        snprintf(gguf, sizeof gguf, "%s/%s.q8_0.gguf", work_dir, name);
        snprintf(cmd, sizeof cmd, "'%s' quantize -q -m '%s' -o '%s' --type q8_0", kztts_bin, dir,
                 gguf);
        CHECK_MSG(system(cmd) == 0, "%s failed", cmd);
    } else {
        snprintf(gguf, sizeof gguf, "%s/%s.q4_0.gguf", work_dir, name);
        kz_quantize_params q;
        kz_quantize_default_params(&q);
        q.type = KZ_QUANTIZE_Q4_0;
        CHECK_EQ_INT(kz_quantize(dir, gguf, &q), KZ_OK);
    }
    CHECK_EQ_INT(kz_model_open(gguf, &p, &l->gguf), KZ_OK);
    if (l->dir && l->gguf) {
        CHECK(l->dir->speaker_encoder && l->gguf->speaker_encoder);
        CHECK_EQ_INT(kz_speaker_encoder_dim(l->dir->speaker_encoder), l->dir->cfg.speaker_enc_dim);
        check_gguf_tensors(l);
        check_short(l);
    }
}

static void check_bad(const char *dir, const char *tensor) {
    kz_model_params p;
    kz_model_default_params(&p);
    kz_model *m = NULL;
    CHECK_EQ_INT(kz_model_open(dir, &p, &m), KZ_STATUS_BAD_MODEL);
    CHECK_STR_CONTAINS(kz_last_error(), tensor);
    CHECK_MSG(strchr(kz_last_error(), '\n') == NULL, "not one line: %s", kz_last_error());
    printf("  bad: %s\n", kz_last_error());
    kz_model_close(m);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s CASES.txt WORK_DIR KZTTS\n", argv[0]);
        return 2;
    }
    work_dir = argv[2];
    kztts_bin = argv[3];
    FILE *f = fopen(argv[1], "r");
    CHECK_MSG(f != NULL, "cannot open %s", argv[1]);
    CHECK_EQ_INT(kz_pool_new(1, &pool1), KZ_OK);
    CHECK_EQ_INT(kz_pool_new(2, &pool2), KZ_OK);
    loaded models[4] = {0};
    int n_models = 0, n_cases = 0, n_bad = 0;
    char line[2048];
    while (f && pool1 && pool2 && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *field[5] = {0};
        int k = 0;
        for (char *p = strtok(line, "|"); p && k < 5; p = strtok(NULL, "|")) {
            field[k++] = p;
        }
        if (k == 3 && strcmp(field[0], "bad") == 0) {
            check_bad(field[1], field[2]);
            n_bad++;
            continue;
        }
        if (k != 5 || strcmp(field[0], "case") != 0) {
            CHECK_MSG(0, "bad case line");
            continue;
        }
        loaded *l = NULL;
        for (int i = 0; i < n_models && !l; i++) {
            l = strcmp(models[i].name, field[1]) == 0 ? &models[i] : NULL;
        }
        if (!l && n_models < 4) {
            l = &models[n_models++];
            open_checkpoint(l, field[1], field[2]);
        }
        if (l && l->dir && l->gguf) {
            check_case(l, field[3], field[4]);
            n_cases++;
        }
    }
    CHECK_MSG(n_models == 2 && n_cases == 8 && n_bad == 3, "%d checkpoints, %d cases, %d bad",
              n_models, n_cases, n_bad);
    for (int i = 0; i < n_models; i++) {
        kz_model_close(models[i].dir);
        kz_model_close(models[i].gguf);
    }
    if (f) {
        fclose(f);
    }
    kz_pool_free(pool1);
    kz_pool_free(pool2);
    return test_main_result("test_speaker_encoder");
}
