/* backends/cpu/parallel.c — the CPU plugin's thread pool.  Workers start on
 * the first parallel call and are joined by cpu__parallel_shutdown (from the
 * plugin's fini), so no thread is left running code that is about to be
 * unmapped.  One job at a time; a job is a range split into equal pieces,
 * a few per thread, claimed by the caller and whichever workers are awake.
 * The size follows the core's weft_get_num_threads: a change is seen at the
 * next parallel region, which joins the old workers and lets the next job
 * start the new number.  The same holds for the binding mode
 * (weft_get_thread_binding): workers are bound as they start.
 *
 * Waiting: a worker that has run out of pieces, and a caller waiting for a
 * worker's last piece, spin a short while (WEFT_SPIN_US, 200 us by default)
 * before sleeping on a condition variable.  Sleeping at once cost a wake-up
 * on every job: on a virtual machine a woken thread's vCPU can take a
 * millisecond to run again, which halved sgemm 256 and the 64 MiB sum in
 * the bench (docs/benchmarks.md).  The spin is bounded, so an idle program
 * costs nothing, and skipped when the pool has more threads than CPUs,
 * where a spinning thread would take the CPU from the one it waits for. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "cpu.h"

typedef void (*range_fn)(int64_t begin, int64_t end, void *ctx);

/* The pool.  `lock` guards everything but `next`; the job fields are written
 * under it before `generation` moves, so a worker that saw the new
 * generation under the lock sees the job. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake; /* workers wait here for a new generation */
    pthread_cond_t done; /* the submitter waits here for active == 0 */
    pthread_t *workers;
    int nworkers;
    _Atomic bool stopping;
    bool started;
    uint64_t spin_ns; /* 0: sleep at once (set as the workers start) */
    /* with binding and a CPU for each thread: the CPU each worker is bound
     * to, and the one the caller ran on at the last job (-1: not tracked);
     * under submit_lock */
    int *worker_cpu;
    int caller_cpu;
    bool shut_down; /* after fini: run everything serially, never restart */
    _Atomic uint64_t generation; /* written under lock, spun on without */
    /* workers inside run_pieces; the submitter waits only for these, never
     * for a worker that has not woken yet: one that wakes late takes part
     * in whatever job is current then (finding nothing left, or the next
     * job), so a job never costs the caller a wake-up round trip */
    _Atomic int active; /* written under lock, spun on without */
    bool waiting; /* the submitter sleeps on `done` for active == 0 */
    range_fn fn;
    void *ctx;
    int64_t end, chunk;
    _Atomic int64_t next; /* start of the next unclaimed piece */
} pool = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
    .caller_cpu = -1,
};

/* Held by the thread whose job the pool runs; a second thread that finds it
 * taken runs its range alone rather than wait. */
static pthread_mutex_t submit_lock = PTHREAD_MUTEX_INITIALIZER;
/* The pool's size: written under submit_lock with no job running, read
 * without it by the fast path, hence atomic. */
static _Atomic int num_threads = 1;
/* The binding mode the pool was started under (guarded like num_threads). */
static _Atomic int bind_mode = WEFT_BIND_AUTO;
/* WEFT_SPIN_US in nanoseconds, read once by cpu__parallel_init. */
static uint64_t spin_limit_ns = 200000;
/* Non-NULL on workers and on a submitter while it runs pieces: nested
 * parallel calls run serially instead of deadlocking on the pool.  A pthread
 * key rather than _Thread_local: LeakSanitizer crashes on exit when live
 * threads hold dynamic TLS of a dlopen'ed library (GCC 12, glibc 2.36). */
static pthread_key_t region_key;
static bool region_key_made;

static bool in_parallel_region(void)
{
    return pthread_getspecific(region_key) != NULL;
}

static void set_parallel_region(bool inside)
{
    pthread_setspecific(region_key, inside ? &region_key : NULL);
}

/* In a forked child: only the thread that forked exists, so the workers,
 * and any job or lock they held, stayed in the parent.  The child starts
 * from an empty pool (its next job starts workers of its own); the locks
 * and condition variables are made afresh, because glibc's still count the
 * parent's sleeping workers as waiters, and a broadcast to them would wait
 * for them forever (found by test_quantized: products in a forked child,
 * which run on this pool through weft_parallel_for).  The worker arrays
 * are freed (glibc's malloc is usable after fork); the threads cannot be
 * joined, there is nothing to join.  Registered with pthread_atfork from
 * this library, so glibc forgets it when the plugin is unloaded. */
static void pool_after_fork_in_child(void)
{
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.wake, NULL);
    pthread_cond_init(&pool.done, NULL);
    pthread_mutex_init(&submit_lock, NULL);
    free(pool.workers);
    pool.workers = NULL;
    free(pool.worker_cpu);
    pool.worker_cpu = NULL;
    pool.nworkers = 0;
    pool.started = false;
    pool.stopping = false;
    pool.waiting = false;
    pool.caller_cpu = -1;
    atomic_store(&pool.active, 0);
    /* a fork from inside a piece: the child's thread is not in a region */
    if (region_key_made)
        set_parallel_region(false);
}

int cpu__parallel_init(void)
{
    num_threads = weft_get_num_threads();
    bind_mode = weft_get_thread_binding();
    /* a whole number of microseconds up to one second; anything else is
     * ignored (an environment variable has nobody to return an error to) */
    const char *spin = getenv("WEFT_SPIN_US");
    if (spin && *spin) {
        char *end;
        long us = strtol(spin, &end, 10);
        if (*end == '\0' && us >= 0 && us <= 1000000)
            spin_limit_ns = (uint64_t)us * 1000;
    }
    pool.shut_down = false;
    if (!region_key_made) {
        if (pthread_key_create(&region_key, NULL) != 0)
            return weft_set_error(WEFT_ENOMEM, "cpu: cannot create the thread pool's key");
        region_key_made = true;
    }
    static bool fork_handler_set; /* once per load of this library */
    if (!fork_handler_set) {
        if (pthread_atfork(NULL, NULL, pool_after_fork_in_child) != 0)
            return weft_set_error(WEFT_ENOMEM, "cpu: cannot register the thread pool's fork handler");
        fork_handler_set = true;
    }
    return 0;
}

int cpu__num_threads(void)
{
    return num_threads;
}

static void run_pieces(void)
{
    for (;;) {
        int64_t begin = atomic_fetch_add_explicit(&pool.next, pool.chunk, memory_order_relaxed);
        if (begin >= pool.end)
            return;
        int64_t end = pool.end - begin > pool.chunk ? begin + pool.chunk : pool.end;
        pool.fn(begin, end, pool.ctx);
    }
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* What the spins wait for: a job after generation g (or the pool
 * stopping), and the workers' last pieces. */
static bool same_generation(uint64_t g)
{
    return atomic_load_explicit(&pool.generation, memory_order_relaxed) == g && !pool.stopping;
}

static bool workers_active(uint64_t unused)
{
    (void)unused;
    return atomic_load_explicit(&pool.active, memory_order_relaxed) > 0;
}

/* Spins while busy(arg) holds, for at most the pool's spin time; the clock
 * is read every 64 rounds only.  The caller decides under the lock
 * afterwards, so giving up early is always safe. */
static void spin_while(bool (*busy)(uint64_t), uint64_t arg)
{
    if (pool.spin_ns == 0)
        return;
    uint64_t start = now_ns();
    for (unsigned k = 1; busy(arg); k++) {
        cpu_relax();
        if (k % 64 == 0 && now_ns() - start > pool.spin_ns)
            return;
    }
}

static void *worker_main(void *arg)
{
    /* the generation current when this worker was made: it joins the jobs
     * posted after it (a worker that sleeps through a job misses nothing: the
     * submitter and the others ran all of its pieces) */
    uint64_t seen = (uint64_t)(uintptr_t)arg;
    set_parallel_region(true);
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        while (!pool.stopping && pool.generation == seen)
            pthread_cond_wait(&pool.wake, &pool.lock);
        if (pool.stopping)
            break;
        seen = pool.generation;
        pool.active++;
        pthread_mutex_unlock(&pool.lock);
        run_pieces();
        pthread_mutex_lock(&pool.lock);
        if (--pool.active == 0 && pool.waiting)
            pthread_cond_signal(&pool.done);
        /* the next job often follows at once: watch for it a little
         * before sleeping (the loop above rechecks under the lock) */
        pthread_mutex_unlock(&pool.lock);
        spin_while(same_generation, seen);
        pthread_mutex_lock(&pool.lock);
    }
    pthread_mutex_unlock(&pool.lock);
    return NULL;
}

/* Binds each worker to a CPU of its own as bind_mode asks (see
 * weft_set_thread_binding).  The CPUs are those the starting thread may run
 * on, taken in order from the one after the CPU it runs on now: the caller,
 * which weft never binds, tends to stay where it is and so keeps a CPU to
 * itself.  A failed pthread_setaffinity_np (a CPU removed from the cpuset
 * meanwhile) leaves that worker unbound, which is only slower. */
static void bind_workers(const cpu_set_t *allowed)
{
    pool.caller_cpu = -1;
    if (bind_mode == WEFT_BIND_NONE || pool.nworkers == 0 || !allowed)
        return;
    int ncpu = CPU_COUNT(allowed);
    if (ncpu < 2 || (bind_mode == WEFT_BIND_AUTO && pool.nworkers + 1 > ncpu))
        return;
    int *cpus = malloc((size_t)ncpu * sizeof *cpus);
    if (!cpus)
        return;
    int n = 0, here = 0, current = sched_getcpu();
    for (int c = 0; c < CPU_SETSIZE && n < ncpu; c++)
        if (CPU_ISSET(c, allowed)) {
            if (c == current)
                here = n;
            cpus[n++] = c;
        }
    /* with a CPU for every thread, workers follow the caller (below) */
    bool track = pool.nworkers + 1 <= n && current >= 0;
    pool.worker_cpu = track ? malloc((size_t)pool.nworkers * sizeof *pool.worker_cpu) : NULL;
    pool.caller_cpu = pool.worker_cpu ? current : -1;
    for (int i = 0; i < pool.nworkers; i++) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[(here + 1 + i) % n], &one);
        pthread_setaffinity_np(pool.workers[i], sizeof one, &one);
        if (pool.worker_cpu)
            pool.worker_cpu[i] = cpus[(here + 1 + i) % n];
    }
    free(cpus);
}

/* The caller is never bound, so the scheduler may move it — after an idle
 * spell, onto the CPU of a bound worker, where the two then share one CPU
 * for the whole job (the row sum after other operators ran at half speed).
 * Before each job: when the caller runs on a worker's CPU, that worker
 * moves to the CPU the caller left, which is free.  One sched_getcpu (a
 * vDSO call) when nothing moved.  Called with submit_lock held. */
static void follow_caller(void)
{
    if (pool.caller_cpu < 0 || !pool.worker_cpu)
        return;
    int now = sched_getcpu();
    if (now < 0 || now == pool.caller_cpu)
        return;
    for (int i = 0; i < pool.nworkers; i++)
        if (pool.worker_cpu[i] == now) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(pool.caller_cpu, &one);
            if (pthread_setaffinity_np(pool.workers[i], sizeof one, &one) == 0)
                pool.worker_cpu[i] = pool.caller_cpu;
            break;
        }
    pool.caller_cpu = now;
}

/* Called with submit_lock held.  Fewer workers than asked for (a failed
 * pthread_create) is not an error: the pool just has fewer hands. */
static void start_workers(void)
{
    pool.started = true;
    int want = num_threads - 1;
    if (want <= 0)
        return;
    /* the CPUs this thread may run on, for the spin and the binding; the
     * spin time is set before any worker exists, so they read it unraced */
    cpu_set_t allowed;
    bool known = sched_getaffinity(0, sizeof allowed, &allowed) == 0;
    pool.spin_ns = known && want + 1 <= CPU_COUNT(&allowed) ? spin_limit_ns : 0;
    pool.workers = calloc((size_t)want, sizeof *pool.workers);
    if (!pool.workers)
        return;
    /* workers must not take the application's signals */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    uintptr_t generation = (uintptr_t)pool.generation;
    for (int i = 0; i < want; i++) {
        if (pthread_create(&pool.workers[i], NULL, worker_main, (void *)generation) != 0)
            break;
        pool.nworkers++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    bind_workers(known ? &allowed : NULL);
}

/* Called with pool.lock held: until no worker is inside run_pieces. */
static void wait_idle(void)
{
    pool.waiting = true;
    while (pool.active > 0)
        pthread_cond_wait(&pool.done, &pool.lock);
    pool.waiting = false;
}

int cpu__parallel_for(int64_t begin, int64_t end, int64_t grain, range_fn fn, void *ctx)
{
    if (end <= begin)
        return 0;
    cpu__parallel_sync();
    int64_t n = end - begin;
    if (grain < 1)
        grain = 1;
    if (n <= grain || num_threads <= 1 || in_parallel_region() ||
        pthread_mutex_trylock(&submit_lock) != 0) {
        fn(begin, end, ctx);
        return 0;
    }
    if (pool.shut_down) {
        /* a kernel still running while the plugin is unloaded: no new
         * threads may run code that is about to be unmapped */
        pthread_mutex_unlock(&submit_lock);
        fn(begin, end, ctx);
        return 0;
    }
    if (!pool.started)
        start_workers();
    follow_caller();
    /* a few pieces per thread, none under the grain: a worker that is
     * descheduled while it holds a piece (a machine with more runnable
     * threads than cores) then delays the caller by a small piece only,
     * while the caller takes the pieces it has not reached */
    int64_t pieces = (n + grain - 1) / grain;
    if (pieces > 4 * ((int64_t)pool.nworkers + 1))
        pieces = 4 * ((int64_t)pool.nworkers + 1);
    if (pieces <= 1) {
        pthread_mutex_unlock(&submit_lock);
        fn(begin, end, ctx);
        return 0;
    }
    pthread_mutex_lock(&pool.lock);
    /* a worker that woke late for the previous job may still be reading
     * its fields: they change only once it has left run_pieces */
    wait_idle();
    pool.fn = fn;
    pool.ctx = ctx;
    pool.end = end;
    pool.chunk = (n + pieces - 1) / pieces;
    atomic_store_explicit(&pool.next, begin, memory_order_relaxed);
    pool.generation++;
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);

    set_parallel_region(true);
    run_pieces();
    set_parallel_region(false);

    /* every piece is claimed; wait only for those still running on a
     * worker (their results are the caller's): a piece is short, so spin
     * first (wait_idle decides under the lock) */
    spin_while(workers_active, 0);
    pthread_mutex_lock(&pool.lock);
    wait_idle();
    pthread_mutex_unlock(&pool.lock);
    pthread_mutex_unlock(&submit_lock);
    return 0;
}

/* Called with submit_lock held, so no job is running: every worker is
 * waiting for a new generation and sees `stopping` at once. */
static void stop_workers(void)
{
    if (!pool.started)
        return;
    pthread_mutex_lock(&pool.lock);
    pool.stopping = true;
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    for (int i = 0; i < pool.nworkers; i++)
        pthread_join(pool.workers[i], NULL);
    free(pool.workers);
    pool.workers = NULL;
    free(pool.worker_cpu);
    pool.worker_cpu = NULL;
    pool.caller_cpu = -1;
    pool.nworkers = 0;
    pool.started = false;
    pool.stopping = false;
}

void cpu__parallel_sync(void)
{
    int want = weft_get_num_threads();
    int mode = weft_get_thread_binding();
    /* a worker (or a submitter running its own pieces) must not join the
     * pool it belongs to; the next top-level call resizes */
    if ((want == num_threads && mode == bind_mode) || in_parallel_region())
        return;
    /* blocking: waits for another thread's job to end, so no worker is
     * joined in the middle of one */
    pthread_mutex_lock(&submit_lock);
    want = weft_get_num_threads();
    mode = weft_get_thread_binding();
    if ((want != num_threads || mode != bind_mode) && !pool.shut_down) {
        stop_workers();
        /* the next job starts want - 1 workers, bound as mode says */
        bind_mode = mode;
        if (want != num_threads) {
            num_threads = want;
            cpu__blas_init(want);
        }
    }
    pthread_mutex_unlock(&submit_lock);
}

void cpu__parallel_shutdown(void)
{
    pthread_mutex_lock(&submit_lock);
    pool.shut_down = true;
    stop_workers();
    if (region_key_made) {
        pthread_key_delete(region_key);
        region_key_made = false;
    }
    pthread_mutex_unlock(&submit_lock);
}
