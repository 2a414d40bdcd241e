/* backends/cuda/conv.c — conv2d and its gradient operators
 * (convolution_backward_input, convolution_backward_weight), and
 * conv_transpose2d (a backward data plus its bias), through cuDNN
 * (opened at first use, libs.c), built only when configure found cuDNN
 * (otherwise the convolutions stay on the CPU fallback).  The geometry is checked by plan.c before cuDNN is
 * called; the algorithm of each (kind, dtype, shape) is chosen once by
 * cuDNN's heuristics and cached; workspaces come from the caching
 * allocator on the call's stream.  float32 runs without TF32 unless
 * WEFT_CUDA_ALLOW_TF32=1, as the products do. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include <cudnn.h>

#include "cuda.h"
#include "libs.h"

#define MAX_DEVICES 64
/* the largest workspace an algorithm may ask for */
#define WORKSPACE_LIMIT ((size_t)1 << 30)

static bool allow_tf32;

/* When to time cuDNN's algorithms (cudnnFind*Ex) rather than take its
 * heuristics' first choice: WEFT_CUDNN_FIND=never|auto|always, read at
 * load.  On an H200 the heuristics' forward for a 64x64x56x56 3x3
 * convolution ran at 0.61x the speed of PyTorch's choice, while timing
 * every algorithm costs tens of milliseconds per problem: more than a
 * small convolution (the training CNN's are 30-60 MFLOP) ever wins back.
 * auto times problems of at least FIND_MIN_FLOP, where one call is
 * hundreds of microseconds and a few calls repay the search. */
enum { FIND_NEVER, FIND_AUTO, FIND_ALWAYS };
static int find_mode = FIND_AUTO;
#define FIND_MIN_FLOP 1e9
/* the workspace the timed search may offer the algorithms */
#define FIND_WORKSPACE ((size_t)256 << 20)

/* the cuDNN table, loaded before the first handle (handle_for) */
#define DNN (wfc_cudnn())

/* ------------------------------------------------------------ handles */

typedef struct thread_handles {
    cudnnHandle_t handle[MAX_DEVICES];
    struct thread_handles *next;
} thread_handles;

static pthread_key_t handles_key;
static bool key_made;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* handles list and algorithm cache */
static thread_handles *all_handles;

static void destroy_handles(thread_handles *th)
{
    for (int i = 0; i < MAX_DEVICES; i++)
        if (th->handle[i]) {
            cudaSetDevice(i);
            DNN->cudnnDestroy(th->handle[i]);
        }
    free(th);
}

static void thread_exit(void *p)
{
    pthread_mutex_lock(&lock);
    for (thread_handles **q = &all_handles; *q; q = &(*q)->next)
        if (*q == p) {
            *q = ((thread_handles *)p)->next;
            break;
        }
    pthread_mutex_unlock(&lock);
    destroy_handles(p);
}

static int dnn_error(cudnnStatus_t s, const char *op, const char *what)
{
    if (s == CUDNN_STATUS_SUCCESS)
        return 0;
    return weft_set_error(s == CUDNN_STATUS_ALLOC_FAILED ? WEFT_ENOMEM : WEFT_EDEVICE,
                          "%s: cuDNN %s: %s", op, what, DNN->cudnnGetErrorString(s));
}

static int handle_for(cudnnHandle_t *out, const char *op, int index, void *stream)
{
    if (index < 0 || index >= MAX_DEVICES)
        return weft_set_error(WEFT_EDEVICE, "%s: " WFC_BACKEND ":%d is beyond the %d devices cuDNN handles "
                                            "are kept for", op, index, MAX_DEVICES);
    thread_handles *th = pthread_getspecific(handles_key);
    if (!th) {
        if (!(th = calloc(1, sizeof *th)) || pthread_setspecific(handles_key, th) != 0) {
            free(th);
            return weft_set_error(WEFT_ENOMEM, "%s: no memory for the cuDNN handles", op);
        }
        pthread_mutex_lock(&lock);
        th->next = all_handles;
        all_handles = th;
        pthread_mutex_unlock(&lock);
    }
    if (!wfc_cudnn()) {
        char why[256]; /* the loader's message, before it is replaced */
        snprintf(why, sizeof why, "%s", weft_last_error());
        return weft_set_error(WEFT_ENOTSUP, "%s: %s", op, why);
    }
    if (!th->handle[index]) {
        int rc = dnn_error(DNN->cudnnCreate(&th->handle[index]), op, "handle creation");
        if (rc < 0) {
            th->handle[index] = NULL;
            return rc;
        }
    }
    *out = th->handle[index];
    return dnn_error(DNN->cudnnSetStream(*out, (cudaStream_t)stream), op, "set stream");
}

/* norm.c's batch norm shares the handles (libs.h) */
int wfc_cudnn_handle(cudnnHandle_t *out, const char *op, int index, void *stream)
{
    return handle_for(out, op, index, stream);
}

int wfc_cudnn_check(cudnnStatus_t s, const char *op, const char *what)
{
    return dnn_error(s, op, what);
}

/* --------------------------------------------------- the algorithm cache */

enum kind { FORWARD, BACKWARD_DATA, BACKWARD_FILTER };

typedef struct cached_algo {
    int kind, device, dtype;
    int64_t shape[9], stride[2], padding[2], dilation[2], groups;
    int algo;
    size_t workspace;
    struct cached_algo *next;
} cached_algo;

static cached_algo *algos;

static bool same_problem(const cached_algo *a, int kind, int device, int dtype, const wfc_conv2d *g)
{
    const int64_t shape[9] = {g->n, g->c, g->h, g->w, g->oc, g->kh, g->kw, g->oh, g->ow};
    return a->kind == kind && a->device == device && a->dtype == dtype &&
           memcmp(a->shape, shape, sizeof shape) == 0 && a->stride[0] == g->stride[0] &&
           a->stride[1] == g->stride[1] && a->padding[0] == g->padding[0] &&
           a->padding[1] == g->padding[1] && a->dilation[0] == g->dilation[0] &&
           a->dilation[1] == g->dilation[1] && a->groups == g->groups;
}

static bool cache_find(int kind, int device, int dtype, const wfc_conv2d *g, int *algo,
                       size_t *workspace)
{
    pthread_mutex_lock(&lock);
    cached_algo *a = algos;
    while (a && !same_problem(a, kind, device, dtype, g))
        a = a->next;
    if (a)
        *algo = a->algo, *workspace = a->workspace;
    pthread_mutex_unlock(&lock);
    return a != NULL;
}

static void cache_add(int kind, int device, int dtype, const wfc_conv2d *g, int algo,
                      size_t workspace)
{
    cached_algo *a = calloc(1, sizeof *a);
    if (!a)
        return; /* chosen again next time */
    *a = (cached_algo){.kind = kind, .device = device, .dtype = dtype,
                       .shape = {g->n, g->c, g->h, g->w, g->oc, g->kh, g->kw, g->oh, g->ow},
                       .stride = {g->stride[0], g->stride[1]},
                       .padding = {g->padding[0], g->padding[1]},
                       .dilation = {g->dilation[0], g->dilation[1]}, .groups = g->groups,
                       .algo = algo, .workspace = workspace};
    pthread_mutex_lock(&lock);
    a->next = algos;
    algos = a;
    pthread_mutex_unlock(&lock);
}

/* ------------------------------------------------------ the descriptors */

typedef struct descriptors {
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
} descriptors;

static void destroy_descriptors(descriptors *d)
{
    if (d->x)
        DNN->cudnnDestroyTensorDescriptor(d->x);
    if (d->y)
        DNN->cudnnDestroyTensorDescriptor(d->y);
    if (d->w)
        DNN->cudnnDestroyFilterDescriptor(d->w);
    if (d->conv)
        DNN->cudnnDestroyConvolutionDescriptor(d->conv);
}

static int make_descriptors(descriptors *d, const char *op, weft_dtype dtype, const wfc_conv2d *g)
{
    memset(d, 0, sizeof *d);
    cudnnDataType_t type = dtype == WEFT_FLOAT64   ? CUDNN_DATA_DOUBLE
                           : dtype == WEFT_FLOAT16 ? CUDNN_DATA_HALF
                           : dtype == WEFT_BFLOAT16 ? CUDNN_DATA_BFLOAT16
                                                    : CUDNN_DATA_FLOAT;
    cudnnDataType_t compute = dtype == WEFT_FLOAT64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    cudnnMathType_t math = dtype == WEFT_FLOAT32 && !allow_tf32 ? CUDNN_FMA_MATH
                           : dtype == WEFT_FLOAT64              ? CUDNN_DEFAULT_MATH
                                                                : CUDNN_TENSOR_OP_MATH;
    int rc = dnn_error(DNN->cudnnCreateTensorDescriptor(&d->x), op, "descriptor");
    if (rc == 0)
        rc = dnn_error(DNN->cudnnCreateTensorDescriptor(&d->y), op, "descriptor");
    if (rc == 0)
        rc = dnn_error(DNN->cudnnCreateFilterDescriptor(&d->w), op, "descriptor");
    if (rc == 0)
        rc = dnn_error(DNN->cudnnCreateConvolutionDescriptor(&d->conv), op, "descriptor");
    if (rc == 0)
        rc = dnn_error(DNN->cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NCHW, type, (int)g->n,
                                                  (int)g->c, (int)g->h, (int)g->w),
                       op, "input descriptor");
    if (rc == 0)
        rc = dnn_error(DNN->cudnnSetTensor4dDescriptor(d->y, CUDNN_TENSOR_NCHW, type, (int)g->n,
                                                  (int)g->oc, (int)g->oh, (int)g->ow),
                       op, "output descriptor");
    if (rc == 0)
        rc = dnn_error(DNN->cudnnSetFilter4dDescriptor(d->w, type, CUDNN_TENSOR_NCHW, (int)g->oc,
                                                  (int)(g->c / g->groups), (int)g->kh, (int)g->kw),
                       op, "weight descriptor");
    if (rc == 0)
        rc = dnn_error(DNN->cudnnSetConvolution2dDescriptor(
                           d->conv, (int)g->padding[0], (int)g->padding[1], (int)g->stride[0],
                           (int)g->stride[1], (int)g->dilation[0], (int)g->dilation[1],
                           CUDNN_CROSS_CORRELATION, compute),
                       op, "convolution descriptor");
    if (rc == 0)
        rc = dnn_error(DNN->cudnnSetConvolutionGroupCount(d->conv, (int)g->groups), op, "groups");
    if (rc == 0)
        rc = dnn_error(DNN->cudnnSetConvolutionMathType(d->conv, math), op, "math type");
    if (rc < 0)
        destroy_descriptors(d);
    return rc;
}

/* The first of cuDNN's answers (best first) that succeeded within limit
 * bytes of workspace: its algorithm and workspace size.  A macro, since
 * the three kinds' answers are three struct types with the same fields. */
#define first_fitting(perf, found, limit, algo, workspace)                               \
    __extension__({                                                                    \
        bool fits_ = false;                                                            \
        for (int i_ = 0; !fits_ && i_ < (found); i_++)                                 \
            if ((perf)[i_].status == CUDNN_STATUS_SUCCESS && (perf)[i_].memory <= (limit)) \
                *(algo) = (int)(perf)[i_].algo, *(workspace) = (perf)[i_].memory, fits_ = true; \
        fits_;                                                                         \
    })

/* The algorithm of one problem: cached, else timed (find_mode, above)
 * or cuDNN's first heuristic choice that fits the workspace limit; the
 * search's buffers are the call's own (x, w, y), whose result the real
 * call then overwrites whole. */
static int choose(int kind, const char *op, cudnnHandle_t h, const descriptors *d, int device,
                  weft_dtype dtype, const wfc_conv2d *g, void *x, void *w, void *y, int *algo,
                  size_t *workspace)
{
    if (cache_find(kind, device, dtype, g, algo, workspace))
        return 0;
    enum { MAX_ALGOS = 16 };
    int found = 0, rc = 0;
    bool chosen = false;
    double flop = 2.0 * (double)g->n * (double)g->oc * (double)g->oh * (double)g->ow *
                  (double)(g->c / g->groups) * (double)g->kh * (double)g->kw;
    weft_tensor *search = NULL;
    if (find_mode == FIND_ALWAYS || (find_mode == FIND_AUTO && flop >= FIND_MIN_FLOP)) {
        /* a workspace for the search; without one (a full device), the
         * heuristics below choose as they always may */
        weft_device dev = {.type = WFC_DEVICE_TYPE, .index = (int16_t)device};
        if (weft_empty(&search, (const int64_t[]){(int64_t)FIND_WORKSPACE}, 1, WEFT_UINT8, dev) < 0)
            search = NULL;
    }
    if (search) {
        /* the search writes the result's buffer, which the real call then
         * overwrites whole; results come fastest first */
        void *ws = weft_tensor_data_ptr(search);
        if (kind == FORWARD) {
            cudnnConvolutionFwdAlgoPerf_t perf[MAX_ALGOS];
            rc = dnn_error(DNN->cudnnFindConvolutionForwardAlgorithmEx(h, d->x, x, d->w, w, d->conv,
                                                                  d->y, y, MAX_ALGOS, &found, perf,
                                                                  ws, FIND_WORKSPACE),
                           op, "timing the algorithms");
            chosen = rc == 0 && first_fitting(perf, found, FIND_WORKSPACE, algo, workspace);
        } else if (kind == BACKWARD_DATA) {
            cudnnConvolutionBwdDataAlgoPerf_t perf[MAX_ALGOS];
            rc = dnn_error(DNN->cudnnFindConvolutionBackwardDataAlgorithmEx(
                               h, d->w, w, d->y, y, d->conv, d->x, x, MAX_ALGOS, &found, perf, ws,
                               FIND_WORKSPACE),
                           op, "timing the algorithms");
            chosen = rc == 0 && first_fitting(perf, found, FIND_WORKSPACE, algo, workspace);
        } else {
            cudnnConvolutionBwdFilterAlgoPerf_t perf[MAX_ALGOS];
            rc = dnn_error(DNN->cudnnFindConvolutionBackwardFilterAlgorithmEx(
                               h, d->x, x, d->y, y, d->conv, d->w, w, MAX_ALGOS, &found, perf, ws,
                               FIND_WORKSPACE),
                           op, "timing the algorithms");
            chosen = rc == 0 && first_fitting(perf, found, FIND_WORKSPACE, algo, workspace);
        }
        weft_tensor_release(search);
        /* a failed search leaves the choice to the heuristics */
        rc = 0;
        found = 0;
    }
    if (chosen) {
        /* timed above */
    } else if (kind == FORWARD) {
        cudnnConvolutionFwdAlgoPerf_t perf[MAX_ALGOS];
        rc = dnn_error(DNN->cudnnGetConvolutionForwardAlgorithm_v7(h, d->x, d->w, d->conv, d->y,
                                                              MAX_ALGOS, &found, perf),
                       op, "choosing the algorithm");
        chosen = rc == 0 && first_fitting(perf, found, WORKSPACE_LIMIT, algo, workspace);
    } else if (kind == BACKWARD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[MAX_ALGOS];
        rc = dnn_error(DNN->cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d->w, d->y, d->conv, d->x,
                                                                   MAX_ALGOS, &found, perf),
                       op, "choosing the algorithm");
        chosen = rc == 0 && first_fitting(perf, found, WORKSPACE_LIMIT, algo, workspace);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[MAX_ALGOS];
        rc = dnn_error(DNN->cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d->x, d->y, d->conv, d->w,
                                                                     MAX_ALGOS, &found, perf),
                       op, "choosing the algorithm");
        chosen = rc == 0 && first_fitting(perf, found, WORKSPACE_LIMIT, algo, workspace);
    }
    if (rc == 0 && !chosen)
        rc = weft_set_error(WEFT_ENOTSUP, "%s: cuDNN offers no algorithm for this convolution "
                                          "within %zu MiB of workspace", op, WORKSPACE_LIMIT >> 20);
    if (rc == 0)
        cache_add(kind, device, dtype, g, *algo, *workspace);
    return rc;
}

/* Runs one kind of convolution: y = conv(x, w) (FORWARD), x = its input
 * gradient from y and w (BACKWARD_DATA), w = its weight gradient from x and
 * y (BACKWARD_FILTER); all contiguous; the result's buffer is written
 * whole (beta 0). */
static int run(int kind, const char *op, weft_dtype dtype, const wfc_conv2d *g, int index,
               void *x, void *w, void *y)
{
    void *stream = wfc_current_stream(index);
    cudnnHandle_t h = NULL;
    descriptors d;
    int rc = cudaSetDevice(index) == cudaSuccess
                 ? 0
                 : weft_set_error(WEFT_EDEVICE, "%s: cannot select " WFC_BACKEND ":%d", op, index);
    if (rc == 0)
        rc = handle_for(&h, op, index, stream);
    if (rc == 0)
        rc = make_descriptors(&d, op, dtype, g);
    if (rc < 0)
        return rc;
    int algo = 0;
    size_t bytes = 0;
    weft_tensor *workspace = NULL;
    rc = choose(kind, op, h, &d, index, dtype, g, x, w, y, &algo, &bytes);
    weft_device dev = {.type = WFC_DEVICE_TYPE, .index = (int16_t)index};
    if (rc == 0 && bytes > 0)
        rc = weft_empty(&workspace, (const int64_t[]){(int64_t)bytes}, 1, WEFT_UINT8, dev);
    void *ws = workspace ? weft_tensor_data_ptr(workspace) : NULL;
    double one_d = 1, zero_d = 0;
    float one_f = 1, zero_f = 0;
    const void *one = dtype == WEFT_FLOAT64 ? (const void *)&one_d : (const void *)&one_f;
    const void *zero = dtype == WEFT_FLOAT64 ? (const void *)&zero_d : (const void *)&zero_f;
    if (rc == 0 && kind == FORWARD)
        rc = dnn_error(DNN->cudnnConvolutionForward(h, one, d.x, x, d.w, w, d.conv,
                                               (cudnnConvolutionFwdAlgo_t)algo, ws, bytes, zero,
                                               d.y, y),
                       op, "forward");
    else if (rc == 0 && kind == BACKWARD_DATA)
        rc = dnn_error(DNN->cudnnConvolutionBackwardData(h, one, d.w, w, d.y, y, d.conv,
                                                    (cudnnConvolutionBwdDataAlgo_t)algo, ws, bytes,
                                                    zero, d.x, x),
                       op, "backward data");
    else if (rc == 0)
        rc = dnn_error(DNN->cudnnConvolutionBackwardFilter(h, one, d.x, x, d.y, y, d.conv,
                                                      (cudnnConvolutionBwdFilterAlgo_t)algo, ws,
                                                      bytes, zero, d.w, w),
                       op, "backward filter");
    /* back to the stream's pool: only later work on that stream reuses it */
    weft_tensor_release(workspace);
    destroy_descriptors(&d);
    return rc;
}

/* ------------------------------------------------------------ kernels */

static bool served(const weft_tensor *a, const weft_tensor *b)
{
    weft_dtype dt = weft_tensor_dtype(a);
    weft_device da = weft_tensor_device(a), db = weft_tensor_device(b);
    return (dt == WEFT_FLOAT32 || dt == WEFT_FLOAT64 || dt == WEFT_FLOAT16 ||
            dt == WEFT_BFLOAT16) &&
           weft_tensor_dtype(b) == dt && da.type == WFC_DEVICE_TYPE && da.type == db.type &&
           da.index == db.index;
}

/* cuDNN takes int dims: a problem beyond them goes to the fallback. */
static bool fits_int(const wfc_conv2d *g)
{
    const int64_t v[] = {g->n, g->c, g->h, g->w, g->oc, g->oh, g->ow, g->n * g->c * g->h * g->w,
                         g->n * g->oc * g->oh * g->ow};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++)
        if (v[i] > 0x7fffffff)
            return false;
    return true;
}

/* Arguments stride, padding, dilation, groups at args[first..first+3]. */
static int plan_from(wfc_conv2d *g, const char *op, const weft_call *call, int first,
                     const int64_t *input, const int64_t *weight)
{
    int ns, np, nd;
    const int64_t *s = weft_arg_ints(call, first, &ns), *p = weft_arg_ints(call, first + 1, &np);
    const int64_t *d = weft_arg_ints(call, first + 2, &nd);
    char err[256];
    if (wfc_plan_conv2d(g, input, 4, weight, 4, s, ns, p, np, d, nd, weft_arg_int(call, first + 3),
                        err, sizeof err) < 0)
        return weft_set_error(WEFT_ESHAPE, "%s: %s", op, err);
    return 0;
}

/* conv2d(input, weight, bias?, stride, padding, dilation, groups) */
static int conv2d_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "conv2d";
    const weft_tensor *input = call->args[0].u.tensor, *weight = call->args[1].u.tensor;
    const weft_tensor *bias = weft_arg_tensor(call, 2);
    if (weft_tensor_ndim(input) != 4 || weft_tensor_ndim(weight) != 4 || !served(input, weight) ||
        (bias && !served(input, bias)))
        return weft_call_cpu_fallback(call); /* unbatched input, other dtypes: the CPU's rules */
    wfc_conv2d g;
    int rc = plan_from(&g, op, call, 3, weft_tensor_sizes(input), weft_tensor_sizes(weight));
    if (rc < 0)
        return rc;
    if (bias && (weft_tensor_ndim(bias) != 1 || weft_tensor_size(bias, 0) != g.oc))
        return weft_set_error(WEFT_ESHAPE, "%s: bias must be a 1-D tensor of %lld elements", op,
                              (long long)g.oc);
    if (!fits_int(&g))
        return weft_call_cpu_fallback(call);
    weft_tensor *x = NULL, *w = NULL, *y = NULL, *b4 = NULL;
    rc = weft_contiguous(&x, input);
    if (rc == 0)
        rc = weft_contiguous(&w, weight);
    if (rc == 0)
        rc = weft_new_output(&y, input, (const int64_t[]){g.n, g.oc, g.oh, g.ow}, 4,
                             weft_tensor_dtype(input));
    if (rc == 0 && weft_tensor_numel(y) > 0)
        rc = g.n * g.c * g.h * g.w == 0
                 ? weft_fill_(y, 0.0)
                 : run(FORWARD, op, weft_tensor_dtype(input), &g, weft_tensor_device(input).index,
                       weft_tensor_data_ptr(x), weft_tensor_data_ptr(w), weft_tensor_data_ptr(y));
    if (rc == 0 && bias)
        rc = weft_reshape(&b4, bias, (const int64_t[]){1, g.oc, 1, 1}, 4);
    if (rc == 0 && bias)
        rc = weft_add_(y, b4);
    weft_tensor_release(x);
    weft_tensor_release(w);
    weft_tensor_release(b4);
    if (rc < 0) {
        weft_tensor_release(y);
        return rc;
    }
    return weft_return_tensor(call, 0, y);
}

static bool shape_is(const weft_tensor *t, const int64_t *sizes)
{
    if (weft_tensor_ndim(t) != 4)
        return false;
    for (int d = 0; d < 4; d++)
        if (weft_tensor_size(t, d) != sizes[d])
            return false;
    return true;
}

/* convolution_backward_input(grad_output, weight, input_size, stride,
 * padding, dilation, groups) and convolution_backward_weight(grad_output,
 * input, weight_size, ...): the third argument is the other's size. */
static int conv_backward_kernel(weft_call *call, void *ctx)
{
    bool want_weight = ctx != NULL;
    const char *op = want_weight ? "convolution_backward_weight" : "convolution_backward_input";
    const weft_tensor *grad = call->args[0].u.tensor, *other = call->args[1].u.tensor;
    int nsize = 0;
    const int64_t *size = weft_arg_ints(call, 2, &nsize);
    if (nsize != 4)
        return weft_set_error(WEFT_ESHAPE, "%s: expected 4 sizes, got %d", op, nsize);
    if (weft_tensor_ndim(other) != 4 || !served(grad, other))
        return weft_call_cpu_fallback(call);
    const int64_t *input = want_weight ? weft_tensor_sizes(other) : size;
    const int64_t *weight = want_weight ? size : weft_tensor_sizes(other);
    wfc_conv2d g;
    int rc = plan_from(&g, op, call, 3, input, weight);
    if (rc < 0)
        return rc;
    if (!shape_is(grad, (const int64_t[]){g.n, g.oc, g.oh, g.ow}))
        return weft_set_error(WEFT_ESHAPE, "%s: grad_output must be [%lld, %lld, %lld, %lld]", op,
                              (long long)g.n, (long long)g.oc, (long long)g.oh, (long long)g.ow);
    if (!fits_int(&g))
        return weft_call_cpu_fallback(call);
    weft_tensor *dy = NULL, *o = NULL, *res = NULL;
    rc = weft_contiguous(&dy, grad);
    if (rc == 0)
        rc = weft_contiguous(&o, other);
    if (rc == 0)
        rc = weft_new_output(&res, grad, size, 4, weft_tensor_dtype(grad));
    bool empty = weft_tensor_numel(dy) == 0 || weft_tensor_numel(o) == 0;
    if (rc == 0 && weft_tensor_numel(res) > 0)
        rc = empty ? weft_fill_(res, 0.0)
                   : want_weight
                         ? run(BACKWARD_FILTER, op, weft_tensor_dtype(grad), &g,
                               weft_tensor_device(grad).index, weft_tensor_data_ptr(o),
                               weft_tensor_data_ptr(res), weft_tensor_data_ptr(dy))
                         : run(BACKWARD_DATA, op, weft_tensor_dtype(grad), &g,
                               weft_tensor_device(grad).index, weft_tensor_data_ptr(res),
                               weft_tensor_data_ptr(o), weft_tensor_data_ptr(dy));
    weft_tensor_release(dy);
    weft_tensor_release(o);
    if (rc < 0) {
        weft_tensor_release(res);
        return rc;
    }
    return weft_return_tensor(call, 0, res);
}

/* conv_transpose2d(input, weight [Cin, Cout / groups, kH, kW], bias?,
 * stride, padding, output_padding, groups, dilation): cuDNN's backward
 * data of the conv2d whose input gradient it is (plan.c), over the whole
 * output, from the input zero-padded by output_padding / stride rows and
 * columns as on the CPU; then the bias.  Its backward is conv2d and
 * convolution_backward_weight (autograd), both cuDNN here. */
static int conv_transpose2d_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const char *op = "conv_transpose2d";
    const weft_tensor *input = call->args[0].u.tensor, *weight = call->args[1].u.tensor;
    const weft_tensor *bias = weft_arg_tensor(call, 2);
    if (weft_tensor_ndim(input) != 4 || weft_tensor_ndim(weight) != 4 || !served(input, weight) ||
        (bias && !served(input, bias)))
        return weft_call_cpu_fallback(call); /* other dtypes and shapes: the CPU's rules */
    int ns, np, nop, nd;
    const int64_t *s = weft_arg_ints(call, 3, &ns), *p = weft_arg_ints(call, 4, &np);
    const int64_t *o = weft_arg_ints(call, 5, &nop), *d = weft_arg_ints(call, 7, &nd);
    wfc_conv_transpose2d t;
    char err[512];
    int kind = wfc_plan_conv_transpose2d(&t, weft_tensor_sizes(input), 4, weft_tensor_sizes(weight),
                                         4, s, ns, p, np, o, nop, d, nd, weft_arg_int(call, 6), err,
                                         sizeof err);
    if (kind < 0)
        return weft_set_error(kind == -1 ? WEFT_EINVAL : WEFT_ESHAPE, "%s: %s", op, err);
    if (bias && (weft_tensor_ndim(bias) != 1 || weft_tensor_size(bias, 0) != t.out[1]))
        return weft_set_error(WEFT_ESHAPE, "%s: bias must be a 1-D tensor of %lld elements", op,
                              (long long)t.out[1]);
    if (!fits_int(&t.conv))
        return weft_call_cpu_fallback(call);
    weft_dtype dt = weft_tensor_dtype(input);
    bool padded = t.extra_h > 0 || t.extra_w > 0;
    weft_tensor *x = NULL, *w = NULL, *y = NULL, *xp = NULL, *rows = NULL, *part = NULL, *b4 = NULL;
    int rc = weft_contiguous(&x, input);
    if (rc == 0)
        rc = weft_contiguous(&w, weight);
    if (rc == 0)
        rc = weft_new_output(&y, input, t.out, 4, dt);
    if (rc == 0 && padded) { /* x into the top left of a zeroed xp */
        const int64_t *in = weft_tensor_sizes(x);
        const int64_t sizes[4] = {in[0], in[1], in[2] + t.extra_h, in[3] + t.extra_w};
        rc = weft_new_output(&xp, input, sizes, 4, dt);
        if (rc == 0)
            rc = weft_fill_(xp, 0.0);
        if (rc == 0)
            rc = weft_narrow(&rows, xp, 2, 0, in[2]);
        if (rc == 0)
            rc = weft_narrow(&part, rows, 3, 0, in[3]);
        if (rc == 0)
            rc = weft_copy_(part, x);
    } else if (rc == 0) {
        xp = weft_tensor_retain(x);
    }
    if (rc == 0 && weft_tensor_numel(y) > 0)
        rc = weft_tensor_numel(xp) == 0 || weft_tensor_numel(w) == 0
                 ? weft_fill_(y, 0.0)
                 : run(BACKWARD_DATA, op, dt, &t.conv, weft_tensor_device(input).index,
                       weft_tensor_data_ptr(y), weft_tensor_data_ptr(w), weft_tensor_data_ptr(xp));
    if (rc == 0 && bias)
        rc = weft_reshape(&b4, bias, (const int64_t[]){1, t.out[1], 1, 1}, 4);
    if (rc == 0 && bias)
        rc = weft_add_(y, b4);
    weft_tensor *temps[] = {x, w, xp, rows, part, b4};
    for (size_t i = 0; i < sizeof temps / sizeof *temps; i++)
        weft_tensor_release(temps[i]);
    if (rc < 0) {
        weft_tensor_release(y);
        return rc;
    }
    return weft_return_tensor(call, 0, y);
}

static const int weight_marker = 1;

int wfc_register_conv(weft_registrar *reg)
{
    const char *tf32 = getenv("WEFT_CUDA_ALLOW_TF32");
    allow_tf32 = tf32 && (strcmp(tf32, "1") == 0 || strcmp(tf32, "true") == 0);
    const char *find = getenv("WEFT_CUDNN_FIND");
    find_mode = !find || !*find || strcmp(find, "auto") == 0 ? FIND_AUTO
                : strcmp(find, "never") == 0                 ? FIND_NEVER
                : strcmp(find, "always") == 0                ? FIND_ALWAYS
                                                             : -1;
    if (find_mode < 0)
        return weft_set_error(WEFT_EINVAL, WFC_BACKEND ": WEFT_CUDNN_FIND='%s': expected never, "
                                           "auto or always", find);
    if (!key_made) {
        if (pthread_key_create(&handles_key, thread_exit) != 0)
            return weft_set_error(WEFT_ENOMEM, WFC_BACKEND ": cannot create the cuDNN handle key");
        key_made = true;
    }
    int rc = weft_register_kernel(reg, "conv2d", WEFT_KEY_DENSE, WFC_DEVICE_TYPE,
                                  conv2d_kernel, NULL, NULL);
    if (rc == 0)
        rc = weft_register_kernel(reg, "convolution_backward_input", WEFT_KEY_DENSE,
                                  WFC_DEVICE_TYPE, conv_backward_kernel, NULL, NULL);
    if (rc == 0)
        rc = weft_register_kernel(reg, "convolution_backward_weight", WEFT_KEY_DENSE,
                                  WFC_DEVICE_TYPE, conv_backward_kernel,
                                  (void *)&weight_marker, NULL);
    if (rc == 0)
        rc = weft_register_kernel(reg, "conv_transpose2d", WEFT_KEY_DENSE, WFC_DEVICE_TYPE,
                                  conv_transpose2d_kernel, NULL, NULL);
    return rc;
}

void wfc_conv_shutdown(void)
{
    if (!key_made)
        return;
    pthread_key_delete(handles_key);
    key_made = false;
    pthread_mutex_lock(&lock);
    thread_handles *th = all_handles;
    all_handles = NULL;
    cached_algo *a = algos;
    algos = NULL;
    pthread_mutex_unlock(&lock);
    while (th) {
        thread_handles *next = th->next;
        destroy_handles(th);
        th = next;
    }
    while (a) {
        cached_algo *next = a->next;
        free(a);
        a = next;
    }
}
