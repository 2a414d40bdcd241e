/* tests/test_threads.c — the thread count API (weft_set_num_threads /
 * weft_get_num_threads): a set of operators large enough to use the CPU
 * pool gives the same bytes with 1, 2 and 3 threads set at run time; the
 * pool really grows and shrinks (counted in /proc/self/task); bad counts are
 * refused and change nothing; WEFT_NUM_THREADS is the initial value (the
 * program runs itself with it set); and changing the count from one thread
 * while another runs operators is safe and changes no result.  The binding
 * mode (weft_set_thread_binding) places the pool's workers on CPUs of their
 * own, read back from each thread's Cpus_allowed_list, and leaves the
 * calling thread alone. */
#define _GNU_SOURCE
#include <dirent.h>
#include <sched.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <weft/ops.h>
#include <weft/plugin.h>
#include <weft/weft.h>

#include "tests/dir_entries.h"
#include "tests/tap.h"
#include "tests/keep.h"

#define INTS(...) ((const int64_t[]){__VA_ARGS__})

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* The bytes of t (made contiguous) folded into h; a NULL t (a failed
 * operator) folds in a marker so it cannot match a success. */
static uint64_t fold(uint64_t h, const weft_tensor *t)
{
    if (!t)
        return fnv(h, "missing", 7);
    weft_tensor *c = NULL;
    if (weft_contiguous(&c, t) != 0)
        return fnv(h, "missing", 7);
    h = fnv(h, weft_tensor_data_ptr(c),
            (size_t)weft_tensor_numel(c) * weft_dtype_size(weft_tensor_dtype(c)));
    weft_tensor_release(c);
    return h;
}

static weft_tensor *random_of(const int64_t *sizes, int nd, weft_dtype dt, uint64_t seed)
{
    weft_generator *g = NULL;
    weft_tensor *t = NULL;
    if (weft_generator_create(&g, seed) == 0)
        weft_rand(&t, sizes, nd, dt, WEFT_DEVICE_CPU, g);
    weft_generator_destroy(g);
    return keep(t);
}

enum { N_RESULTS = 14 };

/* Runs every operator of the set; digest[i] is result i's hash. */
static void run_set(uint64_t digest[N_RESULTS])
{
    weft_tensor *x = random_of(INTS(512, 1024), 2, WEFT_FLOAT32, 1);
    weft_tensor *a = random_of(INTS(256, 320), 2, WEFT_FLOAT32, 2);
    weft_tensor *b = random_of(INTS(320, 192), 2, WEFT_FLOAT32, 3);
    weft_tensor *ad = random_of(INTS(96, 128), 2, WEFT_FLOAT64, 4);
    weft_tensor *bd = random_of(INTS(128, 80), 2, WEFT_FLOAT64, 5);
    weft_tensor *img = random_of(INTS(8, 3, 40, 40), 4, WEFT_FLOAT32, 6);
    weft_tensor *w = random_of(INTS(16, 3, 3, 3), 4, WEFT_FLOAT32, 7);
    weft_tensor *bias = random_of(INTS(16), 1, WEFT_FLOAT32, 8);
    weft_tensor *src = random_of(INTS(4096, 256), 2, WEFT_FLOAT32, 9);
    weft_tensor *base = random_of(INTS(1024, 256), 2, WEFT_FLOAT32, 10);
    weft_tensor *idx = NULL, *r[N_RESULTS] = {0};
    weft_generator *g = NULL;
    weft_generator_create(&g, 11);
    weft_randint(&idx, 0, 1024, INTS(4096), 1, WEFT_INT64, WEFT_DEVICE_CPU, g);
    keep(idx);

    weft_sum(&r[0], x, NULL, 0, false);
    weft_sum(&r[1], x, INTS(1), 1, false);
    weft_sum(&r[2], x, INTS(0), 1, true);
    weft_softmax(&r[3], x, -1);
    weft_mm(&r[4], a, b);
    weft_mm(&r[5], ad, bd);
    weft_conv2d(&r[6], img, w, bias, INTS(1, 1), 2, INTS(1, 1), 2, INTS(1, 1), 2, 1);
    weft_cumsum(&r[7], x, 1);
    weft_cumsum(&r[8], x, 0);
    weft_sort(&r[9], &r[10], x, -1, false);
    weft_generator_set_seed(g, 12);
    weft_dropout_ex(&r[11], x, 0.3, true, g);
    if (weft_clone(&r[12], x) == 0 && weft_uniform_ex_(r[12], -2.0, 3.0, g) != 0) {
        weft_tensor_release(r[12]);
        r[12] = NULL;
    }
    weft_index_add_ex(&r[13], base, 0, idx, src, 0.5);
    weft_generator_destroy(g);
    for (int i = 0; i < N_RESULTS; i++) {
        digest[i] = fold(0xcbf29ce484222325ull, r[i]);
        weft_tensor_release(r[i]);
    }
    drop_all();
}

static const char *const result_names[N_RESULTS] = {
    "sum (all)", "sum (dim 1)", "sum (dim 0, keepdim)", "softmax", "mm float32", "mm float64",
    "conv2d", "cumsum dim 1", "cumsum dim 0", "sort values", "sort indices",
    "dropout (seeded)", "uniform_ (seeded)", "index_add",
};

/* Threads of this process, the caller included. */
static int task_count(void)
{
    return dir_entries("/proc/self/task");
}

static void test_same_results(void)
{
    uint64_t one[N_RESULTS], two[N_RESULTS], three[N_RESULTS], again[N_RESULTS];
    is_int(weft_set_num_threads(1), 0, "set_num_threads(1)");
    is_int(weft_get_num_threads(), 1, "get_num_threads() is 1");
    run_set(one);
    is_int(weft_set_num_threads(2), 0, "set_num_threads(2)");
    is_int(weft_get_num_threads(), 2, "get_num_threads() is 2");
    run_set(two);
    is_int(weft_set_num_threads(3), 0, "set_num_threads(3)");
    run_set(three);
    is_int(weft_set_num_threads(1), 0, "back to 1");
    run_set(again);
    for (int i = 0; i < N_RESULTS; i++) {
        ok(one[i] == two[i] && one[i] == three[i] && one[i] == again[i],
           "%s: the same bytes with 1, 2, 3 and again 1 threads (%016llx %016llx %016llx)",
           result_names[i], (unsigned long long)one[i], (unsigned long long)two[i],
           (unsigned long long)three[i]);
    }
    /* results that failed would all hash to the same marker: make sure each
     * operator really produced something distinct */
    bool distinct = true;
    for (int i = 0; i < N_RESULTS; i++)
        for (int j = i + 1; j < N_RESULTS; j++)
            distinct = distinct && one[i] != one[j];
    ok(distinct, "every operator of the set produced a result of its own");
}

static void test_pool_resizes(void)
{
    weft_tensor *x = random_of(INTS(1 << 20), 1, WEFT_FLOAT32, 20);
    weft_tensor *y = NULL;
    weft_set_num_threads(1);
    weft_exp(&y, x);
    weft_tensor_release(y);
    int with_one = task_count();
    weft_set_num_threads(3);
    weft_exp(&y, x);
    weft_tensor_release(y);
    int with_three = task_count();
    weft_set_num_threads(1);
    weft_exp(&y, x);
    weft_tensor_release(y);
    int back_to_one = task_count();
    /* OpenBLAS may add threads of its own when its count grows and keeps
     * them, so only the pool's two workers are counted exactly */
    ok(with_three - back_to_one == 2 && with_three - with_one >= 2,
       "3 threads start two workers, going back to 1 joins them (tasks: %d, %d, %d)", with_one,
       with_three, back_to_one);
    drop_all();
}

/* OpenBLAS stays single-threaded whatever the count (its idle threads spin;
 * large products are split over weft's own pool by shape instead, so
 * results do not depend on the count): asked of the loaded library
 * (RTLD_NOLOAD: never a second copy) */
static void test_openblas_single_threaded(void)
{
    void *blas = dlopen("libopenblas.so.0", RTLD_LAZY | RTLD_NOLOAD);
    int (*get)(void) = blas ? (int (*)(void))dlsym(blas, "openblas_get_num_threads") : NULL;
    if (!get) {
        skip(1, "the CPU plugin does not use OpenBLAS here");
        if (blas)
            dlclose(blas);
        return;
    }
    weft_tensor *a = random_of(INTS(64, 64), 2, WEFT_FLOAT32, 40), *y = NULL;
    weft_set_num_threads(3);
    weft_mm(&y, a, a);
    weft_tensor_release(y);
    int three = get();
    weft_set_num_threads(2);
    weft_addmm(&y, a, a, a);
    weft_tensor_release(y);
    int two = get();
    ok(three == 1 && two == 1,
       "OpenBLAS stays single-threaded: %d after 3 threads and mm, %d after 2 and addmm", three,
       two);
    dlclose(blas);
    drop_all();
}

static void test_bad_counts(void)
{
    weft_set_num_threads(2);
    int bad[] = {0, -1, -2147483647 - 1, WEFT_MAX_THREADS + 1};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = weft_set_num_threads(bad[i]);
        is_int(rc, WEFT_EINVAL, "set_num_threads(%d) is WEFT_EINVAL", bad[i]);
        ok(strstr(weft_last_error(), "threads") != NULL, "  and the message says why: %s",
           weft_last_error());
        is_int(weft_get_num_threads(), 2, "  and the count stays 2");
    }
    is_int(weft_set_num_threads(WEFT_MAX_THREADS), 0, "WEFT_MAX_THREADS is accepted");
    is_int(weft_get_num_threads(), WEFT_MAX_THREADS, "  and read back");
    weft_set_num_threads(2);
}

/* One thread changes the count over and over while the main thread runs
 * operators: no result may change and nothing may hang. */
static _Atomic bool stop_changing;

/* What a fresh run of this program prints with `flag` (--print-count or
 * --print-binding) when the environment variable `var` is `value`; -1 when
 * it could not be run. */
static int initial_value_with(const char *var, const char *value, const char *flag)
{
    char cmd[4300], self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        return -1;
    self[len] = '\0';
    snprintf(cmd, sizeof cmd, "%s=%s '%s' %s", var, value, self, flag);
    FILE *f = popen(cmd, "r");
    int got = -1;
    if (f) {
        if (fscanf(f, "%d", &got) != 1)
            got = -1;
        pclose(f);
    }
    return got;
}

static int initial_count_with(const char *value)
{
    return initial_value_with("WEFT_NUM_THREADS", value, "--print-count");
}

static int initial_binding_with(const char *value)
{
    return initial_value_with("WEFT_THREAD_BIND", value, "--print-binding");
}

static void *change_counts(void *arg)
{
    (void)arg;
    for (int i = 0; !stop_changing; i++)
        weft_set_num_threads(1 + i % 4);
    return NULL;
}

static void test_concurrent_changes(void)
{
    weft_tensor *x = random_of(INTS(256, 1024), 2, WEFT_FLOAT32, 30);
    weft_tensor *want = NULL;
    weft_set_num_threads(1);
    weft_cumsum(&want, x, 1);
    keep(want);
    uint64_t h = fold(0, want);
    pthread_t th;
    stop_changing = false;
    bool started = pthread_create(&th, NULL, change_counts, NULL) == 0;
    bool same = true;
    for (int i = 0; i < 40 && started; i++) {
        weft_tensor *y = NULL;
        weft_cumsum(&y, x, 1);
        same = same && fold(0, y) == h;
        weft_tensor_release(y);
    }
    stop_changing = true;
    if (started)
        pthread_join(th, NULL);
    ok(started && same, "operators give the same bytes while another thread changes the count");
    weft_set_num_threads(2);
    drop_all();
}

/* The CPUs task `tid` of this process may run on, as a set; false when its
 * status cannot be read. */
static bool task_cpus(const char *tid, cpu_set_t *set)
{
    char path[300], line[4096];
    snprintf(path, sizeof path, "/proc/self/task/%s/status", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool found = false;
    CPU_ZERO(set);
    while (!found && fgets(line, sizeof line, f)) {
        if (strncmp(line, "Cpus_allowed_list:", 18) != 0)
            continue;
        found = true;
        /* "0-3,8,10-11" */
        for (char *p = line + 18; *p;) {
            char *end;
            long lo = strtol(p, &end, 10), hi = lo;
            if (end == p) {
                p++;
                continue;
            }
            if (*end == '-')
                hi = strtol(end + 1, &end, 10);
            for (long c = lo; c <= hi && c < CPU_SETSIZE; c++)
                CPU_SET((int)c, set);
            p = end;
        }
    }
    fclose(f);
    return found;
}

/* The threads other than the caller that are bound to a single CPU: how
 * many, and the set of their CPUs in *cpus.  The caller's own set in
 * *caller. */
static int bound_threads(cpu_set_t *cpus, cpu_set_t *caller)
{
    char self[32];
    snprintf(self, sizeof self, "%d", (int)gettid());
    CPU_ZERO(cpus);
    task_cpus(self, caller);
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        cpu_set_t set;
        if (e->d_name[0] == '.' || !strcmp(e->d_name, self) || !task_cpus(e->d_name, &set) ||
            CPU_COUNT(&set) != 1)
            continue;
        n++;
        CPU_OR(cpus, cpus, &set);
    }
    closedir(d);
    return n;
}

/* Runs one operator big enough to use the pool with `threads` threads and
 * binding `mode`; returns the number of single-CPU threads besides the
 * caller, their CPUs in *cpus, the caller's set in *caller. */
static int bound_after(int threads, weft_thread_binding mode, cpu_set_t *cpus, cpu_set_t *caller)
{
    weft_tensor *x = random_of(INTS(1 << 20), 1, WEFT_FLOAT32, 50), *y = NULL;
    weft_set_num_threads(threads);
    weft_set_thread_binding(mode);
    weft_exp(&y, x);
    weft_tensor_release(y);
    return bound_threads(cpus, caller);
}

static void test_binding(void)
{
    weft_thread_binding before = weft_get_thread_binding();
    ok(before == WEFT_BIND_AUTO || before == WEFT_BIND_NONE || before == WEFT_BIND_SPREAD,
       "get_thread_binding() names a mode (%d)", (int)before);
    weft_thread_binding modes[] = {WEFT_BIND_NONE, WEFT_BIND_SPREAD, WEFT_BIND_AUTO};
    for (int i = 0; i < 3; i++) {
        is_int(weft_set_thread_binding(modes[i]), 0, "set_thread_binding(%d)", (int)modes[i]);
        is_int((int)weft_get_thread_binding(), (int)modes[i], "  and read back");
    }
    int bad[] = {-1, 3, 1000};
    for (int i = 0; i < 3; i++) {
        is_int(weft_set_thread_binding((weft_thread_binding)bad[i]), WEFT_EINVAL,
               "set_thread_binding(%d) is WEFT_EINVAL", bad[i]);
        ok(strstr(weft_last_error(), "weft_set_thread_binding") && strstr(weft_last_error(), "mode"),
           "  and the message says why: %s", weft_last_error());
        is_int((int)weft_get_thread_binding(), WEFT_BIND_AUTO, "  and the mode stays AUTO");
    }

    cpu_set_t allowed;
    int ncpu = sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : 0;
    if (ncpu < 2) {
        skip(9, "this process may run on %d CPU(s): nothing to spread over", ncpu);
        weft_set_num_threads(2);
        return;
    }
    cpu_set_t cpus, caller, within;
    int n = bound_after(3, WEFT_BIND_SPREAD, &cpus, &caller);
    CPU_AND(&within, &cpus, &allowed);
    is_int(n, 2, "SPREAD, 3 threads: both workers are bound to one CPU each");
    is_int(CPU_COUNT(&cpus), 2, "  to two different CPUs (the process may use %d)", ncpu);
    ok(CPU_EQUAL(&within, &cpus), "  both among the CPUs the process may use");
    ok(CPU_EQUAL(&caller, &allowed), "  and the calling thread is left alone (%d CPUs)",
       CPU_COUNT(&caller));

    n = bound_after(3, WEFT_BIND_NONE, &cpus, &caller);
    is_int(n, 0, "NONE: changing the mode restarts the workers unbound");

    n = bound_after(2, WEFT_BIND_AUTO, &cpus, &caller);
    is_int(n, 1, "AUTO, 2 threads on %d CPUs: the worker is bound", ncpu);
    n = bound_after(ncpu + 1, WEFT_BIND_AUTO, &cpus, &caller);
    is_int(n, 0, "AUTO, %d threads on %d CPUs: an oversubscribed pool stays unbound", ncpu + 1,
           ncpu);
    n = bound_after(2, WEFT_BIND_SPREAD, &cpus, &caller);
    ok(n == 1 && CPU_EQUAL(&caller, &allowed),
       "SPREAD again with 2 threads: one bound worker (%d), the caller untouched", n);

    /* the caller moved onto the worker's CPU (here by the test itself;
     * usually by the scheduler after an idle spell): at the next parallel
     * operator the worker moves to another CPU rather than share it */
    int worker_at = -1;
    for (int c = 0; c < CPU_SETSIZE && worker_at < 0; c++)
        if (CPU_ISSET(c, &cpus))
            worker_at = c;
    cpu_set_t onto;
    CPU_ZERO(&onto);
    CPU_SET(worker_at, &onto);
    bool moved = worker_at >= 0 && sched_setaffinity(0, sizeof onto, &onto) == 0;
    weft_tensor *x = random_of(INTS(1 << 20), 1, WEFT_FLOAT32, 51), *y = NULL;
    weft_exp(&y, x);
    weft_tensor_release(y);
    cpu_set_t now_at, me;
    n = bound_threads(&now_at, &me);
    /* bound_threads counts single-CPU threads besides the caller */
    ok(moved && n == 1 && !CPU_ISSET(worker_at, &now_at),
       "a caller moved onto its worker's CPU %d: the worker moves away (%d bound, CPU %d "
       "still taken: %s)", worker_at, n, worker_at, CPU_ISSET(worker_at, &now_at) ? "yes" : "no");
    sched_setaffinity(0, sizeof allowed, &allowed);
    weft_set_thread_binding(WEFT_BIND_AUTO);
    weft_set_num_threads(2);
    drop_all();
}


/* ------------------------------------------ weft_parallel_for (plugins' loops) */

enum { PF_N = 4096 };
typedef struct pf_state {
    _Atomic int hits[PF_N];
    _Atomic int other_thread; /* a piece ran on a thread other than the caller */
    pthread_t caller;
    _Atomic int nested_elsewhere; /* a nested loop's piece left its thread */
    int nest;
} pf_state;

static void pf_nested_piece(int64_t b, int64_t e, void *ctx)
{
    pthread_t *self = ctx;
    (void)b, (void)e;
    if (!pthread_equal(*self, pthread_self()))
        abort(); /* reported below as a crash, never silently */
}

static void pf_piece(int64_t b, int64_t e, void *ctx)
{
    pf_state *st = ctx;
    bool on_caller = pthread_equal(st->caller, pthread_self());
    if (!on_caller)
        atomic_store(&st->other_thread, 1);
    for (int64_t i = b; i < e; i++)
        atomic_fetch_add(&st->hits[i], 1);
    if (st->nest) {
        pthread_t self = pthread_self();
        weft_parallel_for(0, 64, 1, pf_nested_piece, &self);
    }
    /* the caller's first piece waits (up to 5 s) for a worker to start
     * one: on a loaded machine the worker may be scheduled late, and the
     * caller would otherwise take every piece itself */
    if (on_caller && b == 0)
        for (int w = 0; w < 5000 && !atomic_load(&st->other_thread); w++)
            usleep(1000);
}

static int pf_run(pf_state *st, int64_t n, int64_t grain, int nest)
{
    memset(st, 0, sizeof *st);
    st->caller = pthread_self();
    st->nest = nest;
    return weft_parallel_for(0, n, grain, pf_piece, st);
}

static bool pf_each_once(const pf_state *st, int64_t n)
{
    for (int64_t i = 0; i < PF_N; i++)
        if (atomic_load(&st->hits[i]) != (i < n ? 1 : 0))
            return false;
    return true;
}

static void noop_piece(int64_t b, int64_t e, void *ctx)
{
    (void)b, (void)e, (void)ctx;
}

/* Before any plugin: no pool is registered, so the loop runs whole on the
 * calling thread. */
static void test_parallel_for_without_pool(void)
{
    static pf_state st;
    weft_set_num_threads(2);
    is_int(pf_run(&st, PF_N, 1, 0), 0, "parallel_for without a pool: succeeds");
    ok(pf_each_once(&st, PF_N) && !atomic_load(&st.other_thread),
       "parallel_for without a pool: every index once, all on the calling thread");
    is_int(weft_parallel_for(0, 10, 1, NULL, NULL), WEFT_EINVAL, "parallel_for: a NULL function is refused");
    ok(strstr(weft_last_error(), "NULL function") != NULL, "parallel_for: the message says what (%s)",
       weft_last_error());
    is_int(pf_run(&st, 0, 1, 0), 0, "parallel_for over an empty range: succeeds");
    ok(pf_each_once(&st, 0), "parallel_for over an empty range: runs nothing");
    is_int(weft_parallel_for(5, 3, 1, noop_piece, NULL), 0, "parallel_for with end < begin: nothing, no error");
}

/* With the CPU plugin loaded: its pool is the process's. */
static void test_parallel_for_on_pool(void)
{
    static pf_state st;
    weft_set_num_threads(2);
    is_int(pf_run(&st, PF_N, 1, 0), 0, "parallel_for on the CPU pool: succeeds");
    ok(pf_each_once(&st, PF_N), "parallel_for on the CPU pool: every index exactly once");
    ok(atomic_load(&st.other_thread), "parallel_for on the CPU pool: a piece ran on a pool worker");
    is_int(pf_run(&st, 1000, 1, 1), 0, "parallel_for with a loop inside each piece: succeeds");
    ok(pf_each_once(&st, 1000), "the nested loops ran on their pieces' threads, the outer one covered all");
    weft_set_num_threads(1);
    is_int(pf_run(&st, PF_N, 1, 0), 0, "parallel_for at 1 thread: succeeds");
    ok(pf_each_once(&st, PF_N) && !atomic_load(&st.other_thread),
       "parallel_for at 1 thread: all on the calling thread");
    weft_set_num_threads(2);

    /* one pool per process: a second is refused, naming the holder */
    weft_registrar *reg = NULL;
    weft_registration *h = (weft_registration *)&reg; /* must be cleared */
    ok(weft_registrar_create(&reg, "second-pool") == 0, "a registrar for a second pool");
    is_int(weft_register_parallel_for(reg, (weft_parallel_for_fn)weft_parallel_for, &h), WEFT_EEXIST,
           "a second pool is refused");
    ok(h == NULL && strstr(weft_last_error(), "cpu") && strstr(weft_last_error(), "second-pool"),
       "the message names both plugins (%s)", weft_last_error());
    is_int(weft_register_parallel_for(reg, NULL, NULL), WEFT_EINVAL, "a NULL pool function is refused");
    is_int(weft_register_parallel_for(NULL, (weft_parallel_for_fn)weft_parallel_for, NULL), WEFT_EINVAL,
           "a NULL registrar is refused");
    weft_registrar_destroy(reg);
    /* still the CPU pool's */
    is_int(pf_run(&st, PF_N, 1, 0), 0, "after the refusals the loop still runs");
    ok(pf_each_once(&st, PF_N) && atomic_load(&st.other_thread), "and still on the CPU pool");
}

/* Host copies large enough to run in pieces on the pool (the core's
 * strided copy: contiguous() of a permuted tensor, a converting copy),
 * checked element by element at 3 threads: one plane cut into bands of
 * rows (a 2-D transpose whose rows are not a multiple of the tile), many
 * planes (a channels-last uint8 tensor made contiguous), a converting copy
 * of a transposed view, a contiguous tensor converted (one row cut into
 * runs), and a destination that stores elements twice
 * (expanded: stays on one thread, every element the last row written). */
static void test_parallel_copies(void)
{
    weft_set_num_threads(3);
    weft_tensor *x = random_of(INTS(700, 900), 2, WEFT_FLOAT32, 21), *xt = NULL, *c = NULL,
                *d = NULL;
    weft_transpose(&xt, x, 0, 1);
    is_int(weft_contiguous(&c, xt), 0, "contiguous() of a 900 x 700 transposed view at 3 threads");
    is_int(weft_to_dtype(&d, xt, WEFT_FLOAT64), 0, "and its float64 copy");
    const float *xv = weft_tensor_data_ptr(x), *cv = c ? weft_tensor_data_ptr(c) : NULL;
    const double *dv = d ? weft_tensor_data_ptr(d) : NULL;
    int64_t bad = cv && dv ? 0 : -1;
    for (int64_t i = 0; bad >= 0 && i < 900; i++)
        for (int64_t j = 0; j < 700; j++)
            bad += cv[i * 700 + j] != xv[j * 900 + i] || dv[i * 700 + j] != (double)xv[j * 900 + i];
    is_int(bad, 0, "  every element where the transpose puts it, in both");
    weft_tensor_release(xt), weft_tensor_release(c), weft_tensor_release(d);

    /* (37, 24, 19, 23) uint8 stored channels-last, made contiguous */
    weft_tensor *u = NULL, *perm = NULL, *uc = NULL;
    weft_generator *g = NULL;
    weft_generator_create(&g, 22);
    weft_randint(&u, 0, 256, INTS(37, 19, 23, 24), 4, WEFT_UINT8, WEFT_DEVICE_CPU, g);
    weft_generator_destroy(g);
    weft_permute(&perm, u, INTS(0, 3, 1, 2), 4);
    is_int(weft_contiguous(&uc, perm), 0, "contiguous() of a channels-last (37, 24, 19, 23) uint8");
    const uint8_t *uv = u ? weft_tensor_data_ptr(u) : NULL, *ucv = uc ? weft_tensor_data_ptr(uc) : NULL;
    bad = uv && ucv ? 0 : -1;
    for (int64_t n = 0; bad >= 0 && n < 37; n++)
        for (int64_t ch = 0; ch < 24; ch++)
            for (int64_t h = 0; h < 19; h++)
                for (int64_t w = 0; w < 23; w++)
                    bad += ucv[((n * 24 + ch) * 19 + h) * 23 + w] !=
                           uv[((n * 19 + h) * 23 + w) * 24 + ch];
    is_int(bad, 0, "  every element in NCHW order");
    weft_tensor_release(u), weft_tensor_release(perm), weft_tensor_release(uc);

    /* a contiguous tensor converted to another dtype: one row of values
     * (merged dims), cut into runs */
    weft_tensor *v = random_of(INTS(3, 100003), 2, WEFT_FLOAT32, 24), *v64 = NULL, *vi = NULL;
    is_int(weft_to_dtype(&v64, v, WEFT_FLOAT64) | weft_to_dtype(&vi, v, WEFT_INT32), 0,
           "a (3, 100003) float32 tensor to float64 and int32 at 3 threads");
    const float *vv = weft_tensor_data_ptr(v);
    const double *v64v = v64 ? weft_tensor_data_ptr(v64) : NULL;
    const int32_t *viv = vi ? weft_tensor_data_ptr(vi) : NULL;
    bad = v64v && viv ? 0 : -1;
    for (int64_t i = 0; bad >= 0 && i < 300009; i++)
        bad += v64v[i] != (double)vv[i] || viv[i] != (int32_t)vv[i];
    is_int(bad, 0, "  every value converted in place");
    weft_tensor_release(v64), weft_tensor_release(vi);

    /* a (300,) row expanded to (1000, 300) as the destination: the rows of
     * the source are written in order onto the same 300 elements */
    weft_tensor *row = NULL, *ex = NULL;
    weft_zeros(&row, INTS(300), 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    weft_tensor *src = random_of(INTS(1000, 300), 2, WEFT_FLOAT32, 23);
    weft_expand(&ex, row, INTS(1000, 300), 2);
    int rc = ex ? weft_copy_(ex, src) : -1;
    if (rc == 0) {
        const float *rv = weft_tensor_data_ptr(row), *sv = weft_tensor_data_ptr(src);
        bad = 0;
        for (int64_t j = 0; j < 300; j++)
            bad += rv[j] != sv[999 * 300 + j];
        is_int(bad, 0, "copy_ into an expanded destination: each element the last row's, as "
                       "on one thread");
    } else {
        ok(strstr(weft_last_error(), "copy_") != NULL,
           "copy_ into an expanded destination is refused by name: %s", weft_last_error());
    }
    weft_tensor_release(row), weft_tensor_release(ex);
    weft_set_num_threads(2);
    drop_all();
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--print-count")) {
        printf("%d\n", weft_get_num_threads());
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "--print-binding")) {
        printf("%d\n", (int)weft_get_thread_binding());
        return 0;
    }
    test_parallel_for_without_pool();
    if (weft_load_default_plugins() < 0) {
        printf("1..0 # SKIP no CPU plugin: %s\n", weft_last_error());
        return 0;
    }
    test_parallel_for_on_pool();
    test_same_results();
    test_parallel_copies();
    test_pool_resizes();
    test_openblas_single_threaded();
    test_bad_counts();
    test_concurrent_changes();
    test_binding();

    /* the initial value comes from WEFT_NUM_THREADS (and a bad value is
     * ignored rather than taken) */
    is_int(initial_count_with("5"), 5, "WEFT_NUM_THREADS=5 is the initial count");
    int ignored = initial_count_with("zero");
    ok(ignored >= 1, "WEFT_NUM_THREADS=zero is ignored: the count is the CPUs (%d)", ignored);
    is_int(initial_binding_with("none"), WEFT_BIND_NONE, "WEFT_THREAD_BIND=none is the initial mode");
    is_int(initial_binding_with("spread"), WEFT_BIND_SPREAD, "WEFT_THREAD_BIND=spread too");
    is_int(initial_binding_with("sideways"), WEFT_BIND_AUTO,
           "WEFT_THREAD_BIND=sideways is ignored: the mode is AUTO");
    printf("1..%d\n", tap_count_);
    return tap_failed_ ? 1 : 0;
}
