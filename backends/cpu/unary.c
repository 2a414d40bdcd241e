/* backends/cpu/unary.c — the unary elementwise operators (arithmetic, libm
 * functions, rounding, activations, clamps, tests of values) and their
 * in-place and out= forms, on the elementwise iterator of elementwise.c.
 * Integer inputs of the floating-point functions give float32, as in
 * PyTorch.  Each loop body is written once and instantiated per dtype. */
#include <math.h>
#include <string.h>
#include <tgmath.h> /* exp, log, ... pick the float, double or complex version */

#include "cpu.h"
#include "vec_math.h"

/* One unary loop: reads IN (stored TI, computed CI), writes OUT (stored TO);
 * EXPR maps `a` to the result.  params, when not NULL, holds up to four
 * doubles, converted to CI as p0..p3 once per call (leaky_relu's slope,
 * clamp's bounds, ...). */
#define DEFINE_UNARY_LOOP(FN, IN, TI, CI, OUT, TO, EXPR)                         \
    static void FN(char **ptrs, const int64_t *st, int64_t n, const void *params) \
    {                                                                             \
        const double *pd_ = params;                                               \
        const CI p0 = pd_ ? cpu_from_double_##IN(pd_[0]) : (CI)0;                 \
        const CI p1 = pd_ ? cpu_from_double_##IN(pd_[1]) : (CI)0;                 \
        const CI p2 = pd_ ? cpu_from_double_##IN(pd_[2]) : (CI)0;                 \
        const CI p3 = pd_ ? cpu_from_double_##IN(pd_[3]) : (CI)0;                 \
        (void)p0, (void)p1, (void)p2, (void)p3;                                   \
        TO *o = (TO *)ptrs[0];                                                    \
        const TI *x = (const TI *)ptrs[1];                                        \
        if (n == 1) { /* one element: no strides, no vector loop set-up */        \
            const CI a = cpu_load_##IN(*x);                                       \
            (void)a;                                                              \
            *o = cpu_store_##OUT(EXPR);                                           \
        } else if (st[0] == (int64_t)sizeof(TO) && st[1] == (int64_t)sizeof(TI)) { \
            _Pragma("GCC ivdep") for (int64_t i = 0; i < n; i++) {                \
                const CI a = cpu_load_##IN(x[i]);                                 \
                (void)a;                                                          \
                o[i] = cpu_store_##OUT(EXPR);                                     \
            }                                                                     \
        } else {                                                                  \
            for (int64_t i = 0; i < n; i++) {                                     \
                const CI a = cpu_load_##IN(*(const TI *)(ptrs[1] + i * st[1]));   \
                (void)a;                                                          \
                *(TO *)(ptrs[0] + i * st[0]) = cpu_store_##OUT(EXPR);             \
            }                                                                     \
        }                                                                         \
    }

/* Loops whose result has the input's dtype: OP_NAME for dtype NAME. */
#define SAME_TYPE_LOOP(OP, NAME, T, C, EXPR) DEFINE_UNARY_LOOP(OP##_##NAME, NAME, T, C, NAME, T, EXPR)

/* neg: integers wrap through U (so -INT_MIN is INT_MIN, not undefined) */
#define NEG_WRAP(NAME, DTYPE, T, C, U) SAME_TYPE_LOOP(neg, NAME, T, C, (C)((U)0 - (U)a))
#define NEG_PLAIN(NAME, DTYPE, T, C, U) SAME_TYPE_LOOP(neg, NAME, T, C, -a)
CPU_DTYPES_INTEGRAL(NEG_WRAP)
CPU_DTYPES_FLOATING(NEG_PLAIN)
CPU_DTYPES_COMPLEX(NEG_PLAIN)

/* abs: unsigned values are their own; complex gives its real type; bool
 * has none (as in PyTorch) */
#define ABS_IDENTITY(NAME, DTYPE, T, C, U) SAME_TYPE_LOOP(abs, NAME, T, C, a)
#define ABS_SIGNED(NAME, DTYPE, T, C, U) \
    SAME_TYPE_LOOP(abs, NAME, T, C, (C)(a < 0 ? (U)0 - (U)a : (U)a))
#define ABS_FLOATING(NAME, DTYPE, T, C, U) SAME_TYPE_LOOP(abs, NAME, T, C, fabs(a))
CPU_DTYPES_UNSIGNED(ABS_IDENTITY)
CPU_DTYPES_SIGNED(ABS_SIGNED)
CPU_DTYPES_FLOATING(ABS_FLOATING)
DEFINE_UNARY_LOOP(abs_complex64, complex64, float _Complex, float _Complex, float32, float, fabs(a))
DEFINE_UNARY_LOOP(abs_complex128, complex128, double _Complex, double _Complex, float64, double,
                  fabs(a))

/* the floating-point functions; for complex numbers the ones libm lacks
 * are composed (exp2 z = exp(z ln 2), ...) */
#define FLOAT_FUNCTIONS(NAME, DTYPE, T, C, U)                           \
    SAME_TYPE_LOOP(exp, NAME, T, C, exp(a))                             \
    SAME_TYPE_LOOP(log, NAME, T, C, log(a))                             \
    SAME_TYPE_LOOP(sqrt, NAME, T, C, sqrt(a))                           \
    SAME_TYPE_LOOP(tanh, NAME, T, C, tanh(a))                           \
    SAME_TYPE_LOOP(sigmoid, NAME, T, C, (C)1 / ((C)1 + exp(-a)))        \
    SAME_TYPE_LOOP(rsqrt, NAME, T, C, (C)1 / sqrt(a))                   \
    SAME_TYPE_LOOP(reciprocal, NAME, T, C, (C)1 / a)                    \
    SAME_TYPE_LOOP(sin, NAME, T, C, sin(a))                             \
    SAME_TYPE_LOOP(cos, NAME, T, C, cos(a))                             \
    SAME_TYPE_LOOP(tan, NAME, T, C, tan(a))                             \
    SAME_TYPE_LOOP(asin, NAME, T, C, asin(a))                           \
    SAME_TYPE_LOOP(acos, NAME, T, C, acos(a))                           \
    SAME_TYPE_LOOP(atan, NAME, T, C, atan(a))                           \
    SAME_TYPE_LOOP(sinh, NAME, T, C, sinh(a))                           \
    SAME_TYPE_LOOP(cosh, NAME, T, C, cosh(a))
#define REAL_FUNCTIONS(NAME, DTYPE, T, C, U)                            \
    SAME_TYPE_LOOP(exp2, NAME, T, C, exp2(a))                           \
    SAME_TYPE_LOOP(expm1, NAME, T, C, expm1(a))                         \
    SAME_TYPE_LOOP(log1p, NAME, T, C, log1p(a))                         \
    SAME_TYPE_LOOP(log2, NAME, T, C, log2(a))                           \
    SAME_TYPE_LOOP(log10, NAME, T, C, log10(a))
#define COMPLEX_FUNCTIONS(NAME, DTYPE, T, C, U)                         \
    SAME_TYPE_LOOP(exp2, NAME, T, C, exp(a * (C)0.69314718055994530942)) \
    SAME_TYPE_LOOP(expm1, NAME, T, C, exp(a) - (C)1)                    \
    SAME_TYPE_LOOP(log1p, NAME, T, C, log((C)1 + a))                    \
    SAME_TYPE_LOOP(log2, NAME, T, C, log(a) * (C)1.44269504088896340736) \
    SAME_TYPE_LOOP(log10, NAME, T, C, log(a) * (C)0.43429448190325182765)
CPU_DTYPES_FLOATING(FLOAT_FUNCTIONS)
CPU_DTYPES_COMPLEX(FLOAT_FUNCTIONS)
CPU_DTYPES_FLOATING(REAL_FUNCTIONS)
CPU_DTYPES_COMPLEX(COMPLEX_FUNCTIONS)

/* relu keeps NaN and -0.0, as PyTorch's does */
#define RELU_INTEGRAL(NAME, DTYPE, T, C, U) SAME_TYPE_LOOP(relu, NAME, T, C, a > 0 ? a : 0)
#define RELU_FLOATING(NAME, DTYPE, T, C, U) SAME_TYPE_LOOP(relu, NAME, T, C, a < 0 ? 0 : a)
CPU_DTYPES_INTEGRAL(RELU_INTEGRAL)
CPU_DTYPES_FLOATING(RELU_FLOATING)

/* sign as PyTorch computes it, (0 < a) - (a < 0): NaN and -0.0 give 0 */
#define SIGN_SIGNED(NAME, DTYPE, T, C, U) SAME_TYPE_LOOP(sign, NAME, T, C, (C)((0 < a) - (a < 0)))
#define SIGN_UNSIGNED(NAME, DTYPE, T, C, U) SAME_TYPE_LOOP(sign, NAME, T, C, (C)(a > 0))
CPU_DTYPES_BOOL(SIGN_UNSIGNED)
CPU_DTYPES_UNSIGNED(SIGN_UNSIGNED)
CPU_DTYPES_SIGNED(SIGN_SIGNED)
CPU_DTYPES_FLOATING(SIGN_SIGNED)

/* rounding: integers are already whole; round is half to even */
#define ROUNDING_IDENTITY(NAME, DTYPE, T, C, U)                         \
    SAME_TYPE_LOOP(floor, NAME, T, C, a)                                \
    SAME_TYPE_LOOP(ceil, NAME, T, C, a)                                 \
    SAME_TYPE_LOOP(round, NAME, T, C, a)                                \
    SAME_TYPE_LOOP(trunc, NAME, T, C, a)
#define ROUNDING_FLOATING(NAME, DTYPE, T, C, U)                         \
    SAME_TYPE_LOOP(floor, NAME, T, C, floor(a))                         \
    SAME_TYPE_LOOP(ceil, NAME, T, C, ceil(a))                           \
    SAME_TYPE_LOOP(round, NAME, T, C, nearbyint(a))                     \
    SAME_TYPE_LOOP(trunc, NAME, T, C, trunc(a))
CPU_DTYPES_INTEGRAL(ROUNDING_IDENTITY)
CPU_DTYPES_FLOATING(ROUNDING_FLOATING)

/* bitwise_not: ~ on integers, ! on bool */
#define BITWISE_NOT(NAME, DTYPE, T, C, U) SAME_TYPE_LOOP(bitwise_not, NAME, T, C, (C)~a)
SAME_TYPE_LOOP(bitwise_not, boolean, bool, bool, !a)
CPU_DTYPES_INTEGRAL(BITWISE_NOT)

/* activations, computed in C (float for float16/bfloat16); max-style
 * comparisons are written so that NaN passes through */
#define SELU_ALPHA 1.6732632423543772848170429916717
#define SELU_SCALE 1.0507009873554804934193349852946
#define ACTIVATIONS(NAME, DTYPE, T, C, U)                                                   \
    SAME_TYPE_LOOP(silu, NAME, T, C, a / ((C)1 + exp(-a)))                                  \
    SAME_TYPE_LOOP(mish, NAME, T, C, a * tanh(log1p(exp(a))))                               \
    SAME_TYPE_LOOP(selu, NAME, T, C,                                                        \
                   a > 0 ? (C)SELU_SCALE * a : (C)(SELU_SCALE * SELU_ALPHA) * expm1(a))     \
    SAME_TYPE_LOOP(hardsigmoid, NAME, T, C, hard_step_##NAME(a) / (C)6)                     \
    SAME_TYPE_LOOP(hardswish, NAME, T, C, a * hard_step_##NAME(a) / (C)6)                   \
    SAME_TYPE_LOOP(logsigmoid, NAME, T, C, (a < 0 ? a : (C)0) - log1p(exp(-fabs(a))))       \
    SAME_TYPE_LOOP(leaky_relu, NAME, T, C, a > 0 ? a : a * p0)                              \
    SAME_TYPE_LOOP(elu, NAME, T, C, a > 0 ? a * p1 : expm1(a * p2) * p0 * p1)               \
    SAME_TYPE_LOOP(gelu, NAME, T, C, (C)0.5 * a * erfc(a * (C)-0.70710678118654752440)) \
    SAME_TYPE_LOOP(gelu_tanh, NAME, T, C,                                                   \
                   (C)0.5 * a *                                                             \
                       ((C)1 + tanh((C)0.79788456080286535588 * (a + (C)0.044715 * a * a * a)))) \
    SAME_TYPE_LOOP(softplus, NAME, T, C, a * p0 > p1 ? a : log1p(exp(a * p0)) / p0)
/* min(max(a + 3, 0), 6), NaN kept */
#define HARD_STEP(NAME, DTYPE, T, C, U)                                 \
    static inline C hard_step_##NAME(C a)                               \
    {                                                                   \
        C b = a + 3;                                                    \
        return b < 0 ? (C)0 : b > 6 ? (C)6 : b;                         \
    }
CPU_DTYPES_FLOATING(HARD_STEP)
CPU_DTYPES_FLOATING(ACTIVATIONS)

/* hardtanh (relu6 is hardtanh(0, 6)) and clamp: p0, p1 are the bounds;
 * clamp's p2, p3 say whether each bound is given.  NaN passes through. */
#define CLAMPS(NAME, DTYPE, T, C, U)                                                  \
    SAME_TYPE_LOOP(hardtanh, NAME, T, C, a < p0 ? p0 : a > p1 ? p1 : a)               \
    SAME_TYPE_LOOP(clamp, NAME, T, C,                                                 \
                   p3 && (p2 && a < p0 ? p0 : a) > p1 ? p1 : (p2 && a < p0 ? p0 : a))
CPU_DTYPES_INTEGRAL(CLAMPS)
CPU_DTYPES_FLOATING(CLAMPS)

/* nan_to_num: p0 for NaN, p1 for +inf, p2 for -inf; integers are kept */
#define NAN_TO_NUM_FLOATING(NAME, DTYPE, T, C, U) \
    SAME_TYPE_LOOP(nan_to_num, NAME, T, C, a != a ? p0 : a == (C)INFINITY ? p1 : a == -(C)INFINITY ? p2 : a)
#define NAN_TO_NUM_IDENTITY(NAME, DTYPE, T, C, U) SAME_TYPE_LOOP(nan_to_num, NAME, T, C, a)
CPU_DTYPES_BOOL(NAN_TO_NUM_IDENTITY)
CPU_DTYPES_INTEGRAL(NAN_TO_NUM_IDENTITY)
CPU_DTYPES_FLOATING(NAN_TO_NUM_FLOATING)

/* tests with a bool result */
#define BOOL_LOOP(OP, NAME, T, C, EXPR) DEFINE_UNARY_LOOP(OP##_##NAME, NAME, T, C, boolean, bool, EXPR)
#define TESTS_EXACT(NAME, DTYPE, T, C, U)                               \
    BOOL_LOOP(isnan, NAME, T, C, false)                                 \
    BOOL_LOOP(isinf, NAME, T, C, false)                                 \
    BOOL_LOOP(isfinite, NAME, T, C, true)                               \
    BOOL_LOOP(logical_not, NAME, T, C, !a)
#define TESTS_FLOATING(NAME, DTYPE, T, C, U)                            \
    BOOL_LOOP(isnan, NAME, T, C, a != a)                                \
    BOOL_LOOP(isinf, NAME, T, C, isinf(a))                              \
    BOOL_LOOP(isfinite, NAME, T, C, isfinite(a))                        \
    BOOL_LOOP(logical_not, NAME, T, C, a == 0)
#define TESTS_COMPLEX(NAME, DTYPE, T, C, U)                                             \
    BOOL_LOOP(isnan, NAME, T, C, __real__ a != __real__ a || __imag__ a != __imag__ a)    \
    BOOL_LOOP(isinf, NAME, T, C, isinf(__real__ a) || isinf(__imag__ a))                \
    BOOL_LOOP(isfinite, NAME, T, C, isfinite(__real__ a) && isfinite(__imag__ a))       \
    BOOL_LOOP(logical_not, NAME, T, C, a == 0)
CPU_DTYPES_BOOL(TESTS_EXACT)
CPU_DTYPES_INTEGRAL(TESTS_EXACT)
CPU_DTYPES_FLOATING(TESTS_FLOATING)
CPU_DTYPES_COMPLEX(TESTS_COMPLEX)

/* ------------------------------------- vectorised float32 exp, sigmoid, gelu */

/* libm's expf and erff are scalar calls: exp, sigmoid and gelu on large
 * float32 tensors ran at a tenth of memory bandwidth.  These go eight lanes
 * at a time (vec_math.h).  A block of eight with any lane outside the
 * polynomials' range, or NaN, is done by the scalar libm loop, so edge
 * cases (inf, NaN, overflow, subnormal results) are exactly libm's.
 *
 * The range is checked a window ahead (4 KiB, still in L1 when the
 * polynomials read it) with one test for the whole window, and a window
 * found inside goes through OP_float32_run, a loop with no call in it: a
 * call inside the loop (the libm fallback) clobbers every vector
 * register, and the compiler then reloaded the polynomials' constants and
 * spilled for every block; that and a test per block cost gelu a third of
 * its speed.  (Two blocks per iteration were slower still: the constants
 * of two interleaved evaluations do not fit in sixteen registers.) */
enum { VEC_WINDOW = 1024 }; /* elements checked ahead of the polynomials */
#define VECTOR_FLOAT32_RUN(OP, VEXPR)                                                   \
    static __attribute__((noinline)) void OP##_float32_run(float *o, const float *x,    \
                                                           int64_t n)                   \
    {                                                                                   \
        for (int64_t i = 0; i < n; i += VLANES)                                         \
            vec_store(o + i, VEXPR(vec_load(x + i)));                                   \
    }
/* OP_float32_vec over OP_float32_run (n a multiple of VLANES, every
 * value within [LO, HI]) */
#define VECTOR_FLOAT32_LOOP(OP, VEXPR, LO, HI)                                          \
    VECTOR_FLOAT32_RUN(OP, VEXPR)                                                       \
    VECTOR_FLOAT32_WINDOWS(OP, LO, HI)
#define VECTOR_FLOAT32_WINDOWS(OP, LO, HI) VECTOR_FLOAT32_WINDOWS_FAST(OP, LO, HI, LO, HI, OP##_float32_run)
/* The same with a narrower range [FLO, FHI] whose windows go to FAST, a run
 * with no test at all (gelu's |x| <= 3); the wider range is tested only
 * for windows outside the narrow one. */
#define VECTOR_FLOAT32_WINDOWS_FAST(OP, LO, HI, FLO, FHI, FAST)                          \
    static void OP##_float32_vec(char **ptrs, const int64_t *st, int64_t n,             \
                                 const void *params)                                    \
    {                                                                                   \
        if (n < VLANES || st[0] != 4 || st[1] != 4) {                                    \
            OP##_float32(ptrs, st, n, params);                                          \
            return;                                                                     \
        }                                                                               \
        float *o = (float *)ptrs[0];                                                    \
        const float *x = (const float *)ptrs[1];                                        \
        int64_t i = 0, full = n - n % VLANES;                                           \
        for (; i < full; i = i + VEC_WINDOW < full ? i + VEC_WINDOW : full) {            \
            int64_t stop = i + VEC_WINDOW < full ? i + VEC_WINDOW : full;                \
            if (vec_all_within(x + i, stop - i, FLO, FHI)) {                            \
                FAST(o + i, x + i, stop - i);                                           \
                continue;                                                               \
            }                                                                           \
            if ((FLO != LO || FHI != HI) && vec_all_within(x + i, stop - i, LO, HI)) {  \
                OP##_float32_run(o + i, x + i, stop - i);                               \
                continue;                                                               \
            }                                                                           \
            /* block by block within this window only: a window is tested   \
             * once, however many of its blocks fall outside */                         \
            for (int64_t j = i; j < stop;) {                                            \
                int64_t k = j;                                                          \
                while (k < stop && vec_within(vec_load(x + k), LO, HI))                 \
                    k += VLANES;                                                        \
                if (k > j)                                                              \
                    OP##_float32_run(o + j, x + j, k - j);                              \
                if (k < stop) { /* a block with a lane outside: libm */                 \
                    char *p[2] = {(char *)(o + k), (char *)(x + k)};                    \
                    OP##_float32(p, st, VLANES, params);                                \
                    k += VLANES;                                                        \
                }                                                                       \
                j = k;                                                                  \
            }                                                                           \
        }                                                                               \
        if (i < n) {                                                                    \
            char *p[2] = {(char *)(o + i), (char *)(x + i)};                            \
            OP##_float32(p, st, n - i, params);                                         \
        }                                                                               \
    }
VECTOR_FLOAT32_LOOP(exp, vec_exp, -87.0f, 88.0f)
VECTOR_FLOAT32_LOOP(sigmoid, vec_sigmoid, -87.0f, 87.0f)
/* gelu: a window with every |x| <= 3 (nearly all of them, even for
 * normally distributed activations) takes vec_gelu_small with no further
 * test; in other windows, sixty-four values at a time with every
 * |x| <= 3 still do, and the rest take vec_gelu (a test per block of
 * eight and both paths in one loop made it a third slower).  Testing the
 * narrow range per window instead of per group took one of the two passes
 * over the input off the common case. */
enum { GELU_GROUP = 64 };
static __attribute__((noinline)) void gelu_float32_small_run(float *o, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i += VLANES)
        vec_store(o + i, vec_gelu_small(vec_load(x + i)));
}
static __attribute__((noinline)) void gelu_float32_run(float *o, const float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + GELU_GROUP <= n; i += GELU_GROUP) {
        vec_i32 small = ~(vec_i32){0};
        for (int k = 0; k < GELU_GROUP; k += VLANES)
            small &= (vec_f32)((vec_i32)vec_load(x + i + k) & 0x7fffffff) <= 3.0f;
        if (vec_all_true(small))
            for (int k = 0; k < GELU_GROUP; k += VLANES)
                vec_store(o + i + k, vec_gelu_small(vec_load(x + i + k)));
        else
            for (int k = 0; k < GELU_GROUP; k += VLANES)
                vec_store(o + i + k, vec_gelu(vec_load(x + i + k)));
    }
    for (; i < n; i += VLANES)
        vec_store(o + i, vec_gelu(vec_load(x + i)));
}
VECTOR_FLOAT32_WINDOWS_FAST(gelu, -9.0f, 9.0f, -3.0f, 3.0f, gelu_float32_small_run)

/* ----------------------------------------------------------- loop tables */

#define FLOATING_COMPLEX(OP) CPU_ENTRIES_FLOATING(OP) CPU_ENTRIES_COMPLEX(OP)
#define INTEGRAL_FLOATING(OP) CPU_ENTRIES_INTEGRAL(OP) CPU_ENTRIES_FLOATING(OP)
#define NUMERIC(OP) CPU_ENTRIES_INTEGRAL(OP) CPU_ENTRIES_FLOATING(OP) CPU_ENTRIES_COMPLEX(OP)
#define ALL(OP) CPU_ENTRIES_BOOL(OP) NUMERIC(OP)
/* OP_loops[dtype]; a NULL entry is "not supported for dtype X" */
#define TABLE(OP, ENTRIES) static const cpu_loop_fn OP##_loops[WEFT_NUM_DTYPES] = {ENTRIES(OP)};
TABLE(neg, NUMERIC)
TABLE(abs, NUMERIC)
TABLE(relu, INTEGRAL_FLOATING)
/* float32 through the vector loops above */
static const cpu_loop_fn exp_loops[WEFT_NUM_DTYPES] = {
    [WEFT_FLOAT16] = exp_float16, [WEFT_BFLOAT16] = exp_bfloat16, [WEFT_FLOAT32] = exp_float32_vec,
    [WEFT_FLOAT64] = exp_float64, CPU_ENTRIES_COMPLEX(exp)};
TABLE(log, FLOATING_COMPLEX)
TABLE(sqrt, FLOATING_COMPLEX)
TABLE(tanh, FLOATING_COMPLEX)
static const cpu_loop_fn sigmoid_loops[WEFT_NUM_DTYPES] = {
    [WEFT_FLOAT16] = sigmoid_float16, [WEFT_BFLOAT16] = sigmoid_bfloat16,
    [WEFT_FLOAT32] = sigmoid_float32_vec, [WEFT_FLOAT64] = sigmoid_float64,
    CPU_ENTRIES_COMPLEX(sigmoid)};
TABLE(rsqrt, FLOATING_COMPLEX)
TABLE(reciprocal, FLOATING_COMPLEX)
TABLE(sin, FLOATING_COMPLEX)
TABLE(cos, FLOATING_COMPLEX)
TABLE(tan, FLOATING_COMPLEX)
TABLE(asin, FLOATING_COMPLEX)
TABLE(acos, FLOATING_COMPLEX)
TABLE(atan, FLOATING_COMPLEX)
TABLE(sinh, FLOATING_COMPLEX)
TABLE(cosh, FLOATING_COMPLEX)
TABLE(exp2, FLOATING_COMPLEX)
TABLE(expm1, FLOATING_COMPLEX)
TABLE(log1p, FLOATING_COMPLEX)
TABLE(log2, FLOATING_COMPLEX)
TABLE(log10, FLOATING_COMPLEX)
static const cpu_loop_fn sign_loops[WEFT_NUM_DTYPES] = {CPU_ENTRIES_BOOL(sign)
                                                        INTEGRAL_FLOATING(sign)};
TABLE(floor, INTEGRAL_FLOATING)
TABLE(ceil, INTEGRAL_FLOATING)
TABLE(round, INTEGRAL_FLOATING)
TABLE(trunc, INTEGRAL_FLOATING)
static const cpu_loop_fn bitwise_not_loops[WEFT_NUM_DTYPES] = {
    CPU_ENTRIES_BOOL(bitwise_not) CPU_ENTRIES_INTEGRAL(bitwise_not)};
TABLE(silu, CPU_ENTRIES_FLOATING)
TABLE(mish, CPU_ENTRIES_FLOATING)
TABLE(selu, CPU_ENTRIES_FLOATING)
TABLE(hardsigmoid, CPU_ENTRIES_FLOATING)
TABLE(hardswish, CPU_ENTRIES_FLOATING)
TABLE(logsigmoid, CPU_ENTRIES_FLOATING)
TABLE(leaky_relu, CPU_ENTRIES_FLOATING)
TABLE(elu, CPU_ENTRIES_FLOATING)
static const cpu_loop_fn gelu_loops[WEFT_NUM_DTYPES] = {
    [WEFT_FLOAT16] = gelu_float16, [WEFT_BFLOAT16] = gelu_bfloat16, [WEFT_FLOAT32] = gelu_float32_vec,
    [WEFT_FLOAT64] = gelu_float64};
TABLE(gelu_tanh, CPU_ENTRIES_FLOATING)
TABLE(softplus, CPU_ENTRIES_FLOATING)
TABLE(hardtanh, INTEGRAL_FLOATING)
TABLE(clamp, INTEGRAL_FLOATING)
static const cpu_loop_fn nan_to_num_loops[WEFT_NUM_DTYPES] = {CPU_ENTRIES_BOOL(nan_to_num)
                                                              INTEGRAL_FLOATING(nan_to_num)};
TABLE(isnan, ALL)
TABLE(isinf, ALL)
TABLE(isfinite, ALL)
TABLE(logical_not, ALL)

/* ---------------------------------------------------------------- kernels */

/* What an operator's arguments after self make of its loop: prepare
 * fills p (the loop's p0..p3), may change the compute dtype (clamp
 * promotes an integer tensor with a fractional bound to float32) or the
 * table (gelu's approximation).  Returns 0 or an error. */
typedef struct unary_args {
    const char *op;
    const weft_value *args; /* the arguments after self */
    int nargs;
    weft_dtype dtype;
    const cpu_loop_fn *loops;
    double p[4];
} unary_args;
typedef int (*unary_prepare)(unary_args *u);

typedef enum unary_result {
    RESULT_SAME,  /* the input's dtype */
    RESULT_FLOAT, /* integer and bool inputs compute in float32 */
    RESULT_BOOL   /* a test: bool whatever the input */
} unary_result;

typedef struct unary_op {
    const cpu_loop_fn *loops;
    unary_result result;
    unary_prepare prepare; /* NULL: no parameters */
    bool is_abs;           /* complex input gives a real result */
    bool is_neg;
} unary_op;

typedef struct unary_form {
    const unary_op *op;
    cpu_mode mode;
} unary_form;

static int unary_kernel(weft_call *call, void *ctx)
{
    const unary_form *form = ctx;
    const unary_op *u = form->op;
    const int first = form->mode == CPU_OUT ? 1 : 0;
    weft_tensor *self = call->args[first].u.tensor;
    const weft_dtype self_dtype = weft_tensor_dtype(self);
    weft_dtype in = self_dtype, result;

    if (u->is_neg && in == WEFT_BOOL)
        return weft_set_error(WEFT_EDTYPE,
                              "%s: negation, the `-` operator, on a bool tensor is not supported; "
                              "to invert a mask use logical_not() instead",
                              weft_op_name(call->op));
    /* integral (bool included) and complex by the SDK's dtype order */
    if (u->result == RESULT_FLOAT && in >= WEFT_BOOL && in <= WEFT_INT64)
        in = WEFT_FLOAT32;
    const cpu_loop_fn *loops = u->loops;
    const void *params = NULL;
    unary_args a;
    if (u->prepare) {
        a = (unary_args){weft_op_name(call->op), call->args + first + 1,
                         call->nargs - first - 1, in, loops, {0, 0, 0, 0}};
        int rc = u->prepare(&a);
        if (rc < 0)
            return rc;
        in = a.dtype;
        loops = a.loops;
        params = a.p;
    }
    result = u->result == RESULT_BOOL ? WEFT_BOOL : in;
    if (u->is_abs && (in == WEFT_COMPLEX64 || in == WEFT_COMPLEX128)) {
        if (form->mode == CPU_INPLACE)
            return weft_set_error(WEFT_EDTYPE, "%s: in-place abs is not supported for complex "
                                  "tensors (the result is real)", weft_op_name(call->op));
        result = in == WEFT_COMPLEX64 ? WEFT_FLOAT32 : WEFT_FLOAT64;
    }
    if (in < 0 || in >= WEFT_NUM_DTYPES || !loops[in])
        return cpu__unsupported_dtype(weft_op_name(call->op), self_dtype);
    cpu_map m = {NULL, in, result, loops[in], params}; /* cpu__map names the op if need be */
    return cpu__map(call, form->mode, &m, &self, 1);
}

/* ------------------------------------------------ parameters of the ops */

/* Scalar argument i, or `fallback` when absent or None. */
static double scalar_or(const unary_args *u, int i, double fallback)
{
    if (i >= u->nargs || u->args[i].tag == WEFT_VALUE_NONE)
        return fallback;
    return weft_value_double(&u->args[i]);
}

static int prepare_leaky_relu(unary_args *u)
{
    u->p[0] = scalar_or(u, 0, 0.01);
    return 0;
}

static int prepare_elu(unary_args *u)
{
    u->p[0] = scalar_or(u, 0, 1); /* alpha */
    u->p[1] = scalar_or(u, 1, 1); /* scale */
    u->p[2] = scalar_or(u, 2, 1); /* input_scale */
    return 0;
}

static int prepare_softplus(unary_args *u)
{
    u->p[0] = scalar_or(u, 0, 1);  /* beta */
    u->p[1] = scalar_or(u, 1, 20); /* threshold */
    return 0;
}

static int prepare_gelu(unary_args *u)
{
    const char *approximate = u->nargs > 0 && u->args[0].tag == WEFT_VALUE_STRING
                                  ? u->args[0].u.string
                                  : "none";
    if (strcmp(approximate, "tanh") == 0)
        u->loops = gelu_tanh_loops;
    else if (strcmp(approximate, "none") != 0)
        return weft_set_error(WEFT_EINVAL, "%s: approximate argument must be either none or "
                              "tanh (got '%s')", u->op, approximate);
    return 0;
}

static int prepare_hardtanh(unary_args *u)
{
    u->p[0] = scalar_or(u, 0, -1);
    u->p[1] = scalar_or(u, 1, 1);
    if (u->dtype == WEFT_BOOL)
        return cpu__unsupported_dtype(u->op, u->dtype);
    return 0;
}

static int prepare_relu6(unary_args *u)
{
    u->p[0] = 0;
    u->p[1] = 6;
    return 0;
}

/* clamp, clamp_min, clamp_max: a fractional bound makes an integer tensor
 * compute in float32, as the Scalar promotion rule says. */
static int prepare_clamp_bounds(unary_args *u, const weft_value *lo, const weft_value *hi)
{
    bool has_lo = lo && lo->tag != WEFT_VALUE_NONE, has_hi = hi && hi->tag != WEFT_VALUE_NONE;
    if (!has_lo && !has_hi)
        return weft_set_error(WEFT_EINVAL, "%s: at least one of 'min' or 'max' must not be None",
                              u->op);
    if (u->dtype == WEFT_BOOL)
        return cpu__unsupported_dtype(u->op, u->dtype);
    if (has_lo)
        u->dtype = cpu_scalar_result_type(u->dtype, lo, weft_value_double(lo));
    if (has_hi)
        u->dtype = cpu_scalar_result_type(u->dtype, hi, weft_value_double(hi));
    u->p[0] = has_lo ? weft_value_double(lo) : 0;
    u->p[1] = has_hi ? weft_value_double(hi) : 0;
    u->p[2] = has_lo;
    u->p[3] = has_hi;
    return 0;
}

static int prepare_clamp(unary_args *u)
{
    return prepare_clamp_bounds(u, u->nargs > 0 ? &u->args[0] : NULL,
                                u->nargs > 1 ? &u->args[1] : NULL);
}

static int prepare_clamp_min(unary_args *u)
{
    return prepare_clamp_bounds(u, &u->args[0], NULL);
}

static int prepare_clamp_max(unary_args *u)
{
    return prepare_clamp_bounds(u, NULL, &u->args[0]);
}

/* posinf and neginf default to the dtype's largest finite values */
static int prepare_nan_to_num(unary_args *u)
{
    static const double largest[WEFT_NUM_DTYPES] = {
        [WEFT_FLOAT16] = 65504.0, [WEFT_BFLOAT16] = 0x1.fep127, [WEFT_FLOAT32] = 0x1.fffffep127,
        [WEFT_FLOAT64] = 0x1.fffffffffffffp1023};
    double big = u->dtype >= 0 && u->dtype < WEFT_NUM_DTYPES ? largest[u->dtype] : 0;
    u->p[0] = scalar_or(u, 0, 0);
    u->p[1] = scalar_or(u, 1, big);
    u->p[2] = scalar_or(u, 2, -big);
    return 0;
}

/* ------------------------------------------------------- registration */

#define UNARY_OP(NAME, LOOPS, RESULT, PREPARE, IS_ABS, IS_NEG)                          \
    static const unary_op NAME##_op = {LOOPS, RESULT, PREPARE, IS_ABS, IS_NEG};          \
    static const unary_form NAME##_functional = {&NAME##_op, CPU_FUNCTIONAL};            \
    /* not every operator has every form */                                              \
    static const unary_form NAME##_inplace __attribute__((unused)) = {&NAME##_op,        \
                                                                      CPU_INPLACE};      \
    static const unary_form NAME##_out __attribute__((unused)) = {&NAME##_op, CPU_OUT};
#define SAME(NAME) UNARY_OP(NAME, NAME##_loops, RESULT_SAME, NULL, false, false)
#define FLOAT(NAME) UNARY_OP(NAME, NAME##_loops, RESULT_FLOAT, NULL, false, false)
#define TEST(NAME) UNARY_OP(NAME, NAME##_loops, RESULT_BOOL, NULL, false, false)
#define PARAMETRIC(NAME, LOOPS) UNARY_OP(NAME, LOOPS, RESULT_SAME, prepare_##NAME, false, false)
UNARY_OP(neg, neg_loops, RESULT_SAME, NULL, false, true)
UNARY_OP(abs, abs_loops, RESULT_SAME, NULL, true, false)
SAME(relu) SAME(sign) SAME(floor) SAME(ceil) SAME(round) SAME(trunc) SAME(bitwise_not)
SAME(silu) SAME(mish) SAME(selu) SAME(hardsigmoid) SAME(hardswish) SAME(logsigmoid)
FLOAT(exp) FLOAT(log) FLOAT(sqrt) FLOAT(sigmoid) FLOAT(tanh) FLOAT(rsqrt) FLOAT(reciprocal)
FLOAT(sin) FLOAT(cos) FLOAT(tan) FLOAT(asin) FLOAT(acos) FLOAT(atan) FLOAT(sinh) FLOAT(cosh)
FLOAT(exp2) FLOAT(expm1) FLOAT(log1p) FLOAT(log2) FLOAT(log10)
TEST(isnan) TEST(isinf) TEST(isfinite) TEST(logical_not)
PARAMETRIC(leaky_relu, leaky_relu_loops)
PARAMETRIC(elu, elu_loops)
PARAMETRIC(softplus, softplus_loops)
PARAMETRIC(gelu, gelu_loops)
PARAMETRIC(hardtanh, hardtanh_loops)
PARAMETRIC(relu6, hardtanh_loops)
PARAMETRIC(clamp, clamp_loops)
PARAMETRIC(clamp_min, clamp_loops)
PARAMETRIC(clamp_max, clamp_loops)
PARAMETRIC(nan_to_num, nan_to_num_loops)

/* --------------------------------------------------- erf, erfc, erfinv */

/* erfinv(y): libm has none.  A closed-form first guess (Winitzki's, within
 * about 2e-3), then Newton steps on erf (or, for |y| > 0.5, on erfc against
 * 1 - |y|, which is exact there, so the tails keep their precision where
 * erf(x) - y would cancel).  Four steps take 2e-3 below double's epsilon. */
static double erfinv_double(double y)
{
    if (isnan(y) || y < -1 || y > 1)
        return NAN;
    if (y == 1 || y == -1)
        return y * INFINITY;
    if (y == 0)
        return y; /* keeps -0.0 */
    double ay = fabs(y), l = log1p(-ay * ay);
    const double w = 0.147, c = 2 / (3.14159265358979323846 * w) + l / 2;
    double x = sqrt(sqrt(c * c - l / w) - c);
    for (int i = 0; i < 4; i++) {
        double slope = 1.12837916709551257390 * exp(-x * x); /* erf'(x) */
        if (!(slope > 0))
            break;
        double miss = ay > 0.5 ? (1 - ay) - erfc(x) : erf(x) - ay;
        x -= miss / slope;
    }
    return y < 0 ? -x : x;
}

#define ERF_FUNCTIONS(NAME, DTYPE, T, C, U)                             \
    SAME_TYPE_LOOP(erf, NAME, T, C, erf(a))                             \
    SAME_TYPE_LOOP(erfc, NAME, T, C, erfc(a))                           \
    SAME_TYPE_LOOP(erfinv, NAME, T, C, (C)erfinv_double((double)a))
CPU_DTYPES_FLOATING(ERF_FUNCTIONS)

/* erfc(a) from the erfc(|a|) that gelu's vector loop uses (the cheaper
 * one when every |a| <= 2.125, which gelu's backward mostly sees).  Its
 * error is relative, so it suits erfc but not erf near 0 (which stays on
 * libm); it grows as a^2 (exp(-a^2) from a rounded a^2), to 1.5e-7 (1 + a^2),
 * so blocks with a lane above 3 (erfc < 2.3e-5) go to libm too. */
static inline vec_f32 vec_erfc(vec_f32 a)
{
    vec_f32 e = vec_within(a, -2.125f, 2.125f) ? vec_erfc_abs_small(a) : vec_erfc_abs(a);
    return vec_select(a < 0.0f, 2.0f - e, e);
}
VECTOR_FLOAT32_LOOP(erfc, vec_erfc, -9.0f, 3.0f)

TABLE(erf, CPU_ENTRIES_FLOATING)
TABLE(erfinv, CPU_ENTRIES_FLOATING)
static const cpu_loop_fn erfc_loops[WEFT_NUM_DTYPES] = {
    [WEFT_FLOAT16] = erfc_float16, [WEFT_BFLOAT16] = erfc_bfloat16, [WEFT_FLOAT32] = erfc_float32_vec,
    [WEFT_FLOAT64] = erfc_float64};
FLOAT(erf) FLOAT(erfc) FLOAT(erfinv)

#define FUNCTIONAL_ENTRY(NAME) {#NAME, unary_kernel, &NAME##_functional}
#define INPLACE_ENTRY(NAME) {#NAME "_", unary_kernel, &NAME##_inplace}
#define OUT_ENTRY(NAME) {#NAME "_out", unary_kernel, &NAME##_out}
#define UNARY_ENTRIES(NAME) FUNCTIONAL_ENTRY(NAME), INPLACE_ENTRY(NAME), OUT_ENTRY(NAME)
static const weft_kernel_entry unary_kernels[] = {
    UNARY_ENTRIES(neg),         UNARY_ENTRIES(abs),        UNARY_ENTRIES(exp),
    UNARY_ENTRIES(log),         UNARY_ENTRIES(sqrt),       UNARY_ENTRIES(relu),
    UNARY_ENTRIES(sigmoid),     UNARY_ENTRIES(tanh),       UNARY_ENTRIES(sign),
    UNARY_ENTRIES(exp2),        UNARY_ENTRIES(expm1),      UNARY_ENTRIES(log1p),
    UNARY_ENTRIES(log2),        UNARY_ENTRIES(log10),      UNARY_ENTRIES(rsqrt),
    UNARY_ENTRIES(reciprocal),  UNARY_ENTRIES(sin),        UNARY_ENTRIES(cos),
    UNARY_ENTRIES(tan),         UNARY_ENTRIES(asin),       UNARY_ENTRIES(acos),
    UNARY_ENTRIES(atan),        UNARY_ENTRIES(sinh),       UNARY_ENTRIES(cosh),
    UNARY_ENTRIES(floor),       UNARY_ENTRIES(ceil),       UNARY_ENTRIES(round),
    UNARY_ENTRIES(trunc),       UNARY_ENTRIES(logical_not), UNARY_ENTRIES(bitwise_not),
    UNARY_ENTRIES(silu),        UNARY_ENTRIES(mish),       UNARY_ENTRIES(selu),
    UNARY_ENTRIES(hardsigmoid), UNARY_ENTRIES(hardswish),  UNARY_ENTRIES(relu6),
    FUNCTIONAL_ENTRY(logsigmoid), OUT_ENTRY(logsigmoid),
    UNARY_ENTRIES(leaky_relu),  UNARY_ENTRIES(elu),        UNARY_ENTRIES(gelu),
    FUNCTIONAL_ENTRY(softplus), OUT_ENTRY(softplus),
    UNARY_ENTRIES(hardtanh),    UNARY_ENTRIES(clamp),      UNARY_ENTRIES(clamp_min),
    UNARY_ENTRIES(clamp_max),   UNARY_ENTRIES(nan_to_num),
    FUNCTIONAL_ENTRY(isnan),    FUNCTIONAL_ENTRY(isinf),   FUNCTIONAL_ENTRY(isfinite),
    UNARY_ENTRIES(erf),         UNARY_ENTRIES(erfc),       UNARY_ENTRIES(erfinv),
};

int cpu__register_unary(weft_registrar *reg)
{
    return weft_register_kernel_table(reg, WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, unary_kernels, sizeof unary_kernels / sizeof *unary_kernels);
}
