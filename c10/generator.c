/* c10/generator.c — counter-based random numbers (Philox 4x32-10) and the
 * factory functions that draw from them.  A generator is a seed and an
 * offset: a kernel reserves a range of counters and element i uses counter
 * offset + i/4, so results never depend on how many threads ran it. */
#include <stdlib.h>

#include "c10/core.h"

struct weft_generator {
    _Atomic uint64_t seed;
    _Atomic uint64_t offset;
};

static weft_generator default_generator;

WEFT_API void weft_philox(uint64_t seed, uint64_t counter, uint32_t out[4])
{
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

WEFT_API int weft_generator_create(weft_generator **out, uint64_t seed)
{
    if (!out)
        return wf__errorf(WEFT_EINVAL, "generator_create: out is NULL");
    *out = wf__malloc(sizeof **out);
    if (!*out)
        return wf__errorf(WEFT_ENOMEM, "generator_create: out of memory");
    atomic_init(&(*out)->seed, seed);
    atomic_init(&(*out)->offset, 0);
    return 0;
}

WEFT_API void weft_generator_destroy(weft_generator *g)
{
    if (g != &default_generator)
        free(g);
}

WEFT_API void weft_generator_set_seed(weft_generator *g, uint64_t seed)
{
    if (!g)
        g = &default_generator;
    atomic_store(&g->seed, seed);
    atomic_store(&g->offset, 0);
}

WEFT_API uint64_t weft_generator_seed(const weft_generator *g)
{
    return atomic_load(&(g ? g : &default_generator)->seed);
}

WEFT_API weft_generator *weft_default_generator(void)
{
    return &default_generator;
}

WEFT_API void weft_manual_seed(uint64_t seed)
{
    weft_generator_set_seed(&default_generator, seed);
}

WEFT_API void weft_generator_reserve(weft_generator *g, uint64_t count, uint64_t *seed,
                                     uint64_t *offset)
{
    if (!g)
        g = &default_generator;
    *seed = atomic_load(&g->seed);
    *offset = atomic_fetch_add(&g->offset, count);
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
