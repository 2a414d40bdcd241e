/* tests/plugins/variant.c — one plugin, "vtest", built three times with
 * different scores (VARIANT_SCORE, VARIANT_NAME): the loader must pick the
 * best that can run and never init the others. */
#include <stdlib.h>

#include <weft/plugin.h>

static int score(void)
{
    return VARIANT_SCORE;
}

static int init(weft_registrar *reg)
{
    (void)reg;
    if (VARIANT_SCORE < 0)
        abort(); /* a variant that cannot run here must never be initialised */
    return 0;
}

WEFT_PLUGIN_DEFINE("vtest", VARIANT_NAME, "1.0", score, init, NULL);
