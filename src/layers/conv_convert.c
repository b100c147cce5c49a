/*
 * conv_convert.c - load-time conv conversions on a temporary pool (see conv_convert.h).
 *
 * On the 0.6B codec `winograd-bf16` converts 88 convs and writes 334 MB (the largest,
 * decoder.0's Winograd form, 63 MB). The tasks spread over the cores: on one thread the
 * transforms, the bf16 packing and the first touch of their new memory are half of a
 * model load (docs/ARCHITECTURE.md#model-loading).
 */
#include "layers/conv_convert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"

struct kz_convert_task {
    kz_conv *conv;
    kz_wino *wino; /* NULL: bf16 panels */
    size_t m;      /* Winograd tile */
    const kz_weights *stored; /* the list's: bind the form from here instead of converting */
    bool keep_panels;         /* the list's */
    size_t cost;   /* the conv's panel floats: the largest run first */
    size_t index;  /* position in the list: the first failure is reported */
    kz_status st;
    char error[256];
};

static void add(kz_convert_list *l, kz_convert_task t) {
    if (l->st != KZ_OK) {
        return;
    }
    if (l->n == l->cap) {
        const size_t cap = l->cap ? 2 * l->cap : 64;
        kz_convert_task *grown = realloc(l->tasks, cap * sizeof *grown);
        if (!grown) {
            l->st = kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory listing conversions");
            return;
        }
        l->tasks = grown;
        l->cap = cap;
    }
    t.cost = t.conv->taps * t.conv->k_in * t.conv->n;
    t.index = l->n;
    t.stored = l->stored;
    t.keep_panels = l->keep_panels;
    l->tasks[l->n++] = t;
}

void kz_convert_add_bf16(kz_convert_list *l, kz_conv *c) {
    add(l, (kz_convert_task){.conv = c});
}

void kz_convert_add_wino(kz_convert_list *l, kz_wino *w, kz_conv *c, size_t frame_rows,
                         size_t max_m) {
    const size_t m = kz_wino_tile_for(frame_rows, c->dilation, c->taps, max_m);
    add(l, (kz_convert_task){.conv = c, .wino = w, .m = m});
}

/* The stored tensor "<conv name><suffix>" of the given shape and dtype, 64-byte aligned. */
static kz_status find_form(const kz_convert_task *t, const char *suffix, kz_dtype dtype,
                           int n_dims, const int64_t *shape, const kz_tensor **out) {
    char name[KZ_CONV_NAME_MAX + 32];
    snprintf(name, sizeof name, "%s%s", t->conv->name, suffix);
    kz_status st = kz_weights_get(t->stored, name, n_dims, shape, out);
    if (st == KZ_OK && ((*out)->dtype != dtype || (uintptr_t)(*out)->data % 64 != 0)) {
        st = kz_error_set(KZ_STATUS_BAD_MODEL, "%s: tensor '%s' must be %s and 64-byte aligned",
                          kz_weights_path(t->stored), name,
                          dtype == KZ_DTYPE_F32 ? "F32" : "BF16");
    }
    return st;
}

/* Binds the task's form from the stored tensors (conv_convert.h). */
static kz_status bind_stored(kz_convert_task *t) {
    const kz_conv *c = t->conv;
    const int64_t n_panels = (int64_t)((c->n + KZ_PANEL - 1) / KZ_PANEL);
    const kz_tensor *f;
    if (t->wino) {
        const int64_t shape[4] = {(int64_t)(t->m + c->taps - 1), n_panels, (int64_t)c->k_in,
                                  KZ_PANEL};
        kz_status st = find_form(t, KZ_CONV_FORM_WINOGRAD, KZ_DTYPE_F32, 4, shape, &f);
        return st == KZ_OK ? kz_wino_init_mapped(t->wino, c, t->m, f->data) : st;
    }
    const int64_t shape[4] = {n_panels, (int64_t)(c->taps * ((c->k_in + 1) / 2)), KZ_PANEL, 2};
    kz_status st = find_form(t, KZ_CONV_FORM_BF16, KZ_DTYPE_BF16, 4, shape, &f);
    if (st == KZ_OK) {
        kz_packed_bf16_init_mapped(&t->conv->wb, c->taps, c->k_in, c->n, f->data);
    }
    return st;
}

static kz_status convert(kz_convert_task *t) {
    if (t->wino) {
        return kz_wino_init(t->wino, t->conv, t->m);
    }
    if (!t->conv->wb.data && kz_packed_bf16_init(&t->conv->wb, &t->conv->w) != 0) {
        return kz_error_set(KZ_STATUS_OUT_OF_MEMORY, "out of memory packing bf16 weights");
    }
    return KZ_OK;
}

static void run_task(void *arg, size_t i, int worker) {
    (void)worker;
    kz_convert_task *t = (kz_convert_task *)arg + i;
    t->st = t->stored ? bind_stored(t) : convert(t);
    if (t->st == KZ_OK && !t->keep_panels) {
        kz_conv_drop_panels(t->conv);
    }
    if (t->st != KZ_OK) { // the message is this thread's
        snprintf(t->error, sizeof t->error, "%s", kz_error_get());
    }
}

static int by_cost(const void *a, const void *b) {
    const kz_convert_task *x = a, *y = b;
    return x->cost < y->cost ? 1 : x->cost > y->cost ? -1 : 0;
}

/* The default thread count, but no more threads than tasks. */
static int n_threads(size_t n_tasks) {
    const int n = kz_pool_default_threads();
    return (size_t)n > n_tasks ? (int)n_tasks : n;
}

kz_status kz_convert_run(kz_convert_list *l) {
    kz_status st = l->st;
    if (st == KZ_OK && l->n) {
        kz_pool *pool = NULL;
        if (kz_pool_new(n_threads(l->n), &pool) != KZ_OK) {
            pool = NULL; // no threads: one at a time on this one
        }
        qsort(l->tasks, l->n, sizeof *l->tasks, by_cost);
        if (pool) {
            kz_pool_run(pool, l->n, run_task, l->tasks);
        } else {
            for (size_t i = 0; i < l->n; i++) {
                run_task(l->tasks, i, 0);
            }
        }
        kz_pool_free(pool);
        const kz_convert_task *failed = NULL;
        for (size_t i = 0; i < l->n; i++) {
            const kz_convert_task *t = &l->tasks[i];
            if (t->st != KZ_OK && (!failed || t->index < failed->index)) {
                failed = t;
            }
        }
        st = failed ? kz_error_set(failed->st, "%s", failed->error) : KZ_OK;
    }
    free(l->tasks);
    *l = (kz_convert_list){0};
    return st;
}
