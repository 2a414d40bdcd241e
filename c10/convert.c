/* c10/convert.c — element conversion between the twelve dtypes and the
 * host's strided converting copy (the CPU copy_ kernel calls wf__host_copy).
 * Knows nothing of the dispatcher or of devices other than the host.
 *
 * A conversion is one C expression, STORE_<dst>(p, LOAD_<src>(q)), so C's own
 * rules apply: complex to real keeps the real part, real to complex has imag
 * 0, anything to bool is "!= 0", integer narrowing wraps.  The exceptions are
 * spelled out below: float16/bfloat16 go through float, and floating values
 * become integers through double_to_int64/32 so that out-of-range values are
 * defined behaviour.  The loop body (DEFINE_CONVERT) is written once and
 * instantiated per (src, dst) pair; a copy picks its pair once, through
 * convert_table. */
#include <complex.h>
#include <stdlib.h>
#include <string.h>

#include "c10/core.h"

typedef float _Complex complex64_t;
typedef double _Complex complex128_t;

/* Floating to integer: C truncation where the value fits; NaN and values
 * that do not fit, which are undefined behaviour in C, give what PyTorch
 * gives on x86 (its casts compile to cvttsd2si): the "integer indefinite"
 * INT64_MIN for int64, and for narrower types INT32_MIN from a 32-bit
 * conversion, then wrapped (300.0 -> uint8 is 44, -1.0 -> 255, 3e9 -> int32
 * is INT32_MIN, 3e9 -> int16 is 0). */
static inline int64_t double_to_int64(double v)
{
    return v >= -0x1p63 && v < 0x1p63 ? (int64_t)v : INT64_MIN;
}

static inline int32_t double_to_int32(double v)
{
    return v > -0x1p31 - 1 && v < 0x1p31 ? (int32_t)v : INT32_MIN;
}

/* The integer conversions, chosen by the C type of the loaded value:
 * integers convert directly (wrapping), floating values through the
 * functions above, complex values by their real part. */
#define FLOATING_TO(convert, v)                                                \
    _Generic((v),                                                              \
        float: convert((double)(v)),                                           \
        double: convert((double)(v)),                                          \
        complex64_t: convert((double)(v)),                                     \
        complex128_t: convert((double)(v)),                                    \
        default: (int64_t)(v))
#define to_int64(v) FLOATING_TO(double_to_int64, v)
#define to_int32(v) FLOATING_TO(double_to_int32, v)

/* LOAD_x(p): the element at p as its natural C type (the half types as
 * float; bool, spelled "boolean" because <stdbool.h> makes "bool" a macro,
 * as an int 0 or 1 whatever nonzero byte it holds). */
#define LOAD_boolean(p) (*(const uint8_t *)(p) != 0)
#define LOAD_uint8(p) (*(const uint8_t *)(p))
#define LOAD_int8(p) (*(const int8_t *)(p))
#define LOAD_int16(p) (*(const int16_t *)(p))
#define LOAD_int32(p) (*(const int32_t *)(p))
#define LOAD_int64(p) (*(const int64_t *)(p))
#define LOAD_float16(p) wf__half_to_float(*(const uint16_t *)(p))
#define LOAD_bfloat16(p) wf__bfloat16_to_float(*(const uint16_t *)(p))
#define LOAD_float32(p) (*(const float *)(p))
#define LOAD_float64(p) (*(const double *)(p))
#define LOAD_complex64(p) (*(const complex64_t *)(p))
#define LOAD_complex128(p) (*(const complex128_t *)(p))

/* STORE_x(p, v): writes a value of any loaded type as dtype x. */
#define STORE_boolean(p, v) (*(uint8_t *)(p) = (uint8_t)(bool)(v))
#define STORE_uint8(p, v) (*(uint8_t *)(p) = (uint8_t)to_int32(v))
#define STORE_int8(p, v) (*(int8_t *)(p) = (int8_t)to_int32(v))
#define STORE_int16(p, v) (*(int16_t *)(p) = (int16_t)to_int32(v))
#define STORE_int32(p, v) (*(int32_t *)(p) = (int32_t)to_int32(v))
#define STORE_int64(p, v) (*(int64_t *)(p) = to_int64(v))
#define STORE_float16(p, v) (*(uint16_t *)(p) = wf__float_to_half((float)(v)))
#define STORE_bfloat16(p, v) (*(uint16_t *)(p) = wf__float_to_bfloat16((float)(v)))
#define STORE_float32(p, v) (*(float *)(p) = (float)(v))
#define STORE_float64(p, v) (*(double *)(p) = (double)(v))
#define STORE_complex64(p, v) (*(complex64_t *)(p) = (complex64_t)(v))
#define STORE_complex128(p, v) (*(complex128_t *)(p) = (complex128_t)(v))

/* Element sizes as constants, so the unit-stride loops index with them. */
#define SIZE_boolean 1
#define SIZE_uint8 1
#define SIZE_int8 1
#define SIZE_int16 2
#define SIZE_int32 4
#define SIZE_int64 8
#define SIZE_float16 2
#define SIZE_bfloat16 2
#define SIZE_float32 4
#define SIZE_float64 8
#define SIZE_complex64 8
#define SIZE_complex128 16

/* The dtypes in weft_dtype order, applied as X(arg, name).  The second copy
 * exists only because a macro cannot expand itself: the pair table is a
 * loop over this list inside a loop over the same list. */
#define FOR_EACH_DTYPE(X, arg)                                                 \
    X(arg, boolean) X(arg, uint8) X(arg, int8) X(arg, int16) X(arg, int32)        \
    X(arg, int64) X(arg, float16) X(arg, bfloat16) X(arg, float32)             \
    X(arg, float64) X(arg, complex64) X(arg, complex128)
#define FOR_EACH_DTYPE_OUTER(X)                                                \
    X(boolean) X(uint8) X(int8) X(int16) X(int32) X(int64) X(float16) X(bfloat16) \
    X(float32) X(float64) X(complex64) X(complex128)

/* ------------------------------------------------------ single elements */

#define DEFINE_LOAD_STORE(unused, name)                                        \
    static double load_double_##name(const void *p)                           \
    {                                                                          \
        return (double)LOAD_##name(p);                                         \
    }                                                                          \
    static void store_double_##name(void *p, double v)                        \
    {                                                                          \
        STORE_##name(p, v);                                                    \
    }
FOR_EACH_DTYPE(DEFINE_LOAD_STORE, _)

#define LOAD_ENTRY(unused, name) load_double_##name,
#define STORE_ENTRY(unused, name) store_double_##name,
static double (*const load_double_table[WEFT_NUM_DTYPES])(const void *) = {
    FOR_EACH_DTYPE(LOAD_ENTRY, _)};
static void (*const store_double_table[WEFT_NUM_DTYPES])(void *, double) = {
    FOR_EACH_DTYPE(STORE_ENTRY, _)};

double wf__load_double(const void *p, weft_dtype dtype)
{
    if ((int)dtype < 0 || dtype >= WEFT_NUM_DTYPES)
        return 0.0;
    return load_double_table[dtype](p);
}

void wf__store_double(void *p, weft_dtype dtype, double v)
{
    if ((int)dtype >= 0 && dtype < WEFT_NUM_DTYPES)
        store_double_table[dtype](p, v);
}

/* ------------------------------------------------------ runs of elements */

/* Converts n elements along one dimension; strides are in bytes.  The unit
 * stride loop is separate so that the compiler can vectorise it. */
typedef void (*convert_fn)(char *dst, int64_t dst_stride, const char *src, int64_t src_stride,
                           int64_t n);

#define DEFINE_CONVERT(src, dst)                                                          \
    static void convert_##src##_##dst(char *restrict d, int64_t ds, const char *restrict s, \
                                      int64_t ss, int64_t n)                              \
    {                                                                                     \
        if (ds == SIZE_##dst && ss == SIZE_##src) {                                       \
            for (int64_t i = 0; i < n; i++)                                               \
                STORE_##dst(d + i * SIZE_##dst, LOAD_##src(s + i * SIZE_##src));          \
        } else {                                                                          \
            for (int64_t i = 0; i < n; i++)                                               \
                STORE_##dst(d + i * ds, LOAD_##src(s + i * ss));                          \
        }                                                                                 \
    }
#define DEFINE_CONVERT_ROW(src) FOR_EACH_DTYPE(DEFINE_CONVERT, src)
FOR_EACH_DTYPE_OUTER(DEFINE_CONVERT_ROW)

#define CONVERT_ENTRY(src, dst) convert_##src##_##dst,
#define CONVERT_ROW_ENTRY(src) {FOR_EACH_DTYPE(CONVERT_ENTRY, src)},
static const convert_fn convert_table[WEFT_NUM_DTYPES][WEFT_NUM_DTYPES] = {
    FOR_EACH_DTYPE_OUTER(CONVERT_ROW_ENTRY)};

/* Same-dtype copies move bits, so that NaN payloads and non-canonical bools
 * survive and nothing is rounded twice. */
typedef struct bytes16 {
    uint64_t lo, hi;
} bytes16;

#define DEFINE_RAW_COPY(type)                                                              \
    static void raw_copy_##type(char *d, int64_t ds, const char *s, int64_t ss, int64_t n) \
    {                                                                                      \
        if (ds == (int64_t)sizeof(type) && ss == ds) { /* a run: one memcpy */             \
            memcpy(d, s, (size_t)n * sizeof(type));                                        \
            return;                                                                        \
        }                                                                                  \
        if (ds == (int64_t)sizeof(type) && ss == 0) {                                      \
            /* a broadcast source (an expanded gradient made contiguous): one             \
             * value stored n times, a loop the compiler vectorises */                     \
            type v;                                                                        \
            memcpy(&v, s, sizeof v);                                                       \
            for (int64_t i = 0; i < n; i++)                                                \
                memcpy(d + i * (int64_t)sizeof(type), &v, sizeof(type));                   \
            return;                                                                        \
        }                                                                                  \
        for (int64_t i = 0; i < n; i++)                                                    \
            memcpy(d + i * ds, s + i * ss, sizeof(type));                                  \
    }
DEFINE_RAW_COPY(uint8_t)
DEFINE_RAW_COPY(uint16_t)
DEFINE_RAW_COPY(uint32_t)
DEFINE_RAW_COPY(uint64_t)
DEFINE_RAW_COPY(bytes16)

static convert_fn raw_copy_for(size_t size)
{
    switch (size) {
    case 1: return raw_copy_uint8_t;
    case 2: return raw_copy_uint16_t;
    case 4: return raw_copy_uint32_t;
    case 8: return raw_copy_uint64_t;
    default: return raw_copy_bytes16;
    }
}

/* ------------------------------------------------------ the strided copy */

/* The byte range [*lo, *hi) that t's elements occupy in its storage. */
static void byte_span(const weft_tensor *t, int64_t *lo, int64_t *hi)
{
    int64_t item = (int64_t)weft_dtype_size(t->dtype);
    int64_t first = t->storage_offset, last = t->storage_offset;
    for (int i = 0; i < t->ndim; i++) {
        int64_t reach = (t->sizes[i] - 1) * t->strides[i];
        if (reach < 0)
            first += reach;
        else
            last += reach;
    }
    *lo = first * item;
    *hi = (last + 1) * item;
}

static bool may_overlap(const weft_tensor *a, const weft_tensor *b)
{
    if (a->storage != b->storage)
        return false;
    int64_t alo, ahi, blo, bhi;
    byte_span(a, &alo, &ahi);
    byte_span(b, &blo, &bhi);
    return alo < bhi && blo < ahi;
}

/* The copy's geometry after broadcasting: dst's sizes with both byte
 * strides, size-1 dims dropped and adjacent dims merged where both tensors
 * step through them as one, so a contiguous copy is a single run. */
typedef struct copy_geometry {
    int ndim;
    int64_t sizes[WEFT_MAX_DIMS];
    int64_t dst_strides[WEFT_MAX_DIMS];
    int64_t src_strides[WEFT_MAX_DIMS];
} copy_geometry;

static int plan_copy(copy_geometry *g, const weft_tensor *dst, const weft_tensor *src)
{
    int lead = dst->ndim - src->ndim;
    int64_t dsize = (int64_t)weft_dtype_size(dst->dtype);
    int64_t ssize = (int64_t)weft_dtype_size(src->dtype);
    bool fits = lead >= 0;
    /* an empty copy is only checked: beside a 0-sized dimension the others
     * may be as large as int64 allows, and their stride times size times
     * element size overflow (fuzz_call_boxed's UBSan finding: pad of an
     * empty tensor with a 2^62 dimension) */
    bool empty = dst->numel == 0;
    g->ndim = 0;
    for (int i = 0; fits && i < dst->ndim; i++) {
        int64_t n = dst->sizes[i], src_stride = 0;
        if (i >= lead) {
            int64_t m = src->sizes[i - lead];
            if (m == n)
                src_stride = src->strides[i - lead];
            else if (m != 1)
                fits = false;
        }
        if (n == 1 || empty)
            continue;
        int k = g->ndim;
        if (k > 0 && g->dst_strides[k - 1] == dst->strides[i] * dsize * n &&
            g->src_strides[k - 1] == src_stride * ssize * n) {
            /* dimension i continues dimension k-1: merge them */
            g->sizes[k - 1] *= n;
            g->dst_strides[k - 1] = dst->strides[i] * dsize;
            g->src_strides[k - 1] = src_stride * ssize;
            continue;
        }
        g->sizes[k] = n;
        g->dst_strides[k] = dst->strides[i] * dsize;
        g->src_strides[k] = src_stride * ssize;
        g->ndim++;
    }
    if (!fits) {
        char sbuf[256], dbuf[256];
        return wf__errorf(WEFT_ESHAPE,
                          "copy_: the source's shape %s cannot be broadcast to the destination's "
                          "shape %s",
                          wf__shape_str(sbuf, sizeof sbuf, src->sizes, src->ndim),
                          wf__shape_str(dbuf, sizeof dbuf, dst->sizes, dst->ndim));
    }
    return 0;
}

enum { TILE = 16 }; /* elements: a cache line of float32; measured best of 16, 32, 64 */

/* The two innermost dims of a copy: rows x cols, with cols the inner loop. */
static void copy_plane(convert_fn fn, char *d, const char *s, int64_t rows, int64_t cols,
                       int64_t d_row, int64_t d_col, int64_t s_row, int64_t s_col)
{
    /* When the source runs along rows but the destination along columns (a
     * transpose), whole-row runs read one element per cache line and evict
     * it before the next row wants the rest; square tiles keep both sides'
     * lines in cache. */
    /* A source whose rows are all one (s_row 0: a broadcast bias, say) is
     * no transpose: its row stays in cache, and whole-row runs are single
     * memcpys (20x faster than tiles for a [64, 256] bias). */
    bool tiled = rows >= TILE && cols >= TILE && s_row != 0 && llabs(s_row) < llabs(s_col);
    int64_t tile_rows = tiled ? TILE : rows, tile_cols = tiled ? TILE : cols;
    for (int64_t r0 = 0; r0 < rows; r0 += tile_rows)
        for (int64_t c0 = 0; c0 < cols; c0 += tile_cols) {
            int64_t r1 = r0 + tile_rows < rows ? r0 + tile_rows : rows;
            int64_t n = c0 + tile_cols < cols ? tile_cols : cols - c0;
            for (int64_t r = r0; r < r1; r++)
                fn(d + r * d_row + c0 * d_col, d_col, s + r * s_row + c0 * s_col, s_col, n);
        }
}

/* A copy's work in units: whole planes (the two innermost dims) when there
 * are several, else TILE-row bands of the one plane, else COLS-element
 * runs of the one row.  Pieces of units run on a pool: each unit writes
 * its own part of the destination. */
typedef struct copy_work {
    const copy_geometry *g;
    convert_fn fn;
    char *d;
    const char *s;
    int row, col;     /* the plane's dims in g (row < 0: a single row) */
    int64_t planes;   /* product of the dims above row */
    int64_t rows;     /* rows of a plane */
} copy_work;

/* planes [a, b): the first one's offsets from its index, then counting */
static void copy_planes(int64_t a, int64_t b, void *arg)
{
    const copy_work *w = arg;
    const copy_geometry *g = w->g;
    int row = w->row, col = w->col;
    int64_t d_row = row >= 0 ? g->dst_strides[row] : 0, s_row = row >= 0 ? g->src_strides[row] : 0;
    int64_t index[WEFT_MAX_DIMS] = {0}, rest = a;
    char *d = w->d;
    const char *s = w->s;
    for (int i = row - 1; i >= 0; i--) {
        index[i] = rest % g->sizes[i];
        rest /= g->sizes[i];
        d += index[i] * g->dst_strides[i];
        s += index[i] * g->src_strides[i];
    }
    for (int64_t k = a; k < b; k++) {
        copy_plane(w->fn, d, s, w->rows, g->sizes[col], d_row, g->dst_strides[col], s_row,
                   g->src_strides[col]);
        for (int i = row - 1; i >= 0; i--) {
            if (++index[i] < g->sizes[i]) {
                d += g->dst_strides[i];
                s += g->src_strides[i];
                break;
            }
            index[i] = 0;
            d -= g->dst_strides[i] * (g->sizes[i] - 1);
            s -= g->src_strides[i] * (g->sizes[i] - 1);
        }
    }
}

/* bands [a, b) of TILE rows of the single plane */
static void copy_bands(int64_t a, int64_t b, void *arg)
{
    const copy_work *w = arg;
    const copy_geometry *g = w->g;
    int64_t r0 = a * TILE, r1 = b * TILE < w->rows ? b * TILE : w->rows;
    int64_t d_row = g->dst_strides[w->row], s_row = g->src_strides[w->row];
    copy_plane(w->fn, w->d + r0 * d_row, w->s + r0 * s_row, r1 - r0, g->sizes[w->col], d_row,
               g->dst_strides[w->col], s_row, g->src_strides[w->col]);
}

/* columns [a, b) of COLS elements of a single row (a contiguous tensor
 * converted to another dtype merges into one) */
enum { COLS = 4096 };
static void copy_cols(int64_t a, int64_t b, void *arg)
{
    const copy_work *w = arg;
    const copy_geometry *g = w->g;
    int64_t c0 = a * COLS, c1 = b * COLS < g->sizes[w->col] ? b * COLS : g->sizes[w->col];
    w->fn(w->d + c0 * g->dst_strides[w->col], g->dst_strides[w->col],
          w->s + c0 * g->src_strides[w->col], g->src_strides[w->col], c1 - c0);
}

/* Below this many destination bytes a copy stays on the calling thread: a
 * pool's hand-off costs microseconds, which a small copy does not repay. */
enum { PARALLEL_COPY_BYTES = 256 * 1024, PIECE_BYTES = 64 * 1024 };

/* Runs fn over g, on `parallel` when given and the copy is large. */
static void run_copy(const copy_geometry *g, convert_fn fn, char *d, const char *s,
                     int64_t bytes, weft_parallel_for_fn parallel)
{
    if (g->ndim == 0) {
        fn(d, 0, s, 0, 1);
        return;
    }
    copy_work w = {g, fn, d, s, g->ndim - 2, g->ndim - 1, 1, 1};
    w.rows = w.row >= 0 ? g->sizes[w.row] : 1;
    for (int i = 0; i < w.row; i++)
        w.planes *= g->sizes[i];
    if (parallel && bytes >= PARALLEL_COPY_BYTES) {
        if (w.planes > 1) {
            int64_t grain = PIECE_BYTES / (bytes / w.planes > 0 ? bytes / w.planes : 1);
            if (parallel(0, w.planes, grain > 1 ? grain : 1, copy_planes, &w) == 0)
                return;
        } else if (w.row >= 0) {
            int64_t bands = (w.rows + TILE - 1) / TILE;
            int64_t grain = PIECE_BYTES / (bytes / bands > 0 ? bytes / bands : 1);
            if (parallel(0, bands, grain > 1 ? grain : 1, copy_bands, &w) == 0)
                return;
        } else {
            int64_t pieces = (g->sizes[w.col] + COLS - 1) / COLS;
            int64_t grain = PIECE_BYTES / (bytes / pieces > 0 ? bytes / pieces : 1);
            if (parallel(0, pieces, grain > 1 ? grain : 1, copy_cols, &w) == 0)
                return;
        }
        /* a pool that failed ran nothing (weft_parallel_for's pools only
         * fail before starting): the calling thread does it all */
    }
    copy_planes(0, w.planes, &w);
}

/* No element of t is stored where another is (no stride 0 over a size
 * above 1, no interleaving): its strides, sorted, each span the dims below.
 * Pieces of a copy into such a tensor write disjoint bytes. */
static bool writes_each_once(const weft_tensor *t)
{
    int64_t st[WEFT_MAX_DIMS], sz[WEFT_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++)
        if (t->sizes[i] != 1) {
            /* insertion by |stride| */
            int64_t a = llabs(t->strides[i]);
            int k = n++;
            for (; k > 0 && st[k - 1] > a; k--)
                st[k] = st[k - 1], sz[k] = sz[k - 1];
            st[k] = a, sz[k] = t->sizes[i];
        }
    int64_t span = 1;
    for (int i = 0; i < n; i++) {
        if (st[i] < span)
            return false;
        if (__builtin_mul_overflow(st[i], sz[i], &span))
            return false;
    }
    return true;
}

int wf__host_copy(weft_tensor *dst, const weft_tensor *src)
{
    return wf__host_copy_on(dst, src, NULL);
}

int wf__host_copy_on(weft_tensor *dst, const weft_tensor *src, weft_parallel_for_fn parallel)
{
    if (!dst || !src)
        return wf__errorf(WEFT_EINVAL, "copy_: NULL tensor");
    if (dst->device.type != WEFT_DEVICE_TYPE_CPU || src->device.type != WEFT_DEVICE_TYPE_CPU)
        return wf__errorf(WEFT_EDEVICE, "copy_: the host copy needs both tensors on the host");
    if (dst->dtype < 0 || dst->dtype >= WEFT_NUM_DTYPES || src->dtype < 0 ||
        src->dtype >= WEFT_NUM_DTYPES)
        return wf__errorf(WEFT_EDTYPE, "copy_: invalid dtype");
    copy_geometry g;
    int rc = plan_copy(&g, dst, src);
    if (rc < 0 || dst->numel == 0)
        return rc;
    if (may_overlap(dst, src)) {
        /* reading what this copy already wrote would smear values: copy the
         * source aside first */
        weft_tensor *tmp = NULL;
        rc = weft_empty(&tmp, src->sizes, src->ndim, (weft_dtype)src->dtype, WEFT_DEVICE_CPU);
        if (rc == 0)
            rc = wf__host_copy_on(tmp, src, parallel);
        if (rc == 0)
            rc = wf__host_copy_on(dst, tmp, parallel);
        weft_tensor_release(tmp);
        return rc;
    }
    char *d = weft_tensor_data_ptr(dst);
    const char *s = weft_tensor_data_ptr(src);
    size_t item = weft_dtype_size(dst->dtype);
    if (dst->dtype == src->dtype && dst->is_contiguous && src->is_contiguous &&
        dst->numel == src->numel) {
        memcpy(d, s, (size_t)dst->numel * item);
        return 0;
    }
    convert_fn fn = dst->dtype == src->dtype ? raw_copy_for(item)
                                             : convert_table[src->dtype][dst->dtype];
    int64_t bytes = dst->numel * (int64_t)item;
    /* the stride check only where the pool would be used: small copies
     * are most copies, and pay nothing for it */
    run_copy(&g, fn, d, s, bytes,
             parallel && bytes >= PARALLEL_COPY_BYTES && writes_each_once(dst) ? parallel : NULL);
    return 0;
}
