/* backends/cuda/upsample.c — the boxed upsample_nearest2d,
 * upsample_bilinear2d and their backward operators: arguments checked with
 * the CPU backend's messages, the axis tables computed on the host by
 * plan.c (the CPU's formulas in the CPU's precision) and copied to the
 * device in one transfer each, the planes run by upsample.cu.  Dtypes
 * without a kernel (complex128 for nearest, integers for the others) go
 * to the CPU fallback, and so its error. */
#include <stdlib.h>
#include <string.h>

#include "gpu.h"

#include "cuda.h"

typedef struct upsample_form {
    bool linear, backward;
} upsample_form;

static const double *scale_arg(const weft_call *call, int i)
{
    return call->args[i].tag == WEFT_VALUE_DOUBLE ? &call->args[i].u.d : NULL;
}

/* A device copy of n host values of dtype. */
static int to_device(weft_tensor **out, const weft_tensor *like, const void *host, int64_t n,
                     weft_dtype dtype)
{
    weft_tensor *h = NULL;
    int rc = weft_empty(&h, &n, 1, dtype, WEFT_DEVICE_CPU);
    if (rc == 0) {
        memcpy(weft_tensor_data_ptr(h), host, (size_t)n * weft_dtype_size(dtype));
        rc = weft_to_device(out, h, weft_tensor_device(like));
    }
    weft_tensor_release(h);
    return rc;
}

/* The axis tables of u on the device: ints (kept alive by *ints) and
 * weights (*weights); u's pointers point into them. */
static int tables(wfc_upsample *u, weft_tensor **ints, weft_tensor **weights, const char *op,
                  const weft_tensor *like, bool align, const double *scales[2], bool wide)
{
    const int64_t oh = u->oh, ow = u->ow, ih = u->ih, iw = u->iw;
    int64_t ni = 2 * (oh + ow) + 2 * (ih + iw), nw = 2 * (oh + ow);
    int64_t *iv = malloc((size_t)ni * sizeof *iv);
    double *wv = malloc((size_t)nw * sizeof *wv);
    int rc = 0;
    if (!iv || !wv)
        rc = weft_set_error(WEFT_ENOMEM, "%s: out of memory for the index tables", op);
    /* ints: h0 h1 w0 w1 hfirst hend wfirst wend; weights: hl0 hl1 wl0 wl1 */
    int64_t *h0 = iv, *h1 = h0 + oh, *w0 = h1 + oh, *w1 = w0 + ow, *hf = w1 + ow, *he = hf + ih,
            *wf = he + ih, *we = wf + iw;
    if (rc == 0) {
        wfc_plan_upsample_axis(ih, oh, u->linear, align, scales[0], wide, h0, h1, wv, wv + oh);
        wfc_plan_upsample_axis(iw, ow, u->linear, align, scales[1], wide, w0, w1, wv + 2 * oh,
                               wv + 2 * oh + ow);
        if (wfc_plan_upsample_sources(h0, oh, ih, u->linear, hf, he) < 0 ||
            wfc_plan_upsample_sources(w0, ow, iw, u->linear, wf, we) < 0)
            rc = weft_set_error(WEFT_EINVAL, "%s: the source indices decrease", op);
    }
    if (rc == 0)
        rc = to_device(ints, like, iv, ni, WEFT_INT64);
    if (rc == 0)
        rc = to_device(weights, like, wv, nw, WEFT_FLOAT64);
    free(iv);
    free(wv);
    if (rc < 0)
        return rc;
    const int64_t *di = weft_tensor_data_ptr(*ints);
    const double *dw = weft_tensor_data_ptr(*weights);
    u->h0 = di, u->h1 = di + oh, u->w0 = u->h1 + oh, u->w1 = u->w0 + ow;
    u->hfirst = u->w1 + ow, u->hend = u->hfirst + ih, u->wfirst = u->hend + ih,
    u->wend = u->wfirst + iw;
    u->hl0 = dw, u->hl1 = dw + oh, u->wl0 = dw + 2 * oh, u->wl1 = u->wl0 + ow;
    return 0;
}

/* upsample_nearest2d(self, output_size, scales_h?, scales_w?),
 * upsample_bilinear2d(self, output_size, align_corners, scales_h?,
 * scales_w?) and their backward operators, which take input_size
 * [N, C, H, W] after output_size. */
static int upsample_kernel(weft_call *call, void *ctx)
{
    const upsample_form *form = ctx;
    const char *op = weft_op_name(call->op);
    const weft_tensor *t = call->args[0].u.tensor;
    weft_dtype dt = weft_tensor_dtype(t);
    if (!wfc_upsample_supported(form->backward, form->linear, dt))
        return weft_call_cpu_fallback(call);
    int next = form->backward ? 3 : 2;
    bool align = form->linear ? weft_arg_bool(call, next) : false;
    const double *scales[2] = {scale_arg(call, next + form->linear),
                               scale_arg(call, next + form->linear + 1)};
    char b1[128], b2[128];
    int nout = 0, nin = 0;
    const int64_t *out_size = weft_arg_ints(call, 1, &nout);
    if (nout != 2 || out_size[0] < 1 || out_size[1] < 1)
        return weft_set_error(WEFT_EINVAL, "%s: output_size must be two positive sizes, got %s",
                              op, weft_format_shape(b1, sizeof b1, out_size, nout));
    int64_t in_size[4];
    if (form->backward) {
        const int64_t *given = weft_arg_ints(call, 2, &nin);
        if (nin != 4)
            return weft_set_error(WEFT_EINVAL, "%s: input_size must have 4 elements [N, C, H, "
                                  "W], got %s", op, weft_format_shape(b1, sizeof b1, given, nin));
        memcpy(in_size, given, sizeof in_size);
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
    const int64_t y_size[4] = {in_size[0], in_size[1], out_size[0], out_size[1]};
    if (form->backward && (weft_tensor_ndim(t) != 4 ||
                           memcmp(weft_tensor_sizes(t), y_size, sizeof y_size) != 0))
        return weft_set_error(WEFT_ESHAPE, "%s: grad_output of shape %s, expected %s", op,
                              weft_format_shape(b1, sizeof b1, weft_tensor_sizes(t),
                                             weft_tensor_ndim(t)),
                              weft_format_shape(b2, sizeof b2, y_size, 4));
    wfc_upsample u = {.planes = in_size[0] * in_size[1], .ih = in_size[2], .iw = in_size[3],
                      .oh = out_size[0], .ow = out_size[1], .linear = form->linear};
    weft_tensor *src = NULL, *dest = NULL, *ints = NULL, *weights = NULL;
    int index = weft_tensor_device(t).index;
    int rc = weft_contiguous(&src, t);
    if (rc == 0)
        rc = weft_new_output(&dest, t, form->backward ? in_size : y_size, 4, dt);
    if (rc == 0 && cudaSetDevice(index) != cudaSuccess)
        rc = weft_set_error(WEFT_EDEVICE, "%s: cannot select " WFC_BACKEND ":%d", op, index);
    if (rc == 0 && u.planes > 0)
        rc = tables(&u, &ints, &weights, op, t, align, scales, dt == WEFT_FLOAT64);
    if (rc == 0 && u.planes > 0)
        rc = form->backward
                 ? wfc_upsample_backward(wfc_current_stream(index), dt, weft_tensor_data_ptr(dest),
                                         weft_tensor_data_ptr(src), &u)
                 : wfc_upsample_forward(wfc_current_stream(index), dt, weft_tensor_data_ptr(dest),
                                        weft_tensor_data_ptr(src), &u);
    /* the tables go back to the stream's pool, reused only by later work */
    weft_tensor_release(ints);
    weft_tensor_release(weights);
    weft_tensor_release(src);
    if (rc < 0) {
        weft_tensor_release(dest);
        return rc;
    }
    return weft_return_tensor(call, 0, dest);
}

static const upsample_form nearest = {false, false}, nearest_backward = {false, true};
static const upsample_form bilinear = {true, false}, bilinear_backward = {true, true};

int wfc_register_upsample(weft_registrar *reg)
{
    static const weft_kernel_entry entries[] = {
        {"upsample_nearest2d", upsample_kernel, &nearest},
        {"upsample_nearest2d_backward", upsample_kernel, &nearest_backward},
        {"upsample_bilinear2d", upsample_kernel, &bilinear},
        {"upsample_bilinear2d_backward", upsample_kernel, &bilinear_backward}};
    return weft_register_kernel_table(reg, WEFT_KEY_DENSE, WFC_DEVICE_TYPE, entries, sizeof entries / sizeof *entries);
}
