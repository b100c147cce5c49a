/*
 * test_batch_step.c - batched talker steps and code prediction (continuous batching)
 * against the same requests stepped alone, bit for bit.
 *
 * argv[1..]: tiny checkpoint directories (make_fixture.py). Each is run as stored (F32 /
 * BF16 weights) and quantized to Q8_0 and Q4_0 GGUFs (kz_quantize, in a temporary
 * folder), at every kernel level cap this CPU runs (scalar, avx2, avx512 / neon), and with
 * the talker's KV cache in binary16 at the scalar and the best level, on a pool of 2
 * threads. Per model, level and KV cache:
 *   - 8 requests, each with its own talker state, prefilled alone with a different number
 *     of prompt rows (1, 4, ..., 22: staggered positions; prompts of 4 or more rows take the
 *     prefill's GEMM path; the steps alone of the longer ones attend over more positions
 *     than the attention runs inline for, so they run it on the pool, and one request
 *     crosses over), twice: one copy steps alone (kz_talker_forward, one row), the
 *     other in batches (kz_talker_step_batch) of B = 1, 2, 3 and 8 requests, one B per
 *     frame, the requests in another order each frame and a late joiner (request 7 sits
 *     out the first frames); hidden state and logits must match bit for bit every frame;
 *   - each frame then runs the code predictor alone (kz_code_predictor_run) and batched
 *     (kz_code_predictor_run_batch) at the same B, greedy for even requests and seeded
 *     sampling (an RNG per request) for odd ones: the 15 sub-steps' logits and codes must
 *     match bit for bit.
 * Every batch call is checked against the alone run of each of its requests, so a
 * difference names the model, level, frame, B and request.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kztts.h"
#include "model/model.h"
#include "runtime/threadpool.h"
#include "test.h"

#define N_REQ 8
#define N_FRAMES 6
#define MAX_POS 64
#define PROMPT_ROWS(r) (3 * (r) + 1) /* request r's prompt rows */
#define MAX_PROMPT PROMPT_ROWS(N_REQ - 1)

/* The picker's state of one request: greedy, or seeded sampling by its own RNG. */
typedef struct picker {
    int greedy;
    uint64_t rng;
} picker;

/* argmax of the logits, or argmax of logits + Gumbel noise from the request's RNG (a
 * sample of softmax(logits)). */
static int32_t pick_code(void *user, float *logits, size_t n) {
    picker *p = user;
    size_t best = 0;
    double best_v = -1e300;
    for (size_t i = 0; i < n; i++) {
        double v = logits[i];
        if (!p->greedy) {
            const double u = ((double)(test_rng_u64(&p->rng) >> 11) + 0.5) * 0x1p-53;
            v -= log(-log(u));
        }
        if (v > best_v) {
            best_v = v;
            best = i;
        }
    }
    return (int32_t)best;
}

/* Everything one request holds, alone (a) and batched (b). */
typedef struct request {
    kz_talker_state ta, tb;
    kz_code_predictor_state ca, cb;
    picker pa, pb;
    float *logits_a, *logits_b; /* [n_steps, vocab] */
    int32_t codes_a[KZ_CP_MAX_GROUPS], codes_b[KZ_CP_MAX_GROUPS];
} request;

static int same_floats(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof(float)) == 0;
}

/* Prefills request r's two talker states alike with PROMPT_ROWS(r) codec-embedding rows. */
static void prefill(const kz_talker *t, request *q, kz_exec *e, size_t r, float *rows) {
    const size_t D = (size_t)t->cfg.hidden_size, n = PROMPT_ROWS(r);
    float *copy = rows + n * D;
    for (size_t i = 0; i < n; i++) {
        kz_talker_codec_vector(t, (int32_t)((r * 37 + i * 11) % (size_t)t->cfg.vocab_size),
                               rows + i * D);
    }
    memcpy(copy, rows, n * D * sizeof(float));
    kz_talker_forward(t, &q->ta, e, rows, n, 0);
    kz_talker_forward(t, &q->tb, e, copy, n, 0);
}

/* The requests of frame f in the order they are batched: a rotation per frame, request 7
 * only from frame 2 on (a late joiner). */
static size_t frame_order(int f, size_t *order) {
    size_t n = 0;
    for (size_t i = 0; i < N_REQ; i++) {
        const size_t r = (i + (size_t)f * 3) % N_REQ;
        if (r != N_REQ - 1 || f >= 2) {
            order[n++] = r;
        }
    }
    return n;
}

/* One frame for every active request: talker step and code prediction, alone and in
 * batches of B. */
static void run_frame(const kz_model *m, request *req, kz_exec *e, kz_talker_batch *tb,
                      kz_code_predictor_batch *cb, int f, size_t B, const char *what) {
    const kz_talker *t = &m->talker;
    const kz_code_predictor *p = &m->cp;
    const size_t D = (size_t)t->cfg.hidden_size, V = (size_t)t->cfg.vocab_size;
    const size_t VC = (size_t)p->cfg.vocab_size, steps = (size_t)p->n_steps;
    size_t order[N_REQ];
    const size_t n = frame_order(f, order);
    float xa[N_REQ * 4096 / 8], xb[N_REQ * 4096 / 8];
    if (D > 4096 / 8) {
        CHECK_MSG(0, "%s: hidden size %zu too large for the test's buffers", what, D);
        return;
    }
    for (size_t i = 0; i < n; i++) { // the input row: the embedding of the last code 0
        const int32_t id = (int32_t)((order[i] * 7 + (size_t)f * 13) % V);
        kz_talker_codec_vector(t, id, xa + order[i] * D);
    }
    for (size_t g = 0; g < n; g += B) {
        const size_t nb = n - g < B ? n - g : B;
        kz_talker_state *ts[N_REQ];
        kz_code_predictor_state *cs[N_REQ];
        kz_pick_fn picks[N_REQ];
        void *users[N_REQ];
        float *louts[N_REQ];
        float h[N_REQ * 4096 / 8], e0[N_REQ * 4096 / 8];
        int32_t codes[N_REQ * KZ_CP_MAX_GROUPS];
        for (size_t i = 0; i < nb; i++) {
            request *q = &req[order[g + i]];
            float row[4096 / 8];
            memcpy(row, xa + order[g + i] * D, D * sizeof(float));
            memcpy(xb + i * D, row, D * sizeof(float));
            kz_talker_forward(t, &q->ta, e, row, 1, 0);
            ts[i] = &q->tb;
            cs[i] = &q->cb;
            picks[i] = pick_code;
            users[i] = &q->pb;
            louts[i] = q->logits_b;
        }
        kz_talker_step_batch(t, ts, nb, tb, e, xb);
        for (size_t i = 0; i < nb; i++) {
            const size_t r = order[g + i];
            request *q = &req[r];
            CHECK_MSG(same_floats(q->ta.hidden, q->tb.hidden, D) &&
                          same_floats(q->ta.logits, q->tb.logits, V),
                      "%s frame %d B %zu request %zu: talker step differs", what, f, B, r);
            // code prediction: the talker's hidden state and a code-0 embedding
            memcpy(h + i * D, q->ta.hidden, D * sizeof(float));
            kz_talker_codec_vector(t, (int32_t)((r + (size_t)f) % V), e0 + i * D);
            kz_code_predictor_run(p, &q->ca, e, h + i * D, e0 + i * D, pick_code, &q->pa,
                                  q->codes_a, q->logits_a);
        }
        kz_code_predictor_run_batch(p, cs, nb, cb, e, h, e0, picks, users, codes, louts);
        for (size_t i = 0; i < nb; i++) {
            const size_t r = order[g + i];
            request *q = &req[r];
            CHECK_MSG(memcmp(codes + i * steps, q->codes_a, steps * sizeof(int32_t)) == 0 &&
                          same_floats(q->logits_a, q->logits_b, steps * VC),
                      "%s frame %d B %zu request %zu: code prediction differs", what, f, B, r);
        }
    }
}

static void run_model(const char *path, kz_isa_cap cap, kz_kv_cache kv, const char *what) {
    kz_model_params mp;
    kz_model_default_params(&mp);
    mp.isa = cap;
    mp.kv_cache = kv;
    kz_model *m = NULL;
    if (kz_model_load(path, &mp, &m) != KZ_OK) {
        CHECK_MSG(0, "%s: cannot load %s: %s", what, path, kz_last_error());
        return;
    }
    kz_pool *pool = NULL;
    CHECK(kz_pool_new(2, &pool) == KZ_OK);
    kz_exec e = {.k = m->kernels, .pool = pool};
    const kz_talker *t = &m->talker;
    const size_t D = (size_t)t->cfg.hidden_size;
    const size_t cp_logits = (size_t)m->cp.n_steps * (size_t)m->cp.cfg.vocab_size;
    request *req = calloc(N_REQ, sizeof *req);
    float *rows = malloc(2 * MAX_PROMPT * D * sizeof(float));
    kz_talker_batch tb;
    kz_code_predictor_batch cb;
    int ok = kz_talker_batch_init(&tb, t, N_REQ) == KZ_OK &&
             kz_code_predictor_batch_init(&cb, &m->cp, N_REQ) == KZ_OK;
    for (size_t r = 0; ok && r < N_REQ; r++) {
        request *q = &req[r];
        ok = kz_talker_state_init(&q->ta, t, MAX_POS, MAX_PROMPT) == KZ_OK &&
             kz_talker_state_init(&q->tb, t, MAX_POS, MAX_PROMPT) == KZ_OK &&
             kz_code_predictor_state_init(&q->ca, &m->cp) == KZ_OK &&
             kz_code_predictor_state_init(&q->cb, &m->cp) == KZ_OK;
        q->pa = q->pb = (picker){.greedy = r % 2 == 0, .rng = 0x5eed0000ull + r};
        q->logits_a = malloc(cp_logits * sizeof(float));
        q->logits_b = malloc(cp_logits * sizeof(float));
        ok = ok && q->logits_a && q->logits_b;
        if (ok) {
            prefill(t, q, &e, r, rows);
        }
    }
    CHECK_MSG(ok, "%s: out of memory", what);
    static const size_t batch_sizes[N_FRAMES] = {1, 2, 3, 8, 3, 8};
    for (int f = 0; ok && f < N_FRAMES; f++) {
        run_frame(m, req, &e, &tb, &cb, f, batch_sizes[f], what);
    }
    for (size_t r = 0; r < N_REQ; r++) {
        kz_talker_state_free(&req[r].ta);
        kz_talker_state_free(&req[r].tb);
        kz_code_predictor_state_free(&req[r].ca);
        kz_code_predictor_state_free(&req[r].cb);
        free(req[r].logits_a);
        free(req[r].logits_b);
    }
    kz_talker_batch_free(&tb);
    kz_code_predictor_batch_free(&cb);
    free(req);
    free(rows);
    kz_pool_free(pool);
    printf("%s: %s\n", what, m->kernels->name);
    kz_model_free(m);
}

/* Every level cap for one model file. */
static void run_levels(const char *path, const char *label) {
    static const struct {
        kz_isa_cap cap;
        kz_kv_cache kv;
        const char *name;
    } caps[] = {{KZ_ISA_CAP_SCALAR, KZ_KV_CACHE_F32, "scalar"},
                {KZ_ISA_CAP_AVX2, KZ_KV_CACHE_F32, "avx2"},
                {KZ_ISA_CAP_AUTO, KZ_KV_CACHE_F32, "best"},
                {KZ_ISA_CAP_SCALAR, KZ_KV_CACHE_F16, "scalar, f16 kv cache"},
                {KZ_ISA_CAP_AUTO, KZ_KV_CACHE_F16, "best, f16 kv cache"}};
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        char what[700];
        snprintf(what, sizeof what, "%s [%s]", label, caps[i].name);
        run_model(path, caps[i].cap, caps[i].kv, what);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_batch_step TINY_DIR...\n");
        return 2;
    }
    char dir[] = "/tmp/kz_batch_step_XXXXXX";
    const int have_dir = mkdtemp(dir) != NULL;
    CHECK(have_dir);
    for (int a = 1; a < argc; a++) {
        run_levels(argv[a], argv[a]);
        static const struct {
            kz_quantize_type type;
            const char *name;
        } types[] = {{KZ_QUANTIZE_Q8_0, "q8_0"}, {KZ_QUANTIZE_Q4_0, "q4_0"}};
        for (size_t i = 0; have_dir && i < 2; i++) {
            char out[600];
            snprintf(out, sizeof out, "%s/model_%d_%s.gguf", dir, a, types[i].name);
            kz_quantize_params qp;
            kz_quantize_default_params(&qp);
            qp.type = types[i].type;
            const kz_status st = kz_quantize(argv[a], out, &qp);
            CHECK_MSG(st == KZ_OK, "quantize %s to %s: %s", argv[a], types[i].name,
                      kz_last_error());
            if (st == KZ_OK) {
                run_levels(out, out);
                unlink(out);
            }
        }
    }
    if (have_dir) {
        rmdir(dir);
    }
    return test_main_result("test_batch_step");
}
