/* backends/cuda/reduce.cu — reductions over any set of dims: each block
 * reduces one piece of one output row (its threads stride through the
 * piece, then a shared-memory tree in a fixed order), and a second launch
 * combines the pieces of each row when plan.c cut it.  Nothing depends on
 * timing or atomics, so a result is the same on every run.  Values and
 * their indices (max/min along a dim, argmax/argmin) use the same shape of
 * kernel with (value, index) pairs. */
#include "gpu.h"
#include <float.h>

#include "cuda.h"
#include "index.cuh"

namespace {

using namespace wfc;

constexpr unsigned THREADS = 256;
constexpr unsigned MAX_BLOCKS = 65535;

template <typename T> struct sum_type { typedef T type; };
template <> struct sum_type<bool> { typedef int64_t type; };
template <> struct sum_type<uint8_t> { typedef int64_t type; };
template <> struct sum_type<int8_t> { typedef int64_t type; };
template <> struct sum_type<int16_t> { typedef int64_t type; };
template <> struct sum_type<int32_t> { typedef int64_t type; };

template <typename A> __device__ inline A lowest();
template <> __device__ inline float lowest<float>() { return -INFINITY; }
template <> __device__ inline double lowest<double>() { return -INFINITY; }
template <> __device__ inline int64_t lowest<int64_t>() { return INT64_MIN; }
template <typename A> __device__ inline A highest();
template <> __device__ inline float highest<float>() { return INFINITY; }
template <> __device__ inline double highest<double>() { return INFINITY; }
template <> __device__ inline int64_t highest<int64_t>() { return INT64_MAX; }

template <typename A> __device__ inline A identity(int op)
{
    switch (op) {
    case WFC_RED_PROD: case WFC_RED_ALL: return A(1);
    case WFC_RED_MAX: return lowest<A>();
    case WFC_RED_MIN: return highest<A>();
    default: return A(0);
    }
}

template <typename A> __device__ inline A combine(int op, A a, A b)
{
    switch (op) {
    case WFC_RED_PROD: return a * b;
    case WFC_RED_MAX: return a != a ? a : b != b ? b : a > b ? a : b;
    case WFC_RED_MIN: return a != a ? a : b != b ? b : a < b ? a : b;
    case WFC_RED_ALL: return a != A(0) && b != A(0) ? A(1) : A(0);
    case WFC_RED_ANY: return a != A(0) || b != A(0) ? A(1) : A(0);
    default: return a + b; /* sum, mean */
    }
}

/* One pass: block b reduces piece (b % chunks) of row (b / chunks) into
 * out[b].  On the first pass elements come from x through the geometries;
 * on the second, x is the contiguous [nout, chunks] array of partials.
 * scale multiplies the final value (mean's 1/n; 1 otherwise). */
template <typename T, typename O, typename A>
__global__ void reduce_kernel(int op, bool first, bool last, O *out, const T *x, int64_t nrows,
                              int64_t nred, int64_t chunks, int64_t chunk_len, wfc_geometry outer,
                              wfc_geometry inner, double scale)
{
    extern __shared__ __align__(16) unsigned char smem[];
    A *part = (A *)smem;
    for (int64_t b = blockIdx.x; b < nrows * chunks; b += gridDim.x) {
        int64_t row = b / chunks, c = b % chunks;
        int64_t base = first ? offset_of(outer, 0, row) : row * nred;
        int64_t j0 = c * chunk_len, j1 = j0 + chunk_len < nred ? j0 + chunk_len : nred;
        A acc = identity<A>(op);
        for (int64_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
            A v = load<A, T>(x[base + (first ? offset_of(inner, 0, j) : j)]);
            if (first && (op == WFC_RED_ALL || op == WFC_RED_ANY))
                v = v != A(0) ? A(1) : A(0);
            acc = combine<A>(op, acc, v);
        }
        part[threadIdx.x] = acc;
        __syncthreads();
        for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
            if (threadIdx.x < s)
                part[threadIdx.x] = combine<A>(op, part[threadIdx.x], part[threadIdx.x + s]);
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            A r = part[0];
            if (last && op == WFC_RED_MEAN)
                r = (A)((double)r * scale);
            out[b] = store<O, A>(r);
        }
        __syncthreads();
    }
}

template <typename A> struct pair {
    A v;
    int64_t i;
};

/* The better of two (value, index) pairs: NaN first (it propagates), then
 * the larger (smaller) value, then the smaller index — torch's first
 * occurrence. */
template <typename A> __device__ inline pair<A> better(bool is_max, pair<A> a, pair<A> b)
{
    if (b.i < 0)
        return a;
    if (a.i < 0)
        return b;
    bool an = a.v != a.v, bn = b.v != b.v;
    if (an || bn)
        return an && bn ? (a.i < b.i ? a : b) : an ? a : b;
    if (a.v == b.v)
        return a.i < b.i ? a : b;
    return (is_max ? a.v > b.v : a.v < b.v) ? a : b;
}

template <typename T>
__global__ void arg_kernel(bool is_max, T *values, int64_t *indices, const T *x, int64_t nrows,
                           int64_t nred, wfc_geometry outer, wfc_geometry inner)
{
    typedef typename acc<T>::type A;
    __shared__ pair<A> part[THREADS];
    for (int64_t row = blockIdx.x; row < nrows; row += gridDim.x) {
        int64_t base = offset_of(outer, 0, row);
        pair<A> best = {A(0), -1};
        for (int64_t j = threadIdx.x; j < nred; j += blockDim.x) {
            pair<A> p = {load<A, T>(x[base + offset_of(inner, 0, j)]), j};
            best = better<A>(is_max, best, p);
        }
        part[threadIdx.x] = best;
        __syncthreads();
        for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
            if (threadIdx.x < s)
                part[threadIdx.x] = better<A>(is_max, part[threadIdx.x], part[threadIdx.x + s]);
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            if (values)
                values[row] = x[base + offset_of(inner, 0, part[0].i)];
            indices[row] = part[0].i;
        }
        __syncthreads();
    }
}

int launched(const char *what)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        return 0;
    return weft_set_error(WEFT_EDEVICE, WFC_BACKEND ": launching %s: %s", what, cudaGetErrorString(e));
}

unsigned grid(int64_t blocks)
{
    return blocks < 1 ? 1 : blocks > MAX_BLOCKS ? MAX_BLOCKS : (unsigned)blocks;
}

template <typename T, typename O>
void run_reduce(cudaStream_t st, int op, void *out, const void *x, int64_t nrows, int64_t nred,
                const wfc_geometry &outer, const wfc_geometry &inner, double scale, void *partials)
{
    typedef typename acc<T>::type A;
    int64_t chunks, chunk_len;
    wfc_plan_reduce_split(nrows, nred, &chunks, &chunk_len);
    size_t shared = THREADS * sizeof(A);
    if (chunks == 1) {
        reduce_kernel<T, O, A><<<grid(nrows), THREADS, shared, st>>>(
            op, true, true, (O *)out, (const T *)x, nrows, nred, 1, nred, outer, inner, scale);
        return;
    }
    reduce_kernel<T, A, A><<<grid(nrows * chunks), THREADS, shared, st>>>(
        op, true, false, (A *)partials, (const T *)x, nrows, nred, chunks, chunk_len, outer, inner,
        scale);
    /* the pieces of a row: their op is the same (all/any already 0/1) */
    reduce_kernel<A, O, A><<<grid(nrows), THREADS, shared, st>>>(
        op, false, true, (O *)out, (const A *)partials, nrows, chunks, 1, chunks, outer, inner,
        scale);
}

typedef void (*reduce_launch)(cudaStream_t, int, void *, const void *, int64_t, int64_t,
                              const wfc_geometry &, const wfc_geometry &, double, void *);

/* By the operator's result type: sums of integers are int64, all/any
 * bool, the others the input's type. */
template <typename T>
void launch_reduce(cudaStream_t st, int op, void *out, const void *x, int64_t nrows, int64_t nred,
                   const wfc_geometry &outer, const wfc_geometry &inner, double scale,
                   void *partials)
{
    if (op == WFC_RED_ALL || op == WFC_RED_ANY)
        run_reduce<T, bool>(st, op, out, x, nrows, nred, outer, inner, scale, partials);
    else if (op == WFC_RED_SUM || op == WFC_RED_PROD || op == WFC_RED_MEAN)
        run_reduce<T, typename sum_type<T>::type>(st, op, out, x, nrows, nred, outer, inner, scale,
                                                  partials);
    else
        run_reduce<T, T>(st, op, out, x, nrows, nred, outer, inner, scale, partials);
}

typedef void (*arg_launch)(cudaStream_t, bool, void *, int64_t *, const void *, int64_t, int64_t,
                           const wfc_geometry &, const wfc_geometry &);
template <typename T>
void launch_arg(cudaStream_t st, bool is_max, void *values, int64_t *indices, const void *x,
                int64_t nrows, int64_t nred, const wfc_geometry &outer, const wfc_geometry &inner)
{
    arg_kernel<T><<<grid(nrows), THREADS, 0, st>>>(is_max, (T *)values, indices, (const T *)x,
                                                   nrows, nred, outer, inner);
}

#define NUMBERS(fn) \
    fn<bool>, fn<uint8_t>, fn<int8_t>, fn<int16_t>, fn<int32_t>, fn<int64_t>, fn<__half>, \
        fn<__nv_bfloat16>, fn<float>, fn<double>, nullptr, nullptr
const reduce_launch reduce_table[WEFT_NUM_DTYPES] = {NUMBERS(launch_reduce)};
const arg_launch arg_table[WEFT_NUM_DTYPES] = {
    nullptr, launch_arg<uint8_t>, launch_arg<int8_t>, launch_arg<int16_t>, launch_arg<int32_t>,
    launch_arg<int64_t>, launch_arg<__half>, launch_arg<__nv_bfloat16>, launch_arg<float>,
    launch_arg<double>, nullptr, nullptr};

} // namespace

extern "C" bool wfc_reduce_supported(int dtype, bool arg)
{
    if (dtype < 0 || dtype >= WEFT_NUM_DTYPES)
        return false;
    return arg ? arg_table[dtype] != nullptr : reduce_table[dtype] != nullptr;
}

extern "C" int wfc_reduce(void *stream, int op, int dtype, void *out, const void *x, int64_t nrows,
                          int64_t nred, const wfc_geometry *outer, const wfc_geometry *inner,
                          double scale, void *partials)
{
    if (!wfc_reduce_supported(dtype, false))
        return weft_set_error(WEFT_EDTYPE, WFC_BACKEND ": no reduction kernel for dtype %s",
                              weft_dtype_name((weft_dtype)dtype));
    if (nrows == 0)
        return 0;
    reduce_table[dtype]((cudaStream_t)stream, op, out, x, nrows, nred, *outer, *inner, scale,
                        partials);
    return launched("a reduction");
}

extern "C" int wfc_arg_reduce(void *stream, bool is_max, int dtype, void *values, int64_t *indices,
                              const void *x, int64_t nrows, int64_t nred,
                              const wfc_geometry *outer, const wfc_geometry *inner)
{
    if (!wfc_reduce_supported(dtype, true))
        return weft_set_error(WEFT_EDTYPE, WFC_BACKEND ": no max/min kernel for dtype %s",
                              weft_dtype_name((weft_dtype)dtype));
    if (nrows == 0)
        return 0;
    arg_table[dtype]((cudaStream_t)stream, is_max, values, indices, x, nrows, nred, *outer, *inner);
    return launched("an arg reduction");
}
