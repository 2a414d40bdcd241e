/* tests/test_caching_alloc.c — the device caching allocator against a
 * simulated device heap: rounding and pools, splitting and merging, per-stream
 * reuse, cross-stream safety with events, retry after freeing the cache, the
 * out-of-memory report, limits, statistics, thread safety, and its use as a
 * device type's allocator through the core.  No GPU needed: the "device" is a
 * host arena whose streams and events the test drives by hand. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#include "tests/tap.h"

#define MiB ((size_t)1 << 20)
#define fail(...) ok(0, __VA_ARGS__)
#define BAIL_OUT(...) (printf("Bail out! "), printf(__VA_ARGS__), printf("\n"), exit(1))

/* ------------------------------------------------ the simulated device */

/* A heap of `capacity` bytes handed out first-fit from a list of ranges, so
 * the allocator's segments are real, distinct, writable memory. */
typedef struct range {
    char *p;
    size_t n;
    struct range *next;
} range;

typedef struct {
    char *arena;
    size_t capacity, used;
    range *live;
    int allocs, frees, syncs;
    int fail_next; /* a forced error code for the next raw_alloc */
    void *stream;  /* the current stream */
    int events_live;
} sim_heap;

typedef struct {
    int done;
} sim_event;

static int sim_alloc(void *ctx, int device, size_t n, void **out)
{
    (void)device;
    sim_heap *h = ctx;
    if (h->fail_next) {
        int rc = h->fail_next;
        h->fail_next = 0;
        return weft_set_error(rc, "simulated device failure");
    }
    if (h->used + n > h->capacity)
        return WEFT_ENOMEM;
    /* first fit over the sorted live ranges */
    char *at = h->arena;
    range **pp = &h->live;
    while (*pp && (size_t)((*pp)->p - at) < n) {
        at = (*pp)->p + (*pp)->n;
        pp = &(*pp)->next;
    }
    if ((size_t)(h->arena + h->capacity - at) < n)
        return WEFT_ENOMEM;
    range *r = malloc(sizeof *r);
    *r = (range){at, n, *pp};
    *pp = r;
    h->used += n;
    h->allocs++;
    *out = at;
    return 0;
}

static void sim_free(void *ctx, int device, void *ptr)
{
    (void)device;
    sim_heap *h = ctx;
    for (range **pp = &h->live; *pp; pp = &(*pp)->next)
        if ((*pp)->p == ptr) {
            range *r = *pp;
            *pp = r->next;
            h->used -= r->n;
            h->frees++;
            free(r);
            return;
        }
    fail("raw_free of a pointer the heap never gave out");
}

static void *sim_stream(void *ctx, int device)
{
    (void)device;
    return ((sim_heap *)ctx)->stream;
}

/* The last event recorded, so a test can complete it. */
static sim_event *last_event;

static int sim_event_record(void *ctx, int device, void *stream, void **out)
{
    (void)device, (void)stream;
    sim_heap *h = ctx;
    sim_event *e = calloc(1, sizeof *e);
    h->events_live++;
    last_event = e;
    *out = e;
    return 0;
}

static int sim_event_query(void *ctx, void *event)
{
    (void)ctx;
    return ((sim_event *)event)->done;
}

static void sim_event_destroy(void *ctx, void *event)
{
    ((sim_heap *)ctx)->events_live--;
    if (event == last_event)
        last_event = NULL;
    free(event);
}

static int sim_sync(void *ctx, int device)
{
    (void)device;
    ((sim_heap *)ctx)->syncs++;
    return 0;
}

static void heap_init(sim_heap *h, size_t capacity)
{
    memset(h, 0, sizeof *h);
    h->capacity = capacity;
    h->arena = malloc(capacity);
}

static void heap_fini(sim_heap *h)
{
    ok(h->live == NULL && h->used == 0, "the simulated heap is empty at the end (%zu bytes)",
       h->used);
    while (h->live) {
        range *r = h->live;
        h->live = r->next;
        free(r);
    }
    free(h->arena);
}

static weft_device_memory memory_of(sim_heap *h)
{
    return (weft_device_memory){
        .struct_size = sizeof(weft_device_memory),
        .version = WEFT_DEVICE_MEMORY_VERSION,
        .ctx = h,
        .raw_alloc = sim_alloc,
        .raw_free = sim_free,
        .current_stream = sim_stream,
        .event_record = sim_event_record,
        .event_query = sim_event_query,
        .event_destroy = sim_event_destroy,
        .synchronize = sim_sync,
    };
}

static weft_caching_allocator *make(sim_heap *h, int ndev)
{
    weft_device_memory mem = memory_of(h);
    weft_caching_allocator *a = NULL;
    if (weft_caching_allocator_create(&a, "sim", &mem, ndev) != 0)
        BAIL_OUT("creating the caching allocator: %s", weft_last_error());
    return a;
}

static weft_caching_stats stats(weft_caching_allocator *a, int device)
{
    weft_caching_stats st = {.struct_size = sizeof st};
    if (weft_caching_allocator_stats(a, device, &st) != 0)
        fail("stats: %s", weft_last_error());
    return st;
}

static weft_data_ptr get(weft_caching_allocator *a, size_t n)
{
    weft_data_ptr p = {0};
    const weft_allocator *t = weft_caching_allocator_table(a);
    if (t->allocate(t->ctx, n, 0, &p) != 0)
        diag("allocate %zu: %s", n, weft_last_error());
    return p;
}

static void put(weft_data_ptr p)
{
    if (p.deleter)
        p.deleter(p.data, p.ctx);
}

/* ------------------------------------------------------------- tests */

static void test_rounding_and_pools(void)
{
    sim_heap h;
    heap_init(&h, 256 * MiB);
    weft_caching_allocator *a = make(&h, 1);

    weft_data_ptr p1 = get(a, 1);
    weft_caching_stats st = stats(a, 0);
    ok(st.allocated_bytes == 512 && st.requested_bytes == 1,
       "1 byte is a 512-byte block (allocated %llu, requested %llu)",
       (unsigned long long)st.allocated_bytes, (unsigned long long)st.requested_bytes);
    ok(st.reserved_bytes == 2 * MiB && st.device_alloc_calls == 1,
       "a small request carves a 2 MiB segment");
    weft_data_ptr p2 = get(a, 513);
    st = stats(a, 0);
    ok(st.allocated_bytes == 512 + 1024 && st.device_alloc_calls == 1,
       "513 bytes round to 1024, packed into the same segment");
    ok((char *)p2.data == (char *)p1.data + 512, "the second block follows the first");
    memset(p2.data, 0xab, 513); /* the memory is real */

    weft_data_ptr m1 = get(a, 5 * MiB), m2 = get(a, 5 * MiB);
    st = stats(a, 0);
    ok(st.reserved_bytes == 22 * MiB && st.device_alloc_calls == 2,
       "two 5 MiB requests share one 20 MiB segment (reserved %llu MiB)",
       (unsigned long long)(st.reserved_bytes / MiB));
    weft_data_ptr big = get(a, 11 * MiB + 1);
    st = stats(a, 0);
    ok(st.reserved_bytes == 34 * MiB && st.device_alloc_calls == 3,
       "11 MiB + 1 byte gets its own segment rounded to 12 MiB");
    weft_data_ptr zero = get(a, 0);
    ok(zero.data == NULL && zero.deleter == NULL, "0 bytes allocate nothing");

    put(p1), put(p2), put(m1), put(m2), put(big);
    st = stats(a, 0);
    ok(st.allocated_bytes == 0 && st.reserved_bytes == 34 * MiB && st.active_blocks == 0,
       "freed blocks stay cached");
    ok(st.peak_allocated_bytes == 512 + 1024 + 10 * MiB + 12 * MiB, "peak allocated");
    ok(weft_caching_allocator_empty_cache(a, 0) == 0, "empty_cache");
    st = stats(a, 0);
    ok(st.reserved_bytes == 0 && st.device_free_calls == 3 && st.segments == 0,
       "empty_cache gives every merged segment back (free calls %llu)",
       (unsigned long long)st.device_free_calls);
    ok(st.peak_reserved_bytes == 34 * MiB, "peak reserved");
    ok(weft_caching_allocator_destroy(a) == 0, "destroy");
    heap_fini(&h);
}

static void test_split_and_merge(void)
{
    sim_heap h;
    heap_init(&h, 64 * MiB);
    weft_caching_allocator *a = make(&h, 1);
    weft_data_ptr b[4];
    for (int i = 0; i < 4; i++)
        b[i] = get(a, 4096);
    put(b[1]);
    weft_caching_stats st = stats(a, 0);
    ok(st.inactive_split_bytes == 2 * MiB - 3 * 4096,
       "a hole in a split segment is counted as inactive split bytes (%llu)",
       (unsigned long long)st.inactive_split_bytes);
    weft_data_ptr again = get(a, 4000);
    ok(again.data == b[1].data, "best fit reuses the 4 KiB hole for 4000 bytes");
    ok(stats(a, 0).cache_hits >= 2, "served from the cache");
    put(again);
    put(b[2]);
    weft_data_ptr merged = get(a, 8192);
    ok(merged.data == b[1].data, "freeing two neighbours merges them into one 8 KiB block");
    put(merged);
    put(b[0]);
    put(b[3]);
    st = stats(a, 0);
    ok(st.inactive_split_bytes == 0, "all freed: the segment is one block again");
    weft_caching_allocator_empty_cache(a, -1);
    ok(stats(a, 0).reserved_bytes == 0, "and goes back to the device");

    /* the large pool splits only when more than 1 MiB would remain */
    weft_data_ptr l1 = get(a, 19 * MiB + 512 * 1024);
    weft_data_ptr l2 = get(a, 2 * MiB);
    st = stats(a, 0);
    ok(st.segments == 2, "a 20 MiB segment is not split for a remainder of 0.5 MiB");
    put(l1), put(l2);
    weft_caching_allocator_destroy(a);
    heap_fini(&h);
}

static void test_streams(void)
{
    sim_heap h;
    heap_init(&h, 64 * MiB);
    weft_caching_allocator *a = make(&h, 1);
    void *s1 = (void *)0x1, *s2 = (void *)0x2;

    h.stream = s1;
    weft_data_ptr x = get(a, 1 * MiB);
    put(x);
    h.stream = s2;
    weft_data_ptr y = get(a, 1 * MiB);
    ok(y.data != x.data, "a block freed on stream 1 is not handed to stream 2");
    h.stream = s1;
    weft_data_ptr z = get(a, 1 * MiB);
    ok(z.data == x.data, "but is reused at once on stream 1");
    put(y);
    put(z);
    weft_caching_allocator_destroy(a);
    heap_fini(&h);
}

/* A device type whose allocator is the caching allocator over the heap. */
static int sim_count(void *ctx)
{
    (void)ctx;
    return 1;
}

static int sim_copy(void *ctx, void *dst, const void *src, size_t n, int index)
{
    (void)ctx, (void)index;
    memcpy(dst, src, n);
    return 0;
}

static int sim_copy_dev(void *ctx, void *dst, int di, const void *src, int si, size_t n)
{
    (void)ctx, (void)di, (void)si;
    memcpy(dst, src, n);
    return 0;
}

static int sim_dev_sync(void *ctx, int index)
{
    (void)ctx, (void)index;
    return 0;
}

static void test_through_the_core(void)
{
    sim_heap h;
    heap_init(&h, 64 * MiB);
    weft_caching_allocator *a = make(&h, 1);
    weft_registrar *reg = NULL;
    weft_registrar_create(&reg, "caching-test");
    weft_device_interface iface = {
        .struct_size = sizeof iface, .version = WEFT_DEVICE_INTERFACE_VERSION,
        .device_count = sim_count, .copy_to_host = sim_copy, .copy_from_host = sim_copy,
        .copy_device = sim_copy_dev, .synchronize = sim_dev_sync};
    int type = -1;
    int rc = weft_register_device_type(reg, "simcache", &iface, weft_caching_allocator_table(a),
                                       &type);
    ok(rc == 0, "a device type registers the caching allocator as its allocator");
    weft_device dev = {.type = (int16_t)type, .index = 0};
    void *s1 = (void *)0x1, *s2 = (void *)0x2;
    h.stream = s1;

    /* a training-loop pattern: no device allocation after the first step */
    int calls_after_first = -1;
    for (int step = 0; step < 5; step++) {
        weft_tensor *t[3] = {NULL, NULL, NULL};
        weft_empty(&t[0], (const int64_t[]){64, 784}, 2, WEFT_FLOAT32, dev);
        weft_empty(&t[1], (const int64_t[]){256, 784}, 2, WEFT_FLOAT32, dev);
        weft_empty(&t[2], (const int64_t[]){64, 256}, 2, WEFT_FLOAT32, dev);
        for (int i = 0; i < 3; i++)
            weft_tensor_release(t[i]);
        if (step == 0)
            calls_after_first = (int)stats(a, 0).device_alloc_calls;
    }
    ok(calls_after_first > 0 && stats(a, 0).device_alloc_calls == (uint64_t)calls_after_first,
       "a loop of same-shaped tensors calls the device allocator only in its first step (%d)",
       calls_after_first);

    /* record_stream: the block waits for the other stream's event */
    weft_tensor *t = NULL;
    weft_empty(&t, (const int64_t[]){1024}, 1, WEFT_FLOAT32, dev);
    void *addr = weft_tensor_data_ptr(t);
    ok(weft_record_stream(t, s2) == 0, "record_stream on a second stream");
    ok(weft_record_stream(t, s2) == 0 && weft_record_stream(t, s1) == 0,
       "recording the same stream again, or the allocation stream, is harmless");
    weft_tensor_release(t);
    ok(h.events_live == 1, "freeing it records one event, on the second stream");
    weft_tensor *u = NULL;
    weft_empty(&u, (const int64_t[]){1024}, 1, WEFT_FLOAT32, dev);
    ok(weft_tensor_data_ptr(u) != addr, "its memory is not reused while the event is pending");
    weft_tensor_release(u);
    ok(weft_caching_allocator_destroy(a) == WEFT_EBUSY,
       "destroy refuses while a block waits for a stream");
    last_event->done = 1;
    weft_empty(&u, (const int64_t[]){1024}, 1, WEFT_FLOAT32, dev);
    ok(weft_tensor_data_ptr(u) == addr, "once the event completes the block is reused");
    ok(h.events_live == 0, "and the event is destroyed");
    ok(weft_caching_allocator_destroy(a) == WEFT_EBUSY && strstr(weft_last_error(), "1 blocks"),
       "destroy refuses while a tensor holds a block: %s", weft_last_error());
    weft_tensor_release(u);

    weft_tensor *host = NULL;
    weft_empty(&host, (const int64_t[]){4}, 1, WEFT_FLOAT32, WEFT_DEVICE_CPU);
    ok(weft_record_stream(host, s2) == 0, "record_stream on host memory is a no-op");
    weft_tensor_release(host);
    ok(weft_record_stream(NULL, s2) == WEFT_EINVAL, "record_stream(NULL) is refused");

    weft_registrar_destroy(reg);
    ok(weft_caching_allocator_destroy(a) == 0, "destroy once everything is freed");
    heap_fini(&h);
}

static void test_retry_and_oom(void)
{
    sim_heap h;
    heap_init(&h, 40 * MiB);
    weft_caching_allocator *a = make(&h, 1);
    void *s1 = (void *)0x1, *s2 = (void *)0x2;

    /* stream 1 caches two 20 MiB segments; stream 2 then needs one */
    h.stream = s1;
    weft_data_ptr x = get(a, 5 * MiB), y = get(a, 19 * MiB + 1);
    put(x), put(y);
    ok(stats(a, 0).reserved_bytes == 40 * MiB, "the heap is fully cached by stream 1");
    h.stream = s2;
    weft_data_ptr z = get(a, 5 * MiB);
    weft_caching_stats st = stats(a, 0);
    ok(z.data != NULL && st.retries == 1, "stream 2 succeeds after the cache is freed (retries %llu)",
       (unsigned long long)st.retries);
    ok(st.reserved_bytes == 20 * MiB && st.device_free_calls == 2 && h.syncs >= 1,
       "the cached segments went back after a device synchronize");

    /* a request that cannot fit even after freeing: out of memory */
    weft_data_ptr big = {0};
    const weft_allocator *t = weft_caching_allocator_table(a);
    int rc = t->allocate(t->ctx, 30 * MiB, 0, &big);
    const char *msg = weft_last_error();
    ok(rc == WEFT_ENOMEM && big.data == NULL, "an impossible request is out of memory");
    ok(strstr(msg, "sim:0") && strstr(msg, "30.00 MiB") && strstr(msg, "5.00 MiB allocated") &&
           strstr(msg, "20.00 MiB reserved"),
       "the message states request, allocated and reserved: %s", msg);
    st = stats(a, 0);
    ok(st.ooms == 1 && st.allocated_bytes == 5 * MiB, "counted as an OOM; nothing else changed");

    /* a device error other than OOM is passed on as it is */
    h.fail_next = WEFT_EDEVICE;
    rc = t->allocate(t->ctx, 64 * MiB, 0, &big);
    ok(rc == WEFT_EDEVICE && strstr(weft_last_error(), "simulated device failure"),
       "the device's own error comes through: %s", weft_last_error());
    put(z);

    /* the limit: by API */
    ok(weft_caching_allocator_set_limit(a, 0, 4 * MiB) == 0, "set a 4 MiB limit");
    weft_caching_allocator_empty_cache(a, -1);
    weft_data_ptr s = get(a, 1 * MiB);
    ok(s.data != NULL, "a small segment (2 MiB) fits under it");
    rc = t->allocate(t->ctx, 3 * MiB, 0, &big);
    ok(rc == WEFT_ENOMEM && strstr(weft_last_error(), "a limit of 4.00 MiB"),
       "a 20 MiB segment does not: %s", weft_last_error());
    put(s);
    ok(weft_caching_allocator_set_limit(a, 1, 0) == WEFT_EDEVICE, "set_limit checks the index");
    weft_caching_allocator_destroy(a);
    heap_fini(&h);

    /* the limit: by environment */
    heap_init(&h, 64 * MiB);
    setenv("WEFT_SIM_MEMORY_LIMIT", "3M", 1);
    a = make(&h, 2);
    ok(stats(a, 1).limit_bytes == 3 * MiB, "WEFT_SIM_MEMORY_LIMIT=3M sets every device's limit");
    weft_caching_allocator_destroy(a);
    setenv("WEFT_SIM_MEMORY_LIMIT", "lots", 1);
    weft_device_memory mem = memory_of(&h);
    weft_caching_allocator *bad = (void *)1;
    rc = weft_caching_allocator_create(&bad, "sim", &mem, 1);
    ok(rc == WEFT_EINVAL && bad == NULL && strstr(weft_last_error(), "WEFT_SIM_MEMORY_LIMIT=lots"),
       "a malformed limit is refused by name: %s", weft_last_error());
    unsetenv("WEFT_SIM_MEMORY_LIMIT");
    heap_fini(&h);
}

static void test_bad_input(void)
{
    sim_heap h;
    heap_init(&h, 4 * MiB);
    weft_device_memory mem = memory_of(&h);
    weft_caching_allocator *a = (void *)1;
    mem.raw_free = NULL;
    ok(weft_caching_allocator_create(&a, "sim", &mem, 1) == WEFT_EINVAL && a == NULL &&
           strstr(weft_last_error(), "raw_free"),
       "raw_free is required: %s", weft_last_error());
    mem = memory_of(&h);
    ok(weft_caching_allocator_create(&a, "", &mem, 1) == WEFT_EINVAL, "an empty name is refused");
    ok(weft_caching_allocator_create(&a, "sim", &mem, -1) == WEFT_EINVAL,
       "a negative device count is refused");
    ok(weft_caching_allocator_create(NULL, "sim", &mem, 1) == WEFT_EINVAL, "out NULL is refused");

    /* an older, shorter weft_device_memory: no streams, no events */
    mem.struct_size = (uint32_t)offsetof(weft_device_memory, current_stream);
    ok(weft_caching_allocator_create(&a, "sim", &mem, 1) == 0, "an older, shorter struct works");
    weft_data_ptr p = get(a, 100);
    ok(p.data != NULL, "and allocates (every block on stream NULL)");
    const weft_allocator *t = weft_caching_allocator_table(a);
    weft_data_ptr q = {0};
    ok(t->allocate(t->ctx, 16, 3, &q) == WEFT_EDEVICE && q.data == NULL,
       "a device index out of range is refused: %s", weft_last_error());
    weft_caching_stats st = {.struct_size = 0};
    ok(weft_caching_allocator_stats(a, 0, &st) == WEFT_EINVAL, "stats wants struct_size");
    /* an older stats struct gets only its own fields */
    struct {
        uint32_t struct_size, version;
        uint64_t allocated_bytes, peak;
        uint64_t guard;
    } old = {.struct_size = 24, .guard = 0x5555};
    ok(weft_caching_allocator_stats(a, 0, (weft_caching_stats *)&old) == 0 &&
           old.allocated_bytes == 512 && old.guard == 0x5555,
       "a shorter stats struct is filled up to its size only");
    weft_allocator_stats gen = {.struct_size = sizeof gen};
    ok(t->stats(t->ctx, 0, &gen) == 0 && gen.allocated_bytes == 512 && gen.reserved_bytes == 2 * MiB &&
           gen.alloc_calls == 1 && gen.system_alloc_calls == 1 && gen.free_calls == 0 &&
           gen.cached_bytes == 2 * MiB - 512,
       "the generic allocator stats report the same numbers");
    put(p);
    gen = (weft_allocator_stats){.struct_size = sizeof gen};
    ok(t->stats(t->ctx, 0, &gen) == 0 && gen.free_calls == 1, "a free is counted");
    t->empty_cache(t->ctx);
    ok(stats(a, 0).reserved_bytes == 0, "the generic empty_cache empties every device");
    ok(weft_caching_allocator_destroy(a) == 0 && weft_caching_allocator_destroy(NULL) == 0,
       "destroy, and destroy(NULL)");
    heap_fini(&h);
}

typedef struct {
    weft_caching_allocator *a;
    int seed;
    int failures;
} worker_arg;

static void *worker(void *p)
{
    worker_arg *w = p;
    unsigned s = (unsigned)w->seed;
    weft_data_ptr held[16] = {{0}};
    const weft_allocator *t = weft_caching_allocator_table(w->a);
    for (int i = 0; i < 4000; i++) {
        s = s * 1103515245u + 12345u;
        int slot = (int)((s >> 8) % 16);
        if (held[slot].deleter) {
            /* check nobody else wrote into our block */
            if (((unsigned char *)held[slot].data)[0] != (unsigned char)(slot + w->seed))
                w->failures++;
            held[slot].deleter(held[slot].data, held[slot].ctx);
            held[slot] = (weft_data_ptr){0};
        } else {
            size_t n = 256 + (s >> 12) % (3 * MiB);
            if (t->allocate(t->ctx, n, 0, &held[slot]) != 0)
                w->failures++;
            else
                memset(held[slot].data, slot + w->seed, n < 4096 ? n : 4096);
        }
    }
    for (int i = 0; i < 16; i++)
        if (held[i].deleter)
            held[i].deleter(held[i].data, held[i].ctx);
    return NULL;
}

/* The simulated heap is not thread-safe itself; a lock around it stands in
 * for the device's. */
static pthread_mutex_t heap_mu = PTHREAD_MUTEX_INITIALIZER;

static int locked_alloc(void *ctx, int device, size_t n, void **out)
{
    pthread_mutex_lock(&heap_mu);
    int rc = sim_alloc(ctx, device, n, out);
    pthread_mutex_unlock(&heap_mu);
    return rc;
}

static void locked_free(void *ctx, int device, void *ptr)
{
    pthread_mutex_lock(&heap_mu);
    sim_free(ctx, device, ptr);
    pthread_mutex_unlock(&heap_mu);
}

static void test_threads(void)
{
    sim_heap h;
    heap_init(&h, 512 * MiB);
    weft_device_memory mem = memory_of(&h);
    mem.raw_alloc = locked_alloc;
    mem.raw_free = locked_free;
    mem.current_stream = NULL;
    weft_caching_allocator *a = NULL;
    weft_caching_allocator_create(&a, "sim", &mem, 1);
    pthread_t th[4];
    worker_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (worker_arg){a, 17 * i + 1, 0};
        pthread_create(&th[i], NULL, worker, &args[i]);
    }
    int failures = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        failures += args[i].failures;
    }
    weft_caching_stats st = stats(a, 0);
    ok(failures == 0, "four threads allocating and freeing: no failure, no block shared");
    ok(st.allocated_bytes == 0 && st.active_blocks == 0 && st.inactive_split_bytes == 0,
       "everything returned and merged (allocated %llu, split %llu)",
       (unsigned long long)st.allocated_bytes, (unsigned long long)st.inactive_split_bytes);
    ok(st.cache_hits > st.device_alloc_calls, "most requests came from the cache (%llu hits, "
       "%llu device calls)", (unsigned long long)st.cache_hits,
       (unsigned long long)st.device_alloc_calls);
    ok(weft_caching_allocator_destroy(a) == 0, "destroy");
    heap_fini(&h);
}

int main(void)
{
    test_rounding_and_pools();
    test_split_and_merge();
    test_streams();
    test_through_the_core();
    test_retry_and_oom();
    test_bad_input();
    test_threads();
    return done_testing();
}
