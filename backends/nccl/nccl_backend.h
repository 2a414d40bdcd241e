/* backends/nccl/nccl_backend.h — internal to the NCCL collective backend
 * (prefix wnccl__): the host-side logic that plugin.c uses and that
 * tests/test_nccl.c checks without a GPU — how a call maps onto NCCL's
 * types and reductions, where rank and size come from, and the file that
 * carries NCCL's unique id from rank 0 to the others.  Nothing here calls
 * CUDA or NCCL (nccl.h is included for its enums only). */
#ifndef WEFT_BACKENDS_NCCL_BACKEND_H
#define WEFT_BACKENDS_NCCL_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include <nccl.h>

#include <weft/distributed.h>

/* How one request moves: NCCL's element type and count (count weft
 * elements of dtype may be more NCCL elements: complex as pairs of reals,
 * every dtype as bytes for the collectives that only move data), and the
 * reduction.  Errors: WEFT_EDTYPE naming the dtype, the collective and the
 * reduction when NCCL has no way to reduce it (int16; complex prod),
 * WEFT_EINVAL for an unknown kind, dtype or reduction. */
typedef struct wnccl_plan {
    ncclDataType_t type;
    size_t count;        /* NCCL elements per rank block */
    size_t block_bytes;  /* bytes per rank block */
    ncclRedOp_t op;      /* reductions only */
} wnccl_plan;
int wnccl__plan(wnccl_plan *out, int kind, int op, int dtype, int64_t count);
/* Whether kind combines values (all_reduce, reduce, reduce_scatter). */
int wnccl__is_reduction(int kind);

/* This process's rank, the world's size and its rank on this machine, from
 * the launcher's environment: RANK, WORLD_SIZE, LOCAL_RANK (torchrun),
 * else OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK (Open MPI's mpirun), else
 * PMI_RANK, PMI_SIZE (MPICH's); none of them: rank 0 of 1.  Errors:
 * WEFT_EINVAL naming the variable that is not a number or out of range. */
int wnccl__env_world(int *rank, int *size, int *local_rank);
/* The CUDA device of this rank: $WEFT_NCCL_DEVICE when set, else
 * local_rank modulo the devices there are.  Errors: WEFT_EINVAL (not a
 * number, or not below n_devices), WEFT_EDEVICE (no device at all). */
int wnccl__pick_device(int local_rank, int n_devices);
/* $WEFT_DIST_TIMEOUT_MS, else 30 minutes: the bootstrap's bound. */
int64_t wnccl__timeout_ms(void);

/* The bootstrap file: rank 0 writes NCCL's unique id (bytes bytes) for a
 * world of size into path, atomically (a temporary beside it, then
 * rename), so that a reader never sees half of it.  Text:
 *     weft-nccl-id 1 <size> <hex of the id>\n
 * Errors: WEFT_EINVAL (NULL or empty path), WEFT_EIO (the file could not
 * be written: the message gives the path and errno's text). */
int wnccl__id_write(const char *path, int size, const void *id, size_t bytes);
/* The other ranks: polls path until it holds an id for a world of size,
 * for at most timeout_ms (a file of another world, or malformed, is
 * waited past: rank 0 may not have replaced a stale one yet).  Errors:
 * WEFT_EINVAL (NULL or empty path), WEFT_EIO at the timeout, naming the
 * path and what was there (nothing, another world's id, garbage). */
int wnccl__id_read(const char *path, int size, void *id, size_t bytes, int64_t timeout_ms);

#endif
