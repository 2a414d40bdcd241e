/* backends/cuda/cuda.h — internal to the CUDA plugin: what the C files and
 * the .cu kernel files share.  The kernel launchers are C functions compiled
 * by nvcc, so the C side never includes CUDA's C++ headers. */
#ifndef WEFT_BACKENDS_CUDA_H
#define WEFT_BACKENDS_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#include "plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Operators of the elementwise families (elementwise.cu). */
/* WFC_LERP: a + alpha (b - a), lerp with a scalar weight */
enum { WFC_ADD, WFC_SUB, WFC_MUL, WFC_DIV, WFC_MAXIMUM, WFC_MINIMUM, WFC_THRESHOLD_BACKWARD,
       WFC_LERP };
enum { WFC_EQ, WFC_NE, WFC_LT, WFC_LE, WFC_GT, WFC_GE };
/* WFC_AXPB: a * s0 + s1 (the scalar forms of add, sub and mul);
 * WFC_DIV_SCALAR: a / s0. */
/* WFC_LEAKY_RELU: slope s0; WFC_POW: exponent s0; WFC_GELU: s0 = 1 for the
 * tanh approximation. */
enum { WFC_NEG, WFC_ABS, WFC_RELU, WFC_EXP, WFC_LOG, WFC_SQRT, WFC_SIGMOID, WFC_TANH, WFC_CLAMP,
       WFC_IDENTITY, WFC_AXPB, WFC_DIV_SCALAR, WFC_RSQRT, WFC_RECIPROCAL, WFC_SIN, WFC_COS,
       WFC_LOG1P, WFC_EXPM1, WFC_ERF, WFC_SILU, WFC_SIGN, WFC_FLOOR, WFC_CEIL, WFC_ROUND,
       WFC_LEAKY_RELU, WFC_POW, WFC_GELU };
enum { WFC_FAMILY_BINARY, WFC_FAMILY_COMPARE, WFC_FAMILY_UNARY, WFC_FAMILY_WHERE,
       WFC_FAMILY_FILL, WFC_FAMILY_COPY };

/* Launchers.  Data pointers are device pointers at element 0 of each
 * operand (operand 0 of g is the output); the launch is asynchronous on
 * `stream` (a cudaStream_t; NULL is the default stream).  Every operand of
 * wfc_binary, wfc_compare's inputs and wfc_unary is of `dtype` (the caller
 * converts first); compare writes bool, where reads a bool condition.
 * Return 0 or a negative WEFT_E* code with the message set (WEFT_EDTYPE
 * when the family has no kernel for the dtype). */
bool wfc_has_kernel(int family, int dtype);
bool wfc_unary_is_float_only(int op);
int wfc_binary(void *stream, int op, int dtype, void *out, const void *a, const void *b,
               double alpha, int64_t n, const wfc_geometry *g);
int wfc_compare(void *stream, int op, int dtype, void *out, const void *a, const void *b,
                int64_t n, const wfc_geometry *g);
/* s0, s1: clamp's bounds (NaN for none), or the scalars of WFC_AXPB and
 * WFC_DIV_SCALAR; unused by the others. */
int wfc_unary(void *stream, int op, int dtype, void *out, const void *a, double s0, double s1,
              int64_t n, const wfc_geometry *g);
int wfc_where(void *stream, int dtype, void *out, const void *cond, const void *a, const void *b,
              int64_t n, const wfc_geometry *g);
int wfc_fill(void *stream, int dtype, void *out, double value, int64_t n, const wfc_geometry *g);
int wfc_copy(void *stream, int dst_dtype, void *out, int src_dtype, const void *src, int64_t n,
             const wfc_geometry *g);

/* Reductions (reduce.cu).  x is read through outer (the kept dims, one
 * row per output, in the output's row-major order) and inner (the reduced
 * dims); the result is written contiguously, in the operator's result
 * dtype (sum/prod of integers: int64; all/any: bool).  partials: device
 * scratch of nrows * chunks 8-byte words when plan.c cuts the rows
 * (wfc_plan_reduce_split), else unused.  scale multiplies mean's sum. */
enum { WFC_RED_SUM, WFC_RED_MEAN, WFC_RED_PROD, WFC_RED_MAX, WFC_RED_MIN, WFC_RED_ALL,
       WFC_RED_ANY };
bool wfc_reduce_supported(int dtype, bool arg);
int wfc_reduce(void *stream, int op, int dtype, void *out, const void *x, int64_t nrows,
               int64_t nred, const wfc_geometry *outer, const wfc_geometry *inner, double scale,
               void *partials);
/* The largest (is_max) or smallest value of each row and its first index
 * (NaN counts as the largest and the smallest); values may be NULL. */
int wfc_arg_reduce(void *stream, bool is_max, int dtype, void *values, int64_t *indices,
                   const void *x, int64_t nrows, int64_t nred, const wfc_geometry *outer,
                   const wfc_geometry *inner);

/* NN kernels (nn.cu), float16/bfloat16/float32/float64.  Softmax rows:
 * rows is the geometry over the dims other than dim (operands: out, x —
 * or gin, g, y for the backward), step_* each operand's stride along dim. */
bool wfc_nn_supported(int dtype);
int wfc_softmax(void *stream, bool log_form, int dtype, void *out, const void *x, int64_t nrows,
                int64_t len, const wfc_geometry *rows, int64_t step_out, int64_t step_x);
int wfc_softmax_backward(void *stream, bool log_form, int dtype, void *gin, const void *g,
                         const void *y, int64_t nrows, int64_t len, const wfc_geometry *rows,
                         int64_t step_gin, int64_t step_g, int64_t step_y);
/* nll_loss per sample of a contiguous [n, c] x; loss may be NULL; bad:
 * two zeroed 8-byte words (flag, the offending target). */
int wfc_nll(void *stream, int dtype, void *loss, void *weight, const void *x,
            const int64_t *target, const void *w, int64_t n, int64_t c, int64_t ignore_index,
            unsigned long long *bad);
int wfc_nll_backward(void *stream, int dtype, void *gin, const void *g, bool per_sample,
                     const void *total, const int64_t *target, const void *w, int64_t n,
                     int64_t c, int64_t ignore_index);
/* max_pool2d over contiguous planes of h x w; idx: flat index in the plane. */
int wfc_max_pool2d(void *stream, int dtype, void *out, int64_t *idx, const void *x,
                   int64_t planes, int64_t h, int64_t w, int64_t oh, int64_t ow,
                   const wfc_pool2d *p);
int wfc_max_pool2d_backward(void *stream, int dtype, void *gin, const void *g,
                            const int64_t *idx, int64_t planes, int64_t hw, int64_t ohw);
/* avg_pool2d and adaptive_avg_pool2d over contiguous planes: the window of
 * an output and its divisor as the CPU backend computes them; backward
 * gathers, for each input element, the outputs whose windows hold it. */
typedef struct wfc_avg_pool {
    int64_t h, w, oh, ow, kh, kw, sh, sw, ph, pw, divisor; /* divisor 0: none */
    bool adaptive, count_include_pad;
} wfc_avg_pool;
int wfc_avg_pool2d(void *stream, int dtype, void *out, const void *x, int64_t planes,
                   const wfc_avg_pool *p);
int wfc_avg_pool2d_backward(void *stream, int dtype, void *gin, const void *g, int64_t planes,
                            const wfc_avg_pool *p);

/* Random numbers (random.cu): the CPU backend's Philox stream, element i
 * from block offset + i/4, word i%4, written contiguously.  uniform: a +
 * (b - a) u with `bits` bits of u; normal: mean a, std b (Box-Muller on
 * word pairs); bernoulli: 1 where u < a. */
enum { WFC_RANDOM_UNIFORM, WFC_RANDOM_NORMAL, WFC_RANDOM_BERNOULLI, WFC_RANDOM_DROPOUT };
bool wfc_random_supported(int kind, int dtype);
int wfc_random_fill(void *stream, int kind, int dtype, void *out, int64_t n, uint64_t seed,
                    uint64_t offset, double a, double b, int bits);
int wfc_dropout(void *stream, int dtype, void *out, const void *x, int64_t n, uint64_t seed,
                uint64_t offset, double keep, double scale);

/* Indexing (index.cu): elements moved as words of `elem` bytes.  take:
 * dst[(o n + j) inner + i] = src[(o len + idx[j]) inner + i]; gather: g has
 * index's sizes and, as operand 0's strides, src's.  bad: two zeroed
 * 8-byte words (flag, an index out of range). */
int wfc_take(void *stream, size_t elem, void *dst, const void *src, const int64_t *idx,
             int64_t outer, int64_t len, int64_t n, int64_t inner, unsigned long long *bad);
int wfc_gather(void *stream, size_t elem, void *dst, const void *src, const int64_t *idx,
               int64_t n, int dim, int64_t size, const wfc_geometry *g, unsigned long long *bad);

/* pinned.c: a host-to-device copy staged through the pinned cache,
 * queued on stream without waiting for it (the source may be reused at
 * once); the cache's teardown at unload. */
int wfc_copy_from_host_staged(void *dst, const void *src, size_t bytes, int index, void *stream);
void wfc_pinned_shutdown(void);

/* plugin.c: the calling thread's current stream on a device (NULL: the
 * default stream); kernels launch on it. */
void *wfc_current_stream(int index);

/* Registration, one function per file of kernels. */
int wfc_register_kernels(weft_registrar *reg);
int wfc_register_blas(weft_registrar *reg);
int wfc_register_reduce(weft_registrar *reg);
int wfc_register_nn(weft_registrar *reg);
int wfc_register_random(weft_registrar *reg);
int wfc_register_index(weft_registrar *reg);
int wfc_register_norm(weft_registrar *reg);
/* conv.c, built with cuDNN only (WEFT_HAVE_CUDNN) */
int wfc_register_conv(weft_registrar *reg);
void wfc_conv_shutdown(void);
void wfc_blas_shutdown(void);

#ifdef __cplusplus
}
#endif

#endif
