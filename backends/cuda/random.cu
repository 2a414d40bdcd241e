/* backends/cuda/random.cu — uniform_, normal_, bernoulli_ (scalar or
 * tensor p) and dropout on the GPU, drawn from the same counter-based Philox 4x32-10
 * stream as the CPU backend: element i (row-major) uses block offset + i/4,
 * word i%4, with the CPU's formulas, so a seed gives the same numbers on
 * both devices (normal_ to the last bit of float32 where the device's
 * double log/sin/cos agree with the host's, which they do to an ulp). */
#include "gpu.h"

#include "cuda.h"
#include "index.cuh"

namespace {

using namespace wfc;

/* weft_philox (c10/generator.c), the same rounds and constants. */
__device__ inline void philox(uint64_t seed, uint64_t counter, uint32_t out[4])
{
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int round = 0; round < 10; round++) {
        uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c1 = lo1;
        c3 = lo0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* Each thread takes whole blocks of four elements, so one Philox block
 * serves four values, as on the CPU. */
#define FOR_BLOCKS(q, n)                                                                        \
    for (int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; q < ((n) + 3) / 4;        \
         q += (int64_t)gridDim.x * blockDim.x)

template <typename T>
__global__ void uniform_kernel(T *out, int64_t n, uint64_t seed, uint64_t offset, double a,
                               double b, int bits)
{
    double scale = ldexp(1.0, -bits);
    FOR_BLOCKS(q, n) {
        uint32_t w[4];
        philox(seed, offset + (uint64_t)q, w);
        for (int k = 0; k < 4 && q * 4 + k < n; k++) {
            double u = (double)(w[k] >> (32 - bits)) * scale;
            out[q * 4 + k] = from_double<T>(a + (b - a) * u);
        }
    }
}

template <typename T>
__global__ void normal_kernel(T *out, int64_t n, uint64_t seed, uint64_t offset, double mean,
                              double std)
{
    FOR_BLOCKS(q, n) {
        uint32_t w[4];
        philox(seed, offset + (uint64_t)q, w);
        for (int k = 0; k < 4 && q * 4 + k < n; k++) {
            int pair = k & 2;
            double u1 = ((double)w[pair] + 1.0) * 0x1p-32, u2 = (double)w[pair + 1] * 0x1p-32;
            double r = sqrt(-2.0 * log(u1)), theta = 6.283185307179586 * u2;
            out[q * 4 + k] = from_double<T>(mean + std * r * ((k & 1) ? sin(theta) : cos(theta)));
        }
    }
}

template <typename T>
__global__ void bernoulli_kernel(T *out, int64_t n, uint64_t seed, uint64_t offset, double p)
{
    FOR_BLOCKS(q, n) {
        uint32_t w[4];
        philox(seed, offset + (uint64_t)q, w);
        for (int k = 0; k < 4 && q * 4 + k < n; k++)
            out[q * 4 + k] = from_double<T>((double)w[k] * 0x1p-32 < p ? 1.0 : 0.0);
    }
}

/* bernoulli with a tensor p: the CPU's test, p[i] per element */
template <typename T>
__global__ void bernoulli_tensor_kernel(T *out, const double *p, int64_t n, uint64_t seed,
                                        uint64_t offset)
{
    FOR_BLOCKS(q, n) {
        uint32_t w[4];
        philox(seed, offset + (uint64_t)q, w);
        for (int k = 0; k < 4 && q * 4 + k < n; k++)
            out[q * 4 + k] = from_double<T>((double)w[k] * 0x1p-32 < p[q * 4 + k] ? 1.0 : 0.0);
    }
}

__global__ void check_probabilities_kernel(const double *p, int64_t n, unsigned long long *bad)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        if (!(p[i] >= 0 && p[i] <= 1))
            note_bad(bad, i);
}

template <typename T>
__global__ void dropout_kernel(T *out, const T *x, int64_t n, uint64_t seed, uint64_t offset,
                               double keep, double scale)
{
    typedef typename acc<T>::type A;
    FOR_BLOCKS(q, n) {
        uint32_t w[4];
        philox(seed, offset + (uint64_t)q, w);
        for (int k = 0; k < 4 && q * 4 + k < n; k++) {
            int64_t i = q * 4 + k;
            double u = (double)(w[k] >> 8) * 0x1p-24;
            out[i] = store<T, A>(u < keep ? load<A, T>(x[i]) * (A)scale : A(0));
        }
    }
}

unsigned blocks_for(int64_t n)
{
    return wfc_plan_blocks((n + 3) / 4, 256, 8192);
}

template <typename T> struct launch {
    static void uniform(cudaStream_t st, void *out, int64_t n, uint64_t seed, uint64_t off,
                        double a, double b, int bits)
    {
        uniform_kernel<T><<<blocks_for(n), 256, 0, st>>>((T *)out, n, seed, off, a, b, bits);
    }
    static void normal(cudaStream_t st, void *out, int64_t n, uint64_t seed, uint64_t off,
                       double a, double b, int)
    {
        normal_kernel<T><<<blocks_for(n), 256, 0, st>>>((T *)out, n, seed, off, a, b);
    }
    static void bernoulli(cudaStream_t st, void *out, int64_t n, uint64_t seed, uint64_t off,
                          double p, double, int)
    {
        bernoulli_kernel<T><<<blocks_for(n), 256, 0, st>>>((T *)out, n, seed, off, p);
    }
    static void bernoulli_tensor(cudaStream_t st, void *out, const double *p, int64_t n,
                                 uint64_t seed, uint64_t off)
    {
        bernoulli_tensor_kernel<T><<<blocks_for(n), 256, 0, st>>>((T *)out, p, n, seed, off);
    }
    static void dropout(cudaStream_t st, void *out, const void *x, int64_t n, uint64_t seed,
                        uint64_t off, double keep, double scale)
    {
        dropout_kernel<T><<<blocks_for(n), 256, 0, st>>>((T *)out, (const T *)x, n, seed, off,
                                                         keep, scale);
    }
};

typedef void (*fill_launch)(cudaStream_t, void *, int64_t, uint64_t, uint64_t, double, double, int);
typedef void (*dropout_launch)(cudaStream_t, void *, const void *, int64_t, uint64_t, uint64_t,
                               double, double);

#define FLOATS(fn) \
    nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, launch<__half>::fn, \
        launch<__nv_bfloat16>::fn, launch<float>::fn, launch<double>::fn, nullptr, nullptr
#define ALL(fn) \
    launch<bool>::fn, launch<uint8_t>::fn, launch<int8_t>::fn, launch<int16_t>::fn, \
        launch<int32_t>::fn, launch<int64_t>::fn, launch<__half>::fn, \
        launch<__nv_bfloat16>::fn, launch<float>::fn, launch<double>::fn, nullptr, nullptr

const fill_launch uniform_table[WEFT_NUM_DTYPES] = {FLOATS(uniform)};
const fill_launch normal_table[WEFT_NUM_DTYPES] = {FLOATS(normal)};
const fill_launch bernoulli_table[WEFT_NUM_DTYPES] = {ALL(bernoulli)};
const dropout_launch dropout_table[WEFT_NUM_DTYPES] = {FLOATS(dropout)};
typedef void (*bernoulli_tensor_launch)(cudaStream_t, void *, const double *, int64_t, uint64_t,
                                        uint64_t);
const bernoulli_tensor_launch bernoulli_tensor_table[WEFT_NUM_DTYPES] = {ALL(bernoulli_tensor)};

const fill_launch *table_of(int kind)
{
    return kind == WFC_RANDOM_UNIFORM ? uniform_table
           : kind == WFC_RANDOM_NORMAL ? normal_table
                                       : bernoulli_table;
}

} // namespace

extern "C" bool wfc_random_supported(int kind, int dtype)
{
    if (dtype < 0 || dtype >= WEFT_NUM_DTYPES)
        return false;
    return kind == WFC_RANDOM_DROPOUT ? dropout_table[dtype] != nullptr
                                      : table_of(kind)[dtype] != nullptr;
}

extern "C" int wfc_random_fill(void *stream, int kind, int dtype, void *out, int64_t n,
                               uint64_t seed, uint64_t offset, double a, double b, int bits)
{
    if (!wfc_random_supported(kind, dtype) || kind == WFC_RANDOM_DROPOUT)
        return weft_set_error(WEFT_EDTYPE, WFC_BACKEND ": no random kernel for dtype %s",
                              weft_dtype_name((weft_dtype)dtype));
    if (n == 0)
        return 0;
    table_of(kind)[dtype]((cudaStream_t)stream, out, n, seed, offset, a, b, bits);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : weft_set_error(WEFT_EDEVICE, WFC_BACKEND ": launching a random kernel: %s",
                                                 cudaGetErrorString(e));
}

extern "C" int wfc_dropout(void *stream, int dtype, void *out, const void *x, int64_t n,
                           uint64_t seed, uint64_t offset, double keep, double scale)
{
    if (!wfc_random_supported(WFC_RANDOM_DROPOUT, dtype))
        return weft_set_error(WEFT_EDTYPE, WFC_BACKEND ": no dropout kernel for dtype %s",
                              weft_dtype_name((weft_dtype)dtype));
    if (n == 0)
        return 0;
    dropout_table[dtype]((cudaStream_t)stream, out, x, n, seed, offset, keep, scale);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : weft_set_error(WEFT_EDEVICE, WFC_BACKEND ": launching dropout: %s",
                                                 cudaGetErrorString(e));
}

extern "C" int wfc_bernoulli_tensor(void *stream, int dtype, void *out, const double *p, int64_t n,
                                    uint64_t seed, uint64_t offset)
{
    if (dtype < 0 || dtype >= WEFT_NUM_DTYPES || !bernoulli_tensor_table[dtype])
        return weft_set_error(WEFT_EDTYPE, WFC_BACKEND ": no bernoulli kernel for dtype %s",
                              weft_dtype_name((weft_dtype)dtype));
    if (n == 0)
        return 0;
    bernoulli_tensor_table[dtype]((cudaStream_t)stream, out, p, n, seed, offset);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : weft_set_error(WEFT_EDEVICE, WFC_BACKEND ": launching bernoulli: %s",
                                                 cudaGetErrorString(e));
}

extern "C" int wfc_check_probabilities(void *stream, const double *p, int64_t n,
                                       unsigned long long *bad)
{
    if (n == 0)
        return 0;
    check_probabilities_kernel<<<wfc_plan_blocks(n, 256, 8192), 256, 0, (cudaStream_t)stream>>>(
        p, n, bad);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : weft_set_error(WEFT_EDEVICE, WFC_BACKEND ": launching bernoulli's "
                                                 "check of p: %s", cudaGetErrorString(e));
}
