/*
 * dispatch.c - CPU feature probe and kernel table selection.
 *
 * Data flow: the first call of any function here runs probe() once
 * (pthread_once): on x86, CPUID leaves 1 and 7 say what the CPU implements
 * and XGETBV(0) says which register state the OS saves (XMM+YMM for AVX2, whose
 * level also needs FMA and F16C, plus opmask and both ZMM halves for AVX-512).
 * That gives the best level and a feature string; CPUID leaf 7 subleaf 1 adds
 * AVX512_BF16, which puts the bf16 conv-GEMM (x86/gemm_bf16_avx512.c) into the
 * AVX-512 table (a copy made once by the probe; without it that table, like the AVX2
 * one, holds the FMA one of x86/gemm_bf16_avx2.c). Where CPUID also reports AMX-TILE and
 * AMX-BF16, XCR0 says the OS manages the tile state and the kernel grants this
 * process the tile registers (arch_prctl ARCH_REQ_XCOMP_PERM, Linux), the AMX
 * conv-GEMM (x86/gemm_bf16_amx.c) takes its place, and with AMX-INT8 the q8_0
 * kernel's prompt path (x86/quant_avx512.c) is switched on. On Intel CPUs (CPUID leaf 0) the
 * quantized matvecs prefetch into L2 instead of L1 (kz_quant_set_prefetch, kernels.h).
 * kz_kernels_select(cap) then returns the table for
 * min(cap, best, $KZ_ISA). This file is the only place in the library that
 * reads the environment; an unknown KZ_ISA value is logged and ignored.
 * On aarch64 (KZ_HAVE_ARM) Advanced SIMD is part of the baseline, so the best
 * level is always NEON; the Linux hwcaps fill the feature string, and the
 * dotprod one (HWCAP_ASIMDDP) switches the NEON quantized matmuls to their SDOT
 * variant (arm/quant_dot_neon.c), the i8mm one (HWCAP2_I8MM) their calls of two or
 * more tokens to the SMMLA variant (arm/quant_mmla_neon.c) and, in the NEON table
 * (a copy made once by the probe), quantized prompts to those int8 kernels. Builds
 * with neither KZ_HAVE_X86 nor KZ_HAVE_ARM offer only the scalar table. Levels
 * are ordered as numbers (scalar < avx2 < avx512 < neon) and a cap never raises
 * the level, so on ARM a cap of avx2 or avx512 means scalar and on x86 a cap of
 * neon (KZ_ISA=neon, kz_model_params.isa = KZ_ISA_CAP_NEON) lowers nothing.
 */
#define _DEFAULT_SOURCE /* syscall() */
#include "kernels/kernels.h"

#include "runtime/error.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#ifdef KZ_HAVE_X86
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#endif
#if defined(KZ_HAVE_ARM) && defined(__linux__)
#include <sys/auxv.h>
#endif

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static kz_isa probe_best = KZ_ISA_SCALAR;
static int quant_prefetch = KZ_QPF_L1; /* kz_quant_set_prefetch; atomic loads and stores */
static char probe_features[192];
static kz_gemm_bf16_impl probe_bf16_impls[3]; /* every bf16 gemm the CPU runs, best first */
static size_t probe_n_bf16_impls;
#ifdef KZ_HAVE_X86
static kz_kernels probe_avx512; /* kz_kernels_avx512 plus the bf16 gemm when the CPU has it */
#endif
#ifdef KZ_HAVE_ARM
static kz_kernels probe_neon; /* kz_kernels_neon, prompts on the int8 path with i8mm */
#endif

#ifdef KZ_HAVE_X86
static int probe_intel; /* the CPU is Intel's (kz_kernels_bf16_faster) */
#endif

static void features_add(const char *name) {
    const size_t used = strlen(probe_features);
    snprintf(probe_features + used, sizeof probe_features - used, "%s%s", used ? " " : "", name);
}

#ifdef KZ_HAVE_X86
/* XCR0: which register state the OS saves on a context switch. Only valid
 * when CPUID.1:ECX.OSXSAVE is set. Encoded as bytes for old assemblers. */
static uint64_t xgetbv0(void) {
    uint32_t lo;
    uint32_t hi;
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* Asks Linux for the AMX tile data state (XFEATURE_XTILEDATA = 18), which a
 * process must request before its first tile instruction. */
static int amx_permitted(void) {
#if defined(__linux__) && defined(SYS_arch_prctl)
    const long arch_req_xcomp_perm = 0x1023;
    const long xfeature_xtiledata = 18;
    return syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) == 0;
#else
    return 0;
#endif
}

/* Whether CPUID leaf 0 names the vendor "GenuineIntel" (EBX, EDX, ECX). */
static int cpu_is_intel(void) {
    unsigned a;
    unsigned b;
    unsigned c;
    unsigned d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) {
        return 0;
    }
    const unsigned vendor[3] = {b, d, c};
    return memcmp(vendor, "GenuineIntel", 12) == 0;
}

static void probe(void) {
    unsigned a;
    unsigned b;
    unsigned c;
    unsigned d;
    if (cpu_is_intel()) {
        features_add("intel");
        probe_intel = 1;
        __atomic_store_n(&quant_prefetch, KZ_QPF_L2, __ATOMIC_RELAXED);
    }
    if (!__get_cpuid(1, &a, &b, &c, &d)) {
        features_add("(no cpuid)");
        return;
    }
    const int sse42 = (c >> 20) & 1;
    const int fma = (c >> 12) & 1;
    const int osxsave = (c >> 27) & 1;
    const int avx = (c >> 28) & 1;
    const int f16c = (c >> 29) & 1;
    int avx2 = 0;
    int avx512f = 0;
    int avx512dq = 0;
    int avx512bw = 0;
    int avx512vl = 0;
    int avx512vnni = 0;
    int avx512bf16 = 0;
    int amx_bf16 = 0;
    int amx_tile = 0;
    int amx_int8 = 0;
    if (__get_cpuid_max(0, NULL) >= 7 && __get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        avx2 = (b >> 5) & 1;
        avx512f = (b >> 16) & 1;
        avx512dq = (b >> 17) & 1;
        avx512bw = (b >> 30) & 1;
        avx512vl = (b >> 31) & 1;
        avx512vnni = (c >> 11) & 1;
        amx_bf16 = (d >> 22) & 1;
        amx_tile = (d >> 24) & 1;
        amx_int8 = (d >> 25) & 1;
        const unsigned max_sub = a;
        if (max_sub >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) {
            avx512bf16 = (a >> 5) & 1;
        }
    }
    const uint64_t xcr0 = osxsave ? xgetbv0() : 0;
    const int os_ymm = (xcr0 & 0x6) == 0x6;   // XMM, YMM upper halves
    const int os_zmm = (xcr0 & 0xe6) == 0xe6; // + opmask, ZMM upper halves, ZMM16-31
    const int os_tiles = (xcr0 & 0x60000) == 0x60000; // XTILECFG, XTILEDATA
    const int amx = amx_tile && (amx_bf16 || amx_int8) && os_zmm && os_tiles && amx_permitted();

    const struct {
        int on;
        const char *name;
    } list[] = {
        {sse42, "sse4.2"},       {avx, "avx"},           {avx2, "avx2"},
        {fma, "fma"},            {f16c, "f16c"},         {avx512f, "avx512f"},
        {avx512dq, "avx512dq"},  {avx512bw, "avx512bw"}, {avx512vl, "avx512vl"},
        {avx512vnni, "avx512vnni"}, {avx512bf16, "avx512bf16"}, {amx_bf16, "amx-bf16"}, {amx_int8, "amx-int8"},
        {os_ymm, "os-ymm"},      {os_zmm, "os-zmm"},  {amx, "amx-permitted"},
    };
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
        if (list[i].on) {
            features_add(list[i].name);
        }
    }
    if (avx && avx2 && fma && f16c && os_ymm) {
        probe_best = KZ_ISA_AVX2;
        if (avx512f && avx512dq && avx512bw && avx512vl && os_zmm) {
            probe_best = KZ_ISA_AVX512;
        }
    }
    probe_avx512 = kz_kernels_avx512;
    if (probe_best == KZ_ISA_AVX512 && amx && amx_int8) {
        kz_quant_avx512_enable_amx();
    }
    if (probe_best == KZ_ISA_AVX512 && avx512bf16) {
        if (amx && amx_bf16) {
            probe_bf16_impls[probe_n_bf16_impls++] =
                (kz_gemm_bf16_impl){"amx", kz_gemm_bf16_amx, NULL};
        }
        probe_bf16_impls[probe_n_bf16_impls++] =
            (kz_gemm_bf16_impl){"avx512bf16", kz_gemm_bf16_avx512, NULL};
        probe_avx512.gemm_bf16 = probe_bf16_impls[0].gemm;
        probe_avx512.round_bf16 = kz_round_bf16_avx512;
    } else if (probe_best == KZ_ISA_AVX512) {
        probe_avx512.gemm_bf16 = kz_gemm_bf16_avx2;
        probe_avx512.round_bf16 = kz_round_bf16_avx2;
        probe_avx512.round_bf16_f32 = kz_round_bf16_f32_avx2;
    }
    if (probe_best >= KZ_ISA_AVX2) {
        probe_bf16_impls[probe_n_bf16_impls++] =
            (kz_gemm_bf16_impl){"avx2", kz_gemm_bf16_avx2, kz_round_bf16_f32_avx2};
    }
}
#elif defined(KZ_HAVE_ARM)
static void probe(void) {
    features_add("neon");
    probe_neon = kz_kernels_neon;
    probe_bf16_impls[probe_n_bf16_impls++] =
        (kz_gemm_bf16_impl){"neon", kz_gemm_bf16_neon, kz_round_bf16_f32_neon};
#if defined(__linux__) && defined(HWCAP_ASIMDDP)
    const unsigned long hw = getauxval(AT_HWCAP);
    const struct {
        unsigned long bit;
        const char *name;
    } list[] = {{HWCAP_ASIMDHP, "fp16"}, {HWCAP_ASIMDDP, "dotprod"}, {HWCAP_SVE, "sve"}};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
        if (hw & list[i].bit) {
            features_add(list[i].name);
        }
    }
    if (hw & HWCAP_ASIMDDP) {
        kz_quant_neon_enable_dotprod();
    }
#if defined(HWCAP2_I8MM)
    if (getauxval(AT_HWCAP2) & HWCAP2_I8MM) {
        features_add("i8mm");
        kz_quant_neon_enable_i8mm();
        probe_neon.prefill_gemm_quant = false; // kernels.h: not measured on hardware
    }
#endif
#endif
    probe_best = KZ_ISA_NEON;
}
#else
static void probe(void) {
    features_add("(no SIMD kernels in this build)");
}
#endif

kz_isa kz_cpu_best_isa(void) {
    pthread_once(&probe_once, probe);
    return probe_best;
}

void kz_quant_set_prefetch(kz_quant_prefetch p) {
    pthread_once(&probe_once, probe); // so that a later first probe does not undo it
    __atomic_store_n(&quant_prefetch, (int)p, __ATOMIC_RELAXED);
}

kz_quant_prefetch kz_quant_get_prefetch(void) {
    return (kz_quant_prefetch)__atomic_load_n(&quant_prefetch, __ATOMIC_RELAXED);
}

static _Thread_local int quant_reuse; /* kz_quant_set_thread_reuse */

void kz_quant_set_thread_reuse(int reused) {
    quant_reuse = reused != 0;
}

int kz_quant_get_thread_reuse(void) {
    return quant_reuse;
}

const char *kz_cpu_features(void) {
    pthread_once(&probe_once, probe);
    return probe_features;
}

size_t kz_gemm_bf16_impls(const kz_gemm_bf16_impl **out) {
    pthread_once(&probe_once, probe);
    *out = probe_bf16_impls;
    return probe_n_bf16_impls;
}

bool kz_kernels_bf16_on_amx(const kz_kernels *k) {
#ifdef KZ_HAVE_X86
    return k->gemm_bf16 != NULL && k->gemm_bf16 == kz_gemm_bf16_amx;
#else
    (void)k;
    return false;
#endif
}

bool kz_kernels_bf16_faster(const kz_kernels *k) {
#ifdef KZ_HAVE_X86
    // vdpbf16ps off Intel; on the AVX2 level the FMAs on widened bf16 (the same FMAs as
    // fp32, half the weight bytes), but not in the AVX-512 table of a CPU without
    // AVX512_BF16, whose fp32 GEMM has twice their width.
    const bool dot = k->gemm_bf16 == kz_gemm_bf16_avx512 && !probe_intel;
    const bool fma = k->gemm_bf16 == kz_gemm_bf16_avx2 && k->isa == KZ_ISA_AVX2;
    return kz_kernels_bf16_on_amx(k) || dot || fma;
#else
    (void)k;
    return false;
#endif
}

const kz_kernels *kz_kernels_for(kz_isa isa) {
    const kz_isa best = kz_cpu_best_isa();
    (void)best; // unused when the build has only the scalar table
    switch (isa) {
    case KZ_ISA_SCALAR: return &kz_kernels_scalar;
#ifdef KZ_HAVE_X86
    case KZ_ISA_AVX2: return best >= KZ_ISA_AVX2 ? &kz_kernels_avx2 : NULL;
    case KZ_ISA_AVX512: return best >= KZ_ISA_AVX512 ? &probe_avx512 : NULL;
#endif
#ifdef KZ_HAVE_ARM
    case KZ_ISA_NEON: return best >= KZ_ISA_NEON ? &probe_neon : NULL;
#endif
    default: return NULL;
    }
}

const kz_kernels *kz_kernels_select(kz_isa cap) {
    kz_isa level = kz_cpu_best_isa();
    if (cap != KZ_ISA_AUTO && cap < level) {
        level = cap;
    }
    const char *env = getenv("KZ_ISA");
    if (env && env[0]) {
        kz_isa forced;
        if (kz_isa_parse(env, &forced) != 0) {
            kz_log(KZ_LOG_WARN, "KZ_ISA=%s is not one of scalar, avx2, avx512, neon, auto; ignored",
                   env);
        } else if (forced != KZ_ISA_AUTO && forced < level) {
            kz_log(KZ_LOG_DEBUG, "KZ_ISA=%s lowers the kernel level", env);
            level = forced;
        }
    }
    // Levels are ordered; walk down to one this build has a table for (NEON on x86, say).
    for (int l = (int)level; l > 0; l--) {
        const kz_kernels *k = kz_kernels_for((kz_isa)l);
        if (k) {
            return k;
        }
    }
    return &kz_kernels_scalar;
}

const char *kz_isa_name(kz_isa isa) {
    switch (isa) {
    case KZ_ISA_SCALAR: return "scalar";
    case KZ_ISA_AVX2: return "avx2";
    case KZ_ISA_AVX512: return "avx512";
    case KZ_ISA_NEON: return "neon";
    case KZ_ISA_AUTO: return "auto";
    }
    return "unknown";
}

int kz_isa_parse(const char *s, kz_isa *out) {
    static const kz_isa all[] = {KZ_ISA_SCALAR, KZ_ISA_AVX2, KZ_ISA_AVX512, KZ_ISA_NEON,
                                 KZ_ISA_AUTO};
    if (!s) {
        return -1;
    }
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (strcasecmp(s, kz_isa_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    }
    return -1;
}
