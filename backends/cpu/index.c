/* backends/cpu/index.c — operators driven by index tensors and masks:
 * index_select, embedding, gather, scatter / scatter_add, index_add,
 * one_hot, masked_select, nonzero.  Every index is checked against its
 * size before anything is written, so a bad index is an error and never an
 * access out of bounds.  Moving elements is dtype-blind (bytes); only the
 * accumulating operators have a body per dtype. */
#include <stdio.h>
#include <stdlib.h>

#include "shape.h"

/* ------------------------------------------------------------ accumulation */

/* dst[i] += alpha * src[i] for i < n, in the dtype's arithmetic type U
 * (unsigned for the integers, so overflow wraps as in PyTorch; bool ORs).
 * The element-wise scatters call it with n = 1; index_add_ of whole rows
 * with n = the row's length, where the loop over plain types vectorises. */
typedef void (*accumulate_fn)(char *dst, const char *src, int64_t n, double alpha);

#define ACCUMULATE(NAME, DTYPE, T, C, U)                                                         \
    static void accumulate_##NAME(char *dst, const char *src, int64_t n, double alpha)           \
    {                                                                                            \
        T *restrict d = (T *)dst;                                                                \
        const T *restrict s = (const T *)src;                                                    \
        const U a = (U)cpu_from_double_##NAME(alpha);                                            \
        for (int64_t i = 0; i < n; i++)                                                          \
            d[i] = cpu_store_##NAME((C)((U)cpu_load_##NAME(d[i]) + a * (U)cpu_load_##NAME(s[i]))); \
    }
CPU_DTYPES_ALL(ACCUMULATE)
#undef ACCUMULATE

static const accumulate_fn accumulate_fns[WEFT_NUM_DTYPES] = {
    CPU_ENTRIES_BOOL(accumulate) CPU_ENTRIES_INTEGRAL(accumulate) CPU_ENTRIES_FLOATING(accumulate)
    CPU_ENTRIES_COMPLEX(accumulate)};

/* ------------------------------------------------------------ helpers */

static const char *shape_text(char *buf, size_t size, const weft_tensor *t)
{
    return weft_format_shape(buf, size, weft_tensor_sizes(t), weft_tensor_ndim(t));
}

/* A new contiguous copy of t. */
static int copy_of(const weft_tensor *t, weft_tensor **out)
{
    int rc = weft_empty(out, weft_tensor_sizes(t), weft_tensor_ndim(t), weft_tensor_dtype(t),
                        WEFT_DEVICE_CPU);
    if (rc == 0 && (rc = weft_copy_(*out, t)) < 0) {
        weft_tensor_release(*out);
        *out = NULL;
    }
    return rc;
}

/* For each of `outer` blocks, copies rows idx[0..n) of the block's src_len
 * rows (row_bytes each) into consecutive rows of dst.  The rows an
 * embedding looks up lie anywhere in a table far larger than the caches:
 * each is a miss, so the row AHEAD lookups on is asked for while this one
 * is copied (a 4096 x 20 lookup in a 1M x 64 table: 14-25 ms -> 7-11 ms,
 * bench/sparse-python.py's embedding step), and large gathers are split
 * over the pool (the misses of two threads overlap).
 *
 * A large gather from a source several times larger still (an embedding
 * table) writes its rows with streaming stores (cpu__stream_out): its
 * reads miss all over the source, which evicts the output from the caches
 * before its consumer comes, so the output is written to memory anyway,
 * and plain stores would first read every line of it too.  The embedding
 * step's forward (81,920 rows of 256 bytes, 21 MB, from a 256 MB table):
 * 4.2-4.8 -> 3.4-3.9 ms, median of 60 steps, the two alternating in one
 * process on this 2-core machine; the sum that reads the output after it
 * took the same time either way (docs/benchmarks.md, issue 16, fifteenth
 * session). */
enum { GATHER_STREAM_MIN_BYTES = 8 << 20, GATHER_STREAM_SOURCE_RATIO = 4 };
typedef struct take_job {
    char *dst;
    const char *src;
    int64_t src_len, n;
    const int64_t *idx;
    size_t row_bytes;
    bool stream; /* rows go out with streaming stores */
} take_job;

static void take_range(int64_t begin, int64_t end, void *ctx)
{
    const take_job *t = ctx;
    enum { AHEAD = 8 };
    const int64_t rb = (int64_t)t->row_bytes;
    /* r = o * n + j, stepped rather than divided per row (two 64-bit
     * divisions cost more than a 256-byte row's copy from the cache) */
    int64_t o = begin / t->n, j = begin % t->n;
    const char *block = t->src + o * t->src_len * rb;
    char *to = t->dst + begin * rb;
    for (int64_t r = begin; r < end; r++, to += rb) {
        if (j + AHEAD < t->n && rb <= 1024) {
            const char *row = block + t->idx[j + AHEAD] * rb;
            for (int64_t b = 0; b < rb; b += 64)
                __builtin_prefetch(row + b, 0);
        }
        if (t->stream)
            cpu__stream_out(to, block + t->idx[j] * rb, t->row_bytes);
        else
            memcpy(to, block + t->idx[j] * rb, t->row_bytes);
        if (++j == t->n) {
            j = 0;
            block += t->src_len * rb;
        }
    }
    if (t->stream)
        cpu__stream_fence();
}

static void take_rows(char *dst, const char *src, int64_t outer, int64_t src_len,
                      const int64_t *idx, int64_t n, size_t row_bytes)
{
    const double out_bytes = (double)outer * (double)n * (double)row_bytes;
    /* whole 16-byte units per row, so that no line mixes the two kinds of
     * store (weft's allocations are 64-byte aligned; an unaligned view's
     * rows would be, and take plain stores) */
    const bool stream = CPU_STREAMING && out_bytes >= GATHER_STREAM_MIN_BYTES &&
                        (double)outer * (double)src_len * (double)row_bytes >=
                            GATHER_STREAM_SOURCE_RATIO * out_bytes &&
                        row_bytes % 16 == 0 && (uintptr_t)dst % 16 == 0;
    take_job t = {dst, src, src_len, n, idx, row_bytes, stream};
    /* rows of at least 64 KiB per piece: below that a wake-up costs more */
    int64_t grain = (int64_t)(65536 / (row_bytes ? row_bytes : 1)) + 1;
    if (n > 0)
        cpu__parallel_for(0, outer * n, grain, take_range, &t);
}

/* ------------------------------------------------------------ index_select */

int cpu__index_select(const char *op, const weft_tensor *self, int dim, const weft_tensor *index,
                      weft_tensor **out)
{
    *out = NULL;
    weft_tensor *idx = NULL, *src = NULL, *r = NULL;
    int rc = cpu__index_operand(op, "index", index, &idx);
    if (rc < 0)
        return rc;
    const int ndim = weft_tensor_ndim(self);
    const int64_t n = weft_tensor_numel(idx);
    const int64_t size = ndim ? weft_tensor_sizes(self)[dim] : 1;
    if (weft_tensor_ndim(idx) > 1)
        rc = weft_set_error(WEFT_ESHAPE, "%s: index must be 0-d or 1-d, got %d dims", op,
                            weft_tensor_ndim(idx));
    if (rc == 0)
        rc = cpu__check_indices(op, weft_tensor_data_ptr(idx), n, dim, size);
    if (rc == 0)
        rc = weft_contiguous(&src, self);
    int64_t sizes[WEFT_MAX_DIMS], outer = 1, inner = 1;
    if (rc == 0 && ndim == 0) {
        rc = weft_empty(&r, weft_tensor_sizes(idx), weft_tensor_ndim(idx), weft_tensor_dtype(self),
                        WEFT_DEVICE_CPU);
    } else if (rc == 0) {
        memcpy(sizes, weft_tensor_sizes(self), (size_t)ndim * sizeof(int64_t));
        for (int d = 0; d < ndim; d++)
            d < dim ? (outer *= sizes[d]) : d > dim ? (inner *= sizes[d]) : 0;
        sizes[dim] = n;
        rc = weft_empty(&r, sizes, ndim, weft_tensor_dtype(self), WEFT_DEVICE_CPU);
    }
    if (rc == 0) {
        take_rows(weft_tensor_data_ptr(r), weft_tensor_data_ptr(src), outer, size,
                  weft_tensor_data_ptr(idx), n,
                  (size_t)inner * weft_dtype_size(weft_tensor_dtype(self)));
        *out = r;
    }
    weft_tensor_release(idx);
    weft_tensor_release(src);
    return rc;
}

static int index_select_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = call->args[0].u.tensor;
    int dim;
    weft_tensor *r;
    int rc = cpu__check_cpu("index_select", "self", self);
    if (rc == 0)
        rc = cpu__wrap_dim("index_select", call->args[1].u.i, weft_tensor_ndim(self), &dim);
    if (rc == 0 && (rc = cpu__index_select("index_select", self, dim, call->args[2].u.tensor, &r)) == 0)
        cpu__set_ret(call, 0, r);
    return rc;
}

/* ------------------------------------------------------------ embedding */

/* embedding(weight, indices, padding_idx): rows of weight, shaped
 * [*indices.shape, embedding_dim]; padding_idx only matters to backward. */
static int embedding_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "embedding";
    const weft_tensor *weight = call->args[0].u.tensor;
    int rc = cpu__check_cpu(op, "weight", weight);
    if (rc < 0)
        return rc;
    if (weft_tensor_ndim(weight) != 2)
        return weft_set_error(WEFT_ESHAPE, "%s: 'weight' must be 2-d, got %d dims", op,
                              weft_tensor_ndim(weight));
    weft_tensor *idx = NULL, *src = NULL, *r = NULL;
    if ((rc = cpu__index_operand(op, "indices", call->args[1].u.tensor, &idx)) < 0)
        return rc;
    const int nd = weft_tensor_ndim(idx);
    const int64_t rows = weft_tensor_sizes(weight)[0], width = weft_tensor_sizes(weight)[1];
    if (nd + 1 > WEFT_MAX_DIMS)
        rc = weft_set_error(WEFT_ESHAPE, "%s: indices have too many dims (%d)", op, nd);
    if (rc == 0)
        rc = cpu__check_indices(op, weft_tensor_data_ptr(idx), weft_tensor_numel(idx), 0, rows);
    if (rc == 0)
        rc = weft_contiguous(&src, weight);
    int64_t sizes[WEFT_MAX_DIMS];
    if (rc == 0) {
        memcpy(sizes, weft_tensor_sizes(idx), (size_t)nd * sizeof(int64_t));
        sizes[nd] = width;
        rc = weft_empty(&r, sizes, nd + 1, weft_tensor_dtype(weight), WEFT_DEVICE_CPU);
    }
    if (rc == 0) {
        take_rows(weft_tensor_data_ptr(r), weft_tensor_data_ptr(src), 1, rows,
                  weft_tensor_data_ptr(idx), weft_tensor_numel(idx),
                  (size_t)width * weft_dtype_size(weft_tensor_dtype(weight)));
        cpu__set_ret(call, 0, r);
    }
    weft_tensor_release(idx);
    weft_tensor_release(src);
    return rc;
}

/* ------------------------------------------------------------ gather, scatter */

/* The shared checks of gather and scatter: index has self's rank; along
 * every dim index is no larger than `bound` (src for scatter), and no
 * larger than self except along dim. */
static int check_index_shape(const char *op, const weft_tensor *self, const weft_tensor *index,
                             const weft_tensor *src, int dim)
{
    char a[128], b[128];
    const int ndim = weft_tensor_ndim(self);
    if (weft_tensor_ndim(index) != ndim || (src && weft_tensor_ndim(src) != ndim))
        return weft_set_error(WEFT_ESHAPE, "%s: index%s must have the same number of dimensions "
                              "as self (%d), got %d%s", op, src ? " and src" : "", ndim,
                              weft_tensor_ndim(index), src ? " and more or fewer" : "");
    for (int d = 0; d < ndim; d++) {
        int64_t k = weft_tensor_sizes(index)[d];
        if (d != dim && k > weft_tensor_sizes(self)[d])
            return weft_set_error(WEFT_ESHAPE, "%s: index %s must be no larger than self %s "
                                  "apart from dimension %d", op, shape_text(a, sizeof a, index),
                                  shape_text(b, sizeof b, self), dim);
        if (src && k > weft_tensor_sizes(src)[d])
            return weft_set_error(WEFT_ESHAPE, "%s: index %s must be no larger than src %s", op,
                                  shape_text(a, sizeof a, index), shape_text(b, sizeof b, src));
    }
    return 0;
}

static int gather_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "gather";
    const weft_tensor *self_arg = call->args[0].u.tensor;
    weft_tensor *self = NULL, *idx0 = NULL, *idx = NULL, *src = NULL, *r = NULL;
    int dim;
    int rc = cpu__check_cpu(op, "self", self_arg);
    if (rc == 0)
        rc = cpu__wrap_dim(op, call->args[1].u.i, weft_tensor_ndim(self_arg), &dim);
    if (rc == 0)
        rc = cpu__index_operand(op, "index", call->args[2].u.tensor, &idx0);
    if (rc == 0)
        rc = cpu__at_least_1d(idx0, &idx);
    if (rc == 0)
        rc = cpu__at_least_1d(self_arg, &self);
    if (rc == 0)
        rc = check_index_shape(op, self, idx, NULL, dim);
    if (rc == 0)
        rc = cpu__check_indices(op, weft_tensor_data_ptr(idx), weft_tensor_numel(idx), dim,
                                weft_tensor_sizes(self)[dim]);
    if (rc == 0)
        rc = weft_contiguous(&src, self);
    if (rc == 0)
        rc = weft_empty(&r, weft_tensor_sizes(idx0), weft_tensor_ndim(idx0),
                        weft_tensor_dtype(self), WEFT_DEVICE_CPU);
    if (rc == 0) {
        const int ndim = weft_tensor_ndim(idx);
        const size_t es = weft_dtype_size(weft_tensor_dtype(self));
        const int64_t *ix = weft_tensor_data_ptr(idx), *strides = weft_tensor_strides(src);
        const char *from = weft_tensor_data_ptr(src);
        char *to = weft_tensor_data_ptr(r);
        cpu_walk w;
        cpu_walk_init(&w, weft_tensor_sizes(idx), ndim, 1);
        for (int d = 0; d < ndim; d++)
            w.strides[0][d] = d == dim ? 0 : strides[d];
        for (int64_t p = 0, n = weft_tensor_numel(idx); p < n; p++, cpu_walk_next(&w))
            memcpy(to + p * (int64_t)es, from + (w.offset[0] + ix[p] * strides[dim]) * (int64_t)es, es);
        cpu__set_ret(call, 0, r);
    }
    weft_tensor_release(self);
    weft_tensor_release(idx0);
    weft_tensor_release(idx);
    weft_tensor_release(src);
    return rc;
}

/* Writes src into target at index along dim (target[..index[p]..] = src[p],
 * or += with accumulate).  target is written in place, whatever its strides. */
static int scatter_into(const char *op, weft_tensor *target_arg, int64_t dim_arg,
                        const weft_tensor *index, const weft_tensor *src_arg, bool accumulate)
{
    weft_tensor *target = NULL, *idx0 = NULL, *idx = NULL, *src = NULL, *copy = NULL;
    int dim;
    weft_dtype dtype = weft_tensor_dtype(target_arg);
    int rc = cpu__check_cpu(op, "src", src_arg);
    if (rc == 0 && weft_tensor_dtype(src_arg) != dtype)
        rc = weft_set_error(WEFT_EDTYPE, "%s: self (%s) and src (%s) must have the same dtype", op,
                            weft_dtype_name(dtype), weft_dtype_name(weft_tensor_dtype(src_arg)));
    if (rc == 0)
        rc = cpu__wrap_dim(op, dim_arg, weft_tensor_ndim(target_arg), &dim);
    if (rc == 0)
        rc = cpu__index_operand(op, "index", index, &idx0);
    if (rc == 0)
        rc = cpu__at_least_1d(idx0, &idx);
    if (rc == 0)
        rc = cpu__at_least_1d(target_arg, &target);
    if (rc == 0 && weft_tensor_shares_storage(target_arg, src_arg)) /* read src before writing */
        rc = copy_of(src_arg, &copy);
    if (rc == 0)
        rc = cpu__at_least_1d(copy ? copy : src_arg, &src);
    if (rc == 0)
        rc = check_index_shape(op, target, idx, src, dim);
    if (rc == 0)
        rc = cpu__check_indices(op, weft_tensor_data_ptr(idx), weft_tensor_numel(idx), dim,
                                weft_tensor_sizes(target)[dim]);
    if (rc == 0) {
        const int ndim = weft_tensor_ndim(idx);
        const int64_t es = (int64_t)weft_dtype_size(dtype);
        const int64_t *ix = weft_tensor_data_ptr(idx), *ts = weft_tensor_strides(target);
        const char *from = weft_tensor_data_ptr(src);
        char *to = weft_tensor_data_ptr(target);
        accumulate_fn add = accumulate_fns[dtype];
        cpu_walk w;
        cpu_walk_init(&w, weft_tensor_sizes(idx), ndim, 2);
        for (int d = 0; d < ndim; d++) {
            w.strides[0][d] = d == dim ? 0 : ts[d];
            w.strides[1][d] = weft_tensor_strides(src)[d];
        }
        for (int64_t p = 0, n = weft_tensor_numel(idx); p < n; p++, cpu_walk_next(&w)) {
            char *t = to + (w.offset[0] + ix[p] * ts[dim]) * es;
            if (accumulate)
                add(t, from + w.offset[1] * es, 1, 1.0);
            else
                memcpy(t, from + w.offset[1] * es, (size_t)es);
        }
    }
    weft_tensor_release(target);
    weft_tensor_release(idx0);
    weft_tensor_release(idx);
    weft_tensor_release(src);
    weft_tensor_release(copy);
    return rc;
}

typedef struct write_form {
    bool accumulate, inplace;
} write_form;

/* scatter / scatter_add (self, dim, index, src), functional and in-place */
static int scatter_kernel(weft_call *call, void *ctx)
{
    const write_form *form = ctx;
    const char *op = weft_op_name(call->op);
    weft_tensor *self = call->args[0].u.tensor, *target = NULL;
    int rc = cpu__check_cpu(op, "self", self);
    if (rc == 0)
        rc = form->inplace ? (target = weft_tensor_retain(self), 0) : copy_of(self, &target);
    if (rc == 0)
        rc = scatter_into(op, target, call->args[1].u.i, call->args[2].u.tensor,
                          call->args[3].u.tensor, form->accumulate);
    if (rc == 0 && !form->inplace)
        cpu__set_ret(call, 0, target);
    else
        weft_tensor_release(target);
    return rc;
}

/* ------------------------------------------------------------ index_add */

/* index_add_ of whole rows: target[index[j]] += alpha * source[j], both
 * contiguous, along dim 0 (an embedding's sparse gradient applied by SGD:
 * the sparse layout's add_ hands its rows here to reach this plugin's
 * pool).  The rows lie anywhere in a table far larger than the caches, so
 * each row is a miss: the row AHEAD entries on is asked for while this one
 * is added.
 *
 * Large updates are split over the pool by *entry*: chunk c takes the
 * consecutive entries [c n / C, (c + 1) n / C), so each thread reads its
 * source rows in order, as the hardware prefetcher likes.  Splitting by
 * destination row instead (bucketing the entries by block of rows, or each
 * thread scanning for its rows) makes every thread skip through the source:
 * on one thread, the bucketed order took 35-50% more CPU time than entry
 * order; at 2 threads this split took 10-15% less CPU time than the
 * bucketed one (docs/benchmarks.md, branch h16, twelfth session).  A row
 * named more than once must still take its entries in entry order,
 * whatever the number of threads: such rows are marked in a bitmap first
 * (one pass over the indices, two bitmaps of a bit per row), the chunks add
 * the other rows' entries and keep these, which are then added in entry
 * order on the caller's thread (8% of the bench's 81,920 uniformly random
 * entries into a million rows; where a few rows are popular, as in real
 * batches, more of the work lands there, up to all of it, as on one
 * thread).  Bitwise the same result at any thread count. */
typedef struct add_rows_job {
    char *to;
    const char *from;
    const int64_t *ix;
    int64_t n;
    const uint64_t *shared; /* bit per row: named more than once */
    int64_t nchunks;
    int64_t *kept;          /* [n]: a chunk's shared entries, from its first entry on */
    int64_t *nkept;         /* [nchunks] */
    size_t row_bytes;
    int64_t row_len;
    double alpha;
    accumulate_fn add;
} add_rows_job;

static int64_t chunk_begin(const add_rows_job *j, int64_t c)
{
    return j->n / j->nchunks * c + j->n % j->nchunks * c / j->nchunks;
}

static bool bit_test(const uint64_t *bits, int64_t i)
{
    return bits[i >> 6] >> (i & 63) & 1;
}

/* Adds entries [k0, k1): all of them where chunk is negative, else those
 * of rows named once (the others go to the chunk's kept list). */
static void add_entries(const add_rows_job *j, int64_t k0, int64_t k1, int64_t chunk)
{
    enum { AHEAD = 8 };
    const int64_t rb = (int64_t)j->row_bytes;
    int64_t *kept = chunk >= 0 ? j->kept + k0 : NULL, nkept = 0;
    for (int64_t k = k0; k < k1; k++) {
        if (k + AHEAD < k1 && rb <= 1024) {
            const char *row = j->to + j->ix[k + AHEAD] * rb;
            for (int64_t b = 0; b < rb; b += 64)
                __builtin_prefetch(row + b, 1);
        }
        if (kept && bit_test(j->shared, j->ix[k])) {
            kept[nkept++] = k;
            continue;
        }
        j->add(j->to + j->ix[k] * rb, j->from + k * rb, j->row_len, j->alpha);
    }
    if (kept)
        j->nkept[chunk] = nkept;
}

/* Adds the entries kept[0..m): rows and source rows both lie anywhere (a
 * few percent of the entries, but each two misses: unprefetched, the
 * update took 0.6-0.8 ms more CPU time), so both are asked for AHEAD
 * entries on. */
static void add_kept(const add_rows_job *j, const int64_t *kept, int64_t m)
{
    enum { AHEAD = 8 };
    const int64_t rb = (int64_t)j->row_bytes;
    for (int64_t i = 0; i < m; i++) {
        if (i + AHEAD < m && rb <= 1024) {
            const char *row = j->to + j->ix[kept[i + AHEAD]] * rb;
            const char *src = j->from + kept[i + AHEAD] * rb;
            for (int64_t b = 0; b < rb; b += 64) {
                __builtin_prefetch(row + b, 1);
                __builtin_prefetch(src + b, 0);
            }
        }
        j->add(j->to + j->ix[kept[i]] * rb, j->from + kept[i] * rb, j->row_len, j->alpha);
    }
}

static void add_chunks(int64_t begin, int64_t end, void *ctx)
{
    const add_rows_job *j = ctx;
    for (int64_t c = begin; c < end; c++)
        add_entries(j, chunk_begin(j, c), chunk_begin(j, c + 1), c);
}

/* Marks in shared the rows named more than once, in one pass: a row
 * already in `before` (named by an earlier entry) is shared.  The bitmaps
 * are cleared whole where they are no larger than the indices, else word
 * by word where the indices point, so the cost follows the entries, not the
 * table.  Returns how many entries name a row an earlier entry named. */
static int64_t mark_shared(const add_rows_job *j, uint64_t *before, uint64_t *shared,
                           int64_t words)
{
    if (2 * words <= j->n)
        memset(before, 0, 2 * (size_t)words * sizeof *before); /* shared follows before */
    else
        for (int64_t e = 0; e < j->n; e++)
            before[j->ix[e] >> 6] = shared[j->ix[e] >> 6] = 0;
    int64_t repeats = 0;
    for (int64_t e = 0; e < j->n; e++) {
        const int64_t r = j->ix[e];
        const uint64_t bit = (uint64_t)1 << (r & 63), seen = before[r >> 6] & bit;
        shared[r >> 6] |= seen;
        before[r >> 6] |= bit;
        repeats += seen != 0;
    }
    return repeats;
}

static int add_rows(char *to, int64_t nrows, const char *from, const int64_t *ix, int64_t n,
                    int64_t row_len, size_t es, double alpha, accumulate_fn add)
{
    add_rows_job j = {.to = to, .from = from, .ix = ix, .n = n, .row_bytes = (size_t)row_len * es,
                      .row_len = row_len, .alpha = alpha, .add = add};
    /* below 64 KiB of rows, or on one thread, a wake-up costs more than it
     * saves: the entries in order */
    cpu__parallel_sync(); /* the count weft_set_num_threads asked for since the last job */
    int threads = cpu__num_threads();
    if (threads <= 1 || (int64_t)j.row_bytes * n < 65536) {
        add_entries(&j, 0, n, -1);
        return 0;
    }
    /* a few chunks per thread, so a thread the machine's other work holds
     * up delays a small piece only (the pool hands out the pieces) */
    j.nchunks = 4 * (int64_t)threads;
    /* scratch from weft's allocator, which keeps large blocks for the next
     * call (no page faults): kept [n], nkept [nchunks], two bitmaps */
    weft_tensor *scratch = NULL;
    const int64_t words = (nrows + 63) / 64;
    int64_t count = n + j.nchunks + 2 * words;
    int rc = weft_empty(&scratch, &count, 1, WEFT_INT64, WEFT_DEVICE_CPU);
    if (rc < 0)
        return rc;
    j.kept = weft_tensor_data_ptr(scratch);
    j.nkept = j.kept + n;
    uint64_t *before = (uint64_t *)(j.nkept + j.nchunks), *shared = before + words;
    /* where at least half the entries repeat a row (a skewed batch: Zipf
     * rows, 83% repeats, took 2-4x longer split than in order), the pool
     * could take at most half of the work, and those few rows are likely in
     * cache: entry order on this thread */
    if (2 * mark_shared(&j, before, shared, words) >= n) {
        add_entries(&j, 0, n, -1);
        weft_tensor_release(scratch);
        return 0;
    }
    j.shared = shared;
    cpu__parallel_for(0, j.nchunks, 1, add_chunks, &j);
    /* the shared rows' entries, chunk by chunk: entry order */
    for (int64_t c = 0; c < j.nchunks; c++)
        add_kept(&j, j.kept + chunk_begin(&j, c), j.nkept[c]);
    weft_tensor_release(scratch);
    return 0;
}

/* target[.., index[j], ..] += alpha * source[.., j, ..] along dim. */
static int index_add_into(const char *op, weft_tensor *target_arg, int64_t dim_arg,
                          const weft_tensor *index, const weft_tensor *source_arg, double alpha)
{
    weft_tensor *target = NULL, *idx = NULL, *source = NULL, *copy = NULL;
    weft_dtype dtype = weft_tensor_dtype(target_arg);
    int dim;
    char a[128], b[128];
    int rc = cpu__check_cpu(op, "source", source_arg);
    if (rc == 0 && weft_tensor_dtype(source_arg) != dtype)
        rc = weft_set_error(WEFT_EDTYPE, "%s: self (%s) and source (%s) must have the same dtype",
                            op, weft_dtype_name(dtype), weft_dtype_name(weft_tensor_dtype(source_arg)));
    if (rc == 0)
        rc = cpu__wrap_dim(op, dim_arg, weft_tensor_ndim(target_arg), &dim);
    if (rc == 0)
        rc = cpu__index_operand(op, "index", index, &idx);
    if (rc == 0 && weft_tensor_ndim(idx) > 1)
        rc = weft_set_error(WEFT_ESHAPE, "%s: index must be 0-d or 1-d, got %d dims", op,
                            weft_tensor_ndim(idx));
    if (rc == 0)
        rc = cpu__at_least_1d(target_arg, &target);
    if (rc == 0 && weft_tensor_shares_storage(target_arg, source_arg))
        rc = copy_of(source_arg, &copy);
    if (rc == 0)
        rc = cpu__at_least_1d(copy ? copy : source_arg, &source);
    const int ndim = target ? weft_tensor_ndim(target) : 0;
    bool fits = rc == 0 && weft_tensor_ndim(source) == ndim;
    for (int d = 0; fits && d < ndim; d++)
        fits = weft_tensor_sizes(source)[d] ==
               (d == dim ? weft_tensor_numel(idx) : weft_tensor_sizes(target)[d]);
    if (rc == 0 && !fits)
        rc = weft_set_error(WEFT_ESHAPE, "%s: source %s must have self's shape %s except along "
                            "dimension %d, where its size must be the number of indices (%lld)",
                            op, shape_text(a, sizeof a, source), shape_text(b, sizeof b, target),
                            dim, (long long)weft_tensor_numel(idx));
    if (rc == 0)
        rc = cpu__check_indices(op, weft_tensor_data_ptr(idx), weft_tensor_numel(idx), dim,
                                weft_tensor_sizes(target)[dim]);
    if (rc == 0 && dim == 0 && weft_tensor_is_contiguous(target) &&
        weft_tensor_is_contiguous(source)) {
        const int64_t *sizes = weft_tensor_sizes(target);
        rc = add_rows(weft_tensor_data_ptr(target), sizes[0], weft_tensor_data_ptr(source),
                      weft_tensor_data_ptr(idx), weft_tensor_numel(idx),
                      sizes[0] ? weft_tensor_numel(target) / sizes[0] : 0,
                      weft_dtype_size(dtype), alpha, accumulate_fns[dtype]);
    } else if (rc == 0) {
        const int64_t es = (int64_t)weft_dtype_size(dtype);
        const int64_t *ix = weft_tensor_data_ptr(idx), *ts = weft_tensor_strides(target);
        const char *from = weft_tensor_data_ptr(source);
        char *to = weft_tensor_data_ptr(target);
        accumulate_fn add = accumulate_fns[dtype];
        cpu_walk w;
        cpu_walk_init(&w, weft_tensor_sizes(source), ndim, 2);
        for (int d = 0; d < ndim; d++) {
            w.strides[0][d] = d == dim ? 0 : ts[d];
            w.strides[1][d] = weft_tensor_strides(source)[d];
        }
        for (int64_t p = 0, n = weft_tensor_numel(source); p < n; p++, cpu_walk_next(&w))
            add(to + (w.offset[0] + ix[w.pos[dim]] * ts[dim]) * es, from + w.offset[1] * es, 1,
                alpha);
    }
    weft_tensor_release(target);
    weft_tensor_release(idx);
    weft_tensor_release(source);
    weft_tensor_release(copy);
    return rc;
}

/* index_add(self, dim, index, source, *, alpha), functional and in-place */
static int index_add_kernel(weft_call *call, void *ctx)
{
    const write_form *form = ctx;
    const char *op = weft_op_name(call->op);
    weft_tensor *self = call->args[0].u.tensor, *target = NULL;
    int rc = cpu__check_cpu(op, "self", self);
    if (rc == 0)
        rc = form->inplace ? (target = weft_tensor_retain(self), 0) : copy_of(self, &target);
    if (rc == 0)
        rc = index_add_into(op, target, call->args[1].u.i, call->args[2].u.tensor,
                            call->args[3].u.tensor, weft_value_double(&call->args[4]));
    if (rc == 0 && !form->inplace)
        cpu__set_ret(call, 0, target);
    else
        weft_tensor_release(target);
    return rc;
}

/* ------------------------------------------------------------ one_hot */

static int one_hot_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "one_hot";
    const weft_tensor *self = call->args[0].u.tensor;
    int64_t classes = call->args[1].u.i;
    weft_tensor *idx = NULL, *r = NULL;
    int rc = cpu__index_operand(op, "self", self, &idx);
    if (rc < 0)
        return rc;
    const int64_t n = weft_tensor_numel(idx), *ix = weft_tensor_data_ptr(idx);
    const int nd = weft_tensor_ndim(idx);
    int64_t lo = 0, hi = -1;
    for (int64_t i = 0; i < n; i++) {
        lo = i == 0 || ix[i] < lo ? ix[i] : lo;
        hi = i == 0 || ix[i] > hi ? ix[i] : hi;
    }
    if (n > 0 && lo < 0)
        rc = weft_set_error(WEFT_ERANGE, "%s: class values must be non-negative, got %lld", op,
                            (long long)lo);
    else if (classes == -1 && n == 0)
        rc = weft_set_error(WEFT_EINVAL, "%s: cannot infer the number of classes from an empty "
                            "tensor; pass num_classes", op);
    else if (classes < -1)
        rc = weft_set_error(WEFT_EINVAL, "%s: num_classes must be -1 (inferred) or non-negative, "
                            "got %lld", op, (long long)classes);
    else if (classes != -1 && hi >= classes)
        rc = weft_set_error(WEFT_ERANGE, "%s: class %lld is out of range for num_classes %lld", op,
                            (long long)hi, (long long)classes);
    else if (nd + 1 > WEFT_MAX_DIMS)
        rc = weft_set_error(WEFT_ESHAPE, "%s: self has too many dims (%d)", op, nd);
    if (rc == 0) {
        int64_t sizes[WEFT_MAX_DIMS];
        memcpy(sizes, weft_tensor_sizes(idx), (size_t)nd * sizeof(int64_t));
        sizes[nd] = classes == -1 ? hi + 1 : classes;
        rc = weft_zeros(&r, sizes, nd + 1, WEFT_INT64, WEFT_DEVICE_CPU);
        if (rc == 0) {
            int64_t *o = weft_tensor_data_ptr(r);
            for (int64_t i = 0; i < n; i++)
                o[i * sizes[nd] + ix[i]] = 1;
            cpu__set_ret(call, 0, r);
        }
    }
    weft_tensor_release(idx);
    return rc;
}

/* ------------------------------------------------------------ masks */

/* The true elements of a contiguous bool tensor. */
static int64_t count_true(const weft_tensor *mask)
{
    const bool *m = weft_tensor_data_ptr(mask);
    int64_t count = 0;
    for (int64_t i = 0, n = weft_tensor_numel(mask); i < n; i++)
        count += m[i];
    return count;
}

static int masked_select_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "masked_select";
    const weft_tensor *self = call->args[0].u.tensor, *mask = call->args[1].u.tensor;
    int rc = cpu__check_cpu(op, "self", self);
    if (rc == 0)
        rc = cpu__check_cpu(op, "mask", mask);
    if (rc == 0 && weft_tensor_dtype(mask) != WEFT_BOOL)
        rc = weft_set_error(WEFT_EDTYPE, "%s: expected a bool mask, got %s", op,
                            weft_dtype_name(weft_tensor_dtype(mask)));
    int64_t shape[WEFT_MAX_DIMS];
    int nd = 0;
    if (rc == 0)
        rc = weft_broadcast_shapes(shape, &nd, weft_tensor_sizes(self), weft_tensor_ndim(self),
                                   weft_tensor_sizes(mask), weft_tensor_ndim(mask));
    weft_tensor *se = NULL, *me = NULL, *sc = NULL, *mc = NULL, *r = NULL;
    if (rc == 0)
        rc = weft_expand(&se, self, shape, nd);
    if (rc == 0)
        rc = weft_expand(&me, mask, shape, nd);
    if (rc == 0)
        rc = weft_contiguous(&sc, se);
    if (rc == 0)
        rc = weft_contiguous(&mc, me);
    int64_t count = rc == 0 ? count_true(mc) : 0;
    if (rc == 0)
        rc = weft_empty(&r, &count, 1, weft_tensor_dtype(self), WEFT_DEVICE_CPU);
    if (rc == 0) {
        const size_t es = weft_dtype_size(weft_tensor_dtype(self));
        const bool *m = weft_tensor_data_ptr(mc);
        const char *from = weft_tensor_data_ptr(sc);
        char *to = weft_tensor_data_ptr(r);
        for (int64_t i = 0, n = weft_tensor_numel(mc); i < n; i++)
            if (m[i]) {
                memcpy(to, from + i * (int64_t)es, es);
                to += es;
            }
        cpu__set_ret(call, 0, r);
    }
    weft_tensor_release(se);
    weft_tensor_release(me);
    weft_tensor_release(sc);
    weft_tensor_release(mc);
    return rc;
}

/* nonzero(self): [count, ndim] int64, the positions in row-major order */
static int nonzero_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = call->args[0].u.tensor;
    const int ndim = weft_tensor_ndim(self);
    weft_tensor *truth = NULL, *mask = NULL, *r = NULL;
    int rc = cpu__check_cpu("nonzero", "self", self);
    if (rc == 0)
        rc = weft_ne_scalar(&truth, self, 0.0);
    if (rc == 0)
        rc = weft_contiguous(&mask, truth);
    int64_t sizes[2] = {rc == 0 ? count_true(mask) : 0, ndim};
    if (rc == 0)
        rc = weft_empty(&r, sizes, 2, WEFT_INT64, WEFT_DEVICE_CPU);
    if (rc == 0) {
        const bool *m = weft_tensor_data_ptr(mask);
        int64_t *o = weft_tensor_data_ptr(r);
        cpu_walk w;
        cpu_walk_init(&w, weft_tensor_sizes(self), ndim, 0);
        for (int64_t i = 0, n = weft_tensor_numel(mask); i < n; i++, cpu_walk_next(&w))
            if (m[i]) {
                memcpy(o, w.pos, (size_t)ndim * sizeof(int64_t));
                o += ndim;
            }
        cpu__set_ret(call, 0, r);
    }
    weft_tensor_release(truth);
    weft_tensor_release(mask);
    return rc;
}

/* ------------------------------------------------------------ registration */

static const write_form scatter_form = {false, false}, scatter_inplace = {false, true};
static const write_form scatter_add_form = {true, false}, scatter_add_inplace = {true, true};

static const weft_kernel_entry index_entries[] = {
    {"index_select", index_select_kernel, NULL},
    {"embedding", embedding_kernel, NULL},
    {"gather", gather_kernel, NULL},
    {"scatter", scatter_kernel, &scatter_form},
    {"scatter_", scatter_kernel, &scatter_inplace},
    {"scatter_add", scatter_kernel, &scatter_add_form},
    {"scatter_add_", scatter_kernel, &scatter_add_inplace},
    {"index_add", index_add_kernel, &scatter_form},
    {"index_add_", index_add_kernel, &scatter_inplace},
    {"one_hot", one_hot_kernel, NULL},
    {"masked_select", masked_select_kernel, NULL},
    {"nonzero", nonzero_kernel, NULL},
};

int cpu__register_index(weft_registrar *reg)
{
    return weft_register_kernel_table(reg, WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, index_entries, sizeof index_entries / sizeof *index_entries);
}
