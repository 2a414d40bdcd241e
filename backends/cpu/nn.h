/* backends/cpu/nn.h — what the CPU plugin's neural-network files (nn_*.c)
 * share: the compute dtype of a floating operand, contiguous operands,
 * list and reduction arguments, and each file's registration. */
#ifndef WEFT_BACKENDS_CPU_NN_H
#define WEFT_BACKENDS_CPU_NN_H

#include "cpu.h"

/* The dtype a kernel computes in: float64 for float64, float32 for float32,
 * float16 and bfloat16; WEFT_DTYPE_UNSET for the rest (not supported). */
weft_dtype cpu__compute_dtype(weft_dtype dtype);
/* t as a contiguous tensor of dtype: t itself (a new reference) when it
 * already is one, else a converted copy. */
int cpu__operand(weft_tensor **out, const weft_tensor *t, weft_dtype dtype);
/* Checks that t is a floating CPU tensor; *compute gets its compute dtype. */
int cpu__check_floating(const char *op, const char *arg, const weft_tensor *t,
                       weft_dtype *compute);
/* Puts result, converted to dtype when it is not, into call->rets[i];
 * consumes the reference to result either way. */
int cpu__set_result(weft_call *call, int i, weft_tensor *result, weft_dtype dtype);

/* An int[] argument of one or two entries as a pair (one entry stands for
 * both dims).  With an empty list *pair is `empty` when given (stride of
 * pooling defaults to the kernel size), else it is an error.  Each value
 * must be at least min. */
int cpu__pair_arg(const char *op, const char *name, const weft_value *v, const int64_t *empty,
                 int64_t min, int64_t pair[2]);

typedef enum nn_reduction { NN_NONE, NN_MEAN, NN_SUM } nn_reduction;
/* 'none', 'mean' or 'sum'; anything else is WEFT_EINVAL. */
int cpu__reduction_arg(const char *op, const weft_value *v, nn_reduction *out);
/* Applies a reduction to an elementwise loss (used by the composite losses). */
int cpu__reduce(weft_tensor **out, weft_tensor *loss, nn_reduction reduction);

/* Registration of a composite (written with weft operators) for op. */
int cpu__register_composite(weft_registrar *reg, const char *op, weft_kernel_fn fn);

int cpu__register_nn_linear(weft_registrar *reg);
int cpu__register_nn_softmax(weft_registrar *reg);
int cpu__register_nn_loss(weft_registrar *reg);
int cpu__register_nn_conv(weft_registrar *reg);
int cpu__register_nn_pool(weft_registrar *reg);
int cpu__register_nn_norm(weft_registrar *reg);
int cpu__register_nn_group_norm(weft_registrar *reg);
int cpu__register_nn_upsample(weft_registrar *reg);
int cpu__register_einsum(weft_registrar *reg);
/* All of the above (plugin.c calls it from init). */
int cpu__register_nn(weft_registrar *reg);

#endif
