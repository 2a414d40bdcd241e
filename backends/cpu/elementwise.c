/* backends/cpu/elementwise.c — the elementwise iterator (broadcasting,
 * strided and aliased operands, dimension coalescing, parallel split) that
 * unary.c and fill.c share, and the binary arithmetic operators built on it:
 * add, sub, mul, div with PyTorch's type promotion, in-place and out= forms. */
#include <math.h>
#include <stdlib.h>

#include "cpu.h"

/* ------------------------------------------------------------ the iterator */

#define MAX_OPERANDS 4 /* the output and up to three inputs */

/* The operands' geometry after broadcasting, reordering and coalescing.
 * Dimension 0 is the innermost: the one the inner loop runs along. */
typedef struct iter {
    int ndim, noperands;
    int64_t numel;
    int64_t sizes[WEFT_MAX_DIMS];
    int64_t strides[WEFT_MAX_DIMS][MAX_OPERANDS]; /* bytes, 0 where broadcast */
    char *data[MAX_OPERANDS];
} iter;

static void iter_swap_dims(iter *it, int a, int b)
{
    int64_t s = it->sizes[a];
    it->sizes[a] = it->sizes[b];
    it->sizes[b] = s;
    for (int k = 0; k < it->noperands; k++) {
        int64_t t = it->strides[a][k];
        it->strides[a][k] = it->strides[b][k];
        it->strides[b][k] = t;
    }
}

/* Whether dim b should run inside dim a: the first operand (output first)
 * that moves along both decides, so the output is walked in memory order
 * and a transposed input does not reorder a freshly allocated output. */
static bool runs_inside(const iter *it, int a, int b)
{
    for (int k = 0; k < it->noperands; k++) {
        int64_t sa = llabs(it->strides[a][k]), sb = llabs(it->strides[b][k]);
        if (sa == 0 || sb == 0 || sa == sb)
            continue;
        return sb < sa;
    }
    return false;
}

/* Merges neighbouring dims that every operand walks as one (a contiguous
 * tensor becomes one dim, so its loop is a single flat run). */
static void iter_coalesce(iter *it)
{
    if (it->ndim <= 1)
        return;
    int cur = 0;
    for (int d = 1; d < it->ndim; d++) {
        bool merge = true;
        for (int k = 0; k < it->noperands && merge; k++)
            merge = it->strides[d][k] == it->strides[cur][k] * it->sizes[cur];
        if (merge) {
            it->sizes[cur] *= it->sizes[d];
            continue;
        }
        cur++;
        if (cur != d) {
            it->sizes[cur] = it->sizes[d];
            memcpy(it->strides[cur], it->strides[d], sizeof it->strides[d]);
        }
    }
    it->ndim = cur + 1;
}

/* operands[0] is the output; the others broadcast to its shape. */
static void iter_init(iter *it, weft_tensor *const *operands, int noperands)
{
    const weft_tensor *out = operands[0];
    int ndim = weft_tensor_ndim(out);
    const int64_t *sizes = weft_tensor_sizes(out);
    it->noperands = noperands;
    it->numel = weft_tensor_numel(out);
    it->ndim = 0;
    for (int k = 0; k < noperands; k++)
        it->data[k] = weft_tensor_data_ptr(operands[k]);
    for (int d = ndim - 1; d >= 0; d--) {
        if (sizes[d] == 1)
            continue; /* a size-1 dim moves nothing */
        int j = it->ndim++;
        it->sizes[j] = sizes[d];
        for (int k = 0; k < noperands; k++) {
            const weft_tensor *t = operands[k];
            int td = d - (ndim - weft_tensor_ndim(t));
            int64_t stride = 0;
            if (td >= 0 && weft_tensor_sizes(t)[td] != 1)
                stride = weft_tensor_strides(t)[td] * (int64_t)weft_dtype_size(weft_tensor_dtype(t));
            it->strides[j][k] = stride;
        }
    }
    for (int i = 1; i < it->ndim; i++)
        for (int j = i; j > 0 && runs_inside(it, j - 1, j); j--)
            iter_swap_dims(it, j - 1, j);
    iter_coalesce(it);
    if (it->ndim == 0) {
        it->ndim = 1;
        it->sizes[0] = 1;
        memset(it->strides[0], 0, sizeof it->strides[0]);
    }
}

typedef struct iter_job {
    const iter *it;
    cpu_loop_fn loop;
    const void *params;
} iter_job;

/* Runs the inner loop over the linear positions [begin, end) of the
 * iteration space, one innermost row (or part of one) per call. */
static void iter_run_range(int64_t begin, int64_t end, void *ctx)
{
    const iter_job *job = ctx;
    const iter *it = job->it;
    int64_t index[WEFT_MAX_DIMS];
    char *ptrs[MAX_OPERANDS];
    int64_t rest = begin;
    for (int d = 0; d < it->ndim; d++) {
        index[d] = rest % it->sizes[d];
        rest /= it->sizes[d];
    }
    for (int k = 0; k < it->noperands; k++) {
        ptrs[k] = it->data[k];
        for (int d = 0; d < it->ndim; d++)
            ptrs[k] += index[d] * it->strides[d][k];
    }
    while (begin < end) {
        int64_t n = it->sizes[0] - index[0];
        if (n > end - begin)
            n = end - begin;
        job->loop(ptrs, it->strides[0], n, job->params);
        begin += n;
        index[0] += n;
        for (int k = 0; k < it->noperands; k++)
            ptrs[k] += n * it->strides[0][k];
        /* carry into the outer dims */
        for (int d = 0; d + 1 < it->ndim && index[d] == it->sizes[d]; d++) {
            index[d] = 0;
            index[d + 1]++;
            for (int k = 0; k < it->noperands; k++)
                ptrs[k] += it->strides[d + 1][k] - it->sizes[d] * it->strides[d][k];
        }
    }
}

/* The bytes [lo, hi) a tensor's elements occupy. */
static void byte_span(const weft_tensor *t, const char **lo, const char **hi)
{
    const char *base = weft_tensor_data_ptr(t);
    int64_t es = (int64_t)weft_dtype_size(weft_tensor_dtype(t)), low = 0, high = 0;
    const int64_t *sizes = weft_tensor_sizes(t), *strides = weft_tensor_strides(t);
    for (int d = 0; d < weft_tensor_ndim(t); d++) {
        int64_t reach = (sizes[d] - 1) * strides[d];
        if (reach < 0)
            low += reach;
        else
            high += reach;
    }
    *lo = base + low * es;
    *hi = base + (high + 1) * es;
}

/* Whether `in`, broadcast to out's shape, puts every element at the same
 * address as out's element of the same index: then writing out[i] after
 * reading in[i] is safe. */
static bool same_elements(const weft_tensor *out, const weft_tensor *in)
{
    if (weft_tensor_data_ptr(out) != weft_tensor_data_ptr(in) ||
        weft_tensor_dtype(out) != weft_tensor_dtype(in))
        return false;
    int nd = weft_tensor_ndim(out), ni = weft_tensor_ndim(in);
    const int64_t *sizes = weft_tensor_sizes(out), *so = weft_tensor_strides(out);
    for (int d = 0; d < nd; d++) {
        if (sizes[d] == 1)
            continue;
        int id = d - (nd - ni);
        if (id < 0 || weft_tensor_sizes(in)[id] == 1 || weft_tensor_strides(in)[id] != so[d])
            return false;
    }
    return true;
}

/* An input that shares memory with the output in any way other than
 * element-for-element must be read from a copy: the loop would otherwise
 * read elements it has already overwritten. */
static bool needs_copy(const weft_tensor *out, const weft_tensor *in)
{
    if (!weft_tensor_shares_storage(out, in) || weft_tensor_numel(in) == 0 ||
        weft_tensor_numel(out) == 0 || same_elements(out, in))
        return false;
    const char *olo, *ohi, *ilo, *ihi;
    byte_span(out, &olo, &ohi);
    byte_span(in, &ilo, &ihi);
    return ilo < ohi && olo < ihi;
}

/* The common case needs no iterator: every operand contiguous with the
 * output's shape is one flat run. */
typedef struct flat_job {
    char *data[MAX_OPERANDS];
    int64_t strides[MAX_OPERANDS]; /* element sizes */
    int noperands;
    cpu_loop_fn loop;
    const void *params;
} flat_job;

static void flat_run_range(int64_t begin, int64_t end, void *ctx)
{
    const flat_job *job = ctx;
    char *ptrs[MAX_OPERANDS];
    for (int k = 0; k < job->noperands; k++)
        ptrs[k] = job->data[k] + begin * job->strides[k];
    job->loop(ptrs, job->strides, end - begin, job->params);
}

static bool same_shape(const weft_tensor *a, const weft_tensor *b)
{
    int nd = weft_tensor_ndim(a);
    return nd == weft_tensor_ndim(b) &&
           memcmp(weft_tensor_sizes(a), weft_tensor_sizes(b), (size_t)nd * sizeof(int64_t)) == 0;
}

static bool all_flat(weft_tensor *const *operands, int n)
{
    for (int k = 0; k < n; k++)
        if (!weft_tensor_is_contiguous(operands[k]) || (k > 0 && !same_shape(operands[0], operands[k])))
            return false;
    return true;
}

static int check_no_internal_overlap(const char *op, const weft_tensor *out)
{
    if (weft_tensor_is_contiguous(out))
        return 0;
    const int64_t *sizes = weft_tensor_sizes(out), *strides = weft_tensor_strides(out);
    for (int d = 0; d < weft_tensor_ndim(out); d++) {
        if (sizes[d] > 1 && strides[d] == 0)
            return weft_set_error(WEFT_EINVAL,
                                  "%s: unsupported operation: more than one element of the "
                                  "written-to tensor refers to a single memory location; "
                                  "clone the tensor first",
                                  op);
    }
    return 0;
}

int cpu__elementwise(const char *op, weft_tensor *out, weft_tensor *const *inputs, int ninputs,
                     cpu_loop_fn loop, const void *params)
{
    if (ninputs + 1 > MAX_OPERANDS)
        return weft_set_error(WEFT_EINTERNAL, "%s: too many operands for the CPU iterator", op);
    int64_t numel = weft_tensor_numel(out);
    if (numel == 0)
        return 0;
    int rc = check_no_internal_overlap(op, out);
    if (rc < 0)
        return rc;
    weft_tensor *operands[MAX_OPERANDS] = {out};
    weft_tensor *copies[MAX_OPERANDS] = {NULL};
    for (int i = 0; i < ninputs && rc == 0; i++) {
        operands[i + 1] = inputs[i];
        if (needs_copy(out, inputs[i])) {
            rc = weft_to_dtype(&copies[i], inputs[i], weft_tensor_dtype(inputs[i]));
            operands[i + 1] = copies[i];
        }
    }
    if (rc == 0 && all_flat(operands, ninputs + 1)) {
        flat_job job = {.noperands = ninputs + 1, .loop = loop, .params = params};
        for (int k = 0; k <= ninputs; k++) {
            job.data[k] = weft_tensor_data_ptr(operands[k]);
            job.strides[k] = (int64_t)weft_dtype_size(weft_tensor_dtype(operands[k]));
        }
        cpu__parallel_for(0, numel, CPU_GRAIN, flat_run_range, &job);
    } else if (rc == 0) {
        iter it;
        iter_init(&it, operands, ninputs + 1);
        iter_job job = {&it, loop, params};
        cpu__parallel_for(0, it.numel, CPU_GRAIN, iter_run_range, &job);
    }
    for (int i = 0; i < ninputs; i++)
        weft_tensor_release(copies[i]);
    return rc;
}

/* ------------------------------------------- broadcasting and the targets */

static const char *input_name(int i)
{
    static const char *const names[] = {"self", "other", "third"};
    return i < 3 ? names[i] : "input";
}

static int broadcast_inputs(const char *op, weft_tensor *const *inputs, int n, int64_t *shape,
                            int *ndim)
{
    *ndim = weft_tensor_ndim(inputs[0]);
    memcpy(shape, weft_tensor_sizes(inputs[0]), (size_t)*ndim * sizeof(int64_t));
    for (int i = 1; i < n; i++) {
        int64_t next[WEFT_MAX_DIMS];
        int nnext;
        const int64_t *b = weft_tensor_sizes(inputs[i]);
        int nb = weft_tensor_ndim(inputs[i]);
        if (nb == *ndim && memcmp(b, shape, (size_t)nb * sizeof(int64_t)) == 0)
            continue; /* the usual case: nothing to broadcast */
        if (weft_broadcast_shapes(next, &nnext, shape, *ndim, b, nb) == 0) {
            memcpy(shape, next, (size_t)nnext * sizeof(int64_t));
            *ndim = nnext;
            continue;
        }
        /* say which dimension disagrees, as PyTorch does */
        char sa[256], sb[256];
        int64_t da = 0, db = 0;
        int dim = 0, nmax = *ndim > nb ? *ndim : nb;
        for (int j = 1; j <= nmax; j++) {
            da = j <= *ndim ? shape[*ndim - j] : 1;
            db = j <= nb ? b[nb - j] : 1;
            if (da != db && da != 1 && db != 1) {
                dim = nmax - j;
                break;
            }
        }
        return weft_set_error(WEFT_ESHAPE,
                              "%s: shapes %s and %s cannot be broadcast: the size of tensor a "
                              "(%lld) must match the size of tensor b (%lld) at non-singleton "
                              "dimension %d",
                              op, cpu__shape_str(sa, sizeof sa, shape, *ndim),
                              cpu__shape_str(sb, sizeof sb, b, nb), (long long)da, (long long)db,
                              dim);
    }
    return 0;
}

int cpu__prepare_target(const char *op, weft_tensor *target, bool resizable,
                        const int64_t *sizes, int ndim, const char *what)
{
    int tnd = weft_tensor_ndim(target);
    bool same = tnd == ndim &&
                memcmp(weft_tensor_sizes(target), sizes, (size_t)ndim * sizeof(int64_t)) == 0;
    if (same)
        return 0;
    if (resizable && weft_tensor_numel(target) == 0)
        return weft_tensor_resize(target, sizes, ndim);
    char st[256], se[256];
    return weft_set_error(WEFT_ESHAPE, "%s: output with shape %s doesn't match the %s shape %s",
                          op, cpu__shape_str(st, sizeof st, weft_tensor_sizes(target), tnd),
                          what,
                          cpu__shape_str(se, sizeof se, sizes, ndim));
}

/* Checks everything that can fail before anything is allocated. */
static int check_map(cpu_mode mode, const cpu_map *m, weft_tensor *target,
                     weft_tensor *const *inputs, int n, int64_t *shape, int *ndim)
{
    int rc = 0;
    if (target)
        rc = cpu__check_cpu(m->op, mode == CPU_OUT ? "out" : "self", target);
    for (int i = 0; i < n && rc == 0; i++)
        rc = cpu__check_cpu(m->op, input_name(i), inputs[i]);
    if (rc == 0)
        rc = broadcast_inputs(m->op, inputs, n, shape, ndim);
    if (rc == 0 && target && !weft_can_cast(m->result_dtype, weft_tensor_dtype(target))) {
        rc = weft_set_error(WEFT_EDTYPE, "%s: result type %s can't be cast to the desired "
                            "output type %s", m->op, weft_dtype_name(m->result_dtype),
                            weft_dtype_name(weft_tensor_dtype(target)));
    }
    if (rc == 0 && target)
        rc = cpu__prepare_target(m->op, target, mode == CPU_OUT, shape, *ndim, "broadcast");
    return rc;
}

int cpu__map(weft_call *call, cpu_mode mode, const cpu_map *m, weft_tensor *const *inputs,
             int ninputs)
{
    weft_tensor *target = mode == CPU_FUNCTIONAL ? NULL : call->args[0].u.tensor;
    int64_t shape[WEFT_MAX_DIMS];
    int ndim = 0;
    int rc = check_map(mode, m, target, inputs, ninputs, shape, &ndim);
    if (rc < 0)
        return rc;
    /* inputs of the loop's dtype are used as they are (borrowed); the
     * others through converted copies, which this call owns */
    weft_tensor *operands[MAX_OPERANDS], *owned[MAX_OPERANDS] = {NULL};
    for (int i = 0; i < ninputs && rc == 0; i++) {
        operands[i] = inputs[i];
        if (weft_tensor_dtype(inputs[i]) != m->input_dtype) {
            rc = weft_to_dtype(&owned[i], inputs[i], m->input_dtype);
            operands[i] = owned[i];
        }
    }
    /* a target of another dtype gets the result through a converting copy */
    weft_tensor *dest = target, *made = NULL;
    if (rc == 0 && (!target || weft_tensor_dtype(target) != m->result_dtype)) {
        rc = weft_empty(&made, shape, ndim, m->result_dtype, WEFT_DEVICE_CPU);
        dest = made;
    }
    if (rc == 0)
        rc = cpu__elementwise(m->op, dest, operands, ninputs, m->loop, m->params);
    if (rc == 0 && target && dest != target)
        rc = weft_copy_(target, dest);
    for (int i = 0; i < ninputs; i++)
        weft_tensor_release(owned[i]);
    if (rc == 0 && mode == CPU_FUNCTIONAL) {
        call->rets[0].tag = WEFT_VALUE_TENSOR;
        call->rets[0].u.tensor = made;
    } else {
        weft_tensor_release(made);
    }
    return rc;
}

/* ------------------------------------------------------ the binary loops */

typedef struct binary_params {
    double alpha; /* add and sub: out = a + alpha * b */
} binary_params;

/* One binary loop for one dtype: EXPR combines `a` and `b` (compute type C;
 * `alpha` is in scope) into the value stored.  The contiguous cases, the
 * ones that matter for speed, get loops the compiler vectorizes; ivdep is
 * safe because an output shares memory with an input only element for
 * element (cpu__elementwise copies any other overlap away). */
#define DEFINE_BINARY_LOOP(FN, NAME, T, C, EXPR)                                   \
    static void FN(char **ptrs, const int64_t *st, int64_t n, const void *params)   \
    {                                                                               \
        const C alpha = cpu_from_double_##NAME(((const binary_params *)params)->alpha); \
        (void)alpha;                                                                \
        T *o = (T *)ptrs[0];                                                        \
        const T *x = (const T *)ptrs[1], *y = (const T *)ptrs[2];                   \
        const int64_t es = (int64_t)sizeof(T);                                      \
        if (st[0] == es && st[1] == es && st[2] == es) {                            \
            _Pragma("GCC ivdep") for (int64_t i = 0; i < n; i++) {                  \
                const C a = cpu_load_##NAME(x[i]), b = cpu_load_##NAME(y[i]);       \
                o[i] = cpu_store_##NAME(EXPR);                                      \
            }                                                                       \
        } else if (st[0] == es && st[1] == es && st[2] == 0) {                      \
            const C b = cpu_load_##NAME(*y);                                        \
            _Pragma("GCC ivdep") for (int64_t i = 0; i < n; i++) {                  \
                const C a = cpu_load_##NAME(x[i]);                                  \
                o[i] = cpu_store_##NAME(EXPR);                                      \
            }                                                                       \
        } else if (st[0] == es && st[1] == 0 && st[2] == es) {                      \
            const C a = cpu_load_##NAME(*x);                                        \
            _Pragma("GCC ivdep") for (int64_t i = 0; i < n; i++) {                  \
                const C b = cpu_load_##NAME(y[i]);                                  \
                o[i] = cpu_store_##NAME(EXPR);                                      \
            }                                                                       \
        } else {                                                                    \
            char *po = ptrs[0];                                                     \
            const char *px = ptrs[1], *py = ptrs[2];                                \
            for (int64_t i = 0; i < n; i++) {                                       \
                const C a = cpu_load_##NAME(*(const T *)(px + i * st[1]));          \
                const C b = cpu_load_##NAME(*(const T *)(py + i * st[2]));          \
                *(T *)(po + i * st[0]) = cpu_store_##NAME(EXPR);                    \
            }                                                                       \
        }                                                                           \
    }

/* Integers go through U (unsigned) so that overflow wraps; for floating and
 * complex types U is C and the casts vanish.  bool: a nonzero sum is true. */
#define INSTANTIATE_ADD(NAME, DTYPE, T, C, U) \
    DEFINE_BINARY_LOOP(add_##NAME, NAME, T, C, (C)((U)a + (U)alpha * (U)b))
#define INSTANTIATE_MUL(NAME, DTYPE, T, C, U) \
    DEFINE_BINARY_LOOP(mul_##NAME, NAME, T, C, (C)((U)a * (U)b))
#define INSTANTIATE_DIV(NAME, DTYPE, T, C, U) DEFINE_BINARY_LOOP(div_##NAME, NAME, T, C, a / b)
#define INSTANTIATE_AND(NAME, DTYPE, T, C, U) DEFINE_BINARY_LOOP(mul_##NAME, NAME, T, C, a && b)
CPU_DTYPES_ALL(INSTANTIATE_ADD)
CPU_DTYPES_BOOL(INSTANTIATE_AND)
CPU_DTYPES_NUMERIC(INSTANTIATE_MUL)
CPU_DTYPES_FLOATING(INSTANTIATE_DIV)
CPU_DTYPES_COMPLEX(INSTANTIATE_DIV)

#define ADD_ENTRY(NAME, DTYPE, T, C, U) [DTYPE] = add_##NAME,
#define MUL_ENTRY(NAME, DTYPE, T, C, U) [DTYPE] = mul_##NAME,
#define DIV_ENTRY(NAME, DTYPE, T, C, U) [DTYPE] = div_##NAME,
/* sub is add with -alpha: exact for floats, and modulo 2^n for integers */
static const cpu_loop_fn add_loops[WEFT_NUM_DTYPES] = {CPU_DTYPES_ALL(ADD_ENTRY)};
static const cpu_loop_fn mul_loops[WEFT_NUM_DTYPES] = {CPU_DTYPES_ALL(MUL_ENTRY)};
static const cpu_loop_fn div_loops[WEFT_NUM_DTYPES] = {
    CPU_DTYPES_FLOATING(DIV_ENTRY) CPU_DTYPES_COMPLEX(DIV_ENTRY)};

/* ---------------------------------------------------- the binary kernels */

typedef enum binary_kind { BINARY_ADD, BINARY_SUB, BINARY_MUL, BINARY_DIV } binary_kind;

/* What a registered binary kernel is: its ctx. */
typedef struct binary_form {
    binary_kind kind;
    cpu_mode mode;
    bool scalar; /* the *_scalar forms: `other` is a Scalar */
} binary_form;

static bool is_whole(double v)
{
    return isfinite(v) && v == trunc(v);
}

/* A Scalar operand's dtype category does not promote the tensor within it:
 * int32 + 2 stays int32, float16 + 2.5 stays float16, int + 2.5 gives the
 * default float32, and bool + 2 gives int64. */
static weft_dtype scalar_result_type(weft_dtype t, const weft_value *scalar)
{
    if (scalar->tag == WEFT_VALUE_BOOL)
        return t;
    bool whole = scalar->tag == WEFT_VALUE_INT || is_whole(cpu__scalar_arg(scalar));
    if (weft_dtype_is_integral(t, true)) {
        if (!whole)
            return WEFT_FLOAT32;
        if (t == WEFT_BOOL)
            return WEFT_INT64;
    }
    return t;
}

/* The scalar of a *_scalar form as a 0-d tensor, broadcast by the loops. */
static int scalar_tensor(weft_tensor **out, double value, weft_dtype dtype)
{
    int rc = weft_empty(out, NULL, 0, dtype, WEFT_DEVICE_CPU);
    if (rc == 0)
        cpu__store_double(weft_tensor_data_ptr(*out), dtype, value);
    return rc;
}

/* PyTorch refuses sub with any bool operand, and a fractional alpha for an
 * integral result. */
static int check_alpha(const char *op, binary_kind kind, bool bool_operand, weft_dtype ct,
                       double alpha)
{
    if (kind == BINARY_SUB && bool_operand)
        return weft_set_error(WEFT_EDTYPE,
                              "%s: subtraction, the `-` operator, with a bool tensor is not "
                              "supported; to invert a mask use logical_not() instead",
                              op);
    if (weft_dtype_is_integral(ct, true) && !is_whole(alpha))
        return weft_set_error(WEFT_EINVAL,
                              "%s: for integral input tensors, argument alpha must not be a "
                              "floating point number (got %g)",
                              op, alpha);
    return 0;
}

static int binary_kernel(weft_call *call, void *ctx)
{
    const binary_form *form = ctx;
    const char *op = weft_op_name(call->op);
    int first = form->mode == CPU_OUT ? 1 : 0;
    weft_tensor *self = call->args[first].u.tensor;
    const weft_value *other = &call->args[first + 1];
    bool has_alpha = form->kind == BINARY_ADD || form->kind == BINARY_SUB;
    double alpha = has_alpha && call->nargs > first + 2 ? cpu__scalar_arg(&call->args[first + 2]) : 1;

    weft_dtype st = weft_tensor_dtype(self), ct;
    if (form->scalar)
        ct = scalar_result_type(st, other);
    else
        ct = weft_promote_types(st, weft_tensor_dtype(other->u.tensor));
    if (form->kind == BINARY_DIV && !weft_dtype_is_floating(ct) && !weft_dtype_is_complex(ct))
        ct = WEFT_FLOAT32; /* true division */
    bool bool_operand = st == WEFT_BOOL || (form->scalar ? other->tag == WEFT_VALUE_BOOL
                                                         : weft_tensor_dtype(other->u.tensor) == WEFT_BOOL);
    int rc = has_alpha ? check_alpha(op, form->kind, bool_operand, ct, alpha) : 0;
    if (rc < 0)
        return rc;

    const cpu_loop_fn *table = form->kind == BINARY_MUL   ? mul_loops
                               : form->kind == BINARY_DIV ? div_loops
                                                          : add_loops;
    if (ct < 0 || ct >= WEFT_NUM_DTYPES || !table[ct])
        return cpu__unsupported_dtype(op, ct);
    binary_params params = {form->kind == BINARY_SUB ? -alpha : alpha};
    cpu_map m = {op, ct, ct, table[ct], &params};

    weft_tensor *scalar = NULL;
    if (form->scalar && (rc = scalar_tensor(&scalar, cpu__scalar_arg(other), ct)) < 0)
        return rc;
    weft_tensor *inputs[2] = {self, form->scalar ? scalar : other->u.tensor};
    rc = cpu__map(call, form->mode, &m, inputs, 2);
    weft_tensor_release(scalar);
    return rc;
}

#define BINARY_FORMS(KIND, NAME)                                                   \
    static const binary_form NAME##_functional = {KIND, CPU_FUNCTIONAL, false};     \
    static const binary_form NAME##_inplace = {KIND, CPU_INPLACE, false};           \
    static const binary_form NAME##_out = {KIND, CPU_OUT, false};                   \
    static const binary_form NAME##_scalar = {KIND, CPU_FUNCTIONAL, true};          \
    static const binary_form NAME##_scalar_inplace = {KIND, CPU_INPLACE, true};
BINARY_FORMS(BINARY_ADD, add)
BINARY_FORMS(BINARY_SUB, sub)
BINARY_FORMS(BINARY_MUL, mul)
BINARY_FORMS(BINARY_DIV, div)

#define BINARY_ENTRIES(NAME)                                        \
    {#NAME, binary_kernel, &NAME##_functional},                     \
    {#NAME "_", binary_kernel, &NAME##_inplace},                    \
    {#NAME "_out", binary_kernel, &NAME##_out},                     \
    {#NAME "_scalar", binary_kernel, &NAME##_scalar},               \
    {#NAME "_scalar_", binary_kernel, &NAME##_scalar_inplace}
static const cpu_kernel_entry binary_kernels[] = {
    BINARY_ENTRIES(add), BINARY_ENTRIES(sub), BINARY_ENTRIES(mul), BINARY_ENTRIES(div),
};

int cpu__register_elementwise(weft_registrar *reg)
{
    return cpu__register_table(reg, binary_kernels, sizeof binary_kernels / sizeof *binary_kernels);
}
