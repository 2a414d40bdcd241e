/* tests/test_many_devices.c — 18 third-party device types in one process
 * (two plugins built from tests/plugins/manydev.c, nine types each), each
 * with its own kernels, allocator, device count, DLPack device code and,
 * for half of them, streams: device strings round-trip, tensors live on
 * each, an operator on each runs that type's kernel, DLPack maps each code
 * back to its type; a live stream keeps its plugin loaded; the id space
 * runs out with a clear error. */
#include <limits.h>
#include <stdlib.h>

#include <weft/dlpack.h>
#include <weft/plugin.h>
#include <weft/weft.h>

#include "tests/tap.h"

#define PER_PLUGIN 9

static char plugin_dir[PATH_MAX];

static const char *tp(const char *name)
{
    static char buf[PATH_MAX + 64];
    snprintf(buf, sizeof buf, "%s/%s", plugin_dir, name);
    return buf;
}

static double at(const weft_tensor *t, int64_t i)
{
    double v = -999;
    if (t)
        weft_tensor_get(t, &i, &v);
    return v;
}

/* add and the tag operator on one device; 1 if all is as it should be */
static int check_type(const char *prefix, int k, weft_device dev)
{
    int good = 1;
    weft_tensor *a = NULL, *b = NULL, *da = NULL, *db = NULL, *sum = NULL, *back = NULL,
                *tag = NULL, *again = NULL;
    weft_arange(&a, 1, 5, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    weft_arange(&b, 10 * k, 10 * k + 4, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    good &= weft_to_device(&da, a, dev) == 0 && weft_to_device(&db, b, dev) == 0;
    good &= weft_add(&sum, da, db) == 0;
    if (!good)
        diag("many_%s%d: %s", prefix, k, weft_last_error());
    good &= sum && weft_device_equal(weft_tensor_device(sum), dev);
    good &= weft_to_device(&back, sum, WEFT_DEVICE_CPU) == 0;
    for (int64_t i = 0; i < 4; i++)
        good &= at(back, i) == (double)(1 + i + 10 * k + i);
    char opname[32];
    snprintf(opname, sizeof opname, "many_%s_tag", prefix);
    const weft_op *op;
    good &= weft_op_find(&op, opname) == 0;
    if (good) {
        weft_value arg = {.tag = WEFT_VALUE_TENSOR, .u.tensor = da}, ret;
        good &= weft_call_boxed(op, &arg, 1, &ret, 1) == 0;
        tag = good ? ret.u.tensor : NULL;
        good &= at(tag, 0) == k;
    }
    /* DLPack: the type's own code, and back to the same type */
    int32_t code = 0, id = -1;
    good &= weft_tensor_dlpack_device(da, &code, &id) == 0;
    good &= code == (strcmp(prefix, "a") == 0 ? 100 : 200) + k && id == dev.index;
    DLManagedTensor *m = NULL;
    good &= weft_to_dlpack(&m, da) == 0;
    good &= m && weft_from_dlpack(&again, m) == 0;
    good &= again && weft_device_equal(weft_tensor_device(again), dev) &&
            weft_tensor_data_ptr(again) == weft_tensor_data_ptr(da);
    weft_tensor *list[] = {a, b, da, db, sum, back, tag, again};
    for (size_t i = 0; i < sizeof list / sizeof *list; i++)
        weft_tensor_release(list[i]);
    return good;
}

static int fill_count(void *ctx)
{
    (void)ctx;
    return 1;
}

static int fill_copy(void *ctx, void *dst, const void *src, size_t n, int index)
{
    (void)ctx;
    (void)index;
    memcpy(dst, src, n);
    return 0;
}

static int fill_sync(void *ctx, int index)
{
    (void)ctx;
    (void)index;
    return 0;
}

static int fill_alloc(void *ctx, size_t n, int index, weft_data_ptr *out)
{
    (void)ctx;
    (void)n;
    (void)index;
    (void)out;
    return weft_set_error(WEFT_ENOMEM, "filler types hold no memory");
}

int main(void)
{
    const char *dir = getenv("WEFT_TEST_PLUGIN_DIR");
    if (!dir)
        skip_all("WEFT_TEST_PLUGIN_DIR is set by make check");
    snprintf(plugin_dir, sizeof plugin_dir, "%s", dir);
    ok(weft_load_default_plugins() >= 1, "default plugins loaded");
    is_int(weft_load_plugin(tp("test-manya.so")), 0, "load manya (9 device types)");
    is_int(weft_load_plugin(tp("test-manyb.so")), 0, "load manyb (9 more)");

    const char *prefixes[2] = {"a", "b"};
    bool seen[WEFT_MAX_DEVICE_TYPES] = {false};
    int distinct = 0;
    for (int p = 0; p < 2; p++)
        for (int k = 0; k < PER_PLUGIN; k++) {
            char name[32], text[48], again[48];
            snprintf(name, sizeof name, "many_%s%d", prefixes[p], k);
            int type = weft_device_type_from_name(name);
            ok(type >= WEFT_DEVICE_TYPE_FIRST_DYNAMIC, "%s has a dynamic id (%d)", name, type);
            if (type < 0)
                continue;
            if (!seen[type]) {
                seen[type] = true;
                distinct++;
            }
            int ndev = k % 3 + 1;
            is_int(weft_device_count(type), ndev, "%s: its own device count", name);
            snprintf(text, sizeof text, "%s:%d", name, ndev - 1);
            weft_device dev = {-1, -1};
            is_int(weft_device_from_string(&dev, text), 0, "parse %s", text);
            ok(dev.type == type && dev.index == ndev - 1, "%s is (%d, %d)", text, dev.type, dev.index);
            weft_device_to_string(dev, again, sizeof again);
            is_str(again, text, "and prints back as %s", text);
            ok(check_type(prefixes[p], k, dev), "%s: add runs its kernel on its memory, the tag "
               "operator answers %d, DLPack code %d round-trips", text, k,
               (p ? 200 : 100) + k);
            weft_tensor *x = NULL;
            snprintf(text, sizeof text, "%s:%d", name, ndev);
            weft_device_from_string(&dev, text);
            is_int(weft_zeros(&x, (int64_t[]){2}, 1, WEFT_FLOAT32, dev), WEFT_EDEVICE,
                   "%s does not exist", text);
            weft_stream *s = NULL;
            dev.index = 0;
            if (k % 2) {
                is_int(weft_stream_create(&s, dev), 0, "%s:0 provides streams", name);
                is_int(weft_stream_query(s), 1, "and its stream answers a query");
                weft_stream_destroy(s);
            } else {
                is_int(weft_stream_create(&s, dev), WEFT_ENOTSUP, "%s:0 provides no streams", name);
                like(weft_last_error(), name, "the message names the type");
            }
        }
    ok(distinct >= 16, "%d distinct third-party device types in one process", distinct);

    weft_device dev;
    is_int(weft_device_from_string(&dev, "many_a3:1"), 0, "many_a3:1");
    is_int(weft_device_from_string(&dev, "many_a3:x"), WEFT_EINVAL, "a malformed index");
    is_int(weft_device_from_string(&dev, "many_c0:0"), WEFT_EDEVICE, "an unknown type");

    /* a live stream keeps its plugin */
    weft_device_from_string(&dev, "many_b1:0");
    weft_stream *s = NULL;
    is_int(weft_stream_create(&s, dev), 0, "a stream on many_b1");
    is_int(weft_unload_plugin("manyb"), WEFT_EBUSY, "manyb cannot be unloaded while it lives");
    like(weft_last_error(), "still alive: 1 stream or event on its devices", "says what and how many");
    is_int(weft_set_current_stream(dev, s), 0, "make it current");
    weft_stream_destroy(s);
    is_int(weft_unload_plugin("manyb"), WEFT_EBUSY, "as the current stream it still lives");
    is_int(weft_set_current_stream(dev, NULL), 0, "back to the default stream");

    /* the id space: 37 dynamic ids, 18 taken */
    weft_registrar *filler = NULL;
    weft_registrar_create(&filler, "filler");
    static weft_device_interface fi;
    static weft_allocator fa;
    fi = (weft_device_interface){sizeof fi, WEFT_DEVICE_INTERFACE_VERSION, NULL, fill_count,
                                 fill_copy, fill_copy, NULL, fill_sync, 0};
    fa = (weft_allocator){sizeof fa, WEFT_ALLOCATOR_VERSION, NULL, fill_alloc, NULL, NULL};
    int added = 0, rc = 0, type;
    while (rc == 0 && added < WEFT_MAX_DEVICE_TYPES) {
        char name[32];
        snprintf(name, sizeof name, "filler%d", added);
        rc = weft_register_device_type(filler, name, &fi, &fa, &type);
        added += rc == 0;
    }
    is_int(rc, WEFT_ENOMEM, "registering beyond the last id fails");
    like(weft_last_error(), "all 37 device type ids are in use", "and says so");
    is_int(added, 37 - 2 * PER_PLUGIN, "after the %d ids that were left", 37 - 2 * PER_PLUGIN);
    weft_registrar_destroy(filler);

    is_int(weft_unload_plugin("manya"), 0, "unload manya");
    is_int(weft_unload_plugin("manyb"), 0, "unload manyb");
    is_int(weft_device_type_from_name("many_b8"), WEFT_ENOTFOUND, "their types are gone");
    is_int(weft_load_plugin(tp("test-manya.so")), 0, "reload manya");
    is_int(weft_device_from_string(&dev, "many_a8:2"), 0, "many_a8:2 is back");
    ok(check_type("a", 8, dev), "and works");
    is_int(weft_unload_plugin("manya"), 0, "unload it again");
    return done_testing();
}

