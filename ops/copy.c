/* ops/copy.c — copies: to another dtype or device, contiguous, reshape
 * when a view cannot do, and item.  Written with the copy_ operator (a
 * device's kernel, or the core's), so they live above the dispatcher. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/* dst = src through the host kernel when both are host tensors (no dispatch
 * needed), else through the copy_ operator so the device's kernel runs. */
static int copy_into(weft_tensor *dst, const weft_tensor *src)
{
    if (dst->device.type == WEFT_DEVICE_TYPE_CPU && src->device.type == WEFT_DEVICE_TYPE_CPU)
        return wf__host_copy_on(dst, src, weft_parallel_for);
    return weft_copy_(dst, src);
}

/* A new contiguous tensor of dtype on device holding t's values. */
int wo__copy_to_new(weft_tensor **out, const weft_tensor *t, weft_dtype dtype,
                       weft_device device)
{
    int rc = weft_empty(out, t->sizes, t->ndim, dtype, device);
    if (rc < 0)
        return rc;
    rc = copy_into(*out, t);
    if (rc == 0 && wf__autograd_hooks.on_copy)
        rc = wf__autograd_hooks.on_copy(*out, t);
    if (rc < 0) {
        weft_tensor_release(*out);
        *out = NULL;
    }
    return rc;
}

WEFT_API int weft_reshape(weft_tensor **out, const weft_tensor *t, const int64_t *sizes, int ndim)
{
    WF_CHECK_VIEW_ARGS("reshape", out, t);
    int64_t shape[WEFT_MAX_DIMS], strides[WEFT_MAX_DIMS];
    int rc = wf__infer_size(shape, sizes, ndim, t->numel, "reshape");
    if (rc < 0)
        return rc;
    if (t->layout)
        return wf__layout_view(out, t, &(weft_layout_view){.kind = WEFT_LAYOUT_VIEW_RESHAPE,
                                                           .op = "reshape", .shape = shape,
                                                           .ndim = ndim});
    if (wf__view_strides(strides, t, shape, ndim))
        return wf__make_view(out, t, shape, strides, ndim, t->storage_offset, WF_VIEW_RESHAPE, NULL);
    weft_tensor *copy;
    rc = wo__copy_to_new(&copy, t, (weft_dtype)t->dtype, t->device);
    if (rc < 0)
        return rc;
    rc = wf__make_view(out, copy, shape, NULL, ndim, 0, WF_VIEW_RESHAPE, NULL);
    weft_tensor_release(copy);
    return rc;
}

WEFT_API int weft_flatten(weft_tensor **out, const weft_tensor *t, int start_dim, int end_dim)
{
    WF_CHECK_VIEW_ARGS("flatten", out, t);
    int s, e, rc;
    if ((rc = wf__wrap_dim(&s, start_dim, t->ndim, "flatten")) < 0 ||
        (rc = wf__wrap_dim(&e, end_dim, t->ndim, "flatten")) < 0)
        return rc;
    if (s > e)
        return wf__errorf(WEFT_EINVAL,
                          "flatten() has invalid args: start_dim cannot come after end_dim");
    if (t->ndim == 0) {
        int64_t one = 1;
        return weft_reshape(out, t, &one, 1);
    }
    if (s == e)
        return weft_alias(out, t);
    int64_t sizes[WEFT_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < s; i++)
        sizes[n++] = t->sizes[i];
    int64_t merged = 1;
    for (int i = s; i <= e; i++)
        if (__builtin_mul_overflow(merged, t->sizes[i], &merged)) /* possible only beside a 0 */
            return wf__errorf(WEFT_EOVERFLOW, "flatten: the merged size overflows int64");
    sizes[n++] = merged;
    for (int i = e + 1; i < t->ndim; i++)
        sizes[n++] = t->sizes[i];
    return weft_reshape(out, t, sizes, n);
}

/* ---------------------------------------------------------------- copies */

WEFT_API int weft_contiguous(weft_tensor **out, const weft_tensor *t)
{
    WF_CHECK_VIEW_ARGS("contiguous", out, t);
    if (t->layout)
        return wf__layout_view(out, t, &(weft_layout_view){.kind = WEFT_LAYOUT_VIEW_CONTIGUOUS,
                                                           .op = "contiguous", .shape = t->sizes,
                                                           .ndim = t->ndim});
    if (t->is_contiguous) {
        *out = weft_tensor_retain(t);
        return 0;
    }
    return wo__copy_to_new(out, t, (weft_dtype)t->dtype, t->device);
}

WEFT_API int weft_to_dtype(weft_tensor **out, const weft_tensor *t, weft_dtype dtype)
{
    WF_CHECK_TENSOR_ARGS("to_dtype", out, t);
    if ((int)dtype < 0 || dtype >= WEFT_NUM_DTYPES)
        return wf__errorf(WEFT_EINVAL, "to_dtype: invalid dtype %d", (int)dtype);
    return wo__copy_to_new(out, t, dtype, t->device);
}

/* A host tensor with the values of t, a strided tensor on another device.
 * Only a device's byte copies are used (no kernel of its own): the bytes
 * t's elements span come over as they are, are viewed with t's strides and
 * made contiguous on the host. */
static int stage_to_host(weft_tensor **out, const weft_tensor *t)
{
    int64_t item = (int64_t)weft_dtype_size(t->dtype);
    int64_t first = t->storage_offset, last = t->storage_offset;
    for (int i = 0; i < t->ndim; i++)
        last += (t->sizes[i] - 1) * t->strides[i]; /* views have no negative strides */
    int64_t span = last - first + 1;
    weft_tensor *bytes = NULL, *view = NULL;
    int rc = weft_empty(&bytes, &span, 1, (weft_dtype)t->dtype, WEFT_DEVICE_CPU);
    if (rc == 0)
        rc = wf__copy_bytes(weft_tensor_data_ptr(bytes), WEFT_DEVICE_CPU,
                            (const char *)t->storage->data.data + first * item, t->device,
                            (size_t)(span * item));
    if (rc == 0)
        rc = weft_as_strided(&view, bytes, t->sizes, t->strides, t->ndim, 0);
    if (rc == 0)
        rc = weft_contiguous(out, view);
    weft_tensor_release(view);
    weft_tensor_release(bytes);
    return rc;
}

WEFT_API int weft_to_device(weft_tensor **out, const weft_tensor *t, weft_device device)
{
    if (out && t && t->layout != WEFT_LAYOUT_STRIDED)
        return wf__layout_to_device(out, t, device);
    WF_CHECK_TENSOR_ARGS("to_device", out, t);
    if (weft_device_equal(device, t->device)) {
        *out = weft_tensor_retain(t);
        return 0;
    }
    int rc = wf__check_device(device, "to_device");
    if (rc < 0)
        return rc;
    /* the values move as one block of bytes through the device interfaces:
     * a strided source is made contiguous first, on the host */
    weft_tensor *source = NULL;
    if (t->is_contiguous)
        source = weft_tensor_retain(t);
    else if (t->device.type == WEFT_DEVICE_TYPE_CPU)
        rc = weft_contiguous(&source, t);
    else
        rc = stage_to_host(&source, t);
    if (rc == 0 && weft_device_equal(device, source->device)) {
        *out = source; /* staging to the host was the whole move */
        return 0;
    }
    if (rc == 0)
        rc = weft_empty(out, t->sizes, t->ndim, (weft_dtype)t->dtype, device);
    if (rc == 0)
        rc = wf__copy_bytes(weft_tensor_data_ptr(*out), device, weft_tensor_data_ptr(source),
                            source->device, (size_t)t->numel * weft_dtype_size(t->dtype));
    weft_tensor_release(source);
    if (rc < 0) {
        weft_tensor_release(*out);
        *out = NULL;
    }
    return rc;
}

WEFT_API int weft_tensor_item(const weft_tensor *t, double *value)
{
    if (!t || !value)
        return wf__errorf(WEFT_EINVAL, "item: NULL argument");
    if (t->numel != 1)
        return wf__errorf(WEFT_EINVAL,
                          "item: a tensor with %lld elements cannot be converted to a scalar",
                          (long long)t->numel);
    weft_tensor *strided = NULL, *host = NULL;
    int rc = wf__layout_strided(&strided, t, "item");
    if (rc == 0)
        rc = weft_to_device(&host, strided, WEFT_DEVICE_CPU);
    weft_tensor_release(strided);
    if (rc < 0)
        return rc;
    *value = wf__load_double(weft_tensor_data_ptr(host), (weft_dtype)host->dtype);
    weft_tensor_release(host);
    return 0;
}
