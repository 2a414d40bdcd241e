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
/* WFC_LERP: a + alpha (b - a), lerp with a scalar weight; WFC_ATAN2,
 * WFC_FMOD (C's fmod: the dividend's sign) and WFC_POW_TENSOR for
 * floating dtypes only. */
enum { WFC_ADD, WFC_SUB, WFC_MUL, WFC_DIV, WFC_MAXIMUM, WFC_MINIMUM, WFC_THRESHOLD_BACKWARD,
       WFC_LERP, WFC_ATAN2, WFC_FMOD, WFC_POW_TENSOR };
/* comparisons, and the logical operators (nonzero is true), bool out */
enum { WFC_EQ, WFC_NE, WFC_LT, WFC_LE, WFC_GT, WFC_GE, WFC_LOGICAL_AND, WFC_LOGICAL_OR,
       WFC_LOGICAL_XOR };
/* The operators of three tensors (the ternary family), floating or, for
 * addcmul, integer: lerp(a, b, weight c) from the nearer end as the CPU
 * computes it, a + s b c, a + s (b / c). */
enum { WFC_LERP_TENSOR, WFC_ADDCMUL, WFC_ADDCDIV };
/* WFC_AXPB: a * s0 + s1 (the scalar forms of add, sub and mul);
 * WFC_DIV_SCALAR: a / s0. */
/* WFC_LEAKY_RELU: slope s0; WFC_POW: exponent s0; WFC_GELU: s0 = 1 for the
 * tanh approximation; WFC_SOFTPLUS: beta s0, threshold s1; WFC_ELU: alpha
 * s0, scale s1, input_scale s2. */
enum { WFC_NEG, WFC_ABS, WFC_RELU, WFC_EXP, WFC_LOG, WFC_SQRT, WFC_SIGMOID, WFC_TANH, WFC_CLAMP,
       WFC_IDENTITY, WFC_AXPB, WFC_DIV_SCALAR, WFC_RSQRT, WFC_RECIPROCAL, WFC_SIN, WFC_COS,
       WFC_LOG1P, WFC_EXPM1, WFC_ERF, WFC_SILU, WFC_SIGN, WFC_FLOOR, WFC_CEIL, WFC_ROUND,
       WFC_LEAKY_RELU, WFC_POW, WFC_GELU, WFC_SOFTPLUS, WFC_ELU };
/* WFC_FAMILY_COMPARE_SCALAR: a comparison of a tensor with a scalar (the
 * scalar stored in the tensor's dtype first, as the CPU stores it). */
enum { WFC_FAMILY_BINARY, WFC_FAMILY_COMPARE, WFC_FAMILY_UNARY, WFC_FAMILY_WHERE,
       WFC_FAMILY_FILL, WFC_FAMILY_COPY, WFC_FAMILY_COMPARE_SCALAR, WFC_FAMILY_TERNARY };

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
/* s0, s1, s2: clamp's bounds (NaN for none), or the scalars of WFC_AXPB,
 * WFC_DIV_SCALAR, the activations' parameters; unused by the others. */
int wfc_unary(void *stream, int op, int dtype, void *out, const void *a, double s0, double s1,
              double s2, int64_t n, const wfc_geometry *g);
int wfc_compare_scalar(void *stream, int op, int dtype, void *out, const void *a, double s,
                       int64_t n, const wfc_geometry *g);
/* out, a, b, c all of dtype; s: addcmul's and addcdiv's value. */
int wfc_ternary(void *stream, int op, int dtype, void *out, const void *a, const void *b,
                const void *c, double s, int64_t n, const wfc_geometry *g);
int wfc_where(void *stream, int dtype, void *out, const void *cond, const void *a, const void *b,
              int64_t n, const wfc_geometry *g);
int wfc_fill(void *stream, int dtype, void *out, double value, int64_t n, const wfc_geometry *g);
int wfc_copy(void *stream, int dst_dtype, void *out, int src_dtype, const void *src, int64_t n,
             const wfc_geometry *g);

/* The plugin's own tiled matrix product (gemm.cu), for a build without a
 * BLAS library or when asked for (blas.c): c[i] (contiguous [n, m]) =
 * alpha a[i] b[i] + beta c[i] for i < batch, a [n, k] and b [k, m] read
 * through any strides (in elements); c is not read when beta is 0.
 * float16, bfloat16 (float32 accumulation), float32, float64. */
typedef struct wfc_gemm_strides {
    int64_t row_a, col_a, batch_a, row_b, col_b, batch_b;
} wfc_gemm_strides;
int wfc_gemm_tiled(void *stream, int dtype, void *c, const void *a, const void *b, int64_t batch,
                   int64_t n, int64_t k, int64_t m, const wfc_gemm_strides *s, double alpha,
                   double beta);

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
/* bernoulli with a tensor p (contiguous float64, one per element): 1
 * where u < p[i]; wfc_check_probabilities notes the first p outside
 * [0, 1] (or NaN) in bad, as wfc_check_indices does. */
int wfc_bernoulli_tensor(void *stream, int dtype, void *out, const double *p, int64_t n,
                         uint64_t seed, uint64_t offset);
int wfc_check_probabilities(void *stream, const double *p, int64_t n, unsigned long long *bad);
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

/* Writes through repeating indices (scatter.cu), in the CPU's order and
 * without atomics: wfc_scatter_pairs makes pair p (target offset keys[p],
 * source offset from[p]) of the walked shape g (strides[0] the target's
 * with dim's stride used for the index, strides[1] the source's; the index
 * is idx[p], or idx[coordinate along dim] when along_dim); the pairs are
 * sorted stably by key (wfc_radix_sort_pairs) and wfc_scatter_apply
 * combines each run of equal keys in order.  PUT: the last value wins
 * (any dtype, moved as elem-byte words); ADD: target += alpha value;
 * the others as scatter_reduce's reductions, include_self false meaning
 * the first value replaces the target's.  wfc_check_indices: idx[0..n)
 * within [0, size), the first bad position noted in bad (index.cuh). */
enum { WFC_SCATTER_PUT, WFC_SCATTER_ADD, WFC_SCATTER_SUM, WFC_SCATTER_PROD, WFC_SCATTER_MEAN,
       WFC_SCATTER_AMAX, WFC_SCATTER_AMIN };
bool wfc_scatter_supported(int kind, int dtype, size_t elem);
int wfc_check_indices(void *stream, const int64_t *idx, int64_t n, int64_t size,
                      unsigned long long *bad);
int wfc_scatter_pairs(void *stream, uint64_t *keys, int64_t *from, const int64_t *idx, int64_t n,
                      bool along_dim, int dim, int64_t size, const wfc_geometry *g);
int wfc_scatter_apply(void *stream, int kind, int dtype, size_t elem, void *target,
                      const void *src, const uint64_t *keys, const int64_t *from, int64_t n,
                      double alpha, bool include_self);
/* index_put's pairs (scatter.cu).  cols: count rows of `positions`
 * indices, one row per indexed dim of the target (int64, contiguous);
 * wfc_index_wrap_check wraps the negative ones within -sizes[k] in place
 * and notes the first one still outside [0, sizes[k]) at k positions + p
 * in bad; wfc_index_put_pairs makes pair i = p slice + q (p a position, q
 * an element of the slice the rest geometry walks, strides[0] the
 * target's): key sum_k cols[k][p] strides[k] + rest offset of q, from i. */
typedef struct wfc_index_columns {
    int count;
    int64_t positions;
    int64_t sizes[WFC_MAX_DIMS], strides[WFC_MAX_DIMS];
} wfc_index_columns;
int wfc_index_wrap_check(void *stream, int64_t *cols, const wfc_index_columns *c,
                         unsigned long long *bad);
int wfc_index_put_pairs(void *stream, uint64_t *keys, int64_t *from, const int64_t *cols,
                        const wfc_index_columns *c, int64_t slice, const wfc_geometry *rest);
/* A bool/uint8 mask (contiguous bytes) as index columns, its nonzero()
 * in row-major order: wfc_mask_marks sets marks[i] to mask[i] != 0; after
 * wfc_inclusive_sum of them into ids (the last one the nonzero count),
 * wfc_mask_columns writes the coordinates of each set element, dim d of
 * the mask (shape->count dims of shape->sizes, shape->positions elements)
 * at cols[d nonzero + rank]. */
int wfc_mask_marks(void *stream, int64_t *marks, const uint8_t *mask, int64_t n);
int wfc_mask_columns(void *stream, int64_t *cols, const int64_t *ids, const uint8_t *mask,
                     const wfc_index_columns *shape, int64_t nonzero);
/* scatter.c: the n pairs (keys below extent, from) sorted stably by key
 * and combined into target as wfc_scatter_apply does (src: contiguous or
 * addressed by from); keys and from are device int64 tensors of n. */
int wfc_scatter_sorted_apply(weft_tensor *target, weft_tensor *keys, weft_tensor *from,
                             int64_t n, uint64_t extent, const weft_tensor *src, int kind,
                             double alpha, bool include_self);

/* Sorting (sort.cu).  wfc_radix_sort_pairs: CUB's stable radix sort of n
 * (key, value) pairs by the low `bits` bits of the keys; temp NULL asks
 * for the scratch size in *temp_bytes.  wfc_sort_keys: keys[i] of x[i] in
 * the CPU's order (plan.h), pos[i] = i; wfc_sort_row_keys: keys[i] =
 * pos[i] / len; wfc_sort_take: the first k of each sorted row of len,
 * indices within the row and (values non-NULL) the elements of x. */
int wfc_radix_sort_pairs(void *stream, void *temp, size_t *temp_bytes, const uint64_t *keys_in,
                         uint64_t *keys_out, const int64_t *values_in, int64_t *values_out,
                         int64_t n, int bits);
bool wfc_sort_supported(int dtype);
int wfc_sort_keys(void *stream, int dtype, uint64_t *keys, int64_t *pos, const void *x, int64_t n,
                  bool descending);
int wfc_sort_row_keys(void *stream, uint64_t *keys, const int64_t *pos, int64_t n, int64_t len);
int wfc_sort_take(void *stream, size_t elem, void *values, int64_t *indices, const void *x,
                  const int64_t *pos, int64_t nrows, int64_t len, int64_t k);
/* unique (sort.cu), over keys sorted by wfc_radix_sort_pairs with their
 * positions pos: wfc_unique_marks sets marks[i] to 1 where sorted key i
 * starts a group of equal values (each NaN its own group when floating);
 * wfc_inclusive_sum (CUB's scan; temp NULL asks for the scratch size)
 * turns them into group numbers plus one, ids; wfc_unique_gather writes
 * each group's first element of x (moved as elem-byte words) to values,
 * its first sorted position to starts and, inverse non-NULL, each
 * element's group to inverse[pos[i]]; wfc_unique_counts: the size of each
 * of the groups from starts. */
int wfc_unique_marks(void *stream, int64_t *marks, const uint64_t *keys, int64_t n,
                     bool floating);
int wfc_inclusive_sum(void *stream, void *temp, size_t *temp_bytes, const int64_t *in,
                      int64_t *out, int64_t n);
int wfc_unique_gather(void *stream, size_t elem, void *values, int64_t *inverse,
                      int64_t *starts, const void *x, const int64_t *pos, const int64_t *ids,
                      int64_t n);
int wfc_unique_counts(void *stream, int64_t *counts, const int64_t *starts, int64_t groups,
                      int64_t n);

/* Upsampling (upsample.cu) over contiguous planes [planes, ih, iw] ->
 * [planes, oh, ow], from the axis tables of plan.c on the device: per
 * output index the two inputs and weights, per input index the outputs
 * that read it (for the gather-style backward). */
typedef struct wfc_upsample {
    int64_t planes, ih, iw, oh, ow;
    bool linear;
    const int64_t *h0, *h1, *w0, *w1;          /* [oh], [oh], [ow], [ow] */
    const double *hl0, *hl1, *wl0, *wl1;       /* the weights, alike */
    const int64_t *hfirst, *hend, *wfirst, *wend; /* [ih], [ih], [iw], [iw] */
} wfc_upsample;
bool wfc_upsample_supported(bool backward, bool linear, int dtype);
int wfc_upsample_forward(void *stream, int dtype, void *y, const void *x, const wfc_upsample *u);
int wfc_upsample_backward(void *stream, int dtype, void *gx, const void *gy,
                          const wfc_upsample *u);

/* Shape kernels (shape.cu), elements moved as words of `elem` bytes (1,
 * 2, 4 or 8).  wfc_flip_gather: out (contiguous, n elements) from src
 * (already moved to f->offset) through f's signed strides (plan.h);
 * wfc_triangle: zeroes in contiguous [n / (rows cols), rows, cols] data
 * what tril (lower) or triu with this diagonal drops; wfc_scan: each of
 * nrows contiguous rows of len replaced by its running sum (or product),
 * float64 or int64 data only (integers wrap). */
int wfc_flip_gather(void *stream, size_t elem, void *out, const void *src, int64_t n,
                    const wfc_flip *f);
int wfc_triangle(void *stream, size_t elem, void *data, int64_t n, int64_t rows, int64_t cols,
                 int64_t diagonal, bool lower);
int wfc_scan(void *stream, int dtype, void *data, int64_t nrows, int64_t len, bool product);

/* index.c: index as a contiguous int64 tensor on its device (int32
 * widened); any other dtype is WEFT_EDTYPE naming op and the argument. */
int wfc_indices_of(const char *op, const char *arg, const weft_tensor *index, weft_tensor **out);

/* pinned.c: a host-to-device copy staged through the pinned cache,
 * queued on stream without waiting for it (the source may be reused at
 * once); the cache's teardown at unload. */
int wfc_copy_from_host_staged(void *dst, const void *src, size_t bytes, int index, void *stream);
void wfc_pinned_shutdown(void);

/* plugin.c: the calling thread's current stream on a device (NULL: the
 * default stream); kernels launch on it. */
void *wfc_current_stream(int index);

/* Each file lists its operators in a weft_kernel_entry table and registers
 * them for the CUDA device type with the SDK's weft_register_kernel_table
 * (<weft/plugin.h>), which stops at the first error. */

/* Registration, one function per file of kernels. */
int wfc_register_kernels(weft_registrar *reg);
int wfc_register_blas(weft_registrar *reg);
int wfc_register_reduce(weft_registrar *reg);
int wfc_register_nn(weft_registrar *reg);
int wfc_register_random(weft_registrar *reg);
int wfc_register_index(weft_registrar *reg);
int wfc_register_norm(weft_registrar *reg);
int wfc_register_scatter(weft_registrar *reg);
int wfc_register_sort(weft_registrar *reg);
int wfc_register_index_put(weft_registrar *reg);
int wfc_register_upsample(weft_registrar *reg);
int wfc_register_shape(weft_registrar *reg);

/* index.c: the first bad position a check noted in bad (two words, see
 * index.cuh): 1 and *pos when there is one, 0 when none, or an error;
 * and element pos of a contiguous device tensor, read back into *out
 * (its dtype's size). */
int wfc_first_bad(const weft_tensor *bad, int64_t *pos);
/* dim wrapped against nd dims (a 0-d tensor takes 0 and -1), with the CPU
 * backend's message when out of range (WEFT_ERANGE). */
int wfc_wrap_dim(const char *op, int64_t dim, int nd, int *out);
/* A view of t with at least one dim (a 0-d tensor as [1]). */
int wfc_at_least_1d(weft_tensor **out, const weft_tensor *t);
int wfc_read_element(const weft_tensor *t, int64_t pos, void *out);
/* conv.c, built with cuDNN only (WEFT_HAVE_CUDNN) */
int wfc_register_conv(weft_registrar *reg);
void wfc_conv_shutdown(void);
/* norm_cudnn.c, built with cuDNN only: native_batch_norm (p->kind
 * training or inference) and its training backward for a call the plan
 * gave to cuDNN; new tensors in the outputs, or an error and none. */
int wfc_batch_norm_cudnn(const wfc_bn_plan *p, const weft_tensor *input, const weft_tensor *weight,
                         const weft_tensor *bias, weft_tensor *running_mean,
                         weft_tensor *running_var, double momentum, double eps,
                         weft_tensor **out, weft_tensor **save_mean, weft_tensor **save_invstd);
int wfc_batch_norm_backward_cudnn(const wfc_bn_plan *p, const weft_tensor *grad,
                                  const weft_tensor *input, const weft_tensor *weight,
                                  const weft_tensor *save_mean, const weft_tensor *save_invstd,
                                  weft_tensor **grad_input, weft_tensor **grad_weight,
                                  weft_tensor **grad_bias);
void wfc_blas_shutdown(void);

#ifdef __cplusplus
}
#endif

#endif
