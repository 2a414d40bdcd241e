/* backends/cuda/sort.c — the boxed sort (stable), argsort and topk
 * (largest or smallest, always sorted, as the CPU's) through sort.cu: dim
 * moved last and made contiguous, keys in the CPU's order sorted stably
 * by CUB's radix sort, then stably by row, and the first k of each row
 * taken with their indices; unique (no dim) from the same sorted keys:
 * runs of equal keys marked, numbered by a prefix sum and compacted.
 * Complex dtypes go to the CPU fallback (and its error). */
#include <string.h>

#include "gpu.h"

#include "cuda.h"

typedef enum sort_kind { SORT_VALUES, ARGSORT, TOPK } sort_kind;

static int new_int64(weft_tensor **out, const weft_tensor *like, int64_t n)
{
    return weft_new_output(out, like, &n, 1, WEFT_INT64);
}

/* Sorts each row of len of the contiguous x and writes the first k of
 * each: indices [nrows, k] always, values [nrows, k] when non-NULL. */
static int sort_rows(const char *op, const weft_tensor *x, int64_t nrows, int64_t len, int64_t k,
                     bool descending, weft_tensor *values, weft_tensor *indices)
{
    int64_t n = nrows * len;
    if (nrows == 0 || k == 0)
        return 0;
    int index = weft_tensor_device(x).index;
    void *stream = wfc_current_stream(index);
    if (cudaSetDevice(index) != cudaSuccess)
        return weft_set_error(WEFT_EDEVICE, "%s: cannot select " WFC_BACKEND ":%d", op, index);
    weft_dtype dt = weft_tensor_dtype(x);
    weft_tensor *keys = NULL, *keys2 = NULL, *pos = NULL, *pos2 = NULL, *temp = NULL;
    int rc = new_int64(&keys, x, n);
    if (rc == 0)
        rc = new_int64(&keys2, x, n);
    if (rc == 0)
        rc = new_int64(&pos, x, n);
    if (rc == 0)
        rc = new_int64(&pos2, x, n);
    uint64_t *k1 = keys ? weft_tensor_data_ptr(keys) : NULL;
    uint64_t *k2 = keys2 ? weft_tensor_data_ptr(keys2) : NULL;
    int64_t *p1 = pos ? weft_tensor_data_ptr(pos) : NULL, *p2 = pos2 ? weft_tensor_data_ptr(pos2) : NULL;
    /* one scratch for both sorts: the larger of their sizes */
    int row_bits = wfc_plan_key_bits((uint64_t)(nrows - 1));
    size_t bytes = 0, row_bytes = 0;
    if (rc == 0)
        rc = wfc_radix_sort_pairs(stream, NULL, &bytes, k1, k2, p1, p2, n, 64);
    if (rc == 0 && nrows > 1)
        rc = wfc_radix_sort_pairs(stream, NULL, &row_bytes, k1, k2, p2, p1, n, row_bits);
    if (row_bytes > bytes)
        bytes = row_bytes;
    if (rc == 0)
        rc = weft_new_output(&temp, x, (const int64_t[]){(int64_t)bytes + 1}, 1, WEFT_UINT8);
    void *scratch = temp ? weft_tensor_data_ptr(temp) : NULL;
    if (rc == 0)
        rc = wfc_sort_keys(stream, dt, k1, p1, weft_tensor_data_ptr(x), n, descending);
    if (rc == 0)
        rc = wfc_radix_sort_pairs(stream, scratch, &bytes, k1, k2, p1, p2, n, 64);
    const int64_t *order = p2;
    if (rc == 0 && nrows > 1) { /* rows back together, each still in value order */
        rc = wfc_sort_row_keys(stream, k1, p2, n, len);
        if (rc == 0)
            rc = wfc_radix_sort_pairs(stream, scratch, &bytes, k1, k2, p2, p1, n, row_bits);
        order = p1;
    }
    if (rc == 0)
        rc = wfc_sort_take(stream, weft_dtype_size(dt), values ? weft_tensor_data_ptr(values) : NULL,
                           weft_tensor_data_ptr(indices), weft_tensor_data_ptr(x), order, nrows,
                           len, k);
    weft_tensor *temps[] = {keys, keys2, pos, pos2, temp};
    for (size_t i = 0; i < sizeof temps / sizeof *temps; i++)
        weft_tensor_release(temps[i]);
    return rc;
}

/* t [.., k] with dim last, back in self's dim order and rank, contiguous. */
static int back_in_place(weft_tensor **out, const weft_tensor *t, const int64_t *inverse, int nd,
                         bool zero_d)
{
    weft_tensor *view = NULL;
    int rc = weft_permute(&view, t, inverse, nd);
    if (rc == 0 && zero_d) {
        weft_tensor *scalar = NULL;
        rc = weft_view(&scalar, view, NULL, 0);
        weft_tensor_release(view);
        view = scalar;
    }
    if (rc == 0)
        rc = weft_contiguous(out, view);
    weft_tensor_release(view);
    return rc;
}

/* sort(self, dim, descending) -> (values, indices); argsort(self, dim,
 * descending) -> indices; topk(self, k, dim, largest, sorted) -> (values,
 * indices). */
static int sort_kernel(weft_call *call, void *ctx)
{
    const sort_kind kind = *(const sort_kind *)ctx;
    const char *op = weft_op_name(call->op);
    const weft_tensor *self = call->args[0].u.tensor;
    weft_dtype dt = weft_tensor_dtype(self);
    if (!wfc_sort_supported(dt))
        return weft_call_cpu_fallback(call);
    int64_t dim_arg = weft_arg_int(call, kind == TOPK ? 2 : 1);
    bool descending = weft_arg_bool(call, kind == TOPK ? 3 : 2);
    int dim;
    int rc = wfc_wrap_dim(op, dim_arg, weft_tensor_ndim(self), &dim);
    if (rc < 0)
        return rc;
    weft_tensor *self1 = NULL, *permuted = NULL, *x = NULL, *values = NULL, *indices = NULL;
    weft_tensor *final_values = NULL, *final_indices = NULL;
    if ((rc = wfc_at_least_1d(&self1, self)) < 0)
        return rc;
    const int nd = weft_tensor_ndim(self1);
    const int64_t *sizes = weft_tensor_sizes(self1);
    const int64_t len = sizes[dim], k = kind == TOPK ? weft_arg_int(call, 1) : len;
    int64_t perm[WEFT_MAX_DIMS], inverse[WEFT_MAX_DIMS], shape[WEFT_MAX_DIMS], nrows = 1;
    for (int d = 0, j = 0; d < nd; d++)
        if (d != dim) {
            inverse[d] = j;
            shape[j] = sizes[d];
            perm[j++] = d;
            nrows *= sizes[d];
        }
    perm[nd - 1] = dim;
    inverse[dim] = nd - 1;
    shape[nd - 1] = k;
    if (k < 0 || k > len)
        rc = weft_set_error(WEFT_ERANGE, "%s: k (%lld) is out of range for dimension %d with "
                            "size %lld", op, (long long)k, dim, (long long)len);
    if (rc == 0)
        rc = weft_permute(&permuted, self1, perm, nd);
    if (rc == 0)
        rc = weft_contiguous(&x, permuted);
    if (rc == 0 && kind != ARGSORT)
        rc = weft_new_output(&values, self, shape, nd, dt);
    if (rc == 0)
        rc = weft_new_output(&indices, self, shape, nd, WEFT_INT64);
    if (rc == 0)
        rc = sort_rows(op, x, nrows, len, k, descending, values, indices);
    bool zero_d = weft_tensor_ndim(self) == 0;
    if (rc == 0 && values)
        rc = back_in_place(&final_values, values, inverse, nd, zero_d);
    if (rc == 0)
        rc = back_in_place(&final_indices, indices, inverse, nd, zero_d);
    if (rc == 0 && kind == ARGSORT) {
        weft_return_tensor(call, 0, final_indices);
        final_indices = NULL;
    } else if (rc == 0) {
        weft_return_tensor(call, 0, final_values);
        weft_return_tensor(call, 1, final_indices);
        final_values = final_indices = NULL;
    }
    weft_tensor *temps[] = {self1, permuted, x, values, indices, final_values, final_indices};
    for (size_t i = 0; i < sizeof temps / sizeof *temps; i++)
        weft_tensor_release(temps[i]);
    return rc;
}

/* unique's groups of the contiguous x (n elements): the keys sorted with
 * their positions (pos), then marks, group numbers, and the groups' values,
 * starts, inverse (when non-NULL) and counts (when non-NULL); the group
 * count is read back to size the results.  Buffers are reused: keys' first
 * copy holds the marks, pos's first copy the group numbers. */
static int unique_groups(const weft_tensor *x, int64_t n, weft_tensor **values, bool want_inverse,
                         bool want_counts, weft_tensor **inverse, weft_tensor **counts)
{
    weft_dtype dt = weft_tensor_dtype(x);
    int index = weft_tensor_device(x).index;
    void *stream = wfc_current_stream(index);
    if (cudaSetDevice(index) != cudaSuccess)
        return weft_set_error(WEFT_EDEVICE, "unique: cannot select " WFC_BACKEND ":%d", index);
    weft_tensor *keys = NULL, *keys2 = NULL, *pos = NULL, *pos2 = NULL, *temp = NULL, *starts = NULL;
    int64_t groups = 0;
    int rc = 0;
    if (n > 0) {
        rc = new_int64(&keys, x, n);
        if (rc == 0)
            rc = new_int64(&keys2, x, n);
        if (rc == 0)
            rc = new_int64(&pos, x, n);
        if (rc == 0)
            rc = new_int64(&pos2, x, n);
        uint64_t *k1 = keys ? weft_tensor_data_ptr(keys) : NULL;
        uint64_t *k2 = keys2 ? weft_tensor_data_ptr(keys2) : NULL;
        int64_t *p1 = pos ? weft_tensor_data_ptr(pos) : NULL;
        int64_t *p2 = pos2 ? weft_tensor_data_ptr(pos2) : NULL;
        size_t bytes = 0, scan_bytes = 0;
        if (rc == 0)
            rc = wfc_radix_sort_pairs(stream, NULL, &bytes, k1, k2, p1, p2, n, 64);
        if (rc == 0)
            rc = wfc_inclusive_sum(stream, NULL, &scan_bytes, p1, p2, n);
        if (scan_bytes > bytes)
            bytes = scan_bytes;
        if (rc == 0)
            rc = weft_new_output(&temp, x, (const int64_t[]){(int64_t)bytes + 1}, 1, WEFT_UINT8);
        void *scratch = temp ? weft_tensor_data_ptr(temp) : NULL;
        if (rc == 0)
            rc = wfc_sort_keys(stream, dt, k1, p1, weft_tensor_data_ptr(x), n, false);
        if (rc == 0)
            rc = wfc_radix_sort_pairs(stream, scratch, &bytes, k1, k2, p1, p2, n, 64);
        if (rc == 0)
            rc = wfc_unique_marks(stream, (int64_t *)k1, k2, n, weft_dtype_is_floating(dt));
        if (rc == 0)
            rc = wfc_inclusive_sum(stream, scratch, &bytes, (const int64_t *)k1, p1, n);
        if (rc == 0)
            rc = wfc_read_element(pos, n - 1, &groups);
    }
    if (rc == 0)
        rc = weft_new_output(values, x, &groups, 1, dt);
    if (rc == 0)
        rc = new_int64(&starts, x, groups);
    if (rc == 0)
        rc = want_inverse ? weft_new_output(inverse, x, weft_tensor_sizes(x), weft_tensor_ndim(x),
                                            WEFT_INT64)
                          : new_int64(inverse, x, 0);
    if (rc == 0)
        rc = new_int64(counts, x, want_counts ? groups : 0);
    if (rc == 0 && n > 0)
        rc = wfc_unique_gather(stream, weft_dtype_size(dt), weft_tensor_data_ptr(*values),
                               want_inverse ? weft_tensor_data_ptr(*inverse) : NULL,
                               weft_tensor_data_ptr(starts), weft_tensor_data_ptr(x),
                               weft_tensor_data_ptr(pos2), weft_tensor_data_ptr(pos), n);
    if (rc == 0 && want_counts)
        rc = wfc_unique_counts(stream, weft_tensor_data_ptr(*counts), weft_tensor_data_ptr(starts),
                               groups, n);
    weft_tensor *temps[] = {keys, keys2, pos, pos2, temp, starts};
    for (size_t i = 0; i < sizeof temps / sizeof *temps; i++)
        weft_tensor_release(temps[i]);
    return rc;
}

/* unique(self, sorted, return_inverse, return_counts, dim=None) -> (values,
 * inverse, counts), as the CPU's: values always sorted, -0.0 one with 0.0
 * (the first met in self's order is kept), each NaN its own entry, last;
 * inverse of self's shape and counts only when asked, else empty.  With a
 * dim (the distinct slices), and for complex dtypes: the CPU fallback. */
static int unique_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = call->args[0].u.tensor;
    if (!wfc_sort_supported(weft_tensor_dtype(self)) || !weft_arg_is_none(call, 4))
        return weft_call_cpu_fallback(call);
    weft_tensor *x = NULL, *values = NULL, *inverse = NULL, *counts = NULL;
    int rc = weft_contiguous(&x, self);
    if (rc == 0)
        rc = unique_groups(x, weft_tensor_numel(x), &values, weft_arg_bool(call, 2),
                           weft_arg_bool(call, 3), &inverse, &counts);
    weft_tensor_release(x);
    if (rc < 0) {
        weft_tensor_release(values);
        weft_tensor_release(inverse);
        weft_tensor_release(counts);
        return rc;
    }
    weft_return_tensor(call, 0, values);
    weft_return_tensor(call, 1, inverse);
    return weft_return_tensor(call, 2, counts);
}

static const sort_kind sort_values = SORT_VALUES, argsort = ARGSORT, topk = TOPK;

int wfc_register_sort(weft_registrar *reg)
{
    static const weft_kernel_entry entries[] = {{"sort", sort_kernel, &sort_values},
                                               {"argsort", sort_kernel, &argsort},
                                               {"topk", sort_kernel, &topk},
                                               {"unique", unique_kernel, NULL}};
    return weft_register_kernel_table(reg, WEFT_KEY_DENSE, WFC_DEVICE_TYPE, entries, sizeof entries / sizeof *entries);
}
