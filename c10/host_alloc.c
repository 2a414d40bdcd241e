/* c10/host_alloc.c — the caching host allocator: blocks of host memory kept
 * after their storage dies and handed out again, so a loop that makes a
 * fresh large output every iteration does not pay the kernel's page faults
 * (and zeroing) every iteration.  Depends on libc and pthreads only.
 *
 * Small blocks (up to SMALL_MAX bytes) come from malloc and are rounded to
 * one of four classes per power of two; each class is a free list with its
 * own mutex, so threads freeing different sizes never meet.  Large blocks
 * are page-rounded mmap()s kept in one best-fit list (a large block costs
 * far more to fill than the mutex costs to take).  Blocks that are free are
 * "cached"; when caching one more would pass the limit (the high-water
 * mark, WEFT_HOST_CACHE_LIMIT or weft_host_cache_set_limit) it goes back to
 * the system instead.  Under valgrind and AddressSanitizer the default
 * limit is 0, so every free is a real free and use-after-free stays
 * detectable.
 *
 * In front of the shared buckets each thread keeps a few freed blocks of
 * the smallest classes (a tiny tensor's storage): its allocate/free pair in
 * a loop then takes no lock and no atomic read-modify-write.  Those blocks
 * count as allocated, not cached, until they go back to the shared buckets
 * (when the thread's list for the class is full, at thread exit, or on
 * weft_host_empty_cache/set_limit from that thread), so the allocated,
 * cached and peak statistics change only on the shared path and stay
 * exact; the call and hit counts of the thread path are per-thread
 * counters summed when the statistics are read. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif
/* AddressSanitizer cannot see into cached blocks either: with it, nothing
 * is cached unless asked for, and large blocks come from its malloc. */
#if defined(__SANITIZE_ADDRESS__)
#define CHECKED_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CHECKED_BUILD 1
#endif
#endif
#ifndef CHECKED_BUILD
#define CHECKED_BUILD 0
#endif

#include "c10/core.h"

enum {
    SMALL_MIN_SHIFT = 6,              /* 64 bytes: the smallest class */
    SMALL_MAX_SHIFT = 20,             /* 1 MiB: larger blocks are mmap()ed */
    SUB_CLASS_BITS = 2,
    SUB_CLASSES = 1 << SUB_CLASS_BITS, /* classes per power of two: waste <= 25% */
    N_CLASSES = (SMALL_MAX_SHIFT - SMALL_MIN_SHIFT) * SUB_CLASSES + 1,
    PAGE = 4096,
};
#define SMALL_MAX ((size_t)1 << SMALL_MAX_SHIFT)
#define DEFAULT_LIMIT ((size_t)1 << 30)

/* A cached block's first bytes link it into its list. */
typedef struct free_block {
    struct free_block *next;
    size_t size; /* large blocks only: the mapping's length */
} free_block;

typedef struct bucket {
    pthread_mutex_t lock;
    free_block *head;
} bucket;

static bucket small[N_CLASSES];
static pthread_mutex_t large_lock = PTHREAD_MUTEX_INITIALIZER;
static free_block *large_head;

static atomic_size_t limit_bytes;
static bool use_mmap; /* not under valgrind, whose leak check ignores mappings */
/* Large blocks of HUGE_MIN bytes or more are mapped at a 2 MiB boundary and
 * marked MADV_HUGEPAGE (unless WEFT_HOST_HUGEPAGES=0): where transparent
 * huge pages are "madvise" (Debian's default) a 64 MiB tensor then needs 32
 * TLB entries instead of 16384.  Measured with bench/run --only "add, 16M",
 * three alternating pairs: add into a preallocated output 1.10-1.16x ->
 * 1.20-1.22x libtorch, a fresh output 4.8-5.2x -> 5.3-5.7x.  Only blocks
 * that large: a huge page is faulted in whole, which a small, partly used
 * block would pay for in resident memory. */
enum { HUGE_MIN = 4 << 20, HUGE_ALIGN = 2 << 20 };
static bool use_huge;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static atomic_uint_fast64_t st_allocated, st_peak, st_cached, st_alloc_calls, st_free_calls,
    st_hits, st_sys_allocs, st_sys_frees;

/* The per-thread cache: classes 0..THREAD_CLASSES-1 (64 to 512 bytes), at
 * most THREAD_DEPTH blocks each, so a thread holds at most about 30 KiB. */
enum { THREAD_CLASSES = 13, THREAD_DEPTH = 8 };
#define THREAD_MAX ((size_t)512) /* class_size(THREAD_CLASSES - 1) */

typedef struct thread_cache {
    free_block *head[THREAD_CLASSES];
    int count[THREAD_CLASSES];
    /* written by the owning thread only (a relaxed load and store, no
     * read-modify-write), read by weft_host_allocator_stats under
     * threads_lock */
    atomic_uint_fast64_t alloc_calls, free_calls, hits;
    struct thread_cache *prev, *next; /* the registry, under threads_lock */
} thread_cache;

static pthread_mutex_t threads_lock = PTHREAD_MUTEX_INITIALIZER;
static thread_cache *threads; /* every live thread's cache */
static pthread_key_t thread_key;
/* initial-exec: a plain %fs-relative load instead of a __tls_get_addr
 * call on every allocation (a tenth of a 1-element add); the 16 bytes come
 * from the static TLS surplus glibc keeps for dlopen()ed libraries. */
static _Thread_local thread_cache *my_cache __attribute__((tls_model("initial-exec")));
/* its thread is exiting: no new cache */
static _Thread_local bool my_cache_gone __attribute__((tls_model("initial-exec")));
static bool have_key;                       /* thread_key was made */
static atomic_bool key_deleted;             /* the library is being unloaded */

static void thread_cache_destroy(void *cache);

static void init_limit(void)
{
    for (int i = 0; i < N_CLASSES; i++)
        pthread_mutex_init(&small[i].lock, NULL);
    /* without a key there is no per-thread cache (every block takes the
     * shared path), never a cache that leaks at thread exit */
    have_key = pthread_key_create(&thread_key, thread_cache_destroy) == 0;
    bool checked = CHECKED_BUILD || RUNNING_ON_VALGRIND;
    use_mmap = !checked;
    const char *huge = getenv("WEFT_HOST_HUGEPAGES");
    use_huge = use_mmap && !(huge && strcmp(huge, "0") == 0);
    size_t limit = checked ? 0 : DEFAULT_LIMIT;
    const char *env = getenv("WEFT_HOST_CACHE_LIMIT");
    if (env && *env) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(env, &end, 10);
        size_t unit = 1;
        if (*end == 'k' || *end == 'K')
            unit = (size_t)1 << 10, end++;
        else if (*end == 'm' || *end == 'M')
            unit = (size_t)1 << 20, end++;
        else if (*end == 'g' || *end == 'G')
            unit = (size_t)1 << 30, end++;
        if (errno == 0 && *end == '\0' && env[0] != '-')
            limit = v > SIZE_MAX / unit ? SIZE_MAX : (size_t)v * unit;
    }
    atomic_store(&limit_bytes, limit);
}

/* The class of a small request and the size it is rounded to. */
static int small_class(size_t n, size_t *rounded)
{
    if (n <= ((size_t)1 << SMALL_MIN_SHIFT)) {
        *rounded = (size_t)1 << SMALL_MIN_SHIFT;
        return 0;
    }
    int shift = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^shift < n <= 2^(shift+1) */
    /* steps of 2^shift / SUB_CLASSES: a shift, not a division (which cost
     * a tenth of a 1-element add) */
    int step_shift = shift - SUB_CLASS_BITS;
    size_t step = (size_t)1 << step_shift;
    size_t sub = (n - ((size_t)1 << shift) + step - 1) >> step_shift; /* 1..SUB_CLASSES */
    *rounded = ((size_t)1 << shift) + sub * step;
    return (shift - SMALL_MIN_SHIFT) * SUB_CLASSES + (int)sub;
}

static size_t class_size(int c)
{
    if (c == 0)
        return (size_t)1 << SMALL_MIN_SHIFT;
    size_t base = (size_t)1 << (SMALL_MIN_SHIFT + (c - 1) / SUB_CLASSES);
    return base + base / SUB_CLASSES * (size_t)(1 + (c - 1) % SUB_CLASSES);
}

static size_t round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

size_t wf__host_block_size(size_t n)
{
    size_t rounded;
    if (n <= SMALL_MAX) {
        small_class(n, &rounded);
        return rounded;
    }
    return round_up(n, PAGE);
}

static void note_alloc(size_t size)
{
    atomic_fetch_add_explicit(&st_alloc_calls, 1, memory_order_relaxed);
    uint64_t now = atomic_fetch_add_explicit(&st_allocated, size, memory_order_relaxed) + size;
    uint64_t peak = atomic_load_explicit(&st_peak, memory_order_relaxed);
    while (now > peak && !atomic_compare_exchange_weak_explicit(&st_peak, &peak, now,
                                                                memory_order_relaxed,
                                                                memory_order_relaxed))
        ;
}

static void system_free(void *block, size_t size)
{
    atomic_fetch_add_explicit(&st_sys_frees, 1, memory_order_relaxed);
    if (size <= SMALL_MAX || !use_mmap)
        free(block);
    else
        munmap(block, size);
}

/* Takes `size` bytes off the cache count if the limit allows keeping a
 * block of that size; false: the block must go back to the system. */
static bool reserve_cache_room(size_t size)
{
    size_t limit = atomic_load_explicit(&limit_bytes, memory_order_relaxed);
    uint64_t cached = atomic_load_explicit(&st_cached, memory_order_relaxed);
    do {
        if (cached + size > limit)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(&st_cached, &cached, cached + size,
                                                    memory_order_relaxed, memory_order_relaxed));
    return true;
}

/* One more to a counter only this thread writes. */
static inline void bump(atomic_uint_fast64_t *c)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

/* Puts a block freed by this thread (already counted as a free call) back
 * in the shared buckets, or to the system past the limit. */
static void shared_free(void *block, size_t size);

/* This thread's cache, made at its first small free; NULL while the cache
 * is off (a limit of 0: valgrind, ASan, or asked) or the thread is exiting. */
static thread_cache *thread_cache_get(void)
{
    thread_cache *tc = my_cache;
    if (tc || my_cache_gone || !have_key || atomic_load(&key_deleted))
        return tc;
    tc = calloc(1, sizeof *tc);
    if (!tc)
        return NULL;
    if (pthread_setspecific(thread_key, tc) != 0) {
        free(tc);
        return NULL;
    }
    pthread_mutex_lock(&threads_lock);
    tc->next = threads;
    if (threads)
        threads->prev = tc;
    threads = tc;
    pthread_mutex_unlock(&threads_lock);
    my_cache = tc;
    return tc;
}

/* Gives this thread's cached blocks to the shared buckets. */
static void thread_cache_flush(thread_cache *tc)
{
    for (int c = 0; c < THREAD_CLASSES; c++) {
        size_t size = class_size(c);
        while (tc->head[c]) {
            free_block *f = tc->head[c];
            tc->head[c] = f->next;
            tc->count[c]--;
            shared_free(f, size);
        }
    }
}

/* The key's destructor, at thread exit: the blocks go to the shared
 * buckets and the counts into the global ones, in one step for readers. */
static void thread_cache_destroy(void *cache)
{
    thread_cache *tc = cache;
    my_cache = NULL;
    my_cache_gone = true;
    thread_cache_flush(tc);
    pthread_mutex_lock(&threads_lock);
    atomic_fetch_add(&st_alloc_calls, atomic_load(&tc->alloc_calls));
    atomic_fetch_add(&st_free_calls, atomic_load(&tc->free_calls));
    atomic_fetch_add(&st_hits, atomic_load(&tc->hits));
    if (tc->prev)
        tc->prev->next = tc->next;
    else
        threads = tc->next;
    if (tc->next)
        tc->next->prev = tc->prev;
    pthread_mutex_unlock(&threads_lock);
    free(tc);
}

/* A fresh mapping of size bytes (a multiple of the page size), or NULL.
 * With huge pages on and size >= HUGE_MIN: HUGE_ALIGN more is mapped and
 * the ends trimmed, so the block starts on a 2 MiB boundary and is exactly
 * [p, p + size) — munmap(p, size) releases it like any other.  madvise
 * failing (no THP in this kernel) leaves ordinary pages. */
static void *map_block(size_t size)
{
    if (!use_huge || size < HUGE_MIN) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    char *raw = mmap(NULL, size + HUGE_ALIGN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    char *p = (char *)(((uintptr_t)raw + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1));
    if (p > raw)
        munmap(raw, (size_t)(p - raw));
    size_t tail = (size_t)(raw + size + HUGE_ALIGN - (p + size));
    if (tail > 0)
        munmap(p + size, tail);
    madvise(p, size, MADV_HUGEPAGE);
    return p;
}

void *wf__host_block_alloc(size_t n, size_t *size_out)
{
    if (wf__fault_alloc()) /* one branch here covers the cache and the system paths */
        return NULL;
    void *p = NULL;
    size_t size;
    /* (a thread with a cache has seen init_limit run) */
    thread_cache *tc = my_cache;
    if (tc && n <= THREAD_MAX) {
        int c = small_class(n, &size);
        free_block *f = tc->head[c];
        if (f) {
            /* the block stayed counted as allocated while it sat here */
            tc->head[c] = f->next;
            tc->count[c]--;
            bump(&tc->alloc_calls);
            bump(&tc->hits);
            *size_out = size;
            return f;
        }
    }
    pthread_once(&init_once, init_limit);
    if (n <= SMALL_MAX) {
        bucket *b = &small[small_class(n, &size)];
        pthread_mutex_lock(&b->lock);
        free_block *f = b->head;
        if (f)
            b->head = f->next;
        pthread_mutex_unlock(&b->lock);
        if (f) {
            atomic_fetch_sub_explicit(&st_cached, size, memory_order_relaxed);
            atomic_fetch_add_explicit(&st_hits, 1, memory_order_relaxed);
            p = f;
        } else {
            p = malloc(size);
            if (p)
                atomic_fetch_add_explicit(&st_sys_allocs, 1, memory_order_relaxed);
        }
    } else {
        size = round_up(n, PAGE);
        if (size < n)
            return NULL;
        /* best fit, wasting at most an eighth: a slightly bigger block is
         * reused rather than mapping a new one */
        pthread_mutex_lock(&large_lock);
        free_block **best = NULL;
        for (free_block **l = &large_head; *l; l = &(*l)->next)
            if ((*l)->size >= size && (*l)->size - size <= size / 8 &&
                (!best || (*l)->size < (*best)->size))
                best = l;
        free_block *f = NULL;
        if (best) {
            f = *best;
            *best = f->next;
        }
        pthread_mutex_unlock(&large_lock);
        if (f) {
            size = f->size;
            atomic_fetch_sub_explicit(&st_cached, size, memory_order_relaxed);
            atomic_fetch_add_explicit(&st_hits, 1, memory_order_relaxed);
            p = f;
        } else {
            if (use_mmap) {
                p = map_block(size);
            } else {
                p = malloc(size);
            }
            if (p)
                atomic_fetch_add_explicit(&st_sys_allocs, 1, memory_order_relaxed);
        }
    }
    if (!p)
        return NULL;
    note_alloc(size);
    *size_out = size;
    return p;
}

void wf__host_block_free(void *block, size_t size)
{
    if (!block)
        return;
    /* (a limit of 0 — valgrind, ASan, or asked — means no caching at all) */
    if (size <= THREAD_MAX && atomic_load_explicit(&limit_bytes, memory_order_relaxed) != 0) {
        thread_cache *tc = thread_cache_get();
        size_t rounded;
        int c = small_class(size, &rounded);
        if (tc && tc->count[c] < THREAD_DEPTH) {
            free_block *f = block;
            f->next = tc->head[c];
            tc->head[c] = f;
            tc->count[c]++;
            bump(&tc->free_calls);
            return;
        }
    }
    atomic_fetch_add_explicit(&st_free_calls, 1, memory_order_relaxed);
    shared_free(block, size);
}

static void shared_free(void *block, size_t size)
{
    atomic_fetch_sub_explicit(&st_allocated, size, memory_order_relaxed);
    if (!reserve_cache_room(size)) {
        system_free(block, size);
        return;
    }
    free_block *f = block;
    if (size <= SMALL_MAX) {
        size_t rounded;
        bucket *b = &small[small_class(size, &rounded)];
        pthread_mutex_lock(&b->lock);
        f->next = b->head;
        b->head = f;
        pthread_mutex_unlock(&b->lock);
    } else {
        f->size = size;
        pthread_mutex_lock(&large_lock);
        f->next = large_head;
        large_head = f;
        pthread_mutex_unlock(&large_lock);
    }
}

/* Gives cached blocks back to the system until at most `keep` bytes stay
 * cached: large blocks first (they hold most of the memory), then the
 * small classes from the largest down. */
static void trim_to(size_t keep)
{
    pthread_once(&init_once, init_limit);
    if (my_cache)
        thread_cache_flush(my_cache);
    for (;;) {
        if (atomic_load_explicit(&st_cached, memory_order_relaxed) <= keep)
            return;
        pthread_mutex_lock(&large_lock);
        free_block *f = large_head;
        if (f)
            large_head = f->next;
        pthread_mutex_unlock(&large_lock);
        if (!f)
            break;
        size_t size = f->size;
        atomic_fetch_sub_explicit(&st_cached, size, memory_order_relaxed);
        system_free(f, size);
    }
    for (int c = N_CLASSES - 1; c >= 0; c--) {
        bucket *b = &small[c];
        for (;;) {
            if (atomic_load_explicit(&st_cached, memory_order_relaxed) <= keep)
                return;
            pthread_mutex_lock(&b->lock);
            free_block *f = b->head;
            if (f)
                b->head = f->next;
            pthread_mutex_unlock(&b->lock);
            if (!f)
                break;
            size_t size = class_size(c);
            atomic_fetch_sub_explicit(&st_cached, size, memory_order_relaxed);
            system_free(f, size);
        }
    }
}

void weft_host_empty_cache(void)
{
    trim_to(0);
}

size_t weft_host_cache_limit(void)
{
    pthread_once(&init_once, init_limit);
    return atomic_load(&limit_bytes);
}

void weft_host_cache_set_limit(size_t bytes)
{
    pthread_once(&init_once, init_limit);
    atomic_store(&limit_bytes, bytes);
    trim_to(bytes);
}

int weft_host_allocator_stats(weft_allocator_stats *out)
{
    if (!out || out->struct_size < offsetof(weft_allocator_stats, reserved_bytes))
        return weft_set_error(WEFT_EINVAL, "weft_host_allocator_stats: out must be a "
                              "weft_allocator_stats with struct_size set");
    pthread_once(&init_once, init_limit);
    weft_allocator_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = out->struct_size < sizeof s ? out->struct_size : (uint32_t)sizeof s;
    s.version = WEFT_ALLOCATOR_STATS_VERSION;
    s.allocated_bytes = atomic_load(&st_allocated);
    s.peak_allocated_bytes = atomic_load(&st_peak);
    s.cached_bytes = atomic_load(&st_cached);
    s.reserved_bytes = s.allocated_bytes + s.cached_bytes;
    /* under threads_lock, so an exiting thread's counts are in the
     * globals or in its cache, never in both or neither */
    pthread_mutex_lock(&threads_lock);
    s.alloc_calls = atomic_load(&st_alloc_calls);
    s.free_calls = atomic_load(&st_free_calls);
    s.cache_hits = atomic_load(&st_hits);
    for (thread_cache *tc = threads; tc; tc = tc->next) {
        s.alloc_calls += atomic_load_explicit(&tc->alloc_calls, memory_order_relaxed);
        s.free_calls += atomic_load_explicit(&tc->free_calls, memory_order_relaxed);
        s.cache_hits += atomic_load_explicit(&tc->hits, memory_order_relaxed);
    }
    pthread_mutex_unlock(&threads_lock);
    s.system_alloc_calls = atomic_load(&st_sys_allocs);
    s.system_free_calls = atomic_load(&st_sys_frees);
    s.cache_limit_bytes = atomic_load(&limit_bytes);
    memcpy(out, &s, s.struct_size);
    return 0;
}

void weft_host_reset_peak(void)
{
    atomic_store(&st_peak, atomic_load(&st_allocated));
}

/* Cached blocks go back at exit (this thread's cache too), so leak
 * checkers see nothing held.  The key goes too: after an unload no thread
 * may run a destructor that is no longer mapped (other threads' caches are
 * then left to the process). */
__attribute__((destructor)) static void host_alloc_fini(void)
{
    pthread_once(&init_once, init_limit);
    if (my_cache) {
        thread_cache *tc = my_cache;
        pthread_setspecific(thread_key, NULL);
        thread_cache_destroy(tc);
    }
    if (have_key && !atomic_exchange(&key_deleted, true))
        pthread_key_delete(thread_key);
    trim_to(0);
}
