/* backends/cpu/vec_math.h — float32 math eight lanes at a time, with GCC
 * vector extensions (AVX registers where the variant has them, SSE pairs in
 * the baseline build), for the kernels that would otherwise call scalar
 * libm per element: exp by range reduction to [-ln2/2, ln2/2] (Cody-Waite,
 * two-part ln 2) and Cephes' degree-6 polynomial (2 ulp) for x in
 * [-87, 88]; erfc by the Chebyshev fit of Numerical Recipes (relative
 * error below 1.2e-7, so gelu keeps its relative accuracy for negative
 * inputs), and for |z| <= 2.125 (gelu's |x| <= 3, where nearly all of a
 * network's activations lie) by exp(P(|z|) - z^2), P a degree-8 fit of
 * log erfcx (error 6.8e-8): no division, a quarter faster; gelu there
 * folds the same in base 2 (vec_gelu_small).  Callers check the range
 * (vec_within) and fall back to libm. */
#ifndef WEFT_BACKENDS_CPU_VEC_MATH_H
#define WEFT_BACKENDS_CPU_VEC_MATH_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#pragma GCC diagnostic ignored "-Wpsabi" /* static inline helpers: no ABI crossed */
typedef float vec_f32 __attribute__((vector_size(32)));
typedef int32_t vec_i32 __attribute__((vector_size(32)));
enum { VLANES = 8 };

static inline vec_f32 vec_load(const float *p)
{
    vec_f32 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void vec_store(float *p, vec_f32 v)
{
    memcpy(p, &v, sizeof v);
}

static inline vec_f32 vec_select(vec_i32 mask, vec_f32 yes, vec_f32 no)
{
    return (vec_f32)(((vec_i32)yes & mask) | ((vec_i32)no & ~mask));
}

static inline vec_f32 vec_max(vec_f32 a, vec_f32 b)
{
    return vec_select(a > b, a, b);
}

static inline float vec_hmax(vec_f32 v)
{
    float m = v[0];
    for (int k = 1; k < VLANES; k++)
        m = v[k] > m ? v[k] : m;
    return m;
}

static inline double vec_hsum(vec_f32 v)
{
    double s = 0;
    for (int k = 0; k < VLANES; k++)
        s += v[k];
    return s;
}

/* whether every lane of a comparison's mask is set */
static inline bool vec_all_true(vec_i32 in)
{
#if defined(__AVX__)
    return __builtin_ia32_movmskps256((vec_f32)in) == 0xff;
#elif defined(__clang__)
    /* clang spells GCC's shuffle differently; tests/fuzz.sh builds this
     * backend with clang's sanitizers */
    in &= __builtin_shufflevector(in, in, 4, 5, 6, 7, 0, 1, 2, 3);
    in &= __builtin_shufflevector(in, in, 2, 3, 0, 1, 2, 3, 0, 1);
    in &= __builtin_shufflevector(in, in, 1, 0, 1, 0, 1, 0, 1, 0);
    return in[0] != 0;
#else
    /* a tree of shuffles, not eight lane extractions */
    in &= __builtin_shuffle(in, (vec_i32){4, 5, 6, 7, 0, 1, 2, 3});
    in &= __builtin_shuffle(in, (vec_i32){2, 3, 0, 1, 2, 3, 0, 1});
    in &= __builtin_shuffle(in, (vec_i32){1, 0, 1, 0, 1, 0, 1, 0});
    return in[0] != 0;
#endif
}

/* whether every lane lies in [lo, hi] (false for NaN) */
static inline bool vec_within(vec_f32 a, float lo, float hi)
{
    return vec_all_true((a >= lo) & (a <= hi));
}

/* whether every element of x[0..n), n a multiple of VLANES, lies in
 * [lo, hi] (false for NaN): one test at the end, not one per block */
static inline bool vec_all_within(const float *x, int64_t n, float lo, float hi)
{
    vec_i32 in = ~(vec_i32){0};
    for (int64_t i = 0; i < n; i += VLANES) {
        vec_f32 a = vec_load(x + i);
        in &= (a >= lo) & (a <= hi);
    }
    return vec_all_true(in);
}

/* exp for x in [-87, 88] */
static inline vec_f32 vec_exp(vec_f32 x)
{
    /* n = x log2(e) rounded to nearest: adding 1.5 * 2^23 leaves n in
     * the low mantissa bits (two operations, where converting to int and
     * back with a floor correction took five) */
    const vec_f32 magic = {12582912.0f, 12582912.0f, 12582912.0f, 12582912.0f,
                           12582912.0f, 12582912.0f, 12582912.0f, 12582912.0f};
    vec_f32 big = x * 1.44269504088896341f + magic;
    vec_f32 nf = big - magic;
    vec_i32 n = (vec_i32)big - (vec_i32)magic;
    vec_f32 r = x - nf * 0.693359375f - nf * -2.12194440e-4f;
    vec_f32 p = r * 1.9875691500e-4f + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    vec_i32 scale = (n + 127) << 23;
    return p * (vec_f32)scale;
}

/* erfc(|z|) for |z| < 9 (Numerical Recipes' erfcc) */
static inline vec_f32 vec_erfc_abs(vec_f32 z)
{
    vec_f32 az = (vec_f32)((vec_i32)z & 0x7fffffff);
    vec_f32 t = 1.0f / (1.0f + 0.5f * az);
    vec_f32 q = t * 0.17087277f + -0.82215223f;
    q = q * t + 1.48851587f;
    q = q * t + -1.13520398f;
    q = q * t + 0.27886807f;
    q = q * t + -0.18628806f;
    q = q * t + 0.09678418f;
    q = q * t + 0.37409196f;
    q = q * t + 1.00002368f;
    q = q * t + -1.26551223f;
    return t * vec_exp(q - az * az);
}

static inline vec_f32 vec_sigmoid(vec_f32 a)
{
    return 1.0f / (1.0f + vec_exp(-a));
}

/* erfc(|z|) for |z| <= 2.125: erfc(z) = erfcx(z) exp(-z^2), with log
 * erfcx(z) fitted on [0, 2.125] (Chebyshev, degree 8, error 6.8e-8) and
 * -z^2 folded into the exponent in one FMA rounding */
static inline vec_f32 vec_erfc_abs_small(vec_f32 z)
{
    vec_f32 az = (vec_f32)((vec_i32)z & 0x7fffffff);
    vec_f32 p = az * -2.6545064973e-5f + 2.6125451484e-4f;
    p = p * az + -8.5433553619e-4f;
    p = p * az + -8.6964574005e-4f;
    p = p * az + 1.9915984178e-2f;
    p = p * az + -1.030939207e-1f;
    p = p * az + 3.6344603877e-1f;
    p = p * az + -1.1283843791f;
    p = p * az + 6.8282746337e-8f;
    return vec_exp(p - az * az);
}

/* gelu for |x| <= 3: h = Phi(-|x|) = erfc(|x| / sqrt 2) / 2 = 2^w with
 * w = Q(|x|) - x^2 log2(e) / 2, Q a fit of log2(erfcx(s / sqrt 2)) - 1 on
 * [0, 3] (Chebyshev, degree 8, error 9.7e-8), 2^w by rounding w to
 * nearest and a degree-6 polynomial for 2^r on [-1/2, 1/2]: base 2 and
 * the halving folded into Q spare exp's change of base and Cody-Waite
 * steps.  The -x^2 log2(e) / 2 term is folded into Q's s^2 coefficient,
 * and 2^n is applied by adding n to p's exponent bits (p is in [0.7, 1.42]
 * and n in [-9, -1]: no overflow, no subnormal): this loop is bound by the
 * two FMA pipes, and those two steps took 3 of its 19 multiplies
 * (measured in cache: 0.75 -> 0.65 ns an element, one thread).  Relative
 * error below 2.3e-7 (1 + x^2). */
static inline vec_f32 vec_gelu_small(vec_f32 a)
{
    vec_f32 s = (vec_f32)((vec_i32)a & 0x7fffffff);
    vec_f32 w = s * -2.4051083639e-6f + 3.3445831687e-5f;
    w = w * s + -1.5467108723e-4f;
    w = w * s + -2.2035450877e-4f;
    w = w * s + 7.1812879631e-3f;
    w = w * s + -5.2583750478e-2f;
    w = w * s + (2.6217043591e-1f - 0.72134752044448170368f);
    w = w * s + -1.1511093554f;
    w = w * s + -0.99999990278f;
    const vec_f32 magic = {12582912.0f, 12582912.0f, 12582912.0f, 12582912.0f,
                           12582912.0f, 12582912.0f, 12582912.0f, 12582912.0f};
    vec_f32 big = w + magic; /* w in [-8.5, -1]: rint(w) in big's low bits */
    vec_f32 r = w - (big - magic);
    vec_f32 p = r * 1.5453162945e-4f + 1.3390863365e-3f;
    p = p * r + 9.6180825573e-3f;
    p = p * r + 5.5503571142e-2f;
    p = p * r + 2.4022650761e-1f;
    p = p * r + 6.9314718803e-1f;
    p = p * r + 1.0f;
    /* big's bits are 0x4b400000 + n: shifted by 23 only n << 23 is left */
    vec_f32 h = (vec_f32)((vec_i32)p + ((vec_i32)big << 23));
    /* the multiply last: -0 keeps its sign (-0 - -0 * h would be +0) */
    return a * vec_select(a < 0.0f, h, 1.0f - h);
}

/* x Phi(x) = x erfc(-x / sqrt 2) / 2, as x (1 - erfc(|z|) / 2) for x >= 0
 * and x erfc(|z|) / 2 below (no cancellation: the relative error stays
 * bounded for negative x), x in [-9, 9]; a block with every |x| <= 3
 * takes the cheaper path above */
/* always inlined: a compiler-split out-of-line part would pass a 32-byte
 * vector in the baseline build, an ABI change GCC warns about */
static inline __attribute__((always_inline)) vec_f32 vec_gelu(vec_f32 a)
{
    if (vec_within(a, -3.0f, 3.0f))
        return vec_gelu_small(a);
    vec_f32 e = vec_erfc_abs(a * 0.70710678118654752f);
    vec_i32 neg = a < 0.0f;
    return 0.5f * a * vec_select(neg, e, 2.0f - e);
}

/* exp(x) for x <= 0 with underflow to 0 below -87 (where the true value is
 * below 1.7e-38): what softmax and log-sum-exp add up */
static inline vec_f32 vec_exp_nonpositive(vec_f32 x)
{
    vec_i32 tiny = x < -87.0f;
    vec_f32 e = vec_exp(vec_select(tiny, (vec_f32){0}, x));
    return vec_select(tiny, (vec_f32){0}, e);
}

/* out[i] = exp(x[i] - shift) for i < n, shift at least every x[i] (a
 * row's log-sum-exp: softmax's probabilities); NaN stays NaN. */
static inline void vec_exp_shifted(const float *x, int64_t n, float shift, float *out)
{
    int64_t i = 0;
    for (; i + VLANES <= n; i += VLANES) {
        vec_f32 v = vec_load(x + i) - shift;
        vec_i32 nan = v != v;
        vec_store(out + i, vec_select(nan, v, vec_exp_nonpositive(vec_select(nan, (vec_f32){0}, v))));
    }
    for (; i < n; i++)
        out[i] = expf(x[i] - shift);
}

/* The maximum of x[0..n) and sum of exp(x - max), vectorised; false (and
 * nothing written) when x holds a NaN or an infinite maximum, which the
 * caller's scalar loop handles with libm's semantics. */
static inline bool vec_max_sumexp(const float *x, int64_t n, float *max_out, double *sum_out)
{
    vec_f32 m = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY,
                 -INFINITY};
    vec_i32 nan = {0};
    int64_t i = 0;
    for (; i + VLANES <= n; i += VLANES) {
        vec_f32 v = vec_load(x + i);
        nan |= v != v;
        m = vec_max(v, m);
    }
    float mx = vec_hmax(m);
    int any_nan = 0;
    for (int k = 0; k < VLANES; k++)
        any_nan |= nan[k];
    for (; i < n; i++) {
        any_nan |= x[i] != x[i];
        mx = x[i] > mx ? x[i] : mx;
    }
    if (any_nan || mx == INFINITY || mx == -INFINITY)
        return false;
    vec_f32 s = {0};
    for (i = 0; i + VLANES <= n; i += VLANES)
        s += vec_exp_nonpositive(vec_load(x + i) - mx);
    double sum = vec_hsum(s);
    for (; i < n; i++)
        sum += x[i] - mx < -87.0f ? 0.0 : (double)expf(x[i] - mx);
    *max_out = mx;
    *sum_out = sum;
    return true;
}

#endif
