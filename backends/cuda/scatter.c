/* backends/cuda/scatter.c — the boxed writes through an index: scatter,
 * scatter_add, scatter_reduce and index_add, functional and in place,
 * through scatter.cu (pairs sorted by target, each target's run combined
 * in the CPU's order: no atomics, the CPU's bits).  Shapes and dtypes are
 * checked here with the CPU backend's messages; indices on the device,
 * the first bad one reported after one read back, before anything is
 * written.  Complex dtypes, bool reductions, more than WFC_MAX_DIMS dims
 * and operands on other devices go to the CPU fallback. */
#include <string.h>

#include "gpu.h"

#include "cuda.h"

static bool same_cuda(const weft_tensor *a, const weft_tensor *b)
{
    weft_device x = weft_tensor_device(a), y = weft_tensor_device(b);
    return x.type == WFC_DEVICE_TYPE && y.type == x.type && x.index == y.index;
}

/* A new contiguous tensor with t's values, never an alias of t. */
static int private_copy(weft_tensor **out, const weft_tensor *t)
{
    int rc = weft_new_output(out, t, weft_tensor_sizes(t), weft_tensor_ndim(t),
                             weft_tensor_dtype(t));
    if (rc == 0 && (rc = weft_copy_(*out, t)) < 0) {
        weft_tensor_release(*out);
        *out = NULL;
    }
    return rc;
}

static int new_int64(weft_tensor **out, const weft_tensor *like, int64_t n)
{
    return weft_new_output(out, like, &n, 1, WEFT_INT64);
}

/* Every entry of idx within [0, size), checked on the device; the first
 * one outside is the error, named as the CPU names it. */
static int check_indices(const char *op, const weft_tensor *idx, int dim, int64_t size)
{
    int64_t n = weft_tensor_numel(idx), pos = 0, value = 0;
    if (n == 0)
        return 0;
    int index = weft_tensor_device(idx).index;
    weft_tensor *bad = NULL;
    int rc = weft_zeros(&bad, (const int64_t[]){2}, 1, WEFT_INT64, weft_tensor_device(idx));
    /* the launch goes to the current device: idx's, as in every launcher */
    if (rc == 0 && cudaSetDevice(index) != cudaSuccess)
        rc = weft_set_error(WEFT_EDEVICE, "%s: cannot select " WFC_BACKEND ":%d", op, index);
    if (rc == 0)
        rc = wfc_check_indices(wfc_current_stream(index),
                               weft_tensor_data_ptr(idx), n, size, weft_tensor_data_ptr(bad));
    if (rc == 0)
        rc = wfc_first_bad(bad, &pos);
    if (rc == 1 && (rc = wfc_read_element(idx, pos, &value)) == 0)
        rc = weft_set_error(WEFT_ERANGE, "%s: index %lld is out of range for dimension %d with "
                            "size %lld", op, (long long)value, dim, (long long)size);
    weft_tensor_release(bad);
    return rc;
}

int wfc_scatter_sorted_apply(weft_tensor *target, weft_tensor *keys, weft_tensor *from,
                             int64_t n, uint64_t extent, const weft_tensor *src, int kind,
                             double alpha, bool include_self)
{
    if (n == 0)
        return 0;
    void *stream = wfc_current_stream(weft_tensor_device(target).index);
    weft_tensor *sorted_keys = NULL, *sorted_from = NULL, *temp = NULL;
    int rc = new_int64(&sorted_keys, target, n);
    if (rc == 0)
        rc = new_int64(&sorted_from, target, n);
    int bits = wfc_plan_key_bits(extent);
    size_t bytes = 0;
    if (rc == 0)
        rc = wfc_radix_sort_pairs(stream, NULL, &bytes, weft_tensor_data_ptr(keys),
                                  weft_tensor_data_ptr(sorted_keys), weft_tensor_data_ptr(from),
                                  weft_tensor_data_ptr(sorted_from), n, bits);
    if (rc == 0)
        rc = weft_new_output(&temp, target, (const int64_t[]){(int64_t)bytes + 1}, 1, WEFT_UINT8);
    if (rc == 0)
        rc = wfc_radix_sort_pairs(stream, weft_tensor_data_ptr(temp), &bytes,
                                  weft_tensor_data_ptr(keys), weft_tensor_data_ptr(sorted_keys),
                                  weft_tensor_data_ptr(from), weft_tensor_data_ptr(sorted_from), n,
                                  bits);
    weft_dtype dt = weft_tensor_dtype(target);
    if (rc == 0)
        rc = wfc_scatter_apply(stream, kind, dt, weft_dtype_size(dt), weft_tensor_data_ptr(target),
                               weft_tensor_data_ptr(src), weft_tensor_data_ptr(sorted_keys),
                               weft_tensor_data_ptr(sorted_from), n, alpha, include_self);
    weft_tensor_release(sorted_keys);
    weft_tensor_release(sorted_from);
    weft_tensor_release(temp);
    return rc;
}

/* target[.., idx, ..] (kind)= src[p] for each p of the walked shape (the
 * index's, or for index_add the source's with idx read along dim): pairs,
 * a stable sort by target offset, one combining pass.  target is written
 * in place whatever its strides (at least 1-d, at most WFC_MAX_DIMS);
 * idx contiguous and already checked. */
static int scatter_run(const char *op, weft_tensor *target, int dim, const weft_tensor *idx,
                       bool along_dim, const int64_t *walk, const weft_tensor *src, int kind,
                       double alpha, bool include_self)
{
    const int nd = weft_tensor_ndim(target);
    int64_t n = 1, extent = 0;
    for (int d = 0; d < nd; d++) {
        n *= walk[d];
        extent += (weft_tensor_size(target, d) - 1) * weft_tensor_stride(target, d);
    }
    if (n == 0 || weft_tensor_numel(target) == 0)
        return 0;
    int index = weft_tensor_device(target).index;
    void *stream = wfc_current_stream(index);
    if (cudaSetDevice(index) != cudaSuccess)
        return weft_set_error(WEFT_EDEVICE, "%s: cannot select " WFC_BACKEND ":%d", op, index);
    wfc_geometry g;
    memset(&g, 0, sizeof g);
    g.ndim = nd, g.noperands = 2;
    for (int d = 0; d < nd; d++) {
        g.sizes[d] = walk[d];
        g.strides[0][d] = weft_tensor_stride(target, d);
        g.strides[1][d] = weft_tensor_stride(src, d);
    }
    weft_tensor *keys = NULL, *from = NULL;
    int rc = new_int64(&keys, target, n);
    if (rc == 0)
        rc = new_int64(&from, target, n);
    if (rc == 0)
        rc = wfc_scatter_pairs(stream, weft_tensor_data_ptr(keys), weft_tensor_data_ptr(from),
                               weft_tensor_data_ptr(idx), n, along_dim, dim,
                               weft_tensor_size(target, dim), &g);
    if (rc == 0)
        rc = wfc_scatter_sorted_apply(target, keys, from, n, (uint64_t)extent, src, kind, alpha,
                                      include_self);
    weft_tensor_release(keys);
    weft_tensor_release(from);
    return rc;
}

/* What the three operators share once their own checks are done. */
typedef struct scatter_args {
    const char *op;
    int kind;
    bool inplace, along_dim, include_self;
    double alpha;
} scatter_args;

/* The result: self written in place, or a private copy written and
 * returned.  idx, src: at least 1-d, src already safe to read while the
 * target is written. */
static int finish(weft_call *call, const scatter_args *a, weft_tensor *self, int dim,
                  const weft_tensor *idx, const int64_t *walk, const weft_tensor *src)
{
    weft_tensor *owned = NULL, *target = NULL;
    int rc = a->inplace ? 0 : private_copy(&owned, self);
    if (rc == 0)
        rc = wfc_at_least_1d(&target, a->inplace ? self : owned);
    if (rc == 0)
        rc = scatter_run(a->op, target, dim, idx, a->along_dim, walk, src, a->kind, a->alpha,
                         a->include_self);
    weft_tensor_release(target);
    if (rc < 0 || a->inplace) {
        weft_tensor_release(owned);
        return rc;
    }
    return weft_return_tensor(call, 0, owned);
}

/* Whether the kernel serves the call: every operand here, a dtype it
 * has, few enough dims. */
static bool served(const weft_tensor *self, const weft_tensor *index, const weft_tensor *src,
                   int kind)
{
    weft_dtype dt = weft_tensor_dtype(self);
    return same_cuda(self, index) && same_cuda(self, src) &&
           wfc_scatter_supported(kind, dt, weft_dtype_size(dt)) && !weft_dtype_is_complex(dt) &&
           weft_tensor_ndim(self) <= WFC_MAX_DIMS;
}

static int same_dtype(const char *op, const char *name, const weft_tensor *self,
                      const weft_tensor *src)
{
    if (weft_tensor_dtype(src) == weft_tensor_dtype(self))
        return 0;
    return weft_set_error(WEFT_EDTYPE, "%s: self (%s) and %s (%s) must have the same dtype", op,
                          weft_dtype_name(weft_tensor_dtype(self)), name,
                          weft_dtype_name(weft_tensor_dtype(src)));
}

/* src read as given, or copied first when it shares memory with what is
 * written (in place: self). */
static int readable_src(weft_tensor **out, const weft_tensor *self, const weft_tensor *src)
{
    weft_tensor *copy = NULL;
    int rc = weft_tensor_shares_storage(self, src) ? private_copy(&copy, src) : 0;
    if (rc == 0)
        rc = wfc_at_least_1d(out, copy ? copy : src);
    weft_tensor_release(copy);
    return rc;
}

/* scatter(self, dim, index, src), scatter_add and their in-place forms;
 * scatter_reduce(self, dim, index, src, reduce, *, include_self) and
 * scatter_reduce_.  ctx: the form (kind and inplace; kind -1 for
 * scatter_reduce, whose reduce argument names it). */
typedef struct scatter_form {
    int kind;
    bool inplace;
} scatter_form;

static const char *const reduce_names[] = {"sum", "prod", "mean", "amax", "amin"};
static const int reduce_kinds[] = {WFC_SCATTER_SUM, WFC_SCATTER_PROD, WFC_SCATTER_MEAN,
                                   WFC_SCATTER_AMAX, WFC_SCATTER_AMIN};

static int scatter_kernel(weft_call *call, void *ctx)
{
    const scatter_form *form = ctx;
    const char *op = weft_op_name(call->op);
    weft_tensor *self = call->args[0].u.tensor;
    const weft_tensor *index = call->args[2].u.tensor, *src_arg = call->args[3].u.tensor;
    bool reduce = form->kind < 0;
    scatter_args a = {op, form->kind, form->inplace, false, true, 1.0};
    if (reduce) {
        const char *name = weft_arg_string(call, 4);
        size_t k = 0;
        while (k < 5 && (!name || strcmp(name, reduce_names[k]) != 0))
            k++;
        if (k == 5)
            return weft_set_error(WEFT_EINVAL, "%s: reduce argument must be one of sum, prod, "
                                  "mean, amax, amin; got '%s'", op, name ? name : "(null)");
        a.kind = reduce_kinds[k];
        a.include_self = weft_arg_bool(call, 5);
    }
    if (!served(self, index, src_arg, a.kind))
        return weft_call_cpu_fallback(call);
    int dim;
    int rc = same_dtype(op, "src", self, src_arg);
    if (rc == 0)
        rc = wfc_wrap_dim(op, weft_arg_int(call, 1), weft_tensor_ndim(self), &dim);
    if (rc < 0)
        return rc;
    weft_tensor *idx0 = NULL, *idx = NULL, *self1 = NULL, *src = NULL;
    rc = wfc_indices_of(op, "index", index, &idx0);
    if (rc == 0)
        rc = wfc_at_least_1d(&idx, idx0);
    if (rc == 0)
        rc = wfc_at_least_1d(&self1, self);
    if (rc == 0)
        rc = readable_src(&src, self, src_arg);
    const int nd = self1 ? weft_tensor_ndim(self1) : 0;
    char b1[128], b2[128];
    if (rc == 0 && (weft_tensor_ndim(idx) != nd || weft_tensor_ndim(src) != nd))
        rc = reduce ? weft_set_error(WEFT_ESHAPE, "%s: index and src must have self's number of "
                                     "dimensions (%d), got %d and %d", op, nd,
                                     weft_tensor_ndim(idx), weft_tensor_ndim(src))
                    : weft_set_error(WEFT_ESHAPE, "%s: index and src must have the same number of "
                                     "dimensions as self (%d), got %d and more or fewer", op, nd,
                                     weft_tensor_ndim(idx));
    for (int d = 0; rc == 0 && d < nd; d++) {
        int64_t k = weft_tensor_size(idx, d);
        bool over_self = d != dim && k > weft_tensor_size(self1, d);
        bool over_src = k > weft_tensor_size(src, d);
        if (reduce && (over_self || over_src))
            rc = weft_set_error(WEFT_ESHAPE, "%s: index %s must be no larger than src %s, nor "
                                "than self apart from dimension %d", op,
                                weft_format_shape(b1, sizeof b1, weft_tensor_sizes(idx), nd),
                                weft_format_shape(b2, sizeof b2, weft_tensor_sizes(src), nd), dim);
        else if (over_self)
            rc = weft_set_error(WEFT_ESHAPE, "%s: index %s must be no larger than self %s apart "
                                "from dimension %d", op,
                                weft_format_shape(b1, sizeof b1, weft_tensor_sizes(idx), nd),
                                weft_format_shape(b2, sizeof b2, weft_tensor_sizes(self1), nd), dim);
        else if (over_src)
            rc = weft_set_error(WEFT_ESHAPE, "%s: index %s must be no larger than src %s", op,
                                weft_format_shape(b1, sizeof b1, weft_tensor_sizes(idx), nd),
                                weft_format_shape(b2, sizeof b2, weft_tensor_sizes(src), nd));
    }
    if (rc == 0)
        rc = check_indices(op, idx, dim, weft_tensor_size(self1, dim));
    if (rc == 0)
        rc = finish(call, &a, self, dim, idx, weft_tensor_sizes(idx), src);
    weft_tensor *temps[] = {idx0, idx, self1, src};
    for (size_t i = 0; i < sizeof temps / sizeof *temps; i++)
        weft_tensor_release(temps[i]);
    return rc;
}

/* index_add(self, dim, index, source, *, alpha) and index_add_ (ctx
 * non-NULL): target[.., index[j], ..] += alpha source[.., j, ..]. */
static int index_add_kernel(weft_call *call, void *ctx)
{
    const char *op = weft_op_name(call->op);
    weft_tensor *self = call->args[0].u.tensor;
    const weft_tensor *index = call->args[2].u.tensor, *source_arg = call->args[3].u.tensor;
    scatter_args a = {op, WFC_SCATTER_ADD, ctx != NULL, true, true, weft_arg_double(call, 4)};
    if (!served(self, index, source_arg, a.kind))
        return weft_call_cpu_fallback(call);
    int dim;
    int rc = same_dtype(op, "source", self, source_arg);
    if (rc == 0)
        rc = wfc_wrap_dim(op, weft_arg_int(call, 1), weft_tensor_ndim(self), &dim);
    if (rc < 0)
        return rc;
    weft_tensor *idx = NULL, *self1 = NULL, *source = NULL;
    rc = wfc_indices_of(op, "index", index, &idx);
    if (rc == 0 && weft_tensor_ndim(idx) > 1)
        rc = weft_set_error(WEFT_ESHAPE, "%s: index must be 0-d or 1-d, got %d dims", op,
                            weft_tensor_ndim(idx));
    if (rc == 0)
        rc = wfc_at_least_1d(&self1, self);
    if (rc == 0)
        rc = readable_src(&source, self, source_arg);
    const int nd = self1 ? weft_tensor_ndim(self1) : 0;
    bool fits = rc == 0 && weft_tensor_ndim(source) == nd;
    for (int d = 0; fits && d < nd; d++)
        fits = weft_tensor_size(source, d) ==
               (d == dim ? weft_tensor_numel(idx) : weft_tensor_size(self1, d));
    char b1[128], b2[128];
    if (rc == 0 && !fits)
        rc = weft_set_error(WEFT_ESHAPE, "%s: source %s must have self's shape %s except along "
                            "dimension %d, where its size must be the number of indices (%lld)",
                            op, weft_format_shape(b1, sizeof b1, weft_tensor_sizes(source),
                                               weft_tensor_ndim(source)),
                            weft_format_shape(b2, sizeof b2, weft_tensor_sizes(self1), nd), dim,
                            (long long)weft_tensor_numel(idx));
    if (rc == 0)
        rc = check_indices(op, idx, dim, weft_tensor_size(self1, dim));
    if (rc == 0)
        rc = finish(call, &a, self, dim, idx, weft_tensor_sizes(source), source);
    weft_tensor_release(idx);
    weft_tensor_release(self1);
    weft_tensor_release(source);
    return rc;
}

static const scatter_form put = {WFC_SCATTER_PUT, false}, put_inplace = {WFC_SCATTER_PUT, true},
                          add = {WFC_SCATTER_ADD, false}, add_inplace = {WFC_SCATTER_ADD, true},
                          reduce = {-1, false}, reduce_inplace = {-1, true};
static const int inplace_marker = 1;

int wfc_register_scatter(weft_registrar *reg)
{
    static const weft_kernel_entry entries[] = {
        {"scatter", scatter_kernel, &put},
        {"scatter_", scatter_kernel, &put_inplace},
        {"scatter_add", scatter_kernel, &add},
        {"scatter_add_", scatter_kernel, &add_inplace},
        {"scatter_reduce", scatter_kernel, &reduce},
        {"scatter_reduce_", scatter_kernel, &reduce_inplace},
        {"index_add", index_add_kernel, NULL},
        {"index_add_", index_add_kernel, &inplace_marker},
    };
    return weft_register_kernel_table(reg, WEFT_KEY_DENSE, WFC_DEVICE_TYPE, entries, sizeof entries / sizeof *entries);
}
