/* tests/plugins/constlayout.c — a layout plugin for tests/test_layouts.c:
 * "constant", a tensor whose elements all hold one value, kept as that
 * value alone.  It converts to and from strided, has kernels of its own for
 * neg (constant in, constant out) and sum (a strided 0-d result) on the
 * CPU, and registers the strided fallback only when asked to (the
 * environment variable CONSTLAYOUT_FALLBACK), so the test sees both the
 * refusal and the fallback. */
#include <stdio.h>
#include <stdlib.h>

#include <weft/ops.h>
#include <weft/plugin.h>

typedef struct payload {
    double value;
} payload;

static int layout_id = -1;

static void release(void *p)
{
    free(p);
}

static int to_strided(weft_tensor **out, const weft_tensor *t)
{
    const payload *p = weft_tensor_layout_payload(t);
    return weft_full(out, weft_tensor_sizes(t), weft_tensor_ndim(t), p->value,
                     weft_tensor_dtype(t), weft_tensor_device(t));
}

/* A constant tensor of src's shape holding v (takes nothing from src). */
static int make(weft_tensor **out, const weft_tensor *like, double v)
{
    payload *p = malloc(sizeof *p);
    if (!p)
        return weft_set_error(WEFT_ENOMEM, "constant: out of memory");
    p->value = v;
    return weft_tensor_new_layout(out, layout_id, weft_tensor_sizes(like), weft_tensor_ndim(like),
                                  weft_tensor_dtype(like), weft_tensor_device(like), p);
}

static int from_strided(weft_tensor **out, const weft_tensor *src)
{
    int64_t n = weft_tensor_numel(src);
    double first = 0, v;
    weft_tensor *flat;
    int rc = weft_reshape(&flat, src, (int64_t[]){-1}, 1);
    for (int64_t i = 0; rc == 0 && i < n; i++) {
        rc = weft_tensor_get(flat, &i, &v);
        if (rc == 0 && i == 0)
            first = v;
        else if (rc == 0 && v != first)
            rc = weft_set_error(WEFT_EINVAL,
                                "constant: element %lld is %g, element 0 is %g: not a constant "
                                "tensor",
                                (long long)i, v, first);
    }
    weft_tensor_release(flat);
    return rc < 0 ? rc : make(out, src, first);
}

static int describe(const weft_tensor *t, char *buf, size_t size)
{
    return snprintf(buf, size, "value %g", ((const payload *)weft_tensor_layout_payload(t))->value);
}

static int64_t nbytes(const weft_tensor *t)
{
    (void)t;
    return (int64_t)sizeof(payload);
}

/* neg(constant) stays constant: the kernel only negates the value */
static int neg_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = weft_arg_tensor(call, 0);
    const payload *p = weft_tensor_layout_payload(self);
    weft_tensor *out;
    int rc = make(&out, self, -p->value);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* sum(constant) = value * numel, without a strided copy */
static int sum_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = weft_arg_tensor(call, 0);
    const payload *p = weft_tensor_layout_payload(self);
    if (!weft_arg_is_none(call, 1))
        return weft_set_error(WEFT_ENOTSUP, "sum: the constant layout sums over all dimensions "
                                            "only");
    weft_dtype dtype = weft_arg_is_none(call, 3) ? weft_tensor_dtype(self)
                                                 : call->args[3].u.dtype;
    weft_tensor *out;
    int rc = weft_full(&out, NULL, 0, p->value * (double)weft_tensor_numel(self), dtype,
                       weft_tensor_device(self));
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* CONSTLAYOUT_FAIL_KEEPING: init makes a tensor of its layout, keeps it
 * here and fails, so that the loader's refusal to unmap a library whose
 * layout tensors are alive can be seen (test_layouts releases it through
 * this symbol). */
__attribute__((visibility("default"))) weft_tensor *constlayout_kept;

static int fail_keeping(void)
{
    weft_tensor *like;
    int rc = weft_zeros(&like, (int64_t[]){2}, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    if (rc < 0)
        return rc;
    rc = make(&constlayout_kept, like, 7.0);
    weft_tensor_release(like);
    return rc < 0 ? rc : weft_set_error(WEFT_EINVAL, "constlayout: told to fail its init");
}

static int init(weft_registrar *reg)
{
    static weft_layout_interface iface = {
        .struct_size = sizeof iface,
        .name = "constant",
        .release = release,
        .to_strided = to_strided,
        .from_strided = from_strided,
        .describe = describe,
        .nbytes = nbytes,
    };
    iface.flags = getenv("CONSTLAYOUT_VIEWS_COPY") ? WEFT_LAYOUT_VIEWS_COPY : 0;
    int rc = weft_register_layout(reg, &iface, &layout_id);
    int key = rc == 0 ? weft_layout_key(layout_id) : rc;
    if (key < 0)
        return key;
    rc = weft_register_kernel(reg, "neg", key, WEFT_DEVICE_TYPE_CPU, neg_kernel, NULL, NULL);
    if (rc == 0)
        rc = weft_register_kernel(reg, "sum", key, WEFT_DEVICE_TYPE_CPU, sum_kernel, NULL, NULL);
    if (rc == 0 && getenv("CONSTLAYOUT_FAIL_KEEPING"))
        return fail_keeping();
    if (rc == 0 && getenv("CONSTLAYOUT_FALLBACK"))
        rc = weft_register_fallback(reg, key, WEFT_ALL_BACKENDS, weft_layout_strided_fallback,
                                    NULL, NULL);
    return rc;
}

WEFT_PLUGIN_DEFINE("constlayout", "baseline", "1.0", NULL, init, NULL);
