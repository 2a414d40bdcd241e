/* backends/cuda/pinned_cache.h — the CUDA plugin's cache of pinned host
 * blocks for staging host-to-device copies: a block handed to a copy is
 * reused only after the event recorded behind that copy has completed.
 * Plain C over a small table of raw functions (allocation, events), so
 * tests/test_cuda drives it with a simulated heap and simulated events on
 * any machine; pinned.c gives it cudaHostAlloc and CUDA events. */
#ifndef WEFT_BACKENDS_CUDA_PINNED_CACHE_H
#define WEFT_BACKENDS_CUDA_PINNED_CACHE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wfc_pinned_ops {
    void *ctx;
    /* 0, or a negative WEFT_E* code with the message set */
    int (*alloc)(void *ctx, size_t bytes, void **out);
    void (*free)(void *ctx, void *ptr);
    /* an event completing when the work queued on stream so far has */
    int (*event_record)(void *ctx, void *stream, void **event);
    /* 1 done, 0 not yet, < 0 error (treated as "wait for it") */
    int (*event_query)(void *ctx, void *event);
    int (*event_synchronize)(void *ctx, void *event);
    void (*event_destroy)(void *ctx, void *event);
    int (*stream_synchronize)(void *ctx, void *stream);
} wfc_pinned_ops;

typedef struct wfc_pinned_stats {
    uint64_t alloc_calls, free_calls; /* raw allocations and frees */
    uint64_t reuses;                  /* blocks served from the cache */
    uint64_t cached_bytes;            /* free blocks kept */
    uint64_t in_flight;               /* blocks waiting for their event */
} wfc_pinned_stats;

typedef struct wfc_pinned_cache wfc_pinned_cache;

/* limit: the most bytes of free blocks kept; beyond it a block goes back
 * to the system when it is reclaimed.  Returns NULL without memory. */
wfc_pinned_cache *wfc_pinned_create(const wfc_pinned_ops *ops, size_t limit);
/* Waits for every block in flight, then frees everything.  NULL: no-op. */
void wfc_pinned_destroy(wfc_pinned_cache *c);

/* The size class of a request: a power of two from 64 KiB. */
size_t wfc_pinned_round(size_t bytes);
/* A block of at least bytes: a completed cached block of its class, or a
 * new one.  *out NULL on error. */
int wfc_pinned_get(wfc_pinned_cache *c, size_t bytes, void **out);
/* Gives ptr back once the work queued on stream so far (the copy that read
 * it) has completed.  If no event can be recorded, waits for the stream
 * and returns the block at once; the error is returned after that. */
int wfc_pinned_put_after(wfc_pinned_cache *c, void *ptr, void *stream);
/* Gives back a block no work has used. */
void wfc_pinned_put(wfc_pinned_cache *c, void *ptr);
void wfc_pinned_get_stats(wfc_pinned_cache *c, wfc_pinned_stats *out);
/* Frees the completed free blocks (blocks in flight stay). */
void wfc_pinned_empty(wfc_pinned_cache *c);

#ifdef __cplusplus
}
#endif

#endif
