/* tests/test_host_alloc.c — the caching host allocator (c10/host_alloc.c):
 * freed blocks are reused, requests are rounded to their bucket, the limit
 * trims the cache, the statistics count what happened, threads allocating
 * and freeing together lose nothing, and a loop making a fresh 64 MiB
 * output does not fault its pages in again every iteration. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#include "tests/tap.h"

static weft_allocator_stats stats(void)
{
    weft_allocator_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    if (weft_host_allocator_stats(&s) != 0)
        diag("weft_host_allocator_stats: %s", weft_last_error());
    return s;
}

static weft_tensor *bytes_tensor(int64_t n)
{
    weft_tensor *t = NULL;
    if (weft_empty(&t, &n, 1, WEFT_UINT8, WEFT_DEVICE_CPU) != 0)
        diag("weft_empty(%lld): %s", (long long)n, weft_last_error());
    return t;
}

static void test_reuse(void)
{
    weft_host_cache_set_limit((size_t)256 << 20);
    int64_t sizes[] = {100, 5000, 300000, 3 << 20};
    for (int i = 0; i < 4; i++) {
        weft_tensor *a = bytes_tensor(sizes[i]);
        void *pa = weft_tensor_data_ptr(a);
        weft_tensor_release(a);
        weft_allocator_stats before = stats();
        weft_tensor *b = bytes_tensor(sizes[i]);
        weft_allocator_stats after = stats();
        ok(weft_tensor_data_ptr(b) == pa, "a freed %lld-byte block is handed out again",
           (long long)sizes[i]);
        is_int(after.cache_hits - before.cache_hits, 1, "  counted as one cache hit");
        is_int(after.system_alloc_calls - before.system_alloc_calls, 0,
               "  and no system allocation");
        ok(((uintptr_t)weft_tensor_data_ptr(b) & 63) == 0, "  data is 64-byte aligned");
        weft_tensor_release(b);
    }
    /* a slightly smaller large request reuses the block (best fit within
     * an eighth); a much smaller one does not take a huge block */
    weft_tensor *big = bytes_tensor(8 << 20);
    void *pbig = weft_tensor_data_ptr(big);
    weft_tensor_release(big);
    weft_tensor *close = bytes_tensor((8 << 20) - 100000);
    ok(weft_tensor_data_ptr(close) == pbig, "a slightly smaller large request reuses the block");
    weft_tensor *small = bytes_tensor(2 << 20);
    ok(weft_tensor_data_ptr(small) != pbig, "a quarter-size request does not");
    weft_tensor_release(close);
    weft_tensor_release(small);
}

static void test_rounding(void)
{
    weft_host_empty_cache();
    weft_allocator_stats s0 = stats();
    /* 1000 data bytes + the storage header + alignment slack land in one
     * class; a block of that class is its rounded size */
    weft_tensor *a = bytes_tensor(1000);
    weft_allocator_stats s1 = stats();
    uint64_t got = s1.allocated_bytes - s0.allocated_bytes;
    ok(got >= 1000 && got <= 1000 + 1000 / 4 + 256 + 64, "1000 bytes round to a class of %llu",
       (unsigned long long)got);
    /* a request 1 byte larger that still fits the class reuses the block */
    void *pa = weft_tensor_data_ptr(a);
    weft_tensor_release(a);
    weft_tensor *b = bytes_tensor(1001);
    ok(weft_tensor_data_ptr(b) == pa, "1001 bytes come from the same bucket as 1000");
    weft_tensor_release(b);
    weft_tensor *c = bytes_tensor(5 << 20); /* large: page-rounded */
    uint64_t live = stats().allocated_bytes - s0.allocated_bytes; /* a and b are freed */
    ok(live % 4096 == 0 && live >= (5u << 20) && live < (5u << 20) + 8192,
       "a 5 MiB request is rounded to whole pages (%llu)", (unsigned long long)live);
    weft_tensor_release(c);
}

static void test_limit_and_empty(void)
{
    weft_host_empty_cache();
    weft_host_cache_set_limit((size_t)64 << 20);
    is_int(weft_host_cache_limit(), (size_t)64 << 20, "the limit reads back");
    weft_tensor *t[3];
    for (int i = 0; i < 3; i++)
        t[i] = bytes_tensor(30 << 20);
    for (int i = 0; i < 3; i++)
        weft_tensor_release(t[i]);
    weft_allocator_stats s = stats();
    ok(s.cached_bytes <= ((uint64_t)64 << 20),
       "freeing 90 MiB keeps at most the 64 MiB limit cached (%llu)",
       (unsigned long long)s.cached_bytes);
    ok(s.cached_bytes >= ((uint64_t)60 << 20), "  but does keep what fits (%llu)",
       (unsigned long long)s.cached_bytes);
    is_int(s.reserved_bytes, s.allocated_bytes + s.cached_bytes, "reserved = allocated + cached");
    weft_host_cache_set_limit((size_t)10 << 20);
    ok(stats().cached_bytes <= ((uint64_t)10 << 20), "lowering the limit trims the cache");
    weft_host_empty_cache();
    is_int(stats().cached_bytes, 0, "empty_cache gives every cached block back");
    weft_host_cache_set_limit(0);
    uint64_t sys_frees = stats().system_free_calls;
    weft_tensor_release(bytes_tensor(4096));
    is_int(stats().cached_bytes, 0, "with limit 0 nothing is cached");
    is_int(stats().system_free_calls - sys_frees, 1, "  the block went back to the system");
    weft_host_cache_set_limit((size_t)256 << 20);
}

static void test_stats(void)
{
    weft_allocator_stats a = stats();
    is_int(a.version, WEFT_ALLOCATOR_STATS_VERSION, "stats carry their version");
    weft_tensor *t = bytes_tensor(1 << 20);
    weft_allocator_stats b = stats();
    is_int(b.alloc_calls - a.alloc_calls, 1, "one allocation counted");
    ok(b.allocated_bytes - a.allocated_bytes >= (1u << 20), "allocated grows by the block");
    ok(b.peak_allocated_bytes >= b.allocated_bytes, "peak covers what is allocated");
    weft_tensor_release(t);
    weft_allocator_stats c = stats();
    is_int(c.free_calls - b.free_calls, 1, "one free counted");
    is_int(c.allocated_bytes, a.allocated_bytes, "allocated back to where it was");
    weft_host_reset_peak();
    is_int(stats().peak_allocated_bytes, c.allocated_bytes, "reset_peak restarts the peak");
    /* an older, shorter struct gets only its prefix */
    weft_allocator_stats old;
    memset(&old, 0xab, sizeof old);
    old.struct_size = offsetof(weft_allocator_stats, cached_bytes);
    is_int(weft_host_allocator_stats(&old), 0, "a version-1 sized struct is accepted");
    ok(old.cache_hits == 0xababababababababULL, "  and nothing past its size is written");
    weft_allocator_stats tiny = {.struct_size = 4};
    is_int(weft_host_allocator_stats(&tiny), WEFT_EINVAL, "a too-small struct is refused");
    like(weft_last_error(), "struct_size", "  the message says why");
    is_int(weft_host_allocator_stats(NULL), WEFT_EINVAL, "NULL is refused");
}

enum { THREADS = 4, ROUNDS = 2000 };

static void *churn(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    weft_tensor *held[8] = {0};
    long bad = 0;
    for (int r = 0; r < ROUNDS; r++) {
        seed = seed * 1103515245u + 12345u;
        int slot = (int)(seed >> 8) % 8;
        int64_t n = 1 + (int64_t)((seed >> 12) % 20000);
        if ((seed >> 20) % 64 == 0)
            n = (int64_t)1 << 21; /* now and then a large block */
        weft_tensor_release(held[slot]);
        held[slot] = bytes_tensor(n);
        if (!held[slot]) {
            bad++;
            continue;
        }
        /* each thread writes its own pattern and checks it: two threads
         * handed the same block would see each other's bytes */
        unsigned char *p = weft_tensor_data_ptr(held[slot]);
        memset(p, (int)(uintptr_t)arg, (size_t)n);
        for (int64_t i = 0; i < n; i += 97)
            bad += p[i] != (unsigned char)(uintptr_t)arg;
    }
    for (int i = 0; i < 8; i++)
        weft_tensor_release(held[i]);
    return (void *)bad;
}

static void test_threads(void)
{
    weft_allocator_stats a = stats();
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, churn, (void *)(uintptr_t)(i + 1));
    long bad = 0;
    for (int i = 0; i < THREADS; i++) {
        void *r;
        pthread_join(th[i], &r);
        bad += (long)r;
    }
    weft_allocator_stats b = stats();
    is_int(bad, 0, "%d threads allocating and freeing concurrently never share a block", THREADS);
    is_int(b.allocated_bytes, a.allocated_bytes, "  and every byte is accounted back");
    is_int(b.alloc_calls - a.alloc_calls, b.free_calls - a.free_calls,
           "  as many frees as allocations (%llu)", (unsigned long long)(b.alloc_calls - a.alloc_calls));
    ok(b.cache_hits - a.cache_hits > (uint64_t)THREADS * ROUNDS / 2, "  mostly from the cache");
}

/* The per-thread cache of tiny blocks: a tiny tensor made and dropped in a
 * loop reuses one block, the statistics count every call exactly, and the
 * blocks a thread holds go to the shared buckets when it exits or empties
 * the cache. */
enum { TINY_ROUNDS = 1000, TINY_HELD = 6 };

static void *tiny_loop(void *arg)
{
    long *bad = arg;
    weft_tensor *first = bytes_tensor(8);
    void *p = first ? weft_tensor_data_ptr(first) : NULL;
    weft_tensor_release(first);
    for (int i = 0; i < TINY_ROUNDS; i++) {
        weft_tensor *t = bytes_tensor(8);
        *bad += !t || weft_tensor_data_ptr(t) != p;
        weft_tensor_release(t);
    }
    /* leave a few blocks in this thread's cache for its exit to return */
    weft_tensor *held[TINY_HELD];
    for (int i = 0; i < TINY_HELD; i++)
        held[i] = bytes_tensor(8 + 40 * i);
    for (int i = 0; i < TINY_HELD; i++)
        weft_tensor_release(held[i]);
    return NULL;
}

static void test_thread_cache(void)
{
    weft_host_cache_set_limit((size_t)64 << 20);
    weft_host_empty_cache();
    weft_allocator_stats a = stats();
    long bad = 0;
    pthread_t th;
    pthread_create(&th, NULL, tiny_loop, &bad);
    pthread_join(th, NULL);
    weft_allocator_stats b = stats();
    is_int(bad, 0, "a tiny tensor made and dropped %d times reuses one block", TINY_ROUNDS);
    is_int(b.alloc_calls - a.alloc_calls, 1 + TINY_ROUNDS + TINY_HELD,
           "  every allocation counted once");
    is_int(b.free_calls - a.free_calls, 1 + TINY_ROUNDS + TINY_HELD, "  every free counted once");
    ok(b.cache_hits - a.cache_hits >= TINY_ROUNDS, "  hits counted (%llu)",
       (unsigned long long)(b.cache_hits - a.cache_hits));
    is_int(b.allocated_bytes, a.allocated_bytes,
           "  after the thread exits, its cached blocks are not allocated any more");
    ok(b.cached_bytes > a.cached_bytes, "  but cached in the shared buckets (%llu bytes)",
       (unsigned long long)(b.cached_bytes - a.cached_bytes));
    is_int(b.reserved_bytes, b.allocated_bytes + b.cached_bytes, "  reserved = allocated + cached");
    is_int(b.system_alloc_calls - a.system_alloc_calls, TINY_HELD,
           "  only the blocks held at once came from the system");

    /* on this thread: blocks sitting in its cache count as allocated until
     * it empties the cache, which returns them and reads exact again */
    weft_host_empty_cache();
    weft_allocator_stats c = stats();
    weft_tensor *t = bytes_tensor(16);
    weft_tensor_release(t);
    weft_allocator_stats d = stats();
    is_int(d.alloc_calls - c.alloc_calls, 1, "one tiny allocation on this thread");
    is_int(d.free_calls - c.free_calls, 1, "  and its free");
    ok(d.peak_allocated_bytes >= d.allocated_bytes, "  peak covers allocated");
    weft_host_empty_cache();
    weft_allocator_stats e = stats();
    is_int(e.allocated_bytes, c.allocated_bytes, "empty_cache takes this thread's blocks back");
    is_int(e.cached_bytes, 0, "  and gives them to the system");
    weft_host_cache_set_limit(0);
    t = bytes_tensor(16);
    void *p = t ? weft_tensor_data_ptr(t) : NULL;
    weft_tensor_release(t);
    weft_allocator_stats f = stats();
    is_int(f.allocated_bytes, c.allocated_bytes, "with limit 0 a tiny block is freed at once");
    is_int(f.cached_bytes, 0, "  and nothing is cached");
    (void)p;
}

static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

static void test_page_faults(bool under_valgrind)
{
    if (under_valgrind) {
        /* valgrind's own memory handling makes fault counts meaningless */
        skip(2, "page faults are not measurable under valgrind");
        return;
    }
    weft_host_cache_set_limit((size_t)256 << 20);
    int64_t n = 16 << 20;
    weft_tensor *x = NULL;
    if (weft_empty(&x, &n, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU) != 0) {
        ok(0, "weft_empty: %s", weft_last_error());
        return;
    }
    memset(weft_tensor_data_ptr(x), 0, (size_t)n * 4);
    for (int i = 0; i < 2; i++) { /* warm-up */
        weft_tensor *y = NULL;
        weft_exp(&y, x);
        weft_tensor_release(y);
    }
    enum { N = 10 };
    long before = minor_faults();
    int rc = 0;
    for (int i = 0; i < N && rc == 0; i++) {
        weft_tensor *y = NULL;
        rc = weft_exp(&y, x);
        weft_tensor_release(y);
    }
    long faults = minor_faults() - before;
    is_int(rc, 0, "y = exp(x) on 16M floats, %d times", N);
    ok(faults < N * 16384 / 20, "  cost %ld minor faults, not ~%d (one per page per iteration)",
       faults, N * 16384);
    weft_tensor_release(x);
}

/* Blocks of 4 MiB and more start on a 2 MiB boundary (so that transparent
 * huge pages can back them); smaller ones need not. */
static void test_huge_alignment(bool under_valgrind)
{
#if defined(__SANITIZE_ADDRESS__)
    under_valgrind = true; /* an ASan build's large blocks come from malloc too */
#endif
    if (under_valgrind) {
        skip(1, "under valgrind and AddressSanitizer large blocks come from malloc");
        return;
    }
    weft_host_empty_cache(); /* a fresh mapping, not a cached block */
    int64_t n = (6 << 20) / 4 + 123;
    weft_tensor *x = NULL;
    int rc = weft_empty(&x, &n, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    /* the data follows a small header in the block's first page */
    uintptr_t at = rc == 0 ? (uintptr_t)weft_tensor_data_ptr(x) : 1;
    ok(rc == 0 && (at & ~(uintptr_t)4095) % (2u << 20) == 0,
       "a 6 MiB block starts on a 2 MiB boundary (data at %#lx)", (unsigned long)at);
    if (rc == 0)
        memset(weft_tensor_data_ptr(x), 1, (size_t)n * 4); /* the whole block is ours */
    weft_tensor_release(x);
}

int main(void)
{
    const char *vg = getenv("LD_PRELOAD");
    bool under_valgrind = (vg && strstr(vg, "vgpreload")) || getenv("WEFT_UNDER_VALGRIND");
    if (weft_load_default_plugins() < 0)
        diag("plugins: %s", weft_last_error());
    test_reuse();
    test_rounding();
    test_limit_and_empty();
    test_stats();
    test_threads();
    test_thread_cache();
    test_page_faults(under_valgrind);
    test_huge_alignment(under_valgrind);
    weft_host_empty_cache();
    return done_testing();
}
