/* c10/view.c — views (new tensor objects over the same storage, so they
 * share data and version) and the copies that fall back from them:
 * contiguous, reshape, to_dtype, to_device.  Geometry only: element work is
 * c10/convert.c's on the host and the copy_ operator's elsewhere. */
#include <stdlib.h>
#include <string.h>

#include "c10/core.h"

/* Entry checks shared by every function here: out is cleared first so that
 * it is NULL on every error path. */

/* Every view is made here.  kind (and perm, for permutations) tell autograd
 * how the gradient flows back when t takes part in it; for other tensors
 * that costs one bit test. */
int wf__make_view(weft_tensor **out, const weft_tensor *t, const int64_t *sizes,
                        const int64_t *strides, int ndim, int64_t offset, wf_view_kind kind,
                        const int64_t *perm)
{
    int rc = wf__tensor_make(out, t->storage, sizes, strides, ndim, offset, (weft_dtype)t->dtype);
    if (rc < 0)
        return rc;
    /* ADInplaceOrView: a view whose root gains history later (it starts
     * requiring grad, or an in-place write records a node) must take that
     * history before an operator uses it; the autograd layer's kernel for
     * this key does it (autograd/views.c), so the dispatcher need not look */
    (*out)->keys = (t->keys & ~WF_AUTOGRAD_KEYS) | WEFT_KEYSET_BIT(WEFT_KEY_ADINPLACE_OR_VIEW);
    /* every view knows its root, tracked or not: an in-place write through
     * it must reach the root's history (t.select(0, 1).copy_(src)) */
    (*out)->is_view = true;
    (*out)->view_base = weft_tensor_retain(t->view_base ? t->view_base : t);
    /* autograd has nothing to record for a source it never touched (no
     * metadata, no Autograd key): the inference path pays this test only */
    if ((t->autograd_meta || (t->keys & WF_AUTOGRAD_KEYS)) && wf__autograd_hooks.on_view &&
        (rc = wf__autograd_hooks.on_view(*out, t, kind, perm, ndim)) < 0) {
        weft_tensor_release(*out);
        *out = NULL;
    }
    return rc;
}

#define make_view(out, t, sizes, strides, ndim, offset, kind) \
    wf__make_view(out, t, sizes, strides, ndim, offset, kind, NULL)

/* t's storage offset moved k steps along stride: only an empty tensor's
 * can overflow (a non-empty one's elements lie inside its storage, whose
 * byte size fits), and an empty view's offset addresses nothing, so it
 * keeps t's (fuzz_call_boxed: pad of an empty tensor with dimensions of
 * 2^31 narrowed its output at 2^62 elements). */
static int64_t moved_offset(const weft_tensor *t, int64_t k, int64_t stride)
{
    int64_t step, moved;
    if (__builtin_mul_overflow(k, stride, &step) ||
        __builtin_add_overflow(t->storage_offset, step, &moved))
        return t->storage_offset;
    return moved;
}

/* A view of a plugin layout's tensor whose request is a shape alone. */
static int layout_shape_view(weft_tensor **out, const weft_tensor *t, int kind, const char *op,
                             const int64_t *shape, int ndim)
{
    return wf__layout_view(out, t,
                           &(weft_layout_view){.kind = kind, .op = op, .shape = shape, .ndim = ndim});
}

/* ------------------------------------------------------------ view/reshape */

/* Resolves a -1 in sizes against numel (PyTorch's infer_size), then
 * refuses, as weft_empty does, a shape whose strides would overflow int64:
 * an empty tensor may take a shape such as [0, 2, 2^62, 2] whose elements
 * fit but whose contiguous strides do not. */
int wf__infer_size(int64_t *shape, const int64_t *sizes, int ndim, int64_t numel,
                      const char *op)
{
    if (ndim < 0 || ndim > WEFT_MAX_DIMS)
        return wf__errorf(WEFT_EINVAL, "%s: ndim %d is out of range [0, %d]", op, ndim,
                          WEFT_MAX_DIMS);
    if (ndim > 0 && !sizes)
        return wf__errorf(WEFT_EINVAL, "%s: sizes is NULL but ndim is %d", op, ndim);
    int infer = -1;
    int64_t product = 1;
    bool overflow = false;
    for (int i = 0; i < ndim; i++) {
        shape[i] = sizes[i];
        if (sizes[i] == -1) {
            if (infer >= 0)
                return wf__errorf(WEFT_EINVAL, "%s: only one dimension can be inferred", op);
            infer = i;
        } else if (sizes[i] < 0) {
            return wf__errorf(WEFT_EINVAL, "%s: invalid shape dimension %lld", op,
                              (long long)sizes[i]);
        } else if (__builtin_mul_overflow(product, sizes[i], &product)) {
            overflow = true;
        }
    }
    char buf[256];
    for (int i = 0; i < ndim; i++)
        if (sizes[i] == 0) /* a zero makes the product 0 even past an overflow */
            overflow = false, product = 0;
    if (infer >= 0 && product == 0)
        return wf__errorf(WEFT_ESHAPE,
                          "%s: cannot reshape tensor of %lld elements into shape %s because the "
                          "unspecified dimension size -1 can be any value and is ambiguous",
                          op, (long long)numel, wf__shape_str(buf, sizeof buf, sizes, ndim));
    /* an empty shape's contiguous strides are the products of max(size,
     * 1), which must fit too: [0, 2^40, 2^40] has 0 elements but a stride
     * of 2^80 (wf__checked_numel checks both) */
    int64_t n;
    if (infer >= 0 && !overflow && numel % product == 0) {
        shape[infer] = numel / product;
        return wf__checked_numel(&n, shape, ndim, op);
    }
    if (infer < 0 && !overflow && product == numel)
        return wf__checked_numel(&n, shape, ndim, op);
    return wf__errorf(WEFT_ESHAPE, "%s: shape '%s' is invalid for input of size %lld", op,
                      wf__shape_str(buf, sizeof buf, sizes, ndim), (long long)numel);
}

/* PyTorch's computeStride: strides that view t's elements with shape, or
 * false when some new dimension would span two non-mergeable chunks of t. */
bool wf__view_strides(int64_t *strides, const weft_tensor *t, const int64_t *shape, int ndim)
{
    const int64_t *old_sizes = t->sizes, *old_strides = t->strides;
    if (t->ndim == 0) {
        for (int i = 0; i < ndim; i++)
            strides[i] = 1;
        return true;
    }
    if (t->numel == 0) {
        bool same = ndim == t->ndim && memcmp(shape, old_sizes, (size_t)ndim * sizeof *shape) == 0;
        if (same)
            memcpy(strides, old_strides, (size_t)ndim * sizeof *strides);
        else
            (void)wf__contiguous_strides(strides, shape, ndim); /* infer_size checked them */
        return true;
    }
    int view_d = ndim - 1;
    int64_t chunk_base_stride = old_strides[t->ndim - 1];
    int64_t tensor_numel = 1, view_numel = 1;
    for (int tensor_d = t->ndim - 1; tensor_d >= 0; tensor_d--) {
        tensor_numel *= old_sizes[tensor_d];
        /* a chunk ends where t's next-outer dim does not continue this one */
        if (tensor_d == 0 || (old_sizes[tensor_d - 1] != 1 &&
                              old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
            while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
                strides[view_d] = view_numel * chunk_base_stride;
                view_numel *= shape[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel)
                return false;
            if (tensor_d > 0) {
                chunk_base_stride = old_strides[tensor_d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

WEFT_API int weft_view(weft_tensor **out, const weft_tensor *t, const int64_t *sizes, int ndim)
{
    WF_CHECK_VIEW_ARGS("view", out, t);
    int64_t shape[WEFT_MAX_DIMS], strides[WEFT_MAX_DIMS];
    int rc = wf__infer_size(shape, sizes, ndim, t->numel, "view");
    if (rc < 0)
        return rc;
    if (t->layout)
        return layout_shape_view(out, t, WEFT_LAYOUT_VIEW_SHAPE, "view", shape, ndim);
    if (!wf__view_strides(strides, t, shape, ndim))
        return wf__errorf(WEFT_ESHAPE,
                          "view: view size is not compatible with input tensor's size and stride "
                          "(at least one dimension spans across two contiguous subspaces). Use "
                          "reshape instead.");
    return make_view(out, t, shape, strides, ndim, t->storage_offset, WF_VIEW_RESHAPE);
}

/* ------------------------------------------------------- reordering dims */

WEFT_API int weft_permute(weft_tensor **out, const weft_tensor *t, const int64_t *dims, int ndim)
{
    WF_CHECK_VIEW_ARGS("permute", out, t);
    if (ndim != t->ndim)
        return wf__errorf(WEFT_EINVAL,
                          "permute: the number of dims (%d) does not match the tensor's rank (%d)",
                          ndim, t->ndim);
    if (ndim > 0 && !dims)
        return wf__errorf(WEFT_EINVAL, "permute: dims is NULL");
    int64_t sizes[WEFT_MAX_DIMS], strides[WEFT_MAX_DIMS], perm[WEFT_MAX_DIMS];
    bool seen[WEFT_MAX_DIMS] = {false};
    for (int i = 0; i < ndim; i++) {
        int d;
        if (dims[i] < INT32_MIN || dims[i] > INT32_MAX)
            return wf__errorf(WEFT_ERANGE, "permute: dimension %lld out of range",
                              (long long)dims[i]);
        int rc = wf__wrap_dim(&d, (int)dims[i], ndim, "permute");
        if (rc < 0)
            return rc;
        if (seen[d])
            return wf__errorf(WEFT_EINVAL, "permute: repeated dim %d in the permutation", d);
        seen[d] = true;
        perm[i] = d;
        sizes[i] = t->sizes[d];
        strides[i] = t->strides[d];
    }
    if (t->layout)
        return wf__layout_view(out, t, &(weft_layout_view){.kind = WEFT_LAYOUT_VIEW_PERMUTE,
                                                           .op = "permute", .shape = sizes,
                                                           .ndim = ndim, .dims = perm});
    return wf__make_view(out, t, sizes, strides, ndim, t->storage_offset, WF_VIEW_PERMUTE, perm);
}

WEFT_API int weft_transpose(weft_tensor **out, const weft_tensor *t, int dim0, int dim1)
{
    WF_CHECK_VIEW_ARGS("transpose", out, t);
    int d0, d1, rc;
    if ((rc = wf__wrap_dim(&d0, dim0, t->ndim, "transpose")) < 0 ||
        (rc = wf__wrap_dim(&d1, dim1, t->ndim, "transpose")) < 0)
        return rc;
    int64_t sizes[WEFT_MAX_DIMS], strides[WEFT_MAX_DIMS];
    memcpy(sizes, t->sizes, (size_t)t->ndim * sizeof *sizes);
    memcpy(strides, t->strides, (size_t)t->ndim * sizeof *strides);
    int64_t perm[WEFT_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++)
        perm[i] = i;
    if (t->ndim > 0) { /* a 0-d tensor accepts dims 0 and -1 and stays as it is */
        perm[d0] = d1, perm[d1] = d0;
        sizes[d0] = t->sizes[d1], sizes[d1] = t->sizes[d0];
        strides[d0] = t->strides[d1], strides[d1] = t->strides[d0];
    }
    if (t->layout)
        return wf__layout_view(out, t, &(weft_layout_view){.kind = WEFT_LAYOUT_VIEW_PERMUTE,
                                                           .op = "transpose", .shape = sizes,
                                                           .ndim = t->ndim, .dims = perm});
    return wf__make_view(out, t, sizes, strides, t->ndim, t->storage_offset, WF_VIEW_PERMUTE, perm);
}

WEFT_API int weft_t(weft_tensor **out, const weft_tensor *t)
{
    WF_CHECK_VIEW_ARGS("t", out, t);
    if (t->ndim > 2)
        return wf__errorf(WEFT_ESHAPE, "t() expects a tensor with <= 2 dimensions, but self is %dD",
                          t->ndim);
    return weft_transpose(out, t, 0, t->ndim < 2 ? 0 : 1);
}

/* ---------------------------------------------------------- sub-ranges */

WEFT_API int weft_slice(weft_tensor **out, const weft_tensor *t, int dim, int64_t start,
                        int64_t end, int64_t step)
{
    WF_CHECK_VIEW_ARGS("slice", out, t);
    if (t->ndim == 0)
        return wf__errorf(WEFT_ERANGE, "slice() cannot be applied to a 0-dim tensor.");
    int d;
    int rc = wf__wrap_dim(&d, dim, t->ndim, "slice");
    if (rc < 0)
        return rc;
    if (step <= 0)
        return wf__errorf(WEFT_EINVAL, "slice: step must be positive, got %lld", (long long)step);
    int64_t size = t->sizes[d];
    /* Python's clamping: negative bounds count from the end, then both are
     * clamped into [0, size] and end is at least start */
    if (start < 0)
        start += size;
    if (end < 0)
        end += size;
    start = start < 0 ? 0 : start > size ? size : start;
    end = end < start ? start : end > size ? size : end;
    int64_t length = end == start ? 0 : (end - start - 1) / step + 1;
    int64_t sizes[WEFT_MAX_DIMS], strides[WEFT_MAX_DIMS];
    memcpy(sizes, t->sizes, (size_t)t->ndim * sizeof *sizes);
    memcpy(strides, t->strides, (size_t)t->ndim * sizeof *strides);
    sizes[d] = length;
    if (t->layout)
        return wf__layout_view(out, t, &(weft_layout_view){.kind = WEFT_LAYOUT_VIEW_SLICE,
                                                           .op = "slice", .shape = sizes,
                                                           .ndim = t->ndim, .dim = d,
                                                           .start = start, .end = end,
                                                           .step = step});
    /* stride * step as PyTorch has it; a step so large that this overflows
     * leaves at most one element, whose stride is never used */
    if (__builtin_mul_overflow(t->strides[d], step, &strides[d]))
        strides[d] = t->strides[d];
    return make_view(out, t, sizes, strides, t->ndim, moved_offset(t, start, t->strides[d]), WF_VIEW_STRIDED);
}

WEFT_API int weft_narrow(weft_tensor **out, const weft_tensor *t, int dim, int64_t start,
                         int64_t length)
{
    WF_CHECK_VIEW_ARGS("narrow", out, t);
    if (t->ndim == 0)
        return wf__errorf(WEFT_ERANGE, "narrow() cannot be applied to a 0-dim tensor.");
    int d;
    int rc = wf__wrap_dim(&d, dim, t->ndim, "narrow");
    if (rc < 0)
        return rc;
    int64_t size = t->sizes[d];
    if (start < -size || start > size)
        return wf__errorf(WEFT_ERANGE,
                          "narrow: start (%lld) is out of range for dimension %d of size %lld",
                          (long long)start, d, (long long)size);
    if (start < 0)
        start += size;
    if (length < 0 || start > size - length)
        return wf__errorf(WEFT_ERANGE,
                          "narrow: start (%lld) + length (%lld) exceeds dimension size (%lld).",
                          (long long)start, (long long)length, (long long)size);
    return weft_slice(out, t, d, start, start + length, 1);
}

WEFT_API int weft_select(weft_tensor **out, const weft_tensor *t, int dim, int64_t index)
{
    WF_CHECK_VIEW_ARGS("select", out, t);
    if (t->ndim == 0)
        return wf__errorf(WEFT_ERANGE, "select() cannot be applied to a 0-dim tensor.");
    int d;
    int rc = wf__wrap_dim(&d, dim, t->ndim, "select");
    if (rc < 0)
        return rc;
    int64_t size = t->sizes[d];
    if (index < -size || index >= size) {
        char buf[256];
        return wf__errorf(WEFT_ERANGE,
                          "select(): index %lld out of range for tensor of size %s at dimension %d",
                          (long long)index, wf__shape_str(buf, sizeof buf, t->sizes, t->ndim), d);
    }
    if (index < 0)
        index += size;
    int64_t sizes[WEFT_MAX_DIMS], strides[WEFT_MAX_DIMS];
    for (int i = 0, j = 0; i < t->ndim; i++) {
        if (i == d)
            continue;
        sizes[j] = t->sizes[i];
        strides[j++] = t->strides[i];
    }
    if (t->layout)
        return wf__layout_view(out, t, &(weft_layout_view){.kind = WEFT_LAYOUT_VIEW_SELECT,
                                                           .op = "select", .shape = sizes,
                                                           .ndim = t->ndim - 1, .dim = d,
                                                           .index = index});
    return make_view(out, t, sizes, strides, t->ndim - 1,
                     moved_offset(t, index, t->strides[d]), WF_VIEW_STRIDED);
}

/* ----------------------------------------------------- adding/removing dims */

WEFT_API int weft_expand(weft_tensor **out, const weft_tensor *t, const int64_t *sizes, int ndim)
{
    WF_CHECK_VIEW_ARGS("expand", out, t);
    if (ndim > 0 && !sizes)
        return wf__errorf(WEFT_EINVAL, "expand: sizes is NULL");
    if (ndim > WEFT_MAX_DIMS)
        return wf__errorf(WEFT_EINVAL, "expand: %d sizes, more than the %d dims a tensor may have",
                          ndim, WEFT_MAX_DIMS);
    if (ndim < t->ndim) {
        char buf[256];
        return wf__errorf(WEFT_ESHAPE,
                          "expand: the number of sizes provided (%d) must be greater or equal to "
                          "the number of dimensions in the tensor (%d) of shape %s",
                          ndim, t->ndim, wf__shape_str(buf, sizeof buf, t->sizes, t->ndim));
    }
    int64_t new_sizes[WEFT_MAX_DIMS], new_strides[WEFT_MAX_DIMS];
    char want[256], have[256];
    for (int i = ndim - 1; i >= 0; i--) {
        int dim = t->ndim - (ndim - i); /* t's matching dim, or < 0 for a new one */
        int64_t size = dim >= 0 ? t->sizes[dim] : 1;
        /* a new dim of size 1 gets the stride a contiguous tensor would have
         * (never stepped along, so an overflow there does not matter); all
         * dims expanded from a 0-d tensor get 0, as in PyTorch */
        int64_t stride = t->ndim == 0 ? 0 : 1;
        if (dim >= 0)
            stride = t->strides[dim];
        else if (t->ndim > 0 && i < ndim - 1 &&
                 __builtin_mul_overflow(new_sizes[i + 1], new_strides[i + 1], &stride))
            stride = 1;
        int64_t target = sizes[i];
        if (target == -1) {
            if (dim < 0)
                return wf__errorf(WEFT_ESHAPE,
                                  "expand: the expanded size of the tensor (-1) isn't allowed in "
                                  "a leading, non-existing dimension %d",
                                  i);
            target = size;
        } else if (target < 0) {
            return wf__errorf(WEFT_EINVAL, "expand: invalid size %lld in dimension %d",
                              (long long)target, i);
        }
        if (size != target) {
            if (size != 1)
                return wf__errorf(WEFT_ESHAPE,
                                  "expand: the expanded size of the tensor (%lld) must match the "
                                  "existing size (%lld) at non-singleton dimension %d.  Target "
                                  "sizes: %s.  Tensor sizes: %s",
                                  (long long)target, (long long)size, i,
                                  wf__shape_str(want, sizeof want, sizes, ndim),
                                  wf__shape_str(have, sizeof have, t->sizes, t->ndim));
            stride = 0; /* every index reads the one element */
        }
        new_sizes[i] = target;
        new_strides[i] = stride;
    }
    int64_t numel;
    int rc = wf__checked_numel(&numel, new_sizes, ndim, "expand");
    if (rc < 0)
        return rc;
    if (t->layout)
        return layout_shape_view(out, t, WEFT_LAYOUT_VIEW_EXPAND, "expand", new_sizes, ndim);
    return make_view(out, t, new_sizes, new_strides, ndim, t->storage_offset, WF_VIEW_EXPAND);
}

WEFT_API int weft_squeeze(weft_tensor **out, const weft_tensor *t, int dim)
{
    WF_CHECK_VIEW_ARGS("squeeze", out, t);
    int only = -1;
    if (dim != WEFT_ALL_DIMS) {
        int rc = wf__wrap_dim(&only, dim, t->ndim, "squeeze");
        if (rc < 0)
            return rc;
    }
    int64_t sizes[WEFT_MAX_DIMS], strides[WEFT_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (t->sizes[i] == 1 && (only < 0 || only == i))
            continue;
        sizes[n] = t->sizes[i];
        strides[n++] = t->strides[i];
    }
    if (t->layout)
        return layout_shape_view(out, t, WEFT_LAYOUT_VIEW_SHAPE, "squeeze", sizes, n);
    return make_view(out, t, sizes, strides, n, t->storage_offset, WF_VIEW_RESHAPE);
}

WEFT_API int weft_unsqueeze(weft_tensor **out, const weft_tensor *t, int dim)
{
    WF_CHECK_VIEW_ARGS("unsqueeze", out, t);
    if (t->ndim >= WEFT_MAX_DIMS)
        return wf__errorf(WEFT_ESHAPE, "unsqueeze: a tensor cannot have more than %d dimensions",
                          WEFT_MAX_DIMS);
    int d;
    int rc = wf__wrap_dim(&d, dim, t->ndim + 1, "unsqueeze");
    if (rc < 0)
        return rc;
    int64_t sizes[WEFT_MAX_DIMS], strides[WEFT_MAX_DIMS];
    for (int i = 0, j = 0; i <= t->ndim; i++) {
        if (i == d) {
            sizes[i] = 1;
            /* the stride a contiguous tensor would have there */
            strides[i] = d < t->ndim ? t->sizes[d] * t->strides[d] : 1;
        } else {
            sizes[i] = t->sizes[j];
            strides[i] = t->strides[j++];
        }
    }
    if (t->layout) /* .dim: where the new dim is (a layout may need it: sparse) */
        return wf__layout_view(out, t,
                               &(weft_layout_view){.kind = WEFT_LAYOUT_VIEW_SHAPE,
                                                   .op = "unsqueeze", .shape = sizes,
                                                   .ndim = t->ndim + 1, .dim = d});
    return make_view(out, t, sizes, strides, t->ndim + 1, t->storage_offset, WF_VIEW_RESHAPE);
}

WEFT_API int weft_as_strided(weft_tensor **out, const weft_tensor *t, const int64_t *sizes,
                             const int64_t *strides, int ndim, int64_t storage_offset)
{
    WF_CHECK_TENSOR_ARGS("as_strided", out, t);
    int64_t numel;
    int rc = wf__checked_numel(&numel, sizes, ndim, "as_strided");
    if (rc < 0)
        return rc;
    if (ndim > 0 && !strides)
        return wf__errorf(WEFT_EINVAL, "as_strided: strides is NULL");
    if (storage_offset < 0)
        return wf__errorf(WEFT_EINVAL, "as_strided: negative storage offset %lld",
                          (long long)storage_offset);
    /* the last element's index, which must lie inside the storage */
    int64_t last = storage_offset;
    for (int i = 0; i < ndim; i++) {
        int64_t reach;
        if (strides[i] < 0)
            return wf__errorf(WEFT_EINVAL, "as_strided: negative stride %lld in dimension %d",
                              (long long)strides[i], i);
        if (numel > 0 && (__builtin_mul_overflow(sizes[i] - 1, strides[i], &reach) ||
                          __builtin_add_overflow(last, reach, &last)))
            return wf__errorf(WEFT_EOVERFLOW, "as_strided: sizes and strides overflow int64");
    }
    int64_t item = (int64_t)weft_dtype_size(t->dtype), end_bytes;
    if (numel > 0 && (__builtin_add_overflow(last, 1, &end_bytes) ||
                      __builtin_mul_overflow(end_bytes, item, &end_bytes) ||
                      (uint64_t)end_bytes > t->storage->nbytes)) {
        char buf[256];
        return wf__errorf(WEFT_ERANGE,
                          "as_strided: setting a storage of %zu bytes to size %s with offset "
                          "%lld reaches element %lld, outside the storage",
                          t->storage->nbytes, wf__shape_str(buf, sizeof buf, sizes, ndim),
                          (long long)storage_offset, (long long)last);
    }
    return make_view(out, t, sizes, strides, ndim, storage_offset, WF_VIEW_STRIDED);
}

WEFT_API int weft_alias(weft_tensor **out, const weft_tensor *t)
{
    WF_CHECK_VIEW_ARGS("alias", out, t);
    if (t->layout)
        return layout_shape_view(out, t, WEFT_LAYOUT_VIEW_SHAPE, "alias", t->sizes, t->ndim);
    return make_view(out, t, t->sizes, t->strides, t->ndim, t->storage_offset, WF_VIEW_RESHAPE);
}

