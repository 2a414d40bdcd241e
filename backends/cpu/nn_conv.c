/* backends/cpu/nn_conv.c — conv2d and its input and weight gradients as
 * operators, by im2col and GEMM through single-threaded OpenBLAS.  Each
 * image's output rows are cut into tiles whose columns fit in the L2
 * cache; a task (image, group, tile, or a run of images for the weight
 * gradient) unfolds its columns into a scratch slot and multiplies at
 * once, and slots of tasks run over our pool.  Tiles, tasks and the runs
 * of images the weight gradient sums (their partials added in a fixed
 * order) follow from the shape alone, so results do not depend on the
 * thread count.  1x1 convolutions with unit stride and no padding read
 * the input directly, without im2col; float32 products with a short inner
 * dimension, and weight gradients with a small result (few input
 * channels), use small kernels of our own instead of OpenBLAS (below).
 * float32 convolutions of many channels run through oneDNN instead when
 * WEFT_CPU_CONV lets them (conv_lib.c decides, and runs them).
 * conv1d is a composite over conv2d
 * with a unit height, and conv_transpose2d is the input-gradient operator
 * plus a bias.  Tensors are batched [N, C, H, W]; float16/bfloat16
 * compute in float32. */
#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "backends/conv_extent.h"
#include "conv.h"
#include "nn.h"
#include "vec_math.h"

/* A tile's unfolded columns take about this many bytes (at least 256
 * columns, so that the products stay wide enough for GEMM's kernels). */
#define TILE_BYTES ((int64_t)192 * 1024)
#define TILE_MIN_COLUMNS 256
/* Scratch slots (and at most this many pieces of parallel work) per call:
 * enough for a few pieces per thread on small machines. */
#define MAX_SLOTS 16
/* The weight gradient sums runs of images into this many partials at
 * most; their number depends on the batch size alone. */
#define WEIGHT_CHUNKS 8

static int64_t rows_per_image(const conv_geometry *g)
{
    return g->C * g->KH * g->KW;
}

static bool direct_input(const conv_geometry *g)
{
    return g->KH == 1 && g->KW == 1 && g->stride[0] == 1 && g->stride[1] == 1 &&
           g->padding[0] == 0 && g->padding[1] == 0;
}

/* C = op(A) op(B) + beta C, row-major, float32 or float64, on the
 * calling thread (the tasks are spread over the pool instead). */
static void gemm(weft_dtype dtype, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                 const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c,
                 int64_t ldc)
{
    cpu__gemm_serial(dtype, ta, tb, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

/* Products with a short inner dimension (k <= SMALL_K): a forward with
 * few input channels (k = C/groups x KH x KW, 27 for an RGB 3x3) and the
 * input gradient of few output channels (k = OC/groups).  OpenBLAS packs
 * both operands for every call and spends as long packing a 27-row tile
 * as multiplying it; here the unfolded tile is read in place (16 columns
 * of it stay in L1 while every row block of A passes over them), four
 * rows of C by sixteen columns in registers, each the sum over q in
 * order.  Element (i, q) of A is a[i * ars + q * acs] (W or W^T without a
 * copy); C starts from bias[i] or 0, so no separate pass sets it. */
#define SMALL_K 32
/* The input gradient's product reads W transposed (a column of W per row
 * of the result, stride C KH KW), which the kernel pays for as k grows:
 * measured on one thread (process CPU time, the CNN's 64x16x14x14 layer
 * and others), it beats OpenBLAS by 1.35x at k = 8, ties at 16 and loses
 * by 1.2-1.6x at 32 (weft-train's second convolution), so the backward
 * takes it only up to 16. */
#define SMALL_K_BACKWARD 16

static inline vec_f32 vec_splat(float v)
{
    return (vec_f32){v, v, v, v, v, v, v, v};
}

static void small_k_rows(int64_t i, int64_t rows, int64_t n, int64_t k, const float *a,
                         int64_t ars, int64_t acs, const float *b, int64_t ldb,
                         const float *bias, float *c, int64_t ldc)
{
    int64_t j = 0;
    for (; j + 2 * VLANES <= n; j += 2 * VLANES) {
        vec_f32 acc[4][2];
        for (int64_t r = 0; r < rows; r++)
            acc[r][0] = acc[r][1] = vec_splat(bias ? bias[i + r] : 0.0f);
        for (int64_t q = 0; q < k; q++) {
            vec_f32 b0 = vec_load(b + q * ldb + j), b1 = vec_load(b + q * ldb + j + VLANES);
            for (int64_t r = 0; r < rows; r++) {
                vec_f32 w = vec_splat(a[(i + r) * ars + q * acs]);
                acc[r][0] += w * b0;
                acc[r][1] += w * b1;
            }
        }
        for (int64_t r = 0; r < rows; r++) {
            vec_store(c + (i + r) * ldc + j, acc[r][0]);
            vec_store(c + (i + r) * ldc + j + VLANES, acc[r][1]);
        }
    }
    for (; j < n; j++)
        for (int64_t r = 0; r < rows; r++) {
            float sum = bias ? bias[i + r] : 0.0f;
            for (int64_t q = 0; q < k; q++)
                sum += a[(i + r) * ars + q * acs] * b[q * ldb + j];
            c[(i + r) * ldc + j] = sum;
        }
}

static void small_k_gemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t ars,
                         int64_t acs, const float *b, int64_t ldb, const float *bias, float *c,
                         int64_t ldc)
{
    int64_t i = 0;
    /* four rows at a time as a constant, so that the accumulators stay in
     * registers; the last one to three rows alone */
    for (; i + 4 <= m; i += 4)
        small_k_rows(i, 4, n, k, a, ars, acs, b, ldb, bias, c, ldc);
    for (; i < m; i++)
        small_k_rows(i, 1, n, k, a, ars, acs, b, ldb, bias, c, ldc);
}

/* Products with a small result and a long inner dimension: the weight
 * gradient of few input channels, C[m x n] (+)= A[m x k] B[n x k]^T with
 * n = C/groups x KH x KW (9 for weft-train's first convolution, 1 -> 16
 * channels 3x3) and k an image's output pixels (784).  OpenBLAS packs a
 * 16 x 9 result into its 8 x 6 or 16 x 4 kernel tiles and pads the rest,
 * and repacks both operands per image; here each element of C is a dot
 * product over k, read in place, vectorized along k with a block of
 * SMALL_OUT_ROWS x SMALL_OUT_COLS accumulators (12 of the 16 AVX2
 * registers; 7 loads a step feed 12 FMAs), and the lanes summed once at
 * the end in a fixed order: the bits depend on the shape alone. */
/* Measured on one thread against OpenBLAS (process CPU time, batch 64,
 * 28x28, 3x3, docs/benchmarks.md): 2.1-2.6x faster at n = 9 with 16
 * output channels (weft-train's layer), 1.6x with 64; 1.6x at n = 27,
 * 1.3-2.0x at 36 and 63; wider inputs (8 channels and more) go to oneDNN
 * under auto anyway. */
#define SMALL_OUT_MAX 64
#define SMALL_OUT_ROWS 4
#define SMALL_OUT_COLS 3

static inline float lanes_sum(vec_f32 v)
{
    vec_f32 s = v;
    float t = 0.0f;
    for (int l = 0; l < VLANES; l++)
        t += s[l];
    return t;
}

static inline __attribute__((always_inline)) void
small_out_block(int64_t i, int64_t rows, int64_t r, int64_t cols, int64_t k, const float *a,
                int64_t lda, const float *b, int64_t ldb, bool add, float *c, int64_t ldc)
{
    vec_f32 acc[SMALL_OUT_ROWS][SMALL_OUT_COLS];
    for (int64_t x = 0; x < rows; x++)
        for (int64_t y = 0; y < cols; y++)
            acc[x][y] = vec_splat(0.0f);
    int64_t q = 0;
    for (; q + VLANES <= k; q += VLANES) {
        vec_f32 bv[SMALL_OUT_COLS];
        for (int64_t y = 0; y < cols; y++)
            bv[y] = vec_load(b + (r + y) * ldb + q);
        for (int64_t x = 0; x < rows; x++) {
            vec_f32 av = vec_load(a + (i + x) * lda + q);
            for (int64_t y = 0; y < cols; y++)
                acc[x][y] += av * bv[y];
        }
    }
    for (int64_t x = 0; x < rows; x++)
        for (int64_t y = 0; y < cols; y++) {
            float sum = lanes_sum(acc[x][y]);
            for (int64_t t = q; t < k; t++)
                sum += a[(i + x) * lda + t] * b[(r + y) * ldb + t];
            float *out = c + (i + x) * ldc + r + y;
            *out = add ? *out + sum : sum;
        }
}

static void small_out_gemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                           const float *b, int64_t ldb, bool add, float *c, int64_t ldc)
{
    /* whole blocks with constant sizes, so that the accumulators stay in
     * registers; the edges one row or column at a time */
    int64_t i = 0;
    for (; i + SMALL_OUT_ROWS <= m; i += SMALL_OUT_ROWS) {
        int64_t r = 0;
        for (; r + SMALL_OUT_COLS <= n; r += SMALL_OUT_COLS)
            small_out_block(i, SMALL_OUT_ROWS, r, SMALL_OUT_COLS, k, a, lda, b, ldb, add, c, ldc);
        for (; r < n; r++)
            small_out_block(i, SMALL_OUT_ROWS, r, 1, k, a, lda, b, ldb, add, c, ldc);
    }
    for (; i < m; i++) {
        int64_t r = 0;
        for (; r + SMALL_OUT_COLS <= n; r += SMALL_OUT_COLS)
            small_out_block(i, 1, r, SMALL_OUT_COLS, k, a, lda, b, ldb, add, c, ldc);
        for (; r < n; r++)
            small_out_block(i, 1, r, 1, k, a, lda, b, ldb, add, c, ldc);
    }
}

/* rows x cols of c (leading dimension ldc) set to values[row], each */
static void fill_rows(weft_dtype dt, char *c, int64_t rows, int64_t cols, int64_t ldc,
                      const char *values)
{
    for (int64_t i = 0; i < rows; i++) {
        if (dt == WEFT_FLOAT32) {
            float *r = (float *)c + i * ldc, v = ((const float *)values)[i];
            for (int64_t q = 0; q < cols; q++)
                r[q] = v;
        } else {
            double *r = (double *)c + i * ldc, v = ((const double *)values)[i];
            for (int64_t q = 0; q < cols; q++)
                r[q] = v;
        }
    }
}

/* The output columns ow in [*lo, *hi) whose input column iw0 + ow * stride
 * lies inside [0, W); the others read padding.  *hi may be below *lo. */
static void inside_columns(const conv_geometry *g, int64_t iw0, int64_t *lo, int64_t *hi)
{
    int64_t sw = g->stride[1];
    int64_t first = iw0 >= 0 ? 0 : (-iw0 + sw - 1) / sw;
    int64_t last = g->W - 1 - iw0 < 0 ? -1 : (g->W - 1 - iw0) / sw; /* the last inside */
    *lo = first < g->OW ? first : g->OW;
    *hi = last + 1 < g->OW ? last + 1 : g->OW;
}

/* im2col of one image's rows [r0, r1) (row r: channel r / (KH KW) and one
 * kernel offset) for output rows [oh0, oh1), into col of (r1 - r0) rows of
 * (oh1 - oh0) OW columns; col2im adds such columns back into the image
 * (whose channels the caller zeroed). */
#define DEFINE_TILES(NAME, T)                                                                \
    static void im2col_##NAME(const conv_geometry *g, const void *image, int64_t r0,         \
                              int64_t r1, int64_t oh0, int64_t oh1, void *col)               \
    {                                                                                        \
        int64_t KK = g->KH * g->KW, sw = g->stride[1];                                       \
        T *dst = col;                                                                        \
        for (int64_t r = r0; r < r1; r++) {                                                  \
            int64_t c = r / KK, kh = (r / g->KW) % g->KH, kw = r % g->KW;                    \
            const T *x = (const T *)image + c * g->H * g->W;                                 \
            int64_t iw0 = kw * g->dilation[1] - g->padding[1], lo, hi;                       \
            inside_columns(g, iw0, &lo, &hi);                                                \
            for (int64_t oh = oh0; oh < oh1; oh++, dst += g->OW) {                           \
                int64_t ih = oh * g->stride[0] - g->padding[0] + kh * g->dilation[0];        \
                if (ih < 0 || ih >= g->H) {                                                  \
                    memset(dst, 0, (size_t)g->OW * sizeof(T));                               \
                    continue;                                                                \
                }                                                                            \
                const T *src = x + ih * g->W;                                                \
                for (int64_t ow = 0; ow < lo; ow++)                                          \
                    dst[ow] = 0;                                                             \
                if (sw == 1) {                                                               \
                    if (hi > lo)                                                             \
                        memcpy(dst + lo, src + iw0 + lo, (size_t)(hi - lo) * sizeof(T));     \
                } else {                                                                     \
                    for (int64_t ow = lo; ow < hi; ow++)                                     \
                        dst[ow] = src[iw0 + ow * sw];                                        \
                }                                                                            \
                for (int64_t ow = hi > lo ? hi : lo; ow < g->OW; ow++)                       \
                    dst[ow] = 0;                                                             \
            }                                                                                \
        }                                                                                    \
    }                                                                                        \
    static void col2im_##NAME(const conv_geometry *g, void *image, int64_t r0, int64_t r1,   \
                              int64_t oh0, int64_t oh1, const void *col)                     \
    {                                                                                        \
        int64_t KK = g->KH * g->KW, sw = g->stride[1];                                       \
        const T *src = col;                                                                  \
        for (int64_t r = r0; r < r1; r++) {                                                  \
            int64_t c = r / KK, kh = (r / g->KW) % g->KH, kw = r % g->KW;                    \
            T *x = (T *)image + c * g->H * g->W;                                             \
            int64_t iw0 = kw * g->dilation[1] - g->padding[1], lo, hi;                       \
            inside_columns(g, iw0, &lo, &hi);                                                \
            for (int64_t oh = oh0; oh < oh1; oh++, src += g->OW) {                           \
                int64_t ih = oh * g->stride[0] - g->padding[0] + kh * g->dilation[0];        \
                if (ih < 0 || ih >= g->H)                                                    \
                    continue;                                                                \
                T *row = x + ih * g->W;                                                      \
                if (sw == 1) {                                                               \
                    T *rw = row + iw0;                                                       \
                    for (int64_t ow = lo; ow < hi; ow++)                                     \
                        rw[ow] += src[ow];                                                   \
                } else {                                                                     \
                    for (int64_t ow = lo; ow < hi; ow++)                                     \
                        row[iw0 + ow * sw] += src[ow];                                       \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
    }
DEFINE_TILES(float32, float)
DEFINE_TILES(float64, double)

typedef void (*im2col_fn)(const conv_geometry *g, const void *image, int64_t r0, int64_t r1,
                          int64_t oh0, int64_t oh1, void *col);
typedef void (*col2im_fn)(const conv_geometry *g, void *image, int64_t r0, int64_t r1,
                          int64_t oh0, int64_t oh1, const void *col);
static const im2col_fn im2col_tiles[WEFT_NUM_DTYPES] = {[WEFT_FLOAT32] = im2col_float32,
                                                        [WEFT_FLOAT64] = im2col_float64};
static const col2im_fn col2im_tiles[WEFT_NUM_DTYPES] = {[WEFT_FLOAT32] = col2im_float32,
                                                        [WEFT_FLOAT64] = col2im_float64};

/* ------------------------------------------------------------ tasks */

/* One call's work: `tasks` tasks cut into `slots` contiguous runs, each
 * run done by one thread with its own scratch slot (an im2col tile).  A
 * task's result does not depend on which slot or thread runs it. */
typedef struct conv_job {
    const conv_geometry *g;
    weft_dtype dt;
    size_t es;
    bool direct;            /* B read straight from the input: no im2col */
    int64_t tile_rows;      /* output rows per tile */
    int64_t tiles;          /* tiles per image */
    int64_t cblocks;        /* backward input: channel blocks per group */
    int64_t chunks;         /* backward weight: runs of images */
    int64_t tasks, slots;
    size_t slot_bytes;
    char *scratch;          /* slots x slot_bytes; NULL when direct */
    const char *x, *w, *go, *bias;
    char *out;
    void (*task)(const struct conv_job *j, int64_t t, char *scratch);
} conv_job;

/* Output rows per tile: about TILE_BYTES of one group's columns, the
 * tiles of an image as even as the rows allow.  A direct convolution has
 * no columns to keep in cache: one tile per image. */
static int64_t tile_rows(const conv_geometry *g, size_t es, bool direct)
{
    if (direct)
        return g->OH;
    int64_t row_bytes = rows_per_image(g) / g->groups * g->OW * (int64_t)es;
    int64_t rows = TILE_BYTES / (row_bytes > 0 ? row_bytes : 1);
    int64_t least = (TILE_MIN_COLUMNS + g->OW - 1) / g->OW;
    rows = rows < least ? least : rows;
    rows = rows > g->OH ? g->OH : rows;
    int64_t tiles = (g->OH + rows - 1) / rows;
    return (g->OH + tiles - 1) / tiles;
}

static void job_init(conv_job *j, const conv_geometry *g, weft_dtype dt)
{
    memset(j, 0, sizeof *j);
    j->g = g;
    j->dt = dt;
    j->es = weft_dtype_size(dt);
    j->direct = direct_input(g);
    j->tile_rows = tile_rows(g, j->es, j->direct);
    j->tiles = (g->OH + j->tile_rows - 1) / j->tile_rows;
}

/* the output rows [*oh0, *oh1) of tile `tile`; returns its columns */
static int64_t tile_span(const conv_job *j, int64_t tile, int64_t *oh0, int64_t *oh1)
{
    *oh0 = tile * j->tile_rows;
    *oh1 = *oh0 + j->tile_rows < j->g->OH ? *oh0 + j->tile_rows : j->g->OH;
    return (*oh1 - *oh0) * j->g->OW;
}

static void slot_range(int64_t begin, int64_t end, void *ctx)
{
    const conv_job *j = ctx;
    for (int64_t s = begin; s < end; s++) {
        char *scratch = j->scratch ? j->scratch + (size_t)s * j->slot_bytes : NULL;
        for (int64_t t = s * j->tasks / j->slots; t < (s + 1) * j->tasks / j->slots; t++)
            j->task(j, t, scratch);
    }
}

/* Runs the job's tasks over the pool, each slot with a scratch tile of
 * `rows` unfolded rows (none when direct); flops: the whole job's. */
static int run_job(conv_job *j, int64_t rows, double flops)
{
    j->slots = j->tasks < MAX_SLOTS ? j->tasks : MAX_SLOTS;
    if (j->slots < 1)
        return 0;
    weft_tensor *scratch = NULL;
    if (!j->direct) {
        /* whole cache lines per slot, so that slots never share one */
        size_t bytes = (size_t)(rows * j->tile_rows * j->g->OW) * j->es;
        j->slot_bytes = (bytes + 63) / 64 * 64;
        int64_t numel = (int64_t)(j->slot_bytes / j->es) * j->slots;
        int rc = weft_empty(&scratch, &numel, 1, j->dt, WEFT_DEVICE_CPU);
        if (rc < 0)
            return rc;
        j->scratch = weft_tensor_data_ptr(scratch);
    }
    /* a slot's share must be worth a wake-up (~2^19 flops) */
    double per_slot = flops / (double)j->slots;
    int64_t grain = per_slot >= (double)(1 << 19) ? 1 : (int64_t)((1 << 19) / (per_slot + 1)) + 1;
    cpu__parallel_for(0, j->slots, grain, slot_range, j);
    weft_tensor_release(scratch);
    return 0;
}
/* ------------------------------------------------------------ arguments */

/* stride, padding, dilation, groups from args[first..first+3] */
static int parse_params(const char *op, const weft_value *args, conv_geometry *g)
{
    int rc = cpu__pair_arg(op, "stride", &args[0], NULL, 1, g->stride);
    if (rc == 0)
        rc = cpu__pair_arg(op, "padding", &args[1], NULL, 0, g->padding);
    if (rc == 0)
        rc = cpu__pair_arg(op, "dilation", &args[2], NULL, 1, g->dilation);
    if (rc < 0)
        return rc;
    g->groups = args[3].u.i;
    if (g->groups < 1)
        return weft_set_error(WEFT_EINVAL, "%s: groups must be positive, got %lld", op,
                              (long long)g->groups);
    /* the products below run through the library WEFT_CPU_GEMM chose */
    return cpu__gemm_library_ready(op);
}

/* Fills in and checks the geometry from input sizes [N, C, H, W] and
 * weight sizes [OC, C / groups, KH, KW]. */
static int finish_geometry(const char *op, const int64_t *in, int in_nd, const int64_t *w,
                           int w_nd, conv_geometry *g)
{
    char b1[128], b2[128];
    if (in_nd != 4)
        return weft_set_error(WEFT_ESHAPE, "%s: expected a 4-D (batched) input [N, C, H, W], got "
                              "%s", op, weft_format_shape(b1, sizeof b1, in, in_nd));
    if (w_nd != 4)
        return weft_set_error(WEFT_ESHAPE, "%s: expected a 4-D weight [out_channels, "
                              "in_channels / groups, kH, kW], got %s", op,
                              weft_format_shape(b1, sizeof b1, w, w_nd));
    g->N = in[0], g->C = in[1], g->H = in[2], g->W = in[3];
    g->OC = w[0], g->KH = w[2], g->KW = w[3];
    /* the weight's channels times groups, checked: beside a 0-sized dim a
     * size may be near int64's limit (fuzz_call_boxed's UBSan finding) */
    int64_t wc;
    if (__builtin_mul_overflow(w[1], g->groups, &wc) || g->C != wc ||
        g->OC % g->groups != 0 || g->OC == 0)
        return weft_set_error(WEFT_ESHAPE, "%s: weight of shape %s with groups=%lld does not fit "
                              "an input of shape %s (expected %lld x %lld input channels, and "
                              "output channels divisible by groups)", op,
                              weft_format_shape(b1, sizeof b1, w, 4), (long long)g->groups,
                              weft_format_shape(b2, sizeof b2, in, 4), (long long)w[1],
                              (long long)g->groups);
    int64_t eh, ew;
    if (!conv_padded_extent(g->H, g->padding[0], g->dilation[0], g->KH, &eh) ||
        !conv_padded_extent(g->W, g->padding[1], g->dilation[1], g->KW, &ew))
        return weft_set_error(WEFT_EINVAL, "%s: padding [%lld, %lld] and dilation [%lld, %lld] "
                              "with input %s and weight %s give sizes past int64's range", op,
                              (long long)g->padding[0], (long long)g->padding[1],
                              (long long)g->dilation[0], (long long)g->dilation[1],
                              weft_format_shape(b1, sizeof b1, in, 4),
                              weft_format_shape(b2, sizeof b2, w, 4));
    if (eh < 1 || ew < 1 || g->KH < 1 || g->KW < 1)
        return weft_set_error(WEFT_ESHAPE, "%s: the kernel (dilated) is larger than the padded "
                              "input %s", op, weft_format_shape(b1, sizeof b1, in, 4));
    g->OH = (eh - 1) / g->stride[0] + 1;
    g->OW = (ew - 1) / g->stride[1] + 1;
    if (g->OH * g->OW > INT_MAX || rows_per_image(g) > INT_MAX || g->OC > INT_MAX)
        return weft_set_error(WEFT_EOVERFLOW, "%s: the problem is too large for BLAS", op);
    return 0;
}


/* ------------------------------------------------------------ forward */

/* task (image, group, tile): Y_g[:, tile] = bias + W_g cols_g[:, tile] */
static void forward_task(const conv_job *j, int64_t t, char *scratch)
{
    const conv_geometry *g = j->g;
    int64_t tile = t % j->tiles, gr = t / j->tiles % g->groups, b = t / (j->tiles * g->groups);
    int64_t L = g->OH * g->OW, Rg = rows_per_image(g) / g->groups, OCg = g->OC / g->groups;
    int64_t Cg = g->C / g->groups, oh0, oh1, cols = tile_span(j, tile, &oh0, &oh1);
    size_t es = j->es;
    const char *image = j->x + (size_t)(b * g->C * g->H * g->W) * es, *bmat = scratch;
    int64_t ldb = cols;
    if (j->direct) { /* H W = L */
        bmat = image + (size_t)(gr * Cg * L + oh0 * g->OW) * es;
        ldb = L;
    } else {
        im2col_tiles[j->dt](g, image, gr * Rg, (gr + 1) * Rg, oh0, oh1, scratch);
    }
    char *c = j->out + (size_t)((b * g->OC + gr * OCg) * L + oh0 * g->OW) * es;
    if (j->dt == WEFT_FLOAT32 && Rg <= SMALL_K) {
        small_k_gemm(OCg, cols, Rg, (const float *)j->w + gr * OCg * Rg, Rg, 1,
                     (const float *)bmat, ldb,
                     j->bias ? (const float *)j->bias + gr * OCg : NULL, (float *)c, L);
        return;
    }
    /* the bias written just before the product reads it: still in cache */
    if (j->bias)
        fill_rows(j->dt, c, OCg, cols, L, j->bias + (size_t)(gr * OCg) * es);
    gemm(j->dt, false, false, OCg, cols, Rg, j->w + (size_t)(gr * OCg * Rg) * es, Rg, bmat, ldb,
         j->bias ? 1.0 : 0.0, c, L);
}

static int conv_forward(const conv_geometry *g, weft_dtype dt, bool onednn, const weft_tensor *x,
                        const weft_tensor *w, const weft_tensor *bias, weft_tensor *out)
{
    weft_tensor *bt = NULL;
    int rc = bias ? cpu__operand(&bt, bias, dt) : 0;
    if (rc < 0)
        return rc;
    if (onednn) {
        rc = cpu__conv_onednn("conv2d", CPU_CONV_FORWARD, g, weft_tensor_data_ptr(x),
                              weft_tensor_data_ptr(w), bt ? weft_tensor_data_ptr(bt) : NULL,
                              weft_tensor_data_ptr(out));
        weft_tensor_release(bt);
        return rc;
    }
    conv_job j;
    job_init(&j, g, dt);
    j.tasks = g->N * g->groups * j.tiles;
    j.x = weft_tensor_data_ptr(x);
    j.w = weft_tensor_data_ptr(w);
    j.bias = bt ? weft_tensor_data_ptr(bt) : NULL;
    j.out = weft_tensor_data_ptr(out);
    j.task = forward_task;
    rc = run_job(&j, rows_per_image(g) / g->groups,
                 2.0 * (double)(g->N * g->OC * g->OH * g->OW) * (double)rows_per_image(g) /
                     (double)g->groups);
    weft_tensor_release(bt);
    return rc;
}
/* conv2d(input, weight, bias?, stride, padding, dilation, groups) */
static int conv2d_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "conv2d";
    const weft_tensor *input = call->args[0].u.tensor, *weight = call->args[1].u.tensor;
    const weft_tensor *bias = call->args[2].tag == WEFT_VALUE_TENSOR ? call->args[2].u.tensor : NULL;
    conv_geometry g;
    weft_dtype dt;
    int rc = cpu__check_floating(op, "input", input, &dt);
    if (rc == 0)
        rc = cpu__check_cpu(op, "weight", weight);
    if (rc == 0 && bias)
        rc = cpu__check_cpu(op, "bias", bias);
    if (rc == 0)
        rc = parse_params(op, call->args + 3, &g);
    if (rc == 0)
        rc = finish_geometry(op, weft_tensor_sizes(input), weft_tensor_ndim(input),
                             weft_tensor_sizes(weight), weft_tensor_ndim(weight), &g);
    if (rc < 0)
        return rc;
    weft_dtype dtype = weft_tensor_dtype(input);
    if (weft_tensor_dtype(weight) != dtype || (bias && weft_tensor_dtype(bias) != dtype))
        return weft_set_error(WEFT_EDTYPE, "%s: input, weight and bias must have the same dtype "
                              "(input is %s, weight %s)", op, weft_dtype_name(dtype),
                              weft_dtype_name(weft_tensor_dtype(weight)));
    if (bias && (weft_tensor_ndim(bias) != 1 || weft_tensor_size(bias, 0) != g.OC))
        return weft_set_error(WEFT_ESHAPE, "%s: bias must be a 1-D tensor of %lld elements", op,
                              (long long)g.OC);
    int library = cpu__conv_library_choose(op, dt, &g);
    if (library < 0)
        return library;
    weft_tensor *x = NULL, *w = NULL, *out = NULL;
    int64_t shape[4] = {g.N, g.OC, g.OH, g.OW};
    if ((rc = cpu__operand(&x, input, dt)) == 0 && (rc = cpu__operand(&w, weight, dt)) == 0 &&
        (rc = weft_empty(&out, shape, 4, dt, WEFT_DEVICE_CPU)) == 0 && g.N > 0)
        rc = conv_forward(&g, dt, library == 1, x, w, bias, out);
    weft_tensor_release(x);
    weft_tensor_release(w);
    if (rc < 0) {
        weft_tensor_release(out);
        return rc;
    }
    return cpu__set_result(call, 0, out, dtype);
}

/* ------------------------------------------------------------ backward */

/* The geometry of a backward operator: grad_output, a tensor (weight or
 * input), the other's sizes, then stride, padding, dilation, groups. */
static int backward_setup(weft_call *call, bool for_input, conv_geometry *g, weft_dtype *dt,
                          bool *onednn, weft_tensor **go, weft_tensor **other)
{
    const char *op = weft_op_name(call->op);
    const weft_tensor *grad = call->args[0].u.tensor, *t = call->args[1].u.tensor;
    const weft_value *sizes = &call->args[2];
    int rc = cpu__check_floating(op, "grad_output", grad, dt);
    if (rc == 0)
        rc = cpu__check_cpu(op, for_input ? "weight" : "input", t);
    if (rc == 0)
        rc = parse_params(op, call->args + 3, g);
    if (rc < 0)
        return rc;
    if (for_input)
        rc = finish_geometry(op, sizes->u.ints, sizes->len, weft_tensor_sizes(t),
                             weft_tensor_ndim(t), g);
    else
        rc = finish_geometry(op, weft_tensor_sizes(t), weft_tensor_ndim(t), sizes->u.ints,
                             sizes->len, g);
    if (rc < 0)
        return rc;
    const int64_t *gs = weft_tensor_sizes(grad);
    if (weft_tensor_ndim(grad) != 4 || gs[0] != g->N || gs[1] != g->OC || gs[2] != g->OH ||
        gs[3] != g->OW) {
        char b[128];
        return weft_set_error(WEFT_ESHAPE, "%s: grad_output of shape %s, expected [%lld, %lld, "
                              "%lld, %lld]", op,
                              weft_format_shape(b, sizeof b, gs, weft_tensor_ndim(grad)),
                              (long long)g->N, (long long)g->OC, (long long)g->OH, (long long)g->OW);
    }
    if ((rc = cpu__conv_library_choose(op, *dt, g)) < 0)
        return rc;
    *onednn = rc == 1;
    if ((rc = cpu__operand(go, grad, *dt)) == 0)
        rc = cpu__operand(other, t, *dt);
    return rc;
}


/* convolution_backward_input: task (image, group, block of the group's
 * channels), tile by tile: dcols = W_g[:, rows]^T G_g[:, tile], added
 * back into the channels' image by col2im (tiles in order); for a
 * direct 1x1 convolution the product is the gradient itself. */
static void backward_input_task(const conv_job *j, int64_t t, char *scratch)
{
    const conv_geometry *g = j->g;
    int64_t cb = t % j->cblocks, gr = t / j->cblocks % g->groups, b = t / (j->cblocks * g->groups);
    int64_t L = g->OH * g->OW, KK = g->KH * g->KW, Rg = rows_per_image(g) / g->groups;
    int64_t OCg = g->OC / g->groups, Cg = g->C / g->groups;
    int64_t c0 = gr * Cg + cb * Cg / j->cblocks, c1 = gr * Cg + (cb + 1) * Cg / j->cblocks;
    size_t es = j->es;
    char *image = j->out + (size_t)(b * g->C * g->H * g->W) * es;
    if (!j->direct)
        memset(image + (size_t)(c0 * g->H * g->W) * es, 0, (size_t)((c1 - c0) * g->H * g->W) * es);
    /* W_g^T's rows [c0 KK, c1 KK) are W_g's columns from (c0 - gr Cg) KK */
    const char *a = j->w + (size_t)(gr * OCg * Rg + (c0 - gr * Cg) * KK) * es;
    for (int64_t tile = 0; tile < j->tiles; tile++) {
        int64_t oh0, oh1, cols = tile_span(j, tile, &oh0, &oh1);
        const char *go = j->go + (size_t)((b * g->OC + gr * OCg) * L + oh0 * g->OW) * es;
        char *dst = j->direct ? image + (size_t)(c0 * L + oh0 * g->OW) * es : scratch;
        int64_t ldd = j->direct ? L : cols; /* direct: KK = 1, H W = L */
        if (j->dt == WEFT_FLOAT32 && OCg <= SMALL_K_BACKWARD)
            small_k_gemm((c1 - c0) * KK, cols, OCg, (const float *)a, 1, Rg, (const float *)go,
                         L, NULL, (float *)dst, ldd);
        else
            gemm(j->dt, true, false, (c1 - c0) * KK, cols, OCg, a, Rg, go, L, 0.0, dst, ldd);
        if (!j->direct)
            col2im_tiles[j->dt](g, image, c0 * KK, c1 * KK, oh0, oh1, scratch);
    }
}

static int conv_backward_input_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    conv_geometry g;
    weft_dtype dt;
    weft_tensor *go = NULL, *w = NULL, *gi = NULL;
    bool onednn = false;
    int rc = backward_setup(call, true, &g, &dt, &onednn, &go, &w);
    int64_t shape[4] = {g.N, g.C, g.H, g.W};
    if (rc == 0)
        rc = weft_empty(&gi, shape, 4, dt, WEFT_DEVICE_CPU);
    if (rc == 0 && g.N > 0 && onednn) {
        rc = cpu__conv_onednn(weft_op_name(call->op), CPU_CONV_BACKWARD_INPUT, &g,
                              weft_tensor_data_ptr(go), weft_tensor_data_ptr(w), NULL,
                              weft_tensor_data_ptr(gi));
    } else if (rc == 0 && g.N > 0) {
        conv_job j;
        job_init(&j, &g, dt);
        /* blocks of channels, so that a small batch still has a task per
         * slot; every block's rows are its own (no two tasks add into the
         * same input element) */
        int64_t Cg = g.C / g.groups, per = g.N * g.groups;
        j.cblocks = (MAX_SLOTS + per - 1) / per;
        j.cblocks = j.cblocks > Cg ? Cg : j.cblocks;
        j.tasks = per * j.cblocks;
        j.w = weft_tensor_data_ptr(w);
        j.go = weft_tensor_data_ptr(go);
        j.out = weft_tensor_data_ptr(gi);
        j.task = backward_input_task;
        rc = run_job(&j, (Cg + j.cblocks - 1) / j.cblocks * g.KH * g.KW,
                     2.0 * (double)(g.N * g.OC * g.OH * g.OW) * (double)rows_per_image(&g) /
                         (double)g.groups);
    }
    weft_tensor_release(go);
    weft_tensor_release(w);
    if (rc < 0) {
        weft_tensor_release(gi);
        return rc;
    }
    return cpu__set_result(call, 0, gi, weft_tensor_dtype(call->args[0].u.tensor));
}

/* convolution_backward_weight: dW_g = sum over images and tiles of
 * G_g[:, tile] cols_g[:, tile]^T.  The images are cut into runs by the
 * batch size alone; task (run, group) sums its images' tiles, in order,
 * into a partial of its own, and the partials are added in run order at
 * the end: the same sums in the same order whatever the thread count. */
static int64_t chunk_start(int64_t c, int64_t n, int64_t chunks)
{
    return c * n / chunks;
}

static void backward_weight_task(const conv_job *j, int64_t t, char *scratch)
{
    const conv_geometry *g = j->g;
    int64_t gr = t % g->groups, run = t / g->groups;
    int64_t L = g->OH * g->OW, Rg = rows_per_image(g) / g->groups, OCg = g->OC / g->groups;
    int64_t Cg = g->C / g->groups;
    size_t es = j->es;
    char *dw = j->out + (size_t)((run * g->OC + gr * OCg) * Rg) * es;
    double beta = 0.0; /* the first product sets the partial */
    for (int64_t b = chunk_start(run, g->N, j->chunks); b < chunk_start(run + 1, g->N, j->chunks);
         b++) {
        const char *image = j->x + (size_t)(b * g->C * g->H * g->W) * es;
        for (int64_t tile = 0; tile < j->tiles; tile++) {
            int64_t oh0, oh1, cols = tile_span(j, tile, &oh0, &oh1);
            const char *bmat = scratch;
            int64_t ldb = cols;
            if (j->direct) {
                bmat = image + (size_t)(gr * Cg * L + oh0 * g->OW) * es;
                ldb = L;
            } else {
                im2col_tiles[j->dt](g, image, gr * Rg, (gr + 1) * Rg, oh0, oh1, scratch);
            }
            const char *gmat = j->go + (size_t)((b * g->OC + gr * OCg) * L + oh0 * g->OW) * es;
            if (j->dt == WEFT_FLOAT32 && Rg <= SMALL_OUT_MAX)
                small_out_gemm(OCg, Rg, cols, (const float *)gmat, L, (const float *)bmat, ldb,
                               beta != 0.0, (float *)dw, Rg);
            else
                gemm(j->dt, false, true, OCg, Rg, cols, gmat, L, bmat, ldb, beta, dw, Rg);
            beta = 1.0;
        }
    }
}

/* d[i] = the sum of the chunks' partials p[c * n + i], in chunk order (the
 * order fixed by the batch size, so the bits do not depend on the thread
 * count) */
#define DEFINE_SUM_PARTIALS(T)                                                              \
    static void sum_partials_##T(T *d, const T *p, int64_t n, int64_t chunks)               \
    {                                                                                       \
        for (int64_t i = 0; i < n; i++) {                                                   \
            T s = p[i];                                                                     \
            for (int64_t c = 1; c < chunks; c++)                                            \
                s += p[c * n + i];                                                          \
            d[i] = s;                                                                       \
        }                                                                                   \
    }
DEFINE_SUM_PARTIALS(float)
DEFINE_SUM_PARTIALS(double)

static int conv_backward_weight_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    conv_geometry g;
    weft_dtype dt;
    weft_tensor *go = NULL, *x = NULL, *gw = NULL, *parts = NULL;
    bool onednn = false;
    int rc = backward_setup(call, false, &g, &dt, &onednn, &go, &x);
    int64_t shape[4] = {g.OC, g.C / (g.groups ? g.groups : 1), g.KH, g.KW};
    if (rc == 0)
        rc = weft_empty(&gw, shape, 4, dt, WEFT_DEVICE_CPU);
    int64_t chunks = rc == 0 ? (g.N < WEIGHT_CHUNKS ? g.N : WEIGHT_CHUNKS) : 0;
    int64_t n = rc == 0 ? weft_tensor_numel(gw) : 0;
    if (rc == 0 && chunks == 0)
        rc = weft_fill_(gw, 0.0);
    if (rc == 0 && chunks > 0 && onednn) {
        rc = cpu__conv_onednn(weft_op_name(call->op), CPU_CONV_BACKWARD_WEIGHT, &g,
                              weft_tensor_data_ptr(go), weft_tensor_data_ptr(x), NULL,
                              weft_tensor_data_ptr(gw));
        chunks = 0; /* done: no partials, no job */
    }
    /* one run writes the gradient itself; more write partials */
    int64_t psize[2] = {chunks, n};
    if (rc == 0 && chunks > 1)
        rc = weft_empty(&parts, psize, 2, dt, WEFT_DEVICE_CPU);
    if (rc == 0 && chunks > 0) {
        conv_job j;
        job_init(&j, &g, dt);
        j.chunks = chunks;
        j.tasks = chunks * g.groups;
        j.x = weft_tensor_data_ptr(x);
        j.go = weft_tensor_data_ptr(go);
        j.out = weft_tensor_data_ptr(parts ? parts : gw);
        j.task = backward_weight_task;
        rc = run_job(&j, rows_per_image(&g) / g.groups,
                     2.0 * (double)(g.N * g.OC * g.OH * g.OW) * (double)rows_per_image(&g) /
                         (double)g.groups);
    }
    if (rc == 0 && parts) { /* the partials in run order */
        if (dt == WEFT_FLOAT32)
            sum_partials_float(weft_tensor_data_ptr(gw), weft_tensor_data_ptr(parts), n, chunks);
        else
            sum_partials_double(weft_tensor_data_ptr(gw), weft_tensor_data_ptr(parts), n, chunks);
    }
    weft_tensor_release(go);
    weft_tensor_release(x);
    weft_tensor_release(parts);
    if (rc < 0) {
        weft_tensor_release(gw);
        return rc;
    }
    return cpu__set_result(call, 0, gw, weft_tensor_dtype(call->args[0].u.tensor));
}

/* conv1d(input [N, C, L], weight [OC, C/g, K], ...): conv2d of height 1 */
static int conv1d_composite(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_value *a = call->args;
    if (weft_tensor_ndim(a[0].u.tensor) != 3 || weft_tensor_ndim(a[1].u.tensor) != 3)
        return weft_set_error(WEFT_ESHAPE, "conv1d: expected a 3-D input [N, C, L] and a 3-D "
                              "weight, got %d-D and %d-D", weft_tensor_ndim(a[0].u.tensor),
                              weft_tensor_ndim(a[1].u.tensor));
    int64_t lists[3][2];
    const char *names[3] = {"stride", "padding", "dilation"};
    for (int i = 0; i < 3; i++) {
        if (a[3 + i].len != 1)
            return weft_set_error(WEFT_EINVAL, "conv1d: %s must have one element, got %d",
                                  names[i], a[3 + i].len);
        lists[i][0] = i == 1 ? 0 : 1; /* the unit height: no padding */
        lists[i][1] = a[3 + i].u.ints[0];
    }
    weft_tensor *x = NULL, *w = NULL, *y = NULL;
    int rc = weft_unsqueeze(&x, a[0].u.tensor, 2);
    if (rc == 0)
        rc = weft_unsqueeze(&w, a[1].u.tensor, 2);
    if (rc == 0)
        rc = weft_conv2d(&y, x, w, a[2].tag == WEFT_VALUE_TENSOR ? a[2].u.tensor : NULL, lists[0],
                         2, lists[1], 2, lists[2], 2, a[6].u.i);
    weft_tensor_release(x);
    weft_tensor_release(w);
    if (rc == 0)
        rc = weft_squeeze(&call->rets[0].u.tensor, y, 2);
    weft_tensor_release(y);
    if (rc < 0)
        return rc;
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    return 0;
}

/* conv_transpose2d(input [N, Cin, H, W], weight [Cin, Cout/groups, KH, KW],
 * bias?, stride, padding, output_padding, groups, dilation): the gradient of
 * a conv2d whose output has input's shape, with respect to that conv2d's
 * input of size (H - 1) s - 2 p + d (KH - 1) + output_padding + 1. */
static int conv_transpose2d_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "conv_transpose2d";
    const weft_value *a = call->args;
    const weft_tensor *input = a[0].u.tensor, *weight = a[1].u.tensor;
    const weft_tensor *bias = a[2].tag == WEFT_VALUE_TENSOR ? a[2].u.tensor : NULL;
    static const int64_t zero[2] = {0, 0};
    int64_t stride[2], padding[2], output_padding[2], dilation[2], groups = a[6].u.i;
    weft_dtype dt;
    int rc = cpu__check_floating(op, "input", input, &dt);
    if (rc == 0)
        rc = cpu__check_cpu(op, "weight", weight);
    if (rc == 0 && bias)
        rc = cpu__check_cpu(op, "bias", bias);
    if (rc == 0)
        rc = cpu__pair_arg(op, "stride", &a[3], NULL, 1, stride);
    if (rc == 0)
        rc = cpu__pair_arg(op, "padding", &a[4], NULL, 0, padding);
    if (rc == 0)
        rc = cpu__pair_arg(op, "output_padding", &a[5], zero, 0, output_padding);
    if (rc == 0)
        rc = cpu__pair_arg(op, "dilation", &a[7], NULL, 1, dilation);
    if (rc == 0)
        rc = cpu__gemm_library_ready(op);
    if (rc < 0)
        return rc;
    char bi[128], bw[128];
    const int64_t *in = weft_tensor_sizes(input), *w = weft_tensor_sizes(weight);
    int in_nd = weft_tensor_ndim(input), w_nd = weft_tensor_ndim(weight);
    if (groups < 1)
        return weft_set_error(WEFT_EINVAL, "%s: groups must be positive, got %lld", op,
                              (long long)groups);
    if (in_nd != 4 || w_nd != 4 || in[1] != w[0] || w[0] % groups != 0 || w[1] < 1)
        return weft_set_error(WEFT_ESHAPE, "%s: expected a 4-D input [N, C_in, H, W] and a 4-D "
                              "weight [C_in, C_out / groups, kH, kW] with C_in divisible by "
                              "groups=%lld, got input %s and weight %s", op, (long long)groups,
                              weft_format_shape(bi, sizeof bi, in, in_nd),
                              weft_format_shape(bw, sizeof bw, w, w_nd));
    for (int i = 0; i < 2; i++)
        if (output_padding[i] >= stride[i] && output_padding[i] >= dilation[i])
            return weft_set_error(WEFT_EINVAL, "%s: output_padding (%lld) must be smaller than "
                                  "either stride (%lld) or dilation (%lld)", op,
                                  (long long)output_padding[i], (long long)stride[i],
                                  (long long)dilation[i]);
    int64_t out_size[4] = {in[0], 0, 0, 0};
    if (__builtin_mul_overflow(w[1], groups, &out_size[1]))
        return weft_set_error(WEFT_EINVAL, "%s: weight %s with groups=%lld gives more output "
                              "channels than int64 holds", op,
                              weft_format_shape(bw, sizeof bw, w, w_nd), (long long)groups);
    for (int i = 0; i < 2; i++) {
        if (!conv_transposed_extent(in[2 + i], stride[i], padding[i], dilation[i], w[2 + i],
                               output_padding[i], &out_size[2 + i]))
            return weft_set_error(WEFT_EINVAL, "%s: stride, padding, dilation and output_padding "
                                  "with input %s and weight %s give an output size past "
                                  "int64's range", op, weft_format_shape(bi, sizeof bi, in, in_nd),
                                  weft_format_shape(bw, sizeof bw, w, w_nd));
        if (out_size[2 + i] < 1)
            return weft_set_error(WEFT_ESHAPE, "%s: input %s with weight %s gives an output "
                                  "size of %lld, which is too small", op,
                                  weft_format_shape(bi, sizeof bi, in, in_nd),
                                  weft_format_shape(bw, sizeof bw, w, w_nd),
                                  (long long)out_size[2 + i]);
    }
    if (bias && (weft_tensor_ndim(bias) != 1 || weft_tensor_size(bias, 0) != out_size[1]))
        return weft_set_error(WEFT_ESHAPE, "%s: bias must be a 1-D tensor of %lld elements", op,
                              (long long)out_size[1]);
    weft_dtype dtype = weft_tensor_dtype(input);
    if (weft_tensor_dtype(weight) != dtype || (bias && weft_tensor_dtype(bias) != dtype))
        return weft_set_error(WEFT_EDTYPE, "%s: input, weight and bias must have the same dtype "
                              "(input is %s, weight %s)", op, weft_dtype_name(dtype),
                              weft_dtype_name(weft_tensor_dtype(weight)));
    /* conv_transpose2d is the input gradient of the conv2d whose input has
     * out_size; that conv2d has H + output_padding / stride output rows
     * (one more per whole stride the output padding holds, possible when
     * it is below the dilation), so the input is zero-padded at the end to
     * that size.  (Computing a smaller "reachable" output and padding it
     * with zeros instead lost what reaches those last rows when padding >=
     * stride.) */
    weft_tensor *y = NULL, *b4 = NULL, *xp = NULL;
    int64_t extra_h = output_padding[0] / stride[0], extra_w = output_padding[1] / stride[1];
    if (extra_h > 0 || extra_w > 0) {
        int64_t pad[4] = {0, extra_w, 0, extra_h};
        rc = weft_pad(&xp, input, pad, 4, "constant", NULL);
    }
    if (rc == 0)
        rc = weft_convolution_backward_input(&y, xp ? xp : input, weight, out_size, 4, stride, 2,
                                             padding, 2, dilation, 2, groups);
    weft_tensor_release(xp);
    if (rc == 0 && bias) {
        int64_t shape[4] = {1, out_size[1], 1, 1};
        if ((rc = weft_reshape(&b4, bias, shape, 4)) == 0)
            rc = weft_add_(y, b4);
        weft_tensor_release(b4);
    }
    if (rc < 0) {
        weft_tensor_release(y);
        return rc;
    }
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    call->rets[0].u.tensor = y;
    return 0;
}

static const weft_kernel_entry conv_entries[] = {
    {"conv2d", conv2d_kernel, NULL},
    {"convolution_backward_input", conv_backward_input_kernel, NULL},
    {"convolution_backward_weight", conv_backward_weight_kernel, NULL},
    {"conv_transpose2d", conv_transpose2d_kernel, NULL},
};

int cpu__register_nn_conv(weft_registrar *reg)
{
    int rc = weft_register_kernel_table(reg, WEFT_KEY_DENSE, WEFT_DEVICE_TYPE_CPU, conv_entries, sizeof conv_entries / sizeof *conv_entries);
    if (rc == 0)
        rc = cpu__register_composite(reg, "conv1d", conv1d_composite);
    return rc;
}
