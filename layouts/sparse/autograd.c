/* layouts/sparse/autograd.c — what the plugin's own operators do under
 * autograd.  Every operator it defines has an Autograd kernel, so none can
 * drop a gradient silently:
 *  - the accessors of the pattern (indices, crow/col_indices, _nnz,
 *    is_coalesced, sparse_dim, dense_dim) are not differentiable: they go
 *    straight to the layout's kernel;
 *  - values() is differentiable: the gradient of the values is a sparse
 *    tensor with the input's pattern (torch's values backward);
 *  - the constructors (composites, run here through weft_function_apply)
 *    pass back to `values` the incoming gradient gathered at the indices;
 *  - coalesce and the view-like operators have no formula yet and refuse,
 *    naming themselves, when an input requires grad.
 * The existing operators' formulas are the core's. */
#include <stdlib.h>
#include <string.h>

#include "sparse.h"

static const weft_keyset autograd_done = WEFT_KEYSET_BIT(WEFT_KEY_AUTOGRAD);

static int passthrough_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    return weft_redispatch(call, autograd_done);
}

static bool any_requires_grad(const weft_call *call)
{
    if (!weft_is_grad_enabled())
        return false;
    for (int i = 0; i < call->nargs; i++)
        if (call->args[i].tag == WEFT_VALUE_TENSOR && call->args[i].u.tensor &&
            weft_tensor_requires_grad(call->args[i].u.tensor))
            return true;
    return false;
}

static int refuse_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    if (any_requires_grad(call))
        return weft_set_error(WEFT_ENOTSUP,
                              "%s: no gradient formula for sparse tensors yet; detach the input "
                              "or go through to_dense",
                              weft_op_name(call->op));
    return weft_redispatch(call, autograd_done);
}

/* ------------------------------------------------------------- values() */

static int values_forward(weft_function_ctx *ctx, weft_tensor *const *in, int nin,
                          weft_tensor **out, int nout)
{
    (void)nin;
    (void)nout;
    const weft_tensor *t = in[0];
    /* a copy: the node must not attach to the payload's own tensor */
    int rc = sp__copy(out, sp__is_coo(t) ? sp__coo_of(t)->values : sp__csr_of(t)->values);
    if (rc == 0)
        rc = weft_function_save_for_backward(ctx, in, 1);
    return rc;
}

static int values_backward(weft_function_ctx *ctx, weft_tensor *const *gout, int nout,
                           weft_tensor **gin, int nin)
{
    (void)nout;
    (void)nin;
    if (!gout[0])
        return 0;
    weft_tensor *self = NULL, *g = NULL;
    int rc = weft_function_saved(&self, ctx, 0);
    if (rc == 0)
        rc = weft_contiguous(&g, gout[0]);
    if (rc == 0) {
        if (sp__is_coo(self)) {
            const sp__coo *p = sp__coo_of(self);
            rc = sp__coo_wrap(gin, weft_tensor_sizes(self), weft_tensor_ndim(self),
                              weft_tensor_retain(p->indices), g, p->sparse_dim, p->coalesced);
        } else {
            const sp__csr *p = sp__csr_of(self);
            rc = sp__csr_wrap(gin, weft_tensor_sizes(self), weft_tensor_ndim(self),
                              weft_tensor_retain(p->crow), weft_tensor_retain(p->col), g);
        }
        g = NULL;
        if (rc == 0)
            sp__inherit_valid(*gin, (const weft_tensor *const *)&self, 1);
    }
    weft_tensor_release(g);
    weft_tensor_release(self);
    return rc;
}

static int values_autograd(weft_call *call, void *ctx)
{
    (void)ctx;
    /* a strided (or other) tensor goes on to the layout kernels, which
     * refuse it by name: values_forward reads a sparse payload */
    const weft_tensor *self = weft_arg_tensor(call, 0);
    if (!any_requires_grad(call) || !(sp__is_coo(self) || sp__is_csr(self)))
        return weft_redispatch(call, autograd_done);
    static const weft_function fn = {"ValuesBackward", values_forward, values_backward, false};
    weft_tensor *in[1] = {weft_arg_tensor(call, 0)}, *out = NULL;
    int rc = weft_function_apply(&out, 1, &fn, NULL, NULL, in, 1);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* ---------------------------------------------------------- constructors */

/* what the constructor's backward needs: the size (the index tensors are
 * saved inputs; the output is not saved, which would tie it to its node) */
typedef struct ctor {
    weft_call *call; /* forward only */
    bool csr;
    int ndim;
    int64_t sizes[WEFT_MAX_DIMS];
} ctor;

static int ctor_forward(weft_function_ctx *ctx, weft_tensor *const *in, int nin,
                        weft_tensor **out, int nout)
{
    (void)nout;
    ctor *c = weft_function_user(ctx);
    /* grad mode is off here: the call reaches the composite below */
    weft_call *call = c->call;
    weft_value ret = {0};
    int rc = weft_call_boxed(call->op, call->args, call->nargs, &ret, 1);
    if (rc == 0) {
        *out = ret.u.tensor;
        rc = weft_function_save_for_backward(ctx, in, nin - 1);
    }
    return rc;
}

static int64_t at(const weft_tensor *t, int64_t k)
{
    return weft_tensor_dtype(t) == WEFT_INT32 ? ((const int32_t *)weft_tensor_data_ptr(t))[k]
                                              : ((const int64_t *)weft_tensor_data_ptr(t))[k];
}

/* d values = the incoming gradient (any layout, densified) at each entry's
 * position; duplicates each get their position's whole gradient, as each
 * adds fully into the sum there */
static int ctor_backward(weft_function_ctx *ctx, weft_tensor *const *gout, int nout,
                         weft_tensor **gin, int nin)
{
    (void)nout;
    if (!gout[0] || !weft_function_needs_input_grad(ctx, nin - 1))
        return 0;
    const ctor *c = weft_function_user(ctx);
    weft_tensor *ix[2] = {NULL, NULL}, *gd = NULL, *gc = NULL, *gv = NULL;
    int rc = 0;
    for (int i = 0; rc == 0 && i < nin - 1; i++) {
        weft_tensor *saved = NULL;
        rc = weft_function_saved(&saved, ctx, i);
        if (rc == 0)
            rc = weft_contiguous(&ix[i], saved);
        weft_tensor_release(saved);
    }
    /* a gradient on this very pattern (values()'s backward hands one back)
     * is already one value per entry: passed through as it is, so that
     * duplicates keep their own gradients instead of their sum */
    if (rc == 0 && !c->csr && sp__is_coo(gout[0]) &&
        weft_tensor_data_ptr(sp__coo_of(gout[0])->indices) == weft_tensor_data_ptr(ix[0]) &&
        sp__coo_of(gout[0])->nnz == weft_tensor_size(ix[0], 1)) {
        rc = sp__copy(&gin[nin - 1], sp__coo_of(gout[0])->values);
        weft_tensor_release(ix[0]);
        return rc;
    }
    /* the forward may have skipped the checks (check_invariants=False):
     * the gather below addresses memory through these indices */
    if (rc == 0 && !c->csr) {
        for (int64_t d = 0; rc == 0 && d < weft_tensor_size(ix[0], 0); d++)
            for (int64_t e = 0; e < weft_tensor_size(ix[0], 1); e++) {
                int64_t x = at(ix[0], d * weft_tensor_size(ix[0], 1) + e);
                if (x < 0 || x >= c->sizes[d]) {
                    rc = weft_set_error(WEFT_ERANGE, "sparse_coo_tensor backward: indices[%lld][%lld] "
                                                     "is %lld, out of range for size %lld",
                                        (long long)d, (long long)e, (long long)x,
                                        (long long)c->sizes[d]);
                    break;
                }
            }
    } else if (rc == 0) {
        int b = c->ndim - 2;
        int64_t nb = b ? c->sizes[0] : 1, rows = c->sizes[b], cols = c->sizes[b + 1];
        int64_t per = weft_tensor_numel(ix[1]) / (nb ? nb : 1);
        for (int64_t bi = 0; rc == 0 && bi < nb; bi++) {
            for (int64_t r = 0; rc == 0 && r < rows; r++) {
                int64_t k0 = at(ix[0], bi * (rows + 1) + r), k1 = at(ix[0], bi * (rows + 1) + r + 1);
                if (k0 < 0 || k1 < k0 || k1 > per)
                    rc = weft_set_error(WEFT_EINVAL, "sparse_csr_tensor backward: crow_indices "
                                                     "out of order at row %lld", (long long)r);
                for (int64_t k = k0; rc == 0 && k < k1; k++)
                    if (at(ix[1], bi * per + k) < 0 || at(ix[1], bi * per + k) >= cols)
                        rc = weft_set_error(WEFT_ERANGE, "sparse_csr_tensor backward: "
                                                         "col_indices[%lld] out of range",
                                            (long long)k);
            }
        }
    }
    if (rc == 0)
        rc = weft_to_strided(&gd, gout[0]);
    if (rc == 0)
        rc = weft_contiguous(&gc, gd);
    int64_t nnz = 0, inner = 1, lead = 0;
    if (rc == 0 && !c->csr) {
        lead = weft_tensor_size(ix[0], 0);
        nnz = weft_tensor_size(ix[0], 1);
        for (int d = (int)lead; d < c->ndim; d++)
            inner *= c->sizes[d];
    } else if (rc == 0) {
        nnz = weft_tensor_numel(ix[1]);
    }
    int64_t vs[WEFT_MAX_DIMS + 1];
    int vnd = 1;
    vs[0] = nnz;
    if (!c->csr)
        for (int d = (int)lead; d < c->ndim; d++)
            vs[vnd++] = c->sizes[d];
    if (rc == 0)
        rc = weft_empty(&gv, vs, vnd, weft_tensor_dtype(gc), WEFT_DEVICE_CPU);
    if (rc == 0) {
        size_t es = weft_dtype_size(weft_tensor_dtype(gc));
        const char *src = weft_tensor_data_ptr(gc);
        char *dst = weft_tensor_data_ptr(gv);
        if (!c->csr) {
            for (int64_t e = 0; e < nnz; e++) {
                int64_t lin = 0;
                for (int s = 0; s < lead; s++)
                    lin = lin * c->sizes[s] + at(ix[0], s * nnz + e);
                memcpy(dst + (size_t)(e * inner) * es, src + (size_t)(lin * inner) * es,
                       (size_t)inner * es);
            }
        } else {
            int b = c->ndim - 2;
            int64_t nb = b ? c->sizes[0] : 1, rows = c->sizes[b], cols = c->sizes[b + 1];
            int64_t per = nnz / (nb ? nb : 1);
            for (int64_t bi = 0; bi < nb; bi++)
                for (int64_t r = 0; r < rows; r++)
                    for (int64_t k = at(ix[0], bi * (rows + 1) + r);
                         k < at(ix[0], bi * (rows + 1) + r + 1); k++) {
                        int64_t lin = (bi * rows + r) * cols + at(ix[1], bi * per + k);
                        memcpy(dst + (size_t)(bi * per + k) * es, src + (size_t)lin * es, es);
                    }
            weft_tensor *shaped = NULL;
            rc = weft_reshape(&shaped, gv, b ? (int64_t[]){nb, per} : (int64_t[]){per}, b + 1);
            weft_tensor_release(gv);
            gv = shaped;
        }
        if (rc == 0) {
            gin[nin - 1] = gv;
            gv = NULL;
        }
    }
    weft_tensor *all[] = {ix[0], ix[1], gd, gc, gv};
    for (int i = 0; i < 5; i++)
        weft_tensor_release(all[i]);
    return rc;
}

static int ctor_autograd(weft_call *call, void *ctx)
{
    int nt = (int)(intptr_t)ctx; /* tensors before the size: values is the last */
    if (!any_requires_grad(call))
        return weft_redispatch(call, autograd_done);
    for (int i = 0; i < nt - 1; i++)
        if (weft_tensor_requires_grad(weft_arg_tensor(call, i)))
            return weft_set_error(WEFT_EINVAL, "%s: index tensors cannot require grad",
                                  weft_op_name(call->op));
    static const weft_function fn = {"SparseConstructorBackward", ctor_forward, ctor_backward,
                                     false};
    ctor *c = calloc(1, sizeof *c);
    if (!c)
        return weft_set_error(WEFT_ENOMEM, "%s: out of memory", weft_op_name(call->op));
    int nd;
    const int64_t *sizes = weft_arg_ints(call, nt, &nd);
    c->call = call;
    c->csr = nt == 3;
    c->ndim = nd < WEFT_MAX_DIMS ? nd : WEFT_MAX_DIMS;
    memcpy(c->sizes, sizes, (size_t)c->ndim * sizeof *sizes);
    weft_tensor *in[3], *out = NULL;
    for (int i = 0; i < nt; i++)
        in[i] = weft_arg_tensor(call, i);
    /* the core frees c with the node (or at once when none is recorded) */
    int rc = weft_function_apply(&out, 1, &fn, c, free, in, nt);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

int sp__register_autograd(weft_registrar *reg)
{
    static const struct {
        const char *op;
        weft_kernel_fn fn;
        intptr_t ctx;
    } rows[] = {
        {"indices", passthrough_kernel, 0},
        {"crow_indices", passthrough_kernel, 0},
        {"col_indices", passthrough_kernel, 0},
        {"_nnz", passthrough_kernel, 0},
        {"is_coalesced", passthrough_kernel, 0},
        {"sparse_dim", passthrough_kernel, 0},
        {"dense_dim", passthrough_kernel, 0},
        {"values", values_autograd, 0},
        {"sparse_coo_tensor", ctor_autograd, 2},
        {"sparse_csr_tensor", ctor_autograd, 3},
        {"coalesce", refuse_kernel, 0},
        {"sparse_transpose", refuse_kernel, 0},
        {"sparse_narrow", refuse_kernel, 0},
        {"sparse_select", refuse_kernel, 0},
    };
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof rows / sizeof *rows; i++)
        rc = weft_register_kernel(reg, rows[i].op, WEFT_KEY_AUTOGRAD, WEFT_ALL_BACKENDS,
                                  rows[i].fn, (void *)rows[i].ctx, NULL);
    return rc;
}
