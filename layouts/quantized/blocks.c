/* layouts/quantized/blocks.c — ggml's weight-only block formats Q8_0 and
 * Q4_0 as the layouts "q8_0" and "q4_0": conversion from float and back
 * (weft_to_layout / weft_to_strided), and linear and matmul of float32
 * activations by such a weight, which quantize the activations to 8-bit
 * blocks once per call and take integer dot products with the weight's
 * blocks (block_kernels.c), never building the float weight.  A block tensor's dtype is float32: the values it stands for. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quantized.h"

int qt__block_layout[2] = {-1, -1};
static const char *const format_names[2] = {"q8_0", "q4_0"};

/* ------------------------------------------------------------- float16 */

uint16_t qt__fp32_to_fp16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u, mag = x & 0x7fffffffu;
    if (mag >= 0x7f800000u) /* inf, nan */
        return (uint16_t)(sign | 0x7c00u | (mag > 0x7f800000u ? 0x200u : 0));
    if (mag >= 0x477ff000u) /* rounds to beyond 65504 */
        return (uint16_t)(sign | 0x7c00u);
    if (mag < 0x38800000u) { /* a float16 subnormal (or zero) */
        float a;
        memcpy(&a, &mag, sizeof a);
        /* multiples of 2^-24, rounded to nearest even by the FPU */
        return (uint16_t)(sign | (uint32_t)nearbyintf(a * 16777216.0f));
    }
    /* normal: rebias the exponent, round the 13 dropped mantissa bits to
     * nearest even (a carry into the exponent is the right answer) */
    uint32_t h = ((mag - 0x38000000u) >> 13);
    uint32_t rest = mag & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1)))
        h++;
    return (uint16_t)(sign | h);
}

float qt__fp16_to_fp32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
    float f;
    if (exp == 0) {
        f = (float)man * (1.0f / 16777216.0f);
        return sign ? -f : f;
    }
    uint32_t x = sign | (exp == 31 ? 0x7f800000u | (man << 13) : ((exp + 112) << 23) | (man << 13));
    memcpy(&f, &x, sizeof f);
    return f;
}

/* ----------------------------------------------------------- conversion */

static void quantize_row_q8_0(const float *x, qt_block_q8_0 *y, int64_t nblocks)
{
    for (int64_t b = 0; b < nblocks; b++, x += QT_BLOCK) {
        float amax = 0;
        for (int j = 0; j < QT_BLOCK; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        y[b].d = qt__fp32_to_fp16(d);
        for (int j = 0; j < QT_BLOCK; j++)
            y[b].qs[j] = (int8_t)roundf(x[j] * id);
    }
}

static void quantize_row_q4_0(const float *x, qt_block_q4_0 *y, int64_t nblocks)
{
    for (int64_t b = 0; b < nblocks; b++, x += QT_BLOCK) {
        /* the value of largest magnitude maps to -8, the end of the range
         * with one more step, so it is represented exactly */
        float amax = 0, max = 0;
        for (int j = 0; j < QT_BLOCK; j++)
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        float d = max / -8.0f, id = d ? 1.0f / d : 0.0f;
        y[b].d = qt__fp32_to_fp16(d);
        for (int j = 0; j < QT_BLOCK / 2; j++) {
            int lo = (int)(x[j] * id + 8.5f), hi = (int)(x[j + 16] * id + 8.5f);
            lo = lo > 15 ? 15 : lo;
            hi = hi > 15 ? 15 : hi;
            y[b].qs[j] = (uint8_t)(lo | hi << 4);
        }
    }
}

static void dequantize_row(qt_format format, const void *blocks, float *x, int64_t nblocks)
{
    for (int64_t b = 0; b < nblocks; b++, x += QT_BLOCK) {
        if (format == QT_Q8_0) {
            const qt_block_q8_0 *w = (const qt_block_q8_0 *)blocks + b;
            float d = qt__fp16_to_fp32(w->d);
            for (int j = 0; j < QT_BLOCK; j++)
                x[j] = w->qs[j] * d;
        } else {
            const qt_block_q4_0 *w = (const qt_block_q4_0 *)blocks + b;
            float d = qt__fp16_to_fp32(w->d);
            for (int j = 0; j < QT_BLOCK / 2; j++) {
                x[j] = ((w->qs[j] & 0xf) - 8) * d;
                x[j + 16] = ((w->qs[j] >> 4) - 8) * d;
            }
        }
    }
}

static size_t block_bytes(qt_format format)
{
    return format == QT_Q8_0 ? sizeof(qt_block_q8_0) : sizeof(qt_block_q4_0);
}

static void blocks_free(void *p)
{
    qt_blocks *b = p;
    if (b)
        weft_tensor_release(b->bytes);
    free(b);
}

static qt_format format_of(const weft_tensor *t)
{
    return ((const qt_blocks *)weft_tensor_layout_payload(t))->format;
}

static int to_strided(weft_tensor **out, const weft_tensor *t)
{
    const qt_blocks *b = weft_tensor_layout_payload(t);
    int rc = weft_empty(out, weft_tensor_sizes(t), weft_tensor_ndim(t), WEFT_FLOAT32,
                        weft_tensor_device(t));
    if (rc == 0)
        dequantize_row(b->format, b->data, weft_tensor_data_ptr(*out),
                       b->rows * (b->cols / QT_BLOCK));
    return rc;
}

/* A weight's blocks live in a uint8 host tensor: the core's allocator
 * caches them and puts one of 4 MiB or more on transparent huge pages
 * (c10/host_alloc.c).  A matrix-vector product reads its weight once, page
 * after page, and with 4 KiB pages every 4 KiB costs a TLB miss (and the
 * hardware prefetcher stops at each page's end): a 4096 x 4096 Q4_0
 * product from memory took 985 us on huge pages against 1232 us (best of
 * 6 x 24 weights, one thread; 904 against 1036 us with two), alternating
 * in one process (docs/benchmarks.md, issue 17, twelfth session).  The
 * allocator's statistics count the weights like any tensor.  On failure
 * the error is set. */
static int blocks_alloc(qt_blocks *b, size_t bytes)
{
    int64_t n = bytes ? (int64_t)bytes : 1;
    int rc = weft_empty(&b->bytes, &n, 1, WEFT_UINT8, (weft_device){WEFT_DEVICE_TYPE_CPU, 0});
    if (rc == 0)
        b->data = weft_tensor_data_ptr(b->bytes);
    return rc;
}

static int from_strided(weft_tensor **out, const weft_tensor *src, qt_format format)
{
    const char *name = format_names[format];
    int ndim = weft_tensor_ndim(src);
    if (!weft_dtype_is_floating(weft_tensor_dtype(src)))
        return weft_set_error(WEFT_EDTYPE, "%s: expected a floating-point tensor, got %s", name,
                              weft_dtype_name(weft_tensor_dtype(src)));
    if (ndim < 1 || weft_tensor_size(src, -1) % QT_BLOCK != 0)
        return weft_set_error(WEFT_ESHAPE,
                              "%s: the last dimension must be a multiple of %d (the block size), "
                              "got a tensor of %d dimensions with last size %lld",
                              name, QT_BLOCK, ndim, (long long)(ndim ? weft_tensor_size(src, -1) : 0));
    weft_tensor *f, *c;
    int rc = weft_to_dtype(&f, src, WEFT_FLOAT32);
    if (rc < 0)
        return rc;
    rc = weft_contiguous(&c, f);
    weft_tensor_release(f);
    if (rc < 0)
        return rc;
    qt_blocks *b = calloc(1, sizeof *b);
    int64_t cols = weft_tensor_size(c, -1), rows = qt__leading_numel(c);
    size_t bytes = (size_t)(rows * (cols / QT_BLOCK)) * block_bytes(format);
    rc = b ? blocks_alloc(b, bytes) : WEFT_ENOMEM;
    if (rc < 0) {
        blocks_free(b);
        weft_tensor_release(c);
        return weft_set_error(rc, "%s: out of memory for %zu bytes of blocks", name, bytes);
    }
    b->format = format;
    b->rows = rows;
    b->cols = cols;
    const float *x = weft_tensor_data_ptr(c);
    if (format == QT_Q8_0)
        quantize_row_q8_0(x, b->data, rows * (cols / QT_BLOCK));
    else
        quantize_row_q4_0(x, b->data, rows * (cols / QT_BLOCK));
    rc = weft_tensor_new_layout(out, qt__block_layout[format], weft_tensor_sizes(c),
                                weft_tensor_ndim(c), WEFT_FLOAT32, weft_tensor_device(c), b);
    weft_tensor_release(c);
    return rc;
}

static int from_strided_q8_0(weft_tensor **out, const weft_tensor *src)
{
    return from_strided(out, src, QT_Q8_0);
}

static int from_strided_q4_0(weft_tensor **out, const weft_tensor *src)
{
    return from_strided(out, src, QT_Q4_0);
}

static int describe(const weft_tensor *t, char *buf, size_t size)
{
    const qt_blocks *b = weft_tensor_layout_payload(t);
    /* the int8 linear's GEMM too: the plugin's one place to say which code
     * runs (tests/quantized_variants.sh checks it) */
    return snprintf(buf, size, "%lld blocks of %d, float16 scales, %s kernels; int8 linear: %s",
                    (long long)(b->rows * (b->cols / QT_BLOCK)), QT_BLOCK, qt__kernels->name,
                    qt__igemm_on ? "avx2" : "onednn");
}

static int64_t nbytes(const weft_tensor *t)
{
    const qt_blocks *b = weft_tensor_layout_payload(t);
    return b->rows * (b->cols / QT_BLOCK) * (int64_t)block_bytes(b->format);
}

/* ---------------------------------------------------------- the product */

/* y[m, n] = dot(x[m, :], w[n, :]) (+ bias[n]) for the weight's rows, x
 * given as its quantized blocks (nb per row).  The pool hands out chunks
 * of CHUNK_ROWS rows a few at a time rather than fixed slices: on a loaded
 * machine a thread the scheduler leaves waiting would hold the whole call
 * back, while with small pieces the threads that run do its share. */
enum { CHUNK_ROWS = 64 };
typedef struct product {
    const qt_blocks *w;
    const qt_block_q8_act *x;
    const qt_q4_act_group *g; /* x regrouped, nb / QT_GROUP a row, or NULL */
    const float *bias;
    float *y;
    int64_t m;
} product;

/* chunks [c0, c1) of the weight's rows */
static void product_chunks(int64_t c0, int64_t c1, void *arg)
{
    const product *p = arg;
    const qt_blocks *w = p->w;
    int64_t nb = w->cols / QT_BLOCK;
    int64_t n1 = c1 * CHUNK_ROWS < w->rows ? c1 * CHUNK_ROWS : w->rows;
    for (int64_t n = c0 * CHUNK_ROWS; n < n1; n++)
        for (int64_t i = 0; i < p->m; i++) {
            const qt_block_q8_act *x = p->x + i * nb;
            const qt_q4_act_group *g = p->g ? p->g + i * (nb / QT_GROUP) : NULL;
            float s = w->format == QT_Q8_0
                          ? qt__kernels->dot_q8_0((const qt_block_q8_0 *)w->data + n * nb, x, nb)
                          : qt__kernels->dot_q4_0((const qt_block_q4_0 *)w->data + n * nb, x, g,
                                                  nb);
            p->y[i * w->rows + n] = s + (p->bias ? p->bias[n] : 0.0f);
        }
}

/* Quantizes the m rows of x to 8-bit blocks once (ggml's scheme: the
 * weight rows then meet integers), then runs the weight's rows on weft's
 * intra-op pool (weft_parallel_for: the CPU plugin's persistent threads
 * when it is loaded).  Threads started per call cost 33 us at best on a
 * quiet machine, 5% of a 4096 x 4096 Q4_0 product, and far more on a
 * loaded one (docs/benchmarks.md, issue 17, twelfth session). */
static int product_parallel(const qt_blocks *w, const float *x, const float *bias, float *y,
                            int64_t m)
{
    int64_t nb = w->cols / QT_BLOCK, ng = nb / QT_GROUP;
    bool grouped = w->format == QT_Q4_0 && qt__kernels->q4_groups && ng > 0;
    qt_block_q8_act *xq = malloc(sizeof *xq * (size_t)(m * nb > 0 ? m * nb : 1));
    qt_q4_act_group *g = grouped ? malloc(sizeof *g * (size_t)(m * ng > 0 ? m * ng : 1)) : NULL;
    if (!xq || (grouped && !g)) {
        free(xq);
        free(g);
        return weft_set_error(WEFT_ENOMEM, "%s linear: no memory to quantize a %lld x %lld input",
                              format_names[w->format], (long long)m, (long long)w->cols);
    }
    qt__kernels->quantize_activations(x, xq, m * nb);
    for (int64_t i = 0; grouped && i < m; i++)
        qt__group_q4_activations(xq + i * nb, g + i * ng, nb);
    product work = {w, xq, g, bias, y, m};
    int rc = weft_parallel_for(0, (w->rows + CHUNK_ROWS - 1) / CHUNK_ROWS, 1, product_chunks, &work);
    free(xq);
    free(g);
    return rc;
}

/* x (..., K) times the block weight (N, K) transposed, plus bias (N):
 * linear's contract.  x is made contiguous float32 first. */
static int block_linear(weft_tensor **out, const char *op, const weft_tensor *input,
                        const weft_tensor *weight, const weft_tensor *bias)
{
    *out = NULL;
    if (weft_tensor_layout(input) != WEFT_LAYOUT_STRIDED ||
        weft_tensor_layout(weight) != qt__block_layout[format_of(weight)])
        return weft_set_error(WEFT_ENOTSUP,
                              "%s: a %s weight takes a strided float input (got layout '%s' for "
                              "the input)",
                              op, weft_layout_name(weft_tensor_layout(weight)),
                              weft_layout_name(weft_tensor_layout(input)));
    const qt_blocks *w = weft_tensor_layout_payload(weight);
    int in_ndim = weft_tensor_ndim(input);
    if (weft_tensor_ndim(weight) != 2 || in_ndim < 1 || weft_tensor_size(input, -1) != w->cols)
        return weft_set_error(WEFT_ESHAPE,
                              "%s: expected a 2-d %s weight (out_features, in_features) and an "
                              "input whose last size is in_features (%lld), got a %d-d weight and "
                              "input last size %lld",
                              op, format_names[w->format], (long long)w->cols,
                              weft_tensor_ndim(weight),
                              (long long)(in_ndim ? weft_tensor_size(input, -1) : 0));
    if (!weft_dtype_is_floating(weft_tensor_dtype(input)))
        return weft_set_error(WEFT_EDTYPE, "%s: expected a floating-point input, got %s", op,
                              weft_dtype_name(weft_tensor_dtype(input)));
    if (bias && (weft_tensor_layout(bias) || weft_tensor_ndim(bias) != 1 ||
                 weft_tensor_size(bias, 0) != w->rows))
        return weft_set_error(WEFT_ESHAPE, "%s: expected a strided bias of %lld entries", op,
                              (long long)w->rows);
    weft_tensor *f = NULL, *x = NULL, *bf = NULL, *bc = NULL, *y = NULL;
    int rc = weft_to_dtype(&f, input, WEFT_FLOAT32);
    if (rc == 0)
        rc = weft_contiguous(&x, f);
    if (rc == 0 && bias && (rc = weft_to_dtype(&bf, bias, WEFT_FLOAT32)) == 0)
        rc = weft_contiguous(&bc, bf);
    int64_t sizes[16];
    if (rc == 0 && in_ndim > 16)
        rc = weft_set_error(WEFT_ESHAPE, "%s: at most 16 dimensions", op);
    if (rc == 0) {
        memcpy(sizes, weft_tensor_sizes(x), sizeof *sizes * (size_t)in_ndim);
        sizes[in_ndim - 1] = w->rows;
        rc = weft_new_output(&y, x, sizes, in_ndim, WEFT_FLOAT32);
    }
    if (rc == 0)
        rc = product_parallel(w, weft_tensor_data_ptr(x), bc ? weft_tensor_data_ptr(bc) : NULL,
                              weft_tensor_data_ptr(y), qt__leading_numel(x));
    weft_tensor_release(f);
    weft_tensor_release(x);
    weft_tensor_release(bf);
    weft_tensor_release(bc);
    if (rc < 0)
        weft_tensor_release(y);
    else
        *out = y;
    return rc;
}

/* linear(Tensor input, Tensor weight, Tensor? bias=None) with a block weight */
static int linear_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    weft_tensor *out;
    int rc = block_linear(&out, "linear", weft_arg_tensor(call, 0), weft_arg_tensor(call, 1),
                          weft_arg_tensor(call, 2));
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

/* matmul(Tensor self, Tensor other) with self a block weight (N, K) and
 * other a vector (K) or a matrix (K, M): the matrix-vector form of LLM
 * inference.  A block tensor as `other` is refused: its blocks run along
 * the dimension a product would have to sum over across rows. */
static int matmul_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *a = weft_arg_tensor(call, 0), *b = weft_arg_tensor(call, 1);
    if (weft_tensor_layout(a) == WEFT_LAYOUT_STRIDED || weft_tensor_layout(b) != WEFT_LAYOUT_STRIDED)
        return weft_set_error(WEFT_ENOTSUP,
                              "matmul: a block-quantized tensor must be the first operand (a "
                              "weight of shape (N, K)) and the second a strided one; for x @ W.T "
                              "use linear(x, W)");
    weft_tensor *bt = NULL, *y = NULL, *out = NULL;
    int rc;
    if (weft_tensor_ndim(b) == 1) {
        rc = block_linear(&out, "matmul", b, a, NULL);
    } else if (weft_tensor_ndim(b) == 2) {
        /* (N, K) @ (K, M) = (linear((M, K), W) = (M, N)) transposed */
        if ((rc = weft_transpose(&bt, b, 0, 1)) == 0 &&
            (rc = block_linear(&y, "matmul", bt, a, NULL)) == 0 &&
            (rc = weft_transpose(&out, y, 0, 1)) == 0)
            weft_tensor_release(y), y = NULL;
    } else {
        rc = weft_set_error(WEFT_ESHAPE, "matmul: a block-quantized weight takes a 1-d or 2-d "
                                         "second operand, got %d dimensions",
                            weft_tensor_ndim(b));
    }
    weft_tensor_release(bt);
    weft_tensor_release(y);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

static int refuse_kernel(weft_call *call, void *ctx)
{
    const char *name = ctx;
    return weft_set_error(WEFT_ENOKERNEL,
                          "%s: not supported for a %s weight (a block-quantized layout has "
                          "linear and matmul only); convert it with to_strided() first",
                          weft_op_name(call->op), name);
}

int qt__register_blocks(weft_registrar *reg)
{
    static const weft_layout_interface ifaces[2] = {
        {.struct_size = sizeof(weft_layout_interface),
         .name = "q8_0",
         .release = blocks_free,
         .to_strided = to_strided,
         .from_strided = from_strided_q8_0,
         .describe = describe,
         .nbytes = nbytes},
        {.struct_size = sizeof(weft_layout_interface),
         .name = "q4_0",
         .release = blocks_free,
         .to_strided = to_strided,
         .from_strided = from_strided_q4_0,
         .describe = describe,
         .nbytes = nbytes},
    };
    for (int f = 0; f < 2; f++) {
        int rc = weft_register_layout(reg, &ifaces[f], &qt__block_layout[f]);
        int key = rc < 0 ? rc : weft_layout_key(qt__block_layout[f]);
        if (key < 0)
            return key;
        if ((rc = weft_register_kernel(reg, "linear", key, WEFT_DEVICE_TYPE_CPU, linear_kernel,
                                       NULL, NULL)) < 0 ||
            (rc = weft_register_kernel(reg, "matmul", key, WEFT_DEVICE_TYPE_CPU, matmul_kernel,
                                       NULL, NULL)) < 0 ||
            (rc = weft_register_fallback(reg, key, WEFT_ALL_BACKENDS, refuse_kernel,
                                         (void *)format_names[f], NULL)) < 0)
            return rc;
    }
    return 0;
}
