/* tests/test_dist_ordered.c — what the core does for a collective backend
 * of interface version 2 such as nccl (issue 18), checked on every machine
 * through the fake backend tests/plugins/dist_ordered.c (two ranks, the
 * second a mirror of this one; it moves "hostdev" tensors, host memory
 * behind the test device plugin): tensors of its device handed over in
 * place and of other devices refused, non-contiguous ones staged on that
 * device, avg passed to the backend instead of divided, the agreement
 * through one exchange per call, every request started in call order even
 * when works are waited for out of order, and a timeout in the exchange
 * named as such. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/distributed.h>

#include "tap.h"

static char *log_text;
static weft_device hostdev;

static weft_tensor *ramp(int64_t n, weft_device dev)
{
    weft_tensor *c = NULL, *out = NULL;
    weft_empty(&c, &n, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    float *p = weft_tensor_data_ptr(c);
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)i + 1;
    if (dev.type == WEFT_DEVICE_TYPE_CPU)
        return c;
    weft_to_device(&out, c, dev);
    weft_tensor_release(c);
    return out;
}

/* t[i] == scale * (i + 1) for every i, on any device and strides */
static int ramp_times(const weft_tensor *t, double scale, const char *what)
{
    weft_tensor *h = NULL, *c = NULL;
    int good = weft_to_device(&h, t, WEFT_DEVICE_CPU) == 0 && weft_contiguous(&c, h) == 0;
    const float *p = good ? weft_tensor_data_ptr(c) : NULL;
    for (int64_t i = 0; good && i < weft_tensor_numel(c); i++)
        if (p[i] != scale * (double)(i + 1)) {
            diag("%s: element %lld is %g, expected %g", what, (long long)i, p[i],
                 scale * (double)(i + 1));
            good = 0;
        }
    weft_tensor_release(h);
    weft_tensor_release(c);
    return good;
}

static void expect_log(const char *want, const char *what)
{
    is_str(log_text, want, "%s", what);
    log_text[0] = '\0';
}

int main(void)
{
    const char *dir = getenv("WEFT_TEST_PLUGIN_DIR");
    if (!dir)
        skip_all("WEFT_TEST_PLUGIN_DIR is set by make check");
    char path[4096];
    snprintf(path, sizeof path, "%s/test-hostdev.so", dir);
    if (weft_load_plugin(path) < 0 || weft_device_from_string(&hostdev, "hostdev") < 0)
        skip_all("the hostdev test plugin did not load: %s", weft_last_error());
    /* the backend is found on the plugin path like any other */
    char plugin_path[8192];
    const char *old = getenv("WEFT_PLUGIN_PATH");
    snprintf(plugin_path, sizeof plugin_path, "%s%s%s", dir, old ? ":" : "", old ? old : "");
    setenv("WEFT_PLUGIN_PATH", plugin_path, 1);

    weft_dist_options opts = {sizeof opts, "ordered", -1, -1, 10000};
    weft_process_group *w = NULL;
    int rc = weft_dist_init(&w, &opts);
    if (!ok(rc == 0 && w, "a version-2 backend loads: %s", rc ? weft_last_error() : "ok"))
        return done_testing();
    snprintf(path, sizeof path, "%s/libweftdist-ordered.so", dir);
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    log_text = h ? dlsym(h, "dist_ordered_log") : NULL;
    int *hang = h ? dlsym(h, "dist_ordered_hang") : NULL;
    if (!ok(log_text && hang, "the backend's log is readable"))
        return done_testing();
    is_int(weft_dist_size(w), 2, "its world has two ranks");
    log_text[0] = '\0';

    /* in place on its device */
    weft_tensor *t = ramp(5, hostdev);
    rc = weft_dist_all_reduce(w, t, WEFT_REDUCE_SUM, NULL);
    ok(rc == 0 && ramp_times(t, 2, "sum"), "all_reduce sum of a hostdev tensor: %s",
       rc ? weft_last_error() : "ok");
    expect_log("exchange data:all_reduce:sum:hostdev:0 ",
               "  one exchange, then the data on hostdev memory (not staged through the host)");
    /* avg: the backend divides, the core does not */
    rc = weft_dist_all_reduce(w, t, WEFT_REDUCE_AVG, NULL);
    ok(rc == 0 && ramp_times(t, 2, "avg"), "all_reduce avg: the mirror's avg leaves the values");
    expect_log("exchange data:all_reduce:avg:hostdev:0 ",
               "  the backend gets avg (WEFT_DIST_CAP_AVG) and the core divides nothing");
    weft_tensor_release(t);

    /* non-contiguous: staged on hostdev, copied back */
    weft_tensor *m = ramp(12, hostdev), *mv = NULL, *col = NULL;
    weft_view(&mv, m, (const int64_t[]){4, 3}, 2);
    weft_select(&col, mv, 1, 1); /* elements 2, 5, 8, 11 (stride 3) */
    rc = weft_dist_all_reduce(w, col, WEFT_REDUCE_SUM, NULL);
    weft_tensor *mc = NULL;
    weft_to_device(&mc, m, WEFT_DEVICE_CPU);
    const float *mp = mc ? weft_tensor_data_ptr(mc) : NULL;
    ok(rc == 0 && mp && mp[1] == 4 && mp[4] == 10 && mp[0] == 1 && mp[2] == 3,
       "a strided hostdev column is reduced and copied back, its neighbours untouched");
    expect_log("exchange data:all_reduce:sum:hostdev:0 ", "  staged on hostdev");
    weft_tensor_release(mc);
    weft_tensor_release(col);
    weft_tensor_release(mv);
    weft_tensor_release(m);

    /* another device is refused before anything moves */
    weft_tensor *cpu = ramp(3, WEFT_DEVICE_CPU);
    rc = weft_dist_all_reduce(w, cpu, WEFT_REDUCE_SUM, NULL);
    is_int(rc, WEFT_EDEVICE, "a CPU tensor is refused");
    like(weft_last_error(), "backend ordered moves only hostdev tensors", "  by name: %s",
         weft_last_error());
    weft_tensor_release(cpu);
    log_text[0] = '\0';

    /* order: three async all_reduces and a send, waited for in reverse;
     * each call's exchange waits for the data of the one before */
    weft_tensor *a[3];
    weft_work *wk[4] = {0};
    for (int i = 0; i < 3; i++) {
        a[i] = ramp(4, hostdev);
        rc = weft_dist_all_reduce(w, a[i], WEFT_REDUCE_SUM, &wk[i]);
        ok(rc == 0, "async all_reduce %d started", i);
    }
    weft_tensor *s = ramp(2, hostdev);
    rc = weft_dist_send(w, s, 1, 7, &wk[3]);
    ok(rc == 0, "async send started");
    ok(strstr(log_text, "exchange exchange") == NULL,
       "  no call's exchange is posted before the data of the one before (so far: %s)", log_text);
    for (int i = 3; i >= 0; i--)
        ok(weft_work_wait(wk[i]) == 0, "work %d waited for", i);
    expect_log("exchange data:all_reduce:sum:hostdev:0 exchange data:all_reduce:sum:hostdev:0 "
               "exchange data:all_reduce:sum:hostdev:0 data:send:sum:hostdev:0 ",
               "  the backend saw exchange, data, exchange, data, ... and the send last");
    for (int i = 0; i < 3; i++) {
        ok(ramp_times(a[i], 2, "ordered"), "  all_reduce %d's values", i);
        weft_work_free(wk[i]);
        weft_tensor_release(a[i]);
    }
    weft_work_free(wk[3]);
    weft_tensor_release(s);

    /* a rank that never joins the agreement: the timeout says so */
    weft_dist_set_timeout(w, 300);
    *hang = 1;
    t = ramp(3, hostdev);
    rc = weft_dist_all_reduce(w, t, WEFT_REDUCE_SUM, NULL);
    is_int(rc, WEFT_EIO, "an exchange that never finishes times out");
    like(weft_last_error(), "all_reduce on world timed out after 300 ms in the agreement step",
         "  naming the collective, the group and the step: %s", weft_last_error());
    like(weft_last_error(), "backend ordered cannot tell which", "  and why no rank is named");
    expect_log("exchange abandon ", "  the backend was told to abandon the exchange");
    rc = weft_dist_all_reduce(w, t, WEFT_REDUCE_SUM, NULL);
    is_int(rc, WEFT_EIO, "the group is unusable afterwards");
    like(weft_last_error(), "unusable after an earlier timeout", "  quoting the first timeout");
    weft_tensor_release(t);
    is_int(weft_dist_finalize(w), 0, "finalize");
    return done_testing();
}
