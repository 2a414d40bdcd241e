/* tests/test_nn_norm.c — the fused batch_norm and layer_norm kernels
 * (backends/cpu/nn_norm.c): float32 and float64 results against float64
 * references written here (sizes that leave vector remainders), the
 * running statistics, the fused backward operators against the reference
 * gradients, first and second derivatives against finite differences
 * (gradcheck, gradgradcheck), and the bad-input paths. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <weft/weft.h>

#include "tests/tap.h"
#include "tests/keep.h"

static uint64_t lcg = 4242;
static double uniform(double lo, double hi)
{
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (hi - lo) * (double)(lcg >> 11) / 9007199254740992.0;
}

/* a kept tensor of dtype with random values; its float64 values in ref */
static weft_tensor *rnd(weft_dtype dtype, const int64_t *sizes, int nd, double lo, double hi,
                        double *ref)
{
    weft_tensor *f = NULL, *t = NULL;
    if (weft_empty(&f, sizes, nd, WEFT_FLOAT64, WEFT_DEVICE_CPU) != 0)
        return NULL;
    double *p = weft_tensor_data_ptr(f);
    for (int64_t i = 0; i < weft_tensor_numel(f); i++) {
        p[i] = uniform(lo, hi);
        if (dtype == WEFT_FLOAT32)
            p[i] = (float)p[i];
        if (ref)
            ref[i] = p[i];
    }
    if (dtype == WEFT_FLOAT64)
        return keep(f);
    weft_to_dtype(&t, f, dtype);
    weft_tensor_release(f);
    return keep(t);
}

/* batch_norm's output, batch mean and biased variance per channel */
static void ref_batch_norm(const double *x, const double *w, const double *b, int64_t N,
                           int64_t C, int64_t S, double eps, double *y, double *mean, double *var)
{
    for (int64_t c = 0; c < C; c++) {
        double s = 0, q = 0, M = (double)(N * S);
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < S; i++)
                s += x[(n * C + c) * S + i];
        double m = s / M;
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < S; i++) {
                double d = x[(n * C + c) * S + i] - m;
                q += d * d;
            }
        mean[c] = m;
        var[c] = q / M;
        double r = 1 / sqrt(var[c] + eps);
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < S; i++) {
                int64_t at = (n * C + c) * S + i;
                y[at] = (x[at] - m) * r * (w ? w[c] : 1) + (b ? b[c] : 0);
            }
    }
}

/* reference batch_norm gradients (training): gx, gw, gb */
static void ref_batch_norm_backward(const double *g, const double *x, const double *w, int64_t N,
                                    int64_t C, int64_t S, double eps, double *gx, double *gw,
                                    double *gb)
{
    double M = (double)(N * S);
    for (int64_t c = 0; c < C; c++) {
        double s = 0, q = 0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < S; i++)
                s += x[(n * C + c) * S + i];
        double m = s / M;
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < S; i++) {
                double d = x[(n * C + c) * S + i] - m;
                q += d * d;
            }
        double r = 1 / sqrt(q / M + eps), sg = 0, sgxh = 0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < S; i++) {
                int64_t at = (n * C + c) * S + i;
                sg += g[at];
                sgxh += g[at] * (x[at] - m) * r;
            }
        gw[c] = sgxh;
        gb[c] = sg;
        double wc = w ? w[c] : 1;
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < S; i++) {
                int64_t at = (n * C + c) * S + i;
                double xh = (x[at] - m) * r;
                gx[at] = wc * r * (g[at] - sg / M - xh * sgxh / M);
            }
    }
}

static void test_batch_norm_values(weft_dtype dtype, double tol)
{
    const char *dn = weft_dtype_name(dtype);
    enum { N = 3, C = 5, H = 7, W = 5, S = H * W, NUMEL = N * C * S };
    int64_t sizes[4] = {N, C, H, W}, c = C;
    static double x[NUMEL], g[NUMEL], w[C], b[C], y[NUMEL], mean[C], var[C];
    static double gx[NUMEL], gw[C], gb[C], rm[C], rv[C];
    weft_tensor *tx = rnd(dtype, sizes, 4, -2, 3, x), *tw = rnd(dtype, &c, 1, 0.5, 1.5, w);
    weft_tensor *tb = rnd(dtype, &c, 1, -1, 1, b), *tg = rnd(dtype, sizes, 4, -1, 1, g);
    weft_tensor *trm = rnd(dtype, &c, 1, -0.5, 0.5, rm), *trv = rnd(dtype, &c, 1, 0.5, 2, rv);
    ref_batch_norm(x, w, b, N, C, S, 1e-5, y, mean, var);
    weft_tensor *out = NULL;
    ok(weft_batch_norm(&out, tx, tw, tb, trm, trv, true, 0.1, 1e-5) == 0,
       "%s batch_norm training runs", dn);
    check_close(keep(out), y, NUMEL, tol, "  its output");
    double rm_want[C], rv_want[C];
    for (int i = 0; i < C; i++) {
        rm_want[i] = 0.9 * rm[i] + 0.1 * mean[i];
        rv_want[i] = 0.9 * rv[i] + 0.1 * var[i] * NUMEL / C / (NUMEL / C - 1.0);
    }
    check_close(trm, rm_want, C, tol, "  running_mean updated with momentum 0.1");
    check_close(trv, rv_want, C, tol, "  running_var updated with the unbiased variance");
    /* eval: the running statistics */
    const double *rmv = values_of(trm), *rvv = values_of(trv);
    double ye[NUMEL];
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < C; k++)
            for (int64_t i = 0; i < S; i++) {
                int64_t at = (n * C + k) * S + i;
                ye[at] = (x[at] - rmv[k]) / sqrt(rvv[k] + 1e-5) * w[k] + b[k];
            }
    ok(weft_batch_norm(&out, tx, tw, tb, trm, trv, false, 0.1, 1e-5) == 0,
       "%s batch_norm eval runs", dn);
    check_close(keep(out), ye, NUMEL, tol, "  it normalises with the running statistics");
    /* no parameters, no running statistics */
    ref_batch_norm(x, NULL, NULL, N, C, S, 1e-3, y, mean, var);
    ok(weft_batch_norm(&out, tx, NULL, NULL, NULL, NULL, false, 0.1, 1e-3) == 0,
       "%s batch_norm without parameters or running statistics", dn);
    check_close(keep(out), y, NUMEL, tol, "  uses the batch statistics");
    /* the fused backward operator */
    weft_tensor *sm = NULL, *si = NULL, *r[3] = {NULL, NULL, NULL};
    ok(weft_native_batch_norm(&out, &sm, &si, tx, tw, tb, NULL, NULL, true, 0.1, 1e-5) == 0,
       "%s native_batch_norm returns the saved statistics", dn);
    keep(out), keep(sm), keep(si);
    ref_batch_norm(x, w, b, N, C, S, 1e-5, y, mean, var);
    double inv[C];
    for (int i = 0; i < C; i++)
        inv[i] = 1 / sqrt(var[i] + 1e-5);
    check_close(sm, mean, C, tol, "  save_mean");
    check_close(si, inv, C, tol, "  save_invstd");
    ok(weft_native_batch_norm_backward(&r[0], &r[1], &r[2], tg, tx, tw, sm, si, true) == 0,
       "%s native_batch_norm_backward runs", dn);
    keep(r[0]), keep(r[1]), keep(r[2]);
    ref_batch_norm_backward(g, x, w, N, C, S, 1e-5, gx, gw, gb);
    check_close(r[0], gx, NUMEL, tol * 10, "  grad_input");
    check_close(r[1], gw, C, tol * 10, "  grad_weight");
    check_close(r[2], gb, C, tol * 10, "  grad_bias");
}

static void test_layer_norm_values(weft_dtype dtype, double tol)
{
    const char *dn = weft_dtype_name(dtype);
    enum { A = 3, B = 4, D1 = 5, D2 = 9, D = D1 * D2, ROWS = A * B, NUMEL = ROWS * D };
    int64_t sizes[4] = {A, B, D1, D2}, ns[2] = {D1, D2};
    static double x[NUMEL], g[NUMEL], w[D], b[D], y[NUMEL], gx[NUMEL], gw[D], gb[D];
    weft_tensor *tx = rnd(dtype, sizes, 4, -2, 3, x), *tw = rnd(dtype, ns, 2, 0.5, 1.5, w);
    weft_tensor *tb = rnd(dtype, ns, 2, -1, 1, b), *tg = rnd(dtype, sizes, 4, -1, 1, g);
    memset(gw, 0, sizeof gw);
    memset(gb, 0, sizeof gb);
    for (int64_t row = 0; row < ROWS; row++) {
        const double *xr = x + row * D, *gr = g + row * D;
        double m = 0, q = 0;
        for (int i = 0; i < D; i++)
            m += xr[i] / D;
        for (int i = 0; i < D; i++)
            q += (xr[i] - m) * (xr[i] - m) / D;
        double r = 1 / sqrt(q + 1e-5), A1 = 0, B1 = 0;
        for (int i = 0; i < D; i++) {
            double xh = (xr[i] - m) * r;
            y[row * D + i] = xh * w[i] + b[i];
            A1 += w[i] * gr[i] / D;
            B1 += w[i] * gr[i] * xh / D;
            gw[i] += gr[i] * xh;
            gb[i] += gr[i];
        }
        for (int i = 0; i < D; i++)
            gx[row * D + i] = r * (w[i] * gr[i] - A1 - (xr[i] - m) * r * B1);
    }
    weft_tensor *out = NULL, *mean = NULL, *rstd = NULL, *r[3] = {NULL, NULL, NULL};
    ok(weft_layer_norm(&out, tx, ns, 2, tw, tb, 1e-5) == 0, "%s layer_norm over [5, 9]", dn);
    check_close(keep(out), y, NUMEL, tol, "  its output");
    ok(weft_native_layer_norm(&out, &mean, &rstd, tx, ns, 2, tw, tb, 1e-5) == 0,
       "%s native_layer_norm runs", dn);
    keep(out), keep(mean), keep(rstd);
    is_int(weft_tensor_ndim(mean), 4, "  mean keeps the input's rank");
    is_int(weft_tensor_size(mean, 1) * 10 + weft_tensor_size(mean, 3), 41,
           "  with the leading dims and 1 for the normalised ones");
    ok(weft_native_layer_norm_backward(&r[0], &r[1], &r[2], tg, tx, ns, 2, mean, rstd, tw) == 0,
       "%s native_layer_norm_backward runs", dn);
    keep(r[0]), keep(r[1]), keep(r[2]);
    check_close(r[0], gx, NUMEL, tol * 10, "  grad_input");
    check_close(r[1], gw, D, tol * 10, "  grad_weight");
    check_close(r[2], gb, D, tol * 10, "  grad_bias");
    is_int(weft_tensor_ndim(r[1]), 2, "  grad_weight is shaped like normalized_shape");
}

/* ---------------------------------------------------------- derivatives */

enum { BN_TRAIN, BN_TRAIN_NOPARAMS, BN_EVAL, LN, LN_NOPARAMS };
static weft_tensor *running[2];

static int norm_fn(weft_tensor **out, weft_tensor *const *in, int n, void *ctx)
{
    (void)n;
    switch ((int)(intptr_t)ctx) {
    case BN_TRAIN:
        return weft_batch_norm(out, in[0], in[1], in[2], NULL, NULL, true, 0.1, 1e-5);
    case BN_TRAIN_NOPARAMS:
        return weft_batch_norm(out, in[0], NULL, NULL, NULL, NULL, true, 0.1, 1e-5);
    case BN_EVAL:
        return weft_batch_norm(out, in[0], in[1], in[2], running[0], running[1], false, 0.1, 1e-5);
    case LN:
        return weft_layer_norm(out, in[0], (int64_t[]){2, 3}, 2, in[1], in[2], 1e-5);
    default:
        return weft_layer_norm(out, in[0], (int64_t[]){3}, 1, NULL, NULL, 1e-5);
    }
}

static void test_derivatives(void)
{
    int64_t bx[3] = {3, 2, 3}, c = 2, lx[3] = {2, 2, 3}, ls[2] = {2, 3};
    running[0] = rnd(WEFT_FLOAT64, &c, 1, -0.5, 0.5, NULL);
    running[1] = rnd(WEFT_FLOAT64, &c, 1, 0.5, 2, NULL);
    struct {
        int kind;
        const char *name;
        int n;
    } cases[] = {{BN_TRAIN, "batch_norm training", 3},
                 {BN_TRAIN_NOPARAMS, "batch_norm training without weight and bias", 1},
                 {BN_EVAL, "batch_norm eval", 3},
                 {LN, "layer_norm over [2, 3]", 3},
                 {LN_NOPARAMS, "layer_norm over [3] without weight and bias", 1}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        bool bn = cases[k].kind <= BN_EVAL;
        weft_tensor *in[3] = {rnd(WEFT_FLOAT64, bn ? bx : lx, 3, -1, 2, NULL),
                              rnd(WEFT_FLOAT64, bn ? &c : ls, bn ? 1 : 2, 0.5, 1.5, NULL),
                              rnd(WEFT_FLOAT64, bn ? &c : ls, bn ? 1 : 2, -1, 1, NULL)};
        for (int i = 0; i < cases[k].n; i++)
            weft_tensor_set_requires_grad(in[i], true);
        void *ctx = (void *)(intptr_t)cases[k].kind;
        int rc = weft_gradcheck(norm_fn, ctx, in, cases[k].n, 1e-6, 1e-6, 1e-4);
        if (!ok(rc == 0, "gradcheck: %s", cases[k].name))
            diag("%s", weft_last_error());
        rc = weft_gradgradcheck(norm_fn, ctx, in, cases[k].n, 1e-6, 1e-5, 1e-3);
        if (!ok(rc == 0, "gradgradcheck: %s", cases[k].name))
            diag("%s", weft_last_error());
    }
}

/* ---------------------------------------------------------- bad input */

static void test_errors(void)
{
    int64_t sizes[3] = {2, 3, 4}, three = 3, two = 2, ns[1] = {4};
    weft_tensor *x = rnd(WEFT_FLOAT32, sizes, 3, 0, 1, NULL), *c3 = rnd(WEFT_FLOAT32, &three, 1, 0, 1, NULL);
    weft_tensor *c2 = rnd(WEFT_FLOAT32, &two, 1, 0, 1, NULL), *v = rnd(WEFT_FLOAT32, &three, 1, 0, 1, NULL);
    weft_tensor *out = NULL, *m = NULL, *s = NULL, *r[3] = {NULL, NULL, NULL};
    error_is(weft_batch_norm(&out, x, c2, NULL, NULL, NULL, true, 0.1, 1e-5), WEFT_ESHAPE, NULL,
             "batch_norm with 2 weights for 3 channels");
    like(weft_last_error(), "weight", "  the message names the weight");
    error_is(weft_batch_norm(&out, v, NULL, NULL, NULL, NULL, true, 0.1, 1e-5), WEFT_ESHAPE, NULL,
             "batch_norm of a 1-D input");
    weft_tensor *single = NULL;
    weft_empty(&single, (int64_t[]){1, 3}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(single);
    error_is(weft_batch_norm(&out, single, NULL, NULL, NULL, NULL, true, 0.1, 1e-5), WEFT_EINVAL, NULL,
             "batch_norm training with one value per channel");
    weft_tensor *ix = NULL;
    weft_zeros(&ix, sizes, 3, WEFT_INT64, WEFT_DEVICE_CPU);
    keep(ix);
    error_is(weft_batch_norm(&out, ix, NULL, NULL, NULL, NULL, true, 0.1, 1e-5), WEFT_EDTYPE, NULL,
             "batch_norm of an integer input");
    error_is(weft_native_batch_norm_backward(&r[0], &r[1], &r[2], v, x, NULL, c3, c3, true),
             WEFT_ESHAPE, NULL, "native_batch_norm_backward with a grad_out of another shape");
    ok(r[0] == NULL && r[1] == NULL && r[2] == NULL, "  and leaves no partial results");
    error_is(weft_native_batch_norm_backward(&r[0], &r[1], &r[2], x, x, NULL, c2, c3, true),
             WEFT_ESHAPE, NULL, "native_batch_norm_backward with 2 saved means for 3 channels");
    error_is(weft_layer_norm(&out, x, &three, 1, NULL, NULL, 1e-5), WEFT_ESHAPE, NULL,
             "layer_norm with normalized_shape [3] for last dim 4");
    error_is(weft_layer_norm(&out, x, ns, 1, c3, NULL, 1e-5), WEFT_ESHAPE, NULL,
             "layer_norm with 3 weights for 4 normalised elements");
    error_is(weft_native_layer_norm(&out, &m, &s, x, ns, 0, NULL, NULL, 1e-5), WEFT_ESHAPE, NULL,
             "native_layer_norm with an empty normalized_shape");
    ok(out == NULL && m == NULL && s == NULL, "  and leaves no partial results");
    error_is(weft_native_layer_norm_backward(&r[0], &r[1], &r[2], x, x, ns, 1, c3, c3, NULL),
             WEFT_ESHAPE, NULL, "native_layer_norm_backward with 3 means for 6 rows");
}

int main(void)
{
    int loaded = weft_load_default_plugins();
    if (loaded < 0)
        skip_all("no CPU plugin: %s", weft_last_error());
    test_batch_norm_values(WEFT_FLOAT32, 2e-5);
    test_batch_norm_values(WEFT_FLOAT64, 1e-12);
    test_layer_norm_values(WEFT_FLOAT32, 2e-5);
    test_layer_norm_values(WEFT_FLOAT64, 1e-12);
    test_derivatives();
    test_errors();
    drop_all();
    return done_testing();
}
