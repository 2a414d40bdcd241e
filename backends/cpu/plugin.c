/* backends/cpu/plugin.c — the CPU plugin's entry: registers every dense CPU
 * kernel (all operators but copy_ and matmul, which the core provides),
 * sizes the thread pool and OpenBLAS, and stops the pool on unload.  Also the
 * small helpers the kernel files share. */
#include <stdio.h>

#include "cpu.h"
#include "nn.h"
#include "shape.h"

const char *cpu__shape_str(char *buf, size_t size, const int64_t *sizes, int ndim)
{
    size_t used = 0;
    used += (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? ", " : "",
                                 (long long)sizes[i]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}

int cpu__check_cpu(const char *op, const char *arg, const weft_tensor *t)
{
    weft_device device = weft_tensor_device(t);
    if (device.type == WEFT_DEVICE_TYPE_CPU)
        return 0;
    char name[64];
    weft_device_to_string(device, name, sizeof name);
    return weft_set_error(WEFT_EDEVICE,
                          "%s: expected all tensors to be on the same device, but argument "
                          "'%s' is on %s and the CPU kernel needs cpu",
                          op, arg, name);
}

double cpu__scalar_arg(const weft_value *v)
{
    switch (v->tag) {
    case WEFT_VALUE_INT:
        return (double)v->u.i;
    case WEFT_VALUE_BOOL:
        return v->u.b ? 1.0 : 0.0;
    case WEFT_VALUE_DOUBLE:
        return v->u.d;
    default:
        return 0.0;
    }
}

int cpu__unsupported_dtype(const char *op, weft_dtype dtype)
{
    return weft_set_error(WEFT_EDTYPE, "%s: not supported for dtype %s on the CPU", op,
                          weft_dtype_name(dtype));
}

int cpu__deliver(weft_call *call, weft_tensor *out, weft_tensor *dest, int rc)
{
    if (rc == 0 && out && dest != out)
        rc = weft_copy_(out, dest);
    if (rc == 0 && !out) {
        call->rets[0].tag = WEFT_VALUE_TENSOR;
        call->rets[0].u.tensor = dest;
    } else {
        weft_tensor_release(dest);
    }
    return rc;
}

int cpu__register_table(weft_registrar *reg, const cpu_kernel_entry *entries, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        int rc = weft_register_kernel(reg, entries[i].op, WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU,
                                      entries[i].fn, (void *)entries[i].ctx, NULL);
        if (rc < 0)
            return rc; /* the core rolls back what was registered */
    }
    return 0;
}

static int cpu_init(weft_registrar *reg)
{
    int rc = cpu__parallel_init();
    if (rc < 0)
        return rc;
    cpu__blas_init(cpu__num_threads());
    if ((rc = cpu__register_fill(reg)) < 0 || (rc = cpu__register_elementwise(reg)) < 0 ||
        (rc = cpu__register_unary(reg)) < 0 || (rc = cpu__register_reduce(reg)) < 0 ||
        (rc = cpu__register_blas(reg)) < 0 || (rc = cpu__register_binary(reg)) < 0 ||
        (rc = cpu__register_reduce_rows(reg)) < 0 || (rc = cpu__register_dropout(reg)) < 0 ||
        (rc = cpu__register_random(reg)) < 0 ||
        (rc = cpu__register_nn(reg)) < 0 || (rc = cpu__register_shape(reg)) < 0 ||
        (rc = cpu__register_index(reg)) < 0 || (rc = cpu__register_sort(reg)) < 0 ||
        (rc = cpu__register_index_write(reg)) < 0)
        return rc;
    return 0;
}

static void cpu_fini(void)
{
    cpu__parallel_shutdown();
}

WEFT_PLUGIN_DEFINE("cpu", CPU_VARIANT, "0.1.0", cpu__score, cpu_init, cpu_fini);
