/* backends/cpu/nn_upsample.c — upsample_nearest2d and upsample_bilinear2d
 * with their backward operators, and interpolate as a composite over them.
 * Source indices follow PyTorch's formulas (nearest: floor(dst * scale);
 * bilinear: the pixel-area mapping with or without align_corners) computed
 * in the element type, so results match torch's; one plane [H, W] of one
 * image and channel is the unit of parallel work.  The nearest forward
 * moves elements as bytes, so it serves every dtype (torch: uint8 and the
 * floating types); the rest compute in float32 or float64. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "nn.h"

/* How output positions along one axis read the input: each output index o
 * reads i0[o] with weight l0[o] and i1[o] with l1[o] (nearest: i1 = i0). */
typedef struct axis_map {
    int64_t *i0, *i1;
    void *l0, *l1; /* the compute type's weights */
} axis_map;

typedef struct upsample_job {
    bool linear;
    size_t element_size; /* of x and y, for the nearest forward gather */
    int64_t IH, IW, OH, OW;
    axis_map h, w;
    void *x, *y; /* [planes, IH, IW], [planes, OH, OW] */
} upsample_job;

#define DEFINE_UPSAMPLE(NAME, T)                                                           \
    static void axis_##NAME(int64_t in, int64_t out, bool linear, bool align,              \
                            const double *scale, axis_map *m)                              \
    {                                                                                      \
        T *l0 = m->l0, *l1 = m->l1;                                                        \
        if (!linear) {                                                                     \
            float s = scale && *scale > 0 ? (float)(1.0 / *scale) : (float)in / (float)out; \
            for (int64_t o = 0; o < out; o++) {                                            \
                /* compared before converting: a tiny scale makes s inf, and             \
                 * 0 * inf is NaN, which no int64 holds (the fuzzer's UBSan              \
                 * finding); NaN reads the first row, past the end the last */           \
                float v = (float)o * s;                                                    \
                int64_t i = v >= (float)(in - 1) ? in - 1 : v > 0 ? (int64_t)floorf(v) : 0; \
                m->i0[o] = m->i1[o] = i;                                                   \
                l0[o] = 1, l1[o] = 0;                                                      \
            }                                                                              \
            return;                                                                        \
        }                                                                                  \
        T s = align ? (out > 1 ? (T)(in - 1) / (T)(out - 1) : (T)0)                        \
                    : (scale && *scale > 0 ? (T)(1.0 / *scale) : (T)in / (T)out);          \
        for (int64_t o = 0; o < out; o++) {                                                \
            T real = align ? s * (T)o : s * ((T)o + (T)0.5) - (T)0.5;                      \
            if (real < 0)                                                                  \
                real = 0;                                                                  \
            /* a scale that contradicts the sizes (a direct call) would  \
             * reach past the input: such sources stay on its last row */                \
            int64_t i = real < (T)(in - 1) ? (int64_t)real : in - 1; /* inf, NaN: last */ \
            T lambda = real - (T)i;                                                        \
            lambda = !(lambda >= 0) ? 0 : (lambda > 1 ? 1 : lambda);                        \
            m->i0[o] = i;                                                                  \
            m->i1[o] = i + (i < in - 1 ? 1 : 0);                                           \
            l0[o] = 1 - lambda, l1[o] = lambda;                                            \
        }                                                                                  \
    }                                                                                      \
    static void forward_##NAME(int64_t begin, int64_t end, void *ctx)                      \
    {                                                                                      \
        const upsample_job *j = ctx;                                                       \
        const T *h0 = j->h.l0, *h1 = j->h.l1, *w0 = j->w.l0, *w1 = j->w.l1;                \
        for (int64_t p = begin; p < end; p++) {                                            \
            const T *x = (const T *)j->x + p * j->IH * j->IW;                              \
            T *y = (T *)j->y + p * j->OH * j->OW;                                          \
            for (int64_t oh = 0; oh < j->OH; oh++) {                                       \
                const T *r0 = x + j->h.i0[oh] * j->IW, *r1 = x + j->h.i1[oh] * j->IW;      \
                for (int64_t ow = 0; ow < j->OW; ow++) {                                   \
                    int64_t a = j->w.i0[ow], b = j->w.i1[ow];                              \
                    y[oh * j->OW + ow] = h0[oh] * (w0[ow] * r0[a] + w1[ow] * r0[b]) +       \
                                         h1[oh] * (w0[ow] * r1[a] + w1[ow] * r1[b]);        \
                }                                                                          \
            }                                                                              \
        }                                                                                  \
    }                                                                                      \
    /* backward: y is the gradient of the output, x that of the input */                  \
    static void backward_##NAME(int64_t begin, int64_t end, void *ctx)                     \
    {                                                                                      \
        const upsample_job *j = ctx;                                                       \
        const T *h0 = j->h.l0, *h1 = j->h.l1, *w0 = j->w.l0, *w1 = j->w.l1;                \
        for (int64_t p = begin; p < end; p++) {                                            \
            T *x = (T *)j->x + p * j->IH * j->IW;                                          \
            const T *y = (const T *)j->y + p * j->OH * j->OW;                              \
            for (int64_t i = 0; i < j->IH * j->IW; i++)                                    \
                x[i] = 0;                                                                  \
            for (int64_t oh = 0; oh < j->OH; oh++) {                                       \
                T *r0 = x + j->h.i0[oh] * j->IW, *r1 = x + j->h.i1[oh] * j->IW;            \
                for (int64_t ow = 0; ow < j->OW; ow++) {                                   \
                    T g = y[oh * j->OW + ow];                                              \
                    int64_t a = j->w.i0[ow], b = j->w.i1[ow];                              \
                    if (!j->linear) {                                                      \
                        r0[a] += g;                                                        \
                        continue;                                                          \
                    }                                                                      \
                    r0[a] += h0[oh] * w0[ow] * g;                                          \
                    r0[b] += h0[oh] * w1[ow] * g;                                          \
                    r1[a] += h1[oh] * w0[ow] * g;                                          \
                    r1[b] += h1[oh] * w1[ow] * g;                                          \
                }                                                                          \
            }                                                                              \
        }                                                                                  \
    }
DEFINE_UPSAMPLE(float32, float)
DEFINE_UPSAMPLE(float64, double)

/* nearest forward for any dtype: elements are moved as unsigned integers
 * of their size (complex128 as two), one body per size */
#define DEFINE_GATHER(BITS, T, WORDS)                                                      \
    static void gather_planes_##BITS(int64_t begin, int64_t end, void *ctx)                \
    {                                                                                      \
        const upsample_job *j = ctx;                                                       \
        for (int64_t p = begin; p < end; p++) {                                            \
            const T *x = (const T *)j->x + p * j->IH * j->IW * WORDS;                      \
            T *y = (T *)j->y + p * j->OH * j->OW * WORDS;                                  \
            for (int64_t oh = 0; oh < j->OH; oh++) {                                       \
                const T *row = x + j->h.i0[oh] * j->IW * WORDS;                            \
                for (int64_t ow = 0; ow < j->OW; ow++)                                     \
                    for (int w = 0; w < WORDS; w++)                                        \
                        *y++ = row[j->w.i0[ow] * WORDS + w];                               \
            }                                                                              \
        }                                                                                  \
    }
DEFINE_GATHER(8, uint8_t, 1)
DEFINE_GATHER(16, uint16_t, 1)
DEFINE_GATHER(32, uint32_t, 1)
DEFINE_GATHER(64, uint64_t, 1)
DEFINE_GATHER(128, uint64_t, 2)

static void (*gather_of(size_t element_size))(int64_t, int64_t, void *)
{
    switch (element_size) {
    case 1:
        return gather_planes_8;
    case 2:
        return gather_planes_16;
    case 4:
        return gather_planes_32;
    case 8:
        return gather_planes_64;
    default:
        return gather_planes_128;
    }
}

typedef void (*axis_fn)(int64_t in, int64_t out, bool linear, bool align, const double *scale,
                        axis_map *m);
typedef void (*plane_fn)(int64_t begin, int64_t end, void *ctx);
static const axis_fn axis_kernels[WEFT_NUM_DTYPES] = {[WEFT_FLOAT32] = axis_float32,
                                                      [WEFT_FLOAT64] = axis_float64};
static const plane_fn forward_kernels[WEFT_NUM_DTYPES] = {[WEFT_FLOAT32] = forward_float32,
                                                          [WEFT_FLOAT64] = forward_float64};
static const plane_fn backward_kernels[WEFT_NUM_DTYPES] = {[WEFT_FLOAT32] = backward_float32,
                                                           [WEFT_FLOAT64] = backward_float64};

/* What the four operators share: which one, and where its arguments are. */
typedef struct upsample_form {
    bool linear;
    bool backward;
} upsample_form;

static const double *scale_arg(const weft_value *v)
{
    return v->tag == WEFT_VALUE_DOUBLE ? &v->u.d : NULL;
}

/* Runs the planes of x (input or input gradient, [N, C, IH, IW]) against y
 * (output or output gradient, [N, C, OH, OW]), both contiguous of dt
 * (nearest forward: any dtype, with float32 index arithmetic as torch's). */
static int run_planes(const upsample_form *form, weft_dtype dt, bool align,
                      const double *scales[2], weft_tensor *x, weft_tensor *y)
{
    const int64_t *xs = weft_tensor_sizes(x), *ys = weft_tensor_sizes(y);
    bool gather = !form->linear && !form->backward;
    upsample_job j = {form->linear, weft_dtype_size(weft_tensor_dtype(y)), xs[2], xs[3], ys[2],
                      ys[3], {0}, {0}, NULL, NULL};
    if (gather)
        dt = WEFT_FLOAT32;
    size_t es = weft_dtype_size(dt), n = (size_t)(j.OH + j.OW);
    int64_t *idx = malloc(2 * n * sizeof(int64_t));
    char *weights = malloc(2 * n * es);
    if (!idx || !weights) {
        free(idx);
        free(weights);
        return weft_set_error(WEFT_ENOMEM, "%s: out of memory for the index tables",
                              form->linear ? "upsample_bilinear2d" : "upsample_nearest2d");
    }
    j.h = (axis_map){idx, idx + j.OH, weights, weights + (size_t)j.OH * es};
    j.w = (axis_map){idx + 2 * j.OH, idx + 2 * j.OH + j.OW, weights + 2 * (size_t)j.OH * es,
                     weights + (2 * (size_t)j.OH + (size_t)j.OW) * es};
    axis_kernels[dt](j.IH, j.OH, form->linear, align, scales[0], &j.h);
    axis_kernels[dt](j.IW, j.OW, form->linear, align, scales[1], &j.w);
    j.x = weft_tensor_data_ptr(x);
    j.y = weft_tensor_data_ptr(y);
    int64_t planes = xs[0] * xs[1], work = j.OH * j.OW + j.IH * j.IW;
    cpu__parallel_for(0, planes, CPU_GRAIN / (work > 0 ? work : 1) + 1,
                      gather ? gather_of(j.element_size)
                             : (form->backward ? backward_kernels[dt] : forward_kernels[dt]),
                      &j);
    free(idx);
    free(weights);
    return 0;
}

/* upsample_nearest2d(self, output_size, scales_h?, scales_w?),
 * upsample_bilinear2d(self, output_size, align_corners, scales_h?, scales_w?)
 * and their backward operators, which take input_size [N, C, H, W] after
 * output_size. */
static int upsample_kernel(weft_call *call, void *ctx)
{
    const upsample_form *form = ctx;
    const char *op = weft_op_name(call->op);
    const weft_value *a = call->args;
    const weft_tensor *t = a[0].u.tensor;
    int next = form->backward ? 3 : 2;
    bool align = form->linear ? a[next].u.b : false;
    const double *scales[2] = {scale_arg(&a[next + form->linear]),
                               scale_arg(&a[next + form->linear + 1])};
    weft_dtype dt = weft_tensor_dtype(t);
    bool gather = !form->linear && !form->backward;
    int rc = gather ? cpu__check_cpu(op, "self", t)
                    : cpu__check_floating(op, form->backward ? "grad_output" : "self", t, &dt);
    if (rc < 0)
        return rc;
    char b1[128], b2[128];
    const int64_t *out_size = a[1].u.ints;
    if (a[1].len != 2 || out_size[0] < 1 || out_size[1] < 1)
        return weft_set_error(WEFT_EINVAL, "%s: output_size must be two positive sizes, got %s",
                              op, weft_format_shape(b1, sizeof b1, out_size, a[1].len));
    int64_t in_size[4];
    if (form->backward) {
        if (a[2].len != 4)
            return weft_set_error(WEFT_EINVAL, "%s: input_size must have 4 elements [N, C, H, "
                                  "W], got %s", op,
                                  weft_format_shape(b1, sizeof b1, a[2].u.ints, a[2].len));
        memcpy(in_size, a[2].u.ints, sizeof in_size);
    } else if (weft_tensor_ndim(t) == 4) {
        memcpy(in_size, weft_tensor_sizes(t), sizeof in_size);
    } else {
        return weft_set_error(WEFT_ESHAPE, "%s: expected a 4-D input [N, C, H, W], got %s", op,
                              weft_format_shape(b1, sizeof b1, weft_tensor_sizes(t),
                                             weft_tensor_ndim(t)));
    }
    if (in_size[0] < 0 || in_size[1] < 1 || in_size[2] < 1 || in_size[3] < 1)
        return weft_set_error(WEFT_ESHAPE, "%s: expected an input [N, C, H, W] with non-zero C, "
                              "H and W, got %s", op, weft_format_shape(b1, sizeof b1, in_size, 4));
    int64_t y_size[4] = {in_size[0], in_size[1], out_size[0], out_size[1]};
    if (form->backward && (weft_tensor_ndim(t) != 4 ||
                           memcmp(weft_tensor_sizes(t), y_size, sizeof y_size) != 0))
        return weft_set_error(WEFT_ESHAPE, "%s: grad_output of shape %s, expected %s", op,
                              weft_format_shape(b1, sizeof b1, weft_tensor_sizes(t),
                                             weft_tensor_ndim(t)),
                              weft_format_shape(b2, sizeof b2, y_size, 4));
    weft_tensor *src = NULL, *dest = NULL;
    rc = cpu__operand(&src, t, dt);
    if (rc == 0)
        rc = weft_empty(&dest, form->backward ? in_size : y_size, 4, dt, WEFT_DEVICE_CPU);
    if (rc == 0)
        rc = form->backward ? run_planes(form, dt, align, scales, dest, src)
                            : run_planes(form, dt, align, scales, src, dest);
    weft_tensor_release(src);
    if (rc < 0) {
        weft_tensor_release(dest);
        return rc;
    }
    return cpu__set_result(call, 0, dest, weft_tensor_dtype(t));
}

/* interpolate(input, size?, scale_factor?, mode, align_corners): the output
 * size is size, or floor(in * scale) per spatial dim with the scales passed
 * on, as torch.nn.functional.interpolate does without
 * recompute_scale_factor.  size and scale_factor take one value for both
 * dims or one per dim (H, W). */
static int interpolate_composite(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "interpolate";
    const weft_value *a = call->args;
    const weft_tensor *input = a[0].u.tensor;
    bool has_size = a[1].tag == WEFT_VALUE_INT_LIST;
    bool has_scale = a[2].tag == WEFT_VALUE_DOUBLE_LIST;
    const char *mode = a[3].u.string ? a[3].u.string : "(null)";
    bool align = a[4].u.b;
    char b1[128];
    if (weft_tensor_ndim(input) != 4)
        return weft_set_error(WEFT_ESHAPE, "%s: only 4-D input [N, C, H, W] is supported, got %s",
                              op, weft_format_shape(b1, sizeof b1, weft_tensor_sizes(input),
                                                 weft_tensor_ndim(input)));
    if (has_size == has_scale)
        return weft_set_error(WEFT_EINVAL, "%s: %s", op, has_size
                              ? "only one of size or scale_factor should be defined"
                              : "either size or scale_factor should be defined");
    bool linear = strcmp(mode, "bilinear") == 0;
    if (!linear && strcmp(mode, "nearest") != 0)
        return weft_set_error(WEFT_EINVAL, "%s: mode '%s' is not supported (expected 'nearest' "
                              "or 'bilinear')", op, mode);
    if (!linear && align)
        return weft_set_error(WEFT_EINVAL, "%s: align_corners can only be set with mode "
                              "'bilinear'", op);
    int64_t out[2];
    double scales[2];
    if (has_size) {
        if (a[1].len != 1 && a[1].len != 2)
            return weft_set_error(WEFT_EINVAL, "%s: size must have one or two elements for a "
                                  "4-D input, got %d", op, a[1].len);
        out[0] = a[1].u.ints[0];
        out[1] = a[1].u.ints[a[1].len - 1];
    } else {
        if (a[2].len != 1 && a[2].len != 2)
            return weft_set_error(WEFT_EINVAL, "%s: scale_factor must have one element or two "
                                  "(one per spatial dim of a 4-D input), got %d", op, a[2].len);
        for (int i = 0; i < 2; i++) {
            scales[i] = a[2].u.doubles[a[2].len == 2 ? i : 0];
            if (!(scales[i] > 0) || !isfinite(scales[i]))
                return weft_set_error(WEFT_EINVAL, "%s: scale_factor must be positive and "
                                      "finite, got %g", op, scales[i]);
            double s = floor((double)weft_tensor_size(input, 2 + i) * scales[i]);
            out[i] = s > (double)INT64_MAX / 2 ? INT64_MAX / 2 : (int64_t)s;
        }
    }
    const double *sh = has_scale ? &scales[0] : NULL, *sw = has_scale ? &scales[1] : NULL;
    weft_tensor *r = NULL;
    int rc = linear ? weft_upsample_bilinear2d(&r, input, out, 2, align, sh, sw)
                    : weft_upsample_nearest2d(&r, input, out, 2, sh, sw);
    if (rc < 0)
        return rc;
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    call->rets[0].u.tensor = r;
    return 0;
}

static const upsample_form nearest = {false, false}, nearest_backward = {false, true};
static const upsample_form bilinear = {true, false}, bilinear_backward = {true, true};
static const weft_kernel_entry upsample_entries[] = {
    {"upsample_nearest2d", upsample_kernel, &nearest},
    {"upsample_nearest2d_backward", upsample_kernel, &nearest_backward},
    {"upsample_bilinear2d", upsample_kernel, &bilinear},
    {"upsample_bilinear2d_backward", upsample_kernel, &bilinear_backward},
};

int cpu__register_nn_upsample(weft_registrar *reg)
{
    int rc = weft_register_kernel_table(reg, WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, upsample_entries,
                                 sizeof upsample_entries / sizeof *upsample_entries);
    if (rc == 0)
        rc = cpu__register_composite(reg, "interpolate", interpolate_composite);
    return rc;
}
