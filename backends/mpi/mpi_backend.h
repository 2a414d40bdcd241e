/* backends/mpi/mpi_backend.h — internal to the MPI collective backend
 * (prefix wmpi__): the dtype and reduction tables that plugin.c uses. */
#ifndef WEFT_BACKENDS_MPI_BACKEND_H
#define WEFT_BACKENDS_MPI_BACKEND_H

#include <mpi.h>

#include <weft/distributed.h>

/* Creates the MPI types and user reductions for float16 and bfloat16
 * (MPI has neither).  After MPI_Init. */
int wmpi__half_init(void);
void wmpi__half_fini(void);
/* The MPI datatype of a weft dtype (MPI_DATATYPE_NULL: none). */
MPI_Datatype wmpi__datatype(int dtype);
/* The MPI reduction of op on dtype (MPI_OP_NULL: none). */
MPI_Op wmpi__op(int op, int dtype);

/* out[i] = a[i] op b[i] for n elements of one dtype; out may alias a or b. */
typedef void wmpi__kernel(void *out, const void *a, const void *b, int64_t n);
/* The shared-memory path's kernel for op (sum, max, min, prod) on dtype;
 * NULL where there is none (complex max and min, avg, unknown values). */
wmpi__kernel *wmpi__kernel_of(int op, int dtype);

/* The shared-memory path (shm.c): all_reduce, broadcast and all_gather
 * between ranks of one node through shared memory, progressed by the caller's tests.
 * NULL shm: the group has none (ranks on several nodes, a world of one,
 * or the memory could not be made), and MPI's calls carry it. */
typedef struct wmpi__shm wmpi__shm;
typedef struct wmpi__shm_op wmpi__shm_op;
/* Collective over data's ranks (at group creation, on the caller's
 * thread); never fails: *out stays NULL where there is no such path. */
void wmpi__shm_open(wmpi__shm **out, MPI_Comm data);
/* Local: the memory goes when the last rank lets go. */
void wmpi__shm_close(wmpi__shm *shm);
/* Whether the shared-memory path carries d (the same answer on every rank,
 * since the core's agreement step made the ranks' descriptions equal). */
int wmpi__shm_takes(const wmpi__shm *shm, const weft_dist_request_desc *d);
/* Queues d behind the group's earlier shared-memory ops; < 0: no memory. */
int wmpi__shm_start(wmpi__shm_op **out, wmpi__shm *shm, const weft_dist_request_desc *d);
/* Advances the group's ops in order, without waiting: 1 op done (freed),
 * 0 pending. */
int wmpi__shm_test(wmpi__shm_op *op);
/* The core gave up on op: the group's path is broken for good (the peers'
 * positions in it are unknown). */
void wmpi__shm_abandon(wmpi__shm_op *op);

#endif
