/* tests/test_cuda_nn.c — the CUDA plugin's reductions and NN kernels
 * against the CPU backend: sum/mean/prod/amax/amin/all/any over dim sets
 * with keepdim, on strided and empty inputs and odd sizes; max/min with
 * indices, argmax; var/std/norm/logsumexp; softmax and log_softmax with
 * their backward along every dim; nll_loss, cross_entropy (forward and
 * backward, weights, ignore_index), mse_loss; max_pool2d with indices and
 * its backward; upsample nearest and bilinear (both align_corners, with
 * and without scales) and their backward; conv_transpose2d; argument
 * errors before any launch; determinism (the same bits on a second run);
 * batch_norm through cuDNN (2-D to 4-D, training and eval, float32,
 * float64 and float16, with the running statistics and the backward).
 * Everywhere: the pooling, upsampling and conv_transpose2d plans'
 * arithmetic and checks, and batch_norm's route (cuDNN or composed).  Without a GPU the comparisons say SKIP and why. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#include "tests/tap.h"
#include "tests/gpu_type.h"
#include "tests/keep.h"
#include "backends/cuda/plan.h"

static const weft_device CUDA0 = {.type = TEST_GPU_TYPE, .index = 0};

static weft_tensor *rand_cpu(const int64_t *sizes, int nd, weft_dtype dtype, weft_generator *g)
{
    weft_tensor *t = NULL, *f = NULL;
    if (weft_empty(&f, sizes, nd, WEFT_FLOAT32, WEFT_DEVICE_CPU) != 0 ||
        weft_uniform_ex_(f, -2.0, 2.0, g) != 0)
        return NULL;
    keep(f);
    if (dtype == WEFT_FLOAT32)
        return f;
    return weft_to_dtype(&t, f, dtype) == 0 ? keep(t) : NULL;
}

static weft_tensor *to(const weft_tensor *t, weft_device d)
{
    weft_tensor *r = NULL;
    return t && weft_to_device(&r, t, d) == 0 ? keep(r) : NULL;
}

/* max |a - b| / (1 + |b|), a on the GPU, b on the CPU; INFINITY when
 * the shapes differ; NaNs must match. */
static double rel_diff(const weft_tensor *gpu, const weft_tensor *cpu)
{
    weft_tensor *h = gpu ? to(gpu, WEFT_DEVICE_CPU) : NULL;
    if (!h || !cpu || weft_tensor_numel(h) != weft_tensor_numel(cpu) ||
        weft_tensor_ndim(h) != weft_tensor_ndim(cpu))
        return INFINITY;
    for (int d = 0; d < weft_tensor_ndim(h); d++)
        if (weft_tensor_size(h, d) != weft_tensor_size(cpu, d))
            return INFINITY;
    const double *x = values_of(h), *y = values_of(cpu);
    double m = 0;
    for (int64_t i = 0; i < weft_tensor_numel(h); i++) {
        if (isnan(x[i]) || isnan(y[i])) {
            if (isnan(x[i]) != isnan(y[i]))
                return INFINITY;
            continue;
        }
        if (isinf(x[i]) || isinf(y[i])) {
            if (x[i] != y[i])
                return INFINITY;
            continue;
        }
        double d = fabs(x[i] - y[i]) / (1 + fabs(y[i]));
        if (d > m)
            m = d;
    }
    return m;
}

static bool same_bits(const weft_tensor *a, const weft_tensor *b)
{
    weft_tensor *ha = to(a, WEFT_DEVICE_CPU), *hb = to(b, WEFT_DEVICE_CPU);
    if (!ha || !hb || weft_tensor_numel(ha) != weft_tensor_numel(hb))
        return false;
    return memcmp(weft_tensor_data_ptr(ha), weft_tensor_data_ptr(hb),
                  (size_t)weft_tensor_numel(ha) * weft_dtype_size(weft_tensor_dtype(ha))) == 0;
}

/* ------------------------------------------------------------- plans */

static void plan_checks(void)
{
    wfc_pool2d p;
    char err[200];
    ok(wfc_plan_pool2d(&p, (const int64_t[]){2}, 1, NULL, 0, (const int64_t[]){0}, 1,
                       (const int64_t[]){1}, 1, err, sizeof err) == 0 &&
           p.kh == 2 && p.kw == 2 && p.sh == 2 && p.sw == 2,
       "pool plan: an empty stride means the kernel size");
    ok(wfc_plan_pool2d(&p, (const int64_t[]){3, 2}, 2, (const int64_t[]){1, 2}, 2,
                       (const int64_t[]){1, 1}, 2, (const int64_t[]){1, 1}, 2, err, sizeof err) == 0 &&
           p.kh == 3 && p.kw == 2 && p.sw == 2 && p.pw == 1,
       "pool plan: per-axis values");
    ok(wfc_plan_pool2d(&p, (const int64_t[]){2}, 1, NULL, 0, (const int64_t[]){2}, 1, NULL, 0, err,
                       sizeof err) < 0 && strstr(err, "half"),
       "pool plan: padding over half the kernel is refused: %s", err);
    ok(wfc_plan_pool2d(&p, (const int64_t[]){0}, 1, NULL, 0, NULL, 0, NULL, 0, err, sizeof err) < 0 &&
           strstr(err, "positive"), "pool plan: a zero kernel is refused: %s", err);
    ok(wfc_plan_pool2d(&p, (const int64_t[]){2, 2, 2}, 3, NULL, 0, NULL, 0, NULL, 0, err,
                       sizeof err) < 0, "pool plan: three kernel sizes are refused: %s", err);
    ok(wfc_plan_pool_out(28, 2, 2, 0, 1, false) == 14 && wfc_plan_pool_out(7, 2, 2, 0, 1, false) == 3 &&
           wfc_plan_pool_out(7, 2, 2, 0, 1, true) == 4 && wfc_plan_pool_out(5, 3, 2, 1, 1, true) == 3,
       "pool plan: output lengths as torch computes them (floor, ceil, ceil's last window inside)");
    ok(wfc_plan_pool_out(1, 3, 1, 0, 1, false) == 0, "pool plan: a window larger than the input "
       "gives no output");
    ok(wfc_plan_pool_out(1, 3, 3, 0, 1, true) == 1, "pool plan: but one with ceil_mode, as torch "
       "(the CPU plugin's and the CUDA plan's rules once differed here)");
    wfc_conv2d cg;
    const int64_t in[4] = {2, 6, 9, 11}, wt[4] = {4, 3, 3, 3};
    ok(wfc_plan_conv2d(&cg, in, 4, wt, 4, (const int64_t[]){2}, 1, (const int64_t[]){1}, 1,
                       (const int64_t[]){1}, 1, 2, err, sizeof err) == 0 &&
           cg.oh == 5 && cg.ow == 6 && cg.groups == 2,
       "conv plan: [2,6,9,11] by [4,3,3,3], stride 2, padding 1, groups 2 gives 5x6");
    ok(wfc_plan_conv2d(&cg, in, 4, wt, 4, NULL, 0, NULL, 0, (const int64_t[]){2, 3}, 2, 2, err,
                       sizeof err) == 0 && cg.oh == 5 && cg.ow == 5,
       "conv plan: dilation 2x3 without padding gives 5x5");
    ok(wfc_plan_conv2d(&cg, in, 4, wt, 4, NULL, 0, NULL, 0, NULL, 0, 1, err, sizeof err) < 0 &&
           strstr(err, "groups"), "conv plan: 6 channels for a weight of 3 without groups is "
       "refused: %s", err);
    ok(wfc_plan_conv2d(&cg, in, 4, (const int64_t[]){4, 6, 12, 3}, 4, NULL, 0, NULL, 0, NULL, 0,
                       1, err, sizeof err) < 0 && strstr(err, "larger"),
       "conv plan: a kernel taller than the input is refused: %s", err);
    ok(wfc_plan_conv2d(&cg, in, 3, wt, 4, NULL, 0, NULL, 0, NULL, 0, 1, err, sizeof err) < 0,
       "conv plan: a 3-D input is not the plan's case: %s", err);
    ok(wfc_plan_conv2d(&cg, in, 4, wt, 4, (const int64_t[]){0}, 1, NULL, 0, NULL, 0, 2, err,
                       sizeof err) < 0 && strstr(err, "positive"), "conv plan: stride 0: %s", err);
    /* sizes near int64's limit beside a 0-sized dim (the CPU's UBSan
     * finding): refused, no overflow */
    ok(wfc_plan_conv2d(&cg, in, 4, (const int64_t[]){4, (int64_t)1 << 62, 0, 3}, 4, NULL, 0, NULL,
                       0, NULL, 0, 2, err, sizeof err) < 0 && strstr(err, "groups"),
       "conv plan: 2^62 weight channels times groups 2 is refused: %s", err);
    ok(wfc_plan_conv2d(&cg, in, 4, wt, 4, NULL, 0, (const int64_t[]){(int64_t)1 << 62}, 1, NULL,
                       0, 2, err, sizeof err) < 0 && strstr(err, "int64"),
       "conv plan: padding 2^62 is refused: %s", err);
    int64_t chunks, len;
    wfc_plan_reduce_split(1, (int64_t)1 << 28, &chunks, &len);
    ok(chunks > 1 && chunks * len >= (int64_t)1 << 28 && (chunks - 1) * len < (int64_t)1 << 28,
       "reduce plan: one long row is cut into %lld pieces of %lld", (long long)chunks,
       (long long)len);
    wfc_plan_reduce_split(100000, 64, &chunks, &len);
    ok(chunks == 1 && len == 64, "reduce plan: many short rows stay whole");
    wfc_plan_reduce_split(0, 0, &chunks, &len);
    ok(chunks == 1 && len == 0, "reduce plan: nothing to reduce");
}

/* batch_norm's route (norm.c through plan.c): which calls cuDNN takes and
 * the [N, C, S, 1] view it gets. */
static void plan_batch_norm_checks(void)
{
    const int64_t x4[4] = {6, 5, 7, 9}, x2[2] = {8, 3}, x3[3] = {4, 3, 10}, one[4] = {1, 3, 1, 1};
    wfc_bn_query q = {.training = true, .ndim = 4, .sizes = x4, .input = WFC_BN_FLOAT,
                      .weight = WFC_BN_FLOAT, .bias = WFC_BN_FLOAT, .running_mean = WFC_BN_FLOAT,
                      .running_var = WFC_BN_FLOAT, .running_contiguous = true, .eps = 1e-5};
    wfc_bn_plan p;
    const char *why = NULL;
    bool r; /* the route first: ok() may read why before its condition */
    r = wfc_plan_batch_norm(&p, &q, &why);
    ok(r && p.kind == WFC_BN_TRAINING && p.n == 6 && p.c == 5 &&
           p.s == 63 && p.param == WFC_BN_FLOAT,
       "bn plan: a float32 4-D training call goes to cuDNN as [6, 5, 63, 1]");
    wfc_bn_query e = q;
    e.training = false;
    r = wfc_plan_batch_norm(&p, &e, &why);
    ok(r && p.kind == WFC_BN_INFERENCE,
       "bn plan: eval with both running statistics is cuDNN's inference");
    e.running_var = WFC_BN_ABSENT;
    r = wfc_plan_batch_norm(&p, &e, &why);
    ok(r && p.kind == WFC_BN_TRAINING,
       "bn plan: eval without running_var normalises with batch statistics (cuDNN's training)");
    wfc_bn_query t = q;
    t.ndim = 2, t.sizes = x2, t.input = t.weight = t.bias = t.running_mean = t.running_var =
                                   WFC_BN_DOUBLE;
    r = wfc_plan_batch_norm(&p, &t, &why);
    ok(r && p.n == 8 && p.c == 3 && p.s == 1 &&
           p.param == WFC_BN_DOUBLE, "bn plan: a float64 [8, 3] input is [8, 3, 1, 1]");
    t = q, t.ndim = 3, t.sizes = x3, t.weight = t.bias = WFC_BN_ABSENT;
    r = wfc_plan_batch_norm(&p, &t, &why);
    ok(r && p.s == 10,
       "bn plan: a [4, 3, 10] input without weight or bias is [4, 3, 10, 1]");
    t = q, t.input = WFC_BN_HALF, t.weight = WFC_BN_HALF;
    r = wfc_plan_batch_norm(&p, &t, &why);
    ok(r && p.param == WFC_BN_FLOAT,
       "bn plan: float16 input, float32 statistics (a float16 weight is converted)");
    t.running_mean = WFC_BN_HALF;
    r = wfc_plan_batch_norm(&p, &t, &why);
    ok(!r && strstr(why, "running"),
       "bn plan: float16 running statistics stay off cuDNN: %s", why);
    t = q, t.input = WFC_BN_BFLOAT16;
    r = wfc_plan_batch_norm(&p, &t, &why);
    ok(!r && strstr(why, "bfloat16"), "bn plan: %s", why);
    t = q, t.running_var = WFC_BN_DOUBLE;
    r = wfc_plan_batch_norm(&p, &t, &why);
    ok(!r, "bn plan: a float64 running_var of a float32 input "
       "is not cuDNN's: %s", why);
    t = q, t.running_contiguous = false;
    r = wfc_plan_batch_norm(&p, &t, &why);
    ok(!r && strstr(why, "strided"), "bn plan: %s", why);
    t = q, t.eps = 1e-6, t.min_eps = 1e-5;
    r = wfc_plan_batch_norm(&p, &t, &why);
    ok(!r && strstr(why, "eps"),
       "bn plan: eps below cuDNN's minimum: %s", why);
    t.eps = NAN, t.min_eps = 0;
    r = wfc_plan_batch_norm(&p, &t, &why);
    ok(!r, "bn plan: a NaN eps: %s", why);
    t = q, t.sizes = one;
    r = wfc_plan_batch_norm(&p, &t, &why);
    ok(!r && strstr(why, "one value"),
       "bn plan: one value per channel in training is the CPU's error: %s", why);
    t.training = false;
    r = wfc_plan_batch_norm(&p, &t, &why);
    ok(r, "bn plan: one value per channel in eval is fine");
    const int64_t empty[4] = {0, 5, 7, 9};
    t = q, t.sizes = empty;
    r = wfc_plan_batch_norm(&p, &t, &why);
    ok(!r && strstr(why, "empty"), "bn plan: %s", why);
    const int64_t huge[3] = {1 << 16, 64, 1 << 16};
    t = q, t.ndim = 3, t.sizes = huge;
    r = wfc_plan_batch_norm(&p, &t, &why);
    ok(!r && strstr(why, "int"), "bn plan: 2^38 elements: %s",
       why);
    t = q, t.ndim = 1;
    r = wfc_plan_batch_norm(&p, &t, &why);
    ok(!r, "bn plan: a 1-D input: %s", why);
    wfc_bn_query b = {.backward = true, .training = true, .ndim = 4, .sizes = x4,
                      .input = WFC_BN_FLOAT, .weight = WFC_BN_ABSENT, .grad = WFC_BN_FLOAT,
                      .save_mean = WFC_BN_FLOAT, .save_invstd = WFC_BN_FLOAT};
    r = wfc_plan_batch_norm(&p, &b, &why);
    ok(r && p.kind == WFC_BN_BACKWARD,
       "bn plan: the training backward goes to cuDNN");
    b.training = false;
    r = wfc_plan_batch_norm(&p, &b, &why);
    ok(!r && strstr(why, "eval"), "bn plan: %s", why);
    b.training = true, b.grad = WFC_BN_DOUBLE;
    r = wfc_plan_batch_norm(&p, &b, &why);
    ok(!r, "bn plan: grad of another dtype: %s", why);
    b.grad = WFC_BN_HALF, b.input = WFC_BN_HALF;
    r = wfc_plan_batch_norm(&p, &b, &why);
    ok(r, "bn plan: float16 backward with float32 statistics");
    b.save_mean = WFC_BN_HALF;
    r = wfc_plan_batch_norm(&p, &b, &why);
    ok(!r, "bn plan: float16 saved statistics: %s", why);
}

/* Upsampling's axis tables and their source ranges, conv_transpose2d's
 * geometry: the host plans of upsample.c and conv.c. */
static void plan_upsample_checks(void)
{
    int64_t i0[64], i1[64], first[64], end[64];
    double l0[64], l1[64];
    wfc_plan_upsample_axis(3, 7, false, false, NULL, false, i0, i1, l0, l1);
    ok(i0[0] == 0 && i0[2] == 0 && i0[3] == 1 && i0[4] == 1 && i0[5] == 2 && i0[6] == 2 &&
           i1[6] == 2 && l0[3] == 1 && l1[3] == 0,
       "upsample plan: nearest 3 -> 7 reads floor(o * 3/7)");
    wfc_plan_upsample_sources(i0, 7, 3, false, first, end);
    ok(first[0] == 0 && end[0] == 3 && first[1] == 3 && end[1] == 5 && first[2] == 5 &&
           end[2] == 7, "upsample plan: nearest 3 -> 7, input i is read by [0,3), [3,5), [5,7)");
    wfc_plan_upsample_axis(2, 4, true, false, NULL, false, i0, i1, l0, l1);
    ok(i0[0] == 0 && i0[1] == 0 && i0[2] == 0 && i0[3] == 1 && i1[0] == 1 && i1[3] == 1 &&
           l1[0] == 0 && l1[1] == 0.25 && l1[2] == 0.75 && l1[3] == 0.25 && l0[2] == 0.25,
       "upsample plan: bilinear 2 -> 4 without align_corners (the pixel-area mapping)");
    wfc_plan_upsample_axis(3, 5, true, true, NULL, true, i0, i1, l0, l1);
    ok(i0[0] == 0 && i0[1] == 0 && i0[2] == 1 && i0[4] == 2 && l1[1] == 0.5 && l1[2] == 0 &&
           i1[4] == 2, "upsample plan: bilinear 3 -> 5 with align_corners hits the corners");
    const double half = 0.5;
    wfc_plan_upsample_axis(8, 4, false, false, &half, false, i0, i1, l0, l1);
    ok(i0[1] == 2 && i0[3] == 6, "upsample plan: nearest with scale 0.5 reads every second input");
    /* every output that reads input i lies in [first[i], end[i]), over
     * many shapes, scales and both modes */
    bool covered = true, tight = true;
    for (int64_t in = 1; in <= 9; in++)
        for (int64_t out = 1; out <= 20; out++)
            for (int mode = 0; mode < 4; mode++) {
                bool linear = mode > 0, align = mode == 2;
                double scale = (double)out / (double)in * 1.01;
                wfc_plan_upsample_axis(in, out, linear, align, mode == 3 ? &scale : NULL, false,
                                       i0, i1, l0, l1);
                if (wfc_plan_upsample_sources(i0, out, in, linear, first, end) < 0)
                    covered = false;
                for (int64_t i = 0; i < in; i++) {
                    int64_t readers = 0;
                    for (int64_t o = 0; o < out; o++) {
                        bool reads = i0[o] == i || (linear && i1[o] == i);
                        readers += reads;
                        if (reads && (o < first[i] || o >= end[i]))
                            covered = false;
                        if (i0[o] >= in || i1[o] >= in)
                            covered = false;
                    }
                    if (end[i] - first[i] > readers + 1) /* at most one extra (an i1 = i0 edge) */
                        tight = false;
                }
            }
    ok(covered, "upsample plan: the source ranges hold every output that reads an input, no "
       "index past the input");
    ok(tight, "upsample plan: the ranges hold little else");

    wfc_conv_transpose2d t;
    char err[300];
    const int64_t in[4] = {2, 4, 5, 5}, wt[4] = {4, 3, 3, 3}, two = 2, one = 1;
    ok(wfc_plan_conv_transpose2d(&t, in, 4, wt, 4, &two, 1, &one, 1, &one, 1, &one, 1, 1, err,
                                 sizeof err) == 0 &&
           t.out[0] == 2 && t.out[1] == 3 && t.out[2] == 10 && t.out[3] == 10 && t.extra_h == 0 &&
           t.conv.c == 3 && t.conv.oc == 4 && t.conv.h == 10 && t.conv.oh == 5,
       "conv_transpose2d plan: [2,4,5,5] by [4,3,3,3], stride 2, padding 1, output_padding 1 "
       "gives [2,3,10,10], the input gradient of a 10x10 conv2d");
    ok(wfc_plan_conv_transpose2d(&t, in, 4, (const int64_t[]){4, (int64_t)1 << 62, 0, 3}, 4,
                                 &one, 1, &one, 1, NULL, 0, &one, 1, 2, err, sizeof err) < 0 &&
           strstr(err, "int64"),
       "conv_transpose2d plan: 2^62 output channels per group times 2 is refused: %s", err);
    const int64_t big = (int64_t)1 << 62;
    ok(wfc_plan_conv_transpose2d(&t, in, 4, wt, 4, &big, 1, &one, 1, NULL, 0, &one, 1, 1, err,
                                 sizeof err) < 0 && strstr(err, "int64"),
       "conv_transpose2d plan: stride 2^62 is refused: %s", err);
    const int64_t wt2[4] = {4, 1, 3, 3}, op2 = 2, d3 = 3;
    ok(wfc_plan_conv_transpose2d(&t, in, 4, wt2, 4, &two, 1, &one, 1, &op2, 1, &d3, 1, 2, err,
                                 sizeof err) == 0 &&
           t.out[1] == 2 && t.out[2] == 15 && t.extra_h == 1 && t.extra_w == 1 && t.conv.h == 15 &&
           t.conv.oh == 6 && t.conv.groups == 2,
       "conv_transpose2d plan: output_padding 2 with stride 2 and dilation 3: the 15x15 output's "
       "conv2d has 6x6 outputs, the input padded by a row and a column");
    const int64_t in1[4] = {1, 1, 1, 1}, wt1[4] = {1, 1, 2, 1}, d2[2] = {2, 1}, p10[2] = {1, 0},
                  op10[2] = {1, 0};
    err[0] = '\0'; /* printed below, success or not */
    ok(wfc_plan_conv_transpose2d(&t, in1, 4, wt1, 4, &one, 1, p10, 2, op10, 2, d2, 2, 1, err,
                                 sizeof err) == 0 &&
           t.out[2] == 2 && t.out[3] == 1 && t.extra_h == 1 && t.extra_w == 0 && t.conv.oh == 2,
       "conv_transpose2d plan: padding and output_padding 1 at stride 1, dilation 2 (the row "
       "output_padding adds is reached): out 2x1 from a 2x1 padded input: %s", err);
    ok(wfc_plan_conv_transpose2d(&t, in, 4, wt, 4, &two, 1, &one, 1, &two, 1, &one, 1, 1, err,
                                 sizeof err) == -1 && strstr(err, "output_padding (2)"),
       "conv_transpose2d plan: output_padding not below stride or dilation: %s", err);
    ok(wfc_plan_conv_transpose2d(&t, in, 4, wt, 4, &two, 1, &one, 1, NULL, 0, &one, 1, 0, err,
                                 sizeof err) == -1 && strstr(err, "groups"),
       "conv_transpose2d plan: groups 0: %s", err);
    ok(wfc_plan_conv_transpose2d(&t, in, 4, (const int64_t[]){3, 3, 3, 3}, 4, &two, 1, &one, 1,
                                 NULL, 0, &one, 1, 1, err, sizeof err) == -2 &&
           strstr(err, "C_in"), "conv_transpose2d plan: a weight of 3 input channels for 4: %s",
       err);
    ok(wfc_plan_conv_transpose2d(&t, (const int64_t[]){1, 4, 1, 1}, 4, (const int64_t[]){4, 3, 1, 1},
                                 4, &one, 1, &one, 1, NULL, 0, &one, 1, 1, err, sizeof err) == -2 &&
           strstr(err, "too small"), "conv_transpose2d plan: padding that leaves nothing: %s", err);
}

/* -------------------------------------------------------- reductions */

typedef int (*reduce_fn)(weft_tensor **, const weft_tensor *, const int64_t *, int, bool);

static void gpu_reductions(weft_generator *g)
{
    static const struct {
        const char *name;
        reduce_fn fn;
    } fns[] = {{"sum", weft_sum}, {"prod", weft_prod}, {"amax", weft_amax}, {"amin", weft_amin},
               {"all", weft_all}, {"any", weft_any}};
    /* dim sets over [5, 37, 3, 129]: one, two apart, all, negative */
    static const int64_t sets[][3] = {{1, 0, 0}, {0, 2, 0}, {-1, 0, 0}, {0, 1, 3}};
    static const int nsets[] = {1, 2, 1, 3};
    const int64_t shape[4] = {5, 37, 3, 129};
    static const weft_dtype dts[] = {WEFT_FLOAT32, WEFT_FLOAT64, WEFT_FLOAT16, WEFT_INT32};
    for (size_t di = 0; di < 4; di++) {
        weft_tensor *x = rand_cpu(shape, 4, dts[di], g), *xt = NULL, *gx = to(x, CUDA0), *gxt = NULL;
        /* a permuted (strided) view too */
        weft_transpose(&xt, x, 1, 3);
        keep(xt);
        weft_transpose(&gxt, gx, 1, 3);
        keep(gxt);
        double tol = dts[di] == WEFT_FLOAT16 ? 2e-2 : dts[di] == WEFT_FLOAT32 ? 1e-4 : 1e-10;
        for (size_t f = 0; f < sizeof fns / sizeof *fns; f++) {
            if (fns[f].fn == weft_prod && dts[di] != WEFT_FLOAT64)
                continue; /* products of 600 values over- and underflow differently */
            for (size_t s = 0; s < 4; s++)
                for (int keepdim = 0; keepdim < 2; keepdim++)
                    for (int strided = 0; strided < 2; strided++) {
                        weft_tensor *want = NULL, *got = NULL;
                        const weft_tensor *cx = strided ? xt : x, *cg = strided ? gxt : gx;
                        int rw = fns[f].fn(&want, cx, sets[s], nsets[s], keepdim);
                        int rg = fns[f].fn(&got, cg, sets[s], nsets[s], keepdim);
                        keep(want), keep(got);
                        double d = rw == 0 && rg == 0 ? rel_diff(got, want) : INFINITY;
                        bool dt_ok = got && want && weft_tensor_dtype(got) == weft_tensor_dtype(want);
                        ok(d <= tol * (fns[f].fn == weft_sum ? 10 : 1) && dt_ok,
                           "%s %s dims set %zu keepdim %d%s matches the CPU (rel diff %g)%s%s",
                           fns[f].name, weft_dtype_name(dts[di]), s, keepdim,
                           strided ? " strided" : "", d, rg ? ": " : "", rg ? weft_last_error() : "");
                    }
        }
        drop_all();
    }
    /* a long row (cut in pieces), mean over everything, empty inputs */
    weft_tensor *big = rand_cpu((const int64_t[]){3, 100003}, 2, WEFT_FLOAT64, g), *want = NULL,
                *got = NULL, *got2 = NULL;
    weft_sum(&want, big, NULL, 0, false);
    keep(want);
    ok(weft_sum(&got, to(big, CUDA0), NULL, 0, false) == 0 && rel_diff(keep(got), want) < 1e-12,
       "sum of 300009 float64 (pieces, then a second pass) matches the CPU");
    weft_sum(&got2, to(big, CUDA0), NULL, 0, false);
    keep(got2);
    ok(same_bits(got, got2), "the same sum twice gives the same bits");
    weft_mean_ex(&want, big, (const int64_t[]){1}, 1, true, WEFT_DTYPE_UNSET);
    keep(want);
    ok(weft_mean_ex(&got, to(big, CUDA0), (const int64_t[]){1}, 1, true, WEFT_DTYPE_UNSET) == 0 &&
           rel_diff(keep(got), want) < 1e-12, "mean along the long dim, keepdim");
    weft_tensor *empty = rand_cpu((const int64_t[]){0, 4}, 2, WEFT_FLOAT32, g);
    weft_sum(&want, empty, (const int64_t[]){0}, 1, false);
    keep(want);
    ok(weft_sum(&got, to(empty, CUDA0), (const int64_t[]){0}, 1, false) == 0 &&
           rel_diff(keep(got), want) == 0, "sum over an empty dim is zeros");
    weft_mean_ex(&want, empty, (const int64_t[]){0}, 1, false, WEFT_DTYPE_UNSET);
    keep(want);
    ok(weft_mean_ex(&got, to(empty, CUDA0), (const int64_t[]){0}, 1, false, WEFT_DTYPE_UNSET) == 0 &&
           rel_diff(keep(got), want) == 0, "mean over an empty dim is NaN, as on the CPU");
    got = (weft_tensor *)1;
    ok(weft_amax(&got, to(empty, CUDA0), (const int64_t[]){0}, 1, false) < 0 && got == NULL,
       "amax over an empty dim is an error: %s", weft_last_error());
    got = (weft_tensor *)1;
    ok(weft_sum(&got, to(big, CUDA0), (const int64_t[]){2}, 1, false) == WEFT_EINVAL && got == NULL &&
           strstr(weft_last_error(), "out of range"), "sum over dim 2 of a 2-D tensor: %s",
       weft_last_error());
    got = (weft_tensor *)1;
    ok(weft_sum(&got, to(big, CUDA0), (const int64_t[]){1, -1}, 2, false) == WEFT_EINVAL && got == NULL,
       "a repeated dim: %s", weft_last_error());
    /* int sums are int64; a 0-d input */
    weft_tensor *ints = NULL;
    weft_randint(&ints, -50, 50, (const int64_t[]){17, 33}, 2, WEFT_INT32, WEFT_DEVICE_CPU, g);
    keep(ints);
    weft_sum(&want, ints, (const int64_t[]){0}, 1, false);
    keep(want);
    ok(weft_sum(&got, to(ints, CUDA0), (const int64_t[]){0}, 1, false) == 0 &&
           weft_tensor_dtype(keep(got)) == WEFT_INT64 && rel_diff(got, want) == 0,
       "sum of int32 is int64 and exact");
    weft_tensor *scalar = NULL;
    weft_full(&scalar, NULL, 0, 3.5, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(scalar);
    weft_sum(&want, scalar, (const int64_t[]){0}, 1, true);
    keep(want);
    ok(weft_sum(&got, to(scalar, CUDA0), (const int64_t[]){0}, 1, true) == 0 &&
           rel_diff(keep(got), want) == 0, "the sum of a 0-d tensor over dim 0 is itself");
    drop_all();

    /* values with indices */
    weft_tensor *x = rand_cpu((const int64_t[]){7, 1000, 3}, 3, WEFT_FLOAT32, g);
    for (int dim = -1; dim < 3; dim++) {
        weft_tensor *wv = NULL, *wi = NULL, *gv = NULL, *gi = NULL;
        weft_max_dim(&wv, &wi, x, dim, dim == 1);
        keep(wv), keep(wi);
        int rc = weft_max_dim(&gv, &gi, to(x, CUDA0), dim, dim == 1);
        keep(gv), keep(gi);
        ok(rc == 0 && rel_diff(gv, wv) == 0 && rel_diff(gi, wi) == 0,
           "max_dim along %d: values and first indices match the CPU", dim);
        weft_min_dim(&wv, &wi, x, dim, false);
        keep(wv), keep(wi);
        rc = weft_min_dim(&gv, &gi, to(x, CUDA0), dim, false);
        keep(gv), keep(gi);
        ok(rc == 0 && rel_diff(gv, wv) == 0 && rel_diff(gi, wi) == 0, "min_dim along %d", dim);
    }
    weft_tensor *want_i = NULL, *got_i = NULL;
    weft_argmax(&want_i, x, NULL, false);
    keep(want_i);
    ok(weft_argmax(&got_i, to(x, CUDA0), NULL, false) == 0 && rel_diff(keep(got_i), want_i) == 0,
       "argmax over everything is the flat index");
    weft_max(&want, x);
    keep(want);
    ok(weft_max(&got, to(x, CUDA0)) == 0 && rel_diff(keep(got), want) == 0, "max of everything");
    /* ties: the first index wins */
    weft_tensor *ties = NULL;
    weft_zeros(&ties, (const int64_t[]){4, 9}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(ties);
    weft_argmax(&want_i, ties, (const int64_t[]){1}, false);
    keep(want_i);
    ok(weft_argmax(&got_i, to(ties, CUDA0), (const int64_t[]){1}, false) == 0 &&
           rel_diff(keep(got_i), want_i) == 0, "argmax of equal values picks the first");

    /* compositions */
    weft_tensor *y = rand_cpu((const int64_t[]){9, 301}, 2, WEFT_FLOAT64, g);
    double corr = 0;
    weft_var_ex(&want, y, (const int64_t[]){1}, 1, NULL, true);
    keep(want);
    ok(weft_var_ex(&got, to(y, CUDA0), (const int64_t[]){1}, 1, NULL, true) == 0 &&
           rel_diff(keep(got), want) < 1e-12, "var (unbiased) along a dim");
    weft_std_ex(&want, y, NULL, 0, &corr, false);
    keep(want);
    ok(weft_std_ex(&got, to(y, CUDA0), NULL, 0, &corr, false) == 0 && rel_diff(keep(got), want) < 1e-12,
       "std (correction 0) of everything");
    double p2 = 2, pinf = INFINITY, p1 = 1;
    const double *ps[] = {&p2, &pinf, &p1};
    for (int i = 0; i < 3; i++) {
        weft_norm(&want, y, ps[i], (const int64_t[]){0}, 1, false);
        keep(want);
        ok(weft_norm(&got, to(y, CUDA0), ps[i], (const int64_t[]){0}, 1, false) == 0 &&
               rel_diff(keep(got), want) < 1e-12, "norm p=%g along dim 0", *ps[i]);
    }
    weft_logsumexp(&want, y, (const int64_t[]){1}, 1, false);
    keep(want);
    ok(weft_logsumexp(&got, to(y, CUDA0), (const int64_t[]){1}, 1, false) == 0 &&
           rel_diff(keep(got), want) < 1e-12, "logsumexp along dim 1");
    drop_all();
}

/* ------------------------------------------------------------ the NN set */

static void gpu_nn(weft_generator *g)
{
    static const weft_dtype dts[] = {WEFT_FLOAT32, WEFT_FLOAT64, WEFT_BFLOAT16};
    for (size_t di = 0; di < 3; di++) {
        weft_dtype dt = dts[di];
        double tol = dt == WEFT_BFLOAT16 ? 2e-2 : dt == WEFT_FLOAT32 ? 1e-5 : 1e-12;
        weft_tensor *x = rand_cpu((const int64_t[]){6, 1, 300, 5}, 4, dt, g), *gx = to(x, CUDA0);
        weft_tensor *go = rand_cpu((const int64_t[]){6, 1, 300, 5}, 4, dt, g), *ggo = to(go, CUDA0);
        for (int dim = -1; dim < 4; dim++)
            for (int lg = 0; lg < 2; lg++) {
                weft_tensor *want = NULL, *got = NULL, *wb = NULL, *gb = NULL;
                (lg ? weft_log_softmax : weft_softmax)(&want, x, dim);
                keep(want);
                int rc = (lg ? weft_log_softmax : weft_softmax)(&got, gx, dim);
                keep(got);
                ok(rc == 0 && rel_diff(got, want) <= tol, "%s %s along %d matches the CPU",
                   lg ? "log_softmax" : "softmax", weft_dtype_name(dt), dim);
                (lg ? weft__log_softmax_backward_data : weft__softmax_backward_data)(&wb, go, want, dim);
                keep(wb);
                rc = (lg ? weft__log_softmax_backward_data : weft__softmax_backward_data)(&gb, ggo, got, dim);
                keep(gb);
                ok(rc == 0 && rel_diff(gb, wb) <= tol * 4, "%s backward %s along %d",
                   lg ? "log_softmax" : "softmax", weft_dtype_name(dt), dim);
            }
        drop_all();
    }
    /* softmax of a transposed view and of -inf rows */
    weft_tensor *sq = rand_cpu((const int64_t[]){33, 65}, 2, WEFT_FLOAT32, g), *sqt = NULL, *gsqt = NULL;
    weft_t(&sqt, sq);
    keep(sqt);
    weft_t(&gsqt, to(sq, CUDA0));
    keep(gsqt);
    weft_tensor *want = NULL, *got = NULL;
    weft_softmax(&want, sqt, 1);
    keep(want);
    ok(weft_softmax(&got, gsqt, 1) == 0 && rel_diff(keep(got), want) < 1e-6,
       "softmax of a transposed view");
    got = (weft_tensor *)1;
    ok(weft_softmax(&got, gsqt, 2) == WEFT_EINVAL && got == NULL, "softmax along dim 2 of 2: %s",
       weft_last_error());

    /* losses: weights, ignore_index, every reduction, and their backward */
    const int64_t n = 37, c = 11;
    weft_tensor *logits = rand_cpu((const int64_t[]){n, c}, 2, WEFT_FLOAT32, g), *target = NULL;
    weft_randint(&target, 0, c, (const int64_t[]){n}, 1, WEFT_INT64, WEFT_DEVICE_CPU, g);
    keep(target);
    ((int64_t *)weft_tensor_data_ptr(target))[3] = 5; /* then ignored below */
    weft_tensor *w = NULL;
    weft_empty(&w, (const int64_t[]){c}, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    keep(w);
    weft_uniform_ex_(w, 0.5, 1.5, g);
    static const char *reds[] = {"mean", "sum", "none"};
    for (int r = 0; r < 3; r++)
        for (int weighted = 0; weighted < 2; weighted++)
            for (int ignore = -100; ignore <= 5; ignore += 105) {
                const weft_tensor *wc = weighted ? w : NULL, *wg = weighted ? to(w, CUDA0) : NULL;
                weft_tensor *lw = NULL, *lg = NULL;
                weft_cross_entropy(&lw, logits, target, wc, reds[r], ignore, 0.0);
                keep(lw);
                int rc = weft_cross_entropy(&lg, to(logits, CUDA0), to(target, CUDA0), wg, reds[r],
                                            ignore, 0.0);
                keep(lg);
                ok(rc == 0 && rel_diff(lg, lw) < 1e-5, "cross_entropy %s%s ignore %d matches the "
                   "CPU%s%s", reds[r], weighted ? " weighted" : "", ignore, rc ? ": " : "",
                   rc ? weft_last_error() : "");
                weft_tensor *grad = r == 2 ? rand_cpu((const int64_t[]){n}, 1, WEFT_FLOAT32, g) : NULL;
                if (!grad)
                    weft_full(&grad, NULL, 0, 0.75, WEFT_FLOAT32, WEFT_DEVICE_CPU), keep(grad);
                weft_tensor *bw = NULL, *bg = NULL;
                weft_cross_entropy_backward(&bw, grad, logits, target, wc, reds[r], ignore, 0.0);
                keep(bw);
                rc = weft_cross_entropy_backward(&bg, to(grad, CUDA0), to(logits, CUDA0),
                                                 to(target, CUDA0), wg, reds[r], ignore, 0.0);
                keep(bg);
                ok(rc == 0 && rel_diff(bg, bw) < 1e-5, "cross_entropy_backward %s%s ignore %d",
                   reds[r], weighted ? " weighted" : "", ignore);
                weft_tensor *logp = NULL;
                weft_log_softmax(&logp, logits, 1);
                keep(logp);
                weft_nll_loss(&lw, logp, target, wc, reds[r], ignore);
                keep(lw);
                rc = weft_nll_loss(&lg, to(logp, CUDA0), to(target, CUDA0), wg, reds[r], ignore);
                keep(lg);
                ok(rc == 0 && rel_diff(lg, lw) < 1e-5, "nll_loss %s%s ignore %d", reds[r],
                   weighted ? " weighted" : "", ignore);
                weft_nll_loss_backward(&bw, grad, logp, target, wc, reds[r], ignore);
                keep(bw);
                rc = weft_nll_loss_backward(&bg, to(grad, CUDA0), to(logp, CUDA0), to(target, CUDA0),
                                            wg, reds[r], ignore);
                keep(bg);
                ok(rc == 0 && rel_diff(bg, bw) < 1e-6, "nll_loss_backward %s%s ignore %d", reds[r],
                   weighted ? " weighted" : "", ignore);
            }
    /* a target out of range: a clear error naming it */
    weft_tensor *bad_t = NULL, *out = (weft_tensor *)1;
    weft_clone(&bad_t, target);
    keep(bad_t);
    ((int64_t *)weft_tensor_data_ptr(bad_t))[7] = c + 3;
    ok(weft_cross_entropy(&out, to(logits, CUDA0), to(bad_t, CUDA0), NULL, "mean", -100, 0.0) ==
               WEFT_EINVAL && out == NULL && strstr(weft_last_error(), "14"),
       "a target of 14 for 11 classes is refused: %s", weft_last_error());
    out = (weft_tensor *)1;
    ok(weft_cross_entropy(&out, to(logits, CUDA0), to(target, CUDA0), NULL, "average", -100, 0.0) ==
               WEFT_EINVAL && out == NULL, "reduction 'average' is refused: %s", weft_last_error());
    weft_tensor *mt = rand_cpu((const int64_t[]){n, c}, 2, WEFT_FLOAT32, g);
    weft_mse_loss(&want, logits, mt, "mean");
    keep(want);
    ok(weft_mse_loss(&got, to(logits, CUDA0), to(mt, CUDA0), "mean") == 0 &&
           rel_diff(keep(got), want) < 1e-6, "mse_loss mean");
    drop_all();

    /* max_pool2d: windows, padding, dilation, ceil mode, odd sizes */
    static const struct {
        int64_t k, s, p, d;
        bool ceil;
    } pools[] = {{2, 2, 0, 1, false}, {3, 2, 1, 1, false}, {3, 2, 1, 1, true}, {2, 1, 0, 2, false},
                 {3, 3, 1, 1, true}};
    weft_tensor *img = rand_cpu((const int64_t[]){3, 5, 29, 31}, 4, WEFT_FLOAT32, g), *gimg = to(img, CUDA0);
    for (size_t i = 0; i < sizeof pools / sizeof *pools; i++) {
        weft_tensor *wv = NULL, *wi = NULL, *gv = NULL, *gi = NULL, *wb = NULL, *gb = NULL;
        int rw = weft_max_pool2d_with_indices(&wv, &wi, img, &pools[i].k, 1, &pools[i].s, 1,
                                              &pools[i].p, 1, &pools[i].d, 1, pools[i].ceil);
        keep(wv), keep(wi);
        int rg = weft_max_pool2d_with_indices(&gv, &gi, gimg, &pools[i].k, 1, &pools[i].s, 1,
                                              &pools[i].p, 1, &pools[i].d, 1, pools[i].ceil);
        keep(gv), keep(gi);
        ok(rw == 0 && rg == 0 && rel_diff(gv, wv) == 0 && rel_diff(gi, wi) == 0,
           "max_pool2d k%lld s%lld p%lld d%lld%s: values and indices match the CPU%s%s",
           (long long)pools[i].k, (long long)pools[i].s, (long long)pools[i].p,
           (long long)pools[i].d, pools[i].ceil ? " ceil" : "", rg ? ": " : "",
           rg ? weft_last_error() : "");
        weft_tensor *gout = rand_cpu(wv ? weft_tensor_sizes(wv) : (const int64_t[]){1}, wv ? 4 : 1,
                                     WEFT_FLOAT32, g);
        weft_max_pool2d_with_indices_backward(&wb, gout, img, wi);
        keep(wb);
        rg = weft_max_pool2d_with_indices_backward(&gb, to(gout, CUDA0), gimg, gi);
        keep(gb);
        ok(rg == 0 && rel_diff(gb, wb) < 1e-6, "max_pool2d backward %zu (overlapping windows "
           "accumulate) matches the CPU", i);
    }
    /* avg_pool2d: padding counted or not, ceil mode, a divisor; adaptive */
    static const struct {
        int64_t k, s, p;
        bool ceil, count_pad;
        int64_t divisor;
    } avgs[] = {{2, 2, 0, false, true, 0}, {3, 2, 1, true, true, 0}, {3, 2, 1, true, false, 0},
                {3, 1, 1, false, true, 5}};
    for (size_t i = 0; i < sizeof avgs / sizeof *avgs; i++) {
        const int64_t *div = avgs[i].divisor ? &avgs[i].divisor : NULL;
        weft_tensor *wv = NULL, *gv = NULL, *wb = NULL, *gb = NULL;
        weft_avg_pool2d(&wv, img, &avgs[i].k, 1, &avgs[i].s, 1, &avgs[i].p, 1, avgs[i].ceil,
                        avgs[i].count_pad, div);
        keep(wv);
        int rg = weft_avg_pool2d(&gv, gimg, &avgs[i].k, 1, &avgs[i].s, 1, &avgs[i].p, 1,
                                 avgs[i].ceil, avgs[i].count_pad, div);
        keep(gv);
        ok(rg == 0 && rel_diff(gv, wv) < 1e-6, "avg_pool2d case %zu matches the CPU%s%s", i,
           rg ? ": " : "", rg ? weft_last_error() : "");
        weft_tensor *gout = rand_cpu(wv ? weft_tensor_sizes(wv) : (const int64_t[]){1}, wv ? 4 : 1,
                                     WEFT_FLOAT32, g);
        weft_avg_pool2d_backward(&wb, gout, img, &avgs[i].k, 1, &avgs[i].s, 1, &avgs[i].p, 1,
                                 avgs[i].ceil, avgs[i].count_pad, div);
        keep(wb);
        rg = weft_avg_pool2d_backward(&gb, to(gout, CUDA0), gimg, &avgs[i].k, 1, &avgs[i].s, 1,
                                      &avgs[i].p, 1, avgs[i].ceil, avgs[i].count_pad, div);
        keep(gb);
        ok(rg == 0 && rel_diff(gb, wb) < 1e-6, "avg_pool2d backward case %zu matches the CPU", i);
    }
    static const int64_t adapt[][2] = {{1, 1}, {7, 5}, {29, 31}, {40, 9}};
    for (size_t i = 0; i < sizeof adapt / sizeof *adapt; i++) {
        weft_tensor *wv = NULL, *gv = NULL, *wb = NULL, *gb = NULL;
        weft_adaptive_avg_pool2d(&wv, img, adapt[i], 2);
        keep(wv);
        int rg = weft_adaptive_avg_pool2d(&gv, gimg, adapt[i], 2);
        keep(gv);
        ok(rg == 0 && rel_diff(gv, wv) < 1e-6, "adaptive_avg_pool2d to %lldx%lld matches the CPU",
           (long long)adapt[i][0], (long long)adapt[i][1]);
        weft_tensor *gout = rand_cpu(wv ? weft_tensor_sizes(wv) : (const int64_t[]){1}, wv ? 4 : 1,
                                     WEFT_FLOAT32, g);
        weft_adaptive_avg_pool2d_backward(&wb, gout, img);
        keep(wb);
        rg = weft_adaptive_avg_pool2d_backward(&gb, to(gout, CUDA0), gimg);
        keep(gb);
        ok(rg == 0 && rel_diff(gb, wb) < 1e-6, "adaptive_avg_pool2d backward to %lldx%lld",
           (long long)adapt[i][0], (long long)adapt[i][1]);
    }
    weft_tensor *pv = (weft_tensor *)1, *pi = (weft_tensor *)1;
    const int64_t k2 = 2, p2 = 2;
    ok(weft_max_pool2d_with_indices(&pv, &pi, gimg, &k2, 1, NULL, 0, &p2, 1, NULL, 0, false) ==
               WEFT_EINVAL && pv == NULL && pi == NULL,
       "max_pool2d with padding 2 for kernel 2 is refused: %s", weft_last_error());
    drop_all();

    /* determinism: a training-like chain twice gives the same bits */
    weft_tensor *a = to(rand_cpu((const int64_t[]){256, 1000}, 2, WEFT_FLOAT32, g), CUDA0);
    weft_tensor *s1 = NULL, *s2 = NULL, *l1 = NULL, *l2 = NULL;
    weft_softmax(&s1, a, 1);
    keep(s1);
    weft_softmax(&s2, a, 1);
    keep(s2);
    weft_sum(&l1, s1, (const int64_t[]){0}, 1, false);
    keep(l1);
    weft_sum(&l2, s2, (const int64_t[]){0}, 1, false);
    keep(l2);
    ok(same_bits(s1, s2) && same_bits(l1, l2), "softmax and sum give the same bits twice");
    drop_all();
}

/* ------------------------------------------------------- normalisation */

static void gpu_norm(weft_generator *g)
{
    static const weft_dtype dts[] = {WEFT_FLOAT32, WEFT_FLOAT64};
    for (size_t di = 0; di < 2; di++) {
        weft_dtype dt = dts[di];
        double tol = dt == WEFT_FLOAT32 ? 1e-4 : 1e-11;
        const int64_t xs[4] = {6, 5, 7, 9}, c = 5;
        weft_tensor *x = rand_cpu(xs, 4, dt, g), *go = rand_cpu(xs, 4, dt, g);
        weft_tensor *w = rand_cpu(&c, 1, dt, g), *b = rand_cpu(&c, 1, dt, g);
        for (int training = 1; training >= 0; training--) {
            weft_tensor *rm = NULL, *rv = NULL;
            weft_zeros(&rm, &c, 1, dt, WEFT_DEVICE_CPU);
            keep(rm);
            weft_ones(&rv, &c, 1, dt, WEFT_DEVICE_CPU);
            keep(rv);
            /* running statistics with a stride of 2 (column 0 of [C, 2]):
             * cuDNN updates only contiguous ones, so this keeps the
             * composed path under test while the program pins cuDNN for
             * every call it can take (gpu_batch_norm_cudnn) */
            const int64_t c2[2] = {c, 2};
            weft_tensor *wide_m = NULL, *wide_v = NULL, *grm = NULL, *grv = NULL;
            weft_zeros(&wide_m, c2, 2, dt, WEFT_DEVICE_CPU);
            keep(wide_m);
            weft_zeros(&wide_v, c2, 2, dt, WEFT_DEVICE_CPU);
            keep(wide_v);
            weft_select(&grm, to(wide_m, CUDA0), 1, 0);
            keep(grm);
            weft_select(&grv, to(wide_v, CUDA0), 1, 0);
            keep(grv);
            weft_copy_(grm, rm);
            weft_copy_(grv, rv);
            weft_tensor *y0 = NULL, *m0 = NULL, *i0 = NULL, *y1 = NULL, *m1 = NULL, *i1 = NULL;
            weft_native_batch_norm(&y0, &m0, &i0, x, w, b, rm, rv, training, 0.1, 1e-5);
            keep(y0), keep(m0), keep(i0);
            int rc = weft_native_batch_norm(&y1, &m1, &i1, to(x, CUDA0), to(w, CUDA0), to(b, CUDA0),
                                            grm, grv, training, 0.1, 1e-5);
            keep(y1), keep(m1), keep(i1);
            ok(rc == 0 && rel_diff(y1, y0) < tol && rel_diff(m1, m0) < tol && rel_diff(i1, i0) < tol &&
                   rel_diff(grm, rm) < tol && rel_diff(grv, rv) < tol,
               "batch_norm %s %s: output, statistics and running statistics match the CPU%s%s",
               weft_dtype_name(dt), training ? "training" : "eval", rc ? ": " : "",
               rc ? weft_last_error() : "");
            weft_tensor *gx0 = NULL, *gw0 = NULL, *gb0 = NULL, *gx1 = NULL, *gw1 = NULL, *gb1 = NULL;
            weft_native_batch_norm_backward(&gx0, &gw0, &gb0, go, x, w, m0, i0, training);
            keep(gx0), keep(gw0), keep(gb0);
            rc = weft_native_batch_norm_backward(&gx1, &gw1, &gb1, to(go, CUDA0), to(x, CUDA0),
                                                 to(w, CUDA0), m1, i1, training);
            keep(gx1), keep(gw1), keep(gb1);
            ok(rc == 0 && rel_diff(gx1, gx0) < tol * 10 && rel_diff(gw1, gw0) < tol * 10 &&
                   rel_diff(gb1, gb0) < tol * 10,
               "batch_norm backward %s %s matches the CPU", weft_dtype_name(dt),
               training ? "training" : "eval");
        }
        const int64_t ns[2] = {7, 9};
        weft_tensor *lw = rand_cpu(ns, 2, dt, g), *lb = rand_cpu(ns, 2, dt, g);
        weft_tensor *y0 = NULL, *m0 = NULL, *r0 = NULL, *y1 = NULL, *m1 = NULL, *r1 = NULL;
        weft_native_layer_norm(&y0, &m0, &r0, x, ns, 2, lw, lb, 1e-5);
        keep(y0), keep(m0), keep(r0);
        int rc = weft_native_layer_norm(&y1, &m1, &r1, to(x, CUDA0), ns, 2, to(lw, CUDA0),
                                        to(lb, CUDA0), 1e-5);
        keep(y1), keep(m1), keep(r1);
        ok(rc == 0 && rel_diff(y1, y0) < tol && rel_diff(m1, m0) < tol && rel_diff(r1, r0) < tol,
           "layer_norm %s over the last two dims matches the CPU", weft_dtype_name(dt));
        weft_tensor *gx0 = NULL, *gw0 = NULL, *gb0 = NULL, *gx1 = NULL, *gw1 = NULL, *gb1 = NULL;
        weft_native_layer_norm_backward(&gx0, &gw0, &gb0, go, x, ns, 2, m0, r0, lw);
        keep(gx0), keep(gw0), keep(gb0);
        rc = weft_native_layer_norm_backward(&gx1, &gw1, &gb1, to(go, CUDA0), to(x, CUDA0), ns, 2,
                                             m1, r1, to(lw, CUDA0));
        keep(gx1), keep(gw1), keep(gb1);
        ok(rc == 0 && rel_diff(gx1, gx0) < tol * 10 && rel_diff(gw1, gw0) < tol * 10 &&
               rel_diff(gb1, gb0) < tol * 10, "layer_norm backward %s matches the CPU",
           weft_dtype_name(dt));
        drop_all();
    }
}

/* batch_norm through cuDNN (the route pinned by WEFT_CUDA_BATCH_NORM=cudnn
 * in main, so a call the plan gives to cuDNN fails rather than run
 * composed) against the CPU: 2-D, 3-D and 4-D, training and eval, with and
 * without weight, bias and running statistics, float32, float64 and
 * float16 with float32 parameters; the running statistics after the call,
 * save_mean / save_invstd, and the backward. */
static void gpu_batch_norm_cudnn(weft_generator *g)
{
    static const int64_t shapes[3][4] = {{16, 6}, {4, 6, 11}, {3, 6, 5, 7}};
    static const weft_dtype dts[] = {WEFT_FLOAT32, WEFT_FLOAT64, WEFT_FLOAT16};
    const int64_t C = 6;
    uint64_t fallbacks = weft_cpu_fallback_calls();
    for (size_t di = 0; di < 3; di++)
        for (int nd = 2; nd <= 4; nd++)
            for (int variant = 0; variant < 4; variant++) {
                weft_dtype dt = dts[di];
                /* float16 is compared with the CPU's float16 call, both
                 * computing in float32 */
                double tol = dt == WEFT_FLOAT64 ? 1e-10 : dt == WEFT_FLOAT32 ? 1e-4 : 1e-2;
                weft_dtype pdt = dt == WEFT_FLOAT16 ? WEFT_FLOAT32 : dt;
                bool training = variant != 1, affine = variant != 2, running = variant != 3;
                weft_tensor *x = rand_cpu(shapes[nd - 2], nd, dt, g);
                weft_tensor *go = rand_cpu(shapes[nd - 2], nd, dt, g);
                weft_tensor *w = affine ? rand_cpu(&C, 1, pdt, g) : NULL;
                weft_tensor *b = affine ? rand_cpu(&C, 1, pdt, g) : NULL;
                weft_tensor *rm = NULL, *rv = NULL, *grm = NULL, *grv = NULL;
                if (running) {
                    rm = rand_cpu(&C, 1, pdt, g);
                    weft_tensor *r = rand_cpu(&C, 1, pdt, g);
                    weft_abs(&rv, r), keep(rv);
                    weft_add_scalar_(rv, 0.5);
                    grm = to(rm, CUDA0), grv = to(rv, CUDA0);
                }
                weft_tensor *y0 = NULL, *m0 = NULL, *i0 = NULL, *y1 = NULL, *m1 = NULL, *i1 = NULL;
                weft_native_batch_norm(&y0, &m0, &i0, x, w, b, rm, rv, training, 0.1, 1e-5);
                keep(y0), keep(m0), keep(i0);
                int rc = weft_native_batch_norm(&y1, &m1, &i1, to(x, CUDA0), to(w, CUDA0),
                                                to(b, CUDA0), grm, grv, training, 0.1, 1e-5);
                keep(y1), keep(m1), keep(i1);
                bool stats = !running || (rel_diff(grm, rm) < tol && rel_diff(grv, rv) < tol);
                ok(rc == 0 && rel_diff(y1, y0) < tol && rel_diff(m1, m0) < tol &&
                       rel_diff(i1, i0) < tol && stats,
                   "cuDNN batch_norm %s %d-D %s%s%s: output, save_mean, save_invstd and running "
                   "statistics match the CPU%s%s", weft_dtype_name(dt), nd,
                   training ? "training" : "eval", affine ? "" : ", no weight or bias",
                   running ? "" : ", no running statistics", rc ? ": " : "",
                   rc ? weft_last_error() : "");
                if (!training)
                    continue; /* the eval backward is the composed path's (gpu_norm) */
                weft_tensor *gx0 = NULL, *gw0 = NULL, *gb0 = NULL, *gx1 = NULL, *gw1 = NULL,
                            *gb1 = NULL;
                weft_native_batch_norm_backward(&gx0, &gw0, &gb0, go, x, w, m0, i0, true);
                keep(gx0), keep(gw0), keep(gb0);
                rc = weft_native_batch_norm_backward(&gx1, &gw1, &gb1, to(go, CUDA0), to(x, CUDA0),
                                                     to(w, CUDA0), m1, i1, true);
                keep(gx1), keep(gw1), keep(gb1);
                ok(rc == 0 && rel_diff(gx1, gx0) < tol * 10 && rel_diff(gw1, gw0) < tol * 10 &&
                       rel_diff(gb1, gb0) < tol * 10,
                   "cuDNN batch_norm backward %s %d-D%s: grad input, weight and bias match the "
                   "CPU%s%s", weft_dtype_name(dt), nd, affine ? "" : " without weight",
                   rc ? ": " : "", rc ? weft_last_error() : "");
                drop_all();
            }
    drop_all();
    ok(weft_cpu_fallback_calls() == fallbacks, "cuDNN batch_norm: no call reached the CPU "
       "fallback (%llu did)", (unsigned long long)(weft_cpu_fallback_calls() - fallbacks));
}

/* ------------------------------------------------------------ indexing */

static void gpu_indexing(weft_generator *g)
{
    static const weft_dtype dts[] = {WEFT_FLOAT32, WEFT_FLOAT16, WEFT_INT64, WEFT_BOOL};
    for (size_t di = 0; di < 4; di++) {
        weft_dtype dt = dts[di];
        weft_tensor *x = rand_cpu((const int64_t[]){5, 7, 9}, 3, WEFT_FLOAT32, g), *xd = NULL, *xt = NULL;
        weft_to_dtype(&xd, x, dt);
        keep(xd);
        weft_transpose(&xt, xd, 0, 2); /* a strided source: [9, 7, 5] */
        keep(xt);
        weft_tensor *gxt = NULL;
        weft_transpose(&gxt, to(xd, CUDA0), 0, 2);
        keep(gxt);
        const int64_t picks[6] = {4, 0, 4, 2, 1, 3};
        weft_tensor *idx = keep_int64((const int64_t[]){6}, 1, picks);
        for (int dim = 0; dim < 3; dim++) {
            weft_tensor *want = NULL, *got = NULL;
            weft_index_select(&want, xt, dim, idx);
            keep(want);
            int rc = weft_index_select(&got, gxt, dim, to(idx, CUDA0));
            keep(got);
            ok(rc == 0 && rel_diff(got, want) == 0, "index_select %s along %d (repeats, strided "
               "source) matches the CPU%s%s", weft_dtype_name(dt), dim, rc ? ": " : "",
               rc ? weft_last_error() : "");
        }
        /* gather along dim 1 with an index smaller than self elsewhere */
        weft_tensor *gi = NULL;
        weft_randint(&gi, 0, 7, (const int64_t[]){4, 11, 5}, 3, WEFT_INT64, WEFT_DEVICE_CPU, g);
        keep(gi);
        weft_tensor *want = NULL, *got = NULL;
        weft_gather(&want, xt, 1, gi);
        keep(want);
        int rc = weft_gather(&got, gxt, 1, to(gi, CUDA0));
        keep(got);
        ok(rc == 0 && rel_diff(got, want) == 0, "gather %s along 1 matches the CPU", weft_dtype_name(dt));
        drop_all();
    }
    weft_tensor *w = rand_cpu((const int64_t[]){10, 6}, 2, WEFT_FLOAT32, g);
    const int64_t ids[6] = {9, 0, 3, 3, 7, 1};
    weft_tensor *ix = keep_int64((const int64_t[]){2, 3}, 2, ids), *want = NULL, *got = NULL;
    weft_embedding(&want, w, ix, -1);
    keep(want);
    ok(weft_embedding(&got, to(w, CUDA0), to(ix, CUDA0), -1) == 0 && rel_diff(keep(got), want) == 0 &&
           weft_tensor_ndim(got) == 3, "embedding of [2, 3] indices gives [2, 3, 6] rows as the CPU");
    const int64_t badv[2] = {2, 10};
    weft_tensor *bad = keep_int64((const int64_t[]){2}, 1, badv);
    got = (weft_tensor *)1;
    ok(weft_embedding(&got, to(w, CUDA0), to(bad, CUDA0), -1) == WEFT_ERANGE && got == NULL &&
           strstr(weft_last_error(), "10"), "an index of 10 for 10 rows is an error naming it: %s",
       weft_last_error());
    got = (weft_tensor *)1;
    ok(weft_index_select(&got, to(w, CUDA0), 0, to(keep_int64((const int64_t[]){2, 1}, 2, badv), CUDA0)) ==
               WEFT_ESHAPE && got == NULL, "a 2-d index for index_select is refused: %s",
       weft_last_error());
    /* masked_fill with a broadcast mask, and in place */
    weft_tensor *m = NULL, *mr = rand_cpu((const int64_t[]){6}, 1, WEFT_FLOAT32, g);
    weft_gt_scalar(&m, mr, 0.0);
    keep(m);
    weft_masked_fill(&want, w, m, -7.5);
    keep(want);
    ok(weft_masked_fill(&got, to(w, CUDA0), to(m, CUDA0), -7.5) == 0 && rel_diff(keep(got), want) == 0,
       "masked_fill with a broadcast row mask matches the CPU");
    weft_tensor *gw = to(w, CUDA0);
    ok(weft_masked_fill_(gw, to(m, CUDA0), -7.5) == 0 && rel_diff(gw, want) == 0,
       "masked_fill_ writes in place");
    drop_all();
}

/* ------------------------------------------------------ random numbers */

/* The GPU draws the CPU's Philox stream: one seed, the same numbers. */
static void gpu_random(void)
{
    static const weft_dtype dts[] = {WEFT_FLOAT32, WEFT_FLOAT64, WEFT_FLOAT16, WEFT_BFLOAT16};
    for (size_t di = 0; di < 4; di++)
        for (int kind = 0; kind < 4; kind++) {
            weft_dtype dt = dts[di];
            const int64_t sizes[2] = {37, 1001}; /* odd: the last Philox block is partial */
            weft_tensor *c = NULL, *g = NULL, *gt = NULL;
            weft_empty(&c, sizes, 2, dt, WEFT_DEVICE_CPU);
            keep(c);
            weft_empty(&g, (const int64_t[]){1001, 37}, 2, dt, CUDA0);
            keep(g);
            weft_t(&gt, g); /* a transposed target: values land row-major in its view */
            keep(gt);
            weft_generator *gc = NULL, *gg = NULL;
            weft_generator_create(&gc, 1234);
            weft_generator_create(&gg, 1234);
            int rc_c, rc_g;
            const char *name = kind == 0 ? "uniform_" : kind == 1 ? "normal_" : kind == 2 ? "bernoulli_" : "dropout";
            weft_tensor *wc = c, *wg = gt, *ones = NULL, *gones = NULL;
            if (kind == 0) {
                rc_c = weft_uniform_ex_(c, -3.0, 5.0, gc);
                rc_g = weft_uniform_ex_(gt, -3.0, 5.0, gg);
            } else if (kind == 1) {
                rc_c = weft_normal_ex_(c, 1.0, 2.0, gc);
                rc_g = weft_normal_ex_(gt, 1.0, 2.0, gg);
            } else if (kind == 2) {
                rc_c = weft_bernoulli_ex_(c, 0.3, gc);
                rc_g = weft_bernoulli_ex_(gt, 0.3, gg);
            } else {
                weft_full(&ones, sizes, 2, 1.5, dt, WEFT_DEVICE_CPU);
                keep(ones);
                gones = to(ones, CUDA0);
                rc_c = weft_dropout_ex(&wc, ones, 0.25, true, gc);
                rc_g = weft_dropout_ex(&wg, gones, 0.25, true, gg);
                keep(wc), keep(wg);
            }
            double tol = kind == 1 && dt == WEFT_FLOAT64 ? 1e-14 : 0;
            double d = rc_c == 0 && rc_g == 0 ? rel_diff(wg, wc) : INFINITY;
            ok(d <= tol, "%s %s: the GPU draws the CPU's numbers from the same seed (rel diff %g)%s%s",
               name, weft_dtype_name(dt), d, rc_g ? ": " : "", rc_g ? weft_last_error() : "");
            weft_generator_destroy(gc);
            weft_generator_destroy(gg);
            drop_all();
        }
    weft_tensor *t = NULL;
    weft_empty(&t, (const int64_t[]){4}, 1, WEFT_FLOAT32, CUDA0);
    keep(t);
    ok(weft_uniform_ex_(t, 2.0, 1.0, NULL) == WEFT_EINVAL, "uniform_ from 2 to 1 is refused: %s",
       weft_last_error());
    ok(weft_bernoulli_ex_(t, 1.5, NULL) == WEFT_EINVAL, "bernoulli_ with p 1.5 is refused: %s",
       weft_last_error());
    weft_tensor *out = (weft_tensor *)1;
    ok(weft_dropout_ex(&out, t, -0.1, true, NULL) == WEFT_EINVAL && out == NULL,
       "dropout with p -0.1 is refused: %s", weft_last_error());
    drop_all();
}

/* ------------------------------------------------------- convolutions */

static void gpu_conv(weft_generator *g)
{
    static const struct {
        int64_t n, c, h, w, oc, k, s, p, d, groups;
    } cases[] = {{2, 3, 17, 19, 8, 3, 1, 1, 1, 1}, {4, 16, 14, 14, 32, 3, 1, 1, 1, 1},
                 {3, 6, 15, 13, 9, 3, 2, 1, 1, 3}, {2, 4, 12, 12, 4, 3, 1, 2, 2, 4},
                 {1, 5, 7, 9, 7, 1, 1, 0, 1, 1}, {0, 3, 8, 8, 4, 3, 1, 1, 1, 1}};
    static const weft_dtype dts[] = {WEFT_FLOAT32, WEFT_FLOAT64, WEFT_BFLOAT16};
    for (size_t di = 0; di < 3; di++)
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            weft_dtype dt = dts[di];
            double tol = dt == WEFT_FLOAT32 ? 1e-4 : dt == WEFT_FLOAT64 ? 1e-10 : 5e-2;
            int64_t k = cases[i].k, s = cases[i].s, p = cases[i].p, d = cases[i].d;
            weft_tensor *x = rand_cpu((const int64_t[]){cases[i].n, cases[i].c, cases[i].h, cases[i].w},
                                      4, dt, g);
            weft_tensor *w = rand_cpu((const int64_t[]){cases[i].oc, cases[i].c / cases[i].groups, k, k},
                                      4, dt, g);
            weft_tensor *b = rand_cpu((const int64_t[]){cases[i].oc}, 1, dt, g);
            /* the CPU reference in float64 from the same rounded values */
            weft_tensor *x64 = NULL, *w64 = NULL, *b64 = NULL;
            weft_to_dtype(&x64, x, WEFT_FLOAT64), keep(x64);
            weft_to_dtype(&w64, w, WEFT_FLOAT64), keep(w64);
            weft_to_dtype(&b64, b, WEFT_FLOAT64), keep(b64);
            weft_tensor *want = NULL, *got = NULL;
            weft_conv2d(&want, x64, w64, b64, &s, 1, &p, 1, &d, 1, cases[i].groups);
            keep(want);
            int rc = weft_conv2d(&got, to(x, CUDA0), to(w, CUDA0), to(b, CUDA0), &s, 1, &p, 1, &d, 1,
                                 cases[i].groups);
            keep(got);
            ok(rc == 0 && rel_diff(got, want) <= tol, "conv2d %s case %zu matches the CPU (rel "
               "diff %g)%s%s", weft_dtype_name(dt), i, rel_diff(got, want), rc ? ": " : "",
               rc ? weft_last_error() : "");
            if (!want)
                continue;
            weft_tensor *gy = rand_cpu(weft_tensor_sizes(want), 4, dt, g), *gy64 = NULL;
            weft_to_dtype(&gy64, gy, WEFT_FLOAT64), keep(gy64);
            weft_tensor *wi = NULL, *gi = NULL, *ww = NULL, *gw = NULL;
            weft_convolution_backward_input(&wi, gy64, w64, weft_tensor_sizes(x), 4, &s, 1, &p, 1,
                                            &d, 1, cases[i].groups);
            keep(wi);
            rc = weft_convolution_backward_input(&gi, to(gy, CUDA0), to(w, CUDA0),
                                                 weft_tensor_sizes(x), 4, &s, 1, &p, 1, &d, 1,
                                                 cases[i].groups);
            keep(gi);
            ok(rc == 0 && rel_diff(gi, wi) <= tol, "convolution_backward_input %s case %zu",
               weft_dtype_name(dt), i);
            weft_convolution_backward_weight(&ww, gy64, x64, weft_tensor_sizes(w), 4, &s, 1, &p, 1,
                                             &d, 1, cases[i].groups);
            keep(ww);
            rc = weft_convolution_backward_weight(&gw, to(gy, CUDA0), to(x, CUDA0),
                                                  weft_tensor_sizes(w), 4, &s, 1, &p, 1, &d, 1,
                                                  cases[i].groups);
            keep(gw);
            ok(rc == 0 && rel_diff(gw, ww) <= tol * 4, "convolution_backward_weight %s case %zu "
               "(rel diff %g)", weft_dtype_name(dt), i, rel_diff(gw, ww));
            drop_all();
        }
    weft_tensor *x = to(rand_cpu((const int64_t[]){1, 6, 9, 9}, 4, WEFT_FLOAT32, g), CUDA0);
    weft_tensor *w = to(rand_cpu((const int64_t[]){4, 3, 3, 3}, 4, WEFT_FLOAT32, g), CUDA0);
    weft_tensor *out = (weft_tensor *)1;
    const int64_t one = 1;
    ok(weft_conv2d(&out, x, w, NULL, &one, 1, &one, 1, &one, 1, 1) == WEFT_ESHAPE && out == NULL,
       "conv2d of 6 channels with a 3-channel weight and groups 1 is refused before cuDNN: %s",
       weft_last_error());
    drop_all();
}

/* ------------------------------------ upsampling and conv_transpose2d */

static void gpu_upsample(weft_generator *g)
{
    static const weft_dtype dts[] = {WEFT_FLOAT32, WEFT_FLOAT64, WEFT_FLOAT16, WEFT_BFLOAT16};
    static const struct {
        int64_t in[4], out[2];
        double sh, sw; /* 0: no scale */
    } cases[] = {{{2, 3, 5, 7}, {11, 13}, 0, 0}, {{1, 2, 8, 8}, {4, 3}, 0, 0},
                 {{2, 2, 4, 6}, {8, 12}, 2.0, 2.0}, {{1, 1, 1, 1}, {3, 5}, 0, 0},
                 {{3, 1, 7, 5}, {7, 5}, 0, 0},     {{0, 2, 3, 3}, {6, 6}, 0, 0},
                 {{1, 3, 9, 10}, {20, 23}, 2.3, 2.3}};
    uint64_t fallbacks = weft_cpu_fallback_calls();
    for (size_t di = 0; di < 4; di++)
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
            for (int mode = 0; mode < 3; mode++) { /* nearest, bilinear, bilinear aligned */
                weft_dtype dt = dts[di];
                double tol = dt == WEFT_FLOAT64 ? 1e-12 : dt == WEFT_FLOAT32 ? 1e-5 : 1e-2;
                const double *sh = cases[c].sh ? &cases[c].sh : NULL;
                const double *sw = cases[c].sw ? &cases[c].sw : NULL;
                bool align = mode == 2;
                if (align)
                    sh = sw = NULL;
                weft_tensor *x = rand_cpu(cases[c].in, 4, dt, g), *gx = to(x, CUDA0);
                weft_tensor *want = NULL, *got = NULL;
                int rc_g;
                if (mode == 0) {
                    weft_upsample_nearest2d(&want, x, cases[c].out, 2, sh, sw);
                    rc_g = weft_upsample_nearest2d(&got, gx, cases[c].out, 2, sh, sw);
                } else {
                    weft_upsample_bilinear2d(&want, x, cases[c].out, 2, align, sh, sw);
                    rc_g = weft_upsample_bilinear2d(&got, gx, cases[c].out, 2, align, sh, sw);
                }
                keep(want), keep(got);
                const char *name = mode == 0 ? "nearest" : align ? "bilinear aligned" : "bilinear";
                ok(rc_g == 0 && rel_diff(got, want) <= tol, "upsample %s %s case %zu matches "
                   "the CPU (rel diff %g)%s%s", name, weft_dtype_name(dt), c, rel_diff(got, want),
                   rc_g ? ": " : "", rc_g ? weft_last_error() : "");
                if (!want)
                    continue;
                weft_tensor *gy = rand_cpu(weft_tensor_sizes(want), 4, dt, g), *bw = NULL, *gb = NULL;
                if (mode == 0) {
                    weft_upsample_nearest2d_backward(&bw, gy, cases[c].out, 2, cases[c].in, 4, sh, sw);
                    rc_g = weft_upsample_nearest2d_backward(&gb, to(gy, CUDA0), cases[c].out, 2,
                                                            cases[c].in, 4, sh, sw);
                } else {
                    weft_upsample_bilinear2d_backward(&bw, gy, cases[c].out, 2, cases[c].in, 4,
                                                      align, sh, sw);
                    rc_g = weft_upsample_bilinear2d_backward(&gb, to(gy, CUDA0), cases[c].out, 2,
                                                             cases[c].in, 4, align, sh, sw);
                }
                keep(bw), keep(gb);
                ok(rc_g == 0 && rel_diff(gb, bw) <= tol * 4, "upsample %s backward %s case %zu "
                   "matches the CPU (rel diff %g)%s%s", name, weft_dtype_name(dt), c,
                   rel_diff(gb, bw), rc_g ? ": " : "", rc_g ? weft_last_error() : "");
                drop_all();
            }
    /* nearest moves any dtype's elements, a transposed input included */
    static const weft_dtype any[] = {WEFT_INT64, WEFT_UINT8, WEFT_INT16, WEFT_BOOL};
    for (size_t di = 0; di < 4; di++) {
        weft_tensor *x = rand_cpu((const int64_t[]){2, 3, 6, 5}, 4, any[di], g), *xt = NULL, *gxt = NULL;
        weft_transpose(&xt, x, 2, 3), keep(xt);
        weft_transpose(&gxt, to(x, CUDA0), 2, 3), keep(gxt);
        weft_tensor *want = NULL, *got = NULL;
        const int64_t out[2] = {9, 13};
        weft_upsample_nearest2d(&want, xt, out, 2, NULL, NULL), keep(want);
        int rc = weft_upsample_nearest2d(&got, gxt, out, 2, NULL, NULL);
        keep(got);
        ok(rc == 0 && rel_diff(got, want) == 0, "upsample nearest %s of a transposed input",
           weft_dtype_name(any[di]));
        drop_all();
    }
    ok(weft_cpu_fallback_calls() == fallbacks, "the upsampling kernels ran on the GPU (no "
       "fallback call)");
    weft_tensor *x = to(rand_cpu((const int64_t[]){1, 2, 4, 4}, 4, WEFT_FLOAT32, g), CUDA0);
    weft_tensor *out = (weft_tensor *)1;
    ok(weft_upsample_bilinear2d(&out, x, (const int64_t[]){0, 3}, 2, false, NULL, NULL) ==
           WEFT_EINVAL && out == NULL, "an output size of 0 is refused: %s", weft_last_error());
    ok(weft_upsample_nearest2d_backward(&out, x, (const int64_t[]){8, 8}, 2,
                                        (const int64_t[]){1, 2, 4, 4}, 4, NULL, NULL) == WEFT_ESHAPE,
       "a grad_output of the wrong shape is refused: %s", weft_last_error());
    drop_all();
}

static void gpu_conv_transpose(weft_generator *g)
{
    static const struct {
        int64_t n, cin, h, w, cout_g, k, s, p, op, d, groups;
        bool bias;
    } cases[] = {{2, 4, 5, 6, 3, 3, 2, 1, 1, 1, 1, true}, {1, 6, 7, 7, 2, 3, 1, 1, 0, 1, 3, false},
                 {2, 4, 5, 5, 1, 3, 2, 1, 2, 3, 2, true}, {3, 2, 4, 3, 5, 1, 1, 0, 0, 1, 1, true},
                 {0, 4, 5, 5, 2, 3, 2, 0, 0, 1, 1, true}, {1, 8, 9, 9, 4, 4, 3, 2, 1, 1, 2, false}};
    static const weft_dtype dts[] = {WEFT_FLOAT32, WEFT_FLOAT64, WEFT_BFLOAT16};
    uint64_t fallbacks = weft_cpu_fallback_calls();
    for (size_t di = 0; di < 3; di++)
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            weft_dtype dt = dts[di];
            double tol = dt == WEFT_FLOAT32 ? 1e-4 : dt == WEFT_FLOAT64 ? 1e-10 : 5e-2;
            weft_tensor *x = rand_cpu((const int64_t[]){cases[i].n, cases[i].cin, cases[i].h,
                                                        cases[i].w}, 4, dt, g);
            weft_tensor *w = rand_cpu((const int64_t[]){cases[i].cin, cases[i].cout_g, cases[i].k,
                                                        cases[i].k}, 4, dt, g);
            weft_tensor *b = cases[i].bias ? rand_cpu((const int64_t[]){cases[i].cout_g * cases[i].groups},
                                                      1, dt, g) : NULL;
            weft_tensor *x64 = NULL, *w64 = NULL, *b64 = NULL, *want = NULL, *got = NULL;
            weft_to_dtype(&x64, x, WEFT_FLOAT64), keep(x64);
            weft_to_dtype(&w64, w, WEFT_FLOAT64), keep(w64);
            if (b)
                weft_to_dtype(&b64, b, WEFT_FLOAT64), keep(b64);
            int64_t s = cases[i].s, p = cases[i].p, op = cases[i].op, d = cases[i].d;
            weft_conv_transpose2d(&want, x64, w64, b64, &s, 1, &p, 1, &op, 1, cases[i].groups, &d, 1);
            keep(want);
            int rc = weft_conv_transpose2d(&got, to(x, CUDA0), to(w, CUDA0), b ? to(b, CUDA0) : NULL,
                                           &s, 1, &p, 1, &op, 1, cases[i].groups, &d, 1);
            keep(got);
            ok(rc == 0 && rel_diff(got, want) <= tol, "conv_transpose2d %s case %zu matches the "
               "CPU (rel diff %g)%s%s", weft_dtype_name(dt), i, rel_diff(got, want),
               rc ? ": " : "", rc ? weft_last_error() : "");
            drop_all();
        }
    ok(weft_cpu_fallback_calls() == fallbacks, "conv_transpose2d ran on the GPU (no fallback "
       "call)");
    weft_tensor *x = to(rand_cpu((const int64_t[]){1, 4, 5, 5}, 4, WEFT_FLOAT32, g), CUDA0);
    weft_tensor *w = to(rand_cpu((const int64_t[]){3, 2, 3, 3}, 4, WEFT_FLOAT32, g), CUDA0);
    weft_tensor *out = (weft_tensor *)1;
    const int64_t one = 1, two = 2;
    ok(weft_conv_transpose2d(&out, x, w, NULL, &one, 1, &one, 1, NULL, 0, 1, &one, 1) ==
           WEFT_ESHAPE && out == NULL,
       "conv_transpose2d of 4 channels with a weight for 3 is refused: %s", weft_last_error());
    /* a weight that fits x, so that the output padding is what is wrong
     * (with w, the channel check answers first: seen on an H200) */
    weft_tensor *w4 = to(rand_cpu((const int64_t[]){4, 2, 3, 3}, 4, WEFT_FLOAT32, g), CUDA0);
    ok(weft_conv_transpose2d(&out, x, w4, NULL, &one, 1, &one, 1, &two, 1, 1, &one, 1) ==
           WEFT_EINVAL && out == NULL && strstr(weft_last_error(), "output_padding"),
       "an output_padding of 2 with stride 1 is refused: %s", weft_last_error());
    drop_all();
}

int main(void)
{
    plan_checks();
    plan_upsample_checks();
    plan_batch_norm_checks();
    /* before the plugin registers: a call planned for cuDNN must run there */
    setenv("WEFT_CUDA_BATCH_NORM", "cudnn", 1);
    weft_load_default_plugins();
    int n = weft_device_count(TEST_GPU_TYPE);
    if (n <= 0) {
        skip(1, "no " TEST_GPU_NAME " device here (the runtime reports none): the reduction and NN "
                "comparisons run only with a GPU");
        return done_testing();
    }
    weft_generator *g = NULL;
    weft_generator_create(&g, 23);
    gpu_reductions(g);
    gpu_nn(g);
    gpu_conv(g);
    if (test_gpu_has_kernel("conv_transpose2d"))
        gpu_conv_transpose(g);
    else
        skip(1, "the " TEST_GPU_NAME " plugin was built without cuDNN: conv_transpose2d runs on the fallback");
    gpu_upsample(g);
    gpu_random();
    gpu_indexing(g);
    gpu_norm(g);
    if (test_gpu_has_kernel("conv2d")) /* conv.c and norm_cudnn.c: built with cuDNN together */
        gpu_batch_norm_cudnn(g);
    else
        skip(1, "the " TEST_GPU_NAME " plugin was built without cuDNN: batch_norm runs composed (gpu_norm)");
    weft_generator_destroy(g);
    return done_testing();
}
