/* autograd/formula_helpers.h — internal: what the files of derivative
 * formulas share (autograd/formulas.c, formulas_nn.c, formulas_shape.c): the formula
 * record, the generic Autograd kernel that runs an operator and records its
 * node, and small helpers for saved tensors and input shapes. */
#ifndef WF_FORMULA_HELPERS_H
#define WF_FORMULA_HELPERS_H

#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "dispatch/dispatcher.h"

typedef struct formula formula;
/* Saves what backward needs; called after the operator ran.  old_self is a
 * copy of an in-place operator's self from before the write, or NULL. */
typedef int (*record_fn)(wf_node *node, const weft_call *call, weft_tensor *result,
                         weft_tensor *old_self);

struct formula {
    const char *op;
    const char *node_name;
    wf_backward_fn backward;
    record_fn record;
    uint8_t diff;         /* the differentiable tensor arguments, by argument index */
    bool needs_old_self;  /* in-place forms whose formula reads self's old value */
    /* products (mm, mv, addmm), sum and norm: with a differentiable operand of a plugin
     * layout that requires grad, the layout's kernel records the node, as
     * the formula here would give that operand a dense gradient (a sparse
     * one keeps its pattern, as torch.sparse.mm's) and transpose it, which
     * no plugin layout can; see wa__autograd_kernel */
    bool layout_records;
};

/* The Autograd kernel of every formula (ctx: its formula): runs the
 * operator below the Autograd key, then records the node (autograd/formulas.c). */
int wa__autograd_kernel(weft_call *call, void *ctx);
/* A formula's call (f->layout_records) or cat's with an operand of a
 * plugin layout that requires grad: the layout's kernel runs with grad
 * mode on and records its own node (a custom function).  A layout that
 * records none would drop the gradient silently: refused, naming it
 * (autograd/formulas.c). */
int wa__layout_records_call(weft_call *call, const weft_tensor *operand);
/* Runs the operator below the Autograd key: nested operator calls inside
 * the kernels see the key excluded, as with grad mode off
 * (autograd/formulas.c). */
int wa__autograd_call_below(weft_call *call);
/* Registers the neural-network formulas (autograd/formulas_nn.c). */
void wa__autograd_register_nn(void);
/* Registers the shape and indexing formulas (autograd/formulas_shape.c). */
void wa__autograd_register_shape(void);

/* Registers the pointwise formulas of the CPU backend issue: clamps,
 * activations, binary operators, where, lerp, addcmul... and dropout
 * (autograd/formulas_pointwise.c). */
void wa__autograd_register_pointwise(void);
/* Registers the reductions, cumulative operators and the non-differentiable
 * random samplers (autograd/formulas_reduce.c). */
void wa__autograd_register_reduce(void);

/* Registers the formulas of the NN gradient operators, and provides the
 * differentiable compositions the NN formulas use under create_graph
 * (autograd/formulas_nn_grad.c). */
void wa__autograd_register_nn_grad(void);
int wa__softmax_backward_composite(weft_tensor **out, weft_tensor *g, weft_tensor *y, int64_t dim,
                                   bool log);
int wa__loss_backward_composite(weft_tensor **out, weft_tensor *g, weft_tensor *self,
                                weft_tensor *target, weft_tensor *weight, const char *reduction,
                                int64_t ignore_index, double smoothing, bool logits);

#define TRY(expr)                                                                     \
    do {                                                                              \
        int rc_ = (expr);                                                             \
        if (rc_ < 0)                                                                  \
            return rc_;                                                               \
    } while (0)

/* Packs the sizes and dtypes of some tensors into node->info:
 * [ndim, sizes..., dtype] per tensor. */
static inline int store_shapes(wf_node *n, const weft_tensor *const *ts, int k)
{
    int total = 0;
    for (int i = 0; i < k; i++)
        total += 2 + (ts[i] ? ts[i]->ndim : 0);
    n->info = malloc((size_t)total * sizeof(int64_t));
    if (!n->info)
        return wf__errorf(WEFT_ENOMEM, "out of memory recording a node");
    int64_t *p = n->info;
    for (int i = 0; i < k; i++) {
        int nd = ts[i] ? ts[i]->ndim : 0;
        *p++ = nd;
        for (int d = 0; d < nd; d++)
            *p++ = ts[i]->sizes[d];
        *p++ = ts[i] ? ts[i]->dtype : WEFT_FLOAT32;
    }
    n->n_info = total;
    return 0;
}

static inline void shape_of(const wf_node *n, int k, const int64_t **sizes, int *ndim,
                            weft_dtype *dtype)
{
    const int64_t *p = n->info;
    for (int i = 0; i < k; i++)
        p += 2 + p[0];
    *ndim = (int)p[0];
    *sizes = p + 1;
    *dtype = (weft_dtype)p[1 + p[0]];
}

/* The gradient for input k: broadcasting undone, converted to its dtype. */
static inline int fit_grad(weft_tensor **out, const wf_node *n, int k, weft_tensor *grad)
{
    const int64_t *sizes;
    int ndim;
    weft_dtype dtype;
    shape_of(n, k, &sizes, &ndim, &dtype);
    weft_tensor *summed;
    TRY(wa__sum_to(&summed, grad, sizes, ndim));
    if (summed->dtype == dtype) {
        *out = summed;
        return 0;
    }
    int rc = weft_to_dtype(out, summed, dtype);
    weft_tensor_release(summed);
    return rc;
}

/* Whether backward needs the gradient of differentiable input `edge`. */
/* Appends count integers to node->info after whatever is there. */
static inline int append_info(wf_node *n, const int64_t *values, int count)
{
    if (count == 0)
        return 0;
    int64_t *info = realloc(n->info, (size_t)(n->n_info + count) * sizeof(int64_t));
    if (!info)
        return wf__errorf(WEFT_ENOMEM, "out of memory recording a node");
    memcpy(info + n->n_info, values, (size_t)count * sizeof(int64_t));
    n->info = info;
    n->n_info += count;
    return 0;
}

static inline bool wants(const wf_node *n, int edge)
{
    return n->edges[edge].node != NULL;
}

/* A saved tensor; on failure (freed graph, modified since) *rc gets the
 * error that wa__node_saved set. */
static inline weft_tensor *saved(wf_node *n, int slot, int *rc)
{
    weft_tensor *t = wa__node_saved(n, slot);
    if (!t && *rc == 0)
        *rc = WEFT_EINVAL;
    return t;
}

/* ------------------------------------------------------------ scratch
 * A formula's temporaries.  Every tensor made through SC is held until
 * sc_end releases it, and the first error turns every later SC into a
 * no-op returning NULL, so a formula reads as a list of expressions with
 * one error check at its end.  Never nest SC calls in one expression: the
 * pending slot is shared. */
#define SC_MAX 40
typedef struct scratch {
    weft_tensor *held[SC_MAX];
    int n;
    int rc;
    weft_tensor *pending;
} scratch;

static inline weft_tensor **sc_slot(scratch *s)
{
    s->pending = NULL;
    return &s->pending;
}

static inline weft_tensor *sc_hold(scratch *s, int rc)
{
    weft_tensor *t = s->pending;
    s->pending = NULL;
    if (rc < 0 || !t) {
        weft_tensor_release(t);
        if (s->rc == 0)
            s->rc = rc < 0 ? rc : wf__errorf(WEFT_EINVAL, "internal error: a formula step gave no tensor");
        return NULL;
    }
    if (s->n == SC_MAX) {
        weft_tensor_release(t);
        s->rc = wf__errorf(WEFT_ENOMEM, "internal error: a formula used too many temporaries");
        return NULL;
    }
    s->held[s->n++] = t;
    return t;
}

#define SC(s, fn, ...) sc_hold((s), (s)->rc < 0 ? (s)->rc : fn(sc_slot(s), __VA_ARGS__))

/* Hands t (held by s) to the caller: the gradient of input k, broadcasting
 * undone and converted to k's dtype, when backward wants it. */
static inline void sc_grad(scratch *s, const wf_node *n, weft_tensor **gi, int edge, int k,
                           weft_tensor *t)
{
    if (s->rc == 0 && t && wants(n, edge))
        s->rc = fit_grad(&gi[edge], n, k, t);
}

static inline int sc_end(scratch *s)
{
    while (s->n > 0)
        weft_tensor_release(s->held[--s->n]);
    return s->rc;
}

/* A 0-d tensor of value with t's dtype and device (it broadcasts). */
static inline int wa__scalar_like(weft_tensor **out, const weft_tensor *t, double value)
{
    return weft_full(out, NULL, 0, value, (weft_dtype)t->dtype, t->device);
}

/* bool mask -> t's dtype */
static inline int wa__as_dtype_of(weft_tensor **out, const weft_tensor *mask, const weft_tensor *t)
{
    return weft_to_dtype(out, mask, (weft_dtype)t->dtype);
}

/* ------------------------------------------------------------ records by argument
 * record_args (formulas_pointwise.c) packs, for a call of nargs arguments:
 * the shape of every argument (a non-tensor's as an empty shape), then per
 * argument its tag and 64 bits (a number as a double, an int, a bool, a
 * list of dims as a bit mask over self's dims, None as the tag alone). */
int wa__record_args(wf_node *n, const weft_call *call, weft_tensor *old_self, unsigned save);

static inline const int64_t *arg_slot(const wf_node *n, int i)
{
    const int64_t *p = n->info;
    int nargs = (int)n->info[n->n_info - 1];
    for (int k = 0; k < nargs; k++)
        p += 2 + p[0];
    return p + 2 * i;
}

static inline bool arg_is_none(const wf_node *n, int i)
{
    return arg_slot(n, i)[0] == WEFT_VALUE_NONE;
}

static inline double arg_num(const wf_node *n, int i)
{
    const int64_t *v = arg_slot(n, i);
    if (v[0] == WEFT_VALUE_DOUBLE) {
        double d;
        memcpy(&d, &v[1], sizeof d);
        return d;
    }
    return (double)v[1];
}

static inline int64_t arg_int(const wf_node *n, int i)
{
    return arg_slot(n, i)[1];
}

#endif
