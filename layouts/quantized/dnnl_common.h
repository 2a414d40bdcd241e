/* layouts/quantized/dnnl_common.h — what the plugin's oneDNN files share
 * (dnnl_linear.c defines them): the one CPU engine, errors in weft's words,
 * and a one-shot reorder.  Only files built with oneDNN include this. */
#ifndef WEFT_LAYOUTS_QUANTIZED_DNNL_COMMON_H
#define WEFT_LAYOUTS_QUANTIZED_DNNL_COMMON_H

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
/* Makes *pd, the primitive descriptor of op_desc (a convolution or matmul
 * descriptor) with those attributes.  Errors: WEFT_ENOMEM, WEFT_ENOTSUP
 * naming `what` (oneDNN refused it). */
int qt__dnnl_int8_pd(dnnl_primitive_desc_t *pd, const void *op_desc, const qt_dnnl_requant *rq,
                     const float *w_scales, int64_t nout, dnnl_engine_t eng, const char *op,
                     const char *what);
/* quantized_conv2d (dnnl_conv.c). */
int qt__register_dnnl_conv(weft_registrar *reg);

#endif
