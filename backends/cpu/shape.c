/* backends/cpu/shape.c — operators that rearrange elements without
 * computing with them: clone, cat, stack, flip, roll, repeat, tril/triu and
 * pad.  Most fill a new tensor through views of it with the core's copy_,
 * which converts dtypes and walks any strides; flip and tril/triu move the
 * bytes themselves, so one body serves every dtype.  Also the helpers the
 * shape and indexing files share (shape.h). */
#include <stdio.h>
#include <stdlib.h>

#include "shape.h"

/* ------------------------------------------------------------ helpers */

int cpu__wrap_dim(const char *op, int64_t dim, int ndim, int *out)
{
    int wrap = ndim > 0 ? ndim : 1;
    *out = 0;
    if (dim < -wrap || dim >= wrap)
        return weft_set_error(WEFT_ERANGE, "%s: dimension out of range (expected to be in range "
                              "of [%d, %d], but got %lld)", op, -wrap, wrap - 1, (long long)dim);
    *out = (int)(dim < 0 ? dim + wrap : dim);
    return 0;
}

int cpu__index_operand(const char *op, const char *arg, const weft_tensor *index,
                       weft_tensor **out)
{
    *out = NULL;
    int rc = cpu__check_cpu(op, arg, index);
    if (rc < 0)
        return rc;
    weft_dtype dt = weft_tensor_dtype(index);
    if (dt == WEFT_INT64)
        return weft_contiguous(out, index);
    if (dt == WEFT_INT32)
        return weft_to_dtype(out, index, WEFT_INT64);
    return weft_set_error(WEFT_EDTYPE, "%s: '%s' must be an int64 (or int32) tensor of indices, "
                          "got %s", op, arg, weft_dtype_name(dt));
}

int cpu__check_indices(const char *op, const int64_t *idx, int64_t n, int dim, int64_t size)
{
    for (int64_t i = 0; i < n; i++)
        if (idx[i] < 0 || idx[i] >= size)
            return weft_set_error(WEFT_ERANGE, "%s: index %lld is out of range for dimension %d "
                                  "with size %lld", op, (long long)idx[i], dim, (long long)size);
    return 0;
}

int cpu__at_least_1d(const weft_tensor *t, weft_tensor **out)
{
    if (weft_tensor_ndim(t) > 0) {
        *out = weft_tensor_retain(t);
        return 0;
    }
    int64_t one = 1;
    return weft_view(out, t, &one, 1);
}

/* A new contiguous tensor with t's values (and dtype). */
static int clone_of(const weft_tensor *t, weft_tensor **out)
{
    weft_tensor *r = NULL;
    int rc = weft_empty(&r, weft_tensor_sizes(t), weft_tensor_ndim(t), weft_tensor_dtype(t),
                        WEFT_DEVICE_CPU);
    if (rc == 0 && (rc = weft_copy_(r, t)) < 0) {
        weft_tensor_release(r);
        r = NULL;
    }
    *out = r;
    return rc;
}

/* Copies `narrowed` (a view of src along dim) into the same window of dst. */
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

/* ------------------------------------------------------------ clone */

static int clone_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = call->args[0].u.tensor;
    weft_tensor *r;
    int rc = cpu__check_cpu("clone", "self", self);
    if (rc == 0 && (rc = clone_of(self, &r)) == 0)
        cpu__set_ret(call, 0, r);
    return rc;
}

/* ------------------------------------------------------------ cat, stack */

/* PyTorch's legacy rule: a 1-d tensor with no elements is skipped by cat,
 * whatever the other tensors' shapes. */
static bool skipped_by_cat(const weft_tensor *t)
{
    return weft_tensor_ndim(t) == 1 && weft_tensor_numel(t) == 0;
}

static int cat_tensors(const char *op, weft_tensor *const *ts, int n, int64_t dim_arg,
                       weft_tensor **out)
{
    *out = NULL;
    if (n == 0)
        return weft_set_error(WEFT_EINVAL, "%s: expected a non-empty list of tensors", op);
    weft_dtype dtype = weft_tensor_dtype(ts[0]);
    int first = -1, rc;
    for (int i = 0; i < n; i++) {
        char arg[32];
        snprintf(arg, sizeof arg, "tensors[%d]", i);
        if ((rc = cpu__check_cpu(op, arg, ts[i])) < 0)
            return rc;
        dtype = weft_promote_types(dtype, weft_tensor_dtype(ts[i]));
        if (weft_tensor_ndim(ts[i]) == 0)
            return weft_set_error(WEFT_ESHAPE, "%s: zero-dimensional tensor (at position %d) "
                                  "cannot be concatenated", op, i);
        if (first < 0 && !skipped_by_cat(ts[i]))
            first = i;
    }
    if (first < 0) /* nothing but skipped tensors: an empty 1-d result */
        return weft_empty(out, (int64_t[]){0}, 1, dtype, WEFT_DEVICE_CPU);
    const int ndim = weft_tensor_ndim(ts[first]);
    int dim;
    if ((rc = cpu__wrap_dim(op, dim_arg, ndim, &dim)) < 0)
        return rc;
    int64_t sizes[WEFT_MAX_DIMS];
    memcpy(sizes, weft_tensor_sizes(ts[first]), (size_t)ndim * sizeof(int64_t));
    sizes[dim] = 0;
    for (int i = 0; i < n; i++) {
        if (skipped_by_cat(ts[i]))
            continue;
        const int64_t *s = weft_tensor_sizes(ts[i]);
        if (weft_tensor_ndim(ts[i]) != ndim)
            return weft_set_error(WEFT_ESHAPE, "%s: tensors must have the same number of "
                                  "dimensions: got %d and %d (tensor number %d in the list)", op,
                                  ndim, weft_tensor_ndim(ts[i]), i);
        for (int d = 0; d < ndim; d++)
            if (d != dim && s[d] != weft_tensor_sizes(ts[first])[d])
                return weft_set_error(WEFT_ESHAPE, "%s: sizes of tensors must match except in "
                                      "dimension %d; expected size %lld but got size %lld for "
                                      "tensor number %d in the list", op, dim,
                                      (long long)weft_tensor_sizes(ts[first])[d], (long long)s[d], i);
        sizes[dim] += s[dim];
    }
    weft_tensor *r = NULL;
    rc = weft_empty(&r, sizes, ndim, dtype, WEFT_DEVICE_CPU);
    int64_t at = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        if (skipped_by_cat(ts[i]))
            continue;
        int64_t len = weft_tensor_sizes(ts[i])[dim];
        rc = copy_window(r, at, ts[i], 0, dim, len);
        at += len;
    }
    if (rc < 0)
        weft_tensor_release(r);
    else
        *out = r;
    return rc;
}

static int cat_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor *r;
    int rc = cat_tensors("cat", call->args[0].u.tensors, call->args[0].len, call->args[1].u.i, &r);
    if (rc == 0)
        cpu__set_ret(call, 0, r);
    return rc;
}

static int stack_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor *const *ts = call->args[0].u.tensors;
    const int n = call->args[0].len;
    if (n == 0)
        return weft_set_error(WEFT_EINVAL, "stack: expected a non-empty list of tensors");
    const int ndim = weft_tensor_ndim(ts[0]);
    char a[128], b[128];
    for (int i = 1; i < n; i++)
        if (weft_tensor_ndim(ts[i]) != ndim ||
            memcmp(weft_tensor_sizes(ts[i]), weft_tensor_sizes(ts[0]), (size_t)ndim * sizeof(int64_t)))
            return weft_set_error(WEFT_ESHAPE, "stack: expects each tensor to be equal size, but "
                                  "got %s at entry 0 and %s at entry %d",
                                  weft_format_shape(a, sizeof a, weft_tensor_sizes(ts[0]), ndim),
                                  weft_format_shape(b, sizeof b, weft_tensor_sizes(ts[i]),
                                                 weft_tensor_ndim(ts[i])), i);
    int dim;
    int rc = cpu__wrap_dim("stack", call->args[1].u.i, ndim + 1, &dim);
    if (rc < 0)
        return rc;
    weft_tensor **views = calloc((size_t)n, sizeof *views);
    if (!views)
        return weft_set_error(WEFT_ENOMEM, "stack: out of memory");
    for (int i = 0; rc == 0 && i < n; i++)
        rc = weft_unsqueeze(&views[i], ts[i], dim);
    weft_tensor *r = NULL;
    if (rc == 0 && (rc = cat_tensors("stack", views, n, dim, &r)) == 0)
        cpu__set_ret(call, 0, r);
    for (int i = 0; i < n; i++)
        weft_tensor_release(views[i]);
    free(views);
    return rc;
}

/* ------------------------------------------------------------ flip */

/* Copies the elements of `sizes`, read from src with byte strides that may
 * be negative, into the contiguous dst. */
static void copy_strided_bytes(char *dst, const char *src, const int64_t *sizes,
                               const int64_t *byte_strides, int ndim, size_t es)
{
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++)
        numel *= sizes[d];
    if (numel == 0)
        return;
    cpu_walk w;
    cpu_walk_init(&w, sizes, ndim, 1);
    memcpy(w.strides[0], byte_strides, (size_t)ndim * sizeof(int64_t));
    for (int64_t i = 0; i < numel; i++, cpu_walk_next(&w))
        memcpy(dst + i * (int64_t)es, src + w.offset[0], es);
}

static int flip_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = call->args[0].u.tensor;
    const weft_value *dims = &call->args[1];
    const int ndim = weft_tensor_ndim(self);
    bool flipped[WEFT_MAX_DIMS] = {false};
    int rc = cpu__check_cpu("flip", "self", self);
    for (int i = 0; rc == 0 && i < dims->len; i++) {
        int d;
        if ((rc = cpu__wrap_dim("flip", dims->u.ints[i], ndim, &d)) < 0)
            break;
        if (flipped[d])
            rc = weft_set_error(WEFT_EINVAL, "flip: dim %d appears multiple times in the list "
                                "of dims", d);
        flipped[d] = true;
    }
    weft_tensor *r = NULL;
    if (rc == 0)
        rc = weft_empty(&r, weft_tensor_sizes(self), ndim, weft_tensor_dtype(self), WEFT_DEVICE_CPU);
    if (rc < 0)
        return rc;
    const size_t es = weft_dtype_size(weft_tensor_dtype(self));
    const int64_t *sizes = weft_tensor_sizes(self), *strides = weft_tensor_strides(self);
    int64_t byte_strides[WEFT_MAX_DIMS];
    const char *start = weft_tensor_data_ptr(self);
    bool empty = weft_tensor_numel(self) == 0;
    for (int d = 0; d < ndim; d++) {
        byte_strides[d] = strides[d] * (int64_t)es;
        if (flipped[d] && !empty) { /* start at the last element, walk backwards */
            start += (sizes[d] - 1) * byte_strides[d];
            byte_strides[d] = -byte_strides[d];
        }
    }
    copy_strided_bytes(weft_tensor_data_ptr(r), start, sizes, byte_strides, ndim, es);
    cpu__set_ret(call, 0, r);
    return 0;
}

/* ------------------------------------------------------------ roll */

/* src rolled by shift along dim into a new tensor: two window copies. */
static int roll_one(const weft_tensor *src, int dim, int64_t shift, weft_tensor **out)
{
    weft_tensor *r = NULL;
    int rc = weft_empty(&r, weft_tensor_sizes(src), weft_tensor_ndim(src), weft_tensor_dtype(src),
                        WEFT_DEVICE_CPU);
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
    const weft_tensor *self = call->args[0].u.tensor;
    const weft_value *shifts = &call->args[1], *dims = &call->args[2];
    const int ndim = weft_tensor_ndim(self);
    int ndims = dims->tag == WEFT_VALUE_INT_LIST ? dims->len : 0;
    int rc = cpu__check_cpu("roll", "self", self);
    if (rc < 0)
        return rc;
    if (ndims == 0) { /* no dims: roll the flattened tensor, then restore the shape */
        if (shifts->len != 1)
            return weft_set_error(WEFT_EINVAL, "roll: without dims, shifts must have one "
                                  "element, got %d", shifts->len);
        int64_t numel = weft_tensor_numel(self);
        weft_tensor *flat = NULL, *rolled = NULL, *r = NULL;
        rc = weft_reshape(&flat, self, &numel, 1);
        if (rc == 0)
            rc = roll_one(flat, 0, shifts->u.ints[0], &rolled);
        if (rc == 0)
            rc = weft_reshape(&r, rolled, weft_tensor_sizes(self), ndim);
        if (rc == 0)
            cpu__set_ret(call, 0, r);
        weft_tensor_release(flat);
        weft_tensor_release(rolled);
        return rc;
    }
    if (shifts->len != ndims)
        return weft_set_error(WEFT_EINVAL, "roll: shifts and dims must align: shifts has %d "
                              "elements, dims %d", shifts->len, ndims);
    weft_tensor *cur = weft_tensor_retain(self);
    for (int i = 0; rc == 0 && i < ndims; i++) {
        int d;
        weft_tensor *next = NULL;
        if ((rc = cpu__wrap_dim("roll", dims->u.ints[i], ndim, &d)) == 0 && ndim == 0)
            rc = weft_set_error(WEFT_ESHAPE, "roll: a 0-d tensor has no dims to roll");
        if (rc == 0 && (rc = roll_one(cur, d, shifts->u.ints[i], &next)) == 0) {
            weft_tensor_release(cur);
            cur = next;
        }
    }
    if (rc == 0)
        cpu__set_ret(call, 0, cur);
    else
        weft_tensor_release(cur);
    return rc;
}

/* ------------------------------------------------------------ repeat */

/* out viewed as [r0, s0, r1, s1, ...] is self viewed as [1, s0, 1, s1, ...]
 * expanded: one copy_. */
static int repeat_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = call->args[0].u.tensor;
    const weft_value *reps = &call->args[1];
    const int ndim = weft_tensor_ndim(self), n = reps->len;
    int rc = cpu__check_cpu("repeat", "self", self);
    if (rc < 0)
        return rc;
    if (n < ndim)
        return weft_set_error(WEFT_EINVAL, "repeat: the number of repeats (%d) can not be smaller "
                              "than the number of dimensions of the tensor (%d)", n, ndim);
    if (2 * n > WEFT_MAX_DIMS)
        return weft_set_error(WEFT_EINVAL, "repeat: at most %d repeats are supported, got %d",
                              WEFT_MAX_DIMS / 2, n);
    int64_t out_sizes[WEFT_MAX_DIMS], pairs[WEFT_MAX_DIMS], ones[WEFT_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        int64_t r = reps->u.ints[i], s = i < n - ndim ? 1 : weft_tensor_sizes(self)[i - (n - ndim)];
        if (r < 0)
            return weft_set_error(WEFT_EINVAL, "repeat: repeats can not be negative, got %lld",
                                  (long long)r);
        if (__builtin_mul_overflow(r, s, &out_sizes[i]))
            return weft_set_error(WEFT_EOVERFLOW, "repeat: dimension %d of the result, %lld times "
                                  "%lld, overflows int64", i, (long long)r, (long long)s);
        pairs[2 * i] = r;
        pairs[2 * i + 1] = s;
        ones[2 * i] = 1;
        ones[2 * i + 1] = s;
    }
    weft_tensor *r = NULL, *r_view = NULL, *s_view = NULL, *s_expanded = NULL;
    rc = weft_empty(&r, out_sizes, n, weft_tensor_dtype(self), WEFT_DEVICE_CPU);
    /* An empty result has nothing to copy (torch returns it at once too);
     * its [r, s] pairs may not even have strides that fit int64, as with
     * a 0 repeat of a dimension of 2^62. */
    if (rc == 0 && weft_tensor_numel(r) == 0) {
        cpu__set_ret(call, 0, r);
        return 0;
    }
    if (rc == 0)
        rc = weft_view(&r_view, r, pairs, 2 * n);
    if (rc == 0)
        rc = weft_reshape(&s_view, self, ones, 2 * n);
    if (rc == 0)
        rc = weft_expand(&s_expanded, s_view, pairs, 2 * n);
    if (rc == 0)
        rc = weft_copy_(r_view, s_expanded);
    if (rc == 0)
        cpu__set_ret(call, 0, r);
    else
        weft_tensor_release(r);
    weft_tensor_release(r_view);
    weft_tensor_release(s_view);
    weft_tensor_release(s_expanded);
    return rc;
}

/* ------------------------------------------------------------ tril, triu */

/* Zeroes, in each of `batches` contiguous rows x cols matrices, what tril
 * (lower) or triu drops.  All-zero bytes are zero in every dtype. */
static void zero_triangle(char *data, int64_t batches, int64_t rows, int64_t cols, size_t es,
                          int64_t diagonal, bool lower)
{
    /* clamping keeps i + diagonal from overflowing and changes nothing */
    if (diagonal > cols + 1)
        diagonal = cols + 1;
    if (diagonal < -rows - 1)
        diagonal = -rows - 1;
    for (int64_t b = 0; b < batches; b++)
        for (int64_t i = 0; i < rows; i++) {
            char *row = data + ((b * rows + i) * cols) * (int64_t)es;
            int64_t edge = i + diagonal; /* tril keeps j <= edge, triu keeps j >= edge */
            int64_t from = lower ? edge + 1 : 0, to = lower ? cols : edge;
            if (from < 0)
                from = 0;
            if (to > cols)
                to = cols;
            if (from < to)
                memset(row + from * (int64_t)es, 0, (size_t)(to - from) * es);
        }
}

typedef struct triangle_form {
    bool lower, inplace;
} triangle_form;

static int triangle_kernel(weft_call *call, void *ctx)
{
    const triangle_form *form = ctx;
    const char *op = weft_op_name(call->op);
    weft_tensor *self = call->args[0].u.tensor;
    const int ndim = weft_tensor_ndim(self);
    int rc = cpu__check_cpu(op, "self", self);
    if (rc < 0)
        return rc;
    if (ndim < 2)
        return weft_set_error(WEFT_ESHAPE, "%s: the input must have at least 2 dimensions, got "
                              "%d", op, ndim);
    weft_tensor *work = NULL;
    if (form->inplace && weft_tensor_is_contiguous(self))
        work = weft_tensor_retain(self);
    else if ((rc = clone_of(self, &work)) < 0)
        return rc;
    int64_t rows = weft_tensor_sizes(self)[ndim - 2], cols = weft_tensor_sizes(self)[ndim - 1];
    int64_t matrices = rows > 0 && cols > 0 ? weft_tensor_numel(self) / (rows * cols) : 0;
    zero_triangle(weft_tensor_data_ptr(work), matrices, rows, cols,
                  weft_dtype_size(weft_tensor_dtype(self)), call->args[1].u.i, form->lower);
    if (!form->inplace) {
        cpu__set_ret(call, 0, work);
        return 0;
    }
    if (work != self)
        rc = weft_copy_(self, work);
    weft_tensor_release(work);
    return rc;
}

/* ------------------------------------------------------------ pad */

typedef enum pad_mode { PAD_CONSTANT, PAD_REFLECT, PAD_REPLICATE } pad_mode;

/* The source index of output position o along a dim of size n padded by
 * `left` (reflect: mirrored without repeating the edge; replicate: the edge
 * repeated). */
static int64_t pad_source(pad_mode mode, int64_t o, int64_t left, int64_t n)
{
    int64_t i = o - left;
    if (mode == PAD_REPLICATE)
        return i < 0 ? 0 : i >= n ? n - 1 : i;
    if (i < 0)
        i = -i;
    if (i >= n)
        i = 2 * (n - 1) - i;
    return i;
}

/* Reflect and replicate: one index_select per padded dim. */
static int pad_by_index(const char *op, const weft_tensor *self, const int64_t *pads, int npairs,
                        pad_mode mode, weft_tensor **out)
{
    const int ndim = weft_tensor_ndim(self);
    weft_tensor *cur = weft_tensor_retain(self);
    int rc = 0;
    for (int p = 0; rc == 0 && p < npairs; p++) {
        int d = ndim - 1 - p;
        int64_t left = pads[2 * p], right = pads[2 * p + 1], n = weft_tensor_sizes(cur)[d];
        if (left < 0 || right < 0 || (mode == PAD_REFLECT && (left >= n || right >= n)) || n == 0) {
            rc = weft_set_error(WEFT_EINVAL, "%s: %s padding (%lld, %lld) of dimension %d needs "
                                "non-negative pads%s, and the size is %lld", op,
                                mode == PAD_REFLECT ? "reflect" : "replicate", (long long)left,
                                (long long)right, d,
                                mode == PAD_REFLECT ? " smaller than the size" : " and a non-empty dim",
                                (long long)n);
            break;
        }
        int64_t len = n + left + right;
        weft_tensor *index = NULL, *next = NULL;
        rc = weft_empty(&index, &len, 1, WEFT_INT64, WEFT_DEVICE_CPU);
        if (rc == 0) {
            int64_t *ix = weft_tensor_data_ptr(index);
            for (int64_t o = 0; o < len; o++)
                ix[o] = pad_source(mode, o, left, n);
            rc = cpu__index_select(op, cur, d, index, &next);
        }
        weft_tensor_release(index);
        if (rc == 0) {
            weft_tensor_release(cur);
            cur = next;
        }
    }
    if (rc == 0 && cur == self) /* no pairs: still a new tensor */
        rc = clone_of(self, out);
    else if (rc == 0)
        *out = cur, cur = NULL;
    weft_tensor_release(cur);
    return rc;
}

static int pad_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "pad";
    const weft_tensor *self = call->args[0].u.tensor;
    const weft_value *pad = &call->args[1];
    const char *mode_name = call->args[2].u.string;
    const bool has_value = call->args[3].tag != WEFT_VALUE_NONE;
    const int ndim = weft_tensor_ndim(self), npairs = pad->len / 2;
    int rc = cpu__check_cpu(op, "self", self);
    if (rc < 0)
        return rc;
    pad_mode mode;
    if (!strcmp(mode_name, "constant"))
        mode = PAD_CONSTANT;
    else if (!strcmp(mode_name, "reflect"))
        mode = PAD_REFLECT;
    else if (!strcmp(mode_name, "replicate"))
        mode = PAD_REPLICATE;
    else
        return weft_set_error(WEFT_EINVAL, "%s: mode must be 'constant', 'reflect' or "
                              "'replicate', got '%s'", op, mode_name);
    if (pad->len % 2)
        return weft_set_error(WEFT_EINVAL, "%s: the padding length must be divisible by 2, got "
                              "%d", op, pad->len);
    if (npairs > ndim)
        return weft_set_error(WEFT_EINVAL, "%s: %d padding pairs are too many for a tensor of %d "
                              "dimensions", op, npairs, ndim);
    if (mode != PAD_CONSTANT && has_value)
        return weft_set_error(WEFT_EINVAL, "%s: mode '%s' takes no value argument", op, mode_name);
    weft_tensor *r = NULL;
    if (mode != PAD_CONSTANT) {
        if ((rc = pad_by_index(op, self, pad->u.ints, npairs, mode, &r)) == 0)
            cpu__set_ret(call, 0, r);
        return rc;
    }
    int64_t sizes[WEFT_MAX_DIMS];
    memcpy(sizes, weft_tensor_sizes(self), (size_t)ndim * sizeof(int64_t));
    for (int p = 0; p < npairs; p++) {
        int d = ndim - 1 - p;
        int64_t left = pad->u.ints[2 * p], right = pad->u.ints[2 * p + 1], size;
        if (__builtin_add_overflow(sizes[d], left, &size) ||
            __builtin_add_overflow(size, right, &size) || size < 0)
            return weft_set_error(WEFT_ESHAPE, "%s: the input size %lld of dimension %d padded "
                                  "by (%lld, %lld) gives a negative or overflowing size", op,
                                  (long long)sizes[d], d, (long long)left, (long long)right);
        sizes[d] = size;
    }
    rc = weft_empty(&r, sizes, ndim, weft_tensor_dtype(self), WEFT_DEVICE_CPU);
    if (rc == 0)
        rc = weft_fill_(r, has_value ? call->args[3].u.d : 0.0);
    /* the window of r that self (cropped by negative pads) lands in */
    weft_tensor *dst = r ? weft_tensor_retain(r) : NULL, *src = weft_tensor_retain(self);
    bool empty = false;
    for (int p = 0; rc == 0 && p < npairs; p++) {
        int d = ndim - 1 - p;
        int64_t left = pad->u.ints[2 * p], right = pad->u.ints[2 * p + 1];
        int64_t n = weft_tensor_sizes(self)[d];
        /* a crop past the whole extent crops it all (and INT64_MIN has no
         * negation in int64) */
        int64_t crop_left = left < 0 ? (left <= -n ? n : -left) : 0;
        int64_t crop_right = right < 0 ? (right <= -n ? n : -right) : 0;
        int64_t len = n - crop_left - crop_right;
        if (len <= 0) {
            empty = true;
            break;
        }
        weft_tensor *a = NULL, *b = NULL;
        rc = weft_narrow(&a, dst, d, left > 0 ? left : 0, len);
        if (rc == 0)
            rc = weft_narrow(&b, src, d, crop_left, len);
        weft_tensor_release(dst);
        weft_tensor_release(src);
        dst = a;
        src = b;
    }
    if (rc == 0 && !empty)
        rc = weft_copy_(dst, src);
    weft_tensor_release(dst);
    weft_tensor_release(src);
    if (rc == 0)
        cpu__set_ret(call, 0, r);
    else
        weft_tensor_release(r);
    return rc;
}

/* ------------------------------------------------------------ registration */

static const triangle_form tril_form = {true, false}, tril_inplace = {true, true};
static const triangle_form triu_form = {false, false}, triu_inplace = {false, true};

static const weft_kernel_entry shape_entries[] = {
    {"clone", clone_kernel, NULL},
    {"cat", cat_kernel, NULL},
    {"stack", stack_kernel, NULL},
    {"flip", flip_kernel, NULL},
    {"roll", roll_kernel, NULL},
    {"repeat", repeat_kernel, NULL},
    {"tril", triangle_kernel, &tril_form},
    {"tril_", triangle_kernel, &tril_inplace},
    {"triu", triangle_kernel, &triu_form},
    {"triu_", triangle_kernel, &triu_inplace},
    {"pad", pad_kernel, NULL},
};

int cpu__register_shape(weft_registrar *reg)
{
    return weft_register_kernel_table(reg, WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, shape_entries, sizeof shape_entries / sizeof *shape_entries);
}
