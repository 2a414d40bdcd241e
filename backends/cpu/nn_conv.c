/* backends/cpu/nn_conv.c — conv2d and its input and weight gradients as
 * operators, by im2col and one GEMM per image and group through
 * single-threaded OpenBLAS, the (image, group) products spread over our
 * pool (the weight gradient, which sums over images, sums runs of images
 * in parallel and adds the runs' partials in a fixed order), as are the
 * im2col/col2im passes; conv1d is a
 * composite over conv2d with a unit height, and conv_transpose2d is the
 * input-gradient operator plus a bias.  1x1 convolutions with unit
 * stride and no padding read the input directly, without im2col.
 * Tensors are batched [N, C, H, W]; float16/bfloat16 compute in float32. */
#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "nn.h"

/* The column buffer of one pass holds at most this many elements. */
#define COLUMN_BUDGET ((int64_t)1 << 23)

typedef struct conv_geometry {
    int64_t N, C, H, W;     /* input */
    int64_t OC, KH, KW;     /* weight: [OC, C / groups, KH, KW] */
    int64_t OH, OW;         /* output */
    int64_t stride[2], padding[2], dilation[2], groups;
} conv_geometry;

static int64_t rows_per_image(const conv_geometry *g)
{
    return g->C * g->KH * g->KW;
}

static bool direct_input(const conv_geometry *g)
{
    return g->KH == 1 && g->KW == 1 && g->stride[0] == 1 && g->stride[1] == 1 &&
           g->padding[0] == 0 && g->padding[1] == 0;
}

/* C = op(A) op(B) + beta C, row-major, float32 or float64, on the
 * calling thread (the callers split the work over images themselves) or
 * split over the pool (split). */
static void gemm(weft_dtype dtype, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                 const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c,
                 int64_t ldc)
{
    enum CBLAS_TRANSPOSE opa = ta ? CblasTrans : CblasNoTrans, opb = tb ? CblasTrans : CblasNoTrans;
    if (dtype == WEFT_FLOAT32)
        cblas_sgemm(CblasRowMajor, opa, opb, (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b,
                    (int)ldb, (float)beta, c, (int)ldc);
    else
        cblas_dgemm(CblasRowMajor, opa, opb, (int)m, (int)n, (int)k, 1.0, a, (int)lda, b,
                    (int)ldb, beta, c, (int)ldc);
}

/* One product per (image, group) pair of a pass, pairs spread over the
 * pool: each pair's product is the same single-threaded call whichever
 * thread runs it, so results do not depend on the thread count. */
typedef struct image_gemms {
    weft_dtype dt;
    bool ta, tb;
    int64_t groups, m, n, k, lda, ldb, ldc;
    double beta;
    const char *a, *b;
    char *c;
    int64_t a_group, b_image, b_group, c_image, c_group; /* byte strides */
    const char *bias; /* non-NULL: C's row i of group gr starts as bias[gr * m + i] */
} image_gemms;

/* rows x cols of c (leading dimension ldc) set to values[row], each */
static void fill_rows(weft_dtype dt, char *c, int64_t rows, int64_t cols, int64_t ldc,
                      const char *values)
{
    for (int64_t i = 0; i < rows; i++) {
        if (dt == WEFT_FLOAT32) {
            float *r = (float *)c + i * ldc, v = ((const float *)values)[i];
            for (int64_t q = 0; q < cols; q++)
                r[q] = v;
        } else {
            double *r = (double *)c + i * ldc, v = ((const double *)values)[i];
            for (int64_t q = 0; q < cols; q++)
                r[q] = v;
        }
    }
}

static void image_gemm_range(int64_t begin, int64_t end, void *ctx)
{
    const image_gemms *j = ctx;
    for (int64_t p = begin; p < end; p++) {
        int64_t b = p / j->groups, gr = p % j->groups;
        /* the bias written just before the product reads it: still in cache */
        if (j->bias)
            fill_rows(j->dt, j->c + b * j->c_image + gr * j->c_group, j->m, j->n, j->ldc,
                      j->bias + (size_t)(gr * j->m) * weft_dtype_size(j->dt));
        gemm(j->dt, j->ta, j->tb, j->m, j->n, j->k, j->a + gr * j->a_group, j->lda,
             j->b + b * j->b_image + gr * j->b_group, j->ldb, j->beta,
             j->c + b * j->c_image + gr * j->c_group, j->ldc);
    }
}

static void run_image_gemms(const image_gemms *j, int64_t images)
{
    int64_t flops = j->m * j->n * (j->k > 0 ? j->k : 1);
    cpu__parallel_for(0, images * j->groups, ((int64_t)1 << 19) / (flops > 0 ? flops : 1) + 1,
                      image_gemm_range, (void *)j);
}

typedef struct column_job {
    const conv_geometry *g;
    void *x;       /* images [B, C, H, W] */
    void *col;     /* [B, C*KH*KW, OH*OW] */
} column_job;

/* The output columns ow in [*lo, *hi) whose input column iw0 + ow * stride
 * lies inside [0, W); the others read padding.  *hi may be below *lo. */
static void inside_columns(const conv_geometry *g, int64_t iw0, int64_t *lo, int64_t *hi)
{
    int64_t sw = g->stride[1];
    int64_t first = iw0 >= 0 ? 0 : (-iw0 + sw - 1) / sw;
    int64_t last = g->W - 1 - iw0 < 0 ? -1 : (g->W - 1 - iw0) / sw; /* the last inside */
    *lo = first < g->OW ? first : g->OW;
    *hi = last + 1 < g->OW ? last + 1 : g->OW;
}

/* im2col over (image, row) pairs and col2im (accumulating) over (image,
 * channel) pairs: a row reads and writes a single channel. */
#define DEFINE_COLUMNS(NAME, T)                                                            \
    static void im2col_##NAME(int64_t begin, int64_t end, void *ctx)                      \
    {                                                                                      \
        const column_job *j = ctx;                                                         \
        const conv_geometry *g = j->g;                                                     \
        int64_t R = rows_per_image(g), L = g->OH * g->OW;                                  \
        for (int64_t p = begin; p < end; p++) {                                            \
            int64_t b = p / R, r = p % R;                                                  \
            int64_t c = r / (g->KH * g->KW), kh = (r / g->KW) % g->KH, kw = r % g->KW;     \
            const T *x = (const T *)j->x + (b * g->C + c) * g->H * g->W;                   \
            T *dst = (T *)j->col + p * L;                                                  \
            for (int64_t oh = 0; oh < g->OH; oh++, dst += g->OW) {                         \
                int64_t ih = oh * g->stride[0] - g->padding[0] + kh * g->dilation[0];      \
                if (ih < 0 || ih >= g->H) {                                                \
                    for (int64_t ow = 0; ow < g->OW; ow++)                                 \
                        dst[ow] = 0;                                                       \
                    continue;                                                              \
                }                                                                          \
                const T *src = x + ih * g->W;                                              \
                int64_t iw0 = kw * g->dilation[1] - g->padding[1], sw = g->stride[1];      \
                int64_t lo, hi;                                                            \
                inside_columns(g, iw0, &lo, &hi);                                          \
                for (int64_t ow = 0; ow < lo; ow++)                                        \
                    dst[ow] = 0;                                                           \
                if (sw == 1) {                                                             \
                    if (hi > lo)                                                           \
                        memcpy(dst + lo, src + iw0 + lo, (size_t)(hi - lo) * sizeof(T));   \
                } else {                                                                   \
                    for (int64_t ow = lo; ow < hi; ow++)                                   \
                        dst[ow] = src[iw0 + ow * sw];                                      \
                }                                                                          \
                for (int64_t ow = hi > lo ? hi : lo; ow < g->OW; ow++)                     \
                    dst[ow] = 0;                                                           \
            }                                                                              \
        }                                                                                  \
    }                                                                                      \
    static void col2im_##NAME(int64_t begin, int64_t end, void *ctx)                      \
    {                                                                                      \
        const column_job *j = ctx;                                                         \
        const conv_geometry *g = j->g;                                                     \
        int64_t KK = g->KH * g->KW, L = g->OH * g->OW;                                     \
        for (int64_t p = begin; p < end; p++) {                                            \
            int64_t b = p / g->C, c = p % g->C;                                            \
            T *x = (T *)j->x + (b * g->C + c) * g->H * g->W;                               \
            for (int64_t i = 0; i < g->H * g->W; i++)                                      \
                x[i] = 0;                                                                  \
            for (int64_t k = 0; k < KK; k++) {                                             \
                int64_t kh = k / g->KW, kw = k % g->KW;                                    \
                const T *src = (const T *)j->col + ((b * g->C + c) * KK + k) * L;          \
                for (int64_t oh = 0; oh < g->OH; oh++, src += g->OW) {                     \
                    int64_t ih = oh * g->stride[0] - g->padding[0] + kh * g->dilation[0];  \
                    if (ih < 0 || ih >= g->H)                                              \
                        continue;                                                          \
                    T *row = x + ih * g->W;                                                \
                    int64_t iw0 = kw * g->dilation[1] - g->padding[1], sw = g->stride[1];  \
                    int64_t lo, hi;                                                        \
                    inside_columns(g, iw0, &lo, &hi);                                      \
                    if (sw == 1) {                                                         \
                        T *r = row + iw0;                                                  \
                        for (int64_t ow = lo; ow < hi; ow++)                               \
                            r[ow] += src[ow];                                              \
                    } else {                                                               \
                        for (int64_t ow = lo; ow < hi; ow++)                               \
                            row[iw0 + ow * sw] += src[ow];                                 \
                    }                                                                      \
                }                                                                          \
            }                                                                              \
        }                                                                                  \
    }
DEFINE_COLUMNS(float32, float)
DEFINE_COLUMNS(float64, double)

typedef void (*range_fn)(int64_t begin, int64_t end, void *ctx);
static const range_fn im2col_loops[WEFT_NUM_DTYPES] = {[WEFT_FLOAT32] = im2col_float32,
                                                       [WEFT_FLOAT64] = im2col_float64};
static const range_fn col2im_loops[WEFT_NUM_DTYPES] = {[WEFT_FLOAT32] = col2im_float32,
                                                       [WEFT_FLOAT64] = col2im_float64};

/* ------------------------------------------------------------ arguments */

/* stride, padding, dilation, groups from args[first..first+3] */
static int parse_params(const char *op, const weft_value *args, conv_geometry *g)
{
    int rc = nn__pair_arg(op, "stride", &args[0], NULL, 1, g->stride);
    if (rc == 0)
        rc = nn__pair_arg(op, "padding", &args[1], NULL, 0, g->padding);
    if (rc == 0)
        rc = nn__pair_arg(op, "dilation", &args[2], NULL, 1, g->dilation);
    if (rc < 0)
        return rc;
    g->groups = args[3].u.i;
    if (g->groups < 1)
        return weft_set_error(WEFT_EINVAL, "%s: groups must be positive, got %lld", op,
                              (long long)g->groups);
    return 0;
}

/* Fills in and checks the geometry from input sizes [N, C, H, W] and
 * weight sizes [OC, C / groups, KH, KW]. */
static int finish_geometry(const char *op, const int64_t *in, int in_nd, const int64_t *w,
                           int w_nd, conv_geometry *g)
{
    char b1[128], b2[128];
    if (in_nd != 4)
        return weft_set_error(WEFT_ESHAPE, "%s: expected a 4-D (batched) input [N, C, H, W], got "
                              "%s", op, cpu__shape_str(b1, sizeof b1, in, in_nd));
    if (w_nd != 4)
        return weft_set_error(WEFT_ESHAPE, "%s: expected a 4-D weight [out_channels, "
                              "in_channels / groups, kH, kW], got %s", op,
                              cpu__shape_str(b1, sizeof b1, w, w_nd));
    g->N = in[0], g->C = in[1], g->H = in[2], g->W = in[3];
    g->OC = w[0], g->KH = w[2], g->KW = w[3];
    if (g->C != w[1] * g->groups || g->OC % g->groups != 0 || g->OC == 0)
        return weft_set_error(WEFT_ESHAPE, "%s: weight of shape %s with groups=%lld does not fit "
                              "an input of shape %s (expected %lld input channels, and output "
                              "channels divisible by groups)", op,
                              cpu__shape_str(b1, sizeof b1, w, 4), (long long)g->groups,
                              cpu__shape_str(b2, sizeof b2, in, 4), (long long)(w[1] * g->groups));
    int64_t eh = g->H + 2 * g->padding[0] - g->dilation[0] * (g->KH - 1);
    int64_t ew = g->W + 2 * g->padding[1] - g->dilation[1] * (g->KW - 1);
    if (eh < 1 || ew < 1 || g->KH < 1 || g->KW < 1)
        return weft_set_error(WEFT_ESHAPE, "%s: the kernel (dilated) is larger than the padded "
                              "input %s", op, cpu__shape_str(b1, sizeof b1, in, 4));
    g->OH = (eh - 1) / g->stride[0] + 1;
    g->OW = (ew - 1) / g->stride[1] + 1;
    if (g->OH * g->OW > INT_MAX || rows_per_image(g) > INT_MAX || g->OC > INT_MAX)
        return weft_set_error(WEFT_EOVERFLOW, "%s: the problem is too large for BLAS", op);
    return 0;
}

/* Images per pass, so that the column buffer stays within its budget. */
static int64_t images_per_pass(const conv_geometry *g)
{
    int64_t per = rows_per_image(g) * g->OH * g->OW;
    int64_t b = per > 0 ? COLUMN_BUDGET / per : g->N;
    return b < 1 ? 1 : (b > g->N ? g->N : b);
}

static int alloc_columns(weft_tensor **col, const conv_geometry *g, int64_t batch, weft_dtype dt)
{
    int64_t sizes[3] = {batch, rows_per_image(g), g->OH * g->OW};
    return weft_empty(col, sizes, 3, dt, WEFT_DEVICE_CPU);
}

/* ------------------------------------------------------------ forward */

static int conv_forward(const conv_geometry *g, weft_dtype dt, const weft_tensor *x,
                        const weft_tensor *w, const weft_tensor *bias, weft_tensor *out)
{
    int64_t L = g->OH * g->OW, R = rows_per_image(g), OCg = g->OC / g->groups, Rg = R / g->groups;
    size_t es = weft_dtype_size(dt);
    char *y = weft_tensor_data_ptr(out);
    int rc = 0;
    /* every output row starts as its bias (written per image, just before
     * its product), and GEMM adds to it */
    weft_tensor *bt = NULL;
    if (bias && (rc = nn__operand(&bt, bias, dt)) < 0)
        return rc;
    bool direct = direct_input(g);
    int64_t B = direct ? g->N : images_per_pass(g);
    weft_tensor *col = NULL;
    if (!direct && (rc = alloc_columns(&col, g, B, dt)) < 0) {
        weft_tensor_release(bt);
        return rc;
    }
    for (int64_t b0 = 0; b0 < g->N; b0 += B) {
        int64_t nb = g->N - b0 < B ? g->N - b0 : B;
        char *cols = (char *)weft_tensor_data_ptr(x) + (size_t)(b0 * g->C * g->H * g->W) * es;
        if (!direct) {
            column_job j = {g, cols, weft_tensor_data_ptr(col)};
            cpu__parallel_for(0, nb * R, CPU_GRAIN / (L > 0 ? L : 1) + 1, im2col_loops[dt], &j);
            cols = weft_tensor_data_ptr(col);
        }
        image_gemms jg = {dt, false, false, g->groups, OCg, L, Rg, Rg, L, L, bias ? 1.0 : 0.0,
                          weft_tensor_data_ptr(w), cols, y + (size_t)(b0 * g->OC * L) * es,
                          (int64_t)((size_t)(OCg * Rg) * es), (int64_t)((size_t)(R * L) * es),
                          (int64_t)((size_t)(Rg * L) * es), (int64_t)((size_t)(g->OC * L) * es),
                          (int64_t)((size_t)(OCg * L) * es),
                          bt ? weft_tensor_data_ptr(bt) : NULL};
        run_image_gemms(&jg, nb);
    }
    weft_tensor_release(col);
    weft_tensor_release(bt);
    return 0;
}

/* conv2d(input, weight, bias?, stride, padding, dilation, groups) */
static int conv2d_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "conv2d";
    const weft_tensor *input = call->args[0].u.tensor, *weight = call->args[1].u.tensor;
    const weft_tensor *bias = call->args[2].tag == WEFT_VALUE_TENSOR ? call->args[2].u.tensor : NULL;
    conv_geometry g;
    weft_dtype dt;
    int rc = nn__check_floating(op, "input", input, &dt);
    if (rc == 0)
        rc = cpu__check_cpu(op, "weight", weight);
    if (rc == 0 && bias)
        rc = cpu__check_cpu(op, "bias", bias);
    if (rc == 0)
        rc = parse_params(op, call->args + 3, &g);
    if (rc == 0)
        rc = finish_geometry(op, weft_tensor_sizes(input), weft_tensor_ndim(input),
                             weft_tensor_sizes(weight), weft_tensor_ndim(weight), &g);
    if (rc < 0)
        return rc;
    weft_dtype dtype = weft_tensor_dtype(input);
    if (weft_tensor_dtype(weight) != dtype || (bias && weft_tensor_dtype(bias) != dtype))
        return weft_set_error(WEFT_EDTYPE, "%s: input, weight and bias must have the same dtype "
                              "(input is %s, weight %s)", op, weft_dtype_name(dtype),
                              weft_dtype_name(weft_tensor_dtype(weight)));
    if (bias && (weft_tensor_ndim(bias) != 1 || weft_tensor_size(bias, 0) != g.OC))
        return weft_set_error(WEFT_ESHAPE, "%s: bias must be a 1-D tensor of %lld elements", op,
                              (long long)g.OC);
    weft_tensor *x = NULL, *w = NULL, *out = NULL;
    int64_t shape[4] = {g.N, g.OC, g.OH, g.OW};
    if ((rc = nn__operand(&x, input, dt)) == 0 && (rc = nn__operand(&w, weight, dt)) == 0 &&
        (rc = weft_empty(&out, shape, 4, dt, WEFT_DEVICE_CPU)) == 0 && g.N > 0)
        rc = conv_forward(&g, dt, x, w, bias, out);
    weft_tensor_release(x);
    weft_tensor_release(w);
    if (rc < 0) {
        weft_tensor_release(out);
        return rc;
    }
    return nn__set_result(call, 0, out, dtype);
}

/* ------------------------------------------------------------ backward */

/* The geometry of a backward operator: grad_output, a tensor (weight or
 * input), the other's sizes, then stride, padding, dilation, groups. */
static int backward_setup(weft_call *call, bool for_input, conv_geometry *g, weft_dtype *dt,
                          weft_tensor **go, weft_tensor **other)
{
    const char *op = weft_op_name(call->op);
    const weft_tensor *grad = call->args[0].u.tensor, *t = call->args[1].u.tensor;
    const weft_value *sizes = &call->args[2];
    int rc = nn__check_floating(op, "grad_output", grad, dt);
    if (rc == 0)
        rc = cpu__check_cpu(op, for_input ? "weight" : "input", t);
    if (rc == 0)
        rc = parse_params(op, call->args + 3, g);
    if (rc < 0)
        return rc;
    if (for_input)
        rc = finish_geometry(op, sizes->u.ints, sizes->len, weft_tensor_sizes(t),
                             weft_tensor_ndim(t), g);
    else
        rc = finish_geometry(op, weft_tensor_sizes(t), weft_tensor_ndim(t), sizes->u.ints,
                             sizes->len, g);
    if (rc < 0)
        return rc;
    const int64_t *gs = weft_tensor_sizes(grad);
    if (weft_tensor_ndim(grad) != 4 || gs[0] != g->N || gs[1] != g->OC || gs[2] != g->OH ||
        gs[3] != g->OW) {
        char b[128];
        return weft_set_error(WEFT_ESHAPE, "%s: grad_output of shape %s, expected [%lld, %lld, "
                              "%lld, %lld]", op,
                              cpu__shape_str(b, sizeof b, gs, weft_tensor_ndim(grad)),
                              (long long)g->N, (long long)g->OC, (long long)g->OH, (long long)g->OW);
    }
    if ((rc = nn__operand(go, grad, *dt)) == 0)
        rc = nn__operand(other, t, *dt);
    return rc;
}

/* convolution_backward_input: per image and group, dcol = W_g^T G, then
 * col2im (or, for a direct 1x1 convolution, the product itself) */
static int conv_backward_input_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    conv_geometry g;
    weft_dtype dt;
    weft_tensor *go = NULL, *w = NULL, *col = NULL, *gi = NULL;
    int rc = backward_setup(call, true, &g, &dt, &go, &w);
    int64_t shape[4] = {g.N, g.C, g.H, g.W};
    if (rc == 0)
        rc = weft_empty(&gi, shape, 4, dt, WEFT_DEVICE_CPU);
    bool direct = rc == 0 && direct_input(&g);
    int64_t B = rc == 0 ? (direct ? g.N : images_per_pass(&g)) : 0;
    if (rc == 0 && !direct && g.N > 0)
        rc = alloc_columns(&col, &g, B, dt);
    if (rc == 0 && g.N > 0) {
        int64_t L = g.OH * g.OW, R = rows_per_image(&g), OCg = g.OC / g.groups, Rg = R / g.groups;
        size_t es = weft_dtype_size(dt);
        char *gptr = weft_tensor_data_ptr(go), *wptr = weft_tensor_data_ptr(w);
        for (int64_t b0 = 0; b0 < g.N; b0 += B) {
            int64_t nb = g.N - b0 < B ? g.N - b0 : B;
            char *dst = direct ? (char *)weft_tensor_data_ptr(gi) + (size_t)(b0 * R * L) * es
                               : (char *)weft_tensor_data_ptr(col);
            image_gemms jg = {dt, true, false, g.groups, Rg, L, OCg, Rg, L, L, 0.0, wptr,
                              gptr + (size_t)(b0 * g.OC * L) * es, dst,
                              (int64_t)((size_t)(OCg * Rg) * es), (int64_t)((size_t)(g.OC * L) * es),
                              (int64_t)((size_t)(OCg * L) * es), (int64_t)((size_t)(R * L) * es),
                              (int64_t)((size_t)(Rg * L) * es)};
            run_image_gemms(&jg, nb);
            if (!direct) {
                column_job j = {&g, (char *)weft_tensor_data_ptr(gi) +
                                        (size_t)(b0 * g.C * g.H * g.W) * es,
                                weft_tensor_data_ptr(col)};
                cpu__parallel_for(0, nb * g.C, CPU_GRAIN / (R / g.C * L + 1) + 1, col2im_loops[dt],
                                  &j);
            }
        }
    }
    weft_tensor_release(go);
    weft_tensor_release(w);
    weft_tensor_release(col);
    if (rc < 0) {
        weft_tensor_release(gi);
        return rc;
    }
    return nn__set_result(call, 0, gi, weft_tensor_dtype(call->args[0].u.tensor));
}

/* convolution_backward_weight: dW_g = sum over images of G_g col_g^T.
 * Each pass's images are cut into WEIGHT_CHUNKS runs by the pass's size
 * alone; each run sums its images' products into a partial of its own
 * (pieces over the pool; run c of every pass adds to partial c), and the
 * partials are added in run order at the end: the same sums, in the same
 * order, whatever the thread count. */
#define WEIGHT_CHUNKS 4

typedef struct weight_job {
    const conv_geometry *g;
    weft_dtype dt;
    int64_t b0, nb, chunks; /* this pass: images [b0, b0 + nb) of N */
    const char *go;         /* grad_output [N, OC, L] */
    const char *cols;       /* this pass's columns [nb, R, L] */
    char *partials;         /* [chunks, OC, R / groups] */
} weight_job;

static int64_t chunk_start(int64_t c, int64_t n, int64_t chunks)
{
    return (c * n + chunks - 1) / chunks;
}

static void weight_chunk_range(int64_t begin, int64_t end, void *ctx)
{
    const weight_job *j = ctx;
    const conv_geometry *g = j->g;
    int64_t L = g->OH * g->OW, R = rows_per_image(g), OCg = g->OC / g->groups, Rg = R / g->groups;
    size_t es = weft_dtype_size(j->dt);
    for (int64_t c = begin; c < end; c++) {
        int64_t first = j->b0 + chunk_start(c, j->nb, j->chunks);
        int64_t last = j->b0 + chunk_start(c + 1, j->nb, j->chunks);
        char *dw = j->partials + (size_t)(c * g->OC * Rg) * es;
        for (int64_t i = first; i < last; i++)
            for (int64_t gr = 0; gr < g->groups; gr++)
                gemm(j->dt, false, true, OCg, Rg, L, j->go + (size_t)((i * g->OC + gr * OCg) * L) * es,
                     L, j->cols + (size_t)(((i - j->b0) * R + gr * Rg) * L) * es, L, 1.0,
                     dw + (size_t)(gr * OCg * Rg) * es, Rg);
    }
}

static int conv_backward_weight_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    conv_geometry g;
    weft_dtype dt;
    weft_tensor *go = NULL, *x = NULL, *col = NULL, *gw = NULL, *parts = NULL;
    int rc = backward_setup(call, false, &g, &dt, &go, &x);
    int64_t shape[4] = {g.OC, g.C / (g.groups ? g.groups : 1), g.KH, g.KW};
    if (rc == 0)
        rc = weft_empty(&gw, shape, 4, dt, WEFT_DEVICE_CPU);
    bool direct = rc == 0 && direct_input(&g);
    int64_t B = rc == 0 ? (direct ? g.N : images_per_pass(&g)) : 0;
    /* runs within each pass (its size is the shape's, not the threads') */
    int64_t chunks = B < WEIGHT_CHUNKS ? B : WEIGHT_CHUNKS;
    int64_t psize[2] = {chunks > 0 ? chunks : 1, rc == 0 ? weft_tensor_numel(gw) : 0};
    if (rc == 0 && (rc = weft_zeros(&parts, psize, 2, dt, WEFT_DEVICE_CPU)) == 0)
        rc = weft_fill_(gw, 0.0);
    if (rc == 0 && !direct && g.N > 0)
        rc = alloc_columns(&col, &g, B, dt);
    if (rc == 0 && g.N > 0) {
        int64_t L = g.OH * g.OW, R = rows_per_image(&g);
        size_t es = weft_dtype_size(dt);
        int64_t flops = g.OC * (R / g.groups) * L * (B / chunks);
        for (int64_t b0 = 0; b0 < g.N; b0 += B) {
            int64_t nb = g.N - b0 < B ? g.N - b0 : B;
            char *cols = (char *)weft_tensor_data_ptr(x) + (size_t)(b0 * g.C * g.H * g.W) * es;
            if (!direct) {
                column_job j = {&g, cols, weft_tensor_data_ptr(col)};
                cpu__parallel_for(0, nb * R, CPU_GRAIN / (L > 0 ? L : 1) + 1, im2col_loops[dt], &j);
                cols = weft_tensor_data_ptr(col);
            }
            weight_job wj = {&g, dt, b0, nb, chunks, weft_tensor_data_ptr(go), cols,
                             weft_tensor_data_ptr(parts)};
            cpu__parallel_for(0, chunks, flops >= ((int64_t)1 << 20) ? 1 : chunks,
                              weight_chunk_range, &wj);
        }
        /* the partials in run order */
        int64_t n = weft_tensor_numel(gw);
        for (int64_t c = 0; c < chunks; c++) {
            if (dt == WEFT_FLOAT32) {
                float *d = weft_tensor_data_ptr(gw);
                const float *p = (const float *)weft_tensor_data_ptr(parts) + c * n;
                for (int64_t i = 0; i < n; i++)
                    d[i] += p[i];
            } else {
                double *d = weft_tensor_data_ptr(gw);
                const double *p = (const double *)weft_tensor_data_ptr(parts) + c * n;
                for (int64_t i = 0; i < n; i++)
                    d[i] += p[i];
            }
        }
    }
    weft_tensor_release(go);
    weft_tensor_release(x);
    weft_tensor_release(col);
    weft_tensor_release(parts);
    if (rc < 0) {
        weft_tensor_release(gw);
        return rc;
    }
    return nn__set_result(call, 0, gw, weft_tensor_dtype(call->args[0].u.tensor));
}

/* conv1d(input [N, C, L], weight [OC, C/g, K], ...): conv2d of height 1 */
static int conv1d_composite(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_value *a = call->args;
    if (weft_tensor_ndim(a[0].u.tensor) != 3 || weft_tensor_ndim(a[1].u.tensor) != 3)
        return weft_set_error(WEFT_ESHAPE, "conv1d: expected a 3-D input [N, C, L] and a 3-D "
                              "weight, got %d-D and %d-D", weft_tensor_ndim(a[0].u.tensor),
                              weft_tensor_ndim(a[1].u.tensor));
    int64_t lists[3][2];
    const char *names[3] = {"stride", "padding", "dilation"};
    for (int i = 0; i < 3; i++) {
        if (a[3 + i].len != 1)
            return weft_set_error(WEFT_EINVAL, "conv1d: %s must have one element, got %d",
                                  names[i], a[3 + i].len);
        lists[i][0] = i == 1 ? 0 : 1; /* the unit height: no padding */
        lists[i][1] = a[3 + i].u.ints[0];
    }
    weft_tensor *x = NULL, *w = NULL, *y = NULL;
    int rc = weft_unsqueeze(&x, a[0].u.tensor, 2);
    if (rc == 0)
        rc = weft_unsqueeze(&w, a[1].u.tensor, 2);
    if (rc == 0)
        rc = weft_conv2d(&y, x, w, a[2].tag == WEFT_VALUE_TENSOR ? a[2].u.tensor : NULL, lists[0],
                         2, lists[1], 2, lists[2], 2, a[6].u.i);
    weft_tensor_release(x);
    weft_tensor_release(w);
    if (rc == 0)
        rc = weft_squeeze(&call->rets[0].u.tensor, y, 2);
    weft_tensor_release(y);
    if (rc < 0)
        return rc;
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    return 0;
}

/* conv_transpose2d(input [N, Cin, H, W], weight [Cin, Cout/groups, KH, KW],
 * bias?, stride, padding, output_padding, groups, dilation): the gradient of
 * a conv2d whose output has input's shape, with respect to that conv2d's
 * input of size (H - 1) s - 2 p + d (KH - 1) + output_padding + 1. */
static int conv_transpose2d_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "conv_transpose2d";
    const weft_value *a = call->args;
    const weft_tensor *input = a[0].u.tensor, *weight = a[1].u.tensor;
    const weft_tensor *bias = a[2].tag == WEFT_VALUE_TENSOR ? a[2].u.tensor : NULL;
    static const int64_t zero[2] = {0, 0};
    int64_t stride[2], padding[2], output_padding[2], dilation[2], groups = a[6].u.i;
    weft_dtype dt;
    int rc = nn__check_floating(op, "input", input, &dt);
    if (rc == 0)
        rc = cpu__check_cpu(op, "weight", weight);
    if (rc == 0 && bias)
        rc = cpu__check_cpu(op, "bias", bias);
    if (rc == 0)
        rc = nn__pair_arg(op, "stride", &a[3], NULL, 1, stride);
    if (rc == 0)
        rc = nn__pair_arg(op, "padding", &a[4], NULL, 0, padding);
    if (rc == 0)
        rc = nn__pair_arg(op, "output_padding", &a[5], zero, 0, output_padding);
    if (rc == 0)
        rc = nn__pair_arg(op, "dilation", &a[7], NULL, 1, dilation);
    if (rc < 0)
        return rc;
    char bi[128], bw[128];
    const int64_t *in = weft_tensor_sizes(input), *w = weft_tensor_sizes(weight);
    int in_nd = weft_tensor_ndim(input), w_nd = weft_tensor_ndim(weight);
    if (groups < 1)
        return weft_set_error(WEFT_EINVAL, "%s: groups must be positive, got %lld", op,
                              (long long)groups);
    if (in_nd != 4 || w_nd != 4 || in[1] != w[0] || w[0] % groups != 0 || w[1] < 1)
        return weft_set_error(WEFT_ESHAPE, "%s: expected a 4-D input [N, C_in, H, W] and a 4-D "
                              "weight [C_in, C_out / groups, kH, kW] with C_in divisible by "
                              "groups=%lld, got input %s and weight %s", op, (long long)groups,
                              cpu__shape_str(bi, sizeof bi, in, in_nd),
                              cpu__shape_str(bw, sizeof bw, w, w_nd));
    for (int i = 0; i < 2; i++)
        if (output_padding[i] >= stride[i] && output_padding[i] >= dilation[i])
            return weft_set_error(WEFT_EINVAL, "%s: output_padding (%lld) must be smaller than "
                                  "either stride (%lld) or dilation (%lld)", op,
                                  (long long)output_padding[i], (long long)stride[i],
                                  (long long)dilation[i]);
    int64_t out_size[4] = {in[0], w[1] * groups, 0, 0};
    for (int i = 0; i < 2; i++) {
        out_size[2 + i] = (in[2 + i] - 1) * stride[i] - 2 * padding[i] +
                          dilation[i] * (w[2 + i] - 1) + output_padding[i] + 1;
        if (out_size[2 + i] < 1)
            return weft_set_error(WEFT_ESHAPE, "%s: input %s with weight %s gives an output "
                                  "size of %lld, which is too small", op,
                                  cpu__shape_str(bi, sizeof bi, in, in_nd),
                                  cpu__shape_str(bw, sizeof bw, w, w_nd),
                                  (long long)out_size[2 + i]);
    }
    if (bias && (weft_tensor_ndim(bias) != 1 || weft_tensor_size(bias, 0) != out_size[1]))
        return weft_set_error(WEFT_ESHAPE, "%s: bias must be a 1-D tensor of %lld elements", op,
                              (long long)out_size[1]);
    weft_dtype dtype = weft_tensor_dtype(input);
    if (weft_tensor_dtype(weight) != dtype || (bias && weft_tensor_dtype(bias) != dtype))
        return weft_set_error(WEFT_EDTYPE, "%s: input, weight and bias must have the same dtype "
                              "(input is %s, weight %s)", op, weft_dtype_name(dtype),
                              weft_dtype_name(weft_tensor_dtype(weight)));
    /* output_padding of a stride or more (allowed below the dilation) adds
     * rows and columns that no input element reaches: a conv2d input of
     * that size would have a larger output, so the gradient is computed
     * for the reachable size and padded with zeros */
    int64_t reach[4] = {out_size[0], out_size[1], out_size[2], out_size[3]};
    for (int i = 0; i < 2; i++)
        if (output_padding[i] >= stride[i])
            reach[2 + i] -= output_padding[i] - (stride[i] - 1);
    weft_tensor *y = NULL, *b4 = NULL, *y0 = NULL;
    rc = weft_convolution_backward_input(&y0, input, weight, reach, 4, stride, 2, padding, 2,
                                         dilation, 2, groups);
    if (rc == 0 && (reach[2] != out_size[2] || reach[3] != out_size[3])) {
        int64_t pad[4] = {0, out_size[3] - reach[3], 0, out_size[2] - reach[2]};
        rc = weft_pad(&y, y0, pad, 4, "constant", NULL);
        weft_tensor_release(y0);
    } else if (rc == 0) {
        y = y0;
    }
    if (rc == 0 && bias) {
        int64_t shape[4] = {1, out_size[1], 1, 1};
        if ((rc = weft_reshape(&b4, bias, shape, 4)) == 0)
            rc = weft_add_(y, b4);
        weft_tensor_release(b4);
    }
    if (rc < 0) {
        weft_tensor_release(y);
        return rc;
    }
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    call->rets[0].u.tensor = y;
    return 0;
}

static const cpu_kernel_entry conv_entries[] = {
    {"conv2d", conv2d_kernel, NULL},
    {"convolution_backward_input", conv_backward_input_kernel, NULL},
    {"convolution_backward_weight", conv_backward_weight_kernel, NULL},
    {"conv_transpose2d", conv_transpose2d_kernel, NULL},
};

int cpu__register_nn_conv(weft_registrar *reg)
{
    int rc = cpu__register_table(reg, conv_entries, sizeof conv_entries / sizeof *conv_entries);
    if (rc == 0)
        rc = nn__register_composite(reg, "conv1d", conv1d_composite);
    return rc;
}
