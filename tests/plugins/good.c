/* tests/plugins/good.c — a well-behaved test plugin: a device type
 * "testdev" whose memory is host memory, a new operator "test_twice" with
 * kernels for the CPU and testdev, and fill_ for testdev. */
#include <stdlib.h>
#include <string.h>

#include <weft/plugin.h>

static int testdev_type = -1;

static void dev_free(void *data, void *ctx)
{
    (void)ctx;
    free(data);
}

static int dev_allocate(void *ctx, size_t nbytes, int index, weft_data_ptr *out)
{
    (void)ctx;
    (void)index;
    out->data = malloc(nbytes ? nbytes : 1);
    if (!out->data)
        return weft_set_error(WEFT_ENOMEM, "testdev: out of memory");
    out->ctx = NULL;
    out->deleter = dev_free;
    return 0;
}

static int dev_count(void *ctx)
{
    (void)ctx;
    return 2;
}

static int dev_copy(void *ctx, void *dst, const void *src, size_t n, int index)
{
    (void)ctx;
    (void)index;
    memcpy(dst, src, n);
    return 0;
}

static int dev_copy_device(void *ctx, void *dst, int di, const void *src, int si, size_t n)
{
    (void)ctx;
    (void)di;
    (void)si;
    memcpy(dst, src, n);
    return 0;
}

static int dev_sync(void *ctx, int index)
{
    (void)ctx;
    (void)index;
    return 0;
}

/* test_twice(self) = 2 * self, float32 only: enough to see which kernel ran */
static int twice(weft_call *call, void *ctx)
{
    const weft_tensor *t = call->args[0].u.tensor;
    if (weft_tensor_dtype(t) != WEFT_FLOAT32 || !weft_tensor_is_contiguous(t))
        return weft_set_error(WEFT_EDTYPE, "test_twice: contiguous float32 only");
    weft_tensor *out;
    int rc = weft_empty(&out, weft_tensor_sizes(t), weft_tensor_ndim(t), WEFT_FLOAT32,
                        weft_tensor_device(t));
    if (rc < 0)
        return rc;
    const float *src = weft_tensor_data_ptr(t);
    float *dst = weft_tensor_data_ptr(out);
    float factor = ctx ? *(const float *)ctx : 2.0f;
    for (int64_t i = 0; i < weft_tensor_numel(t); i++)
        dst[i] = factor * src[i];
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    call->rets[0].u.tensor = out;
    return 0;
}

static float two = 2.0f, three = 3.0f;

static int fill(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor *t = call->args[0].u.tensor;
    if (weft_tensor_dtype(t) != WEFT_FLOAT32 || !weft_tensor_is_contiguous(t))
        return weft_set_error(WEFT_EDTYPE, "testdev fill_: contiguous float32 only");
    float *p = weft_tensor_data_ptr(t);
    for (int64_t i = 0; i < weft_tensor_numel(t); i++)
        p[i] = (float)call->args[1].u.d;
    return 0;
}

static int init(weft_registrar *reg)
{
    static const weft_device_interface iface = {
        sizeof(weft_device_interface), WEFT_DEVICE_INTERFACE_VERSION, NULL, dev_count, dev_copy,
        dev_copy, dev_copy_device, dev_sync, 0,
    };
    static const weft_allocator alloc = {
        sizeof(weft_allocator), WEFT_ALLOCATOR_VERSION, NULL, dev_allocate, NULL, NULL,
    };
    int rc = weft_register_device_type(reg, "testdev", &iface, &alloc, &testdev_type);
    if (rc == 0)
        rc = weft_register_op(reg, "test_twice(Tensor self) -> Tensor", NULL);
    if (rc == 0)
        rc = weft_register_kernel(reg, "test_twice", WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, twice,
                                  &two, NULL);
    if (rc == 0)
        rc = weft_register_kernel(reg, "test_twice", WEFT_KEY_DENSE, testdev_type, twice, &three,
                                  NULL);
    if (rc == 0)
        rc = weft_register_kernel(reg, "fill_", WEFT_KEY_DENSE, testdev_type, fill, NULL, NULL);
    return rc;
}

WEFT_PLUGIN_DEFINE("testgood", "baseline", "1.0", NULL, init, NULL);
