/* autograd/formulas.c — the autograd layer's kernels: one generic kernel
 * that runs the operator below the Autograd key and records a node, and the
 * derivative formulas, written with weft operators so they run on any
 * device and can themselves be differentiated (create_graph).  Operators
 * without a formula get the Autograd fallback, which refuses to run on
 * inputs that require grad rather than return a silent zero gradient. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/formula_helpers.h"

/* ------------------------------------------------------------ helpers */

int wa__sum_to(weft_tensor **out, weft_tensor *grad, const int64_t *sizes, int ndim)
{
    int lead = grad->ndim - ndim;
    int64_t dims[WEFT_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < grad->ndim; d++)
        if (d < lead || (sizes[d - lead] == 1 && grad->sizes[d] != 1))
            dims[nd++] = d;
    if (nd == 0) {
        *out = weft_tensor_retain(grad);
        return 0;
    }
    weft_tensor *summed;
    TRY(weft_sum(&summed, grad, dims, nd, true));
    int rc = weft_reshape(out, summed, sizes, ndim);
    weft_tensor_release(summed);
    return rc;
}

/* ------------------------------------------------------------ records */

static double scalar_of(const weft_value *v)
{
    return v->tag == WEFT_VALUE_INT ? (double)v->u.i : v->tag == WEFT_VALUE_BOOL ? v->u.b : v->u.d;
}

/* The shapes and dtypes of self (and other), and the scalar the formula
 * needs: alpha for add/sub, the operand of the *_scalar forms. */
static int record_shapes_binary(wf_node *n, const weft_call *call, weft_tensor *result,
                                weft_tensor *old_self)
{
    (void)result;
    (void)old_self;
    const weft_value *a = call->args;
    const weft_tensor *ts[2] = {a[0].u.tensor, NULL};
    int nts = 1;
    n->scalar = 1.0;
    if (call->nargs > 1 && a[1].tag == WEFT_VALUE_TENSOR) {
        ts[1] = a[1].u.tensor;
        nts = 2;
        if (call->nargs > 2)
            n->scalar = scalar_of(&a[2]);
    } else if (call->nargs > 1) {
        n->scalar = scalar_of(&a[1]);
    }
    return store_shapes(n, ts, nts);
}

/* saves a (or the old self) and b */
static int record_operands(wf_node *n, const weft_call *call, weft_tensor *result,
                           weft_tensor *old_self)
{
    TRY(record_shapes_binary(n, call, result, old_self));
    const weft_tensor *a = old_self ? old_self : call->args[0].u.tensor;
    TRY(wa__node_save(n, 0, a, result));
    if (call->args[1].tag == WEFT_VALUE_TENSOR)
        TRY(wa__node_save(n, 1, call->args[1].u.tensor, result));
    return 0;
}

static int record_input(wf_node *n, const weft_call *call, weft_tensor *result,
                        weft_tensor *old_self)
{
    TRY(record_shapes_binary(n, call, result, old_self));
    return wa__node_save(n, 0, old_self ? old_self : call->args[0].u.tensor, result);
}

static int record_reduction(wf_node *n, const weft_call *call, weft_tensor *result,
                            weft_tensor *old_self)
{
    (void)result;
    (void)old_self;
    const weft_tensor *self = call->args[0].u.tensor;
    TRY(store_shapes(n, &self, 1));
    /* the reduced dims, as a bit mask over at most 64 dims */
    uint64_t mask = 0;
    if (call->args[1].tag == WEFT_VALUE_NONE || call->args[1].len == 0) {
        mask = self->ndim ? (self->ndim == 64 ? ~0ULL : (1ULL << self->ndim) - 1) : 0;
    } else {
        for (int i = 0; i < call->args[1].len; i++) {
            int d;
            TRY(wf__wrap_dim(&d, (int)call->args[1].u.ints[i], self->ndim, call->op->schema.name));
            mask |= 1ULL << d;
        }
    }
    memcpy(&n->scalar, &mask, sizeof mask); /* the 64 bits, not a number */
    n->flag = call->args[2].u.b;
    return 0;
}

static int record_none(wf_node *n, const weft_call *call, weft_tensor *result, weft_tensor *old_self)
{
    (void)n;
    (void)call;
    (void)result;
    (void)old_self;
    return 0;
}

static int record_copy(wf_node *n, const weft_call *call, weft_tensor *result, weft_tensor *old_self)
{
    (void)result;
    (void)old_self;
    const weft_tensor *src = call->args[1].u.tensor;
    return store_shapes(n, &src, 1);
}

/* ------------------------------------------------------------ formulas */

/* add / sub (alpha), and their scalar forms */
static int add_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    bool sub = n->name[0] == 'S';
    if (wants(n, 0))
        TRY(fit_grad(&gi[0], n, 0, go[0]));
    if (n->n_edges > 1 && wants(n, 1)) {
        double alpha = sub ? -n->scalar : n->scalar;
        weft_tensor *scaled = NULL;
        if (alpha == 1.0)
            scaled = weft_tensor_retain(go[0]);
        else
            TRY(weft_mul_scalar(&scaled, go[0], alpha));
        int rc = fit_grad(&gi[1], n, 1, scaled);
        weft_tensor_release(scaled);
        return rc;
    }
    return 0;
}

static int scaled_backward(wf_node *n, weft_tensor **go, weft_tensor **gi, double factor)
{
    weft_tensor *scaled;
    TRY(weft_mul_scalar(&scaled, go[0], factor));
    int rc = fit_grad(&gi[0], n, 0, scaled);
    weft_tensor_release(scaled);
    return rc;
}

static int mul_scalar_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return scaled_backward(n, go, gi, n->scalar);
}

static int div_scalar_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return scaled_backward(n, go, gi, 1.0 / n->scalar);
}

static int neg_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return scaled_backward(n, go, gi, -1.0);
}

static int mul_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    weft_tensor *a = saved(n, 0, &rc), *b = saved(n, 1, &rc), *t = NULL;
    if (rc < 0)
        return rc;
    if (wants(n, 0) && (rc = weft_mul(&t, go[0], b)) == 0) {
        rc = fit_grad(&gi[0], n, 0, t);
        weft_tensor_release(t);
        t = NULL;
    }
    if (rc == 0 && wants(n, 1) && (rc = weft_mul(&t, go[0], a)) == 0) {
        rc = fit_grad(&gi[1], n, 1, t);
        weft_tensor_release(t);
    }
    return rc;
}

static int div_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    weft_tensor *a = saved(n, 0, &rc), *b = saved(n, 1, &rc), *t = NULL, *u = NULL, *v = NULL;
    if (rc < 0)
        return rc;
    if (wants(n, 0) && (rc = weft_div(&t, go[0], b)) == 0) {
        rc = fit_grad(&gi[0], n, 0, t);
        weft_tensor_release(t);
        t = NULL;
    }
    /* d(a/b)/db = -a / b^2 */
    if (rc == 0 && wants(n, 1)) {
        rc = weft_mul(&t, go[0], a);
        if (rc == 0)
            rc = weft_mul(&u, b, b);
        if (rc == 0)
            rc = weft_div(&v, t, u);
        weft_tensor_release(t);
        weft_tensor_release(u);
        t = NULL;
        if (rc == 0)
            rc = weft_neg(&t, v);
        weft_tensor_release(v);
        if (rc == 0)
            rc = fit_grad(&gi[1], n, 1, t);
        weft_tensor_release(t);
    }
    return rc;
}

/* grad * f'(x) for unary f, with f' written with weft operators */
typedef int (*derivative_fn)(weft_tensor **out, weft_tensor *x);

static int exp_derivative(weft_tensor **out, weft_tensor *x)
{
    return weft_exp(out, x);
}

static int log_derivative(weft_tensor **out, weft_tensor *x)
{
    weft_tensor *one;
    TRY(weft_ones(&one, NULL, 0, (weft_dtype)x->dtype, x->device));
    int rc = weft_div(out, one, x);
    weft_tensor_release(one);
    return rc;
}

static int sqrt_derivative(weft_tensor **out, weft_tensor *x)
{
    weft_tensor *r, *half;
    TRY(weft_sqrt(&r, x));
    int rc = weft_full(&half, NULL, 0, 0.5, (weft_dtype)r->dtype, x->device);
    if (rc == 0)
        rc = weft_div(out, half, r);
    weft_tensor_release(r);
    weft_tensor_release(half);
    return rc;
}

/* sigmoid' = s (1 - s) */
static int sigmoid_derivative(weft_tensor **out, weft_tensor *x)
{
    weft_tensor *s, *one_minus = NULL, *neg = NULL;
    TRY(weft_sigmoid(&s, x));
    int rc = weft_neg(&neg, s);
    if (rc == 0)
        rc = weft_add_scalar(&one_minus, neg, 1.0);
    if (rc == 0)
        rc = weft_mul(out, s, one_minus);
    weft_tensor_release(s);
    weft_tensor_release(neg);
    weft_tensor_release(one_minus);
    return rc;
}

/* tanh' = 1 - tanh^2 */
static int tanh_derivative(weft_tensor **out, weft_tensor *x)
{
    weft_tensor *t, *sq = NULL, *neg = NULL;
    TRY(weft_tanh(&t, x));
    int rc = weft_mul(&sq, t, t);
    if (rc == 0)
        rc = weft_neg(&neg, sq);
    if (rc == 0)
        rc = weft_add_scalar(out, neg, 1.0);
    weft_tensor_release(t);
    weft_tensor_release(sq);
    weft_tensor_release(neg);
    return rc;
}

static int unary_backward(wf_node *n, weft_tensor **go, weft_tensor **gi, derivative_fn f)
{
    int rc = 0;
    weft_tensor *x = saved(n, 0, &rc), *d = NULL, *t = NULL;
    if (rc < 0)
        return rc;
    rc = f(&d, x);
    if (rc == 0)
        rc = weft_mul(&t, go[0], d);
    if (rc == 0)
        rc = fit_grad(&gi[0], n, 0, t);
    weft_tensor_release(d);
    weft_tensor_release(t);
    return rc;
}

/* relu: g where x > 0 (the subgradient 0 at 0, as PyTorch), in one pass
 * through threshold_backward rather than a comparison, a conversion and a
 * product; threshold_backward has a formula of its own, so double backward
 * goes through it. */
static int relu_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    weft_tensor *x = saved(n, 0, &rc), *t = NULL;
    if (rc < 0)
        return rc;
    rc = weft_threshold_backward(&t, go[0], x, 0.0);
    if (rc == 0)
        rc = fit_grad(&gi[0], n, 0, t);
    weft_tensor_release(t);
    return rc;
}

/* threshold_backward(g, self, threshold) is linear in g with the same mask;
 * self only selects, so it gets no gradient (PyTorch's zero). */
static int record_threshold_backward(wf_node *n, const weft_call *call, weft_tensor *result,
                                     weft_tensor *old_self)
{
    TRY(record_shapes_binary(n, call, result, old_self));
    return wa__node_save(n, 0, call->args[1].u.tensor, result);
}

static int threshold_backward_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    weft_tensor *x = saved(n, 0, &rc), *t = NULL;
    if (rc < 0)
        return rc;
    rc = weft_threshold_backward(&t, go[0], x, n->scalar);
    if (rc == 0)
        rc = fit_grad(&gi[0], n, 0, t);
    weft_tensor_release(t);
    return rc;
}

/* |x|' = sign(x), 0 at 0 */
static int abs_derivative(weft_tensor **out, weft_tensor *x)
{
    return weft_sign(out, x);
}

static int sin_derivative(weft_tensor **out, weft_tensor *x)
{
    return weft_cos(out, x);
}

static int cos_derivative(weft_tensor **out, weft_tensor *x)
{
    weft_tensor *s;
    TRY(weft_sin(&s, x));
    int rc = weft_neg(out, s);
    weft_tensor_release(s);
    return rc;
}

static int sinh_derivative(weft_tensor **out, weft_tensor *x)
{
    return weft_cosh(out, x);
}

static int cosh_derivative(weft_tensor **out, weft_tensor *x)
{
    return weft_sinh(out, x);
}

static int expm1_derivative(weft_tensor **out, weft_tensor *x)
{
    return weft_exp(out, x);
}

/* 2^x ln 2 */
static int exp2_derivative(weft_tensor **out, weft_tensor *x)
{
    weft_tensor *e;
    TRY(weft_exp2(&e, x));
    int rc = weft_mul_scalar(out, e, 0.69314718055994530942);
    weft_tensor_release(e);
    return rc;
}

/* c / (x + shift): the logarithms' family */
static int scaled_reciprocal(weft_tensor **out, weft_tensor *x, double shift, double c)
{
    weft_tensor *d = NULL, *r = NULL;
    int rc = shift != 0 ? weft_add_scalar(&d, x, shift) : (d = weft_tensor_retain(x), 0);
    if (rc == 0)
        rc = weft_reciprocal(&r, d);
    if (rc == 0)
        rc = c == 1.0 ? (*out = weft_tensor_retain(r), 0) : weft_mul_scalar(out, r, c);
    weft_tensor_release(d);
    weft_tensor_release(r);
    return rc;
}

static int log1p_derivative(weft_tensor **out, weft_tensor *x)
{
    return scaled_reciprocal(out, x, 1.0, 1.0);
}

static int log2_derivative(weft_tensor **out, weft_tensor *x)
{
    return scaled_reciprocal(out, x, 0.0, 1.0 / 0.69314718055994530942);
}

static int log10_derivative(weft_tensor **out, weft_tensor *x)
{
    return scaled_reciprocal(out, x, 0.0, 1.0 / 2.30258509299404568402);
}

/* (1/x)' = -1/x^2 */
static int reciprocal_derivative(weft_tensor **out, weft_tensor *x)
{
    weft_tensor *r = NULL, *sq = NULL;
    int rc = weft_reciprocal(&r, x);
    if (rc == 0)
        rc = weft_mul(&sq, r, r);
    if (rc == 0)
        rc = weft_neg(out, sq);
    weft_tensor_release(r);
    weft_tensor_release(sq);
    return rc;
}

/* (x^-1/2)' = -1/2 x^-3/2 */
static int rsqrt_derivative(weft_tensor **out, weft_tensor *x)
{
    weft_tensor *r = NULL, *r3 = NULL;
    int rc = weft_rsqrt(&r, x);
    if (rc == 0)
        rc = weft_pow_scalar(&r3, r, 3.0);
    if (rc == 0)
        rc = weft_mul_scalar(out, r3, -0.5);
    weft_tensor_release(r);
    weft_tensor_release(r3);
    return rc;
}

/* tan' = 1 + tan^2 */
static int tan_derivative(weft_tensor **out, weft_tensor *x)
{
    weft_tensor *t = NULL, *sq = NULL;
    int rc = weft_tan(&t, x);
    if (rc == 0)
        rc = weft_mul(&sq, t, t);
    if (rc == 0)
        rc = weft_add_scalar(out, sq, 1.0);
    weft_tensor_release(t);
    weft_tensor_release(sq);
    return rc;
}

/* 1 / (1 + x^2) */
static int atan_derivative(weft_tensor **out, weft_tensor *x)
{
    weft_tensor *sq = NULL;
    int rc = weft_mul(&sq, x, x);
    if (rc == 0)
        rc = scaled_reciprocal(out, sq, 1.0, 1.0);
    weft_tensor_release(sq);
    return rc;
}

/* ±1 / sqrt(1 - x^2) */
static int arc_derivative(weft_tensor **out, weft_tensor *x, double sign)
{
    weft_tensor *sq = NULL, *d = NULL, *r = NULL;
    int rc = weft_mul(&sq, x, x);
    if (rc == 0)
        rc = weft_sub_scalar(&d, sq, 1.0); /* x^2 - 1 */
    if (rc == 0)
        rc = weft_neg_(d);
    if (rc == 0)
        rc = weft_rsqrt(&r, d);
    if (rc == 0)
        rc = sign > 0 ? (*out = weft_tensor_retain(r), 0) : weft_neg(out, r);
    weft_tensor_release(sq);
    weft_tensor_release(d);
    weft_tensor_release(r);
    return rc;
}

static int asin_derivative(weft_tensor **out, weft_tensor *x)
{
    return arc_derivative(out, x, 1.0);
}

static int acos_derivative(weft_tensor **out, weft_tensor *x)
{
    return arc_derivative(out, x, -1.0);
}

/* silu' = s (1 + x (1 - s)) with s = sigmoid(x) */
static int silu_derivative(weft_tensor **out, weft_tensor *x)
{
    weft_tensor *s = NULL, *neg = NULL, *one_minus = NULL, *t = NULL, *u = NULL;
    int rc = weft_sigmoid(&s, x);
    if (rc == 0)
        rc = weft_neg(&neg, s);
    if (rc == 0)
        rc = weft_add_scalar(&one_minus, neg, 1.0);
    if (rc == 0)
        rc = weft_mul(&t, x, one_minus);
    if (rc == 0)
        rc = weft_add_scalar(&u, t, 1.0);
    if (rc == 0)
        rc = weft_mul(out, s, u);
    weft_tensor *tmp[] = {s, neg, one_minus, t, u};
    for (int i = 0; i < 5; i++)
        weft_tensor_release(tmp[i]);
    return rc;
}

/* erf' = 2/sqrt(pi) exp(-x^2); erfc' is its negative */
static int erf_slope(weft_tensor **out, weft_tensor *x, double scale)
{
    weft_tensor *sq = NULL, *e = NULL;
    int rc = weft_mul(&sq, x, x);
    if (rc == 0)
        rc = weft_mul_scalar_(sq, -1.0);
    if (rc == 0)
        rc = weft_exp(&e, sq);
    if (rc == 0)
        rc = weft_mul_scalar(out, e, scale * 1.12837916709551257390);
    weft_tensor_release(sq);
    weft_tensor_release(e);
    return rc;
}

static int erf_derivative(weft_tensor **out, weft_tensor *x)
{
    return erf_slope(out, x, 1.0);
}

static int erfc_derivative(weft_tensor **out, weft_tensor *x)
{
    return erf_slope(out, x, -1.0);
}

/* erfinv'(x) = sqrt(pi)/2 exp(erfinv(x)^2) */
static int erfinv_derivative(weft_tensor **out, weft_tensor *x)
{
    weft_tensor *y = NULL, *sq = NULL, *e = NULL;
    int rc = weft_erfinv(&y, x);
    if (rc == 0)
        rc = weft_mul(&sq, y, y);
    if (rc == 0)
        rc = weft_exp(&e, sq);
    if (rc == 0)
        rc = weft_mul_scalar(out, e, 0.88622692545275801365);
    weft_tensor_release(y);
    weft_tensor_release(sq);
    weft_tensor_release(e);
    return rc;
}

/* gelu, exact: Phi(x) + x phi(x), with Phi(x) = erfc(-x/sqrt 2)/2 (no
 * cancellation for negative x) and phi(x) = exp(-x^2/2)/sqrt(2 pi) */
static int gelu_exact_derivative(weft_tensor **out, weft_tensor *x)
{
    weft_tensor *s = NULL, *cdf = NULL, *sq = NULL, *pdf = NULL, *xpdf = NULL;
    int rc = weft_mul_scalar(&s, x, -0.70710678118654752440);
    if (rc == 0)
        rc = weft_erfc_(s);
    if (rc == 0)
        rc = weft_mul_scalar(&cdf, s, 0.5);
    if (rc == 0)
        rc = weft_mul(&sq, x, x);
    if (rc == 0)
        rc = weft_mul_scalar_(sq, -0.5);
    if (rc == 0)
        rc = weft_exp(&pdf, sq);
    if (rc == 0)
        rc = weft_mul(&xpdf, x, pdf);
    if (rc == 0)
        rc = weft_mul_scalar_(xpdf, 0.39894228040143267794);
    if (rc == 0)
        rc = weft_add(out, cdf, xpdf);
    weft_tensor *tmp[] = {s, cdf, sq, pdf, xpdf};
    for (int i = 0; i < 5; i++)
        weft_tensor_release(tmp[i]);
    return rc;
}

/* gelu, tanh approximation: with u = k (x + c x^3) and t = tanh(u),
 * gelu = x (1 + t) / 2, so gelu' = (1 + t)/2 + x (1 - t^2) k (1 + 3 c x^2) / 2 */
static int gelu_tanh_derivative(weft_tensor **out, weft_tensor *x)
{
    const double k = 0.79788456080286535588, c = 0.044715;
    weft_tensor *x2 = NULL, *inner = NULL, *u = NULL, *t = NULL, *half1 = NULL, *t2 = NULL,
                *du = NULL, *prod = NULL;
    int rc = weft_mul(&x2, x, x);
    if (rc == 0)
        rc = weft_mul_scalar(&inner, x2, c);
    if (rc == 0)
        rc = weft_add_scalar_(inner, 1.0); /* 1 + c x^2 */
    if (rc == 0)
        rc = weft_mul(&u, x, inner);
    if (rc == 0)
        rc = weft_mul_scalar_(u, k);
    if (rc == 0)
        rc = weft_tanh(&t, u);
    if (rc == 0)
        rc = weft_add_scalar(&half1, t, 1.0);
    if (rc == 0)
        rc = weft_mul_scalar_(half1, 0.5); /* (1 + t)/2 */
    if (rc == 0)
        rc = weft_mul(&t2, t, t);
    if (rc == 0)
        rc = weft_mul_scalar_(t2, -1.0);
    if (rc == 0)
        rc = weft_add_scalar_(t2, 1.0); /* 1 - t^2 */
    if (rc == 0)
        rc = weft_mul_scalar(&du, x2, 3 * c);
    if (rc == 0)
        rc = weft_add_scalar_(du, 1.0);
    if (rc == 0)
        rc = weft_mul_scalar_(du, 0.5 * k); /* k (1 + 3 c x^2) / 2 */
    if (rc == 0)
        rc = weft_mul(&prod, t2, du);
    if (rc == 0)
        rc = weft_mul_(prod, x);
    if (rc == 0)
        rc = weft_add(out, half1, prod);
    weft_tensor *tmp[] = {x2, inner, u, t, half1, t2, du, prod};
    for (int i = 0; i < 8; i++)
        weft_tensor_release(tmp[i]);
    return rc;
}

static int gelu_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return unary_backward(n, go, gi, n->flag ? gelu_tanh_derivative : gelu_exact_derivative);
}

/* saves the input, and in the flag whether approximate is 'tanh' (the
 * kernel has already refused any other value but 'none') */
static int record_gelu(wf_node *n, const weft_call *call, weft_tensor *result, weft_tensor *old_self)
{
    TRY(record_input(n, call, result, old_self));
    const weft_value *a = &call->args[call->nargs - 1];
    n->flag = a->tag == WEFT_VALUE_STRING && a->u.string && strcmp(a->u.string, "tanh") == 0;
    return 0;
}

/* floor, ceil, round, trunc and sign are flat almost everywhere */
static int zero_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    weft_tensor *z;
    TRY(weft_mul_scalar(&z, go[0], 0.0));
    int rc = fit_grad(&gi[0], n, 0, z);
    weft_tensor_release(z);
    return rc;
}

/* x^e: e x^(e-1) */
static int pow_scalar_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    weft_tensor *x = saved(n, 0, &rc), *p = NULL, *d = NULL, *t = NULL;
    if (rc < 0)
        return rc;
    double e = n->scalar;
    if (e == 0.0)
        return zero_backward(n, go, gi);
    rc = weft_pow_scalar(&p, x, e - 1.0);
    if (rc == 0)
        rc = weft_mul_scalar(&d, p, e);
    if (rc == 0)
        rc = weft_mul(&t, go[0], d);
    if (rc == 0)
        rc = fit_grad(&gi[0], n, 0, t);
    weft_tensor_release(p);
    weft_tensor_release(d);
    weft_tensor_release(t);
    return rc;
}

#define UNARY_BACKWARD(name)                                                      \
    static int name##_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)    \
    {                                                                             \
        return unary_backward(n, go, gi, name##_derivative);                      \
    }
UNARY_BACKWARD(exp)
UNARY_BACKWARD(abs)
UNARY_BACKWARD(sin)
UNARY_BACKWARD(cos)
UNARY_BACKWARD(tan)
UNARY_BACKWARD(sinh)
UNARY_BACKWARD(cosh)
UNARY_BACKWARD(expm1)
UNARY_BACKWARD(exp2)
UNARY_BACKWARD(log1p)
UNARY_BACKWARD(log2)
UNARY_BACKWARD(log10)
UNARY_BACKWARD(reciprocal)
UNARY_BACKWARD(rsqrt)
UNARY_BACKWARD(atan)
UNARY_BACKWARD(asin)
UNARY_BACKWARD(acos)
UNARY_BACKWARD(silu)
UNARY_BACKWARD(log)
UNARY_BACKWARD(sqrt)
UNARY_BACKWARD(sigmoid)
UNARY_BACKWARD(tanh)
UNARY_BACKWARD(erf)
UNARY_BACKWARD(erfc)
UNARY_BACKWARD(erfinv)

/* sum / mean: the gradient is broadcast back over the reduced dims */
static int reduction_backward(wf_node *n, weft_tensor **go, weft_tensor **gi, bool mean)
{
    const int64_t *sizes;
    int ndim;
    weft_dtype dtype;
    shape_of(n, 0, &sizes, &ndim, &dtype);
    uint64_t mask;
    memcpy(&mask, &n->scalar, sizeof mask);
    int64_t kept[WEFT_MAX_DIMS];
    int64_t count = 1;
    for (int d = 0; d < ndim; d++) {
        bool reduced = (mask >> d) & 1;
        kept[d] = reduced ? 1 : sizes[d];
        if (reduced)
            count *= sizes[d];
    }
    weft_tensor *g = NULL, *e = NULL, *scaled = NULL;
    int rc = weft_reshape(&g, go[0], kept, ndim); /* restores the reduced dims as size 1 */
    if (rc == 0)
        rc = weft_expand(&e, g, sizes, ndim);
    if (rc == 0 && mean) {
        rc = weft_div_scalar(&scaled, e, (double)(count ? count : 1));
        weft_tensor_release(e);
        e = scaled;
    }
    if (rc == 0 && e->dtype != dtype) {
        rc = weft_to_dtype(&gi[0], e, dtype);
    } else if (rc == 0) {
        gi[0] = e;
        e = NULL;
    }
    weft_tensor_release(g);
    weft_tensor_release(e);
    return rc;
}

static int sum_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return reduction_backward(n, go, gi, false);
}

static int mean_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return reduction_backward(n, go, gi, true);
}

/* mm: dA = G B^T, dB = A^T G; bmm likewise on the last two dims */
static int matrix_backward(wf_node *n, weft_tensor **go, weft_tensor **gi, bool batched)
{
    int rc = 0;
    weft_tensor *a = saved(n, 0, &rc), *b = saved(n, 1, &rc), *t = NULL;
    if (rc < 0)
        return rc;
    int d0 = batched ? 1 : 0, d1 = batched ? 2 : 1;
    if (wants(n, 0) && (rc = weft_transpose(&t, b, d0, d1)) == 0) {
        rc = batched ? weft_bmm(&gi[0], go[0], t) : weft_mm(&gi[0], go[0], t);
        weft_tensor_release(t);
        t = NULL;
    }
    if (rc == 0 && wants(n, 1) && (rc = weft_transpose(&t, a, d0, d1)) == 0) {
        rc = batched ? weft_bmm(&gi[1], t, go[0]) : weft_mm(&gi[1], t, go[0]);
        weft_tensor_release(t);
    }
    return rc;
}

static int mm_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return matrix_backward(n, go, gi, false);
}

static int bmm_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return matrix_backward(n, go, gi, true);
}

/* copy_(self, src): self's old value is overwritten (no gradient); src gets
 * the gradient, broadcasting undone and converted to its dtype */
static int copy_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return fit_grad(&gi[0], n, 0, go[0]);
}

/* fill_: nothing flows back */
static int fill_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    (void)n;
    (void)go;
    (void)gi;
    return 0;
}

/* ------------------------------------------------------------ the table */

#define SELF 0x1
#define OTHER 0x2
#define BOTH 0x3
#define SRC 0x2

/* the functional, in-place and out= forms of a unary operator */
#define UNARY_FORMULAS(op, node, backward)                          \
    {op, node, backward, record_input, SELF, false},                \
    {op "_", node, backward, record_input, SELF, true},             \
    {op "_out", node, backward, record_input, 0x2, false}

static const formula formulas[] = {
    {"add", "AddBackward", add_backward, record_shapes_binary, BOTH, false},
    {"add_", "AddBackward", add_backward, record_shapes_binary, BOTH, false},
    {"add_out", "AddBackward", add_backward, record_shapes_binary, 0x6, false},
    {"add_scalar", "AddBackward", add_backward, record_shapes_binary, SELF, false},
    {"add_scalar_", "AddBackward", add_backward, record_shapes_binary, SELF, false},
    {"sub", "SubBackward", add_backward, record_shapes_binary, BOTH, false},
    {"sub_", "SubBackward", add_backward, record_shapes_binary, BOTH, false},
    {"sub_out", "SubBackward", add_backward, record_shapes_binary, 0x6, false},
    {"sub_scalar", "SubBackward", add_backward, record_shapes_binary, SELF, false},
    {"sub_scalar_", "SubBackward", add_backward, record_shapes_binary, SELF, false},
    {"mul", "MulBackward", mul_backward, record_operands, BOTH, false},
    {"mul_", "MulBackward", mul_backward, record_operands, BOTH, true},
    {"mul_out", "MulBackward", mul_backward, record_operands, 0x6, false},
    {"mul_scalar", "MulBackward", mul_scalar_backward, record_shapes_binary, SELF, false},
    {"mul_scalar_", "MulBackward", mul_scalar_backward, record_shapes_binary, SELF, false},
    {"div", "DivBackward", div_backward, record_operands, BOTH, false},
    {"div_", "DivBackward", div_backward, record_operands, BOTH, true},
    {"div_out", "DivBackward", div_backward, record_operands, 0x6, false},
    {"div_scalar", "DivBackward", div_scalar_backward, record_shapes_binary, SELF, false},
    {"div_scalar_", "DivBackward", div_scalar_backward, record_shapes_binary, SELF, false},
    {"neg", "NegBackward", neg_backward, record_shapes_binary, SELF, false},
    {"neg_", "NegBackward", neg_backward, record_shapes_binary, SELF, false},
    {"neg_out", "NegBackward", neg_backward, record_shapes_binary, 0x2, false},
    {"exp", "ExpBackward", exp_backward, record_input, SELF, false},
    {"exp_", "ExpBackward", exp_backward, record_input, SELF, true},
    {"exp_out", "ExpBackward", exp_backward, record_input, 0x2, false},
    {"log", "LogBackward", log_backward, record_input, SELF, false},
    {"log_", "LogBackward", log_backward, record_input, SELF, true},
    {"log_out", "LogBackward", log_backward, record_input, 0x2, false},
    {"sqrt", "SqrtBackward", sqrt_backward, record_input, SELF, false},
    {"sqrt_", "SqrtBackward", sqrt_backward, record_input, SELF, true},
    {"sqrt_out", "SqrtBackward", sqrt_backward, record_input, 0x2, false},
    {"sigmoid", "SigmoidBackward", sigmoid_backward, record_input, SELF, false},
    {"sigmoid_", "SigmoidBackward", sigmoid_backward, record_input, SELF, true},
    {"sigmoid_out", "SigmoidBackward", sigmoid_backward, record_input, 0x2, false},
    {"tanh", "TanhBackward", tanh_backward, record_input, SELF, false},
    {"tanh_", "TanhBackward", tanh_backward, record_input, SELF, true},
    {"tanh_out", "TanhBackward", tanh_backward, record_input, 0x2, false},
    UNARY_FORMULAS("relu", "ReluBackward", relu_backward),
    {"threshold_backward", "ThresholdBackwardBackward", threshold_backward_backward,
     record_threshold_backward, 0x1, false},
    UNARY_FORMULAS("abs", "AbsBackward", abs_backward),
    UNARY_FORMULAS("sin", "SinBackward", sin_backward),
    UNARY_FORMULAS("cos", "CosBackward", cos_backward),
    UNARY_FORMULAS("tan", "TanBackward", tan_backward),
    UNARY_FORMULAS("sinh", "SinhBackward", sinh_backward),
    UNARY_FORMULAS("cosh", "CoshBackward", cosh_backward),
    UNARY_FORMULAS("expm1", "Expm1Backward", expm1_backward),
    UNARY_FORMULAS("exp2", "Exp2Backward", exp2_backward),
    UNARY_FORMULAS("log1p", "Log1pBackward", log1p_backward),
    UNARY_FORMULAS("log2", "Log2Backward", log2_backward),
    UNARY_FORMULAS("log10", "Log10Backward", log10_backward),
    UNARY_FORMULAS("reciprocal", "ReciprocalBackward", reciprocal_backward),
    UNARY_FORMULAS("rsqrt", "RsqrtBackward", rsqrt_backward),
    UNARY_FORMULAS("atan", "AtanBackward", atan_backward),
    UNARY_FORMULAS("asin", "AsinBackward", asin_backward),
    UNARY_FORMULAS("acos", "AcosBackward", acos_backward),
    UNARY_FORMULAS("silu", "SiluBackward", silu_backward),
    UNARY_FORMULAS("floor", "FloorBackward", zero_backward),
    UNARY_FORMULAS("ceil", "CeilBackward", zero_backward),
    UNARY_FORMULAS("round", "RoundBackward", zero_backward),
    UNARY_FORMULAS("trunc", "TruncBackward", zero_backward),
    UNARY_FORMULAS("sign", "SignBackward", zero_backward),
    UNARY_FORMULAS("erf", "ErfBackward", erf_backward),
    UNARY_FORMULAS("erfc", "ErfcBackward", erfc_backward),
    UNARY_FORMULAS("erfinv", "ErfinvBackward", erfinv_backward),
    {"gelu", "GeluBackward", gelu_backward, record_gelu, SELF, false},
    {"gelu_", "GeluBackward", gelu_backward, record_gelu, SELF, true},
    {"gelu_out", "GeluBackward", gelu_backward, record_gelu, 0x2, false},
    {"pow_scalar", "PowBackward", pow_scalar_backward, record_input, SELF, false},
    {"pow_scalar_", "PowBackward", pow_scalar_backward, record_input, SELF, true},
    {"sum", "SumBackward", sum_backward, record_reduction, SELF, false, true},
    {"sum_out", "SumBackward", sum_backward, record_reduction, 0x2, false},
    {"mean", "MeanBackward", mean_backward, record_reduction, SELF, false},
    {"mean_out", "MeanBackward", mean_backward, record_reduction, 0x2, false},
    {"mm", "MmBackward", mm_backward, record_operands, BOTH, false, true},
    {"mm_out", "MmBackward", mm_backward, record_operands, 0x6, false},
    {"bmm", "BmmBackward", bmm_backward, record_operands, BOTH, false},
    {"bmm_out", "BmmBackward", bmm_backward, record_operands, 0x6, false},
    {"copy_", "CopyBackward", copy_backward, record_copy, SRC, false},
    {"fill_", "FillBackward", fill_backward, record_none, 0, false},
    {"uniform_", "FillBackward", fill_backward, record_none, 0, false},
    {"normal_", "FillBackward", fill_backward, record_none, 0, false},
};

/* ------------------------------------------------------------ the kernel */

static bool is_out_form(const weft_op *op)
{
    size_t len = strlen(op->schema.name);
    return op->schema.mutating && len > 4 && strcmp(op->schema.name + len - 4, "_out") == 0;
}

int wa__autograd_call_below(weft_call *call)
{
    weft_keyset excluded = wd__tls_excluded;
    wd__tls_excluded |= WF_AUTOGRAD_KEYS;
    int rc = weft_redispatch(call, WF_AUTOGRAD_KEYS);
    wd__tls_excluded = excluded;
    return rc;
}

/* A differentiable operand that requires grad and has a plugin layout. */
static const weft_tensor *layout_operand(const weft_call *call, const formula *f)
{
    for (int i = 0; i < call->nargs; i++) {
        const weft_value *v = &call->args[i];
        if ((f->diff >> i) & 1 && v->tag == WEFT_VALUE_TENSOR && v->u.tensor &&
            v->u.tensor->layout != WEFT_LAYOUT_STRIDED && wa__requires_grad(v->u.tensor))
            return v->u.tensor;
    }
    return NULL;
}

int wa__layout_records_call(weft_call *call, const weft_tensor *operand)
{
    int rc = weft_redispatch(call, WF_AUTOGRAD_KEYS);
    if (rc < 0)
        return rc;
    if (!wa__requires_grad(call->rets[0].u.tensor)) {
        weft_tensor_release(call->rets[0].u.tensor);
        call->rets[0].u.tensor = NULL;
        return wf__errorf(WEFT_ENOTSUP,
                          "%s: layout '%s' has no derivative for this operator (its kernel "
                          "recorded no gradient); detach the operand or go through to_dense",
                          call->op->schema.name, weft_layout_name(operand->layout));
    }
    return 0;
}

int wa__autograd_kernel(weft_call *call, void *ctx)
{
    const formula *f = ctx;
    const wf_schema *s = &call->op->schema;
    weft_tensor *self = s->mutating ? call->args[0].u.tensor : NULL;
    bool need = false;
    for (int i = 0; i < call->nargs; i++)
        if ((f->diff >> i) & 1 && call->args[i].tag == WEFT_VALUE_TENSOR)
            need |= wa__requires_grad(call->args[i].u.tensor);
    const weft_tensor *operand = need && f->layout_records ? layout_operand(call, f) : NULL;
    if (operand && !s->mutating)
        return wa__layout_records_call(call, operand);
    bool self_tracked = self && wa__requires_grad(self);
    if (is_out_form(call->op) && (need || self_tracked))
        return wf__errorf(WEFT_EINVAL,
                          "%s: functions with out=... arguments don't support automatic "
                          "differentiation, but one of the arguments requires grad",
                          s->name);
    if (self_tracked && weft_tensor_is_leaf(self))
        return wf__errorf(WEFT_EINVAL,
                          "%s: a leaf tensor that requires grad is being used in an in-place "
                          "operation (do it with grad mode off, or on a detached tensor)",
                          s->name);
    /* in place on a view: the write is recorded on the view's base too
     * (CopySlices), when anything involved takes part in autograd */
    bool on_view = self && self->is_view && self->view_base && !is_out_form(call->op);
    if (on_view && (need || self_tracked || wa__requires_grad(self->view_base) ||
                    (self->autograd_meta && ((wf_autograd_meta *)self->autograd_meta)->no_grad_view))) {
        int rc = wa__view_inplace_check(self, s->name);
        if (rc < 0)
            return rc;
        self_tracked = wa__requires_grad(self); /* a view made stale by a write to its base */
        need |= self_tracked && (f->diff & 1);
    } else {
        on_view = false;
    }
    weft_tensor *old_self = NULL;
    int rc = 0;
    if (self && need && f->needs_old_self) {
        /* a tracked self's copy records its history (CopyBackward), so
         * that a formula reading the old value is differentiable again */
        weft_keyset excluded = wd__tls_excluded;
        if (!self_tracked)
            wd__tls_excluded |= WF_AUTOGRAD_KEYS;
        rc = weft_empty_like(&old_self, self);
        if (rc == 0 && (rc = weft_copy_(old_self, self)) < 0) {
            weft_tensor_release(old_self);
            old_self = NULL;
        }
        wd__tls_excluded = excluded;
        if (rc < 0)
            return rc;
    }
    rc = wa__autograd_call_below(call);
    if (rc < 0 || !(need || self_tracked || on_view)) {
        weft_tensor_release(old_self);
        return rc;
    }
    int n_edges = 0;
    for (int i = 0; i < call->nargs; i++)
        n_edges += ((f->diff >> i) & 1) && call->args[i].tag == WEFT_VALUE_TENSOR;
    wf_node *node = wa__node_new(f->node_name, f->backward, n_edges, 1);
    if (!node)
        rc = wf__errorf(WEFT_ENOMEM, "%s: out of memory recording the graph", s->name);
    for (int i = 0, e = 0; rc == 0 && i < call->nargs; i++)
        if (((f->diff >> i) & 1) && call->args[i].tag == WEFT_VALUE_TENSOR)
            rc = wa__edge_of(&node->edges[e++], call->args[i].u.tensor);
    weft_tensor *result = self ? self : call->rets[0].u.tensor;
    if (rc == 0)
        rc = f->record(node, call, result, old_self);
    /* an operand that shares self's storage (a.mul_(a), or another view of
     * the same base) was read before the write but is saved after it: it is
     * given the version it had before, so backward reports the write
     * instead of using the new values.  A record that saves the written
     * result on purpose marks it (after_write) and keeps its version. */
    for (int i = 0; rc == 0 && self && i < node->n_saved; i++) {
        wf_saved *sv = &node->saved[i];
        if (sv->tensor && !sv->after_write && sv->tensor->storage == self->storage)
            sv->version--;
        /* self itself saved as an input (x.addcdiv_(x, y)): once self's
         * history is this node, node -> self -> node is a reference cycle
         * that nothing frees (the fuzzer's leak).  A detached alias shares
         * the storage and its version, so backward still reports the write. */
        if (sv->tensor == self && !sv->was_output) {
            weft_tensor *alias = NULL;
            if ((rc = weft_detach(&alias, self)) == 0) {
                weft_tensor_release(sv->tensor);
                sv->tensor = alias;
            }
        }
    }
    if (rc == 0)
        rc = on_view ? wa__view_rebase(self, node, f->diff & 1) : wa__set_history(result, node, 0);
    wa__node_release(node);
    weft_tensor_release(old_self);
    if (rc < 0 && !self) {
        /* every result goes: min_dim's indices as well as its values (the
         * fuzzer's leak when saving for backward ran out of memory) */
        for (int i = 0; i < call->nrets; i++)
            if (call->rets[i].tag == WEFT_VALUE_TENSOR) {
                weft_tensor_release(call->rets[i].u.tensor);
                call->rets[i].u.tensor = NULL;
                call->rets[i].tag = WEFT_VALUE_NONE;
            }
    }
    return rc;
}

/* Operators with no formula: refuse inputs that require grad, rather than
 * let them silently produce no gradient. */
static int no_formula_fallback(weft_call *call, void *ctx)
{
    (void)ctx;
    for (int i = 0; i < call->nargs; i++) {
        const weft_value *v = &call->args[i];
        bool tracked = v->tag == WEFT_VALUE_TENSOR && wa__requires_grad(v->u.tensor);
        for (int j = 0; v->tag == WEFT_VALUE_TENSOR_LIST && j < v->len; j++)
            tracked |= wa__requires_grad(v->u.tensors[j]);
        if (tracked)
            return wf__errorf(WEFT_ENOTSUP,
                              "%s: the operator has no derivative formula, and argument '%s' "
                              "requires grad (run it with grad mode off or on detached tensors)",
                              call->op->schema.name, call->op->schema.args[i].name);
    }
    return wa__autograd_call_below(call);
}

/* Operators whose results carry no gradient (booleans, indices): they run
 * below the layer and record nothing, whatever their inputs require. */
static int not_differentiable(weft_call *call, void *ctx)
{
    (void)ctx;
    return wa__autograd_call_below(call);
}

static const char *const nondifferentiable[] = {
    "eq", "ne", "lt", "le", "gt", "ge", "eq_scalar", "ne_scalar", "lt_scalar", "le_scalar",
    "gt_scalar", "ge_scalar", "logical_and", "logical_or", "logical_xor", "logical_not",
    "isnan", "isinf", "isfinite", "argmax", "argmin", "count_nonzero", "all", "any",
    "one_hot", "nonzero", "argsort",
    /* random samples and integer-valued results (PyTorch: not
     * differentiable; bernoulli's gradient for p is zero); the in-place
     * random fills have formulas in formulas_reduce.c instead */
    "bernoulli", "multinomial", "unique",
    /* the optimizers' fused updates (nn/optim_foreach.c): a step is not
     * part of any graph, as torch's optimizers run under no_grad */
    "_fused_sgd_", "_fused_adam_", "_fused_rmsprop_", "_fused_adagrad_",
};

void wa__autograd_register(void)
{
    /* the names are this file's own: a failure is a bug in it, reported
     * loudly since there is no caller to return it to */
    for (size_t i = 0; i < sizeof nondifferentiable / sizeof nondifferentiable[0]; i++)
        if (weft_register_kernel(wd__core_registrar, nondifferentiable[i], WEFT_KEY_AUTOGRAD,
                                 WEFT_ALL_BACKENDS, not_differentiable, NULL, NULL) < 0)
            fprintf(stderr, "weft: internal error: %s\n", weft_last_error());
    for (size_t i = 0; i < sizeof formulas / sizeof formulas[0]; i++)
        if (weft_register_kernel(wd__core_registrar, formulas[i].op, WEFT_KEY_AUTOGRAD,
                                 WEFT_ALL_BACKENDS, wa__autograd_kernel, (void *)&formulas[i], NULL) < 0)
            fprintf(stderr, "weft: internal error: %s\n", weft_last_error());
    weft_register_fallback(wd__core_registrar, WEFT_KEY_AUTOGRAD, WEFT_ALL_BACKENDS,
                           no_formula_fallback, NULL, NULL);
    if (wa__inplace_or_view_register() < 0)
        fprintf(stderr, "weft: internal error: %s\n", weft_last_error());
    wa__autograd_register_nn();
    wa__autograd_register_shape();
    wa__autograd_register_nn_grad();
    wa__autograd_register_pointwise();
    wa__autograd_register_reduce();
}
