/* backends/cpu/nn_group_norm.c — group_norm as a composite of weft
 * operators: each sample's channels are split into num_groups groups, each
 * normalized by its own mean and biased variance, then scaled and shifted
 * per channel.  Autograd comes from the parts; float16 and bfloat16 compute
 * in float32, as PyTorch's statistics do. */
#include "nn.h"

/* input [N, C, *] -> [N, C, *] */
static int group_norm_composite(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "group_norm";
    const weft_value *a = call->args;
    const weft_tensor *input = a[0].u.tensor;
    const weft_tensor *weight = a[2].tag == WEFT_VALUE_TENSOR ? a[2].u.tensor : NULL;
    const weft_tensor *bias = a[3].tag == WEFT_VALUE_TENSOR ? a[3].u.tensor : NULL;
    int64_t groups = a[1].u.i;
    double eps = a[4].u.d;
    int nd = weft_tensor_ndim(input);
    const int64_t *sizes = weft_tensor_sizes(input);
    char b1[128], b2[128];
    weft_dtype compute;
    int rc = cpu__check_floating(op, "input", input, &compute);
    if (rc < 0)
        return rc;
    if (nd < 2)
        return weft_set_error(WEFT_ESHAPE, "%s: expected an input [N, C, *] of at least 2 "
                              "dimensions, got %s", op, weft_format_shape(b1, sizeof b1, sizes, nd));
    int64_t C = sizes[1];
    if (groups < 1 || C % groups != 0)
        return weft_set_error(WEFT_EINVAL, "%s: expected the number of channels of input %s to "
                              "be divisible by num_groups, but got num_groups=%lld", op,
                              weft_format_shape(b1, sizeof b1, sizes, nd), (long long)groups);
    const weft_tensor *affine[2] = {weight, bias};
    for (int i = 0; i < 2; i++)
        if (affine[i] && (weft_tensor_ndim(affine[i]) != 1 || weft_tensor_size(affine[i], 0) != C))
            return weft_set_error(WEFT_ESHAPE, "%s: expected %s to be a 1-D tensor of %lld "
                                  "elements (the channels of input %s), got %s", op,
                                  i ? "bias" : "weight", (long long)C,
                                  weft_format_shape(b1, sizeof b1, sizes, nd),
                                  weft_format_shape(b2, sizeof b2, weft_tensor_sizes(affine[i]),
                                                 weft_tensor_ndim(affine[i])));
    int64_t per_group = C / groups;
    for (int d = 2; d < nd; d++)
        per_group *= sizes[d];
    int64_t grouped[3] = {sizes[0], groups, per_group}, channel_shape[64];
    static const int64_t last[1] = {2};
    channel_shape[0] = 1;
    channel_shape[1] = C;
    for (int d = 2; d < nd; d++)
        channel_shape[d] = 1;
    weft_dtype dtype = weft_tensor_dtype(input);
    weft_tensor *x = NULL, *xg = NULL, *mean = NULL, *d = NULL, *sq = NULL, *var = NULL;
    weft_tensor *rstd = NULL, *y = NULL, *t = NULL, *v = NULL;
    rc = dtype == compute ? (x = weft_tensor_retain(input), 0) : weft_to_dtype(&x, input, compute);
    if (rc == 0)
        rc = weft_reshape(&xg, x, grouped, 3);
    if (rc == 0)
        rc = weft_mean(&mean, xg, last, 1, true);
    if (rc == 0)
        rc = weft_sub(&d, xg, mean);
    if (rc == 0)
        rc = weft_mul(&sq, d, d);
    if (rc == 0)
        rc = weft_mean(&var, sq, last, 1, true);
    if (rc == 0 && (rc = weft_add_scalar(&t, var, eps)) == 0)
        rc = weft_rsqrt(&rstd, t);
    weft_tensor_release(t);
    t = NULL;
    if (rc == 0 && (rc = weft_mul(&t, d, rstd)) == 0)
        rc = weft_reshape(&y, t, sizes, nd);
    for (int i = 0; i < 2 && rc == 0; i++) {
        if (!affine[i])
            continue;
        weft_tensor_release(t);
        t = NULL;
        if ((rc = weft_reshape(&v, affine[i], channel_shape, nd)) == 0)
            rc = i ? weft_add(&t, y, v) : weft_mul(&t, y, v);
        weft_tensor_release(v);
        v = NULL;
        if (rc == 0) {
            weft_tensor_release(y);
            y = t;
            t = NULL;
        }
    }
    weft_tensor *parts[] = {x, xg, mean, d, sq, var, rstd, t};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        weft_tensor_release(parts[i]);
    if (rc == 0 && weft_tensor_dtype(y) != dtype) {
        rc = weft_to_dtype(&t, y, dtype);
        weft_tensor_release(y);
        y = t;
    }
    if (rc < 0) {
        weft_tensor_release(y);
        return rc;
    }
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    call->rets[0].u.tensor = y;
    return 0;
}

int cpu__register_nn_group_norm(weft_registrar *reg)
{
    return cpu__register_composite(reg, "group_norm", group_norm_composite);
}
