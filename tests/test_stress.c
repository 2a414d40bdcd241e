/* tests/test_stress.c — plugins load and unload while other threads run
 * operators.  Workers loop over CPU operators (the CPU plugin's add and neg,
 * testgood's test_twice on the CPU) and testgood's device (full, test_twice,
 * copy back); one thread loads and unloads testgood over and over (its
 * kernels, its operator, its device type).  Every result that comes back
 * must be exact; a call may fail only because testgood is not there (or is
 * being unloaded) at that moment.  A second phase, the allocation storm,
 * has the workers only allocate on testdev and free at once while testgood
 * is loaded and unloaded, until some allocation has met an unload deciding:
 * that error ("its plugin 'testgood' is being unloaded") formats the name
 * kept in the registrar that the unload frees next, after waiting for the
 * threads inside sections.  tests/tsan.sh runs this under ThreadSanitizer.
 * WEFT_STRESS_MS sets the duration (default 1500; the storm takes a third). */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#include "tests/tap.h"

#define WORKERS 3

static char good_path[PATH_MAX + 64];
static atomic_bool stop;
static atomic_int wrong;          /* a result that is not exact, or an unexpected error */
static char wrong_what[512];
static pthread_mutex_t wrong_mutex = PTHREAD_MUTEX_INITIALIZER;

typedef struct counts {
    long cpu_ok, twice_cpu_ok, dev_ok, dev_absent;
} counts;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void report_wrong(const char *what, int rc)
{
    pthread_mutex_lock(&wrong_mutex);
    if (!atomic_load(&wrong))
        snprintf(wrong_what, sizeof wrong_what, "%s (rc %s: %s)", what,
                 rc ? weft_error_name(rc) : "0", rc ? weft_last_error() : "");
    atomic_fetch_add(&wrong, 1);
    pthread_mutex_unlock(&wrong_mutex);
}

/* What a call may fail with because testgood is absent or being unloaded. */
static int absent(int rc)
{
    return rc == WEFT_EDEVICE || rc == WEFT_EBUSY || rc == WEFT_ENOTFOUND || rc == WEFT_ENOKERNEL;
}

static double first(const weft_tensor *t)
{
    double v = -1;
    int64_t i0 = 0;
    weft_tensor_get(t, &i0, &v);
    return v;
}

static void cpu_round(counts *c, int i)
{
    int64_t sz[1] = {5};
    weft_tensor *a = NULL, *b = NULL, *s = NULL, *n = NULL;
    int rc = weft_full(&a, sz, 1, (double)i, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    if (rc == 0)
        rc = weft_full(&b, sz, 1, 0.5, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    if (rc == 0)
        rc = weft_add(&s, a, b);
    if (rc == 0)
        rc = weft_neg(&n, s);
    if (rc != 0 || first(n) != -((double)i + 0.5))
        report_wrong("CPU add/neg", rc);
    else
        c->cpu_ok++;
    /* testgood's kernel for CPU tensors: factor 2, when it is there */
    const weft_op *op;
    if (weft_op_find(&op, "test_twice") == 0) {
        weft_value arg = {.tag = WEFT_VALUE_TENSOR, .u.tensor = a}, ret;
        rc = weft_call_boxed(op, &arg, 1, &ret, 1);
        if (rc == 0) {
            if (first(ret.u.tensor) != 2.0 * i)
                report_wrong("test_twice on the CPU", 0);
            else
                c->twice_cpu_ok++;
            weft_tensor_release(ret.u.tensor);
        } else if (!absent(rc)) {
            report_wrong("test_twice on the CPU", rc);
        }
    }
    weft_tensor_release(a);
    weft_tensor_release(b);
    weft_tensor_release(s);
    weft_tensor_release(n);
}

static void device_round(counts *c, int i)
{
    weft_device dev;
    int rc = weft_device_from_string(&dev, i % 2 ? "testdev:1" : "testdev:0");
    if (rc < 0) {
        if (absent(rc))
            c->dev_absent++;
        else
            report_wrong("device_from_string", rc);
        return;
    }
    int64_t sz[1] = {4};
    weft_tensor *t = NULL, *back = NULL, *out = NULL;
    const weft_op *op = NULL;
    rc = weft_full(&t, sz, 1, (double)(i % 7), WEFT_FLOAT32, dev); /* testgood's fill_ */
    if (rc == 0)
        rc = weft_op_find(&op, "test_twice");
    if (rc == 0) {
        weft_value arg = {.tag = WEFT_VALUE_TENSOR, .u.tensor = t}, ret;
        rc = weft_call_boxed(op, &arg, 1, &ret, 1); /* factor 3 on testdev */
        out = rc == 0 ? ret.u.tensor : NULL;
    }
    if (rc == 0)
        rc = weft_to_device(&back, out, WEFT_DEVICE_CPU);
    if (rc == 0) {
        if (first(back) != 3.0 * (i % 7))
            report_wrong("test_twice on testdev", 0);
        else
            c->dev_ok++;
    } else if (absent(rc)) {
        c->dev_absent++;
    } else {
        report_wrong("a round on testdev", rc);
    }
    weft_tensor_release(t);
    weft_tensor_release(out);
    weft_tensor_release(back);
}

/* The storm's worker: one allocation on testdev at a time, freed at once. */
static atomic_long storm_refusals;

static void *storm(void *arg)
{
    counts *c = arg;
    int64_t sz[1] = {16};
    while (!atomic_load(&stop)) {
        weft_device dev;
        weft_tensor *t = NULL;
        int rc = weft_device_from_string(&dev, "testdev:0");
        if (rc == 0)
            rc = weft_empty(&t, sz, 1, WEFT_FLOAT32, dev);
        if (rc == 0)
            c->dev_ok++;
        else if (rc == WEFT_EBUSY &&
                 strstr(weft_last_error(), "its plugin 'testgood' is being unloaded"))
            atomic_fetch_add(&storm_refusals, 1);
        else if (absent(rc) && rc != WEFT_EBUSY)
            c->dev_absent++;
        else
            report_wrong("an allocation on testdev in the storm", rc);
        weft_tensor_release(t);
    }
    return NULL;
}

/* set by the cycler while an unload keeps being refused */
static atomic_bool draining;

static void *worker(void *arg)
{
    counts *c = arg;
    for (int i = 0; !atomic_load(&stop); i++) {
        cpu_round(c, i);
        if (!atomic_load(&draining))
            device_round(c, i);
    }
    return NULL;
}

typedef struct cycler {
    atomic_long loads, unloads, busy; /* read by main while the cycler runs */
    int failed_rc;
} cycler;

static void *load_unload(void *arg)
{
    cycler *c = arg;
    while (!atomic_load(&stop)) {
        int rc = weft_load_plugin(good_path);
        if (rc < 0) {
            c->failed_rc = rc;
            report_wrong("weft_load_plugin", rc);
            return NULL;
        }
        c->loads++;
        struct timespec ts = {0, 2000000}; /* let the workers use it */
        nanosleep(&ts, NULL);
        /* refused while a worker holds a tensor on testdev; when the
         * refusals go on (threads serialized under valgrind), the workers
         * pause their device rounds so the storages die and it can go */
        int tries = 0;
        while ((rc = weft_unload_plugin("testgood")) == WEFT_EBUSY) {
            c->busy++;
            if (++tries == 100)
                atomic_store(&draining, true);
            sched_yield();
        }
        atomic_store(&draining, false);
        if (rc < 0) {
            c->failed_rc = rc;
            report_wrong("weft_unload_plugin", rc);
            return NULL;
        }
        c->unloads++;
    }
    return NULL;
}

static bool phase_cycled(const cycler *cy)
{
    return atomic_load(&cy->unloads) >= 2;
}

static bool phase_refused(const cycler *cy)
{
    (void)cy;
    return atomic_load(&storm_refusals) > 0;
}

/* Lets a phase's threads run for at least min_ms and until done(cy), never
 * more than a minute or past a wrong result; then stops and joins them. */
static void wait_phase(pthread_t *workers, pthread_t loader, double min_ms,
                       bool (*done)(const cycler *), const cycler *cy)
{
    double t0 = now_ms();
    while ((now_ms() - t0 < min_ms || !done(cy)) && now_ms() - t0 < 60000 &&
           !atomic_load(&wrong)) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    atomic_store(&stop, true);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(workers[i], NULL);
    pthread_join(loader, NULL);
}

int main(void)
{
    const char *dir = getenv("WEFT_TEST_PLUGIN_DIR");
    if (!dir)
        skip_all("WEFT_TEST_PLUGIN_DIR is set by make check");
    snprintf(good_path, sizeof good_path, "%s/test-good.so", dir);
    const char *ms_env = getenv("WEFT_STRESS_MS");
    double duration = ms_env ? atof(ms_env) : 1500;
    ok(weft_load_default_plugins() >= 1, "default plugins loaded");

    pthread_t workers[WORKERS], loader;
    counts c[WORKERS] = {{0}};
    cycler cy = {0};
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&workers[i], NULL, worker, &c[i]);
    pthread_create(&loader, NULL, load_unload, &cy);
    /* at least the duration, and at least two load/unload cycles (under
     * valgrind a cycle can take longer than the whole duration) */
    wait_phase(workers, loader, duration, phase_cycled, &cy);

    counts sum = {0};
    for (int i = 0; i < WORKERS; i++) {
        sum.cpu_ok += c[i].cpu_ok;
        sum.twice_cpu_ok += c[i].twice_cpu_ok;
        sum.dev_ok += c[i].dev_ok;
        sum.dev_absent += c[i].dev_absent;
    }
    is_int(atomic_load(&wrong), 0, "every result was exact, every failure was the plugin's absence%s%s",
           atomic_load(&wrong) ? ": " : "", atomic_load(&wrong) ? wrong_what : "");
    ok(cy.loads >= 2 && cy.unloads >= 2, "testgood was loaded %ld and unloaded %ld times (%ld busy refusals)",
       cy.loads, cy.unloads, cy.busy);
    ok(sum.cpu_ok > 0, "%ld CPU rounds were exact", sum.cpu_ok);
    ok(sum.dev_ok > 0, "%ld testdev rounds ran the plugin's kernels (%ld found it absent), "
       "%ld of its CPU kernel", sum.dev_ok, sum.dev_absent, sum.twice_cpu_ok);

    /* the storm: a third of the duration, and until an allocation has met
     * an unload deciding, but never more than a minute */
    atomic_store(&stop, false);
    counts sc[WORKERS] = {{0}};
    cycler scy = {0};
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&workers[i], NULL, storm, &sc[i]);
    pthread_create(&loader, NULL, load_unload, &scy);
    wait_phase(workers, loader, duration / 3, phase_refused, &scy);
    long storm_ok = 0;
    for (int i = 0; i < WORKERS; i++)
        storm_ok += sc[i].dev_ok;
    is_int(atomic_load(&wrong), 0, "the storm: every failure was the plugin's absence%s%s",
           atomic_load(&wrong) ? ": " : "", atomic_load(&wrong) ? wrong_what : "");
    ok(atomic_load(&storm_refusals) > 0,
       "the storm: %ld allocations met testgood being unloaded and named it (%ld succeeded, "
       "%ld cycles)",
       atomic_load(&storm_refusals), storm_ok, atomic_load(&scy.unloads));
    is_int(weft_device_type_from_name("testdev"), WEFT_ENOTFOUND, "testgood is unloaded at the end");
    is_int(weft_load_plugin(good_path), 0, "and loads again");
    is_int(weft_unload_plugin("testgood"), 0, "and unloads");
    return done_testing();
}
