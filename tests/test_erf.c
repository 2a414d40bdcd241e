/* tests/test_erf.c — erf, erfc, erfinv (functional, in-place, out=) against
 * libm and a float64 reference in every floating dtype, integer inputs
 * promoting to float32, edge values (0, -0, inf, NaN, outside erfinv's
 * domain), strided inputs, bad input; their derivatives and gelu's (exact
 * and tanh) through gradcheck and gradgradcheck; gelu_ in place on a
 * non-leaf tensor against a hand-written derivative. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <weft/weft.h>

#include "tests/tap.h"
#include "tests/keep.h"

#define INTS(...) ((const int64_t[]){__VA_ARGS__})

#define is_error(expr, code, needle, what)                                          \
    do {                                                                            \
        int rc_ = (expr);                                                           \
        if (!ok(rc_ == (code), "%s fails with %s", (what), weft_error_name(code)))  \
            diag("     got %s (%s)", weft_error_name(rc_), weft_last_error());      \
        like(weft_last_error(), (needle), "%s: the message says \"%s\"", (what), (needle)); \
    } while (0)

static weft_tensor *of_doubles(const double *v, int64_t n, weft_dtype dt)
{
    weft_tensor *d = NULL, *t = NULL;
    if (weft_empty(&d, &n, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU) != 0)
        return NULL;
    memcpy(weft_tensor_data_ptr(d), v, (size_t)n * sizeof(double));
    if (dt == WEFT_FLOAT64)
        return keep(d);
    weft_to_dtype(&t, d, dt);
    weft_tensor_release(d);
    return keep(t);
}

/* Elements in [lo, hi], n of them, evenly spaced but for a small irregular
 * part so that no two runs of eight are alike. */
static double *spread(int64_t n, double lo, double hi)
{
    double *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = lo + (hi - lo) * ((double)i + 0.37 * (double)((i * 5) % 3)) / (double)(n + 1);
    return v;
}

static double ref_erfinv(double y)
{
    /* bisection on libm's erf: slow, independent of the kernel's method */
    if (y <= -1 || y >= 1)
        return y == 1 ? INFINITY : y == -1 ? -INFINITY : NAN;
    double lo = -6, hi = 6;
    for (int i = 0; i < 200; i++) {
        double mid = 0.5 * (lo + hi);
        if (erf(mid) < y)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

typedef int (*unary_fn)(weft_tensor **, const weft_tensor *);
typedef int (*inplace_fn)(weft_tensor *);
typedef int (*out_fn)(weft_tensor *, const weft_tensor *);

static const struct {
    const char *name;
    unary_fn fn;
    inplace_fn inplace;
    out_fn out;
    double (*ref)(double);
    double lo, hi;
} ops[] = {
    {"erf", weft_erf, weft_erf_, weft_erf_out, erf, -6, 6},
    {"erfc", weft_erfc, weft_erfc_, weft_erfc_out, erfc, -6, 9.5},
    {"erfinv", weft_erfinv, weft_erfinv_, weft_erfinv_out, ref_erfinv, -0.999, 0.999},
};
#define NOPS ((int)(sizeof ops / sizeof *ops))

/* max relative error over n values, with `floor` as the smallest
 * denominator (erf near 0 is compared absolutely below it) */
static double worst_error(const weft_tensor *y, const double *x, int64_t n, double (*ref)(double),
                          double floor, int64_t *where)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double want = ref(x[i]), got = value_at(y, i);
        double err = got == want ? 0 : fabs(got - want) / fmax(fabs(want), floor);
        if (!(err <= worst)) { /* NaN counts as the worst */
            worst = isnan(err) ? INFINITY : err;
            *where = i;
        }
    }
    return worst;
}

static void test_values(void)
{
    const int64_t n = 1003; /* not a multiple of the vector width */
    const weft_dtype dts[] = {WEFT_FLOAT64, WEFT_FLOAT32, WEFT_BFLOAT16, WEFT_FLOAT16};
    const double tol[] = {1e-15, 1e-6, 8e-3, 1e-3};
    for (int o = 0; o < NOPS; o++) {
        double *v = spread(n, ops[o].lo, ops[o].hi);
        for (int d = 0; d < 4; d++) {
            weft_tensor *x = of_doubles(v, n, dts[d]), *y = NULL;
            /* the reference is taken at the input as stored in the dtype */
            const double *xs = values_of(x);
            int rc = ops[o].fn(&y, x);
            ok(rc == 0 && weft_tensor_dtype(y) == dts[d], "%s on %s keeps the dtype", ops[o].name,
               weft_dtype_name(dts[d]));
            keep(y);
            int64_t at = 0;
            /* erfc's far tail is subnormal in the narrow dtypes, with
             * fewer bits: compare absolutely below the smallest normal */
            double floor = dts[d] == WEFT_FLOAT16 ? 6.2e-5 : dts[d] == WEFT_FLOAT64 ? 1e-300 : 1.2e-38;
            double err = rc == 0 ? worst_error(y, xs, n, ops[o].ref, floor, &at) : INFINITY;
            if (ops[o].ref == ref_erfinv && dts[d] == WEFT_FLOAT64)
                err /= 1e3; /* the bisection's own error near +-1 */
            if (!ok(err <= tol[d], "%s on %s: within %g of the float64 reference (%g)", ops[o].name,
                    weft_dtype_name(dts[d]), tol[d], err))
                diag("at x = %.17g: got %.17g, want %.17g", xs[at], value_at(y, at),
                     ops[o].ref(xs[at]));
        }
        free(v);
    }
    /* float64 erf and erfc are libm's, bit for bit */
    double *v = spread(n, -7, 7);
    weft_tensor *x = of_doubles(v, n, WEFT_FLOAT64), *e = NULL, *c = NULL;
    weft_erf(&e, x);
    weft_erfc(&c, x);
    keep(e), keep(c);
    bool same = e && c;
    for (int64_t i = 0; same && i < n; i++)
        same = value_at(e, i) == erf(v[i]) && value_at(c, i) == erfc(v[i]);
    ok(same, "float64 erf and erfc equal libm's exactly");
    free(v);
    drop_all();
}

static void test_edges(void)
{
    const double in[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 30.0, -30.0};
    weft_tensor *x = of_doubles(in, 7, WEFT_FLOAT32), *e = NULL, *c = NULL;
    weft_erf(&e, x);
    weft_erfc(&c, x);
    keep(e), keep(c);
    ok(e && value_at(e, 0) == 0 && !signbit(value_at(e, 0)) && signbit(value_at(e, 1)) &&
           value_at(e, 2) == 1 && value_at(e, 3) == -1 && isnan(value_at(e, 4)) &&
           value_at(e, 5) == 1 && value_at(e, 6) == -1,
       "erf: +-0 keep their sign, +-inf give +-1, NaN stays NaN");
    ok(c && value_at(c, 0) == 1 && value_at(c, 2) == 0 && value_at(c, 3) == 2 &&
           isnan(value_at(c, 4)) && value_at(c, 5) == 0 && value_at(c, 6) == 2,
       "erfc: 1 at 0, 0 at +inf and far right, 2 at -inf, NaN stays NaN");
    const double dom[] = {1.0, -1.0, 1.5, -2.0, -0.0, NAN, 0.5};
    weft_tensor *y = of_doubles(dom, 7, WEFT_FLOAT64), *r = NULL;
    weft_erfinv(&r, y);
    keep(r);
    ok(r && value_at(r, 0) == INFINITY && value_at(r, 1) == -INFINITY && isnan(value_at(r, 2)) &&
           isnan(value_at(r, 3)) && value_at(r, 4) == 0 && signbit(value_at(r, 4)) &&
           isnan(value_at(r, 5)) && fabs(erf(value_at(r, 6)) - 0.5) < 1e-16,
       "erfinv: +-1 give +-inf, outside [-1, 1] and NaN give NaN, -0 stays -0");
    drop_all();
}

static void test_forms(void)
{
    /* integers promote to float32, as torch.erf does */
    weft_tensor *i = keep_int64(INTS(4), 1, INTS(-2, 0, 1, 3)), *y = NULL;
    int rc = weft_erf(&y, i);
    keep(y);
    ok(rc == 0 && weft_tensor_dtype(y) == WEFT_FLOAT32 && fabs(value_at(y, 0) - erf(-2.0)) < 1e-7 &&
           value_at(y, 1) == 0 && fabs(value_at(y, 3) - erf(3.0)) < 1e-7,
       "erf of int64 is float32");
    is_error(weft_erf_(i), WEFT_EDTYPE, "can't be cast", "erf_ on an int64 tensor");
    ok(value_at(i, 0) == -2 && value_at(i, 3) == 3, "  and leaves it unchanged");

    /* in place and out= give what the functional form gives */
    double *v = spread(100, -3, 3);
    for (int o = 0; o < NOPS; o++) {
        double lo = ops[o].lo, hi = ops[o].hi, w[100];
        for (int k = 0; k < 100; k++)
            w[k] = lo + (hi - lo) * (v[k] + 3) / 6;
        weft_tensor *x = of_doubles(w, 100, WEFT_FLOAT32), *f = NULL, *in = NULL, *out = NULL;
        ops[o].fn(&f, x);
        keep(f);
        weft_clone(&in, x);
        keep(in);
        rc = ops[o].inplace(in);
        weft_empty(&out, INTS(100), 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
        keep(out);
        int rc2 = ops[o].out(out, x);
        bool same = rc == 0 && rc2 == 0 && f;
        for (int k = 0; same && k < 100; k++)
            same = value_at(in, k) == value_at(f, k) && value_at(out, k) == value_at(f, k);
        ok(same, "%s_ and %s_out agree with %s", ops[o].name, ops[o].name, ops[o].name);
    }
    free(v);

    /* a transposed (strided) float32 input takes the strided loop */
    double *g = spread(64 * 48, -4, 4);
    weft_tensor *m = of_doubles(g, 64 * 48, WEFT_FLOAT32), *m2 = NULL, *t = NULL, *ct = NULL;
    weft_reshape(&m2, m, INTS(64, 48), 2);
    keep(m2);
    weft_transpose(&t, m2, 0, 1);
    keep(t);
    weft_erfc(&ct, t);
    keep(ct);
    double worst = 0;
    for (int64_t r = 0; ct && r < 48; r++)
        for (int64_t c = 0; c < 64; c++) {
            double x = value_at(t, r * 64 + c);
            worst = fmax(worst, fabs(value_at(ct, r * 64 + c) - erfc(x)) / erfc(x));
        }
    ok(ct && worst < 1e-6, "erfc of a transposed float32 matrix (worst relative error %g)", worst);
    free(g);

    /* bad input */
    weft_tensor *z = NULL;
    weft_zeros(&z, INTS(3), 1, WEFT_COMPLEX64, WEFT_DEVICE_CPU);
    keep(z);
    is_error(weft_erf(&y, z), WEFT_EDTYPE, "complex", "erf of complex64");
    ok(y == NULL, "  and no result is left");
    drop_all();
}

/* ---------------------------------------------------------- derivatives */

typedef enum { D_ERF, D_ERFC, D_ERFINV, D_GELU, D_GELU_TANH, D_GELU_INPLACE, D_COUNT } did;
static const char *const dnames[D_COUNT] = {"erf", "erfc", "erfinv", "gelu", "gelu tanh",
                                            "gelu_ (tanh) on a non-leaf"};

static int apply(weft_tensor **out, weft_tensor *const *in, int n, void *ctx)
{
    (void)n;
    switch ((did)(intptr_t)ctx) {
    case D_ERF: return weft_erf(out, in[0]);
    case D_ERFC: return weft_erfc(out, in[0]);
    case D_ERFINV: return weft_erfinv(out, in[0]);
    case D_GELU: return weft_gelu(out, in[0]);
    case D_GELU_TANH: return weft_gelu_ex(out, in[0], "tanh");
    case D_GELU_INPLACE: {
        int rc = weft_mul_scalar(out, in[0], 1.0);
        if (rc == 0 && (rc = weft_gelu_ex_(*out, "tanh")) < 0) {
            weft_tensor_release(*out);
            *out = NULL;
        }
        return rc;
    }
    default: return WEFT_EINVAL;
    }
}

static weft_tensor *leaf(double lo, double hi, int64_t n)
{
    double *v = spread(n, lo, hi);
    weft_tensor *t = of_doubles(v, n, WEFT_FLOAT64);
    free(v);
    weft_tensor_set_requires_grad(t, true);
    return t;
}

static void test_gradients(void)
{
    for (int id = 0; id < D_COUNT; id++) {
        weft_tensor *x = id == D_ERFINV ? leaf(-0.9, 0.9, 12) : leaf(-3.5, 3.5, 12);
        int rc = weft_gradcheck(apply, (void *)(intptr_t)id, &x, 1, 1e-6, 1e-6, 1e-4);
        if (!ok(rc == 0, "gradcheck: %s", dnames[id]))
            diag("%s", weft_last_error());
        rc = weft_gradgradcheck(apply, (void *)(intptr_t)id, &x, 1, 1e-6, 1e-5, 1e-3);
        if (!ok(rc == 0, "gradgradcheck: %s", dnames[id]))
            diag("%s", weft_last_error());
    }
    drop_all();
}

static double gelu_exact_prime(double x)
{
    return 0.5 * erfc(-x / sqrt(2.0)) + x * exp(-x * x / 2) / sqrt(2 * 3.14159265358979323846);
}

/* gelu_ on a non-leaf (exact): the gradient reaches the leaf through the
 * in-place node, matching the derivative written here; and gelu_ on a leaf
 * that requires grad is refused */
static void test_gelu_inplace(void)
{
    weft_tensor *x = leaf(-3, 3, 9), *y = NULL, *s = NULL, *g = NULL;
    int rc = weft_mul_scalar(&y, x, 2.0);
    keep(y);
    if (rc == 0)
        rc = weft_gelu_(y);
    if (rc == 0)
        rc = weft_sum(&s, y, NULL, 0, false);
    keep(s);
    if (rc == 0)
        rc = weft_backward(&s, 1, NULL, false, false);
    if (rc == 0)
        rc = weft_tensor_grad(&g, x);
    keep(g);
    ok(rc == 0 && g, "gelu_ on a non-leaf, then backward (%s)", rc ? weft_last_error() : "ok");
    double worst = 0;
    for (int64_t i = 0; g && i < 9; i++) {
        double xi = value_at(x, i);
        worst = fmax(worst, fabs(value_at(g, i) - 2 * gelu_exact_prime(2 * xi)));
    }
    ok(g && worst < 1e-14, "  x.grad = 2 gelu'(2x) (worst error %g)", worst);
    ok(y && strcmp(weft_tensor_grad_fn_name(y) ? weft_tensor_grad_fn_name(y) : "", "GeluBackward") == 0,
       "  and y's grad_fn is GeluBackward (%s)", y ? weft_tensor_grad_fn_name(y) : "none");
    is_error(weft_gelu_(x), WEFT_EINVAL, "leaf", "gelu_ on a leaf that requires grad");
    weft_tensor *bad = NULL;
    is_error(weft_gelu_ex(&bad, x, "fast"), WEFT_EINVAL, "approximate",
             "gelu with approximate='fast' on a tensor that requires grad");
    ok(bad == NULL, "  and no result is left");
    drop_all();
}

int main(void)
{
    if (!default_plugins_loaded()) {
        printf("1..%d\n", tap_count_);
        return 1;
    }
    test_values();
    test_edges();
    test_forms();
    test_gradients();
    test_gelu_inplace();
    printf("1..%d\n", tap_count_);
    return tap_failed_ ? 1 : 0;
}
