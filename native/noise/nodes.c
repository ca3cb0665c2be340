/* hv_noise_nodes: one jitter collector per node, started together on one time base (hpcvar noise record
 * with a multi-node launcher; docs/noise.md "Noise on every node").
 *
 * One rank per node (the launcher asks for it; --expect-rpn 1 checks it). Per rank:
 *   1. Clock offsets before: rank 0 ping-pongs --sync-rounds times with every other rank in turn; each
 *      side reads its CLOCK_MONOTONIC_RAW. For the exchange with the smallest round trip,
 *        offset_i = t_i - (t_send + t_recv) / 2       (rank i's clock minus rank 0's)
 *      with an uncertainty of at most rtt_min / 2 (Cristian's bound).
 *   2. The collector (hv_noise_collect, next to this program) starts as a child on all --cpus of the node
 *      and calibrates; when every node's collector has said "ready", rank 0 picks T0 = now + --margin in
 *      its clock and every rank sends T0 + offset_i (its own clock) to its collector's stdin
 *      (hv_noise_collect --start-from-stdin), so that a node slow to start cannot miss the start.
 *   3. The rank then sleeps in waitpid, so it takes no CPU from the recording. The child dies with this
 *      rank (PR_SET_PDEATHSIG). Waits for the other nodes (their collectors getting ready, finishing) sleep
 *      too (sleepy_wait): MPI's blocking calls spin, on a CPU that another "node" of the testbed records.
 *   4. Clock offsets after, the same way; drift_i = (offset_after - offset_before) / (t_after - t_before).
 * Each collector writes <--out-dir>/<host>.jtr; rank 0 writes one raw point "sync" (--out), one row per
 * rank: rank, offset_before_ns, rtt_before_ns, t_before_ns, offset_after_ns, rtt_after_ns, t_after_ns,
 * start_local_ns (times of rank 0's clock), plus the header keys boot_ids and t0_mono_raw_ns.
 *
 * Code: main reads the options into a nodes_config, then: boot ids (gather_boot_ids), clocks before
 * (sync_clocks), the collector as a child (collector_args, start_collector), the agreed start
 * (agree_start), the recording (wait_collector), clocks after, and rank 0's point (write_sync). */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "hv_mpi.h"

extern char **environ;

enum { NCOLS = 8, TAG_PING = 21, TAG_PONG = 22, BOOTID = 40 };

typedef struct { /* the validated options */
    const char *dir, *cpus, *method, *argv;
    double duration_s, threshold_ns, interval_ns, margin_s;
    long max_events, rounds, rt_prio;
} nodes_config;

typedef struct {
    double offset_ns, rtt_ns, t_ns; /* t_ns: midpoint of the best exchange, rank 0's clock */
} hv_sync;

/* Wait for a nonblocking call while sleeping. MPI's blocking calls busy-poll (MPICH calls sched_yield in a
 * loop): a rank that waits for the other nodes' collectors would take a CPU from them when "nodes" share one
 * machine (the testbed) and show up in their recordings, and with more waiting ranks than cores the
 * yielding ranks starved everything else on this 6.18 kernel for a minute at a time (RCU stall and
 * workqueue lockup reports; the agreed start missed by 60 s). So every wait here that can be long sleeps,
 * polling every millisecond; only the two partners of a clock ping-pong spin. */
static void sleepy_wait(MPI_Request *rq) {
    const struct timespec ms = {0, 1000000};
    for (;;) {
        int done = 0;
        HV_MPI_CHECK(MPI_Test(rq, &done, MPI_STATUS_IGNORE));
        if (done) return;
        nanosleep(&ms, NULL);
    }
}

/* Rank 0 against every other rank; returns (on rank 0) one hv_sync per rank (rank 0's is zeros). */
static void sync_clocks(hv_ctx *ctx, long rounds, hv_sync *out) {
    for (int peer = 1; peer < ctx->size; peer++) {
        if (ctx->rank == 0) {
            hv_sync best = {0, -1, 0};
            for (long k = 0; k < rounds; k++) {
                double remote = 0;
                const uint64_t t1 = hv_mono_ns();
                HV_MPI_CHECK(MPI_Send(&remote, 1, MPI_DOUBLE, peer, TAG_PING, ctx->comm));
                HV_MPI_CHECK(MPI_Recv(&remote, 1, MPI_DOUBLE, peer, TAG_PONG, ctx->comm, MPI_STATUS_IGNORE));
                const uint64_t t4 = hv_mono_ns();
                const double rtt = (double)(t4 - t1), mid = ((double)t1 + (double)t4) / 2.0;
                if (best.rtt_ns < 0 || rtt < best.rtt_ns) best = (hv_sync){remote - mid, rtt, mid};
            }
            out[peer] = best;
        } else if (ctx->rank == peer) {
            for (long k = 0; k < rounds; k++) {
                double t = 0;
                if (k == 0) { /* rank 0 may be busy with the ranks before this one: wait asleep */
                    MPI_Request rq;
                    HV_MPI_CHECK(MPI_Irecv(&t, 1, MPI_DOUBLE, 0, TAG_PING, ctx->comm, &rq));
                    sleepy_wait(&rq);
                } else {
                    HV_MPI_CHECK(MPI_Recv(&t, 1, MPI_DOUBLE, 0, TAG_PING, ctx->comm, MPI_STATUS_IGNORE));
                }
                t = (double)hv_mono_ns();
                HV_MPI_CHECK(MPI_Send(&t, 1, MPI_DOUBLE, 0, TAG_PONG, ctx->comm));
            }
        }
    }
    if (ctx->rank == 0) out[0] = (hv_sync){0, 0, (double)hv_mono_ns()};
}

/* The CPUs this rank may run on, as a comma list (what "all" means on this node). */
static void allowed_cpus(char *buf, size_t len) {
    cpu_set_t set;
    buf[0] = 0;
    if (sched_getaffinity(0, sizeof set, &set) != 0) HV_DIE("sched_getaffinity failed: %s", strerror(errno));
    size_t n = 0;
    for (int c = 0; c < CPU_SETSIZE && n + 8 < len; c++)
        if (CPU_ISSET(c, &set)) n += (size_t)snprintf(buf + n, len - n, "%s%d", n ? "," : "", c);
}

/* The collector as a child: its stdin and stdout are pipes to us (the start handshake), its stderr is ours
 * (the launcher's log). */
typedef struct {
    pid_t pid;
    FILE *to, *from;
} hv_child;

static hv_child start_collector(const char *exe, char *const argv[]) {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) HV_DIE("pipe failed: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, in[1]);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    hv_child c;
    int rc = posix_spawn(&c.pid, exe, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) HV_DIE("cannot start the collector %s: %s", exe, strerror(rc));
    close(in[0]);
    close(out[1]);
    c.to = fdopen(in[1], "w");
    c.from = fdopen(out[0], "r");
    if (!c.to || !c.from) HV_DIE("fdopen failed: %s", strerror(errno));
    return c;
}

static void wait_collector(hv_child *c) {
    int status = 0;
    while (waitpid(c->pid, &status, 0) < 0)
        if (errno != EINTR) HV_DIE("waiting for the collector failed: %s", strerror(errno));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        HV_DIE("the collector failed (%s %d); its message is above", WIFEXITED(status) ? "exit code" : "signal",
               WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

/* The collector next to this program. */
static void collector_path(char *exe, size_t len) {
    ssize_t n = readlink("/proc/self/exe", exe, len - 32);
    if (n <= 0) HV_DIE("cannot find this program's path: %s", strerror(errno));
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    strcpy(slash ? slash + 1 : exe, "hv_noise_collect");
    if (access(exe, X_OK) != 0) HV_DIE("the collector %s is missing: reinstall hpcvar", exe);
}

/* Every rank's boot id on rank 0 ("nodes" that are one machine, the testbed, share one); NULL elsewhere. */
static char *gather_boot_ids(const hv_ctx *ctx) {
    char boot[BOOTID] = {0};
    FILE *bf = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (bf) {
        if (!fgets(boot, sizeof boot, bf)) boot[0] = 0;
        fclose(bf);
    }
    boot[strcspn(boot, "\n")] = 0;
    char *boots = ctx->rank == 0 ? calloc((size_t)ctx->size, BOOTID) : NULL;
    if (ctx->rank == 0) HV_ALLOC_CHECK(boots);
    MPI_Request rq;
    HV_MPI_CHECK(MPI_Igather(boot, BOOTID, MPI_CHAR, boots, BOOTID, MPI_CHAR, 0, ctx->comm, &rq));
    sleepy_wait(&rq);
    return boots;
}

typedef struct { /* the collector's command line and the text of its values */
    char out[PATH_MAX + 320], cpulist[4096], dur[64], thr[64], max[64], iv[64], rt[32];
    char *argv[21];
} collector_args;

static void make_collector_args(collector_args *a, char *exe, const nodes_config *c) {
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    snprintf(a->out, sizeof a->out, "%s/%s.jtr", c->dir, host);
    if (strcmp(c->cpus, "all") == 0) allowed_cpus(a->cpulist, sizeof a->cpulist);
    else snprintf(a->cpulist, sizeof a->cpulist, "%s", c->cpus);
    snprintf(a->dur, sizeof a->dur, "%.9g", c->duration_s);
    snprintf(a->thr, sizeof a->thr, "%.3f", c->threshold_ns);
    snprintf(a->max, sizeof a->max, "%ld", c->max_events);
    snprintf(a->iv, sizeof a->iv, "%.0f", c->interval_ns);
    snprintf(a->rt, sizeof a->rt, "%ld", c->rt_prio);
    char *argv[] = {exe,
                    "--cpus",
                    a->cpulist,
                    "--duration",
                    a->dur,
                    "--threshold-ns",
                    a->thr,
                    "--max-events",
                    a->max,
                    "--out",
                    a->out,
                    "--method",
                    (char *)c->method,
                    "--interval-ns",
                    a->iv,
                    "--rt-prio",
                    a->rt,
                    "--start-from-stdin",
                    "--argv",
                    (char *)(c->argv ? c->argv : ""),
                    NULL};
    memcpy(a->argv, argv, sizeof argv);
}

/* Every collector calibrated: only then is the start agreed (a slow node cannot miss it); each collector gets
 * it in its node's own clock. Returns the start in rank 0's clock. */
static double agree_start(const hv_ctx *ctx, hv_child *child, const hv_sync *before, double margin_s) {
    MPI_Request rq;
    char line[32];
    int ready = fgets(line, sizeof line, child->from) != NULL && strncmp(line, "ready", 5) == 0, all_ready = 0;
    HV_MPI_CHECK(MPI_Iallreduce(&ready, &all_ready, 1, MPI_INT, MPI_MIN, ctx->comm, &rq));
    sleepy_wait(&rq);
    if (!all_ready) {
        fclose(child->to); /* a collector that did get ready stops on the missing start time */
        if (!ready) wait_collector(child);
        HV_DIE("a collector on another node failed before the start; its message is in the launcher's log");
    }
    /* the common start, in every rank's own clock */
    double t0 = ctx->rank == 0 ? (double)hv_mono_ns() + margin_s * 1e9 : 0, mine = 0;
    HV_MPI_CHECK(MPI_Ibcast(&t0, 1, MPI_DOUBLE, 0, ctx->comm, &rq));
    sleepy_wait(&rq);
    double *offs = ctx->rank == 0 ? malloc((size_t)ctx->size * sizeof *offs) : NULL;
    if (ctx->rank == 0) {
        HV_ALLOC_CHECK(offs);
        for (int r = 0; r < ctx->size; r++) offs[r] = before[r].offset_ns;
    }
    HV_MPI_CHECK(MPI_Iscatter(offs, 1, MPI_DOUBLE, &mine, 1, MPI_DOUBLE, 0, ctx->comm, &rq));
    sleepy_wait(&rq);
    free(offs);
    fprintf(child->to, "%.0f\n", t0 + mine);
    fclose(child->to);
    return t0;
}

/* Rank 0's header keys and the one point "sync": a row per rank. */
static void write_sync(hv_ctx *ctx, const char *boots, const hv_sync *before, const hv_sync *after, double t0) {
    const char *cols[] = {"rank",         "offset_before_ns", "rtt_before_ns", "t_before_ns", "offset_after_ns",
                          "rtt_after_ns", "t_after_ns",       "start_local_ns"};
    double *rows = NULL;
    size_t nrows = 0;
    if (ctx->rank == 0) {
        hv_out_meta(&ctx->out, "t0_mono_raw_ns", "%.0f", t0);
        fputs("#@boot_ids=", ctx->out.f);
        for (int r = 0; r < ctx->size; r++) fprintf(ctx->out.f, "%s%s", r ? "," : "", boots + (size_t)r * BOOTID);
        fputc('\n', ctx->out.f);
        hv_out_columns(&ctx->out, NCOLS, cols);
        rows = malloc((size_t)ctx->size * NCOLS * sizeof *rows);
        HV_ALLOC_CHECK(rows);
        for (int r = 0; r < ctx->size; r++) {
            double *w = rows + (size_t)r * NCOLS;
            w[0] = r;
            w[1] = before[r].offset_ns;
            w[2] = before[r].rtt_ns;
            w[3] = before[r].t_ns;
            w[4] = after[r].offset_ns;
            w[5] = after[r].rtt_ns;
            w[6] = after[r].t_ns;
            w[7] = t0 + before[r].offset_ns;
        }
        nrows = (size_t)ctx->size;
    }
    hv_gather_point(ctx, "sync=1", rows, nrows);
    free(rows);
}

static void sleepy_barrier(const hv_ctx *ctx) {
    MPI_Request rq;
    HV_MPI_CHECK(MPI_Ibarrier(ctx->comm, &rq));
    sleepy_wait(&rq);
}

int main(int argc, char **argv) {
    hv_opt opts[] = {
        HV_COMMON_OPTS,
        HV_OPT_STRING(nodes_config, dir, "out-dir",
                      "directory of the per-node traces (<host>.jtr); shared by the nodes"),
        HV_OPT_STRING(nodes_config, cpus, "cpus", "CPUs to record on, on every node: a comma list, or 'all'"),
        HV_OPT_DOUBLE(nodes_config, duration_s, "duration", 1e-3, 1e7, "recording time in seconds"),
        HV_OPT_DOUBLE_OR(nodes_config, threshold_ns, "threshold-ns", 0, 1e9,
                         "detour threshold in ns (0: the collector's default)"),
        HV_OPT_LONG(nodes_config, max_events, "max-events", 1, 1L << 40, "event buffer per CPU"),
        HV_OPT_STRING_OR(nodes_config, method, "method", "spin or timer (hv_noise_collect --method)"),
        HV_OPT_DOUBLE_OR(nodes_config, interval_ns, "interval-ns", 1000, 1e9,
                         "timer method: time between deadlines in ns"),
        HV_OPT_LONG_OR(nodes_config, rt_prio, "rt-prio", 0, 99,
                       "SCHED_FIFO priority of the collector threads (0: normal scheduler)"),
        HV_OPT_LONG_OR(nodes_config, rounds, "sync-rounds", 1, 1000000,
                       "ping-pongs per rank and clock synchronisation"),
        HV_OPT_DOUBLE_OR(nodes_config, margin_s, "margin", 0.05, 600,
                         "seconds between the agreement on the start (every collector ready) and the start"),
        HV_OPT_STRING_OR(nodes_config, argv, "argv", "the user's command line, stored in the traces"),
    };
    hv_ctx ctx;
    nodes_config cfg = {.interval_ns = 200000, .margin_s = 0.2, .rounds = 100, .method = "spin"};
    hv_ctx_init_config(&ctx, &argc, &argv, "hv_noise_nodes", opts, sizeof opts / sizeof opts[0], &cfg);
    char exe[PATH_MAX];
    collector_path(exe, sizeof exe);
    char *boots = gather_boot_ids(&ctx);
    hv_sync *before = calloc((size_t)ctx.size, sizeof *before), *after = calloc((size_t)ctx.size, sizeof *after);
    HV_ALLOC_CHECK(before);
    HV_ALLOC_CHECK(after);
    sleepy_barrier(&ctx);
    sync_clocks(&ctx, cfg.rounds, before);

    collector_args ca;
    make_collector_args(&ca, exe, &cfg);
    hv_child child = start_collector(exe, ca.argv);
    const double t0 = agree_start(&ctx, &child, before, cfg.margin_s);
    wait_collector(&child);
    fclose(child.from);

    sleepy_barrier(&ctx);
    sync_clocks(&ctx, cfg.rounds, after);
    sleepy_barrier(&ctx); /* rank 0 syncs with the last ranks: the others wait asleep */
    write_sync(&ctx, boots, before, after, t0);
    free(boots);
    free(before);
    free(after);
    hv_ctx_finish(&ctx);
    return 0;
}
