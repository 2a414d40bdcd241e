/* bench/profiler_bench.c — what the profiler (issue 19) costs, on the
 * 1-element add (the call whose fixed cost the profiler would show most):
 *   off       the add with the profiler compiled in and off;
 *   on        the same with profiling on (names and times);
 *   on_full   with record_shapes and profile_memory too (one operator and
 *             two memory events per call).
 * One process, batches alternating off / on / on_full in rotated order, the
 * medians of thread CPU time per call printed as "key value" lines, and the
 * per-recorded-operator cost as the median of the per-round differences
 * (on - off).  Every profiled batch is checked afterwards: its session must
 * hold exactly one "add" per call (a profiler that dropped events would look
 * cheap).
 *
 * The profiler functions are looked up with dlsym, so the same binary runs
 * against a libweft from before the profiler (LD_LIBRARY_PATH): it then
 * measures "off" only.  bench/profiler-run alternates the two libraries to
 * compare the off rows, and runs bench/torch-profiler-bench beside it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <weft/ops.h>
#include <weft/profiler.h>
#include <weft/weft.h>

static int (*p_create)(weft_profiler **, const weft_profiler_options *);
static int (*p_start)(weft_profiler *);
static int (*p_stop)(weft_profiler *);
static int (*p_destroy)(weft_profiler *);
static int (*p_key_averages)(weft_profiler_stat **, int *, const weft_profiler *, bool);
static void (*p_stats_free)(weft_profiler_stat *, int);

static double thread_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void check(int rc, const char *what)
{
    if (rc < 0) {
        fprintf(stderr, "profiler-bench: %s: %s\n", what, weft_last_error());
        exit(1);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ns per call of `calls` adds of two 1-element tensors. */
static double add_batch(const weft_tensor *a, const weft_tensor *b, long calls)
{
    double t0 = thread_ns();
    for (long i = 0; i < calls; i++) {
        weft_tensor *r;
        check(weft_add(&r, a, b), "add");
        weft_tensor_release(r);
    }
    return (thread_ns() - t0) / (double)calls;
}

/* The same batch recorded by a fresh session (its set-up and reading are
 * not timed); the session must hold one add per call. */
static double profiled_batch(const weft_tensor *a, const weft_tensor *b, long calls, bool full)
{
    weft_profiler *p = NULL;
    weft_profiler_options o = {sizeof o, full, full};
    check(p_create(&p, &o), "weft_profiler_create");
    check(p_start(p), "weft_profiler_start");
    double ns = add_batch(a, b, calls);
    check(p_stop(p), "weft_profiler_stop");
    weft_profiler_stat *st = NULL;
    int n = 0;
    long adds = -1;
    check(p_key_averages(&st, &n, p, false), "weft_profiler_key_averages");
    for (int i = 0; i < n; i++)
        if (strcmp(st[i].name, "add") == 0)
            adds = (long)st[i].calls;
    p_stats_free(st, n);
    p_destroy(p);
    if (adds != calls) {
        fprintf(stderr, "profiler-bench: the session recorded %ld adds of %ld\n", adds, calls);
        exit(1);
    }
    return ns;
}

int main(int argc, char **argv)
{
    long calls = 20000;
    int rounds = 31;
    bool off_only = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--calls") == 0 && i + 1 < argc)
            calls = atol(argv[++i]);
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--off-only") == 0)
            off_only = true; /* for callgrind: the same work on either library */
        else {
            fprintf(stderr, "usage: %s [--calls N] [--rounds N] [--off-only]\n", argv[0]);
            return 2;
        }
    }
    if (calls < 1 || rounds < 1 || rounds > 10000)
        return 2;
    *(void **)&p_create = dlsym(RTLD_DEFAULT, "weft_profiler_create");
    *(void **)&p_start = dlsym(RTLD_DEFAULT, "weft_profiler_start");
    *(void **)&p_stop = dlsym(RTLD_DEFAULT, "weft_profiler_stop");
    *(void **)&p_destroy = dlsym(RTLD_DEFAULT, "weft_profiler_destroy");
    *(void **)&p_key_averages = dlsym(RTLD_DEFAULT, "weft_profiler_key_averages");
    *(void **)&p_stats_free = dlsym(RTLD_DEFAULT, "weft_profiler_stats_free");
    bool have = p_create && p_start && p_stop && p_destroy && p_key_averages && p_stats_free;
    if (weft_load_default_plugins() <= 0) {
        fprintf(stderr, "profiler-bench: no plugin loaded (set WEFT_PLUGIN_PATH)\n");
        return 1;
    }
    const int64_t one = 1;
    weft_tensor *a = NULL, *b = NULL;
    check(weft_full(&a, &one, 1, 1.5, WEFT_FLOAT32, WEFT_DEVICE_CPU), "full");
    check(weft_full(&b, &one, 1, 2.25, WEFT_FLOAT32, WEFT_DEVICE_CPU), "full");
    int modes = have && !off_only ? 3 : 1;
    double *v[3], *d_on = calloc((size_t)rounds, sizeof(double)),
                  *d_full = calloc((size_t)rounds, sizeof(double));
    for (int m = 0; m < 3; m++)
        v[m] = calloc((size_t)rounds, sizeof(double));
    /* warm-up: the thread's allocator cache, the branch predictors */
    add_batch(a, b, calls);
    if (modes > 1)
        profiled_batch(a, b, calls, true);
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < modes; k++) {
            int m = (r + k) % modes; /* each mode in each position equally */
            v[m][r] = m == 0 ? add_batch(a, b, calls) : profiled_batch(a, b, calls, m == 2);
        }
        if (modes > 1) {
            d_on[r] = v[1][r] - v[0][r];
            d_full[r] = v[2][r] - v[0][r];
        }
    }
    weft_tensor *c = NULL;
    double x = 0;
    check(weft_add(&c, a, b), "add");
    check(weft_tensor_item(c, &x), "item");
    weft_tensor_release(c);
    if (x != 3.75) {
        fprintf(stderr, "profiler-bench: add gave %g, expected 3.75\n", x);
        return 1;
    }
    printf("profiler_api %s\n", have ? "yes" : "no");
    printf("calls %ld\nrounds %d\n", calls, rounds);
    printf("add_1elem_off_ns %.2f\n", median(v[0], rounds));
    if (modes > 1) {
        printf("add_1elem_on_ns %.2f\n", median(v[1], rounds));
        printf("add_1elem_on_full_ns %.2f\n", median(v[2], rounds));
        printf("per_op_overhead_ns %.2f\n", median(d_on, rounds));
        printf("per_op_overhead_full_ns %.2f\n", median(d_full, rounds));
    }
    for (int m = 0; m < 3; m++)
        free(v[m]);
    free(d_on);
    free(d_full);
    weft_tensor_release(a);
    weft_tensor_release(b);
    return 0;
}
