/* interop/dlpack/map.c — the correspondence between weft's dtypes and
 * devices and DLPack's codes.  Pure tables and lookups; it allocates
 * nothing and depends only on the device registry (c10/device.c). */
#include <stdio.h>

#include "interop/dlpack/dlpack_map.h"

/* Indexed by weft_dtype.  bool has its own code since DLPack 0.8 (weft
 * exports it in the legacy struct too, as newer PyTorch and NumPy do; a
 * consumer that predates the code refuses it rather than misreading it). */
static const DLDataType dtype_of_weft[WEFT_NUM_DTYPES] = {
    [WEFT_BOOL] = {kDLBool, 8, 1},      [WEFT_UINT8] = {kDLUInt, 8, 1},
    [WEFT_INT8] = {kDLInt, 8, 1},       [WEFT_INT16] = {kDLInt, 16, 1},
    [WEFT_INT32] = {kDLInt, 32, 1},     [WEFT_INT64] = {kDLInt, 64, 1},
    [WEFT_FLOAT16] = {kDLFloat, 16, 1}, [WEFT_BFLOAT16] = {kDLBfloat, 16, 1},
    [WEFT_FLOAT32] = {kDLFloat, 32, 1}, [WEFT_FLOAT64] = {kDLFloat, 64, 1},
    [WEFT_COMPLEX64] = {kDLComplex, 64, 1}, [WEFT_COMPLEX128] = {kDLComplex, 128, 1},
};

/* DLPack's type codes by number, for messages (7..17 are the float8, float6
 * and float4 kinds of DLPack 1.1, which weft lacks). */
static const char *dtype_code_name(unsigned code)
{
    static const char *const names[] = {"int", "uint", "float", "opaque handle", "bfloat",
                                        "complex", "bool"};
    if (code < sizeof names / sizeof names[0])
        return names[code];
    if (code >= 7 && code <= 14)
        return "float8";
    if (code == 15 || code == 16)
        return "float6";
    if (code == 17)
        return "float4";
    return "unknown";
}

/* DLPack's device codes by number, for messages. */
static const char *device_code_name(int code)
{
    static const char *const names[] = {
        [1] = "CPU",           [2] = "CUDA",     [3] = "CUDA host", [4] = "OpenCL",
        [7] = "Vulkan",        [8] = "Metal",    [9] = "VPI",       [10] = "ROCm",
        [11] = "ROCm host",    [12] = "ExtDev",  [13] = "CUDA managed",
        [14] = "oneAPI",       [15] = "WebGPU",  [16] = "Hexagon",   [17] = "MAIA",
        [18] = "Trainium",
    };
    if (code >= 0 && code < (int)(sizeof names / sizeof names[0]) && names[code])
        return names[code];
    return "unknown";
}

int wi__dlpack_dtype_of(DLDataType *out, weft_dtype dtype, const char *op)
{
    if ((int)dtype < 0 || dtype >= WEFT_NUM_DTYPES)
        return wf__errorf(WEFT_EDTYPE, "%s: dtype %d has no DLPack data type", op, (int)dtype);
    *out = dtype_of_weft[dtype];
    return 0;
}

int wi__dlpack_dtype_to_weft(weft_dtype *out, DLDataType dt, const char *op)
{
    if (dt.lanes != 1)
        return wf__errorf(WEFT_EDTYPE,
                          "%s: dl_tensor.dtype.lanes is %u; weft has no vector types "
                          "(lanes must be 1)",
                          op, (unsigned)dt.lanes);
    for (int d = 0; d < WEFT_NUM_DTYPES; d++)
        if (dtype_of_weft[d].code == dt.code && dtype_of_weft[d].bits == dt.bits) {
            *out = (weft_dtype)d;
            return 0;
        }
    /* say which bits the code would have taken */
    char bits[64] = "";
    size_t n = 0;
    for (int d = 0; d < WEFT_NUM_DTYPES && n < sizeof bits; d++)
        if (dtype_of_weft[d].code == dt.code)
            n += (size_t)snprintf(bits + n, sizeof bits - n, "%s%u", n ? ", " : "",
                                  (unsigned)dtype_of_weft[d].bits);
    if (n)
        return wf__errorf(WEFT_EDTYPE,
                          "%s: dl_tensor.dtype has code %u (%s) with bits %u; weft has that "
                          "code with bits %s",
                          op, (unsigned)dt.code, dtype_code_name(dt.code), (unsigned)dt.bits,
                          bits);
    return wf__errorf(WEFT_EDTYPE, "%s: dl_tensor.dtype has code %u (%s), which weft does not support",
                      op, (unsigned)dt.code, dtype_code_name(dt.code));
}

int wi__dlpack_device_of(DLDevice *out, weft_device device, const char *op)
{
    int code;
    switch (device.type) {
    case WEFT_DEVICE_TYPE_CPU:
        code = kDLCPU;
        break;
    case WEFT_DEVICE_TYPE_CUDA:
        code = kDLCUDA;
        break;
    case WEFT_DEVICE_TYPE_HIP:
        code = kDLROCM;
        break;
    default: {
        const wf_device_type *dt = device.type >= 0 && device.type < WEFT_MAX_DEVICE_TYPES
                                       ? &wf__device_types[device.type]
                                       : NULL;
        if (!dt || !dt->registered)
            return wf__errorf(WEFT_EDEVICE, "%s: unknown device type %d", op, device.type);
        const weft_device_interface *iface = atomic_load(&dt->iface); /* may go meanwhile */
        code = iface ? iface->dlpack_device_code : 0;
        if (code <= 0)
            return wf__errorf(WEFT_EDEVICE,
                              "%s: device type '%s' declares no DLPack device code "
                              "(its weft_device_interface.dlpack_device_code is %d)",
                              op, dt->name, code);
    }
    }
    out->device_type = (DLDeviceType)code;
    out->device_id = device.type == WEFT_DEVICE_TYPE_CPU ? 0 : device.index;
    return 0;
}

int wi__dlpack_device_to_weft(weft_device *out, DLDevice dev, const char *op)
{
    int code = (int)dev.device_type, type = -1;
    switch (code) {
    case kDLCPU:
    case kDLCUDAHost: /* pinned host memory: host code reads it like any other */
    case kDLROCMHost:
        /* the id of host memory means nothing to weft (producers send 0) */
        *out = WEFT_DEVICE_CPU;
        return 0;
    case kDLCUDA:
        type = WEFT_DEVICE_TYPE_CUDA;
        break;
    case kDLROCM:
        type = WEFT_DEVICE_TYPE_HIP;
        break;
    default:
        if (code <= 0)
            break;
        for (int i = WEFT_DEVICE_TYPE_FIRST_DYNAMIC; i < WEFT_MAX_DEVICE_TYPES; i++) {
            const wf_device_type *dt = &wf__device_types[i];
            const weft_device_interface *iface = atomic_load(&dt->iface);
            if (dt->registered && iface && iface->dlpack_device_code == code) {
                type = i;
                break;
            }
        }
    }
    if (type < 0)
        return wf__errorf(WEFT_EDEVICE,
                          "%s: dl_tensor.device.device_type is %d (%s), which no loaded weft "
                          "device type declares as its DLPack device code",
                          op, code, device_code_name(code));
    if (dev.device_id < 0 || dev.device_id > INT16_MAX)
        return wf__errorf(WEFT_EDEVICE, "%s: dl_tensor.device.device_id is %d, out of range", op,
                          dev.device_id);
    weft_device device = {(int16_t)type, (int16_t)dev.device_id};
    int rc = wf__check_device(device, op);
    if (rc < 0)
        return rc;
    *out = device;
    return 0;
}
