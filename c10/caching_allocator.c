/* c10/caching_allocator.c — the device caching allocator, written once for
 * every device plugin (CUDA, HIP, out-of-tree ones) over the raw functions of
 * weft_device_memory.
 *
 * The policy is PyTorch's CUDA allocator's, because it is tuned to how deep
 * learning allocates (many short-lived blocks of a few recurring sizes):
 *
 * - every request is rounded up to 512 bytes;
 * - requests up to 1 MiB come from the small pool, which carves 2 MiB
 *   segments; 1-10 MiB requests carve 20 MiB segments of the large pool;
 *   larger ones get a segment of their own, rounded up to 2 MiB;
 * - a free block is found best-fit in the order (stream, size, address), and
 *   split when the rest is worth keeping (512 bytes in the small pool, more
 *   than 1 MiB in the large one); freeing merges it with free neighbours of
 *   the same segment;
 * - each block belongs to the stream it was allocated on: a stream runs in
 *   order, so a block freed on the host can be reused at once by later work on
 *   that stream.  weft_record_stream declares use on another stream; on free,
 *   such a block waits for events recorded on those streams;
 * - when the device (or the configured limit) refuses a segment, cached
 *   segments are given back and the allocation retried before out of memory
 *   is reported, with the numbers that tell fragmentation from real use.
 *
 * One mutex per allocator guards everything: the block operations are a few
 * hundred instructions, dwarfed by the kernels the memory is for.  Free blocks
 * live in one sorted array per device and pool: inserts and removals are a
 * memmove of pointers, which stays cheap at the few hundred blocks a training
 * loop keeps.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c10/core.h"

#define ROUND 512u
#define SMALL_LIMIT ((size_t)1 << 20)        /* requests <= 1 MiB: small pool */
#define SMALL_SEGMENT ((size_t)2 << 20)      /* the small pool's segments */
#define MID_LIMIT ((size_t)10 << 20)         /* requests < 10 MiB share ... */
#define MID_SEGMENT ((size_t)20 << 20)       /* ... 20 MiB segments */
#define LARGE_ROUND ((size_t)2 << 20)        /* larger ones: 2 MiB multiples */

enum { POOL_SMALL, POOL_LARGE, NPOOLS };

typedef struct block block;
struct block {
    weft_caching_allocator *owner;
    char *ptr;
    size_t size;      /* rounded */
    size_t requested; /* what the caller asked for (while allocated) */
    void *stream;     /* the stream it was allocated on */
    block *prev, *next; /* neighbours within the segment, by address */
    int device;
    uint8_t pool;
    bool allocated;
    int pending_events;  /* events that must complete before reuse */
    void **use_streams;  /* streams declared by weft_record_stream */
    int n_use, cap_use;
};

typedef struct {
    block **v;
    size_t n, cap;
} block_set;

typedef struct pending {
    void *event;
    block *b;
    struct pending *next;
} pending;

typedef struct {
    block_set free_blocks[NPOOLS];
    pending *waiting;
    weft_caching_stats st;
    uint64_t frees; /* blocks given back by their users */
} device_state;

struct weft_caching_allocator {
    pthread_mutex_t mu;
    weft_device_memory mem;
    weft_allocator table;
    char name[32];
    int ndev;
    device_state *dev;
    uint64_t live; /* blocks allocated or waiting on events, all devices */
};

/* -------------------------------------------------------- the free sets */

/* The best-fit order: stream, then size, then address. */
static int block_cmp(const block *a, const block *b)
{
    uintptr_t sa = (uintptr_t)a->stream, sb = (uintptr_t)b->stream;
    if (sa != sb)
        return sa < sb ? -1 : 1;
    if (a->size != b->size)
        return a->size < b->size ? -1 : 1;
    if (a->ptr != b->ptr)
        return (uintptr_t)a->ptr < (uintptr_t)b->ptr ? -1 : 1;
    return 0;
}

/* The first position whose block is not before key. */
static size_t lower_bound(const block_set *s, const block *key)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (block_cmp(s->v[mid], key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int set_insert(block_set *s, block *b)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        block **v = wf__realloc(s->v, cap * sizeof *v);
        if (!v)
            return WEFT_ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    size_t i = lower_bound(s, b);
    memmove(s->v + i + 1, s->v + i, (s->n - i) * sizeof *s->v);
    s->v[i] = b;
    s->n++;
    return 0;
}

static void set_remove(block_set *s, block *b)
{
    size_t i = lower_bound(s, b);
    if (i < s->n && s->v[i] == b) {
        memmove(s->v + i, s->v + i + 1, (s->n - i - 1) * sizeof *s->v);
        s->n--;
    }
}

/* The smallest free block of the stream that holds size bytes, or NULL. */
static block *set_best_fit(const block_set *s, void *stream, size_t size)
{
    block key = {.stream = stream, .size = size, .ptr = NULL};
    size_t i = lower_bound(s, &key);
    if (i < s->n && s->v[i]->stream == stream)
        return s->v[i];
    return NULL;
}

/* -------------------------------------------------------------- sizing */

static size_t round_request(size_t n)
{
    return n < ROUND ? ROUND : (n + ROUND - 1) / ROUND * ROUND;
}

static int pool_of(size_t size)
{
    return size <= SMALL_LIMIT ? POOL_SMALL : POOL_LARGE;
}

static size_t segment_size(size_t size)
{
    if (size <= SMALL_LIMIT)
        return SMALL_SEGMENT;
    if (size < MID_LIMIT)
        return MID_SEGMENT;
    return (size + LARGE_ROUND - 1) / LARGE_ROUND * LARGE_ROUND;
}

/* Whether the rest of a block after size bytes is worth a block of its own. */
static bool worth_splitting(const block *b, size_t size)
{
    size_t rest = b->size - size;
    return b->pool == POOL_SMALL ? rest >= ROUND : rest > SMALL_LIMIT;
}

/* ------------------------------------------------- freeing and merging */

static bool is_free(const block *b)
{
    return b && !b->allocated && b->pending_events == 0;
}

/* Merges b's free neighbour into b (the neighbour leaves the free set). */
static void absorb(device_state *d, block *b, block *n)
{
    set_remove(&d->free_blocks[b->pool], n);
    if (n == b->prev) {
        b->ptr = n->ptr;
        b->prev = n->prev;
        if (b->prev)
            b->prev->next = b;
    } else {
        b->next = n->next;
        if (b->next)
            b->next->prev = b;
    }
    b->size += n->size;
    free(n->use_streams);
    free(n);
}

/* Puts a block no one uses back into its pool, merged with free neighbours.
 * The set insert can only fail for lack of memory; the block then stays out
 * of the cache until empty_cache (it is still counted as reserved), which
 * loses nothing but reuse. */
static void return_block(device_state *d, block *b)
{
    if (is_free(b->prev))
        absorb(d, b, b->prev);
    if (is_free(b->next))
        absorb(d, b, b->next);
    b->n_use = 0;
    (void)set_insert(&d->free_blocks[b->pool], b);
}

/* Releases the blocks whose cross-stream events have completed. */
static void process_events(weft_caching_allocator *a, device_state *d)
{
    pending **pp = &d->waiting;
    while (*pp) {
        pending *p = *pp;
        int done = a->mem.event_query(a->mem.ctx, p->event);
        if (done == 0) {
            pp = &p->next;
            continue;
        }
        /* An error querying the event: wait for the device instead, so the
         * block is certainly idle when it is reused. */
        if (done < 0 && a->mem.synchronize)
            a->mem.synchronize(a->mem.ctx, p->b->device);
        a->mem.event_destroy(a->mem.ctx, p->event);
        *pp = p->next;
        if (--p->b->pending_events == 0) {
            a->live--;
            return_block(d, p->b);
        }
        free(p);
    }
}

/* The split segments' free bytes, recomputed for the statistics. */
static uint64_t inactive_split_bytes(const device_state *d)
{
    uint64_t total = 0;
    for (int p = 0; p < NPOOLS; p++)
        for (size_t i = 0; i < d->free_blocks[p].n; i++) {
            const block *b = d->free_blocks[p].v[i];
            if (b->prev || b->next)
                total += b->size;
        }
    return total;
}

/* Gives back every cached segment that is one free block. */
static void release_cached(weft_caching_allocator *a, int device)
{
    device_state *d = &a->dev[device];
    bool synced = false;
    for (int p = 0; p < NPOOLS; p++) {
        block_set *s = &d->free_blocks[p];
        size_t kept = 0;
        for (size_t i = 0; i < s->n; i++) {
            block *b = s->v[i];
            if (b->prev || b->next) {
                s->v[kept++] = b;
                continue;
            }
            if (!synced && a->mem.synchronize) {
                a->mem.synchronize(a->mem.ctx, device);
                synced = true;
            }
            a->mem.raw_free(a->mem.ctx, device, b->ptr);
            d->st.reserved_bytes -= b->size;
            d->st.segments--;
            d->st.device_free_calls++;
            free(b->use_streams);
            free(b);
        }
        s->n = kept;
    }
}

/* ------------------------------------------------------------ allocate */

static void block_deleter(void *data, void *ctx);

/* A new segment from the device (respecting the limit). */
static int new_segment(weft_caching_allocator *a, int device, size_t bytes, block **out)
{
    device_state *d = &a->dev[device];
    if (d->st.limit_bytes && d->st.reserved_bytes + bytes > d->st.limit_bytes)
        return WEFT_ENOMEM;
    block *b = wf__calloc(1, sizeof *b);
    if (!b)
        return WEFT_ENOMEM;
    void *ptr = NULL;
    int rc = a->mem.raw_alloc(a->mem.ctx, device, bytes, &ptr);
    if (rc == 0 && !ptr)
        rc = WEFT_ENOMEM;
    if (rc < 0) {
        free(b);
        return rc;
    }
    b->owner = a;
    b->ptr = ptr;
    b->size = bytes;
    b->device = device;
    d->st.device_alloc_calls++;
    d->st.segments++;
    d->st.reserved_bytes += bytes;
    if (d->st.reserved_bytes > d->st.peak_reserved_bytes)
        d->st.peak_reserved_bytes = d->st.reserved_bytes;
    *out = b;
    return 0;
}

static void format_bytes(char *buf, size_t n, uint64_t bytes)
{
    if (bytes >= ((uint64_t)1 << 30))
        snprintf(buf, n, "%.2f GiB", (double)bytes / (double)((uint64_t)1 << 30));
    else if (bytes >= ((uint64_t)1 << 20))
        snprintf(buf, n, "%.2f MiB", (double)bytes / (double)((uint64_t)1 << 20));
    else
        snprintf(buf, n, "%llu bytes", (unsigned long long)bytes);
}

/* The out-of-memory message: what was asked, what is in use, what is held
 * but free (fragmentation), and the limit. */
static int oom_error(weft_caching_allocator *a, int device, size_t nbytes, int raw_rc)
{
    device_state *d = &a->dev[device];
    d->st.ooms++;
    if (raw_rc != WEFT_ENOMEM)
        return raw_rc; /* the device's own error and message */
    char want[32], alloc[32], resv[32], frag[32], lim[48];
    format_bytes(want, sizeof want, nbytes);
    format_bytes(alloc, sizeof alloc, d->st.allocated_bytes);
    format_bytes(resv, sizeof resv, d->st.reserved_bytes);
    format_bytes(frag, sizeof frag, inactive_split_bytes(d));
    if (d->st.limit_bytes) {
        char l[32];
        format_bytes(l, sizeof l, d->st.limit_bytes);
        snprintf(lim, sizeof lim, "a limit of %s", l);
    } else {
        snprintf(lim, sizeof lim, "no limit set");
    }
    return wf__errorf(WEFT_ENOMEM,
                      "%s:%d: out of memory allocating %s: %s allocated by tensors, %s "
                      "reserved by the caching allocator (%s of it free but in split "
                      "segments), %s; freeing the cache and retrying did not help%s",
                      a->name, device, want, alloc, resv, frag, lim,
                      inactive_split_bytes(d) > nbytes ? " (the free memory is fragmented)" : "");
}

static int caching_allocate(void *ctx, size_t nbytes, int device, weft_data_ptr *out)
{
    weft_caching_allocator *a = ctx;
    *out = (weft_data_ptr){0};
    if (device < 0 || device >= a->ndev)
        return wf__errorf(WEFT_EDEVICE, "%s: device index %d out of range (%d devices)",
                          a->name, device, a->ndev);
    if (nbytes == 0)
        return 0;
    if (nbytes > SIZE_MAX - LARGE_ROUND)
        return wf__errorf(WEFT_ENOMEM, "%s: cannot allocate %zu bytes", a->name, nbytes);
    void *stream = a->mem.current_stream ? a->mem.current_stream(a->mem.ctx, device) : NULL;
    size_t size = round_request(nbytes);
    int pool = pool_of(size);

    pthread_mutex_lock(&a->mu);
    device_state *d = &a->dev[device];
    if (d->waiting)
        process_events(a, d);
    block *b = set_best_fit(&d->free_blocks[pool], stream, size);
    int rc = 0;
    if (b) {
        set_remove(&d->free_blocks[pool], b);
        d->st.cache_hits++;
    } else {
        rc = new_segment(a, device, segment_size(size), &b);
        if (rc == WEFT_ENOMEM) {
            /* Give back what the cache holds, then try once more. */
            d->st.retries++;
            release_cached(a, device);
            rc = new_segment(a, device, segment_size(size), &b);
        }
        if (rc < 0) {
            rc = oom_error(a, device, nbytes, rc);
            pthread_mutex_unlock(&a->mu);
            return rc;
        }
        b->pool = (uint8_t)pool;
        b->stream = stream;
    }
    if (worth_splitting(b, size)) {
        block *rest = wf__calloc(1, sizeof *rest);
        if (rest) {
            *rest = (block){.owner = a, .ptr = b->ptr + size, .size = b->size - size,
                            .stream = b->stream, .prev = b, .next = b->next,
                            .device = device, .pool = b->pool};
            if (b->next)
                b->next->prev = rest;
            b->next = rest;
            b->size = size;
            if (set_insert(&d->free_blocks[pool], rest) < 0) {
                /* Undo: keep the whole block rather than lose the rest. */
                b->next = rest->next;
                if (b->next)
                    b->next->prev = b;
                b->size += rest->size;
                free(rest);
            }
        }
    }
    b->allocated = true;
    b->requested = nbytes;
    a->live++;
    d->st.allocated_bytes += b->size;
    d->st.requested_bytes += nbytes;
    d->st.active_blocks++;
    if (d->st.allocated_bytes > d->st.peak_allocated_bytes)
        d->st.peak_allocated_bytes = d->st.allocated_bytes;
    pthread_mutex_unlock(&a->mu);
    *out = (weft_data_ptr){.data = b->ptr, .ctx = b, .deleter = block_deleter};
    return 0;
}

/* Frees a block: back to its pool, or, when other streams use it, after
 * events recorded on them complete.  Any thread. */
static void block_deleter(void *data, void *ctx)
{
    (void)data;
    block *b = ctx;
    weft_caching_allocator *a = b->owner;
    pthread_mutex_lock(&a->mu);
    device_state *d = &a->dev[b->device];
    b->allocated = false;
    d->frees++;
    d->st.allocated_bytes -= b->size;
    d->st.requested_bytes -= b->requested;
    d->st.active_blocks--;
    for (int i = 0; i < b->n_use; i++) {
        void *event = NULL;
        pending *p = a->mem.event_record ? wf__malloc(sizeof *p) : NULL;
        if (!p || a->mem.event_record(a->mem.ctx, b->device, b->use_streams[i], &event) < 0) {
            /* No event to wait on: wait for the whole device instead. */
            free(p);
            if (a->mem.synchronize)
                a->mem.synchronize(a->mem.ctx, b->device);
            continue;
        }
        *p = (pending){.event = event, .b = b, .next = d->waiting};
        d->waiting = p;
        b->pending_events++;
    }
    b->n_use = 0;
    if (b->pending_events == 0) {
        a->live--;
        return_block(d, b);
    } else if (d->waiting) {
        process_events(a, d);
    }
    pthread_mutex_unlock(&a->mu);
}

/* --------------------------------------------------------- the table */

static int table_stats(void *ctx, int device, weft_allocator_stats *out)
{
    weft_caching_allocator *a = ctx;
    weft_caching_stats st = {.struct_size = sizeof st};
    int rc = weft_caching_allocator_stats(a, device, &st);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&a->mu);
    uint64_t frees = a->dev[device].frees;
    pthread_mutex_unlock(&a->mu);
    /* the generic view: calls are the users', "system" calls the device's */
    weft_allocator_stats full = {
        .struct_size = sizeof full,
        .version = 2,
        .allocated_bytes = st.allocated_bytes,
        .peak_allocated_bytes = st.peak_allocated_bytes,
        .reserved_bytes = st.reserved_bytes,
        .alloc_calls = st.cache_hits + st.device_alloc_calls,
        .free_calls = frees,
        .cached_bytes = st.reserved_bytes - st.allocated_bytes,
        .cache_hits = st.cache_hits,
        .system_alloc_calls = st.device_alloc_calls,
        .system_free_calls = st.device_free_calls,
        .cache_limit_bytes = st.limit_bytes,
    };
    size_t n = out->struct_size < sizeof full ? out->struct_size : sizeof full;
    memcpy(out, &full, n);
    out->struct_size = (uint32_t)n;
    return 0;
}

static void table_empty_cache(void *ctx)
{
    weft_caching_allocator_empty_cache(ctx, -1);
}

/* ----------------------------------------------------------- the API */

/* "512", "64K", "2M", "1G" -> bytes; false when it is not a size. */
static bool parse_size(const char *text, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text || text[0] == '-')
        return false;
    int shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    default: break;
    }
    if (*end || (shift && v > (UINT64_MAX >> shift)))
        return false;
    *out = (uint64_t)v << shift;
    return true;
}

int weft_caching_allocator_create(weft_caching_allocator **out, const char *name,
                                  const weft_device_memory *mem, int device_count)
{
    if (!out)
        return wf__errorf(WEFT_EINVAL, "weft_caching_allocator_create: out is NULL");
    *out = NULL;
    if (!name || !*name || strlen(name) >= sizeof(((weft_caching_allocator *)0)->name))
        return wf__errorf(WEFT_EINVAL, "weft_caching_allocator_create: the name must have "
                                       "1 to 31 characters");
    if (!mem || mem->struct_size < offsetof(weft_device_memory, current_stream) ||
        !mem->raw_alloc || !mem->raw_free)
        return wf__errorf(WEFT_EINVAL, "weft_caching_allocator_create(%s): raw_alloc and "
                                       "raw_free are required", name);
    if (device_count < 0 || device_count > 4096)
        return wf__errorf(WEFT_EINVAL, "weft_caching_allocator_create(%s): device count %d "
                                       "out of range", name, device_count);
    char env[64], *p;
    snprintf(env, sizeof env, "WEFT_%s_MEMORY_LIMIT", name);
    for (p = env; *p; p++)
        *p = isalnum((unsigned char)*p) ? (char)toupper((unsigned char)*p) : '_';
    uint64_t limit = 0;
    const char *text = getenv(env);
    if (text && *text && !parse_size(text, &limit))
        return wf__errorf(WEFT_EINVAL, "%s=%s is not a size (bytes, or a number with K, M or "
                                       "G)", env, text);

    weft_caching_allocator *a = wf__calloc(1, sizeof *a);
    if (!a || (device_count && !(a->dev = wf__calloc((size_t)device_count, sizeof *a->dev)))) {
        free(a);
        return wf__errorf(WEFT_ENOMEM, "out of memory creating a caching allocator");
    }
    memcpy(&a->mem, mem, mem->struct_size < sizeof a->mem ? mem->struct_size : sizeof a->mem);
    a->mem.struct_size = sizeof a->mem;
    /* Record-stream needs all three event functions; otherwise it falls
     * back to synchronizing the device. */
    if (!a->mem.event_record || !a->mem.event_query || !a->mem.event_destroy)
        a->mem.event_record = NULL, a->mem.event_query = NULL, a->mem.event_destroy = NULL;
    snprintf(a->name, sizeof a->name, "%s", name);
    a->ndev = device_count;
    for (int i = 0; i < device_count; i++)
        a->dev[i].st.limit_bytes = limit;
    pthread_mutex_init(&a->mu, NULL);
    a->table = (weft_allocator){.struct_size = sizeof a->table, .version = WEFT_ALLOCATOR_VERSION,
                                .ctx = a, .allocate = caching_allocate, .stats = table_stats,
                                .empty_cache = table_empty_cache};
    *out = a;
    return 0;
}

const weft_allocator *weft_caching_allocator_table(weft_caching_allocator *a)
{
    return a ? &a->table : NULL;
}

static int check_device(const weft_caching_allocator *a, int device, const char *fn)
{
    if (!a)
        return wf__errorf(WEFT_EINVAL, "%s: allocator is NULL", fn);
    if (device < 0 || device >= a->ndev)
        return wf__errorf(WEFT_EDEVICE, "%s(%s): device index %d out of range (%d devices)",
                          fn, a->name, device, a->ndev);
    return 0;
}

int weft_caching_allocator_stats(weft_caching_allocator *a, int device, weft_caching_stats *out)
{
    int rc = check_device(a, device, "weft_caching_allocator_stats");
    if (rc < 0)
        return rc;
    if (!out || out->struct_size < 2 * sizeof(uint32_t))
        return wf__errorf(WEFT_EINVAL, "weft_caching_allocator_stats: out is NULL or its "
                                       "struct_size is not set");
    pthread_mutex_lock(&a->mu);
    device_state *d = &a->dev[device];
    if (d->waiting)
        process_events(a, d);
    weft_caching_stats st = d->st;
    st.inactive_split_bytes = inactive_split_bytes(d);
    pthread_mutex_unlock(&a->mu);
    st.struct_size = out->struct_size < sizeof st ? out->struct_size : (uint32_t)sizeof st;
    st.version = WEFT_CACHING_STATS_VERSION;
    memcpy(out, &st, st.struct_size);
    return 0;
}

int weft_caching_allocator_set_limit(weft_caching_allocator *a, int device, uint64_t bytes)
{
    int rc = check_device(a, device, "weft_caching_allocator_set_limit");
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&a->mu);
    a->dev[device].st.limit_bytes = bytes;
    pthread_mutex_unlock(&a->mu);
    return 0;
}

int weft_caching_allocator_empty_cache(weft_caching_allocator *a, int device)
{
    if (device != -1) {
        int rc = check_device(a, device, "weft_caching_allocator_empty_cache");
        if (rc < 0)
            return rc;
    } else if (!a) {
        return wf__errorf(WEFT_EINVAL, "weft_caching_allocator_empty_cache: allocator is NULL");
    }
    pthread_mutex_lock(&a->mu);
    for (int i = 0; i < a->ndev; i++)
        if (device == -1 || device == i) {
            if (a->dev[i].waiting)
                process_events(a, &a->dev[i]);
            release_cached(a, i);
        }
    pthread_mutex_unlock(&a->mu);
    return 0;
}

int weft_caching_allocator_destroy(weft_caching_allocator *a)
{
    if (!a)
        return 0;
    pthread_mutex_lock(&a->mu);
    for (int i = 0; i < a->ndev; i++)
        if (a->dev[i].waiting)
            process_events(a, &a->dev[i]);
    if (a->live) {
        uint64_t live = a->live;
        pthread_mutex_unlock(&a->mu);
        return wf__errorf(WEFT_EBUSY, "weft_caching_allocator_destroy(%s): %llu blocks are "
                                      "still allocated or in use by a stream",
                          a->name, (unsigned long long)live);
    }
    for (int i = 0; i < a->ndev; i++) {
        release_cached(a, i);
        for (int p = 0; p < NPOOLS; p++) {
            /* Blocks of split segments cannot remain once nothing is live:
             * merging made each segment one block, which release_cached freed. */
            free(a->dev[i].free_blocks[p].v);
        }
    }
    pthread_mutex_unlock(&a->mu);
    pthread_mutex_destroy(&a->mu);
    free(a->dev);
    free(a);
    return 0;
}

int weft_record_stream(const weft_tensor *t, void *stream)
{
    if (!t)
        return wf__errorf(WEFT_EINVAL, "weft_record_stream: tensor is NULL");
    const wf_storage *s = t->storage;
    if (!s || s->data.deleter != block_deleter)
        return 0; /* not a caching allocator's block: nothing to defer */
    block *b = s->data.ctx;
    weft_caching_allocator *a = b->owner;
    int rc = 0;
    pthread_mutex_lock(&a->mu);
    if (stream != b->stream) {
        bool known = false;
        for (int i = 0; i < b->n_use; i++)
            known |= b->use_streams[i] == stream;
        if (!known && b->n_use == b->cap_use) {
            int cap = b->cap_use ? 2 * b->cap_use : 2;
            void **v = wf__realloc(b->use_streams, (size_t)cap * sizeof *v);
            if (!v)
                rc = wf__errorf(WEFT_ENOMEM, "out of memory in weft_record_stream");
            else
                b->use_streams = v, b->cap_use = cap;
        }
        if (!known && rc == 0)
            b->use_streams[b->n_use++] = stream;
    }
    pthread_mutex_unlock(&a->mu);
    return rc;
}
