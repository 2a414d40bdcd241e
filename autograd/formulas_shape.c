/* autograd/formulas_shape.c — derivative formulas of the shape and
 * indexing operators (issue 3, part 3).  Each backward is written with
 * weft operators, mostly the family's own inverse pairs (index_select and
 * index_add, gather and scatter_add, pad and negative pad), so it runs on
 * any device that has them and, with create_graph, is differentiable
 * again.  cat and stack take a tensor list, which the generic kernel of
 * formulas.c does not handle: they have a kernel of their own here. */
#include <stdio.h>
#include <string.h>

#include "autograd/formula_helpers.h"

/* ------------------------------------------------------------ helpers */

/* The integers after the first k shapes that store_shapes packed. */
static const int64_t *extra_info(const wf_node *n, int k)
{
    const int64_t *p = n->info;
    for (int i = 0; i < k; i++)
        p += 2 + p[0];
    return p;
}

/* Zeros shaped like input k, with the gradient's dtype and device. */
static int zeros_like_input(weft_tensor **out, const wf_node *n, int k, const weft_tensor *grad)
{
    const int64_t *sizes;
    int ndim;
    weft_dtype dtype;
    shape_of(n, k, &sizes, &ndim, &dtype);
    return weft_zeros(out, sizes, ndim, (weft_dtype)grad->dtype, grad->device);
}

/* g, zero-padded at the end of each dim up to sizes (the index of gather
 * and scatter may be smaller than src). */
static int pad_to(weft_tensor **out, weft_tensor *g, const int64_t *sizes, int ndim)
{
    int64_t pads[2 * WEFT_MAX_DIMS];
    bool same = true;
    for (int p = 0; p < ndim; p++) {
        int d = ndim - 1 - p;
        pads[2 * p] = 0;
        pads[2 * p + 1] = sizes[d] - g->sizes[d];
        same &= pads[2 * p + 1] == 0;
    }
    if (same || g->ndim != ndim) {
        *out = weft_tensor_retain(g);
        return 0;
    }
    return weft_pad(out, g, pads, 2 * ndim, "constant", NULL);
}

/* ------------------------------------------------------------ records */

/* self's shape, then the integer arguments named by the formula */
static int record_shape_and_ints(wf_node *n, const weft_call *call, const int *which, int count)
{
    const weft_tensor *self = call->args[0].u.tensor;
    TRY(store_shapes(n, &self, 1));
    for (int i = 0; i < count; i++) {
        const weft_value *v = &call->args[which[i]];
        if (v->tag == WEFT_VALUE_INT_LIST) {
            int64_t len = v->len;
            TRY(append_info(n, &len, 1));
            TRY(append_info(n, v->u.ints, v->len));
        } else if (v->tag == WEFT_VALUE_NONE) {
            int64_t none = 0;
            TRY(append_info(n, &none, 1));
        } else {
            TRY(append_info(n, &v->u.i, 1));
        }
    }
    return 0;
}

static int record_clone(wf_node *n, const weft_call *call, weft_tensor *result, weft_tensor *old)
{
    (void)result;
    (void)old;
    return record_shape_and_ints(n, call, NULL, 0);
}

/* (self, int arg): flip's dims, tril's diagonal, repeat's repeats */
static int record_arg1(wf_node *n, const weft_call *call, weft_tensor *result, weft_tensor *old)
{
    (void)result;
    (void)old;
    static const int which[] = {1};
    return record_shape_and_ints(n, call, which, 1);
}

/* roll(self, shifts, dims) and pad(self, pad, mode, value): the first
 * list, then roll's dims (length first) or pad's mode (0 constant, 1
 * reflect, 2 replicate) */
static int record_arg12(wf_node *n, const weft_call *call, weft_tensor *result, weft_tensor *old)
{
    (void)result;
    (void)old;
    TRY(record_shape_and_ints(n, call, (const int[]){1}, 1));
    const weft_value *v = &call->args[2];
    if (v->tag == WEFT_VALUE_STRING) {
        int64_t mode = !strcmp(v->u.string, "reflect") ? 1 : !strcmp(v->u.string, "replicate") ? 2 : 0;
        return append_info(n, &mode, 1);
    }
    int64_t len = v->tag == WEFT_VALUE_INT_LIST ? v->len : 0;
    TRY(append_info(n, &len, 1));
    return append_info(n, v->u.ints, (int)len);
}

/* (self, int dim, Tensor index, ...): self's shape, the second tensor's
 * shape (scatter's src, index_add's source), dim; saves index */
static int record_indexed(wf_node *n, const weft_call *call, weft_tensor *result, weft_tensor *old)
{
    (void)old;
    const weft_tensor *ts[2] = {call->args[0].u.tensor,
                                call->nargs > 3 && call->args[3].tag == WEFT_VALUE_TENSOR
                                    ? call->args[3].u.tensor
                                    : call->args[0].u.tensor};
    TRY(store_shapes(n, ts, 2));
    TRY(append_info(n, &call->args[1].u.i, 1));
    if (call->nargs > 4) /* index_add's alpha */
        n->scalar = call->args[4].tag == WEFT_VALUE_INT ? (double)call->args[4].u.i
                    : call->args[4].tag == WEFT_VALUE_BOOL ? call->args[4].u.b
                                                            : call->args[4].u.d;
    return wa__node_save(n, 0, call->args[2].u.tensor, result);
}

/* embedding(weight, indices, padding_idx) */
static int record_embedding(wf_node *n, const weft_call *call, weft_tensor *result,
                            weft_tensor *old)
{
    (void)old;
    if (wa__requires_grad(call->args[1].u.tensor))
        return wf__errorf(WEFT_EINVAL, "embedding: 'indices' cannot require grad");
    TRY(record_shape_and_ints(n, call, (const int[]){2}, 1));
    return wa__node_save(n, 0, call->args[1].u.tensor, result);
}

/* sort(self, dim, ...) and topk(self, k, dim, ...): the dim and the indices */
static int record_sorted(wf_node *n, const weft_call *call, weft_tensor *result, weft_tensor *old)
{
    (void)old;
    bool topk = call->nargs == 5;
    TRY(record_shape_and_ints(n, call, (const int[]){topk ? 2 : 1}, 1));
    return wa__node_save(n, 0, call->rets[1].u.tensor, result);
}

static int record_masked_select(wf_node *n, const weft_call *call, weft_tensor *result,
                                weft_tensor *old)
{
    (void)old;
    TRY(record_shape_and_ints(n, call, NULL, 0));
    return wa__node_save(n, 0, call->args[1].u.tensor, result);
}

/* ------------------------------------------------------------ formulas */

static int clone_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return fit_grad(&gi[0], n, 0, go[0]);
}

static int flip_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    const int64_t *dims = extra_info(n, 1);
    return weft_flip(&gi[0], go[0], dims + 1, (int)dims[0]);
}

static int tril_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return weft_tril(&gi[0], go[0], extra_info(n, 1)[0]);
}

static int triu_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    return weft_triu(&gi[0], go[0], extra_info(n, 1)[0]);
}

/* roll back by the negated shifts, each reduced modulo its extent first:
 * a shift of INT64_MIN has no negation in int64, its remainder does (and
 * roll takes shifts modulo the extent anyway) */
static int roll_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    const int64_t *shifts = extra_info(n, 1), *dims = shifts + 1 + shifts[0];
    int64_t negated[WEFT_MAX_DIMS];
    int count = (int)shifts[0];
    if (count > WEFT_MAX_DIMS)
        return wf__errorf(WEFT_EINVAL, "roll: too many shifts to differentiate");
    const int64_t *sizes;
    int ndim;
    weft_dtype dtype;
    shape_of(n, 0, &sizes, &ndim, &dtype);
    for (int i = 0; i < count; i++) {
        int64_t extent = 1; /* without dims, the flattened tensor's */
        if (dims[0]) {
            int64_t d = dims[1 + i] < 0 ? dims[1 + i] + ndim : dims[1 + i];
            extent = d >= 0 && d < ndim ? sizes[d] : 1; /* the forward checked dims */
        } else {
            for (int k = 0; k < ndim; k++)
                extent *= sizes[k];
        }
        negated[i] = extent > 0 ? -(shifts[1 + i] % extent) : 0;
    }
    return weft_roll(&gi[0], go[0], negated, count, dims[0] ? dims + 1 : NULL, (int)dims[0]);
}

/* The gradient of [r0*s0, r1*s1, ...] viewed as [r0, s0, r1, s1, ...],
 * summed over the r's. */
static int repeat_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    const int64_t *sizes, *reps = extra_info(n, 1);
    int ndim;
    weft_dtype dtype;
    shape_of(n, 0, &sizes, &ndim, &dtype);
    int count = (int)reps[0];
    if (count == 0) /* a 0-d self repeated by [] */
        return fit_grad(&gi[0], n, 0, go[0]);
    int64_t pairs[WEFT_MAX_DIMS], dims[WEFT_MAX_DIMS / 2];
    for (int i = 0; i < count; i++) {
        pairs[2 * i] = reps[1 + i];
        pairs[2 * i + 1] = i < count - ndim ? 1 : sizes[i - (count - ndim)];
        dims[i] = 2 * i;
    }
    weft_tensor *split = NULL, *summed = NULL;
    int rc = weft_reshape(&split, go[0], pairs, 2 * count);
    if (rc == 0)
        rc = weft_sum(&summed, split, dims, count, false);
    if (rc == 0)
        rc = weft_reshape(&gi[0], summed, sizes, ndim);
    weft_tensor_release(split);
    weft_tensor_release(summed);
    return rc;
}

/* as in backends/cpu/shape.c: the source position of output o */
static int64_t pad_source(int64_t mode, int64_t o, int64_t left, int64_t n)
{
    int64_t i = o - left;
    if (mode == 2)
        return i < 0 ? 0 : i >= n ? n - 1 : i;
    if (i < 0)
        i = -i;
    if (i >= n)
        i = 2 * (n - 1) - i;
    return i;
}

/* constant: pad by the negated pads (crops what was added, zero-fills what
 * was cropped); reflect and replicate: each padded dim, last padded first,
 * summed back with index_add. */
static int pad_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    const int64_t *sizes, *pads = extra_info(n, 1);
    int ndim;
    weft_dtype dtype;
    shape_of(n, 0, &sizes, &ndim, &dtype);
    int count = (int)pads[0];
    int64_t mode = pads[1 + count];
    pads++;
    if (mode == 0) {
        int64_t negated[2 * WEFT_MAX_DIMS];
        for (int i = 0; i < count; i++) {
            /* a pad of INT64_MIN (beside one near INT64_MAX, so that the
             * size fits) crops more than any input holds: every output
             * element is padding and the gradient is zero; its negation
             * does not exist in int64 */
            if (pads[i] == INT64_MIN)
                return weft_zeros(&gi[0], sizes, ndim, dtype, go[0]->device);
            negated[i] = -pads[i];
        }
        return weft_pad(&gi[0], go[0], negated, count, "constant", NULL);
    }
    weft_tensor *g = weft_tensor_retain(go[0]);
    int rc = 0;
    for (int p = count / 2 - 1; rc == 0 && p >= 0; p--) {
        int d = ndim - 1 - p;
        int64_t left = pads[2 * p], len = g->sizes[d], shape[WEFT_MAX_DIMS];
        weft_tensor *index = NULL, *zeros = NULL, *next = NULL;
        memcpy(shape, g->sizes, (size_t)g->ndim * sizeof(int64_t));
        shape[d] = sizes[d];
        rc = weft_empty(&index, &len, 1, WEFT_INT64, WEFT_DEVICE_CPU);
        if (rc == 0) {
            int64_t *ix = weft_tensor_data_ptr(index);
            for (int64_t o = 0; o < len; o++)
                ix[o] = pad_source(mode, o, left, sizes[d]);
            weft_tensor *moved = NULL;
            if ((rc = weft_to_device(&moved, index, g->device)) == 0) {
                weft_tensor_release(index);
                index = moved;
            }
        }
        if (rc == 0)
            rc = weft_zeros(&zeros, shape, g->ndim, (weft_dtype)g->dtype, g->device);
        if (rc == 0)
            rc = weft_index_add(&next, zeros, d, index, g);
        weft_tensor_release(index);
        weft_tensor_release(zeros);
        if (rc == 0) {
            weft_tensor_release(g);
            g = next;
        }
    }
    if (rc == 0)
        gi[0] = g;
    else
        weft_tensor_release(g);
    return rc;
}

/* index_select: index_add into zeros */
static int index_select_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    weft_tensor *index = saved(n, 0, &rc), *zeros = NULL;
    if (rc < 0)
        return rc;
    int64_t dim = extra_info(n, 2)[0];
    if ((rc = zeros_like_input(&zeros, n, 0, go[0])) == 0)
        rc = weft_index_add(&gi[0], zeros, dim, index, go[0]);
    weft_tensor_release(zeros);
    return rc;
}

/* gather: scatter_add into zeros */
static int gather_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    weft_tensor *index = saved(n, 0, &rc), *zeros = NULL;
    if (rc < 0)
        return rc;
    int64_t dim = extra_info(n, 2)[0];
    if ((rc = zeros_like_input(&zeros, n, 0, go[0])) == 0)
        rc = weft_scatter_add(&gi[0], zeros, dim, index, go[0]);
    weft_tensor_release(zeros);
    return rc;
}

/* The gradient of scatter's src: what was written, gathered back, padded
 * to src's shape. */
static int src_grad(wf_node *n, weft_tensor *go, weft_tensor *index, int64_t dim,
                    weft_tensor **out)
{
    const int64_t *sizes;
    int ndim;
    weft_dtype dtype;
    shape_of(n, 1, &sizes, &ndim, &dtype);
    weft_tensor *g = NULL;
    int rc = weft_gather(&g, go, dim, index);
    if (rc == 0)
        rc = pad_to(out, g, sizes, ndim);
    weft_tensor_release(g);
    return rc;
}

/* scatter_add: self gets the gradient, src what it was added to */
static int scatter_add_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    weft_tensor *index = saved(n, 0, &rc);
    if (rc < 0)
        return rc;
    int64_t dim = extra_info(n, 2)[0];
    if (wants(n, 0))
        gi[0] = weft_tensor_retain(go[0]);
    if (n->n_edges > 1 && wants(n, 1))
        rc = src_grad(n, go[0], index, dim, &gi[1]);
    return rc;
}

/* scatter: the overwritten positions of self get no gradient */
static int scatter_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    weft_tensor *index = saved(n, 0, &rc), *zeros = NULL;
    if (rc < 0)
        return rc;
    int64_t dim = extra_info(n, 2)[0];
    if (wants(n, 0) && (rc = zeros_like_input(&zeros, n, 1, go[0])) == 0)
        rc = weft_scatter(&gi[0], go[0], dim, index, zeros);
    weft_tensor_release(zeros);
    if (rc == 0 && n->n_edges > 1 && wants(n, 1))
        rc = src_grad(n, go[0], index, dim, &gi[1]);
    return rc;
}

/* index_add: self gets the gradient, source alpha times the rows it went to */
static int index_add_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    weft_tensor *index = saved(n, 0, &rc), *rows = NULL, *scaled = NULL;
    if (rc < 0)
        return rc;
    int64_t dim = extra_info(n, 2)[0];
    if (wants(n, 0))
        gi[0] = weft_tensor_retain(go[0]);
    if (n->n_edges > 1 && wants(n, 1)) {
        rc = weft_index_select(&rows, go[0], dim, index);
        if (rc == 0)
            rc = n->scalar == 1.0 ? (scaled = weft_tensor_retain(rows), 0)
                                  : weft_mul_scalar(&scaled, rows, n->scalar);
        if (rc == 0)
            rc = fit_grad(&gi[1], n, 1, scaled);
        weft_tensor_release(rows);
        weft_tensor_release(scaled);
    }
    return rc;
}

/* embedding: the rows' gradients summed into the weight's rows; the
 * padding row gets none */
static int embedding_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    weft_tensor *indices = saved(n, 0, &rc);
    if (rc < 0)
        return rc;
    const int64_t *sizes;
    int ndim;
    weft_dtype dtype;
    shape_of(n, 0, &sizes, &ndim, &dtype);
    int64_t padding_idx = extra_info(n, 1)[0], count = weft_tensor_numel(indices);
    int64_t rows_shape[2] = {count, sizes[1]};
    weft_tensor *flat = NULL, *rows = NULL, *keep = NULL, *keep_f = NULL, *keep_col = NULL;
    weft_tensor *masked = NULL, *zeros = NULL;
    rc = weft_reshape(&flat, indices, &count, 1);
    if (rc == 0)
        rc = weft_reshape(&rows, go[0], rows_shape, 2);
    if (rc == 0 && padding_idx >= 0) {
        rc = weft_ne_scalar(&keep, flat, (double)padding_idx);
        if (rc == 0)
            rc = weft_to_dtype(&keep_f, keep, (weft_dtype)go[0]->dtype);
        if (rc == 0)
            rc = weft_unsqueeze(&keep_col, keep_f, 1);
        if (rc == 0)
            rc = weft_mul(&masked, rows, keep_col);
    } else if (rc == 0) {
        masked = weft_tensor_retain(rows);
    }
    if (rc == 0)
        rc = zeros_like_input(&zeros, n, 0, go[0]);
    if (rc == 0)
        rc = weft_index_add(&gi[0], zeros, 0, flat, masked);
    weft_tensor *temps[] = {flat, rows, keep, keep_f, keep_col, masked, zeros};
    for (size_t i = 0; i < sizeof temps / sizeof *temps; i++)
        weft_tensor_release(temps[i]);
    return rc;
}

/* sort and topk values: the gradient goes back to where each value came from */
static int sorted_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    weft_tensor *indices = saved(n, 0, &rc), *zeros = NULL;
    if (rc < 0)
        return rc;
    if ((rc = zeros_like_input(&zeros, n, 0, go[0])) == 0)
        rc = weft_scatter_add(&gi[0], zeros, extra_info(n, 1)[0], indices, go[0]);
    weft_tensor_release(zeros);
    return rc;
}

/* masked_select: the gradient goes back to the selected positions of the
 * broadcast shape, and is summed down to self's */
static int masked_select_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    weft_tensor *mask = saved(n, 0, &rc);
    if (rc < 0)
        return rc;
    const int64_t *sizes;
    int ndim;
    weft_dtype dtype;
    shape_of(n, 0, &sizes, &ndim, &dtype);
    int64_t shape[WEFT_MAX_DIMS], numel = 1;
    int nd = 0;
    if ((rc = weft_broadcast_shapes(shape, &nd, sizes, ndim, mask->sizes, mask->ndim)) < 0)
        return rc;
    for (int d = 0; d < nd; d++)
        numel *= shape[d];
    weft_tensor *expanded = NULL, *flat_mask = NULL, *where = NULL, *index = NULL;
    weft_tensor *zeros = NULL, *flat = NULL, *full = NULL;
    rc = weft_expand(&expanded, mask, shape, nd);
    if (rc == 0)
        rc = weft_reshape(&flat_mask, expanded, &numel, 1);
    if (rc == 0)
        rc = weft_nonzero(&where, flat_mask);
    int64_t count = where ? where->sizes[0] : 0;
    if (rc == 0)
        rc = weft_reshape(&index, where, &count, 1);
    if (rc == 0)
        rc = weft_zeros(&zeros, &numel, 1, (weft_dtype)go[0]->dtype, go[0]->device);
    if (rc == 0)
        rc = weft_index_add(&flat, zeros, 0, index, go[0]);
    if (rc == 0)
        rc = weft_reshape(&full, flat, shape, nd);
    if (rc == 0)
        rc = fit_grad(&gi[0], n, 0, full);
    weft_tensor *temps[] = {expanded, flat_mask, where, index, zeros, flat, full};
    for (size_t i = 0; i < sizeof temps / sizeof *temps; i++)
        weft_tensor_release(temps[i]);
    return rc;
}

/* ------------------------------------------------------------ cat, stack */

/* cat: each input gets its window of the gradient along dim; info holds
 * the dim, then per input its length along dim (-1: skipped, a 1-d empty
 * tensor) */
static int cat_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int64_t dim = n->info[0], at = 0;
    for (int k = 0; k < n->n_edges; k++) {
        int64_t len = n->info[1 + k];
        if (len < 0 || !wants(n, k)) {
            at += len > 0 ? len : 0;
            continue;
        }
        TRY(weft_narrow(&gi[k], go[0], (int)dim, at, len));
        at += len;
    }
    return 0;
}

/* stack: each input gets its slice of the gradient along dim */
static int stack_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    for (int k = 0; k < n->n_edges; k++)
        if (wants(n, k))
            TRY(weft_select(&gi[k], go[0], (int)n->info[0], k));
    return 0;
}

/* The Autograd kernel of cat and stack: one edge per tensor of the list. */
static int list_autograd_kernel(weft_call *call, void *ctx)
{
    const formula *f = ctx;
    const bool stack = f->backward == stack_backward;
    weft_tensor *const *ts = call->args[0].u.tensors;
    const int count = call->args[0].len;
    bool need = false;
    for (int k = 0; k < count; k++)
        need |= wa__requires_grad(ts[k]);
    /* a sparse gradient cannot be narrowed here: the layout's cat records
     * its own node, as the products do (stack has no layout kernels) */
    for (int k = 0; need && !stack && k < count; k++)
        if (ts[k] && ts[k]->layout != WEFT_LAYOUT_STRIDED && wa__requires_grad(ts[k]))
            return wa__layout_records_call(call, ts[k]);
    int rc = wa__autograd_call_below(call);
    if (rc < 0 || !need)
        return rc;
    weft_tensor *result = call->rets[0].u.tensor;
    wf_node *node = wa__node_new(f->node_name, f->backward, count, 1);
    if (!node)
        rc = wf__errorf(WEFT_ENOMEM, "%s: out of memory recording the graph", f->op);
    for (int k = 0; rc == 0 && k < count; k++)
        rc = wa__edge_of(&node->edges[k], ts[k]);
    /* the wrapped dim: the kernel below has checked it */
    int ndim = stack ? ts[0]->ndim + 1 : 1, dim = 0;
    for (int k = 0; !stack && k < count; k++)
        if (!(ts[k]->ndim == 1 && ts[k]->numel == 0)) {
            ndim = ts[k]->ndim;
            break;
        }
    if (rc == 0)
        rc = wf__wrap_dim(&dim, (int)call->args[1].u.i, ndim, f->op);
    if (rc == 0) {
        int64_t d = dim;
        rc = append_info(node, &d, 1);
    }
    for (int k = 0; rc == 0 && !stack && k < count; k++) {
        int64_t len = ts[k]->ndim == 1 && ts[k]->numel == 0 ? -1 : ts[k]->sizes[dim];
        rc = append_info(node, &len, 1);
    }
    if (rc == 0)
        rc = wa__set_history(result, node, 0);
    wa__node_release(node);
    if (rc < 0) {
        weft_tensor_release(result);
        call->rets[0].u.tensor = NULL;
    }
    return rc;
}

/* ------------------------------------------ split, chunk, unbind (Tensor[]) */

/* One node for all the pieces: info is [ndim, self sizes..., dtype, dim,
 * unbind?, pieces, length of each piece along dim...].  The input's
 * gradient is the pieces' gradients put back together (cat, or stack for
 * unbind), a piece that got none contributing zeros — one pass over the
 * input, however many pieces there are. */
static int split_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    if (!wants(n, 0))
        return 0;
    const int64_t *sizes;
    int ndim;
    weft_dtype dtype;
    shape_of(n, 0, &sizes, &ndim, &dtype);
    const int64_t *extra = extra_info(n, 1);
    int dim = (int)extra[0];
    bool unbind = extra[1] != 0;
    int count = (int)extra[2];
    const int64_t *lengths = extra + 3;
    const weft_tensor *like = NULL;
    for (int k = 0; k < count && !like; k++)
        like = go[k];
    if (!like)
        return 0; /* no piece was used */
    weft_tensor **parts = wf__calloc((size_t)count, sizeof *parts);
    if (!parts)
        return wf__errorf(WEFT_ENOMEM, "SplitBackward: out of memory");
    int rc = 0;
    int64_t piece[WEFT_MAX_DIMS];
    for (int k = 0; rc == 0 && k < count; k++) {
        if (go[k]) {
            parts[k] = weft_tensor_retain(go[k]);
            continue;
        }
        int pn = 0;
        for (int d = 0; d < ndim; d++) {
            if (d == dim && unbind)
                continue;
            piece[pn++] = d == dim ? lengths[k] : sizes[d];
        }
        rc = weft_zeros(&parts[k], piece, pn, (weft_dtype)like->dtype, like->device);
    }
    if (rc == 0)
        rc = unbind ? weft_stack(&gi[0], parts, count, dim) : weft_cat(&gi[0], parts, count, dim);
    for (int k = 0; k < count; k++)
        weft_tensor_release(parts[k]);
    free(parts);
    return rc;
}

/* The Autograd kernel of split, split_with_sizes, chunk and unbind: the
 * pieces (views made below with autograd off, so they record nothing of
 * their own) all become outputs of one node. */
static int split_autograd_kernel(weft_call *call, void *ctx)
{
    const formula *f = ctx;
    const weft_tensor *self = call->args[0].u.tensor;
    bool need = wa__requires_grad(self);
    int rc = wa__autograd_call_below(call);
    if (rc < 0 || !need)
        return rc;
    weft_tensor **pieces = (weft_tensor **)call->rets[0].u.tensors;
    const int count = call->rets[0].len;
    const bool unbind = !strcmp(f->op, "unbind");
    const int dim_arg = unbind ? 1 : 2;
    int dim = 0;
    wf_node *node = NULL;
    if (count == 0)
        return 0; /* nothing to differentiate: an empty list */
    rc = wf__wrap_dim(&dim, (int)call->args[dim_arg].u.i, self->ndim, f->op);
    if (rc == 0) {
        node = wa__node_new(f->node_name, f->backward, 1, count);
        if (!node)
            rc = wf__errorf(WEFT_ENOMEM, "%s: out of memory recording the graph", f->op);
    }
    if (rc == 0)
        rc = wa__edge_of(&node->edges[0], (weft_tensor *)self);
    if (rc == 0)
        rc = store_shapes(node, &self, 1);
    int64_t head[3] = {dim, unbind, count};
    if (rc == 0)
        rc = append_info(node, head, 3);
    for (int k = 0; rc == 0 && k < count; k++) {
        int64_t len = unbind ? 1 : pieces[k]->sizes[dim];
        rc = append_info(node, &len, 1);
    }
    for (int k = 0; rc == 0 && k < count; k++)
        rc = wa__set_history(pieces[k], node, k);
    if (node)
        wa__node_release(node);
    if (rc < 0) {
        weft_tensor_list_free(pieces, count);
        call->rets[0].tag = WEFT_VALUE_NONE;
        call->rets[0].len = 0;
        call->rets[0].u.tensors = NULL;
    }
    return rc;
}

static const formula split_formulas[] = {
    {"split", "SplitBackward", split_backward, NULL, 0x1, false},
    {"split_with_sizes", "SplitWithSizesBackward", split_backward, NULL, 0x1, false},
    {"chunk", "SplitBackward", split_backward, NULL, 0x1, false},
    {"unbind", "UnbindBackward", split_backward, NULL, 0x1, false},
};

/* ------------------------------------------------------- scatter_reduce */

enum { SR_SUM, SR_PROD, SR_MEAN, SR_AMAX, SR_AMIN };

/* scatter_reduce(self, dim, index, src, reduce, *, include_self): self's
 * and src's shapes, then [dim, reduce, include_self]; saves index, and for
 * amax/amin self, src and the result. */
static int record_scatter_reduce(wf_node *n, const weft_call *call, weft_tensor *result,
                                 weft_tensor *old)
{
    (void)old;
    static const char *const names[] = {"sum", "prod", "mean", "amax", "amin"};
    const char *reduce = call->args[4].u.string;
    int64_t kind = 0;
    while (kind < 5 && strcmp(reduce, names[kind]) != 0)
        kind++;
    const weft_tensor *self = call->args[0].u.tensor, *index = call->args[2].u.tensor,
                      *src = call->args[3].u.tensor;
    if (kind == SR_PROD)
        return wf__errorf(WEFT_ENOTSUP, "scatter_reduce: the derivative of reduce='prod' is not "
                          "implemented (run it with grad mode off or on detached tensors)");
    if ((kind == SR_AMAX || kind == SR_AMIN) &&
        (index->ndim != src->ndim || memcmp(index->sizes, src->sizes, (size_t)src->ndim * sizeof(int64_t))))
        return wf__errorf(WEFT_ENOTSUP, "scatter_reduce: the derivative of reduce='%s' needs "
                          "index and src of one shape", reduce);
    const weft_tensor *ts[2] = {self, src};
    TRY(store_shapes(n, ts, 2));
    int64_t extra[3] = {call->args[1].u.i, kind, call->args[5].u.b};
    TRY(append_info(n, extra, 3));
    TRY(wa__node_save(n, 0, index, result));
    if (kind == SR_AMAX || kind == SR_AMIN) {
        TRY(wa__node_save(n, 1, old ? old : self, result)); /* in place: self before */
        TRY(wa__node_save(n, 2, src, result));
        TRY(wa__node_save(n, 3, result, result));
        n->saved[3].after_write = old != NULL; /* in place: self after the write */
    }
    return 0;
}

/* sum: self's gradient passes (zeroed where written, without self), src's
 * is gathered; mean: both divided by how many values met at the position;
 * amax/amin: shared evenly among the values equal to the result. */
static int scatter_reduce_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    int rc = 0;
    weft_tensor *index = saved(n, 0, &rc);
    if (rc < 0)
        return rc;
    const int64_t *extra = extra_info(n, 2);
    int dim = (int)extra[0], kind = (int)extra[1];
    bool include_self = extra[2] != 0;
    const int64_t *self_sizes, *src_sizes;
    int self_nd, src_nd;
    weft_dtype dt;
    shape_of(n, 0, &self_sizes, &self_nd, &dt);
    shape_of(n, 1, &src_sizes, &src_nd, &dt);
    weft_dtype gdt = (weft_dtype)go[0]->dtype;
    weft_tensor *count = NULL, *base = NULL, *ones = NULL, *grad = NULL, *zeros = NULL,
                *self_is = NULL, *src_is = NULL, *picked = NULL, *self_f = NULL, *src_f = NULL,
                *spread = NULL, *tmp = NULL, *gathered = NULL;
    if (kind == SR_SUM) {
        grad = weft_tensor_retain(go[0]);
    } else if (kind == SR_MEAN) {
        rc = include_self ? weft_ones(&base, self_sizes, self_nd, gdt, go[0]->device)
                          : weft_zeros(&base, self_sizes, self_nd, gdt, go[0]->device);
        if (rc == 0)
            rc = weft_ones(&ones, src_sizes, src_nd, gdt, go[0]->device);
        if (rc == 0)
            rc = weft_scatter_add(&tmp, base, dim, index, ones);
        if (rc == 0)
            rc = weft_clamp_min(&count, tmp, 1);
        if (rc == 0)
            rc = weft_div(&grad, go[0], count);
    } else {
        weft_tensor *self = saved(n, 1, &rc), *src = self ? saved(n, 2, &rc) : NULL,
                    *result = src ? saved(n, 3, &rc) : NULL;
        if (rc < 0)
            return rc;
        rc = weft_eq(&self_is, self, result);
        if (rc == 0 && !include_self) { /* self's value did not take part where written */
            weft_tensor *f = NULL, *masked = NULL;
            rc = weft_zeros(&f, src_sizes, src_nd, WEFT_BOOL, go[0]->device);
            if (rc == 0)
                rc = weft_scatter(&masked, self_is, dim, index, f);
            weft_tensor_release(f);
            weft_tensor_release(self_is);
            self_is = masked;
        }
        if (rc == 0)
            rc = weft_gather(&picked, result, dim, index);
        if (rc == 0)
            rc = weft_eq(&src_is, src, picked);
        if (rc == 0)
            rc = weft_to_dtype(&self_f, self_is, gdt);
        if (rc == 0)
            rc = weft_to_dtype(&src_f, src_is, gdt);
        if (rc == 0)
            rc = weft_scatter_add(&tmp, self_f, dim, index, src_f);
        if (rc == 0)
            rc = weft_clamp_min(&count, tmp, 1);
        if (rc == 0)
            rc = weft_div(&spread, go[0], count);
        if (rc == 0 && wants(n, 0))
            rc = weft_mul(&gi[0], spread, self_f);
        if (rc == 0 && wants(n, 1))
            rc = weft_gather(&gathered, spread, dim, index);
        if (rc == 0 && wants(n, 1))
            rc = weft_mul(&gi[1], gathered, src_f);
    }
    if (rc == 0 && grad && wants(n, 0)) {
        if (include_self) {
            gi[0] = weft_tensor_retain(grad);
        } else if ((rc = weft_zeros(&zeros, src_sizes, src_nd, gdt, go[0]->device)) == 0) {
            rc = weft_scatter(&gi[0], grad, dim, index, zeros);
        }
    }
    if (rc == 0 && grad && wants(n, 1))
        rc = src_grad(n, grad, index, dim, &gi[1]);
    weft_tensor *temps[] = {count, base, ones, grad, zeros, self_is, src_is, picked, self_f,
                            src_f, spread, tmp, gathered};
    for (size_t i = 0; i < sizeof temps / sizeof *temps; i++)
        weft_tensor_release(temps[i]);
    return rc;
}

/* ------------------------------------------------------------ index_put */

/* The flat position, among self's first K dims, that index_put's indices
 * name: each index tensor (a mask: its nonzero columns) wrapped, weighted
 * by the row-major stride of its dim, summed with broadcasting.  *k_out
 * gets K.  Made of weft operators, so it runs on any device. */
static int linear_index(weft_tensor **out, int *k_out, weft_tensor *const *indices, int n,
                        const int64_t *sizes)
{
    weft_tensor *cols[WEFT_MAX_DIMS];
    int K = 0, rc = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        weft_dtype dt = (weft_dtype)indices[i]->dtype;
        if (dt == WEFT_BOOL || dt == WEFT_UINT8) {
            weft_tensor *nz = NULL;
            rc = weft_nonzero(&nz, indices[i]);
            for (int d = 0; rc == 0 && d < indices[i]->ndim && K < WEFT_MAX_DIMS; d++)
                rc = weft_select(&cols[K++], nz, 1, d);
            weft_tensor_release(nz);
        } else if (K < WEFT_MAX_DIMS) {
            cols[K++] = weft_tensor_retain(indices[i]);
        }
    }
    weft_tensor *sum = NULL;
    int64_t stride = 1;
    for (int k = K - 1; rc == 0 && k >= 0; k--) {
        weft_tensor *neg = NULL, *shifted = NULL, *wrapped = NULL, *scaled = NULL, *next = NULL;
        rc = weft_lt_scalar(&neg, cols[k], 0);
        if (rc == 0)
            rc = weft_add_scalar(&shifted, cols[k], (double)sizes[k]);
        if (rc == 0)
            rc = weft_where(&wrapped, neg, shifted, cols[k]);
        if (rc == 0)
            rc = weft_mul_scalar(&scaled, wrapped, (double)stride);
        if (rc == 0 && sum) {
            rc = weft_add(&next, sum, scaled);
            weft_tensor_release(sum);
            sum = next;
        } else if (rc == 0) {
            sum = weft_tensor_retain(scaled);
        }
        stride *= sizes[k];
        weft_tensor *temps[] = {neg, shifted, wrapped, scaled};
        for (size_t i = 0; i < sizeof temps / sizeof *temps; i++)
            weft_tensor_release(temps[i]);
    }
    for (int k = 0; k < K; k++)
        weft_tensor_release(cols[k]);
    if (rc < 0) {
        weft_tensor_release(sum);
        return rc;
    }
    *out = sum;
    *k_out = K;
    return 0;
}

/* Where index_put's entries put things (the kernel's rule, in
 * backends/cpu/index_write.c, restated here since autograd sees no
 * backend): order lists self's indexed dims, then its whole ones (None
 * entries and the dims after the last entry); present gets the index
 * tensors without the Nones; *lead is how many whole dims come before the
 * broadcast index shape in values' layout (0 when a None separates two
 * index tensors: the index shape goes first). */
static void index_put_layout(weft_tensor *const *indices, int n, int ndim, int64_t *order,
                             weft_tensor **present, int *k_out, int *lead)
{
    bool whole[WEFT_MAX_DIMS] = {false};
    int dim = 0, k = 0, first = -1, last = -1;
    *lead = 0;
    for (int i = 0; i < n && dim < ndim; i++) {
        if (!indices[i]) {
            whole[dim++] = true;
            continue;
        }
        weft_dtype dt = (weft_dtype)indices[i]->dtype;
        if (first < 0) {
            first = i;
            *lead = dim;
        }
        last = i;
        present[k++] = indices[i];
        dim += dt == WEFT_BOOL || dt == WEFT_UINT8 ? indices[i]->ndim : 1;
    }
    for (int i = first; first >= 0 && i <= last; i++)
        if (!indices[i])
            *lead = 0;
    int o = 0;
    for (int d = 0; d < ndim; d++)
        if (d < dim && !whole[d])
            order[o++] = d;
    for (int d = 0; d < ndim; d++)
        if (d >= dim || whole[d])
            order[o++] = d;
    *k_out = k;
}

/* index_put: info is [self shape, values shape, accumulate, number of
 * index entries, and for each whether it is None]; the index tensors are
 * saved in their slots.  self's gradient is the output's, with the written
 * positions zeroed unless accumulating; values' is the output's gradient
 * at the indexed positions (taken with the indexed dims moved first, then
 * laid out as values are), summed back to values' shape. */
static int index_put_backward(wf_node *n, weft_tensor **go, weft_tensor **gi)
{
    const int64_t *info = extra_info(n, 2);
    const int nidx = (int)info[1];
    weft_tensor *indices[WEFT_MAX_DIMS];
    int rc = 0;
    for (int i = 0; i < nidx; i++)
        if (!info[2 + i] && !(indices[i] = saved(n, i, &rc)))
            return rc;
        else if (info[2 + i])
            indices[i] = NULL;
    bool accumulate = info[0] != 0;
    const int64_t *given_sizes;
    int self_ndim;
    weft_dtype dt;
    shape_of(n, 0, &given_sizes, &self_ndim, &dt);
    if (wants(n, 0)) {
        if (accumulate) {
            gi[0] = weft_tensor_retain(go[0]);
        } else {
            weft_tensor *zero = NULL;
            TRY(weft_zeros(&zero, NULL, 0, (weft_dtype)go[0]->dtype, go[0]->device));
            rc = weft_index_put(&gi[0], go[0], indices, nidx, zero, false);
            weft_tensor_release(zero);
            TRY(rc);
        }
    }
    if (!wants(n, 1))
        return 0;
    int64_t order[WEFT_MAX_DIMS], self_sizes[WEFT_MAX_DIMS];
    weft_tensor *present[WEFT_MAX_DIMS];
    int npresent = 0, lead = 0;
    index_put_layout(indices, nidx, self_ndim, order, present, &npresent, &lead);
    for (int d = 0; d < self_ndim; d++)
        self_sizes[d] = given_sizes[order[d]];
    weft_tensor *lin = NULL, *flat_lin = NULL, *flat = NULL, *picked = NULL, *shaped = NULL,
                *moved = NULL, *laid = NULL;
    int K = 0;
    TRY(weft_permute(&moved, go[0], order, self_ndim));
    rc = linear_index(&lin, &K, present, npresent, self_sizes);
    if (rc < 0) {
        weft_tensor_release(moved);
        return rc;
    }
    int64_t rows = 1, minus_one = -1, flat_sizes[WEFT_MAX_DIMS + 1], full[2 * WEFT_MAX_DIMS];
    for (int k = 0; k < K; k++)
        rows *= self_sizes[k];
    flat_sizes[0] = rows;
    memcpy(flat_sizes + 1, self_sizes + K, (size_t)(self_ndim - K) * sizeof(int64_t));
    memcpy(full, lin->sizes, (size_t)lin->ndim * sizeof(int64_t));
    memcpy(full + lin->ndim, self_sizes + K, (size_t)(self_ndim - K) * sizeof(int64_t));
    rc = weft_reshape(&flat_lin, lin, &minus_one, 1);
    if (rc == 0)
        rc = weft_reshape(&flat, moved, flat_sizes, self_ndim - K + 1);
    if (rc == 0)
        rc = weft_index_select(&picked, flat, 0, flat_lin);
    if (rc == 0)
        rc = weft_reshape(&shaped, picked, full, lin->ndim + self_ndim - K);
    int fn = lin->ndim + self_ndim - K;
    if (rc == 0 && lead > 0) {
        /* [index shape, whole dims] to values' [lead whole dims, index
         * shape, the other whole dims] */
        int64_t back[2 * WEFT_MAX_DIMS];
        int o = 0;
        for (int d = 0; d < lead; d++)
            back[o++] = lin->ndim + d;
        for (int d = 0; d < lin->ndim; d++)
            back[o++] = d;
        for (int d = lin->ndim + lead; d < fn; d++)
            back[o++] = d;
        rc = weft_permute(&laid, shaped, back, fn);
    } else if (rc == 0) {
        laid = weft_tensor_retain(shaped);
    }
    if (rc == 0)
        rc = fit_grad(&gi[1], n, 1, laid);
    weft_tensor *temps[] = {lin, flat_lin, flat, picked, shaped, moved, laid};
    for (size_t i = 0; i < sizeof temps / sizeof *temps; i++)
        weft_tensor_release(temps[i]);
    return rc;
}

/* index_put(self, indices, values, accumulate) and index_put_: self's and
 * values' shapes, accumulate; the index tensors (a list) saved in order */
static int record_index_put(wf_node *n, const weft_call *call, weft_tensor *result,
                            weft_tensor *old)
{
    (void)old;
    const weft_value *list = &call->args[1];
    if (list->len > WEFT_MAX_DIMS)
        return wf__errorf(WEFT_ESHAPE, "index_put: too many indices");
    const weft_tensor *ts[2] = {call->args[0].u.tensor, call->args[2].u.tensor};
    TRY(store_shapes(n, ts, 2));
    int64_t info[2 + WEFT_MAX_DIMS] = {call->args[3].u.b, list->len};
    for (int i = 0; i < list->len; i++)
        info[2 + i] = list->u.tensors[i] == NULL; /* None */
    TRY(append_info(n, info, 2 + list->len));
    for (int i = 0; i < list->len; i++)
        if (list->u.tensors[i])
            TRY(wa__node_save(n, i, list->u.tensors[i], result));
    return 0;
}

/* ------------------------------------------------------------ the table */

static const formula list_formulas[] = {
    {"cat", "CatBackward", cat_backward, NULL, 0, false},
    {"stack", "StackBackward", stack_backward, NULL, 0, false},
};

static const formula shape_formulas[] = {
    {"clone", "CloneBackward", clone_backward, record_clone, 0x1, false},
    {"flip", "FlipBackward", flip_backward, record_arg1, 0x1, false},
    {"tril", "TrilBackward", tril_backward, record_arg1, 0x1, false},
    {"tril_", "TrilBackward", tril_backward, record_arg1, 0x1, false},
    {"triu", "TriuBackward", triu_backward, record_arg1, 0x1, false},
    {"triu_", "TriuBackward", triu_backward, record_arg1, 0x1, false},
    {"roll", "RollBackward", roll_backward, record_arg12, 0x1, false},
    {"repeat", "RepeatBackward", repeat_backward, record_arg1, 0x1, false},
    {"pad", "PadBackward", pad_backward, record_arg12, 0x1, false},
    {"index_select", "IndexSelectBackward", index_select_backward, record_indexed, 0x1, false,
     true},
    {"gather", "GatherBackward", gather_backward, record_indexed, 0x1, false},
    {"scatter", "ScatterBackward", scatter_backward, record_indexed, 0x9, false},
    {"scatter_", "ScatterBackward", scatter_backward, record_indexed, 0x9, false},
    {"scatter_add", "ScatterAddBackward", scatter_add_backward, record_indexed, 0x9, false},
    {"scatter_add_", "ScatterAddBackward", scatter_add_backward, record_indexed, 0x9, false},
    {"index_add", "IndexAddBackward", index_add_backward, record_indexed, 0x9, false},
    {"index_add_", "IndexAddBackward", index_add_backward, record_indexed, 0x9, false},
    {"embedding", "EmbeddingBackward", embedding_backward, record_embedding, 0x1, false},
    {"sort", "SortBackward", sorted_backward, record_sorted, 0x1, false},
    {"topk", "TopkBackward", sorted_backward, record_sorted, 0x1, false},
    {"masked_select", "MaskedSelectBackward", masked_select_backward, record_masked_select, 0x1,
     false},
    {"scatter_reduce", "ScatterReduceBackward", scatter_reduce_backward, record_scatter_reduce,
     0x9, false},
    {"scatter_reduce_", "ScatterReduceBackward", scatter_reduce_backward, record_scatter_reduce,
     0x9, true},
    {"index_put", "IndexPutBackward", index_put_backward, record_index_put, 0x5, false},
    {"index_put_", "IndexPutBackward", index_put_backward, record_index_put, 0x5, false},
};

void wa__autograd_register_shape(void)
{
    for (size_t i = 0; i < sizeof list_formulas / sizeof list_formulas[0]; i++)
        if (weft_register_kernel(wd__core_registrar, list_formulas[i].op, WEFT_KEY_AUTOGRAD,
                                 WEFT_ALL_BACKENDS, list_autograd_kernel,
                                 (void *)&list_formulas[i], NULL) < 0)
            fprintf(stderr, "weft: internal error: %s\n", weft_last_error());
    for (size_t i = 0; i < sizeof split_formulas / sizeof split_formulas[0]; i++)
        if (weft_register_kernel(wd__core_registrar, split_formulas[i].op, WEFT_KEY_AUTOGRAD,
                                 WEFT_ALL_BACKENDS, split_autograd_kernel,
                                 (void *)&split_formulas[i], NULL) < 0)
            fprintf(stderr, "weft: internal error: %s\n", weft_last_error());
    for (size_t i = 0; i < sizeof shape_formulas / sizeof shape_formulas[0]; i++)
        if (weft_register_kernel(wd__core_registrar, shape_formulas[i].op, WEFT_KEY_AUTOGRAD,
                                 WEFT_ALL_BACKENDS, wa__autograd_kernel,
                                 (void *)&shape_formulas[i], NULL) < 0)
            fprintf(stderr, "weft: internal error: %s\n", weft_last_error());
}
