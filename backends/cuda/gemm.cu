/* backends/cuda/gemm.cu — the plugin's own matrix product, for a build
 * without a BLAS library (the HIP build on Debian, which has no hipBLAS;
 * gpu.h) and, on CUDA, when WEFT_CUDA_GEMM=tiled asks for it (so that an
 * NVIDIA GPU can check the kernel the HIP build depends on).  A plain
 * shared-memory tiled product: 16x16 tiles of each operand per step, any
 * strides (a transposed view goes in as it is), float32 accumulation for
 * the 16-bit types as cuBLAS's, float64 for float64.  Each output element
 * sums its k products in order, so results are the same every run.  The
 * integer products (cuBLAS has none) run here in every build: int64
 * arithmetic that wraps through uint64, as the CPU's does.  Slower
 * than a vendor library by far; it exists so products stay on the device. */
#include "gpu.h"

#include <type_traits>

#include "cuda.h"
#include "index.cuh"

namespace {

using namespace wfc;

constexpr int TILE = 16;
/* CUDA's (and HIP's portable) limit on a grid's y and z extents */
constexpr int64_t MAX_GRID_YZ = 65535;

/* x + y z; integers wrap (signed overflow would be undefined) */
template <typename A> __device__ inline A multiply_add(A x, A y, A z)
{
    if constexpr (std::is_integral<A>::value)
        return (A)((uint64_t)x + (uint64_t)y * (uint64_t)z);
    else
        return x + y * z;
}

/* alpha and beta in A: integers through int64 (the caller checked that
 * they are whole) */
template <typename A> __device__ inline A scalar_of(double v)
{
    if constexpr (std::is_integral<A>::value)
        return (A)(int64_t)v;
    else
        return (A)v;
}

template <typename T>
__global__ void gemm_kernel(T *c, const T *a, const T *b, int64_t n, int64_t k, int64_t m,
                            wfc_gemm_strides s, double alpha, double beta)
{
    typedef typename acc<T>::type A;
    /* the +1 column keeps a tile's column reads off one shared-memory bank */
    __shared__ A tile_a[TILE][TILE + 1], tile_b[TILE][TILE + 1];
    a += blockIdx.z * s.batch_a;
    b += blockIdx.z * s.batch_b;
    c += blockIdx.z * n * m;
    const int64_t row = blockIdx.y * (int64_t)TILE + threadIdx.y;
    const int64_t col = blockIdx.x * (int64_t)TILE + threadIdx.x;
    A sum = 0;
    for (int64_t k0 = 0; k0 < k; k0 += TILE) {
        const int64_t ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
        tile_a[threadIdx.y][threadIdx.x] =
            row < n && ka < k ? load<A>(a[row * s.row_a + ka * s.col_a]) : A(0);
        tile_b[threadIdx.y][threadIdx.x] =
            kb < k && col < m ? load<A>(b[kb * s.row_b + col * s.col_b]) : A(0);
        __syncthreads();
        for (int j = 0; j < TILE; j++)
            sum = multiply_add<A>(sum, tile_a[threadIdx.y][j], tile_b[j][threadIdx.x]);
        __syncthreads();
    }
    if (row < n && col < m) {
        A r = multiply_add<A>(A(0), scalar_of<A>(alpha), sum);
        /* beta 0: c is not read (it may hold anything, NaN included) */
        if (beta != 0)
            r = multiply_add<A>(r, scalar_of<A>(beta), load<A>(c[row * m + col]));
        c[row * m + col] = store<T>(r);
    }
}

template <typename T>
void launch(cudaStream_t st, void *c, const void *a, const void *b, int64_t batch, int64_t n,
            int64_t k, int64_t m, const wfc_gemm_strides &s, double alpha, double beta)
{
    dim3 grid((unsigned)((m + TILE - 1) / TILE), (unsigned)((n + TILE - 1) / TILE),
              (unsigned)batch);
    gemm_kernel<T><<<grid, dim3(TILE, TILE), 0, st>>>((T *)c, (const T *)a, (const T *)b, n, k,
                                                      m, s, alpha, beta);
}

typedef void (*gemm_launch)(cudaStream_t, void *, const void *, const void *, int64_t, int64_t,
                            int64_t, int64_t, const wfc_gemm_strides &, double, double);

gemm_launch launcher(int dtype)
{
    switch (dtype) {
    case WEFT_FLOAT16: return launch<__half>;
    case WEFT_BFLOAT16: return launch<__nv_bfloat16>;
    case WEFT_FLOAT32: return launch<float>;
    case WEFT_FLOAT64: return launch<double>;
    case WEFT_UINT8: return launch<uint8_t>;
    case WEFT_INT8: return launch<int8_t>;
    case WEFT_INT16: return launch<int16_t>;
    case WEFT_INT32: return launch<int32_t>;
    case WEFT_INT64: return launch<int64_t>;
    default: return nullptr;
    }
}

} // namespace

extern "C" int wfc_gemm_tiled(void *stream, int dtype, void *c, const void *a, const void *b,
                              int64_t batch, int64_t n, int64_t k, int64_t m,
                              const wfc_gemm_strides *s, double alpha, double beta)
{
    gemm_launch fn = launcher(dtype);
    if (!fn)
        return weft_set_error(WEFT_EDTYPE, WFC_BACKEND ": the tiled GEMM has no kernel for "
                              "dtype %s", weft_dtype_name((weft_dtype)dtype));
    if ((n + TILE - 1) / TILE > MAX_GRID_YZ || batch > MAX_GRID_YZ || m / TILE >= UINT32_MAX)
        return weft_set_error(WEFT_ENOTSUP, WFC_BACKEND ": the tiled GEMM takes at most %lld "
                              "rows and %lld batches, got %lld and %lld",
                              (long long)(MAX_GRID_YZ * TILE), (long long)MAX_GRID_YZ,
                              (long long)n, (long long)batch);
    if (batch == 0 || n == 0 || m == 0)
        return 0;
    fn((cudaStream_t)stream, c, a, b, batch, n, k, m, *s, alpha, beta);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : weft_set_error(WEFT_EDEVICE, WFC_BACKEND ": launching the "
                                                 "tiled GEMM: %s", cudaGetErrorString(e));
}
