/* backends/cuda/index_put.c — the boxed index_put and index_put_ (with or
 * without accumulate) over int64/int32 index tensors and None entries,
 * through scatter's pairs: the indices broadcast into one int64 row per
 * indexed dim, wrapped and checked on the device (the first bad one read
 * back and named as the CPU names it, before anything is written), then
 * one pair (target offset, value position) per element written, in the
 * CPU's order, sorted stably by target: the last write of a duplicate
 * wins, and accumulate sums each target's run in that order (no atomics,
 * the CPU's rounding).  A bool/uint8 mask stands for the columns of its
 * nonzero(), found on the device (a prefix sum; its count read back to
 * size them).  0-d masks, complex accumulation, more than WFC_MAX_DIMS
 * dims and operands elsewhere go to the CPU fallback. */
#include <string.h>

#include "gpu.h"

#include "cuda.h"

static bool same_cuda(const weft_tensor *a, const weft_tensor *b)
{
    weft_device x = weft_tensor_device(a), y = weft_tensor_device(b);
    return x.type == WFC_DEVICE_TYPE && y.type == x.type && x.index == y.index;
}

/* Whether this file serves the call: every operand on self's device,
 * integer index tensors or masks of at least one dim, a dtype scatter's
 * kernels move or add, few enough dims. */
static bool served(const weft_tensor *self, weft_tensor *const *indices, int n,
                   const weft_tensor *values, bool accumulate)
{
    weft_dtype dt = weft_tensor_dtype(self);
    int kind = accumulate ? WFC_SCATTER_ADD : WFC_SCATTER_PUT;
    if (!values || !same_cuda(self, values) || !wfc_scatter_supported(kind, dt, weft_dtype_size(dt)) ||
        (accumulate && weft_dtype_is_complex(dt)) || weft_tensor_ndim(self) > WFC_MAX_DIMS ||
        n > WFC_MAX_DIMS)
        return false;
    for (int i = 0; i < n; i++) {
        if (!indices[i])
            continue;
        weft_dtype it = weft_tensor_dtype(indices[i]);
        bool mask = it == WEFT_BOOL || it == WEFT_UINT8;
        if (!same_cuda(self, indices[i]) || (it != WEFT_INT64 && it != WEFT_INT32 && !mask) ||
            (mask && weft_tensor_ndim(indices[i]) == 0) || weft_tensor_ndim(indices[i]) > WFC_MAX_DIMS)
            return false;
    }
    return true;
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

static bool is_mask(const weft_tensor *t)
{
    return t && (weft_tensor_dtype(t) == WEFT_BOOL || weft_tensor_dtype(t) == WEFT_UINT8);
}

/* A mask's nonzero() as a new [ndim, count] int64 tensor, row d the
 * coordinates along dim d of the set elements in row-major order. */
static int mask_nonzero(weft_tensor **out, const weft_tensor *mask_arg)
{
    void *stream = wfc_current_stream(weft_tensor_device(mask_arg).index);
    wfc_index_columns shape;
    memset(&shape, 0, sizeof shape);
    shape.count = weft_tensor_ndim(mask_arg);
    shape.positions = weft_tensor_numel(mask_arg);
    for (int d = 0; d < shape.count; d++)
        shape.sizes[d] = weft_tensor_size(mask_arg, d);
    const int64_t n = shape.positions;
    int64_t nonzero = 0;
    weft_tensor *mask = NULL, *marks = NULL, *ids = NULL, *temp = NULL;
    int rc = weft_contiguous(&mask, mask_arg);
    if (rc == 0 && n > 0) {
        size_t bytes = 0;
        rc = weft_new_output(&marks, mask, &n, 1, WEFT_INT64);
        if (rc == 0)
            rc = weft_new_output(&ids, mask, &n, 1, WEFT_INT64);
        if (rc == 0)
            rc = wfc_inclusive_sum(stream, NULL, &bytes, NULL, NULL, n);
        if (rc == 0)
            rc = weft_new_output(&temp, mask, (const int64_t[]){(int64_t)bytes + 1}, 1, WEFT_UINT8);
        if (rc == 0)
            rc = wfc_mask_marks(stream, weft_tensor_data_ptr(marks), weft_tensor_data_ptr(mask), n);
        if (rc == 0)
            rc = wfc_inclusive_sum(stream, weft_tensor_data_ptr(temp), &bytes,
                                   weft_tensor_data_ptr(marks), weft_tensor_data_ptr(ids), n);
        if (rc == 0)
            rc = wfc_read_element(ids, n - 1, &nonzero);
    }
    if (rc == 0)
        rc = weft_new_output(out, mask, (const int64_t[]){shape.count, nonzero}, 2, WEFT_INT64);
    if (rc == 0 && n > 0)
        rc = wfc_mask_columns(stream, weft_tensor_data_ptr(*out), weft_tensor_data_ptr(ids),
                              weft_tensor_data_ptr(mask), &shape, nonzero);
    weft_tensor *temps[] = {mask, marks, ids, temp};
    for (size_t i = 0; i < sizeof temps / sizeof *temps; i++)
        weft_tensor_release(temps[i]);
    return rc;
}

/* The tensor each column of the plan reads: an index tensor itself, or
 * row d of its mask's nonzero() (the mask's shape checked first against
 * the dims of view it covers, with the CPU's message and numbering). */
static int column_tensors(const char *op, weft_tensor **cols, const weft_tensor *view,
                          weft_tensor *const *indices, const wfc_index_put_plan *p)
{
    char a[128], b[128];
    int rc = 0;
    weft_tensor *nonzero = NULL;
    for (int k = 0; rc == 0 && k < p->count; k++) {
        const weft_tensor *t = indices[p->entry[k]];
        if (p->mask_dim[k] < 0) {
            cols[k] = weft_tensor_retain((weft_tensor *)t);
            continue;
        }
        if (p->mask_dim[k] == 0) {
            int m = weft_tensor_ndim(t), present = 0;
            for (int i = 0; i < p->entry[k]; i++)
                present += indices[i] != NULL;
            for (int d = 0; rc == 0 && d < m; d++)
                if (weft_tensor_size(t, d) != weft_tensor_size(view, k + d))
                    rc = weft_set_error(WEFT_ESHAPE, "%s: the shape of the mask %s at index %d "
                                        "does not match the shape of the indexed tensor %s", op,
                                        weft_format_shape(a, sizeof a, weft_tensor_sizes(t), m),
                                        present,
                                        weft_format_shape(b, sizeof b, weft_tensor_sizes(view),
                                                       weft_tensor_ndim(view)));
            weft_tensor_release(nonzero);
            nonzero = NULL;
            if (rc == 0)
                rc = mask_nonzero(&nonzero, t);
        }
        if (rc == 0)
            rc = weft_select(&cols[k], nonzero, 0, p->mask_dim[k]);
    }
    weft_tensor_release(nonzero);
    return rc;
}

/* The index tensors broadcast to s->shape, as rows of a new [count,
 * positions] int64 tensor (int32 widened by copy_), wrapped and checked:
 * an index out of range is the CPU's error, naming dim k of the permuted
 * target (the dim the CPU's message names). */
static int index_rows(const char *op, weft_tensor **out, wfc_index_columns *c,
                      const weft_tensor *view, weft_tensor *const *cols,
                      const wfc_index_put_plan *p, const wfc_index_shape *s)
{
    memset(c, 0, sizeof *c);
    c->count = p->count;
    c->positions = 1;
    for (int d = 0; d < s->shape_nd; d++)
        c->positions *= s->shape[d];
    for (int k = 0; k < p->count; k++) {
        c->sizes[k] = weft_tensor_size(view, k);
        c->strides[k] = weft_tensor_stride(view, k);
    }
    weft_tensor *rows = NULL, *bad = NULL;
    int rc = weft_new_output(&rows, view, (const int64_t[]){p->count, c->positions}, 2, WEFT_INT64);
    for (int k = 0; rc == 0 && k < p->count && c->positions > 0; k++) {
        weft_tensor *row = NULL, *shaped = NULL, *expanded = NULL;
        rc = weft_select(&row, rows, 0, k);
        if (rc == 0)
            rc = weft_view(&shaped, row, s->shape, s->shape_nd);
        if (rc == 0)
            rc = weft_expand(&expanded, cols[k], s->shape, s->shape_nd);
        if (rc == 0)
            rc = weft_copy_(shaped, expanded);
        weft_tensor_release(row);
        weft_tensor_release(shaped);
        weft_tensor_release(expanded);
    }
    if (rc == 0 && c->positions > 0)
        rc = weft_zeros(&bad, (const int64_t[]){2}, 1, WEFT_INT64, weft_tensor_device(view));
    if (rc == 0 && c->positions > 0)
        rc = wfc_index_wrap_check(wfc_current_stream(weft_tensor_device(view).index),
                                  weft_tensor_data_ptr(rows), c, weft_tensor_data_ptr(bad));
    int64_t pos = 0, value = 0;
    if (rc == 0 && c->positions > 0)
        rc = wfc_first_bad(bad, &pos);
    if (rc == 1 && (rc = wfc_read_element(rows, pos, &value)) == 0) {
        int k = (int)(pos / c->positions);
        rc = weft_set_error(WEFT_ERANGE, "%s: index %lld is out of range for dimension %d with "
                            "size %lld", op, (long long)value, k, (long long)c->sizes[k]);
    }
    weft_tensor_release(bad);
    if (rc < 0)
        weft_tensor_release(rows);
    else
        *out = rows;
    return rc < 0 ? rc : 0;
}

/* values broadcast to the indexed result, the index shape moved first
 * (the order the pairs read them), as a private contiguous copy. */
static int values_in_order(const char *op, weft_tensor **out, const weft_tensor *values,
                           const wfc_index_shape *s)
{
    weft_tensor *expanded = NULL, *moved = NULL;
    char a[128], b[128];
    if (weft_expand(&expanded, values, s->result, s->result_nd) < 0)
        return weft_set_error(WEFT_ESHAPE, "%s: shape mismatch: value tensor of shape %s cannot "
                              "be broadcast to indexing result of shape %s", op,
                              weft_format_shape(a, sizeof a, weft_tensor_sizes(values),
                                             weft_tensor_ndim(values)),
                              weft_format_shape(b, sizeof b, s->result, s->result_nd));
    int rc = weft_permute(&moved, expanded, s->result_order, s->result_nd);
    if (rc == 0)
        rc = private_copy(out, moved);
    weft_tensor_release(expanded);
    weft_tensor_release(moved);
    return rc;
}

/* Writes the pairs of view (the permuted target) from the rows and the
 * ordered values. */
static int write_pairs(weft_tensor *view, const weft_tensor *rows, const wfc_index_columns *c,
                       const weft_tensor *values, bool accumulate)
{
    const int nd = weft_tensor_ndim(view), rest = nd - c->count;
    int64_t slice = 1, extent = 0, strides[1][64];
    for (int d = 0; d < nd; d++)
        extent += (weft_tensor_size(view, d) - 1) * weft_tensor_stride(view, d);
    for (int d = 0; d < rest; d++) {
        slice *= weft_tensor_size(view, c->count + d);
        strides[0][d] = weft_tensor_stride(view, c->count + d);
    }
    const int64_t n = c->positions * slice;
    if (n == 0)
        return 0;
    wfc_geometry g;
    if (wfc_plan_geometry(&g, weft_tensor_sizes(view) + c->count, rest, 1, strides) < 0)
        return weft_set_error(WEFT_ESHAPE, "index_put: too many dims for the CUDA kernel");
    weft_tensor *keys = NULL, *from = NULL;
    int rc = weft_new_output(&keys, view, &n, 1, WEFT_INT64);
    if (rc == 0)
        rc = weft_new_output(&from, view, &n, 1, WEFT_INT64);
    if (rc == 0)
        rc = wfc_index_put_pairs(wfc_current_stream(weft_tensor_device(view).index),
                                 weft_tensor_data_ptr(keys), weft_tensor_data_ptr(from),
                                 weft_tensor_data_ptr(rows), c, slice, &g);
    if (rc == 0)
        rc = wfc_scatter_sorted_apply(view, keys, from, n, (uint64_t)extent, values,
                                      accumulate ? WFC_SCATTER_ADD : WFC_SCATTER_PUT, 1.0, true);
    weft_tensor_release(keys);
    weft_tensor_release(from);
    return rc;
}

/* index_put(self, indices, values, accumulate) and index_put_ (ctx
 * non-NULL).  The checks come in the CPU's order: the entries, values'
 * dtype, the masks' shapes, the broadcast of the columns, their range,
 * values' shape. */
static int index_put_kernel(weft_call *call, void *ctx)
{
    const bool inplace = ctx != NULL;
    const char *op = weft_op_name(call->op);
    weft_tensor *self = call->args[0].u.tensor;
    int n = 0;
    weft_tensor *const *indices = weft_arg_tensors(call, 1, &n);
    const weft_tensor *values_arg = weft_arg_tensor(call, 2);
    const bool accumulate = weft_arg_bool(call, 3);
    if (!served(self, indices, n, values_arg, accumulate))
        return weft_call_cpu_fallback(call);
    const int nd = weft_tensor_ndim(self);
    int index_nd[WFC_MAX_DIMS];
    bool masks[WFC_MAX_DIMS];
    char err[256];
    for (int i = 0; i < n; i++) {
        index_nd[i] = indices[i] ? weft_tensor_ndim(indices[i]) : -1;
        masks[i] = is_mask(indices[i]);
    }
    wfc_index_put_plan plan;
    int rc = wfc_plan_index_put(&plan, nd, index_nd, masks, n, err, sizeof err);
    if (rc < 0)
        return weft_set_error(rc == -1 ? WEFT_EINVAL : WEFT_ESHAPE, "%s: %s", op, err);
    weft_dtype dt = weft_tensor_dtype(self);
    if (weft_tensor_dtype(values_arg) != dt)
        return weft_set_error(WEFT_EDTYPE, "%s: values (%s) must have self's dtype (%s)", op,
                              weft_dtype_name(weft_tensor_dtype(values_arg)), weft_dtype_name(dt));
    int index = weft_tensor_device(self).index;
    if (cudaSetDevice(index) != cudaSuccess)
        return weft_set_error(WEFT_EDEVICE, "%s: cannot select " WFC_BACKEND ":%d", op, index);
    weft_tensor *owned = NULL, *view = NULL, *rows = NULL, *values = NULL;
    weft_tensor *cols[WFC_MAX_DIMS] = {NULL};
    rc = inplace ? 0 : private_copy(&owned, self);
    if (rc == 0)
        rc = weft_permute(&view, inplace ? self : owned, plan.order, nd);
    if (rc == 0)
        rc = column_tensors(op, cols, view, indices, &plan);
    wfc_index_shape shape;
    if (rc == 0) {
        const int64_t *col_sizes[WFC_MAX_DIMS];
        int col_nd[WFC_MAX_DIMS];
        for (int k = 0; k < plan.count; k++) {
            col_sizes[k] = weft_tensor_sizes(cols[k]);
            col_nd[k] = weft_tensor_ndim(cols[k]);
        }
        rc = wfc_plan_index_shape(&shape, &plan, weft_tensor_sizes(view), nd, col_sizes, col_nd,
                                  err, sizeof err);
        if (rc < 0)
            rc = weft_set_error(WEFT_ESHAPE, "%s: %s", op, err);
    }
    wfc_index_columns columns;
    if (rc == 0)
        rc = index_rows(op, &rows, &columns, view, cols, &plan, &shape);
    if (rc == 0)
        rc = values_in_order(op, &values, values_arg, &shape);
    if (rc == 0)
        rc = write_pairs(view, rows, &columns, values, accumulate);
    for (int k = 0; k < plan.count; k++)
        weft_tensor_release(cols[k]);
    weft_tensor_release(view);
    weft_tensor_release(rows);
    weft_tensor_release(values);
    if (rc < 0 || inplace) {
        weft_tensor_release(owned);
        return rc;
    }
    return weft_return_tensor(call, 0, owned);
}

static const int inplace_marker = 1;

int wfc_register_index_put(weft_registrar *reg)
{
    int rc = weft_register_kernel(reg, "index_put", WEFT_KEY_DENSE, WFC_DEVICE_TYPE,
                                  index_put_kernel, NULL, NULL);
    if (rc == 0)
        rc = weft_register_kernel(reg, "index_put_", WEFT_KEY_DENSE, WFC_DEVICE_TYPE,
                                  index_put_kernel, (void *)&inplace_marker, NULL);
    return rc;
}
