/* c10/generator.c — counter-based random numbers (Philox 4x32-10); the
 * factories that draw from them are in ops/factories.c.  A generator is a seed and an
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
