/*
 * transformer.c - Qwen3 decoder layer stack with KV cache (see transformer.h).
 *
 * Projections run through kz_matrix_mul (weights in place, any kz_matrix dtype);
 * q/k/v and gate/up are one pool run each (kz_matrix_mul_group);
 * attention is parallel over KV heads (each with its query heads) on the pool (inline for
 * short sequences), each job also running its heads' q/k RMSNorm, RoPE and cache writes,
 * so nothing but the layer norms and residual adds runs on one thread between projections;
 * each head's softmax computed in a fixed order over positions 0..p, so results
 * never depend on threads. The KV cache is head-major within blocks of positions
 * ([block, layer, kv head, position in block, head_dim]): a head reads its keys and values
 * as contiguous streams, one per block, where a position-major cache would have it read
 * 512 bytes of every 4 KB row (docs/ARCHITECTURE.md#kv-cache-and-attention); the blocks
 * let a large cache live on 2 MB pages without mapping the positions not reached yet. Its
 * elements are floats, or binary16 when the stack asks (kv_f16: rounded as written, widened
 * exactly by the attention kernels).
 *
 * kz_qwen3_forward_batch steps several independent sequences at once (continuous
 * batching): every projection runs over all their rows in one batched matrix-vector
 * product (kz_matrix_mul_batch: each weight read once for the batch), everything else per
 * sequence with the calls and row counts of kz_qwen3_forward, so each sequence gets the
 * bits of its own forward.
 */
#define _DEFAULT_SOURCE // madvise and MADV_HUGEPAGE (glibc hides them under plain POSIX)

#include "layers/transformer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kernels/quant.h"
#include "layers/attention.h"
#include "layers/vector.h"
#include "runtime/error.h"

static kz_status load_layer(kz_qwen3_layer *L, const kz_weights *f, const char *prefix, int l,
                            const kz_qwen3_dims *d, float *vec) {
    char name[200];
    int64_t hid = d->hidden, q = (int64_t)d->n_heads * d->head_dim;
    int64_t kv = (int64_t)d->n_kv_heads * d->head_dim, inter = d->intermediate;
    struct { kz_matrix *m; const char *n; int64_t rows, cols; } mats[7] = {
        {&L->q, "self_attn.q_proj", q, hid},       {&L->k, "self_attn.k_proj", kv, hid},
        {&L->v, "self_attn.v_proj", kv, hid},      {&L->o, "self_attn.o_proj", hid, q},
        {&L->gate, "mlp.gate_proj", inter, hid},   {&L->up, "mlp.up_proj", inter, hid},
        {&L->down, "mlp.down_proj", hid, inter}};
    kz_status st = KZ_OK;
    for (int i = 0; i < 7 && st == KZ_OK; i++) {
        snprintf(name, sizeof name, "%slayers.%d.%s.weight", prefix, l, mats[i].n);
        st = kz_matrix_bind(mats[i].m, f, name, mats[i].rows, mats[i].cols);
        if (st == KZ_OK) {
            kz_matrix_populate(mats[i].m);
        }
    }
    struct { const float **dst; const char *n; size_t len; } vecs[4] = {
        {&L->attn_norm, "input_layernorm", (size_t)hid},
        {&L->mlp_norm, "post_attention_layernorm", (size_t)hid},
        {&L->q_norm, "self_attn.q_norm", (size_t)d->head_dim},
        {&L->k_norm, "self_attn.k_norm", (size_t)d->head_dim}};
    for (int i = 0; i < 4 && st == KZ_OK; i++) {
        snprintf(name, sizeof name, "%slayers.%d.%s.weight", prefix, l, vecs[i].n);
        st = kz_vector_load(f, name, vecs[i].len, vec);
        *vecs[i].dst = vec;
        vec += vecs[i].len;
    }
    return st;
}

kz_status kz_qwen3_load(kz_qwen3_stack *s, const kz_weights *f, const char *prefix,
                        const kz_qwen3_dims *d) {
    memset(s, 0, sizeof *s);
    s->d = *d;
    size_t per_layer = 2 * (size_t)d->hidden + 2 * (size_t)d->head_dim;
    s->layers = calloc((size_t)d->n_layers + 1, sizeof *s->layers);
    s->vectors = malloc((per_layer * (size_t)d->n_layers + (size_t)d->hidden) * sizeof(float));
    s->inv_freq = malloc((size_t)d->head_dim * sizeof(float));
    if (!s->layers || !s->vectors || !s->inv_freq) {
        kz_qwen3_free(s);
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory loading %s", prefix);
    }
    kz_rope_init(s->inv_freq, d->head_dim, d->rope_theta);
    kz_status st = KZ_OK;
    for (int l = 0; l < d->n_layers && st == KZ_OK; l++) {
        st = load_layer(&s->layers[l], f, prefix, l, d, s->vectors + (size_t)l * per_layer);
    }
    char name[200];
    snprintf(name, sizeof name, "%snorm.weight", prefix);
    float *norm = s->vectors + (size_t)d->n_layers * per_layer;
    st = st == KZ_OK ? kz_vector_load(f, name, (size_t)d->hidden, norm) : st;
    s->norm = norm;
    if (st != KZ_OK) {
        kz_qwen3_free(s);
    }
    return st;
}

void kz_qwen3_free(kz_qwen3_stack *s) {
    if (!s) {
        return;
    }
    free(s->layers);
    free(s->vectors);
    free(s->inv_freq);
    memset(s, 0, sizeof *s);
}

/* Positions per block of the KV cache. The cache is [block, layer, kv head, position in
 * block, head_dim]: a head's positions are contiguous within a block (one stream per block
 * for attention), and the cache grows a block at a time, so 2 MB pages (cache_alloc) map
 * only the blocks in use plus one (head-major over all positions would touch every page
 * with the prompt's first rows). */
#define KV_BLOCK 64

/* Rows (positions) the cache holds for max_pos: whole blocks. */
static size_t kv_rows(size_t max_pos) {
    return (max_pos + KV_BLOCK - 1) / KV_BLOCK * KV_BLOCK;
}

/* Bytes per element of a KV cache. */
static size_t kv_elem(bool f16) {
    return f16 ? sizeof(uint16_t) : sizeof(float);
}

/* Element `slot` of a KV cache array. */
static void *cache_at(void *cache, bool f16, size_t slot) {
    return (char *)cache + slot * kv_elem(f16);
}

#define HUGE_PAGE_BYTES ((size_t)2 << 20)

/* Caches of at least this many bytes go on 2 MB pages (cache_alloc); smaller ones (the
 * code predictor's, a few positions) stay in cache between steps and would only map more
 * memory. */
#define HUGE_CACHE_BYTES (4 * HUGE_PAGE_BYTES)

/* A KV cache array; a large one on 2 MB pages where the OS gives them: every talker step
 * reads each layer's whole cache right after the weight stream has evicted it, and the
 * TLB with it, and on 4 KB pages a head's rows cost a page walk every eighth position (and
 * each new page a fault). Freed with free(). */
static void *cache_alloc(size_t bytes) {
    if (bytes < HUGE_CACHE_BYTES) {
        return malloc(bytes);
    }
    const size_t rounded = (bytes + HUGE_PAGE_BYTES - 1) / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES;
    void *p = aligned_alloc(HUGE_PAGE_BYTES, rounded);
#ifdef MADV_HUGEPAGE
    if (p) {
        madvise(p, rounded, MADV_HUGEPAGE); // advice: 4 KB pages if refused
    }
#endif
    return p;
}

kz_status kz_qwen3_state_init(kz_qwen3_state *st, const kz_qwen3_stack *s, size_t max_pos,
                              size_t max_tok) {
    memset(st, 0, sizeof *st);
    const kz_qwen3_dims *d = &s->d;
    size_t kv = (size_t)d->n_kv_heads * d->head_dim, q = (size_t)d->n_heads * d->head_dim;
    size_t hid = (size_t)d->hidden, inter = (size_t)d->intermediate;
    st->max_pos = max_pos;
    st->max_tok = max_tok;
    const size_t cache_bytes = (size_t)d->n_layers * kv_rows(max_pos) * kv * kv_elem(s->kv_f16);
    st->k_cache = cache_alloc(cache_bytes);
    st->v_cache = cache_alloc(cache_bytes);
    st->xn = malloc(max_tok * hid * sizeof(float));
    st->h = malloc(max_tok * hid * sizeof(float));
    st->q = malloc(max_tok * q * sizeof(float));
    st->att = malloc(max_tok * q * sizeof(float));
    st->k = malloc(max_tok * kv * sizeof(float));
    st->v = malloc(max_tok * kv * sizeof(float));
    st->gate = malloc(max_tok * inter * sizeof(float));
    st->up = malloc(max_tok * inter * sizeof(float));
    st->scores = malloc((size_t)d->n_heads * max_pos * sizeof(float));
    st->rope = malloc(max_tok * (size_t)d->head_dim * sizeof(float));
    if (!st->k_cache || !st->v_cache || !st->xn || !st->h || !st->q || !st->att || !st->k ||
        !st->v || !st->gate || !st->up || !st->scores || !st->rope) {
        kz_qwen3_state_free(st);
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY,
                            "out of memory for a KV cache of %zu positions", max_pos);
    }
    return KZ_OK;
}

void kz_qwen3_state_free(kz_qwen3_state *st) {
    void *bufs[] = {st->k_cache, st->v_cache, st->xn, st->h,      st->q,      st->att,
                     st->k,       st->v,       st->gate, st->up, st->scores, st->rope};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        free(bufs[i]);
    }
    memset(st, 0, sizeof *st);
}

/* Attention over at most this many (token, position) pairs runs on the calling thread:
 * the code predictor's 17 positions gain nothing from the pool
 * (docs/ARCHITECTURE.md#kv-cache-and-attention). The talker (22+ prompt rows, then longer
 * sequences) always uses the pool. */
#define ATTENTION_INLINE_PAIRS 20

/* Offset of (layer, kv head, position) in the KV cache (KV_BLOCK), in elements. */
static size_t cache_slot(const kz_qwen3_dims *d, int layer, size_t kv_head, size_t pos) {
    const size_t block = pos / KV_BLOCK;
    return (((block * (size_t)d->n_layers + (size_t)layer) * (size_t)d->n_kv_heads + kv_head) *
                KV_BLOCK +
            pos % KV_BLOCK) *
           (size_t)d->head_dim;
}

/* Elements between a position's row and the same row of the next block. */
static size_t cache_block_stride(const kz_qwen3_dims *d) {
    return (size_t)d->n_layers * (size_t)d->n_kv_heads * KV_BLOCK * (size_t)d->head_dim;
}

/* One sequence's rows in the attention of a layer: queries q [n_tok, n_heads * head_dim],
 * keys k and values v [n_tok, n_kv_heads * head_dim] as projected, outputs att (as q). */
typedef struct kz_qwen3_attn_rows {
    kz_qwen3_state *st;
    float *q, *k, *att;
    const float *v;
} attn_rows;

/* Writes n floats of x at element `slot` of a KV cache array (binary16: each rounded to
 * nearest even, the same bits on every level). */
static void cache_write(bool f16, void *cache, size_t slot, const float *x, size_t n) {
    if (f16) {
        uint16_t *h = cache_at(cache, true, slot);
        for (size_t i = 0; i < n; i++) {
            h[i] = kz_f32_to_fp16(x[i]);
        }
    } else {
        memcpy(cache_at(cache, false, slot), x, n * sizeof(float));
    }
}

/* The steps between the q/k/v projections and the softmax, for KV head g and its query
 * heads over n_tok rows: RMSNorm and RoPE (st's next positions, angles in st->rope) of the
 * group's keys and queries, and its keys and values into st's cache. Each is a per-head
 * operation, so the results are those of running it over all heads at once; in the
 * attention job they run on the pool, where the new cache lines (first-touch page faults
 * included) and the per-head arithmetic are shared by the threads instead of holding up
 * the others at the caller. */
static void prepare_group(const kz_qwen3_stack *s, const kz_kernels *k, int layer, size_t g,
                          const attn_rows *a, size_t n_tok) {
    const kz_qwen3_dims *d = &s->d;
    const kz_qwen3_layer *L = &s->layers[layer];
    const size_t hd = (size_t)d->head_dim;
    const size_t qw = (size_t)d->n_heads * hd, kvw = (size_t)d->n_kv_heads * hd;
    const size_t rep = (size_t)(d->n_heads / d->n_kv_heads);
    kz_qwen3_state *st = a->st;
    for (size_t t = 0; t < n_tok; t++) {
        const float *cs = st->rope + t * hd;
        float *key = a->k + t * kvw + g * hd;
        k->rms_norm(key, key, L->k_norm, 1, hd, d->eps);
        kz_rope_rotate(key, 1, d->head_dim, cs);
        const size_t slot = cache_slot(d, layer, g, (size_t)(st->n_pos + (int64_t)t));
        cache_write(s->kv_f16, st->k_cache, slot, key, hd);
        cache_write(s->kv_f16, st->v_cache, slot, a->v + t * kvw + g * hd, hd);
        float *query = a->q + t * qw + g * rep * hd;
        k->rms_norm(query, query, L->q_norm, rep, hd, d->eps);
        kz_rope_rotate(query, (int)rep, d->head_dim, cs);
    }
}

/* The query heads of KV head g over n_tok rows of one sequence, each a causal softmax over
 * st's cache positions: the group's keys and values come from memory once and stay in cache
 * for its other heads (the talker's cache is evicted by every step's weight stream). */
static void attend_heads(const kz_qwen3_stack *s, const kz_kernels *k, int layer, size_t g,
                         const attn_rows *a, size_t n_tok) {
    const kz_qwen3_dims *d = &s->d;
    const bool f16 = s->kv_f16;
    const size_t hd = (size_t)d->head_dim, qw = (size_t)d->n_heads * hd;
    const size_t rep = (size_t)(d->n_heads / d->n_kv_heads);
    kz_qwen3_state *st = a->st;
    const size_t slot = cache_slot(d, layer, g, 0), block_stride = cache_block_stride(d);
    for (size_t h = g * rep; h < (g + 1) * rep; h++) {
        float *sc = st->scores + h * st->max_pos;
        for (size_t t = 0; t < n_tok; t++) {
            kz_attend_row_blocks(k, a->att + t * qw + h * hd, a->q + t * qw + h * hd,
                                 cache_at(st->k_cache, f16, slot),
                                 cache_at(st->v_cache, f16, slot), f16, KV_BLOCK,
                                 block_stride, st->n_pos + (int64_t)t, hd, sc);
        }
    }
}

/* KV head g of a layer's attention for one sequence: its norms, RoPE and cache rows, then
 * its query heads' softmax. */
static void attend_group_rows(const kz_qwen3_stack *s, const kz_kernels *k, int layer, size_t g,
                              const attn_rows *a, size_t n_tok) {
    prepare_group(s, k, layer, g, a, n_tok);
    attend_heads(s, k, layer, g, a, n_tok);
}

typedef struct attn_job {
    const kz_qwen3_stack *s;
    const attn_rows *rows; /* one per sequence */
    const kz_kernels *k;
    int layer;
    size_t n_seq, n_tok;
} attn_job;

/* Chunk g * n_seq + i: KV head g of sequence i (head-major, so that a thread's range of
 * chunks in split mode holds whole heads of every sequence, whatever their positions). */
static void attend_group(void *arg, size_t chunk, int worker) {
    const attn_job *j = arg;
    (void)worker;
    attend_group_rows(j->s, j->k, j->layer, chunk / j->n_seq, &j->rows[chunk % j->n_seq],
                      j->n_tok);
}

/* The attention of n_seq sequences of n_tok rows each (rows[i]), one job per KV head and
 * sequence on the pool, or on the calling thread when the (token, position) pairs are few
 * (a pool dispatch would cost more than the work): the same per-head computation either
 * way. The pool deals the jobs in split mode: each thread takes the same KV heads in every
 * layer and step, reading the cache rows it wrote itself, and no chunk is claimed across cores
 * (docs/ARCHITECTURE.md#kv-cache-and-attention). */
static void attend(const kz_qwen3_stack *s, kz_exec *e, int l, const attn_rows *rows,
                   size_t n_seq, size_t n_tok) {
    size_t pairs = 0;
    for (size_t i = 0; i < n_seq; i++) {
        pairs += n_tok * (size_t)(rows[i].st->n_pos + (int64_t)n_tok);
    }
    attn_job j = {.s = s, .rows = rows, .k = e->k, .layer = l, .n_seq = n_seq, .n_tok = n_tok};
    const size_t n_chunks = n_seq * (size_t)s->d.n_kv_heads;
    if (pairs <= ATTENTION_INLINE_PAIRS) {
        for (size_t c = 0; c < n_chunks; c++) {
            attend_group(&j, c, 0);
        }
    } else {
        const bool split = kz_pool_split(e->pool);
        kz_pool_set_split(e->pool, true);
        kz_pool_run(e->pool, n_chunks, attend_group, &j);
        kz_pool_set_split(e->pool, split);
    }
}

static void attention(const kz_qwen3_stack *s, kz_qwen3_state *st, kz_exec *e, int l, float *x,
                      size_t n_tok, size_t split) {
    const kz_qwen3_dims *d = &s->d;
    const kz_qwen3_layer *L = &s->layers[l];
    size_t hid = (size_t)d->hidden, hd = (size_t)d->head_dim;
    size_t qw = (size_t)d->n_heads * hd, kvw = (size_t)d->n_kv_heads * hd;
    e->k->rms_norm(st->xn, x, L->attn_norm, n_tok, hid, d->eps);
    const kz_matrix_out qkv[3] = {
        {&L->q, st->q, qw}, {&L->k, st->k, kvw}, {&L->v, st->v, kvw}};
    kz_matrix_mul_group_split(qkv, 3, e, st->xn, hid, n_tok, split);
    const attn_rows rows = {.st = st, .q = st->q, .k = st->k, .att = st->att, .v = st->v};
    attend(s, e, l, &rows, 1, n_tok);
    const kz_matrix_out o = {&L->o, st->h, hid};
    kz_matrix_mul_group_split(&o, 1, e, st->att, qw, n_tok, split);
    for (size_t i = 0; i < n_tok * hid; i++) {
        x[i] = x[i] + st->h[i];
    }
}

static void mlp(const kz_qwen3_stack *s, kz_qwen3_state *st, kz_exec *e, int l, float *x,
                size_t n_tok, size_t split) {
    const kz_qwen3_dims *d = &s->d;
    const kz_qwen3_layer *L = &s->layers[l];
    size_t hid = (size_t)d->hidden, inter = (size_t)d->intermediate;
    e->k->rms_norm(st->xn, x, L->mlp_norm, n_tok, hid, d->eps);
    const kz_matrix_out gate_up[2] = {{&L->gate, st->gate, inter}, {&L->up, st->up, inter}};
    kz_matrix_mul_group_split(gate_up, 2, e, st->xn, hid, n_tok, split);
    e->k->swiglu(st->gate, st->gate, st->up, n_tok * inter);
    const kz_matrix_out down = {&L->down, st->h, hid};
    kz_matrix_mul_group_split(&down, 1, e, st->gate, inter, n_tok, split);
    for (size_t i = 0; i < n_tok * hid; i++) {
        x[i] = x[i] + st->h[i];
    }
}

void kz_qwen3_forward(const kz_qwen3_stack *s, kz_qwen3_state *st, kz_exec *e, float *x,
                      size_t n_tok, size_t split) {
    KZ_ASSERT(st->n_pos + (int64_t)n_tok <= (int64_t)st->max_pos && n_tok <= st->max_tok);
    KZ_ASSERT(split < n_tok);
    for (size_t t = 0; t < n_tok; t++) { // every layer rotates by the same angles
        kz_rope_angles(st->rope + t * (size_t)s->d.head_dim, s->d.head_dim, s->inv_freq,
                       st->n_pos + (int64_t)t);
    }
    for (int l = 0; l < s->d.n_layers; l++) {
        attention(s, st, e, l, x, n_tok, split);
        mlp(s, st, e, l, x, n_tok, split);
    }
    st->n_pos += (int64_t)n_tok;
}

/* --- batched decode steps (continuous batching) ---------------------------------- */

kz_status kz_qwen3_batch_init(kz_qwen3_batch *b, const kz_qwen3_stack *s, size_t max_rows) {
    memset(b, 0, sizeof *b);
    const kz_qwen3_dims *d = &s->d;
    const size_t kv = (size_t)d->n_kv_heads * d->head_dim, q = (size_t)d->n_heads * d->head_dim;
    const size_t hid = (size_t)d->hidden, inter = (size_t)d->intermediate;
    b->max_rows = max_rows;
    b->xn = malloc(max_rows * hid * sizeof(float));
    b->h = malloc(max_rows * hid * sizeof(float));
    b->q = malloc(max_rows * q * sizeof(float));
    b->att = malloc(max_rows * q * sizeof(float));
    b->k = malloc(max_rows * kv * sizeof(float));
    b->v = malloc(max_rows * kv * sizeof(float));
    b->gate = malloc(max_rows * inter * sizeof(float));
    b->up = malloc(max_rows * inter * sizeof(float));
    b->seqs = malloc((max_rows ? max_rows : 1) * sizeof *b->seqs);
    if (!b->xn || !b->h || !b->q || !b->att || !b->k || !b->v || !b->gate || !b->up ||
        !b->seqs) {
        kz_qwen3_batch_free(b);
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY,
                            "out of memory for a batch of %zu rows", max_rows);
    }
    return KZ_OK;
}

void kz_qwen3_batch_free(kz_qwen3_batch *b) {
    float *bufs[] = {b->xn, b->h, b->q, b->att, b->k, b->v, b->gate, b->up};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        free(bufs[i]);
    }
    free(b->seqs);
    memset(b, 0, sizeof *b);
}

/* attention() for n_seq sequences of n_tok rows each: the projections over all rows at
 * once (kz_matrix_mul_group_batch), every per-row step as attention() runs it on one
 * sequence's rows, with the same row counts, so each sequence gets attention()'s bits. */
static void attention_batch(const kz_qwen3_stack *s, kz_qwen3_state *const *st, size_t n_seq,
                            kz_qwen3_batch *b, kz_exec *e, int l, float *x, size_t n_tok) {
    const kz_qwen3_dims *d = &s->d;
    const kz_qwen3_layer *L = &s->layers[l];
    const size_t hid = (size_t)d->hidden, hd = (size_t)d->head_dim, rows = n_seq * n_tok;
    const size_t qw = (size_t)d->n_heads * hd, kvw = (size_t)d->n_kv_heads * hd;
    for (size_t i = 0; i < n_seq; i++) {
        const size_t r = i * n_tok;
        e->k->rms_norm(b->xn + r * hid, x + r * hid, L->attn_norm, n_tok, hid, d->eps);
    }
    const kz_matrix_out qkv[3] = {{&L->q, b->q, qw}, {&L->k, b->k, kvw}, {&L->v, b->v, kvw}};
    kz_matrix_mul_group_batch(qkv, 3, e, b->xn, hid, rows);
    attn_rows *seqs = b->seqs;
    for (size_t i = 0; i < n_seq; i++) {
        const size_t r = i * n_tok;
        seqs[i] = (attn_rows){.st = st[i], .q = b->q + r * qw, .k = b->k + r * kvw,
                              .att = b->att + r * qw, .v = b->v + r * kvw};
    }
    attend(s, e, l, seqs, n_seq, n_tok);
    kz_matrix_mul_batch(&L->o, e, b->h, hid, b->att, qw, rows);
    for (size_t i = 0; i < rows * hid; i++) {
        x[i] = x[i] + b->h[i];
    }
}

/* mlp() for n_seq sequences of n_tok rows each, on the same terms as attention_batch. */
static void mlp_batch(const kz_qwen3_stack *s, size_t n_seq, kz_qwen3_batch *b, kz_exec *e,
                      int l, float *x, size_t n_tok) {
    const kz_qwen3_dims *d = &s->d;
    const kz_qwen3_layer *L = &s->layers[l];
    const size_t hid = (size_t)d->hidden, inter = (size_t)d->intermediate, rows = n_seq * n_tok;
    for (size_t i = 0; i < n_seq; i++) {
        const size_t r = i * n_tok;
        e->k->rms_norm(b->xn + r * hid, x + r * hid, L->mlp_norm, n_tok, hid, d->eps);
    }
    const kz_matrix_out gate_up[2] = {{&L->gate, b->gate, inter}, {&L->up, b->up, inter}};
    kz_matrix_mul_group_batch(gate_up, 2, e, b->xn, hid, rows);
    for (size_t i = 0; i < n_seq; i++) {
        const size_t r = i * n_tok * inter;
        e->k->swiglu(b->gate + r, b->gate + r, b->up + r, n_tok * inter);
    }
    kz_matrix_mul_batch(&L->down, e, b->h, hid, b->gate, inter, rows);
    for (size_t i = 0; i < rows * hid; i++) {
        x[i] = x[i] + b->h[i];
    }
}

void kz_qwen3_forward_batch(const kz_qwen3_stack *s, kz_qwen3_state *const *st, size_t n_seq,
                            kz_qwen3_batch *b, kz_exec *e, float *x, size_t n_tok) {
    KZ_ASSERT(n_seq * n_tok <= b->max_rows);
    for (size_t i = 0; i < n_seq; i++) {
        KZ_ASSERT(st[i]->n_pos + (int64_t)n_tok <= (int64_t)st[i]->max_pos &&
                  n_tok <= st[i]->max_tok);
        for (size_t t = 0; t < n_tok; t++) {
            kz_rope_angles(st[i]->rope + t * (size_t)s->d.head_dim, s->d.head_dim, s->inv_freq,
                           st[i]->n_pos + (int64_t)t);
        }
    }
    for (int l = 0; l < s->d.n_layers; l++) {
        attention_batch(s, st, n_seq, b, e, l, x, n_tok);
        mlp_batch(s, n_seq, b, e, l, x, n_tok);
    }
    for (size_t i = 0; i < n_seq; i++) {
        st[i]->n_pos += (int64_t)n_tok;
    }
}

size_t kz_qwen3_kv_bytes(const kz_qwen3_stack *s, size_t n_pos) {
    const kz_qwen3_dims *d = &s->d;
    return 2 * (size_t)d->n_layers * (size_t)d->n_kv_heads * n_pos * (size_t)d->head_dim *
           kv_elem(s->kv_f16);
}

/* Rows of the run of positions [p, n_pos) that lie in p's block. */
static size_t rows_in_block(size_t p, size_t n_pos) {
    return n_pos - p < KV_BLOCK - p % KV_BLOCK ? n_pos - p : KV_BLOCK - p % KV_BLOCK;
}

/* The cache's (layer, kv head) runs of positions [0, n_pos), in order, to or from
 * one packed buffer, a block's part of each run at a time. */
static void kv_pack(const kz_qwen3_dims *d, bool f16, const void *cache, char *out,
                    size_t n_pos) {
    const size_t row_bytes = (size_t)d->head_dim * kv_elem(f16);
    for (int l = 0; l < d->n_layers; l++) {
        for (size_t g = 0; g < (size_t)d->n_kv_heads; g++) {
            for (size_t p = 0, rows; p < n_pos; p += rows, out += rows * row_bytes) {
                rows = rows_in_block(p, n_pos);
                const size_t at = cache_slot(d, l, g, p) * kv_elem(f16);
                memcpy(out, (const char *)cache + at, rows * row_bytes);
            }
        }
    }
}

static void kv_unpack(const kz_qwen3_dims *d, bool f16, void *cache, const char *in,
                      size_t n_pos) {
    const size_t row_bytes = (size_t)d->head_dim * kv_elem(f16);
    for (int l = 0; l < d->n_layers; l++) {
        for (size_t g = 0; g < (size_t)d->n_kv_heads; g++) {
            for (size_t p = 0, rows; p < n_pos; p += rows, in += rows * row_bytes) {
                rows = rows_in_block(p, n_pos);
                memcpy(cache_at(cache, f16, cache_slot(d, l, g, p)), in, rows * row_bytes);
            }
        }
    }
}

void kz_qwen3_kv_save(const kz_qwen3_stack *s, const kz_qwen3_state *st, size_t n_pos,
                      void *out) {
    KZ_ASSERT((int64_t)n_pos <= st->n_pos);
    const size_t half = kz_qwen3_kv_bytes(s, n_pos) / 2;
    kv_pack(&s->d, s->kv_f16, st->k_cache, out, n_pos);
    kv_pack(&s->d, s->kv_f16, st->v_cache, (char *)out + half, n_pos);
}

void kz_qwen3_kv_restore(const kz_qwen3_stack *s, kz_qwen3_state *st, const void *in,
                         size_t n_pos) {
    KZ_ASSERT(st->n_pos == 0 && n_pos <= st->max_pos);
    const size_t half = kz_qwen3_kv_bytes(s, n_pos) / 2;
    kv_unpack(&s->d, s->kv_f16, st->k_cache, in, n_pos);
    kv_unpack(&s->d, s->kv_f16, st->v_cache, (const char *)in + half, n_pos);
    st->n_pos = (int64_t)n_pos;
}

void kz_qwen3_final_norm(const kz_qwen3_stack *s, const kz_exec *e, float *y, const float *x) {
    e->k->rms_norm(y, x, s->norm, 1, (size_t)s->d.hidden, s->d.eps);
}
