/* layouts/quantized/plugin.c — the entry of libweft-quantized.so: registers
 * the "quantized" layout (affine quantizers, affine.c) with its operators
 * and views (views.c), and the weight-block layouts "q8_0" and "q4_0"
 * (blocks.c) after choosing their dot-product kernels for this CPU
 * (block_kernels.c).  Every registration goes through the registrar, so a
 * failing init is rolled back whole and unloading takes it all away. */
#include "quantized.h"

static int quantized_init(weft_registrar *reg)
{
    int rc;
    if ((rc = qt__choose_kernels()) < 0 || (rc = qt__register_affine(reg)) < 0 ||
        (rc = qt__register_views(reg)) < 0 || (rc = qt__register_blocks(reg)) < 0)
        return rc;
    return 0;
}

WEFT_PLUGIN_DEFINE("quantized", "baseline", "1.0", NULL, quantized_init, NULL);
