/* autograd/gradcheck.c — numerical gradient checking: the Jacobian from
 * central differences against the one autograd computes row by row
 * (vector-Jacobian products with one-hot gradients), in float64. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "autograd/autograd.h"

#define MAX_INPUTS 16

static int check_inputs(weft_tensor *const *inputs, int n)
{
    if (!inputs || n <= 0 || n > MAX_INPUTS)
        return wf__errorf(WEFT_EINVAL, "gradcheck: between 1 and %d inputs are needed", MAX_INPUTS);
    for (int i = 0; i < n; i++) {
        if (!inputs[i])
            return wf__errorf(WEFT_EINVAL, "gradcheck: input %d is NULL", i);
        if (wa__requires_grad(inputs[i]) &&
            (inputs[i]->dtype != WEFT_FLOAT64 || inputs[i]->device.type != WEFT_DEVICE_TYPE_CPU ||
             !inputs[i]->is_contiguous))
            return wf__errorf(WEFT_EINVAL,
                              "gradcheck: input %d must be a contiguous float64 host tensor (got %s)",
                              i, weft_dtype_name(inputs[i]->dtype));
    }
    return 0;
}

/* f(inputs) as a float64 host copy.  Grad mode stays as it is: the
 * function may itself compute a gradient (gradgradcheck). */
static int evaluate(weft_tensor **out, weft_tensor_fn fn, void *ctx, weft_tensor *const *inputs, int n)
{
    weft_tensor *r = NULL;
    int rc = fn(&r, inputs, n, ctx);
    if (rc < 0)
        return rc;
    rc = weft_to_dtype(out, r, WEFT_FLOAT64);
    weft_tensor_release(r);
    return rc;
}

WEFT_API int weft_gradcheck(weft_tensor_fn fn, void *ctx, weft_tensor *const *inputs, int n,
                            double eps, double atol, double rtol)
{
    int rc = check_inputs(inputs, n);
    if (rc < 0)
        return rc;
    if (!fn)
        return wf__errorf(WEFT_EINVAL, "gradcheck: fn is NULL");
    weft_tensor *out = NULL;
    bool mode = weft_set_grad_enabled(true);
    rc = fn(&out, inputs, n, ctx);
    weft_set_grad_enabled(mode);
    if (rc < 0)
        return rc;
    /* an output that does not depend on the inputs has a zero Jacobian,
     * which the numeric side must then show too */
    bool constant = !wa__requires_grad(out);
    int64_t m = out->numel;
    /* the analytic Jacobian, one output element (row) at a time */
    weft_tensor *tracked[MAX_INPUTS];
    int idx[MAX_INPUTS], nt = 0;
    for (int i = 0; i < n; i++)
        if (wa__requires_grad(inputs[i])) {
            idx[nt] = i;
            tracked[nt++] = inputs[i];
        }
    double **analytic = wf__calloc((size_t)nt, sizeof *analytic);
    for (int k = 0; analytic && k < nt; k++)
        if (!(analytic[k] = wf__calloc((size_t)(m * tracked[k]->numel + 1), sizeof(double))))
            rc = wf__errorf(WEFT_ENOMEM, "gradcheck: out of memory");
    if (!analytic)
        rc = wf__errorf(WEFT_ENOMEM, "gradcheck: out of memory");
    for (int64_t row = 0; rc == 0 && !constant && row < m; row++) {
        weft_tensor *onehot = NULL, *grads[MAX_INPUTS] = {NULL};
        rc = weft_zeros(&onehot, out->sizes, out->ndim, (weft_dtype)out->dtype, out->device);
        if (rc == 0) {
            wf__store_double((char *)onehot->data + row * (int64_t)weft_dtype_size(onehot->dtype),
                             (weft_dtype)onehot->dtype, 1.0);
            rc = weft_autograd_grad(grads, &out, 1, &onehot, tracked, nt, true, false, true);
        }
        for (int k = 0; rc == 0 && k < nt; k++) {
            weft_tensor *g = NULL;
            if (grads[k] && (rc = weft_to_dtype(&g, grads[k], WEFT_FLOAT64)) < 0)
                break;
            for (int64_t j = 0; g && j < tracked[k]->numel; j++)
                analytic[k][row * tracked[k]->numel + j] = ((const double *)g->data)[j];
            weft_tensor_release(g);
        }
        for (int k = 0; k < nt; k++)
            weft_tensor_release(grads[k]);
        weft_tensor_release(onehot);
    }
    /* the numeric Jacobian, one input element (column) at a time */
    for (int k = 0; rc == 0 && k < nt; k++) {
        double *x = (double *)tracked[k]->data;
        for (int64_t j = 0; rc == 0 && j < tracked[k]->numel; j++) {
            double saved = x[j];
            weft_tensor *plus = NULL, *minus = NULL;
            x[j] = saved + eps;
            rc = evaluate(&plus, fn, ctx, inputs, n);
            x[j] = saved - eps;
            if (rc == 0)
                rc = evaluate(&minus, fn, ctx, inputs, n);
            x[j] = saved;
            for (int64_t row = 0; rc == 0 && row < m; row++) {
                double numeric = (((const double *)plus->data)[row] - ((const double *)minus->data)[row]) /
                                 (2 * eps);
                double a = analytic[k][row * tracked[k]->numel + j];
                if (!(fabs(a - numeric) <= atol + rtol * fabs(numeric)))
                    rc = wf__errorf(WEFT_EINVAL,
                                    "gradcheck: Jacobian mismatch for input %d, output element "
                                    "%lld, input element %lld: numerical %.10g, analytical %.10g",
                                    idx[k], (long long)row, (long long)j, numeric, a);
            }
            weft_tensor_release(plus);
            weft_tensor_release(minus);
        }
    }
    for (int k = 0; analytic && k < nt; k++)
        free(analytic[k]);
    free(analytic);
    weft_tensor_release(out);
    return rc;
}

/* The function gradgradcheck checks: the gradient of fn's output, dotted
 * with a fixed grad_output, with respect to the first tracked input. */
typedef struct grad_fn_ctx {
    weft_tensor_fn fn;
    void *ctx;
    weft_tensor *grad_output;
    int which;
} grad_fn_ctx;

static int gradient_of(weft_tensor **out, weft_tensor *const *inputs, int n, void *vctx)
{
    grad_fn_ctx *g = vctx;
    weft_tensor *y = NULL;
    int rc = g->fn(&y, inputs, n, g->ctx);
    if (rc < 0)
        return rc;
    if (!wa__requires_grad(y)) {
        weft_tensor_release(y);
        return weft_zeros(out, inputs[g->which]->sizes, inputs[g->which]->ndim, WEFT_FLOAT64,
                          WEFT_DEVICE_CPU);
    }
    weft_tensor *grad = NULL;
    weft_tensor *in = inputs[g->which];
    rc = weft_autograd_grad(&grad, &y, 1, &g->grad_output, &in, 1, true, weft_is_grad_enabled(), true);
    weft_tensor_release(y);
    if (rc == 0 && !grad)
        rc = weft_zeros(&grad, in->sizes, in->ndim, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    *out = grad;
    return rc;
}

WEFT_API int weft_gradgradcheck(weft_tensor_fn fn, void *ctx, weft_tensor *const *inputs, int n,
                                double eps, double atol, double rtol)
{
    int rc = check_inputs(inputs, n);
    if (rc < 0 || !fn)
        return rc < 0 ? rc : wf__errorf(WEFT_EINVAL, "gradgradcheck: fn is NULL");
    weft_tensor *y = NULL;
    rc = fn(&y, inputs, n, ctx);
    if (rc < 0)
        return rc;
    grad_fn_ctx g = {fn, ctx, NULL, 0};
    /* a fixed, uneven grad_output: a constant would hide errors that cancel */
    rc = weft_empty(&g.grad_output, y->sizes, y->ndim, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    for (int64_t i = 0; rc == 0 && i < y->numel; i++)
        ((double *)g.grad_output->data)[i] = 0.5 + 0.25 * (double)(i % 5);
    weft_tensor_release(y);
    for (int i = 0; rc == 0 && i < n; i++) {
        if (!wa__requires_grad(inputs[i]))
            continue;
        g.which = i;
        rc = weft_gradcheck(gradient_of, &g, inputs, n, eps, atol, rtol);
        if (rc < 0) {
            char why[900];
            snprintf(why, sizeof why, "%s", weft_last_error());
            wf__errorf(rc, "gradgradcheck (gradient with respect to input %d): %s", i, why);
        }
    }
    weft_tensor_release(g.grad_output);
    return rc;
}
