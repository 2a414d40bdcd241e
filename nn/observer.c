/* nn/observer.c — post-training quantization's observers (issue 17):
 * running min-max statistics of float tensors and the scale and zero point
 * PyTorch's observers give for them, written with weft's operators
 * (public API only, as all of nn/).  The quantizing itself belongs to the
 * quantized layout plugin; nothing here needs it. */
#include <stdlib.h>

#include <weft/nn.h>
#include <weft/ops.h>
#include <weft/plugin.h> /* weft_set_error */

struct weft_observer {
    weft_observer_options o;
    int64_t qmin, qmax;
    weft_tensor *min, *max; /* float32: 0-d, or one per channel */
};

int weft_observer_create(weft_observer **out, const weft_observer_options *options)
{
    if (!out)
        return weft_set_error(WEFT_EINVAL, "observer_create: out is NULL");
    *out = NULL;
    weft_observer_options o = {.struct_size = sizeof o, .dtype = WEFT_UINT8};
    if (options) {
        if (options->struct_size < sizeof o)
            return weft_set_error(WEFT_EINVAL, "observer_create: options.struct_size %zu is "
                                               "smaller than %zu",
                                  options->struct_size, sizeof o);
        o = *options;
        if (o.dtype == 0) /* bool: never an observer's dtype, so the zeroed default */
            o.dtype = WEFT_UINT8;
    }
    if (o.averaging_constant == 0)
        o.averaging_constant = 0.01;
    if (!(o.averaging_constant > 0 && o.averaging_constant <= 1))
        return weft_set_error(WEFT_EINVAL, "observer_create: averaging_constant %g is not in (0, 1]",
                              o.averaging_constant);
    if (o.dtype != WEFT_UINT8 && o.dtype != WEFT_INT8)
        return weft_set_error(WEFT_EDTYPE, "observer_create: dtype must be uint8 (quint8) or "
                                           "int8 (qint8), not %s",
                              weft_dtype_name(o.dtype));
    weft_observer *ob = calloc(1, sizeof *ob);
    if (!ob)
        return weft_set_error(WEFT_ENOMEM, "observer_create: out of memory");
    ob->o = o;
    bool u = o.dtype == WEFT_UINT8;
    ob->qmin = u ? 0 : o.reduce_range ? -64 : -128;
    ob->qmax = u ? (o.reduce_range ? 127 : 255) : (o.reduce_range ? 63 : 127);
    *out = ob;
    return 0;
}

void weft_observer_destroy(weft_observer *o)
{
    if (!o)
        return;
    weft_tensor_release(o->min);
    weft_tensor_release(o->max);
    free(o);
}

/* x's minimum and maximum, whole or per channel. */
static int batch_range(weft_observer *o, const weft_tensor *x, weft_tensor **lo, weft_tensor **hi)
{
    if (!o->o.per_channel) {
        int rc = weft_amin(lo, x, NULL, 0, false);
        return rc < 0 ? rc : weft_amax(hi, x, NULL, 0, false);
    }
    int nd = weft_tensor_ndim(x), axis = o->o.ch_axis < 0 ? o->o.ch_axis + nd : o->o.ch_axis;
    if (axis < 0 || axis >= nd)
        return weft_set_error(WEFT_EINVAL, "observer_observe: ch_axis %d is out of range for a "
                                           "tensor of %d dimensions",
                              o->o.ch_axis, nd);
    int64_t dims[WEFT_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < nd; d++)
        if (d != axis)
            dims[n++] = d;
    if (n == 0) { /* a vector: each element is its own channel */
        int rc = weft_clone(lo, x);
        return rc < 0 ? rc : weft_clone(hi, x);
    }
    int rc = weft_amin(lo, x, dims, n, false);
    return rc < 0 ? rc : weft_amax(hi, x, dims, n, false);
}

/* a + c * (b - a) */
static int lerp_into(weft_tensor **a, const weft_tensor *b, double c)
{
    weft_tensor *d = NULL, *s = NULL, *r = NULL;
    int rc = weft_sub(&d, b, *a);
    if (rc == 0)
        rc = weft_mul_scalar(&s, d, c);
    if (rc == 0)
        rc = weft_add(&r, *a, s);
    weft_tensor_release(d);
    weft_tensor_release(s);
    if (rc == 0) {
        weft_tensor_release(*a);
        *a = r;
    }
    return rc;
}

static int merge(weft_tensor **acc, const weft_tensor *batch, bool is_min)
{
    weft_tensor *r = NULL;
    int rc = is_min ? weft_minimum(&r, *acc, batch) : weft_maximum(&r, *acc, batch);
    if (rc == 0) {
        weft_tensor_release(*acc);
        *acc = r;
    }
    return rc;
}

int weft_observer_observe(weft_observer *o, const weft_tensor *x)
{
    if (!o || !x)
        return weft_set_error(WEFT_EINVAL, "observer_observe: %s is NULL", o ? "x" : "the observer");
    if (!weft_dtype_is_floating(weft_tensor_dtype(x)))
        return weft_set_error(WEFT_EDTYPE, "observer_observe: expected a floating tensor, got %s",
                              weft_dtype_name(weft_tensor_dtype(x)));
    if (weft_tensor_numel(x) == 0)
        return 0;
    bool grad = weft_set_grad_enabled(false);
    weft_tensor *f = NULL, *lo = NULL, *hi = NULL;
    int rc = weft_to_dtype(&f, x, WEFT_FLOAT32);
    if (rc == 0)
        rc = batch_range(o, f, &lo, &hi);
    if (rc == 0 && o->min && weft_tensor_numel(o->min) != weft_tensor_numel(lo))
        rc = weft_set_error(WEFT_EINVAL, "observer_observe: %lld channels, after %lld before",
                            (long long)weft_tensor_numel(lo), (long long)weft_tensor_numel(o->min));
    if (rc == 0 && !o->min) {
        o->min = lo, o->max = hi;
        lo = hi = NULL;
    } else if (rc == 0 && o->o.moving_average) {
        if ((rc = lerp_into(&o->min, lo, o->o.averaging_constant)) == 0)
            rc = lerp_into(&o->max, hi, o->o.averaging_constant);
    } else if (rc == 0 && (rc = merge(&o->min, lo, true)) == 0) {
        rc = merge(&o->max, hi, false);
    }
    weft_tensor_release(f);
    weft_tensor_release(lo);
    weft_tensor_release(hi);
    weft_set_grad_enabled(grad);
    return rc;
}

int weft_observer_qparams(weft_observer *o, weft_tensor **scale, weft_tensor **zero_point)
{
    if (scale)
        *scale = NULL;
    if (zero_point)
        *zero_point = NULL;
    if (!o || !scale || !zero_point)
        return weft_set_error(WEFT_EINVAL, "observer_qparams: a NULL argument");
    if (!o->min)
        return weft_set_error(WEFT_EINVAL, "observer_qparams: the observer has seen no data");
    /* torch's _calculate_qparams, in float32 like torch's tensors */
    const double eps = 1.1920928955078125e-07;
    bool grad = weft_set_grad_enabled(false);
    weft_tensor *zero = NULL, *lo = NULL, *hi = NULL, *t = NULL, *s = NULL, *sc = NULL, *z = NULL,
                *zi = NULL, *zc = NULL, *neg = NULL;
    int rc = weft_zeros(&zero, NULL, 0, WEFT_FLOAT32, weft_tensor_device(o->min));
    if (rc == 0 && (rc = weft_minimum(&lo, o->min, zero)) == 0)
        rc = weft_maximum(&hi, o->max, zero);
    double span = (double)(o->qmax - o->qmin);
    if (rc == 0 && o->o.symmetric) {
        if ((rc = weft_neg(&neg, lo)) == 0 && (rc = weft_maximum(&t, neg, hi)) == 0 &&
            (rc = weft_div_scalar(&s, t, span / 2)) == 0 &&
            (rc = weft_clamp(&sc, s, &eps, NULL)) == 0) {
            double zp = o->o.dtype == WEFT_UINT8 ? 128 : 0;
            rc = weft_full(&zc, weft_tensor_sizes(sc), weft_tensor_ndim(sc), zp, WEFT_INT64,
                           weft_tensor_device(sc));
        }
    } else if (rc == 0) {
        /* zero_point = qmin - round(lo / scale), clamped */
        double qmin = (double)o->qmin, qmax = (double)o->qmax;
        weft_tensor *d = NULL, *r = NULL;
        if ((rc = weft_sub(&t, hi, lo)) == 0 && (rc = weft_div_scalar(&s, t, span)) == 0 &&
            (rc = weft_clamp(&sc, s, &eps, NULL)) == 0 && (rc = weft_div(&d, lo, sc)) == 0 &&
            (rc = weft_round(&r, d)) == 0 && (rc = weft_to_dtype(&zi, r, WEFT_INT64)) == 0 &&
            (rc = weft_neg(&neg, zi)) == 0 && (rc = weft_add_scalar(&z, neg, qmin)) == 0)
            rc = weft_clamp(&zc, z, &qmin, &qmax);
        weft_tensor_release(d);
        weft_tensor_release(r);
    }
    weft_tensor *all[] = {zero, lo, hi, t, s, z, zi, neg};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        weft_tensor_release(all[i]);
    if (rc == 0 && weft_tensor_ndim(sc) == 0) { /* torch: one-entry vectors */
        weft_tensor *a = NULL, *b = NULL;
        int64_t one = 1;
        if ((rc = weft_reshape(&a, sc, &one, 1)) == 0 && (rc = weft_reshape(&b, zc, &one, 1)) == 0) {
            weft_tensor_release(sc);
            weft_tensor_release(zc);
            sc = a, zc = b;
            a = b = NULL;
        }
        weft_tensor_release(a);
        weft_tensor_release(b);
    }
    weft_set_grad_enabled(grad);
    if (rc < 0) {
        weft_tensor_release(sc);
        weft_tensor_release(zc);
        return rc;
    }
    *scale = sc;
    *zero_point = zc;
    return 0;
}
