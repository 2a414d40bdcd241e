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
        return wa__sum_to(&gi[0], g, sizes, ndim);
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
            rc = weft_as_strided(&window, flat, g->sizes, n->info + n->n_info - g->ndim, g->ndim,
                                 view_offset - src_offset);
        if (rc == 0)
            rc = weft_copy_(window, g);
        /* after the write: under create_graph, flat has its history only now */
        if (rc == 0)
            rc = weft_as_strided(&base, flat, sizes, strides, ndim, 0);
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

/* Records out as a view of src (tracked): a node whose backward puts the
 * gradient back in src's layout, and the version it was recorded at. */
static int record_view(weft_tensor *out, const weft_tensor *src, wf_view_kind kind,
                       const int64_t *dims, int ndims)
{
    static const char *const names[] = {"ViewBackward", "PermuteBackward", "ExpandBackward",
                                        "AsStridedBackward"};
    wf_node *node = wa__node_new(names[kind], view_backward, 1, 1);
    if (!node)
        return wf__errorf(WEFT_ENOMEM, "out of memory recording a view");
    int nd = src->ndim;
    /* the view's own strides close the record, for the strided case */
    node->n_info = 1 + 2 * nd + 3 + (kind == WF_VIEW_PERMUTE ? ndims : 0) + out->ndim;
    node->info = wf__malloc((size_t)node->n_info * sizeof(int64_t));
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
        rc = wa__edge_of(&node->edges[0], (weft_tensor *)src);
    }
    if (rc == 0)
        rc = wa__set_history(out, node, 0);
    if (rc == 0)
        ((wf_autograd_meta *)out->autograd_meta)->attr_version = weft_tensor_version(out);
    wa__node_release(node);
    return rc;
}

int wa__autograd_view(weft_tensor *out, const weft_tensor *src, wf_view_kind kind,
                      const int64_t *dims, int ndims)
{
    const wf_autograd_meta *sm = src->autograd_meta;
    bool no_grad_source = sm && sm->no_grad_view;
    if (!no_grad_source && (!wa__requires_grad(src) || wa__grad_enabled()))
        return wa__requires_grad(src) ? record_view(out, src, kind, dims, ndims) : 0;
    /* taken in no-grad mode from a tensor that requires grad (or from such
     * a view): remembered, to refuse an in-place write to it later */
    wf_autograd_meta *m = wf__calloc(1, sizeof *m);
    if (!m)
        return wf__errorf(WEFT_ENOMEM, "out of memory recording a view");
    m->no_grad_view = true;
    out->autograd_meta = m;
    return 0;
}

/* ------------------------------------------------------------ in place on views */

/* pending: version bumps that are not writes yet (1 for the bump the
 * dispatcher made for the write about to happen) */
static int refresh(weft_tensor *t, uint32_t pending)
{
    if (!t->is_view || !t->view_base || !wa__requires_grad(t->view_base))
        return 0;
    wf_autograd_meta *m = t->autograd_meta;
    uint32_t now = weft_tensor_version(t);
    if (m && m->no_grad_view)
        return 0;
    if (m && m->grad_fn && m->attr_version + pending == now) {
        m->attr_version = now;
        return 0;
    }
    return record_view(t, t->view_base, WF_VIEW_STRIDED, NULL, 0);
}

int wa__view_refresh(weft_tensor *t)
{
    return refresh(t, 0);
}

/* The number of storage elements from a layout's first element to past
 * its last (non-negative strides). */
static int64_t extent_of(const int64_t *sizes, const int64_t *strides, int ndim)
{
    int64_t extent = 1;
    for (int d = 0; d < ndim; d++)
        if (sizes[d] == 0)
            return 0;
    for (int d = 0; d < ndim; d++)
        extent += (sizes[d] - 1) * strides[d];
    return extent;
}

int wa__view_inplace_check(weft_tensor *view, const char *op)
{
    weft_tensor *base = view->view_base;
    if (wa__requires_grad(base) && weft_tensor_is_leaf(base))
        return wf__errorf(WEFT_EINVAL,
                          "%s: a view of a leaf tensor that requires grad is being used in an "
                          "in-place operation (do it with grad mode off, or on a copy)",
                          op);
    const wf_autograd_meta *m = view->autograd_meta;
    if (m && m->no_grad_view)
        return wf__errorf(WEFT_EINVAL,
                          "%s: a view was created in no-grad mode from a tensor that requires grad "
                          "and is being modified in place with grad mode on; this is ambiguous, so "
                          "it is refused: take the view with grad mode on, or write with it off",
                          op);
    /* the gradient of the write is routed through the base's layout: the
     * view must lie inside it */
    for (int d = 0; d < view->ndim; d++)
        if (view->strides[d] < 0)
            return wf__errorf(WEFT_ENOTSUP, "%s: in-place write to a view with negative strides",
                              op);
    for (int d = 0; d < base->ndim; d++)
        if (base->strides[d] < 0)
            return wf__errorf(WEFT_ENOTSUP, "%s: in-place write to a view of a tensor with "
                                            "negative strides", op);
    int64_t rel = view->storage_offset - base->storage_offset;
    if (view->numel > 0 &&
        (rel < 0 || rel + extent_of(view->sizes, view->strides, view->ndim) >
                        extent_of(base->sizes, base->strides, base->ndim)))
        return wf__errorf(WEFT_ENOTSUP,
                          "%s: in-place write to a view that reaches outside its base", op);
    /* the dispatcher has bumped the version for this write already: that
     * bump alone does not make the view's history stale */
    return refresh(view, 1);
}

/* What CopySlices needs: the operator's node and both layouts. */
typedef struct copy_slices {
    wf_node *fn;      /* strong */
    bool self_edge;   /* fn's edge 0 is the view's old value */
    int base_ndim, view_ndim;
    int64_t offset;   /* of the view, from the base's first element */
    int64_t *geometry; /* base sizes, base strides, view sizes, view strides */
} copy_slices;

/* after a backward without retain_graph: the operator's saved tensors go
 * as a node's own would, and a second backward says so, naming it */
static void copy_slices_release_saved(void *p)
{
    wf_node *fn = ((copy_slices *)p)->fn;
    for (int i = 0; i < fn->n_saved; i++) {
        weft_tensor_release(fn->saved[i].tensor);
        fn->saved[i].tensor = NULL;
    }
    if (fn->n_saved)
        fn->released = true;
}

static void copy_slices_free(void *p)
{
    copy_slices *c = p;
    wa__node_release(c->fn);
    free(c->geometry);
    free(c);
}

/* The base's gradient G, laid out like the base; the view's slice of it
 * goes through fn (the operator applied to the view): fn's gradient for
 * the view's old value replaces the slice (zeros when the write did not
 * depend on it), its other gradients go to the operator's other inputs. */
static int copy_slices_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    copy_slices *c = n->ctx;
    wf_node *fn = c->fn;
    const int64_t *bs = c->geometry, *bst = bs + c->base_ndim, *vs = bst + c->base_ndim,
                  *vst = vs + c->view_ndim;
    int64_t extent = extent_of(bs, bst, c->base_ndim);
    weft_tensor *g = go[0], *flat = NULL, *res = NULL, *slice = NULL, *gslice = NULL;
    weft_tensor *stack_fn_gi[8];
    weft_tensor **fn_gi = fn->n_edges <= 8 ? stack_fn_gi : wf__calloc((size_t)fn->n_edges, sizeof *fn_gi);
    if (!fn_gi)
        return wf__errorf(WEFT_ENOMEM, "CopySlices: out of memory");
    for (int e = 0; e < fn->n_edges; e++)
        fn_gi[e] = NULL;
    int rc = weft_zeros(&flat, &extent, 1, (weft_dtype)g->dtype, g->device);
    if (rc == 0)
        rc = weft_as_strided(&res, flat, bs, bst, c->base_ndim, 0);
    if (rc == 0)
        rc = weft_copy_(res, g);
    if (rc == 0)
        rc = weft_as_strided(&slice, flat, vs, vst, c->view_ndim, c->offset);
    if (rc == 0)
        rc = weft_clone(&gslice, slice);
    if (rc == 0) {
        rc = fn->backward(fn, &gslice, fn_gi);
        wa__node_drop_unpacked(fn);
    }
    if (rc == 0)
        rc = c->self_edge && fn_gi[0] ? weft_copy_(slice, fn_gi[0]) : weft_fill_(slice, 0.0);
    /* taken again after the writes: under create_graph flat got its history
     * from them, which a view taken before (untracked then) would not carry */
    if (rc == 0)
        rc = weft_as_strided(&gi[0], flat, bs, bst, c->base_ndim, 0);
    if (rc == 0) {
        for (int e = c->self_edge ? 1 : 0, k = 1; e < fn->n_edges; e++, k++) {
            gi[k] = fn_gi[e];
            fn_gi[e] = NULL;
        }
    }
    for (int e = 0; e < fn->n_edges; e++)
        weft_tensor_release(fn_gi[e]);
    if (fn_gi != stack_fn_gi)
        free(fn_gi);
    weft_tensor *tmp[] = {flat, res, slice, gslice};
    for (int i = 0; i < 4; i++)
        weft_tensor_release(tmp[i]);
    return rc;
}

int wa__view_rebase(weft_tensor *view, wf_node *fn, bool self_edge)
{
    weft_tensor *base = view->view_base;
    int skip = self_edge ? 1 : 0;
    copy_slices *c = wf__calloc(1, sizeof *c);
    wf_node *cs = c ? wa__node_new("CopySlices", copy_slices_backward, 1 + fn->n_edges - skip, 1) : NULL;
    int bnd = base->ndim, vnd = view->ndim;
    if (c)
        c->geometry = wf__malloc((size_t)(2 * bnd + 2 * vnd + 1) * sizeof(int64_t));
    if (!c || !cs || !c->geometry) {
        if (c)
            free(c->geometry);
        free(c);
        wa__node_release(cs);
        return wf__errorf(WEFT_ENOMEM, "out of memory recording an in-place write to a view");
    }
    wa__node_retain(fn);
    c->fn = fn;
    c->self_edge = self_edge;
    c->base_ndim = bnd;
    c->view_ndim = vnd;
    c->offset = view->storage_offset - base->storage_offset;
    int64_t *p = c->geometry;
    memcpy(p, base->sizes, (size_t)bnd * sizeof(int64_t));
    memcpy(p + bnd, base->strides, (size_t)bnd * sizeof(int64_t));
    memcpy(p + 2 * bnd, view->sizes, (size_t)vnd * sizeof(int64_t));
    memcpy(p + 2 * bnd + vnd, view->strides, (size_t)vnd * sizeof(int64_t));
    cs->ctx = c;
    cs->ctx_free = copy_slices_free;
    cs->ctx_release_saved = copy_slices_release_saved;
    /* edge 0: the base's history before the write */
    int rc = wa__edge_of(&cs->edges[0], base);
    for (int e = skip, k = 1; rc == 0 && e < fn->n_edges; e++, k++) {
        wa__node_retain(fn->edges[e].node);
        cs->edges[k] = fn->edges[e];
    }
    if (rc == 0)
        rc = wa__set_history(base, cs, 0);
    wa__node_release(cs);
    /* the view: a strided view of the base's new history */
    if (rc == 0)
        rc = record_view(view, base, WF_VIEW_STRIDED, NULL, 0);
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

int wa__autograd_copy(weft_tensor *out, const weft_tensor *src)
{
    if (!wa__requires_grad(src) || !wa__grad_enabled())
        return 0;
    if (!weft_dtype_is_floating(out->dtype) && !weft_dtype_is_complex(out->dtype))
        return 0; /* an integral copy carries no gradient */
    wf_node *node = wa__node_new(src->dtype == out->dtype ? "CloneBackward" : "ToCopyBackward",
                                 copy_backward, 1, 1);
    if (!node)
        return wf__errorf(WEFT_ENOMEM, "out of memory recording a copy");
    node->info = wf__malloc(sizeof(int64_t));
    int rc = node->info ? 0 : wf__errorf(WEFT_ENOMEM, "out of memory recording a copy");
    if (rc == 0) {
        node->info[0] = src->dtype;
        node->n_info = 1;
        rc = wa__edge_of(&node->edges[0], (weft_tensor *)src);
    }
    if (rc == 0)
        rc = wa__set_history(out, node, 0);
    wa__node_release(node);
    return rc;
}

/* The kernel of the ADInplaceOrView key, which every view carries: a view
 * without history whose root has some (it started requiring grad after the
 * view was taken, or an in-place write gave it a node) takes the root's
 * history here, before anything reads it; the call then starts again at
 * Autograd, which now sees it.  Otherwise the call goes on below.  With
 * another argument tracked, Autograd has run already and refreshed the
 * view through its edge (wa__edge_of); in no-grad mode there is nothing to
 * join. */
static int inplace_or_view_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    bool joined = false;
    uint32_t mask = wd__tls_excluded & WF_AUTOGRAD_KEYS ? 0 : call->op->tensor_arg_mask;
    for (int i = 0; mask; i++, mask >>= 1) {
        if (!(mask & 1))
            continue;
        const weft_value *v = &call->args[i];
        int n = v->tag == WEFT_VALUE_TENSOR ? 1 : v->tag == WEFT_VALUE_TENSOR_LIST ? v->len : 0;
        for (int j = 0; j < n; j++) {
            weft_tensor *t = v->tag == WEFT_VALUE_TENSOR ? v->u.tensor : v->u.tensors[j];
            if (!t || !t->is_view || (t->keys & WF_AUTOGRAD_KEYS) || !t->view_base ||
                !(t->view_base->keys & WF_AUTOGRAD_KEYS))
                continue;
            int rc = wa__view_refresh(t);
            if (rc < 0)
                return rc;
            joined |= (t->keys & WF_AUTOGRAD_KEYS) != 0;
        }
    }
    if (joined) {
        call->keys |= WF_AUTOGRAD_KEYS;
        return weft_redispatch(call, WEFT_KEYSET_BIT(WEFT_KEY_AUTOGRAD + 1));
    }
    return weft_redispatch(call, WEFT_KEYSET_BIT(WEFT_KEY_ADINPLACE_OR_VIEW));
}

int wa__inplace_or_view_register(void)
{
    return weft_register_fallback(wd__core_registrar, WEFT_KEY_ADINPLACE_OR_VIEW, 0,
                                  inplace_or_view_kernel, NULL, NULL);
}
