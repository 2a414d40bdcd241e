/* backends/cuda/plugin.c — the CUDA plugin's entry (and, built through
 * gpu.h, the HIP plugin's): provides the reserved CUDA (or HIP) device
 * type (device interface over cudart, the core's caching allocator over
 * cudaMalloc/cudaFree with CUDA events for record_stream) and registers
 * the kernels.  On a machine without a GPU or driver it still
 * loads, and reports zero devices: every allocation is then refused by the
 * core before it reaches this file. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpu.h"

#include "cuda.h"
#include "libs.h"

static int ndevices;
static weft_caching_allocator *allocator;

static int cuda_error(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    return weft_set_error(e == cudaErrorMemoryAllocation ? WEFT_ENOMEM : WEFT_EDEVICE,
                          WFC_BACKEND ": %s: %s", what, cudaGetErrorString(e));
}

/* ------------------------------------------------- device interface */

static int device_count(void *ctx)
{
    (void)ctx;
    return ndevices;
}

/* Copies run on the calling thread's current stream, after the kernels
 * queued there, and wait for it: the host side may use the bytes at once. */
static int copy_on_stream(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                          int index, const char *what)
{
    int rc = cuda_error(cudaSetDevice(index), "selecting the device");
    cudaStream_t st = (cudaStream_t)wfc_current_stream(index);
    if (rc == 0)
        rc = cuda_error(cudaMemcpyAsync(dst, src, n, kind, st), what);
    return rc ? rc : cuda_error(cudaStreamSynchronize(st), what);
}

static int copy_to_host(void *ctx, void *dst, const void *src, size_t n, int index)
{
    (void)ctx;
    return copy_on_stream(dst, src, n, cudaMemcpyDeviceToHost, index, "copy to host");
}

/* Staged through pinned memory and not waited for: the source may be
 * reused at once, and later work on the stream sees the bytes. */
static int copy_from_host(void *ctx, void *dst, const void *src, size_t n, int index)
{
    (void)ctx;
    return wfc_copy_from_host_staged(dst, src, n, index, wfc_current_stream(index));
}

static int copy_device(void *ctx, void *dst, int dst_index, const void *src, int src_index,
                       size_t n)
{
    (void)ctx;
    if (dst_index == src_index)
        return copy_on_stream(dst, src, n, cudaMemcpyDeviceToDevice, dst_index, "device copy");
    return cuda_error(cudaMemcpyPeer(dst, dst_index, src, src_index, n), "peer copy");
}

static int synchronize(void *ctx, int index)
{
    (void)ctx;
    int rc = cuda_error(cudaSetDevice(index), "selecting the device");
    return rc ? rc : cuda_error(cudaDeviceSynchronize(), "synchronize");
}

/* ------------------------------------------------ streams and events */

static int stream_create(void *ctx, int index, void **out)
{
    (void)ctx;
    cudaStream_t st;
    int rc = cuda_error(cudaSetDevice(index), "selecting the device");
    if (rc == 0)
        rc = cuda_error(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream create");
    if (rc == 0)
        *out = st;
    return rc;
}

static void stream_destroy(void *ctx, int index, void *stream)
{
    (void)ctx;
    cudaSetDevice(index);
    cudaStreamDestroy((cudaStream_t)stream);
}

static int stream_synchronize(void *ctx, int index, void *stream)
{
    (void)ctx, (void)index;
    return cuda_error(cudaStreamSynchronize((cudaStream_t)stream), "stream synchronize");
}

static int stream_query(void *ctx, int index, void *stream)
{
    (void)ctx, (void)index;
    cudaError_t e = cudaStreamQuery((cudaStream_t)stream);
    if (e == cudaErrorNotReady)
        return 0;
    return e == cudaSuccess ? 1 : cuda_error(e, "stream query");
}

static int event_create(void *ctx, int index, void **out)
{
    (void)ctx;
    cudaEvent_t ev;
    int rc = cuda_error(cudaSetDevice(index), "selecting the device");
    if (rc == 0)
        rc = cuda_error(cudaEventCreate(&ev), "event create");
    if (rc == 0)
        *out = ev;
    return rc;
}

static void event_destroy_on(void *ctx, int index, void *event)
{
    (void)ctx, (void)index;
    cudaEventDestroy((cudaEvent_t)event);
}

static int event_record_on(void *ctx, int index, void *event, void *stream)
{
    (void)ctx, (void)index;
    return cuda_error(cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream), "event record");
}

static int stream_wait_event(void *ctx, int index, void *stream, void *event)
{
    (void)ctx, (void)index;
    return cuda_error(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, 0),
                      "stream wait event");
}

static int event_query_on(void *ctx, int index, void *event)
{
    (void)ctx, (void)index;
    cudaError_t e = cudaEventQuery((cudaEvent_t)event);
    if (e == cudaErrorNotReady)
        return 0;
    return e == cudaSuccess ? 1 : cuda_error(e, "event query");
}

static int event_synchronize(void *ctx, int index, void *event)
{
    (void)ctx, (void)index;
    return cuda_error(cudaEventSynchronize((cudaEvent_t)event), "event synchronize");
}

static int event_elapsed_ms(void *ctx, int index, void *start, void *end, float *ms)
{
    (void)ctx, (void)index;
    return cuda_error(cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)end),
                      "event elapsed time");
}

/* The calling thread's current stream on the device (NULL: the default
 * stream), for the caching allocator's per-stream pools and the kernels. */
void *wfc_current_stream(int index)
{
    weft_device d = {.type = WFC_DEVICE_TYPE, .index = (int16_t)index};
    return weft_stream_handle(weft_current_stream(d));
}

static void *current_stream(void *ctx, int index)
{
    (void)ctx;
    return wfc_current_stream(index);
}

/* ------------------------------------- raw memory for the caching allocator */

static int raw_alloc(void *ctx, int index, size_t n, void **out)
{
    (void)ctx;
    int rc = cuda_error(cudaSetDevice(index), "selecting the device");
    if (rc)
        return rc;
    cudaError_t e = cudaMalloc(out, n);
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError(); /* clear it: the allocator retries */
        return WEFT_ENOMEM;
    }
    return cuda_error(e, "cudaMalloc");
}

static void raw_free(void *ctx, int index, void *ptr)
{
    (void)ctx;
    cudaSetDevice(index);
    cudaFree(ptr);
}

static int event_record(void *ctx, int index, void *stream, void **out)
{
    (void)ctx;
    cudaEvent_t ev;
    int rc = cuda_error(cudaSetDevice(index), "selecting the device");
    if (rc == 0)
        rc = cuda_error(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "event create");
    if (rc == 0 && (rc = cuda_error(cudaEventRecord(ev, (cudaStream_t)stream), "event record")))
        cudaEventDestroy(ev);
    if (rc == 0)
        *out = ev;
    return rc;
}

static int event_query(void *ctx, void *event)
{
    (void)ctx;
    cudaError_t e = cudaEventQuery((cudaEvent_t)event);
    if (e == cudaErrorNotReady)
        return 0;
    return e == cudaSuccess ? 1 : cuda_error(e, "event query");
}

static void event_destroy(void *ctx, void *event)
{
    (void)ctx;
    cudaEventDestroy((cudaEvent_t)event);
}

/* ----------------------------------------------------------- entry */

static int cuda_init(weft_registrar *reg)
{
#ifdef WFC_RUNTIME_KEEP_LOADED
    /* already mapped as this plugin's dependency: RTLD_NODELETE keeps it
     * mapped after the plugin unloads (see gpu.h); nothing to do if the
     * name is not found, the runtime then just unloads with the plugin */
    (void)dlopen(WFC_RUNTIME_KEEP_LOADED, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
#endif
    /* No driver or no GPU: zero devices, and the plugin stays loaded so
     * weft-info can say why. */
    if (cudaGetDeviceCount(&ndevices) != cudaSuccess) {
        cudaGetLastError();
        ndevices = 0;
    }
    const weft_device_memory mem = {
        .struct_size = sizeof mem, .version = WEFT_DEVICE_MEMORY_VERSION,
        .raw_alloc = raw_alloc, .raw_free = raw_free, .current_stream = current_stream,
        .event_record = event_record, .event_query = event_query,
        .event_destroy = event_destroy, .synchronize = synchronize};
    int rc = weft_caching_allocator_create(&allocator, WFC_BACKEND, &mem, ndevices);
    if (rc < 0)
        return rc;
    const weft_device_interface iface = {
        .struct_size = sizeof iface, .version = WEFT_DEVICE_INTERFACE_VERSION,
        .device_count = device_count, .copy_to_host = copy_to_host,
        .copy_from_host = copy_from_host, .copy_device = copy_device,
        .synchronize = synchronize, .dlpack_device_code = WFC_DLPACK_DEVICE,
        .stream_create = stream_create, .stream_destroy = stream_destroy,
        .stream_synchronize = stream_synchronize, .stream_query = stream_query,
        .event_create = event_create, .event_destroy = event_destroy_on,
        .event_record = event_record_on, .stream_wait_event = stream_wait_event,
        .event_query = event_query_on, .event_synchronize = event_synchronize,
        .event_elapsed_ms = event_elapsed_ms, .kind = WEFT_DEVICE_KIND_ACCELERATOR};
    rc = weft_register_reserved_device(reg, WFC_DEVICE_TYPE, &iface,
                                       weft_caching_allocator_table(allocator));
    if (rc == 0)
        rc = wfc_register_kernels(reg);
    if (rc < 0) {
#if WFC_HAVE_BLAS_LIBRARY
        wfc_blas_shutdown();
#endif
#ifdef WEFT_HAVE_CUDNN
        wfc_conv_shutdown();
#endif
        weft_caching_allocator_destroy(allocator);
        allocator = NULL;
    }
    return rc;
}

static void cuda_fini(void)
{
    /* The core unloads a plugin only when no storage it allocated lives, so
     * every block is free and the cache can go. */
#if WFC_HAVE_BLAS_LIBRARY
    wfc_blas_shutdown();
#endif
#ifdef WEFT_HAVE_CUDNN
    wfc_conv_shutdown();
#endif
    wfc_pinned_shutdown();
#if WFC_HAVE_BLAS_LIBRARY
    wfc_libs_close();
#endif
    weft_caching_allocator_destroy(allocator);
    allocator = NULL;
}

WEFT_PLUGIN_DEFINE(WFC_BACKEND, NULL, "0.1", NULL, cuda_init, cuda_fini);
