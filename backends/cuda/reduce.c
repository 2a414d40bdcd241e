/* backends/cuda/reduce.c — the boxed reductions: sum, mean, prod, amax,
 * amin, all, any (functional and out=), max/min of everything, max_dim /
 * min_dim, argmax / argmin; var, std, norm and logsumexp as compositions of
 * those and the elementwise kernels, so they inherit their determinism.
 * Dims are normalised by plan.c; the kept dims and the reduced dims each
 * become a collapsed geometry for reduce.cu.  Dtypes and cases the kernels
 * do not cover go to the CPU fallback. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gpu.h"

#include "cuda.h"

typedef struct {
    int op;       /* WFC_RED_* */
    bool out;     /* the _out form: out first */
    bool has_dtype;
} reduce_ctx;

/* The layout of one reduction of x over mask. */
typedef struct {
    int64_t out_sizes[WEFT_MAX_DIMS];
    int out_nd;
    int64_t nrows, nred;
    wfc_geometry outer, inner;
} reduction;

/* 0, 1 when the geometry has too many dims (the fallback's case). */
static int plan_reduction(reduction *r, const weft_tensor *x, const bool *mask, bool keepdim)
{
    static _Thread_local int64_t ost[1][64], ist[1][64];
    int64_t osz[64], isz[64];
    int no = 0, ni = 0, nd = weft_tensor_ndim(x);
    r->out_nd = 0;
    r->nrows = r->nred = 1;
    for (int d = 0; d < nd; d++) {
        int64_t size = weft_tensor_size(x, d), stride = weft_tensor_stride(x, d);
        if (mask[d]) {
            isz[ni] = size, ist[0][ni++] = stride;
            r->nred *= size;
            if (keepdim)
                r->out_sizes[r->out_nd++] = 1;
        } else {
            osz[no] = size, ost[0][no++] = stride;
            r->nrows *= size;
            r->out_sizes[r->out_nd++] = size;
        }
    }
    if (wfc_plan_geometry(&r->outer, osz, no, 1, (const int64_t(*)[64])ost) < 0 ||
        wfc_plan_geometry(&r->inner, isz, ni, 1, (const int64_t(*)[64])ist) < 0)
        return 1;
    return 0;
}

static bool on_cuda(const weft_tensor *t)
{
    return weft_tensor_device(t).type == WFC_DEVICE_TYPE;
}

static weft_dtype result_dtype(int op, weft_dtype in)
{
    if (op == WFC_RED_ALL || op == WFC_RED_ANY)
        return WEFT_BOOL;
    if ((op == WFC_RED_SUM || op == WFC_RED_PROD) && weft_dtype_is_integral(in, true))
        return WEFT_INT64;
    return in;
}

/* Runs one reduction into a fresh contiguous result of r's shape. */
static int run(weft_tensor **out, int op, const weft_tensor *x, const reduction *r)
{
    *out = NULL;
    int index = weft_tensor_device(x).index;
    if (cudaSetDevice(index) != cudaSuccess)
        return weft_set_error(WEFT_EDEVICE, WFC_BACKEND ": cannot select " WFC_BACKEND ":%d", index);
    weft_tensor *res = NULL, *partials = NULL;
    int rc = weft_new_output(&res, x, r->out_sizes, r->out_nd, result_dtype(op, weft_tensor_dtype(x)));
    int64_t chunks, chunk_len;
    wfc_plan_reduce_split(r->nrows, r->nred, &chunks, &chunk_len);
    if (rc == 0 && chunks > 1) /* 8 bytes hold any accumulator */
        rc = weft_new_output(&partials, x, (const int64_t[]){r->nrows * chunks}, 1, WEFT_INT64);
    if (rc == 0)
        rc = wfc_reduce(wfc_current_stream(index), op, weft_tensor_dtype(x), weft_tensor_data_ptr(res),
                        weft_tensor_data_ptr(x), r->nrows, r->nred, &r->outer, &r->inner,
                        r->nred ? 1.0 / (double)r->nred : NAN,
                        partials ? weft_tensor_data_ptr(partials) : NULL);
    weft_tensor_release(partials);
    if (rc < 0) {
        weft_tensor_release(res);
        return rc;
    }
    *out = res;
    return 0;
}

/* Writes result into an out= argument of the right dtype (resized when
 * empty); 1 when the out= argument is the fallback's case. */
static int deliver_out(weft_tensor *out, weft_tensor *result)
{
    int nd = weft_tensor_ndim(result);
    bool same = weft_tensor_ndim(out) == nd;
    for (int d = 0; same && d < nd; d++)
        same = weft_tensor_size(out, d) == weft_tensor_size(result, d);
    if (!same && weft_tensor_numel(out) == 0) {
        int rc = weft_tensor_resize(out, weft_tensor_sizes(result), nd);
        if (rc < 0)
            return rc;
        same = true;
    }
    if (!same)
        return weft_set_error(WEFT_ESHAPE, "%s: out has the wrong shape for the result",
                              "reduction");
    return weft_copy_(out, result);
}

/* sum, mean, prod (dim list, keepdim, dtype), amax, amin, all, any (dim
 * list, keepdim), with or without out. */
static int reduce_kernel(weft_call *call, void *ctx)
{
    const reduce_ctx *e = ctx;
    const char *opname = weft_op_name(call->op);
    int first = e->out ? 1 : 0;
    weft_tensor *out = e->out ? call->args[0].u.tensor : NULL;
    const weft_tensor *self = call->args[first].u.tensor;
    int ndims = 0;
    const int64_t *dims = weft_arg_ints(call, first + 1, &ndims);
    bool none = weft_arg_is_none(call, first + 1);
    bool keepdim = weft_arg_bool(call, first + 2);
    weft_dtype dtype = weft_tensor_dtype(self);
    if (e->has_dtype && call->args[first + 3].tag == WEFT_VALUE_DTYPE &&
        call->args[first + 3].u.dtype != WEFT_DTYPE_UNSET)
        dtype = call->args[first + 3].u.dtype;
    bool mask[WEFT_MAX_DIMS];
    char err[160];
    int nd = weft_tensor_ndim(self);
    if (wfc_plan_reduce_dims(mask, nd, none ? NULL : dims, none ? 0 : ndims, err, sizeof err) < 0)
        return weft_set_error(WEFT_EINVAL, "%s: %s", opname, err);
    /* torch: sum over an empty list reduces everything */
    reduction r;
    bool handled = (!out || on_cuda(out)) && wfc_reduce_supported(dtype, false) &&
                   plan_reduction(&r, self, mask, keepdim) == 0;
    if (handled && e->op == WFC_RED_MEAN && !weft_dtype_is_floating(dtype))
        handled = false; /* the CPU's error says mean needs a floating dtype */
    if (handled && (e->op == WFC_RED_MAX || e->op == WFC_RED_MIN) && r.nred == 0)
        handled = false; /* the CPU's error says the reduction is empty */
    if (handled && (e->op == WFC_RED_ALL || e->op == WFC_RED_ANY) && dtype == WEFT_UINT8)
        handled = false; /* torch answers uint8 there */
    if (handled && out && weft_tensor_dtype(out) != result_dtype(e->op, dtype))
        handled = false;
    if (!handled)
        return weft_call_cpu_fallback(call);
    weft_tensor *x = NULL, *res = NULL;
    int rc = dtype == weft_tensor_dtype(self) ? (x = weft_tensor_retain((weft_tensor *)self), 0)
                                             : weft_to_dtype(&x, self, dtype);
    if (rc == 0 && x != self)
        rc = plan_reduction(&r, x, mask, keepdim) == 0 ? 0 : 1;
    if (rc == 0)
        rc = run(&res, e->op, x, &r);
    weft_tensor_release(x);
    if (rc == 1)
        return weft_call_cpu_fallback(call);
    if (rc == 0 && out) {
        rc = deliver_out(out, res);
        weft_tensor_release(res);
        return rc;
    }
    return rc < 0 ? rc : weft_return_tensor(call, 0, res);
}

/* max(self), min(self): every element; an empty tensor is the CPU's error. */
static int extreme_kernel(weft_call *call, void *ctx)
{
    int op = *(const int *)ctx;
    const weft_tensor *self = call->args[0].u.tensor;
    bool mask[WEFT_MAX_DIMS];
    for (int d = 0; d < WEFT_MAX_DIMS; d++)
        mask[d] = true;
    reduction r;
    if (weft_tensor_numel(self) == 0 || !wfc_reduce_supported(weft_tensor_dtype(self), false) ||
        plan_reduction(&r, self, mask, false) != 0)
        return weft_call_cpu_fallback(call);
    weft_tensor *res = NULL;
    int rc = run(&res, op, self, &r);
    return rc < 0 ? rc : weft_return_tensor(call, 0, res);
}

/* max_dim, min_dim (values and indices) and argmax, argmin (dim or none). */
typedef struct {
    bool is_max, values;
} arg_ctx;

static int arg_kernel(weft_call *call, void *ctx)
{
    const arg_ctx *e = ctx;
    const char *opname = weft_op_name(call->op);
    const weft_tensor *self = call->args[0].u.tensor;
    int nd = weft_tensor_ndim(self);
    bool all = weft_arg_is_none(call, 1), keepdim = weft_arg_bool(call, 2);
    int64_t dim = all ? 0 : weft_arg_int(call, 1);
    bool mask[WEFT_MAX_DIMS];
    char err[160];
    if (wfc_plan_reduce_dims(mask, nd, all ? NULL : &dim, all ? 0 : 1, err, sizeof err) < 0)
        return weft_set_error(WEFT_EINVAL, "%s: %s", opname, err);
    reduction r;
    if (!wfc_reduce_supported(weft_tensor_dtype(self), true) ||
        plan_reduction(&r, self, mask, keepdim && !all) != 0)
        return weft_call_cpu_fallback(call);
    if (r.nred == 0 && r.nrows > 0)
        return weft_call_cpu_fallback(call); /* the CPU's error: an empty dim */
    if (all && keepdim) { /* argmax(dim=None, keepdim=True): every dim kept as 1 */
        r.out_nd = nd;
        for (int d = 0; d < nd; d++)
            r.out_sizes[d] = 1;
    }
    int index = weft_tensor_device(self).index;
    if (cudaSetDevice(index) != cudaSuccess)
        return weft_set_error(WEFT_EDEVICE, "%s: cannot select " WFC_BACKEND ":%d", opname, index);
    weft_tensor *values = NULL, *indices = NULL;
    int rc = weft_new_output(&indices, self, r.out_sizes, r.out_nd, WEFT_INT64);
    if (rc == 0 && e->values)
        rc = weft_new_output(&values, self, r.out_sizes, r.out_nd, weft_tensor_dtype(self));
    if (rc == 0)
        rc = wfc_arg_reduce(wfc_current_stream(index), e->is_max, weft_tensor_dtype(self),
                            values ? weft_tensor_data_ptr(values) : NULL,
                            weft_tensor_data_ptr(indices), weft_tensor_data_ptr(self), r.nrows,
                            r.nred, &r.outer, &r.inner);
    if (rc < 0) {
        weft_tensor_release(values);
        weft_tensor_release(indices);
        return rc;
    }
    if (!e->values)
        return weft_return_tensor(call, 0, indices);
    weft_return_tensor(call, 0, values);
    return weft_return_tensor(call, 1, indices);
}

/* ------------------------------------------- compositions of the above */

/* var and std: the mean, then the sum of squared deviations (two passes,
 * no cancellation), divided by n - correction (at least 0). */
static int var_kernel(weft_call *call, void *ctx)
{
    bool is_std = ctx != NULL;
    const weft_tensor *self = call->args[0].u.tensor;
    int ndims = 0;
    const int64_t *dims = weft_arg_ints(call, 1, &ndims);
    double correction = weft_arg_is_none(call, 2) ? 1.0 : weft_arg_double(call, 2);
    bool keepdim = weft_arg_bool(call, 3);
    if (!weft_dtype_is_floating(weft_tensor_dtype(self)))
        return weft_call_cpu_fallback(call);
    bool mask[WEFT_MAX_DIMS];
    char err[160];
    if (wfc_plan_reduce_dims(mask, weft_tensor_ndim(self), dims, ndims, err, sizeof err) < 0)
        return weft_set_error(WEFT_EINVAL, "%s: %s", weft_op_name(call->op), err);
    int64_t n = 1;
    for (int d = 0; d < weft_tensor_ndim(self); d++)
        n *= mask[d] ? weft_tensor_size(self, d) : 1;
    weft_tensor *mean = NULL, *dev = NULL, *sq = NULL, *sum = NULL, *res = NULL;
    int rc = weft_mean_ex(&mean, self, dims, ndims, true, WEFT_DTYPE_UNSET);
    if (rc == 0)
        rc = weft_sub(&dev, self, mean);
    if (rc == 0)
        rc = weft_mul(&sq, dev, dev);
    if (rc == 0)
        rc = weft_sum_ex(&sum, sq, dims, ndims, keepdim, WEFT_DTYPE_UNSET);
    double divisor = (double)n - correction;
    if (rc == 0)
        /* n <= correction: inf times the sum gives torch's inf, or nan for 0 */
        rc = weft_mul_scalar(&res, sum, divisor > 0 ? 1.0 / divisor : (double)INFINITY);
    if (rc == 0 && is_std)
        rc = weft_sqrt_(res);
    weft_tensor_release(mean);
    weft_tensor_release(dev);
    weft_tensor_release(sq);
    weft_tensor_release(sum);
    if (rc < 0) {
        weft_tensor_release(res);
        return rc;
    }
    return weft_return_tensor(call, 0, res);
}

/* logsumexp: amax, then max + log(sum(exp(x - max))) with infinite maxima
 * replaced by 0 in the subtraction, as torch does. */
static int logsumexp_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = call->args[0].u.tensor;
    int ndims = 0;
    const int64_t *dims = weft_arg_ints(call, 1, &ndims);
    bool keepdim = weft_arg_bool(call, 2);
    if (!weft_dtype_is_floating(weft_tensor_dtype(self)) || weft_tensor_numel(self) == 0)
        return weft_call_cpu_fallback(call);
    weft_tensor *m = NULL, *finite = NULL, *zero = NULL, *shift = NULL, *d = NULL, *e = NULL,
                *s = NULL, *l = NULL, *res = NULL, *absm = NULL;
    int rc = weft_amax(&m, self, dims, ndims, true);
    double inf = INFINITY;
    if (rc == 0)
        rc = weft_abs(&absm, m);
    if (rc == 0)
        rc = weft_full(&zero, NULL, 0, inf, weft_tensor_dtype(self), weft_tensor_device(self));
    if (rc == 0)
        rc = weft_lt(&finite, absm, zero);
    weft_tensor_release(zero);
    zero = NULL;
    if (rc == 0)
        rc = weft_full(&zero, NULL, 0, 0.0, weft_tensor_dtype(self), weft_tensor_device(self));
    if (rc == 0)
        rc = weft_where(&shift, finite, m, zero);
    if (rc == 0)
        rc = weft_sub(&d, self, shift);
    if (rc == 0)
        rc = weft_exp(&e, d);
    if (rc == 0)
        rc = weft_sum_ex(&s, e, dims, ndims, true, WEFT_DTYPE_UNSET);
    if (rc == 0)
        rc = weft_log(&l, s);
    if (rc == 0)
        rc = weft_add(&res, l, shift);
    if (rc == 0 && !keepdim) {
        weft_tensor *sq = NULL;
        bool mask[WEFT_MAX_DIMS];
        char err[160];
        int64_t kept[WEFT_MAX_DIMS];
        int nk = 0;
        if (wfc_plan_reduce_dims(mask, weft_tensor_ndim(self), dims, ndims, err, sizeof err) < 0)
            rc = weft_set_error(WEFT_EINVAL, "logsumexp: %s", err);
        for (int i = 0; rc == 0 && i < weft_tensor_ndim(self); i++)
            if (!mask[i])
                kept[nk++] = weft_tensor_size(self, i);
        if (rc == 0)
            rc = weft_reshape(&sq, res, kept, nk);
        weft_tensor_release(res);
        res = rc == 0 ? sq : NULL;
    }
    weft_tensor *all[] = {m, finite, zero, shift, d, e, s, l, absm};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        weft_tensor_release(all[i]);
    if (rc < 0) {
        weft_tensor_release(res);
        return rc;
    }
    return weft_return_tensor(call, 0, res);
}

/* norm for p = 2, 1, inf and -inf; other p and an explicit dtype go to
 * the fallback. */
static int norm_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = call->args[0].u.tensor;
    double p = weft_arg_is_none(call, 1) ? 2.0 : weft_arg_double(call, 1);
    int ndims = 0;
    const int64_t *dims = weft_arg_ints(call, 2, &ndims);
    bool keepdim = weft_arg_bool(call, 3);
    bool dtype_given = call->args[4].tag == WEFT_VALUE_DTYPE &&
                       call->args[4].u.dtype != WEFT_DTYPE_UNSET;
    if (!weft_dtype_is_floating(weft_tensor_dtype(self)) || dtype_given ||
        !(p == 2 || p == 1 || isinf(p)))
        return weft_call_cpu_fallback(call);
    weft_tensor *a = NULL, *sq = NULL, *s = NULL, *res = NULL;
    int rc = weft_abs(&a, self);
    if (rc == 0 && p == 2) {
        rc = weft_mul(&sq, a, a);
        if (rc == 0)
            rc = weft_sum_ex(&s, sq, dims, ndims, keepdim, WEFT_DTYPE_UNSET);
        if (rc == 0)
            rc = weft_sqrt(&res, s);
    } else if (rc == 0 && p == 1) {
        rc = weft_sum_ex(&res, a, dims, ndims, keepdim, WEFT_DTYPE_UNSET);
    } else if (rc == 0) {
        rc = p > 0 ? weft_amax(&res, a, dims, ndims, keepdim) : weft_amin(&res, a, dims, ndims, keepdim);
    }
    weft_tensor_release(a);
    weft_tensor_release(sq);
    weft_tensor_release(s);
    if (rc < 0) {
        weft_tensor_release(res);
        return rc;
    }
    return weft_return_tensor(call, 0, res);
}

static const reduce_ctx sum_f = {WFC_RED_SUM, false, true}, sum_o = {WFC_RED_SUM, true, true},
                        mean_f = {WFC_RED_MEAN, false, true}, mean_o = {WFC_RED_MEAN, true, true},
                        prod_f = {WFC_RED_PROD, false, true}, prod_o = {WFC_RED_PROD, true, true},
                        amax_f = {WFC_RED_MAX, false, false}, amax_o = {WFC_RED_MAX, true, false},
                        amin_f = {WFC_RED_MIN, false, false}, amin_o = {WFC_RED_MIN, true, false},
                        all_f = {WFC_RED_ALL, false, false}, all_o = {WFC_RED_ALL, true, false},
                        any_f = {WFC_RED_ANY, false, false}, any_o = {WFC_RED_ANY, true, false};
static const int max_op = WFC_RED_MAX, min_op = WFC_RED_MIN;
static const arg_ctx max_dim = {true, true}, min_dim = {false, true}, argmax = {true, false},
                     argmin = {false, false};
static const int std_marker = 1;

int wfc_register_reduce(weft_registrar *reg)
{
    static const weft_kernel_entry entries[] = {
        {"sum", reduce_kernel, &sum_f},       {"sum_out", reduce_kernel, &sum_o},
        {"mean", reduce_kernel, &mean_f},     {"mean_out", reduce_kernel, &mean_o},
        {"prod", reduce_kernel, &prod_f},     {"prod_out", reduce_kernel, &prod_o},
        {"amax", reduce_kernel, &amax_f},     {"amax_out", reduce_kernel, &amax_o},
        {"amin", reduce_kernel, &amin_f},     {"amin_out", reduce_kernel, &amin_o},
        {"all", reduce_kernel, &all_f},       {"all_out", reduce_kernel, &all_o},
        {"any", reduce_kernel, &any_f},       {"any_out", reduce_kernel, &any_o},
        {"max", extreme_kernel, &max_op},     {"min", extreme_kernel, &min_op},
        {"max_dim", arg_kernel, &max_dim},    {"min_dim", arg_kernel, &min_dim},
        {"argmax", arg_kernel, &argmax},      {"argmin", arg_kernel, &argmin},
        {"var", var_kernel, NULL},            {"std", var_kernel, &std_marker},
        {"logsumexp", logsumexp_kernel, NULL}, {"norm", norm_kernel, NULL},
    };
    return weft_register_kernel_table(reg, WEFT_KEY_DENSE, WFC_DEVICE_TYPE, entries, sizeof entries / sizeof *entries);
}
