/* autograd/formulas_reduce.c — derivative formulas of the reductions and
 * cumulative operators of the CPU backend issue: amax/amin and the full
 * max/min (the gradient split evenly among ties), max_dim/min_dim and
 * cummax/cummin (the gradient to the index; the indices themselves carry
 * none), cumsum, cumprod (zeros included), logsumexp, norm, var, std and
 * prod (one zero, several zeros), with PyTorch's rules.  The results a
 * formula needs are recomputed from the saved input rather than saved:
 * in-place forms then need only the old self, and under create_graph the
 * recomputation is recorded, so every formula differentiates again. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "autograd/formula_helpers.h"

/* ------------------------------------------------------------ records */

static int record_self(wf_node *n, const weft_call *call, weft_tensor *result, weft_tensor *old)
{
    (void)result;
    return wa__record_args(n, call, old, 0x1);
}

static int record_nothing(wf_node *n, const weft_call *call, weft_tensor *result, weft_tensor *old)
{
    (void)result;
    return wa__record_args(n, call, old, 0x0);
}

/* max_dim, min_dim, cummax, cummin: the indices (the second result) */
static int record_indices(wf_node *n, const weft_call *call, weft_tensor *result, weft_tensor *old)
{
    TRY(wa__record_args(n, call, old, 0x0));
    return wa__node_save(n, 1, call->rets[1].u.tensor, result);
}

/* ------------------------------------------------------------ helpers */

static weft_tensor *saved_self(scratch *s, wf_node *n)
{
    if (s->rc < 0)
        return NULL;
    weft_tensor *t = wa__node_saved(n, 0);
    if (!t)
        s->rc = WEFT_EINVAL;
    return t;
}

/* The reduced dims of argument `arg` (None: all), as a list. */
static int reduced_dims(const wf_node *n, int arg, int64_t *dims)
{
    const int64_t *sizes;
    int ndim;
    weft_dtype dtype;
    shape_of(n, 0, &sizes, &ndim, &dtype);
    uint64_t mask = ~0ULL;
    if (arg >= 0 && !arg_is_none(n, arg)) {
        int64_t bits = arg_int(n, arg);
        memcpy(&mask, &bits, sizeof mask);
    }
    int nd = 0;
    for (int d = 0; d < ndim; d++)
        if ((mask >> d) & 1)
            dims[nd++] = d;
    return nd;
}

/* g with the reduced dims restored as size 1, so that it broadcasts
 * against self */
static weft_tensor *unreduce(scratch *s, const wf_node *n, weft_tensor *g, const int64_t *dims,
                             int nd)
{
    const int64_t *sizes;
    int ndim;
    weft_dtype dtype;
    shape_of(n, 0, &sizes, &ndim, &dtype);
    int64_t kept[WEFT_MAX_DIMS];
    for (int d = 0; d < ndim; d++)
        kept[d] = sizes[d];
    for (int i = 0; i < nd; i++)
        kept[dims[i]] = 1;
    return SC(s, weft_reshape, g, kept, ndim);
}

static int self_ndim(const wf_node *n)
{
    const int64_t *sizes;
    int ndim;
    weft_dtype dtype;
    shape_of(n, 0, &sizes, &ndim, &dtype);
    return ndim;
}

static int wrapped_dim(const wf_node *n, int arg)
{
    int ndim = self_ndim(n);
    int64_t d = arg_int(n, arg);
    return (int)(d < 0 ? d + (ndim ? ndim : 1) : d);
}

static weft_tensor *scalar_like(scratch *s, weft_tensor *t, double v)
{
    return SC(s, wa__scalar_like, t, v);
}

/* g / count where x equals the reduced value r (broadcast), else 0 */
static weft_tensor *split_among_ties(scratch *s, weft_tensor *hit, weft_tensor *gk,
                                     const int64_t *dims, int nd, weft_tensor *like)
{
    weft_tensor *m = SC(s, wa__as_dtype_of, hit, like);
    weft_tensor *count = SC(s, weft_sum, m, dims, nd, true);
    weft_tensor *share = SC(s, weft_div, gk, count);
    weft_tensor *zero = scalar_like(s, like, 0.0);
    return SC(s, weft_where, hit, share, zero);
}

/* ------------------------------------------------------------ formulas */

/* amax/amin(self, dim, keepdim), max(self), min(self): evenly among ties */
static int extreme_backward(wf_node *n, weft_tensor **go, weft_tensor **gi, bool max, int dim_arg)
{
    scratch s = {0};
    int64_t dims[WEFT_MAX_DIMS];
    int nd = reduced_dims(n, dim_arg, dims);
    weft_tensor *x = saved_self(&s, n);
    if (self_ndim(n) == 0) {
        sc_grad(&s, n, gi, 0, 0, go[0]);
        return sc_end(&s);
    }
    weft_tensor *r = max ? SC(&s, weft_amax, x, dims, nd, true) : SC(&s, weft_amin, x, dims, nd, true);
    weft_tensor *hit = SC(&s, weft_eq, x, r);
    weft_tensor *gk = unreduce(&s, n, go[0], dims, nd);
    sc_grad(&s, n, gi, 0, 0, split_among_ties(&s, hit, gk, dims, nd, gk));
    return sc_end(&s);
}

static int amax_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return extreme_backward(n, go, gi, true, 1);
}

static int amin_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return extreme_backward(n, go, gi, false, 1);
}

static int max_all_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return extreme_backward(n, go, gi, true, -1);
}

static int min_all_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return extreme_backward(n, go, gi, false, -1);
}

/* max_dim/min_dim (keepdim: argument 2) and cummax/cummin: the gradient
 * goes to the position each value came from */
static int indexed_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    scratch s = {0};
    if (self_ndim(n) == 0) {
        sc_grad(&s, n, gi, 0, 0, go[0]);
        return sc_end(&s);
    }
    int d = wrapped_dim(n, 1);
    bool squeezed = n->info[n->n_info - 1] > 2 && !arg_int(n, 2); /* max_dim's keepdim false */
    weft_tensor *idx = wa__node_saved(n, 1);
    if (!idx)
        return WEFT_EINVAL;
    weft_tensor *g = squeezed ? SC(&s, weft_unsqueeze, go[0], d) : go[0];
    weft_tensor *ik = squeezed ? SC(&s, weft_unsqueeze, idx, d) : idx;
    const int64_t *sizes;
    int ndim;
    weft_dtype dtype;
    shape_of(n, 0, &sizes, &ndim, &dtype);
    weft_tensor *zeros = SC(&s, weft_zeros, sizes, ndim, (weft_dtype)go[0]->dtype, go[0]->device);
    sc_grad(&s, n, gi, 0, 0, SC(&s, weft_scatter_add, zeros, d, ik, g));
    return sc_end(&s);
}

/* sum from the end along d: flip, cumsum, flip */
static weft_tensor *reverse_cumsum(scratch *s, weft_tensor *t, int64_t d)
{
    weft_tensor *f = SC(s, weft_flip, t, &d, 1);
    weft_tensor *c = SC(s, weft_cumsum, f, d);
    return SC(s, weft_flip, c, &d, 1);
}

static int cumsum_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    scratch s = {0};
    weft_tensor *r = self_ndim(n) == 0 ? go[0] : reverse_cumsum(&s, go[0], wrapped_dim(n, 1));
    sc_grad(&s, n, gi, 0, 0, r);
    return sc_end(&s);
}

/* cumprod: out_k = prod_{j<=k} x_j, so dx_i = sum_{k>=i} g_k prod_{j<=k, j!=i} x_j.
 * Before the first zero of a slice that is revcumsum(g out)_i / x_i; at the
 * first zero z it is revcumsum(g P)_z with P the cumprod of x with that one
 * zero replaced by 1 (later zeros still zero the terms past them); after
 * it, every term holds the first zero: 0.  The divisor has its zeros
 * replaced by 1, so the branch not taken stays finite under double
 * backward. */
static int cumprod_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    scratch s = {0};
    if (self_ndim(n) == 0) {
        sc_grad(&s, n, gi, 0, 0, go[0]);
        return sc_end(&s);
    }
    int64_t d = wrapped_dim(n, 1);
    weft_tensor *x = saved_self(&s, n);
    weft_tensor *g = go[0];
    if (s.rc == 0 && g->dtype != x->dtype)
        g = SC(&s, weft_to_dtype, go[0], (weft_dtype)x->dtype);
    weft_tensor *z = SC(&s, weft_eq_scalar, x, 0.0);
    weft_tensor *zf = SC(&s, wa__as_dtype_of, z, x);
    weft_tensor *zeros_so_far = SC(&s, weft_cumsum, zf, d);
    weft_tensor *before = SC(&s, weft_eq_scalar, zeros_so_far, 0.0);
    weft_tensor *one_so_far = SC(&s, weft_eq_scalar, zeros_so_far, 1.0);
    weft_tensor *first = SC(&s, weft_logical_and, z, one_so_far);
    weft_tensor *one = scalar_like(&s, x, 1.0), *zero = scalar_like(&s, x, 0.0);
    weft_tensor *x_safe = SC(&s, weft_where, z, one, x);
    weft_tensor *out = SC(&s, weft_cumprod, x, d);
    weft_tensor *gout = SC(&s, weft_mul, g, out);
    weft_tensor *rs = reverse_cumsum(&s, gout, d);
    weft_tensor *a = SC(&s, weft_div, rs, x_safe);
    weft_tensor *x_first = SC(&s, weft_where, first, one, x);
    weft_tensor *p = SC(&s, weft_cumprod, x_first, d);
    weft_tensor *gp = SC(&s, weft_mul, g, p);
    weft_tensor *b = reverse_cumsum(&s, gp, d);
    weft_tensor *at_first = SC(&s, weft_where, first, b, zero);
    sc_grad(&s, n, gi, 0, 0, SC(&s, weft_where, before, a, at_first));
    return sc_end(&s);
}

/* logsumexp: g exp(x - logsumexp(x)) */
static int logsumexp_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    scratch s = {0};
    int64_t dims[WEFT_MAX_DIMS];
    int nd = reduced_dims(n, 1, dims);
    weft_tensor *x = saved_self(&s, n);
    weft_tensor *r = SC(&s, weft_logsumexp, x, dims, nd, true);
    weft_tensor *c = SC(&s, weft_sub, x, r);
    weft_tensor *e = SC(&s, weft_exp, c);
    weft_tensor *gk = self_ndim(n) ? unreduce(&s, n, go[0], dims, nd) : go[0];
    sc_grad(&s, n, gi, 0, 0, SC(&s, weft_mul, gk, e));
    return sc_end(&s);
}

/* norm(self, p, dim, keepdim), PyTorch's cases: p = 0: 0; p = 1: g sign(x);
 * p = +-inf: g sign(x) split evenly among the entries whose |x| is the
 * norm; otherwise sign(x) |x|^(p-1) g / norm^(p-1), with 0 where the norm
 * is 0 (the subgradient at 0), x |x|^(p-2) for p >= 2 and, for p < 1,
 * 0 where x is 0. */
static int norm_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    scratch s = {0};
    int64_t dims[WEFT_MAX_DIMS];
    int nd = reduced_dims(n, 2, dims);
    double p = arg_is_none(n, 1) ? 2.0 : arg_num(n, 1);
    weft_tensor *x = saved_self(&s, n);
    weft_tensor *g = go[0];
    if (s.rc == 0 && g->dtype != x->dtype)
        g = SC(&s, weft_to_dtype, go[0], (weft_dtype)x->dtype);
    weft_tensor *gk = self_ndim(n) ? unreduce(&s, n, g, dims, nd) : g;
    weft_tensor *sg = SC(&s, weft_sign, x);
    weft_tensor *res = NULL;
    if (p == 0) {
        weft_tensor *z = SC(&s, weft_mul_scalar, x, 0.0);
        res = SC(&s, weft_mul, z, gk);
    } else if (p == 1) {
        res = SC(&s, weft_mul, sg, gk);
    } else {
        weft_tensor *r = SC(&s, weft_norm, x, &p, dims, nd, true);
        if (isinf(p)) {
            weft_tensor *a = SC(&s, weft_abs, x);
            weft_tensor *hit = SC(&s, weft_eq, a, r);
            weft_tensor *share = split_among_ties(&s, hit, gk, dims, nd, x);
            res = SC(&s, weft_mul, sg, share);
        } else {
            weft_tensor *a = SC(&s, weft_abs, x);
            weft_tensor *r0 = SC(&s, weft_eq_scalar, r, 0.0);
            weft_tensor *one = scalar_like(&s, x, 1.0), *zero = scalar_like(&s, x, 0.0);
            weft_tensor *r_safe = SC(&s, weft_where, r0, one, r);
            weft_tensor *scaled;
            if (p < 2) {
                weft_tensor *ap = SC(&s, weft_pow_scalar, a, p - 1);
                scaled = SC(&s, weft_mul, sg, ap);
                if (p < 1) {
                    weft_tensor *x0 = SC(&s, weft_eq_scalar, x, 0.0);
                    scaled = SC(&s, weft_where, x0, zero, scaled);
                }
            } else {
                weft_tensor *ap = p == 2 ? NULL : SC(&s, weft_pow_scalar, a, p - 2);
                scaled = p == 2 ? x : SC(&s, weft_mul, x, ap);
            }
            weft_tensor *rp = p == 2 ? r_safe : SC(&s, weft_pow_scalar, r_safe, p - 1);
            weft_tensor *v = SC(&s, weft_div, gk, rp);
            weft_tensor *vm = SC(&s, weft_where, r0, zero, v);
            res = SC(&s, weft_mul, scaled, vm);
        }
    }
    sc_grad(&s, n, gi, 0, 0, res);
    return sc_end(&s);
}

/* var(self, dim, correction, keepdim): g 2 (x - mean) / (N - correction);
 * std: the same with g / (2 std), 0 where std is 0 (PyTorch masks it). */
static int var_std_backward(wf_node *n, weft_tensor **go, weft_tensor **gi, bool std)
{
    scratch s = {0};
    int64_t dims[WEFT_MAX_DIMS];
    int nd = reduced_dims(n, 1, dims);
    const int64_t *sizes;
    int ndim;
    weft_dtype dtype;
    shape_of(n, 0, &sizes, &ndim, &dtype);
    double count = 1;
    for (int i = 0; i < nd; i++)
        count *= (double)sizes[dims[i]];
    double correction = arg_is_none(n, 2) ? 1.0 : arg_num(n, 2);
    weft_tensor *x = saved_self(&s, n);
    weft_tensor *gk = ndim ? unreduce(&s, n, go[0], dims, nd) : go[0];
    if (std) {
        weft_tensor *r = SC(&s, weft_std_ex, x, dims, nd, &correction, true);
        weft_tensor *r0 = SC(&s, weft_eq_scalar, r, 0.0);
        weft_tensor *one = scalar_like(&s, x, 1.0), *zero = scalar_like(&s, x, 0.0);
        weft_tensor *r_safe = SC(&s, weft_where, r0, one, r);
        weft_tensor *q = SC(&s, weft_div, gk, r_safe);
        weft_tensor *h = SC(&s, weft_mul_scalar, q, 0.5);
        gk = SC(&s, weft_where, r0, zero, h);
    }
    weft_tensor *mean = ndim ? SC(&s, weft_mean, x, dims, nd, true) : x;
    weft_tensor *c = SC(&s, weft_sub, x, mean);
    weft_tensor *gc = SC(&s, weft_mul, gk, c);
    sc_grad(&s, n, gi, 0, 0, SC(&s, weft_mul_scalar, gc, 2.0 / (count - correction)));
    return sc_end(&s);
}

static int var_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return var_std_backward(n, go, gi, false);
}

static int std_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return var_std_backward(n, go, gi, true);
}

/* prod: with no zero in a slice, g prod / x_i; with exactly one, the zero
 * gets g times the product of the others and the rest 0; with two or more,
 * 0 everywhere (PyTorch).  The product of the non-zero entries covers the
 * first two cases; the divisor has its zeros replaced by 1. */
static int prod_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    scratch s = {0};
    int64_t dims[WEFT_MAX_DIMS];
    int nd = reduced_dims(n, 1, dims);
    weft_tensor *x = saved_self(&s, n);
    weft_tensor *g = go[0];
    if (s.rc == 0 && g->dtype != x->dtype)
        g = SC(&s, weft_to_dtype, go[0], (weft_dtype)x->dtype);
    if (self_ndim(n) == 0) {
        sc_grad(&s, n, gi, 0, 0, g);
        return sc_end(&s);
    }
    weft_tensor *gk = unreduce(&s, n, g, dims, nd);
    weft_tensor *z = SC(&s, weft_eq_scalar, x, 0.0);
    weft_tensor *zf = SC(&s, wa__as_dtype_of, z, x);
    weft_tensor *zeros = SC(&s, weft_sum, zf, dims, nd, true);
    weft_tensor *one = scalar_like(&s, x, 1.0), *zero = scalar_like(&s, x, 0.0);
    weft_tensor *x_safe = SC(&s, weft_where, z, one, x);
    weft_tensor *others = SC(&s, weft_prod, x_safe, dims, nd, true);
    weft_tensor *no_zero = SC(&s, weft_eq_scalar, zeros, 0.0);
    weft_tensor *one_zero = SC(&s, weft_eq_scalar, zeros, 1.0);
    weft_tensor *the_zero = SC(&s, weft_logical_and, z, one_zero);
    weft_tensor *a = SC(&s, weft_div, others, x_safe);
    weft_tensor *b = SC(&s, weft_where, the_zero, others, zero);
    weft_tensor *d = SC(&s, weft_where, no_zero, a, b);
    sc_grad(&s, n, gi, 0, 0, SC(&s, weft_mul, gk, d));
    return sc_end(&s);
}

/* in-place random fills (bernoulli_, random_): like fill_, the old value
 * gets no gradient, and the result has a new history that passes none */
static int overwritten_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    (void)n;
    (void)go;
    (void)gi;
    return 0;
}

/* ------------------------------------------------------------ the table */

static const formula reduce_formulas[] = {
    {"amax", "AmaxBackward", amax_backward, record_self, 0x1, false},
    {"amin", "AminBackward", amin_backward, record_self, 0x1, false},
    {"max", "MaxBackward", max_all_backward, record_self, 0x1, false},
    {"min", "MinBackward", min_all_backward, record_self, 0x1, false},
    {"max_dim", "MaxBackward", indexed_backward, record_indices, 0x1, false},
    {"min_dim", "MinBackward", indexed_backward, record_indices, 0x1, false},
    {"cummax", "CummaxBackward", indexed_backward, record_indices, 0x1, false},
    {"cummin", "CumminBackward", indexed_backward, record_indices, 0x1, false},
    {"cumsum", "CumsumBackward", cumsum_backward, record_nothing, 0x1, false},
    {"cumsum_", "CumsumBackward", cumsum_backward, record_nothing, 0x1, false},
    {"cumprod", "CumprodBackward", cumprod_backward, record_self, 0x1, false},
    {"cumprod_", "CumprodBackward", cumprod_backward, record_self, 0x1, true},
    {"logsumexp", "LogsumexpBackward", logsumexp_backward, record_self, 0x1, false},
    /* a plugin layout's norm records its own node (the sparse one's is
     * made of differentiable operators on the values) */
    {"norm", "NormBackward", norm_backward, record_self, 0x1, false, true},
    {"var", "VarBackward", var_backward, record_self, 0x1, false},
    {"std", "StdBackward", std_backward, record_self, 0x1, false},
    {"prod", "ProdBackward", prod_backward, record_self, 0x1, false},
    /* random fills in place: a new history passing no gradient (not the
     * old one kept, which would pass a gradient the write destroyed);
     * bernoulli_tensor_'s p gets none either (PyTorch: zero) */
    {"bernoulli_", "BernoulliBackward", overwritten_backward, record_nothing, 0, false},
    {"bernoulli_tensor_", "BernoulliBackward", overwritten_backward, record_nothing, 0, false},
    {"random_", "RandomBackward", overwritten_backward, record_nothing, 0, false},
};

void wa__autograd_register_reduce(void)
{
    for (size_t i = 0; i < sizeof reduce_formulas / sizeof reduce_formulas[0]; i++)
        if (weft_register_kernel(wd__core_registrar, reduce_formulas[i].op, WEFT_KEY_AUTOGRAD,
                                 WEFT_ALL_BACKENDS, wa__autograd_kernel,
                                 (void *)&reduce_formulas[i], NULL) < 0)
            fprintf(stderr, "weft: internal error: %s\n", weft_last_error());
}
