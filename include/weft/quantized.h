/* quantized.h — quantized tensors from an application, without linking the
 * quantized plugin: every function here is an inline call, through the
 * public boxed API, of an operator that libweft-quantized.so defines when
 * it loads (weft_load_default_plugins loads it).  Without the plugin each
 * returns WEFT_ENOTFOUND naming the operator.
 *
 * Representation: a quantized tensor has the layout "quantized" and the
 * dtype of its integers: WEFT_INT8 is torch's qint8, WEFT_UINT8 quint8,
 * WEFT_INT32 qint32.  Its quantizer (per-tensor: scale, zero point;
 * per-channel: scales, zero points, axis) lives in the layout's payload.
 * value = (q - zero_point) * scale; quantizing rounds x / scale half to
 * even in float32, adds the zero point and clamps, exactly as PyTorch.
 * ggml's weight blocks are the layouts "q8_0" and "q4_0" (dtype float32):
 * reach them with weft_to_layout(&w, x, weft_layout_lookup("q4_0")), and
 * multiply with weft_linear(&y, x, w, bias) or weft_matmul(&y, w, v).
 *
 * All functions: *out receives a new reference (NULL on error); errors are
 * negative WEFT_E* codes with the message in weft_last_error (a bad scale,
 * a zero point outside the dtype's range, an axis out of range, a count of
 * scales that does not match, ...).  Thread-safe, as every operator call. */
#ifndef WEFT_QUANTIZED_H
#define WEFT_QUANTIZED_H

#include <stdbool.h>

#include <weft/weft.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Calls the plugin-defined operator `name` with nargs boxed arguments and
 * one tensor result.  *cache (one per call site, NULL at first) keeps the
 * operator's handle: looking an operator up by name compares it with every
 * operator's name, which cost the int8 MLP's evaluation 2% of its time
 * when done on every call.  A plugin unloaded (and perhaps loaded again)
 * leaves the cached handle undefined (WEFT_ENOTFOUND): then the name is
 * looked up again and, when it now names another handle, called through
 * that one.  The cache is read and written atomically where the compiler
 * offers GCC's atomic builtins, and not used elsewhere. */
#if defined(__GNUC__) || defined(__clang__)
#define WEFT_QOP_LOAD_(cache) __atomic_load_n((cache), __ATOMIC_ACQUIRE)
#define WEFT_QOP_STORE_(cache, op) __atomic_store_n((cache), (op), __ATOMIC_RELEASE)
#else
#define WEFT_QOP_LOAD_(cache) ((void)(cache), (const weft_op *)0)
#define WEFT_QOP_STORE_(cache, op) ((void)(cache), (void)(op))
#endif
static inline int weft_quantized_call(const weft_op **cache, weft_tensor **out, const char *name,
                                      const weft_value *args, int nargs)
{
    weft_value ret = {0};
    *out = NULL;
    const weft_op *op = WEFT_QOP_LOAD_(cache), *found = 0;
    int rc = op ? weft_call_boxed(op, args, nargs, &ret, 1) : WEFT_ENOTFOUND;
    if (rc == WEFT_ENOTFOUND) {
        int frc = weft_op_find(&found, name);
        if (frc < 0)
            return op ? rc : frc;
        if (found == op) /* the error came from the operator itself */
            return rc;
        WEFT_QOP_STORE_(cache, found);
        rc = weft_call_boxed(found, args, nargs, &ret, 1);
    }
    if (rc == 0)
        *out = ret.u.tensor;
    return rc;
}

#define WEFT_QV_TENSOR_(t) {WEFT_VALUE_TENSOR, 0, {.tensor = (weft_tensor *)(t)}}
#define WEFT_QV_INT_(v) {WEFT_VALUE_INT, 0, {.i = (v)}}
#define WEFT_QV_DOUBLE_(v) {WEFT_VALUE_DOUBLE, 0, {.d = (v)}}
#define WEFT_QV_DTYPE_(v) {WEFT_VALUE_DTYPE, 0, {.dtype = (v)}}
#define WEFT_QV_INTS_(p, n) {WEFT_VALUE_INT_LIST, (n), {.ints = (p)}}

/* x (floating) quantized with one scale and zero point into dtype (int8,
 * uint8 or int32). */
static inline int weft_quantize_per_tensor(weft_tensor **out, const weft_tensor *x, double scale,
                                           int64_t zero_point, weft_dtype dtype)
{
    weft_value a[] = {WEFT_QV_TENSOR_(x), WEFT_QV_DOUBLE_(scale), WEFT_QV_INT_(zero_point),
                      WEFT_QV_DTYPE_(dtype)};
    static const weft_op *op_;
    return weft_quantized_call(&op_, out, "quantize_per_tensor", a, 4);
}

/* x quantized with scales[c] and zero_points[c] (1-d, one per entry of
 * dimension axis) along axis. */
static inline int weft_quantize_per_channel(weft_tensor **out, const weft_tensor *x,
                                            const weft_tensor *scales,
                                            const weft_tensor *zero_points, int64_t axis,
                                            weft_dtype dtype)
{
    weft_value a[] = {WEFT_QV_TENSOR_(x), WEFT_QV_TENSOR_(scales), WEFT_QV_TENSOR_(zero_points),
                      WEFT_QV_INT_(axis), WEFT_QV_DTYPE_(dtype)};
    static const weft_op *op_;
    return weft_quantized_call(&op_, out, "quantize_per_channel", a, 5);
}

/* A quantized tensor holding a copy of the integers of q (int8, uint8 or
 * int32) with the given parameters. */
static inline int weft_make_per_tensor_quantized(weft_tensor **out, const weft_tensor *q,
                                                 double scale, int64_t zero_point)
{
    weft_value a[] = {WEFT_QV_TENSOR_(q), WEFT_QV_DOUBLE_(scale), WEFT_QV_INT_(zero_point)};
    static const weft_op *op_;
    return weft_quantized_call(&op_, out, "make_per_tensor_quantized_tensor", a, 3);
}

static inline int weft_make_per_channel_quantized(weft_tensor **out, const weft_tensor *q,
                                                  const weft_tensor *scales,
                                                  const weft_tensor *zero_points, int64_t axis)
{
    weft_value a[] = {WEFT_QV_TENSOR_(q), WEFT_QV_TENSOR_(scales), WEFT_QV_TENSOR_(zero_points),
                      WEFT_QV_INT_(axis)};
    static const weft_op *op_;
    return weft_quantized_call(&op_, out, "make_per_channel_quantized_tensor", a, 4);
}

/* Readers of a quantized tensor q, each named as in PyTorch: dequantize
 * (float32 values), int_repr (the integers, a copy), q_scale (0-d float64),
 * q_zero_point (0-d int64), q_per_channel_scales (float64),
 * q_per_channel_zero_points (int64), q_per_channel_axis (0-d int64), and
 * quantized_contiguous (a contiguous copy with the same quantizer).  The
 * per-tensor readers refuse a per-channel tensor and the reverse. */
#define WEFT_QUANTIZED_UNARY_(fn, name)                                               \
    static inline int fn(weft_tensor **out, const weft_tensor *q)                     \
    {                                                                                  \
        static const weft_op *op_;                                                     \
        weft_value a[] = {WEFT_QV_TENSOR_(q)};                                         \
        return weft_quantized_call(&op_, out, name, a, 1);                             \
    }
WEFT_QUANTIZED_UNARY_(weft_dequantize, "dequantize")
WEFT_QUANTIZED_UNARY_(weft_int_repr, "int_repr")
WEFT_QUANTIZED_UNARY_(weft_q_scale, "q_scale")
WEFT_QUANTIZED_UNARY_(weft_q_zero_point, "q_zero_point")
WEFT_QUANTIZED_UNARY_(weft_q_per_channel_scales, "q_per_channel_scales")
WEFT_QUANTIZED_UNARY_(weft_q_per_channel_zero_points, "q_per_channel_zero_points")
WEFT_QUANTIZED_UNARY_(weft_q_per_channel_axis, "q_per_channel_axis")
WEFT_QUANTIZED_UNARY_(weft_quantized_contiguous, "quantized_contiguous")

/* Views of a quantized tensor that keep its quantizer, by their quantized
 * names; the core's view functions (weft_reshape, weft_transpose,
 * weft_slice, weft_select, weft_expand, weft_contiguous, ...) do the same
 * through the layout's view hook.  They share q's integers; a
 * per-channel axis moves with its dimension, a reshape that splits or
 * merges it is refused, slicing it slices the parameters, and selecting
 * one channel gives a per-tensor tensor with that channel's parameters. */
static inline int weft_quantized_reshape(weft_tensor **out, const weft_tensor *q,
                                         const int64_t *shape, int ndim)
{
    weft_value a[] = {WEFT_QV_TENSOR_(q), WEFT_QV_INTS_(shape, ndim)};
    static const weft_op *op_;
    return weft_quantized_call(&op_, out, "quantized_reshape", a, 2);
}

static inline int weft_quantized_flatten(weft_tensor **out, const weft_tensor *q, int start_dim,
                                         int end_dim)
{
    weft_value a[] = {WEFT_QV_TENSOR_(q), WEFT_QV_INT_(start_dim), WEFT_QV_INT_(end_dim)};
    static const weft_op *op_;
    return weft_quantized_call(&op_, out, "quantized_flatten", a, 3);
}

static inline int weft_quantized_permute(weft_tensor **out, const weft_tensor *q,
                                         const int64_t *dims, int ndim)
{
    weft_value a[] = {WEFT_QV_TENSOR_(q), WEFT_QV_INTS_(dims, ndim)};
    static const weft_op *op_;
    return weft_quantized_call(&op_, out, "quantized_permute", a, 2);
}

static inline int weft_quantized_transpose(weft_tensor **out, const weft_tensor *q, int dim0,
                                           int dim1)
{
    weft_value a[] = {WEFT_QV_TENSOR_(q), WEFT_QV_INT_(dim0), WEFT_QV_INT_(dim1)};
    static const weft_op *op_;
    return weft_quantized_call(&op_, out, "quantized_transpose", a, 3);
}

static inline int weft_quantized_slice(weft_tensor **out, const weft_tensor *q, int dim,
                                       int64_t start, int64_t end, int64_t step)
{
    weft_value a[] = {WEFT_QV_TENSOR_(q), WEFT_QV_INT_(dim), WEFT_QV_INT_(start),
                      WEFT_QV_INT_(end), WEFT_QV_INT_(step)};
    static const weft_op *op_;
    return weft_quantized_call(&op_, out, "quantized_slice", a, 5);
}

static inline int weft_quantized_select(weft_tensor **out, const weft_tensor *q, int dim,
                                        int64_t index)
{
    weft_value a[] = {WEFT_QV_TENSOR_(q), WEFT_QV_INT_(dim), WEFT_QV_INT_(index)};
    static const weft_op *op_;
    return weft_quantized_call(&op_, out, "quantized_select", a, 3);
}

/* The int8 operators, with the output's scale and zero point (quint8 out
 * for linear and conv2d, the inputs' dtype for add and mul), as
 * torch.ao.nn.quantized.functional and torch.ops.quantized.  linear and
 * conv2d run on oneDNN (input quint8 per tensor; weight qint8 with zero
 * points 0, per tensor or per output channel; bias float or NULL); the
 * weight's packed form is cached with the weight.  Without oneDNN in the
 * plugin they return WEFT_ENOTSUP saying so.  relu fuses a relu. */
#define WEFT_QV_NONE_ {WEFT_VALUE_NONE, 0, {.i = 0}}
#define WEFT_QV_BOOL_(v) {WEFT_VALUE_BOOL, 0, {.b = (v)}}
static inline int weft_quantized_linear(weft_tensor **out, const weft_tensor *x,
                                        const weft_tensor *w, const weft_tensor *bias,
                                        double scale, int64_t zero_point, bool relu)
{
    weft_value a[] = {WEFT_QV_TENSOR_(x), WEFT_QV_TENSOR_(w), WEFT_QV_NONE_,
                      WEFT_QV_DOUBLE_(scale), WEFT_QV_INT_(zero_point), WEFT_QV_BOOL_(relu)};
    if (bias)
        a[2] = (weft_value)WEFT_QV_TENSOR_(bias);
    static const weft_op *op_;
    return weft_quantized_call(&op_, out, "quantized_linear", a, 6);
}

/* stride, padding, dilation: 2 entries each (height, width). */
static inline int weft_quantized_conv2d(weft_tensor **out, const weft_tensor *x,
                                        const weft_tensor *w, const weft_tensor *bias,
                                        const int64_t stride[2], const int64_t padding[2],
                                        const int64_t dilation[2], int64_t groups, double scale,
                                        int64_t zero_point, bool relu)
{
    weft_value a[] = {WEFT_QV_TENSOR_(x),      WEFT_QV_TENSOR_(w),        WEFT_QV_NONE_,
                      WEFT_QV_INTS_(stride, 2), WEFT_QV_INTS_(padding, 2), WEFT_QV_INTS_(dilation, 2),
                      WEFT_QV_INT_(groups),    WEFT_QV_DOUBLE_(scale),    WEFT_QV_INT_(zero_point),
                      WEFT_QV_BOOL_(relu)};
    if (bias)
        a[2] = (weft_value)WEFT_QV_TENSOR_(bias);
    static const weft_op *op_;
    return weft_quantized_call(&op_, out, "quantized_conv2d", a, 10);
}

/* a + b (mul: a * b) of per-tensor quantized tensors of one dtype, with the
 * output's parameters; relu fuses a relu. */
static inline int weft_quantized_add(weft_tensor **out, const weft_tensor *a,
                                     const weft_tensor *b, double scale, int64_t zero_point,
                                     bool relu)
{
    weft_value v[] = {WEFT_QV_TENSOR_(a), WEFT_QV_TENSOR_(b), WEFT_QV_DOUBLE_(scale),
                      WEFT_QV_INT_(zero_point), WEFT_QV_BOOL_(relu)};
    static const weft_op *op_;
    return weft_quantized_call(&op_, out, "quantized_add", v, 5);
}

static inline int weft_quantized_mul(weft_tensor **out, const weft_tensor *a,
                                     const weft_tensor *b, double scale, int64_t zero_point,
                                     bool relu)
{
    weft_value v[] = {WEFT_QV_TENSOR_(a), WEFT_QV_TENSOR_(b), WEFT_QV_DOUBLE_(scale),
                      WEFT_QV_INT_(zero_point), WEFT_QV_BOOL_(relu)};
    static const weft_op *op_;
    return weft_quantized_call(&op_, out, "quantized_mul", v, 5);
}

/* The values of q (any quantizer) quantized per tensor into dtype. */
static inline int weft_requantize(weft_tensor **out, const weft_tensor *q, double scale,
                                  int64_t zero_point, weft_dtype dtype)
{
    weft_value a[] = {WEFT_QV_TENSOR_(q), WEFT_QV_DOUBLE_(scale), WEFT_QV_INT_(zero_point),
                      WEFT_QV_DTYPE_(dtype)};
    static const weft_op *op_;
    return weft_quantized_call(&op_, out, "requantize", a, 4);
}

/* relu, max_pool2d, adaptive_avg_pool2d and cat of <weft/ops.h> take
 * per-tensor quantized tensors directly (weft_relu(&y, q), ...). */

#ifdef __cplusplus
}
#endif

#endif /* WEFT_QUANTIZED_H */
