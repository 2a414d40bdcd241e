/* tests/test_ddp.c — data-parallel training (issue 18), run by
 * tests/dist.sh under mpirun with 1, 2 and 3 ranks.  Each rank trains a
 * weft_ddp replica on its shard of every global batch and, beside it, a
 * plain single-process model on the whole global batch; after the same
 * batches the two must hold the same parameters (to float rounding) — so
 * the run with N ranks equals the run with 1.  Also: no_sync accumulation,
 * several buckets, and the unused-parameter error.  TAP per rank into
 * argv[1]/rank<R>.tap, as tests/test_dist.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/distributed.h>
#include <weft/nn.h>

#include "tap.h"

enum { IN = 6, HID = 5, OUT = 3, GLOBAL = 12 };
static int rank, size;

/* Rows [from, from + n) of the global data set of step `step`. */
static void batch(weft_tensor **x, weft_tensor **y, int step, int from, int n)
{
    int64_t xs[2] = {n, IN}, ys[2] = {n, OUT};
    weft_empty(x, xs, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    weft_empty(y, ys, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    float *px = weft_tensor_data_ptr(*x), *py = weft_tensor_data_ptr(*y);
    for (int i = 0; i < n; i++) {
        int g = from + i + step * GLOBAL;
        for (int j = 0; j < IN; j++)
            px[i * IN + j] = (float)sin(g * 7.0 + j);
        for (int k = 0; k < OUT; k++)
            py[i * OUT + k] = (float)cos(g + 3.0 * k);
    }
}

static weft_module *make_model(weft_module **first)
{
    weft_module *seq = NULL, *l1 = NULL, *act = NULL, *l2 = NULL;
    weft_module_sequential(&seq);
    weft_module_linear(&l1, IN, HID, true, NULL);
    weft_module_activation(&act, WEFT_ACTIVATION_TANH);
    weft_module_linear(&l2, HID, OUT, true, NULL);
    weft_module_sequential_append(seq, l1);
    weft_module_sequential_append(seq, act);
    weft_module_sequential_append(seq, l2);
    if (first)
        *first = l1;
    return seq;
}

/* forward, mean squared error, backward */
static int step_loss(weft_module *m, weft_tensor *x, weft_tensor *y)
{
    weft_tensor *out = NULL, *loss = NULL;
    int rc = weft_module_forward(m, x, &out);
    if (rc == 0)
        rc = weft_mse_loss(&loss, out, y, "mean");
    if (rc == 0)
        rc = weft_backward(&loss, 1, NULL, false, false);
    weft_tensor_release(loss);
    weft_tensor_release(out);
    return rc;
}

static int params(weft_module *m, weft_tensor **p)
{
    const char *names[16];
    return weft_module_parameters(m, p, names, 16);
}

static double max_diff(weft_module *a, weft_module *b)
{
    weft_tensor *pa[16], *pb[16];
    int n = params(a, pa);
    params(b, pb);
    double worst = 0;
    for (int i = 0; i < n; i++) {
        const float *x = weft_tensor_data_ptr(pa[i]), *y = weft_tensor_data_ptr(pb[i]);
        for (int64_t k = 0; k < weft_tensor_numel(pa[i]); k++)
            worst = fmax(worst, fabs((double)x[k] - y[k]));
    }
    return worst;
}

static void copy_params(weft_module *dst, weft_module *src)
{
    weft_tensor *pd[16], *ps[16];
    int n = params(dst, pd);
    params(src, ps);
    bool g = weft_set_grad_enabled(false);
    for (int i = 0; i < n; i++)
        weft_copy_(pd[i], ps[i]);
    weft_set_grad_enabled(g);
}

/* `steps` SGD steps of the replica (on its shard, through ddp) and of the
 * reference (whole batch); with micro > 1 each step accumulates micro
 * micro-batches, under no_sync but for the last. */
static int train(weft_module *rep, weft_ddp *ddp, weft_module *ref, int steps, int micro)
{
    weft_tensor *pr[16], *pf[16];
    int n = params(rep, pr);
    params(ref, pf);
    weft_optimizer *orep = NULL, *oref = NULL;
    weft_optimizer_sgd(&orep, pr, n, 0.1, 0, 0, 0, false);
    weft_optimizer_sgd(&oref, pf, n, 0.1, 0, 0, 0, false);
    int rc = 0, shard = GLOBAL / size, part = shard / micro, gpart = GLOBAL / micro;
    for (int s = 0; s < steps && rc == 0; s++) {
        weft_optimizer_zero_grad(orep);
        weft_optimizer_zero_grad(oref);
        for (int k = 0; k < micro && rc == 0; k++) {
            weft_tensor *x = NULL, *y = NULL;
            /* micro-batch k of the global batch is rows [k*gpart, (k+1)*gpart);
             * this rank's share of it, the rank-th of size equal parts */
            batch(&x, &y, s, k * gpart + rank * part, part);
            weft_ddp_set_sync(ddp, k == micro - 1);
            rc = step_loss(rep, x, y);
            weft_tensor_release(x);
            weft_tensor_release(y);
            batch(&x, &y, s, k * gpart, gpart);
            if (rc == 0)
                rc = step_loss(ref, x, y);
            weft_tensor_release(x);
            weft_tensor_release(y);
        }
        if (rc == 0)
            rc = weft_ddp_finish(ddp);
        if (rc == 0)
            rc = weft_optimizer_step(orep);
        if (rc == 0)
            rc = weft_optimizer_step(oref);
    }
    weft_optimizer_destroy(orep);
    weft_optimizer_destroy(oref);
    return rc;
}

/* The largest difference between ranks of any parameter element. */
static double spread_of(weft_module *m, weft_process_group *world)
{
    weft_tensor *p[16];
    int n = params(m, p);
    double spread = 0;
    for (int i = 0; i < n; i++) {
        weft_tensor *hi = NULL, *lo = NULL;
        weft_contiguous(&hi, p[i]);
        weft_empty_like(&lo, hi);
        weft_copy_(lo, hi);
        weft_dist_all_reduce(world, hi, WEFT_REDUCE_MAX, NULL);
        weft_dist_all_reduce(world, lo, WEFT_REDUCE_MIN, NULL);
        const float *a = weft_tensor_data_ptr(hi), *b = weft_tensor_data_ptr(lo);
        for (int64_t k = 0; k < weft_tensor_numel(hi); k++)
            spread = fmax(spread, (double)a[k] - b[k]);
        weft_tensor_release(hi);
        weft_tensor_release(lo);
    }
    return spread;
}

/* 2 SGD steps of a replica on dev (its batches moved there) against a CPU
 * reference on the whole batch. */
static int train_device(weft_module *rep, weft_ddp *ddp, weft_module *ref, weft_device dev)
{
    weft_tensor *pr[16], *pf[16];
    int n = params(rep, pr);
    params(ref, pf);
    weft_optimizer *orep = NULL, *oref = NULL;
    weft_optimizer_sgd(&orep, pr, n, 0.1, 0, 0, 0, false);
    weft_optimizer_sgd(&oref, pf, n, 0.1, 0, 0, 0, false);
    int rc = 0, shard = GLOBAL / size;
    for (int s = 0; s < 2 && rc == 0; s++) {
        weft_optimizer_zero_grad(orep);
        weft_optimizer_zero_grad(oref);
        weft_tensor *x = NULL, *y = NULL, *dx = NULL, *dy = NULL;
        batch(&x, &y, s, rank * shard, shard);
        weft_to_device(&dx, x, dev);
        weft_to_device(&dy, y, dev);
        rc = step_loss(rep, dx, dy);
        weft_tensor *t[] = {x, y, dx, dy};
        for (int i = 0; i < 4; i++)
            weft_tensor_release(t[i]);
        x = y = NULL;
        batch(&x, &y, s, 0, GLOBAL);
        if (rc == 0)
            rc = step_loss(ref, x, y);
        weft_tensor_release(x);
        weft_tensor_release(y);
        if (rc == 0)
            rc = weft_ddp_finish(ddp);
        if (rc == 0)
            rc = weft_optimizer_step(orep);
        if (rc == 0)
            rc = weft_optimizer_step(oref);
    }
    weft_optimizer_destroy(orep);
    weft_optimizer_destroy(oref);
    return rc;
}

/* max |a - b| over the parameters, a's moved to the host first */
static double device_diff(weft_module *a, weft_module *b)
{
    weft_tensor *pa[16], *pb[16];
    int n = params(a, pa);
    params(b, pb);
    double worst = 0;
    for (int i = 0; i < n; i++) {
        weft_tensor *h = NULL;
        weft_to_device(&h, pa[i], WEFT_DEVICE_CPU);
        const float *x = weft_tensor_data_ptr(h), *y = weft_tensor_data_ptr(pb[i]);
        for (int64_t k = 0; k < weft_tensor_numel(h); k++)
            worst = fmax(worst, fabs((double)x[k] - y[k]));
        weft_tensor_release(h);
    }
    return worst;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    weft_load_default_plugins();
    weft_process_group *world = NULL;
    if (weft_dist_init(&world, NULL) < 0) {
        fprintf(stderr, "dist_init: %s\n", weft_last_error());
        return 1;
    }
    rank = weft_dist_rank(world);
    size = weft_dist_size(world);
    char path[4096];
    snprintf(path, sizeof path, "%s/rank%d.tap", argv[1], rank);
    if (!freopen(path, "w", stdout))
        return 1;
    /* every rank starts from other random parameters: the ddp makes them rank 0's */
    weft_manual_seed(1234 + (uint64_t)rank);
    weft_module *first = NULL, *rep = make_model(&first), *ref = make_model(NULL);
    double before = spread_of(rep, world);
    if (size > 1)
        ok(before > 0.01, "the replicas start different (spread %g)", before);
    else
        skip(1, "one rank: nothing to differ from");
    weft_ddp *ddp = NULL;
    int rc = weft_ddp_new(&ddp, rep, world, 0);
    if (rc < 0)
        diag("ddp_new: %s", weft_last_error());
    is_int(rc, 0, "ddp_new (25 MiB buckets: %d bucket)", weft_ddp_num_buckets(ddp));
    is_int(weft_ddp_num_buckets(ddp), 1, "one bucket for the small model");
    double spread = spread_of(rep, world);
    is_double(spread, 0, 0, "after ddp_new every rank holds rank 0's parameters");
    copy_params(ref, rep);

    rc = train(rep, ddp, ref, 4, 1);
    is_int(rc, 0, "4 steps of %d ranks x %d rows and of 1 process x %d rows", size, GLOBAL / size,
           GLOBAL);
    double d = max_diff(rep, ref);
    ok(d < 1e-5, "the same parameters after the same global batches (max diff %.3g)", d);

    rc = train(rep, ddp, ref, 2, 2);
    d = max_diff(rep, ref);
    ok(rc == 0 && d < 1e-5, "with no_sync over 2 micro-batches: the same parameters (max diff %.3g)", d);
    weft_ddp_destroy(ddp);

    /* small buckets: one parameter each, reduced while backward goes on */
    rc = weft_ddp_new(&ddp, rep, world, 16);
    is_int(weft_ddp_num_buckets(ddp), 4, "16-byte buckets: one per parameter");
    rc = train(rep, ddp, ref, 2, 1);
    d = max_diff(rep, ref);
    ok(rc == 0 && d < 1e-5, "the same parameters with 4 buckets (max diff %.3g)", d);

    /* a parameter without gradient is an error naming it, on every rank */
    weft_tensor *x = NULL, *y = NULL, *out = NULL, *loss = NULL;
    batch(&x, &y, 0, 0, 2);
    weft_module_forward(first, x, &out);
    weft_mean(&loss, out, NULL, 0, false);
    weft_backward(&loss, 1, NULL, false, false);
    rc = weft_ddp_finish(ddp);
    ok(rc == WEFT_EINVAL && strstr(weft_last_error(), "2.weight received no gradient"),
       "a parameter that received no gradient: %s", weft_last_error());
    weft_tensor_release(loss);
    weft_tensor_release(out);
    weft_tensor_release(x);
    weft_tensor_release(y);
    /* and the ddp goes on after it */
    rc = train(rep, ddp, ref, 1, 1);
    ok(rc == 0 && max_diff(rep, ref) < 1e-5, "training goes on after that error (rc %d)", rc);
    weft_ddp_destroy(ddp);
    is_int(weft_ddp_new(&ddp, NULL, world, 0), WEFT_EINVAL, "ddp_new of NULL");

    /* replicas on another device (the hostdev test plugin): buckets live
     * there and the collectives stage them through the host */
    const char *dir = getenv("WEFT_TEST_PLUGIN_DIR");
    char plugin[4096];
    snprintf(plugin, sizeof plugin, "%s/test-hostdev.so", dir ? dir : ".");
    weft_device dev;
    weft_cpu_fallback_set_mode(WEFT_CPU_FALLBACK_SILENT);
    if (dir && weft_load_plugin(plugin) == 0 && weft_device_from_string(&dev, "hostdev") == 0) {
        weft_module *drep = make_model(NULL), *dref = make_model(NULL);
        copy_params(drep, rep);
        copy_params(dref, rep);
        rc = weft_module_to_device(drep, dev);
        if (rc == 0)
            rc = weft_ddp_new(&ddp, drep, world, 0);
        weft_tensor *dp[16];
        params(drep, dp);
        ok(rc == 0 && weft_tensor_device(dp[0]).type == dev.type, "ddp_new of a replica on hostdev (rc %d%s%s)",
           rc, rc ? ": " : "", rc ? weft_last_error() : "");
        /* train it against the CPU reference; compare on the host */
        rc = rc == 0 ? train_device(drep, ddp, dref, dev) : rc;
        ok(rc == 0 && device_diff(drep, dref) < 1e-5, "2 steps on hostdev give the CPU reference's parameters (rc %d)", rc);
        weft_ddp_destroy(ddp);
        weft_module_destroy(drep);
        weft_module_destroy(dref);
    } else {
        skip(2, "the hostdev test plugin is not there (%s)", plugin);
    }
    weft_module_destroy(rep);
    weft_module_destroy(ref);
    is_int(weft_dist_finalize(world), 0, "finalize");
    return done_testing();
}
