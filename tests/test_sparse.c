/* tests/test_sparse.c — the sparse layouts of libweft-sparse.so (issue 16):
 * loaded with the default plugins, constructors and their checks (every
 * bad input refused with a message naming it, nothing left allocated),
 * conversions, coalesce (and its determinism across thread counts), and
 * each CPU operator compared with the same computation on strided tensors.
 * The operators are reached by name through weft_call_boxed, as an
 * application that does not link the plugin reaches them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/nn.h>
#include <weft/ops.h>
#include <weft/plugin.h>
#include <weft/weft.h>

#include "sparse_helpers.h"

static double scalar(weft_tensor *t)
{
    double v = NAN;
    weft_tensor_item(t, &v);
    weft_tensor_release(t);
    return v;
}

static weft_tensor *i64(const int64_t *v, int64_t r, int64_t c)
{
    weft_tensor *t = NULL, *b = NULL;
    weft_from_blob(&b, (void *)v, c ? (int64_t[]){r, c} : (int64_t[]){r}, NULL, c ? 2 : 1,
                   WEFT_INT64, WEFT_DEVICE_CPU, NULL, NULL);
    weft_clone(&t, b);
    weft_tensor_release(b);
    return t;
}

static weft_tensor *i32(const int32_t *v, int64_t n)
{
    weft_tensor *t = NULL, *b = NULL;
    weft_from_blob(&b, (void *)v, (int64_t[]){n}, NULL, 1, WEFT_INT32, WEFT_DEVICE_CPU, NULL,
                   NULL);
    weft_clone(&t, b);
    weft_tensor_release(b);
    return t;
}

static weft_tensor *f32(const float *v, const int64_t *sizes, int ndim)
{
    weft_tensor *t = NULL, *b = NULL;
    weft_from_blob(&b, (void *)v, sizes, NULL, ndim, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL, NULL);
    weft_clone(&t, b);
    weft_tensor_release(b);
    return t;
}

static int coo(weft_tensor **out, weft_tensor *ix, weft_tensor *v, const int64_t *size, int nd,
               bool check)
{
    weft_value a[] = {TV(ix), TV(v), LV(size, nd), BV(check)};
    return callop(out, "sparse_coo_tensor", a, 4);
}

static int csr(weft_tensor **out, weft_tensor *cr, weft_tensor *cl, weft_tensor *v,
               const int64_t *size, int nd, bool check)
{
    weft_value a[] = {TV(cr), TV(cl), TV(v), LV(size, nd), BV(check)};
    return callop(out, "sparse_csr_tensor", a, 5);
}

/* largest |a - b| over two strided tensors of one shape (inf if not) */
static double maxdiff(const weft_tensor *a, const weft_tensor *b)
{
    if (!a || !b || weft_tensor_ndim(a) != weft_tensor_ndim(b) ||
        weft_tensor_numel(a) != weft_tensor_numel(b))
        return INFINITY;
    for (int d = 0; d < weft_tensor_ndim(a); d++)
        if (weft_tensor_size(a, d) != weft_tensor_size(b, d))
            return INFINITY;
    weft_tensor *x = NULL, *y = NULL, *cx = NULL, *cy = NULL;
    weft_to_dtype(&x, a, WEFT_FLOAT64);
    weft_to_dtype(&y, b, WEFT_FLOAT64);
    weft_contiguous(&cx, x);
    weft_contiguous(&cy, y);
    double m = 0;
    const double *px = weft_tensor_data_ptr(cx), *py = weft_tensor_data_ptr(cy);
    for (int64_t i = 0; i < weft_tensor_numel(a); i++)
        m = fmax(m, fabs(px[i] - py[i]));
    weft_tensor *all[] = {x, y, cx, cy};
    for (int i = 0; i < 4; i++)
        weft_tensor_release(all[i]);
    return m;
}

static weft_tensor *dense(weft_tensor *t)
{
    weft_tensor *d = NULL;
    if (weft_to_strided(&d, t) < 0)
        diag("to_strided: %s", weft_last_error());
    return d;
}

/* |dense(s) - d| */
static double sdiff(weft_tensor *s, const weft_tensor *d)
{
    weft_tensor *x = dense(s);
    double m = maxdiff(x, d);
    weft_tensor_release(x);
    return m;
}

static uint64_t rng = 88172645463325252ull;
static double urand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* a random m x n strided matrix with about density * m * n nonzeros */
static weft_tensor *random_sparse_dense(int64_t m, int64_t n, double density, weft_dtype dt)
{
    weft_tensor *t = NULL, *c = NULL;
    weft_zeros(&t, (int64_t[]){m, n}, 2, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    double *p = weft_tensor_data_ptr(t);
    for (int64_t i = 0; i < m * n; i++)
        if (urand() < density)
            p[i] = urand() * 2 - 1;
    weft_to_dtype(&c, t, dt);
    weft_tensor_release(t);
    return c;
}

static weft_tensor *randn(int64_t m, int64_t n, weft_dtype dt)
{
    weft_tensor *t = NULL;
    weft_randn(&t, n ? (int64_t[]){m, n} : (int64_t[]){m}, n ? 2 : 1, dt, WEFT_DEVICE_CPU, NULL);
    return t;
}

static uint64_t host_bytes(void)
{
    weft_allocator_stats s = {.struct_size = sizeof s, .version = WEFT_ALLOCATOR_STATS_VERSION};
    weft_host_allocator_stats(&s);
    return s.allocated_bytes;
}

static weft_tensor *to_coo(weft_tensor *t, int64_t sd)
{
    weft_tensor *out = NULL;
    weft_value a[] = {TV(t), IV(sd)};
    if (callop(&out, "to_sparse", a, 2) < 0)
        diag("to_sparse: %s", weft_last_error());
    return out;
}

static void test_coo_basics(void)
{
    static const int64_t ix[] = {0, 1, 1, 0, 2, 0, 2, 2};
    static const float v[] = {1, 2, 3, 4};
    weft_tensor *I = i64(ix, 2, 4), *V = f32(v, (int64_t[]){4}, 1), *s = NULL;
    is_int(coo(&s, I, V, (int64_t[]){2, 3}, 2, true), 0, "sparse_coo_tensor");
    is_int(weft_tensor_layout(s), weft_layout_lookup("sparse_coo"), "its layout is sparse_coo");
    ok(weft_layout_flags(weft_layout_lookup("sparse_coo")) == WEFT_LAYOUT_VIEWS_COPY &&
           weft_layout_flags(weft_layout_lookup("sparse_csr")) == WEFT_LAYOUT_VIEWS_COPY,
       "both sparse layouts say their views are copies (WEFT_LAYOUT_VIEWS_COPY)");
    ok(weft_tensor_data_ptr(s) == NULL, "no strided data");
    is_int(scalar(call1("_nnz", s)), 4, "_nnz counts the duplicates");
    is_int(scalar(call1("is_coalesced", s)), 0, "not coalesced");
    is_int(scalar(call1("sparse_dim", s)), 2, "sparse_dim");
    is_int(scalar(call1("dense_dim", s)), 0, "dense_dim");
    static const float want[] = {0, 0, 5, 2, 0, 3};
    weft_tensor *W = f32(want, (int64_t[]){2, 3}, 2);
    is_double(sdiff(s, W), 0, 0, "to_dense sums the duplicates");
    weft_tensor *c = call1("coalesce", s);
    is_int(scalar(call1("_nnz", c)), 3, "coalesce: 3 entries");
    is_int(scalar(call1("is_coalesced", c)), 1, "coalesced");
    weft_tensor *ci = call1("indices", c), *cv = call1("values", c);
    const int64_t *pi = weft_tensor_data_ptr(ci);
    const float *pv = weft_tensor_data_ptr(cv);
    ok(pi[0] == 0 && pi[1] == 1 && pi[2] == 1 && pi[3] == 2 && pi[4] == 0 && pi[5] == 2,
       "coalesced indices sorted row-major");
    ok(pv[0] == 5 && pv[1] == 2 && pv[2] == 3, "values of duplicates summed");
    is_double(sdiff(c, W), 0, 0, "coalesced to_dense");
    weft_tensor *cc = call1("coalesce", c);
    ok(cc == c, "coalesce of a coalesced tensor is itself");
    /* accessors of the wrong layout */
    weft_tensor *bad = NULL;
    weft_value a[] = {TV(s)};
    is_int(callop(&bad, "crow_indices", a, 1), WEFT_ENOKERNEL, "crow_indices of COO refused");
    like(weft_last_error(), "sparse_coo", "naming the layout");
    weft_tensor *all[] = {I, V, s, W, c, ci, cv, cc};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        weft_tensor_release(all[i]);

    /* hybrid: one sparse dim, values of 2 */
    static const int64_t hix[] = {0, 2};
    static const float hv[] = {1, 2, 3, 4}, hwant[] = {1, 2, 0, 0, 3, 4};
    I = i64(hix, 1, 2);
    V = f32(hv, (int64_t[]){2, 2}, 2);
    W = f32(hwant, (int64_t[]){3, 2}, 2);
    is_int(coo(&s, I, V, (int64_t[]){3, 2}, 2, true), 0, "hybrid COO");
    is_int(scalar(call1("dense_dim", s)), 1, "dense_dim 1");
    is_double(sdiff(s, W), 0, 0, "hybrid to_dense");
    weft_tensor *h = to_coo(W, 1);
    is_int(scalar(call1("_nnz", h)), 2, "to_sparse(1): rows with a nonzero");
    is_double(sdiff(h, W), 0, 0, "to_sparse(1) round trip");
    weft_tensor *all2[] = {I, V, W, s, h};
    for (size_t i = 0; i < sizeof all2 / sizeof *all2; i++)
        weft_tensor_release(all2[i]);
}

static void test_bad_coo(void)
{
    static const float v[] = {1, 2, 3};
    weft_tensor *V = f32(v, (int64_t[]){3}, 1), *s = NULL;
    struct {
        int64_t ix[6];
        int rows, cols;
        int64_t size[3];
        int nd;
        int code;
        const char *msg;
    } cases[] = {
        {{0, 1, -1, 0, 0, 0}, 2, 3, {2, 2}, 2, WEFT_ERANGE, "indices[0][2] is -1, negative"},
        {{0, 1, 1, 0, 0, 5}, 2, 3, {2, 2}, 2, WEFT_ERANGE, "indices[1][2] is 5, out of range"},
        {{0, 1, 0, 1}, 2, 2, {2, 2}, 2, WEFT_ESHAPE, "nnz mismatch"},
        {{0, 1, 1, 0, 0, 0}, 2, 3, {2, 2, 2}, 3, WEFT_ESHAPE, "size has 3 dimensions"},
    };
    uint64_t before = host_bytes();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        weft_tensor *I = i64(cases[i].ix, cases[i].rows, cases[i].cols);
        s = NULL;
        is_int(coo(&s, I, V, cases[i].size, cases[i].nd, true), cases[i].code, "bad COO %zu", i);
        like(weft_last_error(), cases[i].msg, "message: %s", cases[i].msg);
        ok(s == NULL, "nothing made");
        weft_tensor_release(I);
    }
    is_int(host_bytes(), before, "no host memory left behind by the refusals");
    /* int32 indices: COO takes int64 only */
    weft_tensor *I = NULL, *I64 = i64((int64_t[]){0, 1, 1}, 1, 3);
    weft_to_dtype(&I, I64, WEFT_INT32);
    is_int(coo(&s, I, V, (int64_t[]){2}, 1, true), WEFT_EDTYPE, "int32 COO indices refused");
    like(weft_last_error(), "indices must be int64", "naming the dtype rule");
    /* int32 and int64 values are taken (to_dense sums duplicates in their
     * dtype), int8 refused */
    weft_tensor *IV_ = i64((int64_t[]){0, 1, 1}, 3, 0), *s64 = NULL, *d64 = NULL;
    is_int(coo(&s64, I64, IV_, (int64_t[]){2}, 1, true), 0, "int64 values");
    d64 = s64 ? dense(s64) : NULL;
    const int64_t *pd = d64 ? weft_tensor_data_ptr(d64) : NULL;
    ok(d64 && weft_tensor_dtype(d64) == WEFT_INT64 && pd[0] == 0 && pd[1] == 2,
       "to_dense: int64, duplicates summed");
    weft_tensor_release(s64);
    weft_tensor_release(d64);
    weft_tensor_release(IV_);
    IV_ = NULL;
    weft_tensor *IV64 = i64((int64_t[]){0, 1, 1}, 3, 0);
    weft_to_dtype(&IV_, IV64, WEFT_INT8);
    weft_tensor_release(IV64);
    is_int(coo(&s, I64, IV_, (int64_t[]){2}, 1, true), WEFT_EDTYPE, "int8 values refused");
    like(weft_last_error(), "float32, float64, int32 or int64", "naming the supported dtypes");
    /* check_invariants=false skips the range scan (not the shape checks) */
    weft_tensor *big = i64((int64_t[]){0, 7, 1}, 1, 3);
    is_int(coo(&s, big, V, (int64_t[]){2}, 1, false), 0, "check_invariants=false: unchecked");
    /* ...until a kernel addresses memory through the indices: then they
     * are checked once, and bad ones are an error, not a stray write */
    weft_tensor *d = NULL, *c = NULL, *P = NULL;
    is_int(weft_to_strided(&d, s), WEFT_ERANGE, "to_dense of the unchecked tensor refused");
    like(weft_last_error(), "indices[0][1] is 7, out of range", "naming the index");
    weft_value ca[] = {TV(s)};
    is_int(callop(&c, "coalesce", ca, 1), WEFT_ERANGE, "coalesce refused too");
    weft_zeros(&P, (int64_t[]){2}, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    is_int(weft_add_(P, s), WEFT_ERANGE, "and add_ into a strided tensor");
    weft_tensor *s2 = NULL;
    is_int(weft_mul_scalar(&s2, s, 2.0), 0, "a value-wise operator keeps the pattern");
    is_int(weft_to_strided(&d, s2), WEFT_ERANGE, "...and its being unchecked");
    weft_tensor_release(s2);
    weft_tensor_release(P);
    weft_tensor_release(s);
    s = NULL;
    weft_tensor *ok_ix = i64((int64_t[]){0, 1, 1}, 1, 3);
    is_int(coo(&s, ok_ix, V, (int64_t[]){2}, 1, false), 0, "unchecked but valid");
    is_int(weft_to_strided(&d, s), 0, "converts once checked");
    weft_tensor_release(d);
    weft_tensor_release(s);
    weft_tensor_release(ok_ix);
    s = NULL;
    is_int(coo(&s, big, V, (int64_t[]){2}, 1, true), WEFT_ERANGE, "...but checked by default");
    weft_tensor *all[] = {V, I, I64, IV_, big};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        weft_tensor_release(all[i]);
}

static void test_csr(void)
{
    /* [[1, 0, 2], [0, 3, 0]] */
    static const int64_t cr[] = {0, 2, 3}, cl[] = {0, 2, 1};
    static const int32_t cr32[] = {0, 2, 3}, cl32[] = {0, 2, 1};
    static const float v[] = {1, 2, 3}, want[] = {1, 0, 2, 0, 3, 0};
    weft_tensor *W = f32(want, (int64_t[]){2, 3}, 2), *V = f32(v, (int64_t[]){3}, 1);
    for (int w = 0; w < 2; w++) {
        weft_tensor *CR = w ? i32(cr32, 3) : i64(cr, 3, 0), *CL = w ? i32(cl32, 3) : i64(cl, 3, 0);
        weft_tensor *s = NULL;
        is_int(csr(&s, CR, CL, V, (int64_t[]){2, 3}, 2, true), 0, "sparse_csr_tensor (%s)",
               w ? "int32" : "int64");
        is_int(weft_tensor_layout(s), weft_layout_lookup("sparse_csr"), "layout sparse_csr");
        is_double(sdiff(s, W), 0, 0, "CSR to_dense");
        weft_tensor *ci = call1("crow_indices", s), *co = call1("col_indices", s);
        is_int(weft_tensor_dtype(ci), w ? WEFT_INT32 : WEFT_INT64, "crow keeps its dtype");
        is_int(weft_tensor_numel(co), 3, "col_indices");
        weft_tensor *c = to_coo(s, -1);
        is_int(weft_tensor_layout(c), weft_layout_lookup("sparse_coo"), "CSR -> COO");
        is_int(scalar(call1("is_coalesced", c)), 1, "CSR -> COO is coalesced");
        is_double(sdiff(c, W), 0, 0, "CSR -> COO values");
        weft_tensor *back = call1("to_sparse_csr", c);
        is_double(sdiff(back, W), 0, 0, "COO -> CSR values");
        weft_tensor *all[] = {CR, CL, s, ci, co, c, back};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            weft_tensor_release(all[i]);
    }
    /* bad CSR inputs */
    struct {
        int64_t cr[3], cl[3];
        int code;
        const char *msg;
    } cases[] = {
        {{0, 2, 3}, {2, 0, 1}, WEFT_EINVAL, "must be sorted and distinct"},
        {{0, 2, 3}, {0, 0, 1}, WEFT_EINVAL, "must be sorted and distinct"},
        {{0, 4, 3}, {0, 1, 2}, WEFT_EINVAL, "must not decrease"},
        {{0, 2, 4}, {0, 1, 2}, WEFT_EINVAL, "end at nnz = 3"},
        {{0, 2, 3}, {0, 1, 3}, WEFT_ERANGE, "col_indices[2] is 3, out of range"},
        {{0, 2, 3}, {0, -1, 1}, WEFT_ERANGE, "col_indices[1] is -1, negative"},
    };
    uint64_t before = host_bytes();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        weft_tensor *CR = i64(cases[i].cr, 3, 0), *CL = i64(cases[i].cl, 3, 0), *s = NULL;
        is_int(csr(&s, CR, CL, V, (int64_t[]){2, 3}, 2, true), cases[i].code, "bad CSR %zu", i);
        like(weft_last_error(), cases[i].msg, "message: %s", cases[i].msg);
        ok(s == NULL, "nothing made");
        weft_tensor_release(CR);
        weft_tensor_release(CL);
    }
    is_int(host_bytes(), before, "no host memory left behind by the CSR refusals");
    weft_tensor *CR = i64(cr, 3, 0), *CL32 = i32(cl32, 3), *s = NULL;
    is_int(csr(&s, CR, CL32, V, (int64_t[]){2, 3}, 2, true), WEFT_EDTYPE, "mixed index dtypes");
    like(weft_last_error(), "both be int32 or both int64", "message names the rule");
    weft_tensor *V2 = f32(v, (int64_t[]){2}, 1), *CL = i64(cl, 3, 0);
    is_int(csr(&s, CR, CL, V2, (int64_t[]){2, 3}, 2, true), WEFT_ESHAPE, "CSR nnz mismatch");
    like(weft_last_error(), "nnz mismatch", "message says so");
    weft_tensor *all[] = {CR, CL32, V2, CL, V, W};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        weft_tensor_release(all[i]);

    /* batched CSR through dense: every batch entry has 2 nonzeros */
    static const float bw[] = {1, 0, 0, 2, 0, 3, 4, 0};
    weft_tensor *B = f32(bw, (int64_t[]){2, 2, 2}, 3), *bs = call1("to_sparse_csr", B);
    ok(bs != NULL, "batched to_sparse_csr");
    is_double(sdiff(bs, B), 0, 0, "batched CSR round trip");
    weft_tensor *bc = to_coo(bs, -1);
    is_double(sdiff(bc, B), 0, 0, "batched CSR -> COO (3 sparse dims)");
    static const float uneven[] = {1, 0, 0, 2, 0, 3, 0, 0};
    weft_tensor *U = f32(uneven, (int64_t[]){2, 2, 2}, 3), *us = NULL;
    weft_value a[] = {TV(U)};
    is_int(callop(&us, "to_sparse_csr", a, 1), WEFT_EINVAL, "uneven batch refused");
    like(weft_last_error(), "same number of nonzeros", "message says why");
    weft_tensor *all3[] = {B, bs, bc, U};
    for (size_t i = 0; i < sizeof all3 / sizeof *all3; i++)
        weft_tensor_release(all3[i]);
}

/* a COO with duplicates of dense d: its entries twice, halves of the value */
static weft_tensor *dup_coo(weft_tensor *d)
{
    weft_tensor *c = to_coo(d, 2), *ix = NULL, *v = NULL, *h = NULL, *vv = NULL, *out = NULL;
    weft_tensor *ci = call1("indices", c), *cv = call1("values", c);
    weft_cat(&ix, (weft_tensor *[]){ci, ci}, 2, 1);
    weft_mul_scalar(&h, cv, 0.5);
    weft_cat(&vv, (weft_tensor *[]){h, h}, 2, 0);
    if (coo(&out, ix, vv, weft_tensor_sizes(d), 2, true) < 0)
        diag("dup_coo: %s", weft_last_error());
    weft_tensor *all[] = {c, ix, v, h, vv, ci, cv};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        weft_tensor_release(all[i]);
    return out;
}

static void test_products(void)
{
    for (int dti = 0; dti < 2; dti++) {
        weft_dtype dt = dti ? WEFT_FLOAT64 : WEFT_FLOAT32;
        double tol = dti ? 1e-12 : 1e-4;
        weft_tensor *A = random_sparse_dense(50, 40, 0.1, dt), *B = randn(40, 7, dt),
                    *x = randn(40, 0, dt), *C = randn(50, 7, dt), *ref = NULL, *refv = NULL;
        weft_mm(&ref, A, B);
        weft_mv(&refv, A, x);
        weft_tensor *forms[3] = {call1("to_sparse_csr", A), to_coo(A, 2), dup_coo(A)};
        const char *names[3] = {"CSR", "COO", "COO with duplicates"};
        for (int f = 0; f < 3; f++) {
            weft_tensor *r = NULL, *rv = NULL, *ra = NULL, *rm = NULL, *rma = NULL, *tmp = NULL,
                        *want = NULL;
            is_int(weft_mm(&r, forms[f], B), 0, "mm %s %s", names[f], weft_dtype_name(dt));
            is_double(maxdiff(r, ref), 0, tol, "mm %s matches strided", names[f]);
            is_int(weft_mv(&rv, forms[f], x), 0, "mv %s", names[f]);
            is_double(maxdiff(rv, refv), 0, tol, "mv %s matches", names[f]);
            is_int(weft_matmul(&rm, forms[f], B), 0, "matmul %s", names[f]);
            is_double(maxdiff(rm, ref), 0, tol, "matmul %s matches", names[f]);
            is_int(weft_addmm_ex(&ra, C, forms[f], B, 0.5, 2.0), 0, "addmm %s", names[f]);
            weft_mul_scalar(&tmp, C, 0.5);
            weft_add_ex(&want, tmp, ref, 2.0);
            is_double(maxdiff(ra, want), 0, tol, "addmm %s: beta self + alpha product", names[f]);
            is_int(weft_matmul(&rma, forms[f], x), 0, "matmul with a vector %s", names[f]);
            is_double(maxdiff(rma, refv), 0, tol, "matmul vector %s", names[f]);
            weft_tensor *all[] = {r, rv, ra, rm, rma, tmp, want};
            for (size_t i = 0; i < sizeof all / sizeof *all; i++)
                weft_tensor_release(all[i]);
        }
        /* CSR x CSR -> CSR */
        weft_tensor *A2 = random_sparse_dense(40, 30, 0.2, dt), *S2 = call1("to_sparse_csr", A2),
                    *P = NULL, *Pd = NULL;
        is_int(weft_mm(&P, forms[0], S2), 0, "CSR x CSR");
        is_int(weft_tensor_layout(P), weft_layout_lookup("sparse_csr"), "is CSR");
        weft_mm(&Pd, A, A2);
        is_double(sdiff(P, Pd), 0, tol, "CSR x CSR matches strided");
        /* bad shapes and layouts */
        weft_tensor *bad = NULL;
        is_int(weft_mm(&bad, forms[0], C), WEFT_ESHAPE, "mm shape mismatch refused");
        like(weft_last_error(), "cannot be multiplied", "message");
        is_int(weft_mm(&bad, B, forms[1]), WEFT_ENOTSUP, "dense x sparse refused");
        like(weft_last_error(), "'strided' and 'sparse_coo'", "naming both layouts");
        weft_tensor *all[] = {A, B, x, C, ref, refv, forms[0], forms[1], forms[2], A2, S2, P, Pd};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            weft_tensor_release(all[i]);
    }
}

static void test_elementwise(void)
{
    weft_tensor *A = random_sparse_dense(20, 30, 0.2, WEFT_FLOAT64),
                *B = random_sparse_dense(20, 30, 0.2, WEFT_FLOAT64);
    weft_tensor *SA = to_coo(A, 2), *SB = dup_coo(B), *r = NULL, *want = NULL;
    is_int(weft_add_ex(&r, SA, SB, 3.0), 0, "sparse + sparse");
    is_int(weft_tensor_layout(r), weft_layout_lookup("sparse_coo"), "stays sparse");
    double na = scalar(call1("_nnz", SA)), nb = scalar(call1("_nnz", SB));
    is_int(scalar(call1("_nnz", r)), na + nb, "the entries side by side, uncoalesced, as torch's");
    weft_add_ex(&want, A, B, 3.0);
    is_double(sdiff(r, want), 0, 1e-12, "sparse + 3 sparse");
    weft_tensor_release(r);
    weft_tensor_release(want);
    weft_tensor *E = NULL, *Z = NULL;
    weft_zeros(&Z, (int64_t[]){20, 30}, 2, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    E = to_coo(Z, 2);
    is_int(weft_add_ex(&r, E, SB, 2.0), 0, "empty + sparse");
    weft_mul_scalar(&want, B, 2.0);
    is_double(sdiff(r, want), 0, 1e-12, "is the other, scaled");
    weft_tensor_release(r);
    weft_tensor_release(want);
    is_int(weft_add(&r, SA, E), 0, "sparse + empty");
    is_double(sdiff(r, A), 0, 0, "is the first");
    weft_tensor_release(r);
    weft_tensor_release(E);
    weft_tensor_release(Z);
    is_int(weft_sub(&r, SA, B), 0, "sparse - dense");
    is_int(weft_tensor_layout(r), WEFT_LAYOUT_STRIDED, "is dense");
    weft_sub(&want, A, B);
    is_double(maxdiff(r, want), 0, 1e-12, "sparse - dense values");
    weft_tensor_release(r);
    weft_tensor_release(want);
    weft_tensor *CA = call1("to_sparse_csr", A), *CB = call1("to_sparse_csr", B);
    is_int(weft_add(&r, CA, CB), 0, "CSR + CSR");
    is_int(weft_tensor_layout(r), weft_layout_lookup("sparse_csr"), "stays CSR");
    weft_add(&want, A, B);
    is_double(sdiff(r, want), 0, 1e-12, "CSR + CSR values");
    weft_tensor_release(r);
    weft_tensor_release(want);
    is_int(weft_add(&r, SA, CB), WEFT_ENOTSUP, "COO + CSR refused");
    like(weft_last_error(), "cannot mix layouts 'sparse_coo' and 'sparse_csr'", "naming both");
    /* products */
    is_int(weft_mul_scalar(&r, SB, -2.5), 0, "mul_scalar");
    weft_mul_scalar(&want, B, -2.5);
    is_double(sdiff(r, want), 0, 1e-12, "mul_scalar values");
    weft_tensor_release(r);
    weft_tensor_release(want);
    is_int(weft_mul(&r, SA, SB), 0, "sparse * sparse");
    weft_mul(&want, A, B);
    is_double(sdiff(r, want), 0, 1e-12, "sparse * sparse values (the intersection)");
    weft_tensor_release(r);
    weft_tensor_release(want);
    /* value-wise unary */
    typedef int (*un)(weft_tensor **, const weft_tensor *);
    un fns[] = {weft_neg, weft_abs, weft_relu};
    const char *nm[] = {"neg", "abs", "relu"};
    for (int i = 0; i < 3; i++) {
        is_int(fns[i](&r, SB), 0, "%s", nm[i]);
        fns[i](&want, B);
        is_double(sdiff(r, want), 0, 1e-12, "%s values", nm[i]);
        weft_tensor_release(r);
        weft_tensor_release(want);
    }
    weft_tensor *ab = NULL;
    weft_abs(&ab, SA);
    is_int(weft_sqrt(&r, ab), 0, "sqrt");
    weft_tensor *aa = NULL;
    weft_abs(&aa, A);
    weft_sqrt(&want, aa);
    is_double(sdiff(r, want), 0, 1e-12, "sqrt values");
    weft_tensor *all0[] = {r, want, ab, aa};
    for (size_t i = 0; i < sizeof all0 / sizeof *all0; i++)
        weft_tensor_release(all0[i]);
    /* an operator without a sparse kernel: a clear refusal */
    r = NULL;
    is_int(weft_exp(&r, SA), WEFT_ENOKERNEL, "exp has no sparse kernel");
    like(weft_last_error(), "exp", "names the operator");
    like(weft_last_error(), "sparse_coo", "and the layout");
    ok(r == NULL, "no result");
    /* sum */
    double total = 0;
    weft_tensor *s = NULL;
    is_int(weft_sum(&s, SB, NULL, 0, false), 0, "sum of all");
    weft_sum(&want, B, NULL, 0, false);
    weft_tensor_item(want, &total);
    is_double(scalar(s), total, 1e-12, "sum of all values");
    weft_tensor_release(want);
    is_int(weft_sum(&r, SB, (int64_t[]){1}, 1, false), 0, "sum over dim 1");
    is_int(weft_tensor_layout(r), weft_layout_lookup("sparse_coo"), "sparse over dim 0 left");
    weft_sum(&want, B, (int64_t[]){1}, 1, false);
    is_double(sdiff(r, want), 0, 1e-12, "sum over dim 1 values");
    weft_tensor_release(r);
    weft_tensor_release(want);
    /* keepdim: a summed sparse dim stays, of size 1 */
    is_int(weft_sum(&r, SB, (int64_t[]){1}, 1, true), 0, "sum over dim 1, keepdim");
    is_int(weft_tensor_layout(r), weft_layout_lookup("sparse_coo"), "stays sparse");
    ok(weft_tensor_ndim(r) == 2 && weft_tensor_size(r, 1) == 1, "its dim 1 of size 1");
    weft_sum(&want, B, (int64_t[]){1}, 1, true);
    is_double(sdiff(r, want), 0, 1e-12, "sum over dim 1, keepdim, values");
    weft_tensor_release(r);
    weft_tensor_release(want);
    is_int(weft_sum(&r, SB, (int64_t[]){0, 1}, 2, true), 0, "sum over every dim, keepdim");
    ok(weft_tensor_layout(r) == WEFT_LAYOUT_STRIDED && weft_tensor_ndim(r) == 2 &&
           weft_tensor_numel(r) == 1,
       "strided [1, 1]");
    weft_sum(&want, B, (int64_t[]){0, 1}, 2, true);
    is_double(sdiff(r, want), 0, 1e-12, "its value");
    weft_tensor_release(r);
    weft_tensor_release(want);
    weft_tensor *all[] = {A, B, SA, SB, CA, CB};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        weft_tensor_release(all[i]);
}

/* division and powers by a number, in-place scaling, and a sparse times
 * a strided tensor of its shape (sparse on the sparse one's pattern, as
 * torch's); what would change the implicit zeros is refused by name */
static void test_scalar_and_dense_arithmetic(void)
{
    int coo_id = weft_layout_lookup("sparse_coo"), csr_id = weft_layout_lookup("sparse_csr");
    weft_tensor *A = random_sparse_dense(7, 9, 0.3, WEFT_FLOAT64),
                *D = random_sparse_dense(7, 9, 1.0, WEFT_FLOAT64);
    weft_tensor *S = dup_coo(A), *C = call1("to_sparse_csr", A), *r = NULL, *want = NULL;
    is_int(weft_div_scalar(&r, S, 4.0), 0, "sparse / 4");
    weft_div_scalar(&want, A, 4.0);
    is_double(r ? sdiff(r, want) : INFINITY, 0, 1e-15, "its values");
    weft_tensor_release(r);
    is_int(weft_div_scalar(&r, C, 4.0), 0, "CSR / 4");
    is_int(r ? weft_tensor_layout(r) : -1, csr_id, "stays CSR");
    is_double(r ? sdiff(r, want) : INFINITY, 0, 1e-15, "its values");
    weft_tensor_release(r);
    weft_tensor_release(want);
    r = NULL;
    is_int(weft_div_scalar(&r, S, 0.0), WEFT_EINVAL, "sparse / 0 refused");
    like(weft_last_error(), "implicit zeros NaN", "saying why");
    ok(r == NULL, "nothing returned");
    /* x ** 3 after the duplicates are summed (dup_coo halves each entry
     * into two: (a/2)^3 + (a/2)^3 would be wrong) */
    is_int(weft_pow_scalar(&r, S, 3.0), 0, "sparse ** 3");
    weft_pow_scalar(&want, A, 3.0);
    is_double(r ? sdiff(r, want) : INFINITY, 0, 1e-12, "of the summed entries");
    weft_tensor_release(r);
    weft_tensor_release(want);
    r = NULL;
    is_int(weft_pow_scalar(&r, S, 0.0), WEFT_EINVAL, "sparse ** 0 refused");
    like(weft_last_error(), "0 ** 0 is not 0", "saying why");
    /* in place: the values scaled where they lie */
    weft_tensor *S2 = NULL;
    weft_clone(&S2, S);
    is_int(weft_mul_scalar_(S2, -2.0), 0, "sparse *= -2");
    weft_mul_scalar(&want, A, -2.0);
    is_double(sdiff(S2, want), 0, 1e-15, "scaled in place");
    is_double(sdiff(S, A), 0, 0, "the clone's source untouched");
    weft_tensor_release(want);
    /* sparse * dense and dense * sparse: sparse, on S's pattern */
    weft_mul(&want, A, D);
    is_int(weft_mul(&r, S, D), 0, "sparse * dense");
    is_int(r ? weft_tensor_layout(r) : -1, coo_id, "is sparse");
    is_double(r ? sdiff(r, want) : INFINITY, 0, 1e-15, "the product");
    ok(r && scalar(call1("_nnz", r)) == scalar(call1("_nnz", S)), "on the sparse operand's entries");
    weft_tensor_release(r);
    is_int(weft_mul(&r, D, C), 0, "dense * CSR");
    is_int(r ? weft_tensor_layout(r) : -1, csr_id, "is CSR");
    is_double(r ? sdiff(r, want) : INFINITY, 0, 1e-15, "the product");
    weft_tensor_release(r);
    /* hybrid: the dense dims multiply element by element too */
    weft_tensor *H = NULL, *HD = NULL, *Hs = NULL, *hw = NULL;
    weft_randn(&H, (int64_t[]){4, 3, 2}, 3, WEFT_FLOAT64, WEFT_DEVICE_CPU, NULL);
    weft_randn(&HD, (int64_t[]){4, 3, 2}, 3, WEFT_FLOAT64, WEFT_DEVICE_CPU, NULL);
    Hs = to_coo(H, 1);
    weft_mul(&hw, H, HD);
    is_int(weft_mul(&r, Hs, HD), 0, "hybrid sparse * dense");
    is_double(r ? sdiff(r, hw) : INFINITY, 0, 1e-15, "the product");
    weft_tensor_release(r);
    r = NULL;
    weft_tensor *small = random_sparse_dense(1, 9, 1.0, WEFT_FLOAT64);
    is_int(weft_mul(&r, S, small), WEFT_ESHAPE, "sparse * a dense tensor of another shape");
    like(weft_last_error(), "no broadcasting", "refused, naming the rule");
    ok(r == NULL, "nothing returned");
    /* sparse += sparse in place: the entries appended; an alias made
     * before keeps the old ones */
    weft_tensor *acc = NULL, *old = NULL, *sum2 = NULL, *Sd = NULL;
    weft_clone(&acc, S);
    weft_detach(&old, acc);
    weft_tensor *SD = to_coo(D, 2);
    is_int(weft_add_ex_(acc, SD, 0.5), 0, "sparse.add_(sparse, alpha 0.5)");
    weft_add_ex(&sum2, A, D, 0.5);
    is_double(sdiff(acc, sum2), 0, 1e-15, "the sum");
    ok(scalar(call1("_nnz", acc)) == scalar(call1("_nnz", S)) + scalar(call1("_nnz", SD)),
       "the entries appended");
    is_double(sdiff(old, A), 0, 0, "an alias made before keeps the old entries");
    /* stack: along a new sparse dim (0) and a new dense one (after them) */
    for (int d = 0; d <= 2; d += 2) {
        weft_tensor *st = NULL, *sd = NULL;
        is_int(weft_stack(&st, (weft_tensor *[]){S, SD}, 2, d), 0, "stack of two, dim %d", d);
        weft_stack(&sd, (weft_tensor *[]){A, D}, 2, d);
        is_int(st ? weft_tensor_layout(st) : -1, coo_id, "sparse");
        is_double(st ? sdiff(st, sd) : INFINITY, 0, 0, "the stacked values");
        weft_tensor_release(st);
        weft_tensor_release(sd);
    }
    weft_tensor *tmp2[] = {acc, old, sum2, Sd, SD};
    for (size_t i = 0; i < sizeof tmp2 / sizeof *tmp2; i++)
        weft_tensor_release(tmp2[i]);
    /* norm over all elements: of the summed duplicates; for p < 0 the
     * implicit zeros decide it */
    for (int k = 0; k < 3; k++) {
        static const double ps[] = {2.0, 1.0, -INFINITY};
        weft_tensor *ns = NULL, *nd = NULL;
        is_int(weft_norm(&ns, S, &ps[k], NULL, 0, false), 0, "norm(p=%g) of a sparse tensor", ps[k]);
        weft_norm(&nd, A, &ps[k], NULL, 0, false);
        is_double(ns ? maxdiff(ns, nd) : INFINITY, 0, 1e-12, "the dense tensor's");
        weft_tensor_release(ns);
        weft_tensor_release(nd);
    }
    r = NULL;
    is_int(weft_norm(&r, S, NULL, (int64_t[]){0}, 1, false), WEFT_ENOTSUP, "norm over a dim");
    like(weft_last_error(), "over some dims is not supported", "refused by name");
    /* sparse_to_dtype: the values converted, the pattern kept (its being
     * coalesced too); a missing dtype refused */
    weft_tensor *f32v = NULL, *Sc = call1("coalesce", S);
    weft_value ta[] = {TV(Sc), {.tag = WEFT_VALUE_DTYPE, .u.dtype = WEFT_FLOAT32}};
    is_int(callop(&r, "sparse_to_dtype", ta, 2), 0, "sparse_to_dtype float32");
    is_int(r ? weft_tensor_dtype(r) : -1, WEFT_FLOAT32, "float32");
    weft_to_dtype(&f32v, A, WEFT_FLOAT32);
    is_double(r ? sdiff(r, f32v) : INFINITY, 0, 0, "the values converted");
    ok(r && scalar(call1("is_coalesced", r)) == 1, "still coalesced");
    weft_tensor_release(r);
    r = NULL;
    weft_value tn[] = {TV(Sc), {.tag = WEFT_VALUE_NONE}};
    is_int(callop(&r, "sparse_to_dtype", tn, 2), WEFT_EINVAL, "sparse_to_dtype without a dtype");
    like(weft_last_error(), "a dtype is required", "refused, saying so");
    weft_tensor_release(f32v);
    weft_tensor_release(Sc);
    weft_tensor *all[] = {A, D, S, C, want, S2, H, HD, Hs, hw, small};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        weft_tensor_release(all[i]);
}

static void test_shape_ops(void)
{
    weft_tensor *A = random_sparse_dense(6, 5, 0.4, WEFT_FLOAT32);
    weft_tensor *S = dup_coo(A), *r = NULL, *want = NULL, *tv = NULL;
    /* transpose */
    weft_value ta[] = {TV(S), IV(0), IV(1)};
    is_int(callop(&r, "sparse_transpose", ta, 3), 0, "sparse_transpose");
    weft_transpose(&tv, A, 0, 1);
    is_double(sdiff(r, tv), 0, 0, "transpose values");
    weft_tensor_release(r);
    weft_tensor_release(tv);
    /* index_select with repeats */
    static const int64_t sel[] = {4, 0, 4, 2};
    weft_tensor *idx = i64(sel, 4, 0);
    is_int(weft_index_select(&r, S, 1, idx), 0, "index_select on a sparse dim");
    weft_index_select(&want, A, 1, idx);
    is_double(sdiff(r, want), 0, 0, "index_select values");
    weft_tensor_release(r);
    weft_tensor_release(want);
    weft_tensor *badidx = i64((int64_t[]){0, 9}, 2, 0);
    is_int(weft_index_select(&r, S, 1, badidx), WEFT_ERANGE, "index_select out of range");
    like(weft_last_error(), "index[1] is 9", "message");
    /* narrow and select */
    weft_value na[] = {TV(S), IV(0), IV(1), IV(3)};
    is_int(callop(&r, "sparse_narrow", na, 4), 0, "sparse_narrow");
    weft_narrow(&tv, A, 0, 1, 3);
    is_double(sdiff(r, tv), 0, 0, "narrow values");
    weft_tensor_release(r);
    weft_tensor_release(tv);
    weft_value sa[] = {TV(S), IV(1), IV(-1)};
    is_int(callop(&r, "sparse_select", sa, 3), 0, "sparse_select");
    weft_select(&tv, A, 1, 4);
    is_double(sdiff(r, tv), 0, 0, "select values");
    weft_tensor_release(r);
    weft_tensor_release(tv);
    weft_value sb[] = {TV(S), IV(0), IV(6)};
    is_int(callop(&r, "sparse_select", sb, 3), WEFT_ERANGE, "select out of range");
    /* cat along both sparse dims */
    for (int d = 0; d < 2; d++) {
        is_int(weft_cat(&r, (weft_tensor *[]){S, S}, 2, d), 0, "cat dim %d", d);
        weft_cat(&want, (weft_tensor *[]){A, A}, 2, d);
        is_double(sdiff(r, want), 0, 0, "cat dim %d values", d);
        weft_tensor_release(r);
        weft_tensor_release(want);
    }
    /* clone and copy_ */
    weft_tensor *c = NULL;
    is_int(weft_clone(&c, S), 0, "clone");
    is_double(sdiff(c, A), 0, 0, "clone values");
    weft_tensor *B = random_sparse_dense(6, 5, 0.4, WEFT_FLOAT32);
    weft_tensor *SBt = to_coo(B, 2);
    is_int(weft_copy_(c, SBt), 0, "copy_ sparse into sparse");
    is_double(sdiff(c, B), 0, 0, "copy_ took the new values");
    is_double(sdiff(S, A), 0, 0, "the clone's source kept its own");
    weft_tensor *wrong = random_sparse_dense(5, 5, 0.4, WEFT_FLOAT32);
    is_int(weft_copy_(c, wrong), WEFT_ESHAPE, "copy_ of another shape refused");
    is_double(sdiff(c, B), 0, 0, "and left the tensor as it was");
    weft_tensor *all[] = {A, S, idx, badidx, c, B, SBt, wrong};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        weft_tensor_release(all[i]);
}

/* The core's own view functions on sparse tensors (the layout's view
 * hook): weft_transpose, weft_t, weft_permute, weft_select, weft_narrow,
 * weft_slice, weft_contiguous, weft_detach answer as torch's do on a
 * sparse tensor, compared with the same view of the dense tensor; what
 * the layouts cannot do is refused by name, leaving *out NULL. */
static void check_view(int rc, weft_tensor *r, const weft_tensor *want, int layout,
                       const char *what)
{
    is_int(rc, 0, "%s", what);
    if (rc < 0)
        diag("%s", weft_last_error());
    is_int(r ? weft_tensor_layout(r) : -1, layout, "%s: the layout is kept", what);
    is_double(r ? sdiff(r, want) : INFINITY, 0, 0, "%s: the values", what);
}

static void refused(int rc, weft_tensor *r, int code, const char *msg, const char *what)
{
    is_int(rc, code, "%s refused", what);
    like(weft_last_error(), msg, "%s: the message", what);
    ok(r == NULL, "%s: nothing returned", what);
}

static void test_core_views(void)
{
    int coo_id = weft_layout_lookup("sparse_coo"), csr_id = weft_layout_lookup("sparse_csr");
    weft_tensor *A = random_sparse_dense(6, 5, 0.4, WEFT_FLOAT32);
    weft_tensor *S = dup_coo(A), *r = NULL, *want = NULL;
#define VIEW_CASE(call_sparse, call_dense, layout, what)                                   \
    do {                                                                                  \
        int rc_ = (call_sparse);                                                          \
        call_dense;                                                                       \
        check_view(rc_, r, want, layout, what);                                           \
        weft_tensor_release(r);                                                           \
        weft_tensor_release(want);                                                        \
        r = want = NULL;                                                                  \
    } while (0)
    VIEW_CASE(weft_transpose(&r, S, 0, 1), weft_transpose(&want, A, 0, 1), coo_id, "transpose");
    VIEW_CASE(weft_transpose(&r, S, -1, 0), weft_transpose(&want, A, 1, 0), coo_id,
              "transpose with a negative dim");
    VIEW_CASE(weft_t(&r, S), weft_t(&want, A), coo_id, "t");
    VIEW_CASE(weft_permute(&r, S, (int64_t[]){1, 0}, 2),
              weft_permute(&want, A, (int64_t[]){1, 0}, 2), coo_id, "permute");
    VIEW_CASE(weft_select(&r, S, 1, -1), weft_select(&want, A, 1, 4), coo_id, "select");
    VIEW_CASE(weft_select(&r, S, 0, 2), weft_select(&want, A, 0, 2), coo_id, "select dim 0");
    VIEW_CASE(weft_narrow(&r, S, 0, 1, 3), weft_narrow(&want, A, 0, 1, 3), coo_id, "narrow");
    VIEW_CASE(weft_slice(&r, S, 1, -3, 100, 1), weft_slice(&want, A, 1, -3, 100, 1), coo_id,
              "slice, Python's clamping");
    VIEW_CASE(weft_narrow(&r, S, 1, 2, 0), weft_narrow(&want, A, 1, 2, 0), coo_id,
              "narrow to nothing");
    /* the identity permutation is a new tensor all the same */
    VIEW_CASE(weft_permute(&r, S, (int64_t[]){0, 1}, 2), weft_alias(&want, A), coo_id,
              "permute (identity)");
    /* unsqueeze: torch's rule, a sparse dim where the new dim's place is
     * <= sparse_dim, else a dense one */
    VIEW_CASE(weft_unsqueeze(&r, S, 0), weft_unsqueeze(&want, A, 0), coo_id, "unsqueeze(0)");
    VIEW_CASE(weft_unsqueeze(&r, S, -1), weft_unsqueeze(&want, A, -1), coo_id, "unsqueeze(-1)");
    weft_tensor *u0 = NULL, *u2 = NULL;
    weft_unsqueeze(&u0, S, 2);
    ok(u0 && scalar(call1("sparse_dim", u0)) == 3, "unsqueeze(2) of 2 sparse dims: a sparse dim");
    weft_tensor *c = NULL;
    is_int(weft_contiguous(&c, S), 0, "contiguous");
    ok(c == S, "is the tensor itself, as torch's");
    weft_tensor_release(c);
    /* hybrid: 4-D with 3 sparse dims and 1 dense: a permutation of the
     * sparse dims is several swaps; a dense dim cannot become sparse */
    weft_tensor *H = NULL, *Hs = NULL;
    weft_randn(&H, (int64_t[]){3, 4, 2, 3}, 4, WEFT_FLOAT64, WEFT_DEVICE_CPU, NULL);
    Hs = to_coo(H, 3);
    VIEW_CASE(weft_permute(&r, Hs, (int64_t[]){2, 0, 1, 3}, 4),
              weft_permute(&want, H, (int64_t[]){2, 0, 1, 3}, 4), coo_id,
              "permute of three sparse dims");
    VIEW_CASE(weft_select(&r, Hs, 3, 1), weft_select(&want, H, 3, 1), coo_id,
              "select on the dense dim");
    VIEW_CASE(weft_unsqueeze(&r, Hs, 4), weft_unsqueeze(&want, H, 4), coo_id,
              "unsqueeze among the dense dims");
    weft_unsqueeze(&u2, Hs, 4);
    ok(u2 && scalar(call1("sparse_dim", u2)) == 3 && scalar(call1("dense_dim", u2)) == 2,
       "a dense dim there");
    VIEW_CASE(weft_narrow(&r, Hs, 3, 1, 2), weft_narrow(&want, H, 3, 1, 2), coo_id,
              "narrow on the dense dim");
    weft_tensor *H2 = NULL, *H2s = NULL;
    weft_randn(&H2, (int64_t[]){3, 4, 2, 3}, 4, WEFT_FLOAT64, WEFT_DEVICE_CPU, NULL);
    H2s = to_coo(H2, 2);
    VIEW_CASE(weft_permute(&r, H2s, (int64_t[]){1, 0, 3, 2}, 4),
              weft_permute(&want, H2, (int64_t[]){1, 0, 3, 2}, 4), coo_id,
              "permute of the sparse dims and of the dense dims");
    int rc = weft_transpose(&r, Hs, 0, 3);
    refused(rc, r, WEFT_ENOTSUP, "cannot move dense dimension 3 to position 0", "transpose sparse with dense");
    /* what the sparse layouts do not do */
    rc = weft_slice(&r, S, 0, 0, 6, 2);
    refused(rc, r, WEFT_ENOTSUP, "slice: a step of 2 is not supported for a sparse_coo", "a step of 2");
    rc = weft_reshape(&r, S, (int64_t[]){30}, 1);
    refused(rc, r, WEFT_ENOTSUP, "reshape: not supported for a sparse_coo tensor", "reshape");
    weft_tensor *U = NULL;
    weft_unsqueeze(&U, S, 1);
    rc = weft_squeeze(&r, U, 1);
    refused(rc, r, WEFT_ENOTSUP, "squeeze: not supported for a sparse_coo tensor", "squeeze");
    weft_tensor_release(U);
    rc = weft_expand(&r, S, (int64_t[]){2, 6, 5}, 3);
    refused(rc, r, WEFT_ENOTSUP, "expand: not supported", "expand");
    rc = weft_select(&r, S, 0, 6);
    refused(rc, r, WEFT_ERANGE, "index 6 out of range", "select out of range (the core's check)");
    /* CSR: narrow keeps the layout; transpose (torch's is sparse_csc) and
     * select (torch's is sparse_coo) are refused, naming the way */
    weft_tensor *C = call1("to_sparse_csr", A);
    VIEW_CASE(weft_narrow(&r, C, 0, 2, 3), weft_narrow(&want, A, 0, 2, 3), csr_id, "CSR narrow");
    VIEW_CASE(weft_narrow(&r, C, 1, 1, 3), weft_narrow(&want, A, 1, 1, 3), csr_id,
              "CSR narrow of columns");
    rc = weft_t(&r, C);
    refused(rc, r, WEFT_ENOTSUP, "sparse_csc", "CSR t");
    rc = weft_select(&r, C, 0, 1);
    refused(rc, r, WEFT_ENOTSUP, "to_sparse() first", "CSR select");
    is_int(weft_contiguous(&c, C), 0, "CSR contiguous");
    ok(c == C, "is the tensor itself");
    weft_tensor_release(c);
    /* detach: a new sparse tensor sharing the values, not requiring grad */
    weft_tensor *L = dup_coo(A), *Ld = NULL;
    weft_tensor_set_requires_grad(L, true);
    is_int(weft_detach(&Ld, L), 0, "detach of a sparse leaf requiring grad");
    ok(Ld && !weft_tensor_requires_grad(Ld), "does not require grad");
    is_double(Ld ? sdiff(Ld, A) : INFINITY, 0, 0, "same values");
    /* (grad mode off: values() of a tensor requiring grad is recorded) */
    bool was = weft_set_grad_enabled(false);
    weft_tensor *lv = call1("_values", L), *ldv = Ld ? call1("_values", Ld) : NULL;
    weft_set_grad_enabled(was);
    ok(ldv && weft_tensor_data_ptr(lv) == weft_tensor_data_ptr(ldv), "sharing them, as torch's");
    /* gradients through the views: loss = sum(to_dense(view(L)) * M) gives
     * L a sparse gradient on its own pattern, M put back through the view
     * and masked as torch's to_dense masks it */
    weft_tensor *M = NULL, *Mt = NULL;
    weft_randn(&M, (int64_t[]){5, 6}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
    weft_transpose(&Mt, M, 0, 1);
    weft_tensor *v = NULL, *vd = NULL, *p = NULL, *y = NULL, *g = NULL, *gd = NULL;
    is_int(weft_t(&v, L), 0, "t of a sparse leaf requiring grad");
    ok(v && weft_tensor_requires_grad(v), "records a node");
    vd = call1("to_dense", v);
    weft_mul(&p, vd, M);
    weft_sum(&y, p, NULL, 0, false);
    is_int(weft_backward(&y, 1, NULL, false, false), 0, "backward through t");
    weft_tensor_grad(&g, L);
    is_int(g ? weft_tensor_layout(g) : -1, coo_id, "the leaf's gradient is sparse_coo");
    /* on L's pattern: M^T where A (hence L) has an entry, else 0 */
    weft_tensor *mask = NULL, *masked = NULL;
    weft_ne_scalar(&mask, A, 0.0);
    weft_mul(&masked, Mt, mask);
    gd = g ? dense(g) : NULL;
    is_double(maxdiff(gd, masked), 0, 1e-6, "and M^T on the leaf's pattern");
    weft_tensor *all1[] = {v, vd, p, y, g, gd};
    for (size_t i = 0; i < sizeof all1 / sizeof *all1; i++)
        weft_tensor_release(all1[i]);
    /* select: row 2 of the gradient is the gradient of the row, the rest 0 */
    weft_tensor_set_grad(L, NULL);
    weft_tensor *row = NULL, *mrow = NULL, *want_g = NULL, *wrow = NULL;
    is_int(weft_select(&v, L, 0, 2), 0, "select of a sparse leaf requiring grad");
    vd = call1("to_dense", v);
    weft_select(&mrow, Mt, 0, 2);
    weft_mul(&p, vd, mrow);
    weft_sum(&y, p, NULL, 0, false);
    is_int(weft_backward(&y, 1, NULL, false, false), 0, "backward through select");
    weft_tensor_grad(&g, L);
    is_int(g ? weft_tensor_layout(g) : -1, coo_id, "the leaf's gradient is sparse_coo");
    weft_zeros(&want_g, (int64_t[]){6, 5}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    weft_select(&wrow, want_g, 0, 2);
    weft_select(&row, masked, 0, 2);
    weft_copy_(wrow, row);
    gd = g ? dense(g) : NULL;
    is_double(maxdiff(gd, want_g), 0, 1e-6, "and row 2 of the pattern's M^T");
    weft_tensor *all2[] = {v, vd, p, y, g, gd, row, mrow, want_g, wrow};
    for (size_t i = 0; i < sizeof all2 / sizeof *all2; i++)
        weft_tensor_release(all2[i]);
    /* unsqueeze of the uncoalesced L: the gradient comes back through
     * values() of L coalesced (each duplicate once, not twice) */
    weft_tensor_set_grad(L, NULL);
    weft_tensor *mu = NULL;
    is_int(weft_unsqueeze(&v, L, 1), 0, "unsqueeze of a sparse leaf requiring grad");
    vd = call1("to_dense", v);
    weft_unsqueeze(&mu, Mt, 1);
    weft_mul(&p, vd, mu);
    weft_sum(&y, p, NULL, 0, false);
    is_int(weft_backward(&y, 1, NULL, false, false), 0, "backward through unsqueeze");
    weft_tensor_grad(&g, L);
    gd = g ? call1("to_dense", g) : NULL;
    is_double(maxdiff(gd, masked), 0, 1e-6, "M^T on the leaf's pattern, duplicates once");
    weft_tensor *all3[] = {v, vd, p, y, g, gd, mu, u0, u2};
    for (size_t i = 0; i < sizeof all3 / sizeof *all3; i++)
        weft_tensor_release(all3[i]);
    weft_tensor *all[] = {A, S, H, Hs, H2, H2s, C, L, Ld, lv, ldv, M, Mt, mask, masked};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        weft_tensor_release(all[i]);
#undef VIEW_CASE
}

/* 200k entries over 1000 x 100 positions: many duplicates; the values are
 * chosen so that the order of summation changes the float32 result */
static void test_coalesce_parallel(void)
{
    int64_t n = 200000;
    weft_tensor *ix = NULL, *v = NULL, *s = NULL;
    weft_empty(&ix, (int64_t[]){2, n}, 2, WEFT_INT64, WEFT_DEVICE_CPU);
    weft_empty(&v, (int64_t[]){n}, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    int64_t *pi = weft_tensor_data_ptr(ix);
    float *pv = weft_tensor_data_ptr(v);
    for (int64_t e = 0; e < n; e++) {
        pi[e] = (int64_t)(urand() * 1000);
        pi[n + e] = (int64_t)(urand() * 100);
        pv[e] = (float)((urand() - 0.5) * pow(10, (int)(urand() * 8)));
    }
    is_int(coo(&s, ix, v, (int64_t[]){1000, 100}, 2, true), 0, "200k entries");
    int saved = weft_get_num_threads();
    weft_tensor *c[3] = {NULL, NULL, NULL};
    int threads[3] = {1, 2, 7};
    for (int i = 0; i < 3; i++) {
        weft_set_num_threads(threads[i]);
        c[i] = call1("coalesce", s);
    }
    weft_set_num_threads(saved);
    weft_tensor *v0 = call1("values", c[0]);
    bool same = true;
    for (int i = 1; i < 3; i++) {
        weft_tensor *vi = call1("values", c[i]);
        same = same && weft_tensor_numel(vi) == weft_tensor_numel(v0) &&
               !memcmp(weft_tensor_data_ptr(vi), weft_tensor_data_ptr(v0),
                       (size_t)weft_tensor_numel(v0) * sizeof(float));
        weft_tensor_release(vi);
    }
    ok(same, "coalesce: bit-identical sums with 1, 2 and 7 threads");
    /* the reference: sums in input order, position by position */
    double *ref = calloc(100000, sizeof *ref);
    float *reff = calloc(100000, sizeof *reff);
    for (int64_t e = 0; e < n; e++)
        reff[pi[e] * 100 + pi[n + e]] += pv[e];
    weft_tensor *ci = call1("indices", c[0]);
    const int64_t *q = weft_tensor_data_ptr(ci);
    const float *qv = weft_tensor_data_ptr(v0);
    int64_t m = weft_tensor_size(ci, 1);
    bool exact = true, sorted = true;
    for (int64_t u = 0; u < m; u++) {
        exact = exact && qv[u] == reff[q[u] * 100 + q[m + u]];
        if (u)
            sorted = sorted && q[u] * 100 + q[m + u] > q[u - 1] * 100 + q[m + u - 1];
    }
    ok(exact, "each position sums its duplicates in input order (float32-exact)");
    ok(sorted, "positions strictly increasing");
    free(ref);
    free(reff);
    weft_tensor *all[] = {ix, v, s, c[0], c[1], c[2], v0, ci};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        weft_tensor_release(all[i]);
}

/* strided += sparse in place (an optimizer's update), and fill_(0) */
static void test_inplace(void)
{
    weft_tensor *A = random_sparse_dense(8, 3, 0.5, WEFT_FLOAT32), *P = randn(8, 3, WEFT_FLOAT32);
    weft_tensor *want = NULL, *S1 = dup_coo(A), *S2 = NULL, *z = NULL;
    weft_add_ex(&want, P, A, -0.5);
    is_int(weft_add_ex_(P, S1, -0.5), 0, "strided.add_(sparse COO, alpha)");
    is_double(maxdiff(P, want), 0, 1e-6, "scattered row by row");
    weft_tensor_release(want);
    /* hybrid, one sparse dimension: the embedding-gradient case */
    S2 = to_coo(A, 1);
    weft_add_ex(&want, P, A, 2.0);
    is_int(weft_add_ex_(P, S2, 2.0), 0, "strided.add_(hybrid COO)");
    is_double(maxdiff(P, want), 0, 1e-6, "one axpy per entry");
    /* a non-contiguous self goes through index_add_ / index_put_ */
    weft_tensor *Q = randn(3, 8, WEFT_FLOAT32), *Qt = NULL, *qwant = NULL;
    weft_transpose(&Qt, Q, 0, 1);
    weft_add_ex(&qwant, Qt, A, 1.5);
    is_int(weft_add_ex_(Qt, S2, 1.5), 0, "non-contiguous self, one sparse dim");
    is_double(maxdiff(Qt, qwant), 0, 1e-6, "through index_add_");
    weft_tensor_release(qwant);
    weft_add_ex(&qwant, Qt, A, 1.5);
    is_int(weft_add_ex_(Qt, S1, 1.5), 0, "non-contiguous self, two sparse dims");
    is_double(maxdiff(Qt, qwant), 0, 1e-6, "through index_put_ with accumulate");
    weft_tensor_release(qwant);
    weft_tensor_release(Qt);
    weft_tensor_release(Q);
    /* a scatter far larger than the prefetch distance, every row 8 times
     * (the rows a few entries ahead are prefetched) */
    enum { BIG_ROWS = 5000, BIG_NNZ = 40000, WIDTH = 8 };
    int64_t *bi = malloc(BIG_NNZ * sizeof *bi);
    for (int64_t e = 0; e < BIG_NNZ; e++)
        bi[e] = (e * 7919) % BIG_ROWS;
    weft_tensor *BI = i64(bi, 1, BIG_NNZ), *BV = randn(BIG_NNZ, WIDTH, WEFT_FLOAT32), *BS = NULL,
                *BT = randn(BIG_ROWS, WIDTH, WEFT_FLOAT32), *bwant = NULL, *bd = NULL;
    free(bi);
    coo(&BS, BI, BV, (int64_t[]){BIG_ROWS, WIDTH}, 2, true);
    bd = dense(BS);
    weft_add_ex(&bwant, BT, bd, -0.25);
    is_int(weft_add_ex_(BT, BS, -0.25), 0, "a 1.3 MB scatter with repeated rows");
    is_double(maxdiff(BT, bwant), 0, 1e-5, "matches the dense sum");
    weft_tensor *big[] = {BI, BV, BS, BT, bwant, bd};
    for (size_t i = 0; i < sizeof big / sizeof *big; i++)
        weft_tensor_release(big[i]);
    is_int(weft_add_(S1, P), WEFT_ENOTSUP, "sparse.add_(strided) refused");
    like(weft_last_error(), "add_: takes a strided or sparse_coo self and a sparse other",
         "naming the layouts");
    is_int(weft_fill_(S1, 0.0), 0, "fill_(sparse, 0)");
    is_int(scalar(call1("_nnz", S1)), 0, "leaves no entries");
    weft_zeros(&z, (int64_t[]){8, 3}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    is_double(sdiff(S1, z), 0, 0, "all zeros");
    is_int(weft_fill_(S1, 1.0), WEFT_ENOTSUP, "fill_(sparse, 1) refused");
    like(weft_last_error(), "can only be filled with 0", "says why");
    weft_tensor *all[] = {A, P, want, S1, S2, z};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        weft_tensor_release(all[i]);
}

/* an embedding's sparse gradient applied with add_ (one sparse dimension,
 * contiguous self) goes to the CPU plugin's index_add_, which buckets the
 * entries by destination block and splits the blocks over the pool: the
 * result must not depend on the thread count (bitwise), must match the
 * element-wise path of a non-contiguous self (bitwise: each row's entries in
 * entry order both ways) and the dense sum; duplicates, uncoalesced entries,
 * the table's first and last rows, an empty batch, float32 and float64 */
static void test_row_update_parallel(void)
{
    enum { ROWS = 3001, WIDTH = 16, NNZ = 9000 };
    int saved = weft_get_num_threads();
    weft_dtype dts[] = {WEFT_FLOAT32, WEFT_FLOAT64};
    int64_t *ix = malloc(NNZ * sizeof *ix);
    /* a small table, where most entries repeat a row (added in entry order
     * on one thread, however many there are), and a large one, where most
     * rows are named once (added by the pool's chunks of entries) and rows
     * 0 and rows - 1 in every chunk (added after the chunks, in order) */
    const int64_t tables[] = {ROWS, 200003};
    for (size_t t = 0; t < 2 * sizeof dts / sizeof *dts; t++) {
        const int64_t rows = tables[t / 2];
        for (int64_t e = 0; e < NNZ; e++) /* unsorted */
            ix[e] = e % 5 == 0 ? (e % 10 ? 0 : rows - 1) : (int64_t)(urand() * rows);
        weft_dtype dt = dts[t % 2];
        weft_tensor *I = i64(ix, 1, NNZ), *V = randn(NNZ, WIDTH, dt), *S = NULL;
        weft_tensor *P0 = randn(rows, WIDTH, dt), *want = NULL, *d = NULL;
        coo(&S, I, V, (int64_t[]){rows, WIDTH}, 2, true);
        d = dense(S);
        weft_add_ex(&want, P0, d, -0.75);
        weft_tensor *got[3] = {NULL, NULL, NULL};
        int threads[3] = {1, 2, 5};
        int rc = 0;
        for (int i = 0; i < 3; i++) {
            weft_set_num_threads(threads[i]);
            weft_clone(&got[i], P0);
            rc |= weft_add_ex_(got[i], S, -0.75);
        }
        weft_set_num_threads(saved);
        is_int(rc, 0, "%s: add_ of %d rows (%d KiB) into %lld at 1, 2 and 5 threads",
               weft_dtype_name(dt), NNZ, (int)(NNZ * WIDTH * weft_dtype_size(dt) / 1024),
               (long long)rows);
        /* rows 0 and rows - 1 sum 900 entries each, in another order than
         * the dense sum's: float32 rounding of sums near 20 */
        is_double(maxdiff(got[2], want), 0, dt == WEFT_FLOAT32 ? 1e-3 : 1e-9,
                  "matches the dense sum");
        is_double(maxdiff(got[0], got[1]), 0, 0, "2 threads: bitwise the one-thread result");
        is_double(maxdiff(got[0], got[2]), 0, 0, "5 threads: bitwise the one-thread result");
        /* the same rows through a non-contiguous self (columns 0..WIDTH of
         * a wider table): index_add_'s element-wise path */
        weft_tensor *wide = randn(rows, WIDTH + 3, dt), *view = NULL;
        weft_narrow(&view, wide, 1, 0, WIDTH);
        weft_copy_(view, P0);
        is_int(weft_add_ex_(view, S, -0.75), 0, "the same add_ into a non-contiguous self");
        is_double(maxdiff(view, got[0]), 0, 0, "bitwise the row path's result");
        weft_tensor *all[] = {I, V, S, P0, want, d, got[0], got[1], got[2], wide, view};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            weft_tensor_release(all[i]);
    }
    free(ix);
    /* an empty batch changes nothing */
    weft_tensor *EI = NULL, *EV = NULL, *ES = NULL, *P = randn(ROWS, WIDTH, WEFT_FLOAT32), *P1 = NULL;
    weft_empty(&EI, (int64_t[]){1, 0}, 2, WEFT_INT64, WEFT_DEVICE_CPU);
    weft_empty(&EV, (int64_t[]){0, WIDTH}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    coo(&ES, EI, EV, (int64_t[]){ROWS, WIDTH}, 2, true);
    weft_clone(&P1, P);
    weft_set_num_threads(4);
    is_int(weft_add_ex_(P1, ES, -0.75), 0, "add_ of an empty batch");
    weft_set_num_threads(saved);
    is_double(maxdiff(P1, P), 0, 0, "leaves self as it was");
    /* an index past the table's end is refused before anything is written */
    int64_t bad[] = {0, ROWS};
    weft_tensor *BI = i64(bad, 1, 2), *BV = randn(2, WIDTH, WEFT_FLOAT32), *row = NULL;
    weft_select(&row, BI, 0, 0);
    is_int(weft_index_add_(P1, 0, row, BV), WEFT_ERANGE, "index_add_ of row %d of %d", ROWS, ROWS);
    is_double(maxdiff(P1, P), 0, 0, "nothing written");
    weft_tensor *all[] = {EI, EV, ES, P, P1, BI, BV, row};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        weft_tensor_release(all[i]);
}

/* the C library's SGD applies a sparse gradient through add_: the rows the
 * gradient holds move, the others stay; momentum keeps a sparse buffer
 * (torch 1.13's rule); weight_decay and Adam are refused by name */
static void test_c_sgd(void)
{
    weft_tensor *P = randn(6, 2, WEFT_FLOAT32), *P0 = NULL, *G = NULL, *want = NULL;
    weft_clone(&P0, P);
    weft_tensor_set_requires_grad(P, true);
    static const int64_t rows[] = {4, 1, 4};
    static const float gv[] = {1, 2, 3, 4, 5, 6};
    weft_tensor *I = i64(rows, 1, 3), *V = f32(gv, (int64_t[]){3, 2}, 2);
    coo(&G, I, V, (int64_t[]){6, 2}, 2, true);
    is_int(weft_tensor_set_grad(P, G), 0, "a parameter takes a sparse gradient");
    weft_optimizer *opt = NULL;
    is_int(weft_optimizer_sgd(&opt, &P, 1, 0.5, 0, 0, 0, false), 0, "C SGD");
    is_int(weft_optimizer_step(opt), 0, "its step with a sparse gradient");
    weft_tensor *gd = dense(G);
    weft_add_ex(&want, P0, gd, -0.5);
    is_double(maxdiff(P, want), 0, 1e-6, "P - lr * grad, rows 1 and 4 (twice) only");
    weft_optimizer_destroy(opt);
    opt = NULL;
    /* momentum as torch 1.13: a sparse buffer, buf = g, then
     * 0.9 buf + (1 - 0.1) g = 1.8 g; two steps move P by 0.5 (g + 1.8 g) */
    struct {
        double dampening;
        bool nesterov;
        double moved; /* the two steps' total, in units of lr * g */
        const char *what;
    } cases[] = {{0.1, false, 1.0 + 1.8, "momentum 0.9, dampening 0.1"},
                 /* nesterov: d = g + 0.9 buf: 1.9 g, then buf = 1.9 g, 2.71 g */
                 {0, true, 1.9 + 2.71, "nesterov momentum 0.9"}};
    for (int c = 0; c < 2; c++) {
        weft_tensor *start = NULL, *w = NULL;
        weft_clone(&start, P);
        opt = NULL;
        is_int(weft_optimizer_sgd(&opt, &P, 1, 0.5, 0.9, cases[c].dampening, 0, cases[c].nesterov),
               0, "C SGD with %s", cases[c].what);
        is_int(weft_optimizer_step(opt), 0, "step 1 with a sparse gradient");
        is_int(weft_optimizer_step(opt), 0, "step 2 (the buffer is sparse and coalesced)");
        weft_add_ex(&w, start, gd, -0.5 * cases[c].moved);
        is_double(maxdiff(P, w), 0, 1e-5, "P moved by lr * %.2f g, rows 1 and 4 only",
                  cases[c].moved);
        weft_optimizer_destroy(opt);
        weft_tensor_release(start);
        weft_tensor_release(w);
    }
    opt = NULL;
    weft_optimizer_sgd(&opt, &P, 1, 0.5, 0.9, 0, 0.01, false);
    int rc = weft_optimizer_step(opt);
    ok(rc < 0, "weight_decay with a sparse gradient is refused, as torch's (%d)", rc);
    like(weft_last_error(), "sparse_coo", "naming the layout");
    like(weft_last_error(), "without weight_decay", "and the option");
    weft_optimizer_destroy(opt);
    opt = NULL;
    weft_tensor *P1 = NULL;
    weft_clone(&P1, P);
    weft_optimizer_adam(&opt, &P, 1, 0.1, 0.9, 0.999, 1e-8, 0);
    is_int(weft_optimizer_step(opt), WEFT_ENOTSUP, "C Adam refuses a sparse gradient");
    like(weft_last_error(), "SparseAdam", "naming the row-wise optimizer");
    is_double(maxdiff(P, P1), 0, 0, "and leaves the parameter alone");
    weft_tensor_release(P1);
    weft_optimizer_destroy(opt);
    weft_tensor *all[] = {P, P0, G, want, I, V, gd};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        weft_tensor_release(all[i]);
}

static void test_autograd(void)
{
    /* the constructor passes d(values) = the gradient at each entry's
     * position: loss = sum(to_dense(coo(I, v)) * M) */
    static const int64_t ix[] = {0, 1, 1, 2, 0, 2};
    static const float v[] = {1, 2, 3}, m[] = {1, 2, 3, 4, 5, 6};
    weft_tensor *I = i64(ix, 2, 3), *V = f32(v, (int64_t[]){3}, 1),
                *M = f32(m, (int64_t[]){2, 3}, 2), *s = NULL, *d = NULL, *p = NULL, *y = NULL,
                *g = NULL;
    weft_tensor_set_requires_grad(V, true);
    is_int(coo(&s, I, V, (int64_t[]){2, 3}, 2, true), 0, "constructor with values requiring grad");
    if (!s)
        diag("%s", weft_last_error());
    ok(weft_tensor_requires_grad(s), "the sparse tensor requires grad");
    d = dense(s);
    weft_mul(&p, d, M);
    weft_sum(&y, p, NULL, 0, false);
    is_int(weft_backward(&y, 1, NULL, false, false), 0, "backward through to_dense and the constructor");
    is_int(weft_tensor_grad(&g, V), 0, "values got a gradient");
    const float *pg = g ? weft_tensor_data_ptr(g) : NULL;
    ok(pg && pg[0] == 3 && pg[1] == 4 && pg[2] == 6, "d values = M at (0,2), (1,0), (1,2)");
    weft_tensor *all[] = {s, d, p, y, g};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        weft_tensor_release(all[i]);
    /* values(): a sparse leaf gets a gradient with its own pattern */
    weft_tensor *leaf = NULL, *vv = NULL, *t3 = NULL, *gl = NULL;
    weft_tensor *V2 = f32(v, (int64_t[]){3}, 1);
    coo(&leaf, I, V2, (int64_t[]){2, 3}, 2, true);
    is_int(weft_tensor_set_requires_grad(leaf, true), 0, "a sparse leaf requires grad");
    /* values() takes a coalesced tensor, as torch's: the constructor's
     * result is not one (entries may repeat a position) */
    weft_value lv1[] = {TV(leaf)};
    is_int(callop(&vv, "values", lv1, 1), WEFT_EINVAL, "values() of an uncoalesced leaf refused");
    ok(strstr(weft_last_error(), "coalesce() first") != NULL, "saying to coalesce: %s",
       weft_last_error());
    weft_tensor *lc = call1("coalesce", leaf);
    vv = lc ? call1("values", lc) : NULL;
    weft_tensor_release(lc);
    weft_mul_scalar(&t3, vv, 3.0);
    weft_sum(&y, t3, NULL, 0, false);
    is_int(weft_backward(&y, 1, NULL, false, false), 0, "backward through values()");
    is_int(weft_tensor_grad(&gl, leaf), 0, "the leaf's gradient");
    is_int(gl ? weft_tensor_layout(gl) : -1, weft_layout_lookup("sparse_coo"), "is sparse_coo");
    weft_tensor *gi = gl ? call1("_indices", gl) : NULL, *gv = gl ? call1("_values", gl) : NULL;
    ok(gi && !memcmp(weft_tensor_data_ptr(gi), ix, sizeof ix), "with the leaf's indices");
    ok(gv && ((float *)weft_tensor_data_ptr(gv))[1] == 3, "and 3 for each value");
    /* coalesce passes the gradient through: each duplicate gets its
     * position's gradient, the leaf's stays sparse */
    weft_tensor *c = NULL, *cd = NULL, *gc = NULL;
    weft_value a[] = {TV(leaf)};
    weft_tensor_set_grad(leaf, NULL);
    is_int(callop(&c, "coalesce", a, 1), 0, "coalesce of a tensor requiring grad");
    ok(c && weft_tensor_requires_grad(c), "records a node");
    cd = c ? dense(c) : NULL;
    weft_tensor *cm = NULL, *cy = NULL;
    weft_mul(&cm, cd, M);
    weft_sum(&cy, cm, NULL, 0, false);
    is_int(weft_backward(&cy, 1, NULL, false, false), 0, "backward through coalesce");
    is_int(weft_tensor_grad(&gc, leaf), 0, "the leaf's gradient");
    is_int(gc ? weft_tensor_layout(gc) : -1, weft_layout_lookup("sparse_coo"), "is sparse_coo");
    weft_tensor *gcd = gc ? dense(gc) : NULL;
    is_double(maxdiff(gcd, M), 0, 0, "and M, the gradient at every position");
    weft_tensor *all3[] = {c, cd, gc, cm, cy, gcd};
    for (size_t i = 0; i < sizeof all3 / sizeof *all3; i++)
        weft_tensor_release(all3[i]);
    /* values() of a strided tensor that requires grad: refused by the
     * layout kernels, as without grad (it crashed reading a payload that a
     * strided tensor has not; found by fuzz_python_ops) */
    weft_tensor *dense = f32(v, (int64_t[]){3}, 1), *dv = NULL;
    weft_tensor_set_requires_grad(dense, true);
    weft_value da[] = {TV(dense)};
    is_int(callop(&dv, "values", da, 1), WEFT_ENOKERNEL, "values() of a strided tensor requiring grad");
    like(weft_last_error(), "values: no kernel", "names the operator");
    weft_tensor_release(dense);
    weft_tensor *all2[] = {I, V, M, leaf, vv, t3, y, gl, V2, gi, gv};
    for (size_t i = 0; i < sizeof all2 / sizeof *all2; i++)
        weft_tensor_release(all2[i]);
}

/* weft_mm (the core's operator, through the C API) with a sparse operand
 * that requires grad: its gradient is sparse on its own pattern, G B^T
 * sampled at its entries (torch.sparse.mm's); B's is A^T G, dense */
static void test_product_gradients(void)
{
    static const int64_t ix[] = {0, 1, 1, 2, 0, 2}; /* (0,2) (1,0) (1,2) */
    static const double v[] = {1, 2, 3}, b[] = {1, 2, 3, 4, 5, 6}, g[] = {1, -1, 2, 0.5};
    weft_tensor *I = i64(ix, 2, 3), *V = NULL, *B = NULL, *G = NULL, *A = NULL, *Y = NULL,
                *gA = NULL, *gB = NULL, *Bd = NULL, *Gd = NULL;
    weft_from_blob(&Bd, (void *)b, (int64_t[]){3, 2}, NULL, 2, WEFT_FLOAT64, WEFT_DEVICE_CPU,
                   NULL, NULL);
    weft_from_blob(&Gd, (void *)g, (int64_t[]){2, 2}, NULL, 2, WEFT_FLOAT64, WEFT_DEVICE_CPU,
                   NULL, NULL);
    weft_clone(&B, Bd);
    weft_clone(&G, Gd);
    weft_tensor *Vd = NULL;
    weft_from_blob(&Vd, (void *)v, (int64_t[]){3}, NULL, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU, NULL,
                   NULL);
    weft_clone(&V, Vd);
    coo(&A, I, V, (int64_t[]){2, 3}, 2, true);
    weft_tensor_set_requires_grad(A, true);
    weft_tensor_set_requires_grad(B, true);
    is_int(weft_mm(&Y, A, B), 0, "weft_mm of a sparse operand requiring grad");
    ok(Y && weft_tensor_requires_grad(Y), "records a node");
    is_int(weft_backward(&Y, 1, (weft_tensor *[]){G}, false, false), 0, "backward");
    weft_tensor_grad(&gA, A);
    weft_tensor_grad(&gB, B);
    is_int(gA ? weft_tensor_layout(gA) : -1, weft_layout_lookup("sparse_coo"),
           "d A is sparse_coo");
    weft_tensor *gi = gA ? call1("indices", gA) : NULL, *gv = gA ? call1("values", gA) : NULL;
    /* G B^T = [[1*1-1*2, 1*3-1*4, 1*5-1*6], [2*1+.5*2, 2*3+.5*4, 2*5+.5*6]] at
     * (0,2) (1,0) (1,2), in coalesced order */
    const double *pv = gv ? weft_tensor_data_ptr(gv) : NULL;
    ok(gi && weft_tensor_size(gi, 1) == 3, "on A's three entries");
    ok(pv && pv[0] == -1 && pv[1] == 3 && pv[2] == 13, "d A = G B^T at them (%g %g %g)",
       pv ? pv[0] : NAN, pv ? pv[1] : NAN, pv ? pv[2] : NAN);
    /* A^T G: rows 0: 2*g[1,:] = (4, 1); 1: 0; 2: 1*g[0,:] + 3*g[1,:] = (7, 0.5) */
    const double *pb = gB ? weft_tensor_data_ptr(gB) : NULL;
    ok(gB && weft_tensor_layout(gB) == WEFT_LAYOUT_STRIDED && pb[0] == 4 && pb[1] == 1 &&
           pb[2] == 0 && pb[3] == 0 && pb[4] == 7 && pb[5] == 0.5,
       "d B = A^T G, dense");
    /* the fused C step refuses a sparse gradient by layout, changing nothing */
    weft_tensor *P = NULL;
    weft_zeros(&P, (int64_t[]){2, 3}, 2, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    weft_sgd_options so = {.lr = 0.1};
    is_int(weft_sgd_step(&P, &gA, NULL, 1, &so), WEFT_EINVAL, "weft_sgd_step with a sparse grad");
    like(weft_last_error(), "grads[0] has layout 'sparse_coo'", "names the gradient and its layout");
    like(weft_last_error(), "row-wise", "and the row-wise way");
    weft_tensor *all[] = {I, V, Vd, B, Bd, G, Gd, A, Y, gA, gB, gi, gv, P};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        weft_tensor_release(all[i]);
}

int main(void)
{
    if (weft_load_default_plugins() < 1)
        skip_all("no plugins");
    int coo_id = weft_layout_lookup("sparse_coo"), csr_id = weft_layout_lookup("sparse_csr");
    if (coo_id < 0)
        skip_all("libweft-sparse.so is not on the plugin path");
    ok(coo_id > 0 && csr_id > 0, "both layouts registered by the default plugins");
    is_str(weft_layout_plugin(coo_id), "sparse", "by the sparse plugin");
    test_coo_basics();
    test_bad_coo();
    test_csr();
    test_products();
    test_elementwise();
    test_scalar_and_dense_arithmetic();
    test_shape_ops();
    test_core_views();
    test_coalesce_parallel();
    test_inplace();
    test_row_update_parallel();
    test_c_sgd();
    test_autograd();
    test_product_gradients();
    /* libweft-sparse_cuda.so (CUDA builds) registers kernels at the sparse
     * layouts' keys: the layouts' plugin unloads once that one is gone */
    if (weft_unload_plugin("sparse_cuda") < 0)
        ok(strstr(weft_last_error(), "sparse_cuda") != NULL,
           "no sparse_cuda plugin to unload first: %s", weft_last_error());
    is_int(weft_unload_plugin("sparse"), 0, "unloads: no sparse tensor is left alive");
    return done_testing();
}
