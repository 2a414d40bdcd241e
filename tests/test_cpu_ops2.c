/* tests/test_cpu_ops2.c — the CPU plugin's second operator set (issue 3):
 * every unary and binary elementwise function against a float64 reference
 * computed here with libm on random and hand-picked inputs, integer
 * semantics (wraparound, floor division, Python remainder), NaN, inf and
 * -0.0, broadcasting and strided operands, in-place and out= forms, the
 * reductions and scans against loops written here, dropout's determinism,
 * and the error paths. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#include "tests/tap.h"
#include "tests/keep.h"

/* ---------------------------------------------------------------- helpers */

static weft_tensor *make(weft_dtype dtype, const int64_t *sizes, int ndim, const double *values)
{
    weft_tensor *f = NULL, *t = NULL;
    if (weft_empty(&f, sizes, ndim, WEFT_FLOAT64, WEFT_DEVICE_CPU) != 0)
        return NULL;
    int64_t n = weft_tensor_numel(f);
    if (n > 0)
        memcpy(weft_tensor_data_ptr(f), values, (size_t)n * sizeof(double));
    if (dtype == WEFT_FLOAT64)
        return keep(f);
    weft_to_dtype(&t, f, dtype);
    weft_tensor_release(f);
    return keep(t);
}

/* int64 values that a double cannot hold exactly */
static weft_tensor *make_int64(const int64_t *values, int64_t n)
{
    weft_tensor *t = NULL;
    if (weft_empty(&t, &n, 1, WEFT_INT64, WEFT_DEVICE_CPU) != 0)
        return NULL;
    memcpy(weft_tensor_data_ptr(t), values, (size_t)n * sizeof(int64_t));
    return keep(t);
}

#define VALUES(...) ((const double[]){__VA_ARGS__})
#define NVALUES(...) ((int64_t)(sizeof VALUES(__VA_ARGS__) / sizeof(double)))
#define VEC(dtype, ...) make(dtype, (const int64_t[]){NVALUES(__VA_ARGS__)}, 1, VALUES(__VA_ARGS__))
#define MAT(dtype, r, c, ...) make(dtype, (const int64_t[]){r, c}, 2, VALUES(__VA_ARGS__))

static bool same_value(double g, double w, double tol)
{
    if (isnan(w))
        return isnan(g);
    if (isinf(w))
        return g == w;
    return g == w || fabs(g - w) <= tol * (1 + fabs(w));
}

static bool check_values(const weft_tensor *t, const double *want, int64_t n, double tol)
{
    if (!t) {
        diag("     got: NULL tensor (%s)", weft_last_error());
        return false;
    }
    if (weft_tensor_numel(t) != n) {
        diag("     got %lld elements, expected %lld", (long long)weft_tensor_numel(t), (long long)n);
        return false;
    }
    for (int64_t i = 0; i < n; i++) {
        if (!same_value(value_at(t, i), want[i], tol)) {
            diag("     element %lld: got %.17g, expected %.17g", (long long)i, value_at(t, i), want[i]);
            return false;
        }
    }
    return true;
}
#define is_values(t, tol, msg, ...) \
    ok(check_values((t), VALUES(__VA_ARGS__), NVALUES(__VA_ARGS__), (tol)), "%s", (msg))

#define is_error(expr, code, needle, what)                                          \
    do {                                                                            \
        int rc_ = (expr);                                                           \
        if (!ok(rc_ == (code), "%s fails with %s", (what), weft_error_name(code)))  \
            diag("     got %s (%s)", weft_error_name(rc_), weft_last_error());      \
        like(weft_last_error(), (needle), "%s: the message says \"%s\"", (what), (needle)); \
    } while (0)

#define CHECK(expr, what)                                                           \
    do {                                                                            \
        int rc_ = (expr);                                                           \
        if (!ok(rc_ == 0, "%s", (what)))                                            \
            diag("     %s: %s", weft_error_name(rc_), weft_last_error());           \
    } while (0)

/* A deterministic stream of doubles in [lo, hi). */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double uniform(double lo, double hi)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return lo + (hi - lo) * (double)(rng_state >> 11) * 0x1p-53;
}

static weft_tensor *random_tensor(weft_dtype dtype, const int64_t *sizes, int ndim, double lo,
                                  double hi)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= sizes[d];
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    for (int64_t i = 0; i < n; i++)
        v[i] = uniform(lo, hi);
    weft_tensor *t = make(dtype, sizes, ndim, v);
    free(v);
    return t;
}

/* ------------------------------------------- unary against float64 libm */

typedef int (*unary_fn)(weft_tensor **out, const weft_tensor *self);
typedef struct unary_case {
    const char *name;
    unary_fn fn;
    double (*ref)(double);
    double lo, hi;
} unary_case;

static double ref_rsqrt(double x) { return 1 / sqrt(x); }
static double ref_reciprocal(double x) { return 1 / x; }
static double ref_sign(double x) { return (0 < x) - (x < 0); }
static double ref_silu(double x) { return x / (1 + exp(-x)); }
static double ref_mish(double x) { return x * tanh(log1p(exp(x))); }
static double ref_selu(double x)
{
    return x > 0 ? 1.0507009873554804934 * x : 1.0507009873554804934 * 1.6732632423543772848 * expm1(x);
}
static double ref_hardsigmoid(double x) { return fmin(fmax(x + 3, 0), 6) / 6; }
static double ref_hardswish(double x) { return x * fmin(fmax(x + 3, 0), 6) / 6; }
static double ref_logsigmoid(double x) { return -log1p(exp(-x)); }
static double ref_relu6(double x) { return fmin(fmax(x, 0), 6); }
static double ref_gelu(double x) { return 0.5 * x * (1 + erf(x / sqrt(2.0))); }
static double ref_sigmoid(double x) { return 1 / (1 + exp(-x)); }

static const unary_case unary_cases[] = {
    {"exp", weft_exp, exp, -5, 5},         {"exp2", weft_exp2, exp2, -5, 5},
    {"expm1", weft_expm1, expm1, -2, 2},   {"log", weft_log, log, 0.01, 10},
    {"log1p", weft_log1p, log1p, -0.9, 10}, {"log2", weft_log2, log2, 0.01, 10},
    {"log10", weft_log10, log10, 0.01, 10}, {"sqrt", weft_sqrt, sqrt, 0, 10},
    {"rsqrt", weft_rsqrt, ref_rsqrt, 0.1, 10}, {"reciprocal", weft_reciprocal, ref_reciprocal, 0.1, 10},
    {"sin", weft_sin, sin, -4, 4},         {"cos", weft_cos, cos, -4, 4},
    {"tan", weft_tan, tan, -1.5, 1.5},     {"asin", weft_asin, asin, -1, 1},
    {"acos", weft_acos, acos, -1, 1},      {"atan", weft_atan, atan, -5, 5},
    {"sinh", weft_sinh, sinh, -3, 3},      {"cosh", weft_cosh, cosh, -3, 3},
    {"tanh", weft_tanh, tanh, -3, 3},      {"sigmoid", weft_sigmoid, ref_sigmoid, -8, 8},
    {"sign", weft_sign, ref_sign, -2, 2},  {"floor", weft_floor, floor, -5, 5},
    {"ceil", weft_ceil, ceil, -5, 5},      {"round", weft_round, nearbyint, -5, 5},
    {"trunc", weft_trunc, trunc, -5, 5},   {"silu", weft_silu, ref_silu, -6, 6},
    {"mish", weft_mish, ref_mish, -6, 6},  {"selu", weft_selu, ref_selu, -3, 3},
    {"hardsigmoid", weft_hardsigmoid, ref_hardsigmoid, -5, 5},
    {"hardswish", weft_hardswish, ref_hardswish, -5, 5},
    {"logsigmoid", weft_logsigmoid, ref_logsigmoid, -10, 10},
    {"relu6", weft_relu6, ref_relu6, -3, 9}, {"gelu", weft_gelu, ref_gelu, -4, 4},
};

static void test_unary_reference(void)
{
    const weft_dtype dtypes[] = {WEFT_FLOAT64, WEFT_FLOAT32, WEFT_BFLOAT16};
    const double tols[] = {1e-14, 2e-6, 1e-2};
    for (size_t c = 0; c < sizeof unary_cases / sizeof *unary_cases; c++) {
        const unary_case *u = &unary_cases[c];
        for (int k = 0; k < 3; k++) {
            weft_tensor *x = random_tensor(dtypes[k], (const int64_t[]){257}, 1, u->lo, u->hi);
            weft_tensor *y = NULL;
            int rc = u->fn(&y, x);
            keep(y);
            bool good = rc == 0 && weft_tensor_dtype(y) == dtypes[k];
            /* the reference of the value as stored in the input's dtype */
            for (int64_t i = 0; good && i < 257; i++) {
                double want = u->ref(value_at(x, i)), got = value_at(y, i);
                if (!same_value(got, want, tols[k]) && !(dtypes[k] != WEFT_FLOAT64 &&
                                                         fabs(got - want) < tols[k])) {
                    diag("     %s(%.17g): got %.17g, expected %.17g", u->name, value_at(x, i), got,
                         want);
                    good = false;
                }
            }
            ok(good, "%s %s matches libm on 257 random values", u->name,
               weft_dtype_name(dtypes[k]));
        }
        drop_all();
    }
}

static void test_unary_cases(void)
{
    weft_tensor *y = NULL;
    weft_tensor *special = VEC(WEFT_FLOAT32, NAN, INFINITY, -INFINITY, -0.0, 0.0, 2.5, -2.5);
    CHECK(weft_sign(&y, special), "sign of specials");
    is_values(keep(y), 0, "sign: NaN and -0 give 0, as PyTorch's", 0, 1, -1, 0, 0, 1, -1);
    CHECK(weft_round(&y, special), "round");
    is_values(keep(y), 0, "round is half to even, keeps NaN and inf", NAN, INFINITY, -INFINITY,
              -0.0, 0, 2, -2);
    ok(signbit(value_at(y, 3)), "round(-0.0) is -0.0");
    CHECK(weft_isnan(&y, special), "isnan");
    ok(weft_tensor_dtype(keep(y)) == WEFT_BOOL, "isnan gives bool");
    is_values(y, 0, "isnan values", 1, 0, 0, 0, 0, 0, 0);
    CHECK(weft_isinf(&y, special), "isinf");
    is_values(keep(y), 0, "isinf values", 0, 1, 1, 0, 0, 0, 0);
    CHECK(weft_isfinite(&y, special), "isfinite");
    is_values(keep(y), 0, "isfinite values", 0, 0, 0, 1, 1, 1, 1);
    CHECK(weft_nan_to_num(&y, special, NULL, NULL, NULL), "nan_to_num defaults");
    is_values(keep(y), 0, "NaN -> 0, inf -> the largest float32", 0, FLT_MAX, -FLT_MAX, 0, 0, 2.5,
              -2.5);
    CHECK(weft_nan_to_num(&y, special, &(double){1}, &(double){2}, &(double){-3}), "nan_to_num given");
    is_values(keep(y), 0, "nan_to_num values", 1, 2, -3, 0, 0, 2.5, -2.5);
    weft_tensor *h = VEC(WEFT_FLOAT16, INFINITY, -INFINITY);
    CHECK(weft_nan_to_num(&y, h, NULL, NULL, NULL), "nan_to_num float16");
    is_values(keep(y), 0, "float16 inf -> 65504", 65504, -65504);

    /* integers: identities, float32 results, wraparound */
    weft_tensor *ints = VEC(WEFT_INT32, -3, 0, 7);
    CHECK(weft_floor(&y, ints), "floor int32");
    ok(weft_tensor_dtype(keep(y)) == WEFT_INT32, "floor of int32 stays int32");
    is_values(y, 0, "floor of integers is the identity", -3, 0, 7);
    CHECK(weft_exp2(&y, ints), "exp2 int32");
    ok(weft_tensor_dtype(keep(y)) == WEFT_FLOAT32, "exp2 of int32 is float32");
    is_values(y, 0, "exp2 int values", 0.125, 1, 128);
    CHECK(weft_sign(&y, ints), "sign int32");
    is_values(keep(y), 0, "sign int32", -1, 0, 1);
    weft_tensor *i8 = VEC(WEFT_INT8, -128, 5, 127);
    CHECK(weft_bitwise_not(&y, i8), "bitwise_not int8");
    is_values(keep(y), 0, "~x = -x - 1", 127, -6, -128);
    weft_tensor *b = VEC(WEFT_BOOL, 1, 0);
    CHECK(weft_bitwise_not(&y, b), "bitwise_not bool");
    is_values(keep(y), 0, "bitwise_not of bool is not", 0, 1);
    CHECK(weft_logical_not(&y, VEC(WEFT_FLOAT64, 0, -0.0, NAN, 2)), "logical_not");
    is_values(keep(y), 0, "logical_not: NaN is true", 1, 1, 0, 0);

    /* activations with parameters */
    weft_tensor *x = VEC(WEFT_FLOAT64, -2, -0.5, 0, 1, 30);
    CHECK(weft_leaky_relu(&y, x, 0.1), "leaky_relu");
    is_values(keep(y), 1e-15, "leaky_relu(0.1)", -0.2, -0.05, 0, 1, 30);
    CHECK(weft_elu(&y, x, 2, 1.5, 0.5), "elu");
    is_values(keep(y), 1e-15, "elu(alpha 2, scale 1.5, input_scale 0.5)", 3 * expm1(-1),
              3 * expm1(-0.25), 0, 1.5, 45);
    CHECK(weft_softplus(&y, x, 2, 20), "softplus");
    is_values(keep(y), 1e-15, "softplus(beta 2, threshold 20)", log1p(exp(-4)) / 2,
              log1p(exp(-1)) / 2, log(2) / 2, log1p(exp(2)) / 2, 30);
    CHECK(weft_hardtanh(&y, x, -1, 2), "hardtanh");
    is_values(keep(y), 0, "hardtanh(-1, 2)", -1, -0.5, 0, 1, 2);
    CHECK(weft_gelu_ex(&y, x, "tanh"), "gelu tanh");
    double gt[5];
    for (int i = 0; i < 5; i++) {
        double v = value_at(x, i);
        gt[i] = 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    }
    ok(check_values(keep(y), gt, 5, 1e-15), "gelu(approximate='tanh') values");
    is_error(weft_gelu_ex(&y, x, "fast"), WEFT_EINVAL, "approximate", "gelu with approximate='fast'");
    ok(y == NULL, "no result after an error");
    is_error(weft_silu(&y, ints), WEFT_EDTYPE, "int32", "silu of int32");

    /* clamp */
    weft_tensor *c = VEC(WEFT_FLOAT32, -5, 0.5, 5, NAN);
    CHECK(weft_clamp(&y, c, &(double){-1}, &(double){1}), "clamp");
    is_values(keep(y), 0, "clamp(-1, 1) keeps NaN", -1, 0.5, 1, NAN);
    CHECK(weft_clamp(&y, c, NULL, &(double){1}), "clamp max only");
    is_values(keep(y), 0, "clamp(max=1)", -5, 0.5, 1, NAN);
    CHECK(weft_clamp(&y, c, &(double){2}, &(double){1}), "clamp min > max");
    is_values(keep(y), 0, "min > max gives max", 1, 1, 1, NAN);
    CHECK(weft_clamp_min(&y, c, 0), "clamp_min");
    is_values(keep(y), 0, "clamp_min(0)", 0, 0.5, 5, NAN);
    CHECK(weft_clamp_max(&y, c, 0), "clamp_max");
    is_values(keep(y), 0, "clamp_max(0)", -5, 0, 0, NAN);
    is_error(weft_clamp(&y, c, NULL, NULL), WEFT_EINVAL, "min", "clamp without bounds");
    CHECK(weft_clamp(&y, ints, &(double){-1}, &(double){1}), "clamp int32");
    ok(weft_tensor_dtype(keep(y)) == WEFT_INT32, "clamp of int32 by whole bounds stays int32");
    is_values(y, 0, "clamp int32", -1, 0, 1);
    CHECK(weft_clamp(&y, ints, &(double){-0.5}, NULL), "clamp int32 by -0.5");
    ok(weft_tensor_dtype(keep(y)) == WEFT_FLOAT32, "a fractional bound promotes to float32");
    weft_tensor *cc = VEC(WEFT_FLOAT64, -5, 0.5, 5);
    CHECK(weft_clamp_(cc, &(double){0}, &(double){1}), "clamp_ in place");
    is_values(cc, 0, "clamp_ values", 0, 0.5, 1);
    drop_all();
}

/* ------------------------------------------------------------- binary */

static void test_binary(void)
{
    weft_tensor *y = NULL;
    /* division modes and remainders on integers (C and Python semantics) */
    weft_tensor *a = VEC(WEFT_INT32, 7, -7, 7, -7, INT32_MIN, 0);
    weft_tensor *b = VEC(WEFT_INT32, 2, 2, -2, -2, -1, 3);
    CHECK(weft_div_mode_ex(&y, a, b, "trunc"), "div trunc int32");
    ok(weft_tensor_dtype(keep(y)) == WEFT_INT32, "div trunc keeps int32");
    is_values(y, 0, "trunc division (INT_MIN / -1 wraps)", 3, -3, -3, 3, INT32_MIN, 0);
    CHECK(weft_div_mode_ex(&y, a, b, "floor"), "div floor int32");
    is_values(keep(y), 0, "floor division", 3, -4, -4, 3, INT32_MIN, 0);
    CHECK(weft_div_mode(&y, a, b), "div_mode with no rounding");
    ok(weft_tensor_dtype(keep(y)) == WEFT_FLOAT32, "true division of int32 is float32");
    is_values(y, 0, "true division", 3.5, -3.5, -3.5, 3.5, 2147483648.0, 0);
    CHECK(weft_remainder(&y, a, b), "remainder int32");
    is_values(keep(y), 0, "remainder takes the divisor's sign", 1, 1, -1, -1, 0, 0);
    CHECK(weft_fmod(&y, a, b), "fmod int32");
    is_values(keep(y), 0, "fmod takes the dividend's sign", 1, -1, 1, -1, 0, 0);
    is_error(weft_div_mode_ex(&y, a, VEC(WEFT_INT32, 1, 0, 1, 1, 1, 1), "floor"), WEFT_EINVAL,
             "ZeroDivisionError", "integer floor division by zero");
    is_error(weft_remainder_scalar(&y, a, 0), WEFT_EINVAL, "ZeroDivisionError", "remainder by 0");
    is_error(weft_div_mode_ex(&y, a, b, "round"), WEFT_EINVAL, "rounding_mode", "rounding_mode='round'");

    /* floating division modes, signs, -0.0 and division by zero */
    weft_tensor *fa = VEC(WEFT_FLOAT64, 7, -7, 7, -7, 1, -1, 0, 5.5);
    weft_tensor *fb = VEC(WEFT_FLOAT64, 2, 2, -2, -2, 0, 0, 3, 2.5);
    CHECK(weft_div_mode_ex(&y, fa, fb, "floor"), "div floor float64");
    is_values(keep(y), 0, "floor division", 3, -4, -4, 3, INFINITY, -INFINITY, 0, 2);
    CHECK(weft_div_mode_ex(&y, fa, fb, "trunc"), "div trunc float64");
    is_values(keep(y), 0, "trunc division", 3, -3, -3, 3, INFINITY, -INFINITY, 0, 2);
    CHECK(weft_remainder(&y, fa, fb), "remainder float64");
    is_values(keep(y), 0, "remainder float", 1, 1, -1, -1, NAN, NAN, 0, 0.5);
    CHECK(weft_fmod(&y, fa, fb), "fmod float64");
    is_values(keep(y), 0, "fmod float", 1, -1, 1, -1, NAN, NAN, 0, 0.5);
    CHECK(weft_div_mode_ex(&y, VEC(WEFT_FLOAT64, -1), VEC(WEFT_FLOAT64, 3), "floor"), "-1 // 3");
    is_values(keep(y), 0, "-1 // 3 = -1", -1);
    CHECK(weft_div_mode_ex(&y, VEC(WEFT_FLOAT64, -0.0), VEC(WEFT_FLOAT64, 3), "floor"), "-0 // 3");
    ok(signbit(value_at(keep(y), 0)), "-0.0 // 3 is -0.0");

    /* pow */
    CHECK(weft_pow(&y, VEC(WEFT_INT64, 2, -3, 1, -1, 2, 0), VEC(WEFT_INT64, 10, 3, -5, -3, -1, 0)),
          "pow int64");
    is_values(keep(y), 0, "integer powers (negative exponents as PyTorch)", 1024, -27, 1, -1, 0, 1);
    CHECK(weft_pow_scalar(&y, VEC(WEFT_INT32, 3, 65536), 2), "pow int32 ** 2");
    is_values(keep(y), 0, "int32 squares wrap", 9, 0);
    is_error(weft_pow_scalar(&y, VEC(WEFT_INT32, 3), -1), WEFT_EINVAL, "negative", "int ** -1");
    CHECK(weft_pow_scalar(&y, VEC(WEFT_FLOAT32, 4, 9), 0.5), "pow float32 ** 0.5");
    is_values(keep(y), 0, "square roots", 2, 3);
    CHECK(weft_pow(&y, VEC(WEFT_FLOAT64, 2), VEC(WEFT_FLOAT64, -1, 0.5, 3)), "pow broadcasts");
    is_values(keep(y), 1e-15, "2 ** [-1, 0.5, 3]", 0.5, sqrt(2), 8);
    CHECK(weft_atan2(&y, VEC(WEFT_FLOAT64, 1, -1, 0), VEC(WEFT_FLOAT64, 1, 1, -1)), "atan2");
    is_values(keep(y), 1e-15, "atan2 values", atan2(1, 1), atan2(-1, 1), M_PI);

    /* maximum / minimum: NaN propagates */
    weft_tensor *m1 = VEC(WEFT_FLOAT32, 1, NAN, 3, -0.0);
    weft_tensor *m2 = VEC(WEFT_FLOAT32, 2, 1, NAN, 0);
    CHECK(weft_maximum(&y, m1, m2), "maximum");
    is_values(keep(y), 0, "maximum with NaN", 2, NAN, NAN, 0);
    CHECK(weft_minimum(&y, m1, m2), "minimum");
    is_values(keep(y), 0, "minimum with NaN", 1, NAN, NAN, 0);
    CHECK(weft_maximum(&y, VEC(WEFT_UINT8, 1, 200), VEC(WEFT_INT8, -1, 5)), "maximum uint8, int8");
    ok(weft_tensor_dtype(keep(y)) == WEFT_INT16, "promotes to int16");
    is_values(y, 0, "maximum promoted values", 1, 200);

    /* comparisons */
    weft_tensor *ca = MAT(WEFT_FLOAT32, 2, 2, 1, 2, NAN, 4);
    weft_tensor *cb = VEC(WEFT_INT64, 1, 3);
    CHECK(weft_lt(&y, ca, cb), "lt float32 < int64 broadcast");
    ok(weft_tensor_dtype(keep(y)) == WEFT_BOOL, "comparisons give bool");
    is_values(y, 0, "lt values", 0, 1, 0, 0);
    CHECK(weft_eq(&y, ca, cb), "eq");
    is_values(keep(y), 0, "eq values (NaN != NaN)", 1, 0, 0, 0);
    CHECK(weft_ne(&y, ca, cb), "ne");
    is_values(keep(y), 0, "ne values", 0, 1, 1, 1);
    CHECK(weft_ge_scalar(&y, ca, 2), "ge_scalar");
    is_values(keep(y), 0, "ge 2", 0, 1, 0, 1);
    CHECK(weft_gt_scalar(&y, VEC(WEFT_INT32, 1, 2, 3), 1.5), "int32 > 1.5");
    is_values(keep(y), 0, "compared in float", 0, 1, 1);
    CHECK(weft_le(&y, make_int64((const int64_t[]){INT64_MAX}, 1),
                  make_int64((const int64_t[]){INT64_MAX - 1}, 1)), "le int64 exact");
    is_values(keep(y), 0, "int64 compares exactly", 0);
    weft_tensor *inplace = VEC(WEFT_FLOAT64, 1, 5);
    CHECK(weft_lt_scalar_(inplace, 3), "lt_scalar_ in place");
    is_values(inplace, 0, "stores 1 and 0 in self", 1, 0);
    is_error(weft_lt(&y, VEC(WEFT_COMPLEX64, 1), VEC(WEFT_COMPLEX64, 1)), WEFT_EDTYPE, "complex64",
             "lt of complex");

    /* logical and bitwise */
    weft_tensor *la = VEC(WEFT_FLOAT32, 0, 0, 2, NAN);
    weft_tensor *lb = VEC(WEFT_INT8, 0, 1, 0, 3);
    CHECK(weft_logical_and(&y, la, lb), "logical_and");
    is_values(keep(y), 0, "logical_and", 0, 0, 0, 1);
    CHECK(weft_logical_or(&y, la, lb), "logical_or");
    is_values(keep(y), 0, "logical_or", 0, 1, 1, 1);
    CHECK(weft_logical_xor(&y, la, lb), "logical_xor");
    is_values(keep(y), 0, "logical_xor", 0, 1, 1, 0);
    CHECK(weft_bitwise_and(&y, VEC(WEFT_INT16, 12, -1), VEC(WEFT_INT16, 10, 5)), "bitwise_and");
    is_values(keep(y), 0, "bitwise_and", 8, 5);
    CHECK(weft_bitwise_or(&y, VEC(WEFT_UINT8, 12), VEC(WEFT_UINT8, 3)), "bitwise_or");
    is_values(keep(y), 0, "bitwise_or", 15);
    CHECK(weft_bitwise_xor_scalar(&y, VEC(WEFT_INT64, 5), 1), "bitwise_xor_scalar");
    is_values(keep(y), 0, "bitwise_xor", 4);
    CHECK(weft_bitwise_and(&y, VEC(WEFT_BOOL, 1, 1, 0), VEC(WEFT_BOOL, 1, 0, 0)), "bitwise_and bool");
    ok(weft_tensor_dtype(keep(y)) == WEFT_BOOL, "bitwise_and of bool is bool");
    is_error(weft_bitwise_and(&y, VEC(WEFT_FLOAT32, 1), VEC(WEFT_FLOAT32, 1)), WEFT_EDTYPE,
             "not supported for dtype float32", "bitwise_and of float32");
    ok(y == NULL, "no result after the error");
    drop_all();
}

/* where, masked_fill, lerp, addcmul, addcdiv against loops written here */
static void test_ternary(void)
{
    weft_tensor *y = NULL;
    weft_tensor *cond = VEC(WEFT_BOOL, 1, 0, 1);
    CHECK(weft_where(&y, cond, VEC(WEFT_INT32, 1, 2, 3), VEC(WEFT_FLOAT32, -1)), "where");
    ok(weft_tensor_dtype(keep(y)) == WEFT_FLOAT32, "where promotes its values");
    is_values(y, 0, "where values (other broadcast)", 1, -1, 3);
    is_error(weft_where(&y, VEC(WEFT_INT32, 1), VEC(WEFT_INT32, 1), VEC(WEFT_INT32, 1)),
             WEFT_EDTYPE, "bool", "where with an int condition");

    weft_tensor *m = MAT(WEFT_FLOAT64, 2, 3, 1, 2, 3, 4, 5, 6);
    CHECK(weft_masked_fill(&y, m, VEC(WEFT_BOOL, 1, 0, 1), -1), "masked_fill");
    is_values(keep(y), 0, "masked_fill broadcast mask", -1, 2, -1, -1, 5, -1);
    CHECK(weft_masked_fill_(m, MAT(WEFT_BOOL, 2, 1, 0, 1), 0), "masked_fill_");
    is_values(m, 0, "masked_fill_ in place", 1, 2, 3, 0, 0, 0);
    is_error(weft_masked_fill(&y, m, VEC(WEFT_FLOAT32, 1, 0, 1), 0), WEFT_EDTYPE, "bool",
             "masked_fill with a float mask");
    is_error(weft_masked_fill(&y, VEC(WEFT_FLOAT64, 1), MAT(WEFT_BOOL, 2, 1, 0, 1), 0), WEFT_ESHAPE,
             "broadcast", "masked_fill with a larger mask");

    weft_tensor *s = VEC(WEFT_FLOAT32, 0, 10, -4);
    weft_tensor *e = VEC(WEFT_FLOAT32, 10, 20, 4);
    CHECK(weft_lerp_scalar(&y, s, e, 0.25), "lerp_scalar");
    is_values(keep(y), 1e-7, "lerp 0.25", 2.5, 12.5, -2);
    CHECK(weft_lerp(&y, s, e, VEC(WEFT_FLOAT32, 1, 0, 0.75)), "lerp tensor weight");
    is_values(keep(y), 1e-7, "lerp with weight 1 is end", 10, 10, 2);
    is_error(weft_lerp_scalar(&y, s, VEC(WEFT_FLOAT64, 1, 2, 3), 0.5), WEFT_EDTYPE, "dtype",
             "lerp with mixed dtypes");

    weft_tensor *t1 = VEC(WEFT_FLOAT64, 1, 2, 3), *t2 = VEC(WEFT_FLOAT64, 4, 5, 6);
    CHECK(weft_addcmul_ex(&y, VEC(WEFT_FLOAT64, 1), t1, t2, 0.5), "addcmul");
    is_values(keep(y), 0, "1 + 0.5 * t1 * t2", 3, 6, 10);
    CHECK(weft_addcdiv_ex(&y, VEC(WEFT_FLOAT64, 1, 1, 1), t1, t2, 2), "addcdiv");
    is_values(keep(y), 1e-15, "1 + 2 * t1 / t2", 1.5, 1.8, 2);
    CHECK(weft_addcmul(&y, VEC(WEFT_INT32, INT32_MAX), VEC(WEFT_INT32, 1), VEC(WEFT_INT32, 1)),
          "addcmul int32");
    is_values(keep(y), 0, "addcmul wraps", INT32_MIN);
    is_error(weft_addcdiv(&y, VEC(WEFT_INT32, 1), VEC(WEFT_INT32, 1), VEC(WEFT_INT32, 1)),
             WEFT_EDTYPE, "integer division", "addcdiv of integers");
    drop_all();
}

/* strided, expanded and broadcast operands agree with contiguous ones, and
 * large tensors (parallel) agree with a loop written here */
static void test_layouts(void)
{
    weft_tensor *x = random_tensor(WEFT_FLOAT64, (const int64_t[]){300, 400}, 2, -3, 3);
    weft_tensor *z = random_tensor(WEFT_FLOAT64, (const int64_t[]){400}, 1, 0.5, 3);
    weft_tensor *xt = NULL, *y = NULL;
    weft_transpose(&xt, x, 0, 1);
    keep(xt);
    CHECK(weft_remainder(&y, xt, VEC(WEFT_FLOAT64, 1.5)), "remainder of a transposed 400x300");
    keep(y);
    bool good = y && weft_tensor_size(y, 0) == 400;
    for (int64_t i = 0; good && i < 400 * 300; i += 997) {
        double a = value_at(xt, i), r = fmod(a, 1.5);
        if (r != 0 && (r < 0) != (1.5 < 0))
            r += 1.5;
        good = same_value(value_at(y, i), r, 1e-15);
    }
    ok(good, "transposed remainder values (sampled)");
    CHECK(weft_maximum(&y, x, z), "maximum of [300,400] and [400] (parallel)");
    keep(y);
    good = y != NULL;
    for (int64_t i = 0; good && i < 300 * 400; i += 101)
        good = value_at(y, i) == fmax(value_at(x, i), value_at(z, i % 400));
    ok(good, "broadcast maximum values (sampled)");
    weft_tensor *ex = NULL;
    weft_expand(&ex, VEC(WEFT_FLOAT32, 1, -2), (const int64_t[]){3, 2}, 2);
    keep(ex);
    CHECK(weft_hardtanh(&y, ex, -1, 0.5), "hardtanh of an expanded tensor");
    is_values(keep(y), 0, "expanded values", 0.5, -1, 0.5, -1, 0.5, -1);
    weft_tensor *big = random_tensor(WEFT_FLOAT32, (const int64_t[]){100000}, 1, -5, 5);
    CHECK(weft_gelu(&y, big), "gelu of 100k float32 (parallel)");
    keep(y);
    good = y != NULL;
    for (int64_t i = 0; good && i < 100000; i += 37)
        good = fabs(value_at(y, i) - ref_gelu(value_at(big, i))) < 1e-5;
    ok(good, "parallel gelu agrees with the reference");
    CHECK(weft_eq_scalar(&y, VEC(WEFT_FLOAT32), 0), "eq of an empty tensor");
    ok(weft_tensor_numel(keep(y)) == 0, "gives an empty bool tensor");
    weft_tensor *zero_d = make(WEFT_FLOAT64, NULL, 0, VALUES(-2.5));
    CHECK(weft_fmod(&y, zero_d, VEC(WEFT_FLOAT64, 2, -2)), "0-d fmod 1-d");
    is_values(keep(y), 0, "fmod(-2.5, [2, -2])", -0.5, -0.5);
    is_error(weft_atan2(&y, VEC(WEFT_FLOAT64, 1, 2), VEC(WEFT_FLOAT64, 1, 2, 3)), WEFT_ESHAPE,
             "broadcast", "atan2 of [2] and [3]");
    is_error(weft_eq_(VEC(WEFT_FLOAT64, 1), VEC(WEFT_FLOAT64, 1, 2)), WEFT_ESHAPE, "broadcast",
             "eq_ that would grow self");
    drop_all();
}

/* ---------------------------------------------------------- reductions */

static void test_reductions(void)
{
    weft_tensor *y = NULL, *idx = NULL;
    weft_tensor *m = MAT(WEFT_FLOAT32, 2, 3, 1, 5, 2, 7, -1, 7);
    CHECK(weft_max(&y, m), "max of everything");
    ok(weft_tensor_ndim(keep(y)) == 0, "is 0-d");
    is_values(y, 0, "max", 7);
    CHECK(weft_min(&y, m), "min");
    is_values(keep(y), 0, "min", -1);
    CHECK(weft_max_dim(&y, &idx, m, 1, false), "max_dim 1");
    keep(y), keep(idx);
    is_values(y, 0, "row maxima", 5, 7);
    is_values(idx, 0, "first index of each maximum", 1, 0);
    ok(weft_tensor_dtype(idx) == WEFT_INT64, "indices are int64");
    CHECK(weft_min_dim(&y, &idx, m, 0, true), "min_dim 0 keepdim");
    keep(y), keep(idx);
    ok(weft_tensor_ndim(y) == 2 && weft_tensor_size(y, 0) == 1, "keepdim keeps a size-1 dim");
    is_values(y, 0, "column minima", 1, -1, 2);
    is_values(idx, 0, "their indices", 0, 1, 0);
    CHECK(weft_amax(&y, m, (const int64_t[]){0, 1}, 2, false), "amax over both dims");
    is_values(keep(y), 0, "amax", 7);
    CHECK(weft_amin(&y, m, (const int64_t[]){-1}, 1, true), "amin over the last dim");
    is_values(keep(y), 0, "amin", 1, -1);
    CHECK(weft_argmax(&y, m, NULL, false), "argmax of the flattened input");
    is_values(keep(y), 0, "argmax (the first 7)", 3);
    CHECK(weft_argmin(&y, m, &(int64_t){1}, false), "argmin dim 1");
    is_values(keep(y), 0, "argmin", 0, 1);
    weft_tensor *n = VEC(WEFT_FLOAT64, 1, NAN, 3, NAN);
    CHECK(weft_max_dim(&y, &idx, n, 0, false), "max with NaN");
    keep(y), keep(idx);
    is_values(y, 0, "NaN wins", NAN);
    is_values(idx, 0, "at the first NaN", 1);
    CHECK(weft_amin(&y, n, NULL, 0, false), "amin with NaN");
    is_values(keep(y), 0, "amin propagates NaN", NAN);
    CHECK(weft_max(&y, make_int64((const int64_t[]){INT64_MAX - 1, INT64_MAX, 0}, 3)), "max int64");
    ok(weft_tensor_dtype(keep(y)) == WEFT_INT64, "max of int64 is int64");
    int64_t got = 0;
    if (y)
        got = *(const int64_t *)weft_tensor_data_ptr(y);
    ok(got == INT64_MAX, "max of int64 is exact");
    is_error(weft_max(&y, VEC(WEFT_FLOAT32)), WEFT_ERANGE, "non-empty", "max of an empty tensor");
    is_error(weft_max(&y, VEC(WEFT_COMPLEX64, 1)), WEFT_EDTYPE, "complex64", "max of complex");

    CHECK(weft_prod(&y, m, (const int64_t[]){1}, 1, false), "prod dim 1");
    is_values(keep(y), 0, "row products", 10, -49);
    CHECK(weft_prod(&y, VEC(WEFT_INT32, 65536, 65536, 3), NULL, 0, false), "prod int32");
    ok(weft_tensor_dtype(keep(y)) == WEFT_INT64, "prod of int32 is int64");
    is_values(y, 0, "int64 product", 3.0 * 4294967296.0);
    CHECK(weft_prod(&y, VEC(WEFT_FLOAT32), NULL, 0, false), "prod of empty");
    is_values(keep(y), 0, "is 1", 1);

    /* var/std against a two-pass loop */
    weft_tensor *r = random_tensor(WEFT_FLOAT64, (const int64_t[]){7, 50}, 2, -2, 2);
    CHECK(weft_var(&y, r, (const int64_t[]){1}, 1), "var dim 1 (correction 1)");
    keep(y);
    bool good = y != NULL;
    for (int i = 0; good && i < 7; i++) {
        double mean = 0, m2 = 0;
        for (int j = 0; j < 50; j++)
            mean += value_at(r, i * 50 + j) / 50;
        for (int j = 0; j < 50; j++)
            m2 += pow(value_at(r, i * 50 + j) - mean, 2);
        good = same_value(value_at(y, i), m2 / 49, 1e-13);
    }
    ok(good, "var agrees with a two-pass loop");
    CHECK(weft_std_ex(&y, VEC(WEFT_FLOAT32, 1, 2, 3, 4), NULL, 0, &(double){0}, false),
          "std with correction 0");
    is_values(keep(y), 1e-7, "population std", sqrt(1.25));
    CHECK(weft_var(&y, VEC(WEFT_FLOAT64, 5), NULL, 0), "var of one element");
    is_values(keep(y), 0, "is NaN (0 / 0)", NAN);
    is_error(weft_var(&y, VEC(WEFT_INT32, 1, 2), NULL, 0), WEFT_EDTYPE, "floating", "var of int32");

    /* norms */
    weft_tensor *v = VEC(WEFT_FLOAT64, 3, -4, 0);
    CHECK(weft_norm(&y, v, NULL, NULL, 0, false), "norm (None = 2)");
    is_values(keep(y), 1e-15, "2-norm", 5);
    CHECK(weft_norm(&y, v, &(double){1}, NULL, 0, false), "norm 1");
    is_values(keep(y), 0, "1-norm", 7);
    CHECK(weft_norm(&y, v, &(double){INFINITY}, NULL, 0, false), "norm inf");
    is_values(keep(y), 0, "inf-norm", 4);
    CHECK(weft_norm(&y, v, &(double){0}, NULL, 0, false), "norm 0");
    is_values(keep(y), 0, "0-norm counts nonzeros", 2);
    CHECK(weft_norm(&y, v, &(double){3}, NULL, 0, false), "norm 3");
    is_values(keep(y), 1e-14, "3-norm", cbrt(91));
    CHECK(weft_norm(&y, m, NULL, (const int64_t[]){0, 1}, 2, false), "Frobenius norm of a matrix");
    is_values(keep(y), 1e-6, "fro", sqrt(1 + 25 + 4 + 49 + 1 + 49));

    CHECK(weft_logsumexp(&y, VEC(WEFT_FLOAT64, 1000, 1000), (const int64_t[]){0}, 1, false),
          "logsumexp of large values");
    is_values(keep(y), 1e-15, "no overflow", 1000 + log(2));
    CHECK(weft_logsumexp(&y, VEC(WEFT_FLOAT64, -INFINITY, -INFINITY), (const int64_t[]){0}, 1,
                         false), "logsumexp of -inf");
    is_values(keep(y), 0, "is -inf", -INFINITY);
    CHECK(weft_logsumexp(&y, VEC(WEFT_INT32, 0, 0), (const int64_t[]){0}, 1, false), "logsumexp int");
    ok(weft_tensor_dtype(keep(y)) == WEFT_FLOAT32, "logsumexp of int32 is float32");

    weft_tensor *tf = MAT(WEFT_FLOAT32, 2, 3, 1, NAN, 0, 1, 2, 3);
    CHECK(weft_all(&y, tf, (const int64_t[]){1}, 1, false), "all dim 1");
    ok(weft_tensor_dtype(keep(y)) == WEFT_BOOL, "all gives bool");
    is_values(y, 0, "all (NaN is true)", 0, 1);
    CHECK(weft_any(&y, VEC(WEFT_INT32, 0, 0), NULL, 0, false), "any of zeros");
    is_values(keep(y), 0, "any is false", 0);
    CHECK(weft_all(&y, VEC(WEFT_FLOAT32), NULL, 0, false), "all of empty");
    is_values(keep(y), 0, "is true", 1);
    CHECK(weft_count_nonzero(&y, tf, (const int64_t[]){0}, 1), "count_nonzero dim 0");
    ok(weft_tensor_dtype(keep(y)) == WEFT_INT64, "count_nonzero gives int64");
    is_values(y, 0, "counts", 2, 2, 1);

    /* out= forms */
    weft_tensor *o = NULL;
    weft_empty(&o, (const int64_t[]){0}, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    keep(o);
    CHECK(weft_amax_out(o, m, (const int64_t[]){1}, 1, false), "amax_out into an empty out");
    is_values(o, 0, "amax_out values", 5, 7);
    drop_all();
}

static void test_scans(void)
{
    weft_tensor *y = NULL, *idx = NULL;
    weft_tensor *m = MAT(WEFT_INT32, 2, 3, 1, 2, 3, 4, 5, 6);
    CHECK(weft_cumsum(&y, m, 1), "cumsum dim 1");
    ok(weft_tensor_dtype(keep(y)) == WEFT_INT64, "cumsum of int32 is int64");
    is_values(y, 0, "row cumsums", 1, 3, 6, 4, 9, 15);
    CHECK(weft_cumsum(&y, m, 0), "cumsum dim 0");
    is_values(keep(y), 0, "column cumsums", 1, 2, 3, 5, 7, 9);
    CHECK(weft_cumprod(&y, m, -1), "cumprod dim -1");
    is_values(keep(y), 0, "row cumprods", 1, 2, 6, 4, 20, 120);
    weft_tensor *f = MAT(WEFT_FLOAT32, 2, 2, 1, 2, 3, 4);
    CHECK(weft_cumsum_(f, 0), "cumsum_ in place");
    is_values(f, 0, "cumsum_ values", 1, 2, 4, 6);
    weft_tensor *t = NULL;
    weft_transpose(&t, f, 0, 1);
    keep(t);
    CHECK(weft_cumprod(&y, t, 1), "cumprod of a transposed tensor");
    is_values(keep(y), 0, "transposed cumprod", 1, 4, 2, 12);
    weft_tensor *c = VEC(WEFT_FLOAT64, 1, 3, 2, 3, NAN, 5);
    CHECK(weft_cummax(&y, &idx, c, 0), "cummax");
    keep(y), keep(idx);
    is_values(y, 0, "cummax values (NaN sticks)", 1, 3, 3, 3, NAN, NAN);
    is_values(idx, 0, "cummax indices (last of ties)", 0, 1, 1, 3, 4, 4);
    CHECK(weft_cummin(&y, &idx, VEC(WEFT_INT8, 3, 1, 2, 1), 0), "cummin int8");
    keep(y), keep(idx);
    is_values(y, 0, "cummin values", 3, 1, 1, 1);
    is_values(idx, 0, "cummin indices", 0, 1, 1, 3);
    is_error(weft_cumsum(&y, m, 2), WEFT_ERANGE, "range", "cumsum over dim 2 of a matrix");
    CHECK(weft_cumsum(&y, make(WEFT_FLOAT32, NULL, 0, VALUES(4)), 0), "cumsum of 0-d");
    is_values(keep(y), 0, "is itself", 4);
    drop_all();
}

/* ------------------------------------------------------------- dropout */

static void test_dropout(void)
{
    weft_generator *g = NULL;
    weft_generator_create(&g, 42);
    weft_tensor *x = NULL, *a = NULL, *b = NULL;
    weft_ones(&x, (const int64_t[]){100000}, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(x);
    CHECK(weft_dropout_ex(&a, x, 0.25, true, g), "dropout p=0.25");
    keep(a);
    weft_generator_set_seed(g, 42);
    CHECK(weft_dropout_ex(&b, x, 0.25, true, g), "again with the same seed");
    keep(b);
    bool same = a && b, scaled = a != NULL;
    int64_t zeros = 0;
    for (int64_t i = 0; a && b && i < 100000; i++) {
        double va = ((const float *)weft_tensor_data_ptr(a))[i];
        same = same && va == ((const float *)weft_tensor_data_ptr(b))[i];
        scaled = scaled && (va == 0 || fabs(va - 1 / 0.75) < 1e-6);
        zeros += va == 0;
    }
    ok(same, "the same seed gives the same mask (whatever the thread count)");
    ok(scaled, "kept elements are scaled by 1/(1-p)");
    ok(zeros > 24000 && zeros < 26000, "about a quarter dropped (%lld)", (long long)zeros);
    /* element i's fate is Philox block i/4, word i%4 */
    uint32_t w[4];
    uint64_t seed = 0, offset = 0;
    weft_generator_set_seed(g, 7);
    weft_generator_reserve(g, 1, &seed, &offset);
    weft_generator_set_seed(g, 7);
    CHECK(weft_dropout_ex(&b, x, 0.5, true, g), "dropout p=0.5");
    keep(b);
    weft_philox(seed, offset, w);
    bool matches = b != NULL;
    for (int i = 0; matches && i < 4; i++)
        matches = (((double)(w[i] >> 8) * 0x1p-24) < 0.5) ==
                  (((const float *)weft_tensor_data_ptr(b))[i] != 0);
    ok(matches, "the mask is Philox's words, element by element");
    CHECK(weft_dropout(&a, x, 0.5, false), "dropout in eval mode");
    ok(keep(a) == x, "is the input itself");
    weft_tensor *ip = VEC(WEFT_FLOAT64, 1, 2, 3, 4);
    CHECK(weft_dropout_ex_(ip, 1.0, true, g), "dropout_ with p=1");
    is_values(ip, 0, "zeroes everything", 0, 0, 0, 0);
    is_error(weft_dropout(&a, x, 1.5, true), WEFT_EINVAL, "between 0 and 1", "dropout p=1.5");
    is_error(weft_dropout(&a, VEC(WEFT_INT32, 1), 0.5, true), WEFT_EDTYPE, "int32",
             "dropout of int32");
    weft_generator_destroy(g);
    drop_all();
}

int main(void)
{
    if (!default_plugins_loaded())
        return done_testing();
    test_unary_reference();
    test_unary_cases();
    test_binary();
    test_ternary();
    test_layouts();
    test_reductions();
    test_scans();
    test_dropout();
    return done_testing();
}
