/* backends/cpu/conv.h — what the convolution files share: the geometry of
 * one conv2d (nn_conv.c parses and checks it) and the library that runs
 * float32 convolutions (conv_lib.c: oneDNN's primitives or our own
 * im2col + GEMM), chosen by WEFT_CPU_CONV. */
#ifndef WEFT_BACKENDS_CPU_CONV_H
#define WEFT_BACKENDS_CPU_CONV_H

#include "cpu.h"

typedef struct conv_geometry {
    int64_t N, C, H, W;     /* input */
    int64_t OC, KH, KW;     /* weight: [OC, C / groups, KH, KW] */
    int64_t OH, OW;         /* output */
    int64_t stride[2], padding[2], dilation[2], groups;
} conv_geometry;

/* The three passes of a convolution. */
typedef enum cpu_conv_pass {
    CPU_CONV_FORWARD,         /* y = conv(x, w) + bias */
    CPU_CONV_BACKWARD_INPUT,  /* dx from dy and w */
    CPU_CONV_BACKWARD_WEIGHT, /* dw from dy and x */
} cpu_conv_pass;

/* WEFT_CPU_CONV=im2col|onednn|auto, read once at plugin start (init) and
 * forgotten at its end (fini, which also closes oneDNN when this file
 * opened it; the pool is joined before, so no call is in flight). */
void cpu__conv_library_init(void);
void cpu__conv_library_fini(void);
/* Whether the float32 convolution of op with geometry g runs through
 * oneDNN: 1 yes, 0 no (the im2col path), or an error: WEFT_EINVAL for an
 * unknown WEFT_CPU_CONV (whatever the dtype: the setting is refused, not
 * half-applied), WEFT_ENOTSUP when onednn was asked for and oneDNN cannot
 * be opened (the message names the library and why).  Thread-safe: the
 * first call opens oneDNN when the setting wants it, once per plugin
 * lifetime. */
int cpu__conv_library_choose(const char *op, weft_dtype dtype, const conv_geometry *g);
/* One pass of a float32 convolution through oneDNN, the batch cut into
 * pieces over weft's pool (oneDNN's OpenMP runs one thread per piece).
 * Operands are contiguous NCHW / OIHW float32:
 *   forward:         a = x, b = w, bias (or NULL), out = y
 *   backward input:  a = dy, b = w, out = dx
 *   backward weight: a = dy, b = x, out = dw (the pieces' partial sums
 *                    added in an order fixed by the batch size alone).
 * Only after cpu__conv_library_choose returned 1.  Primitives are cached
 * per shape (thread-safe).  Errors: WEFT_ENOMEM, WEFT_ENOTSUP (oneDNN
 * refused these parameters; the message names the pass), both with
 * nothing written that the caller may rely on. */
int cpu__conv_onednn(const char *op, cpu_conv_pass pass, const conv_geometry *g, const float *a,
                     const float *b, const float *bias, float *out);

#endif
