/* layouts/sparse/payload.c — the sparse payloads as both sparse plugins
 * (libweft-sparse.so and libweft-sparse_cuda.so, which compile this file
 * in, as check.c) make and read them: wrapping components into a tensor,
 * the layout's name in messages, and the validity of an unchecked pattern.
 * Device-neutral: nothing here reads a component's memory except the
 * checks, which read a host copy. */
#include <stdlib.h>

#include "sparse.h"

const char *sp__layout_name(const weft_tensor *t)
{
    const char *n = t ? weft_layout_name(weft_tensor_layout(t)) : NULL;
    return n ? n : "strided";
}

void sp__release_all(weft_tensor *const *ts, int n)
{
    for (int i = 0; i < n; i++)
        weft_tensor_release(ts[i]);
}

int sp__coo_wrap(weft_tensor **out, const int64_t *sizes, int ndim, weft_tensor *indices,
                 weft_tensor *values, int sparse_dim, bool coalesced)
{
    sp__coo *p = calloc(1, sizeof *p);
    if (!p) {
        weft_tensor_release(indices);
        weft_tensor_release(values);
        return weft_set_error(WEFT_ENOMEM, "sparse_coo: out of memory");
    }
    p->sparse_dim = sparse_dim;
    p->dense_dim = ndim - sparse_dim;
    p->nnz = weft_tensor_size(indices, 1);
    p->coalesced = coalesced || p->nnz < 2;
    p->valid = true;
    p->indices = indices;
    p->values = values;
    /* from here the core owns p, whatever happens */
    return weft_tensor_new_layout(out, sp__coo_layout, sizes, ndim, weft_tensor_dtype(values),
                                  weft_tensor_device(values), p);
}

int sp__csr_wrap(weft_tensor **out, const int64_t *sizes, int ndim, weft_tensor *crow,
                 weft_tensor *col, weft_tensor *values)
{
    sp__csr *p = calloc(1, sizeof *p);
    if (!p) {
        weft_tensor *all[] = {crow, col, values};
        sp__release_all(all, 3);
        return weft_set_error(WEFT_ENOMEM, "sparse_csr: out of memory");
    }
    p->batch = ndim - 2;
    p->nnz = weft_tensor_size(col, -1);
    p->valid = true;
    p->crow = crow;
    p->col = col;
    p->values = values;
    return weft_tensor_new_layout(out, sp__csr_layout, sizes, ndim, weft_tensor_dtype(values),
                                  weft_tensor_device(values), p);
}


/* the checks read indices on the host: a device's are copied once (the
 * one copy a validation costs there), a CPU tensor's are read in place */
static int on_host(weft_tensor **out, weft_tensor *t)
{
    if (weft_tensor_device(t).type == WEFT_DEVICE_TYPE_CPU) {
        *out = weft_tensor_retain(t);
        return 0;
    }
    return weft_to_device(out, t, WEFT_DEVICE_CPU);
}

int sp__require_valid(const weft_tensor *t, const char *op)
{
    weft_tensor *a = NULL, *b = NULL;
    int rc;
    if (sp__is_coo(t)) {
        sp__coo *p = sp__coo_of(t);
        if (p->valid)
            return 0;
        rc = on_host(&a, p->indices);
        if (rc == 0)
            rc = sp__coo_check(op, a, p->values, weft_tensor_sizes(t), weft_tensor_ndim(t), true);
        if (rc == 0)
            p->valid = true;
    } else {
        sp__csr *p = sp__csr_of(t);
        if (p->valid)
            return 0;
        rc = on_host(&a, p->crow);
        if (rc == 0)
            rc = on_host(&b, p->col);
        if (rc == 0)
            rc = sp__csr_check(op, a, b, p->values, weft_tensor_sizes(t), weft_tensor_ndim(t),
                               true);
        if (rc == 0)
            p->valid = true;
    }
    weft_tensor_release(a);
    weft_tensor_release(b);
    return rc;
}

void sp__inherit_valid(const weft_tensor *out, const weft_tensor *const *src, int n)
{
    bool valid = true;
    for (int i = 0; i < n; i++)
        valid = valid && (sp__is_coo(src[i]) ? sp__coo_of(src[i])->valid
                                             : sp__csr_of(src[i])->valid);
    if (sp__is_coo(out))
        sp__coo_of(out)->valid = valid;
    else
        sp__csr_of(out)->valid = valid;
}
