/* layouts/quantized/views.c — views of quantized tensors that keep the
 * quantizer: quantized_reshape, _flatten, _transpose, _permute, _slice,
 * _select and _contiguous.  The core's view functions refuse every plugin
 * layout (they read strides the payload may not have), so the plugin
 * defines these operators: each applies the core's view to the integer
 * representation — sharing its memory, as a strided view does — and
 * carries the quantizer over, moving a per-channel axis where the view
 * moves its dimension. */
#include <stdlib.h>

#include "quantized.h"

/* dim in [-ndim, ndim) made non-negative, or -1. */
static int wrap_dim(int64_t dim, int ndim)
{
    if (dim < -ndim || dim >= ndim)
        return -1;
    return (int)(dim < 0 ? dim + ndim : dim);
}

static int bad_dim(const char *op, int64_t dim, int ndim)
{
    return weft_set_error(WEFT_EINVAL, "%s: dimension %lld is out of range for a tensor of %d "
                                       "dimensions",
                          op, (long long)dim, ndim);
}

/* Wraps view (a new strided tensor, consumed) with q, whose per-channel
 * axis is now `axis`. */
static int finish(weft_call *call, weft_tensor *view, const qt_affine *q, int axis)
{
    qt_affine moved = *q;
    moved.axis = axis;
    weft_tensor *out = NULL;
    int rc = qt__wrap(&out, view, &moved);
    weft_tensor_release(view);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* After a reshape from old to new sizes, where the channel dimension went:
 * the new dimension of the same extent that starts at the same element
 * count, or -1 when the reshape splits or merges the channels. */
static int follow_axis(const int64_t *old_sizes, int axis, const int64_t *new_sizes, int ndim)
{
    int64_t before = 1;
    for (int d = 0; d < axis; d++)
        before *= old_sizes[d];
    int64_t acc = 1;
    for (int d = 0; d < ndim; d++) {
        if (acc == before && new_sizes[d] == old_sizes[axis])
            return d;
        acc *= new_sizes[d];
    }
    return -1;
}

static int reshaped(weft_call *call, const char *op, const weft_tensor *self, weft_tensor *view)
{
    const qt_affine *q = weft_tensor_layout_payload(self);
    int axis = q->axis;
    if (q->scheme == QT_PER_CHANNEL_AFFINE) {
        axis = follow_axis(weft_tensor_sizes(self), q->axis, weft_tensor_sizes(view),
                           weft_tensor_ndim(view));
        if (axis < 0) {
            weft_tensor_release(view);
            return weft_set_error(WEFT_ESHAPE,
                                  "%s: the new shape splits or merges the channel axis %d of a "
                                  "per-channel quantized tensor",
                                  op, q->axis);
        }
    }
    return finish(call, view, q, axis);
}

/* quantized_reshape(Tensor self, int[] shape) */
static int reshape_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = weft_arg_tensor(call, 0);
    const qt_affine *q = weft_tensor_layout_payload(self);
    int n;
    const int64_t *shape = weft_arg_ints(call, 1, &n);
    weft_tensor *view;
    int rc = weft_reshape(&view, q->repr, shape, n);
    return rc < 0 ? rc : reshaped(call, "quantized_reshape", self, view);
}

/* quantized_flatten(Tensor self, int start_dim=0, int end_dim=-1) */
static int flatten_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = weft_arg_tensor(call, 0);
    const qt_affine *q = weft_tensor_layout_payload(self);
    weft_tensor *view;
    int rc = weft_flatten(&view, q->repr, (int)weft_arg_int(call, 1), (int)weft_arg_int(call, 2));
    return rc < 0 ? rc : reshaped(call, "quantized_flatten", self, view);
}

/* quantized_permute(Tensor self, int[] dims) */
static int permute_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = weft_arg_tensor(call, 0);
    const qt_affine *q = weft_tensor_layout_payload(self);
    int n;
    const int64_t *dims = weft_arg_ints(call, 1, &n);
    weft_tensor *view;
    int rc = weft_permute(&view, q->repr, dims, n);
    if (rc < 0)
        return rc;
    int axis = q->axis;
    for (int j = 0; j < n; j++)
        if (wrap_dim(dims[j], n) == q->axis)
            axis = j;
    return finish(call, view, q, axis);
}

/* quantized_transpose(Tensor self, int dim0, int dim1) */
static int transpose_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = weft_arg_tensor(call, 0);
    const qt_affine *q = weft_tensor_layout_payload(self);
    int ndim = weft_tensor_ndim(self);
    int d0 = wrap_dim(weft_arg_int(call, 1), ndim), d1 = wrap_dim(weft_arg_int(call, 2), ndim);
    if (d0 < 0 || d1 < 0)
        return bad_dim("quantized_transpose", d0 < 0 ? weft_arg_int(call, 1) : weft_arg_int(call, 2),
                       ndim);
    weft_tensor *view;
    int rc = weft_transpose(&view, q->repr, d0, d1);
    if (rc < 0)
        return rc;
    int axis = q->axis == d0 ? d1 : q->axis == d1 ? d0 : q->axis;
    return finish(call, view, q, axis);
}

/* quantized_slice(Tensor self, int dim, int start, int end, int step=1):
 * slicing the channel axis slices the scales and zero points with it */
static int slice_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = weft_arg_tensor(call, 0);
    const qt_affine *q = weft_tensor_layout_payload(self);
    int ndim = weft_tensor_ndim(self);
    int dim = wrap_dim(weft_arg_int(call, 1), ndim);
    if (dim < 0)
        return bad_dim("quantized_slice", weft_arg_int(call, 1), ndim);
    int64_t start = weft_arg_int(call, 2), end = weft_arg_int(call, 3), step = weft_arg_int(call, 4);
    weft_tensor *view;
    int rc = weft_slice(&view, q->repr, dim, start, end, step);
    if (rc < 0 || q->scheme != QT_PER_CHANNEL_AFFINE || dim != q->axis)
        return rc < 0 ? rc : finish(call, view, q, q->axis);
    qt_affine sliced = *q;
    weft_tensor *s = NULL, *z = NULL;
    rc = weft_slice(&s, q->scales, 0, start, end, step);
    if (rc == 0)
        rc = weft_contiguous(&sliced.scales, s);
    if (rc == 0 && (rc = weft_slice(&z, q->zero_points, 0, start, end, step)) == 0 &&
        (rc = weft_contiguous(&sliced.zero_points, z)) < 0)
        weft_tensor_release(sliced.scales);
    weft_tensor_release(s);
    weft_tensor_release(z);
    if (rc < 0) {
        weft_tensor_release(view);
        return rc;
    }
    rc = finish(call, view, &sliced, q->axis);
    weft_tensor_release(sliced.scales);
    weft_tensor_release(sliced.zero_points);
    return rc;
}

/* quantized_select(Tensor self, int dim, int index): selecting one channel
 * leaves a per-tensor quantized tensor with that channel's parameters */
static int select_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = weft_arg_tensor(call, 0);
    const qt_affine *q = weft_tensor_layout_payload(self);
    int ndim = weft_tensor_ndim(self);
    int dim = wrap_dim(weft_arg_int(call, 1), ndim);
    if (dim < 0)
        return bad_dim("quantized_select", weft_arg_int(call, 1), ndim);
    int64_t index = weft_arg_int(call, 2);
    weft_tensor *view;
    int rc = weft_select(&view, q->repr, dim, index);
    if (rc < 0)
        return rc;
    if (q->scheme != QT_PER_CHANNEL_AFFINE)
        return finish(call, view, q, q->axis);
    if (dim != q->axis)
        return finish(call, view, q, dim < q->axis ? q->axis - 1 : q->axis);
    int64_t c = index < 0 ? index + weft_tensor_size(self, dim) : index;
    qt_affine one = {.scheme = QT_PER_TENSOR_AFFINE,
                     .scale = ((const double *)weft_tensor_data_ptr(q->scales))[c],
                     .zero_point = ((const int64_t *)weft_tensor_data_ptr(q->zero_points))[c]};
    return finish(call, view, &one, 0);
}

/* quantized_contiguous(Tensor self) */
static int contiguous_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = weft_arg_tensor(call, 0);
    const qt_affine *q = weft_tensor_layout_payload(self);
    weft_tensor *c;
    int rc = weft_contiguous(&c, q->repr);
    return rc < 0 ? rc : finish(call, c, q, q->axis);
}

int qt__register_views(weft_registrar *reg)
{
    static const weft_kernel_entry kernels[] = {
        {"quantized_reshape", reshape_kernel, NULL},
        {"quantized_flatten", flatten_kernel, NULL},
        {"quantized_permute", permute_kernel, NULL},
        {"quantized_transpose", transpose_kernel, NULL},
        {"quantized_slice", slice_kernel, NULL},
        {"quantized_select", select_kernel, NULL},
        {"quantized_contiguous", contiguous_kernel, NULL},
    };
    return weft_register_kernel_table(reg, weft_layout_key(qt__affine_layout),
                                      WEFT_DEVICE_TYPE_CPU, kernels,
                                      sizeof kernels / sizeof *kernels);
}
