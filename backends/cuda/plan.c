/* backends/cuda/plan.c — host-side planning for the CUDA kernels (see
 * plan.h).  Plain C: no CUDA header, no weft call, so the test program
 * links it directly and checks it on any machine. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#include "plan.h"
#include "backends/conv_extent.h"

void wfc_broadcast_strides(int64_t *out, const int64_t *osz, const int64_t *ost, int ond,
                           const int64_t *sizes, int nd)
{
    for (int d = 0; d < nd; d++) {
        int td = d - (nd - ond);
        out[d] = td < 0 || (osz[td] == 1 && sizes[d] != 1) ? 0 : ost[td];
    }
}

int wfc_plan_geometry(wfc_geometry *g, const int64_t *sizes, int nd, int noperands,
                      const int64_t (*strides)[64])
{
    memset(g, 0, sizeof *g);
    g->noperands = noperands;
    /* Work inner to outer in a scratch of up to 64 dims, then copy. */
    int64_t sz[64], st[WFC_MAX_OPERANDS][64];
    int n = 0;
    for (int d = nd - 1; d >= 0; d--) {
        if (sizes[d] == 1)
            continue;
        if (sizes[d] == 0) { /* nothing to index: one empty dim says it */
            n = 0;
            sz[n] = 0;
            for (int k = 0; k < noperands; k++)
                st[k][n] = 0;
            n = 1;
            break;
        }
        bool merge = n > 0;
        for (int k = 0; merge && k < noperands; k++)
            merge = strides[k][d] == st[k][n - 1] * sz[n - 1];
        if (merge) {
            sz[n - 1] *= sizes[d];
            continue;
        }
        sz[n] = sizes[d];
        for (int k = 0; k < noperands; k++)
            st[k][n] = strides[k][d];
        n++;
    }
    if (n > WFC_MAX_DIMS)
        return -1;
    g->ndim = n;
    for (int i = 0; i < n; i++) { /* back to outer-to-inner order */
        g->sizes[i] = sz[n - 1 - i];
        for (int k = 0; k < noperands; k++)
            g->strides[k][i] = st[k][n - 1 - i];
    }
    g->contiguous = n <= 1;
    for (int k = 0; g->contiguous && n == 1 && k < noperands; k++)
        g->contiguous = g->strides[k][0] == 1;
    /* 32-bit indexing: the element count and each operand's largest
     * offset below 2^31; each factor is checked before it multiplies, so
     * nothing here overflows */
    const int64_t lim = (int64_t)1 << 31;
    int64_t count = 1;
    g->index32 = true;
    for (int i = 0; g->index32 && i < n; i++) {
        g->index32 = g->sizes[i] >= 1 && g->sizes[i] < lim;
        count *= g->index32 ? g->sizes[i] : 1;
        g->index32 = g->index32 && count < lim;
    }
    for (int i = 0; g->index32 && i < n; i++)
        wfc_plan_divisor((uint32_t)g->sizes[i], &g->div_mul[i], &g->div_shift[i]);
    for (int k = 0; g->index32 && k < noperands; k++) {
        int64_t last = 0;
        for (int i = 0; g->index32 && i < n; i++) {
            int64_t st = g->strides[k][i];
            g->index32 = st >= 0 && st < lim;
            last += g->index32 ? (g->sizes[i] - 1) * st : 0; /* < 2^62 */
            g->index32 = g->index32 && last < lim;
        }
    }
    return 0;
}

void wfc_plan_divisor(uint32_t d, uint32_t *mul, uint8_t *shift)
{
    uint8_t s = 0;
    while (s < 32 && ((uint64_t)1 << s) < d)
        s++;
    *shift = s;
    *mul = (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << s) - d)) / d + 1);
}

unsigned wfc_plan_blocks(int64_t n, unsigned threads, unsigned max_blocks)
{
    if (n <= 0 || threads == 0)
        return 1;
    int64_t b = (n + threads - 1) / threads;
    return b > (int64_t)max_blocks ? max_blocks : (unsigned)b;
}

int wfc_plan_flip(wfc_flip *f, const int64_t *sizes, const int64_t *strides, int nd,
                  const bool *flipped)
{
    f->ndim = 0;
    f->offset = 0;
    for (int d = 0; d < nd; d++)
        if (sizes[d] == 0) { /* nothing to read: one empty dim */
            f->ndim = 1;
            f->sizes[0] = 0;
            f->strides[0] = 1;
            return 0;
        }
    for (int d = 0; d < nd; d++) {
        if (sizes[d] == 1)
            continue;
        int64_t step = flipped[d] ? -strides[d] : strides[d];
        if (flipped[d])
            f->offset += (sizes[d] - 1) * strides[d];
        int last = f->ndim - 1;
        if (last >= 0 && f->strides[last] == step * sizes[d]) { /* one run with the outer dim */
            f->sizes[last] *= sizes[d];
            f->strides[last] = step;
            continue;
        }
        if (f->ndim == WFC_MAX_DIMS)
            return -1;
        f->sizes[f->ndim] = sizes[d];
        f->strides[f->ndim] = step;
        f->ndim++;
    }
    return 0;
}

int wfc_plan_gemm_operand(wfc_gemm_operand *op, int64_t rows, int64_t cols, int64_t s0,
                          int64_t s1)
{
    /* A size-1 dim is never stepped across, so any stride of it fits; the
     * leading dim then takes the smallest value cuBLAS accepts. */
    int64_t min_row_ld = cols > 1 ? cols : 1, min_col_ld = rows > 1 ? rows : 1;
    if ((cols == 1 || s1 == 1) && (rows == 1 || s0 >= min_row_ld)) {
        op->trans = false;
        op->ld = rows == 1 ? min_row_ld : s0;
        return 0;
    }
    if ((rows == 1 || s0 == 1) && (cols == 1 || s1 >= min_col_ld)) {
        op->trans = true;
        op->ld = cols == 1 ? min_col_ld : s1;
        return 0;
    }
    return -1;
}

int wfc_plan_reduce_dims(bool *mask, int ndim, const int64_t *dims, int n, char *err,
                         int errlen)
{
    for (int d = 0; d < ndim; d++)
        mask[d] = dims == NULL || n == 0;
    for (int i = 0; dims && i < n; i++) {
        int64_t range = ndim > 0 ? ndim : 1, d = dims[i];
        if (d < -range || d >= range) {
            snprintf(err, (size_t)errlen,
                     "dim %lld is out of range for a tensor of %d dims (expected %lld..%lld)",
                     (long long)d, ndim, (long long)-range, (long long)(range - 1));
            return -1;
        }
        if (d < 0)
            d += range;
        if (ndim == 0)
            continue;
        if (mask[d]) {
            snprintf(err, (size_t)errlen, "dim %lld appears more than once in the list",
                     (long long)d);
            return -1;
        }
        mask[d] = true;
    }
    return 0;
}

void wfc_plan_reduce_split(int64_t nout, int64_t nred, int64_t *chunks, int64_t *chunk_len)
{
    /* One block per output fills the GPU when there are many outputs or
     * short rows; otherwise rows are cut into pieces of at least 16K
     * elements until about 4096 blocks run. */
    const int64_t min_piece = 16384, target_blocks = 4096;
    int64_t c = 1;
    if (nout < target_blocks && nred > 2 * min_piece) {
        c = target_blocks / (nout > 0 ? nout : 1);
        int64_t most = (nred + min_piece - 1) / min_piece;
        if (c > most)
            c = most;
        if (c < 1)
            c = 1;
    }
    *chunks = c;
    *chunk_len = c == 1 ? nred : (nred + c - 1) / c;
}

static int pair_of(int *a, int *b, const int64_t *v, int n, int fallback_a, int fallback_b)
{
    if (n == 0) {
        *a = fallback_a, *b = fallback_b;
        return 0;
    }
    if (n != 1 && n != 2)
        return -1;
    if (v[0] > 1 << 30 || v[n - 1] > 1 << 30 || v[0] < -(1 << 30) || v[n - 1] < -(1 << 30))
        return -1;
    *a = (int)v[0], *b = (int)v[n - 1];
    return 0;
}

int wfc_plan_pool2d(wfc_pool2d *p, const int64_t *kernel, int nk, const int64_t *stride, int ns,
                    const int64_t *padding, int np, const int64_t *dilation, int nd, char *err,
                    int errlen)
{
    if (nk == 0 || pair_of(&p->kh, &p->kw, kernel, nk, 0, 0) < 0 ||
        pair_of(&p->sh, &p->sw, stride, ns, p->kh, p->kw) < 0 ||
        pair_of(&p->ph, &p->pw, padding, np, 0, 0) < 0 ||
        pair_of(&p->dh, &p->dw, dilation, nd, 1, 1) < 0) {
        snprintf(err, (size_t)errlen, "kernel_size, stride, padding and dilation must each be "
                                      "one or two numbers (stride may be empty)");
        return -1;
    }
    if (p->kh <= 0 || p->kw <= 0 || p->sh <= 0 || p->sw <= 0 || p->dh <= 0 || p->dw <= 0) {
        snprintf(err, (size_t)errlen, "kernel_size, stride and dilation must be positive, got "
                 "kernel %dx%d, stride %dx%d, dilation %dx%d", p->kh, p->kw, p->sh, p->sw, p->dh,
                 p->dw);
        return -1;
    }
    if (p->ph < 0 || p->pw < 0 || p->ph > p->kh / 2 || p->pw > p->kw / 2) {
        snprintf(err, (size_t)errlen, "pad should be at least 0 and at most half of the kernel "
                 "size, got padding %dx%d for kernel %dx%d", p->ph, p->pw, p->kh, p->kw);
        return -1;
    }
    return 0;
}

int64_t wfc_plan_pool_out(int64_t in, int k, int s, int p, int d, bool ceil_mode)
{
    return weft_pool_output_size(in, k, p, s, d, ceil_mode);
}

static int two_of(int64_t *out, const int64_t *v, int n, int64_t fallback)
{
    if (n == 0)
        out[0] = out[1] = fallback;
    else if (n == 1 || n == 2)
        out[0] = v[0], out[1] = v[n - 1];
    else
        return -1;
    return 0;
}

int wfc_plan_conv2d(wfc_conv2d *g, const int64_t *input, int input_nd, const int64_t *weight,
                    int weight_nd, const int64_t *stride, int ns, const int64_t *padding, int np,
                    const int64_t *dilation, int nd, int64_t groups, char *err, int errlen)
{
    memset(g, 0, sizeof *g);
    if (input_nd != 4 || weight_nd != 4) {
        snprintf(err, (size_t)errlen, "expected a 4-D input [N, C, H, W] and a 4-D weight "
                 "[out_channels, in_channels / groups, kH, kW], got %d-D and %d-D", input_nd,
                 weight_nd);
        return -1;
    }
    if (two_of(g->stride, stride, ns, 1) < 0 || two_of(g->padding, padding, np, 0) < 0 ||
        two_of(g->dilation, dilation, nd, 1) < 0) {
        snprintf(err, (size_t)errlen, "stride, padding and dilation must each be one or two "
                 "numbers");
        return -1;
    }
    if (g->stride[0] < 1 || g->stride[1] < 1 || g->dilation[0] < 1 || g->dilation[1] < 1 ||
        g->padding[0] < 0 || g->padding[1] < 0 || groups < 1) {
        snprintf(err, (size_t)errlen, "stride, dilation and groups must be positive and padding "
                 "at least 0, got stride %lldx%lld, padding %lldx%lld, dilation %lldx%lld, "
                 "groups %lld", (long long)g->stride[0], (long long)g->stride[1],
                 (long long)g->padding[0], (long long)g->padding[1], (long long)g->dilation[0],
                 (long long)g->dilation[1], (long long)groups);
        return -1;
    }
    g->groups = groups;
    g->n = input[0], g->c = input[1], g->h = input[2], g->w = input[3];
    g->oc = weight[0], g->kh = weight[2], g->kw = weight[3];
    int64_t wc;
    if (__builtin_mul_overflow(weight[1], groups, &wc) || g->c != wc || g->oc % groups != 0 ||
        g->oc == 0) {
        snprintf(err, (size_t)errlen, "a weight [%lld, %lld, %lld, %lld] with groups=%lld does "
                 "not fit an input of %lld channels (expected %lld x %lld, and output channels "
                 "divisible by groups)", (long long)weight[0], (long long)weight[1],
                 (long long)weight[2], (long long)weight[3], (long long)groups, (long long)g->c,
                 (long long)weight[1], (long long)groups);
        return -1;
    }
    int64_t eh, ew;
    if (!conv_padded_extent(g->h, g->padding[0], g->dilation[0], g->kh, &eh) ||
        !conv_padded_extent(g->w, g->padding[1], g->dilation[1], g->kw, &ew)) {
        snprintf(err, (size_t)errlen, "padding [%lld, %lld] and dilation [%lld, %lld] with a "
                 "%lldx%lld input and a %lldx%lld kernel give sizes past int64's range",
                 (long long)g->padding[0], (long long)g->padding[1], (long long)g->dilation[0],
                 (long long)g->dilation[1], (long long)g->h, (long long)g->w, (long long)g->kh,
                 (long long)g->kw);
        return -1;
    }
    if (g->kh < 1 || g->kw < 1 || eh < 1 || ew < 1) {
        snprintf(err, (size_t)errlen, "the (dilated) kernel %lldx%lld is larger than the padded "
                 "input of %lldx%lld with padding %lldx%lld", (long long)g->kh, (long long)g->kw,
                 (long long)g->h, (long long)g->w, (long long)g->padding[0],
                 (long long)g->padding[1]);
        return -1;
    }
    g->oh = (eh - 1) / g->stride[0] + 1;
    g->ow = (ew - 1) / g->stride[1] + 1;
    return 0;
}

int wfc_plan_key_bits(uint64_t max)
{
    int bits = 1;
    while (bits < 64 && max >> bits)
        bits++;
    return bits;
}

/* The CPU's axis formulas, in the element type T: written once, made for
 * float and double. */
#define UPSAMPLE_AXIS(NAME, T)                                                                  \
    static void NAME(int64_t in, int64_t out, bool align, const double *scale, int64_t *i0,     \
                     int64_t *i1, double *l0, double *l1)                                       \
    {                                                                                           \
        T s = align ? (out > 1 ? (T)(in - 1) / (T)(out - 1) : (T)0)                             \
                    : (scale && *scale > 0 ? (T)(1.0 / *scale) : (T)in / (T)out);               \
        for (int64_t o = 0; o < out; o++) {                                                     \
            T real = align ? s * (T)o : s * ((T)o + (T)0.5) - (T)0.5;                           \
            if (real < 0)                                                                       \
                real = 0;                                                                       \
            int64_t i = (int64_t)real;                                                          \
            T lambda = real - (T)i;                                                             \
            lambda = lambda < 0 ? 0 : (lambda > 1 ? 1 : lambda);                                \
            if (i > in - 1)                                                                     \
                i = in - 1;                                                                     \
            i0[o] = i;                                                                          \
            i1[o] = i + (i < in - 1 ? 1 : 0);                                                   \
            l0[o] = (double)(1 - lambda), l1[o] = (double)lambda;                               \
        }                                                                                       \
    }
UPSAMPLE_AXIS(linear_axis_float, float)
UPSAMPLE_AXIS(linear_axis_double, double)
#undef UPSAMPLE_AXIS

void wfc_plan_upsample_axis(int64_t in, int64_t out, bool linear, bool align, const double *scale,
                            bool wide, int64_t *i0, int64_t *i1, double *l0, double *l1)
{
    if (linear) {
        (wide ? linear_axis_double : linear_axis_float)(in, out, align, scale, i0, i1, l0, l1);
        return;
    }
    float s = scale && *scale > 0 ? (float)(1.0 / *scale) : (float)in / (float)out;
    for (int64_t o = 0; o < out; o++) {
        int64_t i = (int64_t)floorf((float)o * s);
        i0[o] = i1[o] = i < in - 1 ? i : in - 1;
        l0[o] = 1, l1[o] = 0;
    }
}

int wfc_plan_upsample_sources(const int64_t *i0, int64_t out, int64_t in, bool linear,
                              int64_t *first, int64_t *end)
{
    for (int64_t o = 1; o < out; o++)
        if (i0[o] < i0[o - 1])
            return -1;
    int64_t lo = 0, hi = 0;
    for (int64_t i = 0; i < in; i++) {
        int64_t from = linear ? i - 1 : i; /* the smallest i0 that reads i */
        while (lo < out && i0[lo] < from)
            lo++;
        if (hi < lo)
            hi = lo;
        while (hi < out && i0[hi] <= i)
            hi++;
        first[i] = lo, end[i] = hi;
    }
    return 0;
}

int wfc_plan_conv_transpose2d(wfc_conv_transpose2d *t, const int64_t *input, int input_nd,
                              const int64_t *weight, int weight_nd, const int64_t *stride, int ns,
                              const int64_t *padding, int np, const int64_t *output_padding,
                              int nop, const int64_t *dilation, int nd, int64_t groups, char *err,
                              int errlen)
{
    memset(t, 0, sizeof *t);
    int64_t s[2], p[2], op[2], d[2];
    const struct {
        const char *name;
        const int64_t *v;
        int n;
        int64_t *pair, min;
        bool may_be_empty;
    } lists[] = {{"stride", stride, ns, s, 1, false},
                 {"padding", padding, np, p, 0, false},
                 {"output_padding", output_padding, nop, op, 0, true},
                 {"dilation", dilation, nd, d, 1, false}};
    for (int k = 0; k < 4; k++) {
        if (lists[k].n == 0 && lists[k].may_be_empty) {
            lists[k].pair[0] = lists[k].pair[1] = 0;
        } else if (lists[k].n == 1 || lists[k].n == 2) {
            lists[k].pair[0] = lists[k].v[0], lists[k].pair[1] = lists[k].v[lists[k].n - 1];
        } else {
            snprintf(err, (size_t)errlen, "%s must have one or two elements, got %d",
                     lists[k].name, lists[k].n);
            return -1;
        }
        if (lists[k].pair[0] < lists[k].min || lists[k].pair[1] < lists[k].min) {
            snprintf(err, (size_t)errlen, "%s must be at least %lld, got [%lld, %lld]",
                     lists[k].name, (long long)lists[k].min, (long long)lists[k].pair[0],
                     (long long)lists[k].pair[1]);
            return -1;
        }
    }
    if (groups < 1) {
        snprintf(err, (size_t)errlen, "groups must be positive, got %lld", (long long)groups);
        return -1;
    }
    char bi[128], bw[128];
    if (input_nd != 4 || weight_nd != 4 || input[1] != weight[0] || weight[0] % groups != 0 ||
        weight[1] < 1) {
        snprintf(err, (size_t)errlen, "expected a 4-D input [N, C_in, H, W] and a 4-D weight "
                 "[C_in, C_out / groups, kH, kW] with C_in divisible by groups=%lld, got input %s "
                 "and weight %s", (long long)groups, weft_format_shape(bi, sizeof bi, input, input_nd),
                 weft_format_shape(bw, sizeof bw, weight, weight_nd));
        return -2;
    }
    for (int i = 0; i < 2; i++)
        if (op[i] >= s[i] && op[i] >= d[i]) {
            snprintf(err, (size_t)errlen, "output_padding (%lld) must be smaller than either "
                     "stride (%lld) or dilation (%lld)", (long long)op[i], (long long)s[i],
                     (long long)d[i]);
            return -1;
        }
    t->out[0] = input[0];
    bool past = __builtin_mul_overflow(weight[1], groups, &t->out[1]);
    for (int i = 0; i < 2 && !past; i++)
        past = !conv_transposed_extent(input[2 + i], s[i], p[i], d[i], weight[2 + i], op[i],
                                  &t->out[2 + i]);
    if (past) {
        snprintf(err, (size_t)errlen, "input %s with weight %s, groups=%lld, stride, padding, "
                 "dilation and output_padding give an output size past int64's range",
                 weft_format_shape(bi, sizeof bi, input, 4), weft_format_shape(bw, sizeof bw, weight, 4),
                 (long long)groups);
        return -1;
    }
    for (int i = 0; i < 2; i++) {
        if (t->out[2 + i] < 1) {
            snprintf(err, (size_t)errlen, "input %s with weight %s gives an output size of %lld, "
                     "which is too small", weft_format_shape(bi, sizeof bi, input, 4),
                     weft_format_shape(bw, sizeof bw, weight, 4), (long long)t->out[2 + i]);
            return -2;
        }
    }
    /* the conv2d over the whole output has H + op / s output rows (one
     * more per whole stride the output padding holds): the input is
     * zero-padded to that at the bottom and right (extra_h, extra_w) */
    t->extra_h = op[0] / s[0];
    t->extra_w = op[1] / s[1];
    if (wfc_plan_conv2d(&t->conv, t->out, 4, weight, 4, s, 2, p, 2, d, 2, groups, err, errlen) < 0)
        return -2;
    if (t->conv.oh != input[2] + t->extra_h || t->conv.ow != input[3] + t->extra_w) {
        /* cannot happen: a guard */
        snprintf(err, (size_t)errlen, "the convolution of the output %lldx%lld gives %lldx%lld, "
                 "not the padded input's %lldx%lld", (long long)t->out[2], (long long)t->out[3],
                 (long long)t->conv.oh, (long long)t->conv.ow,
                 (long long)(input[2] + t->extra_h), (long long)(input[3] + t->extra_w));
        return -2;
    }
    return 0;
}

int wfc_plan_index_put(wfc_index_put_plan *p, int nd, const int *index_nd, const bool *mask,
                       int n, char *err, int errlen)
{
    bool whole[WFC_MAX_DIMS] = {false};
    int dim = 0, first = -1, last = -1;
    memset(p, 0, sizeof *p);
    if (n == 0) {
        snprintf(err, (size_t)errlen, "indices is empty");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        bool is_mask = mask && mask[i] && index_nd[i] >= 0;
        int m = is_mask ? index_nd[i] : 1;
        if (dim + m > nd || dim + m > WFC_MAX_DIMS) {
            snprintf(err, (size_t)errlen, "too many indices for a tensor of dimension %d", nd);
            return -2;
        }
        if (index_nd[i] < 0) {
            whole[dim++] = true;
            continue;
        }
        if (first < 0) {
            first = i;
            p->lead = dim; /* the whole dims before the first index tensor */
        }
        last = i;
        for (int d = 0; d < m; d++) {
            p->entry[p->count] = i;
            p->mask_dim[p->count++] = is_mask ? d : -1;
        }
        dim += m;
    }
    if (first < 0) {
        snprintf(err, (size_t)errlen, "indices holds only None: at least one index tensor is "
                 "needed");
        return -1;
    }
    for (int i = first; i <= last; i++)
        if (index_nd[i] < 0)
            p->lead = 0; /* not adjacent: the index shape goes first */
    int o = 0;
    for (int d = 0; d < nd; d++)
        if (d < dim && !whole[d])
            p->order[o++] = d;
    for (int d = 0; d < nd; d++)
        if (d >= dim || whole[d])
            p->order[o++] = d;
    return 0;
}

int wfc_plan_index_shape(wfc_index_shape *s, const wfc_index_put_plan *p, const int64_t *sizes,
                         int nd, const int64_t *const *index_sizes, const int *index_nd,
                         char *err, int errlen)
{
    memset(s, 0, sizeof *s);
    for (int k = 0; k < p->count; k++) {
        int kn = index_nd[k], out = kn > s->shape_nd ? kn : s->shape_nd;
        if (out > WFC_MAX_DIMS)
            return -3;
        int64_t next[WFC_MAX_DIMS];
        for (int d = 0; d < out; d++) { /* right-aligned, as NumPy broadcasts */
            int a = d - (out - s->shape_nd), b = d - (out - kn);
            int64_t x = a < 0 ? 1 : s->shape[a], y = b < 0 ? 1 : index_sizes[k][b];
            if (x != y && x != 1 && y != 1) {
                char text[128];
                snprintf(err, (size_t)errlen, "shape mismatch: indexing tensors could not be "
                         "broadcast together (index %d has shape %s)", k,
                         weft_format_shape(text, sizeof text, index_sizes[k], kn));
                return -2;
            }
            next[d] = x == 1 ? y : x;
        }
        memcpy(s->shape, next, (size_t)out * sizeof *next);
        s->shape_nd = out;
    }
    const int rest = nd - p->count, lead = p->lead < rest ? p->lead : rest;
    const int64_t *whole = sizes + p->count;
    int r = 0, o = 0;
    for (int d = 0; d < lead; d++)
        s->result[r++] = whole[d];
    for (int d = 0; d < s->shape_nd; d++)
        s->result[r++] = s->shape[d];
    for (int d = lead; d < rest; d++)
        s->result[r++] = whole[d];
    s->result_nd = r;
    for (int d = 0; d < s->shape_nd; d++)
        s->result_order[o++] = lead + d;
    for (int d = 0; d < lead; d++)
        s->result_order[o++] = d;
    for (int d = lead + s->shape_nd; d < r; d++)
        s->result_order[o++] = d;
    return 0;
}

/* ---------------------------------------------------- batch_norm's route */

static bool bn_floating(wfc_bn_type t)
{
    return t == WFC_BN_HALF || t == WFC_BN_BFLOAT16 || t == WFC_BN_FLOAT || t == WFC_BN_DOUBLE;
}

bool wfc_plan_batch_norm(wfc_bn_plan *p, const wfc_bn_query *q, const char **why)
{
    const int64_t int_max = 0x7fffffff;
    memset(p, 0, sizeof *p);
    /* Each rule's reason is the case's: the composed path (or past its
     * checks, the CPU fallback) serves what cuDNN cannot or may not. */
    if (q->ndim < 2)
        return *why = "fewer than 2 dims: the CPU's error", false;
    if (q->input == WFC_BN_BFLOAT16)
        return *why = "bfloat16 input: cuDNN's legacy batch norm documents half, float and "
                      "double only", false;
    if (q->input != WFC_BN_HALF && q->input != WFC_BN_FLOAT && q->input != WFC_BN_DOUBLE)
        return *why = "not a floating-point input: the CPU's error", false;
    p->param = q->input == WFC_BN_HALF ? WFC_BN_FLOAT : q->input;
    p->n = q->sizes[0], p->c = q->sizes[1], p->s = 1;
    for (int d = 2; d < q->ndim; d++)
        p->s *= q->sizes[d];
    if (p->n == 0 || p->c == 0 || p->s == 0)
        return *why = "an empty input: the CPU's NaN statistics or nothing to do", false;
    if (p->n > int_max || p->c > int_max || p->s > int_max || p->n * p->c > int_max / p->s)
        return *why = "beyond cuDNN's int dims and strides", false;
    if (q->weight != WFC_BN_ABSENT && !bn_floating(q->weight))
        return *why = "a weight that is not floating point: the CPU's error", false;
    if (q->backward) {
        if (!q->training)
            return *why = "the eval backward (w r g, elementwise, and two sums): cuDNN has none",
                   false;
        if (q->grad != q->input)
            return *why = "grad_out of another dtype than the input", false;
        if (q->save_mean != p->param || q->save_invstd != p->param)
            return *why = "saved statistics of another dtype than cuDNN's parameters", false;
        if (p->n * p->s <= 1)
            return *why = "one value per channel", false;
        p->kind = WFC_BN_BACKWARD;
        return *why = "cuDNN", true;
    }
    if (q->bias != WFC_BN_ABSENT && !bn_floating(q->bias))
        return *why = "a bias that is not floating point: the CPU's error", false;
    /* the running statistics are written (training) or read in place */
    if ((q->running_mean != WFC_BN_ABSENT && q->running_mean != p->param) ||
        (q->running_var != WFC_BN_ABSENT && q->running_var != p->param))
        return *why = "running statistics of another dtype than cuDNN's parameters", false;
    if (!q->running_contiguous)
        return *why = "strided running statistics (cuDNN updates dense ones in place)", false;
    if (!(q->eps >= q->min_eps) || !isfinite(q->eps))
        return *why = "eps below CUDNN_BN_MIN_EPSILON (or not a number)", false;
    bool both = q->running_mean != WFC_BN_ABSENT && q->running_var != WFC_BN_ABSENT;
    p->kind = q->training || !both ? WFC_BN_TRAINING : WFC_BN_INFERENCE;
    if (p->kind == WFC_BN_TRAINING && p->n * p->s <= 1)
        return *why = "one value per channel in training: the CPU's error", false;
    return *why = "cuDNN", true;
}
