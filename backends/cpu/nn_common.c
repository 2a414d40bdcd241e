/* backends/cpu/nn_common.c — helpers of the neural-network kernels: compute
 * dtypes, contiguous operands, list and reduction arguments; and the one
 * registration call for all nn_*.c files. */
#include <string.h>

#include "nn.h"

weft_dtype cpu__compute_dtype(weft_dtype dtype)
{
    switch (dtype) {
    case WEFT_FLOAT64:
        return WEFT_FLOAT64;
    case WEFT_FLOAT32:
    case WEFT_FLOAT16:
    case WEFT_BFLOAT16:
        return WEFT_FLOAT32;
    default:
        return WEFT_DTYPE_UNSET;
    }
}

int cpu__operand(weft_tensor **out, const weft_tensor *t, weft_dtype dtype)
{
    if (weft_tensor_dtype(t) == dtype)
        return weft_contiguous(out, t);
    return weft_to_dtype(out, t, dtype);
}

int cpu__check_floating(const char *op, const char *arg, const weft_tensor *t,
                       weft_dtype *compute)
{
    int rc = cpu__check_cpu(op, arg, t);
    if (rc < 0)
        return rc;
    *compute = cpu__compute_dtype(weft_tensor_dtype(t));
    if (*compute == WEFT_DTYPE_UNSET)
        return weft_set_error(WEFT_EDTYPE, "%s: '%s' must be a floating-point tensor, got %s",
                              op, arg, weft_dtype_name(weft_tensor_dtype(t)));
    return 0;
}

int cpu__set_result(weft_call *call, int i, weft_tensor *result, weft_dtype dtype)
{
    weft_tensor *r = result;
    int rc = 0;
    if (weft_tensor_dtype(result) != dtype) {
        rc = weft_to_dtype(&r, result, dtype);
        weft_tensor_release(result);
    }
    if (rc < 0)
        return rc;
    call->rets[i].tag = WEFT_VALUE_TENSOR;
    call->rets[i].u.tensor = r;
    return 0;
}

int cpu__pair_arg(const char *op, const char *name, const weft_value *v, const int64_t *empty,
                 int64_t min, int64_t pair[2])
{
    int len = v->tag == WEFT_VALUE_INT_LIST ? v->len : 0;
    if (len == 0 && empty) {
        pair[0] = empty[0];
        pair[1] = empty[1];
    } else if (len == 1 || len == 2) {
        pair[0] = v->u.ints[0];
        pair[1] = v->u.ints[len - 1];
    } else {
        return weft_set_error(WEFT_EINVAL, "%s: %s must have one or two elements, got %d", op,
                              name, len);
    }
    if (pair[0] < min || pair[1] < min)
        return weft_set_error(WEFT_EINVAL, "%s: %s must be at least %lld, got [%lld, %lld]", op,
                              name, (long long)min, (long long)pair[0], (long long)pair[1]);
    return 0;
}

int cpu__reduction_arg(const char *op, const weft_value *v, nn_reduction *out)
{
    const char *s = v->tag == WEFT_VALUE_STRING ? v->u.string : NULL;
    if (s && strcmp(s, "none") == 0)
        *out = NN_NONE;
    else if (s && strcmp(s, "mean") == 0)
        *out = NN_MEAN;
    else if (s && strcmp(s, "sum") == 0)
        *out = NN_SUM;
    else
        return weft_set_error(WEFT_EINVAL, "%s: reduction must be 'none', 'mean' or 'sum', got "
                              "'%s'", op, s ? s : "(null)");
    return 0;
}

int cpu__reduce(weft_tensor **out, weft_tensor *loss, nn_reduction reduction)
{
    if (reduction == NN_MEAN)
        return weft_mean(out, loss, NULL, 0, false);
    if (reduction == NN_SUM)
        return weft_sum(out, loss, NULL, 0, false);
    *out = weft_tensor_retain(loss);
    return 0;
}

int cpu__register_composite(weft_registrar *reg, const char *op, weft_kernel_fn fn)
{
    return weft_register_kernel(reg, op, WEFT_KEY_COMPOSITE, 0, fn, NULL, NULL);
}

int cpu__register_nn(weft_registrar *reg)
{
    int rc;
    if ((rc = cpu__register_nn_linear(reg)) < 0 || (rc = cpu__register_nn_softmax(reg)) < 0 ||
        (rc = cpu__register_nn_loss(reg)) < 0 || (rc = cpu__register_nn_conv(reg)) < 0 ||
        (rc = cpu__register_nn_pool(reg)) < 0 || (rc = cpu__register_nn_norm(reg)) < 0 ||
        (rc = cpu__register_nn_group_norm(reg)) < 0 || (rc = cpu__register_nn_upsample(reg)) < 0 ||
        (rc = cpu__register_einsum(reg)) < 0)
        return rc;
    return 0;
}
