/* c10/storage.c — reference-counted owners of device memory.  A storage
 * frees its memory through the deleter that came with it, on whichever
 * thread drops the last reference. */
#include <stdint.h>
#include <stdlib.h>

#include "c10/core.h"
#include "c10/quiesce.h"

wf_storage *wf__storage_wrap(weft_data_ptr data, size_t nbytes, weft_device device)
{
    wf_storage *s = wf__malloc(sizeof *s);
    if (!s)
        return NULL;
    atomic_init(&s->refcount, 1);
    atomic_init(&s->version, 0);
    s->read_only = false;
    s->profiled = false;
    s->device = device;
    s->nbytes = nbytes;
    s->data = data;
    s->owner = NULL; /* a plugin's allocation sets it, with the hold it took */
    s->host_block_size = 0;
    return s;
}

/* Host memory from the core's own allocator lives in one block with its
 * storage header: one allocation instead of two.  The block comes from the
 * caching host allocator (c10/host_alloc.c), so a large output made again
 * and again reuses the same, already faulted-in pages.  This is most of the
 * fixed cost of an operator on small tensors, and of a fresh large output. */
static int host_storage_new(wf_storage **out, size_t nbytes, weft_device device)
{
    size_t header = sizeof(wf_storage), total, size;
    if (__builtin_add_overflow(header + 63, nbytes, &total))
        return wf__errorf(WEFT_ENOMEM, "out of host memory allocating %zu bytes", nbytes);
    char *block = wf__host_block_alloc(total, &size);
    if (!block)
        return wf__errorf(WEFT_ENOMEM, "out of host memory allocating %zu bytes", nbytes);
    wf_storage *s = (wf_storage *)block;
    uintptr_t data = ((uintptr_t)(block + header) + 63) & ~(uintptr_t)63;
    atomic_init(&s->refcount, 1);
    atomic_init(&s->version, 0);
    s->read_only = false;
    s->profiled = false;
    s->device = device;
    s->nbytes = nbytes;
    s->data.data = (void *)data;
    s->data.ctx = NULL;
    s->data.deleter = NULL; /* freed with the header */
    s->owner = NULL;
    s->host_block_size = size;
    *out = s;
    return 0;
}

/* Memory from a plugin's allocator.  The storage holds the allocator's
 * registrar from before allocate() runs until after the deleter has run, so
 * the plugin is not unloaded in between; the caller marks this as a section
 * that unload waits for (the allocator copy and its registrar are read
 * here). */
static int plugin_storage_new(wf_storage **out, const weft_allocator *alloc, size_t nbytes,
                              weft_device device)
{
    /* every allocator but the core's host one is a registrar's copy */
    wf_owner *owner = ((const wf_allocator_copy *)alloc)->owner;
    if (owner && !wf__owner_try_hold(owner, WF_HOLD_STORAGE))
        return wf__errorf(WEFT_EBUSY,
                          "cannot allocate on %s: its plugin '%s' is being unloaded",
                          wf__device_types[device.type].name, owner->name);
    weft_data_ptr data = {NULL, NULL, NULL};
    int rc = alloc->allocate(alloc->ctx, nbytes, device.index, &data);
    wf_storage *s = rc < 0 ? NULL : wf__storage_wrap(data, nbytes, device);
    if (!s) {
        if (rc == 0 && data.deleter)
            data.deleter(data.data, data.ctx);
        if (owner)
            wf__owner_drop_kind(owner, WF_HOLD_STORAGE);
        return rc < 0 ? rc : wf__errorf(WEFT_ENOMEM, "out of memory allocating a storage");
    }
    s->owner = owner;
    *out = s;
    return 0;
}

/* Tells the profiler of a new storage, when some thread profiles memory. */
static inline int report_alloc(int rc, wf_storage **out)
{
    void (*hook)(wf_storage *) =
        atomic_load_explicit(&wf__storage_hooks.alloc, memory_order_relaxed);
    if (__builtin_expect(hook != NULL, 0) && rc == 0)
        hook(*out);
    return rc;
}

int wf__storage_new(wf_storage **out, size_t nbytes, weft_device device)
{
    *out = NULL;
    wf_device_type *dt = &wf__device_types[device.type];
    const weft_allocator *alloc = atomic_load_explicit(&dt->allocator, memory_order_acquire);
    if (alloc == wf__host_allocator)
        return report_alloc(host_storage_new(out, nbytes, device), out);
    /* a plugin's allocator: read again inside the section (an unload that
     * does not wait for this thread has unpublished it before) */
    wf_reader_tls *rt = wf__reader_enter();
    alloc = atomic_load_explicit(&dt->allocator, memory_order_acquire);
    int rc = alloc ? plugin_storage_new(out, alloc, nbytes, device)
                   : wf__errorf(WEFT_EDEVICE, "no allocator for device type '%s'", dt->name);
    wf__reader_exit(rt);
    return report_alloc(rc, out);
}

void wf__storage_retain(wf_storage *s)
{
    atomic_fetch_add_explicit(&s->refcount, 1, memory_order_relaxed);
}

void wf__storage_release(wf_storage *s)
{
    if (!s || atomic_fetch_sub_explicit(&s->refcount, 1, memory_order_acq_rel) != 1)
        return;
    if (__builtin_expect(s->profiled, 0))
        atomic_load_explicit(&wf__storage_hooks.free, memory_order_relaxed)(s);
    if (s->data.deleter)
        s->data.deleter(s->data.data, s->data.ctx);
    if (s->owner)
        wf__owner_drop(s->owner);
    if (s->host_block_size)
        wf__host_block_free(s, s->host_block_size);
    else
        free(s);
}
