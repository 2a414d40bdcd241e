/* tests/test_streams.c — streams and events through a fake device that
 * provides them: calls reach the plugin with its own handles, the current
 * stream is per thread and per device and is what a kernel finds, events
 * record on the current stream by default and time the work between them,
 * streams live while current anywhere and are dropped at thread exit, and
 * every misuse (wrong device, missing function, NULL) is a clear error. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#include "tests/host_device.h"
#include "tests/tap.h"

typedef struct fake_stream {
    int index;
} fake_stream;

typedef struct fake_event {
    int recorded;
    double at_ms;
    void *stream;
} fake_event;

static int created, destroyed, fail_next;
static void *last_wait_stream, *last_wait_event, *kernel_saw;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int s_create(void *ctx, int index, void **out)
{
    (void)ctx;
    if (fail_next) {
        fail_next = 0;
        return weft_set_error(WEFT_ENOMEM, "fake: no more streams");
    }
    fake_stream *s = malloc(sizeof *s);
    if (!s)
        return weft_set_error(WEFT_ENOMEM, "fake: out of memory");
    s->index = index;
    created++;
    *out = s;
    return 0;
}

static void s_destroy(void *ctx, int index, void *s)
{
    (void)ctx;
    (void)index;
    destroyed++;
    free(s);
}

static int s_sync(void *ctx, int index, void *s)
{
    (void)ctx;
    return s && ((fake_stream *)s)->index != index ? weft_set_error(WEFT_EINVAL, "fake: wrong device") : 0;
}

static int s_query(void *ctx, int index, void *s)
{
    return s_sync(ctx, index, s) < 0 ? WEFT_EINVAL : 1;
}

static int e_create(void *ctx, int index, void **out)
{
    (void)ctx;
    (void)index;
    fake_event *e = calloc(1, sizeof *e);
    *out = e;
    return e ? 0 : weft_set_error(WEFT_ENOMEM, "fake: out of memory");
}

static void e_destroy(void *ctx, int index, void *e)
{
    (void)ctx;
    (void)index;
    free(e);
}

static int e_record(void *ctx, int index, void *ev, void *stream)
{
    (void)ctx;
    (void)index;
    fake_event *e = ev;
    e->recorded = 1;
    e->at_ms = now_ms();
    e->stream = stream;
    return 0;
}

static int e_wait(void *ctx, int index, void *stream, void *ev)
{
    (void)ctx;
    (void)index;
    last_wait_stream = stream;
    last_wait_event = ev;
    return 0;
}

static int e_query(void *ctx, int index, void *ev)
{
    (void)ctx;
    (void)index;
    return ((fake_event *)ev)->recorded;
}

static int e_sync(void *ctx, int index, void *ev)
{
    (void)ctx;
    (void)index;
    (void)ev;
    return 0;
}

static int e_elapsed(void *ctx, int index, void *a, void *b, float *ms)
{
    (void)ctx;
    (void)index;
    fake_event *s = a, *e = b;
    if (!s->recorded || !e->recorded)
        return weft_set_error(WEFT_EINVAL, "fake: an event was never recorded");
    *ms = (float)(e->at_ms - s->at_ms);
    return 0;
}

/* neg on the fake device: notes the stream it would have queued on */
static int neg(weft_call *call, void *ctx)
{
    (void)ctx;
    const weft_tensor *t = call->args[0].u.tensor;
    kernel_saw = weft_stream_handle(weft_current_stream(weft_tensor_device(t)));
    weft_tensor *out;
    int rc = weft_empty(&out, weft_tensor_sizes(t), weft_tensor_ndim(t), WEFT_FLOAT32,
                        weft_tensor_device(t));
    if (rc < 0)
        return rc;
    for (int64_t i = 0; i < weft_tensor_numel(t); i++)
        ((float *)weft_tensor_data_ptr(out))[i] = -((const float *)weft_tensor_data_ptr(t))[i];
    call->rets[0].tag = WEFT_VALUE_TENSOR;
    call->rets[0].u.tensor = out;
    return 0;
}

static void *thread_sets_current(void *arg)
{
    weft_stream *s = arg;
    weft_set_current_stream(weft_stream_device(s), s);
    return NULL; /* exits with the stream current */
}

static void *thread_current(void *arg)
{
    return weft_current_stream(*(weft_device *)arg);
}

int main(void)
{
    ok(weft_load_default_plugins() >= 1, "default plugins loaded");
    weft_registrar *reg = NULL;
    weft_registrar_create(&reg, "fakestreams");
    weft_device_interface iface = {
        sizeof iface, WEFT_DEVICE_INTERFACE_VERSION, NULL, fake_count, fake_copy, fake_copy,
        fake_copy_device, fake_sync, 0, s_create, s_destroy, s_sync, s_query, e_create,
        e_destroy, e_record, e_wait, e_query, e_sync, e_elapsed,
    };
    weft_allocator alloc = {sizeof alloc, WEFT_ALLOCATOR_VERSION, NULL, fake_allocate, NULL, NULL};
    int type = -1;
    is_int(weft_register_device_type(reg, "fakes", &iface, &alloc, &type), 0,
           "a fake device type with streams and events");
    is_int(weft_register_kernel(reg, "neg", WEFT_KEY_DENSE, type, neg, NULL, NULL), 0, "its neg");
    weft_device d0 = {(int16_t)type, 0}, d1 = {(int16_t)type, 1};

    /* a stream */
    weft_stream *s = NULL;
    is_int(weft_stream_create(&s, d0), 0, "create a stream on fakes:0");
    is_int(created, 1, "the plugin created one");
    ok(weft_stream_handle(s) != NULL, "it has the plugin's handle");
    ok(weft_device_equal(weft_stream_device(s), d0), "on fakes:0");
    is_int(weft_stream_query(s), 1, "query reaches the plugin");
    is_int(weft_stream_synchronize(s), 0, "synchronize too");

    /* current stream, per device, seen by kernels */
    ok(weft_current_stream(d0) == NULL, "no current stream at first: the default");
    weft_tensor *x = NULL, *y = NULL;
    is_int(weft_empty(&x, (int64_t[]){3}, 1, WEFT_FLOAT32, d0), 0, "a tensor on fakes:0");
    kernel_saw = (void *)1;
    is_int(weft_neg(&y, x), 0, "neg on fakes:0");
    ok(kernel_saw == NULL, "the kernel saw the default stream");
    weft_tensor_release(y);
    is_int(weft_set_current_stream(d0, s), 0, "make the stream current for fakes:0");
    ok(weft_current_stream(d0) == s, "it is current");
    ok(weft_current_stream(d1) == NULL, "not for fakes:1");
    pthread_t th;
    void *other = (void *)1;
    pthread_create(&th, NULL, thread_current, &d0);
    pthread_join(th, &other);
    ok(other == NULL, "nor in another thread");
    is_int(weft_neg(&y, x), 0, "neg again");
    ok(kernel_saw == weft_stream_handle(s), "the kernel found the current stream's handle");
    weft_tensor_release(y);
    weft_tensor_release(x);
    is_int(weft_set_current_stream(d1, s), WEFT_EDEVICE, "a stream of fakes:0 for fakes:1");
    like(weft_last_error(), "the stream is on fakes:0, not fakes:1", "names both devices");

    /* events */
    weft_event *e1 = NULL, *e2 = NULL, *e3 = NULL;
    is_int(weft_event_create(&e1, d0), 0, "create an event");
    weft_event_create(&e2, d0);
    is_int(weft_event_query(e1), 0, "not recorded yet (the plugin's answer)");
    float ms = -1;
    is_int(weft_event_elapsed_ms(&ms, e1, e2), WEFT_EINVAL, "elapsed of unrecorded events");
    like(weft_last_error(), "never recorded", "carries the plugin's message");
    is_int(weft_event_record(e1, NULL), 0, "record on the current stream");
    struct timespec pause = {0, 30 * 1000000L};
    nanosleep(&pause, NULL);
    is_int(weft_event_record(e2, s), 0, "record on the stream, given");
    is_int(weft_event_query(e1), 1, "recorded");
    is_int(weft_event_synchronize(e2), 0, "synchronize");
    is_int(weft_event_elapsed_ms(&ms, e1, e2), 0, "elapsed");
    ok(ms >= 25 && ms < 5000, "about 30 ms (%.1f)", ms);
    is_int(weft_stream_wait_event(NULL, e1), 0, "the current stream waits for an event");
    ok(last_wait_stream == weft_stream_handle(s), "the plugin got the current stream's handle");
    is_int(weft_event_create(&e3, d1), 0, "an event on fakes:1");
    is_int(weft_event_record(e3, s), WEFT_EDEVICE, "recording it on a fakes:0 stream");
    like(weft_last_error(), "the stream is on fakes:0, the event on fakes:1", "names both");
    ms = -1;
    is_int(weft_event_elapsed_ms(&ms, e1, e3), WEFT_EDEVICE, "elapsed across devices");
    weft_event_destroy(e1);
    weft_event_destroy(e2);
    weft_event_destroy(e3);

    /* lifetime */
    weft_stream_destroy(s);
    is_int(destroyed, 0, "destroying the current stream keeps it alive");
    ok(weft_current_stream(d0) == s, "it is still current");
    is_int(weft_set_current_stream(d0, NULL), 0, "back to the default stream");
    is_int(destroyed, 1, "now the plugin destroyed it");
    weft_stream *s2 = NULL;
    weft_stream_create(&s2, d1);
    pthread_create(&th, NULL, thread_sets_current, s2);
    pthread_join(th, NULL);
    weft_stream_destroy(s2);
    is_int(destroyed, 2, "a thread that exits drops its current streams");

    /* errors */
    weft_stream *bad = (weft_stream *)1;
    fail_next = 1;
    is_int(weft_stream_create(&bad, d0), WEFT_ENOMEM, "the plugin's failure comes through");
    ok(bad == NULL, "out is NULL");
    like(weft_last_error(), "fake: no more streams", "with its message");
    is_int(weft_stream_create(&bad, WEFT_DEVICE_CPU), WEFT_ENOTSUP, "the CPU has no streams");
    like(weft_last_error(), "device type 'cpu' provides no streams", "says so");
    weft_event *ebad = NULL;
    is_int(weft_event_create(&ebad, WEFT_DEVICE_CPU), WEFT_ENOTSUP, "nor events");
    is_int(weft_stream_create(&bad, (weft_device){(int16_t)type, 2}), WEFT_EDEVICE, "fakes:2");
    /* on a GPU machine the CUDA plugin loads with the defaults and cuda:0
     * exists (tests/gpu-session.sh runs this program there too) */
    if (weft_device_count(WEFT_DEVICE_TYPE_CUDA) > 0) {
        weft_stream *cs = NULL;
        is_int(weft_stream_create(&cs, (weft_device){WEFT_DEVICE_TYPE_CUDA, 0}), 0,
               "cuda:0 with its plugin and a GPU: a stream");
        weft_stream_destroy(cs);
    } else {
        is_int(weft_stream_create(&bad, (weft_device){WEFT_DEVICE_TYPE_CUDA, 0}), WEFT_EDEVICE,
               "cuda without its plugin or a GPU");
    }
    is_int(weft_stream_create(NULL, d0), WEFT_EINVAL, "NULL out");
    is_int(weft_stream_synchronize(NULL), WEFT_EINVAL, "synchronize NULL");
    is_int(weft_event_record(NULL, NULL), WEFT_EINVAL, "record NULL");
    is_int(weft_event_elapsed_ms(&ms, NULL, NULL), WEFT_EINVAL, "elapsed of NULL");
    weft_stream_destroy(NULL);
    weft_event_destroy(NULL);

    /* a device with streams but not every function */
    weft_device_interface partial = iface;
    partial.stream_synchronize = NULL;
    partial.event_create = NULL;
    int ptype = -1;
    is_int(weft_register_device_type(reg, "partial", &partial, &alloc, &ptype), 0,
           "a type with streams but no synchronize and no events");
    weft_stream *ps = NULL;
    is_int(weft_stream_create(&ps, (weft_device){(int16_t)ptype, 0}), 0, "its stream");
    is_int(weft_stream_synchronize(ps), WEFT_ENOTSUP, "synchronize is not provided");
    like(weft_last_error(), "device type 'partial' cannot", "says which type");
    is_int(weft_event_create(&ebad, (weft_device){(int16_t)ptype, 0}), WEFT_ENOTSUP, "no events");
    weft_stream_destroy(ps);
    is_int(created, destroyed, "every stream the plugin made was destroyed (%d)", created);
    weft_registrar_destroy(reg);
    return done_testing();
}
