/* backends/mpi/plugin.c — the "mpi" collective backend (libweftdist-mpi.so)
 * on the system's MPI (Debian: Open MPI).  The only library of weft that
 * links MPI.  Every request is MPI's nonblocking form (MPI_Iallreduce,
 * MPI_Isend, ...), so that the core can poll it against its deadline and
 * give up with a message instead of blocking forever in MPI. */
#include <limits.h>
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
} comm;

typedef struct request {
    MPI_Request req;
    int kind;
    int64_t expected; /* a receive's element count */
    MPI_Datatype type;
    int peer;
} request;

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
    *out = c;
    return 0;
}

static int backend_init(void **world, int *rank, int *size)
{
    int inited = 0, rc;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided;
        /* the core calls one at a time from any thread */
        rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
        if (rc != MPI_SUCCESS)
            return weft_set_error(WEFT_EIO, "mpi: MPI_Init_thread failed (code %d)", rc);
        started_mpi = 1;
    }
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
    MPI_Comm_free(&c->control);
    MPI_Comm_free(&c->data);
    free(c);
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
    /* MPI counts are int; larger blocks need a derived type (not yet) */
    if (d->count > INT_MAX)
        return weft_set_error(WEFT_ENOTSUP,
                              "mpi: %lld elements per rank; this backend moves at most %d at once",
                              (long long)d->count, INT_MAX);
    int n = (int)d->count, rc;
    request *r = calloc(1, sizeof *r);
    if (!r)
        return weft_set_error(WEFT_ENOMEM, "mpi: out of memory");
    r->kind = d->kind;
    r->type = type;
    r->expected = d->count;
    r->peer = d->root;
    void *send = (void *)d->send;
    MPI_Comm data = d->control ? c->control : c->data;
    switch (d->kind) {
    case WEFT_DIST_ALL_REDUCE:
        rc = MPI_Iallreduce(send == d->recv ? MPI_IN_PLACE : send, d->recv, n, type, op, data,
                            &r->req);
        break;
    case WEFT_DIST_BROADCAST:
        rc = MPI_Ibcast(d->recv, n, type, d->root, data, &r->req);
        break;
    case WEFT_DIST_REDUCE:
        if (c->rank == d->root)
            rc = MPI_Ireduce(send == d->recv ? MPI_IN_PLACE : send, d->recv, n, type, op, d->root,
                             data, &r->req);
        else
            rc = MPI_Ireduce(send, NULL, n, type, op, d->root, data, &r->req);
        break;
    case WEFT_DIST_ALL_GATHER:
        rc = MPI_Iallgather(send, n, type, d->recv, n, type, data, &r->req);
        break;
    case WEFT_DIST_REDUCE_SCATTER:
        rc = MPI_Ireduce_scatter_block(send, d->recv, n, type, op, data, &r->req);
        break;
    case WEFT_DIST_ALL_TO_ALL:
        rc = MPI_Ialltoall(send, n, type, d->recv, n, type, data, &r->req);
        break;
    case WEFT_DIST_GATHER:
        rc = MPI_Igather(send, n, type, d->recv, n, type, d->root, data, &r->req);
        break;
    case WEFT_DIST_SCATTER:
        rc = MPI_Iscatter(send, n, type, d->recv, n, type, d->root, data, &r->req);
        break;
    case WEFT_DIST_BARRIER:
        rc = MPI_Ibarrier(data, &r->req);
        break;
    case WEFT_DIST_SEND:
        rc = MPI_Isend(send, n, type, d->root, d->tag, data, &r->req);
        break;
    case WEFT_DIST_RECV:
        rc = MPI_Irecv(d->recv, n, type, d->root, d->tag, data, &r->req);
        break;
    default:
        free(r);
        return weft_set_error(WEFT_EINVAL, "mpi: unknown request kind %d", d->kind);
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
    int done = 0;
    MPI_Status st;
    int rc = MPI_Test(&r->req, &done, &st);
    if (rc == MPI_ERR_IN_STATUS)
        rc = st.MPI_ERROR;
    if (rc != MPI_SUCCESS) {
        int code = rc;
        int cls = 0;
        MPI_Error_class(code, &cls);
        int peer = r->peer;
        long long want = (long long)r->expected;
        free(r);
        if (cls == MPI_ERR_TRUNCATE)
            return weft_set_error(WEFT_ESHAPE, "mpi: rank %d sent more elements than the %lld this "
                                               "rank receives",
                                  peer, want);
        return mpi_error(code, "the request");
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
    /* MPI cannot cancel a collective; the request is left to MPI */
    free(handle);
}

static int backend_finalize(void)
{
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
    backend_abandon, backend_finalize};
