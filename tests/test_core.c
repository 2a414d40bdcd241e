/* tests/test_core.c — dtypes and promotion, devices, errors, tensor creation,
 * from_blob ownership, reference counts and bad input to the factories. */
#include <stdatomic.h>
#include <stdint.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#include "tests/tap.h"

static int deleted;
static void count_delete(void *ctx)
{
    (*(int *)ctx)++;
}

static void test_dtypes(void)
{
    is_str(weft_dtype_name(WEFT_BFLOAT16), "bfloat16", "dtype name");
    is_int(weft_dtype_size(WEFT_COMPLEX128), 16, "complex128 is 16 bytes");
    is_int(weft_dtype_size(WEFT_BOOL), 1, "bool is 1 byte");
    is_int(weft_dtype_from_name("long"), WEFT_INT64, "'long' is int64");
    is_int(weft_dtype_from_name("torch.half"), WEFT_FLOAT16, "'torch.half' is float16");
    is_int(weft_dtype_from_name("nope"), WEFT_DTYPE_UNSET, "unknown dtype name");
    /* samples of PyTorch's promotion table */
    struct { weft_dtype a, b, want; } cases[] = {
        {WEFT_UINT8, WEFT_INT8, WEFT_INT16},     {WEFT_BOOL, WEFT_BOOL, WEFT_BOOL},
        {WEFT_BOOL, WEFT_UINT8, WEFT_UINT8},     {WEFT_INT32, WEFT_INT64, WEFT_INT64},
        {WEFT_INT64, WEFT_FLOAT16, WEFT_FLOAT16}, {WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_FLOAT32},
        {WEFT_INT32, WEFT_FLOAT32, WEFT_FLOAT32}, {WEFT_FLOAT32, WEFT_FLOAT64, WEFT_FLOAT64},
        {WEFT_FLOAT64, WEFT_COMPLEX64, WEFT_COMPLEX128}, {WEFT_BFLOAT16, WEFT_COMPLEX64, WEFT_COMPLEX64},
        {WEFT_UINT8, WEFT_BOOL, WEFT_UINT8},     {WEFT_INT8, WEFT_INT16, WEFT_INT16},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        is_int(weft_promote_types(cases[i].a, cases[i].b), cases[i].want, "promote(%s, %s) = %s",
               weft_dtype_name(cases[i].a), weft_dtype_name(cases[i].b), weft_dtype_name(cases[i].want));
        is_int(weft_promote_types(cases[i].b, cases[i].a), cases[i].want, "promotion is symmetric");
    }
    is_int(weft_promote_types((weft_dtype)99, WEFT_INT8), WEFT_DTYPE_UNSET, "invalid dtype promotes to unset");
    /* result_type: a 0-d tensor ranks below a dimensioned one of its
     * category (samples of torch.result_type) */
    struct { weft_dtype a; int na; weft_dtype b; int nb; weft_dtype want; } rt[] = {
        {WEFT_FLOAT32, 2, WEFT_FLOAT64, 0, WEFT_FLOAT32},
        {WEFT_INT8, 1, WEFT_INT64, 0, WEFT_INT8},
        {WEFT_UINT8, 1, WEFT_INT8, 0, WEFT_UINT8},
        {WEFT_INT32, 1, WEFT_FLOAT64, 0, WEFT_FLOAT64},
        {WEFT_BOOL, 1, WEFT_INT64, 0, WEFT_INT64},
        {WEFT_FLOAT16, 1, WEFT_COMPLEX128, 0, WEFT_COMPLEX64},
        {WEFT_FLOAT64, 1, WEFT_COMPLEX64, 0, WEFT_COMPLEX128},
        {WEFT_FLOAT32, 0, WEFT_FLOAT64, 0, WEFT_FLOAT64},
        {WEFT_UINT8, 1, WEFT_INT8, 1, WEFT_INT16},
        {WEFT_INT64, 0, WEFT_FLOAT16, 1, WEFT_FLOAT16},
    };
    for (size_t i = 0; i < sizeof rt / sizeof rt[0]; i++) {
        int64_t one[2] = {2, 3};
        weft_tensor *a = NULL, *b = NULL;
        weft_empty(&a, one, rt[i].na, rt[i].a, WEFT_DEVICE_CPU);
        weft_empty(&b, one, rt[i].nb, rt[i].b, WEFT_DEVICE_CPU);
        const weft_tensor *ab[] = {a, b}, *ba[] = {b, a};
        is_int(weft_result_type(ab, 2), rt[i].want, "result_type(%s %d-d, %s %d-d) = %s",
               weft_dtype_name(rt[i].a), rt[i].na, weft_dtype_name(rt[i].b), rt[i].nb,
               weft_dtype_name(rt[i].want));
        is_int(weft_result_type(ba, 2), rt[i].want, "  in either order");
        weft_tensor_release(a);
        weft_tensor_release(b);
    }
    is_int(weft_result_type(NULL, 0), WEFT_DTYPE_UNSET, "result_type of no tensor is unset");
    ok(weft_can_cast(WEFT_INT32, WEFT_FLOAT32), "int32 can be cast to float32");
    ok(!weft_can_cast(WEFT_FLOAT32, WEFT_INT32), "float32 cannot be cast to int32");
    ok(!weft_can_cast(WEFT_COMPLEX64, WEFT_FLOAT64), "complex cannot be cast to real");
    ok(!weft_can_cast(WEFT_INT8, WEFT_BOOL), "int8 cannot be cast to bool");
    ok(weft_dtype_is_floating(WEFT_BFLOAT16) && !weft_dtype_is_floating(WEFT_INT8), "is_floating");
    ok(weft_dtype_is_integral(WEFT_BOOL, true) && !weft_dtype_is_integral(WEFT_BOOL, false), "is_integral and bool");
}

static void test_errors(void)
{
    is_str(weft_strerror(WEFT_ESHAPE), "shape mismatch", "strerror");
    is_str(weft_error_name(WEFT_EOVERFLOW), "WEFT_EOVERFLOW", "error name");
    is_str(weft_strerror(-999), "unknown error", "unknown code");
    weft_set_error(WEFT_EINVAL, "custom %d", 7);
    is_str(weft_last_error(), "custom 7", "set_error formats the message");
    weft_clear_error();
    is_str(weft_last_error(), "", "clear_error");
}

static void test_devices(void)
{
    weft_device d;
    is_int(weft_device_from_string(&d, "cpu"), 0, "parse 'cpu'");
    ok(weft_device_equal(d, WEFT_DEVICE_CPU), "'cpu' is the host");
    is_int(weft_device_from_string(&d, "cuda:1"), 0, "parse 'cuda:1' (reserved type)");
    is_int(d.type, WEFT_DEVICE_TYPE_CUDA, "cuda type id");
    is_int(d.index, 1, "cuda index");
    char buf[32];
    weft_device_to_string(d, buf, sizeof buf);
    is_str(buf, "cuda:1", "device to string");
    is_int(weft_device_from_string(&d, "nosuchdev:0"), WEFT_EDEVICE, "unknown device type");
    like(weft_last_error(), "nosuchdev", "message names the type");
    is_int(weft_device_from_string(&d, "cpu:x"), WEFT_EINVAL, "malformed index");
    is_int(weft_device_from_string(&d, ""), WEFT_EINVAL, "empty string");
    is_int(weft_device_count(WEFT_DEVICE_TYPE_CPU), 1, "one host device");
    is_str(weft_device_type_name(WEFT_DEVICE_TYPE_HIP), "hip", "hip is reserved");
    is_int(weft_device_type_from_name("cuda"), WEFT_DEVICE_TYPE_CUDA, "type from name");
    weft_tensor *t = (weft_tensor *)1;
    int64_t sz[1] = {4};
    weft_device cuda = {WEFT_DEVICE_TYPE_CUDA, 0};
    is_int(weft_empty(&t, sz, 1, WEFT_FLOAT32, cuda), WEFT_EDEVICE, "empty on a device without plugin");
    ok(t == NULL, "out is NULL after an error");
    like(weft_last_error(), "plugin", "message suggests loading its plugin");
    weft_device bad = {77, 0};
    is_int(weft_empty(&t, sz, 1, WEFT_FLOAT32, bad), WEFT_EDEVICE, "empty on an invalid type id");
    weft_device cpu1 = {WEFT_DEVICE_TYPE_CPU, 1};
    is_int(weft_empty(&t, sz, 1, WEFT_FLOAT32, cpu1), WEFT_EDEVICE, "cpu:1 does not exist");
}

static void test_empty(void)
{
    int64_t sizes[3] = {2, 3, 4};
    weft_tensor *t = NULL;
    is_int(weft_empty(&t, sizes, 3, WEFT_FLOAT32, WEFT_DEVICE_CPU), 0, "empty [2,3,4]");
    is_int(weft_tensor_ndim(t), 3, "ndim");
    is_int(weft_tensor_numel(t), 24, "numel");
    is_int(weft_tensor_strides(t)[0], 12, "stride 0");
    is_int(weft_tensor_strides(t)[2], 1, "stride 2");
    is_int(weft_tensor_size(t, -1), 4, "size(-1)");
    is_int(weft_tensor_size(t, 3), -1, "size(3) out of range");
    ok(weft_tensor_is_contiguous(t), "contiguous");
    ok(((uintptr_t)weft_tensor_data_ptr(t) & 63) == 0, "host memory is 64-byte aligned");
    is_int(weft_tensor_version(t), 0, "fresh version is 0");
    weft_tensor *r = weft_tensor_retain(t);
    ok(r == t, "retain returns its argument");
    weft_tensor_release(r);
    weft_tensor_release(t);
    weft_tensor_release(NULL);
    ok(1, "release(NULL) is a no-op");

    weft_tensor *s = NULL;
    is_int(weft_empty(&s, NULL, 0, WEFT_INT64, WEFT_DEVICE_CPU), 0, "0-d tensor");
    is_int(weft_tensor_numel(s), 1, "0-d holds one element");
    weft_tensor_release(s);

    int64_t zero[2] = {0, 5};
    is_int(weft_empty(&s, zero, 2, WEFT_FLOAT64, WEFT_DEVICE_CPU), 0, "zero-size tensor");
    is_int(weft_tensor_numel(s), 0, "numel 0");
    weft_tensor_release(s);

    /* bad input */
    weft_tensor *bad = (weft_tensor *)1;
    is_int(weft_empty(NULL, sizes, 3, WEFT_FLOAT32, WEFT_DEVICE_CPU), WEFT_EINVAL, "NULL out");
    int64_t neg[2] = {2, -1};
    is_int(weft_empty(&bad, neg, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU), WEFT_EINVAL, "negative size");
    ok(bad == NULL, "out NULL after negative size");
    like(weft_last_error(), "negative size -1", "message names the size");
    int64_t huge[3] = {INT64_MAX / 2, 3, 1};
    is_int(weft_empty(&bad, huge, 3, WEFT_FLOAT32, WEFT_DEVICE_CPU), WEFT_EOVERFLOW, "numel overflow");
    like(weft_last_error(), "overflows int64", "overflow message");
    /* 2^80 wraps the extent to 0, after which the third dimension would
     * multiply the element count past int64 (fuzz_call_boxed found it) */
    int64_t wraps[3] = {(int64_t)1 << 40, (int64_t)1 << 40, (int64_t)1 << 40};
    is_int(weft_empty(&bad, wraps, 3, WEFT_FLOAT32, WEFT_DEVICE_CPU), WEFT_EOVERFLOW,
           "an extent that wraps to 0 still overflows");
    int64_t big[1] = {INT64_MAX / 2};
    is_int(weft_empty(&bad, big, 1, WEFT_FLOAT64, WEFT_DEVICE_CPU), WEFT_EOVERFLOW, "byte size overflow");
    int64_t huge0[3] = {INT64_MAX, INT64_MAX, 0};
    is_int(weft_empty(&bad, huge0, 3, WEFT_FLOAT32, WEFT_DEVICE_CPU), WEFT_EOVERFLOW,
           "a zero dimension does not excuse strides that overflow");
    int64_t big0[3] = {INT64_MAX / 4, 3, 0};
    is_int(weft_empty(&bad, big0, 3, WEFT_FLOAT32, WEFT_DEVICE_CPU), 0, "large sizes with a zero are fine while strides fit");
    is_int(weft_tensor_numel(bad), 0, "and hold nothing");
    weft_tensor_release(bad);
    bad = NULL;
    is_int(weft_empty(&bad, sizes, 3, (weft_dtype)42, WEFT_DEVICE_CPU), WEFT_EINVAL, "bad dtype");
    is_int(weft_empty(&bad, NULL, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU), WEFT_EINVAL, "NULL sizes with ndim 2");
    is_int(weft_empty(&bad, sizes, -1, WEFT_FLOAT32, WEFT_DEVICE_CPU), WEFT_EINVAL, "negative ndim");
    is_int(weft_empty(&bad, sizes, WEFT_MAX_DIMS + 1, WEFT_FLOAT32, WEFT_DEVICE_CPU), WEFT_EINVAL, "too many dims");
    int64_t many[8] = {1, 2, 1, 2, 1, 2, 1, 2};
    is_int(weft_empty(&bad, many, 8, WEFT_INT16, WEFT_DEVICE_CPU), 0, "8-d tensor (sizes stored out of line)");
    is_int(weft_tensor_strides(bad)[0], 16, "8-d stride");
    weft_tensor_release(bad);
}

static void test_from_blob(void)
{
    float data[6] = {1, 2, 3, 4, 5, 6};
    int64_t sizes[2] = {2, 3};
    weft_tensor *t = NULL;
    deleted = 0;
    is_int(weft_from_blob(&t, data, sizes, NULL, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU, count_delete,
                          &deleted), 0, "from_blob");
    ok(weft_tensor_data_ptr(t) == data, "no copy");
    double v;
    int64_t idx[2] = {1, 2};
    is_int(weft_tensor_get(t, idx, &v), 0, "get");
    is_double(v, 6.0, 0, "element [1,2]");
    weft_tensor *alias = NULL;
    is_int(weft_alias(&alias, t), 0, "alias");
    weft_tensor_release(t);
    is_int(deleted, 0, "deleter waits for the last view");
    weft_tensor_release(alias);
    is_int(deleted, 1, "deleter called once when the last view dies");

    int64_t strides[2] = {1, 2};
    is_int(weft_from_blob(&t, data, sizes, strides, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL, NULL), 0,
           "from_blob with strides");
    idx[0] = 1;
    idx[1] = 1;
    weft_tensor_get(t, idx, &v);
    is_double(v, 4.0, 0, "strided element [1,1] = data[1*1 + 1*2]");
    ok(!weft_tensor_is_contiguous(t), "column-major is not contiguous");
    idx[1] = 3;
    is_int(weft_tensor_get(t, idx, &v), WEFT_ERANGE, "get out of bounds");
    weft_tensor_release(t);

    /* errors still honour the deleter, exactly once */
    deleted = 0;
    t = (weft_tensor *)1;
    is_int(weft_from_blob(&t, NULL, sizes, NULL, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU, count_delete, &deleted),
           WEFT_EINVAL, "NULL data with elements");
    ok(t == NULL, "out NULL");
    is_int(deleted, 1, "deleter called on error");
    int64_t neg_strides[2] = {3, -1};
    is_int(weft_from_blob(&t, data, sizes, neg_strides, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU, count_delete,
                          &deleted), WEFT_EINVAL, "negative stride refused");
    is_int(deleted, 2, "deleter called on error again");
    int64_t huge[2] = {INT64_MAX, 2};
    is_int(weft_from_blob(&t, data, huge, NULL, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU, count_delete, &deleted),
           WEFT_EOVERFLOW, "overflowing sizes");
    is_int(deleted, 3, "deleter called for overflow");
    weft_device cuda = {WEFT_DEVICE_TYPE_CUDA, 0};
    is_int(weft_from_blob(&t, data, sizes, NULL, 2, WEFT_FLOAT32, cuda, count_delete, &deleted),
           WEFT_EDEVICE, "unknown device");
    is_int(deleted, 4, "deleter called for a bad device");
    is_int(weft_from_blob(NULL, data, sizes, NULL, 2, WEFT_FLOAT32, WEFT_DEVICE_CPU, count_delete, &deleted),
           WEFT_EINVAL, "NULL out");
    is_int(deleted, 5, "deleter called for NULL out");
    is_int(weft_from_blob(&t, NULL, NULL, NULL, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU, NULL, NULL),
           WEFT_EINVAL, "NULL sizes");
}

static void test_broadcast(void)
{
    int64_t a[2] = {3, 1}, b[3] = {2, 1, 4}, out[3];
    int n;
    is_int(weft_broadcast_shapes(out, &n, a, 2, b, 3), 0, "broadcast [3,1] with [2,1,4]");
    is_int(n, 3, "rank 3");
    ok(out[0] == 2 && out[1] == 3 && out[2] == 4, "shape [2,3,4]");
    int64_t c[1] = {5};
    is_int(weft_broadcast_shapes(out, &n, a, 2, c, 1), 0, "[3,1] with [5]");
    int64_t d[2] = {3, 2};
    is_int(weft_broadcast_shapes(out, &n, d, 2, c, 1), WEFT_ESHAPE, "[3,2] with [5] fails");
    like(weft_last_error(), "[3, 2] and [5]", "message shows both shapes");
    is_int(weft_broadcast_shapes(out, &n, NULL, 0, c, 1), 0, "0-d with [5]");
    is_int(out[0], 5, "0-d broadcasts");
}

static void test_generator(void)
{
    uint32_t a[4], b[4];
    weft_philox(42, 7, a);
    weft_philox(42, 7, b);
    ok(memcmp(a, b, sizeof a) == 0, "philox is a pure function");
    weft_philox(42, 8, b);
    ok(memcmp(a, b, sizeof a) != 0, "another counter gives other numbers");
    weft_generator *g;
    is_int(weft_generator_create(&g, 123), 0, "generator_create");
    uint64_t seed, off1, off2;
    weft_generator_reserve(g, 10, &seed, &off1);
    weft_generator_reserve(g, 5, &seed, &off2);
    is_int(seed, 123, "seed");
    is_int(off2 - off1, 10, "reserve advances the offset");
    weft_generator_set_seed(g, 9);
    weft_generator_reserve(g, 1, &seed, &off1);
    is_int(off1, 0, "set_seed resets the offset");
    weft_generator_destroy(g);
}

int main(void)
{
    test_dtypes();
    test_errors();
    test_devices();
    test_empty();
    test_from_blob();
    test_broadcast();
    test_generator();
    return done_testing();
}
