/* ops/split_kernels.c — split, split_with_sizes, chunk and unbind: the
 * operators that return Tensor[].  Their pieces are views of the input
 * (narrow, select), which the core makes for any device, so they are
 * composites of the core rather than kernels of each backend.  Their
 * gradient is one node with a piece per output (autograd/formulas_shape.c),
 * not a view record per piece. */
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

#define TRY_RC(expr)                                                                  \
    do {                                                                              \
        int rc_ = (expr);                                                             \
        if (rc_ < 0)                                                                  \
            return rc_;                                                               \
    } while (0)

/* The piece lengths along dim, as split_with_sizes takes them. */
typedef struct piece_plan {
    int count;
    int64_t *lengths; /* malloc'd */
} piece_plan;

static int plan_new(piece_plan *plan, int64_t count, const char *op)
{
    plan->lengths = NULL;
    plan->count = 0;
    if (count > INT32_MAX)
        return wf__errorf(WEFT_EOVERFLOW, "%s: %lld pieces are more than a list can hold", op,
                          (long long)count);
    plan->lengths = wf__malloc((size_t)(count > 0 ? count : 1) * sizeof(int64_t));
    if (!plan->lengths)
        return wf__errorf(WEFT_ENOMEM, "%s: out of memory for %lld pieces", op, (long long)count);
    plan->count = (int)count;
    return 0;
}

/* The input's dim, wrapped; a 0-d tensor has nothing to split. */
static int split_dim(int *dim, const weft_tensor *self, int64_t d, const char *op)
{
    if (self->ndim == 0)
        return wf__errorf(WEFT_ESHAPE, "%s: expected a tensor with at least 1 dimension, got a 0-d tensor",
                          op);
    if (d < INT32_MIN || d > INT32_MAX)
        return wf__errorf(WEFT_EINVAL, "%s: dim %lld is out of range", op, (long long)d);
    return wf__wrap_dim(dim, (int)d, self->ndim, op);
}

/* ceil(a / b) for a >= 0, b > 0, without forming a + b - 1, which
 * overflows int64 for b near 2^63 (split(2**63-1), chunk(2**63-1)). */
static int64_t ceil_div(int64_t a, int64_t b)
{
    return a / b + (a % b != 0);
}

/* Equal pieces of split_size, the last one shorter; one empty piece when
 * both the size and split_size are 0, as torch.split gives. */
static int plan_split(piece_plan *plan, int64_t size, int64_t split_size, const char *op)
{
    if (split_size < 0)
        return wf__errorf(WEFT_EINVAL, "%s: split_size must be non-negative, got %lld", op,
                          (long long)split_size);
    if (split_size == 0 && size > 0)
        return wf__errorf(WEFT_EINVAL,
                          "%s: split_size 0 cannot split a dimension of size %lld", op,
                          (long long)size);
    int64_t count = split_size == 0 ? 1 : ceil_div(size, split_size);
    if (count == 0)
        count = 1;
    int rc = plan_new(plan, count, op);
    for (int i = 0; rc == 0 && i < plan->count; i++) {
        int64_t start = (int64_t)i * split_size;
        plan->lengths[i] = size - start < split_size ? size - start : split_size;
    }
    return rc;
}

/* Makes the pieces as narrow views and hands the list to the call. */
static int emit_pieces(weft_call *call, const weft_tensor *self, int dim, const piece_plan *plan,
                       bool select)
{
    weft_tensor **list = NULL;
    int rc = weft_tensor_list_new(&list, plan->count);
    int64_t start = 0;
    for (int i = 0; rc == 0 && i < plan->count; i++) {
        rc = select ? weft_select(&list[i], self, dim, i)
                    : weft_narrow(&list[i], self, dim, start, plan->lengths[i]);
        start += plan->lengths[i];
    }
    if (rc < 0) {
        weft_tensor_list_free(list, plan->count);
        return rc;
    }
    call->rets[0].tag = WEFT_VALUE_TENSOR_LIST;
    call->rets[0].len = plan->count;
    call->rets[0].u.tensors = list;
    return 0;
}

static int split_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = call->args[0].u.tensor;
    int dim;
    TRY_RC(split_dim(&dim, self, call->args[2].u.i, "split"));
    piece_plan plan = {0, NULL};
    int rc = plan_split(&plan, self->sizes[dim], call->args[1].u.i, "split");
    if (rc == 0)
        rc = emit_pieces(call, self, dim, &plan, false);
    free(plan.lengths);
    return rc;
}

static int split_with_sizes_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = call->args[0].u.tensor;
    const weft_value *sizes = &call->args[1];
    int dim;
    TRY_RC(split_dim(&dim, self, call->args[2].u.i, "split_with_sizes"));
    int64_t total = 0;
    for (int i = 0; i < sizes->len; i++) {
        if (sizes->u.ints[i] < 0)
            return wf__errorf(WEFT_EINVAL, "split_with_sizes: split_sizes[%d] is %lld, which is negative",
                              i, (long long)sizes->u.ints[i]);
        if (__builtin_add_overflow(total, sizes->u.ints[i], &total))
            return wf__errorf(WEFT_EOVERFLOW, "split_with_sizes: the split_sizes overflow");
    }
    if (total != self->sizes[dim])
        return wf__errorf(WEFT_ESHAPE,
                          "split_with_sizes: split_sizes add up to %lld, but dimension %d has size %lld",
                          (long long)total, dim, (long long)self->sizes[dim]);
    piece_plan plan = {0, NULL};
    int rc = plan_new(&plan, sizes->len, "split_with_sizes");
    if (rc == 0) {
        if (sizes->len)
            memcpy(plan.lengths, sizes->u.ints, (size_t)sizes->len * sizeof(int64_t));
        rc = emit_pieces(call, self, dim, &plan, false);
    }
    free(plan.lengths);
    return rc;
}

static int chunk_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = call->args[0].u.tensor;
    int64_t chunks = call->args[1].u.i;
    int dim;
    TRY_RC(split_dim(&dim, self, call->args[2].u.i, "chunk"));
    if (chunks <= 0)
        return wf__errorf(WEFT_EINVAL, "chunk: chunks must be greater than 0, got %lld",
                          (long long)chunks);
    int64_t size = self->sizes[dim];
    piece_plan plan = {0, NULL};
    int rc;
    if (size == 0) {
        /* torch.chunk gives `chunks` empty pieces of an empty dimension */
        rc = plan_new(&plan, chunks, "chunk");
        for (int i = 0; rc == 0 && i < plan.count; i++)
            plan.lengths[i] = 0;
    } else {
        /* torch's split_size: chunks past the size give pieces of 1 */
        rc = plan_split(&plan, size, ceil_div(size, chunks), "chunk");
    }
    if (rc == 0)
        rc = emit_pieces(call, self, dim, &plan, false);
    free(plan.lengths);
    return rc;
}

static int unbind_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = call->args[0].u.tensor;
    int dim;
    TRY_RC(split_dim(&dim, self, call->args[1].u.i, "unbind"));
    piece_plan plan = {0, NULL};
    int rc = plan_new(&plan, self->sizes[dim], "unbind");
    for (int i = 0; rc == 0 && i < plan.count; i++)
        plan.lengths[i] = 1;
    if (rc == 0)
        rc = emit_pieces(call, self, dim, &plan, true);
    free(plan.lengths);
    return rc;
}

void wo__split_kernels_register(void)
{
    static const struct {
        const char *op;
        weft_kernel_fn fn;
    } kernels[] = {
        {"split", split_kernel},
        {"split_with_sizes", split_with_sizes_kernel},
        {"chunk", chunk_kernel},
        {"unbind", unbind_kernel},
    };
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        weft_register_kernel(wd__core_registrar, kernels[i].op, WEFT_KEY_COMPOSITE, 0,
                             kernels[i].fn, NULL, NULL);
}
