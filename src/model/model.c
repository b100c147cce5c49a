/*
 * model.c - loading a checkpoint directory into a kz_model (see model.h).
 *
 * Layouts accepted:
 *   DIR/config.json (model_type qwen3_tts), DIR/model.safetensors,
 *   DIR/speech_tokenizer/{config.json, model.safetensors}     full checkpoint
 *   DIR/config.json (model_type qwen3_tts_tokenizer_12hz),
 *   DIR/model.safetensors                                      codec only
 *   FILE.gguf (model/gguf_layout.h)                            either, one file:
 *                                                              model_gguf.c
 * Both paths end in kz_model_bind_tts / kz_model_bind_codec, which refuse NaN
 * and Inf weight values (check_finite), build the talker, code predictor and
 * codec decoder from whichever kz_weights they got, and refuse tensors numbered
 * beyond the config's counts (layers, heads, codebooks, blocks); then
 * kz_model_check_tts checks the parts against each other.
 * Each file is validated as it is read; the first failure is returned with a
 * message naming the file. The text tokenizer is built on a thread of its own
 * while the weights are bound (text/tokenizer_job.h).
 */
#include "model/model.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

#include "io/json.h"
#include "io/mapped_file.h"
#include "io/regular_file.h"
#include "model/gguf_layout.h"
#include "runtime/error.h"
#include "synth/voice.h"
#include "text/tokenizer_job.h"

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) {
        snprintf(p, n, "%s/%s", dir, name);
    }
    return p;
}

/* Reads config.json's model_type into type (empty if absent). */
static kz_status peek_model_type(const char *config_path, char *type, size_t n) {
    cJSON *root;
    kz_status st = kz_json_load(config_path, &root);
    if (st != KZ_OK) {
        return st;
    }
    kz_json_ctx j = {.path = config_path, .scope = "", .status = KZ_OK};
    snprintf(type, n, "%s", kz_json_str(&j, root, "model_type", ""));
    cJSON_Delete(root);
    return j.status;
}

static kz_status check_dir(const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        return kz_error_set(KZ_STATUS_IO, "%s: %s", path, strerror(errno));
    }
    if (!S_ISDIR(sb.st_mode)) {
        return kz_error_set(KZ_STATUS_IO, "%s: not a model directory or .gguf file", path);
    }
    return KZ_OK;
}

/* Opens codec config + weights from dir (codec-only or speech_tokenizer/). */
static kz_status load_codec(kz_model *m, const char *dir, const kz_load_opts *o) {
    char *cfg_path = join(dir, "config.json");
    char *st_path = join(dir, "model.safetensors");
    kz_status st = cfg_path && st_path
                       ? KZ_OK
                       : kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory loading %s", dir);
    st = st == KZ_OK ? kz_codec_config_load(cfg_path, &m->codec_cfg) : st;
    st = st == KZ_OK ? kz_weights_open_safetensors(st_path, &m->codec_w) : st;
    st = st == KZ_OK ? kz_model_bind_codec(m, o) : st;
    free(cfg_path);
    free(st_path);
    return st;
}

void kz_model_set_kind(kz_model *m, bool tts) {
    m->has_tts = tts && !m->codec_only;
    m->codec_of_tts = tts && m->codec_only;
}

/* A full checkpoint's codec alone (kz_model_params.codec_only): its speech_tokenizer
 * directory, loaded as a codec-only model's. */
static kz_status load_tts_codec(kz_model *m, const char *dir, const kz_load_opts *o) {
    char *codec_dir = join(dir, "speech_tokenizer");
    kz_status st = codec_dir
                       ? load_codec(m, codec_dir, o)
                       : kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory loading %s", dir);
    free(codec_dir);
    return st;
}

static kz_status load_tts(kz_model *m, const char *dir, const kz_load_opts *o) {
    char *cfg_path = join(dir, "config.json");
    char *st_path = join(dir, "model.safetensors");
    char *codec_dir = join(dir, "speech_tokenizer");
    kz_status st = cfg_path && st_path && codec_dir
                       ? KZ_OK
                       : kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory loading %s", dir);
    char *gen_path = join(dir, "generation_config.json");
    char *vocab_path = join(dir, "vocab.json");
    st = st == KZ_OK && (!gen_path || !vocab_path)
             ? kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory loading %s", dir)
             : st;
    // The tokenizer builds on a thread of its own while the weights are bound; an
    // error of the weights is reported first (text/tokenizer_job.h).
    kz_tokenizer_job job = {0};
    if (st == KZ_OK && !kz_file_absent(vocab_path)) {
        st = kz_tokenizer_job_start_dir(&job, dir);
    }
    st = st == KZ_OK ? kz_tts_config_load(cfg_path, &m->cfg) : st;
    st = st == KZ_OK ? kz_generation_config_load(gen_path, &m->gen) : st;
    st = st == KZ_OK ? kz_weights_open_safetensors(st_path, &m->main_w) : st;
    st = st == KZ_OK ? kz_model_bind_tts(m) : st;
    st = st == KZ_OK ? load_codec(m, codec_dir, o) : st;
    st = kz_tokenizer_job_finish(&job, st, &m->tokenizer);
    free(gen_path);
    free(vocab_path);
    free(cfg_path);
    free(st_path);
    free(codec_dir);
    return st;
}

/* Counts tensors per dtype name into a short text like "BF16 x 411". */
static int describe_file(char *buf, size_t n, const char *label, const kz_weights *f) {
    if (!f) {
        return 0;
    }
    const char *names[8] = {0};
    size_t counts[8] = {0}, bytes = 0;
    int n_names = 0;
    for (size_t i = 0; i < kz_weights_count(f); i++) {
        const kz_tensor *t = kz_weights_at(f, i);
        bytes += t->n_bytes;
        int k = 0;
        while (k < n_names && strcmp(names[k], t->dtype_name) != 0) {
            k++;
        }
        if (k == n_names && n_names < 8) {
            names[n_names++] = t->dtype_name;
        }
        if (k < 8) {
            counts[k]++;
        }
    }
    int w = snprintf(buf, n, "%s: %s: %zu tensors, %.1f MB (", label, kz_weights_path(f),
                     kz_weights_count(f), (double)bytes / 1e6);
    for (int k = 0; k < n_names && w > 0 && (size_t)w < n; k++) {
        w += snprintf(buf + w, n - (size_t)w, "%s%s x %zu", k ? ", " : "", names[k], counts[k]);
    }
    if (w > 0 && (size_t)w < n) {
        w += snprintf(buf + w, n - (size_t)w, ")\n");
    }
    return w;
}

/* "speaker encoder: N tensors, X MB, x-vector D", the codec encoder and the voice
 * fingerprint for a Base model (what `kztts info` shows of the parts that clone voices),
 * else nothing. */
static int describe_speaker_encoder(char *buf, size_t n, const kz_model *m) {
    if (m->skip_voice_encoders && m->has_tts && strcmp(m->cfg.tts_model_type, "base") == 0) {
        return snprintf(buf, n, "voice encoders: not loaded (voices from files only)\n"
                                "voice fingerprint: %016llx\n",
                        (unsigned long long)m->voice_fingerprint);
    }
    if (!m->speaker_encoder) {
        return 0;
    }
    size_t count = 0, bytes = 0;
    for (size_t i = 0; i < kz_weights_count(m->main_w); i++) {
        const kz_tensor *t = kz_weights_at(m->main_w, i);
        if (strncmp(t->name, "speaker_encoder.", 16) == 0) {
            count++;
            bytes += t->n_bytes;
        }
    }
    return snprintf(buf, n,
                    "speaker encoder: %zu tensors, %.1f MB, x-vector %d\n"
                    "codec encoder: %s\nvoice fingerprint: %016llx\n",
                    count, (double)bytes / 1e6, kz_speaker_encoder_dim(m->speaker_encoder),
                    m->codec_encoder ? "present" : "absent (voices of x-vectors only)",
                    (unsigned long long)m->voice_fingerprint);
}

static kz_status build_description(kz_model *m) {
    size_t n = 8192;
    m->description = malloc(n);
    if (!m->description) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory for the model description");
    }
    char *b = m->description;
    int w = snprintf(b, n, "path: %s\n", m->path);
    const kz_gguf_kv *recipe = m->gguf ? kz_gguf_find_kv(m->gguf, KZ_GGUF_KEY_RECIPE) : NULL;
    if (recipe && recipe->strings) {
        w += snprintf(b + w, n - (size_t)w, "file: GGUF, recipe %s\n", recipe->strings[0]);
    }
    if (m->has_tts) {
        w += snprintf(b + w, n - (size_t)w, "type: Qwen3-TTS checkpoint\n");
        kz_tts_config_describe(&m->cfg, b + w, n - (size_t)w);
        w += (int)strlen(b + w);
        w += snprintf(b + w, n - (size_t)w, "\n");
    } else {
        w += snprintf(b + w, n - (size_t)w, "type: codec only (Qwen3-TTS-Tokenizer-12Hz)%s\n",
                      m->codec_of_tts ? ", the codec of a Qwen3-TTS checkpoint (codec_only)" : "");
    }
    kz_codec_config_describe(&m->codec_cfg, b + w, n - (size_t)w);
    w += (int)strlen(b + w);
    w += snprintf(b + w, n - (size_t)w, "\n");
    w += describe_file(b + w, n - (size_t)w, "weights", m->main_w);
    w += describe_speaker_encoder(b + w, n - (size_t)w, m);
    w += describe_file(b + w, n - (size_t)w, "codec weights", m->codec_w);
    const char *precision = kz_precision_name(kz_model_precision_in_effect(m));
    const kz_gguf_kv *forms = m->gguf ? kz_gguf_find_kv(m->gguf, KZ_GGUF_KEY_CODEC_FORMS) : NULL;
    char note[96] = "";
    if (m->codec_forms_mapped) {
        snprintf(note, sizeof note, " (forms stored in the file)");
    } else if (forms && forms->strings) { // say which precision would map them
        snprintf(note, sizeof note, " (the file stores the forms of %.40s)", forms->strings[0]);
    }
    const kz_kernels *k = m->kernels;
    w += snprintf(b + w, n - (size_t)w,
                  "cpu: %s\nkernels: %s\nkernel sub-level: %s%s\ncodec precision: %s%s\n",
                  kz_cpu_features(), kz_isa_name(k->isa), k->name,
                  k->prefetch != KZ_QPF_L1 ? " (prefetch into L2)" : "", precision, note);
    if (m->has_tts) {
        w += snprintf(b + w, n - (size_t)w, "talker kv cache: %s\n",
                      m->talker.stack.kv_f16 ? "f16" : "f32");
    }
    snprintf(b + w, n - (size_t)w, "load: %.0f ms", m->load_ms);
    return KZ_OK;
}

/* A numbered family of tensors, "<prefix><index>..." with index < count (a config value,
 * named by `key` in messages). */
typedef struct indexed_family {
    const char *prefix;
    int64_t count;
    const char *key;
} indexed_family;

/* The index right after prefix in name when one follows (digits, then '.' or the end). */
static bool index_after(const char *name, const char *prefix, int64_t *index) {
    size_t n = strlen(prefix);
    if (strncmp(name, prefix, n) != 0 || name[n] < '0' || name[n] > '9') {
        return false;
    }
    int64_t v = 0;
    const char *p = name + n;
    for (; *p >= '0' && *p <= '9'; p++) {
        v = v < INT32_MAX ? v * 10 + (*p - '0') : v; // saturates: any huge index is beyond
    }
    *index = v;
    return *p == '.' || *p == '\0';
}

/* Refuses a tensor of a numbered family whose index is not below the config's count: the
 * loaders look tensors up by the config's counts, so a file with more layers (heads,
 * codebooks, blocks) than its config would otherwise run with some of them silently
 * ignored. Families fixed by the architecture (a block's units) are not numbered here. */
static kz_status check_indices(const kz_weights *w, const indexed_family *fam, size_t n_fam) {
    for (size_t i = 0; i < kz_weights_count(w); i++) {
        const char *name = kz_weights_at(w, i)->name;
        for (size_t k = 0; k < n_fam; k++) {
            int64_t index;
            if (index_after(name, fam[k].prefix, &index) && index >= fam[k].count) {
                return kz_error_set(KZ_STATUS_BAD_MODEL,
                                    "%s: tensor '%s%s': index %lld is beyond the config's %s "
                                    "(%lld); the file does not match its config",
                                    kz_weights_path(w), kz_weights_prefix(w), name,
                                    (long long)index, fam[k].key, (long long)fam[k].count);
            }
        }
    }
    return KZ_OK;
}

static kz_status check_tts_indices(const kz_model *m) {
    const kz_talker_config *t = &m->cfg.talker;
    const indexed_family fam[] = {
        {"talker.model.layers.", t->num_hidden_layers, "talker_config.num_hidden_layers"},
        {"talker.code_predictor.model.layers.", t->code_predictor.num_hidden_layers,
         "code_predictor_config.num_hidden_layers"},
        {"talker.code_predictor.lm_head.", t->code_predictor.num_code_groups - 1,
         "code_predictor_config.num_code_groups - 1"},
        {"talker.code_predictor.model.codec_embedding.", t->code_predictor.num_code_groups - 1,
         "code_predictor_config.num_code_groups - 1"},
    };
    return check_indices(m->main_w, fam, sizeof fam / sizeof fam[0]);
}

static kz_status check_codec_indices(const kz_model *m) {
    const kz_codec_config *c = &m->codec_cfg;
    const indexed_family fam[] = {
        {"decoder.pre_transformer.layers.", c->num_hidden_layers,
         "decoder_config.num_hidden_layers"},
        // The official decoder always splits 1 semantic codebook + the rest.
        {"decoder.quantizer.rvq_first.vq.layers.", 1, "one semantic codebook"},
        {"decoder.quantizer.rvq_rest.vq.layers.", c->num_quantizers - 1,
         "decoder_config.num_quantizers - 1"},
        {"decoder.upsample.", c->n_upsampling_ratios, "decoder_config.upsampling_ratios count"},
        {"decoder.decoder.", c->n_upsample_rates + 3, "decoder_config.upsample_rates count + 3"},
    };
    kz_status st = check_indices(m->codec_w, fam, sizeof fam / sizeof fam[0]);
    const kz_codec_encoder_config *e = &c->encoder;
    const indexed_family enc[] = {
        {"encoder.encoder.layers.", 3 + (int64_t)e->n_ratios * (e->num_residual_layers + 2),
         "encoder_config.upsampling_ratios and num_residual_layers"},
        {"encoder.encoder_transformer.layers.", e->num_hidden_layers,
         "encoder_config.num_hidden_layers"},
        {"encoder.quantizer.semantic_residual_vector_quantizer.layers.",
         e->num_semantic_quantizers, "encoder_config.num_semantic_quantizers"},
        {"encoder.quantizer.acoustic_residual_vector_quantizer.layers.",
         e->num_quantizers - e->num_semantic_quantizers,
         "encoder_config.num_quantizers - num_semantic_quantizers"},
    };
    if (st == KZ_OK && m->codec_encoder) {
        st = check_indices(m->codec_w, enc, sizeof enc / sizeof enc[0]);
    }
    return st;
}

/* The codec's encoder is loaded where it can run: a Base model (voices) or a codec-only
 * model (`kztts encode`). The other types' codecs carry it too, but nothing of theirs
 * encodes audio, so they spend neither the load's time nor its memory on it; nor does a
 * full checkpoint's codec loaded alone (codec_only), which decodes. */
static bool wants_codec_encoder(const kz_model *m) {
    return (!m->has_tts && !m->codec_of_tts) ||
           (m->has_tts && strcmp(m->cfg.tts_model_type, "base") == 0 && !m->skip_voice_encoders);
}

/* Tensors the load does not scan: components the engine does not run (never read), and
 * the text embedding, whose rows are checked as they are read (talker.c): it is the
 * largest tensor, most of its rows are never read, and a scan would read all of them. */
static bool unscanned_tensor(const kz_model *m, const char *name) {
    return strcmp(name, "talker.model.text_embedding.weight") == 0 ||
           (strncmp(name, "encoder.", 8) == 0 && !wants_codec_encoder(m));
}

/* Refuses a NaN or Inf value (quantized block scale) in the tensors the engine reads.
 * The SIMD activations clamp their inputs, which can turn a NaN into a finite value, so
 * the values are checked at the source: every one, once, before any loader maps its
 * pages in (each tensor's pages are read ahead in one go, and dropped again after its
 * scan, so a load maps in only what it uses). */
static kz_status check_finite(const kz_model *m, const kz_weights *w) {
    uint32_t checked = 0;
    if (m->gguf && kz_gguf_find_kv(m->gguf, KZ_GGUF_KEY_WEIGHTS_CHECKED) &&
        kz_gguf_get_u32(m->gguf, KZ_GGUF_KEY_WEIGHTS_CHECKED, &checked) == KZ_OK && checked == 1) {
        return KZ_OK; // the writer checked every value (gguf_layout.h)
    }
    kz_status st = KZ_OK;
    for (size_t i = 0; i < kz_weights_count(w) && st == KZ_OK; i++) {
        const kz_tensor *t = kz_weights_at(w, i);
        if (!unscanned_tensor(m, t->name)) {
            kz_map_prefetch_range(t->data, t->n_bytes);
            st = kz_tensor_check_finite(t, kz_weights_path(w), kz_weights_prefix(w));
            kz_weights_release(w, t);
        }
    }
    return st;
}

/* The speaker encoder of a Base checkpoint (which must have one); other types leave
 * m->speaker_encoder NULL, as the official model builds none for them. */
static kz_status load_speaker_encoder(kz_model *m) {
    if (strcmp(m->cfg.tts_model_type, "base") != 0 || m->skip_voice_encoders) {
        return KZ_OK;
    }
    kz_status st = kz_speaker_encoder_load(m->main_w, &m->cfg, &m->speaker_encoder);
    if (st == KZ_OK && !m->speaker_encoder) {
        st = kz_error_set(KZ_STATUS_BAD_MODEL,
                          "%s: a Base checkpoint without its speaker encoder (no "
                          "'%sspeaker_encoder.*' tensors)",
                          kz_weights_path(m->main_w), kz_weights_prefix(m->main_w));
    }
    return st;
}

kz_status kz_model_bind_tts(kz_model *m) {
    kz_status st = check_finite(m, m->main_w);
    st = st == KZ_OK ? kz_talker_load(&m->talker, m->main_w, &m->cfg.talker) : st;
    st = st == KZ_OK ? kz_code_predictor_load(&m->cp, m->main_w, &m->cfg.talker) : st;
    st = st == KZ_OK ? load_speaker_encoder(m) : st;
    return st == KZ_OK ? check_tts_indices(m) : st;
}

kz_status kz_model_bind_codec(kz_model *m, const kz_load_opts *o) {
    if (o && o->on_packed) {
        kz_weights_set_on_packed(m->codec_w, o->on_packed, o->on_packed_user);
    }
    kz_status st = check_finite(m, m->codec_w);
    st = st == KZ_OK ? kz_codec_decoder_load(&m->decoder, m->codec_w, &m->codec_cfg) : st;
    if (st == KZ_OK && wants_codec_encoder(m)) {
        st = kz_codec_encoder_load(m->codec_w, &m->codec_cfg, &m->codec_encoder);
    }
    return st == KZ_OK ? check_codec_indices(m) : st;
}

/* The codes the LM side produces must index the codec's tables: codebook 0 is
 * sampled below first_control_id (the rest of the talker vocabulary is
 * suppressed, EOS ends the utterance), codebooks 1.. below the code predictor's
 * vocab_size. */
static kz_status check_codes(const kz_model *m) {
    const kz_talker_config *t = &m->cfg.talker;
    const kz_codec_config *c = &m->codec_cfg;
    if (t->num_code_groups != c->num_quantizers) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: talker_config.num_code_groups %d != the codec's "
                            "decoder_config.num_quantizers %d",
                            m->path, t->num_code_groups, c->num_quantizers);
    }
    if (t->code_predictor.vocab_size > c->codebook_size || t->first_control_id > c->codebook_size) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: the codec's decoder_config.codebook_size %d is smaller than "
                            "code_predictor_config.vocab_size %d or talker_config.vocab_size - "
                            "%d = %d (the codes they produce)",
                            m->path, c->codebook_size, t->code_predictor.vocab_size,
                            KZ_TALKER_CONTROL_IDS, t->first_control_id);
    }
    return KZ_OK;
}

/* Whether the tokenizer encodes text to exactly the ids want[0, n). */
static bool encodes_to(const kz_tokenizer *tok, const char *text, const int32_t *want, size_t n) {
    int32_t *ids = NULL;
    size_t n_ids = 0;
    bool same = kz_tokenizer_encode(tok, text, strlen(text), KZ_SPLIT_QWEN2, &ids, &n_ids) ==
                    KZ_OK &&
                n_ids == n && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0);
    free(ids);
    return same;
}

/* The newline id, and the tokenizer's ids against the text embedding. Token-id
 * input wraps its ids with config ids and this newline id; a tokenizer that
 * spells "<|im_start|>assistant\n" otherwise would make it differ from text
 * input, which the log is told. */
static kz_status check_tokenizer(kz_model *m) {
    const kz_tts_config *c = &m->cfg;
    m->newline_id = -1;
    if (!m->tokenizer) {
        return KZ_OK;
    }
    size_t n_ids = kz_tokenizer_size(m->tokenizer);
    if (n_ids > (size_t)c->talker.text_vocab_size) {
        return kz_error_set(KZ_STATUS_BAD_MODEL,
                            "%s: the tokenizer has ids up to %zu, outside the text embedding "
                            "(talker_config.text_vocab_size %d)",
                            m->path, n_ids - 1, c->talker.text_vocab_size);
    }
    int32_t *ids = NULL;
    size_t n = 0;
    if (kz_tokenizer_encode(m->tokenizer, "\n", 1, KZ_SPLIT_QWEN2, &ids, &n) == KZ_OK && n == 1) {
        m->newline_id = ids[0];
    }
    free(ids);
    int32_t role[3] = {c->im_start_token_id, c->assistant_token_id, m->newline_id};
    if (!encodes_to(m->tokenizer, "<|im_start|>assistant\n", role, 3)) {
        kz_log(KZ_LOG_WARN,
               "%s: the tokenizer does not spell \"<|im_start|>assistant\\n\" as config.json's "
               "im_start_token_id %d, assistant_token_id %d and \"\\n\" (%d): token-id input "
               "gets those, text input the tokenizer's",
               m->path, role[0], role[1], role[2]);
    }
    return KZ_OK;
}

kz_status kz_model_check_tts(kz_model *m) {
    kz_status st = check_codes(m);
    return st ? st : check_tokenizer(m);
}

/* Loads a checkpoint directory (full or codec-only). */
static kz_status load_dir(kz_model *m, const char *path, const kz_load_opts *o) {
    kz_status st = check_dir(path);
    char *cfg_path = st == KZ_OK ? join(path, "config.json") : NULL;
    if (st == KZ_OK && !cfg_path) {
        st = kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory loading %s", path);
    }
    char type[64];
    st = st == KZ_OK ? peek_model_type(cfg_path, type, sizeof type) : st;
    free(cfg_path);
    if (st == KZ_OK) {
        kz_model_set_kind(m, strcmp(type, "qwen3_tts_tokenizer_12hz") != 0);
        st = m->has_tts ? load_tts(m, path, o) : m->codec_of_tts ? load_tts_codec(m, path, o)
                                                                   : load_codec(m, path, o);
    }
    return st;
}

static bool is_gguf_path(const char *path) {
    size_t n = strlen(path);
    struct stat sb;
    return n > 5 && strcmp(path + n - 5, ".gguf") == 0 && stat(path, &sb) == 0 &&
           !S_ISDIR(sb.st_mode);
}

static kz_isa cap_to_isa(kz_isa_cap cap) {
    switch (cap) {
    case KZ_ISA_CAP_SCALAR: return KZ_ISA_SCALAR;
    case KZ_ISA_CAP_AVX2: return KZ_ISA_AVX2;
    case KZ_ISA_CAP_AVX512: return KZ_ISA_AVX512;
    case KZ_ISA_CAP_NEON: return KZ_ISA_NEON;
    case KZ_ISA_CAP_AUTO: break;
    }
    return KZ_ISA_AUTO;
}

/* FAST resolved for this CPU by what the kernels' bf16 GEMM gains (kernels.h
 * kz_bf16_gain): bf16 where it beats even the fp32 Winograd convs (AMX tiles),
 * winograd-bf16 where it beats the fp32 GEMM, winograd elsewhere. */
static kz_precision fast_precision(const kz_kernels *k) {
    switch (k->bf16_gain) {
    case KZ_BF16_BEATS_WINOGRAD: return KZ_PRECISION_BF16;
    case KZ_BF16_FASTER: return KZ_PRECISION_WINOGRAD_BF16;
    case KZ_BF16_NO_GAIN: break;
    }
    return KZ_PRECISION_WINOGRAD;
}

kz_precision kz_model_codec_precision(const kz_model *m, kz_precision p) {
    switch (p == KZ_PRECISION_FAST ? fast_precision(m->kernels) : p) {
    case KZ_PRECISION_BF16: return KZ_PRECISION_BF16;
    case KZ_PRECISION_WINOGRAD_BF16: return KZ_PRECISION_WINOGRAD_BF16;
    case KZ_PRECISION_WINOGRAD: return KZ_PRECISION_WINOGRAD;
    default: return KZ_PRECISION_EXACT;
    }
}

kz_precision kz_model_precision_in_effect(const kz_model *m) {
    const kz_codec_decoder *d = &m->decoder;
    if (d->winograd) {
        return d->bf16 ? KZ_PRECISION_WINOGRAD_BF16 : KZ_PRECISION_WINOGRAD;
    }
    return d->bf16 ? KZ_PRECISION_BF16 : KZ_PRECISION_EXACT;
}

const char *kz_precision_name(kz_precision p) {
    switch (p) {
    case KZ_PRECISION_DEFAULT: return "default";
    case KZ_PRECISION_EXACT: return "f32";
    case KZ_PRECISION_BF16: return "bf16";
    case KZ_PRECISION_WINOGRAD: return "winograd";
    case KZ_PRECISION_FAST: return "fast";
    case KZ_PRECISION_WINOGRAD_BF16: return "winograd-bf16";
    }
    return "?";
}

kz_status kz_model_use_codec_precision(kz_model *m, kz_precision p, const kz_codec_forms *forms) {
    switch (p) {
    case KZ_PRECISION_BF16: return kz_codec_decoder_use_bf16(&m->decoder, forms);
    case KZ_PRECISION_WINOGRAD_BF16: return kz_codec_decoder_use_winograd_bf16(&m->decoder, forms);
    case KZ_PRECISION_WINOGRAD: return kz_codec_decoder_use_winograd(&m->decoder, forms);
    default: return KZ_OK;
    }
}

/* *out: the GGUF's stored codec forms when they are those of precision p (gguf_layout.h
 * kztts.codec.forms), else NULL (the load converts). A forms key that is not a string is
 * a malformed file. */
/* *forms: the precision name under the GGUF's codec forms key, NULL when m has none. */
static kz_status stored_forms_name(const kz_model *m, const char **forms) {
    *forms = NULL;
    if (!m->gguf || !kz_gguf_find_kv(m->gguf, KZ_GGUF_KEY_CODEC_FORMS)) {
        return KZ_OK;
    }
    return kz_gguf_get_str(m->gguf, KZ_GGUF_KEY_CODEC_FORMS, forms);
}

static kz_status stored_forms(const kz_model *m, kz_precision p, const kz_weights **out) {
    *out = NULL;
    const char *forms;
    kz_status st = stored_forms_name(m, &forms);
    if (st == KZ_OK && forms && p != KZ_PRECISION_EXACT &&
        strcmp(forms, kz_precision_name(p)) == 0) {
        *out = m->codec_w;
    }
    return st;
}

/* KZ_PRECISION_DEFAULT: the precision whose forms the GGUF stores (the user chose it
 * when writing the file, as a GGUF's weight types are chosen), else EXACT. Forms this
 * build does not know are ignored with a warning: the file's fp32 panels still run. */
static kz_status default_precision(const kz_model *m, kz_precision *out) {
    static const kz_precision known[] = {KZ_PRECISION_BF16, KZ_PRECISION_WINOGRAD,
                                         KZ_PRECISION_WINOGRAD_BF16};
    *out = KZ_PRECISION_EXACT;
    const char *forms;
    kz_status st = stored_forms_name(m, &forms);
    if (st != KZ_OK || !forms) {
        return st;
    }
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (strcmp(forms, kz_precision_name(known[i])) == 0) {
            *out = known[i];
            return KZ_OK;
        }
    }
    kz_log(KZ_LOG_WARN, "%s: codec forms '%.40s' unknown to this version: the codec runs in f32",
           m->path, forms);
    return KZ_OK;
}

/* Switches the loaded codec to precision p (FAST resolved for this CPU), from the GGUF's
 * stored forms when it has p's, then maps in the pages of the forms in use (every chunk
 * reads all of them): only those, so that the fp32 panels a conversion or a stored form
 * replaces never become resident and add to the peak RSS
 * (docs/ARCHITECTURE.md#model-loading). */
static kz_status use_codec_precision(kz_model *m, kz_precision p) {
    kz_status st = p == KZ_PRECISION_DEFAULT ? default_precision(m, &p) : KZ_OK;
    p = kz_model_codec_precision(m, p);
    kz_codec_forms forms = {0};
    st = st == KZ_OK ? stored_forms(m, p, &forms.stored) : st;
    st = st == KZ_OK ? kz_model_use_codec_precision(m, p, &forms) : st;
    if (st == KZ_OK) {
        kz_codec_decoder_populate(&m->decoder);
        m->codec_forms_mapped = forms.stored != NULL;
    }
    return st;
}

kz_status kz_model_open_with(const char *path, const kz_model_params *params,
                             const kz_load_opts *opts, kz_model **out) {
    *out = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    kz_model *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(path))) {
        kz_model_close(m);
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory loading %s", path);
    }
    m->kernels = kz_kernels_select(cap_to_isa(params->isa));
    m->skip_voice_encoders = params->skip_voice_encoders;
    m->codec_only = params->codec_only;
    kz_status st = is_gguf_path(path) ? kz_model_load_gguf(m, path) : load_dir(m, path, opts);
    st = st == KZ_OK && m->has_tts ? kz_model_check_tts(m) : st;
    if (st == KZ_OK) { // which encoders a cloned voice must come from (synth/voice.h)
        m->voice_fingerprint = kz_model_voice_fingerprint(m);
    }
    st = st == KZ_OK ? use_codec_precision(m, params->codec_precision) : st;
    m->talker.stack.kv_f16 = params->kv_cache == KZ_KV_CACHE_F16;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    m->load_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6;
    st = st == KZ_OK ? build_description(m) : st;
    if (st != KZ_OK) {
        kz_model_close(m);
        return st;
    }
    *out = m;
    return KZ_OK;
}

kz_status kz_model_open(const char *path, const kz_model_params *params, kz_model **out) {
    return kz_model_open_with(path, params, NULL, out);
}

void kz_model_close(kz_model *m) {
    if (!m) {
        return;
    }
    kz_codec_decoder_free(&m->decoder);
    kz_codec_encoder_free(m->codec_encoder);
    m->codec_encoder = NULL;
    kz_talker_free(&m->talker);
    kz_code_predictor_free(&m->cp);
    kz_speaker_encoder_free(m->speaker_encoder);
    kz_tokenizer_free(m->tokenizer);
    kz_weights_free(m->main_w);
    kz_weights_free(m->codec_w);
    kz_gguf_close(m->gguf);
    free(m->description);
    free(m->path);
    free(m);
}
