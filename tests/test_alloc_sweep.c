/* tests/test_alloc_sweep.c — allocation-failure sweep, as SQLite runs its
 * malloc tests (issue 14): each program below runs again and again with the
 * n-th of weft's own allocations made to fail (weft_fault_inject_alloc), for
 * n = 0, 1, 2, ... until a run reaches its end without meeting the failure.
 * Every run must fail cleanly or succeed: a negative code with a message,
 * no crash, the inputs unchanged; memcheck.sh runs this program under
 * valgrind, which fails it on any leak or invalid access along those
 * error paths.  Before the fix in autograd/engine.c the backward program
 * crashed here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <weft/dlpack.h>
#include <weft/nn.h>
#include <weft/plugin.h>
#include <weft/ops.h>
#include <weft/profiler.h>
#include <weft/weft.h>

#include "tap.h"

#define CPU ((weft_device){WEFT_DEVICE_TYPE_CPU, 0})

static weft_tensor *x, *y; /* inputs, 2x3 float32, never written */
static const float x_vals[6] = {1, 2, 3, 4, 5, 6};
static const float y_vals[6] = {0.5f, -1, 2, 0, 3, -2};

static void drop(weft_tensor **t)
{
    weft_tensor_release(*t);
    *t = NULL;
}

#define TRY(call)          \
    do {                   \
        rc = (call);       \
        if (rc < 0)        \
            goto out;      \
    } while (0)

/* tensor creation and views */
static int prog_views(void)
{
    int rc;
    weft_tensor *a = NULL, *v = NULL, *t = NULL, *s = NULL, *r = NULL;
    int64_t sizes[2] = {3, 4}, six[1] = {6}, four[1] = {4};
    TRY(weft_zeros(&a, sizes, 2, WEFT_FLOAT32, CPU));
    TRY(weft_view(&v, x, six, 1));
    TRY(weft_transpose(&t, x, 0, 1));
    TRY(weft_slice(&s, t, 0, 1, 3, 1));
    TRY(weft_reshape(&r, s, four, 1)); /* not contiguous: a copy */
out:
    drop(&a), drop(&v), drop(&t), drop(&s), drop(&r);
    return rc;
}

/* one operator of each family: pointwise, binary, a reduction, matmul, a
 * list result, a list argument, nn (softmax, conv2d), indexing */
static int prog_ops(void)
{
    int rc;
    weft_tensor *e = NULL, *m = NULL, *s = NULL, *xt = NULL, *mm = NULL, *c = NULL;
    weft_tensor *sm = NULL, *x4 = NULL, *w = NULL, *cv = NULL, *idx = NULL, *is = NULL,
                *y4 = NULL, *y4r = NULL;
    weft_tensor **parts = NULL;
    int nparts = 0;
    TRY(weft_exp(&e, x));
    TRY(weft_mul(&m, e, y));
    int64_t dim = 1;
    TRY(weft_sum(&s, m, &dim, 1, false));
    TRY(weft_transpose(&xt, x, 0, 1));
    TRY(weft_matmul(&mm, x, xt));
    TRY(weft_split(&parts, &nparts, x, 1, 1));
    TRY(weft_cat(&c, parts, nparts, 0));
    /* nn: softmax and a convolution; indexing: index_select */
    TRY(weft_softmax(&sm, x, 1));
    int64_t in4[4] = {1, 1, 2, 3}, one = 1, zero = 0;
    TRY(weft_reshape(&x4, x, in4, 4));
    TRY(weft_reshape(&y4, y, in4, 4));
    TRY(weft_slice(&y4r, y4, 2, 0, 1, 1));
    TRY(weft_slice(&w, y4r, 3, 0, 2, 1)); /* a 1x1x1x2 kernel */
    TRY(weft_conv2d(&cv, x4, w, NULL, &one, 1, &zero, 1, &one, 1, 1));
    TRY(weft_zeros(&idx, &one, 1, WEFT_INT64, CPU));
    TRY(weft_index_select(&is, x, 1, idx));
out:
    weft_tensor_list_free(parts, nparts);
    drop(&e), drop(&m), drop(&s), drop(&xt), drop(&mm), drop(&c);
    drop(&sm), drop(&x4), drop(&w), drop(&cv), drop(&idx), drop(&is), drop(&y4), drop(&y4r);
    return rc;
}

static int hook_calls;
static int double_hook(const weft_tensor *grad, weft_tensor **replace, void *ctx)
{
    (void)ctx;
    hook_calls++;
    return weft_add(replace, grad, grad);
}

/* a custom function: y = x * x, backward 2 x g */
static int sq_forward(weft_function_ctx *ctx, weft_tensor *const *in, int nin, weft_tensor **out,
                      int nout)
{
    (void)nin, (void)nout;
    int rc = weft_function_save_for_backward(ctx, in, 1);
    return rc < 0 ? rc : weft_mul(&out[0], in[0], in[0]);
}

static int sq_backward(weft_function_ctx *ctx, weft_tensor *const *g, int nout, weft_tensor **gin,
                       int nin)
{
    (void)nout, (void)nin;
    weft_tensor *a = NULL, *two = NULL;
    int rc = weft_function_saved(&a, ctx, 0);
    if (rc == 0)
        rc = weft_add(&two, a, a);
    if (rc == 0)
        rc = weft_mul(&gin[0], two, g[0]);
    weft_tensor_release(a);
    weft_tensor_release(two);
    return rc;
}

/* autograd: forward with a custom function and a hook, backward */
static int prog_autograd(void)
{
    int rc;
    weft_tensor *leaf = NULL, *sq = NULL, *m = NULL, *mm = NULL, *xt = NULL, *loss = NULL,
                *g = NULL, *mx = NULL, *at = NULL;
    static const weft_function sq_fn = {"SquareBackward", sq_forward, sq_backward, false};
    TRY(weft_clone(&leaf, x));
    TRY(weft_tensor_set_requires_grad(leaf, true));
    TRY(weft_tensor_register_hook(leaf, double_hook, NULL));
    TRY(weft_function_apply(&sq, 1, &sq_fn, NULL, NULL, &leaf, 1));
    TRY(weft_mul(&m, sq, y));
    TRY(weft_transpose(&xt, leaf, 0, 1));
    TRY(weft_matmul(&mm, m, xt));
    /* two results (values and indices): a failure while saving for
     * backward must give back both (it leaked the second) */
    TRY(weft_max_dim(&mx, &at, mm, 1, false));
    TRY(weft_sum(&loss, mx, NULL, 0, false));
    TRY(weft_backward(&loss, 1, NULL, false, false));
    TRY(weft_tensor_grad(&g, leaf));
    if (!g)
        rc = weft_set_error(WEFT_EINTERNAL, "backward succeeded but left no gradient");
out:
    drop(&leaf), drop(&sq), drop(&m), drop(&mm), drop(&xt), drop(&loss), drop(&g), drop(&mx), drop(&at);
    return rc;
}

static char param_path[64];

/* parameter files: save two tensors, load them back into fresh ones */
static int prog_params(void)
{
    int rc;
    weft_tensor *a = NULL, *b = NULL;
    weft_tensor *const in[2] = {x, y};
    const char *const names[2] = {"x", "y"};
    TRY(weft_save_parameters(param_path, in, names, 2));
    int64_t sizes[2] = {2, 3};
    TRY(weft_zeros(&a, sizes, 2, WEFT_FLOAT32, CPU));
    TRY(weft_zeros(&b, sizes, 2, WEFT_FLOAT32, CPU));
    weft_tensor *const outs[2] = {a, b};
    TRY(weft_load_parameters(param_path, outs, names, 2));
    if (memcmp(weft_tensor_data_ptr(a), x_vals, sizeof x_vals) != 0)
        rc = weft_set_error(WEFT_EINTERNAL, "loaded parameters differ from the saved ones");
out:
    drop(&a), drop(&b);
    return rc;
}

/* DLPack: export x (legacy and versioned) and import it back */
static int prog_dlpack(void)
{
    int rc;
    weft_tensor *back = NULL, *back2 = NULL;
    DLManagedTensor *m = NULL;
    DLManagedTensorVersioned *mv = NULL;
    TRY(weft_to_dlpack(&m, x));
    DLManagedTensor *give = m;
    m = NULL;
    TRY(weft_from_dlpack(&back, give)); /* takes give, also on error */
    TRY(weft_to_dlpack_versioned(&mv, x, 0));
    DLManagedTensorVersioned *give2 = mv;
    mv = NULL;
    TRY(weft_from_dlpack_versioned(&back2, give2));
    if (weft_tensor_data_ptr(back) != weft_tensor_data_ptr(x))
        rc = weft_set_error(WEFT_EINTERNAL, "DLPack round trip copied");
out:
    drop(&back), drop(&back2);
    return rc;
}

/* plugin load and unload */
static char plugin_path[4200];
static int prog_plugin(void)
{
    int rc = weft_load_plugin(plugin_path);
    if (rc < 0)
        return rc;
    return weft_unload_plugin("testgood");
}

/* The profiler (issue 19): a session recording ranges, operators, autograd
 * and memory, then its trace and table.  A failed allocation while
 * recording drops that event (the operator goes on); one in the API calls
 * is their error. */
static char trace_path[64];

static int prog_profiler(void)
{
    weft_profiler *p = NULL;
    weft_profiler_options o = {sizeof o, true, true, false};
    int rc = weft_profiler_create(&p, &o);
    if (rc < 0)
        return rc;
    rc = weft_profiler_start(p);
    if (rc < 0) {
        weft_profiler_destroy(p);
        return rc;
    }
    weft_tensor *z = NULL, *s = NULL, *xg = NULL;
    rc = weft_profiler_range_push("step");
    if (rc == 0)
        rc = weft_mul(&z, x, y);
    if (rc == 0)
        rc = weft_detach(&xg, x);
    if (rc == 0)
        rc = weft_tensor_set_requires_grad(xg, true);
    weft_tensor_release(z);
    z = NULL;
    if (rc == 0)
        rc = weft_mul(&z, xg, y);
    if (rc == 0)
        rc = weft_sum(&s, z, NULL, 0, false);
    if (rc == 0)
        rc = weft_backward(&s, 1, NULL, false, false);
    int pop = weft_profiler_range_pop();
    rc = rc < 0 ? rc : pop;
    weft_tensor_release(z);
    weft_tensor_release(s);
    weft_tensor_release(xg);
    weft_profiler_stop(p);
    if (rc == 0)
        rc = weft_profiler_export_chrome_trace(p, trace_path);
    weft_profiler_stat *st = NULL;
    int n = 0;
    if (rc == 0)
        rc = weft_profiler_key_averages(&st, &n, p, true);
    weft_profiler_stats_free(st, n);
    char *table = NULL;
    if (rc == 0)
        rc = weft_profiler_table(&table, p, NULL, 0, true);
    free(table);
    weft_profiler_destroy(p);
    return rc;
}

static bool inputs_intact(void)
{
    return memcmp(weft_tensor_data_ptr(x), x_vals, sizeof x_vals) == 0 &&
           memcmp(weft_tensor_data_ptr(y), y_vals, sizeof y_vals) == 0;
}

static void sweep(const char *name, int (*prog)(void))
{
    /* once without faults, so lazily made tables exist and it is known to work */
    int rc = prog();
    if (!ok(rc == 0, "%s runs without injected faults", name)) {
        diag("error: %s", weft_last_error());
        return;
    }
    int runs = 0, clean_errors = 0, completions = 0, bad = 0;
    for (long n = 0; n < 100000; n++) {
        weft_clear_error();
        weft_fault_inject_alloc(n, 0);
        rc = prog();
        long hit = weft_fault_inject_alloc(-1, 0);
        runs++;
        if (rc < 0) {
            clean_errors++;
            if (!*weft_last_error() && bad++ < 5)
                diag("%s, allocation %ld failed: code %d without a message", name, n, rc);
        } else {
            completions++;
        }
        if (rc > 0 && bad++ < 5)
            diag("%s, allocation %ld failed: positive code %d", name, n, rc);
        if (!inputs_intact() && bad++ < 5)
            diag("%s, allocation %ld failed: an input changed", name, n);
        if (hit == 0) {
            ok(rc == 0, "%s completes once the failure is past its last allocation (%ld)", name, n);
            break;
        }
    }
    ok(bad == 0, "%s: %d runs, %d clean errors, %d completed despite a failure; every error "
       "has a message and no input changed", name, runs, clean_errors, completions - 1);
    /* and it still works afterwards */
    rc = prog();
    ok(rc == 0, "%s runs again after the sweep (%s)", name, rc ? weft_last_error() : "ok");
}

int main(void)
{
    if (weft_load_default_plugins() < 0 || weft_device_count(WEFT_DEVICE_TYPE_CPU) < 1)
        skip_all("the CPU plugin did not load: %s", weft_last_error());
    int64_t sizes[2] = {2, 3};
    if (weft_empty(&x, sizes, 2, WEFT_FLOAT32, CPU) < 0 ||
        weft_empty(&y, sizes, 2, WEFT_FLOAT32, CPU) < 0)
        skip_all("cannot allocate the inputs");
    memcpy(weft_tensor_data_ptr(x), x_vals, sizeof x_vals);
    memcpy(weft_tensor_data_ptr(y), y_vals, sizeof y_vals);
    snprintf(param_path, sizeof param_path, "/tmp/weft-sweep-%d.wpt", (int)getpid());

    /* the fault hook itself: the n-th allocation fails, once or for good */
    weft_tensor *t = NULL;
    weft_fault_inject_alloc(0, 0);
    int rc = weft_empty(&t, sizes, 2, WEFT_FLOAT32, CPU);
    is_int(weft_fault_inject_alloc(-1, 0), 1, "an armed hook fails the next allocation");
    ok(rc == WEFT_ENOMEM && t == NULL, "weft_empty reports WEFT_ENOMEM (%d) and no tensor", rc);
    like(weft_last_error(), "memory", "with a message");
    weft_fault_inject_alloc(-1, 0);
    rc = weft_empty(&t, sizes, 2, WEFT_FLOAT32, CPU);
    ok(rc == 0 && t, "disarmed, allocations succeed");
    drop(&t);
    void *p = weft_malloc(16);
    ok(p != NULL, "weft_malloc allocates");
    weft_free(p);
    weft_fault_inject_alloc(1, 1);
    void *p1 = weft_malloc(8), *p2 = weft_malloc(8), *p3 = weft_malloc(8);
    ok(p1 && !p2 && !p3, "keep_failing: the first succeeds, every later one fails");
    is_int(weft_fault_inject_alloc(-1, 0), 2, "two failures counted");
    weft_free(p1);

    sweep("tensor creation and views", prog_views);
    sweep("operators", prog_ops);
    sweep("autograd with a custom function and a hook", prog_autograd);
    sweep("parameter save and load", prog_params);
    sweep("DLPack export and import", prog_dlpack);
    snprintf(trace_path, sizeof trace_path, "/tmp/weft-sweep-%d.json", (int)getpid());
    sweep("the profiler: recording, trace, tables", prog_profiler);
    unlink(trace_path);
    const char *pdir = getenv("WEFT_TEST_PLUGIN_DIR");
    if (pdir) {
        snprintf(plugin_path, sizeof plugin_path, "%s/test-good.so", pdir);
        sweep("plugin load and unload", prog_plugin);
    } else {
        skip(3, "WEFT_TEST_PLUGIN_DIR is not set (run through make check)");
    }
    ok(inputs_intact(), "the inputs are as they were");
    unlink(param_path);
    drop(&x), drop(&y);
    return done_testing();
}
