/* backends/cuda/nn.c — the boxed NN kernels of the CUDA plugin: softmax,
 * log_softmax and their backward, nll_loss and its backward, cross_entropy
 * and its backward as log_softmax + nll_loss (label smoothing goes to the
 * fallback), mse_loss from the elementwise and reduction kernels, and
 * max_pool2d (with indices) and its backward.  Shapes and arguments are
 * checked here, before any launch; cases the kernels do not cover go to
 * the CPU fallback. */
#include <stdio.h>
#include <string.h>

#include "gpu.h"

#include "cuda.h"

static bool on_device_of(const weft_tensor *t, const weft_tensor *like)
{
    weft_device a = weft_tensor_device(t), b = weft_tensor_device(like);
    return a.type == WFC_DEVICE_TYPE && a.type == b.type && a.index == b.index;
}

static int select_device(const char *op, const weft_tensor *t)
{
    int index = weft_tensor_device(t).index;
    if (cudaSetDevice(index) != cudaSuccess)
        return weft_set_error(WEFT_EDEVICE, "%s: cannot select " WFC_BACKEND ":%d", op, index);
    return 0;
}

static void *stream_of(const weft_tensor *t)
{
    return wfc_current_stream(weft_tensor_device(t).index);
}

static int wrap_dim(const char *op, int64_t dim, int nd, int *out)
{
    int range = nd > 0 ? nd : 1;
    if (dim < -range || dim >= range)
        return weft_set_error(WEFT_EINVAL, "%s: dim %lld is out of range for a tensor of %d dims",
                              op, (long long)dim, nd);
    *out = (int)(dim < 0 ? dim + range : dim);
    return 0;
}

/* Rows along dim of n operands of one shape: the geometry over the other
 * dims and each operand's step along dim.  1 when too many dims remain. */
static int rows_plan(const weft_tensor *const *ops, int n, int dim, wfc_geometry *rows,
                     int64_t *steps, int64_t *len)
{
    static _Thread_local int64_t st[WFC_MAX_OPERANDS][64];
    int64_t sz[64];
    const weft_tensor *t0 = ops[0];
    int nd = weft_tensor_ndim(t0), m = 0;
    *len = nd ? weft_tensor_size(t0, dim) : 1;
    for (int k = 0; k < n; k++)
        steps[k] = nd ? weft_tensor_stride(ops[k], dim) : 0;
    for (int d = 0; d < nd; d++) {
        if (d == dim)
            continue;
        sz[m] = weft_tensor_size(t0, d);
        for (int k = 0; k < n; k++)
            st[k][m] = weft_tensor_stride(ops[k], d);
        m++;
    }
    return wfc_plan_geometry(rows, sz, m, n, (const int64_t(*)[64])st) < 0 ? 1 : 0;
}

/* softmax(self, dim), log_softmax(self, dim) */
static int softmax_kernel(weft_call *call, void *ctx)
{
    bool log_form = ctx != NULL;
    const char *op = weft_op_name(call->op);
    const weft_tensor *self = call->args[0].u.tensor;
    int dim = 0;
    int rc = wrap_dim(op, weft_arg_int(call, 1), weft_tensor_ndim(self), &dim);
    if (rc < 0)
        return rc;
    if (!wfc_nn_supported(weft_tensor_dtype(self)))
        return weft_call_cpu_fallback(call);
    weft_tensor *out = NULL;
    rc = weft_new_output(&out, self, weft_tensor_sizes(self), weft_tensor_ndim(self),
                         weft_tensor_dtype(self));
    wfc_geometry rows;
    int64_t steps[2], len;
    const weft_tensor *ops[2] = {out, self};
    if (rc == 0 && rows_plan(ops, 2, dim, &rows, steps, &len) != 0) {
        weft_tensor_release(out);
        return weft_call_cpu_fallback(call);
    }
    if (rc == 0)
        rc = select_device(op, self);
    if (rc == 0)
        rc = wfc_softmax(stream_of(self), log_form, weft_tensor_dtype(self),
                         weft_tensor_data_ptr(out), weft_tensor_data_ptr(self),
                         weft_tensor_numel(self) / (len ? len : 1), len, &rows, steps[0], steps[1]);
    if (rc < 0) {
        weft_tensor_release(out);
        return rc;
    }
    return weft_return_tensor(call, 0, out);
}

/* _softmax_backward_data(grad_output, output, dim) and the log form */
static int softmax_backward_kernel(weft_call *call, void *ctx)
{
    bool log_form = ctx != NULL;
    const char *op = weft_op_name(call->op);
    const weft_tensor *g = call->args[0].u.tensor, *y = call->args[1].u.tensor;
    int nd = weft_tensor_ndim(y), dim = 0;
    int rc = wrap_dim(op, weft_arg_int(call, 2), nd, &dim);
    if (rc < 0)
        return rc;
    bool same = weft_tensor_ndim(g) == nd;
    for (int d = 0; same && d < nd; d++)
        same = weft_tensor_size(g, d) == weft_tensor_size(y, d);
    if (!same)
        return weft_set_error(WEFT_ESHAPE, "%s: grad_output and output must have one shape", op);
    if (!on_device_of(g, y) || weft_tensor_dtype(g) != weft_tensor_dtype(y) ||
        !wfc_nn_supported(weft_tensor_dtype(y)))
        return weft_call_cpu_fallback(call);
    weft_tensor *gin = NULL;
    rc = weft_new_output(&gin, y, weft_tensor_sizes(y), nd, weft_tensor_dtype(y));
    wfc_geometry rows;
    int64_t steps[3], len;
    const weft_tensor *ops[3] = {gin, g, y};
    if (rc == 0 && rows_plan(ops, 3, dim, &rows, steps, &len) != 0) {
        weft_tensor_release(gin);
        return weft_call_cpu_fallback(call);
    }
    if (rc == 0)
        rc = select_device(op, y);
    if (rc == 0)
        rc = wfc_softmax_backward(stream_of(y), log_form, weft_tensor_dtype(y),
                                  weft_tensor_data_ptr(gin), weft_tensor_data_ptr(g),
                                  weft_tensor_data_ptr(y), weft_tensor_numel(y) / (len ? len : 1),
                                  len, &rows, steps[0], steps[1], steps[2]);
    if (rc < 0) {
        weft_tensor_release(gin);
        return rc;
    }
    return weft_return_tensor(call, 0, gin);
}

/* ------------------------------------------------------------- losses */

enum { RED_NONE, RED_MEAN, RED_SUM };

static int reduction_of(const char *op, const char *s, int *out)
{
    if (s && strcmp(s, "none") == 0)
        *out = RED_NONE;
    else if (s && strcmp(s, "mean") == 0)
        *out = RED_MEAN;
    else if (s && strcmp(s, "sum") == 0)
        *out = RED_SUM;
    else
        return weft_set_error(WEFT_EINVAL, "%s: reduction must be 'none', 'mean' or 'sum', got "
                                           "'%s'", op, s ? s : "(null)");
    return 0;
}

/* Whether the kernels serve this classification call: a [n, c] input of a
 * float dtype, [n] int64 targets and an optional [c] weight, one device. */
static bool classification_case(const weft_tensor *self, const weft_tensor *target,
                                const weft_tensor *weight)
{
    weft_dtype dt = weft_tensor_dtype(self);
    if (!wfc_nn_supported(dt) || weft_tensor_ndim(self) != 2 || weft_tensor_ndim(target) != 1 ||
        weft_tensor_dtype(target) != WEFT_INT64 || !on_device_of(target, self) ||
        weft_tensor_size(target, 0) != weft_tensor_size(self, 0))
        return false;
    return !weight || (on_device_of(weight, self) && weft_tensor_dtype(weight) == dt &&
                       weft_tensor_ndim(weight) == 1 &&
                       weft_tensor_size(weight, 0) == weft_tensor_size(self, 1));
}

/* Per-sample losses and weights; checks the targets (one small read back:
 * an index out of range is an error, as on the CPU). */
static int per_sample(const char *op, weft_tensor **loss, weft_tensor **weights,
                      const weft_tensor *self, const weft_tensor *target, const weft_tensor *weight,
                      int64_t ignore_index, bool check)
{
    *weights = NULL;
    if (loss)
        *loss = NULL;
    int64_t n = weft_tensor_size(self, 0), c = weft_tensor_size(self, 1);
    weft_tensor *x = NULL, *t = NULL, *w = NULL, *bad = NULL, *host_bad = NULL;
    int rc = weft_contiguous(&x, self);
    if (rc == 0)
        rc = weft_contiguous(&t, target);
    if (rc == 0 && weight)
        rc = weft_contiguous(&w, weight);
    if (rc == 0 && loss)
        rc = weft_new_output(loss, self, &n, 1, weft_tensor_dtype(self));
    if (rc == 0)
        rc = weft_new_output(weights, self, &n, 1, weft_tensor_dtype(self));
    if (rc == 0)
        rc = weft_zeros(&bad, (const int64_t[]){2}, 1, WEFT_INT64, weft_tensor_device(self));
    if (rc == 0)
        rc = select_device(op, self);
    if (rc == 0)
        rc = wfc_nll(stream_of(self), weft_tensor_dtype(self), loss ? weft_tensor_data_ptr(*loss) : NULL,
                     weft_tensor_data_ptr(*weights), weft_tensor_data_ptr(x),
                     weft_tensor_data_ptr(t), w ? weft_tensor_data_ptr(w) : NULL, n, c,
                     ignore_index, weft_tensor_data_ptr(bad));
    if (rc == 0 && check && n > 0)
        rc = weft_to_device(&host_bad, bad, WEFT_DEVICE_CPU);
    if (rc == 0 && host_bad) {
        const int64_t *b = weft_tensor_data_ptr(host_bad);
        if (b[0])
            rc = weft_set_error(WEFT_EINVAL, "%s: target %lld is out of bounds for %lld classes",
                                op, (long long)b[1], (long long)c);
    }
    weft_tensor_release(x);
    weft_tensor_release(t);
    weft_tensor_release(w);
    weft_tensor_release(bad);
    weft_tensor_release(host_bad);
    if (rc < 0) {
        if (loss) {
            weft_tensor_release(*loss);
            *loss = NULL;
        }
        weft_tensor_release(*weights);
        *weights = NULL;
    }
    return rc;
}

static int nll_forward(weft_tensor **out, const weft_tensor *self, const weft_tensor *target,
                       const weft_tensor *weight, int reduction, int64_t ignore_index)
{
    weft_tensor *loss = NULL, *weights = NULL, *s = NULL, *ws = NULL;
    int rc = per_sample("nll_loss", &loss, &weights, self, target, weight, ignore_index, true);
    if (rc == 0 && reduction == RED_NONE) {
        *out = loss;
        loss = NULL;
    } else if (rc == 0) {
        rc = weft_sum_ex(reduction == RED_SUM ? out : &s, loss, NULL, 0, false, WEFT_DTYPE_UNSET);
        if (rc == 0 && reduction == RED_MEAN)
            rc = weft_sum_ex(&ws, weights, NULL, 0, false, WEFT_DTYPE_UNSET);
        if (rc == 0 && reduction == RED_MEAN)
            rc = weft_div(out, s, ws);
    }
    weft_tensor_release(loss);
    weft_tensor_release(weights);
    weft_tensor_release(s);
    weft_tensor_release(ws);
    return rc;
}

static int nll_backward(weft_tensor **out, const weft_tensor *grad, const weft_tensor *self,
                        const weft_tensor *target, const weft_tensor *weight, int reduction,
                        int64_t ignore_index)
{
    *out = NULL;
    int64_t n = weft_tensor_size(self, 0), c = weft_tensor_size(self, 1);
    int64_t want = reduction == RED_NONE ? n : 1;
    if (weft_tensor_numel(grad) != want || (reduction != RED_NONE && weft_tensor_ndim(grad) != 0))
        return weft_set_error(WEFT_ESHAPE, "nll_loss_backward: grad_output must be %s",
                              reduction == RED_NONE ? "[n] for reduction 'none'" : "0-d");
    weft_tensor *weights = NULL, *total = NULL, *g = NULL, *t = NULL, *w = NULL, *gin = NULL;
    int rc = reduction == RED_MEAN
                 ? per_sample("nll_loss_backward", NULL, &weights, self, target, weight,
                              ignore_index, false)
                 : 0;
    if (rc == 0 && weights)
        rc = weft_sum_ex(&total, weights, NULL, 0, false, WEFT_DTYPE_UNSET);
    if (rc == 0)
        rc = weft_contiguous(&g, grad);
    if (rc == 0)
        rc = weft_contiguous(&t, target);
    if (rc == 0 && weight)
        rc = weft_contiguous(&w, weight);
    if (rc == 0)
        rc = weft_zeros(&gin, (const int64_t[]){n, c}, 2, weft_tensor_dtype(self),
                        weft_tensor_device(self));
    if (rc == 0)
        rc = select_device("nll_loss_backward", self);
    if (rc == 0)
        rc = wfc_nll_backward(stream_of(self), weft_tensor_dtype(self), weft_tensor_data_ptr(gin),
                              weft_tensor_data_ptr(g), reduction == RED_NONE,
                              total ? weft_tensor_data_ptr(total) : NULL, weft_tensor_data_ptr(t),
                              w ? weft_tensor_data_ptr(w) : NULL, n, c, ignore_index);
    weft_tensor_release(weights);
    weft_tensor_release(total);
    weft_tensor_release(g);
    weft_tensor_release(t);
    weft_tensor_release(w);
    if (rc < 0) {
        weft_tensor_release(gin);
        return rc;
    }
    *out = gin;
    return 0;
}

/* nll_loss(self, target, weight?, reduction, ignore_index) */
static int nll_loss_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = call->args[0].u.tensor, *target = call->args[1].u.tensor;
    const weft_tensor *weight = weft_arg_tensor(call, 2);
    int reduction = RED_MEAN;
    int rc = reduction_of("nll_loss", weft_arg_string(call, 3), &reduction);
    if (rc < 0)
        return rc;
    if (!classification_case(self, target, weight))
        return weft_call_cpu_fallback(call);
    weft_tensor *out = NULL;
    rc = nll_forward(&out, self, target, weight, reduction, weft_arg_int(call, 4));
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* nll_loss_backward(grad_output, self, target, weight?, reduction, ignore_index) */
static int nll_loss_backward_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *grad = call->args[0].u.tensor, *self = call->args[1].u.tensor,
                      *target = call->args[2].u.tensor, *weight = weft_arg_tensor(call, 3);
    int reduction = RED_MEAN;
    int rc = reduction_of("nll_loss_backward", weft_arg_string(call, 4), &reduction);
    if (rc < 0)
        return rc;
    if (!classification_case(self, target, weight) || !on_device_of(grad, self) ||
        weft_tensor_dtype(grad) != weft_tensor_dtype(self))
        return weft_call_cpu_fallback(call);
    weft_tensor *out = NULL;
    rc = nll_backward(&out, grad, self, target, weight, reduction, weft_arg_int(call, 5));
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* cross_entropy(self, target, weight?, reduction, ignore_index, label_smoothing) */
static int cross_entropy_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = call->args[0].u.tensor, *target = call->args[1].u.tensor;
    const weft_tensor *weight = weft_arg_tensor(call, 2);
    int reduction = RED_MEAN;
    int rc = reduction_of("cross_entropy", weft_arg_string(call, 3), &reduction);
    if (rc < 0)
        return rc;
    if (!classification_case(self, target, weight) || weft_arg_double(call, 5) != 0)
        return weft_call_cpu_fallback(call);
    weft_tensor *logp = NULL, *out = NULL;
    rc = weft_log_softmax(&logp, self, 1);
    if (rc == 0)
        rc = nll_forward(&out, logp, target, weight, reduction, weft_arg_int(call, 4));
    weft_tensor_release(logp);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* cross_entropy_backward(grad_output, self, target, weight?, reduction,
 * ignore_index, label_smoothing): nll's gradient through log_softmax's. */
static int cross_entropy_backward_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *grad = call->args[0].u.tensor, *self = call->args[1].u.tensor,
                      *target = call->args[2].u.tensor, *weight = weft_arg_tensor(call, 3);
    int reduction = RED_MEAN;
    int rc = reduction_of("cross_entropy_backward", weft_arg_string(call, 4), &reduction);
    if (rc < 0)
        return rc;
    if (!classification_case(self, target, weight) || weft_arg_double(call, 6) != 0 ||
        !on_device_of(grad, self) || weft_tensor_dtype(grad) != weft_tensor_dtype(self))
        return weft_call_cpu_fallback(call);
    weft_tensor *logp = NULL, *g = NULL, *out = NULL;
    rc = weft_log_softmax(&logp, self, 1);
    if (rc == 0)
        rc = nll_backward(&g, grad, logp, target, weight, reduction, weft_arg_int(call, 5));
    if (rc == 0)
        rc = weft__log_softmax_backward_data(&out, g, logp, 1);
    weft_tensor_release(logp);
    weft_tensor_release(g);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* mse_loss(self, target, reduction) */
static int mse_loss_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = call->args[0].u.tensor, *target = call->args[1].u.tensor;
    int reduction = RED_MEAN;
    int rc = reduction_of("mse_loss", weft_arg_string(call, 2), &reduction);
    if (rc < 0)
        return rc;
    if (!on_device_of(target, self) || !wfc_nn_supported(weft_tensor_dtype(self)) ||
        weft_tensor_dtype(target) != weft_tensor_dtype(self))
        return weft_call_cpu_fallback(call);
    weft_tensor *d = NULL, *sq = NULL, *out = NULL;
    rc = weft_sub(&d, self, target);
    if (rc == 0)
        rc = weft_mul(&sq, d, d);
    if (rc == 0 && reduction == RED_NONE)
        out = weft_tensor_retain(sq);
    else if (rc == 0 && reduction == RED_SUM)
        rc = weft_sum_ex(&out, sq, NULL, 0, false, WEFT_DTYPE_UNSET);
    else if (rc == 0)
        rc = weft_mean_ex(&out, sq, NULL, 0, false, WEFT_DTYPE_UNSET);
    weft_tensor_release(d);
    weft_tensor_release(sq);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* ------------------------------------------------------------ pooling */

/* max_pool2d_with_indices and max_pool2d: (self, kernel_size, stride,
 * padding, dilation, ceil_mode) on [c, h, w] or [n, c, h, w]. */
static int max_pool_kernel(weft_call *call, void *ctx)
{
    bool with_indices = ctx != NULL;
    const char *op = weft_op_name(call->op);
    const weft_tensor *self = call->args[0].u.tensor;
    int nk, ns, np, nd;
    const int64_t *k = weft_arg_ints(call, 1, &nk), *s = weft_arg_ints(call, 2, &ns);
    const int64_t *p = weft_arg_ints(call, 3, &np), *d = weft_arg_ints(call, 4, &nd);
    bool ceil_mode = weft_arg_bool(call, 5);
    int ndim = weft_tensor_ndim(self);
    if (ndim != 3 && ndim != 4)
        return weft_set_error(WEFT_ESHAPE, "%s: expected a 3-D or 4-D input, got %d-D", op, ndim);
    wfc_pool2d pool;
    char err[200];
    if (wfc_plan_pool2d(&pool, k, nk, s, ns, p, np, d, nd, err, sizeof err) < 0)
        return weft_set_error(WEFT_EINVAL, "%s: %s", op, err);
    int64_t h = weft_tensor_size(self, ndim - 2), w = weft_tensor_size(self, ndim - 1);
    if (h == 0 || w == 0) /* only the batch may be empty, as torch says */
        return weft_set_error(WEFT_ESHAPE, "%s: input planes must not be empty", op);
    int64_t oh = wfc_plan_pool_out(h, pool.kh, pool.sh, pool.ph, pool.dh, ceil_mode);
    int64_t ow = wfc_plan_pool_out(w, pool.kw, pool.sw, pool.pw, pool.dw, ceil_mode);
    if (oh <= 0 || ow <= 0)
        return weft_set_error(WEFT_ESHAPE, "%s: the output would be empty: input %lldx%lld, "
                              "kernel %dx%d, padding %dx%d, dilation %dx%d", op, (long long)h,
                              (long long)w, pool.kh, pool.kw, pool.ph, pool.pw, pool.dh, pool.dw);
    if (!wfc_nn_supported(weft_tensor_dtype(self)))
        return weft_call_cpu_fallback(call);
    int64_t sizes[4];
    memcpy(sizes, weft_tensor_sizes(self), sizeof(int64_t) * (size_t)ndim);
    sizes[ndim - 2] = oh, sizes[ndim - 1] = ow;
    weft_tensor *x = NULL, *out = NULL, *idx = NULL;
    int rc = weft_contiguous(&x, self);
    if (rc == 0)
        rc = weft_new_output(&out, self, sizes, ndim, weft_tensor_dtype(self));
    if (rc == 0)
        rc = weft_new_output(&idx, self, sizes, ndim, WEFT_INT64);
    if (rc == 0)
        rc = select_device(op, self);
    int64_t planes = h * w != 0 ? weft_tensor_numel(self) / (h * w) : 0;
    if (rc == 0)
        rc = wfc_max_pool2d(stream_of(self), weft_tensor_dtype(self), weft_tensor_data_ptr(out),
                            weft_tensor_data_ptr(idx), weft_tensor_data_ptr(x), planes, h, w, oh, ow,
                            &pool);
    weft_tensor_release(x);
    if (rc < 0) {
        weft_tensor_release(out);
        weft_tensor_release(idx);
        return rc;
    }
    weft_return_tensor(call, 0, out);
    if (with_indices)
        return weft_return_tensor(call, 1, idx);
    weft_tensor_release(idx);
    return 0;
}

/* max_pool2d_with_indices_backward(grad_output, self, indices) */
static int max_pool_backward_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "max_pool2d_with_indices_backward";
    const weft_tensor *grad = call->args[0].u.tensor, *self = call->args[1].u.tensor,
                      *indices = call->args[2].u.tensor;
    int nd = weft_tensor_ndim(self);
    bool ok = (nd == 3 || nd == 4) && weft_tensor_ndim(grad) == nd &&
              weft_tensor_ndim(indices) == nd;
    for (int d = 0; ok && d < nd; d++)
        ok = weft_tensor_size(grad, d) == weft_tensor_size(indices, d) &&
             (d >= nd - 2 || weft_tensor_size(grad, d) == weft_tensor_size(self, d));
    if (!ok)
        return weft_set_error(WEFT_ESHAPE, "%s: grad_output and indices must have one shape, "
                                           "with self's leading dims", op);
    if (weft_tensor_dtype(indices) != WEFT_INT64)
        return weft_set_error(WEFT_EDTYPE, "%s: indices must be int64, got %s", op,
                              weft_dtype_name(weft_tensor_dtype(indices)));
    if (!on_device_of(grad, self) || !on_device_of(indices, self) ||
        weft_tensor_dtype(grad) != weft_tensor_dtype(self) ||
        !wfc_nn_supported(weft_tensor_dtype(self)))
        return weft_call_cpu_fallback(call);
    int64_t hw = weft_tensor_size(self, nd - 2) * weft_tensor_size(self, nd - 1);
    int64_t ohw = weft_tensor_size(grad, nd - 2) * weft_tensor_size(grad, nd - 1);
    weft_tensor *g = NULL, *idx = NULL, *gin = NULL;
    int rc = weft_contiguous(&g, grad);
    if (rc == 0)
        rc = weft_contiguous(&idx, indices);
    if (rc == 0)
        rc = weft_zeros(&gin, weft_tensor_sizes(self), nd, weft_tensor_dtype(self),
                        weft_tensor_device(self));
    if (rc == 0)
        rc = select_device(op, self);
    if (rc == 0)
        rc = wfc_max_pool2d_backward(stream_of(self), weft_tensor_dtype(self),
                                     weft_tensor_data_ptr(gin), weft_tensor_data_ptr(g),
                                     weft_tensor_data_ptr(idx),
                                     hw ? weft_tensor_numel(self) / hw : 0, hw, ohw);
    weft_tensor_release(g);
    weft_tensor_release(idx);
    if (rc < 0) {
        weft_tensor_release(gin);
        return rc;
    }
    return weft_return_tensor(call, 0, gin);
}

/* The avg/adaptive pooling of self from args[first..] (avg: kernel_size,
 * stride, padding, ceil_mode, count_include_pad, divisor_override;
 * adaptive: output_size), or from grad's size for the adaptive backward
 * (grad non-NULL and adaptive).  Returns 0, or an error. */
static int avg_plan(wfc_avg_pool *p, const char *op, const weft_call *call, int first,
                    const weft_tensor *self, bool adaptive, const weft_tensor *grad)
{
    int nd = weft_tensor_ndim(self);
    if (nd != 3 && nd != 4)
        return weft_set_error(WEFT_ESHAPE, "%s: expected a 3-D or 4-D input, got %d-D", op, nd);
    memset(p, 0, sizeof *p);
    p->h = weft_tensor_size(self, nd - 2), p->w = weft_tensor_size(self, nd - 1);
    p->adaptive = adaptive;
    if (p->h == 0 || p->w == 0) /* only the batch may be empty, as torch says */
        return weft_set_error(WEFT_ESHAPE, "%s: input planes must not be empty", op);
    if (adaptive) {
        int n = 0;
        const int64_t *size = grad ? NULL : weft_arg_ints(call, first, &n);
        if (grad) {
            p->oh = weft_tensor_size(grad, weft_tensor_ndim(grad) - 2);
            p->ow = weft_tensor_size(grad, weft_tensor_ndim(grad) - 1);
        } else if (n == 1 || n == 2) {
            p->oh = size[0], p->ow = size[n - 1];
        } else {
            return weft_set_error(WEFT_EINVAL, "%s: output_size must be one or two numbers", op);
        }
        if (p->oh < 1 || p->ow < 1)
            return weft_set_error(WEFT_EINVAL, "%s: output_size must be positive, got %lldx%lld", op,
                                  (long long)p->oh, (long long)p->ow);
        return 0;
    }
    int nk, ns, np;
    const int64_t *k = weft_arg_ints(call, first, &nk), *s = weft_arg_ints(call, first + 1, &ns);
    const int64_t *pad = weft_arg_ints(call, first + 2, &np);
    wfc_pool2d w;
    char err[200];
    if (wfc_plan_pool2d(&w, k, nk, s, ns, pad, np, NULL, 0, err, sizeof err) < 0)
        return weft_set_error(WEFT_EINVAL, "%s: %s", op, err);
    bool ceil_mode = weft_arg_bool(call, first + 3);
    p->count_include_pad = weft_arg_bool(call, first + 4);
    if (!weft_arg_is_none(call, first + 5)) {
        p->divisor = weft_arg_int(call, first + 5);
        if (p->divisor == 0)
            return weft_set_error(WEFT_EINVAL, "%s: divisor must be not zero", op);
    }
    p->kh = w.kh, p->kw = w.kw, p->sh = w.sh, p->sw = w.sw, p->ph = w.ph, p->pw = w.pw;
    p->oh = wfc_plan_pool_out(p->h, w.kh, w.sh, w.ph, 1, ceil_mode);
    p->ow = wfc_plan_pool_out(p->w, w.kw, w.sw, w.pw, 1, ceil_mode);
    if (p->oh < 1 || p->ow < 1)
        return weft_set_error(WEFT_ESHAPE, "%s: output size is too small (%lldx%lld) for an input "
                              "of %lldx%lld", op, (long long)p->oh, (long long)p->ow,
                              (long long)p->h, (long long)p->w);
    return 0;
}

/* avg_pool2d(self, ...) and adaptive_avg_pool2d(self, output_size) */
static int avg_pool_kernel(weft_call *call, void *ctx)
{
    bool adaptive = ctx != NULL;
    const char *op = weft_op_name(call->op);
    const weft_tensor *self = call->args[0].u.tensor;
    wfc_avg_pool p;
    int rc = avg_plan(&p, op, call, 1, self, adaptive, NULL);
    if (rc < 0)
        return rc;
    if (!wfc_nn_supported(weft_tensor_dtype(self)))
        return weft_call_cpu_fallback(call);
    int nd = weft_tensor_ndim(self);
    int64_t sizes[4];
    memcpy(sizes, weft_tensor_sizes(self), sizeof(int64_t) * (size_t)nd);
    sizes[nd - 2] = p.oh, sizes[nd - 1] = p.ow;
    weft_tensor *x = NULL, *out = NULL;
    rc = weft_contiguous(&x, self);
    if (rc == 0)
        rc = weft_new_output(&out, self, sizes, nd, weft_tensor_dtype(self));
    if (rc == 0)
        rc = select_device(op, self);
    if (rc == 0)
        rc = wfc_avg_pool2d(stream_of(self), weft_tensor_dtype(self), weft_tensor_data_ptr(out),
                            weft_tensor_data_ptr(x),
                            p.h * p.w != 0 ? weft_tensor_numel(self) / (p.h * p.w) : 0, &p);
    weft_tensor_release(x);
    if (rc < 0) {
        weft_tensor_release(out);
        return rc;
    }
    return weft_return_tensor(call, 0, out);
}

/* avg_pool2d_backward(grad_output, self, kernel_size, stride, padding,
 * ceil_mode, count_include_pad, divisor_override) and
 * adaptive_avg_pool2d_backward(grad_output, self) */
static int avg_pool_backward_kernel(weft_call *call, void *ctx)
{
    bool adaptive = ctx != NULL;
    const char *op = weft_op_name(call->op);
    const weft_tensor *grad = call->args[0].u.tensor, *self = call->args[1].u.tensor;
    wfc_avg_pool p;
    int nd = weft_tensor_ndim(self);
    int rc = avg_plan(&p, op, call, 2, self, adaptive, grad);
    if (rc < 0)
        return rc;
    bool ok = weft_tensor_ndim(grad) == nd;
    for (int d = 0; ok && d < nd; d++)
        ok = weft_tensor_size(grad, d) == (d == nd - 2 ? p.oh : d == nd - 1 ? p.ow
                                                                            : weft_tensor_size(self, d));
    if (!ok)
        return weft_set_error(WEFT_ESHAPE, "%s: grad_output does not have the pooled shape of "
                                           "self", op);
    if (!on_device_of(grad, self) || weft_tensor_dtype(grad) != weft_tensor_dtype(self) ||
        !wfc_nn_supported(weft_tensor_dtype(self)))
        return weft_call_cpu_fallback(call);
    weft_tensor *g = NULL, *gin = NULL;
    rc = weft_contiguous(&g, grad);
    if (rc == 0)
        rc = weft_new_output(&gin, self, weft_tensor_sizes(self), nd, weft_tensor_dtype(self));
    if (rc == 0)
        rc = select_device(op, self);
    if (rc == 0)
        rc = wfc_avg_pool2d_backward(stream_of(self), weft_tensor_dtype(self),
                                     weft_tensor_data_ptr(gin), weft_tensor_data_ptr(g),
                                     p.h * p.w != 0 ? weft_tensor_numel(self) / (p.h * p.w) : 0, &p);
    weft_tensor_release(g);
    if (rc < 0) {
        weft_tensor_release(gin);
        return rc;
    }
    return weft_return_tensor(call, 0, gin);
}

static const int log_marker = 1, indices_marker = 1, adaptive_marker = 1;

int wfc_register_nn(weft_registrar *reg)
{
    static const weft_kernel_entry entries[] = {
        {"softmax", softmax_kernel, NULL},
        {"log_softmax", softmax_kernel, &log_marker},
        {"_softmax_backward_data", softmax_backward_kernel, NULL},
        {"_log_softmax_backward_data", softmax_backward_kernel, &log_marker},
        {"nll_loss", nll_loss_kernel, NULL},
        {"nll_loss_backward", nll_loss_backward_kernel, NULL},
        {"cross_entropy", cross_entropy_kernel, NULL},
        {"cross_entropy_backward", cross_entropy_backward_kernel, NULL},
        {"mse_loss", mse_loss_kernel, NULL},
        {"max_pool2d_with_indices", max_pool_kernel, &indices_marker},
        {"max_pool2d", max_pool_kernel, NULL},
        {"max_pool2d_with_indices_backward", max_pool_backward_kernel, NULL},
        {"avg_pool2d", avg_pool_kernel, NULL},
        {"adaptive_avg_pool2d", avg_pool_kernel, &adaptive_marker},
        {"avg_pool2d_backward", avg_pool_backward_kernel, NULL},
        {"adaptive_avg_pool2d_backward", avg_pool_backward_kernel, &adaptive_marker},
    };
    return weft_register_kernel_table(reg, WEFT_KEY_DENSE, WFC_DEVICE_TYPE, entries, sizeof entries / sizeof *entries);
}
