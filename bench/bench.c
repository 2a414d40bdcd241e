/* bench/bench.c — weft's benchmark: the fixed cost of one operator call, a
 * chain of 1000 recorded operations and its backward, a memory-bound add, a
 * 1024^3 sgemm and process start-up, measured for weft
 * and, in the same run on the same inputs, for libtorch, printed as one table
 * of ratios against the goals.  The parent only coordinates: weft's side runs
 * in a child (this program with --serve), libtorch's in another
 * (bench/torch-bench --serve), driven batch by batch in alternation.  Run it
 * through bench/run, which points it at the build's plugins. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <weft/dlpack.h>
#include <weft/weft.h>

#include "bench.h"

extern char **environ;

/* The issues' goals: weft's fixed cost at most 1/5 of libtorch's, its
 * autograd chain at most 1/8 of libtorch's time (issue 4), its throughputs
 * at least 0.9x, its start-up at most 1/20 of the time and 1/10 of the
 * memory. */
#define GOAL_ADD1_MAX_FRACTION 0.2
#define GOAL_AUTOGRAD_MAX_FRACTION 0.125
#define GOAL_THROUGHPUT_MIN_RATIO 0.9
#define GOAL_STARTUP_TIME_MAX_FRACTION 0.05
#define GOAL_STARTUP_RSS_MAX_FRACTION 0.1

#define NOT_MEASURED __builtin_nan("")

static bool have(double v)
{
    return v == v; /* false for NaN: not measured */
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("weft-bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

/* A weft call that must succeed: a failure means the build is broken, and a
 * number measured on a failing path would mean nothing. */
#define CHECK(call)                                                                           \
    do {                                                                                      \
        int rc_ = (call);                                                                     \
        if (rc_ < 0)                                                                          \
            die("%s failed: %s (%s)", #call, weft_last_error(), weft_error_name(rc_));        \
    } while (0)

/* ---------------------------------------------------------------- rounds */

/* One side of a comparison: a function that runs one batch of `calls`
 * calls, timed around its loop alone, and returns ns per call (NaN when it
 * could not run). */
typedef struct contender {
    const char *name; /* for --verbose */
    double (*batch)(void *ctx, long calls);
    void *ctx;
    double ns[64];
} contender;

static void settle(void)
{
    struct timespec ts = {0, BENCH_SETTLE_NS};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* One untimed warm-up round, then `batches` rounds of one batch per
 * contender.  The batches interleave, so a drift in the machine's speed
 * reaches every contender, and the order rotates by one place each round, so
 * each contender runs equally often in each position: on a shared machine
 * the position alone (first after a pause, right after the other process)
 * was seen to move a result by 2x.  `pause`: let the previous contender's
 * spinning worker threads go idle before each batch. */
static void run_rounds(contender *cs, int n, long calls, int batches, bool pause)
{
    for (int round = -1; round < batches && round < 64; round++) {
        for (int j = 0; j < n; j++) {
            contender *c = &cs[(j + round + n) % n];
            if (!c->batch)
                continue;
            if (pause)
                settle();
            double ns = c->batch(c->ctx, calls);
            if (round >= 0)
                c->ns[round] = ns;
        }
    }
}

/* The median ns per call, or NaN if the contender is absent or any batch
 * failed. */
static double contender_median(const contender *c, int batches)
{
    if (!c->batch)
        return NOT_MEASURED;
    for (int i = 0; i < batches; i++)
        if (!have(c->ns[i]))
            return NOT_MEASURED;
    return bench_median(c->ns, batches);
}

/* The median over rounds of a's time / b's time in the same round: the
 * ratio the table reports.  A ratio of two medians could pair a batch taken
 * while the machine was fast with one taken while it was slow; batches of
 * one round ran next to each other.  NaN if either is absent. */
static double paired_ratio(const double *a, const double *b, int n)
{
    double r[64];
    if (n > 64)
        n = 64;
    for (int i = 0; i < n; i++) {
        if (!have(a[i]) || !have(b[i]) || b[i] <= 0)
            return NOT_MEASURED;
        r[i] = a[i] / b[i];
    }
    return bench_median(r, n);
}

static double contender_ratio(const contender *a, const contender *b, int batches)
{
    return a->batch && b->batch ? paired_ratio(a->ns, b->ns, batches) : NOT_MEASURED;
}

/* --verbose: every batch, in ns per call, so the spread behind a median can
 * be judged. */
static void print_batches(const contender *cs, int n, int batches)
{
    for (int k = 0; k < n; k++) {
        if (!cs[k].batch)
            continue;
        printf("  %-28s", cs[k].name);
        for (int i = 0; i < batches; i++)
            printf(" %.4g", cs[k].ns[i]);
        printf("  (ns per call)\n");
    }
}

/* ------------------------------------------------------- weft measurements */

typedef struct binary_ctx {
    weft_tensor *a, *b, *out;
} binary_ctx;

/* weft_add + release: dispatch, output allocation, kernel, freeing the
 * result.  weft_add is an opaque call into libweft with side effects
 * (allocation), so the compiler cannot drop it. */
static double weft_add1_batch(void *vctx, long calls)
{
    binary_ctx *c = vctx;
    double t0 = bench_now_ns();
    for (long i = 0; i < calls; i++) {
        weft_tensor *r;
        CHECK(weft_add(&r, c->a, c->b));
        weft_tensor_release(r);
    }
    return (bench_now_ns() - t0) / (double)calls;
}

static double weft_add_out_batch(void *vctx, long calls)
{
    binary_ctx *c = vctx;
    double t0 = bench_now_ns();
    for (long i = 0; i < calls; i++)
        CHECK(weft_add_out(c->out, c->a, c->b));
    return (bench_now_ns() - t0) / (double)calls;
}

/* weft_mm allocates its result, as at::mm does on the other side. */
static double weft_mm_batch(void *vctx, long calls)
{
    binary_ctx *c = vctx;
    double t0 = bench_now_ns();
    for (long i = 0; i < calls; i++) {
        weft_tensor *r;
        CHECK(weft_mm(&r, c->a, c->b));
        weft_tensor_release(r);
    }
    return (bench_now_ns() - t0) / (double)calls;
}

static void binary_free(binary_ctx *c)
{
    weft_tensor_release(c->a);
    weft_tensor_release(c->b);
    weft_tensor_release(c->out);
}

/* The results, checked once the timing is done: a fast kernel that computes
 * nonsense proves nothing. */
static void verify_add1(const binary_ctx *c)
{
    weft_tensor *r;
    double v;
    CHECK(weft_add(&r, c->a, c->b));
    CHECK(weft_tensor_item(r, &v));
    weft_tensor_release(r);
    if (v != BENCH_ADD_A + BENCH_ADD_B)
        die("weft_add gave %g, expected %g", v, BENCH_ADD_A + BENCH_ADD_B);
}

static void verify_add_out(const binary_ctx *c)
{
    const float *o = weft_tensor_data_ptr(c->out);
    if (o[0] != (float)(BENCH_ADD_A + BENCH_ADD_B) || o[BENCH_BIG_NUMEL - 1] != o[0])
        die("weft_add_out gave %g ... %g, expected %g", o[0], o[BENCH_BIG_NUMEL - 1],
            BENCH_ADD_A + BENCH_ADD_B);
}

static void verify_mm(const binary_ctx *c)
{
    weft_tensor *r;
    CHECK(weft_mm(&r, c->a, c->b));
    const float *o = weft_tensor_data_ptr(r);
    const float want = (float)(BENCH_MM_N * BENCH_MM_A * BENCH_MM_B);
    float first = o[0], last = o[(int64_t)BENCH_MM_N * BENCH_MM_N - 1];
    weft_tensor_release(r);
    if (first != want || last != want)
        die("weft_mm gave %g ... %g, expected %g", first, last, want);
}

/* ----------------------------------------------- weft's autograd chain */

typedef struct autograd_ctx {
    weft_tensor *x; /* one float32 element, 1, requires grad */
    double grad;    /* x's gradient after the last call */
} autograd_ctx;

/* One call of the autograd row: y = x, BENCH_AUTOGRAD_STEPS times
 * y = y * 1.0001 + 0.5 (recording 2000 nodes), backward from y, x's
 * gradient read, the graph freed with y and x's gradient cleared for the
 * next call.  Returns the gradient. */
static double weft_autograd_call(weft_tensor *x)
{
    weft_tensor *y = x, *t, *y2, *g;
    double v;
    for (int i = 0; i < BENCH_AUTOGRAD_STEPS; i++) {
        CHECK(weft_mul_scalar(&t, y, BENCH_AUTOGRAD_MUL));
        CHECK(weft_add_scalar(&y2, t, BENCH_AUTOGRAD_ADD));
        weft_tensor_release(t);
        if (y != x)
            weft_tensor_release(y);
        y = y2;
    }
    CHECK(weft_backward(&y, 1, NULL, false, false));
    CHECK(weft_tensor_grad(&g, x));
    if (!g)
        die("weft_backward left x without a gradient");
    CHECK(weft_tensor_item(g, &v));
    weft_tensor_release(g);
    weft_tensor_release(y);
    CHECK(weft_tensor_set_grad(x, NULL));
    return v;
}

static double weft_autograd_batch(void *vctx, long calls)
{
    autograd_ctx *c = vctx;
    double t0 = bench_now_ns();
    for (long i = 0; i < calls; i++)
        c->grad = weft_autograd_call(c->x);
    return (bench_now_ns() - t0) / (double)calls;
}

static bool autograd_grad_ok(double g)
{
    double want = pow(BENCH_AUTOGRAD_MUL, BENCH_AUTOGRAD_STEPS);
    return fabs(g - want) <= BENCH_AUTOGRAD_TOL * want;
}

/* The last timed call's gradient, and one more call's. */
static void verify_autograd(autograd_ctx *c)
{
    double want = pow(BENCH_AUTOGRAD_MUL, BENCH_AUTOGRAD_STEPS);
    if (!autograd_grad_ok(c->grad))
        die("the autograd chain's gradient was %.7g, expected %.7g", c->grad, want);
    double g = weft_autograd_call(c->x);
    if (!autograd_grad_ok(g))
        die("the autograd chain's gradient was %.7g, expected %.7g", g, want);
}

/* ------------------------------------ the machine's bandwidth, in plain C */

/* STREAM's "add" (c = a + b) over the same 16M floats with the same number
 * of threads, each on a fixed slice it also first-touched: what the memory
 * system gives a loop with no library in the way. */
typedef struct stream_pool {
    float *a, *b, *c;
    int64_t n;
    int nthreads;
    int job; /* STREAM_INIT, STREAM_ADD or STREAM_STOP */
    pthread_barrier_t start, done;
    pthread_t tid[1024];
    struct stream_worker {
        struct stream_pool *pool;
        int index;
    } workers[1024];
} stream_pool;

enum { STREAM_INIT, STREAM_ADD, STREAM_STOP };

/* Eight floats as one value: the loop below is vectorised whatever the
 * optimisation level (this file gets the build's CFLAGS, often -O2, which
 * does not vectorise loops of unknown length).  On this very machine a
 * scalar loop reached only ~60% of what vector code does, so a scalar
 * reference would flatter every library compared with it. */
typedef float stream_vec __attribute__((vector_size(32)));

/* Built for AVX2 and for the baseline, chosen at load time: the reference
 * uses the widest loads the machine has, as libtorch's kernels do. */
__attribute__((target_clones("avx2", "default"))) static void
stream_add(stream_vec *restrict c, const stream_vec *restrict a, const stream_vec *restrict b,
           int64_t nvec)
{
    for (int64_t i = 0; i < nvec; i++)
        c[i] = a[i] + b[i];
}

/* Slices start at multiples of 16 floats (64 bytes), so each is aligned for
 * stream_vec and no two threads share a cache line. */
static void stream_slice(stream_pool *s, int t)
{
    int64_t lo = s->n * t / s->nthreads / 16 * 16;
    int64_t hi = t + 1 == s->nthreads ? s->n : s->n * (t + 1) / s->nthreads / 16 * 16;
    if (s->job == STREAM_INIT) {
        for (int64_t i = lo; i < hi; i++) {
            s->a[i] = (float)BENCH_ADD_A;
            s->b[i] = (float)BENCH_ADD_B;
            s->c[i] = 0.0f;
        }
        return;
    }
    int64_t nvec = (hi - lo) / 8;
    stream_add((stream_vec *)(s->c + lo), (const stream_vec *)(s->a + lo),
               (const stream_vec *)(s->b + lo), nvec);
    for (int64_t i = lo + nvec * 8; i < hi; i++)
        s->c[i] = s->a[i] + s->b[i];
}

/* Workers wait on a barrier, not by spinning, so they take no core from
 * the other contenders between batches. */
static void *stream_thread(void *arg)
{
    struct stream_worker *w = arg;
    for (;;) {
        pthread_barrier_wait(&w->pool->start);
        if (w->pool->job == STREAM_STOP)
            return NULL;
        stream_slice(w->pool, w->index);
        pthread_barrier_wait(&w->pool->done);
    }
}

/* The calling thread is worker 0. */
static void stream_run(stream_pool *s, int job)
{
    s->job = job;
    pthread_barrier_wait(&s->start);
    stream_slice(s, 0);
    pthread_barrier_wait(&s->done);
}

static double stream_batch(void *ctx, long calls)
{
    double t0 = bench_now_ns();
    for (long i = 0; i < calls; i++)
        stream_run(ctx, STREAM_ADD);
    return (bench_now_ns() - t0) / (double)calls;
}

static stream_pool *stream_start(int nthreads)
{
    stream_pool *s = calloc(1, sizeof *s);
    size_t bytes = (size_t)BENCH_BIG_NUMEL * sizeof(float);
    if (!s || posix_memalign((void **)&s->a, 4096, bytes) ||
        posix_memalign((void **)&s->b, 4096, bytes) || posix_memalign((void **)&s->c, 4096, bytes))
        die("out of memory for the STREAM buffers");
    s->n = BENCH_BIG_NUMEL;
    s->nthreads = nthreads;
    pthread_barrier_init(&s->start, NULL, (unsigned)nthreads);
    pthread_barrier_init(&s->done, NULL, (unsigned)nthreads);
    for (int t = 1; t < nthreads; t++) {
        s->workers[t].pool = s;
        s->workers[t].index = t;
        if (pthread_create(&s->tid[t], NULL, stream_thread, &s->workers[t]) != 0)
            die("pthread_create failed");
    }
    stream_run(s, STREAM_INIT);
    return s;
}

static void stream_stop(stream_pool *s)
{
    if (s->c[0] != (float)(BENCH_ADD_A + BENCH_ADD_B) || s->c[s->n - 1] != s->c[0])
        die("the STREAM loop computed a wrong sum");
    s->job = STREAM_STOP;
    pthread_barrier_wait(&s->start);
    for (int t = 1; t < s->nthreads; t++)
        pthread_join(s->tid[t], NULL);
    pthread_barrier_destroy(&s->start);
    pthread_barrier_destroy(&s->done);
    free(s->a);
    free(s->b);
    free(s->c);
    free(s);
}

/* ------------------------------------------------------- the weft server */

/* weft_load_default_plugins, with the hint that matters when it finds
 * nothing: outside bench/run, WEFT_PLUGIN_PATH does not point at the build. */
/* ------------------------------------------- issue 3: the operator rows */

/* The inputs of the operator rows (bench.h: bench_ops), made on first use. */
typedef struct ops_ctx {
    weft_tensor *a, *b, *out;           /* 16M float32 */
    weft_tensor *m2d, *out2d;           /* 4096 x 4096 */
    weft_tensor *mm[3][2];              /* 256, 1024, 2048 */
    weft_tensor *conv[2][4];            /* small, big: input, weight, bias, grad_output */
    weft_tensor *bn[4];                 /* weight, bias, running mean, running var */
    weft_tensor *ln[3];                 /* input, weight, bias */
    weft_tensor *xent[2];               /* logits, targets */
} ops_ctx;

static weft_tensor *ops_full(const int64_t *sizes, int nd, double v)
{
    weft_tensor *t = NULL;
    CHECK(weft_full(&t, sizes, nd, v, WEFT_FLOAT32, WEFT_DEVICE_CPU));
    return t;
}

static void ops_prepare(ops_ctx *o, int id)
{
    const int64_t big = BENCH_BIG_NUMEL, sq[2] = {BENCH_ROWS2D, BENCH_ROWS2D};
    if (id <= BENCH_OP_GELU && !o->a) {
        o->a = ops_full(&big, 1, BENCH_ADD_A);
        o->b = ops_full(&big, 1, BENCH_ADD_B);
        o->out = ops_full(&big, 1, 0); /* filled: its pages are mapped */
    }
    if ((id == BENCH_OP_SUM || id == BENCH_OP_SOFTMAX) && !o->m2d)
        o->m2d = ops_full(sq, 2, BENCH_ADD_A);
    if (id >= BENCH_OP_MM256 && id <= BENCH_OP_MM2048 && !o->mm[id - BENCH_OP_MM256][0]) {
        static const int64_t sizes[3] = {256, 1024, 2048};
        int64_t n = sizes[id - BENCH_OP_MM256], s[2] = {n, n};
        o->mm[id - BENCH_OP_MM256][0] = ops_full(s, 2, BENCH_MM_A);
        o->mm[id - BENCH_OP_MM256][1] = ops_full(s, 2, BENCH_MM_B);
    }
    if (id >= BENCH_OP_CONV_SMALL && id <= BENCH_OP_BATCH_NORM) {
        int k = id >= BENCH_OP_CONV_BIG;
        if (!o->conv[k][0]) {
            int64_t N = k ? BENCH_CONV_BIG_N : BENCH_CONV_SMALL_N,
                    C = k ? BENCH_CONV_BIG_C : BENCH_CONV_SMALL_C,
                    HW = k ? BENCH_CONV_BIG_HW : BENCH_CONV_SMALL_HW,
                    OC = k ? BENCH_CONV_BIG_OC : BENCH_CONV_SMALL_OC;
            int64_t xs[4] = {N, C, HW, HW}, ws[4] = {OC, C, 3, 3}, ys[4] = {N, OC, HW, HW};
            o->conv[k][0] = ops_full(xs, 4, BENCH_MM_A);
            o->conv[k][1] = ops_full(ws, 4, BENCH_MM_B);
            o->conv[k][2] = ops_full(&OC, 1, 0);
            o->conv[k][3] = ops_full(ys, 4, 1);
        }
    }
    if (id == BENCH_OP_BATCH_NORM && !o->bn[0]) {
        const int64_t c = BENCH_CONV_BIG_C;
        o->bn[0] = ops_full(&c, 1, 1);
        o->bn[1] = ops_full(&c, 1, 0);
        o->bn[2] = ops_full(&c, 1, 0);
        o->bn[3] = ops_full(&c, 1, 1);
    }
    if (id == BENCH_OP_LAYER_NORM && !o->ln[0]) {
        const int64_t s[2] = {BENCH_LN_ROWS, BENCH_LN_D}, d = BENCH_LN_D;
        o->ln[0] = ops_full(s, 2, BENCH_ADD_A);
        o->ln[1] = ops_full(&d, 1, 1);
        o->ln[2] = ops_full(&d, 1, 0);
    }
    if (id == BENCH_OP_CROSS_ENTROPY && !o->xent[0]) {
        const int64_t s[2] = {BENCH_XENT_N, BENCH_XENT_C}, n = BENCH_XENT_N;
        o->xent[0] = ops_full(s, 2, BENCH_ADD_A);
        CHECK(weft_zeros(&o->xent[1], &n, 1, WEFT_INT64, WEFT_DEVICE_CPU));
    }
}

/* conv2d forward, and with `backward` a backward from ones into the
 * input's and weight's gradients (which are then read and cleared) */
static int ops_conv(weft_tensor **res, weft_tensor *const *c, bool backward)
{
    static const int64_t one[2] = {1, 1};
    if (backward) {
        CHECK(weft_tensor_set_requires_grad(c[0], true));
        CHECK(weft_tensor_set_requires_grad(c[1], true));
    }
    weft_tensor *y = NULL;
    int rc = weft_conv2d(&y, c[0], c[1], c[2], one, 2, one, 2, one, 2, 1);
    if (rc == 0 && backward) {
        rc = weft_backward(&y, 1, &c[3], false, false);
        weft_tensor_release(y);
        y = NULL;
        if (rc == 0)
            rc = weft_tensor_grad(&y, c[0]);
        weft_tensor_set_grad(c[0], NULL);
        weft_tensor_set_grad(c[1], NULL);
    }
    if (backward) {
        weft_tensor_set_requires_grad(c[0], false);
        weft_tensor_set_requires_grad(c[1], false);
    }
    *res = y;
    return rc;
}

/* One call of operator id; *res: the tensor to check (a new reference, or
 * NULL when the result went to a preallocated output). */
static int ops_call(ops_ctx *o, int id, weft_tensor **res)
{
    static const int64_t last = -1, k3[2] = {3, 3}, s2[2] = {2, 2}, p1[2] = {1, 1},
                         d1[2] = {1, 1}, lnd = BENCH_LN_D;
    *res = NULL;
    switch (id) {
    case BENCH_OP_ADD_OUT: return weft_add_out(o->out, o->a, o->b);
    case BENCH_OP_ADD: return weft_add(res, o->a, o->b);
    case BENCH_OP_MUL_OUT: return weft_mul_out(o->out, o->a, o->b);
    case BENCH_OP_MUL: return weft_mul(res, o->a, o->b);
    case BENCH_OP_EXP_OUT: return weft_exp_out(o->out, o->a);
    case BENCH_OP_EXP: return weft_exp(res, o->a);
    case BENCH_OP_SIGMOID_OUT: return weft_sigmoid_out(o->out, o->a);
    case BENCH_OP_SIGMOID: return weft_sigmoid(res, o->a);
    case BENCH_OP_GELU_OUT: return weft_gelu_out(o->out, o->a);
    case BENCH_OP_GELU: return weft_gelu(res, o->a);
    case BENCH_OP_SUM: return weft_sum(res, o->m2d, &last, 1, false);
    case BENCH_OP_SOFTMAX: return weft_softmax(res, o->m2d, -1);
    case BENCH_OP_MM256: case BENCH_OP_MM1024: case BENCH_OP_MM2048:
        return weft_mm(res, o->mm[id - BENCH_OP_MM256][0], o->mm[id - BENCH_OP_MM256][1]);
    case BENCH_OP_CONV_SMALL: return ops_conv(res, o->conv[0], false);
    case BENCH_OP_CONV_SMALL_BWD: return ops_conv(res, o->conv[0], true);
    case BENCH_OP_CONV_BIG: return ops_conv(res, o->conv[1], false);
    case BENCH_OP_CONV_BIG_BWD: return ops_conv(res, o->conv[1], true);
    case BENCH_OP_MAX_POOL:
        return weft_max_pool2d(res, o->conv[1][0], k3, 2, s2, 2, p1, 2, d1, 2, false);
    case BENCH_OP_BATCH_NORM:
        return weft_batch_norm(res, o->conv[1][0], o->bn[0], o->bn[1], o->bn[2], o->bn[3], true,
                               0.1, 1e-5);
    case BENCH_OP_LAYER_NORM: return weft_layer_norm(res, o->ln[0], &lnd, 1, o->ln[1], o->ln[2], 1e-5);
    case BENCH_OP_CROSS_ENTROPY:
        return weft_cross_entropy(res, o->xent[0], o->xent[1], NULL, "mean", -100, 0.0);
    default: return WEFT_EINVAL; /* not reached: ids come from bench_op_find */
    }
}

/* The element of a result bench_op_expected describes: for convolutions
 * an interior one ([0, 0, 1, 1]), else the last. */
static double ops_checked_value(const weft_tensor *t, int id)
{
    weft_tensor *f = NULL;
    if (weft_to_dtype(&f, t, WEFT_FLOAT64) != 0)
        return NOT_MEASURED;
    const double *p = weft_tensor_data_ptr(f);
    int64_t at = weft_tensor_numel(f) - 1;
    if (id >= BENCH_OP_CONV_SMALL && id <= BENCH_OP_CONV_BIG_BWD)
        at = weft_tensor_size(f, 3) + 1;
    double v = p[at];
    weft_tensor_release(f);
    return v;
}

/* A batch of operator id: ns per call, or NaN with the error printed as
 * the answer (the caller must not print another). */
static double weft_ops_batch(ops_ctx *o, int id, long calls, bool *answered)
{
    ops_prepare(o, id);
    weft_tensor *res = NULL;
    int rc = 0;
    double t0 = bench_now_ns();
    for (long i = 0; i < calls && rc == 0; i++) {
        /* the previous result dies after the new one is made, as in
         * torch-bench's `r = op(...)` */
        weft_tensor *next = NULL;
        rc = ops_call(o, id, &next);
        weft_tensor_release(res);
        res = next;
    }
    double ns = (bench_now_ns() - t0) / (double)calls;
    double got = NOT_MEASURED;
    if (rc == 0)
        got = ops_checked_value(res ? res : o->out, id);
    weft_tensor_release(res);
    if (rc < 0 || !bench_close(got, bench_op_expected(id))) {
        printf("error %s: %s\n", bench_ops[id].kind,
               rc < 0 ? weft_last_error() : "wrong result");
        *answered = true;
        return NOT_MEASURED;
    }
    return ns;
}

static void ops_free(ops_ctx *o)
{
    weft_tensor **all = (weft_tensor **)o;
    for (size_t i = 0; i < sizeof *o / sizeof(weft_tensor *); i++)
        weft_tensor_release(all[i]);
}

static void load_plugins_or_die(void)
{
    int loaded = weft_load_default_plugins();
    if (loaded <= 0) {
        char *report = NULL;
        weft_plugin_report_string(&report);
        die("no plugin loaded (%s; is WEFT_PLUGIN_PATH set? run bench/run); load report:\n%s",
            loaded < 0 ? weft_last_error() : "none found", report ? report : "(none)");
    }
}

/* weft-bench --serve: weft's side of every measurement, one batch per
 * request line, inputs made on first use.  The results are checked when the
 * parent says "quit"; a wrong one exits with status 1. */
static int serve(int threads)
{
    load_plugins_or_die();
    printf("%s %d\n%s\n", BENCH_KEY_THREADS, threads, BENCH_SERVE_READY);
    fflush(stdout);
    binary_ctx add1 = {0}, add_out = {0}, mm = {0};
    autograd_ctx autograd = {0};
    ops_ctx ops = {0};
    stream_pool *stream = NULL;
    char line[256], kind[64];
    long calls;
    while (fgets(line, sizeof line, stdin) && strncmp(line, "quit", 4) != 0) {
        double ns;
        if (sscanf(line, "%63s %ld", kind, &calls) != 2 || calls < 1) {
            printf("error malformed request\n");
            fflush(stdout);
            continue;
        }
        if (strcmp(kind, BENCH_KIND_ADD1) == 0) {
            if (!add1.a) {
                const int64_t one = 1;
                CHECK(weft_full(&add1.a, &one, 1, BENCH_ADD_A, WEFT_FLOAT32, WEFT_DEVICE_CPU));
                CHECK(weft_full(&add1.b, &one, 1, BENCH_ADD_B, WEFT_FLOAT32, WEFT_DEVICE_CPU));
            }
            ns = weft_add1_batch(&add1, calls);
        } else if (strcmp(kind, BENCH_KIND_AUTOGRAD) == 0) {
            if (!autograd.x) {
                const int64_t one = 1;
                CHECK(weft_ones(&autograd.x, &one, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU));
                CHECK(weft_tensor_set_requires_grad(autograd.x, true));
            }
            ns = weft_autograd_batch(&autograd, calls);
        } else if (strcmp(kind, BENCH_KIND_ADD_OUT) == 0) {
            if (!add_out.a) {
                const int64_t n = BENCH_BIG_NUMEL;
                CHECK(weft_full(&add_out.a, &n, 1, BENCH_ADD_A, WEFT_FLOAT32, WEFT_DEVICE_CPU));
                CHECK(weft_full(&add_out.b, &n, 1, BENCH_ADD_B, WEFT_FLOAT32, WEFT_DEVICE_CPU));
                /* filled, so its pages are mapped before the timing */
                CHECK(weft_zeros(&add_out.out, &n, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU));
            }
            ns = weft_add_out_batch(&add_out, calls);
        } else if (strcmp(kind, BENCH_KIND_STREAM) == 0) {
            if (!stream)
                stream = stream_start(threads);
            ns = stream_batch(stream, calls);
        } else if (strcmp(kind, BENCH_KIND_MM) == 0) {
            if (!mm.a) {
                const int64_t sizes[2] = {BENCH_MM_N, BENCH_MM_N};
                CHECK(weft_full(&mm.a, sizes, 2, BENCH_MM_A, WEFT_FLOAT32, WEFT_DEVICE_CPU));
                CHECK(weft_full(&mm.b, sizes, 2, BENCH_MM_B, WEFT_FLOAT32, WEFT_DEVICE_CPU));
            }
            ns = weft_mm_batch(&mm, calls);
        } else if (bench_op_find(kind) >= 0) {
            bool answered = false;
            ns = weft_ops_batch(&ops, bench_op_find(kind), calls, &answered);
            if (answered) {
                fflush(stdout);
                continue;
            }
        } else {
            printf("error unknown measurement %s\n", kind);
            fflush(stdout);
            continue;
        }
        printf("%.6f\n", ns);
        fflush(stdout);
    }
    if (add1.a)
        verify_add1(&add1);
    if (add_out.a)
        verify_add_out(&add_out);
    if (mm.a)
        verify_mm(&mm);
    if (autograd.x)
        verify_autograd(&autograd);
    if (stream)
        stream_stop(stream);
    binary_free(&add1);
    binary_free(&add_out);
    binary_free(&mm);
    ops_free(&ops);
    weft_tensor_release(autograd.x);
    return 0;
}

/* -------------------------------------------------------------- children */

/* Spawns argv[0] (a path) with its stdin and/or stdout on pipes (NULL: keep
 * ours).  posix_spawn, not fork: a fork would copy this process's page
 * tables and lend the child our resident set. */
static pid_t spawn_piped(char *const argv[], int *to_child, int *from_child)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1};
    if ((to_child && pipe2(in, O_CLOEXEC) != 0) || (from_child && pipe2(out, O_CLOEXEC) != 0))
        die("pipe: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (to_child)
        posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
    if (from_child)
        posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (to_child) {
        close(in[0]);
        *to_child = in[1];
    }
    if (from_child) {
        close(out[1]);
        *from_child = out[0];
    }
    if (rc != 0)
        die("cannot run %s: %s", argv[0], strerror(rc));
    return pid;
}

/* The value of "key value" in a child's output, or NaN. */
static double child_value(const char *out, const char *key)
{
    size_t klen = strlen(key);
    const char *line = out;
    while (*line) {
        if (strncmp(line, key, klen) == 0 && line[klen] == ' ')
            return strtod(line + klen + 1, NULL);
        const char *nl = strchr(line, '\n');
        if (!nl)
            break;
        line = nl + 1;
    }
    return NOT_MEASURED;
}

/* ------------------------------------------------------------- servers */

/* A measuring child, "weft-bench --serve" or "torch-bench --serve", driven
 * one batch at a time (protocol in bench.h).  Both libraries run in
 * children of the same kind, spawned and woken alike, so that neither gains
 * from being the parent: on a shared VM the process a loop ran in was seen
 * to move its bandwidth by 20% and more. */
typedef struct server {
    const char *name;
    pid_t pid;
    FILE *to, *from;
    bool alive;
    int threads;
    char version[64];
} server;

typedef struct server_job {
    server *server;
    const char *kind;
} server_job;

static bool server_start(server *s, const char *name, char *const argv[])
{
    int to, from;
    memset(s, 0, sizeof *s);
    s->name = name;
    s->pid = spawn_piped(argv, &to, &from);
    s->to = fdopen(to, "w");
    s->from = fdopen(from, "r");
    if (!s->to || !s->from)
        die("fdopen: %s", strerror(errno));
    char line[256];
    while (fgets(line, sizeof line, s->from)) {
        if (strncmp(line, BENCH_SERVE_READY, strlen(BENCH_SERVE_READY)) == 0) {
            s->alive = true;
            return true;
        }
        double v = child_value(line, BENCH_KEY_THREADS);
        if (have(v))
            s->threads = (int)v;
        if (strncmp(line, BENCH_KEY_VERSION " ", strlen(BENCH_KEY_VERSION) + 1) == 0)
            sscanf(line + strlen(BENCH_KEY_VERSION) + 1, "%63s", s->version);
    }
    fprintf(stderr, "weft-bench: %s --serve did not start\n", argv[0]);
    return false;
}

static double server_batch(void *ctx, long calls)
{
    server_job *job = ctx;
    server *s = job->server;
    char line[512];
    if (!s->alive)
        return NOT_MEASURED;
    fprintf(s->to, "%s %ld\n", job->kind, calls);
    if (fflush(s->to) != 0 || !fgets(line, sizeof line, s->from)) {
        fprintf(stderr, "weft-bench: the %s side stopped answering\n", s->name);
        s->alive = false;
        return NOT_MEASURED;
    }
    if (strncmp(line, "error", 5) == 0) {
        fprintf(stderr, "weft-bench: %s, %s: %s", s->name, job->kind, line);
        return NOT_MEASURED;
    }
    return strtod(line, NULL);
}

/* Ends a server; true if it exited cleanly (the weft server checks its
 * results on the way out). */
static bool server_stop(server *s)
{
    int status = -1;
    if (s->to) {
        fputs("quit\n", s->to);
        fclose(s->to);
    }
    if (s->from)
        fclose(s->from);
    if (s->pid > 0)
        while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR) {
        }
    return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* ------------------------------------------------------------ baseline */

/* --baseline DIR: another build tree of weft (an earlier commit, say),
 * measured in the same run as a third contender for the fixed-cost rows, so
 * that "did this change make the 1-element add slower" is answered by
 * batches that alternate with this build's, not by two runs on a shared
 * machine.  Its children see its own libweft and plugins: both variables
 * point into DIR/.libs while they are spawned, and are put back after. */
static const char *baseline_dir;

typedef struct saved_env {
    char *ld, *plugins;
} saved_env;

static char *dup_env(const char *name)
{
    const char *v = getenv(name);
    return v ? strdup(v) : NULL;
}

static void restore_env(const char *name, char *value)
{
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
    free(value);
}

static saved_env baseline_env_enter(void)
{
    saved_env saved = {dup_env("LD_LIBRARY_PATH"), dup_env("WEFT_PLUGIN_PATH")};
    char libs[PATH_MAX];
    snprintf(libs, sizeof libs, "%s/.libs", baseline_dir);
    setenv("LD_LIBRARY_PATH", libs, 1);
    setenv("WEFT_PLUGIN_PATH", libs, 1);
    return saved;
}

static void baseline_env_leave(saved_env saved)
{
    restore_env("LD_LIBRARY_PATH", saved.ld);
    restore_env("WEFT_PLUGIN_PATH", saved.plugins);
}

/* The baseline's real weft-bench (libtool keeps it in bench/.libs); exits
 * with a message when DIR holds no built weft-bench. */
static void baseline_program(char *buf, size_t size)
{
    snprintf(buf, size, "%s/bench/.libs/weft-bench", baseline_dir);
    if (access(buf, X_OK) == 0)
        return;
    snprintf(buf, size, "%s/bench/weft-bench", baseline_dir);
    if (access(buf, X_OK) != 0)
        die("--baseline %s: no bench/weft-bench built there (build that tree first)",
            baseline_dir);
}

/* ------------------------------------------------------------ start-up */

/* What the start-up row times for weft: a process that loads the default
 * plugins and completes one add. */
static int startup_child(void)
{
    const int64_t one = 1;
    weft_tensor *a, *b, *c;
    double v;
    load_plugins_or_die();
    CHECK(weft_full(&a, &one, 1, BENCH_ADD_A, WEFT_FLOAT32, WEFT_DEVICE_CPU));
    CHECK(weft_full(&b, &one, 1, BENCH_ADD_B, WEFT_FLOAT32, WEFT_DEVICE_CPU));
    CHECK(weft_add(&c, a, b));
    CHECK(weft_tensor_item(c, &v));
    printf("%s %g\n%s %ld\n", BENCH_KEY_STARTUP_RESULT, v, BENCH_KEY_VMHWM_KB,
           bench_self_vmhwm_kb());
    weft_tensor_release(a);
    weft_tensor_release(b);
    weft_tensor_release(c);
    return v == BENCH_ADD_A + BENCH_ADD_B ? 0 : 1;
}

/* A finished start-up child. */
typedef struct child_result {
    char out[4096];
    double wall_ns;  /* from spawn to the end of wait4 */
    long maxrss_kb;  /* ru_maxrss from wait4 */
    int status;      /* as from waitpid */
} child_result;

static void run_child(char *const argv[], child_result *r)
{
    int from;
    double t0 = bench_now_ns();
    pid_t pid = spawn_piped(argv, NULL, &from);
    size_t len = 0;
    for (;;) {
        char buf[4096];
        ssize_t k = read(from, buf, sizeof buf);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        size_t room = sizeof r->out - 1 - len, take = (size_t)k < room ? (size_t)k : room;
        memcpy(r->out + len, buf, take);
        len += take;
    }
    r->out[len] = '\0';
    close(from);
    struct rusage ru;
    while (wait4(pid, &r->status, 0, &ru) < 0)
        if (errno != EINTR)
            die("wait4: %s", strerror(errno));
    r->wall_ns = bench_now_ns() - t0;
    r->maxrss_kb = ru.ru_maxrss; /* KiB on Linux */
}

typedef struct startup_stats {
    bool ran;
    double wall_ms;    /* median */
    double maxrss_mib; /* median of ru_maxrss */
    double vmhwm_mib;  /* median of what the child reported itself */
    double wall[64], rss[64]; /* every run, for the paired ratios */
} startup_stats;

/* Runs each start-up child once untimed (to warm the page cache), then
 * `runs` times, alternating between them: weft, libtorch and, with
 * --baseline, the baseline build's weft (NULL: absent). */
static void measure_startup(char *const *argvs[3], int runs, startup_stats st[3])
{
    double hwm[3][64];
    if (runs > 64)
        runs = 64;
    for (int round = -1; round < runs; round++) {
        for (int k = 0; k < 3; k++) {
            if (!argvs[k])
                continue;
            child_result r;
            if (k == 2) {
                saved_env saved = baseline_env_enter();
                run_child(argvs[k], &r);
                baseline_env_leave(saved);
            } else {
                run_child(argvs[k], &r);
            }
            if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0)
                die("start-up child %s failed (status %d); its output:\n%s", argvs[k][0],
                    r.status, r.out);
            if (round < 0)
                continue;
            st[k].wall[round] = r.wall_ns / 1e6;
            st[k].rss[round] = r.maxrss_kb / 1024.0;
            hwm[k][round] = child_value(r.out, BENCH_KEY_VMHWM_KB) / 1024.0;
        }
    }
    for (int k = 0; k < 3; k++) {
        st[k].ran = argvs[k] != NULL;
        if (!st[k].ran)
            continue;
        st[k].wall_ms = bench_median(st[k].wall, runs);
        st[k].maxrss_mib = bench_median(st[k].rss, runs);
        st[k].vmhwm_mib = bench_median(hwm[k], runs);
    }
}

/* --------------------------------------------------------------- machine */

static void cpu_model(char *buf, size_t size)
{
    snprintf(buf, size, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon) {
            colon += 1 + (colon[1] == ' ');
            colon[strcspn(colon, "\n")] = '\0';
            snprintf(buf, size, "%s", colon);
            break;
        }
    }
    fclose(f);
}

static double mem_total_gib(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (double)pages * (double)page / (1024.0 * 1024.0 * 1024.0) : 0;
}

/* The CPUs this process may run on: the default thread count. */
static int usable_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* The directory of this program as it was started, less a trailing
 * "/.libs": libtool runs the real binary from bench/.libs, while
 * torch-bench (which needs no uninstalled library) sits in bench/. */
static void program_dir(char *buf, size_t size, const char *argv0)
{
    if (strchr(argv0, '/')) {
        snprintf(buf, size, "%s", argv0);
    } else {
        ssize_t k = readlink("/proc/self/exe", buf, size - 1);
        buf[k > 0 ? k : 0] = '\0';
    }
    char *slash = strrchr(buf, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(buf, size, ".");
    size_t len = strlen(buf);
    if (len >= 6 && strcmp(buf + len - 6, "/.libs") == 0)
        buf[len - 6] = '\0';
    else if (strcmp(buf, ".libs") == 0)
        snprintf(buf, size, ".");
}

/* ----------------------------------------------------------------- table */

typedef enum goal_kind {
    GOAL_NONE,     /* information only */
    GOAL_MAX_FRAC, /* weft/libtorch must be <= goal */
    GOAL_MIN_RATIO /* weft/libtorch must be >= goal */
} goal_kind;

typedef struct row {
    const char *name;
    const char *key; /* for --json */
    const char *unit;
    const char *ratio_of; /* "time", "throughput" or "memory"; NULL: a reference row */
    double weft, torch;   /* medians; NaN when not measured */
    double ratio;         /* weft/libtorch, the median of per-round ratios */
    goal_kind goal;
    double goal_value;
} row;

static double row_ratio(const row *r)
{
    return r->ratio_of ? r->ratio : NOT_MEASURED;
}

/* 1 met, 0 missed, -1 nothing to compare. */
static int row_met(const row *r)
{
    double ratio = row_ratio(r);
    if (r->goal == GOAL_NONE || !have(ratio))
        return -1;
    return r->goal == GOAL_MAX_FRAC ? ratio <= r->goal_value : ratio >= r->goal_value;
}

static void fmt_value(char *buf, size_t size, double v, const char *unit)
{
    if (!have(v))
        snprintf(buf, size, "n/a");
    else if (v >= 100)
        snprintf(buf, size, "%.0f %s", v, unit);
    else if (v >= 10)
        snprintf(buf, size, "%.1f %s", v, unit);
    else
        snprintf(buf, size, "%.2f %s", v, unit);
}

/* A Markdown table, so docs/benchmarks.md can quote it as printed. */
static void print_table(const row *rows, int nrows)
{
    printf("| operation | weft (median) | libtorch (median) | weft/libtorch (median of "
           "paired ratios) | goal | met? |\n");
    printf("|---|---:|---:|---:|---|---|\n");
    for (int i = 0; i < nrows; i++) {
        const row *r = &rows[i];
        char w[64], t[64], ratio[64], goal[64];
        fmt_value(w, sizeof w, r->weft, r->unit);
        fmt_value(t, sizeof t, r->torch, r->unit);
        if (!r->ratio_of)
            snprintf(t, sizeof t, "-");
        if (have(row_ratio(r)))
            snprintf(ratio, sizeof ratio, "%.3gx %s", row_ratio(r), r->ratio_of);
        else
            snprintf(ratio, sizeof ratio, "%s", r->ratio_of ? "n/a" : "-");
        const char *of = r->ratio_of ? r->ratio_of : "";
        if (r->goal == GOAL_MAX_FRAC)
            snprintf(goal, sizeof goal, "<= %gx %s", r->goal_value, of);
        else if (r->goal == GOAL_MIN_RATIO)
            snprintf(goal, sizeof goal, ">= %gx %s", r->goal_value, of);
        else
            snprintf(goal, sizeof goal, "%s", r->ratio_of ? "(info)" : "(reference)");
        int met = row_met(r);
        printf("| %s | %s | %s | %s | %s | %s |\n", r->name, w, t, ratio, goal,
               met < 0 ? "-" : met ? "yes" : "**NO**");
    }
}

static void json_number(double v)
{
    if (have(v))
        printf("%.6g", v);
    else
        printf("null");
}

static void print_json(const row *rows, int nrows, int threads, bool quick, const char *model,
                       const char *torch_version)
{
    printf("{\n  \"threads\": %d,\n  \"quick\": %s,\n  \"cpus\": %d,\n  \"cpu_model\": \"%s\",\n"
           "  \"memory_gib\": %.1f,\n  \"libtorch\": ",
           threads, quick ? "true" : "false", usable_cpus(), model, mem_total_gib());
    if (torch_version)
        printf("\"%s\"", torch_version);
    else
        printf("null");
    printf(",\n  \"rows\": [\n");
    for (int i = 0; i < nrows; i++) {
        const row *r = &rows[i];
        int met = row_met(r);
        printf("    {\"key\": \"%s\", \"unit\": \"%s\", \"weft\": ", r->key, r->unit);
        json_number(r->weft);
        printf(", \"libtorch\": ");
        json_number(r->ratio_of ? r->torch : NOT_MEASURED);
        printf(", \"ratio\": ");
        json_number(row_ratio(r));
        printf(", \"goal\": ");
        json_number(r->goal == GOAL_NONE ? NOT_MEASURED : r->goal_value);
        printf(", \"goal_kind\": \"%s\", \"met\": %s}%s\n",
               r->goal == GOAL_MAX_FRAC ? "max" : r->goal == GOAL_MIN_RATIO ? "min" : "none",
               met < 0 ? "null" : met ? "true" : "false", i + 1 < nrows ? "," : "");
    }
    printf("  ]\n}\n");
}

/* ------------------------------------------------------------------ main */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: weft-bench [--quick] [--json] [--verbose] [--threads N] [--no-torch]\n"
            "                  [--only ROWS] [--rounds N] [--fixed-only] [--baseline DIR]\n"
            "       weft-bench --startup-child | --serve [--threads N]\n"
            "  Measures weft against libtorch (bench/torch-bench, when built) and prints\n"
            "  one table.  Run it through bench/run so that it finds the build's plugins.\n"
            "  --quick       few repetitions: a smoke test, the numbers are rough\n"
            "  --json        print the results as JSON instead of the table\n"
            "  --threads N   threads for both libraries (default: WEFT_NUM_THREADS, else\n"
            "                every CPU this process may use)\n"
            "  --no-torch    skip libtorch even when torch-bench is built\n"
            "  --verbose     also print every batch's time, to judge the spread\n"
            "  --only ROWS   only the operator rows whose name or label contains one of\n"
            "                the comma-separated substrings (e.g. conv_small,gelu); skips\n"
            "                start-up, the 1-element add, autograd, add_out, mm and DLPack\n"
            "  --rounds N    alternating rounds per operator row (default: the row's own)\n"
            "  --fixed-only  only start-up, the 1-element add and autograd (the fixed\n"
            "                costs; a minute instead of ten)\n"
            "  --baseline DIR  also measure the build tree DIR (an earlier commit, built)\n"
            "                in the same run: start-up, the 1-element add and autograd\n"
            "                rows alternate with it, and a before/after table follows\n"
            "  --startup-child  load the plugins, do one add, exit (what start-up times)\n"
            "  --serve       weft's side of the measurements, driven by the parent\n");
}

/* ------------------------------------------------- DLPack: constant time */

/* Issue 5: exporting and importing a tensor through DLPack costs the same
 * for 100M elements as for one, and allocates nothing proportional to the
 * size.  weft only (libtorch has no part in it): one round trip is
 * weft_to_dlpack_versioned + weft_from_dlpack_versioned + release. */
static long resident_kib(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static double dlpack_batch_ns(weft_tensor *t, long calls)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < calls; i++) {
        DLManagedTensorVersioned *m = NULL;
        weft_tensor *back = NULL;
        if (weft_to_dlpack_versioned(&m, t, 0) < 0 || weft_from_dlpack_versioned(&back, m) < 0) {
            fprintf(stderr, "weft-bench: DLPack round trip failed: %s\n", weft_last_error());
            exit(1);
        }
        if (weft_tensor_data_ptr(back) != weft_tensor_data_ptr(t)) {
            fprintf(stderr, "weft-bench: DLPack round trip copied the data\n");
            exit(1);
        }
        weft_tensor_release(back);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    return ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)calls;
}

static int cmp_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Prints the section; returns whether its goals were met. */
static bool dlpack_section(bool quick)
{
    enum { BATCHES = 9 };
    long calls = quick ? 2000 : 20000;
    int64_t one = 1, big = 100 * 1000 * 1000;
    weft_tensor *small = NULL, *large = NULL;
    /* 400 MB of address space; its pages are never touched, so only an
     * allocation proportional to the size would show in the resident set */
    if (weft_empty(&small, &one, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU) < 0 ||
        weft_empty(&large, &big, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU) < 0) {
        fprintf(stderr, "weft-bench: %s\n", weft_last_error());
        exit(1);
    }
    double ts[BATCHES], tl[BATCHES], ratio[BATCHES];
    dlpack_batch_ns(small, calls / 10);
    dlpack_batch_ns(large, calls / 10);
    long before = resident_kib();
    for (int i = 0; i < BATCHES; i++) {
        ts[i] = dlpack_batch_ns(small, calls);
        tl[i] = dlpack_batch_ns(large, calls);
        ratio[i] = tl[i] / ts[i];
    }
    long grown = resident_kib() - before;
    qsort(ts, BATCHES, sizeof *ts, cmp_doubles);
    qsort(tl, BATCHES, sizeof *tl, cmp_doubles);
    qsort(ratio, BATCHES, sizeof *ratio, cmp_doubles);
    double r = ratio[BATCHES / 2];
    bool met = r <= 1.5 && grown < 1024;
    printf("\nDLPack round trip (weft_to_dlpack_versioned + weft_from_dlpack_versioned + release),\n"
           "zero-copy checked: 1 element %.0f ns, 100M elements %.0f ns: %.2fx "
           "(goal <= 1.5x); resident set grew %ld KiB over %ld round trips of the 400 MB tensor "
           "(goal < 1 MiB): %s\n",
           ts[BATCHES / 2], tl[BATCHES / 2], r, grown, calls * BATCHES, met ? "met" : "NOT met");
    weft_tensor_release(small);
    weft_tensor_release(large);
    return met;
}

/* --only: whether an operator row's name or label contains one of the
 * comma-separated substrings. */
static bool op_selected(const bench_op *op, const char *only)
{
    char want[64];
    for (const char *p = only; *p;) {
        size_t n = strcspn(p, ",");
        if (n > 0 && n < sizeof want) {
            memcpy(want, p, n);
            want[n] = '\0';
            if (strstr(op->kind, want) || strstr(op->label, want))
                return true;
        }
        p += n + (p[n] == ',');
    }
    return false;
}

/* --only: the selected operator rows alone, alternating as in a full run,
 * printed as the same table (a quick look at one row takes seconds). */
static int run_only(server *w, server *t, bool torch, const char *only, int rounds, bool quick,
                    bool json, bool verbose, int threads, const char *model)
{
    server_job w_jobs[BENCH_NUM_OPS], t_jobs[BENCH_NUM_OPS];
    contender cs[BENCH_NUM_OPS][2];
    int batches[BENCH_NUM_OPS], picked[BENCH_NUM_OPS], n = 0;
    for (int i = 0; i < BENCH_NUM_OPS; i++) {
        if (!op_selected(&bench_ops[i], only))
            continue;
        w_jobs[n] = (server_job){w, bench_ops[i].kind};
        t_jobs[n] = (server_job){t, bench_ops[i].kind};
        cs[n][0] = (contender){bench_ops[i].kind, server_batch, &w_jobs[n], {0}};
        cs[n][1] = (contender){bench_ops[i].kind, torch ? server_batch : NULL, &t_jobs[n], {0}};
        batches[n] = rounds ? rounds : quick ? 2 : bench_ops[i].batches;
        run_rounds(cs[n], 2, quick ? 1 : bench_ops[i].calls, batches[n], true);
        picked[n++] = i;
    }
    if (torch)
        server_stop(t);
    bool alive = w->alive;
    if (!server_stop(w) || !alive)
        die("the weft side failed (its message is above): no results");
    if (n == 0) {
        fprintf(stderr, "weft-bench: --only %s matches no operator row\n", only);
        return 2;
    }
    row rows[BENCH_NUM_OPS];
    for (int k = 0; k < n; k++) {
        const bench_op *op = &bench_ops[picked[k]];
        rows[k] = (row){op->label, op->kind, op->unit, "throughput",
                        op->work / contender_median(&cs[k][0], batches[k]),
                        op->work / contender_median(&cs[k][1], batches[k]),
                        contender_ratio(&cs[k][1], &cs[k][0], batches[k]), GOAL_MIN_RATIO,
                        op->goal};
    }
    if (json) {
        print_json(rows, n, threads, quick, model, torch ? t->version : NULL);
        return 0;
    }
    if (verbose) {
        printf("batches:\n");
        for (int k = 0; k < n; k++)
            print_batches(cs[k], 2, batches[k]);
    }
    printf("\n");
    print_table(rows, n);
    return 0;
}

/* --baseline's table: this build against the baseline build, from the
 * batches and start-up runs above (they alternated with each other). */
static void print_baseline(const contender *c_add1, const contender *c_autograd,
                           const startup_stats *st, const bench_plan *plan)
{
    int runs = plan->startup_runs;
    struct {
        const char *name, *unit;
        double now, before, ratio;
    } rows[] = {
        {"add, 1 element: fixed cost per call", "ns",
         contender_median(&c_add1[0], plan->add1_batches),
         contender_median(&c_add1[3], plan->add1_batches),
         contender_ratio(&c_add1[0], &c_add1[3], plan->add1_batches)},
        {"autograd: 1000-step chain and its backward", "us",
         contender_median(&c_autograd[0], plan->autograd_batches) / 1e3,
         contender_median(&c_autograd[2], plan->autograd_batches) / 1e3,
         contender_ratio(&c_autograd[0], &c_autograd[2], plan->autograd_batches)},
        {"start-up: load plugins + one add, wall time", "ms", st[0].wall_ms, st[2].wall_ms,
         paired_ratio(st[0].wall, st[2].wall, runs)},
        {"start-up: peak RSS (ru_maxrss)", "MiB", st[0].maxrss_mib, st[2].maxrss_mib,
         paired_ratio(st[0].rss, st[2].rss, runs)},
    };
    printf("\nbefore/after: this build against the baseline build %s (same run, batches "
           "alternating)\n\n",
           baseline_dir);
    printf("| operation | this build (median) | baseline (median) | this/baseline (median of "
           "paired ratios) |\n|---|---:|---:|---:|\n");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char now[64], before[64], ratio[64];
        fmt_value(now, sizeof now, rows[i].now, rows[i].unit);
        fmt_value(before, sizeof before, rows[i].before, rows[i].unit);
        if (have(rows[i].ratio))
            snprintf(ratio, sizeof ratio, "%.3gx", rows[i].ratio);
        else
            snprintf(ratio, sizeof ratio, "n/a");
        printf("| %s | %s | %s | %s |\n", rows[i].name, now, before, ratio);
    }
}

int main(int argc, char **argv)
{
    bool quick = false, json = false, use_torch = true, verbose = false, serving = false,
         fixed_only = false;
    int threads = 0, rounds = 0;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--startup-child") == 0) {
            return startup_child();
        } else if (strcmp(argv[i], "--quick") == 0) {
            quick = true;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "--serve") == 0) {
            serving = true;
        } else if (strcmp(argv[i], "--verbose") == 0) {
            verbose = true;
        } else if (strcmp(argv[i], "--no-torch") == 0) {
            use_torch = false;
        } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            threads = atoi(argv[++i]);
            if (threads < 1 || threads > 1024) {
                usage(stderr);
                return 2;
            }
        } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            rounds = atoi(argv[++i]);
            if (rounds < 1 || rounds > 64) {
                usage(stderr);
                return 2;
            }
        } else if (strcmp(argv[i], "--fixed-only") == 0) {
            fixed_only = true;
        } else if (strcmp(argv[i], "--baseline") == 0 && i + 1 < argc) {
            baseline_dir = argv[++i];
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    /* a torch-bench that dies must not take us with it */
    signal(SIGPIPE, SIG_IGN);

    /* One thread count for everything: weft's pool, OpenBLAS (which both
     * libraries call for sgemm) and libtorch's OpenMP.  Exported before any
     * plugin loads, and inherited by every child. */
    if (threads == 0) {
        const char *env = getenv("WEFT_NUM_THREADS");
        threads = env && atoi(env) >= 1 ? atoi(env) : usable_cpus();
        if (threads > 1024)
            threads = 1024;
    }
    char tbuf[16];
    snprintf(tbuf, sizeof tbuf, "%d", threads);
    setenv("WEFT_NUM_THREADS", tbuf, 1);
    setenv("OPENBLAS_NUM_THREADS", tbuf, 1);
    setenv("OMP_NUM_THREADS", tbuf, 1);

    if (serving)
        return serve(threads);
    if (baseline_dir && (json || only)) {
        fprintf(stderr, "weft-bench: --baseline compares the full run's fixed-cost rows; it "
                        "takes neither --json nor --only\n");
        return 2;
    }
    char base_path[PATH_MAX + 32];
    if (baseline_dir)
        baseline_program(base_path, sizeof base_path);

    bench_plan plan = bench_plan_get(quick);
    char dir[PATH_MAX], torch_path[PATH_MAX + 32], self_path[PATH_MAX];
    program_dir(dir, sizeof dir, argv[0]);
    snprintf(torch_path, sizeof torch_path, "%s/torch-bench", dir);
    bool torch = use_torch && access(torch_path, X_OK) == 0;
    /* The weft start-up child is this very binary: the real executable, not
     * a libtool wrapper script whose shell would be timed along with it. */
    ssize_t k = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (k <= 0)
        die("cannot find this program's path in /proc/self/exe");
    self_path[k] = '\0';

    char model[256];
    cpu_model(model, sizeof model);
    if (!json) {
        printf("weft benchmark: %d thread%s for both libraries (WEFT_NUM_THREADS = "
               "OPENBLAS_NUM_THREADS = OMP_NUM_THREADS = %d)%s\n",
               threads, threads == 1 ? "" : "s", threads,
               quick ? "; --quick: few repetitions, rough numbers" : "");
        printf("machine: %d usable CPUs, %s, %.1f GiB memory\n", usable_cpus(), model,
               mem_total_gib());
        if (!torch)
            printf("libtorch: not compared (%s)\n",
                   use_torch ? "bench/torch-bench not built: configure found no libtorch"
                             : "--no-torch");
        fflush(stdout);
    }

    /* Start-up first, before anything else runs: the kernel carries a
     * process's peak RSS across exec, so a child's ru_maxrss is never below
     * its parent's peak at the spawn.  This process stays small (the
     * measured buffers live in the servers) and prints its peak below. */
    char *weft_child[] = {self_path, "--startup-child", NULL};
    char *torch_child[] = {torch_path, "--startup-child", NULL};
    char *base_child[] = {base_path, "--startup-child", NULL};
    char *const *argvs[3] = {weft_child, torch ? torch_child : NULL,
                             baseline_dir ? base_child : NULL};
    startup_stats st[3] = {{0}};
    long parent_hwm_kb = bench_self_vmhwm_kb();
    if (!only)
        measure_startup(argvs, plan.startup_runs, st);

    char *weft_argv[] = {self_path, "--serve", "--threads", tbuf, NULL};
    char *torch_argv[] = {torch_path, "--serve", "--threads", tbuf, NULL};
    server weft_srv = {0}, torch_srv = {0};
    if (!server_start(&weft_srv, "weft", weft_argv))
        die("the weft side did not start; its message is above");
    if (torch)
        torch = server_start(&torch_srv, "libtorch", torch_argv);
    char *base_argv[] = {base_path, "--serve", "--threads", tbuf, NULL};
    server base_srv = {0};
    if (baseline_dir) {
        saved_env saved = baseline_env_enter();
        bool started = server_start(&base_srv, "weft baseline", base_argv);
        baseline_env_leave(saved);
        if (!started)
            die("the baseline's weft side did not start; its message is above");
    }
    double (*base_fn)(void *, long) = baseline_dir ? server_batch : NULL;
    if (torch && torch_srv.threads != threads)
        fprintf(stderr, "weft-bench: warning: libtorch runs %d threads, weft %d\n",
                torch_srv.threads, threads);
    double (*torch_fn)(void *, long) = torch ? server_batch : NULL;
    if (only)
        return run_only(&weft_srv, &torch_srv, torch, only, rounds, quick, json, verbose, threads,
                        model);

    /* 1. the fixed cost of add on one element */
    server_job w_add1_job = {&weft_srv, BENCH_KIND_ADD1}, t_add1_job = {&torch_srv, BENCH_KIND_ADD1},
               t_add1_inf_job = {&torch_srv, BENCH_KIND_ADD1_INFERENCE},
               b_add1_job = {&base_srv, BENCH_KIND_ADD1};
    contender c_add1[4] = {{"add1 weft", server_batch, &w_add1_job},
                           {"add1 libtorch", torch_fn, &t_add1_job},
                           {"add1 libtorch InferenceMode", torch_fn, &t_add1_inf_job},
                           {"add1 weft baseline", base_fn, &b_add1_job}};
    run_rounds(c_add1, baseline_dir ? 4 : 3, plan.add1_calls, plan.add1_batches, false);

    /* 2. 1000 recorded steps on one element and their backward (both
     * libraries run backward on the calling thread: no pool to settle) */
    server_job w_autograd_job = {&weft_srv, BENCH_KIND_AUTOGRAD},
               t_autograd_job = {&torch_srv, BENCH_KIND_AUTOGRAD},
               b_autograd_job = {&base_srv, BENCH_KIND_AUTOGRAD};
    contender c_autograd[3] = {{"autograd weft", server_batch, &w_autograd_job},
                               {"autograd libtorch", torch_fn, &t_autograd_job},
                               {"autograd weft baseline", base_fn, &b_autograd_job}};
    run_rounds(c_autograd, baseline_dir ? 3 : 2, plan.autograd_calls, plan.autograd_batches,
               false);

    /* --fixed-only: the rows below are not run (their contenders have no
     * batch function, so they read "not measured" and are left out) */
    double (*rest_fn)(void *, long) = fixed_only ? NULL : server_batch;
    double (*rest_torch_fn)(void *, long) = fixed_only ? NULL : torch_fn;

    /* 3. add_out at memory bandwidth, beside the plain C STREAM add */
    server_job w_add_out_job = {&weft_srv, BENCH_KIND_ADD_OUT},
               t_add_out_job = {&torch_srv, BENCH_KIND_ADD_OUT},
               stream_job = {&weft_srv, BENCH_KIND_STREAM};
    contender c_add_out[3] = {{"add_out weft", rest_fn, &w_add_out_job},
                              {"add_out libtorch", rest_torch_fn, &t_add_out_job},
                              {"add_out plain C STREAM", rest_fn, &stream_job}};
    run_rounds(c_add_out, 3, plan.big_calls, plan.big_batches, true);

    /* 4. sgemm */
    server_job w_mm_job = {&weft_srv, BENCH_KIND_MM}, t_mm_job = {&torch_srv, BENCH_KIND_MM};
    contender c_mm[2] = {{"mm weft", rest_fn, &w_mm_job},
                         {"mm libtorch", rest_torch_fn, &t_mm_job}};
    run_rounds(c_mm, 2, plan.mm_calls, plan.mm_batches, true);

    /* 5. issue 3's operator rows, each alternating the two sides */
    server_job w_op_jobs[BENCH_NUM_OPS], t_op_jobs[BENCH_NUM_OPS];
    contender c_ops[BENCH_NUM_OPS][2];
    int op_batches[BENCH_NUM_OPS];
    for (int i = 0; i < BENCH_NUM_OPS; i++) {
        w_op_jobs[i] = (server_job){&weft_srv, bench_ops[i].kind};
        t_op_jobs[i] = (server_job){&torch_srv, bench_ops[i].kind};
        c_ops[i][0] = (contender){bench_ops[i].kind, rest_fn, &w_op_jobs[i], {0}};
        c_ops[i][1] = (contender){bench_ops[i].kind, rest_torch_fn, &t_op_jobs[i], {0}};
        op_batches[i] = rounds ? rounds : quick ? 2 : bench_ops[i].batches;
        run_rounds(c_ops[i], 2, quick ? 1 : bench_ops[i].calls, op_batches[i], true);
    }

    if (torch)
        server_stop(&torch_srv);
    if (baseline_dir) {
        bool base_alive = base_srv.alive;
        if (!server_stop(&base_srv) || !base_alive)
            die("the baseline's weft side failed (its message is above): no results");
    }
    bool weft_alive = weft_srv.alive;
    if (!server_stop(&weft_srv) || !weft_alive)
        die("the weft side failed (its message is above): no results");

    /* ns per call -> the table's units; for throughputs weft/libtorch is
     * libtorch's time over weft's */
    double w_add1 = contender_median(&c_add1[0], plan.add1_batches);
    double t_add1_ns = contender_median(&c_add1[1], plan.add1_batches);
    double t_add1_inf_ns = contender_median(&c_add1[2], plan.add1_batches);
    double w_autograd = contender_median(&c_autograd[0], plan.autograd_batches) / 1e3;
    double t_autograd_us = contender_median(&c_autograd[1], plan.autograd_batches) / 1e3;
    double w_add_out = BENCH_BIG_BYTES / contender_median(&c_add_out[0], plan.big_batches);
    double t_add_out_gbs = BENCH_BIG_BYTES / contender_median(&c_add_out[1], plan.big_batches);
    double stream_gbs = BENCH_BIG_BYTES / contender_median(&c_add_out[2], plan.big_batches);
    double w_mm = BENCH_MM_FLOPS / contender_median(&c_mm[0], plan.mm_batches);
    double t_mm_gflops = BENCH_MM_FLOPS / contender_median(&c_mm[1], plan.mm_batches);
    double r_add1 = contender_ratio(&c_add1[0], &c_add1[1], plan.add1_batches);
    double r_add1_inf = contender_ratio(&c_add1[0], &c_add1[2], plan.add1_batches);
    double r_autograd = contender_ratio(&c_autograd[0], &c_autograd[1], plan.autograd_batches);
    double r_add_out = contender_ratio(&c_add_out[1], &c_add_out[0], plan.big_batches);
    double r_mm = contender_ratio(&c_mm[1], &c_mm[0], plan.mm_batches);
    int runs = plan.startup_runs;
    double r_wall = st[1].ran ? paired_ratio(st[0].wall, st[1].wall, runs) : NOT_MEASURED;
    double r_rss = st[1].ran ? paired_ratio(st[0].rss, st[1].rss, runs) : NOT_MEASURED;

    row rows[] = {
        {"add, 1 element: fixed cost per call (dispatch + alloc + kernel + free)", "add_1elem",
         "ns", "time", w_add1, t_add1_ns, r_add1, GOAL_MAX_FRAC, GOAL_ADD1_MAX_FRACTION},
        {"add, 1 element: the same, libtorch under c10::InferenceMode", "add_1elem_inference_mode",
         "ns", "time", w_add1, t_add1_inf_ns, r_add1_inf, GOAL_NONE, 0},
        {"autograd: 1000 steps of y = y * 1.0001 + 0.5 on 1 element (requires grad), then "
         "backward",
         "autograd_chain_1000", "us", "time", w_autograd, t_autograd_us, r_autograd,
         GOAL_MAX_FRAC, GOAL_AUTOGRAD_MAX_FRACTION},
        {"add_out, 16M float32 into a preallocated output (3 x 64 MiB per call)", "add_out_16m",
         "GB/s", "throughput", w_add_out, t_add_out_gbs, r_add_out, GOAL_MIN_RATIO,
         GOAL_THROUGHPUT_MIN_RATIO},
        {"memory bandwidth: plain C STREAM add, same size and threads", "stream_add_16m", "GB/s",
         NULL, stream_gbs, NOT_MEASURED, NOT_MEASURED, GOAL_NONE, 0},
        {"mm, 1024 x 1024 float32 (result allocated per call)", "mm_1024", "GFLOP/s",
         "throughput", w_mm, t_mm_gflops, r_mm, GOAL_MIN_RATIO, GOAL_THROUGHPUT_MIN_RATIO},
        {"start-up: load plugins + one add, wall time (median)", "startup_wall", "ms", "time",
         st[0].wall_ms, st[1].ran ? st[1].wall_ms : NOT_MEASURED, r_wall, GOAL_MAX_FRAC,
         GOAL_STARTUP_TIME_MAX_FRACTION},
        {"start-up: load plugins + one add, peak RSS (ru_maxrss, median)", "startup_rss", "MiB",
         "memory", st[0].maxrss_mib, st[1].ran ? st[1].maxrss_mib : NOT_MEASURED, r_rss,
         GOAL_MAX_FRAC,
         GOAL_STARTUP_RSS_MAX_FRACTION},
    };
    int nrows = 0;
    row all_rows[sizeof rows / sizeof rows[0] + BENCH_NUM_OPS];
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (!fixed_only || have(rows[i].weft))
            all_rows[nrows++] = rows[i];
    for (int i = 0; i < BENCH_NUM_OPS && !fixed_only; i++) {
        const bench_op *op = &bench_ops[i];
        /* bytes per ns are GB/s, flops per ns GFLOP/s */
        all_rows[nrows++] = (row){
            op->label, op->kind, op->unit, "throughput",
            op->work / contender_median(&c_ops[i][0], op_batches[i]),
            op->work / contender_median(&c_ops[i][1], op_batches[i]),
            contender_ratio(&c_ops[i][1], &c_ops[i][0], op_batches[i]), GOAL_MIN_RATIO, op->goal};
    }

    if (json) {
        print_json(all_rows, nrows, threads, quick, model, torch ? torch_srv.version : NULL);
        return 0;
    }
    if (torch)
        printf("libtorch %s; weft and libtorch each run in a child process, their batches "
               "alternating\n",
               torch_srv.version);
    if (verbose) {
        printf("batches:\n");
        print_batches(c_add1, baseline_dir ? 4 : 3, plan.add1_batches);
        print_batches(c_autograd, baseline_dir ? 3 : 2, plan.autograd_batches);
        print_batches(c_add_out, 3, plan.big_batches);
        print_batches(c_mm, 2, plan.mm_batches);
        for (int i = 0; i < BENCH_NUM_OPS; i++)
            print_batches(c_ops[i], 2, op_batches[i]);
    }
    printf("\n");
    print_table(all_rows, nrows);
    if (fixed_only) {
        if (baseline_dir)
            print_baseline(c_add1, c_autograd, st, &plan);
        return 0;
    }
    printf("\nadd_out reaches %.0f%% (weft)",
           100 * contender_ratio(&c_add_out[2], &c_add_out[0], plan.big_batches));
    if (have(t_add_out_gbs))
        printf(" and %.0f%% (libtorch)",
               100 * contender_ratio(&c_add_out[2], &c_add_out[1], plan.big_batches));
    printf(" of the plain C STREAM add's throughput (medians of paired ratios).\n");
    printf("start-up peak RSS as the children reported it (VmHWM): weft %.1f MiB",
           st[0].vmhwm_mib);
    if (st[1].ran)
        printf(", libtorch %.1f MiB", st[1].vmhwm_mib);
    printf("; this process held %.1f MiB when it spawned them.\n", parent_hwm_kb / 1024.0);
    int misses = 0, compared = 0;
    for (int i = 0; i < nrows; i++) {
        int met = row_met(&all_rows[i]);
        compared += met >= 0;
        misses += met == 0;
    }
    if (compared)
        printf("goals: %d of %d met%s\n", compared - misses, compared,
               misses ? " (the rows marked NO)" : "");
    else
        printf("goals: nothing to compare without libtorch\n");
    if (baseline_dir)
        print_baseline(c_add1, c_autograd, st, &plan);
    dlpack_section(quick);
    return 0;
}
