/* backends/mpi/plugin.c — the "mpi" collective backend (libweftdist-mpi.so)
 * on the system's MPI (Debian: Open MPI).  The only library of weft that
 * links MPI.  Nothing here may block the caller without bound: the core
 * polls every request against its deadline.  Point-to-point messages (the
 * application's and the core's agreement records) are MPI's nonblocking
 * calls.  Collectives run as MPI's *blocking* calls on one worker thread,
 * in the order the core starts them, while the caller polls a flag: Open
 * MPI's nonblocking collectives (libnbc) advance only inside MPI_Test and
 * took 6x the blocking MPI_Allreduce's time for 1 MB here, while the
 * blocking ones use the tuned algorithms.  That needs MPI_THREAD_MULTIPLE;
 * an MPI without it gets the nonblocking calls instead, and so do buffers
 * under 1 MiB (worker_min_bytes).  all_reduce and broadcast between ranks
 * of one node take neither: they run through a shared window (shm.c),
 * advanced by the core's tests. */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/plugin.h>

#include "mpi_backend.h"

/* A communicator for the data and a duplicate for the core's agreement
 * messages, so that those never match the application's send/recv. */
typedef struct comm {
    MPI_Comm data, control;
    int rank;
    wmpi__shm *shm; /* NULL: the ranks do not share a node (or one rank) */
} comm;

typedef struct request {
    MPI_Request req;
    int kind;
    int64_t expected; /* a receive's element count */
    MPI_Datatype type;
    int peer;
    wmpi__shm_op *shm_op; /* carried by the shared window */
    /* a collective for the worker thread: its arguments, and its state */
    int on_worker;
    comm *comm;
    weft_dist_request_desc desc;
    MPI_Op op;
    _Atomic int state; /* PENDING, DONE or ABANDONED */
    int rc;            /* the MPI code, once DONE */
    struct request *next;
} request;

enum { PENDING = 0, DONE, ABANDONED };

/* The worker thread and its queue of collectives. */
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_cond = PTHREAD_COND_INITIALIZER;
static request *queue_head, *queue_tail;
static pthread_t worker;
static int worker_running, worker_stop;
static _Atomic int worker_busy_abandoned; /* a collective given up on is still inside MPI */
static int thread_multiple;
/* Below this size a collective runs as MPI's nonblocking call on the
 * caller's thread: handing it to the worker costs a wake-up, which on a
 * busy machine outweighs what the tuned algorithms save on small buffers
 * (a training step's 0.8 MB bucket: 10 ms against 20 ms per step here). */
static int64_t worker_min_bytes = 1 << 20;
/* The most elements one MPI call moves: INT_MAX, MPI's count type;
 * WEFT_MPI_MAX_PIECE lowers it so that tests split small tensors. */
static int64_t max_piece = INT_MAX;

static int started_mpi; /* MPI_Init was ours, so MPI_Finalize is too */

static int mpi_error(int code, const char *what)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", code);
    return weft_set_error(WEFT_EIO, "mpi: %s failed: %s", what, text);
}

static int comm_wrap(void **out, MPI_Comm base, int dup)
{
    comm *c = calloc(1, sizeof *c);
    if (!c)
        return weft_set_error(WEFT_ENOMEM, "mpi: out of memory");
    int rc = dup ? MPI_Comm_dup(base, &c->data) : MPI_SUCCESS;
    if (!dup)
        c->data = base;
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_dup(c->data, &c->control);
    if (rc != MPI_SUCCESS) {
        free(c);
        return mpi_error(rc, "MPI_Comm_dup");
    }
    /* errors come back as codes: the core turns them into messages */
    MPI_Comm_set_errhandler(c->data, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(c->control, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->data, &c->rank);
    wmpi__shm_open(&c->shm, c->data);
    *out = c;
    return 0;
}

static int backend_init(void **world, int *rank, int *size)
{
    int inited = 0, rc;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided;
        /* MULTIPLE: the worker thread sits in a collective while the
         * caller's thread posts point-to-point messages */
        rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
        if (rc != MPI_SUCCESS)
            return weft_set_error(WEFT_EIO, "mpi: MPI_Init_thread failed (code %d)", rc);
        started_mpi = 1;
    }
    int level = 0;
    MPI_Query_thread(&level);
    thread_multiple = level >= MPI_THREAD_MULTIPLE && !getenv("WEFT_MPI_NONBLOCKING_COLLECTIVES");
    const char *piece = getenv("WEFT_MPI_MAX_PIECE");
    if (piece && strtoll(piece, NULL, 10) > 0 && strtoll(piece, NULL, 10) < INT_MAX)
        max_piece = strtoll(piece, NULL, 10);
    const char *min = getenv("WEFT_MPI_WORKER_MIN_BYTES");
    if (min && *min)
        worker_min_bytes = strtoll(min, NULL, 10);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (wmpi__half_init() < 0)
        return weft_set_error(WEFT_EIO, "mpi: creating the float16 and bfloat16 reductions failed");
    if ((rc = comm_wrap(world, MPI_COMM_WORLD, 1)) < 0)
        return rc;
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    return 0;
}

static int backend_group_create(void **out, void *parent, const int *ranks, int n)
{
    comm *p = parent;
    MPI_Group all, sub;
    MPI_Comm made;
    int rc = MPI_Comm_group(p->data, &all);
    if (rc == MPI_SUCCESS)
        rc = MPI_Group_incl(all, n, ranks, &sub);
    if (rc != MPI_SUCCESS)
        return mpi_error(rc, "MPI_Group_incl");
    /* collective over the members only: the other ranks need not call */
    rc = MPI_Comm_create_group(p->data, sub, 0x5eed, &made);
    MPI_Group_free(&sub);
    MPI_Group_free(&all);
    if (rc != MPI_SUCCESS)
        return mpi_error(rc, "MPI_Comm_create_group");
    rc = comm_wrap(out, made, 0);
    if (rc < 0)
        MPI_Comm_free(&made);
    return rc;
}

static void backend_group_destroy(void *handle)
{
    comm *c = handle;
    wmpi__shm_close(c->shm);
    MPI_Comm_free(&c->control);
    MPI_Comm_free(&c->data);
    free(c);
}

/* Runs one collective: MPI's nonblocking form into *req, or with req NULL
 * its blocking form (on the worker thread). */
static int collective(const comm *c, const weft_dist_request_desc *d, MPI_Datatype type, MPI_Op op,
                      MPI_Request *req)
{
    int n = (int)d->count;
    void *send = (void *)d->send, *recv = d->recv;
    void *in_place_send = send == recv ? MPI_IN_PLACE : send;
    MPI_Comm data = c->data;
    switch (d->kind) {
    case WEFT_DIST_ALL_REDUCE:
        return req ? MPI_Iallreduce(in_place_send, recv, n, type, op, data, req)
                   : MPI_Allreduce(in_place_send, recv, n, type, op, data);
    case WEFT_DIST_BROADCAST:
        return req ? MPI_Ibcast(recv, n, type, d->root, data, req)
                   : MPI_Bcast(recv, n, type, d->root, data);
    case WEFT_DIST_REDUCE:
        /* in place on the root; elsewhere only send is read */
        if (c->rank != d->root)
            recv = NULL;
        else
            send = in_place_send;
        return req ? MPI_Ireduce(send, recv, n, type, op, d->root, data, req)
                   : MPI_Reduce(send, recv, n, type, op, d->root, data);
    case WEFT_DIST_ALL_GATHER:
        return req ? MPI_Iallgather(send, n, type, recv, n, type, data, req)
                   : MPI_Allgather(send, n, type, recv, n, type, data);
    case WEFT_DIST_REDUCE_SCATTER:
        return req ? MPI_Ireduce_scatter_block(send, recv, n, type, op, data, req)
                   : MPI_Reduce_scatter_block(send, recv, n, type, op, data);
    case WEFT_DIST_ALL_TO_ALL:
        return req ? MPI_Ialltoall(send, n, type, recv, n, type, data, req)
                   : MPI_Alltoall(send, n, type, recv, n, type, data);
    case WEFT_DIST_GATHER:
        return req ? MPI_Igather(send, n, type, recv, n, type, d->root, data, req)
                   : MPI_Gather(send, n, type, recv, n, type, d->root, data);
    case WEFT_DIST_SCATTER:
        return req ? MPI_Iscatter(send, n, type, recv, n, type, d->root, data, req)
                   : MPI_Scatter(send, n, type, recv, n, type, d->root, data);
    case WEFT_DIST_BARRIER:
        return req ? MPI_Ibarrier(data, req) : MPI_Barrier(data);
    default:
        return MPI_ERR_OTHER;
    }
}

/* The blocking form on the worker, in pieces of at most max_piece elements
 * for the collectives that split elementwise. */
static int blocking_in_pieces(request *r)
{
    weft_dist_request_desc d = r->desc;
    if (d.count <= max_piece)
        return collective(r->comm, &d, r->type, r->op, NULL);
    size_t esize = weft_dtype_size(d.dtype);
    int in_place = d.send == d.recv;
    for (int64_t off = 0; off < r->desc.count; off += max_piece) {
        d.count = r->desc.count - off < max_piece ? r->desc.count - off : max_piece;
        d.send = (const char *)r->desc.send + off * esize;
        d.recv = in_place ? (void *)d.send : (char *)r->desc.recv + off * esize;
        int rc = collective(r->comm, &d, r->type, r->op, NULL);
        if (rc != MPI_SUCCESS)
            return rc;
    }
    return MPI_SUCCESS;
}

static void *worker_main(void *unused)
{
    pthread_mutex_lock(&queue_lock);
    for (;;) {
        while (!queue_head && !worker_stop)
            pthread_cond_wait(&queue_cond, &queue_lock);
        if (!queue_head)
            break;
        request *r = queue_head;
        queue_head = r->next;
        if (!queue_head)
            queue_tail = NULL;
        pthread_mutex_unlock(&queue_lock);
        int rc = blocking_in_pieces(r);
        r->rc = rc;
        int expected = PENDING;
        if (!atomic_compare_exchange_strong(&r->state, &expected, DONE)) {
            /* abandoned by the core's timeout while inside MPI */
            free(r);
            atomic_fetch_sub(&worker_busy_abandoned, 1);
        }
        pthread_mutex_lock(&queue_lock);
    }
    pthread_mutex_unlock(&queue_lock);
    return NULL;
}

static int worker_submit(request *r)
{
    pthread_mutex_lock(&queue_lock);
    if (!worker_running) {
        worker_stop = 0;
        if (pthread_create(&worker, NULL, worker_main, NULL) != 0) {
            pthread_mutex_unlock(&queue_lock);
            return weft_set_error(WEFT_ENOMEM, "mpi: cannot start the worker thread");
        }
        worker_running = 1;
    }
    r->next = NULL;
    if (queue_tail)
        queue_tail->next = r;
    else
        queue_head = r;
    queue_tail = r;
    pthread_cond_signal(&queue_cond);
    pthread_mutex_unlock(&queue_lock);
    return 0;
}

static int backend_start(void **out, void *handle, const weft_dist_request_desc *d)
{
    comm *c = handle;
    MPI_Datatype type = wmpi__datatype(d->dtype);
    if (type == MPI_DATATYPE_NULL)
        return weft_set_error(WEFT_EDTYPE, "mpi: no MPI type for %s", weft_dtype_name(d->dtype));
    MPI_Op op = MPI_OP_NULL;
    if (d->kind == WEFT_DIST_ALL_REDUCE || d->kind == WEFT_DIST_REDUCE ||
        d->kind == WEFT_DIST_REDUCE_SCATTER) {
        op = wmpi__op(d->op, d->dtype);
        if (op == MPI_OP_NULL)
            return weft_set_error(WEFT_EDTYPE, "mpi: no reduction %s for %s",
                                  weft_reduce_op_name(d->op), weft_dtype_name(d->dtype));
    }
    if (d->kind < 0 || d->kind >= WEFT_DIST_NUM_KINDS)
        return weft_set_error(WEFT_EINVAL, "mpi: unknown request kind %d", d->kind);
    /* MPI counts are int: all_reduce, broadcast and reduce of more are
     * split into pieces on the worker thread; the others would need
     * derived types (not done) */
    int splittable = d->kind == WEFT_DIST_ALL_REDUCE || d->kind == WEFT_DIST_BROADCAST ||
                     d->kind == WEFT_DIST_REDUCE;
    if (d->count > max_piece && !(splittable && thread_multiple))
        return weft_set_error(WEFT_ENOTSUP,
                              "mpi: %lld elements per rank for %s; this backend moves at most %lld "
                              "at once except for all_reduce, broadcast and reduce (split on its "
                              "worker thread when MPI has MPI_THREAD_MULTIPLE)",
                              (long long)d->count, d->kind == WEFT_DIST_SEND ? "send"
                              : d->kind == WEFT_DIST_RECV ? "recv" : "this collective",
                              (long long)max_piece);
    request *r = calloc(1, sizeof *r);
    if (!r)
        return weft_set_error(WEFT_ENOMEM, "mpi: out of memory");
    r->kind = d->kind;
    r->type = type;
    r->expected = d->count;
    r->peer = d->root;
    int rc;
    if (wmpi__shm_takes(c->shm, d)) {
        if ((rc = wmpi__shm_start(&r->shm_op, c->shm, d)) < 0) {
            free(r);
            return rc;
        }
        *out = r;
        return 0;
    }
    if (d->kind == WEFT_DIST_SEND || d->kind == WEFT_DIST_RECV) {
        MPI_Comm chan = d->control ? c->control : c->data;
        rc = d->kind == WEFT_DIST_SEND
                 ? MPI_Isend((void *)d->send, (int)d->count, type, d->root, d->tag, chan, &r->req)
                 : MPI_Irecv(d->recv, (int)d->count, type, d->root, d->tag, chan, &r->req);
    } else if (thread_multiple &&
               (d->count * (int64_t)weft_dtype_size(d->dtype) >= worker_min_bytes ||
                d->count > max_piece)) {
        r->on_worker = 1;
        r->comm = c;
        r->desc = *d;
        r->op = op;
        if ((rc = worker_submit(r)) < 0) {
            free(r);
            return rc;
        }
        *out = r;
        return 0;
    } else {
        rc = collective(c, d, type, op, &r->req);
    }
    if (rc != MPI_SUCCESS) {
        free(r);
        return mpi_error(rc, "starting the request");
    }
    *out = r;
    return 0;
}

static int backend_test(void *handle)
{
    request *r = handle;
    if (r->shm_op) {
        int rc = wmpi__shm_test(r->shm_op);
        if (rc != 0)
            free(r);
        return rc;
    }
    if (r->on_worker) {
        if (atomic_load(&r->state) != DONE)
            return 0;
        int rc = r->rc;
        free(r);
        return rc == MPI_SUCCESS ? 1 : mpi_error(rc, "the collective");
    }
    int done = 0;
    MPI_Status st;
    int rc = MPI_Test(&r->req, &done, &st);
    if (rc == MPI_ERR_IN_STATUS)
        rc = st.MPI_ERROR;
    if (rc != MPI_SUCCESS) {
        int cls = 0;
        MPI_Error_class(rc, &cls);
        int peer = r->peer;
        long long want = (long long)r->expected;
        free(r);
        if (cls == MPI_ERR_TRUNCATE)
            return weft_set_error(WEFT_ESHAPE,
                                  "mpi: rank %d sent more elements than the %lld this rank receives",
                                  peer, want);
        return mpi_error(rc, "the request");
    }
    if (!done)
        return 0;
    if (r->kind == WEFT_DIST_RECV) {
        int got = 0;
        MPI_Get_count(&st, r->type, &got);
        if (got != r->expected) {
            int peer = r->peer;
            long long want = (long long)r->expected;
            free(r);
            return weft_set_error(WEFT_ESHAPE, "mpi: rank %d sent %d elements, this rank expected %lld",
                                  peer, got, want);
        }
    }
    free(r);
    return 1;
}

static void backend_abandon(void *handle)
{
    request *r = handle;
    if (r->shm_op) {
        wmpi__shm_abandon(r->shm_op);
        free(r);
        return;
    }
    if (r->on_worker) {
        /* still queued: take it out; inside MPI: the worker frees it if
         * that call ever returns */
        pthread_mutex_lock(&queue_lock);
        for (request **p = &queue_head; *p; p = &(*p)->next)
            if (*p == r) {
                *p = r->next;
                if (queue_tail == r) {
                    queue_tail = NULL;
                    for (request *q = queue_head; q; q = q->next)
                        queue_tail = q;
                }
                pthread_mutex_unlock(&queue_lock);
                free(r);
                return;
            }
        pthread_mutex_unlock(&queue_lock);
        int expected = PENDING;
        atomic_fetch_add(&worker_busy_abandoned, 1);
        if (!atomic_compare_exchange_strong(&r->state, &expected, ABANDONED)) {
            atomic_fetch_sub(&worker_busy_abandoned, 1);
            free(r); /* it finished meanwhile */
        }
        return;
    }
    /* MPI cannot cancel a collective; the request is left to MPI */
    free(handle);
}

static int backend_finalize(void)
{
    if (atomic_load(&worker_busy_abandoned) > 0)
        return weft_set_error(WEFT_EBUSY, "mpi: a collective given up on after a timeout is still "
                                          "inside MPI: MPI_Finalize would wait for it forever, so "
                                          "it is not called");
    if (worker_running) {
        pthread_mutex_lock(&queue_lock);
        worker_stop = 1;
        pthread_cond_signal(&queue_cond);
        pthread_mutex_unlock(&queue_lock);
        pthread_join(worker, NULL);
        worker_running = 0;
    }
    wmpi__half_fini();
    int fin = 0;
    MPI_Finalized(&fin);
    if (started_mpi && !fin) {
        started_mpi = 0;
        int rc = MPI_Finalize();
        if (rc != MPI_SUCCESS)
            return mpi_error(rc, "MPI_Finalize");
    }
    return 0;
}

__attribute__((visibility("default"))) const weft_dist_backend weft_dist_backend_entry = {
    sizeof(weft_dist_backend), WEFT_DIST_BACKEND_VERSION, "mpi",
    backend_init, backend_group_create, backend_group_destroy, backend_start, backend_test,
    backend_abandon, backend_finalize,
    /* host buffers; the core divides for avg and sends the agreement's
     * records as control messages */
    WEFT_DEVICE_TYPE_CPU, 0, NULL};
