/*
 * scheduler.c - placeholder until the batching scheduler lands (same session).
 */
#include "kztts.h"
#include "runtime/error.h"

#include <stddef.h>

void kz_scheduler_default_params(kz_scheduler_params *params) {
    *params = (kz_scheduler_params){0};
}

kz_status kz_scheduler_new(const kz_model *model, const kz_scheduler_params *params,
                           kz_scheduler **out) {
    (void)model;
    (void)params;
    *out = NULL;
    return kz_error_set(KZ_STATUS_INTERNAL, "the scheduler is not built yet");
}

void kz_scheduler_free(kz_scheduler *scheduler) {
    (void)scheduler;
}

void kz_scheduler_get_stats(const kz_scheduler *scheduler, kz_scheduler_stats *out) {
    (void)scheduler;
    *out = (kz_scheduler_stats){0};
}
