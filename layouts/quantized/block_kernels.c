/* layouts/quantized/block_kernels.c — the dot products of a row of Q8_0 or
 * Q4_0 blocks with float32 activations, which dequantize each block in
 * registers (widen the integers, convert, multiply-add, scale once per
 * block), written once per ISA: scalar, AVX2 and AVX-512.  The vector
 * versions are compiled for their ISA through target attributes, so this
 * one plugin carries all three and picks at load (qt__choose_kernels) the
 * widest this CPU and its OS run, as the CPU plugin's variants are picked
 * by score; WEFT_QUANTIZED_KERNELS names one to force it (the tests run
 * each in turn).  The order of the additions differs between variants:
 * results agree to rounding, not bit for bit. */
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

/* ---------------------------------------------------------------- scalar */

static float scalar_dot_q8_0(const qt_block_q8_0 *w, const float *x, int64_t nblocks)
{
    float sum = 0;
    for (int64_t b = 0; b < nblocks; b++, x += QT_BLOCK) {
        float s = 0;
        for (int j = 0; j < QT_BLOCK; j++)
            s += w[b].qs[j] * x[j];
        sum += s * qt__fp16_to_fp32(w[b].d);
    }
    return sum;
}

static float scalar_dot_q4_0(const qt_block_q4_0 *w, const float *x, int64_t nblocks)
{
    float sum = 0;
    for (int64_t b = 0; b < nblocks; b++, x += QT_BLOCK) {
        float s = 0;
        for (int j = 0; j < QT_BLOCK / 2; j++)
            s += ((w[b].qs[j] & 0xf) - 8) * x[j] + ((w[b].qs[j] >> 4) - 8) * x[j + 16];
        sum += s * qt__fp16_to_fp32(w[b].d);
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

/* 8 int8 at p (in the low half of an xmm) as 8 floats */
QT_AVX2 static inline __m256 avx2_widen(__m128i q8)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8));
}

/* sum_j q[j] * x[j] for the 32 int8 of one block, q given as two xmm */
QT_AVX2 static inline __m256 avx2_block(__m128i q0_15, __m128i q16_31, const float *x)
{
    __m256 t = _mm256_mul_ps(avx2_widen(q0_15), _mm256_loadu_ps(x));
    t = _mm256_fmadd_ps(avx2_widen(_mm_srli_si128(q0_15, 8)), _mm256_loadu_ps(x + 8), t);
    t = _mm256_fmadd_ps(avx2_widen(q16_31), _mm256_loadu_ps(x + 16), t);
    return _mm256_fmadd_ps(avx2_widen(_mm_srli_si128(q16_31, 8)), _mm256_loadu_ps(x + 24), t);
}

QT_AVX2 static inline __m256 avx2_scale(uint16_t d)
{
    return _mm256_set1_ps(_cvtsh_ss(d));
}

QT_AVX2 static inline void avx2_q4_nibbles(const uint8_t *qs, __m128i *lo, __m128i *hi)
{
    const __m128i mask = _mm_set1_epi8(0xf), eight = _mm_set1_epi8(8);
    __m128i m = _mm_loadu_si128((const __m128i *)qs);
    *lo = _mm_sub_epi8(_mm_and_si128(m, mask), eight);
    *hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(m, 4), mask), eight);
}

/* Two accumulators over alternate blocks: the multiply-add chain of one
 * block needs the last one's result, so one accumulator would wait on
 * the FMA latency every block. */
QT_AVX2 static float avx2_dot_q8_0(const qt_block_q8_0 *w, const float *x, int64_t nblocks)
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nblocks; b += 2, x += 2 * QT_BLOCK) {
        const __m128i *q0 = (const __m128i *)w[b].qs, *q1 = (const __m128i *)w[b + 1].qs;
        acc0 = _mm256_fmadd_ps(avx2_scale(w[b].d),
                               avx2_block(_mm_loadu_si128(q0), _mm_loadu_si128(q0 + 1), x), acc0);
        acc1 = _mm256_fmadd_ps(avx2_scale(w[b + 1].d),
                               avx2_block(_mm_loadu_si128(q1), _mm_loadu_si128(q1 + 1), x + 32),
                               acc1);
    }
    for (; b < nblocks; b++, x += QT_BLOCK) {
        const __m128i *q = (const __m128i *)w[b].qs;
        acc0 = _mm256_fmadd_ps(avx2_scale(w[b].d),
                               avx2_block(_mm_loadu_si128(q), _mm_loadu_si128(q + 1), x), acc0);
    }
    return avx2_hsum(_mm256_add_ps(acc0, acc1));
}

QT_AVX2 static float avx2_dot_q4_0(const qt_block_q4_0 *w, const float *x, int64_t nblocks)
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m128i lo, hi;
    int64_t b = 0;
    for (; b + 2 <= nblocks; b += 2, x += 2 * QT_BLOCK) {
        avx2_q4_nibbles(w[b].qs, &lo, &hi);
        acc0 = _mm256_fmadd_ps(avx2_scale(w[b].d), avx2_block(lo, hi, x), acc0);
        avx2_q4_nibbles(w[b + 1].qs, &lo, &hi);
        acc1 = _mm256_fmadd_ps(avx2_scale(w[b + 1].d), avx2_block(lo, hi, x + 32), acc1);
    }
    for (; b < nblocks; b++, x += QT_BLOCK) {
        avx2_q4_nibbles(w[b].qs, &lo, &hi);
        acc0 = _mm256_fmadd_ps(avx2_scale(w[b].d), avx2_block(lo, hi, x), acc0);
    }
    return avx2_hsum(_mm256_add_ps(acc0, acc1));
}

const qt_block_kernels qt__kernels_avx2 = {"avx2", avx2_dot_q8_0, avx2_dot_q4_0};

/* --------------------------------------------------------------- AVX-512 */

#define QT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,fma,f16c")))

/* sum_j q[j] * x[j] for one block, its 32 int8 as two xmm of 16 */
QT_AVX512 static inline __m512 avx512_block(__m128i q0_15, __m128i q16_31, const float *x)
{
    __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0_15)), _mm512_loadu_ps(x));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q16_31)),
                           _mm512_loadu_ps(x + 16), t);
}

QT_AVX512 static inline __m512 avx512_scale(uint16_t d)
{
    return _mm512_set1_ps(_cvtsh_ss(d));
}

QT_AVX512 static float avx512_dot_q8_0(const qt_block_q8_0 *w, const float *x, int64_t nblocks)
{
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nblocks; b += 2, x += 2 * QT_BLOCK) {
        const __m128i *q0 = (const __m128i *)w[b].qs, *q1 = (const __m128i *)w[b + 1].qs;
        acc0 = _mm512_fmadd_ps(avx512_scale(w[b].d),
                               avx512_block(_mm_loadu_si128(q0), _mm_loadu_si128(q0 + 1), x), acc0);
        acc1 = _mm512_fmadd_ps(avx512_scale(w[b + 1].d),
                               avx512_block(_mm_loadu_si128(q1), _mm_loadu_si128(q1 + 1), x + 32),
                               acc1);
    }
    for (; b < nblocks; b++, x += QT_BLOCK) {
        const __m128i *q = (const __m128i *)w[b].qs;
        acc0 = _mm512_fmadd_ps(avx512_scale(w[b].d),
                               avx512_block(_mm_loadu_si128(q), _mm_loadu_si128(q + 1), x), acc0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

QT_AVX512 static float avx512_dot_q4_0(const qt_block_q4_0 *w, const float *x, int64_t nblocks)
{
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    const __m128i mask = _mm_set1_epi8(0xf), eight = _mm_set1_epi8(8);
    int64_t b = 0;
    for (; b < nblocks; b++, x += QT_BLOCK) {
        __m128i m = _mm_loadu_si128((const __m128i *)w[b].qs);
        __m128i lo = _mm_sub_epi8(_mm_and_si128(m, mask), eight);
        __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(m, 4), mask), eight);
        __m512 t = avx512_block(lo, hi, x);
        if (b & 1)
            acc1 = _mm512_fmadd_ps(avx512_scale(w[b].d), t, acc1);
        else
            acc0 = _mm512_fmadd_ps(avx512_scale(w[b].d), t, acc0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

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
