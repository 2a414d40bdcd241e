/* ops/factories.c — factories that fill what they make through an operator:
 * full, zeros and ones (fill_), the random ones (uniform_, normal_,
 * random_, randperm_out) and arange and linspace.  weft_empty and
 * weft_from_blob, which only allocate or wrap, stay in c10. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

WEFT_API int weft_full(weft_tensor **out, const int64_t *sizes, int ndim, double value,
                       weft_dtype dtype, weft_device device)
{
    int rc = weft_empty(out, sizes, ndim, dtype, device);
    if (rc < 0)
        return rc;
    rc = weft_fill_(*out, value);
    if (rc < 0) {
        weft_tensor_release(*out);
        *out = NULL;
    }
    return rc;
}

WEFT_API int weft_zeros(weft_tensor **out, const int64_t *sizes, int ndim, weft_dtype dtype,
                        weft_device device)
{
    return weft_full(out, sizes, ndim, 0.0, dtype, device);
}

WEFT_API int weft_ones(weft_tensor **out, const int64_t *sizes, int ndim, weft_dtype dtype,
                       weft_device device)
{
    return weft_full(out, sizes, ndim, 1.0, dtype, device);
}

static int factory(weft_tensor **out, const int64_t *sizes, int ndim, weft_dtype dtype,
                   weft_device device, weft_generator *g, bool normal)
{
    const char *op = normal ? "randn" : "rand";
    if (out)
        *out = NULL;
    if (!weft_dtype_is_floating(dtype) && !weft_dtype_is_complex(dtype)) {
        return wf__errorf(WEFT_EDTYPE, "%s: expected a floating dtype, got %s", op,
                          weft_dtype_name(dtype));
    }
    int rc = weft_empty(out, sizes, ndim, dtype, device);
    if (rc < 0)
        return rc;
    rc = normal ? weft_normal_ex_(*out, 0.0, 1.0, g) : weft_uniform_ex_(*out, 0.0, 1.0, g);
    if (rc < 0) {
        weft_tensor_release(*out);
        *out = NULL;
    }
    return rc;
}

WEFT_API int weft_rand(weft_tensor **out, const int64_t *sizes, int ndim, weft_dtype dtype,
                       weft_device device, weft_generator *g)
{
    return factory(out, sizes, ndim, dtype, device, g, false);
}

WEFT_API int weft_randn(weft_tensor **out, const int64_t *sizes, int ndim, weft_dtype dtype,
                        weft_device device, weft_generator *g)
{
    return factory(out, sizes, ndim, dtype, device, g, true);
}

WEFT_API int weft_randint(weft_tensor **out, int64_t low, int64_t high, const int64_t *sizes,
                          int ndim, weft_dtype dtype, weft_device device, weft_generator *g)
{
    if (!out)
        return wf__errorf(WEFT_EINVAL, "randint: out is NULL");
    *out = NULL;
    if (low >= high)
        return wf__errorf(WEFT_EINVAL, "randint: expects low < high, but got low=%lld, high=%lld",
                          (long long)low, (long long)high);
    int rc = weft_empty(out, sizes, ndim, dtype, device);
    if (rc == 0)
        rc = weft_random_ex_(*out, low, &high, g);
    if (rc < 0) {
        weft_tensor_release(*out);
        *out = NULL;
    }
    return rc;
}

WEFT_API int weft_randperm(weft_tensor **out, int64_t n, weft_dtype dtype, weft_device device,
                           weft_generator *g)
{
    if (!out)
        return wf__errorf(WEFT_EINVAL, "randperm: out is NULL");
    *out = NULL;
    if (n < 0)
        return wf__errorf(WEFT_EINVAL, "randperm: n must be non-negative, got %lld", (long long)n);
    int rc = weft_empty(out, &n, 1, dtype, device);
    if (rc == 0)
        rc = weft_randperm_out_ex(*out, n, g);
    if (rc < 0) {
        weft_tensor_release(*out);
        *out = NULL;
    }
    return rc;
}

WEFT_API int weft_arange(weft_tensor **out, double start, double end, double step,
                         weft_dtype dtype, weft_device device)
{
    if (out)
        *out = NULL;
    if (step == 0 || step != step)
        return wf__errorf(WEFT_EINVAL, "arange: step must be nonzero");
    if (weft_dtype_is_integral(dtype, false)) {
        /* PyTorch computes an integer range from int64 bounds and step */
        start = (double)(int64_t)start;
        end = (double)(int64_t)end;
        step = (double)(int64_t)step;
        if (step == 0)
            return wf__errorf(WEFT_EINVAL, "arange: step must be nonzero (after conversion to an integer)");
    }
    double len = __builtin_ceil((end - start) / step);
    if (len != len || len > 9.0e18)
        return wf__errorf(WEFT_EINVAL, "arange: the range [%g, %g) with step %g is invalid", start,
                          end, step);
    if ((step > 0 && start > end) || (step < 0 && start < end))
        return wf__errorf(WEFT_EINVAL,
                          "arange: upper bound and larger bound inconsistent with step sign");
    int64_t n = len > 0 ? (int64_t)len : 0;
    int rc = weft_empty(out, &n, 1, dtype, device);
    if (rc == 0 && (rc = weft_arange_out(*out, start, step)) < 0) {
        weft_tensor_release(*out);
        *out = NULL;
    }
    return rc;
}

WEFT_API int weft_linspace(weft_tensor **out, double start, double end, int64_t steps,
                           weft_dtype dtype, weft_device device)
{
    if (out)
        *out = NULL;
    if (steps < 0)
        return wf__errorf(WEFT_EINVAL, "linspace: number of steps must be non-negative");
    int rc = weft_empty(out, &steps, 1, dtype, device);
    if (rc == 0 && (rc = weft_linspace_out(*out, start, end)) < 0) {
        weft_tensor_release(*out);
        *out = NULL;
    }
    return rc;
}
