/* backends/cuda/upsample.cu — upsample_nearest2d and upsample_bilinear2d
 * and their backward, over contiguous planes, from the axis tables that
 * plan.c computes with the CPU's formulas.  The nearest forward moves
 * elements as words (every dtype of 1 to 8 bytes); the rest compute in
 * float32 (float16, bfloat16, float32) or float64, as the CPU does.  The
 * backward gathers: each input element walks the outputs that read it
 * (the tables' first/end ranges) in the order the CPU's scatter loop adds
 * them, so there are no atomics and the sums round as the CPU's do. */
#include "gpu.h"

#include "cuda.h"
#include "index.cuh"

namespace {

using namespace wfc;

template <typename W>
__global__ void nearest_kernel(W *y, const W *x, wfc_upsample u)
{
    GRID_STRIDE(i, u.planes * u.oh * u.ow) {
        int64_t ow = i % u.ow, oh = (i / u.ow) % u.oh, p = i / (u.ow * u.oh);
        y[i] = x[(p * u.ih + u.h0[oh]) * u.iw + u.w0[ow]];
    }
}

template <typename T>
__global__ void bilinear_kernel(T *y, const T *x, wfc_upsample u)
{
    typedef typename acc<T>::type A;
    GRID_STRIDE(i, u.planes * u.oh * u.ow) {
        int64_t ow = i % u.ow, oh = (i / u.ow) % u.oh, p = i / (u.ow * u.oh);
        const T *r0 = x + (p * u.ih + u.h0[oh]) * u.iw, *r1 = x + (p * u.ih + u.h1[oh]) * u.iw;
        int64_t a = u.w0[ow], b = u.w1[ow];
        A h0 = (A)u.hl0[oh], h1 = (A)u.hl1[oh], w0 = (A)u.wl0[ow], w1 = (A)u.wl1[ow];
        A v = h0 * (w0 * load<A, T>(r0[a]) + w1 * load<A, T>(r0[b])) +
              h1 * (w0 * load<A, T>(r1[a]) + w1 * load<A, T>(r1[b]));
        y[i] = store<T, A>(v);
    }
}

/* gx[p, ih, iw] = the sum, over the outputs (oh, ow) that read it in
 * row-major order, of each term of that output that lands on it. */
template <typename T>
__global__ void backward_kernel(T *gx, const T *gy, wfc_upsample u)
{
    typedef typename acc<T>::type A;
    GRID_STRIDE(i, u.planes * u.ih * u.iw) {
        int64_t iw = i % u.iw, ih = (i / u.iw) % u.ih, p = i / (u.iw * u.ih);
        const T *g = gy + p * u.oh * u.ow;
        A sum = 0;
        for (int64_t oh = u.hfirst[ih]; oh < u.hend[ih]; oh++) {
            bool top = u.h0[oh] == ih, bottom = u.h1[oh] == ih;
            A h0 = (A)u.hl0[oh], h1 = (A)u.hl1[oh];
            for (int64_t ow = u.wfirst[iw]; ow < u.wend[iw]; ow++) {
                A v = load<A, T>(g[oh * u.ow + ow]);
                bool left = u.w0[ow] == iw, right = u.w1[ow] == iw;
                if (!u.linear) {
                    if (top && left)
                        sum += v;
                    continue;
                }
                A w0 = (A)u.wl0[ow], w1 = (A)u.wl1[ow];
                if (top && left)
                    sum += h0 * w0 * v;
                if (top && right)
                    sum += h0 * w1 * v;
                if (bottom && left)
                    sum += h1 * w0 * v;
                if (bottom && right)
                    sum += h1 * w1 * v;
            }
        }
        gx[i] = store<T, A>(sum);
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

typedef void (*plane_launch)(cudaStream_t, void *, const void *, const wfc_upsample &);

template <typename T> struct launch {
    static void bilinear(cudaStream_t st, void *y, const void *x, const wfc_upsample &u)
    {
        bilinear_kernel<T><<<blocks(u.planes * u.oh * u.ow), 256, 0, st>>>((T *)y, (const T *)x, u);
    }
    static void backward(cudaStream_t st, void *gx, const void *gy, const wfc_upsample &u)
    {
        backward_kernel<T><<<blocks(u.planes * u.ih * u.iw), 256, 0, st>>>((T *)gx, (const T *)gy,
                                                                           u);
    }
};

#define FLOATS(fn) \
    nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, launch<__half>::fn, \
        launch<__nv_bfloat16>::fn, launch<float>::fn, launch<double>::fn, nullptr, nullptr

const plane_launch bilinear_table[WEFT_NUM_DTYPES] = {FLOATS(bilinear)};
const plane_launch backward_table[WEFT_NUM_DTYPES] = {FLOATS(backward)};

} // namespace

extern "C" bool wfc_upsample_supported(bool backward, bool linear, int dtype)
{
    if (dtype < 0 || dtype >= WEFT_NUM_DTYPES)
        return false;
    if (backward)
        return backward_table[dtype] != nullptr;
    if (linear)
        return bilinear_table[dtype] != nullptr;
    size_t elem = weft_dtype_size((weft_dtype)dtype);
    return elem == 1 || elem == 2 || elem == 4 || elem == 8;
}

extern "C" int wfc_upsample_forward(void *stream, int dtype, void *y, const void *x,
                                    const wfc_upsample *u)
{
    if (!wfc_upsample_supported(false, u->linear, dtype))
        return weft_set_error(WEFT_EDTYPE, WFC_BACKEND ": no upsampling kernel for dtype %s",
                              weft_dtype_name((weft_dtype)dtype));
    int64_t n = u->planes * u->oh * u->ow;
    if (n == 0)
        return 0;
    cudaStream_t st = (cudaStream_t)stream;
    if (u->linear) {
        bilinear_table[dtype](st, y, x, *u);
        return launched("upsample_bilinear2d");
    }
    switch (weft_dtype_size((weft_dtype)dtype)) {
    case 1: nearest_kernel<uint8_t><<<blocks(n), 256, 0, st>>>((uint8_t *)y, (const uint8_t *)x, *u); break;
    case 2: nearest_kernel<uint16_t><<<blocks(n), 256, 0, st>>>((uint16_t *)y, (const uint16_t *)x, *u); break;
    case 4: nearest_kernel<uint32_t><<<blocks(n), 256, 0, st>>>((uint32_t *)y, (const uint32_t *)x, *u); break;
    default: nearest_kernel<uint64_t><<<blocks(n), 256, 0, st>>>((uint64_t *)y, (const uint64_t *)x, *u); break;
    }
    return launched("upsample_nearest2d");
}

extern "C" int wfc_upsample_backward(void *stream, int dtype, void *gx, const void *gy,
                                     const wfc_upsample *u)
{
    if (!wfc_upsample_supported(true, u->linear, dtype))
        return weft_set_error(WEFT_EDTYPE, WFC_BACKEND ": no upsampling backward for dtype %s",
                              weft_dtype_name((weft_dtype)dtype));
    if (u->planes * u->ih * u->iw == 0)
        return 0;
    backward_table[dtype]((cudaStream_t)stream, gx, gy, *u);
    return launched(u->linear ? "upsample_bilinear2d_backward" : "upsample_nearest2d_backward");
}
