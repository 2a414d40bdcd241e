/* tests/plugins/malformed.c — plugins that misbehave in one way each, built
 * once per BAD_CASE (tests/test_malformed_plugins.c puts each on the default
 * search path beside the CPU plugin).  Every case that gets as far as init
 * first registers a CPU kernel for exp that must never run and a device type,
 * so the test can tell that a failed init left the core's tables as they
 * were. */
#include <stdlib.h>
#include <string.h>

#include <weft/ops.h>
#include <weft/plugin.h>

#include "tests/host_device.h"

#ifndef BAD_NAME
#define BAD_NAME "bad" BAD_CASE_STR
#endif

static int bogus(weft_call *call, void *ctx)
{
    (void)call;
    (void)ctx;
    return weft_set_error(WEFT_EINTERNAL, "a malformed plugin's kernel ran");
}

/* What every init does before it misbehaves. */
static int register_some(weft_registrar *reg, const char *devname)
{
    static const weft_device_interface iface = {
        sizeof(weft_device_interface), WEFT_DEVICE_INTERFACE_VERSION, NULL, fake_count, fake_copy,
        fake_copy, fake_copy_device, fake_sync, 0,
    };
    static const weft_allocator alloc = {
        sizeof(weft_allocator), WEFT_ALLOCATOR_VERSION, NULL, fake_allocate, NULL, NULL,
    };
    int rc = 0;
#if BAD_CASE != 10 /* bad10 loads for real: its kernel would replace the CPU's */
    rc = weft_register_kernel(reg, "exp", WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, bogus, NULL, NULL);
    if (rc < 0)
        return rc;
#else
    (void)bogus;
    (void)rc;
#endif
    int type;
    return weft_register_device_type(reg, devname, &iface, &alloc, &type);
}

static int score(void)
{
#ifdef BAD_SCORE
    return BAD_SCORE;
#else
    return 0;
#endif
}

static int init(weft_registrar *reg)
{
    int rc = register_some(reg, "baddev");
    if (rc < 0)
        return rc;
#if BAD_CASE == 1 /* init fails with a message */
    return weft_set_error(WEFT_EINVAL, "bad1: this init always fails");
#elif BAD_CASE == 2 /* init fails without one */
    return WEFT_EINTERNAL;
#elif BAD_CASE == 3 /* init unloads itself */
    rc = weft_unload_plugin(BAD_NAME);
    return rc < 0 ? rc : 0;
#elif BAD_CASE == 4 /* named "cpu", a better score than the real one, init fails */
    return weft_set_error(WEFT_EINVAL, "bad4: a broken cpu build");
#elif BAD_CASE == 5 /* runs an operator before the CPU plugin is loaded */
    weft_tensor *a = NULL, *b = NULL;
    int64_t n = 4;
    rc = weft_ones(&a, &n, 1, WEFT_FLOAT32, (weft_device){WEFT_DEVICE_TYPE_CPU, 0});
    if (rc == 0)
        rc = weft_add(&b, a, a);
    weft_tensor_release(a);
    weft_tensor_release(b);
    return rc;
#elif BAD_CASE == 6 || BAD_CASE == 7 || BAD_CASE == 8 /* refused before init */
    return 0;
#elif BAD_CASE == 9 /* calls the default loader from its own init */
    rc = weft_load_default_plugins();
    return rc < 0 ? rc : 0;
#elif BAD_CASE == 10 /* the first of two plugins that register one device name */
    return 0;
#elif BAD_CASE == 11 /* the second: its device type is taken */
    return 0;
#else
#error unknown BAD_CASE
#endif
}

#if BAD_CASE == 6
static char long_name[10001];
__attribute__((constructor)) static void make_long_name(void)
{
    memset(long_name, 'x', sizeof long_name - 1);
}
WEFT_PLUGIN_EXPORT const weft_plugin_descriptor weft_plugin_entry = {
    sizeof(weft_plugin_descriptor), WEFT_PLUGIN_ABI_MAJOR, WEFT_PLUGIN_ABI_MINOR, 0, long_name,
    NULL, "1.0", score, init, NULL};
#elif BAD_CASE == 7 /* the entry symbol is a 1-byte object */
WEFT_PLUGIN_EXPORT const char weft_plugin_entry = 1;
int bad7_keep_init(weft_registrar *reg);
int bad7_keep_init(weft_registrar *reg)
{
    return init(reg) + score();
}
#elif BAD_CASE == 8 /* the entry symbol is a function */
WEFT_PLUGIN_EXPORT void weft_plugin_entry(void);
WEFT_PLUGIN_EXPORT void weft_plugin_entry(void)
{
}
int bad8_keep_init(weft_registrar *reg);
int bad8_keep_init(weft_registrar *reg)
{
    return init(reg) + score();
}
#else
WEFT_PLUGIN_DEFINE(BAD_NAME, "malformed", "1.0", score, init, NULL);
#endif
