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

#endif
