/* hv_screen: screen an allocation node by node and link by link (hpcvar screen; docs/screen.md).
 *
 * One or two ranks per node (the launcher places them; --expect-rpn checks it). The ranks find their nodes by
 * host name, in rank order: node i's leader is its first rank, its partner the second (if any). Every rank also
 * tells its boot id and the CPUs it may use: two nodes with one boot id whose CPU sets overlap share CPUs (the
 * testbed's namespaces share this machine's), so they must not be measured at the same time, or each would
 * measure the other as noise. Nodes are coloured greedily into turns of nodes that share no CPU: on a cluster
 * every node is in turn 0 (all at once), on the testbed every node has its own turn.
 *
 * Phases, every rank walking the same schedule (ranks with nothing to do wait asleep: hv_wait with --wait-us):
 *   1. load check (--check-s > 0): every rank sleeps --check-s; leaders read /proc/stat before and after. What
 *      the node's CPUs did meanwhile is other processes' load. One point per node: item=check.
 *   2. node items (--todo-nodes/--todo-rounds), round by round, turn by turn within a round, so that rounds
 *      interleave the nodes in time. In its item a leader: runs hv_noise_collect (next to this program) on all
 *      its CPUs for --noise-s (trace <--noise-dir>/<host>-r<round>.jtr); runs the compute kernel on every CPU
 *      at once for --kernel-s (one pinned thread per CPU; a dependent chain of 64-bit multiply-adds whose length
 *      rank 0 calibrated to --quantum-ns, the same work on every node); reads the clock --timer-samples times
 *      --timer-reads times back to back; then ping-pongs 8 bytes --shm-iters times with its partner (shared
 *      memory inside the node). Leader and partner read /proc/stat and their own CPU time (getrusage, children
 *      included) around it. One point per (node, round): item=node.
 *   3. pair items (--pair-a/--pair-b/--pair-round): the pairs of one round share no node (mpiGraph's schedule,
 *      made by Python); a round is split here into sub-rounds whose pairs share no CPU either. In its pair,
 *      leader a ping-pongs 8 bytes with b (--lat-iters), then a sends --bw-size bytes to b and b answers 8 bytes
 *      (--bw-iters timed, after --bw-warmup), then the other way, then ping-pongs again (the other half of
 *      --lat-iters). One point per pair: item=pair.
 *   4. recheck (--lat-recheck > 0): the pairs' schedule once more, a ping-pongs --lat-recheck times with b, seconds
 *      after its first measurement. One point per pair: item=recheck.
 * The two ends of every ping-pong (leader and partner inside a node, a and b of a pair) are pinned to the
 * first and the second CPU they may use while it lasts (pin_to).
 * Timed loops are minimal: read clock, MPI call(s) or kernel, read clock, store in a preallocated array.
 *
 * Raw rows (columns kind,node,idx,v0,v1,v2,v3):
 *   kind 1 load    node, idx=local rank   v0=ns the node's CPUs ran processes (/proc/stat: user, nice, system;
 *                                          interrupts are left out: they are noise, which the collector sees,
 *                                          and on the testbed they carry the screen's own traffic)
 *                                          v1=capacity ns (wall x CPUs) v2=steal ns v3=own CPU ns (getrusage of
 *                                          this rank, its threads and waited-for children)
 *   kind 2 kernel  node, idx=CPU          v0=call ns v1=call index v2=start ns since the kernel phase began
 *   kind 3 timer   node, idx=sample       v0=ns per read (mean of --timer-reads) v1=timer resolution ns
 *   kind 4 shm     node, idx=iteration    v0=round trip ns
 *   kind 5 noise   node                   v0=CPUs recorded v1=recording seconds
 *   kind 6 lat     node=a, idx=iteration  v0=round trip ns v1=b v2=0 before the bandwidth test, 1 after it,
 *                                          2 recheck (idx from --lat-iters on)
 *   kind 7 bw      node=sender, idx=iter  v0=ns to send --bw-size and receive the 8-byte answer
 *                                          v1=direction (0: a to b, 1: b to a) v2=receiver
 *   kind 8 phase   node, idx=part         as kind 1, over one part of a node item: 1 noise, 2 kernel, 3 shm
 *                                          (the shm part from both ranks)
 *   kind 9 throttle node, idx as the row   v0=ns this rank's cgroup and its ancestors were throttled by a CPU
 *                  before it             quota (cpu.stat, summed over CPUs) v1=the kind of that row (1 or 8);
 *                                          right after it, absent when cpu.stat is not visible (hv_cgroup.h)
 * Header keys: nodes (host per node), boot_ids, node_cpus (CPUs per node), turns (turn per node),
 * kernel_iters, bw_size.
 *
 * Code: main parses the options into a screen_config, discovers the screen_world, then runs the phases; each
 * phase collects this rank's rows (row_buf) and flushes them with flush_items, a collective that writes one
 * raw point per item on rank 0. No file-scope mutable state. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <math.h>
#include <sched.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "hv_cgroup.h"
#include "hv_mpi.h"

extern char **environ;

enum { NCOLS = 7, GCOLS = 8 }; /* written columns; gathered rows carry the item first */
enum {
    K_LOAD = 1,
    K_KERNEL = 2,
    K_TIMER = 3,
    K_SHM = 4,
    K_NOISE = 5,
    K_LAT = 6,
    K_BW = 7,
    K_PHASE = 8,
    K_THROTTLE = 9
};
enum { PH_NOISE = 1, PH_KERNEL = 2, PH_SHM = 3 }; /* the parts of a node item whose load is kept apart */
enum { TAG_SYNC = 30, TAG_SHM = 31, TAG_LAT = 32, TAG_BW = 33, TAG_ACK = 34 };
enum { HOSTLEN = 64, BOOTLEN = 40, MASKLEN = 128, MAXCPUS = MASKLEN * 8 };
enum { LAT_BEFORE = 0, LAT_AFTER = 1, LAT_LATER = 2 }; /* lat rows, v2: before / after the bandwidth test, recheck */
enum { IT_CHECK = 0, IT_NODE = 1, IT_PAIR = 2, IT_RECHECK = 3 };

typedef struct { /* the validated options */
    long rounds, timer_samples, timer_reads, shm_iters, shm_warmup, lat_iters, lat_warmup, lat_recheck, bw_iters,
        bw_warmup;
    long bw_size, wait_us, max_events;
    double check_s, noise_s, kernel_s, quantum_ns, threshold_ns;
    const char *out;
    const char *noise_dir; /* NULL: traces/ beside the directory of --out (the run's raw/) */
    int64_t *todo_node, *todo_round, *pair_a, *pair_b, *pair_round;
    size_t ntodo, nrounds, npairs, nb, nround;
} screen_config;

typedef struct { /* one rank's identity, as gathered */
    char host[HOSTLEN], boot[BOOTLEN];
    unsigned char mask[MASKLEN];
} rank_id;

typedef struct { /* the nodes as the ranks found them */
    int nnodes, nturns, my_node, my_local;
    int *node_of, *leader, *partner, *turn, *ncpus;
    rank_id *node; /* per node: host, boot id, union of its ranks' CPUs */
    int cpus[MAXCPUS], mycpus; /* this rank's CPUs */
} screen_world;

typedef struct { /* rows of this rank, grown outside timed loops */
    double *v;
    size_t n, cap;
} row_buf;

typedef struct { /* one point to write: what it is */
    int type, a, b;
    long round;
} item;

typedef struct { /* /proc/stat, our CPU time and our cgroup's throttled time (NAN: not visible) at one instant */
    double busy_ns, idle_ns, steal_ns, own_ns, wall_ns, throttled_ns;
} load_mark;

static void *xcalloc(size_t n, size_t sz) {
    void *p = calloc(n ? n : 1, sz);
    if (!p) HV_DIE("out of memory allocating %zu x %zu bytes", n, sz);
    return p;
}

static void add_row(row_buf *b, double it, int kind, int node, double idx, double v0, double v1, double v2, double v3) {
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 1024;
        b->v = realloc(b->v, b->cap * GCOLS * sizeof *b->v);
        HV_ALLOC_CHECK(b->v);
    }
    double *r = b->v + b->n++ * GCOLS;
    r[0] = it, r[1] = kind, r[2] = node, r[3] = idx, r[4] = v0, r[5] = v1, r[6] = v2, r[7] = v3;
}

/* ---- options --------------------------------------------------------------------------------------------- */

/* What the option table cannot say: lists of one length, read --out (for the default trace directory). */
static void check_config(const hv_opt *opts, size_t nopts, screen_config *c) {
    c->out = hv_args_get(opts, nopts, "out");
    if (c->nrounds != c->ntodo) HV_DIE("hv_screen: --todo-nodes and --todo-rounds differ in length");
    if (c->nb != c->npairs || c->nround != c->npairs)
        HV_DIE("hv_screen: --pair-a, --pair-b and --pair-round differ in length");
}

static void free_config(screen_config *c) {
    free(c->todo_node);
    free(c->todo_round);
    free(c->pair_a);
    free(c->pair_b);
    free(c->pair_round);
}

/* ---- the world: nodes, leaders, turns ---------------------------------------------------------------- */

static void my_identity(rank_id *me, screen_world *w) {
    memset(me, 0, sizeof *me);
    gethostname(me->host, HOSTLEN - 1);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(me->boot, BOOTLEN, f)) me->boot[0] = 0;
        fclose(f);
    }
    me->boot[strcspn(me->boot, "\n")] = 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) HV_DIE("sched_getaffinity failed: %s", strerror(errno));
    w->mycpus = 0;
    for (int c = 0; c < MAXCPUS && c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) {
            me->mask[c / 8] |= (unsigned char)(1u << (c % 8));
            w->cpus[w->mycpus++] = c;
        }
}

static int shares_cpus(const rank_id *x, const rank_id *y) {
    if (strcmp(x->boot, y->boot) != 0 || !x->boot[0]) return 0;
    for (int i = 0; i < MASKLEN; i++)
        if (x->mask[i] & y->mask[i]) return 1;
    return 0;
}

/* Greedy colouring: a node takes the first turn no earlier node sharing CPUs with it has. */
static void colour_turns(screen_world *w) {
    w->nturns = 0;
    for (int i = 0; i < w->nnodes; i++) {
        int t = 0;
        for (int again = 1; again;) {
            again = 0;
            for (int j = 0; j < i; j++)
                if (w->turn[j] == t && shares_cpus(&w->node[i], &w->node[j])) {
                    t++;
                    again = 1;
                }
        }
        w->turn[i] = t;
        if (t + 1 > w->nturns) w->nturns = t + 1;
    }
}

static void discover(const hv_ctx *ctx, screen_world *w) {
    rank_id me, *all = xcalloc((size_t)ctx->size, sizeof *all);
    my_identity(&me, w);
    MPI_Request rq;
    HV_MPI_CHECK(MPI_Iallgather(&me, sizeof me, MPI_BYTE, all, sizeof me, MPI_BYTE, ctx->comm, &rq));
    hv_wait(ctx, &rq);
    w->node_of = xcalloc((size_t)ctx->size, sizeof(int));
    w->leader = xcalloc((size_t)ctx->size, sizeof(int));
    w->partner = xcalloc((size_t)ctx->size, sizeof(int));
    w->turn = xcalloc((size_t)ctx->size, sizeof(int));
    w->ncpus = xcalloc((size_t)ctx->size, sizeof(int));
    w->node = xcalloc((size_t)ctx->size, sizeof(rank_id));
    w->nnodes = 0;
    for (int r = 0; r < ctx->size; r++) {
        int n = 0;
        while (n < w->nnodes && strcmp(w->node[n].host, all[r].host) != 0) n++;
        if (n == w->nnodes) {
            w->node[n] = all[r];
            w->leader[n] = r;
            w->partner[n] = -1;
            w->nnodes++;
        } else if (w->partner[n] < 0) {
            w->partner[n] = r;
        }
        for (int i = 0; i < MASKLEN; i++) w->node[n].mask[i] |= all[r].mask[i];
        w->node_of[r] = n;
    }
    for (int n = 0; n < w->nnodes; n++)
        for (int i = 0; i < MASKLEN; i++) w->ncpus[n] += __builtin_popcount(w->node[n].mask[i]);
    w->my_node = w->node_of[ctx->rank];
    w->my_local = w->leader[w->my_node] == ctx->rank ? 0 : w->partner[w->my_node] == ctx->rank ? 1 : 2;
    colour_turns(w);
    free(all);
}

static void write_header(hv_ctx *ctx, const screen_world *w, long kernel_iters, long bw_size) {
    if (ctx->rank != 0) return;
    FILE *f = ctx->out.f;
    const char *keys[] = {"nodes", "boot_ids"};
    for (int k = 0; k < 2; k++) {
        fprintf(f, "#@%s=", keys[k]);
        for (int n = 0; n < w->nnodes; n++) fprintf(f, "%s%s", n ? "," : "", k ? w->node[n].boot : w->node[n].host);
        fputc('\n', f);
    }
    fputs("#@node_cpus=", f);
    for (int n = 0; n < w->nnodes; n++) fprintf(f, "%s%d", n ? "," : "", w->ncpus[n]);
    fputs("\n#@turns=", f);
    for (int n = 0; n < w->nnodes; n++) fprintf(f, "%s%d", n ? "," : "", w->turn[n]);
    fputc('\n', f);
    hv_out_meta(&ctx->out, "kernel_iters", "%ld", kernel_iters);
    hv_out_meta(&ctx->out, "bw_size", "%ld", bw_size);
    const char *cols[] = {"kind", "node", "idx", "v0", "v1", "v2", "v3"};
    hv_out_columns(&ctx->out, NCOLS, cols);
}

/* ---- writing points ------------------------------------------------------------------------------------- */

static void describe(const screen_world *w, const item *it, char *desc, size_t len) {
    if (it->type == IT_PAIR || it->type == IT_RECHECK)
        snprintf(desc, len, "item=%s a=%d b=%d host_a=%s host_b=%s", it->type == IT_PAIR ? "pair" : "recheck", it->a,
                 it->b, w->node[it->a].host, w->node[it->b].host);
    else if (it->type == IT_NODE)
        snprintf(desc, len, "item=node node=%d round=%ld host=%s", it->a, it->round, w->node[it->a].host);
    else snprintf(desc, len, "item=check node=%d host=%s", it->a, w->node[it->a].host);
}

/* Collective: every rank's rows to rank 0, which writes one point per item (rows tagged with the item's index
 * in ``items``); ends with a barrier, so that it separates turns. Waits asleep (--wait-us). Clears ``b``. */
static void flush_items(hv_ctx *ctx, const screen_world *w, const item *items, int nitems, row_buf *b) {
    int count = (int)(b->n * GCOLS), *counts = NULL, *displs = NULL, total = 0;
    if (ctx->rank == 0) {
        counts = xcalloc((size_t)ctx->size, sizeof *counts);
        displs = xcalloc((size_t)ctx->size, sizeof *displs);
    }
    MPI_Request rq;
    HV_MPI_CHECK(MPI_Igather(&count, 1, MPI_INT, counts, 1, MPI_INT, 0, ctx->comm, &rq));
    hv_wait(ctx, &rq);
    if (ctx->rank == 0)
        for (int r = 0; r < ctx->size; r++) displs[r] = total, total += counts[r];
    double *all = ctx->rank == 0 ? xcalloc((size_t)total, sizeof *all) : NULL;
    HV_MPI_CHECK(MPI_Igatherv(b->v, count, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, 0, ctx->comm, &rq));
    hv_wait(ctx, &rq);
    b->n = 0;
    if (ctx->rank == 0) {
        const size_t nrows = (size_t)total / GCOLS;
        double *out = xcalloc(nrows, NCOLS * sizeof *out);
        for (int i = 0; i < nitems; i++) {
            size_t k = 0;
            for (size_t r = 0; r < nrows; r++)
                if ((int)all[r * GCOLS] == i) memcpy(out + k++ * NCOLS, all + r * GCOLS + 1, NCOLS * sizeof *out);
            char desc[512];
            describe(w, &items[i], desc, sizeof desc);
            if (hv_out_point(&ctx->out, desc, out, k) != 0) HV_DIE("hv_screen: writing the raw output failed");
        }
        free(out);
    }
    free(all);
    free(counts);
    free(displs);
    /* a gather does not synchronise (a rank's part may complete before the others'): the next turn must not
     * start while this one is measured */
    HV_MPI_CHECK(MPI_Ibarrier(ctx->comm, &rq));
    hv_wait(ctx, &rq);
}

/* ---- load: /proc/stat and our own CPU time ---------------------------------------------------------------- */

static double cpu_ns(const struct rusage *u) {
    return (double)(u->ru_utime.tv_sec + u->ru_stime.tv_sec) * 1e9 +
           (double)(u->ru_utime.tv_usec + u->ru_stime.tv_usec) * 1e3;
}

static load_mark load_now(const screen_world *w) {
    load_mark m = {0, 0, 0, 0, (double)hv_mono_ns(), hv_cgroup_throttled_ns()};
    const double tick_ns = 1e9 / (double)sysconf(_SC_CLK_TCK);
    FILE *f = fopen("/proc/stat", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        int cpu;
        unsigned long long u, n, s, idle, io, irq, soft, steal = 0;
        if (sscanf(line, "cpu%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &u, &n, &s, &idle, &io, &irq, &soft,
                   &steal) < 8 ||
            cpu < 0 || cpu >= MAXCPUS || !(w->node[w->my_node].mask[cpu / 8] & (1u << (cpu % 8))))
            continue;
        m.busy_ns += (double)(u + n + s) * tick_ns; /* processes; interrupts are noise, not load */
        m.idle_ns += (double)(idle + io + irq + soft) * tick_ns;
        m.steal_ns += (double)steal * tick_ns;
    }
    if (f) fclose(f);
    struct rusage self, kids;
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &kids);
    m.own_ns = cpu_ns(&self) + cpu_ns(&kids);
    return m;
}

/* The time our cgroup (or an ancestor) was throttled by its CPU quota between two marks, right after the load
 * row it belongs to (kind 9: idx and v1 = the idx and kind of that row); none when cpu.stat is not visible. */
static void throttle_row(row_buf *b, int it, const screen_world *w, int kind, int idx, const load_mark *a,
                         const load_mark *z) {
    if (isfinite(a->throttled_ns) && isfinite(z->throttled_ns))
        add_row(b, it, K_THROTTLE, w->my_node, idx, z->throttled_ns - a->throttled_ns, kind, 0, 0);
}

static void load_row(row_buf *b, int it, const screen_world *w, const load_mark *a, const load_mark *z) {
    add_row(b, it, K_LOAD, w->my_node, w->my_local, z->busy_ns - a->busy_ns,
            (z->wall_ns - a->wall_ns) * w->ncpus[w->my_node], z->steal_ns - a->steal_ns, z->own_ns - a->own_ns);
    throttle_row(b, it, w, K_LOAD, w->my_local, a, z);
}

/* The load of one part of a node item (a burst of other processes during the 0.2 s of the kernel weighs on it,
 * not on the noise recorded before): kind 8, idx = the part. */
static void phase_row(row_buf *b, int it, const screen_world *w, int phase, const load_mark *a, const load_mark *z) {
    add_row(b, it, K_PHASE, w->my_node, phase, z->busy_ns - a->busy_ns,
            (z->wall_ns - a->wall_ns) * w->ncpus[w->my_node], z->steal_ns - a->steal_ns, z->own_ns - a->own_ns);
    throttle_row(b, it, w, K_PHASE, phase, a, z);
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* Phase 1: every rank asleep for check_s; leaders record what their node's CPUs did meanwhile. */
static void load_check(hv_ctx *ctx, const screen_world *w, const screen_config *c, row_buf *b) {
    item *items = xcalloc((size_t)w->nnodes, sizeof *items);
    for (int n = 0; n < w->nnodes; n++) items[n] = (item){IT_CHECK, n, 0, 0};
    load_mark a = load_now(w);
    sleep_s(c->check_s);
    load_mark z = load_now(w);
    if (w->my_local == 0) load_row(b, w->my_node, w, &a, &z);
    flush_items(ctx, w, items, w->nnodes, b);
    free(items);
}

/* ---- node measurements -------------------------------------------------------------------------------- */

/* --noise-dir, or traces/ beside the directory of --out (the run's raw/): <run>/traces. */
static void noise_dir(const screen_config *c, char *dir, size_t len) {
    if (c->noise_dir) {
        snprintf(dir, len, "%s", c->noise_dir);
        return;
    }
    snprintf(dir, len, "%s", c->out ? c->out : "-");
    for (int up = 0; up < 2; up++) { /* the file's directory, then its parent */
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
        else snprintf(dir, len, "%s", strcmp(dir, ".") == 0 ? ".." : ".");
    }
    size_t n = strlen(dir);
    snprintf(dir + n, len - n, "/traces");
}

static void run_collector(const screen_config *c, const screen_world *w, long round, row_buf *b, int it) {
    char exe[PATH_MAX], out[PATH_MAX + 128], cpus[MAXCPUS * 5] = "", dur[32], thr[32], maxev[32];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 32);
    if (n <= 0) HV_DIE("cannot find this program's path: %s", strerror(errno));
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    strcpy(slash ? slash + 1 : exe, "hv_noise_collect");
    size_t k = 0;
    for (int i = 0; i < w->mycpus; i++)
        k += (size_t)snprintf(cpus + k, sizeof cpus - k, "%s%d", i ? "," : "", w->cpus[i]);
    char dir[PATH_MAX];
    noise_dir(c, dir, sizeof dir);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        HV_DIE("cannot create the trace directory %s: %s", dir, strerror(errno));
    snprintf(out, sizeof out, "%s/%s-r%ld.jtr", dir, w->node[w->my_node].host, round);
    snprintf(dur, sizeof dur, "%.9g", c->noise_s);
    snprintf(thr, sizeof thr, "%.3f", c->threshold_ns);
    snprintf(maxev, sizeof maxev, "%ld", c->max_events);
    char *argv[] = {exe,     "--cpus", cpus,     "--duration",    dur, "--threshold-ns", thr, "--max-events", maxev,
                    "--out", out,      "--argv", "hpcvar screen", NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, exe, NULL, NULL, argv, environ), status = 0;
    if (rc != 0) HV_DIE("cannot start the collector %s: %s", exe, strerror(rc));
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) HV_DIE("waiting for the collector failed: %s", strerror(errno));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        HV_DIE("the collector failed on %s (status %d); its message is above", w->node[w->my_node].host, status);
    add_row(b, it, K_NOISE, w->my_node, 0, w->mycpus, c->noise_s, 0, 0);
}

typedef struct { /* one kernel thread */
    int cpu;
    uint64_t iters, budget, cap, ncalls, x;
    uint64_t *dt, *start;
    const hv_timer *timer;
    pthread_barrier_t *go;
} kernel_thread;

/* The calibrated work: a dependent chain of 64-bit multiply-adds (no vectorisation, no shortcut). */
static uint64_t kernel_work(uint64_t n, uint64_t x) {
    for (uint64_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

static void *kernel_main(void *arg) {
    kernel_thread *k = arg;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(k->cpu, &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    pthread_barrier_wait(k->go);
    const uint64_t t0 = hv_ticks(k->timer);
    uint64_t x = (uint64_t)k->cpu + 1, n = 0;
    for (;;) {
        const uint64_t a = hv_ticks(k->timer);
        x = kernel_work(k->iters, x);
        const uint64_t z = hv_ticks(k->timer);
        k->dt[n] = z - a;
        k->start[n++] = a - t0;
        if (z - t0 >= k->budget || n == k->cap) break;
    }
    k->ncalls = n;
    k->x = x;
    return NULL;
}

static void run_kernel(const hv_ctx *ctx, const screen_config *c, const screen_world *w, uint64_t iters, row_buf *b,
                       int it) {
    const int nt = w->mycpus;
    kernel_thread *ks = xcalloc((size_t)nt, sizeof *ks);
    pthread_t *th = xcalloc((size_t)nt, sizeof *th);
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)nt);
    const uint64_t cap = (uint64_t)(4.0 * c->kernel_s * 1e9 / c->quantum_ns) + 64;
    for (int i = 0; i < nt; i++) {
        ks[i] = (kernel_thread){w->cpus[i],
                                iters,
                                hv_ns_to_ticks(&ctx->timer, c->kernel_s * 1e9),
                                cap,
                                0,
                                0,
                                hv_malloc_touched(cap * sizeof(uint64_t)),
                                hv_malloc_touched(cap * sizeof(uint64_t)),
                                &ctx->timer,
                                &go};
        if (pthread_create(&th[i], NULL, kernel_main, &ks[i]) != 0) HV_DIE("cannot start a kernel thread");
    }
    for (int i = 0; i < nt; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < nt; i++) {
        for (uint64_t j = 0; j < ks[i].ncalls; j++)
            add_row(b, it, K_KERNEL, w->my_node, ks[i].cpu, hv_ticks_to_ns(&ctx->timer, ks[i].dt[j]), (double)j,
                    hv_ticks_to_ns(&ctx->timer, ks[i].start[j]), 0);
        free(ks[i].dt);
        free(ks[i].start);
    }
    pthread_barrier_destroy(&go);
    free(ks);
    free(th);
}

static void run_timer(const hv_ctx *ctx, const screen_config *c, const screen_world *w, row_buf *b, int it) {
    double *per = hv_malloc_touched((size_t)c->timer_samples * sizeof *per);
    uint64_t sink = 0;
    for (long s = 0; s < c->timer_samples; s++) {
        const uint64_t a = hv_ticks(&ctx->timer);
        for (long r = 0; r < c->timer_reads; r++) sink ^= hv_ticks(&ctx->timer);
        per[s] = hv_ticks_to_ns(&ctx->timer, hv_ticks(&ctx->timer) - a) / (double)(c->timer_reads + 1);
    }
    __asm__ volatile("" : : "r"(sink));
    for (long s = 0; s < c->timer_samples; s++)
        add_row(b, it, K_TIMER, w->my_node, (double)s, per[s], ctx->timer.resolution_ns, 0, 0);
    free(per);
}

/* The two ends of a ping-pong run on different CPUs where they can (the first and the second this rank may
 * use): left to the scheduler they sometimes share one, and every message becomes a context switch (1.3 us
 * against 5.5 us inside a testbed node, at random). The previous mask is restored by unpin(). */
static cpu_set_t pin_to(const screen_world *w, int second) {
    cpu_set_t old, one;
    sched_getaffinity(0, sizeof old, &old);
    CPU_ZERO(&one);
    CPU_SET(w->cpus[second && w->mycpus > 1 ? 1 : 0], &one);
    sched_setaffinity(0, sizeof one, &one);
    return old;
}

static void unpin(const cpu_set_t *old) { sched_setaffinity(0, sizeof *old, old); }

/* 8-byte ping-pong between two ranks; the initiator keeps every round trip. The first message is awaited
 * asleep (the peer may still be busy), the timed ones spin. */
static void pp_sync(const hv_ctx *ctx, int peer, int initiator) {
    char buf[8] = {0};
    MPI_Request rq;
    if (initiator) {
        HV_MPI_CHECK(MPI_Isend(buf, 8, MPI_BYTE, peer, TAG_SYNC, ctx->comm, &rq));
    } else {
        HV_MPI_CHECK(MPI_Irecv(buf, 8, MPI_BYTE, peer, TAG_SYNC, ctx->comm, &rq));
    }
    hv_wait(ctx, &rq);
}

static void pp_loop(const hv_ctx *ctx, int peer, int initiator, long warmup, long iters, int tag, uint64_t *rtt) {
    char buf[8] = {0};
    for (long i = 0; i < warmup + iters; i++) {
        if (initiator) {
            const uint64_t a = hv_ticks(&ctx->timer);
            HV_MPI_CHECK(MPI_Send(buf, 8, MPI_BYTE, peer, tag, ctx->comm));
            HV_MPI_CHECK(MPI_Recv(buf, 8, MPI_BYTE, peer, tag, ctx->comm, MPI_STATUS_IGNORE));
            const uint64_t z = hv_ticks(&ctx->timer);
            if (i >= warmup) rtt[i - warmup] = z - a;
        } else {
            HV_MPI_CHECK(MPI_Recv(buf, 8, MPI_BYTE, peer, tag, ctx->comm, MPI_STATUS_IGNORE));
            HV_MPI_CHECK(MPI_Send(buf, 8, MPI_BYTE, peer, tag, ctx->comm));
        }
    }
}

static void pingpong(const hv_ctx *ctx, int peer, int initiator, long warmup, long iters, int tag, uint64_t *rtt) {
    pp_sync(ctx, peer, initiator);
    pp_loop(ctx, peer, initiator, warmup, iters, tag, rtt);
}

/* This rank's part of a node item (leader: noise, kernel, timer, shm; partner: shm). */
static void run_node_item(const hv_ctx *ctx, const screen_config *c, const screen_world *w, long round, uint64_t iters,
                          row_buf *b, int it, uint64_t *samples) {
    const int partner = w->partner[w->my_node], leader = w->leader[w->my_node];
    load_mark a = load_now(w), p0, p1;
    if (w->my_local == 0) {
        if (c->noise_s > 0) {
            p0 = load_now(w);
            run_collector(c, w, round, b, it);
            p1 = load_now(w);
            phase_row(b, it, w, PH_NOISE, &p0, &p1);
        }
        if (c->kernel_s > 0) {
            p0 = load_now(w);
            run_kernel(ctx, c, w, iters, b, it);
            p1 = load_now(w);
            phase_row(b, it, w, PH_KERNEL, &p0, &p1);
        }
        run_timer(ctx, c, w, b, it);
    }
    if (partner >= 0 && w->my_local < 2) {
        const cpu_set_t old = pin_to(w, w->my_local == 1);
        const int peer = w->my_local == 0 ? partner : leader;
        pp_sync(ctx, peer, w->my_local == 0); /* the partner waits asleep for the leader's noise and kernel */
        p0 = load_now(w);
        pp_loop(ctx, peer, w->my_local == 0, c->shm_warmup, c->shm_iters, TAG_SHM, samples);
        p1 = load_now(w);
        phase_row(b, it, w, PH_SHM, &p0, &p1);
        unpin(&old);
        for (long i = 0; w->my_local == 0 && i < c->shm_iters; i++)
            add_row(b, it, K_SHM, w->my_node, (double)i, hv_ticks_to_ns(&ctx->timer, samples[i]), 0, 0, 0);
    }
    load_mark z = load_now(w);
    if (w->my_local < 2) load_row(b, it, w, &a, &z);
}

/* Phase 2: rounds, turns within a round. */
static void node_phase(hv_ctx *ctx, const screen_config *c, const screen_world *w, uint64_t iters, row_buf *b) {
    item *items = xcalloc(c->ntodo, sizeof *items);
    uint64_t *samples = hv_malloc_touched((size_t)c->shm_iters * sizeof *samples);
    for (long r = 0; r < c->rounds; r++)
        for (int t = 0; t < w->nturns; t++) {
            int n = 0;
            for (size_t i = 0; i < c->ntodo; i++) {
                const int node = (int)c->todo_node[i];
                if (c->todo_round[i] != r || node >= w->nnodes || w->turn[node] != t) continue;
                if (node == w->my_node) run_node_item(ctx, c, w, r, iters, b, n, samples);
                items[n++] = (item){IT_NODE, node, 0, r};
            }
            if (n) flush_items(ctx, w, items, n, b);
        }
    free(samples);
    free(items);
}

/* ---- pairs ---------------------------------------------------------------------------------------------- */

/* One direction of the bandwidth test: the sender times sending size bytes and receiving an 8-byte answer. */
static void bw_direction(const hv_ctx *ctx, const screen_config *c, int peer, int sender, char *buf, uint64_t *t) {
    char ack[8] = {0};
    for (long i = 0; i < c->bw_warmup + c->bw_iters; i++) {
        if (sender) {
            const uint64_t a = hv_ticks(&ctx->timer);
            HV_MPI_CHECK(MPI_Send(buf, (int)c->bw_size, MPI_BYTE, peer, TAG_BW, ctx->comm));
            HV_MPI_CHECK(MPI_Recv(ack, 8, MPI_BYTE, peer, TAG_ACK, ctx->comm, MPI_STATUS_IGNORE));
            const uint64_t z = hv_ticks(&ctx->timer);
            if (i >= c->bw_warmup) t[i - c->bw_warmup] = z - a;
        } else {
            HV_MPI_CHECK(MPI_Recv(buf, (int)c->bw_size, MPI_BYTE, peer, TAG_BW, ctx->comm, MPI_STATUS_IGNORE));
            HV_MPI_CHECK(MPI_Send(ack, 8, MPI_BYTE, peer, TAG_ACK, ctx->comm));
        }
    }
}

static void run_pair(const hv_ctx *ctx, const screen_config *c, const screen_world *w, int a, int bnode, char *buf,
                     uint64_t *t, row_buf *b, int it) {
    const int me_a = w->my_node == a, other = me_a ? w->leader[bnode] : w->leader[a];
    load_mark la = load_now(w);
    const cpu_set_t old = pin_to(w, !me_a); /* a on its first CPU, b on its second */
    /* the latency in two halves, before and after the bandwidth test (rows 0..first-1, then first..): a latency
       finding must show in both, so that a burst of load during one short ping-pong cannot name a link */
    const long first = (c->lat_iters + 1) / 2;
    pingpong(ctx, other, me_a, c->lat_warmup, first, TAG_LAT, t);
    for (long i = 0; me_a && i < first; i++)
        add_row(b, it, K_LAT, a, (double)i, hv_ticks_to_ns(&ctx->timer, t[i]), bnode, LAT_BEFORE, 0);
    for (int dir = 0; dir < 2; dir++) {
        const int sender = (dir == 0) == me_a;
        bw_direction(ctx, c, other, sender, buf, t);
        for (long i = 0; sender && i < c->bw_iters; i++)
            add_row(b, it, K_BW, w->my_node, (double)i, hv_ticks_to_ns(&ctx->timer, t[i]), dir, dir ? a : bnode, 0);
    }
    pingpong(ctx, other, me_a, c->lat_warmup, c->lat_iters - first, TAG_LAT, t);
    for (long i = 0; me_a && i < c->lat_iters - first; i++)
        add_row(b, it, K_LAT, a, (double)(first + i), hv_ticks_to_ns(&ctx->timer, t[i]), bnode, LAT_AFTER, 0);
    unpin(&old);
    load_mark lz = load_now(w);
    load_row(b, it, w, &la, &lz);
}

/* The pair's latency once more, after every pair was measured (seconds later): a finding must show then too,
 * so that a condition lasting through one pair's measurement (a CI run saw a clean pair 1.38x in both halves)
 * cannot name a link. */
static void recheck_pair(const hv_ctx *ctx, const screen_config *c, const screen_world *w, int a, int bnode,
                         uint64_t *t, row_buf *b, int it) {
    const int me_a = w->my_node == a, other = me_a ? w->leader[bnode] : w->leader[a];
    const cpu_set_t old = pin_to(w, !me_a);
    pingpong(ctx, other, me_a, c->lat_warmup, c->lat_recheck, TAG_LAT, t);
    for (long i = 0; me_a && i < c->lat_recheck; i++)
        add_row(b, it, K_LAT, a, (double)(c->lat_iters + i), hv_ticks_to_ns(&ctx->timer, t[i]), bnode, LAT_LATER, 0);
    unpin(&old);
}

static int pairs_clash(const screen_world *w, int a, int b, int c, int d) {
    const int p[2] = {a, b}, q[2] = {c, d};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            if (p[i] == q[j] || shares_cpus(&w->node[p[i]], &w->node[q[j]])) return 1;
    return 0;
}

/* The first sub-round of pair i where it clashes with none of the pairs lo..i-1 already placed. */
static int subround(const screen_config *c, const screen_world *w, const int *sub, size_t lo, size_t i) {
    for (int s = 0;; s++) {
        int clash = 0;
        for (size_t j = lo; j < i && !clash; j++)
            clash = sub[j] == s &&
                    pairs_clash(w, (int)c->pair_a[i], (int)c->pair_b[i], (int)c->pair_a[j], (int)c->pair_b[j]);
        if (!clash) return s;
    }
}

/* Phase 3: each round of disjoint pairs, split into sub-rounds whose pairs share no CPU; with ``recheck``, the
 * same schedule once more for the latency alone (recheck_pair). */
static void pair_phase(hv_ctx *ctx, const screen_config *c, const screen_world *w, row_buf *b, int recheck) {
    if (!c->npairs || (recheck && !c->lat_recheck)) return;
    int *sub = xcalloc(c->npairs, sizeof *sub);
    item *items = xcalloc(c->npairs, sizeof *items);
    char *buf = w->my_local == 0 ? hv_malloc_touched((size_t)c->bw_size) : NULL;
    long nt = c->lat_iters > c->bw_iters ? c->lat_iters : c->bw_iters;
    if (c->lat_recheck > nt) nt = c->lat_recheck;
    uint64_t *t = hv_malloc_touched((size_t)nt * sizeof *t);
    int64_t last_round = -1;
    for (size_t i = 0; i < c->npairs; i++) {
        if (c->pair_a[i] >= w->nnodes || c->pair_b[i] >= w->nnodes || c->pair_a[i] == c->pair_b[i])
            HV_DIE("hv_screen: pair %lld-%lld is not two of the %d nodes", (long long)c->pair_a[i],
                   (long long)c->pair_b[i], w->nnodes);
        if (c->pair_round[i] < last_round) HV_DIE("hv_screen: --pair-round is not in order");
        last_round = c->pair_round[i];
    }
    for (size_t lo = 0, hi; lo < c->npairs; lo = hi) {
        for (hi = lo; hi < c->npairs && c->pair_round[hi] == c->pair_round[lo]; hi++)
            sub[hi] = subround(c, w, sub, lo, hi);
        for (int s = 0;; s++) {
            int n = 0;
            for (size_t i = lo; i < hi; i++) {
                if (sub[i] != s) continue;
                const int a = (int)c->pair_a[i], bn = (int)c->pair_b[i];
                if (w->my_local == 0 && (w->my_node == a || w->my_node == bn)) {
                    if (recheck) recheck_pair(ctx, c, w, a, bn, t, b, n);
                    else run_pair(ctx, c, w, a, bn, buf, t, b, n);
                }
                items[n++] = (item){recheck ? IT_RECHECK : IT_PAIR, a, bn, 0};
            }
            if (!n) break;
            flush_items(ctx, w, items, n, b);
        }
    }
    free(t);
    free(buf);
    free(items);
    free(sub);
}

/* ---- main ----------------------------------------------------------------------------------------------- */

/* Rank 0 sizes the kernel's chain to take about quantum_ns here; every node then does the same work. */
static uint64_t calibrate_kernel(const hv_ctx *ctx, double quantum_ns) {
    uint64_t n = 1000, x = 1;
    if (ctx->rank == 0) {
        for (;;) {
            const uint64_t a = hv_mono_ns();
            x = kernel_work(n, x);
            const double dt = (double)(hv_mono_ns() - a);
            if (dt >= quantum_ns / 4 || n > (1ull << 40)) {
                n = (uint64_t)((double)n * quantum_ns / (dt > 0 ? dt : 1)) + (x & 1);
                break;
            }
            n *= 2;
        }
    }
    MPI_Request rq;
    HV_MPI_CHECK(MPI_Ibcast(&n, 1, MPI_UINT64_T, 0, ctx->comm, &rq));
    hv_wait(ctx, &rq);
    return n > 0 ? n : 1;
}

static void free_world(screen_world *w) {
    free(w->node_of);
    free(w->leader);
    free(w->partner);
    free(w->turn);
    free(w->ncpus);
    free(w->node);
}

int main(int argc, char **argv) {
    hv_opt opts[] = {
        HV_COMMON_OPTS,
        HV_OPT_LONG(screen_config, rounds, "rounds", 1, 1000, "node rounds (the nodes take turns within each)"),
        HV_OPT_DOUBLE(screen_config, check_s, "check-s", 0, 3600, "load check before measuring, s (0: none)"),
        HV_OPT_DOUBLE(screen_config, noise_s, "noise-s", 0, 3600, "noise per node and round, s (0: none)"),
        HV_OPT_STRING_OR(screen_config, noise_dir, "noise-dir",
                         "directory of the traces <host>-r<round>.jtr (default: traces/ beside --out's directory)"),
        HV_OPT_DOUBLE(screen_config, threshold_ns, "threshold-ns", 0, 1e9, "collector threshold ns (0: default)"),
        HV_OPT_LONG(screen_config, max_events, "max-events", 1, 1L << 32, "collector buffer per CPU"),
        HV_OPT_DOUBLE(screen_config, kernel_s, "kernel-s", 0, 3600, "kernel time per node and round, s (0: none)"),
        HV_OPT_DOUBLE(screen_config, quantum_ns, "quantum-ns", 1e3, 1e9, "one kernel call, calibrated on rank 0"),
        HV_OPT_LONG(screen_config, timer_samples, "timer-samples", 1, 1L << 20, "timer cost samples"),
        HV_OPT_LONG(screen_config, timer_reads, "timer-reads", 1, 1L << 20, "back-to-back reads per sample"),
        HV_OPT_LONG(screen_config, shm_iters, "shm-iters", 1, 1L << 24, "8-byte round trips inside a node"),
        HV_OPT_LONG(screen_config, shm_warmup, "shm-warmup", 0, 1L << 24, "untimed round trips inside a node"),
        HV_OPT_LONG(screen_config, lat_iters, "lat-iters", 1, 1L << 24, "8-byte round trips per pair"),
        HV_OPT_LONG(screen_config, lat_warmup, "lat-warmup", 0, 1L << 24, "untimed round trips per pair"),
        HV_OPT_LONG(screen_config, lat_recheck, "lat-recheck", 0, 1L << 24,
                    "8-byte round trips per pair once more after all pairs (0: none)"),
        HV_OPT_LONG(screen_config, bw_size, "bw-size", 8, 0x7fffffffL, "bytes of a bandwidth message"),
        HV_OPT_LONG(screen_config, bw_iters, "bw-iters", 1, 1L << 20, "timed messages per pair and direction"),
        HV_OPT_LONG(screen_config, bw_warmup, "bw-warmup", 0, 1L << 20, "untimed messages per pair and direction"),
        HV_OPT_LIST_OR(screen_config, todo_node, ntodo, "todo-nodes", "node items to measure: nodes"),
        HV_OPT_LIST_OR(screen_config, todo_round, nrounds, "todo-rounds", "node items to measure: rounds"),
        HV_OPT_LIST_OR(screen_config, pair_a, npairs, "pair-a", "pairs to measure: first nodes"),
        HV_OPT_LIST_OR(screen_config, pair_b, nb, "pair-b", "pairs to measure: second nodes"),
        HV_OPT_LIST_OR(screen_config, pair_round, nround, "pair-round", "pairs: round of each (non-decreasing)"),
        HV_OPT_LONG(screen_config, wait_us, "wait-us", -1, 1000000, "waiting: 0 spin, -1 yield, N sleep N us"),
    };
    const size_t nopts = sizeof opts / sizeof opts[0];
    hv_ctx ctx;
    screen_config cfg = {0};
    hv_ctx_init_config(&ctx, &argc, &argv, "hv_screen", opts, nopts, &cfg);
    check_config(opts, nopts, &cfg);
    hv_set_wait(&ctx, (int)cfg.wait_us);
    screen_world w;
    discover(&ctx, &w);
    const uint64_t iters = calibrate_kernel(&ctx, cfg.quantum_ns);
    write_header(&ctx, &w, (long)iters, cfg.bw_size);
    row_buf rows = {NULL, 0, 0};
    if (cfg.check_s > 0) load_check(&ctx, &w, &cfg, &rows);
    node_phase(&ctx, &cfg, &w, iters, &rows);
    pair_phase(&ctx, &cfg, &w, &rows, 0);
    pair_phase(&ctx, &cfg, &w, &rows, 1);
    free(rows.v);
    free_world(&w);
    free_config(&cfg);
    hv_ctx_finish(&ctx);
    return 0;
}
