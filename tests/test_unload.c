/* tests/test_unload.c — weft_unload_plugin: refused (WEFT_EBUSY, naming
 * what is alive and how many) while storages of the plugin, registrations
 * of other registrars on its device type or operators, or a call from
 * inside an operator stand in the way; waits for a kernel of the plugin
 * running in another thread before fini and dlclose; reloads from the same
 * path with a new init.  A plugin whose init fails after other threads have
 * allocated on its device type and called its kernel stays mapped while
 * that storage lives, and its kernel ends before the load returns. */
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

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

static int noop_kernel(weft_call *call, void *ctx)
{
    (void)call;
    (void)ctx;
    return weft_set_error(WEFT_EINTERNAL, "must not run");
}

static int noop_allocate(void *ctx, size_t n, int index, weft_data_ptr *out)
{
    (void)ctx;
    (void)n;
    (void)index;
    (void)out;
    return weft_set_error(WEFT_ENOMEM, "the override allocator is never used here");
}

/* test_twice on testdev; returns the first element of the result, or -1 */
static double twice_on(weft_device dev, double value)
{
    int64_t sz[1] = {2};
    weft_tensor *t = NULL, *back = NULL;
    const weft_op *op;
    double v = -1;
    if (weft_full(&t, sz, 1, value, WEFT_FLOAT32, dev) == 0 && weft_op_find(&op, "test_twice") == 0) {
        weft_value args[1] = {{.tag = WEFT_VALUE_TENSOR, .u.tensor = t}};
        weft_value rets[1];
        if (weft_call_boxed(op, args, 1, rets, 1) == 0) {
            if (weft_to_device(&back, rets[0].u.tensor, WEFT_DEVICE_CPU) == 0) {
                int64_t i0 = 0;
                weft_tensor_get(back, &i0, &v);
            }
            weft_tensor_release(rets[0].u.tensor);
        }
    }
    weft_tensor_release(back);
    weft_tensor_release(t);
    return v;
}

/* --- unloading from inside an operator */
static int inside_rc;
static char inside_msg[512];

static int unload_inside(weft_call *call, void *ctx)
{
    (void)call;
    (void)ctx;
    inside_rc = weft_unload_plugin("testgood");
    snprintf(inside_msg, sizeof inside_msg, "%s", weft_last_error());
    return 0;
}

/* --- a slow kernel of testslow in another thread */
typedef struct slow_job {
    weft_tensor *flags;
    int rc;
} slow_job;

static void *run_slow(void *arg)
{
    slow_job *job = arg;
    const weft_op *op;
    job->rc = weft_op_find(&op, "test_slow_");
    if (job->rc == 0) {
        weft_value args[2] = {{.tag = WEFT_VALUE_TENSOR, .u.tensor = job->flags},
                              {.tag = WEFT_VALUE_INT, .u.i = 300}};
        job->rc = weft_call_boxed(op, args, 2, NULL, 0);
    }
    return NULL;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* --- threads that use what a failing init registered (test-lateinit.so) */
/* How long they wait for it to register: a bound for a broken test only, as
 * long as the plugin's own wait (tests/plugins/lateinit.c), since under the
 * sanitizers on a loaded machine 10 s was once not enough. */
#define LATE_WAIT_MS 120000
typedef struct late_job {
    weft_tensor *held;  /* a storage on latedev, from its allocator */
    weft_tensor *flags; /* late_wait_'s start and end flags */
    int alloc_rc, call_rc;
    int miss_rc;             /* the call made before late_wait_ had its kernel */
    char miss_msg[1024];     /* and its message */
    weft_registrar *missed;  /* defines late_missed_: "a call has missed" */
    int missed_rc;
} late_job;

static void *late_allocate(void *arg)
{
    late_job *job = arg;
    int type = -1;
    double t0 = now_ms();
    while ((type = weft_device_type_from_name("latedev")) < 0 && now_ms() - t0 < LATE_WAIT_MS)
        sched_yield();
    int64_t sz[1] = {4};
    job->alloc_rc = type < 0 ? type
                             : weft_empty(&job->held, sz, 1, WEFT_FLOAT32,
                                          (weft_device){.type = (int16_t)type, .index = 0});
    return NULL;
}

static void *late_call(void *arg)
{
    late_job *job = arg;
    const weft_op *op;
    double t0 = now_ms();
    while ((job->call_rc = weft_op_find(&op, "late_wait_")) < 0 && now_ms() - t0 < LATE_WAIT_MS)
        sched_yield();
    if (job->call_rc < 0)
        return NULL;
    weft_value args[2] = {{.tag = WEFT_VALUE_TENSOR, .u.tensor = job->flags},
                          {.tag = WEFT_VALUE_INT, .u.i = 300}};
    /* init holds the kernel back until this call has missed it: the miss
     * must answer while init runs, not wait for the loader */
    job->miss_rc = weft_call_boxed(op, args, 2, NULL, 0);
    snprintf(job->miss_msg, sizeof job->miss_msg, "%s", weft_last_error());
    job->missed_rc = weft_registrar_create(&job->missed, "late_test");
    if (job->missed_rc == 0)
        job->missed_rc = weft_register_op(job->missed, "late_missed_(Tensor(a!) self) -> ()", NULL);
    while ((job->call_rc = weft_call_boxed(op, args, 2, NULL, 0)) == WEFT_ENOKERNEL &&
           now_ms() - t0 < LATE_WAIT_MS)
        sched_yield(); /* until init has registered the kernel */
    return NULL;
}

int main(void)
{
    const char *dir = getenv("WEFT_TEST_PLUGIN_DIR");
    if (!dir)
        skip_all("WEFT_TEST_PLUGIN_DIR is set by make check");
    snprintf(plugin_dir, sizeof plugin_dir, "%s", dir);
    ok(weft_load_default_plugins() >= 1, "default plugins loaded");

    is_int(weft_unload_plugin(NULL), WEFT_EINVAL, "NULL name");
    is_int(weft_unload_plugin("nosuch"), WEFT_ENOTFOUND, "a plugin that is not loaded");
    like(weft_last_error(), "no plugin named 'nosuch' is loaded", "says so");

    /* storages */
    is_int(weft_load_plugin(tp("test-good.so")), 0, "load testgood");
    const weft_op *first_twice = NULL;
    weft_op_find(&first_twice, "test_twice");
    weft_device dev;
    is_int(weft_device_from_string(&dev, "testdev:0"), 0, "testdev:0");
    int64_t sz[1] = {4};
    weft_tensor *a = NULL, *b = NULL, *view = NULL;
    is_int(weft_zeros(&a, sz, 1, WEFT_FLOAT32, dev), 0, "a tensor on testdev");
    is_int(weft_zeros(&b, sz, 1, WEFT_FLOAT32, dev), 0, "another");
    is_int(weft_unload_plugin("testgood"), WEFT_EBUSY, "refused with two storages alive");
    like(weft_last_error(), "plugin 'testgood' cannot be unloaded: still alive: 2 storages it allocated",
         "names the plugin, what and how many");
    int64_t one = 1, zero = 0;
    is_int(weft_slice(&view, a, 0, zero, one, one), 0, "a view of the first");
    weft_tensor_release(a);
    weft_tensor_release(b);
    is_int(weft_unload_plugin("testgood"), WEFT_EBUSY, "a view keeps its storage alive");
    like(weft_last_error(), "still alive: 1 storage it allocated", "one storage now");
    weft_tensor_release(view);
    is_double(twice_on(dev, 1.5), 4.5, 0, "after a refused unload the plugin still works");

    /* registrations of others that depend on the plugin */
    int type = dev.type;
    weft_registrar *other = NULL;
    is_int(weft_registrar_create(&other, "other"), 0, "a second registrar");
    weft_registration *h = NULL;
    is_int(weft_register_kernel(other, "neg", WEFT_KEY_DENSE, type, noop_kernel, NULL, &h), 0,
           "it registers neg for testdev");
    is_int(weft_unload_plugin("testgood"), WEFT_EBUSY, "refused: a kernel for its device type");
    like(weft_last_error(), "1 registration by another registrar ('other'", "names the registrar");
    weft_registration_release(h);
    is_int(weft_register_kernel(other, "test_twice", WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU,
                                noop_kernel, NULL, &h),
           0, "it registers a CPU kernel for testgood's operator");
    weft_registration *h2 = NULL;
    is_int(weft_register_fallback(other, WEFT_KEY_DENSE, type, noop_kernel, NULL, &h2), 0,
           "and a fallback for testdev");
    is_int(weft_unload_plugin("testgood"), WEFT_EBUSY, "refused: its operator and its device type");
    like(weft_last_error(), "2 registrations by other registrars", "counts both");
    weft_registration_release(h);
    weft_registration_release(h2);
    weft_allocator alloc = {sizeof alloc, WEFT_ALLOCATOR_VERSION, NULL, noop_allocate, NULL, NULL};
    is_int(weft_register_allocator(other, type, &alloc, &h), 0, "an allocator for testdev");
    is_int(weft_unload_plugin("testgood"), WEFT_EBUSY, "refused: an allocator for its device type");
    weft_registration_release(h);
    weft_registration *hall = NULL;
    is_int(weft_register_kernel(other, "exp", WEFT_KEY_AUTOGRAD, WEFT_ALL_BACKENDS, noop_kernel,
                                NULL, &hall),
           0, "an every-backend kernel (not tied to testdev)");

    /* from inside an operator */
    const weft_op *inside_op;
    is_int(weft_register_op(other, "test_unload_inside(Tensor(a!) self) -> ()", &inside_op), 0,
           "an operator that unloads");
    is_int(weft_register_kernel(other, "test_unload_inside", WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU,
                                unload_inside, NULL, NULL),
           0, "its CPU kernel");
    weft_tensor *cpu = NULL;
    weft_zeros(&cpu, sz, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    weft_value arg = {.tag = WEFT_VALUE_TENSOR, .u.tensor = cpu};
    is_int(weft_call_boxed(inside_op, &arg, 1, NULL, 0), 0, "call it");
    is_int(inside_rc, WEFT_EBUSY, "unloading from inside an operator is refused");
    like(inside_msg, "cannot be unloaded from inside an operator", "and says why");

    /* nothing in the way any more */
    is_int(weft_unload_plugin("testgood"), 0, "unload once nothing depends on it");
    is_int(weft_device_type_from_name("testdev"), WEFT_ENOTFOUND, "its device type is gone");
    weft_tensor *x = NULL;
    ok(weft_zeros(&x, sz, 1, WEFT_FLOAT32, dev) < 0 && !x, "no tensor on the old id");
    is_int(weft_load_plugin(tp("test-good.so")), 0, "reload from the same path");
    is_int(weft_device_from_string(&dev, "testdev:1"), 0, "testdev is back");
    is_double(twice_on(dev, 2.0), 6.0, 0, "a new init registered its kernels again");
    /* one handle per operator, not one per load: a process loading and
     * unloading a plugin in a loop grew without end (tests/fuzz's
     * descriptor fuzzer slowed down as it ran) */
    const weft_op *again = NULL;
    weft_op_find(&again, "test_twice");
    ok(first_twice && again == first_twice, "the reloaded plugin's operator is the old handle");
    weft_registration_release(hall);
    weft_registrar_destroy(other);
    is_int(weft_unload_plugin("testgood"), 0, "unload again (the other registrar is gone)");

    /* a kernel of the plugin running in another thread */
    is_int(weft_load_plugin(tp("test-slow.so")), 0, "load testslow");
    int64_t two = 2;
    slow_job job = {NULL, -1};
    weft_zeros(&job.flags, &two, 1, WEFT_INT32, WEFT_DEVICE_CPU);
    _Atomic int32_t *flags = weft_tensor_data_ptr(job.flags);
    pthread_t th;
    ok(pthread_create(&th, NULL, run_slow, &job) == 0, "start a thread running test_slow_ (300 ms)");
    while (!atomic_load(&flags[0]))
        ; /* until the kernel runs */
    double t0 = now_ms();
    is_int(weft_unload_plugin("testslow"), 0, "unload while the kernel runs");
    double waited = now_ms() - t0;
    is_int(atomic_load(&flags[1]), 1, "the kernel had finished when unload returned");
    ok(waited > 100, "unload waited for it (%.0f ms)", waited);
    pthread_join(th, NULL);
    is_int(job.rc, 0, "the kernel's call succeeded");
    const weft_op *gone;
    is_int(weft_op_find(&gone, "test_slow_"), WEFT_ENOTFOUND, "its operator is gone");
    is_int(weft_load_plugin(tp("test-slow.so")), 0, "reload testslow");
    is_int(weft_unload_plugin("testslow"), 0, "an idle unload does not wait");

    /* an init that fails while other threads use what it registered: a
     * storage on its device type and a call of its kernel */
    late_job late = {NULL, NULL, -1, -1, -1, "", NULL, -1};
    weft_zeros(&late.flags, &two, 1, WEFT_INT32, WEFT_DEVICE_CPU);
    _Atomic int32_t *late_flags = weft_tensor_data_ptr(late.flags);
    pthread_t ta, tc;
    pthread_create(&ta, NULL, late_allocate, &late);
    pthread_create(&tc, NULL, late_call, &late);
    is_int(weft_load_plugin(tp("test-lateinit.so")), WEFT_EPLUGIN, "an init that fails after others used it");
    like(weft_last_error(),
         "after 1 allocation(s) on latedev, a call that missed late_wait_'s kernel and "
         "late_wait_ running",
         "it failed after a call had missed the kernel, while a storage on latedev was alive "
         "and its kernel ran");
    is_int(atomic_load(&late_flags[1]), 1, "the kernel had finished when the load returned");
    like(weft_last_error(), "its library stays loaded: 1 storage", "says why the library stays");
    pthread_join(ta, NULL);
    pthread_join(tc, NULL);
    is_int(late.miss_rc, WEFT_ENOKERNEL, "a call before init registered the kernel missed it");
    like(late.miss_msg, "late_wait_: no kernel for dispatch keys",
         "with the usual message, given while init ran");
    like(late.miss_msg, "loaded plugins: (the loader is busy loading or unloading one)",
         "which does not wait for the loader to list the plugins");
    is_int(late.missed_rc, 0, "then the thread defined late_missed_, which init waited for");
    weft_registrar_destroy(late.missed);
    is_int(late.alloc_rc, 0, "the allocation on latedev succeeded during init");
    is_int(late.call_rc, 0, "and so did the kernel's call");
    is_int(weft_device_type_from_name("latedev"), WEFT_ENOTFOUND, "latedev is gone");
    weft_tensor *late_more = NULL;
    ok(late.held && weft_empty(&late_more, sz, 1, WEFT_FLOAT32, weft_tensor_device(late.held)) < 0,
       "nothing more is allocated on it");
    weft_tensor_release(late.held); /* its deleter is the failed plugin's */
    ok(1, "the storage made during the failed init was freed by its deleter");
    weft_tensor_release(late.flags);

    weft_tensor_release(job.flags);
    weft_tensor_release(cpu);
    return done_testing();
}
