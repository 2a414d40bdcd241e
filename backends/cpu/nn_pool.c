/* backends/cpu/nn_pool.c — max_pool2d (with indices), avg_pool2d and
 * adaptive_avg_pool2d, and their backward operators.  Input [N, C, H, W] or
 * [C, H, W]; every (n, c) plane is independent, so planes are split over
 * the thread pool.  Indices are int64 positions in the H x W plane, as in
 * PyTorch.  float16/bfloat16 compute in float32. */
#include <stdatomic.h>

#include "nn.h"

typedef enum pool_kind { POOL_MAX, POOL_AVG, POOL_ADAPTIVE } pool_kind;

typedef struct pool_geometry {
    pool_kind kind;
    int64_t planes, H, W, OH, OW;
    int64_t kernel[2], stride[2], padding[2], dilation[2];
    bool count_include_pad;
    int64_t divisor; /* 0: none */
} pool_geometry;

typedef struct pool_job {
    const pool_geometry *g;
    const void *x;      /* forward: the input; backward: grad_output */
    void *out;          /* forward: the output; backward: grad_input */
    int64_t *indices;   /* max: written by the forward, read by the backward */
    atomic_bool bad_index; /* max backward: some plane's index lies outside it */
} pool_job;

/* The window of output (oh, ow) for avg/adaptive: rows [*h0, *h1), columns
 * [*w0, *w1) clipped to the input, and the divisor. */
static double window_of(const pool_geometry *g, int64_t oh, int64_t ow, int64_t *h0, int64_t *h1,
                        int64_t *w0, int64_t *w1)
{
    if (g->kind == POOL_ADAPTIVE) {
        *h0 = oh * g->H / g->OH;
        *h1 = ((oh + 1) * g->H + g->OH - 1) / g->OH;
        *w0 = ow * g->W / g->OW;
        *w1 = ((ow + 1) * g->W + g->OW - 1) / g->OW;
        return (double)((*h1 - *h0) * (*w1 - *w0));
    }
    int64_t hs = oh * g->stride[0] - g->padding[0], ws = ow * g->stride[1] - g->padding[1];
    int64_t he = hs + g->kernel[0], we = ws + g->kernel[1];
    he = he < g->H + g->padding[0] ? he : g->H + g->padding[0];
    we = we < g->W + g->padding[1] ? we : g->W + g->padding[1];
    int64_t pool_size = (he - hs) * (we - ws);
    *h0 = hs > 0 ? hs : 0;
    *w0 = ws > 0 ? ws : 0;
    *h1 = he < g->H ? he : g->H;
    *w1 = we < g->W ? we : g->W;
    if (g->divisor)
        return (double)g->divisor;
    return (double)(g->count_include_pad ? pool_size : (*h1 - *h0) * (*w1 - *w0));
}

/* Max pooling keeps PyTorch's rule everywhere: windows scanned row by row,
 * the first maximum wins, a NaN replaces anything (so the last NaN wins).
 * Windows that lie inside the plane (with unit dilation) need no clipping
 * and start from their first element rather than -inf, which picks the
 * same element; the 2x2 and 3x3 stride-2 windows, the common ones, have
 * loops of their own that the compiler vectorizes: selects rather than
 * branches (which element wins is unpredictable on real data) and a
 * constant stride. */

/* One candidate v at position pos. */
#define MAX_STEP(T, V, POS)                                                                \
    do {                                                                                   \
        const T v_ = (V);                                                                  \
        const int take_ = (v_ > best) | (v_ != v_);                                        \
        best = take_ ? v_ : best;                                                          \
        at = take_ ? (POS) : at;                                                           \
    } while (0)

/* n outputs of stride-2 windows whose first rows start at r0 (r1, r2 the
 * next rows), r0[0] being element `base` of the plane. */
#define DEFINE_MAX_ROWS(NAME, T)                                                           \
    static inline void max_2x2_row_##NAME(const T *restrict r0, int64_t base, int64_t W,   \
                                          int64_t n, T *restrict y, int64_t *restrict ind) \
    {                                                                                      \
        const T *restrict r1 = r0 + W;                                                     \
        for (int64_t ow = 0; ow < n; ow++) {                                               \
            const int64_t c = 2 * ow, o = base + c;                                        \
            T best = r0[c];                                                                \
            int64_t at = o;                                                                \
            MAX_STEP(T, r0[c + 1], o + 1);                                                 \
            MAX_STEP(T, r1[c], o + W);                                                     \
            MAX_STEP(T, r1[c + 1], o + W + 1);                                             \
            y[ow] = best;                                                                  \
            ind[ow] = at;                                                                  \
        }                                                                                  \
    }                                                                                      \
    static void max_3x3_row_##NAME(const T *restrict r0, int64_t base, int64_t W,          \
                                   int64_t n, T *restrict y, int64_t *restrict ind)        \
    {                                                                                      \
        const T *restrict r1 = r0 + W, *restrict r2 = r0 + 2 * W;                          \
        for (int64_t ow = 0; ow < n; ow++) {                                               \
            const int64_t c = 2 * ow, o = base + c;                                        \
            T best = r0[c];                                                                \
            int64_t at = o;                                                                \
            MAX_STEP(T, r0[c + 1], o + 1);                                                 \
            MAX_STEP(T, r0[c + 2], o + 2);                                                 \
            MAX_STEP(T, r1[c], o + W);                                                     \
            MAX_STEP(T, r1[c + 1], o + W + 1);                                             \
            MAX_STEP(T, r1[c + 2], o + W + 2);                                             \
            MAX_STEP(T, r2[c], o + 2 * W);                                                 \
            MAX_STEP(T, r2[c + 1], o + 2 * W + 1);                                         \
            MAX_STEP(T, r2[c + 2], o + 2 * W + 2);                                         \
            y[ow] = best;                                                                  \
            ind[ow] = at;                                                                  \
        }                                                                                  \
    }                                                                                      \
    /* output (oh, ow), its window clipped to the plane */                                \
    static void max_one_##NAME(const pool_geometry *g, const T *x, int64_t oh, int64_t ow, \
                               T *y, int64_t *ind)                                         \
    {                                                                                      \
        int64_t h = oh * g->stride[0] - g->padding[0];                                     \
        int64_t w = ow * g->stride[1] - g->padding[1];                                     \
        int64_t hend = h + (g->kernel[0] - 1) * g->dilation[0] + 1;                        \
        int64_t wend = w + (g->kernel[1] - 1) * g->dilation[1] + 1;                        \
        hend = hend < g->H ? hend : g->H;                                                  \
        wend = wend < g->W ? wend : g->W;                                                  \
        while (h < 0)                                                                      \
            h += g->dilation[0];                                                           \
        while (w < 0)                                                                      \
            w += g->dilation[1];                                                           \
        T best = -INFINITY;                                                                \
        int64_t at = h * g->W + w;                                                         \
        for (int64_t ih = h; ih < hend; ih += g->dilation[0])                              \
            for (int64_t iw = w; iw < wend; iw += g->dilation[1]) {                        \
                T v = x[ih * g->W + iw];                                                   \
                if (v > best || v != v) {                                                  \
                    best = v;                                                              \
                    at = ih * g->W + iw;                                                   \
                }                                                                          \
            }                                                                              \
        *y = best;                                                                         \
        *ind = at;                                                                         \
    }                                                                                      \
    /* outputs [ow0, ow1) of row oh, whose windows lie inside the plane */                \
    static void max_inside_##NAME(const pool_geometry *g, const T *x, int64_t oh,          \
                                  int64_t ow0, int64_t ow1, T *y, int64_t *ind)            \
    {                                                                                      \
        const int64_t W = g->W, KH = g->kernel[0], KW = g->kernel[1], sw = g->stride[1];   \
        const int64_t base = (oh * g->stride[0] - g->padding[0]) * W + ow0 * sw - g->padding[1]; \
        if (sw == 2 && KH == 2 && KW == 2) {                                               \
            max_2x2_row_##NAME(x + base, base, W, ow1 - ow0, y + ow0, ind + ow0);          \
            return;                                                                        \
        }                                                                                  \
        if (sw == 2 && KH == 3 && KW == 3) {                                               \
            max_3x3_row_##NAME(x + base, base, W, ow1 - ow0, y + ow0, ind + ow0);          \
            return;                                                                        \
        }                                                                                  \
        for (int64_t ow = ow0; ow < ow1; ow++) {                                           \
            const int64_t o = base + (ow - ow0) * sw;                                      \
            T best = x[o];                                                                 \
            int64_t at = o;                                                                \
            for (int64_t kh = 0; kh < KH; kh++)                                            \
                for (int64_t kw = kh == 0 ? 1 : 0; kw < KW; kw++)                          \
                    MAX_STEP(T, x[o + kh * W + kw], o + kh * W + kw);                      \
            y[ow] = best;                                                                  \
            ind[ow] = at;                                                                  \
        }                                                                                  \
    }                                                                                      \
    /* 2x2 stride 2 unpadded, undilated: the CNN's pool, 7 or 14 outputs a row,            \
     * so one loop over the plane's row pairs without the general per-row                  \
     * set-up; only ceil_mode's clipped last row and column go one by one */               \
    static void max_2x2_plane_##NAME(const pool_geometry *g, const T *x, T *y, int64_t *ind) \
    {                                                                                      \
        const int64_t W = g->W, OH = g->OH, OW = g->OW;                                    \
        const int64_t fh = g->H / 2 < OH ? g->H / 2 : OH, fw = W / 2 < OW ? W / 2 : OW;    \
        for (int64_t oh = 0; oh < OH; oh++, y += OW, ind += OW) {                          \
            const int64_t from = oh < fh ? fw : 0;                                         \
            if (oh < fh)                                                                   \
                max_2x2_row_##NAME(x + 2 * oh * W, 2 * oh * W, W, fw, y, ind);             \
            for (int64_t ow = from; ow < OW; ow++)                                         \
                max_one_##NAME(g, x, oh, ow, y + ow, ind + ow);                            \
        }                                                                                  \
    }                                                                                      \
    static void max_plane_##NAME(const pool_geometry *g, const T *x, T *y, int64_t *ind)  \
    {                                                                                      \
        const int64_t KH = g->kernel[0], KW = g->kernel[1];                                \
        const int64_t sh = g->stride[0], sw = g->stride[1];                                \
        const int64_t ph = g->padding[0], pw = g->padding[1];                              \
        const bool dense = g->dilation[0] == 1 && g->dilation[1] == 1;                     \
        if (dense && KH == 2 && KW == 2 && sh == 2 && sw == 2 && ph == 0 && pw == 0) {     \
            max_2x2_plane_##NAME(g, x, y, ind);                                            \
            return;                                                                        \
        }                                                                                  \
        /* the columns whose windows are inside: ow*sw - pw >= 0 and          \
         * ow*sw - pw + KW <= W */                                                         \
        int64_t lo = (pw + sw - 1) / sw;                                                   \
        int64_t hi = g->W - KW + pw >= 0 ? (g->W - KW + pw) / sw + 1 : 0;                  \
        lo = lo < g->OW ? lo : g->OW;                                                      \
        hi = hi < g->OW ? hi : g->OW;                                                      \
        hi = hi > lo ? hi : lo;                                                            \
        for (int64_t oh = 0; oh < g->OH; oh++, y += g->OW, ind += g->OW) {                 \
            const int64_t hs = oh * sh - ph;                                               \
            const bool inside = dense && hs >= 0 && hs + KH <= g->H;                       \
            const int64_t a = inside ? lo : g->OW, b = inside ? hi : g->OW;                \
            for (int64_t ow = 0; ow < a; ow++)                                             \
                max_one_##NAME(g, x, oh, ow, y + ow, ind + ow);                            \
            if (b > a)                                                                     \
                max_inside_##NAME(g, x, oh, a, b, y, ind);                                 \
            for (int64_t ow = b; ow < g->OW; ow++)                                         \
                max_one_##NAME(g, x, oh, ow, y + ow, ind + ow);                            \
        }                                                                                  \
    }
DEFINE_MAX_ROWS(float32, float)
DEFINE_MAX_ROWS(float64, double)

#define DEFINE_POOL(NAME, T)                                                               \
    static void pool_forward_##NAME(int64_t begin, int64_t end, void *ctx)                 \
    {                                                                                      \
        const pool_job *j = ctx;                                                           \
        const pool_geometry *g = j->g;                                                     \
        if (g->kind == POOL_MAX) {                                                         \
            for (int64_t p = begin; p < end; p++)                                          \
                max_plane_##NAME(g, (const T *)j->x + p * g->H * g->W,                     \
                                 (T *)j->out + p * g->OH * g->OW,                          \
                                 j->indices + p * g->OH * g->OW);                          \
            return;                                                                        \
        }                                                                                  \
        for (int64_t p = begin; p < end; p++) {                                            \
            const T *x = (const T *)j->x + p * g->H * g->W;                                \
            T *y = (T *)j->out + p * g->OH * g->OW;                                        \
            for (int64_t oh = 0; oh < g->OH; oh++)                                         \
                for (int64_t ow = 0; ow < g->OW; ow++) {                                   \
                    int64_t h0, h1, w0, w1;                                                \
                    double div = window_of(g, oh, ow, &h0, &h1, &w0, &w1), sum = 0;        \
                    for (int64_t ih = h0; ih < h1; ih++)                                   \
                        for (int64_t iw = w0; iw < w1; iw++)                               \
                            sum += (double)x[ih * g->W + iw];                              \
                    y[oh * g->OW + ow] = h0 < h1 && w0 < w1 ? (T)(sum / div) : (T)0;       \
                }                                                                          \
        }                                                                                  \
    }                                                                                      \
    /* Max backward when every index lies in its window's block of a 2x2                   \
     * tiling of the plane (2x2 stride 2 unpadded windows, as the forward                  \
     * wrote them; the backward is not told the window): the blocks are                    \
     * disjoint, so each element of gi gets at most one gradient, stored                   \
     * rather than added, into rows zeroed pair by pair while they are in                  \
     * cache.  go + 0 keeps the scatter's bits (0 + -0 is +0).  The checks                 \
     * are compares, not branches (which element won is unpredictable).                    \
     * False, having written part of gi, when some index lies outside its                  \
     * block (indices given by hand, or 3x3 stride 2 windows, whose output                 \
     * has the same size): the caller then takes the general scatter.  A                   \
     * row's indices are checked before its stores, so none lands outside                  \
     * the plane. */                                                                       \
    static bool max_back_2x2_##NAME(const pool_geometry *g, const T *go,                   \
                                    const int64_t *ind, T *gi)                             \
    {                                                                                      \
        const int64_t H = g->H, W = g->W, OH = g->OH, OW = g->OW, fw = W / 2 < OW ? W / 2 : OW; \
        bool in = true;                                                                    \
        for (int64_t oh = 0; oh < OH; oh++, go += OW, ind += OW) {                         \
            const int64_t b = 2 * oh * W, end = (2 * oh + 2 < H ? 2 * oh + 2 : H) * W;     \
            const bool two_rows = 2 * oh + 1 < H; /* ceil_mode's last block row: one */    \
            for (int64_t ow = 0; ow < fw; ow++) {                                          \
                const uint64_t d = (uint64_t)ind[ow] - (uint64_t)(b + 2 * ow);             \
                in &= (d < 2) | (two_rows & (d - (uint64_t)W < 2));                        \
            }                                                                              \
            if (fw < OW) { /* ceil_mode: the last block is one column wide */              \
                const uint64_t d = (uint64_t)ind[fw] - (uint64_t)(b + 2 * fw);             \
                in &= (d == 0) | (two_rows & (d == (uint64_t)W));                          \
            }                                                                              \
            if (!in) /* overlapping windows: found in the first rows */                    \
                return false;                                                              \
            for (int64_t i = b; i < end; i++)                                              \
                gi[i] = 0;                                                                 \
            for (int64_t ow = 0; ow < OW; ow++)                                            \
                gi[ind[ow]] = go[ow] + (T)0;                                               \
        }                                                                                  \
        for (int64_t i = (2 * OH < H ? 2 * OH : H) * W; i < H * W; i++) /* rows no window covers */ \
            gi[i] = 0;                                                                     \
        return true;                                                                       \
    }                                                                                      \
    static void pool_backward_##NAME(int64_t begin, int64_t end, void *ctx)                \
    {                                                                                      \
        pool_job *j = ctx; /* not const: a plane with a bad index sets bad_index */        \
        const pool_geometry *g = j->g;                                                     \
        /* the output size of 2x2 stride 2 windows, floor or ceil_mode */                  \
        const bool tiles_2x2 = (g->OH == g->H / 2 || g->OH == (g->H + 1) / 2) &&           \
                               (g->OW == g->W / 2 || g->OW == (g->W + 1) / 2);             \
        for (int64_t p = begin; p < end; p++) {                                            \
            const T *go = (const T *)j->x + p * g->OH * g->OW;                             \
            T *gi = (T *)j->out + p * g->H * g->W;                                         \
            if (g->kind == POOL_MAX && tiles_2x2 &&                                        \
                max_back_2x2_##NAME(g, go, j->indices + p * g->OH * g->OW, gi))            \
                continue;                                                                  \
            if (g->kind == POOL_MAX) { /* never write out of the plane */                  \
                const int64_t *pi = j->indices + p * g->OH * g->OW;                        \
                bool bad = false;                                                          \
                for (int64_t o = 0; o < g->OH * g->OW; o++)                                \
                    bad |= (uint64_t)pi[o] >= (uint64_t)(g->H * g->W);                     \
                if (bad) {                                                                 \
                    atomic_store_explicit(&j->bad_index, true, memory_order_relaxed);      \
                    continue;                                                              \
                }                                                                          \
            }                                                                              \
            for (int64_t i = 0; i < g->H * g->W; i++)                                      \
                gi[i] = 0;                                                                 \
            for (int64_t oh = 0; oh < g->OH; oh++)                                         \
                for (int64_t ow = 0; ow < g->OW; ow++) {                                   \
                    int64_t o = oh * g->OW + ow;                                           \
                    if (g->kind == POOL_MAX) {                                             \
                        gi[j->indices[p * g->OH * g->OW + o]] += go[o];                    \
                        continue;                                                          \
                    }                                                                      \
                    int64_t h0, h1, w0, w1;                                                \
                    T share = (T)(go[o] / window_of(g, oh, ow, &h0, &h1, &w0, &w1));       \
                    for (int64_t ih = h0; ih < h1; ih++)                                   \
                        for (int64_t iw = w0; iw < w1; iw++)                               \
                            gi[ih * g->W + iw] += share;                                   \
                }                                                                          \
        }                                                                                  \
    }
DEFINE_POOL(float32, float)
DEFINE_POOL(float64, double)

typedef void (*range_fn)(int64_t begin, int64_t end, void *ctx);
static const range_fn forward_loops[WEFT_NUM_DTYPES] = {[WEFT_FLOAT32] = pool_forward_float32,
                                                        [WEFT_FLOAT64] = pool_forward_float64};
static const range_fn backward_loops[WEFT_NUM_DTYPES] = {[WEFT_FLOAT32] = pool_backward_float32,
                                                         [WEFT_FLOAT64] = pool_backward_float64};

/* The plane layout of self ([N, C, H, W] or [C, H, W]). */
static int plane_layout(const char *op, const weft_tensor *self, pool_geometry *g)
{
    int nd = weft_tensor_ndim(self);
    if (nd != 3 && nd != 4)
        return weft_set_error(WEFT_ESHAPE, "%s: expected a 3-D or 4-D input, got %d-D", op, nd);
    g->planes = 1;
    for (int d = 0; d < nd - 2; d++)
        g->planes *= weft_tensor_size(self, d);
    g->H = weft_tensor_size(self, nd - 2);
    g->W = weft_tensor_size(self, nd - 1);
    return 0;
}

/* max (kernel, stride, padding, dilation, ceil_mode) and avg (kernel,
 * stride, padding, ceil_mode, count_include_pad, divisor_override) from
 * args[1..]; adaptive (output_size). */
static int pool_geometry_of(const char *op, pool_kind kind, const weft_value *args,
                            const weft_tensor *self, pool_geometry *g)
{
    *g = (pool_geometry){kind};
    g->dilation[0] = g->dilation[1] = 1;
    int rc = plane_layout(op, self, g);
    if (rc < 0)
        return rc;
    /* only the batch may be empty, as torch says: windows over an empty
     * plane are all padding */
    if (g->H == 0 || g->W == 0)
        return weft_set_error(WEFT_ESHAPE, "%s: input planes must not be empty", op);
    if (kind == POOL_ADAPTIVE) {
        int64_t size[2];
        if ((rc = cpu__pair_arg(op, "output_size", &args[1], NULL, 1, size)) < 0)
            return rc;
        g->OH = size[0];
        g->OW = size[1];
        return 0;
    }
    bool ceil_mode;
    if ((rc = cpu__pair_arg(op, "kernel_size", &args[1], NULL, 1, g->kernel)) < 0 ||
        (rc = cpu__pair_arg(op, "stride", &args[2], g->kernel, 1, g->stride)) < 0 ||
        (rc = cpu__pair_arg(op, "padding", &args[3], NULL, 0, g->padding)) < 0)
        return rc;
    if (kind == POOL_MAX) {
        if ((rc = cpu__pair_arg(op, "dilation", &args[4], NULL, 1, g->dilation)) < 0)
            return rc;
        ceil_mode = args[5].u.b;
    } else {
        ceil_mode = args[4].u.b;
        g->count_include_pad = args[5].u.b;
        g->divisor = args[6].tag == WEFT_VALUE_INT ? args[6].u.i : 0;
        if (args[6].tag == WEFT_VALUE_INT && g->divisor == 0)
            return weft_set_error(WEFT_EINVAL, "%s: divisor must be not zero", op);
    }
    if (g->padding[0] > g->kernel[0] / 2 || g->padding[1] > g->kernel[1] / 2)
        return weft_set_error(WEFT_EINVAL, "%s: pad should be at most half of kernel size, but "
                              "got pad=[%lld, %lld] and kernel_size=[%lld, %lld]", op,
                              (long long)g->padding[0], (long long)g->padding[1],
                              (long long)g->kernel[0], (long long)g->kernel[1]);
    /* a window too large to compute with (kernel, dilation or stride near
     * 2^63: found by fuzz_call_boxed as a signed overflow in the output
     * size) is refused: weft_pool_output_size now takes any int64 in 128
     * bits, but the loops' window arithmetic (kernel products, row * stride
     * + tap * dilation) stays in int64; no real input comes close */
    const int64_t big = (int64_t)1 << 40;
    for (int i = 0; i < 2; i++)
        if (g->kernel[i] > big || g->dilation[i] > big || g->stride[i] > big || g->padding[i] > big)
            return weft_set_error(WEFT_EINVAL, "%s: kernel_size, stride, padding and dilation must "
                                  "be at most 2^40, got kernel [%lld, %lld], stride [%lld, %lld], "
                                  "padding [%lld, %lld], dilation [%lld, %lld]", op,
                                  (long long)g->kernel[0], (long long)g->kernel[1],
                                  (long long)g->stride[0], (long long)g->stride[1],
                                  (long long)g->padding[0], (long long)g->padding[1],
                                  (long long)g->dilation[0], (long long)g->dilation[1]);
    g->OH = weft_pool_output_size(g->H, g->kernel[0], g->padding[0], g->stride[0], g->dilation[0],
                                   ceil_mode);
    g->OW = weft_pool_output_size(g->W, g->kernel[1], g->padding[1], g->stride[1], g->dilation[1],
                                   ceil_mode);
    if (g->OH < 1 || g->OW < 1)
        return weft_set_error(WEFT_ESHAPE, "%s: output size is too small (%lldx%lld) for an "
                              "input of %lldx%lld", op, (long long)g->OH, (long long)g->OW,
                              (long long)g->H, (long long)g->W);
    return 0;
}

static void output_shape(const weft_tensor *self, const pool_geometry *g, int64_t *shape, int *nd)
{
    *nd = weft_tensor_ndim(self);
    for (int d = 0; d < *nd - 2; d++)
        shape[d] = weft_tensor_size(self, d);
    shape[*nd - 2] = g->OH;
    shape[*nd - 1] = g->OW;
}

static int64_t grain_of(const pool_geometry *g)
{
    return CPU_GRAIN / (g->H * g->W + g->OH * g->OW + 1) + 1;
}

/* max_pool2d_with_indices, avg_pool2d, adaptive_avg_pool2d (self, ...) */
static int pool_kernel(weft_call *call, void *ctx)
{
    pool_kind kind = *(const pool_kind *)ctx;
    const char *op = weft_op_name(call->op);
    const weft_tensor *self = call->args[0].u.tensor;
    pool_geometry g;
    weft_dtype dt;
    int rc = cpu__check_floating(op, "self", self, &dt);
    if (rc == 0)
        rc = pool_geometry_of(op, kind, call->args, self, &g);
    if (rc < 0)
        return rc;
    int64_t shape[4];
    int nd;
    output_shape(self, &g, shape, &nd);
    weft_tensor *x = NULL, *y = NULL, *ind = NULL;
    if ((rc = cpu__operand(&x, self, dt)) == 0 &&
        (rc = weft_empty(&y, shape, nd, dt, WEFT_DEVICE_CPU)) == 0 && kind == POOL_MAX)
        rc = weft_empty(&ind, shape, nd, WEFT_INT64, WEFT_DEVICE_CPU);
    if (rc == 0) {
        pool_job j = {&g, weft_tensor_data_ptr(x), weft_tensor_data_ptr(y),
                      ind ? weft_tensor_data_ptr(ind) : NULL};
        cpu__parallel_for(0, g.planes, grain_of(&g), forward_loops[dt], &j);
    }
    weft_tensor_release(x);
    if (rc == 0) {
        /* cpu__set_result takes y, whether it succeeds or not (a failed
         * conversion to a float16 self's dtype released it: releasing it
         * here again was a use after free the fuzzer found) */
        rc = cpu__set_result(call, 0, y, weft_tensor_dtype(self));
        y = NULL;
    }
    if (rc == 0 && ind) {
        call->rets[1].tag = WEFT_VALUE_TENSOR;
        call->rets[1].u.tensor = ind;
        return 0;
    }
    weft_tensor_release(y);
    weft_tensor_release(ind);
    return rc;
}

/* max_pool2d(self, ...): the values of max_pool2d_with_indices */
static int max_pool2d_composite(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_value *a = call->args;
    weft_tensor *indices = NULL;
    int rc = weft_max_pool2d_with_indices(&call->rets[0].u.tensor, &indices, a[0].u.tensor,
                                          a[1].u.ints, a[1].len, a[2].u.ints, a[2].len,
                                          a[3].u.ints, a[3].len, a[4].u.ints, a[4].len, a[5].u.b);
    weft_tensor_release(indices);
    if (rc == 0)
        call->rets[0].tag = WEFT_VALUE_TENSOR;
    return rc;
}

/* the backward operators: (grad_output, self, indices) for max,
 * (grad_output, self) for adaptive, (grad_output, self, <the forward's
 * arguments>) for avg */
static int pool_backward_kernel(weft_call *call, void *ctx)
{
    pool_kind kind = *(const pool_kind *)ctx;
    const char *op = weft_op_name(call->op);
    const weft_tensor *grad = call->args[0].u.tensor, *self = call->args[1].u.tensor;
    const weft_tensor *indices = kind == POOL_MAX ? call->args[2].u.tensor : NULL;
    pool_geometry g = {kind};
    weft_dtype dt;
    int rc = cpu__check_floating(op, "grad_output", grad, &dt);
    if (rc == 0)
        rc = cpu__check_cpu(op, "self", self);
    if (rc == 0 && kind != POOL_AVG && (rc = plane_layout(op, self, &g)) == 0) {
        /* max and adaptive: the output size is grad_output's */
        if (indices)
            rc = cpu__check_cpu(op, "indices", indices);
        g.OH = weft_tensor_ndim(grad) >= 2 ? weft_tensor_size(grad, -2) : 0;
        g.OW = weft_tensor_ndim(grad) >= 2 ? weft_tensor_size(grad, -1) : 0;
    } else if (rc == 0) {
        rc = pool_geometry_of(op, kind, call->args + 1, self, &g);
    }
    if (rc < 0)
        return rc;
    int64_t shape[4];
    int nd;
    output_shape(self, &g, shape, &nd);
    bool fits = weft_tensor_ndim(grad) == nd;
    for (int d = 0; fits && d < nd; d++)
        fits = weft_tensor_size(grad, d) == shape[d] &&
               (!indices || (weft_tensor_ndim(indices) == nd && weft_tensor_size(indices, d) == shape[d]));
    if (!fits)
        return weft_set_error(WEFT_ESHAPE, "%s: grad_output%s does not have the pooled shape of "
                              "self", op, indices ? " or indices" : "");
    if (indices && weft_tensor_dtype(indices) != WEFT_INT64)
        return weft_set_error(WEFT_EDTYPE, "%s: indices must be int64", op);
    weft_tensor *go = NULL, *ind = NULL, *gi = NULL;
    if ((rc = cpu__operand(&go, grad, dt)) == 0 && indices)
        rc = cpu__operand(&ind, indices, WEFT_INT64);
    if (rc == 0)
        rc = weft_empty(&gi, weft_tensor_sizes(self), nd, dt, WEFT_DEVICE_CPU);
    if (rc == 0) {
        /* the planes check their own indices before writing (in the pass
         * that reads them, on the pool: a separate serial pass over them was
         * 2% of a CNN epoch); the culprit is looked up only on failure */
        pool_job j = {&g, weft_tensor_data_ptr(go), weft_tensor_data_ptr(gi),
                      ind ? weft_tensor_data_ptr(ind) : NULL, false};
        cpu__parallel_for(0, g.planes, grain_of(&g), backward_loops[dt], &j);
        if (atomic_load(&j.bad_index)) {
            const int64_t *p = weft_tensor_data_ptr(ind);
            const int64_t n = weft_tensor_numel(ind);
            const uint64_t plane = (uint64_t)(g.H * g.W);
            for (int64_t i = 0; rc == 0 && i < n; i++)
                if ((uint64_t)p[i] >= plane)
                    rc = weft_set_error(WEFT_ERANGE, "%s: index %lld is out of range for a "
                                        "%lldx%lld plane", op, (long long)p[i], (long long)g.H,
                                        (long long)g.W);
        }
    }
    weft_tensor_release(go);
    weft_tensor_release(ind);
    if (rc < 0) {
        weft_tensor_release(gi);
        return rc;
    }
    return cpu__set_result(call, 0, gi, weft_tensor_dtype(grad));
}

static const pool_kind max_kind = POOL_MAX, avg_kind = POOL_AVG, adaptive_kind = POOL_ADAPTIVE;
static const weft_kernel_entry pool_entries[] = {
    {"max_pool2d_with_indices", pool_kernel, &max_kind},
    {"avg_pool2d", pool_kernel, &avg_kind},
    {"adaptive_avg_pool2d", pool_kernel, &adaptive_kind},
    {"max_pool2d_with_indices_backward", pool_backward_kernel, &max_kind},
    {"avg_pool2d_backward", pool_backward_kernel, &avg_kind},
    {"adaptive_avg_pool2d_backward", pool_backward_kernel, &adaptive_kind},
};

int cpu__register_nn_pool(weft_registrar *reg)
{
    int rc = weft_register_kernel_table(reg, WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, pool_entries, sizeof pool_entries / sizeof *pool_entries);
    if (rc == 0)
        rc = cpu__register_composite(reg, "max_pool2d", max_pool2d_composite);
    return rc;
}
