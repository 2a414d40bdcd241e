/* backends/cuda/plan.c — host-side planning for the CUDA kernels (see
 * plan.h).  Plain C: no CUDA header, no weft call, so the test program
 * links it directly and checks it on any machine. */
#include <stdio.h>
#include <string.h>

#include "plan.h"

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
    return 0;
}

unsigned wfc_plan_blocks(int64_t n, unsigned threads, unsigned max_blocks)
{
    if (n <= 0 || threads == 0)
        return 1;
    int64_t b = (n + threads - 1) / threads;
    return b > (int64_t)max_blocks ? max_blocks : (unsigned)b;
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
    int64_t span = in + 2 * (int64_t)p - (int64_t)d * (k - 1) - 1;
    if (span < 0)
        return 0;
    int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (out - 1) * s >= in + p)
        out--;
    return out;
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
    if (g->c != weight[1] * groups || g->oc % groups != 0 || g->oc == 0) {
        snprintf(err, (size_t)errlen, "a weight [%lld, %lld, %lld, %lld] with groups=%lld does "
                 "not fit an input of %lld channels (expected %lld, and output channels "
                 "divisible by groups)", (long long)weight[0], (long long)weight[1],
                 (long long)weight[2], (long long)weight[3], (long long)groups, (long long)g->c,
                 (long long)(weight[1] * groups));
        return -1;
    }
    int64_t eh = g->h + 2 * g->padding[0] - g->dilation[0] * (g->kh - 1);
    int64_t ew = g->w + 2 * g->padding[1] - g->dilation[1] * (g->kw - 1);
    if (g->kh < 1 || g->kw < 1 || eh < 1 || ew < 1) {
        snprintf(err, (size_t)errlen, "the (dilated) kernel %lldx%lld is larger than the padded "
                 "input %lldx%lld", (long long)g->kh, (long long)g->kw,
                 (long long)(g->h + 2 * g->padding[0]), (long long)(g->w + 2 * g->padding[1]));
        return -1;
    }
    g->oh = (eh - 1) / g->stride[0] + 1;
    g->ow = (ew - 1) / g->stride[1] + 1;
    return 0;
}
