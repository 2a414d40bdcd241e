/* tests/test_nn_modules.c — the nn modules (issue 4): each module's forward
 * pass against a float64 reference computed here with plain loops, the
 * names and shapes of parameters and buffers (PyTorch's state_dict names),
 * the initialisation bounds and statistics, gradients (shapes, and
 * gradcheck on small float64 modules), train/eval behaviour (Dropout's
 * mask, BatchNorm2d's running statistics by PyTorch's formula), bad inputs
 * that must name the module and the shapes, moving, and a Sequential's
 * save/load round trip. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <weft/nn.h>

#include "tests/tap.h"
#include "tests/keep.h"
#include "tests/host_device.h"

/* ---------------------------------------------------------------- helpers */

/* a kept tensor of dtype holding values (row-major) */
static weft_tensor *tensor_of(const double *values, const int64_t *sizes, int nd, weft_dtype dtype)
{
    weft_tensor *d = NULL, *t = NULL;
    if (weft_empty(&d, sizes, nd, WEFT_FLOAT64, WEFT_DEVICE_CPU) != 0)
        return NULL;
    memcpy(weft_tensor_data_ptr(d), values, (size_t)weft_tensor_numel(d) * sizeof(double));
    if (dtype == WEFT_FLOAT64)
        return keep(d);
    int rc = weft_to_dtype(&t, d, dtype);
    weft_tensor_release(d);
    return rc == 0 ? keep(t) : NULL;
}

/* deterministic pseudo-random values in [-1, 1) */
static void fill_values(double *v, int n, unsigned seed)
{
    uint32_t s = seed * 2654435761u + 1;
    for (int i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        v[i] = (double)(s >> 8) / (double)(1u << 23) - 1.0;
    }
}

static bool same_shape(const weft_tensor *t, const int64_t *sizes, int nd)
{
    if (!t || weft_tensor_ndim(t) != nd)
        return false;
    for (int i = 0; i < nd; i++)
        if (weft_tensor_size(t, i) != sizes[i])
            return false;
    return true;
}

/* the module's tensor under name (borrowed), from weft_module_state */
static weft_tensor *state_entry(weft_module *m, const char *name)
{
    weft_tensor *t[32];
    const char *n[32];
    int count = weft_module_state(m, t, n, 32);
    for (int i = 0; i < count && i < 32; i++)
        if (strcmp(n[i], name) == 0)
            return t[i];
    return NULL;
}

static weft_tensor *forward(weft_module *m, weft_tensor *x)
{
    weft_tensor *y = NULL;
    int rc = weft_module_forward(m, x, &y);
    if (rc < 0)
        diag("forward of %s: %s", weft_module_kind(m), weft_last_error());
    return keep(y);
}

/* ----------------------------------------------------------------- Linear */

static void test_linear(void)
{
    weft_generator *g = NULL;
    weft_generator_create(&g, 11);
    weft_module *m = NULL;
    is_int(weft_module_linear(&m, 3, 2, true, g), 0, "Linear(3, 2)");
    weft_tensor *t[4];
    const char *names[4];
    is_int(weft_module_parameters(m, t, names, 4), 2, "Linear has two parameters");
    is_str(names[0], "weight", "first parameter is weight");
    is_str(names[1], "bias", "second parameter is bias");
    ok(same_shape(t[0], (int64_t[]){2, 3}, 2) && same_shape(t[1], (int64_t[]){2}, 1),
       "weight [2, 3], bias [2]");
    ok(weft_tensor_requires_grad(t[0]) && weft_tensor_is_leaf(t[0]),
       "parameters are leaves that require grad");
    /* the tensors alone, as parameters() gives them, or the names alone */
    weft_tensor *only[2] = {NULL, NULL};
    is_int(weft_module_parameters(m, only, NULL, 2), 2, "the tensors without their names");
    ok(only[0] == t[0] && only[1] == t[1], "the same tensors as with their names");
    const char *only_names[2] = {NULL, NULL};
    is_int(weft_module_state(m, NULL, only_names, 2), 2, "the names without their tensors");
    is_str(only_names[1], "bias", "the second name is bias");
    ok(weft_module_parameters(m, NULL, NULL, 2) == WEFT_EINVAL &&
           strstr(weft_last_error(), "neither a tensors nor a names array"),
       "a capacity with no array to fill is refused: %s", weft_last_error());
    char text[128];
    weft_module_describe(m, text, sizeof text);
    is_str(text, "Linear(in_features=3, out_features=2, bias=True)", "described as PyTorch prints it");

    double xv[2 * 3];
    fill_values(xv, 6, 1);
    weft_tensor *x = tensor_of(xv, (int64_t[]){2, 3}, 2, WEFT_FLOAT32);
    weft_tensor *y = forward(m, x);
    const double *w = values_of(t[0]), *b = values_of(t[1]);
    double want[4];
    for (int i = 0; i < 2; i++)
        for (int o = 0; o < 2; o++) {
            want[i * 2 + o] = b[o];
            for (int k = 0; k < 3; k++)
                want[i * 2 + o] += xv[i * 3 + k] * w[o * 3 + k];
        }
    check_close(y, want, 4, 1e-6, "Linear forward matches x W^T + b");

    /* gradients flow to both parameters, with their shapes */
    weft_tensor *s = NULL;
    weft_sum(&s, y, NULL, 0, false);
    keep(s);
    is_int(weft_backward(&s, 1, NULL, false, false), 0, "backward through Linear");
    weft_tensor *gw = NULL, *gb = NULL;
    weft_tensor_grad(&gw, t[0]);
    weft_tensor_grad(&gb, t[1]);
    keep(gw);
    keep(gb);
    ok(same_shape(gw, (int64_t[]){2, 3}, 2) && same_shape(gb, (int64_t[]){2}, 1),
       "gradients of weight and bias have their shapes");
    const double *gbv = values_of(gb);
    ok(gbv && gbv[0] == 2 && gbv[1] == 2, "d sum / d bias = batch size");

    /* no bias */
    weft_module *nb = NULL;
    is_int(weft_module_linear(&nb, 3, 2, false, g), 0, "Linear without bias");
    is_int(weft_module_parameters(nb, NULL, NULL, 0), 1, "... has only a weight");
    weft_module_destroy(nb);

    /* initialisation: U(-1/sqrt(in), 1/sqrt(in)) for both, with the right spread */
    weft_module *big = NULL;
    is_int(weft_module_linear(&big, 400, 300, true, g), 0, "Linear(400, 300)");
    weft_module_parameters(big, t, names, 4);
    const double *bw = values_of(t[0]), *bb = values_of(t[1]);
    double bound = 1.0 / sqrt(400.0), lo = 0, hi = 0, sq = 0, mean = 0;
    for (int i = 0; bw && i < 120000; i++) {
        lo = fmin(lo, bw[i]);
        hi = fmax(hi, bw[i]);
        sq += bw[i] * bw[i];
        mean += bw[i];
    }
    ok(lo >= -bound && hi <= bound && lo < -0.95 * bound && hi > 0.95 * bound,
       "weight fills [-1/sqrt(400), 1/sqrt(400)] (min %g, max %g)", lo, hi);
    is_double(sqrt(sq / 120000), bound / sqrt(3.0), 0.01, "weight std is bound/sqrt(3)");
    ok(fabs(mean / 120000) < 0.01 * bound, "weight mean near 0");
    lo = hi = 0;
    for (int i = 0; bb && i < 300; i++)
        lo = fmin(lo, bb[i]), hi = fmax(hi, bb[i]);
    ok(lo >= -bound && hi <= bound && hi - lo > bound, "bias fills [-1/sqrt(in), 1/sqrt(in)]");

    /* the same generator seed gives the same initialisation */
    weft_module *a = NULL, *c = NULL;
    weft_generator_set_seed(g, 5);
    weft_module_linear(&a, 4, 3, true, g);
    weft_generator_set_seed(g, 5);
    weft_module_linear(&c, 4, 3, true, g);
    weft_module_parameters(a, t, names, 4);
    weft_module_parameters(c, t + 2, names + 2, 2);
    const double *av = values_of(t[0]), *cv = values_of(t[2]);
    ok(av && cv && memcmp(av, cv, 12 * sizeof(double)) == 0, "same seed, same weights");
    weft_module_destroy(a);
    weft_module_destroy(c);
    weft_module_destroy(big);
    weft_module_destroy(m);
    weft_generator_destroy(g);
}

/* ----------------------------------------------------------------- Conv2d */

/* float64 reference convolution: x [n, cin, h, w], weight [cout, cin/g, kh, kw] */
static void conv_reference(double *y, const double *x, const double *w, const double *b, int n,
                           int cin, int h, int wd, int cout, int kh, int kw, int sh, int sw, int ph,
                           int pw, int dh, int dw, int groups, int oh, int ow)
{
    int cpg = cin / groups, opg = cout / groups;
    for (int i = 0; i < n; i++)
        for (int o = 0; o < cout; o++)
            for (int r = 0; r < oh; r++)
                for (int c = 0; c < ow; c++) {
                    double acc = b ? b[o] : 0;
                    int grp = o / opg;
                    for (int ci = 0; ci < cpg; ci++)
                        for (int a = 0; a < kh; a++)
                            for (int e = 0; e < kw; e++) {
                                int yy = r * sh - ph + a * dh, xx = c * sw - pw + e * dw;
                                if (yy < 0 || yy >= h || xx < 0 || xx >= wd)
                                    continue;
                                acc += x[((i * cin + grp * cpg + ci) * h + yy) * wd + xx] *
                                       w[((o * cpg + ci) * kh + a) * kw + e];
                            }
                    y[((i * cout + o) * oh + r) * ow + c] = acc;
                }
}

static void test_conv2d(void)
{
    weft_generator *g = NULL;
    weft_generator_create(&g, 3);
    weft_module *m = NULL;
    int64_t k[2] = {3, 2}, s[2] = {2, 1}, p[2] = {1, 2}, d[2] = {2, 1};
    is_int(weft_module_conv2d(&m, 4, 6, k, s, p, d, 2, true, g), 0,
           "Conv2d(4, 6, (3, 2), stride (2, 1), padding (1, 2), dilation (2, 1), groups 2)");
    weft_tensor *t[2];
    const char *names[2];
    is_int(weft_module_parameters(m, t, names, 2), 2, "two parameters");
    ok(same_shape(t[0], (int64_t[]){6, 2, 3, 2}, 4) && same_shape(t[1], (int64_t[]){6}, 1),
       "weight [6, 2, 3, 2] (in/groups), bias [6]");
    char text[160];
    weft_module_describe(m, text, sizeof text);
    is_str(text,
           "Conv2d(4, 6, kernel_size=(3, 2), stride=(2, 1), padding=(1, 2), dilation=(2, 1), "
           "groups=2)",
           "described as PyTorch prints it");
    /* bounds: fan_in = 2 * 3 * 2 = 12 */
    const double *w = values_of(t[0]), *b = values_of(t[1]);
    double bound = 1.0 / sqrt(12.0), worst = 0;
    for (int i = 0; w && i < 72; i++)
        worst = fmax(worst, fabs(w[i]));
    for (int i = 0; b && i < 6; i++)
        worst = fmax(worst, fabs(b[i]));
    ok(w && b && worst <= bound, "weight and bias within 1/sqrt(fan_in) (max |v| %g)", worst);

    enum { N = 2, C = 4, H = 5, W = 4 };
    double xv[N * C * H * W];
    fill_values(xv, N * C * H * W, 2);
    weft_tensor *x = tensor_of(xv, (int64_t[]){N, C, H, W}, 4, WEFT_FLOAT32);
    weft_tensor *y = forward(m, x);
    int oh = (H + 2 * 1 - 2 * (3 - 1) - 1) / 2 + 1, ow = (W + 2 * 2 - 1 * (2 - 1) - 1) / 1 + 1;
    ok(same_shape(y, (int64_t[]){N, 6, oh, ow}, 4), "output [2, 6, %d, %d]", oh, ow);
    double want[N * 6 * 3 * 7];
    conv_reference(want, xv, w, b, N, C, H, W, 6, 3, 2, 2, 1, 1, 2, 2, 1, 2, oh, ow);
    check_close(y, want, N * 6 * oh * ow, 1e-5, "Conv2d forward matches a float64 loop");

    /* an unbatched [C, H, W] input gives [cout, oh, ow] */
    weft_tensor *x0 = NULL;
    weft_select(&x0, x, 0, 1);
    keep(x0);
    weft_tensor *y0 = forward(m, x0);
    ok(same_shape(y0, (int64_t[]){6, oh, ow}, 3), "unbatched input gives an unbatched output");
    check_close(y0, want + 6 * oh * ow, 6 * oh * ow, 1e-5, "... with the same numbers");

    /* defaults: stride 1, padding 0, dilation 1 */
    weft_module *plain = NULL;
    is_int(weft_module_conv2d(&plain, 1, 2, (int64_t[]){3, 3}, NULL, NULL, NULL, 1, false, g), 0,
           "Conv2d with default stride, padding, dilation and no bias");
    weft_module_describe(plain, text, sizeof text);
    is_str(text, "Conv2d(1, 2, kernel_size=(3, 3), stride=(1, 1), bias=False)", "its description");
    is_int(weft_module_parameters(plain, NULL, NULL, 0), 1, "... has only a weight");
    weft_module_destroy(plain);
    weft_module_destroy(m);
    weft_generator_destroy(g);
}

/* ------------------------------------------------------------ BatchNorm2d */

static void test_batch_norm(void)
{
    weft_module *m = NULL;
    is_int(weft_module_batch_norm2d(&m, 2, 1e-5, 0.1, true, true), 0, "BatchNorm2d(2)");
    weft_tensor *t[8];
    const char *names[8];
    is_int(weft_module_state(m, t, names, 8), 5, "five state entries");
    static const char *const want_names[] = {"weight", "bias", "running_mean", "running_var",
                                             "num_batches_tracked"};
    bool names_ok = true;
    for (int i = 0; i < 5; i++)
        names_ok = names_ok && strcmp(names[i], want_names[i]) == 0;
    ok(names_ok, "names in state_dict order: weight, bias, running_mean, running_var, "
                 "num_batches_tracked");
    is_int(weft_module_parameters(m, NULL, NULL, 0), 2, "only weight and bias are parameters");
    ok(weft_tensor_dtype(t[4]) == WEFT_INT64 && weft_tensor_ndim(t[4]) == 0,
       "num_batches_tracked is a 0-d int64");
    ok(!weft_tensor_requires_grad(t[2]), "buffers do not require grad");

    enum { N = 3, C = 2, HW = 4 };
    double xv[2][N * C * HW];
    double rm[C] = {0, 0}, rv[C] = {1, 1};
    for (int step = 0; step < 2; step++) {
        fill_values(xv[step], N * C * HW, 10 + step);
        for (int i = 0; i < N * C * HW; i++)
            xv[step][i] = 2 * xv[step][i] + step; /* a mean and variance far from 0 and 1 */
        weft_tensor *x = tensor_of(xv[step], (int64_t[]){N, C, 2, 2}, 4, WEFT_FLOAT32);
        weft_tensor *y = forward(m, x);
        double want[N * C * HW];
        for (int c = 0; c < C; c++) {
            double mean = 0, var = 0;
            for (int i = 0; i < N; i++)
                for (int j = 0; j < HW; j++)
                    mean += xv[step][(i * C + c) * HW + j];
            mean /= N * HW;
            for (int i = 0; i < N; i++)
                for (int j = 0; j < HW; j++)
                    var += pow(xv[step][(i * C + c) * HW + j] - mean, 2);
            for (int i = 0; i < N; i++)
                for (int j = 0; j < HW; j++)
                    want[(i * C + c) * HW + j] =
                        (xv[step][(i * C + c) * HW + j] - mean) / sqrt(var / (N * HW) + 1e-5);
            /* PyTorch: running = (1 - momentum) running + momentum batch, unbiased var */
            rm[c] = 0.9 * rm[c] + 0.1 * mean;
            rv[c] = 0.9 * rv[c] + 0.1 * var / (N * HW - 1);
        }
        check_close(y, want, N * C * HW, 1e-5, "training forward normalises with the batch's "
                                               "biased statistics");
    }
    check_close(state_entry(m, "running_mean"), rm, C, 1e-6,
                "running_mean follows PyTorch's update over two steps");
    check_close(state_entry(m, "running_var"), rv, C, 1e-6,
                "running_var follows it with the unbiased variance");
    double nbt = -1;
    weft_tensor_item(state_entry(m, "num_batches_tracked"), &nbt);
    is_double(nbt, 2, 0, "num_batches_tracked counts the training batches");

    /* eval: the running statistics, and nothing is updated */
    weft_module_train(m, false);
    ok(!weft_module_is_training(m), "eval mode");
    weft_tensor *x = tensor_of(xv[0], (int64_t[]){N, C, 2, 2}, 4, WEFT_FLOAT32);
    weft_tensor *y = forward(m, x);
    double want[N * C * HW];
    for (int i = 0; i < N * C * HW; i++) {
        int c = (i / HW) % C;
        want[i] = (xv[0][i] - rm[c]) / sqrt(rv[c] + 1e-5);
    }
    check_close(y, want, N * C * HW, 1e-5, "eval forward uses the running statistics");
    check_close(state_entry(m, "running_mean"), rm, C, 1e-6, "... and leaves them alone");
    weft_module_destroy(m);

    /* momentum None (NaN): the cumulative average */
    is_int(weft_module_batch_norm2d(&m, 1, 1e-5, NAN, false, true), 0,
           "BatchNorm2d(1, momentum=None, affine=False)");
    is_int(weft_module_parameters(m, NULL, NULL, 0), 0, "affine=False: no parameters");
    char text[160];
    weft_module_describe(m, text, sizeof text);
    is_str(text, "BatchNorm2d(1, eps=1e-05, momentum=None, affine=False, track_running_stats=True)",
           "momentum NaN is described as None");
    double means[2] = {0, 0};
    for (int step = 0; step < 2; step++) {
        double v[4] = {1 + step, 3 + step, 5 + 3 * step, 7};
        means[step] = (v[0] + v[1] + v[2] + v[3]) / 4;
        forward(m, tensor_of(v, (int64_t[]){1, 1, 2, 2}, 4, WEFT_FLOAT32));
    }
    double avg = (means[0] + means[1]) / 2;
    check_close(state_entry(m, "running_mean"), &avg, 1, 1e-6,
                "momentum None averages the batches' means");
    weft_module_destroy(m);

    /* track_running_stats=False: batch statistics in eval too, no buffers */
    is_int(weft_module_batch_norm2d(&m, 2, 1e-5, 0.1, true, false), 0,
           "BatchNorm2d(track_running_stats=False)");
    is_int(weft_module_state(m, NULL, NULL, 0), 2, "no buffers");
    weft_module_train(m, false);
    double v[8] = {1, 2, 3, 4, 10, 10, 10, 14};
    y = forward(m, tensor_of(v, (int64_t[]){1, 2, 2, 2}, 4, WEFT_FLOAT32));
    const double *yv = values_of(y);
    ok(yv && fabs(yv[0] + yv[3]) < 1e-5 && fabs(yv[4] - yv[5]) < 1e-6,
       "eval without running stats normalises with the batch");
    weft_module_destroy(m);
}

/* -------------------------------------------------------------- LayerNorm */

static void test_layer_norm(void)
{
    weft_module *m = NULL;
    int64_t shape[2] = {2, 3};
    is_int(weft_module_layer_norm(&m, shape, 2, 1e-5, true), 0, "LayerNorm((2, 3))");
    weft_tensor *t[2];
    const char *names[2];
    is_int(weft_module_parameters(m, t, names, 2), 2, "weight and bias");
    ok(same_shape(t[0], shape, 2) && same_shape(t[1], shape, 2), "both [2, 3]");
    /* a weight and bias that are not ones and zeros */
    double wv[6] = {1, 2, 0.5, -1, 1.5, 3}, bv[6] = {0, 0.5, -0.5, 1, 2, -2};
    bool mode = weft_set_grad_enabled(false);
    weft_copy_(t[0], tensor_of(wv, shape, 2, WEFT_FLOAT32));
    weft_copy_(t[1], tensor_of(bv, shape, 2, WEFT_FLOAT32));
    weft_set_grad_enabled(mode);
    double xv[4 * 6];
    fill_values(xv, 24, 21);
    weft_tensor *y = forward(m, tensor_of(xv, (int64_t[]){4, 2, 3}, 3, WEFT_FLOAT32));
    double want[24];
    for (int r = 0; r < 4; r++) {
        double mean = 0, var = 0;
        for (int i = 0; i < 6; i++)
            mean += xv[r * 6 + i] / 6;
        for (int i = 0; i < 6; i++)
            var += pow(xv[r * 6 + i] - mean, 2) / 6;
        for (int i = 0; i < 6; i++)
            want[r * 6 + i] = (xv[r * 6 + i] - mean) / sqrt(var + 1e-5) * wv[i] + bv[i];
    }
    check_close(y, want, 24, 1e-5, "LayerNorm forward matches the float64 formula");
    char text[128];
    weft_module_describe(m, text, sizeof text);
    is_str(text, "LayerNorm((2, 3), eps=1e-05, elementwise_affine=True)", "its description");
    weft_module_destroy(m);
}

/* ---------------------------------------------------------------- Dropout */

static void test_dropout(void)
{
    weft_generator *g = NULL;
    weft_generator_create(&g, 99);
    weft_module *m = NULL;
    is_int(weft_module_dropout(&m, 0.25, g), 0, "Dropout(0.25)");
    enum { N = 4000 };
    weft_tensor *x = NULL;
    weft_full(&x, (int64_t[]){N}, 1, 2.0, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(x);
    weft_tensor *y1 = forward(m, x);
    const double *v = values_of(y1);
    int zeros = 0, scaled = 0;
    for (int i = 0; v && i < N; i++) {
        zeros += v[i] == 0;
        scaled += fabs(v[i] - 2.0 / 0.75) < 1e-6;
    }
    is_int(zeros + scaled, N, "training: every element is 0 or x / (1 - p)");
    ok(fabs(zeros / (double)N - 0.25) < 0.03, "about p of them are zeroed (%d of %d)", zeros, N);
    weft_generator_set_seed(g, 99);
    weft_tensor *y2 = forward(m, x);
    const double *v2 = values_of(y2);
    ok(v && v2 && memcmp(v, v2, N * sizeof(double)) == 0, "the generator's seed fixes the mask");
    weft_module_train(m, false);
    weft_tensor *y3 = forward(m, x);
    double twos[N];
    for (int i = 0; i < N; i++)
        twos[i] = 2.0;
    check_close(y3, twos, N, 0, "eval: the identity");
    char text[64];
    weft_module_describe(m, text, sizeof text);
    is_str(text, "Dropout(p=0.25, inplace=False)", "its description");
    weft_module *all = NULL;
    is_int(weft_module_dropout(&all, 1.0, g), 0, "Dropout(1.0)");
    double nothing[N] = {0};
    check_close(forward(all, x), nothing, N, 0, "p = 1 zeroes everything, as PyTorch");
    weft_module_destroy(all);
    weft_module *bad = NULL;
    is_int(weft_module_dropout(&bad, 1.5, NULL), WEFT_EINVAL, "p outside [0, 1] is refused");
    like(weft_last_error(), "Dropout: probability p must be in [0, 1], got 1.5", "... saying why");
    weft_module_destroy(m);
    weft_generator_destroy(g);
}

/* -------------------------------------------------------------- Embedding */

static void test_embedding(void)
{
    weft_module *m = NULL;
    is_int(weft_module_embedding(&m, 5, 3, -1, NULL), 0, "Embedding(5, 3, padding_idx=-1)");
    char text[64];
    weft_module_describe(m, text, sizeof text);
    is_str(text, "Embedding(5, 3, padding_idx=4)", "a negative padding_idx counts from the end");
    weft_tensor *w[1];
    const char *names[1];
    weft_module_parameters(m, w, names, 1);
    const double *wv = values_of(w[0]);
    ok(wv && wv[12] == 0 && wv[13] == 0 && wv[14] == 0, "the padding row is zero");
    double sq = 0;
    for (int i = 0; wv && i < 12; i++)
        sq += wv[i] * wv[i];
    ok(sq > 0, "the other rows are drawn from N(0, 1)");
    weft_tensor *idx = keep_int64((int64_t[]){2, 2}, 2, (int64_t[]){1, 4, 1, 0});
    weft_tensor *y = forward(m, idx);
    ok(same_shape(y, (int64_t[]){2, 2, 3}, 3), "output [2, 2, 3]");
    double want[12];
    int64_t rows[4] = {1, 4, 1, 0};
    for (int i = 0; wv && i < 4; i++)
        for (int j = 0; j < 3; j++)
            want[i * 3 + j] = wv[rows[i] * 3 + j];
    check_close(y, want, 12, 0, "rows looked up by index");
    weft_tensor *s = NULL;
    weft_sum(&s, y, NULL, 0, false);
    keep(s);
    weft_backward(&s, 1, NULL, false, false);
    weft_tensor *gw = NULL;
    weft_tensor_grad(&gw, w[0]);
    keep(gw);
    double gwant[15] = {1, 1, 1, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    check_close(gw, gwant, 15, 0, "gradient counts each row's uses; the padding row gets none");
    weft_tensor *fl = NULL;
    double fv[2] = {0, 1};
    fl = tensor_of(fv, (int64_t[]){2}, 1, WEFT_FLOAT32);
    weft_tensor *bad = NULL;
    is_int(weft_module_forward(m, fl, &bad), WEFT_EDTYPE, "float indices are refused");
    like(weft_last_error(), "Embedding(5, 3, padding_idx=4): expected int64 or int32 indices",
         "... naming the module");
    weft_module_destroy(m);
}

/* -------------------------------------------------- Sequential, gradients */

static weft_module *small_cnn(weft_generator *g)
{
    weft_module *seq = NULL, *c = NULL;
    weft_module_sequential(&seq);
    weft_module_conv2d(&c, 1, 2, (int64_t[]){3, 3}, NULL, (int64_t[]){1, 1}, NULL, 1, true, g);
    weft_module_sequential_append(seq, c);
    weft_module_batch_norm2d(&c, 2, 1e-5, 0.1, true, true);
    weft_module_sequential_append(seq, c);
    weft_module_activation(&c, WEFT_ACTIVATION_RELU);
    weft_module_sequential_append(seq, c);
    weft_module_max_pool2d(&c, (int64_t[]){2, 2}, NULL, NULL);
    weft_module_sequential_append(seq, c);
    weft_module_flatten(&c, 1, -1);
    weft_module_sequential_append(seq, c);
    weft_module_linear(&c, 2 * 2 * 2, 3, true, g);
    weft_module_sequential_append(seq, c);
    return seq;
}

static void test_sequential(void)
{
    weft_generator *g = NULL;
    weft_generator_create(&g, 1);
    weft_module *seq = small_cnn(g);
    weft_tensor *t[16];
    const char *names[16];
    is_int(weft_module_state(seq, t, names, 16), 9, "nine state entries");
    static const char *const want[] = {"0.weight",       "0.bias",
                                       "1.weight",       "1.bias",
                                       "1.running_mean", "1.running_var",
                                       "1.num_batches_tracked", "5.weight", "5.bias"};
    bool names_ok = true;
    for (int i = 0; i < 9; i++)
        names_ok = names_ok && strcmp(names[i], want[i]) == 0;
    ok(names_ok, "state names are PyTorch's state_dict keys (0.weight ... 5.bias)");
    is_int(weft_module_parameters(seq, t, names, 16), 6, "six parameters");
    is_str(names[5], "5.bias", "the last parameter is 5.bias");

    double xv[2 * 16];
    fill_values(xv, 32, 4);
    weft_tensor *x = tensor_of(xv, (int64_t[]){2, 1, 4, 4}, 4, WEFT_FLOAT32);
    weft_tensor *y = forward(seq, x);
    ok(same_shape(y, (int64_t[]){2, 3}, 2), "Sequential forward gives [2, 3]");
    weft_tensor *s = NULL;
    weft_sum(&s, y, NULL, 0, false);
    keep(s);
    is_int(weft_backward(&s, 1, NULL, false, false), 0, "backward through the Sequential");
    bool grads_ok = true;
    for (int i = 0; i < 6; i++) {
        weft_tensor *gr = NULL;
        weft_tensor_grad(&gr, t[i]);
        grads_ok = grads_ok && gr && weft_tensor_ndim(gr) == weft_tensor_ndim(t[i]) &&
                   weft_tensor_numel(gr) == weft_tensor_numel(t[i]);
        weft_tensor_release(gr);
    }
    ok(grads_ok, "every parameter has a gradient of its shape");

    /* train/eval reaches the children */
    weft_module_train(seq, false);
    weft_tensor *bn_mean = state_entry(seq, "1.running_mean");
    const double *before = values_of(bn_mean);
    double keep_mean[2] = {before ? before[0] : 0, before ? before[1] : 0};
    forward(seq, x);
    check_close(bn_mean, keep_mean, 2, 0, "eval mode reaches the BatchNorm2d inside");

    /* save, load into a model initialised differently, same outputs */
    char path[] = "/tmp/weft-nnmod-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    is_int(weft_module_save(seq, path), 0, "save the Sequential");
    weft_generator_set_seed(g, 77);
    weft_module *other = small_cnn(g);
    weft_module_train(other, false);
    weft_tensor *y_seq = forward(seq, x);
    weft_tensor *y_before = forward(other, x);
    const double *a = values_of(y_seq), *b = values_of(y_before);
    ok(a && b && memcmp(a, b, 6 * sizeof(double)) != 0, "a model from another seed differs");
    is_int(weft_module_load(other, path), 0, "load into it");
    weft_tensor *y_after = forward(other, x);
    check_close(y_after, values_of(y_seq), 6, 0, "... and it computes the same numbers");
    double nbt = 0;
    weft_tensor_item(state_entry(other, "1.num_batches_tracked"), &nbt);
    is_double(nbt, 1, 0, "num_batches_tracked came with the file");

    /* a file of another architecture is refused and changes nothing */
    weft_module *lin = NULL;
    weft_module_linear(&lin, 8, 3, true, g);
    is_int(weft_module_load(lin, path), WEFT_ENOTFOUND, "a Linear cannot load the CNN's file");
    like(weft_last_error(), "weight", "... the message names a tensor");
    weft_module_destroy(lin);
    unlink(path);

    /* append errors */
    weft_module *child = NULL;
    weft_module_activation(&child, WEFT_ACTIVATION_TANH);
    weft_module *seq2 = NULL;
    weft_module_sequential(&seq2);
    weft_module_sequential_append(seq2, child);
    is_int(weft_module_sequential_append(seq, child), WEFT_EINVAL,
           "a child that already has a parent is refused");
    like(weft_last_error(), "Tanh already has a parent", "... saying so");
    is_int(weft_module_sequential_append(seq, NULL), WEFT_EINVAL, "a NULL child is refused");
    weft_module *outer = NULL, *inner = NULL;
    weft_module_sequential(&outer);
    weft_module_sequential(&inner);
    weft_module_sequential_append(outer, inner);
    is_int(weft_module_sequential_append(inner, outer), WEFT_EINVAL,
           "a Sequential cannot go inside its own child");
    like(weft_last_error(), "cannot append a Sequential to itself or to a module inside it",
         "... saying so");
    is_int(weft_module_sequential_append(outer, outer), WEFT_EINVAL, "nor inside itself");
    weft_module_destroy(outer);
    weft_module_destroy(seq2);
    weft_module_destroy(other);
    weft_module_destroy(seq);
    weft_generator_destroy(g);
}

/* gradcheck: the module's parameters are passed as inputs too, so the
 * checker perturbs them; the function ignores inputs[1..] because the
 * module reads the same tensors. */
static int module_fn(weft_tensor **out, weft_tensor *const *inputs, int n, void *ctx)
{
    (void)n;
    return weft_module_forward(ctx, inputs[0], out);
}

static void gradcheck_module(weft_module *m, const int64_t *xsizes, int nd, const char *what)
{
    is_int(weft_module_to_dtype(m, WEFT_FLOAT64), 0, "%s in float64", what);
    weft_tensor *in[8];
    const char *names[8];
    int n = weft_module_parameters(m, in + 1, names, 7);
    int64_t numel = 1;
    for (int i = 0; i < nd; i++)
        numel *= xsizes[i];
    double xv[64];
    fill_values(xv, (int)numel, 31);
    in[0] = tensor_of(xv, xsizes, nd, WEFT_FLOAT64);
    weft_tensor_set_requires_grad(in[0], true);
    int rc = weft_gradcheck(module_fn, m, in, n + 1, 1e-6, 1e-5, 1e-4);
    if (!ok(rc == 0, "gradcheck of %s (input and %d parameters)", what, n))
        diag("%s", weft_last_error());
    weft_module_destroy(m);
}

static void test_gradcheck(void)
{
    weft_module *m = NULL;
    weft_module_linear(&m, 3, 2, true, NULL);
    gradcheck_module(m, (int64_t[]){2, 3}, 2, "Linear(3, 2)");
    weft_module_conv2d(&m, 2, 2, (int64_t[]){2, 2}, (int64_t[]){1, 2}, (int64_t[]){1, 0}, NULL, 2,
                       true, NULL);
    gradcheck_module(m, (int64_t[]){1, 2, 3, 4}, 4, "Conv2d(2, 2, (2, 2), groups 2)");
    weft_module_layer_norm(&m, (int64_t[]){3}, 1, 1e-5, true);
    gradcheck_module(m, (int64_t[]){2, 3}, 2, "LayerNorm(3)");
    weft_module_batch_norm2d(&m, 2, 1e-5, 0.1, true, false);
    gradcheck_module(m, (int64_t[]){2, 2, 2, 2}, 4, "BatchNorm2d(2) in training mode");
}

/* ---------------------------------------------------------- bad inputs */

static void test_bad_inputs(void)
{
    weft_module *m = NULL;
    weft_tensor *y = NULL;
    double v[24] = {0};
    weft_module_linear(&m, 4, 2, true, NULL);
    weft_tensor *x = tensor_of(v, (int64_t[]){2, 3}, 2, WEFT_FLOAT32);
    is_int(weft_module_forward(m, x, &y), WEFT_ESHAPE, "Linear(4, 2) on [2, 3]");
    like(weft_last_error(),
         "Linear(in_features=4, out_features=2, bias=True): expected an input whose last "
         "dimension is 4, got an input of shape [2, 3]",
         "... the message names the module and both shapes");
    ok(y == NULL, "... and *out is NULL");
    weft_module_destroy(m);

    weft_module_conv2d(&m, 3, 4, (int64_t[]){3, 3}, NULL, NULL, NULL, 1, true, NULL);
    is_int(weft_module_forward(m, x, &y), WEFT_ESHAPE, "Conv2d on a 2-d input");
    like(weft_last_error(), "Conv2d(3, 4, kernel_size=(3, 3), stride=(1, 1)): expected a 4-d input "
                            "[N, 3, H, W] (or 3-d [3, H, W]), got an input of shape [2, 3]",
         "... names the module and the shapes");
    weft_tensor *x4 = tensor_of(v, (int64_t[]){1, 2, 3, 4}, 4, WEFT_FLOAT32);
    is_int(weft_module_forward(m, x4, &y), WEFT_ESHAPE, "Conv2d(3, ...) on 2 channels");
    like(weft_last_error(), "got an input of shape [1, 2, 3, 4]", "... names the shape");
    weft_module_destroy(m);

    weft_module_batch_norm2d(&m, 3, 1e-5, 0.1, true, true);
    is_int(weft_module_forward(m, x4, &y), WEFT_ESHAPE, "BatchNorm2d(3) on 2 channels");
    like(weft_last_error(), "BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=True, "
                            "track_running_stats=True): expected a 4-d input [N, 3, H, W]",
         "... names the module");
    weft_module_destroy(m);

    weft_module_layer_norm(&m, (int64_t[]){5}, 1, 1e-5, true);
    is_int(weft_module_forward(m, x4, &y), WEFT_ESHAPE, "LayerNorm((5,)) on [..., 4]");
    like(weft_last_error(), "LayerNorm((5,), eps=1e-05", "... names the module");
    weft_module_destroy(m);

    /* constructors */
    is_int(weft_module_linear(&m, 0, 2, true, NULL), WEFT_EINVAL, "Linear(0, 2) is refused");
    ok(m == NULL, "... *out is NULL");
    is_int(weft_module_conv2d(&m, 3, 4, (int64_t[]){3, 3}, NULL, NULL, NULL, 2, true, NULL),
           WEFT_EINVAL, "Conv2d(3, 4, groups=2) is refused");
    like(weft_last_error(), "must be divisible by groups (2)", "... saying why");
    is_int(weft_module_conv2d(&m, 3, 4, NULL, NULL, NULL, NULL, 1, true, NULL), WEFT_EINVAL,
           "Conv2d without kernel_size is refused");
    is_int(weft_module_batch_norm2d(&m, 2, 1e-5, 1.5, true, true), WEFT_EINVAL,
           "BatchNorm2d momentum 1.5 is refused");
    is_int(weft_module_embedding(&m, 5, 3, 5, NULL), WEFT_EINVAL,
           "Embedding padding_idx out of range is refused");
    is_int(weft_module_activation(&m, (weft_activation)9), WEFT_EINVAL, "unknown activation");
    is_int(weft_module_forward(NULL, x, &y), WEFT_EINVAL, "forward of NULL");
    is_int(weft_module_parameters(NULL, NULL, NULL, 0), WEFT_EINVAL, "parameters of NULL");
    weft_module_destroy(NULL);
}

/* --------------------------------------------------------------- moving */

static void test_moving(void)
{
    weft_module *seq = NULL, *c = NULL;
    weft_module_sequential(&seq);
    weft_module_linear(&c, 3, 2, true, NULL);
    weft_module_sequential_append(seq, c);
    weft_module_batch_norm2d(&c, 2, 1e-5, 0.1, true, true);
    weft_module_sequential_append(seq, c);
    weft_tensor *t[8];
    const char *names[8];
    weft_module_state(seq, t, names, 8);
    const double *before = values_of(t[0]);
    is_int(weft_module_to_dtype(seq, WEFT_FLOAT64), 0, "to float64");
    weft_module_state(seq, t, names, 8);
    ok(weft_tensor_dtype(t[0]) == WEFT_FLOAT64 && weft_tensor_dtype(t[4]) == WEFT_FLOAT64,
       "parameters and running statistics are float64");
    ok(weft_tensor_dtype(t[6]) == WEFT_INT64, "num_batches_tracked stays int64");
    ok(weft_tensor_is_leaf(t[0]) && weft_tensor_requires_grad(t[0]) &&
           !weft_tensor_requires_grad(t[4]),
       "parameters are leaves that require grad, buffers are not");
    check_close(t[0], before, 6, 1e-7, "values kept");
    is_str(names[0], "0.weight", "names kept");
    is_int(weft_module_to_dtype(seq, WEFT_INT32), WEFT_EDTYPE, "to int32 is refused");
    /* a child enumerated on its own sees the tensors its parent's move made */
    weft_module *first = NULL;
    weft_tensor *ct[2];
    const char *cn[2];
    weft_module_sequential(&first);
    weft_module_linear(&c, 2, 2, true, NULL);
    weft_module_sequential_append(first, c);
    weft_module_parameters(c, ct, cn, 2);
    weft_module_to_dtype(first, WEFT_FLOAT64);
    weft_module_parameters(c, ct, cn, 2);
    ok(weft_tensor_dtype(ct[0]) == WEFT_FLOAT64, "a child's own list follows its parent's move");
    weft_module_destroy(first);
    is_int(weft_module_to_device(seq, WEFT_DEVICE_CPU), 0, "to the CPU (already there)");
    weft_module_destroy(seq);
}

/* Moving to another device: a fake device whose memory is host memory
 * (it has no kernels, so only the moves are checked here). */
static void test_device_move(void)
{
    weft_registrar *reg = NULL;
    weft_registrar_create(&reg, "test_nn_modules");
    int type = -1;
    is_int(weft_register_device_type(reg, "nnfake", &host_device_iface, &host_device_alloc, &type), 0,
           "register a fake device");
    weft_device fake = {(int16_t)type, 1};
    weft_module *seq = NULL, *c = NULL;
    weft_module_sequential(&seq);
    weft_module_conv2d(&c, 1, 2, (int64_t[]){3, 3}, NULL, NULL, NULL, 1, true, NULL);
    weft_module_sequential_append(seq, c);
    weft_module_batch_norm2d(&c, 2, 1e-5, 0.1, true, true);
    weft_module_sequential_append(seq, c);
    weft_tensor *t[8];
    const char *names[8];
    int n = weft_module_state(seq, t, names, 8);
    double before[18];
    const double *w = values_of(t[0]);
    if (w)
        memcpy(before, w, sizeof before);
    is_int(weft_module_to_device(seq, fake), 0, "Sequential to nnfake:1");
    is_int(weft_module_state(seq, t, names, 8), n, "the same entries");
    bool all_there = true;
    for (int i = 0; i < n; i++)
        all_there = all_there && weft_device_equal(weft_tensor_device(t[i]), fake);
    ok(all_there, "every parameter and buffer is on nnfake:1");
    ok(weft_tensor_is_leaf(t[0]) && weft_tensor_requires_grad(t[0]),
       "the moved weight is a leaf that requires grad");
    is_int(weft_module_to_device(seq, WEFT_DEVICE_CPU), 0, "and back to the CPU");
    weft_module_state(seq, t, names, 8);
    check_close(t[0], before, 18, 0, "the weight's values made the round trip");
    weft_module_destroy(seq);
    weft_registrar_destroy(reg);
}

int main(void)
{
    if (weft_load_default_plugins() < 0)
        skip_all("no plugins: %s", weft_last_error());
    test_linear();
    drop_all();
    test_conv2d();
    drop_all();
    test_batch_norm();
    drop_all();
    test_layer_norm();
    drop_all();
    test_dropout();
    drop_all();
    test_embedding();
    drop_all();
    test_sequential();
    drop_all();
    test_gradcheck();
    drop_all();
    test_bad_inputs();
    drop_all();
    test_moving();
    drop_all();
    test_device_move();
    drop_all();
    return done_testing();
}
