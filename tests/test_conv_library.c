/* tests/test_conv_library.c — the CPU plugin's float32 convolutions
 * through the library WEFT_CPU_CONV picks (backends/cpu/conv_lib.c):
 * conv2d, its input gradient and its weight gradient on random shapes
 * with the odd sizes training makes and the parameters a convolution
 * takes (batch 1 and remainders, one channel, 1x1 kernels, stride,
 * padding, dilation, groups, bias or none), each against a float64
 * convolution computed here; float16 through the same path; that oneDNN
 * is mapped into the process exactly when the setting says it runs; that
 * no convolution starts threads beyond weft's pool (oneDNN's OpenMP runs
 * one thread on each caller); and that an unknown WEFT_CPU_CONV is an
 * error naming the variable.  tests/conv_libraries.sh runs this once per
 * value, and with WEFT_ONEDNN_LIBRARY naming a missing file (the
 * fallback).  This program never opens oneDNN itself: it reads
 * /proc/self/maps (tests/memcheck.sh runs it under valgrind with the
 * default, where the plugin does not open oneDNN either). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/weft.h>

#include "tests/dir_entries.h"
#include "tests/keep.h"
#include "tests/random_f32.h"
#include "tests/tap.h"


static int thread_count(void)
{
    return dir_entries("/proc/self/task");
}

static bool onednn_mapped(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    bool found = false;
    while (f && fgets(line, sizeof line, f))
        found |= strstr(line, "libdnnl") != NULL;
    if (f)
        fclose(f);
    return found;
}

typedef struct shape {
    int64_t n, c, h, w, oc, kh, kw, stride[2], padding[2], dilation[2], groups;
    bool bias;
} shape;

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d)
{
    return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* |got - want| within 2e-5 of the sum of the terms' magnitudes (float32
 * sums of that many terms, in any order, stay well inside it) */
static double worst_error(const float *got, const double *want, const double *mag, int64_t n)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]) / (1.0 + mag[i]);
        worst = e > worst ? e : worst;
    }
    return worst;
}

static void check_shape(const shape *s)
{
    int64_t oh = out_size(s->h, s->kh, s->stride[0], s->padding[0], s->dilation[0]);
    int64_t ow = out_size(s->w, s->kw, s->stride[1], s->padding[1], s->dilation[1]);
    int64_t cg = s->c / s->groups, ocg = s->oc / s->groups;
    int64_t xs[4] = {s->n, s->c, s->h, s->w}, ws[4] = {s->oc, cg, s->kh, s->kw};
    int64_t ys[4] = {s->n, s->oc, oh, ow};
    weft_tensor *x = random_f32(xs, 4), *w = random_f32(ws, 4), *go = random_f32(ys, 4);
    weft_tensor *bias = s->bias ? random_f32(&s->oc, 1) : NULL, *y = NULL, *gx = NULL, *gw = NULL;
    int rc = weft_conv2d(&y, x, w, bias, s->stride, 2, s->padding, 2, s->dilation, 2, s->groups);
    keep(y);
    int rc_gx = weft_convolution_backward_input(&gx, go, w, xs, 4, s->stride, 2, s->padding, 2,
                                                s->dilation, 2, s->groups);
    keep(gx);
    int rc_gw = weft_convolution_backward_weight(&gw, go, x, ws, 4, s->stride, 2, s->padding, 2,
                                                 s->dilation, 2, s->groups);
    keep(gw);
    int64_t ny = s->n * s->oc * oh * ow, nx = s->n * s->c * s->h * s->w, nw = s->oc * cg * s->kh * s->kw;
    double *want_y = calloc((size_t)ny, sizeof(double)), *mag_y = calloc((size_t)ny, sizeof(double));
    double *want_x = calloc((size_t)nx, sizeof(double)), *mag_x = calloc((size_t)nx, sizeof(double));
    double *want_w = calloc((size_t)nw, sizeof(double)), *mag_w = calloc((size_t)nw, sizeof(double));
    const float *px = weft_tensor_data_ptr(x), *pw = weft_tensor_data_ptr(w);
    const float *pg = weft_tensor_data_ptr(go);
    for (int64_t n = 0; n < s->n; n++)
        for (int64_t o = 0; o < s->oc; o++)
            for (int64_t i = 0; i < oh; i++)
                for (int64_t j = 0; j < ow; j++) {
                    int64_t yi = ((n * s->oc + o) * oh + i) * ow + j;
                    if (bias)
                        want_y[yi] = ((const float *)weft_tensor_data_ptr(bias))[o];
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t u = 0; u < s->kh; u++)
                            for (int64_t v = 0; v < s->kw; v++) {
                                int64_t ih = i * s->stride[0] - s->padding[0] + u * s->dilation[0];
                                int64_t iw = j * s->stride[1] - s->padding[1] + v * s->dilation[1];
                                if (ih < 0 || ih >= s->h || iw < 0 || iw >= s->w)
                                    continue;
                                int64_t xi = ((n * s->c + o / ocg * cg + c) * s->h + ih) * s->w + iw;
                                int64_t wi = ((o * cg + c) * s->kh + u) * s->kw + v;
                                want_y[yi] += (double)px[xi] * pw[wi];
                                mag_y[yi] += fabs((double)px[xi] * pw[wi]);
                                want_x[xi] += (double)pg[yi] * pw[wi];
                                mag_x[xi] += fabs((double)pg[yi] * pw[wi]);
                                want_w[wi] += (double)pg[yi] * px[xi];
                                mag_w[wi] += fabs((double)pg[yi] * px[xi]);
                            }
                }
    char name[160];
    snprintf(name, sizeof name, "[%lld, %lld, %lld, %lld] * [%lld, %lld, %lld, %lld] stride %lld,%lld "
             "pad %lld,%lld dil %lld,%lld groups %lld%s", (long long)s->n, (long long)s->c,
             (long long)s->h, (long long)s->w, (long long)s->oc, (long long)cg, (long long)s->kh,
             (long long)s->kw, (long long)s->stride[0], (long long)s->stride[1],
             (long long)s->padding[0], (long long)s->padding[1], (long long)s->dilation[0],
             (long long)s->dilation[1], (long long)s->groups, bias ? " bias" : "");
    double e;
    e = rc == 0 ? worst_error(weft_tensor_data_ptr(y), want_y, mag_y, ny) : 1;
    if (!ok(rc == 0 && e < 2e-5, "conv2d %s: error %.2g", name, e))
        diag("%s", weft_last_error());
    e = rc_gx == 0 ? worst_error(weft_tensor_data_ptr(gx), want_x, mag_x, nx) : 1;
    if (!ok(rc_gx == 0 && e < 2e-5, "input gradient %s: error %.2g", name, e))
        diag("%s", weft_last_error());
    e = rc_gw == 0 ? worst_error(weft_tensor_data_ptr(gw), want_w, mag_w, nw) : 1;
    if (!ok(rc_gw == 0 && e < 2e-5, "weight gradient %s: error %.2g", name, e))
        diag("%s", weft_last_error());
    free(want_y), free(mag_y), free(want_x), free(mag_x), free(want_w), free(mag_w);
    drop_all();
}

static void test_shapes(void)
{
    static const shape fixed[] = {
        /* the training CNN's layers with the epoch's last batch (32) and
         * a batch no thread count divides */
        {32, 1, 28, 28, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},
        {7, 16, 14, 14, 32, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},
        {1, 3, 9, 7, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},   /* batch 1 */
        {5, 1, 6, 6, 1, 3, 3, {1, 1}, {0, 0}, {1, 1}, 1, false},  /* one channel each way */
        {3, 8, 5, 7, 6, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},   /* 1x1 */
        {3, 8, 9, 9, 6, 1, 1, {2, 2}, {0, 0}, {1, 1}, 1, false},  /* 1x1 stride 2 */
        {4, 3, 11, 10, 5, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true}, /* stride 2, odd sizes */
        {2, 4, 12, 12, 6, 3, 3, {1, 1}, {2, 2}, {2, 2}, 1, false}, /* dilation */
        {3, 6, 8, 8, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2, true},   /* groups */
        {2, 4, 7, 9, 8, 2, 3, {2, 1}, {0, 1}, {1, 2}, 4, false},  /* depthwise-like, mixed */
        {9, 2, 5, 5, 3, 5, 5, {3, 3}, {2, 2}, {1, 1}, 1, true},   /* stride 3, last rows unread */
        /* a weight gradient of few input channels (nn_conv.c's
         * small-result kernel): output pixels no vector width divides,
         * output channels and kernel taps no register block divides, and
         * an image cut into several tiles */
        {3, 1, 7, 5, 5, 2, 2, {1, 1}, {0, 0}, {1, 1}, 1, true},
        {2, 2, 9, 9, 7, 2, 2, {2, 1}, {1, 0}, {1, 1}, 1, false},
        {1, 1, 200, 256, 2, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},
    };
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
        check_shape(&fixed[i]);
    for (int r = 0; r < 8; r++) { /* random ones */
        shape s;
        memset(&s, 0, sizeof s);
        s.groups = 1 + (int64_t)((rnd() + 1) * 1.5);
        s.n = 1 + (int64_t)((rnd() + 1) * 4.5);
        s.c = s.groups * (1 + (int64_t)((rnd() + 1) * 2));
        s.oc = s.groups * (1 + (int64_t)((rnd() + 1) * 2.5));
        s.kh = 1 + (int64_t)((rnd() + 1) * 1.5), s.kw = 1 + (int64_t)((rnd() + 1) * 1.5);
        for (int d = 0; d < 2; d++) {
            s.stride[d] = 1 + (int64_t)((rnd() + 1) * 1);
            s.dilation[d] = 1 + (int64_t)((rnd() + 1) * 0.75);
            s.padding[d] = (int64_t)((rnd() + 1) * 1);
        }
        s.h = s.dilation[0] * (s.kh - 1) + 1 + (int64_t)((rnd() + 1) * 5);
        s.w = s.dilation[1] * (s.kw - 1) + 1 + (int64_t)((rnd() + 1) * 5);
        s.bias = rnd() > 0;
        check_shape(&s);
    }
}

/* The same bits on 1 and 2 threads, for every pass: the pieces of a
 * batch follow from its size alone where they are summed. */
static void test_thread_count(void)
{
    int64_t xs[4] = {13, 16, 10, 10}, ws[4] = {24, 16, 3, 3}, gs[4] = {13, 24, 10, 10};
    const int64_t one[2] = {1, 1};
    weft_tensor *x = random_f32(xs, 4), *w = random_f32(ws, 4), *go = random_f32(gs, 4);
    weft_tensor *out[2][3] = {{NULL}};
    int rc = 0;
    for (int t = 0; t < 2 && rc == 0; t++) {
        weft_set_num_threads(t + 1);
        if ((rc = weft_conv2d(&out[t][0], x, w, NULL, one, 2, one, 2, one, 2, 1)) == 0 &&
            (rc = weft_convolution_backward_input(&out[t][1], go, w, xs, 4, one, 2, one, 2, one,
                                                  2, 1)) == 0)
            rc = weft_convolution_backward_weight(&out[t][2], go, x, ws, 4, one, 2, one, 2, one,
                                                  2, 1);
        for (int p = 0; p < 3; p++)
            keep(out[t][p]);
    }
    weft_set_num_threads(2);
    static const char *names[3] = {"conv2d", "the input gradient", "the weight gradient"};
    for (int p = 0; p < 3; p++) {
        bool same = rc == 0 && memcmp(weft_tensor_data_ptr(out[0][p]), weft_tensor_data_ptr(out[1][p]),
                                      (size_t)weft_tensor_numel(out[0][p]) * sizeof(float)) == 0;
        if (!ok(same, "%s of [13, 16, 10, 10]: the same bits on 1 and 2 threads", names[p]))
            diag("%s", rc ? weft_last_error() : "the bits differ");
    }
    drop_all();
}

/* float16 computes in float32, so it takes the same library */
static void test_half(void)
{
    int64_t xs[4] = {3, 2, 6, 6}, ws[4] = {4, 2, 3, 3};
    const int64_t one[2] = {1, 1};
    weft_tensor *x = random_f32(xs, 4), *w = random_f32(ws, 4), *xh = NULL, *wh = NULL;
    weft_tensor *y = NULL, *yh = NULL, *back = NULL;
    int rc = weft_to_dtype(&xh, x, WEFT_FLOAT16);
    if (rc == 0)
        rc = weft_to_dtype(&wh, w, WEFT_FLOAT16);
    keep(xh), keep(wh);
    /* the reference: float32 of the float16-rounded operands */
    weft_tensor *xr = NULL, *wr = NULL;
    if (rc == 0 && (rc = weft_to_dtype(&xr, xh, WEFT_FLOAT32)) == 0)
        rc = weft_to_dtype(&wr, wh, WEFT_FLOAT32);
    keep(xr), keep(wr);
    if (rc == 0)
        rc = weft_conv2d(&y, xr, wr, NULL, one, 2, one, 2, one, 2, 1);
    keep(y);
    if (rc == 0)
        rc = weft_conv2d(&yh, xh, wh, NULL, one, 2, one, 2, one, 2, 1);
    keep(yh);
    if (rc == 0)
        rc = weft_to_dtype(&back, yh, WEFT_FLOAT32);
    keep(back);
    double worst = 0;
    for (int64_t i = 0; rc == 0 && i < weft_tensor_numel(y); i++) {
        double a = ((const float *)weft_tensor_data_ptr(y))[i];
        double b = ((const float *)weft_tensor_data_ptr(back))[i];
        worst = fabs(a - b) / (1 + fabs(a)) > worst ? fabs(a - b) / (1 + fabs(a)) : worst;
    }
    if (!ok(rc == 0 && weft_tensor_dtype(yh) == WEFT_FLOAT16 && worst < 2e-3,
            "float16 conv2d: float32 of the rounded operands, rounded (error %.2g)", worst))
        diag("%s", weft_last_error());
    drop_all();
}

int main(void)
{
    if (weft_load_default_plugins() <= 0)
        skip_all("no CPU plugin: %s", weft_last_error());
    rnd_seed = 4242;
    const char *choice = getenv("WEFT_CPU_CONV");
    const char *file = getenv("WEFT_ONEDNN_LIBRARY");
    bool missing = file && *file && strstr(file, "missing");
    bool is_auto = !choice || !*choice || strcmp(choice, "auto") == 0;
    bool known = is_auto || strcmp(choice, "im2col") == 0 || strcmp(choice, "onednn") == 0;
    weft_set_num_threads(2);
    int64_t xs[4] = {2, 1, 5, 5}, ws[4] = {2, 1, 3, 3};
    const int64_t one[2] = {1, 1}, zero[2] = {0, 0};
    bool onednn = known && !is_auto && strcmp(choice, "onednn") == 0;
    if (!known || (missing && onednn)) {
        /* refused, with a message naming what is wrong, by every pass */
        weft_tensor *x = random_f32(xs, 4), *w = random_f32(ws, 4), *y = NULL, *g = NULL;
        int want = known ? WEFT_ENOTSUP : WEFT_EINVAL;
        const char *needle = known ? file : "WEFT_CPU_CONV";
        int rc = weft_conv2d(&y, x, w, NULL, one, 2, zero, 2, one, 2, 1);
        ok(rc == want && strstr(weft_last_error(), needle) &&
               strstr(weft_last_error(), known ? "onednn" : choice),
           "WEFT_CPU_CONV=%s%s%s: conv2d is an error naming it: %s", choice,
           known ? " with " : "", known ? file : "", weft_last_error());
        int64_t gs[4] = {2, 2, 3, 3};
        weft_tensor *go = random_f32(gs, 4);
        rc = weft_convolution_backward_weight(&g, go, x, ws, 4, one, 2, zero, 2, one, 2, 1);
        ok(rc == want, "and the weight gradient fails the same way: %s", weft_last_error());
        rc = weft_convolution_backward_input(&g, go, w, xs, 4, one, 2, zero, 2, one, 2, 1);
        ok(rc == want, "and the input gradient: %s", weft_last_error());
        if (!known) {
            weft_tensor *xd = NULL, *wd = NULL;
            weft_to_dtype(&xd, x, WEFT_FLOAT64);
            weft_to_dtype(&wd, w, WEFT_FLOAT64);
            keep(xd), keep(wd);
            rc = weft_conv2d(&y, xd, wd, NULL, one, 2, zero, 2, one, 2, 1);
            ok(rc == WEFT_EINVAL, "float64 too (the setting is refused, not half-applied)");
        }
        if (getenv("WEFT_TEST_ONEDNN_INSTALLED"))
            ok(!onednn_mapped(), "oneDNN is not mapped");
        drop_all();
        return done_testing();
    }
    int before = thread_count();
    test_shapes();
    test_thread_count();
    test_half();
    int after = thread_count();
    /* the pool has one worker besides this thread at 2 threads; oneDNN's
     * OpenMP must not have added a team of its own */
    ok(after <= before + 1, "no threads beyond weft's pool: %d before, %d after", before, after);
    /* whether oneDNN ran, by whether it is mapped: only meaningful where
     * nothing else maps it (tests/conv_libraries.sh loads the CPU plugin
     * alone, holds the GEMM on OpenBLAS and says whether libdnnl.so.2 is
     * installed); under valgrind (the default, every plugin) the
     * quantized plugin maps it anyway */
    const char *installed = getenv("WEFT_TEST_ONEDNN_INSTALLED");
    if (!installed) {
        skip(1, "not run by tests/conv_libraries.sh: oneDNN may be mapped by other plugins");
    } else {
        bool want = !missing && strcmp(installed, "1") == 0 && (onednn || is_auto);
        ok(onednn_mapped() == want, "WEFT_CPU_CONV=%s%s: oneDNN %s mapped",
           choice ? choice : "(unset)", missing ? " with a missing library" : "",
           want ? "is" : "is not");
    }
    drop_all();
    return done_testing();
}
