/* backends/cuda/shape.c — the shape operators on the device: cat, stack,
 * roll, repeat and pad are the CPU backend's composites (backends/cpu/
 * shape.c) over copy_, fill_ and index_select, which run the device's
 * kernels; flip, tril/triu and the scans cumsum/cumprod launch
 * shape.cu.  Every call whose arguments the CPU would refuse, or that is
 * unusual (another device's operand, a dtype the copy kernel has not,
 * more than 8 non-collapsible dims), goes to
 * the core's CPU fallback, so the results' semantics and every error
 * message stay the CPU backend's. */
#include <stdlib.h>
#include <string.h>

#include "gpu.h"

#include "cuda.h"

static bool on_device(const weft_tensor *t, int index)
{
    weft_device d = weft_tensor_device(t);
    return d.type == WFC_DEVICE_TYPE && d.index == index;
}

/* dim wrapped against nd dims (a 0-d tensor takes 0 and -1); false when
 * out of range (the caller hands the call to the fallback, which names
 * it). */
static bool wrapped(int64_t dim, int nd, int *out)
{
    int wrap = nd > 0 ? nd : 1;
    if (dim < -wrap || dim >= wrap)
        return false;
    *out = (int)(dim < 0 ? dim + wrap : dim);
    return true;
}

static bool copyable(weft_dtype dtype)
{
    return wfc_has_kernel(WFC_FAMILY_COPY, dtype);
}

static int select_device(const char *op, int index)
{
    if (cudaSetDevice(index) == cudaSuccess)
        return 0;
    return weft_set_error(WEFT_EDEVICE, "%s: cannot select " WFC_BACKEND ":%d", op, index);
}

/* dst's window [dst_start, +length) along dim = src's [src_start, +length). */
static int copy_window(weft_tensor *dst, int64_t dst_start, const weft_tensor *src,
                       int64_t src_start, int dim, int64_t length)
{
    if (length <= 0)
        return 0;
    weft_tensor *d = NULL, *s = NULL;
    int rc = weft_narrow(&d, dst, dim, dst_start, length);
    if (rc == 0)
        rc = weft_narrow(&s, src, dim, src_start, length);
    if (rc == 0)
        rc = weft_copy_(d, s);
    weft_tensor_release(d);
    weft_tensor_release(s);
    return rc;
}

/* ------------------------------------------------------------ cat, stack */

/* PyTorch's legacy rule, as the CPU keeps it: a 1-d tensor with no
 * elements is skipped by cat, whatever the other tensors' shapes. */
static bool skipped_by_cat(const weft_tensor *t)
{
    return weft_tensor_ndim(t) == 1 && weft_tensor_numel(t) == 0;
}

/* cat of n tensors along dim_arg into a new tensor *out: one result, each
 * input copied into its window (the device's copy kernel, converting to
 * the promoted dtype).  Returns 0, a negative code, or 1 when the call is
 * for the fallback (a check the CPU would fail, or an unusual case). */
static int concatenate(weft_tensor *const *ts, int n, int64_t dim_arg, weft_tensor **out)
{
    *out = NULL;
    if (n == 0 || !ts[0])
        return 1;
    weft_device device = weft_tensor_device(ts[0]);
    weft_dtype dtype = weft_tensor_dtype(ts[0]);
    int first = -1;
    for (int i = 0; i < n; i++) {
        if (!ts[i] || !on_device(ts[i], device.index) || weft_tensor_ndim(ts[i]) == 0 ||
            !copyable(weft_tensor_dtype(ts[i])))
            return 1;
        dtype = weft_promote_types(dtype, weft_tensor_dtype(ts[i]));
        if (first < 0 && !skipped_by_cat(ts[i]))
            first = i;
    }
    if (!copyable(dtype))
        return 1;
    if (first < 0) /* nothing but skipped tensors: an empty 1-d result */
        return weft_empty(out, (int64_t[]){0}, 1, dtype, device);
    const int ndim = weft_tensor_ndim(ts[first]);
    const int64_t *shape = weft_tensor_sizes(ts[first]);
    int dim;
    if (!wrapped(dim_arg, ndim, &dim))
        return 1;
    int64_t sizes[WEFT_MAX_DIMS];
    memcpy(sizes, shape, (size_t)ndim * sizeof(int64_t));
    sizes[dim] = 0;
    for (int i = 0; i < n; i++) {
        if (skipped_by_cat(ts[i]))
            continue;
        if (weft_tensor_ndim(ts[i]) != ndim)
            return 1;
        for (int d = 0; d < ndim; d++)
            if (d != dim && weft_tensor_sizes(ts[i])[d] != shape[d])
                return 1;
        sizes[dim] += weft_tensor_sizes(ts[i])[dim];
    }
    weft_tensor *r = NULL;
    int rc = select_device("cat", device.index);
    if (rc == 0)
        rc = weft_empty(&r, sizes, ndim, dtype, device);
    int64_t at = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        if (skipped_by_cat(ts[i]))
            continue;
        int64_t len = weft_tensor_sizes(ts[i])[dim];
        rc = copy_window(r, at, ts[i], 0, dim, len);
        at += len;
    }
    if (rc < 0) {
        weft_tensor_release(r);
        return rc;
    }
    *out = r;
    return 0;
}

static int cat_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    int n = 0;
    weft_tensor *const *ts = weft_arg_tensors(call, 0, &n);
    weft_tensor *r = NULL;
    int rc = ts ? concatenate(ts, n, weft_arg_int(call, 1), &r) : 1;
    if (rc == 1)
        return weft_call_cpu_fallback(call);
    return rc < 0 ? rc : weft_return_tensor(call, 0, r);
}

/* stack: every tensor unsqueezed at dim, then cat. */
static int stack_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    int n = 0;
    weft_tensor *const *ts = weft_arg_tensors(call, 0, &n);
    if (!ts || n == 0 || !ts[0])
        return weft_call_cpu_fallback(call);
    const int ndim = weft_tensor_ndim(ts[0]);
    for (int i = 1; i < n; i++)
        if (!ts[i] || weft_tensor_ndim(ts[i]) != ndim ||
            memcmp(weft_tensor_sizes(ts[i]), weft_tensor_sizes(ts[0]), (size_t)ndim * sizeof(int64_t)))
            return weft_call_cpu_fallback(call);
    int dim;
    if (!wrapped(weft_arg_int(call, 1), ndim + 1, &dim))
        return weft_call_cpu_fallback(call);
    weft_tensor **views = calloc((size_t)n, sizeof *views);
    if (!views)
        return weft_set_error(WEFT_ENOMEM, "stack: out of memory");
    int rc = 0;
    for (int i = 0; rc == 0 && i < n; i++)
        rc = weft_unsqueeze(&views[i], ts[i], dim);
    weft_tensor *r = NULL;
    if (rc == 0)
        rc = concatenate(views, n, dim, &r);
    for (int i = 0; i < n; i++)
        weft_tensor_release(views[i]);
    free(views);
    if (rc == 1)
        return weft_call_cpu_fallback(call);
    return rc < 0 ? rc : weft_return_tensor(call, 0, r);
}

/* ------------------------------------------------------------ roll */

/* src rolled by shift along dim into a new tensor: two window copies. */
static int roll_one(const weft_tensor *src, int dim, int64_t shift, weft_tensor **out)
{
    weft_tensor *r = NULL;
    int rc = weft_new_output(&r, src, weft_tensor_sizes(src), weft_tensor_ndim(src),
                             weft_tensor_dtype(src));
    int64_t n = weft_tensor_sizes(src)[dim];
    if (rc == 0 && n == 0)
        rc = weft_copy_(r, src);
    if (rc == 0 && n > 0) {
        int64_t s = shift % n;
        if (s < 0)
            s += n;
        rc = copy_window(r, s, src, 0, dim, n - s); /* out[i + s] = in[i] */
        if (rc == 0)
            rc = copy_window(r, 0, src, n - s, dim, s);
    }
    if (rc < 0) {
        weft_tensor_release(r);
        r = NULL;
    }
    *out = r;
    return rc;
}

static int roll_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = weft_arg_tensor(call, 0);
    const int ndim = weft_tensor_ndim(self);
    int nshifts = 0, ndims = 0;
    const int64_t *shifts = weft_arg_ints(call, 1, &nshifts);
    const int64_t *dims = weft_arg_ints(call, 2, &ndims);
    if (!copyable(weft_tensor_dtype(self)) || nshifts != (ndims == 0 ? 1 : ndims) ||
        (ndims > 0 && ndim == 0))
        return weft_call_cpu_fallback(call); /* its message says what is wrong */
    int wrapped_dims[WEFT_MAX_DIMS];
    for (int i = 0; i < ndims; i++)
        if (i >= WEFT_MAX_DIMS || !wrapped(dims[i], ndim, &wrapped_dims[i]))
            return weft_call_cpu_fallback(call);
    int rc = select_device("roll", weft_tensor_device(self).index);
    if (rc < 0)
        return rc;
    if (ndims == 0) { /* no dims: roll the flattened tensor, then restore the shape */
        int64_t numel = weft_tensor_numel(self);
        weft_tensor *flat = NULL, *rolled = NULL, *r = NULL;
        rc = weft_reshape(&flat, self, &numel, 1);
        if (rc == 0)
            rc = roll_one(flat, 0, shifts[0], &rolled);
        if (rc == 0)
            rc = weft_reshape(&r, rolled, weft_tensor_sizes(self), ndim);
        weft_tensor_release(flat);
        weft_tensor_release(rolled);
        return rc < 0 ? rc : weft_return_tensor(call, 0, r);
    }
    weft_tensor *cur = weft_tensor_retain((weft_tensor *)self);
    for (int i = 0; rc == 0 && i < ndims; i++) {
        weft_tensor *next = NULL;
        if ((rc = roll_one(cur, wrapped_dims[i], shifts[i], &next)) == 0) {
            weft_tensor_release(cur);
            cur = next;
        }
    }
    if (rc < 0) {
        weft_tensor_release(cur);
        return rc;
    }
    return weft_return_tensor(call, 0, cur);
}

/* ------------------------------------------------------------ repeat */

/* out viewed as [r0, s0, r1, s1, ...] is self viewed as [1, s0, 1, s1, ...]
 * expanded: one copy_ on the device. */
static int repeat_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = weft_arg_tensor(call, 0);
    int n = 0;
    const int64_t *reps = weft_arg_ints(call, 1, &n);
    const int ndim = weft_tensor_ndim(self);
    if (!copyable(weft_tensor_dtype(self)) || n < ndim || 2 * n > WEFT_MAX_DIMS || (n > 0 && !reps))
        return weft_call_cpu_fallback(call);
    int64_t out_sizes[WEFT_MAX_DIMS], pairs[WEFT_MAX_DIMS], ones[WEFT_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        int64_t r = reps[i], s = i < n - ndim ? 1 : weft_tensor_sizes(self)[i - (n - ndim)];
        if (r < 0 || __builtin_mul_overflow(r, s, &out_sizes[i]))
            return weft_call_cpu_fallback(call);
        pairs[2 * i] = r;
        pairs[2 * i + 1] = s;
        ones[2 * i] = 1;
        ones[2 * i + 1] = s;
    }
    int rc = select_device("repeat", weft_tensor_device(self).index);
    weft_tensor *r = NULL, *r_view = NULL, *s_view = NULL, *s_expanded = NULL;
    if (rc == 0)
        rc = weft_new_output(&r, self, out_sizes, n, weft_tensor_dtype(self));
    /* an empty result has nothing to copy, and its [r, s] pairs may not
     * even have strides that fit int64 (the CPU's reasoning) */
    if (rc == 0 && weft_tensor_numel(r) == 0)
        return weft_return_tensor(call, 0, r);
    if (rc == 0)
        rc = weft_view(&r_view, r, pairs, 2 * n);
    if (rc == 0)
        rc = weft_reshape(&s_view, self, ones, 2 * n);
    if (rc == 0)
        rc = weft_expand(&s_expanded, s_view, pairs, 2 * n);
    if (rc == 0)
        rc = weft_copy_(r_view, s_expanded);
    weft_tensor_release(r_view);
    weft_tensor_release(s_view);
    weft_tensor_release(s_expanded);
    if (rc < 0) {
        weft_tensor_release(r);
        return rc;
    }
    return weft_return_tensor(call, 0, r);
}

/* ------------------------------------------------------------ pad */

/* The source index of output position o along a dim of size n padded by
 * `left` (reflect: mirrored without repeating the edge; replicate: the
 * edge repeated), as the CPU computes it. */
static int64_t pad_source(bool reflect, int64_t o, int64_t left, int64_t n)
{
    int64_t i = o - left;
    if (!reflect)
        return i < 0 ? 0 : i >= n ? n - 1 : i;
    if (i < 0)
        i = -i;
    if (i >= n)
        i = 2 * (n - 1) - i;
    return i;
}

/* reflect and replicate: as on the CPU, one index_select per padded dim
 * (the device's kernel), its index made on the host and copied over. */
static int pad_by_index(const weft_tensor *self, const int64_t *pads, int npairs, bool reflect,
                        weft_tensor **out)
{
    const int ndim = weft_tensor_ndim(self);
    weft_tensor *cur = weft_tensor_retain((weft_tensor *)self);
    int rc = 0;
    for (int p = 0; rc == 0 && p < npairs; p++) {
        int d = ndim - 1 - p;
        int64_t left = pads[2 * p], right = pads[2 * p + 1], n = weft_tensor_sizes(cur)[d];
        int64_t len = n + left + right;
        weft_tensor *host = NULL, *index = NULL, *next = NULL;
        rc = weft_empty(&host, &len, 1, WEFT_INT64, WEFT_DEVICE_CPU);
        if (rc == 0) {
            int64_t *ix = weft_tensor_data_ptr(host);
            for (int64_t o = 0; o < len; o++)
                ix[o] = pad_source(reflect, o, left, n);
            rc = weft_to_device(&index, host, weft_tensor_device(self));
        }
        if (rc == 0)
            rc = weft_index_select(&next, cur, d, index);
        weft_tensor_release(host);
        weft_tensor_release(index);
        if (rc == 0) {
            weft_tensor_release(cur);
            cur = next;
        }
    }
    if (rc == 0 && cur == self) { /* no pairs: still a new tensor */
        rc = weft_new_output(out, self, weft_tensor_sizes(self), ndim, weft_tensor_dtype(self));
        if (rc == 0 && (rc = weft_copy_(*out, self)) < 0) {
            weft_tensor_release(*out);
            *out = NULL;
        }
    } else if (rc == 0) {
        *out = cur;
        cur = NULL;
    }
    weft_tensor_release(cur);
    return rc;
}

/* pad in constant mode: the result filled with the value, then self
 * (cropped by negative pads) copied into its window; reflect and
 * replicate through index_select (pad_by_index). */
static int pad_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = weft_arg_tensor(call, 0);
    int len = 0;
    const int64_t *pads = weft_arg_ints(call, 1, &len);
    const char *mode = weft_arg_string(call, 2);
    const int ndim = weft_tensor_ndim(self), npairs = len / 2;
    bool constant = mode && strcmp(mode, "constant") == 0;
    bool reflect = mode && strcmp(mode, "reflect") == 0;
    bool replicate = mode && strcmp(mode, "replicate") == 0;
    if ((!constant && !reflect && !replicate) || len % 2 || npairs > ndim ||
        !copyable(weft_tensor_dtype(self)) || !wfc_has_kernel(WFC_FAMILY_FILL, weft_tensor_dtype(self)))
        return weft_call_cpu_fallback(call);
    if (!constant) {
        if (!weft_arg_is_none(call, 3))
            return weft_call_cpu_fallback(call); /* a value with this mode: the CPU's message */
        for (int p = 0; p < npairs; p++) {
            int64_t left = pads[2 * p], right = pads[2 * p + 1];
            int64_t n = weft_tensor_sizes(self)[ndim - 1 - p];
            if (left < 0 || right < 0 || (reflect && (left >= n || right >= n)) || n == 0)
                return weft_call_cpu_fallback(call);
        }
        weft_tensor *r = NULL;
        int rc = select_device("pad", weft_tensor_device(self).index);
        if (rc == 0)
            rc = pad_by_index(self, pads, npairs, reflect, &r);
        return rc < 0 ? rc : weft_return_tensor(call, 0, r);
    }
    double value = weft_arg_is_none(call, 3) ? 0.0 : weft_arg_double(call, 3);
    int64_t sizes[WEFT_MAX_DIMS];
    memcpy(sizes, weft_tensor_sizes(self), (size_t)ndim * sizeof(int64_t));
    for (int p = 0; p < npairs; p++) {
        int d = ndim - 1 - p;
        int64_t size;
        if (__builtin_add_overflow(sizes[d], pads[2 * p], &size) ||
            __builtin_add_overflow(size, pads[2 * p + 1], &size) || size < 0)
            return weft_call_cpu_fallback(call);
        sizes[d] = size;
    }
    weft_tensor *r = NULL;
    int rc = select_device("pad", weft_tensor_device(self).index);
    if (rc == 0)
        rc = weft_new_output(&r, self, sizes, ndim, weft_tensor_dtype(self));
    if (rc == 0)
        rc = weft_fill_(r, value);
    /* the window of r that self (cropped by negative pads) lands in */
    weft_tensor *dst = r ? weft_tensor_retain(r) : NULL, *src = weft_tensor_retain((weft_tensor *)self);
    bool empty = false;
    for (int p = 0; rc == 0 && p < npairs; p++) {
        int d = ndim - 1 - p;
        int64_t left = pads[2 * p], right = pads[2 * p + 1], n = weft_tensor_sizes(self)[d];
        /* a crop past the whole extent crops it all (and INT64_MIN has no
         * negation in int64) */
        int64_t crop_left = left < 0 ? (left <= -n ? n : -left) : 0;
        int64_t crop_right = right < 0 ? (right <= -n ? n : -right) : 0;
        int64_t kept = n - crop_left - crop_right;
        if (kept <= 0) {
            empty = true;
            break;
        }
        weft_tensor *a = NULL, *b = NULL;
        rc = weft_narrow(&a, dst, d, left > 0 ? left : 0, kept);
        if (rc == 0)
            rc = weft_narrow(&b, src, d, crop_left, kept);
        weft_tensor_release(dst);
        weft_tensor_release(src);
        dst = a;
        src = b;
    }
    if (rc == 0 && !empty)
        rc = weft_copy_(dst, src);
    weft_tensor_release(dst);
    weft_tensor_release(src);
    if (rc < 0) {
        weft_tensor_release(r);
        return rc;
    }
    return weft_return_tensor(call, 0, r);
}

/* ------------------------------------------------------------ flip */

static int flip_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = weft_arg_tensor(call, 0);
    int ndims = 0;
    const int64_t *dims = weft_arg_ints(call, 1, &ndims);
    const int ndim = weft_tensor_ndim(self);
    const weft_dtype dtype = weft_tensor_dtype(self);
    const size_t elem = weft_dtype_size(dtype);
    bool flipped[WEFT_MAX_DIMS] = {false};
    for (int i = 0; i < ndims; i++) {
        int d;
        if (!wrapped(dims[i], ndim, &d) || flipped[d])
            return weft_call_cpu_fallback(call); /* out of range, or a repeated dim */
        flipped[d] = true; /* a 0-d self's dim 0: the plan walks no dims */
    }
    wfc_flip f;
    if ((elem != 1 && elem != 2 && elem != 4 && elem != 8) ||
        wfc_plan_flip(&f, weft_tensor_sizes(self), weft_tensor_strides(self), ndim, flipped) < 0)
        return weft_call_cpu_fallback(call);
    int index = weft_tensor_device(self).index;
    weft_tensor *r = NULL;
    int rc = select_device("flip", index);
    if (rc == 0)
        rc = weft_new_output(&r, self, weft_tensor_sizes(self), ndim, dtype);
    if (rc == 0)
        rc = wfc_flip_gather(wfc_current_stream(index), elem, weft_tensor_data_ptr(r),
                             (const char *)weft_tensor_data_ptr(self) + f.offset * (int64_t)elem,
                             weft_tensor_numel(self), &f);
    if (rc < 0) {
        weft_tensor_release(r);
        return rc;
    }
    return weft_return_tensor(call, 0, r);
}

/* ------------------------------------------------------------ tril, triu */

typedef struct triangle_form {
    bool lower, inplace;
} triangle_form;

/* The kernel zeroes the dropped triangle of a contiguous copy (or of self
 * when it is contiguous and the form is in place); all-zero bytes are zero
 * in every dtype, as the CPU's memset assumes. */
static int triangle_kernel(weft_call *call, void *ctx)
{
    const triangle_form *form = ctx;
    const char *op = weft_op_name(call->op);
    weft_tensor *self = weft_arg_tensor(call, 0);
    const int ndim = weft_tensor_ndim(self);
    const size_t elem = weft_dtype_size(weft_tensor_dtype(self));
    if (ndim < 2 || (elem != 1 && elem != 2 && elem != 4 && elem != 8) ||
        !copyable(weft_tensor_dtype(self)))
        return weft_call_cpu_fallback(call);
    int index = weft_tensor_device(self).index;
    int rc = select_device(op, index);
    weft_tensor *work = NULL;
    if (rc == 0 && form->inplace && weft_tensor_is_contiguous(self))
        work = weft_tensor_retain(self);
    else if (rc == 0 && (rc = weft_new_output(&work, self, weft_tensor_sizes(self), ndim,
                                              weft_tensor_dtype(self))) == 0)
        rc = weft_copy_(work, self);
    int64_t rows = weft_tensor_sizes(self)[ndim - 2], cols = weft_tensor_sizes(self)[ndim - 1];
    if (rc == 0)
        rc = wfc_triangle(wfc_current_stream(index), elem, weft_tensor_data_ptr(work),
                          weft_tensor_numel(self), rows, cols, weft_arg_int(call, 1), form->lower);
    if (rc == 0 && !form->inplace)
        return weft_return_tensor(call, 0, work);
    if (rc == 0 && work != self)
        rc = weft_copy_(self, work);
    weft_tensor_release(work);
    return rc;
}

/* ------------------------------------------------------------ cumsum, cumprod */

enum form { FUNCTIONAL, INPLACE, OUT };

typedef struct scan_form {
    bool product;
    int form;
} scan_form;

/* As the CPU computes them: self converted to float64 (floating results)
 * or int64 (integer and bool results), laid out with dim last and
 * contiguous, each row scanned in order by one thread (integers wrap
 * through uint64), then the values back in self's dim order, converted to
 * the result's dtype. */
static int scan_kernel(weft_call *call, void *ctx)
{
    const scan_form *form = ctx;
    const char *op = weft_op_name(call->op);
    const int first = form->form == OUT ? 1 : 0;
    weft_tensor *target = form->form == FUNCTIONAL ? NULL : call->args[0].u.tensor;
    const weft_tensor *self = weft_arg_tensor(call, first);
    const weft_dtype dt = weft_tensor_dtype(self);
    const int ndim = weft_tensor_ndim(self), nd = ndim > 0 ? ndim : 1;
    const int index = weft_tensor_device(self).index;
    bool has_dtype = call->nargs > first + 2 && call->args[first + 2].tag == WEFT_VALUE_DTYPE;
    int dim;
    if (!wrapped(weft_arg_int(call, first + 1), ndim, &dim) || (target && has_dtype) ||
        (target && (!on_device(target, index) || weft_tensor_ndim(target) != ndim ||
                    memcmp(weft_tensor_sizes(target), weft_tensor_sizes(self),
                           (size_t)ndim * sizeof(int64_t)) != 0)))
        return weft_call_cpu_fallback(call);
    weft_dtype result = has_dtype ? call->args[first + 2].u.dtype
                        : target  ? weft_tensor_dtype(target)
                        : (weft_dtype_is_floating(dt) ? dt : WEFT_INT64);
    weft_dtype compute;
    if (result == WEFT_FLOAT16 || result == WEFT_BFLOAT16 || result == WEFT_FLOAT32 ||
        result == WEFT_FLOAT64)
        compute = WEFT_FLOAT64;
    else if (result == WEFT_BOOL || result == WEFT_UINT8 || result == WEFT_INT8 ||
             result == WEFT_INT16 || result == WEFT_INT32 || result == WEFT_INT64)
        compute = WEFT_INT64;
    else
        return weft_call_cpu_fallback(call); /* complex, or a dtype the CPU names */
    if (!copyable(dt)) /* complex: the CPU's scans name it */
        return weft_call_cpu_fallback(call);
    int64_t perm[WEFT_MAX_DIMS], inverse[WEFT_MAX_DIMS];
    for (int d = 0, k = 0; d < nd; d++)
        if (d != dim)
            perm[k++] = d;
    perm[nd - 1] = dim;
    for (int d = 0, k = 0; d < nd; d++)
        inverse[d] = d == dim ? nd - 1 : k++;
    weft_tensor *base = NULL, *moved = NULL, *rows = NULL, *back = NULL, *values = NULL;
    int rc = select_device(op, index);
    if (rc == 0)
        rc = wfc_at_least_1d(&base, self);
    if (rc == 0)
        rc = weft_permute(&moved, base, perm, nd);
    if (rc == 0)
        rc = weft_new_output(&rows, self, weft_tensor_sizes(moved), nd, compute);
    if (rc == 0)
        rc = weft_copy_(rows, moved);
    int64_t len = weft_tensor_sizes(base ? base : self)[dim];
    if (rc == 0 && len > 0)
        rc = wfc_scan(wfc_current_stream(index), compute, weft_tensor_data_ptr(rows),
                      weft_tensor_numel(rows) / len, len, form->product);
    if (rc == 0)
        rc = weft_permute(&back, rows, inverse, nd);
    if (rc == 0) /* a 0-d self: the one value back in its shape */
        rc = ndim > 0 ? (values = weft_tensor_retain(back), 0)
                      : weft_reshape(&values, back, weft_tensor_sizes(self), 0);
    weft_tensor *final = NULL;
    if (rc == 0 && target)
        rc = weft_copy_(target, values);
    else if (rc == 0)
        rc = weft_to_dtype(&final, values, result);
    weft_tensor_release(base);
    weft_tensor_release(moved);
    weft_tensor_release(rows);
    weft_tensor_release(back);
    weft_tensor_release(values);
    if (rc == 0 && !target)
        return weft_return_tensor(call, 0, final);
    weft_tensor_release(final);
    return rc;
}

/* ------------------------------------------------------------ the table */

static const triangle_form tril_form = {true, false}, tril_inplace = {true, true};
static const triangle_form triu_form = {false, false}, triu_inplace = {false, true};
static const scan_form cumsum_forms[3] = {{false, FUNCTIONAL}, {false, INPLACE}, {false, OUT}};
static const scan_form cumprod_forms[3] = {{true, FUNCTIONAL}, {true, INPLACE}, {true, OUT}};

int wfc_register_shape(weft_registrar *reg)
{
    static const weft_kernel_entry entries[] = {
        {"cat", cat_kernel, NULL},
        {"stack", stack_kernel, NULL},
        {"roll", roll_kernel, NULL},
        {"repeat", repeat_kernel, NULL},
        {"pad", pad_kernel, NULL},
        {"flip", flip_kernel, NULL},
        {"tril", triangle_kernel, &tril_form},
        {"tril_", triangle_kernel, &tril_inplace},
        {"triu", triangle_kernel, &triu_form},
        {"triu_", triangle_kernel, &triu_inplace},
        {"cumsum", scan_kernel, &cumsum_forms[0]},
        {"cumsum_", scan_kernel, &cumsum_forms[1]},
        {"cumsum_out", scan_kernel, &cumsum_forms[2]},
        {"cumprod", scan_kernel, &cumprod_forms[0]},
        {"cumprod_", scan_kernel, &cumprod_forms[1]},
        {"cumprod_out", scan_kernel, &cumprod_forms[2]},
    };
    return weft_register_kernel_table(reg, WEFT_KEY_DENSE, WFC_DEVICE_TYPE, entries,
                                       sizeof entries / sizeof *entries);
}
