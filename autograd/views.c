/* autograd/views.c — gradients through the core's view functions and
 * copies (contiguous, to_dtype), which are not dispatched operators: the
 * view functions call in here when their source takes part in autograd. */
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "dispatch/dispatcher.h"

/* node->info for views: [src ndim, src sizes..., src strides..., src
 * offset, view offset, kind, perm...] */
enum { INFO_HEAD = 1 };

static const int64_t *src_sizes(const wf_node *n)
{
    return n->info + 1;
}

static int view_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int ndim = (int)n->info[0];
    const int64_t *sizes = src_sizes(n), *strides = sizes + ndim;
    int64_t src_offset = strides[ndim], view_offset = strides[ndim + 1];
    wf_view_kind kind = (wf_view_kind)strides[ndim + 2];
    const int64_t *perm = strides + ndim + 3;
    weft_tensor *g = go[0];
    switch (kind) {
    case WF_VIEW_RESHAPE:
        return weft_reshape(&gi[0], g, sizes, ndim);
    case WF_VIEW_PERMUTE: {
        int64_t inverse[WEFT_MAX_DIMS];
        for (int d = 0; d < ndim; d++)
            inverse[perm[d]] = d;
        return weft_permute(&gi[0], g, inverse, ndim);
    }
    case WF_VIEW_EXPAND:
        return wf__sum_to(&gi[0], g, sizes, ndim);
    case WF_VIEW_STRIDED: {
        /* a subset of the source: scatter the gradient into zeros laid out
         * like the source, through the same view */
        int64_t extent = 1;
        for (int d = 0; d < ndim; d++)
            if (sizes[d] == 0)
                extent = 0;
        for (int d = 0; d < ndim && extent; d++)
            extent += (sizes[d] - 1) * strides[d];
        weft_tensor *flat = NULL, *base = NULL, *window = NULL;
        int rc = weft_zeros(&flat, &extent, 1, (weft_dtype)g->dtype, g->device);
        if (rc == 0)
            rc = weft_as_strided(&base, flat, sizes, strides, ndim, 0);
        if (rc == 0)
            rc = weft_as_strided(&window, flat, g->sizes, n->info + n->n_info - g->ndim, g->ndim,
                                 view_offset - src_offset);
        if (rc == 0)
            rc = weft_copy_(window, g);
        if (rc == 0)
            gi[0] = weft_tensor_retain(base);
        weft_tensor_release(flat);
        weft_tensor_release(base);
        weft_tensor_release(window);
        return rc;
    }
    }
    return wf__errorf(WEFT_EINTERNAL, "unknown view kind");
}

int wf__autograd_view(weft_tensor *out, const weft_tensor *src, wf_view_kind kind,
                      const int64_t *dims, int ndims)
{
    out->is_view = true;
    if (!wf__requires_grad(src) || !wf__grad_enabled())
        return 0;
    static const char *const names[] = {"ViewBackward", "PermuteBackward", "ExpandBackward",
                                        "AsStridedBackward"};
    wf_node *node = wf__node_new(names[kind], view_backward, 1, 1);
    if (!node)
        return wf__errorf(WEFT_ENOMEM, "out of memory recording a view");
    int nd = src->ndim;
    /* the view's own strides close the record, for the strided case */
    node->n_info = 1 + 2 * nd + 3 + (kind == WF_VIEW_PERMUTE ? ndims : 0) + out->ndim;
    node->info = malloc((size_t)node->n_info * sizeof(int64_t));
    int rc = node->info ? 0 : wf__errorf(WEFT_ENOMEM, "out of memory recording a view");
    if (rc == 0) {
        int64_t *p = node->info;
        *p++ = nd;
        memcpy(p, src->sizes, (size_t)nd * sizeof(int64_t));
        p += nd;
        memcpy(p, src->strides, (size_t)nd * sizeof(int64_t));
        p += nd;
        *p++ = src->storage_offset;
        *p++ = out->storage_offset;
        *p++ = kind;
        if (kind == WF_VIEW_PERMUTE) {
            memcpy(p, dims, (size_t)ndims * sizeof(int64_t));
            p += ndims;
        }
        memcpy(p, out->strides, (size_t)out->ndim * sizeof(int64_t));
        rc = wf__edge_of(&node->edges[0], (weft_tensor *)src);
    }
    if (rc == 0)
        rc = wf__set_history(out, node, 0);
    wf__node_release(node);
    return rc;
}

static int copy_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    weft_dtype dtype = (weft_dtype)n->info[0];
    if (go[0]->dtype == dtype) {
        gi[0] = weft_tensor_retain(go[0]);
        return 0;
    }
    return weft_to_dtype(&gi[0], go[0], dtype);
}

int wf__autograd_copy(weft_tensor *out, const weft_tensor *src)
{
    if (!wf__requires_grad(src) || !wf__grad_enabled())
        return 0;
    if (!weft_dtype_is_floating(out->dtype) && !weft_dtype_is_complex(out->dtype))
        return 0; /* an integral copy carries no gradient */
    wf_node *node = wf__node_new(src->dtype == out->dtype ? "CloneBackward" : "ToCopyBackward",
                                 copy_backward, 1, 1);
    if (!node)
        return wf__errorf(WEFT_ENOMEM, "out of memory recording a copy");
    node->info = malloc(sizeof(int64_t));
    int rc = node->info ? 0 : wf__errorf(WEFT_ENOMEM, "out of memory recording a copy");
    if (rc == 0) {
        node->info[0] = src->dtype;
        node->n_info = 1;
        rc = wf__edge_of(&node->edges[0], (weft_tensor *)src);
    }
    if (rc == 0)
        rc = wf__set_history(out, node, 0);
    wf__node_release(node);
    return rc;
}
