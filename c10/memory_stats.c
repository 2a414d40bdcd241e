/* c10/memory_stats.c — the public face of the allocators' statistics and
 * cache control: routes to whatever allocator the device type has now (the
 * core's host allocator, a plugin's own, or the core's caching allocator
 * that a plugin registered).  The allocator is read and called inside a
 * reader section, so an unload of its plugin waits for the call to end. */
#include <string.h>

#include "c10/core.h"
#include "c10/quiesce.h"

/* Runs stats (out != NULL) or empty_cache on the device type's allocator. */
static int with_allocator(weft_device device, weft_allocator_stats *out, const char *fn)
{
    int rc = wf__check_device(device, fn);
    if (rc < 0)
        return rc;
    wf_device_type *dt = &wf__device_types[device.type];
    wf_reader_tls *rt = wf__reader_enter();
    const weft_allocator *a = atomic_load_explicit(&dt->allocator, memory_order_acquire);
    if (!a)
        rc = wf__errorf(WEFT_EDEVICE, "%s: device type '%s' has no allocator", fn, dt->name);
    else if (out && !a->stats)
        rc = wf__errorf(WEFT_ENOTSUP, "%s: the allocator of '%s' keeps no statistics", fn,
                        dt->name);
    else if (out)
        rc = a->stats(a->ctx, device.index, out);
    else if (a->empty_cache)
        a->empty_cache(a->ctx);
    wf__reader_exit(rt);
    return rc;
}

int weft_device_memory_stats(weft_device device, weft_allocator_stats *out)
{
    if (!out || out->struct_size < 2 * sizeof(uint32_t))
        return wf__errorf(WEFT_EINVAL, "weft_device_memory_stats: out is NULL or its "
                                       "struct_size is not set");
    return with_allocator(device, out, "weft_device_memory_stats");
}

int weft_device_empty_cache(weft_device device)
{
    return with_allocator(device, NULL, "weft_device_empty_cache");
}
