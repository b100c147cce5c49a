/* api_c11.c - compiles the public header alone as strict C11 (-pedantic-errors). */
#include "kztts.h"

int kz_api_c11_check(void);

int kz_api_c11_check(void) {
    kz_model_params mp = {0};
    kz_model_default_params(&mp);
    return mp.isa == KZ_ISA_CAP_AUTO ? 0 : 1;
}
