/* tests/test_nn_ops.c — the neural-network operators of the CPU plugin
 * (issue 3, part 2) against float64 references written here with naive
 * loops (direct convolution, explicit softmax, window-by-window pooling,
 * per-sample losses), their error paths, and every derivative against
 * finite differences (weft_gradcheck). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <weft/weft.h>

#include "tests/tap.h"
#include "tests/keep.h"

/* ---------------------------------------------------------------- helpers */

static uint64_t lcg = 12345;
static double uniform(double lo, double hi)
{
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (hi - lo) * (double)(lcg >> 11) / 9007199254740992.0;
}

/* a tensor of dtype with random values in [lo, hi) (kept) */
static weft_tensor *rnd(weft_dtype dtype, const int64_t *sizes, int nd, double lo, double hi)
{
    weft_tensor *f = NULL, *t = NULL;
    if (weft_empty(&f, sizes, nd, WEFT_FLOAT64, WEFT_DEVICE_CPU) != 0)
        return NULL;
    double *p = weft_tensor_data_ptr(f);
    for (int64_t i = 0; i < weft_tensor_numel(f); i++)
        p[i] = uniform(lo, hi);
    if (dtype == WEFT_FLOAT64)
        return keep(f);
    weft_to_dtype(&t, f, dtype);
    weft_tensor_release(f);
    return keep(t);
}

/* ------------------------------------------------------------ references */

static void ref_conv2d(const double *x, const double *w, const double *b, double *y, int64_t N,
                       int64_t C, int64_t H, int64_t W, int64_t OC, int64_t KH, int64_t KW,
                       const int64_t *s, const int64_t *p, const int64_t *d, int64_t groups,
                       int64_t OH, int64_t OW)
{
    int64_t Cg = C / groups, OCg = OC / groups;
    for (int64_t n = 0; n < N; n++)
        for (int64_t oc = 0; oc < OC; oc++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double acc = b ? b[oc] : 0;
                    int64_t g = oc / OCg;
                    for (int64_t c = 0; c < Cg; c++)
                        for (int64_t kh = 0; kh < KH; kh++)
                            for (int64_t kw = 0; kw < KW; kw++) {
                                int64_t ih = oh * s[0] - p[0] + kh * d[0];
                                int64_t iw = ow * s[1] - p[1] + kw * d[1];
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                                    continue;
                                acc += x[((n * C + g * Cg + c) * H + ih) * W + iw] *
                                       w[((oc * Cg + c) * KH + kh) * KW + kw];
                            }
                    y[((n * OC + oc) * OH + oh) * OW + ow] = acc;
                }
}

/* ------------------------------------------------------------ forward */

static void test_linear(void)
{
    int64_t xs[2] = {5, 7}, ws[2] = {4, 7}, bs[1] = {4}, ys[3] = {2, 5, 7};
    weft_tensor *x = rnd(WEFT_FLOAT32, xs, 2, -1, 1), *w = rnd(WEFT_FLOAT32, ws, 2, -1, 1);
    weft_tensor *b = rnd(WEFT_FLOAT32, bs, 1, -1, 1), *y = NULL;
    const double *xv = values_of(x), *wv = values_of(w), *bv = values_of(b);
    double ref[20];
    for (int i = 0; i < 5; i++)
        for (int o = 0; o < 4; o++) {
            ref[i * 4 + o] = bv[o];
            for (int k = 0; k < 7; k++)
                ref[i * 4 + o] += xv[i * 7 + k] * wv[o * 7 + k];
        }
    ok(weft_linear(&y, x, w, b) == 0, "linear with bias runs");
    check_close(keep(y), ref, 20, 1e-5, "linear [5,7] x [4,7]^T + b");
    /* addmm with beta and alpha; self broadcast from [4] */
    weft_tensor *wt = NULL;
    weft_t(&wt, w);
    keep(wt);
    ok(weft_addmm_ex(&y, b, x, wt, 0.5, 2.0) == 0, "addmm runs");
    for (int i = 0; i < 20; i++)
        ref[i] = 2 * (ref[i] - bv[i % 4]) + 0.5 * bv[i % 4];
    check_close(keep(y), ref, 20, 1e-5, "addmm beta=0.5 alpha=2 (transposed mat2)");
    /* batched input without bias goes through matmul */
    weft_tensor *x3 = rnd(WEFT_FLOAT64, ys, 3, -1, 1), *w64 = NULL;
    weft_to_dtype(&w64, w, WEFT_FLOAT64);
    keep(w64);
    ok(weft_linear(&y, x3, w64, NULL) == 0, "linear on a 3-D input runs");
    const double *x3v = values_of(x3);
    double ref3[40];
    for (int i = 0; i < 10; i++)
        for (int o = 0; o < 4; o++) {
            ref3[i * 4 + o] = 0;
            for (int k = 0; k < 7; k++)
                ref3[i * 4 + o] += x3v[i * 7 + k] * wv[o * 7 + k];
        }
    check_close(keep(y), ref3, 40, 1e-12, "linear [2,5,7] without bias");
    error_is(weft_linear(&y, x, bs[0] == 4 ? b : w, NULL), WEFT_ESHAPE, NULL, "linear with a 1-D weight");
    error_is(weft_addmm(&y, b, x, x), WEFT_ESHAPE, NULL, "addmm of [5,7] x [5,7]");
    drop_all();
}

static void test_softmax(void)
{
    int64_t sizes[3] = {3, 4, 5};
    for (int dtype_i = 0; dtype_i < 3; dtype_i++) {
        weft_dtype dtype = (weft_dtype[]){WEFT_FLOAT64, WEFT_FLOAT32, WEFT_BFLOAT16}[dtype_i];
        double tol = dtype == WEFT_FLOAT64 ? 1e-12 : dtype == WEFT_FLOAT32 ? 1e-5 : 1e-2;
        weft_tensor *x = rnd(dtype, sizes, 3, -20, 20);
        const double *xv = values_of(x);
        for (int dim = -1; dim < 3; dim++) {
            int d = dim < 0 ? 2 : dim;
            int64_t inner = 1, D = sizes[d], outer = 1;
            for (int k = 0; k < 3; k++)
                k < d ? (outer *= sizes[k]) : k > d ? (inner *= sizes[k]) : 0;
            double ref[60], lref[60];
            for (int64_t o = 0; o < outer; o++)
                for (int64_t i = 0; i < inner; i++) {
                    double mx = -INFINITY, sum = 0;
                    for (int64_t k = 0; k < D; k++)
                        mx = fmax(mx, xv[(o * D + k) * inner + i]);
                    for (int64_t k = 0; k < D; k++)
                        sum += exp(xv[(o * D + k) * inner + i] - mx);
                    for (int64_t k = 0; k < D; k++) {
                        int64_t at = (o * D + k) * inner + i;
                        ref[at] = exp(xv[at] - mx) / sum;
                        lref[at] = xv[at] - mx - log(sum);
                    }
                }
            weft_tensor *y = NULL;
            char what[96];
            snprintf(what, sizeof what, "softmax %s dim %d", weft_dtype_name(dtype), dim);
            ok(weft_softmax(&y, x, dim) == 0 && weft_tensor_dtype(y) == dtype, "%s runs", what);
            check_close(keep(y), ref, 60, tol, what);
            snprintf(what, sizeof what, "log_softmax %s dim %d", weft_dtype_name(dtype), dim);
            ok(weft_log_softmax(&y, x, dim) == 0, "%s runs", what);
            check_close(keep(y), lref, 60, tol * 10, what);
        }
    }
    /* a large row that exp would overflow without the maximum */
    int64_t one[2] = {1, 3};
    weft_tensor *big = NULL, *y = NULL;
    weft_full(&big, one, 2, 1000.0, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(big);
    ok(weft_softmax(&y, big, 1) == 0, "softmax of 1000s runs");
    check_close(keep(y), (const double[]){1 / 3.0, 1 / 3.0, 1 / 3.0}, 3, 1e-6,
                "softmax of large equal values");
    error_is(weft_softmax(&y, big, 2), WEFT_ERANGE, NULL, "softmax over dim 2 of a 2-D tensor");
    int64_t four = 4;
    weft_tensor *ints = keep_int64(&four, 1, (const int64_t[]){1, 2, 3, 4});
    error_is(weft_softmax(&y, ints, 0), WEFT_EDTYPE, NULL, "softmax of int64");
    drop_all();
}

/* cross entropy of row logits x[C] (stride `stride`) against target t */
static void ref_cross_entropy(const double *x, int64_t N, int64_t C, int64_t inner,
                              const int64_t *target, const double *probs, const double *weight,
                              int64_t ignore, double eps, int reduction, bool logits, double *out)
{
    double total = 0, wsum = 0;
    for (int64_t e = 0; e < N * inner; e++) {
        int64_t n = e / inner, s = e % inner;
        double lp[16], mx = -INFINITY, sum = 0;
        for (int64_t c = 0; c < C; c++)
            mx = fmax(mx, x[(n * C + c) * inner + s]);
        for (int64_t c = 0; c < C; c++)
            sum += exp(x[(n * C + c) * inner + s] - mx);
        for (int64_t c = 0; c < C; c++)
            lp[c] = logits ? x[(n * C + c) * inner + s] - mx - log(sum) : x[(n * C + c) * inner + s];
        double loss = 0;
        if (probs) {
            for (int64_t c = 0; c < C; c++)
                loss -= (weight ? weight[c] : 1) * (probs[(n * C + c) * inner + s] * (1 - eps) + eps / C) * lp[c];
            wsum += 1;
        } else if (target[e] != ignore) {
            double wt = weight ? weight[target[e]] : 1;
            loss = -(1 - eps) * wt * lp[target[e]];
            for (int64_t c = 0; c < C; c++)
                loss -= eps / C * (weight ? weight[c] : 1) * lp[c];
            wsum += wt;
        }
        if (reduction == 0)
            out[e] = loss;
        total += loss;
    }
    if (reduction == 1)
        out[0] = total / wsum;
    if (reduction == 2)
        out[0] = total;
}

static void test_losses(void)
{
    static const char *const reductions[] = {"none", "mean", "sum"};
    int64_t xs[3] = {4, 5, 3}, ts[2] = {4, 3}, C = 5, ws[1] = {5};
    weft_tensor *x = rnd(WEFT_FLOAT64, xs, 3, -3, 3), *w = rnd(WEFT_FLOAT64, ws, 1, 0.5, 2);
    const int64_t tv[12] = {0, 4, 2, -100, 1, 3, 3, 2, -100, 0, 1, 4};
    weft_tensor *t = keep_int64(ts, 2, tv);
    weft_tensor *probs = rnd(WEFT_FLOAT64, xs, 3, 0, 1);
    const double *xv = values_of(x), *wv = values_of(w), *pv = values_of(probs);
    double ref[12];
    char what[128];
    for (int r = 0; r < 3; r++)
        for (int wi = 0; wi < 2; wi++)
            for (int si = 0; si < 2; si++) {
                double eps = si ? 0.2 : 0.0;
                weft_tensor *y = NULL;
                ref_cross_entropy(xv, 4, C, 3, tv, NULL, wi ? wv : NULL, -100, eps, r, true, ref);
                snprintf(what, sizeof what, "cross_entropy [4,5,3] %s%s%s", reductions[r],
                         wi ? " weighted" : "", si ? " smoothing 0.2" : "");
                ok(weft_cross_entropy(&y, x, t, wi ? w : NULL, reductions[r], -100, eps) == 0,
                   "%s runs", what);
                check_close(keep(y), ref, r ? 1 : 12, 1e-12, what);
                ref_cross_entropy(xv, 4, C, 3, NULL, pv, wi ? wv : NULL, -100, eps, r, true, ref);
                if (r == 1) /* probability targets: mean over the samples */
                    ref[0] = ref[0];
                snprintf(what, sizeof what, "cross_entropy with probabilities %s%s%s",
                         reductions[r], wi ? " weighted" : "", si ? " smoothing 0.2" : "");
                ok(weft_cross_entropy(&y, x, probs, wi ? w : NULL, reductions[r], -100, eps) == 0,
                   "%s runs", what);
                check_close(keep(y), ref, r ? 1 : 12, 1e-12, what);
                if (si)
                    continue;
                ref_cross_entropy(xv, 4, C, 3, tv, NULL, wi ? wv : NULL, -100, 0, r, false, ref);
                snprintf(what, sizeof what, "nll_loss %s%s", reductions[r], wi ? " weighted" : "");
                ok(weft_nll_loss(&y, x, t, wi ? w : NULL, reductions[r], -100) == 0, "%s runs",
                   what);
                check_close(keep(y), ref, r ? 1 : 12, 1e-12, what);
            }
    /* float32 [N, C] logits as in training */
    int64_t xs2[2] = {6, 5}, n6 = 6;
    weft_tensor *x2 = rnd(WEFT_FLOAT32, xs2, 2, -4, 4), *y = NULL;
    weft_tensor *t2 = keep_int64(&n6, 1, (const int64_t[]){1, 0, 4, 4, 2, 3});
    ref_cross_entropy(values_of(x2), 6, 5, 1, (const int64_t[]){1, 0, 4, 4, 2, 3}, NULL, NULL,
                      -100, 0, 1, true, ref);
    ok(weft_cross_entropy(&y, x2, t2, NULL, "mean", -100, 0.0) == 0, "float32 cross_entropy runs");
    check_close(keep(y), ref, 1, 1e-6, "float32 cross_entropy [6,5] mean");
    /* bad input */
    weft_tensor *bad_t = keep_int64(&n6, 1, (const int64_t[]){1, 0, 5, 4, 2, 3});
    error_is(weft_cross_entropy(&y, x2, bad_t, NULL, "mean", -100, 0.0), WEFT_ERANGE, NULL,
             "cross_entropy with target 5 of 5 classes");
    weft_tensor *neg_t = keep_int64(&n6, 1, (const int64_t[]){1, 0, -1, 4, 2, 3});
    error_is(weft_nll_loss(&y, x2, neg_t, NULL, "sum", -100), WEFT_ERANGE, NULL,
             "nll_loss with target -1");
    error_is(weft_cross_entropy(&y, x2, t, NULL, "mean", -100, 0.0), WEFT_ESHAPE, NULL,
             "cross_entropy with a target of the wrong shape");
    error_is(weft_cross_entropy(&y, x2, t2, NULL, "avg", -100, 0.0), WEFT_EINVAL, NULL,
             "cross_entropy with reduction 'avg'");
    error_is(weft_cross_entropy(&y, x2, t2, w, "mean", -100, 1.5), WEFT_EINVAL, NULL,
             "cross_entropy with label_smoothing 1.5");
    int64_t w3 = 3;
    weft_tensor *short_w = rnd(WEFT_FLOAT32, &w3, 1, 0, 1);
    error_is(weft_nll_loss(&y, x2, t2, short_w, "mean", -100), WEFT_ESHAPE, NULL,
             "nll_loss with 3 weights for 5 classes");

    /* the elementwise losses */
    int64_t es[2] = {3, 4};
    weft_tensor *a = rnd(WEFT_FLOAT64, es, 2, -2, 2), *b = rnd(WEFT_FLOAT64, es, 2, -2, 2);
    weft_tensor *p = rnd(WEFT_FLOAT64, es, 2, 0.05, 0.95), *q = rnd(WEFT_FLOAT64, es, 2, 0, 1);
    weft_tensor *ew = rnd(WEFT_FLOAT64, es, 2, 0.5, 1.5);
    int64_t four = 4;
    weft_tensor *pw = rnd(WEFT_FLOAT64, &four, 1, 0.5, 3);
    const double *av = values_of(a), *bv = values_of(b), *pv2 = values_of(p), *qv = values_of(q);
    const double *ewv = values_of(ew), *pwv = values_of(pw);
    for (int r = 0; r < 3; r++) {
        double mse[12], l1[12], sl1[12], bce[12], bcel[12], sums[5] = {0};
        for (int i = 0; i < 12; i++) {
            double d = av[i] - bv[i], ad = fabs(d), beta = 0.7, xx = av[i], yy = qv[i];
            mse[i] = d * d;
            l1[i] = ad;
            sl1[i] = ad < beta ? 0.5 * d * d / beta : ad - 0.5 * beta;
            bce[i] = -ewv[i] * (yy * log(pv2[i]) + (1 - yy) * log(1 - pv2[i]));
            double sig = 1 / (1 + exp(-xx));
            bcel[i] = -(pwv[i % 4] * yy * log(sig) + (1 - yy) * log(1 - sig));
            double *all[5] = {mse, l1, sl1, bce, bcel};
            for (int k = 0; k < 5; k++)
                sums[k] += all[k][i];
        }
        double *all[5] = {mse, l1, sl1, bce, bcel};
        for (int k = 0; k < 5 && r; k++)
            all[k][0] = r == 1 ? sums[k] / 12 : sums[k];
        int n = r ? 1 : 12;
        weft_tensor *y1 = NULL, *y2 = NULL, *y3 = NULL, *y4 = NULL, *y5 = NULL;
        ok(weft_mse_loss(&y1, a, b, reductions[r]) == 0 && weft_l1_loss(&y2, a, b, reductions[r]) == 0 &&
               weft_smooth_l1_loss(&y3, a, b, reductions[r], 0.7) == 0 &&
               weft_binary_cross_entropy(&y4, p, q, ew, reductions[r]) == 0 &&
               weft_binary_cross_entropy_with_logits(&y5, a, q, NULL, pw, reductions[r]) == 0,
           "the elementwise losses run (%s)", reductions[r]);
        snprintf(what, sizeof what, "mse_loss %s", reductions[r]);
        check_close(keep(y1), mse, n, 1e-12, what);
        snprintf(what, sizeof what, "l1_loss %s", reductions[r]);
        check_close(keep(y2), l1, n, 1e-12, what);
        snprintf(what, sizeof what, "smooth_l1_loss beta 0.7 %s", reductions[r]);
        check_close(keep(y3), sl1, n, 1e-12, what);
        snprintf(what, sizeof what, "binary_cross_entropy weighted %s", reductions[r]);
        check_close(keep(y4), bce, n, 1e-12, what);
        snprintf(what, sizeof what, "binary_cross_entropy_with_logits pos_weight %s", reductions[r]);
        check_close(keep(y5), bcel, n, 1e-12, what);
    }
    drop_all();
}

static void test_conv(void)
{
    struct {
        int64_t N, C, H, W, OC, KH, KW, s[2], p[2], d[2], groups;
        bool bias;
        weft_dtype dtype;
    } cases[] = {
        {2, 3, 7, 6, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, WEFT_FLOAT32},
        {2, 4, 9, 8, 6, 3, 2, {2, 1}, {1, 0}, {1, 2}, 2, true, WEFT_FLOAT64},
        {1, 6, 5, 5, 3, 1, 1, {1, 1}, {0, 0}, {1, 1}, 3, false, WEFT_FLOAT64},
        {3, 2, 6, 7, 2, 2, 3, {2, 3}, {1, 1}, {2, 1}, 1, false, WEFT_FLOAT32},
        {2, 4, 4, 4, 4, 3, 3, {1, 1}, {2, 2}, {1, 1}, 4, true, WEFT_FLOAT64},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        __typeof__(cases[0]) *c = &cases[i];
        int64_t xs[4] = {c->N, c->C, c->H, c->W}, ws[4] = {c->OC, c->C / c->groups, c->KH, c->KW};
        weft_tensor *x = rnd(c->dtype, xs, 4, -1, 1), *w = rnd(c->dtype, ws, 4, -1, 1);
        weft_tensor *b = c->bias ? rnd(c->dtype, &c->OC, 1, -1, 1) : NULL, *y = NULL;
        int64_t OH = (c->H + 2 * c->p[0] - c->d[0] * (c->KH - 1) - 1) / c->s[0] + 1;
        int64_t OW = (c->W + 2 * c->p[1] - c->d[1] * (c->KW - 1) - 1) / c->s[1] + 1;
        static double ref[4096];
        ref_conv2d(values_of(x), values_of(w), b ? values_of(b) : NULL, ref, c->N, c->C, c->H,
                   c->W, c->OC, c->KH, c->KW, c->s, c->p, c->d, c->groups, OH, OW);
        char what[128];
        snprintf(what, sizeof what, "conv2d case %zu (stride %lld,%lld pad %lld,%lld dil "
                 "%lld,%lld groups %lld)", i, (long long)c->s[0], (long long)c->s[1],
                 (long long)c->p[0], (long long)c->p[1], (long long)c->d[0], (long long)c->d[1],
                 (long long)c->groups);
        int rc = weft_conv2d(&y, x, w, b, c->s, 2, c->p, 2, c->d, 2, c->groups);
        if (!ok(rc == 0, "%s runs", what))
            diag("%s", weft_last_error());
        keep(y);
        ok(y && weft_tensor_size(y, 2) == OH && weft_tensor_size(y, 3) == OW, "%s: shape", what);
        check_close(y, ref, c->N * c->OC * OH * OW, c->dtype == WEFT_FLOAT32 ? 1e-5 : 1e-12, what);
    }
    /* conv1d against the same reference with a unit height */
    int64_t xs[3] = {2, 4, 11}, ws[3] = {6, 2, 3}, s = 2, p = 1, d = 2, one[2] = {1, 1};
    weft_tensor *x = rnd(WEFT_FLOAT64, xs, 3, -1, 1), *w = rnd(WEFT_FLOAT64, ws, 3, -1, 1), *y = NULL;
    int64_t OL = (11 + 2 - 2 * 2 - 1) / 2 + 1;
    double ref[2 * 6 * 6];
    ref_conv2d(values_of(x), values_of(w), NULL, ref, 2, 4, 1, 11, 6, 1, 3, (int64_t[]){1, s},
               (int64_t[]){0, p}, (int64_t[]){1, d}, 2, 1, OL);
    ok(weft_conv1d(&y, x, w, NULL, &s, 1, &p, 1, &d, 1, 2) == 0, "conv1d runs");
    keep(y);
    ok(y && weft_tensor_ndim(y) == 3 && weft_tensor_size(y, 2) == OL, "conv1d has shape [2, 6, %lld]",
       (long long)OL);
    check_close(y, ref, 2 * 6 * OL, 1e-12, "conv1d stride 2 pad 1 dil 2 groups 2");
    /* bad input */
    int64_t xs4[4] = {1, 3, 5, 5}, wbad[4] = {2, 2, 3, 3}, wbig[4] = {2, 3, 7, 7};
    weft_tensor *x4 = rnd(WEFT_FLOAT32, xs4, 4, -1, 1);
    error_is(weft_conv2d(&y, x4, rnd(WEFT_FLOAT32, wbad, 4, -1, 1), NULL, one, 2, one, 2, one, 2, 1),
             WEFT_ESHAPE, NULL, "conv2d with 2 weight channels for 3 input channels");
    error_is(weft_conv2d(&y, x4, rnd(WEFT_FLOAT32, wbig, 4, -1, 1), NULL, one, 1, (int64_t[]){0}, 1,
                         one, 1, 1),
             WEFT_ESHAPE, NULL, "conv2d with a kernel larger than the input");
    error_is(weft_conv2d(&y, x, x, NULL, one, 2, one, 2, one, 2, 1), WEFT_ESHAPE, NULL,
             "conv2d of a 3-D input");
    error_is(weft_conv2d(&y, x4, rnd(WEFT_FLOAT32, wbig, 4, -1, 1), NULL, (int64_t[]){0}, 1, one, 1,
                         one, 1, 1),
             WEFT_EINVAL, NULL, "conv2d with stride 0");
    error_is(weft_conv2d(&y, x4, rnd(WEFT_FLOAT64, wbig, 4, -1, 1), NULL, one, 1, (int64_t[]){3},
                         1, one, 1, 1),
             WEFT_EDTYPE, NULL, "conv2d of float32 input and float64 weight");
    drop_all();
}

static void test_pooling(void)
{
    int64_t xs[4] = {2, 3, 7, 6};
    weft_tensor *x = rnd(WEFT_FLOAT64, xs, 4, -1, 1);
    const double *xv = values_of(x);
    struct {
        int64_t k[2], s[2], p[2], d[2];
        bool ceil;
    } cases[] = {
        {{2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
        {{3, 2}, {2, 1}, {1, 1}, {1, 1}, true},
        {{2, 3}, {1, 2}, {1, 0}, {2, 1}, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        __typeof__(cases[0]) *c = &cases[i];
        weft_tensor *y = NULL, *ind = NULL;
        int rc = weft_max_pool2d_with_indices(&y, &ind, x, c->k, 2, c->s, 2, c->p, 2, c->d, 2, c->ceil);
        if (!ok(rc == 0, "max_pool2d_with_indices case %zu runs", i)) {
            diag("%s", weft_last_error());
            continue;
        }
        keep(y);
        keep(ind);
        int64_t OH = weft_tensor_size(y, 2), OW = weft_tensor_size(y, 3);
        static double ref[1024], iref[1024];
        for (int64_t pl = 0; pl < 6; pl++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double best = -INFINITY, at = -1;
                    for (int64_t kh = 0; kh < c->k[0]; kh++)
                        for (int64_t kw = 0; kw < c->k[1]; kw++) {
                            int64_t ih = oh * c->s[0] - c->p[0] + kh * c->d[0];
                            int64_t iw = ow * c->s[1] - c->p[1] + kw * c->d[1];
                            if (ih < 0 || ih >= 7 || iw < 0 || iw >= 6)
                                continue;
                            if (xv[pl * 42 + ih * 6 + iw] > best) {
                                best = xv[pl * 42 + ih * 6 + iw];
                                at = (double)(ih * 6 + iw);
                            }
                        }
                    ref[(pl * OH + oh) * OW + ow] = best;
                    iref[(pl * OH + oh) * OW + ow] = at;
                }
        char what[96];
        snprintf(what, sizeof what, "max_pool2d case %zu values", i);
        check_close(y, ref, 6 * OH * OW, 0, what);
        snprintf(what, sizeof what, "max_pool2d case %zu indices", i);
        check_close(ind, iref, 6 * OH * OW, 0, what);
        /* avg_pool2d with the same kernel, stride and padding */
        for (int cip = 0; cip < 2; cip++) {
            if (weft_avg_pool2d(&y, x, c->k, 2, c->s, 2, c->p, 2, c->ceil, cip, NULL) != 0) {
                ok(0, "avg_pool2d case %zu runs: %s", i, weft_last_error());
                continue;
            }
            keep(y);
            OH = weft_tensor_size(y, 2), OW = weft_tensor_size(y, 3);
            for (int64_t pl = 0; pl < 6; pl++)
                for (int64_t oh = 0; oh < OH; oh++)
                    for (int64_t ow = 0; ow < OW; ow++) {
                        int64_t hs = oh * c->s[0] - c->p[0], ws = ow * c->s[1] - c->p[1];
                        int64_t he = fmin(hs + c->k[0], 7 + c->p[0]), we = fmin(ws + c->k[1], 6 + c->p[1]);
                        double size = (double)((he - hs) * (we - ws)), sum = 0, count = 0;
                        for (int64_t ih = hs; ih < he; ih++)
                            for (int64_t iw = ws; iw < we; iw++)
                                if (ih >= 0 && ih < 7 && iw >= 0 && iw < 6) {
                                    sum += xv[pl * 42 + ih * 6 + iw];
                                    count++;
                                }
                        ref[(pl * OH + oh) * OW + ow] = sum / (cip ? size : count);
                    }
            snprintf(what, sizeof what, "avg_pool2d case %zu count_include_pad=%d", i, cip);
            check_close(y, ref, 6 * OH * OW, 1e-12, what);
        }
    }
    /* max_pool2d: values only; empty stride means the kernel size */
    weft_tensor *y = NULL, *y2 = NULL, *ind = NULL;
    int64_t two[1] = {2}, zero[1] = {0}, unit[1] = {1};
    ok(weft_max_pool2d(&y, x, two, 1, NULL, 0, zero, 1, unit, 1, false) == 0 &&
           weft_max_pool2d_with_indices(&y2, &ind, x, two, 1, two, 1, zero, 1, unit, 1, false) == 0,
       "max_pool2d with an empty stride runs");
    keep(y), keep(y2), keep(ind);
    check_close(y, values_of(y2), 6 * 3 * 3, 0, "max_pool2d equals max_pool2d_with_indices' values");
    /* adaptive_avg_pool2d to 3x4 */
    int64_t os[2] = {3, 4};
    ok(weft_adaptive_avg_pool2d(&y, x, os, 2) == 0, "adaptive_avg_pool2d runs");
    keep(y);
    static double ref[72];
    for (int64_t pl = 0; pl < 6; pl++)
        for (int64_t oh = 0; oh < 3; oh++)
            for (int64_t ow = 0; ow < 4; ow++) {
                int64_t h0 = oh * 7 / 3, h1 = ((oh + 1) * 7 + 2) / 3, w0 = ow * 6 / 4, w1 = ((ow + 1) * 6 + 3) / 4;
                double sum = 0;
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++)
                        sum += xv[pl * 42 + ih * 6 + iw];
                ref[(pl * 3 + oh) * 4 + ow] = sum / (double)((h1 - h0) * (w1 - w0));
            }
    check_close(y, ref, 72, 1e-12, "adaptive_avg_pool2d 7x6 -> 3x4");
    /* bad input */
    int64_t three[1] = {3};
    error_is(weft_max_pool2d(&y, x, two, 1, two, 1, three, 1, unit, 1, false), WEFT_EINVAL, NULL,
             "max_pool2d with padding larger than half the kernel");
    int64_t s2[2] = {6, 7};
    error_is(weft_max_pool2d(&y, rnd(WEFT_FLOAT32, s2, 2, 0, 1), two, 1, two, 1, zero, 1, unit, 1,
                             false),
             WEFT_ESHAPE, NULL, "max_pool2d of a 2-D tensor");
    int64_t big[1] = {9};
    error_is(weft_avg_pool2d(&y, x, big, 1, NULL, 0, zero, 1, false, true, NULL), WEFT_ESHAPE, NULL,
             "avg_pool2d with a kernel larger than the input");
    /* an empty plane (torch refuses it too; only the batch may be 0):
     * every window would be padding */
    int64_t e4[4] = {3, 4, 0, 4}, four[1] = {4};
    error_is(weft_max_pool2d(&y, rnd(WEFT_FLOAT32, e4, 4, 0, 1), four, 1, four, 1, two, 1, unit, 1,
                             false),
             WEFT_ESHAPE, "empty", "max_pool2d of (3, 4, 0, 4) with padding 2");
    error_is(weft_avg_pool2d(&y, rnd(WEFT_FLOAT32, e4, 4, 0, 1), four, 1, four, 1, two, 1, false,
                             true, NULL),
             WEFT_ESHAPE, "empty", "avg_pool2d of (3, 4, 0, 4) with padding 2");
    int64_t bad_index = 42 * 100;
    int64_t shape[4] = {2, 3, 3, 3};
    weft_tensor *go = rnd(WEFT_FLOAT64, shape, 4, 0, 1), *bad = NULL, *gi = NULL;
    weft_full(&bad, shape, 4, (double)bad_index, WEFT_INT64, WEFT_DEVICE_CPU);
    keep(bad);
    error_is(weft_max_pool2d_with_indices_backward(&gi, go, x, bad), WEFT_ERANGE, NULL,
             "max_pool2d backward with an index out of the plane");
    drop_all();
}


static void test_norms(void)
{
    int64_t xs[4] = {3, 2, 2, 3}, two = 2;
    weft_tensor *x = rnd(WEFT_FLOAT64, xs, 4, -2, 2), *w = rnd(WEFT_FLOAT64, &two, 1, 0.5, 1.5);
    weft_tensor *b = rnd(WEFT_FLOAT64, &two, 1, -1, 1), *rm = NULL, *rv = NULL, *y = NULL;
    weft_zeros(&rm, &two, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    weft_ones(&rv, &two, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    keep(rm), keep(rv);
    const double *xv = values_of(x), *wv = values_of(w), *bv = values_of(b);
    double ref[36], mean[2], var[2], rmref[2], rvref[2];
    for (int c = 0; c < 2; c++) {
        double s = 0, q = 0;
        for (int n = 0; n < 3; n++)
            for (int i = 0; i < 6; i++)
                s += xv[(n * 2 + c) * 6 + i];
        mean[c] = s / 18;
        for (int n = 0; n < 3; n++)
            for (int i = 0; i < 6; i++)
                q += pow(xv[(n * 2 + c) * 6 + i] - mean[c], 2);
        var[c] = q / 18;
        rmref[c] = 0.1 * mean[c];
        rvref[c] = 0.9 + 0.1 * q / 17; /* the unbiased variance */
        for (int n = 0; n < 3; n++)
            for (int i = 0; i < 6; i++) {
                int at = (n * 2 + c) * 6 + i;
                ref[at] = (xv[at] - mean[c]) / sqrt(var[c] + 1e-5) * wv[c] + bv[c];
            }
    }
    ok(weft_batch_norm(&y, x, w, b, rm, rv, true, 0.1, 1e-5) == 0, "batch_norm (training) runs");
    check_close(keep(y), ref, 36, 1e-12, "batch_norm training output");
    check_close(rm, rmref, 2, 1e-12, "batch_norm updates running_mean");
    check_close(rv, rvref, 2, 1e-12, "batch_norm updates running_var with the unbiased variance");
    for (int at = 0; at < 36; at++) {
        int c = (at / 6) % 2;
        ref[at] = (xv[at] - rmref[c]) / sqrt(rvref[c] + 1e-5) * wv[c] + bv[c];
    }
    ok(weft_batch_norm(&y, x, w, b, rm, rv, false, 0.1, 1e-5) == 0, "batch_norm (eval) runs");
    check_close(keep(y), ref, 36, 1e-12, "batch_norm eval uses the running statistics");
    int64_t three = 3;
    error_is(weft_batch_norm(&y, x, rnd(WEFT_FLOAT64, &three, 1, 0, 1), NULL, NULL, NULL, true, 0.1, 1e-5),
             WEFT_ESHAPE, NULL, "batch_norm with 3 weights for 2 channels");
    /* layer_norm over the last two dims */
    int64_t ns[2] = {2, 3};
    weft_tensor *lw = rnd(WEFT_FLOAT64, ns, 2, 0.5, 1.5), *lb = rnd(WEFT_FLOAT64, ns, 2, -1, 1);
    const double *lwv = values_of(lw), *lbv = values_of(lb);
    for (int r = 0; r < 6; r++) {
        double s = 0, q = 0;
        for (int i = 0; i < 6; i++)
            s += xv[r * 6 + i];
        for (int i = 0; i < 6; i++)
            q += pow(xv[r * 6 + i] - s / 6, 2);
        for (int i = 0; i < 6; i++)
            ref[r * 6 + i] = (xv[r * 6 + i] - s / 6) / sqrt(q / 6 + 1e-5) * lwv[i] + lbv[i];
    }
    ok(weft_layer_norm(&y, x, ns, 2, lw, lb, 1e-5) == 0, "layer_norm runs");
    check_close(keep(y), ref, 36, 1e-12, "layer_norm over [2, 3]");
    error_is(weft_layer_norm(&y, x, (int64_t[]){3, 3}, 2, NULL, NULL, 1e-5), WEFT_ESHAPE, NULL,
             "layer_norm with a normalized_shape that does not match");
    drop_all();
}

/* ------------------------------------------------------------ gradients */

enum grad_op {
    G_LINEAR, G_ADDMM, G_SOFTMAX, G_LOG_SOFTMAX, G_NLL, G_CE, G_CE_PROB, G_CONV, G_CONV_GROUPS,
    G_CONV1D, G_MAXPOOL, G_AVGPOOL, G_ADAPTIVE, G_MSE, G_L1, G_SMOOTH_L1, G_BCE, G_BCE_LOGITS,
    G_BATCH_NORM, G_LAYER_NORM, G_COUNT
};
static const char *const grad_names[G_COUNT] = {
    "linear", "addmm", "softmax dim 1", "log_softmax dim 0", "nll_loss weighted ignore_index",
    "cross_entropy weighted smoothing ignore_index", "cross_entropy probabilities",
    "conv2d stride 2 pad 1 dil 1 bias", "conv2d groups 2 dilation 2", "conv1d", "max_pool2d",
    "avg_pool2d ceil_mode", "adaptive_avg_pool2d", "mse_loss", "l1_loss", "smooth_l1_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "batch_norm training",
    "layer_norm"};

static weft_tensor *grad_target; /* class indices for the losses */

static int apply_grad_op(weft_tensor **out, weft_tensor *const *in, int n, void *ctx)
{
    (void)n;
    int64_t one[1] = {1}, two[1] = {2}, zero[1] = {0};
    switch ((enum grad_op)(intptr_t)ctx) {
    case G_LINEAR:
        return weft_linear(out, in[0], in[1], in[2]);
    case G_ADDMM:
        return weft_addmm_ex(out, in[2], in[0], in[1], 0.5, -1.5);
    case G_SOFTMAX:
        return weft_softmax(out, in[0], 1);
    case G_LOG_SOFTMAX:
        return weft_log_softmax(out, in[0], 0);
    case G_NLL:
        return weft_nll_loss(out, in[0], grad_target, in[1], "mean", 2);
    case G_CE:
        return weft_cross_entropy(out, in[0], grad_target, in[1], "mean", 2, 0.3);
    case G_CE_PROB:
        return weft_cross_entropy(out, in[0], in[1], NULL, "sum", -100, 0.1);
    case G_CONV:
        return weft_conv2d(out, in[0], in[1], in[2], two, 1, one, 1, one, 1, 1);
    case G_CONV_GROUPS:
        return weft_conv2d(out, in[0], in[1], NULL, one, 1, zero, 1, two, 1, 2);
    case G_CONV1D:
        return weft_conv1d(out, in[0], in[1], in[2], two, 1, one, 1, one, 1, 1);
    case G_MAXPOOL:
        return weft_max_pool2d(out, in[0], two, 1, NULL, 0, zero, 1, one, 1, false);
    case G_AVGPOOL:
        return weft_avg_pool2d(out, in[0], (int64_t[]){3}, 1, two, 1, one, 1, true, false, NULL);
    case G_ADAPTIVE:
        return weft_adaptive_avg_pool2d(out, in[0], (int64_t[]){2, 3}, 2);
    case G_MSE:
        return weft_mse_loss(out, in[0], in[1], "mean");
    case G_L1:
        return weft_l1_loss(out, in[0], in[1], "sum");
    case G_SMOOTH_L1:
        return weft_smooth_l1_loss(out, in[0], in[1], "none", 0.5);
    case G_BCE:
        return weft_binary_cross_entropy(out, in[0], in[1], NULL, "mean");
    case G_BCE_LOGITS:
        return weft_binary_cross_entropy_with_logits(out, in[0], in[1], NULL, in[2], "mean");
    case G_BATCH_NORM:
        return weft_batch_norm(out, in[0], in[1], in[2], NULL, NULL, true, 0.1, 1e-5);
    case G_LAYER_NORM:
        return weft_layer_norm(out, in[0], (int64_t[]){4}, 1, in[1], in[2], 1e-5);
    default:
        return WEFT_EINVAL;
    }
}

static weft_tensor *grad_input(const int64_t *sizes, int nd, double lo, double hi, bool requires)
{
    weft_tensor *t = rnd(WEFT_FLOAT64, sizes, nd, lo, hi);
    if (t && requires)
        weft_tensor_set_requires_grad(t, true);
    return t;
}

static void test_gradients(void)
{
    int64_t n4 = 4;
    grad_target = keep_int64(&n4, 1, (const int64_t[]){1, 2, 0, 3});
    for (int op = 0; op < G_COUNT; op++) {
        weft_tensor *in[3] = {NULL, NULL, NULL};
        int n = 1;
        switch ((enum grad_op)op) {
        case G_LINEAR:
            in[0] = grad_input((int64_t[]){3, 4}, 2, -1, 1, true);
            in[1] = grad_input((int64_t[]){2, 4}, 2, -1, 1, true);
            in[2] = grad_input((int64_t[]){2}, 1, -1, 1, true);
            n = 3;
            break;
        case G_ADDMM:
            in[0] = grad_input((int64_t[]){3, 4}, 2, -1, 1, true);
            in[1] = grad_input((int64_t[]){4, 2}, 2, -1, 1, true);
            in[2] = grad_input((int64_t[]){3, 1}, 2, -1, 1, true);
            n = 3;
            break;
        case G_SOFTMAX:
        case G_LOG_SOFTMAX:
            in[0] = grad_input((int64_t[]){3, 4, 2}, 3, -2, 2, true);
            break;
        case G_NLL:
        case G_CE:
            in[0] = grad_input((int64_t[]){4, 4}, 2, -2, 2, true);
            in[1] = grad_input((int64_t[]){4}, 1, 0.5, 2, false);
            n = 2;
            break;
        case G_CE_PROB:
            in[0] = grad_input((int64_t[]){2, 3, 2}, 3, -2, 2, true);
            in[1] = grad_input((int64_t[]){2, 3, 2}, 3, 0, 1, false);
            n = 2;
            break;
        case G_CONV:
            in[0] = grad_input((int64_t[]){2, 2, 5, 4}, 4, -1, 1, true);
            in[1] = grad_input((int64_t[]){3, 2, 3, 2}, 4, -1, 1, true);
            in[2] = grad_input((int64_t[]){3}, 1, -1, 1, true);
            n = 3;
            break;
        case G_CONV_GROUPS:
            in[0] = grad_input((int64_t[]){1, 4, 5, 5}, 4, -1, 1, true);
            in[1] = grad_input((int64_t[]){2, 2, 2, 2}, 4, -1, 1, true);
            n = 2;
            break;
        case G_CONV1D:
            in[0] = grad_input((int64_t[]){2, 2, 7}, 3, -1, 1, true);
            in[1] = grad_input((int64_t[]){3, 2, 3}, 3, -1, 1, true);
            in[2] = grad_input((int64_t[]){3}, 1, -1, 1, true);
            n = 3;
            break;
        case G_MAXPOOL: /* distinct values: no ties for finite differences */
        case G_AVGPOOL:
        case G_ADAPTIVE:
            in[0] = grad_input((int64_t[]){2, 1, 5, 6}, 4, -1, 1, true);
            if (op == G_MAXPOOL) {
                double *p = weft_tensor_data_ptr(in[0]);
                for (int i = 0; i < 60; i++)
                    p[i] = (double)((i * 37) % 60) / 10.0;
            }
            break;
        case G_MSE:
        case G_L1:
        case G_SMOOTH_L1:
            in[0] = grad_input((int64_t[]){3, 4}, 2, -2, 2, true);
            in[1] = grad_input((int64_t[]){3, 4}, 2, -2, 2, true);
            n = 2;
            break;
        case G_BCE:
            in[0] = grad_input((int64_t[]){3, 4}, 2, 0.1, 0.9, true);
            in[1] = grad_input((int64_t[]){3, 4}, 2, 0, 1, true);
            n = 2;
            break;
        case G_BCE_LOGITS:
            in[0] = grad_input((int64_t[]){3, 4}, 2, -3, 3, true);
            in[1] = grad_input((int64_t[]){3, 4}, 2, 0, 1, true);
            in[2] = grad_input((int64_t[]){4}, 1, 0.5, 3, true);
            n = 3;
            break;
        case G_BATCH_NORM:
        case G_LAYER_NORM:
            in[0] = grad_input((int64_t[]){3, 2, 4}, 3, -2, 2, true);
            in[1] = grad_input((int64_t[]){op == G_BATCH_NORM ? 2 : 4}, 1, 0.5, 1.5, true);
            in[2] = grad_input((int64_t[]){op == G_BATCH_NORM ? 2 : 4}, 1, -1, 1, true);
            n = 3;
            break;
        default:
            break;
        }
        int rc = weft_gradcheck(apply_grad_op, (void *)(intptr_t)op, in, n, 1e-6, 1e-6, 1e-4);
        if (!ok(rc == 0, "gradcheck: %s", grad_names[op]))
            diag("%s", weft_last_error());
        drop_all();
        grad_target = keep_int64(&n4, 1, (const int64_t[]){1, 2, 0, 3});
    }
    /* a weight that requires grad is refused, not silently ignored */
    weft_tensor *x = grad_input((int64_t[]){4, 4}, 2, -1, 1, true);
    weft_tensor *w = grad_input((int64_t[]){4}, 1, 0.5, 1, true), *y = NULL;
    error_is(weft_cross_entropy(&y, x, grad_target, w, "mean", -100, 0.0), WEFT_ENOTSUP, NULL,
             "cross_entropy with a weight that requires grad");
    /* differentiating twice works (values: tests/test_gradgrad.c); here the
     * rows of the gradient sum to zero, so the second derivative of their
     * sum is zero, exactly */
    weft_tensor *ce = NULL, *g = NULL;
    if (weft_cross_entropy(&ce, x, grad_target, NULL, "mean", -100, 0.0) == 0) {
        keep(ce);
        int rc = weft_autograd_grad(&g, &ce, 1, NULL, &x, 1, true, true, false);
        keep(g);
        weft_tensor *s = NULL, *gg = NULL;
        if (rc == 0 && weft_sum(&s, g, NULL, 0, false) == 0) {
            keep(s);
            rc = weft_autograd_grad(&gg, &s, 1, NULL, &x, 1, false, false, false);
            keep(gg);
        }
        double largest = NAN;
        const double *v = rc == 0 && gg ? values_of(gg) : NULL;
        for (int64_t i = 0; v && i < weft_tensor_numel(gg); i++)
            largest = i == 0 ? fabs(v[i]) : fmax(largest, fabs(v[i]));
        ok(rc == 0 && weft_tensor_requires_grad(g) && largest < 1e-12,
           "a second derivative of cross_entropy (double backward)");
    }
    drop_all();
}

int main(void)
{
    if (!default_plugins_loaded())
        return done_testing();
    test_linear();
    test_softmax();
    test_losses();
    test_conv();
    test_pooling();
    test_norms();
    test_gradients();
    return done_testing();
}
