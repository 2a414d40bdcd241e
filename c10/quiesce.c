/* c10/quiesce.c — waiting for threads that may be running a plugin's
 * code (see quiesce.h).  Readers only store to their own counter; the cost
 * is all on the unloader's side: a process-wide memory barrier
 * (membarrier(2), or the mprotect TLB-shootdown trick where membarrier is
 * missing) and a walk over every thread's counter. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/membarrier.h>
#endif

#include "c10/quiesce.h"

_Thread_local wf_reader_tls wf__reader_tls __attribute__((visibility("hidden")));

static _Atomic(wf_reader *) readers;
static pthread_mutex_t readers_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static wf_reader shared_reader = {.shared = true};

/* A thread that exits gives its record to the next new thread. */
static void reader_thread_exit(void *arg)
{
    wf_reader *r = arg;
    if (wf__reader_tls.reader == r)
        wf__reader_tls.reader = NULL;
    atomic_store_explicit(&r->in_use, false, memory_order_release);
}

static void make_exit_key(void)
{
    if (pthread_key_create(&exit_key, reader_thread_exit) != 0)
        exit_key = (pthread_key_t)-1;
}

wf_reader *wf__reader_register(wf_reader_tls *t)
{
    pthread_once(&exit_key_once, make_exit_key);
    pthread_mutex_lock(&readers_mutex);
    wf_reader *r = NULL;
    for (wf_reader *q = atomic_load_explicit(&readers, memory_order_relaxed); q && !r; q = q->next)
        if (!atomic_load_explicit(&q->in_use, memory_order_acquire))
            r = q;
    bool fresh = false;
    if (!r && (r = calloc(1, sizeof *r)) != NULL)
        fresh = true;
    if (r && exit_key != (pthread_key_t)-1 && pthread_setspecific(exit_key, r) != 0) {
        if (fresh)
            free(r);
        r = NULL;
    }
    if (!r) {
        /* out of memory: a shared counter, slower but still correct */
        pthread_mutex_unlock(&readers_mutex);
        t->reader = &shared_reader;
        return &shared_reader;
    }
    atomic_store_explicit(&r->in_use, true, memory_order_relaxed);
    if (fresh) {
        r->next = atomic_load_explicit(&readers, memory_order_relaxed);
        atomic_store_explicit(&readers, r, memory_order_release);
    }
    pthread_mutex_unlock(&readers_mutex);
    t->reader = r;
    return r;
}

void wf__reader_shared_exit(wf_reader *r)
{
    atomic_fetch_sub_explicit(&r->seq, 1, memory_order_seq_cst);
}

/* Makes every running thread of the process execute a full memory barrier,
 * so a reader's store "I am inside" is visible here, or its loads see what
 * was unpublished before this call. */
static void heavy_barrier(void)
{
#if defined(__linux__) && defined(SYS_membarrier)
    static int membarrier_ok; /* 0 untried, 1 usable, -1 not; loader lock held */
    if (membarrier_ok == 0)
        membarrier_ok =
            syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 ? 1 : -1;
    if (membarrier_ok == 1 &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
        return;
#endif
    /* Reducing a page's protection makes the kernel shoot down its TLB
     * entries on every CPU that runs one of our threads, an interrupt that
     * serialises each of them. */
    static char *page;
    long size = sysconf(_SC_PAGESIZE);
    if (!page) {
        void *p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
        page = p == MAP_FAILED ? NULL : p;
    }
    if (page && mprotect(page, (size_t)size, PROT_READ | PROT_WRITE) == 0) {
        *(volatile char *)page = 0;
        mprotect(page, (size_t)size, PROT_READ);
    }
    atomic_thread_fence(memory_order_seq_cst);
}

static void pause_briefly(void)
{
    struct timespec ts = {0, 20000};
    sched_yield();
    nanosleep(&ts, NULL);
}

void wf__quiesce(void)
{
    atomic_thread_fence(memory_order_seq_cst);
    heavy_barrier();
    wf_reader *self = wf__reader_tls.reader;
    for (wf_reader *r = atomic_load_explicit(&readers, memory_order_acquire); r; r = r->next) {
        if (r == self)
            continue;
        uint64_t s = atomic_load_explicit(&r->seq, memory_order_acquire);
        if (!(s & 1))
            continue;
        while (atomic_load_explicit(&r->seq, memory_order_acquire) == s)
            pause_briefly();
    }
    /* the shared record counts threads inside: wait for it to drain */
    while (atomic_load_explicit(&shared_reader.seq, memory_order_acquire) != 0)
        pause_briefly();
}
