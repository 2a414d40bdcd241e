/* tests/plugins/slow.c — "testslow": an operator whose CPU kernel takes a
 * while, to show that weft_unload_plugin waits for a kernel running in
 * another thread.  test_slow_(self, ms) stores 1 into self[0] when it
 * starts and 1 into self[1] when it ends (int32, contiguous).  fini aborts
 * if one of its kernels is still running: unloading must never get there. */
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include <weft/plugin.h>

static atomic_int running;

static int slow(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor *t = call->args[0].u.tensor;
    if (weft_tensor_dtype(t) != WEFT_INT32 || weft_tensor_numel(t) < 2 ||
        !weft_tensor_is_contiguous(t) || weft_tensor_device(t).type != WEFT_DEVICE_TYPE_CPU)
        return weft_set_error(WEFT_EINVAL, "test_slow_: a contiguous int32 CPU tensor of >= 2");
    atomic_fetch_add(&running, 1);
    _Atomic int32_t *flags = weft_tensor_data_ptr(t);
    atomic_store(&flags[0], 1);
    int64_t ms = call->args[1].u.i;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
    atomic_store(&flags[1], 1);
    atomic_fetch_sub(&running, 1);
    return 0;
}

static int init(weft_registrar *reg)
{
    int rc = weft_register_op(reg, "test_slow_(Tensor(a!) self, int ms) -> ()", NULL);
    if (rc == 0)
        rc = weft_register_kernel(reg, "test_slow_", WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, slow,
                                  NULL, NULL);
    return rc;
}

static void fini(void)
{
    if (atomic_load(&running))
        abort(); /* unloaded under a running kernel */
}

WEFT_PLUGIN_DEFINE("testslow", NULL, "1.0", NULL, init, fini);
