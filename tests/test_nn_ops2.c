/* tests/test_nn_ops2.c — group_norm, conv_transpose2d and interpolate
 * (upsample_nearest2d, upsample_bilinear2d) of issue 3, part B, against
 * float64 references written here with naive loops (per-group statistics,
 * a scatter-form transposed convolution, torch's source-index formulas),
 * hand-computed cases, their error paths, and every derivative against
 * finite differences (weft_gradcheck; weft_gradgradcheck where the
 * backward is itself differentiable). */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <weft/weft.h>

#include "tests/tap.h"
#include "tests/keep.h"

/* ---------------------------------------------------------------- helpers */

static uint64_t lcg = 777;
static double uniform(double lo, double hi)
{
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (hi - lo) * (double)(lcg >> 11) / 9007199254740992.0;
}

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

/* a kept float64 tensor holding values */
static weft_tensor *tensor_of(const int64_t *sizes, int nd, const double *values)
{
    weft_tensor *t = NULL;
    if (weft_empty(&t, sizes, nd, WEFT_FLOAT64, WEFT_DEVICE_CPU) != 0)
        return NULL;
    memcpy(weft_tensor_data_ptr(t), values, (size_t)weft_tensor_numel(t) * sizeof(double));
    return keep(t);
}

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__}), (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

static double tol_of(weft_dtype dt)
{
    return dt == WEFT_FLOAT64 ? 1e-12 : dt == WEFT_FLOAT32 ? 1e-5 : dt == WEFT_FLOAT16 ? 1e-2 : 5e-2;
}

/* ------------------------------------------------------------ group_norm */

static void ref_group_norm(const double *x, const double *w, const double *b, double *y,
                           int64_t N, int64_t C, int64_t HW, int64_t G, double eps)
{
    int64_t per = C / G * HW;
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            const double *xs = x + (n * C + g * (C / G)) * HW;
            double mean = 0, var = 0;
            for (int64_t i = 0; i < per; i++)
                mean += xs[i];
            mean /= (double)per;
            for (int64_t i = 0; i < per; i++)
                var += (xs[i] - mean) * (xs[i] - mean);
            var /= (double)per;
            for (int64_t i = 0; i < per; i++) {
                int64_t c = g * (C / G) + i / HW;
                double v = (xs[i] - mean) / sqrt(var + eps);
                y[(n * C + g * (C / G)) * HW + i] = v * (w ? w[c] : 1) + (b ? b[c] : 0);
            }
        }
}

static void test_group_norm(void)
{
    const weft_dtype dtypes[] = {WEFT_FLOAT64, WEFT_FLOAT32, WEFT_FLOAT16, WEFT_BFLOAT16};
    for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++) {
        weft_dtype dt = dtypes[d];
        weft_tensor *x = rnd(dt, SHAPE(2, 6, 3, 2), -2, 3), *w = rnd(dt, SHAPE(6), 0.5, 1.5);
        weft_tensor *b = rnd(dt, SHAPE(6), -1, 1), *y = NULL;
        double ref[72];
        const double *xv = values_of(x), *wv = values_of(w), *bv = values_of(b);
        ref_group_norm(xv, wv, bv, ref, 2, 6, 6, 3, 1e-5);
        char what[64];
        snprintf(what, sizeof what, "group_norm %s", weft_dtype_name(dt));
        if (ok(weft_group_norm(&y, x, 3, w, b, 1e-5) == 0 && weft_tensor_dtype(keep(y)) == dt,
               "%s keeps the dtype", what))
            check_close(y, ref, 72, tol_of(dt) * 10, what);
        else
            diag("%s", weft_last_error());
    }
    /* no affine parameters, a 3-D input, a non-contiguous input, eps */
    weft_tensor *x0 = rnd(WEFT_FLOAT64, SHAPE(4, 3, 5), -1, 1), *x = NULL, *xc = NULL, *y = NULL;
    weft_transpose(&x, x0, 0, 2); /* [5, 3, 4]: N = 5, C = 3, L = 4 */
    keep(x);
    weft_contiguous(&xc, x);
    keep(xc);
    double ref[60];
    ref_group_norm(values_of(xc), NULL, NULL, ref, 5, 3, 4, 1, 0.1);
    if (ok(weft_group_norm(&y, x, 1, NULL, NULL, 0.1) == 0, "group_norm of a transposed 3-D input"))
        check_close(keep(y), ref, 60, 1e-12, "group_norm without weight and bias");
    weft_tensor *e = NULL, *ye = NULL;
    weft_empty(&e, SHAPE(0, 4, 2), WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(e);
    ok(weft_group_norm(&ye, e, 2, NULL, NULL, 1e-5) == 0 && weft_tensor_numel(keep(ye)) == 0 &&
           weft_tensor_size(ye, 1) == 4, "group_norm of an empty batch");
    /* bad input */
    weft_tensor *res = NULL, *w5 = rnd(WEFT_FLOAT64, SHAPE(5), 0, 1);
    weft_tensor *x6 = rnd(WEFT_FLOAT64, SHAPE(2, 6, 3), 0, 1), *i6 = NULL;
    error_is(weft_group_norm(&res, x6, 4, NULL, NULL, 1e-5), WEFT_EINVAL, "num_groups=4",
             "group_norm with 6 channels in 4 groups");
    error_is(weft_group_norm(&res, x6, 3, w5, NULL, 1e-5), WEFT_ESHAPE, "[5]",
             "group_norm with a weight of 5 elements");
    error_is(weft_group_norm(&res, w5, 1, NULL, NULL, 1e-5), WEFT_ESHAPE, "[5]",
             "group_norm of a 1-D input");
    weft_to_dtype(&i6, x6, WEFT_INT64);
    keep(i6);
    error_is(weft_group_norm(&res, i6, 3, NULL, NULL, 1e-5), WEFT_EDTYPE, "int64",
             "group_norm of int64");
    ok(res == NULL, "no result after the failures");
    drop_all();
}

/* ------------------------------------------------------- conv_transpose2d */

static void ref_conv_transpose2d(const double *x, const double *w, const double *b, double *y,
                                 const int64_t *xs, const int64_t *ws, int64_t groups,
                                 const int64_t *s, const int64_t *p, const int64_t *d,
                                 int64_t OH, int64_t OW)
{
    int64_t N = xs[0], Cin = xs[1], H = xs[2], W = xs[3], Cog = ws[1], KH = ws[2], KW = ws[3];
    int64_t Cig = Cin / groups, Cout = Cog * groups;
    for (int64_t i = 0; i < N * Cout * OH * OW; i++)
        y[i] = b ? b[(i / (OH * OW)) % Cout] : 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t ci = 0; ci < Cin; ci++)
            for (int64_t ih = 0; ih < H; ih++)
                for (int64_t iw = 0; iw < W; iw++)
                    for (int64_t oc = 0; oc < Cog; oc++)
                        for (int64_t kh = 0; kh < KH; kh++)
                            for (int64_t kw = 0; kw < KW; kw++) {
                                int64_t oh = ih * s[0] - p[0] + kh * d[0];
                                int64_t ow = iw * s[1] - p[1] + kw * d[1];
                                if (oh < 0 || oh >= OH || ow < 0 || ow >= OW)
                                    continue;
                                int64_t co = (ci / Cig) * Cog + oc;
                                y[((n * Cout + co) * OH + oh) * OW + ow] +=
                                    x[((n * Cin + ci) * H + ih) * W + iw] *
                                    w[((ci * Cog + oc) * KH + kh) * KW + kw];
                            }
}

static void test_conv_transpose(void)
{
    struct {
        int64_t x[4], w[4], groups, s[2], p[2], op[2], d[2];
        bool bias;
        weft_dtype dt;
    } cases[] = {
        {{2, 3, 4, 5}, {3, 2, 3, 3}, 1, {1, 1}, {0, 0}, {0, 0}, {1, 1}, true, WEFT_FLOAT64},
        {{2, 4, 3, 3}, {4, 3, 3, 2}, 2, {2, 3}, {1, 0}, {1, 2}, {1, 1}, true, WEFT_FLOAT64},
        {{1, 2, 5, 4}, {2, 2, 2, 3}, 1, {2, 1}, {1, 1}, {0, 0}, {2, 2}, false, WEFT_FLOAT32},
        {{3, 2, 2, 2}, {2, 1, 1, 1}, 2, {1, 1}, {0, 0}, {0, 0}, {1, 1}, true, WEFT_FLOAT32},
        {{1, 2, 3, 3}, {2, 2, 3, 3}, 1, {2, 2}, {1, 1}, {1, 1}, {1, 1}, true, WEFT_BFLOAT16},
        /* output_padding at or above the stride, below the dilation */
        {{2, 2, 3, 4}, {2, 2, 2, 3}, 1, {1, 2}, {0, 1}, {1, 3}, {2, 4}, true, WEFT_FLOAT64},
        /* ... with padding at or above the stride too: inputs reach the
         * rows the output padding adds (a kernel that left them zero
         * passed the case above) */
        {{1, 1, 1, 1}, {1, 1, 2, 1}, 1, {1, 1}, {1, 0}, {1, 0}, {2, 1}, false, WEFT_FLOAT64},
        {{2, 2, 3, 3}, {2, 3, 2, 2}, 1, {1, 2}, {1, 2}, {1, 2}, {2, 3}, true, WEFT_FLOAT64},
        {{1, 4, 4, 3}, {4, 1, 3, 2}, 2, {2, 1}, {2, 1}, {3, 1}, {4, 2}, true, WEFT_FLOAT32},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        weft_dtype dt = cases[c].dt;
        weft_tensor *x = rnd(dt, cases[c].x, 4, -1, 1), *w = rnd(dt, cases[c].w, 4, -1, 1);
        weft_tensor *b = cases[c].bias ? rnd(dt, &cases[c].w[1], 1, -1, 1) : NULL, *y = NULL;
        if (b && cases[c].groups > 1) {
            weft_tensor *bb = NULL;
            int64_t cout = cases[c].w[1] * cases[c].groups;
            bb = rnd(dt, &cout, 1, -1, 1);
            b = bb;
        }
        int64_t OH = (cases[c].x[2] - 1) * cases[c].s[0] - 2 * cases[c].p[0] +
                     cases[c].d[0] * (cases[c].w[2] - 1) + cases[c].op[0] + 1;
        int64_t OW = (cases[c].x[3] - 1) * cases[c].s[1] - 2 * cases[c].p[1] +
                     cases[c].d[1] * (cases[c].w[3] - 1) + cases[c].op[1] + 1;
        int64_t count = cases[c].x[0] * cases[c].w[1] * cases[c].groups * OH * OW;
        double *ref = malloc((size_t)count * sizeof(double));
        ref_conv_transpose2d(values_of(x), values_of(w), b ? values_of(b) : NULL, ref, cases[c].x,
                             cases[c].w, cases[c].groups, cases[c].s, cases[c].p, cases[c].d, OH,
                             OW);
        int rc = weft_conv_transpose2d(&y, x, w, b, cases[c].s, 2, cases[c].p, 2, cases[c].op, 2,
                                       cases[c].groups, cases[c].d, 2);
        keep(y);
        if (ok(rc == 0 && weft_tensor_size(y, 2) == OH && weft_tensor_size(y, 3) == OW &&
                   weft_tensor_dtype(y) == dt,
               "conv_transpose2d case %zu: [%lld, %lld] output", c, (long long)OH, (long long)OW))
            check_close(y, ref, count, tol_of(dt) * 10, "conv_transpose2d");
        else
            diag("%s", weft_last_error());
        free(ref);
    }
    /* a non-contiguous input (a transposed view) gives the same result */
    weft_tensor *x0 = rnd(WEFT_FLOAT64, SHAPE(1, 2, 4, 3), -1, 1), *xt = NULL, *xc = NULL;
    weft_tensor *w = rnd(WEFT_FLOAT64, SHAPE(2, 3, 2, 2), -1, 1), *y1 = NULL, *y2 = NULL;
    weft_transpose(&xt, x0, 2, 3);
    keep(xt);
    weft_contiguous(&xc, xt);
    keep(xc);
    const int64_t one[1] = {1}, zero[1] = {0}, two[1] = {2};
    if (ok(weft_conv_transpose2d(&y1, xt, w, NULL, two, 1, one, 1, one, 1, 1, one, 1) == 0 &&
               weft_conv_transpose2d(&y2, xc, w, NULL, two, 1, one, 1, one, 1, 1, one, 1) == 0,
           "conv_transpose2d of a transposed input, one-element lists"))
        check_close(keep(y1), values_of(keep(y2)), weft_tensor_numel(y2), 0,
                    "same as the contiguous copy");
    /* bad input */
    weft_tensor *res = NULL, *w3 = rnd(WEFT_FLOAT64, SHAPE(3, 3, 2, 2), -1, 1);
    error_is(weft_conv_transpose2d(&res, x0, w3, NULL, one, 1, zero, 1, zero, 1, 1, one, 1),
             WEFT_ESHAPE, "[3, 3, 2, 2]", "conv_transpose2d with 2 input channels and a [3, ...] weight");
    error_is(weft_conv_transpose2d(&res, x0, w, NULL, one, 1, zero, 1, one, 1, 1, one, 1),
             WEFT_EINVAL, "output_padding", "output_padding not below stride or dilation");
    error_is(weft_conv_transpose2d(&res, x0, w, NULL, one, 1, zero, 1, zero, 1, 3, one, 1),
             WEFT_ESHAPE, "groups=3", "conv_transpose2d with groups not dividing C_in");
    weft_tensor *b4 = rnd(WEFT_FLOAT64, SHAPE(4), -1, 1);
    error_is(weft_conv_transpose2d(&res, x0, w, b4, one, 1, zero, 1, zero, 1, 1, one, 1),
             WEFT_ESHAPE, "3 elements", "conv_transpose2d with a bias of 4 elements");
    const int64_t big_pad[1] = {5};
    error_is(weft_conv_transpose2d(&res, x0, w, NULL, one, 1, big_pad, 1, zero, 1, 1, one, 1),
             WEFT_ESHAPE, "too small", "conv_transpose2d with padding larger than the output");
    /* sizes past int64 are refused by name, not computed (fuzz_call_boxed's
     * UBSan finding: 2 x a padding of 2^62 overflowed) */
    const int64_t huge[1] = {(int64_t)1 << 62};
    error_is(weft_conv_transpose2d(&res, x0, w, NULL, one, 1, huge, 1, zero, 1, 1, one, 1),
             WEFT_EINVAL, "int64", "conv_transpose2d with a padding of 2^62");
    error_is(weft_conv_transpose2d(&res, x0, w, NULL, huge, 1, zero, 1, zero, 1, 1, one, 1),
             WEFT_EINVAL, "int64", "conv_transpose2d with a stride of 2^62");
    weft_tensor *w2 = rnd(WEFT_FLOAT64, SHAPE(3, 2, 2, 2), -1, 1);
    error_is(weft_conv2d(&res, x0, w2, NULL, one, 1, huge, 1, one, 1, 1), WEFT_EINVAL, "int64",
             "conv2d with a padding of 2^62");
    /* a weight with 2^62 channels a group beside a 0-sized dim: times
     * groups 2 past int64 (fuzz_call_boxed's UBSan finding in conv2d's
     * channel check, through conv1d) */
    weft_tensor *wide = NULL, *wide_t = NULL, *x00 = NULL;
    is_int(weft_empty(&wide, SHAPE(1, (int64_t)1 << 62, 0, 1), WEFT_FLOAT64, WEFT_DEVICE_CPU), 0,
           "an empty [1, 2^62, 0, 1] weight");
    keep(wide);
    error_is(weft_conv2d(&res, x0, wide, NULL, one, 1, zero, 1, one, 1, 2), WEFT_ESHAPE,
             "groups=2", "conv2d with 2^62 weight channels and groups 2");
    /* conv_transpose2d: no input channels, so a [0, 2^62, 1, 1] weight */
    is_int(weft_empty(&wide_t, SHAPE(0, (int64_t)1 << 62, 1, 1), WEFT_FLOAT64, WEFT_DEVICE_CPU) |
               weft_empty(&x00, SHAPE(1, 0, 4, 3), WEFT_FLOAT64, WEFT_DEVICE_CPU),
           0, "an empty [0, 2^62, 1, 1] weight and [1, 0, 4, 3] input");
    keep(wide_t), keep(x00);
    error_is(weft_conv_transpose2d(&res, x00, wide_t, NULL, one, 1, zero, 1, zero, 1, 2, one, 1),
             WEFT_EINVAL, "int64", "conv_transpose2d with 2^62 output channels a group, groups 2");
    weft_tensor *w33 = rnd(WEFT_FLOAT64, SHAPE(3, 2, 3, 3), -1, 1);
    error_is(weft_conv2d(&res, x0, w33, NULL, one, 1, zero, 1, huge, 1, 1), WEFT_EINVAL, "int64",
             "conv2d with a dilation of 2^62 and a 3x3 kernel");
    error_is(weft_conv2d(&res, x0, w2, NULL, one, 1, zero, 1, huge, 1, 1), WEFT_ESHAPE, "larger",
             "conv2d with a dilation of 2^62 and a 2x2 kernel: a dilated kernel past the input");
    ok(res == NULL, "no result after the failures");
    drop_all();
}

/* ------------------------------------------------------------ interpolate */

static void test_interpolate(void)
{
    const double x4[4] = {0, 1, 2, 3};
    weft_tensor *x = tensor_of(SHAPE(1, 1, 2, 2), x4), *y = NULL;
    const int64_t s33[2] = {3, 3}, s44[2] = {4, 4};
    /* nearest 2x2 -> 4x4: each element four times */
    const double nearest[16] = {0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3};
    if (ok(weft_interpolate(&y, x, s44, 2, NULL, 0, "nearest", false) == 0, "nearest to size 4"))
        check_close(keep(y), nearest, 16, 0, "nearest 2x2 -> 4x4");
    /* bilinear, align_corners: the corners stay and the middles average */
    const double aligned[9] = {0, 0.5, 1, 1, 1.5, 2, 2, 2.5, 3};
    y = NULL;
    if (ok(weft_interpolate(&y, x, s33, 2, NULL, 0, "bilinear", true) == 0, "bilinear aligned to 3x3"))
        check_close(keep(y), aligned, 9, 1e-15, "bilinear align_corners 2x2 -> 3x3");
    /* bilinear without align_corners: rows and columns [0, 1/4, 3/4, 1] */
    double half[16];
    const double r[4] = {0, 0.25, 0.75, 1};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            half[i * 4 + j] = 2 * r[i] + r[j];
    double two = 2;
    y = NULL;
    if (ok(weft_interpolate(&y, x, NULL, 0, &two, 1, "bilinear", false) == 0, "bilinear, scale 2"))
        check_close(keep(y), half, 16, 1e-15, "bilinear half-pixel 2x2 -> 4x4");
    /* scale_factor is passed on: 5 -> floor(8.5) = 8 with 1/1.7, not 5/8 */
    double five[5] = {0, 1, 2, 3, 4}, s17 = 1.7;
    weft_tensor *row = tensor_of(SHAPE(1, 1, 1, 5), five);
    const double by_scale[8] = {0, 0, 1, 1, 2, 2, 3, 4}, by_size[8] = {0, 0, 1, 1, 2, 3, 3, 4};
    const int64_t s18[2] = {1, 8};
    y = NULL;
    if (ok(weft_interpolate(&y, row, NULL, 0, &s17, 1, "nearest", false) == 0 &&
               weft_tensor_size(keep(y), 3) == 8, "nearest with scale_factor 1.7 gives width 8"))
        check_close(y, by_scale, 8, 0, "nearest indices from the scale");
    y = NULL;
    if (ok(weft_interpolate(&y, row, s18, 2, NULL, 0, "nearest", false) == 0, "nearest to size 8"))
        check_close(keep(y), by_size, 8, 0, "nearest indices from the sizes");
    /* scale_factor as a pair (H, W): nearest 2x5 by (1.7, 2) is 3x10, rows
     * floor(i / 1.7) = 0, 0, 1 and columns floor(j / 2) */
    double ten[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, pair[2] = {1.7, 2}, triple[3] = {2, 2, 2};
    weft_tensor *rows2 = tensor_of(SHAPE(1, 1, 2, 5), ten);
    double by_pair[30];
    const int src_row[3] = {0, 0, 1};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 10; j++)
            by_pair[i * 10 + j] = ten[src_row[i] * 5 + j / 2];
    y = NULL;
    if (ok(weft_interpolate(&y, rows2, NULL, 0, pair, 2, "nearest", false) == 0 &&
               weft_tensor_size(keep(y), 2) == 3 && weft_tensor_size(y, 3) == 10,
           "nearest with scale_factor (1.7, 2) gives 3x10"))
        check_close(y, by_pair, 30, 0, "nearest indices from a pair of scales");
    /* bilinear by (2, 3) on 2x2: rows [0, 1/4, 3/4, 1], columns (j + 1/2) / 3 - 1/2
     * clamped to [0, 1]: [0, 0, 1/3, 2/3, 1, 1] */
    double by_23[24], rw[6] = {0, 0, 1.0 / 3, 2.0 / 3, 1, 1}, s23[2] = {2, 3};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 6; j++)
            by_23[i * 6 + j] = 2 * r[i] + rw[j];
    y = NULL;
    if (ok(weft_interpolate(&y, x, NULL, 0, s23, 2, "bilinear", false) == 0 &&
               weft_tensor_size(keep(y), 2) == 4 && weft_tensor_size(y, 3) == 6,
           "bilinear with scale_factor (2, 3) gives 4x6"))
        check_close(y, by_23, 24, 1e-15, "bilinear weights from a pair of scales");
    weft_tensor *bad = NULL;
    error_is(weft_interpolate(&bad, x, NULL, 0, triple, 3, "nearest", false), WEFT_EINVAL,
             "got 3", "scale_factor with three values for a 4-D input");
    error_is(weft_interpolate(&bad, x, NULL, 0, triple, 0, "nearest", false), WEFT_EINVAL,
             "got 0", "scale_factor with no values");
    double negative[2] = {2, -1};
    error_is(weft_interpolate(&bad, x, NULL, 0, negative, 2, "nearest", false), WEFT_EINVAL,
             "positive", "a negative scale in the pair");
    /* nearest moves elements: integers stay exact */
    const weft_dtype exact[] = {WEFT_UINT8, WEFT_INT16, WEFT_FLOAT16, WEFT_INT32, WEFT_INT64,
                                WEFT_BOOL};
    for (size_t d = 0; d < sizeof exact / sizeof *exact; d++) {
        weft_tensor *xi = NULL, *yi = NULL;
        weft_to_dtype(&xi, x, exact[d]);
        keep(xi);
        double want[16];
        for (int i = 0; i < 16; i++)
            want[i] = exact[d] == WEFT_BOOL ? nearest[i] != 0 : nearest[i];
        if (ok(weft_interpolate(&yi, xi, s44, 2, NULL, 0, "nearest", false) == 0 &&
                   weft_tensor_dtype(keep(yi)) == exact[d], "nearest of %s keeps the dtype",
               weft_dtype_name(exact[d])))
            check_close(yi, want, 16, 0, "nearest of integers");
        else
            diag("%s", weft_last_error());
    }
    /* complex128 moves both halves of each element */
    weft_tensor *xc = NULL, *yc = NULL;
    weft_to_dtype(&xc, x, WEFT_COMPLEX128);
    keep(xc);
    double _Complex *pc = weft_tensor_data_ptr(xc);
    for (int i = 0; i < 4; i++)
        pc[i] = x4[i] - 2.0 * x4[i] * _Complex_I;
    if (ok(weft_interpolate(&yc, xc, s44, 2, NULL, 0, "nearest", false) == 0, "nearest of complex128")) {
        const double _Complex *q = weft_tensor_data_ptr(keep(yc));
        int same = 1;
        for (int i = 0; i < 16; i++)
            same &= __real__ q[i] == nearest[i] && __imag__ q[i] == -2 * nearest[i];
        ok(same, "nearest of complex128 keeps both parts");
    }
    /* random inputs, every float dtype, against torch's formulas in double */
    const weft_dtype dtypes[] = {WEFT_FLOAT64, WEFT_FLOAT32, WEFT_FLOAT16};
    for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++)
        for (int align = 0; align < 2; align++) {
            weft_dtype dt = dtypes[d];
            weft_tensor *in0 = rnd(dt, SHAPE(2, 3, 5, 4), -2, 2), *in = NULL;
            weft_transpose(&in, in0, 2, 3); /* [2, 3, 4, 5], strided */
            keep(in);
            const double *v = NULL;
            weft_tensor *inc = NULL;
            weft_contiguous(&inc, in);
            v = values_of(keep(inc));
            int64_t OH = 7, OW = 3, IH = 4, IW = 5;
            double ref[2 * 3 * 7 * 3];
            for (int64_t p = 0; p < 6; p++)
                for (int64_t oh = 0; oh < OH; oh++)
                    for (int64_t ow = 0; ow < OW; ow++) {
                        double sh = align ? (double)(IH - 1) / (OH - 1) : (double)IH / OH;
                        double sw = align ? (double)(IW - 1) / (OW - 1) : (double)IW / OW;
                        double rh = align ? sh * oh : fmax(sh * (oh + 0.5) - 0.5, 0);
                        double rw = align ? sw * ow : fmax(sw * (ow + 0.5) - 0.5, 0);
                        int64_t h0 = (int64_t)rh, w0 = (int64_t)rw;
                        int64_t h1 = h0 < IH - 1 ? h0 + 1 : h0, w1 = w0 < IW - 1 ? w0 + 1 : w0;
                        double lh = rh - h0, lw = rw - w0;
                        const double *pl = v + p * IH * IW;
                        ref[(p * OH + oh) * OW + ow] =
                            (1 - lh) * ((1 - lw) * pl[h0 * IW + w0] + lw * pl[h0 * IW + w1]) +
                            lh * ((1 - lw) * pl[h1 * IW + w0] + lw * pl[h1 * IW + w1]);
                    }
            const int64_t size[2] = {OH, OW};
            y = NULL;
            char what[80];
            snprintf(what, sizeof what, "bilinear %s%s, strided input", weft_dtype_name(dt),
                     align ? " aligned" : "");
            if (ok(weft_interpolate(&y, in, size, 2, NULL, 0, "bilinear", align) == 0 &&
                       weft_tensor_dtype(keep(y)) == dt, "%s runs", what))
                check_close(y, ref, 126, tol_of(dt) * 4, what);
            else
                diag("%s", weft_last_error());
        }
    /* the backward operators by hand: nearest sums the copies */
    const double ones[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    weft_tensor *g = tensor_of(SHAPE(1, 1, 4, 4), ones), *gi = NULL;
    const int64_t in_size[4] = {1, 1, 2, 2};
    const double fours[4] = {4, 4, 4, 4};
    if (ok(weft_upsample_nearest2d_backward(&gi, g, s44, 2, in_size, 4, NULL, NULL) == 0,
           "upsample_nearest2d_backward"))
        check_close(keep(gi), fours, 4, 0, "each input element got four gradients");
    gi = NULL;
    if (ok(weft_upsample_bilinear2d_backward(&gi, g, s44, 2, in_size, 4, false, NULL, NULL) == 0,
           "upsample_bilinear2d_backward"))
        check_close(keep(gi), fours, 4, 1e-15, "bilinear weights sum to one per output");
    /* a scale that contradicts the sizes (0.5 for 2 -> 4): sources beyond
     * the input stay on its last row and column (read nothing outside it,
     * which valgrind checks in memcheck.sh); rows read x[0] and x[1] at
     * 0.5, then x[1] */
    const double x22[4] = {1, 2, 3, 4}, one_half = 0.5;
    weft_tensor *xs = tensor_of(SHAPE(1, 1, 2, 2), x22), *ys = NULL;
    if (ok(weft_upsample_bilinear2d(&ys, xs, s44, 2, false, &one_half, &one_half) == 0,
           "upsample_bilinear2d with scales that contradict the sizes")) {
        const double want[16] = {2.5, 3, 3, 3, 3.5, 4, 4, 4, 3.5, 4, 4, 4, 3.5, 4, 4, 4};
        check_close(keep(ys), want, 16, 1e-15, "sources past the input clamp to its edge");
    }
    ys = NULL;
    if (ok(weft_upsample_bilinear2d_backward(&ys, g, s44, 2, in_size, 4, false, &one_half, &one_half) == 0,
           "upsample_bilinear2d_backward with the same scales")) {
        const double want[4] = {0.25, 1.75, 1.75, 12.25};
        check_close(keep(ys), want, 4, 1e-15, "its gradient lands where the forward read");
    }
    /* bad input */
    weft_tensor *res = NULL, *x3 = rnd(WEFT_FLOAT64, SHAPE(1, 2, 3), 0, 1);
    error_is(weft_interpolate(&res, x3, s44, 2, NULL, 0, "nearest", false), WEFT_ESHAPE, "[1, 2, 3]",
             "interpolate of a 3-D input");
    error_is(weft_interpolate(&res, x, s44, 2, &two, 1, "nearest", false), WEFT_EINVAL,
             "only one of size or scale_factor", "interpolate with size and scale_factor");
    error_is(weft_interpolate(&res, x, NULL, 0, NULL, 0, "nearest", false), WEFT_EINVAL,
             "either size or scale_factor", "interpolate with neither");
    error_is(weft_interpolate(&res, x, s44, 2, NULL, 0, "bicubic", false), WEFT_EINVAL, "'bicubic'",
             "interpolate with mode bicubic");
    error_is(weft_interpolate(&res, x, s44, 2, NULL, 0, "nearest", true), WEFT_EINVAL,
             "align_corners", "nearest with align_corners");
    const int64_t zero_size[2] = {0, 3};
    error_is(weft_upsample_nearest2d(&res, x, zero_size, 2, NULL, NULL), WEFT_EINVAL, "[0, 3]",
             "upsample to a zero size");
    /* a scale so small that its inverse is inf in float (a direct call with
     * sizes of its own): 0 * inf is NaN, which was converted to an index
     * (UBSan, the fuzzer's finding); the first output reads the first
     * row and column, the rest the last */
    {
        const double tiny = 1e-39;
        const double q[4] = {1, 2, 3, 4};
        weft_tensor *x22 = tensor_of(SHAPE(1, 1, 2, 2), q), *up = NULL;
        const double want[9] = {1, 2, 2, 3, 4, 4, 3, 4, 4};
        if (ok(weft_upsample_nearest2d(&up, x22, s33, 2, &tiny, &tiny) == 0,
               "upsample_nearest2d with a scale whose inverse overflows"))
            check_close(keep(up), want, 9, 0, "  reads the first, then the last row and column");
        up = NULL;
        if (ok(weft_upsample_bilinear2d(&up, x22, s33, 2, false, &tiny, &tiny) == 0,
               "upsample_bilinear2d with that scale"))
            check_close(keep(up), (const double[]){4, 4, 4, 4, 4, 4, 4, 4, 4}, 9, 0,
                        "  reads the last row and column");
        up = NULL;
    }
    weft_tensor *xi = NULL;
    weft_to_dtype(&xi, x, WEFT_INT32);
    keep(xi);
    error_is(weft_interpolate(&res, xi, s44, 2, NULL, 0, "bilinear", false), WEFT_EDTYPE, "int32",
             "bilinear of int32");
    error_is(weft_upsample_bilinear2d_backward(&res, g, s33, 2, in_size, 4, false, NULL, NULL),
             WEFT_ESHAPE, "[1, 1, 4, 4]", "upsample backward with a mismatched grad_output");
    ok(res == NULL, "no result after the failures");
    drop_all();
}

/* ------------------------------------------------------------ gradients */

enum grad_op { G_GROUP_NORM, G_CONV_T, G_CONV_T_GROUPS, G_CONV_T_WIDE_PAD, G_CONV_T_PAD_REACH, G_CONV2D, G_NEAREST, G_NEAREST_SCALE, G_BILINEAR,
               G_BILINEAR_ALIGNED, G_COUNT };
static const char *const grad_names[G_COUNT] = {
    "group_norm", "conv_transpose2d", "conv_transpose2d (groups, stride, output_padding)",
    "conv_transpose2d (output_padding above the stride)",
    "conv_transpose2d (output_padding and padding at the stride, dilation 2)", "conv2d (groups, stride, padding, dilation)",
    "interpolate nearest", "interpolate nearest (scale 1.5)", "interpolate bilinear",
    "interpolate bilinear (align_corners)"};

static int apply_grad_op(weft_tensor **out, weft_tensor *const *in, int n, void *ctx)
{
    static const int64_t one[1] = {1}, two[1] = {2}, zero[1] = {0}, size[2] = {5, 3};
    static const double scale = 1.5;
    (void)n;
    switch ((enum grad_op)(intptr_t)ctx) {
    case G_GROUP_NORM:
        return weft_group_norm(out, in[0], 2, in[1], in[2], 1e-5);
    case G_CONV_T:
        return weft_conv_transpose2d(out, in[0], in[1], in[2], one, 1, zero, 1, zero, 1, 1, one, 1);
    case G_CONV_T_GROUPS:
        return weft_conv_transpose2d(out, in[0], in[1], in[2], two, 1, one, 1, one, 1, 2, one, 1);
    case G_CONV_T_WIDE_PAD:
        return weft_conv_transpose2d(out, in[0], in[1], in[2], one, 1, zero, 1, one, 1, 1, two, 1);
    case G_CONV_T_PAD_REACH:
        return weft_conv_transpose2d(out, in[0], in[1], in[2], one, 1, one, 1, one, 1, 1, two, 1);
    case G_CONV2D:
        return weft_conv2d(out, in[0], in[1], in[2], two, 1, one, 1, two, 1, 2);
    case G_NEAREST:
        return weft_interpolate(out, in[0], size, 2, NULL, 0, "nearest", false);
    case G_NEAREST_SCALE:
        return weft_interpolate(out, in[0], NULL, 0, &scale, 1, "nearest", false);
    case G_BILINEAR:
        return weft_interpolate(out, in[0], size, 2, NULL, 0, "bilinear", false);
    case G_BILINEAR_ALIGNED:
        return weft_interpolate(out, in[0], size, 2, NULL, 0, "bilinear", true);
    default:
        return WEFT_EINVAL;
    }
}

static weft_tensor *grad_input(const int64_t *sizes, int nd)
{
    weft_tensor *t = rnd(WEFT_FLOAT64, sizes, nd, -1, 1);
    weft_tensor_set_requires_grad(t, true);
    return t;
}

static void test_gradients(void)
{
    for (int op = 0; op < G_COUNT; op++) {
        weft_tensor *in[3] = {NULL, NULL, NULL};
        int n = 1;
        switch ((enum grad_op)op) {
        case G_GROUP_NORM:
            in[0] = grad_input(SHAPE(2, 4, 3));
            in[1] = grad_input(SHAPE(4));
            in[2] = grad_input(SHAPE(4));
            n = 3;
            break;
        case G_CONV_T:
            in[0] = grad_input(SHAPE(1, 2, 3, 3));
            in[1] = grad_input(SHAPE(2, 3, 2, 2));
            in[2] = grad_input(SHAPE(3));
            n = 3;
            break;
        case G_CONV_T_GROUPS:
            in[0] = grad_input(SHAPE(1, 4, 2, 3));
            in[1] = grad_input(SHAPE(4, 1, 3, 2));
            in[2] = grad_input(SHAPE(2));
            n = 3;
            break;
        case G_CONV_T_WIDE_PAD:
            in[0] = grad_input(SHAPE(1, 2, 2, 3));
            in[1] = grad_input(SHAPE(2, 2, 2, 2));
            in[2] = grad_input(SHAPE(2));
            n = 3;
            break;
        case G_CONV_T_PAD_REACH:
            in[0] = grad_input(SHAPE(1, 2, 3, 2));
            in[1] = grad_input(SHAPE(2, 2, 2, 3));
            in[2] = grad_input(SHAPE(2));
            n = 3;
            break;
        case G_CONV2D:
            in[0] = grad_input(SHAPE(1, 4, 5, 5));
            in[1] = grad_input(SHAPE(2, 2, 2, 2));
            in[2] = grad_input(SHAPE(2));
            n = 3;
            break;
        default:
            in[0] = grad_input(SHAPE(1, 2, 3, 2));
            break;
        }
        int rc = weft_gradcheck(apply_grad_op, (void *)(intptr_t)op, in, n, 1e-6, 1e-6, 1e-4);
        if (!ok(rc == 0, "gradcheck: %s", grad_names[op]))
            diag("%s", weft_last_error());
        /* every one differentiates twice: the convolution and upsample
         * backward operators have formulas of their own */
        rc = weft_gradgradcheck(apply_grad_op, (void *)(intptr_t)op, in, n, 1e-6, 1e-6, 1e-4);
        if (!ok(rc == 0, "gradgradcheck: %s", grad_names[op]))
            diag("%s", weft_last_error());
        drop_all();
    }
}

int main(void)
{
    int loaded = weft_load_default_plugins();
    if (!ok(loaded >= 1, "the default plugins load (%d)", loaded))
        return done_testing();
    test_group_norm();
    test_conv_transpose();
    test_interpolate();
    test_gradients();
    return done_testing();
}
