/* backends/cuda/norm.c — native_batch_norm, native_layer_norm and their
 * backward on the GPU.  batch_norm goes to cuDNN (norm_cudnn.c) when the
 * plugin is built with it and the call fits (plan.c's
 * wfc_plan_batch_norm says which rule keeps a call off it); the rest, and
 * everything when cuDNN is absent, runs on the composed path below, written
 * with weft operators whose CUDA kernels exist (reductions, elementwise
 * with broadcasting), so it inherits those kernels' fixed reduction order:
 * two passes for the statistics (the mean, then the squared deviations
 * from it: no cancellation), then the normalisation.  The composed path
 * takes float32 and float64 with parameters of the input's dtype; other
 * cases (half inputs with float parameters when cuDNN does not take them,
 * empty batches) go to the CPU fallback, whose rules they follow.  Several
 * launches per call where a fused kernel would take one or two: correct
 * first; fusing is the next step when a profile asks for it.
 *
 * WEFT_CUDA_BATCH_NORM (read when the plugin registers): "composed" keeps
 * every call off cuDNN; "cudnn" makes a call the plan gives to cuDNN fail
 * when cuDNN cannot be opened rather than take the composed path (the GPU
 * tests use it to know which path ran); unset, cuDNN when it opens. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"
#include "gpu.h"
#ifdef WEFT_HAVE_CUDNN
#include "libs.h"
/* cuDNN refuses a smaller eps; the composed path takes any */
#define WFC_BN_MIN_EPSILON CUDNN_BN_MIN_EPSILON
#else
#define WFC_BN_MIN_EPSILON 0.0
#endif

/* A list of tensors released together. */
typedef struct {
    weft_tensor *t[24];
    int n;
} pool;

static weft_tensor *hold(pool *p, weft_tensor *t)
{
    if (t && p->n < 24)
        p->t[p->n++] = t;
    return t;
}

static void drain(pool *p)
{
    while (p->n > 0)
        weft_tensor_release(p->t[--p->n]);
}

/* The three results of every operator here (output or gradient, and two
 * per-channel or per-row tensors), handed to the call. */
static int return_three(weft_call *call, weft_tensor *a, weft_tensor *b, weft_tensor *c)
{
    weft_return_tensor(call, 0, a);
    weft_return_tensor(call, 1, b);
    return weft_return_tensor(call, 2, c);
}

static bool plain(const weft_tensor *t, const weft_tensor *like)
{
    weft_device a = weft_tensor_device(t), b = weft_tensor_device(like);
    return a.type == WFC_DEVICE_TYPE && a.type == b.type && a.index == b.index &&
           weft_tensor_dtype(t) == weft_tensor_dtype(like);
}

static bool float_input(const weft_tensor *x)
{
    weft_dtype d = weft_tensor_dtype(x);
    return d == WEFT_FLOAT32 || d == WEFT_FLOAT64;
}

/* t viewed as [1, C, 1, ...] against an input of nd dims */
static int per_channel(weft_tensor **out, const weft_tensor *t, int64_t C, int nd)
{
    int64_t shape[WEFT_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        shape[d] = d == 1 ? C : 1;
    return weft_reshape(out, t, shape, nd);
}

/* 1 / sqrt(v + eps) */
static int inverse_std(weft_tensor **out, const weft_tensor *v, double eps)
{
    weft_tensor *s = NULL, *r = NULL, *one = NULL;
    int rc = weft_add_scalar(&s, v, eps);
    if (rc == 0)
        rc = weft_sqrt_(s);
    if (rc == 0)
        rc = weft_full(&one, NULL, 0, 1.0, weft_tensor_dtype(v), weft_tensor_device(v));
    if (rc == 0)
        rc = weft_div(&r, one, s);
    weft_tensor_release(s);
    weft_tensor_release(one);
    *out = rc == 0 ? r : NULL;
    if (rc < 0)
        weft_tensor_release(r);
    return rc;
}

/* running = (1 - momentum) running + momentum factor stat, out of the graph */
static int update_running(weft_tensor *running, const weft_tensor *stat, double momentum,
                          double factor)
{
    bool mode = weft_set_grad_enabled(false);
    weft_tensor *flat = NULL;
    int rc = weft_reshape(&flat, stat, weft_tensor_sizes(running), weft_tensor_ndim(running));
    if (rc == 0)
        rc = weft_mul_scalar_(running, 1 - momentum);
    if (rc == 0)
        rc = weft_add_ex_(running, flat, momentum * factor);
    weft_tensor_release(flat);
    weft_set_grad_enabled(mode);
    return rc;
}

enum route { ROUTE_AUTO, ROUTE_COMPOSED, ROUTE_CUDNN };
static enum route bn_route;

static wfc_bn_type bn_type(const weft_tensor *t)
{
    if (!t)
        return WFC_BN_ABSENT;
    switch (weft_tensor_dtype(t)) {
    case WEFT_FLOAT16: return WFC_BN_HALF;
    case WEFT_BFLOAT16: return WFC_BN_BFLOAT16;
    case WEFT_FLOAT32: return WFC_BN_FLOAT;
    case WEFT_FLOAT64: return WFC_BN_DOUBLE;
    default: return WFC_BN_OTHER;
    }
}

/* t absent, or C elements on x's device: what both paths need (a call
 * that fails it meets the CPU's checks and messages on the fallback) */
static bool operand_fits(const weft_tensor *t, const weft_tensor *x, int64_t C)
{
    weft_device a = t ? weft_tensor_device(t) : weft_tensor_device(x), b = weft_tensor_device(x);
    return !t || (a.type == b.type && a.index == b.index && weft_tensor_numel(t) == C);
}

/* Whether cuDNN serves q: the plan's rules, the route asked for, and
 * cuDNN itself (opened at first use).  1 when it does, 0 when the
 * composed path does, or an error (ROUTE_CUDNN and cuDNN missing). */
static int use_cudnn(wfc_bn_plan *plan, const wfc_bn_query *q)
{
#ifdef WEFT_HAVE_CUDNN
    const char *why = NULL;
    if (bn_route == ROUTE_COMPOSED || !wfc_plan_batch_norm(plan, q, &why))
        return 0;
    if (wfc_cudnn())
        return 1;
    if (bn_route != ROUTE_CUDNN)
        return 0; /* no cuDNN at run time: the composed path still serves */
    char reason[256];
    snprintf(reason, sizeof reason, "%s", weft_last_error());
    return weft_set_error(WEFT_ENOTSUP, "batch_norm: WEFT_CUDA_BATCH_NORM=cudnn, but %s", reason);
#else
    (void)plan, (void)q;
    return 0;
#endif
}

/* native_batch_norm(input, weight?, bias?, running_mean?, running_var?,
 * training, momentum, eps) -> (output, save_mean, save_invstd) */
static int batch_norm_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *x = call->args[0].u.tensor;
    const weft_tensor *w = weft_arg_tensor(call, 1), *b = weft_arg_tensor(call, 2);
    weft_tensor *rm = weft_arg_tensor(call, 3), *rv = weft_arg_tensor(call, 4);
    bool training = weft_arg_bool(call, 5);
    double momentum = weft_arg_double(call, 6), eps = weft_arg_double(call, 7);
    int64_t C0 = weft_tensor_ndim(x) >= 2 ? weft_tensor_size(x, 1) : 0;
    if (operand_fits(w, x, C0) && operand_fits(b, x, C0) && operand_fits(rm, x, C0) &&
        operand_fits(rv, x, C0)) {
        wfc_bn_query q = {
            .training = training, .ndim = weft_tensor_ndim(x), .sizes = weft_tensor_sizes(x),
            .input = bn_type(x), .weight = bn_type(w), .bias = bn_type(b),
            .running_mean = bn_type(rm), .running_var = bn_type(rv),
            .running_contiguous = (!rm || weft_tensor_is_contiguous(rm)) &&
                                  (!rv || weft_tensor_is_contiguous(rv)),
            .eps = eps, .min_eps = WFC_BN_MIN_EPSILON};
        wfc_bn_plan plan;
        int use = use_cudnn(&plan, &q);
        if (use < 0)
            return use;
#ifdef WEFT_HAVE_CUDNN
        if (use) {
            /* batch statistics in eval (a running statistic missing) leave
             * the running ones alone, as on the CPU */
            bool update = plan.kind != WFC_BN_TRAINING || training;
            weft_tensor *y = NULL, *mean = NULL, *invstd = NULL;
            int rc = wfc_batch_norm_cudnn(&plan, x, w, b, update ? rm : NULL, update ? rv : NULL,
                                          momentum, eps, &y, &mean, &invstd);
            if (rc < 0)
                return rc;
            return return_three(call, y, mean, invstd);
        }
#endif
    }
    int nd = weft_tensor_ndim(x);
    int64_t C = nd >= 2 ? weft_tensor_size(x, 1) : 0, M = C ? weft_tensor_numel(x) / C : 0;
    bool use_batch = training || !rm || !rv;
    const weft_tensor *params[4] = {w, b, rm, rv};
    bool ok = nd >= 2 && nd <= WEFT_MAX_DIMS && float_input(x) && C > 0 && M > 0;
    for (int i = 0; ok && i < 4; i++)
        ok = !params[i] || (plain(params[i], x) && weft_tensor_numel(params[i]) == C);
    if (!ok || (training && M <= 1))
        return weft_call_cpu_fallback(call); /* the CPU's rules and messages */
    int64_t dims[WEFT_MAX_DIMS];
    int nr = 0;
    for (int d = 0; d < nd; d++)
        if (d != 1)
            dims[nr++] = d;
    pool p = {0};
    weft_tensor *mean = NULL, *dev = NULL, *sq = NULL, *var = NULL, *invstd = NULL, *y = NULL;
    weft_tensor *t = NULL, *save_mean = NULL, *save_invstd = NULL;
    int rc;
    if (use_batch) {
        rc = weft_mean_ex(&mean, x, dims, nr, true, WEFT_DTYPE_UNSET);
        if (rc == 0 && hold(&p, mean) && (rc = weft_sub(&dev, x, mean)) == 0 && hold(&p, dev) &&
            (rc = weft_mul(&sq, dev, dev)) == 0 && hold(&p, sq))
            rc = weft_mean_ex(&var, sq, dims, nr, true, WEFT_DTYPE_UNSET);
        hold(&p, var);
    } else {
        rc = per_channel(&mean, rm, C, nd);
        if (rc == 0 && hold(&p, mean) && (rc = per_channel(&t, rv, C, nd)) == 0 && hold(&p, t))
            var = t;
        if (rc == 0)
            rc = weft_sub(&dev, x, mean);
        hold(&p, dev);
    }
    if (rc == 0)
        rc = inverse_std(&invstd, var, eps);
    hold(&p, invstd);
    if (rc == 0)
        rc = weft_mul(&y, dev, invstd);
    if (rc == 0 && w && (rc = per_channel(&t, w, C, nd)) == 0 && hold(&p, t))
        rc = weft_mul_(y, t);
    if (rc == 0 && b && (rc = per_channel(&t, b, C, nd)) == 0 && hold(&p, t))
        rc = weft_add_(y, t);
    if (rc == 0)
        rc = weft_reshape(&save_mean, mean, &C, 1);
    if (rc == 0)
        rc = weft_reshape(&save_invstd, invstd, &C, 1);
    if (rc == 0 && training && rm)
        rc = update_running(rm, mean, momentum, 1.0);
    if (rc == 0 && training && rv)
        rc = update_running(rv, var, momentum, (double)M / (double)(M - 1));
    drain(&p);
    if (rc < 0) {
        weft_tensor_release(y);
        weft_tensor_release(save_mean);
        weft_tensor_release(save_invstd);
        return rc;
    }
    return return_three(call, y, save_mean, save_invstd);
}

/* native_batch_norm_backward(grad_out, input, weight?, save_mean,
 * save_invstd, training) -> (grad_input, grad_weight, grad_bias):
 * training: gx = w r (g - mean(g) - xhat mean(g xhat)); eval: gx = w r g. */
static int batch_norm_backward_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *g = call->args[0].u.tensor, *x = call->args[1].u.tensor;
    const weft_tensor *w = weft_arg_tensor(call, 2), *sm = call->args[3].u.tensor,
                      *si = call->args[4].u.tensor;
    bool training = weft_arg_bool(call, 5);
    int nd = weft_tensor_ndim(x);
    int64_t C = nd >= 2 ? weft_tensor_size(x, 1) : 0, M = C ? weft_tensor_numel(x) / C : 0;
    bool same_shape = weft_tensor_ndim(g) == nd;
    for (int d = 0; same_shape && d < nd; d++)
        same_shape = weft_tensor_size(g, d) == weft_tensor_size(x, d);
    if (same_shape && operand_fits(g, x, weft_tensor_numel(x)) && operand_fits(w, x, C) &&
        operand_fits(sm, x, C) && operand_fits(si, x, C)) {
        wfc_bn_query q = {.backward = true, .training = training, .ndim = nd,
                          .sizes = weft_tensor_sizes(x), .input = bn_type(x), .weight = bn_type(w),
                          .grad = bn_type(g), .save_mean = bn_type(sm),
                          .save_invstd = bn_type(si), .running_contiguous = true};
        wfc_bn_plan plan;
        int use = use_cudnn(&plan, &q);
        if (use < 0)
            return use;
#ifdef WEFT_HAVE_CUDNN
        if (use) {
            weft_tensor *gx = NULL, *dw = NULL, *db = NULL;
            int rc = wfc_batch_norm_backward_cudnn(&plan, g, x, w, sm, si, &gx, &dw, &db);
            if (rc < 0)
                return rc;
            return return_three(call, gx, dw, db);
        }
#endif
    }
    bool ok = nd >= 2 && nd <= WEFT_MAX_DIMS && float_input(x) && C > 0 && M > 0 &&
              plain(g, x) && weft_tensor_numel(g) == weft_tensor_numel(x) && plain(sm, x) &&
              plain(si, x) && weft_tensor_numel(sm) == C && weft_tensor_numel(si) == C &&
              (!w || (plain(w, x) && weft_tensor_numel(w) == C));
    for (int d = 0; ok && d < nd; d++)
        ok = weft_tensor_size(g, d) == weft_tensor_size(x, d);
    if (!ok)
        return weft_call_cpu_fallback(call);
    int64_t dims[WEFT_MAX_DIMS];
    int nr = 0;
    for (int d = 0; d < nd; d++)
        if (d != 1)
            dims[nr++] = d;
    pool p = {0};
    weft_tensor *mean = NULL, *r = NULL, *xhat = NULL, *gx = NULL, *dw = NULL, *db = NULL;
    weft_tensor *t = NULL, *u = NULL, *dw4 = NULL, *db4 = NULL, *scale = NULL;
    int rc = per_channel(&mean, sm, C, nd);
    if (rc == 0 && hold(&p, mean) && (rc = per_channel(&r, si, C, nd)) == 0 && hold(&p, r) &&
        (rc = weft_sub(&t, x, mean)) == 0 && hold(&p, t))
        rc = weft_mul(&xhat, t, r);
    hold(&p, xhat);
    if (rc == 0)
        rc = weft_sum(&db, g, dims, nr, false);
    if (rc == 0 && (rc = weft_mul(&u, g, xhat)) == 0 && hold(&p, u))
        rc = weft_sum(&dw, u, dims, nr, false);
    /* scale = w r per channel */
    if (rc == 0 && w && (rc = per_channel(&t, w, C, nd)) == 0 && hold(&p, t))
        rc = weft_mul(&scale, r, t);
    else if (rc == 0)
        scale = weft_tensor_retain(r);
    hold(&p, scale);
    if (rc == 0 && training) {
        rc = per_channel(&db4, db, C, nd);
        if (rc == 0 && hold(&p, db4) && (rc = per_channel(&dw4, dw, C, nd)) == 0 && hold(&p, dw4) &&
            (rc = weft_mul(&t, xhat, dw4)) == 0 && hold(&p, t) &&
            (rc = weft_add(&u, t, db4)) == 0 && hold(&p, u) &&
            (rc = weft_mul_scalar_(u, 1.0 / (double)M)) == 0 && (rc = weft_sub(&t, g, u)) == 0 &&
            hold(&p, t))
            rc = weft_mul(&gx, t, scale);
    } else if (rc == 0) {
        rc = weft_mul(&gx, g, scale);
    }
    drain(&p);
    if (rc < 0) {
        weft_tensor_release(gx);
        weft_tensor_release(dw);
        weft_tensor_release(db);
        return rc;
    }
    return return_three(call, gx, dw, db);
}

/* The normalised (last k) dims of a layer_norm input, checked; 1 when the
 * call is the fallback's. */
static int ln_dims(const weft_tensor *x, const int64_t *shape, int k, int64_t *dims, int64_t *D)
{
    int nd = weft_tensor_ndim(x);
    if (k < 1 || k > nd)
        return 1;
    *D = 1;
    for (int i = 0; i < k; i++) {
        if (weft_tensor_size(x, nd - k + i) != shape[i])
            return 1;
        dims[i] = nd - k + i;
        *D *= shape[i];
    }
    return *D > 0 && weft_tensor_numel(x) > 0 ? 0 : 1;
}

/* native_layer_norm(input, normalized_shape, weight?, bias?, eps) */
static int layer_norm_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *x = call->args[0].u.tensor;
    int k = 0;
    const int64_t *shape = weft_arg_ints(call, 1, &k);
    const weft_tensor *w = weft_arg_tensor(call, 2), *b = weft_arg_tensor(call, 3);
    double eps = weft_arg_double(call, 4);
    int64_t dims[WEFT_MAX_DIMS], D = 0;
    if (!float_input(x) || ln_dims(x, shape, k, dims, &D) != 0 ||
        (w && (!plain(w, x) || weft_tensor_numel(w) != D)) ||
        (b && (!plain(b, x) || weft_tensor_numel(b) != D)) ||
        weft_tensor_device(x).type != WFC_DEVICE_TYPE)
        return weft_call_cpu_fallback(call);
    pool p = {0};
    weft_tensor *mean = NULL, *dev = NULL, *sq = NULL, *var = NULL, *rstd = NULL, *y = NULL,
                *t = NULL;
    int rc = weft_mean_ex(&mean, x, dims, k, true, WEFT_DTYPE_UNSET);
    if (rc == 0 && (rc = weft_sub(&dev, x, mean)) == 0 && hold(&p, dev) &&
        (rc = weft_mul(&sq, dev, dev)) == 0 && hold(&p, sq) &&
        (rc = weft_mean_ex(&var, sq, dims, k, true, WEFT_DTYPE_UNSET)) == 0 && hold(&p, var))
        rc = inverse_std(&rstd, var, eps);
    if (rc == 0)
        rc = weft_mul(&y, dev, rstd);
    if (rc == 0 && w && (rc = weft_reshape(&t, w, shape, k)) == 0 && hold(&p, t))
        rc = weft_mul_(y, t);
    if (rc == 0 && b && (rc = weft_reshape(&t, b, shape, k)) == 0 && hold(&p, t))
        rc = weft_add_(y, t);
    drain(&p);
    if (rc < 0) {
        weft_tensor_release(mean);
        weft_tensor_release(rstd);
        weft_tensor_release(y);
        return rc;
    }
    return return_three(call, y, mean, rstd);
}

/* native_layer_norm_backward(grad_out, input, normalized_shape, mean,
 * rstd, weight?): gx = r (wg - mean(wg) - xhat mean(wg xhat)) per row,
 * dw = sum over rows of g xhat, db = sum over rows of g. */
static int layer_norm_backward_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *g = call->args[0].u.tensor, *x = call->args[1].u.tensor;
    int k = 0;
    const int64_t *shape = weft_arg_ints(call, 2, &k);
    const weft_tensor *mean = call->args[3].u.tensor, *rstd = call->args[4].u.tensor,
                      *w = weft_arg_tensor(call, 5);
    int64_t dims[WEFT_MAX_DIMS], D = 0;
    int nd = weft_tensor_ndim(x);
    bool ok = float_input(x) && ln_dims(x, shape, k, dims, &D) == 0 && plain(g, x) &&
              plain(mean, x) && plain(rstd, x) && (!w || (plain(w, x) && weft_tensor_numel(w) == D)) &&
              weft_tensor_ndim(g) == nd && weft_tensor_ndim(mean) == nd && weft_tensor_ndim(rstd) == nd;
    for (int d = 0; ok && d < nd; d++)
        ok = weft_tensor_size(g, d) == weft_tensor_size(x, d);
    if (!ok)
        return weft_call_cpu_fallback(call);
    int64_t lead[WEFT_MAX_DIMS];
    int nl = nd - k;
    for (int d = 0; d < nl; d++)
        lead[d] = d;
    pool p = {0};
    weft_tensor *xhat = NULL, *wg = NULL, *t = NULL, *u = NULL, *m1 = NULL, *m2 = NULL;
    weft_tensor *gx = NULL, *dw = NULL, *db = NULL, *w_shaped = NULL;
    int rc = weft_sub(&t, x, mean);
    if (rc == 0 && hold(&p, t) && (rc = weft_mul(&xhat, t, rstd)) == 0 && hold(&p, xhat)) {
        if (w && (rc = weft_reshape(&w_shaped, w, shape, k)) == 0 && hold(&p, w_shaped))
            rc = weft_mul(&wg, g, w_shaped);
        else if (rc == 0)
            wg = weft_tensor_retain((weft_tensor *)g);
    }
    hold(&p, wg);
    if (rc == 0 && (rc = weft_mean_ex(&m1, wg, dims, k, true, WEFT_DTYPE_UNSET)) == 0 &&
        hold(&p, m1) && (rc = weft_mul(&u, wg, xhat)) == 0 && hold(&p, u) &&
        (rc = weft_mean_ex(&m2, u, dims, k, true, WEFT_DTYPE_UNSET)) == 0 && hold(&p, m2) &&
        (rc = weft_mul(&t, xhat, m2)) == 0 && hold(&p, t) && (rc = weft_add_(t, m1)) == 0 &&
        (rc = weft_sub(&u, wg, t)) == 0 && hold(&p, u))
        rc = weft_mul(&gx, u, rstd);
    /* parameter gradients: over the leading dims (all rows) */
    if (rc == 0 && (rc = weft_mul(&t, g, xhat)) == 0 && hold(&p, t)) {
        if (nl > 0) {
            rc = weft_sum(&dw, t, lead, nl, false);
            if (rc == 0)
                rc = weft_sum(&db, g, lead, nl, false);
        } else {
            rc = weft_clone(&dw, t);
            if (rc == 0)
                rc = weft_clone(&db, g);
        }
    }
    drain(&p);
    if (rc < 0) {
        weft_tensor_release(gx);
        weft_tensor_release(dw);
        weft_tensor_release(db);
        return rc;
    }
    return return_three(call, gx, dw, db);
}

int wfc_register_norm(weft_registrar *reg)
{
    const char *route = getenv("WEFT_CUDA_BATCH_NORM");
    bn_route = !route                         ? ROUTE_AUTO
               : strcmp(route, "composed") == 0 ? ROUTE_COMPOSED
               : strcmp(route, "cudnn") == 0    ? ROUTE_CUDNN
                                                : ROUTE_AUTO;
    static const weft_kernel_entry entries[] = {
        {"native_batch_norm", batch_norm_kernel},
        {"native_batch_norm_backward", batch_norm_backward_kernel},
        {"native_layer_norm", layer_norm_kernel},
        {"native_layer_norm_backward", layer_norm_backward_kernel},
    };
    return weft_register_kernel_table(reg, WEFT_KEY_DENSE, WFC_DEVICE_TYPE, entries, sizeof entries / sizeof *entries);
}
