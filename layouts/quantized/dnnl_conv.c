/* layouts/quantized/dnnl_conv.c — quantized conv2d (and conv2d + relu)
 * through oneDNN's int8 convolution: quint8 NCHW input (any zero point),
 * qint8 weights (OC, C / groups, KH, KW) with zero points 0, per tensor or
 * per output channel, a float bias, stride, padding, dilation, groups, and
 * the output quantized to the caller's scale and zero point, as
 * torch.ao.nn.quantized.functional.conv2d.  As for linear
 * (dnnl_linear.c), oneDNN computes and this file keeps the books: the
 * primitive picks its own layouts (blocked/NHWC for int8); the weight is
 * packed once into its layout and cached with the weight tensor, with the
 * primitive and the reorders of the input and output between NCHW and the
 * primitive's layouts, until the shape or parameters change or the
 * weight's integers change version.  Where the primitive's layout is
 * channels-last (NHWC, what oneDNN's int8 convolutions pick on x86) the
 * output is returned channels-last, as torch's quantized conv2d does, and
 * a channels-last input is read in place: a CNN's layers then pass their
 * activations on without the reorders to NCHW and back, which took 4.5 ms
 * of the int8 CNN's batch of 1000 images.
 *
 * An input zero point is not given to oneDNN: its kernels subtract it in
 * the loop (a third of the time of the int8 CNN's first convolution, one
 * input channel at zero point 73).  sum_k w_k (x_k - z) is sum_k w_k x_k
 * minus z times the weight's sum, a number per output channel, so z goes
 * into the bias (the accumulator's units: oneDNN adds the bias before the
 * output scale); and the padding, which must read as z (the value 0), is
 * made by padding the input with z first.  The primitive then has no
 * source zero point and no padding.  (Not for z > 128 with padding, where
 * the padded z's could saturate oneDNN's 16-bit pair sums on CPUs without
 * VNNI: there oneDNN gets the zero point, as torch gives it.)  The bias is a float: the result can
 * differ from the exact one by the rounding of the bias's sum, which moves
 * an output integer only where it sat on a half (torch's kernels round
 * differently too; the tests allow one step). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dnnl_common.h"
#include "quantized.h"

typedef struct conv_key {
    int64_t n, c, h, w;
    int64_t stride[2], padding[2], dilation[2], groups;
    float src_scale, dst_scale;
    int32_t src_zp, dst_zp;
    int relu, bias;
    int src_channels_last; /* the input's layout: NCHW (0) or NHWC (1) */
    int64_t pieces;        /* how the images were cut (qt__dnnl_plan) */
    int threads_each;
} conv_key;

/* The primitive and reorders for pieces of `n` images. */
typedef struct conv_prim {
    int64_t n;
    dnnl_memory_desc_t user_src, user_dst, src_md, dst_md, scratch_md;
    dnnl_primitive_t prim, src_reorder, dst_reorder; /* reorders NULL when not needed */
    size_t scratch_bytes;
} conv_prim;

typedef struct conv_cache {
    qt_prepacked header;
    pthread_mutex_t lock;
    uint32_t version;
    bool have;
    conv_key asked, key; /* the plan asked for, and the one built (see build) */
    conv_prim slot[2];   /* n / pieces images, and one more when they do not divide */
    dnnl_memory_desc_t wei_md, bias_md;
    bool dst_channels_last; /* the output is written NHWC, in place */
    void *packed;
    int64_t *wsum; /* each output channel's weight integers summed (the zero-point fold) */
} conv_cache;

static void drop(conv_cache *p)
{
    for (int s = 0; s < 2; s++) {
        conv_prim *sl = &p->slot[s];
        dnnl_primitive_t all[] = {sl->prim, sl->src_reorder, sl->dst_reorder};
        for (int i = 0; i < 3; i++)
            if (all[i])
                dnnl_primitive_destroy(all[i]);
        memset(sl, 0, sizeof *sl);
    }
    free(p->packed);
    p->packed = NULL;
    free(p->wsum);
    p->wsum = NULL;
    p->have = false;
}

static void conv_cache_free(qt_prepacked *h)
{
    conv_cache *p = (conv_cache *)h;
    drop(p);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

static qt_prepacked *conv_cache_new(void)
{
    conv_cache *p = calloc(1, sizeof *p);
    if (p && pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p);
        p = NULL;
    }
    if (p)
        p->header.release = conv_cache_free;
    return p ? &p->header : NULL;
}

/* A reorder primitive from one layout to another, or NULL (and 0) when
 * they are the same. */
static int reorder_prim(dnnl_primitive_t *out, dnnl_engine_t eng, const dnnl_memory_desc_t *from,
                        const dnnl_memory_desc_t *to)
{
    *out = NULL;
    if (dnnl_memory_desc_equal(from, to))
        return 0;
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_status_t st = dnnl_reorder_primitive_desc_create(&rpd, from, eng, to, eng, NULL);
    if (!st)
        st = dnnl_primitive_create(out, rpd);
    dnnl_primitive_desc_destroy(rpd);
    if (st)
        *out = NULL;
    return st ? qt__dnnl_error("quantized_conv2d", "a reorder", st) : 0;
}

/* The shapes every slot shares. */
typedef struct conv_shape {
    int64_t oc, kh, kw, oh, ow;
} conv_shape;

/* What build_slot needs beyond the cache. */
typedef struct conv_build {
    conv_cache *p;
    dnnl_engine_t eng;
    const conv_key *key;
    const float *w_scales;
    bool per_channel;
    const conv_shape *sh;
} conv_build;

/* Builds slot s for n images (bl->p->lock held).  Returns 1 when slot 1 would
 * take the weights or write the output in another layout than slot 0 (the
 * caller then runs one piece). */
static int build_slot(void *ctx, int s, int64_t n)
{
    const char *op = "quantized_conv2d";
    const conv_build *bl = ctx;
    conv_cache *p = bl->p;
    dnnl_engine_t eng = bl->eng;
    const conv_key *key = bl->key;
    const conv_shape *sh = bl->sh;
    conv_prim *sl = &p->slot[s];
    int64_t g = key->groups, icg = key->c / g, oc = sh->oc;
    dnnl_dims_t sd = {n, key->c, key->h, key->w}, dd = {n, oc, sh->oh, sh->ow}, bd = {oc};
    dnnl_dims_t wd4 = {oc, icg, sh->kh, sh->kw}, wd5 = {g, oc / g, icg, sh->kh, sh->kw};
    dnnl_dims_t strides = {key->stride[0], key->stride[1]},
                dil = {key->dilation[0] - 1, key->dilation[1] - 1},
                pad = {key->padding[0], key->padding[1]};
    dnnl_memory_desc_t src_any, dst_any, wei_any, nhwc_dst;
    dnnl_status_t st;
    int wnd = g > 1 ? 5 : 4;
    if ((st = dnnl_memory_desc_init_by_tag(&sl->user_src, 4, sd, dnnl_u8,
                                           key->src_channels_last ? dnnl_nhwc : dnnl_nchw)) ||
        (st = dnnl_memory_desc_init_by_tag(&sl->user_dst, 4, dd, dnnl_u8, dnnl_nchw)) ||
        (st = dnnl_memory_desc_init_by_tag(&nhwc_dst, 4, dd, dnnl_u8, dnnl_nhwc)) ||
        (st = dnnl_memory_desc_init_by_tag(&src_any, 4, sd, dnnl_u8, dnnl_format_tag_any)) ||
        (st = dnnl_memory_desc_init_by_tag(&dst_any, 4, dd, dnnl_u8, dnnl_format_tag_any)) ||
        (st = dnnl_memory_desc_init_by_tag(&wei_any, wnd, g > 1 ? wd5 : wd4, dnnl_s8,
                                           dnnl_format_tag_any)) ||
        (st = dnnl_memory_desc_init_by_tag(&p->bias_md, 1, bd, dnnl_f32, dnnl_a)))
        return qt__dnnl_error(op, "a memory descriptor", st);
    dnnl_convolution_desc_t desc;
    if ((st = dnnl_dilated_convolution_forward_desc_init(
             &desc, dnnl_forward_inference, dnnl_convolution_direct, &src_any, &wei_any,
             key->bias ? &p->bias_md : NULL, &dst_any, strides, dil, pad, pad)))
        return qt__dnnl_error(op, "the convolution descriptor", st);
    const qt_dnnl_requant rq = {key->src_scale, key->dst_scale, key->src_zp, key->dst_zp,
                                 key->relu != 0, bl->per_channel};
    dnnl_primitive_desc_t pd = NULL;
    int rc = qt__dnnl_int8_pd(&pd, &desc, &rq, bl->w_scales, oc, eng, op,
                              "the int8 convolution for these parameters");
    if (rc < 0)
        return rc;
    const dnnl_memory_desc_t *wei = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    sl->src_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    sl->dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    bool channels_last = dnnl_memory_desc_equal(&sl->dst_md, &nhwc_dst) != 0;
    if (s == 1 && (!dnnl_memory_desc_equal(wei, &p->wei_md) ||
                   channels_last != p->dst_channels_last)) {
        dnnl_primitive_desc_destroy(pd);
        return 1;
    }
    if (s == 0) {
        p->wei_md = *wei;
        p->dst_channels_last = channels_last;
    }
    if (channels_last)
        sl->user_dst = nhwc_dst;
    sl->scratch_bytes = qt__dnnl_scratch(pd, &sl->scratch_md);
    st = dnnl_primitive_create(&sl->prim, pd);
    dnnl_primitive_desc_destroy(pd);
    if (st) {
        sl->prim = NULL;
        return qt__dnnl_error(op, "to create the convolution", st);
    }
    sl->n = n;
    rc = reorder_prim(&sl->src_reorder, eng, &sl->user_src, &sl->src_md);
    return rc < 0 ? rc : reorder_prim(&sl->dst_reorder, eng, &sl->dst_md, &sl->user_dst);
}

static void drop_slots(void *ctx)
{
    drop(((conv_build *)ctx)->p);
}

/* Builds everything for key and packs the weight (p->lock held), at the
 * OpenMP thread count the pieces run at; with pieces of two sizes that
 * oneDNN would lay out differently, falls back to one piece (*key then
 * says so). */
static int build(conv_cache *p, dnnl_engine_t eng, conv_key *key, const weft_tensor *wc,
                 const float *w_scales, bool per_channel, const conv_shape *sh)
{
    const char *op = "quantized_conv2d";
    conv_build bl = {p, eng, key, w_scales, per_channel, sh};
    qt_dnnl_plan plan = {key->pieces, key->threads_each};
    int rc = qt__dnnl_build_slots(&bl, key->n, &plan, build_slot, drop_slots);
    key->pieces = plan.pieces, key->threads_each = plan.threads_each;
    int64_t g = key->groups;
    dnnl_dims_t wd4 = {sh->oc, key->c / g, sh->kh, sh->kw},
                wd5 = {g, sh->oc / g, key->c / g, sh->kh, sh->kw};
    dnnl_memory_desc_t user_wei;
    dnnl_status_t st;
    if (rc == 0 && (st = dnnl_memory_desc_init_by_tag(&user_wei, g > 1 ? 5 : 4, g > 1 ? wd5 : wd4,
                                                      dnnl_s8, g > 1 ? dnnl_goihw : dnnl_oihw)))
        rc = qt__dnnl_error(op, "a memory descriptor", st);
    size_t bytes = dnnl_memory_desc_get_size(&p->wei_md);
    if (rc == 0 && posix_memalign(&p->packed, 64, bytes ? bytes : 64)) {
        p->packed = NULL;
        rc = weft_set_error(WEFT_ENOMEM, "%s: out of memory for the packed weight", op);
    }
    if (rc == 0)
        rc = qt__dnnl_reorder(op, &user_wei, weft_tensor_data_ptr(wc), &p->wei_md, p->packed);
    /* the weight sums the zero-point fold subtracts (conv_kernel) */
    if (rc == 0)
        rc = qt__weight_sums(op, weft_tensor_data_ptr(wc), sh->oc,
                             weft_tensor_numel(wc) / (sh->oc > 0 ? sh->oc : 1), &p->wsum);
    if (rc < 0) {
        drop(p);
        return rc;
    }
    p->have = true;
    p->key = *key;
    return 0;
}

/* One call's pieces, run on weft's pool: image ranges of the input (NCHW
 * or NHWC, either way an image's bytes follow each other) and output,
 * each piece with its own share of the reorder and scratch buffers. */
typedef struct conv_job {
    const conv_cache *p;
    dnnl_engine_t eng;
    const uint8_t *x;
    uint8_t *y;
    const float *bias;
    int64_t in_image, out_image; /* bytes an image */
    uint8_t *src_buf, *dst_buf, *scratch;
    size_t src_stride, dst_stride, scratch_stride;
} conv_job;

static dnnl_status_t run_piece(void *job, int64_t i)
{
    const conv_job *j = job;
    const conv_cache *p = j->p;
    int64_t b0 = i * p->key.n / p->key.pieces;
    int64_t cnt = (i + 1) * p->key.n / p->key.pieces - b0;
    const conv_prim *sl = &p->slot[cnt != p->slot[0].n];
    dnnl_engine_t eng = j->eng;
    void *ux = (void *)(j->x + b0 * j->in_image), *uy = j->y + b0 * j->out_image;
    dnnl_memory_t us = NULL, s = NULL, wm = NULL, bm = NULL, d = NULL, ud = NULL, scr = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_status_t st;
    if (!(st = dnnl_memory_create(&us, &sl->user_src, eng, ux)) &&
        !(st = dnnl_memory_create(&ud, &sl->user_dst, eng, uy)) &&
        !(st = dnnl_memory_create(&s, &sl->src_md, eng,
                                  sl->src_reorder ? j->src_buf + i * j->src_stride : ux)) &&
        !(st = dnnl_memory_create(&d, &sl->dst_md, eng,
                                  sl->dst_reorder ? j->dst_buf + i * j->dst_stride : uy)) &&
        !(st = dnnl_memory_create(&wm, &p->wei_md, eng, p->packed)) &&
        !(st = j->bias ? dnnl_memory_create(&bm, &p->bias_md, eng, (void *)j->bias)
                       : dnnl_success) &&
        !(st = sl->scratch_bytes ? dnnl_memory_create(&scr, &sl->scratch_md, eng,
                                                      j->scratch + i * j->scratch_stride)
                                 : dnnl_success) &&
        !(st = dnnl_stream_create(&stream, eng, dnnl_stream_default_flags))) {
        dnnl_exec_arg_t in[2] = {{DNNL_ARG_FROM, us}, {DNNL_ARG_TO, s}};
        dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, s}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, d}};
        int nargs = 3;
        if (bm)
            args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, bm};
        if (scr)
            args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, scr};
        dnnl_exec_arg_t back[2] = {{DNNL_ARG_FROM, d}, {DNNL_ARG_TO, ud}};
        st = sl->src_reorder ? dnnl_primitive_execute(sl->src_reorder, stream, 2, in) : 0;
        if (!st)
            st = dnnl_primitive_execute(sl->prim, stream, nargs, args);
        if (!st && sl->dst_reorder)
            st = dnnl_primitive_execute(sl->dst_reorder, stream, 2, back);
        if (!st)
            st = dnnl_stream_wait(stream);
    }
    dnnl_stream_destroy(stream);
    dnnl_memory_t all[] = {us, s, wm, bm, d, ud, scr};
    for (int a = 0; a < 7; a++)
        dnnl_memory_destroy(all[a]);
    return st;
}

/* The larger of the two slots' sizes of what get() says, rounded to 64. */
static size_t stride_of(const conv_cache *p, size_t (*get)(const conv_prim *))
{
    size_t most = 0;
    for (int s = 0; s < 2; s++)
        if (p->slot[s].prim && get(&p->slot[s]) > most)
            most = get(&p->slot[s]);
    return (most + 63) / 64 * 64;
}

static size_t src_bytes(const conv_prim *sl)
{
    return sl->src_reorder ? dnnl_memory_desc_get_size(&sl->src_md) : 0;
}

static size_t dst_bytes(const conv_prim *sl)
{
    return sl->dst_reorder ? dnnl_memory_desc_get_size(&sl->dst_md) : 0;
}

static size_t scratch_bytes(const conv_prim *sl)
{
    return sl->scratch_bytes;
}

static int check_inputs(const char *op, const weft_tensor *x, const weft_tensor *w,
                        const weft_tensor *bias, int64_t groups)
{
    int ql = qt__affine_layout;
    if (weft_tensor_layout(x) != ql || weft_tensor_layout(w) != ql)
        return weft_set_error(WEFT_EINVAL, "%s: expected quantized input and weight", op);
    const qt_affine *qx = weft_tensor_layout_payload(x), *qw = weft_tensor_layout_payload(w);
    if (weft_tensor_dtype(x) != WEFT_UINT8 || qx->scheme != QT_PER_TENSOR_AFFINE ||
        weft_tensor_ndim(x) != 4)
        return weft_set_error(WEFT_EDTYPE, "%s: the input must be a 4-d (N, C, H, W) quint8 "
                                           "tensor with a per-tensor quantizer",
                              op);
    if (weft_tensor_dtype(w) != WEFT_INT8 || weft_tensor_ndim(w) != 4 ||
        (qw->scheme == QT_PER_CHANNEL_AFFINE && qw->axis != 0))
        return weft_set_error(WEFT_EDTYPE, "%s: the weight must be a 4-d qint8 tensor (OC, C / "
                                           "groups, KH, KW), per tensor or per output channel",
                              op);
    int64_t oc = weft_tensor_size(w, 0);
    bool zero = qw->scheme == QT_PER_TENSOR_AFFINE ? qw->zero_point == 0 : true;
    for (int64_t j = 0; qw->scheme == QT_PER_CHANNEL_AFFINE && j < oc; j++)
        zero &= ((const int64_t *)weft_tensor_data_ptr(qw->zero_points))[j] == 0;
    if (!zero)
        return weft_set_error(WEFT_EINVAL, "%s: the weight's zero points must be 0 (symmetric "
                                           "quantization, as torch's onednn engine requires)",
                              op);
    int64_t wc = 0;
    if (groups < 1 || weft_tensor_size(x, 1) % groups || oc % groups ||
        __builtin_mul_overflow(weft_tensor_size(w, 1), groups, &wc) || wc != weft_tensor_size(x, 1))
        return weft_set_error(WEFT_ESHAPE, "%s: %lld input channels, a weight for %lld per group "
                                           "and %lld groups do not fit",
                              op, (long long)weft_tensor_size(x, 1),
                              (long long)weft_tensor_size(w, 1), (long long)groups);
    if (bias && (weft_tensor_layout(bias) || weft_tensor_ndim(bias) != 1 ||
                 weft_tensor_size(bias, 0) != oc || !weft_dtype_is_floating(weft_tensor_dtype(bias))))
        return weft_set_error(WEFT_ESHAPE, "%s: expected a float bias of %lld entries", op,
                              (long long)oc);
    return 0;
}

/* A pair from an int[] of 1 or 2 entries; false when it has another length
 * or an entry below min. */
static bool pair(const weft_call *call, int i, int64_t out[2], int64_t min)
{
    int len;
    const int64_t *v = weft_arg_ints(call, i, &len);
    if (len != 1 && len != 2)
        return false;
    out[0] = v[0];
    out[1] = v[len - 1];
    return out[0] >= min && out[1] >= min;
}

/* quantized_conv2d(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding,
 *                  int[] dilation, int groups, float scale, int zero_point, bool relu=False) */
static int conv_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "quantized_conv2d";
    const weft_tensor *x = weft_arg_tensor(call, 0), *w = weft_arg_tensor(call, 1),
                      *bias = weft_arg_tensor(call, 2);
    conv_key key;
    memset(&key, 0, sizeof key); /* compared with memcmp: no stray padding bytes */
    key.groups = weft_arg_int(call, 6);
    double out_scale = weft_arg_double(call, 7);
    int64_t out_zp = weft_arg_int(call, 8);
    int rc = check_inputs(op, x, w, bias, key.groups);
    if (rc < 0)
        return rc;
    if (!pair(call, 3, key.stride, 1) || !pair(call, 4, key.padding, 0) ||
        !pair(call, 5, key.dilation, 1))
        return weft_set_error(WEFT_EINVAL, "%s: stride and dilation take 1 or 2 entries >= 1, "
                                           "padding 1 or 2 entries >= 0",
                              op);
    if ((rc = qt__check_params(op, out_scale, out_zp, WEFT_UINT8)) < 0)
        return rc;
    qt_affine *qx = weft_tensor_layout_payload(x), *qw = weft_tensor_layout_payload(w);
    key.n = weft_tensor_size(x, 0), key.c = weft_tensor_size(x, 1);
    key.h = weft_tensor_size(x, 2), key.w = weft_tensor_size(x, 3);
    int64_t oc = weft_tensor_size(w, 0), kh = weft_tensor_size(w, 2), kw = weft_tensor_size(w, 3);
    /* the rule's floor division (C's truncation made a dilated kernel up to
     * a stride larger than the padded input give one output) */
    int64_t oh = weft_pool_output_size(key.h, kh, key.padding[0], key.stride[0], key.dilation[0],
                                       false);
    int64_t ow = weft_pool_output_size(key.w, kw, key.padding[1], key.stride[1], key.dilation[1],
                                       false);
    if (oh < 1 || ow < 1)
        return weft_set_error(WEFT_ESHAPE, "%s: the kernel (%lld x %lld, %lld x %lld with its "
                              "dilation) is larger than the padded input (%lld x %lld)", op,
                              (long long)kh, (long long)kw,
                              (long long)(key.dilation[0] * (kh - 1) + 1),
                              (long long)(key.dilation[1] * (kw - 1) + 1),
                              (long long)(key.h + 2 * key.padding[0]),
                              (long long)(key.w + 2 * key.padding[1]));
    key.src_scale = (float)qx->scale, key.dst_scale = (float)out_scale;
    key.src_zp = (int32_t)qx->zero_point, key.dst_zp = (int32_t)out_zp;
    key.relu = weft_arg_bool(call, 9), key.bias = bias != NULL;
    dnnl_engine_t eng;
    if ((rc = qt__dnnl_engine(&eng, op)) < 0)
        return rc;
    bool per_channel = qw->scheme == QT_PER_CHANNEL_AFFINE;
    /* the input's zero point into the bias (above), except where the padding
     * made of it could saturate: without VNNI oneDNN's u8 x s8 products add
     * in pairs to 16 bits, and two padded z's times a weight of -128 or 127
     * leave that range for z > 128.  There oneDNN gets the zero point and
     * pads with it itself (exact, as torch's); real data that large
     * saturates alike in both ways, and in torch's. */
    bool padded = key.padding[0] || key.padding[1];
    bool fold = qx->zero_point != 0 && (!padded || qx->zero_point <= 128);
    float *w_scales = malloc(sizeof(float) * (size_t)oc),
          *b = bias || fold ? calloc((size_t)oc, sizeof(float)) : NULL;
    weft_tensor *xc = NULL, *wc = NULL, *bf = NULL, *bc = NULL, *raw = NULL, *y = NULL, *out = NULL;
    /* the reordered input and output, when the primitive wants another
     * layout: weft's allocator keeps such blocks for the next call, where
     * fresh memory every call took a page fault every 4 KiB */
    weft_tensor *src_buf = NULL, *dst_buf = NULL, *scratch = NULL;
    if (!w_scales || ((bias || fold) && !b)) {
        rc = weft_set_error(WEFT_ENOMEM, "%s: out of memory", op);
        goto done;
    }
    for (int64_t j = 0; j < oc; j++)
        w_scales[j] = (float)(per_channel ? ((const double *)weft_tensor_data_ptr(qw->scales))[j]
                                          : qw->scale);
    if (fold && (key.padding[0] || key.padding[1])) {
        /* the padding made here, of the zero point (the value 0) */
        double z = (double)qx->zero_point;
        int64_t pads[4] = {key.padding[1], key.padding[1], key.padding[0], key.padding[0]};
        if ((rc = weft_pad(&xc, qx->repr, pads, 4, "constant", &z)) < 0)
            goto done;
        key.h += 2 * key.padding[0], key.w += 2 * key.padding[1];
        key.padding[0] = key.padding[1] = 0;
    } else {
        xc = weft_tensor_retain(qx->repr);
    }
    key.src_channels_last = qt__is_channels_last(xc);
    if (!key.src_channels_last) {
        weft_tensor *c = NULL;
        rc = weft_contiguous(&c, xc);
        weft_tensor_release(xc);
        xc = c;
        if (rc < 0)
            goto done;
    }
    if (bias) {
        if ((rc = weft_to_dtype(&bf, bias, WEFT_FLOAT32)) < 0 || (rc = weft_contiguous(&bc, bf)) < 0)
            goto done;
        const float *bp = weft_tensor_data_ptr(bc);
        for (int64_t j = 0; j < oc; j++)
            b[j] = bp[j] / ((float)qx->scale * w_scales[j]);
    }
    if (fold) { /* the bias gets minus z times the weight sums, below */
        key.src_zp = 0;
        key.bias = 1;
    }
    conv_cache *p = (conv_cache *)qt__prepacked_get(qw, conv_cache_free, conv_cache_new);
    if (!p) {
        rc = weft_set_error(WEFT_ENOMEM, "%s: out of memory", op);
        goto done;
    }
    const conv_shape sh = {oc, kh, kw, oh, ow};
    double taps = (double)(key.c / key.groups * kh * kw);
    qt_dnnl_plan plan = qt__dnnl_plan(key.n, (double)key.n * (double)oc * (double)(oh * ow) * taps,
                                      (double)oc * taps);
    key.pieces = plan.pieces, key.threads_each = plan.threads_each;
    pthread_mutex_lock(&p->lock);
    uint32_t version = weft_tensor_version(qw->repr);
    if (!p->have || p->version != version || memcmp(&p->asked, &key, sizeof key) != 0) {
        p->asked = key;
        if ((rc = weft_contiguous(&wc, qw->repr)) == 0 &&
            (rc = build(p, eng, &key, wc, w_scales, per_channel, &sh)) == 0)
            p->version = version;
    }
    if (rc == 0 && fold) /* the weight sums are the packed weight's companion */
        qt__fold_zero_point(b, qx->zero_point, p->wsum, oc);
    if (rc == 0 && p->dst_channels_last) /* (N, OH, OW, OC) in memory, seen as NCHW */
        rc = weft_new_output(&raw, xc, (int64_t[]){key.n, oh, ow, oc}, 4, WEFT_UINT8);
    if (rc == 0)
        rc = p->dst_channels_last ? weft_permute(&y, raw, (int64_t[]){0, 3, 1, 2}, 4)
                                  : weft_new_output(&y, xc, (int64_t[]){key.n, oc, oh, ow}, 4,
                                                    WEFT_UINT8);
    conv_job job = {.p = p, .eng = eng, .bias = key.bias ? b : NULL,
                    .in_image = key.c * key.h * key.w, .out_image = oc * oh * ow};
    if (rc == 0) {
        job.src_stride = stride_of(p, src_bytes);
        job.dst_stride = stride_of(p, dst_bytes);
        job.scratch_stride = stride_of(p, scratch_bytes);
    }
    int64_t pieces = p->key.pieces;
    if (rc == 0 && job.src_stride &&
        (rc = weft_new_output(&src_buf, xc, (int64_t[]){(int64_t)job.src_stride * pieces + 63}, 1,
                              WEFT_UINT8)) == 0)
        job.src_buf = qt__align64(weft_tensor_data_ptr(src_buf));
    if (rc == 0 && job.dst_stride &&
        (rc = weft_new_output(&dst_buf, xc, (int64_t[]){(int64_t)job.dst_stride * pieces + 63}, 1,
                              WEFT_UINT8)) == 0)
        job.dst_buf = qt__align64(weft_tensor_data_ptr(dst_buf));
    if (rc == 0 && job.scratch_stride &&
        (rc = weft_new_output(&scratch, xc, (int64_t[]){(int64_t)job.scratch_stride * pieces + 63}, 1,
                              WEFT_UINT8)) == 0)
        job.scratch = qt__align64(weft_tensor_data_ptr(scratch));
    if (rc == 0) {
        job.x = weft_tensor_data_ptr(xc);
        job.y = weft_tensor_data_ptr(raw ? raw : y);
        dnnl_status_t st = qt__dnnl_run_pieces(pieces, p->key.threads_each, run_piece, &job);
        if (st)
            rc = qt__dnnl_error(op, "to run the convolution", st);
    }
    pthread_mutex_unlock(&p->lock);
    if (rc == 0) {
        qt_affine q = {.scheme = QT_PER_TENSOR_AFFINE, .scale = out_scale, .zero_point = out_zp};
        rc = qt__wrap(&out, y, &q);
    }
done:
    free(w_scales);
    free(b);
    weft_tensor *all[] = {xc, wc, bf, bc, raw, y, src_buf, dst_buf, scratch};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        weft_tensor_release(all[i]);
    return rc < 0 ? rc : weft_return_tensor(call, 0, out);
}

int qt__register_dnnl_conv(weft_registrar *reg)
{
    return weft_register_kernel(reg, "quantized_conv2d", weft_layout_key(qt__affine_layout),
                                WEFT_DEVICE_TYPE_CPU, conv_kernel, NULL, NULL);
}
