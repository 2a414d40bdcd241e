/* c10/memory_stats.c — the public face of the allocators' statistics and
 * cache control: routes to whatever allocator the device type has now (the
 * core's host allocator, a plugin's own, or the core's caching allocator
 * that a plugin registered). */
#include <string.h>

#include "c10/core.h"

int weft_device_memory_stats(weft_device device, weft_allocator_stats *out)
{
    if (!out || out->struct_size < 2 * sizeof(uint32_t))
        return wf__errorf(WEFT_EINVAL, "weft_device_memory_stats: out is NULL or its "
                                       "struct_size is not set");
    int rc = wf__check_device(device, "weft_device_memory_stats");
    if (rc < 0)
        return rc;
    const weft_allocator *a =
        atomic_load_explicit(&wf__device_types[device.type].allocator, memory_order_acquire);
    if (!a->stats)
        return wf__errorf(WEFT_ENOTSUP, "weft_device_memory_stats: the allocator of '%s' keeps "
                                        "no statistics", wf__device_types[device.type].name);
    return a->stats(a->ctx, device.index, out);
}

int weft_device_empty_cache(weft_device device)
{
    int rc = wf__check_device(device, "weft_device_empty_cache");
    if (rc < 0)
        return rc;
    const weft_allocator *a =
        atomic_load_explicit(&wf__device_types[device.type].allocator, memory_order_acquire);
    if (a->empty_cache)
        a->empty_cache(a->ctx);
    return 0;
}
