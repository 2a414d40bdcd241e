/* tests/test_cpu_ops.c — the CPU plugin's kernels through the public API:
 * values of every operator on small inputs worked out by hand, broadcasting,
 * type promotion, strided and aliased operands, in-place and out= forms,
 * every dtype, reductions, matrix products against a naive loop, random
 * numbers against Philox itself, and the error paths. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#include "tests/tap.h"
#include "tests/keep.h"

/* ---------------------------------------------------------------- helpers */

/* Every tensor a test makes is kept here and released by drop_all(), so a
 * failing assertion never leaks (the suite also runs under valgrind). */
static int64_t numel_of(const int64_t *sizes, int ndim)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= sizes[i];
    return n;
}

/* A tensor of dtype holding values (row-major), made as float64 and
 * converted by the core. */
static weft_tensor *make(weft_dtype dtype, const int64_t *sizes, int ndim, const double *values)
{
    weft_tensor *f = NULL, *t = NULL;
    if (weft_empty(&f, sizes, ndim, WEFT_FLOAT64, WEFT_DEVICE_CPU) != 0)
        return NULL;
    int64_t n = numel_of(sizes, ndim);
    if (n > 0)
        memcpy(weft_tensor_data_ptr(f), values, (size_t)n * sizeof(double));
    if (dtype == WEFT_FLOAT64)
        return keep(f);
    weft_to_dtype(&t, f, dtype);
    weft_tensor_release(f);
    return keep(t);
}

#define VALUES(...) ((const double[]){__VA_ARGS__})
#define NVALUES(...) ((int64_t)(sizeof VALUES(__VA_ARGS__) / sizeof(double)))
#define SHAPE(...) ((const int64_t[]){__VA_ARGS__}), (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))
/* VEC(dtype, v0, v1, ...) is 1-D; MAT(dtype, rows, cols, values...) is 2-D. */
#define VEC(dtype, ...) make(dtype, (const int64_t[]){NVALUES(__VA_ARGS__)}, 1, VALUES(__VA_ARGS__))
#define MAT(dtype, r, c, ...) make(dtype, (const int64_t[]){r, c}, 2, VALUES(__VA_ARGS__))
#define SCALAR(dtype, v) make(dtype, NULL, 0, VALUES(v))

/* Real and imaginary parts of element i of a contiguous complex tensor. */
static void cval(const weft_tensor *t, int64_t i, double *re, double *im)
{
    if (weft_tensor_dtype(t) == WEFT_COMPLEX64) {
        const float *p = (const float *)weft_tensor_data_ptr(t) + 2 * i;
        *re = p[0];
        *im = p[1];
    } else {
        const double *p = (const double *)weft_tensor_data_ptr(t) + 2 * i;
        *re = p[0];
        *im = p[1];
    }
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
        double g = value_at(t, i), w = want[i];
        bool same = (isnan(g) && isnan(w)) || g == w || fabs(g - w) <= tol * (1 + fabs(w));
        if (!same) {
            diag("     element %lld: got %.17g, expected %.17g", (long long)i, g, w);
            return false;
        }
    }
    return true;
}
/* is_values(t, tol, "message", v0, v1, ...) */
#define is_values(t, tol, msg, ...) \
    ok(check_values((t), VALUES(__VA_ARGS__), NVALUES(__VA_ARGS__), (tol)), "%s", msg)

static bool check_shape(const weft_tensor *t, const int64_t *sizes, int ndim)
{
    if (!t || weft_tensor_ndim(t) != ndim)
        return false;
    for (int i = 0; i < ndim; i++)
        if (weft_tensor_size(t, i) != sizes[i])
            return false;
    return true;
}
#define is_shape(t, msg, ...) ok(check_shape((t), SHAPE(__VA_ARGS__)), "%s", msg)

static void is_error(int rc, int code, const char *needle, const char *what)
{
    if (rc != code)
        diag("     message: %s", weft_last_error());
    is_int(rc, code, "%s fails with %s", what, weft_error_name(code));
    if (needle)
        like(weft_last_error(), needle, "%s: the message says \"%s\"", what, needle);
}

/* Deterministic pseudo-random doubles in [-1, 1) for test inputs. */
static uint64_t rng_state = 88172645463325252ull;
static double rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) * 0x1p-52 - 1.0;
}

static weft_tensor *random_tensor(weft_dtype dtype, const int64_t *sizes, int ndim, double scale)
{
    int64_t n = numel_of(sizes, ndim);
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    for (int64_t i = 0; i < n; i++)
        v[i] = weft_dtype_is_integral(dtype, false) ? floor(rnd() * scale) : rnd() * scale;
    weft_tensor *t = make(dtype, sizes, ndim, v);
    free(v);
    return t;
}

/* ------------------------------------------------------------ arithmetic */

static void test_binary_basics(void)
{
    weft_tensor *a = VEC(WEFT_FLOAT32, 1, 2, 3), *b = VEC(WEFT_FLOAT32, 10, 20, 30), *r = NULL;
    is_int(weft_add(&r, a, b), 0, "add");
    is_int(weft_tensor_dtype(keep(r)), WEFT_FLOAT32, "add: float32 result");
    is_values(r, 0, "add values", 11, 22, 33);
    is_int(weft_add_ex(&r, a, b, 2.0), 0, "add with alpha");
    is_values(keep(r), 0, "add alpha=2: a + 2b", 21, 42, 63);
    is_int(weft_sub(&r, a, b), 0, "sub");
    is_values(keep(r), 0, "sub values", -9, -18, -27);
    is_int(weft_sub_ex(&r, a, b, 0.5), 0, "sub with alpha");
    is_values(keep(r), 0, "sub alpha=0.5: a - b/2", -4, -8, -12);
    is_int(weft_mul(&r, a, b), 0, "mul");
    is_values(keep(r), 0, "mul values", 10, 40, 90);
    is_int(weft_div(&r, b, a), 0, "div");
    is_values(keep(r), 0, "div values", 10, 10, 10);

    is_int(weft_add_scalar(&r, a, 0.5), 0, "add_scalar");
    is_values(keep(r), 0, "add_scalar values", 1.5, 2.5, 3.5);
    is_int(weft_add_scalar_ex(&r, a, 2, 3), 0, "add_scalar with alpha");
    is_values(keep(r), 0, "a + 3*2", 7, 8, 9);
    is_int(weft_sub_scalar(&r, a, 1), 0, "sub_scalar");
    is_values(keep(r), 0, "sub_scalar values", 0, 1, 2);
    is_int(weft_mul_scalar(&r, a, -2), 0, "mul_scalar");
    is_values(keep(r), 0, "mul_scalar values", -2, -4, -6);
    is_int(weft_div_scalar(&r, a, 4), 0, "div_scalar");
    is_values(keep(r), 0, "div_scalar values", 0.25, 0.5, 0.75);

    /* float64 keeps full precision */
    weft_tensor *d = VEC(WEFT_FLOAT64, 0.1, 1e16), *e = VEC(WEFT_FLOAT64, 0.2, 1);
    is_int(weft_add(&r, d, e), 0, "float64 add");
    is_values(keep(r), 0, "float64 add is exact to the last bit", 0.1 + 0.2, 1e16 + 1);
    /* division by zero follows IEEE */
    weft_tensor *z = VEC(WEFT_FLOAT32, 1, -1, 0), *zero = VEC(WEFT_FLOAT32, 0, 0, 0);
    is_int(weft_div(&r, z, zero), 0, "div by zero");
    keep(r);
    ok(isinf(value_at(r, 0)) && value_at(r, 0) > 0 && isinf(value_at(r, 1)) && value_at(r, 1) < 0 && isnan(value_at(r, 2)),
       "1/0 = inf, -1/0 = -inf, 0/0 = nan");
    drop_all();
}

static void test_broadcasting(void)
{
    weft_tensor *col = MAT(WEFT_FLOAT32, 3, 1, 1, 2, 3);
    weft_tensor *row = MAT(WEFT_FLOAT32, 1, 4, 10, 20, 30, 40), *r = NULL;
    is_int(weft_add(&r, col, row), 0, "[3,1] + [1,4]");
    is_shape(keep(r), "[3,1] + [1,4] is [3,4]", 3, 4);
    is_values(r, 0, "[3,1] + [1,4] values", 11, 21, 31, 41, 12, 22, 32, 42, 13, 23, 33, 43);

    weft_tensor *m = MAT(WEFT_INT64, 2, 3, 1, 2, 3, 4, 5, 6), *v = VEC(WEFT_INT64, 10, 20, 30);
    is_int(weft_mul(&r, m, v), 0, "[2,3] * [3]");
    is_shape(keep(r), "[2,3] * [3] is [2,3]", 2, 3);
    is_values(r, 0, "[2,3] * [3] values", 10, 40, 90, 40, 100, 180);
    is_int(weft_sub(&r, v, m), 0, "[3] - [2,3]");
    is_values(keep(r), 0, "[3] - [2,3] values", 9, 18, 27, 6, 15, 24);

    weft_tensor *s = SCALAR(WEFT_FLOAT32, 2);
    is_int(weft_mul(&r, s, col), 0, "0-d * tensor");
    is_shape(keep(r), "0-d * [3,1] is [3,1]", 3, 1);
    is_values(r, 0, "0-d * tensor values", 2, 4, 6);
    is_int(weft_add(&r, s, s), 0, "0-d + 0-d");
    ok(keep(r) && weft_tensor_ndim(r) == 0, "0-d + 0-d is 0-d");
    is_values(r, 0, "0-d + 0-d value", 4);

    /* a 3-D broadcast against a strided 2-D operand */
    weft_tensor *cube = NULL, *mt = NULL;
    is_int(weft_arange(&cube, 0, 24, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU), 0, "arange for a cube");
    keep(cube);
    weft_tensor *cube3 = NULL;
    weft_view(&cube3, cube, (const int64_t[]){2, 3, 4}, 3);
    keep(cube3);
    weft_tensor *m43 = random_tensor(WEFT_FLOAT64, (const int64_t[]){4, 3}, 2, 1);
    weft_t(&mt, m43); /* [3, 4], strides [1, 3] */
    keep(mt);
    is_int(weft_add(&r, cube3, mt), 0, "[2,3,4] + transposed [3,4]");
    keep(r);
    bool good = check_shape(r, (const int64_t[]){2, 3, 4}, 3);
    for (int64_t i = 0; i < 24 && good; i++)
        good = value_at(r, i) == (double)i + value_at(m43, (i % 4) * 3 + (i / 4) % 3);
    ok(good, "[2,3,4] + transposed [3,4] values");

    /* mismatched shapes */
    weft_tensor *a3 = VEC(WEFT_FLOAT32, 1, 2, 3), *a4 = VEC(WEFT_FLOAT32, 1, 2, 3, 4);
    r = NULL;
    is_error(weft_add(&r, a3, a4), WEFT_ESHAPE, "[3]", "add [3] + [4]");
    like(weft_last_error(), "[4]", "the message names both shapes");
    like(weft_last_error(), "add", "the message names the operator");
    ok(r == NULL, "the result pointer stays NULL on error");
    weft_tensor *m23 = MAT(WEFT_FLOAT32, 2, 3, 1, 2, 3, 4, 5, 6), *m32 = MAT(WEFT_FLOAT32, 3, 2, 1, 2, 3, 4, 5, 6);
    is_error(weft_mul(&r, m23, m32), WEFT_ESHAPE, "[2, 3]", "mul [2,3] * [3,2]");
    like(weft_last_error(), "[3, 2]", "the message names both shapes");
    drop_all();
}

static void test_promotion(void)
{
    weft_tensor *i32 = VEC(WEFT_INT32, 1, 2, 3), *f32 = VEC(WEFT_FLOAT32, 0.5, 0.5, 0.5), *r = NULL;
    is_int(weft_add(&r, i32, f32), 0, "int32 + float32");
    is_int(weft_tensor_dtype(keep(r)), WEFT_FLOAT32, "int32 + float32 -> float32");
    is_values(r, 0, "int32 + float32 values", 1.5, 2.5, 3.5);

    weft_tensor *u8 = VEC(WEFT_UINT8, 200, 1), *i8 = VEC(WEFT_INT8, 100, -2);
    is_int(weft_add(&r, u8, i8), 0, "uint8 + int8");
    is_int(weft_tensor_dtype(keep(r)), WEFT_INT16, "uint8 + int8 -> int16");
    is_values(r, 0, "uint8 + int8 values do not wrap in int16", 300, -1);

    weft_tensor *b = VEC(WEFT_BOOL, 1, 1, 0, 0), *c = VEC(WEFT_BOOL, 1, 0, 1, 0);
    is_int(weft_add(&r, b, c), 0, "bool + bool");
    is_int(weft_tensor_dtype(keep(r)), WEFT_BOOL, "bool + bool -> bool");
    is_values(r, 0, "bool + bool is a logical or", 1, 1, 1, 0);
    is_int(weft_mul(&r, b, c), 0, "bool * bool");
    is_values(keep(r), 0, "bool * bool is a logical and", 1, 0, 0, 0);
    is_error(weft_sub(&r, b, c), WEFT_EDTYPE, "bool", "bool - bool");
    is_error(weft_sub(&r, VEC(WEFT_FLOAT32, 1, 1, 1, 1), b), WEFT_EDTYPE, "bool", "float - bool");
    is_error(weft_sub_scalar(&r, b, 1), WEFT_EDTYPE, "bool", "bool - 1");

    weft_tensor *i64 = VEC(WEFT_INT64, 1, 2), *f16 = VEC(WEFT_FLOAT16, 0.5, 0.25);
    is_int(weft_add(&r, i64, f16), 0, "int64 + float16");
    is_int(weft_tensor_dtype(keep(r)), WEFT_FLOAT16, "int64 + float16 -> float16");
    is_values(r, 0, "int64 + float16 values", 1.5, 2.25);

    /* Scalars do not promote within their category */
    is_int(weft_add_scalar(&r, i32, 2.5), 0, "int32 + 2.5");
    is_int(weft_tensor_dtype(keep(r)), WEFT_FLOAT32, "int32 + 2.5 -> float32 (the default dtype)");
    is_values(r, 0, "int32 + 2.5 values", 3.5, 4.5, 5.5);
    is_int(weft_add_scalar(&r, i32, 2), 0, "int32 + 2");
    is_int(weft_tensor_dtype(keep(r)), WEFT_INT32, "int32 + 2 stays int32");
    is_int(weft_mul_scalar(&r, f16, 2.5), 0, "float16 * 2.5");
    is_int(weft_tensor_dtype(keep(r)), WEFT_FLOAT16, "float16 * 2.5 stays float16");
    is_values(r, 0, "float16 * 2.5 values", 1.25, 0.625);
    is_int(weft_add_scalar(&r, b, 2), 0, "bool + 2");
    is_int(weft_tensor_dtype(keep(r)), WEFT_INT64, "bool + 2 -> int64");
    is_values(r, 0, "bool + 2 values", 3, 3, 2, 2);
    is_int(weft_add_scalar(&r, u8, 100), 0, "uint8 + 100");
    is_values(keep(r), 0, "uint8 + 100 wraps like PyTorch", 44, 101);

    /* true division */
    weft_tensor *n = VEC(WEFT_INT64, 7, -7), *d = VEC(WEFT_INT64, 2, 2);
    is_int(weft_div(&r, n, d), 0, "int64 / int64");
    is_int(weft_tensor_dtype(keep(r)), WEFT_FLOAT32, "int64 / int64 -> float32");
    is_values(r, 0, "int64 / int64 is true division", 3.5, -3.5);
    is_int(weft_div_scalar(&r, n, 2), 0, "int64 / 2");
    is_values(keep(r), 0, "int64 / 2 is true division", 3.5, -3.5);

    /* integer overflow wraps */
    weft_tensor *big = VEC(WEFT_INT32, 2147483647, -2147483648.0);
    is_int(weft_add_scalar(&r, big, 1), 0, "int32 max + 1");
    is_values(keep(r), 0, "int32 arithmetic wraps", -2147483648.0, -2147483647);
    is_int(weft_mul(&r, big, big), 0, "int32 max * max");
    is_values(keep(r), 0, "int32 products wrap", 1, 0);

    /* alpha must be integral for integral tensors */
    is_error(weft_add_ex(&r, i32, i32, 0.5), WEFT_EINVAL, "alpha", "int32 add with alpha 0.5");
    drop_all();
}

static void test_strided(void)
{
    /* a [3, 4] matrix and its transpose */
    weft_tensor *m = MAT(WEFT_FLOAT32, 3, 4, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11);
    weft_tensor *n = MAT(WEFT_FLOAT32, 4, 3, 0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110);
    weft_tensor *mt = NULL, *r = NULL;
    weft_t(&mt, m);
    keep(mt);
    ok(!weft_tensor_is_contiguous(mt), "the transpose is not contiguous");
    is_int(weft_add(&r, mt, n), 0, "transposed + contiguous");
    is_values(keep(r), 0, "transposed + contiguous values",
              0, 14, 28, 31, 45, 59, 62, 76, 90, 93, 107, 121);

    /* every other column of m: [3, 2] with strides [4, 2] */
    weft_tensor *cols = NULL;
    is_int(weft_slice(&cols, m, 1, 0, 4, 2), 0, "slice with step 2");
    keep(cols);
    is_int(weft_mul_scalar(&r, cols, 10), 0, "mul of a stepped slice");
    is_values(keep(r), 0, "stepped slice values", 0, 20, 40, 60, 80, 100);
    weft_tensor *rows = NULL, *rowst = NULL;
    weft_slice(&rows, m, 0, 0, 3, 2); /* rows 0 and 2: [2, 4] */
    keep(rows);
    weft_transpose(&rowst, rows, 0, 1); /* [4, 2] */
    keep(rowst);
    is_int(weft_sub(&r, rowst, rowst), 0, "a strided view minus itself");
    is_values(keep(r), 0, "x - x = 0 for a strided x", 0, 0, 0, 0, 0, 0, 0, 0);
    is_int(weft_neg(&r, rowst), 0, "neg of a transposed slice");
    is_values(keep(r), 0, "neg of a transposed slice values", -0.0, -8, -1, -9, -2, -10, -3, -11);

    /* writing through a strided view changes only its elements */
    weft_tensor *base = MAT(WEFT_FLOAT64, 2, 4, 1, 1, 1, 1, 1, 1, 1, 1), *view = NULL;
    weft_slice(&view, base, 1, 1, 4, 2); /* columns 1 and 3 */
    keep(view);
    is_int(weft_mul_scalar_(view, 5), 0, "in-place mul of a stepped view");
    is_values(base, 0, "only the view's elements changed", 1, 5, 1, 5, 1, 5, 1, 5);

    /* large transposed input: the parallel path and the dimension carry */
    weft_tensor *big = random_tensor(WEFT_FLOAT32, (const int64_t[]){513, 700}, 2, 10);
    weft_tensor *bigt = NULL, *ones = NULL;
    weft_t(&bigt, big);
    keep(bigt);
    weft_ones(&ones, (const int64_t[]){700, 513}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(ones);
    is_int(weft_add(&r, bigt, ones), 0, "large transposed add");
    keep(r);
    bool good = true;
    for (int64_t i = 0; i < 700 * 513 && good; i += 331)
        good = value_at(r, i) == (double)(float)(value_at(big, (i % 513) * 700 + i / 513) + 1.0);
    ok(good, "large transposed add values (sampled)");
    drop_all();
}

static void test_inplace_and_out(void)
{
    weft_tensor *a = VEC(WEFT_FLOAT32, 1, 2, 3), *b = VEC(WEFT_FLOAT32, 1, 1, 1);
    uint32_t v0 = weft_tensor_version(a);
    is_int(weft_add_(a, b), 0, "add_");
    is_values(a, 0, "add_ values", 2, 3, 4);
    ok(weft_tensor_version(a) != v0, "add_ bumps the version");
    is_int(weft_sub_ex_(a, b, 2), 0, "sub_ with alpha");
    is_values(a, 0, "sub_ values", 0, 1, 2);
    is_int(weft_mul_(a, a), 0, "mul_(a, a)");
    is_values(a, 0, "mul_(a, a) squares", 0, 1, 4);
    is_int(weft_div_scalar_(a, 2), 0, "div_scalar_");
    is_values(a, 0, "div_scalar_ values", 0, 0.5, 2);
    is_int(weft_add_scalar_ex_(a, 1, -1), 0, "add_scalar_ with alpha -1");
    is_values(a, 0, "add_scalar_ values", -1, -0.5, 1);
    is_int(weft_sub_scalar_(a, -1), 0, "sub_scalar_");
    is_values(a, 0, "sub_scalar_ values", 0, 0.5, 2);
    is_int(weft_mul_scalar_(a, 4), 0, "mul_scalar_");
    is_values(a, 0, "mul_scalar_ values", 0, 2, 8);

    /* aliasing: add_(a, a) and out= aliasing its inputs */
    weft_tensor *x = VEC(WEFT_FLOAT64, 1, 2, 3);
    is_int(weft_add_(x, x), 0, "add_(x, x)");
    is_values(x, 0, "add_(x, x) doubles", 2, 4, 6);
    is_int(weft_add_out(x, x, x), 0, "add_out(x, x, x)");
    is_values(x, 0, "add_out(x, x, x) doubles", 4, 8, 12);
    /* partial overlap: y[1:] += y[:-1] reads the old values */
    weft_tensor *y = VEC(WEFT_FLOAT64, 1, 2, 3, 4), *hi = NULL, *lo = NULL;
    weft_slice(&hi, y, 0, 1, 4, 1);
    weft_slice(&lo, y, 0, 0, 3, 1);
    keep(hi);
    keep(lo);
    is_int(weft_add_(hi, lo), 0, "overlapping add_");
    is_values(y, 0, "overlapping add_ reads the inputs before writing", 1, 3, 5, 7);
    /* in-place with a transposed alias of itself */
    weft_tensor *sq = MAT(WEFT_FLOAT32, 2, 2, 1, 2, 3, 4), *sqt = NULL;
    weft_t(&sqt, sq);
    keep(sqt);
    is_int(weft_add_(sq, sqt), 0, "add_(m, m.t())");
    is_values(sq, 0, "add_(m, m.t()) values", 2, 5, 5, 8);

    /* in-place: self must have the broadcast shape, the result must cast */
    weft_tensor *col = MAT(WEFT_FLOAT32, 3, 1, 1, 2, 3), *m34 = NULL;
    weft_zeros(&m34, (const int64_t[]){3, 4}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(m34);
    is_error(weft_add_(col, m34), WEFT_ESHAPE, "doesn't match the broadcast shape [3, 4]",
             "[3,1].add_([3,4])");
    like(weft_last_error(), "[3, 1]", "the message names self's shape");
    is_values(col, 0, "a failed add_ leaves self alone", 1, 2, 3);
    is_int(weft_add_(m34, col), 0, "[3,4].add_([3,1]) broadcasts other");
    is_values(m34, 0, "[3,4].add_([3,1]) values", 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    weft_tensor *i = VEC(WEFT_INT32, 1, 2, 3), *f = VEC(WEFT_FLOAT32, 0.5, 0.5, 0.5);
    is_error(weft_add_(i, f), WEFT_EDTYPE, "can't be cast", "int32.add_(float32)");
    is_error(weft_div_(i, i), WEFT_EDTYPE, "int32", "int32.div_(int32) (true division)");
    is_int(weft_add_(f, i), 0, "float32.add_(int32)");
    is_values(f, 0, "float32.add_(int32) values", 1.5, 2.5, 3.5);
    weft_tensor *h = VEC(WEFT_FLOAT16, 1, 2);
    is_int(weft_add_(h, VEC(WEFT_FLOAT32, 0.5, 0.25)), 0, "float16.add_(float32)");
    is_int(weft_tensor_dtype(h), WEFT_FLOAT16, "self keeps its dtype");
    is_values(h, 0, "float16.add_(float32) values", 1.5, 2.25);

    /* out= */
    weft_tensor *out = NULL, *empty = NULL;
    weft_empty(&out, (const int64_t[]){3}, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    keep(out);
    is_int(weft_mul_out(out, VEC(WEFT_FLOAT32, 1, 2, 3), VEC(WEFT_FLOAT32, 4, 5, 6)), 0,
           "mul_out into float64");
    is_values(out, 0, "mul_out values cast to out's dtype", 4, 10, 18);
    weft_empty(&empty, (const int64_t[]){0}, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(empty);
    is_int(weft_add_out(empty, col, VEC(WEFT_FLOAT32, 1, 2)), 0, "add_out into an empty out");
    is_shape(empty, "an empty out= is resized to the broadcast shape", 3, 2);
    is_values(empty, 0, "resized out values", 2, 3, 3, 4, 4, 5);
    weft_tensor *wrong = NULL;
    weft_empty(&wrong, (const int64_t[]){2, 2}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(wrong);
    is_error(weft_add_out(wrong, col, VEC(WEFT_FLOAT32, 1, 2)), WEFT_ESHAPE, "[2, 2]",
             "add_out with a wrong-shaped out");
    like(weft_last_error(), "[3, 2]", "the message names the expected shape");
    weft_tensor *iout = NULL;
    weft_empty(&iout, (const int64_t[]){3}, 1, WEFT_INT64, WEFT_DEVICE_CPU);
    keep(iout);
    is_error(weft_div_out(iout, i, i), WEFT_EDTYPE, "int64", "div_out into int64");
    /* out= that is a transposed view */
    weft_tensor *o2 = NULL, *o2t = NULL;
    weft_empty(&o2, (const int64_t[]){2, 3}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(o2);
    weft_t(&o2t, o2);
    keep(o2t);
    is_int(weft_sub_out(o2t, MAT(WEFT_FLOAT32, 3, 2, 1, 2, 3, 4, 5, 6), SCALAR(WEFT_FLOAT32, 1)),
           0, "sub_out into a transposed out");
    is_values(o2, 0, "transposed out= values", 0, 2, 4, 1, 3, 5);
    /* an out= whose elements overlap itself is refused */
    weft_tensor *one = VEC(WEFT_FLOAT32, 0), *expanded = NULL;
    weft_expand(&expanded, one, (const int64_t[]){4}, 1);
    keep(expanded);
    is_error(weft_add_out(expanded, VEC(WEFT_FLOAT32, 1, 2, 3, 4), SCALAR(WEFT_FLOAT32, 1)),
             WEFT_EINVAL, "single memory location", "add_out into an expanded tensor");
    drop_all();
}

/* ------------------------------------------ the flat fast path's boundary */

/* The same dtype, shape and elements, bit for bit (NaN matches NaN, and the
 * sign of zero counts). */
static bool same_result(const weft_tensor *x, const weft_tensor *y)
{
    if (!x || !y) {
        diag("     got a NULL tensor (%s)", weft_last_error());
        return false;
    }
    if (weft_tensor_dtype(x) != weft_tensor_dtype(y) || weft_tensor_ndim(x) != weft_tensor_ndim(y)) {
        diag("     dtypes %s and %s, %d and %d dims", weft_dtype_name(weft_tensor_dtype(x)),
             weft_dtype_name(weft_tensor_dtype(y)), weft_tensor_ndim(x), weft_tensor_ndim(y));
        return false;
    }
    for (int d = 0; d < weft_tensor_ndim(x); d++)
        if (weft_tensor_size(x, d) != weft_tensor_size(y, d))
            return false;
    for (int64_t i = 0; i < weft_tensor_numel(x); i++) {
        double g = value_at(x, i), w = value_at(y, i);
        if (!((isnan(g) && isnan(w)) || (g == w && signbit(g) == signbit(w)))) {
            diag("     element %lld: %.17g and %.17g", (long long)i, g, w);
            return false;
        }
    }
    return true;
}

/* A non-contiguous view with t's values: the transpose of a contiguous copy
 * of t's transpose (t 2-D). */
static weft_tensor *strided_copy(const weft_tensor *t)
{
    weft_tensor *tt = NULL, *c = NULL, *v = NULL;
    weft_t(&tt, t);
    weft_contiguous(&c, tt);
    weft_t(&v, c);
    weft_tensor_release(tt);
    weft_tensor_release(c);
    return keep(v);
}

typedef int (*binary_fn)(weft_tensor **, const weft_tensor *, const weft_tensor *);
typedef int (*binary_scalar_fn)(weft_tensor **, const weft_tensor *, double);

/* Small contiguous operands of one shape and dtype take the CPU plugin's
 * flat fast path; transposed, broadcast, mixed-dtype and large operands the
 * general iterator.  Both must give the same results and the same errors. */
static void test_flat_fast_path(void)
{
    static const weft_dtype dtypes[] = {WEFT_BOOL,    WEFT_UINT8,   WEFT_INT32,   WEFT_INT64,
                                        WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_FLOAT32, WEFT_FLOAT64,
                                        WEFT_COMPLEX64};
    static const struct {
        const char *name;
        binary_fn fn;
        binary_scalar_fn scalar_fn;
    } ops[] = {{"add", weft_add, weft_add_scalar},
               {"sub", weft_sub, weft_sub_scalar},
               {"mul", weft_mul, weft_mul_scalar},
               {"div", weft_div, weft_div_scalar}};
    for (size_t k = 0; k < sizeof dtypes / sizeof *dtypes; k++) {
        weft_dtype dt = dtypes[k];
        const char *dn = weft_dtype_name(dt);
        weft_tensor *a = random_tensor(dt, (const int64_t[]){3, 4}, 2, 10);
        weft_tensor *b = random_tensor(dt, (const int64_t[]){3, 4}, 2, 10);
        weft_tensor *as = strided_copy(a), *bs = strided_copy(b);
        weft_tensor *row = NULL, *rowx = NULL, *rowc = NULL;
        weft_slice(&row, b, 0, 1, 2, 1); /* [1, 4] */
        keep(row);
        weft_expand(&rowx, row, (const int64_t[]){3, 4}, 2);
        keep(rowx);
        weft_contiguous(&rowc, rowx); /* the broadcast row, materialised */
        keep(rowc);
        weft_tensor *three = SCALAR(dt, 3);
        for (size_t o = 0; o < sizeof ops / sizeof *ops; o++) {
            if (dt == WEFT_BOOL && (o == 1 || o == 3))
                continue; /* sub refuses bool; div of bool is int division */
            weft_tensor *fast = NULL, *slow = NULL;
            int rf = ops[o].fn(&fast, a, b), rs = ops[o].fn(&slow, as, bs);
            keep(fast);
            keep(slow);
            ok(rf == 0 && rs == 0 && same_result(fast, slow),
               "%s %s: contiguous and transposed operands agree", dn, ops[o].name);
            rf = ops[o].fn(&fast, a, rowc);
            rs = ops[o].fn(&slow, a, row);
            keep(fast);
            keep(slow);
            ok(rf == 0 && rs == 0 && same_result(fast, slow),
               "%s %s: a materialised and a broadcast row agree", dn, ops[o].name);
            if (dt == WEFT_BOOL)
                continue; /* bool + Scalar 3 is int64, bool + bool tensor bool */
            rf = ops[o].scalar_fn(&fast, a, 3);
            rs = ops[o].fn(&slow, a, three);
            keep(fast);
            keep(slow);
            ok(rf == 0 && rs == 0 && same_result(fast, slow),
               "%s %s: a Scalar and a 0-d tensor agree", dn, ops[o].name);
        }
    }

    /* mixed dtypes: the general path converts; converting first is the
     * fast path */
    static const weft_dtype pairs[][2] = {{WEFT_FLOAT32, WEFT_FLOAT64}, {WEFT_INT32, WEFT_FLOAT32},
                                          {WEFT_INT64, WEFT_INT32}, {WEFT_UINT8, WEFT_INT8},
                                          {WEFT_FLOAT16, WEFT_BFLOAT16}};
    for (size_t k = 0; k < sizeof pairs / sizeof *pairs; k++) {
        weft_tensor *x = random_tensor(pairs[k][0], (const int64_t[]){2, 5}, 2, 10);
        weft_tensor *y = random_tensor(pairs[k][1], (const int64_t[]){2, 5}, 2, 10);
        weft_dtype ct = weft_promote_types(pairs[k][0], pairs[k][1]);
        weft_tensor *xc = NULL, *yc = NULL, *fast = NULL, *slow = NULL;
        weft_to_dtype(&xc, x, ct);
        weft_to_dtype(&yc, y, ct);
        keep(xc);
        keep(yc);
        int rs = weft_mul(&slow, x, y), rf = weft_mul(&fast, xc, yc);
        keep(slow);
        keep(fast);
        ok(rs == 0 && rf == 0 && same_result(fast, slow), "mul %s * %s agrees with converted operands",
           weft_dtype_name(pairs[k][0]), weft_dtype_name(pairs[k][1]));
    }

    /* one shape, not just one element count: [1,3] + [3] broadcasts */
    weft_tensor *r = NULL, *r13 = MAT(WEFT_FLOAT32, 1, 3, 1, 2, 3), *v3 = VEC(WEFT_FLOAT32, 10, 20, 30);
    is_int(weft_add(&r, r13, v3), 0, "[1,3] + [3]");
    is_shape(keep(r), "[1,3] + [3] is [1,3]", 1, 3);
    is_values(r, 0, "[1,3] + [3] values", 11, 22, 33);
    is_int(weft_add(&r, v3, r13), 0, "[3] + [1,3]");
    is_shape(keep(r), "[3] + [1,3] is [1,3]", 1, 3);
    weft_tensor *s0 = SCALAR(WEFT_FLOAT64, 1.5), *s1 = SCALAR(WEFT_FLOAT64, 2);
    is_int(weft_mul(&r, s0, s1), 0, "0-d * 0-d");
    ok(keep(r) && weft_tensor_ndim(r) == 0, "0-d * 0-d is 0-d");
    is_values(r, 0, "0-d * 0-d value", 3);
    is_int(weft_add_(s0, s1), 0, "0-d add_ 0-d");
    is_values(s0, 0, "0-d add_ 0-d value", 3.5);
    weft_tensor *e = NULL;
    weft_empty(&e, (const int64_t[]){0}, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(e);
    is_int(weft_add(&r, e, e), 0, "[0] + [0]");
    is_shape(keep(r), "[0] + [0] is [0]", 0);

    /* either side of the parallel grain (32768 elements) */
    for (int64_t n = 32767; n <= 32769; n++) {
        weft_tensor *x = random_tensor(WEFT_FLOAT32, &n, 1, 100);
        weft_tensor *y = random_tensor(WEFT_FLOAT32, &n, 1, 100);
        is_int(weft_sub_ex(&r, x, y, 0.5), 0, "sub of %lld elements", (long long)n);
        keep(r);
        bool good = weft_tensor_numel(r) == n;
        for (int64_t i = 0; i < n && good; i++)
            good = value_at(r, i) == (double)(float)((float)value_at(x, i) - 0.5f * (float)value_at(y, i));
        ok(good, "sub of %lld elements: every value", (long long)n);
        weft_tensor *before = NULL;
        weft_to_dtype(&before, x, WEFT_FLOAT64);
        keep(before);
        is_int(weft_mul_scalar_(x, 2), 0, "mul_scalar_ of %lld elements", (long long)n);
        good = true;
        for (int64_t i = 0; i < n && good; i++)
            good = value_at(x, i) == 2 * value_at(before, i); /* exact: no overflow */
        ok(good, "mul_scalar_ of %lld elements: every value", (long long)n);
    }

    /* the same elements in and out are fine; any other overlap reads the
     * inputs before they are written */
    weft_tensor *x = VEC(WEFT_FLOAT32, 1, 2, 3);
    is_int(weft_add_(x, x), 0, "add_(x, x)");
    is_values(x, 0, "add_(x, x) doubles", 2, 4, 6);
    is_int(weft_mul_(x, x), 0, "mul_(x, x)");
    is_values(x, 0, "mul_(x, x) squares", 4, 16, 36);
    is_int(weft_sub_(x, x), 0, "sub_(x, x)");
    is_values(x, 0, "sub_(x, x) is zero", 0, 0, 0);
    weft_tensor *y = VEC(WEFT_FLOAT32, 1, 2, 3), *z = VEC(WEFT_FLOAT32, 5, 5, 5);
    is_int(weft_add_out(y, z, y), 0, "add_out(y, z, y): out is other");
    is_values(y, 0, "add_out(y, z, y) values", 6, 7, 8);
    is_int(weft_mul_out(z, z, z), 0, "mul_out(z, z, z)");
    is_values(z, 0, "mul_out(z, z, z) values", 25, 25, 25);
    is_int(weft_neg_out(z, z), 0, "neg_out(z, z)");
    is_values(z, 0, "neg_out(z, z) values", -25, -25, -25);
    weft_tensor *w = VEC(WEFT_FLOAT64, 1, 10, 100, 1000, 10000), *hi = NULL, *lo = NULL;
    weft_slice(&hi, w, 0, 1, 5, 1);
    weft_slice(&lo, w, 0, 0, 4, 1);
    keep(hi);
    keep(lo);
    ok(weft_tensor_is_contiguous(hi) && weft_tensor_is_contiguous(lo),
       "overlapping contiguous views of one shape");
    is_int(weft_add_(hi, lo), 0, "add_(w[1:], w[:-1])");
    is_values(w, 0, "add_(w[1:], w[:-1]) reads the old values", 1, 11, 110, 1100, 11000);
    weft_tensor *ones4 = VEC(WEFT_FLOAT64, 1, 1, 1, 1);
    is_int(weft_add_out(hi, ones4, lo), 0, "add_out(w[1:], ones, w[:-1])");
    is_values(w, 0, "an out= overlapping other reads the old values", 1, 2, 12, 111, 1101);
    is_int(weft_add_out(hi, lo, lo), 0, "add_out(w[1:], w[:-1], w[:-1])");
    is_values(w, 0, "an out= overlapping both inputs reads the old values", 1, 2, 4, 24, 222);
    is_int(weft_neg_out(hi, lo), 0, "neg_out(w[1:], w[:-1])");
    is_values(w, 0, "a unary out= overlapping its input reads the old values", 1, -1, -2, -4, -24);
    is_int(weft_neg_(lo), 0, "neg_ of a view");
    is_values(w, 0, "neg_ of a view", -1, 1, 2, 4, -24);
    weft_fill_(w, 0);
    is_int(weft_add_scalar_(w, 1), 0, "add_scalar_ of a 5-vector");
    is_int(weft_mul_scalar_(hi, 10), 0, "mul_scalar_ of a view");
    is_values(w, 0, "mul_scalar_ of a view changes only the view", 1, 10, 10, 10, 10);

    /* out= of another dtype or of another shape goes the general way */
    weft_tensor *o64 = NULL, *oempty = NULL, *o2 = NULL;
    weft_empty(&o64, (const int64_t[]){3}, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    keep(o64);
    is_int(weft_add_out(o64, VEC(WEFT_FLOAT32, 0.1, 1, 2), VEC(WEFT_FLOAT32, 0.2, 1, 2)), 0,
           "float32 add_out into float64");
    is_values(o64, 0, "the float32 sum, cast", (double)(0.1f + 0.2f), 2, 4);
    weft_empty(&oempty, (const int64_t[]){0}, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(oempty);
    is_int(weft_mul_out(oempty, VEC(WEFT_FLOAT32, 1, 2), VEC(WEFT_FLOAT32, 3, 4)), 0,
           "mul_out into an empty out");
    is_values(oempty, 0, "an empty out= is resized", 3, 8);
    weft_empty(&o2, (const int64_t[]){2}, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(o2);
    is_error(weft_add_out(o2, VEC(WEFT_FLOAT32, 1, 2, 3), VEC(WEFT_FLOAT32, 1, 2, 3)),
             WEFT_ESHAPE, "doesn't match the broadcast shape [3]", "add_out into a [2] out");
    weft_tensor *i32 = VEC(WEFT_INT32, 1, 2, 3), *o32 = NULL;
    weft_empty(&o32, (const int64_t[]){3}, 1, WEFT_INT32, WEFT_DEVICE_CPU);
    keep(o32);
    is_error(weft_div_out(o32, i32, i32), WEFT_EDTYPE, "can't be cast", "int32 div_out into int32");

    /* the errors of operands the fast path would take */
    weft_tensor *bools = VEC(WEFT_BOOL, 1, 0, 1);
    r = NULL;
    is_error(weft_sub(&r, bools, bools), WEFT_EDTYPE, "subtraction", "bool - bool");
    like(weft_last_error(), "sub", "the message names the operator");
    is_error(weft_sub_(bools, bools), WEFT_EDTYPE, "subtraction", "bool.sub_(bool)");
    is_error(weft_add_ex(&r, i32, i32, 0.5), WEFT_EINVAL, "alpha must not be a floating point",
             "int32 add with alpha 0.5");
    like(weft_last_error(), "add", "the message names the operator");
    is_error(weft_add_scalar_(i32, 0.5), WEFT_EDTYPE, "can't be cast", "int32.add_scalar_(0.5)");
    is_values(i32, 0, "a failed add_scalar_ leaves self alone", 1, 2, 3);
    ok(r == NULL, "no result after the errors");
    is_int(weft_div(&r, i32, VEC(WEFT_INT32, 2, 2, 2)), 0, "int32 / int32");
    is_int(weft_tensor_dtype(keep(r)), WEFT_FLOAT32, "int32 / int32 is true division in float32");
    is_values(r, 0, "int32 / int32 values", 0.5, 1, 1.5);
    is_int(weft_add_scalar(&r, i32, 0.5), 0, "int32 + 0.5");
    is_int(weft_tensor_dtype(keep(r)), WEFT_FLOAT32, "int32 + 0.5 is float32");
    is_values(r, 0, "int32 + 0.5 values", 1.5, 2.5, 3.5);
    is_int(weft_add_scalar(&r, i32, 2), 0, "int32 + 2");
    is_int(weft_tensor_dtype(keep(r)), WEFT_INT32, "int32 + 2 stays int32");
    is_int(weft_mul_scalar(&r, bools, 3), 0, "bool * 3");
    is_int(weft_tensor_dtype(keep(r)), WEFT_INT64, "bool * 3 is int64");
    is_values(r, 0, "bool * 3 values", 3, 0, 3);
    weft_tensor *h = VEC(WEFT_FLOAT16, 1, 2);
    is_int(weft_add_scalar(&r, h, 0.25), 0, "float16 + 0.25");
    is_int(weft_tensor_dtype(keep(r)), WEFT_FLOAT16, "float16 + 0.25 stays float16");
    is_values(r, 0, "float16 + 0.25 values", 1.25, 2.25);
    is_int(weft_exp(&r, i32), 0, "exp of int32");
    is_int(weft_tensor_dtype(keep(r)), WEFT_FLOAT32, "exp of int32 is float32");
    is_error(weft_neg(&r, bools), WEFT_EDTYPE, "negation", "neg of bool");
    weft_tensor *nm = MAT(WEFT_FLOAT32, 2, 2, 1, -2, 3, -4), *nms = strided_copy(nm), *n1 = NULL;
    is_int(weft_neg(&n1, nm), 0, "neg of a contiguous matrix");
    is_int(weft_neg(&r, nms), 0, "neg of a transposed one");
    ok(same_result(keep(n1), keep(r)), "neg: contiguous and transposed agree");
    is_int(weft_abs_(nm), 0, "abs_ in place");
    is_values(nm, 0, "abs_ values", 1, 2, 3, 4);
    drop_all();
}

/* add, mul and sum over every dtype. */
static void test_dtype_coverage(void)
{
    for (int dt = 0; dt < WEFT_NUM_DTYPES; dt++) {
        weft_dtype dtype = (weft_dtype)dt;
        const char *name = weft_dtype_name(dtype);
        bool is_bool = dtype == WEFT_BOOL;
        weft_tensor *a = is_bool ? VEC(dtype, 1, 0, 1) : VEC(dtype, 1, 2, 3);
        weft_tensor *r = NULL, *s = NULL;
        int rc = weft_add(&r, a, a);
        is_int(rc, 0, "add works for %s", name);
        keep(r);
        ok(r && weft_tensor_dtype(r) == dtype, "add keeps %s", name);
        if (is_bool)
            ok(r && check_values(r, VALUES(1, 0, 1), 3, 0), "add values for bool");
        else
            ok(r && check_values(r, VALUES(2, 4, 6), 3, 0), "add values for %s", name);
        rc = weft_mul(&r, a, a);
        is_int(rc, 0, "mul works for %s", name);
        keep(r);
        if (is_bool)
            ok(r && check_values(r, VALUES(1, 0, 1), 3, 0), "mul values for bool");
        else
            ok(r && check_values(r, VALUES(1, 4, 9), 3, 0), "mul values for %s", name);
        rc = weft_sum(&s, a, NULL, 0, false);
        is_int(rc, 0, "sum works for %s", name);
        keep(s);
        weft_dtype want = weft_dtype_is_integral(dtype, true) ? WEFT_INT64 : dtype;
        ok(s && weft_tensor_dtype(s) == want, "sum of %s is %s", name, weft_dtype_name(want));
        ok(s && check_values(s, VALUES(is_bool ? 2 : 6), 1, 0), "sum value for %s", name);
        weft_tensor *filled = NULL;
        rc = weft_full(&filled, (const int64_t[]){2, 2}, 2, 1, dtype, WEFT_DEVICE_CPU);
        keep(filled);
        ok(rc == 0 && check_values(filled, VALUES(1, 1, 1, 1), 4, 0), "fill_ works for %s", name);
    }
    drop_all();
}

static void test_half_precision(void)
{
    weft_tensor *r = NULL;
    /* exact values */
    is_int(weft_add(&r, VEC(WEFT_FLOAT16, 1.5, -0.5), VEC(WEFT_FLOAT16, 2.25, 1024)), 0,
           "float16 add");
    is_values(keep(r), 0, "float16 exact sums", 3.75, 1023.5);
    /* round to nearest even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10 */
    is_int(weft_add(&r, VEC(WEFT_FLOAT16, 1, 1, 2048), VEC(WEFT_FLOAT16, 0x1p-11, 3 * 0x1p-11, 1)),
           0, "float16 rounding");
    is_values(keep(r), 0, "float16 ties round to even", 1, 1 + 0x1p-9, 2048);
    /* overflow, subnormals, NaN */
    is_int(weft_add(&r, VEC(WEFT_FLOAT16, 60000, 0x1p-24, 0x1p-14), VEC(WEFT_FLOAT16, 10000, 0x1p-24, -0x1p-24)),
           0, "float16 range");
    is_values(keep(r), 0, "float16 overflow, subnormal sums", INFINITY, 0x1p-23, 0x1p-14 - 0x1p-24);
    is_int(weft_mul_scalar(&r, VEC(WEFT_FLOAT16, 0x1p-24), 0.5), 0, "float16 underflow");
    is_values(keep(r), 0, "2^-25 rounds to 0 (tie to even)", 0);
    is_int(weft_div(&r, VEC(WEFT_FLOAT16, 0), VEC(WEFT_FLOAT16, 0)), 0, "float16 0/0");
    ok(isnan(value_at(keep(r), 0)), "float16 0/0 is NaN");
    is_int(weft_exp(&r, VEC(WEFT_FLOAT16, 0, 1)), 0, "float16 exp");
    is_values(keep(r), 1e-3, "float16 exp values", 1, 2.71875);
    /* bfloat16 */
    is_int(weft_add(&r, VEC(WEFT_BFLOAT16, 1, 1, 3), VEC(WEFT_BFLOAT16, 0x1p-8, 3 * 0x1p-8, 0.5)), 0,
           "bfloat16 add");
    is_values(keep(r), 0, "bfloat16 ties round to even", 1, 1 + 0x1p-6, 3.5);
    is_int(weft_mul(&r, VEC(WEFT_BFLOAT16, 1e38), VEC(WEFT_BFLOAT16, 100)), 0, "bfloat16 overflow");
    ok(isinf(value_at(keep(r), 0)), "bfloat16 1e38 * 100 is inf");
    is_int(weft_sum(&r, VEC(WEFT_BFLOAT16, 256, 1, 1, 1, 1), NULL, 0, false), 0, "bfloat16 sum");
    is_values(keep(r), 0, "bfloat16 sum accumulates in higher precision", 260);
    /* mixed half and bfloat16 promote to float32 */
    is_int(weft_add(&r, VEC(WEFT_FLOAT16, 1), VEC(WEFT_BFLOAT16, 2)), 0, "float16 + bfloat16");
    is_int(weft_tensor_dtype(keep(r)), WEFT_FLOAT32, "float16 + bfloat16 -> float32");
    drop_all();
}

static weft_tensor *complex_tensor(weft_dtype dtype, const double *re_im, int64_t n)
{
    weft_tensor *c = NULL, *t = NULL;
    weft_empty(&c, &n, 1, WEFT_COMPLEX128, WEFT_DEVICE_CPU);
    memcpy(weft_tensor_data_ptr(c), re_im, (size_t)n * 2 * sizeof(double));
    if (dtype == WEFT_COMPLEX128)
        return keep(c);
    weft_to_dtype(&t, c, dtype);
    weft_tensor_release(c);
    return keep(t);
}

static bool complex_is(const weft_tensor *t, int64_t i, double re, double im, double tol)
{
    double gr, gi;
    if (!t)
        return false;
    cval(t, i, &gr, &gi);
    if (fabs(gr - re) <= tol && fabs(gi - im) <= tol)
        return true;
    diag("     element %lld: got %g%+gi, expected %g%+gi", (long long)i, gr, gi, re, im);
    return false;
}

static void test_complex(void)
{
    for (int k = 0; k < 2; k++) {
        weft_dtype dt = k ? WEFT_COMPLEX128 : WEFT_COMPLEX64;
        const char *name = weft_dtype_name(dt);
        weft_tensor *a = complex_tensor(dt, VALUES(1, 2, -1, 0.5), 2);
        weft_tensor *b = complex_tensor(dt, VALUES(3, 4, 2, -2), 2), *r = NULL;
        is_int(weft_mul(&r, a, b), 0, "%s mul", name);
        keep(r);
        ok(complex_is(r, 0, -5, 10, 1e-6) && complex_is(r, 1, -1, 3, 1e-6), "%s mul values", name);
        is_int(weft_add_ex(&r, a, b, 2), 0, "%s add with alpha", name);
        keep(r);
        ok(complex_is(r, 0, 7, 10, 1e-6) && complex_is(r, 1, 3, -3.5, 1e-6), "%s add values", name);
        is_int(weft_div(&r, a, b), 0, "%s div", name);
        keep(r);
        ok(complex_is(r, 0, 0.44, 0.08, 1e-6), "%s div values: (1+2i)/(3+4i)", name);
        is_int(weft_neg(&r, a), 0, "%s neg", name);
        keep(r);
        ok(complex_is(r, 0, -1, -2, 0) && complex_is(r, 1, 1, -0.5, 0), "%s neg values", name);
        is_int(weft_abs(&r, b), 0, "%s abs", name);
        keep(r);
        is_int(weft_tensor_dtype(r), k ? WEFT_FLOAT64 : WEFT_FLOAT32, "abs of %s is real", name);
        is_values(r, 1e-6, "abs of 3+4i is 5", 5, sqrt(8));
        is_error(weft_abs_(b), WEFT_EDTYPE, "complex", "in-place abs of complex");
        is_int(weft_sum(&r, a, NULL, 0, false), 0, "%s sum", name);
        keep(r);
        ok(complex_is(r, 0, 0, 2.5, 1e-6), "%s sum value", name);
        is_int(weft_mean(&r, a, NULL, 0, false), 0, "%s mean", name);
        keep(r);
        ok(complex_is(r, 0, 0, 1.25, 1e-6), "%s mean value", name);
        is_int(weft_exp(&r, complex_tensor(dt, VALUES(0, 3.141592653589793), 1)), 0, "%s exp", name);
        keep(r);
        ok(complex_is(r, 0, -1, 0, 1e-6), "exp(i pi) = -1 in %s", name);
        is_int(weft_mul_scalar(&r, a, 2), 0, "%s * 2", name);
        keep(r);
        ok(complex_is(r, 0, 2, 4, 0), "%s scalar mul values", name);
    }
    weft_tensor *r = NULL;
    is_int(weft_add(&r, complex_tensor(WEFT_COMPLEX64, VALUES(1, 1), 1), VEC(WEFT_FLOAT64, 2)), 0,
           "complex64 + float64");
    is_int(weft_tensor_dtype(keep(r)), WEFT_COMPLEX128, "complex64 + float64 -> complex128");
    ok(complex_is(r, 0, 3, 1, 0), "complex64 + float64 value");
    drop_all();
}

/* ----------------------------------------------------------------- unary */

static void test_unary(void)
{
    weft_tensor *x = VEC(WEFT_FLOAT32, -2, -0.5, 0, 1, 4), *r = NULL;
    is_int(weft_neg(&r, x), 0, "neg");
    is_values(keep(r), 0, "neg values", 2, 0.5, -0.0, -1, -4);
    is_int(weft_abs(&r, x), 0, "abs");
    is_values(keep(r), 0, "abs values", 2, 0.5, 0, 1, 4);
    is_int(weft_relu(&r, x), 0, "relu");
    is_values(keep(r), 0, "relu values", 0, 0, 0, 1, 4);
    is_int(weft_exp(&r, x), 0, "exp");
    is_values(keep(r), 1e-6, "exp values", exp(-2), exp(-0.5), 1, exp(1), exp(4));
    is_int(weft_sigmoid(&r, x), 0, "sigmoid");
    is_values(keep(r), 1e-6, "sigmoid values", 1 / (1 + exp(2)), 1 / (1 + exp(0.5)), 0.5,
              1 / (1 + exp(-1)), 1 / (1 + exp(-4)));
    is_int(weft_tanh(&r, x), 0, "tanh");
    is_values(keep(r), 1e-6, "tanh values", tanh(-2), tanh(-0.5), 0, tanh(1), tanh(4));
    weft_tensor *p = VEC(WEFT_FLOAT64, 0, 1, 4, 2.25, -1);
    is_int(weft_sqrt(&r, p), 0, "sqrt");
    is_values(keep(r), 0, "sqrt values", 0, 1, 2, 1.5, NAN);
    is_int(weft_log(&r, p), 0, "log");
    is_values(keep(r), 1e-15, "log values", -INFINITY, 0, log(4), log(2.25), NAN);
    weft_tensor *big = VEC(WEFT_FLOAT32, -100, 100, NAN);
    is_int(weft_sigmoid(&r, big), 0, "sigmoid of large values");
    is_values(keep(r), 0, "sigmoid saturates without NaN", 0, 1, NAN);
    is_int(weft_relu(&r, big), 0, "relu of NaN");
    is_values(keep(r), 0, "relu keeps NaN", 0, 100, NAN);

    /* integer inputs */
    weft_tensor *i = VEC(WEFT_INT32, -3, 0, 4);
    is_int(weft_neg(&r, i), 0, "neg int32");
    is_int(weft_tensor_dtype(keep(r)), WEFT_INT32, "neg keeps int32");
    is_values(r, 0, "neg int32 values", 3, 0, -4);
    is_int(weft_abs(&r, i), 0, "abs int32");
    is_values(keep(r), 0, "abs int32 values", 3, 0, 4);
    is_int(weft_relu(&r, i), 0, "relu int32");
    is_int(weft_tensor_dtype(keep(r)), WEFT_INT32, "relu keeps int32");
    is_values(r, 0, "relu int32 values", 0, 0, 4);
    is_int(weft_exp(&r, i), 0, "exp int32");
    is_int(weft_tensor_dtype(keep(r)), WEFT_FLOAT32, "exp of int32 is float32");
    is_values(r, 1e-6, "exp int32 values", exp(-3), 1, exp(4));
    is_int(weft_sqrt(&r, VEC(WEFT_BOOL, 1, 0)), 0, "sqrt bool");
    is_int(weft_tensor_dtype(keep(r)), WEFT_FLOAT32, "sqrt of bool is float32");
    is_values(r, 0, "sqrt bool values", 1, 0);
    is_int(weft_neg(&r, VEC(WEFT_INT8, -128)), 0, "neg int8 min");
    is_values(keep(r), 0, "-(-128) wraps to -128 in int8", -128);
    is_int(weft_neg(&r, VEC(WEFT_UINT8, 1)), 0, "neg uint8");
    is_values(keep(r), 0, "-1 wraps to 255 in uint8", 255);
    is_error(weft_neg(&r, VEC(WEFT_BOOL, 1)), WEFT_EDTYPE, "bool", "neg of bool");
    ok(r == NULL, "failed neg leaves the result NULL");
    is_error(weft_relu(&r, VEC(WEFT_BOOL, 1)), WEFT_EDTYPE, "not supported for dtype bool",
             "relu of bool");
    is_error(weft_abs(&r, VEC(WEFT_BOOL, 1)), WEFT_EDTYPE, "bool", "abs of bool");
    is_int(weft_relu(&r, VEC(WEFT_FLOAT64, -0.0)), 0, "relu of -0.0");
    ok(keep(r) && value_at(r, 0) == 0 && signbit(value_at(r, 0)), "relu keeps -0.0 (as PyTorch)");

    /* in-place and out= */
    weft_tensor *y = VEC(WEFT_FLOAT32, 1, 4, 9);
    is_int(weft_sqrt_(y), 0, "sqrt_");
    is_values(y, 0, "sqrt_ values", 1, 2, 3);
    is_int(weft_neg_(y), 0, "neg_");
    is_values(y, 0, "neg_ values", -1, -2, -3);
    is_int(weft_abs_(y), 0, "abs_");
    is_values(y, 0, "abs_ values", 1, 2, 3);
    is_int(weft_log_(y), 0, "log_");
    is_values(y, 1e-6, "log_ values", 0, log(2), log(3));
    is_int(weft_exp_(y), 0, "exp_");
    is_values(y, 1e-6, "exp_ values", 1, 2, 3);
    is_int(weft_relu_(VEC(WEFT_FLOAT32, -1)), 0, "relu_");
    is_int(weft_tanh_(y), 0, "tanh_");
    is_values(y, 1e-6, "tanh_ values", tanh(1), tanh(2), tanh(3));
    is_int(weft_sigmoid_(y), 0, "sigmoid_");
    is_error(weft_exp_(VEC(WEFT_INT64, 1)), WEFT_EDTYPE, "can't be cast", "exp_ of int64");
    weft_tensor *out = NULL;
    weft_empty(&out, (const int64_t[]){3}, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    keep(out);
    is_int(weft_sqrt_out(out, VEC(WEFT_INT64, 1, 4, 16)), 0, "sqrt_out int64 into float64");
    is_values(out, 0, "sqrt_out values", 1, 2, 4);
    is_int(weft_relu_out(out, VEC(WEFT_FLOAT32, -1, 1, 2)), 0, "relu_out");
    is_values(out, 0, "relu_out values", 0, 1, 2);
    is_int(weft_neg_out(out, VEC(WEFT_FLOAT32, -1, 1, 2)), 0, "neg_out");
    is_int(weft_abs_out(out, VEC(WEFT_FLOAT32, -1, 1, 2)), 0, "abs_out");
    is_int(weft_exp_out(out, VEC(WEFT_FLOAT32, 0, 0, 0)), 0, "exp_out");
    is_int(weft_log_out(out, VEC(WEFT_FLOAT32, 1, 1, 1)), 0, "log_out");
    is_int(weft_tanh_out(out, VEC(WEFT_FLOAT32, 0, 0, 0)), 0, "tanh_out");
    is_int(weft_sigmoid_out(out, VEC(WEFT_FLOAT32, 0, 0, 0)), 0, "sigmoid_out");
    is_values(out, 0, "sigmoid_out values", 0.5, 0.5, 0.5);
    is_error(weft_exp_out(out, VEC(WEFT_FLOAT32, 0, 0)), WEFT_ESHAPE, "[2]", "exp_out wrong shape");
    drop_all();
}

/* ----------------------------------------------------------- reductions */

static void test_reductions(void)
{
    weft_tensor *m = MAT(WEFT_FLOAT32, 2, 3, 1, 2, 3, 4, 5, 6), *r = NULL;
    is_int(weft_sum(&r, m, NULL, 0, false), 0, "sum of all");
    ok(keep(r) && weft_tensor_ndim(r) == 0, "sum of all is 0-d");
    is_values(r, 0, "sum of all", 21);
    is_int(weft_sum(&r, m, (const int64_t[]){0}, 1, false), 0, "sum dim 0");
    is_shape(keep(r), "sum dim 0 shape", 3);
    is_values(r, 0, "sum dim 0 values", 5, 7, 9);
    is_int(weft_sum(&r, m, (const int64_t[]){-1}, 1, true), 0, "sum dim -1 keepdim");
    is_shape(keep(r), "sum dim -1 keepdim shape", 2, 1);
    is_values(r, 0, "sum dim -1 values", 6, 15);
    is_int(weft_sum(&r, m, (const int64_t[]){1, 0}, 2, true), 0, "sum dims [1, 0] keepdim");
    is_shape(keep(r), "sum over both dims with keepdim is [1, 1]", 1, 1);
    is_values(r, 0, "sum over both dims", 21);
    is_int(weft_mean(&r, m, (const int64_t[]){1}, 1, false), 0, "mean dim 1");
    is_values(keep(r), 1e-7, "mean dim 1 values", 2, 5);
    is_int(weft_mean(&r, m, NULL, 0, false), 0, "mean of all");
    is_values(keep(r), 1e-7, "mean of all", 3.5);

    /* a 3-D tensor, reduced over its outer and middle dims, and transposed */
    weft_tensor *ar = NULL, *c = NULL, *ct = NULL;
    weft_arange(&ar, 0, 24, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    keep(ar);
    weft_view(&c, ar, (const int64_t[]){2, 3, 4}, 3);
    keep(c);
    is_int(weft_sum(&r, c, (const int64_t[]){0, 2}, 2, false), 0, "sum dims [0, 2] of [2,3,4]");
    is_values(keep(r), 0, "sum dims [0, 2] values", 60, 92, 124);
    is_int(weft_sum(&r, c, (const int64_t[]){1}, 1, false), 0, "sum dim 1 of [2,3,4]");
    is_values(keep(r), 0, "sum dim 1 values", 12, 15, 18, 21, 48, 51, 54, 57);
    weft_transpose(&ct, c, 0, 2); /* [4, 3, 2] */
    keep(ct);
    is_int(weft_sum(&r, ct, (const int64_t[]){-1}, 1, false), 0, "sum of a transposed tensor");
    is_shape(keep(r), "its shape", 4, 3);
    is_values(r, 0, "its values", 12, 20, 28, 14, 22, 30, 16, 24, 32, 18, 26, 34);

    /* dtypes */
    weft_tensor *i = VEC(WEFT_INT32, 2147483647, 1);
    is_int(weft_sum(&r, i, NULL, 0, false), 0, "sum int32");
    is_int(weft_tensor_dtype(keep(r)), WEFT_INT64, "sum of int32 is int64");
    is_values(r, 0, "sum of int32 does not overflow in int64", 2147483648.0);
    is_int(weft_sum_ex(&r, i, NULL, 0, false, WEFT_INT32), 0, "sum int32 with dtype int32");
    is_values(keep(r), 0, "sum with dtype int32 wraps", -2147483648.0);
    is_int(weft_sum(&r, VEC(WEFT_BOOL, 1, 0, 1, 1), NULL, 0, false), 0, "sum bool");
    is_int(weft_tensor_dtype(keep(r)), WEFT_INT64, "sum of bool is int64");
    is_values(r, 0, "sum of bool counts", 3);
    is_int(weft_sum_ex(&r, VEC(WEFT_INT8, 1, -1), NULL, 0, false, WEFT_BOOL), 0, "sum as bool");
    is_values(keep(r), 0, "sum as bool converts first (any)", 1);
    is_int(weft_sum_ex(&r, m, NULL, 0, false, WEFT_FLOAT64), 0, "sum with dtype float64");
    is_int(weft_tensor_dtype(keep(r)), WEFT_FLOAT64, "sum dtype argument");
    is_error(weft_mean(&r, i, NULL, 0, false), WEFT_EDTYPE, "floating point", "mean of int32");
    is_int(weft_mean_ex(&r, i, NULL, 0, false, WEFT_FLOAT64), 0, "mean of int32 with dtype");
    is_values(keep(r), 0, "mean of int32 as float64", 1073741824);
    is_error(weft_mean_ex(&r, m, NULL, 0, false, WEFT_INT64), WEFT_EDTYPE, "Optional",
             "mean with an integer dtype");

    /* errors */
    is_error(weft_sum(&r, m, (const int64_t[]){2}, 1, false), WEFT_ERANGE, "[-2, 1]",
             "sum over dim 2 of a 2-D tensor");
    is_error(weft_sum(&r, m, (const int64_t[]){-3}, 1, false), WEFT_ERANGE, "-3", "sum over dim -3");
    is_error(weft_sum(&r, m, (const int64_t[]){1, -1}, 2, false), WEFT_EINVAL, "multiple times",
             "sum with a repeated dim");
    ok(r == NULL, "the result stays NULL after an error");

    /* out= */
    weft_tensor *out = NULL, *empty = NULL;
    weft_empty(&out, (const int64_t[]){3}, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    keep(out);
    is_int(weft_sum_out(out, m, (const int64_t[]){0}, 1, false), 0, "sum_out into float64");
    is_values(out, 0, "sum_out values", 5, 7, 9);
    is_int(weft_mean_out(out, m, (const int64_t[]){0}, 1, false), 0, "mean_out");
    is_values(out, 0, "mean_out values", 2.5, 3.5, 4.5);
    is_error(weft_sum_out(out, m, (const int64_t[]){1}, 1, false), WEFT_ESHAPE, "[2]",
             "sum_out with the wrong shape");
    is_error(weft_sum_out_ex(out, m, (const int64_t[]){0}, 1, false, WEFT_FLOAT32), WEFT_EDTYPE,
             "float32", "sum_out with a dtype other than out's");
    weft_empty(&empty, (const int64_t[]){0}, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(empty);
    is_int(weft_sum_out(empty, m, (const int64_t[]){1}, 1, true), 0, "sum_out into an empty out");
    is_shape(empty, "the empty out is resized", 2, 1);
    is_values(empty, 0, "resized sum_out values", 6, 15);
    /* out= is also the input, and has no elements: the kernel resizes out
     * before reading, so without the dispatcher's stand-in the input grew
     * under it (uninitialised elements: the fuzzer's sum_out finding) */
    weft_tensor *self_out = NULL;
    weft_empty(&self_out, (const int64_t[]){2, 0}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(self_out);
    is_int(weft_sum_out(self_out, self_out, (const int64_t[]){1}, 1, true), 0,
           "sum_out(x, x) with x empty and resized");
    is_shape(self_out, "x takes the result's shape", 2, 1);
    is_values(self_out, 0, "the sums of its empty rows are 0", 0, 0);
    weft_tensor *bool_out = NULL;
    weft_empty(&bool_out, (const int64_t[]){0}, 1, WEFT_BOOL, WEFT_DEVICE_CPU);
    keep(bool_out);
    is_int(weft_sum_out_ex(bool_out, bool_out, NULL, 0, false, WEFT_BOOL), 0,
           "sum_out(x, x) of an empty bool tensor");
    ok(weft_tensor_ndim(bool_out) == 0, "becomes 0-d");
    is_values(bool_out, 0, "holding false", 0);
    weft_tensor *vec_out = NULL, *wide = NULL;
    weft_empty(&vec_out, (const int64_t[]){0}, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    weft_empty(&wide, (const int64_t[]){3, 0}, 2, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    keep(vec_out);
    keep(wide);
    is_int(weft_mv_out(vec_out, wide, vec_out), 0, "mv_out(x, A, x) with x empty");
    is_shape(vec_out, "x takes mv's shape", 3);
    is_values(vec_out, 0, "A's empty rows give zeros", 0, 0, 0);

    /* empty inputs */
    weft_tensor *e = NULL;
    weft_empty(&e, (const int64_t[]){0, 3}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(e);
    is_int(weft_sum(&r, e, NULL, 0, false), 0, "sum of an empty tensor");
    is_values(keep(r), 0, "the empty sum is 0", 0);
    is_int(weft_sum(&r, e, (const int64_t[]){0}, 1, false), 0, "sum over an empty dim");
    is_values(keep(r), 0, "gives zeros", 0, 0, 0);
    is_int(weft_mean(&r, e, NULL, 0, false), 0, "mean of an empty tensor");
    ok(isnan(value_at(keep(r), 0)), "the empty mean is NaN");
    is_int(weft_sum(&r, e, (const int64_t[]){1}, 1, false), 0, "sum keeping an empty dim");
    is_shape(keep(r), "gives an empty result", 0);
    /* 0-d input */
    is_int(weft_sum(&r, SCALAR(WEFT_FLOAT32, 7), (const int64_t[]){0}, 1, false), 0, "sum of 0-d over dim 0");
    is_values(keep(r), 0, "sum of a 0-d tensor", 7);

    /* 16M float32 ones sum exactly, and in chunks across threads */
    weft_tensor *ones = NULL;
    int64_t n = 16777216;
    is_int(weft_ones(&ones, &n, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU), 0, "16M ones");
    keep(ones);
    is_int(weft_sum(&r, ones, NULL, 0, false), 0, "sum of 16M ones");
    is_values(keep(r), 0, "sum of 16M float32 ones is exactly 16777216", 16777216);
    is_int(weft_mean(&r, ones, NULL, 0, false), 0, "mean of 16M ones");
    is_values(keep(r), 0, "mean of 16M ones is exactly 1", 1);
    weft_tensor *ones2 = NULL;
    weft_view(&ones2, ones, (const int64_t[]){4096, 4096}, 2);
    keep(ones2);
    is_int(weft_sum(&r, ones2, (const int64_t[]){0}, 1, false), 0, "column sums of 4096x4096");
    keep(r);
    ok(value_at(r, 0) == 4096 && value_at(r, 4095) == 4096, "column sums are 4096");
    drop_all();
}

/* sum over `dims` of a random [d0, d1, d2] tensor against a naive loop. */
static bool sum_matches(weft_dtype dtype, const int64_t *sizes, const bool *reduce, bool mean)
{
    weft_tensor *x = random_tensor(dtype, sizes, 3, 100), *r = NULL;
    int64_t dims[3];
    int nd = 0;
    for (int d = 0; d < 3; d++)
        if (reduce[d])
            dims[nd++] = d;
    int rc = mean ? weft_mean(&r, x, dims, nd, true) : weft_sum(&r, x, dims, nd, true);
    if (rc != 0) {
        diag("     %s", weft_last_error());
        return false;
    }
    keep(r);
    int64_t n = numel_of(sizes, 3), count = 1;
    for (int d = 0; d < 3; d++)
        count *= reduce[d] ? sizes[d] : 1;
    double *want = calloc((size_t)weft_tensor_numel(r), sizeof(double));
    for (int64_t i = 0; i < n; i++) {
        int64_t idx[3] = {i / (sizes[1] * sizes[2]), (i / sizes[2]) % sizes[1], i % sizes[2]};
        int64_t o = 0;
        for (int d = 0; d < 3; d++)
            o = o * (reduce[d] ? 1 : sizes[d]) + (reduce[d] ? 0 : idx[d]);
        want[o] += value_at(x, i);
    }
    bool good = true;
    for (int64_t o = 0; o < weft_tensor_numel(r) && good; o++) {
        double w = mean ? want[o] / (double)count : want[o];
        double tol = dtype == WEFT_FLOAT16 ? 1e-3 : 1e-5; /* the result is rounded to dtype */
        good = fabs(value_at(r, o) - w) <= tol * (1 + fabs(w));
        if (!good)
            diag("     output %lld: got %.10g, expected %.10g", (long long)o, value_at(r, o), w);
    }
    free(want);
    return good;
}

static void test_reduction_layouts(void)
{
    const bool first[3] = {true, false, false}, outer2[3] = {true, true, false},
               middle[3] = {false, true, false}, last[3] = {false, false, true};
    ok(sum_matches(WEFT_FLOAT64, (const int64_t[]){37, 50, 20}, first, false),
       "sum over the outer dim (rows added into accumulators)");
    ok(sum_matches(WEFT_FLOAT32, (const int64_t[]){9, 11, 40}, outer2, false),
       "sum over the two outer dims");
    ok(sum_matches(WEFT_FLOAT32, (const int64_t[]){5, 30, 33}, middle, true),
       "mean over the middle dim");
    ok(sum_matches(WEFT_INT64, (const int64_t[]){4, 3, 1500}, first, false),
       "int64 sum over the outer dim with rows wider than one block");
    ok(sum_matches(WEFT_FLOAT64, (const int64_t[]){4, 3, 70001}, last, false),
       "sum over a last dim longer than one chunk");
    ok(sum_matches(WEFT_FLOAT16, (const int64_t[]){6, 2, 17}, first, false),
       "float16 sum over the outer dim");
    /* a transposed input: its contiguous dim is reduced, the kept one strided */
    weft_tensor *x = random_tensor(WEFT_FLOAT32, (const int64_t[]){64, 48}, 2, 10), *xt = NULL, *r = NULL;
    weft_t(&xt, x);
    keep(xt);
    is_int(weft_sum(&r, xt, (const int64_t[]){0}, 1, false), 0, "column sums of a transposed matrix");
    keep(r);
    bool good = r != NULL;
    for (int64_t j = 0; j < 64 && good; j++) {
        double w = 0;
        for (int64_t i = 0; i < 48; i++)
            w += value_at(x, j * 48 + i);
        good = fabs(value_at(r, j) - w) <= 1e-5 * (1 + fabs(w));
    }
    ok(good, "their values");
    drop_all();
}

/* --------------------------------------------------------------- matmul */

/* A naive product in double of a [.., n, k] and b [.., k, m] (same batch). */
static bool product_matches(const weft_tensor *r, const weft_tensor *a, const weft_tensor *b,
                            int64_t batch, int64_t n, int64_t k, int64_t m, double tol)
{
    if (!r || weft_tensor_numel(r) != batch * n * m) {
        diag("     wrong result size (%s)", weft_last_error());
        return false;
    }
    for (int64_t bi = 0; bi < batch; bi++)
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < m; j++) {
                double want = 0;
                for (int64_t q = 0; q < k; q++)
                    want += value_at(a, (bi * n + i) * k + q) * value_at(b, (bi * k + q) * m + j);
                double got = value_at(r, (bi * n + i) * m + j);
                if (fabs(got - want) > tol * (1 + fabs(want))) {
                    diag("     [%lld, %lld, %lld]: got %.10g, expected %.10g", (long long)bi,
                         (long long)i, (long long)j, got, want);
                    return false;
                }
            }
    return true;
}

static void test_matmul(void)
{
    weft_tensor *r = NULL;
    weft_tensor *a = MAT(WEFT_FLOAT32, 2, 3, 1, 2, 3, 4, 5, 6);
    weft_tensor *b = MAT(WEFT_FLOAT32, 3, 2, 7, 8, 9, 10, 11, 12);
    is_int(weft_mm(&r, a, b), 0, "mm");
    is_values(keep(r), 0, "mm values", 58, 64, 139, 154);

    weft_dtype dtypes[] = {WEFT_FLOAT32, WEFT_FLOAT64, WEFT_INT64, WEFT_FLOAT16, WEFT_COMPLEX64, WEFT_INT8};
    for (size_t di = 0; di < sizeof dtypes / sizeof *dtypes; di++) {
        weft_dtype dt = dtypes[di];
        const char *name = weft_dtype_name(dt);
        double tol = dt == WEFT_FLOAT64 ? 1e-12 : dt == WEFT_FLOAT16 ? 1e-2 : dt == WEFT_INT8 || dt == WEFT_INT64 ? 0 : 1e-5;
        double scale = dt == WEFT_INT8 ? 3 : 10;
        weft_tensor *x = random_tensor(dt, (const int64_t[]){7, 5}, 2, scale);
        weft_tensor *y = random_tensor(dt, (const int64_t[]){5, 9}, 2, scale);
        is_int(weft_mm(&r, x, y), 0, "mm %s", name);
        ok(product_matches(keep(r), x, y, 1, 7, 5, 9, tol), "mm %s matches a naive loop", name);
        /* transposed operands: BLAS's transpose flag, or strided reads */
        weft_tensor *xt = random_tensor(dt, (const int64_t[]){5, 7}, 2, scale), *xtt = NULL, *xc = NULL;
        weft_t(&xtt, xt);
        keep(xtt);
        weft_contiguous(&xc, xtt);
        keep(xc);
        is_int(weft_mm(&r, xtt, y), 0, "mm %s with a transposed self", name);
        ok(product_matches(keep(r), xc, y, 1, 7, 5, 9, tol), "transposed mm %s values", name);
        /* a sliced operand with a step: not expressible to BLAS */
        weft_tensor *wide = random_tensor(dt, (const int64_t[]){5, 18}, 2, scale), *ys = NULL, *yc = NULL;
        weft_slice(&ys, wide, 1, 0, 18, 2);
        keep(ys);
        weft_contiguous(&yc, ys);
        keep(yc);
        is_int(weft_mm(&r, x, ys), 0, "mm %s with a stepped slice", name);
        ok(product_matches(keep(r), x, yc, 1, 7, 5, 9, tol), "stepped-slice mm %s values", name);
        /* bmm */
        weft_tensor *ba = random_tensor(dt, (const int64_t[]){3, 4, 6}, 3, scale);
        weft_tensor *bb = random_tensor(dt, (const int64_t[]){3, 6, 2}, 3, scale);
        is_int(weft_bmm(&r, ba, bb), 0, "bmm %s", name);
        ok(product_matches(keep(r), ba, bb, 3, 4, 6, 2, tol), "bmm %s matches a naive loop", name);
    }

    /* a larger float32 product, through OpenBLAS */
    weft_tensor *x = random_tensor(WEFT_FLOAT32, (const int64_t[]){64, 48}, 2, 1);
    weft_tensor *y = random_tensor(WEFT_FLOAT32, (const int64_t[]){48, 33}, 2, 1);
    is_int(weft_mm(&r, x, y), 0, "mm 64x48 @ 48x33");
    ok(product_matches(keep(r), x, y, 1, 64, 48, 33, 1e-5), "mm 64x48 @ 48x33 values");

    /* out= forms */
    weft_tensor *out = NULL, *empty = NULL;
    weft_empty(&out, (const int64_t[]){2, 2}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(out);
    is_int(weft_mm_out(out, a, b), 0, "mm_out");
    is_values(out, 0, "mm_out values", 58, 64, 139, 154);
    weft_empty(&empty, (const int64_t[]){0}, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(empty);
    weft_tensor *a3 = NULL, *b3 = NULL;
    weft_unsqueeze(&a3, a, 0);
    keep(a3);
    weft_unsqueeze(&b3, b, 0);
    keep(b3);
    is_int(weft_bmm_out(empty, a3, b3), 0, "bmm_out into an empty out");
    is_shape(empty, "bmm_out resized out", 1, 2, 2);
    is_values(empty, 0, "bmm_out values", 58, 64, 139, 154);
    is_error(weft_mm_out(out, a, MAT(WEFT_FLOAT32, 3, 1, 1, 1, 1)), WEFT_ESHAPE, "[2, 2]",
             "mm_out with a wrong-shaped out");
    weft_tensor *d_out = NULL;
    weft_empty(&d_out, (const int64_t[]){2, 2}, 2, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    keep(d_out);
    is_error(weft_mm_out(d_out, a, b), WEFT_EDTYPE, "float64", "mm_out with a float64 out");
    /* out= aliasing an input */
    weft_tensor *sq = MAT(WEFT_FLOAT64, 2, 2, 1, 2, 3, 4);
    is_int(weft_mm_out(sq, sq, sq), 0, "mm_out(m, m, m)");
    is_values(sq, 0, "mm_out aliasing its inputs", 7, 10, 15, 22);

    /* errors */
    weft_tensor *m23 = random_tensor(WEFT_FLOAT32, (const int64_t[]){2, 3}, 2, 1);
    weft_tensor *m45 = random_tensor(WEFT_FLOAT32, (const int64_t[]){4, 5}, 2, 1);
    r = NULL;
    is_error(weft_mm(&r, m23, m45), WEFT_ESHAPE, "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)",
             "mm 2x3 @ 4x5");
    ok(r == NULL, "the result stays NULL");
    is_error(weft_mm(&r, a, MAT(WEFT_FLOAT64, 3, 1, 1, 2, 3)), WEFT_EDTYPE,
             "expected m1 and m2 to have the same dtype", "mm float32 @ float64");
    is_error(weft_mm(&r, VEC(WEFT_FLOAT32, 1, 2), a), WEFT_ESHAPE, "2-D", "mm of a 1-D tensor");
    is_error(weft_bmm(&r, a3, random_tensor(WEFT_FLOAT32, (const int64_t[]){2, 3, 2}, 3, 1)),
             WEFT_ESHAPE, "batches", "bmm with different batch sizes");
    is_error(weft_mm(&r, MAT(WEFT_BOOL, 1, 1, 1), MAT(WEFT_BOOL, 1, 1, 1)), WEFT_EDTYPE,
             "not supported for dtype bool", "mm of bool");

    /* zero-size dimensions */
    weft_tensor *k0a = NULL, *k0b = NULL;
    weft_empty(&k0a, (const int64_t[]){2, 0}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(k0a);
    weft_empty(&k0b, (const int64_t[]){0, 3}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(k0b);
    is_int(weft_mm(&r, k0a, k0b), 0, "mm [2,0] @ [0,3]");
    is_shape(keep(r), "gives [2, 3]", 2, 3);
    is_values(r, 0, "of zeros", 0, 0, 0, 0, 0, 0);
    is_int(weft_mm(&r, k0b, random_tensor(WEFT_FLOAT32, (const int64_t[]){3, 4}, 2, 1)), 0,
           "mm [0,3] @ [3,4]");
    is_shape(keep(r), "gives [0, 4]", 0, 4);

    /* matmul's rank cases (the core's composite over mm and bmm) */
    weft_tensor *v3 = VEC(WEFT_FLOAT32, 1, 2, 3), *w3 = VEC(WEFT_FLOAT32, 4, 5, 6);
    is_int(weft_matmul(&r, v3, w3), 0, "matmul 1-D . 1-D");
    ok(keep(r) && weft_tensor_ndim(r) == 0, "1-D . 1-D is 0-d");
    is_values(r, 0, "the dot product", 32);
    is_int(weft_matmul(&r, a, v3), 0, "matmul 2-D . 1-D");
    is_shape(keep(r), "[2,3] . [3] is [2]", 2);
    is_values(r, 0, "matrix-vector values", 14, 32);
    is_int(weft_matmul(&r, VEC(WEFT_FLOAT32, 1, 1), a), 0, "matmul 1-D . 2-D");
    is_shape(keep(r), "[2] . [2,3] is [3]", 3);
    is_values(r, 0, "vector-matrix values", 5, 7, 9);
    weft_tensor *p = random_tensor(WEFT_FLOAT64, (const int64_t[]){2, 1, 3, 4}, 4, 1);
    weft_tensor *q = random_tensor(WEFT_FLOAT64, (const int64_t[]){5, 4, 2}, 3, 1);
    is_int(weft_matmul(&r, p, q), 0, "matmul [2,1,3,4] @ [5,4,2]");
    is_shape(keep(r), "batch dims broadcast to [2,5,3,2]", 2, 5, 3, 2);
    bool good = r != NULL;
    for (int64_t i0 = 0; i0 < 2 && good; i0++)
        for (int64_t i1 = 0; i1 < 5 && good; i1++)
            for (int64_t i = 0; i < 3 && good; i++)
                for (int64_t j = 0; j < 2 && good; j++) {
                    double want = 0;
                    for (int64_t q4 = 0; q4 < 4; q4++)
                        want += value_at(p, (i0 * 3 + i) * 4 + q4) * value_at(q, (i1 * 4 + q4) * 2 + j);
                    good = fabs(value_at(r, ((i0 * 5 + i1) * 3 + i) * 2 + j) - want) < 1e-12;
                }
    ok(good, "batched broadcast matmul values");
    is_int(weft_matmul(&r, p, random_tensor(WEFT_FLOAT64, (const int64_t[]){4, 6}, 2, 1)), 0,
           "matmul [2,1,3,4] @ [4,6]");
    is_shape(keep(r), "gives [2,1,3,6]", 2, 1, 3, 6);
    drop_all();
}

/* -------------------------------------------------------------- factories */

static void test_random(void)
{
    weft_generator *g = NULL, *h = NULL;
    weft_generator_create(&g, 42);
    weft_generator_create(&h, 42);
    weft_tensor *r1 = NULL, *r2 = NULL, *r3 = NULL;
    int64_t n = 1000;
    is_int(weft_rand(&r1, &n, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU, g), 0, "rand");
    keep(r1);
    is_int(weft_rand(&r2, &n, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU, h), 0, "rand with the same seed");
    keep(r2);
    is_int(weft_rand(&r3, &n, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU, h), 0, "rand again");
    keep(r3);
    bool same = true, differ = false, in_range = true;
    for (int64_t i = 0; i < n; i++) {
        same = same && value_at(r1, i) == value_at(r2, i);
        differ = differ || value_at(r2, i) != value_at(r3, i);
        in_range = in_range && value_at(r1, i) >= 0 && value_at(r1, i) < 1;
    }
    ok(same, "the same seed gives the same numbers");
    ok(differ, "the generator advances");
    ok(in_range, "rand is in [0, 1)");

    /* uniform_ is Philox itself: element i is word i%4 of block offset+i/4 */
    weft_tensor *u = NULL;
    int64_t big = 1 << 20;
    weft_empty(&u, &big, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(u);
    uint64_t seed, offset;
    weft_generator_set_seed(g, 1234);
    weft_generator_reserve(g, 0, &seed, &offset); /* reads the offset */
    is_int(weft_uniform_ex_(u, -2, 3, g), 0, "uniform_ of 1M elements");
    const float *uf = weft_tensor_data_ptr(u);
    bool match = true;
    for (int64_t i = 0; i < big && match; i++) {
        uint32_t w[4];
        weft_philox(seed, offset + (uint64_t)i / 4, w);
        float want = (float)(-2.0 + 5.0 * ((double)(w[i % 4] >> 8) * 0x1p-24));
        if (uf[i] != want) {
            diag("     element %lld: got %.9g, expected %.9g", (long long)i, uf[i], want);
            match = false;
        }
    }
    ok(match, "uniform_ draws element i from Philox block i/4 word i%%4 (independent of threads)");

    /* normal: same seed, same numbers; moments over 100k */
    weft_tensor *z = NULL;
    int64_t nz = 100000;
    weft_generator_set_seed(g, 7);
    weft_generator_reserve(g, 0, &seed, &offset);
    is_int(weft_randn(&z, &nz, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU, g), 0, "randn 100k");
    keep(z);
    double sum = 0, sq = 0;
    const double *zd = weft_tensor_data_ptr(z);
    for (int64_t i = 0; i < nz; i++) {
        sum += zd[i];
        sq += zd[i] * zd[i];
    }
    double mean = sum / nz, sd = sqrt(sq / nz - mean * mean);
    ok(fabs(mean) < 0.02, "randn mean is about 0 (%g)", mean);
    ok(fabs(sd - 1) < 0.02, "randn std is about 1 (%g)", sd);
    uint32_t w[4];
    weft_philox(seed, offset, w);
    double u1 = ((double)w[0] + 1.0) * 0x1p-32, u2 = (double)w[1] * 0x1p-32;
    double z0 = sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
    double z1 = sqrt(-2 * log(u1)) * sin(6.283185307179586 * u2);
    is_double(zd[0], z0, 1e-12, "randn element 0 is Box-Muller's cosine of words 0 and 1");
    is_double(zd[1], z1, 1e-12, "randn element 1 is its sine");
    weft_tensor *nn = NULL;
    weft_empty(&nn, (const int64_t[]){4}, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(nn);
    is_int(weft_normal_ex_(nn, 10, 0, g), 0, "normal_ with std 0");
    is_values(nn, 0, "normal_ with std 0 is the mean", 10, 10, 10, 10);
    is_error(weft_normal_(nn, 0, -1), WEFT_EINVAL, "std", "normal_ with a negative std");
    is_error(weft_uniform_(nn, 1, 0), WEFT_EINVAL, "from", "uniform_ with from > to");
    weft_tensor *ints = NULL;
    weft_empty(&ints, (const int64_t[]){4}, 1, WEFT_INT32, WEFT_DEVICE_CPU);
    keep(ints);
    is_error(weft_uniform_(ints, 0, 1), WEFT_EDTYPE, "int32", "uniform_ of int32");

    /* other floating dtypes and strided targets */
    weft_tensor *hf = NULL, *cx = NULL, *strided = NULL, *col = NULL;
    is_int(weft_rand(&hf, (const int64_t[]){64}, 1, WEFT_FLOAT16, WEFT_DEVICE_CPU, g), 0, "rand float16");
    keep(hf);
    bool hin = true;
    for (int64_t i = 0; i < 64; i++)
        hin = hin && value_at(hf, i) >= 0 && value_at(hf, i) < 1;
    ok(hin, "float16 rand is in [0, 1)");
    is_int(weft_randn(&cx, (const int64_t[]){8}, 1, WEFT_COMPLEX64, WEFT_DEVICE_CPU, g), 0, "randn complex64");
    keep(cx);
    weft_zeros(&strided, (const int64_t[]){4, 2}, 2, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    keep(strided);
    weft_select(&col, strided, 1, 1);
    keep(col);
    is_int(weft_uniform_ex_(col, 5, 6, g), 0, "uniform_ of a strided column");
    bool cols_ok = true;
    for (int64_t i = 0; i < 4; i++)
        cols_ok = cols_ok && value_at(strided, 2 * i) == 0 && value_at(strided, 2 * i + 1) >= 5 &&
                  value_at(strided, 2 * i + 1) < 6;
    ok(cols_ok, "only the column is written, with values in [5, 6)");
    weft_generator_destroy(g);
    weft_generator_destroy(h);
    drop_all();
}

static void test_sequences(void)
{
    weft_tensor *r = NULL;
    is_int(weft_arange(&r, 0, 5, 1, WEFT_INT64, WEFT_DEVICE_CPU), 0, "arange int64");
    is_values(keep(r), 0, "arange(0, 5)", 0, 1, 2, 3, 4);
    is_int(weft_arange(&r, 1, 2, 0.25, WEFT_FLOAT32, WEFT_DEVICE_CPU), 0, "arange float32");
    is_values(keep(r), 0, "arange(1, 2, 0.25)", 1, 1.25, 1.5, 1.75);
    is_int(weft_arange(&r, 10, 0, -3, WEFT_INT32, WEFT_DEVICE_CPU), 0, "arange descending");
    is_values(keep(r), 0, "arange(10, 0, -3)", 10, 7, 4, 1);
    is_int(weft_arange(&r, 0, 0.3, 0.1, WEFT_FLOAT64, WEFT_DEVICE_CPU), 0, "arange(0, 0.3, 0.1)");
    is_values(keep(r), 0, "arange values are start + i*step", 0, 0.1, 0.2);
    weft_tensor *ai = NULL;
    weft_empty(&ai, (const int64_t[]){4}, 1, WEFT_INT64, WEFT_DEVICE_CPU);
    keep(ai);
    is_int(weft_arange_out(ai, 0.5, 1.5), 0, "arange_out int64 with fractional start and step");
    is_values(ai, 0, "integer arange uses int64 start and step (as PyTorch)", 0, 1, 2, 3);
    is_int(weft_linspace(&r, 0, 1, 5, WEFT_FLOAT32, WEFT_DEVICE_CPU), 0, "linspace");
    is_values(keep(r), 0, "linspace(0, 1, 5)", 0, 0.25, 0.5, 0.75, 1);
    is_int(weft_linspace(&r, -1, 1, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU), 0, "linspace with 1 step");
    is_values(keep(r), 0, "linspace(-1, 1, 1) is [start]", -1);
    is_int(weft_linspace(&r, 0, 10, 4, WEFT_INT64, WEFT_DEVICE_CPU), 0, "linspace int64");
    is_values(keep(r), 0, "linspace(0, 10, 4) truncates", 0, 3, 6, 10);
    is_int(weft_linspace(&r, 0, 1, 0, WEFT_FLOAT32, WEFT_DEVICE_CPU), 0, "linspace with 0 steps");
    ok(keep(r) && weft_tensor_numel(r) == 0, "is empty");
    is_int(weft_linspace(&r, 0, 0.7, 1001, WEFT_FLOAT64, WEFT_DEVICE_CPU), 0, "long linspace");
    keep(r);
    ok(value_at(r, 0) == 0 && value_at(r, 1000) == 0.7, "linspace hits both ends exactly");
    /* arange_out into a strided out */
    weft_tensor *base = NULL, *view = NULL;
    weft_zeros(&base, (const int64_t[]){6}, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(base);
    weft_slice(&view, base, 0, 0, 6, 2);
    keep(view);
    is_int(weft_arange_out(view, 1, 1), 0, "arange_out into a stepped view");
    is_values(base, 0, "arange_out strided values", 1, 0, 2, 0, 3, 0);
    is_error(weft_arange(&r, 0, 3, 1, WEFT_BOOL, WEFT_DEVICE_CPU), WEFT_EDTYPE, "bool", "arange bool");

    /* fill_ */
    weft_tensor *f = NULL, *ft = NULL;
    weft_empty(&f, (const int64_t[]){2, 3}, 2, WEFT_INT16, WEFT_DEVICE_CPU);
    keep(f);
    is_int(weft_fill_(f, -7), 0, "fill_ int16");
    is_values(f, 0, "fill_ values", -7, -7, -7, -7, -7, -7);
    weft_t(&ft, f);
    keep(ft);
    weft_tensor *row = NULL;
    weft_select(&row, ft, 0, 1); /* column 1 of f, strided */
    keep(row);
    is_int(weft_fill_(row, 3), 0, "fill_ a strided view");
    is_values(f, 0, "only the view is filled", -7, 3, -7, -7, 3, -7);
    is_error(weft_fill_(f, 40000), WEFT_EINVAL, "overflow", "fill_ int16 with 40000");
    is_values(f, 0, "a refused fill_ writes nothing", -7, 3, -7, -7, 3, -7);
    weft_tensor *hf = NULL;
    weft_empty(&hf, (const int64_t[]){2}, 1, WEFT_FLOAT16, WEFT_DEVICE_CPU);
    keep(hf);
    is_error(weft_fill_(hf, 70000), WEFT_EINVAL, "overflow", "fill_ float16 with 70000");
    is_int(weft_fill_(hf, INFINITY), 0, "fill_ float16 with inf");
    is_values(hf, 0, "is inf", INFINITY, INFINITY);
    weft_tensor *bf = NULL;
    weft_empty(&bf, (const int64_t[]){3}, 1, WEFT_BFLOAT16, WEFT_DEVICE_CPU);
    keep(bf);
    is_int(weft_fill_(bf, 1.00390625), 0, "fill_ bfloat16");
    is_values(bf, 0, "1 + 2^-8 rounds to 1 in bfloat16", 1, 1, 1);
    drop_all();
}

/* ------------------------------------------------------ errors and edges */

static void test_errors_and_edges(void)
{
    weft_tensor *a = VEC(WEFT_FLOAT32, 1, 2), *r = NULL;
    is_error(weft_add(NULL, a, a), WEFT_EINVAL, "add", "add with a NULL result pointer");
    is_error(weft_add(&r, NULL, a), WEFT_EINVAL, NULL, "add with a NULL self");
    ok(r == NULL, "no result after a NULL argument");
    is_error(weft_mm(&r, a, NULL), WEFT_EINVAL, NULL, "mm with a NULL mat2");
    is_error(weft_sum(NULL, a, NULL, 0, false), WEFT_EINVAL, NULL, "sum with a NULL result pointer");
    is_error(weft_fill_(NULL, 1), WEFT_EINVAL, NULL, "fill_ of NULL");

    /* 0-element tensors */
    weft_tensor *e = NULL, *e3 = NULL;
    weft_empty(&e, (const int64_t[]){0, 3}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(e);
    is_int(weft_add(&r, e, VEC(WEFT_FLOAT32, 1, 2, 3)), 0, "[0,3] + [3]");
    is_shape(keep(r), "gives [0, 3]", 0, 3);
    is_int(weft_exp(&r, e), 0, "exp of an empty tensor");
    is_shape(keep(r), "keeps the shape", 0, 3);
    is_int(weft_add_(e, e), 0, "add_ of an empty tensor");
    is_int(weft_fill_(e, 1), 0, "fill_ of an empty tensor");
    weft_empty(&e3, (const int64_t[]){3, 0}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(e3);
    is_error(weft_add(&r, e, e3), WEFT_ESHAPE, "[0, 3]", "[0,3] + [3,0]");
    is_int(weft_uniform_(e, 0, 1), 0, "uniform_ of an empty tensor");

    /* the plugin registered every operator it should */
    const char *ops[] = {"fill_", "uniform_", "normal_", "arange_out", "linspace_out", "add",
                         "add_", "add_out", "add_scalar", "add_scalar_", "sub", "sub_", "sub_out",
                         "sub_scalar", "sub_scalar_", "mul", "mul_", "mul_out", "mul_scalar",
                         "mul_scalar_", "div", "div_", "div_out", "div_scalar", "div_scalar_",
                         "neg", "neg_", "neg_out", "abs", "abs_", "abs_out", "exp", "exp_",
                         "exp_out", "log", "log_", "log_out", "sqrt", "sqrt_", "sqrt_out", "relu",
                         "relu_", "relu_out", "sigmoid", "sigmoid_", "sigmoid_out", "tanh",
                         "tanh_", "tanh_out", "sum", "sum_out", "mean", "mean_out", "mm", "mm_out",
                         "bmm", "bmm_out"};
    int found = 0;
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        const weft_op *op = NULL;
        char *table = NULL;
        if (weft_op_find(&op, ops[i]) == 0 && weft_op_dump_table(&table, op) == 0 && table &&
            strstr(table, "from cpu"))
            found++;
        else
            diag("     %s has no CPU kernel from the cpu plugin", ops[i]);
        free(table);
    }
    is_int(found, (int)(sizeof ops / sizeof *ops), "every operator has a kernel from the cpu plugin");
    drop_all();
}

/* Unloading joins the plugin's worker threads; a reload starts afresh. */
static void test_unload_and_reload(void)
{
    weft_tensor *big = NULL, *r = NULL;
    int64_t n = 1 << 20;
    weft_ones(&big, &n, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU); /* starts the pool */
    weft_add(&r, big, big);
    weft_tensor_release(big);
    weft_tensor_release(r);
    is_int(weft_unload_plugin("cpu"), 0, "the cpu plugin unloads");
    weft_tensor *x = NULL;
    weft_empty(&x, &n, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    is_int(weft_fill_(x, 1), WEFT_ENOKERNEL, "without it fill_ has no kernel");
    ok(weft_load_default_plugins() >= 1, "the cpu plugin loads again");
    is_int(weft_fill_(x, 2), 0, "fill_ works again");
    is_int(weft_add(&r, x, x), 0, "add works again (parallel)");
    keep(r);
    ok(r && value_at(r, 0) == 4 && value_at(r, n / 2) == 4 && value_at(r, n - 1) == 4, "with the right values");
    weft_tensor_release(x);
    drop_all();
    is_int(weft_unload_plugin("cpu"), 0, "and unloads again at the end");
}

int main(void)
{
    int loaded = weft_load_default_plugins();
    weft_tensor *probe = NULL, *x = NULL;
    weft_zeros(&x, (const int64_t[]){1}, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    if (!x || weft_add(&probe, x, x) != 0) {
        diag("%s", weft_last_error());
        weft_tensor_release(x);
        skip_all("the cpu plugin is not available (%d plugins loaded)", loaded);
    }
    weft_tensor_release(probe);
    weft_tensor_release(x);
    ok(loaded >= 1, "the default plugins load (%d)", loaded);

    test_binary_basics();
    test_broadcasting();
    test_promotion();
    test_strided();
    test_inplace_and_out();
    test_flat_fast_path();
    test_dtype_coverage();
    test_half_precision();
    test_complex();
    test_unary();
    test_reductions();
    test_reduction_layouts();
    test_matmul();
    test_random();
    test_sequences();
    test_errors_and_edges();
    test_unload_and_reload();
    return done_testing();
}
