/* interop/dlpack/export.c — weft tensors described as DLPack managed
 * tensors, zero-copy.  Each export is one allocation (the struct, then the
 * shape and strides arrays) holding one reference to the tensor's storage;
 * the consumer's call of the deleter drops it.  The deleter is pure C and
 * may run on any thread: no lock, no interpreter. */
#include <stdlib.h>
#include <string.h>

#include "interop/dlpack/dlpack_map.h"

typedef struct legacy_export {
    DLManagedTensor managed; /* first: the deleter receives its address */
    wf_storage *storage;
    int64_t dims[]; /* shape, then strides: 2 * ndim entries */
} legacy_export;

typedef struct versioned_export {
    DLManagedTensorVersioned managed;
    wf_storage *storage;
    int64_t dims[];
} versioned_export;

static void legacy_deleter(DLManagedTensor *self)
{
    if (!self)
        return;
    legacy_export *e = (legacy_export *)self;
    wf__storage_release(e->storage);
    free(e);
}

static void versioned_deleter(DLManagedTensorVersioned *self)
{
    if (!self)
        return;
    versioned_export *e = (versioned_export *)self;
    wf__storage_release(e->storage);
    free(e);
}

/* Checks t and works out its DLPack dtype and device. */
static int describe(DLDataType *dtype, DLDevice *device, const weft_tensor *t, const char *op)
{
    if (!t)
        return wf__errorf(WEFT_EINVAL, "%s: t is NULL", op);
    /* DLPack describes strided memory only: a plugin layout is refused
     * (converted first, it exports; the message says how) */
    if (t->layout != WEFT_LAYOUT_STRIDED)
        return wf__errorf(WEFT_EINVAL,
                          "%s: DLPack can only export strided tensors, this one has layout '%s' "
                          "(convert it with to_strided first)",
                          op, wf__layouts[t->layout].name);
    int rc = wi__dlpack_dtype_of(dtype, (weft_dtype)t->dtype, op);
    if (rc == 0)
        rc = wi__dlpack_device_of(device, t->device, op);
    return rc;
}

/* Fills dl from t; dims has room for 2 * t->ndim entries. */
static void fill(DLTensor *dl, int64_t *dims, const weft_tensor *t, DLDataType dtype,
                 DLDevice device)
{
    int ndim = t->ndim;
    /* the storage offset goes into data: several consumers ignore byte_offset */
    dl->data = weft_tensor_data_ptr(t);
    dl->device = device;
    dl->ndim = ndim;
    dl->dtype = dtype;
    dl->shape = dims;
    dl->strides = dims + ndim;
    dl->byte_offset = 0;
    if (ndim) {
        memcpy(dims, t->sizes, (size_t)ndim * sizeof *dims);
        memcpy(dims + ndim, t->strides, (size_t)ndim * sizeof *dims);
    }
}

WEFT_API int weft_to_dlpack(DLManagedTensor **out, weft_tensor *t)
{
    static const char op[] = "to_dlpack";
    if (!out)
        return wf__errorf(WEFT_EINVAL, "%s: out is NULL", op);
    *out = NULL;
    DLDataType dtype;
    DLDevice device;
    int rc = describe(&dtype, &device, t, op);
    if (rc < 0)
        return rc;
    if (t->storage->read_only)
        return wf__errorf(WEFT_ENOTSUP,
                          "%s: the tensor is read-only, which a legacy DLManagedTensor cannot "
                          "say; use weft_to_dlpack_versioned",
                          op);
    legacy_export *e = wf__malloc(sizeof *e + 2 * (size_t)t->ndim * sizeof(int64_t));
    if (!e)
        return wf__errorf(WEFT_ENOMEM, "%s: out of memory", op);
    fill(&e->managed.dl_tensor, e->dims, t, dtype, device);
    e->managed.manager_ctx = e;
    e->managed.deleter = legacy_deleter;
    wf__storage_retain(t->storage);
    e->storage = t->storage;
    *out = &e->managed;
    return 0;
}

WEFT_API int weft_to_dlpack_versioned(DLManagedTensorVersioned **out, weft_tensor *t,
                                      uint64_t flags)
{
    static const char op[] = "to_dlpack_versioned";
    const uint64_t allowed = DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED;
    if (!out)
        return wf__errorf(WEFT_EINVAL, "%s: out is NULL", op);
    *out = NULL;
    if (flags & ~allowed)
        return wf__errorf(WEFT_EINVAL,
                          "%s: flags 0x%llx hold bits other than READ_ONLY (0x1) and "
                          "IS_COPIED (0x2)",
                          op, (unsigned long long)flags);
    DLDataType dtype;
    DLDevice device;
    int rc = describe(&dtype, &device, t, op);
    if (rc < 0)
        return rc;
    versioned_export *e = wf__malloc(sizeof *e + 2 * (size_t)t->ndim * sizeof(int64_t));
    if (!e)
        return wf__errorf(WEFT_ENOMEM, "%s: out of memory", op);
    e->managed.version.major = WEFT_DLPACK_MAJOR_VERSION;
    e->managed.version.minor = WEFT_DLPACK_MINOR_VERSION;
    e->managed.manager_ctx = e;
    e->managed.deleter = versioned_deleter;
    if (t->storage->read_only)
        flags |= DLPACK_FLAG_BITMASK_READ_ONLY;
    e->managed.flags = flags;
    fill(&e->managed.dl_tensor, e->dims, t, dtype, device);
    wf__storage_retain(t->storage);
    e->storage = t->storage;
    *out = &e->managed;
    return 0;
}

WEFT_API int weft_tensor_dlpack_device(const weft_tensor *t, int32_t *device_type,
                                       int32_t *device_id)
{
    static const char op[] = "dlpack_device";
    if (!t || !device_type || !device_id)
        return wf__errorf(WEFT_EINVAL, "%s: NULL argument", op);
    DLDevice device;
    int rc = wi__dlpack_device_of(&device, t->device, op);
    if (rc < 0)
        return rc;
    *device_type = (int32_t)device.device_type;
    *device_id = device.device_id;
    return 0;
}
