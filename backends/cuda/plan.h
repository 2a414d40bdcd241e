/* backends/cuda/plan.h — the host-side planning of the CUDA kernels, in
 * plain C with no CUDA header: how a strided operand maps onto a cuBLAS
 * call, how broadcast operands collapse into few dimensions, how dims of a
 * reduction are normalised, and how big a grid is.  Kept apart so that
 * tests/test_cuda checks it on machines without a GPU. */
#ifndef WEFT_BACKENDS_CUDA_PLAN_H
#define WEFT_BACKENDS_CUDA_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most dimensions the strided kernels index after collapsing. */
#define WFC_MAX_DIMS 8
/* The most operands one elementwise launch reads or writes (out + 3). */
#define WFC_MAX_OPERANDS 4

/* A strided launch's geometry in elements: operand 0 is the output; every
 * operand is seen in the output's shape (stride 0 along broadcast dims).
 * contiguous: every operand is dense in the same order (ndim <= 1, stride
 * 1), so the kernel indexes linearly without division.  index32: every
 * linear index and every operand's offset fits in 31 bits and no stride
 * is negative, so the kernels divide in 32 bits: a GPU's 64-bit division
 * is a long software routine, and a bias broadcast over a convolution's
 * output (a collapsed [N, C, H*W]) spent most of its time in it. */
typedef struct wfc_geometry {
    int ndim;
    int noperands;
    bool contiguous;
    bool index32;
    /* under index32, each size's divisor as a multiplier and a shift:
     * n / sizes[d] == (umulhi(n, div_mul[d]) + n) >> div_shift[d] for
     * every n < 2^31 (wfc_plan_divisor), a multiply where a division was */
    uint32_t div_mul[WFC_MAX_DIMS];
    uint8_t div_shift[WFC_MAX_DIMS];
    int64_t sizes[WFC_MAX_DIMS];
    int64_t strides[WFC_MAX_OPERANDS][WFC_MAX_DIMS];
} wfc_geometry;

/* Fills g from the output's sizes (nd of them, up to 64) and each operand's
 * broadcast strides (strides[k][d], aligned with sizes), then collapses:
 * size-1 dims go, and a dim merges with the next inner one when every
 * operand steps across it as one run.  Returns 0, or -1 when more than
 * WFC_MAX_DIMS dims remain (the caller says so). */
int wfc_plan_geometry(wfc_geometry *g, const int64_t *sizes, int nd, int noperands,
                      const int64_t (*strides)[64]);

/* The multiplier and shift that divide by d (1 <= d < 2^31) for dividends
 * below 2^31, as above: shift the least s with 2^s >= d, multiplier
 * floor(2^32 (2^s - d) / d) + 1 (Granlund and Montgomery's method). */
void wfc_plan_divisor(uint32_t d, uint32_t *mul, uint8_t *shift);

/* The strides of an operand (sizes osz, strides ost, ond dims) seen in an
 * output shape of nd dims (right-aligned; 0 where it is broadcast). */
void wfc_broadcast_strides(int64_t *out, const int64_t *osz, const int64_t *ost, int ond,
                           const int64_t *sizes, int nd);

/* Grid size for n elements with `threads` per block: enough blocks to
 * cover n once, at most max_blocks (the kernels are grid-stride loops). */
unsigned wfc_plan_blocks(int64_t n, unsigned threads, unsigned max_blocks);

/* One operand of a row-major product C[m,n] = A[m,k] B[k,n], as cuBLAS
 * (column-major) takes it when we compute C^T = B^T A^T.  For a logical
 * row-major matrix of rows x cols with strides (s0, s1): trans false means
 * the memory read column-major with leading dim ld is already the
 * transpose cuBLAS needs (rows contiguous); true means it is the matrix
 * itself (columns contiguous, a transposed view) and cuBLAS transposes it.
 * Size-1 dims accept any stride.  Returns 0, or -1 when neither layout fits
 * (the caller makes the operand contiguous first). */
typedef struct wfc_gemm_operand {
    bool trans;
    int64_t ld;
} wfc_gemm_operand;
int wfc_plan_gemm_operand(wfc_gemm_operand *op, int64_t rows, int64_t cols, int64_t s0,
                          int64_t s1);

/* Normalises a reduction's dim list against ndim dims: negative dims wrap,
 * a dim out of range or repeated is an error (message into err), none
 * given (n == 0 or dims NULL) means all.  mask[d] is set for each reduced
 * dim.  A 0-d input accepts dims 0 and -1, as torch does.  Returns 0 or -1. */
int wfc_plan_reduce_dims(bool *mask, int ndim, const int64_t *dims, int n, char *err,
                         int errlen);

/* How a reduction of nred elements into each of nout outputs is cut:
 * *chunks pieces of *chunk_len per output, reduced by one block each, then
 * the pieces of each output by one more launch when *chunks > 1.  From the
 * shape alone, so results never depend on the GPU. */
void wfc_plan_reduce_split(int64_t nout, int64_t nred, int64_t *chunks, int64_t *chunk_len);

/* A 2-D pooling window: kernel, stride, padding, dilation per axis. */
typedef struct wfc_pool2d {
    int kh, kw, sh, sw, ph, pw, dh, dw;
} wfc_pool2d;

/* Reads torch's max_pool2d arguments (lists of 1 or 2; an empty stride
 * means the kernel size) and checks them as torch does: positive kernel,
 * stride and dilation, padding at most half the kernel.  Returns 0, or -1
 * with the reason in err. */
int wfc_plan_pool2d(wfc_pool2d *p, const int64_t *kernel, int nk, const int64_t *stride, int ns,
                    const int64_t *padding, int np, const int64_t *dilation, int nd, char *err,
                    int errlen);
/* The output length of one axis: weft_pool_output_size (weft/plugin.h),
 * torch's rule; 0 where no window fits. */
int64_t wfc_plan_pool_out(int64_t in, int k, int s, int p, int d, bool ceil_mode);

/* A 2-D convolution's geometry: input [n, c, h, w], weight
 * [oc, c / groups, kh, kw], output [n, oc, oh, ow]. */
typedef struct wfc_conv2d {
    int64_t n, c, h, w, oc, kh, kw, oh, ow;
    int64_t stride[2], padding[2], dilation[2], groups;
} wfc_conv2d;

/* Checks and completes g from the input and weight sizes (4 each) and the
 * lists stride, padding, dilation (1 or 2 entries) and groups, as torch
 * does: positive stride, dilation and groups, padding >= 0, channels that
 * groups divide, a dilated kernel within the padded input.  Returns 0, or
 * -1 with the reason in err. */
int wfc_plan_conv2d(wfc_conv2d *g, const int64_t *input, int input_nd, const int64_t *weight,
                    int weight_nd, const int64_t *stride, int ns, const int64_t *padding, int np,
                    const int64_t *dilation, int nd, int64_t groups, char *err, int errlen);


/* Functions that the kernels and the host (and so the tests) share; nvcc
 * and hipcc (the HIP build of these sources, gpu.h) both compile them for
 * the device. */
#if defined(__CUDACC__) || defined(__HIPCC__)
#define WFC_HOST_DEVICE __host__ __device__
#else
#define WFC_HOST_DEVICE
#endif

/* Sort keys: unsigned 64-bit words whose order is the CPU backend's order
 * of the values (sort.c): NaN above every number and all NaNs equal, -0.0
 * equal to 0.0; descending keys are the complement, so a stable radix sort
 * of them keeps equal values in their order, as the CPU's merge sort does. */
static inline WFC_HOST_DEVICE uint64_t wfc_sort_key_double(double v, bool descending)
{
    union {
        double d;
        uint64_t u;
    } bits;
    uint64_t key;
    if (v != v) {
        key = ~(uint64_t)0;
    } else {
        bits.d = v == 0 ? 0.0 : v;
        key = bits.u >> 63 ? ~bits.u : bits.u | (uint64_t)1 << 63;
    }
    return descending ? ~key : key;
}
static inline WFC_HOST_DEVICE uint64_t wfc_sort_key_int64(int64_t v, bool descending)
{
    uint64_t key = (uint64_t)v ^ (uint64_t)1 << 63;
    return descending ? ~key : key;
}

/* The number of low bits that hold every value 0..max (at least 1): how
 * far a radix sort of such keys must look. */
int wfc_plan_key_bits(uint64_t max);

/* One axis of upsample_nearest2d / upsample_bilinear2d, as the CPU backend
 * computes it (nn_upsample.c): output o reads input i0[o] with weight
 * l0[o] and i1[o] with l1[o] (nearest: i1 = i0, l0 = 1, l1 = 0).  Nearest
 * works in float32 as torch does; bilinear in float32, or in float64 when
 * wide (the float64 dtype).  scale (NULL: none) replaces in / out.  An
 * index is never past in - 1 (a scale at odds with the sizes is clamped,
 * where the CPU would read outside the input). */
void wfc_plan_upsample_axis(int64_t in, int64_t out, bool linear, bool align, const double *scale,
                            bool wide, int64_t *i0, int64_t *i1, double *l0, double *l1);
/* For the gather-style backward: the outputs that read input i are
 * first[i] <= o < end[i] (i0 never decreases with o, and an output reads i
 * only as i0 = i, or as i1 = i with i0 = i - 1).  Returns 0, or -1 when i0
 * decreases (not a table from wfc_plan_upsample_axis). */
int wfc_plan_upsample_sources(const int64_t *i0, int64_t out, int64_t in, bool linear,
                              int64_t *first, int64_t *end);

/* conv_transpose2d as the CPU backend checks and computes it: input
 * [N, Cin, H, W], weight [Cin, Cout / groups, kH, kW].  out: the result's
 * sizes; conv: the conv2d whose input gradient it is, over an input of
 * size out, whose output is the input zero-padded by extra_h = op / s rows
 * and extra_w columns at the bottom and right (an output_padding of a
 * stride or more, allowed below the dilation).  Returns 0, -1 (the
 * arguments: WEFT_EINVAL) or -2 (the shapes: WEFT_ESHAPE) with the reason,
 * not prefixed, in err. */
typedef struct wfc_conv_transpose2d {
    int64_t out[4];
    int64_t extra_h, extra_w;
    wfc_conv2d conv;
} wfc_conv_transpose2d;
int wfc_plan_conv_transpose2d(wfc_conv_transpose2d *t, const int64_t *input, int input_nd,
                              const int64_t *weight, int weight_nd, const int64_t *stride, int ns,
                              const int64_t *padding, int np, const int64_t *output_padding,
                              int nop, const int64_t *dilation, int nd, int64_t groups, char *err,
                              int errlen);

/* index_put's layout, as the CPU backend makes it (index_write.c).  The n
 * entries of indices are index tensors (index_nd[i] >= 0: one dim of
 * self each), masks (mask non-NULL and mask[i]: the index_nd[i] >= 1 dims
 * they cover, one column of their nonzero() per dim) or None (index_nd[i]
 * -1: one whole dim, as `:`); self has nd dims (at most WFC_MAX_DIMS),
 * those after the last entry whole too.  count: the columns (index
 * tensors and mask dims), which index the leading `count` dims of self
 * permuted by order; entry[k], mask_dim[k]: the entry of column k and, for
 * a mask, which of its dims (-1 otherwise); lead: the whole dims that come
 * before the broadcast index shape in the indexed result (torch's layout:
 * where the indexed dims were when the entries are adjacent, first when a
 * None separates them).  Returns 0, -1 (WEFT_EINVAL: no entry, or only
 * None) or -2 (WEFT_ESHAPE: too many entries) with the CPU's reason, not
 * prefixed, in err. */
typedef struct wfc_index_put_plan {
    int count, lead;
    int entry[WFC_MAX_DIMS], mask_dim[WFC_MAX_DIMS];
    int64_t order[WFC_MAX_DIMS];
} wfc_index_put_plan;
int wfc_plan_index_put(wfc_index_put_plan *p, int nd, const int *index_nd, const bool *mask,
                       int n, char *err, int errlen);
/* The next step, once values' dtype and the masks are checked: the
 * columns' shapes (count of them, in order; a mask's are [its nonzero
 * count]) broadcast together into shape (shape_nd <=
 * WFC_MAX_DIMS), and the indexed result that values broadcast to: sizes
 * (the permuted self's, nd) give the whole dims, result[result_nd] is
 * whole[0, lead) + shape + whole[lead, ..), and result_order the
 * permutation of it that puts the index shape first (the order in which
 * the CPU reads values).  Returns 0, -2 (WEFT_ESHAPE: shapes that do not
 * broadcast, the CPU's reason in err) or -3 (more than WFC_MAX_DIMS dims
 * in the broadcast shape: not planned here). */
typedef struct wfc_index_shape {
    int shape_nd, result_nd;
    int64_t shape[WFC_MAX_DIMS];
    int64_t result[2 * WFC_MAX_DIMS], result_order[2 * WFC_MAX_DIMS];
} wfc_index_shape;
int wfc_plan_index_shape(wfc_index_shape *s, const wfc_index_put_plan *p, const int64_t *sizes,
                         int nd, const int64_t *const *index_sizes, const int *index_nd,
                         char *err, int errlen);

/* batch_norm's route (norm.c): whether cuDNN's spatial batch norm takes a
 * call, or weft's composed kernels (and, past their checks, the CPU
 * fallback) do.  The element types the decision tells apart: */
typedef enum wfc_bn_type {
    WFC_BN_ABSENT, /* an optional tensor not given */
    WFC_BN_OTHER,  /* not floating point: the CPU's error */
    WFC_BN_HALF,
    WFC_BN_BFLOAT16,
    WFC_BN_FLOAT,
    WFC_BN_DOUBLE,
} wfc_bn_type;

enum wfc_bn_kind { WFC_BN_TRAINING, WFC_BN_INFERENCE, WFC_BN_BACKWARD };

/* One call as the route sees it.  Forward: weight, bias, running_mean,
 * running_var (running_contiguous: both given ones are dense, as cuDNN
 * writes them in place); backward: weight, grad, save_mean, save_invstd.
 * min_eps is CUDNN_BN_MIN_EPSILON of the headers built with. */
typedef struct wfc_bn_query {
    bool backward, training;
    int ndim;
    const int64_t *sizes;
    wfc_bn_type input, weight, bias, running_mean, running_var;
    bool running_contiguous;
    wfc_bn_type grad, save_mean, save_invstd;
    double eps, min_eps;
} wfc_bn_query;

/* cuDNN's view of the call: [n, c, s, 1] (s the product of the dims
 * after the channels), the type of its scale, bias and statistics
 * (float for half inputs), and which of its functions runs. */
typedef struct wfc_bn_plan {
    int64_t n, c, s;
    wfc_bn_type param;
    enum wfc_bn_kind kind;
} wfc_bn_plan;

/* true when cuDNN takes q (p filled); false with *why saying which rule
 * keeps it on the composed path. */
bool wfc_plan_batch_norm(wfc_bn_plan *p, const wfc_bn_query *q, const char **why);

/* flip's gather (shape.cu): out[i] = src[offset + sum_d c_d strides[d]],
 * c the coordinates of i in sizes.  wfc_plan_flip fills it from the
 * source's sizes and strides (nd of them) and the dims to flip: a flipped
 * dim starts at its last element (offset) and steps backwards (a negative
 * stride); size-1 dims go and dims that step as one run merge, as in the
 * elementwise geometry.  Returns 0, or -1 when more than WFC_MAX_DIMS dims
 * remain (the caller hands the call over). */
typedef struct wfc_flip {
    int ndim;
    int64_t offset;
    int64_t sizes[WFC_MAX_DIMS];
    int64_t strides[WFC_MAX_DIMS];
} wfc_flip;
int wfc_plan_flip(wfc_flip *f, const int64_t *sizes, const int64_t *strides, int nd,
                  const bool *flipped);

#ifdef __cplusplus
}
#endif

#endif
