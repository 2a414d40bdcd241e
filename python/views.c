/* python/views.c — the Tensor methods' views of a quantized tensor.  The
 * core's view functions refuse every plugin layout (they would read
 * strides the payload may not have); the quantized plugin defines views
 * that keep the quantizer (quantized_reshape, _permute, _transpose,
 * _flatten, _slice, _select, _contiguous: <weft/quantized.h>), sharing the
 * integers as a strided view shares memory.  These functions take the
 * plugin's view for a quantized tensor and the core's otherwise, so
 * q.reshape(...), q.transpose(...), q[1:, 0] and friends behave as torch's
 * on quantized tensors; a strided tensor pays one layout test. */
#include <string.h>

#include <weft/plugin.h> /* weft_set_error */
#include <weft/quantized.h>

#include "weftpy.h"

bool wpy_is_quantized(const weft_tensor *t)
{
    int layout = weft_tensor_layout(t);
    if (layout == WEFT_LAYOUT_STRIDED)
        return false;
    const char *name = weft_layout_name(layout);
    return name && strcmp(name, "quantized") == 0;
}

int wpy_view_reshape(weft_tensor **out, const weft_tensor *t, const int64_t *shape, int n)
{
    return wpy_is_quantized(t) ? weft_quantized_reshape(out, t, shape, n)
                               : weft_reshape(out, t, shape, n);
}

int wpy_view_view(weft_tensor **out, const weft_tensor *t, const int64_t *shape, int n)
{
    /* the plugin's reshape of contiguous integers is a view of them */
    return wpy_is_quantized(t) ? weft_quantized_reshape(out, t, shape, n)
                               : weft_view(out, t, shape, n);
}

int wpy_view_permute(weft_tensor **out, const weft_tensor *t, const int64_t *dims, int n)
{
    return wpy_is_quantized(t) ? weft_quantized_permute(out, t, dims, n)
                               : weft_permute(out, t, dims, n);
}

int wpy_view_transpose(weft_tensor **out, const weft_tensor *t, int d0, int d1)
{
    return wpy_is_quantized(t) ? weft_quantized_transpose(out, t, d0, d1)
                               : weft_transpose(out, t, d0, d1);
}

int wpy_view_flatten(weft_tensor **out, const weft_tensor *t, int start, int end)
{
    return wpy_is_quantized(t) ? weft_quantized_flatten(out, t, start, end)
                               : weft_flatten(out, t, start, end);
}

int wpy_view_contiguous(weft_tensor **out, const weft_tensor *t)
{
    return wpy_is_quantized(t) ? weft_quantized_contiguous(out, t) : weft_contiguous(out, t);
}

int wpy_view_slice(weft_tensor **out, const weft_tensor *t, int dim, int64_t start, int64_t stop,
                   int64_t step)
{
    return wpy_is_quantized(t) ? weft_quantized_slice(out, t, dim, start, stop, step)
                               : weft_slice(out, t, dim, start, stop, step);
}

int wpy_view_select(weft_tensor **out, const weft_tensor *t, int dim, int64_t index)
{
    return wpy_is_quantized(t) ? weft_quantized_select(out, t, dim, index)
                               : weft_select(out, t, dim, index);
}

int wpy_view_narrow(weft_tensor **out, const weft_tensor *t, int dim, int64_t start,
                    int64_t length)
{
    if (!wpy_is_quantized(t))
        return weft_narrow(out, t, dim, start, length);
    /* narrow's negative start counts from the end, as the slice's does */
    int nd = weft_tensor_ndim(t);
    int d = dim < 0 ? dim + nd : dim;
    int64_t size = d >= 0 && d < nd ? weft_tensor_size(t, d) : 0;
    int64_t s = start < 0 ? start + size : start;
    if (d < 0 || d >= nd || s < 0 || length < 0 || s > size - length)
        return weft_set_error(WEFT_EINVAL, "narrow: start %lld and length %lld do not fit "
                              "dimension %d of a quantized tensor of %d dimensions",
                              (long long)start, (long long)length, dim, nd);
    return weft_quantized_slice(out, t, dim, s, s + length, 1);
}
