/* backends/cpu/nn_norm.c — batch_norm and layer_norm as composites of weft
 * operators (so their derivatives come from their parts): normalise by the
 * biased variance over the reduced dims, then scale and shift.  Training
 * batch_norm updates the running statistics in place with the unbiased
 * variance, as PyTorch does, outside the graph. */
#include "nn.h"

/* (x - mean) * rsqrt(var + eps) over dims, mean and biased var returned
 * too (new references) when asked for */
static int normalise(weft_tensor **out, const weft_tensor *x, const int64_t *dims, int ndims,
                     double eps, weft_tensor **mean_out, weft_tensor **var_out)
{
    weft_tensor *mean = NULL, *d = NULL, *sq = NULL, *var = NULL, *shifted = NULL, *inv = NULL;
    int rc = weft_mean(&mean, x, dims, ndims, true);
    if (rc == 0 && (rc = weft_sub(&d, x, mean)) == 0 && (rc = weft_mul(&sq, d, d)) == 0 &&
        (rc = weft_mean(&var, sq, dims, ndims, true)) == 0 &&
        (rc = weft_add_scalar(&shifted, var, eps)) == 0 && (rc = weft_rsqrt(&inv, shifted)) == 0)
        rc = weft_mul(out, d, inv);
    if (rc == 0 && mean_out)
        *mean_out = weft_tensor_retain(mean);
    if (rc == 0 && var_out)
        *var_out = weft_tensor_retain(var);
    weft_tensor *temps[] = {mean, d, sq, var, shifted, inv};
    for (size_t i = 0; i < sizeof temps / sizeof *temps; i++)
        weft_tensor_release(temps[i]);
    return rc;
}

/* y * weight + bias, the parameters viewed with `shape` to broadcast */
static int affine(weft_tensor **y, const weft_tensor *weight, const weft_tensor *bias,
                  const int64_t *shape, int nd)
{
    const weft_tensor *params[2] = {weight, bias};
    for (int i = 0; i < 2; i++) {
        if (!params[i])
            continue;
        weft_tensor *v = NULL, *r = NULL;
        int rc = weft_reshape(&v, params[i], shape, nd);
        if (rc == 0)
            rc = i == 0 ? weft_mul(&r, *y, v) : weft_add(&r, *y, v);
        weft_tensor_release(v);
        if (rc < 0)
            return rc;
        weft_tensor_release(*y);
        *y = r;
    }
    return 0;
}

/* running = (1 - momentum) running + momentum stat, outside the graph */
static int update_running(weft_tensor *running, const weft_tensor *stat, double momentum,
                          double factor)
{
    bool mode = weft_set_grad_enabled(false);
    weft_tensor *s = NULL, *flat = NULL, *scaled = NULL;
    int64_t n = weft_tensor_numel(running);
    int rc = weft_detach(&s, stat);
    if (rc == 0)
        rc = weft_reshape(&flat, s, weft_tensor_sizes(running), weft_tensor_ndim(running));
    if (rc == 0 && weft_tensor_numel(flat) != n)
        rc = weft_set_error(WEFT_ESHAPE, "batch_norm: running statistics must have one element "
                            "per channel");
    if (rc == 0)
        rc = weft_mul_scalar(&scaled, flat, momentum * factor);
    if (rc == 0)
        rc = weft_mul_scalar_(running, 1 - momentum);
    if (rc == 0)
        rc = weft_add_(running, scaled);
    weft_tensor_release(s);
    weft_tensor_release(flat);
    weft_tensor_release(scaled);
    weft_set_grad_enabled(mode);
    return rc;
}

static const weft_tensor *optional_tensor(const weft_value *v)
{
    return v->tag == WEFT_VALUE_TENSOR ? v->u.tensor : NULL;
}

/* batch_norm(input, weight?, bias?, running_mean?, running_var?, training,
 * momentum, eps) over every dim but dim 1 (the channels) */
static int batch_norm_composite(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_value *a = call->args;
    const weft_tensor *x = a[0].u.tensor;
    weft_tensor *rm = (weft_tensor *)optional_tensor(&a[3]), *rv = (weft_tensor *)optional_tensor(&a[4]);
    bool training = a[5].u.b;
    double momentum = a[6].u.d, eps = a[7].u.d;
    int nd = weft_tensor_ndim(x);
    if (nd < 2)
        return weft_set_error(WEFT_ESHAPE, "batch_norm: expected an input with at least 2 dims "
                              "[N, C, ...], got %d-D", nd);
    int64_t C = weft_tensor_size(x, 1), dims[WEFT_MAX_DIMS], shape[WEFT_MAX_DIMS], count = 1;
    int ndims = 0;
    for (int d = 0; d < nd; d++) {
        shape[d] = d == 1 ? C : 1;
        if (d != 1) {
            dims[ndims++] = d;
            count *= weft_tensor_size(x, d);
        }
    }
    const weft_tensor *checks[4] = {optional_tensor(&a[1]), optional_tensor(&a[2]), rm, rv};
    for (int i = 0; i < 4; i++)
        if (checks[i] && weft_tensor_numel(checks[i]) != C)
            return weft_set_error(WEFT_ESHAPE, "batch_norm: %s must have %lld elements (one per "
                                  "channel), got %lld",
                                  (const char *[]){"weight", "bias", "running_mean", "running_var"}[i],
                                  (long long)C, (long long)weft_tensor_numel(checks[i]));
    weft_tensor *y = NULL, *mean = NULL, *var = NULL;
    int rc;
    if (training || !rm || !rv) {
        if (training && count <= 1)
            return weft_set_error(WEFT_EINVAL, "batch_norm: expected more than 1 value per "
                                  "channel when training, got input of %lld values per channel",
                                  (long long)count);
        rc = normalise(&y, x, dims, ndims, eps, &mean, &var);
        if (rc == 0 && training && rm)
            rc = update_running(rm, mean, momentum, 1.0);
        if (rc == 0 && training && rv)
            rc = update_running(rv, var, momentum, (double)count / (double)(count - 1));
    } else { /* eval: the running statistics */
        weft_tensor *m = NULL, *v = NULL, *d = NULL, *s = NULL, *inv = NULL;
        if ((rc = weft_reshape(&m, rm, shape, nd)) == 0 && (rc = weft_reshape(&v, rv, shape, nd)) == 0 &&
            (rc = weft_sub(&d, x, m)) == 0 && (rc = weft_add_scalar(&s, v, eps)) == 0 &&
            (rc = weft_rsqrt(&inv, s)) == 0)
            rc = weft_mul(&y, d, inv);
        weft_tensor *temps[] = {m, v, d, s, inv};
        for (size_t i = 0; i < sizeof temps / sizeof *temps; i++)
            weft_tensor_release(temps[i]);
    }
    weft_tensor_release(mean);
    weft_tensor_release(var);
    if (rc == 0)
        rc = affine(&y, optional_tensor(&a[1]), optional_tensor(&a[2]), shape, nd);
    if (rc < 0) {
        weft_tensor_release(y);
        return rc;
    }
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    call->rets[0].u.tensor = y;
    return 0;
}

/* layer_norm(input, normalized_shape, weight?, bias?, eps) over the last
 * len(normalized_shape) dims, which must equal normalized_shape */
static int layer_norm_composite(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_value *a = call->args;
    const weft_tensor *x = a[0].u.tensor;
    int nd = weft_tensor_ndim(x), k = a[1].len;
    bool fits = k >= 1 && k <= nd;
    for (int i = 0; fits && i < k; i++)
        fits = weft_tensor_size(x, nd - k + i) == a[1].u.ints[i];
    if (!fits) {
        char b1[128], b2[128];
        return weft_set_error(WEFT_ESHAPE, "layer_norm: normalized_shape %s does not match the "
                              "last dims of an input of shape %s",
                              cpu__shape_str(b1, sizeof b1, a[1].u.ints, k),
                              cpu__shape_str(b2, sizeof b2, weft_tensor_sizes(x), nd));
    }
    int64_t dims[WEFT_MAX_DIMS];
    for (int i = 0; i < k; i++)
        dims[i] = nd - k + i;
    weft_tensor *y = NULL;
    int rc = normalise(&y, x, dims, k, a[4].u.d, NULL, NULL);
    if (rc == 0)
        rc = affine(&y, optional_tensor(&a[2]), optional_tensor(&a[3]), a[1].u.ints, k);
    if (rc < 0) {
        weft_tensor_release(y);
        return rc;
    }
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    call->rets[0].u.tensor = y;
    return 0;
}

int cpu__register_nn_norm(weft_registrar *reg)
{
    int rc = nn__register_composite(reg, "batch_norm", batch_norm_composite);
    if (rc == 0)
        rc = nn__register_composite(reg, "layer_norm", layer_norm_composite);
    return rc;
}
