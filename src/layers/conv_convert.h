/*
 * conv_convert.h - the load-time conversions of a codec precision (bf16 panels,
 * Winograd forms) as a list of independent tasks run on a temporary pool.
 *
 * A precision switch first lists what it converts (kz_convert_add_bf16 /
 * kz_convert_add_wino, each conv at most once), then kz_convert_run runs the tasks,
 * largest first, on up to the online CPUs (at most 8) and frees the list:
 *
 *   list of (conv -> bf16 panels | conv -> kz_wino) --pool, one task per conv-->
 *   converted convs, source panels released
 *
 * Each task is what the serial call would do (kz_conv_use_bf16, or kz_wino_tile_for +
 * kz_wino_init + kz_conv_drop_panels), so the weights are the same bits whatever the
 * thread count; the tasks write disjoint memory. The first failure in list order is
 * reported; convs converted before it keep their new form (the caller frees the codec).
 *
 * A GGUF written by `kztts quantize --codec-forms P` holds those forms already (names
 * below); a list with `stored` set binds each conv's form from the mapped file instead of
 * computing it, a fraction of the conversion's load time
 * (docs/ARCHITECTURE.md#model-loading):
 *
 *   "<conv weight>.winograd" / ".packed_bf16" --shape and type checked--> kz_wino / wb
 *   mapped in place, source panels released
 */
#ifndef KZ_CONV_CONVERT_H
#define KZ_CONV_CONVERT_H

#include <stddef.h>

#include "io/weights.h"
#include "layers/conv.h"
#include "layers/winograd.h"

typedef struct kz_convert_task kz_convert_task;

typedef struct kz_convert_list {
    kz_convert_task *tasks;
    size_t n, cap;
    kz_status st; /* KZ_STATUS_OUT_OF_MEMORY once an add failed (kz_convert_run reports it) */
    /* Options, set before the first add: */
    const kz_weights *stored; /* non-NULL: every listed conv binds its form from this file's
                                 tensors instead of converting (a missing or misshapen one is
                                 an error), named by the conv's weight + the suffixes below */
    bool keep_panels;         /* keep the fp32 panels beside the new form (`kztts quantize`,
                                 which writes both) */
} kz_convert_list;

/* Stored forms (model/gguf_layout.h): "<weight>.packed_bf16" BF16 [n_panels, taps * k_pairs,
 * KZ_PANEL, 2] (kz_packed_bf16's panels), "<weight>.winograd" F32 [m + r - 1, n_panels, k_in,
 * KZ_PANEL] (kz_wino's U_k one after another). */
#define KZ_CONV_FORM_BF16 ".packed_bf16"
#define KZ_CONV_FORM_WINOGRAD ".winograd"

/* Lists c for bf16 panels (kz_conv_use_bf16). */
void kz_convert_add_bf16(kz_convert_list *l, kz_conv *c);

/* Lists c for its Winograd form w, tiles for frames of frame_rows output rows of at most
 * max_m outputs (kz_wino_tile_for); c's panels are released after. */
void kz_convert_add_wino(kz_convert_list *l, kz_wino *w, kz_conv *c, size_t frame_rows,
                         size_t max_m);

/* Runs and frees the list (also on failure). */
kz_status kz_convert_run(kz_convert_list *l);

#endif
