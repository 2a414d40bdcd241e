/* tests/plugins/dupdev.c — registers a kernel, then a device type whose name
 * another plugin ("testgood") already holds: init fails, and the kernel
 * registered before the failure is rolled back. */
#include <stdlib.h>

#include <weft/plugin.h>

static int bogus(weft_call *call, void *ctx)
{
    (void)call;
    (void)ctx;
    return weft_set_error(WEFT_EINTERNAL, "dupdev's kernel must never run");
}

static int count(void *ctx)
{
    (void)ctx;
    return 1;
}

static int copy(void *ctx, void *dst, const void *src, size_t n, int index)
{
    (void)ctx;
    (void)dst;
    (void)src;
    (void)n;
    (void)index;
    return 0;
}

static int sync_(void *ctx, int index)
{
    (void)ctx;
    (void)index;
    return 0;
}

static int allocate(void *ctx, size_t n, int index, weft_data_ptr *out)
{
    (void)ctx;
    (void)n;
    (void)index;
    (void)out;
    return weft_set_error(WEFT_ENOMEM, "dupdev: no memory");
}

static int init(weft_registrar *reg)
{
    static const weft_device_interface iface = {
        sizeof(weft_device_interface), WEFT_DEVICE_INTERFACE_VERSION, NULL, count, copy, copy, NULL,
        sync_, 0,
    };
    static const weft_allocator alloc = {
        sizeof(weft_allocator), WEFT_ALLOCATOR_VERSION, NULL, allocate, NULL, NULL,
    };
    int rc = weft_register_kernel(reg, "exp", WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, bogus, NULL, NULL);
    if (rc < 0)
        return rc;
    int type;
    return weft_register_device_type(reg, "testdev", &iface, &alloc, &type);
}

WEFT_PLUGIN_DEFINE("dupdev", NULL, "1.0", NULL, init, NULL);
