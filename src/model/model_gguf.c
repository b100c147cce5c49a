/*
 * model_gguf.c - loading a kztts model from one GGUF file (layout: gguf_layout.h).
 *
 *   file -> kz_gguf_open (validates every header field, maps the data)
 *        -> architecture / format version checks
 *        -> configs parsed from the metadata's JSON strings; the tokenizer built
 *           from its text strings on a thread of its own meanwhile, or over its
 *           stored BPE tables (tokenizer.bpe.*, used in place)
 *        -> kz_weights views "model." and "codec." -> kz_model_bind_tts / _codec
 * Weights stay in the mapping: quantized and bf16 matrices are used in place,
 * the codec's pre-packed panels too, so loading does no weight conversion.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "model/gguf_layout.h"
#include "model/model.h"
#include "runtime/error.h"
#include "text/tokenizer_job.h"

/* A string value of key, or NULL with *n 0 when absent (and optional). */
static kz_status get_text(const kz_gguf_file *g, const char *key, bool required,
                          const char **text, size_t *n) {
    *text = NULL;
    *n = 0;
    const kz_gguf_kv *kv = kz_gguf_find_kv(g, key);
    if (!kv) {
        return required ? kz_error_set(KZ_STATUS_BAD_MODEL, "%s: metadata '%s' is missing",
                                       kz_gguf_path(g), key)
                        : KZ_OK;
    }
    kz_status st = kz_gguf_get_str(g, key, text);
    *n = st == KZ_OK ? kv->string_bytes[0] : 0;
    return st;
}

/* "file.gguf:key" for messages. */
static void label(char *buf, size_t n, const kz_gguf_file *g, const char *key) {
    snprintf(buf, n, "%s:%s", kz_gguf_path(g), key);
}

static kz_status check_header(const kz_gguf_file *g) {
    const char *arch;
    uint32_t version;
    kz_status st = kz_gguf_get_str(g, "general.architecture", &arch);
    if (st == KZ_OK && strcmp(arch, KZ_GGUF_ARCHITECTURE) != 0) {
        return kz_error_set(KZ_STATUS_BAD_MODEL, "%s: general.architecture is '%s', expected '%s'",
                            kz_gguf_path(g), arch, KZ_GGUF_ARCHITECTURE);
    }
    st = st == KZ_OK ? kz_gguf_get_u32(g, KZ_GGUF_KEY_FORMAT, &version) : st;
    if (st == KZ_OK && version != KZ_GGUF_FORMAT_VERSION) {
        return kz_error_set(KZ_STATUS_UNSUPPORTED,
                            "%s: %s is %u; this kztts reads version %u (re-run kztts quantize)",
                            kz_gguf_path(g), KZ_GGUF_KEY_FORMAT, version, KZ_GGUF_FORMAT_VERSION);
    }
    return st;
}

static kz_status load_codec(kz_model *m) {
    const kz_gguf_file *g = m->gguf;
    const char *text;
    size_t n;
    char where[1024];
    label(where, sizeof where, g, KZ_GGUF_KEY_CODEC_CONFIG);
    kz_status st = get_text(g, KZ_GGUF_KEY_CODEC_CONFIG, true, &text, &n);
    st = st == KZ_OK ? kz_codec_config_parse(where, text, n, &m->codec_cfg) : st;
    st = st == KZ_OK ? kz_weights_from_gguf(g, KZ_GGUF_PREFIX_CODEC, &m->codec_w) : st;
    return st == KZ_OK ? kz_model_bind_codec(m, NULL) : st;
}

/* The tensor `name` when it has `type`, n elements (n 0: any count) and data aligned for
 * its elements (a file's alignment may be smaller), else NULL. */
static const kz_gguf_tensor *table(const kz_gguf_file *g, const char *name,
                                   kz_gguf_tensor_type type, size_t n) {
    const kz_gguf_tensor *t = kz_gguf_find(g, name);
    size_t elem_bytes = 0;
    return t && t->type == type && (n == 0 || t->n_elements == n) &&
                   kz_gguf_tensor_type_block(type, NULL, &elem_bytes) &&
                   (uintptr_t)t->data % elem_bytes == 0
               ? t
               : NULL;
}

/* *out: the stored BPE tables (gguf_layout.h tokenizer.bpe.*) when the file has them under
 * this reader's tables version, shaped alike; false otherwise (the tokenizer is then built
 * from the texts). Their contents are checked where they are used (kz_bpe_from_tables). */
static bool stored_bpe_tables(const kz_gguf_file *g, kz_bpe_tables *out) {
    uint32_t version = 0;
    if (!kz_gguf_find_kv(g, KZ_GGUF_KEY_BPE_TABLES) ||
        kz_gguf_get_u32(g, KZ_GGUF_KEY_BPE_TABLES, &version) != KZ_OK ||
        version != KZ_BPE_TABLES_VERSION) {
        kz_error_clear();
        return false;
    }
    const kz_gguf_tensor *blob = table(g, KZ_GGUF_BPE_BLOB, KZ_GGUF_TENSOR_I8, 0);
    const kz_gguf_tensor *off = table(g, KZ_GGUF_BPE_TOKEN_OFFSETS, KZ_GGUF_TENSOR_I32, 0);
    const size_t n_ids = off ? off->n_elements : 0;
    const kz_gguf_tensor *len = table(g, KZ_GGUF_BPE_TOKEN_LENGTHS, KZ_GGUF_TENSOR_I32, n_ids);
    const kz_gguf_tensor *vocab = table(g, KZ_GGUF_BPE_VOCAB_SLOTS, KZ_GGUF_TENSOR_I32, 0);
    const kz_gguf_tensor *merges = table(g, KZ_GGUF_BPE_MERGE_SLOTS, KZ_GGUF_TENSOR_I64, 0);
    const kz_gguf_tensor *results = table(g, KZ_GGUF_BPE_MERGE_RESULTS, KZ_GGUF_TENSOR_I32, 0);
    const kz_gguf_tensor *bytes = table(g, KZ_GGUF_BPE_BYTE_IDS, KZ_GGUF_TENSOR_I32, 256);
    if (!blob || !off || !len || !vocab || vocab->n_dims != 2 || vocab->shape[1] != 2 ||
        !merges || !results || !bytes) {
        return false;
    }
    *out = (kz_bpe_tables){.blob = blob->data,
                           .n_blob = blob->n_elements,
                           .tok_off = off->data,
                           .tok_len = len->data,
                           .n_ids = n_ids,
                           .vocab_slots = vocab->data,
                           .n_vocab_slots = (size_t)vocab->shape[0],
                           .merge_slots = merges->data,
                           .n_merge_slots = merges->n_elements,
                           .merge_result = results->data,
                           .n_merges = results->n_elements,
                           .byte_id = bytes->data};
    return true;
}

/* Starts building the tokenizer from the metadata's texts, or from its stored tables, on
 * its own thread (the job stays inactive when the file has no tokenizer). */
static kz_status start_tokenizer(const kz_model *m, kz_tokenizer_job *job,
                                 kz_bpe_tables *tables) {
    const kz_gguf_file *g = m->gguf;
    kz_tokenizer_text t = {.label = kz_gguf_path(g)};
    t.bpe_tables = stored_bpe_tables(g, tables) ? tables : NULL;
    memset(job, 0, sizeof *job);
    kz_status st = get_text(g, KZ_GGUF_KEY_VOCAB, false, &t.vocab_json, &t.vocab_bytes);
    if (st != KZ_OK || !t.vocab_json) {
        return st;
    }
    st = get_text(g, KZ_GGUF_KEY_MERGES, true, &t.merges_txt, &t.merges_bytes);
    st = st == KZ_OK ? get_text(g, KZ_GGUF_KEY_TOKENIZER_CONFIG, true, &t.config_json,
                                &t.config_bytes)
                     : st;
    return st == KZ_OK ? kz_tokenizer_job_start_text(job, &t) : st;
}

static kz_status load_tts_weights(kz_model *m, const char *config, size_t n_config) {
    const kz_gguf_file *g = m->gguf;
    const char *text;
    size_t n;
    char where[1024];
    label(where, sizeof where, g, KZ_GGUF_KEY_CONFIG);
    kz_status st = kz_tts_config_parse(where, config, n_config, &m->cfg);
    label(where, sizeof where, g, KZ_GGUF_KEY_GENERATION);
    st = st == KZ_OK ? get_text(g, KZ_GGUF_KEY_GENERATION, false, &text, &n) : st;
    st = st == KZ_OK ? kz_generation_config_parse(where, text, n, &m->gen) : st;
    st = st == KZ_OK ? kz_weights_from_gguf(g, KZ_GGUF_PREFIX_MODEL, &m->main_w) : st;
    st = st == KZ_OK ? kz_model_bind_tts(m) : st;
    return st == KZ_OK ? load_codec(m) : st;
}

/* The tokenizer is built on a thread of its own while the weights are bound
 * (text/tokenizer_job.h); an error of the weights is reported first. */
static kz_status load_tts(kz_model *m, const char *config, size_t n_config) {
    kz_tokenizer_job job;
    kz_bpe_tables tables; // read by the job's thread until it is joined
    kz_status st = start_tokenizer(m, &job, &tables);
    if (st != KZ_OK) {
        return st;
    }
    st = load_tts_weights(m, config, n_config);
    return kz_tokenizer_job_finish(&job, st, &m->tokenizer);
}

kz_status kz_model_load_gguf(kz_model *m, const char *path) {
    kz_status st = kz_gguf_open(path, &m->gguf);
    st = st == KZ_OK ? check_header(m->gguf) : st;
    const char *config;
    size_t n_config;
    st = st == KZ_OK ? get_text(m->gguf, KZ_GGUF_KEY_CONFIG, false, &config, &n_config) : st;
    if (st != KZ_OK) {
        return st;
    }
    kz_model_set_kind(m, config != NULL);
    return m->has_tts ? load_tts(m, config, n_config) : load_codec(m);
}
