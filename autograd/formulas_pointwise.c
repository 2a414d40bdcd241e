/* autograd/formulas_pointwise.c — derivative formulas of the pointwise
 * operators of the CPU backend issue: the clamps and piecewise activations
 * (with PyTorch's rules at the kinks), the smooth activations, the binary
 * operators (atan2, pow, fmod, remainder, maximum, minimum, division with a
 * rounding mode), where, masked_fill, lerp, addcmul, addcdiv, nan_to_num,
 * and dropout.  Every formula is written with weft operators, selecting
 * with where rather than multiplying by a mask, so that an inf or nan in
 * the branch not taken never leaks into the gradient, and so that each
 * formula runs on any device and differentiates again under create_graph. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "autograd/formula_helpers.h"

/* ------------------------------------------------------------ the record */

static double value_number(const weft_value *v)
{
    return v->tag == WEFT_VALUE_INT ? (double)v->u.i : v->tag == WEFT_VALUE_BOOL ? v->u.b : v->u.d;
}

int wa__record_args(wf_node *n, const weft_call *call, weft_tensor *old_self, unsigned save)
{
    const weft_tensor *ts[16] = {0};
    int nargs = call->nargs < 16 ? call->nargs : 16;
    for (int i = 0; i < nargs; i++)
        if (call->args[i].tag == WEFT_VALUE_TENSOR)
            ts[i] = call->args[i].u.tensor;
    TRY(store_shapes(n, ts, nargs));
    const weft_tensor *self = ts[0];
    for (int i = 0; i < nargs; i++) {
        const weft_value *v = &call->args[i];
        int64_t packed[2] = {v->tag, 0};
        if (v->tag == WEFT_VALUE_DOUBLE) {
            memcpy(&packed[1], &v->u.d, sizeof v->u.d);
        } else if (v->tag == WEFT_VALUE_INT) {
            packed[1] = v->u.i;
        } else if (v->tag == WEFT_VALUE_BOOL) {
            packed[1] = v->u.b;
        } else if (v->tag == WEFT_VALUE_INT_LIST) {
            /* reduced dims as a bit mask over self's dims; empty: all */
            int nd = self ? self->ndim : 0;
            uint64_t mask = 0;
            for (int k = 0; k < v->len; k++) {
                int d;
                TRY(wf__wrap_dim(&d, (int)v->u.ints[k], nd, call->op->schema.name));
                mask |= 1ULL << d;
            }
            if (v->len == 0)
                mask = nd >= 64 ? ~0ULL : (1ULL << nd) - 1;
            memcpy(&packed[1], &mask, sizeof mask);
        }
        TRY(append_info(n, packed, 2));
    }
    int64_t count = nargs;
    TRY(append_info(n, &count, 1));
    for (int i = 0; i < nargs; i++)
        if ((save >> i) & 1 && ts[i])
            TRY(wa__node_save(n, i, i == 0 && old_self ? old_self : ts[i], NULL));
    return 0;
}

/* record_args saving the arguments of a mask (bit i: argument i) */
#define RECORD_SAVING(name, mask)                                                          \
    static int name(wf_node *n, const weft_call *call, weft_tensor *result, weft_tensor *old) \
    {                                                                                      \
        (void)result;                                                                      \
        return wa__record_args(n, call, old, mask);                                        \
    }
RECORD_SAVING(record_nothing, 0x0)
RECORD_SAVING(record_self, 0x1)
RECORD_SAVING(record_other, 0x2)
RECORD_SAVING(record_12, 0x6)
RECORD_SAVING(record_01, 0x3)
RECORD_SAVING(record_012, 0x7)

/* ------------------------------------------------------------ helpers */

static weft_tensor *saved_arg(scratch *s, wf_node *n, int slot)
{
    if (s->rc < 0)
        return NULL;
    weft_tensor *t = wa__node_saved(n, slot);
    if (!t)
        s->rc = WEFT_EINVAL;
    return t;
}

/* where(cond, a, 0) and where(cond, 0, a) */
static weft_tensor *keep_where(scratch *s, weft_tensor *cond, weft_tensor *a)
{
    weft_tensor *zero = SC(s, wa__scalar_like, a, 0.0);
    return SC(s, weft_where, cond, a, zero);
}

static weft_tensor *drop_where(scratch *s, weft_tensor *cond, weft_tensor *a)
{
    weft_tensor *zero = SC(s, wa__scalar_like, a, 0.0);
    return SC(s, weft_where, cond, zero, a);
}

/* lo < x < hi (strict), or lo <= x <= hi; a NaN bound is absent */
static weft_tensor *within(scratch *s, weft_tensor *x, double lo, double hi, bool strict)
{
    weft_tensor *a = NULL, *b = NULL;
    if (!isnan(lo))
        a = strict ? SC(s, weft_gt_scalar, x, lo) : SC(s, weft_ge_scalar, x, lo);
    if (!isnan(hi))
        b = strict ? SC(s, weft_lt_scalar, x, hi) : SC(s, weft_le_scalar, x, hi);
    if (a && b)
        return SC(s, weft_logical_and, a, b);
    return a ? a : b;
}

/* g where lo (<)= x (<)= hi, else 0 */
static int band_backward(wf_node *n, weft_tensor **go, weft_tensor **gi, double lo, double hi,
                         bool strict, double factor)
{
    scratch s = {0};
    weft_tensor *x = saved_arg(&s, n, 0);
    weft_tensor *mask = x ? within(&s, x, lo, hi, strict) : NULL;
    weft_tensor *g = factor == 1.0 ? go[0] : SC(&s, weft_mul_scalar, go[0], factor);
    weft_tensor *r = mask ? keep_where(&s, mask, g) : g;
    sc_grad(&s, n, gi, 0, 0, r);
    return sc_end(&s);
}

/* ------------------------------------------------------------ clamps */

/* clamp(self, min?, max?): g where min <= x <= max (PyTorch: the gradient
 * passes at the bounds themselves) */
static int clamp_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    double lo = arg_is_none(n, 1) ? NAN : arg_num(n, 1);
    double hi = arg_is_none(n, 2) ? NAN : arg_num(n, 2);
    return band_backward(n, go, gi, lo, hi, false, 1.0);
}

static int clamp_min_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return band_backward(n, go, gi, arg_num(n, 1), NAN, false, 1.0);
}

static int clamp_max_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return band_backward(n, go, gi, NAN, arg_num(n, 1), false, 1.0);
}

/* hardtanh(min_val, max_val) and relu6 (hardtanh(0, 6)): g strictly
 * inside, 0 at and beyond the bounds (PyTorch's hardtanh_backward) */
static int hardtanh_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return band_backward(n, go, gi, arg_num(n, 1), arg_num(n, 2), true, 1.0);
}

static int relu6_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return band_backward(n, go, gi, 0.0, 6.0, true, 1.0);
}

/* hardsigmoid = relu6(x + 3) / 6: g/6 strictly inside (-3, 3) */
static int hardsigmoid_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return band_backward(n, go, gi, -3.0, 3.0, true, 1.0 / 6.0);
}

/* nan_to_num: g where x is finite, 0 where it was replaced */
static int nan_to_num_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    scratch s = {0};
    weft_tensor *x = saved_arg(&s, n, 0);
    weft_tensor *fin = SC(&s, weft_isfinite, x);
    sc_grad(&s, n, gi, 0, 0, keep_where(&s, fin, go[0]));
    return sc_end(&s);
}

/* ------------------------------------------------------------ activations */

/* hardswish = x relu6(x + 3) / 6: 0 below -3, g (x/3 + 1/2) on [-3, 3],
 * g above 3 (PyTorch's boundaries) */
static int hardswish_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    scratch s = {0};
    weft_tensor *x = saved_arg(&s, n, 0);
    weft_tensor *slope = SC(&s, weft_mul_scalar, x, 1.0 / 3.0);
    weft_tensor *slope2 = SC(&s, weft_add_scalar, slope, 0.5);
    weft_tensor *mid = SC(&s, weft_mul, go[0], slope2);
    weft_tensor *upper = SC(&s, weft_le_scalar, x, 3.0);
    weft_tensor *inner = SC(&s, weft_where, upper, mid, go[0]);
    weft_tensor *lower = SC(&s, weft_lt_scalar, x, -3.0);
    sc_grad(&s, n, gi, 0, 0, drop_where(&s, lower, inner));
    return sc_end(&s);
}

/* leaky_relu: g for x > 0, g * slope otherwise */
static int leaky_relu_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    scratch s = {0};
    weft_tensor *x = saved_arg(&s, n, 0);
    weft_tensor *pos = SC(&s, weft_gt_scalar, x, 0.0);
    weft_tensor *neg = SC(&s, weft_mul_scalar, go[0], arg_num(n, 1));
    sc_grad(&s, n, gi, 0, 0, SC(&s, weft_where, pos, go[0], neg));
    return sc_end(&s);
}

/* elu(alpha, scale, input_scale): g scale for x > 0, else
 * g input_scale alpha scale exp(x input_scale); the exponential reads
 * min(x, 0), so a large x in the branch not taken cannot overflow into a
 * nan under double backward.  selu is elu with its two constants. */
static int elu_grad(wf_node *n, weft_tensor **go, weft_tensor **gi, double alpha, double scale,
                    double input_scale)
{
    scratch s = {0};
    weft_tensor *x = saved_arg(&s, n, 0);
    weft_tensor *pos = SC(&s, weft_gt_scalar, x, 0.0);
    weft_tensor *xn = SC(&s, weft_clamp_max, x, 0.0);
    weft_tensor *xs = SC(&s, weft_mul_scalar, xn, input_scale);
    weft_tensor *e = SC(&s, weft_exp, xs);
    weft_tensor *ge = SC(&s, weft_mul, go[0], e);
    weft_tensor *neg = SC(&s, weft_mul_scalar, ge, input_scale * alpha * scale);
    weft_tensor *gp = SC(&s, weft_mul_scalar, go[0], scale);
    sc_grad(&s, n, gi, 0, 0, SC(&s, weft_where, pos, gp, neg));
    return sc_end(&s);
}

static int elu_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return elu_grad(n, go, gi, arg_num(n, 1), arg_num(n, 2), arg_num(n, 3));
}

static int selu_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return elu_grad(n, go, gi, 1.6732632423543772848170429916717, 1.0507009873554804934193349852946,
                    1.0);
}

/* logsigmoid' = sigmoid(-x) */
static int logsigmoid_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    scratch s = {0};
    weft_tensor *x = saved_arg(&s, n, 0);
    weft_tensor *m = SC(&s, weft_neg, x);
    weft_tensor *d = SC(&s, weft_sigmoid, m);
    sc_grad(&s, n, gi, 0, 0, SC(&s, weft_mul, go[0], d));
    return sc_end(&s);
}

/* softplus(beta, threshold): g sigmoid(beta x), or g where beta x >
 * threshold (the kernel returns x there) */
static int softplus_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    scratch s = {0};
    double beta = arg_num(n, 1), threshold = arg_num(n, 2);
    weft_tensor *x = saved_arg(&s, n, 0);
    weft_tensor *bx = SC(&s, weft_mul_scalar, x, beta);
    weft_tensor *sg = SC(&s, weft_sigmoid, bx);
    weft_tensor *smooth = SC(&s, weft_mul, go[0], sg);
    weft_tensor *linear = SC(&s, weft_gt_scalar, bx, threshold);
    sc_grad(&s, n, gi, 0, 0, SC(&s, weft_where, linear, go[0], smooth));
    return sc_end(&s);
}

/* mish = x tanh(softplus(x)): t + x sigmoid(x) (1 - t^2), t = tanh(softplus(x)) */
static int mish_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    scratch s = {0};
    weft_tensor *x = saved_arg(&s, n, 0);
    weft_tensor *sp = SC(&s, weft_softplus, x, 1.0, 20.0);
    weft_tensor *t = SC(&s, weft_tanh, sp);
    weft_tensor *t2 = SC(&s, weft_mul, t, t);
    weft_tensor *one_minus = SC(&s, weft_sub_scalar, t2, 1.0);
    weft_tensor *sech2 = SC(&s, weft_neg, one_minus);
    weft_tensor *sg = SC(&s, weft_sigmoid, x);
    weft_tensor *xs = SC(&s, weft_mul, x, sg);
    weft_tensor *tail = SC(&s, weft_mul, xs, sech2);
    weft_tensor *d = SC(&s, weft_add, t, tail);
    sc_grad(&s, n, gi, 0, 0, SC(&s, weft_mul, go[0], d));
    return sc_end(&s);
}

/* ------------------------------------------------------------ binary */

/* atan2(y, x): self g x / (x^2 + y^2), other -g y / (x^2 + y^2) */
static int atan2_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    scratch s = {0};
    weft_tensor *y = saved_arg(&s, n, 0), *x = saved_arg(&s, n, 1);
    weft_tensor *y2 = SC(&s, weft_mul, y, y);
    weft_tensor *x2 = SC(&s, weft_mul, x, x);
    weft_tensor *r2 = SC(&s, weft_add, x2, y2);
    weft_tensor *gr = SC(&s, weft_div, go[0], r2);
    if (wants(n, 0))
        sc_grad(&s, n, gi, 0, 0, SC(&s, weft_mul, gr, x));
    if (wants(n, 1)) {
        weft_tensor *gy = SC(&s, weft_mul, gr, y);
        sc_grad(&s, n, gi, 1, 1, SC(&s, weft_neg, gy));
    }
    return sc_end(&s);
}

/* fmod / remainder: self g; other -g trunc(self/other) / -g floor(self/other) */
static int mod_backward(wf_node *n, weft_tensor **go, weft_tensor **gi, const char *rounding)
{
    scratch s = {0};
    sc_grad(&s, n, gi, 0, 0, go[0]);
    if (n->n_edges > 1 && wants(n, 1)) {
        weft_tensor *a = saved_arg(&s, n, 0), *b = saved_arg(&s, n, 1);
        weft_tensor *q = SC(&s, weft_div_mode_ex, a, b, rounding);
        weft_tensor *gq = SC(&s, weft_mul, go[0], q);
        sc_grad(&s, n, gi, 1, 1, SC(&s, weft_neg, gq));
    }
    return sc_end(&s);
}

static int fmod_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return mod_backward(n, go, gi, "trunc");
}

static int remainder_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return mod_backward(n, go, gi, "floor");
}

/* div with a rounding mode: the result is piecewise constant, zero
 * gradients (PyTorch); without one it is plain division */
static int div_mode_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    scratch s = {0};
    bool rounded = !arg_is_none(n, 2);
    weft_tensor *b = saved_arg(&s, n, 1);
    if (rounded) {
        weft_tensor *z = SC(&s, weft_mul_scalar, go[0], 0.0);
        sc_grad(&s, n, gi, 0, 0, z);
        sc_grad(&s, n, gi, 1, 1, z);
        return sc_end(&s);
    }
    weft_tensor *q = SC(&s, weft_div, go[0], b);
    sc_grad(&s, n, gi, 0, 0, q);
    if (wants(n, 1)) {
        weft_tensor *a = saved_arg(&s, n, 0);
        weft_tensor *ab = SC(&s, weft_div, a, b);
        weft_tensor *t = SC(&s, weft_mul, q, ab); /* g a / b^2 */
        sc_grad(&s, n, gi, 1, 1, SC(&s, weft_neg, t));
    }
    return sc_end(&s);
}

static int div_scalar_mode_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    scratch s = {0};
    bool rounded = !arg_is_none(n, 2);
    weft_tensor *t = rounded ? SC(&s, weft_mul_scalar, go[0], 0.0)
                             : SC(&s, weft_div_scalar, go[0], arg_num(n, 1));
    sc_grad(&s, n, gi, 0, 0, t);
    return sc_end(&s);
}

/* the *_scalar forms of fmod and remainder: self g */
static int identity_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    scratch s = {0};
    sc_grad(&s, n, gi, 0, 0, go[0]);
    return sc_end(&s);
}

/* pow(x, y): self where(y == 0, 0, g y x^(y-1)); exponent
 * g where(x == 0 and y >= 0, 0, x^y log x) (PyTorch's masks) */
static int pow_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    scratch s = {0};
    weft_tensor *x = saved_arg(&s, n, 0), *y = saved_arg(&s, n, 1);
    if (wants(n, 0)) {
        weft_tensor *ym1 = SC(&s, weft_sub_scalar, y, 1.0);
        weft_tensor *p = SC(&s, weft_pow, x, ym1);
        weft_tensor *yp = SC(&s, weft_mul, y, p);
        weft_tensor *t = SC(&s, weft_mul, go[0], yp);
        weft_tensor *y0 = SC(&s, weft_eq_scalar, y, 0.0);
        sc_grad(&s, n, gi, 0, 0, drop_where(&s, y0, t));
    }
    if (wants(n, 1)) {
        weft_tensor *r = SC(&s, weft_pow, x, y);
        weft_tensor *l = SC(&s, weft_log, x);
        weft_tensor *rl = SC(&s, weft_mul, r, l);
        weft_tensor *x0 = SC(&s, weft_eq_scalar, x, 0.0);
        weft_tensor *ypos = SC(&s, weft_ge_scalar, y, 0.0);
        weft_tensor *cond = SC(&s, weft_logical_and, x0, ypos);
        weft_tensor *d = drop_where(&s, cond, rl);
        sc_grad(&s, n, gi, 1, 1, SC(&s, weft_mul, go[0], d));
    }
    return sc_end(&s);
}

/* maximum / minimum: the gradient to the larger (smaller) operand, split
 * in half on ties (PyTorch) */
static int extremum_backward(wf_node *n, weft_tensor **go, weft_tensor **gi, bool max)
{
    scratch s = {0};
    weft_tensor *a = saved_arg(&s, n, 0), *b = saved_arg(&s, n, 1);
    weft_tensor *tie = SC(&s, weft_eq, a, b);
    weft_tensor *half = SC(&s, weft_mul_scalar, go[0], 0.5);
    weft_tensor *shared = SC(&s, weft_where, tie, half, go[0]);
    weft_tensor *a_loses = max ? SC(&s, weft_lt, a, b) : SC(&s, weft_gt, a, b);
    weft_tensor *b_loses = max ? SC(&s, weft_gt, a, b) : SC(&s, weft_lt, a, b);
    if (wants(n, 0))
        sc_grad(&s, n, gi, 0, 0, drop_where(&s, a_loses, shared));
    if (wants(n, 1))
        sc_grad(&s, n, gi, 1, 1, drop_where(&s, b_loses, shared));
    return sc_end(&s);
}

static int maximum_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return extremum_backward(n, go, gi, true);
}

static int minimum_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return extremum_backward(n, go, gi, false);
}

/* where(cond, self, other): the condition only selects */
static int where_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    scratch s = {0};
    weft_tensor *cond = saved_arg(&s, n, 0);
    if (wants(n, 0))
        sc_grad(&s, n, gi, 0, 1, keep_where(&s, cond, go[0]));
    if (wants(n, 1))
        sc_grad(&s, n, gi, 1, 2, drop_where(&s, cond, go[0]));
    return sc_end(&s);
}

/* masked_fill(self, mask, value): 0 where filled (value is a Scalar here,
 * so it has no gradient) */
static int masked_fill_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    scratch s = {0};
    weft_tensor *mask = saved_arg(&s, n, 1);
    sc_grad(&s, n, gi, 0, 0, drop_where(&s, mask, go[0]));
    return sc_end(&s);
}

/* lerp(self, end, weight) = self + weight (end - self): self g (1 - w),
 * end g w, weight g (end - self) */
static int lerp_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    scratch s = {0};
    bool scalar = n->n_edges == 2;
    weft_tensor *w = NULL;
    double wv = 0;
    if (scalar)
        wv = arg_num(n, 2);
    else
        w = saved_arg(&s, n, 2);
    if (wants(n, 0)) {
        weft_tensor *t;
        if (scalar) {
            t = SC(&s, weft_mul_scalar, go[0], 1.0 - wv);
        } else {
            weft_tensor *gw = SC(&s, weft_mul, go[0], w);
            t = SC(&s, weft_sub, go[0], gw);
        }
        sc_grad(&s, n, gi, 0, 0, t);
    }
    if (wants(n, 1))
        sc_grad(&s, n, gi, 1, 1, scalar ? SC(&s, weft_mul_scalar, go[0], wv) : SC(&s, weft_mul, go[0], w));
    if (!scalar && wants(n, 2)) {
        weft_tensor *a = saved_arg(&s, n, 0), *b = saved_arg(&s, n, 1);
        weft_tensor *d = SC(&s, weft_sub, b, a);
        sc_grad(&s, n, gi, 2, 2, SC(&s, weft_mul, go[0], d));
    }
    return sc_end(&s);
}

/* addcmul(self, t1, t2, value): self g, t1 g t2 value, t2 g t1 value */
static int addcmul_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    scratch s = {0};
    double value = arg_num(n, 3);
    sc_grad(&s, n, gi, 0, 0, go[0]);
    weft_tensor *t1 = saved_arg(&s, n, 1), *t2 = saved_arg(&s, n, 2);
    weft_tensor *gv = SC(&s, weft_mul_scalar, go[0], value);
    if (wants(n, 1))
        sc_grad(&s, n, gi, 1, 1, SC(&s, weft_mul, gv, t2));
    if (wants(n, 2))
        sc_grad(&s, n, gi, 2, 2, SC(&s, weft_mul, gv, t1));
    return sc_end(&s);
}

/* addcdiv(self, t1, t2, value): self g, t1 g value / t2,
 * t2 -g value t1 / t2^2 */
static int addcdiv_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    scratch s = {0};
    double value = arg_num(n, 3);
    sc_grad(&s, n, gi, 0, 0, go[0]);
    weft_tensor *t1 = saved_arg(&s, n, 1), *t2 = saved_arg(&s, n, 2);
    weft_tensor *gv = SC(&s, weft_mul_scalar, go[0], value);
    weft_tensor *q = SC(&s, weft_div, gv, t2);
    if (wants(n, 1))
        sc_grad(&s, n, gi, 1, 1, q);
    if (wants(n, 2)) {
        weft_tensor *r = SC(&s, weft_div, t1, t2);
        weft_tensor *qr = SC(&s, weft_mul, q, r);
        sc_grad(&s, n, gi, 2, 2, SC(&s, weft_neg, qr));
    }
    return sc_end(&s);
}

/* ------------------------------------------------------------ dropout */

/* dropout on an input that requires grad: the mask (kept elements 1/(1-p),
 * dropped 0) is drawn by the dropout operator itself, run below this layer
 * on ones, with the same generator, element count and therefore the same
 * numbers as on the input; the result is then input * mask through mul
 * (mul_ for dropout_), whose formula gives g * mask back and differentiates
 * again.  Outside training it is the identity, as below. */
static int dropout_autograd_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor *self = call->args[0].u.tensor;
    bool inplace = call->op->schema.mutating;
    bool train = call->args[2].u.b;
    if (!train || !wa__requires_grad(self) || !wa__grad_enabled())
        return wa__autograd_call_below(call);
    weft_tensor *ones = NULL, *mask = NULL;
    int rc = 0;
    {
        weft_keyset excluded = wd__tls_excluded;
        wd__tls_excluded |= WF_AUTOGRAD_KEYS;
        rc = weft_ones(&ones, self->sizes, self->ndim, (weft_dtype)self->dtype, self->device);
        weft_generator *g = call->args[3].tag == WEFT_VALUE_GENERATOR ? call->args[3].u.generator
                                                                        : NULL;
        if (rc == 0)
            rc = weft_dropout_ex(&mask, ones, value_number(&call->args[1]), true, g);
        wd__tls_excluded = excluded;
    }
    weft_tensor_release(ones);
    if (rc < 0)
        return rc;
    if (inplace) {
        rc = weft_mul_(self, mask);
    } else {
        weft_tensor *out = NULL;
        rc = weft_mul(&out, self, mask);
        if (rc == 0) {
            call->rets[0].tag = WEFT_VALUE_TENSOR;
            call->rets[0].u.tensor = out;
        }
    }
    weft_tensor_release(mask);
    return rc;
}

/* ------------------------------------------------------------ the table */

#define SELF 0x1
#define PAIR 0x3

/* functional and in-place forms; old: whether the in-place formula reads self's old value */
#define FORMS(op, node, backward, record, diff, old)      \
    {op, node, backward, record, diff, false},            \
    {op "_", node, backward, record, diff, old}

static const formula pointwise_formulas[] = {
    FORMS("clamp", "ClampBackward", clamp_backward, record_self, SELF, true),
    FORMS("clamp_min", "ClampMinBackward", clamp_min_backward, record_self, SELF, true),
    FORMS("clamp_max", "ClampMaxBackward", clamp_max_backward, record_self, SELF, true),
    FORMS("hardtanh", "HardtanhBackward", hardtanh_backward, record_self, SELF, true),
    FORMS("relu6", "Relu6Backward", relu6_backward, record_self, SELF, true),
    FORMS("hardsigmoid", "HardsigmoidBackward", hardsigmoid_backward, record_self, SELF, true),
    FORMS("hardswish", "HardswishBackward", hardswish_backward, record_self, SELF, true),
    FORMS("nan_to_num", "NanToNumBackward", nan_to_num_backward, record_self, SELF, true),
    FORMS("leaky_relu", "LeakyReluBackward", leaky_relu_backward, record_self, SELF, true),
    FORMS("elu", "EluBackward", elu_backward, record_self, SELF, true),
    FORMS("selu", "SeluBackward", selu_backward, record_self, SELF, true),
    FORMS("mish", "MishBackward", mish_backward, record_self, SELF, true),
    {"logsigmoid", "LogSigmoidBackward", logsigmoid_backward, record_self, SELF, false},
    {"softplus", "SoftplusBackward", softplus_backward, record_self, SELF, false},
    FORMS("atan2", "Atan2Backward", atan2_backward, record_01, PAIR, true),
    FORMS("fmod", "FmodBackward", fmod_backward, record_01, PAIR, true),
    FORMS("remainder", "RemainderBackward", remainder_backward, record_01, PAIR, true),
    FORMS("fmod_scalar", "FmodBackward", identity_backward, record_nothing, SELF, false),
    FORMS("remainder_scalar", "RemainderBackward", identity_backward, record_nothing, SELF, false),
    FORMS("div_mode", "DivBackward", div_mode_backward, record_01, PAIR, true),
    FORMS("div_scalar_mode", "DivBackward", div_scalar_mode_backward, record_nothing, SELF, false),
    FORMS("pow", "PowBackward", pow_backward, record_01, PAIR, true),
    {"maximum", "MaximumBackward", maximum_backward, record_01, PAIR, false},
    {"minimum", "MinimumBackward", minimum_backward, record_01, PAIR, false},
    {"where", "WhereBackward", where_backward, record_self, 0x6, false},
    FORMS("masked_fill", "MaskedFillBackward", masked_fill_backward, record_other, SELF, false),
    FORMS("lerp", "LerpBackward", lerp_backward, record_012, 0x7, true),
    FORMS("lerp_scalar", "LerpBackward", lerp_backward, record_nothing, PAIR, false),
    FORMS("addcmul", "AddcmulBackward", addcmul_backward, record_12, 0x7, false),
    FORMS("addcdiv", "AddcdivBackward", addcdiv_backward, record_12, 0x7, false),
};

void wa__autograd_register_pointwise(void)
{
    for (size_t i = 0; i < sizeof pointwise_formulas / sizeof pointwise_formulas[0]; i++)
        if (weft_register_kernel(wd__core_registrar, pointwise_formulas[i].op, WEFT_KEY_AUTOGRAD,
                                 WEFT_ALL_BACKENDS, wa__autograd_kernel,
                                 (void *)&pointwise_formulas[i], NULL) < 0)
            fprintf(stderr, "weft: internal error: %s\n", weft_last_error());
    static const char *const dropouts[] = {"dropout", "dropout_"};
    for (size_t i = 0; i < 2; i++)
        if (weft_register_kernel(wd__core_registrar, dropouts[i], WEFT_KEY_AUTOGRAD,
                                 WEFT_ALL_BACKENDS, dropout_autograd_kernel, NULL, NULL) < 0)
            fprintf(stderr, "weft: internal error: %s\n", weft_last_error());
}
