/* backends/cuda/index.cu — index_select / embedding (rows taken along a
 * dim) and gather, moving elements as unsigned words of their size, so one
 * body serves every dtype.  Indices are int64; one out of range leaves its
 * value in bad[1] and sets bad[0] (the caller reads the two words back
 * and reports it), and its element is left unwritten. */
#include "gpu.h"

#include "cuda.h"
#include "index.cuh"

namespace {

/* dst[(o n + j) inner + i] = src[(o len + idx[j]) inner + i] */
template <typename W>
__global__ void take_kernel(W *dst, const W *src, const int64_t *idx, int64_t outer, int64_t len,
                            int64_t n, int64_t inner, unsigned long long *bad)
{
    GRID_STRIDE(p, outer * n * inner) {
        int64_t i = p % inner, j = (p / inner) % n, o = p / (inner * n);
        int64_t k = idx[j];
        if (k < 0 || k >= len) {
            bad[0] = 1;
            bad[1] = (unsigned long long)k;
            continue;
        }
        dst[p] = src[(o * len + k) * inner + i];
    }
}

/* out[p] = src[coords of p in index's shape, with idx[p] along dim]; g
 * holds index's sizes and, as operand 0's strides, src's. */
template <typename W>
__global__ void gather_kernel(W *dst, const W *src, const int64_t *idx, int64_t n, int dim,
                              int64_t size, wfc_geometry g, unsigned long long *bad)
{
    GRID_STRIDE(p, n) {
        int64_t k = idx[p];
        if (k < 0 || k >= size) {
            bad[0] = 1;
            bad[1] = (unsigned long long)k;
            continue;
        }
        int64_t off = 0, rest = p;
        for (int d = g.ndim - 1; d >= 0; d--) {
            int64_t c = rest % g.sizes[d];
            rest /= g.sizes[d];
            off += (d == dim ? k : c) * g.strides[0][d];
        }
        dst[p] = src[off];
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

} // namespace

extern "C" int wfc_take(void *stream, size_t elem, void *dst, const void *src, const int64_t *idx,
                        int64_t outer, int64_t len, int64_t n, int64_t inner,
                        unsigned long long *bad)
{
    int64_t total = outer * n * inner;
    if (total == 0)
        return 0;
    cudaStream_t st = (cudaStream_t)stream;
    switch (elem) {
    case 1: take_kernel<uint8_t><<<blocks(total), 256, 0, st>>>((uint8_t *)dst, (const uint8_t *)src, idx, outer, len, n, inner, bad); break;
    case 2: take_kernel<uint16_t><<<blocks(total), 256, 0, st>>>((uint16_t *)dst, (const uint16_t *)src, idx, outer, len, n, inner, bad); break;
    case 4: take_kernel<uint32_t><<<blocks(total), 256, 0, st>>>((uint32_t *)dst, (const uint32_t *)src, idx, outer, len, n, inner, bad); break;
    case 8: take_kernel<uint64_t><<<blocks(total), 256, 0, st>>>((uint64_t *)dst, (const uint64_t *)src, idx, outer, len, n, inner, bad); break;
    default: return weft_set_error(WEFT_EDTYPE, WFC_BACKEND ": no take kernel for %zu-byte elements", elem);
    }
    return launched("index_select");
}

extern "C" int wfc_gather(void *stream, size_t elem, void *dst, const void *src, const int64_t *idx,
                          int64_t n, int dim, int64_t size, const wfc_geometry *g,
                          unsigned long long *bad)
{
    if (n == 0)
        return 0;
    cudaStream_t st = (cudaStream_t)stream;
    switch (elem) {
    case 1: gather_kernel<uint8_t><<<blocks(n), 256, 0, st>>>((uint8_t *)dst, (const uint8_t *)src, idx, n, dim, size, *g, bad); break;
    case 2: gather_kernel<uint16_t><<<blocks(n), 256, 0, st>>>((uint16_t *)dst, (const uint16_t *)src, idx, n, dim, size, *g, bad); break;
    case 4: gather_kernel<uint32_t><<<blocks(n), 256, 0, st>>>((uint32_t *)dst, (const uint32_t *)src, idx, n, dim, size, *g, bad); break;
    case 8: gather_kernel<uint64_t><<<blocks(n), 256, 0, st>>>((uint64_t *)dst, (const uint64_t *)src, idx, n, dim, size, *g, bad); break;
    default: return weft_set_error(WEFT_EDTYPE, WFC_BACKEND ": no gather kernel for %zu-byte elements", elem);
    }
    return launched("gather");
}
