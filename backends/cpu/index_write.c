/* backends/cpu/index_write.c — writes through index tensors that combine
 * values: scatter_reduce (sum, prod, mean, amax, amin, with or without
 * self's own values) and index_put (a tuple of index tensors and boolean
 * masks, broadcast together, with accumulate).  As in index.c, every index
 * is checked before anything is written; elements are combined in one
 * body per dtype, reached through a table. */
#include <stdlib.h>

#include "shape.h"

/* ------------------------------------------------------------ combining */

typedef enum reduce_kind { R_SUM, R_PROD, R_MEAN, R_AMAX, R_AMIN, R_COUNT } reduce_kind;
static const char *const reduce_names[R_COUNT] = {"sum", "prod", "mean", "amax", "amin"};

/* *dst = *dst (op) *src; mean sums.  amax/amin propagate NaN as torch
 * does.  Integers add and multiply in unsigned arithmetic (wrapping). */
typedef void (*combine_fn)(char *dst, const char *src, reduce_kind kind);
/* *dst = *dst / count (floor division for the integers, as torch's mean). */
typedef void (*divide_fn)(char *dst, int64_t count);

#define COMBINE(NAME, DTYPE, T, C, U)                                                       \
    static void combine_##NAME(char *dst, const char *src, reduce_kind kind)                \
    {                                                                                       \
        C a = cpu_load_##NAME(*(T *)dst), b = cpu_load_##NAME(*(const T *)src), r;          \
        switch (kind) {                                                                     \
        case R_PROD:                                                                        \
            r = (C)((U)a * (U)b);                                                           \
            break;                                                                          \
        case R_AMAX:                                                                        \
            r = (a != a || a > b) ? a : b;                                                  \
            break;                                                                          \
        case R_AMIN:                                                                        \
            r = (a != a || a < b) ? a : b;                                                  \
            break;                                                                          \
        default:                                                                            \
            r = (C)((U)a + (U)b);                                                           \
            break;                                                                          \
        }                                                                                   \
        *(T *)dst = cpu_store_##NAME(r);                                                    \
    }
#define DIVIDE_INT(NAME, DTYPE, T, C, U)                                                    \
    static void divide_##NAME(char *dst, int64_t count)                                     \
    {                                                                                       \
        int64_t a = (int64_t)*(T *)dst, q = a / count;                                      \
        if ((a % count != 0) && ((a < 0) != (count < 0)))                                   \
            q--;                                                                            \
        *(T *)dst = (T)q;                                                                   \
    }
#define DIVIDE_FLOAT(NAME, DTYPE, T, C, U)                                                  \
    static void divide_##NAME(char *dst, int64_t count)                                     \
    {                                                                                       \
        *(T *)dst = cpu_store_##NAME(cpu_load_##NAME(*(T *)dst) / (C)count);                \
    }
CPU_DTYPES_INTEGRAL(COMBINE)
CPU_DTYPES_FLOATING(COMBINE)
CPU_DTYPES_INTEGRAL(DIVIDE_INT)
CPU_DTYPES_FLOATING(DIVIDE_FLOAT)
static const combine_fn combine_fns[WEFT_NUM_DTYPES] = {CPU_ENTRIES_INTEGRAL(combine)
                                                            CPU_ENTRIES_FLOATING(combine)};
static const divide_fn divide_fns[WEFT_NUM_DTYPES] = {CPU_ENTRIES_INTEGRAL(divide)
                                                          CPU_ENTRIES_FLOATING(divide)};

/* index_put's accumulate: a sum in every dtype, bool ORing and complex too */
typedef void (*add_fn)(char *dst, const char *src);
#define ADD(NAME, DTYPE, T, C, U)                                                           \
    static void add_##NAME(char *dst, const char *src)                                      \
    {                                                                                       \
        U sum = (U)cpu_load_##NAME(*(T *)dst) + (U)cpu_load_##NAME(*(const T *)src);        \
        *(T *)dst = cpu_store_##NAME((C)sum);                                               \
    }
CPU_DTYPES_ALL(ADD)
static const add_fn add_fns[WEFT_NUM_DTYPES] = {CPU_ENTRIES_BOOL(add) CPU_ENTRIES_INTEGRAL(add)
                                                    CPU_ENTRIES_FLOATING(add)
                                                        CPU_ENTRIES_COMPLEX(add)};

/* A new contiguous copy of t (never an alias: callers write it). */
static int private_copy(const weft_tensor *t, weft_tensor **out)
{
    int rc = weft_empty(out, weft_tensor_sizes(t), weft_tensor_ndim(t), weft_tensor_dtype(t),
                        WEFT_DEVICE_CPU);
    if (rc == 0 && (rc = weft_copy_(*out, t)) < 0) {
        weft_tensor_release(*out);
        *out = NULL;
    }
    return rc;
}

/* ------------------------------------------------------- scatter_reduce */

/* target[.., index[p], ..] (reduce)= src[p] along dim.  With include_self
 * false the first value that reaches a position replaces self's. */
static int scatter_reduce_into(const char *op, weft_tensor *target_arg, int64_t dim_arg,
                               const weft_tensor *index, const weft_tensor *src_arg,
                               reduce_kind kind, bool include_self)
{
    weft_dtype dtype = weft_tensor_dtype(target_arg);
    if (!combine_fns[dtype])
        return cpu__unsupported_dtype(op, dtype);
    int rc = cpu__check_cpu(op, "src", src_arg);
    if (rc == 0 && weft_tensor_dtype(src_arg) != dtype)
        rc = weft_set_error(WEFT_EDTYPE, "%s: self (%s) and src (%s) must have the same dtype", op,
                            weft_dtype_name(dtype), weft_dtype_name(weft_tensor_dtype(src_arg)));
    if (rc < 0)
        return rc;
    weft_tensor *target = NULL, *idx0 = NULL, *idx = NULL, *src0 = NULL, *src = NULL;
    int64_t *count = NULL;
    int dim;
    char a[128], b[128];
    rc = cpu__wrap_dim(op, dim_arg, weft_tensor_ndim(target_arg), &dim);
    if (rc == 0)
        rc = cpu__index_operand(op, "index", index, &idx0);
    if (rc == 0)
        rc = cpu__at_least_1d(idx0, &idx);
    if (rc == 0)
        rc = cpu__at_least_1d(target_arg, &target);
    if (rc == 0) /* a copy: src may share memory with the target */
        rc = private_copy(src_arg, &src0);
    if (rc == 0)
        rc = cpu__at_least_1d(src0, &src);
    const int ndim = target ? weft_tensor_ndim(target) : 0;
    if (rc == 0 && (weft_tensor_ndim(idx) != ndim || weft_tensor_ndim(src) != ndim))
        rc = weft_set_error(WEFT_ESHAPE, "%s: index and src must have self's number of "
                            "dimensions (%d), got %d and %d", op, ndim, weft_tensor_ndim(idx),
                            weft_tensor_ndim(src));
    for (int d = 0; rc == 0 && d < ndim; d++) {
        int64_t k = weft_tensor_sizes(idx)[d];
        if ((d != dim && k > weft_tensor_sizes(target)[d]) || k > weft_tensor_sizes(src)[d])
            rc = weft_set_error(WEFT_ESHAPE, "%s: index %s must be no larger than src %s, nor "
                                "than self apart from dimension %d", op,
                                weft_format_shape(a, sizeof a, weft_tensor_sizes(idx), ndim),
                                weft_format_shape(b, sizeof b, weft_tensor_sizes(src), ndim), dim);
    }
    if (rc == 0)
        rc = cpu__check_indices(op, weft_tensor_data_ptr(idx), weft_tensor_numel(idx), dim,
                                weft_tensor_sizes(target)[dim]);
    /* per target element (in its storage order): how many values it holds,
     * 0 meaning untouched; kept by storage offset from the target's base */
    int64_t extent = 1;
    for (int d = 0; rc == 0 && d < ndim; d++)
        extent += (weft_tensor_sizes(target)[d] - 1) * weft_tensor_strides(target)[d];
    if (rc == 0 && weft_tensor_numel(target) > 0 && weft_tensor_numel(idx) > 0) {
        count = calloc((size_t)extent, sizeof *count);
        if (!count)
            rc = weft_set_error(WEFT_ENOMEM, "%s: out of memory", op);
    }
    if (rc == 0 && count) {
        const int64_t es = (int64_t)weft_dtype_size(dtype);
        const int64_t *ix = weft_tensor_data_ptr(idx), *ts = weft_tensor_strides(target);
        const char *from = weft_tensor_data_ptr(src);
        char *to = weft_tensor_data_ptr(target);
        combine_fn combine = combine_fns[dtype];
        cpu_walk w;
        cpu_walk_init(&w, weft_tensor_sizes(idx), ndim, 2);
        for (int d = 0; d < ndim; d++) {
            w.strides[0][d] = d == dim ? 0 : ts[d];
            w.strides[1][d] = weft_tensor_strides(src)[d];
        }
        for (int64_t p = 0, n = weft_tensor_numel(idx); p < n; p++, cpu_walk_next(&w)) {
            int64_t at = w.offset[0] + ix[p] * ts[dim];
            const char *v = from + w.offset[1] * es;
            if (count[at] == 0 && !include_self) {
                memcpy(to + at * es, v, (size_t)es);
                count[at] = 1;
            } else {
                if (count[at] == 0)
                    count[at] = 1; /* self's own value */
                combine(to + at * es, v, kind);
                count[at]++;
            }
        }
        if (kind == R_MEAN)
            for (int64_t at = 0; at < extent; at++)
                if (count[at] > 1)
                    divide_fns[dtype](to + at * es, count[at]);
    }
    free(count);
    weft_tensor_release(target);
    weft_tensor_release(idx0);
    weft_tensor_release(idx);
    weft_tensor_release(src0);
    weft_tensor_release(src);
    return rc;
}

/* scatter_reduce(self, dim, index, src, reduce, *, include_self) and the
 * in-place form (ctx non-NULL) */
static int scatter_reduce_kernel(weft_call *call, void *ctx)
{
    const bool inplace = ctx != NULL;
    const char *op = weft_op_name(call->op);
    weft_tensor *self = call->args[0].u.tensor, *target = NULL;
    const char *reduce = call->args[4].u.string;
    int kind = 0;
    while (kind < R_COUNT && strcmp(reduce, reduce_names[kind]) != 0)
        kind++;
    if (kind == R_COUNT)
        return weft_set_error(WEFT_EINVAL, "%s: reduce argument must be one of sum, prod, mean, "
                              "amax, amin; got '%s'", op, reduce);
    int rc = cpu__check_cpu(op, "self", self);
    if (rc == 0)
        rc = inplace ? (target = weft_tensor_retain(self), 0) : private_copy(self, &target);
    if (rc == 0)
        rc = scatter_reduce_into(op, target, call->args[1].u.i, call->args[2].u.tensor,
                                 call->args[3].u.tensor, (reduce_kind)kind, call->args[5].u.b);
    if (rc == 0 && !inplace)
        cpu__set_ret(call, 0, target);
    else
        weft_tensor_release(target);
    return rc;
}

/* ------------------------------------------------------------ index_put */

/* The index tensors of index_put as int64 columns broadcast to one shape:
 * a boolean (or uint8) mask over m dims becomes the m columns of its
 * nonzero(); negative indices are wrapped; each is checked against the dim
 * it indexes. */
typedef struct index_set {
    int count;                      /* dims of self indexed */
    weft_tensor *cols[WEFT_MAX_DIMS]; /* private int64 copies, each of shape */
    int64_t shape[WEFT_MAX_DIMS];
    int ndim;
} index_set;

static void index_set_free(index_set *s)
{
    for (int k = 0; k < s->count; k++)
        weft_tensor_release(s->cols[k]);
    s->count = 0;
}

static int add_column(index_set *s, const char *op, weft_tensor *col)
{
    if (s->count == WEFT_MAX_DIMS) {
        weft_tensor_release(col);
        return weft_set_error(WEFT_ESHAPE, "%s: too many indices", op);
    }
    s->cols[s->count++] = col;
    return 0;
}

static int gather_indices(index_set *s, const char *op, const weft_tensor *self,
                          weft_tensor *const *indices, int n)
{
    char a[128], b[128];
    const int ndim = weft_tensor_ndim(self);
    s->count = 0;
    int rc = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        const weft_tensor *ix = indices[i];
        weft_dtype dt = weft_tensor_dtype(ix);
        if ((rc = cpu__check_cpu(op, "indices", ix)) < 0)
            break;
        if (dt == WEFT_BOOL || dt == WEFT_UINT8) {
            int m = weft_tensor_ndim(ix);
            if (m == 0) {
                /* torch reads a 0-d mask as a new unit dim indexed by [0]
                 * or by nothing; this kernel indexes self's own dims only
                 * (it wrote every element for a false one) */
                rc = weft_set_error(WEFT_ESHAPE, "%s: index %d is a 0-d mask, which index_put "
                                    "does not take (x[mask] = v does; or unsqueeze self and "
                                    "index the new dim with [0] or [])", op, i);
                break;
            }
            if (s->count + m > ndim) {
                rc = weft_set_error(WEFT_ESHAPE, "%s: too many indices for a tensor of dimension %d",
                                    op, ndim);
                break;
            }
            for (int d = 0; d < m; d++)
                if (weft_tensor_sizes(ix)[d] != weft_tensor_sizes(self)[s->count + d]) {
                    rc = weft_set_error(WEFT_ESHAPE, "%s: the shape of the mask %s at index %d "
                                        "does not match the shape of the indexed tensor %s", op,
                                        weft_format_shape(a, sizeof a, weft_tensor_sizes(ix), m), i,
                                        weft_format_shape(b, sizeof b, weft_tensor_sizes(self), ndim));
                    break;
                }
            weft_tensor *nz = NULL;
            if (rc == 0)
                rc = weft_nonzero(&nz, ix);
            for (int d = 0; rc == 0 && d < m; d++) {
                weft_tensor *col = NULL, *copy = NULL;
                rc = weft_select(&col, nz, 1, d);
                if (rc == 0)
                    rc = private_copy(col, &copy);
                weft_tensor_release(col);
                if (rc == 0)
                    rc = add_column(s, op, copy);
            }
            weft_tensor_release(nz);
        } else {
            weft_tensor *idx = NULL, *copy = NULL;
            rc = cpu__index_operand(op, "indices", ix, &idx);
            if (rc == 0)
                rc = private_copy(idx, &copy);
            weft_tensor_release(idx);
            if (rc == 0 && s->count + 1 > ndim) {
                weft_tensor_release(copy);
                rc = weft_set_error(WEFT_ESHAPE, "%s: too many indices for a tensor of dimension %d",
                                    op, ndim);
            }
            if (rc == 0)
                rc = add_column(s, op, copy);
        }
    }
    /* one broadcast shape for all */
    s->ndim = 0;
    for (int k = 0; rc == 0 && k < s->count; k++) {
        int64_t next[WEFT_MAX_DIMS];
        int nn = 0;
        if (weft_broadcast_shapes(next, &nn, s->shape, s->ndim, weft_tensor_sizes(s->cols[k]),
                                  weft_tensor_ndim(s->cols[k])) < 0) {
            rc = weft_set_error(WEFT_ESHAPE, "%s: shape mismatch: indexing tensors could not be "
                                "broadcast together (index %d has shape %s)", op, k,
                                weft_format_shape(a, sizeof a, weft_tensor_sizes(s->cols[k]),
                                               weft_tensor_ndim(s->cols[k])));
            break;
        }
        memcpy(s->shape, next, (size_t)nn * sizeof(int64_t));
        s->ndim = nn;
    }
    for (int k = 0; rc == 0 && k < s->count; k++) {
        weft_tensor *e = NULL, *c = NULL;
        rc = weft_expand(&e, s->cols[k], s->shape, s->ndim);
        if (rc == 0)
            rc = private_copy(e, &c);
        weft_tensor_release(e);
        if (rc == 0) {
            weft_tensor_release(s->cols[k]);
            s->cols[k] = c;
            /* wrap negatives, then check the range */
            int64_t *v = weft_tensor_data_ptr(c), size = weft_tensor_sizes(self)[k];
            for (int64_t j = 0; j < weft_tensor_numel(c); j++)
                if (v[j] < 0 && v[j] >= -size)
                    v[j] += size;
            rc = cpu__check_indices(op, v, weft_tensor_numel(c), k, size);
        }
    }
    if (rc < 0)
        index_set_free(s);
    return rc;
}

/* target[idx_0[b], ..., idx_{K-1}[b], ...] = values[b, ...] (or +=), in
 * the broadcast order of b, so duplicate indices accumulate in full.
 * values are laid out as torch lays out the indexed result: the first
 * `lead` whole dims, then the broadcast index shape b, then the other whole
 * dims (lead 0: b first). */
static int index_put_into(const char *op, weft_tensor *target, weft_tensor *const *indices,
                          int n, const weft_tensor *values_arg, bool accumulate, int lead)
{
    weft_dtype dtype = weft_tensor_dtype(target);
    char a[128], b[128];
    int rc = cpu__check_cpu(op, "values", values_arg);
    if (rc < 0)
        return rc;
    if (weft_tensor_dtype(values_arg) != dtype)
        return weft_set_error(WEFT_EDTYPE, "%s: values (%s) must have self's dtype (%s)", op,
                              weft_dtype_name(weft_tensor_dtype(values_arg)), weft_dtype_name(dtype));
    if (n == 0)
        return weft_set_error(WEFT_EINVAL, "%s: indices is empty", op);
    index_set s;
    if ((rc = gather_indices(&s, op, target, indices, n)) < 0)
        return rc;
    const int ndim = weft_tensor_ndim(target), K = s.count;
    int64_t full[2 * WEFT_MAX_DIMS];
    int fn = s.ndim + ndim - K;
    const int64_t *whole = weft_tensor_sizes(target) + K;
    if (lead > ndim - K)
        lead = ndim - K;
    memcpy(full, whole, (size_t)lead * sizeof(int64_t));
    memcpy(full + lead, s.shape, (size_t)s.ndim * sizeof(int64_t));
    memcpy(full + lead + s.ndim, whole + lead, (size_t)(ndim - K - lead) * sizeof(int64_t));
    weft_tensor *expanded = NULL, *values = NULL;
    if (fn > WEFT_MAX_DIMS)
        rc = weft_set_error(WEFT_ESHAPE, "%s: the indexed result has too many dims", op);
    if (rc == 0 && weft_expand(&expanded, values_arg, full, fn) < 0)
        rc = weft_set_error(WEFT_ESHAPE, "%s: shape mismatch: value tensor of shape %s cannot be "
                            "broadcast to indexing result of shape %s", op,
                            weft_format_shape(a, sizeof a, weft_tensor_sizes(values_arg),
                                           weft_tensor_ndim(values_arg)),
                            weft_format_shape(b, sizeof b, full, fn));
    if (rc == 0 && lead > 0) {
        /* b first, as the loop below reads values */
        int64_t order[2 * WEFT_MAX_DIMS];
        int o = 0;
        for (int d = 0; d < s.ndim; d++)
            order[o++] = lead + d;
        for (int d = 0; d < lead; d++)
            order[o++] = d;
        for (int d = lead + s.ndim; d < fn; d++)
            order[o++] = d;
        weft_tensor *moved = NULL;
        rc = weft_permute(&moved, expanded, order, fn);
        weft_tensor_release(expanded);
        expanded = moved;
    }
    if (rc == 0) /* a copy: values may share memory with the target */
        rc = private_copy(expanded, &values);
    if (rc == 0 && weft_tensor_numel(values) > 0) {
        const int64_t es = (int64_t)weft_dtype_size(dtype);
        const int64_t *ts = weft_tensor_strides(target);
        int64_t positions = 1, slice = 1;
        for (int d = 0; d < s.ndim; d++)
            positions *= s.shape[d];
        for (int d = K; d < ndim; d++)
            slice *= weft_tensor_sizes(target)[d];
        const int64_t *cols[WEFT_MAX_DIMS];
        for (int k = 0; k < K; k++)
            cols[k] = weft_tensor_data_ptr(s.cols[k]);
        char *to = weft_tensor_data_ptr(target);
        const char *from = weft_tensor_data_ptr(values);
        add_fn add = add_fns[dtype];
        for (int64_t p = 0; p < positions; p++) {
            int64_t base = 0;
            for (int k = 0; k < K; k++)
                base += cols[k][p] * ts[k];
            cpu_walk w;
            cpu_walk_init(&w, weft_tensor_sizes(target) + K, ndim - K, 1);
            for (int d = K; d < ndim; d++)
                w.strides[0][d - K] = ts[d];
            for (int64_t q = 0; q < slice; q++, cpu_walk_next(&w)) {
                char *t = to + (base + w.offset[0]) * es;
                const char *v = from + (p * slice + q) * es;
                if (accumulate)
                    add(t, v);
                else
                    memcpy(t, v, (size_t)es);
            }
        }
    }
    weft_tensor_release(expanded);
    weft_tensor_release(values);
    index_set_free(&s);
    return rc;
}

/* index_put with None entries (NULL in the list): a None, and every dim
 * after the last entry, is a whole dim.  The indexed dims are moved first
 * in a permuted view of the target, so the index tensors apply to its
 * leading dims as index_put_into expects; `lead` keeps torch's layout of
 * values: when the index tensors are adjacent in the list, the broadcast
 * index shape stands where the indexed dims were (after the whole dims
 * before them), and when a None separates them it comes first. */
static int index_put_sliced(const char *op, weft_tensor *target, weft_tensor *const *indices,
                            int n, const weft_tensor *values, bool accumulate)
{
    const int ndim = weft_tensor_ndim(target);
    int64_t order[WEFT_MAX_DIMS];
    weft_tensor *present[WEFT_MAX_DIMS];
    bool whole[WEFT_MAX_DIMS] = {false};
    int dim = 0, k = 0, first = -1, last = -1, lead = 0;
    if (n == 0)
        return weft_set_error(WEFT_EINVAL, "%s: indices is empty", op);
    for (int i = 0; i < n; i++) {
        int m = !indices[i] ? 1
                : weft_tensor_dtype(indices[i]) == WEFT_BOOL || weft_tensor_dtype(indices[i]) == WEFT_UINT8
                    ? weft_tensor_ndim(indices[i])
                    : 1;
        if (dim + m > ndim || k == WEFT_MAX_DIMS)
            return weft_set_error(WEFT_ESHAPE, "%s: too many indices for a tensor of dimension %d",
                                  op, ndim);
        if (!indices[i]) {
            whole[dim++] = true;
            continue;
        }
        if (first < 0) {
            first = i;
            lead = dim; /* the whole dims before the first index tensor */
        }
        last = i;
        present[k++] = indices[i];
        dim += m;
    }
    if (k == 0)
        return weft_set_error(WEFT_EINVAL, "%s: indices holds only None: at least one index "
                              "tensor is needed", op);
    for (int i = first; i <= last; i++)
        if (!indices[i]) {
            lead = 0; /* not adjacent: the index shape goes first */
            break;
        }
    int o = 0;
    for (int d = 0; d < ndim; d++)
        if (d < dim && !whole[d])
            order[o++] = d;
    for (int d = 0; d < ndim; d++)
        if (d >= dim || whole[d])
            order[o++] = d;
    weft_tensor *view = NULL;
    int rc = weft_permute(&view, target, order, ndim);
    if (rc == 0)
        rc = index_put_into(op, view, present, k, values, accumulate, lead);
    weft_tensor_release(view);
    return rc;
}

/* index_put(self, indices, values, accumulate) and index_put_ (ctx) */
static int index_put_kernel(weft_call *call, void *ctx)
{
    const bool inplace = ctx != NULL;
    const char *op = weft_op_name(call->op);
    weft_tensor *self = call->args[0].u.tensor, *target = NULL;
    int rc = cpu__check_cpu(op, "self", self);
    if (rc == 0)
        rc = inplace ? (target = weft_tensor_retain(self), 0) : private_copy(self, &target);
    if (rc == 0)
        rc = index_put_sliced(op, target, call->args[1].u.tensors, call->args[1].len,
                              call->args[2].u.tensor, call->args[3].u.b);
    if (rc == 0 && !inplace)
        cpu__set_ret(call, 0, target);
    else
        weft_tensor_release(target);
    return rc;
}

static const int inplace_marker;
static const weft_kernel_entry index_write_entries[] = {
    {"scatter_reduce", scatter_reduce_kernel, NULL},
    {"scatter_reduce_", scatter_reduce_kernel, &inplace_marker},
    {"index_put", index_put_kernel, NULL},
    {"index_put_", index_put_kernel, &inplace_marker},
};

int cpu__register_index_write(weft_registrar *reg)
{
    return weft_register_kernel_table(reg, WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, index_write_entries,
                               sizeof index_write_entries / sizeof *index_write_entries);
}
