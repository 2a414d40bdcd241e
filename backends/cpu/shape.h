/* backends/cpu/shape.h — what the shape and indexing files (shape.c,
 * index.c, sort.c) share: dim wrapping, index operands checked against a
 * size, a walk over the positions of a shape, and each file's
 * registration. */
#ifndef WEFT_BACKENDS_CPU_SHAPE_H
#define WEFT_BACKENDS_CPU_SHAPE_H

#include "cpu.h"

/* dim (negative counts from the end) of a rank-ndim tensor into *out; a 0-d
 * tensor has one dim, as in PyTorch.  WEFT_ERANGE names op and the range. */
int cpu__wrap_dim(const char *op, int64_t dim, int ndim, int *out);

/* A contiguous int64 copy (or new reference) of an index argument: int64
 * and int32 are accepted, anything else is WEFT_EDTYPE naming op and arg. */
int cpu__index_operand(const char *op, const char *arg, const weft_tensor *index,
                       weft_tensor **out);
/* WEFT_ERANGE unless every idx[0..n) is in [0, size): the message names op,
 * the first bad index, the dim and the size.  Called before any write. */
int cpu__check_indices(const char *op, const int64_t *idx, int64_t n, int dim, int64_t size);

/* t itself, or a 1-d view [1] of a 0-d t: the index kernels treat a 0-d
 * tensor as one element along dim 0.  Returns a new reference. */
int cpu__at_least_1d(const weft_tensor *t, weft_tensor **out);

/* Puts a new reference into call->rets[i]. */
static inline void cpu__set_ret(weft_call *call, int i, weft_tensor *t)
{
    call->rets[i].tag = WEFT_VALUE_TENSOR;
    call->rets[i].u.tensor = t;
}

/* A row-major walk over every position of a shape, carrying the element
 * offset of up to three operands (their strides in elements; 0 for a dim
 * an operand does not move along).  pos[] is the current position. */
#define CPU_WALK_OPERANDS 3
typedef struct cpu_walk {
    int ndim, noperands;
    int64_t sizes[WEFT_MAX_DIMS], pos[WEFT_MAX_DIMS];
    int64_t strides[CPU_WALK_OPERANDS][WEFT_MAX_DIMS];
    int64_t offset[CPU_WALK_OPERANDS];
} cpu_walk;

/* Starts a walk over sizes[0..ndim) at position 0 with zero strides. */
static inline void cpu_walk_init(cpu_walk *w, const int64_t *sizes, int ndim, int noperands)
{
    w->ndim = ndim;
    w->noperands = noperands;
    for (int d = 0; d < ndim; d++) {
        w->sizes[d] = sizes[d];
        w->pos[d] = 0;
        for (int k = 0; k < noperands; k++)
            w->strides[k][d] = 0;
    }
    for (int k = 0; k < noperands; k++)
        w->offset[k] = 0;
}

/* Steps to the next position (the last dim moves fastest). */
static inline void cpu_walk_next(cpu_walk *w)
{
    for (int d = w->ndim - 1; d >= 0; d--) {
        if (++w->pos[d] < w->sizes[d]) {
            for (int k = 0; k < w->noperands; k++)
                w->offset[k] += w->strides[k][d];
            return;
        }
        w->pos[d] = 0;
        for (int k = 0; k < w->noperands; k++)
            w->offset[k] -= (w->sizes[d] - 1) * w->strides[k][d];
    }
}

/* index_select of a CPU self along a wrapped dim, with the checks and
 * messages of the operator under op's name (index.c; pad uses it). */
int cpu__index_select(const char *op, const weft_tensor *self, int dim, const weft_tensor *index,
                      weft_tensor **out);

int cpu__register_shape(weft_registrar *reg);
int cpu__register_index(weft_registrar *reg);
int cpu__register_sort(weft_registrar *reg);
int cpu__register_index_write(weft_registrar *reg);

#endif
