/* backends/cpu/plugin.c — the CPU plugin's entry: registers every dense CPU
 * kernel (all operators but copy_ and matmul, which the core provides),
 * sizes the thread pool and OpenBLAS, and stops the pool on unload.  Also the
 * small helpers the kernel files share. */
#include <stdio.h>

#include "cpu.h"
#include "conv.h"
#include "nn.h"
#include "shape.h"

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

static int cpu_init(weft_registrar *reg)
{
    int rc = cpu__parallel_init();
    if (rc < 0)
        return rc;
    /* other plugins' CPU loops (weft_parallel_for) run on this pool too;
     * another pool registered first keeps that role (ours still serves our
     * own kernels) */
    if ((rc = weft_register_parallel_for(reg, cpu__parallel_for, NULL)) < 0 && rc != WEFT_EEXIST)
        return rc;
    cpu__blas_init(cpu__num_threads());
    cpu__gemm_library_init();
    cpu__conv_library_init();
    if ((rc = cpu__register_fill(reg)) < 0 || (rc = cpu__register_elementwise(reg)) < 0 ||
        (rc = cpu__register_unary(reg)) < 0 || (rc = cpu__register_reduce(reg)) < 0 ||
        (rc = cpu__register_blas(reg)) < 0 || (rc = cpu__register_binary(reg)) < 0 ||
        (rc = cpu__register_reduce_rows(reg)) < 0 || (rc = cpu__register_dropout(reg)) < 0 ||
        (rc = cpu__register_random(reg)) < 0 || (rc = cpu__register_optim(reg)) < 0 ||
        (rc = cpu__register_nn(reg)) < 0 || (rc = cpu__register_shape(reg)) < 0 ||
        (rc = cpu__register_index(reg)) < 0 || (rc = cpu__register_sort(reg)) < 0 ||
        (rc = cpu__register_index_write(reg)) < 0)
        return rc;
    return 0;
}

static void cpu_fini(void)
{
    cpu__parallel_shutdown();
    cpu__gemm_library_fini();
    cpu__conv_library_fini();
    cpu__onednn_fini(); /* after the layers that hold oneDNN's objects */
}

WEFT_PLUGIN_DEFINE("cpu", CPU_VARIANT, "0.1.0", cpu__score, cpu_init, cpu_fini);
