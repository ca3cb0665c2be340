/* hv_bsp: a bulk-synchronous workload (fixed CPU work + barrier per phase) to
 * measure how OS jitter slows it (the jitter simulator's workload, docs/jitter-sim.md).
 *
 * Work is a fixed number of iterations of a dependent integer chain, not a
 * wall-clock wait: a detour (interrupt, preemption, an injected burst) that
 * falls inside the work stretches it, as it stretches real computation. (A
 * wait on the clock, such as hv_spin_ns, would absorb the detour and hide it.)
 * Each rank calibrates the chain once before the measured phases: chunks of
 * about CALIB_CHUNK_NS are timed many times and the fastest gives iterations
 * per ns (a chunk hit by a detour is slower, so the minimum is the undisturbed
 * speed, provided some chunks fall between detours: a VM measured 21,000
 * hypervisor exits/s of 1-3 us, one every 48 us on average, which few 50 us
 * chunks escape; a speed measured low makes every later phase short);
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
 * to the children in index order. Waits go through hv_wait / hv_barrier
 * (--wait-us: MPI's spin, or test and yield / sleep, for ranks that share
 * cores: a spinning rank would take the CPU its neighbour computes on).
 *
 * Times are ns since rank 0's clock reading after a start barrier (broadcast):
 * ranks of one node share the TSC (invariant) or CLOCK_MONOTONIC_RAW, so all
 * ranks' times are on one clock. When ranks span several hosts the origin is
 * each rank's own reading after the start barrier (point field common_clock=0).
 *   columns: rank, phase, cpu, start_ns, compute_end_ns, end_ns, work_iters, calib_quantum_ns
 *   point:   rep=<r> phases=<n> quantum_ns=<W> barrier=mpi|tree arity=<k> common_clock=0|1
 * --rt-prio P runs the ranks SCHED_FIFO at priority P (set before the calibration).
 *
 * Code: main reads the options into a bsp_config, sets the ranks' scheduling
 * (set_scheduling), calibrates, allocates once, then per repetition calls
 * run_rep: the warm-up phases, the timed phases (timed_phases) and the rows.
 * What a helper needs travels in a bsp_run; the work's result goes to its sink
 * (the compiler cannot drop the work). */
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

typedef struct { /* the validated options */
    double quantum_ns;
    long phases, warmup, reps, first_rep, arity, fixed_iters, rt_prio, wait_us;
    const char *barrier;
    int pin;
} bsp_config;

typedef struct { /* one rank's measurement: its settings and buffers, allocated once */
    hv_ctx *ctx;
    const bsp_config *cfg;
    int tree, common_clock;
    uint64_t iters;
    double calib_ns;
    uint64_t *ts, *tc, *te;
    int *cpu;
    double *rows;
    uint64_t x;             /* the work's running value, from phase to phase */
    volatile uint64_t sink; /* where calibration runs leave their results */
} bsp_run;

/* Fastest of `reps` timed runs of n iterations, in ticks. */
static uint64_t time_work_min(const hv_timer *t, uint64_t n, int reps, volatile uint64_t *sink) {
    uint64_t best = UINT64_MAX, x = 1;
    for (int r = 0; r < reps; r++) {
        uint64_t a = hv_ticks(t);
        x = hv_work(n, x);
        uint64_t d = hv_ticks(t) - a;
        if (d < best) best = d;
    }
    *sink = x;
    return best;
}

/* Short enough to fall between a VM's exits (88 % of 10 us windows were free of detours at 11,000 exits/s, 55 %
 * of 50 us ones); long enough that the two clock reads around it (tens of ns) cost well under 1 %. */
#define CALIB_CHUNK_NS 10000.0

/* Iterations for quantum_ns of undisturbed work on this CPU (see the header). */
static uint64_t calibrate(const hv_timer *t, double quantum_ns, volatile uint64_t *sink) {
    uint64_t chunk = 1000;
    while (chunk < (1ull << 40) && hv_ticks_to_ns(t, time_work_min(t, chunk, 3, sink)) < CALIB_CHUNK_NS) chunk *= 2;
    double per_ns = (double)chunk / hv_ticks_to_ns(t, time_work_min(t, chunk, 1000, sink));
    uint64_t n = (uint64_t)(quantum_ns * per_ns + 0.5);
    if (n < 1) n = 1;
    for (int k = 0; k < 20; k++) {
        double got = hv_ticks_to_ns(t, time_work_min(t, n, 5, sink));
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
    MPI_Request q;
    /* each message is a nonblocking call and hv_wait: MPI_Wait, or test and yield / sleep (--wait-us) */
    for (int i = 0; i < nchild; i++) { /* in order of arrival */
        HV_MPI_CHECK(MPI_Irecv(NULL, 0, MPI_BYTE, MPI_ANY_SOURCE, TAG_UP, ctx->comm, &q));
        hv_wait(ctx, &q);
    }
    if (r > 0) {
        const int parent = (r - 1) / arity;
        HV_MPI_CHECK(MPI_Isend(NULL, 0, MPI_BYTE, parent, TAG_UP, ctx->comm, &q));
        hv_wait(ctx, &q);
        HV_MPI_CHECK(MPI_Irecv(NULL, 0, MPI_BYTE, parent, TAG_DOWN, ctx->comm, &q));
        hv_wait(ctx, &q);
    }
    for (int i = 0; i < nchild; i++) {
        HV_MPI_CHECK(MPI_Isend(NULL, 0, MPI_BYTE, (int)(first + i), TAG_DOWN, ctx->comm, &q));
        hv_wait(ctx, &q);
    }
}

static unsigned long host_hash(void) {
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    unsigned long h = 1469598103934665603ul;
    for (const char *p = host; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ul;
    return h;
}

static int tree_barrier_asked(const bsp_config *c) {
    const char *bname = c->barrier;
    if (bname && strcmp(bname, "mpi") == 0) return 0;
    if (bname && strcmp(bname, "tree") == 0) return 1;
    HV_DIE("hv_bsp: --barrier must be mpi or tree, got '%s'", bname ? bname : "(none)");
}

/* --pin, and --rt-prio: other user processes can no longer preempt the ranks; only the kernel, higher
 * real-time threads (the noise injector) and RT throttling (sched_rt_runtime_us) interrupt them */
static void set_scheduling(const hv_ctx *ctx, const bsp_config *c) {
    if (c->pin && hv_pin_rank(ctx->rank) < 0 && ctx->rank == 0)
        fprintf(stderr, "hv_bsp: warning: rank 0 could not be pinned\n");
    int rt_ok = 1;
    if (c->rt_prio > 0) {
        struct sched_param sp = {.sched_priority = (int)c->rt_prio};
        if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0) rt_ok = 0;
    }
    int rt_all = 0;
    HV_MPI_CHECK(MPI_Allreduce(&rt_ok, &rt_all, 1, MPI_INT, MPI_MIN, ctx->comm));
    if (!rt_all)
        HV_DIE("hv_bsp: --rt-prio %ld: sched_setscheduler(SCHED_FIFO) failed on some rank (needs root or "
               "CAP_SYS_NICE); leave --rt-prio out",
               c->rt_prio);
}

/* One clock for all ranks when they share a host. */
static int on_one_host(const hv_ctx *ctx) {
    unsigned long h = host_hash(), hmin = 0, hmax = 0;
    HV_MPI_CHECK(MPI_Allreduce(&h, &hmin, 1, MPI_UNSIGNED_LONG, MPI_MIN, ctx->comm));
    HV_MPI_CHECK(MPI_Allreduce(&h, &hmax, 1, MPI_UNSIGNED_LONG, MPI_MAX, ctx->comm));
    return hmin == hmax;
}

static void bsp_alloc(bsp_run *r) {
    const size_t n = (size_t)r->cfg->phases;
    r->ts = hv_malloc_touched(n * sizeof *r->ts);
    r->tc = hv_malloc_touched(n * sizeof *r->tc);
    r->te = hv_malloc_touched(n * sizeof *r->te);
    r->cpu = hv_malloc_touched(n * sizeof *r->cpu);
    r->rows = hv_malloc_touched(n * NCOLS * sizeof *r->rows);
}

static void bsp_free(bsp_run *r) {
    free(r->ts);
    free(r->tc);
    free(r->te);
    free(r->cpu);
    free(r->rows);
}

/* The phases of one repetition; returns the origin of its times. */
static uint64_t timed_phases(bsp_run *r) {
    hv_ctx *ctx = r->ctx;
    const size_t n = (size_t)r->cfg->phases;
    const int tree = r->tree;
    const long arity = r->cfg->arity;
    const uint64_t iters = r->iters;
    uint64_t *ts = r->ts, *tc = r->tc, *te = r->te, x = r->x;
    int *cpu = r->cpu;
    for (long i = 0; i < r->cfg->warmup; i++) {
        x = hv_work(iters, x);
        if (tree) tree_barrier(ctx, (int)arity);
        else hv_barrier(ctx);
    }
    hv_barrier(ctx);
    uint64_t origin = hv_ticks(&ctx->timer);
    if (r->common_clock) HV_MPI_CHECK(MPI_Bcast(&origin, 1, MPI_UINT64_T, 0, ctx->comm));
    /* the timed loop: clock, work, clock, barrier, clock, store */
    uint64_t now = hv_ticks(&ctx->timer);
    for (size_t i = 0; i < n; i++) {
        ts[i] = now;
        x = hv_work(iters, x);
        tc[i] = hv_ticks(&ctx->timer);
        if (tree) tree_barrier(ctx, (int)arity);
        else hv_barrier(ctx);
        now = hv_ticks(&ctx->timer);
        te[i] = now;
        cpu[i] = sched_getcpu();
    }
    r->x = x;
    return origin;
}

/* A repetition: its phases, then its rows as one point. */
static void run_rep(bsp_run *r, long rep) {
    hv_ctx *ctx = r->ctx;
    const bsp_config *c = r->cfg;
    const size_t n = (size_t)c->phases;
    const uint64_t origin = timed_phases(r);
    for (size_t i = 0; i < n; i++) {
        double *row = r->rows + i * NCOLS;
        row[0] = ctx->rank;
        row[1] = (double)i;
        row[2] = r->cpu[i];
        /* signed: a rank's first start may precede rank 0's origin */
        row[3] = hv_ticks_to_ns(&ctx->timer, r->ts[i] - origin);
        if (r->ts[i] < origin) row[3] = -hv_ticks_to_ns(&ctx->timer, origin - r->ts[i]);
        row[4] = hv_ticks_to_ns(&ctx->timer, r->tc[i] - origin);
        row[5] = hv_ticks_to_ns(&ctx->timer, r->te[i] - origin);
        row[6] = (double)r->iters;
        row[7] = r->calib_ns;
    }
    char desc[200];
    snprintf(desc, sizeof desc, "rep=%ld phases=%ld quantum_ns=%.0f barrier=%s arity=%ld common_clock=%d",
             c->first_rep + rep, c->phases, c->quantum_ns, r->tree ? "tree" : "mpi", r->tree ? c->arity : 0,
             r->common_clock);
    hv_gather_point(ctx, desc, r->rows, n);
}

int main(int argc, char **argv) {
    hv_opt opts[] = {
        HV_COMMON_OPTS,
        HV_OPT_DOUBLE(bsp_config, quantum_ns, "quantum-ns", 1.0, 1e12,
                      "work quantum per phase (ns of undisturbed CPU work)"),
        HV_OPT_LONG(bsp_config, phases, "phases", 1, 100000000L, "measured phases per repetition"),
        HV_OPT_LONG(bsp_config, warmup, "warmup", 0, 100000000L, "unmeasured phases before each repetition"),
        HV_OPT_LONG(bsp_config, reps, "reps", 1, 1000000L, "repetitions (one point each)"),
        HV_OPT_LONG(bsp_config, first_rep, "first-rep", 0, 1000000000L,
                    "number of the first repetition (for resumed runs)"),
        HV_OPT_STRING_OR(bsp_config, barrier, "barrier", "mpi|tree"),
        HV_OPT_LONG(bsp_config, arity, "arity", 1, 1000000L, "arity of the tree barrier"),
        HV_OPT_LONG(bsp_config, fixed_iters, "work-iters", 0, 1L << 62, "iterations per quantum (0: calibrate)"),
        HV_OPT_FLAG(bsp_config, pin, "pin", "pin rank r to the (r mod n)-th of the n allowed CPUs"),
        HV_OPT_LONG(bsp_config, rt_prio, "rt-prio", 0, 99, "SCHED_FIFO priority of the ranks (0: normal scheduler)"),
        HV_OPT_LONG(bsp_config, wait_us, "wait-us", -1, 1000000L,
                    "how a barrier waits: 0 MPI's spin, -1 test and yield, N test and sleep N us"),
    };
    hv_ctx ctx;
    bsp_config cfg = {0};
    hv_ctx_init_config(&ctx, &argc, &argv, "hv_bsp", opts, sizeof opts / sizeof opts[0], &cfg);
    bsp_run r = {.ctx = &ctx, .cfg = &cfg, .tree = tree_barrier_asked(&cfg), .x = (uint64_t)ctx.rank + 1};
    set_scheduling(&ctx, &cfg);
    hv_set_wait(&ctx, (int)cfg.wait_us);
    r.common_clock = on_one_host(&ctx);
    r.iters = cfg.fixed_iters > 0 ? (uint64_t)cfg.fixed_iters : calibrate(&ctx.timer, cfg.quantum_ns, &r.sink);
    r.calib_ns = hv_ticks_to_ns(&ctx.timer, time_work_min(&ctx.timer, r.iters, 5, &r.sink));
    bsp_alloc(&r);
    const char *cols[NCOLS] = {"rank",           "phase",  "cpu",        "start_ns",
                               "compute_end_ns", "end_ns", "work_iters", "calib_quantum_ns"};
    if (ctx.rank == 0) hv_out_columns(&ctx.out, NCOLS, cols);

    for (long rep = 0; rep < cfg.reps; rep++) run_rep(&r, rep);
    r.sink = r.x;
    bsp_free(&r);
    hv_ctx_finish(&ctx);
    return 0;
}
