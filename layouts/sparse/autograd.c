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
 *  - coalesce, sparse_transpose/narrow/select and the conversions between
 *    sparse layouts are custom functions whose backward maps the gradient
 *    back onto the input's shape and layout (a sparse gradient stays sparse);
 *  - the products with a sparse operand (mm, mv, matmul, addmm) record a
 *    node of their own: the sparse operand's gradient keeps its pattern,
 *    as torch.sparse.mm's (the core's formulas leave them to the layout).
 * The other core operators' formulas are the core's. */
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
    for (int i = 0; i < call->nargs; i++) {
        const weft_value *v = &call->args[i];
        if (v->tag == WEFT_VALUE_TENSOR && v->u.tensor && weft_tensor_requires_grad(v->u.tensor))
            return true;
        for (int k = 0; v->tag == WEFT_VALUE_TENSOR_LIST && k < v->len; k++)
            if (v->u.tensors[k] && weft_tensor_requires_grad(v->u.tensors[k]))
                return true;
    }
    return false;
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
    int rc = sp__require_coalesced("values", self);
    if (rc < 0)
        return rc;
    static const weft_function fn = {"ValuesBackward", values_forward, values_backward, false};
    weft_tensor *in[1] = {weft_arg_tensor(call, 0)}, *out = NULL;
    rc = weft_function_apply(&out, 1, &fn, NULL, NULL, in, 1);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* ------------------------------------------------- to_dense, sparse_mask */

/* The backward passes here record nothing themselves: under create_graph
 * they refuse rather than drop the second derivative. */
static int no_double_backward(const weft_tensor *g, const char *op)
{
    if (weft_is_grad_enabled() && weft_tensor_requires_grad(g))
        return weft_set_error(WEFT_ENOTSUP, "%s: no double backward of a sparse input "
                                            "(create_graph): run backward without it", op);
    return 0;
}

/* to_dense of a sparse CPU tensor: the gradient is the incoming one read
 * at the input's entries, grad.sparse_mask(input) as torch's (which
 * coalesces the input first, as sparse_mask does): it keeps the input's
 * pattern, where the core's conversion backward would turn every nonzero
 * of the dense gradient into an entry.  (torch 1.13 refuses a CSR input;
 * here it gets a CSR gradient on its pattern.) */
static int to_dense_forward(weft_function_ctx *ctx, weft_tensor *const *in, int nin,
                            weft_tensor **out, int nout)
{
    (void)nout;
    int rc = weft_to_strided(out, in[0]); /* grad mode is off: no node */
    return rc < 0 ? rc : weft_function_save_for_backward(ctx, in, nin);
}

static int to_dense_backward(weft_function_ctx *ctx, weft_tensor *const *gout, int nout,
                             weft_tensor **gin, int nin)
{
    (void)nout;
    (void)nin;
    if (!gout[0])
        return 0;
    int rc = no_double_backward(gout[0], "to_dense");
    weft_tensor *self = NULL, *g = NULL, *gt = NULL;
    if (rc == 0)
        rc = weft_function_saved(&self, ctx, 0);
    if (rc == 0)
        rc = weft_to_strided(&g, gout[0]);
    /* in self's dtype while still strided: a gradient of another dtype
     * (backward(float32 grad) of a float64 result) is converted here, where
     * it is cheap, and the sparse result needs no conversion */
    if (rc == 0)
        rc = weft_to_dtype(&gt, g, weft_tensor_dtype(self));
    if (rc == 0)
        rc = sp__sparse_mask(&gin[0], gt, self);
    weft_tensor_release(gt);
    weft_tensor_release(g);
    weft_tensor_release(self);
    return rc;
}

/* the Autograd kernel of to_dense; other inputs (strided, or on another
 * device) go on to the composite, the core's differentiable conversion */
static int to_dense_autograd(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor *self = weft_arg_tensor(call, 0);
    if (!any_requires_grad(call) || !(sp__is_coo(self) || sp__is_csr(self)) ||
        weft_tensor_device(self).type != WEFT_DEVICE_TYPE_CPU)
        return weft_redispatch(call, autograd_done);
    static const weft_function fn = {"ToDenseBackward", to_dense_forward, to_dense_backward,
                                     false};
    weft_tensor *out = NULL;
    int rc = weft_function_apply(&out, 1, &fn, NULL, NULL, &self, 1);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* sparse_mask(self, mask): self's gradient is the incoming one made dense
 * (torch's grad.to_dense()); the mask is not differentiable, as torch's */
static int mask_forward(weft_function_ctx *ctx, weft_tensor *const *in, int nin,
                        weft_tensor **out, int nout)
{
    (void)nin;
    (void)nout;
    return sp__sparse_mask(out, in[0], weft_function_user(ctx));
}

static int mask_backward(weft_function_ctx *ctx, weft_tensor *const *gout, int nout,
                         weft_tensor **gin, int nin)
{
    (void)ctx;
    (void)nout;
    (void)nin;
    return gout[0] ? weft_to_strided(&gin[0], gout[0]) : 0;
}

static int sparse_mask_autograd(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor *self = weft_arg_tensor(call, 0);
    if (!weft_is_grad_enabled() || !weft_tensor_requires_grad(self))
        return weft_redispatch(call, autograd_done);
    static const weft_function fn = {"SparseMaskBackward", mask_forward, mask_backward, false};
    weft_tensor *out = NULL;
    /* the mask is read in forward only (no free: the node never uses it) */
    int rc = weft_function_apply(&out, 1, &fn, weft_arg_tensor(call, 1), NULL, &self, 1);
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
    weft_tensor *ix[2] = {NULL, NULL}, *gd = NULL;
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
        rc = sp__gather_pattern(&gin[nin - 1], gd, ix[0], c->csr ? ix[1] : NULL, c->sizes,
                                c->ndim);
    weft_tensor *all[] = {ix[0], ix[1], gd};
    sp__release_all(all, 3);
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

/* ------------------------------------------------------------- products */

/* mm, mv and matmul take (mat1, mat2), addmm (self, mat1, mat2, beta,
 * alpha): mat1 sparse, mat2 strided (the kernels refuse the rest). */
typedef struct product {
    weft_call *call; /* first (rerun_forward); forward only */
    bool addmm;
    double alpha, beta;
} product;

bool sp__needs_grad(const weft_call *call)
{
    return any_requires_grad(call);
}

/* The forward of the products' and the reshaping operators' functions:
 * the call again (grad mode is off here, so it reaches the layout's kernel
 * below), every input saved.  The user struct starts with the call. */
static int rerun_forward(weft_function_ctx *ctx, weft_tensor *const *in, int nin,
                         weft_tensor **out, int nout)
{
    (void)nout;
    weft_call *call = *(weft_call **)weft_function_user(ctx);
    weft_value ret = {0};
    int rc = weft_call_boxed(call->op, call->args, call->nargs, &ret, 1);
    if (rc == 0) {
        *out = ret.u.tensor;
        rc = weft_function_save_for_backward(ctx, in, nin);
    }
    return rc;
}

/* g summed over the dimensions self was broadcast along (addmm's self) */
static int reduce_to(weft_tensor **out, weft_tensor *g, const weft_tensor *self)
{
    int gd = weft_tensor_ndim(g), sd = weft_tensor_ndim(self), lead = gd - sd, n = 0;
    int64_t dims[WEFT_MAX_DIMS];
    weft_tensor *r = weft_tensor_retain(g), *t = NULL;
    int rc = 0;
    for (int d = 0; d < lead; d++)
        dims[n++] = d;
    if (n) {
        rc = weft_sum(&t, r, dims, n, false);
        weft_tensor_release(r);
        r = t;
    }
    n = 0;
    for (int d = 0; rc == 0 && d < sd; d++)
        if (weft_tensor_size(self, d) == 1 && weft_tensor_size(r, d) != 1)
            dims[n++] = d;
    if (rc == 0 && n) {
        rc = weft_sum(&t, r, dims, n, true);
        weft_tensor_release(r);
        r = t;
    }
    *out = rc < 0 ? NULL : r;
    return rc;
}

/* d mat1: alpha * (G @ mat2^T) at mat1's entries only, one value per
 * position of its coalesced pattern (CSR: its own), in its layout */
static int sampled_grad(weft_tensor **out, const weft_tensor *a, const weft_tensor *g,
                        const weft_tensor *b, double alpha)
{
    const sp__kernels *k = sp__kernels_for(weft_tensor_dtype(a), "mm backward");
    if (!k)
        return WEFT_EDTYPE;
    weft_tensor *pat = NULL, *vals = NULL;
    int rc = sp__is_coo(a) ? sp__coalesce(&pat, a) : (pat = weft_tensor_retain(a), 0);
    if (rc < 0)
        return rc;
    int64_t nnz = sp__is_coo(pat) ? sp__coo_of(pat)->nnz : sp__csr_of(pat)->nnz;
    int64_t rows = weft_tensor_size(a, 0);
    int64_t n = weft_tensor_ndim(b) == 2 ? weft_tensor_size(b, 1) : 1;
    size_t es = weft_dtype_size(weft_tensor_dtype(a));
    /* accumulated in double (dot's), stored in float64, converted at the end */
    weft_tensor *v64 = NULL;
    rc = weft_empty(&v64, (int64_t[]){nnz}, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    if (rc == 0) {
        const char *gp = weft_tensor_data_ptr(g), *bp = weft_tensor_data_ptr(b);
        double *vp = weft_tensor_data_ptr(v64);
        if (sp__is_coo(pat)) {
            const int64_t *ix = weft_tensor_data_ptr(sp__coo_of(pat)->indices);
            for (int64_t e = 0; e < nnz; e++) {
                vp[e] = alpha * k->dot(n, gp + (size_t)(ix[e] * n) * es,
                                       bp + (size_t)(ix[nnz + e] * n) * es);
            }
        } else {
            const sp__csr *c = sp__csr_of(pat);
            for (int64_t r = 0; r < rows; r++)
                for (int64_t e = at(c->crow, r); e < at(c->crow, r + 1); e++) {
                    vp[e] = alpha * k->dot(n, gp + (size_t)(r * n) * es,
                                           bp + (size_t)(at(c->col, e) * n) * es);
                }
        }
        rc = weft_to_dtype(&vals, v64, weft_tensor_dtype(a));
    }
    weft_tensor_release(v64);
    if (rc == 0) {
        if (sp__is_coo(pat)) {
            const sp__coo *c = sp__coo_of(pat);
            rc = sp__coo_wrap(out, weft_tensor_sizes(a), 2, weft_tensor_retain(c->indices), vals,
                              2, true);
        } else {
            const sp__csr *c = sp__csr_of(pat);
            rc = sp__csr_wrap(out, weft_tensor_sizes(a), 2, weft_tensor_retain(c->crow),
                              weft_tensor_retain(c->col), vals);
        }
        vals = NULL;
        if (rc == 0)
            sp__inherit_valid(*out, (const weft_tensor *const *)&pat, 1);
    }
    weft_tensor_release(vals);
    weft_tensor_release(pat);
    return rc;
}

/* d mat2 = alpha * mat1^T @ G (dense), through COO's transpose */
static int transposed_product(weft_tensor **out, const weft_tensor *a, const weft_tensor *g,
                              double alpha)
{
    weft_tensor *coo = NULL, *at = NULL, *p = NULL;
    int rc = sp__is_coo(a) ? (coo = weft_tensor_retain(a), 0) : sp__csr_to_coo(&coo, a);
    if (rc == 0)
        rc = sp__coo_transpose(&at, coo, 0, 1);
    if (rc == 0)
        rc = sp__spmm(&p, at, g, "mm backward");
    if (rc == 0 && alpha != 1) {
        rc = weft_mul_scalar(out, p, alpha);
    } else if (rc == 0) {
        *out = p;
        p = NULL;
    }
    weft_tensor_release(p);
    weft_tensor_release(at);
    weft_tensor_release(coo);
    return rc;
}

static int product_backward(weft_function_ctx *ctx, weft_tensor *const *gout, int nout,
                            weft_tensor **gin, int nin)
{
    (void)nout;
    if (!gout[0])
        return 0;
    /* the kernels below record nothing: a graph of this backward
     * (create_graph) would drop the second derivative */
    if (weft_is_grad_enabled())
        return weft_set_error(WEFT_ENOTSUP, "no double backward through a sparse product "
                                            "(create_graph): run backward without it");
    const product *p = weft_function_user(ctx);
    int o = p->addmm; /* mat1's input index */
    weft_tensor *self = NULL, *a = NULL, *b = NULL, *gd = NULL, *g = NULL, *bc = NULL;
    int rc = weft_function_saved(&a, ctx, o);
    if (rc == 0)
        rc = weft_function_saved(&b, ctx, o + 1);
    if (rc == 0 && p->addmm)
        rc = weft_function_saved(&self, ctx, 0);
    /* G is the strided product's gradient (another layout only if a caller
     * passed one to backward by hand) */
    if (rc == 0)
        rc = weft_to_strided(&gd, gout[0]);
    if (rc == 0)
        rc = weft_contiguous(&g, gd);
    if (rc == 0)
        rc = weft_contiguous(&bc, b);
    if (rc == 0 && p->addmm && weft_function_needs_input_grad(ctx, 0)) {
        weft_tensor *scaled = NULL;
        rc = weft_mul_scalar(&scaled, g, p->beta);
        if (rc == 0)
            rc = reduce_to(&gin[0], scaled, self);
        weft_tensor_release(scaled);
    }
    if (rc == 0 && weft_function_needs_input_grad(ctx, o))
        rc = sampled_grad(&gin[o], a, g, bc, p->alpha);
    if (rc == 0 && weft_function_needs_input_grad(ctx, o + 1))
        rc = transposed_product(&gin[o + 1], a, g, p->alpha);
    (void)nin;
    weft_tensor *all[] = {self, a, b, gd, g, bc};
    for (int i = 0; i < 6; i++)
        weft_tensor_release(all[i]);
    return rc;
}

int sp__product_autograd(weft_call *call)
{
    const char *name = weft_op_name(call->op);
    bool addmm = strcmp(name, "addmm") == 0;
    int o = addmm;
    const weft_tensor *a = weft_arg_tensor(call, o), *b = weft_arg_tensor(call, o + 1);
    if (!(sp__is_coo(a) || sp__is_csr(a)) || weft_tensor_layout(b) != WEFT_LAYOUT_STRIDED)
        return weft_set_error(WEFT_ENOTSUP,
                              "%s: no gradient for layouts '%s' and '%s': only a sparse matrix "
                              "times a strided one is differentiable (as torch.sparse.mm)",
                              name, sp__layout_name(a), sp__layout_name(b));
    product *p = calloc(1, sizeof *p);
    if (!p)
        return weft_set_error(WEFT_ENOMEM, "%s: out of memory", name);
    p->call = call;
    p->addmm = addmm;
    p->alpha = addmm ? weft_arg_double(call, 4) : 1;
    p->beta = addmm ? weft_arg_double(call, 3) : 0;
    const char *node = addmm                    ? "SparseAddmmBackward"
                       : strcmp(name, "mv") == 0 ? "SparseMvBackward"
                                                 : "SparseMmBackward";
    const weft_function fn = {node, rerun_forward, product_backward, false};
    weft_tensor *in[3], *out = NULL;
    for (int i = 0; i < o + 2; i++)
        in[i] = weft_arg_tensor(call, i);
    int rc = weft_function_apply(&out, 1, &fn, p, free, in, o + 2);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* ------------------------------------------ reshaping and conversions */

/* coalesce, sparse_transpose, sparse_narrow, sparse_select, to_sparse and
 * to_sparse_csr: one input, one output; backward maps the gradient back
 * onto the input's shape and layout. */
enum { UN_COALESCE, UN_TRANSPOSE, UN_NARROW, UN_SELECT, UN_CONVERT, UN_INDEX, UN_DTYPE };
typedef struct unary {
    weft_call *call; /* first (rerun_forward); forward only */
    int kind;
    int64_t arg[2]; /* transpose: dim0, dim1; narrow: dim, start; select: dim, index;
                     * index_select: dim (the index tensor is input 1) */
} unary;

/* g (any layout) in like's layout: strided, COO of like's sparse_dim, or
 * CSR; a sparse g is never densified on the way to a sparse layout */
static int in_layout_of(weft_tensor **out, const weft_tensor *g, const weft_tensor *like)
{
    if (weft_tensor_layout(like) == WEFT_LAYOUT_STRIDED)
        return weft_to_strided(out, g);
    if (weft_tensor_layout(g) == weft_tensor_layout(like) &&
        (!sp__is_coo(g) || sp__coo_of(g)->sparse_dim == sp__coo_of(like)->sparse_dim)) {
        *out = weft_tensor_retain(g);
        return 0;
    }
    if (sp__is_csr(like))
        return sp__is_coo(g) ? sp__coo_to_csr(out, g) : sp__dense_to_csr(out, g);
    if (sp__is_csr(g) && sp__coo_of(like)->sparse_dim == weft_tensor_ndim(g))
        return sp__csr_to_coo(out, g);
    weft_tensor *d = NULL;
    int rc = weft_to_strided(&d, g);
    if (rc == 0)
        rc = sp__dense_to_coo(out, d, sp__coo_of(like)->sparse_dim);
    weft_tensor_release(d);
    return rc;
}

/* narrow's and select's gradient: g (output-shaped, COO or strided) put
 * back at its place in a zero tensor of like's shape; a COO g only has its
 * indices moved (narrow: shifted by start along dim; select: a row of index
 * inserted at dim), so nothing of like's size is allocated */
static int unnarrow(weft_tensor **out, const weft_tensor *g, const weft_tensor *like, int kind,
                    int64_t dim, int64_t start)
{
    int ndim = weft_tensor_ndim(like);
    if (dim < 0)
        dim += ndim;
    if (kind == UN_SELECT && start < 0)
        start += weft_tensor_size(like, (int)dim);
    weft_tensor *coo = NULL, *ix = NULL;
    int rc = 0;
    /* a dense (or CSR) gradient, or one whose dim is a dense one of its
     * values: placed into zeros */
    if (!sp__is_coo(g) || dim >= sp__coo_of(g)->sparse_dim) {
        weft_tensor *d = NULL, *z = NULL, *view = NULL;
        rc = weft_to_strided(&d, g);
        if (rc == 0)
            rc = weft_zeros(&z, weft_tensor_sizes(like), ndim, weft_tensor_dtype(d),
                            weft_tensor_device(d));
        if (rc == 0)
            rc = kind == UN_SELECT ? weft_select(&view, z, (int)dim, start)
                                   : weft_narrow(&view, z, (int)dim, start,
                                                 weft_tensor_size(d, (int)dim));
        if (rc == 0)
            rc = weft_copy_(view, d);
        if (rc == 0)
            rc = in_layout_of(out, z, like);
        weft_tensor_release(view);
        weft_tensor_release(z);
        weft_tensor_release(d);
        return rc;
    }
    const sp__coo *p = sp__coo_of(g);
    int sd = p->sparse_dim + (kind == UN_SELECT);
    rc = weft_empty(&ix, (int64_t[]){sd, p->nnz}, 2, WEFT_INT64, WEFT_DEVICE_CPU);
    if (rc < 0)
        return rc;
    const int64_t *src = weft_tensor_data_ptr(p->indices);
    int64_t *dst = weft_tensor_data_ptr(ix);
    for (int s = 0, from = 0; s < sd; s++) {
        if (kind == UN_SELECT && s == dim) {
            for (int64_t e = 0; e < p->nnz; e++)
                dst[s * p->nnz + e] = start;
            continue;
        }
        int64_t shift = s == dim ? start : 0;
        for (int64_t e = 0; e < p->nnz; e++)
            dst[s * p->nnz + e] = src[from * p->nnz + e] + shift;
        from++;
    }
    /* row-major order survives a shift or a constant row: coalesced stays */
    rc = sp__coo_wrap(&coo, weft_tensor_sizes(like), ndim, ix, weft_tensor_retain(p->values), sd,
                      p->coalesced);
    if (rc == 0) {
        sp__inherit_valid(coo, &g, 1);
        rc = in_layout_of(out, coo, like);
    }
    weft_tensor_release(coo);
    return rc;
}

/* index_select's gradient: g's entries at output position q along dim go
 * back to position index[q] (repeats add up: the result is uncoalesced);
 * along a dense dim the values are index_added into blocks of the input's
 * width */
static int unselect(weft_tensor **out, const weft_tensor *g, const weft_tensor *like,
                    int64_t dim, const weft_tensor *index)
{
    int ndim = weft_tensor_ndim(like), sd = sp__coo_of(like)->sparse_dim;
    if (dim < 0)
        dim += ndim;
    weft_tensor *coo = NULL, *d = NULL, *ix = NULL, *v = NULL, *res = NULL, *want = NULL;
    int rc = 0;
    /* g in COO of like's sparse_dim (the gradient of to_dense comes as
     * a COO of every dim sparse) */
    if (sp__is_coo(g) && sp__coo_of(g)->sparse_dim == sd) {
        coo = weft_tensor_retain(g);
    } else {
        rc = weft_to_strided(&d, g);
        if (rc == 0)
            rc = sp__dense_to_coo(&coo, d, sd);
    }
    if (rc == 0)
        rc = weft_contiguous(&want, index);
    if (rc == 0 && dim < sd) {
        const sp__coo *p = sp__coo_of(coo);
        rc = sp__copy(&ix, p->indices);
        if (rc == 0) {
            int64_t *row = (int64_t *)weft_tensor_data_ptr(ix) + dim * p->nnz;
            const int64_t *w = weft_tensor_data_ptr(want);
            for (int64_t e = 0; e < p->nnz; e++)
                row[e] = w[row[e]];
            v = weft_tensor_retain(p->values);
        }
    } else if (rc == 0) {
        const sp__coo *p = sp__coo_of(coo);
        int vdim = (int)(dim - sd + 1);
        int64_t vs[WEFT_MAX_DIMS + 1];
        memcpy(vs, weft_tensor_sizes(p->values), (size_t)weft_tensor_ndim(p->values) * sizeof *vs);
        vs[vdim] = weft_tensor_size(like, (int)dim);
        ix = weft_tensor_retain(p->indices);
        rc = weft_zeros(&v, vs, weft_tensor_ndim(p->values), weft_tensor_dtype(p->values),
                        WEFT_DEVICE_CPU);
        if (rc == 0)
            rc = weft_index_add_(v, vdim, want, p->values);
    }
    if (rc == 0) {
        rc = sp__coo_wrap(&res, weft_tensor_sizes(like), ndim, ix, v, sd, dim >= sd &&
                          sp__coo_of(coo)->coalesced);
        ix = v = NULL;
    }
    if (rc == 0)
        rc = in_layout_of(out, res, like);
    weft_tensor *all[] = {coo, d, ix, v, res, want};
    sp__release_all(all, 6);
    return rc;
}

static int unary_backward(weft_function_ctx *ctx, weft_tensor *const *gout, int nout,
                          weft_tensor **gin, int nin)
{
    (void)nout;
    (void)nin;
    if (!gout[0])
        return 0;
    int rc = no_double_backward(gout[0], "sparse reshaping");
    if (rc < 0)
        return rc;
    const unary *u = weft_function_user(ctx);
    weft_tensor *self = NULL, *g = gout[0], *coo = NULL, *d = NULL;
    rc = weft_function_saved(&self, ctx, 0);
    if (rc < 0)
        return rc;
    switch (u->kind) {
    case UN_COALESCE: /* the same values summed: each entry gets its position's gradient */
        rc = in_layout_of(&gin[0], g, self);
        break;
    case UN_TRANSPOSE:
        if (sp__is_coo(g)) {
            rc = sp__coo_transpose(&coo, g, u->arg[0], u->arg[1]);
        } else {
            rc = weft_to_strided(&d, g);
            if (rc == 0)
                rc = weft_transpose(&coo, d, (int)u->arg[0], (int)u->arg[1]);
        }
        if (rc == 0)
            rc = in_layout_of(&gin[0], coo, self);
        break;
    case UN_NARROW:
    case UN_SELECT:
        rc = unnarrow(&gin[0], g, self, u->kind, u->arg[0], u->arg[1]);
        break;
    case UN_DTYPE: /* the gradient in the input's layout and dtype */
        rc = in_layout_of(&coo, g, self);
        if (rc == 0)
            rc = sp__is_coo(coo) || sp__is_csr(coo) ? sp__to_dtype(&gin[0], coo, weft_tensor_dtype(self))
                                       : weft_to_dtype(&gin[0], coo, weft_tensor_dtype(self));
        break;
    case UN_INDEX: {
        weft_tensor *index = NULL, *coo_self = NULL;
        rc = weft_function_saved(&index, ctx, 1);
        /* a CSR input's gradient is worked out on its COO form */
        if (rc == 0)
            rc = sp__is_csr(self) ? sp__csr_to_coo(&coo_self, self)
                                  : (coo_self = weft_tensor_retain(self), 0);
        if (rc == 0)
            rc = unselect(&coo, g, coo_self, u->arg[0], index);
        if (rc == 0)
            rc = in_layout_of(&gin[0], coo, self);
        weft_tensor_release(index);
        weft_tensor_release(coo_self);
        break;
    }
    default: /* a conversion: back to the input's layout */
        rc = in_layout_of(&gin[0], g, self);
    }
    weft_tensor_release(coo);
    weft_tensor_release(d);
    weft_tensor_release(self);
    return rc;
}

static int unary_apply(weft_call *call, int kind)
{
    static const char *const names[] = {"CoalesceBackward", "SparseTransposeBackward",
                                        "SparseNarrowBackward", "SparseSelectBackward",
                                        "SparseConversionBackward", "SparseIndexSelectBackward",
                                        "SparseToDtypeBackward"};
    unary *u = calloc(1, sizeof *u);
    if (!u)
        return weft_set_error(WEFT_ENOMEM, "%s: out of memory", weft_op_name(call->op));
    u->call = call;
    u->kind = kind;
    for (int i = 0; i < 2 && kind >= UN_TRANSPOSE && kind <= UN_SELECT; i++)
        u->arg[i] = weft_arg_int(call, i + 1);
    if (kind == UN_INDEX)
        u->arg[0] = weft_arg_int(call, 1);
    const weft_function fn = {names[kind], rerun_forward, unary_backward, false};
    weft_tensor *in[2] = {weft_arg_tensor(call, 0), kind == UN_INDEX ? weft_arg_tensor(call, 2)
                                                                     : NULL},
                *out = NULL;
    int rc = weft_function_apply(&out, 1, &fn, u, free, in, kind == UN_INDEX ? 2 : 1);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* the Autograd kernel of coalesce, sparse_transpose, sparse_narrow and
 * sparse_select (ctx: the kind) */
static int unary_autograd(weft_call *call, void *ctx)
{
    const weft_tensor *self = weft_arg_tensor(call, 0);
    /* the kernels refuse other layouts (and CSR where they take COO only:
     * the forward's error then ends the call); the CUDA plugin's refuse an
     * input that requires grad (the backward here reads indices on the host) */
    if (!any_requires_grad(call) || !(sp__is_coo(self) || sp__is_csr(self)) ||
        weft_tensor_device(self).type != WEFT_DEVICE_TYPE_CPU)
        return weft_redispatch(call, autograd_done);
    return unary_apply(call, (int)(intptr_t)ctx);
}

int sp__conversion_autograd(weft_call *call)
{
    return unary_apply(call, UN_CONVERT);
}

int sp__index_select_autograd(weft_call *call)
{
    return unary_apply(call, UN_INDEX);
}

/* ------------------------------------------------------------ sum, cat */

typedef struct sum_fn {
    weft_call *call; /* first (rerun_forward); forward only */
    bool keepdim;
    bool drop[WEFT_MAX_DIMS];
} sum_fn;

/* the incoming gradient (output-shaped: small, a vector for a matrix)
 * made dense, given back its summed dims as ones, expanded (a view) to
 * the input's shape and read at the input's entries */
static int sum_backward(weft_function_ctx *ctx, weft_tensor *const *gout, int nout,
                        weft_tensor **gin, int nin)
{
    (void)nout;
    (void)nin;
    if (!gout[0])
        return 0;
    int rc = no_double_backward(gout[0], "sum");
    if (rc < 0)
        return rc;
    const sum_fn *f = weft_function_user(ctx);
    weft_tensor *self = NULL, *gd = NULL, *gt = NULL, *kept = NULL, *wide = NULL;
    rc = weft_function_saved(&self, ctx, 0);
    int ndim = rc == 0 ? weft_tensor_ndim(self) : 0;
    int64_t ones[WEFT_MAX_DIMS];
    for (int d = 0; d < ndim; d++)
        ones[d] = f->drop[d] ? 1 : weft_tensor_size(self, d);
    if (rc == 0)
        rc = weft_to_strided(&gd, gout[0]);
    if (rc == 0) /* sum(dtype=) may have widened it */
        rc = weft_to_dtype(&gt, gd, weft_tensor_dtype(self));
    if (rc == 0)
        rc = weft_reshape(&kept, gt, ones, ndim);
    if (rc == 0)
        rc = weft_expand(&wide, kept, weft_tensor_sizes(self), ndim);
    if (rc == 0)
        rc = sp__sparse_mask(&gin[0], wide, self);
    weft_tensor *all[] = {self, gd, gt, kept, wide};
    sp__release_all(all, 5);
    return rc;
}

int sp__sum_autograd(weft_call *call)
{
    const weft_tensor *self = weft_arg_tensor(call, 0);
    sum_fn *f = calloc(1, sizeof *f);
    if (!f)
        return weft_set_error(WEFT_ENOMEM, "sum: out of memory");
    f->call = call;
    f->keepdim = weft_arg_bool(call, 2);
    int ndim = weft_tensor_ndim(self), nd = 0;
    const int64_t *dims = weft_arg_is_none(call, 1) ? NULL : weft_arg_ints(call, 1, &nd);
    for (int i = 0; i < nd; i++) {
        int64_t d = dims[i] < 0 ? dims[i] + ndim : dims[i];
        if (d >= 0 && d < ndim) /* the forward refuses the others */
            f->drop[d] = true;
    }
    for (int d = 0; nd == 0 && d < ndim; d++)
        f->drop[d] = true;
    static const weft_function fn = {"SparseSumBackward", rerun_forward, sum_backward, false};
    weft_tensor *in[1] = {weft_arg_tensor(call, 0)}, *out = NULL;
    int rc = weft_function_apply(&out, 1, &fn, f, free, in, 1);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

typedef struct cat_fn {
    weft_call *call; /* first (rerun_forward); forward only */
    int64_t dim;
} cat_fn;

/* g[start, start + len) along dim, in like's layout: a COO gradient
 * through the plugin's own sparse_narrow, a dense one as a view */
static int slice_of(weft_tensor **out, const weft_tensor *g, const weft_tensor *like, int64_t dim,
                    int64_t start, int64_t len)
{
    weft_tensor *part = NULL, *d = NULL;
    int rc;
    if (sp__is_coo(g)) {
        rc = sp__call_ints(&part, "sparse_narrow", g, (int64_t[]){dim, start, len}, 3);
    } else {
        rc = weft_to_strided(&d, g);
        if (rc == 0)
            rc = weft_narrow(&part, d, (int)dim, start, len);
    }
    if (rc == 0)
        rc = in_layout_of(out, part, like);
    weft_tensor_release(part);
    weft_tensor_release(d);
    return rc;
}

static int cat_backward(weft_function_ctx *ctx, weft_tensor *const *gout, int nout,
                        weft_tensor **gin, int nin)
{
    (void)nout;
    if (!gout[0])
        return 0;
    int rc = no_double_backward(gout[0], "cat");
    const cat_fn *f = weft_function_user(ctx);
    int64_t at = 0;
    for (int k = 0; rc == 0 && k < nin; k++) {
        weft_tensor *in = NULL;
        rc = weft_function_saved(&in, ctx, k);
        int64_t len = rc == 0 ? weft_tensor_size(in, (int)f->dim) : 0;
        if (rc == 0 && weft_function_needs_input_grad(ctx, k))
            rc = slice_of(&gin[k], gout[0], in, f->dim, at, len);
        at += len;
        weft_tensor_release(in);
    }
    return rc;
}

int sp__cat_autograd(weft_call *call)
{
    int n;
    weft_tensor *const *ts = weft_arg_tensors(call, 0, &n);
    if (n < 1)
        return weft_set_error(WEFT_EINVAL, "cat: needs at least one tensor");
    int64_t dim = weft_arg_int(call, 1), ndim = weft_tensor_ndim(ts[0]);
    if (dim < -ndim || dim >= ndim)
        return weft_set_error(WEFT_ERANGE, "cat: dimension %lld out of range for %lld-D",
                              (long long)dim, (long long)ndim);
    cat_fn *f = calloc(1, sizeof *f);
    if (!f)
        return weft_set_error(WEFT_ENOMEM, "cat: out of memory");
    f->call = call;
    f->dim = dim < 0 ? dim + ndim : dim;
    static const weft_function fn = {"SparseCatBackward", rerun_forward, cat_backward, false};
    weft_tensor *out = NULL;
    int rc = weft_function_apply(&out, 1, &fn, f, free, ts, n);
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
        /* the raw arrays are not differentiable (torch's neither) */
        {"_indices", passthrough_kernel, 0},
        {"_values", passthrough_kernel, 0},
        {"crow_indices", passthrough_kernel, 0},
        {"col_indices", passthrough_kernel, 0},
        {"_nnz", passthrough_kernel, 0},
        {"is_coalesced", passthrough_kernel, 0},
        {"sparse_dim", passthrough_kernel, 0},
        {"dense_dim", passthrough_kernel, 0},
        {"values", values_autograd, 0},
        {"to_dense", to_dense_autograd, 0},
        {"sparse_mask", sparse_mask_autograd, 0},
        {"sparse_coo_tensor", ctor_autograd, 2},
        {"sparse_csr_tensor", ctor_autograd, 3},
        {"coalesce", unary_autograd, UN_COALESCE},
        {"sparse_transpose", unary_autograd, UN_TRANSPOSE},
        {"sparse_narrow", unary_autograd, UN_NARROW},
        {"sparse_select", unary_autograd, UN_SELECT},
        {"sparse_to_dtype", unary_autograd, UN_DTYPE},
    };
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof rows / sizeof *rows; i++)
        rc = weft_register_kernel(reg, rows[i].op, WEFT_KEY_AUTOGRAD, WEFT_ALL_BACKENDS,
                                  rows[i].fn, (void *)rows[i].ctx, NULL);
    return rc;
}
