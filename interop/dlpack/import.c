/* interop/dlpack/import.c — DLPack managed tensors wrapped as weft tensors,
 * zero-copy.  The managed tensor is always consumed: its deleter runs
 * exactly once, from the storage's last release on success and before
 * returning on failure.  Everything the producer sent is checked before
 * weft trusts it; nothing here is proportional to the number of elements. */
#include <stdio.h>
#include <string.h>

#include "interop/dlpack/dlpack_map.h"

/* weft_data_ptr deleters: data is the first element, ctx the managed tensor. */
static void release_legacy(void *data, void *ctx)
{
    (void)data;
    DLManagedTensor *m = ctx;
    m->deleter(m);
}

static void release_versioned(void *data, void *ctx)
{
    (void)data;
    DLManagedTensorVersioned *m = ctx;
    m->deleter(m);
}

/* What a DLTensor describes, once checked. */
typedef struct described {
    int ndim;
    weft_dtype dtype;
    weft_device device;
    int64_t sizes[WEFT_MAX_DIMS];
    int64_t strides[WEFT_MAX_DIMS];
    void *first;   /* data + byte_offset */
    size_t nbytes; /* from the first element to the end of the last */
} described;

static int check_shape(described *d, const DLTensor *dl, const char *op)
{
    int ndim = dl->ndim;
    if (ndim < 0 || ndim > WEFT_MAX_DIMS)
        return wf__errorf(WEFT_EINVAL, "%s: dl_tensor.ndim is %d; weft accepts 0 to %d", op,
                          ndim, WEFT_MAX_DIMS);
    if (ndim > 0 && !dl->shape)
        return wf__errorf(WEFT_EINVAL, "%s: dl_tensor.shape is NULL but ndim is %d", op, ndim);
    d->ndim = ndim;
    /* Every size must be non-negative, and the product of the sizes must fit
     * even when a zero makes the count 0: the compact strides of such a shape
     * would overflow otherwise. */
    int64_t product = 1;
    for (int i = 0; i < ndim; i++) {
        int64_t size = dl->shape[i];
        if (size < 0)
            return wf__errorf(WEFT_EINVAL, "%s: dl_tensor.shape[%d] is %lld", op, i,
                              (long long)size);
        d->sizes[i] = size;
        if (__builtin_mul_overflow(product, size > 1 ? size : 1, &product)) {
            char buf[256];
            return wf__errorf(WEFT_EOVERFLOW, "%s: dl_tensor.shape %s overflows int64", op,
                              wf__shape_str(buf, sizeof buf, dl->shape, ndim));
        }
    }
    return 0;
}

/* Strides of dimensions that cannot be stepped along (size <= 1, or any
 * dimension of an empty tensor) are replaced by the compact ones: producers
 * write anything there.  NULL strides mean compact.  Sets *last to the
 * largest element index reached (-1 for an empty tensor). */
static int check_strides(described *d, const DLTensor *dl, int64_t *last, const char *op)
{
    int ndim = d->ndim;
    if (wf__contiguous_strides(d->strides, d->sizes, ndim) < 0) /* check_shape refused it */
        return WEFT_EOVERFLOW;
    *last = 0;
    for (int i = 0; i < ndim; i++)
        if (d->sizes[i] == 0) {
            *last = -1;
            return 0;
        }
    for (int i = 0; i < ndim; i++) {
        if (d->sizes[i] <= 1)
            continue;
        int64_t stride = dl->strides ? dl->strides[i] : d->strides[i], reach;
        if (stride < 0)
            return wf__errorf(WEFT_ENOTSUP,
                              "%s: dl_tensor.strides[%d] is %lld; weft does not support "
                              "negative strides (copy the array first)",
                              op, i, (long long)stride);
        if (__builtin_mul_overflow(d->sizes[i] - 1, stride, &reach) ||
            __builtin_add_overflow(*last, reach, last))
            return wf__errorf(WEFT_EOVERFLOW,
                              "%s: dl_tensor.shape and strides reach beyond int64 (dimension "
                              "%d: size %lld, stride %lld)",
                              op, i, (long long)d->sizes[i], (long long)stride);
        d->strides[i] = stride;
    }
    return 0;
}

/* Checks the pointer, offset and extent in bytes. */
static int check_data(described *d, const DLTensor *dl, int64_t last, const char *op)
{
    size_t item = weft_dtype_size(d->dtype);
    int64_t count; /* elements from the first to the last reached; 0 if empty */
    int64_t nbytes;
    /* last may be INT64_MAX itself (shape and strides that reach exactly
     * there): the count is then one past int64 */
    if (__builtin_add_overflow(last, 1, &count) ||
        __builtin_mul_overflow(count, (int64_t)item, &nbytes))
        return wf__errorf(WEFT_EOVERFLOW,
                          "%s: the extent of dl_tensor.shape and strides (elements 0 to "
                          "%lld, %zu bytes each) overflows int64",
                          op, (long long)last, item);
    d->nbytes = (size_t)nbytes;
    if (!dl->data) {
        if (count > 0)
            return wf__errorf(WEFT_EINVAL, "%s: dl_tensor.data is NULL but the tensor has elements",
                              op);
        d->first = NULL; /* an empty tensor needs no memory */
        return 0;
    }
    uintptr_t first, end;
    if (dl->byte_offset > (uint64_t)INT64_MAX ||
        __builtin_add_overflow((uintptr_t)dl->data, (uintptr_t)dl->byte_offset, &first) ||
        __builtin_add_overflow(first, (uintptr_t)nbytes, &end))
        return wf__errorf(WEFT_EOVERFLOW,
                          "%s: dl_tensor.data %p + byte_offset %llu + %lld bytes wraps around "
                          "the address space",
                          op, dl->data, (unsigned long long)dl->byte_offset, (long long)nbytes);
    /* weft's kernels load whole elements: a misaligned first element would
     * be undefined behaviour (and a fault on strict-alignment machines) */
    size_t align = weft_dtype_is_complex(d->dtype) ? item / 2 : item;
    if (count > 0 && first % align != 0)
        return wf__errorf(WEFT_EINVAL,
                          "%s: dl_tensor.data + byte_offset (%p + %llu) is not aligned to %zu "
                          "bytes, as %s elements must be",
                          op, dl->data, (unsigned long long)dl->byte_offset, align,
                          weft_dtype_name(d->dtype));
    d->first = (void *)first;
    return 0;
}

static int describe(described *d, const DLTensor *dl, const char *op)
{
    int64_t last;
    int rc = check_shape(d, dl, op);
    if (rc == 0)
        rc = wi__dlpack_dtype_to_weft(&d->dtype, dl->dtype, op);
    if (rc == 0)
        rc = check_strides(d, dl, &last, op);
    if (rc == 0)
        rc = check_data(d, dl, last, op);
    if (rc == 0)
        rc = wi__dlpack_device_to_weft(&d->device, dl->device, op);
    return rc;
}

/* The common part of both imports.  owner's deleter, when not NULL, gives
 * the managed tensor back to its producer: it runs exactly once, here on
 * failure, else when the storage dies. */
static int import(weft_tensor **out, const DLTensor *dl, bool read_only, weft_data_ptr owner,
                  const char *op)
{
    described d;
    int rc = describe(&d, dl, op);
    if (rc < 0)
        goto fail;
    owner.data = d.first;
    wf_storage *s = wf__storage_wrap(owner, d.nbytes, d.device);
    if (!s) {
        rc = wf__errorf(WEFT_ENOMEM, "%s: out of memory", op);
        goto fail;
    }
    s->read_only = read_only;
    rc = wf__tensor_make(out, s, d.sizes, d.strides, d.ndim, 0, d.dtype);
    wf__storage_release(s); /* the tensor holds it now; on failure this gives m back */
    return rc;
fail:
    if (owner.deleter)
        owner.deleter(owner.data, owner.ctx);
    return rc;
}

WEFT_API int weft_from_dlpack(weft_tensor **out, DLManagedTensor *m)
{
    static const char op[] = "from_dlpack";
    if (out)
        *out = NULL;
    if (!m)
        return wf__errorf(WEFT_EINVAL, "%s: m is NULL", op);
    weft_data_ptr owner = {NULL, m, m->deleter ? release_legacy : NULL};
    if (!out) {
        int rc = wf__errorf(WEFT_EINVAL, "%s: out is NULL", op);
        if (m->deleter)
            m->deleter(m);
        return rc;
    }
    return import(out, &m->dl_tensor, false, owner, op);
}

WEFT_API int weft_from_dlpack_versioned(weft_tensor **out, DLManagedTensorVersioned *m)
{
    static const char op[] = "from_dlpack_versioned";
    if (out)
        *out = NULL;
    if (!m)
        return wf__errorf(WEFT_EINVAL, "%s: m is NULL", op);
    /* Only version and deleter keep their place across majors: read the
     * major before anything else, and nothing else if it is not ours. */
    uint32_t major = m->version.major;
    if (major != WEFT_DLPACK_MAJOR_VERSION || !out) {
        int rc = !out ? wf__errorf(WEFT_EINVAL, "%s: out is NULL", op)
                      : wf__errorf(WEFT_ENOTSUP,
                                   "%s: DLPack major version %u is not supported (weft "
                                   "implements %d.%d); the tensor was given back to its producer",
                                   op, (unsigned)major, WEFT_DLPACK_MAJOR_VERSION,
                                   WEFT_DLPACK_MINOR_VERSION);
        if (m->deleter)
            m->deleter(m);
        return rc;
    }
    weft_data_ptr owner = {NULL, m, m->deleter ? release_versioned : NULL};
    bool read_only = (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
    return import(out, &m->dl_tensor, read_only, owner, op);
}
