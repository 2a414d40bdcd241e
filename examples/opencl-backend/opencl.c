/* opencl.c — an out-of-tree weft device plugin on OpenCL: the device type
 * "opencl" (the first device of the first OpenCL platform that has one),
 * its allocator and copies, and kernels of its own for float32 add, sub,
 * mul, relu, exp and mm.  Everything else — other dtypes, broadcasting,
 * strided operands of the elementwise kernels, every other operator — runs
 * through weft's CPU fallback.
 *
 * Built with nothing of weft but `pkg-config weft-plugin` (see Makefile).
 *
 * Device memory is OpenCL buffers (cl_mem), but weft computes addresses:
 * a tensor's data pointer is its storage's pointer plus its offset.  So the
 * allocator hands out addresses in a range no host memory uses and keeps a
 * table from address ranges to buffers; copies and kernels translate an
 * address to (buffer, offset).  Nothing ever dereferences these addresses. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/plugin.h>
#include <weft/weft.h>

/* ------------------------------------------------------------ state */

static cl_context context;
static cl_command_queue queue;
static cl_device_id device;
static char device_name[128];
static int opencl_type = -1;

/* The program is built at the first kernel call, not at load: loading the
 * plugin (weft-info, autoloading) should not wait for a compiler. */
static cl_program program;
static cl_kernel k_axpy, k_mul, k_relu, k_exp, k_mm;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* table, program, kernel args */

static int cl_fail(const char *what, cl_int err)
{
    return weft_set_error(WEFT_EIO, "opencl: %s failed (OpenCL error %d)", what, (int)err);
}

/* ------------------------------------------------------------ addresses */

typedef struct allocation {
    uintptr_t base;
    size_t size;
    cl_mem buffer;
} allocation;

static allocation *table; /* sorted by base */
static size_t n_table, cap_table;
/* Addresses are never reused, so a stale pointer can never name a newer
 * buffer; 2^44 leaves 2^63 - 2^44 bytes of room. */
static uintptr_t next_address = (uintptr_t)1 << 44;

/* Finds the buffer holding address p (lock held). */
static const allocation *find_locked(uintptr_t p)
{
    size_t lo = 0, hi = n_table;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (table[mid].base + table[mid].size <= p)
            lo = mid + 1;
        else if (table[mid].base > p)
            hi = mid;
        else
            return &table[mid];
    }
    return NULL;
}

/* The buffer and byte offset of a device address range [p, p + n). */
static int resolve(const void *p, size_t n, cl_mem *buffer, size_t *offset)
{
    pthread_mutex_lock(&lock);
    const allocation *a = find_locked((uintptr_t)p);
    int rc = 0;
    if (!a || (uintptr_t)p + n > a->base + a->size)
        rc = weft_set_error(WEFT_EINVAL, "opencl: %p is not inside an OpenCL buffer of this plugin",
                            p);
    else
        *buffer = a->buffer, *offset = (uintptr_t)p - a->base;
    pthread_mutex_unlock(&lock);
    return rc;
}

static void opencl_free(void *data, void *ctx)
{
    (void)ctx;
    pthread_mutex_lock(&lock);
    const allocation *a = find_locked((uintptr_t)data);
    if (a) {
        /* OpenCL keeps the buffer until the commands using it are done */
        clReleaseMemObject(a->buffer);
        size_t i = (size_t)(a - table);
        memmove(&table[i], &table[i + 1], (n_table - i - 1) * sizeof *table);
        n_table--;
    }
    pthread_mutex_unlock(&lock);
}

static int opencl_allocate(void *ctx, size_t nbytes, int index, weft_data_ptr *out)
{
    (void)ctx;
    (void)index;
    size_t size = nbytes ? nbytes : 4; /* OpenCL buffers cannot be empty */
    cl_int err;
    cl_mem buffer = clCreateBuffer(context, CL_MEM_READ_WRITE, size, NULL, &err);
    if (!buffer)
        return err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ||
                       err == CL_OUT_OF_HOST_MEMORY || err == CL_INVALID_BUFFER_SIZE
                   ? weft_set_error(WEFT_ENOMEM, "opencl: out of device memory for %zu bytes", size)
                   : cl_fail("clCreateBuffer", err);
    pthread_mutex_lock(&lock);
    if (n_table == cap_table) {
        size_t cap = cap_table ? 2 * cap_table : 64;
        allocation *grown = realloc(table, cap * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&lock);
            clReleaseMemObject(buffer);
            return weft_set_error(WEFT_ENOMEM, "opencl: out of host memory");
        }
        table = grown;
        cap_table = cap;
    }
    /* new addresses only grow, so appending keeps the table sorted */
    table[n_table++] = (allocation){next_address, size, buffer};
    out->data = (void *)next_address;
    next_address += (size + 255) & ~(size_t)255;
    pthread_mutex_unlock(&lock);
    out->ctx = NULL;
    out->deleter = opencl_free;
    return 0;
}

/* ------------------------------------------------------------ copies */

static int opencl_count(void *ctx)
{
    (void)ctx;
    return 1;
}

static int opencl_to_host(void *ctx, void *dst, const void *src, size_t n, int index)
{
    (void)ctx;
    (void)index;
    cl_mem buffer;
    size_t offset;
    int rc = resolve(src, n, &buffer, &offset);
    if (rc < 0)
        return rc;
    cl_int err = clEnqueueReadBuffer(queue, buffer, CL_TRUE, offset, n, dst, 0, NULL, NULL);
    return err == CL_SUCCESS ? 0 : cl_fail("clEnqueueReadBuffer", err);
}

static int opencl_from_host(void *ctx, void *dst, const void *src, size_t n, int index)
{
    (void)ctx;
    (void)index;
    cl_mem buffer;
    size_t offset;
    int rc = resolve(dst, n, &buffer, &offset);
    if (rc < 0)
        return rc;
    cl_int err = clEnqueueWriteBuffer(queue, buffer, CL_TRUE, offset, n, src, 0, NULL, NULL);
    return err == CL_SUCCESS ? 0 : cl_fail("clEnqueueWriteBuffer", err);
}

static int opencl_copy_device(void *ctx, void *dst, int di, const void *src, int si, size_t n)
{
    (void)ctx;
    (void)di;
    (void)si;
    cl_mem from, to;
    size_t from_offset, to_offset;
    int rc = resolve(src, n, &from, &from_offset);
    if (rc == 0)
        rc = resolve(dst, n, &to, &to_offset);
    if (rc < 0)
        return rc;
    cl_int err = clEnqueueCopyBuffer(queue, from, to, from_offset, to_offset, n, 0, NULL, NULL);
    if (err == CL_SUCCESS)
        err = clFinish(queue);
    return err == CL_SUCCESS ? 0 : cl_fail("clEnqueueCopyBuffer", err);
}

static int opencl_synchronize(void *ctx, int index)
{
    (void)ctx;
    (void)index;
    cl_int err = clFinish(queue);
    return err == CL_SUCCESS ? 0 : cl_fail("clFinish", err);
}

/* ------------------------------------------------------------ kernels */

/* Offsets are in elements, so every kernel reads base[offset + i]. */
static const char *kernel_source =
    "__kernel void axpy_f32(__global const float *a, ulong ao, __global const float *b,\n"
    "                       ulong bo, __global float *out, ulong oo, float alpha)\n"
    "{ size_t i = get_global_id(0); out[oo + i] = a[ao + i] + alpha * b[bo + i]; }\n"
    "__kernel void mul_f32(__global const float *a, ulong ao, __global const float *b,\n"
    "                      ulong bo, __global float *out, ulong oo)\n"
    "{ size_t i = get_global_id(0); out[oo + i] = a[ao + i] * b[bo + i]; }\n"
    "__kernel void relu_f32(__global const float *a, ulong ao, __global float *out, ulong oo)\n"
    "{ size_t i = get_global_id(0); float x = a[ao + i];\n"
    "  out[oo + i] = (x > 0.0f || isnan(x)) ? x : 0.0f; }\n"
    "__kernel void exp_f32(__global const float *a, ulong ao, __global float *out, ulong oo)\n"
    "{ size_t i = get_global_id(0); out[oo + i] = exp(a[ao + i]); }\n"
    "/* out[n, m] = a[n, k] @ b[k, m]; a and b with any strides */\n"
    "__kernel void mm_f32(__global const float *a, ulong ao, long as0, long as1,\n"
    "                     __global const float *b, ulong bo, long bs0, long bs1,\n"
    "                     __global float *out, ulong oo, long k, long m)\n"
    "{ size_t i = get_global_id(0), j = get_global_id(1); float acc = 0.0f;\n"
    "  for (long p = 0; p < k; p++)\n"
    "      acc += a[ao + i * as0 + p * as1] * b[bo + p * bs0 + j * bs1];\n"
    "  out[oo + i * m + j] = acc; }\n";

static int build_program_locked(void)
{
    if (program)
        return 0;
    cl_int err;
    cl_program p = clCreateProgramWithSource(context, 1, &kernel_source, NULL, &err);
    if (!p)
        return cl_fail("clCreateProgramWithSource", err);
    err = clBuildProgram(p, 1, &device, "", NULL, NULL);
    if (err != CL_SUCCESS) {
        char log[2048] = "";
        clGetProgramBuildInfo(p, device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
        clReleaseProgram(p);
        return weft_set_error(WEFT_EIO, "opencl: building the kernels failed (%d): %s", (int)err,
                              log);
    }
    struct {
        cl_kernel *k;
        const char *name;
    } kernels[] = {{&k_axpy, "axpy_f32"}, {&k_mul, "mul_f32"}, {&k_relu, "relu_f32"},
                   {&k_exp, "exp_f32"}, {&k_mm, "mm_f32"}};
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
        *kernels[i].k = clCreateKernel(p, kernels[i].name, &err);
        if (!*kernels[i].k) {
            for (size_t j = 0; j < i; j++)
                clReleaseKernel(*kernels[j].k), *kernels[j].k = NULL;
            clReleaseProgram(p);
            return cl_fail("clCreateKernel", err);
        }
    }
    program = p;
    return 0;
}

/* A kernel argument: a buffer and its element offset, or a plain value. */
typedef struct karg {
    const weft_tensor *tensor; /* NULL for a value */
    const void *value;
    size_t size;
} karg;

/* Sets the arguments and enqueues kernel over `global` work items.
 * Tensor arguments take two slots: the buffer and the element offset. */
static int launch(cl_kernel *kernel, const karg *args, int nargs, int dims, const size_t *global)
{
    pthread_mutex_lock(&lock);
    int rc = build_program_locked();
    cl_uint slot = 0;
    cl_int err = CL_SUCCESS;
    for (int i = 0; rc == 0 && i < nargs && err == CL_SUCCESS; i++) {
        if (!args[i].tensor) {
            err = clSetKernelArg(*kernel, slot++, args[i].size, args[i].value);
            continue;
        }
        const weft_tensor *t = args[i].tensor;
        uintptr_t p = (uintptr_t)weft_tensor_data_ptr(t);
        const allocation *a = find_locked(p);
        if (!a) {
            rc = weft_set_error(WEFT_EINVAL, "opencl: a tensor's data is not an OpenCL buffer");
            break;
        }
        cl_ulong offset = (cl_ulong)((p - a->base) / sizeof(float));
        err = clSetKernelArg(*kernel, slot++, sizeof(cl_mem), &a->buffer);
        if (err == CL_SUCCESS)
            err = clSetKernelArg(*kernel, slot++, sizeof offset, &offset);
    }
    if (rc == 0 && err == CL_SUCCESS)
        err = clEnqueueNDRangeKernel(queue, *kernel, (cl_uint)dims, NULL, global, NULL, 0, NULL,
                                     NULL);
    pthread_mutex_unlock(&lock);
    if (rc == 0 && err != CL_SUCCESS)
        rc = cl_fail("launching a kernel", err);
    return rc;
}

static bool is_f32_contiguous(const weft_tensor *t)
{
    return weft_tensor_dtype(t) == WEFT_FLOAT32 && weft_tensor_is_contiguous(t) &&
           weft_tensor_device(t).type == opencl_type;
}

static bool same_sizes(const weft_tensor *a, const weft_tensor *b)
{
    return weft_tensor_ndim(a) == weft_tensor_ndim(b) &&
           memcmp(weft_tensor_sizes(a), weft_tensor_sizes(b),
                  (size_t)weft_tensor_ndim(a) * sizeof(int64_t)) == 0;
}

/* Allocates the result like `like`, runs the kernel, returns the result. */
static int run_elementwise(weft_call *call, cl_kernel *kernel, const weft_tensor *a,
                           const weft_tensor *b, const float *alpha)
{
    weft_tensor *out = NULL;
    int rc = weft_empty_like(&out, a);
    if (rc < 0)
        return rc;
    size_t n = (size_t)weft_tensor_numel(a);
    if (n > 0) {
        karg args[4];
        int nargs = 0;
        args[nargs++] = (karg){a, NULL, 0};
        if (b)
            args[nargs++] = (karg){b, NULL, 0};
        args[nargs++] = (karg){out, NULL, 0};
        if (alpha)
            args[nargs++] = (karg){NULL, alpha, sizeof *alpha};
        rc = launch(kernel, args, nargs, 1, &n);
    }
    if (rc < 0) {
        weft_tensor_release(out);
        return rc;
    }
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    call->rets[0].u.tensor = out;
    return 0;
}

/* add and sub: out = self + alpha * other (sub negates alpha).  Only
 * contiguous float32 operands of one shape; the rest goes to the CPU. */
static int binary_axpy(weft_call *call, void *ctx)
{
    const weft_tensor *a = call->args[0].u.tensor, *b = call->args[1].u.tensor;
    if (!is_f32_contiguous(a) || !is_f32_contiguous(b) || !same_sizes(a, b))
        return weft_call_cpu_fallback(call);
    float alpha = (float)(weft_value_double(&call->args[2]) * (ctx ? -1.0 : 1.0));
    return run_elementwise(call, &k_axpy, a, b, &alpha);
}

static int binary_mul(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *a = call->args[0].u.tensor, *b = call->args[1].u.tensor;
    if (!is_f32_contiguous(a) || !is_f32_contiguous(b) || !same_sizes(a, b))
        return weft_call_cpu_fallback(call);
    return run_elementwise(call, &k_mul, a, b, NULL);
}

/* relu and exp: ctx is the kernel */
static int unary(weft_call *call, void *ctx)
{
    const weft_tensor *a = call->args[0].u.tensor;
    if (!is_f32_contiguous(a))
        return weft_call_cpu_fallback(call);
    return run_elementwise(call, (cl_kernel *)ctx, a, NULL, NULL);
}

/* mm of float32 matrices with any strides; other cases (dtypes, shape
 * errors) go to the CPU, which also words the errors. */
static int mm(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *a = call->args[0].u.tensor, *b = call->args[1].u.tensor;
    if (weft_tensor_dtype(a) != WEFT_FLOAT32 || weft_tensor_dtype(b) != WEFT_FLOAT32 ||
        weft_tensor_ndim(a) != 2 || weft_tensor_ndim(b) != 2 ||
        weft_tensor_size(a, 1) != weft_tensor_size(b, 0) ||
        weft_tensor_device(a).type != opencl_type || weft_tensor_device(b).type != opencl_type)
        return weft_call_cpu_fallback(call);
    int64_t sizes[2] = {weft_tensor_size(a, 0), weft_tensor_size(b, 1)};
    cl_long k = weft_tensor_size(a, 1), m = sizes[1];
    cl_long as0 = weft_tensor_stride(a, 0), as1 = weft_tensor_stride(a, 1);
    cl_long bs0 = weft_tensor_stride(b, 0), bs1 = weft_tensor_stride(b, 1);
    weft_tensor *out = NULL;
    int rc = weft_empty(&out, sizes, 2, WEFT_FLOAT32, weft_tensor_device(a));
    if (rc < 0)
        return rc;
    if (sizes[0] > 0 && sizes[1] > 0) {
        karg args[] = {{a, NULL, 0},           {NULL, &as0, sizeof as0}, {NULL, &as1, sizeof as1},
                       {b, NULL, 0},           {NULL, &bs0, sizeof bs0}, {NULL, &bs1, sizeof bs1},
                       {out, NULL, 0},         {NULL, &k, sizeof k},     {NULL, &m, sizeof m}};
        size_t global[2] = {(size_t)sizes[0], (size_t)sizes[1]};
        rc = launch(&k_mm, args, (int)(sizeof args / sizeof args[0]), 2, global);
    }
    if (rc < 0) {
        weft_tensor_release(out);
        return rc;
    }
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    call->rets[0].u.tensor = out;
    return 0;
}

/* ------------------------------------------------------------ the plugin */

static void release_opencl(void)
{
    cl_kernel *kernels[] = {&k_axpy, &k_mul, &k_relu, &k_exp, &k_mm};
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        if (*kernels[i])
            clReleaseKernel(*kernels[i]), *kernels[i] = NULL;
    if (program)
        clReleaseProgram(program), program = NULL;
    if (queue)
        clReleaseCommandQueue(queue), queue = NULL;
    if (context)
        clReleaseContext(context), context = NULL;
    free(table);
    table = NULL;
    n_table = cap_table = 0;
}

/* The first device of the first platform that has one. */
static int open_device(void)
{
    cl_platform_id platforms[8];
    cl_uint nplatforms = 0;
    cl_int err = clGetPlatformIDs(8, platforms, &nplatforms);
    if (err != CL_SUCCESS || nplatforms == 0)
        return weft_set_error(WEFT_ENOTFOUND,
                              "opencl: no OpenCL platform found (clGetPlatformIDs: %d); install "
                              "an ICD such as pocl-opencl-icd",
                              (int)err);
    for (cl_uint i = 0; i < nplatforms && nplatforms <= 8; i++) {
        cl_uint ndevices = 0;
        if (clGetDeviceIDs(platforms[i], CL_DEVICE_TYPE_ALL, 1, &device, &ndevices) ==
                CL_SUCCESS &&
            ndevices > 0) {
            clGetDeviceInfo(device, CL_DEVICE_NAME, sizeof device_name - 1, device_name, NULL);
            context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
            if (!context)
                return cl_fail("clCreateContext", err);
            queue = clCreateCommandQueue(context, device, 0, &err);
            if (!queue) {
                release_opencl();
                return cl_fail("clCreateCommandQueue", err);
            }
            return 0;
        }
    }
    return weft_set_error(WEFT_ENOTFOUND, "opencl: %u OpenCL platform(s) but no device",
                          (unsigned)nplatforms);
}

static int init(weft_registrar *reg)
{
    int rc = open_device();
    if (rc < 0)
        return rc;
    /* An OpenCL driver may run on the CPU (PoCL does): then the device is
     * emulated, and a program choosing the best device for the user (such
     * as weft-train --device best) keeps to the CPU backend. */
    cl_device_type cl_type = 0;
    clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof cl_type, &cl_type, NULL);
    /* the core copies the interface, so it may live on the stack;
     * dlpack_device_code stays 0: these addresses mean nothing to another
     * library */
    const weft_device_interface iface = {
        .struct_size = sizeof(weft_device_interface),
        .version = WEFT_DEVICE_INTERFACE_VERSION,
        .device_count = opencl_count,
        .copy_to_host = opencl_to_host,
        .copy_from_host = opencl_from_host,
        .copy_device = opencl_copy_device,
        .synchronize = opencl_synchronize,
        .kind = cl_type & CL_DEVICE_TYPE_CPU ? WEFT_DEVICE_KIND_EMULATED
                                             : WEFT_DEVICE_KIND_ACCELERATOR,
    };
    static const weft_allocator alloc = {
        sizeof(weft_allocator), WEFT_ALLOCATOR_VERSION, NULL, opencl_allocate, NULL, NULL,
    };
    static const int negate = 1;
    rc = weft_register_device_type(reg, "opencl", &iface, &alloc, &opencl_type);
    struct {
        const char *op;
        weft_kernel_fn fn;
        void *ctx;
    } kernels[] = {{"add", binary_axpy, NULL},     {"sub", binary_axpy, (void *)&negate},
                   {"mul", binary_mul, NULL},      {"relu", unary, &k_relu},
                   {"exp", unary, &k_exp},         {"mm", mm, NULL}};
    for (size_t i = 0; rc == 0 && i < sizeof kernels / sizeof kernels[0]; i++)
        rc = weft_register_kernel(reg, kernels[i].op, WEFT_KEY_DENSE, opencl_type, kernels[i].fn,
                                  kernels[i].ctx, NULL);
    if (rc < 0)
        release_opencl(); /* the core rolls back what was registered */
    return rc;
}

static void fini(void)
{
    release_opencl();
}

WEFT_PLUGIN_DEFINE("opencl", NULL, "0.1", NULL, init, fini);
