/* backends/nccl/plugin.c — the "nccl" collective backend
 * (libweftdist-nccl.so) on the CUDA toolkit's NCCL, for CUDA tensors.  The
 * only library of weft that links NCCL.  Every transfer is queued on the
 * stream the caller had current when it made the call (the core passes
 * its handle), after the core's staging copies on that stream; a CUDA
 * event recorded behind it is what test() polls, so the core's wait keeps
 * its timeout (an event query never blocks, a stream wait would).  At a
 * timeout the communicator is aborted (ncclCommAbort), which stops its
 * kernels on the GPU; ncclCommGetAsyncError turns a failure inside NCCL
 * into an error instead of a wait until the deadline. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include <weft/plugin.h>

#include "nccl_backend.h"

/* Pinned host buffers for the agreement's records, reused: an
 * asynchronous copy to pageable memory would block the caller without
 * bound, and allocating pinned memory per call costs more than the call. */
typedef struct pinned {
    struct pinned *next;
    size_t cap;
    unsigned char *data;
} pinned;

typedef struct comm {
    ncclComm_t nccl;
    int rank, size;
    int device;  /* the CUDA device the communicator lives on */
    int aborted; /* ncclCommAbort ran (a timeout): the handle is gone */
    int *scratch; /* one device int, what a barrier all-reduces */
    pinned *spare;
} comm;

typedef struct request {
    cudaEvent_t done;
    comm *c;
    int kind;
    /* the agreement's gather: once done, bytes from buf->data + offset to out */
    pinned *buf;
    size_t offset, bytes;
    void *out;
} request;

static char id_file[4096]; /* the bootstrap file this process wrote (rank 0) */

static int cuda_error(cudaError_t e, const char *what)
{
    return weft_set_error(WEFT_EIO, "nccl: %s failed: %s (%s)", what, cudaGetErrorString(e),
                          cudaGetErrorName(e));
}

static int nccl_error(ncclResult_t r, comm *c, const char *what)
{
    const char *last = c && c->nccl ? ncclGetLastError(c->nccl) : ncclGetLastError(NULL);
    return weft_set_error(WEFT_EIO, "nccl: %s failed: %s%s%s", what, ncclGetErrorString(r),
                          last && *last ? ": " : "", last ? last : "");
}

/* Runs with the communicator's device current and puts the caller's back,
 * so that the backend never changes which device the application uses. */
typedef struct device_guard {
    int saved;
} device_guard;

static int guard_enter(device_guard *g, int device)
{
    cudaError_t e = cudaGetDevice(&g->saved);
    if (e == cudaSuccess && g->saved != device)
        e = cudaSetDevice(device);
    return e == cudaSuccess ? 0 : cuda_error(e, "cudaSetDevice");
}

static void guard_leave(const device_guard *g)
{
    cudaSetDevice(g->saved);
}

/* The stream of a call: the caller's when it had tensors on the device,
 * else (a barrier) the thread's current stream there. */
static cudaStream_t stream_of(const comm *c, const weft_dist_request_desc *d)
{
    if (d->device.type == WEFT_DEVICE_TYPE_CUDA)
        return (cudaStream_t)d->stream;
    weft_device dev = {WEFT_DEVICE_TYPE_CUDA, (int16_t)c->device};
    return (cudaStream_t)weft_stream_handle(weft_current_stream(dev));
}

/* ncclCommInitRank waits, without a bound, until every rank has joined.
 * With more than one rank it runs on a thread of its own while the caller
 * waits up to the timeout; a thread still waiting then is left behind (as
 * the mpi backend leaves a collective inside MPI), with its arguments,
 * and the caller gets ncclInProgress. */
typedef struct init_call {
    ncclComm_t comm;
    ncclUniqueId id;
    int size, rank, device;
    ncclResult_t result;
    _Atomic int done;
} init_call;

static void *init_thread(void *arg)
{
    init_call *call = arg;
    /* the device is per thread in CUDA */
    call->result = cudaSetDevice(call->device) == cudaSuccess
                       ? ncclCommInitRank(&call->comm, call->size, call->id, call->rank)
                       : ncclUnhandledCudaError;
    atomic_store(&call->done, 1);
    return NULL;
}

static ncclResult_t init_bounded(ncclComm_t *out, int size, ncclUniqueId id, int rank,
                                 int device)
{
    init_call *call = calloc(1, sizeof *call);
    if (!call)
        return ncclSystemError;
    call->id = id;
    call->size = size;
    call->rank = rank;
    call->device = device;
    pthread_t thread;
    if (pthread_create(&thread, NULL, init_thread, call) != 0) {
        free(call);
        return ncclSystemError;
    }
    struct timespec t0, now, pause = {0, 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int64_t limit = wnccl__timeout_ms();
    while (!atomic_load(&call->done)) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 > limit) {
            pthread_detach(thread); /* call stays allocated for it */
            return ncclInProgress;
        }
        nanosleep(&pause, NULL);
    }
    pthread_join(thread, NULL);
    ncclResult_t r = call->result;
    *out = call->comm;
    free(call);
    return r;
}

static int comm_new(comm **out, int size, ncclUniqueId id, int rank, int device)
{
    comm *c = calloc(1, sizeof *c);
    if (!c)
        return weft_set_error(WEFT_ENOMEM, "nccl: out of memory");
    c->rank = rank;
    c->size = size;
    c->device = device;
    device_guard g;
    int rc = guard_enter(&g, device);
    if (rc < 0) {
        free(c);
        return rc;
    }
    ncclResult_t r = size == 1 ? ncclCommInitRank(&c->nccl, size, id, rank)
                               : init_bounded(&c->nccl, size, id, rank, device);
    if (r == ncclInProgress) {
        rc = weft_set_error(WEFT_EIO,
                            "nccl: ncclCommInitRank (rank %d of %d) did not finish within %lld ms: "
                            "not every rank joined (were they all started, with the same "
                            "WEFT_NCCL_ID_FILE?)",
                            rank, size, (long long)wnccl__timeout_ms());
    } else if (r != ncclSuccess) {
        rc = nccl_error(r, NULL, "ncclCommInitRank");
    } else {
        cudaError_t e = cudaMalloc((void **)&c->scratch, sizeof *c->scratch);
        if (e == cudaSuccess)
            e = cudaMemset(c->scratch, 0, sizeof *c->scratch);
        if (e != cudaSuccess) {
            rc = cuda_error(e, "cudaMalloc of the barrier's word");
            ncclCommDestroy(c->nccl);
        }
    }
    guard_leave(&g);
    if (rc < 0) {
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

static int backend_init(void **world, int *rank, int *size)
{
    int r, n, local, ndev = 0;
    int rc = wnccl__env_world(&r, &n, &local);
    if (rc < 0)
        return rc;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess && e != cudaErrorNoDevice)
        return cuda_error(e, "cudaGetDeviceCount");
    int device = wnccl__pick_device(local, e == cudaSuccess ? ndev : 0);
    if (device < 0)
        return device;
    ncclUniqueId id;
    ncclResult_t nr;
    if (n == 1) {
        /* a world of one exchanges nothing */
        if ((nr = ncclGetUniqueId(&id)) != ncclSuccess)
            return nccl_error(nr, NULL, "ncclGetUniqueId");
    } else {
        const char *path = getenv("WEFT_NCCL_ID_FILE");
        if (!path || !*path)
            return weft_set_error(WEFT_EINVAL,
                                  "nccl: a world of %d ranks needs WEFT_NCCL_ID_FILE, a path "
                                  "every rank can read, through which rank 0 hands out NCCL's id",
                                  n);
        if (r == 0) {
            if ((nr = ncclGetUniqueId(&id)) != ncclSuccess)
                return nccl_error(nr, NULL, "ncclGetUniqueId");
            if ((rc = wnccl__id_write(path, n, &id, sizeof id)) < 0)
                return rc;
            snprintf(id_file, sizeof id_file, "%s", path);
        } else if ((rc = wnccl__id_read(path, n, &id, sizeof id, wnccl__timeout_ms())) < 0) {
            return rc;
        }
    }
    comm *c = NULL;
    if ((rc = comm_new(&c, n, id, r, device)) < 0)
        return rc;
    *world = c;
    *rank = r;
    *size = n;
    return 0;
}

/* Waits for stream with the bootstrap's bound. */
static int stream_wait(cudaStream_t st, const char *what)
{
    struct timespec t0, now, pause = {0, 100 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int64_t limit = wnccl__timeout_ms();
    for (;;) {
        cudaError_t e = cudaStreamQuery(st);
        if (e == cudaSuccess)
            return 0;
        if (e != cudaErrorNotReady)
            return cuda_error(e, what);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 > limit)
            return weft_set_error(WEFT_EIO, "nccl: %s timed out after %lld ms", what,
                                  (long long)limit);
        nanosleep(&pause, NULL);
    }
}

/* A sub-group: its first member makes an id and sends it to the others
 * over the parent's communicator (point to point, so the parent's other
 * ranks, which do not call this, take no part). */
static int backend_group_create(void **out, void *parent, const int *ranks, int n)
{
    comm *p = parent;
    int me = -1;
    for (int i = 0; i < n; i++)
        if (ranks[i] == p->rank)
            me = i;
    if (me < 0)
        return weft_set_error(WEFT_EINVAL, "nccl: group_create on rank %d, not a member", p->rank);
    ncclUniqueId id;
    ncclResult_t nr;
    if (me == 0 && (nr = ncclGetUniqueId(&id)) != ncclSuccess)
        return nccl_error(nr, NULL, "ncclGetUniqueId");
    if (n > 1) {
        device_guard g;
        int rc = guard_enter(&g, p->device);
        if (rc < 0)
            return rc;
        cudaStream_t st = NULL;
        void *buf = NULL;
        cudaError_t e = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
        if (e == cudaSuccess)
            e = cudaMalloc(&buf, sizeof id);
        if (e == cudaSuccess && me == 0)
            e = cudaMemcpy(buf, &id, sizeof id, cudaMemcpyHostToDevice);
        if (e != cudaSuccess)
            rc = cuda_error(e, "preparing a sub-group's id");
        if (rc == 0) {
            nr = ncclGroupStart();
            for (int i = 1; i < n && nr == ncclSuccess && me == 0; i++)
                nr = ncclSend(buf, sizeof id, ncclUint8, ranks[i], p->nccl, st);
            if (nr == ncclSuccess && me != 0)
                nr = ncclRecv(buf, sizeof id, ncclUint8, ranks[0], p->nccl, st);
            ncclResult_t end = ncclGroupEnd();
            if (nr == ncclSuccess)
                nr = end;
            if (nr != ncclSuccess)
                rc = nccl_error(nr, p, "sending a sub-group's id");
        }
        if (rc == 0)
            rc = stream_wait(st, "sending a sub-group's id");
        if (rc == 0 && me != 0 && (e = cudaMemcpy(&id, buf, sizeof id, cudaMemcpyDeviceToHost)))
            rc = cuda_error(e, "reading a sub-group's id");
        if (buf)
            cudaFree(buf);
        if (st)
            cudaStreamDestroy(st);
        guard_leave(&g);
        if (rc < 0)
            return rc;
    }
    comm *c = NULL;
    int rc = comm_new(&c, n, id, me, p->device);
    if (rc < 0)
        return rc;
    *out = c;
    return 0;
}

static void backend_group_destroy(void *comm_)
{
    comm *c = comm_;
    if (!c)
        return;
    device_guard g;
    int entered = guard_enter(&g, c->device) == 0;
    if (!c->aborted) {
        /* an aborted communicator's memory may still be in use by kernels
         * that never finished: it stays, as the core keeps the buffers */
        ncclCommDestroy(c->nccl);
        cudaFree(c->scratch);
    }
    for (pinned *b = c->spare, *next; b; b = next) {
        next = b->next;
        cudaFreeHost(b->data);
        free(b);
    }
    if (entered)
        guard_leave(&g);
    free(c);
}

static pinned *pinned_take(comm *c, size_t bytes)
{
    for (pinned **p = &c->spare; *p; p = &(*p)->next)
        if ((*p)->cap >= bytes) {
            pinned *b = *p;
            *p = b->next;
            return b;
        }
    pinned *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    if (cudaHostAlloc((void **)&b->data, bytes, cudaHostAllocDefault) != cudaSuccess) {
        free(b);
        return NULL;
    }
    b->cap = bytes;
    return b;
}

static void pinned_give(comm *c, pinned *b)
{
    if (!b)
        return;
    b->next = c->spare;
    c->spare = b;
}

/* Records the request's event on st and hands it out. */
static int request_finish(void **out, comm *c, int kind, cudaStream_t st, request *q)
{
    cudaError_t e = cudaEventCreateWithFlags(&q->done, cudaEventDisableTiming);
    if (e == cudaSuccess && (e = cudaEventRecord(q->done, st)) != cudaSuccess)
        cudaEventDestroy(q->done);
    if (e != cudaSuccess) {
        pinned_give(c, q->buf);
        free(q);
        return cuda_error(e, "recording the collective's event");
    }
    q->c = c;
    q->kind = kind;
    *out = q;
    return 0;
}

/* all_to_all, gather and scatter: blocks moved by send/recv in one NCCL
 * group; a rank's own block is a device copy. */
static ncclResult_t blocks(const comm *c, const weft_dist_request_desc *d, const wnccl_plan *p,
                           cudaStream_t st, cudaError_t *copy)
{
    const unsigned char *send = d->send;
    unsigned char *recv = d->recv;
    size_t b = p->block_bytes;
    int me = c->rank;
    *copy = cudaSuccess;
    switch (d->kind) {
    case WEFT_DIST_ALL_TO_ALL:
        *copy = cudaMemcpyAsync(recv + me * b, send + me * b, b, cudaMemcpyDeviceToDevice, st);
        break;
    case WEFT_DIST_GATHER:
        if (me == d->root)
            *copy = cudaMemcpyAsync(recv + me * b, send, b, cudaMemcpyDeviceToDevice, st);
        break;
    case WEFT_DIST_SCATTER:
        if (me == d->root)
            *copy = cudaMemcpyAsync(recv, send + me * b, b, cudaMemcpyDeviceToDevice, st);
        break;
    }
    if (*copy != cudaSuccess || c->size == 1)
        return ncclSuccess;
    ncclResult_t r = ncclGroupStart();
    for (int peer = 0; peer < c->size && r == ncclSuccess; peer++) {
        if (peer == me)
            continue;
        if (d->kind == WEFT_DIST_ALL_TO_ALL) {
            r = ncclSend(send + peer * b, p->count, p->type, peer, c->nccl, st);
            if (r == ncclSuccess)
                r = ncclRecv(recv + peer * b, p->count, p->type, peer, c->nccl, st);
        } else if (d->kind == WEFT_DIST_GATHER && me == d->root) {
            r = ncclRecv(recv + peer * b, p->count, p->type, peer, c->nccl, st);
        } else if (d->kind == WEFT_DIST_SCATTER && me == d->root) {
            r = ncclSend(send + peer * b, p->count, p->type, peer, c->nccl, st);
        } else if (peer == d->root) {
            r = d->kind == WEFT_DIST_GATHER
                    ? ncclSend(send, p->count, p->type, peer, c->nccl, st)
                    : ncclRecv(recv, p->count, p->type, peer, c->nccl, st);
        }
    }
    ncclResult_t end = ncclGroupEnd();
    return r != ncclSuccess ? r : end;
}

static int backend_start(void **out, void *comm_, const weft_dist_request_desc *d)
{
    comm *c = comm_;
    static const char *const calls[WEFT_DIST_NUM_KINDS] = {
        "ncclAllReduce", "ncclBroadcast", "ncclReduce", "ncclAllGather",
        "ncclReduceScatter", "ncclSend/ncclRecv", "ncclSend/ncclRecv", "ncclSend/ncclRecv",
        "ncclAllReduce (barrier)", "ncclSend", "ncclRecv"};
    if (d->control)
        return weft_set_error(WEFT_ENOTSUP, "nccl: control messages are not used (the agreement "
                                            "step goes through exchange)");
    if (d->device.type >= 0 && d->device.type != WEFT_DEVICE_TYPE_CUDA)
        return weft_set_error(WEFT_EDEVICE, "nccl: the buffers are not CUDA memory (%s)",
                              weft_device_type_name(d->device.type));
    if (d->device.type == WEFT_DEVICE_TYPE_CUDA && d->device.index != c->device)
        return weft_set_error(WEFT_EDEVICE,
                              "nccl: the tensors are on cuda:%d but the communicator is on "
                              "cuda:%d (chosen by WEFT_NCCL_DEVICE, else the local rank)",
                              d->device.index, c->device);
    wnccl_plan p;
    int rc = wnccl__plan(&p, d->kind, d->op, d->dtype, d->count);
    if (rc < 0)
        return rc;
    request *q = calloc(1, sizeof *q);
    if (!q)
        return weft_set_error(WEFT_ENOMEM, "nccl: out of memory");
    device_guard g;
    if ((rc = guard_enter(&g, c->device)) < 0) {
        free(q);
        return rc;
    }
    cudaStream_t st = stream_of(c, d);
    ncclResult_t r = ncclSuccess;
    cudaError_t copy = cudaSuccess;
    /* every rank agreed on the count: an empty call is skipped everywhere */
    if (p.count > 0 || d->kind == WEFT_DIST_BARRIER) {
        switch (d->kind) {
        case WEFT_DIST_ALL_REDUCE:
            r = ncclAllReduce(d->send, d->recv, p.count, p.type, p.op, c->nccl, st);
            break;
        case WEFT_DIST_BROADCAST:
            r = ncclBroadcast(d->send, d->recv, p.count, p.type, d->root, c->nccl, st);
            break;
        case WEFT_DIST_REDUCE:
            r = ncclReduce(d->send, d->recv, p.count, p.type, p.op, d->root, c->nccl, st);
            break;
        case WEFT_DIST_ALL_GATHER:
            r = ncclAllGather(d->send, d->recv, p.count, p.type, c->nccl, st);
            break;
        case WEFT_DIST_REDUCE_SCATTER:
            r = ncclReduceScatter(d->send, d->recv, p.count, p.type, p.op, c->nccl, st);
            break;
        case WEFT_DIST_ALL_TO_ALL:
        case WEFT_DIST_GATHER:
        case WEFT_DIST_SCATTER:
            r = blocks(c, d, &p, st, &copy);
            break;
        case WEFT_DIST_BARRIER:
            r = ncclAllReduce(c->scratch, c->scratch, 1, ncclInt32, ncclSum, c->nccl, st);
            break;
        case WEFT_DIST_SEND:
            /* NCCL matches by order per peer, not by tag (as torch's NCCL
             * backend): sends and receives between two ranks must be
             * posted in the same order on both */
            r = ncclSend(d->send, p.count, p.type, d->root, c->nccl, st);
            break;
        case WEFT_DIST_RECV:
            r = ncclRecv(d->recv, p.count, p.type, d->root, c->nccl, st);
            break;
        }
    }
    if (r != ncclSuccess || copy != cudaSuccess) {
        rc = r != ncclSuccess ? nccl_error(r, c, calls[d->kind])
                              : cuda_error(copy, "the rank's own block (cudaMemcpyAsync)");
        free(q);
    } else {
        rc = request_finish(out, c, d->kind, st, q); /* frees q on failure */
    }
    guard_leave(&g);
    return rc;
}

/* The agreement step: every rank's record, gathered through the device
 * (one all_gather of a few hundred bytes per rank) and copied back to
 * pinned memory, which test() copies into all once the event says so. */
static int backend_exchange(void **out, void *comm_, const void *mine, void *all, size_t bytes,
                            const weft_dist_request_desc *d)
{
    comm *c = comm_;
    size_t total = bytes * (size_t)(c->size + 1);
    request *q = calloc(1, sizeof *q);
    if (!q)
        return weft_set_error(WEFT_ENOMEM, "nccl: out of memory");
    if (!(q->buf = pinned_take(c, total))) {
        free(q);
        return weft_set_error(WEFT_ENOMEM, "nccl: no pinned memory for the agreement step");
    }
    memcpy(q->buf->data, mine, bytes);
    q->offset = bytes;
    q->bytes = bytes * (size_t)c->size;
    q->out = all;
    device_guard g;
    int rc = guard_enter(&g, c->device);
    if (rc < 0) {
        pinned_give(c, q->buf);
        free(q);
        return rc;
    }
    cudaStream_t st = stream_of(c, d);
    unsigned char *dev = NULL;
    cudaError_t e = cudaMallocAsync((void **)&dev, total, st);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(dev, q->buf->data, bytes, cudaMemcpyHostToDevice, st);
    ncclResult_t r = ncclSuccess;
    if (e == cudaSuccess)
        r = ncclAllGather(dev, dev + bytes, bytes, ncclUint8, c->nccl, st);
    if (e == cudaSuccess && r == ncclSuccess)
        e = cudaMemcpyAsync(q->buf->data + bytes, dev + bytes, q->bytes, cudaMemcpyDeviceToHost, st);
    if (dev)
        cudaFreeAsync(dev, st);
    if (e != cudaSuccess || r != ncclSuccess) {
        rc = r != ncclSuccess ? nccl_error(r, c, "ncclAllGather (agreement step)")
                              : cuda_error(e, "the agreement step's copies");
        pinned_give(c, q->buf);
        free(q);
    } else {
        rc = request_finish(out, c, WEFT_DIST_NUM_KINDS, st, q);
    }
    guard_leave(&g);
    return rc;
}

static void request_free(request *q)
{
    cudaEventDestroy(q->done);
    pinned_give(q->c, q->buf);
    free(q);
}

static int backend_test(void *req)
{
    request *q = req;
    cudaError_t e = cudaEventQuery(q->done);
    if (e == cudaErrorNotReady) {
        /* a peer's failure or a network error shows here, not in the event */
        ncclResult_t async = ncclSuccess;
        if (ncclCommGetAsyncError(q->c->nccl, &async) == ncclSuccess && async != ncclSuccess &&
            async != ncclInProgress) {
            int rc = nccl_error(async, q->c, "the communicator (ncclCommGetAsyncError)");
            q->buf = NULL; /* a copy into it may still be queued: never reuse it */
            request_free(q);
            return rc;
        }
        return 0;
    }
    if (e != cudaSuccess) {
        int rc = cuda_error(e, "the collective on the device (cudaEventQuery)");
        q->buf = NULL;
        request_free(q);
        return rc;
    }
    if (q->out)
        memcpy(q->out, q->buf->data + q->offset, q->bytes);
    request_free(q);
    return 1;
}

/* The core gave up at its timeout: abort the communicator, which ends its
 * kernels (else they would spin on the GPU for good) and makes every later
 * call on it fail; the core marks the group unusable.  The request's
 * buffers are left alone, as the interface asks. */
static void backend_abandon(void *req)
{
    request *q = req;
    if (!q->c->aborted) {
        q->c->aborted = 1;
        ncclCommAbort(q->c->nccl);
    }
    cudaEventDestroy(q->done);
    free(q);
}

static int backend_finalize(void)
{
    /* rank 0's bootstrap file: no later run may read its stale id */
    if (id_file[0]) {
        remove(id_file);
        id_file[0] = '\0';
    }
    return 0;
}

__attribute__((visibility("default"))) const weft_dist_backend weft_dist_backend_entry = {
    sizeof(weft_dist_backend), WEFT_DIST_BACKEND_VERSION, "nccl",
    backend_init, backend_group_create, backend_group_destroy, backend_start, backend_test,
    backend_abandon, backend_finalize, WEFT_DEVICE_TYPE_CUDA, WEFT_DIST_CAP_AVG,
    backend_exchange};
