/* tests/fuzz/fuzz_dlpack_import.c — libFuzzer harness for the DLPack import
 * path.  The input bytes describe a managed tensor (legacy or versioned)
 * with any ndim, shape, strides, dtype, device, byte_offset, version and
 * flags; the arrays are allocated with exactly ndim entries so that any
 * read beyond them is caught by AddressSanitizer.  Invariants checked on
 * every input: the producer's deleter runs exactly once (at once on
 * failure, when the tensor dies on success), the out-pointer is NULL on
 * failure, and an imported tensor exports again with the same geometry and
 * address.  tests/fuzz.sh builds it with the library sources and runs it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/dlpack.h>
#include <weft/plugin.h>
#include <weft/weft.h>

#include "fuzz_common.h"

#include "tests/host_device.h"

#define BUFFER_BYTES 4096

static _Alignas(64) unsigned char buffer[BUFFER_BYTES];
static int deleter_calls;

/* Sizes and strides drawn from a few interesting classes. */
static int64_t take_extent(reader *r)
{
    uint8_t kind = (uint8_t)take(r, 1);
    switch (kind % 8) {
    case 0:
        return 0;
    case 1:
        return 1;
    case 2:
        return -(int64_t)(take(r, 1) % 4);
    case 3:
    case 4:
    case 5:
        return (int64_t)(take(r, 1) % 17);
    case 6:
        return (int64_t)take(r, 8); /* anything, overflow included */
    default:
        return (int64_t)1 << (take(r, 1) % 63);
    }
}

/* What a producer's deleter does: count and free. */
typedef struct owned {
    int64_t *shape, *strides;
} owned;

static void legacy_delete(DLManagedTensor *self)
{
    owned *o = self->manager_ctx;
    deleter_calls++;
    free(o->shape);
    free(o->strides);
    free(o);
    free(self);
}

static void versioned_delete(DLManagedTensorVersioned *self)
{
    owned *o = self->manager_ctx;
    deleter_calls++;
    free(o->shape);
    free(o->strides);
    free(o);
    free(self);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* a plugin-like device type declaring DLPack's ExtDev code, so that
     * lookups by a plugin's code are exercised too */
    static const weft_device_interface iface = {
        sizeof(weft_device_interface), WEFT_DEVICE_INTERFACE_VERSION, NULL, fake_count,
        fake_copy, fake_copy, fake_copy_device, fake_sync, kDLExtDev,
    };
    static const weft_allocator alloc = {
        sizeof(weft_allocator), WEFT_ALLOCATOR_VERSION, NULL, fake_allocate, NULL, NULL,
    };
    weft_registrar *reg = NULL;
    int type = -1;
    if (weft_registrar_create(&reg, "fuzz") == 0)
        weft_register_device_type(reg, "fuzzdev", &iface, &alloc, &type);
    return 0; /* the registrar lives as long as the process */
}

/* Exports t again and checks that the description matches t. */
static void check_export(weft_tensor *t)
{
    DLManagedTensorVersioned *v = NULL;
    int rc = weft_to_dlpack_versioned(&v, t, 0);
    CHECK(rc == 0 && v);
    CHECK(v->dl_tensor.ndim == weft_tensor_ndim(t));
    CHECK(v->dl_tensor.data == weft_tensor_data_ptr(t) && v->dl_tensor.byte_offset == 0);
    for (int i = 0; i < v->dl_tensor.ndim; i++) {
        CHECK(v->dl_tensor.shape[i] == weft_tensor_size(t, i));
        CHECK(v->dl_tensor.strides[i] == weft_tensor_stride(t, i));
        CHECK(v->dl_tensor.strides[i] >= 0);
    }
    CHECK(((v->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0) == weft_tensor_is_read_only(t));
    v->deleter(v);
}

/* Reads the first and last element when they lie inside the buffer. */
static void touch(weft_tensor *t)
{
    if (weft_tensor_numel(t) == 0 || weft_tensor_device(t).type != WEFT_DEVICE_TYPE_CPU)
        return;
    int ndim = weft_tensor_ndim(t);
    size_t item = weft_dtype_size(weft_tensor_dtype(t));
    unsigned char *first = weft_tensor_data_ptr(t);
    int64_t last = 0;
    int64_t index[WEFT_MAX_DIMS];
    for (int i = 0; i < ndim; i++) {
        index[i] = weft_tensor_size(t, i) - 1;
        last += index[i] * weft_tensor_stride(t, i); /* fits: checked on import */
    }
    if (first < buffer || first + (last + 1) * (int64_t)item > buffer + BUFFER_BYTES)
        return;
    double value;
    int64_t zero[WEFT_MAX_DIMS] = {0};
    CHECK(weft_tensor_get(t, zero, &value) == 0);
    CHECK(weft_tensor_get(t, index, &value) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reader r = {data, size};
    uint8_t mode = (uint8_t)take(&r, 1);
    bool versioned = mode & 1, null_data = mode & 2, null_strides = mode & 4,
         null_shape = mode & 8, null_deleter = mode & 16;
    int ndim = (int8_t)take(&r, 1); /* -128..127: both sides of the limits */
    DLDataType dtype;
    dtype.code = (uint8_t)(take(&r, 1) % 20);
    uint8_t bits = (uint8_t)take(&r, 1);
    dtype.bits = (uint8_t)(bits < 200 ? 8u << (bits % 5) : bits); /* mostly 8..128 */
    dtype.lanes = (uint16_t)(take(&r, 1) < 240 ? 1 : take(&r, 2));
    int32_t device_type = (int32_t)(take(&r, 1) % 20);
    if (device_type == 19)
        device_type = (int32_t)take(&r, 4);
    int32_t device_id = (int8_t)take(&r, 1);
    uint64_t byte_offset = take(&r, 1) < 200 ? take(&r, 2) : take(&r, 8);
    uint32_t major = take(&r, 1) < 240 ? 1 : (uint32_t)take(&r, 4);
    uint32_t minor = (uint32_t)take(&r, 1);
    uint64_t flags = take(&r, 1);

    owned *o = calloc(1, sizeof *o);
    int n = ndim > 0 ? ndim : 0;
    if (n) {
        o->shape = malloc((size_t)n * sizeof(int64_t));
        o->strides = malloc((size_t)n * sizeof(int64_t));
        for (int i = 0; i < n; i++) {
            o->shape[i] = take_extent(&r);
            o->strides[i] = take_extent(&r);
        }
    }
    DLTensor dl;
    dl.data = null_data ? NULL : buffer;
    dl.device.device_type = (DLDeviceType)device_type;
    dl.device.device_id = device_id;
    dl.ndim = ndim;
    dl.dtype = dtype;
    dl.shape = null_shape ? NULL : o->shape;
    dl.strides = null_strides ? NULL : o->strides;
    dl.byte_offset = byte_offset;

    /* With a NULL deleter the struct stays the producer's: it is freed
     * right after the call, which also shows weft kept no pointer into it
     * or its arrays. */
    weft_tensor *t = (weft_tensor *)1;
    int rc;
    deleter_calls = 0;
    if (versioned) {
        DLManagedTensorVersioned *m = malloc(sizeof *m);
        m->version.major = major;
        m->version.minor = minor;
        m->manager_ctx = o;
        m->deleter = null_deleter ? NULL : versioned_delete;
        m->flags = flags;
        m->dl_tensor = dl;
        rc = weft_from_dlpack_versioned(&t, m);
        if (null_deleter) {
            CHECK(deleter_calls == 0);
            versioned_delete(m);
            deleter_calls = 0;
        }
    } else {
        DLManagedTensor *m = malloc(sizeof *m);
        m->dl_tensor = dl;
        m->manager_ctx = o;
        m->deleter = null_deleter ? NULL : legacy_delete;
        rc = weft_from_dlpack(&t, m);
        if (null_deleter) {
            CHECK(deleter_calls == 0);
            legacy_delete(m);
            deleter_calls = 0;
        }
    }
    if (rc < 0) {
        CHECK(t == NULL);
        CHECK(deleter_calls == (null_deleter ? 0 : 1));
        CHECK(weft_last_error()[0] != '\0');
        return 0;
    }
    CHECK(rc == 0 && t != NULL);
    CHECK(deleter_calls == 0);
    CHECK(weft_tensor_ndim(t) == ndim);
    check_export(t);
    touch(t);
    weft_tensor_release(t);
    CHECK(deleter_calls == (null_deleter ? 0 : 1));
    return 0;
}
