/* backends/cpu/sort.c — sort (stable), argsort and topk.  As in the row
 * reductions (reduce_rows.c), the input is copied with dim last into a wide
 * dtype (float64 for floating inputs, int64 for integers and bool: exact),
 * each row is merge sorted by index, so equal values keep their order, and
 * the values come back in the input's dtype.  NaN sorts above every
 * number, as in PyTorch.  Rows are independent, so the thread count never
 * changes a result. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "shape.h"

typedef struct sort_job {
    const void *in;     /* [nrows, len] of the wide dtype */
    void *values;       /* [nrows, k] of the wide dtype */
    int64_t *indices;   /* [nrows, k] */
    int64_t len, k;
    bool descending;
    atomic_bool out_of_memory;
} sort_job;

/* Bottom-up merge sort of the positions 0..n-1 of v into idx (tmp: n more
 * entries); a later element moves ahead only when strictly before. */
#define SORT_ROWS(NAME, T, IS_NAN)                                                       \
    static bool before_##NAME(T a, T b, bool descending)                                 \
    {                                                                                    \
        if (descending)                                                                  \
            return a > b || (IS_NAN(a) && !IS_NAN(b));                                   \
        return a < b || (IS_NAN(b) && !IS_NAN(a));                                       \
    }                                                                                    \
    static void merge_sort_##NAME(const T *v, int64_t *idx, int64_t *tmp, int64_t n,     \
                                  bool descending)                                       \
    {                                                                                    \
        int64_t *src = idx, *dst = tmp;                                                  \
        for (int64_t i = 0; i < n; i++)                                                  \
            idx[i] = i;                                                                  \
        for (int64_t width = 1; width < n; width *= 2) {                                 \
            for (int64_t lo = 0; lo < n; lo += 2 * width) {                              \
                int64_t mid = lo + width < n ? lo + width : n;                           \
                int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;                    \
                int64_t i = lo, j = mid, k = lo;                                         \
                while (i < mid && j < hi)                                                \
                    dst[k++] = before_##NAME(v[src[j]], v[src[i]], descending) ? src[j++] \
                                                                               : src[i++]; \
                while (i < mid)                                                          \
                    dst[k++] = src[i++];                                                 \
                while (j < hi)                                                           \
                    dst[k++] = src[j++];                                                 \
            }                                                                            \
            int64_t *swap = src;                                                         \
            src = dst;                                                                   \
            dst = swap;                                                                  \
        }                                                                                \
        if (src != idx)                                                                  \
            memcpy(idx, src, (size_t)n * sizeof(int64_t));                               \
    }                                                                                    \
    static void sort_rows_##NAME(int64_t begin, int64_t end, void *ctx)                  \
    {                                                                                    \
        sort_job *job = ctx;                                                             \
        int64_t *scratch = malloc(2 * (size_t)job->len * sizeof(int64_t));               \
        if (!scratch) {                                                                  \
            atomic_store(&job->out_of_memory, true);                                     \
            return;                                                                      \
        }                                                                                \
        for (int64_t r = begin; r < end; r++) {                                          \
            const T *row = (const T *)job->in + r * job->len;                            \
            merge_sort_##NAME(row, scratch, scratch + job->len, job->len, job->descending); \
            T *values = (T *)job->values + r * job->k;                                   \
            int64_t *indices = job->indices + r * job->k;                                \
            for (int64_t j = 0; j < job->k; j++) {                                       \
                indices[j] = scratch[j];                                                 \
                values[j] = row[scratch[j]];                                             \
            }                                                                            \
        }                                                                                \
        free(scratch);                                                                   \
    }

#define NEVER_NAN(x) ((void)(x), false)
SORT_ROWS(float64, double, isnan)
SORT_ROWS(int64, int64_t, NEVER_NAN)
#undef NEVER_NAN
#undef SORT_ROWS

typedef enum sort_kind { SORT_VALUES, ARGSORT, TOPK } sort_kind;

/* sort(self, dim, descending) -> (values, indices); argsort(self, dim,
 * descending) -> indices; topk(self, k, dim, largest, sorted) -> (values,
 * indices), always sorted. */
static int sort_kernel(weft_call *call, void *ctx)
{
    const sort_kind kind = *(const sort_kind *)ctx;
    const char *op = weft_op_name(call->op);
    const weft_value *a = call->args;
    const weft_tensor *self = a[0].u.tensor;
    const weft_dtype dtype = weft_tensor_dtype(self);
    const int64_t dim_arg = kind == TOPK ? a[2].u.i : a[1].u.i;
    const bool descending = kind == TOPK ? a[3].u.b : a[2].u.b;
    int rc = cpu__check_cpu(op, "self", self);
    if (rc < 0)
        return rc;
    if (weft_dtype_is_complex(dtype))
        return cpu__unsupported_dtype(op, dtype);
    const weft_dtype wide = weft_dtype_is_floating(dtype) ? WEFT_FLOAT64 : WEFT_INT64;
    int dim;
    if ((rc = cpu__wrap_dim(op, dim_arg, weft_tensor_ndim(self), &dim)) < 0)
        return rc;

    weft_tensor *self1 = NULL, *permuted = NULL, *rows = NULL, *values = NULL, *indices = NULL;
    weft_tensor *values_view = NULL, *indices_view = NULL, *final_values = NULL, *final_indices = NULL;
    if ((rc = cpu__at_least_1d(self, &self1)) < 0)
        return rc;
    const int ndim = weft_tensor_ndim(self1);
    const int64_t *sizes = weft_tensor_sizes(self1);
    const int64_t len = sizes[dim], k = kind == TOPK ? a[1].u.i : len;
    int64_t perm[WEFT_MAX_DIMS], inverse[WEFT_MAX_DIMS], shape[WEFT_MAX_DIMS], nrows = 1;
    for (int d = 0, j = 0; d < ndim; d++)
        if (d != dim) {
            inverse[d] = j;
            shape[j] = sizes[d];
            perm[j++] = d;
            nrows *= sizes[d];
        }
    perm[ndim - 1] = dim;
    inverse[dim] = ndim - 1;
    shape[ndim - 1] = k;
    if (k < 0 || k > len)
        rc = weft_set_error(WEFT_ERANGE, "%s: k (%lld) is out of range for dimension %d with "
                            "size %lld", op, (long long)k, dim, (long long)len);
    if (rc == 0)
        rc = weft_permute(&permuted, self1, perm, ndim);
    if (rc == 0)
        rc = weft_to_dtype(&rows, permuted, wide);
    if (rc == 0)
        rc = weft_empty(&values, shape, ndim, wide, WEFT_DEVICE_CPU);
    if (rc == 0)
        rc = weft_empty(&indices, shape, ndim, WEFT_INT64, WEFT_DEVICE_CPU);
    if (rc == 0 && nrows > 0 && len > 0) {
        sort_job job = {weft_tensor_data_ptr(rows), weft_tensor_data_ptr(values),
                        weft_tensor_data_ptr(indices), len, k, descending, false};
        cpu__parallel_for(0, nrows, CPU_GRAIN / len + 1,
                          wide == WEFT_FLOAT64 ? sort_rows_float64 : sort_rows_int64, &job);
        if (atomic_load(&job.out_of_memory))
            rc = weft_set_error(WEFT_ENOMEM, "%s: out of memory for the sort's scratch space", op);
    }
    /* back to self's dim order, and self's rank (0-d stays 0-d) */
    if (rc == 0)
        rc = weft_permute(&values_view, values, inverse, ndim);
    if (rc == 0)
        rc = weft_permute(&indices_view, indices, inverse, ndim);
    if (rc == 0 && kind != ARGSORT)
        rc = weft_to_dtype(&final_values, values_view, dtype);
    if (rc == 0)
        rc = weft_contiguous(&final_indices, indices_view);
    if (rc == 0 && weft_tensor_ndim(self) == 0) {
        weft_tensor *v0 = NULL, *i0 = NULL;
        if (final_values && (rc = weft_view(&v0, final_values, NULL, 0)) == 0) {
            weft_tensor_release(final_values);
            final_values = v0;
        }
        if (rc == 0 && (rc = weft_view(&i0, final_indices, NULL, 0)) == 0) {
            weft_tensor_release(final_indices);
            final_indices = i0;
        }
    }
    if (rc == 0 && kind == ARGSORT) {
        cpu__set_ret(call, 0, final_indices);
        final_indices = NULL;
    } else if (rc == 0) {
        cpu__set_ret(call, 0, final_values);
        cpu__set_ret(call, 1, final_indices);
        final_values = final_indices = NULL;
    }
    weft_tensor *temps[] = {self1, permuted, rows, values, indices, values_view, indices_view,
                            final_values, final_indices};
    for (size_t i = 0; i < sizeof temps / sizeof *temps; i++)
        weft_tensor_release(temps[i]);
    return rc;
}

/* ------------------------------------------------------------ unique */

/* Rows of a [n, width] wide-dtype matrix, for unique(dim=d): compared
 * lexicographically, NaN above every number; equal only when every entry
 * is ==, so a row holding NaN equals no other. */
typedef struct row_order {
    const void *data;
    int64_t width;
    bool floating;
} row_order;

static int compare_rows(const void *pa, const void *pb, void *ctx)
{
    const row_order *r = ctx;
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    for (int64_t j = 0; j < r->width; j++) {
        if (r->floating) {
            double x = ((const double *)r->data)[a * r->width + j],
                   y = ((const double *)r->data)[b * r->width + j];
            if (x < y || (isnan(y) && !isnan(x)))
                return -1;
            if (x > y || (isnan(x) && !isnan(y)))
                return 1;
        } else {
            int64_t x = ((const int64_t *)r->data)[a * r->width + j],
                    y = ((const int64_t *)r->data)[b * r->width + j];
            if (x != y)
                return x < y ? -1 : 1;
        }
    }
    return a < b ? -1 : a > b; /* stable */
}

/* Stable bottom-up merge sort of idx[0..n) by compare_rows (tmp: n more
 * entries): qsort_r, which takes a context, is a GNU extension. */
static void sort_rows(int64_t *idx, int64_t *tmp, int64_t n, const row_order *r)
{
    int64_t *src = idx, *dst = tmp;
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                dst[k++] = compare_rows(&src[j], &src[i], (void *)r) < 0 ? src[j++] : src[i++];
            while (i < mid)
                dst[k++] = src[i++];
            while (j < hi)
                dst[k++] = src[j++];
        }
        int64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != idx)
        memcpy(idx, src, (size_t)n * sizeof *idx);
}

static bool rows_equal(const row_order *r, int64_t a, int64_t b)
{
    for (int64_t j = 0; j < r->width; j++) {
        if (r->floating ? !(((const double *)r->data)[a * r->width + j] ==
                            ((const double *)r->data)[b * r->width + j])
                        : ((const int64_t *)r->data)[a * r->width + j] !=
                              ((const int64_t *)r->data)[b * r->width + j])
            return false;
    }
    return true;
}

/* unique(self, ..., dim=d): the distinct slices along d, sorted; inverse
 * has size(d) entries. */
static int unique_dim(weft_call *call, const weft_tensor *self, int64_t dim_arg, bool want_inverse,
                      bool want_counts)
{
    const char *op = "unique";
    weft_dtype dt = weft_tensor_dtype(self);
    int nd = weft_tensor_ndim(self), dim;
    if (nd == 0)
        return weft_set_error(WEFT_ESHAPE, "%s: a dim was given for a 0-d tensor", op);
    int rc = cpu__wrap_dim(op, dim_arg, nd, &dim);
    if (rc < 0)
        return rc;
    const int64_t n = weft_tensor_sizes(self)[dim], zero = 0;
    int64_t perm[WEFT_MAX_DIMS], width = 1;
    perm[0] = dim;
    for (int d = 0, k = 1; d < nd; d++)
        if (d != dim) {
            perm[k++] = d;
            width *= weft_tensor_sizes(self)[d];
        }
    weft_tensor *moved = NULL, *wide = NULL, *order = NULL, *firsts = NULL, *used = NULL,
                *values = NULL, *inverse = NULL, *counts = NULL;
    bool floating = weft_dtype_is_floating(dt);
    rc = weft_permute(&moved, self, perm, nd);
    if (rc == 0)
        rc = weft_to_dtype(&wide, moved, floating ? WEFT_FLOAT64 : WEFT_INT64);
    weft_tensor *wide_c = NULL;
    if (rc == 0)
        rc = weft_contiguous(&wide_c, wide);
    if (rc == 0)
        rc = weft_empty(&order, &n, 1, WEFT_INT64, WEFT_DEVICE_CPU);
    if (rc == 0)
        rc = weft_empty(&firsts, &n, 1, WEFT_INT64, WEFT_DEVICE_CPU);
    if (rc == 0)
        rc = weft_empty(&inverse, want_inverse ? &n : &zero, 1, WEFT_INT64, WEFT_DEVICE_CPU);
    int64_t groups = 0, *tmp = NULL;
    if (rc == 0 && n && !(tmp = malloc((size_t)n * sizeof *tmp)))
        rc = weft_set_error(WEFT_ENOMEM, "%s: out of memory sorting %lld slices", op, (long long)n);
    if (rc == 0) {
        row_order r = {weft_tensor_data_ptr(wide_c), width, floating};
        int64_t *ord = weft_tensor_data_ptr(order), *first = weft_tensor_data_ptr(firsts);
        for (int64_t i = 0; i < n; i++)
            ord[i] = i;
        sort_rows(ord, tmp, n, &r);
        int64_t *inv = weft_tensor_data_ptr(inverse);
        for (int64_t i = 0; i < n; i++) {
            if (i == 0 || !rows_equal(&r, ord[i], ord[i - 1]))
                first[groups++] = i;
            if (want_inverse)
                inv[ord[i]] = groups - 1;
        }
        rc = weft_empty(&counts, want_counts ? &groups : &zero, 1, WEFT_INT64, WEFT_DEVICE_CPU);
        if (rc == 0 && want_counts) {
            int64_t *cnt = weft_tensor_data_ptr(counts);
            for (int64_t g = 0; g < groups; g++)
                cnt[g] = (g + 1 < groups ? first[g + 1] : n) - first[g];
        }
        for (int64_t g = 0; g < groups; g++) /* positions in sorted order -> rows */
            first[g] = ord[first[g]];
    }
    if (rc == 0)
        rc = weft_narrow(&used, firsts, 0, 0, groups);
    if (rc == 0)
        rc = weft_index_select(&values, self, dim, used);
    free(tmp);
    if (rc == 0) {
        cpu__set_ret(call, 0, values);
        cpu__set_ret(call, 1, inverse);
        cpu__set_ret(call, 2, counts);
        values = inverse = counts = NULL;
    }
    weft_tensor *temps[] = {moved, wide, wide_c, order, firsts, used, values, inverse, counts};
    for (size_t i = 0; i < sizeof temps / sizeof *temps; i++)
        weft_tensor_release(temps[i]);
    return rc;
}

/* unique(self, sorted, return_inverse, return_counts, dim=None): with a
 * dim, unique_dim above; otherwise the flattened input sorted (stably, by the sort above), then cut into runs of
 * equal values in a wide dtype (exact for every supported dtype).  NaN
 * equals nothing, so each NaN is its own entry, last.  The result is always
 * sorted (sorted=False leaves the order unspecified, as torch says);
 * inverse and counts are empty int64 tensors when not asked for. */
static int unique_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "unique";
    const weft_tensor *self = call->args[0].u.tensor;
    bool want_inverse = call->args[2].u.b, want_counts = call->args[3].u.b;
    weft_dtype dt = weft_tensor_dtype(self);
    int rc = cpu__check_cpu(op, "self", self);
    if (rc < 0)
        return rc;
    if (weft_dtype_is_complex(dt))
        return cpu__unsupported_dtype(op, dt);
    if (call->args[4].tag == WEFT_VALUE_INT)
        return unique_dim(call, self, call->args[4].u.i, want_inverse, want_counts);
    const int64_t n = weft_tensor_numel(self), minus_one = -1, zero = 0;
    weft_tensor *flat = NULL, *sorted = NULL, *order = NULL, *wide = NULL, *starts = NULL,
                *values = NULL, *inverse = NULL, *counts = NULL;
    rc = weft_reshape(&flat, self, &minus_one, 1);
    if (rc == 0)
        rc = weft_sort(&sorted, &order, flat, 0, false);
    if (rc == 0)
        rc = weft_to_dtype(&wide, sorted, weft_dtype_is_floating(dt) ? WEFT_FLOAT64 : WEFT_INT64);
    if (rc == 0)
        rc = weft_empty(&starts, &n, 1, WEFT_INT64, WEFT_DEVICE_CPU);
    int64_t groups = 0;
    if (rc == 0) {
        int64_t *st = weft_tensor_data_ptr(starts);
        if (weft_dtype_is_floating(dt)) {
            const double *v = weft_tensor_data_ptr(wide);
            for (int64_t i = 0; i < n; i++)
                if (i == 0 || !(v[i] == v[i - 1]))
                    st[groups++] = i;
        } else {
            const int64_t *v = weft_tensor_data_ptr(wide);
            for (int64_t i = 0; i < n; i++)
                if (i == 0 || v[i] != v[i - 1])
                    st[groups++] = i;
        }
    }
    weft_tensor *used = NULL;
    if (rc == 0)
        rc = weft_narrow(&used, starts, 0, 0, groups);
    if (rc == 0)
        rc = weft_index_select(&values, sorted, 0, used);
    weft_tensor_release(used);
    if (rc == 0)
        rc = want_inverse ? weft_empty(&inverse, weft_tensor_sizes(self), weft_tensor_ndim(self),
                                       WEFT_INT64, WEFT_DEVICE_CPU)
                          : weft_empty(&inverse, &zero, 1, WEFT_INT64, WEFT_DEVICE_CPU);
    if (rc == 0)
        rc = weft_empty(&counts, want_counts ? &groups : &zero, 1, WEFT_INT64, WEFT_DEVICE_CPU);
    if (rc == 0) {
        const int64_t *st = weft_tensor_data_ptr(starts), *ord = weft_tensor_data_ptr(order);
        int64_t *inv = weft_tensor_data_ptr(inverse), *cnt = weft_tensor_data_ptr(counts);
        for (int64_t g = 0; g < groups; g++) {
            int64_t end = g + 1 < groups ? st[g + 1] : n;
            if (want_counts)
                cnt[g] = end - st[g];
            for (int64_t i = st[g]; want_inverse && i < end; i++)
                inv[ord[i]] = g;
        }
        cpu__set_ret(call, 0, values);
        cpu__set_ret(call, 1, inverse);
        cpu__set_ret(call, 2, counts);
        values = inverse = counts = NULL;
    }
    weft_tensor *temps[] = {flat, sorted, order, wide, starts, values, inverse, counts};
    for (size_t i = 0; i < sizeof temps / sizeof *temps; i++)
        weft_tensor_release(temps[i]);
    return rc;
}

static const sort_kind sort_values = SORT_VALUES, argsort = ARGSORT, topk = TOPK;

static const weft_kernel_entry sort_entries[] = {
    {"sort", sort_kernel, &sort_values},
    {"argsort", sort_kernel, &argsort},
    {"topk", sort_kernel, &topk},
    {"unique", unique_kernel, NULL},
};

int cpu__register_sort(weft_registrar *reg)
{
    return weft_register_kernel_table(reg, WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, sort_entries, sizeof sort_entries / sizeof *sort_entries);
}
