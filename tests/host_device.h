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

#endif
