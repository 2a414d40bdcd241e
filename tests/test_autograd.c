/* tests/test_autograd.c — autograd: leaves and grads, every derivative of
 * the first slice checked against finite differences (gradcheck) and the
 * elementwise and matrix families twice (gradgradcheck), broadcasting and
 * views, version errors, no-grad, retain_graph, hooks, retain_grad, grad(),
 * detach, and the errors for out= and for operators without a formula. */
#include <stdlib.h>

#include <weft/weft.h>

#include "tests/tap.h"

static double get(const weft_tensor *t, int64_t i)
{
    double v = NAN;
    weft_tensor *flat = NULL;
    int64_t n = weft_tensor_numel(t);
    if (weft_reshape(&flat, t, &n, 1) == 0)
        weft_tensor_get(flat, &i, &v);
    weft_tensor_release(flat);
    return v;
}

static weft_tensor *leaf(const int64_t *sizes, int ndim, double start, double step)
{
    weft_tensor *t = NULL;
    weft_empty(&t, sizes, ndim, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    double *p = weft_tensor_data_ptr(t);
    for (int64_t i = 0; i < weft_tensor_numel(t); i++)
        p[i] = start + step * (double)i + 0.1 * (double)((i * 7) % 3);
    weft_tensor_set_requires_grad(t, true);
    return t;
}

static weft_tensor *grad_of(weft_tensor *t)
{
    weft_tensor *g = NULL;
    weft_tensor_grad(&g, t);
    return g;
}

/* ---------------------------------------------------------------- functions */

typedef enum { F_ADD, F_SUB_ALPHA, F_MUL, F_DIV, F_NEG, F_EXP, F_LOG, F_SQRT, F_SIGMOID, F_TANH,
               F_SUM_DIM, F_MEAN, F_MM, F_BMM, F_MATMUL_BATCHED, F_MATMUL_VEC, F_ADD_SCALAR,
               F_MUL_SCALAR, F_DIV_SCALAR, F_VIEWS, F_SLICE, F_EXPAND, F_TO_DTYPE, F_INPLACE,
               F_RELU, F_ABS, F_SIN, F_COS, F_TAN, F_SINH, F_COSH, F_EXPM1, F_EXP2, F_LOG1P,
               F_LOG2, F_LOG10, F_RECIPROCAL, F_RSQRT, F_ATAN, F_ASIN, F_ACOS, F_SILU, F_POW,
               F_FLOOR, F_COUNT } fn_id;
static const char *const fn_names[F_COUNT] = {
    "add (broadcast)", "sub with alpha", "mul (broadcast)", "div", "neg", "exp", "log", "sqrt",
    "sigmoid", "tanh", "sum over dim 1", "mean", "mm", "bmm", "matmul batched x matrix",
    "matmul vector x matrix", "add_scalar", "mul_scalar", "div_scalar",
    "transpose, reshape, unsqueeze, squeeze", "slice with step and select", "expand",
    "to_dtype float32 and back", "in-place mul_ and add_ on a non-leaf",
    "relu", "abs", "sin", "cos", "tan", "sinh", "cosh", "expm1", "exp2", "log1p", "log2", "log10",
    "reciprocal", "rsqrt", "atan", "asin", "acos", "silu", "pow_scalar 2.5", "floor (zero gradient)"};

static int apply(weft_tensor **out, weft_tensor *const *in, int n, void *ctx)
{
    fn_id id = (fn_id)(intptr_t)ctx;
    /* gradcheck passes exactly the inputs it was given: one for the unary
     * functions (asin and acos are checked with a one-element array) */
    weft_tensor *a = in[0], *b = n > 1 ? in[1] : NULL, *t = NULL, *u = NULL;
    int rc = 0;
    int64_t dim1 = 1;
    switch (id) {
    case F_ADD: return weft_add(out, a, b);
    case F_SUB_ALPHA: return weft_sub_ex(out, a, b, 2.5);
    case F_MUL: return weft_mul(out, a, b);
    case F_DIV: return weft_div(out, a, b);
    case F_NEG: return weft_neg(out, a);
    case F_EXP: return weft_exp(out, a);
    case F_LOG: return weft_log(out, a);
    case F_SQRT: return weft_sqrt(out, a);
    case F_SIGMOID: return weft_sigmoid(out, a);
    case F_TANH: return weft_tanh(out, a);
    case F_SUM_DIM: return weft_sum(out, a, &dim1, 1, false);
    case F_MEAN: return weft_mean(out, a, NULL, 0, false);
    case F_MM: return weft_mm(out, a, b);
    case F_BMM: return weft_bmm(out, a, b);
    case F_MATMUL_BATCHED:
    case F_MATMUL_VEC: return weft_matmul(out, a, b);
    case F_ADD_SCALAR: return weft_add_scalar(out, a, 3.0);
    case F_MUL_SCALAR: return weft_mul_scalar(out, a, -1.5);
    case F_DIV_SCALAR: return weft_div_scalar(out, a, 4.0);
    case F_VIEWS: {
        int64_t shape[3] = {3, 1, 2};
        weft_tensor *v = NULL;
        rc = weft_t(&t, a);                       /* [3,2] */
        if (rc == 0) rc = weft_reshape(&u, t, shape, 3); /* [3,1,2] */
        if (rc == 0) rc = weft_squeeze(&v, u, 1);  /* [3,2] */
        weft_tensor_release(t);
        weft_tensor_release(u);
        if (rc == 0) rc = weft_mul(out, v, v);
        weft_tensor_release(v);
        return rc;
    }
    case F_SLICE: {
        weft_tensor *v = NULL;
        rc = weft_slice(&t, a, 1, 0, 3, 2); /* columns 0 and 2 */
        if (rc == 0) rc = weft_select(&u, t, 0, 1);
        if (rc == 0) rc = weft_mul(&v, u, u);
        if (rc == 0) rc = weft_add(out, v, t); /* broadcast [2] + [2,2] */
        weft_tensor_release(t);
        weft_tensor_release(u);
        weft_tensor_release(v);
        return rc;
    }
    case F_EXPAND: {
        int64_t shape[2] = {4, 3};
        rc = weft_expand(&t, a, shape, 2); /* a is [1,3] */
        if (rc == 0) rc = weft_mul(out, t, b);
        weft_tensor_release(t);
        return rc;
    }
    case F_TO_DTYPE:
        rc = weft_to_dtype(&t, a, WEFT_FLOAT32);
        if (rc == 0) rc = weft_mul(&u, t, t);
        if (rc == 0) rc = weft_to_dtype(out, u, WEFT_FLOAT64);
        weft_tensor_release(t);
        weft_tensor_release(u);
        return rc;
    case F_INPLACE:
        rc = weft_mul_scalar(&t, a, 1.0); /* a non-leaf copy of a */
        if (rc == 0) rc = weft_mul_(t, b);
        if (rc == 0) rc = weft_add_(t, a);
        *out = t;
        return rc;
    case F_RELU: return weft_relu(out, a);
    case F_ABS: return weft_abs(out, a);
    case F_SIN: return weft_sin(out, a);
    case F_COS: return weft_cos(out, a);
    case F_TAN: return weft_tan(out, a);
    case F_SINH: return weft_sinh(out, a);
    case F_COSH: return weft_cosh(out, a);
    case F_EXPM1: return weft_expm1(out, a);
    case F_EXP2: return weft_exp2(out, a);
    case F_LOG1P: return weft_log1p(out, a);
    case F_LOG2: return weft_log2(out, a);
    case F_LOG10: return weft_log10(out, a);
    case F_RECIPROCAL: return weft_reciprocal(out, a);
    case F_RSQRT: return weft_rsqrt(out, a);
    case F_ATAN: return weft_atan(out, a);
    case F_ASIN: return weft_asin(out, a);
    case F_ACOS: return weft_acos(out, a);
    case F_SILU: return weft_silu(out, a);
    case F_POW: return weft_pow_scalar(out, a, 2.5);
    case F_FLOOR: return weft_floor(out, a);
    case F_COUNT: break;
    }
    return -1;
}

static void check_fn(fn_id id, const int64_t *sa, int na, const int64_t *sb, int nb, double start, bool twice)
{
    weft_tensor *a = leaf(sa, na, start, 0.37), *b = nb >= 0 ? leaf(sb, nb, 0.8, 0.21) : NULL;
    weft_tensor *in[2] = {a, b ? b : a};
    /* a float32 round trip needs a step float32 can resolve */
    double eps = id == F_TO_DTYPE ? 1e-2 : 1e-6, tol = id == F_TO_DTYPE ? 1e-3 : 1e-4;
    int rc = weft_gradcheck(apply, (void *)(intptr_t)id, in, b ? 2 : 1, eps, 1e-6, tol);
    if (!ok(rc == 0, "gradcheck: %s", fn_names[id]))
        diag("%s", weft_last_error());
    if (twice) {
        rc = weft_gradgradcheck(apply, (void *)(intptr_t)id, in, b ? 2 : 1, 1e-6, 1e-5, 1e-3);
        if (!ok(rc == 0, "gradgradcheck: %s", fn_names[id]))
            diag("%s", weft_last_error());
    }
    weft_tensor_release(a);
    weft_tensor_release(b);
}

static void test_gradchecks(void)
{
    int64_t s23[2] = {2, 3}, s3[1] = {3}, s31[2] = {3, 1}, s34[2] = {3, 4}, s232[3] = {2, 3, 2},
            s224[3] = {2, 2, 4}, s4[1] = {4}, s13[2] = {1, 3}, s43[2] = {4, 3};
    check_fn(F_ADD, s23, 2, s3, 1, 0.5, true);
    check_fn(F_SUB_ALPHA, s31, 2, s34, 2, 0.5, true);
    check_fn(F_MUL, s23, 2, s3, 1, 0.5, true);
    check_fn(F_DIV, s23, 2, s23, 2, 0.5, true);
    check_fn(F_NEG, s23, 2, NULL, -1, -0.5, true);
    check_fn(F_EXP, s23, 2, NULL, -1, -0.5, true);
    check_fn(F_LOG, s23, 2, NULL, -1, 0.5, true);
    check_fn(F_SQRT, s23, 2, NULL, -1, 0.5, true);
    check_fn(F_SIGMOID, s23, 2, NULL, -1, -1.0, true);
    check_fn(F_TANH, s23, 2, NULL, -1, -1.0, true);
    check_fn(F_SUM_DIM, s232, 3, NULL, -1, 0.5, false);
    check_fn(F_MEAN, s23, 2, NULL, -1, 0.5, false);
    check_fn(F_MM, s23, 2, s34 + 0, 2, 0.5, false); /* [2,3] x [3,4] */
    check_fn(F_BMM, s232, 3, s224, 3, 0.5, false);  /* [2,3,2] x [2,2,4] */
    int64_t s2[2] = {2, 4};
    check_fn(F_MATMUL_BATCHED, s232, 3, s2, 2, 0.5, true); /* [2,3,2] x [2,4] */
    check_fn(F_MATMUL_VEC, s3, 1, s34, 2, 0.5, true);     /* [3] x [3,4] */
    check_fn(F_ADD_SCALAR, s23, 2, NULL, -1, 0.5, false);
    check_fn(F_MUL_SCALAR, s23, 2, NULL, -1, 0.5, false);
    check_fn(F_DIV_SCALAR, s23, 2, NULL, -1, 0.5, false);
    check_fn(F_VIEWS, s23, 2, NULL, -1, 0.5, true);
    check_fn(F_SLICE, s23, 2, NULL, -1, 0.5, false);
    check_fn(F_EXPAND, s13, 2, s43, 2, 0.5, true);
    check_fn(F_TO_DTYPE, s4, 1, NULL, -1, 0.5, false);
    check_fn(F_INPLACE, s23, 2, s23, 2, 0.5, true);
    /* values chosen away from kinks and outside the domains' edges */
    check_fn(F_RELU, s23, 2, NULL, -1, -0.93, true);
    check_fn(F_ABS, s23, 2, NULL, -1, -0.93, true);
    fn_id smooth[] = {F_SIN, F_COS, F_TAN, F_SINH, F_COSH, F_EXPM1, F_EXP2, F_ATAN, F_SILU};
    for (size_t i = 0; i < sizeof smooth / sizeof *smooth; i++)
        check_fn(smooth[i], s23, 2, NULL, -1, -0.6, true);
    fn_id positive[] = {F_LOG1P, F_LOG2, F_LOG10, F_RECIPROCAL, F_RSQRT, F_POW};
    for (size_t i = 0; i < sizeof positive / sizeof *positive; i++)
        check_fn(positive[i], s23, 2, NULL, -1, 0.4, true);
    weft_tensor *u = NULL;
    weft_empty(&u, s4, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    double *p = weft_tensor_data_ptr(u);
    p[0] = -0.7, p[1] = -0.2, p[2] = 0.3, p[3] = 0.65; /* inside (-1, 1) */
    weft_tensor_set_requires_grad(u, true);
    fn_id arcs[] = {F_ASIN, F_ACOS};
    for (int i = 0; i < 2; i++) {
        weft_tensor *in[1] = {u};
        int rc = weft_gradcheck(apply, (void *)(intptr_t)arcs[i], in, 1, 1e-6, 1e-6, 1e-4);
        if (!ok(rc == 0, "gradcheck: %s", fn_names[arcs[i]]))
            diag("%s", weft_last_error());
        rc = weft_gradgradcheck(apply, (void *)(intptr_t)arcs[i], in, 1, 1e-6, 1e-5, 1e-3);
        if (!ok(rc == 0, "gradgradcheck: %s", fn_names[arcs[i]]))
            diag("%s", weft_last_error());
    }
    weft_tensor_release(u);
    check_fn(F_FLOOR, s23, 2, NULL, -1, 0.13, false);
}

/* ---------------------------------------------------------------- behaviour */

static int hook_calls;
static int double_it(const weft_tensor *grad, weft_tensor **replace, void *ctx)
{
    (void)ctx;
    hook_calls++;
    return weft_mul_scalar(replace, grad, 2.0);
}

static void test_basics(void)
{
    int64_t s2[1] = {2};
    weft_tensor *x = NULL, *c = NULL, *y = NULL, *z = NULL, *g = NULL;
    weft_full(&x, s2, 1, 3.0, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    weft_full(&c, s2, 1, 2.0, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    ok(!weft_tensor_requires_grad(x) && weft_tensor_is_leaf(x), "a new tensor is a leaf without grad");
    weft_mul(&y, x, c);
    ok(!weft_tensor_requires_grad(y) && weft_tensor_grad_fn_name(y) == NULL, "no graph for tensors without grad");
    weft_tensor_release(y);
    is_int(weft_tensor_set_requires_grad(x, true), 0, "set requires_grad");
    weft_mul(&y, x, c);
    ok(weft_tensor_requires_grad(y) && !weft_tensor_is_leaf(y), "the result requires grad");
    is_str(weft_tensor_grad_fn_name(y), "MulBackward", "grad_fn name");
    is_int(weft_tensor_set_requires_grad(y, false), WEFT_EINVAL, "requires_grad of a non-leaf cannot be cleared");
    weft_sum(&z, y, NULL, 0, false);
    is_int(weft_backward(&z, 1, NULL, false, false), 0, "backward of a scalar");
    g = grad_of(x);
    ok(g && get(g, 0) == 2.0 && get(g, 1) == 2.0, "d(sum(x*c))/dx = c");
    ok(grad_of(c) == NULL, "no grad for a tensor that does not require it");
    weft_tensor_release(g);
    is_int(weft_backward(&z, 1, NULL, false, false), WEFT_EINVAL, "a second backward through a freed graph");
    like(weft_last_error(), "second time", "says so");
    weft_tensor_release(z);
    weft_tensor_release(y);

    /* accumulation and retain_graph */
    weft_mul(&y, x, c);
    weft_sum(&z, y, NULL, 0, false);
    is_int(weft_backward(&z, 1, NULL, true, false), 0, "backward with retain_graph");
    is_int(weft_backward(&z, 1, NULL, false, false), 0, "and again");
    g = grad_of(x);
    ok(g && get(g, 0) == 6.0, "gradients accumulate in a leaf (2 + 2 + 2)");
    weft_tensor_release(g);
    weft_tensor_release(z);
    weft_tensor_release(y);
    weft_tensor_set_grad(x, NULL);

    /* a non-scalar output needs grad_outputs */
    weft_mul(&y, x, c);
    is_int(weft_backward(&y, 1, NULL, false, false), WEFT_EINVAL, "implicit grad only for scalars");
    like(weft_last_error(), "only for scalar outputs", "message");
    weft_tensor *go = NULL;
    weft_full(&go, s2, 1, 0.5, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    is_int(weft_backward(&y, 1, &go, false, false), 0, "backward with grad_outputs");
    g = grad_of(x);
    ok(g && get(g, 1) == 1.0, "grad_output times c");
    weft_tensor_release(g);
    weft_tensor_release(go);
    weft_tensor_release(y);
    is_int(weft_backward(&c, 1, NULL, false, false), WEFT_EINVAL, "backward of a tensor without grad");
    like(weft_last_error(), "does not require grad", "message");

    /* no-grad mode */
    weft_tensor_set_grad(x, NULL);
    bool prev = weft_set_grad_enabled(false);
    ok(prev, "grad mode was on");
    weft_mul(&y, x, c);
    ok(!weft_tensor_requires_grad(y), "no graph in no-grad mode");
    is_int(weft_mul_(x, c), 0, "in-place on a leaf is allowed with grad mode off");
    weft_set_grad_enabled(true);
    weft_tensor_release(y);
    is_int(weft_mul_(x, c), WEFT_EINVAL, "in-place on a leaf that requires grad");
    like(weft_last_error(), "leaf tensor that requires grad", "message");

    /* out= refuses autograd */
    weft_tensor *o = NULL;
    weft_empty(&o, s2, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    is_int(weft_mul_out(o, x, c), WEFT_EINVAL, "out= with an input that requires grad");
    like(weft_last_error(), "out=", "message");
    weft_tensor_release(o);

    /* an operator without a derivative formula (a gradient operator,
     * differentiated through composites elsewhere) */
    weft_tensor *r = NULL;
    int rc = weft_nll_loss_backward(&r, x, c, c, NULL, "mean", -100);
    is_int(rc, WEFT_ENOTSUP, "nll_loss_backward has no derivative formula: a clear error, not a zero gradient");
    like(weft_last_error(), "nll_loss_backward: the operator has no derivative formula, and argument 'grad_output'",
         "message names the operator and the argument");
    weft_tensor_release(r);

    /* detach */
    weft_tensor *d = NULL;
    is_int(weft_detach(&d, x), 0, "detach");
    ok(!weft_tensor_requires_grad(d) && weft_tensor_shares_storage(d, x), "a detached tensor shares storage, no grad");
    weft_tensor_release(d);

    /* hooks and retain_grad */
    weft_tensor_set_grad(x, NULL);
    weft_mul(&y, x, c);
    is_int(weft_tensor_retain_grad(y), 0, "retain_grad on a non-leaf");
    is_int(weft_tensor_register_hook(y, double_it, NULL), 0, "hook on a non-leaf");
    weft_sum(&z, y, NULL, 0, false);
    weft_backward(&z, 1, NULL, false, false);
    is_int(hook_calls, 1, "the hook ran once");
    g = grad_of(x);
    ok(g && get(g, 0) == 4.0, "the hook's replacement flowed on (2 * c)");
    weft_tensor_release(g);
    g = grad_of(y);
    ok(g && get(g, 0) == 1.0, "retain_grad kept the non-leaf's gradient");
    weft_tensor_release(g);
    weft_tensor_release(z);
    weft_tensor_release(y);

    /* autograd_grad does not accumulate */
    weft_tensor_set_grad(x, NULL);
    weft_mul(&y, x, x);
    weft_sum(&z, y, NULL, 0, false);
    weft_tensor *gx = NULL;
    is_int(weft_autograd_grad(&gx, &z, 1, NULL, &x, 1, false, false, false), 0, "autograd_grad");
    ok(gx && get(gx, 0) == 12.0, "d(sum(x*x))/dx = 2x (x is 6 after the no-grad mul_)");
    ok(grad_of(x) == NULL, "the leaf's grad is untouched");
    weft_tensor_release(gx);
    weft_tensor_release(z);
    weft_tensor_release(y);

    /* double backward: d/dx (x^3) = 3x^2, d2/dx2 = 6x */
    weft_tensor *x2 = NULL, *x3 = NULL, *dx = NULL, *s = NULL, *ddx = NULL;
    weft_mul(&x2, x, x);
    weft_mul(&x3, x2, x);
    weft_sum(&s, x3, NULL, 0, false);
    is_int(weft_autograd_grad(&dx, &s, 1, NULL, &x, 1, false, true, false), 0, "grad with create_graph");
    ok(dx && get(dx, 0) == 108.0, "3x^2 = 108");
    ok(weft_tensor_requires_grad(dx), "the gradient has a graph");
    weft_tensor *sdx = NULL;
    weft_sum(&sdx, dx, NULL, 0, false);
    is_int(weft_autograd_grad(&ddx, &sdx, 1, NULL, &x, 1, false, false, false), 0, "second derivative");
    ok(ddx && get(ddx, 0) == 36.0, "6x = 36");
    weft_tensor *list[] = {x2, x3, s, dx, sdx, ddx};
    for (int i = 0; i < 6; i++)
        weft_tensor_release(list[i]);
    weft_tensor_release(x);
    weft_tensor_release(c);
}

static void test_versions(void)
{
    int64_t s2[1] = {2};
    weft_tensor *x = NULL, *y = NULL, *z = NULL, *s = NULL, *one = NULL;
    weft_full(&x, s2, 1, 1.5, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    weft_tensor_set_requires_grad(x, true);
    weft_mul_scalar(&y, x, 2.0);
    weft_mul(&z, y, y); /* saves y at its current version */
    weft_full(&one, s2, 1, 1.0, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    uint32_t before = weft_tensor_version(y);
    is_int(weft_add_(y, one), 0, "in-place on a non-leaf is recorded");
    is_int(weft_tensor_version(y), before + 1, "and bumps the version");
    weft_sum(&s, z, NULL, 0, false);
    is_int(weft_backward(&s, 1, NULL, false, false), WEFT_EINVAL, "backward through a modified saved tensor");
    like(weft_last_error(), "modified by an in-place operation", "the famous message");
    like(weft_last_error(), "MulBackward", "names the operator that saved it");
    like(weft_last_error(), "is at version", "and the versions");
    weft_tensor *list[] = {x, y, z, s, one};
    for (int i = 0; i < 5; i++)
        weft_tensor_release(list[i]);

    /* an in-place operator given self again as an input (y.addcdiv_(y, d))
     * saves that input; once y's history is the node, keeping y itself
     * there was a reference cycle nothing freed (the fuzzer's leak, which
     * tests/memcheck.sh would report here).  Backward still reports the
     * write to the saved input, as torch does. */
    weft_tensor *y2 = NULL, *d = NULL, *s2sum = NULL;
    weft_full(&x, s2, 1, 1.5, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    weft_tensor_set_requires_grad(x, true);
    weft_mul_scalar(&y2, x, 2.0);
    weft_full(&d, s2, 1, 4.0, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    is_int(weft_addcdiv_(y2, y2, d), 0, "y.addcdiv_(y, d) on a non-leaf is recorded");
    weft_sum(&s2sum, y2, NULL, 0, false);
    is_int(weft_backward(&s2sum, 1, NULL, false, false), WEFT_EINVAL,
           "backward: the saved input y was written by the same call");
    like(weft_last_error(), "modified by an in-place operation", "saying so");
    weft_tensor *list2[] = {x, y2, d, s2sum};
    for (int i = 0; i < 4; i++)
        weft_tensor_release(list2[i]);

    /* in-place on a view of a leaf that requires grad is refused (views of
     * non-leaves: tests/test_autograd_views.c) */
    weft_tensor *a = NULL, *b = NULL, *v = NULL;
    weft_full(&a, s2, 1, 1.0, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    weft_tensor_set_requires_grad(a, true);
    weft_mul_scalar(&b, a, 3.0);
    weft_slice(&v, a, 0, 0, 1, 1);
    is_int(weft_mul_scalar_(v, 2.0), WEFT_EINVAL, "in-place on a view of a leaf that requires grad");
    like(weft_last_error(), "view of a leaf", "message");
    weft_tensor_release(v);
    weft_tensor_release(b);
    weft_tensor_release(a);
}

static void test_deep_chain(void)
{
    /* a long chain must neither overflow the stack nor leak */
    weft_tensor *x = NULL, *y = NULL;
    weft_ones(&x, NULL, 0, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    weft_tensor_set_requires_grad(x, true);
    y = weft_tensor_retain(x);
    for (int i = 0; i < 20000; i++) {
        weft_tensor *n = NULL;
        weft_mul_scalar(&n, y, 1.0);
        weft_tensor_release(y);
        y = n;
    }
    is_int(weft_backward(&y, 1, NULL, false, false), 0, "backward through 20000 nodes");
    weft_tensor *g = grad_of(x);
    ok(g && get(g, 0) == 1.0, "gradient 1");
    weft_tensor_release(g);
    weft_tensor_release(y);
    weft_tensor_release(x);
    ok(1, "released a 20000-node graph");
}

int main(void)
{
    weft_load_default_plugins();
    test_gradchecks();
    test_basics();
    test_versions();
    test_deep_chain();
    return done_testing();
}
