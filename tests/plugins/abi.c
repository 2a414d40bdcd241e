/* tests/plugins/abi.c — a plugin built for a future, incompatible plugin ABI
 * major: the loader must refuse it before running any of its code. */
#include <stdlib.h>

#include <weft/plugin.h>

static int init(weft_registrar *reg)
{
    (void)reg;
    abort(); /* must never run */
}

WEFT_PLUGIN_EXPORT const weft_plugin_descriptor weft_plugin_entry = {
    sizeof(weft_plugin_descriptor), WEFT_PLUGIN_ABI_MAJOR + 98, 0, 0, "future", NULL, NULL, NULL,
    init, NULL,
};
