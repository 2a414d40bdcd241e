/* tests/test_dlpack.c — DLPack exchange from C: round trips for every dtype
 * and for contiguous, transposed, sliced, empty and 0-d tensors; zero copy
 * (same address, writes seen on the other side); lifetime (each deleter
 * exactly once, also from another thread); hand-built managed tensors with
 * byte_offset, NULL strides and odd size-1 strides; the read-only flag;
 * device mapping (cpu, pinned host, cuda, hip, a plugin's code); and every
 * kind of bad input refused with a clear message and the deleter called
 * once. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include <weft/dlpack.h>
#include <weft/plugin.h>
#include <weft/weft.h>

#include "tests/host_device.h"

#include "tests/tap.h"

#define CPU WEFT_DEVICE_CPU
#define countof(a) ((int)(sizeof(a) / sizeof((a)[0])))

static bool have_cpu_kernels;

/* ------------------------------------------------------------ helpers */

/* A host tensor whose element i holds the value i (converted to dtype). */
static weft_tensor *iota(const int64_t *sizes, int ndim, weft_dtype dtype)
{
    weft_tensor *t = NULL;
    if (weft_empty(&t, sizes, ndim, dtype, CPU) < 0)
        return NULL;
    char *p = weft_tensor_data_ptr(t);
    size_t item = weft_dtype_size(dtype);
    for (int64_t i = 0; i < weft_tensor_numel(t); i++) {
        double v = dtype == WEFT_BOOL ? (double)(i % 2) : (double)(i % 100);
        /* write the value's bytes through a one-element view */
        int64_t one = 1;
        weft_tensor *e = NULL;
        weft_from_blob(&e, p + i * (int64_t)item, &one, NULL, 1, dtype, CPU, NULL, NULL);
        weft_tensor *src = NULL;
        weft_from_blob(&src, &v, &one, NULL, 1, WEFT_FLOAT64, CPU, NULL, NULL);
        weft_copy_(e, src);
        weft_tensor_release(e);
        weft_tensor_release(src);
    }
    return t;
}

static double at(const weft_tensor *t, const int64_t *index)
{
    double v = NAN;
    weft_tensor_get(t, index, &v);
    return v;
}

/* Whether a and b hold the same values at every index (same shape). */
static bool same_values(const weft_tensor *a, const weft_tensor *b)
{
    int ndim = weft_tensor_ndim(a);
    if (ndim != weft_tensor_ndim(b) || weft_tensor_numel(a) != weft_tensor_numel(b))
        return false;
    for (int i = 0; i < ndim; i++)
        if (weft_tensor_size(a, i) != weft_tensor_size(b, i))
            return false;
    int64_t index[WEFT_MAX_DIMS] = {0};
    for (int64_t n = 0; n < weft_tensor_numel(a); n++) {
        double x = at(a, index), y = at(b, index);
        if (!(x == y || (isnan(x) && isnan(y))))
            return false;
        for (int d = ndim - 1; d >= 0; d--) {
            if (++index[d] < weft_tensor_size(a, d))
                break;
            index[d] = 0;
        }
    }
    return true;
}

static bool same_geometry(const weft_tensor *a, const weft_tensor *b)
{
    int ndim = weft_tensor_ndim(a);
    if (ndim != weft_tensor_ndim(b))
        return false;
    for (int i = 0; i < ndim; i++)
        if (weft_tensor_size(a, i) != weft_tensor_size(b, i) ||
            (weft_tensor_size(a, i) > 1 && weft_tensor_stride(a, i) != weft_tensor_stride(b, i)))
            return false;
    return true;
}

/* A producer's managed tensor, made by the test the way another framework
 * would: its deleter counts its calls, notes the thread and frees it. */
typedef struct counter {
    atomic_int calls;
    pthread_t thread;
} counter;

typedef struct producer {
    DLManagedTensor m;
    int64_t shape[WEFT_MAX_DIMS + 2], strides[WEFT_MAX_DIMS + 2];
} producer;

typedef struct vproducer {
    DLManagedTensorVersioned m;
    int64_t shape[WEFT_MAX_DIMS + 2], strides[WEFT_MAX_DIMS + 2];
} vproducer;

static void producer_delete(DLManagedTensor *self)
{
    counter *c = self->manager_ctx;
    c->thread = pthread_self();
    atomic_fetch_add(&c->calls, 1);
    free(self);
}

static void vproducer_delete(DLManagedTensorVersioned *self)
{
    counter *c = self->manager_ctx;
    c->thread = pthread_self();
    atomic_fetch_add(&c->calls, 1);
    free(self);
}

/* A float32 CPU tensor of the given shape over data; strides NULL. */
static producer *produce(counter *c, void *data, const int64_t *shape, int ndim)
{
    producer *p = calloc(1, sizeof *p);
    atomic_init(&c->calls, 0);
    p->m.dl_tensor.data = data;
    p->m.dl_tensor.device.device_type = kDLCPU;
    p->m.dl_tensor.device.device_id = 0;
    p->m.dl_tensor.ndim = ndim;
    p->m.dl_tensor.dtype.code = kDLFloat;
    p->m.dl_tensor.dtype.bits = 32;
    p->m.dl_tensor.dtype.lanes = 1;
    for (int i = 0; i < ndim && i < WEFT_MAX_DIMS + 2; i++)
        p->shape[i] = shape[i];
    p->m.dl_tensor.shape = p->shape;
    p->m.dl_tensor.strides = NULL;
    p->m.dl_tensor.byte_offset = 0;
    p->m.manager_ctx = c;
    p->m.deleter = producer_delete;
    return p;
}

static vproducer *vproduce(counter *c, void *data, const int64_t *shape, int ndim, uint64_t flags)
{
    vproducer *p = calloc(1, sizeof *p);
    atomic_init(&c->calls, 0);
    p->m.version.major = 1;
    p->m.version.minor = 0;
    p->m.flags = flags;
    p->m.dl_tensor.data = data;
    p->m.dl_tensor.device.device_type = kDLCPU;
    p->m.dl_tensor.ndim = ndim;
    p->m.dl_tensor.dtype.code = kDLFloat;
    p->m.dl_tensor.dtype.bits = 32;
    p->m.dl_tensor.dtype.lanes = 1;
    for (int i = 0; i < ndim; i++)
        p->shape[i] = shape[i];
    p->m.dl_tensor.shape = p->shape;
    p->m.manager_ctx = c;
    p->m.deleter = vproducer_delete;
    return p;
}

static atomic_int blob_frees;
static void blob_free(void *ctx)
{
    atomic_fetch_add(&blob_frees, 1);
    free(ctx);
}

/* A float32 tensor over malloc'd memory that counts its release. */
static weft_tensor *counted_tensor(const int64_t *sizes, int ndim)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= sizes[i];
    float *data = malloc((size_t)(n ? n : 1) * sizeof *data);
    for (int64_t i = 0; i < n; i++)
        data[i] = (float)i;
    weft_tensor *t = NULL;
    weft_from_blob(&t, data, sizes, NULL, ndim, WEFT_FLOAT32, CPU, blob_free, data);
    return t;
}

/* ------------------------------------------------------------- dtypes */

static void test_dtypes(void)
{
    /* written from the DLPack specification, not from weft's table */
    static const struct {
        weft_dtype dtype;
        uint8_t code, bits;
    } expect[] = {
        {WEFT_BOOL, 6, 8},        {WEFT_UINT8, 1, 8},       {WEFT_INT8, 0, 8},
        {WEFT_INT16, 0, 16},      {WEFT_INT32, 0, 32},      {WEFT_INT64, 0, 64},
        {WEFT_FLOAT16, 2, 16},    {WEFT_BFLOAT16, 4, 16},   {WEFT_FLOAT32, 2, 32},
        {WEFT_FLOAT64, 2, 64},    {WEFT_COMPLEX64, 5, 64},  {WEFT_COMPLEX128, 5, 128},
    };
    is_int(countof(expect), WEFT_NUM_DTYPES, "the matrix covers every weft dtype");
    int64_t sizes[2] = {2, 3};
    for (int k = 0; k < countof(expect); k++) {
        weft_dtype d = expect[k].dtype;
        const char *name = weft_dtype_name(d);
        weft_tensor *t = iota(sizes, 2, d), *back = NULL, *vback = NULL;
        DLManagedTensor *m = NULL;
        DLManagedTensorVersioned *v = NULL;
        is_int(weft_to_dlpack(&m, t), 0, "%s: export", name);
        if (!m)
            continue;
        DLTensor *dl = &m->dl_tensor;
        ok(dl->dtype.code == expect[k].code && dl->dtype.bits == expect[k].bits &&
               dl->dtype.lanes == 1,
           "%s: exported as code %d bits %d lanes 1 (got %d, %d, %d)", name, expect[k].code,
           expect[k].bits, dl->dtype.code, dl->dtype.bits, dl->dtype.lanes);
        ok(dl->device.device_type == kDLCPU && dl->device.device_id == 0, "%s: device (1, 0)",
           name);
        ok(dl->ndim == 2 && dl->shape[0] == 2 && dl->shape[1] == 3 && dl->strides[0] == 3 &&
               dl->strides[1] == 1 && dl->byte_offset == 0,
           "%s: shape [2, 3], strides [3, 1] in elements, byte_offset 0", name);
        ok(dl->data == weft_tensor_data_ptr(t), "%s: data is the tensor's own memory", name);
        is_int(weft_from_dlpack(&back, m), 0, "%s: import it back", name);
        ok(back && weft_tensor_dtype(back) == d && weft_tensor_data_ptr(back) ==
                                                        weft_tensor_data_ptr(t),
           "%s: same dtype, same address", name);
        ok(back && same_values(t, back) && same_geometry(t, back), "%s: same values and strides",
           name);

        is_int(weft_to_dlpack_versioned(&v, t, 0), 0, "%s: versioned export", name);
        if (v) {
            ok(v->version.major == 1 && v->version.minor == 0 && v->flags == 0,
               "%s: version 1.0, flags 0", name);
            ok(v->dl_tensor.dtype.code == expect[k].code &&
                   v->dl_tensor.dtype.bits == expect[k].bits,
               "%s: versioned dtype code %d bits %d", name, expect[k].code, expect[k].bits);
            is_int(weft_from_dlpack_versioned(&vback, v), 0, "%s: versioned import", name);
            ok(vback && same_values(t, vback) && !weft_tensor_is_read_only(vback),
               "%s: versioned round trip keeps values and is writable", name);
        }
        weft_tensor_release(vback);
        weft_tensor_release(back);
        weft_tensor_release(t);
    }
}

/* ------------------------------------------------------------- shapes */

/* Exports t (legacy), checks the struct against t, imports it again and
 * compares; returns the imported tensor. */
static weft_tensor *round_trip(weft_tensor *t, const char *what)
{
    DLManagedTensor *m = NULL;
    weft_tensor *back = NULL;
    is_int(weft_to_dlpack(&m, t), 0, "%s: export", what);
    if (!m)
        return NULL;
    DLTensor *dl = &m->dl_tensor;
    int ndim = weft_tensor_ndim(t);
    bool geometry = dl->ndim == ndim && dl->shape && dl->strides;
    for (int i = 0; geometry && i < ndim; i++)
        geometry = dl->shape[i] == weft_tensor_size(t, i) &&
                   dl->strides[i] == weft_tensor_stride(t, i);
    ok(geometry, "%s: shape and strides (in elements) are the tensor's", what);
    ok(dl->data == weft_tensor_data_ptr(t) && dl->byte_offset == 0,
       "%s: the storage offset is folded into data, byte_offset 0", what);
    /* one block: the arrays sit right behind the struct */
    ok((char *)dl->shape >= (char *)m + sizeof *m &&
           (char *)(dl->strides + ndim) <= (char *)m + sizeof *m + 64 + 16 * (size_t)ndim,
       "%s: shape and strides live in the struct's own allocation", what);
    is_int(weft_from_dlpack(&back, m), 0, "%s: import", what);
    ok(back && weft_tensor_data_ptr(back) == weft_tensor_data_ptr(t), "%s: same address", what);
    ok(back && same_values(t, back) && same_geometry(t, back), "%s: same values and geometry",
       what);
    return back;
}

static void test_shapes(void)
{
    int64_t s23[2] = {3, 6};
    weft_tensor *base = iota(s23, 2, WEFT_FLOAT32), *v = NULL, *back;

    back = round_trip(base, "contiguous [3, 6]");
    weft_tensor_release(back);

    weft_t(&v, base);
    back = round_trip(v, "transposed");
    ok(back && weft_tensor_stride(back, 0) == 1 && weft_tensor_stride(back, 1) == 6,
       "transposed: strides [1, 6] survive");
    weft_tensor_release(back);
    weft_tensor_release(v);

    weft_slice(&v, base, 1, 1, 6, 2); /* [:, 1:6:2]: offset 1, strides [6, 2] */
    back = round_trip(v, "sliced with step and offset");
    int64_t i12[2] = {1, 2};
    is_double(back ? at(back, i12) : NAN, 11.0, 0, "sliced: element [1, 2] is 11");
    weft_tensor_release(back);
    weft_tensor_release(v);

    weft_tensor *row = NULL;
    weft_select(&row, base, 0, 2); /* offset 12 */
    weft_narrow(&v, row, 0, 3, 2);  /* offset 15 */
    back = round_trip(v, "select then narrow (offset 15)");
    int64_t i1 = 1;
    is_double(back ? at(back, &i1) : NAN, 16.0, 0, "offset 15: element [1] is 16");
    weft_tensor_release(back);
    weft_tensor_release(v);
    weft_tensor_release(row);

    int64_t s0[3] = {2, 0, 3};
    weft_tensor *empty = iota(s0, 3, WEFT_FLOAT64);
    back = round_trip(empty, "size-0 [2, 0, 3]");
    is_int(back ? weft_tensor_numel(back) : -1, 0, "size-0: no elements");
    weft_tensor_release(back);
    weft_tensor_release(empty);

    weft_tensor *scalar = iota(NULL, 0, WEFT_INT64);
    back = round_trip(scalar, "0-d");
    is_int(back ? weft_tensor_ndim(back) : -1, 0, "0-d: ndim 0");
    double value = -1;
    is_int(back ? weft_tensor_item(back, &value) : -1, 0, "0-d: item");
    is_double(value, 0.0, 0, "0-d: value 0");
    weft_tensor_release(back);
    weft_tensor_release(scalar);

    /* expanded (stride 0) and a size-1 dim */
    int64_t one[2] = {1, 3}, wide[3] = {4, 1, 3};
    weft_tensor *small = iota(one, 2, WEFT_INT32);
    weft_expand(&v, small, wide, 3);
    back = round_trip(v, "expanded [4, 1, 3] with stride 0");
    ok(back && weft_tensor_stride(back, 0) == 0, "expanded: stride 0 kept");
    weft_tensor_release(back);
    weft_tensor_release(v);
    weft_tensor_release(small);

    weft_tensor_release(base);
}

/* ---------------------------------------------------------- zero copy */

static void test_zero_copy(void)
{
    int64_t sizes[2] = {2, 3}, i12[2] = {1, 2};
    weft_tensor *t = iota(sizes, 2, WEFT_FLOAT32), *back = NULL;
    DLManagedTensor *m = NULL;
    weft_to_dlpack(&m, t);
    ((float *)m->dl_tensor.data)[5] = 42.0f; /* the consumer writes */
    is_double(at(t, i12), 42.0, 0, "a write through the DLPack pointer is seen by weft");
    float *p = weft_tensor_data_ptr(t);
    p[0] = -7.0f;
    is_double(((float *)m->dl_tensor.data)[0], -7.0, 0, "a write by weft is seen by the consumer");
    weft_from_dlpack(&back, m);
    ((float *)weft_tensor_data_ptr(back))[1] = 9.5f;
    int64_t i01[2] = {0, 1};
    is_double(at(t, i01), 9.5, 0, "a write through the re-imported tensor is seen by the original");
    if (have_cpu_kernels) {
        is_int(weft_fill_(back, 3.0), 0, "fill_ on the imported tensor");
        is_double(at(t, i12), 3.0, 0, "an operator's write is seen on the other side");
    } else {
        skip(2, "the cpu plugin is not loaded");
    }
    weft_tensor_release(back);
    weft_tensor_release(t);
}

/* ----------------------------------------------------------- lifetime */

static void *call_deleter(void *arg)
{
    DLManagedTensor *m = arg;
    m->deleter(m);
    return NULL;
}

static void *call_versioned_deleter(void *arg)
{
    DLManagedTensorVersioned *m = arg;
    m->deleter(m);
    return NULL;
}

static void *release_tensor(void *arg)
{
    weft_tensor_release(arg);
    return NULL;
}

static void test_lifetime(void)
{
    int64_t sizes[1] = {8};
    atomic_store(&blob_frees, 0);
    weft_tensor *t = counted_tensor(sizes, 1);
    DLManagedTensor *m = NULL;
    weft_to_dlpack(&m, t);
    weft_tensor_release(t);
    is_int(atomic_load(&blob_frees), 0, "export: the memory outlives the weft tensor");
    is_double(((float *)m->dl_tensor.data)[7], 7.0, 0, "export: still readable");
    pthread_t th;
    pthread_create(&th, NULL, call_deleter, m);
    pthread_join(th, NULL);
    is_int(atomic_load(&blob_frees), 1, "export: the deleter, on another thread, frees it once");

    atomic_store(&blob_frees, 0);
    t = counted_tensor(sizes, 1);
    DLManagedTensorVersioned *v = NULL;
    weft_to_dlpack_versioned(&v, t, 0);
    weft_tensor_release(t);
    is_int(atomic_load(&blob_frees), 0, "versioned export: the memory outlives the tensor");
    pthread_create(&th, NULL, call_versioned_deleter, v);
    pthread_join(th, NULL);
    is_int(atomic_load(&blob_frees), 1, "versioned export: the deleter frees it once");

    /* weft -> DLPack -> weft, then both sides drop in either order */
    atomic_store(&blob_frees, 0);
    t = counted_tensor(sizes, 1);
    weft_tensor *back = NULL, *view = NULL;
    weft_to_dlpack(&m, t);
    weft_from_dlpack(&back, m);
    weft_tensor_release(t);
    is_int(atomic_load(&blob_frees), 0, "round trip: the import keeps the memory alive");
    weft_narrow(&view, back, 0, 2, 3);
    weft_tensor_release(back);
    is_int(atomic_load(&blob_frees), 0, "round trip: a view of the import keeps it alive");
    pthread_create(&th, NULL, release_tensor, view);
    pthread_join(th, NULL);
    is_int(atomic_load(&blob_frees), 1, "round trip: freed once when the last view dies on another thread");

    /* a producer's tensor: its deleter runs exactly once, on the thread that
     * drops the last view */
    float data[6] = {0, 1, 2, 3, 4, 5};
    int64_t shape[2] = {2, 3};
    counter c;
    producer *p = produce(&c, data, shape, 2);
    weft_tensor *imp = NULL, *col = NULL;
    is_int(weft_from_dlpack(&imp, &p->m), 0, "import a producer's tensor");
    weft_select(&col, imp, 1, 2);
    weft_tensor_release(imp);
    is_int(atomic_load(&c.calls), 0, "the producer's deleter waits for the last view");
    pthread_create(&th, NULL, release_tensor, col);
    pthread_join(th, NULL);
    is_int(atomic_load(&c.calls), 1, "the producer's deleter ran exactly once");
    ok(pthread_equal(c.thread, th), "... on the thread that dropped the last view");
}

/* ---------------------------------------------- hand-built from C */

static void test_hand_built(void)
{
    float buf[16];
    for (int i = 0; i < 16; i++)
        buf[i] = (float)i;
    counter c;
    weft_tensor *t = NULL;

    /* byte_offset and NULL strides */
    int64_t shape[2] = {2, 3};
    producer *p = produce(&c, buf, shape, 2);
    p->m.dl_tensor.byte_offset = 2 * sizeof(float);
    is_int(weft_from_dlpack(&t, &p->m), 0, "byte_offset 8, NULL strides: imported");
    ok(t && weft_tensor_data_ptr(t) == (void *)(buf + 2), "byte_offset is added to data");
    ok(t && weft_tensor_stride(t, 0) == 3 && weft_tensor_stride(t, 1) == 1 &&
           weft_tensor_is_contiguous(t),
       "NULL strides mean compact row-major");
    int64_t i12[2] = {1, 2};
    is_double(t ? at(t, i12) : NAN, 7.0, 0, "element [1, 2] is buf[2 + 5]");
    weft_tensor_release(t);
    is_int(atomic_load(&c.calls), 1, "deleter called once on release");

    /* size-1 dims with garbage strides (even negative: never stepped) */
    int64_t shape1[4] = {1, 3, 1, 2};
    p = produce(&c, buf, shape1, 4);
    int64_t garbage[4] = {999, 2, -5, 1};
    memcpy(p->strides, garbage, sizeof garbage);
    p->m.dl_tensor.strides = p->strides;
    is_int(weft_from_dlpack(&t, &p->m), 0, "size-1 dims with strides 999 and -5: imported");
    ok(t && weft_tensor_stride(t, 1) == 2 && weft_tensor_stride(t, 3) == 1,
       "the strides of real dims are kept");
    ok(t && weft_tensor_stride(t, 0) == 6 && weft_tensor_stride(t, 2) == 2,
       "the strides of size-1 dims are normalised (got %lld, %lld)",
       (long long)(t ? weft_tensor_stride(t, 0) : 0), (long long)(t ? weft_tensor_stride(t, 2) : 0));
    ok(t && weft_tensor_is_contiguous(t), "... so the tensor is contiguous");
    weft_tensor_release(t);
    is_int(atomic_load(&c.calls), 1, "deleter called once");

    /* size 0, NULL data, garbage strides */
    int64_t shape0[3] = {2, 0, 3};
    p = produce(&c, NULL, shape0, 3);
    int64_t odd[3] = {-4, 77, INT64_MAX};
    memcpy(p->strides, odd, sizeof odd);
    p->m.dl_tensor.strides = p->strides;
    p->m.dl_tensor.byte_offset = 12345;
    is_int(weft_from_dlpack(&t, &p->m), 0, "size 0 with NULL data and odd strides: imported");
    ok(t && weft_tensor_numel(t) == 0 && weft_tensor_size(t, 1) == 0 &&
           weft_tensor_data_ptr(t) == NULL,
       "no elements, NULL data");
    ok(t && weft_tensor_stride(t, 0) == 3 && weft_tensor_stride(t, 2) == 1,
       "an empty tensor gets compact strides");
    weft_tensor_release(t);
    is_int(atomic_load(&c.calls), 1, "deleter called once");

    /* 0-d, NULL shape */
    p = produce(&c, buf + 3, NULL, 0);
    p->m.dl_tensor.shape = NULL;
    double value = 0;
    is_int(weft_from_dlpack(&t, &p->m), 0, "0-d with NULL shape: imported");
    is_int(t ? weft_tensor_item(t, &value) : -1, 0, "0-d: item");
    is_double(value, 3.0, 0, "0-d: the value");
    weft_tensor_release(t);
    is_int(atomic_load(&c.calls), 1, "deleter called once");

    /* strided (every second element) */
    int64_t shape3[1] = {4};
    p = produce(&c, buf, shape3, 1);
    p->strides[0] = 3;
    p->m.dl_tensor.strides = p->strides;
    p->m.dl_tensor.byte_offset = sizeof(float);
    is_int(weft_from_dlpack(&t, &p->m), 0, "stride 3 with byte_offset 4: imported");
    int64_t i3 = 3;
    is_double(t ? at(t, &i3) : NAN, 10.0, 0, "element [3] is buf[1 + 9]");
    weft_tensor_release(t);

    /* a NULL deleter is allowed: nothing to call */
    p = produce(&c, buf, shape3, 1);
    p->m.deleter = NULL;
    is_int(weft_from_dlpack(&t, &p->m), 0, "a NULL deleter: imported");
    weft_tensor_release(t);
    is_int(atomic_load(&c.calls), 0, "... and nothing was called");
    free(p);

    /* pinned host memory is host memory */
    p = produce(&c, buf, shape3, 1);
    p->m.dl_tensor.device.device_type = kDLCUDAHost;
    is_int(weft_from_dlpack(&t, &p->m), 0, "kDLCUDAHost: imported");
    ok(t && weft_tensor_device(t).type == WEFT_DEVICE_TYPE_CPU, "... as a cpu tensor");
    weft_tensor_release(t);
}

/* ---------------------------------------------------------- read-only */

static void test_read_only(void)
{
    float buf[4] = {1, 2, 3, 4};
    int64_t shape[1] = {4};
    counter c;
    weft_tensor *t = NULL, *other = NULL;
    vproducer *p = vproduce(&c, buf, shape, 1, DLPACK_FLAG_BITMASK_READ_ONLY);
    is_int(weft_from_dlpack_versioned(&t, &p->m), 0, "import a read-only versioned tensor");
    ok(t && weft_tensor_is_read_only(t), "the storage is read-only");
    weft_full(&other, shape, 1, 10.0, WEFT_FLOAT32, CPU);
    uint32_t version = weft_tensor_version(t);
    int rc = weft_add_(t, other ? other : t);
    is_int(rc, WEFT_EINVAL, "add_ into it is refused");
    like(weft_last_error(), "read-only", "the message says read-only");
    is_double(buf[0], 1.0, 0, "the producer's memory is unchanged");
    is_int(weft_tensor_version(t), version, "the version is not bumped");
    is_int(weft_fill_(t, 0.0), WEFT_EINVAL, "fill_ is refused too");
    weft_tensor *view = NULL;
    weft_narrow(&view, t, 0, 1, 2);
    is_int(weft_add_(view, view), WEFT_EINVAL, "a view of it is read-only as well");
    weft_tensor_release(view);
    if (have_cpu_kernels) {
        weft_tensor *sum = NULL;
        is_int(weft_add(&sum, t, other), 0, "reading it is fine");
        int64_t i0 = 0;
        is_double(sum ? at(sum, &i0) : NAN, 11.0, 0, "1 + 10");
        weft_tensor_release(sum);
    } else {
        skip(2, "the cpu plugin is not loaded");
    }

    /* exporting it again: legacy cannot say read-only; versioned says it */
    DLManagedTensor *m = NULL;
    is_int(weft_to_dlpack(&m, t), WEFT_ENOTSUP, "legacy export of a read-only tensor is refused");
    like(weft_last_error(), "weft_to_dlpack_versioned", "the message points to the versioned form");
    ok(m == NULL, "out is NULL");
    DLManagedTensorVersioned *v = NULL;
    is_int(weft_to_dlpack_versioned(&v, t, 0), 0, "versioned export of a read-only tensor");
    ok(v && (v->flags & DLPACK_FLAG_BITMASK_READ_ONLY), "carries the read-only flag");
    if (v)
        v->deleter(v);
    weft_tensor_release(t);
    is_int(atomic_load(&c.calls), 1, "deleter called once");

    /* writable versioned import, and the caller asking for read-only */
    p = vproduce(&c, buf, shape, 1, DLPACK_FLAG_BITMASK_IS_COPIED);
    p->m.version.minor = 7; /* any minor of major 1 */
    is_int(weft_from_dlpack_versioned(&t, &p->m), 0, "a version 1.7 tensor without the flag");
    ok(t && !weft_tensor_is_read_only(t), "is writable");
    if (have_cpu_kernels) {
        is_int(weft_add_(t, other), 0, "add_ works");
        is_double(buf[3], 14.0, 0, "and writes the producer's memory");
    } else {
        skip(2, "the cpu plugin is not loaded");
    }
    v = NULL;
    is_int(weft_to_dlpack_versioned(&v, t, DLPACK_FLAG_BITMASK_READ_ONLY), 0,
           "export asking for read-only");
    ok(v && v->flags == DLPACK_FLAG_BITMASK_READ_ONLY, "flags is exactly READ_ONLY");
    if (v)
        v->deleter(v);
    is_int(weft_to_dlpack_versioned(&v, t, DLPACK_FLAG_BITMASK_IS_COPIED), 0,
           "export with IS_COPIED from the caller");
    ok(v && v->flags == DLPACK_FLAG_BITMASK_IS_COPIED, "flags is exactly IS_COPIED");
    if (v)
        v->deleter(v);
    is_int(weft_to_dlpack_versioned(&v, t, 1u << 5), WEFT_EINVAL, "an unknown flag bit is refused");
    like(weft_last_error(), "0x20", "the message shows the flags");
    ok(v == NULL, "out is NULL");
    weft_tensor_release(t);
    weft_tensor_release(other);
    is_int(atomic_load(&c.calls), 1, "deleter called once");
}

/* ----------------------------------------------- versioned major 2 */

/* A deleter that touches only its argument's address. */
static atomic_int guarded_calls;
static void guarded_delete(DLManagedTensorVersioned *self)
{
    (void)self;
    atomic_fetch_add(&guarded_calls, 1);
}

static void test_major_version(void)
{
    /* The struct sits so that everything after the deleter (flags and the
     * DLTensor) lies on a page that cannot be read: touching it crashes. */
    long page = sysconf(_SC_PAGESIZE);
    char *mem = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        skip(4, "mmap failed");
        return;
    }
    DLManagedTensorVersioned *m =
        (DLManagedTensorVersioned *)(mem + page - offsetof(DLManagedTensorVersioned, flags));
    m->version.major = 2;
    m->version.minor = 0;
    m->manager_ctx = NULL;
    m->deleter = guarded_delete;
    mprotect(mem + page, (size_t)page, PROT_NONE);
    weft_tensor *t = (weft_tensor *)1;
    int rc = weft_from_dlpack_versioned(&t, m);
    is_int(rc, WEFT_ENOTSUP, "major version 2 is refused");
    like(weft_last_error(), "major version 2", "the message names the version");
    is_int(atomic_load(&guarded_calls), 1, "the deleter was called once");
    ok(t == NULL, "out is NULL (and no field after the deleter was read)");
    munmap(mem, 2 * (size_t)page);
}

/* ---------------------------------------------------------- bad input */

typedef struct bad_case {
    const char *what;
    int code;
    const char *message;
} bad_case;

static void expect_refused(producer *p, counter *c, const bad_case *bc)
{
    weft_tensor *t = (weft_tensor *)1;
    int rc = weft_from_dlpack(&t, &p->m);
    is_int(rc, bc->code, "%s: %s", bc->what, weft_error_name(bc->code));
    like(weft_last_error(), bc->message, "%s: the message names it", bc->what);
    is_int(atomic_load(&c->calls), 1, "%s: deleter called exactly once", bc->what);
    ok(t == NULL, "%s: out is NULL", bc->what);
}

static void test_bad_input(void)
{
    float buf[8] = {0};
    int64_t shape[2] = {2, 3};
    counter c;
    producer *p;
    weft_tensor *t = (weft_tensor *)1;

    is_int(weft_from_dlpack(&t, NULL), WEFT_EINVAL, "NULL m");
    ok(t == NULL, "NULL m: out is NULL");
    is_int(weft_from_dlpack_versioned(&t, NULL), WEFT_EINVAL, "NULL versioned m");

    p = produce(&c, buf, shape, 2);
    is_int(weft_from_dlpack(NULL, &p->m), WEFT_EINVAL, "NULL out");
    is_int(atomic_load(&c.calls), 1, "NULL out: the deleter is still called once");
    vproducer *vp = vproduce(&c, buf, shape, 2, 0);
    is_int(weft_from_dlpack_versioned(NULL, &vp->m), WEFT_EINVAL, "versioned, NULL out");
    is_int(atomic_load(&c.calls), 1, "versioned, NULL out: deleter called once");

    p = produce(&c, NULL, shape, 2);
    expect_refused(p, &c, &(bad_case){"NULL data with 6 elements", WEFT_EINVAL, "dl_tensor.data is NULL"});

    int64_t negative[2] = {2, -3};
    p = produce(&c, buf, negative, 2);
    expect_refused(p, &c, &(bad_case){"negative dimension", WEFT_EINVAL, "dl_tensor.shape[1] is -3"});

    int64_t huge[3] = {1LL << 40, 1LL << 40, 0};
    p = produce(&c, buf, huge, 3);
    expect_refused(p, &c, &(bad_case){"shape overflowing int64 (even with a 0)", WEFT_EOVERFLOW, "overflows int64"});

    int64_t two[2] = {3, 2};
    p = produce(&c, buf, two, 2);
    p->strides[0] = INT64_MAX / 2 + 1;
    p->strides[1] = 1;
    p->m.dl_tensor.strides = p->strides;
    expect_refused(p, &c, &(bad_case){"strides reaching beyond int64", WEFT_EOVERFLOW, "stride 4611686018427387904"});

    /* the last element reached is exactly INT64_MAX: the element count is
     * one past int64 (the fuzzer's find: a signed overflow before the fix) */
    int64_t edge[2] = {2, 1};
    p = produce(&c, buf, edge, 2);
    p->strides[0] = INT64_MAX;
    p->strides[1] = 1;
    p->m.dl_tensor.strides = p->strides;
    expect_refused(p, &c, &(bad_case){"strides reaching exactly INT64_MAX", WEFT_EOVERFLOW, "overflows int64"});

    int64_t pair[1] = {2};
    p = produce(&c, buf, pair, 1);
    p->strides[0] = 1LL << 62; /* elements fit, bytes do not */
    p->m.dl_tensor.strides = p->strides;
    expect_refused(p, &c, &(bad_case){"extent in bytes overflowing", WEFT_EOVERFLOW, "extent"});

    p = produce(&c, buf, pair, 1);
    p->m.dl_tensor.byte_offset = UINT64_MAX - 3;
    expect_refused(p, &c, &(bad_case){"byte_offset wrapping the address space", WEFT_EOVERFLOW, "byte_offset"});

    p = produce(&c, buf, pair, 1);
    p->m.dl_tensor.byte_offset = 2;
    expect_refused(p, &c, &(bad_case){"a misaligned float32", WEFT_EINVAL, "is not aligned to 4 bytes"});

    p = produce(&c, buf, shape, 2);
    p->strides[0] = -1;
    p->strides[1] = 1;
    p->m.dl_tensor.strides = p->strides;
    expect_refused(p, &c, &(bad_case){"negative stride", WEFT_ENOTSUP, "dl_tensor.strides[0] is -1"});

    p = produce(&c, buf, shape, 2);
    p->m.dl_tensor.dtype.code = 99;
    expect_refused(p, &c, &(bad_case){"unknown dtype code", WEFT_EDTYPE, "code 99"});

    p = produce(&c, buf, shape, 2);
    p->m.dl_tensor.dtype.code = 10; /* float8_e4m3fn */
    p->m.dl_tensor.dtype.bits = 8;
    expect_refused(p, &c, &(bad_case){"a float8 code", WEFT_EDTYPE, "code 10 (float8)"});

    p = produce(&c, buf, shape, 2);
    p->m.dl_tensor.dtype.bits = 24;
    expect_refused(p, &c, &(bad_case){"bits not matching the code", WEFT_EDTYPE, "bits 24"});

    p = produce(&c, buf, shape, 2);
    p->m.dl_tensor.dtype.code = kDLBool;
    p->m.dl_tensor.dtype.bits = 1;
    expect_refused(p, &c, &(bad_case){"bool with 1 bit", WEFT_EDTYPE, "code 6 (bool) with bits 1"});

    p = produce(&c, buf, shape, 2);
    p->m.dl_tensor.dtype.lanes = 4;
    expect_refused(p, &c, &(bad_case){"lanes 4", WEFT_EDTYPE, "lanes is 4"});

    p = produce(&c, buf, shape, 2);
    p->m.dl_tensor.dtype.lanes = 0;
    expect_refused(p, &c, &(bad_case){"lanes 0", WEFT_EDTYPE, "lanes is 0"});

    p = produce(&c, buf, shape, 2);
    p->m.dl_tensor.device.device_type = (DLDeviceType)99;
    expect_refused(p, &c, &(bad_case){"unknown device code", WEFT_EDEVICE, "device_type is 99"});

    p = produce(&c, buf, shape, 2);
    p->m.dl_tensor.device.device_type = kDLOpenCL;
    expect_refused(p, &c, &(bad_case){"a device no plugin declares", WEFT_EDEVICE, "device_type is 4 (OpenCL)"});

    p = produce(&c, buf, shape, 2);
    p->m.dl_tensor.device.device_type = kDLCUDA;
    expect_refused(p, &c, &(bad_case){"CUDA without its plugin", WEFT_EDEVICE, "is its plugin loaded"});

    p = produce(&c, buf, shape, 2);
    p->m.dl_tensor.ndim = -1;
    expect_refused(p, &c, &(bad_case){"ndim -1", WEFT_EINVAL, "dl_tensor.ndim is -1"});

    p = produce(&c, buf, shape, 2);
    p->m.dl_tensor.ndim = WEFT_MAX_DIMS + 1;
    expect_refused(p, &c, &(bad_case){"ndim 65", WEFT_EINVAL, "dl_tensor.ndim is 65"});

    p = produce(&c, buf, shape, 2);
    p->m.dl_tensor.ndim = INT32_MAX;
    expect_refused(p, &c, &(bad_case){"ndim INT32_MAX", WEFT_EINVAL, "dl_tensor.ndim is 2147483647"});

    p = produce(&c, buf, shape, 2);
    p->m.dl_tensor.shape = NULL;
    expect_refused(p, &c, &(bad_case){"NULL shape with ndim 2", WEFT_EINVAL, "dl_tensor.shape is NULL"});

    /* bad input through the versioned door: same checks, same ownership */
    vp = vproduce(&c, buf, negative, 2, DLPACK_FLAG_BITMASK_READ_ONLY);
    t = (weft_tensor *)1;
    is_int(weft_from_dlpack_versioned(&t, &vp->m), WEFT_EINVAL, "versioned: negative dimension");
    like(weft_last_error(), "from_dlpack_versioned: dl_tensor.shape[1] is -3",
         "versioned: the message names the function and field");
    is_int(atomic_load(&c.calls), 1, "versioned: deleter called once");
    ok(t == NULL, "versioned: out is NULL");

    /* bad input with a NULL deleter: refused, nothing to call, no crash */
    p = produce(&c, buf, shape, 2);
    p->m.deleter = NULL;
    p->m.dl_tensor.dtype.lanes = 2;
    is_int(weft_from_dlpack(&t, &p->m), WEFT_EDTYPE, "bad input with a NULL deleter");
    is_int(atomic_load(&c.calls), 0, "nothing was called");
    free(p);

    /* export errors */
    DLManagedTensor *m = (DLManagedTensor *)1;
    is_int(weft_to_dlpack(&m, NULL), WEFT_EINVAL, "export of NULL");
    ok(m == NULL, "export of NULL: out is NULL");
    is_int(weft_to_dlpack(NULL, NULL), WEFT_EINVAL, "export into NULL");
    DLManagedTensorVersioned *v = (DLManagedTensorVersioned *)1;
    is_int(weft_to_dlpack_versioned(&v, NULL, 0), WEFT_EINVAL, "versioned export of NULL");
    ok(v == NULL, "versioned export of NULL: out is NULL");
}

/* --------------------------------------------------------- devices */

static void check_device_round_trip(weft_device device, int code, int id, const char *what)
{
    int64_t sizes[1] = {3};
    weft_tensor *t = NULL, *back = NULL;
    is_int(weft_empty(&t, sizes, 1, WEFT_FLOAT32, device), 0, "%s: a tensor", what);
    DLManagedTensor *m = NULL;
    is_int(weft_to_dlpack(&m, t), 0, "%s: export", what);
    ok(m && (int)m->dl_tensor.device.device_type == code && m->dl_tensor.device.device_id == id,
       "%s: DLPack device (%d, %d)", what, code, id);
    int32_t dtype_code = -1, dev_id = -1;
    is_int(weft_tensor_dlpack_device(t, &dtype_code, &dev_id), 0, "%s: dlpack_device", what);
    ok(dtype_code == code && dev_id == id, "%s: dlpack_device says (%d, %d)", what, code, id);
    is_int(m ? weft_from_dlpack(&back, m) : -1, 0, "%s: import", what);
    ok(back && weft_device_equal(weft_tensor_device(back), device) &&
           weft_tensor_data_ptr(back) == weft_tensor_data_ptr(t),
       "%s: back on the same device, same address", what);
    weft_tensor_release(back);
    weft_tensor_release(t);
}

static void test_devices(void)
{
    int32_t code = -1, id = -1;
    weft_tensor *t = NULL;
    int64_t sizes[1] = {3};
    weft_empty(&t, sizes, 1, WEFT_FLOAT32, CPU);
    is_int(weft_tensor_dlpack_device(t, &code, &id), 0, "cpu: dlpack_device");
    ok(code == 1 && id == 0, "cpu is (1, 0)");
    is_int(weft_tensor_dlpack_device(t, NULL, &id), WEFT_EINVAL, "dlpack_device with NULL");
    weft_tensor_release(t);

    weft_registrar *reg = NULL;
    weft_registrar_create(&reg, "test_dlpack");
    weft_device_interface with_code = {HOST_DEVICE_INTERFACE_FIELDS,
                                       .dlpack_device_code = kDLExtDev};
    const weft_device_interface without_code = host_device_iface;
    const weft_allocator alloc = host_device_alloc;
    int extdev = -1, nocode = -1;
    is_int(weft_register_device_type(reg, "dlpext", &with_code, &alloc, &extdev), 0,
           "register a device type with DLPack code 12");
    is_int(weft_register_device_type(reg, "dlpnone", &without_code, &alloc, &nocode), 0,
           "register a device type without a DLPack code");
    is_int(weft_register_reserved_device(reg, WEFT_DEVICE_TYPE_CUDA, &without_code, &alloc), 0,
           "provide a (fake) cuda");
    is_int(weft_register_reserved_device(reg, WEFT_DEVICE_TYPE_HIP, &without_code, &alloc), 0,
           "provide a (fake) hip");

    check_device_round_trip((weft_device){(int16_t)extdev, 1}, kDLExtDev, 1, "plugin type");
    check_device_round_trip((weft_device){WEFT_DEVICE_TYPE_CUDA, 1}, kDLCUDA, 1, "cuda:1");
    check_device_round_trip((weft_device){WEFT_DEVICE_TYPE_HIP, 0}, kDLROCM, 0, "hip:0");

    weft_empty(&t, sizes, 1, WEFT_FLOAT32, (weft_device){(int16_t)nocode, 0});
    DLManagedTensor *m = (DLManagedTensor *)1;
    is_int(weft_to_dlpack(&m, t), WEFT_EDEVICE, "export from a type without a DLPack code");
    like(weft_last_error(), "'dlpnone' declares no DLPack device code", "the message names the type");
    ok(m == NULL, "out is NULL");
    is_int(weft_tensor_dlpack_device(t, &code, &id), WEFT_EDEVICE, "dlpack_device refuses it too");
    weft_tensor_release(t);

    float buf[3] = {0};
    counter c;
    producer *p = produce(&c, buf, sizes, 1);
    p->m.dl_tensor.device.device_type = kDLExtDev;
    p->m.dl_tensor.device.device_id = 5;
    expect_refused(p, &c, &(bad_case){"a device index that does not exist", WEFT_EDEVICE, "dlpext:5 does not exist"});
    p = produce(&c, buf, sizes, 1);
    p->m.dl_tensor.device.device_type = kDLCUDA;
    p->m.dl_tensor.device.device_id = -1;
    expect_refused(p, &c, &(bad_case){"device id -1", WEFT_EDEVICE, "device_id is -1"});

    weft_registrar_destroy(reg);
    p = produce(&c, buf, sizes, 1);
    p->m.dl_tensor.device.device_type = kDLExtDev;
    expect_refused(p, &c, &(bad_case){"a plugin's code after it is gone", WEFT_EDEVICE, "device_type is 12 (ExtDev)"});
}

/* ---------------------------------------------------- constant size */

static void test_huge(void)
{
    /* 100M elements over one float: nothing here may be proportional to
     * the element count (the suite also runs under valgrind) */
    float one = 2.5f;
    int64_t n = 100000000, shape[1] = {n};
    counter c;
    producer *p = produce(&c, &one, shape, 1);
    p->strides[0] = 0;
    p->m.dl_tensor.strides = p->strides;
    weft_tensor *t = NULL;
    is_int(weft_from_dlpack(&t, &p->m), 0, "import 100M elements of stride 0");
    is_int(t ? weft_tensor_numel(t) : 0, n, "numel is 100M");
    int64_t last = n - 1;
    is_double(t ? at(t, &last) : NAN, 2.5, 0, "the last element reads the one float");
    DLManagedTensor *m = NULL;
    is_int(weft_to_dlpack(&m, t), 0, "export it again");
    ok(m && m->dl_tensor.shape[0] == n && m->dl_tensor.strides[0] == 0 &&
           m->dl_tensor.data == (void *)&one,
       "shape 100M, stride 0, same address");
    weft_tensor_release(t);
    is_int(atomic_load(&c.calls), 0, "the export keeps the producer's tensor alive");
    if (m)
        m->deleter(m);
    is_int(atomic_load(&c.calls), 1, "the producer's deleter ran once");

    /* a 2-d expand of a weft tensor */
    int64_t small[2] = {1, 1}, big[2] = {10000, 10000};
    weft_tensor *s = iota(small, 2, WEFT_FLOAT64), *e = NULL, *back = NULL;
    weft_expand(&e, s, big, 2);
    is_int(weft_to_dlpack(&m, e), 0, "export a 10000 x 10000 expanded tensor");
    is_int(weft_from_dlpack(&back, m), 0, "import it");
    is_int(back ? weft_tensor_numel(back) : 0, 100000000, "100M elements");
    weft_tensor_release(back);
    weft_tensor_release(e);
    weft_tensor_release(s);
}

int main(void)
{
    int loaded = weft_load_default_plugins();
    if (loaded > 0) {
        int64_t one = 1;
        weft_tensor *probe = NULL;
        weft_empty(&probe, &one, 1, WEFT_FLOAT32, CPU);
        have_cpu_kernels = weft_fill_(probe, 0.0) == 0;
        weft_tensor_release(probe);
    }
    /* These tests provide fake CUDA and HIP devices of their own; a real
     * CUDA or HIP plugin (built where its toolkit is installed) makes way. */
    /* the sparse layouts' CUDA plugin holds kernels for the cuda device
     * type, which keeps the cuda plugin loaded: it goes first */
    if (weft_unload_plugin("sparse_cuda") == 0)
        diag("unloaded the sparse_cuda plugin, which holds cuda kernels");
    if (weft_device_count(WEFT_DEVICE_TYPE_CUDA) >= 0 && weft_unload_plugin("cuda") == 0)
        diag("unloaded the cuda plugin: the CUDA cases use a fake device");
    if (weft_device_count(WEFT_DEVICE_TYPE_HIP) >= 0 && weft_unload_plugin("hip") == 0)
        diag("unloaded the hip plugin: the HIP cases use a fake device");
    if (!have_cpu_kernels)
        diag("the cpu plugin is not loaded: tests that run operators are skipped");
    test_dtypes();
    test_shapes();
    test_zero_copy();
    test_lifetime();
    test_hand_built();
    test_read_only();
    test_major_version();
    test_bad_input();
    test_devices();
    test_huge();
    return done_testing();
}
