/* A communication-heavy MPI program with network conflicts, for tracing and replay on the testbed.
 *
 * 4 or more ranks, ITERS iterations (argv[1], default 4) of:
 *   A. fan-in:  every rank > 0 sends SIZE bytes to rank 0 at once   (conflict "in" at rank 0's node)
 *   B. fan-out: rank 0 sends SIZE bytes to every other rank at once (conflict "out")
 *   C. ring:    each rank sends 2 x SIZE bytes to rank+1            (no conflict)
 *   D. pairs:   ranks 1 and 2 both send SIZE bytes to rank 3 while rank 3 sends to rank 0 ("in" at 3)
 *   E. 2 ms of compute (busy loop), then MPI_Allreduce of 8 bytes.
 * SIZE = argv[2] bytes (default 2 MiB). Build: mpicc -O2 -o conflicts conflicts.c
 * Used by tests/testbed/test_replay_testbed.py (docs/replay.md, "Testbed check"). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void check(int rc, int rank, const char *what) {
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "conflicts[rank %d]: %s failed\n", rank, what);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

static void busy_ms(double ms) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do {
        clock_gettime(CLOCK_MONOTONIC, &b);
    } while ((b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) * 1e-6 < ms);
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = argc > 1 ? atoi(argv[1]) : 4;
    long n = argc > 2 ? atol(argv[2]) : 2L << 20;
    if (size < 4 || iters < 1 || n < 1) {
        if (rank == 0) fprintf(stderr, "conflicts: needs >= 4 ranks, ITERS >= 1 and SIZE >= 1\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char *sbuf = malloc(2 * (size_t)n), *rbuf = malloc(2 * (size_t)n * (size_t)size);
    MPI_Request *rq = malloc(2 * (size_t)size * sizeof *rq);
    if (!sbuf || !rbuf || !rq) {
        fprintf(stderr, "conflicts[rank %d]: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(sbuf, rank, 2 * (size_t)n);
    int nr;
    for (int it = 0; it < iters; it++) {
        /* A: fan-in to rank 0 */
        nr = 0;
        if (rank == 0)
            for (int p = 1; p < size; p++)
                check(MPI_Irecv(rbuf + (size_t)p * n, (int)n, MPI_CHAR, p, 1, MPI_COMM_WORLD, &rq[nr++]), rank, "Irecv");
        else
            check(MPI_Isend(sbuf, (int)n, MPI_CHAR, 0, 1, MPI_COMM_WORLD, &rq[nr++]), rank, "Isend");
        check(MPI_Waitall(nr, rq, MPI_STATUSES_IGNORE), rank, "Waitall");
        /* B: fan-out from rank 0 */
        nr = 0;
        if (rank == 0)
            for (int p = 1; p < size; p++)
                check(MPI_Isend(sbuf, (int)n, MPI_CHAR, p, 2, MPI_COMM_WORLD, &rq[nr++]), rank, "Isend");
        else
            check(MPI_Irecv(rbuf, (int)n, MPI_CHAR, 0, 2, MPI_COMM_WORLD, &rq[nr++]), rank, "Irecv");
        check(MPI_Waitall(nr, rq, MPI_STATUSES_IGNORE), rank, "Waitall");
        /* C: ring of 2 x SIZE */
        check(MPI_Sendrecv(sbuf, (int)(2 * n), MPI_CHAR, (rank + 1) % size, 3, rbuf, (int)(2 * n), MPI_CHAR,
                           (rank + size - 1) % size, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE), rank, "Sendrecv");
        /* D: 1 -> 3, 2 -> 3, 3 -> 0 */
        nr = 0;
        if (rank == 1 || rank == 2)
            check(MPI_Isend(sbuf, (int)n, MPI_CHAR, 3, 4, MPI_COMM_WORLD, &rq[nr++]), rank, "Isend");
        if (rank == 3) {
            check(MPI_Irecv(rbuf, (int)n, MPI_CHAR, 1, 4, MPI_COMM_WORLD, &rq[nr++]), rank, "Irecv");
            check(MPI_Irecv(rbuf + n, (int)n, MPI_CHAR, 2, 4, MPI_COMM_WORLD, &rq[nr++]), rank, "Irecv");
            check(MPI_Isend(sbuf, (int)n, MPI_CHAR, 0, 5, MPI_COMM_WORLD, &rq[nr++]), rank, "Isend");
        }
        if (rank == 0) check(MPI_Irecv(rbuf, (int)n, MPI_CHAR, 3, 5, MPI_COMM_WORLD, &rq[nr++]), rank, "Irecv");
        check(MPI_Waitall(nr, rq, MPI_STATUSES_IGNORE), rank, "Waitall");
        /* E: compute, then a small allreduce */
        busy_ms(2.0);
        double x = rank, y;
        check(MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), rank, "Allreduce");
    }
    free(sbuf);
    free(rbuf);
    free(rq);
    MPI_Finalize();
    return 0;
}
