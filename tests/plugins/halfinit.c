/* tests/plugins/halfinit.c — a plugin whose init registers half of what it
 * means to (a new operator, an override of neg on the CPU, a fallback, a
 * device type) and then fails: the loader must roll all of it back, and the
 * device type's id must go to the next type registered (no gap).  The
 * failure's message says which id the type had. */
#include <weft/plugin.h>

#include "tests/host_device.h"

static int bogus(weft_call *call, void *ctx)
{
    (void)call;
    (void)ctx;
    return weft_set_error(WEFT_EINTERNAL, "halfinit's kernel must never run");
}

static int init(weft_registrar *reg)
{
    int rc = weft_register_op(reg, "halfinit_op(Tensor self) -> Tensor", NULL);
    if (rc == 0)
        rc = weft_register_kernel(reg, "neg", WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, bogus, NULL,
                                  NULL);
    if (rc == 0)
        rc = weft_register_fallback(reg, WEFT_KEY_USER1, 0, bogus, NULL, NULL);
    int type = -1;
    if (rc == 0)
        rc = weft_register_device_type(reg, "halfdev", &host_device_iface, &host_device_alloc, &type);
    if (rc < 0)
        return rc;
    return weft_set_error(WEFT_EINVAL,
                          "halfinit: simulated failure after four registrations (device type "
                          "'halfdev' got id %d)",
                          type);
}

WEFT_PLUGIN_DEFINE("halfinit", NULL, "1.0", NULL, init, NULL);
