/* backends/cpu/sort.c — sort (stable), argsort and topk.  As in the row
 * reductions (reduce_rows.c), the input is copied with dim last into a wide
 * dtype (float64 for floating inputs, int64 for integers and bool: exact),
 * each row is merge sorted by index, so equal values keep their order, and
 * the values come back in the input's dtype.  NaN sorts above every
 * number, as in PyTorch.  Rows are independent, so the thread count never
 * changes a result. */
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

static const sort_kind sort_values = SORT_VALUES, argsort = ARGSORT, topk = TOPK;

static const cpu_kernel_entry sort_entries[] = {
    {"sort", sort_kernel, &sort_values},
    {"argsort", sort_kernel, &argsort},
    {"topk", sort_kernel, &topk},
};

int cpu__register_sort(weft_registrar *reg)
{
    return cpu__register_table(reg, sort_entries, sizeof sort_entries / sizeof *sort_entries);
}
