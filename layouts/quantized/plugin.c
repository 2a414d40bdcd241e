/* layouts/quantized/plugin.c — the entry of libweft-quantized.so: defines
 * the plugin's operators from its table (layouts/quantized/operators.def,
 * made into schemas.h by the build), registers the "quantized" layout
 * (affine quantizers, affine.c) with its kernels and views (views.c), and
 * the weight-block layouts "q8_0" and "q4_0" (blocks.c) after choosing
 * their dot-product kernels for this CPU (block_kernels.c).  Every
 * registration goes through the registrar, so a failing init is rolled
 * back whole and unloading takes it all away. */
#include "quantized.h"

static const char *const schemas[] = {
#include "layouts/quantized/schemas.h"
};

static int quantized_init(weft_registrar *reg)
{
    int rc = qt__choose_kernels();
    for (size_t i = 0; rc == 0 && i < sizeof schemas / sizeof *schemas; i++)
        rc = weft_register_op(reg, schemas[i], NULL);
    if (rc < 0 || (rc = qt__register_affine(reg)) < 0 || (rc = qt__register_views(reg)) < 0 ||
        (rc = qt__register_blocks(reg)) < 0)
        return rc;
    return 0;
}

WEFT_PLUGIN_DEFINE("quantized", "baseline", "1.0", NULL, quantized_init, NULL);
