/* hv_bsp: a bulk-synchronous workload (fixed CPU work + barrier per phase) to
 * measure how OS jitter slows it (the jitter simulator's workload, docs/jitter-sim.md).
 *
 * Work is a fixed number of iterations of a dependent integer chain, not a
 * wall-clock wait: a detour (interrupt, preemption, an injected burst) that
 * falls inside the work stretches it, as it stretches real computation. (A
 * wait on the clock, such as hv_spin_ns, would absorb the detour and hide it.)
 * Each rank calibrates the chain once before the measured phases: chunks of
 * about 50 us are timed many times and the fastest gives iterations per ns (a
 * chunk hit by a detour is slower, so the minimum is the undisturbed speed);
 * the count for --quantum-ns is then raised until the fastest of several timed
 * runs of the whole quantum is at least --quantum-ns. --work-iters N skips the
 * calibration and uses N iterations (to reuse a noise-free run's calibration).
 *
 * Per repetition (one point each): --warmup unmeasured phases, then --phases
 * measured ones; per phase and rank: read clock, work, read clock, barrier,
 * read clock, store. The barrier is MPI_Barrier (--barrier mpi) or a k-ary
 * tree of zero-byte messages (--barrier tree --arity k) in the simulator's
 * order: children of i are k*i+1..k*i+k; up: receive from every child (in
 * order of arrival), send to the parent; down: receive from the parent, send
 * to the children in index order.
 *
 * Times are ns since rank 0's clock reading after a start barrier (broadcast):
 * ranks of one node share the TSC (invariant) or CLOCK_MONOTONIC_RAW, so all
 * ranks' times are on one clock. When ranks span several hosts the origin is
 * each rank's own reading after the start barrier (point field common_clock=0).
 *   columns: rank, phase, cpu, start_ns, compute_end_ns, end_ns, work_iters, calib_quantum_ns
 *   point:   rep=<r> phases=<n> quantum_ns=<W> barrier=mpi|tree arity=<k> common_clock=0|1
 * --rt-prio P runs the ranks SCHED_FIFO at priority P (set before the calibration). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "hv_mpi.h"

#define NCOLS 8
#define TAG_UP 11
#define TAG_DOWN 12

/* The work: n steps of a 64-bit LCG, each depending on the last (about one
 * multiply + add latency per step); the result is kept alive through an empty
 * asm so that the compiler can neither drop nor shorten the loop. */
static uint64_t hv_work(uint64_t n, uint64_t x) {
    for (uint64_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

static volatile uint64_t g_sink;

/* Fastest of `reps` timed runs of n iterations, in ticks. */
static uint64_t time_work_min(const hv_timer *t, uint64_t n, int reps) {
    uint64_t best = UINT64_MAX, x = 1;
    for (int r = 0; r < reps; r++) {
        uint64_t a = hv_ticks(t);
        x = hv_work(n, x);
        uint64_t d = hv_ticks(t) - a;
        if (d < best) best = d;
    }
    g_sink = x;
    return best;
}

/* Iterations for quantum_ns of undisturbed work on this CPU (see the header). */
static uint64_t calibrate(const hv_timer *t, double quantum_ns) {
    uint64_t chunk = 1000;
    while (chunk < (1ull << 40) && hv_ticks_to_ns(t, time_work_min(t, chunk, 3)) < 50000.0) chunk *= 2;
    double per_ns = (double)chunk / hv_ticks_to_ns(t, time_work_min(t, chunk, 200));
    uint64_t n = (uint64_t)(quantum_ns * per_ns + 0.5);
    if (n < 1) n = 1;
    for (int k = 0; k < 20; k++) {
        double got = hv_ticks_to_ns(t, time_work_min(t, n, 5));
        if (got >= quantum_ns) break;
        n = (uint64_t)((double)n * (quantum_ns / got) * 1.0005) + 1;
    }
    return n;
}

static void tree_barrier(const hv_ctx *ctx, int arity) {
    const int r = ctx->rank, n = ctx->size;
    long first = (long)arity * r + 1;
    int nchild = 0;
    for (long c = first; c < first + arity && c < n; c++) nchild++;
    for (int i = 0; i < nchild; i++) /* in order of arrival */
        HV_MPI_CHECK(MPI_Recv(NULL, 0, MPI_BYTE, MPI_ANY_SOURCE, TAG_UP, ctx->comm, MPI_STATUS_IGNORE));
    if (r > 0) {
        const int parent = (r - 1) / arity;
        HV_MPI_CHECK(MPI_Send(NULL, 0, MPI_BYTE, parent, TAG_UP, ctx->comm));
        HV_MPI_CHECK(MPI_Recv(NULL, 0, MPI_BYTE, parent, TAG_DOWN, ctx->comm, MPI_STATUS_IGNORE));
    }
    for (int i = 0; i < nchild; i++) HV_MPI_CHECK(MPI_Send(NULL, 0, MPI_BYTE, (int)(first + i), TAG_DOWN, ctx->comm));
}

static unsigned long host_hash(void) {
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    unsigned long h = 1469598103934665603ul;
    for (const char *p = host; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ul;
    return h;
}

int main(int argc, char **argv) {
    hv_opt opts[] = {
        HV_COMMON_OPTS,
        {"quantum-ns", NULL, 0, "work quantum per phase (ns of undisturbed CPU work)"},
        {"phases", NULL, 0, "measured phases per repetition"},
        {"warmup", NULL, 0, "unmeasured phases before each repetition"},
        {"reps", NULL, 0, "repetitions (one point each)"},
        {"first-rep", NULL, 0, "number of the first repetition (for resumed runs)"},
        {"barrier", NULL, 0, "mpi|tree"},
        {"arity", NULL, 0, "arity of the tree barrier"},
        {"work-iters", NULL, 0, "iterations per quantum (0: calibrate)"},
        {"pin", NULL, 1, "pin rank r to the (r mod n)-th of the n allowed CPUs"},
        {"rt-prio", NULL, 0, "SCHED_FIFO priority of the ranks (0: normal scheduler)"},
    };
    const size_t nopts = sizeof opts / sizeof opts[0];
    hv_ctx ctx;
    hv_ctx_init(&ctx, &argc, &argv, "hv_bsp", opts, nopts);

    char err[256];
    double quantum_ns;
    long phases, warmup, reps, first_rep, arity, fixed_iters, rt_prio;
    if (hv_args_double(opts, nopts, "quantum-ns", 1.0, 1e12, &quantum_ns, err, sizeof err) ||
        hv_args_long(opts, nopts, "phases", 1, 100000000L, &phases, err, sizeof err) ||
        hv_args_long(opts, nopts, "warmup", 0, 100000000L, &warmup, err, sizeof err) ||
        hv_args_long(opts, nopts, "reps", 1, 1000000L, &reps, err, sizeof err) ||
        hv_args_long(opts, nopts, "first-rep", 0, 1000000000L, &first_rep, err, sizeof err) ||
        hv_args_long(opts, nopts, "arity", 1, 1000000L, &arity, err, sizeof err) ||
        hv_args_long(opts, nopts, "work-iters", 0, 1L << 62, &fixed_iters, err, sizeof err) ||
        hv_args_long(opts, nopts, "rt-prio", 0, 99, &rt_prio, err, sizeof err))
        HV_DIE("hv_bsp: %s", err);
    const char *bname = hv_args_get(opts, nopts, "barrier");
    int tree;
    if (bname && strcmp(bname, "mpi") == 0) tree = 0;
    else if (bname && strcmp(bname, "tree") == 0) tree = 1;
    else HV_DIE("hv_bsp: --barrier must be mpi or tree, got '%s'", bname ? bname : "(none)");
    const char *pinv = hv_args_get(opts, nopts, "pin");
    if (pinv && strcmp(pinv, "0") != 0 && hv_pin_rank(ctx.rank) < 0 && ctx.rank == 0)
        fprintf(stderr, "hv_bsp: warning: rank 0 could not be pinned\n");

    /* --rt-prio: other user processes can no longer preempt the ranks; only the kernel, higher
     * real-time threads (the noise injector) and RT throttling (sched_rt_runtime_us) interrupt them */
    int rt_ok = 1;
    if (rt_prio > 0) {
        struct sched_param sp = {.sched_priority = (int)rt_prio};
        if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0) rt_ok = 0;
    }
    int rt_all = 0;
    HV_MPI_CHECK(MPI_Allreduce(&rt_ok, &rt_all, 1, MPI_INT, MPI_MIN, ctx.comm));
    if (!rt_all)
        HV_DIE("hv_bsp: --rt-prio %ld: sched_setscheduler(SCHED_FIFO) failed on some rank (needs root or "
               "CAP_SYS_NICE); leave --rt-prio out",
               rt_prio);

    /* one clock for all ranks when they share a host */
    unsigned long h = host_hash(), hmin = 0, hmax = 0;
    HV_MPI_CHECK(MPI_Allreduce(&h, &hmin, 1, MPI_UNSIGNED_LONG, MPI_MIN, ctx.comm));
    HV_MPI_CHECK(MPI_Allreduce(&h, &hmax, 1, MPI_UNSIGNED_LONG, MPI_MAX, ctx.comm));
    const int common_clock = hmin == hmax;

    const uint64_t iters = fixed_iters > 0 ? (uint64_t)fixed_iters : calibrate(&ctx.timer, quantum_ns);
    const double calib_ns = hv_ticks_to_ns(&ctx.timer, time_work_min(&ctx.timer, iters, 5));

    const size_t n = (size_t)phases;
    uint64_t *ts = hv_malloc_touched(n * sizeof *ts), *tc = hv_malloc_touched(n * sizeof *tc);
    uint64_t *te = hv_malloc_touched(n * sizeof *te);
    int *cpu = hv_malloc_touched(n * sizeof *cpu);
    double *rows = hv_malloc_touched(n * NCOLS * sizeof *rows);
    const char *cols[NCOLS] = {"rank",           "phase",  "cpu",        "start_ns",
                               "compute_end_ns", "end_ns", "work_iters", "calib_quantum_ns"};
    if (ctx.rank == 0) hv_out_columns(&ctx.out, NCOLS, cols);

    uint64_t x = (uint64_t)ctx.rank + 1;
    for (long rep = 0; rep < reps; rep++) {
        for (long i = 0; i < warmup; i++) {
            x = hv_work(iters, x);
            if (tree) tree_barrier(&ctx, (int)arity);
            else HV_MPI_CHECK(MPI_Barrier(ctx.comm));
        }
        HV_MPI_CHECK(MPI_Barrier(ctx.comm));
        uint64_t origin = hv_ticks(&ctx.timer);
        if (common_clock) HV_MPI_CHECK(MPI_Bcast(&origin, 1, MPI_UINT64_T, 0, ctx.comm));
        /* the timed loop: clock, work, clock, barrier, clock, store */
        uint64_t now = hv_ticks(&ctx.timer);
        for (size_t i = 0; i < n; i++) {
            ts[i] = now;
            x = hv_work(iters, x);
            tc[i] = hv_ticks(&ctx.timer);
            if (tree) tree_barrier(&ctx, (int)arity);
            else HV_MPI_CHECK(MPI_Barrier(ctx.comm));
            now = hv_ticks(&ctx.timer);
            te[i] = now;
            cpu[i] = sched_getcpu();
        }
        for (size_t i = 0; i < n; i++) {
            double *row = rows + i * NCOLS;
            row[0] = ctx.rank;
            row[1] = (double)i;
            row[2] = cpu[i];
            /* signed: a rank's first start may precede rank 0's origin */
            row[3] = hv_ticks_to_ns(&ctx.timer, ts[i] - origin);
            if (ts[i] < origin) row[3] = -hv_ticks_to_ns(&ctx.timer, origin - ts[i]);
            row[4] = hv_ticks_to_ns(&ctx.timer, tc[i] - origin);
            row[5] = hv_ticks_to_ns(&ctx.timer, te[i] - origin);
            row[6] = (double)iters;
            row[7] = calib_ns;
        }
        char desc[200];
        snprintf(desc, sizeof desc, "rep=%ld phases=%ld quantum_ns=%.0f barrier=%s arity=%ld common_clock=%d",
                 first_rep + rep, phases, quantum_ns, tree ? "tree" : "mpi", tree ? arity : 0, common_clock);
        hv_gather_point(&ctx, desc, rows, n);
    }
    g_sink = x;
    free(ts);
    free(tc);
    free(te);
    free(cpu);
    free(rows);
    hv_ctx_finish(&ctx);
    return 0;
}
