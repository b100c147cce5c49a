/*
 * prefill.c - a prompt into the talker through the session's prompt cache (see
 * prefill.h). The cache is keyed by the prefix rows themselves, so whatever
 * built them (speaker, language, instruction, a cloned voice's x-vector and transcript)
 * a hit means the same keys and values, and two voices can never share an entry unless
 * their rows are equal bit for bit (then so are the keys and values).
 */
#include "synth/prefill.h"

#include "runtime/error.h"

void kz_prefill_run(kz_session *s, kz_talker_state *ts, kz_prompt *p) {
    const kz_talker *t = &s->model->talker;
    const size_t D = (size_t)t->cfg.hidden_size, n = p->n_rows, np = p->n_prefix;
    const size_t kv_bytes = kz_qwen3_kv_bytes(&t->stack, np);
    const void *kv = kz_prompt_cache_find(&s->prompt_cache, p->rows, np, D, kv_bytes);
    if (kv) {
        kz_qwen3_kv_restore(&t->stack, &ts->seq, kv, np);
        kz_talker_forward(t, ts, &s->lm, p->rows + np * D, n - np, 0);
        s->stats.prompt_tokens += (int64_t)(n - np);
        s->stats.prompt_tokens_cached += (int64_t)np;
        return;
    }
    // The slot copies the prefix rows now: the forward overwrites them.
    void *slot = kz_prompt_cache_slot(&s->prompt_cache, p->rows, np, D, kv_bytes);
    kz_talker_forward(t, ts, &s->lm, p->rows, n, np);
    if (slot) {
        kz_qwen3_kv_save(&t->stack, &ts->seq, np, slot);
    }
    s->stats.prompt_tokens += (int64_t)n;
}

typedef struct prepare_call {
    kz_session *s;
    const kz_prompt_spec *spec;
} prepare_call;

static kz_status prepare_alone(void *arg) {
    kz_session *s = ((prepare_call *)arg)->s;
    const kz_prompt_spec *spec = ((prepare_call *)arg)->spec;
    const kz_model *m = s->model;
    const kz_talker *t = &m->talker;
    const size_t n_rows = kz_prompt_rows(spec, t), D = (size_t)t->cfg.hidden_size;
    kz_talker_state *ts;
    kz_status st = kz_session_talker(s, n_rows, n_rows > 64 ? n_rows : 64, &ts);
    kz_prompt p = {0};
    st = st == KZ_OK ? kz_prompt_build(&p, spec, &m->cfg, t, m->cp.embeddings, ts, &s->lm) : st;
    if (st == KZ_OK) {
        const size_t np = p.n_prefix, kv_bytes = kz_qwen3_kv_bytes(&t->stack, np);
        if (!kz_prompt_cache_find(&s->prompt_cache, p.rows, np, D, kv_bytes)) {
            void *slot = kz_prompt_cache_slot(&s->prompt_cache, p.rows, np, D, kv_bytes);
            if (!slot) {
                st = s->prompt_cache.budget == 0
                         ? kz_error_set(KZ_STATUS_INVALID_ARGUMENT, "kz_session_prepare: the "
                                        "session keeps no prompt cache (prompt_cache_mb -1)")
                         : kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "kz_session_prepare: the prompt "
                                        "prefix (%zu rows) does not fit the prompt cache", np);
            } else {
                kz_qwen3_forward(&t->stack, &ts->seq, &s->lm, p.rows, np, 0);
                kz_qwen3_kv_save(&t->stack, &ts->seq, np, slot);
                s->stats.prompt_tokens += (int64_t)np;
            }
        }
    }
    kz_prompt_free(&p);
    return st;
}

kz_status kz_prefill_prepare(kz_session *s, const kz_prompt_spec *spec) {
    prepare_call c = {.s = s, .spec = spec};
    kz_sched_req r = {.job_cost = kz_prompt_rows(spec, &s->model->talker)};
    return kz_session_lm_call(s, &r, KZ_SCHED_PROMPT, &s->lm, prepare_alone, &c);
}
