/* c10/device.c — the device-type registry and the host allocator.  CPU is
 * built in; CUDA and HIP ids are reserved (named, without an interface until
 * their plugin provides one); other types are registered by plugins through
 * the registrar (dispatch/registrar.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c10/core.h"
#include "c10/quiesce.h"

wf_device_type wf__device_types[WEFT_MAX_DEVICE_TYPES];

/* Host memory is 64-byte aligned: a full cache line, enough for AVX-512
 * loads, and what DLPack consumers such as JAX expect before they copy. */
static void host_free(void *data, void *ctx)
{
    (void)ctx;
    free(data);
}

static int host_allocate(void *ctx, size_t nbytes, int device_index, weft_data_ptr *out)
{
    (void)ctx;
    (void)device_index;
    void *p = NULL;
    size_t n = nbytes ? (nbytes + 63) & ~(size_t)63 : 64;
    if (n < nbytes || posix_memalign(&p, 64, n) != 0)
        return weft_set_error(WEFT_ENOMEM, "out of host memory allocating %zu bytes", nbytes);
    out->data = p;
    out->ctx = NULL;
    out->deleter = host_free;
    return 0;
}

/* Storages bypass host_allocate (c10/storage.c takes blocks from the caching
 * allocator directly); its statistics and empty_cache are the cache's. */
static int host_stats(void *ctx, int device_index, weft_allocator_stats *out)
{
    (void)ctx;
    (void)device_index;
    return weft_host_allocator_stats(out);
}

static void host_empty_cache(void *ctx)
{
    (void)ctx;
    weft_host_empty_cache();
}

static const weft_allocator host_allocator = {
    sizeof(weft_allocator), WEFT_ALLOCATOR_VERSION, NULL, host_allocate, host_stats,
    host_empty_cache,
};

const weft_allocator *const wf__host_allocator = &host_allocator;

static int host_count(void *ctx)
{
    (void)ctx;
    return 1;
}

static int host_copy(void *ctx, void *dst, const void *src, size_t nbytes, int index)
{
    (void)ctx;
    (void)index;
    if (nbytes)
        memmove(dst, src, nbytes);
    return 0;
}

static int host_copy_device(void *ctx, void *dst, int di, const void *src, int si, size_t n)
{
    (void)di;
    return host_copy(ctx, dst, src, n, si);
}

static int host_sync(void *ctx, int index)
{
    (void)ctx;
    (void)index;
    return 0;
}

/* every interface in the table is a wf_iface_copy: the host's has no owner */
static const wf_iface_copy host_interface = {
    {sizeof(weft_device_interface), WEFT_DEVICE_INTERFACE_VERSION, NULL, host_count, host_copy,
     host_copy, host_copy_device, host_sync, 1 /* kDLCPU */, .kind = WEFT_DEVICE_KIND_HOST},
    NULL,
};

void wf__device_init(void)
{
    wf_device_type *cpu = &wf__device_types[WEFT_DEVICE_TYPE_CPU];
    atomic_store(&cpu->name, "cpu");
    atomic_store(&cpu->allocator, &host_allocator);
    cpu->base_allocator = &host_allocator;
    atomic_store(&cpu->iface, &host_interface.i);
    cpu->registered = true;
    atomic_store(&wf__device_types[WEFT_DEVICE_TYPE_CUDA].name, "cuda");
    wf__device_types[WEFT_DEVICE_TYPE_CUDA].registered = true;
    atomic_store(&wf__device_types[WEFT_DEVICE_TYPE_HIP].name, "hip");
    wf__device_types[WEFT_DEVICE_TYPE_HIP].registered = true;
}

weft_keyset wf__dense_keys(weft_device device)
{
    return WEFT_KEYSET_BIT(WEFT_KEY_DENSE) | WEFT_KEYSET_BIT(device.type);
}

int wf__check_device(weft_device device, const char *op)
{
    if (device.type < 0 || device.type >= WEFT_MAX_DEVICE_TYPES ||
        !wf__device_types[device.type].registered)
        return wf__errorf(WEFT_EDEVICE, "%s: unknown device type %d", op, device.type);
    const wf_device_type *dt = &wf__device_types[device.type];
    if (!atomic_load_explicit(&dt->allocator, memory_order_acquire))
        return wf__errorf(WEFT_EDEVICE,
                          "%s: device type '%s' has no allocator: is its plugin loaded?", op,
                          dt->name);
    int count = 1; /* the host: no plugin code to guard */
    if (device.type != WEFT_DEVICE_TYPE_CPU) {
        /* in the section before the interface is read, so an unload that
         * misses this thread also kept it from finding the old interface */
        wf_reader_tls *rt = wf__reader_enter();
        const weft_device_interface *iface =
            atomic_load_explicit(&dt->iface, memory_order_acquire);
        count = iface && iface->device_count ? iface->device_count(iface->ctx) : 0;
        wf__reader_exit(rt);
    }
    if (device.index < 0 || device.index >= count)
        return wf__errorf(WEFT_EDEVICE, "%s: device %s:%d does not exist (%d device%s of that type)",
                          op, dt->name, device.index, count, count == 1 ? "" : "s");
    return 0;
}

void wf__device_type_unregister(int type)
{
    wf_device_type *dt = &wf__device_types[type];
    atomic_store(&dt->allocator, NULL);
    atomic_store(&dt->iface, NULL);
    dt->owner = NULL;
    /* a reserved type keeps its name; only the plugin's part goes.  A
     * dynamic one keeps its name pointer too, unregistered, so the same
     * name registered again gets the same id. */
    if (type >= WEFT_DEVICE_TYPE_FIRST_DYNAMIC)
        atomic_store(&dt->registered, false);
}

/* Which free dynamic id a new type gets (registry lock held): the one that
 * last carried the same name (a plugin unloaded and loaded again keeps its
 * id), else `fallback`, the lowest free one — so a type whose plugin's init
 * failed leaves no gap in the ids that later types get. */
int wf__device_type_pick_free(const char *name, int fallback)
{
    for (int i = WEFT_DEVICE_TYPE_FIRST_DYNAMIC; i < WEFT_MAX_DEVICE_TYPES; i++) {
        const wf_device_type *dt = &wf__device_types[i];
        const char *old = atomic_load(&dt->name);
        if (!atomic_load(&dt->registered) && old && strcmp(old, name) == 0)
            return i;
    }
    return fallback;
}

/* Interned names: a list that only grows, each entry written before it is
 * published under the registry lock, never freed (reachable from `interned`
 * until exit).  A process meets a handful of device type names. */
typedef struct interned_name {
    struct interned_name *next;
    char text[WF_DEVICE_NAME_MAX];
} interned_name;
static interned_name *interned;

const char *wf__device_name_intern(const char *name)
{
    for (interned_name *n = interned; n; n = n->next)
        if (strcmp(n->text, name) == 0)
            return n->text;
    interned_name *n = wf__malloc(sizeof *n);
    if (!n)
        return NULL;
    snprintf(n->text, sizeof n->text, "%s", name);
    n->next = interned;
    interned = n;
    return n->text;
}

WEFT_API const char *weft_device_type_name(int type)
{
    if (type < 0 || type >= WEFT_MAX_DEVICE_TYPES || !wf__device_types[type].registered)
        return NULL;
    return wf__device_types[type].name;
}

WEFT_API int weft_device_type_from_name(const char *name)
{
    if (!name)
        return wf__errorf(WEFT_EINVAL, "weft_device_type_from_name: name is NULL");
    for (int i = 0; i < WEFT_MAX_DEVICE_TYPES; i++)
        if (wf__device_types[i].registered && strcmp(wf__device_types[i].name, name) == 0)
            return i;
    return wf__errorf(WEFT_ENOTFOUND, "unknown device type '%s'", name);
}

WEFT_API int weft_device_count(int type)
{
    if (type < 0 || type >= WEFT_MAX_DEVICE_TYPES || !wf__device_types[type].registered)
        return 0;
    wf_reader_tls *rt = wf__reader_enter();
    const weft_device_interface *iface =
        atomic_load_explicit(&wf__device_types[type].iface, memory_order_acquire);
    int n = iface && iface->device_count ? iface->device_count(iface->ctx) : 0;
    wf__reader_exit(rt);
    return n < 0 ? 0 : n;
}

WEFT_API int weft_device_type_kind(int type)
{
    if (type < 0 || type >= WEFT_MAX_DEVICE_TYPES || !wf__device_types[type].registered)
        return wf__errorf(WEFT_EDEVICE, "device_type_kind: unknown device type %d", type);
    /* the interface is the core's zero-extended copy, so `kind` is there
     * (0) even for a plugin built before the field existed; reading a field
     * calls no plugin code, so no section is needed */
    const weft_device_interface *iface =
        atomic_load_explicit(&wf__device_types[type].iface, memory_order_acquire);
    if (!iface)
        return wf__errorf(WEFT_EDEVICE, "device type '%s' is provided by no loaded plugin",
                          wf__device_types[type].name);
    int kind = iface->kind;
    return kind >= WEFT_DEVICE_KIND_HOST && kind <= WEFT_DEVICE_KIND_EMULATED
               ? kind
               : WEFT_DEVICE_KIND_UNKNOWN;
}

WEFT_API int weft_device_from_string(weft_device *out, const char *text)
{
    if (!out || !text)
        return wf__errorf(WEFT_EINVAL, "weft_device_from_string: NULL argument");
    const char *colon = strchr(text, ':');
    size_t len = colon ? (size_t)(colon - text) : strlen(text);
    char name[32];
    if (len == 0 || len >= sizeof name)
        return wf__errorf(WEFT_EINVAL, "malformed device string '%s'", text);
    memcpy(name, text, len);
    name[len] = '\0';
    long index = 0;
    if (colon) {
        char *end;
        index = strtol(colon + 1, &end, 10);
        if (end == colon + 1 || *end != '\0' || index < 0 || index > INT16_MAX)
            return wf__errorf(WEFT_EINVAL, "malformed device index in '%s'", text);
    }
    int type = -1;
    for (int i = 0; i < WEFT_MAX_DEVICE_TYPES; i++)
        if (wf__device_types[i].registered && strcmp(wf__device_types[i].name, name) == 0)
            type = i;
    if (type < 0)
        return wf__errorf(WEFT_EDEVICE, "unknown device type '%s' in '%s'", name, text);
    out->type = (int16_t)type;
    out->index = (int16_t)index;
    return 0;
}

WEFT_API int weft_device_to_string(weft_device device, char *buf, size_t size)
{
    const char *name = weft_device_type_name(device.type);
    if (!name)
        return snprintf(buf, size, "unknown%d:%d", device.type, device.index);
    if (device.type == WEFT_DEVICE_TYPE_CPU)
        return snprintf(buf, size, "%s", name);
    return snprintf(buf, size, "%s:%d", name, device.index);
}

static int copy_bytes(void *dst, weft_device dst_dev, const void *src, weft_device src_dev,
                      size_t nbytes);

/* Runs plugin copy functions: a section unload waits for. */
int wf__copy_bytes(void *dst, weft_device dst_dev, const void *src, weft_device src_dev,
                   size_t nbytes)
{
    if (nbytes == 0)
        return 0;
    wf_reader_tls *rt = wf__reader_enter();
    int rc = copy_bytes(dst, dst_dev, src, src_dev, nbytes);
    wf__reader_exit(rt);
    return rc;
}

static int copy_bytes(void *dst, weft_device dst_dev, const void *src, weft_device src_dev,
                      size_t nbytes)
{
    const weft_device_interface *di =
        atomic_load_explicit(&wf__device_types[dst_dev.type].iface, memory_order_acquire);
    const weft_device_interface *si =
        atomic_load_explicit(&wf__device_types[src_dev.type].iface, memory_order_acquire);
    if (src_dev.type == WEFT_DEVICE_TYPE_CPU && dst_dev.type == WEFT_DEVICE_TYPE_CPU) {
        memmove(dst, src, nbytes);
        return 0;
    }
    if (src_dev.type == WEFT_DEVICE_TYPE_CPU) {
        if (!di || !di->copy_from_host)
            return wf__errorf(WEFT_ENOTSUP, "device '%s' cannot copy from the host",
                              wf__device_types[dst_dev.type].name);
        return di->copy_from_host(di->ctx, dst, src, nbytes, dst_dev.index);
    }
    if (dst_dev.type == WEFT_DEVICE_TYPE_CPU) {
        if (!si || !si->copy_to_host)
            return wf__errorf(WEFT_ENOTSUP, "device '%s' cannot copy to the host",
                              wf__device_types[src_dev.type].name);
        return si->copy_to_host(si->ctx, dst, src, nbytes, src_dev.index);
    }
    if (src_dev.type == dst_dev.type && si && si->copy_device)
        return si->copy_device(si->ctx, dst, dst_dev.index, src, src_dev.index, nbytes);
    /* between two device types: stage through the host */
    void *tmp = wf__malloc(nbytes);
    if (!tmp)
        return wf__errorf(WEFT_ENOMEM, "out of memory staging a %zu-byte copy", nbytes);
    int rc = copy_bytes(tmp, WEFT_DEVICE_CPU, src, src_dev, nbytes);
    if (rc == 0)
        rc = copy_bytes(dst, dst_dev, tmp, WEFT_DEVICE_CPU, nbytes);
    free(tmp);
    return rc;
}
