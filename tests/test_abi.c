/* tests/test_abi.c — ABI discipline at the plugin boundary: a plugin built
 * with older, shorter structs (descriptor, device interface, allocator)
 * loads and works, the core zero-extending what it lacks; a newer minor, a
 * newer major and a descriptor too small to hold init are refused with
 * messages naming both versions, before any of the plugin's code runs. */
#include <limits.h>
#include <stdlib.h>

#include <weft/dlpack.h>
#include <weft/plugin.h>
#include <weft/weft.h>

#include "tests/tap.h"

static char plugin_dir[PATH_MAX];

static const char *tp(const char *name)
{
    static char buf[PATH_MAX + 64];
    snprintf(buf, sizeof buf, "%s/%s", plugin_dir, name);
    return buf;
}

static int report_row(const char *name, weft_plugin_report *out)
{
    int n = weft_plugin_report_count();
    for (int i = n - 1; i >= 0; i--)
        if (weft_plugin_report_get(i, out) == 0 && out->name && strcmp(out->name, name) == 0)
            return 0;
    return -1;
}

int main(void)
{
    const char *dir = getenv("WEFT_TEST_PLUGIN_DIR");
    if (!dir)
        skip_all("WEFT_TEST_PLUGIN_DIR is set by make check");
    snprintf(plugin_dir, sizeof plugin_dir, "%s", dir);
    ok(weft_load_default_plugins() >= 1, "default plugins loaded");
    char want[128];

    /* an older, shorter layout of every struct */
    is_int(weft_load_plugin(tp("test-oldabi.so")), 0, "a plugin with old, short structs loads");
    weft_plugin_report row;
    if (report_row("testold", &row) == 0) {
        is_int(row.status, WEFT_PLUGIN_LOADED, "the report says loaded");
        ok(row.abi_major == WEFT_PLUGIN_ABI_MAJOR && row.abi_minor == 0, "with ABI %u.0",
           WEFT_PLUGIN_ABI_MAJOR);
    } else {
        ok(0, "testold is in the report");
        ok(0, "with its ABI");
    }
    weft_device dev;
    is_int(weft_device_from_string(&dev, "olddev:0"), 0, "its device type exists");
    is_int(weft_device_count(dev.type), 1, "one device (its device_count)");
    is_int(weft_device_type_kind(dev.type), WEFT_DEVICE_KIND_UNKNOWN,
           "its interface predates the kind field: the kind is unknown, not read past its end");
    weft_tensor *cpu = NULL, *on = NULL, *neg = NULL, *back = NULL;
    weft_arange(&cpu, 1, 4, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    is_int(weft_to_device(&on, cpu, dev), 0, "copy to olddev (its allocator and copy_from_host)");
    is_int(weft_neg(&neg, on), 0, "neg on olddev (its kernel)");
    is_int(weft_to_device(&back, neg, WEFT_DEVICE_CPU), 0, "copy back (its copy_to_host)");
    double v[3] = {0, 0, 0};
    for (int64_t i = 0; back && i < 3; i++)
        weft_tensor_get(back, &i, &v[i]);
    ok(v[0] == -1 && v[1] == -2 && v[2] == -3, "values -1 -2 -3 (got %g %g %g)", v[0], v[1], v[2]);
    int32_t code = -1, id = -1;
    is_int(weft_tensor_dlpack_device(on, &code, &id), WEFT_EDEVICE,
           "no DLPack code: the field past its struct reads as 0, not the 12 behind it");
    like(weft_last_error(), "dlpack_device_code is 0", "the message shows the zero");
    weft_stream *stream = NULL;
    is_int(weft_stream_create(&stream, dev), WEFT_ENOTSUP,
           "no streams: the slots past its struct read as NULL, not the traps behind it");
    weft_tensor *copy2 = NULL;
    is_int(weft_to_device(&copy2, on, (weft_device){dev.type, 0}), 0, "a device-to-device copy");
    weft_tensor_release(copy2);
    weft_tensor_release(cpu);
    weft_tensor_release(on);
    weft_tensor_release(neg);
    weft_tensor_release(back);
    is_int(weft_unload_plugin("testold"), 0, "unload: its descriptor has no fini, none is called");
    is_int(weft_load_plugin(tp("test-oldabi.so")), 0, "and it loads again");
    is_int(weft_unload_plugin("testold"), 0, "and unloads again");

    /* a newer minor: it may fill slots this core does not have */
    is_int(weft_load_plugin(tp("test-abinewer.so")), WEFT_EABI, "a newer minor is refused");
    snprintf(want, sizeof want, "built for plugin ABI %u.%u", WEFT_PLUGIN_ABI_MAJOR,
             WEFT_PLUGIN_ABI_MINOR + 1);
    like(weft_last_error(), want, "names the plugin's ABI");
    snprintf(want, sizeof want, "implements ABI %u.%u (the plugin needs a newer weft)",
             WEFT_PLUGIN_ABI_MAJOR, WEFT_PLUGIN_ABI_MINOR);
    like(weft_last_error(), want, "and the core's, and what to do");
    /* a newer major */
    is_int(weft_load_plugin(tp("test-abi.so")), WEFT_EABI, "a newer major is refused");
    snprintf(want, sizeof want, "built for plugin ABI %u.0", WEFT_PLUGIN_ABI_MAJOR + 98);
    like(weft_last_error(), want, "names the plugin's ABI");
    snprintf(want, sizeof want, "implements ABI %u.%u", WEFT_PLUGIN_ABI_MAJOR, WEFT_PLUGIN_ABI_MINOR);
    like(weft_last_error(), want, "and the core's");
    /* too small to hold init */
    is_int(weft_load_plugin(tp("test-abismall.so")), WEFT_EABI, "a descriptor without init is refused");
    like(weft_last_error(), "entry descriptor too small (16 bytes)", "says how small");
    uint32_t major = 0, minor = 99;
    weft_plugin_abi(&major, &minor);
    ok(major == WEFT_PLUGIN_ABI_MAJOR && minor == WEFT_PLUGIN_ABI_MINOR,
       "weft_plugin_abi reports the header's %u.%u", major, minor);
    return done_testing();
}
