/*
 * codec_encoder.c - runs the codec encoder (codec_encoder.h) over audio in chunks.
 *
 * The audio is cut into chunks of chunk_frames code frames (hop samples each); each chunk
 * flows through every stage before the next starts:
 *   pcm rows -> first conv -> per ratio: residual blocks (ELU, conv, ELU, conv k1, += x),
 *   ELU, strided conv -> ELU, last conv -> transformer rows (KV of all earlier rows kept)
 *   -> downsample conv (stride 2, replicate padding) -> split RVQ -> codes
 * Each conv keeps its last input rows (Mimi's left padding: zeros at the start, the first
 * row for the replicate-padded downsample) in a kz_conv_state, and the transformer keeps
 * every earlier row's keys and values (the reference's mask is causal without a window),
 * so the codes do not depend on the chunk size. Mimi's right padding (a whole last
 * frame of zeros, or the last row repeated) is applied per conv in the final chunk.
 * Memory: activations of one chunk, plus the transformer's keys and values (rows at
 * 25 Hz, hidden-sized), allocated per call for the input's length.
 *
 * RVQ argmin: dot products of the residual with every table row come from one fp32
 * GEMM; the rows whose score |y|^2 - 2 x.y is within that GEMM's rounding bound of the
 * best are rescored with the exact distance in double, the first smallest wins. The
 * reference (torch.cdist in fp32) agrees except where its own rounding decides a near tie.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers/attention.h"
#include "layers/vector.h"
#include "model/codec_encoder_internal.h"
#include "runtime/error.h"

/* Code frames per chunk of kz_codec_encoder_run: 0.64 s, about 20 MB of activations at
 * the released size, rows enough for the conv-GEMMs' tiles. */
enum { DEFAULT_CHUNK_FRAMES = 8 };

typedef struct conv_io {
    kz_conv_state st; /* history rows of the conv's input */
    float *buf;       /* [history + rows, c_in]: history then this chunk's rows */
} conv_io;

typedef struct run_state {
    size_t chunk_rows[KZ_CODEC_MAX_RATES + 1]; /* rows per level of a full chunk */
    conv_io first, *res_a, *down, last, downsample;
    float **x;                     /* [n_ratios + 1] stream at each level */
    float *h;                      /* residual-branch scratch */
    float *y;                      /* [rows25, hidden] transformer rows */
    float *xn, *q, *k, *v, *att, *o, *mlp, *scores;
    float *k_cache, *v_cache;      /* [layers, cap, kv] */
    size_t cap;                    /* rows25 of the whole input */
    int64_t pos;                   /* transformer rows done */
    bool started;                  /* the downsample's replicate history is set */
    kz_codec_tap_fn tap;           /* test hook, NULL normally */
    void *tap_user;
    float *z;                      /* [rows12, hidden] downsample output */
    float *r, *dots;               /* RVQ residual [rows12, vq], dots [rows12, size] */
} run_state;

/* --- elementwise ------------------------------------------------------------ */

typedef struct elu_job {
    const kz_kernels *k;
    float *dst;
    const float *src;
    size_t ch;
} elu_job;

static void elu_rows(void *arg, size_t r0, size_t r1) {
    const elu_job *j = arg;
    j->k->elu(j->dst + r0 * j->ch, j->src + r0 * j->ch, (r1 - r0) * j->ch);
}

/* nn.ELU (alpha 1) of rows [n_rows, ch], split over the pool. */
static void elu(kz_exec *e, float *dst, const float *src, size_t n_rows, size_t ch) {
    elu_job j = {e->k, dst, src, ch};
    kz_exec_rows(e, n_rows, 4096 / ch + 1, elu_rows, &j);
}

/* --- convs -------------------------------------------------------------------- */

static float *conv_begin(const kz_enc_conv *c, conv_io *io) {
    return c->history ? kz_conv_state_begin(&io->st, io->buf) : io->buf;
}

/* Runs c over the n rows written at conv_begin's pointer; the final chunk pads them to a
 * whole number of strides (zeros, or the last row). Returns the output rows. */
static size_t conv_finish(const kz_enc_conv *c, conv_io *io, kz_exec *e, size_t n, bool final,
                          float *y, size_t ldy, kz_gemm_mode mode) {
    float *rows = io->buf + c->history * c->c_in;
    size_t padded = n;
    if (final && n % c->stride) {
        padded = (n / c->stride + 1) * c->stride;
        for (size_t r = n; r < padded; r++) {
            if (c->replicate) {
                memcpy(rows + r * c->c_in, rows + (n - 1) * c->c_in, c->c_in * sizeof *rows);
            } else {
                memset(rows + r * c->c_in, 0, c->c_in * sizeof *rows);
            }
        }
    }
    size_t n_out = padded / c->stride;
    kz_conv_run(&c->c, e, y, ldy, io->buf, c->c.k_in, n_out, mode);
    if (c->history) {
        kz_conv_state_end(&io->st, io->buf, n);
    }
    return n_out;
}

/* ELU(x) into c's input, then c. */
static size_t elu_conv(const kz_enc_conv *c, conv_io *io, kz_exec *e, const float *x, size_t n,
                       bool final, float *y, size_t ldy, kz_gemm_mode mode) {
    elu(e, conv_begin(c, io), x, n, c->c_in);
    return conv_finish(c, io, e, n, final, y, ldy, mode);
}

/* --- transformer -------------------------------------------------------------- */

typedef struct attn_job {
    const kz_codec_encoder *enc;
    run_state *s;
    const kz_kernels *k;
    size_t layer;
    int64_t pos0;
} attn_job;

static void attn_rows(void *arg, size_t r0, size_t r1) {
    const attn_job *j = arg;
    const kz_codec_encoder_config *c = &j->enc->cfg;
    run_state *s = j->s;
    size_t hd = (size_t)c->head_dim, nh = (size_t)c->num_attention_heads;
    size_t kv = (size_t)c->num_key_value_heads * hd, group = nh / (size_t)c->num_key_value_heads;
    const float *kc = s->k_cache + j->layer * s->cap * kv, *vc = s->v_cache + j->layer * s->cap * kv;
    for (size_t r = r0; r < r1; r++) {
        int64_t pos = j->pos0 + (int64_t)r;
        for (size_t h = 0; h < nh; h++) {
            size_t koff = (h / group) * hd;
            kz_attend_row(j->k, s->att + (r * nh + h) * hd, s->q + (r * nh + h) * hd, kc + koff,
                          vc + koff, kv, 0, pos, 0, hd, s->scores + r * s->cap);
        }
    }
}

static void attention(const kz_codec_encoder *enc, run_state *s, kz_exec *e, size_t l, size_t n) {
    const kz_codec_encoder_config *c = &enc->cfg;
    const kz_enc_layer *L = &enc->layers[l];
    size_t hid = (size_t)c->hidden_size, hd = (size_t)c->head_dim;
    size_t att_w = (size_t)c->num_attention_heads * hd, kv = (size_t)c->num_key_value_heads * hd;
    e->k->layer_norm(s->xn, s->y, L->ln1_w, L->ln1_b, n, hid, c->norm_eps);
    kz_conv_run(&L->q, e, s->q, att_w, s->xn, hid, n, KZ_GEMM_STORE);
    kz_conv_run(&L->k, e, s->k, kv, s->xn, hid, n, KZ_GEMM_STORE);
    kz_conv_run(&L->v, e, s->v, kv, s->xn, hid, n, KZ_GEMM_STORE);
    float *kc = s->k_cache + l * s->cap * kv, *vc = s->v_cache + l * s->cap * kv;
    for (size_t r = 0; r < n; r++) {
        int64_t pos = s->pos + (int64_t)r;
        kz_rope_apply(s->q + r * att_w, c->num_attention_heads, c->head_dim, enc->inv_freq, pos);
        kz_rope_apply(s->k + r * kv, c->num_key_value_heads, c->head_dim, enc->inv_freq, pos);
        memcpy(kc + (size_t)pos * kv, s->k + r * kv, kv * sizeof(float));
        memcpy(vc + (size_t)pos * kv, s->v + r * kv, kv * sizeof(float));
        e->flop += 4.0 * (double)att_w * (double)(pos + 1);
    }
    attn_job j = {enc, s, e->k, l, s->pos};
    kz_exec_rows(e, n, 1, attn_rows, &j);
    kz_conv_run(&L->o, e, s->o, hid, s->att, att_w, n, KZ_GEMM_STORE);
    kz_vector_add_scaled_rows(s->y, s->o, L->attn_scale, n, hid);
}

static void mlp(const kz_codec_encoder *enc, run_state *s, kz_exec *e, size_t l, size_t n) {
    const kz_codec_encoder_config *c = &enc->cfg;
    const kz_enc_layer *L = &enc->layers[l];
    size_t hid = (size_t)c->hidden_size, inter = (size_t)c->intermediate_size;
    e->k->layer_norm(s->xn, s->y, L->ln2_w, L->ln2_b, n, hid, c->norm_eps);
    kz_conv_run(&L->fc1, e, s->mlp, inter, s->xn, hid, n, KZ_GEMM_STORE);
    e->k->gelu(s->mlp, s->mlp, n * inter);
    kz_conv_run(&L->fc2, e, s->o, hid, s->mlp, inter, n, KZ_GEMM_STORE);
    kz_vector_add_scaled_rows(s->y, s->o, L->mlp_scale, n, hid);
}

static void transformer(const kz_codec_encoder *enc, run_state *s, kz_exec *e, size_t n) {
    for (size_t l = 0; l < (size_t)enc->cfg.num_hidden_layers; l++) {
        attention(enc, s, e, l, n);
        mlp(enc, s, e, l, n);
    }
    s->pos += (int64_t)n;
}

/* --- RVQ ------------------------------------------------------------------------ */

/* Index of the table row nearest to x (see the file comment). */
static int32_t nearest(const kz_enc_book *b, const float *x, const float *dots, size_t size,
                       size_t dim) {
    double x2 = 0.0, best = INFINITY, best_d = INFINITY;
    for (size_t i = 0; i < dim; i++) {
        x2 += (double)x[i] * x[i];
    }
    for (size_t j = 0; j < size; j++) {
        double sc = b->norm2[j] - 2.0 * dots[j];
        best = sc < best ? sc : best;
    }
    double tol = 2.0 * (double)dim * FLT_EPSILON * (x2 + b->max_norm2) + DBL_MIN;
    int32_t arg = 0;
    for (size_t j = 0; j < size; j++) {
        if (b->norm2[j] - 2.0 * dots[j] > best + tol) {
            continue;
        }
        const float *t = b->table + j * dim;
        double d = 0.0;
        for (size_t i = 0; i < dim; i++) {
            double diff = (double)x[i] - t[i];
            d += diff * diff;
        }
        if (d < best_d) {
            best_d = d, arg = (int32_t)j;
        }
    }
    return arg;
}

typedef struct rvq_job {
    const kz_enc_book *b;
    float *r;
    const float *dots;
    size_t size, dim, n_codes;
    int32_t *codes; /* column of this codebook, rows n_codes apart */
} rvq_job;

static void rvq_rows(void *arg, size_t r0, size_t r1) {
    const rvq_job *j = arg;
    for (size_t t = r0; t < r1; t++) {
        float *x = j->r + t * j->dim;
        int32_t idx = nearest(j->b, x, j->dots + t * j->size, j->size, j->dim);
        const float *row = j->b->table + (size_t)idx * j->dim;
        for (size_t i = 0; i < j->dim; i++) {
            x[i] -= row[i];
        }
        j->codes[t * j->n_codes] = idx;
    }
}

static void quantize(const kz_codec_encoder *enc, run_state *s, kz_exec *e, size_t n,
                     int32_t *codes) {
    const kz_codec_encoder_config *c = &enc->cfg;
    size_t hid = (size_t)c->hidden_size, dim = (size_t)c->vq_hidden;
    size_t size = (size_t)c->codebook_size, col = 0;
    for (int q = 0; q < 2; q++) {
        if (enc->n_books[q] == 0) {
            continue;
        }
        if (enc->has_proj) {
            kz_conv_run(&enc->proj[q], e, s->r, dim, s->z, hid, n, KZ_GEMM_STORE);
        } else {
            memcpy(s->r, s->z, n * hid * sizeof *s->r);
        }
        for (int i = 0; i < enc->n_books[q]; i++, col++) {
            const kz_enc_book *b = &enc->books[q][i];
            kz_conv_run(&b->dots, e, s->dots, size, s->r, dim, n, KZ_GEMM_STORE);
            rvq_job j = {b, s->r, s->dots, size, dim, (size_t)enc->n_codes, codes + col};
            kz_exec_rows(e, n, 1, rvq_rows, &j);
        }
    }
}

/* --- one chunk ------------------------------------------------------------------ */

static void tap(const run_state *s, const char *stage, const float *rows, size_t n, size_t ch) {
    if (s->tap) {
        s->tap(s->tap_user, stage, rows, n, ch);
    }
}

/* Encodes n samples (the last chunk when final) into codes [rows12, n_codes]; returns
 * the code frames. */
static size_t run_chunk(const kz_codec_encoder *enc, run_state *s, kz_exec *e, const float *pcm,
                        size_t n, bool final, int32_t *codes) {
    const kz_codec_encoder_config *c = &enc->cfg;
    size_t ch = (size_t)c->num_filters, hid = (size_t)c->hidden_size;
    memcpy(conv_begin(&enc->first, &s->first), pcm, n * sizeof *pcm);
    size_t rows = conv_finish(&enc->first, &s->first, e, n, final, s->x[0], ch, KZ_GEMM_STORE);
    for (int b = 0; b < c->n_ratios; b++, ch *= 2) {
        for (int j = 0; j < c->num_residual_layers; j++) {
            int i = b * c->num_residual_layers + j;
            const kz_enc_resblock *rb = &enc->res[i];
            size_t inner = rb->a.c_out;
            elu_conv(&rb->a, &s->res_a[i], e, s->x[b], rows, final, s->h, inner, KZ_GEMM_STORE);
            elu(e, s->h, s->h, rows, inner);
            kz_conv_run(&rb->b.c, e, s->x[b], ch, s->h, inner, rows, KZ_GEMM_ACCUMULATE);
        }
        rows = elu_conv(&enc->down[b], &s->down[b], e, s->x[b], rows, final, s->x[b + 1], 2 * ch,
                        KZ_GEMM_STORE);
    }
    rows = elu_conv(&enc->last, &s->last, e, s->x[c->n_ratios], rows, final, s->y, hid,
                    KZ_GEMM_STORE);
    tap(s, "conv_stack", s->y, rows, hid);
    transformer(enc, s, e, rows);
    tap(s, "transformer", s->y, rows, hid);
    if (!s->started) { // replicate padding: the history starts as copies of the first row
        for (size_t r = 0; r < s->downsample.st.n_rows; r++) {
            memcpy(s->downsample.st.rows + r * hid, s->y, hid * sizeof *s->y);
        }
        s->started = true;
    }
    memcpy(conv_begin(&enc->downsample, &s->downsample), s->y, rows * hid * sizeof *s->y);
    rows = conv_finish(&enc->downsample, &s->downsample, e, rows, final, s->z, hid,
                       KZ_GEMM_STORE);
    tap(s, "downsample", s->z, rows, hid);
    quantize(enc, s, e, rows, codes);
    return rows;
}

/* --- state -------------------------------------------------------------------- */

static bool io_init(conv_io *io, const kz_enc_conv *c, size_t rows) {
    if (c->history && kz_conv_state_init(&io->st, c->history, c->c_in) != KZ_OK) {
        return false;
    }
    io->buf = malloc(((c->history + rows + c->stride) * c->c_in) * sizeof *io->buf);
    return io->buf != NULL;
}

static void io_free(conv_io *io) {
    kz_conv_state_free(&io->st);
    free(io->buf);
}

static void state_free(const kz_codec_encoder *enc, run_state *s) {
    const kz_codec_encoder_config *c = &enc->cfg;
    io_free(&s->first);
    for (int i = 0; s->res_a && i < c->n_ratios * c->num_residual_layers; i++) {
        io_free(&s->res_a[i]);
    }
    for (int i = 0; s->down && i < c->n_ratios; i++) {
        io_free(&s->down[i]);
    }
    io_free(&s->last);
    io_free(&s->downsample);
    for (int i = 0; s->x && i <= c->n_ratios; i++) {
        free(s->x[i]);
    }
    float *bufs[] = {s->h,   s->y,   s->xn,     s->q,       s->k, s->v,    s->att, s->o,
                     s->mlp, s->scores, s->k_cache, s->v_cache, s->z, s->r, s->dots};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        free(bufs[i]);
    }
    free(s->res_a);
    free(s->down);
    free(s->x);
}

static bool alloc_all(float **p[], const size_t *n, size_t count) {
    bool ok = true;
    for (size_t i = 0; i < count; i++) {
        *p[i] = malloc((n[i] + 1) * sizeof(float));
        ok = ok && *p[i];
    }
    return ok;
}

/* Buffers for chunks of chunk_samples and a transformer of cap rows. */
static bool state_init(const kz_codec_encoder *enc, run_state *s, size_t chunk_samples,
                       size_t cap) {
    const kz_codec_encoder_config *c = &enc->cfg;
    size_t nr = (size_t)c->n_ratios, n_res = nr * (size_t)c->num_residual_layers;
    s->res_a = calloc(n_res + 1, sizeof *s->res_a);
    s->down = calloc(nr + 1, sizeof *s->down);
    s->x = calloc(nr + 1, sizeof *s->x);
    if (!s->res_a || !s->down || !s->x) {
        return false;
    }
    s->chunk_rows[0] = chunk_samples;
    size_t ch = (size_t)c->num_filters, h_size = 0;
    bool ok = io_init(&s->first, &enc->first, chunk_samples);
    for (size_t b = 0; b < nr && ok; b++, ch *= 2) {
        size_t rows = s->chunk_rows[b];
        s->chunk_rows[b + 1] = rows / enc->down[b].stride;
        s->x[b] = malloc(rows * ch * sizeof(float));
        ok = s->x[b] && io_init(&s->down[b], &enc->down[b], rows);
        for (int j = 0; j < c->num_residual_layers && ok; j++) {
            size_t i = b * (size_t)c->num_residual_layers + (size_t)j;
            ok = io_init(&s->res_a[i], &enc->res[i].a, rows);
            h_size = rows * enc->res[i].a.c_out > h_size ? rows * enc->res[i].a.c_out : h_size;
        }
    }
    size_t r25 = s->chunk_rows[nr], r12 = r25 / 2 + 1, hid = (size_t)c->hidden_size;
    size_t att = (size_t)c->num_attention_heads * (size_t)c->head_dim;
    size_t kv = (size_t)c->num_key_value_heads * (size_t)c->head_dim;
    size_t layers = (size_t)c->num_hidden_layers;
    s->x[nr] = ok ? malloc(r25 * ch * sizeof(float)) : NULL;
    ok = ok && s->x[nr] && io_init(&s->last, &enc->last, r25) &&
         io_init(&s->downsample, &enc->downsample, r25);
    s->cap = cap;
    float **p[] = {&s->h,   &s->y,      &s->xn,      &s->q,       &s->k, &s->v,
                   &s->att, &s->o,      &s->mlp,     &s->scores,  &s->k_cache,
                   &s->v_cache, &s->z,  &s->r,       &s->dots};
    size_t n[] = {h_size,          r25 * hid,         r25 * hid,
                  r25 * att,       r25 * kv,          r25 * kv,
                  r25 * att,       r25 * hid,         r25 * (size_t)c->intermediate_size,
                  r25 * cap,       layers * cap * kv, layers * cap * kv,
                  r12 * hid,       r12 * (hid > (size_t)c->vq_hidden ? hid : (size_t)c->vq_hidden),
                  r12 * (size_t)c->codebook_size};
    return ok && alloc_all(p, n, sizeof n / sizeof n[0]);
}

/* --- entry points ----------------------------------------------------------------- */

kz_status kz_codec_encoder_run_chunked(const kz_codec_encoder *enc, const float *pcm, size_t n,
                                       size_t chunk_frames, kz_codec_tap_fn tap_fn,
                                       void *tap_user, kz_exec *e, int32_t **codes,
                                       size_t *n_frames) {
    *codes = NULL;
    *n_frames = 0;
    if (!enc || !pcm || n == 0 || chunk_frames == 0 || n > ((size_t)1 << 40)) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "codec encoder: needs an encoder, at least one sample and a chunk");
    }
    size_t bad = kz_vector_first_nonfinite(pcm, n);
    if (bad < n) {
        return kz_error_set(KZ_STATUS_BAD_INPUT, "codec encoder: sample %zu is not finite", bad);
    }
    size_t frames = (n + enc->hop - 1) / enc->hop, rows25 = (n + enc->hop25 - 1) / enc->hop25;
    chunk_frames = chunk_frames < frames ? chunk_frames : frames;
    run_state s = {.tap = tap_fn, .tap_user = tap_user};
    int32_t *out = malloc(frames * (size_t)enc->n_codes * sizeof *out);
    if (!out || !state_init(enc, &s, chunk_frames * enc->hop, rows25)) {
        free(out);
        state_free(enc, &s);
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "codec encoder: out of memory for %zu "
                            "samples", n);
    }
    size_t done = 0, frame = 0, step = chunk_frames * enc->hop;
    while (done < n) {
        size_t len = n - done < step ? n - done : step;
        frame += run_chunk(enc, &s, e, pcm + done, len, done + len == n,
                           out + frame * (size_t)enc->n_codes);
        done += len;
    }
    state_free(enc, &s);
    KZ_ASSERT(frame == frames);
    *codes = out;
    *n_frames = frames;
    return KZ_OK;
}

kz_status kz_codec_encoder_run(const kz_codec_encoder *enc, const float *pcm, size_t n,
                               kz_exec *e, int32_t **codes, size_t *n_frames) {
    return kz_codec_encoder_run_chunked(enc, pcm, n, DEFAULT_CHUNK_FRAMES, NULL, NULL, e, codes,
                                        n_frames);
}
