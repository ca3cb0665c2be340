"""The queue benchmarks (bench queues posted|unexpected): the limits the command line shows in its help, here so
that ``--help`` needs neither numpy nor the job (job.py imports them)."""

MAX_POSTED_LENGTH = 10000  # the range; the paper swept 0..1000
# Unexpected messages: each one holds, at the receiver, a request and an eager-protocol
# buffer slot until it is received; at the sender, a pending request. MPIs draw these
# from finite pools (libfabric/UCX receive descriptors, Open MPI free lists, MVAPICH
# eager credits); past a few thousand, some stall the sender (a hang until --timeout)
# or abort (the paper's InfiniBand MPI failed at 100). 10000 per rank is what MPICH
# 5.0 and Open MPI 5 take here in seconds; raise it only knowing your MPI's pools.
MAX_UNEXPECTED_LENGTH = 10000
FIT_STAT_NAMES = ("median", "p10", "min")  # the statistics of --fit-stat (job.FIT_STATS)
