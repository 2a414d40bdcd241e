/* tests/gpu_portable.cu — one kernel program written in CUDA's names and
 * compiled through backends/cuda/gpu.h by both toolchains (nvcc, and hipcc
 * with WEFT_GPU_HIP): tests/gpu_portable.sh builds and runs it with each.
 * It uses what the plugin's sources use of the portability header — the
 * runtime's errors, devices, streams, events, device and pinned memory,
 * copies, a <<<grid, block, shared, stream>>> launch with dynamic shared
 * memory, atomicMax on 64-bit words, half and bfloat16 conversions — so a
 * name the header maps wrongly fails to compile or gives a wrong value.
 *
 * Without a device it checks the conversions on the host (the same inline
 * functions the kernels call) and that the runtime answers "no device"
 * with an error rather than a crash; with one it runs the kernel and
 * compares.  Prints "ok"/"not ok" lines; exits 0 only when all passed. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backends/cuda/gpu.h"

static int failures;

static void check(bool cond, const char *what)
{
    printf("%s - %s\n", cond ? "ok" : "not ok", what);
    failures += !cond;
}

static double bf16_value(__nv_bfloat16 v) { return (double)__bfloat162float(v); }

/* Each block sums its slice of x (as float from half) through dynamic
 * shared memory, writes the sum as bfloat16, and notes the largest index
 * it saw in *largest. */
__global__ void block_sums(__nv_bfloat16 *out, const __half *x, int n,
                           unsigned long long *largest)
{
    extern __shared__ float part[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    part[threadIdx.x] = i < n ? __half2float(x[i]) : 0.0f;
    if (i < n)
        atomicMax(largest, (unsigned long long)i);
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s)
            part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        out[blockIdx.x] = __float2bfloat16(part[0]);
}

/* The conversions a kernel file reaches through index.cuh, on the host. */
static void host_conversions(void)
{
    /* 1 + 2^-8 + 2^-40 lies just above the tie between the bfloat16
     * neighbours 1 and 1 + 2^-7: one rounding gives 1 + 2^-7, while a
     * detour through float (1 + 2^-8, the tie itself) would give 1 */
    double above_tie = 1.0 + ldexp(1.0, -8) + ldexp(1.0, -40);
    check(bf16_value(__double2bfloat16(above_tie)) == 1.0 + ldexp(1.0, -7),
          "double to bfloat16 rounds once (just above a tie: up)");
    check(bf16_value(__double2bfloat16(1.0 + ldexp(1.0, -8))) == 1.0,
          "double to bfloat16: an exact tie rounds to even");
    check(bf16_value(__double2bfloat16(-3.0)) == -3.0, "double to bfloat16: exact values stay");
    check(isnan(bf16_value(__double2bfloat16(NAN))), "double to bfloat16: NaN stays NaN");
    check(bf16_value(__float2bfloat16(1.0f + 0x1p-9f)) == 1.0,
          "float to bfloat16 rounds to nearest");
    /* 2049 is a tie between the float16 neighbours 2048 and 2050 */
    check(__half2float(__double2half(2049.0)) == 2048.0f &&
              __half2float(__double2half(2051.0)) == 2052.0f,
          "double to float16 rounds to nearest even");
}

static bool succeeded(cudaError_t e, const char *what)
{
    if (e != cudaSuccess)
        printf("# %s: %s\n", what, cudaGetErrorString(e));
    return e == cudaSuccess;
}

static void on_device(void)
{
    enum { N = 1000, THREADS = 128, BLOCKS = (N + THREADS - 1) / THREADS };
    __half *host_x = NULL;
    check(succeeded(cudaHostAlloc((void **)&host_x, N * sizeof *host_x, cudaHostAllocDefault),
                    "cudaHostAlloc"),
          "pinned host memory");
    if (!host_x)
        return;
    for (int i = 0; i < N; i++)
        host_x[i] = __double2half((double)(i % 7) - 3.0);
    __half *x = NULL;
    __nv_bfloat16 *sums = NULL;
    unsigned long long *largest = NULL;
    cudaStream_t st = NULL;
    cudaEvent_t start = NULL, end = NULL;
    bool ready = succeeded(cudaSetDevice(0), "cudaSetDevice") &&
                 succeeded(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream") &&
                 succeeded(cudaEventCreate(&start), "event") &&
                 succeeded(cudaEventCreateWithFlags(&end, cudaEventDisableTiming), "event") &&
                 succeeded(cudaMalloc((void **)&x, N * sizeof *x), "cudaMalloc") &&
                 succeeded(cudaMalloc((void **)&sums, BLOCKS * sizeof *sums), "cudaMalloc") &&
                 succeeded(cudaMalloc((void **)&largest, sizeof *largest), "cudaMalloc");
    check(ready, "a stream, events and device memory");
    unsigned long long zero = 0, top = 0;
    __nv_bfloat16 got[BLOCKS];
    if (ready) {
        bool ran = succeeded(cudaEventRecord(start, st), "record") &&
                   succeeded(cudaMemcpyAsync(x, host_x, N * sizeof *x, cudaMemcpyHostToDevice, st),
                             "copy in") &&
                   succeeded(cudaMemcpyAsync(largest, &zero, sizeof zero, cudaMemcpyHostToDevice,
                                             st),
                             "copy in");
        if (ran) {
            block_sums<<<BLOCKS, THREADS, THREADS * sizeof(float), st>>>(sums, x, N, largest);
            ran = succeeded(cudaGetLastError(), "launch") &&
                  succeeded(cudaEventRecord(end, st), "record") &&
                  succeeded(cudaStreamWaitEvent(st, end, 0), "wait") &&
                  succeeded(cudaMemcpyAsync(got, sums, sizeof got, cudaMemcpyDeviceToHost, st),
                            "copy out") &&
                  succeeded(cudaMemcpyAsync(&top, largest, sizeof top, cudaMemcpyDeviceToHost, st),
                            "copy out") &&
                  succeeded(cudaStreamSynchronize(st), "synchronize");
        }
        cudaError_t q = cudaEventQuery(end);
        check(ran && (q == cudaSuccess || q == cudaErrorNotReady) &&
                  succeeded(cudaEventSynchronize(end), "event synchronize"),
              "the kernel ran on a stream between two events");
        bool same = true;
        for (int b = 0; b < BLOCKS; b++) {
            double want = 0;
            for (int i = b * THREADS; i < N && i < (b + 1) * THREADS; i++)
                want += (double)(i % 7) - 3.0;
            same = same && bf16_value(got[b]) == want; /* small integers: exact */
        }
        check(ran && same, "each block's sum, through half, float and bfloat16");
        check(ran && top == N - 1, "atomicMax found the largest index");
    }
    /* teardown: a failure here would already have shown above */
    (void)cudaFree(largest);
    (void)cudaFree(sums);
    (void)cudaFree(x);
    if (end)
        (void)cudaEventDestroy(end);
    if (start)
        (void)cudaEventDestroy(start);
    if (st)
        (void)cudaStreamDestroy(st);
    (void)cudaFreeHost(host_x);
    check(succeeded(cudaDeviceSynchronize(), "synchronize"), "the device is left idle");
}

int main(void)
{
    printf("# built for %s\n", WFC_BACKEND);
    host_conversions();
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        /* the plugins take this answer as zero devices (plugin.c) */
        const char *why = cudaGetErrorString(e);
        check(why != NULL && strlen(why) > 0, "without a device the runtime names the reason");
        (void)cudaGetLastError();
        printf("# no device (%s): the kernel is compiled, not run\n", why);
    } else {
        on_device();
    }
    return failures ? 1 : 0;
}
