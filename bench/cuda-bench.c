/* bench/cuda-bench.c — the CUDA benchmark of issue 6: elementwise add of
 * 256M float32 against the GPU's own device-to-device copy bandwidth
 * (goal: at least 90%), sgemm and bf16 GEMM throughput, conv2d forward,
 * MLP and CNN training steps (the models of tools/weft-train, batch 64),
 * and the caching allocator's steady state (device allocation calls
 * after warm-up: goal 0).  One JSON object per row on stdout, so
 * bench/cuda-torch.py can put PyTorch's numbers beside them.  Times are
 * CUDA events around N iterations after warm-up; the best of 5 repeats.
 * Without a GPU it says so and exits 0 (nothing to measure). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <weft/nn.h>
#include <weft/plugin.h>
#include <weft/weft.h>

static const weft_device GPU = {.type = WEFT_DEVICE_TYPE_CUDA, .index = 0};

static void die(const char *what)
{
    fprintf(stderr, "cuda-bench: %s: %s\n", what, weft_last_error());
    exit(1);
}

#define CHECK(call, what)                                                                       \
    do {                                                                                        \
        if ((call) < 0)                                                                         \
            die(what);                                                                          \
    } while (0)

typedef int (*step_fn)(void *ctx);

/* Milliseconds per call of fn: warm-up, then the best of 5 timed batches
 * of iters calls, timed by events on the default stream. */
static double time_ms(step_fn fn, void *ctx, int iters)
{
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (int i = 0; i < 3; i++)
        if (fn(ctx) < 0)
            die("warm-up");
    double best = INFINITY;
    for (int r = 0; r < 5; r++) {
        cudaEventRecord(a, 0);
        for (int i = 0; i < iters; i++)
            if (fn(ctx) < 0)
                die("timed step");
        cudaEventRecord(b, 0);
        cudaEventSynchronize(b);
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        if (ms / iters < best)
            best = ms / iters;
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return best;
}

static weft_tensor *randn(const int64_t *sizes, int nd, weft_dtype dtype)
{
    weft_tensor *t = NULL, *g = NULL;
    CHECK(weft_empty(&t, sizes, nd, WEFT_FLOAT32, WEFT_DEVICE_CPU), "empty");
    CHECK(weft_normal_(t, 0.0, 1.0), "normal_");
    CHECK(weft_to_device(&g, t, GPU), "to cuda");
    weft_tensor_release(t);
    if (dtype != WEFT_FLOAT32) {
        weft_tensor *c = NULL;
        CHECK(weft_to_dtype(&c, g, dtype), "to dtype");
        weft_tensor_release(g);
        g = c;
    }
    return g;
}

/* ------------------------------------------------------------ the rows */

typedef struct {
    weft_tensor *a, *b, *c;
    void *dst, *src;
    size_t bytes;
} pair_ctx;

static int add_step(void *p)
{
    pair_ctx *c = p;
    return weft_add_out(c->c, c->a, c->b);
}

static int memcpy_step(void *p)
{
    pair_ctx *c = p;
    return cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, 0) == cudaSuccess
               ? 0
               : weft_set_error(WEFT_EDEVICE, "cudaMemcpyAsync");
}

static void bandwidth_row(void)
{
    const int64_t n = (int64_t)256 << 20;
    pair_ctx c = {randn(&n, 1, WEFT_FLOAT32), randn(&n, 1, WEFT_FLOAT32), NULL, NULL, NULL, 0};
    CHECK(weft_empty(&c.c, &n, 1, WEFT_FLOAT32, GPU), "empty");
    c.dst = weft_tensor_data_ptr(c.c), c.src = weft_tensor_data_ptr(c.a);
    c.bytes = (size_t)n * 4;
    double add = time_ms(add_step, &c, 10), copy = time_ms(memcpy_step, &c, 10);
    double add_gbs = 3.0 * (double)c.bytes / add / 1e6, copy_gbs = 2.0 * (double)c.bytes / copy / 1e6;
    printf("{\"row\": \"add_256M_f32\", \"ms\": %.4f, \"GB_per_s\": %.1f, \"memcpy_d2d_GB_per_s\": "
           "%.1f, \"fraction_of_memcpy\": %.3f, \"goal\": 0.9}\n",
           add, add_gbs, copy_gbs, add_gbs / copy_gbs);
    weft_tensor_release(c.a);
    weft_tensor_release(c.b);
    weft_tensor_release(c.c);
}

static int mm_step(void *p)
{
    pair_ctx *c = p;
    return weft_mm_out(c->c, c->a, c->b);
}

/* The same product through cuBLAS called directly, on the same buffers and
 * the default stream (what weft's own call uses here): the reference the
 * GEMM goal names (issue 23: at least 0.95x).  Row-major C = A B is the
 * column-major C^T = B^T A^T; float32 without TF32 (CUBLAS_COMPUTE_32F),
 * bfloat16 with float32 accumulation, as weft's blas.c. */
typedef struct {
    cublasHandle_t h;
    int n;
    cudaDataType_t type;
    const void *a, *b;
    void *c;
} cublas_ctx;

static int cublas_step(void *p)
{
    cublas_ctx *c = p;
    const float one = 1, zero = 0;
    cublasStatus_t st = cublasGemmEx(c->h, CUBLAS_OP_N, CUBLAS_OP_N, c->n, c->n, c->n, &one, c->b,
                                     c->type, c->n, c->a, c->type, c->n, &zero, c->c, c->type,
                                     c->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return st == CUBLAS_STATUS_SUCCESS ? 0 : weft_set_error(WEFT_EDEVICE, "cublasGemmEx: %d", (int)st);
}

static void gemm_row(const char *name, weft_dtype dtype, int64_t n)
{
    const int64_t s[2] = {n, n};
    pair_ctx c = {randn(s, 2, dtype), randn(s, 2, dtype), NULL, NULL, NULL, 0};
    CHECK(weft_empty(&c.c, s, 2, dtype, GPU), "empty");
    double ms = time_ms(mm_step, &c, 10);
    cublas_ctx cb = {NULL, (int)n, dtype == WEFT_BFLOAT16 ? CUDA_R_16BF : CUDA_R_32F,
                     weft_tensor_data_ptr(c.a), weft_tensor_data_ptr(c.b),
                     weft_tensor_data_ptr(c.c)};
    double direct = NAN;
    if (cublasCreate(&cb.h) == CUBLAS_STATUS_SUCCESS) {
        direct = time_ms(cublas_step, &cb, 10);
        cublasDestroy(cb.h);
    }
    printf("{\"row\": \"%s\", \"n\": %lld, \"ms\": %.4f, \"TFLOP_per_s\": %.1f, "
           "\"cublas_direct_ms\": %.4f, \"speed_vs_cublas\": %.3f, \"goal\": 0.95}\n",
           name, (long long)n, ms, 2.0 * (double)n * n * n / ms / 1e9, direct, direct / ms);
    weft_tensor_release(c.a);
    weft_tensor_release(c.b);
    weft_tensor_release(c.c);
}

typedef struct {
    weft_tensor *x, *w, *b;
} conv_ctx;

static int conv_step(void *p)
{
    conv_ctx *c = p;
    static const int64_t one[2] = {1, 1};
    weft_tensor *y = NULL;
    int rc = weft_conv2d(&y, c->x, c->w, c->b, one, 2, one, 2, one, 2, 1);
    weft_tensor_release(y);
    return rc;
}

typedef struct {
    weft_tensor *y, *b4;
} bias_ctx;

static int bias_step(void *p)
{
    bias_ctx *c = p;
    return weft_add_(c->y, c->b4);
}

static void conv_row(void)
{
    conv_ctx c = {randn((const int64_t[]){64, 64, 56, 56}, 4, WEFT_FLOAT32),
                  randn((const int64_t[]){64, 64, 3, 3}, 4, WEFT_FLOAT32),
                  randn((const int64_t[]){64}, 1, WEFT_FLOAT32)};
    double ms = time_ms(conv_step, &c, 10);
    double flops = 2.0 * 64 * 64 * 56 * 56 * 64 * 9;
    printf("{\"row\": \"conv2d_64x64x56x56_k3\", \"ms\": %.4f, \"TFLOP_per_s\": %.1f}\n", ms,
           flops / ms / 1e9);
    /* the two parts of that row: the convolution alone, and the bias
     * broadcast over its output, in place */
    weft_tensor *bias = c.b;
    c.b = NULL;
    ms = time_ms(conv_step, &c, 10);
    printf("{\"row\": \"conv2d_64x64x56x56_k3_nobias\", \"ms\": %.4f, \"TFLOP_per_s\": %.1f}\n",
           ms, flops / ms / 1e9);
    bias_ctx bc = {c.x, NULL};
    CHECK(weft_reshape(&bc.b4, bias, (const int64_t[]){1, 64, 1, 1}, 4), "bias view");
    ms = time_ms(bias_step, &bc, 10);
    printf("{\"row\": \"add_bias_1x64x1x1_into_64x64x56x56\", \"ms\": %.4f, \"GB_per_s\": %.1f}\n",
           ms, 2.0 * 64 * 64 * 56 * 56 * 4 / ms / 1e6);
    weft_tensor_release(bc.b4);
    c.b = bias;
    weft_tensor_release(c.x);
    weft_tensor_release(c.w);
    weft_tensor_release(c.b);
}

/* ------------------------------------------------------- training steps */

typedef struct {
    weft_module *model;
    weft_optimizer *opt;
    weft_tensor *x, *y;
} train_ctx;

static int train_step(void *p)
{
    train_ctx *c = p;
    weft_tensor *logits = NULL, *loss = NULL;
    int rc = weft_module_forward(c->model, c->x, &logits);
    if (rc == 0)
        rc = weft_cross_entropy(&loss, logits, c->y, NULL, "mean", -100, 0.0);
    if (rc == 0)
        rc = weft_backward(&loss, 1, NULL, false, false);
    if (rc == 0)
        rc = weft_optimizer_step(c->opt);
    if (rc == 0)
        rc = weft_optimizer_zero_grad(c->opt);
    weft_tensor_release(logits);
    weft_tensor_release(loss);
    return rc;
}

static weft_module *model(bool cnn)
{
    static const int64_t k3[2] = {3, 3}, pad1[2] = {1, 1}, two[2] = {2, 2};
    weft_module *seq = NULL, *m = NULL;
    CHECK(weft_module_sequential(&seq), "sequential");
#define ADD(call) CHECK((call) < 0 ? -1 : weft_module_sequential_append(seq, m), #call)
    if (cnn) {
        ADD(weft_module_conv2d(&m, 1, 16, k3, NULL, pad1, NULL, 1, true, NULL));
        ADD(weft_module_activation(&m, WEFT_ACTIVATION_RELU));
        ADD(weft_module_max_pool2d(&m, two, NULL, NULL));
        ADD(weft_module_conv2d(&m, 16, 32, k3, NULL, pad1, NULL, 1, true, NULL));
        ADD(weft_module_activation(&m, WEFT_ACTIVATION_RELU));
        ADD(weft_module_max_pool2d(&m, two, NULL, NULL));
        ADD(weft_module_flatten(&m, 1, -1));
        ADD(weft_module_linear(&m, 32 * 7 * 7, 10, true, NULL));
    } else {
        ADD(weft_module_linear(&m, 784, 256, true, NULL));
        ADD(weft_module_activation(&m, WEFT_ACTIVATION_RELU));
        ADD(weft_module_linear(&m, 256, 10, true, NULL));
    }
#undef ADD
    CHECK(weft_module_to_device(seq, GPU), "model to cuda");
    return seq;
}

static void train_row(bool cnn)
{
    train_ctx c = {model(cnn), NULL, NULL, NULL};
    int n = weft_module_parameters(c.model, NULL, NULL, 0);
    weft_tensor **params = calloc((size_t)n, sizeof *params);
    if (!params || weft_module_parameters(c.model, params, NULL, n) != n)
        die("parameters");
    CHECK(weft_optimizer_sgd(&c.opt, params, n, 0.02, 0.9, 0, 0, false), "sgd");
    free(params);
    c.x = cnn ? randn((const int64_t[]){64, 1, 28, 28}, 4, WEFT_FLOAT32)
              : randn((const int64_t[]){64, 784}, 2, WEFT_FLOAT32);
    weft_tensor *labels = NULL;
    CHECK(weft_randint(&labels, 0, 10, (const int64_t[]){64}, 1, WEFT_INT64, GPU, NULL), "labels");
    c.y = labels;
    weft_allocator_stats before = {.struct_size = sizeof before}, after = {.struct_size = sizeof after};
    for (int i = 0; i < 5; i++) /* warm the allocator's cache */
        CHECK(train_step(&c), "warm-up step");
    weft_device_memory_stats(GPU, &before);
    double ms = time_ms(train_step, &c, 50);
    weft_device_memory_stats(GPU, &after);
    unsigned long long fallbacks = (unsigned long long)weft_cpu_fallback_calls();
    printf("{\"row\": \"%s_train_step_b64\", \"ms\": %.4f, \"device_alloc_calls_in_steady_state\": "
           "%llu, \"cpu_fallback_calls_so_far\": %llu, \"goal_alloc_calls\": 0}\n",
           cnn ? "cnn" : "mlp", ms,
           (unsigned long long)(after.system_alloc_calls - before.system_alloc_calls), fallbacks);
    weft_tensor_release(c.x);
    weft_tensor_release(c.y);
    weft_optimizer_destroy(c.opt);
    weft_module_destroy(c.model);
}

int main(int argc, char **argv)
{
    weft_load_default_plugins();
    if (weft_device_count(WEFT_DEVICE_TYPE_CUDA) <= 0) {
        printf("{\"skipped\": \"no CUDA device (the plugin reports none)\"}\n");
        return 0;
    }
    const char *only = argc > 1 ? argv[1] : NULL;
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
        printf("{\"device\": \"%s\", \"sm\": %d%d}\n", prop.name, prop.major, prop.minor);
    if (!only || strcmp(only, "add") == 0)
        bandwidth_row();
    if (!only || strcmp(only, "gemm") == 0) {
        gemm_row("sgemm_f32_tf32_off", WEFT_FLOAT32, 4096);
        gemm_row("gemm_bf16", WEFT_BFLOAT16, 8192);
    }
    if (!only || strcmp(only, "conv") == 0)
        conv_row();
    if (!only || strcmp(only, "train") == 0) {
        train_row(false);
        train_row(true);
    }
    return 0;
}
