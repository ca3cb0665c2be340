/* The operation codes of traced MPI calls, shared by the tracer (native/trace/hv_trace.c), which writes them,
 * and the replay's lowering (native/sim/lower.c), which reads them. The names, in the same order, are
 * hpcvar.traces.parquet.OPS; tests/unit/test_native.py checks that the two lists agree. */
#ifndef HV_OPS_H
#define HV_OPS_H

enum hv_op {
    OP_INIT = 0,
    OP_FINALIZE,
    OP_SEND,
    OP_RECV,
    OP_ISEND,
    OP_IRECV,
    OP_SENDRECV,
    OP_SENDRECV_RECV,
    OP_WAIT,
    OP_BARRIER,
    OP_BCAST,
    OP_REDUCE,
    OP_ALLREDUCE,
    OP_GATHER,
    OP_GATHERV,
    OP_SCATTER,
    OP_SCATTERV,
    OP_ALLGATHER,
    OP_ALLGATHERV,
    OP_ALLTOALL,
    OP_ALLTOALLV,
    OP_PROBE, /* a successful MPI_Iprobe, or MPI_Probe: the message is there (not received) */
    OP_COUNT
};

#endif
