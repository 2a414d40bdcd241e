/* backends/cuda/kernels.c — the boxed elementwise kernels of the CUDA
 * plugin: one generic kernel reads the table entry's family (binary,
 * compare, unary, where), checks devices and dtypes, promotes, allocates or
 * checks the destination, plans the collapsed geometry (plan.c) and
 * launches from elementwise.cu.  What it does not cover — another device's
 * operand, a dtype without a kernel, an out= of another dtype or shape, an
 * integer division — goes to the core's CPU fallback, so the semantics and
 * the messages stay the CPU backend's.  copy_ is here too: device to device
 * on the GPU, host to device through one contiguous transfer. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gpu.h"

#include "cuda.h"

enum form { FUNCTIONAL, INPLACE, OUT };
enum bounds { NO_BOUNDS, BOTH_BOUNDS, MIN_BOUND, MAX_BOUND };

typedef struct {
    int family;
    int op;
    int form;
    int ninputs;
    bool has_alpha;  /* add/sub: a keyword alpha after the inputs */
    bool has_scalar; /* threshold_backward: a scalar after the inputs */
    int bounds;      /* clamp family */
    int scalar;      /* the scalar forms: SCALAR_ADD, ... */
} entry_ctx;

/* SCALAR_PARAM: the scalar after the inputs is the operator's parameter
 * (s0: leaky_relu's slope, pow's exponent); SCALAR_GELU: the approximate
 * keyword ('none' or 'tanh') as s0 = 0 or 1; SCALAR_PARAM2, SCALAR_PARAM3:
 * two or three parameters (softplus, elu) in s0..s2; SCALAR_COMPARE: the
 * scalar a comparison is with; SCALAR_ZERO: none, s0 = 0 (logical_not is
 * eq_scalar(self, 0)). */
enum { NO_SCALAR, SCALAR_ADD, SCALAR_SUB, SCALAR_MUL, SCALAR_DIV, SCALAR_PARAM, SCALAR_GELU,
       SCALAR_PARAM2, SCALAR_PARAM3, SCALAR_COMPARE, SCALAR_ZERO };

static bool on_device(const weft_tensor *t, int index)
{
    weft_device d = weft_tensor_device(t);
    return d.type == WFC_DEVICE_TYPE && d.index == index;
}

static bool same_shape(const weft_tensor *t, const int64_t *sizes, int nd)
{
    if (weft_tensor_ndim(t) != nd)
        return false;
    for (int d = 0; d < nd; d++)
        if (weft_tensor_size(t, d) != sizes[d])
            return false;
    return true;
}

/* Whether writing dest while reading src could read an element already
 * written: they share memory and are not the very same view. */
static bool overlaps_differently(const weft_tensor *dest, const weft_tensor *src)
{
    if (!weft_tensor_shares_storage(dest, src))
        return false;
    if (weft_tensor_data_ptr(dest) != weft_tensor_data_ptr(src) ||
        weft_tensor_ndim(dest) != weft_tensor_ndim(src))
        return true;
    for (int d = 0; d < weft_tensor_ndim(dest); d++)
        if (weft_tensor_size(dest, d) != weft_tensor_size(src, d) ||
            weft_tensor_stride(dest, d) != weft_tensor_stride(src, d))
            return true;
    return false;
}

/* t in dtype, as a new reference (converted on the device when needed). */
static int as_dtype(weft_tensor **out, const weft_tensor *t, weft_dtype dtype)
{
    if (weft_tensor_dtype(t) == dtype) {
        *out = weft_tensor_retain((weft_tensor *)t);
        return 0;
    }
    return weft_to_dtype(out, t, dtype);
}

/* Geometry of a launch: operand 0 is dest, then the inputs, each seen in
 * dest's shape.  Returns 0, 1 when too many dims remain (the caller hands
 * the call over), never an error. */
static int plan_of(wfc_geometry *g, const weft_tensor *dest, weft_tensor *const *inputs, int n)
{
    static _Thread_local int64_t strides[WFC_MAX_OPERANDS][64];
    const int64_t *sizes = weft_tensor_sizes(dest);
    int nd = weft_tensor_ndim(dest);
    const weft_tensor *ops[WFC_MAX_OPERANDS] = {dest};
    for (int k = 0; k < n; k++)
        ops[k + 1] = inputs[k];
    for (int k = 0; k <= n; k++)
        wfc_broadcast_strides(strides[k], weft_tensor_sizes(ops[k]), weft_tensor_strides(ops[k]),
                              weft_tensor_ndim(ops[k]), sizes, nd);
    return wfc_plan_geometry(g, sizes, nd, n + 1, (const int64_t(*)[64])strides) < 0 ? 1 : 0;
}

static double bound_arg(const weft_call *call, int i)
{
    return weft_arg_is_none(call, i) ? NAN : weft_arg_double(call, i);
}

static bool integral_or_bool(weft_dtype dtype)
{
    return dtype == WEFT_BOOL || dtype == WEFT_UINT8 || dtype == WEFT_INT8 ||
           dtype == WEFT_INT16 || dtype == WEFT_INT32 || dtype == WEFT_INT64;
}

/* Whether a clamp bound makes an integer tensor compute in float32: the
 * CPU's Scalar rule (cpu_scalar_result_type), a bound that is neither an
 * int nor a bool and is not whole. */
static bool clamp_promotes(const weft_call *call, int after, int bounds, weft_dtype dtype)
{
    if (dtype == WEFT_BOOL || !integral_or_bool(dtype))
        return false;
    int count = bounds == BOTH_BOUNDS ? 2 : 1;
    for (int k = 0; k < count; k++) {
        const weft_value *v = &call->args[after + k];
        double x = weft_arg_double(call, after + k);
        if (v->tag != WEFT_VALUE_NONE && v->tag != WEFT_VALUE_BOOL && v->tag != WEFT_VALUE_INT &&
            x != floor(x))
            return true;
    }
    return false;
}

/* Whether the family's kernel serves this call's compute dtype. */
static bool served(const entry_ctx *e, weft_dtype dtype)
{
    if (!wfc_has_kernel(e->family, dtype))
        return false;
    bool floating = weft_dtype_is_floating(dtype);
    if (e->family == WFC_FAMILY_UNARY && wfc_unary_is_float_only(e->op) && !floating)
        return false; /* torch computes exp(int) in float: the fallback knows how */
    if (e->family == WFC_FAMILY_BINARY && (e->op == WFC_DIV || e->op == WFC_LERP ||
                                           e->op == WFC_ATAN2) && !floating)
        return false; /* true division; lerp and atan2 are for floating tensors */
    if (e->family == WFC_FAMILY_TERNARY && e->op != WFC_ADDCMUL && !floating)
        return false; /* lerp and addcdiv are for floating tensors */
    return true;
}

/* Whether a whole number v is a value of the integer dtype (a comparison
 * of int8 with 300 is left to the fallback's rules). */
static bool integer_holds(weft_dtype dtype, double v)
{
    switch (dtype) {
    case WEFT_UINT8: return v >= 0 && v <= 255;
    case WEFT_INT8: return v >= -128 && v <= 127;
    case WEFT_INT16: return v >= -32768 && v <= 32767;
    case WEFT_INT32: return v >= -2147483648.0 && v <= 2147483647.0;
    case WEFT_INT64: return v >= -9223372036854775808.0 && v < 9223372036854775808.0;
    default: return true;
    }
}

/* Whether an integer divisor has a zero, on the device (eq_scalar, any,
 * one value read back), as the CPU backend checks before its loop: 1 when
 * it has (the caller hands the call over, for the CPU's message), 0 when
 * not, or an error. */
static int has_zero(const weft_tensor *divisor)
{
    weft_tensor *zeros = NULL, *found = NULL;
    double any = 0;
    int rc = weft_eq_scalar(&zeros, divisor, 0);
    if (rc == 0)
        rc = weft_any(&found, zeros, NULL, 0, false);
    if (rc == 0)
        rc = weft_tensor_item(found, &any);
    weft_tensor_release(zeros);
    weft_tensor_release(found);
    return rc < 0 ? rc : any != 0;
}

static int elementwise_kernel(weft_call *call, void *ctx)
{
    const entry_ctx *e = ctx;
    const char *op = weft_op_name(call->op);
    int first = e->form == OUT ? 1 : 0;
    weft_tensor *given = e->form == OUT ? call->args[0].u.tensor : NULL;
    weft_tensor *in[3] = {NULL, NULL, NULL};
    for (int k = 0; k < e->ninputs; k++)
        in[k] = call->args[first + k].u.tensor;
    int index = weft_tensor_device(in[0]).index;
    bool local = on_device(in[0], index) && (!given || on_device(given, index));
    for (int k = 1; k < e->ninputs; k++)
        local = local && on_device(in[k], index);
    /* the compute dtype: promoted over the value operands (where's
     * condition is not one) */
    int vfirst = e->family == WFC_FAMILY_WHERE ? 1 : 0;
    weft_dtype dtype = weft_result_type((const weft_tensor *const *)in + vfirst,
                                        e->ninputs - vfirst);
    int after = first + e->ninputs;
    double s0 = 0, s1 = 0, s2 = 0, alpha = 1;
    /* atan2 of integers is computed in float32, as on the CPU */
    if (e->family == WFC_FAMILY_BINARY && e->op == WFC_ATAN2 && integral_or_bool(dtype))
        dtype = WEFT_FLOAT32;
    if (e->scalar == SCALAR_COMPARE) {
        /* the CPU's scalar promotion (cpu_scalar_result_type): an integer
         * or bool tensor with a fractional scalar compares in float32, a
         * bool one with a number in int64 */
        const weft_value *v = &call->args[after];
        s0 = weft_arg_double(call, after);
        if (v->tag != WEFT_VALUE_BOOL && integral_or_bool(dtype)) {
            if (v->tag != WEFT_VALUE_INT && s0 != floor(s0))
                dtype = WEFT_FLOAT32;
            else if (dtype == WEFT_BOOL)
                dtype = WEFT_INT64;
        }
        if (integral_or_bool(dtype) && dtype != WEFT_BOOL && !integer_holds(dtype, s0))
            local = false; /* complex has no comparison kernel: served() hands it over */
    }
    if (e->family == WFC_FAMILY_TERNARY && e->op == WFC_LERP_TENSOR)
        for (int k = 1; k < e->ninputs; k++)
            if (weft_tensor_dtype(in[k]) != weft_tensor_dtype(in[0]))
                local = false; /* the CPU names the dtypes */
    bool compares = e->family == WFC_FAMILY_COMPARE || e->family == WFC_FAMILY_COMPARE_SCALAR;
    weft_dtype result = compares ? WEFT_BOOL : dtype;
    if (e->has_alpha || e->has_scalar)
        alpha = weft_arg_double(call, after);
    if (e->bounds == BOTH_BOUNDS)
        s0 = bound_arg(call, after), s1 = bound_arg(call, after + 1);
    else if (e->bounds == MIN_BOUND)
        s0 = weft_arg_double(call, after), s1 = NAN;
    else if (e->bounds == MAX_BOUND)
        s0 = NAN, s1 = weft_arg_double(call, after);
    if (e->scalar == SCALAR_PARAM || e->scalar == SCALAR_PARAM2 || e->scalar == SCALAR_PARAM3) {
        s0 = weft_arg_double(call, after);
        s1 = e->scalar != SCALAR_PARAM ? weft_arg_double(call, after + 1) : 0.0;
        s2 = e->scalar == SCALAR_PARAM3 ? weft_arg_double(call, after + 2) : 0.0;
    } else if (e->scalar == SCALAR_COMPARE || e->scalar == SCALAR_ZERO) {
        /* s0 read above (0 for logical_not) */
    } else if (e->scalar == SCALAR_GELU) {
        const char *approximate = weft_arg_string(call, after);
        bool tanh_form = approximate && strcmp(approximate, "tanh") == 0;
        if (!tanh_form && !(approximate && strcmp(approximate, "none") == 0))
            local = false; /* the CPU's message names the bad value */
        s0 = tanh_form ? 1.0 : 0.0;
    } else if (e->scalar != NO_SCALAR) {
        /* add/sub: self + alpha other as a * 1 + b; mul: a * other + 0 */
        double other = weft_arg_double(call, after);
        double a_ = e->scalar == SCALAR_ADD || e->scalar == SCALAR_SUB ? 1.0 : other;
        double alpha_ = e->scalar == SCALAR_ADD || e->scalar == SCALAR_SUB
                            ? weft_arg_double(call, after + 1) : 0.0;
        s0 = e->scalar == SCALAR_DIV ? other : a_;
        s1 = e->scalar == SCALAR_ADD ? alpha_ * other : e->scalar == SCALAR_SUB ? -alpha_ * other : 0.0;
        /* an integer tensor with a fractional scalar promotes in torch */
        if (!weft_dtype_is_floating(dtype) &&
            (other != floor(other) || (e->scalar <= SCALAR_SUB && alpha_ != floor(alpha_))))
            local = false;
        if (dtype == WEFT_BOOL)
            local = false;
    }
    if (e->bounds != NO_BOUNDS && clamp_promotes(call, after, e->bounds, dtype)) {
        if (strncmp(op, "hardtanh", 8) == 0)
            local = false; /* hardtanh's own rule for integers: the CPU's */
        else
            dtype = result = WEFT_FLOAT32; /* clamp: float32, as on the CPU */
    }
    if (e->bounds == BOTH_BOUNDS && isnan(s0) && isnan(s1) && weft_arg_is_none(call, after) &&
        weft_arg_is_none(call, after + 1))
        local = false; /* clamp(None, None): the CPU's message */
    if (e->family == WFC_FAMILY_WHERE && weft_tensor_dtype(in[0]) != WEFT_BOOL)
        local = false;
    if (e->family == WFC_FAMILY_TERNARY && !weft_dtype_is_floating(dtype) && alpha != floor(alpha))
        local = false; /* addcmul of integers with a fractional value: the CPU refuses it */
    int64_t sizes[WEFT_MAX_DIMS];
    int nd = weft_tensor_ndim(in[0]);
    memcpy(sizes, weft_tensor_sizes(in[0]), sizeof(int64_t) * (size_t)nd);
    for (int k = 1; local && k < e->ninputs; k++) {
        int64_t next[WEFT_MAX_DIMS];
        int nn = 0;
        if (weft_broadcast_shapes(next, &nn, sizes, nd, weft_tensor_sizes(in[k]),
                                  weft_tensor_ndim(in[k])) < 0)
            local = false; /* the fallback says why, in the CPU's words */
        memcpy(sizes, next, sizeof(int64_t) * (size_t)nn);
        nd = nn;
    }
    if (local && e->form == INPLACE)
        local = same_shape(in[0], sizes, nd) && result == weft_tensor_dtype(in[0]);
    if (local && e->form == OUT)
        local = weft_tensor_dtype(given) == result &&
                (same_shape(given, sizes, nd) || weft_tensor_numel(given) == 0);
    if (!local || !served(e, dtype))
        return weft_call_cpu_fallback(call);
    if (e->family == WFC_FAMILY_BINARY && e->op == WFC_FMOD && integral_or_bool(dtype)) {
        int zero = has_zero(in[1]);
        if (zero != 0)
            return zero < 0 ? zero : weft_call_cpu_fallback(call); /* ZeroDivisionError */
    }

    int rc = cudaSetDevice(index) == cudaSuccess
                 ? 0
                 : weft_set_error(WEFT_EDEVICE, "%s: cannot select " WFC_BACKEND ":%d", op, index);
    if (rc == 0 && given && weft_tensor_numel(given) == 0 && !same_shape(given, sizes, nd))
        rc = weft_tensor_resize(given, sizes, nd);
    weft_tensor *conv[3] = {NULL, NULL, NULL}, *dest = NULL, *target = NULL;
    for (int k = 0; rc == 0 && k < e->ninputs; k++)
        rc = k < vfirst ? (conv[k] = weft_tensor_retain(in[k]), 0) : as_dtype(&conv[k], in[k], dtype);
    if (rc == 0)
        target = e->form == FUNCTIONAL ? NULL : e->form == INPLACE ? in[0] : given;
    bool staged = false;
    for (int k = 0; target && k < e->ninputs; k++)
        staged = staged || overlaps_differently(target, conv[k]);
    if (rc == 0 && (target == NULL || staged))
        rc = weft_empty(&dest, sizes, nd, result, weft_tensor_device(in[0]));
    else if (rc == 0)
        dest = weft_tensor_retain(target);
    wfc_geometry g;
    if (rc == 0 && plan_of(&g, dest, conv, e->ninputs) != 0)
        rc = 1;
    if (rc == 0) {
        void *st = wfc_current_stream(index), *out = weft_tensor_data_ptr(dest);
        int64_t n = weft_tensor_numel(dest);
        const void *a = weft_tensor_data_ptr(conv[0]);
        const void *b = conv[1] ? weft_tensor_data_ptr(conv[1]) : NULL;
        switch (e->family) {
        case WFC_FAMILY_BINARY: rc = wfc_binary(st, e->op, dtype, out, a, b, alpha, n, &g); break;
        case WFC_FAMILY_COMPARE: rc = wfc_compare(st, e->op, dtype, out, a, b, n, &g); break;
        case WFC_FAMILY_UNARY: rc = wfc_unary(st, e->op, dtype, out, a, s0, s1, s2, n, &g); break;
        case WFC_FAMILY_COMPARE_SCALAR:
            rc = wfc_compare_scalar(st, e->op, dtype, out, a, s0, n, &g);
            break;
        case WFC_FAMILY_TERNARY:
            rc = wfc_ternary(st, e->op, dtype, out, a, b, weft_tensor_data_ptr(conv[2]), alpha, n, &g);
            break;
        default:
            rc = wfc_where(st, dtype, out, a, b, weft_tensor_data_ptr(conv[2]), n, &g);
        }
    }
    if (rc == 0 && staged)
        rc = weft_copy_(target, dest);
    for (int k = 0; k < 3; k++)
        weft_tensor_release(conv[k]);
    if (rc == 1) { /* more dims than the kernels index */
        weft_tensor_release(dest);
        return weft_call_cpu_fallback(call);
    }
    if (rc == 0 && e->form == FUNCTIONAL)
        return weft_return_tensor(call, 0, dest);
    weft_tensor_release(dest);
    return rc;
}

static int fill_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor *self = call->args[0].u.tensor;
    weft_dtype dtype = weft_tensor_dtype(self);
    int index = weft_tensor_device(self).index;
    if (!wfc_has_kernel(WFC_FAMILY_FILL, dtype))
        return weft_call_cpu_fallback(call);
    wfc_geometry g;
    if (plan_of(&g, self, NULL, 0) != 0)
        return weft_call_cpu_fallback(call);
    if (cudaSetDevice(index) != cudaSuccess)
        return weft_set_error(WEFT_EDEVICE, "fill_: cannot select " WFC_BACKEND ":%d", index);
    return wfc_fill(wfc_current_stream(index), dtype, weft_tensor_data_ptr(self),
                    weft_arg_double(call, 1), weft_tensor_numel(self), &g);
}

/* ------------------------------------------------------------------ copy_ */

static int cuda_status(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    return weft_set_error(e == cudaErrorMemoryAllocation ? WEFT_ENOMEM : WEFT_EDEVICE,
                          "copy_: %s: %s", what, cudaGetErrorString(e));
}

/* A strided converting copy between two tensors on one device; 1 when
 * more than WFC_MAX_DIMS dims remain after collapsing (the caller hands
 * the call to the fallback). */
static int copy_on_device(weft_tensor *dst, const weft_tensor *src)
{
    int index = weft_tensor_device(dst).index;
    int rc = cuda_status(cudaSetDevice(index), "selecting the device");
    wfc_geometry g;
    weft_tensor *srcs[1] = {(weft_tensor *)src};
    if (rc == 0 && plan_of(&g, dst, srcs, 1) != 0)
        return 1;
    if (rc == 0)
        rc = wfc_copy(wfc_current_stream(index), weft_tensor_dtype(dst), weft_tensor_data_ptr(dst),
                      weft_tensor_dtype(src), weft_tensor_data_ptr(src), weft_tensor_numel(dst), &g);
    return rc;
}

/* src as a contiguous tensor of its own dtype on its own device. */
static int contiguous_of(weft_tensor **out, const weft_tensor *src)
{
    if (weft_tensor_is_contiguous(src)) {
        *out = weft_tensor_retain((weft_tensor *)src);
        return 0;
    }
    int rc = weft_empty(out, weft_tensor_sizes(src), weft_tensor_ndim(src), weft_tensor_dtype(src),
                        weft_tensor_device(src));
    if (rc == 0 && (rc = weft_copy_(*out, src)) < 0) {
        weft_tensor_release(*out);
        *out = NULL;
    }
    return rc;
}

/* Bytes between two contiguous tensors of one dtype, on the calling
 * thread's current stream of the device side, waited for (the host side
 * may be used at once). */
static int transfer(weft_tensor *dst, const weft_tensor *src)
{
    weft_device dd = weft_tensor_device(dst), sd = weft_tensor_device(src);
    size_t bytes = (size_t)weft_tensor_numel(src) * weft_dtype_size(weft_tensor_dtype(src));
    if (bytes == 0)
        return 0;
    void *d = weft_tensor_data_ptr(dst);
    const void *s = weft_tensor_data_ptr(src);
    if (dd.type == WFC_DEVICE_TYPE && sd.type == WFC_DEVICE_TYPE && dd.index != sd.index)
        return cuda_status(cudaMemcpyPeer(d, dd.index, s, sd.index, bytes), "peer copy");
    int index = dd.type == WFC_DEVICE_TYPE ? dd.index : sd.index;
    enum cudaMemcpyKind kind = dd.type != WFC_DEVICE_TYPE   ? cudaMemcpyDeviceToHost
                               : sd.type != WFC_DEVICE_TYPE ? cudaMemcpyHostToDevice
                                                            : cudaMemcpyDeviceToDevice;
    cudaStream_t st = (cudaStream_t)wfc_current_stream(index);
    if (kind == cudaMemcpyHostToDevice) /* staged, not waited for */
        return wfc_copy_from_host_staged(d, s, bytes, index, st);
    int rc = cuda_status(cudaSetDevice(index), "selecting the device");
    if (rc == 0)
        rc = cuda_status(cudaMemcpyAsync(d, s, bytes, kind, st), "cudaMemcpyAsync");
    if (rc == 0 && kind != cudaMemcpyDeviceToDevice)
        rc = cuda_status(cudaStreamSynchronize(st), "waiting for the copy");
    return rc;
}

/* copy_(self, src) where one side is a CUDA tensor: on one device a
 * kernel; across devices one contiguous transfer in the dtype that keeps
 * it smallest, with the conversion and the striding done on the side that
 * has them cheap (the GPU, or the host's own copy_). */
static int copy_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor *dst = call->args[0].u.tensor;
    const weft_tensor *src = call->args[1].u.tensor;
    weft_device dd = weft_tensor_device(dst), sd = weft_tensor_device(src);
    bool dcuda = dd.type == WFC_DEVICE_TYPE, scuda = sd.type == WFC_DEVICE_TYPE;
    if ((!dcuda && dd.type != WEFT_DEVICE_TYPE_CPU) || (!scuda && sd.type != WEFT_DEVICE_TYPE_CPU) ||
        !wfc_has_kernel(WFC_FAMILY_COPY, weft_tensor_dtype(dst)) ||
        !wfc_has_kernel(WFC_FAMILY_COPY, weft_tensor_dtype(src)))
        return weft_call_cpu_fallback(call);
    int64_t sizes[WEFT_MAX_DIMS];
    int nd = 0;
    if (weft_broadcast_shapes(sizes, &nd, weft_tensor_sizes(dst), weft_tensor_ndim(dst),
                              weft_tensor_sizes(src), weft_tensor_ndim(src)) < 0 ||
        !same_shape(dst, sizes, nd))
        return weft_call_cpu_fallback(call); /* its message names the shapes */
    if (weft_tensor_numel(dst) == 0)
        return 0;
    if (dcuda && scuda && dd.index == sd.index) {
        int rc = 0;
        weft_tensor *c = NULL;
        if (!overlaps_differently(dst, src)) {
            rc = copy_on_device(dst, src);
        } else { /* overlapping: from a fresh copy of the source */
            rc = weft_new_output(&c, src, weft_tensor_sizes(src), weft_tensor_ndim(src),
                                 weft_tensor_dtype(src));
            if (rc == 0)
                rc = copy_on_device(c, src);
            if (rc == 0)
                rc = copy_on_device(dst, c);
        }
        weft_tensor_release(c);
        return rc == 1 ? weft_call_cpu_fallback(call) : rc;
    }
    /* Across devices: the source, expanded to dst's shape, contiguous on
     * its own side; then one transfer into a contiguous staging tensor (or
     * dst itself), then the destination side converts and strides. */
    weft_tensor *expanded = NULL, *packed = NULL, *landing = NULL;
    int rc = weft_expand(&expanded, src, sizes, nd);
    if (rc == 0)
        rc = contiguous_of(&packed, expanded);
    bool direct = rc == 0 && weft_tensor_is_contiguous(dst) &&
                  weft_tensor_dtype(dst) == weft_tensor_dtype(src);
    if (rc == 0 && direct)
        landing = weft_tensor_retain(dst);
    else if (rc == 0)
        rc = weft_empty(&landing, sizes, nd, weft_tensor_dtype(src), dd);
    if (rc == 0)
        rc = transfer(landing, packed);
    if (rc == 0 && !direct)
        rc = weft_copy_(dst, landing);
    weft_tensor_release(expanded);
    weft_tensor_release(packed);
    weft_tensor_release(landing);
    return rc;
}

/* clone(self): a contiguous copy on self's device, through copy_ above.
 * Without it clone went to the CPU fallback: cuDNN batch_norm's running
 * statistics (norm_cudnn.c) and every autograd step that clones a
 * gradient copied through the host (seen on an H200). */
static int clone_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = weft_arg_tensor(call, 0);
    weft_tensor *r = NULL;
    int rc = weft_new_output(&r, self, weft_tensor_sizes(self), weft_tensor_ndim(self),
                             weft_tensor_dtype(self));
    if (rc == 0 && (rc = weft_copy_(r, self)) == 0)
        return weft_return_tensor(call, 0, r);
    weft_tensor_release(r);
    return rc;
}

/* ------------------------------------------------------------- the table */

#define FORMS3(name, fam, opc, nin, alpha)                                               \
    {#name, elementwise_kernel, {fam, opc, FUNCTIONAL, nin, alpha, false, NO_BOUNDS, NO_SCALAR}},   \
        {#name "_", elementwise_kernel, {fam, opc, INPLACE, nin, alpha, false, NO_BOUNDS, NO_SCALAR}}, \
        {#name "_out", elementwise_kernel, {fam, opc, OUT, nin, alpha, false, NO_BOUNDS, NO_SCALAR}}
#define FORMS2(name, fam, opc, nin)                                                      \
    {#name, elementwise_kernel, {fam, opc, FUNCTIONAL, nin, false, false, NO_BOUNDS, NO_SCALAR}},   \
        {#name "_out", elementwise_kernel, {fam, opc, OUT, nin, false, false, NO_BOUNDS, NO_SCALAR}}
#define SCALAR(name, kind, uop)                                                         \
    {#name, elementwise_kernel, {WFC_FAMILY_UNARY, uop, FUNCTIONAL, 1, false, false, NO_BOUNDS, kind}}, \
        {#name "_", elementwise_kernel, {WFC_FAMILY_UNARY, uop, INPLACE, 1, false, false, NO_BOUNDS, kind}}
#define SCALAR3(name, kind, uop)                                                        \
    SCALAR(name, kind, uop),                                                            \
        {#name "_out", elementwise_kernel, {WFC_FAMILY_UNARY, uop, OUT, 1, false, false, NO_BOUNDS, kind}}
#define LERP(name, form)                                                                \
    {name, elementwise_kernel, {WFC_FAMILY_BINARY, WFC_LERP, form, 2, false, true, NO_BOUNDS, NO_SCALAR}}
#define COMPARE_SCALAR(name, opc)                                                        \
    {#name "_scalar", elementwise_kernel,                                                 \
     {WFC_FAMILY_COMPARE_SCALAR, opc, FUNCTIONAL, 1, false, false, NO_BOUNDS, SCALAR_COMPARE}}, \
        {#name "_scalar_", elementwise_kernel,                                            \
         {WFC_FAMILY_COMPARE_SCALAR, opc, INPLACE, 1, false, false, NO_BOUNDS, SCALAR_COMPARE}}
#define UNARY_PARAMS(name, uop, kind, form)                                              \
    {name, elementwise_kernel, {WFC_FAMILY_UNARY, uop, form, 1, false, false, NO_BOUNDS, kind}}
#define TERNARY(name, opc, value)                                                        \
    {#name, elementwise_kernel, {WFC_FAMILY_TERNARY, opc, FUNCTIONAL, 3, false, value, NO_BOUNDS, NO_SCALAR}}, \
        {#name "_", elementwise_kernel, {WFC_FAMILY_TERNARY, opc, INPLACE, 3, false, value, NO_BOUNDS, NO_SCALAR}}, \
        {#name "_out", elementwise_kernel, {WFC_FAMILY_TERNARY, opc, OUT, 3, false, value, NO_BOUNDS, NO_SCALAR}}
#define CLAMP(name, bounds)                                                              \
    {#name, elementwise_kernel, {WFC_FAMILY_UNARY, WFC_CLAMP, FUNCTIONAL, 1, false, false, bounds, NO_SCALAR}}, \
        {#name "_", elementwise_kernel, {WFC_FAMILY_UNARY, WFC_CLAMP, INPLACE, 1, false, false, bounds, NO_SCALAR}}, \
        {#name "_out", elementwise_kernel, {WFC_FAMILY_UNARY, WFC_CLAMP, OUT, 1, false, false, bounds, NO_SCALAR}}

static const struct {
    const char *op;
    weft_kernel_fn fn;
    entry_ctx ctx;
} table[] = {
    FORMS3(add, WFC_FAMILY_BINARY, WFC_ADD, 2, true),
    FORMS3(sub, WFC_FAMILY_BINARY, WFC_SUB, 2, true),
    FORMS3(mul, WFC_FAMILY_BINARY, WFC_MUL, 2, false),
    FORMS3(div, WFC_FAMILY_BINARY, WFC_DIV, 2, false),
    FORMS2(maximum, WFC_FAMILY_BINARY, WFC_MAXIMUM, 2),
    FORMS2(minimum, WFC_FAMILY_BINARY, WFC_MINIMUM, 2),
    {"threshold_backward", elementwise_kernel,
     {WFC_FAMILY_BINARY, WFC_THRESHOLD_BACKWARD, FUNCTIONAL, 2, false, true, NO_BOUNDS, NO_SCALAR}},
    SCALAR(add_scalar, SCALAR_ADD, WFC_AXPB),
    SCALAR(sub_scalar, SCALAR_SUB, WFC_AXPB),
    SCALAR(mul_scalar, SCALAR_MUL, WFC_AXPB),
    SCALAR(div_scalar, SCALAR_DIV, WFC_DIV_SCALAR),
    FORMS3(eq, WFC_FAMILY_COMPARE, WFC_EQ, 2, false),
    FORMS3(ne, WFC_FAMILY_COMPARE, WFC_NE, 2, false),
    FORMS3(lt, WFC_FAMILY_COMPARE, WFC_LT, 2, false),
    FORMS3(le, WFC_FAMILY_COMPARE, WFC_LE, 2, false),
    FORMS3(gt, WFC_FAMILY_COMPARE, WFC_GT, 2, false),
    FORMS3(ge, WFC_FAMILY_COMPARE, WFC_GE, 2, false),
    FORMS3(neg, WFC_FAMILY_UNARY, WFC_NEG, 1, false),
    FORMS3(abs, WFC_FAMILY_UNARY, WFC_ABS, 1, false),
    FORMS3(relu, WFC_FAMILY_UNARY, WFC_RELU, 1, false),
    FORMS3(exp, WFC_FAMILY_UNARY, WFC_EXP, 1, false),
    FORMS3(log, WFC_FAMILY_UNARY, WFC_LOG, 1, false),
    FORMS3(sqrt, WFC_FAMILY_UNARY, WFC_SQRT, 1, false),
    FORMS3(sigmoid, WFC_FAMILY_UNARY, WFC_SIGMOID, 1, false),
    FORMS3(tanh, WFC_FAMILY_UNARY, WFC_TANH, 1, false),
    FORMS3(rsqrt, WFC_FAMILY_UNARY, WFC_RSQRT, 1, false),
    FORMS3(reciprocal, WFC_FAMILY_UNARY, WFC_RECIPROCAL, 1, false),
    FORMS3(sin, WFC_FAMILY_UNARY, WFC_SIN, 1, false),
    FORMS3(cos, WFC_FAMILY_UNARY, WFC_COS, 1, false),
    FORMS3(log1p, WFC_FAMILY_UNARY, WFC_LOG1P, 1, false),
    FORMS3(expm1, WFC_FAMILY_UNARY, WFC_EXPM1, 1, false),
    FORMS3(erf, WFC_FAMILY_UNARY, WFC_ERF, 1, false),
    FORMS3(silu, WFC_FAMILY_UNARY, WFC_SILU, 1, false),
    FORMS3(sign, WFC_FAMILY_UNARY, WFC_SIGN, 1, false),
    FORMS3(floor, WFC_FAMILY_UNARY, WFC_FLOOR, 1, false),
    FORMS3(ceil, WFC_FAMILY_UNARY, WFC_CEIL, 1, false),
    FORMS3(round, WFC_FAMILY_UNARY, WFC_ROUND, 1, false),
    SCALAR3(leaky_relu, SCALAR_PARAM, WFC_LEAKY_RELU),
    SCALAR3(gelu, SCALAR_GELU, WFC_GELU),
    SCALAR(pow_scalar, SCALAR_PARAM, WFC_POW),
    LERP("lerp_scalar", FUNCTIONAL), LERP("lerp_scalar_", INPLACE), LERP("lerp_scalar_out", OUT),
    CLAMP(hardtanh, BOTH_BOUNDS),
    CLAMP(clamp, BOTH_BOUNDS),
    CLAMP(clamp_min, MIN_BOUND),
    CLAMP(clamp_max, MAX_BOUND),
    FORMS2(where, WFC_FAMILY_WHERE, 0, 3),
    FORMS3(atan2, WFC_FAMILY_BINARY, WFC_ATAN2, 2, false),
    FORMS3(fmod, WFC_FAMILY_BINARY, WFC_FMOD, 2, false),
    FORMS3(pow, WFC_FAMILY_BINARY, WFC_POW_TENSOR, 2, false),
    FORMS3(logical_and, WFC_FAMILY_COMPARE, WFC_LOGICAL_AND, 2, false),
    FORMS3(logical_or, WFC_FAMILY_COMPARE, WFC_LOGICAL_OR, 2, false),
    FORMS3(logical_xor, WFC_FAMILY_COMPARE, WFC_LOGICAL_XOR, 2, false),
    {"logical_not", elementwise_kernel,
     {WFC_FAMILY_COMPARE_SCALAR, WFC_EQ, FUNCTIONAL, 1, false, false, NO_BOUNDS, SCALAR_ZERO}},
    {"logical_not_", elementwise_kernel,
     {WFC_FAMILY_COMPARE_SCALAR, WFC_EQ, INPLACE, 1, false, false, NO_BOUNDS, SCALAR_ZERO}},
    {"logical_not_out", elementwise_kernel,
     {WFC_FAMILY_COMPARE_SCALAR, WFC_EQ, OUT, 1, false, false, NO_BOUNDS, SCALAR_ZERO}},
    COMPARE_SCALAR(eq, WFC_EQ),
    COMPARE_SCALAR(ne, WFC_NE),
    COMPARE_SCALAR(lt, WFC_LT),
    COMPARE_SCALAR(le, WFC_LE),
    COMPARE_SCALAR(gt, WFC_GT),
    COMPARE_SCALAR(ge, WFC_GE),
    UNARY_PARAMS("softplus", WFC_SOFTPLUS, SCALAR_PARAM2, FUNCTIONAL),
    UNARY_PARAMS("softplus_out", WFC_SOFTPLUS, SCALAR_PARAM2, OUT),
    UNARY_PARAMS("elu", WFC_ELU, SCALAR_PARAM3, FUNCTIONAL),
    UNARY_PARAMS("elu_", WFC_ELU, SCALAR_PARAM3, INPLACE),
    UNARY_PARAMS("elu_out", WFC_ELU, SCALAR_PARAM3, OUT),
    TERNARY(lerp, WFC_LERP_TENSOR, false),
    TERNARY(addcmul, WFC_ADDCMUL, true),
    TERNARY(addcdiv, WFC_ADDCDIV, true),
    {"fill_", fill_kernel, {WFC_FAMILY_FILL, 0, INPLACE, 1, false, false, NO_BOUNDS, NO_SCALAR}},
    {"copy_", copy_kernel, {WFC_FAMILY_COPY, 0, INPLACE, 1, false, false, NO_BOUNDS, NO_SCALAR}},
    {"clone", clone_kernel, {WFC_FAMILY_COPY, 0, FUNCTIONAL, 1, false, false, NO_BOUNDS, NO_SCALAR}},
};

int wfc_register_kernels(weft_registrar *reg)
{
    for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
        int rc = weft_register_kernel(reg, table[i].op, WEFT_KEY_DENSE, WFC_DEVICE_TYPE,
                                      table[i].fn, (void *)&table[i].ctx, NULL);
        if (rc < 0)
            return rc;
    }
    int rc = wfc_register_blas(reg);
    if (rc == 0)
        rc = wfc_register_reduce(reg);
    if (rc == 0)
        rc = wfc_register_nn(reg);
    if (rc == 0)
        rc = wfc_register_random(reg);
    if (rc == 0)
        rc = wfc_register_index(reg);
    if (rc == 0)
        rc = wfc_register_norm(reg);
    /* scatter's family, sort and index_put group by a device radix sort;
     * a build without one (gpu.h) leaves them to the CPU fallback. */
#if WFC_HAVE_DEVICE_SORT
    if (rc == 0)
        rc = wfc_register_scatter(reg);
    if (rc == 0)
        rc = wfc_register_sort(reg);
    if (rc == 0)
        rc = wfc_register_index_put(reg);
#endif
    if (rc == 0)
        rc = wfc_register_upsample(reg);
    if (rc == 0)
        rc = wfc_register_shape(reg);
#ifdef WEFT_HAVE_CUDNN
    if (rc == 0)
        rc = wfc_register_conv(reg);
#endif
    return rc;
}
