/* tests/plugins/lateinit.c — "lateinit": a plugin whose init fails after
 * other threads have used what it registered.  It registers a device type
 * "latedev" (host memory, tests/host_device.h) and an operator
 * late_wait_(self, ms) whose CPU kernel sleeps, stores 1 into self[0] when it
 * starts and into self[1] when it ends.  Before registering that kernel, init
 * waits until a thread has called late_wait_ and missed it: the test thread
 * says so by defining an operator "late_missed_".  A call that misses a
 * kernel while an init runs once waited for the loader (its error message
 * lists the loaded plugins) until the init ended, which here never came.
 * Then init waits until some thread has allocated on latedev and another is
 * inside late_wait_, and fails.
 * The waits' bound (120 s) is only there so that a broken test ends: under
 * the sanitizers on a loaded 2-core machine the threads took more than the
 * 10 s it once was to get there, and the test failed for the timing.  The
 * loader must close the library neither under the sleeping kernel nor while
 * that storage, whose deleter is this library's, lives. */
#include <stdatomic.h>
#include <time.h>

#include "tests/host_device.h"

static atomic_int allocations, kernel_started;

static int counting_allocate(void *ctx, size_t nbytes, int index, weft_data_ptr *out)
{
    int rc = fake_allocate(ctx, nbytes, index, out);
    if (rc == 0)
        atomic_fetch_add(&allocations, 1);
    return rc;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static int late_wait(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor *t = call->args[0].u.tensor;
    if (weft_tensor_dtype(t) != WEFT_INT32 || weft_tensor_numel(t) < 2 ||
        !weft_tensor_is_contiguous(t) || weft_tensor_device(t).type != WEFT_DEVICE_TYPE_CPU)
        return weft_set_error(WEFT_EINVAL, "late_wait_: a contiguous int32 CPU tensor of >= 2");
    _Atomic int32_t *flags = weft_tensor_data_ptr(t);
    atomic_store(&flags[0], 1);
    atomic_store(&kernel_started, 1);
    sleep_ms((long)call->args[1].u.i);
    atomic_store(&flags[1], 1);
    return 0;
}

static int init(weft_registrar *reg)
{
    static const weft_device_interface iface = {
        sizeof(weft_device_interface), WEFT_DEVICE_INTERFACE_VERSION, NULL, fake_count, fake_copy,
        fake_copy, fake_copy_device, fake_sync, 0,
    };
    static const weft_allocator alloc = {
        sizeof(weft_allocator), WEFT_ALLOCATOR_VERSION, NULL, counting_allocate, NULL, NULL,
    };
    int type;
    int rc = weft_register_device_type(reg, "latedev", &iface, &alloc, &type);
    if (rc == 0)
        rc = weft_register_op(reg, "late_wait_(Tensor(a!) self, int ms) -> ()", NULL);
    if (rc < 0)
        return rc;
    const weft_op *missed = NULL;
    for (int i = 0; i < 120000 && weft_op_find(&missed, "late_missed_") < 0; i++)
        sleep_ms(1);
    rc = weft_register_kernel(reg, "late_wait_", WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, late_wait,
                              NULL, NULL);
    if (rc < 0)
        return rc;
    for (int i = 0; i < 120000 && !(atomic_load(&allocations) && atomic_load(&kernel_started)); i++)
        sleep_ms(1);
    return weft_set_error(WEFT_EINVAL,
                          "lateinit: simulated failure after %d allocation(s) on latedev, %s and %s",
                          atomic_load(&allocations),
                          missed ? "a call that missed late_wait_'s kernel" : "no missed call",
                          atomic_load(&kernel_started) ? "late_wait_ running" : "no kernel call");
}

WEFT_PLUGIN_DEFINE("lateinit", NULL, "1.0", NULL, init, NULL);
