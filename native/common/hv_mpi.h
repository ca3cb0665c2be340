/* hv_mpi: the frame every MPI benchmark shares.
 *  - HV_MPI_CHECK(call): a failed MPI call prints
 *      hpcvar[rank R]: MPI_Send(...) failed: <MPI error string> (file.c:line)
 *    and calls MPI_Abort (never MPI_Finalize, which would deadlock the others).
 *  - hv_die(ctx-free): the same for our own checks (allocation, bad values).
 *  - hv_ctx_init: MPI_Init, strict option parsing (common options below),
 *    timer calibration on every rank, and the raw output header on rank 0.
 *  - hv_gather_point: collect rows from all ranks to rank 0 and write them as
 *    one point (outside any timed loop).
 * Common options: --out FILE (raw output, default "-"), --timer tsc|mono|wtime
 * (default tsc where invariant, else mono), --binary (binary rows), and the layout
 * the launcher was asked for: --expect-np N, --expect-rpn K. A world of another
 * size, or ranks on other hosts than ceil(N/K) with at most K each, stops every
 * rank with "hpcvar[rank R]: world mismatch: ..." before anything is written (a
 * wrong srun --mpi plugin starts N independent size-1 worlds that all exit 0). */
#ifndef HV_MPI_H
#define HV_MPI_H
#include <mpi.h>
#include <stddef.h>
#include "hv_args.h"
#include "hv_out.h"
#include "hv_timer.h"

/* clang-format off */ /* one option per line */
#define HV_COMMON_OPTS \
    HV_OPT_RAW("out", 0, "raw output file ('-' for stdout)"), \
    HV_OPT_RAW("timer", 0, "tsc|mono|wtime"), \
    HV_OPT_RAW("binary", 1, "write rows as float64 binary"), \
    HV_OPT_RAW("expect-np", 0, "the number of ranks the launcher was asked for (checked)"), \
    HV_OPT_RAW("expect-rpn", 0, "the ranks per node the launcher was asked for (checked)")
/* clang-format on */

typedef struct {
    MPI_Comm comm;
    int rank, size;
    hv_timer timer;
    hv_out out;       /* open on rank 0 only */
    const char *prog;
    int wait_us;      /* how hv_wait & co. wait: 0 spin in MPI, -1 sched_yield between tests,
                       * N > 0 sleep N microseconds between tests (for ranks outnumbering cores) */
} hv_ctx;

void hv_mpi_fail(const char *call, int rc, const char *file, int line) __attribute__((noreturn));
void hv_die(const char *file, int line, const char *fmt, ...) __attribute__((noreturn, format(printf, 3, 4)));
#define HV_MPI_CHECK(call) \
    do { \
        int hv_rc_ = (call); \
        if (hv_rc_ != MPI_SUCCESS) hv_mpi_fail(#call, hv_rc_, __FILE__, __LINE__); \
    } while (0)
#define HV_DIE(...) hv_die(__FILE__, __LINE__, __VA_ARGS__)
#define HV_ALLOC_CHECK(p) \
    do { \
        if (!(p)) HV_DIE("out of memory allocating %s", #p); \
    } while (0)

/* Pins the calling rank to the (rank mod n)-th of the n CPUs it may run on, so that
 * ranks of one node sharing a core cannot turn every message into a context switch
 * (ranks are placed in blocks, so this is the node-local index when ranks per node
 * do not exceed the cores). Returns the CPU, or -1 if pinning failed. */
int hv_pin_rank(int rank);

/* Allocates, touches every page (so that page faults stay out of timed loops) and checks. */
void *hv_malloc_touched(size_t bytes);

/* Waiting by ctx->wait_us. With 0 these are MPI_Wait, MPI_Waitall and MPI_Barrier (the
 * library spins); otherwise they test and yield or sleep between tests, so that ranks
 * sharing a core let the one with work run instead of spinning through its time slice. */
void hv_set_wait(hv_ctx *ctx, int wait_us); /* also lowers the timer slack to 1 us when sleeping */
void hv_wait(const hv_ctx *ctx, MPI_Request *req);
void hv_waitall(const hv_ctx *ctx, int n, MPI_Request *reqs);
void hv_barrier(const hv_ctx *ctx);
/* Called by a polling loop that found nothing to do: yields or sleeps by ctx->wait_us. */
void hv_idle(const hv_ctx *ctx);

void hv_ctx_init(hv_ctx *ctx, int *argc, char ***argv, const char *prog, hv_opt *opts, size_t nopts);
/* hv_ctx_init, then every typed option of opts into config (hv_args_config); a missing or bad option stops every
 * rank with "prog: option '--x' ...". */
void hv_ctx_init_config(hv_ctx *ctx, int *argc, char ***argv, const char *prog, hv_opt *opts, size_t nopts,
                        void *config);
/* The measured iterations of a point after its warm-up started at w0: rank 0 fits --iters into the time budget
 * from the warm-up's mean (never fewer than min_iters, never more than iters) and broadcasts the count. */
long hv_iters_for_budget(const hv_ctx *ctx, uint64_t w0, long warmup, double budget_s, long iters, long min_iters);
/* Collective over ctx->comm: every rank passes its rows (nrows may be 0); waits by ctx->wait_us. */
void hv_gather_point(hv_ctx *ctx, const char *desc, const double *rows, size_t nrows);
/* Rank 0 closes the output; MPI_Finalize. */
void hv_ctx_finish(hv_ctx *ctx);
#endif
