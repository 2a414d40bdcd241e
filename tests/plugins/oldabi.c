/* tests/plugins/oldabi.c — "testold": a plugin built against an older,
 * shorter layout of every boundary struct, defined here as such a plugin's
 * headers had them: a descriptor without fini, a device interface without
 * dlpack_device_code (or anything after it), an allocator without stats and
 * empty_cache.  Each is followed in memory by trap values where the newer
 * fields would be: a core that reads beyond struct_size instead of
 * zero-extending finds a DLPack code, or calls a function that aborts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <weft/plugin.h>

typedef struct old_descriptor {
    uint32_t struct_size, abi_major, abi_minor, reserved;
    const char *name, *variant, *version;
    int (*score)(void);
    int (*init)(weft_registrar *reg);
} old_descriptor;

typedef struct old_device_interface {
    uint32_t struct_size, version;
    void *ctx;
    int (*device_count)(void *ctx);
    int (*copy_to_host)(void *ctx, void *dst, const void *src, size_t nbytes, int device_index);
    int (*copy_from_host)(void *ctx, void *dst, const void *src, size_t nbytes, int device_index);
    int (*copy_device)(void *ctx, void *dst, int dst_index, const void *src, int src_index,
                       size_t nbytes);
    int (*synchronize)(void *ctx, int device_index);
} old_device_interface;

typedef struct old_allocator {
    uint32_t struct_size, version;
    void *ctx;
    int (*allocate)(void *ctx, size_t nbytes, int device_index, weft_data_ptr *out);
} old_allocator;

static void trap(void)
{
    abort(); /* the core read past an old struct's end */
}

static int count(void *ctx)
{
    (void)ctx;
    return 1;
}

static int copy(void *ctx, void *dst, const void *src, size_t n, int index)
{
    (void)ctx;
    (void)index;
    memcpy(dst, src, n);
    return 0;
}

static int copy_device(void *ctx, void *dst, int di, const void *src, int si, size_t n)
{
    (void)ctx;
    (void)di;
    (void)si;
    memcpy(dst, src, n);
    return 0;
}

static int sync_(void *ctx, int index)
{
    (void)ctx;
    (void)index;
    return 0;
}

static void release(void *data, void *ctx)
{
    (void)ctx;
    free(data);
}

static int allocate(void *ctx, size_t n, int index, weft_data_ptr *out)
{
    (void)ctx;
    (void)index;
    out->data = malloc(n ? n : 1);
    out->ctx = NULL;
    out->deleter = release;
    return out->data ? 0 : weft_set_error(WEFT_ENOMEM, "olddev: out of memory");
}

/* neg for olddev, float32 contiguous */
static int neg(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *t = call->args[0].u.tensor;
    if (weft_tensor_dtype(t) != WEFT_FLOAT32 || !weft_tensor_is_contiguous(t))
        return weft_set_error(WEFT_EDTYPE, "olddev neg: contiguous float32 only");
    weft_tensor *out;
    int rc = weft_empty(&out, weft_tensor_sizes(t), weft_tensor_ndim(t), WEFT_FLOAT32,
                        weft_tensor_device(t));
    if (rc < 0)
        return rc;
    const float *src = weft_tensor_data_ptr(t);
    float *dst = weft_tensor_data_ptr(out);
    for (int64_t i = 0; i < weft_tensor_numel(t); i++)
        dst[i] = -src[i];
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    call->rets[0].u.tensor = out;
    return 0;
}

/* the old struct, then where newer fields would be, traps */
static const struct {
    old_device_interface iface;
    int dlpack_device_code; /* a valid-looking code: must not be seen */
    void (*newer[16])(void);
} dev = {
    {sizeof(old_device_interface), 1, NULL, count, copy, copy, copy_device, sync_},
    12,
    {trap, trap, trap, trap, trap, trap, trap, trap, trap, trap, trap, trap, trap, trap, trap, trap},
};

static const struct {
    old_allocator alloc;
    void (*newer[4])(void);
} mem = {
    {sizeof(old_allocator), 1, NULL, allocate},
    {trap, trap, trap, trap},
};

static int init(weft_registrar *reg)
{
    int type;
    int rc = weft_register_device_type(reg, "olddev", (const weft_device_interface *)&dev.iface,
                                       (const weft_allocator *)&mem.alloc, &type);
    if (rc == 0)
        rc = weft_register_kernel(reg, "neg", WEFT_KEY_DENSE, type, neg, NULL, NULL);
    return rc;
}

WEFT_PLUGIN_EXPORT const struct {
    old_descriptor desc;
    void (*fini)(void); /* where fini is now: must not be called */
} weft_plugin_entry = {
    {sizeof(old_descriptor), WEFT_PLUGIN_ABI_MAJOR, 0, 0, "testold", NULL, "0.9", NULL, init},
    trap,
};
