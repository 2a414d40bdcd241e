/* backends/cuda/index.cuh — what the .cu kernel files share: the
 * accumulation type of each element type, loads and stores through it,
 * conversions through double, and the strided index calculator over a
 * collapsed geometry (plan.c).  Device code only; no weft call. */
#ifndef WEFT_BACKENDS_CUDA_INDEX_CUH
#define WEFT_BACKENDS_CUDA_INDEX_CUH

#include "gpu.h"
#include <stdint.h>

#include "plan.h"

namespace wfc {

template <typename T> struct acc { typedef T type; };
template <> struct acc<__half> { typedef float type; };
template <> struct acc<__nv_bfloat16> { typedef float type; };
template <> struct acc<int32_t> { typedef int64_t type; };
template <> struct acc<int16_t> { typedef int64_t type; };
template <> struct acc<int8_t> { typedef int64_t type; };
template <> struct acc<uint8_t> { typedef int64_t type; };
template <> struct acc<bool> { typedef int64_t type; };

template <typename T> __device__ inline double to_double(T v) { return (double)v; }
template <> __device__ inline double to_double(__half v) { return (double)__half2float(v); }
template <> __device__ inline double to_double(__nv_bfloat16 v) { return (double)__bfloat162float(v); }
template <typename T> __host__ __device__ inline T from_double(double v) { return (T)v; }
/* float16 and bfloat16 through float, as the CPU backend stores them
 * (double to its compute type float, then float to the 16-bit form): the
 * same bits on both devices, where one direct rounding differs in the last
 * place now and then (normal_ float16, seen on an H200) */
template <> __host__ __device__ inline __half from_double(double v) { return __float2half((float)v); }
template <> __host__ __device__ inline __nv_bfloat16 from_double(double v) { return __float2bfloat16((float)v); }
template <> __host__ __device__ inline bool from_double(double v) { return v != 0; }

template <typename A, typename T> __device__ inline A load(T v) { return (A)v; }
template <> __device__ inline float load<float, __half>(__half v) { return __half2float(v); }
template <> __device__ inline float load<float, __nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T, typename A> __device__ inline T store(A v) { return (T)v; }
template <> __device__ inline __half store<__half, float>(float v) { return __float2half(v); }
template <> __device__ inline __nv_bfloat16 store<__nv_bfloat16, float>(float v) { return __float2bfloat16(v); }

/* The per-operand offsets of linear index i, for the N operands of a
 * kernel (g.noperands == N).  Under index32 a division is a multiply-high
 * and a shift (plan.h's div_mul and div_shift).  N is a template argument and the dim loop
 * is unrolled to WFC_MAX_DIMS, so off[] and the running offsets live in
 * registers: with runtime bounds they went to local memory, and a
 * broadcast add over a conv output ran at 333 GB/s on an H200 (PyTorch
 * 2.5 TB/s). */
template <int N>
__device__ inline void offsets(const wfc_geometry &g, int64_t i, int64_t (&off)[N])
{
    if (g.contiguous) {
#pragma unroll
        for (int k = 0; k < N; k++)
            off[k] = i;
        return;
    }
    if (g.index32) { /* plan.h: the same walk in 32-bit arithmetic */
        uint32_t j = (uint32_t)i, o[N];
#pragma unroll
        for (int k = 0; k < N; k++)
            o[k] = 0;
#pragma unroll
        for (int t = 0; t < WFC_MAX_DIMS; t++) {
            if (t < g.ndim) {
                int d = g.ndim - 1 - t;
                uint32_t size = (uint32_t)g.sizes[d];
                uint32_t q = (__umulhi(j, g.div_mul[d]) + j) >> g.div_shift[d];
                uint32_t idx = j - q * size;
                j = q;
#pragma unroll
                for (int k = 0; k < N; k++)
                    o[k] += idx * (uint32_t)g.strides[k][d];
            }
        }
#pragma unroll
        for (int k = 0; k < N; k++)
            off[k] = o[k];
        return;
    }
#pragma unroll
    for (int k = 0; k < N; k++)
        off[k] = 0;
#pragma unroll
    for (int t = 0; t < WFC_MAX_DIMS; t++) {
        if (t < g.ndim) {
            int d = g.ndim - 1 - t;
            int64_t q = i / g.sizes[d], idx = i - q * g.sizes[d];
            i = q;
#pragma unroll
            for (int k = 0; k < N; k++)
                off[k] += idx * g.strides[k][d];
        }
    }
}

#define GRID_STRIDE(i, n)                                                                       \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                  \
         i += (int64_t)gridDim.x * blockDim.x)

/* The offset of linear index i in operand k alone. */
__device__ inline int64_t offset_of(const wfc_geometry &g, int k, int64_t i)
{
    if (g.contiguous)
        return i;
    if (g.index32) {
        uint32_t j = (uint32_t)i, o = 0;
        for (int d = g.ndim - 1; d >= 0; d--) {
            uint32_t q = (__umulhi(j, g.div_mul[d]) + j) >> g.div_shift[d];
            o += (j - q * (uint32_t)g.sizes[d]) * (uint32_t)g.strides[k][d];
            j = q;
        }
        return o;
    }
    int64_t off = 0;
    for (int d = g.ndim - 1; d >= 0; d--) {
        off += (i % g.sizes[d]) * g.strides[k][d];
        i /= g.sizes[d];
    }
    return off;
}

/* Records an index found bad at position pos: bad[0] set, bad[1] the
 * complement of the smallest such position (the largest complement), so
 * the host reports the first bad index in order, as the CPU does. */
__device__ inline void note_bad(unsigned long long *bad, int64_t pos)
{
    bad[0] = 1;
    atomicMax(&bad[1], ~(unsigned long long)pos);
}

} // namespace wfc

#endif
