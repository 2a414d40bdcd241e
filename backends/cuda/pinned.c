/* backends/cuda/pinned.c — host-to-device copies staged through pinned
 * host memory: the bytes are copied on the host into a block of the
 * pinned cache (pinned_cache.c over cudaHostAlloc), the DMA is queued on
 * the calling thread's current stream, and the call returns without
 * waiting for it; the block is reused only after the event recorded behind
 * the copy completes.  So a host-to-device copy never blocks the host on
 * the GPU, and the caller may free or overwrite its source at once. */
#include <pthread.h>
#include <string.h>

#include "gpu.h"

#include "cuda.h"
#include "pinned_cache.h"

/* Copies larger than this go in several blocks; the cache keeps at most
 * PINNED_LIMIT bytes of free blocks. */
#define CHUNK ((size_t)32 << 20)
#define PINNED_LIMIT ((size_t)256 << 20)

static int host_alloc(void *ctx, size_t bytes, void **out)
{
    (void)ctx;
    cudaError_t e = cudaHostAlloc(out, bytes, cudaHostAllocDefault);
    if (e == cudaSuccess)
        return 0;
    cudaGetLastError();
    return weft_set_error(e == cudaErrorMemoryAllocation ? WEFT_ENOMEM : WEFT_EDEVICE,
                          WFC_BACKEND ": cudaHostAlloc of %zu bytes: %s", bytes, cudaGetErrorString(e));
}

static void host_free(void *ctx, void *ptr)
{
    (void)ctx;
    cudaFreeHost(ptr);
}

static int record(void *ctx, void *stream, void **event)
{
    (void)ctx;
    cudaEvent_t ev;
    if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess)
        return weft_set_error(WEFT_EDEVICE, WFC_BACKEND ": cannot create an event for a staged copy");
    if (cudaEventRecord(ev, (cudaStream_t)stream) != cudaSuccess) {
        cudaEventDestroy(ev);
        return weft_set_error(WEFT_EDEVICE, WFC_BACKEND ": cannot record an event for a staged copy");
    }
    *event = ev;
    return 0;
}

static int query(void *ctx, void *event)
{
    (void)ctx;
    cudaError_t e = cudaEventQuery((cudaEvent_t)event);
    if (e == cudaErrorNotReady)
        return 0;
    return e == cudaSuccess ? 1 : -1;
}

static int event_wait(void *ctx, void *event)
{
    (void)ctx;
    return cudaEventSynchronize((cudaEvent_t)event) == cudaSuccess ? 0 : -1;
}

static void event_free(void *ctx, void *event)
{
    (void)ctx;
    cudaEventDestroy((cudaEvent_t)event);
}

static int stream_wait(void *ctx, void *stream)
{
    (void)ctx;
    return cudaStreamSynchronize((cudaStream_t)stream) == cudaSuccess ? 0 : -1;
}

static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;
static wfc_pinned_cache *cache;

static wfc_pinned_cache *the_cache(void)
{
    pthread_mutex_lock(&create_lock);
    if (!cache) {
        const wfc_pinned_ops ops = {NULL, host_alloc, host_free, record, query, event_wait,
                                    event_free, stream_wait};
        cache = wfc_pinned_create(&ops, PINNED_LIMIT);
    }
    wfc_pinned_cache *c = cache;
    pthread_mutex_unlock(&create_lock);
    return c;
}

static int status(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    return weft_set_error(e == cudaErrorMemoryAllocation ? WEFT_ENOMEM : WEFT_EDEVICE,
                          WFC_BACKEND ": %s: %s", what, cudaGetErrorString(e));
}

int wfc_copy_from_host_staged(void *dst, const void *src, size_t bytes, int index, void *stream)
{
    int rc = status(cudaSetDevice(index), "selecting the device");
    wfc_pinned_cache *c = rc == 0 ? the_cache() : NULL;
    for (size_t off = 0; rc == 0 && off < bytes; off += CHUNK) {
        size_t n = bytes - off < CHUNK ? bytes - off : CHUNK;
        void *block = NULL;
        if (!c || wfc_pinned_get(c, n, &block) < 0) {
            /* no pinned memory: the driver stages it, and we wait */
            rc = status(cudaMemcpyAsync((char *)dst + off, (const char *)src + off, n,
                                        cudaMemcpyHostToDevice, (cudaStream_t)stream),
                        "copy from host");
            if (rc == 0)
                rc = status(cudaStreamSynchronize((cudaStream_t)stream), "copy from host");
            continue;
        }
        memcpy(block, (const char *)src + off, n);
        rc = status(cudaMemcpyAsync((char *)dst + off, block, n, cudaMemcpyHostToDevice,
                                    (cudaStream_t)stream),
                    "copy from host");
        if (rc == 0)
            rc = wfc_pinned_put_after(c, block, stream);
        else
            wfc_pinned_put(c, block); /* nothing was queued that reads it */
    }
    return rc;
}

void wfc_pinned_shutdown(void)
{
    pthread_mutex_lock(&create_lock);
    wfc_pinned_destroy(cache);
    cache = NULL;
    pthread_mutex_unlock(&create_lock);
}
