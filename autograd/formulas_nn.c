/* autograd/formulas_nn.c — derivative formulas of the neural-network
 * operators (issue 3, parts 2 and B): addmm and the vector and batched
 * products, softmax, the fused losses, convolution (and transposed
 * convolution), pooling and upsampling.  Each backward is written with weft
 * operators, mostly the *_backward operators of the operator table, so it
 * runs on any device that has them.  Double backward: the formulas of the
 * backward operators themselves are in formulas_nn_grad.c; batch_norm and
 * layer_norm, whose backward operators are fused kernels, compute their
 * gradients with weft operators under create_graph instead.
 * Composite operators (linear, conv1d, max_pool2d, the elementwise losses)
 * need nothing here: their parts record the graph. */
#include <stdio.h>
#include <string.h>

#include "autograd/formula_helpers.h"

static const weft_tensor *optional_arg(const weft_call *call, int i)
{
    return call->args[i].tag == WEFT_VALUE_TENSOR ? call->args[i].u.tensor : NULL;
}

/* An int[] argument of one or two entries as a pair (empty: fallback). */
static void pair_of(const weft_value *v, const int64_t *fallback, int64_t *pair)
{
    if (v->tag != WEFT_VALUE_INT_LIST || v->len == 0) {
        pair[0] = fallback[0];
        pair[1] = fallback[1];
    } else {
        pair[0] = v->u.ints[0];
        pair[1] = v->u.ints[v->len - 1];
    }
}

/* ------------------------------------------------------------ addmm */

/* addmm(self, mat1, mat2, *, beta, alpha): saves mat1, mat2; scalar alpha;
 * info: self's shape, then beta's bits */
static int record_addmm(wf_node *n, const weft_call *call, weft_tensor *result,
                        weft_tensor *old_self)
{
    (void)old_self;
    const weft_tensor *self = call->args[0].u.tensor;
    TRY(store_shapes(n, &self, 1));
    double beta = call->args[3].tag == WEFT_VALUE_INT ? (double)call->args[3].u.i : call->args[3].u.d;
    int64_t bits;
    memcpy(&bits, &beta, sizeof bits);
    TRY(append_info(n, &bits, 1));
    n->scalar = call->args[4].tag == WEFT_VALUE_INT ? (double)call->args[4].u.i : call->args[4].u.d;
    TRY(wa__node_save(n, 0, call->args[1].u.tensor, result));
    return wa__node_save(n, 1, call->args[2].u.tensor, result);
}

/* d self = beta G (summed to self's shape); d mat1 = alpha G mat2^T;
 * d mat2 = alpha mat1^T G */
static int addmm_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    weft_tensor *a = saved(n, 0, &rc), *b = saved(n, 1, &rc), *t = NULL, *p = NULL;
    if (rc < 0)
        return rc;
    double alpha = n->scalar, beta;
    memcpy(&beta, &n->info[n->n_info - 1], sizeof beta);
    /* beta 1 (every linear's bias): the gradient as it is, not a copy
     * scaled by one */
    if (wants(n, 0) && beta == 1) {
        rc = fit_grad(&gi[0], n, 0, go[0]);
    } else if (wants(n, 0) && (rc = weft_mul_scalar(&p, go[0], beta)) == 0) {
        rc = fit_grad(&gi[0], n, 0, p);
        weft_tensor_release(p);
        p = NULL;
    }
    if (rc == 0 && wants(n, 1) && (rc = weft_t(&t, b)) == 0) {
        if ((rc = weft_mm(&p, go[0], t)) == 0)
            rc = alpha == 1 ? (gi[1] = weft_tensor_retain(p), 0) : weft_mul_scalar(&gi[1], p, alpha);
        weft_tensor_release(t);
        weft_tensor_release(p);
        t = p = NULL;
    }
    if (rc == 0 && wants(n, 2)) {
        /* mat2 stored transposed (linear's weight.t()): (G^T mat1)^T, the
         * same products, so that the gradient reaching the weight through
         * t()'s backward is contiguous like the weight — a transposed
         * gradient made every optimizer step a strided, unvectorized pass
         * (PyTorch's mm_mat2_backward does the same) */
        const int64_t *bs = weft_tensor_strides(b);
        bool transposed = weft_tensor_ndim(b) == 2 && weft_tensor_size(b, 0) > 1 &&
                          weft_tensor_size(b, 1) > 1 && bs[0] == 1 &&
                          bs[1] == weft_tensor_size(b, 0);
        weft_tensor *q = NULL;
        if (transposed) {
            if ((rc = weft_t(&t, go[0])) == 0 && (rc = weft_mm(&q, t, a)) == 0)
                rc = weft_t(&p, q);
        } else if ((rc = weft_t(&t, a)) == 0) {
            rc = weft_mm(&p, t, go[0]);
        }
        if (rc == 0)
            rc = alpha == 1 ? (gi[2] = weft_tensor_retain(p), 0) : weft_mul_scalar(&gi[2], p, alpha);
        weft_tensor_release(q);
        weft_tensor_release(t);
        weft_tensor_release(p);
    }
    return rc;
}

/* ------------------------------------------------------------ softmax */

/* softmax / log_softmax (self, dim): saves the output; info: dim */
static int record_softmax(wf_node *n, const weft_call *call, weft_tensor *result,
                          weft_tensor *old_self)
{
    (void)old_self;
    n->info = wf__malloc(sizeof(int64_t));
    if (!n->info)
        return wf__errorf(WEFT_ENOMEM, "out of memory recording a node");
    n->info[0] = call->args[1].u.i;
    n->n_info = 1;
    return wa__node_save(n, 0, result, result);
}

static int softmax_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    weft_tensor *y = saved(n, 0, &rc);
    if (rc < 0)
        return rc;
    if (wa__grad_enabled()) /* create_graph: a differentiable composition */
        return wa__softmax_backward_composite(&gi[0], go[0], y, n->info[0], false);
    return weft__softmax_backward_data(&gi[0], go[0], y, n->info[0]);
}

static int log_softmax_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    weft_tensor *y = saved(n, 0, &rc);
    if (rc < 0)
        return rc;
    if (wa__grad_enabled()) /* create_graph: a differentiable composition */
        return wa__softmax_backward_composite(&gi[0], go[0], y, n->info[0], true);
    return weft__log_softmax_backward_data(&gi[0], go[0], y, n->info[0]);
}

/* ------------------------------------------------------------ losses */

static const char *const reduction_names[] = {"none", "mean", "sum"};

/* nll_loss / cross_entropy (self, target, weight?, reduction, ignore_index
 * [, label_smoothing]): saves self, target and weight; info: reduction,
 * ignore_index, label_smoothing's bits.  Gradients for the target (class
 * probabilities) and the weight are not provided: asking for them is an
 * error rather than a silent zero. */
static int record_loss(wf_node *n, const weft_call *call, weft_tensor *result,
                       weft_tensor *old_self)
{
    (void)old_self;
    const char *op = call->op->schema.name;
    for (int i = 1; i <= 2; i++)
        if (optional_arg(call, i) && wa__requires_grad(optional_arg(call, i)))
            return wf__errorf(WEFT_ENOTSUP, "%s: the derivative for '%s' is not implemented", op,
                              i == 1 ? "target" : "weight");
    const char *reduction = call->args[3].u.string;
    int64_t info[3] = {0, call->args[4].u.i, 0};
    for (int64_t r = 0; r < 3; r++)
        if (reduction && strcmp(reduction, reduction_names[r]) == 0)
            info[0] = r;
    double smoothing = call->nargs > 5 ? call->args[5].u.d : 0.0;
    memcpy(&info[2], &smoothing, sizeof smoothing);
    TRY(wa__node_set_info(n, info, (int)(sizeof info / sizeof *info)));
    n->flag = optional_arg(call, 2) != NULL;
    TRY(wa__node_save(n, 0, call->args[0].u.tensor, result));
    TRY(wa__node_save(n, 1, call->args[1].u.tensor, result));
    return n->flag ? wa__node_save(n, 2, optional_arg(call, 2), result) : 0;
}

static int loss_backward(wf_node *n, weft_tensor **go, weft_tensor **gi, bool logits)
{
    int rc = 0;
    weft_tensor *self = saved(n, 0, &rc), *target = saved(n, 1, &rc);
    weft_tensor *weight = n->flag ? saved(n, 2, &rc) : NULL;
    if (rc < 0)
        return rc;
    const char *reduction = reduction_names[n->info[0]];
    double smoothing;
    memcpy(&smoothing, &n->info[2], sizeof smoothing);
    if (wa__grad_enabled()) /* create_graph: a differentiable composition */
        return wa__loss_backward_composite(&gi[0], go[0], self, target, weight, reduction,
                                           n->info[1], smoothing, logits);
    if (logits)
        return weft_cross_entropy_backward(&gi[0], go[0], self, target, weight, reduction,
                                           n->info[1], smoothing);
    return weft_nll_loss_backward(&gi[0], go[0], self, target, weight, reduction, n->info[1]);
}

static int nll_loss_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return loss_backward(n, go, gi, false);
}

static int cross_entropy_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return loss_backward(n, go, gi, true);
}

/* ------------------------------------------------------------ conv2d */

/* conv2d(input, weight, bias?, stride, padding, dilation, groups): saves
 * input and weight; info: stride, padding, dilation (pairs), groups, and
 * whether there is a bias */
static int record_conv2d(wf_node *n, const weft_call *call, weft_tensor *result,
                         weft_tensor *old_self)
{
    (void)old_self;
    static const int64_t zero[2] = {0, 0};
    int64_t info[8];
    for (int i = 0; i < 3; i++)
        pair_of(&call->args[3 + i], zero, &info[2 * i]);
    info[6] = call->args[6].u.i;
    info[7] = optional_arg(call, 2) != NULL;
    TRY(wa__node_set_info(n, info, (int)(sizeof info / sizeof *info)));
    TRY(wa__node_save(n, 0, call->args[0].u.tensor, result));
    return wa__node_save(n, 1, call->args[1].u.tensor, result);
}

static int conv2d_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    weft_tensor *input = saved(n, 0, &rc), *weight = saved(n, 1, &rc);
    if (rc < 0)
        return rc;
    const int64_t *s = n->info, *p = n->info + 2, *d = n->info + 4;
    int64_t groups = n->info[6];
    if (wants(n, 0))
        rc = weft_convolution_backward_input(&gi[0], go[0], weight, weft_tensor_sizes(input),
                                             weft_tensor_ndim(input), s, 2, p, 2, d, 2, groups);
    if (rc == 0 && wants(n, 1))
        rc = weft_convolution_backward_weight(&gi[1], go[0], input, weft_tensor_sizes(weight),
                                              weft_tensor_ndim(weight), s, 2, p, 2, d, 2, groups);
    if (rc == 0 && n->info[7] && wants(n, 2)) {
        static const int64_t dims[3] = {0, 2, 3};
        rc = weft_sum(&gi[2], go[0], dims, 3, false);
    }
    return rc;
}

/* ------------------------------------------------------------ pooling */

/* max_pool2d_with_indices: saves self and the indices */
static int record_max_pool(wf_node *n, const weft_call *call, weft_tensor *result,
                           weft_tensor *old_self)
{
    (void)old_self;
    TRY(wa__node_save(n, 0, call->args[0].u.tensor, result));
    return wa__node_save(n, 1, call->rets[1].u.tensor, result);
}

static int max_pool_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    weft_tensor *self = saved(n, 0, &rc), *indices = saved(n, 1, &rc);
    if (rc < 0)
        return rc;
    return weft_max_pool2d_with_indices_backward(&gi[0], go[0], self, indices);
}

/* avg_pool2d(self, kernel_size, stride, padding, ceil_mode,
 * count_include_pad, divisor_override): saves self; info: kernel, stride,
 * padding (pairs), ceil_mode, count_include_pad, whether there is a
 * divisor, the divisor */
static int record_avg_pool(wf_node *n, const weft_call *call, weft_tensor *result,
                           weft_tensor *old_self)
{
    (void)old_self;
    static const int64_t zero[2] = {0, 0};
    const weft_value *a = call->args;
    int64_t info[10];
    pair_of(&a[1], zero, &info[0]);
    pair_of(&a[2], &info[0], &info[2]); /* no stride: the kernel size */
    pair_of(&a[3], zero, &info[4]);
    info[6] = a[4].u.b;
    info[7] = a[5].u.b;
    info[8] = a[6].tag == WEFT_VALUE_INT;
    info[9] = info[8] ? a[6].u.i : 0;
    TRY(wa__node_set_info(n, info, (int)(sizeof info / sizeof *info)));
    return wa__node_save(n, 0, a[0].u.tensor, result);
}

static int avg_pool_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    weft_tensor *self = saved(n, 0, &rc);
    if (rc < 0)
        return rc;
    const int64_t *i = n->info;
    return weft_avg_pool2d_backward(&gi[0], go[0], self, i, 2, i + 2, 2, i + 4, 2, i[6], i[7],
                                    i[8] ? &i[9] : NULL);
}

static int record_self(wf_node *n, const weft_call *call, weft_tensor *result,
                       weft_tensor *old_self)
{
    (void)old_self;
    return wa__node_save(n, 0, call->args[0].u.tensor, result);
}

static int adaptive_avg_pool_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    weft_tensor *self = saved(n, 0, &rc);
    if (rc < 0)
        return rc;
    return weft_adaptive_avg_pool2d_backward(&gi[0], go[0], self);
}

/* ------------------------------------------------------------ normalisation */

/* native_batch_norm and native_layer_norm.  Backward calls the fused
 * backward operator; under create_graph (grad mode on while backward runs)
 * it computes the same gradients with weft operators instead, from the
 * saved input, so that they can be differentiated again (the fused
 * backward operators have no formulas of their own). */

typedef struct norm_temps {
    weft_tensor *t[16];
    int n;
} norm_temps;

/* Keeps a temporary for release at the end; NULL on an earlier error. */
static weft_tensor *tmp(norm_temps *k, weft_tensor *t)
{
    if (t && k->n < 16)
        k->t[k->n++] = t;
    return t;
}

static void norm_temps_release(norm_temps *k)
{
    for (int i = 0; i < k->n; i++)
        weft_tensor_release(k->t[i]);
}

/* Scatters the three results of a fused backward into the node's edges:
 * input always, weight and bias where the forward had them. */
static void scatter_norm_grads(wf_node *n, weft_tensor **gi, weft_tensor *r[3], bool has_w,
                               bool has_b)
{
    int e = 0;
    bool present[3] = {true, has_w, has_b};
    for (int i = 0; i < 3; i++) {
        if (present[i] && wants(n, e)) {
            gi[e] = r[i];
            r[i] = NULL;
        }
        e += present[i];
    }
    for (int i = 0; i < 3; i++)
        weft_tensor_release(r[i]);
}

/* The differentiable gradients of a normalisation over `dims` (keepdim
 * statistics mean and r = 1/std), written with weft operators:
 *   gx = r (gw - mean(gw) - xhat mean(gw xhat))   (batch statistics)
 *   gx = r gw                                      (fixed statistics)
 * with gw = g w, xhat = (x - mean) r; dweight = sum(g xhat), dbias = sum(g)
 * over param_dims (the dims the parameters are broadcast along). */
static int norm_grads_composite(const weft_tensor *g, const weft_tensor *x, const weft_tensor *w,
                                const weft_tensor *mean, const weft_tensor *r, bool batch_stats,
                                const int64_t *dims, int ndims, const int64_t *param_dims,
                                int nparam, const int64_t *param_shape, int param_nd,
                                weft_tensor *out[3])
{
    norm_temps k = {{0}, 0};
    weft_tensor *xc = NULL, *xhat = NULL, *gw = NULL, *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    int rc = weft_sub(&xc, x, mean);
    if (rc == 0 && (rc = weft_mul(&xhat, tmp(&k, xc), r)) == 0)
        rc = w ? weft_mul(&gw, g, w) : (gw = weft_tensor_retain((weft_tensor *)g), 0);
    tmp(&k, xhat);
    tmp(&k, gw);
    if (rc == 0 && batch_stats) {
        if ((rc = weft_mean(&a, gw, dims, ndims, true)) == 0 && tmp(&k, a) &&
            (rc = weft_mul(&b, gw, xhat)) == 0 &&
            (rc = weft_mean(&c, tmp(&k, b), dims, ndims, true)) == 0 &&
            (rc = weft_mul(&d, xhat, tmp(&k, c))) == 0) {
            weft_tensor *e = NULL, *f = NULL;
            if ((rc = weft_sub(&e, gw, a)) == 0 && (rc = weft_sub(&f, tmp(&k, e), tmp(&k, d))) == 0)
                rc = weft_mul(&out[0], tmp(&k, f), r);
        }
    } else if (rc == 0) {
        rc = weft_mul(&out[0], gw, r);
    }
    weft_tensor *gx = NULL, *full[2] = {NULL, NULL};
    if (rc == 0 && (rc = weft_mul(&gx, g, xhat)) == 0) {
        const weft_tensor *src[2] = {tmp(&k, gx), g};
        for (int i = 0; i < 2 && rc == 0; i++) {
            rc = nparam ? weft_sum(&full[i], src[i], param_dims, nparam, false)
                        : (full[i] = weft_tensor_retain((weft_tensor *)src[i]), 0);
            if (rc == 0)
                rc = weft_reshape(&out[1 + i], tmp(&k, full[i]), param_shape, param_nd);
        }
    }
    norm_temps_release(&k);
    if (rc < 0)
        for (int i = 0; i < 3; i++) {
            weft_tensor_release(out[i]);
            out[i] = NULL;
        }
    return rc;
}

/* native_batch_norm: saves input, weight, save_mean, save_invstd; info:
 * whether batch statistics were used, eps, has weight, has bias */
static int record_batch_norm(wf_node *n, const weft_call *call, weft_tensor *result,
                             weft_tensor *old_self)
{
    (void)old_self;
    const weft_value *a = call->args;
    double eps = a[7].u.d;
    int64_t info[4];
    info[0] = a[5].u.b || !optional_arg(call, 3) || !optional_arg(call, 4);
    memcpy(&info[1], &eps, sizeof eps);
    info[2] = optional_arg(call, 1) != NULL;
    info[3] = optional_arg(call, 2) != NULL;
    TRY(wa__node_set_info(n, info, (int)(sizeof info / sizeof *info)));
    TRY(wa__node_save(n, 0, a[0].u.tensor, result));
    TRY(wa__node_save(n, 1, optional_arg(call, 1), result));
    TRY(wa__node_save(n, 2, call->rets[1].u.tensor, result));
    return wa__node_save(n, 3, call->rets[2].u.tensor, result);
}

static int batch_norm_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    bool batch_stats = n->info[0], has_w = n->info[2], has_b = n->info[3];
    weft_tensor *x = saved(n, 0, &rc), *mean = saved(n, 2, &rc), *invstd = saved(n, 3, &rc);
    weft_tensor *w = has_w ? saved(n, 1, &rc) : NULL;
    if (rc < 0)
        return rc;
    weft_tensor *r[3] = {NULL, NULL, NULL};
    if (!weft_is_grad_enabled()) {
        rc = weft_native_batch_norm_backward(&r[0], &r[1], &r[2], go[0], x, w, mean, invstd,
                                             batch_stats);
    } else {
        int nd = weft_tensor_ndim(x);
        int64_t dims[WEFT_MAX_DIMS], shape[WEFT_MAX_DIMS], C = weft_tensor_size(x, 1);
        int ndims = 0;
        for (int d = 0; d < nd; d++) {
            shape[d] = d == 1 ? C : 1;
            if (d != 1)
                dims[ndims++] = d;
        }
        norm_temps k = {{0}, 0};
        weft_tensor *m = NULL, *s = NULL, *wv = NULL;
        if (batch_stats) { /* the statistics again, as functions of x */
            weft_tensor *xc = NULL, *sq = NULL, *var = NULL, *ve = NULL;
            double eps;
            memcpy(&eps, &n->info[1], sizeof eps);
            if ((rc = weft_mean(&m, x, dims, ndims, true)) == 0 &&
                (rc = weft_sub(&xc, x, tmp(&k, m))) == 0 &&
                (rc = weft_mul(&sq, tmp(&k, xc), xc)) == 0 &&
                (rc = weft_mean(&var, tmp(&k, sq), dims, ndims, true)) == 0 &&
                (rc = weft_add_scalar(&ve, tmp(&k, var), eps)) == 0)
                rc = weft_rsqrt(&s, tmp(&k, ve));
        } else if ((rc = weft_reshape(&m, mean, shape, nd)) == 0) {
            rc = weft_reshape(&s, invstd, shape, nd);
            tmp(&k, m);
        }
        tmp(&k, s);
        if (rc == 0 && w)
            rc = weft_reshape(&wv, w, shape, nd);
        if (rc == 0)
            rc = norm_grads_composite(go[0], x, tmp(&k, wv), m, s, batch_stats, dims, ndims,
                                      dims, ndims, &C, 1, r);
        norm_temps_release(&k);
    }
    if (rc == 0)
        scatter_norm_grads(n, gi, r, has_w, has_b);
    return rc;
}

/* native_layer_norm: saves input, weight, mean, rstd; info: has weight,
 * has bias, eps, then normalized_shape */
static int record_layer_norm(wf_node *n, const weft_call *call, weft_tensor *result,
                             weft_tensor *old_self)
{
    (void)old_self;
    const weft_value *a = call->args;
    int k = a[1].len;
    double eps = a[4].u.d;
    n->info = wf__malloc((size_t)(3 + k) * sizeof(int64_t));
    if (!n->info)
        return wf__errorf(WEFT_ENOMEM, "out of memory recording a node");
    n->info[0] = optional_arg(call, 2) != NULL;
    n->info[1] = optional_arg(call, 3) != NULL;
    memcpy(&n->info[2], &eps, sizeof eps);
    memcpy(&n->info[3], a[1].u.ints, (size_t)k * sizeof(int64_t));
    n->n_info = 3 + k;
    TRY(wa__node_save(n, 0, a[0].u.tensor, result));
    TRY(wa__node_save(n, 1, optional_arg(call, 2), result));
    TRY(wa__node_save(n, 2, call->rets[1].u.tensor, result));
    return wa__node_save(n, 3, call->rets[2].u.tensor, result);
}

static int layer_norm_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    bool has_w = n->info[0], has_b = n->info[1];
    const int64_t *shape = n->info + 3;
    int k = n->n_info - 3;
    weft_tensor *x = saved(n, 0, &rc), *mean = saved(n, 2, &rc), *rstd = saved(n, 3, &rc);
    weft_tensor *w = has_w ? saved(n, 1, &rc) : NULL;
    if (rc < 0)
        return rc;
    weft_tensor *r[3] = {NULL, NULL, NULL};
    if (!weft_is_grad_enabled()) {
        rc = weft_native_layer_norm_backward(&r[0], &r[1], &r[2], go[0], x, shape, k, mean, rstd,
                                             w);
    } else {
        int nd = weft_tensor_ndim(x);
        int64_t dims[WEFT_MAX_DIMS], lead[WEFT_MAX_DIMS];
        for (int i = 0; i < k; i++)
            dims[i] = nd - k + i;
        for (int i = 0; i < nd - k; i++)
            lead[i] = i;
        double eps;
        memcpy(&eps, &n->info[2], sizeof eps);
        norm_temps t = {{0}, 0};
        weft_tensor *m = NULL, *xc = NULL, *sq = NULL, *var = NULL, *ve = NULL, *s = NULL;
        if ((rc = weft_mean(&m, x, dims, k, true)) == 0 &&
            (rc = weft_sub(&xc, x, tmp(&t, m))) == 0 &&
            (rc = weft_mul(&sq, tmp(&t, xc), xc)) == 0 &&
            (rc = weft_mean(&var, tmp(&t, sq), dims, k, true)) == 0 &&
            (rc = weft_add_scalar(&ve, tmp(&t, var), eps)) == 0 &&
            (rc = weft_rsqrt(&s, tmp(&t, ve))) == 0)
            rc = norm_grads_composite(go[0], x, w, m, tmp(&t, s), true, dims, k, lead, nd - k,
                                      shape, k, r);
        norm_temps_release(&t);
    }
    if (rc == 0)
        scatter_norm_grads(n, gi, r, has_w, has_b);
    return rc;
}

/* ------------------------------------ products, conv_transpose2d, upsample
 * (issue 3, part B).  The products' formulas use only differentiable
 * operators (mul, mm, bmm, mv, outer, views), so they differentiate twice. */

/* t * alpha into *out (t itself when alpha is 1); consumes t */
static int scaled(weft_tensor **out, weft_tensor *t, double alpha)
{
    int rc = 0;
    if (alpha == 1)
        *out = weft_tensor_retain(t);
    else
        rc = weft_mul_scalar(out, t, alpha);
    weft_tensor_release(t);
    return rc;
}

/* dot, vdot, mv (self, other): saves both.  Complex gradients need a
 * conjugation operator, which weft does not have yet: refused. */
static int record_two(wf_node *n, const weft_call *call, weft_tensor *result,
                      weft_tensor *old_self)
{
    (void)old_self;
    for (int i = 0; i < 2; i++)
        if (weft_dtype_is_complex(weft_tensor_dtype(call->args[i].u.tensor)))
            return wf__errorf(WEFT_ENOTSUP, "%s: the derivative for complex inputs is not "
                              "implemented", call->op->schema.name);
    TRY(wa__node_save(n, 0, call->args[0].u.tensor, result));
    return wa__node_save(n, 1, call->args[1].u.tensor, result);
}

/* d self = G other, d other = G self (G is 0-d) */
static int dot_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    weft_tensor *a = saved(n, 0, &rc), *b = saved(n, 1, &rc);
    if (rc == 0 && wants(n, 0))
        rc = weft_mul(&gi[0], go[0], b);
    if (rc == 0 && wants(n, 1))
        rc = weft_mul(&gi[1], go[0], a);
    return rc;
}

/* d self = outer(G, vec), d vec = self^T G */
static int mv_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    weft_tensor *a = saved(n, 0, &rc), *v = saved(n, 1, &rc), *t = NULL;
    if (rc == 0 && wants(n, 0))
        rc = weft_outer(&gi[0], go[0], v);
    if (rc == 0 && wants(n, 1) && (rc = weft_t(&t, a)) == 0)
        rc = weft_mv(&gi[1], t, go[0]);
    weft_tensor_release(t);
    return rc;
}

/* baddbmm / addbmm (self, batch1, batch2, *, beta, alpha), recorded as
 * addmm is.  d self = beta G; with G' = G (baddbmm) or G expanded over the
 * batches (addbmm): d batch1 = alpha G' batch2^T, d batch2 = alpha batch1^T G' */
static int batched_addmm_backward(wf_node *n, weft_tensor **go, weft_tensor **gi, bool summed)
{
    int rc = 0;
    weft_tensor *a = saved(n, 0, &rc), *b = saved(n, 1, &rc), *g = NULL, *t = NULL, *p = NULL;
    if (rc < 0)
        return rc;
    double alpha = n->scalar, beta;
    memcpy(&beta, &n->info[n->n_info - 1], sizeof beta);
    if (wants(n, 0) && (rc = weft_mul_scalar(&p, go[0], beta)) == 0) {
        rc = fit_grad(&gi[0], n, 0, p);
        weft_tensor_release(p);
    }
    if (rc == 0 && summed) {
        int64_t shape[3] = {weft_tensor_size(a, 0), weft_tensor_size(go[0], 0),
                            weft_tensor_size(go[0], 1)};
        rc = weft_expand(&g, go[0], shape, 3);
    } else if (rc == 0) {
        g = weft_tensor_retain(go[0]);
    }
    if (rc == 0 && wants(n, 1) && (rc = weft_transpose(&t, b, 1, 2)) == 0 &&
        (rc = weft_bmm(&p, g, t)) == 0)
        rc = scaled(&gi[1], p, alpha);
    weft_tensor_release(t);
    t = NULL;
    if (rc == 0 && wants(n, 2) && (rc = weft_transpose(&t, a, 1, 2)) == 0 &&
        (rc = weft_bmm(&p, t, g)) == 0)
        rc = scaled(&gi[2], p, alpha);
    weft_tensor_release(t);
    weft_tensor_release(g);
    return rc;
}

static int baddbmm_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return batched_addmm_backward(n, go, gi, false);
}

static int addbmm_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return batched_addmm_backward(n, go, gi, true);
}

/* conv_transpose2d(input, weight, bias?, stride, padding, output_padding,
 * groups, dilation): saves input and weight; info: stride, padding,
 * dilation (pairs), groups, whether there is a bias, and the rows and
 * columns output_padding / stride the forward zero-padded the input with
 * (see the CPU kernel).  It is conv2d's input gradient, so d input is
 * conv2d of G (narrowed back to the input's size) and d weight conv2d's
 * weight gradient with the roles of G and the padded input exchanged. */
static int record_conv_transpose2d(wf_node *n, const weft_call *call, weft_tensor *result,
                                   weft_tensor *old_self)
{
    (void)old_self;
    static const int64_t zero[2] = {0, 0}, one[2] = {1, 1};
    int64_t info[10], output_padding[2];
    pair_of(&call->args[3], one, &info[0]);
    pair_of(&call->args[4], zero, &info[2]);
    pair_of(&call->args[7], one, &info[4]);
    info[6] = call->args[6].u.i;
    info[7] = optional_arg(call, 2) != NULL;
    pair_of(&call->args[5], zero, output_padding);
    for (int i = 0; i < 2; i++) /* rows and columns the input is padded with */
        info[8 + i] = output_padding[i] / info[i];
    TRY(wa__node_set_info(n, info, (int)(sizeof info / sizeof *info)));
    TRY(wa__node_save(n, 0, call->args[0].u.tensor, result));
    return wa__node_save(n, 1, call->args[1].u.tensor, result);
}

static int conv_transpose2d_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    weft_tensor *input = saved(n, 0, &rc), *weight = saved(n, 1, &rc);
    if (rc < 0)
        return rc;
    const int64_t *s = n->info, *p = n->info + 2, *d = n->info + 4;
    int64_t groups = n->info[6];
    const int64_t extra_h = n->info[8], extra_w = n->info[9];
    weft_tensor *xp = NULL;
    if (wants(n, 0)) {
        /* conv2d of G has the padded input's size: the zero rows and
         * columns the forward added take no gradient */
        weft_tensor *full = NULL, *rows = NULL;
        rc = weft_conv2d(&full, go[0], weight, NULL, s, 2, p, 2, d, 2, groups);
        if (rc == 0 && (extra_h > 0 || extra_w > 0)) {
            if ((rc = weft_narrow(&rows, full, 2, 0, weft_tensor_size(full, 2) - extra_h)) == 0)
                rc = weft_narrow(&gi[0], rows, 3, 0, weft_tensor_size(full, 3) - extra_w);
            weft_tensor_release(rows);
            weft_tensor_release(full);
        } else if (rc == 0) {
            gi[0] = full;
        }
    }
    if (rc == 0 && wants(n, 1)) {
        if (extra_h > 0 || extra_w > 0) {
            int64_t pad[4] = {0, extra_w, 0, extra_h};
            rc = weft_pad(&xp, input, pad, 4, "constant", NULL);
        }
        if (rc == 0)
            rc = weft_convolution_backward_weight(&gi[1], xp ? xp : input, go[0], weft_tensor_sizes(weight),
                                                  weft_tensor_ndim(weight), s, 2, p, 2, d, 2, groups);
        weft_tensor_release(xp);
    }
    if (rc == 0 && n->info[7] && wants(n, 2)) {
        static const int64_t dims[3] = {0, 2, 3};
        rc = weft_sum(&gi[2], go[0], dims, 3, false);
    }
    return rc;
}

/* upsample_nearest2d(self, output_size, scales_h?, scales_w?) and
 * upsample_bilinear2d(self, output_size, align_corners, scales_h?,
 * scales_w?): info: output size (2), self's sizes (4), align_corners, and
 * per scale whether it was given and its bits */
static int record_upsample(wf_node *n, const weft_call *call, weft_tensor *result,
                           weft_tensor *old_self)
{
    (void)result;
    (void)old_self;
    bool bilinear = call->nargs == 5;
    const weft_tensor *self = call->args[0].u.tensor;
    if (call->args[1].len != 2 || weft_tensor_ndim(self) != 4)
        return wf__errorf(WEFT_EINVAL, "%s: expected a 4-D input and two output sizes",
                          call->op->schema.name);
    int64_t info[11];
    memcpy(info, call->args[1].u.ints, 2 * sizeof(int64_t));
    memcpy(info + 2, weft_tensor_sizes(self), 4 * sizeof(int64_t));
    info[6] = bilinear ? call->args[2].u.b : 0;
    for (int i = 0; i < 2; i++) {
        const weft_value *v = &call->args[(bilinear ? 3 : 2) + i];
        double scale = v->tag == WEFT_VALUE_DOUBLE ? v->u.d : 0;
        info[7 + 2 * i] = v->tag == WEFT_VALUE_DOUBLE;
        memcpy(&info[8 + 2 * i], &scale, sizeof scale);
    }
    TRY(wa__node_set_info(n, info, (int)(sizeof info / sizeof *info)));
    return 0;
}

/* The backward operators are linear in grad_output, and their own
 * derivative is the forward operator: upsample_*2d_backward(grad_output,
 * output_size, input_size, [align_corners,] scales_h?, scales_w?) records
 * the same info as the forward (input_size in place of self's sizes). */
static int record_upsample_grad(wf_node *n, const weft_call *call, weft_tensor *result,
                                weft_tensor *old_self)
{
    (void)result;
    (void)old_self;
    bool bilinear = call->nargs == 6;
    if (call->args[1].len != 2 || call->args[2].len != 4)
        return wf__errorf(WEFT_EINVAL, "%s: expected two output sizes and four input sizes",
                          call->op->schema.name);
    int64_t info[11];
    memcpy(info, call->args[1].u.ints, 2 * sizeof(int64_t));
    memcpy(info + 2, call->args[2].u.ints, 4 * sizeof(int64_t));
    info[6] = bilinear ? call->args[3].u.b : 0;
    for (int i = 0; i < 2; i++) {
        const weft_value *v = &call->args[(bilinear ? 4 : 3) + i];
        double scale = v->tag == WEFT_VALUE_DOUBLE ? v->u.d : 0;
        info[7 + 2 * i] = v->tag == WEFT_VALUE_DOUBLE;
        memcpy(&info[8 + 2 * i], &scale, sizeof scale);
    }
    TRY(wa__node_set_info(n, info, (int)(sizeof info / sizeof *info)));
    return 0;
}

static int upsample_grad_backward(wf_node *n, weft_tensor **go, weft_tensor **gi, bool bilinear)
{
    const int64_t *i = n->info;
    double scales[2];
    memcpy(&scales[0], &i[8], sizeof(double));
    memcpy(&scales[1], &i[10], sizeof(double));
    const double *sh = i[7] ? &scales[0] : NULL, *sw = i[9] ? &scales[1] : NULL;
    if (bilinear)
        return weft_upsample_bilinear2d(&gi[0], go[0], i, 2, i[6], sh, sw);
    return weft_upsample_nearest2d(&gi[0], go[0], i, 2, sh, sw);
}

static int upsample_nearest_grad_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return upsample_grad_backward(n, go, gi, false);
}

static int upsample_bilinear_grad_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return upsample_grad_backward(n, go, gi, true);
}

static int upsample_backward(wf_node *n, weft_tensor **go, weft_tensor **gi, bool bilinear)
{
    const int64_t *i = n->info;
    double scales[2];
    memcpy(&scales[0], &i[8], sizeof(double));
    memcpy(&scales[1], &i[10], sizeof(double));
    const double *sh = i[7] ? &scales[0] : NULL, *sw = i[9] ? &scales[1] : NULL;
    if (bilinear)
        return weft_upsample_bilinear2d_backward(&gi[0], go[0], i, 2, i + 2, 4, i[6], sh, sw);
    return weft_upsample_nearest2d_backward(&gi[0], go[0], i, 2, i + 2, 4, sh, sw);
}

static int upsample_nearest_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return upsample_backward(n, go, gi, false);
}

static int upsample_bilinear_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return upsample_backward(n, go, gi, true);
}

/* ------------------------------------------------------------ the table */

static const formula nn_formulas[] = {
    {"addmm", "AddmmBackward", addmm_backward, record_addmm, 0x7, false, true},
    {"softmax", "SoftmaxBackward", softmax_backward, record_softmax, 0x1, false},
    {"log_softmax", "LogSoftmaxBackward", log_softmax_backward, record_softmax, 0x1, false},
    {"nll_loss", "NllLossBackward", nll_loss_backward, record_loss, 0x1, false},
    {"cross_entropy", "CrossEntropyLossBackward", cross_entropy_backward, record_loss, 0x1, false},
    {"conv2d", "ConvolutionBackward", conv2d_backward, record_conv2d, 0x7, false},
    {"max_pool2d_with_indices", "MaxPool2DWithIndicesBackward", max_pool_backward,
     record_max_pool, 0x1, false},
    {"avg_pool2d", "AvgPool2DBackward", avg_pool_backward, record_avg_pool, 0x1, false},
    {"adaptive_avg_pool2d", "AdaptiveAvgPool2DBackward", adaptive_avg_pool_backward, record_self,
     0x1, false},
    {"native_batch_norm", "NativeBatchNormBackward", batch_norm_backward, record_batch_norm, 0x7,
     false},
    {"native_layer_norm", "NativeLayerNormBackward", layer_norm_backward, record_layer_norm, 0xD,
     false},
    /* issue 3, part B */
    {"dot", "DotBackward", dot_backward, record_two, 0x3, false},
    {"dot_out", "DotBackward", dot_backward, record_two, 0x6, false},
    {"vdot", "VdotBackward", dot_backward, record_two, 0x3, false},
    {"vdot_out", "VdotBackward", dot_backward, record_two, 0x6, false},
    {"mv", "MvBackward", mv_backward, record_two, 0x3, false, true},
    {"mv_out", "MvBackward", mv_backward, record_two, 0x6, false},
    {"baddbmm", "BaddbmmBackward", baddbmm_backward, record_addmm, 0x7, false},
    {"baddbmm_", "BaddbmmBackward", baddbmm_backward, record_addmm, 0x7, false},
    {"baddbmm_out", "BaddbmmBackward", baddbmm_backward, record_addmm, 0xe, false},
    {"addbmm", "AddbmmBackward", addbmm_backward, record_addmm, 0x7, false},
    {"addbmm_", "AddbmmBackward", addbmm_backward, record_addmm, 0x7, false},
    {"addbmm_out", "AddbmmBackward", addbmm_backward, record_addmm, 0xe, false},
    {"conv_transpose2d", "ConvolutionBackward", conv_transpose2d_backward,
     record_conv_transpose2d, 0x7, false},
    {"upsample_nearest2d", "UpsampleNearest2DBackward", upsample_nearest_backward,
     record_upsample, 0x1, false},
    {"upsample_bilinear2d", "UpsampleBilinear2DBackward", upsample_bilinear_backward,
     record_upsample, 0x1, false},
    {"upsample_nearest2d_backward", "UpsampleNearest2DBackwardBackward",
     upsample_nearest_grad_backward, record_upsample_grad, 0x1, false},
    {"upsample_bilinear2d_backward", "UpsampleBilinear2DBackwardBackward",
     upsample_bilinear_grad_backward, record_upsample_grad, 0x1, false},
};

void wa__autograd_register_nn(void)
{
    for (size_t i = 0; i < sizeof nn_formulas / sizeof nn_formulas[0]; i++)
        if (weft_register_kernel(wd__core_registrar, nn_formulas[i].op, WEFT_KEY_AUTOGRAD,
                                 WEFT_ALL_BACKENDS, wa__autograd_kernel, (void *)&nn_formulas[i],
                                 NULL) < 0)
            fprintf(stderr, "weft: internal error: %s\n", weft_last_error());
}
