/* c10/quiesce.h — internal: marks the stretches where a thread may run
 * code or read data that a plugin owns (kernels, allocators, device
 * interfaces), so that unloading can wait for those threads before the
 * plugin's fini and dlclose.  The marking is two thread-local stores: no
 * lock, no shared write, no read-modify-write on the dispatch path. */
#ifndef WF_QUIESCE_H
#define WF_QUIESCE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* One per thread that ever entered, linked into a global list.  seq is odd
 * while its thread is inside and only that thread writes it.  A record is
 * handed to a new thread when its own exits, and never freed, so the
 * unloader can walk the list without a lock. */
typedef struct wf_reader {
    _Atomic uint64_t seq;
    /* the emergency record shared by threads that could not get one of
     * their own (out of memory): seq then counts threads inside */
    bool shared;
    atomic_bool in_use;
    struct wf_reader *next;
} wf_reader;

typedef struct wf_reader_tls {
    wf_reader *reader;
    unsigned depth; /* nesting: kernels call operators */
} wf_reader_tls;

/* hidden: the compiler may then use the cheaper local-dynamic TLS model */
extern _Thread_local wf_reader_tls wf__reader_tls __attribute__((visibility("hidden")));
wf_reader *wf__reader_register(wf_reader_tls *t);
void wf__reader_shared_exit(wf_reader *r);

/* Returns the thread's record holder, to give to wf__reader_exit: one
 * thread-local lookup per section instead of two. */
static inline wf_reader_tls *wf__reader_enter(void)
{
    wf_reader_tls *t = &wf__reader_tls;
    /* opaque, so the compiler keeps the address instead of looking the
     * thread-local up again after the call */
    __asm__("" : "+r"(t));
    if (t->depth++)
        return t;
    wf_reader *r = t->reader;
    if (__builtin_expect(!r, 0))
        r = wf__reader_register(t);
    if (__builtin_expect(r->shared, 0)) {
        atomic_fetch_add_explicit(&r->seq, 1, memory_order_seq_cst);
        return t;
    }
    uint64_t s = atomic_load_explicit(&r->seq, memory_order_relaxed);
    atomic_store_explicit(&r->seq, s + 1, memory_order_relaxed);
    /* Only the compiler must not move the loads of the section above the
     * store: the unloader's heavy barrier (wf__quiesce) orders it in the
     * hardware, so no fence is paid here. */
    atomic_signal_fence(memory_order_seq_cst);
    return t;
}

static inline void wf__reader_exit(wf_reader_tls *t)
{
    if (--t->depth)
        return;
    wf_reader *r = t->reader;
    if (__builtin_expect(r->shared, 0)) {
        wf__reader_shared_exit(r);
        return;
    }
    uint64_t s = atomic_load_explicit(&r->seq, memory_order_relaxed);
    /* release: everything the section did happens before the unloader sees
     * the thread leave */
    atomic_store_explicit(&r->seq, s + 1, memory_order_release);
}

/* Whether the calling thread is inside a section (unloading from there
 * would unmap code the thread returns to). */
static inline bool wf__reader_inside(void)
{
    return wf__reader_tls.depth != 0;
}

/* Waits until every thread that was inside a section when this was called
 * has left it once.  Call after unpublishing what the sections may find;
 * never from inside a section, and without holding a lock a section may
 * take. */
void wf__quiesce(void);

#endif
