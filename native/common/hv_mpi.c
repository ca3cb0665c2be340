#include "hv_mpi.h"
#include "hv_watch.h"
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static int world_rank(void) {
    int inited = 0, r = -1;
    MPI_Initialized(&inited);
    if (inited) MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

void hv_mpi_fail(const char *call, int rc, const char *file, int line) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    fprintf(stderr, "hpcvar[rank %d]: %s failed: %s (%s:%d)\n", world_rank(), call, msg, file, line);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort();
}

void hv_die(const char *file, int line, const char *fmt, ...) {
    /* one write, so that the lines of ranks dying together do not interleave */
    char msg[2048];
    int n = snprintf(msg, sizeof msg, "hpcvar[rank %d]: ", world_rank());
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < sizeof msg) n += vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof msg) snprintf(msg + n, sizeof msg - (size_t)n, " (%s:%d)\n", file, line);
    fputs(msg, stderr);
    fflush(stderr);
    int inited = 0;
    MPI_Initialized(&inited);
    if (inited) MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

void *hv_malloc_touched(size_t bytes) {
    long page = sysconf(_SC_PAGESIZE);
    void *p = NULL;
    if (posix_memalign(&p, (size_t)page, bytes ? bytes : 1) != 0) HV_DIE("out of memory allocating %zu bytes", bytes);
    memset(p, 0x5a, bytes);
    return p;
}

int hv_pin_rank(int rank) {
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return -1;
    int n = CPU_COUNT(&allowed);
    if (n <= 0) return -1;
    int want = rank % n, k = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed)) continue;
        if (k++ == want) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            return sched_setaffinity(0, sizeof one, &one) == 0 ? cpu : -1;
        }
    }
    return -1;
}

static double wtime(void) { return MPI_Wtime(); }

void hv_set_wait(hv_ctx *ctx, int wait_us) {
    ctx->wait_us = wait_us;
    /* the default 50 us timer slack would double a 50 us sleep */
    if (wait_us > 0) prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
}

void hv_idle(const hv_ctx *ctx) {
    if (ctx->wait_us < 0) {
        sched_yield();
    } else if (ctx->wait_us > 0) {
        struct timespec ts = {ctx->wait_us / 1000000, (long)(ctx->wait_us % 1000000) * 1000L};
        nanosleep(&ts, NULL);
    }
}

void hv_waitall(const hv_ctx *ctx, int n, MPI_Request *reqs) {
    if (ctx->wait_us == 0) {
        HV_MPI_CHECK(MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE));
        return;
    }
    for (;;) {
        int done = 0;
        HV_MPI_CHECK(MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE));
        if (done) return;
        hv_idle(ctx);
    }
}

void hv_wait(const hv_ctx *ctx, MPI_Request *req) { hv_waitall(ctx, 1, req); }

void hv_barrier(const hv_ctx *ctx) {
    if (ctx->wait_us == 0) {
        HV_MPI_CHECK(MPI_Barrier(ctx->comm));
        return;
    }
    MPI_Request r;
    HV_MPI_CHECK(MPI_Ibarrier(ctx->comm, &r));
    hv_wait(ctx, &r);
}

static size_t hv_sort_hostlen;
static int hv_cmp_host(const void *a, const void *b) { return strncmp(a, b, hv_sort_hostlen); }

/* The world the launcher was asked for (--expect-np, --expect-rpn) against the one MPI_Init gave us.
 * Every rank learns the size; rank 0 (which holds every host name) checks the placement and tells the
 * others, so that all stop together with one message. */
static void hv_check_world(hv_ctx *ctx, hv_opt *opts, size_t nopts, const char *hosts, size_t hostlen) {
    char err[256];
    long want_np = 0, want_rpn = 0;
    if (hv_args_get(opts, nopts, "expect-np") &&
        hv_args_long(opts, nopts, "expect-np", 1, 1L << 30, &want_np, err, sizeof err) != 0)
        HV_DIE("%s: %s", ctx->prog, err);
    if (hv_args_get(opts, nopts, "expect-rpn") &&
        hv_args_long(opts, nopts, "expect-rpn", 1, 1L << 30, &want_rpn, err, sizeof err) != 0)
        HV_DIE("%s: %s", ctx->prog, err);
    if (want_np && want_np != ctx->size)
        HV_DIE("world mismatch: MPI_Init gave a world of %d rank(s) but %ld were launched: the ranks did not "
               "join one MPI job (under srun: an --mpi plugin that this MPI library does not speak)",
               ctx->size, want_np);
    int bad = 0, nhosts = 0, most = 0;
    if (ctx->rank == 0 && want_rpn) {
        /* distinct hosts and the most ranks on one host: sort a copy of the names, count the runs */
        char *sorted = malloc((size_t)ctx->size * hostlen);
        HV_ALLOC_CHECK(sorted);
        memcpy(sorted, hosts, (size_t)ctx->size * hostlen);
        hv_sort_hostlen = hostlen;
        qsort(sorted, (size_t)ctx->size, hostlen, hv_cmp_host);
        for (int r = 0, run = 0; r < ctx->size; r++) {
            int same = r > 0 && hv_cmp_host(sorted + (size_t)r * hostlen, sorted + (size_t)(r - 1) * hostlen) == 0;
            run = same ? run + 1 : 1;
            if (!same) nhosts++;
            if (run > most) most = run;
        }
        free(sorted);
        long want_hosts = (ctx->size + want_rpn - 1) / want_rpn;
        bad = nhosts != want_hosts || most > want_rpn;
    }
    int msg[3] = {bad, nhosts, most};
    HV_MPI_CHECK(MPI_Bcast(msg, 3, MPI_INT, 0, ctx->comm));
    if (msg[0] && ctx->rank != 0) MPI_Abort(MPI_COMM_WORLD, 1); /* rank 0 says why, once */
    if (msg[0])
        HV_DIE("world mismatch: %d rank(s) sit on %d host(s), up to %d on one, but %ld per node were asked for "
               "(%ld host(s)): the allocation or the launcher placed them otherwise",
               ctx->size, msg[1], msg[2], want_rpn, (ctx->size + want_rpn - 1) / want_rpn);
}

/* The timer of the timed loops, calibrated (MPI_Wtime's resolution and cost measured on itself). */
static hv_timer init_timer(hv_timer_kind kind, const char *prog) {
    char err[512];
    hv_timer t;
    if (kind == HV_TIMER_WTIME) {
        /* initialise as MONO then switch the read function: resolution
         * and cost are then measured on MPI_Wtime itself */
        if (hv_timer_init(&t, HV_TIMER_MONO, err, sizeof err) != 0) HV_DIE("%s: %s", prog, err);
        t.kind = HV_TIMER_WTIME;
        t.wtime = wtime;
        t.ticks_per_ns = 1.0;
        uint64_t prev = hv_ticks(&t), start = prev, minstep = UINT64_MAX;
        for (int i = 0; i < 20000; i++) {
            uint64_t now = hv_ticks(&t);
            if (now > prev && now - prev < minstep) minstep = now - prev;
            prev = now;
        }
        t.cost_ns = (double)(prev - start) / 20000.0;
        t.resolution_ns = minstep == UINT64_MAX ? 0.0 : (double)minstep;
    } else if (hv_timer_init(&t, kind, err, sizeof err) != 0) {
        HV_DIE("%s: %s", prog, err);
    }
    return t;
}

/* Ranks of one node read one TSC: they convert its ticks at one rate (the node's first rank's calibration), so
   that their times compare across ranks. Each rank's own estimate is off by its calibration error (a few ppm: 0.3
   us after 94 ms put a rank's exit from a barrier before another rank's end of work in bench bsp's tables). */
static void share_node_rate(hv_ctx *ctx) {
    if (ctx->timer.kind != HV_TIMER_TSC) return;
    MPI_Comm node;
    HV_MPI_CHECK(MPI_Comm_split_type(ctx->comm, MPI_COMM_TYPE_SHARED, ctx->rank, MPI_INFO_NULL, &node));
    double rate[2] = {ctx->timer.ticks_per_ns, ctx->timer.tsc_hz};
    HV_MPI_CHECK(MPI_Bcast(rate, 2, MPI_DOUBLE, 0, node));
    ctx->timer.ticks_per_ns = rate[0];
    ctx->timer.tsc_hz = rate[1];
    HV_MPI_CHECK(MPI_Comm_free(&node));
}

void hv_ctx_init(hv_ctx *ctx, int *argc, char ***argv, const char *prog, hv_opt *opts, size_t nopts) {
    memset(ctx, 0, sizeof *ctx);
    ctx->prog = prog;
    /* a rank is a child of mpiexec's proxy, not of hpcvar: it watches hpcvar itself (hv_watch.h) */
    hv_watch_start(prog);
    if (MPI_Init(argc, argv) != MPI_SUCCESS) {
        fprintf(stderr, "hpcvar[rank -1]: MPI_Init failed (%s)\n", prog);
        exit(1);
    }
    ctx->comm = MPI_COMM_WORLD;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    HV_MPI_CHECK(MPI_Comm_rank(ctx->comm, &ctx->rank));
    HV_MPI_CHECK(MPI_Comm_size(ctx->comm, &ctx->size));

    char err[512];
    if (hv_args_parse(*argc, *argv, opts, nopts, err, sizeof err) != 0) HV_DIE("%s: %s", prog, err);
    const char *tname = hv_args_get(opts, nopts, "timer");
    hv_timer_kind kind = hv_cpu_has_invariant_tsc() == 1 ? HV_TIMER_TSC : HV_TIMER_MONO;
    if (tname && hv_timer_parse(tname, &kind) != 0)
        HV_DIE("%s: unknown --timer '%s' (tsc, mono or wtime)", prog, tname);
    ctx->timer = init_timer(kind, prog);
    share_node_rate(ctx);

    /* host of every rank, for the metadata (ranks per node, placement) */
    char host[64] = {0};
    gethostname(host, sizeof host - 1);
    char *hosts = ctx->rank == 0 ? malloc((size_t)ctx->size * sizeof host) : NULL;
    if (ctx->rank == 0) HV_ALLOC_CHECK(hosts);
    HV_MPI_CHECK(MPI_Gather(host, sizeof host, MPI_CHAR, hosts, sizeof host, MPI_CHAR, 0, ctx->comm));
    double res_max = ctx->timer.resolution_ns, cost_max = ctx->timer.cost_ns;
    HV_MPI_CHECK(MPI_Reduce(&ctx->timer.resolution_ns, &res_max, 1, MPI_DOUBLE, MPI_MAX, 0, ctx->comm));
    HV_MPI_CHECK(MPI_Reduce(&ctx->timer.cost_ns, &cost_max, 1, MPI_DOUBLE, MPI_MAX, 0, ctx->comm));

    hv_check_world(ctx, opts, nopts, hosts, sizeof host);

    if (ctx->rank == 0) {
        const char *path = hv_args_get(opts, nopts, "out");
        const char *bin = hv_args_get(opts, nopts, "binary");
        if (hv_out_open(&ctx->out, path ? path : "-", bin && strcmp(bin, "0") != 0) != 0)
            HV_DIE("%s: cannot open --out '%s' for writing", prog, path ? path : "-");
        char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
        int len = 0;
        MPI_Get_library_version(lib, &len);
        for (char *p = lib; *p; p++)
            if (*p == '\n' || *p == '\r') *p = ' ';
        int vmaj = 0, vmin = 0;
        MPI_Get_version(&vmaj, &vmin);
        hv_out_meta(&ctx->out, "program", "%s", prog);
        hv_out_meta(&ctx->out, "mpi_library", "%s", lib);
        hv_out_meta(&ctx->out, "mpi_standard", "%d.%d", vmaj, vmin);
        hv_out_meta(&ctx->out, "nranks", "%d", ctx->size);
        hv_out_meta(&ctx->out, "timer", "%s", hv_timer_name(ctx->timer.kind));
        hv_out_meta(&ctx->out, "timer_tsc_hz", "%.1f", ctx->timer.tsc_hz);
        hv_out_meta(&ctx->out, "timer_calib_spread_ppm", "%.3f", ctx->timer.calib_spread_ppm);
        hv_out_meta(&ctx->out, "timer_invariant_tsc", "%d", ctx->timer.invariant_tsc);
        hv_out_meta(&ctx->out, "timer_resolution_ns", "%.3f", ctx->timer.resolution_ns);
        hv_out_meta(&ctx->out, "timer_cost_ns", "%.3f", ctx->timer.cost_ns);
        hv_out_meta(&ctx->out, "timer_resolution_ns_max_rank", "%.3f", res_max);
        hv_out_meta(&ctx->out, "timer_cost_ns_max_rank", "%.3f", cost_max);
        fputs("#@hosts=", ctx->out.f);
        for (int r = 0; r < ctx->size; r++) fprintf(ctx->out.f, "%s%s", r ? "," : "", hosts + (size_t)r * sizeof host);
        fputc('\n', ctx->out.f);
        for (size_t i = 0; i < nopts; i++)
            if (opts[i].value && strcmp(opts[i].name, "out") != 0)
                fprintf(ctx->out.f, "#@arg.%s=%s\n", opts[i].name, opts[i].value);
        /* the header reaches the file before any measuring: a launch killed or timed out before its first point
         * leaves a readable file with no point, never an empty one (issue #32) */
        if (fflush(ctx->out.f) != 0) HV_DIE("%s: cannot write --out '%s'", prog, path ? path : "-");
        free(hosts);
    }
}

void hv_ctx_init_config(hv_ctx *ctx, int *argc, char ***argv, const char *prog, hv_opt *opts, size_t nopts,
                        void *config) {
    hv_ctx_init(ctx, argc, argv, prog, opts, nopts);
    char err[256];
    if (hv_args_config(opts, nopts, config, err, sizeof err) != 0) HV_DIE("%s: %s", prog, err);
}

long hv_iters_for_budget(const hv_ctx *ctx, uint64_t w0, long warmup, double budget_s, long iters, long min_iters) {
    long count = iters;
    if (ctx->rank == 0 && warmup > 0 && budget_s > 0) {
        double per = hv_ticks_to_ns(&ctx->timer, hv_ticks(&ctx->timer) - w0) / (double)warmup;
        double fit = per > 0 ? budget_s * 1e9 / per : (double)iters;
        if (fit < (double)count) count = (long)fit;
        if (count < min_iters) count = min_iters;
        if (count > iters) count = iters;
    }
    HV_MPI_CHECK(MPI_Bcast(&count, 1, MPI_LONG, 0, ctx->comm));
    return count;
}

void hv_gather_point(hv_ctx *ctx, const char *desc, const double *rows, size_t nrows) {
    int ncols = ctx->rank == 0 ? ctx->out.ncols : 0;
    MPI_Request r;
    HV_MPI_CHECK(MPI_Ibcast(&ncols, 1, MPI_INT, 0, ctx->comm, &r));
    hv_wait(ctx, &r);
    long long mine = (long long)nrows * ncols;
    if (mine > 0x7fffffffLL) HV_DIE("point '%s' too large to gather (%lld values)", desc, mine);
    int count = (int)mine;
    int *counts = NULL, *displs = NULL;
    double *all = NULL;
    long long total = 0;
    if (ctx->rank == 0) {
        counts = malloc((size_t)ctx->size * sizeof *counts);
        displs = malloc((size_t)ctx->size * sizeof *displs);
        HV_ALLOC_CHECK(counts);
        HV_ALLOC_CHECK(displs);
    }
    HV_MPI_CHECK(MPI_Igather(&count, 1, MPI_INT, counts, 1, MPI_INT, 0, ctx->comm, &r));
    hv_wait(ctx, &r);
    if (ctx->rank == 0) {
        for (int r = 0; r < ctx->size; r++) {
            displs[r] = (int)total;
            total += counts[r];
        }
        if (total > 0x7fffffffLL) HV_DIE("point '%s' too large to gather (%lld values)", desc, total);
        all = malloc((size_t)(total ? total : 1) * sizeof *all);
        HV_ALLOC_CHECK(all);
    }
    HV_MPI_CHECK(MPI_Igatherv(rows, count, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, 0, ctx->comm, &r));
    hv_wait(ctx, &r);
    if (ctx->rank == 0) {
        if (hv_out_point(&ctx->out, desc, all, ncols ? (size_t)(total / ncols) : 0) != 0)
            HV_DIE("%s: writing the raw output failed", ctx->prog);
        free(all);
        free(counts);
        free(displs);
    }
}

void hv_ctx_finish(hv_ctx *ctx) {
    if (ctx->rank == 0 && hv_out_close(&ctx->out) != 0) HV_DIE("%s: closing the raw output failed", ctx->prog);
    MPI_Finalize();
}
