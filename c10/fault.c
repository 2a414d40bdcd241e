/* c10/fault.c — allocation fault injection, as SQLite's test malloc: every
 * allocation weft makes for itself (c10, dispatch, autograd, the loader, nn,
 * the host allocator) asks wf__fault_alloc first, so a test can make the
 * n-th allocation from now fail and check that the call fails cleanly:
 * a negative code with a message, nothing leaked, nothing half-changed.
 * Disarmed, the check is one relaxed load of a flag that is never written. */
#include <stdlib.h>
#include <string.h>

#include "c10/core.h"

atomic_bool wf__fault_armed;
static atomic_long countdown;   /* allocations still to succeed */
static atomic_long injected;    /* failures since the last arm */
static atomic_bool persistent;  /* once failing, keep failing */

bool wf__fault_hit(void)
{
    long left = atomic_fetch_sub_explicit(&countdown, 1, memory_order_relaxed);
    if (left > 0)
        return false;
    if (left < 0 && !atomic_load_explicit(&persistent, memory_order_relaxed)) {
        atomic_store_explicit(&countdown, -1, memory_order_relaxed); /* keep it from wrapping */
        return false;
    }
    atomic_fetch_add_explicit(&injected, 1, memory_order_relaxed);
    return true;
}

WEFT_API long weft_fault_inject_alloc(long n, int keep_failing)
{
    atomic_store(&wf__fault_armed, false);
    long was = atomic_exchange(&injected, 0);
    if (n >= 0) {
        atomic_store(&countdown, n);
        atomic_store(&persistent, keep_failing != 0);
        atomic_store(&wf__fault_armed, true);
    }
    return was;
}

WEFT_API void *weft_malloc(size_t n)
{
    return wf__malloc(n);
}

WEFT_API void *weft_calloc(size_t n, size_t size)
{
    return wf__calloc(n, size);
}

WEFT_API void *weft_realloc(void *p, size_t n)
{
    return wf__realloc(p, n);
}

WEFT_API char *weft_strdup(const char *s)
{
    return wf__strdup(s);
}

WEFT_API void weft_free(void *p)
{
    free(p);
}
