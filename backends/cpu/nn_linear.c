/* backends/cpu/nn_linear.c — addmm (beta * self + alpha * mat1 @ mat2) with
 * OpenBLAS for float32/float64, called from the calling thread as mm is;
 * linear as a composite over addmm and matmul, outer over mul. */
#include <limits.h>

#include "nn.h"

/* How BLAS reads a rows x cols matrix t: row-major (trans false) or as the
 * transpose of a row-major one; false when neither fits. */
static bool blas_view(const weft_tensor *t, bool *trans, int *ld)
{
    const int64_t *sz = weft_tensor_sizes(t), *st = weft_tensor_strides(t);
    int64_t rows = sz[0], cols = sz[1];
    if ((cols == 1 || st[1] == 1) && (rows == 1 || st[0] >= (cols > 1 ? cols : 1)) &&
        st[0] <= INT_MAX) {
        *trans = false;
        *ld = rows == 1 ? (int)(cols > 1 ? cols : 1) : (int)st[0];
        return true;
    }
    if ((rows == 1 || st[0] == 1) && (cols == 1 || st[1] >= (rows > 1 ? rows : 1)) &&
        st[1] <= INT_MAX) {
        *trans = true;
        *ld = cols == 1 ? (int)(rows > 1 ? rows : 1) : (int)st[1];
        return true;
    }
    return false;
}

/* A BLAS-readable operand: t itself, or a contiguous copy in *copy. */
static int blas_operand(const weft_tensor *t, const weft_tensor **use, weft_tensor **copy,
                        bool *trans, int *ld)
{
    *use = t;
    if (blas_view(t, trans, ld))
        return 0;
    int rc = weft_contiguous(copy, t);
    if (rc < 0)
        return rc;
    *use = *copy;
    blas_view(*copy, trans, ld);
    return 0;
}

/* c (contiguous n x m, holding beta's term already) += alpha * a @ b */
static int gemm(weft_dtype dtype, const weft_tensor *a, const weft_tensor *b, weft_tensor *c,
                double alpha, double beta)
{
    weft_tensor *ca = NULL, *cb = NULL;
    const weft_tensor *ua, *ub;
    bool ta = false, tb = false;
    int lda = 0, ldb = 0;
    int rc = blas_operand(a, &ua, &ca, &ta, &lda);
    if (rc == 0)
        rc = blas_operand(b, &ub, &cb, &tb, &ldb);
    if (rc == 0) {
        int64_t n = weft_tensor_size(a, 0), k = weft_tensor_size(a, 1);
        int64_t m = weft_tensor_size(b, 1);
        rc = cpu__gemm("addmm", dtype, ta, tb, n, m, k, alpha, weft_tensor_data_ptr(ua), lda,
                       weft_tensor_data_ptr(ub), ldb, beta, weft_tensor_data_ptr(c), m > 1 ? m : 1);
    }
    weft_tensor_release(ca);
    weft_tensor_release(cb);
    return rc;
}

/* The other dtypes: mm, then the two scalings and the sum. */
static int addmm_generic(weft_tensor **out, const weft_tensor *self, const weft_tensor *a,
                         const weft_tensor *b, double beta, double alpha)
{
    weft_tensor *p = NULL, *scaled = NULL;
    int rc = weft_mm(&p, a, b);
    if (rc == 0 && alpha != 1) {
        rc = weft_mul_scalar(&scaled, p, alpha);
        weft_tensor_release(p);
        p = scaled;
    }
    if (rc == 0 && beta == 0) {
        *out = p;
        return 0;
    }
    if (rc == 0)
        rc = weft_add_ex(out, p, self, beta);
    weft_tensor_release(p);
    return rc;
}

/* addmm(self, mat1, mat2, *, beta, alpha) */
static int addmm_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "addmm";
    const weft_value *args = call->args;
    const weft_tensor *self = args[0].u.tensor, *a = args[1].u.tensor, *b = args[2].u.tensor;
    double beta = weft_value_double(&args[3]), alpha = weft_value_double(&args[4]);
    int rc = cpu__check_cpu(op, "self", self);
    if (rc == 0)
        rc = cpu__check_cpu(op, "mat1", a);
    if (rc == 0)
        rc = cpu__check_cpu(op, "mat2", b);
    if (rc < 0)
        return rc;
    if (weft_tensor_ndim(a) != 2 || weft_tensor_ndim(b) != 2)
        return weft_set_error(WEFT_ESHAPE, "addmm: mat1 and mat2 must be 2-D, got %d-D and %d-D",
                              weft_tensor_ndim(a), weft_tensor_ndim(b));
    int64_t n = weft_tensor_size(a, 0), k = weft_tensor_size(a, 1), m = weft_tensor_size(b, 1);
    if (weft_tensor_size(b, 0) != k)
        return weft_set_error(WEFT_ESHAPE, "addmm: mat1 and mat2 shapes cannot be multiplied "
                              "(%lldx%lld and %lldx%lld)", (long long)n, (long long)k,
                              (long long)weft_tensor_size(b, 0), (long long)m);
    int64_t shape[2] = {n, m};
    weft_tensor *expanded = NULL;
    if ((rc = weft_expand(&expanded, self, shape, 2)) < 0) {
        char buf[128];
        return weft_set_error(WEFT_ESHAPE, "addmm: self of shape %s cannot be broadcast to [%lld, "
                              "%lld]", weft_format_shape(buf, sizeof buf, weft_tensor_sizes(self),
                                                      weft_tensor_ndim(self)),
                              (long long)n, (long long)m);
    }
    weft_dtype dtype = weft_tensor_dtype(a);
    bool blas = (dtype == WEFT_FLOAT32 || dtype == WEFT_FLOAT64) && weft_tensor_dtype(b) == dtype &&
                weft_tensor_dtype(self) == dtype && n <= INT_MAX && k <= INT_MAX && m <= INT_MAX;
    weft_tensor *result = NULL;
    if (!blas) {
        rc = addmm_generic(&result, expanded, a, b, beta, alpha);
    } else if ((rc = weft_empty(&result, shape, 2, dtype, WEFT_DEVICE_CPU)) == 0) {
        if (beta != 0)
            rc = weft_copy_(result, expanded);
        if (rc == 0 && n > 0 && m > 0) {
            if (k == 0)
                rc = beta == 0 ? weft_fill_(result, 0.0)
                               : (beta == 1 ? 0 : weft_mul_scalar_(result, beta));
            else
                rc = gemm(dtype, a, b, result, alpha, beta);
        }
    }
    weft_tensor_release(expanded);
    if (rc < 0) {
        weft_tensor_release(result);
        return rc;
    }
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    call->rets[0].u.tensor = result;
    return 0;
}

/* linear(input, weight, bias?): input @ weight^T + bias, as PyTorch does it:
 * one addmm for a matrix input with a bias, matmul (+ add) otherwise. */
static int linear_composite(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *input = call->args[0].u.tensor, *weight = call->args[1].u.tensor;
    const weft_tensor *bias = call->args[2].tag == WEFT_VALUE_TENSOR ? call->args[2].u.tensor : NULL;
    if (weft_tensor_ndim(weight) != 2)
        return weft_set_error(WEFT_ESHAPE, "linear: weight must be 2-D, got %d-D",
                              weft_tensor_ndim(weight));
    weft_tensor *wt = NULL, *y = NULL, *r = NULL;
    int rc = weft_t(&wt, weight);
    if (rc == 0 && bias && weft_tensor_ndim(input) == 2) {
        rc = weft_addmm(&r, bias, input, wt);
    } else if (rc == 0) {
        rc = weft_matmul(&y, input, wt);
        if (rc == 0 && bias)
            rc = weft_add(&r, y, bias);
        else if (rc == 0)
            r = weft_tensor_retain(y);
    }
    weft_tensor_release(wt);
    weft_tensor_release(y);
    if (rc < 0)
        return rc;
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    call->rets[0].u.tensor = r;
    return 0;
}

/* outer(self, vec2) and outer_out(out, self, vec2): self as a column times
 * vec2, so type promotion and autograd are mul's, as in PyTorch. */
static int outer_composite(weft_call *call, void *ctx)
{
    bool out_form = ctx != NULL;
    weft_tensor *out = out_form ? call->args[0].u.tensor : NULL;
    const weft_tensor *a = call->args[out_form].u.tensor, *b = call->args[out_form + 1].u.tensor;
    if (weft_tensor_ndim(a) != 1 || weft_tensor_ndim(b) != 1) {
        char ba[128], bb[128];
        return weft_set_error(WEFT_ESHAPE, "outer: expected two 1-D tensors, got self %s and "
                              "vec2 %s",
                              weft_format_shape(ba, sizeof ba, weft_tensor_sizes(a), weft_tensor_ndim(a)),
                              weft_format_shape(bb, sizeof bb, weft_tensor_sizes(b), weft_tensor_ndim(b)));
    }
    weft_tensor *column = NULL, *r = NULL;
    int rc = weft_unsqueeze(&column, a, 1);
    if (rc == 0)
        rc = weft_mul(&r, column, b);
    weft_tensor_release(column);
    if (rc == 0 && out) {
        int64_t shape[2] = {weft_tensor_size(a, 0), weft_tensor_size(b, 0)};
        rc = cpu__prepare_target("outer_out", out, true, shape, 2, "expected");
    }
    return cpu__deliver(call, out, r, rc);
}

static const int outer_out_marker = 1;

static const weft_kernel_entry linear_entries[] = {
    {"addmm", addmm_kernel, NULL},
};

int cpu__register_nn_linear(weft_registrar *reg)
{
    int rc = weft_register_kernel_table(reg, WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, linear_entries, sizeof linear_entries / sizeof *linear_entries);
    if (rc == 0)
        rc = cpu__register_composite(reg, "linear", linear_composite);
    if (rc == 0)
        rc = cpu__register_composite(reg, "outer", outer_composite);
    if (rc == 0)
        rc = weft_register_kernel(reg, "outer_out", WEFT_KEY_COMPOSITE, 0, outer_composite,
                                  (void *)&outer_out_marker, NULL);
    return rc;
}
