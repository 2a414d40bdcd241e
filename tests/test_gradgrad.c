/* tests/test_gradgrad.c — double backward: gradgradcheck (finite
 * differences of the gradient, in float64) through the NN operators
 * (convolution, pooling, softmax, the losses, activations, linear) and the
 * matrix, reduction and scalar families; and, for the operators whose
 * formula switches to a composition under create_graph, that both forms
 * give the same first gradient. */
#include <stdint.h>
#include <stdlib.h>

#include <weft/weft.h>

#include "tests/tap.h"
#include "tests/keep.h"

static weft_tensor *leaf(const int64_t *sizes, int ndim, double start, double step)
{
    weft_tensor *t = NULL;
    weft_empty(&t, sizes, ndim, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    double *p = weft_tensor_data_ptr(t);
    /* uneven values, away from ties (max_pool) and kinks (relu) */
    for (int64_t i = 0; i < weft_tensor_numel(t); i++)
        p[i] = start + step * (double)((i * 7) % 11) + 0.013 * (double)i;
    weft_tensor_set_requires_grad(t, true);
    return keep(t);
}

typedef enum {
    G_CONV, G_CONV_STRIDED, G_MAXPOOL, G_MAXPOOL_PAD, G_AVGPOOL, G_AVGPOOL_PAD, G_ADAPTIVE, G_SOFTMAX,
    G_LOG_SOFTMAX, G_CE_MEAN, G_CE_WEIGHTED, G_CE_NONE_4D, G_CE_PROBS, G_NLL_MEAN, G_NLL_NONE,
    G_NLL_OF_LOG_SOFTMAX, G_MSE, G_RELU, G_SIGMOID, G_TANH, G_LINEAR, G_MM, G_BMM, G_SUM,
    G_MEAN, G_SCALARS, G_COUNT
} gid;

static const char *const names[G_COUNT] = {
    "conv2d with bias", "conv2d stride 2, padding 1, dilation 2, groups 2", "max_pool2d",
    "max_pool2d kernel 3, stride 2, padding 1, ceil_mode, on [C,H,W]",
    "avg_pool2d", "avg_pool2d padding 1, ceil_mode, count_include_pad off", "adaptive_avg_pool2d",
    "softmax", "log_softmax", "cross_entropy mean", "cross_entropy weight, ignore_index, smoothing",
    "cross_entropy none on [N,C,H,W]", "cross_entropy class probabilities, smoothing",
    "nll_loss mean", "nll_loss none with weight", "nll_loss(log_softmax)", "mse_loss", "relu",
    "sigmoid", "tanh", "linear", "mm", "bmm", "sum over dims", "mean", "add/mul/div by scalars"};

static weft_tensor *targets2, *targets4, *weight3, *probs;

static int apply(weft_tensor **out, weft_tensor *const *in, int n, void *ctx)
{
    (void)n;
    gid id = (gid)(intptr_t)ctx;
    weft_tensor *a = in[0], *b = n > 1 ? in[1] : NULL, *c = n > 2 ? in[2] : NULL, *t = NULL,
                *u = NULL;
    int64_t one[1] = {1}, two[1] = {2}, zero[1] = {0}, k2[1] = {2}, k3[1] = {3};
    int rc;
    switch (id) {
    case G_CONV: return weft_conv2d(out, a, b, c, one, 1, zero, 1, one, 1, 1);
    case G_CONV_STRIDED: return weft_conv2d(out, a, b, NULL, two, 1, one, 1, two, 1, 2);
    case G_MAXPOOL: return weft_max_pool2d(out, a, k2, 1, one, 1, zero, 1, one, 1, false);
    case G_MAXPOOL_PAD: {
        weft_tensor *sq = NULL;
        int64_t chw[3] = {2, 4, 5};
        rc = weft_reshape(&t, a, chw, 3);
        if (rc == 0)
            rc = weft_max_pool2d(&u, t, k3, 1, two, 1, one, 1, one, 1, true);
        if (rc == 0)
            rc = weft_mul(&sq, u, u);
        if (rc == 0)
            *out = sq;
        weft_tensor_release(t);
        weft_tensor_release(u);
        return rc;
    }
    case G_AVGPOOL: return weft_avg_pool2d(out, a, k2, 1, one, 1, zero, 1, false, true, NULL);
    case G_AVGPOOL_PAD: return weft_avg_pool2d(out, a, k3, 1, two, 1, one, 1, true, false, NULL);
    case G_ADAPTIVE: {
        int64_t os[2] = {2, 3};
        return weft_adaptive_avg_pool2d(out, a, os, 2);
    }
    case G_SOFTMAX:
        rc = weft_softmax(&t, a, 1);
        if (rc == 0) /* a weighted sum, so that the Jacobian is not degenerate */
            rc = weft_mul(out, t, t);
        weft_tensor_release(t);
        return rc;
    case G_LOG_SOFTMAX:
        rc = weft_log_softmax(&t, a, -1);
        if (rc == 0)
            rc = weft_mul(out, t, t);
        weft_tensor_release(t);
        return rc;
    case G_CE_MEAN: return weft_cross_entropy(out, a, targets2, NULL, "mean", -100, 0.0);
    case G_CE_WEIGHTED: return weft_cross_entropy(out, a, targets2, weight3, "mean", 1, 0.2);
    case G_CE_NONE_4D: return weft_cross_entropy(out, a, targets4, weight3, "none", -100, 0.1);
    case G_CE_PROBS: return weft_cross_entropy(out, a, probs, weight3, "mean", -100, 0.3);
    case G_NLL_MEAN:
        rc = weft_mul(&t, a, a); /* nll is linear in self: square first */
        if (rc == 0)
            rc = weft_nll_loss(out, t, targets2, NULL, "mean", -100);
        weft_tensor_release(t);
        return rc;
    case G_NLL_NONE:
        rc = weft_mul(&t, a, a);
        if (rc == 0)
            rc = weft_nll_loss(out, t, targets2, weight3, "none", 1);
        weft_tensor_release(t);
        return rc;
    case G_NLL_OF_LOG_SOFTMAX:
        rc = weft_log_softmax(&t, a, 1);
        if (rc == 0)
            rc = weft_nll_loss(out, t, targets2, weight3, "sum", -100);
        weft_tensor_release(t);
        return rc;
    case G_MSE: return weft_mse_loss(out, a, b, "mean");
    case G_RELU:
    case G_SIGMOID:
    case G_TANH:
        rc = id == G_RELU ? weft_relu(&t, a) : id == G_SIGMOID ? weft_sigmoid(&t, a) : weft_tanh(&t, a);
        if (rc == 0)
            rc = weft_mul(out, t, a); /* relu itself is piecewise linear */
        weft_tensor_release(t);
        return rc;
    case G_LINEAR: return weft_linear(out, a, b, c);
    case G_MM:
        rc = weft_mm(&t, a, b);
        if (rc == 0)
            rc = weft_mul(out, t, t);
        weft_tensor_release(t);
        return rc;
    case G_BMM:
        rc = weft_bmm(&t, a, b);
        if (rc == 0)
            rc = weft_mul(out, t, t);
        weft_tensor_release(t);
        return rc;
    case G_SUM:
    case G_MEAN: {
        int64_t dims[2] = {0, 2};
        rc = weft_mul(&t, a, a);
        if (rc == 0)
            rc = id == G_SUM ? weft_sum(out, t, dims, 2, false) : weft_mean(out, t, dims, 2, true);
        weft_tensor_release(t);
        return rc;
    }
    case G_SCALARS:
        rc = weft_mul(&t, a, a);
        if (rc == 0)
            rc = weft_add_scalar(&u, t, 2.0);
        weft_tensor_release(t);
        t = NULL;
        if (rc == 0)
            rc = weft_mul_scalar(&t, u, -1.5);
        weft_tensor_release(u);
        if (rc == 0)
            rc = weft_div_scalar(out, t, 4.0);
        weft_tensor_release(t);
        return rc;
    case G_COUNT: break;
    }
    return -1;
}

static void check(gid id, weft_tensor *const *in, int n)
{
    int rc = weft_gradcheck(apply, (void *)(intptr_t)id, in, n, 1e-6, 1e-6, 1e-4);
    if (!ok(rc == 0, "gradcheck: %s", names[id]))
        diag("%s", weft_last_error());
    rc = weft_gradgradcheck(apply, (void *)(intptr_t)id, in, n, 1e-6, 1e-5, 1e-3);
    if (!ok(rc == 0, "gradgradcheck: %s", names[id]))
        diag("%s", weft_last_error());
}

/* The first gradient with create_graph (the composition) against the one
 * without (the fused kernel). */
static void same_first_gradient(gid id, weft_tensor *const *in, int n)
{
    weft_tensor *y = NULL, *go = NULL, *plain = NULL, *composed = NULL;
    int rc = apply(&y, in, n, (void *)(intptr_t)id);
    keep(y);
    if (rc == 0)
        rc = weft_empty(&go, weft_tensor_sizes(y), weft_tensor_ndim(y), WEFT_FLOAT64, WEFT_DEVICE_CPU);
    keep(go);
    for (int64_t i = 0; rc == 0 && i < weft_tensor_numel(go); i++)
        ((double *)weft_tensor_data_ptr(go))[i] = 0.3 + 0.2 * (double)(i % 4);
    if (rc == 0)
        rc = weft_autograd_grad(&plain, &y, 1, &go, in, 1, true, false, false);
    keep(plain);
    if (rc == 0)
        rc = weft_autograd_grad(&composed, &y, 1, &go, in, 1, true, true, false);
    keep(composed);
    double worst = rc == 0 ? 0 : INFINITY;
    const double *p = rc == 0 ? values_of(plain) : NULL, *q = rc == 0 ? values_of(composed) : NULL;
    for (int64_t i = 0; p && q && i < weft_tensor_numel(plain); i++)
        worst = fmax(worst, fabs(p[i] - q[i]));
    if (!ok(rc == 0 && worst < 1e-12, "%s: the composition under create_graph matches the fused kernel",
            names[id]))
        diag("rc %d, largest difference %g: %s", rc, worst, rc ? weft_last_error() : "");
    ok(rc == 0 && weft_tensor_requires_grad(composed) && !weft_tensor_requires_grad(plain),
       "%s: only the create_graph gradient has a graph", names[id]);
}

int main(void)
{
    weft_load_default_plugins();
    int64_t x4[4] = {1, 2, 4, 4}, w4[4] = {2, 2, 2, 2}, b1[1] = {2};
    weft_tensor *conv_in[3] = {leaf(x4, 4, -0.5, 0.1), leaf(w4, 4, 0.3, -0.07), leaf(b1, 1, 0.1, 0.2)};
    check(G_CONV, conv_in, 3);
    int64_t x5[4] = {1, 2, 5, 5}, wg[4] = {2, 1, 2, 2};
    weft_tensor *strided_in[2] = {leaf(x5, 4, 0.4, -0.09), leaf(wg, 4, -0.2, 0.11)};
    check(G_CONV_STRIDED, strided_in, 2);
    int64_t p4[4] = {1, 2, 4, 5};
    weft_tensor *pool = leaf(p4, 4, -1.0, 0.23);
    check(G_MAXPOOL, &pool, 1);
    check(G_MAXPOOL_PAD, &pool, 1);
    check(G_AVGPOOL, &pool, 1);
    check(G_AVGPOOL_PAD, &pool, 1);
    check(G_ADAPTIVE, &pool, 1);

    int64_t s34[2] = {3, 4};
    weft_tensor *logits = leaf(s34, 2, -0.8, 0.31);
    check(G_SOFTMAX, &logits, 1);
    check(G_LOG_SOFTMAX, &logits, 1);
    same_first_gradient(G_SOFTMAX, &logits, 1);
    same_first_gradient(G_LOG_SOFTMAX, &logits, 1);

    int64_t n3[1] = {3}, t4[3] = {2, 2, 2}, w3[1] = {4};
    int64_t tv[3] = {0, 3, 1}, tv4[8] = {0, 3, 1, 2, 3, 3, 0, 1};
    targets2 = keep_int64(n3, 1, tv);
    targets4 = keep_int64(t4, 3, tv4);
    weft_empty(&weight3, w3, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    keep(weight3);
    double wv[4] = {0.5, 1.5, 1.0, 2.0};
    for (int i = 0; i < 4; i++)
        ((double *)weft_tensor_data_ptr(weight3))[i] = wv[i];
    weft_empty(&probs, s34, 2, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    keep(probs);
    double pv[12] = {0.1, 0.2, 0.3, 0.4, 0.25, 0.25, 0.25, 0.25, 0.7, 0.1, 0.1, 0.1};
    for (int i = 0; i < 12; i++)
        ((double *)weft_tensor_data_ptr(probs))[i] = pv[i];
    gid losses[] = {G_CE_MEAN, G_CE_WEIGHTED, G_CE_PROBS, G_NLL_MEAN, G_NLL_NONE, G_NLL_OF_LOG_SOFTMAX};
    for (size_t i = 0; i < sizeof losses / sizeof *losses; i++) {
        check(losses[i], &logits, 1);
        same_first_gradient(losses[i], &logits, 1);
    }
    int64_t s4d[4] = {2, 4, 2, 2};
    weft_tensor *logits4 = leaf(s4d, 4, 0.6, -0.17);
    check(G_CE_NONE_4D, &logits4, 1);
    same_first_gradient(G_CE_NONE_4D, &logits4, 1);

    int64_t s23[2] = {2, 3};
    weft_tensor *mse_in[2] = {leaf(s23, 2, 0.2, 0.3), leaf(s23, 2, -0.1, 0.2)};
    check(G_MSE, mse_in, 2);
    weft_tensor *act = leaf(s23, 2, -0.93, 0.29);
    check(G_RELU, &act, 1);
    check(G_SIGMOID, &act, 1);
    check(G_TANH, &act, 1);

    int64_t w23[2] = {4, 3}, b4[1] = {4};
    weft_tensor *lin_in[3] = {leaf(s23, 2, 0.2, 0.1), leaf(w23, 2, -0.3, 0.07), leaf(b4, 1, 0.5, 0.1)};
    check(G_LINEAR, lin_in, 3);
    int64_t m34[2] = {3, 2};
    weft_tensor *mm_in[2] = {leaf(s23, 2, 0.2, 0.1), leaf(m34, 2, -0.3, 0.17)};
    check(G_MM, mm_in, 2);
    int64_t b223[3] = {2, 2, 3}, b232[3] = {2, 3, 2};
    weft_tensor *bmm_in[2] = {leaf(b223, 3, 0.2, 0.1), leaf(b232, 3, -0.3, 0.17)};
    check(G_BMM, bmm_in, 2);
    weft_tensor *red = leaf(b223, 3, -0.4, 0.13);
    check(G_SUM, &red, 1);
    check(G_MEAN, &red, 1);
    check(G_SCALARS, &act, 1);
    drop_all();
    return done_testing();
}
