/* backends/cuda/pinned_cache.c — the pinned staging cache (see
 * pinned_cache.h).  Blocks are kept in one list: each is free, in use, or
 * in flight behind an event.  The lists stay short (a few blocks per size
 * class a program copies with), so a walk under one mutex is cheaper than
 * any index; reclaiming in-flight blocks happens on the next request, so
 * no thread polls. */
#include <pthread.h>
#include <stdlib.h>

#include "pinned_cache.h"

#define MIN_BLOCK ((size_t)64 << 10)

enum state { FREE, IN_USE, IN_FLIGHT };

typedef struct block {
    void *ptr;
    size_t size;
    int state;
    void *event;
    struct block *next;
} block;

struct wfc_pinned_cache {
    wfc_pinned_ops ops;
    size_t limit;
    pthread_mutex_t lock;
    block *blocks;
    wfc_pinned_stats stats;
};

size_t wfc_pinned_round(size_t bytes)
{
    size_t s = MIN_BLOCK;
    while (s < bytes && s <= SIZE_MAX / 2)
        s *= 2;
    return s;
}

wfc_pinned_cache *wfc_pinned_create(const wfc_pinned_ops *ops, size_t limit)
{
    wfc_pinned_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->ops = *ops;
    c->limit = limit;
    pthread_mutex_init(&c->lock, NULL);
    return c;
}

/* Unlinks and frees b (its event, its memory). */
static void release_block(wfc_pinned_cache *c, block **link)
{
    block *b = *link;
    *link = b->next;
    if (b->event)
        c->ops.event_destroy(c->ops.ctx, b->event);
    if (b->state == FREE)
        c->stats.cached_bytes -= b->size;
    if (b->state == IN_FLIGHT)
        c->stats.in_flight--;
    c->ops.free(c->ops.ctx, b->ptr);
    c->stats.free_calls++;
    free(b);
}

/* Blocks whose event completed become free; past the limit they go. */
static void reclaim(wfc_pinned_cache *c)
{
    for (block **link = &c->blocks; *link;) {
        block *b = *link;
        if (b->state == IN_FLIGHT && c->ops.event_query(c->ops.ctx, b->event) == 1) {
            c->ops.event_destroy(c->ops.ctx, b->event);
            b->event = NULL;
            c->stats.in_flight--;
            if (c->stats.cached_bytes + b->size > c->limit) {
                b->state = IN_USE; /* counted neither as cached nor in flight */
                release_block(c, link);
                continue;
            }
            b->state = FREE;
            c->stats.cached_bytes += b->size;
        }
        link = &b->next;
    }
}

int wfc_pinned_get(wfc_pinned_cache *c, size_t bytes, void **out)
{
    *out = NULL;
    size_t size = wfc_pinned_round(bytes);
    pthread_mutex_lock(&c->lock);
    reclaim(c);
    for (block *b = c->blocks; b; b = b->next)
        if (b->state == FREE && b->size == size) {
            b->state = IN_USE;
            c->stats.cached_bytes -= size;
            c->stats.reuses++;
            *out = b->ptr;
            pthread_mutex_unlock(&c->lock);
            return 0;
        }
    block *b = calloc(1, sizeof *b);
    int rc = b ? c->ops.alloc(c->ops.ctx, size, &b->ptr) : -1;
    if (rc == 0) {
        b->size = size;
        b->state = IN_USE;
        b->next = c->blocks;
        c->blocks = b;
        c->stats.alloc_calls++;
        *out = b->ptr;
    } else {
        free(b);
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

static block *find(wfc_pinned_cache *c, void *ptr)
{
    block *b = c->blocks;
    while (b && b->ptr != ptr)
        b = b->next;
    return b;
}

static void make_free(wfc_pinned_cache *c, block *b)
{
    b->state = FREE;
    c->stats.cached_bytes += b->size;
}

int wfc_pinned_put_after(wfc_pinned_cache *c, void *ptr, void *stream)
{
    pthread_mutex_lock(&c->lock);
    block *b = find(c, ptr);
    int rc = 0;
    if (b && b->state == IN_USE) {
        void *ev = NULL;
        rc = c->ops.event_record(c->ops.ctx, stream, &ev);
        if (rc == 0) {
            b->event = ev;
            b->state = IN_FLIGHT;
            c->stats.in_flight++;
        } else {
            /* no event: the stream itself tells when the copy is done */
            c->ops.stream_synchronize(c->ops.ctx, stream);
            make_free(c, b);
        }
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

void wfc_pinned_put(wfc_pinned_cache *c, void *ptr)
{
    pthread_mutex_lock(&c->lock);
    block *b = find(c, ptr);
    if (b && b->state == IN_USE)
        make_free(c, b);
    pthread_mutex_unlock(&c->lock);
}

void wfc_pinned_get_stats(wfc_pinned_cache *c, wfc_pinned_stats *out)
{
    pthread_mutex_lock(&c->lock);
    reclaim(c);
    *out = c->stats;
    pthread_mutex_unlock(&c->lock);
}

void wfc_pinned_empty(wfc_pinned_cache *c)
{
    pthread_mutex_lock(&c->lock);
    reclaim(c);
    for (block **link = &c->blocks; *link;)
        if ((*link)->state == FREE)
            release_block(c, link);
        else
            link = &(*link)->next;
    pthread_mutex_unlock(&c->lock);
}

void wfc_pinned_destroy(wfc_pinned_cache *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->lock);
    for (block *b = c->blocks; b; b = b->next)
        if (b->state == IN_FLIGHT)
            c->ops.event_synchronize(c->ops.ctx, b->event);
    while (c->blocks)
        release_block(c, &c->blocks);
    pthread_mutex_unlock(&c->lock);
    pthread_mutex_destroy(&c->lock);
    free(c);
}
