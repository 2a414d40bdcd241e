/* layouts/quantized/views.c — views of quantized tensors that keep the
 * quantizer.  The core's view functions (weft_reshape, weft_transpose,
 * weft_slice, ...) hand a tensor of a plugin layout to its layout's view
 * hook, qt__layout_view here, which applies the same view to the integer
 * representation — sharing its memory, as a strided view does — and
 * carries the quantizer over, moving a per-channel axis where the view
 * moves its dimension.  The named operators quantized_reshape, _flatten,
 * _transpose, _permute, _slice, _select and _contiguous are those views. */
#include <stdlib.h>

#include "quantized.h"

/* Wraps view (a new strided tensor, consumed) with q, whose per-channel
 * axis is now `axis`. */
static int finish(weft_tensor **out, weft_tensor *view, const qt_affine *q, int axis)
{
    qt_affine moved = *q;
    moved.axis = axis;
    int rc = qt__wrap(out, view, &moved);
    weft_tensor_release(view);
    return rc;
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

/* A new shape of the same elements (view, reshape, flatten, squeeze,
 * unsqueeze, alias): the channel axis must survive as one dimension. */
static int reshaped(weft_tensor **out, const char *op, const weft_tensor *self, weft_tensor *view)
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
    return finish(out, view, q, axis);
}

/* slicing the channel axis slices the scales and zero points with it */
static int sliced(weft_tensor **out, const qt_affine *q, weft_tensor *view, const weft_layout_view *v)
{
    if (q->scheme != QT_PER_CHANNEL_AFFINE || v->dim != q->axis)
        return finish(out, view, q, q->axis);
    qt_affine part = *q;
    weft_tensor *s = NULL, *z = NULL;
    int rc = weft_slice(&s, q->scales, 0, v->start, v->end, v->step);
    if (rc == 0)
        rc = weft_contiguous(&part.scales, s);
    if (rc == 0 && (rc = weft_slice(&z, q->zero_points, 0, v->start, v->end, v->step)) == 0 &&
        (rc = weft_contiguous(&part.zero_points, z)) < 0)
        weft_tensor_release(part.scales);
    weft_tensor_release(s);
    weft_tensor_release(z);
    if (rc < 0) {
        weft_tensor_release(view);
        return rc;
    }
    rc = finish(out, view, &part, q->axis);
    weft_tensor_release(part.scales);
    weft_tensor_release(part.zero_points);
    return rc;
}

/* selecting one channel leaves a per-tensor quantized tensor with that
 * channel's parameters */
static int selected(weft_tensor **out, const qt_affine *q, weft_tensor *view, const weft_layout_view *v)
{
    if (q->scheme != QT_PER_CHANNEL_AFFINE)
        return finish(out, view, q, q->axis);
    if (v->dim != q->axis)
        return finish(out, view, q, v->dim < q->axis ? q->axis - 1 : q->axis);
    qt_affine one = {.scheme = QT_PER_TENSOR_AFFINE,
                     .scale = ((const double *)weft_tensor_data_ptr(q->scales))[v->index],
                     .zero_point = ((const int64_t *)weft_tensor_data_ptr(q->zero_points))[v->index]};
    return finish(out, view, &one, 0);
}

/* The layout's view hook: every core view function on a quantized tensor
 * (weft_reshape, weft_transpose, weft_slice, ...) comes here with its
 * arguments checked.  The same view is applied to the integer
 * representation (sharing its memory, as a strided view does) and the
 * quantizer carried over, a per-channel axis moving with its dimension. */
int qt__layout_view(weft_tensor **out, const weft_tensor *t, const weft_layout_view *v)
{
    const qt_affine *q = weft_tensor_layout_payload(t);
    weft_tensor *view = NULL;
    int rc;
    switch (v->kind) {
    case WEFT_LAYOUT_VIEW_SHAPE:
        rc = weft_view(&view, q->repr, v->shape, v->ndim);
        return rc < 0 ? rc : reshaped(out, v->op, t, view);
    case WEFT_LAYOUT_VIEW_RESHAPE:
        rc = weft_reshape(&view, q->repr, v->shape, v->ndim);
        return rc < 0 ? rc : reshaped(out, v->op, t, view);
    case WEFT_LAYOUT_VIEW_PERMUTE: {
        if ((rc = weft_permute(&view, q->repr, v->dims, v->ndim)) < 0)
            return rc;
        int axis = q->axis;
        for (int j = 0; j < v->ndim; j++)
            if (v->dims[j] == q->axis)
                axis = j;
        return finish(out, view, q, axis);
    }
    case WEFT_LAYOUT_VIEW_SLICE:
        rc = weft_slice(&view, q->repr, v->dim, v->start, v->end, v->step);
        return rc < 0 ? rc : sliced(out, q, view, v);
    case WEFT_LAYOUT_VIEW_SELECT:
        rc = weft_select(&view, q->repr, v->dim, v->index);
        return rc < 0 ? rc : selected(out, q, view, v);
    case WEFT_LAYOUT_VIEW_EXPAND: {
        /* new dims lead; a per-channel axis may not be broadcast (its
         * parameters have one entry per channel) */
        int lead = v->ndim - weft_tensor_ndim(t);
        if (q->scheme == QT_PER_CHANNEL_AFFINE &&
            v->shape[q->axis + lead] != weft_tensor_size(t, q->axis))
            return weft_set_error(WEFT_ESHAPE,
                                  "%s: the channel axis %d of a per-channel quantized tensor "
                                  "cannot be expanded (from %lld to %lld)",
                                  v->op, q->axis, (long long)weft_tensor_size(t, q->axis),
                                  (long long)v->shape[q->axis + lead]);
        rc = weft_expand(&view, q->repr, v->shape, v->ndim);
        return rc < 0 ? rc : finish(out, view, q, q->axis + lead);
    }
    case WEFT_LAYOUT_VIEW_CONTIGUOUS:
        if (weft_tensor_is_contiguous(q->repr)) {
            *out = weft_tensor_retain(t);
            return 0;
        }
        rc = weft_contiguous(&view, q->repr);
        return rc < 0 ? rc : finish(out, view, q, q->axis);
    default:
        return weft_set_error(WEFT_ENOTSUP, "%s: the quantized layout does not know view kind %d",
                              v->op, v->kind);
    }
}

/* ------------------------------------------------- the named operators
 * quantized_reshape & co. predate the hook; they stay for callers that
 * use them (weft/quantized.h, Python) and are now the core's views. */

/* quantized_reshape(Tensor self, int[] shape) */
static int reshape_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    int n;
    const int64_t *shape = weft_arg_ints(call, 1, &n);
    weft_tensor *out = NULL;
    int rc = weft_reshape(&out, weft_arg_tensor(call, 0), shape, n);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* quantized_flatten(Tensor self, int start_dim=0, int end_dim=-1) */
static int flatten_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor *out = NULL;
    int rc = weft_flatten(&out, weft_arg_tensor(call, 0), (int)weft_arg_int(call, 1),
                          (int)weft_arg_int(call, 2));
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* quantized_permute(Tensor self, int[] dims) */
static int permute_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    int n;
    const int64_t *dims = weft_arg_ints(call, 1, &n);
    weft_tensor *out = NULL;
    int rc = weft_permute(&out, weft_arg_tensor(call, 0), dims, n);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* dims arrive as int64; the core's view functions take int */
static int int_dim(const weft_call *call, int i, const char *op, int *dim)
{
    int64_t d = weft_arg_int(call, i);
    if (d < INT32_MIN || d > INT32_MAX)
        return weft_set_error(WEFT_ERANGE, "%s: dimension %lld is out of range", op, (long long)d);
    *dim = (int)d;
    return 0;
}

/* quantized_transpose(Tensor self, int dim0, int dim1) */
static int transpose_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    int d0 = 0, d1 = 0, rc;
    weft_tensor *out = NULL;
    if ((rc = int_dim(call, 1, "quantized_transpose", &d0)) < 0 ||
        (rc = int_dim(call, 2, "quantized_transpose", &d1)) < 0 ||
        (rc = weft_transpose(&out, weft_arg_tensor(call, 0), d0, d1)) < 0)
        return rc;
    return weft_return_tensor(call, 0, out);
}

/* quantized_slice(Tensor self, int dim, int start, int end, int step=1) */
static int slice_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    int d = 0, rc;
    weft_tensor *out = NULL;
    if ((rc = int_dim(call, 1, "quantized_slice", &d)) < 0 ||
        (rc = weft_slice(&out, weft_arg_tensor(call, 0), d, weft_arg_int(call, 2),
                         weft_arg_int(call, 3), weft_arg_int(call, 4))) < 0)
        return rc;
    return weft_return_tensor(call, 0, out);
}

/* quantized_select(Tensor self, int dim, int index) */
static int select_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    int d = 0, rc;
    weft_tensor *out = NULL;
    if ((rc = int_dim(call, 1, "quantized_select", &d)) < 0 ||
        (rc = weft_select(&out, weft_arg_tensor(call, 0), d, weft_arg_int(call, 2))) < 0)
        return rc;
    return weft_return_tensor(call, 0, out);
}

/* quantized_contiguous(Tensor self) */
static int contiguous_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor *out = NULL;
    int rc = weft_contiguous(&out, weft_arg_tensor(call, 0));
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
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
