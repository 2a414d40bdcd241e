/* layouts/sparse/plugin.c — libweft-sparse.so: registers the sparse_coo and
 * sparse_csr layouts, defines the sparse operators by schema (constructors,
 * conversions, accessors: applications reach them by name through
 * weft_op_find and weft_call_boxed, without linking this plugin) and
 * registers its kernels. */
#include <stdio.h>
#include <stdlib.h>

#include "sparse.h"

int sp__coo_layout = -1, sp__csr_layout = -1;

/* ------------------------------------------------------ layout interface */

static void coo_release(void *payload)
{
    sp__coo *p = payload;
    weft_tensor_release(p->indices);
    weft_tensor_release(p->values);
    free(p);
}

static void csr_release(void *payload)
{
    sp__csr *p = payload;
    weft_tensor_release(p->crow);
    weft_tensor_release(p->col);
    weft_tensor_release(p->values);
    free(p);
}

/* from strided, the default COO keeps every dimension sparse, as torch's
 * to_sparse() does */
static int coo_from_strided(weft_tensor **out, const weft_tensor *src)
{
    return sp__dense_to_coo(out, src, weft_tensor_ndim(src));
}

static int coo_describe(const weft_tensor *t, char *buf, size_t size)
{
    const sp__coo *p = sp__coo_of(t);
    return snprintf(buf, size, "nnz=%lld, sparse_dim=%d, dense_dim=%d%s", (long long)p->nnz,
                    p->sparse_dim, p->dense_dim, p->coalesced ? ", coalesced" : "");
}

static int csr_describe(const weft_tensor *t, char *buf, size_t size)
{
    const sp__csr *p = sp__csr_of(t);
    return snprintf(buf, size, "nnz=%lld, %s indices%s", (long long)p->nnz,
                    weft_dtype_name(weft_tensor_dtype(p->crow)), p->batch ? ", batched" : "");
}

static int64_t coo_nbytes(const weft_tensor *t)
{
    const sp__coo *p = sp__coo_of(t);
    return weft_tensor_nbytes(p->indices) + weft_tensor_nbytes(p->values);
}

static int64_t csr_nbytes(const weft_tensor *t)
{
    const sp__csr *p = sp__csr_of(t);
    return weft_tensor_nbytes(p->crow) + weft_tensor_nbytes(p->col) +
           weft_tensor_nbytes(p->values);
}

int sp__call(weft_tensor **out, const char *name, const weft_value *args, int nargs)
{
    *out = NULL;
    const weft_op *op = NULL;
    weft_value ret = {0};
    int rc = weft_op_find(&op, name);
    if (rc == 0)
        rc = weft_call_boxed(op, args, nargs, &ret, 1);
    if (rc == 0)
        *out = ret.u.tensor;
    return rc;
}

int sp__call_ints(weft_tensor **out, const char *name, const weft_tensor *t, const int64_t *ints,
                  int nints)
{
    weft_value args[4] = {{.tag = WEFT_VALUE_TENSOR, .u.tensor = (weft_tensor *)t}};
    for (int i = 0; i < nints && i < 3; i++)
        args[1 + i] = (weft_value){.tag = WEFT_VALUE_INT, .u.i = ints[i]};
    return sp__call(out, name, args, 1 + (nints < 3 ? nints : 3));
}

/* The kernels here read the payload on the host, so a tensor on another
 * device goes through the to_dense operator instead: the kernel a device's
 * sparse plugin registered for this layout there (libweft-sparse-cuda.so),
 * or the dispatcher's error naming the layout and the device.  Never back
 * here: a device's to_dense does not call weft_to_strided. */
static int any_to_strided(weft_tensor **out, const weft_tensor *t)
{
    if (weft_tensor_device(t).type != WEFT_DEVICE_TYPE_CPU)
        return sp__call_ints(out, "to_dense", t, NULL, 0);
    return sp__is_coo(t) ? sp__coo_to_dense(out, t) : sp__csr_to_dense(out, t);
}

/* Moves the components, which are strided tensors, with weft_to_device; the
 * pattern's flags (coalesced, validated) go with them unchanged, as
 * nothing about the pattern changes. */
static int any_to_device(weft_tensor **out, const weft_tensor *t, weft_device device)
{
    weft_tensor *c[3] = {NULL, NULL, NULL};
    weft_tensor *src[3];
    int n;
    if (sp__is_coo(t)) {
        src[0] = sp__coo_of(t)->indices;
        src[1] = sp__coo_of(t)->values;
        n = 2;
    } else {
        src[0] = sp__csr_of(t)->crow;
        src[1] = sp__csr_of(t)->col;
        src[2] = sp__csr_of(t)->values;
        n = 3;
    }
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        rc = weft_to_device(&c[i], src[i], device);
    if (rc < 0) {
        for (int i = 0; i < n; i++)
            weft_tensor_release(c[i]);
        return rc;
    }
    if (sp__is_coo(t)) {
        const sp__coo *p = sp__coo_of(t);
        rc = sp__coo_wrap(out, weft_tensor_sizes(t), weft_tensor_ndim(t), c[0], c[1],
                          p->sparse_dim, p->coalesced);
    } else {
        rc = sp__csr_wrap(out, weft_tensor_sizes(t), weft_tensor_ndim(t), c[0], c[1], c[2]);
    }
    if (rc == 0)
        sp__inherit_valid(*out, &t, 1);
    return rc;
}

/* ------------------------------------------------------------ operators */

/* The operators this plugin defines: layouts/sparse/operators.def, made
 * into a list of C strings at build time. */
static const char *const schemas[] = {
#include "layouts/sparse/schemas.h"
};

/* The CPU constructors read the indices on the host; components on a
 * device are a device sparse plugin's (libweft-sparse-cuda.so), whose
 * kernels take the call before this composite when it is loaded. */
static int on_cpu(const char *op, const weft_tensor *const *ts, int n)
{
    for (int i = 0; i < n; i++)
        if (weft_tensor_device(ts[i]).type != WEFT_DEVICE_TYPE_CPU) {
            char dev[32];
            weft_device_to_string(weft_tensor_device(ts[i]), dev, sizeof dev);
            return weft_set_error(WEFT_EDEVICE,
                                  "%s: components on %s need that device's sparse plugin "
                                  "(libweft-sparse-cuda.so for CUDA), which is not loaded; "
                                  "this one builds sparse tensors on the CPU",
                                  op, dev);
        }
    return 0;
}

static int coo_tensor_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *indices = weft_arg_tensor(call, 0), *values = weft_arg_tensor(call, 1);
    int ndim;
    const int64_t *sizes = weft_arg_ints(call, 2, &ndim);
    int rc = on_cpu("sparse_coo_tensor", (const weft_tensor *[]){indices, values}, 2);
    if (rc == 0)
        rc = sp__coo_check("sparse_coo_tensor", indices, values, sizes, ndim,
                           weft_arg_bool(call, 3));
    weft_tensor *ix = NULL, *v = NULL, *out;
    if (rc == 0)
        rc = weft_contiguous(&ix, indices);
    if (rc == 0)
        rc = weft_contiguous(&v, values);
    if (rc < 0) {
        weft_tensor_release(ix);
        return rc;
    }
    rc = sp__coo_wrap(&out, sizes, ndim, ix, v, (int)weft_tensor_size(indices, 0), false);
    if (rc == 0)
        sp__coo_of(out)->valid = weft_arg_bool(call, 3);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

static int csr_tensor_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *crow = weft_arg_tensor(call, 0), *col = weft_arg_tensor(call, 1),
                      *values = weft_arg_tensor(call, 2);
    int ndim;
    const int64_t *sizes = weft_arg_ints(call, 3, &ndim);
    int rc = on_cpu("sparse_csr_tensor", (const weft_tensor *[]){crow, col, values}, 3);
    if (rc == 0)
        rc = sp__csr_check("sparse_csr_tensor", crow, col, values, sizes, ndim,
                           weft_arg_bool(call, 4));
    weft_tensor *c0 = NULL, *c1 = NULL, *v = NULL, *out;
    if (rc == 0)
        rc = weft_contiguous(&c0, crow);
    if (rc == 0)
        rc = weft_contiguous(&c1, col);
    if (rc == 0)
        rc = weft_contiguous(&v, values);
    if (rc < 0) {
        weft_tensor_release(c0);
        weft_tensor_release(c1);
        return rc;
    }
    rc = sp__csr_wrap(&out, sizes, ndim, c0, c1, v);
    if (rc == 0)
        sp__csr_of(out)->valid = weft_arg_bool(call, 4);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* the conversions the core's differentiable weft_to_layout/weft_to_strided
 * do not cover (between sparse layouts, to_sparse with fewer sparse dims
 * than dims) record their own node when an input requires grad */
static bool own_node(const weft_tensor *self)
{
    return weft_is_grad_enabled() && weft_tensor_requires_grad(self);
}

static int to_sparse_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = weft_arg_tensor(call, 0);
    int64_t sd = weft_arg_int(call, 1);
    bool full = sd == -1 || sd == weft_tensor_ndim(self);
    if ((!full || weft_tensor_layout(self) != WEFT_LAYOUT_STRIDED) && own_node(self))
        return sp__conversion_autograd(call);
    weft_tensor *out = NULL;
    int rc;
    if (sp__is_coo(self)) {
        const sp__coo *p = sp__coo_of(self);
        if (sd != -1 && sd != p->sparse_dim)
            return weft_set_error(WEFT_ENOTSUP,
                                  "to_sparse: changing a COO tensor's sparse_dim (%d to %lld) is "
                                  "not supported; go through to_dense",
                                  p->sparse_dim, (long long)sd);
        out = weft_tensor_retain(self);
        rc = 0;
    } else if (sp__is_csr(self)) {
        if (sd != -1 && sd != weft_tensor_ndim(self))
            return weft_set_error(WEFT_ENOTSUP,
                                  "to_sparse: a CSR tensor converts to COO with sparse_dim %d, "
                                  "not %lld",
                                  weft_tensor_ndim(self), (long long)sd);
        rc = sp__csr_to_coo(&out, self);
    } else if (weft_tensor_layout(self) == WEFT_LAYOUT_STRIDED) {
        if (sd == -1 || sd == weft_tensor_ndim(self))
            rc = weft_to_layout(&out, self, sp__coo_layout); /* differentiable */
        else
            rc = sp__dense_to_coo(&out, self, (int)sd);
    } else {
        return weft_set_error(WEFT_ENOTSUP, "to_sparse: no conversion from layout '%s'",
                              sp__layout_name(self));
    }
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

static int to_sparse_csr_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = weft_arg_tensor(call, 0);
    if (weft_tensor_layout(self) != WEFT_LAYOUT_STRIDED && own_node(self))
        return sp__conversion_autograd(call);
    weft_tensor *out = NULL;
    int rc;
    if (sp__is_csr(self)) {
        out = weft_tensor_retain(self);
        rc = 0;
    } else if (sp__is_coo(self)) {
        rc = sp__coo_to_csr(&out, self);
    } else if (weft_tensor_layout(self) == WEFT_LAYOUT_STRIDED) {
        rc = weft_to_layout(&out, self, sp__csr_layout); /* differentiable */
    } else {
        return weft_set_error(WEFT_ENOTSUP, "to_sparse_csr: no conversion from layout '%s'",
                              sp__layout_name(self));
    }
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* to_dense of any tensor: weft_to_strided, differentiable (the gradient goes
 * back through the layout's from_strided); a strided tensor is returned as
 * itself, as torch's to_dense does.  These conversions are composites, so
 * they run at the Autograd slot too: each either goes through the core's
 * differentiable conversions or refuses an input that requires grad. */
static int to_dense_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = weft_arg_tensor(call, 0);
    weft_tensor *out;
    int rc = weft_to_strided(&out, self);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

static int coalesce_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor *out;
    int rc = sp__coalesce(&out, weft_arg_tensor(call, 0));
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

static int sparse_mask_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor *out;
    int rc = sp__sparse_mask(&out, weft_arg_tensor(call, 0), weft_arg_tensor(call, 1));
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

static int scalar_result(weft_call *call, double v, weft_dtype dt)
{
    weft_tensor *out;
    int rc = weft_full(&out, NULL, 0, v, dt, WEFT_DEVICE_CPU);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

static int is_coalesced_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    return scalar_result(call, sp__coo_of(weft_arg_tensor(call, 0))->coalesced, WEFT_BOOL);
}

static int nnz_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *t = weft_arg_tensor(call, 0);
    return scalar_result(call, (double)(sp__is_coo(t) ? sp__coo_of(t)->nnz : sp__csr_of(t)->nnz),
                         WEFT_INT64);
}

static int sparse_dim_kernel(weft_call *call, void *ctx)
{
    const weft_tensor *t = weft_arg_tensor(call, 0);
    int sd = sp__is_coo(t) ? sp__coo_of(t)->sparse_dim : 2;
    int dd = weft_tensor_ndim(t) - sd - (sp__is_csr(t) ? sp__csr_of(t)->batch : 0);
    return scalar_result(call, ctx ? dd : sd, WEFT_INT64);
}

/* the accessors hand out the payload's own tensors, as torch's do (no
 * copy): ctx says which.  indices() and values() of an uncoalesced COO
 * tensor refuse (sp__require_coalesced); _indices() and _values()
 * (ACC_RAW) hand out the raw arrays. */
enum { ACC_INDICES, ACC_VALUES, ACC_CROW, ACC_COL, ACC_RAW = 8 };
static int accessor_kernel(weft_call *call, void *ctx)
{
    const weft_tensor *t = weft_arg_tensor(call, 0);
    int which = (int)(intptr_t)ctx & ~ACC_RAW;
    bool raw = ((int)(intptr_t)ctx & ACC_RAW) != 0;
    weft_tensor *r = NULL;
    if (!raw && (which == ACC_INDICES || which == ACC_VALUES)) {
        int rc = sp__require_coalesced(weft_op_name(call->op), t);
        if (rc < 0)
            return rc;
    }
    if (sp__is_coo(t))
        r = which == ACC_INDICES ? sp__coo_of(t)->indices
                                 : which == ACC_VALUES ? sp__coo_of(t)->values : NULL;
    else if (sp__is_csr(t))
        r = which == ACC_CROW ? sp__csr_of(t)->crow
                              : which == ACC_COL ? sp__csr_of(t)->col
                                                 : which == ACC_VALUES ? sp__csr_of(t)->values
                                                                       : NULL;
    if (!r)
        return weft_set_error(WEFT_ENOTSUP, "%s: not defined for layout '%s'",
                              weft_op_name(call->op), sp__layout_name(t));
    return weft_return_tensor(call, 0, weft_tensor_retain(r));
}

int sp__register_construct(weft_registrar *reg)
{
    int coo = weft_layout_key(sp__coo_layout), csr = weft_layout_key(sp__csr_layout);
    struct {
        const char *op;
        weft_kernel_fn fn;
        intptr_t ctx;
        bool composite, on_coo, on_csr;
        bool any_device; /* reads only the payload's metadata */
    } rows[] = {
        {"sparse_coo_tensor", coo_tensor_kernel, 0, true, false, false, false},
        {"sparse_csr_tensor", csr_tensor_kernel, 0, true, false, false, false},
        {"to_sparse", to_sparse_kernel, 0, true, true, true, false},
        {"to_sparse_csr", to_sparse_csr_kernel, 0, true, true, true, false},
        {"to_dense", to_dense_kernel, 0, true, true, true, false},
        {"coalesce", coalesce_kernel, 0, false, true, false, false},
        {"sparse_mask", sparse_mask_kernel, 0, false, true, true, false},
        {"is_coalesced", is_coalesced_kernel, 0, false, true, false, true},
        {"indices", accessor_kernel, ACC_INDICES, false, true, false, true},
        {"values", accessor_kernel, ACC_VALUES, false, true, true, true},
        {"_indices", accessor_kernel, ACC_INDICES | ACC_RAW, false, true, false, true},
        {"_values", accessor_kernel, ACC_VALUES | ACC_RAW, false, true, false, true},
        {"crow_indices", accessor_kernel, ACC_CROW, false, false, true, true},
        {"col_indices", accessor_kernel, ACC_COL, false, false, true, true},
        {"_nnz", nnz_kernel, 0, false, true, true, true},
        {"sparse_dim", sparse_dim_kernel, 0, false, true, true, true},
        {"dense_dim", sparse_dim_kernel, 1, false, true, true, true},
    };
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof rows / sizeof *rows; i++) {
        void *ctx = (void *)rows[i].ctx;
        int cpu = rows[i].any_device ? WEFT_ALL_BACKENDS : WEFT_DEVICE_TYPE_CPU;
        if (rows[i].composite)
            rc = weft_register_kernel(reg, rows[i].op, WEFT_KEY_COMPOSITE, cpu, rows[i].fn, ctx,
                                      NULL);
        if (rc == 0 && rows[i].on_coo)
            rc = weft_register_kernel(reg, rows[i].op, coo, cpu, rows[i].fn, ctx, NULL);
        if (rc == 0 && rows[i].on_csr)
            rc = weft_register_kernel(reg, rows[i].op, csr, cpu, rows[i].fn, ctx, NULL);
    }
    return rc;
}

static int init(weft_registrar *reg)
{
    static const weft_layout_interface coo_iface = {
        .struct_size = sizeof coo_iface,
        .name = "sparse_coo",
        .release = coo_release,
        .to_strided = any_to_strided,
        .from_strided = coo_from_strided,
        .describe = coo_describe,
        .nbytes = coo_nbytes,
        .to_device = any_to_device,
        .view = sp__layout_view,
        /* a sparse select or narrow is a new tensor (torch's too) */
        .flags = WEFT_LAYOUT_VIEWS_COPY,
    };
    static const weft_layout_interface csr_iface = {
        .struct_size = sizeof csr_iface,
        .name = "sparse_csr",
        .release = csr_release,
        .to_strided = any_to_strided,
        .from_strided = sp__dense_to_csr,
        .describe = csr_describe,
        .nbytes = csr_nbytes,
        .to_device = any_to_device,
        .view = sp__layout_view,
        /* a sparse select or narrow is a new tensor (torch's too) */
        .flags = WEFT_LAYOUT_VIEWS_COPY,
    };
    int rc = weft_register_layout(reg, &coo_iface, &sp__coo_layout);
    if (rc == 0)
        rc = weft_register_layout(reg, &csr_iface, &sp__csr_layout);
    for (size_t i = 0; rc == 0 && i < sizeof schemas / sizeof *schemas; i++)
        rc = weft_register_op(reg, schemas[i], NULL);
    if (rc == 0)
        rc = sp__register_construct(reg);
    if (rc == 0)
        rc = sp__register_ops(reg);
    if (rc == 0)
        rc = sp__register_autograd(reg);
    return rc;
}

WEFT_PLUGIN_DEFINE("sparse", "baseline", "1.0", NULL, init, NULL);
