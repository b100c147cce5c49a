// api_cxx.cpp - compiles the public header as C++ (it must be usable from C++ code).
#include "kztts.h"

int kz_api_cxx_check() {
    kz_model_params mp{};
    kz_model_default_params(&mp);
    kz_request r{};
    kz_request_default(nullptr, &r);
    return mp.isa == KZ_ISA_CAP_AUTO && r.chunk_frames == 0 ? 0 : 1;
}
