/* layouts/quantized/affine.c — the "quantized" layout: integer values plus
 * a per-tensor or per-channel affine quantizer (value = (q - zero_point) *
 * scale), the operators that make such tensors (quantize_per_tensor,
 * quantize_per_channel, make_per_*_quantized_tensor) and read them
 * (dequantize, int_repr, q_scale, ...), and the refusal every other
 * operator gives.  Rounding follows PyTorch's CPU path exactly: the value is
 * multiplied by the float reciprocal of the scale, rounded half to even in
 * float, shifted by the zero point and clamped, so int_repr is bit-equal to
 * torch's (tests/python/test_quantized.py checks it). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "quantized.h"

int qt__affine_layout = -1;

/* -------------------------------------------------------------- helpers */

int qt__qrange(const char *op, weft_dtype dtype, int64_t *lo, int64_t *hi)
{
    switch (dtype) {
    case WEFT_INT8:
        *lo = INT8_MIN, *hi = INT8_MAX;
        return 0;
    case WEFT_UINT8:
        *lo = 0, *hi = UINT8_MAX;
        return 0;
    case WEFT_INT32:
        *lo = INT32_MIN, *hi = INT32_MAX;
        return 0;
    default:
        return weft_set_error(WEFT_EDTYPE,
                              "%s: a quantized tensor is stored as int8 (qint8), uint8 (quint8) "
                              "or int32 (qint32), not %s",
                              op, weft_dtype_name(dtype));
    }
}

int qt__check_params(const char *op, double scale, int64_t zero_point, weft_dtype dtype)
{
    int64_t lo = 0, hi = 0;
    int rc = qt__qrange(op, dtype, &lo, &hi);
    if (rc < 0)
        return rc;
    /* the reciprocal is taken in float, so the scale must be one too */
    if (!(scale > 0) || !isfinite(scale) || !((float)scale > 0) || !isfinite(1.0f / (float)scale))
        return weft_set_error(WEFT_EINVAL,
                              "%s: scale must be positive and finite (and representable as a "
                              "float32 with a finite reciprocal), got %g",
                              op, scale);
    if (zero_point < lo || zero_point > hi)
        return weft_set_error(WEFT_EINVAL,
                              "%s: zero_point %lld is outside the range of %s [%lld, %lld]", op,
                              (long long)zero_point, weft_dtype_name(dtype), (long long)lo,
                              (long long)hi);
    return 0;
}

static void affine_free(void *p)
{
    qt_affine *q = p;
    if (!q)
        return;
    weft_tensor_release(q->repr);
    weft_tensor_release(q->scales);
    weft_tensor_release(q->zero_points);
    qt__prepacked_free(q->prepacked);
    free(q);
}

int qt__wrap(weft_tensor **out, weft_tensor *repr, const qt_affine *q)
{
    qt_affine *p = calloc(1, sizeof *p);
    if (!p)
        return weft_set_error(WEFT_ENOMEM, "quantized: out of memory");
    *p = *q;
    p->prepacked = NULL; /* packed for q's integers, not for a view of them */
    p->repr = weft_tensor_retain(repr);
    p->scales = q->scales ? weft_tensor_retain(q->scales) : NULL;
    p->zero_points = q->zero_points ? weft_tensor_retain(q->zero_points) : NULL;
    /* on failure the core hands p to affine_free: nothing leaks */
    return weft_tensor_new_layout(out, qt__affine_layout, weft_tensor_sizes(repr),
                                  weft_tensor_ndim(repr), weft_tensor_dtype(repr),
                                  weft_tensor_device(repr), p);
}

/* The extents around a channel axis of a contiguous shape. */
static void split_at(const int64_t *sizes, int ndim, int axis, int64_t *outer, int64_t *channels,
                     int64_t *inner)
{
    *outer = 1, *inner = 1, *channels = 1;
    for (int d = 0; d < ndim; d++) {
        if (d < axis)
            *outer *= sizes[d];
        else if (d == axis)
            *channels = sizes[d];
        else
            *inner *= sizes[d];
    }
}

/* ------------------------------------------------ kernels, once per dtype */

/* nearbyintf(v) in the default rounding mode (half to even), without the
 * libm call that the baseline x86-64 ISA (no SSE4.1 roundss) makes of it:
 * adding and subtracting 1.5 * 2^23 leaves v rounded to an integer by the
 * addition itself, exactly, while |v| < 2^22; larger floats are integers
 * or halves that only qint32 can hold, and take the call. */
static inline float round_small(float v) /* |v| < 2^22 */
{
    const float magic = 12582912.0f;
    float t = v + magic; /* kept: without -ffast-math the compiler may not fold it */
    return t - magic;
}

static inline float round_half_even(float v)
{
    return fabsf(v) < 4194304.0f ? round_small(v) : nearbyintf(v);
}

/* QT_AFFINE_KERNELS(T) writes quantize_T (float -> T, PyTorch's rounding)
 * and dequantize_T (T -> float) over a run of n values sharing one scale
 * and zero point; the table below reaches them by dtype. */
/* The quantize loops are the int8 models' per-batch cost besides the
 * products: a copy for AVX2 machines (eight lanes) beside the baseline's
 * four, picked when the plugin loads, as the sparse plugin does. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__AVX2__)
#define QT_HOT __attribute__((target_clones("default", "arch=haswell")))
#else
#define QT_HOT
#endif

#define QT_AFFINE_KERNELS(T)                                                                \
    QT_HOT static void quantize_##T(const float *src, void *dst_, int64_t n, double scale, \
                             int64_t zp, int64_t lo, int64_t hi)                           \
    {                                                                                       \
        T *dst = dst_;                                                                      \
        const float inv = 1.0f / (float)scale;                                              \
        const double flo = (double)lo, fhi = (double)hi, fzp = (double)zp;                  \
        if (sizeof(T) == 1) {                                                               \
            /* 8 bits: clamping before rounding, at the integers lo - zp and hi - zp, is     \
             * the same as after (rounding is monotonic and keeps integers), and keeps  \
             * |v| small enough for the branch-free rounding: a loop the compiler       \
             * vectorises */                                                               \
            const float vlo = (float)(lo - zp), vhi = (float)(hi - zp), z = (float)zp;       \
            for (int64_t i = 0; i < n; i++) {                                               \
                float v = src[i] * inv;                                                     \
                v = !(v >= vlo) ? vlo : v; /* NaN too: no float->int of a NaN */            \
                v = v > vhi ? vhi : v;                                                      \
                dst[i] = (T)(int)(round_small(v) + z);                                      \
            }                                                                               \
            return;                                                                         \
        }                                                                                   \
        for (int64_t i = 0; i < n; i++) {                                                   \
            /* rounded in float as torch does; the clamp in double cannot overflow; a  \
             * NaN goes to lo, as in the 8-bit loop (no float->int of a NaN) */            \
            double v = fzp + (double)round_half_even(src[i] * inv);                         \
            v = !(v >= flo) ? flo : v > fhi ? fhi : v;                                      \
            dst[i] = (T)(int64_t)v;                                                         \
        }                                                                                   \
    }                                                                                       \
    /* torch's two roundings: per tensor (q - z) times the scale as a float, \
     * per channel the product in double, rounded once to float */           \
    QT_HOT static void dequantize_##T(const void *src_, float *dst, int64_t n, double scale, \
                               int64_t zp, bool per_channel)                                \
    {                                                                                       \
        const T *src = src_;                                                                \
        const float s = (float)scale;                                                       \
        if (per_channel)                                                                    \
            for (int64_t i = 0; i < n; i++)                                                 \
                dst[i] = (float)((double)((int64_t)src[i] - zp) * scale);                   \
        else                                                                                \
            for (int64_t i = 0; i < n; i++)                                                 \
                dst[i] = (float)((int64_t)src[i] - zp) * s;                                 \
    }

QT_AFFINE_KERNELS(int8_t)
QT_AFFINE_KERNELS(uint8_t)
QT_AFFINE_KERNELS(int32_t)

typedef struct affine_kernels {
    void (*quantize)(const float *, void *, int64_t, double, int64_t, int64_t, int64_t);
    void (*dequantize)(const void *, float *, int64_t, double, int64_t, bool);
} affine_kernels;

static const affine_kernels *kernels_for(weft_dtype dtype)
{
    static const affine_kernels i8 = {quantize_int8_t, dequantize_int8_t},
                                u8 = {quantize_uint8_t, dequantize_uint8_t},
                                i32 = {quantize_int32_t, dequantize_int32_t};
    return dtype == WEFT_INT8 ? &i8 : dtype == WEFT_UINT8 ? &u8 : dtype == WEFT_INT32 ? &i32 : NULL;
}

/* ---------------------------------------------- quantize and dequantize */

/* Quantize and dequantize run on weft's intra-op pool (weft_parallel_for)
 * in runs that share a scale and zero point: a channel's inner values
 * (per channel), or pieces of RUN values (per tensor).  On one thread they
 * were a serial share of the int8 models' inference that many cores made
 * large (docs/benchmarks.md, issue 17, fourteenth session). */
enum { RUN = 16384, PIECE_VALUES = 65536 };
typedef struct affine_job {
    const affine_kernels *k;
    bool quantize;
    const char *src;
    char *dst;
    size_t src_size, dst_size; /* bytes a value */
    int64_t n, run, channels;  /* values, values a run, runs before the channel repeats */
    double scale;              /* per tensor */
    int64_t zero_point, lo, hi;
    const double *scales; /* per channel, else NULL */
    const int64_t *zero_points;
} affine_job;

static void affine_runs(int64_t a, int64_t b, void *arg)
{
    const affine_job *j = arg;
    for (int64_t r = a; r < b; r++) {
        int64_t at = r * j->run, len = j->n - at < j->run ? j->n - at : j->run;
        double scale = j->scales ? j->scales[r % j->channels] : j->scale;
        int64_t zp = j->scales ? j->zero_points[r % j->channels] : j->zero_point;
        const void *x = j->src + (size_t)at * j->src_size;
        void *y = j->dst + (size_t)at * j->dst_size;
        if (j->quantize)
            j->k->quantize(x, y, len, scale, zp, j->lo, j->hi);
        else
            j->k->dequantize(x, y, len, scale, zp, j->scales != NULL);
    }
}

/* j's runs (q's scheme) over the pool; j's kernels, direction, pointers,
 * sizes and range already set */
static int affine_run_all(affine_job *j, const qt_affine *q, const int64_t *sizes, int ndim)
{
    if (q->scheme == QT_PER_TENSOR_AFFINE) {
        j->run = RUN;
        j->channels = 1;
        j->scale = q->scale;
        j->zero_point = q->zero_point;
    } else {
        int64_t outer, channels, inner;
        split_at(sizes, ndim, q->axis, &outer, &channels, &inner);
        if (inner == 0)
            return 0;
        j->run = inner;
        j->channels = channels;
        j->scales = weft_tensor_data_ptr(q->scales);
        j->zero_points = weft_tensor_data_ptr(q->zero_points);
    }
    int64_t runs = (j->n + j->run - 1) / j->run;
    int64_t grain = PIECE_VALUES / j->run;
    return weft_parallel_for(0, runs, grain > 1 ? grain : 1, affine_runs, j);
}

/* A contiguous float32 copy (or reference) of src, which must be floating. */
static int float_input(weft_tensor **out, const char *op, const weft_tensor *src)
{
    *out = NULL;
    if (!weft_dtype_is_floating(weft_tensor_dtype(src)))
        return weft_set_error(WEFT_EDTYPE, "%s: expected a floating-point input, got %s", op,
                              weft_dtype_name(weft_tensor_dtype(src)));
    /* the common input (contiguous float32 activations) is read in place:
     * a copy of it was a third of quantize_per_tensor's time */
    if (weft_tensor_dtype(src) == WEFT_FLOAT32 && weft_tensor_is_contiguous(src)) {
        *out = weft_tensor_retain((weft_tensor *)src);
        return 0;
    }
    weft_tensor *f;
    int rc = weft_to_dtype(&f, src, WEFT_FLOAT32);
    if (rc < 0)
        return rc;
    rc = weft_contiguous(out, f);
    weft_tensor_release(f);
    return rc;
}

int qt__quantize(weft_tensor **out, const weft_tensor *src, const qt_affine *q, weft_dtype dtype)
{
    const char *op = q->scheme == QT_PER_TENSOR_AFFINE ? "quantize_per_tensor"
                                                       : "quantize_per_channel";
    int64_t lo = 0, hi = 0;
    int rc = qt__qrange(op, dtype, &lo, &hi);
    if (rc < 0)
        return rc;
    weft_tensor *f, *repr = NULL;
    if ((rc = float_input(&f, op, src)) < 0)
        return rc;
    rc = weft_new_output(&repr, f, weft_tensor_sizes(f), weft_tensor_ndim(f), dtype);
    if (rc == 0) {
        affine_job j = {.k = kernels_for(dtype), .quantize = true,
                        .src = weft_tensor_data_ptr(f), .dst = weft_tensor_data_ptr(repr),
                        .src_size = sizeof(float), .dst_size = weft_dtype_size(dtype),
                        .n = weft_tensor_numel(f), .lo = lo, .hi = hi};
        rc = affine_run_all(&j, q, weft_tensor_sizes(f), weft_tensor_ndim(f));
    }
    if (rc == 0)
        rc = qt__wrap(out, repr, q);
    weft_tensor_release(repr);
    weft_tensor_release(f);
    return rc;
}

int qt__dequantize(weft_tensor **out, const weft_tensor *t)
{
    const qt_affine *q = weft_tensor_layout_payload(t);
    weft_tensor *c, *f = NULL;
    int rc = weft_contiguous(&c, q->repr);
    if (rc < 0)
        return rc;
    rc = weft_new_output(&f, c, weft_tensor_sizes(c), weft_tensor_ndim(c), WEFT_FLOAT32);
    if (rc == 0) {
        affine_job j = {.k = kernels_for(weft_tensor_dtype(c)), .quantize = false,
                        .src = weft_tensor_data_ptr(c), .dst = weft_tensor_data_ptr(f),
                        .src_size = weft_dtype_size(weft_tensor_dtype(c)),
                        .dst_size = sizeof(float), .n = weft_tensor_numel(c)};
        rc = affine_run_all(&j, q, weft_tensor_sizes(c), weft_tensor_ndim(c));
    }
    if (rc == 0)
        *out = f;
    else
        weft_tensor_release(f);
    weft_tensor_release(c);
    return rc;
}

/* ------------------------------------------------------ the parameters */

/* A contiguous tensor of t's values that shares no memory with t. */
static int owned_contiguous(weft_tensor **out, const weft_tensor *t)
{
    weft_tensor *c;
    int rc = weft_contiguous(&c, t);
    if (rc < 0)
        return rc;
    if (!weft_tensor_shares_storage(c, t)) {
        *out = c;
        return 0;
    }
    rc = weft_clone(out, c);
    weft_tensor_release(c);
    return rc;
}

/* Reads the per-channel parameters of op into q: float64 scales and int64
 * zero points, contiguous, one per entry of sizes[axis], each checked. */
static int channel_params(qt_affine *q, const char *op, const weft_tensor *scales,
                          const weft_tensor *zero_points, int64_t axis, const int64_t *sizes,
                          int ndim, weft_dtype dtype)
{
    q->scheme = QT_PER_CHANNEL_AFFINE;
    q->scales = q->zero_points = NULL;
    if (axis < 0 || axis >= ndim)
        return weft_set_error(WEFT_EINVAL, "%s: axis %lld is out of range for a tensor of %d "
                                           "dimensions",
                              op, (long long)axis, ndim);
    q->axis = (int)axis;
    int64_t n = sizes[axis];
    if (weft_tensor_ndim(scales) != 1 || weft_tensor_numel(scales) != n ||
        weft_tensor_ndim(zero_points) != 1 || weft_tensor_numel(zero_points) != n)
        return weft_set_error(WEFT_ESHAPE,
                              "%s: expected %lld scales and %lld zero points (the size of "
                              "dimension %lld) as 1-d tensors, got %lld and %lld",
                              op, (long long)n, (long long)n, (long long)axis,
                              (long long)weft_tensor_numel(scales),
                              (long long)weft_tensor_numel(zero_points));
    if (weft_tensor_layout(scales) || weft_tensor_layout(zero_points) ||
        !weft_dtype_is_floating(weft_tensor_dtype(scales)) ||
        !weft_dtype_is_integral(weft_tensor_dtype(zero_points), false))
        return weft_set_error(WEFT_EDTYPE, "%s: scales must be a strided floating tensor and "
                                           "zero_points an integer one, got %s and %s",
                              op, weft_dtype_name(weft_tensor_dtype(scales)),
                              weft_dtype_name(weft_tensor_dtype(zero_points)));
    weft_tensor *s = NULL, *z = NULL, *sc = NULL, *zc = NULL;
    int rc = weft_to_dtype(&s, scales, WEFT_FLOAT64);
    if (rc == 0)
        rc = weft_to_dtype(&z, zero_points, WEFT_INT64);
    /* copies, so that a caller writing its tensors later cannot change ours */
    if (rc == 0)
        rc = owned_contiguous(&sc, s);
    if (rc == 0)
        rc = owned_contiguous(&zc, z);
    weft_tensor_release(s);
    weft_tensor_release(z);
    for (int64_t c = 0; rc == 0 && c < n; c++) {
        char what[96];
        snprintf(what, sizeof what, "%s (channel %lld)", op, (long long)c);
        rc = qt__check_params(what, ((const double *)weft_tensor_data_ptr(sc))[c],
                              ((const int64_t *)weft_tensor_data_ptr(zc))[c], dtype);
    }
    if (rc < 0) {
        weft_tensor_release(sc);
        weft_tensor_release(zc);
        return rc;
    }
    q->scales = sc;
    q->zero_points = zc;
    return 0;
}

static void params_release(qt_affine *q)
{
    weft_tensor_release(q->scales);
    weft_tensor_release(q->zero_points);
}

static int required_dtype(const char *op, const weft_call *call, int i, weft_dtype *dtype)
{
    if (weft_arg_is_none(call, i))
        return weft_set_error(WEFT_EINVAL, "%s: dtype is required: int8 for qint8, uint8 for "
                                           "quint8, int32 for qint32",
                              op);
    *dtype = call->args[i].u.dtype;
    int64_t lo = 0, hi = 0;
    return qt__qrange(op, *dtype, &lo, &hi);
}

/* quantize_per_tensor(Tensor self, float scale, int zero_point, ScalarType? dtype) */
static int quantize_per_tensor_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "quantize_per_tensor";
    weft_dtype dtype = WEFT_INT8;
    int rc = required_dtype(op, call, 3, &dtype);
    qt_affine q = {.scheme = QT_PER_TENSOR_AFFINE,
                   .scale = weft_arg_double(call, 1),
                   .zero_point = weft_arg_int(call, 2)};
    if (rc == 0)
        rc = qt__check_params(op, q.scale, q.zero_point, dtype);
    weft_tensor *out = NULL;
    if (rc == 0)
        rc = qt__quantize(&out, weft_arg_tensor(call, 0), &q, dtype);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* quantize_per_channel(Tensor self, Tensor scales, Tensor zero_points, int axis, ScalarType? dtype) */
static int quantize_per_channel_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "quantize_per_channel";
    const weft_tensor *self = weft_arg_tensor(call, 0);
    weft_dtype dtype = WEFT_INT8;
    int rc = required_dtype(op, call, 4, &dtype);
    if (rc < 0)
        return rc;
    qt_affine q = {0};
    rc = channel_params(&q, op, weft_arg_tensor(call, 1), weft_arg_tensor(call, 2),
                        weft_arg_int(call, 3), weft_tensor_sizes(self), weft_tensor_ndim(self),
                        dtype);
    weft_tensor *out = NULL;
    if (rc == 0)
        rc = qt__quantize(&out, self, &q, dtype);
    params_release(&q);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* An integer tensor of op's; its copy (so the caller may go on writing
 * its own) becomes the representation. */
static int repr_input(weft_tensor **out, const char *op, const weft_tensor *self)
{
    int64_t lo = 0, hi = 0;
    int rc = qt__qrange(op, weft_tensor_dtype(self), &lo, &hi);
    return rc < 0 ? rc : weft_clone(out, self);
}

/* make_per_tensor_quantized_tensor(Tensor self, float scale, int zero_point) */
static int make_per_tensor_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "make_per_tensor_quantized_tensor";
    const weft_tensor *self = weft_arg_tensor(call, 0);
    qt_affine q = {.scheme = QT_PER_TENSOR_AFFINE,
                   .scale = weft_arg_double(call, 1),
                   .zero_point = weft_arg_int(call, 2)};
    weft_tensor *repr = NULL, *out = NULL;
    int rc = qt__check_params(op, q.scale, q.zero_point, weft_tensor_dtype(self));
    if (rc == 0)
        rc = repr_input(&repr, op, self);
    if (rc == 0)
        rc = qt__wrap(&out, repr, &q);
    weft_tensor_release(repr);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* make_per_channel_quantized_tensor(Tensor self, Tensor scales, Tensor zero_points, int axis) */
static int make_per_channel_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "make_per_channel_quantized_tensor";
    const weft_tensor *self = weft_arg_tensor(call, 0);
    int64_t lo = 0, hi = 0;
    int rc = qt__qrange(op, weft_tensor_dtype(self), &lo, &hi);
    if (rc < 0)
        return rc;
    qt_affine q = {0};
    rc = channel_params(&q, op, weft_arg_tensor(call, 1), weft_arg_tensor(call, 2),
                        weft_arg_int(call, 3), weft_tensor_sizes(self), weft_tensor_ndim(self),
                        weft_tensor_dtype(self));
    weft_tensor *repr = NULL, *out = NULL;
    if (rc == 0)
        rc = repr_input(&repr, op, self);
    if (rc == 0)
        rc = qt__wrap(&out, repr, &q);
    weft_tensor_release(repr);
    params_release(&q);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

static int dequantize_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor *out = NULL;
    int rc = qt__dequantize(&out, weft_arg_tensor(call, 0));
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

static int int_repr_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const qt_affine *q = weft_tensor_layout_payload(weft_arg_tensor(call, 0));
    weft_tensor *out = NULL;
    int rc = weft_clone(&out, q->repr);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* copy_(self, src) into a quantized self, as torch's q.copy_(x): the
 * values of src (float, or quantized: dequantized first unless its
 * per-tensor quantizer is self's, when its integers are copied as they
 * are), broadcast to self's shape, quantized with self's quantizer into
 * self's integers in place.  Writing them moves their version, so a
 * weight packed for oneDNN (dnnl_linear.c, dnnl_conv.c) repacks at its
 * next use instead of computing with the old values. */
static int copy_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = weft_arg_tensor(call, 0), *src = weft_arg_tensor(call, 1);
    const qt_affine *q = weft_tensor_layout_payload(self);
    if (weft_tensor_layout(self) != qt__affine_layout)
        return weft_set_error(WEFT_ENOTSUP,
                              "copy_: a quantized source needs a quantized destination "
                              "(dequantize() it to copy into a '%s' tensor)",
                              weft_layout_name(weft_tensor_layout(self)));
    weft_tensor *values = NULL, *wide = NULL, *quantized = NULL;
    int rc = 0;
    if (weft_tensor_layout(src) == qt__affine_layout) {
        const qt_affine *s = weft_tensor_layout_payload(src);
        if (q->scheme == QT_PER_TENSOR_AFFINE && s->scheme == QT_PER_TENSOR_AFFINE &&
            s->scale == q->scale && s->zero_point == q->zero_point &&
            weft_tensor_dtype(src) == weft_tensor_dtype(self))
            return weft_copy_(q->repr, s->repr);
        rc = qt__dequantize(&values, src);
    } else if (weft_tensor_layout(src) == WEFT_LAYOUT_STRIDED) {
        values = weft_tensor_retain((weft_tensor *)src);
    } else {
        return weft_set_error(WEFT_ENOTSUP,
                              "copy_: a quantized tensor takes a float or quantized source, got "
                              "layout '%s'",
                              weft_layout_name(weft_tensor_layout(src)));
    }
    if (rc == 0)
        rc = weft_expand(&wide, values, weft_tensor_sizes(self), weft_tensor_ndim(self));
    if (rc == 0)
        rc = qt__quantize(&quantized, wide, q, weft_tensor_dtype(self));
    if (rc == 0)
        rc = weft_copy_(q->repr, ((const qt_affine *)weft_tensor_layout_payload(quantized))->repr);
    weft_tensor_release(values);
    weft_tensor_release(wide);
    weft_tensor_release(quantized);
    return rc;
}

/* The parameter readers share one kernel; ctx says which. */
enum { P_SCALE, P_ZERO_POINT, P_SCALES, P_ZERO_POINTS, P_AXIS };
static int param_kernel(weft_call *call, void *ctx)
{
    static const char *const names[] = {"q_scale", "q_zero_point", "q_per_channel_scales",
                                        "q_per_channel_zero_points", "q_per_channel_axis"};
    int which = (int)(intptr_t)ctx;
    const weft_tensor *self = weft_arg_tensor(call, 0);
    const qt_affine *q = weft_tensor_layout_payload(self);
    bool per_tensor = which == P_SCALE || which == P_ZERO_POINT;
    if (per_tensor != (q->scheme == QT_PER_TENSOR_AFFINE))
        return weft_set_error(WEFT_EINVAL, "%s: expected a %s quantized tensor, got a %s one",
                              names[which], per_tensor ? "per-tensor" : "per-channel",
                              per_tensor ? "per-channel" : "per-tensor");
    weft_tensor *out = NULL;
    weft_device dev = weft_tensor_device(self);
    int rc;
    switch (which) {
    case P_SCALE:
        rc = weft_full(&out, NULL, 0, q->scale, WEFT_FLOAT64, dev);
        break;
    case P_ZERO_POINT:
        rc = weft_full(&out, NULL, 0, (double)q->zero_point, WEFT_INT64, dev);
        break;
    case P_SCALES:
        rc = weft_clone(&out, q->scales);
        break;
    case P_ZERO_POINTS:
        rc = weft_clone(&out, q->zero_points);
        break;
    default:
        rc = weft_full(&out, NULL, 0, q->axis, WEFT_INT64, dev);
        break;
    }
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* What every operator without a kernel for the layout says: float kernels
 * would read the integers as if they were the values. */
static int refuse_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    return weft_set_error(WEFT_ENOKERNEL,
                          "%s: not supported for a quantized tensor (layout 'quantized'); call "
                          "dequantize() first to get a float tensor, or int_repr() for its "
                          "integers",
                          weft_op_name(call->op));
}

/* ------------------------------------------------------ the layout's face */

static int to_strided(weft_tensor **out, const weft_tensor *t)
{
    /* the tensor's dtype is its representation's: its strided form is the
     * integers (the values are dequantize()'s) */
    const qt_affine *q = weft_tensor_layout_payload(t);
    return weft_clone(out, q->repr);
}

static int describe(const weft_tensor *t, char *buf, size_t size)
{
    const qt_affine *q = weft_tensor_layout_payload(t);
    if (q->scheme == QT_PER_TENSOR_AFFINE)
        return snprintf(buf, size, "per_tensor_affine, scale=%.9g, zero_point=%lld", q->scale,
                        (long long)q->zero_point);
    return snprintf(buf, size, "per_channel_affine, axis=%d, %lld channels", q->axis,
                    (long long)weft_tensor_numel(q->scales));
}

static int64_t nbytes(const weft_tensor *t)
{
    const qt_affine *q = weft_tensor_layout_payload(t);
    return weft_tensor_numel(t) * (int64_t)weft_dtype_size(weft_tensor_dtype(t)) +
           (q->scales ? weft_tensor_nbytes(q->scales) + weft_tensor_nbytes(q->zero_points) : 0);
}

int qt__register_affine(weft_registrar *reg)
{
    static const weft_layout_interface iface = {
        .struct_size = sizeof iface,
        .name = "quantized",
        .release = affine_free,
        .to_strided = to_strided,
        .describe = describe,
        .nbytes = nbytes,
        .view = qt__layout_view,
    };
    int rc = weft_register_layout(reg, &iface, &qt__affine_layout);
    if (rc < 0)
        return rc;
    int key = weft_layout_key(qt__affine_layout);
    /* float tensors come in on the dense key; quantized ones on the layout's */
    static const weft_kernel_entry dense[] = {
        {"quantize_per_tensor", quantize_per_tensor_kernel, NULL},
        {"quantize_per_channel", quantize_per_channel_kernel, NULL},
        {"make_per_tensor_quantized_tensor", make_per_tensor_kernel, NULL},
        {"make_per_channel_quantized_tensor", make_per_channel_kernel, NULL},
    };
    static const weft_kernel_entry layout[] = {
        {"dequantize", dequantize_kernel, NULL},
        {"int_repr", int_repr_kernel, NULL},
        {"copy_", copy_kernel, NULL},
        {"q_scale", param_kernel, (void *)(intptr_t)P_SCALE},
        {"q_zero_point", param_kernel, (void *)(intptr_t)P_ZERO_POINT},
        {"q_per_channel_scales", param_kernel, (void *)(intptr_t)P_SCALES},
        {"q_per_channel_zero_points", param_kernel, (void *)(intptr_t)P_ZERO_POINTS},
        {"q_per_channel_axis", param_kernel, (void *)(intptr_t)P_AXIS},
    };
    if ((rc = weft_register_kernel_table(reg, WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, dense,
                                         sizeof dense / sizeof *dense)) < 0 ||
        (rc = weft_register_kernel_table(reg, key, WEFT_DEVICE_TYPE_CPU, layout,
                                         sizeof layout / sizeof *layout)) < 0)
        return rc;
    return weft_register_fallback(reg, key, WEFT_ALL_BACKENDS, refuse_kernel, NULL, NULL);
}
