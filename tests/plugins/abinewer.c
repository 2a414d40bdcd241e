/* tests/plugins/abinewer.c — descriptors the loader must refuse before
 * running any code: built with -DNEWER_MINOR, one for a newer minor of this
 * ABI (it may use slots this core lacks); with -DTOO_SMALL, one whose
 * struct_size does not even reach init. */
#include <stdlib.h>

#include <weft/plugin.h>

static int init(weft_registrar *reg)
{
    (void)reg;
    abort(); /* must never run */
}

#if defined(NEWER_MINOR)
WEFT_PLUGIN_EXPORT const weft_plugin_descriptor weft_plugin_entry = {
    sizeof(weft_plugin_descriptor), WEFT_PLUGIN_ABI_MAJOR, WEFT_PLUGIN_ABI_MINOR + 1, 0, "newer",
    NULL, NULL, NULL, init, NULL,
};
#elif defined(TOO_SMALL)
WEFT_PLUGIN_EXPORT const weft_plugin_descriptor weft_plugin_entry = {
    16, WEFT_PLUGIN_ABI_MAJOR, 0, 0, "small", NULL, NULL, NULL, init, NULL,
};
#else
#error "build with -DNEWER_MINOR or -DTOO_SMALL"
#endif
