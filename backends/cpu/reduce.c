/* backends/cpu/reduce.c — sum and mean over all or some dimensions, with
 * keepdim, a dtype argument and out= forms.  Floating sums accumulate in
 * double with pairwise summation of contiguous runs; integer sums wrap in
 * 64 bits.  Work is split into fixed-size chunks, so results do not depend
 * on the thread count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

/* Elements one task sums; partial sums of one output are added in order. */
#define REDUCE_CHUNK 65536

/* The geometry of one reduction of x (strides in elements). */
typedef struct reduction {
    const char *data; /* x's first element */
    int nkept, nreduced;
    int64_t kept_sizes[WEFT_MAX_DIMS], kept_strides[WEFT_MAX_DIMS]; /* the output's order */
    int64_t red_sizes[WEFT_MAX_DIMS], red_strides[WEFT_MAX_DIMS];   /* innermost first */
    int64_t nout, inner, nchunks;
    void *partials; /* ACC[nout * nchunks] when nchunks > 1 */
    void *out;      /* the contiguous result */
    bool mean;
    bool widen;     /* integer input summed straight into an int64 result */
    /* Vertical mode: the output's innermost dim is contiguous in x (e.g. a
     * sum over rows), so rows of x are added into a block of accumulators
     * instead of walking one strided column per output. */
    bool vertical;
    int64_t row;    /* the contiguous kept dim's size */
    int64_t blocks; /* VERTICAL_BLOCK-wide pieces of a row */
} reduction;

#define VERTICAL_BLOCK 1024

/* Element offset of output o's first input element. */
static inline int64_t outer_offset(const reduction *r, int64_t o)
{
    int64_t offset = 0;
    for (int d = r->nkept - 1; d >= 0; d--) {
        offset += (o % r->kept_sizes[d]) * r->kept_strides[d];
        o /= r->kept_sizes[d];
    }
    return offset;
}

/* A float32 leaf of the pairwise sum (n <= 256): the scalar loop converted
 * each element to double and ran at a fifth of memory bandwidth; sixteen
 * float lanes hold at most 16 elements each, so their rounding stays
 * below what the pairwise tree above adds, and the lanes are added in
 * double.  The order is fixed: results do not depend on the thread count. */
#pragma GCC diagnostic ignored "-Wpsabi" /* static inline: no ABI crossed */
typedef float reduce_vec __attribute__((vector_size(32)));
typedef float reduce_half __attribute__((vector_size(16)));
typedef double reduce_dvec __attribute__((vector_size(32)));

/* the eight lanes of v, widened to double, as four lanes */
static inline reduce_dvec widen_pairs(reduce_vec v)
{
    reduce_half lo, hi;
    memcpy(&lo, &v, sizeof lo);
    memcpy(&hi, (const char *)&v + sizeof lo, sizeof hi);
    return __builtin_convertvector(lo, reduce_dvec) + __builtin_convertvector(hi, reduce_dvec);
}

/* How far ahead the float32 leaf asks for its input: 2 KiB, a few rows of
 * the memory system's queue.  The hardware prefetcher alone left a
 * 64 MiB row sum at 0.95-0.98x libtorch's bandwidth; with it 1.0-1.05x
 * (bench/run --only "sum over", alternating runs).  Prefetches past the
 * end of the tensor are hints only: they never fault. */
enum { SUM_PREFETCH_FLOATS = 512 };
static inline double block_sum_float32(const float *x, int64_t n)
{
    reduce_vec a = {0}, b = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        reduce_vec u, v;
        __builtin_prefetch(x + i + SUM_PREFETCH_FLOATS, 0, 0);
        memcpy(&u, x + i, sizeof u);
        memcpy(&v, x + i + 8, sizeof v);
        a += u;
        b += v;
    }
    /* the sixteen lanes added in double, four at a time: sixteen scalar
     * additions in a chain took as long as the vector loop (a row sum ran
     * at 0.77 of libtorch's speed on one thread) */
    reduce_dvec d = widen_pairs(a) + widen_pairs(b);
    double s = (d[0] + d[1]) + (d[2] + d[3]);
    for (; i < n; i++)
        s += x[i];
    return s;
}

/* The reduction kernels for one dtype: ACC is the accumulator (double for
 * floating types, double complex for complex, uint64_t for integers so
 * they wrap); FINISH stores output o from its accumulated value. */
#define DEFINE_REDUCE(NAME, T, C, ACC, FINISH)                                           \
    static ACC contiguous_sum_##NAME(const T *x, int64_t n)                              \
    {                                                                                    \
        if (n > 256) { /* pairwise: error grows with log n, not n */                     \
            int64_t half = (n / 2) & ~(int64_t)7;                                        \
            return contiguous_sum_##NAME(x, half) + contiguous_sum_##NAME(x + half, n - half); \
        }                                                                                \
        if (_Generic((x), const float *: true, default: false))                          \
            return (ACC)block_sum_float32((const float *)(const void *)x, n);            \
        ACC a0 = 0, a1 = 0, a2 = 0, a3 = 0;                                              \
        int64_t i = 0;                                                                   \
        for (; i + 4 <= n; i += 4) {                                                     \
            a0 += (ACC)cpu_load_##NAME(x[i]);                                            \
            a1 += (ACC)cpu_load_##NAME(x[i + 1]);                                        \
            a2 += (ACC)cpu_load_##NAME(x[i + 2]);                                        \
            a3 += (ACC)cpu_load_##NAME(x[i + 3]);                                        \
        }                                                                                \
        for (; i < n; i++)                                                               \
            a0 += (ACC)cpu_load_##NAME(x[i]);                                            \
        return (a0 + a1) + (a2 + a3);                                                    \
    }                                                                                    \
    /* sums the reduced positions [lo, hi) below base, row by row */                     \
    static ACC range_sum_##NAME(const reduction *r, const T *base, int64_t lo, int64_t hi) \
    {                                                                                    \
        int64_t index[WEFT_MAX_DIMS], offset = 0, rest = lo;                             \
        for (int d = 0; d < r->nreduced; d++) {                                          \
            index[d] = rest % r->red_sizes[d];                                           \
            rest /= r->red_sizes[d];                                                     \
            offset += index[d] * r->red_strides[d];                                      \
        }                                                                                \
        ACC sum = 0;                                                                     \
        const int64_t stride0 = r->red_strides[0];                                       \
        while (lo < hi) {                                                                \
            int64_t n = r->red_sizes[0] - index[0];                                      \
            if (n > hi - lo)                                                             \
                n = hi - lo;                                                             \
            if (stride0 == 1) {                                                          \
                sum += contiguous_sum_##NAME(base + offset, n);                          \
            } else {                                                                     \
                for (int64_t i = 0; i < n; i++)                                          \
                    sum += (ACC)cpu_load_##NAME(base[offset + i * stride0]);             \
            }                                                                            \
            lo += n;                                                                     \
            index[0] += n;                                                               \
            offset += n * stride0;                                                       \
            for (int d = 0; d + 1 < r->nreduced && index[d] == r->red_sizes[d]; d++) {   \
                index[d] = 0;                                                            \
                index[d + 1]++;                                                          \
                offset += r->red_strides[d + 1] - r->red_sizes[d] * r->red_strides[d];   \
            }                                                                            \
        }                                                                                \
        return sum;                                                                      \
    }                                                                                    \
    /* task t is chunk t % nchunks of output t / nchunks */                              \
    static void reduce_tasks_##NAME(int64_t begin, int64_t end, void *ctx)               \
    {                                                                                    \
        const reduction *r = ctx;                                                        \
        for (int64_t t = begin; t < end; t++) {                                          \
            int64_t o = t / r->nchunks, lo = (t % r->nchunks) * REDUCE_CHUNK;            \
            int64_t hi = r->inner - lo > REDUCE_CHUNK ? lo + REDUCE_CHUNK : r->inner;    \
            ACC sum = range_sum_##NAME(r, (const T *)r->data + outer_offset(r, o), lo, hi); \
            if (r->nchunks > 1) {                                                        \
                ((ACC *)r->partials)[t] = sum;                                           \
            } else {                                                                     \
                FINISH(NAME, T, C, r, o, sum)                                            \
            }                                                                            \
        }                                                                                \
    }                                                                                    \
    /* task t: block t % blocks of the row of outputs t / blocks, summing   \
     * every reduced position in order */                                                \
    static void reduce_vertical_##NAME(int64_t begin, int64_t end, void *ctx)            \
    {                                                                                    \
        const reduction *r = ctx;                                                        \
        ACC acc[VERTICAL_BLOCK];                                                         \
        for (int64_t t = begin; t < end; t++) {                                          \
            int64_t first = (t / r->blocks) * r->row + (t % r->blocks) * VERTICAL_BLOCK;  \
            int64_t width = r->row - (t % r->blocks) * VERTICAL_BLOCK;                   \
            if (width > VERTICAL_BLOCK)                                                  \
                width = VERTICAL_BLOCK;                                                  \
            for (int64_t j = 0; j < width; j++)                                          \
                acc[j] = 0;                                                              \
            const T *base = (const T *)r->data + outer_offset(r, first);                 \
            int64_t index[WEFT_MAX_DIMS] = {0}, offset = 0;                              \
            for (int64_t p = 0; p < r->inner; p++) {                                     \
                const T *x = base + offset;                                              \
                for (int64_t j = 0; j < width; j++)                                      \
                    acc[j] += (ACC)cpu_load_##NAME(x[j]);                                \
                offset += r->red_strides[0];                                             \
                if (++index[0] < r->red_sizes[0])                                        \
                    continue;                                                            \
                for (int d = 0; d + 1 < r->nreduced && index[d] == r->red_sizes[d]; d++) { \
                    index[d] = 0;                                                        \
                    index[d + 1]++;                                                      \
                    offset += r->red_strides[d + 1] - r->red_sizes[d] * r->red_strides[d]; \
                }                                                                        \
            }                                                                            \
            for (int64_t j = 0; j < width; j++) {                                        \
                FINISH(NAME, T, C, r, first + j, acc[j])                                 \
            }                                                                            \
        }                                                                                \
    }                                                                                    \
    static void reduce_##NAME(reduction *r)                                              \
    {                                                                                    \
        if (r->vertical) {                                                               \
            int64_t work = r->inner * (r->row < VERTICAL_BLOCK ? r->row : VERTICAL_BLOCK); \
            cpu__parallel_for(0, r->nout / r->row * r->blocks, CPU_GRAIN / work + 1,     \
                              reduce_vertical_##NAME, r);                                \
            return;                                                                      \
        }                                                                                \
        if (r->nchunks > 1 && !(r->partials = malloc((size_t)(r->nout * r->nchunks) * sizeof(ACC)))) \
            return;                                                                      \
        int64_t per_task = r->inner < REDUCE_CHUNK ? r->inner : REDUCE_CHUNK;            \
        int64_t grain = CPU_GRAIN / (per_task > 0 ? per_task : 1);                       \
        cpu__parallel_for(0, r->nout * r->nchunks, grain > 0 ? grain : 1,               \
                          reduce_tasks_##NAME, r);                                       \
        if (r->nchunks > 1) {                                                            \
            const ACC *partials = r->partials;                                           \
            for (int64_t o = 0; o < r->nout; o++) {                                      \
                ACC sum = 0;                                                             \
                for (int64_t c = 0; c < r->nchunks; c++)                                 \
                    sum += partials[o * r->nchunks + c];                                 \
                FINISH(NAME, T, C, r, o, sum)                                            \
            }                                                                            \
        }                                                                                \
    }

#define FINISH_INTEGRAL(NAME, T, C, r, o, acc)                                   \
    if ((r)->widen)                                                              \
        ((int64_t *)(r)->out)[o] = (int64_t)(acc);                               \
    else                                                                         \
        ((T *)(r)->out)[o] = cpu_store_##NAME((C)(int64_t)(acc));
#define FINISH_FLOATING(NAME, T, C, r, o, acc) \
    ((T *)(r)->out)[o] = cpu_store_##NAME((C)((r)->mean ? (acc) / (double)(r)->inner : (acc)));

#define REDUCE_INTEGRAL(NAME, DTYPE, T, C, U) DEFINE_REDUCE(NAME, T, C, uint64_t, FINISH_INTEGRAL)
#define REDUCE_FLOATING(NAME, DTYPE, T, C, U) DEFINE_REDUCE(NAME, T, C, double, FINISH_FLOATING)
#define REDUCE_COMPLEX(NAME, DTYPE, T, C, U) \
    DEFINE_REDUCE(NAME, T, C, double _Complex, FINISH_FLOATING)
CPU_DTYPES_BOOL(REDUCE_INTEGRAL)
CPU_DTYPES_INTEGRAL(REDUCE_INTEGRAL)
CPU_DTYPES_FLOATING(REDUCE_FLOATING)
CPU_DTYPES_COMPLEX(REDUCE_COMPLEX)

typedef void (*reduce_fn)(reduction *r);
#define REDUCE_ENTRY(NAME, DTYPE, T, C, U) [DTYPE] = reduce_##NAME,
static const reduce_fn reduce_kernels[WEFT_NUM_DTYPES] = {CPU_DTYPES_ALL(REDUCE_ENTRY)};

/* ------------------------------------------------------------ geometry */

/* Splits x's dims into kept (in order) and reduced ones (sorted innermost
 * first and merged where they walk memory as one); size-1 dims drop out. */
static void plan(reduction *r, const weft_tensor *x, const bool *reduce)
{
    const int64_t *sizes = weft_tensor_sizes(x), *strides = weft_tensor_strides(x);
    r->nkept = r->nreduced = 0;
    r->nout = r->inner = 1;
    for (int d = 0; d < weft_tensor_ndim(x); d++) {
        if (reduce[d]) {
            r->inner *= sizes[d];
            if (sizes[d] != 1) {
                r->red_sizes[r->nreduced] = sizes[d];
                r->red_strides[r->nreduced++] = strides[d];
            }
        } else {
            r->nout *= sizes[d];
            if (sizes[d] != 1) {
                r->kept_sizes[r->nkept] = sizes[d];
                r->kept_strides[r->nkept++] = strides[d];
            }
        }
    }
    for (int i = 1; i < r->nreduced; i++) {
        for (int j = i; j > 0 && llabs(r->red_strides[j]) < llabs(r->red_strides[j - 1]); j--) {
            int64_t s = r->red_sizes[j], t = r->red_strides[j];
            r->red_sizes[j] = r->red_sizes[j - 1];
            r->red_strides[j] = r->red_strides[j - 1];
            r->red_sizes[j - 1] = s;
            r->red_strides[j - 1] = t;
        }
    }
    int cur = 0;
    for (int d = 1; d < r->nreduced; d++) {
        if (r->red_strides[d] == r->red_strides[cur] * r->red_sizes[cur]) {
            r->red_sizes[cur] *= r->red_sizes[d];
        } else {
            cur++;
            r->red_sizes[cur] = r->red_sizes[d];
            r->red_strides[cur] = r->red_strides[d];
        }
    }
    if (r->nreduced == 0) { /* every reduced dim has size 1: one element each */
        r->red_sizes[0] = 1;
        r->red_strides[0] = 1;
        cur = 0;
    }
    r->nreduced = cur + 1;
    r->nchunks = r->inner > REDUCE_CHUNK ? (r->inner + REDUCE_CHUNK - 1) / REDUCE_CHUNK : 1;
    /* vertical when the output's innermost dim is x's contiguous one and
     * wide enough to fill the accumulator block reasonably */
    r->vertical = r->nkept > 0 && r->kept_strides[r->nkept - 1] == 1 &&
                  r->kept_sizes[r->nkept - 1] >= 16 && r->red_strides[0] != 1 && r->inner > 1;
    if (r->vertical) {
        r->row = r->kept_sizes[r->nkept - 1];
        r->blocks = (r->row + VERTICAL_BLOCK - 1) / VERTICAL_BLOCK;
        r->nchunks = 1;
    }
}

/* Which dims of a rank-ndim tensor `dim` names (NONE or empty: all). */
int cpu__parse_dims(const char *op, const weft_value *dim, int ndim, bool *reduce)
{
    bool all = dim->tag != WEFT_VALUE_INT_LIST || dim->len == 0;
    for (int d = 0; d < ndim; d++)
        reduce[d] = all;
    if (all)
        return 0;
    int wrap = ndim > 0 ? ndim : 1; /* a 0-d tensor accepts dims -1 and 0 */
    bool seen[WEFT_MAX_DIMS] = {false};
    for (int i = 0; i < dim->len; i++) {
        int64_t d = dim->u.ints[i];
        if (d < -wrap || d >= wrap)
            return weft_set_error(WEFT_ERANGE, "%s: dimension out of range (expected to be in "
                                  "range of [%d, %d], but got %lld)", op, -wrap, wrap - 1,
                                  (long long)d);
        if (d < 0)
            d += wrap;
        if (seen[d])
            return weft_set_error(WEFT_EINVAL, "%s: dim %lld appears multiple times in the list "
                                  "of dims", op, (long long)d);
        seen[d] = true;
        if (ndim > 0)
            reduce[d] = true;
    }
    return 0;
}

/* ------------------------------------------------------------- kernels */

typedef struct reduce_form {
    bool mean;
    bool out;
} reduce_form;

/* The dtype of the result: the dtype argument, else out='s dtype, else
 * int64 for integer sums and the input's dtype otherwise. */
static int result_dtype(const char *op, const reduce_form *form, weft_dtype in,
                        const weft_value *dtype_arg, const weft_tensor *out, weft_dtype *rt)
{
    bool given = dtype_arg->tag == WEFT_VALUE_DTYPE;
    if (given)
        *rt = dtype_arg->u.dtype;
    else if (out)
        *rt = weft_tensor_dtype(out);
    else
        *rt = !form->mean && weft_dtype_is_integral(in, true) ? WEFT_INT64 : in;
    if (*rt < 0 || *rt >= WEFT_NUM_DTYPES)
        return weft_set_error(WEFT_EINVAL, "%s: invalid dtype argument", op);
    if (given && out && weft_tensor_dtype(out) != *rt)
        return weft_set_error(WEFT_EDTYPE, "%s: expected out tensor to have dtype %s, but got %s "
                              "instead", op, weft_dtype_name(*rt),
                              weft_dtype_name(weft_tensor_dtype(out)));
    if (form->mean && !weft_dtype_is_floating(*rt) && !weft_dtype_is_complex(*rt))
        return weft_set_error(WEFT_EDTYPE, "%s: could not infer output dtype. %s dtype must be "
                              "either a floating point or complex dtype. Got: %s", op,
                              given ? "Optional" : out ? "Output" : "Input",
                              weft_dtype_name(*rt));
    return 0;
}

static int run_reduction(const weft_tensor *self, const bool *reduce, bool mean, weft_dtype rt,
                         weft_tensor *dest)
{
    weft_dtype in = weft_tensor_dtype(self);
    /* an integer sum into int64 reads the input as it is; anything else
     * converts the input to the result's dtype first, as PyTorch does */
    bool widen = rt == WEFT_INT64 && weft_dtype_is_integral(in, true);
    weft_tensor *x = NULL;
    int rc = 0;
    if (widen || in == rt)
        x = weft_tensor_retain(self);
    else
        rc = weft_to_dtype(&x, self, rt);
    if (rc < 0)
        return rc;
    if (weft_tensor_numel(self) == 0 && weft_tensor_numel(dest) > 0) {
        /* nothing to add up: the empty sum is 0 and the empty mean NaN */
        weft_tensor_release(x);
        return weft_fill_(dest, mean ? NAN : 0.0);
    }
    reduction r = {0};
    r.data = weft_tensor_data_ptr(x);
    r.out = weft_tensor_data_ptr(dest);
    r.mean = mean;
    r.widen = widen && in != rt;
    plan(&r, x, reduce);
    if (r.nout > 0) {
        reduce_kernels[weft_tensor_dtype(x)](&r);
        if (r.nchunks > 1 && !r.partials)
            rc = weft_set_error(WEFT_ENOMEM, "%s: out of memory for partial sums",
                                mean ? "mean" : "sum");
    }
    free(r.partials);
    weft_tensor_release(x);
    return rc;
}

/* sum, sum_out, mean, mean_out: (out,) self, dim, keepdim, *, dtype */
static int reduce_kernel(weft_call *call, void *ctx)
{
    const reduce_form *form = ctx;
    const char *op = weft_op_name(call->op);
    int first = form->out ? 1 : 0;
    weft_tensor *out = form->out ? call->args[0].u.tensor : NULL;
    const weft_tensor *self = call->args[first].u.tensor;
    bool keepdim = call->args[first + 2].tag == WEFT_VALUE_BOOL && call->args[first + 2].u.b;
    int ndim = weft_tensor_ndim(self);
    bool reduce[WEFT_MAX_DIMS];
    weft_dtype rt = WEFT_DTYPE_UNSET;
    int rc = cpu__check_cpu(op, "self", self);
    if (rc == 0 && out)
        rc = cpu__check_cpu(op, "out", out);
    if (rc == 0)
        rc = cpu__parse_dims(op, &call->args[first + 1], ndim, reduce);
    if (rc == 0)
        rc = result_dtype(op, form, weft_tensor_dtype(self), &call->args[first + 3], out, &rt);
    if (rc < 0)
        return rc;

    int64_t shape[WEFT_MAX_DIMS];
    int nshape = 0;
    for (int d = 0; d < ndim; d++) {
        if (!reduce[d])
            shape[nshape++] = weft_tensor_sizes(self)[d];
        else if (keepdim)
            shape[nshape++] = 1;
    }
    if (out && (rc = cpu__prepare_target(op, out, true, shape, nshape, "expected")) < 0)
        return rc;
    weft_tensor *dest = NULL;
    if (out && weft_tensor_is_contiguous(out) && weft_tensor_dtype(out) == rt &&
        !weft_tensor_shares_storage(out, self))
        dest = weft_tensor_retain(out);
    else
        rc = weft_empty(&dest, shape, nshape, rt, WEFT_DEVICE_CPU);
    if (rc == 0)
        rc = run_reduction(self, reduce, form->mean, rt, dest);
    return cpu__deliver(call, out, dest, rc);
}

static const reduce_form sum_form = {false, false}, sum_out_form = {false, true};
static const reduce_form mean_form = {true, false}, mean_out_form = {true, true};
static const weft_kernel_entry reduce_entries[] = {
    {"sum", reduce_kernel, &sum_form},
    {"sum_out", reduce_kernel, &sum_out_form},
    {"mean", reduce_kernel, &mean_form},
    {"mean_out", reduce_kernel, &mean_out_form},
};

int cpu__register_reduce(weft_registrar *reg)
{
    return weft_register_kernel_table(reg, WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, reduce_entries, sizeof reduce_entries / sizeof *reduce_entries);
}
