/* backends/cuda/kernels.c — the boxed kernels of the CUDA plugin: argument
 * checks, output allocation, broadcasting geometry, then a launcher from
 * elementwise.cu.  One kernel function per operator family serves the
 * functional, in-place and out= forms; the table at the end says which
 * operator gets which. */
#include <stdio.h>
#include <string.h>

#include <cuda_runtime.h>

#include "cuda.h"

enum form { FUNCTIONAL, INPLACE, OUT };

typedef struct {
    int op;
    int form;
    bool has_alpha;
} entry_ctx;

static int check_device(const char *op, const weft_tensor *t, int index)
{
    weft_device d = weft_tensor_device(t);
    if (d.type == WEFT_DEVICE_TYPE_CUDA && d.index == index)
        return 0;
    char name[64];
    weft_device_to_string(d, name, sizeof name);
    return weft_set_error(WEFT_EDEVICE, "%s: expected all tensors on cuda:%d, got one on %s", op,
                          index, name);
}

static int check_dtype(const char *op, weft_dtype dtype)
{
    if (dtype == WEFT_FLOAT32 || dtype == WEFT_FLOAT64)
        return 0;
    return weft_set_error(WEFT_EDTYPE, "%s: the CUDA kernel supports float32 and float64, not %s",
                          op, weft_dtype_name(dtype));
}

/* Strides of operand t (in elements) seen in the output's shape: aligned to
 * the right, 0 where t is broadcast. */
static void broadcast_strides(int64_t *strides, const weft_tensor *t, const int64_t *sizes,
                              int ndim)
{
    int tnd = weft_tensor_ndim(t);
    for (int d = 0; d < ndim; d++) {
        int td = d - (ndim - tnd);
        strides[d] = td < 0 || (weft_tensor_size(t, td) == 1 && sizes[d] != 1)
                         ? 0
                         : weft_tensor_stride(t, td);
    }
}

static int geometry_of(wfc_geometry *g, const char *op, const weft_tensor *out,
                       const weft_tensor *a, const weft_tensor *b)
{
    memset(g, 0, sizeof *g);
    int nd = weft_tensor_ndim(out);
    if (nd > WFC_MAX_DIMS)
        return weft_set_error(WEFT_ENOTSUP, "%s: the CUDA kernel indexes at most %d dimensions, "
                                            "got %d", op, WFC_MAX_DIMS, nd);
    g->ndim = nd;
    for (int d = 0; d < nd; d++)
        g->sizes[d] = weft_tensor_size(out, d);
    const weft_tensor *ops[3] = {out, a, b};
    for (int k = 0; k < 3; k++)
        if (ops[k])
            broadcast_strides(g->strides[k], ops[k], g->sizes, nd);
    return 0;
}

/* t in dtype, as a new reference (a conversion on the device when needed). */
static int as_dtype(weft_tensor **out, const weft_tensor *t, weft_dtype dtype)
{
    if (weft_tensor_dtype(t) == dtype) {
        *out = weft_tensor_retain((weft_tensor *)t);
        return 0;
    }
    return weft_to_dtype(out, t, dtype);
}

static char *data_at(const weft_tensor *t)
{
    return weft_tensor_data_ptr(t);
}

/* The destination of a functional or out= call: a new tensor, or out after
 * checking (or, when it is empty, resizing) its shape. */
static int destination(weft_tensor **dest, const char *op, int form, weft_tensor *given,
                       const int64_t *sizes, int nd, weft_dtype dtype, weft_device device)
{
    if (form == FUNCTIONAL)
        return weft_empty(dest, sizes, nd, dtype, device);
    if (weft_tensor_numel(given) == 0) {
        int rc = weft_tensor_resize(given, sizes, nd);
        if (rc < 0)
            return rc;
    }
    bool same = weft_tensor_ndim(given) == nd;
    for (int d = 0; same && d < nd; d++)
        same = weft_tensor_size(given, d) == sizes[d];
    if (!same)
        return weft_set_error(WEFT_ESHAPE, "%s: the output's shape does not match the broadcast "
                                           "shape of the inputs", op);
    if (weft_tensor_dtype(given) != dtype)
        return weft_set_error(WEFT_EDTYPE, "%s: the output is %s but the result is %s", op,
                              weft_dtype_name(weft_tensor_dtype(given)), weft_dtype_name(dtype));
    *dest = weft_tensor_retain(given);
    return 0;
}

static int binary_kernel(weft_call *call, void *ctx)
{
    const entry_ctx *e = ctx;
    const char *op = weft_op_name(call->op);
    int first = e->form == OUT ? 1 : 0;
    const weft_tensor *self = call->args[first].u.tensor, *other = call->args[first + 1].u.tensor;
    double alpha = e->has_alpha ? weft_arg_double(call, first + 2) : 1.0;
    int index = weft_tensor_device(self).index;
    int rc = check_device(op, other, index);
    if (rc == 0 && e->form == OUT)
        rc = check_device(op, call->args[0].u.tensor, index);
    weft_dtype dtype = e->form == INPLACE ? weft_tensor_dtype(self)
                                          : weft_promote_types(weft_tensor_dtype(self),
                                                               weft_tensor_dtype(other));
    if (rc == 0)
        rc = check_dtype(op, dtype);
    int64_t sizes[WEFT_MAX_DIMS];
    int nd = 0;
    if (rc == 0)
        rc = weft_broadcast_shapes(sizes, &nd, weft_tensor_sizes(self), weft_tensor_ndim(self),
                                   weft_tensor_sizes(other), weft_tensor_ndim(other));
    if (rc == 0 && e->form == INPLACE && nd != weft_tensor_ndim(self))
        rc = weft_set_error(WEFT_ESHAPE, "%s: other does not broadcast to self's shape", op);
    weft_tensor *a = NULL, *b = NULL, *dest = NULL;
    if (rc == 0)
        rc = as_dtype(&a, self, dtype);
    if (rc == 0)
        rc = as_dtype(&b, other, dtype);
    if (rc == 0)
        rc = e->form == INPLACE ? (dest = weft_tensor_retain((weft_tensor *)self), 0)
                                : destination(&dest, op, e->form, call->args[0].u.tensor, sizes,
                                              nd, dtype, weft_tensor_device(self));
    wfc_geometry g;
    if (rc == 0)
        rc = geometry_of(&g, op, dest, a, b);
    if (rc == 0 && cudaSetDevice(index) != cudaSuccess)
        rc = weft_set_error(WEFT_EDEVICE, "%s: cannot select cuda:%d", op, index);
    if (rc == 0)
        rc = wfc_binary(wfc_current_stream(index), e->op, dtype, data_at(dest), data_at(a), data_at(b), alpha,
                        weft_tensor_numel(dest), &g);
    weft_tensor_release(a);
    weft_tensor_release(b);
    if (rc == 0 && e->form == FUNCTIONAL)
        return weft_return_tensor(call, 0, dest);
    weft_tensor_release(dest);
    return rc;
}

static int unary_kernel(weft_call *call, void *ctx)
{
    const entry_ctx *e = ctx;
    const char *op = weft_op_name(call->op);
    const weft_tensor *self = call->args[e->form == OUT ? 1 : 0].u.tensor;
    int index = weft_tensor_device(self).index;
    weft_dtype dtype = weft_tensor_dtype(self);
    int rc = check_dtype(op, dtype);
    if (rc == 0 && e->form == OUT)
        rc = check_device(op, call->args[0].u.tensor, index);
    weft_tensor *dest = NULL;
    if (rc == 0)
        rc = e->form == INPLACE
                 ? (dest = weft_tensor_retain((weft_tensor *)self), 0)
                 : destination(&dest, op, e->form, call->args[0].u.tensor, weft_tensor_sizes(self),
                               weft_tensor_ndim(self), dtype, weft_tensor_device(self));
    wfc_geometry g;
    if (rc == 0)
        rc = geometry_of(&g, op, dest, self, NULL);
    if (rc == 0 && cudaSetDevice(index) != cudaSuccess)
        rc = weft_set_error(WEFT_EDEVICE, "%s: cannot select cuda:%d", op, index);
    if (rc == 0)
        rc = wfc_unary(wfc_current_stream(index), e->op, dtype, data_at(dest), data_at(self), weft_tensor_numel(dest), &g);
    if (rc == 0 && e->form == FUNCTIONAL)
        return weft_return_tensor(call, 0, dest);
    weft_tensor_release(dest);
    return rc;
}

static int fill_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor *self = call->args[0].u.tensor;
    double value = weft_arg_double(call, 1);
    int rc = check_dtype("fill_", weft_tensor_dtype(self));
    wfc_geometry g;
    if (rc == 0)
        rc = geometry_of(&g, "fill_", self, NULL, NULL);
    if (rc == 0 && cudaSetDevice(weft_tensor_device(self).index) != cudaSuccess)
        rc = weft_set_error(WEFT_EDEVICE, "fill_: cannot select the device");
    if (rc == 0)
        rc = wfc_fill(wfc_current_stream(weft_tensor_device(self).index), weft_tensor_dtype(self), data_at(self), value, weft_tensor_numel(self), &g);
    return rc;
}

#define BIN(name, opc, alpha)                                                            \
    {#name, binary_kernel, {opc, FUNCTIONAL, alpha}},                                    \
        {#name "_", binary_kernel, {opc, INPLACE, alpha}},                               \
        {#name "_out", binary_kernel, {opc, OUT, alpha}}
#define UN(name, opc)                                                                    \
    {#name, unary_kernel, {opc, FUNCTIONAL, false}},                                     \
        {#name "_", unary_kernel, {opc, INPLACE, false}},                                \
        {#name "_out", unary_kernel, {opc, OUT, false}}

static const struct {
    const char *op;
    weft_kernel_fn fn;
    entry_ctx ctx;
} table[] = {
    BIN(add, WFC_ADD, true), BIN(sub, WFC_SUB, true), BIN(mul, WFC_MUL, false),
    BIN(div, WFC_DIV, false), UN(neg, WFC_NEG),       UN(exp, WFC_EXP),
    UN(relu, WFC_RELU),       UN(sigmoid, WFC_SIGMOID), UN(tanh, WFC_TANH),
    {"fill_", fill_kernel, {0, INPLACE, false}},
};

int wfc_register_kernels(weft_registrar *reg)
{
    for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
        int rc = weft_register_kernel(reg, table[i].op, WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CUDA,
                                      table[i].fn, (void *)&table[i].ctx, NULL);
        if (rc < 0)
            return rc;
    }
    return 0;
}
