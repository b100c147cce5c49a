/*
 * quant_dot_neon.c - the NEON quantized matmul built for the dotprod extension
 * (Armv8.2-A FEAT_DotProd, Linux HWCAP_ASIMDDP): arm/quant_neon_body.h with
 * SDOT forming each block's lane sums. Only called through quant_neon.c's
 * entry points, which take it when dispatch.c found the extension, so the rest
 * of the library stays baseline Advanced SIMD. Same bits as the baseline
 * variant (the same exact integer lane sums, the same float sequence).
 */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("dotprod"))), apply_to = function)
#elif defined(__GNUC__)
#pragma GCC target("arch=armv8.2-a+dotprod")
#endif

#define QUANT_NEON_SDOT 1
#define QUANT_NEON_FN kz_matmul_q_neon_sdot
#include "kernels/arm/quant_neon_body.h"

#if defined(__clang__)
#pragma clang attribute pop
#endif
