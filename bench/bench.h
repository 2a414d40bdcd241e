/* bench/bench.h — what bench/bench.c (weft) and bench/torch_bench.cc
 * (libtorch) share: the problem sizes, how many repetitions each measurement
 * makes, the names of the "key value" lines torch-bench prints, and small
 * helpers (a monotonic clock, medians, the process's own peak RSS).
 * Both programs read their sizes and counts from here, so the two columns of
 * the table always measure the same work.  Valid C11 and C++17. */
#ifndef WEFT_BENCH_H
#define WEFT_BENCH_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------ problem sizes */

/* The large elementwise add: 16M float32 elements, 64 MiB per operand — far
 * beyond any cache, so the add runs at memory bandwidth. */
#define BENCH_BIG_NUMEL ((int64_t)16 * 1024 * 1024)
/* Bytes one add_out call moves, counted as STREAM does: read a, read b,
 * write out (the write-allocate read of out is not counted). */
#define BENCH_BIG_BYTES (3.0 * (double)BENCH_BIG_NUMEL * 4.0)
/* The square sgemm. */
#define BENCH_MM_N 1024
#define BENCH_MM_FLOPS (2.0 * BENCH_MM_N * BENCH_MM_N * BENCH_MM_N)

/* The inputs' values, chosen so each result is exact in float32 and can be
 * checked: a benchmark of a kernel that computes nonsense proves nothing. */
#define BENCH_ADD_A 1.5
#define BENCH_ADD_B 2.25
#define BENCH_MM_A 0.5
#define BENCH_MM_B 0.25 /* every element of a @ b is N * 0.5 * 0.25 = 128 */

/* The autograd chain: y = x (one float32 element, 1, requires grad), then
 * BENCH_AUTOGRAD_STEPS times y = y * BENCH_AUTOGRAD_MUL + BENCH_AUTOGRAD_ADD,
 * then backward from y.  x's gradient is BENCH_AUTOGRAD_MUL^STEPS
 * (1.0001^1000 = 1.10516...), which float32 reaches only to within rounding:
 * 1.0001 itself is off by 1.7e-8 in float32 and each of the 1000 backward
 * multiplications may round, so it is checked to a relative
 * BENCH_AUTOGRAD_TOL. */
#define BENCH_AUTOGRAD_STEPS 1000
#define BENCH_AUTOGRAD_MUL 1.0001
#define BENCH_AUTOGRAD_ADD 0.5
#define BENCH_AUTOGRAD_TOL 1e-3

/* ------------------------------------------------------------- repetitions */

/* Every number is the median over `batches` timed batches of `calls` calls
 * each, after one untimed warm-up batch; weft's and libtorch's batches
 * alternate (see --serve below), and each ratio is the median of the
 * per-round ratios.  Short batches and many rounds: on a shared machine the
 * speed drifts within seconds, and only batches run side by side compare.
 * The batch counts are multiples of the number of contenders (3 for the
 * adds, 2 for mm and autograd), so that each one runs equally often in each
 * position of a round. */
typedef struct bench_plan {
    long add1_calls;
    int add1_batches;
    int big_calls;
    int big_batches;
    int mm_calls;
    int mm_batches;
    int autograd_calls; /* one call: the whole 1000-step forward and the backward */
    int autograd_batches;
    int startup_runs; /* timed start-up children of each kind, after one warm-up */
} bench_plan;

static inline bench_plan bench_plan_get(int quick)
{
    bench_plan p;
    if (quick) { /* a smoke test for CI: every path runs, numbers are rough */
        p.add1_calls = 20000;
        p.add1_batches = 3;
        p.big_calls = 2;
        p.big_batches = 3;
        p.mm_calls = 2;
        p.mm_batches = 4;
        p.autograd_calls = 2;
        p.autograd_batches = 4;
        p.startup_runs = 3;
    } else {
        p.add1_calls = 200000;
        p.add1_batches = 9;
        p.big_calls = 4;
        p.big_batches = 15;
        p.mm_calls = 4;
        p.mm_batches = 12;
        p.autograd_calls = 10;
        p.autograd_batches = 16;
        p.startup_runs = 7;
    }
    return p;
}

/* ------------------------------------------- measurements and torch-bench */

/* The measurements, by the names torch-bench knows them. */
#define BENCH_KIND_ADD1 "add1"                     /* at::add, 1 element */
#define BENCH_KIND_ADD1_INFERENCE "add1_inference" /* the same under InferenceMode */
#define BENCH_KIND_ADD_OUT "add_out"               /* at::add_out, 16M elements */
#define BENCH_KIND_MM "mm"                         /* at::mm, 1024 x 1024 */
#define BENCH_KIND_AUTOGRAD "autograd_chain"       /* 1000 steps + backward, 1 element */
#define BENCH_KIND_STREAM "stream" /* weft-bench only: the plain C STREAM add */

/* weft-bench --serve and torch-bench --serve: the protocol the parent drives
 * both sides with, so that their batches alternate in time and a machine
 * whose speed drifts (shared memory bandwidth, a neighbour's load) slows
 * both alike.
 *   child, once:   "threads N", ["torch_version V"], "ready" (one per line)
 *   parent:        "KIND CALLS"   child: the batch's ns per call, timed by the
 *                                 child's own clock, or "error TEXT"
 *   parent:        "quit" (or EOF) ends it. */
#define BENCH_SERVE_READY "ready"

/* Between two batches of the multi-threaded measurements, whichever library
 * ran last must be idle before the other starts: OpenBLAS's idle workers
 * spin on sched_yield for 2^28 cycles (~0.1 s at 2.5 GHz) after each call
 * and libgomp's for a shorter while, and they would steal cores from the
 * other process.  The pause is not timed. */
#define BENCH_SETTLE_NS 200000000L

/* What torch-bench prints without --serve (one "key value" line per
 * measurement, medians), and what every start-up child prints. */
#define BENCH_KEY_THREADS "threads"
#define BENCH_KEY_VERSION "torch_version"
#define BENCH_KEY_ADD1_NS "add_1elem_ns"
#define BENCH_KEY_ADD1_INFERENCE_NS "add_1elem_inference_mode_ns"
#define BENCH_KEY_ADD_OUT_GBS "add_out_16m_gbs"
#define BENCH_KEY_MM_GFLOPS "mm_1024_gflops"
#define BENCH_KEY_AUTOGRAD_US "autograd_chain_1000_us"
#define BENCH_KEY_STARTUP_RESULT "startup_result"
#define BENCH_KEY_VMHWM_KB "vmhwm_kb"

/* ------------------------------------------- issue 3: the operator table */

/* The operator rows of issue 3.  Every input is a constant (BENCH_ADD_A for
 * the first operand, BENCH_ADD_B for the second, BENCH_MM_A/B for matrices
 * and convolution inputs/weights, zero bias), so each side checks a known
 * answer after every batch (bench_op_expected); the work is the same as
 * with random data (no kernel here looks at values to skip work).
 * Convolutions: stride 1, padding 1, with bias; "+ backward" is the
 * forward and a backward from a grad_output of ones into the input's and
 * weight's gradients.  Throughput is `work` (bytes moved: inputs read and
 * outputs written once; or flops) per second; ratio = weft's throughput /
 * libtorch's (libtorch's time / weft's, paired per round). */
typedef enum bench_op_id {
    BENCH_OP_ADD_OUT, BENCH_OP_ADD, BENCH_OP_MUL_OUT, BENCH_OP_MUL,
    BENCH_OP_EXP_OUT, BENCH_OP_EXP, BENCH_OP_SIGMOID_OUT, BENCH_OP_SIGMOID,
    BENCH_OP_GELU_OUT, BENCH_OP_GELU,
    BENCH_OP_SUM, BENCH_OP_SOFTMAX,
    BENCH_OP_MM256, BENCH_OP_MM1024, BENCH_OP_MM2048,
    BENCH_OP_CONV_SMALL, BENCH_OP_CONV_SMALL_BWD, BENCH_OP_CONV_BIG, BENCH_OP_CONV_BIG_BWD,
    BENCH_OP_MAX_POOL, BENCH_OP_BATCH_NORM, BENCH_OP_LAYER_NORM, BENCH_OP_CROSS_ENTROPY,
    BENCH_NUM_OPS
} bench_op_id;

#define BENCH_ROWS2D 4096 /* sum, softmax: [4096, 4096], over the last dim */
#define BENCH_LN_ROWS 16384 /* layer_norm: [16384, 1024] over the last dim */
#define BENCH_LN_D 1024
#define BENCH_XENT_N 8192 /* cross_entropy: [8192, 1000] logits, class 0 */
#define BENCH_XENT_C 1000
/* convolutions: [N, C, H, W] inputs, OC 3x3 filters */
#define BENCH_CONV_SMALL_N 32
#define BENCH_CONV_SMALL_C 3
#define BENCH_CONV_SMALL_HW 64
#define BENCH_CONV_SMALL_OC 16
#define BENCH_CONV_BIG_N 32
#define BENCH_CONV_BIG_C 64
#define BENCH_CONV_BIG_HW 56
#define BENCH_CONV_BIG_OC 64
/* max_pool2d (3x3, stride 2, padding 1) and batch_norm (training, with
 * weight, bias and running statistics): on the big convolution's input */

#define BENCH_MiB (1024.0 * 1024.0)
#define BENCH_CONV_FLOPS(N, C, HW, OC) (2.0 * (N) * (OC) * (HW) * (HW) * (C) * 9.0)

typedef struct bench_op {
    const char *kind;  /* the request name, and the --json key */
    const char *label; /* the table's row */
    const char *unit;  /* "GB/s" or "GFLOP/s": work per ns */
    double work;       /* bytes or flops per call */
    int calls, batches; /* full run (--quick: 1 call, 2 batches) */
    double goal;       /* minimum weft/libtorch throughput */
} bench_op;

static const bench_op bench_ops[BENCH_NUM_OPS] = {
    {"op_add_out", "add, 16M float32, preallocated output", "GB/s", 3 * 64 * BENCH_MiB, 4, 10, 1.0},
    {"op_add", "add, 16M float32, fresh output", "GB/s", 3 * 64 * BENCH_MiB, 4, 10, 10.0},
    {"op_mul_out", "mul, 16M float32, preallocated output", "GB/s", 3 * 64 * BENCH_MiB, 4, 10, 1.0},
    {"op_mul", "mul, 16M float32, fresh output", "GB/s", 3 * 64 * BENCH_MiB, 4, 10, 10.0},
    {"op_exp_out", "exp, 16M float32, preallocated output", "GB/s", 2 * 64 * BENCH_MiB, 4, 10, 1.0},
    {"op_exp", "exp, 16M float32, fresh output", "GB/s", 2 * 64 * BENCH_MiB, 4, 10, 10.0},
    {"op_sigmoid_out", "sigmoid, 16M float32, preallocated output", "GB/s", 2 * 64 * BENCH_MiB, 4, 10, 1.0},
    {"op_sigmoid", "sigmoid, 16M float32, fresh output", "GB/s", 2 * 64 * BENCH_MiB, 4, 10, 10.0},
    {"op_gelu_out", "gelu (exact), 16M float32, preallocated output", "GB/s", 2 * 64 * BENCH_MiB, 4, 10, 1.0},
    {"op_gelu", "gelu (exact), 16M float32, fresh output", "GB/s", 2 * 64 * BENCH_MiB, 4, 10, 10.0},
    {"op_sum", "sum over the last dim, 4096 x 4096", "GB/s", 64 * BENCH_MiB, 4, 10, 1.0},
    {"op_softmax", "softmax over the last dim, 4096 x 4096", "GB/s", 2 * 64 * BENCH_MiB, 4, 10, 1.0},
    {"op_mm256", "sgemm 256 (mm, result allocated)", "GFLOP/s", 2.0 * 256 * 256 * 256, 100, 10, 1.0},
    {"op_mm1024", "sgemm 1024 (mm, result allocated)", "GFLOP/s", 2.0 * 1024 * 1024 * 1024, 4, 10, 1.0},
    {"op_mm2048", "sgemm 2048 (mm, result allocated)", "GFLOP/s", 2.0 * 2048 * 2048 * 2048, 1, 8, 1.0},
    {"op_conv_small", "conv2d 32x3x64x64, 16 3x3 filters, forward", "GFLOP/s",
     BENCH_CONV_FLOPS(32, 3, 64, 16), 4, 10, 0.8},
    {"op_conv_small_bwd", "conv2d 32x3x64x64, 16 3x3 filters, forward + backward", "GFLOP/s",
     3 * BENCH_CONV_FLOPS(32, 3, 64, 16), 2, 10, 0.8},
    {"op_conv_big", "conv2d 32x64x56x56, 64 3x3 filters, forward", "GFLOP/s",
     BENCH_CONV_FLOPS(32, 64, 56, 64), 1, 8, 0.8},
    {"op_conv_big_bwd", "conv2d 32x64x56x56, 64 3x3 filters, forward + backward", "GFLOP/s",
     3 * BENCH_CONV_FLOPS(32, 64, 56, 64), 1, 6, 0.8},
    {"op_max_pool", "max_pool2d 3x3 stride 2 pad 1, 32x64x56x56", "GB/s",
     (32.0 * 64 * 56 * 56 + 32.0 * 64 * 28 * 28) * 4, 4, 10, 1.0},
    {"op_batch_norm", "batch_norm training, 32x64x56x56", "GB/s", 2 * 32.0 * 64 * 56 * 56 * 4, 4, 10, 1.0},
    {"op_layer_norm", "layer_norm over the last dim, 16384 x 1024", "GB/s", 2 * 64 * BENCH_MiB, 4, 10, 1.0},
    {"op_cross_entropy", "cross_entropy forward, 8192 x 1000 logits", "GB/s",
     8192.0 * 1000 * 4, 4, 10, 1.0},
};

/* The value each operator's result must hold at a checked element (an
 * interior one for convolutions; for "+ backward" the input's gradient). */
static inline double bench_op_expected(int id)
{
    const double a = BENCH_ADD_A, b = BENCH_ADD_B;
    switch (id) {
    case BENCH_OP_ADD_OUT: case BENCH_OP_ADD: return a + b;
    case BENCH_OP_MUL_OUT: case BENCH_OP_MUL: return a * b;
    case BENCH_OP_EXP_OUT: case BENCH_OP_EXP: return 4.4816890703380645; /* exp(1.5) */
    case BENCH_OP_SIGMOID_OUT: case BENCH_OP_SIGMOID: return 0.8175744761936437;
    case BENCH_OP_GELU_OUT: case BENCH_OP_GELU: return 1.399789198096713; /* 1.5 Phi(1.5) */
    case BENCH_OP_SUM: return a * BENCH_ROWS2D;
    case BENCH_OP_SOFTMAX: return 1.0 / BENCH_ROWS2D;
    case BENCH_OP_MM256: return 256 * BENCH_MM_A * BENCH_MM_B;
    case BENCH_OP_MM1024: return 1024 * BENCH_MM_A * BENCH_MM_B;
    case BENCH_OP_MM2048: return 2048 * BENCH_MM_A * BENCH_MM_B;
    case BENCH_OP_CONV_SMALL: return BENCH_CONV_SMALL_C * 9 * BENCH_MM_A * BENCH_MM_B;
    case BENCH_OP_CONV_SMALL_BWD: return BENCH_CONV_SMALL_OC * 9 * BENCH_MM_B;
    case BENCH_OP_CONV_BIG: return BENCH_CONV_BIG_C * 9 * BENCH_MM_A * BENCH_MM_B;
    case BENCH_OP_CONV_BIG_BWD: return BENCH_CONV_BIG_OC * 9 * BENCH_MM_B;
    case BENCH_OP_MAX_POOL: return BENCH_MM_A; /* the big convolution input */
    case BENCH_OP_BATCH_NORM: case BENCH_OP_LAYER_NORM: return 0; /* constant input */
    case BENCH_OP_CROSS_ENTROPY: return 6.907755278982137; /* log(1000) */
    default: return 0;
    }
}

static inline int bench_op_find(const char *kind)
{
    for (int i = 0; i < BENCH_NUM_OPS; i++)
        if (strcmp(bench_ops[i].kind, kind) == 0)
            return i;
    return -1;
}

static inline int bench_close(double got, double want)
{
    return got == got && (got - want <= 1e-4 * (1 + (want < 0 ? -want : want))) &&
           (want - got <= 1e-4 * (1 + (want < 0 ? -want : want)));
}

/* ----------------------------------------------------------------- helpers */

/* CLOCK_MONOTONIC: unaffected by NTP steps, and its vDSO read costs ~20 ns,
 * nothing next to a batch of 20k+ calls. */
static inline double bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static inline int bench_cmp_double_(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

/* The median of n values (n <= 64); sorts a copy, leaves v as it is.  The
 * median, not the mean: one batch disturbed by another process should not
 * move the result. */
static inline double bench_median(const double *v, int n)
{
    double s[64];
    if (n <= 0)
        return 0.0;
    if (n > 64)
        n = 64;
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, bench_cmp_double_);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

/* The calling process's peak resident set (VmHWM) in KiB, or -1.  Start-up
 * children print it as a cross-check of the ru_maxrss their parent reads. */
static inline long bench_self_vmhwm_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "VmHWM:", 6) == 0) {
            kb = strtol(line + 6, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kb;
}

#endif /* WEFT_BENCH_H */
