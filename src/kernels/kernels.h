/*
 * kernels.h - the compute kernel table and the contract of every kernel.
 *
 * Data flow: model code never calls an ISA-specific function. At model load
 * kz_kernels_select() (dispatch.c) probes the CPU once and returns a table of
 * function pointers for the best sub-level allowed by the cap; model and layer
 * code call through that table, and nothing else selects a kernel: every variant
 * (an extension's integer path, a bf16 GEMM, a prefetch policy) is an entry of a
 * table the probe filled once. Each kernel family has a scalar definition in
 * kernels/ref/ (the specification of the result, and the scalar table, which has
 * every kernel) and optional AVX2 / AVX-512 variants in kernels/x86/ compiled with
 * their own target flags, or NEON variants in kernels/arm/ on aarch64.
 *
 * Layout conventions: activations are row-major [rows, cols] with the time
 * axis as rows (time-major, [T, C]); weights are packed once at load into the
 * panel layout described at kz_packed. Shapes in comments use [rows, cols].
 *
 * Determinism contract (what makes chunked decoding and any thread count give
 * bit-identical output): every output element of every kernel is computed by
 * one call in an order that depends only on the element's own inputs, never
 * on which rows or column panels were handed to the call, nor on how many rows
 * the call covers. Ragged tails use the same instruction sequence as the main
 * body (masked or zero-padded lanes), so a row gives the same bits whether it
 * is the first of a tile or the last.
 *
 * Headers seen by ISA files hold only declarations and static inline helpers.
 */
#ifndef KZ_KERNELS_H
#define KZ_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/*
 * Instruction-set levels, ordered: a cap at level L allows every level <= L.
 *
 * Each level has one or more sub-levels (kz_kernels.name), in order, each adding
 * to the one before it what one CPU extension brings. The probe (dispatch.c) makes
 * the table of every sub-level the CPU runs, which is the highest it has all the
 * extensions of and every one below; a level (kz_model_params.isa, KZ_ISA) means its
 * highest such sub-level:
 *   scalar        the definitions, every kernel (the bf16 conv-GEMM included)
 *   avx2          AVX2 + FMA + F16C
 *   avx512        AVX-512 F/BW/DQ/VL; quantized matmuls by maddubs, the bf16
 *                 conv-GEMM on FMAs (avx2's)
 *   avx512-vnni   + AVX512_VNNI: the quantized matmuls' integer sums by vpdpbusd
 *   avx512-bf16   + AVX512_BF16: the bf16 conv-GEMM by vdpbf16ps
 *   avx512-amx    + AMX-TILE, AMX-INT8 and AMX-BF16 with the tiles granted by the OS:
 *                 q8_0 prompts and the bf16 conv-GEMM on tiles
 *   neon          aarch64 Advanced SIMD
 *   neon-dotprod  + FEAT_DotProd: the quantized matmuls' block sums by SDOT
 *   neon-i8mm     + FEAT_I8MM: their calls of two or more tokens by SMMLA, and
 *                 quantized prompts on them (prefill_gemm_quant false)
 * The sub-levels of one level give the same bits in every kernel but gemm_bf16, whose
 * vdpbf16ps and AMX forms keep to its definition within a tolerance. Which prefetch
 * policy the x86 quantized matmuls follow is a field of the table (prefetch), not a
 * sub-level: it changes no result.
 */
typedef enum kz_isa {
    KZ_ISA_SCALAR = 0, /* plain C, the definition */
    KZ_ISA_AVX2 = 1,   /* x86-64 AVX2 + FMA */
    KZ_ISA_AVX512 = 2, /* x86-64 AVX-512 F/BW/DQ/VL */
    KZ_ISA_NEON = 3,   /* aarch64 Advanced SIMD (baseline on every aarch64 CPU) */
    KZ_ISA_AUTO = 99,  /* best level the CPU supports */
} kz_isa;

/* Most source rows of kz_kernels.mix_rows. */
#define KZ_MIX_MAX_SRC 17

/* Width of one packed weight panel in output columns. Fixed for every ISA so
 * packed weights do not depend on the kernel level. */
#define KZ_PANEL 16

/* Loops in plain C (the codec's weight packing and Winograd transforms at load, its
 * one-column conv per call) compiled for several x86 levels, one picked when the library
 * loads (target_clones): the same operations in the same order (no contraction,
 * -ffp-contract=off; fmaf is one instruction where FMA is in the level, a libm call
 * otherwise), so the same bits on every CPU. x86-64-v3, not "avx2": an "avx2" clone
 * lacks FMA. Elsewhere one plain version. */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define KZ_CLONES __attribute__((target_clones("avx512f", "arch=x86-64-v3", "default")))
#else
#define KZ_CLONES
#endif

/*
 * Packed weight matrix for kz_kernels.gemm. Logically a stack of `taps`
 * matrices W_j of shape [k_in, n] (input channel i, output column o). Stored
 * as n_panels = ceil(n / KZ_PANEL) panels; panel p is a contiguous block of
 * [taps * k_in, KZ_PANEL] floats, row (j * k_in + i) holding
 * W_j[i, p*KZ_PANEL .. p*KZ_PANEL + 15], zero beyond column n.
 * data is 64-byte aligned and owned by whoever packed it (kz_packed_free), or,
 * when `mapped`, points into a read-only mapped model file that stored the
 * panels already (kz_packed_init_mapped) and is never written or freed.
 */
typedef struct kz_packed {
    float *data;     /* [n_panels, taps * k_in, KZ_PANEL], owned */
    size_t k_in;     /* input channels per tap */
    size_t taps;     /* number of taps (1 for a linear layer or 1x1 conv) */
    size_t n;        /* output columns actually used */
    size_t n_panels; /* ceil(n / KZ_PANEL) */
    bool mapped;     /* data is borrowed from a mapping: read-only, not freed */
} kz_packed;

/* What gemm does with the existing contents of y. */
typedef enum kz_gemm_mode {
    KZ_GEMM_STORE = 0,      /* y = acc (+ bias) */
    KZ_GEMM_ACCUMULATE = 1, /* y = y + (acc (+ bias)) : fused residual add */
} kz_gemm_mode;

/*
 * Arguments of the conv-GEMM. For output row t in [0, n_rows) and column o:
 *
 *   acc = 0
 *   for j in 0..taps-1, for i in 0..k_in-1 (this order):
 *       acc = fma(x[(t + j * tap_stride) * ldx + i], W_j[i, o], acc)
 *   r = acc;  if bias: r = r + bias[o];  if ACCUMULATE: r = y[t*ldy + o] + r
 *   y[t * ldy + o] = r
 *
 * (The scalar definition uses fmaf so that every level computes the same
 * rounding sequence: the AVX2 / AVX-512 variants run this exact per-element
 * sequence in vector lanes, one lane per output column, and
 * tests/unit/test_kernels.c checks them bit for bit against the scalar
 * definition, including ragged tails and arbitrary splits of rows x panels.)
 *
 * One routine covers every convolution of the codec: a linear layer or 1x1
 * conv (taps 1), a causal dilated conv (x points at the first history row,
 * taps k, tap_stride = dilation) and a transposed conv with kernel 2s and
 * stride s (taps 2 over rows t-1 and t, n = s * c_out so that output row t
 * holds the s output samples of input step t, time-major).
 * y and x must not overlap. Columns >= n of y are not written.
 */
typedef struct kz_gemm_args {
    float *y;                /* [n_rows, ldy] output */
    size_t ldy;              /* >= n */
    const float *x;          /* rows [(n_rows - 1) + (taps - 1) * tap_stride + 1, ldx] */
    size_t ldx;              /* >= k_in */
    size_t tap_stride;       /* rows between consecutive taps (conv dilation) */
    const kz_packed *w;      /* packed weights */
    const float *bias;       /* [n] or NULL */
    kz_gemm_mode mode;       /* store or accumulate */
    size_t n_rows;           /* output rows (time steps) */
} kz_gemm_args;

/*
 * The conv-GEMM in bf16 (the codec's fast precision). Weights and activations are
 * rounded to bfloat16 and multiplied in pairs, accumulating in fp32, as
 * AVX512_BF16's vdpbf16ps does. bf16(v) is kz_bf16_round below: round to nearest
 * even, an fp32 denormal becomes a zero of its sign, a NaN stays a (quiet) NaN.
 *
 * Packed weights kz_packed_bf16: each tap's k_in input channels are taken in
 * k_pairs = ceil(k_in / 2) pairs (the odd channel of an odd k_in pairs with a
 * zero). Panel p is a contiguous block of [taps * k_pairs, KZ_PANEL, 2] bf16
 * (one 64-byte row per pair), row (j * k_pairs + q), column c, element e holding
 * bf16(W_j[2q + e, p*KZ_PANEL + c]), zero for 2q + e >= k_in or a column >= n.
 *
 * Activations: x rows in bf16, [rows, ldx] uint16 with ldx even and >= 2 k_pairs,
 * 4-byte aligned, column k_in (when k_in is odd) zero. kz_kernels.round_bf16
 * writes them from fp32 rows.
 *
 * For output row t and column o (x2 = x[(t + j * tap_stride) * ldx + 2q + e],
 * w2 = the weight pair above, products of two bf16 are exact in fp32):
 *
 *   acc = 0
 *   for j in 0..taps-1, for q in 0..k_pairs-1 (this order):
 *       acc = acc + x1 * w1     (one fp32 rounding, RNE)
 *       acc = acc + x0 * w0
 *   r = acc;  if bias: r = r + bias[o];  if ACCUMULATE: r = y[t*ldy + o] + r
 *   y[t * ldy + o] = r
 *
 * This is the Intel SDM's pseudo-code of VDPBF16PS (odd element first). The
 * scalar definition (ref/gemm_bf16_ref.c) computes exactly this; hardware may
 * flush denormal sums to zero and may round the pair differently, so the SIMD
 * variant is held to it within a tolerance (tests/unit/test_gemm_bf16.c), while
 * its own results obey the determinism contract above bit for bit.
 */
typedef struct kz_packed_bf16 {
    uint16_t *data;  /* [n_panels, taps * k_pairs, KZ_PANEL, 2], owned, 64-byte aligned */
    size_t k_in;     /* input channels per tap */
    size_t k_pairs;  /* ceil(k_in / 2) */
    size_t taps;     /* number of taps */
    size_t n;        /* output columns actually used */
    size_t n_panels; /* ceil(n / KZ_PANEL) */
    bool mapped;     /* data is borrowed from a mapped model file (kz_packed_bf16_init_mapped):
                        read-only, not freed */
} kz_packed_bf16;

typedef struct kz_gemm_bf16_args {
    float *y;                 /* [n_rows, ldy] output */
    size_t ldy;               /* >= n */
    const uint16_t *x;        /* bf16 rows [(n_rows - 1) + (taps - 1) * tap_stride + 1, ldx] */
    const float *xf;          /* or NULL: the same rows' values as fp32 (kz_bf16_to_f32 of
                                 each element, the same ldx), written by round_bf16_f32 for a
                                 level whose gemm_bf16 reads them (x may then be NULL) */
    size_t ldx;               /* even, >= 2 * k_pairs */
    size_t tap_stride;        /* rows between consecutive taps */
    const kz_packed_bf16 *w;  /* packed bf16 weights */
    const float *bias;        /* [n] or NULL */
    kz_gemm_mode mode;        /* store or accumulate */
    size_t n_rows;            /* output rows */
} kz_gemm_bf16_args;

/* fp32 -> bf16 bits as vcvtneps2bf16: RNE, denormals to signed zero, NaN quieted. */
static inline uint16_t kz_bf16_round(float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((u >> 16) | 0x40u);
    }
    if ((u & 0x7f800000u) == 0) {
        return (uint16_t)((u >> 16) & 0x8000u);
    }
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* bf16 bits -> fp32 (exact). */
static inline float kz_bf16_to_f32(uint16_t b) {
    const uint32_t u = (uint32_t)b << 16;
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* A language-model projection over weights used in place (kz_kernels.matmul_bf16 and
 * the others below): y[t * ldy + o] for t < n_tok, o in [o0, o1). */
typedef void (*kz_matmul_fn)(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                             size_t n_in, size_t n_tok, size_t o0, size_t o1);

/* How the x86 quantized matmuls (x86/quant_avx2.c, x86/quant_avx512.c) prefetch their
 * weight stream, per 64 bytes (x86/quant_prefetch.h): KZ_QPF_L1, one prefetch into L1 at
 * each kernel's own distance; KZ_QPF_L2, one into L2 further ahead and one from there into
 * L1, at other distances for weights read again while the last-level cache holds them
 * (kz_kernels.matmul_q8_0_reused); KZ_QPF_L2_FAR, the same with the streamed weights' L2
 * prefetch further ahead. The probe picks KZ_QPF_L2 on Intel CPUs and KZ_QPF_L2_FAR on AMD
 * Zen 4, where L1 prefetches alone leave the streamed weights short of requests in flight,
 * and KZ_QPF_L1 elsewhere, where L2 hints are slower (docs/ARCHITECTURE.md#kernel-selection);
 * the batched products' sets of four or more tokens on AVX-512 VNNI prefetch the KZ_QPF_L2
 * way under any of them (x86/quant_avx512.c set_prefetch). Results are the same bits under
 * each; other kernels ignore it. */
typedef enum kz_quant_prefetch {
    KZ_QPF_L1 = 0,
    KZ_QPF_L2 = 1,
    KZ_QPF_L2_FAR = 2, /* KZ_QPF_L2 with the streamed weights' L2 prefetch further ahead */
    KZ_QPF_COUNT = 3
} kz_quant_prefetch;

/* The quantized matmuls of one sub-level under every prefetch policy, [policy][reused]
 * (reused 1: weights read again while the last-level cache holds them), and its batched
 * matrix-vector products (kz_kernels.matvec_q8_0) the same way. Kernels that do not
 * prefetch fill every slot with the same function. */
typedef struct kz_quant_fns {
    kz_matmul_fn q8_0[KZ_QPF_COUNT][2];
    kz_matmul_fn q4_0[KZ_QPF_COUNT][2];
    kz_matmul_fn q8_0_batch[KZ_QPF_COUNT][2];
    kz_matmul_fn q4_0_batch[KZ_QPF_COUNT][2];
} kz_quant_fns;

/* Tokens whose activations a batched matrix-vector product (kz_kernels.matvec_*) holds at
 * once: a call of more streams its weights once per KZ_MATVEC_PASS tokens. The
 * activations of a pass take up to ~165 KB of the calling thread's stack. */
#define KZ_MATVEC_PASS 16

/* Quantized prompts of up to this many tokens that a level's matmul walks row tile by row
 * tile (kz_kernels.prompt_tile_tokens): their activations, quantized once per call, take up
 * to ~250 KB of the calling thread's stack. */
#define KZ_PROMPT_TILE_TOKENS 24

/* Weight bytes of such a row tile: every token set goes over it while it is in L2, and the
 * next tile is fetched into L2 while the later sets run. */
#define KZ_PROMPT_TILE_BYTES 65536

/* Weight bytes a batched matrix-vector product keeps in L1 while every token set of a
 * pass goes over them: row tiles of about this size (at least one row). */
#define KZ_MATVEC_TILE_BYTES 16384

/* Rows of a row tile of row_bytes bytes per row (kernels' batched walks). */
static inline size_t kz_matvec_tile_rows(size_t row_bytes) {
    const size_t r = row_bytes ? KZ_MATVEC_TILE_BYTES / row_bytes : 1;
    return r ? r : 1;
}

/* What a table's bf16 conv-GEMM gains over its fp32 one on this CPU, as measured
 * (model.c resolves the codec's FAST precision by it). */
typedef enum kz_bf16_gain {
    KZ_BF16_NO_GAIN = 0,        /* not faster, or not measured: FAST is winograd */
    KZ_BF16_FASTER = 1,         /* faster: FAST is winograd-bf16 */
    KZ_BF16_BEATS_WINOGRAD = 2, /* the direct bf16 convolutions beat even the fp32
                                   Winograd ones (AMX tiles): FAST is bf16 */
} kz_bf16_gain;

/* Elementwise and row kernels. Rows are contiguous, [n_rows, n_ch]. */
typedef struct kz_kernels {
    kz_isa isa;       /* level this table implements */
    const char *name; /* its sub-level: "scalar", "avx2", "avx512-vnni", ... (kz_isa) */

    /* Rows [t0, t1) and column panels [p0, p1) of the conv-GEMM above. Any
     * split of rows and panels over calls gives identical bits. */
    void (*gemm)(const kz_gemm_args *a, size_t t0, size_t t1, size_t p0, size_t p1);
    /* Output rows of gemm's register tile: a call's rows in multiples of it run in full
     * tiles (the rest in a narrower, slower one); callers that choose their row counts
     * (the Winograd groups, layers/winograd.c) take multiples of it. */
    size_t gemm_mr;

    /* Rows [t0, t1) and panels [p0, p1) of the bf16 conv-GEMM above, and the
     * rounding of fp32 rows to its bf16 input: y[r * ldy + c] = bf16(x[r * ldx + c])
     * for c < n_cols, 0 for n_cols <= c < ldy. Every table has both (the scalar one
     * the definitions), so a codec precision runs the same at any level. */
    void (*gemm_bf16)(const kz_gemm_bf16_args *a, size_t t0, size_t t1, size_t p0, size_t p1);
    void (*round_bf16)(uint16_t *y, size_t ldy, const float *x, size_t ldx, size_t n_rows,
                       size_t n_cols);
    /* The same rounding with the bf16 values kept as fp32 (y = kz_bf16_to_f32(bf16(x)),
     * 0 in the padding): the input kz_gemm_bf16_args.xf, which this level's gemm_bf16
     * reads without widening x per tile (AVX2, NEON: FMAs on widened bf16). NULL where
     * gemm_bf16 reads the bf16 rows only. */
    void (*round_bf16_f32)(float *y, size_t ldy, const float *x, size_t ldx, size_t n_rows,
                           size_t n_cols);
    /* Which gemm_bf16 this is: "ref", "avx2" (FMAs on widened bf16, also in the avx512
     * and avx512-vnni sub-levels), "avx512bf16", "amx" or "neon"; the benchmarks' peak
     * probes go by it. */
    const char *gemm_bf16_name;
    kz_bf16_gain bf16_gain; /* what gemm_bf16 gains over gemm on this CPU */

    /* SnakeBeta, in place allowed (y == x):
     *   y[t, c] = x[t, c] + inv_beta[c] * sin(alpha[c] * x[t, c])^2
     * alpha = exp(alpha_log), inv_beta = 1 / (exp(beta_log) + 1e-9), both
     * precomputed per channel by the caller. x, y: [n_rows, n_ch]. Accuracy:
     * sin within 2 ulp-ish of libm for |arg| < 1e4 (tested vs scalar). */
    void (*snake_beta)(float *y, const float *x, size_t n_rows, size_t n_ch, const float *alpha,
                       const float *inv_beta);

    /* RMSNorm per row: y = (x * (1 / sqrt(mean(x^2) + eps))) * w.
     * Sum of squares accumulated in float, sequential order is not required
     * but must be fixed per n_ch. y == x allowed. x, y: [n_rows, n_ch]. */
    void (*rms_norm)(float *y, const float *x, const float *w, size_t n_rows, size_t n_ch,
                     float eps);

    /* LayerNorm per row: mean, biased variance; y = (x - mu) / sqrt(var + eps) * w + b.
     * y == x allowed. */
    void (*layer_norm)(float *y, const float *x, const float *w, const float *b, size_t n_rows,
                       size_t n_ch, float eps);

    /* Exact GELU, in place allowed: y = 0.5 * x * (1 + erf(x / sqrt(2))). [n] */
    void (*gelu)(float *y, const float *x, size_t n);

    /* ELU (alpha 1), in place allowed: y = x > 0 ? x : exp(x) - 1, the form torch's CPU
     * kernel evaluates (exp minus one, not expm1). [n] */
    void (*elu)(float *y, const float *x, size_t n);

    /* SwiGLU, in place into gate allowed: y[i] = silu(gate[i]) * up[i], silu(v) = v / (1 + exp(-v)). [n] */
    void (*swiglu)(float *y, const float *gate, const float *up, size_t n);

    /* Attention scores: out[r] = dot(q, rows + r * stride) * scale for r < n_rows, each
     * dot over [n] in a summation order fixed by n alone (not by r, n_rows or alignment). */
    void (*dot_rows)(float *out, const float *q, const float *rows, size_t stride,
                     size_t n_rows, size_t n, float scale);

    /* Attention values: for r = 0 .. n_rows - 1 in turn, y[i] = y[i] + w[r] * rows[r * stride
     * + i] (mul then add), [n]: bit-identical on every level. */
    void (*axpy_rows)(float *y, const float *w, const float *rows, size_t stride,
                      size_t n_rows, size_t n);

    /* dot_rows and axpy_rows over rows of IEEE binary16 (uint16 bits; the talker's f16 KV
     * cache): on each level, bit for bit what dot_rows and axpy_rows give on the rows widened
     * to float (kz_fp16_to_f32, exact). */
    void (*dot_rows_f16)(float *out, const float *q, const uint16_t *rows, size_t stride,
                         size_t n_rows, size_t n, float scale);
    void (*axpy_rows_f16)(float *y, const float *w, const uint16_t *rows, size_t stride,
                          size_t n_rows, size_t n);

    /* A small matrix times rows (the Winograd transforms, layers/winograd.c): for
     * r < n_dst and c < n,
     *   acc = 0; for s in 0..n_src-1 (this order): acc = fma(mat[r * n_src + s], src[s][c], acc)
     *   dst[r][c] = acc
     * with n_src <= KZ_MIX_MAX_SRC; dst rows must not overlap src rows. Bit-identical on
     * every level (one fused multiply-add per term, in order). */
    void (*mix_rows)(float *const *dst, const float *const *src, const float *mat, size_t n_dst,
                     size_t n_src, size_t n);

    /* Language-model projections with weights used in place (not packed):
     *   y[t * ldy + o] = sum_i W[o, i] * x[t * ldx + i]
     * for t < n_tok and o in [o0, o1); W row-major [rows, n_in] as nn.Linear
     * stores it, bf16 or f16 (uint16 bits) or f32. Each (t, o) is one dot product in an
     * order fixed by n_in and n_tok (a variant may block tokens differently for the
     * prefill), so splitting rows across threads never changes bits. */
    kz_matmul_fn matmul_bf16;
    /* The same with IEEE binary16 weights (uint16 bits, widened as kz_fp16_to_f32 for
     * every value but a NaN, which stays a NaN): each level runs its matmul_bf16
     * sequence on the widened weights. */
    kz_matmul_fn matmul_f16;
    kz_matmul_fn matmul_f32;

    /* The same projections with block-quantized weights (kernels/quant.h): w is
     * rows of n_in / 32 packed q8_0 (34 bytes) or q4_0 (18 bytes) blocks, any
     * alignment, n_in % 32 == 0 required. Definition (ref/quant_ref.c):
     *   y[t * ldy + o] = sum_b d_b * sum_i q_i * x[t * ldx + 32 b + i]
     * SIMD levels quantize x to int8 per block of 32 on the fly and differ
     * from it within the bound stated in tests/unit/test_quant.c; every
     * (t, o) is fixed by n_in alone, whatever the split of rows or tokens. */
    kz_matmul_fn matmul_q8_0;
    kz_matmul_fn matmul_q4_0;
    /* The same for weights read again while the last-level cache still holds them (the
     * code predictor's, kz_exec.weights_reused): other prefetch distances, the same bits. */
    kz_matmul_fn matmul_q8_0_reused;
    kz_matmul_fn matmul_q4_0_reused;

    /* Batched matrix-vector products: the decode steps of n_tok independent requests
     * (continuous batching), one row of x per request, with the signature and the y of
     * the matmul of the same dtype. Contract: y[t * ldy + o] is bit for bit what that
     * matmul gives for token t alone (n_tok 1) at this level, for any n_tok, any [o0, o1)
     * and any place of t in the call, so a request's results never depend on its batch.
     * Each weight row is read from memory once per KZ_MATVEC_PASS tokens (neon-i8mm's
     * SMMLA walk: eight): rows in tiles of about KZ_MATVEC_TILE_BYTES, every token set of
     * the pass over a tile while it is in L1, the tokens' activations quantized once per
     * call (quantized weights). The
     * matmuls instead walk tokens outermost and stream the rows once per set, and some
     * take another path for a prompt's token count (matmul_avx2.c), which these never
     * do. The _reused ones prefetch as matmul_q8_0_reused. Scalar definitions:
     * ref/matmul_ref.c, ref/quant_ref.c (the matmuls' sums, rows outermost). */
    kz_matmul_fn matvec_bf16;
    kz_matmul_fn matvec_f16;
    kz_matmul_fn matvec_f32;
    kz_matmul_fn matvec_q8_0;
    kz_matmul_fn matvec_q4_0;
    kz_matmul_fn matvec_q8_0_reused;
    kz_matmul_fn matvec_q4_0_reused;
    /* The prefetch policy the four above follow, and every policy's entry points of this
     * sub-level (kz_kernels_set_prefetch switches a copy of the table). */
    kz_quant_prefetch prefetch;
    const kz_quant_fns *quant;

    /* The prompt prefill's projections as a register-tiled GEMM over f32 weight rows
     * (layers/matrix.c feeds it rows converted by rows_to_f32_* below, a k-block at a
     * time, or F32 rows in place):
     *   y[t * ldy + o] = s            (accumulate 0)
     *   y[t * ldy + o] = y[..] + s    (accumulate 1)
     *   s = sum_i w[o * ldw + i] * x[t * ldx + i],  i < n_in
     * for t < n_tok, o < n_rows. w [n_rows, ldw] row-major ([out, in] as nn.Linear),
     * x [n_tok, ldx], y [n_tok, ldy]; ldw, ldx >= n_in, ldy >= n_rows; y overlaps
     * neither. Scalar definition (ref/gemm_rows_ref.c): s summed sequentially in i,
     * multiply then add. Each level sums every (t, o) in one sequence fixed by n_in
     * alone (documented in its file), never by n_tok, n_rows, the element's place in
     * a register tile or the caller's split, so any split over threads gives the
     * same bits; levels differ from the definition within the bound of
     * tests/unit/test_gemm_rows.c. */
    void (*gemm_rows)(float *y, size_t ldy, const float *x, size_t ldx, const float *w,
                      size_t ldw, size_t n_in, size_t n_tok, size_t n_rows, int accumulate);

    /* Weights in their stored format to f32, dst[n] (n weights from the start of a
     * row or of any block boundary in it): bf16 -> f32 exactly (the high half), f16
     * as kz_fp16_to_f32 (kernels/quant.h; a NaN may come out quieted); q8_0 / q4_0 (kernels/quant.h, n % 32 == 0, src any alignment) exactly as
     * kz_dequantize_row_q8_0 / kz_dequantize_row_q4_0, bit for bit on every level. */
    void (*rows_to_f32_bf16)(float *dst, const void *src, size_t n);
    void (*rows_to_f32_f16)(float *dst, const void *src, size_t n);
    void (*rows_to_f32_q8_0)(float *dst, const void *src, size_t n);
    void (*rows_to_f32_q4_0)(float *dst, const void *src, size_t n);

    /* How layers/matrix.c runs prompts (4 or more tokens) of Q8_0 / Q4_0 weights: true
     * through rows_to_f32_* + gemm_rows, false through matmul_q8_0 / matmul_q4_0. False on
     * AVX-512: its int8 kernels (VNNI or maddubs) share each weight unpacking among four
     * tokens and beat widening to f32. True on AVX2: the GEMM path's 4 x 3 tiles beat the
     * int8 kernels for both formats. On NEON false only with the i8mm extension (the
     * neon-i8mm sub-level): its SMMLA loop needs a fraction of the instructions of widening
     * plus FMLAs and reads the weights once per 8 tokens, where the SDOT and baseline
     * kernels take tokens in pairs (docs/ARCHITECTURE.md#language-model-matmuls).
     * `bench_quant neon-i8mm neon-dotprod --prefill` compares them on a device. */
    bool prefill_gemm_quant;
    /* Quantized prompts of up to this many tokens (at most KZ_PROMPT_TILE_TOKENS) that
     * layers/matrix.c gives one row block per thread and matrix, each activation then
     * quantized once per thread; 0: none, three blocks whose rows stay in L2 across the
     * token sets. It may, because the int8 matmuls read each weight from DRAM once for such
     * prompts whatever the rows a call takes: AVX-512 walks prompts of more than one token
     * set row tile by row tile, every set over a tile while it is in L2 and the next tile
     * prefetched into L2 while the later sets run, and a single set streams the rows once
     * anyway. Set on AVX-512 but for its AMX sub-level, whose q8_0 prompts take the AMX
     * tiles' walk (its q4_0 prompts walk row tiles, with three blocks). */
    size_t prompt_tile_tokens;
} kz_kernels;

/* Points k's quantized matmuls at k->quant's entry points for policy p: the probe's tables
 * for an Intel CPU, and tests and benchmarks on their own copy of a table. */
static inline void kz_kernels_set_prefetch(kz_kernels *k, kz_quant_prefetch p) {
    k->prefetch = p;
    k->matmul_q8_0 = k->quant->q8_0[p][0];
    k->matmul_q4_0 = k->quant->q4_0[p][0];
    k->matmul_q8_0_reused = k->quant->q8_0[p][1];
    k->matmul_q4_0_reused = k->quant->q4_0[p][1];
    k->matvec_q8_0 = k->quant->q8_0_batch[p][0];
    k->matvec_q4_0 = k->quant->q4_0_batch[p][0];
    k->matvec_q8_0_reused = k->quant->q8_0_batch[p][1];
    k->matvec_q4_0_reused = k->quant->q4_0_batch[p][1];
}

/* --- dispatch.c ---------------------------------------------------------- */

/* Best level this CPU and OS support (CPUID + XGETBV on x86). Computed once. */
kz_isa kz_cpu_best_isa(void);

/* CPU feature summary, e.g. "avx2 fma" (static string, do not free). */
const char *kz_cpu_features(void);

/* The table of the highest sub-level of min(cap, best) (kz_isa); cap KZ_ISA_AUTO means
 * best, further lowered by the environment variable KZ_ISA=scalar|avx2|avx512|neon (the
 * only environment read in the library; an unknown value is ignored). Returns a table
 * the probe made once (static, never changes). */
const kz_kernels *kz_kernels_select(kz_isa cap);

/* The table of the highest sub-level of exactly this level, or NULL if the CPU or the
 * build cannot run the level (tests). */
const kz_kernels *kz_kernels_for(kz_isa isa);

/* The names of every sub-level this build has, in order (scalar first, each level's
 * sub-levels from the lowest); *names is static. Returns how many. */
size_t kz_kernels_sublevels(const char *const **names);

/* The table of the sub-level called name (exactly), or NULL if the CPU or the build
 * cannot run it (tests and benchmarks compare sub-levels with it). */
const kz_kernels *kz_kernels_named(const char *name);

/* Name of a level ("scalar", "avx2", ...). */
const char *kz_isa_name(kz_isa isa);

/* Parse a level name, returns 0 on success. Accepts "auto". */
int kz_isa_parse(const char *s, kz_isa *out);

/* --- packing (ref/gemm_ref.c) ------------------------------------------- */

/* Packs taps matrices given by an accessor into p (allocates p->data).
 * get(ctx, j, i, o) returns W_j[i, o]. Returns 0, or -1 if out of memory. */
typedef float (*kz_pack_get_fn)(const void *ctx, size_t j, size_t i, size_t o);
int kz_packed_init(kz_packed *p, size_t taps, size_t k_in, size_t n, kz_pack_get_fn get,
                   const void *ctx);
void kz_packed_free(kz_packed *p);

/* Bytes of the panels of a [taps * k_in, n] weight (no overflow check needed
 * beyond what the caller validated: returns 0 on overflow). */
size_t kz_packed_bytes(size_t taps, size_t k_in, size_t n);

/* Uses panels already laid out at data (64-byte aligned, kz_packed_bytes long,
 * borrowed): what a model file with pre-packed weights maps in. */
void kz_packed_init_mapped(kz_packed *p, size_t taps, size_t k_in, size_t n, const float *data);

/* The same packing from a row-major source [taps * k_in, n] whose row j * k_in + i
 * holds W_j[i, :]: reads the source once, sequentially (fast model loading). */
int kz_packed_init_rows(kz_packed *p, size_t taps, size_t k_in, size_t n, const float *src);

/* --- bf16 packing and scalar definition (ref/gemm_bf16_ref.c) ------------ */

/* Packs the fp32 panels src into bf16 panels (allocates p->data). Returns 0, or -1
 * if out of memory. src is not changed. */
int kz_packed_bf16_init(kz_packed_bf16 *p, const kz_packed *src);
void kz_packed_bf16_free(kz_packed_bf16 *p);

/* Bytes of the bf16 panels of a [taps * k_in, n] weight (0 on overflow). */
size_t kz_packed_bf16_bytes(size_t taps, size_t k_in, size_t n);

/* Uses bf16 panels already laid out at data (as kz_packed_bf16_init writes them,
 * 64-byte aligned, kz_packed_bf16_bytes long), e.g. stored by `kztts quantize`. */
void kz_packed_bf16_init_mapped(kz_packed_bf16 *p, size_t taps, size_t k_in, size_t n,
                                const uint16_t *data);

/* The scalar definition of mix_rows on columns [c0, n) (the SIMD levels' tails). */
void kz_mix_rows_cols_ref(float *const *dst, const float *const *src, const float *mat,
                          size_t n_dst, size_t n_src, size_t c0, size_t n);

/* The scalar definitions of gemm_bf16 and round_bf16 (the scalar table's; the SIMD
 * levels' tails). */
void kz_gemm_bf16_ref(const kz_gemm_bf16_args *a, size_t t0, size_t t1, size_t p0, size_t p1);
void kz_round_bf16_ref(uint16_t *y, size_t ldy, const float *x, size_t ldx, size_t n_rows,
                       size_t n_cols);
/* x86/gemm_bf16_avx512.c (AVX512_BF16), in the avx512-bf16 sub-level. */
void kz_gemm_bf16_avx512(const kz_gemm_bf16_args *a, size_t t0, size_t t1, size_t p0,
                         size_t p1);
/* x86/gemm_bf16_amx.c (AMX-BF16 tiles), in the avx512-amx sub-level. */
void kz_gemm_bf16_amx(const kz_gemm_bf16_args *a, size_t t0, size_t t1, size_t p0, size_t p1);
/* x86/gemm_bf16_avx2.c (FMA on widened bf16, the definition's bits), in the avx2 table
 * and the avx512 and avx512-vnni sub-levels. */
void kz_gemm_bf16_avx2(const kz_gemm_bf16_args *a, size_t t0, size_t t1, size_t p0, size_t p1);
void kz_round_bf16_avx2(uint16_t *y, size_t ldy, const float *x, size_t ldx, size_t n_rows,
                        size_t n_cols);
void kz_round_bf16_f32_avx2(float *y, size_t ldy, const float *x, size_t ldx, size_t n_rows,
                            size_t n_cols);
/* arm/gemm_bf16_neon.c (NEON FMAs on widened bf16, the definition's bits), in the neon
 * tables; its input comes from kz_round_bf16_f32_neon (round_bf16 there is the scalar one,
 * for a caller without room for fp32 rows). */
void kz_gemm_bf16_neon(const kz_gemm_bf16_args *a, size_t t0, size_t t1, size_t p0, size_t p1);
void kz_round_bf16_f32_neon(float *y, size_t ldy, const float *x, size_t ldx, size_t n_rows,
                            size_t n_cols);

/* LDTILECFG's 64-byte operand (AMX palette 1): kz_amx_tile_config_set fills tiles
 * 0..7 with rows[t] rows of colsb[t] bytes (and makes the stores visible to the
 * instruction). Shared by the AMX kernels and the bench's
 * AMX probe; plain data, the tile instructions stay in the ISA files. */
typedef struct kz_amx_tile_config {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} kz_amx_tile_config;

static inline void kz_amx_tile_config_set(kz_amx_tile_config *c, const uint8_t rows[8],
                                          const uint16_t colsb[8]) {
    memset(c, 0, sizeof *c);
    c->palette = 1;
    for (int t = 0; t < 8; t++) {
        c->rows[t] = rows[t];
        c->colsb[t] = colsb[t];
    }
    // GCC does not treat ldtilecfg as reading *c and may drop the stores above: keep them.
    __asm__ volatile("" : : "r"(c) : "memory");
}

/* x86/gemm_bf16_avx512.c: the rounding by vcvtneps2bf16 (AVX512_BF16). */
void kz_round_bf16_avx512(uint16_t *y, size_t ldy, const float *x, size_t ldx, size_t n_rows,
                          size_t n_cols);

/* --- scalar definitions (ref/), also used directly by tests ------------- */
extern const kz_kernels kz_kernels_scalar;

/* --- per-level tables and gemms, for dispatch.c -------------------------
 * Model code takes a table from kz_kernels_select(); tests use kz_kernels_for() and
 * kz_kernels_named(), which return NULL for what the CPU cannot run. The x86 symbols
 * exist only in builds with KZ_HAVE_X86, the NEON ones with KZ_HAVE_ARM. Each gemm lives
 * in its own file (ref/gemm_ref.c, x86/gemm_avx2.c, x86/gemm_avx512.c) and the table in
 * the level's rows file names it. The tables below are each level's lowest sub-level,
 * prefetch KZ_QPF_L1; dispatch.c builds the others from them. */
extern const kz_kernels kz_kernels_avx2;   /* x86/rows_avx2.c */
extern const kz_kernels kz_kernels_avx512; /* x86/rows_avx512.c */
extern const kz_kernels kz_kernels_neon;   /* arm/rows_neon.c */
void kz_gemm_ref(const kz_gemm_args *a, size_t t0, size_t t1, size_t p0, size_t p1);
/* The conv-GEMMs' epilogue for one row of a panel (ref/gemm_ref.c, shared by the
 * fp32 and bf16 scalar definitions): yr[c] = acc[c] (+ bias[c]) (+ the old yr[c] in
 * accumulate mode), c < width, in that order. */
void kz_gemm_store_ref(float *yr, const float *acc, size_t width, const float *bias,
                       kz_gemm_mode mode);
void kz_gemm_avx2(const kz_gemm_args *a, size_t t0, size_t t1, size_t p0, size_t p1);
void kz_gemm_avx512(const kz_gemm_args *a, size_t t0, size_t t1, size_t p0, size_t p1);
void kz_gemm_neon(const kz_gemm_args *a, size_t t0, size_t t1, size_t p0, size_t p1);
/* matmul and matvec families (ref/matmul_ref.c, x86/matmul_avx2.c, x86/matmul_avx512.c,
 * arm/matmul_neon.c): the three entry points (bf16, f16, f32 rows) of a family at a level. */
#define KZ_FLOAT_ROWS_DECL(fam, isa)                                                             \
    void kz_##fam##_bf16_##isa(float *y, size_t ldy, const float *x, size_t ldx, const void *w, \
                               size_t n_in, size_t n_tok, size_t o0, size_t o1);                \
    void kz_##fam##_f16_##isa(float *y, size_t ldy, const float *x, size_t ldx, const void *w,  \
                              size_t n_in, size_t n_tok, size_t o0, size_t o1);                 \
    void kz_##fam##_f32_##isa(float *y, size_t ldy, const float *x, size_t ldx, const void *w,  \
                              size_t n_in, size_t n_tok, size_t o0, size_t o1);
#define KZ_MATMUL_DECL(isa) KZ_FLOAT_ROWS_DECL(matmul, isa)
#define KZ_MATVEC_DECL(isa) KZ_FLOAT_ROWS_DECL(matvec, isa)
KZ_MATMUL_DECL(ref)
KZ_MATMUL_DECL(avx2)
KZ_MATVEC_DECL(ref)
KZ_MATVEC_DECL(avx2)
KZ_MATVEC_DECL(avx512)
KZ_MATVEC_DECL(neon)
void kz_matvec_q8_0_ref(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                        size_t n_in, size_t n_tok, size_t o0, size_t o1);
void kz_matvec_q4_0_ref(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                        size_t n_in, size_t n_tok, size_t o0, size_t o1);
KZ_MATMUL_DECL(avx512)
KZ_MATMUL_DECL(neon) /* arm/matmul_neon.c */
/* quantized matmuls (ref/quant_ref.c, x86/quant_avx2.c, x86/quant_avx512.c,
 * arm/quant_neon.c), the lowest sub-level's under KZ_QPF_L1 */
#define KZ_QUANT_DECL(isa)                                                                      \
    void kz_matmul_q8_0_##isa(float *y, size_t ldy, const float *x, size_t ldx, const void *w, \
                              size_t n_in, size_t n_tok, size_t o0, size_t o1);                \
    void kz_matmul_q4_0_##isa(float *y, size_t ldy, const float *x, size_t ldx, const void *w, \
                              size_t n_in, size_t n_tok, size_t o0, size_t o1);
KZ_QUANT_DECL(ref)
KZ_QUANT_DECL(avx2)
KZ_QUANT_DECL(avx512)
KZ_QUANT_DECL(neon)
/* Every sub-level's quantized matmuls under every prefetch policy (kz_kernels.quant). */
extern const kz_quant_fns kz_quant_ref;          /* ref/quant_ref.c */
extern const kz_quant_fns kz_quant_avx2;         /* x86/quant_avx2.c */
extern const kz_quant_fns kz_quant_avx512;       /* x86/quant_avx512.c: maddubs */
extern const kz_quant_fns kz_quant_avx512_vnni;  /* vpdpbusd */
extern const kz_quant_fns kz_quant_avx512_amx;   /* + q8_0 prompts on AMX-INT8 tiles */
extern const kz_quant_fns kz_quant_neon;         /* arm/quant_neon.c: baseline */
extern const kz_quant_fns kz_quant_neon_dotprod; /* arm/quant_dot_neon.c: SDOT */
extern const kz_quant_fns kz_quant_neon_i8mm;    /* arm/quant_mmla_neon.c: + SMMLA */
/* prefill GEMM and weight conversion (ref/gemm_rows_ref.c, x86/gemm_rows_avx2.c,
 * x86/gemm_rows_avx512.c, arm/gemm_rows_neon.c) */
#define KZ_GEMM_ROWS_DECL(isa)                                                                  \
    void kz_gemm_rows_##isa(float *y, size_t ldy, const float *x, size_t ldx, const float *w,  \
                            size_t ldw, size_t n_in, size_t n_tok, size_t n_rows,              \
                            int accumulate);                                                   \
    void kz_rows_to_f32_bf16_##isa(float *dst, const void *src, size_t n);                     \
    void kz_rows_to_f32_f16_##isa(float *dst, const void *src, size_t n);                      \
    void kz_rows_to_f32_q8_0_##isa(float *dst, const void *src, size_t n);                     \
    void kz_rows_to_f32_q4_0_##isa(float *dst, const void *src, size_t n);
KZ_GEMM_ROWS_DECL(ref)
KZ_GEMM_ROWS_DECL(avx2)
KZ_GEMM_ROWS_DECL(avx512)
KZ_GEMM_ROWS_DECL(neon)

/* The NEON quantized matmuls behind kz_quant_neon*, q4 = 1 for q4_0: baseline Advanced
 * SIMD (quant_neon.c) and SDOT (quant_dot_neon.c), both arm/quant_neon_body.h, and SMMLA
 * (quant_mmla_neon.c, two or more tokens). */
void kz_matmul_q_neon_mull(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                           size_t n_in, size_t n_tok, size_t o0, size_t o1, int q4);
void kz_matmul_q_neon_sdot(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                           size_t n_in, size_t n_tok, size_t o0, size_t o1, int q4);
void kz_matmul_q_neon_mmla(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                           size_t n_in, size_t n_tok, size_t o0, size_t o1, int q4);
/* Their batched matrix-vector products (kz_kernels.matvec_q8_0): baseline and SDOT (the
 * i8mm sub-level's are its SMMLA entry points, which read the rows once per eight
 * tokens with the SDOT bits). */
void kz_matvec_q_neon_mull(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                           size_t n_in, size_t n_tok, size_t o0, size_t o1, int q4);
void kz_matvec_q_neon_sdot(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                           size_t n_in, size_t n_tok, size_t o0, size_t o1, int q4);

#endif
