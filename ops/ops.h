/* ops/ops.h — the operator layer's internal declarations.  ops/ sits above
 * the dispatcher: what is written with operators (factories that fill,
 * copies to another dtype or device, printing, item) and the core's own
 * kernels (copy_, the matmul composite, the split kernels, the CPU and
 * strided-layout fallbacks).  c10 and dispatch know nothing of it; the
 * composition root (init/init.c) registers its kernels and installs the
 * CPU fallback as every device's lowest-priority kernel. */
#ifndef WF_OPS_OPS_H
#define WF_OPS_OPS_H

#include "dispatch/dispatcher.h"

/* Registers copy_, matmul, tile, take and the split kernels under the core
 * registrar (ops/core_kernels.c, ops/split_kernels.c). */
void wo__core_kernels_register(void);
void wo__split_kernels_register(void);

/* The CPU fallback (ops/cpu_fallback.c): ctx is the device type. */
int wo__cpu_fallback_kernel(weft_call *call, void *ctx);
/* Runs call on the host: its tensors on `device` are staged to host memory
 * through the device's copies, written ones are copied back and new
 * results are copied to `device`.  What the fallback does, without the
 * mode, the warning and the count; copy_ uses it for strided views. */
int wo__run_on_host(weft_call *call, weft_device device);

/* A new contiguous tensor of dtype on device holding t's values, recorded
 * by autograd as a copy (ops/copy.c). */
int wo__copy_to_new(weft_tensor **out, const weft_tensor *t, weft_dtype dtype, weft_device device);

#endif
