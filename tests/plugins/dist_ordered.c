/* tests/plugins/dist_ordered.c — libweftdist-ordered.so, a collective
 * backend of interface version 2 for tests/test_dist_ordered.c: what the
 * nccl backend asks of the core (device memory in place, avg passed
 * through, the agreement through exchange, every request in call order),
 * checked without a GPU or a second process.  Its world has two ranks,
 * this process being rank 0 and rank 1 a mirror that always calls the
 * same thing with the same values; requests finish only after a few tests,
 * so that works overlap.  It moves "hostdev" tensors (the test device
 * plugin, host memory) and logs every call into dist_ordered_log. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/distributed.h>
#include <weft/plugin.h>

__attribute__((visibility("default"))) char dist_ordered_log[4096];
/* set by the test: the next exchange never finishes */
__attribute__((visibility("default"))) int dist_ordered_hang;

typedef struct request {
    int polls; /* tests left before it is done; -1: never */
    const void *mine;
    void *all;
    size_t bytes;
} request;

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
    size_t len = strlen(dist_ordered_log);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dist_ordered_log + len, sizeof dist_ordered_log - len, fmt, ap);
    va_end(ap);
}

static int fake_init(void **world, int *rank, int *size);

static int fake_group_create(void **out, void *parent, const int *ranks, int n)
{
    (void)parent, (void)ranks, (void)n;
    *out = malloc(1);
    return *out ? 0 : weft_set_error(WEFT_ENOMEM, "ordered: out of memory");
}

static char world_comm;

static void fake_group_destroy(void *comm)
{
    if (comm != &world_comm)
        free(comm);
}

static request *request_new(int polls)
{
    request *q = calloc(1, sizeof *q);
    if (q)
        q->polls = polls;
    return q;
}

static int fake_start(void **out, void *comm, const weft_dist_request_desc *d)
{
    (void)comm;
    static const char *const kinds[] = {"all_reduce", "broadcast", "reduce", "all_gather",
                                        "reduce_scatter", "all_to_all", "gather", "scatter",
                                        "barrier", "send", "recv"};
    char dev[32] = "none";
    if (d->device.type >= 0)
        weft_device_to_string(d->device, dev, sizeof dev);
    note("data:%s:%s:%s ", kinds[d->kind], weft_reduce_op_name(d->op), dev);
    if (d->kind == WEFT_DIST_ALL_REDUCE && d->dtype == WEFT_FLOAT32) {
        /* the mirror rank holds the same values: sum doubles, avg keeps */
        float *v = d->recv;
        const float *s = d->send;
        for (int64_t i = 0; i < d->count; i++)
            v[i] = d->op == WEFT_REDUCE_SUM ? 2 * s[i] : s[i];
    } else if (d->kind != WEFT_DIST_SEND && d->kind != WEFT_DIST_BARRIER) {
        return weft_set_error(WEFT_ENOTSUP, "ordered: only float32 all_reduce, send, barrier");
    }
    *out = request_new(3);
    return *out ? 0 : weft_set_error(WEFT_ENOMEM, "ordered: out of memory");
}

static int fake_exchange(void **out, void *comm, const void *mine, void *all, size_t bytes,
                         const weft_dist_request_desc *d)
{
    (void)comm, (void)d;
    note("exchange ");
    request *q = request_new(dist_ordered_hang ? -1 : 3);
    if (!q)
        return weft_set_error(WEFT_ENOMEM, "ordered: out of memory");
    dist_ordered_hang = 0;
    q->mine = mine;
    q->all = all;
    q->bytes = bytes;
    *out = q;
    return 0;
}

static int fake_test(void *req)
{
    request *q = req;
    if (q->polls < 0 || --q->polls > 0)
        return 0;
    if (q->all) {
        /* both ranks' records: the mirror's is this rank's */
        memcpy(q->all, q->mine, q->bytes);
        memcpy((char *)q->all + q->bytes, q->mine, q->bytes);
    }
    free(q);
    return 1;
}

static void fake_abandon(void *req)
{
    note("abandon ");
    free(req);
}

static int fake_finalize(void)
{
    return 0;
}

__attribute__((visibility("default"))) weft_dist_backend weft_dist_backend_entry = {
    sizeof(weft_dist_backend), WEFT_DIST_BACKEND_VERSION, "ordered",
    fake_init, fake_group_create, fake_group_destroy, fake_start, fake_test,
    fake_abandon, fake_finalize, WEFT_DEVICE_TYPE_CPU, WEFT_DIST_CAP_AVG, fake_exchange};

/* The device type of "hostdev" is given out when its plugin loads: known
 * here only at init. */
static int fake_init(void **world, int *rank, int *size)
{
    int type = weft_device_type_from_name("hostdev");
    if (type < 0)
        return weft_set_error(WEFT_ENOTFOUND, "ordered: load the hostdev test plugin first");
    weft_dist_backend_entry.device_type = type;
    /* static: the core never destroys a group a timeout broke */
    *world = &world_comm;
    *rank = 0;
    *size = 2;
    return 0;
}
