/* tools/train_quantize.c — weft-train --quantize: post-training quantization
 * of the trained MLP or CNN (issue 17).  Calibrates min-max observers on
 * training images (the float model run layer by layer, the nn library's
 * observers), quantizes the
 * weights per output channel (qint8, symmetric) and the activations per
 * tensor (quint8, with torch's reduce_range: 0..127, so that AVX2 without
 * VNNI cannot saturate oneDNN's u8 x s8 pairs), then runs the int8 model:
 * quantized linear / conv2d with fused relu and the calibrated output
 * parameters, max_pool2d and flatten on the quantized tensors, and the
 * logits dequantized.  Public API only, through <weft/quantized.h>. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <weft/nn.h>
#include <weft/ops.h>
#include <weft/plugin.h> /* weft_set_error */
#include <weft/quantized.h>
#include <weft/weft.h>

#include "train_quantize.h"

enum { MAX_LAYERS = 3 };

typedef struct qparams {
    double scale;
    int64_t zero_point;
} qparams;

struct wt_int8_model {
    bool cnn;
    int nlayers;
    weft_tensor *weight[MAX_LAYERS], *bias[MAX_LAYERS]; /* int8 weights, float biases */
    weft_tensor *first_weight; /* layer 0's float weight (wt_int8_pixel_input) */
    qparams input, out[MAX_LAYERS];
    /* the CNN's pooled features (C, H, W) before its linear layer, whose
     * int8 weight takes them in (H, W, C) order (see wt_int8_forward) */
    int64_t feat[3];
};

/* The parameters the nn library's min-max observer (quint8, affine,
 * reduce_range) gives for t. */
static int range_of(qparams *q, const weft_tensor *t)
{
    weft_observer_options opt = {.struct_size = sizeof opt, .reduce_range = true};
    weft_observer *o = NULL;
    weft_tensor *s = NULL, *z = NULL;
    double zp = 0;
    int rc = weft_observer_create(&o, &opt);
    if (rc == 0)
        rc = weft_observer_observe(o, t);
    if (rc == 0)
        rc = weft_observer_qparams(o, &s, &z);
    if (rc == 0 && (rc = weft_tensor_item(s, &q->scale)) == 0 && (rc = weft_tensor_item(z, &zp)) == 0)
        q->zero_point = (int64_t)zp;
    weft_tensor_release(s);
    weft_tensor_release(z);
    weft_observer_destroy(o);
    return rc;
}

/* w quantized per output channel (dimension 0), symmetric qint8. */
/* w per output channel, symmetric qint8: |q| <= half_range + 0.5 */
static int quantize_weight(weft_tensor **out, const weft_tensor *w, double half_range)
{
    int64_t oc = weft_tensor_size(w, 0);
    weft_tensor *flat = NULL, *amax = NULL, *abs_ = NULL, *scales = NULL, *zps = NULL;
    int64_t dim = 1;
    int rc = weft_reshape(&flat, w, (int64_t[]){oc, -1}, 2);
    if (rc == 0)
        rc = weft_abs(&abs_, flat);
    if (rc == 0)
        rc = weft_amax(&amax, abs_, &dim, 1, false);
    if (rc == 0)
        rc = weft_to_dtype(&scales, amax, WEFT_FLOAT64);
    if (rc == 0) {
        double *s = weft_tensor_data_ptr(scales);
        for (int64_t c = 0; c < oc; c++) /* torch: max |w| / ((127 - -128) / 2) */
            s[c] = fmax(s[c] / half_range, 1.1920928955078125e-07);
        rc = weft_zeros(&zps, &oc, 1, WEFT_INT64, WEFT_DEVICE_CPU);
    }
    if (rc == 0)
        rc = weft_quantize_per_channel(out, w, scales, zps, 0, WEFT_INT8);
    weft_tensor *all[] = {flat, amax, abs_, scales, zps};
    for (int i = 0; i < 5; i++)
        weft_tensor_release(all[i]);
    return rc;
}

static const int64_t pad1[2] = {1, 1}, one[2] = {1, 1}, two[2] = {2, 2}, zero[2] = {0, 0};

/* The float model's activations at the quantization points, for
 * calibration: layer i's output after its relu. */
static int float_layer(weft_tensor **out, bool cnn, int i, weft_tensor *const *p, weft_tensor *x)
{
    weft_tensor *y = NULL, *r = NULL;
    int rc;
    if (cnn && i < 2)
        rc = weft_conv2d(&y, x, p[2 * i], p[2 * i + 1], one, 2, pad1, 2, one, 2, 1);
    else
        rc = weft_linear(&y, x, p[2 * i], p[2 * i + 1]);
    bool relu = cnn ? i < 2 : i == 0;
    if (rc == 0 && relu && (rc = weft_relu(&r, y)) == 0) {
        weft_tensor_release(y);
        y = r;
    }
    *out = y;
    return rc;
}

/* What comes between layer i and i + 1 (the CNN's pooling and flatten). */
static int float_between(weft_tensor **out, bool cnn, int i, weft_tensor *y)
{
    if (!cnn || i >= 2)
        return *out = weft_tensor_retain(y), 0;
    weft_tensor *p = NULL;
    int rc = weft_max_pool2d(&p, y, two, 2, two, 2, zero, 2, one, 2, false);
    if (rc == 0 && i == 1) {
        rc = weft_flatten(out, p, 1, -1);
        weft_tensor_release(p);
        return rc;
    }
    *out = p;
    return rc;
}

static int as_images(weft_tensor **out, bool cnn, weft_tensor *x)
{
    if (!cnn)
        return *out = weft_tensor_retain(x), 0;
    return weft_view(out, x, (int64_t[]){weft_tensor_size(x, 0), 1, 28, 28}, 4);
}

/* The CNN's linear weight (out, C * H * W), its columns in flatten's
 * (C, H, W) order, with the columns put in (H, W, C) order: the int8
 * model's pooled features are channels-last in memory (as oneDNN's
 * convolutions leave them), and flattened in that order they are a view,
 * where flattening in (C, H, W) order copied them (a serial strided copy
 * of every batch, 7-13% of the int8 test pass on the build machine). */
static int hwc_columns(weft_tensor **out, const weft_tensor *w, const int64_t feat[3])
{
    int64_t o = weft_tensor_size(w, 0);
    weft_tensor *w4 = NULL, *perm = NULL, *c = NULL;
    int rc = weft_reshape(&w4, w, (int64_t[]){o, feat[0], feat[1], feat[2]}, 4);
    if (rc == 0)
        rc = weft_permute(&perm, w4, (int64_t[]){0, 2, 3, 1}, 4);
    if (rc == 0)
        rc = weft_contiguous(&c, perm);
    if (rc == 0)
        rc = weft_reshape(out, c, (int64_t[]){o, -1}, 2);
    weft_tensor_release(w4);
    weft_tensor_release(perm);
    weft_tensor_release(c);
    return rc;
}

int wt_quantize(wt_int8_model **out, weft_module *m, bool cnn, weft_tensor *calibration)
{
    *out = NULL;
    weft_tensor *p[8];
    const char *names[8];
    int n = weft_module_parameters(m, p, names, 8);
    wt_int8_model *q = calloc(1, sizeof *q);
    if (!q)
        return weft_set_error(WEFT_ENOMEM, "--quantize: out of memory");
    q->cnn = cnn;
    q->nlayers = cnn ? 3 : 2;
    q->first_weight = n >= 1 ? weft_tensor_retain(p[0]) : NULL;
    if (n != 2 * q->nlayers) {
        int want = 2 * q->nlayers;
        wt_int8_destroy(q);
        return weft_set_error(WEFT_EINVAL, "--quantize: expected %d parameters, got %d", want, n);
    }
    bool mode = weft_set_grad_enabled(false);
    weft_tensor *a = NULL;
    int rc = as_images(&a, cnn, calibration);
    if (rc == 0)
        rc = range_of(&q->input, a);
    for (int i = 0; rc == 0 && i < q->nlayers; i++) {
        weft_tensor *y = NULL, *next = NULL, *w = NULL;
        if (cnn && i == 2)
            rc = hwc_columns(&w, p[2 * i], q->feat);
        else
            w = weft_tensor_retain(p[2 * i]);
        if (rc == 0 && (rc = float_layer(&y, cnn, i, p, a)) == 0 &&
            (rc = range_of(&q->out[i], y)) == 0 &&
            (rc = quantize_weight(&q->weight[i], w, 127.5)) == 0 &&
            (rc = weft_detach(&q->bias[i], p[2 * i + 1])) == 0)
            rc = float_between(&next, cnn, i, y);
        if (rc == 0 && cnn && i == 1) {
            /* the pooled features' (C, H, W): 2 x 2 windows at stride 2 */
            q->feat[0] = weft_tensor_size(y, 1);
            q->feat[1] = weft_tensor_size(y, 2) / 2, q->feat[2] = weft_tensor_size(y, 3) / 2;
        }
        weft_tensor_release(w);
        weft_tensor_release(y);
        weft_tensor_release(a);
        a = next;
    }
    weft_tensor_release(a);
    weft_set_grad_enabled(mode);
    if (rc < 0) {
        wt_int8_destroy(q);
        return rc;
    }
    *out = q;
    return 0;
}

int wt_int8_pixel_input(wt_int8_model *q, const float value[256])
{
    double scale = ((double)value[255] - value[0]) / 255.0;
    double zp = nearbyint(-value[0] / scale);
    if (!(scale > 0) || !(zp >= 0 && zp <= 255))
        return weft_set_error(WEFT_EINVAL,
                              "--quantize: the pixel values %g..%g are not an increasing range "
                              "that holds 0 with a zero point in 0..255",
                              (double)value[0], (double)value[255]);
    /* the pixels use all of 0..255, where the calibrated activations keep
     * to 0..127 (reduce_range): oneDNN's u8 x s8 products, summed in
     * pairs to 16 bits with saturation on AVX2 without VNNI, stay exact
     * only with 7-bit weights then (255 * 64 * 2 = 32640), so layer 0's
     * weight is quantized again to -64..64 (tests/test_quantized keeps its
     * weights 7-bit for the same reason) */
    weft_tensor *w = NULL;
    bool mode = weft_set_grad_enabled(false);
    int rc = quantize_weight(&w, q->first_weight, 63.5);
    weft_set_grad_enabled(mode);
    if (rc < 0)
        return rc;
    weft_tensor_release(q->weight[0]);
    q->weight[0] = w;
    q->input.scale = scale;
    q->input.zero_point = (int64_t)zp;
    return 0;
}

int wt_int8_input(weft_tensor **out, const wt_int8_model *q, const weft_tensor *pixels)
{
    return weft_make_per_tensor_quantized(out, pixels, q->input.scale, q->input.zero_point);
}

int wt_int8_forward(weft_tensor **logits, wt_int8_model *q, weft_tensor *input)
{
    *logits = NULL;
    weft_tensor *a = NULL;
    int rc = 0;
    if (q->cnn)
        rc = weft_quantized_reshape(&a, input, (int64_t[]){weft_tensor_size(input, 0), 1, 28, 28},
                                    4);
    else
        a = weft_tensor_retain(input);
    for (int i = 0; rc == 0 && i < q->nlayers; i++) {
        weft_tensor *y = NULL, *next = NULL;
        bool relu = q->cnn ? i < 2 : i == 0;
        if (q->cnn && i < 2)
            rc = weft_quantized_conv2d(&y, a, q->weight[i], q->bias[i], one, pad1, one, 1,
                                       q->out[i].scale, q->out[i].zero_point, relu);
        else
            rc = weft_quantized_linear(&y, a, q->weight[i], q->bias[i], q->out[i].scale,
                                       q->out[i].zero_point, relu);
        if (rc == 0 && q->cnn && i < 2) {
            weft_tensor *pooled = NULL;
            rc = weft_max_pool2d(&pooled, y, two, 2, two, 2, zero, 2, one, 2, false);
            weft_tensor *hwc = NULL;
            if (rc == 0 && i == 1) {
                /* (N, H, W, C) flattened: a view of the channels-last
                 * pool output, matching the linear weight's columns
                 * (hwc_columns); another layout is copied, still right */
                if ((rc = weft_quantized_permute(&hwc, pooled, (int64_t[]){0, 2, 3, 1}, 4)) == 0)
                    rc = weft_quantized_flatten(&next, hwc, 1, -1);
            } else if (rc == 0) {
                next = weft_tensor_retain(pooled);
            }
            weft_tensor_release(hwc);
            weft_tensor_release(pooled);
        } else if (rc == 0) {
            next = weft_tensor_retain(y);
        }
        weft_tensor_release(y);
        weft_tensor_release(a);
        a = next;
    }
    if (rc == 0)
        rc = weft_dequantize(logits, a);
    weft_tensor_release(a);
    return rc;
}

void wt_int8_destroy(wt_int8_model *q)
{
    if (!q)
        return;
    for (int i = 0; i < MAX_LAYERS; i++) {
        weft_tensor_release(q->weight[i]);
        weft_tensor_release(q->bias[i]);
    }
    weft_tensor_release(q->first_weight);
    free(q);
}
