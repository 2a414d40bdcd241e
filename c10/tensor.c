/* c10/tensor.c — tensor objects: creation, reference counting, metadata and
 * the caches (numel, contiguity, dispatch keys) that views keep current.
 * Views themselves are in c10/view.c; factories that fill, copies and
 * printing are operator-level code in ops/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c10/core.h"

WEFT_API const char *weft_format_shape(char *buf, size_t size, const int64_t *sizes, int ndim)
{
    return buf && size ? wf__shape_str(buf, size, sizes, ndim) : buf;
}

const char *wf__shape_str(char *buf, size_t size, const int64_t *sizes, int ndim)
{
    size_t n = 0;
    n += (size_t)snprintf(buf + n, size - n, "[");
    for (int i = 0; i < ndim && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%lld", i ? ", " : "", (long long)sizes[i]);
    if (n < size)
        snprintf(buf + n, size - n, "]");
    return buf;
}

int wf__wrap_dim(int *out, int dim, int ndim, const char *op)
{
    int rank = ndim > 0 ? ndim : 1; /* a 0-d tensor accepts dim 0 and -1, as in PyTorch */
    if (dim < -rank || dim >= rank)
        return wf__errorf(WEFT_ERANGE,
                          "%s: dimension out of range (expected to be in range of [%d, %d], but got %d)",
                          op, -rank, rank - 1, dim);
    *out = dim < 0 ? dim + rank : dim;
    return 0;
}

int wf__checked_numel(int64_t *numel, const int64_t *sizes, int ndim, const char *op)
{
    if (ndim < 0 || ndim > WEFT_MAX_DIMS)
        return wf__errorf(WEFT_EINVAL, "%s: ndim %d is out of range [0, %d]", op, ndim,
                          WEFT_MAX_DIMS);
    if (ndim > 0 && !sizes)
        return wf__errorf(WEFT_EINVAL, "%s: sizes is NULL but ndim is %d", op, ndim);
    /* the product of max(size, 1) must fit too, even when a size is 0:
     * it is the largest contiguous stride */
    int64_t n = 1, extent = 1;
    bool overflow = false;
    for (int i = 0; i < ndim; i++) {
        if (sizes[i] < 0)
            return wf__errorf(WEFT_EINVAL, "%s: negative size %lld in dimension %d", op,
                              (long long)sizes[i], i);
        /* after an overflow the wrapped extent may multiply without one:
         * the element count must not go on (it would overflow itself) */
        if (overflow || __builtin_mul_overflow(extent, sizes[i] > 1 ? sizes[i] : 1, &extent))
            overflow = true;
        else
            n *= sizes[i];
    }
    if (overflow) {
        char buf[256];
        return wf__errorf(WEFT_EOVERFLOW, "%s: the number of elements of shape %s overflows int64",
                          op, wf__shape_str(buf, sizeof buf, sizes, ndim));
    }
    *numel = n;
    return 0;
}

int wf__contiguous_strides(int64_t *strides, const int64_t *sizes, int ndim)
{
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        /* the outermost product is no stride: only the others must fit */
        if (i > 0 && __builtin_mul_overflow(s, sizes[i] > 1 ? sizes[i] : 1, &s)) {
            char buf[256];
            return wf__errorf(WEFT_EOVERFLOW, "the contiguous strides of shape %s overflow int64",
                              wf__shape_str(buf, sizeof buf, sizes, ndim));
        }
    }
    return 0;
}

void wf__tensor_refresh(weft_tensor *t)
{
    int64_t n = 1, expected = 1;
    bool contiguous = true;
    for (int i = t->ndim - 1; i >= 0; i--) {
        n *= t->sizes[i];
        if (t->sizes[i] != 1) {
            if (t->strides[i] != expected)
                contiguous = false;
            expected *= t->sizes[i];
        }
    }
    t->numel = n;
    t->is_contiguous = contiguous || n == 0;
}

int wf__tensor_set_geometry(weft_tensor *t, const int64_t *sizes, const int64_t *strides, int ndim)
{
    /* sizes/strides may alias the old arrays: copy through temporaries */
    int64_t tmp[2 * WEFT_MAX_DIMS];
    if (ndim)
        memcpy(tmp, sizes, (size_t)ndim * sizeof(int64_t));
    if (strides && ndim)
        memcpy(tmp + ndim, strides, (size_t)ndim * sizeof(int64_t));
    else if (wf__contiguous_strides(tmp + ndim, tmp, ndim) < 0)
        return WEFT_EOVERFLOW;
    int64_t *ns = t->inline_sizes, *nt = t->inline_strides;
    if (ndim > WF_INLINE_DIMS) {
        ns = wf__malloc(2 * (size_t)ndim * sizeof(int64_t));
        if (!ns)
            return wf__errorf(WEFT_ENOMEM, "out of memory for tensor metadata");
        nt = ns + ndim;
    }
    if (t->sizes && t->sizes != t->inline_sizes)
        free(t->sizes);
    memcpy(ns, tmp, (size_t)ndim * sizeof(int64_t));
    memcpy(nt, tmp + ndim, (size_t)ndim * sizeof(int64_t));
    t->sizes = ns;
    t->strides = nt;
    t->ndim = ndim;
    wf__tensor_refresh(t);
    return 0;
}

int wf__tensor_make(weft_tensor **out, wf_storage *s, const int64_t *sizes,
                    const int64_t *strides, int ndim, int64_t offset, weft_dtype dtype)
{
    weft_tensor *t = wf__malloc(sizeof *t);
    if (!t) {
        *out = NULL;
        return wf__errorf(WEFT_ENOMEM, "out of memory for a tensor");
    }
    atomic_init(&t->refcount, 1);
    t->sizes = NULL;
    t->dtype = (int8_t)dtype;
    t->device = s->device;
    t->keys = wf__dense_keys(s->device);
    t->storage_offset = offset;
    t->autograd_meta = NULL;
    t->view_base = NULL;
    t->is_view = false;
    t->layout = WEFT_LAYOUT_STRIDED;
    if (!strides && ndim <= WF_INLINE_DIMS) {
        /* the common case, a fresh contiguous tensor: no temporaries */
        int64_t stride = 1, n = 1;
        t->sizes = t->inline_sizes;
        t->strides = t->inline_strides;
        t->ndim = ndim;
        for (int i = ndim - 1; i >= 0; i--) {
            t->sizes[i] = sizes[i];
            t->strides[i] = stride;
            stride *= sizes[i] > 1 ? sizes[i] : 1;
            n *= sizes[i];
        }
        t->numel = n;
        t->is_contiguous = true;
    } else if (wf__tensor_set_geometry(t, sizes, strides, ndim) < 0) {
        free(t);
        *out = NULL;
        return WEFT_ENOMEM;
    }
    wf__storage_retain(s);
    t->storage = s;
    /* the offset in bytes overflows only for an empty view far into its
     * dimensions (a non-empty one lies inside its storage): it addresses
     * nothing, and points at the storage's start */
    int64_t bytes;
    if (__builtin_mul_overflow(offset, (int64_t)weft_dtype_size(dtype), &bytes))
        bytes = 0;
    t->data = s->data.data ? (char *)s->data.data + bytes : NULL;
    *out = t;
    return 0;
}

WEFT_API weft_tensor *weft_tensor_retain(const weft_tensor *t)
{
    weft_tensor *m = (weft_tensor *)t;
    if (m)
        atomic_fetch_add_explicit(&m->refcount, 1, memory_order_relaxed);
    return m;
}

WEFT_API void weft_tensor_release(weft_tensor *t)
{
    if (!t || atomic_fetch_sub_explicit(&t->refcount, 1, memory_order_acq_rel) != 1)
        return;
    if (t->autograd_meta) /* only the autograd layer sets it, having installed its hooks */
        wf__autograd_hooks.meta_free(t);
    weft_tensor_release(t->view_base); /* a root, never itself a view: no deep recursion */
    wf__storage_release(t->storage);
    if (t->sizes != t->inline_sizes)
        free(t->sizes);
    free(t);
}

WEFT_API int weft_tensor_list_new(weft_tensor ***out, int len)
{
    if (!out)
        return wf__errorf(WEFT_EINVAL, "tensor_list_new: out is NULL");
    *out = NULL;
    if (len < 0)
        return wf__errorf(WEFT_EINVAL, "tensor_list_new: negative length %d", len);
    /* one entry even for an empty list, so that the result is never NULL */
    *out = wf__calloc(len > 0 ? (size_t)len : 1, sizeof(weft_tensor *));
    if (!*out)
        return wf__errorf(WEFT_ENOMEM, "tensor_list_new: out of memory for %d entries", len);
    return 0;
}

WEFT_API void weft_tensor_list_free(weft_tensor **list, int len)
{
    if (!list)
        return;
    for (int i = 0; i < len; i++)
        weft_tensor_release(list[i]);
    free(list);
}

WEFT_API int weft_empty(weft_tensor **out, const int64_t *sizes, int ndim, weft_dtype dtype,
                        weft_device device)
{
    if (!out)
        return wf__errorf(WEFT_EINVAL, "empty: out is NULL");
    *out = NULL;
    if ((int)dtype < 0 || dtype >= WEFT_NUM_DTYPES)
        return wf__errorf(WEFT_EINVAL, "empty: invalid dtype %d", (int)dtype);
    int64_t numel;
    int rc = wf__checked_numel(&numel, sizes, ndim, "empty");
    if (rc < 0)
        return rc;
    size_t item = weft_dtype_size(dtype), nbytes;
    if (__builtin_mul_overflow((size_t)numel, item, &nbytes) || nbytes > (size_t)INT64_MAX)
        return wf__errorf(WEFT_EOVERFLOW, "empty: %lld elements of %s overflow the byte size",
                          (long long)numel, weft_dtype_name(dtype));
    if (device.type != WEFT_DEVICE_TYPE_CPU || device.index != 0) {
        rc = wf__check_device(device, "empty");
        if (rc < 0)
            return rc;
    }
    wf_storage *s;
    rc = wf__storage_new(&s, nbytes, device);
    if (rc < 0)
        return rc;
    rc = wf__tensor_make(out, s, sizes, NULL, ndim, 0, dtype);
    wf__storage_release(s); /* the tensor holds it now, or nothing does */
    return rc;
}

WEFT_API int weft_empty_like(weft_tensor **out, const weft_tensor *t)
{
    if (!t) {
        if (out)
            *out = NULL;
        return wf__errorf(WEFT_EINVAL, "empty_like: t is NULL");
    }
    return weft_empty(out, t->sizes, t->ndim, (weft_dtype)t->dtype, t->device);
}

typedef struct blob_owner {
    void (*deleter)(void *ctx);
    void *ctx;
} blob_owner;

static void blob_release(void *data, void *ctx)
{
    (void)data;
    blob_owner *o = ctx;
    o->deleter(o->ctx);
    free(o);
}

WEFT_API int weft_from_blob(weft_tensor **out, void *data, const int64_t *sizes,
                            const int64_t *strides, int ndim, weft_dtype dtype,
                            weft_device device, void (*deleter)(void *ctx), void *deleter_ctx)
{
    int rc;
    blob_owner *owner = NULL;
    if (out)
        *out = NULL;
    if (!out) {
        rc = wf__errorf(WEFT_EINVAL, "from_blob: out is NULL");
        goto fail;
    }
    if ((int)dtype < 0 || dtype >= WEFT_NUM_DTYPES) {
        rc = wf__errorf(WEFT_EINVAL, "from_blob: invalid dtype %d", (int)dtype);
        goto fail;
    }
    int64_t numel;
    if ((rc = wf__checked_numel(&numel, sizes, ndim, "from_blob")) < 0)
        goto fail;
    if (!data && numel > 0) {
        rc = wf__errorf(WEFT_EINVAL, "from_blob: data is NULL for %lld elements", (long long)numel);
        goto fail;
    }
    if (device.type != WEFT_DEVICE_TYPE_CPU || device.index != 0)
        if ((rc = wf__check_device(device, "from_blob")) < 0)
            goto fail;
    /* the extent in elements that the view reaches */
    int64_t extent = numel > 0 ? 1 : 0;
    for (int i = 0; i < ndim && numel > 0; i++) {
        int64_t st = strides ? strides[i] : 0, reach;
        if (st < 0) {
            rc = wf__errorf(WEFT_EINVAL, "from_blob: negative stride %lld in dimension %d",
                            (long long)st, i);
            goto fail;
        }
        if (!strides)
            continue;
        if (__builtin_mul_overflow(sizes[i] - 1, st, &reach) ||
            __builtin_add_overflow(extent, reach, &extent)) {
            rc = wf__errorf(WEFT_EOVERFLOW, "from_blob: sizes and strides overflow int64");
            goto fail;
        }
    }
    if (!strides)
        extent = numel;
    size_t nbytes;
    if (__builtin_mul_overflow((size_t)extent, weft_dtype_size(dtype), &nbytes)) {
        rc = wf__errorf(WEFT_EOVERFLOW, "from_blob: the byte extent overflows");
        goto fail;
    }
    weft_data_ptr dp = {data, NULL, NULL};
    if (deleter) {
        owner = wf__malloc(sizeof *owner);
        if (!owner) {
            rc = wf__errorf(WEFT_ENOMEM, "from_blob: out of memory");
            goto fail;
        }
        owner->deleter = deleter;
        owner->ctx = deleter_ctx;
        dp.ctx = owner;
        dp.deleter = blob_release;
    }
    wf_storage *s = wf__storage_wrap(dp, nbytes, device);
    if (!s) {
        free(owner);
        owner = NULL;
        rc = wf__errorf(WEFT_ENOMEM, "from_blob: out of memory");
        goto fail;
    }
    rc = wf__tensor_make(out, s, sizes, strides, ndim, 0, dtype);
    wf__storage_release(s); /* on failure this runs the deleter */
    return rc;
fail:
    if (deleter)
        deleter(deleter_ctx);
    return rc;
}

WEFT_API int weft_tensor_ndim(const weft_tensor *t)
{
    return t ? t->ndim : -1;
}

WEFT_API const int64_t *weft_tensor_sizes(const weft_tensor *t)
{
    return t ? t->sizes : NULL;
}

WEFT_API const int64_t *weft_tensor_strides(const weft_tensor *t)
{
    /* a plugin layout has no strides to show */
    return t && t->layout == WEFT_LAYOUT_STRIDED ? t->strides : NULL;
}

WEFT_API int64_t weft_tensor_size(const weft_tensor *t, int dim)
{
    if (!t || t->ndim == 0 || dim < -t->ndim || dim >= t->ndim)
        return -1;
    return t->sizes[dim < 0 ? dim + t->ndim : dim];
}

WEFT_API int64_t weft_tensor_stride(const weft_tensor *t, int dim)
{
    if (!t || t->ndim == 0 || dim < -t->ndim || dim >= t->ndim || t->layout)
        return -1;
    return t->strides[dim < 0 ? dim + t->ndim : dim];
}

WEFT_API int64_t weft_tensor_numel(const weft_tensor *t)
{
    return t ? t->numel : 0;
}

WEFT_API weft_dtype weft_tensor_dtype(const weft_tensor *t)
{
    return t ? (weft_dtype)t->dtype : WEFT_DTYPE_UNSET;
}

WEFT_API weft_device weft_tensor_device(const weft_tensor *t)
{
    return t ? t->device : WEFT_DEVICE_CPU;
}

WEFT_API int64_t weft_tensor_storage_offset(const weft_tensor *t)
{
    return t ? t->storage_offset : 0;
}

WEFT_API void *weft_tensor_data_ptr(const weft_tensor *t)
{
    return t ? t->data : NULL;
}

WEFT_API bool weft_tensor_is_contiguous(const weft_tensor *t)
{
    return t && t->is_contiguous;
}

WEFT_API bool weft_tensor_shares_storage(const weft_tensor *a, const weft_tensor *b)
{
    return a && b && a->storage == b->storage;
}

WEFT_API uint32_t weft_tensor_version(const weft_tensor *t)
{
    return t ? atomic_load_explicit(&t->storage->version, memory_order_relaxed) : 0;
}

WEFT_API bool weft_tensor_is_read_only(const weft_tensor *t)
{
    return t && t->storage->read_only;
}

WEFT_API weft_keyset weft_tensor_keys(const weft_tensor *t)
{
    return t ? t->keys : 0;
}

WEFT_API void weft_tensor_bump_version(const weft_tensor *t)
{
    if (t)
        atomic_fetch_add_explicit(&t->storage->version, 1, memory_order_relaxed);
}

WEFT_API int weft_tensor_resize(weft_tensor *t, const int64_t *sizes, int ndim)
{
    if (!t)
        return wf__errorf(WEFT_EINVAL, "resize: tensor is NULL");
    if (wf__require_strided(t, "resize") < 0)
        return WEFT_EINVAL;
    int64_t numel;
    int rc = wf__checked_numel(&numel, sizes, ndim, "resize");
    if (rc < 0)
        return rc;
    size_t item = weft_dtype_size(t->dtype), need;
    if (__builtin_mul_overflow((size_t)(numel + t->storage_offset), item, &need))
        return wf__errorf(WEFT_EOVERFLOW, "resize: byte size overflows");
    if (need > t->storage->nbytes) {
        if (atomic_load(&t->storage->refcount) != 1)
            return wf__errorf(WEFT_EINVAL,
                              "resize: cannot grow a storage shared with other views");
        wf_storage *s;
        rc = wf__storage_new(&s, (size_t)numel * item, t->device);
        if (rc < 0)
            return rc;
        rc = wf__tensor_set_geometry(t, sizes, NULL, ndim);
        if (rc < 0) {
            wf__storage_release(s);
            return rc;
        }
        atomic_store(&s->version, atomic_load(&t->storage->version));
        wf__storage_release(t->storage);
        t->storage = s;
        t->storage_offset = 0;
        t->data = s->data.data;
        return 0;
    }
    return wf__tensor_set_geometry(t, sizes, NULL, ndim);
}

WEFT_API int weft_tensor_get(const weft_tensor *t, const int64_t *index, double *value)
{
    if (!t || !value || (t->ndim > 0 && !index))
        return wf__errorf(WEFT_EINVAL, "tensor_get: NULL argument");
    if (wf__require_strided(t, "tensor_get") < 0)
        return WEFT_EINVAL;
    if (t->device.type != WEFT_DEVICE_TYPE_CPU)
        return wf__errorf(WEFT_EDEVICE, "tensor_get: the tensor is not on the host");
    int64_t off = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (index[i] < 0 || index[i] >= t->sizes[i])
            return wf__errorf(WEFT_ERANGE,
                              "tensor_get: index %lld is out of bounds for dimension %d with size %lld",
                              (long long)index[i], i, (long long)t->sizes[i]);
        off += index[i] * t->strides[i];
    }
    const char *base = weft_tensor_data_ptr(t);
    *value = wf__load_double(base + off * (int64_t)weft_dtype_size(t->dtype), (weft_dtype)t->dtype);
    return 0;
}

WEFT_API int weft_broadcast_shapes(int64_t *out, int *nout, const int64_t *a, int na,
                                   const int64_t *b, int nb)
{
    if (!out || !nout || (na && !a) || (nb && !b) || na < 0 || nb < 0)
        return wf__errorf(WEFT_EINVAL, "broadcast_shapes: NULL or negative argument");
    int n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int64_t sa = i < n - na ? 1 : a[i - (n - na)];
        int64_t sb = i < n - nb ? 1 : b[i - (n - nb)];
        if (sa != sb && sa != 1 && sb != 1) {
            char bufa[256], bufb[256];
            return wf__errorf(WEFT_ESHAPE,
                              "the size of tensor a (%lld) must match the size of tensor b (%lld) "
                              "at non-singleton dimension %d: shapes %s and %s do not broadcast",
                              (long long)sa, (long long)sb, i, wf__shape_str(bufa, sizeof bufa, a, na),
                              wf__shape_str(bufb, sizeof bufb, b, nb));
        }
        out[i] = sa == 1 ? sb : sa;
    }
    *nout = n;
    return 0;
}
