/* backends/cuda/scatter.cu — the writes through an index that may repeat
 * (scatter, scatter_add, scatter_reduce, index_add), without atomics and
 * in the CPU backend's order: every contribution becomes a pair (target
 * offset, source offset) in the order the CPU walks them, a stable radix
 * sort by target offset (sort.cu) groups equal targets and keeps that
 * order, and one thread per distinct target combines its run from first
 * to last.  Float sums therefore round exactly as the CPU's loop does, and
 * every run gives the same bits.  A very long run (one target hit by most
 * contributions) is one thread's serial loop: correct, not fast. */
#include "gpu.h"

#include "cuda.h"
#include "index.cuh"

namespace {

using namespace wfc;

__global__ void check_kernel(const int64_t *idx, int64_t n, int64_t size, unsigned long long *bad)
{
    GRID_STRIDE(p, n) {
        if (idx[p] < 0 || idx[p] >= size)
            note_bad(bad, p);
    }
}

/* Pair p: g.sizes is the shape walked (row-major), g.strides[0] the
 * target's, g.strides[1] the source's.  The index is idx[p] (scatter) or
 * idx[coordinate along dim] (index_add); a bad one (already reported by
 * check_kernel) gives key 0 and is never applied. */
__global__ void pairs_kernel(uint64_t *keys, int64_t *from, const int64_t *idx, int64_t n,
                             bool along_dim, int dim, int64_t size, wfc_geometry g)
{
    GRID_STRIDE(p, n) {
        int64_t rest = p, to = 0, src = 0, k = 0;
        for (int d = g.ndim - 1; d >= 0; d--) {
            int64_t c = rest % g.sizes[d];
            rest /= g.sizes[d];
            src += c * g.strides[1][d];
            if (d == dim)
                k = along_dim ? idx[c] : idx[p];
            else
                to += c * g.strides[0][d];
        }
        bool ok = k >= 0 && k < size;
        keys[p] = ok ? (uint64_t)(to + k * g.strides[0][dim]) : 0;
        from[p] = ok ? src : 0;
    }
}

/* The arithmetic of the accumulating forms, as the CPU backend's: floats
 * in their accumulation type, rounded back to the element type after
 * every step; integers (and bool) in wrapping unsigned 64-bit arithmetic,
 * compared as signed values. */
template <typename T> struct float_arith {
    typedef typename acc<T>::type A;
    static __device__ A get(T v) { return load<A, T>(v); }
    static __device__ T put(A v) { return store<T, A>(v); }
    static __device__ A scale(double alpha) { return (A)alpha; }
    static __device__ A add(A a, A b) { return a + b; }
    static __device__ A mul(A a, A b) { return a * b; }
    static __device__ bool is_nan(A a) { return a != a; }
    static __device__ T divide(A sum, int64_t count) { return put(sum / (A)count); }
};
template <typename T> struct int_arith {
    typedef int64_t A;
    static __device__ A get(T v) { return (A)v; }
    static __device__ T put(A v) { return (T)(uint64_t)v; }
    static __device__ A scale(double alpha) { return (A)alpha; }
    static __device__ A add(A a, A b) { return (A)((uint64_t)a + (uint64_t)b); }
    static __device__ A mul(A a, A b) { return (A)((uint64_t)a * (uint64_t)b); }
    static __device__ bool is_nan(A) { return false; }
    static __device__ T divide(A sum, int64_t count)
    {
        A q = sum / count;
        if (sum % count != 0 && ((sum < 0) != (count < 0)))
            q--;
        return put(q);
    }
};
struct bool_arith : int_arith<bool> {
    static __device__ A scale(double alpha) { return alpha != 0 ? 1 : 0; }
    static __device__ bool put(A v) { return v != 0; }
};

/* One thread per run of equal keys (its first pair) combines the run in
 * order into target[key]. */
template <typename T, typename R>
__global__ void combine_kernel(T *target, const T *src, const uint64_t *keys, const int64_t *from,
                               int64_t n, int kind, double alpha_arg, bool include_self)
{
    typedef typename R::A A;
    const A alpha = R::scale(alpha_arg);
    GRID_STRIDE(q, n) {
        uint64_t at = keys[q];
        if (q > 0 && keys[q - 1] == at)
            continue;
        int64_t j = q, count = 1;
        A cur;
        if (include_self) {
            cur = R::get(target[at]);
        } else {
            cur = R::get(src[from[j++]]);
        }
        for (; j < n && keys[j] == at; j++, count++) {
            A v = R::get(src[from[j]]);
            switch (kind) {
            case WFC_SCATTER_ADD: cur = R::add(cur, R::mul(alpha, v)); break;
            case WFC_SCATTER_PROD: cur = R::mul(cur, v); break;
            case WFC_SCATTER_AMAX: cur = (R::is_nan(cur) || cur > v) ? cur : v; break;
            case WFC_SCATTER_AMIN: cur = (R::is_nan(cur) || cur < v) ? cur : v; break;
            default: cur = R::add(cur, v); break; /* sum, mean */
            }
            cur = R::get(R::put(cur));
        }
        target[at] = kind == WFC_SCATTER_MEAN && count > 1 ? R::divide(cur, count) : R::put(cur);
    }
}

/* scatter: the last pair of each run wins; elements moved as words. */
template <typename W>
__global__ void put_kernel(W *target, const W *src, const uint64_t *keys, const int64_t *from,
                           int64_t n)
{
    GRID_STRIDE(q, n) {
        if (q + 1 < n && keys[q + 1] == keys[q])
            continue;
        target[keys[q]] = src[from[q]];
    }
}

/* index_put's indices: negative ones wrapped, then checked, column k of
 * the broadcast indices indexing dim k (the CPU's order of checks). */
__global__ void wrap_check_kernel(int64_t *cols, wfc_index_columns c, unsigned long long *bad)
{
    GRID_STRIDE(i, c.count * c.positions) {
        int64_t size = c.sizes[i / c.positions], v = cols[i];
        if (v < 0 && v >= -size)
            cols[i] = v += size;
        if (v < 0 || v >= size)
            note_bad(bad, i);
    }
}

/* index_put's pairs in the CPU's order: position p of the broadcast
 * indices, then element q of the slice they select. */
__global__ void index_put_pairs_kernel(uint64_t *keys, int64_t *from, const int64_t *cols,
                                       wfc_index_columns c, int64_t slice, wfc_geometry rest)
{
    GRID_STRIDE(i, c.positions * slice) {
        int64_t p = i / slice, q = i % slice, to = offset_of(rest, 0, q);
        for (int k = 0; k < c.count; k++)
            to += cols[k * c.positions + p] * c.strides[k];
        keys[i] = (uint64_t)to;
        from[i] = i;
    }
}

/* A mask's nonzero() as columns: 1 where set, then (from the prefix sum
 * ids of those marks) each set element's coordinates at its rank. */
__global__ void mask_marks_kernel(int64_t *marks, const uint8_t *mask, int64_t n)
{
    GRID_STRIDE(i, n) {
        marks[i] = mask[i] != 0;
    }
}

__global__ void mask_columns_kernel(int64_t *cols, const int64_t *ids, const uint8_t *mask,
                                    wfc_index_columns shape, int64_t nonzero)
{
    GRID_STRIDE(i, shape.positions) {
        if (!mask[i])
            continue;
        int64_t j = ids[i] - 1, rest = i;
        for (int d = shape.count - 1; d >= 0; d--) {
            cols[d * nonzero + j] = rest % shape.sizes[d];
            rest /= shape.sizes[d];
        }
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

typedef void (*combine_launch)(cudaStream_t, void *, const void *, const uint64_t *,
                               const int64_t *, int64_t, int, double, bool);

template <typename T, typename R>
void launch_combine(cudaStream_t st, void *target, const void *src, const uint64_t *keys,
                    const int64_t *from, int64_t n, int kind, double alpha, bool include_self)
{
    combine_kernel<T, R><<<blocks(n), 256, 0, st>>>((T *)target, (const T *)src, keys, from, n,
                                                    kind, alpha, include_self);
}

const combine_launch combine_table[WEFT_NUM_DTYPES] = {
    launch_combine<bool, bool_arith>,
    launch_combine<uint8_t, int_arith<uint8_t>>,
    launch_combine<int8_t, int_arith<int8_t>>,
    launch_combine<int16_t, int_arith<int16_t>>,
    launch_combine<int32_t, int_arith<int32_t>>,
    launch_combine<int64_t, int_arith<int64_t>>,
    launch_combine<__half, float_arith<__half>>,
    launch_combine<__nv_bfloat16, float_arith<__nv_bfloat16>>,
    launch_combine<float, float_arith<float>>,
    launch_combine<double, float_arith<double>>,
    nullptr,
    nullptr,
};

} // namespace

extern "C" bool wfc_scatter_supported(int kind, int dtype, size_t elem)
{
    if (kind == WFC_SCATTER_PUT)
        return elem == 1 || elem == 2 || elem == 4 || elem == 8;
    if (dtype < 0 || dtype >= WEFT_NUM_DTYPES || !combine_table[dtype])
        return false;
    return kind == WFC_SCATTER_ADD || dtype != WEFT_BOOL; /* the CPU reduces no bool */
}

extern "C" int wfc_check_indices(void *stream, const int64_t *idx, int64_t n, int64_t size,
                                 unsigned long long *bad)
{
    if (n == 0)
        return 0;
    check_kernel<<<blocks(n), 256, 0, (cudaStream_t)stream>>>(idx, n, size, bad);
    return launched("an index check");
}

extern "C" int wfc_scatter_pairs(void *stream, uint64_t *keys, int64_t *from, const int64_t *idx,
                                 int64_t n, bool along_dim, int dim, int64_t size,
                                 const wfc_geometry *g)
{
    if (n == 0)
        return 0;
    pairs_kernel<<<blocks(n), 256, 0, (cudaStream_t)stream>>>(keys, from, idx, n, along_dim, dim,
                                                              size, *g);
    return launched("scatter's pairs");
}

extern "C" int wfc_scatter_apply(void *stream, int kind, int dtype, size_t elem, void *target,
                                 const void *src, const uint64_t *keys, const int64_t *from,
                                 int64_t n, double alpha, bool include_self)
{
    if (!wfc_scatter_supported(kind, dtype, elem))
        return weft_set_error(WEFT_EDTYPE, WFC_BACKEND ": no scatter kernel for dtype %s",
                              weft_dtype_name((weft_dtype)dtype));
    if (n == 0)
        return 0;
    cudaStream_t st = (cudaStream_t)stream;
    if (kind != WFC_SCATTER_PUT) {
        combine_table[dtype](st, target, src, keys, from, n, kind, alpha, include_self);
        return launched("a scatter reduction");
    }
    switch (elem) {
    case 1: put_kernel<uint8_t><<<blocks(n), 256, 0, st>>>((uint8_t *)target, (const uint8_t *)src, keys, from, n); break;
    case 2: put_kernel<uint16_t><<<blocks(n), 256, 0, st>>>((uint16_t *)target, (const uint16_t *)src, keys, from, n); break;
    case 4: put_kernel<uint32_t><<<blocks(n), 256, 0, st>>>((uint32_t *)target, (const uint32_t *)src, keys, from, n); break;
    default: put_kernel<uint64_t><<<blocks(n), 256, 0, st>>>((uint64_t *)target, (const uint64_t *)src, keys, from, n); break;
    }
    return launched("scatter");
}

extern "C" int wfc_index_wrap_check(void *stream, int64_t *cols, const wfc_index_columns *c,
                                    unsigned long long *bad)
{
    int64_t n = c->count * c->positions;
    if (n == 0)
        return 0;
    wrap_check_kernel<<<blocks(n), 256, 0, (cudaStream_t)stream>>>(cols, *c, bad);
    return launched("index_put's index check");
}

extern "C" int wfc_index_put_pairs(void *stream, uint64_t *keys, int64_t *from,
                                   const int64_t *cols, const wfc_index_columns *c, int64_t slice,
                                   const wfc_geometry *rest)
{
    int64_t n = c->positions * slice;
    if (n == 0)
        return 0;
    index_put_pairs_kernel<<<blocks(n), 256, 0, (cudaStream_t)stream>>>(keys, from, cols, *c,
                                                                        slice, *rest);
    return launched("index_put's pairs");
}

extern "C" int wfc_mask_marks(void *stream, int64_t *marks, const uint8_t *mask, int64_t n)
{
    if (n == 0)
        return 0;
    mask_marks_kernel<<<blocks(n), 256, 0, (cudaStream_t)stream>>>(marks, mask, n);
    return launched("a mask's marks");
}

extern "C" int wfc_mask_columns(void *stream, int64_t *cols, const int64_t *ids,
                                const uint8_t *mask, const wfc_index_columns *shape,
                                int64_t nonzero)
{
    if (shape->positions == 0 || nonzero == 0)
        return 0;
    mask_columns_kernel<<<blocks(shape->positions), 256, 0, (cudaStream_t)stream>>>(
        cols, ids, mask, *shape, nonzero);
    return launched("a mask's columns");
}
