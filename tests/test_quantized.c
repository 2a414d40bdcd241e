/* tests/test_quantized.c — the quantized layout plugin (issue 17):
 * per-tensor and per-channel affine quantization (PyTorch's rounding: half
 * to even, then clamp), the parameter readers, tensors made from integers,
 * views that keep the quantizer, the errors bad input gets, and ggml's Q8_0
 * and Q4_0 weight blocks (round trip within the format's bound, linear and
 * matmul against the float product of the same weights).  Bit-equality
 * with torch itself is tests/python/test_quantized.py's.  The block
 * kernels are those the plugin picked (WEFT_QUANTIZED_KERNELS, set by
 * tests/quantized_variants.sh for each variant this CPU runs). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <weft/nn.h>
#include <weft/ops.h>
#include <weft/plugin.h>
#include <weft/quantized.h>
#include <weft/weft.h>

#include "dir_entries.h"
#include "tap.h"

static weft_tensor *from_floats(const float *v, const int64_t *sizes, int ndim)
{
    weft_tensor *t = NULL, *c = NULL;
    weft_from_blob(&t, (void *)v, sizes, NULL, ndim, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL, NULL);
    weft_clone(&c, t); /* the test's arrays live on the stack */
    weft_tensor_release(t);
    return c;
}

static weft_tensor *from_data(const void *v, const int64_t *sizes, int ndim, weft_dtype dtype)
{
    weft_tensor *t = NULL, *c = NULL;
    weft_from_blob(&t, (void *)v, sizes, NULL, ndim, dtype, WEFT_DEVICE_CPU, NULL, NULL);
    weft_clone(&c, t);
    weft_tensor_release(t);
    return c;
}

static double item(const weft_tensor *t)
{
    double v = -12345;
    weft_tensor_item(t, &v);
    return v;
}

/* element i of a contiguous copy of t as a double */
static double at(const weft_tensor *t, int64_t i)
{
    weft_tensor *flat = NULL;
    double v = -12345;
    weft_reshape(&flat, t, (int64_t[]){-1}, 1);
    weft_tensor_get(flat, &i, &v);
    weft_tensor_release(flat);
    return v;
}

/* How many elements of a and b (same numel) differ by more than tol. */
static int64_t mismatches(const weft_tensor *a, const weft_tensor *b, double tol)
{
    int64_t bad = 0, n = weft_tensor_numel(a);
    if (n != weft_tensor_numel(b))
        return -1;
    weft_tensor *fa = NULL, *fb = NULL, *ca = NULL, *cb = NULL;
    weft_to_dtype(&fa, a, WEFT_FLOAT64);
    weft_to_dtype(&fb, b, WEFT_FLOAT64);
    weft_contiguous(&ca, fa);
    weft_contiguous(&cb, fb);
    const double *pa = weft_tensor_data_ptr(ca), *pb = weft_tensor_data_ptr(cb);
    for (int64_t i = 0; i < n; i++)
        bad += !(fabs(pa[i] - pb[i]) <= tol);
    weft_tensor *all[] = {fa, fb, ca, cb};
    for (int i = 0; i < 4; i++)
        weft_tensor_release(all[i]);
    return bad;
}

static void test_per_tensor(void)
{
    /* halves round to even; the ends clamp */
    const float x[8] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 1000.0f, -1000.0f};
    weft_tensor *f = from_floats(x, (int64_t[]){8}, 1), *q = NULL, *r = NULL, *d = NULL, *p = NULL;
    is_int(weft_quantize_per_tensor(&q, f, 1.0, 0, WEFT_INT8), 0, "quantize_per_tensor to qint8");
    is_int(weft_tensor_layout(q), weft_layout_lookup("quantized"), "its layout is 'quantized'");
    is_int(weft_layout_flags(weft_layout_lookup("quantized")), 0,
           "its views share memory (no WEFT_LAYOUT_VIEWS_COPY)");
    is_int(weft_tensor_dtype(q), WEFT_INT8, "and its dtype the representation's (qint8 = int8)");
    is_int(weft_int_repr(&r, q), 0, "int_repr");
    const double want[8] = {0, 2, 2, 0, -2, -2, 127, -128};
    int good = 1;
    for (int i = 0; i < 8; i++)
        good &= at(r, i) == want[i];
    ok(good, "half to even, then clamped: %g %g %g %g %g %g %g %g", at(r, 0), at(r, 1), at(r, 2),
       at(r, 3), at(r, 4), at(r, 5), at(r, 6), at(r, 7));
    is_int(weft_tensor_dtype(r), WEFT_INT8, "int_repr is int8");
    weft_tensor_release(r);
    weft_tensor_release(q);

    /* quint8 with a zero point: value = (q - zp) * scale */
    q = NULL;
    is_int(weft_quantize_per_tensor(&q, f, 0.5, 100, WEFT_UINT8), 0, "quantize to quint8");
    is_int(weft_int_repr(&r, q), 0, "int_repr");
    ok(at(r, 0) == 101 && at(r, 1) == 103 && at(r, 2) == 105 && at(r, 3) == 99 &&
           at(r, 6) == 255 && at(r, 7) == 0,
       "scaled, shifted by the zero point and clamped to [0, 255]");
    is_int(weft_dequantize(&d, q), 0, "dequantize");
    is_int(weft_tensor_dtype(d), WEFT_FLOAT32, "to float32");
    ok(at(d, 0) == 0.5 && at(d, 2) == 2.5 && at(d, 6) == 77.5 && at(d, 7) == -50,
       "(q - zero_point) * scale: %g %g %g %g", at(d, 0), at(d, 2), at(d, 6), at(d, 7));
    is_int(weft_q_scale(&p, q), 0, "q_scale");
    is_double(item(p), 0.5, 0, "is the scale");
    weft_tensor_release(p);
    is_int(weft_q_zero_point(&p, q), 0, "q_zero_point");
    is_double(item(p), 100, 0, "is the zero point");
    weft_tensor_release(p);
    is_int(weft_q_per_channel_axis(&p, q), WEFT_EINVAL, "a per-channel reader refuses it");
    like(weft_last_error(), "expected a per-channel quantized tensor", "saying why");

    /* printing describes the quantizer */
    char *text = NULL;
    is_int(weft_tensor_to_string(&text, q), 0, "prints");
    like(text, "per_tensor_affine, scale=0.5, zero_point=100", "with its quantizer");
    weft_free(text);
    weft_tensor *all[] = {f, q, r, d};
    for (int i = 0; i < 4; i++)
        weft_tensor_release(all[i]);

    /* qint32 keeps large values */
    const float big[2] = {1e6f, -3e6f};
    f = from_floats(big, (int64_t[]){2}, 1);
    is_int(weft_quantize_per_tensor(&q, f, 0.25, 7, WEFT_INT32), 0, "quantize to qint32");
    is_int(weft_int_repr(&r, q), 0, "int_repr");
    ok(at(r, 0) == 4000007 && at(r, 1) == -11999993, "int32 values %g %g", at(r, 0), at(r, 1));
    weft_tensor_release(f);
    weft_tensor_release(q);
    weft_tensor_release(r);
}

static void test_per_channel(void)
{
    /* 2 x 3, channels along axis 1 */
    const float x[6] = {1, 2, 3, -1, -2, -3};
    const double s[3] = {1, 0.5, 0.25};
    const int64_t z[3] = {0, 1, -2};
    weft_tensor *f = from_floats(x, (int64_t[]){2, 3}, 2), *q = NULL, *r = NULL, *d = NULL;
    weft_tensor *sc = from_data(s, (int64_t[]){3}, 1, WEFT_FLOAT64);
    weft_tensor *zp = from_data(z, (int64_t[]){3}, 1, WEFT_INT64), *p = NULL;
    is_int(weft_quantize_per_channel(&q, f, sc, zp, 1, WEFT_INT8), 0, "quantize_per_channel");
    is_int(weft_int_repr(&r, q), 0, "int_repr");
    const double want[6] = {1, 5, 10, -1, -3, -14};
    int good = 1;
    for (int i = 0; i < 6; i++)
        good &= at(r, i) == want[i];
    ok(good, "each column with its own scale and zero point");
    is_int(weft_dequantize(&d, q), 0, "dequantize");
    is_int(mismatches(d, f, 0), 0, "these values are exact");
    is_int(weft_q_per_channel_axis(&p, q), 0, "q_per_channel_axis");
    is_double(item(p), 1, 0, "is 1");
    weft_tensor_release(p);
    is_int(weft_q_per_channel_scales(&p, q), 0, "q_per_channel_scales");
    ok(weft_tensor_dtype(p) == WEFT_FLOAT64 && at(p, 2) == 0.25, "float64 scales");
    weft_tensor_release(p);
    is_int(weft_q_per_channel_zero_points(&p, q), 0, "q_per_channel_zero_points");
    ok(weft_tensor_dtype(p) == WEFT_INT64 && at(p, 2) == -2, "int64 zero points");
    weft_tensor_release(p);
    is_int(weft_q_scale(&p, q), WEFT_EINVAL, "q_scale refuses a per-channel tensor");

    /* made from integers and parameters: the same tensor */
    weft_tensor *m = NULL, *md = NULL;
    is_int(weft_make_per_channel_quantized(&m, r, sc, zp, 1), 0, "from an integer tensor");
    is_int(weft_dequantize(&md, m), 0, "dequantize it");
    is_int(mismatches(md, d, 0), 0, "same values");
    weft_tensor_release(md);
    weft_tensor_release(m);
    is_int(weft_make_per_tensor_quantized(&m, r, 0.5, 3), 0, "per tensor from integers");
    is_int(weft_dequantize(&md, m), 0, "dequantize it");
    is_double(at(md, 2), (10 - 3) * 0.5, 0, "(q - zp) * scale");
    weft_tensor_release(md);
    weft_tensor_release(m);

    weft_tensor *all[] = {f, q, r, d, sc, zp};
    for (int i = 0; i < 6; i++)
        weft_tensor_release(all[i]);
}

/* Views keep the quantizer: dequantize(view(q)) == view(dequantize(q)). */
static void test_views(void)
{
    weft_manual_seed(17);
    weft_tensor *f = NULL, *sc = NULL, *zp = NULL, *q = NULL, *d = NULL;
    weft_randn(&f, (int64_t[]){4, 3, 8}, 3, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
    const double s[3] = {0.01, 0.02, 0.05};
    const int64_t z[3] = {3, -4, 0};
    sc = from_data(s, (int64_t[]){3}, 1, WEFT_FLOAT64);
    zp = from_data(z, (int64_t[]){3}, 1, WEFT_INT64);
    is_int(weft_quantize_per_channel(&q, f, sc, zp, 1, WEFT_INT8), 0, "a (4, 3, 8) tensor, axis 1");
    weft_dequantize(&d, q);

    weft_tensor *v = NULL, *vd = NULL, *want = NULL, *p = NULL;
    /* transpose moves the axis */
    is_int(weft_quantized_transpose(&v, q, 0, 1), 0, "quantized_transpose(0, 1)");
    weft_q_per_channel_axis(&p, v);
    is_double(item(p), 0, 0, "the channel axis moved to 0");
    weft_tensor_release(p);
    weft_dequantize(&vd, v);
    weft_transpose(&want, d, 0, 1);
    is_int(mismatches(vd, want, 0), 0, "its values are the transposed values");
    weft_tensor_release(vd);
    weft_tensor_release(want);
    /* contiguous keeps it too */
    weft_tensor *c = NULL;
    is_int(weft_quantized_contiguous(&c, v), 0, "quantized_contiguous");
    weft_dequantize(&vd, c);
    weft_transpose(&want, d, 0, 1);
    is_int(mismatches(vd, want, 0), 0, "same values, contiguous integers");
    weft_tensor_release(vd);
    weft_tensor_release(want);
    weft_tensor_release(c);
    weft_tensor_release(v);

    /* reshape and flatten that keep the channel dimension */
    is_int(weft_quantized_reshape(&v, q, (int64_t[]){2, 2, 3, 2, 4}, 5), 0, "reshape (2,2,3,2,4)");
    weft_q_per_channel_axis(&p, v);
    is_double(item(p), 2, 0, "the channels are dimension 2 now");
    weft_tensor_release(p);
    weft_dequantize(&vd, v);
    is_int(mismatches(vd, d, 0), 0, "same values in order");
    weft_tensor_release(vd);
    weft_tensor_release(v);
    is_int(weft_quantized_flatten(&v, q, 1, 2), WEFT_ESHAPE, "flattening the channels in: refused");
    like(weft_last_error(), "splits or merges the channel axis 1", "saying why");
    is_int(weft_quantized_flatten(&v, q, 0, 0), 0, "flatten(0, 0) is fine");
    weft_tensor_release(v);

    /* slicing the channels slices the parameters */
    is_int(weft_quantized_slice(&v, q, 1, 1, 3, 1), 0, "slice channels 1..2");
    weft_q_per_channel_scales(&p, v);
    ok(weft_tensor_numel(p) == 2 && at(p, 0) == 0.02 && at(p, 1) == 0.05, "two scales left");
    weft_tensor_release(p);
    weft_dequantize(&vd, v);
    weft_slice(&want, d, 1, 1, 3, 1);
    is_int(mismatches(vd, want, 0), 0, "and the values are the slice's");
    weft_tensor_release(vd);
    weft_tensor_release(want);
    weft_tensor_release(v);

    /* selecting one channel leaves a per-tensor quantizer */
    is_int(weft_quantized_select(&v, q, 1, 2), 0, "select channel 2");
    weft_q_scale(&p, v);
    is_double(item(p), 0.05, 0, "per tensor now, with channel 2's scale");
    weft_tensor_release(p);
    weft_dequantize(&vd, v);
    weft_select(&want, d, 1, 2);
    /* per tensor, the product is rounded as torch's per-tensor one (above) */
    is_int(mismatches(vd, want, 1e-5), 0, "values of the selection");
    weft_tensor_release(vd);
    weft_tensor_release(want);
    weft_tensor_release(v);

    /* views share the integers */
    weft_tensor *r1 = NULL, *r2 = NULL;
    weft_quantized_permute(&v, q, (int64_t[]){2, 0, 1}, 3);
    weft_q_per_channel_axis(&p, v);
    is_double(item(p), 2, 0, "permute (2, 0, 1) puts the channels last");
    weft_tensor_release(p);
    weft_tensor_release(v);
    (void)r1, (void)r2;

    /* the core's own view functions reach the layout's view hook: each
     * gives a quantized tensor whose values are the same view of the
     * dequantized values, and whose channel axis is where the view put it */
    weft_tensor *qv[13] = {NULL}, *dv[13] = {NULL};
    struct {
        const char *name;
        int rc_q, rc_d; /* the view of q and of d */
        int64_t axis;   /* -1: per tensor after the view */
    } cases[] = {
        {"weft_view (2, 2, 3, 8)", weft_view(&qv[0], q, (int64_t[]){2, 2, 3, 8}, 4),
         weft_view(&dv[0], d, (int64_t[]){2, 2, 3, 8}, 4), 2},
        {"weft_reshape (4, 3, 2, -1)", weft_reshape(&qv[1], q, (int64_t[]){4, 3, 2, -1}, 4),
         weft_reshape(&dv[1], d, (int64_t[]){4, 3, 2, -1}, 4), 1},
        {"weft_flatten (1, 1)", weft_flatten(&qv[2], q, 1, 1), weft_flatten(&dv[2], d, 1, 1),
         1},
        {"weft_transpose (1, 2)", weft_transpose(&qv[3], q, 1, 2),
         weft_transpose(&dv[3], d, 1, 2), 2},
        {"weft_permute (2, 1, 0)", weft_permute(&qv[4], q, (int64_t[]){2, 1, 0}, 3),
         weft_permute(&dv[4], d, (int64_t[]){2, 1, 0}, 3), 1},
        {"weft_slice (dim 1, 0:3:2)", weft_slice(&qv[5], q, 1, 0, 3, 2),
         weft_slice(&dv[5], d, 1, 0, 3, 2), 1},
        {"weft_narrow (dim -1, 2, 5)", weft_narrow(&qv[6], q, -1, 2, 5),
         weft_narrow(&dv[6], d, -1, 2, 5), 1},
        {"weft_select (dim 1, -1)", weft_select(&qv[7], q, 1, -1),
         weft_select(&dv[7], d, 1, -1), -1},
        {"weft_select (dim 0, 3)", weft_select(&qv[8], q, 0, 3),
         weft_select(&dv[8], d, 0, 3), 0},
        {"weft_unsqueeze (0)", weft_unsqueeze(&qv[9], q, 0), weft_unsqueeze(&dv[9], d, 0),
         2},
        {"weft_expand (5, 4, 3, 8)", weft_expand(&qv[10], q, (int64_t[]){5, -1, 3, 8}, 4),
         weft_expand(&dv[10], d, (int64_t[]){5, -1, 3, 8}, 4), 2},
        {"weft_alias", weft_alias(&qv[11], q), weft_alias(&dv[11], d), 1},
        {"weft_squeeze (all)", weft_squeeze(&qv[12], q, WEFT_ALL_DIMS),
         weft_squeeze(&dv[12], d, WEFT_ALL_DIMS), 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        weft_tensor *got = NULL, *ax = NULL;
        ok(cases[i].rc_q == 0 && cases[i].rc_d == 0, "%s of a quantized tensor", cases[i].name);
        ok(weft_tensor_layout(qv[i]) == weft_tensor_layout(q), "%s: stays quantized",
           cases[i].name);
        weft_dequantize(&got, qv[i]);
        /* selecting the channel axis leaves a per-tensor quantizer, whose
         * values torch rounds differently (the scale made a float before the
         * product, not after): within a float's rounding, 1e-5 at these
         * magnitudes; every other view bit for bit */
        is_int(mismatches(got, dv[i], cases[i].axis == -1 ? 1e-5 : 0), 0,
               "%s: the same view of the values", cases[i].name);
        if (cases[i].axis >= 0) {
            weft_q_per_channel_axis(&ax, qv[i]);
            is_double(ax ? item(ax) : -1, (double)cases[i].axis, 0, "%s: channel axis %lld",
                      cases[i].name, (long long)cases[i].axis);
        } else {
            is_int(weft_q_per_channel_axis(&ax, qv[i]), WEFT_EINVAL,
                   "%s: per tensor after selecting one channel", cases[i].name);
        }
        weft_tensor_release(ax);
        weft_tensor_release(got);
        weft_tensor_release(qv[i]);
        weft_tensor_release(dv[i]);
    }
    /* weft_contiguous of a transposed view: a copy with the quantizer */
    weft_tensor *tq = NULL, *cq = NULL, *cd = NULL, *td = NULL;
    weft_transpose(&tq, q, 0, 2);
    is_int(weft_contiguous(&cq, tq), 0, "weft_contiguous of a transposed quantized tensor");
    ok(cq && cq != tq && weft_tensor_layout(cq) == weft_tensor_layout(q), "a new quantized tensor");
    weft_int_repr(&cd, cq);
    ok(cd && weft_tensor_is_contiguous(cd), "whose integers are contiguous");
    weft_tensor_release(cd);
    cd = NULL;
    weft_dequantize(&cd, cq);
    weft_transpose(&td, d, 0, 2);
    is_int(mismatches(cd, td, 0), 0, "holding the transposed values");
    weft_tensor *cq2 = NULL;
    is_int(weft_contiguous(&cq2, q), 0, "weft_contiguous of a contiguous quantized tensor");
    ok(cq2 == q, "is the tensor itself");
    weft_tensor *all_c[] = {tq, cq, cd, td, cq2};
    for (int i = 0; i < 5; i++)
        weft_tensor_release(all_c[i]);
    /* what a view cannot keep is refused, naming why */
    is_int(weft_flatten(&v, q, 0, 1), WEFT_ESHAPE, "weft_flatten merging the channels: refused");
    like(weft_last_error(), "reshape: the new shape splits or merges the channel axis 1",
         "naming the reshape flatten made and the axis");
    is_int(weft_view(&v, q, (int64_t[]){3, 4, 8}, 3), WEFT_ESHAPE,
           "weft_view that splits the channels differently: refused");
    ok(v == NULL, "nothing came out");
    weft_tensor *q1 = NULL;
    weft_select(&q1, q, 1, 0); /* per tensor (4, 8): any view */
    weft_tensor *wide = NULL;
    weft_unsqueeze(&wide, q, 1); /* (4, 1, 3, 8), channels at 2 */
    is_int(weft_expand(&v, wide, (int64_t[]){4, 5, 3, 8}, 4), 0, "expanding a size-1 dim beside the channels");
    weft_tensor_release(v);
    v = NULL;
    weft_tensor *one = NULL;
    weft_slice(&one, q, 1, 0, 1, 1); /* one channel left, per channel */
    is_int(weft_expand(&v, one, (int64_t[]){4, 3, 8}, 3), WEFT_ESHAPE,
           "expanding the channel axis itself: refused");
    like(weft_last_error(), "channel axis 1", "naming the axis");
    is_int(weft_as_strided(&v, q, (int64_t[]){4}, (int64_t[]){1}, 1, 0), WEFT_EINVAL,
           "weft_as_strided: refused (a layout's strides are its own)");
    like(weft_last_error(), "quantized", "naming the layout");
    weft_tensor_release(q1);
    weft_tensor_release(wide);
    weft_tensor_release(one);

    weft_tensor *all[] = {f, sc, zp, q, d};
    for (int i = 0; i < 5; i++)
        weft_tensor_release(all[i]);
}

static void test_errors(void)
{
    const float x[4] = {1, 2, 3, 4};
    weft_tensor *f = from_floats(x, (int64_t[]){2, 2}, 2), *q = NULL;
    is_int(weft_quantize_per_tensor(&q, f, 0, 0, WEFT_INT8), WEFT_EINVAL, "scale 0: refused");
    like(weft_last_error(), "scale must be positive and finite", "the message says what a scale must be");
    is_int(weft_quantize_per_tensor(&q, f, -0.1, 0, WEFT_INT8), WEFT_EINVAL, "negative scale");
    is_int(weft_quantize_per_tensor(&q, f, NAN, 0, WEFT_INT8), WEFT_EINVAL, "NaN scale");
    is_int(weft_quantize_per_tensor(&q, f, INFINITY, 0, WEFT_INT8), WEFT_EINVAL, "infinite scale");
    is_int(weft_quantize_per_tensor(&q, f, 1e-300, 0, WEFT_INT8), WEFT_EINVAL,
           "a scale that is 0 in float32");
    is_int(weft_quantize_per_tensor(&q, f, 0.1, 128, WEFT_INT8), WEFT_EINVAL, "zero point 128 for qint8");
    like(weft_last_error(), "zero_point 128 is outside the range of int8 [-128, 127]", "naming the range");
    is_int(weft_quantize_per_tensor(&q, f, 0.1, -1, WEFT_UINT8), WEFT_EINVAL, "zero point -1 for quint8");
    is_int(weft_quantize_per_tensor(&q, f, 0.1, 0, WEFT_FLOAT32), WEFT_EDTYPE, "float32 is no quantized dtype");
    like(weft_last_error(), "int8 (qint8), uint8 (quint8) or int32 (qint32)", "listing those that are");
    ok(q == NULL, "nothing came out of the failures");

    /* no gradient formula: an input that requires grad is refused by name
     * (a result without history would drop its gradient silently) */
    weft_tensor *g = from_floats(x, (int64_t[]){2, 2}, 2);
    weft_tensor_set_requires_grad(g, true);
    is_int(weft_quantize_per_tensor(&q, g, 0.1, 0, WEFT_INT8), WEFT_ENOTSUP,
           "quantize_per_tensor of an input that requires grad: refused");
    like(weft_last_error(), "quantize_per_tensor: not differentiable, and an input requires grad",
         "naming the operator");
    bool was = weft_set_grad_enabled(false);
    is_int(weft_quantize_per_tensor(&q, g, 0.1, 0, WEFT_INT8), 0, "under no_grad it quantizes");
    weft_set_grad_enabled(was);
    weft_tensor_release(q);
    q = NULL;
    weft_tensor_release(g);

    const double s2[2] = {0.1, 0.1}, s3[3] = {0.1, 0.1, 0.1}, sbad[2] = {0.1, 0};
    const int64_t z2[2] = {0, 0}, zbad[2] = {0, 300};
    weft_tensor *sc2 = from_data(s2, (int64_t[]){2}, 1, WEFT_FLOAT64);
    weft_tensor *sc3 = from_data(s3, (int64_t[]){3}, 1, WEFT_FLOAT64);
    weft_tensor *scb = from_data(sbad, (int64_t[]){2}, 1, WEFT_FLOAT64);
    weft_tensor *zp2 = from_data(z2, (int64_t[]){2}, 1, WEFT_INT64);
    weft_tensor *zpb = from_data(zbad, (int64_t[]){2}, 1, WEFT_INT64);
    is_int(weft_quantize_per_channel(&q, f, sc2, zp2, 2, WEFT_INT8), WEFT_EINVAL, "axis 2 of 2-d: refused");
    like(weft_last_error(), "axis 2 is out of range for a tensor of 2 dimensions", "naming the axis");
    is_int(weft_quantize_per_channel(&q, f, sc2, zp2, -1, WEFT_INT8), WEFT_EINVAL, "axis -1: refused");
    is_int(weft_quantize_per_channel(&q, f, sc3, zp2, 0, WEFT_INT8), WEFT_ESHAPE, "3 scales for 2 channels");
    like(weft_last_error(), "expected 2 scales and 2 zero points", "naming the counts");
    is_int(weft_quantize_per_channel(&q, f, scb, zp2, 0, WEFT_INT8), WEFT_EINVAL, "a zero scale in channel 1");
    like(weft_last_error(), "(channel 1): scale must be positive", "naming the channel");
    is_int(weft_quantize_per_channel(&q, f, sc2, zpb, 0, WEFT_INT8), WEFT_EINVAL, "zero point 300 in channel 1");
    is_int(weft_quantize_per_channel(&q, f, zp2, sc2, 0, WEFT_INT8), WEFT_EDTYPE, "integer scales");
    ok(q == NULL, "nothing came out of them");

    weft_tensor *i32 = NULL;
    weft_to_dtype(&i32, f, WEFT_INT64);
    is_int(weft_make_per_tensor_quantized(&q, i32, 0.1, 0), WEFT_EDTYPE, "int64 integers: refused");
    is_int(weft_make_per_tensor_quantized(&q, f, 0.1, 0), WEFT_EDTYPE, "float 'integers': refused");
    weft_tensor *r = NULL;
    is_int(weft_quantize_per_tensor(&q, i32, 0.1, 0, WEFT_INT8), WEFT_EDTYPE,
           "quantizing an integer tensor: refused");

    /* a float operator given a quantized tensor names itself and points to dequantize() */
    is_int(weft_quantize_per_tensor(&q, f, 0.1, 0, WEFT_INT8), 0, "a good one");
    weft_tensor *e = NULL;
    is_int(weft_exp(&e, q), WEFT_ENOKERNEL, "exp of a quantized tensor: refused");
    like(weft_last_error(), "exp: not supported for a quantized tensor", "naming the operator");
    like(weft_last_error(), "dequantize()", "and suggesting dequantize()");
    is_int(weft_add(&e, f, q), WEFT_ENOKERNEL, "float + quantized: refused too");
    like(weft_last_error(), "add:", "naming add");
    /* the dims are checked by the core's view functions, as for strided tensors */
    is_int(weft_quantized_transpose(&r, q, 0, 5), WEFT_ERANGE, "transpose of dimension 5: refused");
    like(weft_last_error(), "transpose: dimension out of range", "as the core says it");
    is_int(weft_quantized_slice(&r, q, 3, 0, 1, 1), WEFT_ERANGE, "slice of dimension 3: refused");
    is_int(weft_dequantize(&r, f), WEFT_ENOKERNEL, "dequantize of a float tensor: no kernel");
    ok(e == NULL && r == NULL, "nothing came out");

    weft_tensor *all[] = {f, sc2, sc3, scb, zp2, zpb, i32, q};
    for (int i = 0; i < 8; i++)
        weft_tensor_release(all[i]);
}

/* ------------------------------------------------------------- blocks */

/* the largest magnitude of each block of 32 of a contiguous float row set */
static float block_amax(const float *x)
{
    float m = 0;
    for (int j = 0; j < 32; j++)
        m = fmaxf(m, fabsf(x[j]));
    return m;
}

static void test_block_round_trip(const char *name, int layout, float per_amax, int64_t rows,
                                  int64_t cols)
{
    weft_manual_seed(3);
    weft_tensor *f = NULL, *w = NULL, *back = NULL;
    weft_randn(&f, (int64_t[]){rows, cols}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
    is_int(weft_to_layout(&w, f, layout), 0, "%s: to_layout", name);
    is_int(weft_tensor_layout(w), layout, "%s: of its layout", name);
    ok(weft_tensor_nbytes(w) * 3 < weft_tensor_nbytes(f), "%s: %lld bytes for %lld of float32",
       name, (long long)weft_tensor_nbytes(w), (long long)weft_tensor_nbytes(f));
    is_int(weft_to_strided(&back, w), 0, "%s: back to strided", name);
    const float *x = weft_tensor_data_ptr(f), *y = weft_tensor_data_ptr(back);
    int64_t bad = 0;
    double worst = 0;
    for (int64_t b = 0; b < rows * cols / 32; b++) {
        /* per_amax: the format's step over the block's largest magnitude
         * (Q8_0: amax / 127 / 2 from rounding; Q4_0: amax / 8 at the
         * clamped end), plus the float16 rounding of the scale (2^-11
         * relative, times at most 127 or 8 steps) */
        float amax = block_amax(x + b * 32), bound = amax * per_amax * 1.0001f;
        for (int j = 0; j < 32; j++) {
            double err = fabs((double)x[b * 32 + j] - y[b * 32 + j]);
            bad += err > bound;
            if (amax > 0 && err / amax > worst)
                worst = err / amax;
        }
    }
    is_int(bad, 0, "%s: every element within the bound (worst error %.4g of the block's max)", name,
           worst);
    weft_tensor_release(f);
    weft_tensor_release(w);
    weft_tensor_release(back);
}

/* The products quantize the activations to 8-bit blocks first (ggml's
 * scheme), so they differ from the float product with the dequantized
 * weight by the activations' rounding: |x - q d| <= d / 2 with d = the
 * block's max|x| / 127, hence for output (i, r)
 *   |y - want| <= sum_b max|x[i, b]| / 254 * sum_{j in b} |wd[r, j]|,
 * plus the float rounding of both sums (1e-5 of sum |wd x|: the integer
 * sums are exact).  ggml's own test only asks 0.02 per element of the
 * normalized dot product; this bound is per output and tight: the worst
 * ratio error / bound is printed.  y[i, r] lies at i * yi + r * yr.
 * Returns how many outputs are beyond their bound. */
static int64_t beyond_activation_bound(const char *what, const weft_tensor *y,
                                       const weft_tensor *want, const weft_tensor *x,
                                       const weft_tensor *wd, int64_t yi, int64_t yr)
{
    weft_tensor *cy = NULL, *cw = NULL, *cx = NULL, *cd = NULL;
    weft_contiguous(&cy, y);
    weft_contiguous(&cw, want);
    weft_contiguous(&cx, x);
    weft_contiguous(&cd, wd);
    const float *py = weft_tensor_data_ptr(cy), *pw = weft_tensor_data_ptr(cw),
                *px = weft_tensor_data_ptr(cx), *pd = weft_tensor_data_ptr(cd);
    int64_t k = weft_tensor_size(wd, 1), rows = weft_tensor_size(wd, 0);
    int64_t m = weft_tensor_numel(x) / k, bad = 0;
    double worst = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t r = 0; r < rows; r++) {
            double bound = 1e-6, dot = 0;
            for (int64_t b = 0; b < k / 32; b++) {
                double wsum = 0;
                for (int j = 0; j < 32; j++) {
                    wsum += fabs(pd[r * k + b * 32 + j]);
                    dot += fabs(pd[r * k + b * 32 + j] * px[i * k + b * 32 + j]);
                }
                bound += block_amax(px + i * k + b * 32) / 254.0 * wsum * 1.0001;
            }
            bound += 1e-5 * dot;
            double err = fabs((double)py[i * yi + r * yr] - pw[i * yi + r * yr]);
            bad += !(err <= bound);
            worst = fmax(worst, err / bound);
        }
    diag("%s: worst error %.3g of its bound", what, worst);
    weft_tensor *all[] = {cy, cw, cx, cd};
    for (int i = 0; i < 4; i++)
        weft_tensor_release(all[i]);
    return bad;
}

static void test_block_products(const char *name, int layout)
{
    weft_manual_seed(5);
    weft_tensor *wf = NULL, *w = NULL, *wd = NULL, *x = NULL, *b = NULL, *y = NULL, *want = NULL;
    const int64_t n = 200, k = 320, m = 5; /* k: 10 blocks; n: not a multiple of anything */
    weft_randn(&wf, (int64_t[]){n, k}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
    weft_randn(&x, (int64_t[]){m, k}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
    weft_randn(&b, (int64_t[]){n}, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
    weft_to_layout(&w, wf, layout);
    weft_to_strided(&wd, w); /* the weight the blocks stand for */
    is_int(weft_linear(&y, x, w, b), 0, "%s: linear(x, W, b)", name);
    weft_linear(&want, x, wd, b);
    ok(weft_tensor_ndim(y) == 2 && weft_tensor_size(y, 0) == m && weft_tensor_size(y, 1) == n,
       "%s: (5, 200)", name);
    is_int(beyond_activation_bound(name, y, want, x, wd, n, 1), 0,
           "%s: the float product with the dequantized weight, within the activations' rounding",
           name);
    weft_tensor_release(y);
    weft_tensor_release(want);

    /* matrix-vector: W @ v */
    weft_tensor *v = NULL;
    weft_select(&v, x, 0, 3);
    is_int(weft_matmul(&y, w, v), 0, "%s: matmul(W, v)", name);
    weft_matmul(&want, wd, v);
    is_int(beyond_activation_bound(name, y, want, v, wd, 0, 1), 0,
           "%s: the matrix-vector product, within the activations' rounding", name);
    weft_tensor_release(y);
    weft_tensor_release(want);
    /* W @ X with X (k, m) */
    weft_tensor *xt = NULL;
    weft_transpose(&xt, x, 0, 1);
    is_int(weft_matmul(&y, w, xt), 0, "%s: matmul(W, X)", name);
    weft_matmul(&want, wd, xt);
    is_int(beyond_activation_bound(name, y, want, x, wd, 1, m), 0,
           "%s: the matrix product, within the activations' rounding", name);
    weft_tensor_release(y);
    weft_tensor_release(want);
    want = NULL;
    /* an infinity in an activation block makes its row's outputs NaN, not a
     * number computed from a clamped value */
    weft_tensor *xinf = NULL;
    weft_clone(&xinf, v);
    float *pinf = weft_tensor_data_ptr(xinf);
    pinf[40] = INFINITY;
    y = NULL;
    is_int(weft_matmul(&y, w, xinf), 0, "%s: matmul(W, v with an infinity)", name);
    ok(y && isnan(at(y, 0)) && isnan(at(y, n - 1)), "%s: gives NaN", name);
    weft_tensor_release(xinf);
    weft_tensor_release(y);
    weft_tensor_release(want);

    /* refusals */
    y = NULL;
    is_int(weft_matmul(&y, x, w), WEFT_ENOTSUP, "%s: x @ W refused", name);
    like(weft_last_error(), "use linear(x, W)", "%s: pointing to linear", name);
    is_int(weft_exp(&y, w), WEFT_ENOKERNEL, "%s: exp refused", name);
    like(weft_last_error(), "to_strided()", "%s: pointing to to_strided", name);
    weft_tensor *x2 = NULL;
    weft_narrow(&x2, x, 1, 0, 32);
    is_int(weft_linear(&y, x2, w, NULL), WEFT_ESHAPE, "%s: a wrong in_features refused", name);
    weft_tensor *odd = NULL, *wodd = NULL;
    weft_narrow(&odd, wf, 1, 0, 40);
    is_int(weft_to_layout(&wodd, odd, layout), WEFT_ESHAPE, "%s: 40 columns refused", name);
    like(weft_last_error(), "multiple of 32", "%s: naming the block size", name);
    ok(y == NULL && wodd == NULL, "%s: nothing came out", name);

    weft_tensor *all[] = {wf, w, wd, x, b, v, xt, x2, odd};
    for (int i = 0; i < 9; i++)
        weft_tensor_release(all[i]);
}

/* Empty block products (found by fuzz_python_ops: linear of a (3, 0)
 * input by a (0, 0) weight divided by zero, and a (3, 0) weight was
 * converted as one of 0 rows): every shape with a size 0, the outputs
 * being the bias where in_features is 0. */
static void test_block_empty(const char *name, int layout)
{
    static const int64_t cases[][3] = {{3, 0, 2}, {0, 0, 3}, {3, 0, 0}, {0, 64, 2}, {2, 64, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t n = cases[c][0], k = cases[c][1], m = cases[c][2];
        weft_tensor *wf = NULL, *w = NULL, *wd = NULL, *x = NULL, *b = NULL, *y = NULL;
        weft_randn(&wf, (int64_t[]){n, k}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
        weft_randn(&x, (int64_t[]){m, k}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
        weft_randn(&b, (int64_t[]){n}, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
        is_int(weft_to_layout(&w, wf, layout), 0, "%s: a (%lld, %lld) weight", name,
               (long long)n, (long long)k);
        weft_to_strided(&wd, w);
        ok(wd && weft_tensor_size(wd, 0) == n && weft_tensor_size(wd, 1) == k,
           "%s: converts back to (%lld, %lld)", name, (long long)n, (long long)k);
        is_int(weft_linear(&y, x, w, b), 0, "%s: linear of (%lld, %lld) by it", name,
               (long long)m, (long long)k);
        bool shape = y && weft_tensor_size(y, 0) == m && weft_tensor_size(y, 1) == n;
        int64_t off = 0;
        for (int64_t i = 0; shape && k == 0 && i < m * n; i++) /* every output its bias */
            off += ((const float *)weft_tensor_data_ptr(y))[i] !=
                   ((const float *)weft_tensor_data_ptr(b))[i % n];
        ok(shape && off == 0, "%s: (%lld, %lld)%s (%lld off)", name, (long long)m, (long long)n,
           k == 0 ? ", each row the bias" : "", (long long)off);
        weft_tensor *all[] = {wf, w, wd, x, b, y};
        for (int i = 0; i < 6; i++)
            weft_tensor_release(all[i]);
    }
}

/* The products keep helper threads between calls, one call using them at
 * a time: calls from several threads at once (the others start threads
 * of their own) must each get the whole, same result, and the helpers
 * follow a change of the thread count. */
typedef struct product_race {
    const weft_tensor *w, *v, *want;
    int wrong, failed;
} product_race;

static void *race_products(void *arg)
{
    product_race *r = arg;
    for (int i = 0; i < 25; i++) {
        weft_tensor *y = NULL;
        if (weft_matmul(&y, r->w, r->v) < 0) {
            r->failed++;
            continue;
        }
        /* the same kernel on the same rows: equal bit for bit, whichever
         * thread ran which chunk */
        r->wrong += memcmp(weft_tensor_data_ptr(y), weft_tensor_data_ptr(r->want),
                           (size_t)weft_tensor_nbytes(y)) != 0;
        weft_tensor_release(y);
    }
    return NULL;
}

static void test_block_products_concurrent(int q4)
{
    weft_manual_seed(11);
    weft_tensor *wf = NULL, *w = NULL, *v = NULL, *want = NULL;
    weft_randn(&wf, (int64_t[]){1000, 256}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
    weft_randn(&v, (int64_t[]){256}, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
    weft_to_layout(&w, wf, q4);
    int threads = weft_get_num_threads();
    weft_set_num_threads(1);
    is_int(weft_matmul(&want, w, v), 0, "concurrent: the product on one thread");
    for (int nt = 2; nt <= 4; nt += 2) {
        weft_set_num_threads(nt);
        product_race r[3];
        pthread_t tid[3];
        int started = 0;
        for (int i = 0; i < 3; i++) {
            r[i] = (product_race){w, v, want, 0, 0};
            started += pthread_create(&tid[i], NULL, race_products, &r[i]) == 0;
        }
        for (int i = 0; i < started; i++)
            pthread_join(tid[i], NULL);
        int wrong = 0, failed = 0;
        for (int i = 0; i < started; i++)
            wrong += r[i].wrong, failed += r[i].failed;
        ok(started == 3 && wrong == 0 && failed == 0,
           "concurrent: 3 threads x 25 products on %d threads each equal the one-thread "
           "product (%d differ, %d failed)",
           nt, wrong, failed);
    }
    /* a forked child has none of its parent's helper threads: its
     * products start their own (the alarm turns a wait for helpers that
     * are not there into a failure rather than a hung test) */
    weft_set_num_threads(2);
    pid_t child = fork();
    if (child == 0) {
        alarm(60);
        product_race r = {w, v, want, 0, 0};
        race_products(&r);
        _exit(r.wrong || r.failed ? 1 : 0);
    }
    int status = -1;
    if (child > 0)
        waitpid(child, &status, 0);
    ok(child > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
       "concurrent: 25 products in a forked child equal the one-thread product");
    weft_set_num_threads(threads);
    weft_tensor *all[] = {wf, w, v, want};
    for (int i = 0; i < 4; i++)
        weft_tensor_release(all[i]);
}

static void test_blocks(void)
{
    int q8 = weft_layout_lookup("q8_0"), q4 = weft_layout_lookup("q4_0");
    ok(q8 > 0 && q4 > 0, "the q8_0 and q4_0 layouts are registered");
    const char *want = getenv("WEFT_QUANTIZED_KERNELS");
    weft_tensor *f = NULL, *w = NULL;
    char *text = NULL;
    weft_zeros(&f, (int64_t[]){1, 32}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    weft_to_layout(&w, f, q4);
    weft_tensor_to_string(&text, w);
    diag("block kernels: %s", text && strstr(text, "kernels") ? strstr(text, "blocks of") : "?");
    if (want && *want) {
        char needle[64];
        snprintf(needle, sizeof needle, "%s kernels", want);
        like(text, needle, "the kernels asked for (%s) are the ones running", want);
    }
    weft_free(text);
    weft_tensor_release(f);
    weft_tensor_release(w);
    test_block_round_trip("q8_0", q8, 0.5f / 127 + 127.0f / 127 / 2048, 64, 256);
    test_block_round_trip("q4_0", q4, 1.0f / 8 + 8.0f / 8 / 2048, 64, 256);
    /* blocks of 2 MiB and more take another allocation (huge pages; the
     * same for both formats) */
    test_block_round_trip("q8_0 2.1 MiB", q8, 0.5f / 127 + 127.0f / 127 / 2048, 8192, 256);
    test_block_products("q8_0", q8);
    test_block_products("q4_0", q4);
    test_block_empty("q8_0", q8);
    test_block_empty("q4_0", q4);
    test_block_products_concurrent(q4);
}

static int qlinear(weft_tensor **out, const weft_tensor *x, const weft_tensor *w,
                   const weft_tensor *b, double scale, int64_t zp, bool relu)
{
    return weft_quantized_linear(out, x, w, b, scale, zp, relu);
}

/* How many int_repr entries of quantized a and b differ. */
static int64_t repr_mismatches(const weft_tensor *a, const weft_tensor *b)
{
    weft_tensor *ra = NULL, *rb = NULL;
    weft_int_repr(&ra, a);
    weft_int_repr(&rb, b);
    int64_t bad = mismatches(ra, rb, 0);
    weft_tensor_release(ra);
    weft_tensor_release(rb);
    return bad;
}

/* The weight's packed form is cached with it (the first call packs); a
 * copy_ into the weight writes its integers, and the next call must pack
 * the new ones: its output equals that of a fresh weight quantized from
 * the new values, and differs from the stale one.  w: (40, 96) float with
 * |w| <= 63 * step. */
static void test_packed_weight_written(const weft_tensor *qx, const weft_tensor *w,
                                       const weft_tensor *b, double step)
{
    weft_tensor *qw = NULL, *w2 = NULL, *qw2 = NULL, *y1 = NULL, *y2 = NULL, *want = NULL,
                *again = NULL;
    weft_quantize_per_tensor(&qw, w, step, 0, WEFT_INT8);
    weft_neg(&w2, w);
    weft_quantize_per_tensor(&qw2, w2, step, 0, WEFT_INT8);
    is_int(qlinear(&y1, qx, qw, b, 0.25, 100, false), 0, "cache: the first call packs the weight");
    is_int(weft_copy_(qw, w2), 0, "cache: copy_ of float values into the quantized weight");
    is_int(repr_mismatches(qw, qw2), 0, "cache: copy_ quantized them with the weight's quantizer");
    is_int(qlinear(&y2, qx, qw, b, 0.25, 100, false), 0, "cache: the call after the write");
    qlinear(&want, qx, qw2, b, 0.25, 100, false);
    is_int(repr_mismatches(y2, want), 0, "cache: repacked (as a fresh weight of the new values)");
    ok(repr_mismatches(y2, y1) > 0, "cache: and not the stale packing (the outputs changed)");
    /* a quantized source with the same quantizer: its integers, as they are */
    weft_tensor *qback = NULL;
    weft_quantize_per_tensor(&qback, w, step, 0, WEFT_INT8);
    is_int(weft_copy_(qw, qback), 0, "cache: copy_ of a quantized weight");
    is_int(qlinear(&again, qx, qw, b, 0.25, 100, false), 0, "cache: the call after it");
    is_int(repr_mismatches(again, y1), 0, "cache: the first weight's outputs again");
    weft_tensor *q4 = NULL, *wf = NULL;
    weft_randn(&wf, (int64_t[]){40, 96}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
    weft_to_layout(&q4, wf, weft_layout_lookup("q4_0"));
    weft_tensor *plain = NULL;
    weft_zeros(&plain, (int64_t[]){40, 96}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    is_int(weft_copy_(plain, qw), WEFT_ENOTSUP, "cache: copy_ of a quantized tensor into a float one");
    like(weft_last_error(), "dequantize()", "cache: pointing to dequantize()");
    weft_tensor_release(plain);
    /* the q4_0 layout's refusal answers (its key ranks above) */
    ok(weft_copy_(qw, q4) < 0, "cache: copy_ from a q4_0 tensor refused");
    like(weft_last_error(), "to_strided()", "cache: saying how to convert it");
    weft_tensor *all[] = {qw, w2, qw2, y1, y2, want, again, qback, q4, wf};
    for (int i = 0; i < 10; i++)
        weft_tensor_release(all[i]);
}

/* quantized_linear against the float product of the dequantized operands,
 * quantized to the same output parameters: within one step (the float
 * reference rounds once, oneDNN's integer path may land on the other side
 * of a half). */
static void test_quantized_linear(void)
{
    weft_manual_seed(11);
    weft_tensor *x = NULL, *w = NULL, *b = NULL, *qx = NULL, *qw = NULL, *y = NULL;
    weft_randn(&x, (int64_t[]){8, 96}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
    weft_randn(&w, (int64_t[]){40, 96}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
    weft_randn(&b, (int64_t[]){40}, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
    weft_quantize_per_tensor(&qx, x, 0.03, 120, WEFT_UINT8);
    /* weights within [-64, 63]: on AVX2 without VNNI oneDNN adds pairs of
     * u8 x s8 products in int16 with saturation (vpmaddubsw), exactly as
     * torch's onednn engine does on such a machine; 7-bit weights keep the
     * pairs exact (torch's reduce_range answers the same problem) */
    double amax = 0, v;
    for (int64_t i = 0; i < 40 * 96; i++)
        if ((v = fabs(at(w, i))) > amax)
            amax = v;
    weft_quantize_per_tensor(&qw, w, amax / 63, 0, WEFT_INT8);
    int rc = qlinear(&y, qx, qw, b, 0.25, 100, false);
    if (rc == WEFT_ENOTSUP && strstr(weft_last_error(), "without oneDNN")) {
        skip(6 + 4 + 13 + 2, "the plugin was built without oneDNN");
    } else {
        is_int(rc, 0, "quantized_linear");
        for (int relu = 0; relu < 2; relu++) {
            weft_tensor *dx = NULL, *dw = NULL, *f = NULL, *r = NULL, *want = NULL, *wr = NULL,
                        *gr = NULL, *got = NULL;
            weft_dequantize(&dx, qx);
            weft_dequantize(&dw, qw);
            weft_linear(&f, dx, dw, b);
            if (relu)
                weft_relu(&r, f);
            weft_quantize_per_tensor(&want, relu ? r : f, 0.25, 100, WEFT_UINT8);
            if (relu)
                qlinear(&got, qx, qw, b, 0.25, 100, true);
            weft_int_repr(&wr, want);
            weft_int_repr(&gr, relu ? got : y);
            is_int(mismatches(gr, wr, 1), 0, "linear%s: within one step of the float reference",
                   relu ? " + relu" : "");
            is_int(relu ? weft_tensor_dtype(got) : weft_tensor_dtype(y), WEFT_UINT8, "quint8 out");
            weft_tensor *all[] = {dx, dw, f, r, want, wr, gr, got};
            for (int i = 0; i < 8; i++)
                weft_tensor_release(all[i]);
        }
        /* no bias, input zero points 120 and 0: the zero-point fold makes
         * a bias of its own for the first (minus 120 times the weight sums;
         * a wrong sign or a stale sum is many steps off) */
        for (int zi = 0; zi < 2; zi++) {
            int64_t zp = zi ? 0 : 120;
            weft_tensor *qx0 = NULL, *dx = NULL, *dw = NULL, *f = NULL, *want = NULL,
                        *got = NULL, *wr = NULL, *gr = NULL;
            weft_quantize_per_tensor(&qx0, x, 0.03, zp, WEFT_UINT8);
            is_int(qlinear(&got, qx0, qw, NULL, 0.25, 100, false), 0,
                   "linear without a bias, input zero point %lld", (long long)zp);
            weft_dequantize(&dx, qx0);
            weft_dequantize(&dw, qw);
            weft_linear(&f, dx, dw, NULL);
            weft_quantize_per_tensor(&want, f, 0.25, 100, WEFT_UINT8);
            weft_int_repr(&wr, want);
            weft_int_repr(&gr, got);
            is_int(mismatches(gr, wr, 1), 0, "no bias, zero point %lld: within one step",
                   (long long)zp);
            weft_tensor *all[] = {qx0, dx, dw, f, want, got, wr, gr};
            for (int i = 0; i < 8; i++)
                weft_tensor_release(all[i]);
        }
        weft_tensor *bad = NULL, *qz = NULL;
        weft_quantize_per_tensor(&qz, w, 0.02, 3, WEFT_INT8);
        is_int(qlinear(&bad, qx, qz, b, 0.25, 100, false), WEFT_EINVAL, "a weight zero point 3: refused");
        like(weft_last_error(), "zero points must be 0", "saying why");
        is_int(qlinear(&bad, qw, qw, b, 0.25, 100, false), WEFT_EDTYPE, "a qint8 input: refused");
        ok(bad == NULL, "nothing came out");
        weft_tensor_release(qz);
        test_packed_weight_written(qx, w, b, amax / 63);
        /* the full u8 range as input (weft-train's int8 models read the
         * pixel bytes so) with weights up to |64|, as weft-train quantizes
         * their first layer: 255 * 64 * 2 = 32640 still fits the pairs'
         * 16 bits, so the product is exact */
        weft_tensor *px = NULL, *qpx = NULL, *qw7 = NULL, *y7 = NULL, *dx = NULL, *dw = NULL,
                    *f = NULL, *want = NULL, *gr = NULL, *wr = NULL;
        uint8_t bytes[8 * 96];
        for (int i = 0; i < 8 * 96; i++) /* runs of 0 and 255 make the largest pairs */
            bytes[i] = (uint8_t)(i % 7 < 3 ? 255 : i % 7 == 3 ? 0 : (i * 37) % 256);
        px = from_data(bytes, (int64_t[]){8, 96}, 2, WEFT_UINT8);
        weft_make_per_tensor_quantized(&qpx, px, 0.02, 73);
        weft_quantize_per_tensor(&qw7, w, amax / 63.5, 0, WEFT_INT8);
        is_int(qlinear(&y7, qpx, qw7, b, 1.0, 128, false), 0,
               "linear of full-range u8 input by 7-bit weights");
        weft_dequantize(&dx, qpx);
        weft_dequantize(&dw, qw7);
        weft_linear(&f, dx, dw, b);
        weft_quantize_per_tensor(&want, f, 1.0, 128, WEFT_UINT8);
        weft_int_repr(&gr, y7);
        weft_int_repr(&wr, want);
        is_int(mismatches(gr, wr, 1), 0, "full-range input: within one step of the float reference");
        weft_tensor *more[] = {px, qpx, qw7, y7, dx, dw, f, want, gr, wr};
        for (int i = 0; i < 10; i++)
            weft_tensor_release(more[i]);
    }
    weft_tensor *all[] = {x, w, b, qx, qw, y};
    for (int i = 0; i < 6; i++)
        weft_tensor_release(all[i]);
}

/* stride s, padding p, dilation 1 */
static int qconv(weft_tensor **out, const weft_tensor *x, const weft_tensor *w,
                 const weft_tensor *b, int64_t s, int64_t p, int64_t groups, double scale,
                 int64_t zp, bool relu)
{
    return weft_quantized_conv2d(out, x, w, b, (int64_t[]){s, s}, (int64_t[]){p, p},
                                 (int64_t[]){1, 1}, groups, scale, zp, relu);
}

/* 7-bit symmetric per-channel (axis 0) qint8 of w: scales max|w| / 63 a
 * channel (exact pairs on AVX2 without VNNI, as above). */
static weft_tensor *per_channel_7bit(const weft_tensor *w)
{
    int64_t oc = weft_tensor_size(w, 0), per = weft_tensor_numel(w) / oc;
    double *s = calloc((size_t)oc, sizeof *s);
    int64_t *z = calloc((size_t)oc, sizeof *z);
    for (int64_t c = 0; c < oc; c++)
        for (int64_t i = 0; i < per; i++)
            s[c] = fmax(s[c], fabs(at(w, c * per + i)) / 63);
    weft_tensor *sc = from_data(s, (int64_t[]){oc}, 1, WEFT_FLOAT64);
    weft_tensor *zp = from_data(z, (int64_t[]){oc}, 1, WEFT_INT64), *q = NULL;
    weft_quantize_per_channel(&q, w, sc, zp, 0, WEFT_INT8);
    weft_tensor_release(sc);
    weft_tensor_release(zp);
    free(s);
    free(z);
    return q;
}

/* oneDNN's int8 products run in pieces of rows (linear) or images
 * (conv2d) on weft's pool, each piece with OpenMP at one thread
 * (layouts/quantized/dnnl_common.h): the same integers at 1, 2 and 3
 * threads, whatever the pieces (even ones, a remainder, fewer rows than
 * threads), equal to the float reference within a step; and no thread
 * beyond weft's pool (OpenMP's own team, which oneDNN started at the
 * calling thread's OpenMP setting before, whatever weft's thread count).
 * Called first, before anything else of oneDNN runs. */
static void test_int8_pieces(void)
{
    weft_manual_seed(31);
    int before = dir_entries("/proc/self/task");
    weft_tensor *w = NULL, *b = NULL, *wc = NULL, *bc = NULL, *qw = NULL, *qwc = NULL;
    weft_randn(&w, (int64_t[]){96, 256}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
    weft_randn(&b, (int64_t[]){96}, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
    weft_randn(&wc, (int64_t[]){16, 16, 3, 3}, 4, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
    weft_randn(&bc, (int64_t[]){16}, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
    qw = per_channel_7bit(w);
    qwc = per_channel_7bit(wc);
    /* rows x 256 x 96: from 43 rows past the split's 2^20 multiply-adds */
    static const int64_t rows[] = {5, 64, 333, 334, 1};
    const int nrows = (int)(sizeof rows / sizeof *rows);
    int probe_rc = 0;
    for (int r = 0; r < nrows; r++) {
        weft_tensor *x = NULL, *qx = NULL, *got[3] = {NULL, NULL, NULL};
        weft_randn(&x, (int64_t[]){rows[r], 256}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
        weft_quantize_per_tensor(&qx, x, 0.02, 120, WEFT_UINT8);
        bool relu = r % 2;
        int rc = 0;
        for (int t = 0; t < 3 && rc == 0; t++) {
            weft_set_num_threads(t + 1);
            rc = qlinear(&got[t], qx, qw, b, 0.5, 128, relu);
        }
        weft_set_num_threads(2);
        if (r == 0 && rc == WEFT_ENOTSUP && strstr(weft_last_error(), "without oneDNN")) {
            probe_rc = rc;
            weft_tensor_release(x);
            weft_tensor_release(qx);
            break;
        }
        if (!ok(rc == 0, "linear of %lld rows%s at 1, 2 and 3 threads", (long long)rows[r],
                relu ? " + relu" : ""))
            diag("%s", weft_last_error());
        is_int(rc ? -1 : repr_mismatches(got[0], got[1]) + repr_mismatches(got[0], got[2]), 0,
               "  the same integers at every thread count");
        weft_tensor *dx = NULL, *dw = NULL, *f = NULL, *fr = NULL, *want = NULL, *wr = NULL,
                    *gr = NULL;
        weft_dequantize(&dx, qx);
        weft_dequantize(&dw, qw);
        weft_linear(&f, dx, dw, b);
        if (relu)
            weft_relu(&fr, f);
        weft_quantize_per_tensor(&want, relu ? fr : f, 0.5, 128, WEFT_UINT8);
        weft_int_repr(&wr, want);
        weft_int_repr(&gr, got[0]);
        is_int(rc ? -1 : mismatches(gr, wr, 1), 0, "  within one step of the float reference");
        weft_tensor *all[] = {x, qx, got[0], got[1], got[2], dx, dw, f, fr, want, wr, gr};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            weft_tensor_release(all[i]);
        if (r == nrows - 2) {
            /* everything so far ran in pieces of one OpenMP thread; a
             * single row at 2 threads (next) keeps OpenMP's two */
            int after = dir_entries("/proc/self/task");
            ok(after <= before + 1, "no threads beyond weft's pool: %d before, %d after", before,
               after);
        }
    }
    if (probe_rc) {
        skip(1 + 3 * nrows + 6, "the plugin was built without oneDNN");
    } else {
        /* 5 images of 16 x 14 x 14 by 16 filters 3 x 3: 2.3M multiply-adds;
         * the input NCHW and channels-last */
        weft_tensor *x = NULL, *perm = NULL, *xl = NULL;
        weft_randn(&x, (int64_t[]){5, 16, 14, 14}, 4, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
        weft_randn(&perm, (int64_t[]){5, 14, 14, 16}, 4, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
        weft_permute(&xl, perm, (int64_t[]){0, 3, 1, 2}, 4);
        for (int layout = 0; layout < 2; layout++) {
            weft_tensor *qx = NULL, *got[3] = {NULL, NULL, NULL};
            weft_quantize_per_tensor(&qx, layout ? xl : x, 0.02, 120, WEFT_UINT8);
            int rc = 0;
            for (int t = 0; t < 3 && rc == 0; t++) {
                weft_set_num_threads(t + 1);
                rc = qconv(&got[t], qx, qwc, bc, 1, 1, 1, 0.5, 128, layout == 1);
            }
            weft_set_num_threads(2);
            const char *name = layout ? "channels-last" : "NCHW";
            if (!ok(rc == 0, "conv2d of 5 %s images at 1, 2 and 3 threads%s", name,
                    layout ? " + relu" : ""))
                diag("%s", weft_last_error());
            is_int(rc ? -1 : repr_mismatches(got[0], got[1]) + repr_mismatches(got[0], got[2]), 0,
                   "  the same integers at every thread count");
            weft_tensor *dx = NULL, *dw = NULL, *f = NULL, *fr = NULL, *want = NULL, *wr = NULL,
                        *gr = NULL;
            weft_dequantize(&dx, qx);
            weft_dequantize(&dw, qwc);
            weft_conv2d(&f, dx, dw, bc, (int64_t[]){1, 1}, 2, (int64_t[]){1, 1}, 2,
                        (int64_t[]){1, 1}, 2, 1);
            if (layout)
                weft_relu(&fr, f);
            weft_quantize_per_tensor(&want, layout ? fr : f, 0.5, 128, WEFT_UINT8);
            weft_int_repr(&wr, want);
            weft_int_repr(&gr, got[0]);
            is_int(rc ? -1 : mismatches(gr, wr, 1), 0, "  within one step of the float reference");
            weft_tensor *all[] = {qx, got[0], got[1], got[2], dx, dw, f, fr, want, wr, gr};
            for (size_t i = 0; i < sizeof all / sizeof *all; i++)
                weft_tensor_release(all[i]);
        }
        weft_tensor_release(x);
        weft_tensor_release(perm);
        weft_tensor_release(xl);
    }
    weft_tensor *all[] = {w, b, wc, bc, qw, qwc};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        weft_tensor_release(all[i]);
}

/* quantized_conv2d against the float conv2d of the dequantized operands,
 * quantized to the same output parameters: within one step (7-bit
 * per-channel weights, as for linear). */
static void test_quantized_conv2d(void)
{
    weft_manual_seed(12);
    weft_tensor *x = NULL, *w = NULL, *b = NULL, *qx = NULL, *qw = NULL;
    weft_randn(&x, (int64_t[]){2, 8, 9, 10}, 4, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
    weft_randn(&w, (int64_t[]){6, 4, 3, 3}, 4, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
    weft_randn(&b, (int64_t[]){6}, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
    weft_quantize_per_tensor(&qx, x, 0.03, 110, WEFT_UINT8);
    double s[6];
    int64_t z[6] = {0};
    for (int c = 0; c < 6; c++) {
        s[c] = 0;
        for (int64_t i = 0; i < 36; i++)
            s[c] = fmax(s[c], fabs(at(w, c * 36 + i)) / 63);
    }
    weft_tensor *sc = from_data(s, (int64_t[]){6}, 1, WEFT_FLOAT64), *zp = from_data(z, (int64_t[]){6}, 1, WEFT_INT64);
    weft_quantize_per_channel(&qw, w, sc, zp, 0, WEFT_INT8);
    weft_tensor *probe = NULL;
    int rc = qconv(&probe, qx, qw, b, 1, 1, 2, 0.2, 90, false);
    weft_tensor_release(probe);
    if (rc == WEFT_ENOTSUP && strstr(weft_last_error(), "without oneDNN")) {
        skip(5, "the plugin was built without oneDNN");
    } else {
        for (int relu = 0; relu < 2; relu++) {
            weft_tensor *dx = NULL, *dw = NULL, *f = NULL, *r = NULL, *want = NULL, *wr = NULL,
                        *gr = NULL, *got = NULL;
            weft_dequantize(&dx, qx);
            weft_dequantize(&dw, qw);
            weft_conv2d(&f, dx, dw, b, (int64_t[]){2, 2}, 2, (int64_t[]){1, 1}, 2,
                        (int64_t[]){1, 1}, 2, 2);
            if (relu)
                weft_relu(&r, f);
            weft_quantize_per_tensor(&want, relu ? r : f, 0.2, 90, WEFT_UINT8);
            is_int(qconv(&got, qx, qw, b, 2, 1, 2, 0.2, 90, relu), 0, "quantized_conv2d%s, stride 2, "
                   "groups 2", relu ? " + relu" : "");
            weft_int_repr(&wr, want);
            weft_int_repr(&gr, got);
            ok(weft_tensor_ndim(gr) == 4 && weft_tensor_size(gr, 2) == 5 && weft_tensor_size(gr, 3) == 5,
               "the output is (2, 6, 5, 5)");
            is_int(mismatches(gr, wr, 1), 0, "within one step of the float reference");
            weft_tensor *all[] = {dx, dw, f, r, want, wr, gr, got};
            for (int i = 0; i < 8; i++)
                weft_tensor_release(all[i]);
        }
        weft_tensor *bad = NULL;
        is_int(qconv(&bad, qx, qw, b, 1, 1, 3, 0.2, 90, false), WEFT_ESHAPE, "groups 3: refused");
        ok(bad == NULL, "nothing came out");
        /* 2^62 weight channels a group beside no output channels: times
         * groups 2 past int64, refused without the overflow (UBSan) */
        weft_tensor *wf = NULL, *wq = NULL;
        weft_empty(&wf, (int64_t[]){0, (int64_t)1 << 62, 1, 1}, 4, WEFT_FLOAT32, WEFT_DEVICE_CPU);
        is_int(wf ? weft_quantize_per_tensor(&wq, wf, 0.1, 0, WEFT_INT8) : -1, 0,
               "an empty weight of 2^62 channels a group quantizes");
        is_int(qconv(&bad, qx, wq, NULL, 1, 1, 2, 0.2, 90, false), WEFT_ESHAPE,
               "and with groups 2 is refused by name: %s", weft_last_error());
        weft_tensor_release(wf);
        weft_tensor_release(wq);
    }
    weft_tensor *all[] = {x, w, b, qx, qw, sc, zp};
    for (int i = 0; i < 7; i++)
        weft_tensor_release(all[i]);
}

/* The convolution's cache after a write into the weight: with an input
 * zero point (folded into the bias with the weight's sums, which the cache
 * keeps beside the packed weight) the call after copy_ must give what a
 * fresh weight of the new values gives. */
static void test_packed_conv_weight_written(void)
{
    weft_manual_seed(51);
    weft_tensor *x = NULL, *w = NULL, *w2 = NULL, *qx = NULL, *qw = NULL, *qw2 = NULL,
                *y1 = NULL, *y2 = NULL, *want = NULL;
    weft_randn(&x, (int64_t[]){2, 3, 7, 6}, 4, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
    weft_randn(&w, (int64_t[]){5, 3, 3, 3}, 4, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
    weft_quantize_per_tensor(&qx, x, 0.03, 97, WEFT_UINT8);
    weft_quantize_per_tensor(&qw, w, 0.05, 0, WEFT_INT8);
    /* every weight up by one step: the sums change, not only their signs */
    weft_add_scalar(&w2, w, 0.05);
    weft_quantize_per_tensor(&qw2, w2, 0.05, 0, WEFT_INT8);
    int rc = qconv(&y1, qx, qw, NULL, 1, 1, 1, 0.1, 40, false);
    if (rc == WEFT_ENOTSUP && strstr(weft_last_error(), "without oneDNN")) {
        skip(3, "the plugin was built without oneDNN");
    } else {
        is_int(rc, 0, "conv cache: the first call (input zero point 97, padding 1)");
        is_int(weft_copy_(qw, w2), 0, "conv cache: copy_ of new values into the weight");
        is_int(qconv(&y2, qx, qw, NULL, 1, 1, 1, 0.1, 40, false) |
                   qconv(&want, qx, qw2, NULL, 1, 1, 1, 0.1, 40, false),
               0, "conv cache: the call after the write and one with a fresh weight");
        is_int(y2 && want ? repr_mismatches(y2, want) : -1, 0,
               "conv cache: the same integers (the packing and the weight sums rebuilt)");
    }
    weft_tensor *all[] = {x, w, w2, qx, qw, qw2, y1, y2, want};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        weft_tensor_release(all[i]);
}

/* The maxima of the 2 x 2, stride 2 windows of x's integers (N, C, H, W),
 * by the definition, read element by element whatever x's layout. */
static weft_tensor *pool_2x2_reference(const weft_tensor *x)
{
    weft_tensor *r = NULL, *want = NULL;
    weft_int_repr(&r, x);
    int64_t n = weft_tensor_size(r, 0), c = weft_tensor_size(r, 1);
    int64_t oh = weft_tensor_size(r, 2) / 2, ow = weft_tensor_size(r, 3) / 2;
    weft_empty(&want, (int64_t[]){n, c, oh, ow}, 4, WEFT_FLOAT64, WEFT_DEVICE_CPU);
    double *o = weft_tensor_data_ptr(want);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < c; j++)
            for (int64_t y = 0; y < oh; y++)
                for (int64_t x0 = 0; x0 < ow; x0++) {
                    double best = -1e300, v;
                    for (int k = 0; k < 4; k++) {
                        int64_t idx[4] = {i, j, 2 * y + k / 2, 2 * x0 + k % 2};
                        weft_tensor_get(r, idx, &v);
                        best = fmax(best, v);
                    }
                    *o++ = best;
                }
    weft_tensor_release(r);
    return want;
}

/* max_pool2d's 2 x 2, stride 2 paths (the CNN's pools) for each integer
 * dtype, odd sizes (the last row and column dropped), an NCHW input and a
 * channels-last one (as quantized_conv2d returns: pooled without a copy),
 * against the windows' maxima; then a
 * channels-last convolution output fed to the next convolution equals the
 * same output made contiguous first, integer for integer. */
static void test_pool_and_conv_layouts(void)
{
    weft_manual_seed(21);
    weft_tensor *f = NULL;
    weft_randn(&f, (int64_t[]){2, 9, 11, 5}, 4, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL); /* N H W C */
    static const weft_dtype dtypes[3] = {WEFT_UINT8, WEFT_INT8, WEFT_INT32};
    static const int64_t zps[3] = {128, -3, 7};
    for (int t = 0; t < 3; t++)
        for (int channels_last = 0; channels_last < 2; channels_last++) {
            weft_tensor *nhwc = NULL, *x = NULL, *c = NULL, *m = NULL, *got = NULL, *want = NULL;
            weft_quantize_per_tensor(&nhwc, f, 0.05, zps[t], dtypes[t]);
            weft_quantized_permute(&x, nhwc, (int64_t[]){0, 3, 1, 2}, 4); /* (2, 5, 9, 11) */
            if (!channels_last) {
                weft_quantized_contiguous(&c, x);
                weft_tensor_release(x);
                x = c;
            }
            is_int(weft_max_pool2d(&m, x, (int64_t[]){2, 2}, 2, (int64_t[]){2, 2}, 2,
                                   (int64_t[]){0, 0}, 2, (int64_t[]){1, 1}, 2, false),
                   0, "max_pool2d 2x2 stride 2 of a %s %s (2, 5, 9, 11) tensor",
                   channels_last ? "channels-last" : "contiguous", weft_dtype_name(dtypes[t]));
            want = pool_2x2_reference(x);
            weft_int_repr(&got, m);
            ok(weft_tensor_ndim(got) == 4 && weft_tensor_size(got, 1) == 5 &&
                   weft_tensor_size(got, 2) == 4 && weft_tensor_size(got, 3) == 5,
               "the output is (2, 5, 4, 5)");
            is_int(mismatches(got, want, 0), 0, "every window's maximum");
            weft_tensor *scale = NULL;
            weft_q_scale(&scale, m);
            is_double(at(scale, 0), 0.05, 0, "the quantizer kept");
            weft_tensor *all[] = {nhwc, x, m, got, want, scale};
            for (int i = 0; i < 6; i++)
                weft_tensor_release(all[i]);
        }
    weft_tensor_release(f);

    weft_tensor *x = NULL, *w = NULL, *w2 = NULL, *qx = NULL, *qw = NULL, *qw2 = NULL;
    weft_randn(&x, (int64_t[]){3, 4, 10, 9}, 4, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
    weft_randn(&w, (int64_t[]){8, 4, 3, 3}, 4, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
    weft_randn(&w2, (int64_t[]){6, 8, 3, 3}, 4, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
    weft_quantize_per_tensor(&qx, x, 0.03, 110, WEFT_UINT8);
    weft_quantize_per_tensor(&qw, w, 0.02, 0, WEFT_INT8);
    weft_quantize_per_tensor(&qw2, w2, 0.02, 0, WEFT_INT8);
    weft_tensor *y = NULL, *probe = NULL;
    int rc = qconv(&probe, qx, qw, NULL, 1, 1, 1, 0.1, 20, true);
    weft_tensor_release(probe);
    if (rc == WEFT_ENOTSUP && strstr(weft_last_error(), "without oneDNN")) {
        skip(4, "the plugin was built without oneDNN");
    } else {
        weft_tensor *yc = NULL, *z = NULL, *zc = NULL;
        qconv(&y, qx, qw, NULL, 1, 1, 1, 0.1, 20, true);
        weft_quantized_contiguous(&yc, y);
        is_int(qconv(&z, y, qw2, NULL, 1, 1, 1, 0.2, 30, false), 0,
               "a convolution's output into the next convolution, as it came");
        qconv(&zc, yc, qw2, NULL, 1, 1, 1, 0.2, 30, false);
        is_int(repr_mismatches(z, zc), 0, "the same integers as from its contiguous copy");
        weft_tensor *dy = NULL, *dyc = NULL, *ry = NULL, *ryc = NULL;
        weft_dequantize(&dy, y);
        weft_dequantize(&dyc, yc);
        is_int(mismatches(dy, dyc, 0), 0, "the output dequantizes as its contiguous copy does");
        weft_relu(&ry, y);
        weft_relu(&ryc, yc);
        is_int(repr_mismatches(ry, ryc), 0, "and relu of it too");
        weft_tensor *all[] = {y, yc, z, zc, dy, dyc, ry, ryc};
        for (int i = 0; i < 8; i++)
            weft_tensor_release(all[i]);
    }
    weft_tensor *all[] = {x, w, w2, qx, qw, qw2};
    for (int i = 0; i < 6; i++)
        weft_tensor_release(all[i]);
}

/* The passes that run on weft's pool in pieces (the pools over planes or
 * images, quantize and dequantize over runs of one scale): at 1 and 3
 * threads the same integers and floats, on inputs large enough to be cut
 * into several pieces (a piece is at least 64 Ki values); the 2 x 2 pools
 * also against the windows' maxima. */
static void test_parallel_passes(void)
{
    weft_manual_seed(41);
    weft_tensor *f = NULL;
    /* N H W C: 16 images of 34 x 18 x 24, about 4 pieces either way */
    weft_randn(&f, (int64_t[]){16, 34, 18, 24}, 4, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
    for (int channels_last = 0; channels_last < 2; channels_last++) {
        weft_tensor *nhwc = NULL, *x = NULL, *c = NULL, *m[2][2] = {{NULL}}, *r[2][2] = {{NULL}};
        weft_quantize_per_tensor(&nhwc, f, 0.05, 128, WEFT_UINT8);
        weft_quantized_permute(&x, nhwc, (int64_t[]){0, 3, 1, 2}, 4);
        if (!channels_last) {
            weft_quantized_contiguous(&c, x);
            weft_tensor_release(x);
            x = c;
        }
        int rc = 0;
        for (int t = 0; t < 2; t++) {
            weft_set_num_threads(t ? 3 : 1);
            /* the 2 x 2 path, then the general one (3 x 3, stride 2, padding 1) */
            rc |= weft_max_pool2d(&m[t][0], x, (int64_t[]){2, 2}, 2, (int64_t[]){2, 2}, 2,
                                  (int64_t[]){0, 0}, 2, (int64_t[]){1, 1}, 2, false);
            rc |= weft_max_pool2d(&m[t][1], x, (int64_t[]){3, 3}, 2, (int64_t[]){2, 2}, 2,
                                  (int64_t[]){1, 1}, 2, (int64_t[]){1, 1}, 2, false);
            weft_int_repr(&r[t][0], m[t][0]);
            weft_int_repr(&r[t][1], m[t][1]);
        }
        weft_set_num_threads(2);
        const char *layout = channels_last ? "channels-last" : "contiguous";
        is_int(rc, 0, "max_pool2d of a %s (16, 24, 34, 18) uint8 tensor at 1 and 3 threads",
               layout);
        is_int(rc ? -1 : mismatches(r[0][0], r[1][0], 0), 0, "  2 x 2: the same integers");
        weft_tensor *want = rc ? NULL : pool_2x2_reference(x);
        is_int(rc ? -1 : mismatches(r[1][0], want, 0), 0, "  2 x 2: every window's maximum");
        is_int(rc ? -1 : mismatches(r[0][1], r[1][1], 0), 0, "  3 x 3, padding 1: the same integers");
        weft_tensor *all[] = {nhwc, x, m[0][0], m[0][1], m[1][0], m[1][1],
                              r[0][0], r[0][1], r[1][0], r[1][1], want};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            weft_tensor_release(all[i]);
    }
    weft_tensor_release(f);

    /* per tensor: 19 runs of 16 Ki values (the last short); per channel
     * along dim 0 (7 runs of 50,000) and along dim 1 (runs of one value
     * whose scale repeats every 40) */
    static const int64_t shapes[3][2] = {{1, 300001}, {7, 50000}, {3000, 40}};
    for (int k = 0; k < 3; k++) {
        weft_tensor *x = NULL, *scales = NULL, *zps = NULL, *q[2] = {NULL, NULL},
                    *r[2] = {NULL, NULL}, *d[2] = {NULL, NULL};
        weft_randn(&x, shapes[k], 2, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL);
        int axis = k == 2 ? 1 : 0;
        int64_t nch = shapes[k][axis];
        if (k > 0) {
            weft_empty(&scales, (int64_t[]){nch}, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU);
            weft_empty(&zps, (int64_t[]){nch}, 1, WEFT_INT64, WEFT_DEVICE_CPU);
            double *sv = weft_tensor_data_ptr(scales);
            int64_t *zv = weft_tensor_data_ptr(zps);
            for (int64_t c = 0; c < nch; c++)
                sv[c] = 0.01 + 0.002 * (double)c, zv[c] = (c * 7) % 11 - 5;
        }
        int rc = 0;
        for (int t = 0; t < 2; t++) {
            weft_set_num_threads(t ? 3 : 1);
            rc |= k == 0 ? weft_quantize_per_tensor(&q[t], x, 0.02, 3, WEFT_INT8)
                         : weft_quantize_per_channel(&q[t], x, scales, zps, axis, WEFT_INT8);
            rc |= weft_int_repr(&r[t], q[t]);
            rc |= weft_dequantize(&d[t], q[t]);
        }
        weft_set_num_threads(2);
        const char *what = k == 0 ? "per tensor" : axis ? "per channel, axis 1" : "per channel, axis 0";
        is_int(rc, 0, "quantize and dequantize (%lld, %lld) %s at 1 and 3 threads",
               (long long)shapes[k][0], (long long)shapes[k][1], what);
        is_int(rc ? -1 : mismatches(r[0], r[1], 0), 0, "  the same integers");
        is_int(rc ? -1 : mismatches(d[0], d[1], 0), 0, "  the same floats back");
        /* and the last value as the formula gives it (a run's offset or
         * scale off by one would move it) */
        int64_t last[2] = {shapes[k][0] - 1, shapes[k][1] - 1};
        double xv = 0, rv = 0;
        weft_tensor_get(x, last, &xv);
        if (r[1])
            weft_tensor_get(r[1], last, &rv);
        double sc = k == 0 ? 0.02 : 0.01 + 0.002 * (double)(nch - 1);
        double zp = k == 0 ? 3 : (double)(((nch - 1) * 7) % 11 - 5);
        double wantv = fmin(127, fmax(-128, nearbyint((double)(float)(xv * (float)(1.0 / sc))) + zp));
        is_double(rv, wantv, 1, "  the last value: %g quantizes to %g (got %g)", xv, wantv, rv);
        weft_tensor *all[] = {x, scales, zps, q[0], q[1], r[0], r[1], d[0], d[1]};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            weft_tensor_release(all[i]);
    }
}

/* the hand-written operators: relu exact in the integers, max_pool2d
 * keeps the integers, add within one step of the float reference, and the
 * quantizers an operator cannot combine refused */
static void test_quantized_ops(void)
{
    const float v[6] = {-1.0f, -0.25f, 0, 0.5f, 1.25f, 3.0f};
    weft_tensor *f = from_floats(v, (int64_t[]){1, 1, 2, 3}, 4), *q = NULL, *r = NULL, *ri = NULL;
    weft_quantize_per_tensor(&q, f, 0.25, 10, WEFT_UINT8);
    {
        /* an empty plane: refused, as the float pools and torch refuse it
         * (found by fuzz_python_ops: 0 / 0 planes, SIGFPE) */
        weft_tensor *e = NULL, *qe = NULL, *pe = NULL;
        weft_zeros(&e, (int64_t[]){3, 4, 0, 4}, 4, WEFT_FLOAT32, WEFT_DEVICE_CPU);
        weft_quantize_per_tensor(&qe, e, 0.25, 3, WEFT_UINT8);
        int64_t k4[1] = {4}, p2[1] = {2}, one[1] = {1};
        is_int(weft_max_pool2d(&pe, qe, k4, 1, k4, 1, p2, 1, one, 1, false), WEFT_ESHAPE,
               "max_pool2d of a quantized (3, 4, 0, 4) tensor: refused");
        like(weft_last_error(), "empty", "naming the empty planes");
        ok(pe == NULL, "nothing came out");
        /* a window larger than the input (no padding), and one of 2^63 - 1
         * (fuzz_python_ops: a signed overflow, then a loop that did not
         * end): no window, refused as the float pool refuses them */
        weft_tensor *f3 = NULL, *q3 = NULL;
        weft_ones(&f3, (int64_t[]){1, 2, 3, 3}, 4, WEFT_FLOAT32, WEFT_DEVICE_CPU);
        weft_quantize_per_tensor(&q3, f3, 0.25, 3, WEFT_UINT8);
        int64_t k5[1] = {5}, zero[1] = {0}, huge[1] = {INT64_MAX};
        is_int(weft_max_pool2d(&pe, q3, k5, 1, NULL, 0, zero, 1, one, 1, false), WEFT_ESHAPE,
               "max_pool2d 5 x 5 of a quantized 3 x 3 plane: refused");
        is_int(weft_max_pool2d(&pe, q3, huge, 1, NULL, 0, zero, 1, one, 1, false), WEFT_ESHAPE,
               "max_pool2d of a 2^63 - 1 kernel: refused");
        ok(pe == NULL, "nothing came out of either");
        weft_tensor_release(f3);
        weft_tensor_release(q3);
        weft_tensor_release(e);
        weft_tensor_release(qe);
    }
    is_int(weft_relu(&r, q), 0, "relu of a quantized tensor");
    is_int(weft_tensor_layout(r), weft_layout_lookup("quantized"), "is quantized");
    weft_int_repr(&ri, r);
    ok(at(ri, 0) == 10 && at(ri, 1) == 10 && at(ri, 2) == 10 && at(ri, 3) == 12 && at(ri, 5) == 22,
       "max(q, zero_point): %g %g %g %g %g", at(ri, 0), at(ri, 1), at(ri, 2), at(ri, 3), at(ri, 5));
    weft_tensor *m = NULL, *mi = NULL;
    is_int(weft_max_pool2d(&m, q, (int64_t[]){2, 2}, 2, (int64_t[]){1, 1}, 2, (int64_t[]){0, 0}, 2,
                           (int64_t[]){1, 1}, 2, false),
           0, "max_pool2d of a quantized tensor");
    weft_int_repr(&mi, m);
    ok(weft_tensor_numel(mi) == 2 && at(mi, 0) == 15 && at(mi, 1) == 22, "the integers' maxima");
    weft_tensor *a = NULL, *ai = NULL, *qi = NULL;
    is_int(weft_quantized_add(&a, q, q, 0.5, 0, false), 0, "quantized_add(q, q, 0.5, 0)");
    weft_int_repr(&ai, a);
    ok(at(ai, 0) == 0 && at(ai, 3) == 2 && at(ai, 4) == 5 && at(ai, 5) == 12,
       "2x clamped to quint8 at scale 0.5: %g %g %g %g", at(ai, 0), at(ai, 3), at(ai, 4), at(ai, 5));
    weft_quantize_per_tensor(&qi, f, 0.25, 0, WEFT_INT8);
    weft_tensor *bad = NULL;
    is_int(weft_quantized_add(&bad, q, qi, 0.5, 0, false), WEFT_EDTYPE, "quint8 + qint8: refused");
    like(weft_last_error(), "cannot combine uint8 and int8 quantized tensors", "naming both");
    weft_tensor *rq = NULL, *rqi = NULL;
    is_int(weft_requantize(&rq, q, 0.5, 0, WEFT_INT8), 0, "requantize to qint8 at scale 0.5");
    weft_int_repr(&rqi, rq);
    ok(at(rqi, 0) == -2 && at(rqi, 5) == 6, "the values at the new parameters: %g %g", at(rqi, 0),
       at(rqi, 5));
    weft_tensor_release(rq);
    weft_tensor_release(rqi);
    weft_tensor *all[] = {f, q, r, ri, m, mi, a, ai, qi};
    for (int i = 0; i < 9; i++)
        weft_tensor_release(all[i]);
}

/* The nn library's observers (libweft, no plugin needed): torch's
 * parameters for hand-checked statistics, and their errors. */
static void observed(weft_observer *o, double *scale, double *zp, int i)
{
    weft_tensor *s = NULL, *z = NULL;
    weft_observer_qparams(o, &s, &z);
    *scale = s ? at(s, i) : -1;
    *zp = z ? at(z, i) : -1;
    weft_tensor_release(s);
    weft_tensor_release(z);
}

static void test_observers(void)
{
    const float a[3] = {-1, 0.5f, 3}, b[4] = {-1, 2, 0.5f, -4}, m1[2] = {0, 1}, m2[2] = {0, 3};
    weft_tensor *ta = from_floats(a, (int64_t[]){3}, 1), *tb = from_floats(b, (int64_t[]){2, 2}, 2);
    weft_tensor *t1 = from_floats(m1, (int64_t[]){2}, 1), *t2 = from_floats(m2, (int64_t[]){2}, 1);
    weft_observer *o = NULL;
    double s, z;
    is_int(weft_observer_create(&o, NULL), 0, "a min-max observer (quint8, affine)");
    weft_tensor *sc = NULL, *zp = NULL;
    is_int(weft_observer_qparams(o, &sc, &zp), WEFT_EINVAL, "no parameters before any data");
    like(weft_last_error(), "seen no data", "saying why");
    is_int(weft_observer_observe(o, ta), 0, "observe [-1, 0.5, 3]");
    observed(o, &s, &z, 0);
    ok(fabs(s - 4.0 / 255) < 1e-8 && z == 64, "scale 4/255, zero point 64 (got %.9g, %g)", s, z);
    weft_observer_destroy(o);

    weft_observer_options opt = {.struct_size = sizeof opt, .dtype = WEFT_INT8, .symmetric = true};
    weft_observer_create(&o, &opt);
    weft_observer_observe(o, ta);
    observed(o, &s, &z, 0);
    ok(fabs(s - 3.0 / 127.5) < 1e-8 && z == 0, "qint8 symmetric: 3/127.5, 0 (got %.9g, %g)", s, z);
    weft_observer_destroy(o);

    opt = (weft_observer_options){.struct_size = sizeof opt, .per_channel = true, .ch_axis = 0};
    weft_observer_create(&o, &opt);
    weft_observer_observe(o, tb);
    observed(o, &s, &z, 1);
    ok(fabs(s - 4.5 / 255) < 1e-8 && z == 227, "per channel, channel 1: 4.5/255, 227 (got %.9g, %g)",
       s, z);
    observed(o, &s, &z, 0);
    ok(fabs(s - 3.0 / 255) < 1e-8 && z == 85, "channel 0: 3/255, 85 (got %.9g, %g)", s, z);
    is_int(weft_observer_observe(o, ta), WEFT_EINVAL, "3 channels after 2: refused");
    weft_observer_destroy(o);

    opt = (weft_observer_options){.struct_size = sizeof opt, .moving_average = true,
                                  .averaging_constant = 0.5};
    weft_observer_create(&o, &opt);
    weft_observer_observe(o, t1);
    weft_observer_observe(o, t2);
    observed(o, &s, &z, 0);
    ok(fabs(s - 2.0 / 255) < 1e-8 && z == 0, "moving average: max 1 + 0.5 * (3 - 1) = 2 (got %.9g)", s);
    weft_tensor *i64 = NULL;
    weft_to_dtype(&i64, ta, WEFT_INT64);
    is_int(weft_observer_observe(o, i64), WEFT_EDTYPE, "an integer tensor: refused");
    weft_observer_destroy(o);

    opt = (weft_observer_options){.struct_size = sizeof opt, .per_channel = true, .ch_axis = 3};
    weft_observer_create(&o, &opt);
    is_int(weft_observer_observe(o, tb), WEFT_EINVAL, "ch_axis 3 of a 2-d tensor: refused");
    weft_observer_destroy(o);
    o = NULL;
    opt = (weft_observer_options){.struct_size = sizeof opt, .dtype = WEFT_FLOAT32};
    is_int(weft_observer_create(&o, &opt), WEFT_EDTYPE, "a float32 observer: refused");
    opt = (weft_observer_options){.struct_size = 4};
    is_int(weft_observer_create(&o, &opt), WEFT_EINVAL, "a short options struct: refused");
    ok(o == NULL, "nothing came out");
    weft_tensor *all[] = {ta, tb, t1, t2, i64};
    for (int i = 0; i < 5; i++)
        weft_tensor_release(all[i]);
}

/* <weft/quantized.h> keeps each operator's handle after its first call:
 * across an unload of the plugin the calls say the operator is gone, and
 * after it loads again they reach the operator again (the dispatcher
 * reuses the handle for the same schema; another would be looked up by
 * name). */
static void test_handle_cache_across_reload(void)
{
    const float v[4] = {0.5f, -1.0f, 2.0f, 0.25f};
    const int64_t sizes[1] = {4};
    weft_tensor *x = from_floats(v, sizes, 1), *q = NULL, *d = NULL;
    is_int(weft_quantize_per_tensor(&q, x, 0.25, 3, WEFT_INT8), 0, "quantized (handle cached)");
    weft_tensor_release(q);
    q = NULL;
    is_int(weft_unload_plugin("quantized"), 0, "the quantized plugin unloads");
    is_int(weft_quantize_per_tensor(&q, x, 0.25, 3, WEFT_INT8), WEFT_ENOTFOUND,
           "the cached handle, undefined now, gives WEFT_ENOTFOUND");
    like(weft_last_error(), "quantize_per_tensor", "naming the operator");
    ok(q == NULL, "and no result");
    is_int(weft_load_plugin("libweft-quantized.so"), 0, "the plugin loads again");
    is_int(weft_quantize_per_tensor(&q, x, 0.25, 3, WEFT_INT8), 0,
           "the same call reaches the operator defined again");
    is_int(weft_dequantize(&d, q), 0, "and its dequantize");
    const float *dv = d ? weft_tensor_data_ptr(d) : NULL;
    ok(dv && dv[0] == 0.5f && dv[1] == -1.0f && dv[2] == 2.0f && dv[3] == 0.25f,
       "with the values quantized and back");
    weft_tensor_release(d);
    weft_tensor_release(q);
    weft_tensor_release(x);
}

/* Which int8 GEMM quantized_linear runs ("avx2" or "onednn"): the block
 * layouts' description says it. */
static const char *int8_gemm(char *buf, size_t size)
{
    weft_tensor *f = NULL, *w = NULL;
    char *text = NULL;
    weft_zeros(&f, (int64_t[]){1, 32}, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    weft_to_layout(&w, f, weft_layout_lookup("q4_0"));
    weft_tensor_to_string(&text, w);
    const char *at = text ? strstr(text, "int8 linear: ") : NULL;
    snprintf(buf, size, "%s", !at ? "?" : strncmp(at + 13, "avx2", 4) == 0 ? "avx2" : "onednn");
    weft_free(text);
    weft_tensor_release(f);
    weft_tensor_release(w);
    return buf;
}

static uint32_t lcg(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* quantized_linear against its definition, computed here: the sum of
 * u8 x s8 products in pairs of k, each pair saturated to 16 bits as
 * vpmaddubsw does (oneDNN and torch on AVX2 without VNNI; exact where
 * nothing saturates, and on VNNI), then oneDNN's float requantization:
 * ((sum + bias') * scale, relu, + zero point, clamped, rounded half to
 * even), with the input zero point folded into bias' as the plugin does.
 * The weights mix columns of 8-bit range (pairs that saturate with large
 * inputs), 6-bit and 4-bit range, and rows of small and full-range inputs,
 * so that the AVX2 GEMM runs groups both ways (igemm.c) and the tails of
 * rows (not a multiple of 4) and columns (not of 16).  The AVX2 GEMM
 * must equal the definition byte for byte; oneDNN's each output within one
 * step (its post-processing may round in another order) of the definition
 * or, where a pair saturated, of the exact sum's (with VNNI, vpdpbusd
 * adds the products in 32 bits); k = 100 (not a multiple of 8) goes to
 * oneDNN in both. */
static void test_linear_definition(void)
{
    char gemm[16];
    int8_gemm(gemm, sizeof gemm);
    diag("int8 linear GEMM: %s", gemm);
    static const struct {
        int64_t m, k, n, zp;
        bool bias, relu, edge;
    } cases[] = {{67, 64, 40, 37, true, false, false}, {130, 784, 33, 0, true, true, false},
                 {3, 96, 10, 200, false, false, false}, {257, 200, 256, 73, true, true, false},
                 {5, 100, 24, 5, true, false, false}, {1, 8, 1, 0, false, true, false},
                 {4, 16, 16, 0, false, false, true},
                 /* empty: no rows (oneDNN's plan divided by zero pieces),
                  * no inputs (every row the requantized bias) */
                 {0, 64, 40, 9, true, false, false}, {3, 0, 5, 9, true, true, false},
                 {3, 0, 5, 0, true, false, false}};
    uint32_t seed = 7;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        int64_t m = cases[c].m, k = cases[c].k, n = cases[c].n, zp = cases[c].zp;
        uint8_t *x = malloc((size_t)(m * k));
        int8_t *w = malloc((size_t)(n * k));
        double *sw = malloc(sizeof *sw * (size_t)n);
        int64_t *zw = calloc((size_t)n, sizeof *zw);
        float *bias = malloc(sizeof *bias * (size_t)n);
        uint8_t *want = malloc((size_t)(m * n)), *exact_want = malloc((size_t)(m * n));
        for (int64_t r = 0; r < m; r++)
            for (int64_t i = 0; i < k; i++) {
                uint32_t v = lcg(&seed);
                x[r * k + i] = v % 10 < 3 ? 0 : (uint8_t)(r % 4 == 1 ? v % 61 : v % 256);
                if (cases[c].edge) /* at the 16-bit bound: 128 x (4 x 64) = 32768 */
                    x[r * k + i] = 128;
            }
        for (int64_t j = 0; j < n; j++) {
            int range = j % 3 == 0 ? 128 : j % 3 == 1 ? 32 : 8;
            for (int64_t i = 0; i < k; i++)
                w[j * k + i] = cases[c].edge ? (int8_t)(j % 2 ? 64 : 63)
                                             : (int8_t)((int)(lcg(&seed) % (unsigned)(2 * range)) - range);
            sw[j] = 0.001 * (double)(1 + j % 5);
            bias[j] = (float)((double)(lcg(&seed) % 2001) / 1000.0 - 1.0);
        }
        const double sx = 0.02, so = 0.1;
        const int64_t zo = cases[c].relu ? 0 : 128;
        for (int64_t j = 0; j < n; j++) {
            float wsf = (float)sw[j];
            int64_t wsum = 0;
            for (int64_t i = 0; i < k; i++)
                wsum += w[j * k + i];
            float b = cases[c].bias ? bias[j] / ((float)sx * wsf) : 0.0f;
            b -= (float)(zp * wsum);
            float scale = (float)sx * wsf / (float)so;
            for (int64_t r = 0; r < m; r++) {
                int32_t acc[2] = {0, 0}; /* pairs saturated; exact */
                for (int64_t i = 0; i < k; i += 2) {
                    int32_t pair = x[r * k + i] * w[j * k + i] + x[r * k + i + 1] * w[j * k + i + 1];
                    acc[0] += pair > 32767 ? 32767 : pair < -32768 ? -32768 : pair;
                    acc[1] += pair;
                }
                for (int e = 0; e < 2; e++) {
                    float v = ((float)acc[e] + b) * scale;
                    if (cases[c].relu)
                        v = v > 0.0f ? v : 0.0f;
                    v += (float)zo;
                    v = v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
                    (e ? exact_want : want)[r * n + j] = (uint8_t)nearbyintf(v);
                }
            }
        }
        weft_tensor *xi = from_data(x, (int64_t[]){m, k}, 2, WEFT_UINT8),
                    *wi = from_data(w, (int64_t[]){n, k}, 2, WEFT_INT8),
                    *swt = from_data(sw, (int64_t[]){n}, 1, WEFT_FLOAT64),
                    *zwt = from_data(zw, (int64_t[]){n}, 1, WEFT_INT64),
                    *bt = from_data(bias, (int64_t[]){n}, 1, WEFT_FLOAT32),
                    *wantt = from_data(want, (int64_t[]){m, n}, 2, WEFT_UINT8);
        weft_tensor *qx = NULL, *qw = NULL, *y[2] = {NULL, NULL}, *r[2] = {NULL, NULL};
        weft_make_per_tensor_quantized(&qx, xi, sx, zp);
        weft_make_per_channel_quantized(&qw, wi, swt, zwt, 0);
        int rc = 0;
        for (int t = 0; t < 2; t++) {
            weft_set_num_threads(t ? 3 : 1);
            rc |= qlinear(&y[t], qx, qw, cases[c].bias ? bt : NULL, so, zo, cases[c].relu);
            if (y[t])
                weft_int_repr(&r[t], y[t]);
        }
        weft_set_num_threads(2);
        bool exact = (strcmp(gemm, "avx2") == 0 && k % 8 == 0) || k == 0;
        int64_t off = r[0] ? mismatches(r[0], wantt, 0) : -1, far = 0, saturated = 0;
        const uint8_t *got = r[0] ? weft_tensor_data_ptr(r[0]) : NULL;
        for (int64_t i = 0; got && i < m * n; i++) {
            far += abs(got[i] - want[i]) > 1 && abs(got[i] - exact_want[i]) > 1;
            saturated += want[i] != exact_want[i];
        }
        ok(rc == 0 && r[0] && r[1] && (exact ? off == 0 : far == 0) &&
               mismatches(r[0], r[1], 0) == 0,
           "linear %lld x %lld -> %lld (input zero point %lld%s%s%s): %s the definition "
           "(%lld of %lld differ; %lld where a pair saturates), the same at 1 and 3 threads",
           (long long)m, (long long)k, (long long)n, (long long)zp, cases[c].bias ? ", bias" : "",
           cases[c].relu ? ", relu" : "", cases[c].edge ? ", sums at the 16-bit bound" : "",
           exact ? "equal to" : "within one step of",
           (long long)off, (long long)(m * n), (long long)saturated);
        weft_tensor *all[] = {xi, wi, swt, zwt, bt, wantt, qx, qw, y[0], y[1], r[0], r[1]};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            weft_tensor_release(all[i]);
        free(x), free(w), free(sw), free(zw), free(bias), free(want), free(exact_want);
    }
}

int main(void)
{
    ok(weft_load_default_plugins() >= 1, "default plugins loaded");
    if (weft_layout_lookup("quantized") < 0)
        skip_all("libweft-quantized.so is not in the plugin path");
    test_int8_pieces();
    /* twice: the first pass also makes what the core keeps for the
     * process (first-call allocations); the second must give back every
     * byte it takes.  tests/memcheck.sh runs this under valgrind for the
     * payloads' malloc'd memory. */
    weft_allocator_stats before = {.struct_size = sizeof before}, after = {.struct_size = sizeof after};
    for (int pass = 0; pass < 2; pass++) {
        weft_host_allocator_stats(&before);
        test_per_tensor();
        test_per_channel();
        test_views();
        test_errors();
        test_blocks();
        test_quantized_linear();
        test_linear_definition();
        test_quantized_conv2d();
        test_packed_conv_weight_written();
        test_quantized_ops();
        test_pool_and_conv_layouts();
        test_parallel_passes();
        test_observers();
        weft_host_allocator_stats(&after);
    }
    is_int((long long)after.allocated_bytes, (long long)before.allocated_bytes,
           "every tensor of the second pass was freed (host bytes in use as before)");
    test_handle_cache_across_reload();
    return done_testing();
}
