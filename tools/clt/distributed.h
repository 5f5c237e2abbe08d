/* `clt train --distributed`: one process per device under mpirun, with
 * gradients summed by MPI_Allreduce (the library takes any clt_collective;
 * this one is MPI's). Static functions in a header, included by train.c
 * alone. Without MPI at build time the start fails with a message saying
 * so. */
#ifndef CLT_TOOL_DISTRIBUTED_H
#define CLT_TOOL_DISTRIBUTED_H

#include <limits.h>
#include <stdio.h>

#include <cltensor.h>

#ifdef CLT_HAVE_MPI
#include <mpi.h>

/* Sums in place over MPI_COMM_WORLD, in chunks that fit MPI's int counts. */
static clt_status mpi_allreduce_sum(void *ctx, float *buf, int64_t n)
{
    (void)ctx;
    for (int64_t at = 0; at < n;) {
        int count = n - at > INT_MAX ? INT_MAX : (int)(n - at);
        int rc = MPI_Allreduce(MPI_IN_PLACE, buf + at, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) {
            char msg[MPI_MAX_ERROR_STRING];
            int len = 0;
            MPI_Error_string(rc, msg, &len);
            return clt_set_error(CLT_ERR_IO, "MPI_Allreduce failed: %.*s", len, msg);
        }
        at += count;
    }
    return CLT_OK;
}

/* Initialises MPI and fills comm (rank, world, MPI_Allreduce on
 * MPI_COMM_WORLD). Returns 0, or prints why not and returns 1. */
static int clt_tool_mpi_start(clt_collective *comm)
{
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
        fprintf(stderr, "clt train: --distributed: MPI_Init failed\n");
        return 1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &comm->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &comm->world);
    comm->allreduce_sum = mpi_allreduce_sum;
    comm->ctx = NULL;
    return 0;
}

/* Finalizes MPI after a successful start. */
static void clt_tool_mpi_stop(void) { MPI_Finalize(); }

#else

static int clt_tool_mpi_start(clt_collective *comm)
{
    (void)comm;
    fprintf(stderr, "clt train: --distributed needs MPI, and this clt was built without it (install "
                    "libopenmpi-dev and rebuild)\n");
    return 1;
}

static void clt_tool_mpi_stop(void) {}

#endif

#endif
