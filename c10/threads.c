/* c10/threads.c — the thread count that backends use for their intra-op
 * parallelism.  The core only holds the number; a backend reads it at each
 * parallel region and resizes its own pool, so the core starts no threads
 * and depends on no backend. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "c10/core.h"

/* 0 until first read; then the count, changed only by weft_set_num_threads.
 * An atomic int rather than a lock: backends read it on every parallel
 * region, which must stay a plain load. */
static _Atomic int num_threads;
static pthread_once_t initial_once = PTHREAD_ONCE_INIT;

/* WEFT_NUM_THREADS when it is a whole number in [1, WEFT_MAX_THREADS]; an
 * unusable value is ignored (an environment variable has nobody to return an
 * error to), and the CPUs this process may run on are used instead. */
static int initial_count(void)
{
    const char *s = getenv("WEFT_NUM_THREADS");
    if (s && *s) {
        char *end;
        errno = 0;
        long n = strtol(s, &end, 10);
        if (errno == 0 && *end == '\0' && n >= 1)
            return n > WEFT_MAX_THREADS ? WEFT_MAX_THREADS : (int)n;
    }
    /* fewer than the online CPUs in a container or under taskset */
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set) > WEFT_MAX_THREADS ? WEFT_MAX_THREADS : CPU_COUNT(&set);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online >= 1 ? (int)(online > WEFT_MAX_THREADS ? WEFT_MAX_THREADS : online) : 1;
}

static void set_initial(void)
{
    int expected = 0;
    /* a weft_set_num_threads that came first wins over the environment */
    atomic_compare_exchange_strong(&num_threads, &expected, initial_count());
}

WEFT_API int weft_set_num_threads(int n)
{
    if (n < 1 || n > WEFT_MAX_THREADS)
        return wf__errorf(WEFT_EINVAL, "weft_set_num_threads: %d threads asked for, the count must be in [1, %d]",
                              n, WEFT_MAX_THREADS);
    pthread_once(&initial_once, set_initial);
    atomic_store(&num_threads, n);
    return 0;
}

WEFT_API int weft_get_num_threads(void)
{
    int n = atomic_load_explicit(&num_threads, memory_order_relaxed);
    if (n > 0)
        return n;
    pthread_once(&initial_once, set_initial);
    return atomic_load(&num_threads);
}

/* -1 until first read; then a weft_thread_binding. */
static _Atomic int binding = -1;

/* WEFT_THREAD_BIND when it names a mode, else AUTO (ignored like an
 * unusable WEFT_NUM_THREADS: there is nobody to return an error to). */
static int initial_binding(void)
{
    const char *s = getenv("WEFT_THREAD_BIND");
    if (s && strcmp(s, "none") == 0)
        return WEFT_BIND_NONE;
    if (s && strcmp(s, "spread") == 0)
        return WEFT_BIND_SPREAD;
    return WEFT_BIND_AUTO;
}

WEFT_API int weft_set_thread_binding(weft_thread_binding mode)
{
    if (mode != WEFT_BIND_AUTO && mode != WEFT_BIND_NONE && mode != WEFT_BIND_SPREAD)
        return wf__errorf(WEFT_EINVAL,
                          "weft_set_thread_binding: mode %d is not WEFT_BIND_AUTO, WEFT_BIND_NONE or WEFT_BIND_SPREAD",
                          (int)mode);
    atomic_store(&binding, (int)mode);
    return 0;
}

WEFT_API weft_thread_binding weft_get_thread_binding(void)
{
    int mode = atomic_load_explicit(&binding, memory_order_relaxed);
    if (mode >= 0)
        return (weft_thread_binding)mode;
    /* a weft_set_thread_binding that came first wins over the environment */
    int expected = -1;
    atomic_compare_exchange_strong(&binding, &expected, initial_binding());
    return (weft_thread_binding)atomic_load(&binding);
}
