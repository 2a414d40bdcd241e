/* c10/storage.c — reference-counted owners of device memory.  A storage
 * frees its memory through the deleter that came with it, on whichever
 * thread drops the last reference. */
#include <stdlib.h>

#include "c10/core.h"

wf_storage *wf__storage_wrap(weft_data_ptr data, size_t nbytes, weft_device device,
                             struct weft_registrar *owner)
{
    wf_storage *s = malloc(sizeof *s);
    if (!s)
        return NULL;
    atomic_init(&s->refcount, 1);
    atomic_init(&s->version, 0);
    s->read_only = false;
    s->device = device;
    s->nbytes = nbytes;
    s->data = data;
    s->owner = owner;
    if (owner)
        wf__registrar_hold(owner);
    return s;
}

int wf__storage_new(wf_storage **out, size_t nbytes, weft_device device)
{
    *out = NULL;
    wf_device_type *dt = &wf__device_types[device.type];
    const weft_allocator *alloc = atomic_load_explicit(&dt->allocator, memory_order_acquire);
    if (!alloc)
        return wf__errorf(WEFT_EDEVICE, "no allocator for device type '%s'", dt->name);
    weft_data_ptr data = {NULL, NULL, NULL};
    int rc = alloc->allocate(alloc->ctx, nbytes, device.index, &data);
    if (rc < 0)
        return rc;
    wf_storage *s = wf__storage_wrap(data, nbytes, device, dt->allocator_owner);
    if (!s) {
        if (data.deleter)
            data.deleter(data.data, data.ctx);
        return wf__errorf(WEFT_ENOMEM, "out of memory allocating a storage");
    }
    *out = s;
    return 0;
}

void wf__storage_retain(wf_storage *s)
{
    atomic_fetch_add_explicit(&s->refcount, 1, memory_order_relaxed);
}

void wf__storage_release(wf_storage *s)
{
    if (!s || atomic_fetch_sub_explicit(&s->refcount, 1, memory_order_acq_rel) != 1)
        return;
    if (s->data.deleter)
        s->data.deleter(s->data.data, s->data.ctx);
    if (s->owner)
        wf__registrar_drop(s->owner);
    free(s);
}
