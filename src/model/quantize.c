/*
 * quantize.c - kz_quantize (kztts.h): a checkpoint directory -> one kztts GGUF file
 * (layout in gguf_layout.h).
 *
 *   DIR --kz_model_open_with (validates everything, packs the codec and reports
 *         each packed weight)--> model [--codec forms: switched to P, panels kept]
 *       --type: stored type per talker / code-predictor tensor--> GGUF writer
 *       --configs, tokenizer files as text, tensors converted one at a time, the
 *         tokenizer's built BPE tables (used in place by a load)--> OUT.gguf
 *       (the writer's progress callback -> params.progress, which may cancel)
 * Every value the file stores is checked finite as it is written (check_written), and the
 * file says so (KZ_GGUF_KEY_WEIGHTS_CHECKED), so its loads need no scan.
 *
 * What each type stores (everything else keeps its stored type):
 *   f32    every talker matrix F32                        (reference, large)
 *   bf16   every talker matrix BF16                       (= the release)
 *   f16    every talker matrix F16 (IEEE half, round to nearest even; values beyond
 *          65504 become infinities, so only for weights known to fit)
 *   q8_0   every talker matrix Q8_0: the 28 + 5 transformer layers' projections,
 *          the embeddings, the codec heads, the text projection
 *   q4_0   transformer layers' q/k/v/o/gate/up/down projections Q4_0 (with the
 *          least-squares scale search, ref/quant_ref.c); embeddings, heads and the
 *          text projection Q8_0 (the fastest type)
 *   q4_mlp only the layers' MLP projections (gate/up/down) Q4_0, attention Q8_0
 * Norms and biases stay in their stored float type in every type, and so does a Base
 * model's speaker encoder (speaker_encoder.*, no talker matrix); the codec
 * decoder is stored as pre-packed F32 panels (it computes in fp32). "Talker
 * matrix" means a 2-D tensor named talker.*.weight with a multiple of 32 columns.
 *
 * The source is loaded as a model first, so it is validated exactly as synthesis
 * would see it, and the codec weights come out already packed (the load hook
 * collects them). With codec forms (--codec-forms P) the loaded codec is then switched
 * to P keeping its fp32 panels, and each converted conv's form is written after the
 * panels (add_codec_tensors' four runs). Talker tensors are converted row by row inside the writer's
 * fill callback, blocks of rows spread over a thread pool (every row is converted
 * alone, so the bytes do not depend on the threads); each thread holds one f32 row.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "io/gguf.h"
#include "io/tensor.h"
#include "io/text_file.h"
#include "kernels/quant.h"
#include "kztts.h"
#include "layers/conv_convert.h"
#include "model/gguf_layout.h"
#include "model/model.h"
#include "runtime/error.h"
#include "runtime/threadpool.h"
#include "text/tokenizer.h"

/* The name stored in the file's recipe key (and shown by `kztts info`). */
static const char *type_name(kz_quantize_type t) {
    static const char *const names[] = {"q8_0", "q4_0", "q4_mlp", "bf16", "f16", "f32"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static bool is_float(kz_dtype d) {
    return d == KZ_DTYPE_F32 || d == KZ_DTYPE_F16 || d == KZ_DTYPE_BF16;
}

/* The type tensor t (named as in model.safetensors) is stored with under type r. */
static kz_dtype stored_type(kz_quantize_type r, const kz_tensor *t) {
    bool matrix = strncmp(t->name, "talker.", 7) == 0 && ends_with(t->name, ".weight") &&
                  t->n_dims == 2 && t->shape[1] % KZ_QK == 0 && is_float(t->dtype);
    if (!matrix) {
        return r == KZ_QUANTIZE_F32 && is_float(t->dtype) ? KZ_DTYPE_F32 : t->dtype;
    }
    switch (r) {
    case KZ_QUANTIZE_F32: return KZ_DTYPE_F32;
    case KZ_QUANTIZE_BF16: return KZ_DTYPE_BF16;
    case KZ_QUANTIZE_F16: return KZ_DTYPE_F16;
    case KZ_QUANTIZE_Q8_0: return KZ_DTYPE_Q8_0;
    case KZ_QUANTIZE_Q4_0:
    case KZ_QUANTIZE_Q4_MLP: break;
    }
    bool projection = strstr(t->name, ".layers.") && ends_with(t->name, "_proj.weight");
    if (r == KZ_QUANTIZE_Q4_MLP) {
        projection = projection && strstr(t->name, ".mlp.") != NULL;
    }
    return projection ? KZ_DTYPE_Q4_0 : KZ_DTYPE_Q8_0;
}

/* --- type helpers ------------------------------------------------------------------------- */

static bool gguf_type(kz_dtype d, kz_gguf_tensor_type *out) {
    switch (d) {
    case KZ_DTYPE_F32: *out = KZ_GGUF_TENSOR_F32; return true;
    case KZ_DTYPE_F16: *out = KZ_GGUF_TENSOR_F16; return true;
    case KZ_DTYPE_BF16: *out = KZ_GGUF_TENSOR_BF16; return true;
    case KZ_DTYPE_Q8_0: *out = KZ_GGUF_TENSOR_Q8_0; return true;
    case KZ_DTYPE_Q4_0: *out = KZ_GGUF_TENSOR_Q4_0; return true;
    case KZ_DTYPE_OTHER: break;
    }
    return false;
}

/* f32 -> bf16 bits, round to nearest even (NaN stays NaN). */
static uint16_t to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((x >> 16) | 0x40u);
    }
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* Writes n floats x as dtype d at dst. */
static void convert_row(kz_dtype d, const float *x, size_t n, uint8_t *dst) {
    switch (d) {
    case KZ_DTYPE_Q8_0: kz_quantize_row_q8_0(dst, x, n); break;
    case KZ_DTYPE_Q4_0: kz_quantize_row_q4_0_search(dst, x, n); break;
    case KZ_DTYPE_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h = to_bf16(x[i]);
            memcpy(dst + 2 * i, &h, 2);
        }
        break;
    case KZ_DTYPE_F16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h = kz_f32_to_fp16(x[i]);
            memcpy(dst + 2 * i, &h, 2);
        }
        break;
    default: memcpy(dst, x, n * sizeof *x); break;
    }
}

/* --- the conversion ----------------------------------------------------------------------- */

typedef struct packed_entry {
    char *name;
    const kz_packed *p;
} packed_entry;

typedef struct form_entry {
    const kz_conv *conv;
    const kz_wino *wino; /* the conv's Winograd form, or NULL: its bf16 panels */
} form_entry;

typedef struct job {
    kz_model *m;
    kz_quantize_type type;
    kz_precision forms;  /* the codec precision whose forms are stored, or F32: none */
    form_entry *form;    /* the convs with a converted form (forms != F32) */
    size_t n_form, cap_form;
    packed_entry *packed;
    size_t n_packed, cap_packed;
    kz_status hook_status;
    kz_pool *pool;
    float *rows; /* [threads, widest row] */
    size_t row_cap;
    kz_quantize_report *rep;
    kz_quantize_progress_fn progress; /* the caller's, or NULL */
    void *progress_user;
} job;

/* Room for item n of the array at *array_ptr (a pointer to its first element, items of
 * item_size bytes, *cap allocated), doubling it when full; false when out of memory. */
static bool reserve(void *array_ptr, size_t *cap, size_t n, size_t item_size) {
    if (n < *cap) {
        return true;
    }
    void *items;
    memcpy(&items, array_ptr, sizeof items);
    const size_t grown_cap = *cap ? 2 * *cap : 64;
    void *grown = realloc(items, grown_cap * item_size);
    if (!grown) {
        return false;
    }
    memcpy(array_ptr, &grown, sizeof grown);
    *cap = grown_cap;
    return true;
}

static void on_packed(void *user, const char *name, const kz_packed *p) {
    job *j = user;
    if (!reserve(&j->packed, &j->cap_packed, j->n_packed, sizeof *j->packed)) {
        j->hook_status = KZ_STATUS_OUT_OF_MEMORY;
        return;
    }
    char *copy = strdup(name);
    if (!copy) {
        j->hook_status = KZ_STATUS_OUT_OF_MEMORY;
        return;
    }
    j->packed[j->n_packed++] = (packed_entry){copy, p};
}

static const packed_entry *find_packed(const job *j, const char *name) {
    for (size_t i = 0; i < j->n_packed; i++) {
        if (strcmp(j->packed[i].name, name) == 0) {
            return &j->packed[i];
        }
    }
    return NULL;
}

/* Refuses a non-finite value (block scale) in what the file is about to store: a
 * conversion of finite values can still overflow (an f16 or bf16 rounding, a q8_0 / q4_0
 * scale, a Winograd transform), and the file says it was checked
 * (KZ_GGUF_KEY_WEIGHTS_CHECKED), which spares every load a scan. */
static kz_status check_written(const char *name, kz_dtype d, const void *data, size_t n_elements) {
    const kz_tensor out = {.name = name, .dtype = d, .n_dims = 1,
                           .shape = {(int64_t)n_elements}, .n_elements = n_elements,
                           .data = data};
    return kz_tensor_check_finite(&out, "quantize", "converted ");
}

#define CONVERT_BLOCK_ROWS 64

typedef struct convert_job {
    const kz_tensor *t;
    kz_dtype d;
    size_t rows, cols;
    uint8_t *dst;
    float *scratch; /* [threads, cols] */
} convert_job;

/* Converts rows [64 chunk, 64 chunk + 64) of one tensor (its dtype was checked). */
static void convert_rows(void *arg, size_t chunk, int worker) {
    const convert_job *c = arg;
    float *row_f32 = c->scratch + (size_t)worker * c->cols;
    size_t r1 = (chunk + 1) * CONVERT_BLOCK_ROWS < c->rows ? (chunk + 1) * CONVERT_BLOCK_ROWS
                                                          : c->rows;
    for (size_t r = chunk * CONVERT_BLOCK_ROWS; r < r1; r++) {
        kz_tensor row = *c->t;
        row.n_elements = c->cols;
        row.data = (const uint8_t *)c->t->data + r * kz_dtype_row_bytes(c->t->dtype, c->cols);
        kz_status st = kz_tensor_to_f32(&row, row_f32);
        KZ_ASSERT(st == KZ_OK);
        (void)st;
        convert_row(c->d, row_f32, c->cols, c->dst + r * kz_dtype_row_bytes(c->d, c->cols));
    }
}

/* Fill callback: converts model tensor `name` ("model.<source name>") row by row. */
static kz_status fill_model_tensor(void *user, const char *name, void *dst, size_t n_bytes) {
    job *j = user;
    const kz_tensor *t = kz_weights_find(j->m->main_w, name + strlen(KZ_GGUF_PREFIX_MODEL));
    kz_dtype d = stored_type(j->type, t);
    size_t cols = t->n_dims > 0 ? (size_t)t->shape[t->n_dims - 1] : 1;
    size_t rows = cols ? t->n_elements / cols : 0;
    size_t threads = (size_t)kz_pool_threads(j->pool);
    if (cols > j->row_cap) {
        float *grown = realloc(j->rows, threads * cols * sizeof *grown);
        if (!grown) {
            return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory converting '%s'", name);
        }
        j->rows = grown;
        j->row_cap = cols;
    }
    KZ_ASSERT(rows * kz_dtype_row_bytes(d, cols) == n_bytes);
    // The source dtype is checked here, on this thread, so that workers cannot fail.
    kz_tensor first = *t;
    first.n_elements = rows ? cols : 0;
    kz_status st = kz_tensor_to_f32(&first, j->rows);
    // The load scans every other tensor; synthesis checks this one's rows as it reads them.
    // A GGUF must not carry a NaN or Inf on to that late error.
    if (st == KZ_OK && strcmp(t->name, "talker.model.text_embedding.weight") == 0) {
        st = kz_tensor_check_finite(t, kz_weights_path(j->m->main_w),
                                    kz_weights_prefix(j->m->main_w));
    }
    if (st == KZ_OK) {
        convert_job c = {.t = t, .d = d, .rows = rows, .cols = cols, .dst = dst,
                         .scratch = j->rows};
        kz_pool_run(j->pool, (rows + CONVERT_BLOCK_ROWS - 1) / CONVERT_BLOCK_ROWS, convert_rows,
                    &c);
        st = check_written(name, d, dst, t->n_elements);
    }
    kz_weights_release(j->m->main_w, t);
    return st;
}

static void count(job *j, kz_dtype d, size_t n_bytes) {
    static const int slot_of[] = {[KZ_DTYPE_F32] = 0, [KZ_DTYPE_F16] = 1, [KZ_DTYPE_BF16] = 2,
                                  [KZ_DTYPE_OTHER] = -1, [KZ_DTYPE_Q8_0] = 3, [KZ_DTYPE_Q4_0] = 4};
    KZ_ASSERT(slot_of[d] >= 0); // only types GGUF holds are written
    kz_quantize_count *c = &j->rep->types[slot_of[d]];
    c->n_tensors++;
    c->n_bytes += n_bytes;
}

/* --- tensor order -------------------------------------------------------------------------- */

/* The file holds the language models' tensors in the order a frame reads them: the
 * talker's layers 0, 1, ... (each: norm, q, k, v, q/k norms, o, norm, gate, up, down), its
 * norm and codec head, then the code predictor's layers, norm and heads 0..14, so one
 * code-predictor step streams one contiguous range. Everything else (embeddings, read by
 * row; the text projection, used by the prefill) comes first, by name. */
typedef struct order_key {
    int group;   /* 0 other, 1 talker layers, 2 talker norm, 3 codec head, 4 CP layers,
                    5 CP norm, 6 CP heads */
    long index;  /* layer or head number */
    int part;    /* position in layer_parts, or 0 */
} order_key;

static const char *const layer_parts[] = {
    "input_layernorm.",  "self_attn.q_proj.", "self_attn.k_proj.",        "self_attn.v_proj.",
    "self_attn.q_norm.", "self_attn.k_norm.", "self_attn.o_proj.",        "post_attention_layernorm.",
    "mlp.gate_proj.",    "mlp.up_proj.",      "mlp.down_proj."};

static bool starts_with(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static order_key key_of(const char *name) {
    static const struct { const char *prefix; int group; bool numbered; } groups[] = {
        {"talker.model.layers.", 1, true},
        {"talker.model.norm.", 2, false},
        {"talker.codec_head.", 3, false},
        {"talker.code_predictor.model.layers.", 4, true},
        {"talker.code_predictor.model.norm.", 5, false},
        {"talker.code_predictor.lm_head.", 6, true}};
    order_key k = {0, 0, 0};
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        if (!starts_with(name, groups[g].prefix)) {
            continue;
        }
        const char *rest = name + strlen(groups[g].prefix);
        char *end = (char *)rest;
        long index = groups[g].numbered ? strtol(rest, &end, 10) : 0;
        if (groups[g].numbered && (end == rest || *end != '.')) {
            return k; // not a numbered entry after all: "other"
        }
        k = (order_key){groups[g].group, index, 0};
        const size_t n_parts = sizeof layer_parts / sizeof layer_parts[0];
        for (size_t p = 0; (k.group == 1 || k.group == 4) && p < n_parts; p++) {
            if (starts_with(end + 1, layer_parts[p])) {
                k.part = (int)p;
            }
        }
        return k;
    }
    return k;
}

static int compare_order(const void *a, const void *b) {
    const kz_tensor *ta = *(const kz_tensor *const *)a, *tb = *(const kz_tensor *const *)b;
    order_key ka = key_of(ta->name), kb = key_of(tb->name);
    if (ka.group != kb.group) {
        return ka.group < kb.group ? -1 : 1;
    }
    if (ka.index != kb.index) {
        return ka.index < kb.index ? -1 : 1;
    }
    if (ka.part != kb.part) {
        return ka.part < kb.part ? -1 : 1;
    }
    return strcmp(ta->name, tb->name);
}

static kz_status add_model_tensors(job *j, kz_gguf_writer *w) {
    const kz_weights *src = j->m->main_w;
    size_t n = kz_weights_count(src);
    const kz_tensor **order = malloc((n ? n : 1) * sizeof *order);
    if (!order) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory ordering the tensors");
    }
    for (size_t i = 0; i < n; i++) {
        order[i] = kz_weights_at(src, i);
    }
    qsort(order, n, sizeof *order, compare_order);
    kz_status st = KZ_OK;
    char name[1024];
    for (size_t i = 0; i < n && st == KZ_OK; i++) {
        const kz_tensor *t = order[i];
        kz_dtype d = stored_type(j->type, t);
        kz_gguf_tensor_type type;
        if (!gguf_type(d, &type) || t->n_dims < 1 || t->n_dims > KZ_GGUF_MAX_DIMS) {
            j->rep->n_skipped++;
            continue;
        }
        snprintf(name, sizeof name, "%s%s", KZ_GGUF_PREFIX_MODEL, t->name);
        st = kz_gguf_writer_add_tensor_fn(w, name, type, t->n_dims, t->shape, fill_model_tensor, j);
        size_t cols = (size_t)t->shape[t->n_dims - 1];
        count(j, d, t->n_elements / cols * kz_dtype_row_bytes(d, cols));
    }
    free(order);
    return st;
}

static kz_status add_packed(job *j, kz_gguf_writer *w, const packed_entry *e) {
    char name[1024];
    snprintf(name, sizeof name, "%s%s%s", KZ_GGUF_PREFIX_CODEC, e->name, KZ_GGUF_PACKED_SUFFIX);
    const kz_packed *p = e->p;
    int64_t shape[3] = {(int64_t)p->n_panels, (int64_t)(p->taps * p->k_in), KZ_PANEL};
    j->rep->n_packed++;
    count(j, KZ_DTYPE_F32, kz_packed_bytes(p->taps, p->k_in, p->n));
    return kz_gguf_writer_add_tensor(w, name, KZ_GGUF_TENSOR_F32, 3, shape, p->data);
}

/* --- stored codec forms (--codec-forms) ------------------------------------------------ */

/* Walker callback: lists the convs that the forms' precision converted. */
static void collect_form(void *user, kz_conv *c, kz_wino *w) {
    job *j = user;
    const kz_wino *wino = w && w->n_pts ? w : NULL;
    if ((!wino && !c->wb.data) || j->hook_status != KZ_OK) {
        return;
    }
    if (!reserve(&j->form, &j->cap_form, j->n_form, sizeof *j->form)) {
        j->hook_status = KZ_STATUS_OUT_OF_MEMORY;
        return;
    }
    j->form[j->n_form++] = (form_entry){c, wino};
}

/* Converts the loaded codec to the forms' precision, keeping its fp32 panels (which are
 * stored as well), and lists the converted convs. */
static kz_status build_forms(job *j) {
    const kz_precision p = j->forms == KZ_PRECISION_FAST
                               ? kz_model_codec_precision(j->m, KZ_PRECISION_FAST)
                               : j->forms;
    j->forms = p;
    if (p != KZ_PRECISION_BF16 && p != KZ_PRECISION_WINOGRAD && p != KZ_PRECISION_WINOGRAD_BF16) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "codec forms: '%s' converts nothing (bf16, winograd, winograd-bf16 "
                            "or fast)", kz_precision_name(p));
    }
    const kz_codec_forms keep = {.keep_panels = true};
    kz_status st = kz_model_use_codec_precision(j->m, p, &keep);
    if (st == KZ_OK) {
        kz_codec_decoder_each_conv(&j->m->decoder, collect_form, j);
        st = j->hook_status;
    }
    return st;
}

static const form_entry *find_form(const job *j, const char *name) {
    for (size_t i = 0; i < j->n_form; i++) {
        if (strcmp(j->form[i].conv->name, name) == 0) {
            return &j->form[i];
        }
    }
    return NULL;
}

/* Fill callback: a Winograd form's U_k one after another (user: the kz_wino). */
static kz_status fill_winograd(void *user, const char *name, void *dst, size_t n_bytes) {
    const kz_wino *w = user;
    const size_t each = kz_packed_bytes(1, w->k_in, w->n);
    KZ_ASSERT(each * w->n_pts == n_bytes);
    for (size_t k = 0; k < w->n_pts; k++) {
        memcpy((uint8_t *)dst + k * each, w->u[k].w.data, each);
    }
    return check_written(name, KZ_DTYPE_F32, dst, n_bytes / sizeof(float));
}

/* "<weight>.winograd" or "<weight>.packed_bf16" for e (layers/conv_convert.h). */
static kz_status add_form(job *j, kz_gguf_writer *w, const form_entry *e) {
    char name[1024];
    const kz_conv *c = e->conv;
    const int64_t n_panels = (int64_t)((c->n + KZ_PANEL - 1) / KZ_PANEL);
    if (e->wino) {
        snprintf(name, sizeof name, "%s%s%s", KZ_GGUF_PREFIX_CODEC, c->name,
                 KZ_CONV_FORM_WINOGRAD);
        const int64_t shape[4] = {(int64_t)e->wino->n_pts, n_panels, (int64_t)c->k_in, KZ_PANEL};
        count(j, KZ_DTYPE_F32, e->wino->n_pts * kz_packed_bytes(1, c->k_in, c->n));
        return kz_gguf_writer_add_tensor_fn(w, name, KZ_GGUF_TENSOR_F32, 4, shape,
                                            fill_winograd, (void *)(uintptr_t)e->wino);
    }
    snprintf(name, sizeof name, "%s%s%s", KZ_GGUF_PREFIX_CODEC, c->name, KZ_CONV_FORM_BF16);
    const int64_t shape[4] = {n_panels, (int64_t)(c->taps * c->wb.k_pairs), KZ_PANEL, 2};
    const size_t n_bytes = kz_packed_bf16_bytes(c->taps, c->k_in, c->n);
    count(j, KZ_DTYPE_BF16, n_bytes);
    kz_status st = check_written(name, KZ_DTYPE_BF16, c->wb.data, n_bytes / 2);
    return st ? st : kz_gguf_writer_add_tensor(w, name, KZ_GGUF_TENSOR_BF16, 4, shape, c->wb.data);
}

/* One codec tensor as stored, or its packed panels. */
static kz_status add_codec_tensor(job *j, kz_gguf_writer *w, const kz_tensor *t) {
    const packed_entry *e = find_packed(j, t->name);
    kz_gguf_tensor_type type;
    char name[1024];
    if (e) {
        return add_packed(j, w, e);
    }
    if (gguf_type(t->dtype, &type) && t->n_dims >= 1 && t->n_dims <= KZ_GGUF_MAX_DIMS) {
        snprintf(name, sizeof name, "%s%s", KZ_GGUF_PREFIX_CODEC, t->name);
        count(j, t->dtype, t->n_bytes);
        // The load scans only what the decoder runs; the file vouches for every tensor.
        kz_status st = check_written(name, t->dtype, t->data, t->n_elements);
        return st ? st : kz_gguf_writer_add_tensor(w, name, type, t->n_dims, t->shape, t->data);
    }
    j->rep->n_skipped++;
    return KZ_OK;
}

/* The codec's tensors in four runs: those stored as they are (vectors, codebooks, the
 * encoder); the packed panels of convs without a stored form; the forms; the packed panels
 * of convs with one. What a load in the forms' precision maps in is then one contiguous
 * range, and so is an f32 load's but for the forms between (the populated ranges are
 * rounded out to 2 MB pages, mapped_file.c). */
static kz_status add_codec_tensors(job *j, kz_gguf_writer *w) {
    const kz_weights *src = j->m->codec_w;
    const size_t n = kz_weights_count(src);
    kz_status st = KZ_OK;
    for (int run = 0; run < 4; run++) {
        for (size_t i = 0; i < n && st == KZ_OK; i++) {
            const kz_tensor *t = kz_weights_at(src, i);
            const bool packed = find_packed(j, t->name) != NULL;
            const form_entry *f = packed ? find_form(j, t->name) : NULL;
            if (run == 2 && f) {
                st = add_form(j, w, f);
                j->rep->n_forms++;
            } else if ((run == 0 && !packed) || (run == 1 && packed && !f) || (run == 3 && f)) {
                st = add_codec_tensor(j, w, t);
            }
        }
    }
    return st;
}

/* The tokenizer's BPE tables as tensors (gguf_layout.h tokenizer.bpe.*), borrowed from the
 * loaded model, and the key that marks them, so that a load uses them in place. */
static kz_status add_tokenizer_tables(const job *j, kz_gguf_writer *w) {
    kz_bpe_tables t;
    kz_bpe_tables_of(kz_tokenizer_bpe(j->m->tokenizer), &t);
    const struct {
        const char *name;
        kz_gguf_tensor_type type;
        int n_dims;
        int64_t shape[2];
        const void *data;
    } tensors[] = {
        {KZ_GGUF_BPE_BLOB, KZ_GGUF_TENSOR_I8, 1, {(int64_t)t.n_blob}, t.blob},
        {KZ_GGUF_BPE_TOKEN_OFFSETS, KZ_GGUF_TENSOR_I32, 1, {(int64_t)t.n_ids}, t.tok_off},
        {KZ_GGUF_BPE_TOKEN_LENGTHS, KZ_GGUF_TENSOR_I32, 1, {(int64_t)t.n_ids}, t.tok_len},
        {KZ_GGUF_BPE_VOCAB_SLOTS, KZ_GGUF_TENSOR_I32, 2, {(int64_t)t.n_vocab_slots, 2},
         t.vocab_slots},
        {KZ_GGUF_BPE_MERGE_SLOTS, KZ_GGUF_TENSOR_I64, 1, {(int64_t)t.n_merge_slots},
         t.merge_slots},
        {KZ_GGUF_BPE_MERGE_RESULTS, KZ_GGUF_TENSOR_I32, 1, {(int64_t)t.n_merges},
         t.merge_result},
        {KZ_GGUF_BPE_BYTE_IDS, KZ_GGUF_TENSOR_I32, 1, {256}, t.byte_id},
    };
    if (t.n_merges == 0) { // nothing to store (a tensor has at least one element)
        return KZ_OK;
    }
    kz_status st = kz_gguf_writer_add_u32(w, KZ_GGUF_KEY_BPE_TABLES, KZ_BPE_TABLES_VERSION);
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0] && st == KZ_OK; i++) {
        st = kz_gguf_writer_add_tensor(w, tensors[i].name, tensors[i].type, tensors[i].n_dims,
                                       tensors[i].shape, tensors[i].data);
        const int64_t *n = tensors[i].shape;
        size_t elem = 0;
        kz_gguf_tensor_type_block(tensors[i].type, NULL, &elem); // one value a block
        j->rep->tokenizer.n_tensors++;
        j->rep->tokenizer.n_bytes += (uint64_t)(n[0] * (tensors[i].n_dims > 1 ? n[1] : 1)) * elem;
    }
    return st;
}

/* Adds file dir/name as string metadata `key`; absent optional files are skipped. */
static kz_status add_text_file(kz_gguf_writer *w, const char *dir, const char *name,
                               const char *key, bool required) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    // access, not an open: a FIFO put there after the load must not block (the read below
    // opens regular files only).
    if (!required && access(path, F_OK) != 0) {
        return KZ_OK;
    }
    char *text;
    size_t n;
    kz_status st = kz_text_file_read(path, (size_t)64 << 20, &text, &n);
    if (st == KZ_OK && strlen(text) != n) {
        st = kz_error_set(KZ_STATUS_BAD_MODEL, "%s: contains a NUL byte", path);
    }
    st = st == KZ_OK ? kz_gguf_writer_add_str(w, key, text) : st;
    free(text);
    return st;
}

static const char *base_name(const char *path, char *buf, size_t n) {
    snprintf(buf, n, "%s", path);
    size_t len = strlen(buf);
    while (len > 1 && buf[len - 1] == '/') {
        buf[--len] = '\0';
    }
    const char *slash = strrchr(buf, '/');
    return slash ? slash + 1 : buf;
}

static kz_status add_metadata(const job *j, kz_gguf_writer *w, const char *src) {
    char buf[4096], codec_dir[4096];
    bool tts = j->m->has_tts;
    snprintf(codec_dir, sizeof codec_dir, "%s%s", src, tts ? "/speech_tokenizer" : "");
    kz_status st = kz_gguf_writer_add_str(w, "general.architecture", KZ_GGUF_ARCHITECTURE);
    st = st == KZ_OK ? kz_gguf_writer_add_str(w, "general.name", base_name(src, buf, sizeof buf))
                     : st;
    st = st == KZ_OK ? kz_gguf_writer_add_u32(w, "general.alignment", KZ_GGUF_ALIGNMENT) : st;
    st = st == KZ_OK ? kz_gguf_writer_add_u32(w, KZ_GGUF_KEY_FORMAT, KZ_GGUF_FORMAT_VERSION) : st;
    st = st == KZ_OK ? kz_gguf_writer_add_u32(w, KZ_GGUF_KEY_WEIGHTS_CHECKED, 1) : st;
    st = st == KZ_OK ? kz_gguf_writer_add_str(w, KZ_GGUF_KEY_RECIPE, type_name(j->type))
                     : st;
    st = st == KZ_OK ? add_text_file(w, codec_dir, "config.json", KZ_GGUF_KEY_CODEC_CONFIG, true)
                     : st;
    if (st == KZ_OK && j->forms != KZ_PRECISION_DEFAULT && j->forms != KZ_PRECISION_EXACT) {
        st = kz_gguf_writer_add_str(w, KZ_GGUF_KEY_CODEC_FORMS, kz_precision_name(j->forms));
    }
    if (!tts || st != KZ_OK) {
        return st;
    }
    st = add_text_file(w, src, "config.json", KZ_GGUF_KEY_CONFIG, true);
    st = st == KZ_OK ? add_text_file(w, src, "generation_config.json", KZ_GGUF_KEY_GENERATION,
                                     false)
                     : st;
    bool tokenizer = j->m->tokenizer != NULL;
    st = st == KZ_OK ? add_text_file(w, src, "vocab.json", KZ_GGUF_KEY_VOCAB, tokenizer) : st;
    if (st == KZ_OK && tokenizer) {
        st = add_text_file(w, src, "merges.txt", KZ_GGUF_KEY_MERGES, true);
        st = st == KZ_OK ? add_text_file(w, src, "tokenizer_config.json",
                                         KZ_GGUF_KEY_TOKENIZER_CONFIG, true)
                         : st;
    }
    return st;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The writer's progress, passed on to the caller's callback. */
static bool on_progress(void *user, size_t n_done, size_t n_total) {
    const job *j = user;
    return j->progress(n_done, n_total, j->progress_user);
}

static kz_status convert(job *j, const char *src, const char *out_path) {
    kz_gguf_writer *w;
    kz_status st = kz_gguf_writer_new(&w);
    if (st == KZ_OK && j->progress) {
        kz_gguf_writer_set_progress(w, on_progress, j);
    }
    st = st == KZ_OK ? add_metadata(j, w, src) : st;
    st = st == KZ_OK && j->m->has_tts ? add_model_tensors(j, w) : st;
    st = st == KZ_OK ? add_codec_tensors(j, w) : st;
    st = st == KZ_OK && j->m->tokenizer ? add_tokenizer_tables(j, w) : st;
    st = st == KZ_OK ? kz_gguf_writer_write(w, out_path) : st;
    kz_gguf_writer_free(w);
    return st;
}

void kz_quantize_default_params(kz_quantize_params *params) {
    if (params) {
        *params = (kz_quantize_params){.type = KZ_QUANTIZE_Q8_0,
                                       .codec_forms = KZ_PRECISION_DEFAULT};
    }
}

static kz_status check_args(const char *src, const char *out_path, const kz_quantize_params *p) {
    if (!src || !out_path) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_quantize: %s path is NULL",
                            src ? "output" : "source");
    }
    if (!src[0] || !out_path[0]) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_quantize: empty %s path",
                            src[0] ? "output" : "source");
    }
    if (ends_with(src, ".gguf")) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "%s: the source must be a checkpoint directory, not a GGUF file", src);
    }
    if ((unsigned)p->type > KZ_QUANTIZE_F32) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_quantize: unknown type %d",
                            (int)p->type);
    }
    if (p->codec_forms < KZ_PRECISION_DEFAULT || p->codec_forms > KZ_PRECISION_WINOGRAD_BF16) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_quantize: codec_forms %d is not a kz_precision", (int)p->codec_forms);
    }
    if (p->n_threads < 0 || p->n_threads > 256) {
        return kz_error_set(KZ_STATUS_INVALID_ARGUMENT,
                            "kz_quantize: n_threads %d is not in [0, 256]", (int)p->n_threads);
    }
    return KZ_OK;
}

kz_status kz_quantize(const char *src, const char *out_path, const kz_quantize_params *params) {
    kz_quantize_params defaults;
    kz_quantize_default_params(&defaults);
    const kz_quantize_params *p = params ? params : &defaults;
    kz_quantize_report report = {.types = {{"F32", 0, 0}, {"F16", 0, 0}, {"BF16", 0, 0},
                                           {"Q8_0", 0, 0}, {"Q4_0", 0, 0}},
                                 .tokenizer = {"tokenizer", 0, 0}};
    job j = {.type = p->type, .forms = p->codec_forms, .rep = &report,
             .progress = p->progress, .progress_user = p->user};
    double t0 = now_s();
    kz_status st = check_args(src, out_path, p);
    if (st != KZ_OK) {
        return st;
    }
    st = kz_pool_new(p->n_threads ? p->n_threads : kz_pool_default_threads(), &j.pool);
    if (st != KZ_OK) {
        return st;
    }
    kz_model_params model_params = {0};
    kz_load_opts opts = {.on_packed = on_packed, .on_packed_user = &j};
    st = kz_model_open_with(src, &model_params, &opts, &j.m);
    if (st == KZ_OK && j.hook_status != KZ_OK) {
        st = kz_error_set(j.hook_status, "out of memory collecting the codec weights");
    }
    const bool forms = j.forms != KZ_PRECISION_DEFAULT && j.forms != KZ_PRECISION_EXACT;
    st = st == KZ_OK && forms ? build_forms(&j) : st;
    st = st == KZ_OK ? convert(&j, src, out_path) : st;
    kz_model_close(j.m);
    free(j.form);
    for (size_t i = 0; i < j.n_packed; i++) {
        free(j.packed[i].name);
    }
    free(j.packed);
    free(j.rows);
    kz_pool_free(j.pool);
    report.seconds = now_s() - t0;
    if (st == KZ_OK && p->report) {
        *p->report = report;
    }
    return st;
}
