/* tests/host_device.h — the device-interface and allocator functions of a
 * fake device whose memory is host memory (two devices, copies are memcpy).
 * Tests register it under any name and DLPack code they like. */
#ifndef WEFT_TESTS_HOST_DEVICE_H
#define WEFT_TESTS_HOST_DEVICE_H

#include <stdlib.h>
#include <string.h>

#include <weft/plugin.h>

static int fake_count(void *ctx)
{
    (void)ctx;
    return 2;
}

static int fake_copy(void *ctx, void *dst, const void *src, size_t n, int index)
{
    (void)ctx;
    (void)index;
    memcpy(dst, src, n);
    return 0;
}

static int fake_copy_device(void *ctx, void *dst, int di, const void *src, int si, size_t n)
{
    (void)ctx;
    (void)di;
    (void)si;
    memcpy(dst, src, n);
    return 0;
}

static int fake_sync(void *ctx, int index)
{
    (void)ctx;
    (void)index;
    return 0;
}

static void fake_free(void *data, void *ctx)
{
    (void)ctx;
    free(data);
}

static int fake_allocate(void *ctx, size_t nbytes, int index, weft_data_ptr *out)
{
    (void)ctx;
    (void)index;
    out->data = malloc(nbytes ? nbytes : 1);
    out->ctx = NULL;
    out->deleter = fake_free;
    return out->data ? 0 : WEFT_ENOMEM;
}

/* The fake device's interface as an initializer, for a plugin that adds a
 * field of its own (.kind), and the interface and allocator themselves. */
#define HOST_DEVICE_INTERFACE_FIELDS                                                      \
    .struct_size = sizeof(weft_device_interface), .version = WEFT_DEVICE_INTERFACE_VERSION, \
    .device_count = fake_count, .copy_to_host = fake_copy, .copy_from_host = fake_copy,   \
    .copy_device = fake_copy_device, .synchronize = fake_sync

static const weft_device_interface host_device_iface = {HOST_DEVICE_INTERFACE_FIELDS};

static const weft_allocator host_device_alloc = {
    .struct_size = sizeof(weft_allocator),
    .version = WEFT_ALLOCATOR_VERSION,
    .allocate = fake_allocate,
};

#endif
