/*
 * test_conv_convert.c - the codec's load-time conversions run as a task list on a pool
 * (layers/conv_convert.c) against the same conversions one at a time.
 *
 * Data flow: seeded random convs of the codec's kinds (7-tap at dilations 1, 3 and 9,
 * 2-tap transposed, 1x1 linears; odd k_in, n not a multiple of 16), built twice from the
 * same weights ->
 *   serial  kz_conv_use_bf16, or kz_wino_tile_for + kz_wino_init + kz_conv_drop_panels;
 *   listed  kz_convert_add_bf16 / kz_convert_add_wino, then one kz_convert_run.
 * Checks: the bf16 panels and every Winograd point's panels are the same bits, with the
 * same tile, point count and group; the listed convs' fp32 panels are released like the
 * serial ones. A list holding a conv whose bf16 packing must fail (a panel count whose
 * size overflows) reports KZ_STATUS_OUT_OF_MEMORY with the packer's message, and the
 * other tasks of the list still complete. An empty list runs and returns KZ_OK.
 */
#include "layers/conv_convert.h"
#include "runtime/error.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x2545f4914f6cdd1dull;

typedef struct spec {
    size_t k_in, n, taps, dilation, frame_rows;
    int wino; /* 0: bf16 panels */
} spec;

static const spec SPECS[] = {
    {96, 96, 7, 1, 32, 1},   {96, 96, 7, 3, 32, 1}, {96, 96, 7, 9, 32, 1},  {37, 19, 7, 1, 12, 1},
    {192, 40, 2, 1, 8, 1},   {64, 64, 1, 1, 0, 0},  {33, 50, 1, 1, 0, 0},   {48, 48, 7, 1, 0, 0},
    {150, 130, 7, 3, 40, 1}, {24, 72, 2, 1, 16, 1}, {128, 256, 1, 1, 0, 0}, {17, 17, 7, 9, 64, 1},
};
#define N_SPECS (sizeof SPECS / sizeof SPECS[0])

/* A conv of spec s with weights from the seed (fp32 panels, owned). */
static void make_conv(kz_conv *c, const spec *s, uint64_t seed) {
    uint64_t r = seed;
    const size_t n_w = s->taps * s->k_in * s->n;
    float *w = malloc(n_w * sizeof *w);
    for (size_t i = 0; i < n_w; i++) {
        w[i] = ((float)test_rng_below(&r, 2000001) / 1e6f - 1.0f) / sqrtf((float)s->k_in);
    }
    memset(c, 0, sizeof *c);
    CHECK(kz_packed_init_rows(&c->w, s->taps, s->k_in, s->n, w) == 0);
    free(w);
    c->k_in = s->k_in;
    c->n = s->n;
    c->taps = s->taps;
    c->dilation = s->dilation;
    c->history = (s->taps - 1) * s->dilation;
}

static int same_panels(const kz_conv *a, const kz_conv *b) {
    if (a->wb.data || b->wb.data) {
        const size_t n = a->wb.n_panels * a->wb.taps * a->wb.k_pairs * KZ_PANEL * 2;
        return a->wb.data && b->wb.data && a->wb.n_panels == b->wb.n_panels &&
               a->wb.k_pairs == b->wb.k_pairs && a->wb.taps == b->wb.taps &&
               memcmp(a->wb.data, b->wb.data, n * sizeof(uint16_t)) == 0;
    }
    const size_t n = a->w.n_panels * a->w.taps * a->w.k_in * KZ_PANEL;
    return a->w.data && b->w.data && a->w.n_panels == b->w.n_panels &&
           memcmp(a->w.data, b->w.data, n * sizeof(float)) == 0;
}

static int same_wino(const kz_wino *a, const kz_wino *b) {
    int ok = a->m == b->m && a->n_pts == b->n_pts && a->group == b->group && a->n_pts > 0;
    for (size_t k = 0; ok && k < a->n_pts; k++) {
        ok = same_panels(&a->u[k], &b->u[k]);
    }
    return ok;
}

static void test_same_bits(void) {
    kz_conv serial[N_SPECS], listed[N_SPECS];
    kz_wino ws[N_SPECS], wl[N_SPECS];
    kz_convert_list l = {0};
    for (size_t i = 0; i < N_SPECS; i++) {
        const spec *s = &SPECS[i];
        const uint64_t seed = test_rng_below(&rng, 1u << 30) + 1;
        make_conv(&serial[i], s, seed);
        make_conv(&listed[i], s, seed);
        memset(&ws[i], 0, sizeof ws[i]);
        memset(&wl[i], 0, sizeof wl[i]);
        if (s->wino) {
            const size_t m = kz_wino_tile_for(s->frame_rows, s->dilation, s->taps, 10);
            CHECK(kz_wino_init(&ws[i], &serial[i], m) == KZ_OK);
            kz_conv_drop_panels(&serial[i]);
            kz_convert_add_wino(&l, &wl[i], &listed[i], s->frame_rows, 10);
        } else {
            CHECK(kz_conv_use_bf16(&serial[i]) == KZ_OK);
            kz_convert_add_bf16(&l, &listed[i]);
        }
    }
    CHECK(kz_convert_run(&l) == KZ_OK);
    CHECK(l.tasks == NULL && l.n == 0);
    for (size_t i = 0; i < N_SPECS; i++) {
        const spec *s = &SPECS[i];
        if (s->wino) {
            CHECK_MSG(same_wino(&ws[i], &wl[i]), "spec %zu: Winograd weights differ", i);
        } else {
            CHECK_MSG(same_panels(&serial[i], &listed[i]), "spec %zu: bf16 panels differ", i);
        }
        CHECK_MSG(listed[i].w.data == NULL && serial[i].w.data == NULL,
                  "spec %zu: the fp32 panels were not released", i);
        kz_wino_free(&ws[i]);
        kz_wino_free(&wl[i]);
        kz_conv_free(&serial[i]);
        kz_conv_free(&listed[i]);
    }
}

static void test_failure(void) {
    kz_conv good[3], bad;
    kz_convert_list l = {0};
    for (size_t i = 0; i < 3; i++) {
        make_conv(&good[i], &SPECS[5], 7 + i);
        kz_convert_add_bf16(&l, &good[i]);
    }
    float one_panel[KZ_PANEL] = {0};
    memset(&bad, 0, sizeof bad);
    bad.w = (kz_packed){
        .data = one_panel, .k_in = 4, .taps = 1, .n = 16, .n_panels = SIZE_MAX / 8, .mapped = true};
    kz_convert_add_bf16(&l, &bad);
    const kz_status st = kz_convert_run(&l);
    CHECK(st == KZ_STATUS_OUT_OF_MEMORY);
    CHECK_MSG(strstr(kz_error_get(), "bf16") != NULL, "message: %s", kz_error_get());
    for (size_t i = 0; i < 3; i++) {
        CHECK_MSG(good[i].wb.data != NULL, "task %zu did not run after a failure", i);
        kz_conv_free(&good[i]);
    }
    CHECK(bad.wb.data == NULL);
    kz_convert_list empty = {0};
    CHECK(kz_convert_run(&empty) == KZ_OK);
}

int main(void) {
    test_same_bits();
    test_failure();
    return test_main_result("test_conv_convert");
}
