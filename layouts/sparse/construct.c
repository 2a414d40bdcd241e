/* layouts/sparse/construct.c — making sparse tensors: the payloads, the
 * constructors' checks, the conversions between strided, COO and CSR, and
 * coalesce.  Every function here builds its result completely before it
 * wraps it in a tensor, so a failure leaves nothing behind but released
 * temporaries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sparse.h"

/* A copy of a payload's tensor: they are contiguous, so one memcpy, and no
 * dispatch (nor autograd) inside a kernel */
int sp__copy(weft_tensor **out, const weft_tensor *t)
{
    weft_tensor *c;
    int rc = weft_empty(&c, weft_tensor_sizes(t), weft_tensor_ndim(t), weft_tensor_dtype(t),
                        weft_tensor_device(t));
    if (rc < 0)
        return rc;
    weft_tensor *src = NULL;
    if ((rc = weft_contiguous(&src, t)) < 0) {
        weft_tensor_release(c);
        return rc;
    }
    size_t n = (size_t)weft_tensor_numel(t) * weft_dtype_size(weft_tensor_dtype(t));
    if (n)
        memcpy(weft_tensor_data_ptr(c), weft_tensor_data_ptr(src), n);
    weft_tensor_release(src);
    *out = c;
    return 0;
}

static int64_t idx_at(const void *p, bool i32, int64_t k)
{
    return i32 ? ((const int32_t *)p)[k] : ((const int64_t *)p)[k];
}

/* ----------------------------------------------------------- to strided */

static int64_t prod(const int64_t *s, int n)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        p *= s[i];
    return p;
}

/* What to_dense starts from: t's pattern checked (a deferred check runs
 * here), its dtype's kernels, and a zeroed strided tensor of t's shape. */
static int dense_target(weft_tensor **d, const sp__kernels **k, const weft_tensor *t)
{
    int rc = sp__require_valid(t, "to_dense");
    if (rc < 0)
        return rc;
    *k = sp__kernels_for(weft_tensor_dtype(t), "to_dense");
    if (!*k)
        return WEFT_EDTYPE;
    return weft_zeros(d, weft_tensor_sizes(t), weft_tensor_ndim(t), weft_tensor_dtype(t),
                      weft_tensor_device(t));
}

int sp__coo_to_dense(weft_tensor **out, const weft_tensor *t)
{
    const sp__kernels *k;
    weft_tensor *d;
    int rc = dense_target(&d, &k, t);
    if (rc < 0)
        return rc;
    const sp__coo *p = sp__coo_of(t);
    const int64_t *sizes = weft_tensor_sizes(t);
    int64_t inner = prod(sizes + p->sparse_dim, p->dense_dim);
    size_t es = weft_dtype_size(weft_tensor_dtype(t));
    const int64_t *ix = weft_tensor_data_ptr(p->indices);
    const char *v = weft_tensor_data_ptr(p->values);
    char *o = weft_tensor_data_ptr(d);
    /* duplicates add up, as torch's to_dense does */
    for (int64_t e = 0; e < p->nnz; e++) {
        int64_t lin = 0;
        for (int s = 0; s < p->sparse_dim; s++)
            lin = lin * sizes[s] + ix[s * p->nnz + e];
        k->axpy(inner, 1.0, v + (size_t)(e * inner) * es, o + (size_t)(lin * inner) * es);
    }
    *out = d;
    return 0;
}

int sp__csr_to_dense(weft_tensor **out, const weft_tensor *t)
{
    const sp__kernels *k;
    weft_tensor *d;
    int rc = dense_target(&d, &k, t);
    if (rc < 0)
        return rc;
    const sp__csr *p = sp__csr_of(t);
    const int64_t *sizes = weft_tensor_sizes(t);
    int64_t nb = p->batch ? sizes[0] : 1, rows = sizes[p->batch], cols = sizes[p->batch + 1];
    bool i32 = weft_tensor_dtype(p->crow) == WEFT_INT32;
    const void *cr = weft_tensor_data_ptr(p->crow), *cc = weft_tensor_data_ptr(p->col);
    size_t es = weft_dtype_size(weft_tensor_dtype(t));
    const char *v = weft_tensor_data_ptr(p->values);
    char *o = weft_tensor_data_ptr(d);
    for (int64_t b = 0; b < nb; b++)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t e = idx_at(cr, i32, b * (rows + 1) + r);
                 e < idx_at(cr, i32, b * (rows + 1) + r + 1); e++) {
                int64_t at = (b * rows + r) * cols + idx_at(cc, i32, b * p->nnz + e);
                k->axpy(1, 1.0, v + (size_t)(b * p->nnz + e) * es, o + (size_t)at * es);
            }
    *out = d;
    return 0;
}

/* The offset (in elements) of the block of dense dims [from, ndim) of
 * strided t at element j of that block, row-major: t may be a broadcast
 * view (stride 0), so nothing assumes contiguity */
static int64_t block_offset(const weft_tensor *t, int from, int64_t j)
{
    int64_t off = 0;
    for (int d = weft_tensor_ndim(t) - 1; d >= from; d--) {
        int64_t n = weft_tensor_size(t, d);
        off += (j % n) * weft_tensor_strides(t)[d];
        j /= n;
    }
    return off;
}

/* The reverse of to_dense on one pattern: what src holds at each entry.
 * src is read through its strides (the gradient of a sum is an expanded
 * view: it is never made contiguous at the input's size).  The pattern's
 * indices must be in range (checked by the callers). */
int sp__gather_pattern(weft_tensor **out, const weft_tensor *src, const weft_tensor *ix,
                       const weft_tensor *col, const int64_t *sizes, int ndim)
{
    *out = NULL;
    weft_tensor *v = NULL;
    size_t es = weft_dtype_size(weft_tensor_dtype(src));
    const char *s = weft_tensor_data_ptr(src);
    const int64_t *st = weft_tensor_strides(src);
    int64_t vs[WEFT_MAX_DIMS + 1];
    int rc;
    if (!col) { /* COO: a block of the dense dims per entry */
        int sd = (int)weft_tensor_size(ix, 0), vnd = 1;
        int64_t nnz = weft_tensor_size(ix, 1), inner = prod(sizes + sd, ndim - sd);
        vs[0] = nnz;
        for (int d = sd; d < ndim; d++)
            vs[vnd++] = sizes[d];
        /* whether each block is one run of memory (a row-major tail) */
        bool rows = true;
        for (int d = ndim - 1, want = 1; d >= sd; want *= (int)sizes[d], d--)
            rows &= sizes[d] == 1 || st[d] == want;
        rc = weft_empty(&v, vs, vnd, weft_tensor_dtype(src), weft_tensor_device(src));
        const int64_t *p = rc == 0 ? weft_tensor_data_ptr(ix) : NULL;
        char *dst = rc == 0 ? weft_tensor_data_ptr(v) : NULL;
        for (int64_t e = 0; rc == 0 && e < nnz; e++) {
            int64_t at = 0;
            for (int d = 0; d < sd; d++)
                at += p[d * nnz + e] * st[d];
            char *to = dst + (size_t)(e * inner) * es;
            if (rows)
                memcpy(to, s + (size_t)at * es, (size_t)inner * es);
            else
                for (int64_t j = 0; j < inner; j++)
                    memcpy(to + (size_t)j * es, s + (size_t)(at + block_offset(src, sd, j)) * es,
                           es);
        }
    } else { /* CSR: one element per entry, [B?, nnz] */
        int b = ndim - 2;
        int64_t nb = b ? sizes[0] : 1, rows = sizes[b];
        int64_t per = weft_tensor_numel(col) / (nb ? nb : 1);
        bool i32 = weft_tensor_dtype(ix) == WEFT_INT32;
        const void *cr = weft_tensor_data_ptr(ix), *cc = weft_tensor_data_ptr(col);
        vs[0] = nb;
        vs[1] = per;
        rc = weft_empty(&v, vs + !b, b + 1, weft_tensor_dtype(src), weft_tensor_device(src));
        char *dst = rc == 0 ? weft_tensor_data_ptr(v) : NULL;
        for (int64_t bi = 0; rc == 0 && bi < nb; bi++)
            for (int64_t r = 0; r < rows; r++)
                for (int64_t k = idx_at(cr, i32, bi * (rows + 1) + r);
                     k < idx_at(cr, i32, bi * (rows + 1) + r + 1); k++) {
                    int64_t at = (b ? bi * st[0] : 0) + r * st[b] +
                                 idx_at(cc, i32, bi * per + k) * st[b + 1];
                    memcpy(dst + (size_t)(bi * per + k) * es, s + (size_t)at * es, es);
                }
    }
    if (rc == 0)
        *out = v;
    return rc;
}

int sp__sparse_mask(weft_tensor **out, const weft_tensor *self, const weft_tensor *mask)
{
    *out = NULL;
    const char *op = "sparse_mask";
    if (weft_tensor_layout(self) != WEFT_LAYOUT_STRIDED || !(sp__is_coo(mask) || sp__is_csr(mask)))
        return weft_set_error(WEFT_ENOTSUP,
                              "%s: takes a strided self and a sparse mask, got layouts '%s' and "
                              "'%s'",
                              op, sp__layout_name(self), sp__layout_name(mask));
    int ndim = weft_tensor_ndim(mask);
    if (weft_tensor_ndim(self) != ndim ||
        memcmp(weft_tensor_sizes(self), weft_tensor_sizes(mask), (size_t)ndim * sizeof(int64_t)))
        return weft_set_error(WEFT_ESHAPE, "%s: self and mask must have the same shape", op);
    if (weft_tensor_device(self).type != WEFT_DEVICE_TYPE_CPU ||
        weft_tensor_device(mask).type != WEFT_DEVICE_TYPE_CPU)
        return weft_set_error(WEFT_EDEVICE, "%s: takes CPU tensors", op);
    if (!sp__kernels_for(weft_tensor_dtype(self), op))
        return WEFT_EDTYPE;
    /* duplicates in the mask would hand out one position's value twice
     * (doubled in any sum): the pattern is the mask's coalesced one, as
     * torch's to_dense backward uses (torch 1.13's sparse_mask refuses an
     * uncoalesced mask instead) */
    weft_tensor *m = NULL, *v = NULL;
    int rc = sp__require_valid(mask, op);
    if (rc == 0)
        rc = sp__is_coo(mask) ? sp__coalesce(&m, mask) : (m = weft_tensor_retain(mask), 0);
    if (rc < 0)
        return rc;
    const int64_t *sizes = weft_tensor_sizes(m);
    if (sp__is_coo(m)) {
        const sp__coo *p = sp__coo_of(m);
        rc = sp__gather_pattern(&v, self, p->indices, NULL, sizes, ndim);
        if (rc == 0)
            rc = sp__coo_wrap(out, sizes, ndim, weft_tensor_retain(p->indices), v, p->sparse_dim,
                              true);
    } else {
        const sp__csr *p = sp__csr_of(m);
        rc = sp__gather_pattern(&v, self, p->crow, p->col, sizes, ndim);
        if (rc == 0)
            rc = sp__csr_wrap(out, sizes, ndim, weft_tensor_retain(p->crow),
                              weft_tensor_retain(p->col), v);
    }
    weft_tensor_release(m);
    return rc;
}

/* --------------------------------------------------------- from strided */

int sp__dense_to_coo(weft_tensor **out, const weft_tensor *src, int sparse_dim)
{
    int ndim = weft_tensor_ndim(src);
    weft_dtype dt = weft_tensor_dtype(src);
    const sp__kernels *k = sp__kernels_for(dt, "to_sparse");
    if (!k)
        return WEFT_EDTYPE;
    if (sparse_dim < 1 || sparse_dim > ndim)
        return weft_set_error(WEFT_ERANGE,
                              "to_sparse: sparse_dim must be in 1..%d for a %d-D tensor, got %d",
                              ndim, ndim, sparse_dim);
    if (weft_tensor_device(src).type != WEFT_DEVICE_TYPE_CPU)
        return weft_set_error(WEFT_EDEVICE, "to_sparse: sparse tensors live on the CPU only "
                                            "for now");
    weft_tensor *c;
    int rc = weft_contiguous(&c, src);
    if (rc < 0)
        return rc;
    const int64_t *sizes = weft_tensor_sizes(c);
    int64_t outer = prod(sizes, sparse_dim), inner = prod(sizes + sparse_dim, ndim - sparse_dim);
    size_t es = weft_dtype_size(dt);
    const char *data = weft_tensor_data_ptr(c);
    int64_t nnz = 0;
    for (int64_t i = 0; i < outer; i++)
        nnz += k->nonzero(inner, data + (size_t)(i * inner) * es);
    weft_tensor *ix = NULL, *val = NULL;
    int64_t vs[WEFT_MAX_DIMS + 1];
    vs[0] = nnz;
    for (int d = sparse_dim; d < ndim; d++)
        vs[d - sparse_dim + 1] = sizes[d];
    rc = weft_empty(&ix, (int64_t[]){sparse_dim, nnz}, 2, WEFT_INT64, weft_tensor_device(c));
    if (rc == 0)
        rc = weft_empty(&val, vs, ndim - sparse_dim + 1, dt, weft_tensor_device(c));
    if (rc < 0) {
        weft_tensor_release(ix);
        weft_tensor_release(c);
        return rc;
    }
    int64_t *pi = weft_tensor_data_ptr(ix);
    char *pv = weft_tensor_data_ptr(val);
    for (int64_t i = 0, e = 0; i < outer; i++) {
        const char *blk = data + (size_t)(i * inner) * es;
        if (!k->nonzero(inner, blk))
            continue;
        memcpy(pv + (size_t)(e * inner) * es, blk, (size_t)inner * es);
        for (int64_t s = sparse_dim - 1, rest = i; s >= 0; s--) {
            pi[s * nnz + e] = rest % sizes[s];
            rest /= sizes[s];
        }
        e++;
    }
    rc = sp__coo_wrap(out, sizes, ndim, ix, val, sparse_dim, true);
    weft_tensor_release(c);
    return rc;
}

/* index tensors of CSR: int64, as torch's to_sparse_csr makes them */
int sp__dense_to_csr(weft_tensor **out, const weft_tensor *src)
{
    int ndim = weft_tensor_ndim(src);
    weft_dtype dt = weft_tensor_dtype(src);
    const sp__kernels *k = sp__kernels_for(dt, "to_sparse_csr");
    if (!k)
        return WEFT_EDTYPE;
    if (ndim != 2 && ndim != 3)
        return weft_set_error(WEFT_ESHAPE,
                              "to_sparse_csr: needs a 2-D tensor (or 3-D with a batch), got %d-D",
                              ndim);
    if (weft_tensor_device(src).type != WEFT_DEVICE_TYPE_CPU)
        return weft_set_error(WEFT_EDEVICE, "to_sparse_csr: sparse tensors live on the CPU "
                                            "only for now");
    weft_tensor *c;
    int rc = weft_contiguous(&c, src);
    if (rc < 0)
        return rc;
    const int64_t *sizes = weft_tensor_sizes(c);
    int b = ndim - 2;
    int64_t nb = b ? sizes[0] : 1, rows = sizes[b], cols = sizes[b + 1];
    size_t es = weft_dtype_size(dt);
    const char *data = weft_tensor_data_ptr(c);
    int64_t nnz = -1;
    for (int64_t bi = 0; bi < nb; bi++) {
        int64_t n = 0;
        for (int64_t i = 0; i < rows * cols; i++)
            n += k->nonzero(1, data + (size_t)(bi * rows * cols + i) * es);
        if (nnz >= 0 && n != nnz) {
            weft_tensor_release(c);
            return weft_set_error(WEFT_EINVAL,
                                  "to_sparse_csr: every batch entry must have the same number of "
                                  "nonzeros, but batch 0 has %lld and batch %lld has %lld",
                                  (long long)nnz, (long long)bi, (long long)n);
        }
        nnz = n;
    }
    int64_t crs[2] = {nb, rows + 1}, cos[2] = {nb, nnz};
    weft_tensor *crow = NULL, *col = NULL, *val = NULL;
    rc = weft_empty(&crow, b ? crs : crs + 1, b + 1, WEFT_INT64, weft_tensor_device(c));
    if (rc == 0)
        rc = weft_empty(&col, b ? cos : cos + 1, b + 1, WEFT_INT64, weft_tensor_device(c));
    if (rc == 0)
        rc = weft_empty(&val, b ? cos : cos + 1, b + 1, dt, weft_tensor_device(c));
    if (rc < 0) {
        weft_tensor *all[] = {crow, col, c};
        sp__release_all(all, 3);
        return rc;
    }
    int64_t *pr = weft_tensor_data_ptr(crow), *pc = weft_tensor_data_ptr(col);
    char *pv = weft_tensor_data_ptr(val);
    for (int64_t bi = 0; bi < nb; bi++) {
        int64_t e = 0;
        for (int64_t r = 0; r < rows; r++) {
            pr[bi * (rows + 1) + r] = e;
            for (int64_t j = 0; j < cols; j++) {
                const char *x = data + (size_t)((bi * rows + r) * cols + j) * es;
                if (k->nonzero(1, x)) {
                    pc[bi * nnz + e] = j;
                    memcpy(pv + (size_t)(bi * nnz + e) * es, x, es);
                    e++;
                }
            }
        }
        pr[bi * (rows + 1) + rows] = e;
    }
    rc = sp__csr_wrap(out, sizes, ndim, crow, col, val);
    weft_tensor_release(c);
    return rc;
}

/* -------------------------------------------------------------- COO<->CSR */

int sp__coo_to_csr(weft_tensor **out, const weft_tensor *t)
{
    const sp__coo *p = sp__coo_of(t);
    if (weft_tensor_ndim(t) != 2 || p->sparse_dim != 2)
        return weft_set_error(WEFT_ESHAPE,
                              "to_sparse_csr: a COO tensor needs 2 sparse and no dense "
                              "dimensions, got %d sparse and %d dense",
                              p->sparse_dim, p->dense_dim);
    weft_tensor *co;
    int rc = sp__coalesce(&co, t);
    if (rc < 0)
        return rc;
    const sp__coo *q = sp__coo_of(co);
    int64_t rows = weft_tensor_size(t, 0), nnz = q->nnz;
    weft_tensor *crow = NULL, *col = NULL, *val = NULL;
    rc = weft_zeros(&crow, (int64_t[]){rows + 1}, 1, WEFT_INT64, weft_tensor_device(t));
    if (rc == 0)
        rc = weft_empty(&col, (int64_t[]){nnz}, 1, WEFT_INT64, weft_tensor_device(t));
    if (rc == 0)
        rc = sp__copy(&val, q->values);
    if (rc < 0) {
        weft_tensor *all[] = {crow, col, co};
        sp__release_all(all, 3);
        return rc;
    }
    int64_t *pr = weft_tensor_data_ptr(crow);
    const int64_t *ix = weft_tensor_data_ptr(q->indices);
    memcpy(weft_tensor_data_ptr(col), ix + nnz, (size_t)nnz * sizeof(int64_t));
    for (int64_t e = 0; e < nnz; e++)
        pr[ix[e] + 1]++;
    for (int64_t r = 0; r < rows; r++)
        pr[r + 1] += pr[r];
    weft_tensor_release(co);
    return sp__csr_wrap(out, weft_tensor_sizes(t), 2, crow, col, val);
}

int sp__csr_to_coo(weft_tensor **out, const weft_tensor *t)
{
    int vrc = sp__require_valid(t, "to_sparse");
    if (vrc < 0)
        return vrc;
    const sp__csr *p = sp__csr_of(t);
    int ndim = weft_tensor_ndim(t);
    const int64_t *sizes = weft_tensor_sizes(t);
    int64_t nb = p->batch ? sizes[0] : 1, rows = sizes[p->batch], total = nb * p->nnz;
    weft_tensor *ix = NULL, *val = NULL;
    int rc = weft_empty(&ix, (int64_t[]){ndim, total}, 2, WEFT_INT64, weft_tensor_device(t));
    if (rc == 0)
        rc = weft_reshape(&val, p->values, (int64_t[]){total}, 1);
    weft_tensor *vc = NULL;
    if (rc == 0)
        rc = sp__copy(&vc, val);
    weft_tensor_release(val);
    if (rc < 0) {
        weft_tensor_release(ix);
        return rc;
    }
    bool i32 = weft_tensor_dtype(p->crow) == WEFT_INT32;
    const void *cr = weft_tensor_data_ptr(p->crow), *cc = weft_tensor_data_ptr(p->col);
    int64_t *pi = weft_tensor_data_ptr(ix);
    for (int64_t b = 0, e = 0; b < nb; b++)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t k = idx_at(cr, i32, b * (rows + 1) + r);
                 k < idx_at(cr, i32, b * (rows + 1) + r + 1); k++, e++) {
                int d = 0;
                if (p->batch)
                    pi[(d++) * total + e] = b;
                pi[(d++) * total + e] = r;
                pi[d * total + e] = idx_at(cc, i32, b * p->nnz + k);
            }
    /* CSR's invariants (rows in order, columns sorted and distinct) are
     * exactly COO's coalesced order */
    return sp__coo_wrap(out, sizes, ndim, ix, vc, ndim, true);
}

/* --------------------------------------------------------------- coalesce */

typedef struct coalesce_job {
    const int64_t *ix;  /* [sparse_dim, nnz] */
    const int64_t *sizes;
    int sparse_dim;
    int64_t nnz;
    int64_t *keys, *perm;
    /* after the sort */
    int64_t *starts; /* start of each unique run, nuniq + 1 entries */
    int64_t *chunk_count;
    int64_t nuniq, inner;
    size_t es;
    const char *vin;
    char *vout;
    int64_t *iout;
    const sp__kernels *k;
} coalesce_job;

static void keys_chunk(int c, int n, void *ctx)
{
    coalesce_job *j = ctx;
    int64_t b, e;
    sp__chunk_range(j->nnz, c, n, &b, &e);
    for (int64_t i = b; i < e; i++) {
        int64_t lin = 0;
        for (int s = 0; s < j->sparse_dim; s++)
            lin = lin * j->sizes[s] + j->ix[s * j->nnz + i];
        j->keys[i] = lin;
    }
}

static void count_runs(int c, int n, void *ctx)
{
    coalesce_job *j = ctx;
    int64_t b, e, cnt = 0;
    sp__chunk_range(j->nnz, c, n, &b, &e);
    for (int64_t i = b; i < e; i++)
        cnt += i == 0 || j->keys[i] != j->keys[i - 1];
    j->chunk_count[c] = cnt;
}

static void mark_runs(int c, int n, void *ctx)
{
    coalesce_job *j = ctx;
    int64_t b, e, at = j->chunk_count[c];
    sp__chunk_range(j->nnz, c, n, &b, &e);
    for (int64_t i = b; i < e; i++)
        if (i == 0 || j->keys[i] != j->keys[i - 1])
            j->starts[at++] = i;
}

/* each unique position: its index column and the sum of its values, in
 * the order the entries came (the sort was stable) */
static void sum_runs(int c, int n, void *ctx)
{
    coalesce_job *j = ctx;
    int64_t b, e;
    sp__chunk_range(j->nuniq, c, n, &b, &e);
    for (int64_t u = b; u < e; u++) {
        int64_t first = j->starts[u], last = j->starts[u + 1];
        for (int64_t s = j->sparse_dim - 1, rest = j->keys[first]; s >= 0; s--) {
            j->iout[s * j->nuniq + u] = rest % j->sizes[s];
            rest /= j->sizes[s];
        }
        char *dst = j->vout + (size_t)(u * j->inner) * j->es;
        memcpy(dst, j->vin + (size_t)(j->perm[first] * j->inner) * j->es,
               (size_t)j->inner * j->es);
        for (int64_t i = first + 1; i < last; i++)
            j->k->axpy(j->inner, 1.0, j->vin + (size_t)(j->perm[i] * j->inner) * j->es, dst);
    }
}

int sp__coalesce(weft_tensor **out, const weft_tensor *t)
{
    int vrc = sp__require_valid(t, "coalesce");
    if (vrc < 0)
        return vrc;
    const sp__coo *p = sp__coo_of(t);
    if (p->coalesced) {
        *out = weft_tensor_retain(t);
        return 0;
    }
    const sp__kernels *k = sp__kernels_for(weft_tensor_dtype(t), "coalesce");
    if (!k)
        return WEFT_EDTYPE;
    const int64_t *sizes = weft_tensor_sizes(t);
    int64_t limit = 1;
    for (int s = 0; s < p->sparse_dim; s++) {
        if (sizes[s] && limit > INT64_MAX / sizes[s])
            return weft_set_error(WEFT_EOVERFLOW,
                                  "coalesce: the sparse dimensions hold more than 2^63 "
                                  "positions");
        limit *= sizes[s];
    }
    coalesce_job j = {
        .ix = weft_tensor_data_ptr(p->indices),
        .sizes = sizes,
        .sparse_dim = p->sparse_dim,
        .nnz = p->nnz,
        .inner = prod(sizes + p->sparse_dim, p->dense_dim),
        .es = weft_dtype_size(weft_tensor_dtype(t)),
        .vin = weft_tensor_data_ptr(p->values),
        .k = k,
    };
    int64_t n = p->nnz;
    j.keys = malloc((size_t)n * sizeof *j.keys);
    j.perm = malloc((size_t)n * sizeof *j.perm);
    j.starts = malloc((size_t)(n + 1) * sizeof *j.starts);
    int64_t counts[64];
    j.chunk_count = counts;
    weft_tensor *ix = NULL, *val = NULL;
    int rc = 0;
    if (!j.keys || !j.perm || !j.starts) {
        rc = weft_set_error(WEFT_ENOMEM, "coalesce: out of memory for %lld entries",
                            (long long)n);
        goto done;
    }
    const int64_t grain = 1 << 15;
    sp__parallel(n, grain, keys_chunk, &j);
    if ((rc = sp__sort_keys(j.keys, j.perm, n, limit)) < 0)
        goto done;
    int nch = sp__parallel(n, grain, count_runs, &j);
    int64_t total = 0;
    for (int c = 0; c < nch; c++) {
        int64_t cnt = counts[c];
        counts[c] = total;
        total += cnt;
    }
    sp__parallel_chunks(nch, mark_runs, &j);
    j.nuniq = total;
    j.starts[total] = n;
    int64_t vs[WEFT_MAX_DIMS + 1];
    vs[0] = total;
    for (int d = 0; d < p->dense_dim; d++)
        vs[d + 1] = sizes[p->sparse_dim + d];
    rc = weft_empty(&ix, (int64_t[]){p->sparse_dim, total}, 2, WEFT_INT64,
                    weft_tensor_device(t));
    if (rc == 0)
        rc = weft_empty(&val, vs, p->dense_dim + 1, weft_tensor_dtype(t), weft_tensor_device(t));
    if (rc < 0)
        goto done;
    j.iout = weft_tensor_data_ptr(ix);
    j.vout = weft_tensor_data_ptr(val);
    sp__parallel(total, 4096, sum_runs, &j);
    rc = sp__coo_wrap(out, sizes, weft_tensor_ndim(t), ix, val, p->sparse_dim, true);
    ix = val = NULL;
done:
    weft_tensor_release(ix);
    weft_tensor_release(val);
    free(j.keys);
    free(j.perm);
    free(j.starts);
    return rc;
}
