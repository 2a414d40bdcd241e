/* backends/cuda/nn.cu — the neural-network kernels: softmax and
 * log_softmax with their backward (one block per row, block reductions in
 * a fixed order), the per-sample part of nll_loss and its backward, and
 * max_pool2d with indices and its backward (each input element gathers
 * the gradient of the windows that chose it, so no atomics and the same
 * sums every run).  Half types compute in float. */
#include "gpu.h"

#include "cuda.h"
#include "index.cuh"

namespace {

using namespace wfc;

__device__ inline float exp_(float a) { return expf(a); }
__device__ inline double exp_(double a) { return exp(a); }
__device__ inline float log_(float a) { return logf(a); }
__device__ inline double log_(double a) { return log(a); }

/* The block's sum (or max) of v, the same order every time; every thread
 * gets the result.  part holds blockDim.x values (a power of two). */
template <typename A> __device__ A block_reduce(A v, bool is_max, A *part)
{
    part[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            A a = part[threadIdx.x], b = part[threadIdx.x + s];
            part[threadIdx.x] = is_max ? (a != a || a > b ? a : b) : a + b;
        }
        __syncthreads();
    }
    A r = part[0];
    __syncthreads();
    return r;
}

/* Rows of len elements: operand k's element j of row r is at
 * offset_of(rows, k, r) + j * step[k]. */
template <typename T>
__global__ void softmax_kernel(bool log_form, T *out, const T *x, int64_t nrows, int64_t len,
                               wfc_geometry rows, int64_t step_out, int64_t step_x)
{
    typedef typename acc<T>::type A;
    extern __shared__ __align__(16) unsigned char smem[];
    A *part = (A *)smem;
    for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
        const T *xr = x + offset_of(rows, 1, r);
        T *yr = out + offset_of(rows, 0, r);
        A m = -INFINITY;
        for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
            A v = load<A, T>(xr[j * step_x]);
            m = v != v || v > m ? v : m;
        }
        m = block_reduce<A>(m, true, part);
        A s = 0;
        for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
            s += exp_(load<A, T>(xr[j * step_x]) - m);
        s = block_reduce<A>(s, false, part);
        A ls = log_(s);
        for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
            A v = load<A, T>(xr[j * step_x]) - m;
            yr[j * step_out] = store<T, A>(log_form ? v - ls : exp_(v) / s);
        }
    }
}

/* softmax: gin = y (g - sum(g y)); log_softmax: gin = g - exp(y) sum(g). */
template <typename T>
__global__ void softmax_backward_kernel(bool log_form, T *gin, const T *g, const T *y,
                                        int64_t nrows, int64_t len, wfc_geometry rows,
                                        int64_t step_gin, int64_t step_g, int64_t step_y)
{
    typedef typename acc<T>::type A;
    extern __shared__ __align__(16) unsigned char smem[];
    A *part = (A *)smem;
    for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
        T *gi = gin + offset_of(rows, 0, r);
        const T *gr = g + offset_of(rows, 1, r), *yr = y + offset_of(rows, 2, r);
        A s = 0;
        for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
            A gv = load<A, T>(gr[j * step_g]);
            s += log_form ? gv : gv * load<A, T>(yr[j * step_y]);
        }
        s = block_reduce<A>(s, false, part);
        for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
            A gv = load<A, T>(gr[j * step_g]), yv = load<A, T>(yr[j * step_y]);
            gi[j * step_gin] = store<T, A>(log_form ? gv - exp_(yv) * s : yv * (gv - s));
        }
    }
}

/* nll_loss per sample of a contiguous [n, c] input: loss[i] = -w[t] x[i, t]
 * and weight[i] = w[t] (0 for ignore_index).  A target out of range sets
 * bad[0] and leaves its value in bad[1]. */
template <typename T>
__global__ void nll_kernel(T *loss, T *weight, const T *x, const int64_t *target, const T *w,
                           int64_t n, int64_t c, int64_t ignore_index, unsigned long long *bad)
{
    typedef typename acc<T>::type A;
    GRID_STRIDE(i, n) {
        int64_t t = target[i];
        A wt = A(0), l = A(0);
        if (t != ignore_index) {
            if (t < 0 || t >= c) {
                bad[0] = 1;
                bad[1] = (unsigned long long)t;
            } else {
                wt = w ? load<A, T>(w[t]) : A(1);
                l = -wt * load<A, T>(x[i * c + t]);
            }
        }
        if (loss)
            loss[i] = store<T, A>(l);
        weight[i] = store<T, A>(wt);
    }
}

/* gin (contiguous [n, c], zeroed) at [i, t] = -w[t] g * scale, g the scalar
 * gradient (or g[i] for reduction none), scale 1 or 1/total weight (read
 * on the device, so no host round trip). */
template <typename T>
__global__ void nll_backward_kernel(T *gin, const T *g, bool per_sample, const T *total,
                                    const int64_t *target, const T *w, int64_t n, int64_t c,
                                    int64_t ignore_index)
{
    typedef typename acc<T>::type A;
    GRID_STRIDE(i, n) {
        int64_t t = target[i];
        if (t == ignore_index || t < 0 || t >= c)
            continue;
        A wt = w ? load<A, T>(w[t]) : A(1);
        A gv = load<A, T>(g[per_sample ? i : 0]);
        A scale = total ? A(1) / load<A, T>(*total) : A(1);
        gin[i * c + t] = store<T, A>(-wt * gv * scale);
    }
}

/* max_pool2d over a contiguous [planes, h, w] input: out and idx
 * contiguous [planes, oh, ow]; idx is the flat h*w index in the plane. */
template <typename T>
__global__ void max_pool_kernel(T *out, int64_t *idx, const T *x, int64_t planes, int64_t h,
                                int64_t w, int64_t oh, int64_t ow, wfc_pool2d p)
{
    typedef typename acc<T>::type A;
    GRID_STRIDE(o, planes * oh * ow) {
        int64_t ox = o % ow, oy = (o / ow) % oh, plane = o / (ow * oh);
        const T *xp = x + plane * h * w;
        A best = -INFINITY;
        int64_t at = -1;
        for (int ky = 0; ky < p.kh; ky++) {
            int64_t iy = oy * p.sh - p.ph + ky * p.dh;
            if (iy < 0 || iy >= h)
                continue;
            for (int kx = 0; kx < p.kw; kx++) {
                int64_t ix = ox * p.sw - p.pw + kx * p.dw;
                if (ix < 0 || ix >= w)
                    continue;
                A v = load<A, T>(xp[iy * w + ix]);
                if (at < 0 || v > best || v != v) {
                    best = v, at = iy * w + ix;
                    if (v != v)
                        goto done; /* NaN wins, first one */
                }
            }
        }
    done:
        out[o] = store<T, A>(best);
        idx[o] = at;
    }
}

/* max_pool2d's backward knows only the chosen indices (its schema has no
 * window), and windows may overlap: one thread per plane adds its
 * outputs' gradients in output order into the zeroed plane, so the sums
 * are the same every run without atomics. */
template <typename T>
__global__ void max_pool_backward_kernel(T *gin, const T *g, const int64_t *idx, int64_t planes,
                                         int64_t hw, int64_t ohw)
{
    typedef typename acc<T>::type A;
    GRID_STRIDE(plane, planes) {
        T *gp = gin + plane * hw;
        const T *op = g + plane * ohw;
        const int64_t *ip = idx + plane * ohw;
        for (int64_t o = 0; o < ohw; o++) {
            int64_t at = ip[o];
            if (at >= 0 && at < hw)
                gp[at] = store<T, A>(load<A, T>(gp[at]) + load<A, T>(op[o]));
        }
    }
}

/* The window of output (oy, ox), clipped to the input, and its divisor:
 * the CPU backend's rule (nn_pool.c's window_of). */
__device__ inline double avg_window(const wfc_avg_pool &p, int64_t oy, int64_t ox, int64_t *h0,
                                    int64_t *h1, int64_t *w0, int64_t *w1)
{
    if (p.adaptive) {
        *h0 = oy * p.h / p.oh;
        *h1 = ((oy + 1) * p.h + p.oh - 1) / p.oh;
        *w0 = ox * p.w / p.ow;
        *w1 = ((ox + 1) * p.w + p.ow - 1) / p.ow;
        return (double)((*h1 - *h0) * (*w1 - *w0));
    }
    int64_t hs = oy * p.sh - p.ph, ws = ox * p.sw - p.pw;
    int64_t he = hs + p.kh < p.h + p.ph ? hs + p.kh : p.h + p.ph;
    int64_t we = ws + p.kw < p.w + p.pw ? ws + p.kw : p.w + p.pw;
    int64_t pool_size = (he - hs) * (we - ws);
    *h0 = hs > 0 ? hs : 0;
    *w0 = ws > 0 ? ws : 0;
    *h1 = he < p.h ? he : p.h;
    *w1 = we < p.w ? we : p.w;
    if (p.divisor)
        return (double)p.divisor;
    return (double)(p.count_include_pad ? pool_size : (*h1 - *h0) * (*w1 - *w0));
}

template <typename T>
__global__ void avg_pool_kernel(T *out, const T *x, int64_t planes, wfc_avg_pool p)
{
    typedef typename acc<T>::type A;
    GRID_STRIDE(o, planes * p.oh * p.ow) {
        int64_t ox = o % p.ow, oy = (o / p.ow) % p.oh, plane = o / (p.ow * p.oh);
        int64_t h0, h1, w0, w1;
        double div = avg_window(p, oy, ox, &h0, &h1, &w0, &w1);
        const T *xp = x + plane * p.h * p.w;
        A sum = 0;
        for (int64_t iy = h0; iy < h1; iy++)
            for (int64_t ix = w0; ix < w1; ix++)
                sum += load<A, T>(xp[iy * p.w + ix]);
        out[o] = store<T, A>(sum / (A)div);
    }
}

/* The outputs whose windows can hold input row iy: a superset, each then
 * checked against its exact window. */
__device__ inline void candidates(const wfc_avg_pool &p, int64_t i, bool rows, int64_t *lo,
                                  int64_t *hi)
{
    int64_t in = rows ? p.h : p.w, on = rows ? p.oh : p.ow;
    if (p.adaptive) {
        *lo = i * on / in - 1;
        *hi = (i + 1) * on / in + 1;
    } else {
        int64_t k = rows ? p.kh : p.kw, s = rows ? p.sh : p.sw, pad = rows ? p.ph : p.pw;
        *lo = i + pad - k >= 0 ? (i + pad - k) / s : 0;
        *hi = (i + pad) / s;
    }
    *lo = *lo < 0 ? 0 : *lo;
    *hi = *hi > on - 1 ? on - 1 : *hi;
}

template <typename T>
__global__ void avg_pool_backward_kernel(T *gin, const T *g, int64_t planes, wfc_avg_pool p)
{
    typedef typename acc<T>::type A;
    GRID_STRIDE(e, planes * p.h * p.w) {
        int64_t ix = e % p.w, iy = (e / p.w) % p.h, plane = e / (p.w * p.h);
        const T *gp = g + plane * p.oh * p.ow;
        int64_t ylo, yhi, xlo, xhi;
        candidates(p, iy, true, &ylo, &yhi);
        candidates(p, ix, false, &xlo, &xhi);
        A sum = 0;
        for (int64_t oy = ylo; oy <= yhi; oy++)
            for (int64_t ox = xlo; ox <= xhi; ox++) {
                int64_t h0, h1, w0, w1;
                double div = avg_window(p, oy, ox, &h0, &h1, &w0, &w1);
                if (iy >= h0 && iy < h1 && ix >= w0 && ix < w1)
                    sum += load<A, T>(gp[oy * p.ow + ox]) / (A)div;
            }
        gin[e] = store<T, A>(sum);
    }
}

int launched(const char *what)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        return 0;
    return weft_set_error(WEFT_EDEVICE, WFC_BACKEND ": launching %s: %s", what, cudaGetErrorString(e));
}

unsigned row_threads(int64_t len)
{
    unsigned t = 32;
    while (t < 256 && t < len)
        t *= 2;
    return t;
}

unsigned grid(int64_t blocks)
{
    return blocks < 1 ? 1 : blocks > 65535 ? 65535 : (unsigned)blocks;
}

unsigned flat_grid(int64_t n)
{
    return wfc_plan_blocks(n, 256, 8192);
}

template <typename T> struct launchers {
    static void softmax(cudaStream_t st, bool lg, void *out, const void *x, int64_t nrows,
                        int64_t len, const wfc_geometry &rows, int64_t so, int64_t sx)
    {
        typedef typename acc<T>::type A;
        unsigned t = row_threads(len);
        softmax_kernel<T><<<grid(nrows), t, t * sizeof(A), st>>>(lg, (T *)out, (const T *)x, nrows,
                                                                 len, rows, so, sx);
    }
    static void softmax_backward(cudaStream_t st, bool lg, void *gin, const void *g, const void *y,
                                 int64_t nrows, int64_t len, const wfc_geometry &rows,
                                 int64_t sgin, int64_t sg, int64_t sy)
    {
        typedef typename acc<T>::type A;
        unsigned t = row_threads(len);
        softmax_backward_kernel<T><<<grid(nrows), t, t * sizeof(A), st>>>(
            lg, (T *)gin, (const T *)g, (const T *)y, nrows, len, rows, sgin, sg, sy);
    }
    static void nll(cudaStream_t st, void *loss, void *weight, const void *x,
                    const int64_t *target, const void *w, int64_t n, int64_t c, int64_t ignore,
                    unsigned long long *bad)
    {
        nll_kernel<T><<<flat_grid(n), 256, 0, st>>>((T *)loss, (T *)weight, (const T *)x, target,
                                                    (const T *)w, n, c, ignore, bad);
    }
    static void nll_backward(cudaStream_t st, void *gin, const void *g, bool per_sample,
                             const void *total, const int64_t *target, const void *w, int64_t n,
                             int64_t c, int64_t ignore)
    {
        nll_backward_kernel<T><<<flat_grid(n), 256, 0, st>>>((T *)gin, (const T *)g, per_sample,
                                                             (const T *)total, target,
                                                             (const T *)w, n, c, ignore);
    }
    static void max_pool(cudaStream_t st, void *out, int64_t *idx, const void *x, int64_t planes,
                         int64_t h, int64_t w, int64_t oh, int64_t ow, const wfc_pool2d &p)
    {
        max_pool_kernel<T><<<flat_grid(planes * oh * ow), 256, 0, st>>>(
            (T *)out, idx, (const T *)x, planes, h, w, oh, ow, p);
    }
    static void avg_pool(cudaStream_t st, void *out, const void *x, int64_t planes,
                         const wfc_avg_pool &p)
    {
        avg_pool_kernel<T><<<flat_grid(planes * p.oh * p.ow), 256, 0, st>>>((T *)out, (const T *)x,
                                                                             planes, p);
    }
    static void avg_pool_backward(cudaStream_t st, void *gin, const void *g, int64_t planes,
                                  const wfc_avg_pool &p)
    {
        avg_pool_backward_kernel<T><<<flat_grid(planes * p.h * p.w), 256, 0, st>>>(
            (T *)gin, (const T *)g, planes, p);
    }
    static void max_pool_backward(cudaStream_t st, void *gin, const void *g, const int64_t *idx,
                                  int64_t planes, int64_t hw, int64_t ohw)
    {
        max_pool_backward_kernel<T><<<wfc_plan_blocks(planes, 128, 8192), 128, 0, st>>>(
            (T *)gin, (const T *)g, idx, planes, hw, ohw);
    }
};

/* One row of function pointers per float dtype. */
struct nn_table {
    decltype(&launchers<float>::softmax) softmax;
    decltype(&launchers<float>::softmax_backward) softmax_backward;
    decltype(&launchers<float>::nll) nll;
    decltype(&launchers<float>::nll_backward) nll_backward;
    decltype(&launchers<float>::max_pool) max_pool;
    decltype(&launchers<float>::max_pool_backward) max_pool_backward;
    decltype(&launchers<float>::avg_pool) avg_pool;
    decltype(&launchers<float>::avg_pool_backward) avg_pool_backward;
};
#define ROW(T)                                                                                  \
    {launchers<T>::softmax, launchers<T>::softmax_backward, launchers<T>::nll,                 \
     launchers<T>::nll_backward, launchers<T>::max_pool, launchers<T>::max_pool_backward,     \
     launchers<T>::avg_pool, launchers<T>::avg_pool_backward}
const nn_table tables[4] = {ROW(__half), ROW(__nv_bfloat16), ROW(float), ROW(double)};

const nn_table *table_for(int dtype)
{
    switch (dtype) {
    case WEFT_FLOAT16: return &tables[0];
    case WEFT_BFLOAT16: return &tables[1];
    case WEFT_FLOAT32: return &tables[2];
    case WEFT_FLOAT64: return &tables[3];
    default: return nullptr;
    }
}

int unsupported(const char *what, int dtype)
{
    return weft_set_error(WEFT_EDTYPE, WFC_BACKEND ": %s has no kernel for dtype %s", what,
                          weft_dtype_name((weft_dtype)dtype));
}

} // namespace

extern "C" bool wfc_nn_supported(int dtype)
{
    return table_for(dtype) != nullptr;
}

extern "C" int wfc_softmax(void *stream, bool log_form, int dtype, void *out, const void *x,
                           int64_t nrows, int64_t len, const wfc_geometry *rows, int64_t step_out,
                           int64_t step_x)
{
    const nn_table *t = table_for(dtype);
    if (!t)
        return unsupported("softmax", dtype);
    if (nrows == 0 || len == 0)
        return 0;
    t->softmax((cudaStream_t)stream, log_form, out, x, nrows, len, *rows, step_out, step_x);
    return launched("softmax");
}

extern "C" int wfc_softmax_backward(void *stream, bool log_form, int dtype, void *gin,
                                    const void *g, const void *y, int64_t nrows, int64_t len,
                                    const wfc_geometry *rows, int64_t step_gin, int64_t step_g,
                                    int64_t step_y)
{
    const nn_table *t = table_for(dtype);
    if (!t)
        return unsupported("softmax backward", dtype);
    if (nrows == 0 || len == 0)
        return 0;
    t->softmax_backward((cudaStream_t)stream, log_form, gin, g, y, nrows, len, *rows, step_gin,
                        step_g, step_y);
    return launched("softmax backward");
}

extern "C" int wfc_nll(void *stream, int dtype, void *loss, void *weight, const void *x,
                       const int64_t *target, const void *w, int64_t n, int64_t c,
                       int64_t ignore_index, unsigned long long *bad)
{
    const nn_table *t = table_for(dtype);
    if (!t)
        return unsupported("nll_loss", dtype);
    if (n == 0)
        return 0;
    t->nll((cudaStream_t)stream, loss, weight, x, target, w, n, c, ignore_index, bad);
    return launched("nll_loss");
}

extern "C" int wfc_nll_backward(void *stream, int dtype, void *gin, const void *g, bool per_sample,
                                const void *total, const int64_t *target, const void *w,
                                int64_t n, int64_t c, int64_t ignore_index)
{
    const nn_table *t = table_for(dtype);
    if (!t)
        return unsupported("nll_loss_backward", dtype);
    if (n == 0)
        return 0;
    t->nll_backward((cudaStream_t)stream, gin, g, per_sample, total, target, w, n, c, ignore_index);
    return launched("nll_loss_backward");
}

extern "C" int wfc_max_pool2d(void *stream, int dtype, void *out, int64_t *idx, const void *x,
                              int64_t planes, int64_t h, int64_t w, int64_t oh, int64_t ow,
                              const wfc_pool2d *p)
{
    const nn_table *t = table_for(dtype);
    if (!t)
        return unsupported("max_pool2d", dtype);
    if (planes * oh * ow == 0)
        return 0;
    t->max_pool((cudaStream_t)stream, out, idx, x, planes, h, w, oh, ow, *p);
    return launched("max_pool2d");
}

extern "C" int wfc_max_pool2d_backward(void *stream, int dtype, void *gin, const void *g,
                                       const int64_t *idx, int64_t planes, int64_t hw, int64_t ohw)
{
    const nn_table *t = table_for(dtype);
    if (!t)
        return unsupported("max_pool2d backward", dtype);
    if (planes * hw == 0)
        return 0;
    t->max_pool_backward((cudaStream_t)stream, gin, g, idx, planes, hw, ohw);
    return launched("max_pool2d backward");
}

extern "C" int wfc_avg_pool2d(void *stream, int dtype, void *out, const void *x, int64_t planes,
                              const wfc_avg_pool *p)
{
    const nn_table *t = table_for(dtype);
    if (!t)
        return unsupported("avg_pool2d", dtype);
    if (planes * p->oh * p->ow == 0)
        return 0;
    t->avg_pool((cudaStream_t)stream, out, x, planes, *p);
    return launched("avg_pool2d");
}

extern "C" int wfc_avg_pool2d_backward(void *stream, int dtype, void *gin, const void *g,
                                       int64_t planes, const wfc_avg_pool *p)
{
    const nn_table *t = table_for(dtype);
    if (!t)
        return unsupported("avg_pool2d backward", dtype);
    if (planes * p->h * p->w == 0)
        return 0;
    t->avg_pool_backward((cudaStream_t)stream, gin, g, planes, *p);
    return launched("avg_pool2d backward");
}
