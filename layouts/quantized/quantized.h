/* layouts/quantized/quantized.h — what the files of the quantized layout
 * plugin (libweft-quantized.so) share.  Like every in-tree plugin it
 * includes only the installed headers; nothing here is seen outside the
 * plugin (its only export is weft_plugin_entry).  Internal functions carry
 * the prefix qt__. */
#ifndef WEFT_LAYOUTS_QUANTIZED_H
#define WEFT_LAYOUTS_QUANTIZED_H

#include <stdbool.h>
#include <stdint.h>

#include <weft/ops.h>
#include <weft/plugin.h>
#include <weft/weft.h>

/* ------------------------------------------------------ affine quantizers */

/* The quantizer of a tensor of the "quantized" layout.  The core's dtype of
 * such a tensor is its integer representation's (int8, uint8 or int32), so
 * (layout "quantized", dtype) is exactly torch's qint8 / quint8 / qint32
 * and the core needs no quantized dtype of its own. */
typedef enum qt_scheme { QT_PER_TENSOR_AFFINE = 0, QT_PER_CHANNEL_AFFINE = 1 } qt_scheme;

/* A weight's packed form for oneDNN and the last primitive built for it
 * (dnnl_linear.c, dnnl_conv.c); NULL until first used.  Never shared with
 * a view.  Each operator's cache starts with this header. */
typedef struct qt_prepacked qt_prepacked;
struct qt_prepacked {
    void (*release)(qt_prepacked *p);
};

typedef struct qt_affine {
    qt_scheme scheme;
    /* the integer values: a strided tensor (possibly a view) with the
     * logical shape of the quantized tensor; the payload owns a reference */
    weft_tensor *repr;
    double scale;       /* per tensor */
    int64_t zero_point; /* per tensor */
    int axis;           /* per channel: the dimension of repr the channels run along */
    /* per channel: float64 and int64 vectors of repr's size at axis,
     * contiguous and owned (views share them) */
    weft_tensor *scales, *zero_points;
    qt_prepacked *prepacked;
} qt_affine;

extern int qt__affine_layout; /* the "quantized" layout's id */

/* The range of an integer representation; WEFT_EDTYPE naming op for a
 * dtype that is not int8, uint8 or int32. */
int qt__qrange(const char *op, weft_dtype dtype, int64_t *lo, int64_t *hi);
/* Checks a scale and a zero point as every quantizing entry does (scale
 * positive and finite, zero point inside the dtype's range). */
int qt__check_params(const char *op, double scale, int64_t zero_point, weft_dtype dtype);
/* Wraps repr (a new reference is taken) into a quantized tensor with the
 * quantizer q describes (its tensors referenced, not stolen); *out is a new
 * reference.  Leaves nothing behind on failure. */
int qt__wrap(weft_tensor **out, weft_tensor *repr, const qt_affine *q);
/* A new float32 tensor of t's values (t of the quantized layout). */
int qt__dequantize(weft_tensor **out, const weft_tensor *t);
/* Quantizes src (strided, floating) with q's parameters into a new tensor
 * of the layout; q->repr is ignored, dtype picks the representation. */
int qt__quantize(weft_tensor **out, const weft_tensor *src, const qt_affine *q, weft_dtype dtype);

int qt__register_affine(weft_registrar *reg);
/* The int8 operators through oneDNN (dnnl_linear.c; without oneDNN at
 * build time, plugin.c registers kernels that say so). */
int qt__register_dnnl(weft_registrar *reg);
/* Destroys the oneDNN engine, if one was made (the plugin's fini: no
 * primitive is left then, as no quantized tensor is). */
void qt__dnnl_fini(void);
void qt__prepacked_free(qt_prepacked *p);
/* w's cache made by make (a new one when it has another's, or none). */
qt_prepacked *qt__prepacked_get(qt_affine *w, void (*release)(qt_prepacked *),
                                qt_prepacked *(*make)(void));
/* t (4-d) is laid out channels-last: (N, H, W, C) dense in memory, the
 * layout oneDNN's int8 convolution reads and writes on x86 (and torch's
 * quantized conv2d returns); a dimension of size 1 matches any stride. */
bool qt__is_channels_last(const weft_tensor *t);
int qt__register_views(weft_registrar *reg);
/* The quantized layout's view hook (views.c): the core's view functions
 * on a quantized tensor, applied to its integers, keeping the quantizer. */
int qt__layout_view(weft_tensor **out, const weft_tensor *t, const weft_layout_view *v);
int qt__register_ops(weft_registrar *reg);

/* --------------------------------------------------------- weight blocks */

/* ggml's weight-only formats: each row of the last dimension is cut into
 * blocks of 32 values sharing one float16 scale d.  Q8_0 stores 32 int8
 * (value = q * d); Q4_0 stores 32 four-bit q in 16 bytes, element j in the
 * low nibble of byte j and element j + 16 in the high one (value =
 * (q - 8) * d). */
enum { QT_BLOCK = 32 };
typedef struct qt_block_q8_0 {
    uint16_t d;
    int8_t qs[QT_BLOCK];
} qt_block_q8_0;
typedef struct qt_block_q4_0 {
    uint16_t d;
    uint8_t qs[QT_BLOCK / 2];
} qt_block_q4_0;

typedef enum qt_format { QT_Q8_0 = 0, QT_Q4_0 = 1 } qt_format;

/* The rows of a tensor's last dimension: the product of the other sizes,
 * counted so (not numel / last size) because a last size of 0 leaves
 * rows to fill (a (3, 0) weight has 3 outputs, each its bias) */
static inline int64_t qt__leading_numel(const weft_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i + 1 < weft_tensor_ndim(t); i++)
        n *= weft_tensor_size(t, i);
    return n;
}

typedef struct qt_blocks {
    qt_format format;
    int64_t rows, cols; /* cols: the last dimension, a multiple of 32 */
    void *data;         /* rows * cols / 32 blocks, row after row, in: */
    weft_tensor *bytes; /* a uint8 host tensor, owned */
} qt_blocks;

extern int qt__block_layout[2]; /* ids of "q8_0" and "q4_0" */

/* float16 <-> float32, round to nearest even (the scales) */
uint16_t qt__fp32_to_fp16(float f);
float qt__fp16_to_fp32(uint16_t h);

/* The activations of a product, quantized once per call as ggml does
 * (its Q8_0 with a float32 scale and the block's integer sum): 32 int8
 * q[j] = round_half_even(x[j] / d), d = max|x| / 127, so |x[j] - q[j] d| <=
 * d / 2.  sum = sum_j q[j] lets the Q4_0 kernels multiply the unsigned
 * nibbles (0..15) and correct by 8 * sum once per block.  A block with a
 * value that is not finite gets d = NaN, so the dot products it enters are
 * NaN rather than a number made of a clamped infinity. */
typedef struct qt_block_q8_act {
    float d;
    int32_t sum;
    int8_t qs[QT_BLOCK];
} qt_block_q8_act;

void qt__quantize_activations(const float *x, qt_block_q8_act *y, int64_t nblocks);

/* The same activations regrouped for the AVX2 and AVX-512 Q4_0 kernels,
 * eight blocks (b0..b7) to a group, laid out as they load them: a Q4_0 block's
 * 16 bytes hold elements 0..15 in their low nibbles and 16..31 in their
 * high ones, so two blocks' bytes in one register give, masked, elements
 * 0..15 of both, and shifted, 16..31 of both; lo and hi are the
 * activations in that order.  The kernels sum the four pairs' products to
 * one integer per block in the lane order QT_GROUP_ORDER (what their
 * horizontal adds leave), so the corrections 8 * sum and the scales are
 * stored in that order too.  block_kernels_x86.h says why. */
enum { QT_GROUP = 8 };
#define QT_GROUP_ORDER {0, 2, 4, 6, 1, 3, 5, 7}
typedef struct qt_q4_act_group {
    int8_t lo[4][32];  /* pair k: elements 0..15 of b(2k), then of b(2k+1) */
    int8_t hi[4][32];  /* the same of elements 16..31 */
    int32_t sum8[8];   /* lane l: 8 * sum of block QT_GROUP_ORDER[l] */
    float d[8];        /* lane l: d of block QT_GROUP_ORDER[l] */
} qt_q4_act_group;

/* x's first nblocks / QT_GROUP * QT_GROUP blocks into nblocks / QT_GROUP
 * groups (the rest the kernel reads from x itself) */
void qt__group_q4_activations(const qt_block_q8_act *x, qt_q4_act_group *g, int64_t nblocks);

/* Dot products of one row of weight blocks with quantized activations
 * (nblocks each), integer products within a block, one float multiply-add
 * per block (per group of eight in the vector Q4_0 kernels); written once per ISA; qt__kernels is the variant chosen at
 * load.  All variants sum the same integers: they differ only in the order
 * of the float additions across blocks. */
typedef struct qt_block_kernels {
    const char *name; /* "scalar", "avx2", "avx512" */
    /* qt__quantize_activations's result, bit for bit */
    void (*quantize_activations)(const float *x, qt_block_q8_act *y, int64_t nblocks);
    float (*dot_q8_0)(const qt_block_q8_0 *w, const qt_block_q8_act *x, int64_t nblocks);
    /* g: x regrouped (qt__group_q4_activations) when q4_groups, else NULL */
    float (*dot_q4_0)(const qt_block_q4_0 *w, const qt_block_q8_act *x, const qt_q4_act_group *g,
                      int64_t nblocks);
    bool q4_groups; /* whether dot_q4_0 reads g */
} qt_block_kernels;

extern const qt_block_kernels qt__kernels_scalar;
extern const qt_block_kernels qt__kernels_avx2;
extern const qt_block_kernels qt__kernels_avx512;
extern const qt_block_kernels *qt__kernels;
/* Picks qt__kernels: WEFT_QUANTIZED_KERNELS=scalar|avx2|avx512 if this CPU
 * runs it (else the load fails, naming it), else the widest it runs. */
int qt__choose_kernels(void);
/* Whether the OS saves the XCR0 register states in bits (x86; false
 * elsewhere): a CPU may have AVX or AVX-512 its kernel keeps switched off. */
bool qt__os_saves(unsigned bits);

/* The int8 GEMM of quantized linear on AVX2 without VNNI (igemm.c says
 * how and why): a weight packed once, cached with it as oneDNN's form is. */
typedef struct qt_igemm {
    int64_t n, k, nb, kg; /* outputs, inputs, blocks of 16 outputs, groups of 8 inputs */
    int8_t *b;            /* nb * kg groups of 128 bytes (64-byte aligned) */
    uint16_t *bound;      /* per group, ascending within a block: see igemm.c */
    uint16_t *place;      /* per group: its index in k / 8 */
} qt_igemm;
/* Packs the row-major (n, k) weight w; k must be a multiple of 8.  On
 * failure *p is empty and the error names op. */
int qt__igemm_pack(qt_igemm *p, const int8_t *w, int64_t n, int64_t k, const char *op);
void qt__igemm_free(qt_igemm *p);
/* y (m, n) = requantized x (m, k) times the weight, as oneDNN's int8
 * matmul with output scales `scale`, a bias in units of the sum (NULL: none)
 * and relu before the output zero point: the same bytes.  scale and bias
 * hold p->nb * 16 entries (the columns padded to the kernels' blocks).
 * Runs on weft's pool; returns 0 (WEFT_ENOTSUP off x86). */
int qt__igemm_run(const qt_igemm *p, const uint8_t *x, int64_t m, uint8_t *y, const float *scale,
                  const float *bias, int32_t zero_point, bool relu);
/* Whether this CPU runs the kernels, and whether they beat oneDNN on it
 * (AVX2 without AVX-512BW or VNNI). */
bool qt__igemm_runs(void);
bool qt__igemm_preferred(void);
/* Whether quantized linear uses them: WEFT_QUANTIZED_GEMM=avx2|onednn if
 * this CPU runs it (else the load fails, naming it), else as preferred. */
extern bool qt__igemm_on;
int qt__choose_igemm(void);

int qt__register_blocks(weft_registrar *reg);

#endif /* WEFT_LAYOUTS_QUANTIZED_H */
