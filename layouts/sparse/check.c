/* layouts/sparse/check.c — the constructors' checks of a COO or CSR
 * pattern.  Compiled into libweft-sparse.so and, as its own hidden copy,
 * into libweft-sparse-cuda.so (which validates CUDA components from one
 * host copy of their indices), so both plugins give the same messages.
 * Devices are the callers' business: the index tensors are read on the
 * host when check_invariants is set, so they must be CPU tensors then.
 * Depends on the public API only. */
#include "sparse.h"

static int check_common(const char *op, const weft_tensor *values, const int64_t *sizes, int ndim)
{
    weft_dtype dt = weft_tensor_dtype(values);
    if (dt != WEFT_FLOAT32 && dt != WEFT_FLOAT64 && dt != WEFT_INT32 && dt != WEFT_INT64)
        return weft_set_error(WEFT_EDTYPE,
                              "%s: sparse values must be float32, float64, int32 or int64, got %s",
                              op, weft_dtype_name(dt));
    for (int d = 0; d < ndim; d++)
        if (sizes[d] < 0)
            return weft_set_error(WEFT_ESHAPE, "%s: size[%d] is %lld: negative", op, d,
                                  (long long)sizes[d]);
    return 0;
}

int sp__require_coalesced(const char *op, const weft_tensor *t)
{
    if (!sp__is_coo(t) || sp__coo_of(t)->coalesced)
        return 0;
    return weft_set_error(WEFT_EINVAL,
                          "%s: the tensor is not coalesced (a position may appear more than "
                          "once); call coalesce() first, or _%s() for the raw array",
                          op, op);
}

int sp__coo_check(const char *op, const weft_tensor *indices, const weft_tensor *values,
                  const int64_t *sizes, int ndim, bool check_invariants)
{
    int rc = check_common(op, values, sizes, ndim);
    if (rc < 0)
        return rc;
    if (weft_tensor_dtype(indices) != WEFT_INT64)
        return weft_set_error(WEFT_EDTYPE, "%s: indices must be int64, got %s", op,
                              weft_dtype_name(weft_tensor_dtype(indices)));
    if (weft_tensor_ndim(indices) != 2)
        return weft_set_error(WEFT_ESHAPE, "%s: indices must be 2-D [sparse_dim, nnz], got %d-D",
                              op, weft_tensor_ndim(indices));
    if (weft_tensor_ndim(values) < 1)
        return weft_set_error(WEFT_ESHAPE, "%s: values must be at least 1-D [nnz, ...], got 0-D",
                              op);
    int64_t sparse_dim = weft_tensor_size(indices, 0), nnz = weft_tensor_size(indices, 1);
    int dense_dim = weft_tensor_ndim(values) - 1;
    if (weft_tensor_size(values, 0) != nnz)
        return weft_set_error(WEFT_ESHAPE,
                              "%s: nnz mismatch: indices hold %lld entries, values %lld", op,
                              (long long)nnz, (long long)weft_tensor_size(values, 0));
    if (sparse_dim < 1 || sparse_dim + dense_dim != ndim)
        return weft_set_error(WEFT_ESHAPE,
                              "%s: size has %d dimensions, but indices give %lld sparse and "
                              "values %d dense ones",
                              op, ndim, (long long)sparse_dim, dense_dim);
    for (int d = 0; d < dense_dim; d++)
        if (weft_tensor_size(values, d + 1) != sizes[sparse_dim + d])
            return weft_set_error(WEFT_ESHAPE,
                                  "%s: values' dense dimension %d has %lld entries, size[%lld] "
                                  "is %lld",
                                  op, d + 1, (long long)weft_tensor_size(values, d + 1),
                                  (long long)(sparse_dim + d), (long long)sizes[sparse_dim + d]);
    if (!check_invariants)
        return 0;
    weft_tensor *c;
    rc = weft_contiguous(&c, indices);
    if (rc < 0)
        return rc;
    const int64_t *ix = weft_tensor_data_ptr(c);
    for (int64_t d = 0; d < sparse_dim && rc == 0; d++)
        for (int64_t k = 0; k < nnz; k++) {
            int64_t v = ix[d * nnz + k];
            if (v < 0 || v >= sizes[d]) {
                rc = weft_set_error(WEFT_ERANGE,
                                    "%s: indices[%lld][%lld] is %lld, %s for size %lld of "
                                    "dimension %lld",
                                    op, (long long)d, (long long)k, (long long)v,
                                    v < 0 ? "negative" : "out of range", (long long)sizes[d],
                                    (long long)d);
                break;
            }
        }
    weft_tensor_release(c);
    return rc;
}

static int64_t idx_at(const void *p, bool i32, int64_t k)
{
    return i32 ? ((const int32_t *)p)[k] : ((const int64_t *)p)[k];
}

int sp__csr_check(const char *op, const weft_tensor *crow, const weft_tensor *col,
                  const weft_tensor *values, const int64_t *sizes, int ndim,
                  bool check_invariants)
{
    int rc = check_common(op, values, sizes, ndim);
    if (rc < 0)
        return rc;
    weft_dtype it = weft_tensor_dtype(crow);
    if ((it != WEFT_INT32 && it != WEFT_INT64) || weft_tensor_dtype(col) != it)
        return weft_set_error(WEFT_EDTYPE,
                              "%s: crow_indices and col_indices must both be int32 or both "
                              "int64, got %s and %s",
                              op, weft_dtype_name(it), weft_dtype_name(weft_tensor_dtype(col)));
    if (ndim != 2 && ndim != 3)
        return weft_set_error(WEFT_ESHAPE,
                              "%s: size must have 2 dimensions (or 3 with a batch), got %d", op,
                              ndim);
    int b = ndim - 2;
    if (weft_tensor_ndim(crow) != b + 1 || weft_tensor_ndim(col) != b + 1 ||
        weft_tensor_ndim(values) != b + 1)
        return weft_set_error(WEFT_ESHAPE,
                              "%s: crow_indices, col_indices and values must be %d-D for a "
                              "%d-D size, got %d-D, %d-D and %d-D",
                              op, b + 1, ndim, weft_tensor_ndim(crow), weft_tensor_ndim(col),
                              weft_tensor_ndim(values));
    if (b && (weft_tensor_size(crow, 0) != sizes[0] || weft_tensor_size(col, 0) != sizes[0] ||
              weft_tensor_size(values, 0) != sizes[0]))
        return weft_set_error(WEFT_ESHAPE, "%s: the batch dimension must have %lld entries "
                                           "everywhere",
                              op, (long long)sizes[0]);
    int64_t rows = sizes[b], cols = sizes[b + 1];
    int64_t nnz = weft_tensor_size(col, -1);
    if (weft_tensor_size(crow, -1) != rows + 1)
        return weft_set_error(WEFT_ESHAPE, "%s: crow_indices must have rows + 1 = %lld entries, "
                                           "got %lld",
                              op, (long long)(rows + 1), (long long)weft_tensor_size(crow, -1));
    if (weft_tensor_size(values, -1) != nnz)
        return weft_set_error(WEFT_ESHAPE,
                              "%s: nnz mismatch: col_indices hold %lld entries, values %lld", op,
                              (long long)nnz, (long long)weft_tensor_size(values, -1));
    if (!check_invariants)
        return 0;
    weft_tensor *cr, *cc;
    if ((rc = weft_contiguous(&cr, crow)) < 0)
        return rc;
    if ((rc = weft_contiguous(&cc, col)) < 0) {
        weft_tensor_release(cr);
        return rc;
    }
    bool i32 = it == WEFT_INT32;
    const void *pr = weft_tensor_data_ptr(cr), *pc = weft_tensor_data_ptr(cc);
    int64_t nb = b ? sizes[0] : 1;
    for (int64_t bi = 0; bi < nb && rc == 0; bi++) {
        int64_t r0 = bi * (rows + 1), c0 = bi * nnz;
        if (idx_at(pr, i32, r0) != 0 || idx_at(pr, i32, r0 + rows) != nnz) {
            rc = weft_set_error(WEFT_EINVAL,
                                "%s: crow_indices must start at 0 and end at nnz = %lld, got %lld "
                                "and %lld (batch %lld)",
                                op, (long long)nnz, (long long)idx_at(pr, i32, r0),
                                (long long)idx_at(pr, i32, r0 + rows), (long long)bi);
            break;
        }
        /* monotone first: with both ends fixed, every row then lies in
         * [0, nnz] and the column scan below stays inside col */
        for (int64_t r = 0; r < rows; r++) {
            int64_t k0 = idx_at(pr, i32, r0 + r), k1 = idx_at(pr, i32, r0 + r + 1);
            if (k1 < k0) {
                rc = weft_set_error(WEFT_EINVAL,
                                    "%s: crow_indices must not decrease, but row %lld goes from "
                                    "%lld to %lld (batch %lld)",
                                    op, (long long)r, (long long)k0, (long long)k1, (long long)bi);
                break;
            }
        }
        for (int64_t r = 0; r < rows && rc == 0; r++) {
            int64_t k0 = idx_at(pr, i32, r0 + r), k1 = idx_at(pr, i32, r0 + r + 1);
            for (int64_t k = k0; k < k1; k++) {
                int64_t c = idx_at(pc, i32, c0 + k);
                if (c < 0 || c >= cols) {
                    rc = weft_set_error(WEFT_ERANGE,
                                        "%s: col_indices[%lld] is %lld, %s for %lld columns "
                                        "(batch %lld)",
                                        op, (long long)k, (long long)c,
                                        c < 0 ? "negative" : "out of range", (long long)cols,
                                        (long long)bi);
                    break;
                }
                if (k > k0 && c <= idx_at(pc, i32, c0 + k - 1)) {
                    rc = weft_set_error(WEFT_EINVAL,
                                        "%s: col_indices of row %lld must be sorted and distinct, "
                                        "but entry %lld (%lld) follows %lld (batch %lld)",
                                        op, (long long)r, (long long)k, (long long)c,
                                        (long long)idx_at(pc, i32, c0 + k - 1), (long long)bi);
                    break;
                }
            }
        }
    }
    weft_tensor_release(cr);
    weft_tensor_release(cc);
    return rc;
}

