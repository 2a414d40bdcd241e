/* c10/stream.c — streams and events: thin, reference-counted wrappers of a
 * device plugin's handles (weft_device_interface, ABI 1.1), and the calling
 * thread's current stream per device.  Each live stream or event holds its
 * plugin's registrar, so the plugin is not unloaded under it. */
#include <pthread.h>
#include <stdlib.h>

#include "c10/core.h"
#include "c10/quiesce.h"

/* What a stream and an event both are: a plugin's handle on a device. */
typedef struct device_object {
    weft_device device;
    void *handle;
    const weft_device_interface *iface; /* core copy: never freed */
    wf_owner *owner;       /* held while the object lives */
} device_object;

struct weft_stream {
    device_object o; /* first: made by create_object */
    atomic_int refcount;
};

struct weft_event {
    device_object o;
};

/* What creating a stream or an event starts with: the device exists, its
 * plugin provides `fn`, and its registrar is held (released by the caller
 * on failure).  Runs in a section: the interface and registrar are read. */
static int begin(weft_device device, bool has_fn, const char *what, const char *noun,
                 const weft_device_interface **iface_out, wf_owner **owner_out)
{
    int rc = wf__check_device(device, what);
    if (rc < 0)
        return rc;
    const weft_device_interface *iface =
        atomic_load_explicit(&wf__device_types[device.type].iface, memory_order_acquire);
    if (!iface)
        return wf__errorf(WEFT_EDEVICE, "%s: device type %d has no interface", what, device.type);
    if (!has_fn)
        return wf__errorf(WEFT_ENOTSUP, "%s: device type '%s' provides no %s", what,
                          wf__device_types[device.type].name, noun);
    wf_owner *owner = ((const wf_iface_copy *)iface)->owner;
    if (owner && !wf__owner_try_hold(owner, WF_HOLD_STREAM))
        return wf__errorf(WEFT_EBUSY, "%s: the plugin '%s' of device type '%s' is being unloaded",
                          what, owner->name, wf__device_types[device.type].name);
    *iface_out = iface;
    *owner_out = owner;
    return 0;
}

static void end(wf_owner *owner)
{
    if (owner)
        wf__owner_drop_kind(owner, WF_HOLD_STREAM);
}

enum object_kind { OBJ_STREAM, OBJ_EVENT };

/* Creates a stream or an event (size bytes, a device_object first) on
 * device through its plugin, holding the plugin's registrar. */
static int create_object(void **out, size_t size, enum object_kind kind, weft_device device,
                         const char *what)
{
    if (!out)
        return wf__errorf(WEFT_EINVAL, "%s: out is NULL", what);
    *out = NULL;
    wf_reader_tls *rt = wf__reader_enter();
    const weft_device_interface *iface = NULL;
    wf_owner *owner = NULL;
    const weft_device_interface *peek =
        device.type >= 0 && device.type < WEFT_MAX_DEVICE_TYPES
            ? atomic_load(&wf__device_types[device.type].iface)
            : NULL;
    bool provided = peek && (kind == OBJ_STREAM ? peek->stream_create && peek->stream_destroy
                                                : peek->event_create && peek->event_destroy);
    int rc = begin(device, provided, what, kind == OBJ_STREAM ? "streams" : "events", &iface,
                   &owner);
    if (rc < 0) {
        wf__reader_exit(rt);
        return rc;
    }
    device_object *o = wf__calloc(1, size);
    void *handle = NULL;
    if (!o)
        rc = wf__errorf(WEFT_ENOMEM, "%s: out of memory", what);
    else if (kind == OBJ_STREAM)
        rc = iface->stream_create(iface->ctx, device.index, &handle);
    else
        rc = iface->event_create(iface->ctx, device.index, &handle);
    if (rc < 0) {
        free(o);
        end(owner);
        wf__reader_exit(rt);
        return rc;
    }
    *o = (device_object){.device = device, .handle = handle, .iface = iface, .owner = owner};
    wf__reader_exit(rt);
    *out = o;
    return 0;
}

WEFT_API int weft_stream_create(weft_stream **out, weft_device device)
{
    int rc = create_object((void **)out, sizeof(weft_stream), OBJ_STREAM, device,
                           "stream_create");
    if (rc == 0)
        atomic_init(&(*out)->refcount, 1);
    return rc;
}

static void stream_release(weft_stream *s)
{
    if (!s || atomic_fetch_sub_explicit(&s->refcount, 1, memory_order_acq_rel) != 1)
        return;
    s->o.iface->stream_destroy(s->o.iface->ctx, s->o.device.index, s->o.handle);
    wf_owner *owner = s->o.owner;
    free(s);
    end(owner); /* last: after it the plugin may go */
}

WEFT_API void weft_stream_destroy(weft_stream *stream)
{
    stream_release(stream);
}

WEFT_API int weft_stream_synchronize(weft_stream *s)
{
    if (!s)
        return wf__errorf(WEFT_EINVAL, "stream_synchronize: stream is NULL");
    if (!s->o.iface->stream_synchronize)
        return wf__errorf(WEFT_ENOTSUP, "stream_synchronize: device type '%s' cannot",
                          wf__device_types[s->o.device.type].name);
    return s->o.iface->stream_synchronize(s->o.iface->ctx, s->o.device.index, s->o.handle);
}

WEFT_API int weft_stream_query(weft_stream *s)
{
    if (!s)
        return wf__errorf(WEFT_EINVAL, "stream_query: stream is NULL");
    if (!s->o.iface->stream_query)
        return wf__errorf(WEFT_ENOTSUP, "stream_query: device type '%s' cannot",
                          wf__device_types[s->o.device.type].name);
    return s->o.iface->stream_query(s->o.iface->ctx, s->o.device.index, s->o.handle);
}

WEFT_API weft_device weft_stream_device(const weft_stream *s)
{
    return s ? s->o.device : WEFT_DEVICE_CPU;
}

WEFT_API void *weft_stream_handle(const weft_stream *s)
{
    return s ? s->o.handle : NULL;
}

/* ------------------------------------------------ current stream */

/* The calling thread's current streams, one entry per device that has one;
 * the references are dropped when the thread exits. */
typedef struct current_entry {
    weft_device device;
    weft_stream *stream;
    struct current_entry *next;
} current_entry;

static _Thread_local current_entry *current_streams;
static pthread_key_t current_key;
static pthread_once_t current_once = PTHREAD_ONCE_INIT;
static bool current_key_ok;

static void drop_current(void *arg)
{
    current_entry *e = arg;
    current_streams = NULL;
    while (e) {
        current_entry *next = e->next;
        stream_release(e->stream);
        free(e);
        e = next;
    }
}

static void make_current_key(void)
{
    current_key_ok = pthread_key_create(&current_key, drop_current) == 0;
}

WEFT_API int weft_set_current_stream(weft_device device, weft_stream *stream)
{
    if (stream && !weft_device_equal(stream->o.device, device)) {
        char a[48], b[48];
        weft_device_to_string(stream->o.device, a, sizeof a);
        weft_device_to_string(device, b, sizeof b);
        return wf__errorf(WEFT_EDEVICE, "set_current_stream: the stream is on %s, not %s", a, b);
    }
    current_entry **pp = &current_streams;
    while (*pp && !weft_device_equal((*pp)->device, device))
        pp = &(*pp)->next;
    current_entry *e = *pp;
    if (!stream) {
        if (e) {
            *pp = e->next;
            stream_release(e->stream);
            free(e);
            pthread_setspecific(current_key, current_streams);
        }
        return 0;
    }
    if (!e) {
        pthread_once(&current_once, make_current_key);
        if (!current_key_ok)
            return wf__errorf(WEFT_ENOMEM, "set_current_stream: no thread-exit hook available");
        e = wf__calloc(1, sizeof *e);
        if (!e)
            return wf__errorf(WEFT_ENOMEM, "set_current_stream: out of memory");
        e->device = device;
        e->next = current_streams;
        current_streams = e;
        /* the hook runs at thread exit with the list head it was given */
        pthread_setspecific(current_key, current_streams);
    } else {
        stream_release(e->stream);
    }
    atomic_fetch_add_explicit(&stream->refcount, 1, memory_order_relaxed);
    e->stream = stream;
    return 0;
}

WEFT_API weft_stream *weft_current_stream(weft_device device)
{
    for (current_entry *e = current_streams; e; e = e->next)
        if (weft_device_equal(e->device, device))
            return e->stream;
    return NULL;
}

/* ------------------------------------------------------------- events */

WEFT_API int weft_event_create(weft_event **out, weft_device device)
{
    return create_object((void **)out, sizeof(weft_event), OBJ_EVENT, device, "event_create");
}

WEFT_API void weft_event_destroy(weft_event *e)
{
    if (!e)
        return;
    e->o.iface->event_destroy(e->o.iface->ctx, e->o.device.index, e->o.handle);
    wf_owner *owner = e->o.owner;
    free(e);
    end(owner);
}

/* The stream an event call means: s, or the current one of the device. */
static int pick_stream(void **handle, weft_stream *s, weft_device device, const char *what)
{
    if (!s)
        s = weft_current_stream(device);
    if (s && !weft_device_equal(s->o.device, device)) {
        char a[48], b[48];
        weft_device_to_string(s->o.device, a, sizeof a);
        weft_device_to_string(device, b, sizeof b);
        return wf__errorf(WEFT_EDEVICE, "%s: the stream is on %s, the event on %s", what, a, b);
    }
    *handle = s ? s->o.handle : NULL;
    return 0;
}

WEFT_API int weft_event_record(weft_event *e, weft_stream *s)
{
    if (!e)
        return wf__errorf(WEFT_EINVAL, "event_record: event is NULL");
    if (!e->o.iface->event_record)
        return wf__errorf(WEFT_ENOTSUP, "event_record: device type '%s' cannot",
                          wf__device_types[e->o.device.type].name);
    void *h = NULL;
    int rc = pick_stream(&h, s, e->o.device, "event_record");
    return rc < 0 ? rc : e->o.iface->event_record(e->o.iface->ctx, e->o.device.index, e->o.handle, h);
}

WEFT_API int weft_stream_wait_event(weft_stream *s, weft_event *e)
{
    if (!e)
        return wf__errorf(WEFT_EINVAL, "stream_wait_event: event is NULL");
    if (!e->o.iface->stream_wait_event)
        return wf__errorf(WEFT_ENOTSUP, "stream_wait_event: device type '%s' cannot",
                          wf__device_types[e->o.device.type].name);
    void *h = NULL;
    int rc = pick_stream(&h, s, e->o.device, "stream_wait_event");
    return rc < 0 ? rc : e->o.iface->stream_wait_event(e->o.iface->ctx, e->o.device.index, h, e->o.handle);
}

WEFT_API int weft_event_query(weft_event *e)
{
    if (!e)
        return wf__errorf(WEFT_EINVAL, "event_query: event is NULL");
    if (!e->o.iface->event_query)
        return wf__errorf(WEFT_ENOTSUP, "event_query: device type '%s' cannot",
                          wf__device_types[e->o.device.type].name);
    return e->o.iface->event_query(e->o.iface->ctx, e->o.device.index, e->o.handle);
}

WEFT_API int weft_event_synchronize(weft_event *e)
{
    if (!e)
        return wf__errorf(WEFT_EINVAL, "event_synchronize: event is NULL");
    if (!e->o.iface->event_synchronize)
        return wf__errorf(WEFT_ENOTSUP, "event_synchronize: device type '%s' cannot",
                          wf__device_types[e->o.device.type].name);
    return e->o.iface->event_synchronize(e->o.iface->ctx, e->o.device.index, e->o.handle);
}

WEFT_API int weft_event_elapsed_ms(float *ms, const weft_event *start, const weft_event *end_)
{
    if (!ms || !start || !end_)
        return wf__errorf(WEFT_EINVAL, "event_elapsed_ms: NULL argument");
    *ms = 0;
    if (!weft_device_equal(start->o.device, end_->o.device))
        return wf__errorf(WEFT_EDEVICE, "event_elapsed_ms: the two events are on different devices");
    if (!start->o.iface->event_elapsed_ms)
        return wf__errorf(WEFT_ENOTSUP, "event_elapsed_ms: device type '%s' cannot",
                          wf__device_types[start->o.device.type].name);
    return start->o.iface->event_elapsed_ms(start->o.iface->ctx, start->o.device.index, start->o.handle,
                                          end_->o.handle, ms);
}
