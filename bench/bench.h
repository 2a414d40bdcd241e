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
