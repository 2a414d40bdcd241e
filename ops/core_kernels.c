/* ops/core_kernels.c — the few kernels the core provides itself,
 * registered under the "core" registrar at start-up: copy_ between any two
 * devices and dtypes (the core owns host memory and the device interfaces),
 * matmul as a composite of mm/bmm and views, so every backend that has mm
 * and bmm gets all of matmul's rank cases, and tile and take as composites
 * of repeat and of index_select, whose derivatives serve them too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/* copy_(self, src): same device and host → strided converting copy;
 * otherwise stage through the host with the device interfaces. */
static int copy_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor *dst = call->args[0].u.tensor;
    const weft_tensor *src = call->args[1].u.tensor;
    if (dst->device.type == WEFT_DEVICE_TYPE_CPU && src->device.type == WEFT_DEVICE_TYPE_CPU)
        return wf__host_copy_on(dst, src, weft_parallel_for);
    if (dst->numel == 0)
        return 0;
    bool dst_dev = dst->device.type != WEFT_DEVICE_TYPE_CPU;
    bool src_dev = src->device.type != WEFT_DEVICE_TYPE_CPU;
    /* strided views on one device: stage the bytes they span, copy on the
     * host, write the span back (the device needs no strided copy kernel) */
    if (((dst_dev && !dst->is_contiguous) || (src_dev && !src->is_contiguous)) &&
        (!dst_dev || !src_dev || weft_device_equal(dst->device, src->device)))
        return wo__run_on_host(call, dst_dev ? dst->device : src->device);
    weft_tensor *host_src = NULL, *host_dst = NULL;
    int rc = 0;
    if (src->device.type != WEFT_DEVICE_TYPE_CPU) {
        if (!src->is_contiguous)
            return wf__errorf(WEFT_ENOTSUP,
                              "copy_: a non-contiguous source on device '%s' cannot be staged "
                              "through the host by the core",
                              wf__device_types[src->device.type].name);
        rc = weft_empty(&host_src, src->sizes, src->ndim, (weft_dtype)src->dtype, WEFT_DEVICE_CPU);
        if (rc == 0)
            rc = wf__copy_bytes(weft_tensor_data_ptr(host_src), WEFT_DEVICE_CPU,
                                weft_tensor_data_ptr(src), src->device,
                                (size_t)src->numel * weft_dtype_size(src->dtype));
    } else {
        host_src = weft_tensor_retain(src);
    }
    if (rc == 0 && dst->device.type != WEFT_DEVICE_TYPE_CPU) {
        if (!dst->is_contiguous) {
            rc = wf__errorf(WEFT_ENOTSUP,
                            "copy_: a non-contiguous destination on device '%s' cannot be written "
                            "through the host by the core",
                            wf__device_types[dst->device.type].name);
        } else {
            rc = weft_empty(&host_dst, dst->sizes, dst->ndim, (weft_dtype)dst->dtype,
                            WEFT_DEVICE_CPU);
            if (rc == 0)
                rc = wf__host_copy_on(host_dst, host_src, weft_parallel_for);
            if (rc == 0)
                rc = wf__copy_bytes(weft_tensor_data_ptr(dst), dst->device,
                                    weft_tensor_data_ptr(host_dst), WEFT_DEVICE_CPU,
                                    (size_t)dst->numel * weft_dtype_size(dst->dtype));
        }
    } else if (rc == 0) {
        rc = wf__host_copy_on(dst, host_src, weft_parallel_for);
    }
    weft_tensor_release(host_src);
    weft_tensor_release(host_dst);
    return rc;
}

/* ------------------------------------------------------------ matmul */

static int unsqueeze_or_retain(weft_tensor **out, const weft_tensor *t, bool add, int dim)
{
    if (add)
        return weft_unsqueeze(out, t, dim);
    *out = weft_tensor_retain(t);
    return 0;
}

/* a [..., n, m] @ b [..., m, p] with both at least 2-D. */
static int batched_matmul(weft_tensor **out, const weft_tensor *a, const weft_tensor *b)
{
    int64_t n = a->sizes[a->ndim - 2], m = a->sizes[a->ndim - 1];
    int64_t m2 = b->sizes[b->ndim - 2], p = b->sizes[b->ndim - 1];
    if (m != m2) {
        char sa[256], sb[256];
        return wf__errorf(WEFT_ESHAPE, "matmul: shapes %s and %s cannot be multiplied (%lld != %lld)",
                          wf__shape_str(sa, sizeof sa, a->sizes, a->ndim),
                          wf__shape_str(sb, sizeof sb, b->sizes, b->ndim), (long long)m,
                          (long long)m2);
    }
    if (a->ndim == 2 && b->ndim == 2)
        return weft_mm(out, a, b);
    int64_t batch[WEFT_MAX_DIMS + 2], shape[WEFT_MAX_DIMS + 2];
    int nbatch;
    int rc;
    if (b->ndim == 2) {
        /* fold a's batch into its rows: one large mm instead of many small ones */
        weft_tensor *a2 = NULL, *r = NULL;
        int64_t rows = n;
        for (int i = 0; i < a->ndim - 2; i++)
            rows *= a->sizes[i];
        int64_t s2[2] = {rows, m};
        rc = weft_reshape(&a2, a, s2, 2);
        if (rc == 0)
            rc = weft_mm(&r, a2, b);
        if (rc == 0) {
            memcpy(shape, a->sizes, (size_t)(a->ndim - 1) * sizeof(int64_t));
            shape[a->ndim - 1] = p;
            rc = weft_view(out, r, shape, a->ndim);
        }
        weft_tensor_release(a2);
        weft_tensor_release(r);
        return rc;
    }
    rc = weft_broadcast_shapes(batch, &nbatch, a->sizes, a->ndim - 2, b->sizes, b->ndim - 2);
    if (rc < 0)
        return wf__errorf(rc, "matmul: batch dimensions do not broadcast: %s", weft_last_error());
    int64_t B = 1;
    for (int i = 0; i < nbatch; i++)
        B *= batch[i];
    weft_tensor *ea = NULL, *eb = NULL, *ra = NULL, *rb = NULL, *r = NULL;
    memcpy(shape, batch, (size_t)nbatch * sizeof(int64_t));
    shape[nbatch] = n;
    shape[nbatch + 1] = m;
    rc = weft_expand(&ea, a, shape, nbatch + 2);
    shape[nbatch] = m;
    shape[nbatch + 1] = p;
    if (rc == 0)
        rc = weft_expand(&eb, b, shape, nbatch + 2);
    int64_t s3a[3] = {B, n, m}, s3b[3] = {B, m, p};
    if (rc == 0)
        rc = weft_reshape(&ra, ea, s3a, 3);
    if (rc == 0)
        rc = weft_reshape(&rb, eb, s3b, 3);
    if (rc == 0)
        rc = weft_bmm(&r, ra, rb);
    if (rc == 0) {
        shape[nbatch] = n;
        shape[nbatch + 1] = p;
        rc = weft_view(out, r, shape, nbatch + 2);
    }
    weft_tensor_release(ea);
    weft_tensor_release(eb);
    weft_tensor_release(ra);
    weft_tensor_release(rb);
    weft_tensor_release(r);
    return rc;
}

static int matmul_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *a = call->args[0].u.tensor, *b = call->args[1].u.tensor;
    if (a->ndim == 0 || b->ndim == 0)
        return wf__errorf(WEFT_ESHAPE,
                          "matmul: both arguments need at least 1 dimension, but got %dD and %dD "
                          "tensors",
                          a->ndim, b->ndim);
    /* 1-D operands become matrices, and the added dimension is removed from
     * the result, as numpy.matmul and torch.matmul do */
    bool a_vec = a->ndim == 1, b_vec = b->ndim == 1;
    weft_tensor *a2 = NULL, *b2 = NULL, *r = NULL;
    int rc = unsqueeze_or_retain(&a2, a, a_vec, 0);
    if (rc == 0)
        rc = unsqueeze_or_retain(&b2, b, b_vec, 1);
    if (rc == 0)
        rc = batched_matmul(&r, a2, b2);
    weft_tensor_release(a2);
    weft_tensor_release(b2);
    if (rc < 0)
        return rc;
    weft_tensor *res = r;
    if (b_vec && rc == 0) {
        rc = weft_squeeze(&res, r, -1);
        weft_tensor_release(r);
        r = res;
    }
    if (a_vec && rc == 0) {
        rc = weft_squeeze(&res, r, r->ndim >= 2 ? -2 : -1);
        weft_tensor_release(r);
    }
    if (rc < 0)
        return rc;
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    call->rets[0].u.tensor = res;
    return 0;
}

/* ------------------------------------------------------ tile and take */

/* tile(self, dims): repeat with dims padded by leading 1s up to self's
 * rank (torch.tile).  A composite, so repeat's derivative serves it. */
static int tile_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = call->args[0].u.tensor;
    const weft_value *dims = &call->args[1];
    int64_t reps[WEFT_MAX_DIMS];
    int n = dims->len, pad = self->ndim > n ? self->ndim - n : 0;
    if (n > WEFT_MAX_DIMS)
        return wf__errorf(WEFT_ESHAPE, "tile: %d dims are more than the %d a tensor may have", n,
                          WEFT_MAX_DIMS);
    for (int i = 0; i < pad; i++)
        reps[i] = 1;
    if (n)
        memcpy(reps + pad, dims->u.ints, (size_t)n * sizeof(int64_t));
    weft_tensor *r = NULL;
    int rc = weft_repeat(&r, self, reps, pad + n);
    if (rc < 0 && (rc == WEFT_EINVAL || rc == WEFT_ESHAPE)) {
        char why[512]; /* the message buffer is about to be rewritten */
        snprintf(why, sizeof why, "%s", weft_last_error());
        return wf__errorf(rc, "tile: %s", why);
    }
    if (rc < 0)
        return rc;
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    call->rets[0].u.tensor = r;
    return 0;
}

/* take(self, index): self as a flat row-major vector, indexed (negative
 * indices count from the end), shaped like index.  Made of reshape,
 * where and index_select, so it runs and differentiates wherever those
 * do; index_select checks the range. */
static int take_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = call->args[0].u.tensor, *index = call->args[1].u.tensor;
    if (index->dtype != WEFT_INT64 && index->dtype != WEFT_INT32)
        return wf__errorf(WEFT_EDTYPE, "take: index must be int64 (or int32), got %s",
                          weft_dtype_name(index->dtype));
    int64_t minus_one = -1, n = self->numel;
    weft_tensor *flat = NULL, *negative = NULL, *shifted = NULL, *wrapped = NULL,
                *flat_index = NULL, *picked = NULL, *r = NULL;
    int rc = weft_reshape(&flat, self, &minus_one, 1);
    if (rc == 0)
        rc = weft_lt_scalar(&negative, index, 0);
    if (rc == 0)
        rc = weft_add_scalar(&shifted, index, (double)n);
    if (rc == 0)
        rc = weft_where(&wrapped, negative, shifted, index);
    if (rc == 0)
        rc = weft_reshape(&flat_index, wrapped, &minus_one, 1);
    if (rc == 0 && (rc = weft_index_select(&picked, flat, 0, flat_index)) == WEFT_ERANGE) {
        char why[512]; /* the message buffer is about to be rewritten */
        snprintf(why, sizeof why, "%s", weft_last_error());
        rc = wf__errorf(rc, "take: an index is out of range for self with %lld elements (%s)",
                        (long long)n, why);
    }
    if (rc == 0)
        rc = weft_reshape(&r, picked, index->sizes, index->ndim);
    weft_tensor *temps[] = {flat, negative, shifted, wrapped, flat_index, picked};
    for (size_t i = 0; i < sizeof temps / sizeof *temps; i++)
        weft_tensor_release(temps[i]);
    if (rc < 0)
        return rc;
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    call->rets[0].u.tensor = r;
    return 0;
}

void wo__core_kernels_register(void)
{
    weft_register_kernel(wd__core_registrar, "copy_", WEFT_KEY_COMPOSITE, 0, copy_kernel, NULL, NULL);
    weft_register_kernel(wd__core_registrar, "matmul", WEFT_KEY_COMPOSITE, 0, matmul_kernel, NULL,
                         NULL);
    weft_register_kernel(wd__core_registrar, "tile", WEFT_KEY_COMPOSITE, 0, tile_kernel, NULL, NULL);
    weft_register_kernel(wd__core_registrar, "take", WEFT_KEY_COMPOSITE, 0, take_kernel, NULL, NULL);
    wo__split_kernels_register();
}
