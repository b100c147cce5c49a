/* api_c11.c - compiles the public header alone as strict C11 (-pedantic-errors). */
#include "kztts.h"

int kz_api_c11_check(void);

int kz_api_c11_check(void) {
    kz_model_params mp = {0};
    kz_model_default_params(&mp);
    kz_quantize_params qp = {0};
    kz_quantize_default_params(&qp);
    return mp.isa == KZ_ISA_CAP_AUTO && qp.type == KZ_QUANTIZE_Q8_0 ? 0 : 1;
}
