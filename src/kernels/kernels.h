/*
 * kernels.h - the compute kernel table and the contract of every kernel.
 *
 * Data flow: model code never calls an ISA-specific function. At model load
 * kz_kernels_select() (dispatch.c) probes the CPU once and returns a table of
 * function pointers for the best level allowed by the cap; model and layer
 * code call through that table. Each kernel family has a scalar definition in
 * kernels/ref/ (the specification of the result) and optional AVX2 / AVX-512
 * variants in kernels/x86/ compiled with their own target flags, or NEON
 * variants in kernels/arm/ on aarch64.
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

/* Instruction-set levels, ordered: a cap at level L allows every level <= L. */
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

/* Load-time loops in plain C (the codec's weight packing and Winograd transforms) compiled
 * for several x86 levels, one picked when the library loads (target_clones): the same
 * operations in the same order (no contraction, -ffp-contract=off), so the same bits on
 * every CPU. Elsewhere one plain version. */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define KZ_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
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

/* Elementwise and row kernels. Rows are contiguous, [n_rows, n_ch]. */
typedef struct kz_kernels {
    kz_isa isa;       /* level this table implements */
    const char *name; /* "scalar", "avx2", "avx512", "neon" */

    /* Rows [t0, t1) and column panels [p0, p1) of the conv-GEMM above. Any
     * split of rows and panels over calls gives identical bits. */
    void (*gemm)(const kz_gemm_args *a, size_t t0, size_t t1, size_t p0, size_t p1);
    /* Output rows of gemm's register tile: a call's rows in multiples of it run in full
     * tiles (the rest in a narrower, slower one); callers that choose their row counts
     * (the Winograd groups, layers/winograd.c) take multiples of it. */
    size_t gemm_mr;

    /* Rows [t0, t1) and panels [p0, p1) of the bf16 conv-GEMM above, and the
     * rounding of fp32 rows to its bf16 input: y[r * ldy + c] = bf16(x[r * ldx + c])
     * for c < n_cols, 0 for n_cols <= c < ldy. NULL on the scalar level (the codec
     * then keeps fp32 weights); every x86 level from AVX2 and NEON have a gemm_bf16
     * (round_bf16 may be NULL where round_bf16_f32 feeds it: the scalar one then). */
    void (*gemm_bf16)(const kz_gemm_bf16_args *a, size_t t0, size_t t1, size_t p0, size_t p1);
    void (*round_bf16)(uint16_t *y, size_t ldy, const float *x, size_t ldx, size_t n_rows,
                       size_t n_cols);
    /* The same rounding with the bf16 values kept as fp32 (y = kz_bf16_to_f32(bf16(x)),
     * 0 in the padding): the input kz_gemm_bf16_args.xf, which this level's gemm_bf16
     * reads without widening x per tile (AVX2, NEON: FMAs on widened bf16). NULL on
     * levels whose gemm_bf16 reads the bf16 rows. */
    void (*round_bf16_f32)(float *y, size_t ldy, const float *x, size_t ldx, size_t n_rows,
                           size_t n_cols);

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

    /* SwiGLU, in place into gate allowed: y[i] = silu(gate[i]) * up[i], silu(v) = v / (1 + exp(-v)). [n] */
    void (*swiglu)(float *y, const float *gate, const float *up, size_t n);

    /* Dot product of two [n] vectors, fixed summation order for a given n. */
    float (*dot)(const float *a, const float *b, size_t n);

    /* y[i] += a * x[i], [n]. */
    void (*axpy)(float *y, float a, const float *x, size_t n);

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
    void (*matmul_bf16)(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                        size_t n_in, size_t n_tok, size_t o0, size_t o1);
    /* The same with IEEE binary16 weights (uint16 bits, widened as kz_fp16_to_f32 for
     * every value but a NaN, which stays a NaN): each level runs its matmul_bf16
     * sequence on the widened weights. */
    void (*matmul_f16)(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                       size_t n_in, size_t n_tok, size_t o0, size_t o1);
    void (*matmul_f32)(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                       size_t n_in, size_t n_tok, size_t o0, size_t o1);

    /* The same projections with block-quantized weights (kernels/quant.h): w is
     * rows of n_in / 32 packed q8_0 (34 bytes) or q4_0 (18 bytes) blocks, any
     * alignment, n_in % 32 == 0 required. Definition (ref/quant_ref.c):
     *   y[t * ldy + o] = sum_b d_b * sum_i q_i * x[t * ldx + 32 b + i]
     * SIMD levels quantize x to int8 per block of 32 on the fly and differ
     * from it within the bound stated in tests/unit/test_quant.c; every
     * (t, o) is fixed by n_in alone, whatever the split of rows or tokens. */
    void (*matmul_q8_0)(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                        size_t n_in, size_t n_tok, size_t o0, size_t o1);
    void (*matmul_q4_0)(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                        size_t n_in, size_t n_tok, size_t o0, size_t o1);

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
     * through rows_to_f32_* + gemm_rows, false through matmul_q8_0 / matmul_q4_0. Set per
     * level by measurement (docs/PERF.md): AVX-512's int8 kernels (VNNI or maddubs, four
     * tokens per weight unpacking) are 1.4-2x faster than widening to f32 (Zen 5); on
     * AVX2 (Zen 3, 22 tokens, 2 threads) the GEMM path with 4 x 3 tiles beats the grouped
     * int8 kernels for both formats. NEON: not measured on hardware (none here), so set
     * by instruction counts: with the i8mm extension (dispatch.c clears it in its copy of
     * the table) the SMMLA kernel's loop (GCC 12 -O3) issues ~100 vector instructions per
     * 1024 multiply-adds (2 rows x 4 tokens x 4 blocks) where the f32 GEMM needs 256
     * FMLAs plus the widening, and it reads the weights once per 8 tokens; without it
     * the GEMM path stays (the SDOT and baseline kernels take tokens in pairs).
     * `bench_quant neon --prefill [--no-i8mm]` compares them on a device. */
    bool prefill_gemm_quant;
} kz_kernels;

/* --- dispatch.c ---------------------------------------------------------- */

/* Best level this CPU and OS support (CPUID + XGETBV on x86). Computed once. */
kz_isa kz_cpu_best_isa(void);

/* CPU feature summary, e.g. "avx2 fma" (static string, do not free). */
const char *kz_cpu_features(void);

/* Table for min(cap, best); cap KZ_ISA_AUTO means best, further lowered by the
 * environment variable KZ_ISA=scalar|avx2|avx512|neon (the only environment read in
 * the library; an unknown value is ignored). Returns a static table. */
const kz_kernels *kz_kernels_select(kz_isa cap);

/* True when k's bf16 conv-GEMM is the AMX one: there the bf16 codec is the fastest
 * (docs/PERF.md); KZ_PRECISION_FAST asks this. */
bool kz_kernels_bf16_on_amx(const kz_kernels *k);

/* True when k has a bf16 conv-GEMM that beats its fp32 one: AMX, AVX512_BF16 on a
 * CPU that is not Intel's (Zen 4/5: vdpbf16ps at twice the fp32 FMA rate; on Intel
 * cores without AMX it measured slower than the fp32 FMAs, docs/PERF.md), or the AVX2
 * level's (its FMAs on widened bf16 keep the fp32 GEMM's rate and read half the
 * weight bytes: the codec as fast or faster at every chunk size on Zen 3). Not NEON's
 * FMA one until it is timed on ARM hardware. KZ_PRECISION_FAST asks this too. */
bool kz_kernels_bf16_faster(const kz_kernels *k);

/* Table for exactly this level, or NULL if the CPU cannot run it (tests). */
const kz_kernels *kz_kernels_for(kz_isa isa);

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

/* The scalar definitions of gemm_bf16 and round_bf16 (every level's fallback). */
void kz_gemm_bf16_ref(const kz_gemm_bf16_args *a, size_t t0, size_t t1, size_t p0, size_t p1);
void kz_round_bf16_ref(uint16_t *y, size_t ldy, const float *x, size_t ldx, size_t n_rows,
                       size_t n_cols);
/* x86/gemm_bf16_avx512.c (AVX512_BF16), in the avx512 table when the CPU has it. */
void kz_gemm_bf16_avx512(const kz_gemm_bf16_args *a, size_t t0, size_t t1, size_t p0,
                         size_t p1);
/* x86/gemm_bf16_amx.c (AMX-BF16 tiles), in the avx512 table instead when the CPU has
 * AMX and the OS grants the process its tiles. */
void kz_gemm_bf16_amx(const kz_gemm_bf16_args *a, size_t t0, size_t t1, size_t p0, size_t p1);
/* x86/gemm_bf16_avx2.c (FMA on widened bf16, the definition's bits), in the avx2 table,
 * and in the avx512 table of a CPU without AVX512_BF16. */
void kz_gemm_bf16_avx2(const kz_gemm_bf16_args *a, size_t t0, size_t t1, size_t p0, size_t p1);
void kz_round_bf16_avx2(uint16_t *y, size_t ldy, const float *x, size_t ldx, size_t n_rows,
                        size_t n_cols);
void kz_round_bf16_f32_avx2(float *y, size_t ldy, const float *x, size_t ldx, size_t n_rows,
                            size_t n_cols);
/* arm/gemm_bf16_neon.c (NEON FMAs on widened bf16, the definition's bits), in the neon
 * table; its input comes from kz_round_bf16_f32_neon (round_bf16 there is the scalar one). */
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

/* The bf16 conv-GEMMs this CPU runs (dispatch.c), best first; the avx512 table holds
 * the first (on an AVX2-only CPU the avx2 table holds the only one). Tests check each
 * against the definition, the bench compares them. */
typedef struct kz_gemm_bf16_impl {
    const char *name; /* "amx", "avx512bf16", "avx2", "neon" */
    void (*gemm)(const kz_gemm_bf16_args *a, size_t t0, size_t t1, size_t p0, size_t p1);
    /* The FMA ones on widened bf16 (avx2, neon; bit-identical to the definition): the
     * rounding that writes their fp32 input (kz_gemm_bf16_args.xf). NULL for the others,
     * which read bf16 rows. */
    void (*round_f32)(float *y, size_t ldy, const float *x, size_t ldx, size_t n_rows,
                      size_t n_cols);
} kz_gemm_bf16_impl;
size_t kz_gemm_bf16_impls(const kz_gemm_bf16_impl **out);
void kz_round_bf16_avx512(uint16_t *y, size_t ldy, const float *x, size_t ldx, size_t n_rows,
                          size_t n_cols);

/* --- scalar definitions (ref/), also used directly by tests ------------- */
extern const kz_kernels kz_kernels_scalar;

/* --- per-level tables and gemms, for dispatch.c -------------------------
 * Model code takes a table from kz_kernels_select(); tests use
 * kz_kernels_for(), which returns NULL for a level the CPU cannot run. The
 * x86 symbols exist only in builds with KZ_HAVE_X86. Each gemm lives in its
 * own file (ref/gemm_ref.c, x86/gemm_avx2.c, x86/gemm_avx512.c) and the table
 * in the level's rows file names it. */
extern const kz_kernels kz_kernels_avx2;   /* x86/rows_avx2.c */
extern const kz_kernels kz_kernels_avx512; /* x86/rows_avx512.c */
extern const kz_kernels kz_kernels_neon;   /* arm/rows_neon.c, builds with KZ_HAVE_ARM */
void kz_gemm_ref(const kz_gemm_args *a, size_t t0, size_t t1, size_t p0, size_t p1);
/* The conv-GEMMs' epilogue for one row of a panel (ref/gemm_ref.c, shared by the
 * fp32 and bf16 scalar definitions): yr[c] = acc[c] (+ bias[c]) (+ the old yr[c] in
 * accumulate mode), c < width, in that order. */
void kz_gemm_store_ref(float *yr, const float *acc, size_t width, const float *bias,
                       kz_gemm_mode mode);
void kz_gemm_avx2(const kz_gemm_args *a, size_t t0, size_t t1, size_t p0, size_t p1);
void kz_gemm_avx512(const kz_gemm_args *a, size_t t0, size_t t1, size_t p0, size_t p1);
void kz_gemm_neon(const kz_gemm_args *a, size_t t0, size_t t1, size_t p0, size_t p1);
/* matmul families (ref/matmul_ref.c, x86/matmul_avx2.c, x86/matmul_avx512.c) */
#define KZ_MATMUL_DECL(isa)                                                                     \
    void kz_matmul_bf16_##isa(float *y, size_t ldy, const float *x, size_t ldx, const void *w, \
                              size_t n_in, size_t n_tok, size_t o0, size_t o1);                \
    void kz_matmul_f16_##isa(float *y, size_t ldy, const float *x, size_t ldx, const void *w,  \
                             size_t n_in, size_t n_tok, size_t o0, size_t o1);                 \
    void kz_matmul_f32_##isa(float *y, size_t ldy, const float *x, size_t ldx, const void *w,  \
                             size_t n_in, size_t n_tok, size_t o0, size_t o1);
KZ_MATMUL_DECL(ref)
KZ_MATMUL_DECL(avx2)
KZ_MATMUL_DECL(avx512)
KZ_MATMUL_DECL(neon) /* arm/matmul_neon.c */
/* quantized matmuls (ref/quant_ref.c, x86/quant_avx2.c, x86/quant_avx512.c) */
#define KZ_QUANT_DECL(isa)                                                                      \
    void kz_matmul_q8_0_##isa(float *y, size_t ldy, const float *x, size_t ldx, const void *w, \
                              size_t n_in, size_t n_tok, size_t o0, size_t o1);                \
    void kz_matmul_q4_0_##isa(float *y, size_t ldy, const float *x, size_t ldx, const void *w, \
                              size_t n_in, size_t n_tok, size_t o0, size_t o1);
KZ_QUANT_DECL(ref)
KZ_QUANT_DECL(avx2)
KZ_QUANT_DECL(avx512)
KZ_QUANT_DECL(neon) /* arm/quant_neon.c */
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

/* How the x86 quantized matvecs (x86/quant_avx2.c, x86/quant_avx512.c) prefetch their
 * weight stream, per 64 bytes: KZ_QPF_L1, one prefetch into L1 (2 KB ahead on AVX2, 4 KB for
 * q8_0 and 8 KB for q4_0 on AVX-512; tuned on Zen 3 and Zen 5), or KZ_QPF_L2, one into L2
 * 5 KB ahead and one into L1 2.5 KB ahead (both levels and formats; x86/quant_prefetch.h; on
 * an Intel Xeon with AMX the talker step and the code predictor frame ran 17-21 % faster
 * than with KZ_QPF_L1 in a harness and 0-12 % in `kztts bench`, by the hour, with 8 / 1 KB
 * distances, and 5 / 2.5 KB took the talker step from 21.3 to 18.8-19.3 ms: docs/PERF.md
 * 2026-12-02 (evening), "Prefetch into L2 on Intel", and (night)). dispatch.c's probe picks
 * KZ_QPF_L2 on Intel CPUs, KZ_QPF_L1 elsewhere; tests and benchmarks may switch (not while a
 * matmul runs). Results are the same bits either way. */
typedef enum kz_quant_prefetch { KZ_QPF_L1 = 0, KZ_QPF_L2 = 1 } kz_quant_prefetch;
void kz_quant_set_prefetch(kz_quant_prefetch p);
kz_quant_prefetch kz_quant_get_prefetch(void);

/* Whether the calling thread's next quantized matvecs read weights that were read shortly
 * before and may still be in the last-level cache (the code predictor re-reads its 81 MB
 * 15 times a frame; layers/matrix.c sets it per pool job from kz_exec.weights_reused). With
 * KZ_QPF_L2 such weights are prefetched further ahead into L2 and nearer into L1 (12 / 1 KB
 * against 5 / 2.5 KB; x86/quant_prefetch.h); nothing else reads it. Per thread; default no.
 * Results are the same bits either way. */
void kz_quant_set_thread_reuse(int reused);
int kz_quant_get_thread_reuse(void);

/* x86/quant_avx512.c: allow (1) or forbid (0) its VNNI path (both give identical bits);
 * returns whether the CPU has VNNI. For tests and benchmarks; x86 builds only. */
int kz_quant_avx512_set_vnni(int allow);
/* AMX-INT8 path of the AVX-512 q8_0 kernel for prompts (x86/quant_avx512.c): dispatch.c
 * enables it once the OS granted the tiles; tests and benchmarks switch it off (allow 0)
 * and on again. Returns 1 if prompts now take it. It gives the same bits either way. */
void kz_quant_avx512_enable_amx(void);
int kz_quant_avx512_set_amx(int allow);

/* arm/quant_neon.c: dispatch.c enables the SDOT variant of the NEON quantized matmuls
 * when Linux reports the dotprod extension (HWCAP_ASIMDDP); tests and benchmarks
 * forbid (allow 0) and allow it again. Returns whether the CPU has it. Same bits
 * either way. aarch64 builds only. */
void kz_quant_neon_enable_dotprod(void);
int kz_quant_neon_set_dotprod(int allow);
/* The same for the SMMLA variant, which takes calls of two or more tokens when Linux
 * reports the int8 matrix multiply extension (HWCAP2_I8MM). Same bits either way. */
void kz_quant_neon_enable_i8mm(void);
int kz_quant_neon_set_i8mm(int allow);
/* The variants behind kz_matmul_q{8,4}_0_neon, q4 = 1 for q4_0: baseline Advanced SIMD
 * (quant_neon.c) and SDOT (quant_dot_neon.c), both arm/quant_neon_body.h, and SMMLA
 * (quant_mmla_neon.c). */
void kz_matmul_q_neon_mull(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                           size_t n_in, size_t n_tok, size_t o0, size_t o1, int q4);
void kz_matmul_q_neon_sdot(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                           size_t n_in, size_t n_tok, size_t o0, size_t o1, int q4);
void kz_matmul_q_neon_mmla(float *y, size_t ldy, const float *x, size_t ldx, const void *w,
                           size_t n_in, size_t n_tok, size_t o0, size_t o1, int q4);

#endif
