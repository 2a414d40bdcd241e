/* backends/cpu/reduce_rows.c — the reductions and scans other than sum and
 * mean: prod, max/min (with indices), amax/amin, argmax/argmin, var/std,
 * norm, logsumexp, all/any, count_nonzero, cumsum, cumprod, cummax, cummin.
 *
 * Each works on rows: the input is permuted so that the reduced dims come
 * last and copied, contiguous, into a wide compute dtype (float64 for
 * floating inputs, int64 for integers and bool: exact for every value), so
 * every output is one contiguous row and one loop body per compute type
 * serves every input dtype.  A row is done by one thread from start to end,
 * so results do not depend on the thread count.  The copy costs a pass
 * over the input; sum and mean, which the benchmarks time, keep reduce.c. */
#include <math.h>
#include <stdlib.h>

#include "cpu.h"

/* ------------------------------------------------------------ geometry */

typedef struct rows {
    weft_tensor *data;   /* [nrows, len] contiguous, of the compute dtype */
    int64_t nrows, len;
    int64_t out_shape[WEFT_MAX_DIMS]; /* the result's shape */
    int out_ndim;
} rows;

/* Copies self, its kept dims first and its reduced dims last, into a
 * contiguous tensor of dtype `compute`. */
static int make_rows(rows *r, const weft_tensor *self, const bool *reduce, bool keepdim,
                     weft_dtype compute)
{
    int ndim = weft_tensor_ndim(self);
    const int64_t *sizes = weft_tensor_sizes(self);
    int64_t perm[WEFT_MAX_DIMS];
    int nperm = 0;
    r->nrows = r->len = 1;
    r->out_ndim = 0;
    for (int d = 0; d < ndim; d++) {
        if (!reduce[d]) {
            perm[nperm++] = d;
            r->nrows *= sizes[d];
            r->out_shape[r->out_ndim++] = sizes[d];
        } else if (keepdim) {
            r->out_shape[r->out_ndim++] = 1;
        }
    }
    for (int d = 0; d < ndim; d++) {
        if (reduce[d]) {
            perm[nperm++] = d;
            r->len *= sizes[d];
        }
    }
    weft_tensor *permuted = NULL;
    int rc = weft_permute(&permuted, self, perm, ndim);
    if (rc == 0)
        rc = weft_to_dtype(&r->data, permuted, compute);
    weft_tensor_release(permuted);
    return rc;
}

/* The compute dtype of an input: float64 for floating, int64 for the
 * integers and bool; complex is not supported by these reductions. */
static int wide_dtype(const char *op, weft_dtype dt, weft_dtype *wide)
{
    if (dt == WEFT_FLOAT16 || dt == WEFT_BFLOAT16 || dt == WEFT_FLOAT32 || dt == WEFT_FLOAT64)
        *wide = WEFT_FLOAT64;
    else if (cpu_integral_or_bool(dt))
        *wide = WEFT_INT64;
    else
        return cpu__unsupported_dtype(op, dt);
    return 0;
}

/* --------------------------------------------------------- row kernels */

/* What one reduction computes per row: values into out (of the compute
 * dtype, or as the kernel says), indices into index (int64) if any. */
typedef struct row_job {
    const void *in;
    void *out;
    int64_t *index;
    int64_t len;
    double p; /* norm's p, var's correction */
} row_job;
typedef void (*row_fn)(int64_t begin, int64_t end, void *ctx);

/* max/min and their index: the first extreme, or the first NaN.  One body
 * per direction: BETTER is > for max, < for min. */
#define DEFINE_EXTREME(FN, NAME, T, IS_NAN, BETTER)                                      \
    static void FN##_##NAME(int64_t begin, int64_t end, void *ctx)                       \
    {                                                                                    \
        const row_job *j = ctx;                                                          \
        for (int64_t r = begin; r < end; r++) {                                          \
            const T *x = (const T *)j->in + r * j->len;                                  \
            T best = x[0];                                                               \
            int64_t at = 0;                                                              \
            for (int64_t i = 1; i < j->len && !IS_NAN(best); i++)                        \
                if (IS_NAN(x[i]) || x[i] BETTER best)                                    \
                    best = x[i], at = i;                                                 \
            ((T *)j->out)[r] = best;                                                     \
            if (j->index)                                                                \
                j->index[r] = at;                                                        \
        }                                                                                \
    }
/* running extremes: values and indices, in place over the rows; AT_LEAST is
 * >= for cummax, <= for cummin (the last of equal values wins, as PyTorch) */
#define DEFINE_RUNNING_EXTREME(FN, NAME, T, IS_NAN, AT_LEAST)                            \
    static void FN##_##NAME(int64_t begin, int64_t end, void *ctx)                       \
    {                                                                                    \
        const row_job *j = ctx;                                                          \
        for (int64_t r = begin; r < end; r++) {                                          \
            T *x = (T *)j->out + r * j->len;                                             \
            int64_t *ix = j->index + r * j->len, at = 0;                                 \
            for (int64_t i = 0; i < j->len; i++) {                                       \
                if (i > 0 && (IS_NAN(x[i]) || (!IS_NAN(x[at]) && x[i] AT_LEAST x[at])))  \
                    at = i;                                                              \
                x[i] = x[at];                                                            \
                ix[i] = at;                                                              \
            }                                                                            \
        }                                                                                \
    }
#define DEFINE_EXTREMES(NAME, T, IS_NAN)                                                 \
    DEFINE_EXTREME(max, NAME, T, IS_NAN, >)                                              \
    DEFINE_EXTREME(min, NAME, T, IS_NAN, <)                                              \
    DEFINE_RUNNING_EXTREME(cummax, NAME, T, IS_NAN, >=)                                  \
    DEFINE_RUNNING_EXTREME(cummin, NAME, T, IS_NAN, <=)
#define FLOAT_IS_NAN(v) ((v) != (v))
#define INT_IS_NAN(v) false
DEFINE_EXTREMES(float64, double, FLOAT_IS_NAN)
DEFINE_EXTREMES(int64, int64_t, INT_IS_NAN)

/* products and scans; integers wrap through uint64 */
#define DEFINE_PRODUCTS(NAME, T, U)                                                      \
    static void prod_##NAME(int64_t begin, int64_t end, void *ctx)                       \
    {                                                                                    \
        const row_job *j = ctx;                                                          \
        for (int64_t r = begin; r < end; r++) {                                          \
            const T *x = (const T *)j->in + r * j->len;                                  \
            U acc = 1;                                                                   \
            for (int64_t i = 0; i < j->len; i++)                                         \
                acc *= (U)x[i];                                                          \
            ((T *)j->out)[r] = (T)acc;                                                   \
        }                                                                                \
    }                                                                                    \
    static void cumsum_##NAME(int64_t begin, int64_t end, void *ctx)                     \
    {                                                                                    \
        const row_job *j = ctx;                                                          \
        for (int64_t r = begin; r < end; r++) {                                          \
            T *x = (T *)j->out + r * j->len;                                             \
            U acc = 0;                                                                   \
            for (int64_t i = 0; i < j->len; i++)                                         \
                x[i] = (T)(acc += (U)x[i]);                                              \
        }                                                                                \
    }                                                                                    \
    static void cumprod_##NAME(int64_t begin, int64_t end, void *ctx)                    \
    {                                                                                    \
        const row_job *j = ctx;                                                          \
        for (int64_t r = begin; r < end; r++) {                                          \
            T *x = (T *)j->out + r * j->len;                                             \
            U acc = 1;                                                                   \
            for (int64_t i = 0; i < j->len; i++)                                         \
                x[i] = (T)(acc *= (U)x[i]);                                              \
        }                                                                                \
    }
DEFINE_PRODUCTS(float64, double, double)
DEFINE_PRODUCTS(int64, int64_t, uint64_t)

/* the floating-only statistics, in double */
static void var_rows(int64_t begin, int64_t end, void *ctx)
{
    const row_job *j = ctx;
    for (int64_t r = begin; r < end; r++) {
        const double *x = (const double *)j->in + r * j->len;
        double mean = 0, m2 = 0;
        for (int64_t i = 0; i < j->len; i++)
            mean += x[i];
        mean /= (double)j->len;
        for (int64_t i = 0; i < j->len; i++)
            m2 += (x[i] - mean) * (x[i] - mean);
        double dof = (double)j->len - j->p;
        ((double *)j->out)[r] = m2 / (dof > 0 ? dof : 0);
    }
}

static void norm_rows(int64_t begin, int64_t end, void *ctx)
{
    const row_job *j = ctx;
    const double p = j->p;
    for (int64_t r = begin; r < end; r++) {
        const double *x = (const double *)j->in + r * j->len;
        double acc = p == -INFINITY ? INFINITY : 0;
        for (int64_t i = 0; i < j->len; i++) {
            double a = fabs(x[i]);
            if (a != a)
                acc = a;
            else if (acc != acc)
                continue; /* NaN stays */
            else if (p == INFINITY)
                acc = a > acc ? a : acc;
            else if (p == -INFINITY)
                acc = a < acc ? a : acc;
            else if (p == 0)
                acc += a != 0;
            else if (p == 1)
                acc += a;
            else if (p == 2)
                acc += a * a;
            else
                acc += pow(a, p);
        }
        if (p == 2)
            acc = sqrt(acc);
        else if (p != 0 && p != 1 && !isinf(p))
            acc = pow(acc, 1 / p);
        ((double *)j->out)[r] = acc;
    }
}

static void logsumexp_rows(int64_t begin, int64_t end, void *ctx)
{
    const row_job *j = ctx;
    for (int64_t r = begin; r < end; r++) {
        const double *x = (const double *)j->in + r * j->len;
        double m = -INFINITY, s = 0;
        for (int64_t i = 0; i < j->len; i++)
            if (x[i] > m || x[i] != x[i])
                m = x[i];
        if (isinf(m) || m != m) { /* all -inf, some +inf, or NaN */
            ((double *)j->out)[r] = m == -INFINITY ? m : m != m ? m : INFINITY;
            for (int64_t i = 0; i < j->len && m == INFINITY; i++)
                if (x[i] != x[i])
                    ((double *)j->out)[r] = x[i];
            continue;
        }
        for (int64_t i = 0; i < j->len; i++)
            s += exp(x[i] - m);
        ((double *)j->out)[r] = m + log(s);
    }
}

/* all, any and count_nonzero over bool rows: p is 0 for all, 1 for any,
 * 2 for a count (int64 out) */
static void truth_rows(int64_t begin, int64_t end, void *ctx)
{
    const row_job *j = ctx;
    for (int64_t r = begin; r < end; r++) {
        const bool *x = (const bool *)j->in + r * j->len;
        int64_t count = 0;
        for (int64_t i = 0; i < j->len; i++)
            count += x[i];
        if (j->p == 2)
            ((int64_t *)j->out)[r] = count;
        else
            ((bool *)j->out)[r] = j->p == 1 ? count > 0 : count == j->len;
    }
}

/* ------------------------------------------------------- reduce driver */

typedef enum reduce_kind {
    R_PROD, R_MAX, R_MIN, R_ARGMAX, R_ARGMIN, R_VAR, R_STD, R_NORM, R_LOGSUMEXP, R_ALL, R_ANY,
    R_COUNT, R_MAX_DIM, R_MIN_DIM, R_AMAX, R_AMIN
} reduce_kind;

typedef struct reduce_form {
    reduce_kind kind;
    bool out;
} reduce_form;

/* Runs fn over the rows of self into a new tensor of the rows' result
 * shape and dtype `wide_out` (and indices if `index`). */
static int run_rows(const char *op, const weft_tensor *self, const bool *reduce, bool keepdim,
                    weft_dtype compute, weft_dtype wide_out, row_fn fn, double p,
                    weft_tensor **result, weft_tensor **index)
{
    rows r = {0};
    int rc = make_rows(&r, self, reduce, keepdim, compute);
    if (rc == 0)
        rc = weft_empty(result, r.out_shape, r.out_ndim, wide_out, WEFT_DEVICE_CPU);
    if (rc == 0 && index)
        rc = weft_empty(index, r.out_shape, r.out_ndim, WEFT_INT64, WEFT_DEVICE_CPU);
    if (rc == 0 && r.nrows > 0) {
        row_job job = {weft_tensor_data_ptr(r.data), weft_tensor_data_ptr(*result),
                       index ? weft_tensor_data_ptr(*index) : NULL, r.len, p};
        int64_t grain = r.len > 0 ? CPU_GRAIN / r.len + 1 : CPU_GRAIN;
        cpu__parallel_for(0, r.nrows, grain, fn, &job);
    }
    weft_tensor_release(r.data);
    return rc;
}

/* Whether an extreme over these dims is defined: no empty reduced dim
 * unless there is nothing to reduce for. */
static int check_nonempty(const char *op, const weft_tensor *self, const bool *reduce)
{
    int64_t kept = 1, len = 1;
    for (int d = 0; d < weft_tensor_ndim(self); d++) {
        if (reduce[d])
            len *= weft_tensor_size(self, d);
        else
            kept *= weft_tensor_size(self, d);
    }
    if (len == 0 && (kept > 0 || weft_tensor_numel(self) == 0))
        return weft_set_error(WEFT_ERANGE, "%s: expected a reduction over a non-empty dimension "
                              "(the input of shape with %lld elements has an empty reduced "
                              "dimension); specify a dim whose size is not zero", op,
                              (long long)weft_tensor_numel(self));
    return 0;
}

/* The Scalar p of norm (None: 2), the dims and the dtype. */
static int reduce_kernel(weft_call *call, void *ctx)
{
    const reduce_form *form = ctx;
    const char *op = weft_op_name(call->op);
    const int first = form->out ? 1 : 0;
    const weft_value *args = call->args + first;
    weft_tensor *out = form->out ? call->args[0].u.tensor : NULL;
    const weft_tensor *self = args[0].u.tensor;
    const weft_dtype dt = weft_tensor_dtype(self);
    const int ndim = weft_tensor_ndim(self);
    bool reduce[WEFT_MAX_DIMS], keepdim = false;
    int rc = cpu__check_cpu(op, "self", self);
    if (rc == 0 && out)
        rc = cpu__check_cpu(op, "out", out);
    if (rc < 0)
        return rc;

    /* where the dims, keepdim and dtype arguments are */
    const weft_value *dims = NULL, *dtype_arg = NULL, none = {WEFT_VALUE_NONE, 0, {0}};
    weft_value single = {WEFT_VALUE_INT_LIST, 1, {0}};
    int64_t single_dim = 0;
    double p = 0;
    switch (form->kind) {
    case R_MAX:
    case R_MIN:
        dims = &none;
        break;
    case R_MAX_DIM:
    case R_MIN_DIM:
    case R_ARGMAX:
    case R_ARGMIN:
        if (args[1].tag == WEFT_VALUE_INT) {
            single_dim = args[1].u.i;
            single.u.ints = &single_dim;
            dims = &single;
        } else {
            dims = &none;
        }
        keepdim = args[2].u.b;
        break;
    case R_VAR:
    case R_STD:
        dims = &args[1];
        p = args[2].tag == WEFT_VALUE_NONE ? 1 : weft_value_double(&args[2]);
        keepdim = args[3].u.b;
        break;
    case R_NORM:
        p = args[1].tag == WEFT_VALUE_NONE ? 2 : weft_value_double(&args[1]);
        dims = &args[2];
        keepdim = args[3].u.b;
        dtype_arg = &args[4];
        break;
    case R_COUNT:
        dims = &args[1];
        break;
    default: /* prod, amax, amin, logsumexp, all, any: (self, dim, keepdim, ...) */
        dims = &args[1];
        keepdim = args[2].u.b;
        if (form->kind == R_PROD)
            dtype_arg = &args[3];
        break;
    }
    if (form->kind == R_LOGSUMEXP && dims->len == 0)
        dims = &none; /* logsumexp(dim=[]) reduces everything */
    if ((rc = cpu__parse_dims(op, dims, ndim, reduce)) < 0)
        return rc;
    bool has_dtype = dtype_arg && dtype_arg->tag == WEFT_VALUE_DTYPE;

    /* result dtype, compute dtype, the row function */
    weft_dtype result = dt, compute = WEFT_FLOAT64, wide_out;
    row_fn fn = NULL;
    bool with_index = false, values_and_index = false;
    switch (form->kind) {
    case R_PROD:
        result = has_dtype ? dtype_arg->u.dtype : cpu_integral_or_bool(dt) ? WEFT_INT64 : dt;
        if ((rc = wide_dtype(op, result, &compute)) < 0)
            return rc;
        fn = compute == WEFT_INT64 ? prod_int64 : prod_float64;
        break;
    case R_MAX:
    case R_MIN:
    case R_MAX_DIM:
    case R_MIN_DIM:
    case R_AMAX:
    case R_AMIN:
    case R_ARGMAX:
    case R_ARGMIN:
        if ((rc = wide_dtype(op, dt, &compute)) < 0 || (rc = check_nonempty(op, self, reduce)) < 0)
            return rc;
        bool is_max = form->kind == R_MAX || form->kind == R_MAX_DIM || form->kind == R_AMAX ||
                      form->kind == R_ARGMAX;
        fn = compute == WEFT_INT64 ? (is_max ? max_int64 : min_int64)
                                   : (is_max ? max_float64 : min_float64);
        with_index = form->kind != R_MAX && form->kind != R_MIN && form->kind != R_AMAX &&
                     form->kind != R_AMIN;
        values_and_index = form->kind == R_MAX_DIM || form->kind == R_MIN_DIM;
        if (form->kind == R_ARGMAX || form->kind == R_ARGMIN)
            result = WEFT_INT64;
        break;
    case R_VAR:
    case R_STD:
    case R_NORM:
    case R_LOGSUMEXP:
        if (form->kind == R_LOGSUMEXP && cpu_integral_or_bool(dt))
            result = WEFT_FLOAT32;
        else if (!weft_dtype_is_floating(dt))
            return weft_set_error(WEFT_EDTYPE, "%s: expected a floating-point input, got %s", op,
                                  weft_dtype_name(dt));
        if (has_dtype)
            result = dtype_arg->u.dtype;
        if (!weft_dtype_is_floating(result))
            return weft_set_error(WEFT_EDTYPE, "%s: the result dtype must be floating point "
                                  "(got %s)", op, weft_dtype_name(result));
        fn = form->kind == R_NORM ? norm_rows : form->kind == R_LOGSUMEXP ? logsumexp_rows : var_rows;
        break;
    case R_ALL:
    case R_ANY:
    case R_COUNT:
        compute = WEFT_BOOL;
        result = form->kind == R_COUNT ? WEFT_INT64 : dt == WEFT_UINT8 ? WEFT_UINT8 : WEFT_BOOL;
        fn = truth_rows;
        p = form->kind == R_ALL ? 0 : form->kind == R_ANY ? 1 : 2;
        break;
    }
    if (out && values_and_index)
        return weft_set_error(WEFT_EINTERNAL, "%s: no out= form", op);
    wide_out = form->kind == R_COUNT ? WEFT_INT64 : compute;

    weft_tensor *values = NULL, *index = NULL, *final = NULL;
    rc = run_rows(op, self, reduce, keepdim, compute, wide_out, fn, p, &values,
                  with_index ? &index : NULL);
    if (rc == 0 && form->kind == R_STD)
        rc = weft_sqrt_(values);
    weft_tensor *answer = form->kind == R_ARGMAX || form->kind == R_ARGMIN ? index : values;
    if (rc == 0 && out) {
        rc = cpu__prepare_target(op, out, true, weft_tensor_sizes(answer),
                                 weft_tensor_ndim(answer), "expected");
        if (rc == 0)
            rc = weft_copy_(out, answer);
    } else if (rc == 0) {
        if (weft_tensor_dtype(answer) == result)
            final = weft_tensor_retain(answer);
        else
            rc = weft_to_dtype(&final, answer, result);
    }
    if (rc == 0 && !out) {
        call->rets[0].tag = WEFT_VALUE_TENSOR;
        call->rets[0].u.tensor = final;
        final = NULL;
        if (values_and_index) {
            call->rets[1].tag = WEFT_VALUE_TENSOR;
            call->rets[1].u.tensor = index;
            index = NULL;
        }
    }
    weft_tensor_release(final);
    weft_tensor_release(values);
    weft_tensor_release(index);
    return rc;
}

/* ----------------------------------------------------------------- scans */

typedef enum scan_kind { S_CUMSUM, S_CUMPROD, S_CUMMAX, S_CUMMIN } scan_kind;

typedef struct scan_form {
    scan_kind kind;
    cpu_mode mode;
} scan_form;

/* cumsum/cumprod(self, dim, *, dtype) (in-place and out=), cummax/cummin
 * (self, dim) -> (values, indices) */
static int scan_kernel(weft_call *call, void *ctx)
{
    const scan_form *form = ctx;
    const char *op = weft_op_name(call->op);
    const int first = form->mode == CPU_OUT ? 1 : 0;
    const weft_value *args = call->args + first;
    weft_tensor *target = form->mode == CPU_FUNCTIONAL ? NULL : call->args[0].u.tensor;
    const weft_tensor *self = args[0].u.tensor;
    const weft_dtype dt = weft_tensor_dtype(self);
    const int ndim = weft_tensor_ndim(self), wrap = ndim > 0 ? ndim : 1;
    int64_t dim = args[1].u.i;
    int rc = cpu__check_cpu(op, "self", self);
    if (rc < 0)
        return rc;
    if (dim < -wrap || dim >= wrap)
        return weft_set_error(WEFT_ERANGE, "%s: dimension out of range (expected to be in range "
                              "of [%d, %d], but got %lld)", op, -wrap, wrap - 1, (long long)dim);
    if (dim < 0)
        dim += wrap;
    bool extremes = form->kind == S_CUMMAX || form->kind == S_CUMMIN;
    weft_dtype result = dt, compute = WEFT_FLOAT64;
    if (!extremes) {
        bool has_dtype = call->nargs > first + 2 && args[2].tag == WEFT_VALUE_DTYPE;
        result = has_dtype ? args[2].u.dtype
                 : target  ? weft_tensor_dtype(target)
                 : cpu_integral_or_bool(dt) ? WEFT_INT64 : dt;
    }
    if ((rc = wide_dtype(op, extremes ? dt : result, &compute)) < 0)
        return rc;
    if (target && (rc = cpu__prepare_target(op, target, form->mode == CPU_OUT,
                                            weft_tensor_sizes(self), ndim, "input")) < 0)
        return rc;

    /* dim last, everything else in order: rows along dim */
    bool along[WEFT_MAX_DIMS] = {false};
    if (ndim > 0)
        along[dim] = true;
    rows r = {0};
    weft_tensor *index = NULL, *values = NULL, *index_view = NULL, *final = NULL;
    rc = make_rows(&r, self, along, true, compute);
    if (rc == 0 && extremes) {
        int64_t shape[WEFT_MAX_DIMS];
        memcpy(shape, weft_tensor_sizes(r.data), (size_t)ndim * sizeof(int64_t));
        rc = weft_empty(&index, shape, ndim, WEFT_INT64, WEFT_DEVICE_CPU);
    }
    if (rc == 0 && r.nrows > 0 && r.len > 0) {
        row_job job = {NULL, weft_tensor_data_ptr(r.data), index ? weft_tensor_data_ptr(index) : NULL,
                       r.len, 0};
        bool wide_int = compute == WEFT_INT64;
        row_fn fn = form->kind == S_CUMSUM    ? (wide_int ? cumsum_int64 : cumsum_float64)
                    : form->kind == S_CUMPROD ? (wide_int ? cumprod_int64 : cumprod_float64)
                    : form->kind == S_CUMMAX  ? (wide_int ? cummax_int64 : cummax_float64)
                                              : (wide_int ? cummin_int64 : cummin_float64);
        cpu__parallel_for(0, r.nrows, CPU_GRAIN / r.len + 1, fn, &job);
    }
    /* back to self's dim order: the rows moved dim to the end */
    int64_t inverse[WEFT_MAX_DIMS];
    for (int d = 0, k = 0; d < ndim; d++)
        inverse[d] = d == dim ? ndim - 1 : k++;
    if (rc == 0)
        rc = weft_permute(&values, r.data, inverse, ndim);
    if (rc == 0 && index)
        rc = weft_permute(&index_view, index, inverse, ndim);
    if (rc == 0 && target)
        rc = weft_copy_(target, values);
    else if (rc == 0)
        rc = weft_to_dtype(&final, values, result);
    if (rc == 0 && !target) {
        call->rets[0].tag = WEFT_VALUE_TENSOR;
        call->rets[0].u.tensor = final;
        final = NULL;
        if (extremes) {
            rc = weft_contiguous(&call->rets[1].u.tensor, index_view);
            call->rets[1].tag = WEFT_VALUE_TENSOR;
            if (rc < 0) {
                weft_tensor_release(call->rets[0].u.tensor);
                call->rets[0].u.tensor = NULL;
            }
        }
    }
    weft_tensor_release(final);
    weft_tensor_release(values);
    weft_tensor_release(index_view);
    weft_tensor_release(index);
    weft_tensor_release(r.data);
    return rc;
}

/* -------------------------------------------------------- registration */

#define FORMS(NAME, KIND)                                                        \
    static const reduce_form NAME##_form = {KIND, false};                        \
    static const reduce_form NAME##_out_form __attribute__((unused)) = {KIND, true};
FORMS(prod, R_PROD)
FORMS(max, R_MAX)
FORMS(min, R_MIN)
FORMS(max_dim, R_MAX_DIM)
FORMS(min_dim, R_MIN_DIM)
FORMS(amax, R_AMAX)
FORMS(amin, R_AMIN)
FORMS(argmax, R_ARGMAX)
FORMS(argmin, R_ARGMIN)
FORMS(var, R_VAR)
FORMS(std, R_STD)
FORMS(norm, R_NORM)
FORMS(logsumexp, R_LOGSUMEXP)
FORMS(all, R_ALL)
FORMS(any, R_ANY)
FORMS(count_nonzero, R_COUNT)

#define SCAN_FORMS(NAME, KIND)                                                        \
    static const scan_form NAME##_functional = {KIND, CPU_FUNCTIONAL};                \
    static const scan_form NAME##_inplace __attribute__((unused)) = {KIND, CPU_INPLACE}; \
    static const scan_form NAME##_out __attribute__((unused)) = {KIND, CPU_OUT};
SCAN_FORMS(cumsum, S_CUMSUM)
SCAN_FORMS(cumprod, S_CUMPROD)
SCAN_FORMS(cummax, S_CUMMAX)
SCAN_FORMS(cummin, S_CUMMIN)

#define REDUCE_ENTRIES(NAME) {#NAME, reduce_kernel, &NAME##_form}, \
    {#NAME "_out", reduce_kernel, &NAME##_out_form}
static const weft_kernel_entry reduce_entries[] = {
    REDUCE_ENTRIES(prod),
    {"max", reduce_kernel, &max_form},
    {"min", reduce_kernel, &min_form},
    {"max_dim", reduce_kernel, &max_dim_form},
    REDUCE_ENTRIES(amax),
    REDUCE_ENTRIES(amin),
    {"min_dim", reduce_kernel, &min_dim_form},
    REDUCE_ENTRIES(argmax),
    REDUCE_ENTRIES(argmin),
    REDUCE_ENTRIES(var),
    REDUCE_ENTRIES(std),
    REDUCE_ENTRIES(norm),
    REDUCE_ENTRIES(logsumexp),
    REDUCE_ENTRIES(all),
    REDUCE_ENTRIES(any),
    {"count_nonzero", reduce_kernel, &count_nonzero_form},
    {"cumsum", scan_kernel, &cumsum_functional},
    {"cumsum_", scan_kernel, &cumsum_inplace},
    {"cumsum_out", scan_kernel, &cumsum_out},
    {"cumprod", scan_kernel, &cumprod_functional},
    {"cumprod_", scan_kernel, &cumprod_inplace},
    {"cumprod_out", scan_kernel, &cumprod_out},
    {"cummax", scan_kernel, &cummax_functional},
    {"cummin", scan_kernel, &cummin_functional},
};

int cpu__register_reduce_rows(weft_registrar *reg)
{
    return weft_register_kernel_table(reg, WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, reduce_entries, sizeof reduce_entries / sizeof *reduce_entries);
}
