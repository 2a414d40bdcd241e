/* tests/plugins/manydev.c — one plugin source, built twice ("manya",
 * "manyb": MANY_PREFIX, MANY_CODE_BASE), each registering MANY_TYPES device
 * types many_<prefix><k>.  Every type has its own allocator context (its
 * memory carries a header naming the type), its own device count (k % 3 + 1),
 * DLPack device code (MANY_CODE_BASE + k), kernels registered with the type
 * as context (add, and the plugin's operator many_<prefix>_tag which answers
 * k), and, for odd k, streams. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/plugin.h>

#define MANY_TYPES 9
#define HEADER 64

typedef struct devtype {
    int k;
    int id;
    char name[24];
} devtype;

static devtype types[MANY_TYPES];

static void release(void *data, void *ctx)
{
    (void)ctx;
    free((char *)data - HEADER);
}

static int allocate(void *ctx, size_t n, int index, weft_data_ptr *out)
{
    devtype *t = ctx;
    (void)index;
    char *base = malloc(HEADER + (n ? n : 1));
    if (!base)
        return weft_set_error(WEFT_ENOMEM, "%s: out of memory", t->name);
    memcpy(base, &t, sizeof t);
    out->data = base + HEADER;
    out->ctx = NULL;
    out->deleter = release;
    return 0;
}

/* Whether tensor memory came from this type's allocator. */
static int owned_by(const weft_tensor *x, const devtype *t)
{
    const devtype *who;
    memcpy(&who, (const char *)weft_tensor_data_ptr(x) - weft_tensor_storage_offset(x) * 4 - HEADER,
           sizeof who);
    return who == t;
}

static int count(void *ctx)
{
    return ((devtype *)ctx)->k % 3 + 1;
}

static int copy(void *ctx, void *dst, const void *src, size_t n, int index)
{
    (void)ctx;
    (void)index;
    memcpy(dst, src, n);
    return 0;
}

static int copy_device(void *ctx, void *dst, int di, const void *src, int si, size_t n)
{
    (void)ctx;
    (void)di;
    (void)si;
    memcpy(dst, src, n);
    return 0;
}

static int sync_(void *ctx, int index)
{
    (void)ctx;
    (void)index;
    return 0;
}

/* streams: the device runs everything at once, so a stream is only a token
 * that must come back to this type's destroy */
static int stream_create(void *ctx, int index, void **stream)
{
    devtype *t = ctx;
    int *token = malloc(sizeof *token);
    if (!token)
        return weft_set_error(WEFT_ENOMEM, "%s: out of memory", t->name);
    *token = t->k * 100 + index;
    *stream = token;
    return 0;
}

static void stream_destroy(void *ctx, int index, void *stream)
{
    (void)ctx;
    (void)index;
    free(stream);
}

static int stream_query(void *ctx, int index, void *stream)
{
    devtype *t = ctx;
    if (stream && *(int *)stream != t->k * 100 + index)
        return weft_set_error(WEFT_EINVAL, "%s: a stream of another device", t->name);
    return 1;
}

static double scalar(const weft_value *v)
{
    return v->tag == WEFT_VALUE_DOUBLE ? v->u.d : v->tag == WEFT_VALUE_INT ? (double)v->u.i : v->u.b;
}

static int add(weft_call *call, void *ctx)
{
    devtype *t = ctx;
    const weft_tensor *a = call->args[0].u.tensor, *b = call->args[1].u.tensor;
    if (weft_tensor_dtype(a) != WEFT_FLOAT32 || weft_tensor_dtype(b) != WEFT_FLOAT32 ||
        !weft_tensor_is_contiguous(a) || !weft_tensor_is_contiguous(b) ||
        weft_tensor_numel(a) != weft_tensor_numel(b))
        return weft_set_error(WEFT_EDTYPE, "%s add: contiguous float32 of one shape only", t->name);
    if (!owned_by(a, t) || !owned_by(b, t))
        return weft_set_error(WEFT_EINTERNAL, "%s add: memory of another device type", t->name);
    weft_tensor *out;
    int rc = weft_empty(&out, weft_tensor_sizes(a), weft_tensor_ndim(a), WEFT_FLOAT32,
                        weft_tensor_device(a));
    if (rc < 0)
        return rc;
    const float *x = weft_tensor_data_ptr(a), *y = weft_tensor_data_ptr(b);
    float *z = weft_tensor_data_ptr(out);
    float alpha = (float)scalar(&call->args[2]);
    for (int64_t i = 0; i < weft_tensor_numel(a); i++)
        z[i] = x[i] + alpha * y[i];
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    call->rets[0].u.tensor = out;
    return 0;
}

/* many_<prefix>_tag(self): a CPU tensor holding k, the type whose kernel ran */
static int tag(weft_call *call, void *ctx)
{
    devtype *t = ctx;
    const weft_tensor *a = call->args[0].u.tensor;
    if (weft_tensor_dtype(a) == WEFT_FLOAT32 && weft_tensor_numel(a) > 0 && !owned_by(a, t))
        return weft_set_error(WEFT_EINTERNAL, "%s tag: memory of another device type", t->name);
    int64_t one = 1;
    weft_tensor *out;
    int rc = weft_full(&out, &one, 1, (double)t->k, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    if (rc < 0)
        return rc;
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    call->rets[0].u.tensor = out;
    return 0;
}

static int init(weft_registrar *reg)
{
    static weft_device_interface ifaces[MANY_TYPES];
    static weft_allocator allocs[MANY_TYPES];
    char op[64], schema[128];
    snprintf(op, sizeof op, "many_%s_tag", MANY_PREFIX);
    snprintf(schema, sizeof schema, "%s(Tensor self) -> Tensor", op);
    int rc = weft_register_op(reg, schema, NULL);
    for (int k = 0; k < MANY_TYPES && rc == 0; k++) {
        devtype *t = &types[k];
        t->k = k;
        snprintf(t->name, sizeof t->name, "many_%s%d", MANY_PREFIX, k);
        weft_device_interface *i = &ifaces[k];
        memset(i, 0, sizeof *i);
        i->struct_size = sizeof *i;
        i->version = WEFT_DEVICE_INTERFACE_VERSION;
        i->ctx = t;
        i->device_count = count;
        i->copy_to_host = copy;
        i->copy_from_host = copy;
        i->copy_device = copy_device;
        i->synchronize = sync_;
        i->dlpack_device_code = MANY_CODE_BASE + k;
        if (k % 2) {
            i->stream_create = stream_create;
            i->stream_destroy = stream_destroy;
            i->stream_query = stream_query;
        }
        allocs[k] = (weft_allocator){sizeof(weft_allocator), WEFT_ALLOCATOR_VERSION, t, allocate,
                                     NULL, NULL};
        rc = weft_register_device_type(reg, t->name, i, &allocs[k], &t->id);
        if (rc == 0)
            rc = weft_register_kernel(reg, "add", WEFT_KEY_DENSE, t->id, add, t, NULL);
        if (rc == 0)
            rc = weft_register_kernel(reg, op, WEFT_KEY_DENSE, t->id, tag, t, NULL);
    }
    return rc;
}

WEFT_PLUGIN_DEFINE("many" MANY_PREFIX, NULL, "1.0", NULL, init, NULL);
