/* layouts/quantized/block_kernels.c — the dot products of a row of Q8_0 or
 * Q4_0 weight blocks with activations quantized once per call to 8-bit
 * blocks (qt__quantize_activations), as ggml does: within a block the
 * products are integers (AVX2's maddubs/madd: unsigned 8-bit times signed
 * 8-bit, pairs summed to 16 bits, then to 32), and each block costs one
 * float multiply-add by the product of the two scales.  Widening every
 * weight to float instead left the Q4_0 matrix-vector product at a third
 * of the memory bandwidth; the integer form reads 18 bytes per 32 weights
 * and does a handful of instructions for them.  Written once per ISA:
 * scalar, AVX2 and AVX-512, compiled for their ISA through target
 * attributes, so this one plugin carries all three and picks at load
 * (qt__choose_kernels) the widest this CPU and its OS run, as the CPU
 * plugin's variants are picked by score; WEFT_QUANTIZED_KERNELS names one
 * to force it (the tests run each in turn).  The integer sums are the same
 * in every variant; only the order of the float additions across blocks
 * differs, so results agree to rounding, not bit for bit. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "quantized.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define QT_X86 1
#else
#define QT_X86 0
#endif

/* ------------------------------------------------ activation quantizing */

/* Scalar in every variant: it reads K floats per activation row against
 * the N x K weights each row meets, and one rounding rule everywhere keeps
 * the integer sums equal across variants. */
void qt__quantize_activations(const float *x, qt_block_q8_act *y, int64_t nblocks)
{
    for (int64_t b = 0; b < nblocks; b++, x += QT_BLOCK) {
        float amax = 0;
        bool finite = true;
        for (int j = 0; j < QT_BLOCK; j++) {
            finite &= isfinite(x[j]) != 0;
            amax = fmaxf(amax, fabsf(x[j]));
        }
        float d = amax / 127.0f, id = d > 0 ? 127.0f / amax : 0.0f;
        int32_t sum = 0;
        for (int j = 0; j < QT_BLOCK; j++) {
            float q = finite ? nearbyintf(x[j] * id) : 0.0f;
            q = q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q;
            y[b].qs[j] = (int8_t)q;
            sum += (int8_t)q;
        }
        y[b].d = finite ? d : NAN;
        y[b].sum = sum;
    }
}

/* ---------------------------------------------------------------- scalar */

static float scalar_dot_q8_0(const qt_block_q8_0 *w, const qt_block_q8_act *x, int64_t nblocks)
{
    float sum = 0;
    for (int64_t b = 0; b < nblocks; b++) {
        int32_t s = 0;
        for (int j = 0; j < QT_BLOCK; j++)
            s += w[b].qs[j] * x[b].qs[j];
        sum += (float)s * (qt__fp16_to_fp32(w[b].d) * x[b].d);
    }
    return sum;
}

/* sum_j (n[j] - 8) q[j] = sum_j n[j] q[j] - 8 sum: the form the vector
 * kernels use, with the nibbles n unsigned */
static float scalar_dot_q4_0(const qt_block_q4_0 *w, const qt_block_q8_act *x, int64_t nblocks)
{
    float sum = 0;
    for (int64_t b = 0; b < nblocks; b++) {
        int32_t s = 0;
        for (int j = 0; j < QT_BLOCK / 2; j++)
            s += (w[b].qs[j] & 0xf) * x[b].qs[j] + (w[b].qs[j] >> 4) * x[b].qs[j + 16];
        s -= 8 * x[b].sum;
        sum += (float)s * (qt__fp16_to_fp32(w[b].d) * x[b].d);
    }
    return sum;
}

const qt_block_kernels qt__kernels_scalar = {"scalar", scalar_dot_q8_0, scalar_dot_q4_0};

#if QT_X86
/* ------------------------------------------------------------------ AVX2 */

#define QT_AVX2 __attribute__((target("avx2,fma,f16c")))

QT_AVX2 static inline float avx2_hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* sum_j u[j] s[j] of 32 unsigned u and signed s, as 8 int32 partial sums:
 * maddubs's 16-bit pair sums cannot saturate, |u| <= 127 (Q8_0: 127 x 127
 * x 2) or u <= 15 (Q4_0) */
QT_AVX2 static inline __m256i avx2_dot_us(__m256i u, __m256i s)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* the 32 nibbles of a Q4_0 block in element order, unsigned (0..15):
 * elements 0..15 in the low nibbles, 16..31 in the high ones */
QT_AVX2 static inline __m256i avx2_q4_nibbles(const uint8_t *qs)
{
    const __m128i mask = _mm_set1_epi8(0xf);
    __m128i m = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(m, 4), mask), _mm_and_si128(m, mask));
}

/* one Q8_0 block: signed times signed as |w| times x with w's sign */
QT_AVX2 static inline __m256i avx2_q8_block(const qt_block_q8_0 *w, const qt_block_q8_act *x)
{
    __m256i q = _mm256_loadu_si256((const __m256i *)w->qs);
    __m256i s = _mm256_loadu_si256((const __m256i *)x->qs);
    return avx2_dot_us(_mm256_abs_epi8(q), _mm256_sign_epi8(s, q));
}

/* one Q4_0 block: the 8 lanes less x's sum once each, 8 * sum in all */
QT_AVX2 static inline __m256i avx2_q4_block(const qt_block_q4_0 *w, const qt_block_q8_act *x)
{
    __m256i s = _mm256_loadu_si256((const __m256i *)x->qs);
    return _mm256_sub_epi32(avx2_dot_us(avx2_q4_nibbles(w->qs), s), _mm256_set1_epi32(x->sum));
}

QT_AVX2 static inline __m256 avx2_scaled(__m256i isum, uint16_t dw, float dx, __m256 acc)
{
    return _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(dw) * dx), _mm256_cvtepi32_ps(isum), acc);
}

/* Two accumulators over alternate blocks: one would make every block wait
 * on the last one's multiply-add latency. */
#define QT_AVX2_DOT(name, wtype, block)                                                       \
    QT_AVX2 static float name(const wtype *w, const qt_block_q8_act *x, int64_t nblocks)      \
    {                                                                                          \
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();                        \
        int64_t b = 0;                                                                         \
        for (; b + 2 <= nblocks; b += 2) {                                                     \
            acc0 = avx2_scaled(block(&w[b], &x[b]), w[b].d, x[b].d, acc0);                     \
            acc1 = avx2_scaled(block(&w[b + 1], &x[b + 1]), w[b + 1].d, x[b + 1].d, acc1);     \
        }                                                                                      \
        if (b < nblocks)                                                                       \
            acc0 = avx2_scaled(block(&w[b], &x[b]), w[b].d, x[b].d, acc0);                     \
        return avx2_hsum(_mm256_add_ps(acc0, acc1));                                           \
    }

QT_AVX2_DOT(avx2_dot_q8_0, qt_block_q8_0, avx2_q8_block)
QT_AVX2_DOT(avx2_dot_q4_0, qt_block_q4_0, avx2_q4_block)

const qt_block_kernels qt__kernels_avx2 = {"avx2", avx2_dot_q8_0, avx2_dot_q4_0};

/* --------------------------------------------------------------- AVX-512 */

#define QT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

/* Two blocks per 512-bit register: block b in lanes 0..7 (int32) or bytes
 * 0..31, block b + 1 above. */
QT_AVX512 static inline __m512i avx512_pair(__m256i lo, __m256i hi)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

QT_AVX512 static inline __m512i avx512_dot_us(__m512i u, __m512i s)
{
    return _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1));
}

QT_AVX512 static inline __m512i avx512_act_pair(const qt_block_q8_act *x)
{
    return avx512_pair(_mm256_loadu_si256((const __m256i *)x[0].qs),
                       _mm256_loadu_si256((const __m256i *)x[1].qs));
}

/* AVX-512 has no sign_epi8: x negated under the mask of w's negative bytes */
QT_AVX512 static inline __m512i avx512_q8_pair(const qt_block_q8_0 *w, const qt_block_q8_act *x)
{
    __m512i q = avx512_pair(_mm256_loadu_si256((const __m256i *)w[0].qs),
                            _mm256_loadu_si256((const __m256i *)w[1].qs));
    __m512i s = avx512_act_pair(x);
    s = _mm512_mask_sub_epi8(s, _mm512_movepi8_mask(q), _mm512_setzero_si512(), s);
    return avx512_dot_us(_mm512_abs_epi8(q), s);
}

QT_AVX512 static inline __m512i avx512_q4_pair(const qt_block_q4_0 *w, const qt_block_q8_act *x)
{
    __m512i n = avx512_pair(avx2_q4_nibbles(w[0].qs), avx2_q4_nibbles(w[1].qs));
    __m512i sums = _mm512_mask_blend_epi32(0xff00, _mm512_set1_epi32(x[0].sum),
                                           _mm512_set1_epi32(x[1].sum));
    return _mm512_sub_epi32(avx512_dot_us(n, avx512_act_pair(x)), sums);
}

#define QT_AVX512_DOT(name, wtype, pair, block)                                                \
    QT_AVX512 static float name(const wtype *w, const qt_block_q8_act *x, int64_t nblocks)     \
    {                                                                                           \
        __m512 acc = _mm512_setzero_ps();                                                       \
        int64_t b = 0;                                                                          \
        for (; b + 2 <= nblocks; b += 2) {                                                      \
            __m512 d = _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(_cvtsh_ss(w[b].d) * x[b].d), \
                                            _mm512_set1_ps(_cvtsh_ss(w[b + 1].d) * x[b + 1].d)); \
            acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(pair(&w[b], &x[b])), acc);             \
        }                                                                                       \
        __m256 tail = _mm256_setzero_ps();                                                      \
        if (b < nblocks)                                                                        \
            tail = avx2_scaled(block(&w[b], &x[b]), w[b].d, x[b].d, tail);                      \
        return _mm512_reduce_add_ps(acc) + avx2_hsum(tail);                                     \
    }

QT_AVX512_DOT(avx512_dot_q8_0, qt_block_q8_0, avx512_q8_pair, avx2_q8_block)
QT_AVX512_DOT(avx512_dot_q4_0, qt_block_q4_0, avx512_q4_pair, avx2_q4_block)

const qt_block_kernels qt__kernels_avx512 = {"avx512", avx512_dot_q8_0, avx512_dot_q4_0};

/* The OS must save the registers a variant uses (XCR0): a CPU may have
 * AVX-512 that its kernel or hypervisor keeps switched off. */
static bool os_saves(unsigned bits)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) /* OSXSAVE */
        return false;
    unsigned lo, hi;
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0)); /* xgetbv */
    (void)hi;
    return (lo & bits) == bits;
}

static bool runs_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c") && os_saves((1u << 1) | (1u << 2));
}

static bool runs_avx512(void)
{
    return runs_avx2() && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           os_saves((1u << 1) | (1u << 2) | (1u << 5) | (1u << 6) | (1u << 7));
}
#else
const qt_block_kernels qt__kernels_avx2 = {"avx2", NULL, NULL};
const qt_block_kernels qt__kernels_avx512 = {"avx512", NULL, NULL};
static bool runs_avx2(void)
{
    return false;
}
static bool runs_avx512(void)
{
    return false;
}
#endif

const qt_block_kernels *qt__kernels = &qt__kernels_scalar;

int qt__choose_kernels(void)
{
    const char *want = getenv("WEFT_QUANTIZED_KERNELS");
    bool avx512 = runs_avx512(), avx2 = runs_avx2();
    if (!want || !*want) {
        qt__kernels = avx512 ? &qt__kernels_avx512 : avx2 ? &qt__kernels_avx2 : &qt__kernels_scalar;
        return 0;
    }
    if (strcmp(want, "scalar") == 0)
        qt__kernels = &qt__kernels_scalar;
    else if (strcmp(want, "avx2") == 0 && avx2)
        qt__kernels = &qt__kernels_avx2;
    else if (strcmp(want, "avx512") == 0 && avx512)
        qt__kernels = &qt__kernels_avx512;
    else
        return weft_set_error(WEFT_ENOTSUP,
                              "quantized: WEFT_QUANTIZED_KERNELS=%s: expected scalar, avx2 or "
                              "avx512, one this CPU runs (avx2: %s, avx512: %s)",
                              want, avx2 ? "yes" : "no", avx512 ? "yes" : "no");
    return 0;
}
