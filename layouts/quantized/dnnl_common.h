/* layouts/quantized/dnnl_common.h — what the plugin's oneDNN files share
 * (dnnl_linear.c defines them): the one CPU engine, errors in weft's words,
 * and a one-shot reorder.  Only files built with oneDNN include this. */
#ifndef WEFT_LAYOUTS_QUANTIZED_DNNL_COMMON_H
#define WEFT_LAYOUTS_QUANTIZED_DNNL_COMMON_H

#include <stdint.h>

#include <oneapi/dnnl/dnnl.h>

#include "quantized.h"

/* The process's CPU engine, made on first use.  Errors: WEFT_ENOTSUP. */
int qt__dnnl_engine(dnnl_engine_t *out, const char *op);
/* Sets weft's error for a oneDNN status and returns the code. */
int qt__dnnl_error(const char *op, const char *what, dnnl_status_t st);
/* Copies from (from_md) into to (to_md), converting the layout. */
int qt__dnnl_reorder(const char *op, const dnnl_memory_desc_t *from_md, const void *from,
                     const dnnl_memory_desc_t *to_md, void *to);
/* The requantization both int8 primitives bake in: out = relu?(src_scale *
 * w_scale[j] / dst_scale * acc), with the source's and the destination's
 * zero points; w_scales has nout entries when per_channel (output channel
 * on the weights' dimension 1 of the mask), else 1. */
typedef struct qt_dnnl_requant {
    float src_scale, dst_scale;
    int32_t src_zp, dst_zp;
    bool relu, per_channel;
} qt_dnnl_requant;
/* Output j's requantization scale, in oneDNN's float arithmetic: every
 * path that must write oneDNN's bytes (its primitives, the AVX2 GEMM, an
 * empty product's bias) computes it here. */
static inline float qt__output_scale(float src_scale, float w_scale, float dst_scale)
{
    return src_scale * w_scale / dst_scale;
}
/* An input zero point z folded into a bias in the sum's units: minus z
 * times each output's weight sum (exact in int64; the float sum rounds,
 * which moves an output only where it sat on a half). */
static inline void qt__fold_zero_point(float *b, int64_t z, const int64_t *wsum, int64_t n)
{
    for (int64_t j = 0; z && j < n; j++)
        b[j] -= (float)(z * wsum[j]);
}
/* Makes *pd, the primitive descriptor of op_desc (a convolution or matmul
 * descriptor) with those attributes and a scratchpad the caller passes
 * (DNNL_ARG_SCRATCHPAD, qt__dnnl_scratch).  Errors: WEFT_ENOMEM, WEFT_ENOTSUP
 * naming `what` (oneDNN refused it). */
int qt__dnnl_int8_pd(dnnl_primitive_desc_t *pd, const void *op_desc, const qt_dnnl_requant *rq,
                     const float *w_scales, int64_t nout, dnnl_engine_t eng, const char *op,
                     const char *what);
/* How oneDNN's calls share the CPUs with weft's pool.  Debian's oneDNN
 * runs its primitives on OpenMP threads, a second pool on the same cores
 * whose size is whatever the calling thread's OpenMP setting says (1 in a
 * process where torch set it, the CPU count elsewhere, whatever weft's own
 * thread count).  So the operators cut their rows (linear) or images
 * (conv2d) into pieces, run the pieces on weft's pool (weft_parallel_for)
 * and set OpenMP to one thread on the thread running each piece, as the
 * CPU plugin does with oneDNN's sgemm and convolutions.  Only with fewer
 * rows than threads, or few rows a piece and a weight past a core's L2,
 * does one piece keep more OpenMP threads (threads_each: weft's count),
 * so that oneDNN splits the columns itself. */
typedef struct qt_dnnl_plan {
    int64_t pieces;   /* >= 1 */
    int threads_each; /* OpenMP threads per piece; 0: leave OpenMP as it is */
} qt_dnnl_plan;
/* The plan for `rows` independent rows of `work` multiply-adds in all
 * with a weight of weight_bytes, at weft_get_num_threads() threads.
 * Where oneDNN's threads are not OpenMP's (no omp_set_num_threads beside
 * libdnnl), one piece and threads_each 0. */
qt_dnnl_plan qt__dnnl_plan(int64_t rows, double work, double weight_bytes);
/* Sets the calling thread's OpenMP team size for oneDNN to n (0: leaves
 * it) and returns what qt__dnnl_threads_restore puts back. */
int qt__dnnl_threads(int n);
void qt__dnnl_threads_restore(int before);
/* Builds the primitives of a plan through build_slot(cache, s, rows): slot
 * 0 for total / pieces rows, slot 1 for one more where they do not divide
 * (both made at the OpenMP thread count they run at).  build_slot returns
 * 0, a negative error, or 1 when slot 1 would lay the weights or the output
 * out otherwise than slot 0: then drop(cache) and one piece of every row
 * (*plan says so).  On an error drop(cache) too. */
int qt__dnnl_build_slots(void *cache, int64_t total, qt_dnnl_plan *plan,
                         int (*build_slot)(void *cache, int s, int64_t rows),
                         void (*drop)(void *cache));
/* Runs piece(job, i) for i in [0, pieces): on the calling thread for one
 * piece, else on weft's pool; OpenMP at threads_each on each thread
 * meanwhile.  Returns 0 or the first failing piece's status. */
dnnl_status_t qt__dnnl_run_pieces(int64_t pieces, int threads_each,
                                  dnnl_status_t (*piece)(void *job, int64_t i), void *job);
/* The scratch memory a primitive made by qt__dnnl_int8_pd needs per call,
 * in bytes (its scratchpad is the caller's, so that two threads may run
 * one primitive at once); *md receives its descriptor. */
size_t qt__dnnl_scratch(dnnl_primitive_desc_t pd, dnnl_memory_desc_t *md);
/* The input zero-point fold of quantized_linear and quantized_conv2d:
 * sum_k w_k (x_k - z) = sum_k w_k x_k - z sum_k w_k, so a nonzero input
 * zero point z goes into the bias as minus z times each output channel's
 * weight sum, and oneDNN, given none, runs no compensation in its loop.
 * *sums receives a malloc'd array of the sums of `rows` rows of `per` int8
 * weights each (the packed weight's companion, rebuilt with it); on
 * failure NULL and the error set (WEFT_ENOMEM, naming op). */
int qt__weight_sums(const char *op, const int8_t *w, int64_t rows, int64_t per, int64_t **sums);
/* p rounded up to 64 bytes: buffers handed to oneDNN come from weft's
 * allocator, whose small blocks are malloc's (16-byte aligned); the
 * callers allocate 63 bytes more. */
static inline uint8_t *qt__align64(void *p)
{
    return (uint8_t *)(((uintptr_t)p + 63) & ~(uintptr_t)63);
}
/* quantized_conv2d (dnnl_conv.c). */
int qt__register_dnnl_conv(weft_registrar *reg);

#endif
