/* backends/cuda/blas.c — mm, mm_out, bmm, bmm_out and addmm through cuBLAS
 * (linear and matmul reach them through their composites), or through the
 * plugin's own tiled GEMM (gemm.cu) in a build without a BLAS library (the
 * HIP build, gpu.h) or when WEFT_CUDA_GEMM=tiled asks for it.  Row-major
 * products are computed as the column-major C^T = B^T A^T, so a row-major
 * operand and a transposed view both go in without a copy (plan.c picks
 * the transpose flag and leading dim); anything else is made contiguous
 * first.  float32 runs in full precision unless WEFT_CUDA_ALLOW_TF32=1;
 * float16 and bfloat16 accumulate in float32.  One cuBLAS handle per
 * thread and device, its workspace taken from the caching allocator for
 * each call on the call's stream. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#if WFC_HAVE_BLAS_LIBRARY
#include <cublas_v2.h>
#endif

#include "cuda.h"
#include "libs.h"

#define MAX_DEVICES 64
/* Hopper's cuBLAS kernels use up to 32 MiB of workspace. */
#define WORKSPACE_BYTES ((int64_t)32 << 20)

static bool allow_tf32;
/* the tiled GEMM instead of cuBLAS (always without a BLAS library) */
static bool use_tiled = !WFC_HAVE_BLAS_LIBRARY;

#if WFC_HAVE_BLAS_LIBRARY
/* ---------------------------------------------------------- the handles */

typedef struct thread_handles {
    cublasHandle_t handle[MAX_DEVICES];
    struct thread_handles *next;
} thread_handles;

static pthread_key_t handles_key;
static bool key_made;
static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;
static thread_handles *all_handles; /* every thread's, for the plugin's fini */

static void destroy_handles(thread_handles *th)
{
    for (int i = 0; i < MAX_DEVICES; i++)
        if (th->handle[i]) {
            cudaSetDevice(i);
            wfc_cublas()->cublasDestroy(th->handle[i]); /* loaded: a handle exists */
        }
    free(th);
}

static void unlink_handles(thread_handles *th)
{
    pthread_mutex_lock(&handles_lock);
    for (thread_handles **p = &all_handles; *p; p = &(*p)->next)
        if (*p == th) {
            *p = th->next;
            break;
        }
    pthread_mutex_unlock(&handles_lock);
}

static void thread_exit(void *p)
{
    unlink_handles(p);
    destroy_handles(p);
}

static const char *blas_status_name(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "execution failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported";
    default: return "internal error";
    }
}

static int blas_error(cublasStatus_t s, const char *op, const char *what)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return 0;
    return weft_set_error(s == CUBLAS_STATUS_ALLOC_FAILED ? WEFT_ENOMEM : WEFT_EDEVICE,
                          "%s: cuBLAS %s: %s", op, what, blas_status_name(s));
}

/* The calling thread's handle for device index, bound to stream. */
static int handle_for(cublasHandle_t *out, const char *op, int index, void *stream)
{
    if (index < 0 || index >= MAX_DEVICES)
        return weft_set_error(WEFT_EDEVICE, "%s: " WFC_BACKEND ":%d is beyond the %d devices cuBLAS "
                                            "handles are kept for", op, index, MAX_DEVICES);
    thread_handles *th = pthread_getspecific(handles_key);
    if (!th) {
        if (!(th = calloc(1, sizeof *th)))
            return weft_set_error(WEFT_ENOMEM, "%s: no memory for the cuBLAS handles", op);
        if (pthread_setspecific(handles_key, th) != 0) {
            free(th);
            return weft_set_error(WEFT_ENOMEM, "%s: cannot keep the cuBLAS handles", op);
        }
        pthread_mutex_lock(&handles_lock);
        th->next = all_handles;
        all_handles = th;
        pthread_mutex_unlock(&handles_lock);
    }
    const wfc_cublas_api *api = wfc_cublas();
    if (!api) {
        char why[256]; /* the loader's message, before it is replaced */
        snprintf(why, sizeof why, "%s", weft_last_error());
        return weft_set_error(WEFT_ENOTSUP, "%s: %s", op, why);
    }
    if (!th->handle[index]) {
        int rc = blas_error(api->cublasCreate(&th->handle[index]), op, "handle creation");
        if (rc < 0) {
            th->handle[index] = NULL;
            return rc;
        }
    }
    *out = th->handle[index];
    return blas_error(api->cublasSetStream(*out, (cudaStream_t)stream), op, "set stream");
}

void wfc_blas_shutdown(void)
{
    if (!key_made)
        return;
    /* No kernel runs while the plugin unloads: every thread's handles can
     * go, and the key with them so no destructor runs into unloaded code. */
    pthread_key_delete(handles_key);
    key_made = false;
    pthread_mutex_lock(&handles_lock);
    thread_handles *th = all_handles;
    all_handles = NULL;
    pthread_mutex_unlock(&handles_lock);
    while (th) {
        thread_handles *next = th->next;
        destroy_handles(th);
        th = next;
    }
}
#endif

/* ------------------------------------------------------------ the call */

/* One strided batch of row-major products c[i] = alpha a[i] b[i] + beta c[i]
 * with a [n,k], b [k,m], c contiguous [n,m]; a and b laid out as plan.c
 * accepts (the caller checked).  batch strides in elements. */
typedef struct gemm_args {
    const char *op;
    int index;
    weft_dtype dtype;
    int64_t batch, n, k, m;
    const void *a, *b;
    void *c;
    wfc_gemm_operand pa, pb;
    int64_t stride_a, stride_b;
    wfc_gemm_strides strides; /* the tiled GEMM's view of a and b */
    double alpha, beta;
} gemm_args;

static bool gemm_dtype(weft_dtype d);

static int run_gemm(const gemm_args *g)
{
    if (use_tiled || !gemm_dtype(g->dtype)) /* the integers: cuBLAS has no product of them */
        return wfc_gemm_tiled(wfc_current_stream(g->index), g->dtype, g->c, g->a, g->b, g->batch,
                              g->n, g->k, g->m, &g->strides, g->alpha, g->beta);
#if !WFC_HAVE_BLAS_LIBRARY
    return weft_set_error(WEFT_ENOTSUP, "%s: this build has no BLAS library", g->op);
#else
    cudaDataType_t type;
    cublasComputeType_t compute;
    switch (g->dtype) {
    case WEFT_FLOAT32:
        type = CUDA_R_32F;
        compute = allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
        break;
    case WEFT_FLOAT64: type = CUDA_R_64F, compute = CUBLAS_COMPUTE_64F; break;
    case WEFT_FLOAT16: type = CUDA_R_16F, compute = CUBLAS_COMPUTE_32F; break;
    default: type = CUDA_R_16BF, compute = CUBLAS_COMPUTE_32F; break;
    }
    void *stream = wfc_current_stream(g->index);
    cublasHandle_t h = NULL;
    int rc = handle_for(&h, g->op, g->index, stream);
    weft_tensor *workspace = NULL;
    weft_device dev = {.type = WFC_DEVICE_TYPE, .index = (int16_t)g->index};
    if (rc == 0)
        rc = weft_empty(&workspace, (const int64_t[]){WORKSPACE_BYTES}, 1, WEFT_UINT8, dev);
    if (rc == 0)
        rc = blas_error(wfc_cublas()->cublasSetWorkspace(h, weft_tensor_data_ptr(workspace),
                                           (size_t)WORKSPACE_BYTES), g->op, "set workspace");
    float af = (float)g->alpha, bf = (float)g->beta;
    const void *alpha = compute == CUBLAS_COMPUTE_64F ? (const void *)&g->alpha : (const void *)&af;
    const void *beta = compute == CUBLAS_COMPUTE_64F ? (const void *)&g->beta : (const void *)&bf;
    /* C^T [m x n, ld m] = op(B) [m x k] * op(A) [k x n] */
    if (rc == 0)
        rc = blas_error(wfc_cublas()->cublasGemmStridedBatchedEx(
                            h, g->pb.trans ? CUBLAS_OP_T : CUBLAS_OP_N,
                            g->pa.trans ? CUBLAS_OP_T : CUBLAS_OP_N, (int)g->m, (int)g->n,
                            (int)g->k, alpha, g->b, type, (int)g->pb.ld, g->stride_b, g->a, type,
                            (int)g->pa.ld, g->stride_a, beta, g->c, type, (int)(g->m > 1 ? g->m : 1),
                            g->n * g->m, (int)g->batch, compute, CUBLAS_GEMM_DEFAULT),
                        g->op, "GEMM");
    /* the block goes back to its stream's pool: only later work on that
     * stream can reuse it, after this GEMM */
    weft_tensor_release(workspace);
    return rc;
#endif
}

/* the dtypes cuBLAS multiplies */
static bool gemm_dtype(weft_dtype d)
{
    return d == WEFT_FLOAT32 || d == WEFT_FLOAT64 || d == WEFT_FLOAT16 || d == WEFT_BFLOAT16;
}

/* the integer dtypes the tiled GEMM multiplies (bool has no product, as
 * on the CPU and in PyTorch) */
static bool integer_gemm_dtype(weft_dtype d)
{
    return d == WEFT_UINT8 || d == WEFT_INT8 || d == WEFT_INT16 || d == WEFT_INT32 ||
           d == WEFT_INT64;
}

/* The operand as cuBLAS can read it: itself, or a contiguous copy.
 * rows/cols are the last two dims. */
static int operand(weft_tensor **use, wfc_gemm_operand *p, const weft_tensor *t)
{
    int nd = weft_tensor_ndim(t);
    int64_t rows = weft_tensor_size(t, nd - 2), cols = weft_tensor_size(t, nd - 1);
    if (wfc_plan_gemm_operand(p, rows, cols, weft_tensor_stride(t, nd - 2),
                              weft_tensor_stride(t, nd - 1)) == 0 && p->ld <= INT_MAX) {
        *use = weft_tensor_retain((weft_tensor *)t);
        return 0;
    }
    int rc = weft_contiguous(use, t);
    if (rc == 0)
        wfc_plan_gemm_operand(p, rows, cols, cols, 1);
    return rc;
}

/* dest (contiguous [batch?, n, m], fresh or holding beta's addend) =
 * alpha a b + beta dest. */
static int product_into(const char *op, weft_tensor *dest, const weft_tensor *a,
                        const weft_tensor *b, bool batched, double alpha, double beta)
{
    int nd = weft_tensor_ndim(a);
    gemm_args g = {.op = op, .index = weft_tensor_device(a).index, .dtype = weft_tensor_dtype(a),
                   .batch = batched ? weft_tensor_size(a, 0) : 1,
                   .n = weft_tensor_size(a, nd - 2), .k = weft_tensor_size(a, nd - 1),
                   .m = weft_tensor_size(b, nd - 1), .alpha = alpha, .beta = beta};
    if (g.n == 0 || g.m == 0 || g.batch == 0)
        return 0;
    if (g.k == 0) /* empty sums */
        return beta == 0 ? weft_fill_(dest, 0.0) : beta == 1 ? 0 : weft_mul_scalar_(dest, beta);
    if (!use_tiled && gemm_dtype(g.dtype) && (g.n > INT_MAX || g.k > INT_MAX || g.m > INT_MAX || g.batch > INT_MAX))
        return weft_set_error(WEFT_ENOTSUP, "%s: a dimension beyond %d is more than one cuBLAS "
                                            "call takes", op, INT_MAX);
    weft_tensor *ua = NULL, *ub = NULL;
    int rc = operand(&ua, &g.pa, a);
    if (rc == 0)
        rc = operand(&ub, &g.pb, b);
    if (rc == 0) {
        g.a = weft_tensor_data_ptr(ua), g.b = weft_tensor_data_ptr(ub);
        g.c = weft_tensor_data_ptr(dest);
        g.stride_a = batched ? weft_tensor_stride(ua, 0) : 0;
        g.stride_b = batched ? weft_tensor_stride(ub, 0) : 0;
        g.strides = (wfc_gemm_strides){
            .row_a = weft_tensor_stride(ua, nd - 2), .col_a = weft_tensor_stride(ua, nd - 1),
            .batch_a = g.stride_a, .row_b = weft_tensor_stride(ub, nd - 2),
            .col_b = weft_tensor_stride(ub, nd - 1), .batch_b = g.stride_b};
        if (cudaSetDevice(g.index) != cudaSuccess)
            rc = weft_set_error(WEFT_EDEVICE, "%s: cannot select " WFC_BACKEND ":%d", op, g.index);
    }
    if (rc == 0)
        rc = run_gemm(&g);
    weft_tensor_release(ua);
    weft_tensor_release(ub);
    return rc;
}

static int shape_error(const char *op, const weft_tensor *a, const weft_tensor *b)
{
    char sa[96], sb[96];
    size_t la = 0, lb = 0;
    sa[0] = sb[0] = 0;
    for (int d = 0; d < weft_tensor_ndim(a) && la < sizeof sa - 24; d++)
        la += (size_t)snprintf(sa + la, sizeof sa - la, "%s%lld", d ? "x" : "",
                               (long long)weft_tensor_size(a, d));
    for (int d = 0; d < weft_tensor_ndim(b) && lb < sizeof sb - 24; d++)
        lb += (size_t)snprintf(sb + lb, sizeof sb - lb, "%s%lld", d ? "x" : "",
                               (long long)weft_tensor_size(b, d));
    return weft_set_error(WEFT_ESHAPE, "%s: the shapes cannot be multiplied (%s and %s)", op, sa,
                          sb);
}

/* Checks shared by the products; 1 means "the fallback's case". */
static int check_operands(const char *op, const weft_tensor *a, const weft_tensor *b, int nd)
{
    weft_device da = weft_tensor_device(a), db = weft_tensor_device(b);
    if (da.type != WFC_DEVICE_TYPE || db.type != WFC_DEVICE_TYPE || da.index != db.index)
        return 1;
    if (weft_tensor_ndim(a) != nd || weft_tensor_ndim(b) != nd)
        return weft_set_error(WEFT_ESHAPE, "%s: expected %d-D operands, got %d-D and %d-D", op, nd,
                              weft_tensor_ndim(a), weft_tensor_ndim(b));
    if (weft_tensor_size(a, nd - 1) != weft_tensor_size(b, nd - 2) ||
        (nd == 3 && weft_tensor_size(a, 0) != weft_tensor_size(b, 0)))
        return shape_error(op, a, b);
    if (weft_tensor_dtype(a) != weft_tensor_dtype(b))
        return weft_set_error(WEFT_EDTYPE, "%s: expected both operands of one dtype, got %s and %s",
                              op, weft_dtype_name(weft_tensor_dtype(a)),
                              weft_dtype_name(weft_tensor_dtype(b)));
    weft_dtype d = weft_tensor_dtype(a);
    return gemm_dtype(d) || integer_gemm_dtype(d) ? 0 : 1;
}

typedef struct {
    bool batched, out;
} product_form;

/* mm, mm_out, bmm, bmm_out: (out,) self, mat2 */
static int product_kernel(weft_call *call, void *ctx)
{
    const product_form *form = ctx;
    const char *op = weft_op_name(call->op);
    int first = form->out ? 1 : 0, nd = form->batched ? 3 : 2;
    weft_tensor *out = form->out ? call->args[0].u.tensor : NULL;
    const weft_tensor *a = call->args[first].u.tensor, *b = call->args[first + 1].u.tensor;
    int rc = check_operands(op, a, b, nd);
    if (rc == 0 && out) {
        weft_device d = weft_tensor_device(out);
        if (d.type != WFC_DEVICE_TYPE || d.index != weft_tensor_device(a).index ||
            weft_tensor_dtype(out) != weft_tensor_dtype(a))
            rc = 1;
    }
    if (rc == 1)
        return weft_call_cpu_fallback(call);
    if (rc < 0)
        return rc;
    int64_t sizes[3] = {weft_tensor_size(a, 0), weft_tensor_size(a, nd - 2),
                        weft_tensor_size(b, nd - 1)};
    const int64_t *shape = form->batched ? sizes : sizes + 1;
    if (out) {
        bool same = weft_tensor_ndim(out) == nd;
        for (int d = 0; same && d < nd; d++)
            same = weft_tensor_size(out, d) == shape[d];
        if (!same && weft_tensor_numel(out) == 0)
            rc = weft_tensor_resize(out, shape, nd);
        else if (!same)
            rc = weft_set_error(WEFT_ESHAPE, "%s: out has the wrong shape for the product", op);
        if (rc < 0)
            return rc;
    }
    weft_tensor *dest = NULL;
    if (out && weft_tensor_is_contiguous(out) && !weft_tensor_shares_storage(out, a) &&
        !weft_tensor_shares_storage(out, b))
        dest = weft_tensor_retain(out);
    else
        rc = weft_new_output(&dest, a, shape, nd, weft_tensor_dtype(a));
    if (rc == 0)
        rc = product_into(op, dest, a, b, form->batched, 1.0, 0.0);
    if (rc == 0 && out && dest != out)
        rc = weft_copy_(out, dest);
    if (rc == 0 && !out)
        return weft_return_tensor(call, 0, dest);
    weft_tensor_release(dest);
    return rc;
}

/* addmm(self, mat1, mat2, *, beta, alpha) = beta self + alpha mat1 mat2 */
static int addmm_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *self = call->args[0].u.tensor, *a = call->args[1].u.tensor,
                      *b = call->args[2].u.tensor;
    double beta = weft_arg_double(call, 3), alpha = weft_arg_double(call, 4);
    int rc = check_operands("addmm", a, b, 2);
    weft_device ds = weft_tensor_device(self);
    if (rc == 0 && (ds.type != WFC_DEVICE_TYPE || ds.index != weft_tensor_device(a).index ||
                    weft_tensor_dtype(self) != weft_tensor_dtype(a)))
        rc = 1;
    if (rc == 0 && integer_gemm_dtype(weft_tensor_dtype(a)) &&
        (beta != floor(beta) || alpha != floor(alpha)))
        rc = 1; /* integers with a fractional alpha or beta: the CPU's message */
    if (rc == 1)
        return weft_call_cpu_fallback(call);
    if (rc < 0)
        return rc;
    int64_t shape[2] = {weft_tensor_size(a, 0), weft_tensor_size(b, 1)};
    weft_tensor *expanded = NULL, *dest = NULL;
    if (weft_expand(&expanded, self, shape, 2) < 0)
        return weft_set_error(WEFT_ESHAPE, "addmm: self (%d-D) cannot be broadcast to [%lld, %lld]",
                              weft_tensor_ndim(self), (long long)shape[0], (long long)shape[1]);
    rc = weft_new_output(&dest, a, shape, 2, weft_tensor_dtype(a));
    if (rc == 0 && beta != 0)
        rc = weft_copy_(dest, expanded);
    if (rc == 0)
        rc = product_into("addmm", dest, a, b, false, alpha, beta);
    weft_tensor_release(expanded);
    if (rc == 0)
        return weft_return_tensor(call, 0, dest);
    weft_tensor_release(dest);
    return rc;
}

static const product_form mm_form = {false, false}, mm_out_form = {false, true},
                          bmm_form = {true, false}, bmm_out_form = {true, true};

int wfc_register_blas(weft_registrar *reg)
{
    /* WEFT_CUDA_ALLOW_TF32=1 trades float32 products' precision for the
     * tensor cores' speed, as torch.backends.cuda.matmul.allow_tf32 does;
     * read once, at load. */
    const char *tf32 = getenv("WEFT_CUDA_ALLOW_TF32");
    allow_tf32 = tf32 && (strcmp(tf32, "1") == 0 || strcmp(tf32, "true") == 0);
#if WFC_HAVE_BLAS_LIBRARY
    /* WEFT_CUDA_GEMM=tiled runs the products through gemm.cu, the kernel a
     * build without cuBLAS (HIP) depends on, so an NVIDIA GPU checks it */
    const char *gemm = getenv("WEFT_CUDA_GEMM");
    use_tiled = gemm && strcmp(gemm, "tiled") == 0;
    if (!key_made) {
        if (pthread_key_create(&handles_key, thread_exit) != 0)
            return weft_set_error(WEFT_ENOMEM, WFC_BACKEND ": cannot create the cuBLAS handle key");
        key_made = true;
    }
#endif
    static const weft_kernel_entry entries[] = {
        {"mm", product_kernel, &mm_form},     {"mm_out", product_kernel, &mm_out_form},
        {"bmm", product_kernel, &bmm_form},   {"bmm_out", product_kernel, &bmm_out_form},
        {"addmm", addmm_kernel, NULL},
    };
    return weft_register_kernel_table(reg, WEFT_KEY_DENSE, WFC_DEVICE_TYPE, entries, sizeof entries / sizeof *entries);
}
