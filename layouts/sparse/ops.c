/* layouts/sparse/ops.c — the operators on sparse tensors: products with a
 * dense operand (mm, addmm, mv, matmul), CSR x CSR, add/sub, products by a
 * scalar (mul, in place, div, pow) and by another sparse or a strided
 * tensor, value-wise unary operators, sum,
 * clone, cat, index_select, copy_ and the view-like transpose, narrow and
 * select.  An operator not registered here fails in the dispatcher with
 * WEFT_ENOKERNEL naming the operator and the layout (no strided fallback:
 * densifying a sparse matrix behind the caller's back is the out-of-memory
 * the layout exists to avoid). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sparse.h"

static bool is_sparse(const weft_tensor *t)
{
    return sp__is_coo(t) || sp__is_csr(t);
}

static bool is_strided(const weft_tensor *t)
{
    return t && weft_tensor_layout(t) == WEFT_LAYOUT_STRIDED;
}

/* entry e's row-major position over the first sd dims of sizes (ix: the
 * COO indices, sd rows of nnz) */
static inline int64_t entry_pos(const int64_t *ix, int64_t nnz, int64_t e, const int64_t *sizes,
                                int sd)
{
    int64_t at = 0;
    for (int d = 0; d < sd; d++)
        at = at * sizes[d] + ix[d * nnz + e];
    return at;
}

static int64_t prod(const int64_t *s, int n)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        p *= s[i];
    return p;
}

static int densify(weft_tensor **out, const weft_tensor *t)
{
    if (sp__is_coo(t))
        return sp__coo_to_dense(out, t);
    if (sp__is_csr(t))
        return sp__csr_to_dense(out, t);
    *out = weft_tensor_retain(t);
    return 0;
}

/* a COO view of any sparse tensor (CSR converts; COO is retained) */
static int as_coo(weft_tensor **out, const weft_tensor *t)
{
    if (sp__is_coo(t)) {
        *out = weft_tensor_retain(t);
        return 0;
    }
    return sp__csr_to_coo(out, t);
}

/* ---------------------------------------------------------- sparse x dense */

/* The rows of a 2-D sparse matrix as CSR arrays: CSR's own, or a COO's
 * entries bucketed by row (a stable counting sort: duplicates stay and add
 * up in the product, no coalesce needed). */
typedef struct rows_view {
    const void *crow, *col, *val;
    bool idx32;
    int64_t *owned_crow, *owned_col; /* freed by rows_done */
    char *owned_val;
} rows_view;

static void rows_done(rows_view *v)
{
    free(v->owned_crow);
    free(v->owned_col);
    free(v->owned_val);
}

static int rows_of(rows_view *v, const weft_tensor *a, const char *op)
{
    memset(v, 0, sizeof *v);
    int vrc = sp__require_valid(a, op);
    if (vrc < 0)
        return vrc;
    if (sp__is_csr(a)) {
        const sp__csr *p = sp__csr_of(a);
        if (p->batch)
            return weft_set_error(WEFT_ENOTSUP, "%s: batched CSR operands are not supported",
                                  op);
        v->crow = weft_tensor_data_ptr(p->crow);
        v->col = weft_tensor_data_ptr(p->col);
        v->val = weft_tensor_data_ptr(p->values);
        v->idx32 = weft_tensor_dtype(p->crow) == WEFT_INT32;
        return 0;
    }
    const sp__coo *p = sp__coo_of(a);
    if (p->sparse_dim != 2 || p->dense_dim != 0)
        return weft_set_error(WEFT_ENOTSUP,
                              "%s: a COO operand needs 2 sparse and no dense dimensions, got %d "
                              "and %d",
                              op, p->sparse_dim, p->dense_dim);
    int64_t rows = weft_tensor_size(a, 0), nnz = p->nnz;
    size_t es = weft_dtype_size(weft_tensor_dtype(a));
    const int64_t *ix = weft_tensor_data_ptr(p->indices);
    v->owned_crow = calloc((size_t)rows + 1, sizeof(int64_t));
    if (!v->owned_crow)
        return weft_set_error(WEFT_ENOMEM, "%s: out of memory", op);
    for (int64_t e = 0; e < nnz; e++)
        v->owned_crow[ix[e] + 1]++;
    for (int64_t r = 0; r < rows; r++)
        v->owned_crow[r + 1] += v->owned_crow[r];
    v->crow = v->owned_crow;
    if (p->coalesced) { /* already in row order */
        v->col = ix + nnz;
        v->val = weft_tensor_data_ptr(p->values);
        return 0;
    }
    v->owned_col = malloc((size_t)(nnz ? nnz : 1) * sizeof(int64_t));
    v->owned_val = malloc((size_t)(nnz ? nnz : 1) * es);
    int64_t *next = malloc((size_t)(rows ? rows : 1) * sizeof(int64_t));
    if (!v->owned_col || !v->owned_val || !next) {
        free(next);
        rows_done(v);
        return weft_set_error(WEFT_ENOMEM, "%s: out of memory", op);
    }
    memcpy(next, v->owned_crow, (size_t)rows * sizeof(int64_t));
    const char *vals = weft_tensor_data_ptr(p->values);
    for (int64_t e = 0; e < nnz; e++) {
        int64_t at = next[ix[e]]++;
        v->owned_col[at] = ix[nnz + e];
        memcpy(v->owned_val + (size_t)at * es, vals + (size_t)e * es, es);
    }
    free(next);
    v->col = v->owned_col;
    v->val = v->owned_val;
    return 0;
}

typedef struct spmm_job {
    const sp__kernels *k;
    rows_view *v;
    const void *b;
    int64_t rows, n;
    void *out;
} spmm_job;

static void spmm_chunk(int c, int nchunks, void *ctx)
{
    spmm_job *j = ctx;
    int64_t r0, r1;
    sp__chunk_range(j->rows, c, nchunks, &r0, &r1);
    j->k->spmm_rows(r0, r1, j->v->crow, j->v->col, j->v->idx32, j->v->val, j->b, j->n, j->out);
}

int sp__spmm(weft_tensor **out, const weft_tensor *a, const weft_tensor *b, const char *op)
{
    if (!is_sparse(a) || !is_strided(b))
        return weft_set_error(WEFT_ENOTSUP,
                              "%s: takes a sparse matrix times a strided one, got layouts '%s' "
                              "and '%s'",
                              op, sp__layout_name(a), sp__layout_name(b));
    int bd = weft_tensor_ndim(b);
    if (weft_tensor_ndim(a) != 2 || (bd != 1 && bd != 2))
        return weft_set_error(WEFT_ESHAPE, "%s: needs a 2-D sparse matrix and a %s, got %d-D and "
                                           "%d-D",
                              op, strcmp(op, "mv") ? "2-D matrix" : "1-D vector",
                              weft_tensor_ndim(a), bd);
    if (weft_tensor_dtype(a) != weft_tensor_dtype(b))
        return weft_set_error(WEFT_EDTYPE, "%s: dtypes differ: %s and %s", op,
                              weft_dtype_name(weft_tensor_dtype(a)),
                              weft_dtype_name(weft_tensor_dtype(b)));
    if (weft_tensor_device(b).type != WEFT_DEVICE_TYPE_CPU)
        return weft_set_error(WEFT_EDEVICE, "%s: the dense operand must be on the CPU", op);
    int64_t m = weft_tensor_size(a, 0), kk = weft_tensor_size(a, 1);
    if (weft_tensor_size(b, 0) != kk)
        return weft_set_error(WEFT_ESHAPE, "%s: shapes [%lld, %lld] and [%lld, ...] cannot be "
                                           "multiplied",
                              op, (long long)m, (long long)kk, (long long)weft_tensor_size(b, 0));
    const sp__kernels *k = sp__kernels_for(weft_tensor_dtype(a), op);
    if (!k)
        return WEFT_EDTYPE;
    int64_t n = bd == 2 ? weft_tensor_size(b, 1) : 1;
    rows_view v;
    int rc = rows_of(&v, a, op);
    if (rc < 0)
        return rc;
    weft_tensor *bc = NULL, *o = NULL;
    rc = weft_contiguous(&bc, b);
    if (rc == 0)
        rc = weft_empty(&o, bd == 2 ? (int64_t[]){m, n} : (int64_t[]){m}, bd,
                        weft_tensor_dtype(a), WEFT_DEVICE_CPU);
    if (rc == 0) {
        spmm_job j = {k, &v, weft_tensor_data_ptr(bc), m, n, weft_tensor_data_ptr(o)};
        /* about 64k multiply-adds per chunk before a thread pays off */
        int64_t per_row = (weft_tensor_nbytes(a) / (m ? m : 1) / 8 + 1) * n;
        sp__parallel(m, 65536 / (per_row ? per_row : 1) + 1, spmm_chunk, &j);
        *out = o;
        o = NULL;
    }
    rows_done(&v);
    weft_tensor_release(bc);
    weft_tensor_release(o);
    return rc;
}

/* CSR x CSR -> CSR (Gustavson: one dense accumulator row per chunk, the
 * columns of each output row collected and sorted) */
static int spgemm(weft_tensor **out, const weft_tensor *a, const weft_tensor *b)
{
    const char *op = "mm";
    rows_view va, vb;
    if (weft_tensor_ndim(a) != 2 || weft_tensor_ndim(b) != 2)
        return weft_set_error(WEFT_ESHAPE, "mm: sparse x sparse needs 2-D matrices");
    if (weft_tensor_size(a, 1) != weft_tensor_size(b, 0))
        return weft_set_error(WEFT_ESHAPE, "mm: shapes [%lld, %lld] and [%lld, %lld] cannot be "
                                           "multiplied",
                              (long long)weft_tensor_size(a, 0), (long long)weft_tensor_size(a, 1),
                              (long long)weft_tensor_size(b, 0), (long long)weft_tensor_size(b, 1));
    if (weft_tensor_dtype(a) != weft_tensor_dtype(b))
        return weft_set_error(WEFT_EDTYPE, "mm: dtypes differ: %s and %s",
                              weft_dtype_name(weft_tensor_dtype(a)),
                              weft_dtype_name(weft_tensor_dtype(b)));
    int rc = rows_of(&va, a, op);
    if (rc < 0)
        return rc;
    if ((rc = rows_of(&vb, b, op)) < 0) {
        rows_done(&va);
        return rc;
    }
    weft_dtype dt = weft_tensor_dtype(a);
    /* the accumulator row is double: float values only (torch 1.13 has no
     * integer sparse x sparse product either) */
    if (dt != WEFT_FLOAT32 && dt != WEFT_FLOAT64) {
        rows_done(&va);
        rows_done(&vb);
        return weft_set_error(WEFT_EDTYPE, "mm: CSR x CSR takes float32 or float64 values, got %s",
                              weft_dtype_name(dt));
    }
    bool f32 = dt == WEFT_FLOAT32;
    int64_t m = weft_tensor_size(a, 0), n = weft_tensor_size(b, 1);
    double *acc = calloc((size_t)(n ? n : 1), sizeof *acc);
    int64_t *mark = malloc((size_t)(n ? n : 1) * sizeof *mark);
    int64_t *crow = calloc((size_t)m + 1, sizeof *crow);
    int64_t cap = 16, used = 0;
    int64_t *cols = malloc((size_t)cap * sizeof *cols);
    double *vals = malloc((size_t)cap * sizeof *vals);
    weft_tensor *tc = NULL, *tl = NULL, *tv = NULL;
    if (!acc || !mark || !crow || !cols || !vals) {
        rc = weft_set_error(WEFT_ENOMEM, "mm: out of memory");
        goto done;
    }
    for (int64_t j = 0; j < n; j++)
        mark[j] = -1;
    for (int64_t r = 0; r < m; r++) {
        int64_t row_start = used;
        int64_t a0 = va.idx32 ? ((const int32_t *)va.crow)[r] : ((const int64_t *)va.crow)[r];
        int64_t a1 = va.idx32 ? ((const int32_t *)va.crow)[r + 1]
                              : ((const int64_t *)va.crow)[r + 1];
        for (int64_t ka = a0; ka < a1; ka++) {
            int64_t c = va.idx32 ? ((const int32_t *)va.col)[ka] : ((const int64_t *)va.col)[ka];
            double x = f32 ? ((const float *)va.val)[ka] : ((const double *)va.val)[ka];
            int64_t b0 = vb.idx32 ? ((const int32_t *)vb.crow)[c] : ((const int64_t *)vb.crow)[c];
            int64_t b1 = vb.idx32 ? ((const int32_t *)vb.crow)[c + 1]
                                  : ((const int64_t *)vb.crow)[c + 1];
            for (int64_t kb = b0; kb < b1; kb++) {
                int64_t j = vb.idx32 ? ((const int32_t *)vb.col)[kb]
                                     : ((const int64_t *)vb.col)[kb];
                double y = f32 ? ((const float *)vb.val)[kb] : ((const double *)vb.val)[kb];
                if (mark[j] != r) {
                    mark[j] = r;
                    acc[j] = 0;
                    if (used == cap) {
                        cap *= 2;
                        int64_t *nc = realloc(cols, (size_t)cap * sizeof *cols);
                        if (nc)
                            cols = nc;
                        double *nv = nc ? realloc(vals, (size_t)cap * sizeof *vals) : NULL;
                        if (nv)
                            vals = nv;
                        if (!nc || !nv) {
                            rc = weft_set_error(WEFT_ENOMEM, "mm: out of memory");
                            goto done;
                        }
                    }
                    cols[used++] = j;
                }
                acc[j] += x * y;
            }
        }
        /* sorted columns: CSR's invariant (insertion sort: rows are short) */
        for (int64_t i = row_start + 1; i < used; i++)
            for (int64_t q = i; q > row_start && cols[q - 1] > cols[q]; q--) {
                int64_t t = cols[q];
                cols[q] = cols[q - 1];
                cols[q - 1] = t;
            }
        for (int64_t i = row_start; i < used; i++)
            vals[i] = acc[cols[i]];
        crow[r + 1] = used;
    }
    rc = weft_empty(&tc, (int64_t[]){m + 1}, 1, WEFT_INT64, WEFT_DEVICE_CPU);
    if (rc == 0)
        rc = weft_empty(&tl, (int64_t[]){used}, 1, WEFT_INT64, WEFT_DEVICE_CPU);
    if (rc == 0)
        rc = weft_empty(&tv, (int64_t[]){used}, 1, dt, WEFT_DEVICE_CPU);
    if (rc < 0)
        goto done;
    memcpy(weft_tensor_data_ptr(tc), crow, (size_t)(m + 1) * sizeof *crow);
    memcpy(weft_tensor_data_ptr(tl), cols, (size_t)used * sizeof *cols);
    for (int64_t i = 0; i < used; i++) {
        if (f32)
            ((float *)weft_tensor_data_ptr(tv))[i] = (float)vals[i];
        else
            ((double *)weft_tensor_data_ptr(tv))[i] = vals[i];
    }
    rc = sp__csr_wrap(out, (int64_t[]){m, n}, 2, tc, tl, tv);
    tc = tl = tv = NULL;
done:
    weft_tensor_release(tc);
    weft_tensor_release(tl);
    weft_tensor_release(tv);
    free(acc);
    free(mark);
    free(crow);
    free(cols);
    free(vals);
    rows_done(&va);
    rows_done(&vb);
    return rc;
}

/* mm's registration passes this as ctx; mv's passes NULL */
static const char matrices_only = 1;

static int mm_kernel(weft_call *call, void *ctx)
{
    const weft_tensor *a = weft_arg_tensor(call, 0), *b = weft_arg_tensor(call, 1);
    /* mv shares this kernel; mm takes matrices only (torch's sparse mm of a
     * vector is an error too, and weft's strided mm says this) */
    if (ctx == &matrices_only && (weft_tensor_ndim(a) != 2 || weft_tensor_ndim(b) != 2))
        return weft_set_error(WEFT_ESHAPE, "mm: %s must be a 2-D tensor, got %d dimensions",
                              weft_tensor_ndim(a) != 2 ? "mat1" : "mat2",
                              weft_tensor_ndim(a) != 2 ? weft_tensor_ndim(a) : weft_tensor_ndim(b));
    if (sp__needs_grad(call))
        return sp__product_autograd(call);
    weft_tensor *out;
    int rc;
    if (sp__is_csr(a) && sp__is_csr(b))
        rc = spgemm(&out, a, b);
    else
        rc = sp__spmm(&out, a, b, weft_op_name(call->op));
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

static int matmul_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    if (sp__needs_grad(call))
        return sp__product_autograd(call);
    const weft_tensor *a = weft_arg_tensor(call, 0), *b = weft_arg_tensor(call, 1);
    weft_tensor *out;
    int rc = sp__is_csr(a) && sp__is_csr(b) ? spgemm(&out, a, b) : sp__spmm(&out, a, b, "matmul");
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* addmm(self, mat1, mat2, beta, alpha) = beta * self + alpha * mat1 @ mat2,
 * mat1 sparse; beta = 0 ignores self (NaN in it included), as torch does */
static int addmm_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = weft_arg_tensor(call, 0), *m1 = weft_arg_tensor(call, 1),
                      *m2 = weft_arg_tensor(call, 2);
    /* self broadcasts to the product's [m, n] and never the other way (the
     * product was once broadcast up to a larger self) */
    if (weft_tensor_ndim(m1) == 2 && weft_tensor_ndim(m2) == 2) {
        const int64_t want[2] = {weft_tensor_size(m1, 0), weft_tensor_size(m2, 1)};
        int nd = weft_tensor_ndim(self);
        bool fits = nd <= 2;
        for (int i = 0; fits && i < nd; i++) {
            int64_t have = weft_tensor_size(self, i), need = want[2 - nd + i];
            fits = have == 1 || have == need;
        }
        if (!fits) {
            char shape[128] = "[";
            size_t len = 1;
            for (int i = 0; i < nd && len < sizeof shape; i++)
                len += (size_t)snprintf(shape + len, sizeof shape - len, "%s%lld", i ? ", " : "",
                                        (long long)weft_tensor_size(self, i));
            if (len < sizeof shape - 1)
                strcat(shape, "]");
            return weft_set_error(WEFT_ESHAPE, "addmm: self of shape %s cannot be broadcast to "
                                  "the product's [%lld, %lld]",
                                  shape, (long long)want[0], (long long)want[1]);
        }
    }
    if (sp__needs_grad(call))
        return sp__product_autograd(call);
    double beta = weft_arg_double(call, 3), alpha = weft_arg_double(call, 4);
    if (!is_strided(self))
        return weft_set_error(WEFT_ENOTSUP, "addmm: self must be strided, got layout '%s'",
                              sp__layout_name(self));
    weft_tensor *p, *s = NULL, *out;
    int rc = sp__spmm(&p, weft_arg_tensor(call, 1), weft_arg_tensor(call, 2), "addmm");
    if (rc < 0)
        return rc;
    if (beta == 0) {
        rc = weft_mul_scalar(&out, p, alpha);
    } else {
        rc = weft_mul_scalar(&s, self, beta);
        if (rc == 0)
            rc = weft_add_ex(&out, s, p, alpha);
    }
    if (rc == 0 && weft_tensor_ndim(out) != 2) {
        weft_tensor_release(out);
        rc = weft_set_error(WEFT_ESHAPE, "addmm: self does not broadcast to the product's shape");
    }
    weft_tensor_release(s);
    weft_tensor_release(p);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* ---------------------------------------------------------------- add/sub */

static bool same_shape(const weft_tensor *a, const weft_tensor *b)
{
    return weft_tensor_ndim(a) == weft_tensor_ndim(b) &&
           !memcmp(weft_tensor_sizes(a), weft_tensor_sizes(b),
                   (size_t)weft_tensor_ndim(a) * sizeof(int64_t));
}

/* a + alpha * b for two COO tensors of one shape and sparse_dim: the
 * entries side by side, uncoalesced, as torch's sparse add: O(nnz) and
 * nothing sorted, which is what gradient accumulation wants (whoever needs
 * the canonical form coalesces).  An empty operand costs nothing: the
 * other's index and value tensors are shared (no kernel of this plugin
 * writes them in place). */
static int coo_add(weft_tensor **out, const weft_tensor *a, const weft_tensor *b, double alpha,
                   const char *op)
{
    const sp__coo *p = sp__coo_of(a), *q = sp__coo_of(b);
    if (p->sparse_dim != q->sparse_dim)
        return weft_set_error(WEFT_ESHAPE, "%s: sparse_dim differs: %d and %d", op,
                              p->sparse_dim, q->sparse_dim);
    const int64_t *sizes = weft_tensor_sizes(a);
    int ndim = weft_tensor_ndim(a);
    weft_tensor *qv = NULL, *ix = NULL, *val = NULL;
    int rc = alpha == 1.0 ? (qv = weft_tensor_retain(q->values), 0)
                          : weft_mul_scalar(&qv, q->values, alpha);
    if (rc < 0)
        return rc;
    if (q->nnz == 0) {
        weft_tensor_release(qv);
        rc = sp__coo_wrap(out, sizes, ndim, weft_tensor_retain(p->indices),
                          weft_tensor_retain(p->values), p->sparse_dim, p->coalesced);
        if (rc == 0)
            sp__inherit_valid(*out, &a, 1);
        return rc;
    }
    if (p->nnz == 0) {
        rc = sp__coo_wrap(out, sizes, ndim, weft_tensor_retain(q->indices), qv, q->sparse_dim,
                          q->coalesced);
        if (rc == 0)
            sp__inherit_valid(*out, &b, 1);
        return rc;
    }
    rc = weft_cat(&ix, (weft_tensor *[]){p->indices, q->indices}, 2, 1);
    if (rc == 0)
        rc = weft_cat(&val, (weft_tensor *[]){p->values, qv}, 2, 0);
    weft_tensor_release(qv);
    if (rc < 0) {
        weft_tensor_release(ix);
        return rc;
    }
    rc = sp__coo_wrap(out, sizes, ndim, ix, val, p->sparse_dim, false);
    if (rc == 0)
        sp__inherit_valid(*out, (const weft_tensor *[]){a, b}, 2);
    return rc;
}

static int add_sub(weft_call *call, double sign)
{
    const char *op = weft_op_name(call->op);
    const weft_tensor *a = weft_arg_tensor(call, 0), *b = weft_arg_tensor(call, 1);
    double alpha = sign * weft_arg_double(call, 2);
    weft_tensor *out = NULL;
    int rc;
    if (is_sparse(a) && is_sparse(b)) {
        if (weft_tensor_layout(a) != weft_tensor_layout(b))
            return weft_set_error(WEFT_ENOTSUP, "%s: cannot mix layouts '%s' and '%s'", op,
                                  sp__layout_name(a), sp__layout_name(b));
        if (!same_shape(a, b))
            return weft_set_error(WEFT_ESHAPE, "%s: sparse operands must have the same shape",
                                  op);
        if (weft_tensor_dtype(a) != weft_tensor_dtype(b))
            return weft_set_error(WEFT_EDTYPE, "%s: dtypes differ: %s and %s", op,
                                  weft_dtype_name(weft_tensor_dtype(a)),
                                  weft_dtype_name(weft_tensor_dtype(b)));
        weft_tensor *ca = NULL, *cb = NULL, *s = NULL;
        rc = as_coo(&ca, a);
        if (rc == 0)
            rc = as_coo(&cb, b);
        if (rc == 0)
            rc = coo_add(&s, ca, cb, alpha, op);
        if (rc == 0 && sp__is_csr(a)) {
            rc = sp__coo_to_csr(&out, s);
            weft_tensor_release(s);
        } else if (rc == 0) {
            out = s;
        }
        weft_tensor_release(ca);
        weft_tensor_release(cb);
    } else if ((is_sparse(a) || is_strided(a)) && (is_sparse(b) || is_strided(b))) {
        /* sparse + dense -> dense, as torch */
        weft_tensor *da = NULL, *db = NULL;
        rc = densify(&da, a);
        if (rc == 0)
            rc = densify(&db, b);
        if (rc == 0)
            rc = weft_add_ex(&out, da, db, alpha);
        weft_tensor_release(da);
        weft_tensor_release(db);
    } else {
        return weft_set_error(WEFT_ENOTSUP, "%s: cannot mix layouts '%s' and '%s'", op,
                              sp__layout_name(a), sp__layout_name(b));
    }
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

static int add_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    return add_sub(call, 1.0);
}

static int sub_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    return add_sub(call, -1.0);
}

/* strided self += alpha * sparse other, in place and row by row: the
 * sparse entries are scattered into self, so a sparse gradient applied by
 * an optimizer (SGD's p.add_(grad, alpha=-lr)) never materialises a dense
 * tensor of the parameter's size.  One sparse dimension (an embedding's
 * gradient) goes to index_add_ along dim 0: on the CPU that kernel splits
 * the rows over the CPU plugin's thread pool, which this plugin cannot
 * reach otherwise; more sparse dimensions scatter one axpy per entry into
 * a contiguous self, or go to index_put_ with accumulate.  Every path adds
 * a row's entries in entry order, so duplicates add up deterministically. */
/* COO self += alpha * other (sparse, of self's shape, dtype and
 * sparse_dim): other's entries appended to self's, uncoalesced, as torch's
 * add_ of two sparse tensors.  self's payload takes the new index and value
 * tensors; an alias made before (detach) keeps the old ones, as torch's. */
static int coo_add_inplace(weft_tensor *self, const weft_tensor *other, double alpha)
{
    if (!same_shape(self, other))
        return weft_set_error(WEFT_ESHAPE, "add_: the sparse operands must have one shape");
    if (weft_tensor_dtype(self) != weft_tensor_dtype(other))
        return weft_set_error(WEFT_EDTYPE, "add_: dtypes differ: %s and %s",
                              weft_dtype_name(weft_tensor_dtype(self)),
                              weft_dtype_name(weft_tensor_dtype(other)));
    weft_tensor *co = NULL, *sum = NULL;
    int rc = as_coo(&co, other);
    if (rc == 0)
        rc = coo_add(&sum, self, co, alpha, "add_");
    weft_tensor_release(co);
    if (rc < 0)
        return rc;
    sp__coo *p = sp__coo_of(self), *q = sp__coo_of(sum);
    weft_tensor *ix = p->indices, *v = p->values;
    p->indices = q->indices;
    p->values = q->values;
    p->nnz = q->nnz;
    p->coalesced = q->coalesced;
    p->valid = q->valid;
    q->indices = ix; /* the old ones go with sum */
    q->values = v;
    weft_tensor_release(sum);
    return 0;
}

static int add_inplace_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor *self = weft_arg_tensor(call, 0);
    const weft_tensor *other = weft_arg_tensor(call, 1);
    double alpha = weft_arg_double(call, 2);
    if (sp__is_coo(self) && is_sparse(other))
        return coo_add_inplace(self, other, alpha);
    if (!is_strided(self) || !is_sparse(other))
        return weft_set_error(WEFT_ENOTSUP,
                              "add_: takes a strided or sparse_coo self and a sparse other, got "
                              "layouts '%s' and '%s'",
                              sp__layout_name(self), sp__layout_name(other));
    if (!same_shape(self, other))
        return weft_set_error(WEFT_ESHAPE, "add_: the sparse operand must have self's shape");
    weft_tensor *c = NULL, *v = NULL;
    int rc = sp__require_valid(other, "add_");
    if (rc == 0)
        rc = as_coo(&c, other);
    if (rc < 0)
        return rc;
    const sp__coo *p = sp__coo_of(c);
    const sp__kernels *k = NULL;
    if (p->sparse_dim == 1) {
        weft_tensor *row = NULL;
        rc = weft_select(&row, p->indices, 0, 0);
        if (rc == 0)
            rc = weft_index_add_ex_(self, 0, row, p->values, alpha);
        weft_tensor_release(row);
    } else if (weft_tensor_is_contiguous(self) && weft_tensor_dtype(self) == weft_tensor_dtype(c) &&
               weft_tensor_device(self).type == WEFT_DEVICE_TYPE_CPU &&
               (k = sp__kernels_for(weft_tensor_dtype(self), "add_"))) {
        /* one axpy per entry, in entry order */
        int64_t inner = prod(weft_tensor_sizes(self) + p->sparse_dim, p->dense_dim);
        size_t es = weft_dtype_size(weft_tensor_dtype(self));
        const int64_t *ix = weft_tensor_data_ptr(p->indices);
        const char *vals = weft_tensor_data_ptr(p->values);
        char *dst = weft_tensor_data_ptr(self);
        const int64_t *sizes = weft_tensor_sizes(self);
        const size_t row_bytes = (size_t)inner * es;
        for (int64_t e = 0; e < p->nnz; e++) {
            int64_t lin = entry_pos(ix, p->nnz, e, sizes, p->sparse_dim);
            k->axpy(inner, alpha, vals + (size_t)e * row_bytes, dst + (size_t)lin * row_bytes);
        }
    } else {
        weft_tensor *rows[WEFT_MAX_DIMS] = {NULL};
        rc = alpha == 1.0 ? (v = weft_tensor_retain(p->values), 0)
                          : weft_mul_scalar(&v, p->values, alpha);
        for (int d = 0; rc == 0 && d < p->sparse_dim; d++)
            rc = weft_select(&rows[d], p->indices, 0, d);
        if (rc == 0)
            rc = weft_index_put_(self, rows, p->sparse_dim, v, true);
        for (int d = 0; d < p->sparse_dim; d++)
            weft_tensor_release(rows[d]);
    }
    weft_tensor_release(v);
    weft_tensor_release(c);
    return rc;
}

/* ------------------------------------------------- value-wise operators */

/* a sparse tensor like t with new values (taken over); t's pattern is
 * shared (index tensors are never written in place by this plugin) */
static int with_values(weft_tensor **out, const weft_tensor *t, weft_tensor *values)
{
    int rc;
    if (sp__is_coo(t)) {
        const sp__coo *p = sp__coo_of(t);
        rc = sp__coo_wrap(out, weft_tensor_sizes(t), weft_tensor_ndim(t),
                          weft_tensor_retain(p->indices), values, p->sparse_dim, p->coalesced);
    } else {
        const sp__csr *p = sp__csr_of(t);
        rc = sp__csr_wrap(out, weft_tensor_sizes(t), weft_tensor_ndim(t),
                          weft_tensor_retain(p->crow), weft_tensor_retain(p->col), values);
    }
    if (rc == 0)
        sp__inherit_valid(*out, &t, 1);
    return rc;
}

static weft_tensor *values_of(const weft_tensor *t)
{
    return sp__is_coo(t) ? sp__coo_of(t)->values : sp__csr_of(t)->values;
}

typedef int (*unary_fn)(weft_tensor **out, const weft_tensor *self);

/* f(0) = 0 for every f registered here, so applying it to the values alone
 * is the whole operator, once duplicates are summed: only neg is linear
 * (neg(a) + neg(b) = neg(a + b)), so the others coalesce a COO first */
static int unary_kernel(weft_call *call, void *ctx)
{
    const weft_tensor *t = weft_arg_tensor(call, 0);
    unary_fn f = (unary_fn)ctx;
    weft_tensor *c = NULL, *v, *out;
    int rc = 0;
    if (sp__is_coo(t) && f != weft_neg)
        rc = sp__coalesce(&c, t);
    else
        c = weft_tensor_retain(t);
    if (rc < 0)
        return rc;
    rc = f(&v, values_of(c));
    if (rc == 0)
        rc = with_values(&out, c, v);
    weft_tensor_release(c);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* t's pattern with its values in dtype (a copy of them, as torch's to();
 * the pattern, and its being coalesced, shared) */
int sp__to_dtype(weft_tensor **out, const weft_tensor *t, weft_dtype dtype)
{
    *out = NULL;
    if (!is_sparse(t))
        return weft_set_error(WEFT_ENOTSUP, "sparse_to_dtype: not supported for layout '%s'",
                              sp__layout_name(t));
    /* a dtype the sparse kernels cannot hold is refused here, as the
     * constructors refuse it, not made into a tensor nothing can read */
    if (!sp__kernels_for(dtype, "sparse_to_dtype"))
        return WEFT_EDTYPE;
    weft_tensor *v = NULL;
    int rc = weft_to_dtype(&v, values_of(t), dtype);
    return rc < 0 ? rc : with_values(out, t, v);
}

static int to_dtype_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_value *d = &call->args[1];
    if (d->tag != WEFT_VALUE_DTYPE)
        return weft_set_error(WEFT_EINVAL, "sparse_to_dtype: a dtype is required");
    weft_tensor *out;
    int rc = sp__to_dtype(&out, weft_arg_tensor(call, 0), d->u.dtype);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* norm over every element (torch.norm of a sparse tensor; what
 * clip_grad_norm_ takes of each gradient): the norm of the coalesced
 * values, plus one zero when the tensor has implicit zeros and p < 0 (they
 * decide it then: 0 ** p is inf; for p >= 0 they add nothing).  Made of
 * operators autograd differentiates (coalesce, values, the strided norm),
 * so a tensor requiring grad gets its gradient: the core's formula leaves
 * a sparse operand's call to this kernel (layout_records). */
static int norm_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *t = weft_arg_tensor(call, 0);
    int nd = 0;
    if (!weft_arg_is_none(call, 2))
        weft_arg_ints(call, 2, &nd);
    if (nd > 0)
        return weft_set_error(WEFT_ENOTSUP,
                              "norm: over some dims is not supported for a %s tensor (over all "
                              "of them is); convert it with to_dense() first",
                              sp__layout_name(t));
    double p = weft_arg_is_none(call, 1) ? 2.0 : weft_arg_double(call, 1);
    bool keepdim = weft_arg_bool(call, 3);
    weft_tensor *c = NULL, *v = NULL, *flat = NULL, *zero = NULL, *all = NULL, *r = NULL,
                *out = NULL;
    int rc = sp__is_coo(t) ? sp__call_ints(&c, "coalesce", t, NULL, 0) : 0;
    if (rc == 0)
        rc = sp__call_ints(&v, "values", c ? c : t, NULL, 0);
    int64_t nnz = rc == 0 ? weft_tensor_numel(v) : 0;
    const weft_tensor *x = v;
    if (rc == 0 && p < 0 && nnz < weft_tensor_numel(t)) {
        rc = weft_reshape(&flat, v, (int64_t[]){-1}, 1);
        if (rc == 0)
            rc = weft_zeros(&zero, (int64_t[]){1}, 1, weft_tensor_dtype(v), weft_tensor_device(v));
        if (rc == 0)
            rc = weft_cat(&all, (weft_tensor *[]){flat, zero}, 2, 0);
        x = all;
    }
    if (rc == 0)
        rc = weft_arg_is_none(call, 4)
                 ? weft_norm(&r, x, &p, NULL, 0, false)
                 : weft_norm_ex(&r, x, &p, NULL, 0, false, call->args[4].u.dtype);
    if (rc == 0 && keepdim) {
        int64_t ones[WEFT_MAX_DIMS];
        for (int d = 0; d < weft_tensor_ndim(t); d++)
            ones[d] = 1;
        rc = weft_reshape(&out, r, ones, weft_tensor_ndim(t));
    } else if (rc == 0) {
        out = weft_tensor_retain(r);
    }
    weft_tensor *tmp[] = {c, v, flat, zero, all, r};
    sp__release_all(tmp, 6);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

typedef int (*scalar_fn)(weft_tensor **out, const weft_tensor *self, double k);

/* f(values, k) on t's pattern, as call's result */
static int values_by_scalar(weft_call *call, const weft_tensor *t, scalar_fn f, double k)
{
    weft_tensor *v, *out;
    int rc = f(&v, values_of(t), k);
    if (rc == 0)
        rc = with_values(&out, t, v);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

static int mul_scalar_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    return values_by_scalar(call, weft_arg_tensor(call, 0), weft_mul_scalar,
                            weft_arg_double(call, 1));
}

/* Division by a number: linear, so duplicates need no coalesce.  Not by
 * 0 or NaN: the implicit zeros would become NaN (0 / 0), which a sparse
 * result cannot hold; torch leaves them 0, a result that differs from the
 * dense division, so weft refuses it by name instead. */
static int div_scalar_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *t = weft_arg_tensor(call, 0);
    double k = weft_arg_double(call, 1);
    if (k == 0 || isnan(k))
        return weft_set_error(WEFT_EINVAL,
                              "div_scalar: dividing a %s tensor by %g would make its implicit "
                              "zeros NaN (0 / %g); convert it with to_dense() first",
                              sp__layout_name(t), k, k);
    return values_by_scalar(call, t, weft_div_scalar, k);
}

/* x ** e with e > 0 keeps 0 at 0, so it applies to the values once
 * duplicates are summed (it is not linear); e <= 0 or NaN would turn the
 * implicit zeros into 1, inf or NaN and is refused by name */
static int pow_scalar_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *t = weft_arg_tensor(call, 0);
    double e = weft_arg_double(call, 1);
    if (!(e > 0))
        return weft_set_error(WEFT_EINVAL,
                              "pow_scalar: an exponent of %g would change the implicit zeros of "
                              "a %s tensor (0 ** %g is not 0); convert it with to_dense() first",
                              e, sp__layout_name(t), e);
    weft_tensor *c = NULL;
    int rc = sp__is_coo(t) ? sp__coalesce(&c, t) : 0;
    if (rc < 0)
        return rc;
    rc = values_by_scalar(call, c ? c : t, weft_pow_scalar, e);
    weft_tensor_release(c);
    return rc;
}

/* self *= k in place: the values are scaled where they lie (shared with
 * any alias of self, as torch's values are) */
static int mul_scalar_inplace_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    return weft_mul_scalar_(values_of(weft_arg_tensor(call, 0)), weft_arg_double(call, 1));
}

/* sparse * dense of one shape and dtype: sparse, on the sparse operand's
 * pattern, each entry times the dense element at its position (linear in
 * the entries, so duplicates need no coalesce); torch's result too */
static int mul_dense(weft_tensor **out, const weft_tensor *a, const weft_tensor *b)
{
    if (!same_shape(a, b) || weft_tensor_dtype(a) != weft_tensor_dtype(b))
        return weft_set_error(WEFT_ESHAPE,
                              "mul: a sparse and a strided operand must have one shape and "
                              "dtype (no broadcasting)");
    weft_tensor *c = NULL, *lin = NULL, *flat = NULL, *picked = NULL, *v = NULL, *r = NULL;
    int rc = as_coo(&c, a);
    const sp__coo *p = rc == 0 ? sp__coo_of(c) : NULL;
    if (rc == 0) {
        /* the entries' row-major positions over the sparse dims */
        rc = weft_empty(&lin, (int64_t[]){p->nnz}, 1, WEFT_INT64, WEFT_DEVICE_CPU);
        if (rc == 0) {
            const int64_t *ix = weft_tensor_data_ptr(p->indices), *size = weft_tensor_sizes(a);
            int64_t *l = weft_tensor_data_ptr(lin);
            for (int64_t e = 0; e < p->nnz; e++)
                l[e] = entry_pos(ix, p->nnz, e, size, p->sparse_dim);
        }
    }
    if (rc == 0) {
        int64_t shape[WEFT_MAX_DIMS + 1];
        shape[0] = prod(weft_tensor_sizes(a), p->sparse_dim);
        for (int d = 0; d < p->dense_dim; d++)
            shape[d + 1] = weft_tensor_size(a, p->sparse_dim + d);
        rc = weft_reshape(&flat, b, shape, p->dense_dim + 1);
    }
    if (rc == 0)
        rc = weft_index_select(&picked, flat, 0, lin);
    if (rc == 0)
        rc = weft_mul(&v, p->values, picked);
    if (rc == 0)
        rc = with_values(&r, c, v);
    if (rc == 0 && sp__is_csr(a)) {
        rc = sp__coo_to_csr(out, r);
        weft_tensor_release(r);
    } else if (rc == 0) {
        *out = r;
    }
    weft_tensor *all[] = {c, lin, flat, picked};
    sp__release_all(all, 4);
    return rc;
}

/* sparse * sparse: the positions both hold (merge of two coalesced
 * COO entry lists); a 0-d strided operand is a scalar; a strided operand
 * of the sparse one's shape is mul_dense */
static int mul_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *a = weft_arg_tensor(call, 0), *b = weft_arg_tensor(call, 1);
    weft_tensor *out = NULL;
    int rc;
    if (is_strided(a) && weft_tensor_ndim(a) == 0) {
        const weft_tensor *t = a;
        a = b;
        b = t;
    }
    if (is_sparse(a) && is_strided(b) && weft_tensor_ndim(b) == 0) {
        double k;
        rc = weft_tensor_item(b, &k);
        return rc < 0 ? rc : values_by_scalar(call, a, weft_mul_scalar, k);
    }
    if (is_strided(a) && is_sparse(b)) {
        const weft_tensor *t = a;
        a = b;
        b = t;
    }
    if (is_sparse(a) && is_strided(b)) {
        rc = mul_dense(&out, a, b);
        return rc < 0 ? rc : weft_return_tensor(call, 0, out);
    }
    if (!is_sparse(a) || !is_sparse(b) || weft_tensor_layout(a) != weft_tensor_layout(b))
        return weft_set_error(WEFT_ENOTSUP,
                              "mul: takes two sparse tensors of one layout, a sparse and a "
                              "strided one, or a scalar, got "
                              "layouts '%s' and '%s'",
                              sp__layout_name(a), sp__layout_name(b));
    if (!same_shape(a, b) || weft_tensor_dtype(a) != weft_tensor_dtype(b))
        return weft_set_error(WEFT_ESHAPE, "mul: sparse operands must have one shape and dtype");
    weft_tensor *ca = NULL, *cb = NULL, *xa = NULL, *xb = NULL;
    rc = as_coo(&xa, a);
    if (rc == 0)
        rc = as_coo(&xb, b);
    if (rc == 0)
        rc = sp__coalesce(&ca, xa);
    if (rc == 0)
        rc = sp__coalesce(&cb, xb);
    weft_tensor_release(xa);
    weft_tensor_release(xb);
    const sp__coo *p = ca ? sp__coo_of(ca) : NULL, *q = cb ? sp__coo_of(cb) : NULL;
    if (rc == 0 && p->sparse_dim != q->sparse_dim)
        rc = weft_set_error(WEFT_ESHAPE, "mul: sparse_dim differs: %d and %d", p->sparse_dim,
                            q->sparse_dim);
    weft_tensor *ix = NULL, *val = NULL, *r = NULL;
    if (rc == 0) {
        const int64_t *pi = weft_tensor_data_ptr(p->indices), *qi = weft_tensor_data_ptr(q->indices);
        int sd = p->sparse_dim;
        int64_t inner = prod(weft_tensor_sizes(a) + sd, p->dense_dim);
        size_t es = weft_dtype_size(weft_tensor_dtype(a));
        int64_t cap = p->nnz < q->nnz ? p->nnz : q->nnz;
        int64_t vs[WEFT_MAX_DIMS + 1];
        vs[0] = cap;
        for (int d = 0; d < p->dense_dim; d++)
            vs[d + 1] = weft_tensor_size(a, sd + d);
        rc = weft_empty(&ix, (int64_t[]){sd, cap}, 2, WEFT_INT64, WEFT_DEVICE_CPU);
        if (rc == 0)
            rc = weft_empty(&val, vs, p->dense_dim + 1, weft_tensor_dtype(a), WEFT_DEVICE_CPU);
        if (rc == 0) {
            const sp__kernels *k = sp__kernels_for(weft_tensor_dtype(a), "mul");
            int64_t *oi = weft_tensor_data_ptr(ix), n = 0;
            char *ov = weft_tensor_data_ptr(val);
            const char *av = weft_tensor_data_ptr(p->values), *bv = weft_tensor_data_ptr(q->values);
            for (int64_t i = 0, j = 0; i < p->nnz && j < q->nnz;) {
                int c = 0;
                for (int s = 0; s < sd && !c; s++)
                    c = pi[s * p->nnz + i] < qi[s * q->nnz + j]   ? -1
                        : pi[s * p->nnz + i] > qi[s * q->nnz + j] ? 1
                                                                  : 0;
                if (c < 0) {
                    i++;
                } else if (c > 0) {
                    j++;
                } else {
                    for (int s = 0; s < sd; s++)
                        oi[s * cap + n] = pi[s * p->nnz + i];
                    memcpy(ov + (size_t)(n * inner) * es, av + (size_t)(i * inner) * es,
                           (size_t)inner * es);
                    k->mul(inner, bv + (size_t)(j * inner) * es, ov + (size_t)(n * inner) * es);
                    n++, i++, j++;
                }
            }
            /* keep the first n entries: narrow, then contiguous copies */
            weft_tensor *ni = NULL, *nv = NULL, *ci = NULL, *cv = NULL;
            rc = weft_narrow(&ni, ix, 1, 0, n);
            if (rc == 0)
                rc = weft_narrow(&nv, val, 0, 0, n);
            if (rc == 0)
                rc = weft_contiguous(&ci, ni);
            if (rc == 0)
                rc = weft_contiguous(&cv, nv);
            weft_tensor_release(ni);
            weft_tensor_release(nv);
            if (rc == 0) {
                rc = sp__coo_wrap(&r, weft_tensor_sizes(a), weft_tensor_ndim(a), ci, cv, sd, true);
                ci = cv = NULL;
            }
            weft_tensor_release(ci);
            weft_tensor_release(cv);
        }
    }
    weft_tensor_release(ix);
    weft_tensor_release(val);
    weft_tensor_release(ca);
    weft_tensor_release(cb);
    if (rc == 0 && sp__is_csr(a)) {
        rc = sp__coo_to_csr(&out, r);
        weft_tensor_release(r);
    } else {
        out = r;
    }
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* -------------------------------------------------------------------- sum */

/* sum over everything: a 0-d strided tensor; over some dimensions: a COO
 * tensor over the sparse dimensions that remain (as torch.sparse.sum), or
 * a strided one when none remains */
static int sum_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    if (sp__needs_grad(call)) /* records its node, then runs again below */
        return sp__sum_autograd(call);
    const weft_tensor *t = weft_arg_tensor(call, 0);
    /* keepdim (which torch 1.13 has no sparse kernel for): a summed sparse
     * dim stays as a sparse dim of size 1 (every index 0), a summed dense
     * dim as a values dim of size 1; all sparse dims summed give a strided
     * result, as without keepdim, shaped with the ones */
    bool keepdim = weft_arg_bool(call, 2);
    weft_dtype dt = weft_arg_is_none(call, 3) ? weft_tensor_dtype(t) : call->args[3].u.dtype;
    int ndim = weft_tensor_ndim(t);
    int nd = 0;
    const int64_t *dims = weft_arg_is_none(call, 1) ? NULL : weft_arg_ints(call, 1, &nd);
    bool drop[WEFT_MAX_DIMS] = {false};
    for (int i = 0; i < nd; i++) {
        int64_t d = dims[i] < 0 ? dims[i] + ndim : dims[i];
        if (d < 0 || d >= ndim)
            return weft_set_error(WEFT_ERANGE, "sum: dimension %lld out of range for %d-D",
                                  (long long)dims[i], ndim);
        if (drop[d]) /* as the strided sum and torch */
            return weft_set_error(WEFT_EINVAL, "sum: dim %lld appears multiple times in the "
                                  "list of dims", (long long)d);
        drop[d] = true;
    }
    if (!dims || nd == 0)
        for (int d = 0; d < ndim; d++)
            drop[d] = true;
    weft_tensor *c = NULL, *out = NULL;
    /* summing over some dimensions regroups entries by their indices */
    int rc = nd ? sp__require_valid(t, "sum") : 0;
    if (rc == 0)
        rc = as_coo(&c, t);
    if (rc < 0)
        return rc;
    const sp__coo *p = sp__coo_of(c);
    int sd = p->sparse_dim, keep_sparse = 0;
    /* values: sum over the dropped dense dims */
    int64_t vd[WEFT_MAX_DIMS];
    int nvd = 0;
    for (int d = sd; d < ndim; d++)
        if (drop[d])
            vd[nvd++] = d - sd + 1;
    for (int d = 0; d < sd; d++)
        keep_sparse += !drop[d];
    weft_tensor *v = NULL;
    if (nvd)
        rc = weft_sum_ex(&v, p->values, vd, nvd, keepdim, dt);
    else
        rc = weft_to_dtype(&v, p->values, dt);
    if (rc == 0 && keep_sparse == 0) {
        /* every sparse dim goes: the result is dense */
        rc = weft_sum_ex(&out, v, (int64_t[]){0}, 1, false, dt);
        if (rc == 0 && keepdim) {
            int64_t ks[WEFT_MAX_DIMS];
            for (int d = 0; d < ndim; d++)
                ks[d] = drop[d] ? 1 : weft_tensor_size(t, d);
            weft_tensor *r = NULL;
            rc = weft_reshape(&r, out, ks, ndim);
            weft_tensor_release(out);
            out = rc < 0 ? NULL : r;
        }
    } else if (rc == 0) {
        /* the kept sparse dims' index rows (with keepdim every row, a
         * summed dim's zeroed) regroup the entries; coalescing sums them */
        weft_tensor *ix = NULL, *vc = NULL, *sum = NULL;
        int64_t osz[WEFT_MAX_DIMS], nnz = p->nnz;
        int no = 0, k = keepdim ? sd : keep_sparse;
        for (int d = 0; d < ndim; d++)
            if (keepdim || !drop[d])
                osz[no++] = drop[d] ? 1 : weft_tensor_size(t, d);
        rc = weft_empty(&ix, (int64_t[]){k, nnz}, 2, WEFT_INT64, WEFT_DEVICE_CPU);
        if (rc == 0 && nnz) {
            const int64_t *src = weft_tensor_data_ptr(p->indices);
            int64_t *dst = weft_tensor_data_ptr(ix);
            for (int d = 0; d < sd; d++) {
                if (drop[d] && keepdim)
                    memset(dst, 0, (size_t)nnz * sizeof *dst);
                else if (!drop[d])
                    memcpy(dst, src + d * nnz, (size_t)nnz * sizeof *dst);
                dst += keepdim || !drop[d] ? nnz : 0;
            }
        }
        if (rc == 0)
            rc = weft_contiguous(&vc, v);
        if (rc == 0) {
            rc = sp__coo_wrap(&sum, osz, no, ix, vc, k, false);
            ix = vc = NULL;
        }
        if (rc == 0)
            rc = sp__coalesce(&out, sum);
        weft_tensor_release(sum);
        weft_tensor_release(ix);
        weft_tensor_release(vc);
    }
    weft_tensor_release(v);
    weft_tensor_release(c);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* ------------------------------------------------------ clone and copy_ */

static int clone_sparse(weft_tensor **out, const weft_tensor *t)
{
    weft_tensor *a = NULL, *b = NULL, *v = NULL;
    if (sp__is_coo(t)) {
        const sp__coo *p = sp__coo_of(t);
        int rc = sp__copy(&a, p->indices);
        if (rc == 0)
            rc = sp__copy(&v, p->values);
        if (rc < 0) {
            weft_tensor_release(a);
            return rc;
        }
        rc = sp__coo_wrap(out, weft_tensor_sizes(t), weft_tensor_ndim(t), a, v, p->sparse_dim,
                          p->coalesced);
        if (rc == 0)
            sp__inherit_valid(*out, &t, 1);
        return rc;
    }
    const sp__csr *p = sp__csr_of(t);
    int rc = sp__copy(&a, p->crow);
    if (rc == 0)
        rc = sp__copy(&b, p->col);
    if (rc == 0)
        rc = sp__copy(&v, p->values);
    if (rc < 0) {
        weft_tensor_release(a);
        weft_tensor_release(b);
        return rc;
    }
    rc = sp__csr_wrap(out, weft_tensor_sizes(t), weft_tensor_ndim(t), a, b, v);
    if (rc == 0)
        sp__inherit_valid(*out, &t, 1);
    return rc;
}

static int clone_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor *out;
    int rc = clone_sparse(&out, weft_arg_tensor(call, 0));
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* copy_(self, src): self takes a copy of src's pattern and values (cast to
 * self's dtype); src may be strided or of either sparse layout, converted
 * to self's.  Everything is built first and swapped in at the end, so a
 * failure leaves self as it was. */
static int copy_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor *self = weft_arg_tensor(call, 0);
    const weft_tensor *src = weft_arg_tensor(call, 1);
    if (!is_sparse(self))
        return weft_set_error(WEFT_ENOTSUP,
                              "copy_: writing a tensor of layout '%s' into one of layout '%s' is "
                              "not supported; convert it with to_dense first",
                              sp__layout_name(src), sp__layout_name(self));
    if (!same_shape(self, src))
        return weft_set_error(WEFT_ESHAPE, "copy_: shapes differ");
    weft_tensor *conv = NULL, *cl = NULL, *v = NULL;
    int rc;
    if (sp__is_coo(self)) {
        int sd = sp__coo_of(self)->sparse_dim;
        if (sp__is_coo(src))
            rc = sp__coo_of(src)->sparse_dim == sd
                     ? (conv = weft_tensor_retain(src), 0)
                     : weft_set_error(WEFT_ESHAPE, "copy_: sparse_dim differs: %d and %d", sd,
                                      sp__coo_of(src)->sparse_dim);
        else if (sp__is_csr(src))
            rc = sp__csr_to_coo(&conv, src);
        else
            rc = sp__dense_to_coo(&conv, src, sd);
        if (rc == 0 && sp__coo_of(conv)->sparse_dim != sd)
            rc = weft_set_error(WEFT_ESHAPE, "copy_: sparse_dim differs: %d and %d", sd,
                                sp__coo_of(conv)->sparse_dim);
    } else {
        rc = sp__is_csr(src) ? (conv = weft_tensor_retain(src), 0)
             : sp__is_coo(src) ? sp__coo_to_csr(&conv, src)
                               : sp__dense_to_csr(&conv, src);
    }
    if (rc == 0)
        rc = clone_sparse(&cl, conv);
    if (rc == 0)
        rc = weft_to_dtype(&v, values_of(cl), weft_tensor_dtype(self));
    weft_tensor_release(conv);
    if (rc < 0) {
        weft_tensor_release(cl);
        return rc;
    }
    /* swap the payloads' contents: self gets cl's, cl dies with self's old */
    if (sp__is_coo(self)) {
        sp__coo *a = sp__coo_of(self), *b = sp__coo_of(cl), t = *a;
        *a = *b;
        *b = t;
        weft_tensor *old = a->values;
        a->values = v;
        weft_tensor_release(old);
    } else {
        sp__csr *a = sp__csr_of(self), *b = sp__csr_of(cl), t = *a;
        *a = *b;
        *b = t;
        weft_tensor *old = a->values;
        a->values = v;
        weft_tensor_release(old);
    }
    weft_tensor_release(cl);
    return 0;
}

/* fill_(sparse, 0): no entries left, as torch's zero_ of a sparse tensor
 * (what an optimizer's zero_grad does to a sparse gradient); any other
 * value would fill every position, which a sparse tensor is not for */
static int fill_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor *self = weft_arg_tensor(call, 0);
    double v = weft_arg_double(call, 1);
    if (v != 0)
        return weft_set_error(WEFT_ENOTSUP,
                              "fill_: a tensor of layout '%s' can only be filled with 0 (it "
                              "then holds no entries), got %g",
                              sp__layout_name(self), v);
    weft_tensor *e = NULL;
    int rc;
    if (sp__is_coo(self)) {
        const sp__coo *p = sp__coo_of(self);
        int64_t vs[WEFT_MAX_DIMS + 1];
        vs[0] = 0;
        for (int d = 0; d < p->dense_dim; d++)
            vs[d + 1] = weft_tensor_size(self, p->sparse_dim + d);
        weft_tensor *ix = NULL, *val = NULL;
        rc = weft_empty(&ix, (int64_t[]){p->sparse_dim, 0}, 2, WEFT_INT64, WEFT_DEVICE_CPU);
        if (rc == 0)
            rc = weft_empty(&val, vs, p->dense_dim + 1, weft_tensor_dtype(self), WEFT_DEVICE_CPU);
        if (rc == 0)
            rc = sp__coo_wrap(&e, weft_tensor_sizes(self), weft_tensor_ndim(self), ix, val,
                              p->sparse_dim, true);
        else
            weft_tensor_release(ix);
    } else {
        weft_tensor *z = NULL;
        rc = weft_zeros(&z, weft_tensor_sizes(self), weft_tensor_ndim(self),
                        weft_tensor_dtype(self), WEFT_DEVICE_CPU);
        if (rc == 0)
            rc = sp__dense_to_csr(&e, z);
        weft_tensor_release(z);
    }
    if (rc < 0)
        return rc;
    /* swap the contents: self gets the empty pattern, e dies with the old */
    if (sp__is_coo(self)) {
        sp__coo t = *sp__coo_of(self);
        *sp__coo_of(self) = *sp__coo_of(e);
        *sp__coo_of(e) = t;
    } else {
        sp__csr t = *sp__csr_of(self);
        *sp__csr_of(self) = *sp__csr_of(e);
        *sp__csr_of(e) = t;
    }
    weft_tensor_release(e);
    return 0;
}

/* ----------------------------------------- cat, index_select, transpose */

/* stack of COO tensors: each unsqueezed at dim (torch's rule: a sparse
 * dim there when dim <= sparse_dim), then concatenated there.  Grad mode
 * is off inside: the core's formula records stack's node, whose backward
 * selects each input's part of the gradient (a sparse one through the
 * layout's view hook). */
static int stack_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    int n;
    weft_tensor *const *ts = weft_arg_tensors(call, 0, &n);
    int64_t dim = weft_arg_int(call, 1);
    if (n < 1)
        return weft_set_error(WEFT_EINVAL, "stack: expects a non-empty list of tensors");
    for (int i = 0; i < n; i++)
        if (!sp__is_coo(ts[i]))
            return weft_set_error(WEFT_ENOTSUP,
                                  "stack: takes sparse_coo tensors only, got layout '%s' at %d",
                                  sp__layout_name(ts[i]), i);
    int ndim = weft_tensor_ndim(ts[0]);
    if (dim < 0)
        dim += ndim + 1;
    if (dim < 0 || dim > ndim)
        return weft_set_error(WEFT_ERANGE, "stack: dimension %lld out of range for %d-D",
                              (long long)weft_arg_int(call, 1), ndim + 1);
    for (int i = 1; i < n; i++)
        if (!same_shape(ts[i], ts[0]))
            return weft_set_error(WEFT_ESHAPE,
                                  "stack: expects each tensor to be equal size, but tensor %d "
                                  "differs from tensor 0",
                                  i);
    weft_tensor **us = calloc((size_t)n, sizeof *us), *out = NULL;
    if (!us)
        return weft_set_error(WEFT_ENOMEM, "stack: out of memory");
    bool was = weft_set_grad_enabled(false);
    int rc = 0;
    for (int i = 0; rc == 0 && i < n; i++)
        rc = weft_unsqueeze(&us[i], ts[i], (int)dim);
    if (rc == 0)
        rc = weft_cat(&out, us, n, dim);
    weft_set_grad_enabled(was);
    sp__release_all(us, n);
    free(us);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

static int cat_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    if (sp__needs_grad(call))
        return sp__cat_autograd(call);
    int n;
    weft_tensor *const *ts = weft_arg_tensors(call, 0, &n);
    int64_t dim = weft_arg_int(call, 1);
    if (n < 1)
        return weft_set_error(WEFT_EINVAL, "cat: needs at least one tensor");
    const weft_tensor *t0 = ts[0];
    int ndim = weft_tensor_ndim(t0);
    if (dim < 0)
        dim += ndim;
    for (int i = 0; i < n; i++)
        if (!sp__is_coo(ts[i]))
            return weft_set_error(WEFT_ENOTSUP,
                                  "cat: takes sparse_coo tensors only, got layout '%s' at %d",
                                  sp__layout_name(ts[i]), i);
    int sd = sp__coo_of(t0)->sparse_dim;
    if (dim < 0 || dim >= ndim)
        return weft_set_error(WEFT_ERANGE, "cat: dimension %lld out of range for %d-D",
                              (long long)weft_arg_int(call, 1), ndim);
    /* along a dense dim every entry's value block is widened, zeros
     * outside its own tensor's part: the patterns are concatenated as they
     * are (uncoalesced), as along a sparse dim */
    bool dense = dim >= sd;
    int64_t sizes[WEFT_MAX_DIMS];
    memcpy(sizes, weft_tensor_sizes(t0), (size_t)ndim * sizeof *sizes);
    sizes[dim] = 0;
    weft_tensor **ixs = calloc((size_t)n, sizeof *ixs), **vs = calloc((size_t)n, sizeof *vs);
    int rc = ixs && vs ? 0 : weft_set_error(WEFT_ENOMEM, "cat: out of memory");
    for (int i = 0; rc == 0 && i < n; i++) {
        const sp__coo *p = sp__coo_of(ts[i]);
        bool ok = weft_tensor_ndim(ts[i]) == ndim && p->sparse_dim == sd &&
                  weft_tensor_dtype(ts[i]) == weft_tensor_dtype(t0);
        for (int d = 0; ok && d < ndim; d++)
            ok = d == dim || weft_tensor_size(ts[i], d) == weft_tensor_size(t0, d);
        if (!ok) {
            rc = weft_set_error(WEFT_ESHAPE,
                                "cat: tensor %d differs from tensor 0 in shape, sparse_dim or "
                                "dtype outside dimension %lld",
                                i, (long long)dim);
            break;
        }
        rc = dense ? (ixs[i] = weft_tensor_retain(p->indices), 0) : sp__copy(&ixs[i], p->indices);
        if (rc == 0 && !dense) {
            int64_t *ix = weft_tensor_data_ptr(ixs[i]);
            for (int64_t e = 0; e < p->nnz; e++)
                ix[dim * p->nnz + e] += sizes[dim];
            vs[i] = weft_tensor_retain(p->values);
        }
        if (rc == 0)
            sizes[dim] += weft_tensor_size(ts[i], (int)dim);
    }
    int64_t off = 0;
    for (int i = 0, vdim = (int)dim - sd + 1; rc == 0 && dense && i < n; i++) {
        const weft_tensor *pv = sp__coo_of(ts[i])->values;
        int64_t vs_sizes[WEFT_MAX_DIMS + 1];
        memcpy(vs_sizes, weft_tensor_sizes(pv), (size_t)weft_tensor_ndim(pv) * sizeof *vs_sizes);
        vs_sizes[vdim] = sizes[dim];
        weft_tensor *part = NULL;
        rc = weft_zeros(&vs[i], vs_sizes, weft_tensor_ndim(pv), weft_tensor_dtype(pv),
                        WEFT_DEVICE_CPU);
        if (rc == 0)
            rc = weft_narrow(&part, vs[i], vdim, off, weft_tensor_size(pv, vdim));
        if (rc == 0)
            rc = weft_copy_(part, pv);
        weft_tensor_release(part);
        off += weft_tensor_size(pv, vdim);
    }
    weft_tensor *ix = NULL, *v = NULL, *out = NULL;
    if (rc == 0)
        rc = weft_cat(&ix, ixs, n, 1);
    if (rc == 0)
        rc = weft_cat(&v, vs, n, 0);
    if (rc == 0) {
        rc = sp__coo_wrap(&out, sizes, ndim, ix, v, sd, false);
        ix = v = NULL;
        if (rc == 0)
            sp__inherit_valid(out, (const weft_tensor *const *)ts, n);
    }
    weft_tensor_release(ix);
    for (int i = 0; ixs && vs && i < n; i++) {
        weft_tensor_release(ixs[i]);
        weft_tensor_release(vs[i]);
    }
    free(ixs);
    free(vs);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* entries of COO t kept by keep(e) with their index in dimension dim
 * mapped through newpos (-1 drops); one output entry per (entry, position)
 * pair, generated by `expand` */
typedef struct remap {
    int dim;
    int64_t newsize;
    /* for each old index value: the list of new positions (CSR-like) */
    int64_t *start, *pos;
    bool drop_dim; /* select: the dimension disappears */
} remap;

static int coo_remap(weft_tensor **out, const weft_tensor *t, const remap *m)
{
    int vrc = sp__require_valid(t, "sparse");
    if (vrc < 0)
        return vrc;
    const sp__coo *p = sp__coo_of(t);
    int sd = p->sparse_dim, ndim = weft_tensor_ndim(t);
    const int64_t *ix = weft_tensor_data_ptr(p->indices);
    int64_t total = 0;
    for (int64_t e = 0; e < p->nnz; e++) {
        int64_t v = ix[m->dim * p->nnz + e];
        total += m->start[v + 1] - m->start[v];
    }
    int osd = sd - m->drop_dim;
    int64_t osz[WEFT_MAX_DIMS], vs[WEFT_MAX_DIMS + 1];
    for (int d = 0, o = 0; d < ndim; d++) {
        if (d == m->dim && m->drop_dim)
            continue;
        osz[o++] = d == m->dim ? m->newsize : weft_tensor_size(t, d);
    }
    vs[0] = total;
    for (int d = 0; d < p->dense_dim; d++)
        vs[d + 1] = weft_tensor_size(t, sd + d);
    int64_t inner = prod(vs + 1, p->dense_dim);
    size_t es = weft_dtype_size(weft_tensor_dtype(t));
    weft_tensor *oi = NULL, *ov = NULL;
    int rc = weft_empty(&oi, (int64_t[]){osd, total}, 2, WEFT_INT64, WEFT_DEVICE_CPU);
    if (rc == 0)
        rc = weft_empty(&ov, vs, p->dense_dim + 1, weft_tensor_dtype(t), WEFT_DEVICE_CPU);
    if (rc < 0) {
        weft_tensor_release(oi);
        return rc;
    }
    int64_t *pi = weft_tensor_data_ptr(oi);
    char *pv = weft_tensor_data_ptr(ov);
    const char *iv = weft_tensor_data_ptr(p->values);
    for (int64_t e = 0, n = 0; e < p->nnz; e++) {
        int64_t v = ix[m->dim * p->nnz + e];
        for (int64_t q = m->start[v]; q < m->start[v + 1]; q++, n++) {
            for (int s = 0, o = 0; s < sd; s++) {
                if (s == m->dim && m->drop_dim)
                    continue;
                pi[(o++) * total + n] = s == m->dim ? m->pos[q] : ix[s * p->nnz + e];
            }
            memcpy(pv + (size_t)(n * inner) * es, iv + (size_t)(e * inner) * es,
                   (size_t)inner * es);
        }
    }
    if (osd == 0) {
        /* no sparse dimension left (select on the only one): the sum of the
         * selected values, strided */
        weft_tensor_release(oi);
        rc = weft_sum(out, ov, (int64_t[]){0}, 1, false);
        weft_tensor_release(ov);
        return rc;
    }
    return sp__coo_wrap(out, osz, ndim - m->drop_dim, oi, ov, osd, false);
}

/* a remap from a list of wanted old positions: new position q holds old
 * index want[q] */
static int remap_from_list(remap *m, int dim, int64_t oldsize, const int64_t *want, int64_t n)
{
    m->dim = dim;
    m->newsize = n;
    m->start = calloc((size_t)oldsize + 1, sizeof *m->start);
    m->pos = malloc((size_t)(n ? n : 1) * sizeof *m->pos);
    if (!m->start || !m->pos) {
        free(m->start);
        free(m->pos);
        return weft_set_error(WEFT_ENOMEM, "sparse: out of memory");
    }
    for (int64_t q = 0; q < n; q++)
        m->start[want[q] + 1]++;
    for (int64_t i = 0; i < oldsize; i++)
        m->start[i + 1] += m->start[i];
    int64_t *next = malloc((size_t)(oldsize ? oldsize : 1) * sizeof *next);
    if (!next) {
        free(m->start);
        free(m->pos);
        return weft_set_error(WEFT_ENOMEM, "sparse: out of memory");
    }
    memcpy(next, m->start, (size_t)oldsize * sizeof *next);
    for (int64_t q = 0; q < n; q++)
        m->pos[next[want[q]]++] = q;
    free(next);
    return 0;
}

/* narrow, select and index_select along a dense dimension of COO t: the
 * strided operator on the values (dimension dim - sparse_dim + 1 there),
 * the pattern unchanged */
enum { ALONG_NARROW, ALONG_SELECT, ALONG_INDEX };
static int along_dense_dim(weft_tensor **out, const weft_tensor *t, int kind, int64_t dim,
                           int64_t a, int64_t b, const weft_tensor *index)
{
    const sp__coo *p = sp__coo_of(t);
    int vdim = (int)(dim - p->sparse_dim + 1), ndim = weft_tensor_ndim(t);
    weft_tensor *view = NULL, *v = NULL;
    int rc = kind == ALONG_NARROW   ? weft_narrow(&view, p->values, vdim, a, b)
             : kind == ALONG_SELECT ? weft_select(&view, p->values, vdim, a)
                                    : weft_index_select(&view, p->values, vdim, index);
    if (rc == 0)
        rc = weft_contiguous(&v, view);
    weft_tensor_release(view);
    if (rc < 0)
        return rc;
    int64_t sizes[WEFT_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < ndim; d++) {
        if (d != dim)
            sizes[n++] = weft_tensor_size(t, d);
        else if (kind != ALONG_SELECT)
            sizes[n++] = weft_tensor_size(v, vdim);
    }
    rc = sp__coo_wrap(out, sizes, n, weft_tensor_retain(p->indices), v, p->sparse_dim,
                      p->coalesced);
    if (rc == 0)
        sp__inherit_valid(*out, &t, 1);
    return rc;
}

/* A CSR operand of narrow, select or index_select goes through COO (one
 * kernel for both layouts: the same call with the COO form as argument 0);
 * a 2-D result goes back to CSR, a 1-D one (select) stays COO. */
static int through_coo(weft_call *call, weft_kernel_fn kernel)
{
    weft_tensor *c = NULL;
    int rc = sp__csr_to_coo(&c, weft_arg_tensor(call, 0));
    if (rc < 0)
        return rc;
    weft_value args[8];
    int nargs = call->nargs < 8 ? call->nargs : 8;
    memcpy(args, call->args, (size_t)nargs * sizeof *args);
    args[0].u.tensor = c;
    weft_call sub = *call;
    sub.args = args;
    rc = kernel(&sub, NULL);
    weft_tensor_release(c);
    if (rc < 0)
        return rc;
    weft_tensor *r = call->rets[0].u.tensor, *back = NULL;
    if (weft_tensor_ndim(r) != 2 || sp__coo_of(r)->sparse_dim != 2)
        return 0;
    rc = sp__coo_to_csr(&back, r);
    weft_tensor_release(r);
    call->rets[0].u.tensor = NULL;
    return rc < 0 ? rc : weft_return_tensor(call, 0, back);
}

/* dim of COO t, negative counted from the end: 0 for a sparse dim, 1 for
 * a dense one, or an error naming op */
static int dim_arg(const weft_tensor *t, int64_t *dim, const char *op)
{
    if (!sp__is_coo(t))
        return weft_set_error(WEFT_ENOTSUP, "%s: not supported for layout '%s'", op,
                              sp__layout_name(t));
    int ndim = weft_tensor_ndim(t);
    if (*dim < 0)
        *dim += ndim;
    if (*dim < 0 || *dim >= ndim)
        return weft_set_error(WEFT_ERANGE, "%s: dimension out of range for %d-D", op, ndim);
    return *dim >= sp__coo_of(t)->sparse_dim;
}

static int index_select_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *t = weft_arg_tensor(call, 0), *index = weft_arg_tensor(call, 2);
    if (sp__needs_grad(call))
        return sp__index_select_autograd(call);
    if (sp__is_csr(t))
        return through_coo(call, index_select_kernel);
    int64_t dim = weft_arg_int(call, 1);
    int rc = dim_arg(t, &dim, "index_select");
    if (rc < 0)
        return rc;
    if (!is_strided(index) || weft_tensor_ndim(index) != 1 ||
        weft_tensor_dtype(index) != WEFT_INT64)
        return weft_set_error(WEFT_EINVAL, "index_select: index must be a 1-D strided int64 "
                                           "tensor");
    if (rc == 1) { /* a dense dim: the strided index_select checks the range */
        weft_tensor *out;
        rc = along_dense_dim(&out, t, ALONG_INDEX, dim, 0, 0, index);
        return rc < 0 ? rc : weft_return_tensor(call, 0, out);
    }
    weft_tensor *ic;
    if ((rc = weft_contiguous(&ic, index)) < 0)
        return rc;
    const int64_t *want = weft_tensor_data_ptr(ic);
    int64_t n = weft_tensor_numel(ic), size = weft_tensor_size(t, (int)dim);
    for (int64_t q = 0; q < n; q++)
        if (want[q] < 0 || want[q] >= size) {
            weft_tensor_release(ic);
            return weft_set_error(WEFT_ERANGE, "index_select: index[%lld] is %lld, out of range "
                                               "for size %lld",
                                  (long long)q, (long long)want[q], (long long)size);
        }
    remap m = {0};
    rc = remap_from_list(&m, (int)dim, size, want, n);
    weft_tensor_release(ic);
    weft_tensor *out;
    if (rc == 0) {
        rc = coo_remap(&out, t, &m);
        free(m.start);
        free(m.pos);
    }
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

static int narrow_kernel(weft_call *call, void *ctx);
static int select_kernel(weft_call *call, void *ctx);
static int narrow_select(weft_call *call, bool select)
{
    const char *op = select ? "sparse_select" : "sparse_narrow";
    const weft_tensor *t = weft_arg_tensor(call, 0);
    if (sp__is_csr(t))
        return through_coo(call, select ? select_kernel : narrow_kernel);
    int64_t dim = weft_arg_int(call, 1), start = weft_arg_int(call, 2);
    int rc = dim_arg(t, &dim, op);
    if (rc < 0)
        return rc;
    int64_t size = weft_tensor_size(t, (int)dim);
    if (select && start < 0)
        start += size;
    int64_t len = select ? 1 : weft_arg_int(call, 3);
    if (start < 0 || len < 0 || start + len > size)
        return weft_set_error(WEFT_ERANGE, "%s: [%lld, %lld) is out of range for size %lld", op,
                              (long long)start, (long long)(start + len), (long long)size);
    if (rc == 1) {
        weft_tensor *out;
        rc = along_dense_dim(&out, t, select ? ALONG_SELECT : ALONG_NARROW, dim, start, len,
                             NULL);
        return rc < 0 ? rc : weft_return_tensor(call, 0, out);
    }
    int64_t *want = malloc((size_t)(len ? len : 1) * sizeof *want);
    if (!want)
        return weft_set_error(WEFT_ENOMEM, "%s: out of memory", op);
    for (int64_t q = 0; q < len; q++)
        want[q] = start + q;
    remap m = {0};
    rc = remap_from_list(&m, (int)dim, size, want, len);
    free(want);
    m.drop_dim = select;
    weft_tensor *out;
    if (rc == 0) {
        rc = coo_remap(&out, t, &m);
        free(m.start);
        free(m.pos);
    }
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

static int narrow_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    return narrow_select(call, false);
}

static int select_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    return narrow_select(call, true);
}

/* transpose of two sparse dimensions swaps their index rows; of two dense
 * ones, transposes the values */
int sp__coo_transpose(weft_tensor **out, const weft_tensor *t, int64_t d0, int64_t d1)
{
    if (!sp__is_coo(t))
        return weft_set_error(WEFT_ENOTSUP, "sparse_transpose: not supported for layout '%s'",
                              sp__layout_name(t));
    const sp__coo *p = sp__coo_of(t);
    int ndim = weft_tensor_ndim(t);
    d0 += d0 < 0 ? ndim : 0;
    d1 += d1 < 0 ? ndim : 0;
    if (d0 < 0 || d0 >= ndim || d1 < 0 || d1 >= ndim)
        return weft_set_error(WEFT_ERANGE, "sparse_transpose: dimension out of range for %d-D",
                              ndim);
    bool s0 = d0 < p->sparse_dim, s1 = d1 < p->sparse_dim;
    if (s0 != s1)
        return weft_set_error(WEFT_ENOTSUP,
                              "sparse_transpose: cannot swap sparse dimension %lld with dense "
                              "dimension %lld",
                              (long long)(s0 ? d0 : d1), (long long)(s0 ? d1 : d0));
    int64_t sizes[WEFT_MAX_DIMS];
    memcpy(sizes, weft_tensor_sizes(t), (size_t)ndim * sizeof *sizes);
    int64_t tmp = sizes[d0];
    sizes[d0] = sizes[d1];
    sizes[d1] = tmp;
    weft_tensor *ix = NULL, *v = NULL, *tv = NULL;
    int rc;
    if (s0) {
        rc = sp__copy(&ix, p->indices);
        if (rc == 0 && d0 != d1) {
            int64_t *pi = weft_tensor_data_ptr(ix);
            for (int64_t e = 0; e < p->nnz; e++) {
                int64_t x = pi[d0 * p->nnz + e];
                pi[d0 * p->nnz + e] = pi[d1 * p->nnz + e];
                pi[d1 * p->nnz + e] = x;
            }
        }
        v = weft_tensor_retain(p->values);
    } else {
        ix = weft_tensor_retain(p->indices);
        rc = weft_transpose(&tv, p->values, (int)(d0 - p->sparse_dim + 1),
                            (int)(d1 - p->sparse_dim + 1));
        if (rc == 0)
            rc = weft_contiguous(&v, tv);
        weft_tensor_release(tv);
    }
    if (rc < 0) {
        weft_tensor_release(ix);
        weft_tensor_release(v);
        return rc;
    }
    rc = sp__coo_wrap(out, sizes, ndim, ix, v, p->sparse_dim, p->coalesced && (!s0 || d0 == d1));
    if (rc == 0)
        sp__inherit_valid(*out, &t, 1);
    return rc;
}

static int transpose_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor *out;
    int rc = sp__coo_transpose(&out, weft_arg_tensor(call, 0), weft_arg_int(call, 1),
                               weft_arg_int(call, 2));
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

int sp__register_ops(weft_registrar *reg)
{
    const weft_kernel_entry both[] = {
        {"mm", mm_kernel, &matrices_only},
        {"matmul", matmul_kernel, NULL},
        {"mv", mm_kernel, NULL},
        {"addmm", addmm_kernel, NULL},
        {"add", add_kernel, NULL},
        {"add_", add_inplace_kernel, NULL},
        {"sub", sub_kernel, NULL},
        {"mul", mul_kernel, NULL},
        {"mul_scalar", mul_scalar_kernel, NULL},
        {"mul_scalar_", mul_scalar_inplace_kernel, NULL},
        {"sparse_to_dtype", to_dtype_kernel, NULL},
        {"norm", norm_kernel, NULL},
        {"div_scalar", div_scalar_kernel, NULL},
        {"pow_scalar", pow_scalar_kernel, NULL},
        {"neg", unary_kernel, (const void *)weft_neg},
        {"abs", unary_kernel, (const void *)weft_abs},
        {"relu", unary_kernel, (const void *)weft_relu},
        {"sqrt", unary_kernel, (const void *)weft_sqrt},
        /* more f with f(0) = 0 */
        {"sin", unary_kernel, (const void *)weft_sin},
        {"tan", unary_kernel, (const void *)weft_tan},
        {"tanh", unary_kernel, (const void *)weft_tanh},
        {"asin", unary_kernel, (const void *)weft_asin},
        {"atan", unary_kernel, (const void *)weft_atan},
        {"sinh", unary_kernel, (const void *)weft_sinh},
        {"expm1", unary_kernel, (const void *)weft_expm1},
        {"log1p", unary_kernel, (const void *)weft_log1p},
        {"sign", unary_kernel, (const void *)weft_sign},
        {"trunc", unary_kernel, (const void *)weft_trunc},
        {"floor", unary_kernel, (const void *)weft_floor},
        {"ceil", unary_kernel, (const void *)weft_ceil},
        {"round", unary_kernel, (const void *)weft_round},
        {"erf", unary_kernel, (const void *)weft_erf},
        {"erfinv", unary_kernel, (const void *)weft_erfinv},
        {"relu6", unary_kernel, (const void *)weft_relu6},
        {"sum", sum_kernel, NULL},
        {"clone", clone_kernel, NULL},
        {"copy_", copy_kernel, NULL},
        {"fill_", fill_kernel, NULL},
    };
    const weft_kernel_entry coo_only[] = {
        {"cat", cat_kernel, NULL},
        {"stack", stack_kernel, NULL},
        {"index_select", index_select_kernel, NULL},
        {"sparse_transpose", transpose_kernel, NULL},
        {"sparse_narrow", narrow_kernel, NULL},
        {"sparse_select", select_kernel, NULL},
    };
    int coo = weft_layout_key(sp__coo_layout), csr = weft_layout_key(sp__csr_layout);
    int cpu = WEFT_DEVICE_TYPE_CPU;
    int rc = weft_register_kernel_table(reg, coo, cpu, both, sizeof both / sizeof *both);
    if (rc == 0)
        rc = weft_register_kernel_table(reg, csr, cpu, both, sizeof both / sizeof *both);
    if (rc == 0)
        rc = weft_register_kernel_table(reg, coo, cpu, coo_only,
                                        sizeof coo_only / sizeof *coo_only);
    /* the same kernels on CSR only refuse, naming the layout (clearer than
     * the dispatcher's "no kernel") */
    if (rc == 0)
        rc = weft_register_kernel_table(reg, csr, cpu, coo_only,
                                        sizeof coo_only / sizeof *coo_only);
    return rc;
}
