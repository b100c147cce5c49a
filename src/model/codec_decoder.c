/*
 * codec_decoder.c - streaming forward pass of the codec decoder (see
 * codec_decoder.h for the stage diagram).
 *
 * Buffers: four scratch arrays a, b, c, d of the largest stage size. A conv
 * with left context reads b, laid out as [history + new rows, ch] by
 * kz_conv_state_begin; its output goes to a or c. The residual stream of the
 * decoder blocks lives in a; residual units write conv1's output to c and add
 * conv2's output back into a (fused in the GEMM). Frames are processed in
 * internal steps of at most max_frames, so memory does not depend on the
 * number of frames; within a step the input of the last KZ_CODEC_TAIL_BLOCKS blocks
 * waits in d while those blocks and the final conv run on tails of
 * KZ_CODEC_TAIL_FRAMES frames.
 * With bf16 or winograd-bf16, x_bf16 holds the rounded input rows of the bf16
 * convs (kz_conv_run), lent to the exec for the call. The SnakeBeta before a conv
 * that reads its output only runs through kz_conv_run_after: in a bf16 conv's rounding
 * job, each row block activated and rounded while in cache.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/codec_decoder.h"
#include "runtime/error.h"

enum { MS_QUANTIZER, MS_TRANSFORMER, MS_UPSAMPLE, MS_VOCODER };

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static void tap(kz_codec_state *s, const char *stage, const float *rows, size_t n_rows,
                size_t n_ch) {
    if (s->tap) {
        s->tap(s->tap_user, stage, rows, n_rows, n_ch);
    }
}

/* --- state ---------------------------------------------------------------- */

/* Frames of the tails in a step of max_frames frames. */
static size_t tail_frames(size_t max_frames) {
    return max_frames < KZ_CODEC_TAIL_FRAMES ? max_frames : KZ_CODEC_TAIL_FRAMES;
}

/* The first decoder block that runs in tails (KZ_CODEC_TAIL_BLOCKS from the end). */
static int first_tail_block(const kz_codec_config *c) {
    const int first = c->n_upsample_rates - KZ_CODEC_TAIL_BLOCKS;
    return first > 0 ? first : 0;
}

/* Largest [rows (+ history), ch] any stage needs for max_frames frames (the tail blocks
 * and the final conv for a tail). */
static size_t scratch_floats(const kz_codec_decoder *d, size_t max_frames) {
    const kz_codec_config *c = &d->cfg;
    size_t rows = max_frames, latent = (size_t)c->latent_dim, best = 0;
#define KEEP(r, ch) best = (r) * (ch) > best ? (r) * (ch) : best
    KEEP(rows + 2, (size_t)c->codebook_dim);
    KEEP(rows, latent);
    for (int u = 0; u < c->n_upsampling_ratios; u++) {
        rows *= (size_t)c->upsampling_ratios[u];
        KEEP(rows + 6, latent);
        KEEP(rows, 4 * latent);
    }
    KEEP(rows + 6, latent);
    for (int i = 0; i < c->n_upsample_rates; i++) {
        const kz_decoder_block *b = &d->blocks[i];
        KEEP(rows + 1, (size_t)b->c_in); // the first tail block's: its whole input waits in d
        if (i == first_tail_block(c)) {
            rows = kz_block_in_rows(b) * tail_frames(max_frames);
        }
        rows *= (size_t)b->rate;
        KEEP(rows + 54, (size_t)b->c_out);
    }
    KEEP(rows + 6, (size_t)1);
#undef KEEP
    return best;
}

static kz_status init_conv_states(kz_codec_state *s, const kz_codec_decoder *d) {
    const kz_codec_config *c = &d->cfg;
    kz_status st = kz_conv_state_init(&s->pre_conv, d->pre_conv.history, d->pre_conv.k_in);
    st = st == KZ_OK ? kz_conv_state_init(&s->dec0, d->dec0.history, d->dec0.k_in) : st;
    st = st == KZ_OK ? kz_conv_state_init(&s->final_conv, d->final_conv.history,
                                          d->final_conv.k_in)
                     : st;
    for (int u = 0; u < c->n_upsampling_ratios && st == KZ_OK; u++) {
        st = kz_conv_state_init(&s->dw[u], 6, (size_t)c->latent_dim);
    }
    for (int i = 0; i < c->n_upsample_rates && st == KZ_OK; i++) {
        const kz_decoder_block *b = &d->blocks[i];
        st = kz_conv_state_init(&s->block_up[i], b->up.history, b->up.k_in);
        for (int r = 0; r < KZ_CODEC_RES_UNITS && st == KZ_OK; r++) {
            st = kz_conv_state_init(&s->res[i][r], b->res[r].conv1.history, b->res[r].conv1.k_in);
        }
    }
    return st;
}

/* Raises *n_f, *n_idx to w's scratch for max_frames frames (nothing if w is empty). */
static void wino_need(const kz_wino *w, size_t frame_rows, size_t max_frames, size_t *n_f,
                      size_t *n_idx) {
    if (w->n_pts == 0) {
        return;
    }
    size_t f, idx;
    kz_wino_scratch_need(w, frame_rows, max_frames, &f, &idx);
    *n_f = f > *n_f ? f : *n_f;
    *n_idx = idx > *n_idx ? idx : *n_idx;
}

/* The largest Winograd scratch of any conv for max_frames frames (the tail blocks' for a
 * tail). */
static kz_status init_wino_scratch(kz_codec_state *s, const kz_codec_decoder *d,
                                   size_t max_frames) {
    size_t n_f = 0, n_idx = 0;
    wino_need(&d->dec0_wino, kz_codec_mid_rows(&d->cfg), max_frames, &n_f, &n_idx);
    for (int i = 0; i < d->cfg.n_upsample_rates; i++) {
        const kz_decoder_block *b = &d->blocks[i];
        const size_t frames =
            i >= first_tail_block(&d->cfg) ? tail_frames(max_frames) : max_frames;
        wino_need(&b->up_wino, kz_block_in_rows(b), frames, &n_f, &n_idx);
        for (int r = 0; r < KZ_CODEC_RES_UNITS; r++) {
            wino_need(&b->res[r].wino1, b->frame_rows, frames, &n_f, &n_idx);
        }
    }
    s->wino = (kz_wino_scratch){.f = aligned_alloc(64, (n_f + 16) * sizeof(float) / 64 * 64 + 64),
                                .n_f = n_f,
                                .idx = malloc((n_idx + 1) * sizeof(size_t)),
                                .n_idx = n_idx};
    return s->wino.f && s->wino.idx
               ? KZ_OK
               : kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory for Winograd scratch");
}

kz_status kz_codec_state_init(kz_codec_state *s, const kz_codec_decoder *d, size_t max_frames) {
    memset(s, 0, sizeof *s);
    s->max_frames = max_frames;
    s->scratch_floats = scratch_floats(d, max_frames);
    size_t bytes = (s->scratch_floats + 16) * sizeof(float);
    bytes = (bytes + 63) / 64 * 64;
    s->a = aligned_alloc(64, bytes);
    s->b = aligned_alloc(64, bytes);
    s->c = aligned_alloc(64, bytes);
    s->d = aligned_alloc(64, bytes);
    // Every bf16 conv input [rows + history, k_in] fits a float scratch, and its bf16 rows
    // are at most k_in + 1 wide: twice scratch_floats bf16 elements hold any of them.
    s->x_bf16 = d->bf16 ? aligned_alloc(64, bytes) : NULL;
    kz_status st = s->a && s->b && s->c && s->d && (s->x_bf16 || !d->bf16)
                       ? KZ_OK
                       : kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory for codec scratch");
    st = st == KZ_OK && d->winograd ? init_wino_scratch(s, d, max_frames) : st;
    st = st == KZ_OK ? init_conv_states(s, d) : st;
    st = st == KZ_OK ? kz_codec_transformer_state_init(&s->tr, &d->transformer, max_frames) : st;
    if (st != KZ_OK) {
        kz_codec_state_free(s);
    }
    return st;
}

static void for_each_conv_state(kz_codec_state *s, void (*fn)(kz_conv_state *)) {
    fn(&s->pre_conv);
    fn(&s->dec0);
    fn(&s->final_conv);
    for (int i = 0; i < KZ_CODEC_MAX_RATES; i++) {
        fn(&s->dw[i]);
        fn(&s->block_up[i]);
        for (int r = 0; r < KZ_CODEC_RES_UNITS; r++) {
            fn(&s->res[i][r]);
        }
    }
}

static void conv_state_reset_if_any(kz_conv_state *c) {
    if (c->rows) {
        kz_conv_state_reset(c);
    }
}

void kz_codec_state_free(kz_codec_state *s) {
    if (!s) {
        return;
    }
    for_each_conv_state(s, kz_conv_state_free);
    kz_codec_transformer_state_free(&s->tr);
    free(s->a);
    free(s->b);
    free(s->c);
    free(s->d);
    free(s->x_bf16);
    free(s->wino.f);
    free(s->wino.idx);
    memset(s, 0, sizeof *s);
}

void kz_codec_state_reset(kz_codec_state *s) {
    for_each_conv_state(s, conv_state_reset_if_any);
    kz_codec_transformer_state_reset(&s->tr);
}

/* The conv states that exist (rows allocated), in a fixed order. */
static size_t live_conv_states(kz_codec_state *s, kz_conv_state **out) {
    kz_conv_state *all[3 + KZ_CODEC_MAX_RATES * (2 + KZ_CODEC_RES_UNITS)];
    size_t n = 0, k = 0;
    all[n++] = &s->pre_conv;
    all[n++] = &s->dec0;
    all[n++] = &s->final_conv;
    for (int i = 0; i < KZ_CODEC_MAX_RATES; i++) {
        all[n++] = &s->dw[i];
        all[n++] = &s->block_up[i];
        for (int r = 0; r < KZ_CODEC_RES_UNITS; r++) {
            all[n++] = &s->res[i][r];
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (all[i]->rows) {
            out[k++] = all[i];
        }
    }
    return k;
}

#define MAX_CONV_STATES (3 + KZ_CODEC_MAX_RATES * (2 + KZ_CODEC_RES_UNITS))

size_t kz_codec_state_floats(const kz_codec_state *s) {
    kz_conv_state *cs[MAX_CONV_STATES];
    size_t n = live_conv_states((kz_codec_state *)s, cs), total = 2 * s->tr.ring_floats;
    for (size_t i = 0; i < n; i++) {
        total += cs[i]->n_rows * cs[i]->ch;
    }
    return total;
}

void kz_codec_state_save(const kz_codec_state *s, float *out, int64_t *pos) {
    kz_conv_state *cs[MAX_CONV_STATES];
    size_t n = live_conv_states((kz_codec_state *)s, cs);
    for (size_t i = 0; i < n; i++) {
        size_t m = cs[i]->n_rows * cs[i]->ch;
        memcpy(out, cs[i]->rows, m * sizeof(float));
        out += m;
    }
    memcpy(out, s->tr.k_ring, s->tr.ring_floats * sizeof(float));
    memcpy(out + s->tr.ring_floats, s->tr.v_ring, s->tr.ring_floats * sizeof(float));
    *pos = s->tr.pos;
}

void kz_codec_state_restore(kz_codec_state *s, const float *in, int64_t pos) {
    kz_conv_state *cs[MAX_CONV_STATES];
    size_t n = live_conv_states(s, cs);
    for (size_t i = 0; i < n; i++) {
        size_t m = cs[i]->n_rows * cs[i]->ch;
        memcpy(cs[i]->rows, in, m * sizeof(float));
        in += m;
    }
    memcpy(s->tr.k_ring, in, s->tr.ring_floats * sizeof(float));
    memcpy(s->tr.v_ring, in + s->tr.ring_floats, s->tr.ring_floats * sizeof(float));
    s->tr.pos = pos;
}

/* --- elementwise jobs ------------------------------------------------------- */

typedef struct snake_job {
    const kz_kernels *k;
    float *y;
    const float *x;
    size_t ch;
    const kz_snake *act;
} snake_job;

static void snake_rows(void *arg, size_t r0, size_t r1) {
    const snake_job *j = arg;
    j->k->snake_beta(j->y + r0 * j->ch, j->x + r0 * j->ch, r1 - r0, j->ch, j->act->alpha,
                     j->act->inv_beta);
}

static void snake(kz_exec *e, float *y, const float *x, size_t n_rows, size_t ch,
                  const kz_snake *act) {
    snake_job j = {.k = e->k, .y = y, .x = x, .ch = ch, .act = act};
    kz_exec_rows(e, n_rows, 4096 / ch + 1, snake_rows, &j);
}

/* --- stages ------------------------------------------------------------------ */

/* dst[dim] = table_q[code]: the stored sum's row / the code's clamped usage (the load
 * checked that the sums' dtype converts). */
static void codebook_row(const kz_codec_decoder *d, size_t q, int32_t code, size_t dim,
                         float *dst) {
    (void)kz_tensor_row_to_f32(d->codebook_sums[q], (size_t)code, dim, dst);
    const float u = d->codebook_usage[q * (size_t)d->cfg.codebook_size + (size_t)code];
    for (size_t i = 0; i < dim; i++) {
        dst[i] = dst[i] / u;
    }
}

/* z[T, codebook_dim] = W_first * table_0[c0] + W_rest * sum_q table_q[c_q]. */
static void quantizer(const kz_codec_decoder *d, kz_codec_state *s, kz_exec *e,
                      const int32_t *codes, size_t n_frames, float *z) {
    const kz_codec_config *c = &d->cfg;
    size_t dim = (size_t)c->codebook_dim / 2, nq = (size_t)c->num_quantizers;
    float *sem = s->c, *rest = s->c + n_frames * dim, *row = rest + n_frames * dim;
    KZ_ASSERT((2 * n_frames + 1) * dim <= s->scratch_floats);
    for (size_t t = 0; t < n_frames; t++) {
        const int32_t *f = codes + t * nq;
        codebook_row(d, 0, f[0], dim, sem + t * dim);
        float *r = rest + t * dim;
        codebook_row(d, 1, f[1], dim, r);
        for (size_t q = 2; q < nq; q++) {
            codebook_row(d, q, f[q], dim, row);
            for (size_t i = 0; i < dim; i++) {
                r[i] = r[i] + row[i];
            }
        }
    }
    kz_conv_run(&d->proj_first, e, z, (size_t)c->codebook_dim, sem, dim, n_frames, KZ_GEMM_STORE);
    kz_conv_run(&d->proj_rest, e, z, (size_t)c->codebook_dim, rest, dim, n_frames,
                KZ_GEMM_ACCUMULATE);
}

/* Depthwise causal conv k7: y[t, c] = b[c] + sum_j w[c, j] x[t + j, c] (x has 6 history rows). */
static void depthwise7(float *y, const float *x, const float *w, const float *b, size_t n_rows,
                       size_t ch) {
    for (size_t t = 0; t < n_rows; t++) {
        for (size_t c = 0; c < ch; c++) {
            float acc = 0.0f;
            for (size_t j = 0; j < 7; j++) {
                acc = acc + w[c * 7 + j] * x[(t + j) * ch + c];
            }
            y[t * ch + c] = acc + b[c];
        }
    }
}

/* One upsample stage: x[R, latent] -> out[ratio R, latent]. */
static void convnext_stage(const kz_codec_decoder *d, kz_codec_state *s, kz_exec *e, int u,
                           const float *x, size_t n_rows, float *out) {
    const kz_convnext *cx = &d->upsample[u];
    size_t latent = (size_t)d->cfg.latent_dim, rows = n_rows * (size_t)d->cfg.upsampling_ratios[u];
    float *in = kz_conv_state_begin(&s->dw[u], s->b);
    kz_conv_run(&cx->up, e, in, cx->up.n, x, latent, n_rows, KZ_GEMM_STORE);
    depthwise7(s->a, s->b, cx->dw_w, cx->dw_b, rows, latent);
    kz_conv_state_end(&s->dw[u], s->b, rows);
    e->k->layer_norm(s->a, s->a, cx->norm_w, cx->norm_b, rows, latent, 1e-6f);
    kz_conv_run(&cx->pw1, e, s->d, 4 * latent, s->a, latent, rows, KZ_GEMM_STORE);
    e->k->gelu(s->d, s->d, rows * 4 * latent);
    kz_conv_run(&cx->pw2, e, s->a, latent, s->d, 4 * latent, rows, KZ_GEMM_STORE);
    for (size_t t = 0; t < rows; t++) {
        for (size_t c = 0; c < latent; c++) {
            float g = cx->gamma[c] * s->a[t * latent + c];
            out[t * latent + c] = in[t * latent + c] + g;
        }
    }
}

/* DecoderBlock on the residual stream in s->a: [R, c_in] -> [R rate, c_out]. */
static void decoder_block(const kz_codec_decoder *d, kz_codec_state *s, kz_exec *e, int i,
                          size_t n_rows) {
    const kz_decoder_block *b = &d->blocks[i];
    size_t c_in = (size_t)b->c_in, c_out = (size_t)b->c_out, rows = n_rows * (size_t)b->rate;
    float *in = kz_conv_state_begin(&s->block_up[i], s->b);
    if (b->up_wino.n_pts) {
        snake(e, in, s->a, n_rows, c_in, &b->act);
        kz_wino_run(&b->up_wino, e, &s->wino, s->a, b->up.n, s->b, c_in, n_rows,
                    kz_block_in_rows(b));
    } else {
        snake_job act = {.k = e->k, .y = in, .x = s->a, .ch = c_in, .act = &b->act};
        kz_conv_run_after(&b->up, e, snake_rows, &act, s->a, b->up.n, s->b, c_in, n_rows,
                          KZ_GEMM_STORE);
    }
    kz_conv_state_end(&s->block_up[i], s->b, n_rows);
    for (int r = 0; r < KZ_CODEC_RES_UNITS; r++) {
        const kz_res_unit *ru = &b->res[r];
        in = kz_conv_state_begin(&s->res[i][r], s->b);
        snake(e, in, s->a, rows, c_out, &ru->act1);
        if (d->winograd) {
            kz_wino_run(&ru->wino1, e, &s->wino, s->c, c_out, s->b, c_out, rows, b->frame_rows);
        } else {
            kz_conv_run(&ru->conv1, e, s->c, c_out, s->b, c_out, rows, KZ_GEMM_STORE);
        }
        kz_conv_state_end(&s->res[i][r], s->b, rows);
        snake_job act2 = {.k = e->k, .y = s->c, .x = s->c, .ch = c_out, .act = &ru->act2};
        kz_conv_run_after(&ru->conv2, e, snake_rows, &act2, s->a, c_out, s->c, c_out, rows,
                          KZ_GEMM_ACCUMULATE);
    }
}

/* Quantizer, pre_conv and transformer: codes -> s->c [T, latent]. */
static void front(const kz_codec_decoder *d, kz_codec_state *s, kz_exec *e, const int32_t *codes,
                  size_t n_frames) {
    const kz_codec_config *c = &d->cfg;
    size_t latent = (size_t)c->latent_dim, cb = (size_t)c->codebook_dim;
    double t0 = now_ms();
    float *z = kz_conv_state_begin(&s->pre_conv, s->b);
    quantizer(d, s, e, codes, n_frames, z);
    tap(s, "quantizer", z, n_frames, cb);
    kz_conv_run(&d->pre_conv, e, s->a, latent, s->b, cb, n_frames, KZ_GEMM_STORE);
    kz_conv_state_end(&s->pre_conv, s->b, n_frames);
    tap(s, "pre_conv", s->a, n_frames, latent);
    double t1 = now_ms();
    kz_codec_transformer_forward(&d->transformer, &s->tr, e, s->c, s->a, n_frames);
    tap(s, "pre_transformer", s->c, n_frames, latent);
    s->ms[MS_QUANTIZER] += t1 - t0;
    s->ms[MS_TRANSFORMER] += now_ms() - t1;
}

/* Upsample stages and decoder.0: s->c [T, latent] -> s->a [4T, decoder_dim]; returns rows. */
static size_t middle(const kz_codec_decoder *d, kz_codec_state *s, kz_exec *e, size_t n_frames) {
    const kz_codec_config *c = &d->cfg;
    size_t latent = (size_t)c->latent_dim, rows = n_frames;
    double t0 = now_ms();
    for (int u = 0; u < c->n_upsampling_ratios; u++) {
        convnext_stage(d, s, e, u, s->c, rows, s->c);
        rows *= (size_t)c->upsampling_ratios[u];
    }
    tap(s, "upsample", s->c, rows, latent);
    float *in = kz_conv_state_begin(&s->dec0, s->b);
    memcpy(in, s->c, rows * latent * sizeof(float));
    if (d->dec0_wino.n_pts) {
        kz_wino_run(&d->dec0_wino, e, &s->wino, s->a, (size_t)c->decoder_dim, s->b, latent, rows,
                    kz_codec_mid_rows(c));
    } else {
        kz_conv_run(&d->dec0, e, s->a, (size_t)c->decoder_dim, s->b, latent, rows, KZ_GEMM_STORE);
    }
    kz_conv_state_end(&s->dec0, s->b, rows);
    tap(s, "decoder.0", s->a, rows, (size_t)c->decoder_dim);
    s->ms[MS_UPSAMPLE] += now_ms() - t0;
    return rows;
}

/* Final SnakeBeta + conv, clamp: s->a [rows, ch] -> pcm. */
static void final_conv(const kz_codec_decoder *d, kz_codec_state *s, kz_exec *e, size_t rows,
                       float *pcm) {
    size_t ch = (size_t)d->final_conv.k_in;
    float *in = kz_conv_state_begin(&s->final_conv, s->b);
    snake(e, in, s->a, rows, ch, &d->final_act);
    kz_conv_run(&d->final_conv, e, pcm, 1, s->b, ch, rows, KZ_GEMM_STORE);
    kz_conv_state_end(&s->final_conv, s->b, rows);
    tap(s, "final", pcm, rows, 1);
    for (size_t t = 0; t < rows; t++) { // an Inf stays non-finite (NaN) for the callers' check
        pcm[t] = isinf(pcm[t]) ? NAN : pcm[t] < -1.0f ? -1.0f : pcm[t] > 1.0f ? 1.0f : pcm[t];
    }
}

/* Decoder blocks and the final conv: s->a -> pcm. The first tail block's input rows wait
 * in s->d; the tail blocks and the final conv take them a tail of frames at a time. */
static void vocoder(const kz_codec_decoder *d, kz_codec_state *s, kz_exec *e, size_t rows,
                    float *pcm) {
    static const char *names[] = {"block.1", "block.2", "block.3", "block.4",
                                  "block.5", "block.6", "block.7", "block.8"};
    const int first = first_tail_block(&d->cfg), last = d->cfg.n_upsample_rates - 1;
    double t0 = now_ms();
    for (int i = 0; i < first; i++) {
        decoder_block(d, s, e, i, rows);
        rows *= (size_t)d->blocks[i].rate;
        tap(s, names[i], s->a, rows, (size_t)d->blocks[i].c_out);
    }
    const kz_decoder_block *b = &d->blocks[first];
    const size_t in_rows = kz_block_in_rows(b), n_frames = rows / in_rows;
    const size_t tail = tail_frames(s->max_frames), row_floats = in_rows * (size_t)b->c_in;
    const size_t pcm_rows = d->blocks[last].frame_rows;
    if (n_frames > tail) {
        memcpy(s->d, s->a, n_frames * row_floats * sizeof(float));
    }
    // The tail's passes in split mode: each thread keeps its rows (a frame of a two-frame
    // tail) from pass to pass in its own caches, which matters where the two cores share none.
    const bool was_split = kz_pool_split(e->pool);
    kz_pool_set_split(e->pool, true);
    for (size_t f0 = 0; f0 < n_frames; f0 += tail) {
        const size_t nf = n_frames - f0 < tail ? n_frames - f0 : tail;
        if (n_frames > tail) {
            memcpy(s->a, s->d + f0 * row_floats, nf * row_floats * sizeof(float));
        }
        size_t r = nf * in_rows;
        for (int i = first; i <= last; i++) {
            decoder_block(d, s, e, i, r);
            r *= (size_t)d->blocks[i].rate;
            tap(s, names[i], s->a, r, (size_t)d->blocks[i].c_out);
        }
        final_conv(d, s, e, r, pcm + f0 * pcm_rows);
    }
    kz_pool_set_split(e->pool, was_split);
    s->ms[MS_VOCODER] += now_ms() - t0;
}

/* Frames that `rows` history rows at `per_frame` rows a frame reach back, rounded up: a
 * chain of convs reaches back at most the sum of its convs' reaches. */
static size_t history_frames(size_t rows, size_t per_frame) {
    return (rows + per_frame - 1) / per_frame;
}

size_t kz_codec_back_frames(const kz_codec_decoder *d, const kz_codec_state *s) {
    const kz_codec_config *c = &d->cfg;
    size_t rate = 1, frames = 1;
    for (int u = 0; u < c->n_upsampling_ratios; u++) {
        rate *= (size_t)c->upsampling_ratios[u];
        frames += history_frames(s->dw[u].n_rows, rate);
    }
    frames += history_frames(s->dec0.n_rows, rate);
    for (int i = 0; i < c->n_upsample_rates; i++) {
        const kz_decoder_block *b = &d->blocks[i];
        frames += history_frames(s->block_up[i].n_rows, kz_block_in_rows(b));
        for (int r = 0; r < KZ_CODEC_RES_UNITS; r++) {
            frames += history_frames(s->res[i][r].n_rows, b->frame_rows);
        }
    }
    return frames + history_frames(s->final_conv.n_rows, (size_t)c->decode_upsample_rate);
}

/* n_frames through the decoder in steps of s->max_frames: the front (quantizer, pre-conv,
 * transformer) always, the upsampling and vocoder into pcm unless pcm is NULL. */
static void run_steps(const kz_codec_decoder *d, kz_codec_state *s, kz_exec *e,
                      const int32_t *codes, size_t n_frames, float *pcm) {
    size_t nq = (size_t)d->cfg.num_quantizers, spf = (size_t)d->cfg.decode_upsample_rate;
    uint16_t *saved = e->x_bf16;
    size_t saved_len = e->x_bf16_len;
    e->x_bf16 = s->x_bf16;
    e->x_bf16_len = s->x_bf16 ? 2 * s->scratch_floats : 0;
    for (size_t t0 = 0; t0 < n_frames; t0 += s->max_frames) {
        size_t n = n_frames - t0 < s->max_frames ? n_frames - t0 : s->max_frames;
        front(d, s, e, codes + t0 * nq, n);
        if (pcm) {
            size_t rows = middle(d, s, e, n);
            vocoder(d, s, e, rows, pcm + t0 * spf);
        }
    }
    e->x_bf16 = saved;
    e->x_bf16_len = saved_len;
}

void kz_codec_advance(const kz_codec_decoder *d, kz_codec_state *s, kz_exec *e,
                      const int32_t *codes, size_t n_frames) {
    run_steps(d, s, e, codes, n_frames, NULL);
}

void kz_codec_decode(const kz_codec_decoder *d, kz_codec_state *s, kz_exec *e,
                     const int32_t *codes, size_t n_frames, float *pcm) {
    run_steps(d, s, e, codes, n_frames, pcm);
}
