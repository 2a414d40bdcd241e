/* tests/plugins/hostdev.c — a device plugin with nothing but an allocator
 * and copies: the device type "hostdev", whose memory is host memory.  Every
 * operator on it runs through the core's CPU fallback, which is what
 * tests/conformance.sh checks with weft-conformance.  Built a second time
 * with HOSTDEV_WRONG_NEG, it registers a neg kernel that forgets the sign,
 * so the test can show that weft-conformance catches a wrong kernel.  Built
 * with HOSTDEV_ACCELERATOR, it is "accdev" and says it is an accelerator,
 * which weft-train --device best then chooses (tests/train.sh). */
#include <weft/plugin.h>

#include "tests/host_device.h"

#ifdef HOSTDEV_ACCELERATOR
#define HOSTDEV_NAME "accdev"
#define HOSTDEV_KIND WEFT_DEVICE_KIND_ACCELERATOR
#else
#define HOSTDEV_NAME "hostdev"
#define HOSTDEV_KIND WEFT_DEVICE_KIND_EMULATED
#endif

#ifdef HOSTDEV_WRONG_NEG
/* "neg" that copies its input: wrong for every nonzero element */
static int wrong_neg(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor *out = NULL;
    int rc = weft_empty_like(&out, call->args[0].u.tensor);
    if (rc == 0)
        rc = weft_copy_(out, call->args[0].u.tensor);
    if (rc < 0) {
        weft_tensor_release(out);
        return rc;
    }
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    call->rets[0].u.tensor = out;
    return 0;
}
#endif

static int init(weft_registrar *reg)
{
    /* really emulated: its memory is host memory and its work runs on the
     * CPU; accdev only claims otherwise */
    static const weft_device_interface iface = {HOST_DEVICE_INTERFACE_FIELDS,
                                                .kind = HOSTDEV_KIND};
    int type;
    int rc = weft_register_device_type(reg, HOSTDEV_NAME, &iface, &host_device_alloc, &type);
#ifdef HOSTDEV_WRONG_NEG
    if (rc == 0)
        rc = weft_register_kernel(reg, "neg", WEFT_KEY_DENSE, type, wrong_neg, NULL, NULL);
#endif
    return rc;
}

WEFT_PLUGIN_DEFINE(HOSTDEV_NAME, NULL, "1.0", NULL, init, NULL);
