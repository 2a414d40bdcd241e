/* layouts/sparse/views.c — the sparse layouts' answer to the core's view
 * functions.  weft_transpose, weft_t, weft_permute, weft_select,
 * weft_narrow/weft_slice, weft_contiguous and weft_alias (hence
 * weft_detach) hand a sparse tensor to its layout's view hook, here,
 * which gives what torch gives for the same call on a sparse tensor:
 *
 *  - a permutation of the sparse dims among themselves and of the dense
 *    dims among themselves is one or more sparse_transpose;
 *  - select is sparse_select, narrow (a slice of step 1) sparse_narrow
 *    (torch refuses narrow on a sparse tensor and names narrow_copy; weft
 *    has the operator, so it answers);
 *  - contiguous is the tensor itself; an alias (same shape) is a new
 *    tensor sharing the indices and values;
 *  - unsqueeze is the constructor over indices and values with a new
 *    sparse or dense dim (torch's rule for which).
 *
 * These go through the dispatcher, not the kernels directly, so that
 * autograd records them with the plugin's own formulas (a sparse input's
 * gradient stays sparse).  Like torch's, the results are new sparse
 * tensors rather than views: the indices are new (the values are shared
 * where the operator keeps them), so writing to the result's indices does
 * not reach the source's.
 *
 * Everything else (reshape, view, expand, squeeze, and on CSR
 * transpose and select, whose torch results are sparse_csc and sparse_coo)
 * is refused, naming the function, the layout and the way around. */
#include <string.h>

#include "sparse.h"

static bool tracked(const weft_tensor *t)
{
    return weft_tensor_requires_grad(t) && weft_is_grad_enabled();
}

/* A new tensor of t's layout sharing t's index and value tensors.  When
 * autograd would record the alias, it is a no-op operator instead
 * (sparse_transpose of a dim with itself, sparse_narrow of the whole
 * first dim), which the plugin's formulas differentiate. */
static int alias(weft_tensor **out, const weft_tensor *t)
{
    int ndim = weft_tensor_ndim(t);
    if (tracked(t) && ndim > 0) {
        if (sp__is_coo(t))
            return sp__call_ints(out, "sparse_transpose", t, (int64_t[]){0, 0}, 2);
        return sp__call_ints(out, "sparse_narrow", t, (int64_t[]){0, 0, weft_tensor_size(t, 0)}, 3);
    }
    int rc;
    if (sp__is_coo(t)) {
        const sp__coo *p = sp__coo_of(t);
        rc = sp__coo_wrap(out, weft_tensor_sizes(t), ndim, weft_tensor_retain(p->indices),
                          weft_tensor_retain(p->values), p->sparse_dim, p->coalesced);
    } else {
        const sp__csr *p = sp__csr_of(t);
        rc = sp__csr_wrap(out, weft_tensor_sizes(t), ndim, weft_tensor_retain(p->crow),
                          weft_tensor_retain(p->col), weft_tensor_retain(p->values));
    }
    if (rc == 0)
        sp__inherit_valid(*out, &t, 1);
    return rc;
}

static bool same_shape(const weft_tensor *t, const weft_layout_view *v)
{
    return v->ndim == weft_tensor_ndim(t) &&
           memcmp(v->shape, weft_tensor_sizes(t), (size_t)v->ndim * sizeof *v->shape) == 0;
}

/* A permutation as transpositions: sparse dims must stay among the sparse
 * ones (torch's rule: an index row cannot become a values dimension). */
static int coo_permute(weft_tensor **out, const weft_tensor *t, const weft_layout_view *v)
{
    int sd = sp__coo_of(t)->sparse_dim, n = v->ndim;
    for (int i = 0; i < n; i++)
        if ((v->dims[i] < sd) != (i < sd))
            return weft_set_error(WEFT_ENOTSUP,
                                  "%s: cannot move %s dimension %lld to position %d of a "
                                  "sparse_coo tensor with %d sparse dimensions (sparse and dense "
                                  "dimensions do not trade places; convert it with to_dense() "
                                  "first)",
                                  v->op, v->dims[i] < sd ? "sparse" : "dense",
                                  (long long)v->dims[i], i, sd);
    int64_t cur[WEFT_MAX_DIMS];
    for (int i = 0; i < n; i++)
        cur[i] = i;
    weft_tensor *r = NULL;
    int rc = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        if (cur[i] == v->dims[i])
            continue;
        int j = i + 1;
        while (cur[j] != v->dims[i])
            j++;
        weft_tensor *next = NULL;
        rc = sp__call_ints(&next, "sparse_transpose", r ? r : t, (int64_t[]){i, j}, 2);
        weft_tensor_release(r);
        r = next;
        int64_t x = cur[i];
        cur[i] = cur[j];
        cur[j] = x;
    }
    if (rc == 0 && !r) /* the identity: a new tensor all the same, as torch's */
        rc = alias(&r, t);
    *out = rc == 0 ? r : NULL;
    if (rc < 0)
        weft_tensor_release(r);
    return rc;
}

/* unsqueeze of a COO tensor at result dim d, as torch's: a sparse dim (a
 * row of zeros in the indices) where d <= sparse_dim, else a dense one (a
 * dim of the values).  Made by the constructor from indices and values(),
 * both through the dispatcher, so a tensor requiring grad gets its
 * gradient back through values() (torch 1.13 has no backward for it). */
static int coo_unsqueeze(weft_tensor **out, const weft_tensor *t, const weft_layout_view *v)
{
    /* values()'s gradient is per entry: for duplicates each would carry the
     * whole gradient of their position, so a tensor autograd tracks is
     * coalesced first (coalesce's own backward sums them correctly) */
    weft_tensor *c = NULL;
    if (tracked(t) && !sp__coo_of(t)->coalesced) {
        int rc = sp__call_ints(&c, "coalesce", t, NULL, 0);
        if (rc < 0)
            return rc;
        t = c;
    }
    const sp__coo *p = sp__coo_of(t);
    int d = v->dim, sd = p->sparse_dim;
    weft_tensor *ix = NULL, *val = NULL, *nix = NULL, *nval = NULL;
    /* an untracked uncoalesced tensor keeps its entries as they are (the
     * raw arrays); a tracked one is coalesced above, and its values() records
     * the gradient */
    int rc = sp__call_ints(&ix, "_indices", t, NULL, 0);
    if (rc == 0)
        rc = sp__call_ints(&val, p->coalesced ? "values" : "_values", t, NULL, 0);
    if (rc == 0 && d <= sd) {
        weft_tensor *zero = NULL, *head = NULL, *tail = NULL;
        rc = weft_zeros(&zero, (int64_t[]){1, p->nnz}, 2, WEFT_INT64, weft_tensor_device(ix));
        if (rc == 0)
            rc = weft_narrow(&head, ix, 0, 0, d);
        if (rc == 0)
            rc = weft_narrow(&tail, ix, 0, d, sd - d);
        if (rc == 0)
            rc = weft_cat(&nix, (weft_tensor *[]){head, zero, tail}, 3, 0);
        weft_tensor *tmp[] = {zero, head, tail};
        sp__release_all(tmp, 3);
        nval = weft_tensor_retain(val);
    } else if (rc == 0) {
        nix = weft_tensor_retain(ix);
        rc = weft_unsqueeze(&nval, val, d - sd + 1);
    }
    if (rc == 0) {
        weft_value args[4] = {{.tag = WEFT_VALUE_TENSOR, .u.tensor = nix},
                              {.tag = WEFT_VALUE_TENSOR, .u.tensor = nval},
                              {.tag = WEFT_VALUE_INT_LIST, .len = v->ndim, .u.ints = v->shape},
                              {.tag = WEFT_VALUE_BOOL, .u.b = true}};
        rc = sp__call(out, "sparse_coo_tensor", args, 4);
    }
    weft_tensor *all[] = {ix, val, nix, nval, c};
    sp__release_all(all, 5);
    return rc;
}

static int refuse(const weft_tensor *t, const weft_layout_view *v, const char *why)
{
    return weft_set_error(WEFT_ENOTSUP, "%s: not supported for a %s tensor (%s)", v->op,
                          sp__layout_name(t), why);
}

int sp__layout_view(weft_tensor **out, const weft_tensor *t, const weft_layout_view *v)
{
    *out = NULL;
    bool coo = sp__is_coo(t);
    switch (v->kind) {
    case WEFT_LAYOUT_VIEW_CONTIGUOUS:
        /* a sparse tensor has no strides to make contiguous: torch's
         * contiguous() of one is the tensor itself */
        *out = weft_tensor_retain(t);
        return 0;
    case WEFT_LAYOUT_VIEW_SHAPE:
    case WEFT_LAYOUT_VIEW_RESHAPE:
    case WEFT_LAYOUT_VIEW_EXPAND:
        if (same_shape(t, v))
            return alias(out, t);
        if (coo && v->kind == WEFT_LAYOUT_VIEW_SHAPE && strcmp(v->op, "unsqueeze") == 0)
            return coo_unsqueeze(out, t, v);
        return refuse(t, v,
                      v->kind == WEFT_LAYOUT_VIEW_EXPAND
                          ? "a sparse tensor is not broadcast in place; convert it with "
                            "to_dense() first"
                          : "its shape is its indices'; convert it with to_dense() first");
    case WEFT_LAYOUT_VIEW_PERMUTE:
        if (coo)
            return coo_permute(out, t, v);
        for (int i = 0; i < v->ndim; i++)
            if (v->dims[i] != i)
                return refuse(t, v,
                              "torch's transposed CSR is sparse_csc, which weft does not have; "
                              "convert it with to_sparse() first");
        return alias(out, t);
    case WEFT_LAYOUT_VIEW_SELECT:
        if (!coo)
            return refuse(t, v,
                          "the result would be sparse_coo; convert it with to_sparse() first");
        return sp__call_ints(out, "sparse_select", t, (int64_t[]){v->dim, v->index}, 2);
    case WEFT_LAYOUT_VIEW_SLICE:
        if (v->step != 1)
            return weft_set_error(WEFT_ENOTSUP,
                                  "%s: a step of %lld is not supported for a %s tensor (only 1 "
                                  "is; index_select takes any set of rows)",
                                  v->op, (long long)v->step, sp__layout_name(t));
        if (!coo && weft_tensor_ndim(t) != 2)
            return refuse(t, v,
                          "a batched CSR tensor is narrowed as sparse_coo; convert it with "
                          "to_sparse() first");
        return sp__call_ints(out, "sparse_narrow", t, (int64_t[]){v->dim, v->start, v->end - v->start},
                       3);
    default:
        return weft_set_error(WEFT_ENOTSUP, "%s: the sparse layouts do not know view kind %d",
                              v->op, v->kind);
    }
}
