/* layouts/quantized/ops.c — the quantized operators oneDNN is not needed
 * for, written here: quantized_add (+ relu) and quantized_mul with the
 * output's scale and zero point (torch.ops.quantized.add / mul), requantize,
 * quantized_cat, and the core's relu, max_pool2d, adaptive_avg_pool2d and
 * cat given quantized tensors.  All take per-tensor quantizers.
 *
 * relu and max_pool2d work on the integers, exactly (relu is max(q,
 * zero_point); the quantizer is monotonic, so the largest integer of a
 * window is its largest value).  The others compute
 * on the values in float32 — dequantize, the operation, quantize with
 * PyTorch's rounding — which rounds once, as torch does; torch's fused
 * integer paths can land one step away on exact halves (the tests allow
 * one step).  They are memory-bound elementwise passes, where a fused
 * integer kernel would save one float buffer: a cost recorded in
 * docs/design.md, not hidden. */
#include <stdlib.h>

#include "quantized.h"

static const qt_affine *per_tensor(const char *op, const weft_tensor *t, const char *what)
{
    if (weft_tensor_layout(t) != qt__affine_layout) {
        weft_set_error(WEFT_EINVAL, "%s: %s is not a quantized tensor", op, what);
        return NULL;
    }
    const qt_affine *q = weft_tensor_layout_payload(t);
    if (q->scheme != QT_PER_TENSOR_AFFINE) {
        weft_set_error(WEFT_ENOTSUP, "%s: %s is quantized per channel; this operator takes "
                                     "per-tensor quantizers (requantize it first)",
                       op, what);
        return NULL;
    }
    return q;
}

/* Quantizes the float tensor f (consumed) per tensor into *out. */
static int requantize_into(weft_tensor **out, weft_tensor *f, double scale, int64_t zp,
                           weft_dtype dtype)
{
    qt_affine q = {.scheme = QT_PER_TENSOR_AFFINE, .scale = scale, .zero_point = zp};
    int rc = qt__quantize(out, f, &q, dtype);
    weft_tensor_release(f);
    return rc;
}

/* quantized_add / quantized_mul(Tensor self, Tensor other, float scale, int zero_point, bool relu=False) */
static int binary_kernel(weft_call *call, void *ctx)
{
    bool mul = ctx != NULL;
    const char *op = mul ? "quantized_mul" : "quantized_add";
    const weft_tensor *a = weft_arg_tensor(call, 0), *b = weft_arg_tensor(call, 1);
    double scale = weft_arg_double(call, 2);
    int64_t zp = weft_arg_int(call, 3);
    bool relu = weft_arg_bool(call, 4);
    const qt_affine *qa = per_tensor(op, a, "self"), *qb = qa ? per_tensor(op, b, "other") : NULL;
    if (!qa || !qb)
        return WEFT_EINVAL;
    if (weft_tensor_dtype(a) != weft_tensor_dtype(b))
        return weft_set_error(WEFT_EDTYPE, "%s: cannot combine %s and %s quantized tensors", op,
                              weft_dtype_name(weft_tensor_dtype(a)),
                              weft_dtype_name(weft_tensor_dtype(b)));
    int rc = qt__check_params(op, scale, zp, weft_tensor_dtype(a));
    if (rc < 0)
        return rc;
    weft_tensor *fa = NULL, *fb = NULL, *f = NULL, *r = NULL, *out = NULL;
    if ((rc = qt__dequantize(&fa, a)) == 0 && (rc = qt__dequantize(&fb, b)) == 0)
        rc = mul ? weft_mul(&f, fa, fb) : weft_add(&f, fa, fb);
    if (rc == 0 && relu && (rc = weft_relu(&r, f)) == 0) {
        weft_tensor_release(f);
        f = r;
    }
    weft_tensor_release(fa);
    weft_tensor_release(fb);
    if (rc == 0)
        rc = requantize_into(&out, f, scale, zp, weft_tensor_dtype(a));
    else
        weft_tensor_release(f);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* requantize(Tensor self, float scale, int zero_point, ScalarType? dtype): the
 * values of a quantized tensor (any quantizer) with new parameters */
static int requantize_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "requantize";
    const weft_tensor *self = weft_arg_tensor(call, 0);
    weft_dtype dtype = weft_arg_is_none(call, 3) ? weft_tensor_dtype(self) : call->args[3].u.dtype;
    double scale = weft_arg_double(call, 1);
    int64_t zp = weft_arg_int(call, 2);
    int rc = qt__check_params(op, scale, zp, dtype);
    weft_tensor *f = NULL, *out = NULL;
    if (rc == 0 && (rc = qt__dequantize(&f, self)) == 0)
        rc = requantize_into(&out, f, scale, zp, dtype);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* relu(Tensor self): max(q, zero_point), exact, same quantizer */
static int relu_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = weft_arg_tensor(call, 0);
    const qt_affine *q = per_tensor("relu", self, "self");
    if (!q)
        return WEFT_EINVAL;
    weft_tensor *zero = NULL, *r = NULL, *out = NULL;
    int rc = weft_full(&zero, NULL, 0, (double)q->zero_point, weft_tensor_dtype(self),
                       weft_tensor_device(self));
    if (rc == 0)
        rc = weft_maximum(&r, q->repr, zero);
    if (rc == 0)
        rc = qt__wrap(&out, r, q);
    weft_tensor_release(zero);
    weft_tensor_release(r);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* max_pool2d straight on the integers (the quantizer is monotonic, so the
 * largest integer is the largest value): planes of h x w elements, windows
 * k, stride s, padding p (never chosen), dilation d; written once per
 * dtype.  A window that lies wholly in the padding (dilation with padding,
 * or ceil_mode) gives T's least integer, as torch's (the float pool's
 * -inf). */
#define QT_MAX_POOL_KERNEL(T)                                                                \
    static void max_pool_##T(const void *src_, void *dst_, int64_t planes, int64_t h,        \
                             int64_t w, int64_t oh, int64_t ow, const int64_t k[2],          \
                             const int64_t s[2], const int64_t p[2], const int64_t d[2])     \
    {                                                                                        \
        const T *src = src_;                                                                 \
        T *dst = dst_;                                                                       \
        for (int64_t c = 0; c < planes; c++, src += h * w)                                   \
            for (int64_t oy = 0; oy < oh; oy++)                                              \
                for (int64_t ox = 0; ox < ow; ox++) {                                        \
                    T best = (T)-1 < (T)0 ? (T)((uint64_t)1 << (8 * sizeof(T) - 1)) : (T)0; \
                    bool any = false;                                                        \
                    for (int64_t ky = 0; ky < k[0]; ky++) {                                  \
                        int64_t y = oy * s[0] - p[0] + ky * d[0];                            \
                        if (y < 0 || y >= h)                                                 \
                            continue;                                                        \
                        for (int64_t kx = 0; kx < k[1]; kx++) {                              \
                            int64_t x = ox * s[1] - p[1] + kx * d[1];                        \
                            if (x >= 0 && x < w && (!any || src[y * w + x] > best)) {        \
                                best = src[y * w + x];                                       \
                                any = true;                                                  \
                            }                                                                \
                        }                                                                    \
                    }                                                                        \
                    *dst++ = best;                                                           \
                }                                                                            \
    }
/* The CNN's case, 2 x 2 windows at stride 2 without padding or dilation,
 * without the general loop's bounds test per element: branch-free maxima
 * of two rows that the compiler vectorizes.  With the general loop the
 * two pools were about 60% of the int8 CNN's inference time (perf over
 * weft-train --quantize's test set). */
#define QT_MAX_POOL_2X2_KERNEL(T)                                                            \
    static void max_pool_2x2_##T(const void *src_, void *dst_, int64_t planes, int64_t h,    \
                                 int64_t w, int64_t oh, int64_t ow)                          \
    {                                                                                        \
        const T *src = src_;                                                                 \
        T *dst = dst_;                                                                       \
        for (int64_t c = 0; c < planes; c++, src += h * w)                                   \
            for (int64_t oy = 0; oy < oh; oy++, dst += ow) {                                 \
                const T *r0 = src + 2 * oy * w, *r1 = r0 + w;                                \
                for (int64_t ox = 0; ox < ow; ox++) {                                        \
                    T a = r0[2 * ox] > r1[2 * ox] ? r0[2 * ox] : r1[2 * ox];                 \
                    T b = r0[2 * ox + 1] > r1[2 * ox + 1] ? r0[2 * ox + 1] : r1[2 * ox + 1]; \
                    dst[ox] = a > b ? a : b;                                                 \
                }                                                                            \
            }                                                                                \
    }

/* The same windows of a channels-last input (N, H, W, C in memory, as
 * quantized_conv2d returns): the four pixels' channel vectors, maxima along
 * the channels, written channels-last too. */
#define QT_MAX_POOL_2X2_NHWC_KERNEL(T)                                                       \
    static void max_pool_2x2_nhwc_##T(const void *src_, void *dst_, int64_t n, int64_t ch,   \
                                      int64_t h, int64_t w, int64_t oh, int64_t ow)           \
    {                                                                                        \
        const T *src = src_;                                                                 \
        T *dst = dst_;                                                                       \
        for (int64_t i = 0; i < n; i++, src += h * w * ch)                                   \
            for (int64_t oy = 0; oy < oh; oy++)                                              \
                for (int64_t ox = 0; ox < ow; ox++, dst += ch) {                             \
                    const T *p00 = src + (2 * oy * w + 2 * ox) * ch, *p01 = p00 + ch;        \
                    const T *p10 = p00 + w * ch, *p11 = p10 + ch;                            \
                    for (int64_t c = 0; c < ch; c++) {                                       \
                        T a = p00[c] > p01[c] ? p00[c] : p01[c];                             \
                        T b = p10[c] > p11[c] ? p10[c] : p11[c];                             \
                        dst[c] = a > b ? a : b;                                              \
                    }                                                                        \
                }                                                                            \
    }

typedef void (*max_pool_fn)(const void *, void *, int64_t, int64_t, int64_t, int64_t, int64_t,
                            const int64_t *, const int64_t *, const int64_t *, const int64_t *);
typedef void (*max_pool_2x2_fn)(const void *, void *, int64_t, int64_t, int64_t, int64_t, int64_t);
typedef void (*max_pool_2x2_nhwc_fn)(const void *, void *, int64_t, int64_t, int64_t, int64_t,
                                     int64_t, int64_t);
#define QT_MAX_POOL(T) QT_MAX_POOL_KERNEL(T) QT_MAX_POOL_2X2_KERNEL(T) QT_MAX_POOL_2X2_NHWC_KERNEL(T)
QT_MAX_POOL(uint8_t)
QT_MAX_POOL(int8_t)
QT_MAX_POOL(int32_t)

/* The pools run on weft's intra-op pool (weft_parallel_for), in pieces of
 * whole planes (channels first) or whole images (channels last): serial,
 * the two pools held the int8 CNN's test set to 1.38x the float model's
 * speed on a 16-core Xeon, where the convolutions run on all cores
 * (docs/benchmarks.md, issue 17, fourteenth session). */
typedef struct pool_job {
    const char *src;
    char *dst;
    size_t esize;
    int64_t ch, h, w, oh, ow; /* ch: channels of a channels-last input */
    const int64_t *k, *s, *p, *d;
    max_pool_fn general;
    max_pool_2x2_fn two;
    max_pool_2x2_nhwc_fn two_nhwc;
} pool_job;

/* planes [a, b) of a channels-first input */
static void pool_planes(int64_t a, int64_t b, void *arg)
{
    const pool_job *j = arg;
    const char *src = j->src + (size_t)(a * j->h * j->w) * j->esize;
    char *dst = j->dst + (size_t)(a * j->oh * j->ow) * j->esize;
    if (j->two)
        j->two(src, dst, b - a, j->h, j->w, j->oh, j->ow);
    else
        j->general(src, dst, b - a, j->h, j->w, j->oh, j->ow, j->k, j->s, j->p, j->d);
}

/* images [a, b) of a channels-last input */
static void pool_images(int64_t a, int64_t b, void *arg)
{
    const pool_job *j = arg;
    j->two_nhwc(j->src + (size_t)(a * j->h * j->w * j->ch) * j->esize,
                j->dst + (size_t)(a * j->oh * j->ow * j->ch) * j->esize, b - a, j->ch,
                j->h, j->w, j->oh, j->ow);
}

/* at least ~64 KiB of input a piece: below that a hand-off costs more
 * than the loop */
static int64_t pool_grain(int64_t bytes_per_item)
{
    int64_t g = (64 * 1024) / (bytes_per_item > 0 ? bytes_per_item : 1);
    return g > 1 ? g : 1;
}

/* An int[] of 1 or 2 entries (or none: dflt) as a pair. */
static bool pool_pair(const weft_call *call, int i, int64_t out[2], const int64_t *dflt, int64_t min)
{
    int len;
    const int64_t *v = weft_arg_ints(call, i, &len);
    if (len == 0 && dflt) {
        out[0] = dflt[0], out[1] = dflt[1];
        return true;
    }
    if (len != 1 && len != 2)
        return false;
    out[0] = v[0], out[1] = v[len - 1];
    return out[0] >= min && out[1] >= min;
}

bool qt__is_channels_last(const weft_tensor *t)
{
    if (weft_tensor_ndim(t) != 4)
        return false;
    const int64_t *size = weft_tensor_sizes(t), *stride = weft_tensor_strides(t);
    /* the dense strides of (N, H, W, C) in memory; a dimension of size 1
     * may have any stride */
    int64_t want[4] = {size[1] * size[2] * size[3], 1, size[3] * size[1], size[1]};
    for (int i = 0; i < 4; i++)
        if (size[i] != 1 && stride[i] != want[i])
            return false;
    return true;
}

static int max_pool_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "max_pool2d";
    const weft_tensor *self = weft_arg_tensor(call, 0);
    const qt_affine *q = per_tensor(op, self, "self");
    if (!q)
        return WEFT_EINVAL;
    int nd = weft_tensor_ndim(self);
    int64_t k[2], s[2], p[2], d[2];
    bool ceil = weft_arg_bool(call, 5);
    if (nd != 3 && nd != 4)
        return weft_set_error(WEFT_ESHAPE, "%s: expected a 3-D or 4-D input, got %d-D", op, nd);
    if (!pool_pair(call, 1, k, NULL, 1) || !pool_pair(call, 2, s, k, 1) ||
        !pool_pair(call, 3, p, NULL, 0) || !pool_pair(call, 4, d, (int64_t[]){1, 1}, 1) ||
        p[0] > k[0] / 2 || p[1] > k[1] / 2)
        return weft_set_error(WEFT_EINVAL, "%s: kernel_size, stride and dilation take 1 or 2 "
                                           "positive entries, padding 1 or 2 entries of at most "
                                           "half the kernel",
                              op);
    int64_t h = weft_tensor_size(self, -2), w = weft_tensor_size(self, -1);
    if (h == 0 || w == 0) /* torch's rule too: only the batch may be empty */
        return weft_set_error(WEFT_ESHAPE, "%s: the input's planes are empty (%lld x %lld); "
                                           "only its batch may be 0",
                              op, (long long)h, (long long)w);
    int64_t oh = weft_pool_output_size(h, k[0], p[0], s[0], d[0], ceil);
    int64_t ow = weft_pool_output_size(w, k[1], p[1], s[1], d[1], ceil);
    if (oh < 1 || ow < 1)
        return weft_set_error(WEFT_ESHAPE, "%s: the output would be empty (%lld x %lld)", op,
                              (long long)oh, (long long)ow);
    int64_t sizes[4];
    for (int i = 0; i < nd; i++)
        sizes[i] = weft_tensor_size(self, i);
    sizes[nd - 2] = oh, sizes[nd - 1] = ow;
    weft_dtype dt = weft_tensor_dtype(self);
    int which = dt == WEFT_UINT8 ? 0 : dt == WEFT_INT8 ? 1 : 2;
    static const max_pool_fn general[3] = {max_pool_uint8_t, max_pool_int8_t, max_pool_int32_t};
    static const max_pool_2x2_fn two[3] = {max_pool_2x2_uint8_t, max_pool_2x2_int8_t,
                                           max_pool_2x2_int32_t};
    static const max_pool_2x2_nhwc_fn two_nhwc[3] = {
        max_pool_2x2_nhwc_uint8_t, max_pool_2x2_nhwc_int8_t, max_pool_2x2_nhwc_int32_t};
    /* every window inside the input: 2 oh <= h, 2 ow <= w (ceil_mode may
     * add a window that hangs over the edge) */
    bool is_2x2 = k[0] == 2 && k[1] == 2 && s[0] == 2 && s[1] == 2 && p[0] == 0 && p[1] == 0 &&
                  d[0] == 1 && d[1] == 1 && 2 * oh <= h && 2 * ow <= w;
    weft_tensor *c = NULL, *y = NULL, *raw = NULL, *out = NULL;
    int rc = 0;
    pool_job job = {.esize = weft_dtype_size(dt), .h = h, .w = w, .oh = oh, .ow = ow,
                    .k = k, .s = s, .p = p, .d = d};
    if (is_2x2 && qt__is_channels_last(q->repr)) {
        /* channels-last in, channels-last out: no copy to NCHW and back */
        const int64_t *sz = weft_tensor_sizes(q->repr);
        if ((rc = weft_new_output(&raw, q->repr, (int64_t[]){sz[0], oh, ow, sz[1]}, 4, dt)) == 0 &&
            (rc = weft_permute(&y, raw, (int64_t[]){0, 3, 1, 2}, 4)) == 0) {
            job.src = weft_tensor_data_ptr(q->repr);
            job.dst = weft_tensor_data_ptr(y);
            job.ch = sz[1];
            job.two_nhwc = two_nhwc[which];
            rc = weft_parallel_for(0, sz[0], pool_grain(h * w * sz[1] * (int64_t)job.esize),
                                   pool_images, &job);
        }
    } else if ((rc = weft_contiguous(&c, q->repr)) == 0 &&
               (rc = weft_new_output(&y, c, sizes, nd, dt)) == 0) {
        job.src = weft_tensor_data_ptr(c);
        job.dst = weft_tensor_data_ptr(y);
        job.two = is_2x2 ? two[which] : NULL;
        job.general = general[which];
        rc = weft_parallel_for(0, weft_tensor_numel(c) / (h * w),
                               pool_grain(h * w * (int64_t)job.esize), pool_planes, &job);
    }
    if (rc == 0)
        rc = qt__wrap(&out, y, q);
    weft_tensor_release(c);
    weft_tensor_release(raw);
    weft_tensor_release(y);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* adaptive_avg_pool2d: the float operator on the values, quantized back
 * with the input's parameters (torch keeps them). */
static int pool_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "adaptive_avg_pool2d";
    const weft_tensor *self = weft_arg_tensor(call, 0);
    const qt_affine *q = per_tensor(op, self, "self");
    if (!q)
        return WEFT_EINVAL;
    weft_tensor *f = NULL, *p = NULL, *out = NULL;
    int n;
    const int64_t *size = weft_arg_ints(call, 1, &n);
    int rc = qt__dequantize(&f, self);
    if (rc == 0)
        rc = weft_adaptive_avg_pool2d(&p, f, size, n);
    weft_tensor_release(f);
    if (rc == 0)
        rc = requantize_into(&out, p, q->scale, q->zero_point, weft_tensor_dtype(self));
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* The values of tensors[] concatenated along dim, quantized with scale and
 * zp into dtype; every entry per-tensor quantized. */
static int cat_values(weft_tensor **out, const char *op, weft_tensor *const *ts, int n,
                      int64_t dim, double scale, int64_t zp, weft_dtype dtype)
{
    weft_tensor **fs = calloc((size_t)(n ? n : 1), sizeof *fs), *f = NULL;
    if (!fs)
        return weft_set_error(WEFT_ENOMEM, "%s: out of memory", op);
    int rc = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        if (!per_tensor(op, ts[i], "an entry of tensors"))
            rc = WEFT_EINVAL;
        else if (weft_tensor_dtype(ts[i]) != dtype)
            rc = weft_set_error(WEFT_EDTYPE, "%s: cannot concatenate %s and %s quantized tensors",
                                op, weft_dtype_name(dtype), weft_dtype_name(weft_tensor_dtype(ts[i])));
        else
            rc = qt__dequantize(&fs[i], ts[i]);
    }
    if (rc == 0)
        rc = weft_cat(&f, fs, n, dim);
    for (int i = 0; i < n; i++)
        weft_tensor_release(fs[i]);
    free(fs);
    return rc < 0 ? rc : requantize_into(out, f, scale, zp, dtype);
}

/* cat(Tensor[] tensors, int dim=0) given quantized tensors: the first's
 * parameters, as torch.cat does */
static int cat_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    int n;
    weft_tensor *const *ts = weft_arg_tensors(call, 0, &n);
    if (n < 1 || !ts[0] || weft_tensor_layout(ts[0]) != qt__affine_layout)
        return weft_set_error(WEFT_EINVAL, "cat: a list of quantized tensors cannot start with "
                                           "a float one (dequantize() them all, or quantize "
                                           "them all)");
    const qt_affine *q = per_tensor("cat", ts[0], "tensors[0]");
    if (!q)
        return WEFT_EINVAL;
    weft_tensor *out = NULL;
    int rc = cat_values(&out, "cat", ts, n, weft_arg_int(call, 1), q->scale, q->zero_point,
                        weft_tensor_dtype(ts[0]));
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* quantized_cat(Tensor[] tensors, int dim, float scale, int zero_point) */
static int quantized_cat_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    int n;
    weft_tensor *const *ts = weft_arg_tensors(call, 0, &n);
    if (n < 1)
        return weft_set_error(WEFT_EINVAL, "quantized_cat: no tensors");
    double scale = weft_arg_double(call, 2);
    int64_t zp = weft_arg_int(call, 3);
    weft_dtype dtype = weft_tensor_dtype(ts[0]);
    int rc = qt__check_params("quantized_cat", scale, zp, dtype);
    weft_tensor *out = NULL;
    if (rc == 0)
        rc = cat_values(&out, "quantized_cat", ts, n, weft_arg_int(call, 1), scale, zp, dtype);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

int qt__register_ops(weft_registrar *reg)
{
    static const weft_kernel_entry kernels[] = {
        {"quantized_add", binary_kernel, NULL},
        {"quantized_mul", binary_kernel, (void *)1},
        {"requantize", requantize_kernel, NULL},
        {"relu", relu_kernel, NULL},
        {"max_pool2d", max_pool_kernel, NULL},
        {"adaptive_avg_pool2d", pool_kernel, NULL},
        {"cat", cat_kernel, NULL},
        {"quantized_cat", quantized_cat_kernel, NULL},
    };
    return weft_register_kernel_table(reg, weft_layout_key(qt__affine_layout),
                                      WEFT_DEVICE_TYPE_CPU, kernels,
                                      sizeof kernels / sizeof *kernels);
}
