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
    bool stream; /* large outputs may be written with streaming stores */
} flat_job;

/* Streaming stores.  A plain store to memory that is not in cache first
 * reads the line (read for ownership): an add of large tensors moves four
 * bytes over the memory bus for every three it needs.  When a piece's output
 * is far larger than any cache, the loop writes chunks into a buffer on the
 * stack (L1) and the chunk goes out with non-temporal stores, which skip the
 * read.  Smaller outputs keep plain stores: their consumer will likely find
 * them in cache, which streaming stores would have bypassed.  Only the
 * add/sub/mul/div fast path asks for it: those loops are bound by memory,
 * while a compute-bound one (gelu: 1.21 against 1.35 ns an element on one
 * thread) loses more to the chunk copy than it saves.  The pieces of
 * cpu__parallel_for are at most an eighth of a large tensor on two threads,
 * so a 4 MiB piece means an output of 32 MiB or more there. */
enum { STREAM_MIN_BYTES = 4 << 20, STREAM_CHUNK_BYTES = 8192 };

#if CPU_STREAMING
#include <emmintrin.h>
#endif

void cpu__stream_out(char *dst, const char *src, size_t n)
{
#if CPU_STREAMING
    size_t head = (size_t)(-(uintptr_t)dst & 15);
    if (head > n)
        head = n;
    memcpy(dst, src, head);
    size_t i = head;
    for (; i + 16 <= n; i += 16)
        _mm_stream_si128((__m128i *)(dst + i), _mm_loadu_si128((const __m128i *)(src + i)));
    memcpy(dst + i, src + i, n - i);
#else
    memcpy(dst, src, n);
#endif
}

void cpu__stream_fence(void)
{
#if CPU_STREAMING
    _mm_sfence();
#endif
}

static void flat_run_range(int64_t begin, int64_t end, void *ctx)
{
    const flat_job *job = ctx;
    char *ptrs[MAX_OPERANDS];
    for (int k = 0; k < job->noperands; k++)
        ptrs[k] = job->data[k] + begin * job->strides[k];
    const int64_t n = end - begin, es = job->strides[0];
    if (!CPU_STREAMING || !job->stream || n * es < STREAM_MIN_BYTES || es > STREAM_CHUNK_BYTES) {
        job->loop(ptrs, job->strides, n, job->params);
        return;
    }
    /* an input that is the output itself (in place) is read before the
     * chunk is written back, element for element as the loop would */
    _Alignas(64) char buf[STREAM_CHUNK_BYTES];
    const int64_t chunk = STREAM_CHUNK_BYTES / es;
    char *out = ptrs[0];
    for (int64_t i = 0; i < n; i += chunk) {
        const int64_t m = n - i < chunk ? n - i : chunk;
        ptrs[0] = buf;
        job->loop(ptrs, job->strides, m, job->params);
        cpu__stream_out(out + i * es, buf, (size_t)(m * es));
        for (int k = 1; k < job->noperands; k++)
            ptrs[k] += m * job->strides[k];
    }
    cpu__stream_fence();
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
                              op, weft_format_shape(sa, sizeof sa, shape, *ndim),
                              weft_format_shape(sb, sizeof sb, b, nb), (long long)da, (long long)db,
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
                          op, weft_format_shape(st, sizeof st, weft_tensor_sizes(target), tnd),
                          what,
                          weft_format_shape(se, sizeof se, sizes, ndim));
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

/* ------------------------------------------------------- the flat fast path */

/* Bytes per element, without a call into the core. */
#define SIZE_ENTRY(NAME, DTYPE, T, C, U) [DTYPE] = (int64_t)sizeof(T),
static const int64_t element_size[WEFT_NUM_DTYPES] = {CPU_DTYPES_ALL(SIZE_ENTRY)};
#undef SIZE_ENTRY

/* Whether t is a contiguous CPU tensor of shape `sizes`. */
static inline bool flat_like(const weft_tensor *t, const int64_t *sizes, int ndim)
{
    if (weft_tensor_device(t).type != WEFT_DEVICE_TYPE_CPU || !weft_tensor_is_contiguous(t) ||
        weft_tensor_ndim(t) != ndim)
        return false;
    const int64_t *s = weft_tensor_sizes(t);
    for (int d = 0; d < ndim; d++)
        if (s[d] != sizes[d])
            return false;
    return true;
}

/* The common case of cpu__map without its machinery: every input a
 * contiguous CPU tensor of dtype in_dt (the caller has checked the dtypes)
 * and of one shape, a target (in-place or out=) of that shape and of dtype
 * res_dt sharing memory with an input only element for element, and fewer
 * elements than the parallel grain.  Then nothing can fail but the output's
 * allocation, nothing broadcasts, converts or overlaps, and the loop runs
 * once over the flat buffers on this thread: what cpu__map would do, without
 * its checks, iterator and thread pool.  `scalar`, when not NULL, is one more
 * input: a single element of dtype in_dt that every element reads (stride 0).
 * Returns 1 when done (rets[0] set in functional mode), 0 when the case is
 * not the simple one (nothing done, no error set), or an error code. */
static inline __attribute__((always_inline)) int
map_flat(weft_call *call, cpu_mode mode, weft_dtype in_dt, weft_dtype res_dt, cpu_loop_fn loop,
         const void *params, weft_tensor *const *inputs, int ninputs, const void *scalar)
{
    if ((unsigned)in_dt >= WEFT_NUM_DTYPES || (unsigned)res_dt >= WEFT_NUM_DTYPES ||
        ninputs + (scalar != NULL) + 1 > MAX_OPERANDS)
        return 0;
    const weft_tensor *first = inputs[0];
    if (weft_tensor_device(first).type != WEFT_DEVICE_TYPE_CPU ||
        !weft_tensor_is_contiguous(first))
        return 0;
    int ndim = weft_tensor_ndim(first);
    const int64_t *sizes = weft_tensor_sizes(first);
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++)
        numel *= sizes[d];
    if (numel == 0 || numel > CPU_GRAIN)
        return 0;
    for (int i = 1; i < ninputs; i++)
        if (inputs[i] != first && !flat_like(inputs[i], sizes, ndim))
            return 0;
    weft_tensor *target = NULL;
    if (mode != CPU_FUNCTIONAL) {
        target = call->args[0].u.tensor;
        if (target == first) {
            if (in_dt != res_dt) /* target's dtype is res_dt, first's in_dt */
                return 0;
        } else if (weft_tensor_dtype(target) != res_dt || !flat_like(target, sizes, ndim)) {
            return 0;
        }
        /* same dtype, shape and contiguity: sharing memory is harmless only
         * when the input is the very same elements */
        for (int i = 0; i < ninputs; i++) {
            if (inputs[i] != target && weft_tensor_shares_storage(target, inputs[i]) &&
                (in_dt != res_dt || weft_tensor_data_ptr(target) != weft_tensor_data_ptr(inputs[i])))
                return 0;
        }
    } else {
        int rc = weft_empty(&target, sizes, ndim, res_dt, WEFT_DEVICE_CPU);
        if (rc < 0)
            return rc;
    }
    char *ptrs[MAX_OPERANDS];
    int64_t strides[MAX_OPERANDS];
    ptrs[0] = weft_tensor_data_ptr(target);
    strides[0] = element_size[res_dt];
    for (int i = 0; i < ninputs; i++) {
        ptrs[i + 1] = inputs[i] == target ? ptrs[0]
                      : i > 0 && inputs[i] == first ? ptrs[1]
                                                    : weft_tensor_data_ptr(inputs[i]);
        strides[i + 1] = element_size[in_dt];
    }
    if (scalar) {
        ptrs[ninputs + 1] = (char *)scalar;
        strides[ninputs + 1] = 0;
    }
    loop(ptrs, strides, numel, params);
    if (mode == CPU_FUNCTIONAL) {
        call->rets[0].tag = WEFT_VALUE_TENSOR;
        call->rets[0].u.tensor = target;
    }
    return 1;
}

/* cpu__map past the fast path. */
static int map_general(weft_call *call, cpu_mode mode, const cpu_map *m,
                       weft_tensor *const *inputs, int ninputs)
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

int cpu__map(weft_call *call, cpu_mode mode, const cpu_map *m, weft_tensor *const *inputs,
             int ninputs)
{
    bool flat = ninputs >= 1;
    for (int i = 0; i < ninputs && flat; i++)
        flat = weft_tensor_dtype(inputs[i]) == m->input_dtype;
    if (flat) {
        /* the unary operators' one input gets a copy of its own */
        int rc = ninputs == 1 ? map_flat(call, mode, m->input_dtype, m->result_dtype, m->loop,
                                         m->params, inputs, 1, NULL)
                              : map_flat(call, mode, m->input_dtype, m->result_dtype, m->loop,
                                         m->params, inputs, ninputs, NULL);
        if (rc != 0)
            return rc < 0 ? rc : 0;
    }
    if (m->op)
        return map_general(call, mode, m, inputs, ninputs);
    cpu_map named = *m;
    named.op = weft_op_name(call->op);
    return map_general(call, mode, &named, inputs, ninputs);
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
        if (n == 1) { /* one element: no strides, no vector loop set-up */          \
            const C a = cpu_load_##NAME(*x), b = cpu_load_##NAME(*y);              \
            *o = cpu_store_##NAME(EXPR);                                            \
        } else if (st[0] == es && st[1] == es && st[2] == es) {                     \
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

/* cpu__scalar_arg without the call. */
static inline double scalar_arg(const weft_value *v)
{
    return v->tag == WEFT_VALUE_DOUBLE ? v->u.d : weft_value_double(v);
}

#define is_whole cpu_is_whole
#define integral_or_bool cpu_integral_or_bool
#define floating_or_complex cpu_floating_or_complex
#define scalar_result_type cpu_scalar_result_type

int cpu__scalar_tensor(weft_tensor **out, double value, weft_dtype dtype)
{
    int rc = weft_empty(out, NULL, 0, dtype, WEFT_DEVICE_CPU);
    if (rc == 0)
        cpu__store_double(weft_tensor_data_ptr(*out), dtype, value);
    return rc;
}

/* PyTorch refuses sub with any bool operand, and a fractional alpha for an
 * integral result.  The operator is named only in a message. */
static int check_alpha(const weft_op *op, binary_kind kind, bool bool_operand, weft_dtype ct,
                       double alpha)
{
    if (kind == BINARY_SUB && bool_operand)
        return weft_set_error(WEFT_EDTYPE,
                              "%s: subtraction, the `-` operator, with a bool tensor is not "
                              "supported; to invert a mask use logical_not() instead",
                              weft_op_name(op));
    if (integral_or_bool(ct) && !is_whole(alpha))
        return weft_set_error(WEFT_EINVAL,
                              "%s: for integral input tensors, argument alpha must not be a "
                              "floating point number (got %g)",
                              weft_op_name(op), alpha);
    return 0;
}

/* binary_kernel's fast path, map_flat's case specialised for two operands:
 * self and other tensors of one dtype (or other a Scalar that leaves self's
 * dtype alone), contiguous CPU tensors of one shape, and for in-place and
 * out= a target of that dtype and shape that shares memory with an input
 * only element for element.  Then the loop runs over the flat buffers (a
 * Scalar is read from a stack element with stride 0), once on this thread
 * below the parallel grain, else in pieces over the pool, and nothing can
 * fail but the output's allocation.
 * Everything else, every error included, is left to binary_general: returns
 * 1 when done, 0 when not taken (nothing done), or an allocation error. */
static inline __attribute__((always_inline)) int
binary_flat(weft_call *call, const binary_form *form, const cpu_mode mode, const bool scalar)
{
    const weft_value *args = call->args;
    const int first = mode == CPU_OUT ? 1 : 0;
    weft_tensor *self = args[first].u.tensor, *other = NULL;
    const weft_value *ov = &args[first + 1];
    const weft_dtype dt = weft_tensor_dtype(self);
    if ((unsigned)dt >= WEFT_NUM_DTYPES)
        return 0;
    double value = 0;
    if (scalar) {
        value = scalar_arg(ov);
        if (scalar_result_type(dt, ov, value) != dt)
            return 0;
    } else {
        other = ov->u.tensor;
        if (other != self && weft_tensor_dtype(other) != dt)
            return 0;
    }
    const cpu_loop_fn *table = add_loops;
    double alpha = 1;
    if (form->kind == BINARY_ADD || form->kind == BINARY_SUB) {
        if (call->nargs > first + 2)
            alpha = scalar_arg(&args[first + 2]);
        if (form->kind == BINARY_SUB &&
            (dt == WEFT_BOOL || (scalar && ov->tag == WEFT_VALUE_BOOL)))
            return 0;
        if (integral_or_bool(dt) && !is_whole(alpha))
            return 0;
    } else {
        table = form->kind == BINARY_MUL ? mul_loops : div_loops;
    }
    const cpu_loop_fn loop = table[dt]; /* none: integer true division */
    if (!loop)
        return 0;

    if (weft_tensor_device(self).type != WEFT_DEVICE_TYPE_CPU ||
        !weft_tensor_is_contiguous(self))
        return 0;
    const int ndim = weft_tensor_ndim(self);
    const int64_t *sizes = weft_tensor_sizes(self);
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++)
        numel *= sizes[d];
    if (numel == 0)
        return 0;
    if (other && other != self && !flat_like(other, sizes, ndim))
        return 0;
    weft_tensor *target = NULL;
    if (mode != CPU_FUNCTIONAL) {
        target = args[0].u.tensor;
        if (target != self &&
            (weft_tensor_dtype(target) != dt || !flat_like(target, sizes, ndim) ||
             (weft_tensor_shares_storage(target, self) &&
              weft_tensor_data_ptr(target) != weft_tensor_data_ptr(self))))
            return 0;
        if (other && other != target && weft_tensor_shares_storage(target, other) &&
            weft_tensor_data_ptr(target) != weft_tensor_data_ptr(other))
            return 0;
    } else {
        int rc = weft_empty(&target, sizes, ndim, dt, WEFT_DEVICE_CPU);
        if (rc < 0)
            return rc;
    }

    _Alignas(16) unsigned char element[16];
    const int64_t es = element_size[dt];
    char *ptrs[3];
    int64_t strides[3] = {es, es, es};
    /* a fresh output is neither input */
    const bool may_alias = mode != CPU_FUNCTIONAL;
    ptrs[0] = weft_tensor_data_ptr(target);
    ptrs[1] = may_alias && self == target ? ptrs[0] : weft_tensor_data_ptr(self);
    if (scalar) {
        cpu__store_double(element, dt, value);
        ptrs[2] = (char *)element;
        strides[2] = 0;
    } else {
        ptrs[2] = other == self                  ? ptrs[1]
                  : may_alias && other == target ? ptrs[0]
                                                 : weft_tensor_data_ptr(other);
    }
    binary_params params = {form->kind == BINARY_SUB ? -alpha : alpha};
    if (numel < CPU_GRAIN) {
        loop(ptrs, strides, numel, &params);
    } else { /* an optimizer's update of a large parameter, say */
        flat_job job = {.noperands = 3, .loop = loop, .params = &params, .stream = true};
        for (int k = 0; k < 3; k++) {
            job.data[k] = ptrs[k];
            job.strides[k] = strides[k];
        }
        cpu__parallel_for(0, numel, CPU_GRAIN, flat_run_range, &job);
    }
    if (mode == CPU_FUNCTIONAL) {
        call->rets[0].tag = WEFT_VALUE_TENSOR;
        call->rets[0].u.tensor = target;
    }
    return 1;
}

/* Type promotion, the checks and the general iterator. */
static __attribute__((noinline)) int binary_general(weft_call *call, const binary_form *form)
{
    int first = form->mode == CPU_OUT ? 1 : 0;
    weft_tensor *self = call->args[first].u.tensor;
    const weft_value *other = &call->args[first + 1];
    bool has_alpha = form->kind == BINARY_ADD || form->kind == BINARY_SUB;
    double alpha = has_alpha && call->nargs > first + 2 ? scalar_arg(&call->args[first + 2]) : 1;

    /* every dtype and value is read once */
    weft_dtype st = weft_tensor_dtype(self), ot, ct;
    double value = 0;
    if (form->scalar) {
        value = scalar_arg(other);
        ot = st;
        ct = scalar_result_type(st, other, value);
    } else {
        ot = weft_tensor_dtype(other->u.tensor);
        /* promotion leaves a pair of one valid dtype alone; otherwise
         * torch's result_type (a 0-d tensor ranks below a dimensioned one
         * of its category) */
        ct = st == ot && st >= 0 && st < WEFT_NUM_DTYPES
                 ? st
                 : weft_result_type((const weft_tensor *[]){self, other->u.tensor}, 2);
    }
    if (form->kind == BINARY_DIV && !floating_or_complex(ct))
        ct = WEFT_FLOAT32; /* true division */
    bool bool_operand = st == WEFT_BOOL || (form->scalar ? other->tag == WEFT_VALUE_BOOL
                                                         : ot == WEFT_BOOL);
    int rc = has_alpha ? check_alpha(call->op, form->kind, bool_operand, ct, alpha) : 0;
    if (rc < 0)
        return rc;

    const cpu_loop_fn *table = form->kind == BINARY_MUL   ? mul_loops
                               : form->kind == BINARY_DIV ? div_loops
                                                          : add_loops;
    if (ct < 0 || ct >= WEFT_NUM_DTYPES || !table[ct])
        return cpu__unsupported_dtype(weft_op_name(call->op), ct);
    binary_params params = {form->kind == BINARY_SUB ? -alpha : alpha};
    cpu_map m = {weft_op_name(call->op), ct, ct, table[ct], &params};
    weft_tensor *scalar = NULL;
    if (form->scalar && (rc = cpu__scalar_tensor(&scalar, value, ct)) < 0)
        return rc;
    weft_tensor *inputs[2] = {self, form->scalar ? scalar : other->u.tensor};
    rc = map_general(call, form->mode, &m, inputs, 2);
    weft_tensor_release(scalar);
    return rc;
}

/* One kernel per form, so that each has its own copy of the fast path with
 * the form's mode and operand kind built in. */
#define BINARY_KERNEL(FN, MODE, SCALAR)                                  \
    static int FN(weft_call *call, void *ctx)                           \
    {                                                                   \
        const binary_form *form = ctx;                                  \
        int rc = binary_flat(call, form, MODE, SCALAR);                 \
        if (rc != 0)                                                    \
            return rc < 0 ? rc : 0;                                     \
        return binary_general(call, form);                              \
    }
BINARY_KERNEL(binary_kernel, CPU_FUNCTIONAL, false)
BINARY_KERNEL(binary_inplace_kernel, CPU_INPLACE, false)
BINARY_KERNEL(binary_out_kernel, CPU_OUT, false)
BINARY_KERNEL(binary_scalar_kernel, CPU_FUNCTIONAL, true)
BINARY_KERNEL(binary_scalar_inplace_kernel, CPU_INPLACE, true)

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

#define BINARY_ENTRIES(NAME)                                                \
    {#NAME, binary_kernel, &NAME##_functional},                             \
    {#NAME "_", binary_inplace_kernel, &NAME##_inplace},                    \
    {#NAME "_out", binary_out_kernel, &NAME##_out},                         \
    {#NAME "_scalar", binary_scalar_kernel, &NAME##_scalar},                \
    {#NAME "_scalar_", binary_scalar_inplace_kernel, &NAME##_scalar_inplace}
static const weft_kernel_entry binary_kernels[] = {
    BINARY_ENTRIES(add), BINARY_ENTRIES(sub), BINARY_ENTRIES(mul), BINARY_ENTRIES(div),
};

int cpu__register_elementwise(weft_registrar *reg)
{
    return weft_register_kernel_table(reg, WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, binary_kernels, sizeof binary_kernels / sizeof *binary_kernels);
}
