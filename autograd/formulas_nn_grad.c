/* autograd/formulas_nn_grad.c — double backward through the NN formulas of
 * formulas_nn.c.  Two ways, chosen per operator by what is cheapest:
 *
 * - The gradient operators of convolution and pooling get formulas of
 *   their own.  They are linear in grad_output (and convolution's in the
 *   weight or input too), so their derivatives are the forward operators
 *   and each other: the set is closed, and differentiable any number of
 *   times.
 * - softmax, log_softmax, nll_loss and cross_entropy keep their fused
 *   backward kernels for plain backward; when their formula runs with grad
 *   mode on (create_graph) it is written instead as a composition of
 *   differentiable operators (wa__softmax_backward_composite,
 *   wa__loss_backward_composite below), whose constant parts (target
 *   weights, masks) come from the fused kernels with grad mode off. */
#include <stdio.h>
#include <string.h>

#include "autograd/formula_helpers.h"

/* ------------------------------------------------------------ helpers */

/* An int[] argument of one or two entries as a pair (empty: fallback). */
static void int_pair(const weft_value *v, const int64_t *fallback, int64_t *pair)
{
    if (v->tag != WEFT_VALUE_INT_LIST || v->len == 0) {
        pair[0] = fallback[0];
        pair[1] = fallback[1];
    } else {
        pair[0] = v->u.ints[0];
        pair[1] = v->u.ints[v->len - 1];
    }
}

/* node->info = the shapes of the k tensors (store_shapes), then extra. */
static int shapes_then(wf_node *n, const weft_tensor *const *ts, int k, const int64_t *extra,
                       int count)
{
    TRY(store_shapes(n, ts, k));
    int64_t *info = wf__realloc(n->info, (size_t)(n->n_info + count) * sizeof(int64_t));
    if (!info)
        return wf__errorf(WEFT_ENOMEM, "out of memory recording a node");
    memcpy(info + n->n_info, extra, (size_t)count * sizeof(int64_t));
    n->info = info;
    n->n_info += count;
    return 0;
}

/* The integers after the first k shapes. */
static const int64_t *after_shapes(const wf_node *n, int k)
{
    const int64_t *p = n->info;
    for (int i = 0; i < k; i++)
        p += 2 + p[0];
    return p;
}

/* ------------------------------------------------------------ convolution */

/* convolution_backward_input(grad_output, weight, input_size, stride,
 * padding, dilation, groups) and convolution_backward_weight(grad_output,
 * input, weight_size, ...): save both tensors; info: their shapes, then
 * stride, padding, dilation (pairs) and groups. */
static int record_conv_grad(wf_node *n, const weft_call *call, weft_tensor *result,
                            weft_tensor *old_self)
{
    (void)old_self;
    static const int64_t zero[2] = {0, 0}, one[2] = {1, 1};
    int64_t extra[7];
    int_pair(&call->args[3], one, &extra[0]);
    int_pair(&call->args[4], zero, &extra[2]);
    int_pair(&call->args[5], one, &extra[4]);
    extra[6] = call->args[6].u.i;
    const weft_tensor *ts[2] = {call->args[0].u.tensor, call->args[1].u.tensor};
    TRY(shapes_then(n, ts, 2, extra, 7));
    TRY(wa__node_save(n, 0, ts[0], result));
    return wa__node_save(n, 1, ts[1], result);
}

/* The input gradient is linear in grad_output g and the weight w:
 * <bw_input(g, w), G> = <g, conv2d(G, w)>, so d g = conv2d(G, w) and
 * d w = bw_weight(g, G). */
static int conv_input_grad_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    weft_tensor *g = saved(n, 0, &rc), *w = saved(n, 1, &rc);
    if (rc < 0)
        return rc;
    const int64_t *p = after_shapes(n, 2);
    if (wants(n, 0))
        rc = weft_conv2d(&gi[0], go[0], w, NULL, p, 2, p + 2, 2, p + 4, 2, p[6]);
    if (rc == 0 && wants(n, 1))
        rc = weft_convolution_backward_weight(&gi[1], g, go[0], weft_tensor_sizes(w),
                                              weft_tensor_ndim(w), p, 2, p + 2, 2, p + 4, 2, p[6]);
    return rc;
}

/* likewise <bw_weight(g, x), G> = <g, conv2d(x, G)> */
static int conv_weight_grad_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    weft_tensor *g = saved(n, 0, &rc), *x = saved(n, 1, &rc);
    if (rc < 0)
        return rc;
    const int64_t *p = after_shapes(n, 2);
    if (wants(n, 0))
        rc = weft_conv2d(&gi[0], x, go[0], NULL, p, 2, p + 2, 2, p + 4, 2, p[6]);
    if (rc == 0 && wants(n, 1))
        rc = weft_convolution_backward_input(&gi[1], g, go[0], weft_tensor_sizes(x),
                                             weft_tensor_ndim(x), p, 2, p + 2, 2, p + 4, 2, p[6]);
    return rc;
}

/* ------------------------------------------------------------ pooling */

/* max_pool2d_with_indices_backward(grad_output, self, indices): saves the
 * indices; info: the shapes of grad_output and self */
static int record_max_pool_grad(wf_node *n, const weft_call *call, weft_tensor *result,
                                weft_tensor *old_self)
{
    (void)old_self;
    const weft_tensor *ts[2] = {call->args[0].u.tensor, call->args[1].u.tensor};
    TRY(store_shapes(n, ts, 2));
    return wa__node_save(n, 0, call->args[2].u.tensor, result);
}

/* The backward scatters g to the argmax positions (indices into each H*W
 * plane), so its derivative gathers from them. */
static int max_pool_grad_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    weft_tensor *indices = saved(n, 0, &rc);
    if (rc < 0)
        return rc;
    const int64_t *gsizes, *ssizes;
    int gnd, snd;
    weft_dtype dt;
    shape_of(n, 0, &gsizes, &gnd, &dt);
    shape_of(n, 1, &ssizes, &snd, &dt);
    if (snd < 2)
        return wf__errorf(WEFT_ESHAPE, "MaxPool2DWithIndicesBackwardBackward: bad input rank");
    int64_t hw = ssizes[snd - 2] * ssizes[snd - 1], ohw = gsizes[gnd - 2] * gsizes[gnd - 1];
    int64_t planes = 1;
    for (int d = 0; d < snd - 2; d++)
        planes *= ssizes[d];
    int64_t flat_in[2] = {planes, hw}, flat_out[2] = {planes, ohw};
    weft_tensor *G = NULL, *idx = NULL, *picked = NULL;
    rc = weft_reshape(&G, go[0], flat_in, 2);
    if (rc == 0)
        rc = weft_reshape(&idx, indices, flat_out, 2);
    if (rc == 0)
        rc = weft_gather(&picked, G, 1, idx);
    if (rc == 0)
        rc = weft_reshape(&gi[0], picked, gsizes, gnd);
    weft_tensor_release(G);
    weft_tensor_release(idx);
    weft_tensor_release(picked);
    return rc;
}

/* avg_pool2d_backward(grad_output, self, kernel_size, stride, padding,
 * ceil_mode, count_include_pad, divisor_override): info: kernel, stride,
 * padding (pairs), ceil_mode, count_include_pad, whether there is a
 * divisor, the divisor */
static int record_avg_pool_grad(wf_node *n, const weft_call *call, weft_tensor *result,
                                weft_tensor *old_self)
{
    (void)result;
    (void)old_self;
    static const int64_t zero[2] = {0, 0};
    const weft_value *a = call->args;
    int64_t info[10];
    int_pair(&a[2], zero, &info[0]);
    int_pair(&a[3], &info[0], &info[2]);
    int_pair(&a[4], zero, &info[4]);
    info[6] = a[5].u.b;
    info[7] = a[6].u.b;
    info[8] = a[7].tag == WEFT_VALUE_INT;
    info[9] = info[8] ? a[7].u.i : 0;
    TRY(wa__node_set_info(n, info, (int)(sizeof info / sizeof *info)));
    return 0;
}

/* linear in g: its derivative is the pooling itself */
static int avg_pool_grad_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    const int64_t *i = n->info;
    return weft_avg_pool2d(&gi[0], go[0], i, 2, i + 2, 2, i + 4, 2, i[6], i[7], i[8] ? &i[9] : NULL);
}

/* adaptive_avg_pool2d_backward(grad_output, self): info: grad_output's shape */
static int record_adaptive_grad(wf_node *n, const weft_call *call, weft_tensor *result,
                                weft_tensor *old_self)
{
    (void)result;
    (void)old_self;
    const weft_tensor *g = call->args[0].u.tensor;
    return store_shapes(n, &g, 1);
}

static int adaptive_grad_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    const int64_t *sizes;
    int nd;
    weft_dtype dt;
    shape_of(n, 0, &sizes, &nd, &dt);
    return weft_adaptive_avg_pool2d(&gi[0], go[0], sizes + nd - 2, 2);
}

/* ------------------------------------------------------------ compositions */

/* softmax: y (g - sum(g y)); log_softmax: g - exp(y) sum(g), over dim.
 * y comes from wa__node_saved, re-attached to the softmax node, so the
 * result is differentiable through y as well as g. */
int wa__softmax_backward_composite(weft_tensor **out, weft_tensor *g, weft_tensor *y, int64_t dim,
                                   bool log)
{
    weft_tensor *gy = NULL, *s = NULL, *d = NULL, *e = NULL;
    int rc = 0;
    if (log) {
        rc = weft_sum(&s, g, &dim, 1, true);
        if (rc == 0)
            rc = weft_exp(&e, y);
        if (rc == 0)
            rc = weft_mul(&d, e, s);
        if (rc == 0)
            rc = weft_sub(out, g, d);
    } else {
        rc = weft_mul(&gy, g, y);
        if (rc == 0)
            rc = weft_sum(&s, gy, &dim, 1, true);
        if (rc == 0)
            rc = weft_sub(&d, g, s);
        if (rc == 0)
            rc = weft_mul(out, y, d);
    }
    weft_tensor_release(gy);
    weft_tensor_release(s);
    weft_tensor_release(d);
    weft_tensor_release(e);
    return rc;
}

/* The constant part of the loss gradients, computed with grad mode off:
 * for nll_loss the gradient with grad_output 1 (it does not depend on
 * self); for cross_entropy the target distribution a (per element over
 * the classes, already divided by the mean's denominator), so that the
 * gradient is g (softmax(self) sum_c a - a). */
static int loss_constants(weft_tensor **out, weft_tensor *g, weft_tensor *self, weft_tensor *target,
                          weft_tensor *weight, const char *reduction, int64_t ignore_index,
                          double smoothing, bool logits, int cdim)
{
    weft_tensor *ones = NULL, *m = NULL, *a = NULL, *t = NULL, *valid = NULL, *vd = NULL, *w = NULL;
    int rc = 0;
    if (!logits) {
        rc = weft_ones(&ones, weft_tensor_sizes(g), weft_tensor_ndim(g), (weft_dtype)g->dtype, g->device);
        if (rc == 0)
            rc = weft_nll_loss_backward(out, ones, self, target, weight, reduction, ignore_index);
        weft_tensor_release(ones);
        return rc;
    }
    int64_t C = self->sizes[cdim];
    bool mean = strcmp(reduction, "mean") == 0;
    if (weight) { /* shaped [C, 1, ...] after the class dim, to broadcast */
        int64_t shape[WEFT_MAX_DIMS];
        for (int d = cdim; d < self->ndim; d++)
            shape[d - cdim] = d == cdim ? C : 1;
        rc = weft_reshape(&w, weight, shape, self->ndim - cdim);
    }
    double scale = 1.0;
    if (rc == 0 && weft_dtype_is_floating(target->dtype)) {
        /* class probabilities, smoothed: a = w_c (y (1 - eps) + eps / C) */
        rc = weft_mul_scalar(&t, target, 1.0 - smoothing);
        if (rc == 0)
            rc = weft_add_scalar(&a, t, smoothing / (double)C);
        if (rc == 0 && w) {
            weft_tensor *aw = NULL;
            rc = weft_mul(&aw, a, w);
            weft_tensor_release(a);
            a = aw;
        }
        if (rc == 0 && mean)
            scale = (double)C / (double)(self->numel ? self->numel : 1);
    } else if (rc == 0) {
        /* class indices: a = (1 - eps) w_t [c == t] + eps/C w_c on elements
         * not ignored; nll_loss's gradient (sum) gives -w_t [c == t] */
        rc = weft_ones(&ones, NULL, 0, (weft_dtype)self->dtype, self->device);
        if (rc == 0)
            rc = weft_nll_loss_backward(&m, ones, self, target, weight, "sum", ignore_index);
        if (rc == 0)
            rc = weft_mul_scalar(&a, m, -(1.0 - smoothing));
        if (rc == 0 && mean) {
            weft_tensor *total = NULL; /* the sum of w_t: the mean's denominator */
            rc = weft_sum(&total, m, NULL, 0, false);
            double v = 0;
            if (rc == 0)
                rc = weft_tensor_item(total, &v);
            weft_tensor_release(total);
            scale = -1.0 / v;
        }
        if (rc == 0 && smoothing > 0) {
            rc = weft_ne_scalar(&valid, target, (double)ignore_index);
            if (rc == 0)
                rc = weft_to_dtype(&vd, valid, (weft_dtype)self->dtype);
            if (rc == 0 && cdim == 1) {
                weft_tensor *u = NULL;
                rc = weft_unsqueeze(&u, vd, 1);
                weft_tensor_release(vd);
                vd = u;
            }
            weft_tensor *term = NULL, *sum = NULL, *tw = NULL;
            if (rc == 0)
                rc = weft_mul_scalar(&term, vd, smoothing / (double)C);
            if (rc == 0 && w) {
                rc = weft_mul(&tw, term, w);
                weft_tensor_release(term);
                term = tw;
            }
            if (rc == 0)
                rc = weft_add(&sum, a, term);
            weft_tensor_release(term);
            weft_tensor_release(a);
            a = sum;
        }
    }
    if (rc == 0)
        rc = scale == 1.0 ? (*out = weft_tensor_retain(a), 0) : weft_mul_scalar(out, a, scale);
    weft_tensor *tmp[] = {ones, m, a, t, valid, vd, w};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        weft_tensor_release(tmp[i]);
    return rc;
}

int wa__loss_backward_composite(weft_tensor **out, weft_tensor *g, weft_tensor *self,
                                weft_tensor *target, weft_tensor *weight, const char *reduction,
                                int64_t ignore_index, double smoothing, bool logits)
{
    int cdim = self->ndim >= 2 ? 1 : 0;
    weft_tensor *k = NULL, *gb = NULL, *p = NULL, *S = NULL, *pS = NULL, *d = NULL;
    bool mode = weft_set_grad_enabled(false);
    int rc = loss_constants(&k, g, self, target, weight, reduction, ignore_index, smoothing,
                            logits, cdim);
    weft_set_grad_enabled(mode);
    /* g per element (reduction 'none') lines up once the class dim is back */
    if (rc == 0 && strcmp(reduction, "none") == 0 && cdim == 1)
        rc = weft_unsqueeze(&gb, g, 1);
    else if (rc == 0)
        gb = weft_tensor_retain(g);
    if (rc == 0 && !logits) {
        rc = weft_mul(out, gb, k);
    } else if (rc == 0) {
        int64_t dim = cdim;
        rc = weft_softmax(&p, self, cdim);
        if (rc == 0)
            rc = weft_sum(&S, k, &dim, 1, true);
        if (rc == 0)
            rc = weft_mul(&pS, p, S);
        if (rc == 0)
            rc = weft_sub(&d, pS, k);
        if (rc == 0)
            rc = weft_mul(out, gb, d);
    }
    weft_tensor *tmp[] = {k, gb, p, S, pS, d};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        weft_tensor_release(tmp[i]);
    return rc;
}

/* ------------------------------------------------------------ the table */

static const formula nn_grad_formulas[] = {
    {"convolution_backward_input", "ConvolutionBackwardInputBackward", conv_input_grad_backward,
     record_conv_grad, 0x3, false},
    {"convolution_backward_weight", "ConvolutionBackwardWeightBackward", conv_weight_grad_backward,
     record_conv_grad, 0x3, false},
    {"max_pool2d_with_indices_backward", "MaxPool2DWithIndicesBackwardBackward",
     max_pool_grad_backward, record_max_pool_grad, 0x1, false},
    {"avg_pool2d_backward", "AvgPool2DBackwardBackward", avg_pool_grad_backward,
     record_avg_pool_grad, 0x1, false},
    {"adaptive_avg_pool2d_backward", "AdaptiveAvgPool2DBackwardBackward", adaptive_grad_backward,
     record_adaptive_grad, 0x1, false},
};

void wa__autograd_register_nn_grad(void)
{
    for (size_t i = 0; i < sizeof nn_grad_formulas / sizeof nn_grad_formulas[0]; i++)
        if (weft_register_kernel(wd__core_registrar, nn_grad_formulas[i].op, WEFT_KEY_AUTOGRAD,
                                 WEFT_ALL_BACKENDS, wa__autograd_kernel,
                                 (void *)&nn_grad_formulas[i], NULL) < 0)
            fprintf(stderr, "weft: internal error: %s\n", weft_last_error());
}
