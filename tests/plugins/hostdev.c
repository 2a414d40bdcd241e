/* tests/plugins/hostdev.c — a device plugin with nothing but an allocator
 * and copies: the device type "hostdev", whose memory is host memory.  Every
 * operator on it runs through the core's CPU fallback, which is what
 * tests/conformance.sh checks with weft-conformance.  Built a second time
 * with HOSTDEV_WRONG_NEG, it registers a neg kernel that forgets the sign,
 * so the test can show that weft-conformance catches a wrong kernel. */
#include <weft/plugin.h>

#include "tests/host_device.h"

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
    static const weft_device_interface iface = {
        sizeof(weft_device_interface), WEFT_DEVICE_INTERFACE_VERSION, NULL, fake_count,
        fake_copy, fake_copy, fake_copy_device, fake_sync, 0,
    };
    static const weft_allocator alloc = {
        sizeof(weft_allocator), WEFT_ALLOCATOR_VERSION, NULL, fake_allocate, NULL, NULL,
    };
    int type;
    int rc = weft_register_device_type(reg, "hostdev", &iface, &alloc, &type);
#ifdef HOSTDEV_WRONG_NEG
    if (rc == 0)
        rc = weft_register_kernel(reg, "neg", WEFT_KEY_DENSE, type, wrong_neg, NULL, NULL);
#endif
    return rc;
}

WEFT_PLUGIN_DEFINE("hostdev", NULL, "1.0", NULL, init, NULL);
