/* backends/cuda/shape.cu — the kernels of the shape operators that are not
 * a composite of copy_ (shape.c): flip (a strided gather with signed
 * strides into a contiguous result), tril/triu (zeroing a triangle of
 * contiguous matrices, elements as words of their size) and the scans
 * cumsum/cumprod (one thread per row, sequential along it: the CPU
 * backend's order and rounding, bit for bit). */
#include "gpu.h"

#include "cuda.h"
#include "index.cuh"

namespace {

constexpr unsigned THREADS = 256;

unsigned blocks(int64_t n)
{
    return wfc_plan_blocks(n, THREADS, 8192);
}

int launched(const char *what)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : weft_set_error(WEFT_EDEVICE, WFC_BACKEND ": launching %s: %s", what,
                                                 cudaGetErrorString(e));
}

/* out[i] = src[sum_d c_d strides[d]], c the coordinates of i in sizes:
 * the strides may be negative (a flipped dim starts at its last element). */
template <typename W>
__global__ void gather_signed_kernel(W *out, const W *src, int64_t n, wfc_flip f)
{
    GRID_STRIDE(i, n) {
        int64_t rest = i, off = 0;
        for (int d = f.ndim - 1; d >= 0; d--) {
            int64_t c = rest % f.sizes[d];
            rest /= f.sizes[d];
            off += c * f.strides[d];
        }
        out[i] = src[off];
    }
}

/* Zeroes element (b, r, c) of contiguous [batches, rows, cols] when tril
 * (lower) drops it, c > r + diagonal, or triu does, c < r + diagonal. */
template <typename W>
__global__ void triangle_kernel(W *data, int64_t n, int64_t rows, int64_t cols, int64_t diagonal,
                                bool lower)
{
    GRID_STRIDE(i, n) {
        int64_t c = i % cols, r = (i / cols) % rows;
        if (lower ? c > r + diagonal : c < r + diagonal)
            data[i] = W(0);
    }
}

/* Each row of len contiguous elements replaced by its running sum or
 * product, accumulated in U (integers wrap through uint64, as on the
 * CPU). */
template <typename T, typename U>
__global__ void scan_kernel(T *data, int64_t nrows, int64_t len, bool product)
{
    GRID_STRIDE(r, nrows) {
        T *x = data + r * len;
        U acc = product ? U(1) : U(0);
        for (int64_t i = 0; i < len; i++) {
            acc = product ? acc * (U)x[i] : acc + (U)x[i];
            x[i] = (T)acc;
        }
    }
}

} // namespace

extern "C" int wfc_flip_gather(void *stream, size_t elem, void *out, const void *src, int64_t n,
                               const wfc_flip *f)
{
    if (n == 0)
        return 0;
    cudaStream_t st = (cudaStream_t)stream;
    switch (elem) {
    case 1: gather_signed_kernel<uint8_t><<<blocks(n), THREADS, 0, st>>>((uint8_t *)out, (const uint8_t *)src, n, *f); break;
    case 2: gather_signed_kernel<uint16_t><<<blocks(n), THREADS, 0, st>>>((uint16_t *)out, (const uint16_t *)src, n, *f); break;
    case 4: gather_signed_kernel<uint32_t><<<blocks(n), THREADS, 0, st>>>((uint32_t *)out, (const uint32_t *)src, n, *f); break;
    case 8: gather_signed_kernel<uint64_t><<<blocks(n), THREADS, 0, st>>>((uint64_t *)out, (const uint64_t *)src, n, *f); break;
    default: return weft_set_error(WEFT_EDTYPE, WFC_BACKEND ": no flip kernel for %zu-byte elements", elem);
    }
    return launched("flip");
}

extern "C" int wfc_triangle(void *stream, size_t elem, void *data, int64_t n, int64_t rows,
                            int64_t cols, int64_t diagonal, bool lower)
{
    if (n == 0)
        return 0;
    /* clamped as the CPU clamps it: r + diagonal cannot overflow, and no
     * element changes side */
    if (diagonal > cols + 1)
        diagonal = cols + 1;
    if (diagonal < -rows - 1)
        diagonal = -rows - 1;
    cudaStream_t st = (cudaStream_t)stream;
    switch (elem) {
    case 1: triangle_kernel<uint8_t><<<blocks(n), THREADS, 0, st>>>((uint8_t *)data, n, rows, cols, diagonal, lower); break;
    case 2: triangle_kernel<uint16_t><<<blocks(n), THREADS, 0, st>>>((uint16_t *)data, n, rows, cols, diagonal, lower); break;
    case 4: triangle_kernel<uint32_t><<<blocks(n), THREADS, 0, st>>>((uint32_t *)data, n, rows, cols, diagonal, lower); break;
    case 8: triangle_kernel<uint64_t><<<blocks(n), THREADS, 0, st>>>((uint64_t *)data, n, rows, cols, diagonal, lower); break;
    default: return weft_set_error(WEFT_EDTYPE, WFC_BACKEND ": no tril/triu kernel for %zu-byte elements", elem);
    }
    return launched("tril/triu");
}

extern "C" int wfc_scan(void *stream, int dtype, void *data, int64_t nrows, int64_t len,
                        bool product)
{
    if (nrows == 0 || len == 0)
        return 0;
    cudaStream_t st = (cudaStream_t)stream;
    if (dtype == WEFT_FLOAT64)
        scan_kernel<double, double><<<blocks(nrows), THREADS, 0, st>>>((double *)data, nrows, len, product);
    else if (dtype == WEFT_INT64)
        scan_kernel<int64_t, uint64_t><<<blocks(nrows), THREADS, 0, st>>>((int64_t *)data, nrows, len, product);
    else
        return weft_set_error(WEFT_EDTYPE, WFC_BACKEND ": the scans compute in float64 or int64, not %s",
                              weft_dtype_name((weft_dtype)dtype));
    return launched(product ? "cumprod" : "cumsum");
}
