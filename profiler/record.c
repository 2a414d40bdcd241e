/* profiler/record.c — recording: sessions, the per-thread buffers, the
 * Profiler key's kernel, user ranges, and the hooks through which c10
 * (storages) and autograd (nodes made and run) report to the profiler.
 *
 * The hot path is the Profiler key's kernel: a thread that profiles has the
 * key in its dispatch include set, so every operator it calls comes here
 * first.  It appends to the thread's own buffer (no lock, no atomic), reads
 * the clock twice and calls the layers below.  A thread that does not
 * profile never sees the key, so it pays nothing; c10 and autograd pay one
 * relaxed load of a NULL hook while nobody profiles at all. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "autograd/autograd.h"
#include "dispatch/dispatcher.h"
#include "profiler/profiler.h"

_Atomic int64_t wr__live[WEFT_MAX_DEVICE_TYPES];

/* The buffer the calling thread records into, or NULL. */
static _Thread_local wr_buffer *tls_buffer WF_TLS_FAST;
/* Ranges pushed by this thread and not popped, recorded or not: a pop
 * without its push is an error also while the thread does not profile. */
static _Thread_local int32_t tls_open_ranges;

/* Threads recording anywhere, and those among them profiling memory: the
 * first to start installs the hooks, the last to stop removes them. */
static pthread_mutex_t global_mutex = PTHREAD_MUTEX_INITIALIZER;
static int n_recording, n_memory;

/* Stops a thread's recording when it exits without weft_profiler_stop. */
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

static inline int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ------------------------------------------------------------ buffers */

static const char *buffer_strdup(wr_buffer *b, const char *s)
{
    size_t len = strlen(s) + 1;
    wr_strblock *blk = b->strings;
    if (!blk || blk->size - blk->used < len) {
        size_t size = len > 4000 ? len : 4000;
        blk = wf__malloc(sizeof *blk + size);
        if (!blk)
            return NULL;
        blk->used = 0;
        blk->size = size;
        blk->next = b->strings;
        b->strings = blk;
    }
    char *out = blk->text + blk->used;
    memcpy(out, s, len);
    blk->used += len;
    return out;
}

/* A new open event of kind, as the child of the innermost open one; its
 * index, or -1 (counted as dropped) when the buffer cannot grow. */
static int32_t begin_event(wr_buffer *b, wr_kind kind, const char *name)
{
    if (__builtin_expect(b->n == b->cap, 0)) {
        int32_t cap = b->cap ? 2 * b->cap : 1024;
        wr_event *grown = cap > 0 ? wf__realloc(b->ev, (size_t)cap * sizeof *grown) : NULL;
        if (!grown) {
            b->dropped++;
            return -1;
        }
        b->ev = grown;
        b->cap = cap;
    }
    int32_t i = b->n++;
    wr_event *e = &b->ev[i];
    e->name = name;
    e->end = -1;
    e->parent = b->current;
    e->kind = (uint8_t)kind;
    e->device_type = e->device_index = -1;
    e->shapes = 0;
    e->seq = 0;
    e->bytes = e->live = 0;
    e->device_start = e->device_end = -1;
    if (kind != WR_MEMORY)
        b->current = i;
    /* last, so the bookkeeping above is not counted in the event */
    e->start = now_ns();
    return i;
}

static void end_event(wr_buffer *b, int32_t i, int64_t t)
{
    b->ev[i].end = t;
    b->current = b->ev[i].parent;
}

static bool shapes_reserve(wr_buffer *b, uint32_t more)
{
    if (b->capshapes - b->nshapes >= more)
        return true;
    uint64_t cap = b->capshapes ? 2 * (uint64_t)b->capshapes : 4096;
    while (cap - b->nshapes < more)
        cap *= 2;
    if (cap > UINT32_MAX - 1)
        return false;
    int64_t *grown = wf__realloc(b->shapes, cap * sizeof *grown);
    if (!grown)
        return false;
    b->shapes = grown;
    b->capshapes = (uint32_t)cap;
    return true;
}

static bool put_tensor_shape(wr_buffer *b, const weft_tensor *t)
{
    int nd = t ? t->ndim : 0;
    if (!shapes_reserve(b, 3 + (uint32_t)nd))
        return false;
    int64_t *s = b->shapes + b->nshapes;
    if (!t) {
        s[0] = -1;
        s[1] = 0;
        s[2] = -1;
        b->nshapes += 3;
        return true;
    }
    s[0] = t->dtype;
    s[1] = ((int64_t)t->device.type << 16) | (uint16_t)t->device.index;
    s[2] = nd;
    const int64_t *sizes = weft_tensor_sizes(t);
    for (int d = 0; d < nd; d++)
        s[3 + d] = sizes[d];
    b->nshapes += 3 + (uint32_t)nd;
    return true;
}

/* The device of the call's first tensor, and with record_shapes every
 * tensor argument's dtype, device and sizes. */
static void record_inputs(wr_buffer *b, wr_event *e, const weft_call *call, bool shapes)
{
    uint32_t at = b->nshapes;
    int64_t count = 0;
    if (shapes && !shapes_reserve(b, 1))
        shapes = false;
    if (shapes)
        b->nshapes++;
    bool ok = true;
    for (int i = 0; i < call->nargs && ok; i++) {
        const weft_value *v = &call->args[i];
        if (v->tag == WEFT_VALUE_TENSOR && v->u.tensor) {
            if (e->device_type < 0) {
                e->device_type = v->u.tensor->device.type;
                e->device_index = v->u.tensor->device.index;
            }
            if (shapes) {
                ok = put_tensor_shape(b, v->u.tensor);
                count++;
            }
        } else if (v->tag == WEFT_VALUE_TENSOR_LIST && v->u.tensors) {
            for (int j = 0; j < v->len && ok; j++) {
                const weft_tensor *t = v->u.tensors[j];
                if (t && e->device_type < 0) {
                    e->device_type = t->device.type;
                    e->device_index = t->device.index;
                }
                if (shapes) {
                    ok = put_tensor_shape(b, t);
                    count++;
                }
            }
        }
    }
    if (!shapes)
        return;
    if (!ok) {
        b->nshapes = at; /* no shapes rather than half of them */
        b->dropped++;
        return;
    }
    b->shapes[at] = count;
    e->shapes = at + 1;
}

/* ------------------------------------------------------- device time */

/* The reference of device d for b (made on first use), or NULL when the
 * device has no events or the table of references is full. */
static wr_device_ref *device_ref(wr_buffer *b, weft_device d)
{
    for (int i = 0; i < b->nrefs; i++)
        if (weft_device_equal(b->refs[i].device, d))
            return b->refs[i].event ? &b->refs[i] : NULL;
    if (b->nrefs == (int)(sizeof b->refs / sizeof b->refs[0]))
        return NULL;
    wr_device_ref *r = &b->refs[b->nrefs++];
    r->device = d;
    r->event = NULL; /* stays NULL (not timed) when any step fails */
    weft_event *ev = NULL;
    if (weft_event_create(&ev, d) < 0)
        return NULL;
    /* first drain the stream, so that the reference, recorded on an idle
     * stream, completes as it is recorded: then the CPU time just before
     * recording it is its time, give or take the record's latency */
    int64_t t = 0;
    if (weft_event_record(ev, NULL) < 0 || weft_event_synchronize(ev) < 0 ||
        (t = now_ns(), weft_event_record(ev, NULL) < 0) || weft_event_synchronize(ev) < 0) {
        weft_event_destroy(ev);
        return NULL;
    }
    r->cpu_ns = t;
    r->event = ev;
    return r;
}

/* An event recorded now on d's current stream, or NULL. */
static weft_event *device_mark(weft_device d)
{
    weft_event *ev = NULL;
    if (weft_event_create(&ev, d) < 0)
        return NULL;
    if (weft_event_record(ev, NULL) < 0) {
        weft_event_destroy(ev);
        return NULL;
    }
    return ev;
}

/* Keeps the pair for event i; frees it when it cannot. */
static void device_keep(wr_buffer *b, int32_t i, weft_event *start, weft_event *end)
{
    if (b->npairs == b->cappairs) {
        int32_t cap = b->cappairs ? 2 * b->cappairs : 256;
        wr_device_pair *grown = wf__realloc(b->pairs, (size_t)cap * sizeof *grown);
        if (!grown) {
            weft_event_destroy(start);
            weft_event_destroy(end);
            b->dropped++;
            return;
        }
        b->pairs = grown;
        b->cappairs = cap;
    }
    b->pairs[b->npairs++] = (wr_device_pair){i, start, end};
}

/* At stop: waits for every pair and places it on the CPU clock.  Errors
 * leave the operator without a device time. */
static void device_resolve(wr_buffer *b)
{
    for (int32_t k = 0; k < b->npairs; k++) {
        wr_device_pair *q = &b->pairs[k];
        wr_event *e = &b->ev[q->event];
        weft_device d = {e->device_type, e->device_index};
        wr_device_ref *r = NULL;
        for (int i = 0; i < b->nrefs; i++)
            if (weft_device_equal(b->refs[i].device, d))
                r = &b->refs[i];
        float s_ms = 0, e_ms = 0;
        if (r && r->event && weft_event_synchronize(q->end) == 0 &&
            weft_event_elapsed_ms(&s_ms, r->event, q->start) == 0 &&
            weft_event_elapsed_ms(&e_ms, r->event, q->end) == 0) {
            e->device_start = r->cpu_ns + (int64_t)((double)s_ms * 1e6);
            e->device_end = r->cpu_ns + (int64_t)((double)e_ms * 1e6);
        }
        weft_event_destroy(q->start);
        weft_event_destroy(q->end);
    }
    b->npairs = 0;
    for (int i = 0; i < b->nrefs; i++)
        weft_event_destroy(b->refs[i].event);
    b->nrefs = 0;
}

/* --------------------------------------------------- the Profiler key */

static int profile_kernel(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_keyset done = WEFT_KEYSET_BIT(WEFT_KEY_PROFILER);
    wr_buffer *b = tls_buffer;
    if (!b) /* the key came from elsewhere (a test's include set) */
        return weft_redispatch(call, done);
    int32_t i = begin_event(b, WR_OP, call->op->schema.name);
    if (i >= 0) {
        record_inputs(b, &b->ev[i], call, b->session->opts.record_shapes);
        /* copying the shapes is the profiler's cost, not the operator's */
        if (b->session->opts.record_shapes)
            b->ev[i].start = now_ns();
    }
    /* device time: an event before and after, on the device's current
     * stream; only for a device other than the host (CPU is type 0).  The
     * operator's CPU time includes recording them, so its device work
     * lies inside it on the timeline. */
    weft_event *dstart = NULL;
    weft_device dev = {0, 0};
    if (i >= 0 && b->session->opts.record_device_time && b->ev[i].device_type > 0) {
        dev = (weft_device){b->ev[i].device_type, b->ev[i].device_index};
        int had = b->nrefs;
        bool timed = device_ref(b, dev) != NULL;
        if (b->nrefs != had) /* the wait for a new reference is not the operator's */
            b->ev[i].start = now_ns();
        if (timed)
            dstart = device_mark(dev);
    }
    int rc = weft_redispatch(call, done);
    if (dstart) {
        weft_event *dend = tls_buffer == b ? device_mark(dev) : NULL;
        if (dend)
            device_keep(b, i, dstart, dend);
        else
            weft_event_destroy(dstart);
    }
    int64_t t = now_ns();
    /* the kernel may have stopped this thread's recording (which closed
     * the event) */
    if (i >= 0 && tls_buffer == b && i < b->n && b->ev[i].end < 0)
        end_event(b, i, t);
    return rc;
}

void wr__profiler_register(void)
{
    weft_register_fallback(wd__core_registrar, WEFT_KEY_PROFILER, 0, profile_kernel, NULL, NULL);
}

/* ------------------------------------------------ autograd's reports */

static void node_made(const wf_node *n)
{
    wr_buffer *b = tls_buffer;
    if (!b || b->current < 0 || b->ev[b->current].kind != WR_OP)
        return;
    /* a leaf's accumulator is made by the first operator that reads the
     * leaf, but it is no operator's backward (torch gives it no sequence
     * number either) */
    if (n->name && strcmp(n->name, "AccumulateGrad") == 0)
        return;
    if (b->nlinks == b->caplinks) {
        int32_t cap = b->caplinks ? 2 * b->caplinks : 256;
        wr_link *grown = wf__realloc(b->links, (size_t)cap * sizeof *grown);
        if (!grown) {
            b->dropped++;
            return;
        }
        b->links = grown;
        b->caplinks = cap;
    }
    b->links[b->nlinks++] = (wr_link){n->sequence_nr, b->current};
}

static void *node_begin(const wf_node *n)
{
    wr_buffer *b = tls_buffer;
    if (!b)
        return NULL;
    /* a custom function's name belongs to its caller: keep a copy */
    const char *name = buffer_strdup(b, n->name ? n->name : "Backward");
    if (!name) {
        b->dropped++;
        return NULL;
    }
    int32_t i = begin_event(b, WR_BACKWARD, name);
    if (i < 0)
        return NULL;
    b->ev[i].seq = n->sequence_nr;
    return (void *)(uintptr_t)(i + 1);
}

static void node_end(void *token)
{
    int64_t t = now_ns();
    wr_buffer *b = tls_buffer;
    int32_t i = (int32_t)(uintptr_t)token - 1;
    if (!token || !b || i >= b->n || b->ev[i].kind != WR_BACKWARD || b->ev[i].end >= 0)
        return;
    end_event(b, i, t);
}

static const wa_profiler_hooks autograd_hooks = {node_made, node_begin, node_end};

/* ------------------------------------------------------ c10's reports */

static void memory_event(wr_buffer *b, const wf_storage *s, int64_t bytes, int64_t live)
{
    int32_t i = begin_event(b, WR_MEMORY, NULL);
    if (i < 0)
        return;
    wr_event *e = &b->ev[i];
    e->end = e->start;
    e->device_type = s->device.type;
    e->device_index = s->device.index;
    e->bytes = bytes;
    e->live = live;
}

static void storage_alloc(wf_storage *s)
{
    wr_buffer *b = tls_buffer;
    if (!b || !b->session->opts.profile_memory)
        return;
    s->profiled = true;
    int64_t bytes = (int64_t)s->nbytes;
    int64_t live = atomic_fetch_add_explicit(&wr__live[s->device.type], bytes,
                                             memory_order_relaxed) + bytes;
    memory_event(b, s, bytes, live);
}

static void storage_free(wf_storage *s)
{
    int64_t bytes = (int64_t)s->nbytes;
    int64_t live = atomic_fetch_sub_explicit(&wr__live[s->device.type], bytes,
                                             memory_order_relaxed) - bytes;
    wr_buffer *b = tls_buffer;
    if (b && b->session->opts.profile_memory)
        memory_event(b, s, -bytes, live);
}

/* ------------------------------------------------------------ sessions */

WEFT_API int weft_profiler_create(weft_profiler **out, const weft_profiler_options *opts)
{
    if (out)
        *out = NULL;
    if (!out)
        return wf__errorf(WEFT_EINVAL, "weft_profiler_create: out is NULL");
    weft_profiler_options o = {sizeof o, false, false, false};
    if (opts) {
        size_t need = offsetof(weft_profiler_options, profile_memory) + sizeof(bool);
        if (opts->struct_size < need)
            return wf__errorf(WEFT_EINVAL,
                              "weft_profiler_create: opts->struct_size is %u, at least %zu "
                              "(set it to sizeof(weft_profiler_options))",
                              opts->struct_size, need);
        o.record_shapes = opts->record_shapes;
        o.profile_memory = opts->profile_memory;
        /* a field the caller's (older) struct may not have */
        if (opts->struct_size >= offsetof(weft_profiler_options, record_device_time) + sizeof(bool))
            o.record_device_time = opts->record_device_time;
    }
    weft_profiler *p = wf__calloc(1, sizeof *p);
    if (!p)
        return wf__errorf(WEFT_ENOMEM, "weft_profiler_create: out of memory");
    p->opts = o;
    p->t0 = now_ns();
    pthread_mutex_init(&p->mutex, NULL);
    *out = p;
    return 0;
}

static void buffer_free(wr_buffer *b)
{
    if (!b)
        return;
    for (wr_strblock *s = b->strings, *next; s; s = next) {
        next = s->next;
        free(s);
    }
    free(b->ev);
    free(b->shapes);
    free(b->links);
    free(b->pairs);
    free(b);
}

int wr__lock_idle(const weft_profiler *p, const char *fn)
{
    weft_profiler *q = (weft_profiler *)p;
    pthread_mutex_lock(&q->mutex);
    int busy = q->recording;
    if (busy)
        pthread_mutex_unlock(&q->mutex);
    if (busy)
        return wf__errorf(WEFT_EBUSY,
                          "%s: %d thread%s still record%s into this profiler (call "
                          "weft_profiler_stop in %s first)",
                          fn, busy, busy == 1 ? "" : "s", busy == 1 ? "s" : "",
                          busy == 1 ? "it" : "each");
    return 0;
}

void wr__unlock(const weft_profiler *p)
{
    pthread_mutex_unlock(&((weft_profiler *)p)->mutex);
}

WEFT_API int weft_profiler_destroy(weft_profiler *p)
{
    if (!p)
        return 0;
    int rc = wr__lock_idle(p, "weft_profiler_destroy");
    if (rc < 0)
        return rc;
    wr__unlock(p);
    for (int i = 0; i < p->nbuffers; i++)
        buffer_free(p->buffers[i]);
    free(p->buffers);
    pthread_mutex_destroy(&p->mutex);
    free(p);
    return 0;
}

/* Ends b's recording at time t: what is still open ends now, and the last
 * thread to stop anywhere removes the hooks. */
static void close_buffer(wr_buffer *b, int64_t t)
{
    while (b->current >= 0)
        end_event(b, b->current, t);
    b->open_ranges = 0;
    device_resolve(b);
    weft_profiler *p = b->session;
    pthread_mutex_lock(&global_mutex);
    if (p->opts.profile_memory && --n_memory == 0)
        atomic_store_explicit(&wf__storage_hooks.alloc, NULL, memory_order_relaxed);
    if (--n_recording == 0)
        atomic_store_explicit(&wa__profiler_hooks, NULL, memory_order_relaxed);
    pthread_mutex_unlock(&global_mutex);
    pthread_mutex_lock(&p->mutex);
    b->closed = true;
    p->recording--;
    pthread_mutex_unlock(&p->mutex);
}

static void thread_exit(void *value)
{
    /* the thread's TLS is still there while key destructors run */
    wr_buffer *b = value;
    if (b && tls_buffer == b) {
        tls_buffer = NULL;
        close_buffer(b, now_ns());
    }
}

static void make_exit_key(void)
{
    pthread_key_create(&exit_key, thread_exit);
}

WEFT_API int weft_profiler_start(weft_profiler *p)
{
    if (!p)
        return wf__errorf(WEFT_EINVAL, "weft_profiler_start: the profiler is NULL");
    if (tls_buffer)
        return wf__errorf(WEFT_EBUSY,
                          "weft_profiler_start: this thread already records into %s "
                          "profiler (profiling started twice); call weft_profiler_stop first",
                          tls_buffer->session == p ? "this" : "another");
    pthread_once(&exit_key_once, make_exit_key);
    wr_buffer *b = wf__calloc(1, sizeof *b);
    if (!b)
        return wf__errorf(WEFT_ENOMEM, "weft_profiler_start: out of memory");
    b->session = p;
    b->tid = (uint64_t)syscall(SYS_gettid);
    b->current = -1;
    pthread_mutex_lock(&p->mutex);
    if (p->nbuffers == p->capbuffers) {
        int cap = p->capbuffers ? 2 * p->capbuffers : 8;
        wr_buffer **grown = wf__realloc(p->buffers, (size_t)cap * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&p->mutex);
            free(b);
            return wf__errorf(WEFT_ENOMEM, "weft_profiler_start: out of memory");
        }
        p->buffers = grown;
        p->capbuffers = cap;
    }
    p->buffers[p->nbuffers++] = b;
    p->recording++;
    pthread_mutex_unlock(&p->mutex);
    pthread_mutex_lock(&global_mutex);
    if (n_recording++ == 0)
        atomic_store_explicit(&wa__profiler_hooks, &autograd_hooks, memory_order_relaxed);
    if (p->opts.profile_memory && n_memory++ == 0) {
        /* free first: a storage counted by alloc must find it */
        atomic_store_explicit(&wf__storage_hooks.free, storage_free, memory_order_release);
        atomic_store_explicit(&wf__storage_hooks.alloc, storage_alloc, memory_order_release);
    }
    pthread_mutex_unlock(&global_mutex);
    pthread_setspecific(exit_key, b);
    tls_buffer = b;
    wd__tls_included |= WEFT_KEYSET_BIT(WEFT_KEY_PROFILER);
    return 0;
}

WEFT_API int weft_profiler_stop(weft_profiler *p)
{
    wr_buffer *b = tls_buffer;
    if (!p)
        return wf__errorf(WEFT_EINVAL, "weft_profiler_stop: the profiler is NULL");
    if (!b || b->session != p)
        return wf__errorf(WEFT_EINVAL,
                          "weft_profiler_stop: this thread does not record into this profiler%s",
                          b ? " (it records into another one)" : "");
    int64_t t = now_ns();
    wd__tls_included &= ~WEFT_KEYSET_BIT(WEFT_KEY_PROFILER);
    tls_buffer = NULL;
    pthread_setspecific(exit_key, NULL);
    close_buffer(b, t);
    return 0;
}

WEFT_API weft_profiler *weft_profiler_current(void)
{
    return tls_buffer ? tls_buffer->session : NULL;
}

/* -------------------------------------------------------------- ranges */

WEFT_API int weft_profiler_range_push(const char *name)
{
    if (!name)
        return wf__errorf(WEFT_EINVAL, "weft_profiler_range_push: name is NULL");
    wr_buffer *b = tls_buffer;
    if (b) {
        const char *copy = buffer_strdup(b, name);
        int32_t i = copy ? begin_event(b, WR_RANGE, copy) : -1;
        if (i < 0)
            return wf__errorf(WEFT_ENOMEM, "weft_profiler_range_push: out of memory "
                                           "recording range '%s'", name);
        b->open_ranges++;
    }
    tls_open_ranges++;
    return 0;
}

WEFT_API int weft_profiler_range_pop(void)
{
    int64_t t = now_ns();
    if (tls_open_ranges == 0)
        return wf__errorf(WEFT_EINVAL, "weft_profiler_range_pop: no range is open on this "
                                       "thread (a pop without its push)");
    wr_buffer *b = tls_buffer;
    if (b && b->open_ranges > 0) {
        int32_t cur = b->current;
        if (cur < 0 || b->ev[cur].kind != WR_RANGE)
            return wf__errorf(WEFT_EINVAL,
                              "weft_profiler_range_pop: the innermost open event is '%s', "
                              "which began after the range; pop a range where it was pushed",
                              cur >= 0 && b->ev[cur].name ? b->ev[cur].name : "?");
        end_event(b, cur, t);
        b->open_ranges--;
    }
    tls_open_ranges--;
    return 0;
}
