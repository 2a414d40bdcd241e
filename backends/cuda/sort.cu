/* backends/cuda/sort.cu — sort, argsort and topk by CUB's stable radix
 * sort (part of the toolkit), and the stable pair sort that scatter.cu
 * groups its targets with.  A row's values become 64-bit keys in the CPU
 * backend's order (plan.h: NaN above every number, -0.0 equal to 0.0,
 * descending as the complement); all rows are sorted at once by key, then
 * stably by row, which leaves each row sorted with equal values in their
 * first order: the CPU's stable merge sort, whatever the row length.  The
 * values come back as the elements themselves (moved as words), so every
 * dtype's values are exact. */
#include <climits>

#include "gpu.h"
#if WFC_HAVE_DEVICE_SORT
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/version.cuh>
#endif

#include "cuda.h"
#include "index.cuh"

namespace {

using namespace wfc;

template <typename T> __device__ inline uint64_t key_of(T v, bool descending)
{
    return wfc_sort_key_int64((int64_t)v, descending);
}
template <> __device__ inline uint64_t key_of(__half v, bool descending)
{
    return wfc_sort_key_double(to_double(v), descending);
}
template <> __device__ inline uint64_t key_of(__nv_bfloat16 v, bool descending)
{
    return wfc_sort_key_double(to_double(v), descending);
}
template <> __device__ inline uint64_t key_of(float v, bool descending)
{
    return wfc_sort_key_double((double)v, descending);
}
template <> __device__ inline uint64_t key_of(double v, bool descending)
{
    return wfc_sort_key_double(v, descending);
}

template <typename T>
__global__ void keys_kernel(uint64_t *keys, int64_t *pos, const T *x, int64_t n, bool descending)
{
    GRID_STRIDE(i, n) {
        keys[i] = key_of(x[i], descending);
        pos[i] = i;
    }
}

__global__ void row_keys_kernel(uint64_t *keys, const int64_t *pos, int64_t n, int64_t len)
{
    GRID_STRIDE(i, n) {
        keys[i] = (uint64_t)(pos[i] / len);
    }
}

/* The first k of each row: indices within the row, and the elements. */
template <typename W>
__global__ void take_sorted_kernel(W *values, int64_t *indices, const W *x, const int64_t *pos,
                                   int64_t nrows, int64_t len, int64_t k)
{
    GRID_STRIDE(i, nrows * k) {
        int64_t r = i / k, j = i % k, p = pos[r * len + j];
        indices[i] = p - r * len;
        if (values)
            values[i] = x[p];
    }
}

/* unique: 1 where a sorted key starts a run of equal values; every NaN
 * (floating keys of all ones, plan.h) starts its own, as NaN equals
 * nothing on the CPU. */
__global__ void unique_marks_kernel(int64_t *marks, const uint64_t *keys, int64_t n,
                                    bool floating)
{
    GRID_STRIDE(i, n) {
        uint64_t k = keys[i];
        marks[i] = i == 0 || k != keys[i - 1] || (floating && k == ~(uint64_t)0);
    }
}

/* ids: the inclusive sum of the marks (group g + 1 at each sorted
 * position); the first element of each group is its value, and every
 * element's inverse is its group. */
template <typename W>
__global__ void unique_gather_kernel(W *values, int64_t *inverse, int64_t *starts, const W *x,
                                     const int64_t *pos, const int64_t *ids, int64_t n)
{
    GRID_STRIDE(i, n) {
        int64_t g = ids[i] - 1;
        if (i == 0 || ids[i - 1] != ids[i]) {
            starts[g] = i;
            values[g] = x[pos[i]];
        }
        if (inverse)
            inverse[pos[i]] = g;
    }
}

__global__ void unique_counts_kernel(int64_t *counts, const int64_t *starts, int64_t groups,
                                     int64_t n)
{
    GRID_STRIDE(g, groups) {
        counts[g] = (g + 1 < groups ? starts[g + 1] : n) - starts[g];
    }
}

unsigned blocks(int64_t n)
{
    return wfc_plan_blocks(n, 256, 8192);
}

int launched(const char *what)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : weft_set_error(WEFT_EDEVICE, WFC_BACKEND ": launching %s: %s", what,
                                                 cudaGetErrorString(e));
}

typedef void (*keys_launch)(cudaStream_t, uint64_t *, int64_t *, const void *, int64_t, bool);

template <typename T>
void launch_keys(cudaStream_t st, uint64_t *keys, int64_t *pos, const void *x, int64_t n,
                 bool descending)
{
    keys_kernel<T><<<blocks(n), 256, 0, st>>>(keys, pos, (const T *)x, n, descending);
}

const keys_launch keys_table[WEFT_NUM_DTYPES] = {
    launch_keys<bool>,   launch_keys<uint8_t>, launch_keys<int8_t>,
    launch_keys<int16_t>, launch_keys<int32_t>, launch_keys<int64_t>,
    launch_keys<__half>, launch_keys<__nv_bfloat16>, launch_keys<float>,
    launch_keys<double>, nullptr, nullptr,
};

} // namespace

extern "C" int wfc_radix_sort_pairs(void *stream, void *temp, size_t *temp_bytes,
                                    const uint64_t *keys_in, uint64_t *keys_out,
                                    const int64_t *values_in, int64_t *values_out, int64_t n,
                                    int bits)
{
#if !WFC_HAVE_DEVICE_SORT
    /* kernels.c registers no caller in such a build; this answers one that
     * would come anyway instead of linking against a missing library */
    (void)stream, (void)temp, (void)temp_bytes, (void)keys_in, (void)keys_out, (void)values_in;
    (void)values_out, (void)bits;
    return weft_set_error(WEFT_ENOTSUP, WFC_BACKEND ": radix sort of %lld pairs: this build has "
                          "no device radix sort", (long long)n);
#else
#if CUB_VERSION < 101600
    /* CUB before 1.16 takes the count as int: a longer array would be cut
     * short silently.  From 1.16 on (CUDA 13's CCCL included) the count's
     * type is a template parameter and int64_t is taken whole. */
    if (n > INT_MAX)
        return weft_set_error(WEFT_ENOTSUP, WFC_BACKEND ": radix sort of %lld pairs: this build's CUB "
                              "(version %d) sorts at most INT_MAX (%d) pairs at once; CUB 1.16 "
                              "or later takes more", (long long)n, (int)CUB_VERSION, INT_MAX);
    const int count = (int)n;
#else
    const int64_t count = n;
#endif
    cudaError_t e = cub::DeviceRadixSort::SortPairs(temp, *temp_bytes, keys_in, keys_out,
                                                    values_in, values_out, count, 0, bits,
                                                    (cudaStream_t)stream);
    return e == cudaSuccess ? 0 : weft_set_error(WEFT_EDEVICE, WFC_BACKEND ": radix sort of %lld "
                                                 "pairs: %s", (long long)n, cudaGetErrorString(e));
#endif
}

extern "C" bool wfc_sort_supported(int dtype)
{
    return dtype >= 0 && dtype < WEFT_NUM_DTYPES && keys_table[dtype] != nullptr;
}

extern "C" int wfc_sort_keys(void *stream, int dtype, uint64_t *keys, int64_t *pos, const void *x,
                             int64_t n, bool descending)
{
    if (!wfc_sort_supported(dtype))
        return weft_set_error(WEFT_EDTYPE, WFC_BACKEND ": no sort kernel for dtype %s",
                              weft_dtype_name((weft_dtype)dtype));
    if (n == 0)
        return 0;
    keys_table[dtype]((cudaStream_t)stream, keys, pos, x, n, descending);
    return launched("sort's keys");
}

extern "C" int wfc_sort_row_keys(void *stream, uint64_t *keys, const int64_t *pos, int64_t n,
                                 int64_t len)
{
    if (n == 0)
        return 0;
    row_keys_kernel<<<blocks(n), 256, 0, (cudaStream_t)stream>>>(keys, pos, n, len);
    return launched("sort's row keys");
}

extern "C" int wfc_sort_take(void *stream, size_t elem, void *values, int64_t *indices,
                             const void *x, const int64_t *pos, int64_t nrows, int64_t len,
                             int64_t k)
{
    int64_t n = nrows * k;
    if (n == 0)
        return 0;
    cudaStream_t st = (cudaStream_t)stream;
    switch (elem) {
    case 1: take_sorted_kernel<uint8_t><<<blocks(n), 256, 0, st>>>((uint8_t *)values, indices, (const uint8_t *)x, pos, nrows, len, k); break;
    case 2: take_sorted_kernel<uint16_t><<<blocks(n), 256, 0, st>>>((uint16_t *)values, indices, (const uint16_t *)x, pos, nrows, len, k); break;
    case 4: take_sorted_kernel<uint32_t><<<blocks(n), 256, 0, st>>>((uint32_t *)values, indices, (const uint32_t *)x, pos, nrows, len, k); break;
    case 8: take_sorted_kernel<uint64_t><<<blocks(n), 256, 0, st>>>((uint64_t *)values, indices, (const uint64_t *)x, pos, nrows, len, k); break;
    default: return weft_set_error(WEFT_EDTYPE, WFC_BACKEND ": no sort kernel for %zu-byte elements", elem);
    }
    return launched("sort's results");
}

extern "C" int wfc_unique_marks(void *stream, int64_t *marks, const uint64_t *keys, int64_t n,
                                bool floating)
{
    if (n == 0)
        return 0;
    unique_marks_kernel<<<blocks(n), 256, 0, (cudaStream_t)stream>>>(marks, keys, n, floating);
    return launched("unique's marks");
}

extern "C" int wfc_inclusive_sum(void *stream, void *temp, size_t *temp_bytes, const int64_t *in,
                                 int64_t *out, int64_t n)
{
#if !WFC_HAVE_DEVICE_SORT
    (void)stream, (void)temp, (void)temp_bytes, (void)in, (void)out;
    return weft_set_error(WEFT_ENOTSUP, WFC_BACKEND ": prefix sum of %lld elements: this build "
                          "has no device scan", (long long)n);
#else
#if CUB_VERSION < 101600
    /* as for the radix sort above: an int count on old CUB */
    if (n > INT_MAX)
        return weft_set_error(WEFT_ENOTSUP, WFC_BACKEND ": prefix sum of %lld elements: this build's CUB "
                              "(version %d) scans at most INT_MAX (%d) at once; CUB 1.16 or "
                              "later takes more", (long long)n, (int)CUB_VERSION, INT_MAX);
    const int count = (int)n;
#else
    const int64_t count = n;
#endif
    cudaError_t e = cub::DeviceScan::InclusiveSum(temp, *temp_bytes, in, out, count,
                                                  (cudaStream_t)stream);
    return e == cudaSuccess ? 0 : weft_set_error(WEFT_EDEVICE, WFC_BACKEND ": prefix sum of %lld "
                                                 "elements: %s", (long long)n, cudaGetErrorString(e));
#endif
}

extern "C" int wfc_unique_gather(void *stream, size_t elem, void *values, int64_t *inverse,
                                 int64_t *starts, const void *x, const int64_t *pos,
                                 const int64_t *ids, int64_t n)
{
    if (n == 0)
        return 0;
    cudaStream_t st = (cudaStream_t)stream;
    switch (elem) {
    case 1: unique_gather_kernel<uint8_t><<<blocks(n), 256, 0, st>>>((uint8_t *)values, inverse, starts, (const uint8_t *)x, pos, ids, n); break;
    case 2: unique_gather_kernel<uint16_t><<<blocks(n), 256, 0, st>>>((uint16_t *)values, inverse, starts, (const uint16_t *)x, pos, ids, n); break;
    case 4: unique_gather_kernel<uint32_t><<<blocks(n), 256, 0, st>>>((uint32_t *)values, inverse, starts, (const uint32_t *)x, pos, ids, n); break;
    case 8: unique_gather_kernel<uint64_t><<<blocks(n), 256, 0, st>>>((uint64_t *)values, inverse, starts, (const uint64_t *)x, pos, ids, n); break;
    default: return weft_set_error(WEFT_EDTYPE, WFC_BACKEND ": no unique kernel for %zu-byte elements", elem);
    }
    return launched("unique's values");
}

extern "C" int wfc_unique_counts(void *stream, int64_t *counts, const int64_t *starts,
                                 int64_t groups, int64_t n)
{
    if (groups == 0)
        return 0;
    unique_counts_kernel<<<blocks(groups), 256, 0, (cudaStream_t)stream>>>(counts, starts,
                                                                           groups, n);
    return launched("unique's counts");
}
