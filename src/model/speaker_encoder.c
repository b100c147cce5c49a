/*
 * speaker_encoder.c - the Base models' ECAPA-TDNN speaker encoder (speaker_encoder.h,
 * spec 5.2), time-major: every activation is [T rows, channels], T = mel frames.
 *
 * Load: shapes come from the tensors (channels, Res2Net scale, kernel sizes, SE and
 * attention widths; the mel width must be 128 and enc_dim the config's); dilations are
 * the upstream class defaults (1; 2, 3, 4 for the three SE-Res2Net blocks; 1), which no
 * tensor and no released config states. Every conv is packed for the conv-GEMM
 * (layers/conv.h) in fp32.
 *
 * Run (one scratch allocation per call, laid out by plan()):
 *   pcm -> mel [T, 128]
 *   block 0: reflect-pad into `pad`, conv k5 + ReLU                 -> b0 [T, C0]
 *   block b: tdnn1 1x1 + ReLU -> u; Res2Net: chunk i of u (+ output i-1) is reflect-padded
 *            into `pad` and its conv + ReLU overwrites chunk i of u; tdnn2 + ReLU -> v;
 *            SE gate from mean_t(v); v * gate + prev                -> cat[:, slot b]
 *   MFA 1x1 + ReLU over cat                                         -> m [T, C4]
 *   pooling: mean/std of m; [m | mean | std] is built block by block of rows in `pad`
 *            for the attention TDNN + tanh -> h [T, A] (in u); conv -> logits [T, C4]
 *            (in cat); softmax over t, weighted mean/std              -> pooled [2 C4]
 *   fc 1x1                                                          -> x-vector
 * 'same' reflect padding: a conv of k taps and dilation d reads a copy of its input with
 * d(k-1)/2 mirrored rows on the left and the rest on the right, so the causal conv-GEMM
 * over it is the centered conv. Reductions over time accumulate in double, one channel
 * by one thread in time order, and the GEMM's sums do not depend on the thread count,
 * so neither does the x-vector.
 */
#include "model/speaker_encoder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/mel.h"
#include "runtime/error.h"

enum {
    N_BLOCKS = 3,    /* SE-Res2Net blocks (upstream class default) */
    MAX_SCALE = 64,  /* Res2Net chunks accepted */
    POOL_ROWS = 256, /* rows of [m | mean | std] built at a time */
    CH_BLOCK = 64,   /* channels per reduction chunk */
};

typedef struct se_block {
    kz_conv tdnn1, tdnn2, se1, se2;
    kz_conv res[MAX_SCALE - 1];
    size_t ch, scale, width, se_ch, dilation;
} se_block;

struct kz_speaker_encoder {
    kz_mel mel;
    kz_conv block0, mfa, asp_tdnn, asp_conv, fc;
    se_block blocks[N_BLOCKS];
    size_t ch0, cat_ch, mfa_ch, att_ch, enc_dim;
    size_t min_frames; /* frames the widest reflect padding needs (pad < T) */
};

static size_t max_sz(size_t a, size_t b) {
    return a > b ? a : b;
}

/* --- loading ----------------------------------------------------------------- */

#define PREFIX "speaker_encoder."

static kz_status missing(const kz_weights *w, const char *name) {
    return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: tensor '%s%s' is missing (speaker encoder)",
                        kz_weights_path(w), kz_weights_prefix(w), name);
}

/* The [out, in, k] shape of conv weight `name`. */
static kz_status conv_dims(const kz_weights *w, const char *name, int64_t d[3]) {
    const kz_tensor *t = kz_weights_find(w, name);
    if (!t) {
        return missing(w, name);
    }
    if (t->n_dims != 3 || t->shape[0] < 1 || t->shape[1] < 1 || t->shape[2] < 1) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: tensor '%s%s' must be a conv weight [out, in, kernel]",
                            kz_weights_path(w), kz_weights_prefix(w), name);
    }
    memcpy(d, t->shape, 3 * sizeof *d);
    return KZ_OK;
}

/* Loads "<module>.weight" / "<module>.bias" as a conv [out, in, k] with dilation d. */
static kz_status load_conv(kz_conv *c, const kz_weights *w, const char *module, int64_t out,
                           int64_t in, int64_t k, int64_t d) {
    char wn[160], bn[160]; // longer than a conv name: kz_conv_load_causal refuses it
    snprintf(wn, sizeof wn, PREFIX "%s.weight", module);
    snprintf(bn, sizeof bn, PREFIX "%s.bias", module);
    return kz_conv_load_causal(c, w, wn, bn, out, in, k, d);
}

static kz_status bad_shape(const kz_weights *w, const char *name, const char *why) {
    return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: tensor '%s%s': %s", kz_weights_path(w),
                        kz_weights_prefix(w), name, why);
}

static kz_status load_res2net(se_block *b, const kz_weights *w, int i) {
    char name[128];
    size_t n_res = 0;
    for (;; n_res++) {
        snprintf(name, sizeof name, PREFIX "blocks.%d.res2net_block.blocks.%zu.conv.weight", i,
                 n_res);
        if (!kz_weights_find(w, name)) {
            break;
        }
    }
    snprintf(name, sizeof name, PREFIX "blocks.%d.res2net_block.blocks.0.conv.weight", i);
    b->scale = n_res + 1;
    if (n_res == 0) {
        return missing(w, name);
    }
    if (b->scale > MAX_SCALE || b->ch % b->scale != 0) {
        return bad_shape(w, name, "the Res2Net chunks do not divide the block's channels");
    }
    b->width = b->ch / b->scale;
    int64_t d[3];
    kz_status st = conv_dims(w, name, d);
    for (size_t j = 0; j < n_res && st == KZ_OK; j++) {
        char module[96];
        snprintf(module, sizeof module, "blocks.%d.res2net_block.blocks.%zu.conv", i, j);
        st = load_conv(&b->res[j], w, module, (int64_t)b->width, (int64_t)b->width, d[2],
                       (int64_t)b->dilation);
    }
    return st;
}

static kz_status load_block(se_block *b, const kz_weights *w, int i, size_t ch_in) {
    char name[128], module[64];
    int64_t d[3];
    b->dilation = (size_t)i + 1; // enc_dilations [1, 2, 3, 4, 1]
    snprintf(name, sizeof name, PREFIX "blocks.%d.tdnn1.conv.weight", i);
    kz_status st = conv_dims(w, name, d);
    b->ch = st == KZ_OK ? (size_t)d[0] : 0;
    snprintf(module, sizeof module, "blocks.%d.tdnn1.conv", i);
    st = st == KZ_OK ? load_conv(&b->tdnn1, w, module, d[0], (int64_t)ch_in, 1, 1) : st;
    st = st == KZ_OK ? load_res2net(b, w, i) : st;
    snprintf(module, sizeof module, "blocks.%d.tdnn2.conv", i);
    st = st == KZ_OK ? load_conv(&b->tdnn2, w, module, d[0], d[0], 1, 1) : st;
    snprintf(name, sizeof name, PREFIX "blocks.%d.se_block.conv1.weight", i);
    int64_t s[3];
    st = st == KZ_OK ? conv_dims(w, name, s) : st;
    b->se_ch = st == KZ_OK ? (size_t)s[0] : 0;
    snprintf(module, sizeof module, "blocks.%d.se_block.conv1", i);
    st = st == KZ_OK ? load_conv(&b->se1, w, module, s[0], d[0], 1, 1) : st;
    snprintf(module, sizeof module, "blocks.%d.se_block.conv2", i);
    return st == KZ_OK ? load_conv(&b->se2, w, module, d[0], s[0], 1, 1) : st;
}

/* Refuses "blocks.N." beyond the three SE-Res2Net blocks: they would be ignored. */
static kz_status check_extra_blocks(const kz_weights *w) {
    for (size_t i = 0; i < kz_weights_count(w); i++) {
        const char *name = kz_weights_at(w, i)->name;
        int index;
        if (sscanf(name, PREFIX "blocks.%d.", &index) == 1 && (index < 0 || index > N_BLOCKS)) {
            return bad_shape(w, name, "the speaker encoder has blocks 0..3 only");
        }
    }
    return KZ_OK;
}

static bool has_encoder(const kz_weights *w) {
    for (size_t i = 0; i < kz_weights_count(w); i++) {
        if (strncmp(kz_weights_at(w, i)->name, PREFIX, strlen(PREFIX)) == 0) {
            return true;
        }
    }
    return false;
}

/* Rows a 'same' reflect conv mirrors on the right: d(k-1) - d(k-1)/2 (the larger side). */
static size_t right_pad(const kz_conv *c) {
    return c->history - c->history / 2;
}

/* The smallest T above every conv's padding (torch's reflect pad needs pad < T). */
static size_t min_frames(const kz_speaker_encoder *se) {
    size_t pad = max_sz(right_pad(&se->block0), right_pad(&se->mfa));
    for (int b = 0; b < N_BLOCKS; b++) {
        pad = max_sz(pad, right_pad(&se->blocks[b].res[0]));
    }
    return pad + 1;
}

static kz_status load_all(kz_speaker_encoder *se, const kz_weights *w, const kz_tts_config *cfg) {
    int64_t d[3];
    kz_status st = conv_dims(w, PREFIX "blocks.0.conv.weight", d);
    if (st == KZ_OK && d[1] != KZ_MEL_N_MELS) {
        st = bad_shape(w, PREFIX "blocks.0.conv.weight", "input channels must be the 128 mels");
    }
    se->ch0 = st == KZ_OK ? (size_t)d[0] : 0;
    st = st == KZ_OK ? load_conv(&se->block0, w, "blocks.0.conv", d[0], d[1], d[2], 1) : st;
    size_t ch = se->ch0;
    for (int b = 0; b < N_BLOCKS && st == KZ_OK; b++) {
        st = load_block(&se->blocks[b], w, b + 1, ch);
        ch = se->blocks[b].ch;
        se->cat_ch += ch;
    }
    st = st == KZ_OK ? conv_dims(w, PREFIX "mfa.conv.weight", d) : st;
    se->mfa_ch = st == KZ_OK ? (size_t)d[0] : 0;
    st = st == KZ_OK ? load_conv(&se->mfa, w, "mfa.conv", d[0], (int64_t)se->cat_ch, d[2], 1) : st;
    st = st == KZ_OK ? conv_dims(w, PREFIX "asp.tdnn.conv.weight", d) : st;
    se->att_ch = st == KZ_OK ? (size_t)d[0] : 0;
    const int64_t c4 = (int64_t)se->mfa_ch;
    st = st == KZ_OK ? load_conv(&se->asp_tdnn, w, "asp.tdnn.conv", d[0], 3 * c4, 1, 1) : st;
    st = st == KZ_OK ? load_conv(&se->asp_conv, w, "asp.conv", c4, d[0], 1, 1) : st;
    se->enc_dim = (size_t)cfg->speaker_enc_dim;
    st = st == KZ_OK ? load_conv(&se->fc, w, "fc", cfg->speaker_enc_dim, 2 * c4, 1, 1) : st;
    st = st == KZ_OK ? check_extra_blocks(w) : st;
    se->min_frames = st == KZ_OK ? min_frames(se) : 0;
    return st == KZ_OK ? kz_mel_init(&se->mel, cfg->speaker_sample_rate) : st;
}

kz_status kz_speaker_encoder_load(const kz_weights *w, const kz_tts_config *cfg,
                                  kz_speaker_encoder **out) {
    *out = NULL;
    if (!has_encoder(w)) {
        return KZ_OK;
    }
    if (cfg->speaker_sample_rate != 24000) { // extract_speaker_embedding asserts 24 kHz
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: speaker_encoder_config.sample_rate %d: the speaker encoder's "
                            "mel spectrogram is defined at 24000 Hz only",
                            kz_weights_path(w), cfg->speaker_sample_rate);
    }
    kz_speaker_encoder *se = calloc(1, sizeof *se);
    if (!se) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory for the speaker encoder");
    }
    kz_status st = load_all(se, w, cfg);
    if (st != KZ_OK) {
        kz_speaker_encoder_free(se);
        return st;
    }
    *out = se;
    return KZ_OK;
}

void kz_speaker_encoder_free(kz_speaker_encoder *se) {
    if (!se) {
        return;
    }
    kz_mel_free(&se->mel);
    kz_conv_free(&se->block0);
    for (int b = 0; b < N_BLOCKS; b++) {
        se_block *k = &se->blocks[b];
        kz_conv_free(&k->tdnn1);
        kz_conv_free(&k->tdnn2);
        kz_conv_free(&k->se1);
        kz_conv_free(&k->se2);
        for (size_t j = 0; j < MAX_SCALE - 1; j++) {
            kz_conv_free(&k->res[j]);
        }
    }
    kz_conv_free(&se->mfa);
    kz_conv_free(&se->asp_tdnn);
    kz_conv_free(&se->asp_conv);
    kz_conv_free(&se->fc);
    free(se);
}

int32_t kz_speaker_encoder_dim(const kz_speaker_encoder *se) {
    return se ? (int32_t)se->enc_dim : 0;
}

/* --- elementwise and per-channel passes -------------------------------------- */

typedef enum { OP_RELU, OP_RELU_TANH, OP_GATE_ADD, OP_SIGMOID } row_op;

/* y[t, :n] = op(y[t, :n]) (OP_GATE_ADD: y = x * g + r, y/x/r with their own strides). */
typedef struct rows_job {
    row_op op;
    float *y;
    size_t ldy, n;
    const float *x, *r, *g;
    size_t ldx, ldr;
} rows_job;

static void rows_fn(void *arg, size_t t0, size_t t1) {
    const rows_job *j = arg;
    for (size_t t = t0; t < t1; t++) {
        float *y = j->y + t * j->ldy;
        for (size_t c = 0; c < j->n; c++) {
            switch (j->op) {
            case OP_RELU:
                y[c] = y[c] > 0.0f ? y[c] : 0.0f;
                break;
            case OP_RELU_TANH:
                y[c] = tanhf(y[c] > 0.0f ? y[c] : 0.0f);
                break;
            case OP_SIGMOID:
                y[c] = 1.0f / (1.0f + expf(-y[c]));
                break;
            case OP_GATE_ADD:
                y[c] = j->x[t * j->ldx + c] * j->g[c] + j->r[t * j->ldr + c];
                break;
            }
        }
    }
}

static void rows_run(kz_exec *e, const rows_job *j, size_t n_rows) {
    kz_exec_rows(e, n_rows, 4096 / (j->n + 1) + 1, rows_fn, (void *)j);
}

static void relu(kz_exec *e, float *y, size_t ldy, size_t n, size_t n_rows) {
    rows_job j = {.op = OP_RELU, .y = y, .ldy = ldy, .n = n};
    rows_run(e, &j, n_rows);
}

/* conv(x) -> y, then ReLU: a TDNN layer over rows that need no padding. */
static void tdnn(const kz_conv *c, kz_exec *e, float *y, size_t ldy, const float *x, size_t ldx,
                 size_t n_rows) {
    kz_conv_run(c, e, y, ldy, x, ldx, n_rows, KZ_GEMM_STORE);
    relu(e, y, ldy, c->n, n_rows);
}

/* dst [left + T + right, n] = rows of x (+ rows of x2) with `left`/`right` mirrored rows
 * (reflect: the edge row is not repeated). */
typedef struct pad_job {
    float *dst;
    const float *x, *x2;
    size_t ldx, ldx2, n, left;
} pad_job;

static void pad_fn(void *arg, size_t t0, size_t t1) {
    const pad_job *j = arg;
    for (size_t t = t0; t < t1; t++) {
        float *d = j->dst + (j->left + t) * j->n;
        const float *a = j->x + t * j->ldx;
        if (j->x2) {
            const float *b = j->x2 + t * j->ldx2;
            for (size_t c = 0; c < j->n; c++) {
                d[c] = a[c] + b[c];
            }
        } else {
            memcpy(d, a, j->n * sizeof *d);
        }
    }
}

static const float *reflect_pad(kz_exec *e, const kz_conv *c, float *dst, const float *x,
                                size_t ldx, const float *x2, size_t ldx2, size_t n_rows) {
    const size_t left = c->history / 2, right = c->history - left, n = c->k_in;
    pad_job j = {.dst = dst, .x = x, .x2 = x2, .ldx = ldx, .ldx2 = ldx2, .n = n, .left = left};
    kz_exec_rows(e, n_rows, 4096 / (n + 1) + 1, pad_fn, &j);
    for (size_t r = 1; r <= left; r++) {
        memcpy(dst + (left - r) * n, dst + (left + r) * n, n * sizeof *dst);
    }
    for (size_t r = 1; r <= right; r++) {
        memcpy(dst + (left + n_rows - 1 + r) * n, dst + (left + n_rows - 1 - r) * n,
               n * sizeof *dst);
    }
    return dst;
}

/* Per-channel statistics over time of x [T, ld]: out_mean[c] = sum_t w x, out_std[c] =
 * sqrt(max(sum_t w (x - mean)^2, 1e-12)) with w = 1/T (uniform) or the softmax over t of
 * logits[t, c] (written back as the weights). */
typedef struct stats_job {
    const float *x;
    float *logits; /* [T, ldl] or NULL: uniform weights */
    size_t ld, ldl, n_ch, n_rows;
    float *mean, *std;
} stats_job;

static void softmax_cols(const stats_job *j, size_t c0, size_t c1) {
    float mx[CH_BLOCK];
    double sum[CH_BLOCK] = {0};
    for (size_t c = c0; c < c1; c++) {
        mx[c - c0] = -INFINITY;
    }
    for (size_t t = 0; t < j->n_rows; t++) {
        const float *a = j->logits + t * j->ldl;
        for (size_t c = c0; c < c1; c++) {
            mx[c - c0] = a[c] > mx[c - c0] ? a[c] : mx[c - c0];
        }
    }
    for (size_t t = 0; t < j->n_rows; t++) {
        float *a = j->logits + t * j->ldl;
        for (size_t c = c0; c < c1; c++) {
            a[c] = expf(a[c] - mx[c - c0]);
            sum[c - c0] += a[c];
        }
    }
    for (size_t t = 0; t < j->n_rows; t++) {
        float *a = j->logits + t * j->ldl;
        for (size_t c = c0; c < c1; c++) {
            a[c] = a[c] * (float)(1.0 / sum[c - c0]);
        }
    }
}

static void stats_fn(void *arg, size_t b0, size_t b1) {
    const stats_job *j = arg;
    const float uniform = 1.0f / (float)j->n_rows;
    for (size_t b = b0; b < b1; b++) {
        const size_t c0 = b * CH_BLOCK, c1 = c0 + CH_BLOCK < j->n_ch ? c0 + CH_BLOCK : j->n_ch;
        if (j->logits) {
            softmax_cols(j, c0, c1);
        }
        double acc[CH_BLOCK] = {0}, var[CH_BLOCK] = {0};
        for (size_t t = 0; t < j->n_rows; t++) {
            const float *x = j->x + t * j->ld, *w = j->logits ? j->logits + t * j->ldl : NULL;
            for (size_t c = c0; c < c1; c++) {
                acc[c - c0] += (w ? w[c] : uniform) * x[c];
            }
        }
        for (size_t c = c0; c < c1; c++) {
            j->mean[c] = (float)acc[c - c0];
        }
        for (size_t t = 0; t < j->n_rows; t++) {
            const float *x = j->x + t * j->ld, *w = j->logits ? j->logits + t * j->ldl : NULL;
            for (size_t c = c0; c < c1; c++) {
                const float dev = x[c] - j->mean[c];
                var[c - c0] += (w ? w[c] : uniform) * (dev * dev);
            }
        }
        for (size_t c = c0; c < c1; c++) {
            const float v = (float)var[c - c0];
            j->std[c] = sqrtf(v > 1e-12f ? v : 1e-12f);
        }
    }
}

static void channel_stats(kz_exec *e, stats_job *j) {
    kz_exec_rows(e, (j->n_ch + CH_BLOCK - 1) / CH_BLOCK, 1, stats_fn, j);
}

/* Mean over time of x [T, ld], n_ch channels (SE squeeze). */
typedef struct mean_job {
    const float *x;
    size_t ld, n_ch, n_rows;
    float *out;
} mean_job;

static void mean_fn(void *arg, size_t b0, size_t b1) {
    const mean_job *j = arg;
    for (size_t b = b0; b < b1; b++) {
        const size_t c0 = b * CH_BLOCK, c1 = c0 + CH_BLOCK < j->n_ch ? c0 + CH_BLOCK : j->n_ch;
        double acc[CH_BLOCK] = {0};
        for (size_t t = 0; t < j->n_rows; t++) {
            for (size_t c = c0; c < c1; c++) {
                acc[c - c0] += j->x[t * j->ld + c];
            }
        }
        for (size_t c = c0; c < c1; c++) {
            j->out[c] = (float)(acc[c - c0] / (double)j->n_rows);
        }
    }
}

/* --- forward ----------------------------------------------------------------- */

/* Scratch of one run, carved from one allocation. */
typedef struct plan {
    float *mel_scratch, *mel, *pad, *b0, *cat, *u, *v, *m, *vec;
    size_t n_floats;
} plan;

/* Pointers into base (NULL: only the total, p->n_floats) of every buffer for T frames. */
static void lay_out(const kz_speaker_encoder *se, size_t T, int n_threads, float *base, plan *p) {
    size_t ch_max = se->ch0, pad = (T + se->block0.history) * se->block0.k_in;
    size_t vec = 0;
    for (int b = 0; b < N_BLOCKS; b++) {
        const se_block *k = &se->blocks[b];
        ch_max = max_sz(ch_max, k->ch);
        pad = max_sz(pad, (T + k->res[0].history) * k->width);
        vec = max_sz(vec, 2 * k->ch + k->se_ch);
    }
    if (se->mfa.history) { // a 1x1 MFA (upstream's) reads cat as it is
        pad = max_sz(pad, (T + se->mfa.history) * se->cat_ch);
    }
    pad = max_sz(pad, POOL_ROWS * 3 * se->mfa_ch);
    vec = max_sz(vec, 4 * se->mfa_ch);
    size_t at = 0;
#define TAKE(field, count) p->field = base ? base + at : NULL, at += ((count) + 15) / 16 * 16
    TAKE(mel_scratch, (size_t)n_threads * kz_mel_scratch_floats());
    TAKE(mel, T * KZ_MEL_N_MELS);
    TAKE(pad, pad);
    TAKE(b0, T * se->ch0);
    TAKE(cat, T * max_sz(se->cat_ch, se->mfa_ch)); // later the attention logits
    TAKE(u, T * max_sz(ch_max, se->att_ch));       // later the attention TDNN output
    TAKE(v, T * ch_max);
    TAKE(m, T * se->mfa_ch);
    TAKE(vec, vec);
#undef TAKE
    p->n_floats = at;
}

static void res2net(const se_block *k, kz_exec *e, plan *p, size_t T) {
    const size_t w = k->width;
    for (size_t i = 1; i < k->scale; i++) {
        const kz_conv *c = &k->res[i - 1];
        float *chunk = p->u + i * w;
        const float *in =
            reflect_pad(e, c, p->pad, chunk, k->ch, i > 1 ? chunk - w : NULL, k->ch, T);
        tdnn(c, e, chunk, k->ch, in, w, T);
    }
}

/* SE-Res2Net block: prev [T, ld_prev] -> out [T, ldo] (a slot of cat). */
static void se_res2net(const se_block *k, kz_exec *e, plan *p, const float *prev, size_t ld_prev,
                       float *out, size_t ldo, size_t T) {
    tdnn(&k->tdnn1, e, p->u, k->ch, prev, ld_prev, T);
    res2net(k, e, p, T);
    tdnn(&k->tdnn2, e, p->v, k->ch, p->u, k->ch, T);
    float *mean = p->vec, *hid = mean + k->ch, *gate = hid + k->se_ch;
    mean_job mj = {.x = p->v, .ld = k->ch, .n_ch = k->ch, .n_rows = T, .out = mean};
    kz_exec_rows(e, (k->ch + CH_BLOCK - 1) / CH_BLOCK, 1, mean_fn, &mj);
    tdnn(&k->se1, e, hid, k->se_ch, mean, k->ch, 1);
    kz_conv_run(&k->se2, e, gate, k->ch, hid, k->se_ch, 1, KZ_GEMM_STORE);
    rows_job sig = {.op = OP_SIGMOID, .y = gate, .ldy = k->ch, .n = k->ch};
    rows_run(e, &sig, 1);
    rows_job j = {.op = OP_GATE_ADD,
                  .y = out,
                  .ldy = ldo,
                  .n = k->ch,
                  .x = p->v,
                  .ldx = k->ch,
                  .r = prev,
                  .ldr = ld_prev,
                  .g = gate};
    rows_run(e, &j, T);
}

/* Attentive statistics pooling of m [T, C4] -> pooled [2 C4]. */
static void pool(const kz_speaker_encoder *se, kz_exec *e, plan *p, size_t T, float *pooled) {
    const size_t c4 = se->mfa_ch, a = se->att_ch;
    float *mean = p->vec, *std = mean + c4;
    stats_job sj = {.x = p->m, .ld = c4, .n_ch = c4, .n_rows = T, .mean = mean, .std = std};
    channel_stats(e, &sj);
    for (size_t t0 = 0; t0 < T; t0 += POOL_ROWS) {
        const size_t n = T - t0 < POOL_ROWS ? T - t0 : POOL_ROWS;
        for (size_t t = 0; t < n; t++) {
            float *row = p->pad + t * 3 * c4;
            memcpy(row, p->m + (t0 + t) * c4, c4 * sizeof *row);
            memcpy(row + c4, mean, c4 * sizeof *row);
            memcpy(row + 2 * c4, std, c4 * sizeof *row);
        }
        kz_conv_run(&se->asp_tdnn, e, p->u + t0 * a, a, p->pad, 3 * c4, n, KZ_GEMM_STORE);
    }
    rows_job th = {.op = OP_RELU_TANH, .y = p->u, .ldy = a, .n = a};
    rows_run(e, &th, T);
    float *logits = p->cat;
    kz_conv_run(&se->asp_conv, e, logits, c4, p->u, a, T, KZ_GEMM_STORE);
    stats_job wj = {.x = p->m,
                    .logits = logits,
                    .ld = c4,
                    .ldl = c4,
                    .n_ch = c4,
                    .n_rows = T,
                    .mean = pooled,
                    .std = pooled + c4};
    channel_stats(e, &wj);
    e->flop += (double)T * (double)c4 * 12.0; // stats, softmax, weighted stats
}

static void forward(const kz_speaker_encoder *se, kz_exec *e, plan *p, const float *pcm, size_t n,
                    size_t T, float *xvector) {
    kz_mel_run(&se->mel, pcm, n, e, p->mel_scratch, p->mel);
    const float *in = reflect_pad(e, &se->block0, p->pad, p->mel, KZ_MEL_N_MELS, NULL, 0, T);
    tdnn(&se->block0, e, p->b0, se->ch0, in, KZ_MEL_N_MELS, T);
    const float *prev = p->b0;
    size_t ld_prev = se->ch0, slot = 0;
    for (int b = 0; b < N_BLOCKS; b++) {
        float *out = p->cat + slot;
        se_res2net(&se->blocks[b], e, p, prev, ld_prev, out, se->cat_ch, T);
        prev = out;
        ld_prev = se->cat_ch;
        slot += se->blocks[b].ch;
    }
    in =
        se->mfa.history ? reflect_pad(e, &se->mfa, p->pad, p->cat, se->cat_ch, NULL, 0, T) : p->cat;
    tdnn(&se->mfa, e, p->m, se->mfa_ch, in, se->cat_ch, T);
    float *pooled = p->vec + 2 * se->mfa_ch;
    pool(se, e, p, T, pooled);
    kz_conv_run(&se->fc, e, xvector, se->enc_dim, pooled, 2 * se->mfa_ch, 1, KZ_GEMM_STORE);
}

kz_status kz_speaker_encoder_run(const kz_speaker_encoder *se, const float *pcm, size_t n,
                                 kz_exec *e, float *xvector) {
    if (!se) {
        return kz_error_set(KZ_STATUS_UNSUPPORTED,
                            "the model has no speaker encoder (only Base models clone voices)");
    }
    const size_t T = kz_mel_frames(n);
    if (T < se->min_frames) {
        return kz_error_set(KZ_STATUS_BAD_INPUT,
                            "speaker encoder: %zu samples are too short (at least %zu needed)", n,
                            max_sz(KZ_MEL_PAD + 1, KZ_MEL_N_FFT - 2 * KZ_MEL_PAD +
                                                       (se->min_frames - 1) * KZ_MEL_HOP));
    }
    plan p;
    lay_out(se, T, kz_pool_threads(e->pool), NULL, &p);
    float *base = malloc(p.n_floats * sizeof *base);
    if (!base) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY,
                            "out of memory for the speaker encoder (%zu frames)", T);
    }
    lay_out(se, T, kz_pool_threads(e->pool), base, &p);
    forward(se, e, &p, pcm, n, T, xvector);
    free(base);
    return KZ_OK;
}
