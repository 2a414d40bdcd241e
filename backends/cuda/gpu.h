/* backends/cuda/gpu.h — the portability header: the one place where the
 * CUDA plugin's sources meet a vendor runtime.  The sources are written in
 * CUDA's names (runtime calls, streams, events, memory, half and bfloat16,
 * <<<...>>> launches); built with WEFT_GPU_HIP (libweft-hip.so, see
 * backends/hip/README.md) the same names mean AMD HIP's, so the HIP plugin
 * is these files compiled a second time and no kernel exists twice.
 *
 * C files get the host runtime API only; .cu files (nvcc, or hipcc with
 * -x hip) also get the kernel language and the 16-bit float types.  What
 * the identity of the backend decides (its device type, its name in
 * messages, whether a device radix sort exists) is here too, so no other
 * file asks which vendor it is built for.  Must not depend on weft's core
 * beyond <weft/weft.h>'s device type ids. */
#ifndef WEFT_BACKENDS_CUDA_GPU_H
#define WEFT_BACKENDS_CUDA_GPU_H

#include <weft/weft.h>

#ifdef WEFT_GPU_HIP

/* HIP's headers support AMD and NVIDIA targets and insist on being told;
 * this plugin is the AMD one (the CUDA build covers NVIDIA). */
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif

#if defined(__HIPCC__)
#include <hip/hip_bfloat16.h>
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#else
#include <hip/hip_runtime_api.h>
#endif

#define WFC_DEVICE_TYPE WEFT_DEVICE_TYPE_HIP
#define WFC_BACKEND "hip"
#define WFC_DLPACK_DEVICE 10 /* kDLROCM */
/* The runtime library the plugin keeps mapped once loaded (plugin.c):
 * HIP's keeps state from its constructors in its own globals, which an
 * unload of the plugin would unmap along with it (valgrind counts them
 * lost), and it is not written to be loaded twice in one process. */
#define WFC_RUNTIME_SONAME_(major) "libamdhip64.so." #major
#define WFC_RUNTIME_SONAME_MAJOR_(major) WFC_RUNTIME_SONAME_(major)
#define WFC_RUNTIME_KEEP_LOADED WFC_RUNTIME_SONAME_MAJOR_(HIP_VERSION_MAJOR)

/* Errors. */
#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaErrorMemoryAllocation hipErrorOutOfMemory
#define cudaErrorNotReady hipErrorNotReady
#define cudaGetErrorString hipGetErrorString
#define cudaGetLastError hipGetLastError

/* Devices. */
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaSetDevice hipSetDevice
#define cudaDeviceSynchronize hipDeviceSynchronize

/* Streams. */
#define cudaStream_t hipStream_t
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaStreamQuery hipStreamQuery
#define cudaStreamWaitEvent hipStreamWaitEvent

/* Events. */
#define cudaEvent_t hipEvent_t
#define cudaEventCreate hipEventCreate
#define cudaEventCreateWithFlags hipEventCreateWithFlags
#define cudaEventDisableTiming hipEventDisableTiming
#define cudaEventDestroy hipEventDestroy
#define cudaEventRecord hipEventRecord
#define cudaEventQuery hipEventQuery
#define cudaEventSynchronize hipEventSynchronize
#define cudaEventElapsedTime hipEventElapsedTime

/* Memory: device blocks (under the core's caching allocator), pinned host
 * blocks (pinned.c's staging) and copies.  hipHostAlloc is deprecated in
 * favour of hipHostMalloc, which takes the same arguments. */
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaHostAlloc hipHostMalloc
#define cudaHostAllocDefault hipHostMallocDefault
#define cudaFreeHost hipHostFree
#define cudaMemcpyKind hipMemcpyKind
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemcpyPeer hipMemcpyPeer

/* Library handles.  Debian's ROCm (5.2) has neither hipBLAS/rocBLAS nor
 * MIOpen nor hipCUB, and no mapping is written here for an API that could
 * not be compiled against: without a BLAS library blas.c runs the
 * plugin's own tiled GEMM (gemm.cu); the HIP build leaves out conv.c and
 * norm_cudnn.c (convolutions take the core's CPU fallback, batch_norm its
 * composed path) and registers no operator that needs the device radix
 * sort below (WFC_HAVE_DEVICE_SORT). */
#define WFC_HAVE_DEVICE_SORT 0
#define WFC_HAVE_BLAS_LIBRARY 0

#if defined(__HIPCC__)
/* The kernel language: __global__, __shared__, blockIdx, atomicMax and
 * <<<grid, block, shared, stream>>> are HIP's own spellings, so only the
 * 16-bit float types need names.  HIP 5.2's bfloat16 is hip_bfloat16, a
 * struct converting through float with round-to-nearest-even. */
typedef hip_bfloat16 __nv_bfloat16;

static __host__ __device__ inline float __bfloat162float(hip_bfloat16 v)
{
    return static_cast<float>(v);
}
static __host__ __device__ inline hip_bfloat16 __float2bfloat16(float v)
{
    return hip_bfloat16(v);
}
/* double to bfloat16 in one rounding, as CUDA's __double2bfloat16 does:
 * rounding to float first could round twice (a double just above a tie
 * between two bfloat16 values can become the tie).  Rounding to odd into
 * float keeps the lost bits' trace in the last place, and float has 16
 * bits more than bfloat16, so the second rounding is then exact. */
static __host__ __device__ inline hip_bfloat16 __double2bfloat16(double v)
{
    float f = (float)v;
    if ((double)f != v && f == f) {
        union {
            float f;
            uint32_t u;
        } bits = {f};
        /* truncate toward zero, then mark the sticky bit */
        if (fabs((double)f) > fabs(v))
            bits.u -= 1;
        bits.u |= 1;
        f = bits.f;
    }
    return hip_bfloat16(f);
}
/* HIP's __half converts from double in one rounding by itself. */
static __host__ __device__ inline __half __double2half(double v)
{
    return __half(v);
}
#endif

#else /* CUDA */

#include <cuda_runtime.h>
#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

#define WFC_DEVICE_TYPE WEFT_DEVICE_TYPE_CUDA
#define WFC_BACKEND "cuda"
#define WFC_DLPACK_DEVICE 2 /* kDLCUDA */
/* CUB's stable radix sort and prefix sum come with the toolkit. */
#define WFC_HAVE_DEVICE_SORT 1
/* cuBLAS, opened at first use (libs.c). */
#define WFC_HAVE_BLAS_LIBRARY 1

#endif

#endif
