/* backends/cuda/elementwise.cu — elementwise kernels: one grid-stride
 * kernel per operator family, templated on the element type and
 * instantiated for float32 and float64 through a switch at the launcher (the
 * CUDA counterpart of the CPU plugin's dtype tables).  Operands are strided:
 * each thread turns its linear output index into per-operand offsets. */
#include <cuda_runtime.h>

#include "cuda.h"

namespace {

struct geometry {
    int ndim;
    int64_t sizes[WFC_MAX_DIMS];
    int64_t strides[3][WFC_MAX_DIMS];
};

__device__ inline void offsets(const geometry &g, int64_t i, int64_t *off, int k)
{
    for (int j = 0; j < k; j++)
        off[j] = 0;
    for (int d = g.ndim - 1; d >= 0; d--) {
        int64_t idx = i % g.sizes[d];
        i /= g.sizes[d];
        for (int j = 0; j < k; j++)
            off[j] += idx * g.strides[j][d];
    }
}

template <typename T> __device__ inline T apply_binary(int op, T a, T b, T alpha)
{
    switch (op) {
    case WFC_ADD: return a + alpha * b;
    case WFC_SUB: return a - alpha * b;
    case WFC_MUL: return a * b;
    default: return a / b;
    }
}

template <typename T> __device__ inline T apply_unary(int op, T a)
{
    switch (op) {
    case WFC_NEG: return -a;
    case WFC_EXP: return exp(a);
    case WFC_RELU: return a > T(0) ? a : (a != a ? a : T(0));
    case WFC_SIGMOID: return T(1) / (T(1) + exp(-a));
    default: return tanh(a);
    }
}

template <typename T>
__global__ void binary_kernel(int op, T *out, const T *a, const T *b, T alpha, int64_t n,
                              geometry g)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[3];
        offsets(g, i, off, 3);
        out[off[0]] = apply_binary(op, a[off[1]], b[off[2]], alpha);
    }
}

template <typename T>
__global__ void unary_kernel(int op, T *out, const T *a, int64_t n, geometry g)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[2];
        offsets(g, i, off, 2);
        out[off[0]] = apply_unary(op, a[off[1]]);
    }
}

template <typename T>
__global__ void fill_kernel(T *out, T value, int64_t n, geometry g)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[1];
        offsets(g, i, off, 1);
        out[off[0]] = value;
    }
}

geometry to_device(const wfc_geometry *g)
{
    geometry d;
    d.ndim = g->ndim;
    for (int i = 0; i < WFC_MAX_DIMS; i++) {
        d.sizes[i] = g->sizes[i];
        for (int j = 0; j < 3; j++)
            d.strides[j][i] = g->strides[j][i];
    }
    return d;
}

unsigned blocks_for(int64_t n)
{
    int64_t b = (n + 255) / 256;
    return (unsigned)(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

int launched(const char *what)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        return 0;
    return weft_set_error(WEFT_EDEVICE, "cuda: launching %s: %s", what, cudaGetErrorString(e));
}

} // namespace

extern "C" int wfc_binary(void *stream, int op, int dtype, void *out, const void *a,
                          const void *b, double alpha, int64_t n, const wfc_geometry *g)
{
    if (n == 0)
        return 0;
    geometry d = to_device(g);
    if (dtype == WEFT_FLOAT32)
        binary_kernel<float><<<blocks_for(n), 256, 0, (cudaStream_t)stream>>>(op, (float *)out, (const float *)a,
                                                     (const float *)b, (float)alpha, n, d);
    else
        binary_kernel<double><<<blocks_for(n), 256, 0, (cudaStream_t)stream>>>(op, (double *)out, (const double *)a,
                                                      (const double *)b, alpha, n, d);
    return launched("a binary kernel");
}

extern "C" int wfc_unary(void *stream, int op, int dtype, void *out, const void *a, int64_t n,
                         const wfc_geometry *g)
{
    if (n == 0)
        return 0;
    geometry d = to_device(g);
    if (dtype == WEFT_FLOAT32)
        unary_kernel<float><<<blocks_for(n), 256, 0, (cudaStream_t)stream>>>(op, (float *)out, (const float *)a, n, d);
    else
        unary_kernel<double><<<blocks_for(n), 256, 0, (cudaStream_t)stream>>>(op, (double *)out, (const double *)a, n, d);
    return launched("a unary kernel");
}

extern "C" int wfc_fill(void *stream, int dtype, void *out, double value, int64_t n,
                        const wfc_geometry *g)
{
    if (n == 0)
        return 0;
    geometry d = to_device(g);
    if (dtype == WEFT_FLOAT32)
        fill_kernel<float><<<blocks_for(n), 256, 0, (cudaStream_t)stream>>>((float *)out, (float)value, n, d);
    else
        fill_kernel<double><<<blocks_for(n), 256, 0, (cudaStream_t)stream>>>((double *)out, value, n, d);
    return launched("fill_");
}
