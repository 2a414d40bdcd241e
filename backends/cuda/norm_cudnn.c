/* backends/cuda/norm_cudnn.c — native_batch_norm and its training
 * backward through cuDNN's spatial batch norm (one fused statistics pass,
 * one normalisation; built with cuDNN only).  norm.c decides which calls
 * come here (plan.c, wfc_plan_batch_norm) and keeps the composed path for
 * the rest.  The input is seen as [N, C, S, 1] in NCHW, so 2-D, 3-D, 4-D
 * and longer inputs are one case: spatial mode reduces over N, H and W.
 *
 * cuDNN's results match weft's (backends/cpu/nn_norm.c) term by term:
 * resultSaveMean is the batch mean and resultSaveInvVariance
 * 1 / sqrt(biased variance + eps), what weft's save_mean / save_invstd
 * hold and its backward formula reads; the running variance is averaged
 * with the unbiased batch variance (N S / (N S - 1) times the biased),
 * as the CPU's update_running does; exponentialAverageFactor is weft's
 * momentum (running = (1 - momentum) running + momentum batch).  In eval
 * cuDNN's ForwardInference returns no statistics: save_mean is a copy of
 * running_mean and save_invstd 1 / sqrt(running_var + eps), as on the CPU.
 * These functions are marked deprecated in cuDNN 9 (the graph API is
 * their successor) but present and documented; the headers warn only
 * under CUDNN_WARN_DEPRECATED. */
#include "gpu.h"
#include <cudnn.h>

#include "cuda.h"
#include "libs.h"

#define DNN (wfc_cudnn())

/* weft's dtype of a plan's parameter type */
static weft_dtype param_dtype(const wfc_bn_plan *p)
{
    return p->param == WFC_BN_DOUBLE ? WEFT_FLOAT64 : WEFT_FLOAT32;
}

static cudnnDataType_t data_type(weft_dtype d)
{
    return d == WEFT_FLOAT64 ? CUDNN_DATA_DOUBLE : d == WEFT_FLOAT16 ? CUDNN_DATA_HALF
                                                                     : CUDNN_DATA_FLOAT;
}

/* A dense [C] vector of dtype on x's device: t converted (weight and bias
 * of any floating dtype, as the CPU converts them), or fill when absent. */
static int param_vector(weft_tensor **out, const weft_tensor *t, const weft_tensor *x, int64_t C,
                        weft_dtype dtype, double fill)
{
    *out = NULL;
    if (!t) {
        int rc = weft_new_output(out, x, &C, 1, dtype);
        if (rc == 0)
            rc = weft_fill_(*out, fill);
        return rc;
    }
    weft_tensor *converted = NULL;
    int rc = weft_to_dtype(&converted, t, dtype);
    if (rc == 0)
        rc = weft_contiguous(out, converted);
    weft_tensor_release(converted);
    return rc;
}

/* The handle on the current stream of x's device, and the two
 * descriptors: x (and y, the same shape) as [N, C, S, 1], and cuDNN's
 * derived per-channel descriptor. */
typedef struct session {
    cudnnHandle_t handle;
    cudnnTensorDescriptor_t x, param;
} session;

static void close_session(session *s)
{
    if (s->x)
        DNN->cudnnDestroyTensorDescriptor(s->x);
    if (s->param)
        DNN->cudnnDestroyTensorDescriptor(s->param);
}

static int open_session(session *s, const char *op, const wfc_bn_plan *p, const weft_tensor *x)
{
    *s = (session){0};
    int index = weft_tensor_device(x).index;
    int rc = cudaSetDevice(index) == cudaSuccess
                 ? 0
                 : weft_set_error(WEFT_EDEVICE, "%s: cannot select " WFC_BACKEND ":%d", op, index);
    if (rc == 0)
        rc = wfc_cudnn_handle(&s->handle, op, index, wfc_current_stream(index));
    if (rc == 0)
        rc = wfc_cudnn_check(DNN->cudnnCreateTensorDescriptor(&s->x), op, "descriptor");
    if (rc == 0)
        rc = wfc_cudnn_check(DNN->cudnnCreateTensorDescriptor(&s->param), op, "descriptor");
    if (rc == 0)
        rc = wfc_cudnn_check(DNN->cudnnSetTensor4dDescriptor(s->x, CUDNN_TENSOR_NCHW,
                                                             data_type(weft_tensor_dtype(x)),
                                                             (int)p->n, (int)p->c, (int)p->s, 1),
                             op, "input descriptor");
    if (rc == 0)
        rc = wfc_cudnn_check(DNN->cudnnDeriveBNTensorDescriptor(s->param, s->x,
                                                                CUDNN_BATCHNORM_SPATIAL),
                             op, "parameter descriptor");
    if (rc < 0)
        close_session(s);
    return rc;
}

/* alpha 1 and beta 0 in the scaling type cuDNN reads: double for double
 * data, float otherwise */
typedef struct scaling {
    double one_d, zero_d;
    float one_f, zero_f;
    const void *one, *zero;
} scaling;

static void set_scaling(scaling *k, weft_dtype param)
{
    *k = (scaling){.one_d = 1, .zero_d = 0, .one_f = 1, .zero_f = 0};
    k->one = param == WEFT_FLOAT64 ? (const void *)&k->one_d : (const void *)&k->one_f;
    k->zero = param == WEFT_FLOAT64 ? (const void *)&k->zero_d : (const void *)&k->zero_f;
}

static void *data(const weft_tensor *t)
{
    return t ? weft_tensor_data_ptr(t) : NULL;
}

int wfc_batch_norm_cudnn(const wfc_bn_plan *p, const weft_tensor *input, const weft_tensor *weight,
                         const weft_tensor *bias, weft_tensor *running_mean,
                         weft_tensor *running_var, double momentum, double eps,
                         weft_tensor **out, weft_tensor **save_mean, weft_tensor **save_invstd)
{
    const char *op = "batch_norm";
    weft_dtype pd = param_dtype(p);
    enum { X, SCALE, BIAS, MEAN_SCRATCH, VAR_SCRATCH, RM, RV, NT };
    weft_tensor *t[NT] = {0}, *y = NULL, *mean = NULL, *invstd = NULL;
    session s = {0};
    scaling k;
    set_scaling(&k, pd);
    int rc = weft_contiguous(&t[X], input);
    if (rc == 0)
        rc = param_vector(&t[SCALE], weight, input, p->c, pd, 1.0);
    if (rc == 0)
        rc = param_vector(&t[BIAS], bias, input, p->c, pd, 0.0);
    if (rc == 0)
        rc = weft_new_output(&y, input, weft_tensor_sizes(input), weft_tensor_ndim(input),
                             weft_tensor_dtype(input));
    if (rc == 0)
        rc = open_session(&s, op, p, input);
    if (rc == 0 && p->kind == WFC_BN_TRAINING) {
        /* cuDNN updates both running statistics or neither: a missing one
         * is a scratch vector, written and dropped */
        if (running_mean && !running_var)
            rc = param_vector(&t[VAR_SCRATCH], NULL, input, p->c, pd, 1.0);
        else if (running_var && !running_mean)
            rc = param_vector(&t[MEAN_SCRATCH], NULL, input, p->c, pd, 0.0);
        weft_tensor *rm = running_mean ? running_mean : t[MEAN_SCRATCH];
        weft_tensor *rv = running_var ? running_var : t[VAR_SCRATCH];
        if (rc == 0)
            rc = weft_new_output(&mean, input, &p->c, 1, pd);
        if (rc == 0)
            rc = weft_new_output(&invstd, input, &p->c, 1, pd);
        /* the update leaves autograd's graph alone, as the CPU's does */
        if (rc == 0)
            rc = wfc_cudnn_check(
                DNN->cudnnBatchNormalizationForwardTraining(
                    s.handle, CUDNN_BATCHNORM_SPATIAL, k.one, k.zero, s.x, data(t[X]), s.x,
                    data(y), s.param, data(t[SCALE]), data(t[BIAS]), momentum, data(rm),
                    data(rv), eps, data(mean), data(invstd)),
                op, "forward training");
        /* cuDNN wrote the running statistics behind the dispatcher's back:
         * bump their versions as the CPU's in-place updates do, so that a
         * node that saved one sees the change */
        if (rc == 0 && running_mean)
            weft_tensor_bump_version(running_mean);
        if (rc == 0 && running_var)
            weft_tensor_bump_version(running_var);
    } else if (rc == 0) {
        if ((rc = weft_contiguous(&t[RM], running_mean)) == 0)
            rc = weft_contiguous(&t[RV], running_var);
        if (rc == 0)
            rc = wfc_cudnn_check(DNN->cudnnBatchNormalizationForwardInference(
                                     s.handle, CUDNN_BATCHNORM_SPATIAL, k.one, k.zero, s.x,
                                     data(t[X]), s.x, data(y), s.param, data(t[SCALE]),
                                     data(t[BIAS]), data(t[RM]), data(t[RV]), eps),
                                 op, "forward inference");
        /* the statistics the CPU returns in eval: the running ones, as
         * [C] whatever their shape, and 1 / sqrt(var + eps) computed in
         * float64 as the CPU does, then rounded to the parameters' dtype */
        weft_tensor *rm = NULL, *rv = NULL, *wide = NULL, *shifted = NULL, *root = NULL;
        if (rc == 0 && (rc = weft_reshape(&rm, running_mean, &p->c, 1)) == 0)
            rc = weft_clone(&mean, rm);
        if (rc == 0)
            rc = weft_reshape(&rv, running_var, &p->c, 1);
        if (rc == 0)
            rc = weft_to_dtype(&wide, rv, WEFT_FLOAT64);
        if (rc == 0)
            rc = weft_add_scalar(&shifted, wide, eps);
        if (rc == 0)
            rc = weft_rsqrt(&root, shifted);
        if (rc == 0)
            rc = weft_to_dtype(&invstd, root, pd);
        weft_tensor *temps[] = {rm, rv, wide, shifted, root};
        for (size_t i = 0; i < sizeof temps / sizeof *temps; i++)
            weft_tensor_release(temps[i]);
    }
    close_session(&s);
    for (int i = 0; i < NT; i++)
        weft_tensor_release(t[i]);
    if (rc < 0) {
        weft_tensor_release(y);
        weft_tensor_release(mean);
        weft_tensor_release(invstd);
        return rc;
    }
    *out = y, *save_mean = mean, *save_invstd = invstd;
    return 0;
}

/* d of dtype: r itself, or converted (the CPU returns the parameter
 * gradients in the weight's dtype) */
static int as_dtype(weft_tensor **r, weft_dtype dtype)
{
    if (weft_tensor_dtype(*r) == dtype)
        return 0;
    weft_tensor *c = NULL;
    int rc = weft_to_dtype(&c, *r, dtype);
    weft_tensor_release(*r);
    *r = c;
    return rc;
}

int wfc_batch_norm_backward_cudnn(const wfc_bn_plan *p, const weft_tensor *grad,
                                  const weft_tensor *input, const weft_tensor *weight,
                                  const weft_tensor *save_mean, const weft_tensor *save_invstd,
                                  weft_tensor **grad_input, weft_tensor **grad_weight,
                                  weft_tensor **grad_bias)
{
    const char *op = "native_batch_norm_backward";
    weft_dtype pd = param_dtype(p);
    enum { X, G, SCALE, MEAN, INVSTD, NT };
    weft_tensor *t[NT] = {0}, *gx = NULL, *dw = NULL, *db = NULL;
    session s = {0};
    scaling k;
    set_scaling(&k, pd);
    int rc = weft_contiguous(&t[X], input);
    if (rc == 0)
        rc = weft_contiguous(&t[G], grad);
    if (rc == 0)
        rc = param_vector(&t[SCALE], weight, input, p->c, pd, 1.0);
    if (rc == 0)
        rc = weft_contiguous(&t[MEAN], save_mean);
    if (rc == 0)
        rc = weft_contiguous(&t[INVSTD], save_invstd);
    if (rc == 0)
        rc = weft_new_output(&gx, input, weft_tensor_sizes(input), weft_tensor_ndim(input),
                             weft_tensor_dtype(input));
    if (rc == 0)
        rc = weft_new_output(&dw, input, &p->c, 1, pd);
    if (rc == 0)
        rc = weft_new_output(&db, input, &p->c, 1, pd);
    if (rc == 0)
        rc = open_session(&s, op, p, input);
    /* With the saved statistics given cuDNN does not recompute them and
     * reads no eps (weft's backward has none); the value passed only has
     * to satisfy its lower bound. */
    double eps = CUDNN_BN_MIN_EPSILON > 1e-5 ? CUDNN_BN_MIN_EPSILON : 1e-5;
    if (rc == 0)
        rc = wfc_cudnn_check(DNN->cudnnBatchNormalizationBackward(
                                 s.handle, CUDNN_BATCHNORM_SPATIAL, k.one, k.zero, k.one, k.zero,
                                 s.x, data(t[X]), s.x, data(t[G]), s.x, data(gx), s.param,
                                 data(t[SCALE]), data(dw), data(db), eps, data(t[MEAN]),
                                 data(t[INVSTD])),
                             op, "backward");
    close_session(&s);
    for (int i = 0; i < NT; i++)
        weft_tensor_release(t[i]);
    weft_dtype wd = weight ? weft_tensor_dtype(weight) : pd;
    if (rc == 0)
        rc = as_dtype(&dw, wd);
    if (rc == 0)
        rc = as_dtype(&db, wd);
    if (rc < 0) {
        weft_tensor_release(gx);
        weft_tensor_release(dw);
        weft_tensor_release(db);
        return rc;
    }
    *grad_input = gx, *grad_weight = dw, *grad_bias = db;
    return 0;
}
