/*
 * dispatch.c - CPU feature probe and kernel table selection.
 *
 * Data flow: the first call of any function here runs probe() once
 * (pthread_once), which fills the probe result, the only state of the kernels
 * and never changed afterwards: the best level, a feature string, and the table
 * of every sub-level the CPU runs (kernels.h kz_isa), in order.
 *   x86: CPUID leaves 1 and 7 say what the CPU implements and XGETBV(0) which
 *     register state the OS saves (XMM+YMM for AVX2, whose level also needs FMA and
 *     F16C, plus opmask and both ZMM halves for AVX-512); leaf 7 subleaf 1 adds
 *     AVX512_BF16. Where CPUID reports AMX-TILE, AMX-INT8 and AMX-BF16, XCR0 must say
 *     that the OS manages the tile state and the kernel must grant this process the
 *     tile registers (arch_prctl ARCH_REQ_XCOMP_PERM, Linux). The sub-levels are
 *     kz_kernels_avx2, and kz_kernels_avx512 with, in turn, the VNNI quantized matmuls
 *     (avx512-vnni), the vdpbf16ps bf16 conv-GEMM (avx512-bf16) and the AMX ones
 *     (avx512-amx). On Intel CPUs (CPUID leaf 0) every x86 table gets the KZ_QPF_L2
 *     prefetch policy, on AMD Zen 4 (family 25 with AVX-512, leaf 1) KZ_QPF_L2_FAR, and
 *     on Intel the avx512-bf16 one no gain for its bf16 GEMM (vdpbf16ps is slower than
 *     the fp32 FMAs there: docs/ARCHITECTURE.md#kernel-selection).
 *   aarch64 (KZ_HAVE_ARM): Advanced SIMD is baseline, so the best level is always
 *     NEON; the Linux hwcaps fill the feature string and add the sub-levels
 *     neon-dotprod (HWCAP_ASIMDDP) and neon-i8mm (HWCAP2_I8MM) to kz_kernels_neon.
 *   other builds: only the scalar table.
 * kz_kernels_select(cap) then returns the highest sub-level of min(cap, best,
 * $KZ_ISA). This file is the only place in the library that reads the environment;
 * an unknown KZ_ISA value is logged and ignored. Levels are ordered as numbers
 * (scalar < avx2 < avx512 < neon) and a cap never raises the level, so on ARM a cap
 * of avx2 or avx512 means scalar and on x86 a cap of neon (KZ_ISA=neon,
 * kz_model_params.isa = KZ_ISA_CAP_NEON) lowers nothing.
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

/* Every sub-level this build has, in order (kernels.h kz_isa). */
static const char *const sublevels[] = {
    "scalar",
#ifdef KZ_HAVE_X86
    "avx2",   "avx512", "avx512-vnni", "avx512-bf16", "avx512-amx",
#endif
#ifdef KZ_HAVE_ARM
    "neon",   "neon-dotprod", "neon-i8mm",
#endif
};
#define N_SUBLEVELS (sizeof sublevels / sizeof sublevels[0])

/* The probe result: written once by probe(), read-only afterwards. */
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static kz_isa probe_best = KZ_ISA_SCALAR;
static char probe_features[192];
static kz_kernels probe_tables[N_SUBLEVELS]; /* the SIMD sub-levels the CPU runs, in order */
static size_t probe_n_tables;

static void features_add(const char *name) {
    const size_t used = strlen(probe_features);
    snprintf(probe_features + used, sizeof probe_features - used, "%s%s", used ? " " : "", name);
}

#if defined(KZ_HAVE_X86) || defined(KZ_HAVE_ARM)
/* Appends sub-level k (its name one of sublevels[]) under prefetch policy p. */
static void table_add(kz_kernels k, kz_quant_prefetch p) {
    KZ_ASSERT(probe_n_tables < N_SUBLEVELS);
    kz_kernels_set_prefetch(&k, p);
    probe_tables[probe_n_tables++] = k;
}
#endif

#ifdef KZ_HAVE_X86
/* What the x86 probe found, as far as the tables depend on it. */
typedef struct x86_cpu {
    int avx2;            /* the avx2 level: AVX2, FMA, F16C, YMM state saved */
    int avx512;          /* the avx512 level: F/DQ/BW/VL, ZMM and opmask state saved */
    int vnni, bf16, amx; /* AVX512_VNNI, AVX512_BF16, AMX (INT8 + BF16, tiles granted) */
    int intel;           /* CPUID vendor GenuineIntel */
    int zen4;            /* AuthenticAMD, family 25 (Zen 3 and Zen 4), with AVX-512 (Zen 4) */
} x86_cpu;

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

/* Whether CPUID leaf 0 names the vendor `name` ("GenuineIntel": EBX, EDX, ECX). */
static int cpu_vendor_is(const char *name) {
    unsigned a;
    unsigned b;
    unsigned c;
    unsigned d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) {
        return 0;
    }
    const unsigned vendor[3] = {b, d, c};
    return memcmp(vendor, name, 12) == 0;
}

/* The family of CPUID leaf 1's EAX: the base family, plus the extended one when the base
 * is 15 (AMD's Zen 3 and Zen 4 are 25, Zen 5 26). */
static unsigned cpu_family(unsigned eax) {
    const unsigned base = (eax >> 8) & 0xf;
    return base == 0xf ? base + ((eax >> 20) & 0xff) : base;
}

/* CPUID and XCR0 into *cpu and the feature string. */
static void x86_detect(x86_cpu *cpu) {
    unsigned a;
    unsigned b;
    unsigned c;
    unsigned d;
    cpu->intel = cpu_vendor_is("GenuineIntel");
    if (cpu->intel) {
        features_add("intel");
    }
    if (!__get_cpuid(1, &a, &b, &c, &d)) {
        features_add("(no cpuid)");
        return;
    }
    const unsigned family_eax = a;
    const int sse42 = (c >> 20) & 1;
    const int fma = (c >> 12) & 1;
    const int osxsave = (c >> 27) & 1;
    const int avx = (c >> 28) & 1;
    const int f16c = (c >> 29) & 1;
    int avx2 = 0, avx512f = 0, avx512dq = 0, avx512bw = 0, avx512vl = 0;
    int avx512vnni = 0, avx512bf16 = 0, amx_bf16 = 0, amx_tile = 0, amx_int8 = 0;
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
    const int amx = amx_tile && amx_bf16 && amx_int8 && os_zmm && os_tiles && amx_permitted();

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
    cpu->avx2 = avx && avx2 && fma && f16c && os_ymm;
    cpu->avx512 = cpu->avx2 && avx512f && avx512dq && avx512bw && avx512vl && os_zmm;
    cpu->zen4 = cpu_vendor_is("AuthenticAMD") && cpu_family(family_eax) == 25 && avx512f;
    if (cpu->zen4) {
        features_add("zen4");
    }
    cpu->vnni = avx512vnni;
    cpu->bf16 = avx512bf16;
    cpu->amx = amx;
}

/* The x86 sub-levels cpu runs (kernels.h kz_isa), each on top of the one before. */
static void x86_tables(const x86_cpu *cpu) {
    const kz_quant_prefetch pf = cpu->intel ? KZ_QPF_L2 : cpu->zen4 ? KZ_QPF_L2_FAR : KZ_QPF_L1;
    if (!cpu->avx2) {
        return;
    }
    probe_best = KZ_ISA_AVX2;
    table_add(kz_kernels_avx2, pf);
    if (!cpu->avx512) {
        return;
    }
    probe_best = KZ_ISA_AVX512;
    kz_kernels k = kz_kernels_avx512;
    table_add(k, pf);
    if (!cpu->vnni) {
        return;
    }
    k.name = "avx512-vnni";
    k.quant = &kz_quant_avx512_vnni;
    table_add(k, pf);
    if (!cpu->bf16) {
        return;
    }
    k.name = "avx512-bf16";
    k.gemm_bf16 = kz_gemm_bf16_avx512;
    k.gemm_bf16_name = "avx512bf16";
    k.round_bf16 = kz_round_bf16_avx512;
    k.round_bf16_f32 = NULL; // vdpbf16ps reads the bf16 rows
    k.bf16_gain = cpu->intel ? KZ_BF16_NO_GAIN : KZ_BF16_FASTER;
    table_add(k, pf);
    if (!cpu->amx) {
        return;
    }
    k.name = "avx512-amx";
    k.quant = &kz_quant_avx512_amx;
    k.prompt_tile_tokens = 0; // q8_0 prompts take the AMX walk (kernels.h)
    k.gemm_bf16 = kz_gemm_bf16_amx;
    k.gemm_bf16_name = "amx";
    k.bf16_gain = KZ_BF16_BEATS_WINOGRAD;
    table_add(k, pf);
}

static void probe(void) {
    x86_cpu cpu = {0};
    x86_detect(&cpu);
    x86_tables(&cpu);
}
#elif defined(KZ_HAVE_ARM)
static void probe(void) {
    features_add("neon");
    probe_best = KZ_ISA_NEON;
    kz_kernels k = kz_kernels_neon;
    table_add(k, KZ_QPF_L1);
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
    int i8mm = 0;
#if defined(HWCAP2_I8MM)
    i8mm = (getauxval(AT_HWCAP2) & HWCAP2_I8MM) != 0;
    if (i8mm) {
        features_add("i8mm");
    }
#endif
    if (!(hw & HWCAP_ASIMDDP)) {
        return;
    }
    k.name = "neon-dotprod";
    k.quant = &kz_quant_neon_dotprod;
    table_add(k, KZ_QPF_L1);
    if (!i8mm) {
        return;
    }
    k.name = "neon-i8mm";
    k.quant = &kz_quant_neon_i8mm;
    k.prefill_gemm_quant = false; // SMMLA needs fewer instructions than widening (kernels.h)
    table_add(k, KZ_QPF_L1);
#endif
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

const char *kz_cpu_features(void) {
    pthread_once(&probe_once, probe);
    return probe_features;
}

size_t kz_kernels_sublevels(const char *const **names) {
    *names = sublevels;
    return N_SUBLEVELS;
}

const kz_kernels *kz_kernels_named(const char *name) {
    pthread_once(&probe_once, probe);
    if (name && strcmp(name, kz_kernels_scalar.name) == 0) {
        return &kz_kernels_scalar;
    }
    for (size_t i = 0; name && i < probe_n_tables; i++) {
        if (strcmp(name, probe_tables[i].name) == 0) {
            return &probe_tables[i];
        }
    }
    return NULL;
}

const kz_kernels *kz_kernels_for(kz_isa isa) {
    pthread_once(&probe_once, probe);
    if (isa == KZ_ISA_SCALAR) {
        return &kz_kernels_scalar;
    }
    const kz_kernels *k = NULL; // the last, highest sub-level of the level
    for (size_t i = 0; i < probe_n_tables; i++) {
        k = probe_tables[i].isa == isa ? &probe_tables[i] : k;
    }
    return k;
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
